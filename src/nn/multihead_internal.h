//> 08
/* multihead_internal.h: what the module's files share (multihead.c,
 * multihead_cache.c) and nobody else sees. */
#ifndef MHA_MULTIHEAD_INTERNAL_H
#define MHA_MULTIHEAD_INTERNAL_H

#include "nn/multihead.h"
//> 19
#include "nn/window.h"
//<

/* What the steps make, in their order, all freed when the pass ends. */
typedef struct steps {
    tensor *q, *k, *v;    /* (B, Lq, d_model), (B, Lk, d_model) */
    tensor *qh, *kh, *vh; /* (B*h, Lq, d_model/h), (B*h, Lk, d_model/h) */
    tensor *lens;         /* (B*h,) or (B*h, Lq), or NULL: no mask */
    tensor *heads;        /* (B*h, Lq, d_model/h) */
    tensor *concat;       /* (B, Lq, d_model) */
    tensor *weights;      /* step 4's, (B*h, Lq, Lk), or NULL: none made */
//> 14
    tensor *unmasked;     /* the heads before the head mask, or NULL */
//<
} steps;
//> 13

/* The steps' tensors the backward pass reads, handed over to m->cache
 * (taken out of s, so the pass does not free them), and a view of the
 * weights as (B*h, Lq, Lk). */
int multihead_keep_steps(multihead *m, steps *s, const tensor *queries,
                         const tensor *keys, const tensor *values);
//<
//> 19

/* Step 4 under a window, ALiBi or sinks (window.h): every head by the
 * rule r, its weights (B*h, Lq, Lk) to *weights as dot_attention's are
 * (weights NULL: not wanted; none tile by tile) (multihead_window.c). */
int multihead_attend_window(multihead *m, const window_rule *r,
                            const tensor *qh, const tensor *kh,
                            const tensor *vh, const tensor *lens,
                            tensor **heads, tensor **weights);
//<

#endif
//<
