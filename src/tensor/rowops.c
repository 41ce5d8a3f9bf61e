/* rowops.c: vectorisable row kernels; see rowops.h.
 *
 * Every loop is a `#pragma omp simd` loop with no calls and no branches,
 * so GCC turns it into vector code for each target_clones target (clang
 * too, all but rowops_max's: see there).  The bit tricks go through
 * memcpy (the portable way to read a double's bits; the compiler turns it
 * into a register move). */
#include "tensor/rowops.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define ROWOPS_CLONES \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#endif
#endif
#ifndef ROWOPS_CLONES
#define ROWOPS_CLONES
#endif
/* A max over doubles vectorises only when the compiler may reorder its
 * comparisons: GCC does for `omp simd reduction(max)`; clang (14, and
 * Apple's) does not without -ffinite-math-only, and a simd loop it cannot
 * vectorise is a -Wpass-failed warning, an error under -Werror.  So
 * clang gets rowops_max as a plain loop, not asked to be simd. */

//> 12
ROWOPS_CLONES
double rowops_max(const double *restrict x, size_t n)
{
    double m = -INFINITY;
#ifndef __clang__
#pragma omp simd reduction(max : m)
#endif
    for (size_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    return m;
}

/* The maximum, and whether every x_j is finite, in one pass: x - x is 0
 * for a finite x and NaN for an infinity or a NaN, so the sum of the
 * x_j - x_j is 0 exactly when every x_j is finite, in any order.  (A
 * pass of its own over the row, rowops_all_finite, took 4% of the fast
 * path's time at L = 2048.) */
ROWOPS_CLONES
double rowops_max_finite(const double *restrict x, size_t n, int *finite)
{
    double m = -INFINITY, zeros = 0.0;
#ifndef __clang__
#pragma omp simd reduction(max : m) reduction(+ : zeros)
#endif
    for (size_t j = 0; j < n; j++) {
        m = x[j] > m ? x[j] : m;
        zeros += x[j] - x[j];
    }
    *finite = zeros == 0.0;
    return m;
}

/* The constants of exp(a) = 2^n exp(r), a = n ln2 + r (see rowops.h). */
#define LOG2E 1.4426950408889634          /* 1 / ln 2 */
#define LN2_HI 6.93147180369123816490e-01 /* ln 2, top 32 bits: n*LN2_HI exact */
#define LN2_LO 1.90821492927058770002e-10 /* ln 2 - LN2_HI */
#define ROUNDER 0x1.8p52 /* t + ROUNDER rounds t to an integer in the low bits */
/* -750 as a double's bits.  For a <= 0 the bits, read as an unsigned
 * integer, grow with |a|, so "a < -750" is an integer comparison: the
 * compiler vectorises that, and never a floating one it thinks may trap. */
#define MINUS_750_BITS 0xC087700000000000u

ROWOPS_CLONES
double rowops_exp_shifted(const double *x, size_t n, double scale,
                          double shift, double *out)
{
    double sum = 0.0;
#pragma omp simd reduction(+ : sum)
    for (size_t j = 0; j < n; j++) {
        double a = scale * x[j] - shift;
        // a below -750 becomes -750: exp(-750) is 0 in doubles anyway,
        // and n stays in the range where 2^(n + 600) is a normal double
        uint64_t bits;
        memcpy(&bits, &a, sizeof bits);
        bits = bits > MINUS_750_BITS ? MINUS_750_BITS : bits;
        memcpy(&a, &bits, sizeof a);
        // n = round(a / ln 2), read from the low bits of kd
        double kd = a * LOG2E + ROUNDER;
        double n_ = kd - ROUNDER;
        double r = (a - n_ * LN2_HI) - n_ * LN2_LO; // |r| <= ln(2)/2
        // exp(r), Taylor to degree 13, Horner's rule
        double p = 1.0 / 6227020800.0;
        p = p * r + 1.0 / 479001600.0;
        p = p * r + 1.0 / 39916800.0;
        p = p * r + 1.0 / 3628800.0;
        p = p * r + 1.0 / 362880.0;
        p = p * r + 1.0 / 40320.0;
        p = p * r + 1.0 / 5040.0;
        p = p * r + 1.0 / 720.0;
        p = p * r + 1.0 / 120.0;
        p = p * r + 1.0 / 24.0;
        p = p * r + 1.0 / 6.0;
        p = p * r + 0.5;
        p = p * r + 1.0;
        p = p * r + 1.0;
        // 2^(n + 600) from its exponent bits (n + 600 + 1023 < 2047 as
        // a <= 0 gives n <= 0), then 2^-600: the one rounding happens
        // there, so tiny results come out as exp's subnormals or 0
        uint64_t k;
        memcpy(&k, &kd, sizeof k);
        k = (k + 1023 + 600) << 52;
        double two_n;
        memcpy(&two_n, &k, sizeof two_n);
        double e = p * two_n * 0x1p-600;
        out[j] = e;
        sum += e;
    }
    return sum;
}

ROWOPS_CLONES
void rowops_scale(double *x, size_t n, double a)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++)
        x[j] *= a;
}

ROWOPS_CLONES
void rowops_divide(double *x, size_t n, double d)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++)
        x[j] /= d;
}

ROWOPS_CLONES
void rowops_fill(double *x, size_t n, double value)
{
#pragma omp simd
    for (size_t j = 0; j < n; j++)
        x[j] = value;
}

//<
//> 08
/* A double is NaN or infinite exactly when its 11 exponent bits are all
 * ones; adding 1 at the exponent's lowest bit then carries into bit 63
 * (the sign bit, cleared first). */
ROWOPS_CLONES
int rowops_all_finite(const double *x, size_t n)
{
    const uint64_t exponent = UINT64_C(0x7ff0000000000000);
    const uint64_t one = UINT64_C(0x0010000000000000);
    uint64_t any = 0;
#pragma omp simd reduction(| : any)
    for (size_t j = 0; j < n; j++) {
        uint64_t bits;
        memcpy(&bits, x + j, sizeof bits);
        any |= (bits & exponent) + one;
    }
    return (any >> 63) == 0;
}
//<

//> 12
double rowops_softmax_unnormalized(const double *x, size_t n, double scale,
                                   size_t valid, double *out,
                                   double *row_max)
{
    if (valid > n)
        valid = n;
    double m = 0.0, sum;
    if (valid == 0) {
        // a row that sees no key: every key alike, exp(0 - 0) = 1
        rowops_fill(out, n, 1.0);
        sum = (double)n;
    } else {
        // the maximum over the keys the row sees: scale > 0 keeps the
        // order, so max(scale * x) is scale * max(x); a score that is not
        // finite is refused before any exp
        int finite;
        m = scale * rowops_max_finite(x, valid, &finite);
        if (!finite)
            return NAN;
        sum = rowops_exp_shifted(x, valid, scale, m, out);
        rowops_fill(out + valid, n - valid, 0.0); // masked keys: exactly 0
    }
    if (row_max)
        *row_max = m;
    return sum;
}
//<
