//> 19
/* window_cache.h: decoding with a sliding window, in a rolling cache.
 *
 * With a window of W keys (window.h) a query never sees a key more than
 * W - 1 positions back, so a decoder (kvcache.h) need not keep them: a
 * cache of W slots, each new position written over the one W before it,
 * holds all a query can see.  Memory stays 2 B G (keep + W) p doubles
 * however long the sequence grows, where kvcache.h's grows with it.
 *
 * kvcache.h's kv_cache_decode_step follows the module's window, ALiBi
 * and sinks too (its attention is the module's step 4), but keeps every
 * position; the tests hold the two decoders and the windowed forward pass
 * equal, row by row.
 *
 * Shapes: B batch, G key-value heads, p = d_model/h; storage (B, G,
 * keep + W, p) for the keys and for the values; x (B, n, d_q) the n new
 * positions of a step; out (B, n, D_out).
 */
#ifndef MHA_WINDOW_CACHE_H
#define MHA_WINDOW_CACHE_H

#include <stddef.h>

#include "nn/multihead.h"
#include "tensor/tensor.h"

/* The keys and values a windowed decoder keeps: keep + W slots.  Position
 * t lives in slot t while t < keep, and in slot keep + (t - keep) mod W
 * after, overwriting the position W before it, which no later query
 * sees.  Memory is 2 B G (keep + W) p doubles whatever the length. */
typedef struct window_cache {
    size_t batch, kv_heads, head_size; /* B, G, p */
    size_t window, keep, slots;        /* W, keep, keep + W */
    size_t length;                     /* positions decoded: 0 .. length-1 */
    tensor *keys, *values;             /* (B, G, slots, p) each */
    long *pos;                         /* (slots,): each slot's position, -1 */
} window_cache;

/* Empty, room for keep + window slots.  GSL_EINVAL when a size or the
 * window is 0. */
int window_cache_init(window_cache *c, size_t batch, size_t kv_heads,
                      size_t head_size, size_t window, size_t keep);
void window_cache_free(window_cache *c);

/* The slot of position t. */
size_t window_cache_slot(const window_cache *c, size_t t);

/* One step of decoding with m's window (cfg.window and keep_first equal
 * to the cache's): x (B, n, d_q) the positions length .. length+n-1,
 * out (B, n, D_out).  The queries see the slots filled so far and the n
 * new positions (window.h's rule picks the visible ones), then the new
 * positions are written into their slots.  weights (NULL: not wanted) is
 * (B, h, n, f+n), f = the slots filled before the step, in slot order
 * then the new positions.  The numbers are the windowed causal
 * forward's, row by row.
 * Errors as kv_cache_decode_step (kvcache.h); GSL_EINVAL when the
 * module's window or keep differ from the cache's. */
int multihead_decode_window(multihead *m, window_cache *c, const tensor *x,
                            tensor **out, tensor **weights);

#endif
//<
