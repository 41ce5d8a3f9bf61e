//> 18
/* mask.h: PyTorch's masks and options, turned into one additive mask.
 *
 * Shapes:
 *   attn_mask    (Lq, Lk) or (B*h, Lq, Lk)   row b*h + i is head i of example b
 *   key_padding  (B, Lk)                     one entry per key of each example
 *   valid_lens   (B,) or (B, Lq)             d2l's lengths
 *   merged       (B*h, Lq, Lk)               additive: 0 visible, -inf hidden
 *   bias_k, bias_v (1, 1, G*p)               one learned key and value
 *
 * Three conventions say which keys a query may see:
 *   - d2l's valid_lens: the first valid_len keys, a number per example
 *     (or per query);
 *   - a bool mask: nn.MultiheadAttention's attn_mask and key_padding_mask
 *     say True = may NOT attend; F.scaled_dot_product_attention's
 *     attn_mask says True = may attend.  Same type, opposite meaning;
 *   - a float mask: added to the scaled scores before the softmax, so
 *     -inf hides a key and any other number shifts it.
 * Each becomes an additive mask (0 or -inf for the bool ones), and the
 * masks of one call add up: attn_mask + key_padding_mask + the lengths +
 * the causal rule.  A key is hidden when its sum is -inf: the softmax then
 * gives it weight exactly 0, as masked_softmax does.
 *
 * Two options grow the keys by one, after the projections:
 *   - add_bias_kv: a learned key bias_k and value bias_v appended to K
 *     and V (before the split into heads);
 *   - add_zero_attn: a key and a value of zeros appended to every head
 *     (after the split).  Its score is 0, so a row can always give weight
 *     to "nothing": a sink.
 * The masks grow a column of 0 for each: every query may see the new key.
 *
 * An empty row, one whose every key is hidden, is NaN in PyTorch's
 * nn.MultiheadAttention (softmax of all -inf) and zeros in SDPA's fused
 * kernels; here it is an error naming the row, before anything is
 * computed (GSL_EDOM).
 *
 * Ownership: every out is new; free it with tensor_free.  Inputs are only
 * read.
 */
#ifndef MHA_MASK_H
#define MHA_MASK_H

#include <stddef.h>

#include "nn/multihead.h"
#include "tensor/tensor.h"

/* A bool mask m (any shape, entries 0 or 1) as an additive mask of its
 * shape.  true_hides 1 (nn.MultiheadAttention): 1 -> -inf, 0 -> 0;
 * true_hides 0 (SDPA): 1 -> 0, 0 -> -inf.  GSL_EINVAL for an entry that
 * is neither 0 nor 1, naming it. */
int mask_from_bool(const tensor *m, int true_hides, tensor **out);

/* d2l's valid_lens (B,) as PyTorch's bool key_padding_mask (B, Lk): row
 * b is 0 (False) for the first valid_lens[b] keys, the ones example b
 * sees, and 1 (True: ignore that key) for the rest.  GSL_EINVAL unless
 * valid_lens is 1-D with whole numbers 0 .. Lk and Lk >= 1. */
int mask_key_padding_from_lens(const tensor *valid_lens, size_t Lk,
                               tensor **out);

/* The additive masks of one call, added into merged (B*h, Lq, Lk):
 * attn_mask (Lq, Lk) for every row or (B*h, Lq, Lk), key_padding (B, Lk)
 * for every head and query of example b; either may be NULL (nothing
 * added).  GSL_EBADLEN for a shape that does not fit, naming both. */
int mask_merge(const tensor *attn_mask, const tensor *key_padding, size_t B,
               size_t h, size_t Lq, size_t Lk, tensor **out);

/* merged (N, Lq, Lk) -> (N, Lq, Lk + 1): one more key, visible (0) to
 * every query; why, "add_bias_kv" or "add_zero_attn", is what the trace
 * says added it.  A shape-only mask grows to a shape-only mask. */
int mask_grow(const tensor *mask, const char *why, tensor **out);

/* The first empty row of mask (N, Lq, Lk): 1 with (*n, *i) set when some
 * row has every entry -inf, else 0. */
int mask_find_empty_row(const tensor *mask, size_t *n, size_t *i);

/* What the module takes beyond multihead's configuration (valid_lens,
 * causal, kv_heads and rope come with it as usual). */
typedef struct mask_options {
    const tensor *attn_mask;   /* additive, (Lq, Lk) or (B*h, Lq, Lk), or NULL */
    const tensor *key_padding; /* additive, (B, Lk), or NULL */
    const tensor *valid_lens;  /* (B,) or (B, Lq), or NULL: keys past them hidden */
    const tensor *bias_k;      /* (1, 1, G*p), or NULL: add_bias_kv */
    const tensor *bias_v;      /* (1, 1, G*p), given with bias_k */
    int add_zero_attn;         /* a zero key and value per head */
    int average_weights;       /* weights (B, Lq, Lk'), the mean over heads */
} mask_options;

/* The multi-head module as nn.MultiheadAttention computes it, with opt's
 * masks and extra keys, into out (B, Lq, D_out) and, when weights is not
 * NULL, the attention weights (B, h, Lq, Lk') or, averaged, (B, Lq, Lk'),
 * Lk' = Lk + (bias_k given) + add_zero_attn.  The mask is merged and
 * checked before any product: an empty row is GSL_EDOM, naming it. */
int multihead_forward_masked(const multihead *m, const tensor *queries,
                             const tensor *keys, const tensor *values,
                             const mask_options *opt, tensor **out,
                             tensor **weights);

#endif
//<
