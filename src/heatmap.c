/* heatmap.c: attention weights as gnuplot heatmaps and terminal shades;
 * see heatmap.h.
 *
 * Shapes: the weights m are (rows, cols, Lq, Lk) after the missing leading
 * dimensions are taken as 1; panel (r, c) is the (Lq, Lk) matrix m[r, c].
 */
#define _GNU_SOURCE /* pipe2, O_CLOEXEC */
#include "heatmap.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <spawn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "trace.h"

extern char **environ;

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

/* A label goes into one line of a script, a data-file comment and a
 * terminal row: a control character (a newline above all) would break
 * each of them. */
static int check_text(const char *who, const char *what, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; s && *p; p++)
        if (*p < 0x20 || *p == 0x7f)
            return mha_fail(GSL_EINVAL,
                            "%s: %s contains control character 0x%02x; "
                            "labels and titles are single lines",
                            who, what, *p);
    return GSL_SUCCESS;
}

#define MAX_PIXELS 16384

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
    if (opt->width < 0 || opt->width > MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: width %d is out of range; use 0 (automatic) or "
                        "1 to %d pixels",
                        who, opt->width, MAX_PIXELS);
    if (opt->height < 0 || opt->height > MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: height %d is out of range; use 0 (automatic) or "
                        "1 to %d pixels",
                        who, opt->height, MAX_PIXELS);
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
    int status = check_text(who, "the x label", g->xlabel);
    if (!status)
        status = check_text(who, "the y label", g->ylabel);
    if (!status)
        status = check_text(who, "the title", g->title);
    for (size_t p = 0; !status && g->titles && p < panels; p++) {
        char what[96];
        snprintf(what, sizeof what, "the title of panel (%zu, %zu)",
                 p / g->cols, p % g->cols);
        status = check_text(who, what, g->titles[p]);
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

/* --- numbers and strings for gnuplot ------------------------------------ */

/* The shortest of %.15g, %.16g and %.17g that reads back as v: exact (the
 * .dat can be read back as the very weights) yet 0.1 stays "0.1". */
static void put_number(FILE *f, double v)
{
    char buf[32];
    if (v == 0)
        v = 0; /* no "-0" */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

/* s followed by suffix as a gnuplot single-quoted string: inside one, ''
 * is a quote and nothing else is special (no backslash escapes, no
 * `command` substitution), so a title or a path cannot turn into a
 * command. */
static void put_quoted_chars(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\'')
            fputc('\'', f);
        fputc(*s, f);
    }
}

static void put_quoted(FILE *f, const char *s, const char *suffix)
{
    fputc('\'', f);
    put_quoted_chars(f, s);
    put_quoted_chars(f, suffix);
    fputc('\'', f);
}

/* The file name part of a path: "plots/ch04" -> "ch04". */
static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* --- writing a file whole or not at all --------------------------------- */

/* An output file in the making: written under tmp, a name beside path, and
 * renamed to path only once complete, so a failure at any point leaves no
 * half-written file where a reader would look. */
typedef struct {
    char *path; /* base + ext */
    char *tmp;  /* path + ".tmp.<pid>.<n>" */
    FILE *f;
} pending;

static char *concat(const char *who, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = mha_malloc(na + nb + 1, 1, who);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

/* Create an empty temporary beside path (exclusively, so two programs never
 * write the same one) and fill p; with want_stream, open it for writing. */
static int pending_open(const char *who, pending *p, const char *base,
                        const char *ext, int want_stream)
{
    memset(p, 0, sizeof *p);
    p->path = concat(who, base, ext);
    if (!p->path)
        return GSL_ENOMEM;
    size_t n = strlen(p->path) + 48;
    p->tmp = mha_malloc(n, 1, who);
    if (!p->tmp) {
        free(p->path);
        p->path = NULL;
        return GSL_ENOMEM;
    }
    int fd = -1;
    for (int attempt = 0; fd < 0 && attempt < 100; attempt++) {
        snprintf(p->tmp, n, "%s.tmp.%ld.%d", p->path, (long)getpid(), attempt);
        fd = open(p->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        int e = errno;
        int status = mha_fail(GSL_EFAILED, "%s: cannot create %s: %s", who,
                              p->path, strerror(e));
        free(p->path);
        free(p->tmp);
        memset(p, 0, sizeof *p);
        return status;
    }
    if (!want_stream) {
        close(fd);
        return GSL_SUCCESS;
    }
    p->f = fdopen(fd, "w");
    if (!p->f) {
        int e = errno;
        close(fd);
        unlink(p->tmp);
        int status = mha_fail(GSL_ENOMEM, "%s: cannot open a stream on %s: %s",
                              who, p->tmp, strerror(e));
        free(p->path);
        free(p->tmp);
        memset(p, 0, sizeof *p);
        return status;
    }
    return GSL_SUCCESS;
}

/* Close the stream, checking that every byte reached the file. */
static int pending_close(const char *who, pending *p)
{
    if (!p->f)
        return GSL_SUCCESS;
    int bad = ferror(p->f);
    int e = errno;
    if (fclose(p->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    p->f = NULL;
    if (bad)
        return mha_fail(GSL_EFAILED, "%s: cannot write %s: %s", who, p->path,
                        strerror(e));
    return GSL_SUCCESS;
}

static int pending_commit(const char *who, pending *p)
{
    int status = pending_close(who, p);
    if (status)
        return status;
    if (rename(p->tmp, p->path) != 0)
        return mha_fail(GSL_EFAILED, "%s: cannot rename %s to %s: %s", who,
                        p->tmp, p->path, strerror(errno));
    free(p->tmp);
    p->tmp = NULL;
    return GSL_SUCCESS;
}

/* Throw away whatever is not yet committed and free p. */
static void pending_discard(pending *p)
{
    if (p->f)
        fclose(p->f);
    if (p->tmp)
        unlink(p->tmp);
    free(p->tmp);
    free(p->path);
    memset(p, 0, sizeof *p);
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
                    put_number(f, weight(g, r, c, q, k));
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
    if (geo->width > MAX_PIXELS || geo->height > MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: a %zu x %zu grid of (%zu, %zu) panels needs "
                        "%.0f x %.0f pixels, more than %d; give a smaller "
                        "width or height",
                        who, g->rows, g->cols, g->lq, g->lk, need_w, need_h,
                        MAX_PIXELS);
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
    fprintf(f,
            "# Attention weights: a %zu x %zu grid of (%zu, %zu) panels "
            "from %s.dat,\n"
            "# drawn on one colour scale.  Render beside this script with\n"
            "#     gnuplot -e \"fmt='png'\" %s.gp    (fmt: 'png' or 'svg')\n",
            g->rows, g->cols, g->lq, g->lk, name, name);
    fputs("if (!exists(\"fmt\")) fmt = 'png'\n", f);
    fputs("# the data and the image live beside this script, wherever "
          "gnuplot runs:\n"
          "# ARG0 is the script's path as gnuplot was given it\n"
          "here = ''\n"
          "do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') "
          "{ here = ARG0[1:i] } }\n",
          f);
    fputs("data = here . ", f);
    put_quoted(f, name, ".dat");
    fputs("\nif (!exists(\"out\")) out = here . ", f);
    put_quoted(f, name, ".");
    fputs(" . fmt\n", f);
    fprintf(f,
            "if (fmt eq 'svg') {\n"
            "    set terminal svg size %d,%d font 'sans,11' noenhanced "
            "background '#ffffff'\n"
            "} else { if (fmt eq 'png') {\n"
            "    set terminal pngcairo size %d,%d font 'sans,11' noenhanced "
            "background '#ffffff'\n"
            "} else {\n"
            "    exit error sprintf(\"fmt must be 'png' or 'svg', not '%%s'\", "
            "fmt)\n"
            "} }\n"
            "set output out\n",
            geo->width, geo->height, geo->width, geo->height);
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
        put_number(f, g->vmin);
        fputs(", so the scale\n# is widened around it\n", f);
    } else {
        fputs("# one colour scale for every panel: the smallest and the "
              "largest weight\n",
              f);
    }
    fputs("set cbrange [", f);
    put_number(f, g->lo);
    fputc(':', f);
    put_number(f, g->hi);
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
        put_quoted(f, g->title, "");
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
                put_quoted(f, t, "");
                fputc('\n', f);
            } else {
                fputs("unset title\n", f);
            }
            int bottom = r + 1 == g->rows, left = c == 0;
            fprintf(f, "set format x '%s'; ", bottom ? "%g" : "");
            if (bottom && *g->xlabel) {
                fputs("set xlabel ", f);
                put_quoted(f, g->xlabel, "");
                fputc('\n', f);
            } else {
                fputs("unset xlabel\n", f);
            }
            fprintf(f, "set format y '%s'; ", left ? "%g" : "");
            if (left && *g->ylabel) {
                fputs("set ylabel ", f);
                put_quoted(f, g->ylabel, "");
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

/* Write base.dat and base.gp for grid g, both or neither. */
static int write_files(const char *who, const grid *g, const char *base)
{
    if (!base || !*base)
        return mha_fail(GSL_EINVAL, "%s: the output path is %s", who,
                        base ? "empty" : "NULL");
    const char *name = base_name(base);
    if (!*name)
        return mha_fail(GSL_EINVAL,
                        "%s: output path %s ends in '/'; give a file name "
                        "without extension, e.g. plots/weights",
                        who, base);
    int status = check_text(who, "the output path", base);
    if (status)
        return status;
    geometry geo = {0};
    status = layout(who, g, &geo);
    if (status)
        return status;

    pending dat, gp;
    status = pending_open(who, &dat, base, ".dat", 1);
    if (status)
        return status;
    status = pending_open(who, &gp, base, ".gp", 1);
    if (status) {
        pending_discard(&dat);
        return status;
    }
    write_dat(dat.f, g, name);
    write_gp(gp.f, g, &geo, name);
    status = pending_close(who, &dat);
    if (!status)
        status = pending_close(who, &gp);
    if (!status)
        status = pending_commit(who, &dat);
    if (!status) {
        status = pending_commit(who, &gp);
        if (status)
            unlink(dat.path); /* both or neither */
    }
    pending_discard(&dat);
    pending_discard(&gp);
    return status;
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

/* --- running gnuplot ---------------------------------------------------- */

static const char *gnuplot_program(void)
{
    const char *p = getenv("MHA_GNUPLOT");
    return p && *p ? p : "gnuplot";
}

static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* The lookup posix_spawnp and execvp make: a name with a '/' is a path,
 * any other name is searched for along PATH. */
static int program_exists(const char *prog)
{
    if (strchr(prog, '/'))
        return is_executable(prog);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        /* an empty PATH entry means the current directory */
        int n = len ? snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, prog)
                    : snprintf(buf, sizeof buf, "%s", prog);
        if (n > 0 && (size_t)n < sizeof buf && is_executable(buf))
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

int heatmap_gnuplot_available(void)
{
    return program_exists(gnuplot_program());
}

/* The last non-blank line of text, trimmed, in place. */
static const char *last_line(char *text)
{
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' ||
                     text[n - 1] == ' '))
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : text;
}

/* Run `prog -d -e "fmt='png'; out='<out>'" <script>` without a shell,
 * with its stdin from /dev/null and its stdout and stderr into a pipe
 * whose last kilobyte lands in errtail.  *spawn_err is the errno of a
 * start that failed (ENOENT: no such program), else 0 and *wstatus is the
 * child's wait status (-1 if it was lost).  Returns GSL_ENOMEM when the
 * arguments cannot be built, else GSL_SUCCESS. */
static int spawn_gnuplot(const char *who, const char *prog,
                         const char *script, const char *fmt,
                         const char *out, int *spawn_err, int *wstatus,
                         char *errtail, size_t tailn)
{
    errtail[0] = '\0';
    *spawn_err = 0;
    *wstatus = -1;
    /* the -e argument, out quoted for gnuplot ('' for a quote) */
    size_t n = 2 * strlen(out) + 32;
    char *setvars = mha_malloc(n, 1, who);
    if (!setvars)
        return GSL_ENOMEM;
    size_t used = (size_t)snprintf(setvars, n, "fmt='%s'; out='", fmt);
    for (const char *s = out; *s; s++) {
        if (*s == '\'')
            setvars[used++] = '\'';
        setvars[used++] = *s;
    }
    setvars[used++] = '\'';
    setvars[used] = '\0';
    /* a script path starting with '-' would read as an option */
    char *script_arg = concat(who, script[0] == '-' ? "./" : "", script);
    if (!script_arg) {
        free(setvars);
        return GSL_ENOMEM;
    }
    char *argv[] = {(char *)prog, "-d", "-e", setvars, script_arg, NULL};

    int fds[2];
    /* close-on-exec: gnuplot inherits only the dup2'ed copies, and no
     * other child this program starts holds the pipe open */
    int e = pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno;
    pid_t pid = -1;
    if (!e) {
        posix_spawn_file_actions_t fa;
        e = posix_spawn_file_actions_init(&fa);
        if (!e) {
            e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null",
                                                 O_RDONLY, 0);
            if (!e)
                e = posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
            if (!e)
                e = posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
            /* and nothing else: the caller's own descriptors, opened
             * without close-on-exec, stay out of gnuplot's hands */
            if (!e)
                e = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
            if (!e)
                e = posix_spawnp(&pid, prog, &fa, NULL, argv, environ);
            posix_spawn_file_actions_destroy(&fa);
        }
        close(fds[1]); /* else the read below never sees end-of-file */
        if (e)
            close(fds[0]);
    }
    free(setvars);
    free(script_arg);
    if (e) {
        *spawn_err = e;
        return GSL_SUCCESS;
    }

    /* keep the tail: gnuplot's error comes last */
    size_t have = 0;
    for (;;) {
        char chunk[512];
        ssize_t got = read(fds[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            if (have + 1 >= tailn) {
                memmove(errtail, errtail + tailn / 2, have - tailn / 2);
                have -= tailn / 2;
            }
            errtail[have++] = chunk[i];
        }
    }
    errtail[have] = '\0';
    close(fds[0]);
    while (waitpid(pid, wstatus, 0) < 0)
        if (errno != EINTR) {
            *wstatus = -1;
            break;
        }
    return GSL_SUCCESS;
}

static const char *missing_message =
    "heatmap: gnuplot not found%s%s%s; kept %s.dat and %s.gp "
    "(install gnuplot-nox to render)";

static int gnuplot_missing(const char *base)
{
    const char *env = getenv("MHA_GNUPLOT");
    int overridden = env && *env;
    return mha_fail(HEATMAP_NO_GNUPLOT, missing_message,
                    overridden ? " (MHA_GNUPLOT=" : "",
                    overridden ? env : "", overridden ? ")" : "", base, base);
}

/* Render base.gp to base.<fmt> through a temporary beside it. */
static int render_one(const char *who, const char *prog, const char *base,
                      const char *fmt)
{
    char ext[8];
    snprintf(ext, sizeof ext, ".%s", fmt);
    pending img;
    int status = pending_open(who, &img, base, ext, 0);
    if (status)
        return status;
    char *script = concat(who, base, ".gp");
    if (!script) {
        pending_discard(&img);
        return GSL_ENOMEM;
    }
    int e = 0, wstatus = -1;
    char tail[1024];
    struct stat st;
    status = spawn_gnuplot(who, prog, script, fmt, img.tmp, &e, &wstatus,
                           tail, sizeof tail);
    if (status) {
        /* the message is recorded */
    } else if (e == ENOENT) {
        status = gnuplot_missing(base);
    } else if (e) {
        status = mha_fail(GSL_EFAILED, "%s: cannot run %s on %s: %s", who,
                          prog, script, strerror(e));
    } else if (wstatus == -1) {
        status = mha_fail(GSL_EFAILED, "%s: lost track of %s on %s", who,
                          prog, script);
    } else if (WIFSIGNALED(wstatus)) {
        status = mha_fail(GSL_EFAILED,
                          "%s: %s was killed by signal %d rendering %s.%s "
                          "from %s",
                          who, prog, WTERMSIG(wstatus), base, fmt, script);
    } else if (WEXITSTATUS(wstatus) != 0) {
        const char *line = last_line(tail);
        status = mha_fail(GSL_EFAILED,
                          "%s: %s exited with status %d rendering %s.%s "
                          "from %s%s%s",
                          who, prog, WEXITSTATUS(wstatus), base, fmt, script,
                          *line ? ": " : "", line);
    } else if (stat(img.tmp, &st) != 0 || st.st_size == 0) {
        status = mha_fail(GSL_EFAILED,
                          "%s: %s exited with status 0 but wrote no %s "
                          "image from %s",
                          who, prog, fmt, script);
    } else {
        status = pending_commit(who, &img);
    }
    free(script);
    pending_discard(&img);
    return status;
}

static int check_formats(const char *who, int formats)
{
    if (formats == 0 || (formats & ~(HEATMAP_PNG | HEATMAP_SVG)))
        return mha_fail(GSL_EINVAL,
                        "%s: formats %d is not HEATMAP_PNG (1), HEATMAP_SVG "
                        "(2) or both (3)",
                        who, formats);
    return GSL_SUCCESS;
}

static int render_script(const char *who, const char *base, int formats)
{
    const char *prog = gnuplot_program();
    if (!program_exists(prog))
        return gnuplot_missing(base);
    int status = GSL_SUCCESS;
    if (formats & HEATMAP_PNG)
        status = render_one(who, prog, base, "png");
    if (!status && (formats & HEATMAP_SVG))
        status = render_one(who, prog, base, "svg");
    return status;
}

int heatmap_render(const tensor *m, const heatmap_options *opt,
                   const char *base, int formats)
{
    const char *who = "heatmap_render";
    int status = check_formats(who, formats);
    if (status)
        return status;
    grid g;
    status = make_grid(who, m, opt, &g);
    if (!status)
        status = write_files(who, &g, base);
    if (status)
        return status;
    return render_script(who, base, formats);
}

int heatmap_render_script(const char *base, int formats)
{
    const char *who = "heatmap_render_script";
    int status = check_formats(who, formats);
    if (status)
        return status;
    if (!base || !*base)
        return mha_fail(GSL_EINVAL, "%s: the script path is %s", who,
                        base ? "empty" : "NULL");
    return render_script(who, base, formats);
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
