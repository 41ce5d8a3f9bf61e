/* lesson.h: the few helpers every chapter program shares.
 *
 * A chapter is a lesson that runs: it prints what it does, step by step.
 * These helpers keep that printing short and the error handling in one
 * place, so the chapter text is about attention and not about plumbing. */
#ifndef MHA_LESSON_H
#define MHA_LESSON_H

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "libmha.h"

/* Every library call goes through CHECK: on failure the lesson stops with
 * the library's message, the call and where it was made (exit status 1).
 * In a student's handout, a call that reaches an exercise not written yet
 * stops the lesson with that one line instead, "this needs exercise
 * transpose_qkv (chapter 06, src/nn/heads.c): ...", and exit status 3
 * (MHA_EXIT_EXERCISE, error.h).  When stdout has failed (a full disk),
 * that is the cause, and the lesson stops with one line: where, and the
 * library's message.  (A lesson that reaches its end with stdout failed
 * is stopped by mha_program_init's check at exit, program.h.) */
#define CHECK(call) lesson_check((call), #call, __FILE__, __LINE__)

static inline void lesson_check(int status, const char *call, const char *file,
                                int line)
{
    if (status == GSL_SUCCESS)
        return;
    if (mha_unwritten_exercise()) {
        fprintf(stderr, "%s\n", mha_unwritten_exercise());
        exit(MHA_EXIT_EXERCISE);
    }
    if (ferror(stdout)) {
        fprintf(stderr, "%s:%d: %s\n", file, line, mha_last_error());
        exit(1);
    }
    if (status == GSL_ENOMEM) { // out of memory (a memory limit): one line
        fprintf(stderr, "%s:%d: %s\n", file, line, mha_last_error());
        exit(2);
    }
    fprintf(stderr, "%s:%d: %s failed\n  %s\n", file, line, call,
            mha_last_error());
    exit(1);
}

/* "## 2. Reshape is a view" and a blank line around it. */
static inline void section(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("\n## ");
    vprintf(fmt, ap);
    printf("\n\n");
    va_end(ap);
}

/* shape and strides of t on one line: "shape (1, 2, 16)  strides (32, 16, 1)" */
static inline void show_layout(const char *name, const tensor *t)
{
    char s[TRACE_SHAPE_MAX], st[TRACE_SHAPE_MAX];
    printf("%s: shape %s  strides %s%s\n", name,
           tensor_shape_str(t, s, sizeof s),
           trace_dims_str(st, sizeof st, t->ndim, t->strides),
           tensor_is_contiguous(t) ? "  contiguous" : "  not contiguous");
}

static inline const char *yes_no(int b) { return b ? "yes" : "no"; }

/* d2l's toy (chapters 04 and 05): queries (2, 1, q_size) drawn from a
 * standard normal by rng, keys (2, 10, 2) all ones, values (2, 10, 4)
 * holding 0..39 in each example, valid_lens [2, 6].  q_names and
 * k_names are the axis names the trace shows for queries and keys. */
static inline void d2l_toy_inputs(gsl_rng *rng, size_t q_size,
                                  const char *q_names, const char *k_names,
                                  tensor **q, tensor **k, tensor **v,
                                  tensor **lens)
{
    CHECK(tensor_alloc(SHAPE(2, 1, q_size), q));
    CHECK(tensor_alloc(SHAPE(2, 10, 2), k));
    CHECK(tensor_alloc(SHAPE(2, 10, 4), v));
    CHECK(tensor_set_names(*q, q_names));
    CHECK(tensor_set_names(*k, k_names));
    CHECK(tensor_set_names(*v, "B, Lk, dv"));
    tensor_fill_normal(*q, rng, 0, 1);
    tensor_fill(*k, 1);
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 10; t++)
            for (size_t j = 0; j < 4; j++)
                *TENSOR_AT(*v, b, t, j) = (double)(t * 4 + j);
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 6}, lens));
}

/* A new (B, n, d_model) tensor holding 0, 1, 2, ... in order, with the
 * lesson's axis names: d2l's example input.  The caller frees it. */
static inline tensor *counting_tensor(size_t B, size_t n, size_t d_model)
{
    tensor *x;
    CHECK(tensor_alloc(SHAPE(B, n, d_model), &x));
    CHECK(tensor_set_names(x, "B, n, d_model"));
    tensor_fill_arange(x, 0, 1);
    return x;
}

/* Largest |a - b| over two tensors of one shape, any strides (views
 * too); a NaN difference counts as infinite. */
static inline double largest_abs_diff(const tensor *a, const tensor *b)
{
    double worst = 0;
    size_t idx[TENSOR_MAX_DIMS] = {0};
    for (size_t e = 0; e < tensor_numel(a); e++) {
        double d = fabs(*tensor_at(a, idx) - *tensor_at(b, idx));
        worst = isnan(d) ? INFINITY : fmax(worst, d);
        for (size_t k = a->ndim; k-- > 0;) { // the next index, row-major
            if (++idx[k] < a->shape[k])
                break;
            idx[k] = 0;
        }
    }
    return worst;
}

/* "16.0 GiB", "512.0 MiB", "64.0 KiB": a byte count for people, in
 * binary units (buf of n chars; returns buf). */
static inline const char *bytes_str(double bytes, char *buf, size_t n)
{
    const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    size_t u = 0;
    while (bytes >= 1024.0 && u < 4) {
        bytes /= 1024.0;
        u++;
    }
    snprintf(buf, n, "%.1f %s", bytes, unit[u]);
    return buf;
}

/* Where pictures go: $MHA_PLOTS_DIR if set (the tests and make docs point
 * it at a scratch directory), else plots/ of the repository, whose
 * chapter files git ignores: their last digits depend on the CPU.  The
 * book shows copies in docs/pictures/, which only make docs writes. */
static inline const char *plots_dir(void)
{
    const char *dir = getenv("MHA_PLOTS_DIR");
    return dir && *dir ? dir : "plots";
}

/* Render m (see heatmap.h for its shapes) as plots/<name>.png and .svg
 * and say so.  Without gnuplot the data and script are kept and the lesson
 * goes on: the terminal view in the chapter shows the same numbers. */
static inline void draw_heatmap(const tensor *m, const heatmap_options *opt,
                                const char *name)
{
    char base[1024];
    snprintf(base, sizeof base, "%s/%s", plots_dir(), name);
    int status = heatmap_render(m, opt, base, HEATMAP_PNG | HEATMAP_SVG);
    if (status == HEATMAP_NO_GNUPLOT) {
        printf("%s\n", mha_last_error());
        return;
    }
    CHECK(status);
    printf("[heatmap: plots/%s.png and plots/%s.svg]\n", name, name);
}

//> 08
/* Write page as plots/<name>.html and say so: one file that opens in a
 * browser with no network, to explore the weights (explorer.h). */
static inline void draw_explorer(const explorer_page *page, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.html", plots_dir(), name);
    CHECK(explorer_save(path, page));
    printf("[explorer: plots/%s.html]\n", name);
}
//<

/* 1 when the environment asks for a short run, MHA_QUICK=1: chapters
 * that train then train for a few steps and evaluate on fewer sequences,
 * so that they finish under valgrind (tools/memcheck.sh sets it).  Their
 * numbers are then not the lesson's. */
static inline int lesson_quick(void)
{
    const char *q = getenv("MHA_QUICK");
    return q && *q && !(q[0] == '0' && !q[1]);
}

//> 13
/* The path plot.h's charts take: plots_dir()/name (a static buffer, good
 * until the next call). */
static inline const char *plot_base(const char *name)
{
    static char base[1024];
    snprintf(base, sizeof base, "%s/%s", plots_dir(), name);
    return base;
}

/* After plot_line or plot_bars drew plot_base(name): say where the chart
 * is.  Without gnuplot the data and script are kept and the lesson goes
 * on, as for a heatmap. */
static inline void announce_plot(int status, const char *name)
{
    if (status == HEATMAP_NO_GNUPLOT) {
        printf("%s\n", mha_last_error());
        return;
    }
    lesson_check(status, "drawing the chart", __FILE__, __LINE__);
    printf("[plot: plots/%s.png and plots/%s.svg]\n", name, name);
}

//<
//> 21
/* Render plots/<name>.dot with Graphviz as plots/<name>.png and .svg and
 * say so.  Without dot the .dot is kept and the lesson goes on. */
static inline void announce_graph(const char *name)
{
    int status = graphviz_render("announce_graph", plot_base(name),
                                 HEATMAP_PNG | HEATMAP_SVG);
    if (status == GRAPHVIZ_MISSING) {
        printf("%s\n", mha_last_error());
        return;
    }
    lesson_check(status, "drawing the graph", __FILE__, __LINE__);
    printf("[graph: plots/%s.png and plots/%s.svg]\n", name, name);
}
//<

#endif
