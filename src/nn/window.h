//> 19
/* window.h: where attention may look: sliding windows, ALiBi and sinks.
 *
 * Positions, as the causal mask counts them (multihead.h): key j is at
 * position j, 0 .. Lk-1, and query i at i' = i + Lk - Lq, the queries
 * being the last Lq positions.  Three ideas of today's models change which
 * keys query i' sees and what its scores are:
 *
 *   - a sliding window of W keys (Mistral 7B, Jiang et al. 2023): causal,
 *     and key j visible only when i' - W < j <= i'.  Each query sees at
 *     most W keys, so a decoder needs only the last W keys and values: a
 *     rolling cache of W slots (window_cache below), memory constant in
 *     the length.  keep > 0 also keeps the first keep positions visible
 *     to every query (StreamingLLM's attention sinks, Xiao et al. 2023:
 *     heads park weight on the first tokens, and dropping them from the
 *     cache spoils the model), so key j is visible when j <= i' and
 *     (j < keep or j > i' - W);
 *   - ALiBi (Press et al. 2022): no positional encoding at all; the score
 *     of key j gets the bias -m_h (i' - j), linear in the distance, with
 *     one slope m_h per head (alibi_slope below).  It needs causal or a
 *     window: the distance is to earlier keys;
 *   - a sink logit per head (gpt-oss, 2025): s_h joins each row's softmax
 *     as one more score and is dropped after it, so the weights of a row
 *     sum to 1 - exp(s_h - M) / Z < 1 and a row can attend to "nothing".
 *
 * The score of a visible key j in row i' of head h is
 *     a_j = q . k_j / sqrt(p) - m_h (i' - j)
 * and its weight, over the visible keys V and the sink,
 *     w_j = exp(a_j - M) / (sum_{k in V} exp(a_k - M) + exp(s_h - M)),
 *     M = max(max_{k in V} a_k, s_h)
 * (no sink: drop its terms).  A key outside V takes no part in the max or
 * the sum and gets weight exactly 0.0, the masking rule of softmax.h.
 *
 * The module takes them as options (multihead.h: cfg.window, keep_first,
 * alibi, sinks) on every path; window_cache.h decodes with a window.
 *
 * Shapes: qh (B*h, Lq, p), kh and vh (B*G, Lk, p), lens NULL, (B*h,) or
 * (B*h, Lq); weights (B*h, Lq, Lk); heads (B*h, Lq, p); slopes and sinks
 * (h,).
 */
#ifndef MHA_WINDOW_H
#define MHA_WINDOW_H

#include <stddef.h>

#include "tensor/tensor.h"

/* ALiBi's slope of head `head` of n heads into *m, as the paper's
 * get_slopes, which BLOOM uses, gives it (Press et al. 2022, section 3):
 * for n a power of two a geometric sequence, n = 8: 1/2, 1/4 ... 1/256
 * (the paper's list), n = 16: 2^-0.5, 2^-1 ... 2^-8.  Otherwise, with P
 * the largest power of two below n, the P slopes of P heads come first,
 * then every other slope of 2P heads, from its first, which fall between
 * them (n = 12: the eight of n = 8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5).
 * GSL_EINVAL for head >= n (n = 0 included). */
int alibi_slope(size_t n, size_t head, double *m);

/* The slopes of n heads as a tensor (n,).  GSL_EINVAL for n = 0. */
int alibi_slopes(size_t n, tensor **out);

/* Which keys a row sees and what is added to its scores. */
typedef struct window_rule {
    int causal;           /* key j only when j <= i' */
    size_t window;        /* W: and j > i' - W (or j < keep); 0: no window */
    size_t keep;          /* the first keep positions stay (with a window) */
    const double *slopes; /* (h,): ALiBi's m_h, or NULL */
    const double *sinks;  /* (h,): the sink logits s_h, or NULL */
} window_rule;

/* 1 when the key at position kpos is visible to the query at qpos. */
int window_sees(const window_rule *r, long qpos, long kpos);

/* One row of head `head`, left unnormalised: out_j = exp(a_j - M) for the
 * visible keys among s's first len (a_j and M as above, a_j from the
 * score s_j and scale), 0.0 for the others; returns the sum with the
 * sink's exp(s_h - M).  kpos (n,) gives each key's position (NULL: key j
 * is at j).  Dividing by the sum gives the weights.  out may be s;
 * *row_max receives M when not NULL.  The row must see a key or a sink. */
double window_softmax_row(const window_rule *r, size_t head, const double *s,
                          size_t n, double scale, long qpos,
                          const long *kpos, size_t len, double *out,
                          double *row_max);

/* Step 4 of multihead.h under rule r: for every head n = b*h + i of qh
 * (B*h, Lq, p), reading its group's key-value head (gqa.h) of example b
 * in kh and vh (B*G, Lk, p), the scores, each row's softmax above (lens
 * as in softmax_valid_len; query i at position q0 + i, key j at kpos[j]
 * or j), the weights (B*h, Lq, Lk) and heads = weights V (B*h, Lq, p),
 * both new.  GSL_ERANGE naming a score that overflowed from finite inputs. */
int window_attend(const window_rule *r, size_t h, const tensor *qh,
                  const tensor *kh, const tensor *vh, const tensor *lens,
                  long q0, const long *kpos, tensor **weights,
                  tensor **heads);

#endif
//<
