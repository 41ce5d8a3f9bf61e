//> 13
/* plot.c: line and bar charts as gnuplot data and scripts; see plot.h.
 *
 * Shapes: x, y, values and labels are arrays of n entries; the .dat file
 * holds one line per point or bar. */
#include "plot/plot.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "plot/gnuplot.h"
#include "plot/heatmap.h"

/* --- checks ----------------------------------------------------------- */

/* Text goes into a one-line script command and a "quoted" data field:
 * no control characters, no double quotes. */
static int check_text(const char *who, const char *what, const char *s)
{
    return gnuplot_check_text(who, what, s, 1);
}

/* Each of the k texts, named "<array>[j]" in messages: there (not NULL)
 * and printable in a gnuplot string. */
static int check_texts(const char *who, const char *array,
                       const char *const *texts, size_t k)
{
    int status = GSL_SUCCESS;
    for (size_t j = 0; j < k && !status; j++) {
        char what[48];
        snprintf(what, sizeof what, "%s[%zu]", array, j);
        if (!texts[j])
            return mha_fail(GSL_EINVAL, "%s: %s is NULL", who, what);
        status = check_text(who, what, texts[j]);
    }
    return status;
}

/* The arrays a chart draws, by name, for check_common:
 * ARRAYS("x", x, "y", y). */
typedef struct array_arg {
    const char *name;
    const void *data;
} array_arg;
#define ARRAYS(...)                                                           \
    sizeof((array_arg[]){__VA_ARGS__}) / sizeof(array_arg),                   \
        (const array_arg[]){__VA_ARGS__}

/* opt (NULL: the defaults) and what every chart needs, then its arrays
 * given (none NULL). */
static int check_common(const char *who, size_t n, const plot_options **optp,
                        const char *base, int formats, size_t k,
                        const array_arg *arrays)
{
    static const plot_options defaults = {0};
    if (!*optp)
        *optp = &defaults;
    const plot_options *opt = *optp;
    int status = gnuplot_check_formats(who, formats);
    if (status)
        return status;
    if (n == 0)
        return mha_fail(GSL_EINVAL, "%s: nothing to plot (n is 0)", who);
    status = gnuplot_check_base(who, base, "plots/loss", 1);
    if (!status)
        status = check_text(who, "the title", opt->title);
    if (!status)
        status = check_text(who, "the x label", opt->xlabel);
    if (!status)
        status = check_text(who, "the y label", opt->ylabel);
    if (status)
        return status;
    if (opt->width < 0 || opt->width > GNUPLOT_MAX_PIXELS || opt->height < 0 ||
        opt->height > GNUPLOT_MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: size %d x %d is out of range; use 0 (640 x 400) "
                        "or 1 to %d pixels",
                        who, opt->width, opt->height, GNUPLOT_MAX_PIXELS);
    for (size_t i = 0; i < k; i++)
        if (!arrays[i].data)
            return mha_fail(GSL_EINVAL, "%s: %s is NULL", who, arrays[i].name);
    return GSL_SUCCESS;
}

static int check_values(const char *who, const char *name, const double *v,
                        size_t n, int log_axis)
{
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(v[i]))
            return mha_fail(GSL_EINVAL, "%s: %s[%zu] is %s; values must be "
                                        "finite",
                            who, name, i,
                            isnan(v[i]) ? "nan" : v[i] > 0 ? "inf" : "-inf");
        if (log_axis && v[i] <= 0)
            return mha_fail(GSL_EINVAL,
                            "%s: %s[%zu] is %g, which a logarithmic axis "
                            "cannot show",
                            who, name, i, v[i]);
    }
    return GSL_SUCCESS;
}

/* --- writing ---------------------------------------------------------- */

/* The part of every script before the plot command: where the data and
 * the picture live, the terminal, the labels. */
static void write_preamble(FILE *f, const char *what, const char *name,
                           const plot_options *opt)
{
    int w = opt->width ? opt->width : 640, h = opt->height ? opt->height : 400;
    gnuplot_put_preamble(f, name, w, h, "%s from %s.dat", what, name);
    const char *texts[3] = {opt->title, opt->xlabel, opt->ylabel};
    const char *cmds[3] = {"title", "xlabel", "ylabel"};
    for (int i = 0; i < 3; i++)
        if (texts[i] && *texts[i]) {
            fprintf(f, "set %s ", cmds[i]);
            gnuplot_put_quoted(f, texts[i], "");
            fputc('\n', f);
        }
    if (opt->log_y)
        fputs("set logscale y\nset format y '%g'\n", f);
    fputs("set grid ytics lc rgb '#dddddd'\nset border 3\n"
          "set tics nomirror out scale 0.5\nunset key\n",
          f);
}

/* Write base.dat and base.gp with write, both or neither, then render. */
static int write_and_render(const char *who, const char *base, int formats,
                            gnuplot_writer write, const void *ctx)
{
    int status = gnuplot_write(who, base, write, ctx);
    if (status)
        return status;
    return heatmap_render_script(base, formats);
}

/* --- a line ----------------------------------------------------------- */

typedef struct {
    const double *x, *y;
    size_t n;
    const plot_options *opt;
} line_data;

static void write_line(FILE *dat, FILE *gp, const char *name, const void *p)
{
    const line_data *d = p;
    fprintf(dat, "# %zu points (x, y), drawn by %s.gp\n", d->n, name);
    for (size_t i = 0; i < d->n; i++) {
        gnuplot_put_number(dat, d->x[i]);
        fputc(' ', dat);
        gnuplot_put_number(dat, d->y[i]);
        fputc('\n', dat);
    }
    char what[64];
    snprintf(what, sizeof what, "A line through %zu points", d->n);
    write_preamble(gp, what, name, d->opt);
    fputs("plot data using 1:2 with lines lw 2 lc rgb '#cb181d'\n"
          "unset output\n",
          gp);
}

int plot_line(const double *x, const double *y, size_t n,
              const plot_options *opt, const char *base, int formats)
{
    const char *who = "plot_line";
    int status = check_common(who, n, &opt, base, formats,
                              ARRAYS({"x", x}, {"y", y}));
    if (status)
        return status;
    status = check_values(who, "x", x, n, 0);
    if (!status)
        status = check_values(who, "y", y, n, opt->log_y);
    if (status)
        return status;
    line_data d = {x, y, n, opt};
    return write_and_render(who, base, formats, write_line, &d);
}

/* --- several lines --------------------------------------------------- */

typedef struct {
    const double *x, *ys;
    size_t n, k;
    const char *const *names;
    const plot_options *opt;
} lines_data;

/* One colour per line, from ColorBrewer's Dark2; they repeat after 8. */
static const char *const line_colours[] = {"#1b9e77", "#d95f02", "#7570b3",
                                           "#e7298a", "#66a61e", "#e6ab02",
                                           "#a6761d", "#666666"};

static void write_lines(FILE *dat, FILE *gp, const char *name, const void *p)
{
    const lines_data *d = p;
    fprintf(dat, "# %zu points, x then %zu lines, drawn by %s.gp\n", d->n,
            d->k, name);
    for (size_t i = 0; i < d->n; i++) {
        gnuplot_put_number(dat, d->x[i]);
        for (size_t j = 0; j < d->k; j++) {
            fputc(' ', dat);
            gnuplot_put_number(dat, d->ys[j * d->n + i]);
        }
        fputc('\n', dat);
    }
    char what[64];
    snprintf(what, sizeof what, "%zu lines through %zu points", d->k, d->n);
    write_preamble(gp, what, name, d->opt);
    fputs("set key below height 1\nplot ", gp);
    for (size_t j = 0; j < d->k; j++) {
        fprintf(gp, "%sdata using 1:%zu with lines lw 2 lc rgb '%s' title ",
                j ? ", \\\n     " : "", j + 2,
                line_colours[j % (sizeof line_colours / sizeof *line_colours)]);
        gnuplot_put_quoted(gp, d->names[j], "");
    }
    fputs("\nunset output\n", gp);
}

int plot_lines(const double *x, const double *ys, size_t n, size_t k,
               const char *const *names, const plot_options *opt,
               const char *base, int formats)
{
    const char *who = "plot_lines";
    int status = check_common(who, n, &opt, base, formats,
                              ARRAYS({"x", x}, {"ys", ys}, {"names", names}));
    if (status)
        return status;
    if (k == 0)
        return mha_fail(GSL_EINVAL, "%s: no lines to draw (k is 0)", who);
    status = check_values(who, "x", x, n, 0);
    if (!status)
        status = check_texts(who, "names", names, k);
    if (!status)
        status = check_values(who, "ys", ys, n * k, opt->log_y);
    if (status)
        return status;
    lines_data d = {x, ys, n, k, names, opt};
    return write_and_render(who, base, formats, write_lines, &d);
}

/* --- bars ------------------------------------------------------------- */

typedef struct {
    const char *const *labels;
    const double *values;
    size_t n;
    const plot_options *opt;
    int nonnegative;
} bar_data;

static void write_bars(FILE *dat, FILE *gp, const char *name, const void *p)
{
    const bar_data *d = p;
    fprintf(dat, "# %zu bars (\"label\" value), drawn by %s.gp\n", d->n, name);
    for (size_t i = 0; i < d->n; i++) {
        fprintf(dat, "\"%s\" ", d->labels[i]);
        gnuplot_put_number(dat, d->values[i]);
        fputc('\n', dat);
    }
    char what[64];
    snprintf(what, sizeof what, "A bar chart of %zu bars", d->n);
    write_preamble(gp, what, name, d->opt);
    fprintf(gp,
            "set style fill solid 0.85 noborder\n"
            "set boxwidth 0.6\n"
            "set xrange [-0.6:%zu.6]\n"
            "%s"
            "# each bar's value, printed above it\n"
            "plot data using 0:2:xtic(1) with boxes lc rgb '#cb181d', \\\n"
            "     data using 0:2:(sprintf('%%.3g', $2)) with labels "
            "offset 0,0.8\n"
            "unset output\n",
            d->n - 1,
            d->nonnegative ? "set yrange [0:*]\nset offsets 0, 0, "
                             "graph 0.1, 0\n"
                           : "");
}

int plot_bars(const char *const *labels, const double *values, size_t n,
              const plot_options *opt, const char *base, int formats)
{
    const char *who = "plot_bars";
    int status = check_common(who, n, &opt, base, formats,
                              ARRAYS({"labels", labels}, {"values", values}));
    if (status)
        return status;
    status = check_texts(who, "labels", labels, n);
    int nonnegative = 1;
    for (size_t i = 0; i < n; i++)
        nonnegative &= values[i] >= 0;
    if (!status)
        status = check_values(who, "values", values, n, opt->log_y);
    if (status)
        return status;
    bar_data d = {labels, values, n, opt, nonnegative && !opt->log_y};
    return write_and_render(who, base, formats, write_bars, &d);
}
//<
