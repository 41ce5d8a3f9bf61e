//> 15
/* posenc.h: positional encodings, the two answers to chapter 10's symmetry.
 *
 * Self-attention does not see order: permute the positions of X and its
 * output rows permute with them.  Two ways to tell it where a position is:
 *
 * Sinusoidal (d2l 11.6, after the Transformer paper): a table P (L, d),
 * added to the inputs X (B, L, d) before the first layer,
 *     P[i, 2j]     = sin(i / 10000^(2j/d))
 *     P[i, 2j + 1] = cos(i / 10000^(2j/d))
 * Column pair (2j, 2j + 1) turns round a circle at the frequency
 * w_j = 10000^(-2j/d), fast for the first columns, slow for the last.
 * For an odd d the last column, d - 1 = 2j, is a sine with no cosine
 * beside it (d2l's code would fail there; this one keeps the sine).
 *
 * Rotary (RoPE; the RoFormer paper, llama2.c's run.c): nothing is added.
 * The projected queries and keys are rotated instead, per head: the head
 * features (x[2k], x[2k + 1]) of the vector at position m, k = 0 .. p/2 - 1,
 * turn by the angle m * theta_k, theta_k = base^(-2k/p), base 10000:
 *     y[2k]     = x[2k] cos(m theta_k) - x[2k + 1] sin(m theta_k)
 *     y[2k + 1] = x[2k] sin(m theta_k) + x[2k + 1] cos(m theta_k)
 * A rotation keeps dot products between vectors turned by the same angle,
 * so q_m . k_n depends on m - n alone: the scores see relative positions.
 * The pairs here are *interleaved*, features 2k and 2k + 1 of each head
 * (RoFormer, llama2.c, Meta's llama reference).  GPT-NeoX pairs feature k
 * with k + p/2 (the two *halves*); that is the same rotation after a fixed
 * permutation of each head's features (interleaved 2k -> k, 2k + 1 ->
 * k + p/2), which a permutation of W_q's and W_k's rows absorbs, so the
 * scores are the same (chapter 15 shows it).
 *
 * Shapes: x (B, L, n*p): n heads of p features side by side, as the
 * projections make them, for any n (the h query heads, or fewer key
 * heads); position of row l is start + l.  start may be negative (the
 * multi-head module aligns queries at the end of the keys: with more
 * queries than keys, the first queries sit before position 0).
 *
 * Errors follow error.h: a status and one message naming the function and
 * the shapes; outputs are new tensors you tensor_free, NULL on failure.
 * Each function emits one trace record (kind `new`); a shape-only input
 * (tensor_alloc_meta) gives a shape-only output and the same record.
 */
#ifndef MHA_POSENC_H
#define MHA_POSENC_H

#include <stddef.h>

#include "tensor/tensor.h"

/* The base of RoPE's frequencies (and of the sinusoidal table's). */
#define ROPE_DEFAULT_BASE 10000.0

/* P (L, d), the sinusoidal table above.  GSL_EINVAL for L or d of 0. */
int posenc_sinusoid(size_t L, size_t d, tensor **out);

/* out (B, L, d) = x + P: the table added to every example of x (B, L, d),
 * any strides.  GSL_EINVAL unless x has 3 dimensions. */
int posenc_add(const tensor *x, tensor **out);

/* One pair (x0, x1), a point of the plane, turned about the origin by
 * angle radians, counter-clockwise (a quarter turn takes (1, 0) to
 * (0, 1)).  GSL_SUCCESS. */
int rope_rotate_pair(double x0, double x1, double angle, double *y0,
                     double *y1);

/* theta_k = base^(-2k/p), the frequency of pair k of a head of p. */
double rope_theta(size_t k, size_t p, double base);

/* out (B, L, n*p): x (B, L, n*p) with pair k of every head of the row at
 * position start + l turned by (start + l) * theta_k.  GSL_EINVAL unless
 * x has 3 dimensions and base is a finite number > 1; GSL_EBADLEN when
 * head_size is 0, odd or does not divide x's last dimension. */
int rope_apply(const tensor *x, size_t head_size, long start, double base,
               tensor **out);

/* The inverse rotation, by -(start + l) * theta_k: rope_apply undone.  The
 * backward pass turns dQ and dK back with it (a rotation's transpose is
 * its inverse).  Errors as rope_apply. */
int rope_apply_inverse(const tensor *x, size_t head_size, long start,
                       double base, tensor **out);

#endif
//<
