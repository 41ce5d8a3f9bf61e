/* heatmap.h: pictures of attention weights.
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
 * Every panel uses ONE colour scale, from the smallest to the largest weight
 * over all panels, so the same colour means the same weight everywhere.
 * When every weight is the same number v the scale is [v - |v|, v + |v|]
 * ([-1, 1] for v = 0): the cells take the middle colour and nothing divides
 * by zero.
 *
 * Two ways to look:
 *   - heatmap_write / heatmap_render write a gnuplot data file base.dat and a
 *     script base.gp, and render them to base.png and/or base.svg.  The
 *     script re-renders by hand from any directory:
 *         gnuplot -e "fmt='svg'" plots/ch04_weights.gp
 *     (fmt is 'png' when not given; the image lands beside the script).
 *   - heatmap_terminal draws the same grid with Unicode shades in a terminal.
 *
 * Output is deterministic: the same weights and options give byte-identical
 * .dat, .gp and terminal text.  Numbers are written in the C locale's
 * format, so a program must not switch LC_NUMERIC to one with a decimal
 * comma before calling these.
 *
 * Errors follow error.h: bad input (NaN or infinite weights, fewer than 2 or
 * more than 4 dimensions, a titles count that is not rows * cols, a label
 * with a control character, a directory that does not exist ...) returns a
 * GSL status with a message naming the function, the values and the shapes,
 * and leaves no file behind: files are written under a temporary name in
 * the same directory and renamed when complete.
 */
#ifndef MHA_HEATMAP_H
#define MHA_HEATMAP_H

#include <stddef.h>
#include <stdio.h>

#include "gnuplot.h"
#include "tensor.h"

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
} heatmap_options;

/* Image formats for heatmap_render, to be or-ed together. */
enum { HEATMAP_PNG = GNUPLOT_PNG, HEATMAP_SVG = GNUPLOT_SVG };

/* heatmap_render's answer when gnuplot is not installed.  It is not a
 * failure: base.dat and base.gp are written, and mha_last_error() holds a
 * line the caller may print,
 *     heatmap: gnuplot not found; kept plots/x.dat and plots/x.gp (install gnuplot-nox to render)
 * The value lies outside GSL's codes, so it is never mistaken for one. */
#define HEATMAP_NO_GNUPLOT GNUPLOT_MISSING

/* Write base.dat (the weights, one block per panel) and base.gp (the
 * gnuplot script that draws them).  base is a path without extension, e.g.
 * "plots/ch04_weights"; its directory must exist.  opt may be NULL. */
int heatmap_write(const tensor *m, const heatmap_options *opt,
                  const char *base);

/* heatmap_write, then run gnuplot on base.gp to make base.png and/or
 * base.svg (formats: HEATMAP_PNG, HEATMAP_SVG or both).  Returns
 * GSL_SUCCESS, HEATMAP_NO_GNUPLOT (see above), GSL_EFAILED when gnuplot
 * fails (the message gives its exit status and the last line it printed;
 * base.dat and base.gp are kept for a look, no image is left half-written),
 * or the statuses of heatmap_write.
 *
 * The gnuplot program is "gnuplot" looked up on PATH, or the program the
 * environment variable MHA_GNUPLOT names (a name or a path, no arguments).
 * It runs as a child process without a shell, with -d (no start-up files,
 * so a user's ~/.gnuplot cannot change the picture), with stdin from
 * /dev/null, stdout and stderr into a pipe read back here, and no other
 * descriptor of the caller's (with glibc 2.34 or later).  With the same gnuplot
 * and fonts, the same script renders byte-identical PNG and SVG files
 * (neither carries a date); across machines the fonts, and so the pixels,
 * may differ, and the SVG names the gnuplot version that drew it. */
int heatmap_render(const tensor *m, const heatmap_options *opt,
                   const char *base, int formats);

/* Render an existing script base.gp (one heatmap_write wrote, or one of
 * plot.h's charts) to base.png and/or base.svg, with the same gnuplot,
 * arguments and guarantees as heatmap_render: the same statuses, and no
 * image left half-written.  The script must draw to the terminal and the
 * file that `fmt` and `out` name, as heatmap_write's scripts do. */
int heatmap_render_script(const char *base, int formats);

/* 1 when the gnuplot heatmap_render would run (MHA_GNUPLOT or "gnuplot"
 * on PATH) exists and is executable, else 0. */
int heatmap_gnuplot_available(void);

/* Draw the grid on f with Unicode shades, two characters per cell so the
 * cells look square: blank for the bottom of the shared scale itself (a
 * weight of exactly 0: a masked key), then '░', '▒', '▓', '█' for the four
 * quarters above it, (lo, lo + q], ..., (hi - q, hi]; one grid row
 * of panels side by side per band, with the titles, the query and key
 * indices, the labels, and a legend line giving each shade's range.
 * A row of panels wider than opt->term_columns (80 by default) continues
 * in a band below.  opt may be NULL; width, height and palette do not
 * apply here.
 * Returns GSL_EFAILED if writing to f fails. */
int heatmap_terminal(FILE *f, const tensor *m, const heatmap_options *opt);

#endif
