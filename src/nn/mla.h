//> 20
/* mla.h: multi-head latent attention (MLA), DeepSeek-V2's and V3's way to
 * make the key-value cache small.
 *
 * Keys and values are not projected per head from x.  One latent c_kv of
 * d_c features per position is (a down-projection, RMS-normalised), and
 * every head's keys and values are up-projections of it.  Positions are
 * told apart by a separate rotary key k_pe of d_r features that all heads
 * share.  So a cache needs c_kv and k_pe alone: d_c + d_r numbers per
 * position and layer, whatever h is.  Queries come through a low-rank
 * path of their own and split, per head, into a part without rotation
 * (d_nope features, met by the up-projected keys) and a rotated part (d_r
 * features, met by k_pe).
 *
 * Shapes, in the lesson's names (and the published model's):
 *   x        (B, n, d_model)            dim
 *   wq_a     (d_q', d_model)            q_lora_rank d_q'; or wq when 0
 *   q_norm   (d_q',)                    RMSNorm weight
 *   wq_b     (h*(d_nope+d_r), d_q')     queries, per head [nope | rope]
 *   wkv_a    (d_c + d_r, d_model)       [c_kv | k_pe] per position
 *   kv_norm  (d_c,)                     RMSNorm weight of c_kv
 *   wkv_b    (h*(d_nope+d_v), d_c)      per head [W_UK (d_nope rows) |
 *                                       W_UV (d_v rows)]
 *   wo       (d_model, h*d_v)
 *   kv_lora_rank d_c, qk_nope_head_dim d_nope, qk_rope_head_dim d_r,
 *   v_head_dim d_v; scores are scaled by 1/sqrt(d_nope + d_r).
 *
 * The two paths compute the same numbers:
 *   naive     up-project c_kv to K (B*h, t, d_nope + d_r), k_pe appended
 *             to every head, and V (B*h, t, d_v); plain attention
 *   absorbed  fold W_UK into the query, q_nope W_UK: (B, h*n, d_c + d_r)
 *             with q_pe appended; attend to the latent itself, keys
 *             [c_kv | k_pe] (B, t, d_c + d_r), values c_kv (B, t, d_c),
 *             all h heads folded into the rows as multi-query attention
 *             does; then W_UV per head, (B, n, h*d_v)
 * Both end with wo.  Attention is causal: the query at position i sees
 * positions 0 .. i.  Rotation is RoPE's interleaved pairs (posenc.h), as
 * the published model's complex multiplication turns them.
 *
 * Ownership: mla_init allocates the layers, mla_free releases them;
 * mla_cache_init and mla_cache_free likewise.  Outputs are new tensors
 * you tensor_free, NULL on failure.  Errors follow error.h: a status and
 * one message naming the function, the values and the shapes.
 */
#ifndef MHA_MLA_H
#define MHA_MLA_H

#include <stddef.h>

#include <gsl/gsl_rng.h>

#include "nn/linear.h"
#include "tensor/tensor.h"

/* The published model's RMSNorm epsilon. */
#define MLA_DEFAULT_EPS 1e-6

typedef struct mla_config {
    size_t dim;              /* d_model */
    size_t num_heads;        /* h */
    size_t q_lora_rank;      /* d_q': queries' low rank; 0 for one wq */
    size_t kv_lora_rank;     /* d_c: the latent's features */
    size_t qk_nope_head_dim; /* d_nope */
    size_t qk_rope_head_dim; /* d_r: even */
    size_t v_head_dim;       /* d_v */
    double rope_base;        /* 0: ROPE_DEFAULT_BASE */
    double eps;              /* RMSNorm's; 0: MLA_DEFAULT_EPS */
} mla_config;

typedef enum mla_path { MLA_NAIVE, MLA_ABSORBED } mla_path;

typedef struct mla {
    mla_config cfg;
    linear wq;       /* (h*(d_nope+d_r), d_model), when q_lora_rank is 0 */
    linear wq_a;     /* (d_q', d_model) */
    tensor *q_norm;  /* (d_q',) */
    linear wq_b;     /* (h*(d_nope+d_r), d_q') */
    linear wkv_a;    /* (d_c + d_r, d_model) */
    tensor *kv_norm; /* (d_c,) */
    linear wkv_b;    /* (h*(d_nope+d_v), d_c) */
    linear wo;       /* (d_model, h*d_v) */
} mla;

/* Zero weights, norms of ones.  GSL_EINVAL when dim, num_heads,
 * kv_lora_rank, qk_rope_head_dim or v_head_dim is 0, qk_rope_head_dim is
 * odd, or rope_base or eps is negative or not finite. */
int mla_init(mla *m, const mla_config *cfg);
void mla_free(mla *m);
/* PyTorch's nn.Linear default for every layer; the norms' weights drawn
 * from U(0.5, 1.5), so that they matter in a check. */
void mla_reset(mla *m, gsl_rng *r);

/* out = RMSNorm of x (..., d) over its last dimension (Zhang and
 * Sennrich 2019): each row divided by its root mean square, eps added to
 * the mean of the squares, then scaled feature by feature by weight
 * (d,).  GSL_EBADLEN when weight is not (d,), GSL_EINVAL for an eps that
 * is not a finite number > 0. */
int mla_rms_norm(const tensor *x, const tensor *weight, double eps,
                 tensor **out);

/* Causal self-attention over the n positions of x (B, n, d_model), at
 * positions 0 .. n-1, by either path: out (B, n, d_model); weights
 * (B, h, n, n) (NULL: not wanted; *weights NULL on failure).  GSL_EBADLEN
 * when x is not (B, n, d_model). */
int mla_forward(mla *m, const tensor *x, mla_path path, tensor **out,
                tensor **weights);

/* The latent cache: what MLA keeps per position. */
typedef struct mla_cache {
    size_t batch, kv_lora_rank, rope_dim; /* B, d_c, d_r */
    size_t capacity, length;              /* room, and positions filled */
    tensor *latent;                       /* (B, capacity, d_c): c_kv, normed */
    tensor *pe;                           /* (B, capacity, d_r): k_pe, rotated */
} mla_cache;

/* Empty, room for capacity positions.  GSL_EINVAL when a size is 0. */
int mla_cache_init(mla_cache *c, size_t batch, size_t kv_lora_rank,
                   size_t rope_dim, size_t capacity);
void mla_cache_free(mla_cache *c);

/* One step of decoding: x (B, n, d_model) the next n >= 1 positions
 * length .. length+n-1; their c_kv and k_pe are appended to the cache and
 * their queries attend to all t = length + n positions it holds, by
 * either path: out (B, n, d_model), weights (B, h, n, t) (NULL: not
 * wanted).  Equal, row
 * by row, to mla_forward over all t positions.  GSL_EBADLEN when the
 * cache's B, d_c or d_r differ from x's and m's or it has no room for n
 * more; the cache grows only when the step succeeds. */
int mla_decode_step(mla *m, mla_cache *c, const tensor *x, mla_path path,
                    tensor **out, tensor **weights);

#endif
//<
