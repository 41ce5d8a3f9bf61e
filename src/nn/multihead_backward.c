//> 13
/* multihead_backward.c: the gradients of the multi-head module, its six
 * steps backwards; see backward.h for the formulas. */
#include "nn/backward.h"

#include <string.h>

#include "base/error.h"
#include "nn/backward_internal.h"
//> 15
#include "nn/posenc.h"
//<
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"

/* --- the multi-head module: backward -------------------------------- */

static int same_config(const multihead_config *a, const multihead_config *b)
{
    int same = a->query_size == b->query_size && a->key_size == b->key_size &&
               a->value_size == b->value_size &&
               a->num_hiddens == b->num_hiddens &&
               a->num_heads == b->num_heads && a->out_size == b->out_size &&
               !a->bias == !b->bias;
//> 17
    same = same && a->kv_heads == b->kv_heads;
//<
    return same;
}

//> 17
/* Step 4 backwards for G < h key-value heads, through the forward's
 * folding (multihead.h, 4b): the h/G query heads of a group read as
 * (B*G, h/G*Lq, ...) rows, so the attention's backward on B*G problems
 * gives dQ for every query row and dK, dV (B*G, Lk, p) already summed
 * over the group's query heads, as a shared head's gradient must be.
 * dheads (B*h, Lq, p); dqh (B*h, Lq, p), dkh and dvh (B*G, Lk, p), each
 * NULL when not wanted. */
static int grouped_backward(const multihead *m, const multihead_cache *c,
                            const tensor *dheads, tensor **dqh, tensor **dkh,
                            tensor **dvh)
{
    size_t h = m->cfg.num_heads, group = h / m->cfg.kv_heads;
    long BG = (long)c->kh->shape[0], Lq = (long)c->qh->shape[1];
    long Lk = (long)c->kh->shape[1], p = (long)c->qh->shape[2];
    long rows = (long)group * Lq;
    tensor *qg = NULL, *wg = NULL, *lg = NULL, *dg = NULL, *dqg = NULL;
    int status = GSL_SUCCESS;
    STEP(tensor_reshape(c->qh, SIZES(BG, rows, p), NULL, &qg));
    STEP(tensor_reshape(c->weights, SIZES(BG, rows, Lk), NULL, &wg));
    if (c->lens)
        STEP(tensor_reshape(c->lens, SIZES(BG, rows), NULL, &lg));
    STEP(tensor_reshape(dheads, SIZES(BG, rows, p), NULL, &dg));
    STEP(dot_attention_backward(qg, c->kh, c->vh, lg, wg, dg, dqh ? &dqg : NULL,
                                dkh, dvh));
    if (dqh)
        STEP(tensor_reshape(dqg, SIZES(BG * (long)group, Lq, p), NULL, dqh));
done:
    tensor_free(qg);
    tensor_free(wg);
    tensor_free(lg);
    tensor_free(dg);
    tensor_free(dqg);
    if (status && dkh) {
        tensor_free(*dkh);
        *dkh = NULL;
    }
    if (status && dvh) {
        tensor_free(*dvh);
        *dvh = NULL;
    }
    return status;
}

//<

//> 14
/* dheads = dmasked with head i's rows times mask[i]; dmask[i] = sum of
 * dmasked * heads over head i's rows (into a fresh h-array).  heads was
 * made by the attention (contiguous); dmasked comes from transpose_qkv and
 * is a strided view when B = 1, so it is read through its strides. */
static int head_mask_backward(const tensor *dmasked, const tensor *heads,
                              const tensor *mask, tensor **dheads,
                              double *dmask)
{
    size_t h = mask->shape[0], rows = heads->shape[0];
    size_t Lq = heads->shape[1], p = heads->shape[2];
    const size_t *gs = dmasked->strides;
    int status = tensor_alloc_like(heads, dheads);
    if (status)
        return status;
    for (size_t i = 0; i < h; i++)
        dmask[i] = 0.0;
    for (size_t r = 0; r < rows; r++) {
        double s = mask->data[r % h], sum = 0.0;
        for (size_t q = 0; q < Lq; q++) {
            const double *g_rq = dmasked->data + r * gs[0] + q * gs[1];
            const double *x_rq = heads->data + (r * Lq + q) * p;
            double *d_rq = (*dheads)->data + (r * Lq + q) * p;
            for (size_t j = 0; j < p; j++) {
                d_rq[j] = s * g_rq[j * gs[2]];
                sum += g_rq[j * gs[2]] * x_rq[j];
            }
        }
        dmask[r % h] += sum;
    }
    tensor_trace_step(TRACE_NEW, dmasked, *dheads, "head_mask backward");
    tensor dmask_shape = tensor_header(SHAPE(h));
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, &dmask_shape,
               TRACE_INPUTS(TRACE_IN(dmasked), TRACE_IN(heads)),
               "dmask += sum(dy * heads)");
    return GSL_SUCCESS;
}

//<

//> 15
/* *d (B, L, d_model), a gradient of the rotated Q or K, replaced by the
 * gradient of the projection before the rotation. */
static int unrotate(const multihead *m, tensor **d, long start)
{
    tensor *back = NULL;
    int status = rope_apply_inverse(*d, m->cfg.num_hiddens / m->cfg.num_heads,
                                    start, m->cfg.rope_base, &back);
    if (status)
        return status;
    tensor_free(*d);
    *d = back;
    return GSL_SUCCESS;
}

//<

int multihead_backward(const multihead *m, const multihead_cache *c,
                       const tensor *dout, multihead *grads,
                       tensor *dhead_mask, tensor **dqueries, tensor **dkeys,
                       tensor **dvalues)
{
    const char *who = "multihead_backward";
    backward_clear_outputs(dqueries, dkeys, dvalues);
    if (!c || !c->concat)
        return mha_fail(GSL_EINVAL,
                        "%s: the cache is empty; run multihead_forward_cached "
                        "first",
                        who);
    if (!dout)
        return mha_fail(GSL_EINVAL, "%s: dout is NULL", who);
    size_t h = m->cfg.num_heads;
    size_t B = c->concat->shape[0], Lq = c->concat->shape[1];
    char os[TRACE_SHAPE_MAX];
    tensor_shape_str(dout, os, sizeof os);
    if (dout->ndim != 3 || dout->shape[0] != B || dout->shape[1] != Lq ||
        dout->shape[2] != m->cfg.out_size)
        return mha_fail(GSL_EBADLEN,
                        "%s: dout has shape %s, the forward's output was "
                        "(%zu, %zu, %zu)",
                        who, os, B, Lq, m->cfg.out_size);
    if (grads && !same_config(&grads->cfg, &m->cfg))
        return mha_fail(GSL_EBADLEN,
                        "%s: grads is a module of another configuration "
                        "(num_hiddens %zu, num_heads %zu, out_size %zu; the "
                        "module's %zu, %zu, %zu)",
                        who, grads->cfg.num_hiddens, grads->cfg.num_heads,
                        grads->cfg.out_size, m->cfg.num_hiddens, h,
                        m->cfg.out_size);
/*< 14
    if (dhead_mask)
        return mha_fail(GSL_EINVAL, "%s: this module takes no head mask", who);
*/
//> 14
    if (dhead_mask) {
        char hs[TRACE_SHAPE_MAX];
        if (!c->head_mask)
            return mha_fail(GSL_EINVAL,
                            "%s: dhead_mask asked for, but the forward had no "
                            "head mask",
                            who);
        if (dhead_mask->ndim != 1 || dhead_mask->shape[0] != h)
            return mha_fail(GSL_EBADLEN,
                            "%s: dhead_mask has shape %s, expected (%zu,)",
                            who,
                            tensor_shape_str(dhead_mask, hs, sizeof hs), h);
    }
//<
    int need_q = dqueries || grads, need_k = dkeys || grads;
    int need_v = dvalues || grads;

    /* dout named as the forward named its output: (B, Lq, d_model), or
     * (B, L, d_model) when the queries were named so (a model's own) */
    size_t d_model = m->cfg.num_hiddens, D_out = m->cfg.out_size;
    char dout_names[3 * TENSOR_NAME_MAX + 8];
    const tensor *cat = c->concat;
    snprintf(dout_names, sizeof dout_names, "%s, %s, %s",
             cat->names[0][0] ? cat->names[0] : NAMES(B),
             cat->names[1][0] ? cat->names[1] : NAMES(Lq),
             D_out == d_model ? NAMES(d_model) : NAMES(D_out));
    tensor dout_in = tensor_named(dout, dout_names);
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(&dout_in, "dout")),
             "multihead_backward(h=%zu)", h);
    tensor *dconcat = NULL;                    // (B, Lq, d_model)
    tensor *dmasked = NULL, *dheads = NULL;    // (B*h, Lq, p)
    tensor *dqh = NULL, *dkh = NULL, *dvh = NULL; // (B*h, L, p)
    tensor *dq = NULL, *dk = NULL, *dv = NULL; // (B, L, d_model)
    tensor *gq = NULL, *gk = NULL, *gv = NULL; // the inputs' gradients
    double *dmask = NULL;                      // (h,)

    size_t G = h; // key-value heads
//> 17
    G = m->cfg.kv_heads;
//<
    // the inputs named as the forward named them, for the trace
    size_t Lk = c->keys->shape[1], d_q = c->queries->shape[2];
    size_t d_k = c->keys->shape[2], d_v = c->values->shape[2];
    tensor q_in = tensor_named(c->queries, NAMES(B, Lq, d_q));
    tensor k_in = tensor_named(c->keys, NAMES(B, Lk, d_k));
    tensor v_in = tensor_named(c->values, NAMES(B, Lk, d_v));
    int status = GSL_SUCCESS;

    // 6. W_o: dconcat, and (last, below) W_o's own gradients
    tensor_trace_note("the joined heads' gradient, through W_o");
    STEP(linear_backward(&m->W_o, c->concat, &dout_in, NULL, &dconcat));
    // 5. undo transpose_output: split dconcat into heads again
    STEP(transpose_qkv(dconcat, h, &dmasked));
//> 14
    if (c->head_mask) {
        dmask = mha_malloc(h, sizeof *dmask, who);
        STEP(dmask ? head_mask_backward(dmasked, c->heads, c->head_mask,
                                        &dheads, dmask)
                   : GSL_ENOMEM);
    }
//<
    // 4. attention, all B*h heads at once (G < h: the groups' folded rows)
    if (G == h)
        STEP(dot_attention_backward(c->qh, c->kh, c->vh, c->lens, c->weights,
                                    dheads ? dheads : dmasked,
                                    need_q ? &dqh : NULL, need_k ? &dkh : NULL,
                                    need_v ? &dvh : NULL));
//> 17
    else
        STEP(grouped_backward(m, c, dheads ? dheads : dmasked,
                              need_q ? &dqh : NULL, need_k ? &dkh : NULL,
                              need_v ? &dvh : NULL));
//<
    // 2. undo transpose_qkv: the heads side by side, (B, L, d_model) for
    //    the queries, (B, L, G*p) for the keys and values; with rope, dQ
    //    and dK turned back by the forward's angles (a rotation's
    //    transpose is its inverse)
    if (need_q) {
        tensor_trace_note("dQ: the query heads' gradients side by side");
        STEP(transpose_output(dqh, h, &dq));
    }
//> 15
    if (need_q && m->cfg.rope)
        STEP(unrotate(m, &dq, (long)Lk - (long)Lq));
//<
    if (need_k) {
        tensor_trace_note("dK: the key heads' gradients side by side");
        STEP(transpose_output(dkh, G, &dk));
    }
//> 15
    if (need_k && m->cfg.rope)
        STEP(unrotate(m, &dk, 0));
//<
    if (need_v) {
        tensor_trace_note("dV: the value heads' gradients side by side");
        STEP(transpose_output(dvh, G, &dv));
    }
    // 1. the projections: the inputs' gradients, then every layer's own
    if (dqueries || dkeys || dvalues)
        tensor_trace_note("the inputs' gradients, through W_q, W_k and W_v");
    if (dqueries)
        STEP(linear_backward(&m->W_q, &q_in, dq, NULL, &gq));
    if (dkeys)
        STEP(linear_backward(&m->W_k, &k_in, dk, NULL, &gk));
    if (dvalues)
        STEP(linear_backward(&m->W_v, &v_in, dv, NULL, &gv));
    if (grads) {
        tensor_trace_note("the layers' own gradients: W_o's from dout, the "
                          "others from dQ, dK, dV");
        STEP(linear_backward(&m->W_o, c->concat, &dout_in, &grads->W_o, NULL));
        STEP(linear_backward(&m->W_q, &q_in, dq, &grads->W_q, NULL));
        STEP(linear_backward(&m->W_k, &k_in, dk, &grads->W_k, NULL));
        STEP(linear_backward(&m->W_v, &v_in, dv, &grads->W_v, NULL));
    }
//> 14
    if (dhead_mask)
        for (size_t i = 0; i < h; i++)
            dhead_mask->data[i * dhead_mask->strides[0]] += dmask[i];
//<
done:
    free(dmask);
    tensor_free(dconcat);
    tensor_free(dmasked);
    tensor_free(dheads);
    tensor_free(dqh);
    tensor_free(dkh);
    tensor_free(dvh);
    tensor_free(dq);
    tensor_free(dk);
    tensor_free(dv);
    return backward_hand_out(status, gq, gk, gv, dqueries, dkeys, dvalues);
}
//<
