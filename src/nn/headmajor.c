//> 11
/* headmajor.c: multi-head attention with the heads first; see headmajor.h.
 *
 * Shapes: B batch, Lq queries, Lk key-value pairs, h heads, d_k and d_v
 * features per head, d_model features in and out.
 *   qp (B, Lq, h*d_k), kp (B, Lk, h*d_k), vp (B, Lk, h*d_v): projections
 *   qh (h, B, Lq, d_k), kh (h, B, Lk, d_k), vh (h, B, Lk, d_v): views of
 *      them, strides (d, L*h*d, h*d, 1) for d = d_k or d_v
 *   mask (B, Lq, Lk); scores and attn (h, B, Lq, Lk), contiguous
 *   buf (B, Lq, h, d_v): the second einsum's output, written through the
 *      view oh (h, B, Lq, d_v); concat (B, Lq, h*d_v) is a view of it too
 *   y (B, Lq, d_model): fc's output, then the residual's sum
 */
#include "nn/headmajor.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "nn/attention.h"
#include "nn/multihead.h"
#include "base/error.h"
#include "nn/qkv.h"
#include "nn/softmax.h"
#include "tensor/matrices.h"
#include "tensor/tensor_trace.h"

/* --- making and initialising ---------------------------------------- */

int headmajor_init(headmajor *m, const headmajor_config *cfg)
{
    const char *who = "headmajor_init";
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    const headmajor_config *c = &m->cfg;
    if (c->n_head == 0 || c->d_model == 0 || c->d_k == 0 || c->d_v == 0)
        return mha_fail(GSL_EINVAL,
                        "%s: sizes must be >= 1 (n_head %zu, d_model %zu, "
                        "d_k %zu, d_v %zu)",
                        who, c->n_head, c->d_model, c->d_k, c->d_v);
    int status = attention_check_dropout(who, c->dropout, 0, NULL);
    if (status)
        return status;
    size_t h = c->n_head, d_k = c->d_k, d_v = c->d_v, d_model = c->d_model;
    size_t hdk, hdv; /* h*d_k and h*d_v, the projections' widths */
    if (mha_mul_size(h, d_k, &hdk, who) || mha_mul_size(h, d_v, &hdv, who))
        return GSL_EOVRFLW;
    STEP(linear_init(&m->w_qs, "w_qs", d_model, hdk, 1));
    STEP(linear_init(&m->w_ks, "w_ks", d_model, hdk, 1));
    STEP(linear_init(&m->w_vs, "w_vs", d_model, hdv, 1));
    STEP(linear_init(&m->fc, "fc", hdv, d_model, 1));
    STEP(layernorm_init(&m->layer_norm, d_model, LAYERNORM_EPS));
    /* the name h*d_k tells the split's reshape how to name the two halves */
    linear_name_output(&m->w_qs, NAMES(h * d_k));
    linear_name_output(&m->w_ks, NAMES(h * d_k));
    linear_name_output(&m->w_vs, NAMES(h * d_v));
    linear_name_output(&m->fc, NAMES(d_model));
    m->residual_norm = 1;
done:
    if (status)
        headmajor_free(m);
    return status;
}

void headmajor_free(headmajor *m)
{
    linear_free(&m->w_qs);
    linear_free(&m->w_ks);
    linear_free(&m->w_vs);
    linear_free(&m->fc);
    layernorm_free(&m->layer_norm);
}

double headmajor_std_qk(const headmajor_config *c)
{
    return sqrt(2.0 / (double)(c->d_model + c->d_k));
}

double headmajor_std_v(const headmajor_config *c)
{
    return sqrt(2.0 / (double)(c->d_model + c->d_v));
}

double headmajor_std_fc(const headmajor_config *c)
{
    /* fc's weight is (d_model, h*d_v): fan_in h*d_v, fan_out d_model */
    return sqrt(2.0 / (double)(c->n_head * c->d_v + c->d_model));
}

/* weight ~ N(0, std^2), then bias ~ U(-1/sqrt(in), 1/sqrt(in)) */
static void reset_layer(linear *l, gsl_rng *r, double std)
{
    double a = 1.0 / sqrt((double)l->in_features);
    tensor_fill_normal(l->weight, r, 0.0, std);
    tensor_fill_uniform(l->bias, r, -a, a);
}

void headmajor_reset(headmajor *m, gsl_rng *r)
{
    reset_layer(&m->w_qs, r, headmajor_std_qk(&m->cfg));
    reset_layer(&m->w_ks, r, headmajor_std_qk(&m->cfg));
    reset_layer(&m->w_vs, r, headmajor_std_v(&m->cfg));
    reset_layer(&m->fc, r, headmajor_std_fc(&m->cfg));
    tensor_fill(m->layer_norm.gamma, 1.0);
    tensor_fill(m->layer_norm.beta, 0.0);
}

void headmajor_train(headmajor *m, int training, gsl_rng *rng)
{
    m->training = training;
    m->rng = rng;
}

/* --- the two rearranges ---------------------------------------------- */

/* What the split checks first: x is 3-D (B, L, h*d) and n_head is at
 * least 1 and divides its last size; GSL_EINVAL or GSL_EBADLEN with a
 * message naming the sizes and x's shape. */
static int check_heads(const tensor *x, size_t n_head)
{
    const char *who = "headmajor_split_heads";
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "%s: input shape %s has %zu dimensions, expected 3 "
                        "(B, L, h*d)",
                        who, xs, x->ndim);
    if (n_head == 0)
        return mha_fail(GSL_EINVAL, "%s: n_head is 0 (input %s)", who, xs);
    if (x->shape[2] % n_head != 0)
        return mha_fail(GSL_EBADLEN,
                        "%s: last size %zu of shape %s is not divisible by "
                        "n_head %zu",
                        who, x->shape[2], xs, n_head);
    return GSL_SUCCESS;
}

/* 'b l (head d) -> head b l d' under the name `pattern`. */
static int split_impl(const tensor *x, size_t h, const char *pattern,
                      tensor **out)
{
    *out = NULL;
    int status = check_heads(x, h);
    if (status)
        return status;
    /* a last name h*d_k splits by itself; any other, F, gives h and F/h */
    char names[4 * TENSOR_NAME_MAX + 16] = "";
    if (x->names[2][0] && !strchr(x->names[2], '*'))
        snprintf(names, sizeof names, "%s, %s, %s, %s/%s", x->names[0],
                 x->names[1], NAMES(h), x->names[2], NAMES(h));
    SCOPE_OF(TRACE_INPUTS(TRACE_IN(x)), "rearrange(%s)", pattern);
    tensor *split = NULL;
    // split is (B, L, h, d): a view, each row cut into h pieces of d
    STEP(tensor_reshape(x, SIZES((long)x->shape[0], (long)x->shape[1],
                                 (long)h, -1),
                        names[0] ? names : NULL, &split));
    // out is (h, B, L, d): a view, the head axis moved to the front
    STEP(tensor_permute(split, SHAPE(2, 0, 1, 3), out));
done:
    tensor_free(split);
    return status;
}

int headmajor_split_heads(const tensor *x, size_t n_head, tensor **out)
{
    return split_impl(x, n_head, "b l (head d) -> head b l d", out);
}

int headmajor_join_heads(const tensor *x, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    if (x->ndim != 4)
        return mha_fail(GSL_EINVAL,
                        "headmajor_join_heads: input shape %s has %zu "
                        "dimensions, expected 4 (h, B, L, d)",
                        tensor_shape_str(x, xs, sizeof xs), x->ndim);
    SCOPE_OF(TRACE_INPUTS(TRACE_IN(x)),
             "rearrange(head b l v -> b l (head v))");
    tensor *rows = NULL;
    int status = GSL_SUCCESS;
    // rows is (B, L, h, d): a view, the heads back next to their features
    STEP(tensor_permute(x, SHAPE(1, 2, 0, 3), &rows));
    // out is (B, L, h*d): a view when rows is row-major underneath
    STEP(tensor_reshape(rows, SIZES((long)rows->shape[0],
                                    (long)rows->shape[1], -1),
                        NULL, out));
done:
    tensor_free(rows);
    return status;
}

/* --- the forward pass ------------------------------------------------ */

/* The einops version's inputs: the rules of qkv.h in its names, q, k and v;
 * d_model features each; then valid_lens, 0 excluded. */
static int check_inputs(const headmajor *m, const tensor *q, const tensor *k,
                        const tensor *v, const tensor *valid_lens)
{
    const char *who = "headmajor_forward";
    qkv_shapes shapes;
    int status = qkv_check(who, &qkv_seed_names, q, k, v, 0, NULL, &shapes);
    if (status)
        return status;
    size_t D = m->cfg.d_model;
    if (q->shape[2] != D || k->shape[2] != D || v->shape[2] != D)
        return mha_fail(GSL_EBADLEN,
                        "%s: q, k and v must end in d_model = %zu features (%s)",
                        who, D, shapes.all);
    status = attention_check_dropout(who, m->cfg.dropout, m->training,
                                     m->rng);
    if (status)
        return status;
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    status = softmax_check_valid_lens(who, shapes.qk, B, Lq, Lk, valid_lens);
    if (status)
        return status;
    // a valid length of 0 would leave a row of only -inf
    size_t b, i;
    if (softmax_find_bad_len(valid_lens, B, Lq, Lk, 1, &b, &i)) {
        char at[48], ls[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "%s: valid_lens[%s] = 0 masks every key: softmax "
                        "of a row of -inf is 0/0 = NaN (masked_softmax "
                        "would give each key 1/%zu) (%s, valid_lens %s)",
                        who, softmax_len_index(valid_lens, b, i, at, sizeof at),
                        Lk, shapes.qk,
                        tensor_shape_str(valid_lens, ls, sizeof ls));
    }
    return GSL_SUCCESS;
}

static void set_name(tensor *t, size_t d, const char *name)
{
    snprintf(t->names[d], TENSOR_NAME_MAX, "%s", name);
}

/* Block (i, b) of a head-major tensor (h, B, L, d) is matrix (i, b) of its
 * tensor_matrices (matrices.h): every tensor here is a view this file made
 * of a row-major buffer, its last stride 1 and its row stride at least d,
 * so GSL reads it in place. */

static void trace_einsum(const char *op, const tensor *a, const tensor *b,
                         const tensor *c)
{
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, c, TRACE_INPUTS(TRACE_IN(a), TRACE_IN(b)),
               "%s", op);
}

/* c_ib = alpha a_ib op(b_ib) for every block (head i, example b) of the
 * 4-D tensors a, b and c, all read in place. */
static int einsum_dgemm(const tensor *a, CBLAS_TRANSPOSE_t tb, const tensor *b,
                        double alpha, const tensor *c)
{
    tensor_matrices am, bm, cm;
    int status = GSL_SUCCESS;
    STEP(tensor_matrices_in_place(a, &am));
    STEP(tensor_matrices_in_place(b, &bm));
    STEP(tensor_matrices_in_place(c, &cm));
    STEP(tensor_matrices_dgemm("headmajor_forward", CblasNoTrans, &am, tb, &bm,
                               alpha, &cm));
done:
    return status;
}

/* scores (h, B, Lq, Lk) = einsum('hblk,hbtk->hblt', qh, kh) / sqrt(d_k):
 * per (head, example) scores_ib = Q_ib K_ib^T / sqrt(d_k), one dgemm on
 * the strided blocks, K read transposed by BLAS. */
static int einsum_scores(const tensor *qh, const tensor *kh, tensor **scores)
{
    size_t h = qh->shape[0], B = qh->shape[1], Lq = qh->shape[2];
    size_t Lk = kh->shape[2], dk = qh->shape[3];
    int status = tensor_alloc(SHAPE(h, B, Lq, Lk), scores);
    if (status)
        return status;
    for (size_t d = 0; d < 3; d++)
        memcpy((*scores)->names[d], qh->names[d], TENSOR_NAME_MAX);
    memcpy((*scores)->names[3], kh->names[2], TENSOR_NAME_MAX);
    double scale = 1.0 / sqrt((double)dk);
    // block (i, b): q_ib (Lq, d_k) k_ib^T (d_k, Lk) into s_ib (Lq, Lk)
    status = einsum_dgemm(qh, CblasTrans, kh, scale, *scores);
    if (status) {
        tensor_free(*scores);
        *scores = NULL;
        return status;
    }
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, *scores,
               TRACE_INPUTS(TRACE_IN(qh), TRACE_IN(kh)),
               "einsum(hblk,hbtk->hblt)/sqrt(%zu)", dk);
    return GSL_SUCCESS;
}

/* mask (B, Lq, Lk): 1 where key t lies at or beyond the row's valid
 * length (the einops version's boolean mask, True = masked), 0 elsewhere. */
static int make_mask(const tensor *valid_lens, size_t Lq, size_t Lk,
                     tensor **mask)
{
    size_t B = valid_lens->shape[0];
    int status = tensor_alloc(SHAPE(B, Lq, Lk), mask);
    if (status)
        return status;
    tensor_set_names(*mask, NAMES(B, Lq, Lk));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            size_t len = softmax_valid_len(valid_lens, b, i, Lk);
            double *mask_bi = (*mask)->data + (b * Lq + i) * Lk;
            for (size_t t = 0; t < Lk; t++)
                mask_bi[t] = t >= len ? 1.0 : 0.0;
        }
    tensor_trace_step(TRACE_NEW, valid_lens, *mask, "mask(valid_lens)");
    return GSL_SUCCESS;
}

/* scores.masked_fill_(mask[None], -inf): the same mask for every head. */
static void masked_fill(tensor *scores, const tensor *mask)
{
    size_t h = scores->shape[0], n = tensor_numel(mask);
    for (size_t i = 0; i < h; i++) {
        double *scores_i = scores->data + i * n; // (B, Lq, Lk) of head i
        for (size_t e = 0; e < n; e++)
            if (mask->data[e] != 0.0)
                scores_i[e] = -INFINITY;
    }
    tensor_trace_step(TRACE_NEW, scores, scores, "masked_fill_(mask[None], -inf)");
}

/* oh (h, B, Lq, d_v) = einsum('hblt,hbtv->hblv', attn, vh), written into
 * a new (B, Lq, h, d_v) buffer through the view oh: block (i, b) of oh is
 * an (Lq, d_v) matrix with rows h*d_v apart, so dgemm writes each head's
 * output straight into its place beside the other heads. */
static int einsum_values(const tensor *attn, const tensor *vh, tensor **oh)
{
    *oh = NULL;
    size_t h = attn->shape[0], B = attn->shape[1], Lq = attn->shape[2];
    size_t dv = vh->shape[3];
    tensor *buf = NULL; // (B, Lq, h, d_v)
    int status = GSL_SUCCESS;
    STEP(tensor_alloc(SHAPE(B, Lq, h, dv), &buf));
    set_name(buf, 0, attn->names[1]);
    set_name(buf, 1, attn->names[2]);
    set_name(buf, 2, vh->names[0]);
    set_name(buf, 3, vh->names[3]);
    /* oh is how the einsum sees the buffer: making it is bookkeeping, not
     * a step of the seed, so it stays out of the trace */
    {
        QUIET;
        STEP(tensor_permute(buf, SHAPE(2, 0, 1, 3), oh));
    }
    // block (i, b): a_ib (Lq, Lk) v_ib (Lk, d_v) into o_ib (Lq, d_v)
    STEP(einsum_dgemm(attn, CblasNoTrans, vh, 1.0, *oh));
    trace_einsum("einsum(hblt,hbtv->hblv)", attn, vh, *oh);
    tensor_trace_note("written into a buffer %P laid out (B, Lq, h, d_v)", (size_t)4,
               (const size_t[]){B, Lq, h, dv});
done:
    tensor_free(buf); // oh holds the buffer now
    if (status) {
        tensor_free(*oh);
        *oh = NULL;
    }
    return status;
}

/* nn.Dropout in place on y (contiguous): zero with probability p, scale
 * the rest by 1/(1 - p); one draw per element, row-major. */
static void dropout(tensor *y, double p, gsl_rng *rng)
{
    size_t n = tensor_numel(y);
    for (size_t e = 0; e < n; e++)
        y->data[e] = gsl_rng_uniform(rng) < p ? 0.0 : y->data[e] / (1.0 - p);
    tensor_trace_step(TRACE_NEW, y, y, "dropout_(p=%g)", p);
}

/* y (B, Lq, d_model, contiguous) += residual (the same shape, any
 * strides). */
static void add_residual(tensor *y, const tensor *residual)
{
    size_t Lq = y->shape[1], D = y->shape[2];
    for (size_t b = 0; b < y->shape[0]; b++)
        for (size_t l = 0; l < Lq; l++) {
            double *y_bl = y->data + (b * Lq + l) * D;
            for (size_t j = 0; j < D; j++)
                y_bl[j] += *TENSOR_AT(residual, b, l, j);
        }
    tensor_trace_emit(TRACE_NEW, TRACE_SUM, y,
               TRACE_INPUTS(TRACE_IN(y), TRACE_IN(residual)),
               "add_(residual)");
}

int headmajor_forward(headmajor *m, const tensor *q, const tensor *k,
                      const tensor *v, const tensor *valid_lens, tensor **out,
                      tensor **attn)
{
    *out = NULL;
    if (attn)
        *attn = NULL;
    int status = check_inputs(m, q, k, v, valid_lens);
    if (status)
        return status;
    size_t h = m->cfg.n_head, d_model = m->cfg.d_model;
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    tensor q_in = tensor_named(q, NAMES(B, Lq, d_model));
    tensor k_in = tensor_named(k, NAMES(B, Lk, d_model));
    tensor v_in = tensor_named(v, NAMES(B, Lk, d_model));

    SCOPE_OF(TRACE_QKV(q, k, v),
             "headmajor(h=%zu)", h);

    tensor *qp = NULL, *kp = NULL, *vp = NULL; // (B, L, h*d)
    tensor *qh = NULL, *kh = NULL, *vh = NULL; // (h, B, L, d), views
    tensor *mask = NULL;                       // (B, Lq, Lk)
    tensor *scores = NULL, *weights = NULL;    // (h, B, Lq, Lk)
    tensor *oh = NULL;                         // (h, B, Lq, d_v), a view
    tensor *concat = NULL;                     // (B, Lq, h*d_v), a view
    tensor *y = NULL, *normed = NULL;          // (B, Lq, d_model)

    // 1-2. residual = q (read below); project and split each of q, k, v
    STEP(linear_forward(&m->w_qs, &q_in, &qp));
    STEP(split_impl(qp, h, "b l (head k) -> head b l k", &qh));
    STEP(linear_forward(&m->w_ks, &k_in, &kp));
    STEP(split_impl(kp, h, "b t (head k) -> head b t k", &kh));
    STEP(linear_forward(&m->w_vs, &v_in, &vp));
    STEP(split_impl(vp, h, "b t (head v) -> head b t v", &vh));
    // 3. the scores of every head and example
    STEP(einsum_scores(qh, kh, &scores));
    // 4. -inf beyond each row's valid length
    if (valid_lens) {
        STEP(make_mask(valid_lens, Lq, Lk, &mask));
        masked_fill(scores, mask);
    }
    // 5. weights over the keys t
    STEP(softmax_lastdim(scores, &weights));
    // 6. average the values, heads side by side again (views)
    STEP(einsum_values(weights, vh, &oh));
    STEP(headmajor_join_heads(oh, &concat));
    // 7. mix the heads, dropout in training
    STEP(linear_forward(&m->fc, concat, &y));
    if (m->training && m->cfg.dropout > 0.0)
        dropout(y, m->cfg.dropout, m->rng);
    // 8. add & norm
    if (m->residual_norm) {
        add_residual(y, q);
        STEP(layernorm_forward(&m->layer_norm, y, &normed));
    }
done:

    tensor_free(qp);
    tensor_free(kp);
    tensor_free(vp);
    tensor_free(qh);
    tensor_free(kh);
    tensor_free(vh);
    tensor_free(mask);
    tensor_free(scores);
    tensor_free(oh);
    tensor_free(concat);
    if (status) {
        tensor_free(weights);
        tensor_free(y);
        tensor_free(normed);
        return status;
    }
    if (m->residual_norm) {
        tensor_free(y);
        *out = normed;
    } else {
        *out = y;
    }
    if (attn)
        *attn = weights;
    else
        tensor_free(weights);
    return GSL_SUCCESS;
}
//<
