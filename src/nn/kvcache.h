//> 16
/* kvcache.h: decoding one position at a time, with a key-value cache.
 *
 * A model that writes a sequence makes it one position at a time: at
 * step t it has positions 0 .. t-1 and computes position t, whose query
 * may look at every earlier position (causal attention) and nothing
 * later.  Run the whole causal forward pass again at each step and the
 * keys and values of positions 0 .. t-1 are projected again every time,
 * to the same numbers.  A key-value cache keeps them instead: each step
 * projects only the new position, appends its keys and values to the
 * cache, and attends its query to everything the cache holds.  The
 * numbers are those of the full causal pass, row by row (the tests hold
 * them to 1e-12); the work per step grows with t instead of t^2.
 *
 * Shapes, in the lesson's names (multihead.h):
 *   B batch, G key-value heads (cfg.kv_heads; G = h is multi-head
 *   attention), p = d_model/h features per head, t positions so far
 *   storage      (B, G, capacity, p) for the keys and for the values,
 *                allocated once; positions 0 .. length-1 are filled
 *   x            (B, n, d_q): the n >= 1 new positions of a step (n = 1
 *                one decoding step, n > 1 a prefill of a prompt)
 *   out          (B, n, D_out)
 * A cache holds 2 * B * G * capacity * p doubles: with G < h it is h/G
 * times smaller than multi-head attention's, which is why models share
 * key-value heads (grouped-query attention, multihead.h).
 *
 * kv_cache_decode_step, step by step (self-attention: queries, keys and
 * values are all x):
 *   1. project the new positions: Q (B, n, d_model), K and V (B, n, G*p)
 *   2. with rope (multihead_config.rope, posenc.h), Q and K turned by
 *      position: the new rows are positions length .. length+n-1
 *   3. split: Q into (B*h, n, p), K and V into (B*G, n, p)
 *   4. append K and V at positions length .. length+n-1 of the storage:
 *      the cache grows to (B, G, t, p), t = length + n (a copy, traced)
 *   5. attend the n queries to the t cached positions causally, aligned
 *      at the end (query i sees positions 0 .. length + i), the query
 *      heads of a group sharing their key-value head as in multihead.h
 *   6. join the heads and apply W_o: out (B, n, D_out)
 * The weights, when asked for, are (B, h, n, t).  The cache's length
 * grows by n only when the step succeeds; a failed step leaves it as it
 * was.  The
 * module's weights and biases are checked for NaN and inf at the first
 * step, into an empty cache, and not again at the later steps of the
 * sequence; x and the output are checked at every step.
 *
 * Ownership: kv_cache_init allocates the storage, kv_cache_free releases
 * it.  Errors follow error.h: a status and one message naming the
 * function, the values and the shapes.
 */
#ifndef MHA_KVCACHE_H
#define MHA_KVCACHE_H

#include <stddef.h>

#include "nn/multihead.h"
#include "tensor/tensor.h"

typedef struct kv_cache {
    size_t batch, kv_heads, head_size; /* B, G, p */
    size_t capacity;                   /* positions the storage has room for */
    size_t length;                     /* positions filled: 0 .. length-1 */
    tensor *keys, *values;             /* storage (B, G, capacity, p) each */
} kv_cache;

/* Empty (length 0), room for capacity positions.  GSL_EINVAL when a size
 * is 0, GSL_ENOMEM. */
int kv_cache_init(kv_cache *c, size_t batch, size_t kv_heads,
                  size_t head_size, size_t capacity);
void kv_cache_free(kv_cache *c);

/* The storage of a key-value cache, here and in the window and paged
 * caches: *keys and *values, each (rows, G, cols, p), zero, their axes
 * named `names`.  On failure neither is allocated (both NULL).
 * GSL_ENOMEM. */
int kv_storage_alloc(size_t rows, size_t kv_heads, size_t cols,
                     size_t head_size, const char *names, tensor **keys,
                     tensor **values);

/* What a decoding step checks first, here and in the window cache: new
 * positions x, a cache whose storage is there (keys not NULL), a module
 * for self-attention.  GSL_EINVAL naming `who`. */
int kv_check_decoding(const multihead *m, const tensor *keys,
                      const tensor *x, const char *who);

/* Steps 1-3 of a decoding step, here and in the window cache: the new
 * positions x (B, n, d_q), positions start .. start+n-1, projected,
 * turned by position (with rope) and split into heads.  On failure what
 * was made is left for kv_step_free; *s is all NULL before the call. */
typedef struct kv_step {
    tensor *q, *k, *v;    /* (B, n, d_model); (B, n, G*p) each */
    tensor *qh, *kh, *vh; /* (B*h, n, p); (B*G, n, p) each */
} kv_step;
int kv_step_project(multihead *m, const tensor *x, size_t start,
                    const char *who, kv_step *s);
void kv_step_free(kv_step *s);

/* Step 3 alone: s->q, s->k and s->v split into the h query heads and the
 * key-value heads (s->qh, s->kh, s->vh), as kv_step_project and the
 * masked forward (mask.h) split their projections. */
int kv_step_split(const multihead *m, kv_step *s);

/* Headers of views (B, G, length, p) of the filled positions of the
 * storage, written into *keys and *values (each may be NULL).  Like
 * tensor_named's, they share the storage without a count of their own:
 * keep them on the stack, use them while c lives and until its next
 * step, and never tensor_free them.  GSL_EINVAL when the cache is empty
 * (a tensor has no dimension of size 0). */
int kv_cache_view(const kv_cache *c, tensor *keys, tensor *values);

/* One step of decoding (above): x (B, n, d_q) the new positions, out
 * (B, n, D_out) their outputs, weights (B, h, n, t) their attention over
 * the t cached positions (NULL: not wanted; *weights NULL on failure).
 * m must be self-attention (d_q = d_k = d_v); its cfg.causal does not
 * matter (decoding is causal).  GSL_EBADLEN
 * when the cache's B, G or p differ from x's batch and m's heads, or when
 * it has no room for n more positions (the message names capacity,
 * length and n); GSL_EINVAL for a module that is not self-attention;
 * otherwise the errors of multihead_forward. */
int kv_cache_decode_step(multihead *m, kv_cache *c, const tensor *x,
                          tensor **out, tensor **weights);

#endif
//<
