//> 06
/* multihead.h: multi-head attention (d2l's MultiHeadAttention, in C).
 *
 * Shapes, in the lesson's names:
 *   B        batch size
 *   Lq, Lk   number of queries; number of key-value pairs
 *   d_q, d_k, d_v   feature sizes of queries, keys and values
 *   d_model  num_hiddens: the size every projection maps to
 *   h        num_heads; each head sees p = d_model/h features
 *   D_out    output features (d_model unless asked otherwise)
 *
 *   queries (B, Lq, d_q), keys (B, Lk, d_k), values (B, Lk, d_v)
 *   valid_lens NULL, (B,) or (B, Lq): whole numbers stored as doubles
 *   out (B, Lq, D_out); per-head weights (B, h, Lq, Lk)
 *
 * The forward pass, step by step:
 *   1. project: Q = queries W_q^T, K = keys W_k^T, V = values W_v^T
 *      (rows, as PyTorch computes), each (B, L, d_model), one Linear
 *      layer each (PyTorch weight layout).
 *   2. split heads, transpose_qkv:
 *        (B, L, d_model) -reshape-> (B, L, h, d_model/h)
 *                        -permute(0, 2, 1, 3)-> (B, h, L, d_model/h)
 *                        -reshape-> (B*h, L, d_model/h)
 *      so the B*h heads look like B*h independent examples.
 *   3. valid_lens repeated per head in repeat_interleave order: head i of
 *      example b is batch row b*h + i, so it needs valid_lens[b].
 *   4. scaled dot-product attention on all B*h heads at once:
 *      (B*h, Lq, d_model/h).
 *   5. join heads, transpose_output (the inverse of step 2):
 *      (B*h, Lq, p) -> (B, h, Lq, p) -> (B, Lq, h, p) -> (B, Lq, d_model).
 *   6. W_o mixes the heads: (B, Lq, d_model) -> (B, Lq, D_out).
 *
 * multihead_forward runs these steps; it checks its inputs before them
 * and its result once after them.
 *
 * Ownership: multihead_init allocates the layers inside the struct you
 * pass; multihead_free releases them.  Outputs are new tensors you
 * tensor_free; the module keeps nothing of a forward pass.
 */
#ifndef MHA_MULTIHEAD_H
#define MHA_MULTIHEAD_H

//> 12
/* The tiled pass, multihead_forward_tiled: step 4 tile by tile
 * (flash.h), no (B*h, Lq, Lk) weights made, none to hand out. */
//<
//> 13
/* The cache, multihead_forward_cached: the forward keeps the inputs of
 * its steps for the backward pass (backward.h). */
//<
//> 14
/* The head mask, multihead_forward_cached's other option: each head's
 * output scaled between steps 4 and 5 (chapter 14).
 */
//<
//> 15
/* Rotary embeddings (cfg.rope): right after step 1, Q and K are rotated
 * by position (posenc.h, multihead_rope). */
//<
//> 16
/* Causal attention (cfg.causal = 1).  Query i sees key j only when
 * j <= i + Lk - Lq: the queries are the last Lq of the Lk positions, as
 * when decoding with a key-value cache (with Lq = Lk, PyTorch's
 * is_causal).  With valid_lens too, row i sees
 * min(valid_len, i + Lk - Lq + 1) keys: step 3 turns both into one
 * length per row, (B, Lq) (valid_lens_per_row, softmax.h), before the
 * repeat per head.  A query that would see no key at all (Lq > Lk makes
 * the first Lq - Lk rows empty; so does a valid_len of 0) is refused
 * before any work, GSL_EINVAL, one line naming the query, the example
 * and the lengths: d2l's uniform weights for an empty row would let it
 * see the future.
 */
//<
//> 17
/* Grouped-query attention (cfg.kv_heads = G, Ainslie et al. 2023).  G
 * key-value heads, G dividing h, each shared by a group of h/G
 * consecutive query heads (gqa.h says which).  G = h is the multi-head
 * attention above; G = 1 is multi-query attention (Shazeer 2019).  W_k
 * is (G*p, d_k) and W_v (G*p, d_v): the keys and values are projected to
 * G*p features, not d_model, and split into G heads, (B*G, Lk, p); the
 * cache of a decoder (kvcache.h) is h/G times smaller.  Step 4 then
 * differs:
 *   4a. the sharing, as a view: K's heads (B*G, Lk, p) viewed as
 *       (B*G, 1, Lk, p) and expanded to (B*G, h/G, Lk, p) with stride 0
 *       (tensor_expand), every query head of a group reading the same
 *       numbers; V likewise.  Reshaping that to (B*h, Lk, p) would copy:
 *       that is repeat_interleave, which this module never does.
 *   4b. a product over an expanded dimension is the same as folding it
 *       into the rows: the h/G query heads of a group are consecutive
 *       batch rows of Q (B*h, Lq, p), so Q viewed as (B*G, (h/G)*Lq, p)
 *       puts them one under another, and the per-row lengths (B*h, Lq)
 *       likewise as (B*G, (h/G)*Lq).  Both are views (Q is contiguous
 *       once split, unless B, h or Lq is 1; the trace says which).
 *   4c. the attention of step 4 on B*G problems of (h/G)*Lq query rows
 *       each, against the G key-value heads as they are;
 *   4d. the heads (B*G, (h/G)*Lq, p) viewed back as (B*h, Lq, p), and
 *       the weights as (B, h, Lq, Lk).
 */
//<

//> 19
/* Where a query may look (window.h): cfg.window, keep_first, alibi and
 * sinks change step 4 alone.  A sliding window hides the keys more than
 * W - 1 positions back (the first keep_first stay), ALiBi adds -m_h
 * (i' - j) to the scaled scores, and a sink logit per head, m->sinks,
 * joins each row's softmax and is dropped after it.  Every path follows
 * the one rule (multihead_window_rule): the copy-based pass, the tiled
 * pass, the fast path, the plain loops and the decoders, and the backward
 * pass reads the weights its forward saved (multihead_cache).  A query
 * the window leaves with no key is refused before any work, GSL_EINVAL:
 *   multihead: window: query 2 of example 0 sees no key (valid_len 1,
 *   Lq 4, Lk 4, window 2: query i sees key j only when i + Lk - Lq - 2 <
 *   j <= i + Lk - Lq)
 * The sink logits' own gradient is not computed.
 */
//<

#include <gsl/gsl_rng.h>

#include "nn/attention.h"
#include "nn/linear.h"
#include "tensor/tensor.h"

/* (B, n, d_model) -> (B*h, n, d_model/h).  GSL_EBADLEN (the reshape's)
 * when d_model is not divisible by h. */
int transpose_qkv(const tensor *x, size_t h, tensor **out);

/* (B*h, n, p) -> (B, n, h*p): the inverse of transpose_qkv. */
int transpose_output(const tensor *x, size_t h, tensor **out);

//> 07
/* valid_lens (B,) -> (B*h,) or (B, Lq) -> (B*h, Lq), each row repeated
 * h times in place (torch.repeat_interleave(..., dim=0)): [3, 2] with
 * h = 2 gives [3, 3, 2, 2], not [3, 2, 3, 2]. */
int repeat_valid_lens(const tensor *valid_lens, size_t h, tensor **out);
//<

//> 08
typedef struct multihead_config {
    size_t query_size, key_size, value_size; /* d_q, d_k, d_v */
    size_t num_hiddens;                      /* d_model */
    size_t num_heads;                        /* h */
    size_t out_size;                         /* D_out; 0: num_hiddens */
    int bias;                                /* biases on all 4 layers */
    double dropout;                          /* on the attention weights */
//> handout
    int shape_only; /* parameters with no numbers (tensor_alloc_meta): the
                       forward pass of shape-only inputs runs every step and
                       traces it, computing nothing, for any size */
//<
//> 15
    int rope;         /* 1: rotary embeddings on Q and K (posenc.h) */
    double rope_base; /* their base; 0: 10000 (ROPE_DEFAULT_BASE) */
//<
//> 17
    size_t kv_heads; /* G key-value heads, each shared by h/G query heads;
                        must divide h; 0: h (multi-head attention) */
//<
//> 16
    int causal;      /* 1: query i sees key j only when j <= i + Lk - Lq */
//<
//> 19
    size_t window;     /* W: causal, and key j only when j > i' - W (or j <
                          keep_first); 0: no window (window.h) */
    size_t keep_first; /* with a window, the first positions every query
                          sees (StreamingLLM's sinks) */
    int alibi;         /* 1: score += -m_h (i' - j); needs causal or a window */
    int sinks;         /* 1: a sink logit per head, m->sinks (h,), zero */
//<
} multihead_config;

//> 13
typedef struct multihead_cache multihead_cache;
//<

typedef struct multihead {
    multihead_config cfg; /* as given, with its defaults filled in */
    linear W_q;           /* (d_model, d_q) */
/*< 17
    linear W_k, W_v;      // (d_model, d_k), (d_model, d_v)
*/
//> 17
    linear W_k, W_v;      /* (G*p, d_k), (G*p, d_v): (d_model, ...) for G = h */
//<
    linear W_o;           /* (D_out, d_model) */
    dot_attention attention;
//> 12
    /* options of one forward pass, set by the functions that ask for
     * them (0 and NULL otherwise): */
    int tiled;               /* step 4 tile by tile (flash.h), no weights */
    size_t tile_q, tile_k;   /* its tiles; 0 for flash.h's defaults */
//<
//> 13
    multihead_cache *cache;  /* filled with what the backward pass reads */
//<
//> 14
    const tensor *head_mask; /* (h,): head i's output times head_mask[i] */
//<
//> 19
    tensor *slopes;          /* (h,): ALiBi's slopes, with cfg.alibi */
    tensor *sinks;           /* (h,): the sink logits, with cfg.sinks; set
                                them as the layers' weights are set */
//<
} multihead;

/* Allocate the four layers (zero weights; see multihead_reset_xavier).
 * GSL_EINVAL for a zero size, GSL_EBADLEN when num_hiddens is not
 * divisible by num_heads. */
//> 17
/* GSL_EBADLEN when kv_heads does not divide num_heads. */
//<
//> 19
/* With a window, m->cfg.causal is 1.  GSL_EINVAL for alibi with neither
 * causal nor a window, or keep_first without a window. */
//<
//> 15
/* With rope: GSL_EBADLEN for an odd head size p (RoPE turns pairs of
 * features), GSL_EINVAL for a rope_base that is not a finite number > 1;
 * a rope_base of 0 becomes 10000 in m->cfg. */
//<
int multihead_init(multihead *m, const multihead_config *cfg);
void multihead_free(multihead *m);

//> 15
/* With m->cfg.rope, *x (B, L, h*p), a projected Q or K, is replaced by
 * its rotation (rope_apply, posenc.h) for positions start, start + 1 ...;
 * the projection is checked finite first, then the rotation, each under
 * its stage (tensor_check_result under who, stage "projection" or
 * "rotation", name "Q" or "K"), so an overflow is named where it
 * happened; without rope, *x is left alone.  Every forward path calls it right after the projections, with
 * keys at 0 .. Lk-1 and queries aligned at the end, Lk-Lq .. Lk-1
 * (self-attention: 0 .. L-1; decoding with a cache: the new query is the
 * last position). */
int multihead_rope(const multihead *m, tensor **x, long start,
                   const char *who, const char *name);
//<
//> 17
/* The split of step 2 for a projected K or V (B, L, G*p), name "K" or
 * "V": transpose_qkv with its num_heads = G, into (B*G, L, p).  With
 * G < h the trace first says so in a note, since transpose_qkv's own line
 * reads h=G there. */
int multihead_split_kv(const multihead *m, const tensor *x, const char *name,
                       tensor **out);
//<

/* Xavier-uniform weights for all four layers (d2l's default init), zero
 * biases. */
void multihead_reset_xavier(multihead *m, gsl_rng *r);

/* Evaluation mode (the default): no dropout.  Training mode applies
 * dropout to the attention weights with rng, which the caller owns. */
void multihead_train(multihead *m, int training, gsl_rng *rng);

/* Queries, keys, values and valid_lens by the rules every attention
 * follows (qkv.h), then against the layers, before anything is computed
 * (every forward path calls it): GSL_EINVAL for a missing input or a
 * bad valid length, GSL_EBADLEN with a message naming every shape,
 * GSL_EDOM for a NaN or infinity in the inputs, weights or biases.
 * Messages start "multihead: ". */
//> 16
/* With causal, a query that sees no key is GSL_EINVAL too:
 *   multihead: causal: query 0 of example 1 sees no key (valid_len 2,
 *   Lq 5, Lk 3: query i sees key j only when j <= i + Lk - Lq)
 * (its valid_len named only when valid_lens were given). */
//<
int multihead_check_inputs(const multihead *m, const tensor *queries,
                           const tensor *keys, const tensor *values,
                           const tensor *valid_lens);

/* The same but the weights and biases: what a call brings, for a caller
 * that has checked the module's own numbers once already (a decoding
 * step after the first, chapter 16). */
int multihead_check_call(const multihead *m, const tensor *queries,
                         const tensor *keys, const tensor *values,
                         const tensor *valid_lens);

/* The forward pass above; out is (B, Lq, D_out), and weights the per-head
 * weights (B, h, Lq, Lk), as PyTorch's MultiheadAttention returns them
 * with need_weights (and average_attn_weights=False): weights[b, i] is
 * head i of example b.  Pass NULL for weights when you do not want them;
 * a failed forward leaves *weights NULL.  Inputs, weights and biases must be
 * finite: a NaN or an infinity is refused with GSL_EDOM and a message
 * naming the element (the building blocks below, softmax and attention,
 * follow IEEE arithmetic and let them through).  Finite numbers can still
 * overflow (queries of 1e200 make scores of 1e400): a NaN or an infinity
 * in the projections, the weights, the heads or the output is refused with
 * GSL_ERANGE and a message naming the stage and the first bad element
 * (tensor_check_result), so no output is ever NaN from finite input. */
int multihead_forward(multihead *m, const tensor *queries,
                      const tensor *keys, const tensor *values,
                      const tensor *valid_lens, tensor **out,
                      tensor **weights);

/* The weights w of step 4 (B*h, Lq, Lk), as dot_attention_forward (or
 * multihead_attend) made them, viewed per head as (B, h, Lq, Lk) for
 * batch B and Lq queries: *out shares w's numbers (tensor_free both).
 * w NULL (the tiled pass made none) gives *out NULL. */
int multihead_head_weights(const multihead *m, const tensor *w, size_t batch,
                           size_t Lq, tensor **out);

/* One stage of a forward path, for the overflow search below: its result
 * (NULL: skipped), what it is ("projection") and its name ("Q"). */
typedef struct multihead_stage {
    const tensor *result;
    const char *what, *name;
} multihead_stage;

/* Checked once after a forward path's steps: GSL_SUCCESS when out is
 * finite; otherwise GSL_ERANGE naming the first of the n stages, in their
 * order, whose result is not finite (else the output itself), so that the
 * message names where an overflow began and nothing is checked between
 * the steps. */
int multihead_find_overflow(const char *who, const tensor *out,
                            const multihead_stage *stages, size_t n);

//> 13
/* --- the options: a head mask, a cache for the backward ------------- */

/* What multihead_backward (backward.h) needs from the forward: the inputs
 * of its steps, saved for the backward (as PyTorch's autograd saves
 * tensors), the attention weights among them; nothing else keeps them,
 * and the forward's weights output is a separate choice.
 * Zero-initialise it (multihead_cache c = {0};); each forward given it
 * replaces its contents (and leaves it empty when it fails);
 * multihead_cache_free releases them. */
struct multihead_cache {
    const tensor *queries, *keys, *values; /* the inputs, borrowed: keep
                                              them alive and unchanged
                                              until the backward */
    tensor *lens;      /* (B*h,) or (B*h, Lq): valid_lens per head, or NULL;
                          (B*h, Lq) with causal or G < h */
    tensor *qh, *kh, *vh; /* (B*h, Lq, p), (B*G, Lk, p), (B*G, Lk, p) */
    tensor *weights;   /* (B*h, Lq, Lk): the attention weights */
    tensor *heads;     /* (B*h, Lq, p): attention outputs, before the mask */
    tensor *head_mask; /* (h,): a copy of the mask, or NULL */
    tensor *concat;    /* (B, Lq, d_model): W_o's input */
};

void multihead_cache_free(multihead_cache *c);

/* The forward pass with its two options, each NULL when not wanted (with
 * both NULL it is multihead_forward; out and weights as there):
 *   head_mask  (h,): multiplies head i's output by head_mask[i] between
 *              steps 4 and 5, before W_o mixes the heads; 1 keeps a head,
 *              0 silences it (chapter 14 measures how much each matters)
 *   c          filled with what multihead_backward reads, the inputs of
 *              the steps (the name says what it is for: the forward that
 *              training runs before multihead_backward)
 * It traces what multihead_forward traces, plus a head_mask line, and
 * the header says ", cached" when c is filled.  Errors: those of
 * multihead_forward; GSL_EBADLEN for a head_mask that is not (h,);
 * GSL_EINVAL for a cache in training mode with dropout > 0, since the
 * dropped weights are not kept. */
int multihead_forward_cached(multihead *m, const tensor *queries,
                             const tensor *keys, const tensor *values,
                             const tensor *valid_lens,
                             const tensor *head_mask, multihead_cache *c,
                             tensor **out, tensor **weights);
//<

//> 19
/* --- windows, ALiBi and sinks (window.h) ---------------------------- */

/* The module's rule (cfg.window, keep_first, alibi, sinks; m->slopes,
 * m->sinks): 1 with *r filled when any of them is on, else 0.  Every
 * forward path asks it before step 4. */
struct window_rule;
int multihead_window_rule(const multihead *m, struct window_rule *r);

/* The options of the rule as the trace's header shows them: ", window 3,
 * alibi, sinks" ("" with none). */
void multihead_window_options(const multihead *m, char *buf, size_t n);

/* The first row (b, i) of a forward pass of valid_lens (B,), (B, Lq) or
 * NULL that sees no key under the rule: 1 and *b, *i set, else 0. */
int multihead_empty_window_row(const multihead *m, const tensor *valid_lens,
                               size_t B, size_t Lq, size_t Lk, size_t *b,
                               size_t *i);
//<

//> 12
/* Step 4 alone, on heads already split: qh (B*h, Lq, p) against kh and
 * vh (B*G, Lk, p), each key-value head shared by h/G query heads (steps
 * 4a-4d above when G < h), lens (B*h,) or (B*h, Lq) or NULL; heads
 * (B*h, Lq, p), and weights (NULL: not wanted) the weights as step 4
 * made them, (B*h, Lq, Lk) (with G < h the same numbers in the folded
 * rows, (B*G, h/G*Lq, Lk); multihead_head_weights views either per
 * head), NULL in the tiled pass.  Unchecked beyond what
 * dot_attention_forward checks: the module's passes (and the decoder of
 * kvcache.h) call it after their own checks. */
int multihead_attend(multihead *m, const tensor *qh, const tensor *kh,
                     const tensor *vh, const tensor *lens, tensor **heads,
                     tensor **weights);

/* The steps of multihead_forward with step 4 (4c for G < h) done tile by
 * tile (flash_attention_forward, flash.h; tile_q, tile_k as there, 0 for
 * its defaults) on the split (and folded) heads, so no (B*h, Lq, Lk)
 * tensor is made, so it has no weights to give.  Errors
 * as multihead_forward, plus GSL_EINVAL in training mode with dropout
 * > 0.  The tests hold it equal to the copy path and the fast path. */
int multihead_forward_tiled(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, size_t tile_q,
                            size_t tile_k, tensor **out);
//<
//<

#endif
//<
