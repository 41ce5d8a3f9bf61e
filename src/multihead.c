/* multihead.c: multi-head attention; see multihead.h for the steps.
 *
 * Shapes: B batch, Lq queries, Lk key-value pairs, d_model = num_hiddens,
 * h heads of p = d_model/h features, D_out output features. */
#include "multihead.h"

#include <math.h>
#include <string.h>

#include "error.h"
#include "qkv.h"
#include "softmax.h"
#include "trace.h"

/* "B, Lq, d_model" -> "B, Lq, h, d_model/h": the names after the split. */
static void split_names(const tensor *x, char *buf, size_t n)
{
    if (!x->names[0][0] && !x->names[1][0] && !x->names[2][0]) {
        buf[0] = '\0';
        return;
    }
    snprintf(buf, n, "%s, %s, h, %s/h", x->names[0], x->names[1], x->names[2]);
}

/* (B, n, d_model) -> (B, n, h, p) -> (B, h, n, p) -> (B*h, n, p), with
 * p = d_model/h: head i of example b becomes batch row b*h + i.  The first
 * two steps are views; the last is a view only when B, h or n is 1, and a
 * copy otherwise.
 * The handout blanks this body: @exercise transpose_qkv (chapter 06). */
int transpose_qkv(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "transpose_qkv: input shape %s has %zu dimensions, "
                        "expected 3 (B, n, d_model)",
                        xs, x->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL, "transpose_qkv: num_heads is 0 (input %s)",
                        xs);
    size_t batch = x->shape[0], n = x->shape[1], d_model = x->shape[2];
    if (d_model % num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "transpose_qkv: d_model %zu is not divisible by "
                        "num_heads %zu (input shape %s)",
                        d_model, num_heads, xs);
    size_t p = d_model / num_heads;

    if (trace_on()) {
        char op[64], sym[TRACE_SHAPE_MAX];
        snprintf(op, sizeof op, "transpose_qkv(h=%zu)", num_heads);
        trace_begin(op, xs, tensor_sym_str(x, sym, sizeof sym));
    } else {
        trace_begin(NULL, NULL, NULL);
    }
    char names[4 * TENSOR_NAME_MAX];
    split_names(x, names, sizeof names);
    tensor *split = NULL, *heads = NULL;
    // split is (B, n, h, p): a view, each row cut into h pieces of p
    int status = tensor_reshape(x, DIMS((long)batch, (long)n, (long)num_heads, -1),
                                names[0] ? names : NULL, &split);
    // heads is (B, h, n, p): a view, the head axis moved before n
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &heads);
    // out is (B*h, n, p): a copy unless B, h or n is 1 (then a view)
    if (!status)
        status = tensor_reshape(heads, DIMS(-1, (long)n, (long)p), NULL, out);
    trace_end();
    tensor_free(split);
    tensor_free(heads);
    return status;
}

/* The inverse of transpose_qkv: (B*h, n, p) -> (B, h, n, p) ->
 * (B, n, h, p) -> (B, n, h*p), so the h heads of each position sit side by
 * side again, head i in features i*p .. i*p + p - 1.
 * The handout blanks this body: @exercise transpose_output (chapter 06). */
int transpose_output(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "transpose_output: input shape %s has %zu dimensions, "
                        "expected 3 (B*h, n, p)",
                        xs, x->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL,
                        "transpose_output: num_heads is 0 (input %s)", xs);
    if (x->shape[0] % num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "transpose_output: first dimension %zu of shape %s is "
                        "not divisible by num_heads %zu",
                        x->shape[0], xs, num_heads);
    size_t n = x->shape[1], p = x->shape[2];

    if (trace_on()) {
        char op[64], sym[TRACE_SHAPE_MAX];
        snprintf(op, sizeof op, "transpose_output(h=%zu)", num_heads);
        trace_begin(op, xs, tensor_sym_str(x, sym, sizeof sym));
    } else {
        trace_begin(NULL, NULL, NULL);
    }
    tensor *split = NULL, *rows = NULL;
    // split is (B, h, n, p): a view, "B*h" taken apart again
    int status = tensor_reshape(x, DIMS(-1, (long)num_heads, (long)n, (long)p),
                                NULL, &split);
    // rows is (B, n, h, p): a view, heads back next to their features
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &rows);
    // out is (B, n, h*p): the heads of each position side by side (a copy)
    if (!status) {
        char names[4 * TENSOR_NAME_MAX] = "";
        const char *last = rows->names[3];
        size_t len = strlen(last);
        if (rows->names[0][0] && len > 2 && strcmp(last + len - 2, "/h") == 0)
            snprintf(names, sizeof names, "%s, %s, %.*s", rows->names[0],
                     rows->names[1], (int)(len - 2), last);
        status = tensor_reshape(rows, DIMS((long)rows->shape[0], (long)n, -1),
                                names[0] ? names : NULL, out);
    }
    trace_end();
    tensor_free(split);
    tensor_free(rows);
    return status;
}

/* Row b*h + i of the output is row b of valid_lens: transpose_qkv put
 * head i of example b at batch row b*h + i, and that head must see the
 * keys of example b.
 * The handout blanks this body: @exercise repeat_valid_lens (chapter 07). */
int repeat_valid_lens(const tensor *valid_lens, size_t num_heads,
                      tensor **out)
{
    *out = NULL;
    char vs[TRACE_SHAPE_MAX];
    tensor_shape_str(valid_lens, vs, sizeof vs);
    if (valid_lens->ndim != 1 && valid_lens->ndim != 2)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: valid_lens shape %s has %zu "
                        "dimensions, expected (B,) or (B, Lq)",
                        vs, valid_lens->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: num_heads is 0 (valid_lens %s)", vs);
    size_t batch = valid_lens->shape[0];
    size_t row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;
    size_t shape[2] = {0, valid_lens->shape[1]};
    if (mha_mul_size(batch, num_heads, &shape[0], "repeat_valid_lens"))
        return GSL_EOVRFLW;
    int status = tensor_alloc(valid_lens->ndim, shape, out);
    if (status)
        return status;
    // out[b*h + i] = valid_lens[b] for every head i: repeat_interleave
    for (size_t b = 0; b < batch; b++)
        for (size_t i = 0; i < num_heads; i++)
            for (size_t j = 0; j < row; j++)
                (*out)->data[(b * num_heads + i) * row + j] =
                    *TENSOR_AT(valid_lens, b, j);
    if (valid_lens->names[0][0]) {
        snprintf((*out)->names[0], TENSOR_NAME_MAX, "%.*s*h", TENSOR_NAME_MAX - 3,
                 valid_lens->names[0]);
        if (valid_lens->ndim == 2)
            memcpy((*out)->names[1], valid_lens->names[1], TENSOR_NAME_MAX);
    }
    if (trace_on()) {
        char op[64], os[TRACE_SHAPE_MAX], shapes[2 * TRACE_SHAPE_MAX + 8];
        char sym[TRACE_SHAPE_MAX];
        snprintf(op, sizeof op, "repeat_interleave(%zu)", num_heads);
        snprintf(shapes, sizeof shapes, "%s -> %s", vs,
                 tensor_shape_str(*out, os, sizeof os));
        trace_line(op, "copy", shapes, tensor_sym_str(*out, sym, sizeof sym));
    }
    return GSL_SUCCESS;
}

/* --- the module ----------------------------------------------------- */

int multihead_init(multihead *m, const multihead_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (m->cfg.out_size == 0)
        m->cfg.out_size = cfg->num_hiddens;
    const multihead_config *c = &m->cfg;
    if (c->num_heads == 0 || c->num_hiddens == 0 || c->query_size == 0 ||
        c->key_size == 0 || c->value_size == 0)
        return mha_fail(GSL_EINVAL,
                        "multihead: sizes must be >= 1 (query_size %zu, "
                        "key_size %zu, value_size %zu, num_hiddens %zu, "
                        "num_heads %zu)",
                        c->query_size, c->key_size, c->value_size,
                        c->num_hiddens, c->num_heads);
    if (c->num_hiddens % c->num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "multihead: num_hiddens %zu is not divisible by "
                        "num_heads %zu",
                        c->num_hiddens, c->num_heads);
    int status = dot_attention_init(&m->attention, c->dropout);
    if (!status)
        status = linear_init(&m->W_q, "W_q", c->query_size, c->num_hiddens, c->bias);
    if (!status)
        status = linear_init(&m->W_k, "W_k", c->key_size, c->num_hiddens, c->bias);
    if (!status)
        status = linear_init(&m->W_v, "W_v", c->value_size, c->num_hiddens, c->bias);
    if (!status)
        status = linear_init(&m->W_o, "W_o", c->num_hiddens, c->out_size, c->bias);
    if (status) {
        multihead_free(m);
        return status;
    }
    snprintf(m->W_q.out_name, TENSOR_NAME_MAX, "d_model");
    snprintf(m->W_k.out_name, TENSOR_NAME_MAX, "d_model");
    snprintf(m->W_v.out_name, TENSOR_NAME_MAX, "d_model");
    snprintf(m->W_o.out_name, TENSOR_NAME_MAX,
             c->out_size == c->num_hiddens ? "d_model" : "D_out");
    return GSL_SUCCESS;
}

void multihead_free(multihead *m)
{
    linear_free(&m->W_q);
    linear_free(&m->W_k);
    linear_free(&m->W_v);
    linear_free(&m->W_o);
    dot_attention_free(&m->attention);
    tensor_free(m->weights);
    m->weights = NULL;
}

void multihead_reset_xavier(multihead *m, gsl_rng *r)
{
    linear_reset_xavier_uniform(&m->W_q, r);
    linear_reset_xavier_uniform(&m->W_k, r);
    linear_reset_xavier_uniform(&m->W_v, r);
    linear_reset_xavier_uniform(&m->W_o, r);
}

void multihead_train(multihead *m, int training, gsl_rng *rng)
{
    m->attention.training = training;
    m->attention.rng = rng;
}

/* The inputs by the rules every attention follows (qkv.h), then against
 * the configuration; one message names every shape, so the reader sees
 * the whole disagreement at once. */
int multihead_check_inputs(const multihead *m, const tensor *q,
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
    /* NaN or inf anywhere would spread to whole rows of the output (a
     * single inf score makes inf - inf in the softmax): refuse them here,
     * naming the element, rather than return numbers that mean nothing */
    const tensor *checked[] = {q, k, v, m->W_q.weight, m->W_k.weight,
                               m->W_v.weight, m->W_o.weight, m->W_q.bias,
                               m->W_k.bias, m->W_v.bias, m->W_o.bias};
    static const char *const names[] = {"queries", "keys", "values", "W_q",
                                        "W_k", "W_v", "W_o", "b_q", "b_k",
                                        "b_v", "b_o"};
    for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++)
        if (checked[i] &&
            (status = tensor_check_finite(checked[i], "multihead", names[i])))
            return status;
    return GSL_SUCCESS;
}

/* The six steps of multihead.h: project, split into heads, repeat
 * valid_lens, attend on all B*h heads at once, join the heads, mix them
 * with W_o.  The intermediates are freed here; the per-head weights stay
 * in m->weights as (B, h, Lq, Lk). */
int multihead_forward(multihead *m, const tensor *queries,
                      const tensor *keys, const tensor *values,
                      const tensor *valid_lens, tensor **out)
{
    *out = NULL;
    int status = multihead_check_inputs(m, queries, keys, values, valid_lens);
    if (status)
        return status;
    size_t h = m->cfg.num_heads;
    tensor q_in = tensor_named(queries, "B, Lq, d_q");
    tensor k_in = tensor_named(keys, "B, Lk, d_k");
    tensor v_in = tensor_named(values, "B, Lk, d_v");
    trace_begin_qkv(queries, keys, values, "multihead(h=%zu)", h);

    tensor *q = NULL, *k = NULL, *v = NULL;      // (B, L, d_model)
    tensor *qh = NULL, *kh = NULL, *vh = NULL;   // (B*h, L, p)
    tensor *lens = NULL;                          // (B*h,) or (B*h, Lq)
    tensor *oh = NULL;                            // (B*h, Lq, p)
    tensor *concat = NULL;                        // (B, Lq, d_model)

    // 1-2. project, then split into heads
    status = linear_forward(&m->W_q, &q_in, &q);
    if (!status)
        status = transpose_qkv(q, h, &qh);
    if (!status)
        status = linear_forward(&m->W_k, &k_in, &k);
    if (!status)
        status = transpose_qkv(k, h, &kh);
    if (!status)
        status = linear_forward(&m->W_v, &v_in, &v);
    if (!status)
        status = transpose_qkv(v, h, &vh);
    // 3. one valid length per head, in repeat_interleave order
    if (!status && valid_lens) {
        tensor l_in = tensor_named(valid_lens,
                                   valid_lens->ndim == 2 ? "B, Lq" : "B");
        status = repeat_valid_lens(&l_in, h, &lens);
    }
    // 4. all B*h heads attend at once
    if (!status)
        status = dot_attention_forward(&m->attention, qh, kh, vh, lens, &oh);
    // 5-6. heads side by side again, then mixed by W_o
    if (!status)
        status = transpose_output(oh, h, &concat);
    if (!status)
        status = linear_forward(&m->W_o, concat, out);
    trace_end();

    if (!status) {
        /* keep the weights as (B, h, Lq, Lk): a view, not traced */
        FILE *saved = trace_stream;
        trace_to(NULL);
        tensor *w = NULL;
        const tensor *aw = m->attention.weights; // (B*h, Lq, Lk)
        status = tensor_view(aw, DIMS((long)queries->shape[0], (long)h,
                                      (long)aw->shape[1], (long)aw->shape[2]),
                             "B, h, Lq, Lk", &w);
        trace_to(saved);
        if (!status) {
            tensor_free(m->weights);
            m->weights = w;
        } else {
            tensor_free(*out);
            *out = NULL;
        }
    }
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(qh);
    tensor_free(kh);
    tensor_free(vh);
    tensor_free(lens);
    tensor_free(oh);
    tensor_free(concat);
    return status;
}
