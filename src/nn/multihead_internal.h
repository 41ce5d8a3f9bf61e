//> 08
/* multihead_internal.h: what the module's files share (multihead.c,
 * multihead_cache.c) and nobody else sees. */
#ifndef MHA_MULTIHEAD_INTERNAL_H
#define MHA_MULTIHEAD_INTERNAL_H

#include "nn/multihead.h"

/* What the steps make, in their order, all freed when the pass ends. */
typedef struct steps {
    tensor *q, *k, *v;    /* (B, Lq, d_model), (B, Lk, d_model) */
    tensor *qh, *kh, *vh; /* (B*h, Lq, d_model/h), (B*h, Lk, d_model/h) */
    tensor *lens;         /* (B*h,) or (B*h, Lq), or NULL: no mask */
    tensor *heads;        /* (B*h, Lq, d_model/h) */
    tensor *concat;       /* (B, Lq, d_model) */
//> 14
    tensor *unmasked;     /* the heads before the head mask, or NULL */
//<
} steps;
//> 13

/* The steps' tensors the backward pass reads, handed over to m->cache
 * (taken out of s, so the pass does not free them), and the weights as
 * (B*h, Lq, Lk). */
int multihead_keep_steps(multihead *m, steps *s, const tensor *queries,
                         const tensor *keys, const tensor *values);
//<

#endif
//<
