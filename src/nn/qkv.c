//> 04
/* qkv.c: the rules every attention's inputs follow; see qkv.h.
 *
 * Shapes: queries (B, Lq, d_q), keys (B, Lk, d_k), values (B, Lk, d_v).
 */
#include "nn/qkv.h"

#include <stdio.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* --- the rules ------------------------------------------------------ */

qkv_fault qkv_find_fault(const tensor *q, const tensor *k, const tensor *v,
                         int same_d, int *which)
{
    int at;
    if (!which)
        which = &at;
    // 1-2. all three there, all 3-D
    const tensor *in[3] = {q, k, v};
    for (int i = 0; i < 3; i++) {
        *which = i;
        if (!in[i])
            return QKV_MISSING;
        if (in[i]->ndim != 3)
            return QKV_NOT_3D;
    }
    // 3. one batch size B
    *which = k->shape[0] != q->shape[0] ? QKV_KEYS : QKV_VALUES;
    if (k->shape[0] != q->shape[0] || v->shape[0] != q->shape[0])
        return QKV_BATCH;
    // 4. as many values as keys, Lk
    *which = QKV_VALUES;
    if (v->shape[1] != k->shape[1])
        return QKV_LENGTH;
    // 5. a dot product's query and key of one length d
    *which = QKV_KEYS;
    if (same_d && k->shape[2] != q->shape[2])
        return QKV_DEPTH;
    *which = QKV_QUERIES;
    return QKV_FINE;
}

/* --- the messages --------------------------------------------------- */

const qkv_names qkv_lesson_names = {"queries", "keys", "values", "have",
                                    "(B, L, features)"};
const qkv_names qkv_seed_names = {"q", "k", "v", "has", "(B, L, d_model)"};

int qkv_check(const char *who, const qkv_names *names, const tensor *q,
              const tensor *k, const tensor *v, int same_d, const char *more,
              qkv_shapes *shapes)
{
    const qkv_names *n = names;
    int which;
    qkv_fault fault = qkv_find_fault(q, k, v, same_d, &which);
    if (fault == QKV_MISSING)
        return mha_fail(GSL_EINVAL, "%s: %s is NULL", who,
                        which == QKV_QUERIES ? n->queries
                        : which == QKV_KEYS  ? n->keys
                                             : n->values);
    qkv_shapes own;
    qkv_shapes *s = shapes ? shapes : &own;
    char qs[TRACE_SHAPE_MAX], ks[TRACE_SHAPE_MAX], vs[TRACE_SHAPE_MAX];
    tensor_shape_str(q, qs, sizeof qs);
    tensor_shape_str(k, ks, sizeof ks);
    tensor_shape_str(v, vs, sizeof vs);
    snprintf(s->all, sizeof s->all, "%s %s, %s %s, %s %s%s", n->queries, qs,
             n->keys, ks, n->values, vs, more ? more : "");
    snprintf(s->qk, sizeof s->qk, "%s %s, %s %s", n->queries, qs, n->keys,
             ks);
    switch (fault) {
    case QKV_NOT_3D:
        return mha_fail(GSL_EBADLEN, "%s: %s, %s and %s must be 3-D %s, got %s",
                        who, n->queries, n->keys, n->values, n->layout,
                        s->all);
    case QKV_BATCH:
        return mha_fail(GSL_EBADLEN, "%s: batch sizes differ (%s)", who,
                        s->all);
    case QKV_LENGTH:
        return mha_fail(GSL_EBADLEN, "%s: %s %s Lk = %zu but %s %s Lk = %zu (%s)",
                        who, n->keys, n->have, k->shape[1], n->values,
                        n->have, v->shape[1], s->all);
    case QKV_DEPTH:
        return mha_fail(GSL_EBADLEN, "%s: %s %s d = %zu but %s %s d = %zu (%s)",
                        who, n->queries, n->have, q->shape[2], n->keys,
                        n->have, k->shape[2], s->all);
    default:
        return GSL_SUCCESS;
    }
}
//<
