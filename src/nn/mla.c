//> 20
/* mla.c: multi-head latent attention and its latent cache; see mla.h.
 *
 * Shapes: B batch, n new positions at start .. start+n-1, t positions
 * attended (t = n for a forward, length + n for a decoding step), h heads.
 *   q        (B, n, h, d_nope + d_r): per head [q_nope | q_pe rotated]
 *   c_kv     (B, n, d_c) normed; k_pe (B, n, d_r) rotated; all t of each
 *            as c_all (B, t, d_c) and pe_all (B, t, d_r)
 *   naive    qh, kh (B*h, n or t, d_nope + d_r), vh (B*h, t, d_v)
 *   absorbed q_lat (B, h*n, d_c + d_r), keys (B, t, d_c + d_r), values
 *            c_all (B, t, d_c), latent out (B, h*n, d_c)
 *   heads    (B, n, h*d_v); out (B, n, d_model)
 * Tensors made here are contiguous; the weights of the layers are too.
 */
#include "nn/mla.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "nn/multihead.h"
#include "nn/posenc.h"
#include "nn/qkv.h"
#include "nn/softmax.h"
#include "tensor/matrices.h"
#include "tensor/tensor_trace.h"

/* --- the steps both paths share ------------------------------------- */

/* tensor_narrow, the part named `name` in the trace: dimension dim of
 * x's indices start .. start+length-1, a view. */
static int narrow_named(const tensor *x, size_t dim, size_t start,
                        size_t length, const char *name, tensor **out)
{
    int status = GSL_SUCCESS;
    {
        QUIET; // its record, with the part's name, is below
        STEP(tensor_narrow(x, dim, start, length, out));
    }
    snprintf((*out)->names[dim], TENSOR_NAME_MAX, "%s", name);
    tensor_trace_step(TRACE_VIEW, x, *out, "narrow(%zu, %zu, %zu)", dim, start,
               length);
done:
    return status;
}

/* q (B, n, h, d_nope + d_r): projected (through the low rank and
 * q_norm when q_lora_rank > 0), the last d_r features of every head
 * turned to positions start .. start+n-1. */
static int project_queries(const mla *m, const tensor *x, size_t start,
                           tensor **q)
{
    const mla_config *c = &m->cfg;
    size_t B = x->shape[0], n = x->shape[1], h = c->num_heads;
    size_t d_nope = c->qk_nope_head_dim, d_r = c->qk_rope_head_dim;
    tensor *flat = NULL, *low = NULL, *normed = NULL, *pe = NULL;
    tensor *pe_flat = NULL, *turned = NULL, *back = NULL;
    *q = NULL;
    int status = GSL_SUCCESS;
    if (c->q_lora_rank == 0) {
        STEP(linear_forward(&m->wq, x, &flat));
    } else {
        STEP(linear_forward(&m->wq_a, x, &low));
        STEP(mla_rms_norm(low, m->q_norm, c->eps, &normed));
        STEP(linear_forward(&m->wq_b, normed, &flat));
    }
    STEP(tensor_reshape(flat, SIZES((long)B, (long)n, (long)h, -1),
                        NAMES(B, n, h, d_nope + d_r), q));
    // the rope part of every head: (B, n, h, d_r), turned as (B, n, h*d_r)
    STEP(narrow_named(*q, 3, d_nope, d_r, NAMES(d_r), &pe));
    STEP(tensor_reshape(pe, SIZES((long)B, (long)n, -1), NAMES(B, n, h * d_r),
                        &pe_flat));
    STEP(rope_apply(pe_flat, d_r, (long)start, c->rope_base, &turned));
    STEP(tensor_view(turned, SIZES((long)B, (long)n, (long)h, (long)d_r),
                     NAMES(B, n, h, d_r), &back));
    STEP(tensor_copy_into(pe, back)); // q_pe back into q, turned
    tensor_trace_step(TRACE_COPY, back, pe, "into q[..., %zu:]", d_nope);
done:
    TENSORS_FREE(flat, low, normed, pe, pe_flat, turned, back);
    if (status) {
        tensor_free(*q);
        *q = NULL;
    }
    return status;
}

/* c_kv (B, n, d_c), normed by kv_norm, and k_pe (B, n, d_r), turned to
 * positions start .. start+n-1: the two parts of wkv_a's output. */
static int project_latent(const mla *m, const tensor *x, size_t start,
                          tensor **c_kv, tensor **k_pe)
{
    const mla_config *c = &m->cfg;
    size_t d_c = c->kv_lora_rank, d_r = c->qk_rope_head_dim;
    tensor *kv = NULL, *part = NULL, *pe = NULL;
    *c_kv = *k_pe = NULL;
    int status = GSL_SUCCESS;
    STEP(linear_forward(&m->wkv_a, x, &kv));
    STEP(narrow_named(kv, 2, 0, d_c, NAMES(d_c), &part));
    STEP(mla_rms_norm(part, m->kv_norm, c->eps, c_kv));
    STEP(narrow_named(kv, 2, d_c, d_r, NAMES(d_r), &pe));
    STEP(rope_apply(pe, d_r, (long)start, c->rope_base, k_pe));
done:
    TENSORS_FREE(kv, part, pe);
    if (status) {
        TENSORS_FREE(*c_kv, *k_pe);
        *c_kv = *k_pe = NULL;
    }
    return status;
}

/* out (..., da + db): a (..., da) and b (..., db) side by side, the
 * dimensions before the last the same in both (3 or 4 of them). */
static int cat_last(const tensor *a, const tensor *b, const char *names,
                    tensor **out)
{
    size_t nd = a->ndim, da = a->shape[nd - 1], db = b->shape[nd - 1];
    size_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, a->shape, nd * sizeof *shape);
    shape[nd - 1] = da + db;
    tensor *left = NULL, *right = NULL;
    int status = GSL_SUCCESS;
    STEP(tensor_alloc(nd, shape, out));
    {
        QUIET; // the copies are the one cat record below
        STEP(tensor_narrow(*out, nd - 1, 0, da, &left));
        STEP(tensor_copy_into(left, a));
        STEP(tensor_narrow(*out, nd - 1, da, db, &right));
        STEP(tensor_copy_into(right, b));
    }
    STEP(tensor_set_names(*out, names));
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, *out,
               TRACE_INPUTS(TRACE_IN(a), TRACE_IN(b)), "cat(dim=-1)");
done:
    TENSORS_FREE(left, right);
    if (status) {
        tensor_free(*out);
        *out = NULL;
    }
    return status;
}

/* *o (R, Lq, dv) = softmax(q k^T / sqrt(dq), causal) v, batch row by batch
 * row, and *w (R, Lq, t) the weights, t the keys.  Row i of batch row r
 * is position start + (i mod n) and sees keys 0 .. start + (i mod n):
 * with the heads folded into the rows (the absorbed path, Lq = h*n),
 * every head's n queries see the same keys. */
static int attend(const char *who, const tensor *q, const tensor *k,
                  const tensor *v, size_t dq, size_t n, size_t start,
                  tensor **w, tensor **o)
{
    size_t R = q->shape[0], Lq = q->shape[1], t = k->shape[1];
    size_t dv = v->shape[2];
    tensor_matrices qm = {0}, km = {0}, vm = {0}, sm, wm, om;
    tensor *scores = NULL, *lens = NULL;
    *w = *o = NULL;
    int status = GSL_SUCCESS;
    STEP(tensor_as_matrices(q, "queries", &qm));
    STEP(tensor_as_matrices(k, "keys", &km));
    STEP(tensor_as_matrices(v, "values", &vm));
    STEP(tensor_alloc(SHAPE(R, Lq, t), &scores));
    STEP(tensor_alloc(SHAPE(R, Lq), &lens));
    STEP(tensor_alloc(SHAPE(R, Lq, dv), o));
    STEP(tensor_matrices_in_place(scores, &sm));
    STEP(tensor_matrices_in_place(*o, &om));
    // scores_r (Lq, t) = q_r k_r^T
    STEP(tensor_matrices_dgemm(who, CblasNoTrans, &qm, CblasTrans, &km, 1.0,
                               &sm));
    for (size_t r = 0; r < R; r++)
        for (size_t i = 0; i < Lq; i++)
            lens->data[r * Lq + i] = (double)(start + i % n + 1);
    memcpy(scores->names, q->names, 2 * TENSOR_NAME_MAX);
    tensor_name_copy(scores->names[2], NAMES(t));
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, scores,
               TRACE_INPUTS(TRACE_IN(q), TRACE_IN_T(k, 1)), "scores");
    {
        QUIET; // the softmax's one record, with its scale, is below
        STEP(masked_softmax_scaled(scores, 1.0 / sqrt((double)dq), lens, w));
    }
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, *w,
               TRACE_INPUTS(TRACE_IN(scores), TRACE_SIDE(lens, "valid_lens")),
               "softmax(s / sqrt(%zu))", dq);
    // o_r (Lq, dv) = w_r (Lq, t) v_r (t, dv)
    STEP(tensor_matrices_in_place(*w, &wm));
    STEP(tensor_matrices_dgemm(who, CblasNoTrans, &wm, CblasNoTrans, &vm, 1.0,
                               &om));
    memcpy((*o)->names, q->names, 2 * TENSOR_NAME_MAX);
    snprintf((*o)->names[2], TENSOR_NAME_MAX, "%s", v->names[2]);
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, *o,
               TRACE_INPUTS(TRACE_IN(*w), TRACE_IN(v)), "weights V");
done:
    tensor_matrices_free(&qm);
    tensor_matrices_free(&km);
    tensor_matrices_free(&vm);
    TENSORS_FREE(scores, lens);
    if (status) {
        TENSORS_FREE(*w, *o);
        *w = *o = NULL;
    }
    return status;
}

/* --- the naive path ------------------------------------------------- */

/* Either path's weights w, their numbers in (example, head, query, key)
 * order, handed out per head as *weights (B, h, n, t): a reshape made
 * untraced, since handing them out is no step of the pass. */
static int head_weights(const tensor *w, size_t B, size_t h, size_t n,
                        size_t t, tensor **weights)
{
    QUIET;
    return tensor_reshape(w, SIZES((long)B, (long)h, (long)n, (long)t),
                          NAMES(B, h, n, t), weights);
}

/* heads (B, n, h*d_v) from q (B, n, h, d_nope + d_r) and the t latents:
 * keys and values of every head up-projected from c_all by wkv_b, k_pe
 * appended to every head's keys, and plain attention per head. */
static int attend_naive(mla *m, const tensor *q, const tensor *c_all,
                        const tensor *pe_all, size_t start, tensor **heads,
                        tensor **weights)
{
    const mla_config *c = &m->cfg;
    size_t B = q->shape[0], n = q->shape[1], t = c_all->shape[1];
    size_t h = c->num_heads, d_nope = c->qk_nope_head_dim;
    size_t d_r = c->qk_rope_head_dim, d_v = c->v_head_dim;
    tensor *kv = NULL, *kv4 = NULL, *k_nope = NULL, *v4 = NULL;
    tensor *pe4 = NULL, *pe_h = NULL, *k = NULL;
    tensor *kp = NULL, *kh = NULL, *vp = NULL, *vh = NULL;
    tensor *qp = NULL, *qh = NULL, *w = NULL, *o = NULL;
    *heads = NULL;
    int status = GSL_SUCCESS;
    // 1. every head's keys and values from the latent: (B, t, h, d_nope + d_v)
    STEP(linear_forward(&m->wkv_b, c_all, &kv));
    STEP(tensor_reshape(kv, SIZES((long)B, (long)t, (long)h, -1),
                        NAMES(B, t, h, d_nope + d_v), &kv4));
    STEP(narrow_named(kv4, 3, 0, d_nope, NAMES(d_nope), &k_nope));
    STEP(narrow_named(kv4, 3, d_nope, d_v, NAMES(d_v), &v4));
    // 2. k = [k_nope | k_pe], k_pe the same for every head (an expand)
    STEP(tensor_reshape(pe_all, SIZES((long)B, (long)t, 1, (long)d_r),
                        NAMES(B, t, 1, d_r), &pe4));
    STEP(tensor_expand(pe4, SIZES((long)B, (long)t, (long)h, (long)d_r),
                       NAMES(B, t, h, d_r), &pe_h));
    STEP(cat_last(k_nope, pe_h, NAMES(B, t, h, d_nope + d_r), &k));
    // 3. heads into the batch, chapter 06's transpose_qkv on the heads
    //    side by side: (B*h, t, .) and (B*h, n, d_nope + d_r)
    STEP(tensor_reshape(k, SIZES((long)B, (long)t, -1),
                        NAMES(B, t, h * (d_nope + d_r)), &kp));
    STEP(transpose_qkv(kp, h, &kh));
    STEP(tensor_reshape(v4, SIZES((long)B, (long)t, -1), NAMES(B, t, h * d_v),
                        &vp));
    STEP(transpose_qkv(vp, h, &vh));
    STEP(tensor_reshape(q, SIZES((long)B, (long)n, -1),
                        NAMES(B, n, h * (d_nope + d_r)), &qp));
    STEP(transpose_qkv(qp, h, &qh));
    // 4. attention, scaled by 1/sqrt(d_nope + d_r)
    STEP(attend("mla_forward", qh, kh, vh, d_nope + d_r, n, start, &w, &o));
    // 5. the heads side by side: (B, n, h*d_v)
    STEP(transpose_output(o, h, heads));
    if (weights)
        STEP(head_weights(w, B, h, n, t, weights));
done:
    TENSORS_FREE(kv, kv4, k_nope, v4, pe4, pe_h, k, kp, kh, vp, vh, qp, qh, w,
                 o);
    return status;
}

/* --- the absorbed path ---------------------------------------------- */

/* The end of a product of x with wkv_b per head, into *out: on failure
 * (status, GSL's) *out is freed and the status reported; else *out gets
 * its names and one trace line, op. */
static int per_head_done(const mla *m, int status, const tensor *x,
                         const char *names, const char *op, tensor **out)
{
    if (status) {
        tensor_free(*out);
        *out = NULL;
        return mha_fail(status, "mla_forward: gsl_blas_dgemm failed (%s)",
                        gsl_strerror(status));
    }
    tensor_set_names(*out, names);
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, *out,
               TRACE_INPUTS(TRACE_IN(x), TRACE_NAMED(m->wkv_b.weight, "wkv_b")),
               "%s", op);
    return GSL_SUCCESS;
}

/* q_lat (B, h*n, d_c + d_r): head j's rows j*n .. j*n + n-1 hold, for
 * each query, q_nope W_UK_j (d_c features: the query moved into the
 * latent's space) and its q_pe.  W_UK_j is rows j*(d_nope + d_v) ..
 * + d_nope - 1 of wkv_b's weight, (d_nope, d_c). */
static int absorb_query(const mla *m, const tensor *q, tensor **q_lat)
{
    const mla_config *c = &m->cfg;
    size_t B = q->shape[0], n = q->shape[1], h = c->num_heads;
    size_t d_nope = c->qk_nope_head_dim, d_r = c->qk_rope_head_dim;
    size_t d_v = c->v_head_dim, d_c = c->kv_lora_rank, dq = d_nope + d_r;
    int status = tensor_alloc(SHAPE(B, h * n, d_c + d_r), q_lat);
    if (status)
        return status;
    const double *wkv_b = m->wkv_b.weight->data;
    for (size_t b = 0; b < B && !status; b++)
        for (size_t j = 0; j < h && !status; j++) {
            // q_nope of head j, (n, d_nope): rows h*dq apart in q
            gsl_matrix_const_view qn = gsl_matrix_const_view_array_with_tda(
                q->data + (b * n * h + j) * dq, n, d_nope, h * dq);
            gsl_matrix_const_view uk = gsl_matrix_const_view_array(
                wkv_b + j * (d_nope + d_v) * d_c, d_nope, d_c);
            double *rows = (*q_lat)->data + (b * h + j) * n * (d_c + d_r);
            gsl_matrix_view out =
                gsl_matrix_view_array_with_tda(rows, n, d_c, d_c + d_r);
            status = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0,
                                    &qn.matrix, &uk.matrix, 0.0, &out.matrix);
            for (size_t i = 0; i < n; i++)
                memcpy(rows + i * (d_c + d_r) + d_c,
                       q->data + ((b * n + i) * h + j) * dq + d_nope,
                       d_r * sizeof *rows);
        }
    return per_head_done(m, status, q, NAMES(B, h * n, d_c + d_r),
                         "absorb W_UK", q_lat);
}

/* heads (B, n, h*d_v): head j's latent outputs (rows j*n .. of o, each
 * (d_c,)) times W_UV_j^T, W_UV_j the d_v rows of wkv_b's weight after
 * W_UK_j, (d_v, d_c). */
static int expand_values(const mla *m, const tensor *o, size_t n,
                         tensor **heads)
{
    const mla_config *c = &m->cfg;
    size_t B = o->shape[0], h = c->num_heads, d_nope = c->qk_nope_head_dim;
    size_t d_v = c->v_head_dim, d_c = c->kv_lora_rank;
    int status = tensor_alloc(SHAPE(B, n, h * d_v), heads);
    if (status)
        return status;
    const double *wkv_b = m->wkv_b.weight->data;
    for (size_t b = 0; b < B && !status; b++)
        for (size_t j = 0; j < h && !status; j++) {
            gsl_matrix_const_view oj = gsl_matrix_const_view_array(
                o->data + (b * h + j) * n * d_c, n, d_c);
            gsl_matrix_const_view uv = gsl_matrix_const_view_array(
                wkv_b + (j * (d_nope + d_v) + d_nope) * d_c, d_v, d_c);
            gsl_matrix_view out = gsl_matrix_view_array_with_tda(
                (*heads)->data + b * n * h * d_v + j * d_v, n, d_v, h * d_v);
            status = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &oj.matrix,
                                    &uv.matrix, 0.0, &out.matrix);
        }
    return per_head_done(m, status, o, NAMES(B, n, h * d_v), "W_UV per head",
                         heads);
}

/* heads (B, n, h*d_v), attending in the latent's space: scores of
 * [q_nope W_UK | q_pe] against [c_kv | k_pe], a weighted sum of c_kv,
 * then W_UV.  All h heads read the one latent, so they fold into the
 * rows of one product per example, as multi-query attention's do. */
static int attend_absorbed(mla *m, const tensor *q, const tensor *c_all,
                           const tensor *pe_all, size_t start, tensor **heads,
                           tensor **weights)
{
    const mla_config *c = &m->cfg;
    size_t B = q->shape[0], n = q->shape[1], t = c_all->shape[1];
    size_t h = c->num_heads, d_c = c->kv_lora_rank, d_r = c->qk_rope_head_dim;
    size_t dq = c->qk_nope_head_dim + d_r;
    tensor *q_lat = NULL, *keys = NULL, *w = NULL, *o = NULL;
    *heads = NULL;
    int status = GSL_SUCCESS;
    // 1. the query moved into the latent's space (W_UK absorbed)
    STEP(absorb_query(m, q, &q_lat));
    // 2. the keys are the latent and k_pe side by side, the values the latent
    STEP(cat_last(c_all, pe_all, NAMES(B, t, d_c + d_r), &keys));
    // 3. attention on the latent, scaled by 1/sqrt(d_nope + d_r) as before
    STEP(attend("mla_forward", q_lat, keys, c_all, dq, n, start, &w, &o));
    // 4. W_UV per head (absorbed into the output): (B, n, h*d_v)
    STEP(expand_values(m, o, n, heads));
    if (weights)
        STEP(head_weights(w, B, h, n, t, weights));
done:
    tensor_free(q_lat);
    tensor_free(keys);
    tensor_free(w);
    tensor_free(o);
    return status;
}

/* --- forward and decoding ------------------------------------------- */

static int check_x(const char *who, const mla *m, const tensor *x)
{
    if (!x)
        return mha_fail(GSL_EINVAL, "%s: x is NULL", who);
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3 || x->shape[2] != m->cfg.dim)
        return mha_fail(GSL_EBADLEN,
                        "%s: x has shape %s, expected (B, n, d_model) with "
                        "d_model = dim %zu",
                        who, xs, m->cfg.dim);
    return tensor_check_finite(x, who, "x");
}

static const char *path_name(mla_path path)
{
    return path == MLA_NAIVE ? "naive" : "absorbed";
}

/* out (B, n, d_model) = wo(heads), heads by the path's attention of q
 * to the t latents, with a check that nothing overflowed; its weights
 * (B, h, n, t) when weights is not NULL. */
static int finish(mla *m, mla_path path, const char *who, const tensor *q,
                  const tensor *c_all, const tensor *pe_all, size_t start,
                  tensor **out, tensor **weights)
{
    tensor *heads = NULL;
    int status = GSL_SUCCESS;
    STEP(path == MLA_NAIVE
             ? attend_naive(m, q, c_all, pe_all, start, &heads, weights)
             : attend_absorbed(m, q, c_all, pe_all, start, &heads, weights));
    STEP(linear_forward(&m->wo, heads, out));
    STEP(tensor_check_result(*out, who, "output", "out"));
done:
    tensor_free(heads);
    if (status) {
        tensor_free(*out);
        *out = NULL;
        if (weights) {
            tensor_free(*weights);
            *weights = NULL;
        }
    }
    return status;
}

int mla_forward(mla *m, const tensor *x, mla_path path, tensor **out,
                tensor **weights)
{
    const char *who = "mla_forward";
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = check_x(who, m, x);
    if (status)
        return status;
    size_t B = x->shape[0], n = x->shape[1], d_model = x->shape[2];
    tensor x_in = tensor_named(x, NAMES(B, n, d_model));
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(x, "x")),
             "mla_forward(%s, h=%zu, d_c=%zu, d_r=%zu)", path_name(path),
             m->cfg.num_heads, m->cfg.kv_lora_rank,
             m->cfg.qk_rope_head_dim);
    tensor *q = NULL, *c_kv = NULL, *k_pe = NULL;
    STEP(project_queries(m, &x_in, 0, &q));
    STEP(project_latent(m, &x_in, 0, &c_kv, &k_pe));
    STEP(finish(m, path, who, q, c_kv, k_pe, 0, out, weights));
done:
    TENSORS_FREE(q, c_kv, k_pe);
    return status;
}

int mla_cache_init(mla_cache *c, size_t batch, size_t kv_lora_rank,
                   size_t rope_dim, size_t capacity)
{
    memset(c, 0, sizeof *c);
    int status = MHA_CHECK_SIZES("mla_cache_init",
                                 "batch, kv_lora_rank, rope_dim, capacity",
                                 batch, kv_lora_rank, rope_dim, capacity);
    if (status)
        return status;
    *c = (mla_cache){.batch = batch, .kv_lora_rank = kv_lora_rank,
                     .rope_dim = rope_dim, .capacity = capacity};
    // the sizes under the lesson's names, which name the two tensors
    size_t B = batch, d_c = kv_lora_rank, d_r = rope_dim;
    STEP(tensor_alloc(SHAPE(B, capacity, d_c), &c->latent));
    STEP(tensor_alloc(SHAPE(B, capacity, d_r), &c->pe));
done:
    if (status) {
        mla_cache_free(c);
        return mha_fail_in(status, "mla_cache_init");
    }
    tensor_set_names(c->latent, NAMES(B, capacity, d_c));
    tensor_set_names(c->pe, NAMES(B, capacity, d_r));
    return GSL_SUCCESS;
}

void mla_cache_free(mla_cache *c)
{
    TENSORS_FREE(c->latent, c->pe);
    memset(c, 0, sizeof *c);
}

/* new (B, n, d) written at positions length .. length+n-1 of storage
 * (B, capacity, d); *all the t = length + n filled positions, a view. */
static int append(tensor *storage, const tensor *new, size_t length,
                  const char *what, tensor **all)
{
    size_t n = new->shape[1], t = length + n;
    tensor *slot = NULL;
    *all = NULL;
    int status = GSL_SUCCESS;
    {
        QUIET; // the append's one record is below
        STEP(tensor_narrow(storage, 1, length, n, &slot));
        STEP(tensor_copy_into(slot, new));
        STEP(tensor_narrow(storage, 1, 0, t, all));
    }
    tensor_name_copy((*all)->names[1], NAMES(t));
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, *all, TRACE_INPUTS(TRACE_IN(new)),
               "append %s at %zu..%zu", what, length, t - 1);
done:
    tensor_free(slot);
    return status;
}

int mla_decode_step(mla *m, mla_cache *c, const tensor *x, mla_path path,
                    tensor **out, tensor **weights)
{
    const char *who = "mla_decode_step";
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = check_x(who, m, x);
    if (status)
        return status;
    if (!c || !c->latent)
        return mha_fail(GSL_EINVAL, "%s: the cache is NULL or not initialised",
                        who);
    size_t B = x->shape[0], n = x->shape[1], d_model = x->shape[2];
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (c->batch != B || c->kv_lora_rank != m->cfg.kv_lora_rank ||
        c->rope_dim != m->cfg.qk_rope_head_dim)
        return mha_fail(GSL_EBADLEN,
                        "%s: the cache holds B %zu, d_c %zu, d_r %zu but x %s "
                        "and the module need B %zu, d_c %zu, d_r %zu",
                        who, c->batch, c->kv_lora_rank, c->rope_dim, xs, B,
                        m->cfg.kv_lora_rank, m->cfg.qk_rope_head_dim);
    if (n > c->capacity - c->length)
        return mha_fail(GSL_EBADLEN,
                        "%s: the cache is full: capacity %zu, length %zu, and "
                        "x %s brings %zu new position%s",
                        who, c->capacity, c->length, xs, n, n == 1 ? "" : "s");
    size_t start = c->length;
    tensor x_in = tensor_named(x, NAMES(B, n, d_model));
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(x, "x")),
             "mla_decode_step(%s, positions %zu..%zu)", path_name(path),
             start, start + n - 1);
    tensor *q = NULL, *c_kv = NULL, *k_pe = NULL, *c_all = NULL, *pe_all = NULL;
    STEP(project_queries(m, &x_in, start, &q));
    STEP(project_latent(m, &x_in, start, &c_kv, &k_pe));
    STEP(append(c->latent, c_kv, start, "c_kv", &c_all));
    STEP(append(c->pe, k_pe, start, "k_pe", &pe_all));
    STEP(finish(m, path, who, q, c_all, pe_all, start, out, weights));
done:
    if (!status)
        c->length = start + n;
    TENSORS_FREE(q, c_kv, k_pe, c_all, pe_all);
    return status;
}
//<
