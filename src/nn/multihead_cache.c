//> 13
/* multihead_cache.c: the forward pass that keeps what the backward pass
 * reads (multihead_forward_cached, with the head mask of chapter 14); see
 * multihead.h. */
#include "nn/multihead.h"

#include <string.h>

#include "base/error.h"
#include "nn/multihead_internal.h"
#include "trace/trace.h"

/* --- a cache for the backward pass ----------------------------------- */

void multihead_cache_free(multihead_cache *c)
{
    TENSORS_FREE(c->lens, c->qh, c->kh, c->vh, c->weights, c->heads,
                 c->head_mask, c->concat);
    memset(c, 0, sizeof *c);
}

int multihead_keep_steps(multihead *m, steps *s, const tensor *queries,
                         const tensor *keys, const tensor *values)
{
    multihead_cache *c = m->cache;
    const tensor *w = s->weights; // (B*h, Lq, Lk), folded with G < h
    long rows = (long)s->qh->shape[0], Lq = (long)s->qh->shape[1];
    int status = GSL_SUCCESS;
    {
        QUIET; // keeping the weights is no step of the pass
        STEP(tensor_view(w, SIZES(rows, Lq, (long)w->shape[2]), NULL,
                         &c->weights));
    }
//> 14
    if (m->head_mask) {
        STEP(tensor_alloc(SHAPE(m->cfg.num_heads), &c->head_mask));
        STEP(tensor_copy_into(c->head_mask, m->head_mask));
    }
//<
    c->queries = queries;
    c->keys = keys;
    c->values = values;
    // what the backward pass reads moves from the steps into the cache
    tensor **from[] = {&s->lens, &s->qh, &s->kh, &s->vh, &s->heads, &s->concat};
    tensor **to[] = {&c->lens, &c->qh, &c->kh, &c->vh, &c->heads, &c->concat};
    for (size_t i = 0; i < sizeof from / sizeof from[0]; i++) {
        *to[i] = *from[i];
        *from[i] = NULL;
    }
//> 14
    if (s->unmasked) { // the heads before the mask, which its gradient reads
        tensor_free(c->heads);
        c->heads = s->unmasked;
        s->unmasked = NULL;
    }
//<
done:
    return status;
}

/* The forward pass with its two options (multihead.h), which it sets on
 * m for this one call: checked here, then multihead_forward. */
int multihead_forward_cached(multihead *m, const tensor *queries,
                             const tensor *keys, const tensor *values,
                             const tensor *valid_lens,
                             const tensor *head_mask, multihead_cache *c,
                             tensor **out, tensor **weights)
{
    const char *who = "multihead_forward_cached";
    *out = NULL;
    if (weights)
        *weights = NULL;
    if (c)
        multihead_cache_free(c);
    if (c && m->attention.training && m->attention.dropout > 0)
        return mha_fail(GSL_EINVAL,
                        "%s: dropout %g in training mode: the backward pass "
                        "needs the dropped weights, which are not kept; "
                        "train with dropout 0 or in evaluation mode",
                        who, m->attention.dropout);
/*< 14
    if (head_mask)
        return mha_fail(GSL_EINVAL, "%s: this module takes no head mask", who);
*/
//> 14
    size_t h = m->cfg.num_heads;
    if (head_mask && (head_mask->ndim != 1 || head_mask->shape[0] != h)) {
        int status = multihead_check_inputs(m, queries, keys, values,
                                            valid_lens);
        if (status)
            return status;
        char hs[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EBADLEN,
                        "%s: head_mask has shape %s, expected (%zu,) for "
                        "num_heads %zu",
                        who, tensor_shape_str(head_mask, hs, sizeof hs), h, h);
    }
    m->head_mask = head_mask;
//<
    m->cache = c;
    int status = multihead_forward(m, queries, keys, values, valid_lens, out,
                                   weights);
    m->cache = NULL;
//> 14
    m->head_mask = NULL;
//<
    if (status && c)
        multihead_cache_free(c);
    return status;
}
//<
