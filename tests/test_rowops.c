/* test_rowops.c: the vectorised exp and the fused softmax row, against
 * the C library's exp and numbers worked out by hand.  Rows are plain
 * arrays of doubles. */
#include "check.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* --- rowops ---------------------------------------------------------- */

//> 12
/* Within 2 ulps of exp wherever exp is a normal number; the subnormal
 * tail agrees to the last subnormal step, and below -745 both are 0. */
Test(rowops, exp_agrees_with_the_c_library)
{
    enum { N = 20001 };
    static double x[N], e[N];
    for (size_t j = 0; j < N; j++)
        x[j] = -760.0 * (double)j / (N - 1); // 0 down to -760
    double sum = rowops_exp_shifted(x, N, 1.0, 0.0, e);
    double want_sum = 0;
    for (size_t j = 0; j < N; j++) {
        double want = exp(x[j]);
        want_sum += want;
        if (want >= DBL_MIN)
            cr_assert(fabs(e[j] - want) <= 2 * DBL_EPSILON * want,
                      "exp(%.17g): %.17g, libm %.17g", x[j], e[j], want);
        else
            cr_assert(fabs(e[j] - want) <= 0x1p-1070, "exp(%.17g): %g vs %g",
                      x[j], e[j], want);
    }
    cr_assert_eq(e[0], 1.0);
    cr_assert_eq(e[N - 1], 0.0);
    cr_assert(fabs(sum - want_sum) <= 1e-14 * want_sum);
}

/* scale and shift: exp(0.5 * x - 2) */
Test(rowops, exp_scaled_and_shifted)
{
    double x[5] = {4, 2, 0, -2, 3.5}, e[5];
    double sum = rowops_exp_shifted(x, 5, 0.5, 2.0, e);
    double want[5] = {1.0, exp(-1.0), exp(-2.0), exp(-3.0), exp(-0.25)};
    double ws = 0;
    for (size_t j = 0; j < 5; j++) {
        cr_assert(fabs(e[j] - want[j]) <= 2 * DBL_EPSILON * want[j], "j %zu", j);
        ws += want[j];
    }
    cr_assert(fabs(sum - ws) <= 4 * DBL_EPSILON * ws);
}

/* Two keys seen, the last two masked: max 2, exps e^-1, 1, and 0 for the
 * masked keys (even the larger scores 7 and 9); the sum is 1 + e^-1. */
Test(rowops, softmax_row_by_hand)
{
    double x[4] = {1, 2, 7, 9}, out[4], m;
    double sum = rowops_softmax_unnormalized(x, 4, 1.0, 2, out, &m);
    cr_assert_eq(m, 2.0);
    cr_assert(fabs(out[0] - exp(-1.0)) <= 2 * DBL_EPSILON);
    cr_assert_eq(out[1], 1.0);
    cr_assert_eq(out[2], 0.0);
    cr_assert_eq(out[3], 0.0);
    cr_assert(fabs(sum - (1 + exp(-1.0))) <= 4 * DBL_EPSILON);
    // no mask, scale 0.5, in place: max 4.5
    sum = rowops_softmax_unnormalized(x, 4, 0.5, 4, x, &m);
    cr_assert_eq(m, 4.5);
    double want[4] = {exp(-4.0), exp(-3.5), exp(-1.0), 1.0}, ws = 0;
    for (size_t j = 0; j < 4; j++) {
        cr_assert(fabs(x[j] - want[j]) <= 2 * DBL_EPSILON * want[j]);
        ws += want[j];
    }
    cr_assert(fabs(sum - ws) <= 4 * DBL_EPSILON * ws);
}

/* valid_len 0: every key alike, every exp is 1 (d2l's uniform row). */
Test(rowops, softmax_row_with_nothing_valid_is_uniform)
{
    double x[3] = {5, -5, 0}, out[3];
    double sum = rowops_softmax_unnormalized(x, 3, 1.0, 0, out, NULL);
    cr_assert_eq(sum, 3.0);
    for (size_t j = 0; j < 3; j++)
        cr_assert_eq(out[j], 1.0);
}

/* A score that is not finite among the keys seen: NaN, and the row as it
 * was; one past them (masked) changes nothing. */
Test(rowops, softmax_row_refuses_a_score_that_is_not_finite)
{
    double x[4] = {1, INFINITY, 7, NAN}, out[4] = {-1, -1, -1, -1}, m = -1;
    cr_assert(isnan(rowops_softmax_unnormalized(x, 4, 1.0, 2, out, &m)));
    cr_assert_eq(m, -1.0);
    for (size_t j = 0; j < 4; j++)
        cr_assert_eq(out[j], -1.0);
    x[1] = 2; // the NaN at 3 is masked
    double sum = rowops_softmax_unnormalized(x, 4, 1.0, 3, out, &m);
    cr_assert_eq(m, 7.0);
    cr_assert(fabs(sum - (1 + exp(-5.0) + exp(-6.0))) <= 4 * DBL_EPSILON);
    cr_assert_eq(out[3], 0.0);
}

Test(rowops, max_scale_divide_fill)
{
    double x[7] = {-3, 8, 2, 8.5, -1, 0, 4};
    cr_assert_eq(rowops_max(x, 7), 8.5);
    cr_assert_eq(rowops_max(x, 3), 8.0);
    rowops_scale(x, 7, 2.0);
    cr_assert_eq(x[3], 17.0);
    rowops_divide(x, 7, 3.0);
    cr_assert_eq(x[1], 16.0 / 3.0);
    rowops_fill(x, 7, 0.25);
    for (size_t j = 0; j < 7; j++)
        cr_assert_eq(x[j], 0.25);
}

//<
//> 08
/* Every kind of double: finite ones (zeros, the smallest subnormal, the
 * largest finite) pass; NaN (quiet, signalling, negative) and both
 * infinities fail, in rowops_all_finite and (from chapter 12)
 * rowops_max_finite, which finds the maximum as well, at every position
 * of rows of every length up to 70 (the vector body and its remainder). */
Test(rowops, all_finite_by_kind_and_position)
{
    const double finite[] = {0.0, -0.0, 4.9e-324, -4.9e-324, DBL_MAX,
                             -DBL_MAX, 1.0, -2.5e300};
    double snan;
    uint64_t bits = UINT64_C(0x7ff0000000000001); // signalling NaN
    memcpy(&snan, &bits, sizeof snan);
    const double bad[] = {NAN, -NAN, snan, INFINITY, -INFINITY};
    double x[70];
    for (size_t n = 0; n <= 70; n++) {
        for (size_t j = 0; j < n; j++)
            x[j] = finite[j % 8];
        cr_assert_eq(rowops_all_finite(x, n), 1, "n = %zu", n);
        //> 12
        int finite = -1;
        if (n > 0) {
            double m = rowops_max_finite(x, n, &finite);
            cr_assert_eq(finite, 1, "n = %zu", n);
            cr_assert_eq(m, n > 4 ? DBL_MAX : n > 2 ? 4.9e-324 : 0.0);
        }
        //<
        for (size_t at = 0; at < n; at++)
            for (size_t b = 0; b < 5; b++) {
                double keep = x[at];
                x[at] = bad[b];
                cr_assert_eq(rowops_all_finite(x, n), 0, "n %zu at %zu bad %zu",
                             n, at, b);
                //> 12
                (void)rowops_max_finite(x, n, &finite);
                cr_assert_eq(finite, 0, "n %zu at %zu bad %zu", n, at, b);
                //<
                x[at] = keep;
            }
    }
}
//<
