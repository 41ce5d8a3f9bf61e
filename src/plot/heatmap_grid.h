//> 01
/* heatmap_grid.h: what a heatmap is.
 *
 * Attention weights are a grid of matrices: for every batch entry (a row of
 * the grid) and every head (a column) an (Lq, Lk) matrix whose row i says
 * how query i spreads its attention over the keys.  A heatmap draws each
 * matrix as Lq x Lk square cells, darker where the weight is larger, in the
 * spirit of d2l's show_heatmaps(matrices, xlabel, ylabel, titles, figsize,
 * cmap='Reds').
 *
 *     m is (rows, cols, Lq, Lk): rows x cols panels, any strides;
 *          (cols, Lq, Lk) is one row of panels and (Lq, Lk) a single panel.
 *
 * Every panel uses ONE colour scale, so the same colour means the same
 * weight everywhere: from 0 to the largest weight when no weight is
 * negative (attention weights), so that the lightest colour means exactly
 * 0; from the smallest to the largest value otherwise, or when the caller
 * asks for it (scale_from_min).  When every weight is the same number v
 * the scale is [v - |v|, v + |v|] ([-1, 1] for v = 0): the cells take the
 * middle colour and nothing divides by zero.
 *
 * Two ways to draw the grid: heatmap.h with gnuplot (PNG, SVG) and
 * heatmap_terminal.h with Unicode shades.  Both check the weights and the
 * options here first, once: bad input (NaN or infinite weights, fewer than
 * 2 or more than 4 dimensions, a titles count that is not rows * cols, a
 * label with a control character ...) returns a GSL status with a message
 * naming the function, the values and the shapes (error.h), before any
 * output is made.
 */
#ifndef MHA_HEATMAP_GRID_H
#define MHA_HEATMAP_GRID_H

#include <stddef.h>
#include <stdio.h>

#include "tensor/tensor.h"
#include "trace/trace.h"

/* Colour ramps, from the smallest weight to the largest; the ColorBrewer
 * ramps that matplotlib's colormaps of the same names interpolate. */
typedef enum heatmap_palette {
    HEATMAP_REDS = 0, /* white to dark red, matplotlib's 'Reds' (default) */
    HEATMAP_BLUES,    /* white to dark blue, 'Blues' */
    HEATMAP_GREYS,    /* white to black, 'Greys' */
    HEATMAP_VIRIDIS,  /* dark purple to yellow, 'viridis' */
    HEATMAP_PALETTE_COUNT
} heatmap_palette;

/* What to write on the picture and how large to make it.  Zero means the
 * default everywhere: `heatmap_options opt = {0};` (or passing NULL) draws
 * "Keys" under the bottom row, "Queries" left of the left column, no titles,
 * the Reds ramp, at a size that grows with the grid. */
typedef struct heatmap_options {
    const char *xlabel;        /* under the bottom row; NULL: "Keys", "": none */
    const char *ylabel;        /* left of the left column; NULL: "Queries" */
    const char *const *titles; /* one per panel in row-major order (panel
                                  (r, c) is titles[r * cols + c]), or NULL;
                                  a NULL entry leaves that panel untitled */
    size_t ntitles;            /* entries in titles: must be rows * cols */
    const char *title;         /* over the whole figure, or NULL */
    int width, height;         /* image size in pixels; 0: derived from the
                                  other, or both from the grid (panels 240
                                  pixels on their longer side, down to 120
                                  for many panels) */
    heatmap_palette palette;
    int term_columns;          /* heatmap_terminal wraps a row of panels
                                  that would be wider; 0: 80 */
    int scale_from_min;        /* 1: the scale starts at the smallest
                                  weight even when none is negative;
                                  0: at 0 for such weights */
} heatmap_options;

/* The weights and the options, checked, with the defaults filled in:
 * everything the drawers need.  Weight (r, c, q, k) is
 * data[r * st[0] + c * st[1] + q * st[2] + k * st[3]]; a leading dimension
 * m does not have gets size 1 and stride 0.  The grid points into m and
 * the options' strings: it lives no longer than they do. */
typedef struct heatmap_grid {
    const double *data;
    size_t rows, cols, lq, lk;
    size_t st[4];      /* strides of (rows, cols, Lq, Lk), in elements */
    double vmin, vmax; /* the smallest and largest weight of all panels */
    double lo, hi;     /* the shared colour scale: [0, vmax] for weights
                          >= 0 (unless scale_from_min), else [vmin, vmax];
                          widened around v when every weight is v */
    const char *xlabel, *ylabel; /* never NULL; "" for none */
    const char *title;           /* NULL for none */
    const char *const *titles;   /* rows * cols entries, or NULL */
    int width, height;
    heatmap_palette palette;
    int term_columns;
    int scale_from_min;
    char shape[TRACE_SHAPE_MAX]; /* m's shape as a tuple, for messages */
} heatmap_grid;

/* Check m and opt (which may be NULL) and fill g; messages name who. */
int heatmap_grid_make(const char *who, const tensor *m,
                      const heatmap_options *opt, heatmap_grid *g);

/* Weight (r, c, q, k): panel (r, c), query q, key k. */
static inline double heatmap_grid_at(const heatmap_grid *g, size_t r,
                                     size_t c, size_t q, size_t k)
{
    return g->data[r * g->st[0] + c * g->st[1] + q * g->st[2] + k * g->st[3]];
}

/* Panel (r, c)'s title, or NULL when it has none (or an empty one). */
static inline const char *heatmap_grid_title(const heatmap_grid *g, size_t r,
                                             size_t c)
{
    const char *t = g->titles ? g->titles[r * g->cols + c] : NULL;
    return t && *t ? t : NULL;
}

/* The decimal digits of n: the width of an index as a label. */
static inline int heatmap_grid_digits(size_t n)
{
    int d = 1;
    while (n >= 10) {
        n /= 10;
        d++;
    }
    return d;
}

/* The weights as gnuplot data, for the script gp_name.gp: a comment, then
 * one block per panel in row-major panel order, blocks separated by two
 * blank lines (gnuplot's index 0, 1, ...); line q of a block holds query
 * q's weights over the keys, each the shortest of %.15g, %.16g and %.17g
 * that reads back as the same double. */
void heatmap_grid_write_dat(FILE *f, const heatmap_grid *g,
                            const char *gp_name);

#endif
//<
