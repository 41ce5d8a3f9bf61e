/* heatmap.c: attention weights as gnuplot heatmaps and terminal shades;
 * see heatmap.h.
 *
 * Shapes: the weights m are (rows, cols, Lq, Lk) after the missing leading
 * dimensions are taken as 1; panel (r, c) is the (Lq, Lk) matrix m[r, c].
 */
#include "heatmap.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "gnuplot.h"
#include "trace.h"

/* --- the weights as a grid of panels ---------------------------------- */

/* Everything the writers need, checked once.  Weight (r, c, q, k) is
 * data[r * st[0] + c * st[1] + q * st[2] + k * st[3]]; a leading dimension
 * m does not have gets size 1 and stride 0. */
typedef struct {
    const double *data;
    size_t rows, cols, lq, lk;
    size_t st[4];      /* strides of (rows, cols, Lq, Lk), in elements */
    double vmin, vmax; /* the smallest and largest weight of all panels */
    double lo, hi;     /* the shared colour scale: [vmin, vmax], widened
                          around v when every weight is v */
    const char *xlabel, *ylabel, *title;
    const char *const *titles; /* rows * cols entries, or NULL */
    int width, height;
    heatmap_palette palette;
    int term_columns;
    char shape[TRACE_SHAPE_MAX]; /* m's shape as a tuple, for messages */
} grid;

static double weight(const grid *g, size_t r, size_t c, size_t q, size_t k)
{
    return g->data[r * g->st[0] + c * g->st[1] + q * g->st[2] + k * g->st[3]];
}

static const char *panel_title(const grid *g, size_t r, size_t c)
{
    const char *t = g->titles ? g->titles[r * g->cols + c] : NULL;
    return t && *t ? t : NULL;
}

static int make_grid(const char *who, const tensor *m,
                     const heatmap_options *opt, grid *g)
{
    static const heatmap_options defaults = {0};
    if (!opt)
        opt = &defaults;
    memset(g, 0, sizeof *g);
    if (!m)
        return mha_fail(GSL_EINVAL, "%s: the weights tensor is NULL", who);
    if (m->ndim > TENSOR_MAX_DIMS)
        return mha_fail(GSL_EINVAL,
                        "%s: weights are %zu-D; expected (Lq, Lk), "
                        "(cols, Lq, Lk) or (rows, cols, Lq, Lk)",
                        who, m->ndim);
    tensor_shape_str(m, g->shape, sizeof g->shape);
    if (m->ndim < 2)
        return mha_fail(GSL_EINVAL,
                        "%s: weights of shape %s are %zu-D; expected "
                        "(Lq, Lk), (cols, Lq, Lk) or (rows, cols, Lq, Lk)",
                        who, g->shape, m->ndim);
    for (size_t d = 0; d < m->ndim; d++)
        if (m->shape[d] == 0)
            return mha_fail(GSL_EINVAL,
                            "%s: weights of shape %s have size 0 in "
                            "dimension %zu",
                            who, g->shape, d);

    /* (Lq, Lk) -> (1, 1, Lq, Lk); (cols, Lq, Lk) -> (1, cols, Lq, Lk) */
    size_t lead = 4 - m->ndim;
    size_t shape4[4] = {1, 1, 1, 1};
    for (size_t d = 0; d < m->ndim; d++) {
        shape4[lead + d] = m->shape[d];
        g->st[lead + d] = m->strides[d];
    }
    g->data = m->data;
    g->rows = shape4[0];
    g->cols = shape4[1];
    g->lq = shape4[2];
    g->lk = shape4[3];
    size_t panels = g->rows * g->cols;

    if ((unsigned)opt->palette >= HEATMAP_PALETTE_COUNT)
        return mha_fail(GSL_EINVAL, "%s: palette %d is not one of 0 to %d",
                        who, (int)opt->palette, HEATMAP_PALETTE_COUNT - 1);
    if (opt->width < 0 || opt->width > GNUPLOT_MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: width %d is out of range; use 0 (automatic) or "
                        "1 to %d pixels",
                        who, opt->width, GNUPLOT_MAX_PIXELS);
    if (opt->height < 0 || opt->height > GNUPLOT_MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: height %d is out of range; use 0 (automatic) or "
                        "1 to %d pixels",
                        who, opt->height, GNUPLOT_MAX_PIXELS);
    if (opt->term_columns < 0)
        return mha_fail(GSL_EINVAL,
                        "%s: term_columns %d is negative; use 0 (80 columns) "
                        "or the terminal's width",
                        who, opt->term_columns);
    if (opt->titles && opt->ntitles != panels)
        return mha_fail(GSL_EBADLEN,
                        "%s: %zu titles for %zu panels (a %zu x %zu grid, "
                        "weights of shape %s)",
                        who, opt->ntitles, panels, g->rows, g->cols, g->shape);
    if (!opt->titles && opt->ntitles != 0)
        return mha_fail(GSL_EINVAL, "%s: ntitles is %zu but titles is NULL",
                        who, opt->ntitles);

    g->xlabel = opt->xlabel ? opt->xlabel : "Keys";
    g->ylabel = opt->ylabel ? opt->ylabel : "Queries";
    g->title = opt->title && *opt->title ? opt->title : NULL;
    g->titles = opt->titles;
    g->width = opt->width;
    g->height = opt->height;
    g->palette = opt->palette;
    g->term_columns = opt->term_columns;
    /* a label goes into one line of a script, a data-file comment and a
     * terminal row: a control character would break each of them */
    int status = gnuplot_check_text(who, "the x label", g->xlabel, 0);
    if (!status)
        status = gnuplot_check_text(who, "the y label", g->ylabel, 0);
    if (!status)
        status = gnuplot_check_text(who, "the title", g->title, 0);
    for (size_t p = 0; !status && g->titles && p < panels; p++) {
        char what[96];
        snprintf(what, sizeof what, "the title of panel (%zu, %zu)",
                 p / g->cols, p % g->cols);
        status = gnuplot_check_text(who, what, g->titles[p], 0);
    }
    if (status)
        return status;

    /* the shared scale, and no NaN or infinity anywhere: either would
     * leave a cell without a colour */
    g->vmin = INFINITY;
    g->vmax = -INFINITY;
    for (size_t r = 0; r < g->rows; r++)
        for (size_t c = 0; c < g->cols; c++)
            for (size_t q = 0; q < g->lq; q++)
                for (size_t k = 0; k < g->lk; k++) {
                    double v = weight(g, r, c, q, k);
                    if (isfinite(v)) {
                        g->vmin = v < g->vmin ? v : g->vmin;
                        g->vmax = v > g->vmax ? v : g->vmax;
                        continue;
                    }
                    size_t idx4[4] = {r, c, q, k};
                    char idx[TRACE_SHAPE_MAX];
                    shape_str(idx, sizeof idx, m->ndim, idx4 + lead);
                    idx[strlen(idx) - 1] = '\0'; /* "(0, 1" */
                    return mha_fail(GSL_EINVAL,
                                    "%s: weights[%s] is %s (panel (%zu, %zu), "
                                    "query %zu, key %zu) in weights of shape "
                                    "%s; weights must be finite",
                                    who, idx + 1,
                                    isnan(v) ? "nan" : v > 0 ? "inf" : "-inf",
                                    r, c, q, k, g->shape);
                }
    g->lo = g->vmin;
    g->hi = g->vmax;
    if (g->lo == g->hi) {
        double d = g->lo != 0 ? fabs(g->lo) : 1;
        g->lo -= d;
        g->hi += d;
    }
    return GSL_SUCCESS;
}

/* --- base.dat ----------------------------------------------------------- */

static void write_dat(FILE *f, const grid *g, const char *gp_name)
{
    fprintf(f,
            "# Attention weights, drawn by %s.gp: a %zu x %zu grid of "
            "panels, each\n"
            "# %zu queries x %zu keys (weights of shape %s).\n"
            "# One block per panel in row-major panel order, blocks "
            "separated by two blank\n"
            "# lines (gnuplot's index 0, 1, ...); line q of a block holds "
            "query q's weights\n"
            "# over keys 0 to %zu.  Each number is the shortest of %%.15g, "
            "%%.16g and %%.17g\n"
            "# that reads back as the same double.\n",
            gp_name, g->rows, g->cols, g->lq, g->lk, g->shape, g->lk - 1);
    for (size_t r = 0; r < g->rows; r++)
        for (size_t c = 0; c < g->cols; c++) {
            size_t index = r * g->cols + c;
            if (index)
                fputs("\n\n", f);
            fprintf(f, "# panel (%zu, %zu), index %zu", r, c, index);
            const char *t = panel_title(g, r, c);
            if (t)
                fprintf(f, ": %s", t);
            fputc('\n', f);
            for (size_t q = 0; q < g->lq; q++) {
                for (size_t k = 0; k < g->lk; k++) {
                    if (k)
                        fputc(' ', f);
                    gnuplot_put_number(f, weight(g, r, c, q, k));
                }
                fputc('\n', f);
            }
        }
}

/* --- base.gp ------------------------------------------------------------ */

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

static int digits(size_t n)
{
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

static int layout(const char *who, const grid *g, geometry *geo)
{
    int any_title = 0;
    for (size_t p = 0; g->titles && p < g->rows * g->cols; p++)
        any_title |= panel_title(g, p / g->cols, p % g->cols) != NULL;
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
    geo->xstep = tic_step(cell, 8.0 * digits(g->lk - 1) + 10);
    geo->ystep = tic_step(cell, 16.0);
    return GSL_SUCCESS;
}

static const char *const palettes[HEATMAP_PALETTE_COUNT][2] = {
    {"white to dark red (matplotlib's 'Reds')",
     "0 '#fff5f0', 0.125 '#fee0d2', 0.25 '#fcbba1', 0.375 '#fc9272', "
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

static void write_gp(FILE *f, const grid *g, const geometry *geo,
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
        fputs("# one colour scale for every panel: the smallest and the "
              "largest weight\n",
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
            const char *t = panel_title(g, r, c);
            if (t) {
                fputs("set title ", f);
                gnuplot_put_quoted(f, t, "");
                fputc('\n', f);
            } else {
                fputs("unset title\n", f);
            }
            int bottom = r + 1 == g->rows, left = c == 0;
            fprintf(f, "set format x '%s'; ", bottom ? "%g" : "");
            if (bottom && *g->xlabel) {
                fputs("set xlabel ", f);
                gnuplot_put_quoted(f, g->xlabel, "");
                fputc('\n', f);
            } else {
                fputs("unset xlabel\n", f);
            }
            fprintf(f, "set format y '%s'; ", left ? "%g" : "");
            if (left && *g->ylabel) {
                fputs("set ylabel ", f);
                gnuplot_put_quoted(f, g->ylabel, "");
                fputc('\n', f);
            } else {
                fputs("unset ylabel\n", f);
            }
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
    const grid *g;
    const geometry *geo;
} picture;

static void write_both(FILE *dat, FILE *gp, const char *name, const void *p)
{
    const picture *pic = p;
    write_dat(dat, pic->g, name);
    write_gp(gp, pic->g, pic->geo, name);
}

/* Write base.dat and base.gp for grid g, both or neither. */
static int write_files(const char *who, const grid *g, const char *base)
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
    grid g;
    int status = make_grid("heatmap_write", m, opt, &g);
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
    grid g;
    status = make_grid(who, m, opt, &g);
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

/* --- the terminal view -------------------------------------------------- */

/* Shades, two columns per cell.  Blank is kept for the bottom of the scale
 * itself (for attention weights: exactly 0, a masked key), so a small but
 * real weight never looks masked; the four shades split the rest of the
 * scale into quarters, (lo, lo + q], ..., (hi - q, hi]. */
static const char *const shades[5] = {"  ", "░░", "▒▒", "▓▓", "██"};

static int shade(const grid *g, double v)
{
    if (v <= g->lo)
        return 0;
    int level = (int)ceil(4 * (v - g->lo) / (g->hi - g->lo));
    return level < 1 ? 1 : level > 4 ? 4 : level;
}

/* Columns a UTF-8 string takes: one per code point (no wide characters
 * in labels, as a terminal would draw them). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; s && *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* A line being assembled: bytes plus the column the cursor is at. */
typedef struct {
    char *buf;
    size_t len, col;
} line;

static void put_str(line *l, const char *s)
{
    size_t n = strlen(s);
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    l->col += text_width(s);
}

/* Pad with blanks up to column col. */
static void pad_to(line *l, size_t col)
{
    while (l->col < col) {
        l->buf[l->len++] = ' ';
        l->col++;
    }
}

/* Write the line without trailing blanks and start the next one. */
static void flush_line(FILE *f, line *l)
{
    while (l->len > 0 && l->buf[l->len - 1] == ' ')
        l->len--;
    fwrite(l->buf, 1, l->len, f);
    fputc('\n', f);
    l->len = 0;
    l->col = 0;
}

/* s centred over a box of `width` columns starting at column `at`. */
static void put_centred(line *l, size_t at, size_t width, const char *s)
{
    size_t w = text_width(s);
    pad_to(l, at + (w < width ? (width - w) / 2 : 0));
    put_str(l, s);
}

static void put_rule(line *l, const char *left, size_t n, const char *right)
{
    put_str(l, left);
    for (size_t i = 0; i < n; i++)
        put_str(l, "─");
    put_str(l, right);
}

static void put_scale_number(line *l, double v)
{
    char num[32];
    snprintf(num, sizeof num, "%.3g", v == 0 ? 0 : v);
    put_str(l, num);
}

#define TERMINAL_COLUMNS 80 /* the default width to wrap panels at */

/* The terminal's columns: a gutter with the y label and the query indices,
 * then one box of 2 Lk cells per panel, box edges `stride` columns apart. */
typedef struct {
    size_t gutter, box_w, stride, per_band;
    size_t key_step; /* a key index under every key_step-th cell */
} columns;

/* One band: panels (r, c0) to (r, c1 - 1) side by side. */
static void put_band(FILE *f, line *l, const grid *g, const columns *cl,
                     size_t r, size_t c0, size_t c1)
{
    int titled = 0;
    for (size_t c = c0; c < c1; c++)
        titled |= panel_title(g, r, c) != NULL;
    if (titled) {
        for (size_t c = c0; c < c1; c++) {
            const char *t = panel_title(g, r, c);
            if (t)
                put_centred(l, cl->gutter + (c - c0) * cl->stride, cl->box_w,
                            t);
        }
        flush_line(f, l);
    }
    for (size_t c = c0; c < c1; c++) {
        pad_to(l, cl->gutter + (c - c0) * cl->stride);
        put_rule(l, "┌", 2 * g->lk, "┐");
    }
    flush_line(f, l);
    for (size_t q = 0; q < g->lq; q++) {
        char num[24];
        if (q == 0)
            put_str(l, g->ylabel);
        snprintf(num, sizeof num, "%zu", q);
        pad_to(l, cl->gutter - 1 - strlen(num)); /* right-aligned */
        put_str(l, num);
        for (size_t c = c0; c < c1; c++) {
            pad_to(l, cl->gutter + (c - c0) * cl->stride);
            put_str(l, "│");
            for (size_t k = 0; k < g->lk; k++)
                put_str(l, shades[shade(g, weight(g, r, c, q, k))]);
            put_str(l, "│");
        }
        flush_line(f, l);
    }
    for (size_t c = c0; c < c1; c++) {
        pad_to(l, cl->gutter + (c - c0) * cl->stride);
        put_rule(l, "└", 2 * g->lk, "┘");
    }
    flush_line(f, l);
    if (r + 1 < g->rows)
        return;
    /* under the bottom row only, as in the picture: key indices under each
     * cell's left half, then the x label */
    for (size_t c = c0; c < c1; c++)
        for (size_t k = 0; k < g->lk; k += cl->key_step) {
            char num[24];
            snprintf(num, sizeof num, "%zu", k);
            pad_to(l, cl->gutter + (c - c0) * cl->stride + 1 + 2 * k);
            put_str(l, num);
        }
    flush_line(f, l);
    if (*g->xlabel) {
        for (size_t c = c0; c < c1; c++)
            put_centred(l, cl->gutter + (c - c0) * cl->stride, cl->box_w,
                        g->xlabel);
        flush_line(f, l);
    }
}

/* What each shade stands for on the shared scale, wrapped to fit. */
static void put_legend(FILE *f, line *l, const grid *g, size_t columns)
{
    if (g->vmin == g->vmax) {
        put_str(l, "every weight is ");
        put_scale_number(l, g->vmin);
        put_str(l, ", drawn as [");
        put_str(l, shades[2]);
        put_str(l, "]");
        flush_line(f, l);
        return;
    }
    put_str(l, "shades, one scale for all panels:");
    for (int s = 0; s < 5; s++) {
        char entry[96];
        if (s == 0)
            snprintf(entry, sizeof entry, "[%s] %.3g", shades[0], g->lo);
        else
            snprintf(entry, sizeof entry, "[%s] %s%.3g to %.3g", shades[s],
                     s == 1 ? "above " : "", g->lo + (g->hi - g->lo) * (s - 1) / 4,
                     s == 4 ? g->hi : g->lo + (g->hi - g->lo) * s / 4);
        if (l->col + 2 + text_width(entry) > columns) {
            flush_line(f, l);
            put_str(l, " ");
        }
        put_str(l, "  ");
        put_str(l, entry);
    }
    flush_line(f, l);
}

int heatmap_terminal(FILE *f, const tensor *m, const heatmap_options *opt)
{
    const char *who = "heatmap_terminal";
    grid g;
    if (!f)
        return mha_fail(GSL_EINVAL, "%s: the output stream is NULL", who);
    int status = make_grid(who, m, opt, &g);
    if (status)
        return status;

    columns cl;
    size_t ylab_w = text_width(g.ylabel);
    cl.gutter = (ylab_w ? ylab_w + 1 : 0) + (size_t)digits(g.lq - 1) + 1;
    cl.box_w = 2 * g.lk + 2;
    cl.key_step = g.lk <= 10 ? 1 : 5; /* 5 steps leave 10 columns a label */
    size_t last_key = (g.lk - 1) / cl.key_step * cl.key_step;
    size_t col_w = cl.box_w;
    size_t keys_w = 1 + 2 * last_key + (size_t)digits(last_key);
    col_w = keys_w > col_w ? keys_w : col_w;
    col_w = text_width(g.xlabel) > col_w ? text_width(g.xlabel) : col_w;
    /* text bytes need not be columns (UTF-8), so count both */
    size_t text_bytes = strlen(g.ylabel) + g.cols * strlen(g.xlabel) +
                        (g.title ? strlen(g.title) : 0);
    for (size_t p = 0; p < g.rows * g.cols; p++) {
        const char *t = panel_title(&g, p / g.cols, p % g.cols);
        col_w = t && text_width(t) > col_w ? text_width(t) : col_w;
        text_bytes += t ? strlen(t) : 0;
    }
    const size_t gap = 2;
    size_t term = g.term_columns ? (size_t)g.term_columns : TERMINAL_COLUMNS;
    cl.stride = col_w + gap;
    cl.per_band = 1;
    while (cl.per_band < g.cols &&
           cl.gutter + (cl.per_band + 1) * cl.stride - gap <= term)
        cl.per_band++;

    /* the widest line: a band, the title, or the legend; up to 4 bytes of
     * UTF-8 per column, plus the labels' own bytes */
    size_t width = cl.gutter + g.cols * cl.stride + text_width(g.title) +
                   term + 128;
    size_t cap = 4 * width + text_bytes + 16;
    line l = {mha_malloc(cap, 1, who), 0, 0};
    if (!l.buf)
        return GSL_ENOMEM;

    if (g.title) {
        pad_to(&l, cl.gutter);
        put_str(&l, g.title);
        flush_line(f, &l);
    }
    for (size_t r = 0; r < g.rows; r++)
        for (size_t c0 = 0; c0 < g.cols; c0 += cl.per_band) {
            size_t c1 = c0 + cl.per_band < g.cols ? c0 + cl.per_band : g.cols;
            put_band(f, &l, &g, &cl, r, c0, c1);
        }
    put_legend(f, &l, &g, term);
    free(l.buf);
    if (fflush(f) != 0 || ferror(f))
        return mha_fail(GSL_EFAILED, "%s: cannot write the heatmap: %s", who,
                        strerror(errno));
    return GSL_SUCCESS;
}
