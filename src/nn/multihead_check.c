//> 08
/* multihead_check.c: a forward pass's inputs checked against the module
 * before anything is computed; see multihead.h. */
#include "nn/multihead.h"

#include "base/error.h"
#include "nn/qkv.h"
#include "nn/softmax.h"

//> 16
/* "valid_len 3, " for a refused row's message, when valid_lens were given
 * ("" when not: every key is the row's then). */
static const char *len_of(char *buf, size_t n, const tensor *valid_lens,
                          size_t b, size_t i, size_t Lk)
{
    buf[0] = '\0';
    if (valid_lens)
        snprintf(buf, n, "valid_len %zu, ",
                 softmax_valid_len(valid_lens, b, i, Lk));
    return buf;
}
//<

/* The inputs by the rules every attention follows (qkv.h), then against
 * the configuration; one message names every shape, so the reader sees
 * the whole disagreement at once. */
int multihead_check_call(const multihead *m, const tensor *q,
                         const tensor *k, const tensor *v,
                         const tensor *valid_lens)
{
    const multihead_config *c = &m->cfg;
    qkv_shapes shapes;
    int status = qkv_check("multihead", &qkv_lesson_names, q, k, v, 0, NULL,
                           &shapes);
    if (status)
        return status;
    if (q->shape[2] != c->query_size || k->shape[2] != c->key_size ||
        v->shape[2] != c->value_size)
        return mha_fail(GSL_EBADLEN,
                        "multihead: feature sizes %s do not match the layers' "
                        "query_size %zu, key_size %zu, value_size %zu",
                        shapes.all, c->query_size, c->key_size, c->value_size);
    /* valid_lens against the queries and keys, before the repeat per
     * head makes its indices harder to read */
    status = softmax_check_valid_lens("multihead", shapes.qk, q->shape[0],
                                      q->shape[1], k->shape[1], valid_lens);
    if (status)
        return status;
//> 16
    size_t b, i, Lq = q->shape[1], Lk = k->shape[1];
    char len[40];
    if (softmax_find_empty_row(valid_lens, c->causal, q->shape[0], Lq, Lk, &b,
                               &i))
        return mha_fail(GSL_EINVAL,
                        "multihead: causal: query %zu of example %zu sees no "
                        "key (%sLq %zu, Lk %zu: query i sees key j only when "
                        "j <= i + Lk - Lq)",
                        i, b, len_of(len, sizeof len, valid_lens, b, i, Lk),
                        Lq, Lk);
//<
//> 19
    if (multihead_empty_window_row(m, valid_lens, q->shape[0], Lq, Lk, &b,
                                   &i) && !c->window)
        return mha_fail(GSL_EINVAL,
                        "multihead: query %zu of example %zu sees no key "
                        "(valid_len 0), and a row's weights need one with "
                        "alibi or sinks",
                        i, b);
    if (multihead_empty_window_row(m, valid_lens, q->shape[0], Lq, Lk, &b, &i))
        return mha_fail(GSL_EINVAL,
                        "multihead: window: query %zu of example %zu sees no "
                        "key (%sLq %zu, Lk %zu, window %zu: query i sees key "
                        "j only when i + Lk - Lq - %zu < j <= i + Lk - Lq)",
                        i, b, len_of(len, sizeof len, valid_lens, b, i, Lk),
                        Lq, Lk, c->window, c->window);
    if (m->sinks && (status = tensor_check_finite(m->sinks, "multihead",
                                                  "sinks")))
        return status;
//<
    /* NaN or inf anywhere would spread to whole rows of the output (a
     * single inf score makes inf - inf in the softmax): refuse them here,
     * naming the element, rather than return numbers that mean nothing */
    const tensor *checked[] = {q, k, v};
    static const char *const names[] = {"queries", "keys", "values"};
    for (size_t i = 0; i < 3; i++) {
        int again = 0; // self-attention passes one x as q, k and v
        for (size_t j = 0; j < i; j++)
            again |= checked[j] == checked[i];
        if (!again &&
            (status = tensor_check_finite(checked[i], "multihead", names[i])))
            return status;
    }
    /* the layers as they were made, and the attention's dropout settings:
     * the steps call the layers' and the attention's own steps, which
     * check nothing */
    const dot_attention *a = &m->attention;
    STEP(linear_check("multihead", &m->W_q, q));
    STEP(linear_check("multihead", &m->W_k, k));
    STEP(linear_check("multihead", &m->W_v, v));
    STEP(linear_check("multihead", &m->W_o, NULL));
    STEP(attention_check_dropout("multihead", a->dropout, a->training, a->rng));
done:
    return status;
}

int multihead_check_inputs(const multihead *m, const tensor *q,
                           const tensor *k, const tensor *v,
                           const tensor *valid_lens)
{
    int status = multihead_check_call(m, q, k, v, valid_lens);
    const tensor *weights[] = {m->W_q.weight, m->W_k.weight, m->W_v.weight,
                               m->W_o.weight, m->W_q.bias,   m->W_k.bias,
                               m->W_v.bias,   m->W_o.bias};
    static const char *const names[] = {"W_q", "W_k", "W_v", "W_o",
                                        "b_q", "b_k", "b_v", "b_o"};
    for (size_t i = 0; i < 8 && !status; i++)
        if (weights[i])
            status = tensor_check_finite(weights[i], "multihead", names[i]);
    return status;
}
//<
