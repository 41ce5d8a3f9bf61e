//> 01
/* heatmap.h: pictures of attention weights, drawn by gnuplot.
 *
 * The weights are a grid of (Lq, Lk) panels on one colour scale, with the
 * options that say how to label and size them: heatmap_grid.h says what
 * they may be.  heatmap_write and heatmap_render write them as a gnuplot
 * data file base.dat and a script base.gp (gnuplot.h), and render base.png
 * and/or base.svg.  The script re-renders by hand from any directory:
 *     gnuplot -e "fmt='svg'" plots/ch04_weights.gp
 * (fmt is 'png' when not given; the image lands beside the script).
 * heatmap_terminal.h draws the same grid in a terminal; this header
 * includes it.
 *
 * Output is deterministic: the same weights and options give byte-identical
 * .dat and .gp.  Numbers are written in the C locale's format, so a program
 * must not switch LC_NUMERIC to one with a decimal comma before calling
 * these.
 *
 * Errors follow error.h: bad input (heatmap_grid.h), a path ending in '/'
 * or with a control character, a directory that does not exist ...
 * returns a GSL status with a message naming the function, the values and
 * the shapes, and leaves no file behind: the files are written under
 * temporary names in the same directory and renamed when all are complete
 * (fileset.h).
 */
#ifndef MHA_HEATMAP_H
#define MHA_HEATMAP_H

#include "plot/gnuplot.h"
#include "plot/heatmap_grid.h"
#include "plot/heatmap_terminal.h"
#include "tensor/tensor.h"

/* Image formats for heatmap_render, to be or-ed together. */
enum { HEATMAP_PNG = GNUPLOT_PNG, HEATMAP_SVG = GNUPLOT_SVG };

/* heatmap_render's answer when gnuplot is not installed.  It is not a
 * failure: base.dat and base.gp are written, and mha_last_error() holds a
 * line the caller may print,
 *     heatmap: gnuplot not found; kept plots/x.dat and plots/x.gp (install gnuplot-nox to render)
 * The value lies outside GSL's codes, so it is never mistaken for one. */
#define HEATMAP_NO_GNUPLOT GNUPLOT_MISSING

/* Write base.dat (the weights, one block per panel) and base.gp (the
 * gnuplot script that draws them), both or neither.  base is a path
 * without extension, e.g. "plots/ch04_weights"; its directory must exist.
 * opt may be NULL. */
int heatmap_write(const tensor *m, const heatmap_options *opt,
                  const char *base);

/* heatmap_write, then run gnuplot on base.gp to make base.png and/or
 * base.svg (formats: HEATMAP_PNG, HEATMAP_SVG or both), all of them or
 * none.  Returns GSL_SUCCESS, HEATMAP_NO_GNUPLOT (see above), GSL_EFAILED
 * when gnuplot fails (the message gives its exit status and the last line
 * it printed; base.dat and base.gp are kept for a look, no image is left
 * half-written), or the statuses of heatmap_write.  How gnuplot is found
 * and run, and what is byte-identical from run to run: gnuplot.h's
 * gnuplot_run and gnuplot_render. */
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

#endif
//<
