//> 01
/* heatmap_grid.c: attention weights as a grid of panels, checked once,
 * and written as gnuplot data; see heatmap_grid.h.
 *
 * Shapes: the weights m are (rows, cols, Lq, Lk) after the missing leading
 * dimensions are taken as 1; panel (r, c) is the (Lq, Lk) matrix m[r, c].
 */
#include "plot/heatmap_grid.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "plot/gnuplot.h"

int heatmap_grid_make(const char *who, const tensor *m,
                      const heatmap_options *opt, heatmap_grid *g)
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
    g->scale_from_min = opt->scale_from_min;
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
                    double v = heatmap_grid_at(g, r, c, q, k);
                    if (isfinite(v)) {
                        g->vmin = v < g->vmin ? v : g->vmin;
                        g->vmax = v > g->vmax ? v : g->vmax;
                        continue;
                    }
                    size_t idx4[4] = {r, c, q, k};
                    char idx[TRACE_SHAPE_MAX];
                    trace_dims_str(idx, sizeof idx, m->ndim, idx4 + lead);
                    idx[strlen(idx) - 1] = '\0'; /* "(0, 1" */
                    return mha_fail(GSL_EINVAL,
                                    "%s: weights[%s] is %s (panel (%zu, %zu), "
                                    "query %zu, key %zu) in weights of shape "
                                    "%s; weights must be finite",
                                    who, idx + 1,
                                    isnan(v) ? "nan" : v > 0 ? "inf" : "-inf",
                                    r, c, q, k, g->shape);
                }
    /* weights are never negative: their scale starts at 0, so that white
     * (a blank cell) means exactly 0 and not "the smallest weight here" */
    g->lo = g->vmin >= 0 && !opt->scale_from_min ? 0 : g->vmin;
    g->hi = g->vmax;
    if (g->vmin == g->vmax) {
        g->lo = g->vmin;
        double d = g->lo != 0 ? fabs(g->lo) : 1;
        g->lo -= d;
        g->hi += d;
    }
    return GSL_SUCCESS;
}

/* --- base.dat ----------------------------------------------------------- */

void heatmap_grid_write_dat(FILE *f, const heatmap_grid *g,
                            const char *gp_name)
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
            const char *t = heatmap_grid_title(g, r, c);
            if (t)
                fprintf(f, ": %s", t);
            fputc('\n', f);
            for (size_t q = 0; q < g->lq; q++) {
                for (size_t k = 0; k < g->lk; k++) {
                    if (k)
                        fputc(' ', f);
                    gnuplot_put_number(f, heatmap_grid_at(g, r, c, q, k));
                }
                fputc('\n', f);
            }
        }
}
//<
