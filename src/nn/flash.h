//> 12
/* flash.h: attention without the (Lq, Lk) matrix: online softmax and
 * tiled attention in the FlashAttention style.
 *
 * Shapes, as in attention.h:
 *   queries (B, Lq, d), keys (B, Lk, d), values (B, Lk, dv)
 *   valid_lens NULL, (B,) or (B, Lq) (d2l's masking, softmax.h)
 *   out (B, Lq, dv)
 * B counts independent attention problems: for multi-head attention it is
 * batch * heads, as after transpose_qkv.
 *
 * Exact attention (dot_attention_forward) computes all Lq x Lk scores,
 * then all Lq x Lk weights, then weights @ values: two B x Lq x Lk
 * tensors.  At B*h = 8, L = 16384 that is 16 GiB each.
 *
 * Online softmax (Milakov and Gimelshein, 2018).  softmax(x)_j =
 * exp(x_j - m) / l with m = max x and l = sum exp(x_j - m) needs m before
 * the first exp, so the classic way reads x twice.  Read x a tile at a
 * time instead and keep a running max m and a running sum l of
 * exp(x_j - m) over what was seen so far.  When a tile raises the max
 * from m to m', every earlier term exp(x_j - m) must become
 * exp(x_j - m') = exp(x_j - m) * exp(m - m'): one multiplication of l by
 * alpha = exp(m - m') (<= 1) fixes them all:
 *     m' = max(m, max of the tile)
 *     l' = alpha * l + sum over the tile of exp(x_j - m')
 * After the last tile m and l are the row's max and softmax denominator.
 *
 * Tiled attention (Dao et al., 2022, "FlashAttention").  The output row
 * o = sum_j softmax(s)_j v_j is a sum too, so it can be kept the same
 * way, unnormalised: o' = alpha * o + sum over the tile of
 * exp(s_j - m') v_j, and divided by l at the end.  Per block of tile_q
 * query rows, per tile of tile_k keys:
 *     S = Q_tile K_tile^T                  (tile_q, tile_k), one dgemm
 *     scale, mask, update m and l per row  rowops.h
 *     O_rows *= alpha;  O += P V_tile      one dgemm with beta = 1
 * and at the end O_row /= l.  Only a (tile_q, tile_k) block of scores
 * exists at a time, per thread; the output is the only big buffer.
 *
 * Masking, as softmax.h: a row takes in only the keys before its valid
 * length (a masked key is never part of its max or sum, so it gets weight
 * exactly 0), and a row of valid length 0 sees every key alike (uniform
 * weights).  The result equals dot_attention_forward's to rounding.  A
 * tile that lies wholly beyond every row's valid length is skipped: a
 * causal mask does about half the work.
 *
 * The blocks of query rows run in parallel (threads.h), one-threaded BLAS
 * inside.  out is a new contiguous tensor you tensor_free; inputs are only
 * read.  Inputs whose batch slices are not row-major matrices are copied
 * once (qkv_as_matrices, as the dot product's are).
 */
#ifndef MHA_FLASH_H
#define MHA_FLASH_H

#include <stddef.h>

#include "tensor/tensor.h"

#define FLASH_TILE_Q 64  /* default query rows per block */
#define FLASH_TILE_K 256 /* default keys per tile */

/* The running state of one softmax row. */
typedef struct online_softmax {
    double max; /* m: the largest score seen so far (-inf before any) */
    double sum; /* l: sum of exp(x_j - m) over the scores seen so far */
} online_softmax;

/* m = -inf, l = 0. */
void online_softmax_init(online_softmax *s);

/* Take in the next n >= 1 finite scores x.  Returns alpha = exp(m - m'),
 * the factor the earlier sum was rescaled by (0 for the first tile, 1
 * when the max did not move). */
double online_softmax_update(online_softmax *s, const double *x, size_t n);

/* out = softmax(Q K^T / sqrt(d), masked by valid_lens) V, tile by tile
 * as above.  tile_q, tile_k: 0 for the defaults; any size >= 1 works,
 * including sizes that do not divide Lq or Lk.  Errors as
 * dot_attention_forward (GSL_EBADLEN for shapes, GSL_EINVAL for bad
 * valid_lens or NULL inputs, GSL_ENOMEM), and GSL_ERANGE when finite
 * inputs give an output that is not (a score overflowed); NaN or inf in
 * the inputs pass through, as there. */
int flash_attention_forward(const tensor *queries, const tensor *keys,
                            const tensor *values, const tensor *valid_lens,
                            size_t tile_q, size_t tile_k, tensor **out);

//> 19
/* The same under a window, ALiBi or sinks (window.h): queries (B*h, Lq,
 * d), row b*h + i head i of example b, against keys and values (B*G, Lk,
 * d), its group's key-value head (gqa.h) of example b; query r at
 * position q0 + r, key j at j.  A tile adds the keys the rule shows, each
 * row's max and sum start at the sink's s_h and 1 when there are sinks.
 * The module's checks come first: only the batch sizes are checked
 * here. */
struct window_rule;
int flash_attention_forward_window(const tensor *queries, const tensor *keys,
                                   const tensor *values,
                                   const tensor *valid_lens,
                                   const struct window_rule *r, size_t h,
                                   long q0, size_t tile_q, size_t tile_k,
                                   tensor **out);
//<

#endif
//<
