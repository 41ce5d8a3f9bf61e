//> 02
/* test_exercises.c: the tests of the coding exercises.
 *
 * Each suite ex_NAME checks one library function marked "@exercise NAME"
 * in src/, whose body the handout blanks for students, against the
 * rules written in the comment above it.  A suite calls only its own
 * exercise (and no other exercise function), so a student's `make grade`
 * says exactly which exercises pass; each test is one rule, so a body
 * that gets some rules right passes those tests.  The expected values
 * come from index arithmetic written here, not from the library.
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
    "y[r, o] = bias[o] + sum over i of x[r, i] * W[o, i]; W is "             \
    "(out_features, in_features)"
#define H_LINEAR_NO_BIAS                                                      \
    "hint: chapter 02, section 3: a layer made without a bias has "          \
    "l->bias NULL, and y is x W^T alone"
#define H_LINEAR_STRIDES                                                      \
    "hint: chapter 02, section 3: read x through tensor_at (or TENSOR_AT): " \
    "this x is a permuted view, and its element [r, i] is not x->data[r*in + i]"
#define H_LINEAR_REFUSE                                                       \
    "hint: chapter 02, section 3: an x whose last dimension is not "         \
    "in_features is refused with GSL_EBADLEN, as linear_forward does "       \
    "(check_input)"

/* y = x W^T + b for a layer of in -> out features, x (rows, in) read from
 * xs in row-major order, compared with y at every [r, o]. */
static void expect_linear(const tensor *y, const char *what, const double *xs,
                          size_t rows, size_t in, size_t out,
                          const double *w, const double *b, const char *hint)
{
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double want = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++)
                want += xs[r * in + i] * w[o * in + i];
            double got = y->data[r * out + o];
            cr_assert(fabs(got - want) <= 1e-12 * (1 + fabs(want)),
                      "%s: row %zu, output feature %zu: expected %g, got "
                      "%g\n%s",
                      what, r, o, want, got, hint);
        }
}

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
    expect_linear(y, what, (double[]){1, 2, 3}, 1, 3, 2, lin_w, lin_b,
                  H_LINEAR);
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
    expect_linear(y, what, xs, 4, 3, 2, lin_w, lin_b, H_LINEAR);
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
    expect_linear(y, what, xs, 2, 3, 2, lin_w, NULL, H_LINEAR_NO_BIAS);
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
    double xs[] = {1, 2, 3, -1, 0, 4}; /* x's rows, in order */
    expect_linear(y, what, xs, 2, 3, 2, lin_w, lin_b, H_LINEAR_STRIDES);
    tensor_free(base);
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
    "query i sees keys 0 .. i, i + 1 of them, so every row is 1, 2, ..., len"
#define H_CAUSAL_REFUSE                                                       \
    "hint: chapter 03, section 6: batch or len 0 is refused with "           \
    "GSL_EINVAL, a message naming both, and nothing allocated"

static void expect_causal(size_t batch, size_t len)
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
            cr_assert(got == (double)(i + 1),
                      "%s: [%zu, %zu] (query %zu): expected %zu, got %g\n%s",
                      what, b, i, i, i + 1, got, H_CAUSAL);
        }
    tensor_free(lens);
}

Test(ex_causal_valid_lens, one_row_counts_up_to_len)
{
    expect_causal(1, 5);
}

Test(ex_causal_valid_lens, every_example_gets_the_same_row)
{
    expect_causal(3, 4);
    expect_causal(2, 1);
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

/* transpose_qkv of x (B, n, d) = 0, 1, 2, ... into h heads, every number
 * checked; a value that a straight reshape would have put there gets that
 * hint. */
static void expect_heads(size_t B, size_t n, size_t d, size_t h)
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
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++) {
                size_t r = b * h + j / p, k = j % p;
                double want = (double)((b * n + i) * d + j);
                double got = *TENSOR_AT(heads, r, i, k);
                /* a straight reshape reads the buffer in order */
                double straight = (double)((r * n + i) * p + k);
                cr_assert(got == want,
                          "%s: heads[%zu, %zu, %zu] should hold x[%zu, %zu, "
                          "%zu]: expected %g, got %g\n%s",
                          what, r, i, k, b, i, j, want, got,
                          got == straight ? H_QKV_STRAIGHT : H_QKV);
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

/* d2l's example of section 1: one example, each head a strip of features */
Test(ex_transpose_qkv, one_example_into_eight_heads)
{
    expect_heads(1, 2, 16, 8);
}

/* two examples: the last reshape copies */
Test(ex_transpose_qkv, every_number_lands_where_it_should)
{
    expect_heads(2, 3, 8, 4);
}

Test(ex_transpose_qkv, one_head_is_the_input)
{
    expect_heads(2, 3, 4, 1);
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

/* transpose_output of heads (B*h, n, p) = 0, 1, 2, ..., every number
 * checked. */
static void expect_joined(size_t B, size_t n, size_t h, size_t p)
{
    char what[96];
    snprintf(what, sizeof what, "transpose_output(heads (%zu, %zu, %zu) = 0, "
             "1, 2, ..., %zu heads)", B * h, n, p, h);
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(B * h, n, p), &heads));
    tensor_fill_arange(heads, 0, 1);
    EX_OK(transpose_output(heads, h, &joined));
    EX_SHAPE(joined, what, H_OUT_SHAPE, B, n, h * p);
    for (size_t r = 0; r < B * h; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < p; j++) {
                size_t b = r / h, f = (r % h) * p + j;
                double want = (double)((r * n + i) * p + j);
                double got = *TENSOR_AT(joined, b, i, f);
                double straight = (double)((b * n + i) * h * p + f);
                cr_assert(got == want,
                          "%s: out[%zu, %zu, %zu] should hold heads[%zu, %zu, "
                          "%zu] (head %zu of example %zu): expected %g, got "
                          "%g\n%s",
                          what, b, i, f, r, i, j, r % h, b, want, got,
                          got == straight ? H_OUT_STRAIGHT : H_OUT);
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

Test(ex_transpose_output, one_example_from_eight_heads)
{
    expect_joined(1, 2, 8, 2);
}

Test(ex_transpose_output, heads_go_back_side_by_side)
{
    expect_joined(2, 3, 4, 2);
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

/* repeat_valid_lens of lens (B,) or (B, Lq) into h heads, every number
 * checked against row r / h of lens; tile's value gets its hint. */
static void expect_repeated(const tensor *lens, size_t h, const char *what,
                            const char *hint)
{
    size_t B = lens->shape[0], row = lens->ndim == 2 ? lens->shape[1] : 1;
    tensor *out;
    EX_OK(repeat_valid_lens(lens, h, &out));
    if (lens->ndim == 1)
        EX_SHAPE(out, what, hint, B * h);
    else
        EX_SHAPE(out, what, hint, B * h, row);
    for (size_t r = 0; r < B * h; r++)
        for (size_t j = 0; j < row; j++) {
            double want = lens->data[(r / h) * row + j];
            double tiled = lens->data[(r % B) * row + j];
            double got = out->data[r * row + j];
            cr_assert(got == want,
                      "%s: row %zu (head %zu of example %zu)%s: expected %g, "
                      "got %g\n%s",
                      what, r, r % h, r / h, lens->ndim == 2 ? ", query" : "",
                      want, got, got == tiled ? H_REPEAT_TILE : hint);
        }
    tensor_free(out);
}

Test(ex_repeat_valid_lens, one_length_per_example)
{
    tensor *lens;
    EX_OK(tensor_from_array(SHAPE(3), (double[]){4, 1, 2}, &lens));
    expect_repeated(lens, 2, "repeat_valid_lens(valid_lens [4, 1, 2], 2 heads)",
                    H_REPEAT);
    tensor_free(lens);
    EX_OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    expect_repeated(lens, 3, "repeat_valid_lens(valid_lens [3, 2], 3 heads)",
                    H_REPEAT);
    tensor_free(lens);
}

Test(ex_repeat_valid_lens, one_length_per_query)
{
    tensor *lens;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    expect_repeated(lens, 3,
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
    "hint: chapter 15, section 4 (Rotary embeddings): y0 = x0 cos(a) - x1 "  \
    "sin(a), y1 = x0 sin(a) + x1 cos(a)"
#define H_ROPE_DIRECTION                                                      \
    "hint: chapter 15, section 4 (Rotary embeddings): the turn is "          \
    "counterclockwise, from the first feature towards the second: "          \
    "y0 = x0 cos(a) - x1 sin(a), y1 = x0 sin(a) + x1 cos(a)"

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
    "the weighted sum: 2 d_model per pair"
#define H_MADDS_CAUSAL                                                        \
    "hint: chapter 16, section 4 (The work per step): under the causal "     \
    "mask, aligned at the end, query i sees keys 0 .. i + n_k - n_q, none "  \
    "when that is negative"
#define H_MADDS_REFUSE                                                        \
    "hint: the comment above attention_madds: n_q, n_k or d_model 0 is "     \
    "refused with GSL_EINVAL, naming all three"

/* The pairs counted one by one: query i sees key j under the causal mask
 * aligned at the end when j + n_q <= i + n_k. */
static double pairs_one_by_one(size_t n_q, size_t n_k, int causal)
{
    double n = 0;
    for (size_t i = 0; i < n_q; i++)
        for (size_t j = 0; j < n_k; j++)
            n += !causal || j + n_q <= i + n_k;
    return n;
}

static void expect_madds(size_t n_q, size_t n_k, size_t d, int causal)
{
    double m = -1;
    EX_OK(attention_madds(n_q, n_k, d, causal, &m));
    double pairs = pairs_one_by_one(n_q, n_k, causal);
    double want = 2.0 * (double)d * pairs;
    // half or twice the count: the 2 per pair; else, causal: the pairs
    const char *hint = H_MADDS;
    if (causal && 2 * m != want && m != 2 * want)
        hint = H_MADDS_CAUSAL;
    cr_assert(m == want,
              "attention_madds(n_q %zu, n_k %zu, d_model %zu, causal %d): "
              "expected %g (%g pairs x 2 x %zu), got %g\n%s",
              n_q, n_k, d, causal, want, pairs, d, m, hint);
}

Test(ex_attention_madds, one_new_query_meets_every_cached_key)
{
    expect_madds(1, 7, 8, 1);
    expect_madds(1, 1, 4, 1);
}

Test(ex_attention_madds, no_mask_counts_every_pair)
{
    expect_madds(4, 4, 8, 0);
    expect_madds(3, 8, 6, 0);
    expect_madds(6, 4, 6, 0);
}

/* t queries over their own t keys: 1 + 2 + ... + t pairs */
Test(ex_attention_madds, causal_recompute_counts_the_triangle)
{
    expect_madds(3, 3, 6, 1);
    expect_madds(5, 5, 2, 1);
}

Test(ex_attention_madds, causal_mask_aligned_at_the_end)
{
    expect_madds(3, 8, 6, 1); /* fewer queries: the last 3 positions */
    expect_madds(6, 4, 6, 1); /* more queries: the first 2 see nothing */
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
    "reads): heads are grouped in order, head i reads i / (h/G): with h = "  \
    "8, G = 2, heads 0-3 read 0"
#define H_GQA_ZERO                                                            \
    "hint: chapter 17, section 1: kv_heads 0 means num_heads (multi-head "   \
    "attention, every head its own)"
#define H_GQA_REFUSE                                                          \
    "hint: chapter 17, section 1: kv_heads must divide num_heads, and head " \
    "be below num_heads; otherwise GSL_EINVAL, naming them"

/* Head i of h reads key-value head floor(i * G / h) (G 0 meaning h). */
static void expect_groups(size_t h, size_t G, const char *hint)
{
    size_t groups = G ? G : h;
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
        size_t want = i * groups / h;
        cr_assert_eq(kv, want,
                     "gqa_kv_head(head %zu, num_heads %zu, kv_heads %zu): "
                     "expected key-value head %zu, got %zu\n%s",
                     i, h, G, want, kv,
                     G && kv == i % G && kv != want ? H_GQA : hint);
    }
}

Test(ex_gqa_kv_head, consecutive_heads_share_a_group)
{
    expect_groups(8, 2, H_GQA);
    expect_groups(12, 3, H_GQA);
}

Test(ex_gqa_kv_head, multi_head_and_multi_query)
{
    expect_groups(6, 6, H_GQA); /* multi-head: each its own */
    expect_groups(6, 1, H_GQA); /* multi-query: the only one */
}

Test(ex_gqa_kv_head, kv_heads_0_means_num_heads)
{
    expect_groups(6, 0, H_GQA_ZERO);
    expect_groups(1, 0, H_GQA_ZERO);
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
    "sees): entry (b, j) is 1 (True: ignore the key) exactly when j >= "     \
    "valid_lens[b], else 0"
#define H_KPM_REFUSE                                                          \
    "hint: the comment above mask_key_padding_from_lens: valid_lens not "    \
    "(B,), or a length that is not a whole number 0 .. Lk, is refused with " \
    "GSL_EINVAL and a message naming it, and nothing allocated"

static void expect_padding(size_t B, const double *lens, size_t Lk)
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
            double want = (double)j >= lens[b] ? 1 : 0;
            double got = *TENSOR_AT(kpm, b, j);
            cr_assert(got == want, "%s: [%zu, %zu] (key %zu of example %zu, "
                      "length %g): expected %g, got %g\n%s",
                      what, b, j, j, b, lens[b], want, got, H_KPM);
        }
    tensor_free(kpm);
    tensor_free(vl);
}

Test(ex_mask_key_padding_from_lens, true_at_and_past_the_length)
{
    expect_padding(4, (double[]){3, 1, 5, 2}, 5);
}

Test(ex_mask_key_padding_from_lens, zero_and_full_lengths)
{
    expect_padding(2, (double[]){0, 3}, 3);
    expect_padding(1, (double[]){1}, 1);
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
    "power of two, head k has 2^(-8(k+1)/n): n = 8 gives 1/2, 1/4 ... 1/256"
#define H_ALIBI_REST                                                          \
    "hint: chapter 19, section 2: otherwise the slopes of P heads, P the "   \
    "largest power of two below n, then every other one of 2P heads"
#define H_ALIBI_REFUSE                                                        \
    "hint: the comment above alibi_slope: a head at or past n is refused "  \
    "with GSL_EINVAL and a message naming both"

/* The slopes of n heads, from the closed forms written out here. */
static void expect_slopes(size_t n)
{
    size_t P = 1;
    while (2 * P <= n)
        P *= 2;
    for (size_t k = 0; k < n; k++) {
        double want = k < P ? exp2(-8.0 * (double)(k + 1) / (double)P)
                            : exp2(-4.0 * (double)(2 * (k - P) + 1) / (double)P);
        double got = -1;
        mha_clear_error();
        int st = alibi_slope(n, k, &got);
        cr_assert_eq(st, GSL_SUCCESS,
                     "alibi_slope(n %zu, head %zu): expected status 0 "
                     "(GSL_SUCCESS), got %d: %s%s%s",
                     n, k, st, mha_last_error(), st == GSL_EUNIMPL ? "" : "\n",
                     st == GSL_EUNIMPL ? "" : H_ALIBI);
        cr_assert(fabs(got - want) <= 1e-15 * want,
                  "alibi_slope(n %zu, head %zu): expected %.17g, got %.17g\n%s",
                  n, k, want, got, k < P ? H_ALIBI : H_ALIBI_REST);
    }
}

Test(ex_alibi_slope, a_power_of_two_halves_geometrically)
{
    expect_slopes(8);
    expect_slopes(1);
    expect_slopes(16);
}

Test(ex_alibi_slope, other_counts_interleave_the_slopes_of_twice_as_many)
{
    expect_slopes(12);
    expect_slopes(3);
    expect_slopes(6);
    expect_slopes(20);
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
    "hint: chapter 20, section 2 (The naive path): y[j] = x[j] / "           \
    "sqrt(mean over the row of x^2 + eps) * weight[j]; no mean is "          \
    "subtracted, no shift added"
#define H_RMS_REFUSE                                                          \
    "hint: the comment above mla_rms_norm: a weight that is not (d,), or "   \
    "an eps that is not a finite number > 0, is refused naming them, and "  \
    "nothing allocated"

/* mla_rms_norm(x, w, eps) against the formula, row by row; x may be a
 * view.  rows * d numbers of x in row-major order are xs. */
static void expect_rms(const tensor *x, const double *w, double eps,
                       const char *what)
{
    size_t d = x->shape[x->ndim - 1], rows = tensor_numel(x) / d;
    tensor *wt, *y;
    EX_OK(tensor_from_array(SHAPE(d), w, &wt));
    EX_OK(mla_rms_norm(x, wt, eps, &y));
    cr_assert_not_null(y, "%s: expected a tensor, got NULL\n%s", what, H_RMS);
    cr_assert(tensor_same_shape(x, y), "%s: the output's shape is not x's\n%s",
              what, H_RMS);
    size_t idx[TENSOR_MAX_DIMS] = {0};
    for (size_t r = 0; r < rows; r++) {
        double xs[16], sum = 0;
        for (size_t j = 0; j < d; j++) {
            xs[j] = *tensor_at(x, idx);
            sum += xs[j] * xs[j];
            for (size_t k = x->ndim; k-- > 0;) { // the next index, row-major
                if (++idx[k] < x->shape[k])
                    break;
                idx[k] = 0;
            }
        }
        for (size_t j = 0; j < d; j++) {
            double want = xs[j] / sqrt(sum / (double)d + eps) * w[j];
            double got = y->data[r * d + j];
            cr_assert(fabs(got - want) <= 1e-14 * fmax(1, fabs(want)),
                      "%s: row %zu, feature %zu: expected %.17g, got %.17g\n%s",
                      what, r, j, want, got,
                      fabs(got - xs[j] / sqrt(sum / (double)d + eps)) < 1e-14
                          ? "hint: the weight multiplies every feature" : H_RMS);
        }
    }
    tensor_free(y);
    tensor_free(wt);
}

Test(ex_mla_rms_norm, divides_each_row_by_its_root_mean_square)
{
    tensor *x;
    EX_OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    tensor_fill_arange(x, -5, 0.75);
    expect_rms(x, (double[]){1, 2, 0.5, -1}, 1e-6,
               "mla_rms_norm(x (2, 3, 4) = -5, -4.25, ..., eps 1e-6)");
    tensor_free(x);
}

Test(ex_mla_rms_norm, reads_a_view)
{
    tensor *base, *x;
    EX_OK(tensor_alloc(SHAPE(3, 6), &base));
    tensor_fill_arange(base, 1, 1);
    EX_OK(tensor_narrow(base, 1, 2, 3, &x)); // columns 2..4: rows 6 apart
    expect_rms(x, (double[]){1, 1, 3}, 1e-6,
               "mla_rms_norm(x = columns 2..4 of a (3, 6) tensor, a view)");
    tensor_free(x);
    tensor_free(base);
}

Test(ex_mla_rms_norm, a_row_of_zeros_stays_zeros)
{
    tensor *x;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){0, 0, 3, 4}, &x));
    expect_rms(x, (double[]){2, 2}, 1e-6,
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
    "mapping): the slot is table[pos / block_size] * block_size + pos % "    \
    "block_size"
#define H_SLOT_TABLE                                                          \
    "hint: chapter 21, section 1: the table says which block holds the "     \
    "position; the position alone is where a contiguous cache keeps it"
#define H_SLOT_REFUSE                                                         \
    "hint: the comment above paged_slot: block_size 0, or a position the "   \
    "table does not cover, is refused with GSL_EINVAL naming them"

/* Every position of a table: its slot, from the arithmetic here. */
static void expect_slots(const size_t *table, size_t nblocks, size_t bs)
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
        size_t want = table[pos / bs] * bs + pos % bs;
        cr_assert_eq(slot, want,
                     "paged_slot(pos %zu, block_size %zu, block %zu of the "
                     "table is %zu): expected slot %zu, got %zu\n%s",
                     pos, bs, pos / bs, table[pos / bs], want, slot,
                     slot == pos ? H_SLOT_TABLE : H_SLOT);
    }
}

Test(ex_paged_slot, a_position_lives_in_its_block)
{
    expect_slots((size_t[]){5, 2, 7}, 3, 4);
}

Test(ex_paged_slot, blocks_anywhere_in_the_pool)
{
    expect_slots((size_t[]){3, 0, 1, 9, 4}, 5, 2);
    expect_slots((size_t[]){6}, 1, 16);
    expect_slots((size_t[]){4, 1, 0}, 3, 1); // one position a block
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
