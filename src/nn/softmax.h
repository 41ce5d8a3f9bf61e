//> 03
/* softmax.h: softmax over the last axis, and masked softmax.
 *
 * Shapes:
 *   x           (..., n)        softmax_lastdim: any 1 to 4 dimensions
 *   scores      (B, Lq, Lk)     one row of Lk key scores per query
 *   valid_lens  NULL            no mask
 *               (B,)            one length per example, for all its queries
 *               (B, Lq)         one length per query row
 *   out         the input's shape; every row sums to 1
 *
 * Stable softmax.  exp(x_j) / sum_k exp(x_k) overflows as soon as one
 * x_j passes about 709.  Subtracting the row's maximum m first changes
 * nothing mathematically (exp(-m) cancels) and keeps every exponent <= 0,
 * so the largest term is exp(0) = 1 and nothing overflows: logits of
 * +-1000 or +-1e300 are fine.  The inputs must be finite (after scaling):
 * inf - inf is NaN, here as in PyTorch.
 *
 * Masking.  Row (b, i) may only look at its first valid_len keys.  The
 * softmax runs over those keys alone and every key after them gets weight
 * exactly 0.0, whatever the scores: a masked key never enters the maximum
 * or the sum.
 *   - d2l's masked_softmax instead replaces a masked score by -1e6 and
 *     takes the softmax of the whole row.  That agrees with the rule above
 *     while the row's largest valid score is above -1e6 + 745 (exp of
 *     anything below -745 is 0 in doubles), and leaks when every valid
 *     score is below that: the masked keys, at -1e6, then win the weight
 *     (chapter 03 shows such a row).  PyTorch's masked_fill(mask, -inf)
 *     cannot leak, but gives NaN for a row with nothing visible.
 *   - A row with valid_len 0 sees no key.  It comes out uniform, every key
 *     1/Lk, as d2l's rule gives it (all its scores equal -1e6).  Where a
 *     causal mask is asked for, such a row is an error instead (see
 *     softmax_find_empty_row): uniform weights would see the future.
 *
 * valid_lens holds whole numbers stored as doubles, 0 <= valid_len <= Lk.
 * Anything else (negative, fractional, NaN, larger than Lk, a shape other
 * than (B,) or (B, Lq)) is an error naming the value, its index and the
 * shapes; nothing is computed then.
 *
 * Ownership: out is a new contiguous tensor with the input's shape and
 * dimension names; free it with tensor_free.  The inputs are only read.
 */
#ifndef MHA_SOFTMAX_H
#define MHA_SOFTMAX_H

#include <stddef.h>

#include "tensor/tensor.h"

/* Softmax over the last axis of x (any ndim, any strides). */
int softmax_lastdim(const tensor *x, tensor **out);

/* Softmax over the keys of scores (B, Lq, Lk), keys at positions >=
 * valid_len masked (weight 0).  valid_lens: NULL, (B,) or (B, Lq). */
int masked_softmax(const tensor *scores, const tensor *valid_lens,
                   tensor **out);

/* masked_softmax(scale * scores, valid_lens), with the scaling, the mask
 * and the softmax done together while each row is visited once.  The
 * scale applies to the valid scores only (masked ones get 0 whatever
 * their score).  The scaled
 * dot-product attention calls it with scale 1/sqrt(d).  scale must be
 * finite (GSL_EINVAL otherwise). */
int masked_softmax_scaled(const tensor *scores, double scale,
                          const tensor *valid_lens, tensor **out);

/* masked_softmax_scaled's steps, with its trace line, on scores and
 * valid_lens its caller has checked (softmax_check_valid_lens): the dot
 * product's steps call it, behind a pooling's or a module's door. */
int masked_softmax_steps(const tensor *scores, double scale,
                         const tensor *valid_lens, tensor **out);

/* A causal mask as 2-D valid_lens: a (batch, len) tensor whose every row
 * is 1, 2, ..., len, so query i sees keys 0 .. i and nothing after it.
 * GSL_EINVAL when batch or len is 0. */
int causal_valid_lens(size_t batch, size_t len, tensor **out);

/* --- causal masks, aligned at the end ------------------------------ */

/* The keys row (b, i) of scores (B, Lq, Lk) sees: its valid length
 * (softmax_valid_len below) and, with causal, no more than
 * i + Lk - Lq + 1, so query i sees key j only when j <= i + Lk - Lq.
 * The queries are the last Lq of the Lk positions: when decoding with a
 * cache the first Lk - Lq keys were there before the first query (with
 * Lq = Lk it is the usual mask, causal_valid_lens' and PyTorch's
 * is_causal).  0 when the row sees no key at all: with causal, the first
 * Lq - Lk rows when Lq > Lk, and any row whose valid length is 0. */
size_t softmax_row_len(const tensor *valid_lens, int causal, size_t b,
                       size_t i, size_t num_queries, size_t num_keys);

/* With causal, the first row (b, i) in row-major order that sees no key
 * (softmax_row_len 0): 1 and *b, *i set; 0 when there is none or causal
 * is off.  An empty row is an error wherever causal is asked for: d2l's
 * rule would give it uniform weights over every key, the future ones
 * included.  valid_lens must have passed softmax_find_bad_len. */
int softmax_find_empty_row(const tensor *valid_lens, int causal,
                           size_t batch, size_t num_queries,
                           size_t num_keys, size_t *b, size_t *i);

/* valid_lens (NULL, (B,) or (B, Lq)) and causal as one length per row:
 * out (B, Lq) holds softmax_row_len of every row, for the attentions that
 * take (B, Lq) valid_lens.  Shapes alone (no numbers) when valid_lens has
 * none or shape_only is 1.  Traced as one new step.  valid_lens must
 * have passed softmax_find_bad_len; GSL_EINVAL when batch, num_queries or
 * num_keys is 0. */
int valid_lens_per_row(const tensor *valid_lens, int causal, size_t batch,
                       size_t num_queries, size_t num_keys, int shape_only,
                       tensor **out);

/* The valid length of row (b, i) of scores (B, Lq, Lk): valid_lens[b]
 * when valid_lens is (B,), valid_lens[b, i] when (B, Lq), num_keys when
 * it is NULL.  Unchecked: softmax_check_valid_lens says first whether
 * valid_lens fits. */
size_t softmax_valid_len(const tensor *valid_lens, size_t b, size_t i,
                         size_t num_keys);

/* What is wrong with valid_lens (NULL, (B,) or (B, Lq)) against scores
 * of shape (B, Lq, Lk): its shape, or entry (b, i), the first in
 * row-major order that breaks a rule above (i is 0 for (B,)).  The rules
 * live here; softmax_check_valid_lens words them for the library, and a
 * caller that words its own messages (the mha program) asks this.
 * min_len > 0 also refuses a whole number below it (headmajor.h refuses
 * 0). */
typedef enum softmax_lens_fault {
    SOFTMAX_LENS_FINE = 0,
    SOFTMAX_LENS_SHAPE,    /* neither (B,) nor (B, Lq) */
    SOFTMAX_LEN_NOT_WHOLE, /* NaN, or with a fraction */
    SOFTMAX_LEN_NEGATIVE,
    SOFTMAX_LEN_TOO_LARGE, /* more than num_keys */
    SOFTMAX_LEN_TOO_SMALL, /* less than min_len */
} softmax_lens_fault;

softmax_lens_fault softmax_find_bad_len(const tensor *valid_lens,
                                        size_t batch, size_t num_queries,
                                        size_t num_keys, size_t min_len,
                                        size_t *b, size_t *i);

/* The index of entry (b, i) as messages print it, into buf: "1" for
 * (B,) valid_lens, "1, 0" for (B, Lq); returns buf. */
char *softmax_len_index(const tensor *valid_lens, size_t b, size_t i,
                        char *buf, size_t n);

/* Check valid_lens (NULL, (B,) or (B, Lq)) against scores of shape
 * (B, Lq, Lk) before anything is computed.  Messages start with `who` and
 * end with "(<context>, valid_lens <shape>)", where context names the
 * caller's shapes, e.g. "scores (2, 2, 4)". */
int softmax_check_valid_lens(const char *who, const char *context,
                             size_t batch, size_t num_queries,
                             size_t num_keys, const tensor *valid_lens);

#endif
//<
