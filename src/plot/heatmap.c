//> 01
/* heatmap.c: attention weights as gnuplot heatmaps; see heatmap.h.
 *
 * Shapes: panel (r, c) of the grid (heatmap_grid.h) is the (Lq, Lk)
 * matrix of weights m[r, c], drawn as Lq x Lk square cells.
 */
#include "plot/heatmap.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>

#include "base/error.h"
#include "plot/gnuplot.h"

/* The picture's geometry in pixels, measured from the top left corner.
 * The fixed parts (margins for tic labels, axis labels, titles and the
 * colour box) are in pixels, so the text keeps its room whatever the grid;
 * the panels get the rest, with square cells. */
#define PANEL_PX 240.0  /* default length of a panel's longer side, */
#define GRID_W_PX 960.0 /* shrunk towards 120 to keep the grid within */
#define GRID_H_PX 720.0 /* about this much */
#define LEFT_PX 80.0    /* y tic labels and the y label */
#define RIGHT_PX 100.0  /* the colour box and its tic labels */
#define BOTTOM_PX 62.0  /* x tic labels and the x label */
#define EDGE_PX 14.0    /* blank above everything */
#define TITLE_PX 30.0   /* the overall title */
#define PTITLE_PX 24.0  /* a row of panel titles */
#define HGAP_PX 16.0    /* between panels side by side */
#define VGAP_PX 18.0    /* between rows of panels, plus their titles */
#define CBGAP_PX 18.0   /* between the grid and the colour box */
#define CBWIDTH_PX 18.0 /* the colour box's width */
#define CBMIN_PX 160.0  /* the colour box's least height */

typedef struct {
    int width, height;   /* the image */
    double cell;         /* a cell's side */
    double left, top;    /* the grid's top left corner */
    double grid_w, grid_h;
    double vgap;
    double cb_top, cb_h; /* the colour box, right of the grid */
    size_t xstep, ystep; /* a tic label every xstep keys, ystep queries */
} geometry;

/* The first of 1, 2, 5, 10, 20, 50 ... steps wide enough for labels of
 * `need` pixels when cells are `cell` pixels. */
static size_t tic_step(double cell, double need)
{
    static const size_t mantissa[3] = {1, 2, 5};
    for (size_t decade = 1;; decade *= 10)
        for (int i = 0; i < 3; i++)
            if ((double)(mantissa[i] * decade) * cell >= need ||
                decade > SIZE_MAX / 100)
                return mantissa[i] * decade;
}

static int layout(const char *who, const heatmap_grid *g, geometry *geo)
{
    int any_title = 0;
    for (size_t p = 0; g->titles && p < g->rows * g->cols; p++)
        any_title |= heatmap_grid_title(g, p / g->cols, p % g->cols) != NULL;
    double top = EDGE_PX + (g->title ? TITLE_PX : 0) +
                 (any_title ? PTITLE_PX : 0);
    double vgap = VGAP_PX + (any_title ? PTITLE_PX : 0);
    double fixed_w = LEFT_PX + RIGHT_PX + (double)(g->cols - 1) * HGAP_PX;
    double fixed_h = top + BOTTOM_PX + (double)(g->rows - 1) * vgap;
    double across = (double)(g->cols * g->lk), down = (double)(g->rows * g->lq);

    if ((g->width && g->width <= fixed_w) || (g->height && g->height <= fixed_h))
        return mha_fail(GSL_EINVAL,
                        "%s: %d x %d pixels leave no room for a %zu x %zu "
                        "grid of (%zu, %zu) panels; the margins alone take "
                        "%.0f x %.0f (0 sizes it automatically)",
                        who, g->width, g->height, g->rows, g->cols, g->lq,
                        g->lk, fixed_w, fixed_h);
    double cell;
    if (g->width && g->height) {
        double cw = (g->width - fixed_w) / across;
        double ch = (g->height - fixed_h) / down;
        cell = cw < ch ? cw : ch;
    } else if (g->width) {
        cell = (g->width - fixed_w) / across;
    } else if (g->height) {
        cell = (g->height - fixed_h) / down;
    } else {
        double side = PANEL_PX;
        side = GRID_W_PX / g->cols < side ? GRID_W_PX / g->cols : side;
        side = GRID_H_PX / g->rows < side ? GRID_H_PX / g->rows : side;
        side = side < PANEL_PX / 2 ? PANEL_PX / 2 : side;
        cell = side / (double)(g->lq > g->lk ? g->lq : g->lk);
    }
    geo->cell = cell;
    geo->vgap = vgap;
    geo->grid_w = cell * across + (double)(g->cols - 1) * HGAP_PX;
    geo->grid_h = cell * down + (double)(g->rows - 1) * vgap;
    geo->cb_h = geo->grid_h > CBMIN_PX ? geo->grid_h : CBMIN_PX;
    double need_w = LEFT_PX + geo->grid_w + RIGHT_PX;
    double need_h = top + geo->cb_h + BOTTOM_PX;
    geo->width = g->width ? g->width : (int)ceil(need_w);
    geo->height = g->height ? g->height : (int)ceil(need_h);
    if (geo->width > GNUPLOT_MAX_PIXELS || geo->height > GNUPLOT_MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: a %zu x %zu grid of (%zu, %zu) panels needs "
                        "%.0f x %.0f pixels, more than %d; give a smaller "
                        "width or height",
                        who, g->rows, g->cols, g->lq, g->lk, need_w, need_h,
                        GNUPLOT_MAX_PIXELS);
    /* a size the caller fixed: centre the grid in what is left over; a
     * grid lower than the colour box: centre it on the box */
    geo->left = LEFT_PX + (g->width ? (g->width - need_w) / 2 : 0);
    geo->cb_top = top + (g->height ? (g->height - need_h) / 2 : 0);
    geo->top = geo->cb_top + (geo->cb_h - geo->grid_h) / 2;
    geo->xstep = tic_step(cell, 8.0 * heatmap_grid_digits(g->lk - 1) + 10);
    geo->ystep = tic_step(cell, 16.0);
    return GSL_SUCCESS;
}

static const char *const palettes[HEATMAP_PALETTE_COUNT][2] = {
    {"white to dark red (matplotlib's 'Reds')",
     "0 '#ffffff', 0.125 '#fee0d2', 0.25 '#fcbba1', 0.375 '#fc9272', "
     "0.5 '#fb6a4a', 0.625 '#ef3b2c', 0.75 '#cb181d', 0.875 '#a50f15', "
     "1 '#67000d'"},
    {"white to dark blue (matplotlib's 'Blues')",
     "0 '#f7fbff', 0.125 '#deebf7', 0.25 '#c6dbef', 0.375 '#9ecae1', "
     "0.5 '#6baed6', 0.625 '#4292c6', 0.75 '#2171b5', 0.875 '#08519c', "
     "1 '#08306b'"},
    {"white to black (matplotlib's 'Greys')",
     "0 '#ffffff', 0.125 '#f0f0f0', 0.25 '#d9d9d9', 0.375 '#bdbdbd', "
     "0.5 '#969696', 0.625 '#737373', 0.75 '#525252', 0.875 '#252525', "
     "1 '#000000'"},
    {"dark purple to yellow (matplotlib's 'viridis')",
     "0 '#440154', 0.125 '#472d7b', 0.25 '#3b528b', 0.375 '#2c728e', "
     "0.5 '#21918c', 0.625 '#28ae80', 0.75 '#5ec962', 0.875 '#addc30', "
     "1 '#fde725'"},
};

/* Screen coordinates run from 0 to 1, bottom to top: pixel offsets from
 * the top left become fractions. */
static double sx(const geometry *geo, double px) { return px / geo->width; }
static double sy(const geometry *geo, double px)
{
    return 1 - px / geo->height;
}

/* "set title 'text'" (quoted for gnuplot), or "unset title" where there is
 * no text: every panel says all of its own settings. */
static void put_setting(FILE *f, const char *name, const char *text)
{
    if (!text) {
        fprintf(f, "unset %s\n", name);
        return;
    }
    fprintf(f, "set %s ", name);
    gnuplot_put_quoted(f, text, "");
    fputc('\n', f);
}

static void write_gp(FILE *f, const heatmap_grid *g, const geometry *geo,
                     const char *name)
{
    gnuplot_put_preamble(f, name, geo->width, geo->height,
                         "Attention weights: a %zu x %zu grid of (%zu, %zu) "
                         "panels from %s.dat,\n"
                         "# drawn on one colour scale",
                         g->rows, g->cols, g->lq, g->lk, name);
    int boxes = g->lq == 1 || g->lk == 1;
    if (boxes)
        fprintf(f,
                "# gnuplot draws an image of 2 x 2 cells or more: a single "
                "query or key\n"
                "# is drawn as boxes, each a hair wider than its cell so "
                "that no seam\n"
                "# shows between neighbours\n"
                "half = %.4f\n"
                "cells = 'boxxyerror fs solid noborder fc palette'\n\n",
                0.5 + (0.6 / geo->cell < 0.25 ? 0.6 / geo->cell : 0.25));
    else
        fputs("# a PNG gets each panel as one bitmap, scaled without "
              "smoothing;\n"
              "# an SVG a rectangle per cell, since SVG viewers smooth "
              "bitmaps\n"
              "cells = fmt eq 'svg' ? 'image pixels' : 'image'\n\n",
              f);

    fprintf(f, "# %s\nset palette defined (%s)\n", palettes[g->palette][0],
            palettes[g->palette][1]);
    if (g->vmin == g->vmax) {
        fputs("# one colour scale for every panel; every weight is ", f);
        gnuplot_put_number(f, g->vmin);
        fputs(", so the scale\n# is widened around it\n", f);
    } else {
        fputs(g->lo == 0 && g->vmin >= 0
                  ? "# one colour scale for every panel: from 0 (white, "
                    "exactly 0) to the\n# largest weight\n"
                  : "# one colour scale for every panel: the smallest and "
                    "the largest weight\n",
              f);
    }
    fputs("set cbrange [", f);
    gnuplot_put_number(f, g->lo);
    fputc(':', f);
    gnuplot_put_number(f, g->hi);
    fputs("]\n", f);
    fprintf(f,
            "# cell (k, q) is the unit square centred on key k, query q; "
            "query 0 on top,\n"
            "# as in the matrix\n"
            "set xrange [-0.5:%zu.5]\n"
            "set yrange [%zu.5:-0.5]\n"
            "set xtics 0, %zu, %zu\n"
            "set ytics 0, %zu, %zu\n"
            "set tics out nomirror scale 0.5\n"
            "set format cb '%%g'\n"
            "unset key\n\n",
            g->lk - 1, g->lq - 1, geo->xstep, g->lk - 1, geo->ystep,
            g->lq - 1);

    /* the grid's edges and gaps as screen fractions */
    fprintf(f, "set multiplot layout %zu,%zu", g->rows, g->cols);
    if (g->title) {
        fputs(" title ", f);
        gnuplot_put_quoted(f, g->title, "");
        fputs(" font ',13'", f);
    }
    fprintf(f, " \\\n    margins screen %.6f, %.6f, %.6f, %.6f \\\n"
               "    spacing screen %.6f, %.6f\n",
            sx(geo, geo->left), sx(geo, geo->left + geo->grid_w),
            sy(geo, geo->top + geo->grid_h), sy(geo, geo->top),
            sx(geo, HGAP_PX), geo->vgap / geo->height);

    /* tic labels and axis labels on the outer panels only (the panels
     * share their axes); every panel says all of its own settings */
    for (size_t r = 0; r < g->rows; r++)
        for (size_t c = 0; c < g->cols; c++) {
            size_t index = r * g->cols + c;
            fprintf(f, "\n# panel (%zu, %zu)\n", r, c);
            put_setting(f, "title", heatmap_grid_title(g, r, c));
            int bottom = r + 1 == g->rows, left = c == 0;
            fprintf(f, "set format x '%s'; ", bottom ? "%g" : "");
            put_setting(f, "xlabel", bottom && *g->xlabel ? g->xlabel : NULL);
            fprintf(f, "set format y '%s'; ", left ? "%g" : "");
            put_setting(f, "ylabel", left && *g->ylabel ? g->ylabel : NULL);
            if (index == 0 && g->rows * g->cols > 1)
                fputs("unset colorbox\n", f);
            if (index + 1 == g->rows * g->cols) {
                fputs("# the last panel draws the one colour box, right of "
                      "the grid\n",
                      f);
                double x = geo->left + geo->grid_w + CBGAP_PX;
                fprintf(f,
                        "set colorbox user origin screen %.6f, %.6f size "
                        "screen %.6f, %.6f\n",
                        sx(geo, x), sy(geo, geo->cb_top + geo->cb_h),
                        CBWIDTH_PX / geo->width, geo->cb_h / geo->height);
            }
            fprintf(f, "plot data index %zu matrix %swith @cells\n", index,
                    boxes ? "using 1:2:(half):(half):3 " : "");
        }
    fputs("\nunset multiplot\nunset output\n", f);
}

typedef struct {
    const heatmap_grid *g;
    const geometry *geo;
} picture;

static void write_both(FILE *dat, FILE *gp, const char *name, const void *p)
{
    const picture *pic = p;
    heatmap_grid_write_dat(dat, pic->g, name);
    write_gp(gp, pic->g, pic->geo, name);
}

/* Write base.dat and base.gp for grid g, both or neither. */
static int write_files(const char *who, const heatmap_grid *g, const char *base)
{
    int status = gnuplot_check_base(who, base, "plots/weights", 0);
    if (status)
        return status;
    geometry geo = {0};
    status = layout(who, g, &geo);
    if (status)
        return status;
    picture pic = {g, &geo};
    return gnuplot_write(who, base, write_both, &pic);
}

int heatmap_write(const tensor *m, const heatmap_options *opt,
                  const char *base)
{
    heatmap_grid g;
    int status = heatmap_grid_make("heatmap_write", m, opt, &g);
    if (status)
        return status;
    return write_files("heatmap_write", &g, base);
}

/* --- rendering ----------------------------------------------------------- */

int heatmap_gnuplot_available(void) { return gnuplot_available(); }

static int render(const char *who, const char *base, int formats)
{
    int status = gnuplot_render(who, base, formats);
    /* HEATMAP_NO_GNUPLOT's line, as heatmap.h gives it */
    if (status == GNUPLOT_MISSING)
        return mha_fail_in(HEATMAP_NO_GNUPLOT, "heatmap");
    return status;
}

int heatmap_render(const tensor *m, const heatmap_options *opt,
                   const char *base, int formats)
{
    const char *who = "heatmap_render";
    int status = gnuplot_check_formats(who, formats);
    if (status)
        return status;
    heatmap_grid g;
    status = heatmap_grid_make(who, m, opt, &g);
    if (!status)
        status = write_files(who, &g, base);
    if (status)
        return status;
    return render(who, base, formats);
}

int heatmap_render_script(const char *base, int formats)
{
    const char *who = "heatmap_render_script";
    int status = gnuplot_check_formats(who, formats);
    if (status)
        return status;
    if (!base || !*base)
        return mha_fail(GSL_EINVAL, "%s: the script path is %s", who,
                        base ? "empty" : "NULL");
    return render(who, base, formats);
}
//<
