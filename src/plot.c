/* plot.c: line and bar charts as gnuplot data and scripts; see plot.h.
 *
 * Shapes: x, y, values and labels are arrays of n entries; the .dat file
 * holds one line per point or bar. */
#define _GNU_SOURCE /* O_CLOEXEC */
#include "plot.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "heatmap.h"

#define MAX_PIXELS 16384

/* --- checks ----------------------------------------------------------- */

/* Text goes into a one-line script command and a quoted data field: no
 * control characters, no double quotes. */
static int check_text(const char *who, const char *what, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; s && *p; p++)
        if (*p < 0x20 || *p == 0x7f || *p == '"')
            return mha_fail(GSL_EINVAL,
                            "%s: %s contains %s 0x%02x; labels and titles "
                            "are single lines without double quotes",
                            who, what,
                            *p == '"' ? "a double quote" : "control character",
                            *p);
    return GSL_SUCCESS;
}

static int check_common(const char *who, size_t n, const plot_options *opt,
                        const char *base, int formats)
{
    if (formats == 0 || (formats & ~(HEATMAP_PNG | HEATMAP_SVG)))
        return mha_fail(GSL_EINVAL,
                        "%s: formats %d is not HEATMAP_PNG (1), HEATMAP_SVG "
                        "(2) or both (3)",
                        who, formats);
    if (n == 0)
        return mha_fail(GSL_EINVAL, "%s: nothing to plot (n is 0)", who);
    if (!base || !*base)
        return mha_fail(GSL_EINVAL, "%s: the output path is %s", who,
                        base ? "empty" : "NULL");
    const char *slash = strrchr(base, '/');
    if (slash && !slash[1])
        return mha_fail(GSL_EINVAL,
                        "%s: output path %s ends in '/'; give a file name "
                        "without extension, e.g. plots/loss",
                        who, base);
    int status = check_text(who, "the output path", base);
    if (!status)
        status = check_text(who, "the title", opt->title);
    if (!status)
        status = check_text(who, "the x label", opt->xlabel);
    if (!status)
        status = check_text(who, "the y label", opt->ylabel);
    if (status)
        return status;
    if (opt->width < 0 || opt->width > MAX_PIXELS || opt->height < 0 ||
        opt->height > MAX_PIXELS)
        return mha_fail(GSL_EINVAL,
                        "%s: size %d x %d is out of range; use 0 (640 x 400) "
                        "or 1 to %d pixels",
                        who, opt->width, opt->height, MAX_PIXELS);
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

/* The shortest of %.15g, %.16g and %.17g that reads back as v. */
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

/* s as a gnuplot single-quoted string, '' for a quote: nothing in it is
 * special then, so text cannot turn into a command. */
static void put_quoted(FILE *f, const char *s, const char *suffix)
{
    fputc('\'', f);
    for (const char *p = s; *p; p++) {
        if (*p == '\'')
            fputc('\'', f);
        fputc(*p, f);
    }
    for (const char *p = suffix; *p; p++) {
        if (*p == '\'')
            fputc('\'', f);
        fputc(*p, f);
    }
    fputc('\'', f);
}

/* A file written under path.tmp.<pid> and renamed into place. */
typedef struct {
    char path[4096], tmp[4200];
    FILE *f;
} pending;

static int pending_open(const char *who, pending *p, const char *base,
                        const char *ext)
{
    memset(p, 0, sizeof *p);
    if ((size_t)snprintf(p->path, sizeof p->path, "%s%s", base, ext) >=
        sizeof p->path)
        return mha_fail(GSL_EINVAL, "%s: output path %s is too long", who,
                        base);
    snprintf(p->tmp, sizeof p->tmp, "%s.tmp.%ld", p->path, (long)getpid());
    int fd = open(p->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return mha_fail(GSL_EFAILED, "%s: cannot create %s: %s", who, p->path,
                        strerror(errno));
    p->f = fdopen(fd, "w");
    if (!p->f) {
        int e = errno;
        close(fd);
        unlink(p->tmp);
        return mha_fail(GSL_ENOMEM, "%s: cannot open a stream on %s: %s", who,
                        p->tmp, strerror(e));
    }
    return GSL_SUCCESS;
}

/* Close, checking that every byte arrived; on failure remove the file. */
static int pending_close(const char *who, pending *p)
{
    int bad = ferror(p->f), e = errno;
    if (fclose(p->f) != 0 && !bad) {
        bad = 1;
        e = errno;
    }
    p->f = NULL;
    if (bad) {
        unlink(p->tmp);
        return mha_fail(GSL_EFAILED, "%s: cannot write %s: %s", who, p->path,
                        strerror(e));
    }
    return GSL_SUCCESS;
}

static void pending_discard(pending *p)
{
    if (p->f)
        fclose(p->f);
    p->f = NULL;
    unlink(p->tmp);
}

/* The part of every script before the plot command: where the data and
 * the picture live, the terminal, the labels. */
static void write_preamble(FILE *f, const char *what, const char *name,
                           const plot_options *opt)
{
    int w = opt->width ? opt->width : 640, h = opt->height ? opt->height : 400;
    fprintf(f,
            "# %s from %s.dat.  Render beside this script with\n"
            "#     gnuplot -e \"fmt='png'\" %s.gp    (fmt: 'png' or 'svg')\n",
            what, name, name);
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
            w, h, w, h);
    const char *texts[3] = {opt->title, opt->xlabel, opt->ylabel};
    const char *cmds[3] = {"title", "xlabel", "ylabel"};
    for (int i = 0; i < 3; i++)
        if (texts[i] && *texts[i]) {
            fprintf(f, "set %s ", cmds[i]);
            put_quoted(f, texts[i], "");
            fputc('\n', f);
        }
    if (opt->log_y)
        fputs("set logscale y\nset format y '%g'\n", f);
    fputs("set grid ytics lc rgb '#dddddd'\nset border 3\n"
          "set tics nomirror out scale 0.5\nunset key\n",
          f);
}

typedef void (*write_fn)(FILE *dat, FILE *gp, const char *name,
                         const void *ctx);

/* Write base.dat and base.gp with write, both or neither, then render. */
static int write_and_render(const char *who, const char *base, int formats,
                            write_fn write, const void *ctx)
{
    const char *slash = strrchr(base, '/');
    const char *name = slash ? slash + 1 : base;
    pending dat, gp;
    int status = pending_open(who, &dat, base, ".dat");
    if (status)
        return status;
    status = pending_open(who, &gp, base, ".gp");
    if (status) {
        pending_discard(&dat);
        return status;
    }
    write(dat.f, gp.f, name, ctx);
    status = pending_close(who, &dat);
    if (status) {
        pending_discard(&gp);
        return status;
    }
    status = pending_close(who, &gp);
    if (status) {
        unlink(dat.tmp);
        return status;
    }
    if (rename(dat.tmp, dat.path) != 0) {
        int e = errno;
        unlink(dat.tmp);
        unlink(gp.tmp);
        return mha_fail(GSL_EFAILED, "%s: cannot rename %s to %s: %s", who,
                        dat.tmp, dat.path, strerror(e));
    }
    if (rename(gp.tmp, gp.path) != 0) {
        int e = errno;
        unlink(gp.tmp);
        unlink(dat.path); /* both or neither */
        return mha_fail(GSL_EFAILED, "%s: cannot rename %s to %s: %s", who,
                        gp.tmp, gp.path, strerror(e));
    }
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
        put_number(dat, d->x[i]);
        fputc(' ', dat);
        put_number(dat, d->y[i]);
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
    static const plot_options defaults = {0};
    if (!opt)
        opt = &defaults;
    int status = check_common(who, n, opt, base, formats);
    if (status)
        return status;
    if (!x || !y)
        return mha_fail(GSL_EINVAL, "%s: %s is NULL", who, !x ? "x" : "y");
    status = check_values(who, "x", x, n, 0);
    if (!status)
        status = check_values(who, "y", y, n, opt->log_y);
    if (status)
        return status;
    line_data d = {x, y, n, opt};
    return write_and_render(who, base, formats, write_line, &d);
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
        put_number(dat, d->values[i]);
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
    static const plot_options defaults = {0};
    if (!opt)
        opt = &defaults;
    int status = check_common(who, n, opt, base, formats);
    if (status)
        return status;
    if (!labels || !values)
        return mha_fail(GSL_EINVAL, "%s: %s is NULL", who,
                        !labels ? "labels" : "values");
    int nonnegative = 1;
    for (size_t i = 0; i < n && !status; i++) {
        char what[48];
        snprintf(what, sizeof what, "labels[%zu]", i);
        if (!labels[i])
            return mha_fail(GSL_EINVAL, "%s: %s is NULL", who, what);
        status = check_text(who, what, labels[i]);
        nonnegative &= values[i] >= 0;
    }
    if (!status)
        status = check_values(who, "values", values, n, opt->log_y);
    if (status)
        return status;
    bar_data d = {labels, values, n, opt, nonnegative && !opt->log_y};
    return write_and_render(who, base, formats, write_bars, &d);
}
