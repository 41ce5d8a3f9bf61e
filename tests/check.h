/* check.h: helpers shared by the Criterion suites. */
#ifndef MHA_TEST_CHECK_H
#define MHA_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <criterion/criterion.h>
#include <gsl/gsl_blas.h>

#include "libmha.h"

/* A library call that must succeed; on failure show its message. */
#define OK(call)                                                              \
    do {                                                                      \
        int ok_status_ = (call);                                              \
        cr_assert_eq(ok_status_, GSL_SUCCESS, "%s returned %d: %s", #call,    \
                     ok_status_, mha_last_error());                           \
    } while (0)

/* A library call that must fail with `status` and exactly `message`. */
#define FAILS(call, status, message)                                          \
    do {                                                                      \
        mha_clear_error();                                                    \
        int fails_status_ = (call);                                           \
        cr_assert_eq(fails_status_, (status), "%s returned %d, expected %d",  \
                     #call, fails_status_, (status));                         \
        cr_assert_str_eq(mha_last_error(), (message));                        \
    } while (0)

/* A new tensor holding `values` (row-major). */
static inline tensor *make(size_t ndim, const size_t *shape,
                           const double *values)
{
    tensor *t;
    OK(tensor_from_array(ndim, shape, values, &t));
    return t;
}

/* A new tensor holding 0, 1, 2, ... in row-major order. */
static inline tensor *arange(size_t ndim, const size_t *shape)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    tensor_fill_arange(t, 0, 1);
    return t;
}

/* A new tensor of standard normal numbers drawn with seed. */
static inline tensor *random_tensor(size_t ndim, const size_t *shape,
                                    unsigned long seed)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    gsl_rng *r = mha_rng_new(seed);
    tensor_fill_normal(t, r, 0, 1);
    gsl_rng_free(r);
    return t;
}

/* A new tensor of zeros: zeros(SHAPE(2, 3, 4)); ndim 0 gives NULL (a
 * case table's missing input). */
static inline tensor *zeros(size_t ndim, const size_t *shape)
{
    tensor *t = NULL;
    if (ndim)
        OK(tensor_alloc(ndim, shape, &t));
    return t;
}

/* A new tensor of `shape` with every number `value`. */
static inline tensor *full(size_t ndim, const size_t *shape, double value)
{
    tensor *t = zeros(ndim, shape);
    tensor_fill(t, value);
    return t;
}

/* A head split or join, split(x, heads, &out), refusing an x of the
 * shape given: status and exactly message, out left NULL. */
typedef struct split_refusal {
    int (*split)(const tensor *x, size_t heads, tensor **out);
    size_t ndim, shape[3], heads;
    int status;
    const char *message;
} split_refusal;

static inline void splits_refused(const split_refusal *cases, size_t n)
{
    for (size_t c = 0; c < n; c++) {
        tensor *x = zeros(cases[c].ndim, cases[c].shape), *out = (tensor *)1;
        FAILS(cases[c].split(x, cases[c].heads, &out), cases[c].status,
              cases[c].message);
        cr_assert_null(out, "case %zu left its output set", c);
        tensor_free(x);
    }
}

/* A new tensor of normal draws, mean 0, standard deviation sd. */
static inline tensor *normal_tensor(size_t ndim, const size_t *shape,
                                    gsl_rng *r, double sd)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    tensor_fill_normal(t, r, 0, sd);
    return t;
}

/* The generator a test draws from, seeded. */
static inline gsl_rng *rng_for_test(unsigned long seed)
{
    gsl_rng *r = mha_rng_new(seed);
    cr_assert_not_null(r);
    return r;
}

/* Free every tensor named: FREE_ALL(q, k, v, out). */
static inline void free_all(tensor **t, size_t n)
{
    for (size_t k = 0; k < n; k++)
        tensor_free(t[k]);
}
#define FREE_ALL(...)                                                         \
    free_all((tensor *[]){__VA_ARGS__},                                       \
             sizeof((tensor *[]){__VA_ARGS__}) / sizeof(tensor *))

//> 06
/* The trace of d2l's walk: transpose_qkv of X (1, 2, 16) named
 * "B, n, d_model", h = 8, then transpose_output of its result.  Columns:
 *   0         1         2         3         4         5         6         7
 *   0123456789012345678901234567890123456789012345678901234567890123456789 */
#define SEED_WALK_TRACE \
    "transpose_qkv(h=8)             (1, 2, 16)                          (B, n, d_model)\n" \
    "  reshape(1, 2, 8, -1)   view  (1, 2, 16) -> (1, 2, 8, 2)          (B, n, h, d_model/h)\n" \
    "  permute(0, 2, 1, 3)    view  (1, 2, 8, 2) -> (1, 8, 2, 2)        (B, h, n, d_model/h)\n" \
    "  reshape(-1, 2, 2)      view  (1, 8, 2, 2) -> (8, 2, 2)           (B*h, n, d_model/h)\n" \
    "transpose_output(h=8)          (8, 2, 2)                           (B*h, n, d_model/h)\n" \
    "  reshape(-1, 8, 2, 2)   view  (8, 2, 2) -> (1, 8, 2, 2)           (B, h, n, d_model/h)\n" \
    "  permute(0, 2, 1, 3)    view  (1, 8, 2, 2) -> (1, 2, 8, 2)        (B, n, h, d_model/h)\n" \
    "  reshape(1, 2, -1)      view  (1, 2, 8, 2) -> (1, 2, 16)          (B, n, d_model)\n"
//<

//> 08
/* Initialise *m for self-attention: queries, keys and values of `size`
 * features, the configuration's other fields as named after it:
 * SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1). */
#define SELF_MODULE(m, size, ...)                                             \
    OK(multihead_init((m), &(multihead_config){.query_size = (size),          \
                                               .key_size = (size),            \
                                               .value_size = (size),          \
                                               __VA_ARGS__}))

/* The layer applied to one vector x of its in_features (W contiguous),
 * output by output: GSL's dot product of row o of W with x, then the
 * bias.  The modules' references project with it: one matrix-vector
 * route, not linear_forward's dgemm over the batch, and not the loops
 * of linear_forward_naive, an exercise. */
static inline void linear_by_dots(const linear *l, const double *x, double *y)
{
    size_t in = l->in_features;
    gsl_vector_const_view xv = gsl_vector_const_view_array(x, in);
    for (size_t o = 0; o < l->out_features; o++) {
        gsl_vector_const_view w =
            gsl_vector_const_view_array(l->weight->data + o * in, in);
        double dot;
        gsl_blas_ddot(&w.vector, &xv.vector, &dot);
        y[o] = dot + (l->bias ? l->bias->data[o] : 0.0);
    }
}

/* multihead_init must refuse *cfg with `status` and exactly `message`,
 * and leave a module that multihead_free takes. */
static inline void config_refused(const multihead_config *cfg, int status,
                                  const char *message)
{
    multihead m;
    FAILS(multihead_init(&m, cfg), status, message);
    multihead_free(&m);
}

/* The valid lengths a case table asks for: kind 0 none (NULL), 1 one
 * per example (B,), 2 one per query (B, Lq); they run through every
 * length from 0 to Lk, 0 included: (5 i + first) mod (Lk + 1). */
static inline tensor *case_lens(int kind, size_t B, size_t Lq, size_t Lk,
                                size_t first)
{
    tensor *lens = NULL;
    if (kind == 1)
        OK(tensor_alloc(SHAPE(B), &lens));
    else if (kind == 2)
        OK(tensor_alloc(SHAPE(B, Lq), &lens));
    for (size_t i = 0; lens && i < tensor_numel(lens); i++)
        lens->data[i] = (double)((i * 5 + first) % (Lk + 1));
    return lens;
}

/* Biases drawn uniform in (-0.5, 0.5) on all four layers, W_q, W_k, W_v,
 * W_o in that order (Xavier leaves them at zero: this makes them count). */
static inline void random_biases(multihead *m, gsl_rng *r)
{
    tensor_fill_uniform(m->W_q.bias, r, -0.5, 0.5);
    tensor_fill_uniform(m->W_k.bias, r, -0.5, 0.5);
    tensor_fill_uniform(m->W_v.bias, r, -0.5, 0.5);
    tensor_fill_uniform(m->W_o.bias, r, -0.5, 0.5);
}

/* The overflow tests' module: 2 features, one head, W_q, W_k and W_v all
 * 1 (each projection is a row's sum), W_o all 4, zero biases. */
static inline void overflow_module(multihead *m)
{
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 2, .num_heads = 1};
    cr_assert_eq(multihead_init(m, &cfg), GSL_SUCCESS);
    tensor_fill(m->W_q.weight, 1);
    tensor_fill(m->W_k.weight, 1);
    tensor_fill(m->W_v.weight, 1);
    tensor_fill(m->W_o.weight, 4);
}

/* A case of the module against its loops: sizes (dq, dk, dv the inputs'
 * features, D num_hiddens, h heads, out out_size), biases or not, and
 * the kind of valid lengths (case_lens). */
typedef struct module_case {
    size_t B, Lq, Lk, dq, dk, dv, D, h, out;
    int bias;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq) */
} module_case;

/* The case's module, Xavier weights and (with bias) random biases, and
 * its inputs drawn from r in that order: q and k normal with standard
 * deviation sd, v with 1, the lengths case_lens(c->lens, ..., 1). */
static inline void case_module(const module_case *c, gsl_rng *r, double sd,
                               multihead *m, tensor **q, tensor **k,
                               tensor **v, tensor **lens)
{
    multihead_config cfg = {.query_size = c->dq, .key_size = c->dk,
                            .value_size = c->dv, .num_hiddens = c->D,
                            .num_heads = c->h, .out_size = c->out,
                            .bias = c->bias};
    OK(multihead_init(m, &cfg));
    multihead_reset_xavier(m, r);
    if (c->bias) /* Xavier leaves biases at zero: make them count */
        random_biases(m, r);
    *q = normal_tensor(SHAPE(c->B, c->Lq, c->dq), r, sd);
    *k = normal_tensor(SHAPE(c->B, c->Lk, c->dk), r, sd);
    *v = normal_tensor(SHAPE(c->B, c->Lk, c->dv), r, 1);
    *lens = case_lens(c->lens, c->B, c->Lq, c->Lk, 1);
}
//<

/* Each allocation `call` makes (its status), failed in turn (error.h):
 * every failure GSL_ENOMEM, then the checks that follow `call` (what a
 * failure must leave: NULL outputs, state unchanged); the number of
 * failures into `failures`; the loop ends when the call succeeds. */
#define EACH_ALLOCATION_FAILS(failures, call, ...)                            \
    do {                                                                      \
        (failures) = 0;                                                       \
        for (long k_ = 0;; k_++) {                                            \
            mha_debug_fail_alloc_after(k_);                                   \
            int status_ = (call);                                             \
            mha_debug_fail_alloc_after(-1);                                   \
            if (status_ == GSL_SUCCESS)                                       \
                break;                                                        \
            cr_assert_eq(status_, GSL_ENOMEM, "allocation %ld: %s", k_,       \
                         mha_last_error());                                   \
            __VA_ARGS__;                                                      \
            (failures)++;                                                     \
        }                                                                     \
    } while (0)

/* After a failed call: the trace listens again, at depth 0, so the quiet
 * blocks and the records the call opened (trace.h's QUIET, SCOPE) were
 * all closed: a note lands in log (attached), at the top. */
static inline void assert_trace_listens(const trace_log *log)
{
    size_t count = log->count;
    cr_assert(trace_on(), "the trace is still quiet");
    tensor_trace_note("listening");
    cr_assert_eq(log->count, count + 1, "a note was not recorded");
    cr_assert_eq(log->records[count].depth, 0, "a note sits at depth %d",
                 log->records[count].depth);
}

/* t has exactly the shape given, assert_shape(t, SHAPE(2, 4, 100)), and
 * zeros past its ndim (tensor.h). */
static inline void assert_shape(const tensor *t, size_t ndim,
                                const size_t *shape)
{
    cr_assert_eq(t->ndim, ndim, "ndim %zu, expected %zu", t->ndim, ndim);
    for (size_t d = 0; d < TENSOR_MAX_DIMS; d++)
        cr_assert_eq(t->shape[d], d < ndim ? shape[d] : 0,
                     "shape[%zu] = %zu", d, t->shape[d]);
}

/* t's strides are exactly those given, assert_strides(t, SHAPE(12, 4, 1)),
 * one for each of its ndim dimensions. */
static inline void assert_strides(const tensor *t, size_t ndim,
                                  const size_t *strides)
{
    cr_assert_eq(t->ndim, ndim, "ndim %zu, expected %zu", t->ndim, ndim);
    for (size_t d = 0; d < ndim; d++)
        cr_assert_eq(t->strides[d], strides[d], "strides[%zu] = %zu, expected "
                     "%zu", d, t->strides[d], strides[d]);
}

/* max |a - b| over max |b|: the normwise relative error of a against the
 * reference b (b all zero: the absolute error).  Shapes must agree. */
static inline double rel_error(const tensor *a, const tensor *b)
{
    cr_assert(tensor_same_shape(a, b), "shapes differ");
    double diff = 0, ref = 0;
    size_t idx[TENSOR_MAX_DIMS] = {0}, n = tensor_numel(a);
    for (size_t k = 0; k < n; k++) {
        double x = *tensor_at(a, idx), y = *tensor_at(b, idx);
        if (isnan(x) != isnan(y))
            return INFINITY;
        if (fabs(x - y) > diff)
            diff = fabs(x - y);
        if (fabs(y) > ref)
            ref = fabs(y);
        for (size_t d = a->ndim; d-- > 0;) {
            if (++idx[d] < a->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return ref > 0 ? diff / ref : diff;
}

/* Row-major index arithmetic, written out so the suites need not trust the
 * library's strides: position f of `shape` (last index fastest) as an
 * index, and back. */
static inline void unravel(size_t f, size_t ndim, const size_t *shape,
                           size_t *idx)
{
    for (size_t d = ndim; d-- > 0;) {
        idx[d] = f % shape[d];
        f /= shape[d];
    }
}

static inline size_t ravel(size_t ndim, const size_t *shape, const size_t *idx)
{
    size_t f = 0;
    for (size_t d = 0; d < ndim; d++)
        f = f * shape[d] + idx[d];
    return f;
}

/* Failure injection: run `call` with its k-th allocation failing, for
 * k = 0, 1, ... until it succeeds.  Every failing run must return
 * GSL_ENOMEM, set `out` to NULL and report a message that starts with
 * `prefix` (a string literal naming the function called); `allocs` gets
 * the number of allocations of the successful run.  A leak on the way
 * out of a failing call shows in the reports of `make sanitize`
 * (LeakSanitizer) and of valgrind --trace-children=yes; neither turns it
 * into a failed test, so read them. */
#define OK_AFTER_ENOMEM(call, out, prefix, allocs)                            \
    do {                                                                      \
        for (long k_ = 0;; k_++) {                                            \
            cr_assert_lt(k_, 64, "%s never succeeded", #call);                \
            mha_clear_error();                                                \
            (out) = (void *)&k_; /* not NULL: the call must reset it */       \
            mha_debug_fail_alloc_after(k_);                                   \
            int st_ = (call);                                                 \
            mha_debug_fail_alloc_after(-1);                                   \
            if (st_ == GSL_SUCCESS) {                                         \
                (allocs) = (size_t)k_;                                        \
                break;                                                        \
            }                                                                 \
            cr_assert_eq(st_, GSL_ENOMEM, "%s with allocation %ld failing "   \
                         "returned %d: %s", #call, k_, st_,                   \
                         mha_last_error());                                   \
            cr_assert_null((out), "%s left its output set", #call);           \
            cr_assert(strncmp(mha_last_error(), prefix,                       \
                              strlen(prefix)) == 0,                           \
                      "allocation %ld: \"%s\" does not start with \"%s\"",  \
                      k_, mha_last_error(), prefix);                          \
        }                                                                     \
    } while (0)

/* Collect the trace (or anything else written to a FILE*) in memory. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} capture;

static inline void capture_start(capture *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    cr_assert_not_null(c->f);
}

/* Ends the capture and returns the text (freed by capture_free). */
static inline const char *capture_end(capture *c)
{
    fclose(c->f);
    c->f = NULL;
    return c->text;
}

static inline void capture_free(capture *c) { free(c->text); }

/* Send the trace to a new capture; capture_trace_is ends it. */
static inline void capture_trace(capture *c)
{
    capture_start(c);
    trace_to(c->f);
}

/* Stop the trace: what it wrote since capture_trace must be exactly
 * `expected`; frees the capture. */
static inline void capture_trace_is(capture *c, const char *expected)
{
    trace_to(NULL);
    cr_assert_str_eq(capture_end(c), expected);
    capture_free(c);
}

/* `call` must succeed and trace exactly `expected`. */
#define TRACES(call, expected)                                                \
    do {                                                                      \
        capture traces_;                                                      \
        capture_trace(&traces_);                                              \
        OK(call);                                                             \
        capture_trace_is(&traces_, (expected));                               \
    } while (0)

/* text holds each text named, anywhere in it (all of it shown where
 * one is missing): HOLDS(dot, "in0 -> s0", "s0 -> s1"). */
static inline void text_holds(const char *text, const char *const *texts,
                              size_t n)
{
    for (size_t i = 0; i < n; i++)
        cr_assert_not_null(strstr(text, texts[i]),
                           "\"%s\" not found in:\n%s", texts[i], text);
}
#define HOLDS(text, ...)                                                      \
    text_holds((text), (const char *const[]){__VA_ARGS__},                    \
               sizeof((const char *const[]){__VA_ARGS__}) / sizeof(char *))

/* Tests of process plumbing (what a child process inherits, how it is
 * started) cannot run under valgrind, which holds descriptors of its own
 * and starts every child itself; tools/memcheck.sh sets MHA_MEMCHECK, and
 * these tests still run in the plain and sanitizer passes. */
static inline void skip_under_valgrind(void)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("process plumbing is not observable under valgrind");
}

/* All a child wrote to fd until it closed it, into buf (at most n - 1
 * bytes, NUL-terminated); closes fd. */
static inline void read_until_eof(int fd, char *buf, size_t n)
{
    size_t used = 0;
    ssize_t got;
    while (used + 1 < n && (got = read(fd, buf + used, n - 1 - used)) > 0)
        used += (size_t)got;
    buf[used] = '\0';
    close(fd);
}

/* fork() with the child's stderr on a pipe: the pid, 0 in the child,
 * whose fd 2 is then the pipe (it exits 126 where that fails); in the
 * parent *err is the pipe's reading end (read it with read_until_eof). */
static inline pid_t fork_capturing_stderr(int *err)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (dup2(fds[1], 2) < 0)
            _exit(126);
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    close(fds[1]);
    *err = fds[0];
    return pid;
}

#endif
