//> 02
/* test_exercises.c: the tests of the coding exercises.
 *
 * Each suite ex_NAME checks one library function marked "@exercise NAME"
 * in src/, whose body the handout blanks for students, against the
 * rules written in the comment above it.  A suite calls only its own
 * exercise (and no other exercise function), so a student's `make grade`
 * says exactly which exercises pass; each test is one rule, so a body
 * that gets some rules right passes those tests.  The expected values
 * are fixtures written here as numbers: worked out by hand, or once in
 * Python from the definition or the paper's code, each saying where it
 * comes from; no test computes the value an exercise asks for with that
 * exercise's formula (tools/answer-leaks.py checks it), so reading the
 * tests shows what to compute, not how.
 *
 * A failing test says what it called (the sizes), where the value
 * differs, what it expected and what it got, and on a second line a hint
 * naming the section of the chapter that explains the usual mistake;
 * when the wrong value is the one that mistake gives (a straight
 * reshape, tile for repeat, the rotation turned the other way ...), the
 * hint names that mistake.  `make grade` shows the first failing
 * assertion of each exercise.  Every test of a blank fails, since a blank
 * returns GSL_EUNIMPL and no test accepts that status.  The suite
 * exercise_hints (not an exercise, so not graded) checks that each
 * section a hint names is a heading of that chapter's page. */
#include "check.h"

#include <complex.h>
#include <glob.h>

/* --- shared checks --------------------------------------------------- */

/* A call that must succeed: the status and the library's message. */
#define EX_OK(call)                                                           \
    do {                                                                      \
        int ex_status_ = (call);                                              \
        cr_assert_eq(ex_status_, GSL_SUCCESS,                                 \
                     "%s: expected status 0 (GSL_SUCCESS), got %d: %s",       \
                     #call, ex_status_, mha_last_error());                    \
    } while (0)

/* A tensor's shape: `what` names the call, `hint` the rule. */
static void ex_shape(const tensor *t, const char *what, const char *hint,
                     size_t ndim, const size_t *want)
{
    char got[TRACE_SHAPE_MAX], wanted[TRACE_SHAPE_MAX] = "(";
    size_t used = 1;
    for (size_t d = 0; d < ndim; d++)
        used += (size_t)snprintf(wanted + used, sizeof wanted - used, "%s%zu%s",
                                 d ? ", " : "", want[d],
                                 ndim == 1 ? "," : "");
    snprintf(wanted + used, sizeof wanted - used, ")");
    cr_assert_not_null(t, "%s: expected a tensor of shape %s, got NULL\n%s",
                       what, wanted, hint);
    tensor_shape_str(t, got, sizeof got);
    int same = t->ndim == ndim;
    for (size_t d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    cr_assert(same, "%s: expected shape %s, got %s\n%s", what, wanted, got,
              hint);
}
#define EX_SHAPE(t, what, hint, ...)                                          \
    ex_shape((t), (what), (hint), SHAPE(__VA_ARGS__))

/* Is n written in msg as a number of its own (not part of a longer one)? */
static int names_number(const char *msg, size_t n)
{
    for (const char *p = msg; *p;) {
        if (*p < '0' || *p > '9') {
            p++;
            continue;
        }
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (v == n && (p == msg || p[-1] != '.') && *end != '.')
            return 1;
        p = end;
    }
    return 0;
}

static char ex_not_null; /* an output's value before a call that fails */

/* What is wrong with a refusal, or NULL: *out must be NULL, and the
 * message start with the function's name and name each number of `nums`
 * (the values refused), as the comment above the function says.  Written
 * into `why` (with the hint); the macros below assert where they are
 * used, so that a refusal's problem comes after the values' in `make
 * grade`, which shows the lowest line that failed. */
static const char *ex_refusal_problem(const void *out, const char *what,
                                      const char *who, const char *hint,
                                      size_t count, const size_t *nums)
{
    static char why[2 * MHA_ERROR_MAX];
    const char *msg = mha_last_error();
    if (out)
        snprintf(why, sizeof why, "%s: expected the output set to NULL, got "
                 "a tensor\nhint: on failure the output is NULL and nothing "
                 "is allocated (the comment above the function)", what);
    else if (strncmp(msg, who, strlen(who)) != 0)
        snprintf(why, sizeof why, "%s: expected a message starting with "
                 "\"%s\", got \"%s\"\n%s", what, who, msg, hint);
    else {
        for (size_t k = 0; k < count; k++)
            if (!names_number(msg, nums[k])) {
                snprintf(why, sizeof why, "%s: expected a message naming "
                         "%zu, got \"%s\"\n%s", what, nums[k], msg, hint);
                return why;
            }
        return NULL;
    }
    return why;
}
/* `call` refused with exactly `want`, its output `out` (a tensor) left
 * NULL, with a message from `who` naming the numbers that follow. */
#define EX_REFUSED(call, out, want, who, hint, ...)                           \
    do {                                                                      \
        mha_clear_error();                                                    \
        (out) = (void *)&ex_not_null; /* the call must set it to NULL */    \
        int ex_got_ = (call);                                                 \
        EX_STATUS(ex_got_, (want), #call, (hint));                            \
        const char *ex_why_ = ex_refusal_problem((out), #call, (who), (hint), \
                                                 SHAPE(__VA_ARGS__));         \
        cr_assert_null(ex_why_, "%s", ex_why_);                               \
    } while (0)
/* the same for a call with no tensor output, `what` its text */
#define EX_REFUSED_CALL(call, what, want, who, hint, ...)                     \
    do {                                                                      \
        mha_clear_error();                                                    \
        int ex_got_ = (call);                                                 \
        EX_STATUS(ex_got_, (want), (what), (hint));                           \
        const char *ex_why_ = ex_refusal_problem(NULL, (what), (who), (hint), \
                                                 SHAPE(__VA_ARGS__));         \
        cr_assert_null(ex_why_, "%s", ex_why_);                               \
    } while (0)
#define EX_STATUS(got, want, what, hint)                                      \
    cr_assert_eq((got), (want), "%s: expected status %d (%s), got %d%s%s\n%s", \
                 (what), (want), gsl_strerror(want), (got),                   \
                 (got) ? ": " : "", (got) ? mha_last_error() : "", (hint))

/* Out of memory: the call runs again with its first, second, ...
 * allocation failing (mha_debug_fail_alloc_after), until it succeeds.
 * Each failing run must return GSL_ENOMEM with *out NULL and not crash;
 * what it allocated before the failure must be freed, which a grading run
 * under AddressSanitizer or valgrind reports as a leak when it is not
 * (this suite cannot count live allocations).  check.h's OK_AFTER_ENOMEM
 * runs the same loop for the library's suites; this one speaks to a
 * student (expected, got and a hint) and fails at the test's own line, so
 * that `make grade` shows a wrong value before a missed clean-up. */
#define H_MEMORY                                                              \
    "hint: check every status; when a step fails, free what the earlier "    \
    "steps made, set *out to NULL and return that status"
#define EX_CLEANS_UP(call, out)                                               \
    do {                                                                      \
        for (long ex_k_ = 0;; ex_k_++) {                                      \
            cr_assert_lt(ex_k_, 64, "%s: expected success once "              \
                         "allocations stop failing", #call);                  \
            (out) = (void *)&ex_k_; /* not NULL: the call must reset it */    \
            mha_debug_fail_alloc_after(ex_k_);                                \
            int ex_st_ = (call);                                              \
            mha_debug_fail_alloc_after(-1);                                   \
            if (ex_st_ == GSL_SUCCESS) {                                      \
                tensor_free((tensor *)(out));                                 \
                break;                                                        \
            }                                                                 \
            cr_assert_eq(ex_st_, GSL_ENOMEM, "%s with allocation %ld "       \
                         "failing: expected status %d (GSL_ENOMEM), got %d: " \
                         "%s\n" H_MEMORY, #call, ex_k_ + 1, GSL_ENOMEM,       \
                         ex_st_, mha_last_error());                           \
            cr_assert_null((out), "%s with allocation %ld failing: "          \
                           "expected the output set to NULL, got a tensor\n"  \
                           H_MEMORY, #call, ex_k_ + 1);                       \
        }                                                                     \
    } while (0)

/* --- ex_linear_forward_naive (chapter 02) ---------------------------- */

#define H_LINEAR                                                              \
    "hint: chapter 02, section 3 (The Linear layer over (B, L, D_in)): "     \
    "y = x W^T + b row by row; W is (out_features, in_features), so "        \
    "output feature o is made with row o of W"
#define H_LINEAR_NO_BIAS                                                      \
    "hint: chapter 02, section 3: a layer made without a bias has "          \
    "l->bias NULL, and y is x W^T alone"
#define H_LINEAR_STRIDES                                                      \
    "hint: chapter 02, section 3: read x through tensor_at (or TENSOR_AT): " \
    "this x is a permuted view, and its element [r, i] is not x->data[r*in + i]"
#define H_LINEAR_ORDER                                                        \
    "hint: chapter 02, section 3, and the comment above "                    \
    "linear_forward_naive: start each output at its bias, then add the "     \
    "products one feature at a time, first to last, in a loop of your own " \
    "(a BLAS call adds in its own order)"
#define H_LINEAR_REFUSE                                                       \
    "hint: chapter 02, section 3: an x whose last dimension is not "         \
    "in_features is refused with GSL_EBADLEN, as linear_forward does "       \
    "(linear_check)"

/* y (rows, out) against want, its numbers worked out by hand, at every
 * [r, o]. */
static void expect_linear(const tensor *y, const char *what,
                          const double *want, size_t rows, size_t out,
                          const char *hint)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double got = y->data[r * out + o], w = want[r * out + o];
            cr_assert(fabs(got - w) <= 1e-12 * (1 + fabs(w)),
                      "%s: row %zu, output feature %zu: expected %g, got "
                      "%g\n%s",
                      what, r, o, w, got, hint);
        }
}

/* W (2, 3) = [[1, 0, -1], [2, 1, 0]], b = [0.5, -1]: by hand, the first
 * output of a row [x0, x1, x2] is x0 - x2 + 0.5 and the second
 * 2 x0 + x1 - 1 (without b: x0 - x2 and 2 x0 + x1). */
static const double lin_w[] = {1, 0, -1, 2, 1, 0}, lin_b[] = {0.5, -1};

Test(ex_linear_forward_naive, one_row_by_hand)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 1));
    memcpy(l.weight->data, lin_w, sizeof lin_w);
    memcpy(l.bias->data, lin_b, sizeof lin_b);
    tensor *x, *y;
    EX_OK(tensor_from_array(SHAPE(1, 3), (double[]){1, 2, 3}, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    const char *what = "linear_forward_naive(W (2, 3), b (2,), x (1, 3) = "
                       "[1, 2, 3])";
    EX_SHAPE(y, what, H_LINEAR, 1, 2);
    /* [1, 2, 3] -> [1 - 3 + 0.5, 2 + 2 - 1] */
    expect_linear(y, what, (double[]){-1.5, 3}, 1, 2, H_LINEAR);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

Test(ex_linear_forward_naive, every_row_of_a_batch)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 1));
    memcpy(l.weight->data, lin_w, sizeof lin_w);
    memcpy(l.bias->data, lin_b, sizeof lin_b);
    double xs[] = {1, 2, 3, -1, 0, 4, 0.5, 0.25, -2, 3, -3, 1};
    tensor *x, *y;
    EX_OK(tensor_from_array(SHAPE(2, 2, 3), xs, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    const char *what = "linear_forward_naive(W (2, 3), b (2,), x (2, 2, 3))";
    EX_SHAPE(y, what, H_LINEAR, 2, 2, 2);
    /* the rows [1, 2, 3], [-1, 0, 4], [0.5, 0.25, -2], [3, -3, 1] */
    expect_linear(y, what, (double[]){-1.5, 3, -4.5, -3, 3, 0.25, 2.5, 2}, 4,
                  2, H_LINEAR);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

Test(ex_linear_forward_naive, without_a_bias)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 0));
    memcpy(l.weight->data, lin_w, sizeof lin_w);
    double xs[] = {1, 2, 3, -1, 0, 4};
    tensor *x, *y;
    EX_OK(tensor_from_array(SHAPE(2, 3), xs, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    const char *what = "linear_forward_naive(W (2, 3), no bias, x (2, 3))";
    EX_SHAPE(y, what, H_LINEAR_NO_BIAS, 2, 2);
    expect_linear(y, what, (double[]){-2, 4, -5, -2}, 2, 2, H_LINEAR_NO_BIAS);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

/* x (2, 3) is a permuted view of a (3, 2) tensor: x[r, i] = base[i, r]. */
Test(ex_linear_forward_naive, reads_x_through_its_strides)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 1));
    memcpy(l.weight->data, lin_w, sizeof lin_w);
    memcpy(l.bias->data, lin_b, sizeof lin_b);
    tensor *base, *x, *y;
    EX_OK(tensor_from_array(SHAPE(3, 2), (double[]){1, -1, 2, 0, 3, 4}, &base));
    EX_OK(tensor_permute(base, SHAPE(1, 0), &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    const char *what = "linear_forward_naive(W (2, 3), b (2,), x (2, 3) a "
                       "permuted view, strides (1, 2))";
    EX_SHAPE(y, what, H_LINEAR_STRIDES, 2, 2);
    /* x's rows are [1, 2, 3] and [-1, 0, 4] */
    expect_linear(y, what, (double[]){-1.5, 3, -4.5, -3}, 2, 2,
                  H_LINEAR_STRIDES);
    tensor_free(base);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

/* The order of the sums, which rounding shows: from the bias, first
 * feature to last, 1 + 1e17 is 1e17 (the 1 is lost) and 1e17 - 1e17 is
 * 0; the products added first and the bias last give 1. */
Test(ex_linear_forward_naive, adds_from_the_bias_first_to_last)
{
    linear l;
    EX_OK(linear_init(&l, "W", 2, 1, 1));
    memcpy(l.weight->data, (double[]){1, 1}, 2 * sizeof(double));
    l.bias->data[0] = 1;
    tensor *x, *y;
    EX_OK(tensor_from_array(SHAPE(1, 2), (double[]){1e17, -1e17}, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    const char *what = "linear_forward_naive(W [[1, 1]], b [1], x [1e17, "
                       "-1e17])";
    EX_SHAPE(y, what, H_LINEAR_ORDER, 1, 1);
    cr_assert(y->data[0] == 0, "%s: expected 0 (1 + 1e17 is 1e17 in "
              "doubles, then 1e17 - 1e17), got %g\n%s", what, y->data[0],
              H_LINEAR_ORDER);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

Test(ex_linear_forward_naive, refuses_a_feature_mismatch)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 0));
    tensor *x, *y;
    EX_OK(tensor_alloc(SHAPE(2, 5), &x));
    EX_REFUSED(linear_forward_naive(&l, x, &y), y, GSL_EBADLEN,
               "linear_forward_naive", H_LINEAR_REFUSE, 5, 3);
    tensor_free(x);
    linear_free(&l);
}

Test(ex_linear_forward_naive, cleans_up_when_memory_runs_out)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 1));
    tensor *x, *y;
    EX_OK(tensor_alloc(SHAPE(2, 3), &x));
    EX_OK(linear_forward_naive(&l, x, &y)); /* a blank fails here */
    tensor_free(y);
    EX_CLEANS_UP(linear_forward_naive(&l, x, &y), y);
    tensor_free(x);
    linear_free(&l);
}

//> 03
/* --- ex_causal_valid_lens (chapter 03) ------------------------------- */

#define H_CAUSAL                                                              \
    "hint: chapter 03, section 6 (A causal mask is a 2-D valid_lens): "      \
    "query i sees keys 0 .. i and none after, so every row is 1, 2, ..., len"
#define H_CAUSAL_REFUSE                                                       \
    "hint: chapter 03, section 6: batch or len 0 is refused with "           \
    "GSL_EINVAL, a message naming both, and nothing allocated"

/* causal_valid_lens(batch, len): every row is `row` (len numbers). */
static void expect_causal(size_t batch, size_t len, const double *row)
{
    char what[64];
    snprintf(what, sizeof what, "causal_valid_lens(batch %zu, len %zu)", batch,
             len);
    tensor *lens;
    EX_OK(causal_valid_lens(batch, len, &lens));
    EX_SHAPE(lens, what, H_CAUSAL, batch, len);
    for (size_t b = 0; b < batch; b++)
        for (size_t i = 0; i < len; i++) {
            double got = *TENSOR_AT(lens, b, i);
            cr_assert(got == row[i],
                      "%s: [%zu, %zu] (query %zu): expected %g, got %g\n%s",
                      what, b, i, i, row[i], got, H_CAUSAL);
        }
    tensor_free(lens);
}

Test(ex_causal_valid_lens, one_row_counts_up_to_len)
{
    expect_causal(1, 5, (double[]){1, 2, 3, 4, 5});
}

Test(ex_causal_valid_lens, every_example_gets_the_same_row)
{
    expect_causal(3, 4, (double[]){1, 2, 3, 4});
    expect_causal(2, 1, (double[]){1});
}

Test(ex_causal_valid_lens, refuses_zero_sizes)
{
    tensor *lens;
    EX_REFUSED(causal_valid_lens(0, 5, &lens), lens, GSL_EINVAL,
               "causal_valid_lens", H_CAUSAL_REFUSE, 0, 5);
    EX_REFUSED(causal_valid_lens(2, 0, &lens), lens, GSL_EINVAL,
               "causal_valid_lens", H_CAUSAL_REFUSE, 2, 0);
}

Test(ex_causal_valid_lens, cleans_up_when_memory_runs_out)
{
    tensor *lens;
    EX_OK(causal_valid_lens(2, 3, &lens)); /* a blank fails here */
    tensor_free(lens);
    EX_CLEANS_UP(causal_valid_lens(2, 3, &lens), lens);
}

//<
//> 06
/* --- ex_transpose_qkv (chapter 06) ----------------------------------- */

#define H_QKV                                                                 \
    "hint: chapter 06, section 2 (Where each number goes): x[b, i, j] "      \
    "lands at heads[b*h + j/p, i, j % p]"
#define H_QKV_SHAPE                                                           \
    "hint: chapter 06, section 1: (B, n, d_model) -> (B*h, n, p) with "      \
    "p = d_model/h"
#define H_QKV_STRAIGHT                                                        \
    "hint: chapter 06, section 3 (Why not reshape straight to (B*h, n, "     \
    "p)?): a reshape moves no number; reshape to (B, n, h, p), permute to "  \
    "(B, h, n, p), then reshape"
#define H_QKV_REFUSE                                                          \
    "hint: chapter 06, section 6 (When d_model does not divide into h "      \
    "heads): the reshape to (B, n, h, -1) refuses, GSL_EBADLEN"
#define H_QKV_INVALID                                                         \
    "hint: the comment above transpose_qkv: 0 heads is refused by the "      \
    "reshape, GSL_EINVAL"

/* transpose_qkv of x (B, n, d) = 0, 1, 2, ... into h heads against want,
 * the heads (B*h, n, d/h) in row-major order, every number checked.  x's
 * number v is x[v / (n d), v / d % n, v % d]; a number equal to its own
 * place in the heads is what a straight reshape, which moves nothing,
 * leaves there, and gets that hint. */
static void expect_heads(size_t B, size_t n, size_t d, size_t h,
                         const double *want)
{
    size_t p = d / h;
    char what[96];
    snprintf(what, sizeof what, "transpose_qkv(x (%zu, %zu, %zu) = 0, 1, 2, "
             "..., %zu heads)", B, n, d, h);
    tensor *x, *heads;
    EX_OK(tensor_alloc(SHAPE(B, n, d), &x));
    tensor_fill_arange(x, 0, 1);
    EX_OK(transpose_qkv(x, h, &heads));
    EX_SHAPE(heads, what, H_QKV_SHAPE, B * h, n, p);
    for (size_t r = 0, at = 0; r < B * h; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < p; k++, at++) {
                size_t v = (size_t)want[at];
                double got = *TENSOR_AT(heads, r, i, k);
                cr_assert(got == want[at],
                          "%s: heads[%zu, %zu, %zu] should hold x[%zu, %zu, "
                          "%zu]: expected %g, got %g\n%s",
                          what, r, i, k, v / (n * d), v / d % n, v % d,
                          want[at], got,
                          got == (double)at ? H_QKV_STRAIGHT : H_QKV);
            }
    tensor_free(x);
    tensor_free(heads);
}

Test(ex_transpose_qkv, shape_is_batch_times_heads)
{
    tensor *x, *heads;
    EX_OK(tensor_alloc(SHAPE(2, 3, 12), &x));
    EX_OK(transpose_qkv(x, 4, &heads));
    EX_SHAPE(heads, "transpose_qkv(x (2, 3, 12), 4 heads)", H_QKV_SHAPE, 8, 3,
             3);
    tensor_free(x);
    tensor_free(heads);
}

/* d2l's example of section 1: one example, each head a strip of features:
 * head 0 is features 0-1 of both positions (x's 0, 1 and 16, 17), head 1
 * features 2-3, ... (written out by hand from d2l's picture) */
Test(ex_transpose_qkv, one_example_into_eight_heads)
{
    expect_heads(1, 2, 16, 8,
                 (double[]){0,  1,  16, 17, 2,  3,  18, 19, 4,  5,  20,
                            21, 6,  7,  22, 23, 8,  9,  24, 25, 10, 11,
                            26, 27, 12, 13, 28, 29, 14, 15, 30, 31});
}

/* two examples: the last reshape copies; head k of example b, features
 * 2k, 2k+1 of its three positions, is row 4b + k (by hand) */
Test(ex_transpose_qkv, every_number_lands_where_it_should)
{
    expect_heads(2, 3, 8, 4,
                 (double[]){0,  1,  8,  9,  16, 17, 2,  3,  10, 11, 18, 19,
                            4,  5,  12, 13, 20, 21, 6,  7,  14, 15, 22, 23,
                            24, 25, 32, 33, 40, 41, 26, 27, 34, 35, 42, 43,
                            28, 29, 36, 37, 44, 45, 30, 31, 38, 39, 46, 47});
}

/* one head: the heads are x's numbers in x's order */
Test(ex_transpose_qkv, one_head_is_the_input)
{
    double same[24];
    for (size_t k = 0; k < 24; k++)
        same[k] = (double)k;
    expect_heads(2, 3, 4, 1, same);
}

Test(ex_transpose_qkv, refuses_heads_that_do_not_divide)
{
    tensor *x, *heads;
    EX_OK(tensor_alloc(SHAPE(1, 2, 14), &x));
    EX_REFUSED(transpose_qkv(x, 4, &heads), heads, GSL_EBADLEN,
               "tensor_reshape", H_QKV_REFUSE, 14, 4);
    EX_REFUSED(transpose_qkv(x, 0, &heads), heads, GSL_EINVAL,
               "tensor_reshape", H_QKV_INVALID, 0);
    tensor_free(x);
}

Test(ex_transpose_qkv, cleans_up_when_memory_runs_out)
{
    tensor *x, *heads;
    EX_OK(tensor_alloc(SHAPE(2, 3, 8), &x));
    EX_OK(transpose_qkv(x, 4, &heads)); /* a blank fails here */
    tensor_free(heads);
    EX_CLEANS_UP(transpose_qkv(x, 4, &heads), heads);
    tensor_free(x);
}

//<
//> 06
/* --- ex_transpose_output (chapter 06) -------------------------------- */

#define H_OUT                                                                 \
    "hint: chapter 06, section 5 (And back: transpose_output): "             \
    "heads[b*h + k, i, j] goes back to out[b, i, k*p + j]"
#define H_OUT_SHAPE                                                           \
    "hint: chapter 06, section 5: (B*h, n, p) -> (B, n, h*p)"
#define H_OUT_STRAIGHT                                                        \
    "hint: chapter 06, section 5 (And back: transpose_output): a reshape "   \
    "moves no number; reshape to (B, h, n, p), permute to (B, n, h, p), "    \
    "then reshape"
#define H_OUT_REFUSE                                                          \
    "hint: the comment above transpose_output: a first dimension that h "    \
    "does not divide is refused by the reshape, GSL_EBADLEN"
#define H_OUT_INVALID                                                         \
    "hint: the comment above transpose_output: 0 heads, or an input that "   \
    "is not 3-D, is refused by the reshape, GSL_EINVAL"

/* transpose_output of heads (B*h, n, p) = 0, 1, 2, ... against want, the
 * output (B, n, h*p) in row-major order, every number checked.  The
 * heads' number v is heads[v / (n p), v / p % n, v % p]; a number equal
 * to its own place in the output is a straight reshape's. */
static void expect_joined(size_t B, size_t n, size_t h, size_t p,
                          const double *want)
{
    char what[96];
    snprintf(what, sizeof what, "transpose_output(heads (%zu, %zu, %zu) = 0, "
             "1, 2, ..., %zu heads)", B * h, n, p, h);
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(B * h, n, p), &heads));
    tensor_fill_arange(heads, 0, 1);
    EX_OK(transpose_output(heads, h, &joined));
    EX_SHAPE(joined, what, H_OUT_SHAPE, B, n, h * p);
    for (size_t b = 0, at = 0; b < B; b++)
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < h * p; f++, at++) {
                size_t v = (size_t)want[at], r = v / (n * p);
                double got = *TENSOR_AT(joined, b, i, f);
                cr_assert(got == want[at],
                          "%s: out[%zu, %zu, %zu] should hold heads[%zu, %zu, "
                          "%zu] (head %zu of example %zu): expected %g, got "
                          "%g\n%s",
                          what, b, i, f, r, v / p % n, v % p, r % h, b,
                          want[at], got,
                          got == (double)at ? H_OUT_STRAIGHT : H_OUT);
            }
    tensor_free(heads);
    tensor_free(joined);
}

Test(ex_transpose_output, shape_is_batch_by_d_model)
{
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(8, 3, 3), &heads));
    EX_OK(transpose_output(heads, 4, &joined));
    EX_SHAPE(joined, "transpose_output(heads (8, 3, 3), 4 heads)",
             H_OUT_SHAPE, 2, 3, 12);
    tensor_free(heads);
    tensor_free(joined);
}

/* position i of the output is position i of heads 0, 1, ..., 7 side by
 * side (heads[k] holds 4k .. 4k + 3: its two positions), by hand */
Test(ex_transpose_output, one_example_from_eight_heads)
{
    expect_joined(1, 2, 8, 2,
                  (double[]){0,  1,  4,  5,  8,  9,  12, 13, 16, 17, 20,
                             21, 24, 25, 28, 29, 2,  3,  6,  7,  10, 11,
                             14, 15, 18, 19, 22, 23, 26, 27, 30, 31});
}

/* heads rows 0-3 are example 0's heads, rows 4-7 example 1's (each row
 * 6 numbers: three positions of two), by hand */
Test(ex_transpose_output, heads_go_back_side_by_side)
{
    expect_joined(2, 3, 4, 2,
                  (double[]){0,  1,  6,  7,  12, 13, 18, 19, 2,  3,  8,  9,
                             14, 15, 20, 21, 4,  5,  10, 11, 16, 17, 22, 23,
                             24, 25, 30, 31, 36, 37, 42, 43, 26, 27, 32, 33,
                             38, 39, 44, 45, 28, 29, 34, 35, 40, 41, 46, 47});
}

Test(ex_transpose_output, refuses_a_batch_that_does_not_divide)
{
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(6, 2, 2), &heads));
    EX_REFUSED(transpose_output(heads, 4, &joined), joined, GSL_EBADLEN,
               "tensor_reshape", H_OUT_REFUSE, 6, 4);
    EX_REFUSED(transpose_output(heads, 0, &joined), joined, GSL_EINVAL,
               "tensor_reshape", H_OUT_INVALID, 0);
    tensor_free(heads);
    EX_OK(tensor_alloc(SHAPE(6, 2), &heads));
    EX_REFUSED(transpose_output(heads, 2, &joined), joined, GSL_EINVAL,
               "tensor_reshape", H_OUT_INVALID, 2);
    tensor_free(heads);
}

Test(ex_transpose_output, cleans_up_when_memory_runs_out)
{
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(8, 3, 2), &heads));
    EX_OK(transpose_output(heads, 4, &joined)); /* a blank fails here */
    tensor_free(joined);
    EX_CLEANS_UP(transpose_output(heads, 4, &joined), joined);
    tensor_free(heads);
}

//<
//> 07
/* --- ex_repeat_valid_lens (chapter 07) ------------------------------- */

#define H_REPEAT                                                              \
    "hint: chapter 07, section 1 (One length per example): row b*h + i is "  \
    "head i of example b and takes valid_lens[b]"
#define H_REPEAT_TILE                                                         \
    "hint: chapter 07, section 2 (Why not tile?): repeat each length h "     \
    "times in place, [3, 2] -> [3, 3, 3, 2, 2, 2], not [3, 2, 3, 2, 3, 2]"
#define H_REPEAT_ROWS                                                         \
    "hint: chapter 07, section 3 (One length per query): (B, Lq) -> "        \
    "(B*h, Lq), row b*h + i a copy of row b"
#define H_REPEAT_META                                                         \
    "hint: the comment above repeat_valid_lens: a meta valid_lens (shapes "  \
    "only, data NULL) gives a meta output of the repeated shape"
#define H_REPEAT_REFUSE                                                       \
    "hint: the comment above repeat_valid_lens: 0 heads, or a valid_lens "   \
    "that is neither (B,) nor (B, Lq), is refused with GSL_EINVAL"

/* repeat_valid_lens of lens (B,) or (B, Lq) into h heads against want
 * and, for the hint, tiled (what tile gives), both written out by hand,
 * every number checked. */
static void expect_repeated(const tensor *lens, size_t h, const double *want,
                            const double *tiled, const char *what,
                            const char *hint)
{
    size_t B = lens->shape[0], row = lens->ndim == 2 ? lens->shape[1] : 1;
    tensor *out;
    EX_OK(repeat_valid_lens(lens, h, &out));
    if (lens->ndim == 1)
        EX_SHAPE(out, what, hint, B * h);
    else
        EX_SHAPE(out, what, hint, B * h, row);
    for (size_t r = 0, at = 0; r < B * h; r++)
        for (size_t j = 0; j < row; j++, at++) {
            double got = out->data[at];
            cr_assert(got == want[at],
                      "%s: row %zu%s: expected %g, got %g\n%s",
                      what, r, lens->ndim == 2 ? ", query" : "", want[at], got,
                      got == tiled[at] ? H_REPEAT_TILE : hint);
        }
    tensor_free(out);
}

Test(ex_repeat_valid_lens, one_length_per_example)
{
    tensor *lens;
    EX_OK(tensor_from_array(SHAPE(3), (double[]){4, 1, 2}, &lens));
    expect_repeated(lens, 2, (double[]){4, 4, 1, 1, 2, 2},
                    (double[]){4, 1, 2, 4, 1, 2},
                    "repeat_valid_lens(valid_lens [4, 1, 2], 2 heads)",
                    H_REPEAT);
    tensor_free(lens);
    EX_OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    expect_repeated(lens, 3, (double[]){3, 3, 3, 2, 2, 2},
                    (double[]){3, 2, 3, 2, 3, 2},
                    "repeat_valid_lens(valid_lens [3, 2], 3 heads)", H_REPEAT);
    tensor_free(lens);
}

Test(ex_repeat_valid_lens, one_length_per_query)
{
    tensor *lens;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    expect_repeated(lens, 3, (double[]){1, 3, 1, 3, 1, 3, 2, 4, 2, 4, 2, 4},
                    (double[]){1, 3, 2, 4, 1, 3, 2, 4, 1, 3, 2, 4},
                    "repeat_valid_lens(valid_lens (2, 2) = [[1, 3], [2, 4]], "
                    "3 heads)",
                    H_REPEAT_ROWS);
    tensor_free(lens);
}

/* mha trace works on shapes alone: a meta valid_lens has no numbers */
Test(ex_repeat_valid_lens, shapes_alone_for_a_meta_input)
{
    tensor *lens, *out;
    EX_OK(tensor_alloc_meta(SHAPE(3, 5), &lens));
    EX_OK(repeat_valid_lens(lens, 2, &out));
    const char *what = "repeat_valid_lens(meta valid_lens (3, 5), 2 heads)";
    EX_SHAPE(out, what, H_REPEAT_META, 6, 5);
    cr_assert(tensor_is_meta(out),
              "%s: expected a meta tensor (no numbers), got one with numbers"
              "\n%s", what, H_REPEAT_META);
    tensor_free(lens);
    tensor_free(out);
}

Test(ex_repeat_valid_lens, refuses_zero_heads_and_other_shapes)
{
    tensor *lens, *out;
    EX_OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    EX_REFUSED(repeat_valid_lens(lens, 0, &out), out, GSL_EINVAL,
               "repeat_valid_lens", H_REPEAT_REFUSE, 0);
    tensor_free(lens);
    EX_OK(tensor_alloc(SHAPE(2, 3, 4), &lens));
    EX_REFUSED(repeat_valid_lens(lens, 2, &out), out, GSL_EINVAL,
               "repeat_valid_lens", H_REPEAT_REFUSE, 3);
    tensor_free(lens);
}

Test(ex_repeat_valid_lens, cleans_up_when_memory_runs_out)
{
    tensor *lens, *out;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    EX_OK(repeat_valid_lens(lens, 3, &out)); /* a blank fails here */
    tensor_free(out);
    EX_CLEANS_UP(repeat_valid_lens(lens, 3, &out), out);
    tensor_free(lens);
}

//<
//> 15
/* --- ex_rope_rotate_pair (chapter 15) -------------------------------- */

#define H_ROPE                                                                \
    "hint: chapter 15, section 4 (Rotary embeddings): (x0, x1) is a point "  \
    "of the plane, turned about the origin by the angle: its length stays, " \
    "and a quarter turn takes (1, 0) to (0, 1)"
#define H_ROPE_DIRECTION                                                      \
    "hint: chapter 15, section 4 (Rotary embeddings): the turn is "          \
    "counterclockwise, from the first feature towards the second: a "        \
    "quarter turn takes (1, 0) to (0, 1), not to (0, -1)"

/* v for a message: 0 for what rounding left of a zero, like cos(pi/2) */
static double tidy(double v)
{
    return fabs(v) < 1e-12 ? 0.0 : v;
}

/* (x0, x1) turned by a: both outputs within 1e-15 (relative, 1e-14 for
 * large values) of the formula; a result that is the turn by -a gets the
 * hint on the direction. */
static void expect_turn(double x0, double x1, double a, const char *angle)
{
    double y0 = NAN, y1 = NAN;
    EX_OK(rope_rotate_pair(x0, x1, a, &y0, &y1));
    /* the pair as the complex number x0 + i x1, turned by multiplying
     * with e^{ia} (and, the wrong way, e^{-ia}) */
    double complex w = (x0 + x1 * I) * cexp(I * a);
    double complex b = (x0 + x1 * I) * cexp(-I * a);
    double w0 = creal(w), w1 = cimag(w), b0 = creal(b), b1 = cimag(b);
    double tol = 1e-15 * (1 + fabs(x0) + fabs(x1));
    int right = fabs(y0 - w0) <= tol && fabs(y1 - w1) <= tol;
    int backwards = fabs(y0 - b0) <= tol && fabs(y1 - b1) <= tol;
    cr_assert(right,
              "rope_rotate_pair(x0 %g, x1 %g, angle %s): expected (y0, y1) = "
              "(%.6g, %.6g), got (%.6g, %.6g)\n%s",
              x0, x1, angle, tidy(w0), tidy(w1), tidy(y0), tidy(y1),
              backwards ? H_ROPE_DIRECTION : H_ROPE);
}

/* A quarter turn takes (1, 0) to (0, 1) and (0, 1) to (-1, 0). */
Test(ex_rope_rotate_pair, quarter_turn_is_counterclockwise)
{
    expect_turn(1, 0, M_PI / 2, "pi/2");
    expect_turn(0, 1, M_PI / 2, "pi/2");
}

Test(ex_rope_rotate_pair, half_turn_and_no_turn)
{
    expect_turn(3, -2, M_PI, "pi");
    expect_turn(3, -2, 0, "0");
}

Test(ex_rope_rotate_pair, any_angle_either_way)
{
    expect_turn(2, 1, 0.3, "0.3");
    expect_turn(-1.5, 4, -1.2, "-1.2");
    expect_turn(0.25, -0.5, 7.5, "7.5");
}

/* Position m turns pair k by m theta_k: far positions are large angles,
 * and the length of the pair stays. */
Test(ex_rope_rotate_pair, a_far_position_keeps_the_length)
{
    double y0, y1, a = 4095 * 0.01;
    EX_OK(rope_rotate_pair(3, 4, a, &y0, &y1));
    cr_assert(fabs(y0 * y0 + y1 * y1 - 25) <= 1e-12,
              "rope_rotate_pair(x0 3, x1 4, angle 40.95): expected a pair of "
              "length 5, got (%.6g, %.6g), length %.6g\n%s",
              y0, y1, sqrt(y0 * y0 + y1 * y1), H_ROPE);
    expect_turn(3, 4, a, "40.95");
}

//<
//> 16
/* --- ex_attention_madds (chapter 16) --------------------------------- */

#define H_MADDS                                                               \
    "hint: chapter 16, section 4 (The work per step): each (query, key) "    \
    "pair costs d_model multiply-adds for its score and d_model more for "   \
    "its share of the weighted sum"
#define H_MADDS_CAUSAL                                                        \
    "hint: chapter 16, section 4 (The work per step): under the causal "     \
    "mask, aligned at the end, query i sees keys 0 .. i + n_k - n_q, none "  \
    "when that is negative"
#define H_MADDS_REFUSE                                                        \
    "hint: the comment above attention_madds: n_q, n_k or d_model 0 is "     \
    "refused with GSL_EINVAL, naming all three"

/* attention_madds against want, counted by hand: `pairs` (query, key)
 * pairs, each d_model multiply-adds for the score and d_model for the
 * weighted sum.  A count half or twice want is off in the cost of a
 * pair; another one, with the mask, in the pairs. */
static void expect_madds(size_t n_q, size_t n_k, size_t d, int causal,
                         double pairs, double want)
{
    double m = -1;
    EX_OK(attention_madds(n_q, n_k, d, causal, &m));
    const char *hint = H_MADDS;
    if (causal && 2 * m != want && m != 2 * want)
        hint = H_MADDS_CAUSAL;
    cr_assert(m == want,
              "attention_madds(n_q %zu, n_k %zu, d_model %zu, causal %d): "
              "expected %g (%g pairs), got %g\n%s",
              n_q, n_k, d, causal, want, pairs, m, hint);
}

/* one query, the last position, sees all n_k keys: 7 pairs of 16 */
Test(ex_attention_madds, one_new_query_meets_every_cached_key)
{
    expect_madds(1, 7, 8, 1, 7, 112);
    expect_madds(1, 1, 4, 1, 1, 8);
}

Test(ex_attention_madds, no_mask_counts_every_pair)
{
    expect_madds(4, 4, 8, 0, 16, 256);
    expect_madds(3, 8, 6, 0, 24, 288);
    expect_madds(6, 4, 6, 0, 24, 288);
}

/* t queries over their own t keys see 1, 2, ..., t of them: 3 queries
 * 1 + 2 + 3 = 6 pairs of 12, 5 queries 15 pairs of 4 */
Test(ex_attention_madds, causal_recompute_counts_the_triangle)
{
    expect_madds(3, 3, 6, 1, 6, 72);
    expect_madds(5, 5, 2, 1, 15, 60);
}

Test(ex_attention_madds, causal_mask_aligned_at_the_end)
{
    /* fewer queries: positions 5, 6, 7 of 8 see 6 + 7 + 8 keys */
    expect_madds(3, 8, 6, 1, 21, 252);
    /* more queries: the first 2 see nothing, the others 1 + 2 + 3 + 4 */
    expect_madds(6, 4, 6, 1, 10, 120);
}

Test(ex_attention_madds, refuses_zero_sizes)
{
    double m;
    EX_REFUSED_CALL(attention_madds(0, 2, 1, 1, &m),
                    "attention_madds(n_q 0, n_k 2, d_model 1, causal 1)",
                    GSL_EINVAL, "attention_madds", H_MADDS_REFUSE, 0, 2, 1);
    EX_REFUSED_CALL(attention_madds(2, 0, 3, 0, &m),
                    "attention_madds(n_q 2, n_k 0, d_model 3, causal 0)",
                    GSL_EINVAL, "attention_madds", H_MADDS_REFUSE, 2, 0, 3);
    EX_REFUSED_CALL(attention_madds(2, 3, 0, 1, &m),
                    "attention_madds(n_q 2, n_k 3, d_model 0, causal 1)",
                    GSL_EINVAL, "attention_madds", H_MADDS_REFUSE, 2, 3, 0);
}

//<
//> 17
/* --- ex_gqa_kv_head (chapter 17) ------------------------------------- */

#define H_GQA                                                                 \
    "hint: chapter 17, section 1 (Which key-value head a query head "        \
    "reads): the heads are grouped in order, h/G consecutive heads to a "    \
    "group: with h = 8, G = 2, heads 0-3 read 0 and heads 4-7 read 1"
#define H_GQA_ZERO                                                            \
    "hint: chapter 17, section 1: kv_heads 0 means num_heads (multi-head "   \
    "attention, every head its own)"
#define H_GQA_REFUSE                                                          \
    "hint: chapter 17, section 1: kv_heads must divide num_heads, and head " \
    "be below num_heads; otherwise GSL_EINVAL, naming them"

/* gqa_kv_head(i, h, G) for every head i against want[i], written out by
 * hand from the grouping (h/G consecutive heads to a group, in order). */
static void expect_groups(size_t h, size_t G, const size_t *want,
                          const char *hint)
{
    for (size_t i = 0; i < h; i++) {
        size_t kv = 999;
        mha_clear_error();
        int st = gqa_kv_head(i, h, G, &kv);
        cr_assert_eq(st, GSL_SUCCESS,
                     "gqa_kv_head(head %zu, num_heads %zu, kv_heads %zu): "
                     "expected status 0 (GSL_SUCCESS), got %d: %s%s%s",
                     i, h, G, st, mha_last_error(),
                     st == GSL_EUNIMPL ? "" : "\n", /* a blank: no hint */
                     st == GSL_EUNIMPL ? "" : hint);
        cr_assert_eq(kv, want[i],
                     "gqa_kv_head(head %zu, num_heads %zu, kv_heads %zu): "
                     "expected key-value head %zu, got %zu\n%s",
                     i, h, G, want[i], kv,
                     G && kv == i % G && kv != want[i] ? H_GQA : hint);
    }
}

Test(ex_gqa_kv_head, consecutive_heads_share_a_group)
{
    expect_groups(8, 2, (size_t[]){0, 0, 0, 0, 1, 1, 1, 1}, H_GQA);
    expect_groups(12, 3, (size_t[]){0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2},
                  H_GQA);
}

Test(ex_gqa_kv_head, multi_head_and_multi_query)
{
    /* multi-head: each its own */
    expect_groups(6, 6, (size_t[]){0, 1, 2, 3, 4, 5}, H_GQA);
    /* multi-query: the only one */
    expect_groups(6, 1, (size_t[]){0, 0, 0, 0, 0, 0}, H_GQA);
}

Test(ex_gqa_kv_head, kv_heads_0_means_num_heads)
{
    expect_groups(6, 0, (size_t[]){0, 1, 2, 3, 4, 5}, H_GQA_ZERO);
    expect_groups(1, 0, (size_t[]){0}, H_GQA_ZERO);
}

Test(ex_gqa_kv_head, refuses_groups_that_do_not_divide)
{
    size_t kv;
    EX_REFUSED_CALL(gqa_kv_head(0, 8, 3, &kv),
                    "gqa_kv_head(head 0, num_heads 8, kv_heads 3)", GSL_EINVAL,
                    "gqa_kv_head", H_GQA_REFUSE, 8, 3);
    EX_REFUSED_CALL(gqa_kv_head(0, 0, 0, &kv),
                    "gqa_kv_head(head 0, num_heads 0, kv_heads 0)", GSL_EINVAL,
                    "gqa_kv_head", H_GQA_REFUSE, 0);
}

Test(ex_gqa_kv_head, refuses_a_head_out_of_range)
{
    size_t kv;
    EX_REFUSED_CALL(gqa_kv_head(8, 8, 2, &kv),
                    "gqa_kv_head(head 8, num_heads 8, kv_heads 2)", GSL_EINVAL,
                    "gqa_kv_head", H_GQA_REFUSE, 8);
}
//<
//> 18
/* --- ex_mask_key_padding_from_lens (chapter 18) ---------------------- */

#define H_KPM                                                                 \
    "hint: chapter 18, section 1 (Three ways to say which keys a query "     \
    "sees): row b is 0 (False) for example b's first valid_lens[b] keys "    \
    "and 1 (True: ignore the key) for the rest"
#define H_KPM_REFUSE                                                          \
    "hint: the comment above mask_key_padding_from_lens: valid_lens not "    \
    "(B,), or a length that is not a whole number 0 .. Lk, is refused with " \
    "GSL_EINVAL and a message naming it, and nothing allocated"

/* mask_key_padding_from_lens(lens (B,), Lk) against want (B, Lk),
 * written out by hand. */
static void expect_padding(size_t B, const double *lens, size_t Lk,
                           const double *want)
{
    char what[128];
    int used = snprintf(what, sizeof what, "mask_key_padding_from_lens(valid_lens [");
    for (size_t b = 0; b < B && used < (int)sizeof what; b++)
        used += snprintf(what + used, sizeof what - (size_t)used, "%s%g",
                         b ? ", " : "", lens[b]);
    if (used < (int)sizeof what)
        snprintf(what + used, sizeof what - (size_t)used, "], Lk %zu)", Lk);
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(B), lens, &vl));
    EX_OK(mask_key_padding_from_lens(vl, Lk, &kpm));
    EX_SHAPE(kpm, what, H_KPM, B, Lk);
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < Lk; j++) {
            double got = *TENSOR_AT(kpm, b, j);
            cr_assert(got == want[b * Lk + j], "%s: [%zu, %zu] (key %zu of "
                      "example %zu, length %g): expected %g, got %g\n%s",
                      what, b, j, j, b, lens[b], want[b * Lk + j], got, H_KPM);
        }
    tensor_free(kpm);
    tensor_free(vl);
}

Test(ex_mask_key_padding_from_lens, true_at_and_past_the_length)
{
    expect_padding(4, (double[]){3, 1, 5, 2}, 5,
                   (double[]){0, 0, 0, 1, 1,
                              0, 1, 1, 1, 1,
                              0, 0, 0, 0, 0,
                              0, 0, 1, 1, 1});
}

Test(ex_mask_key_padding_from_lens, zero_and_full_lengths)
{
    expect_padding(2, (double[]){0, 3}, 3, (double[]){1, 1, 1, 0, 0, 0});
    expect_padding(1, (double[]){1}, 1, (double[]){0});
}

Test(ex_mask_key_padding_from_lens, refuses_lengths_past_the_keys)
{
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(1), (double[]){3}, &vl));
    EX_REFUSED(mask_key_padding_from_lens(vl, 2, &kpm), kpm, GSL_EINVAL,
               "mask_key_padding_from_lens", H_KPM_REFUSE, 3, 2);
    vl->data[0] = -1;
    EX_REFUSED(mask_key_padding_from_lens(vl, 2, &kpm), kpm, GSL_EINVAL,
               "mask_key_padding_from_lens", H_KPM_REFUSE, 2);
    vl->data[0] = 0.5;
    EX_REFUSED(mask_key_padding_from_lens(vl, 2, &kpm), kpm, GSL_EINVAL,
               "mask_key_padding_from_lens", H_KPM_REFUSE, 2);
    tensor_free(vl);
    EX_OK(tensor_from_array(SHAPE(1, 2), (double[]){1, 1}, &vl));
    EX_REFUSED(mask_key_padding_from_lens(vl, 2, &kpm), kpm, GSL_EINVAL,
               "mask_key_padding_from_lens", H_KPM_REFUSE, 1, 2);
    tensor_free(vl);
}

Test(ex_mask_key_padding_from_lens, cleans_up_when_memory_runs_out)
{
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(2), (double[]){1, 2}, &vl));
    EX_OK(mask_key_padding_from_lens(vl, 3, &kpm)); /* a blank fails here */
    tensor_free(kpm);
    EX_CLEANS_UP(mask_key_padding_from_lens(vl, 3, &kpm), kpm);
    tensor_free(vl);
}

//<
//> 19
/* --- ex_alibi_slope (chapter 19) ------------------------------------- */

#define H_ALIBI                                                               \
    "hint: chapter 19, section 2 (ALiBi: a penalty by distance): for n a "   \
    "power of two the slopes are geometric: n = 8 gives 1/2, 1/4 ... "       \
    "1/256, n = 16 gives 2^-0.5, 2^-1 ... 2^-8"
#define H_ALIBI_REST                                                          \
    "hint: chapter 19, section 2: otherwise the slopes of P heads, P the "   \
    "largest power of two below n, then every other one of 2P heads"
#define H_ALIBI_REFUSE                                                        \
    "hint: the comment above alibi_slope: a head at or past n is refused "  \
    "with GSL_EINVAL and a message naming both"

/* The slopes of n heads against want, of which the first `first` are
 * those of a power of two (n itself, or the largest power of two below
 * it). */
static void expect_slopes(size_t n, size_t first, const double *want)
{
    for (size_t k = 0; k < n; k++) {
        double got = -1;
        mha_clear_error();
        int st = alibi_slope(n, k, &got);
        cr_assert_eq(st, GSL_SUCCESS,
                     "alibi_slope(n %zu, head %zu): expected status 0 "
                     "(GSL_SUCCESS), got %d: %s%s%s",
                     n, k, st, mha_last_error(), st == GSL_EUNIMPL ? "" : "\n",
                     st == GSL_EUNIMPL ? "" : H_ALIBI);
        cr_assert(fabs(got - want[k]) <= 1e-15 * want[k],
                  "alibi_slope(n %zu, head %zu): expected %.17g, got %.17g\n%s",
                  n, k, want[k], got, k < first ? H_ALIBI : H_ALIBI_REST);
    }
}

/* The slopes below are those of the ALiBi paper's get_slopes (Press et
 * al. 2022; github.com/ofirpress/attention_with_linear_biases), which
 * BLOOM uses, run once in Python for each n and each value rounded once
 * to a double (its start * ratio**k drifts by an ulp or two).  For 8
 * heads they are the paper's list, 1/2, 1/4 ... 1/256; for 16 the
 * paper's interpolation between them, 2^-0.5, 2^-1 ... 2^-8. */
static const double slopes_8[] = {0.5,      0.25,      0.125,     0.0625,
                                  0.03125,  0.015625,  0.0078125, 0.00390625};
static const double slopes_16[] = {
    0.7071067811865476,   0.5,    0.3535533905932738,  0.25,
    0.1767766952966369,   0.125,  0.08838834764831845, 0.0625,
    0.04419417382415922,  0.03125, 0.02209708691207961, 0.015625,
    0.011048543456039806, 0.0078125, 0.005524271728019903, 0.00390625};

Test(ex_alibi_slope, a_power_of_two_halves_geometrically)
{
    expect_slopes(8, 8, slopes_8);
    expect_slopes(1, 1, (double[]){0.00390625});
    expect_slopes(16, 16, slopes_16);
}

/* n = 12: the 8 slopes of 8 heads, then 4 of the 16 heads' (2^-0.5,
 * 2^-1.5, 2^-2.5, 2^-3.5); n = 3: 2 heads' 1/16, 1/256, then 1/4; n = 6:
 * 4 heads' 1/4 ... 1/256, then 1/2, 1/8; n = 20: the 16 of 16 heads,
 * then 2^-0.25, 2^-0.75, 2^-1.25, 2^-1.75 */
Test(ex_alibi_slope, other_counts_interleave_the_slopes_of_twice_as_many)
{
    expect_slopes(12, 8,
                  (double[]){0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625,
                             0.0078125, 0.00390625, 0.7071067811865476,
                             0.3535533905932738, 0.1767766952966369,
                             0.08838834764831845});
    expect_slopes(3, 2, (double[]){0.0625, 0.00390625, 0.25});
    expect_slopes(6, 4,
                  (double[]){0.25, 0.0625, 0.015625, 0.00390625, 0.5, 0.125});
    double twenty[20];
    memcpy(twenty, slopes_16, sizeof slopes_16);
    memcpy(twenty + 16,
           (double[]){0.8408964152537145, 0.5946035575013605,
                      0.42044820762685725, 0.29730177875068026},
           4 * sizeof(double));
    expect_slopes(20, 16, twenty);
}

Test(ex_alibi_slope, refuses_a_head_out_of_range)
{
    double m = 7;
    EX_REFUSED_CALL(alibi_slope(8, 8, &m), "alibi_slope(n 8, head 8)",
                    GSL_EINVAL, "alibi_slope", H_ALIBI_REFUSE, 8, 8);
    cr_assert_eq(m, 7, "alibi_slope(n 8, head 8): *m changed to %g\n%s", m,
                 H_ALIBI_REFUSE);
    EX_REFUSED_CALL(alibi_slope(0, 0, &m), "alibi_slope(n 0, head 0)",
                    GSL_EINVAL, "alibi_slope", H_ALIBI_REFUSE, 0);
}
//<

//> 20
/* --- ex_mla_rms_norm (chapter 20) ------------------------------------ */

#define H_RMS                                                                 \
    "hint: chapter 20, section 2 (The naive path): each row over its root "  \
    "mean square (eps added to the mean of the squares), times the weight; " \
    "no mean subtracted, no shift added"
#define H_RMS_REFUSE                                                          \
    "hint: the comment above mla_rms_norm: a weight that is not (d,), or "   \
    "an eps that is not a finite number > 0, is refused naming them, and "  \
    "nothing allocated"

/* mla_rms_norm(x, w, eps) against want, the rows of the output in
 * row-major order; x may be a view.  An output that is want without the
 * weight gets the weight's hint. */
static void expect_rms(const tensor *x, const double *w, double eps,
                       const double *want, const char *what)
{
    size_t d = x->shape[x->ndim - 1], rows = tensor_numel(x) / d;
    tensor *wt, *y;
    EX_OK(tensor_from_array(SHAPE(d), w, &wt));
    EX_OK(mla_rms_norm(x, wt, eps, &y));
    cr_assert_not_null(y, "%s: expected a tensor, got NULL\n%s", what, H_RMS);
    cr_assert(tensor_same_shape(x, y), "%s: the output's shape is not x's\n%s",
              what, H_RMS);
    for (size_t r = 0, at = 0; r < rows; r++)
        for (size_t j = 0; j < d; j++, at++) {
            double got = y->data[at];
            cr_assert(fabs(got - want[at]) <= 1e-14 * fmax(1, fabs(want[at])),
                      "%s: row %zu, feature %zu: expected %.17g, got %.17g\n%s",
                      what, r, j, want[at], got,
                      fabs(got * w[j] - want[at]) < 1e-14
                          ? "hint: the weight multiplies every feature" : H_RMS);
        }
    tensor_free(y);
    tensor_free(wt);
}

/* The outputs below were computed once in Python from RMSNorm's
 * definition (Zhang and Sennrich 2019; eps under the root, as the
 * published model's RMSNorm has it), the squares of a row summed with
 * math.fsum, and printed with repr. */
Test(ex_mla_rms_norm, divides_each_row_by_its_root_mean_square)
{
    tensor *x;
    EX_OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    tensor_fill_arange(x, -5, 0.75);
    expect_rms(x, (double[]){1, 2, 0.5, -1}, 1e-6,
               (double[]){-1.2611332821232923,  -2.1439265796095968,
                          -0.4413966487431523,  0.6936233051678108,
                          -1.6502734322189543,  -2.062841790273693,
                          -0.20628417902736929, -0.20628417902736929,
                          0.4377404821924604,   1.5320916876736115,
                          0.5471756027405755,   -1.4226565671254963,
                          0.7702462180382065,   1.8293347678407403,
                          0.529544274901267,    -1.2035097156846977,
                          0.856986708473593,    1.8976134259058133,
                          0.5203133587161101,   -1.1324467219115337,
                          0.8963339250635716,   1.9271179388866788,
                          0.5153920069115536,   -1.0980090582028752},
               "mla_rms_norm(x (2, 3, 4) = -5, -4.25, ..., eps 1e-6)");
    tensor_free(x);
}

/* x's rows are [3, 4, 5], [9, 10, 11] and [15, 16, 17] */
Test(ex_mla_rms_norm, reads_a_view)
{
    tensor *base, *x;
    EX_OK(tensor_alloc(SHAPE(3, 6), &base));
    tensor_fill_arange(base, 1, 1);
    EX_OK(tensor_narrow(base, 1, 2, 3, &x)); // columns 2..4: rows 6 apart
    expect_rms(x, (double[]){1, 1, 3}, 1e-6,
               (double[]){0.7348469007895466, 0.9797958677193955,
                          3.6742345039477335, 0.8970149126945068,
                          0.9966832363272298, 3.2890546798798583,
                          0.9362816740746135, 0.9987004523462544,
                          3.1833576918536863},
               "mla_rms_norm(x = columns 2..4 of a (3, 6) tensor, a view)");
    tensor_free(x);
    tensor_free(base);
}

/* a row of zeros stays zeros: eps keeps the division finite */
Test(ex_mla_rms_norm, a_row_of_zeros_stays_zeros)
{
    tensor *x;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){0, 0, 3, 4}, &x));
    expect_rms(x, (double[]){2, 2}, 1e-6,
               (double[]){0, 0, 1.697056206965467, 2.2627416092872896},
               "mla_rms_norm(x [[0, 0], [3, 4]], eps 1e-6)");
    tensor_free(x);
}

Test(ex_mla_rms_norm, refuses_a_weight_of_another_size)
{
    tensor *x, *w, *y;
    EX_OK(tensor_alloc(SHAPE(2, 4), &x));
    EX_OK(tensor_alloc(SHAPE(3), &w));
    tensor_fill(x, 1);
    tensor_fill(w, 1);
    EX_REFUSED(mla_rms_norm(x, w, 1e-6, &y), y, GSL_EBADLEN, "mla_rms_norm",
               H_RMS_REFUSE, 3, 4);
    tensor_free(x);
    tensor_free(w);
}

Test(ex_mla_rms_norm, refuses_an_eps_that_is_not_positive)
{
    tensor *x, *w, *y;
    EX_OK(tensor_alloc(SHAPE(2, 4), &x));
    EX_OK(tensor_alloc(SHAPE(4), &w));
    tensor_fill(x, 1);
    tensor_fill(w, 1);
    EX_REFUSED(mla_rms_norm(x, w, 0, &y), y, GSL_EINVAL, "mla_rms_norm",
               H_RMS_REFUSE, 0);
    EX_REFUSED(mla_rms_norm(x, w, -1, &y), y, GSL_EINVAL, "mla_rms_norm",
               H_RMS_REFUSE, 1);
    tensor_free(x);
    tensor_free(w);
}
//<
//> 21
/* --- ex_paged_slot (chapter 21) -------------------------------------- */

#define H_SLOT                                                                \
    "hint: chapter 21, section 1 (Blocks, block tables and the slot "        \
    "mapping): the table names the pool's block of each block_size "         \
    "positions in turn, and a position is one row of that block"
#define H_SLOT_TABLE                                                          \
    "hint: chapter 21, section 1: the table says which block holds the "     \
    "position; the position alone is where a contiguous cache keeps it"
#define H_SLOT_REFUSE                                                         \
    "hint: the comment above paged_slot: block_size 0, or a position the "   \
    "table does not cover, is refused with GSL_EINVAL naming them"

/* Every position of a table against want, its slots written out by
 * hand: slots number the pool's rows block after block, so block b's
 * rows are slots b * block_size onwards. */
static void expect_slots(const size_t *table, size_t nblocks, size_t bs,
                         const size_t *want)
{
    for (size_t pos = 0; pos < nblocks * bs; pos++) {
        size_t slot = 9999;
        mha_clear_error();
        int st = paged_slot(table, nblocks, bs, pos, &slot);
        cr_assert_eq(st, GSL_SUCCESS,
                     "paged_slot(pos %zu, block_size %zu): expected status 0 "
                     "(GSL_SUCCESS), got %d: %s%s%s",
                     pos, bs, st, mha_last_error(),
                     st == GSL_EUNIMPL ? "" : "\n", st == GSL_EUNIMPL ? "" : H_SLOT);
        cr_assert_eq(slot, want[pos],
                     "paged_slot(pos %zu, block_size %zu, table [%zu%s]): "
                     "expected slot %zu, got %zu\n%s",
                     pos, bs, table[0], nblocks > 1 ? ", ..." : "", want[pos],
                     slot, slot == pos ? H_SLOT_TABLE : H_SLOT);
    }
}

/* blocks of 4, the table [5, 2, 7]: positions 0-3 in block 5 (slots 20-23),
 * 4-7 in block 2 (8-11), 8-11 in block 7 (28-31) */
Test(ex_paged_slot, a_position_lives_in_its_block)
{
    expect_slots((size_t[]){5, 2, 7}, 3, 4,
                 (size_t[]){20, 21, 22, 23, 8, 9, 10, 11, 28, 29, 30, 31});
}

Test(ex_paged_slot, blocks_anywhere_in_the_pool)
{
    /* blocks of 2: block 3 holds slots 6-7, block 0 0-1, block 9 18-19 */
    expect_slots((size_t[]){3, 0, 1, 9, 4}, 5, 2,
                 (size_t[]){6, 7, 0, 1, 2, 3, 18, 19, 8, 9});
    /* one block of 16, block 6: slots 96-111 */
    expect_slots((size_t[]){6}, 1, 16,
                 (size_t[]){96,  97,  98,  99,  100, 101, 102, 103,
                            104, 105, 106, 107, 108, 109, 110, 111});
    /* one position a block: the table itself */
    expect_slots((size_t[]){4, 1, 0}, 3, 1, (size_t[]){4, 1, 0});
}

Test(ex_paged_slot, refuses_a_position_past_the_table)
{
    size_t slot = 77;
    EX_REFUSED_CALL(paged_slot((size_t[]){5, 2, 7}, 3, 4, 12, &slot),
                    "paged_slot(pos 12, 3 blocks of 4)", GSL_EINVAL,
                    "paged_slot", H_SLOT_REFUSE, 12, 3, 4);
    cr_assert_eq(slot, 77, "paged_slot wrote *slot though it refused\n%s",
                 H_SLOT_REFUSE);
    EX_REFUSED_CALL(paged_slot((size_t[]){5}, 1, 0, 0, &slot),
                    "paged_slot(pos 0, block_size 0)", GSL_EINVAL,
                    "paged_slot", H_SLOT_REFUSE, 0);
}
//<
//> full
/* --- the hints name sections that exist ----------------------------- */

/* Every hint that names "chapter NN, section S (Title)": the chapter's
 * page in docs/ has the heading "## S. Title..." (the hint may shorten
 * the title to its beginning). */
static const char *const hints[] = {
    H_LINEAR, H_LINEAR_NO_BIAS, H_LINEAR_STRIDES, H_LINEAR_REFUSE,
    H_CAUSAL, H_CAUSAL_REFUSE, H_QKV, H_QKV_SHAPE, H_QKV_STRAIGHT,
    H_QKV_REFUSE, H_QKV_INVALID, H_OUT, H_OUT_SHAPE, H_OUT_STRAIGHT,
    H_OUT_REFUSE, H_OUT_INVALID, H_REPEAT, H_REPEAT_TILE, H_REPEAT_ROWS,
    H_REPEAT_META, H_REPEAT_REFUSE, H_ROPE, H_ROPE_DIRECTION, H_MADDS,
    H_MADDS_CAUSAL, H_MADDS_REFUSE, H_GQA, H_GQA_ZERO, H_GQA_REFUSE,
    H_KPM, H_KPM_REFUSE, H_ALIBI, H_ALIBI_REST, H_ALIBI_REFUSE, H_MEMORY,
    H_RMS, H_RMS_REFUSE,
    H_SLOT, H_SLOT_TABLE, H_SLOT_REFUSE,
};

Test(exercise_hints, name_sections_that_exist)
{
    for (size_t k = 0; k < sizeof hints / sizeof hints[0]; k++) {
        const char *h = hints[k];
        cr_assert(strncmp(h, "hint: ", 6) == 0, "\"%s\" starts otherwise", h);
        cr_assert_lt(strlen(h), 200, "\"%s\" is more than a line", h);
        unsigned ch, sec;
        int used = 0;
        if (sscanf(h, "hint: chapter %u, section %u%n", &ch, &sec, &used) < 2)
            continue; // it names the comment above a function instead
        // the title: what the parentheses after the number hold, if any
        char title[128] = "";
        const char *t = h + used;
        if (strncmp(t, " (", 2) == 0) {
            size_t n = 0;
            for (int depth = 1; t[2 + n] && n + 1 < sizeof title; n++) {
                depth += (t[2 + n] == '(') - (t[2 + n] == ')');
                if (depth == 0)
                    break;
            }
            memcpy(title, t + 2, n);
            title[n] = '\0';
        }
        char pattern[32], heading[256];
        snprintf(pattern, sizeof pattern, "docs/%02u_*.md", ch);
        glob_t g;
        cr_assert_eq(glob(pattern, 0, NULL, &g), 0, "%s: no page %s", h,
                     pattern);
        FILE *f = fopen(g.gl_pathv[0], "r");
        cr_assert_not_null(f, "%s", g.gl_pathv[0]);
        snprintf(heading, sizeof heading, "## %u. %s", sec, title);
        int found = 0;
        char line[512];
        while (!found && fgets(line, sizeof line, f))
            found = strncmp(line, heading, strlen(heading)) == 0;
        fclose(f);
        cr_assert(found, "%s: %s has no heading \"%s...\"", h,
                  g.gl_pathv[0], heading);
        globfree(&g);
    }
}
//<
//<
