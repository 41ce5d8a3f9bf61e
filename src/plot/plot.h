//> 13
/* plot.h: line and bar charts with gnuplot, for the pictures that are not
 * heatmaps: a loss curve, the importance of each head.
 *
 * They work as heatmap.h's do, with gnuplot.h's parts: plot_line and
 * plot_bars write base.dat (the numbers, each the shortest of %.15g,
 * %.16g, %.17g that reads back as the same double) and base.gp (the
 * gnuplot script that draws them), both or neither, each under a
 * temporary name renamed when complete; then they render base.png and/or
 * base.svg through heatmap_render_script, with the same statuses
 * (HEATMAP_NO_GNUPLOT keeps the .dat and .gp and is not a failure).  The
 * script re-renders by hand from any directory:
 *     gnuplot -e "fmt='svg'" plots/13_loss.gp
 *
 * Data:
 *   plot_line   x and y (n,): one line through the n points (x_i, y_i)
 *   plot_lines  x (n,) and ys (k, n), row-major: k lines over the same x,
 *               line j through (x_i, ys[j*n + i]), each named in a key
 *   plot_bars   labels and values (n,): one bar per label, left to right,
 *               each with its value printed above it
 *
 * Output is deterministic (same input, same bytes) and written in the C
 * locale's number format.  Errors follow error.h: n = 0, a value that is
 * NaN or infinite (or <= 0 on a logarithmic axis), a label or title with a
 * control character or a double quote, a size out of range, a directory
 * that does not exist: a status and a message, and no file left behind.
 */
#ifndef MHA_PLOT_H
#define MHA_PLOT_H

#include <stddef.h>

typedef struct plot_options {
    const char *title;  /* over the chart, or NULL */
    const char *xlabel; /* NULL: none */
    const char *ylabel; /* NULL: none */
    int log_y;          /* 1: a logarithmic y axis */
    int width, height;  /* pixels; 0: 640 and 400 */
} plot_options;

/* A line chart of y against x.  formats: HEATMAP_PNG, HEATMAP_SVG or both
 * (heatmap.h).  opt may be NULL. */
int plot_line(const double *x, const double *y, size_t n,
              const plot_options *opt, const char *base, int formats);

/* k lines over one x: line j is ys[j*n .. j*n + n - 1], named names[j]
 * in the key (no control characters or double quotes). */
int plot_lines(const double *x, const double *ys, size_t n, size_t k,
               const char *const *names, const plot_options *opt,
               const char *base, int formats);

/* A bar chart: bar i is labels[i] with height values[i]. */
int plot_bars(const char *const *labels, const double *values, size_t n,
              const plot_options *opt, const char *base, int formats);

#endif
//<
