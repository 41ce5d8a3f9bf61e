//> 13
/* backward.c: gradients of Linear, masked softmax and dot-product
 * attention (the module's: multihead_backward.c); see backward.h for the
 * formulas.
 *
 * Shapes: x (rows, in), W (out, in), y and dy (rows, out) for a Linear
 * layer once x's leading dimensions are counted as rows; queries (B, Lq,
 * d), keys (B, Lk, d), values (B, Lk, dv), weights (B, Lq, Lk), dout (B,
 * Lq, dv) for the attention; the module's (B*h, L, p) heads and (B, L,
 * d_model) projections as in multihead.h.  Tensors made here are
 * contiguous, so batch slice b of dw starts at dw->data + b*Lq*Lk.
 */
#include "nn/backward.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "nn/attention.h"
#include "nn/backward_internal.h"
#include "base/error.h"
//> 15
#include "nn/posenc.h"
//<
#include "nn/qkv.h"
#include "nn/softmax.h"
#include "tensor/matrices.h"
#include "tensor/tensor_trace.h"


/* One traced product: op, "a @ b -> c" with "^T" where an operand is read
 * transposed. */
static void trace_product(const char *op, const tensor *a, int ta,
                          const tensor *b, int tb, const tensor *c)
{
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, c,
               TRACE_INPUTS(TRACE_IN_T(a, ta), TRACE_IN_T(b, tb)), "%s",
               op);
}

/* The input gradients a backward pass hands out, each pointer NULL when
 * that gradient is not asked for (and then not computed): all NULL until
 * the pass succeeds. */
void backward_clear_outputs(tensor **dqueries, tensor **dkeys,
                            tensor **dvalues)
{
    tensor **want[3] = {dqueries, dkeys, dvalues};
    for (int i = 0; i < 3; i++)
        if (want[i])
            *want[i] = NULL;
}

/* dq, dk, dv to the caller's pointers when the pass succeeded, freed when
 * it failed.  Returns status. */
int backward_hand_out(int status, tensor *dq, tensor *dk, tensor *dv,
                      tensor **dqueries, tensor **dkeys, tensor **dvalues)
{
    tensor *got[3] = {dq, dk, dv};
    tensor **want[3] = {dqueries, dkeys, dvalues};
    for (int i = 0; i < 3; i++) {
        if (!status && want[i])
            *want[i] = got[i];
        else
            tensor_free(got[i]);
    }
    return status;
}

/* --- Linear --------------------------------------------------------- */

static int check_linear(const char *who, const linear *l, const tensor *x,
                        const tensor *dy, const linear *grad)
{
    char ws[TRACE_SHAPE_MAX], xs[TRACE_SHAPE_MAX], ys[TRACE_SHAPE_MAX];
    if (!x || !dy)
        return mha_fail(GSL_EINVAL, "%s %s: %s is NULL", who, l->name,
                        !x ? "x" : "dy");
    tensor_shape_str(l->weight, ws, sizeof ws);
    tensor_shape_str(x, xs, sizeof xs);
    tensor_shape_str(dy, ys, sizeof ys);
    if (l->weight->ndim != 2 || l->weight->shape[0] != l->out_features ||
        l->weight->shape[1] != l->in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: weight has shape %s, expected (%zu, %zu)", who,
                        l->name, ws, l->out_features, l->in_features);
    if (x->shape[x->ndim - 1] != l->in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: x of shape %s ends in %zu features, the layer "
                        "takes %zu (weight %s)",
                        who, l->name, xs, x->shape[x->ndim - 1],
                        l->in_features, ws);
    int fits = dy->ndim == x->ndim &&
               dy->shape[dy->ndim - 1] == l->out_features;
    for (size_t d = 0; fits && d + 1 < x->ndim; d++)
        fits = dy->shape[d] == x->shape[d];
    if (!fits)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: dy has shape %s; for x %s it must be x's "
                        "shape with %zu (out_features) last",
                        who, l->name, ys, xs, l->out_features);
    if (!grad)
        return GSL_SUCCESS;
    char gs[TRACE_SHAPE_MAX];
    if (!tensor_same_shape(grad->weight, l->weight))
        return mha_fail(GSL_EBADLEN,
                        "%s %s: the gradient's weight has shape %s, the "
                        "layer's %s",
                        who, l->name,
                        tensor_shape_str(grad->weight, gs, sizeof gs), ws);
    if (!l->bias != !grad->bias)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: the layer %s a bias but its gradient %s", who,
                        l->name, l->bias ? "has" : "has no",
                        grad->bias ? "has one" : "has none");
    if (l->bias && !tensor_same_shape(grad->bias, l->bias))
        return mha_fail(GSL_EBADLEN,
                        "%s %s: the gradient's bias has shape %s, expected "
                        "(%zu,)",
                        who, l->name,
                        tensor_shape_str(grad->bias, gs, sizeof gs),
                        l->out_features);
    return GSL_SUCCESS;
}

int linear_backward(const linear *l, const tensor *x, const tensor *dy,
                    linear *grad, tensor **dx)
{
    const char *who = "linear_backward";
    if (dx)
        *dx = NULL;
    int status = check_linear(who, l, x, dy, grad);
    if (status)
        return status;
    size_t in = l->in_features, out = l->out_features;
    size_t rows = tensor_numel(x) / in;

    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(dy, "dy")), "%s backward",
             l->name);
    // every allocation first, so that a failure leaves grad untouched
    tensor_matrices xm = {0}, dym = {0}, wm = {0}, gm = {0};
    char gs[TRACE_SHAPE_MAX];
    STEP(tensor_as_rows(dy, &dym));
    if (dx)
        STEP(tensor_as_rows(l->weight, &wm));
    if (grad) {
        STEP(tensor_as_rows(x, &xm));
        /* dW is written in place: it must be a matrix GSL can write */
        STEP(tensor_as_rows(grad->weight, &gm));
        if (gm.packed)
            STEP(mha_fail(GSL_EINVAL,
                          "%s %s: the gradient's weight %s is not laid out "
                          "as rows with unit stride",
                          who, l->name,
                          tensor_shape_str(grad->weight, gs, sizeof gs)));
    }
    if (dx)
        STEP(tensor_alloc_like(x, dx));

    gsl_matrix_const_view dy_m = TENSOR_MATRIX(dym, 0, 0);
    if (dx) {
        // dx (rows, in) = dy (rows, out) @ W (out, in)
        gsl_matrix_const_view w_m = TENSOR_MATRIX(wm, 0, 0);
        gsl_matrix_view dx_m = gsl_matrix_view_array((*dx)->data, rows, in);
        status = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &dy_m.matrix,
                                &w_m.matrix, 0.0, &dx_m.matrix);
        if (status)
            goto blas_failed;
        trace_product("dx = dy W", dy, 0, l->weight, 0, *dx);
    }
    if (grad) {
        // dW (out, in) += dy^T (out, rows) @ x (rows, in): every row of
        // every example adds its outer product dy_r x_r^T
        gsl_matrix_const_view x_m = TENSOR_MATRIX(xm, 0, 0);
        gsl_matrix_view dw_m = gsl_matrix_view_array_with_tda(
            grad->weight->data, out, in, gm.tda);
        status = gsl_blas_dgemm(CblasTrans, CblasNoTrans, 1.0, &dy_m.matrix,
                                &x_m.matrix, 1.0, &dw_m.matrix);
        if (status)
            goto blas_failed;
        // dy and x read as (rows, out) and (rows, in) matrices
        tensor dy2 = tensor_header(SHAPE(rows, out));
        tensor x2 = tensor_header(SHAPE(rows, in));
        trace_product("dW += dy^T x", &dy2, 1, &x2, 0, grad->weight);
        // db (out,) += dy summed over its rows
        if (grad->bias) {
            double *db = grad->bias->data;
            size_t bs = grad->bias->strides[0];
            for (size_t r = 0; r < rows; r++) {
                const double *dy_r = dym.data + r * dym.tda;
                for (size_t o = 0; o < out; o++)
                    db[o * bs] += dy_r[o];
            }
            tensor_trace_step(TRACE_NEW, &dy2, grad->bias, "db += sum(dy, rows)");
        }
    }
    goto done;
blas_failed:
    status = mha_fail(status, "%s %s: gsl_blas_dgemm failed (%s)", who,
                      l->name, gsl_strerror(status));
done:
    tensor_matrices_free(&xm);
    tensor_matrices_free(&dym);
    tensor_matrices_free(&wm);
    tensor_matrices_free(&gm);
    if (status && dx) {
        tensor_free(*dx);
        *dx = NULL;
    }
    return status;
}

/* --- masked softmax ------------------------------------------------- */

/* Row by row: with w the row's weights and dw their gradient, the scores'
 * gradient is scale * w_j * (dw_j - sum_k w_k dw_k) for a valid key j and
 * exactly 0 for a masked one. */
int masked_softmax_backward(const tensor *weights, const tensor *dweights,
                            double scale, const tensor *valid_lens,
                            tensor **dscores)
{
    const char *who = "masked_softmax_backward";
    *dscores = NULL;
    if (!weights || !dweights)
        return mha_fail(GSL_EINVAL, "%s: %s is NULL", who,
                        !weights ? "weights" : "dweights");
    char ws[TRACE_SHAPE_MAX], ds[TRACE_SHAPE_MAX];
    char context[2 * TRACE_SHAPE_MAX + 16];
    tensor_shape_str(weights, ws, sizeof ws);
    tensor_shape_str(dweights, ds, sizeof ds);
    if (weights->ndim != 3)
        return mha_fail(GSL_EBADLEN,
                        "%s: weights must be 3-D (B, Lq, Lk), got shape %s",
                        who, ws);
    if (!tensor_same_shape(weights, dweights))
        return mha_fail(GSL_EBADLEN,
                        "%s: dweights has shape %s, weights %s; they must "
                        "agree",
                        who, ds, ws);
    if (!isfinite(scale))
        return mha_fail(GSL_EINVAL, "%s: scale %g is not finite (weights %s)",
                        who, scale, ws);
    size_t B = weights->shape[0], Lq = weights->shape[1];
    size_t Lk = weights->shape[2];
    snprintf(context, sizeof context, "weights %s", ws);
    int status = softmax_check_valid_lens(who, context, B, Lq, Lk, valid_lens);
    if (status)
        return status;

    // dscores is (B, Lq, Lk), zero where a key is masked
    status = tensor_alloc_like(weights, dscores);
    if (status)
        return status;
    const size_t *wst = weights->strides, *dst = dweights->strides;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            size_t valid = softmax_valid_len(valid_lens, b, i, Lk);
            const double *w_bi = weights->data + b * wst[0] + i * wst[1];
            const double *dw_bi = dweights->data + b * dst[0] + i * dst[1];
            double *ds_bi = (*dscores)->data + (b * Lq + i) * Lk;
            // pass 1: sum_k w_k dw_k over the keys the row sees, what
            // moving weight between them costs (a masked key holds none)
            double dot = 0.0;
            for (size_t j = 0; j < valid; j++)
                dot += w_bi[j * wst[2]] * dw_bi[j * dst[2]];
            // pass 2: the valid keys' gradients; masked keys keep 0
            for (size_t j = 0; j < valid; j++)
                ds_bi[j] = scale * w_bi[j * wst[2]] * (dw_bi[j * dst[2]] - dot);
        }
    const char *mask = valid_lens ? "valid_lens " : "no mask";
    if (scale != 1.0) // to 6 digits, as masked_softmax shows it
        tensor_trace_step(TRACE_NEW, dweights, *dscores,
                   "masked_softmax_backward(scale %.6g, %s%T)", scale, mask,
                   valid_lens);
    else
        tensor_trace_step(TRACE_NEW, dweights, *dscores,
                   "masked_softmax_backward(%s%T)", mask, valid_lens);
    return GSL_SUCCESS;
}

/* --- scaled dot-product attention ----------------------------------- */

/* The rules every attention's inputs follow (qkv.h), with the weights and
 * dout named in every message too; then weights (B, Lq, Lk), dout (B, Lq,
 * dv) and valid_lens against them. */
static int check_attention(const char *who, const tensor *q, const tensor *k,
                           const tensor *v, const tensor *valid_lens,
                           const tensor *w, const tensor *dout)
{
    char ws[TRACE_SHAPE_MAX], os[TRACE_SHAPE_MAX];
    char more[2 * TRACE_SHAPE_MAX + 32] = "";
    if (w && dout)
        snprintf(more, sizeof more, ", weights %s, dout %s",
                 tensor_shape_str(w, ws, sizeof ws),
                 tensor_shape_str(dout, os, sizeof os));
    qkv_shapes shapes;
    int status = qkv_check(who, &qkv_lesson_names, q, k, v, 1, more, &shapes);
    if (status)
        return status;
    if (!w || !dout)
        return mha_fail(GSL_EINVAL, "%s: %s is NULL", who,
                        !w ? "weights" : "dout");
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    size_t dv = v->shape[2];
    if (w->ndim != 3 || w->shape[0] != B || w->shape[1] != Lq ||
        w->shape[2] != Lk)
        return mha_fail(GSL_EBADLEN,
                        "%s: weights must be (B, Lq, Lk) = (%zu, %zu, %zu) "
                        "(%s)",
                        who, B, Lq, Lk, shapes.all);
    if (dout->ndim != 3 || dout->shape[0] != B || dout->shape[1] != Lq ||
        dout->shape[2] != dv)
        return mha_fail(GSL_EBADLEN,
                        "%s: dout must be (B, Lq, dv) = (%zu, %zu, %zu) (%s)",
                        who, B, Lq, dv, shapes.all);
    return softmax_check_valid_lens(who, shapes.qk, B, Lq, Lk, valid_lens);
}

/* c_b = op(a_b) @ op(b_b) for every b, into the contiguous tensor c. */
static int batched_dgemm(CBLAS_TRANSPOSE_t ta, const tensor_matrices *a,
                         CBLAS_TRANSPOSE_t tb, const tensor_matrices *b,
                         tensor *c)
{
    tensor_matrices cm;
    int status = tensor_matrices_in_place(c, &cm);
    if (status)
        return status;
    return tensor_matrices_dgemm("dot_attention_backward", ta, a, tb, b, 1.0,
                                 &cm);
}

/* One gradient through ds: *g (shaped like `like`) = ds (or ds^T, by t)
 * @ by, each example a product, traced as op. */
static int through_ds(const tensor_matrices *dsm, const tensor *ds,
                      CBLAS_TRANSPOSE_t t, const tensor *by,
                      const tensor *like, const char *op, tensor **g)
{
    tensor_matrices bm = {0};
    int status = GSL_SUCCESS;
    STEP(tensor_as_matrices(by, NULL, &bm));
    STEP(tensor_alloc_like(like, g));
    STEP(batched_dgemm(t, dsm, CblasNoTrans, &bm, *g));
    trace_product(op, ds, t == CblasTrans, by, 0, *g);
done:
    tensor_matrices_free(&bm);
    return status;
}

/* A (B, rows, cols) tensor named (n0, n1, n2). */
static int alloc3(size_t B, size_t rows, size_t cols, const char *n0,
                  const char *n1, const char *n2, tensor **out)
{
    int status = tensor_alloc(SHAPE(B, rows, cols), out);
    if (status == GSL_SUCCESS && (n0[0] || n1[0] || n2[0])) {
        snprintf((*out)->names[0], TENSOR_NAME_MAX, "%s", n0);
        snprintf((*out)->names[1], TENSOR_NAME_MAX, "%s", n1);
        snprintf((*out)->names[2], TENSOR_NAME_MAX, "%s", n2);
    }
    return status;
}

int dot_attention_backward(const tensor *queries, const tensor *keys,
                           const tensor *values, const tensor *valid_lens,
                           const tensor *weights, const tensor *dout,
                           tensor **dqueries, tensor **dkeys,
                           tensor **dvalues)
{
    const char *who = "dot_attention_backward";
    backward_clear_outputs(dqueries, dkeys, dvalues);
    int status = check_attention(who, queries, keys, values, valid_lens,
                                 weights, dout);
    if (status)
        return status;
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t Lk = keys->shape[1], d = queries->shape[2];
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(dout, "dout")),
             "dot_attention_backward(scale 1/sqrt(%zu))", d);
    tensor_matrices vm = {0}, wm = {0}, om = {0}, dsm = {0};
    tensor *dw = NULL, *ds = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
    // the names of the gradients: the inputs', or the lesson's
    const char *nB = weights->names[0], *nq = weights->names[1];
    const char *nk = weights->names[2];
    STEP(tensor_as_matrices(weights, NULL, &wm));
    STEP(tensor_as_matrices(dout, NULL, &om));

    // dV (B, Lk, dv) = w^T (B, Lk, Lq) @ dout (B, Lq, dv): value j gets
    // back the output gradient of every query, weighted as it was used
    if (dvalues) {
        STEP(tensor_alloc_like(values, &dv));
        STEP(batched_dgemm(CblasTrans, &wm, CblasNoTrans, &om, dv));
        trace_product("dV = w^T dout", weights, 1, dout, 0, dv);
    }
    if (dqueries || dkeys) {
        // dw (B, Lq, Lk) = dout (B, Lq, dv) @ V^T (B, dv, Lk)
        STEP(tensor_as_matrices(values, NULL, &vm));
        STEP(alloc3(B, Lq, Lk, nB, nq, nk, &dw));
        STEP(batched_dgemm(CblasNoTrans, &om, CblasTrans, &vm, dw));
        trace_product("dw = dout V^T", dout, 0, values, 1, dw);
        // ds (B, Lq, Lk): through the softmax, the scale and the mask
        STEP(masked_softmax_backward(weights, dw, 1.0 / sqrt((double)d),
                                     valid_lens, &ds));
        STEP(tensor_as_matrices(ds, NULL, &dsm));
    }
    // dQ (B, Lq, d) = ds (B, Lq, Lk) @ K (B, Lk, d), and
    // dK (B, Lk, d) = ds^T (B, Lk, Lq) @ Q (B, Lq, d)
    if (dqueries)
        STEP(through_ds(&dsm, ds, CblasNoTrans, keys, queries, "dQ = ds K",
                        &dq));
    if (dkeys)
        STEP(through_ds(&dsm, ds, CblasTrans, queries, keys, "dK = ds^T Q",
                        &dk));
done:
    tensor_matrices_free(&vm);
    tensor_matrices_free(&wm);
    tensor_matrices_free(&om);
    tensor_matrices_free(&dsm);
    tensor_free(dw);
    tensor_free(ds);
    return backward_hand_out(status, dq, dk, dv, dqueries, dkeys, dvalues);
}
//<
