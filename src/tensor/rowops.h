/* rowops.h: vectorised row kernels: a finiteness check for every tensor,
 * and (from chapter 12 on) the softmax rows of the tiled and fast paths.
 *
 * A softmax row costs one exp per key.  At L = 512, B = 8, h = 8 that is
 * 16.8 million exps per forward pass: with the C library's exp (about 10
 * ns each, one at a time) the softmax would take longer than all the
 * matrix products together.  These kernels are plain C loops written so
 * that the compiler turns them into SIMD code (8 doubles per instruction
 * with AVX-512): no calls, no branches, the exponential computed by hand.
 *
 * rowops_exp_shifted computes exp(a) for a = scale * x_j - shift <= 0 by
 * the textbook method:
 *     a = n ln 2 + r,  n = round(a / ln 2),  |r| <= ln(2)/2
 *     exp(a) = 2^n * exp(r)
 * with ln 2 split in two parts so that n ln 2 is exact (Cody and Waite),
 * exp(r) by its Taylor polynomial to degree 13 (the first term left out
 * is r^14 / 14! < 1e-19 relative), and 2^n built directly in the
 * exponent bits of a double.  The result is within 2 ulps of the C
 * library's exp; a < -745 gives 0, as exp does.
 *
 * Shapes: every row is n contiguous doubles.  The inputs must be finite;
 * a = scale * x_j - shift must be <= 0 (shift is the row's maximum, or
 * more), which is how a stable softmax calls it.
 *
 * Each kernel is compiled three times (x86-64 baseline, AVX2 + FMA,
 * AVX-512) and the loader picks the one the CPU runs (GCC target_clones).
 */
#ifndef MHA_ROWOPS_H
#define MHA_ROWOPS_H

#include <stddef.h>

//> 12
/* max_j x_j over n >= 1 doubles. */
double rowops_max(const double *x, size_t n);

/* max_j x_j over n >= 1 doubles, and in *finite 1 when every x_j is
 * finite (not NaN, not infinite), else 0; one pass over x. */
double rowops_max_finite(const double *x, size_t n, int *finite);

/* out_j = exp(scale * x_j - shift) for j < n; returns their sum.  out may
 * be x (in place). */
double rowops_exp_shifted(const double *x, size_t n, double scale,
                          double shift, double *out);

/* x_j *= a for j < n. */
void rowops_scale(double *x, size_t n, double a);

/* x_j /= d for j < n (division, not a multiply by 1/d: each entry is
 * rounded once, as the copy-based path's normalisation rounds it). */
void rowops_divide(double *x, size_t n, double d);

/* x_j = value for j < n. */
void rowops_fill(double *x, size_t n, double value);

//<
//> 08
/* 1 when every x_j, j < n, is finite (not NaN, not infinite), else 0.
 * It reads all n without stopping early: the caller finds where. */
int rowops_all_finite(const double *x, size_t n);
//<

//> 12
/* The fused softmax row of the fast paths, left unnormalised, over the
 * first `valid` keys (the masking rule of softmax.h):
 *     out_j = exp(scale * x_j - m)  for j < valid,  m = scale * max x_j,
 *     out_j = 0                     for j >= valid (masked, whatever x_j),
 * and with valid 0, a row that sees no key, out_j = 1 for every j (m = 0:
 * d2l's uniform row).  Returns sum_j out_j (>= 1: the maximum contributes
 * exp(0)).  Dividing by the sum is left to the caller, who can do it on
 * the much shorter output row (p values) instead of the n weights.
 * scale must be > 0.  out may be x.  *row_max receives m when row_max is
 * not NULL.  When one of the first `valid` x_j is NaN or infinite, it
 * returns NaN, with out and *row_max as they were. */
double rowops_softmax_unnormalized(const double *x, size_t n, double scale,
                                   size_t valid, double *out,
                                   double *row_max);
//<

#endif
