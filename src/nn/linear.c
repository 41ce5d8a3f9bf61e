//> 02
/* linear.c: y = x W^T + b on GSL BLAS; see linear.h. */
#include "nn/linear.h"

#include <math.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "tensor/matrices.h"
#include "tensor/tensor_trace.h"

static int init_params(linear *l, const char *name, size_t in_features,
                       size_t out_features, int with_bias, int meta)
{
    memset(l, 0, sizeof *l);
    snprintf(l->name, sizeof l->name, "%s", name ? name : "linear");
    if (in_features == 0 || out_features == 0)
        return mha_fail(GSL_EINVAL,
                        "linear_init %s: in_features %zu and out_features %zu "
                        "must both be >= 1",
                        l->name, in_features, out_features);
    l->in_features = in_features;
    l->out_features = out_features;
    int (*alloc)(size_t, const size_t *, tensor **) =
        meta ? tensor_alloc_meta : tensor_alloc;
    int status = alloc(SHAPE(out_features, in_features), &l->weight);
    if (status == GSL_SUCCESS && with_bias)
        status = alloc(SHAPE(out_features), &l->bias);
    if (status) {
        linear_free(l);
        return mha_fail_in(status, "linear_init %s", l->name);
    }
    return GSL_SUCCESS;
}

int linear_init(linear *l, const char *name, size_t in_features,
                size_t out_features, int with_bias)
{
    return init_params(l, name, in_features, out_features, with_bias, 0);
}

//> handout
int linear_init_meta(linear *l, const char *name, size_t in_features,
                     size_t out_features, int with_bias)
{
    return init_params(l, name, in_features, out_features, with_bias, 1);
}
//<

void linear_free(linear *l)
{
    tensor_free(l->weight);
    tensor_free(l->bias);
    l->weight = l->bias = NULL;
}

void linear_name_output(linear *l, const char *name)
{
    tensor_name_copy(l->out_name, name);
}

void linear_reset_xavier_uniform(linear *l, gsl_rng *r)
{
    double a = sqrt(6.0 / (double)(l->in_features + l->out_features));
    tensor_fill_uniform(l->weight, r, -a, a);
    if (l->bias)
        tensor_fill(l->bias, 0.0);
}

void linear_reset_pytorch(linear *l, gsl_rng *r)
{
    double a = 1.0 / sqrt((double)l->in_features);
    tensor_fill_uniform(l->weight, r, -a, a);
    if (l->bias)
        tensor_fill_uniform(l->bias, r, -a, a);
}

/* The parameters against the shapes the layer was made with, then x
 * (NULL: not checked) against in_features. */
int linear_check(const char *who, const linear *l, const tensor *x)
{
    char xs[TRACE_SHAPE_MAX], ws[TRACE_SHAPE_MAX];
    if (!l->weight)
        return mha_fail(GSL_EINVAL,
                        "%s %s: the layer has no weight (linear_init failed "
                        "or linear_free was called)",
                        who, l->name);
    tensor_shape_str(l->weight, ws, sizeof ws);
    if (l->weight->ndim != 2 || l->weight->shape[0] != l->out_features ||
        l->weight->shape[1] != l->in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: weight has shape %s, expected (%zu, %zu)", who,
                        l->name, ws, l->out_features, l->in_features);
    if (l->bias && (l->bias->ndim != 1 || l->bias->shape[0] != l->out_features)) {
        char bs[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EBADLEN, "%s %s: bias has shape %s, expected (%zu,)",
                        who, l->name, tensor_shape_str(l->bias, bs, sizeof bs),
                        l->out_features);
    }
    if (x && x->shape[x->ndim - 1] != l->in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s %s: input shape %s ends in %zu features, the layer "
                        "takes %zu (weight %s)",
                        who, l->name, tensor_shape_str(x, xs, sizeof xs),
                        x->shape[x->ndim - 1], l->in_features, ws);
    return GSL_SUCCESS;
}

/* y: x's leading shape and names, then out_features. */
static int alloc_output(const linear *l, const tensor *x, tensor **y)
{
    size_t shape[TENSOR_MAX_DIMS];
    memcpy(shape, x->shape, sizeof shape);
    shape[x->ndim - 1] = l->out_features;
    // a pointer, since `mha trace` allocates shapes alone
    // (tensor_alloc_meta), in lines the book does not show
    int (*alloc)(size_t, const size_t *, tensor **) = tensor_alloc;
//> handout
    if (tensor_is_meta(x) || tensor_is_meta(l->weight))
        alloc = tensor_alloc_meta; // shapes alone (mha trace)
//<
    int status = alloc(x->ndim, shape, y);
    if (status)
        return status;
    memcpy((*y)->names, x->names, sizeof x->names);
    snprintf((*y)->names[x->ndim - 1], TENSOR_NAME_MAX, "%s", l->out_name);
    return GSL_SUCCESS;
}

/* y = b + x W^T into y's numbers, x (rows, in) and W (out, in) as
 * matrices: the bias first, into every row of y, then one dgemm adds
 * x W^T onto it (beta = 1). */
static int product(const linear *l, const tensor_matrices *xm,
                   const tensor_matrices *wm, tensor *y)
{
    size_t rows = xm->rows, out = l->out_features;
    gsl_matrix_const_view xv = TENSOR_MATRIX(*xm, 0, 0);
    gsl_matrix_const_view wv = TENSOR_MATRIX(*wm, 0, 0);
    gsl_matrix_view ym = gsl_matrix_view_array(y->data, rows, out);
    double beta = 0.0;
    if (l->bias && rows > 0) {
        // the first row from the bias (maybe strided), the others copies
        const double *bd = l->bias->data;
        for (size_t o = 0; o < out; o++)
            y->data[o] = bd[o * l->bias->strides[0]];
        for (size_t r = 1; r < rows; r++)
            memcpy(y->data + r * out, y->data, out * sizeof *y->data);
        beta = 1.0;
    }
//> full
    /* one row (a decoding step): W times it, which reads W once, where
     * dgemm would first copy all of W into its packed layout */
    if (rows == 1) {
        gsl_vector_const_view x1 = gsl_matrix_const_row(&xv.matrix, 0);
        gsl_vector_view y1 = gsl_matrix_row(&ym.matrix, 0);
        int status = gsl_blas_dgemv(CblasNoTrans, 1.0, &wv.matrix,
                                    &x1.vector, beta, &y1.vector);
        if (status)
            return mha_fail(status, "gsl_blas_dgemv failed (%s)",
                            gsl_strerror(status));
        return GSL_SUCCESS;
    }
//<
    int status = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &xv.matrix,
                                &wv.matrix, beta, &ym.matrix);
    if (status)
        return mha_fail(status, "gsl_blas_dgemm failed (%s)",
                        gsl_strerror(status));
    return GSL_SUCCESS;
}

/* The layer's steps: x's leading dimensions read as the rows of one
 * (rows, in) matrix, on x's own memory (copied once only when those rows
 * are not evenly spaced), W as (out, in) read transposed in place by
 * BLAS, and y = x W^T + b in one product.  Its trace line, "W_q: x W^T +
 * b", says what they made. */
int linear_steps(const linear *l, const tensor *x, tensor **y)
{
    RECORD(x, y, "%s: x W^T%s", l->name, l->bias ? " + b" : "");
    *y = NULL;
    tensor_matrices xm = {0}, wm = {0};
    int status = GSL_SUCCESS;
    STEP(tensor_as_rows(x, &xm));         // x as (rows, in)
    STEP(tensor_as_rows(l->weight, &wm)); // W as (out, in)
    STEP(alloc_output(l, x, y));          // y: x's leading shape, out
//> handout
    if (tensor_is_meta(*y))
        goto done; // shapes alone: the same steps (the packing copies too)
//<
    STEP(product(l, &xm, &wm, *y));       // y = x W^T + b
done:
    tensor_matrices_free(&xm);
    tensor_matrices_free(&wm);
    if (status) {
        tensor_free(*y);
        *y = NULL;
    }
    return status;
}

/* The layer's door: x is checked against the layer once, and the steps
 * run. */
int linear_forward(const linear *l, const tensor *x, tensor **y)
{
    *y = NULL;
    int status = linear_check("linear_forward", l, x);
    if (status)
        return status;
    status = linear_steps(l, x, y);
    return status ? mha_fail_in(status, "linear_forward %s", l->name)
                  : GSL_SUCCESS;
}

/* The same sums as linear_forward with plain loops and no BLAS.  x is
 * read through tensor_at, so any strides work.
 * What the tests check (ex_linear_forward_naive):
 * - y has x's shape with its last dimension out_features, and every row
 *   is the row of x times W^T plus b, W being (out_features,
 *   in_features), to the values worked out by hand (W = [[1, 0, -1],
 *   [2, 1, 0]], b = [0.5, -1]: x [1, 2, 3] gives [-1.5, 3]); no bias
 *   (l->bias NULL) adds nothing;
 * - each output is added up as a plain loop adds it: it starts from its
 *   bias (0 without one) and takes in the row's products one feature at
 *   a time, first to last.  In doubles the order shows: W = [[1, 1]],
 *   b = [1] and x [1e17, -1e17] give 0, since 1 + 1e17 rounds to 1e17,
 *   where a BLAS call (linear_forward) adds the bias last and gives 1;
 * - x may be a view with any strides (a permuted one);
 * - an x whose last dimension is not in_features is refused as
 *   linear_forward refuses it (linear_check): GSL_EBADLEN, *y NULL, a
 *   message that starts with "linear_forward_naive" and names both sizes;
 * - a failed allocation returns its status (GSL_ENOMEM) with *y NULL and
 *   nothing left allocated.
 * The handout blanks this body:
 * @exercise linear_forward_naive (chapter 02): y = x W^T + b in plain loops. */
int linear_forward_naive(const linear *l, const tensor *x, tensor **y)
{
    RECORD(x, y, "%s: x W^T%s", l->name, l->bias ? " + b" : "");
    *y = NULL;
    int status = linear_check("linear_forward_naive", l, x);
    if (status)
        return status;
    status = alloc_output(l, x, y);
    if (status)
        return mha_fail_in(status, "linear_forward_naive %s", l->name);
    size_t in = l->in_features, out = l->out_features;
    size_t rows = tensor_numel(x) / in;
    size_t idx[TENSOR_MAX_DIMS] = {0}; /* x's index of the row's start */
    for (size_t r = 0; r < rows; r++) {
        double *y_r = (*y)->data + r * out;
        for (size_t o = 0; o < out; o++) {
            double sum = l->bias ? *TENSOR_AT(l->bias, o) : 0.0;
            for (size_t i = 0; i < in; i++) {
                idx[x->ndim - 1] = i;
                sum += *tensor_at(x, idx) * *TENSOR_AT(l->weight, o, i);
            }
            y_r[o] = sum;
        }
        /* next row: count the leading index up, like an odometer */
        for (size_t d = x->ndim - 1; d-- > 0;) {
            if (++idx[d] < x->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return GSL_SUCCESS;
}
//<
