//> 11
/* layernorm.c: layer normalisation over the last axis; see layernorm.h.
 *
 * Shapes: x (..., d) read through its strides, one row per position;
 * y (..., d) contiguous, so row r of y starts at y->data + r*d. */
#include "nn/layernorm.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

static int check_eps(const char *who, double eps)
{
    if (!(eps >= 0.0 && isfinite(eps)))
        return mha_fail(GSL_EINVAL, "%s: eps %g must be finite and >= 0", who,
                        eps);
    return GSL_SUCCESS;
}

int layernorm_init(layernorm *ln, size_t d, double eps)
{
    memset(ln, 0, sizeof *ln);
    if (d == 0)
        return mha_fail(GSL_EINVAL, "layernorm_init: d is 0; sizes must be >= 1");
    int status = check_eps("layernorm_init", eps);
    if (status)
        return status;
    STEP(tensor_alloc(SHAPE(d), &ln->gamma));
    STEP(tensor_alloc(SHAPE(d), &ln->beta));
    tensor_fill(ln->gamma, 1.0); // beta stays 0: the layer starts as a pure norm
    ln->d = d;
    ln->eps = eps;
done:
    if (status)
        layernorm_free(ln);
    return status;
}

void layernorm_free(layernorm *ln)
{
    tensor_free(ln->gamma);
    tensor_free(ln->beta);
    ln->gamma = ln->beta = NULL;
}

/* gamma or beta must be (d,) for x (..., d). */
static int check_param(const char *name, const tensor *p, const tensor *x)
{
    if (!p)
        return GSL_SUCCESS;
    size_t d = x->shape[x->ndim - 1];
    if (p->ndim == 1 && p->shape[0] == d)
        return GSL_SUCCESS;
    char ps[TRACE_SHAPE_MAX], xs[TRACE_SHAPE_MAX];
    return mha_fail(GSL_EBADLEN,
                    "layer_norm: %s has shape %s, expected (%zu,) for input "
                    "shape %s",
                    name, tensor_shape_str(p, ps, sizeof ps), d,
                    tensor_shape_str(x, xs, sizeof xs));
}

int layernorm_apply(const tensor *x, const tensor *gamma, const tensor *beta,
                    double eps, tensor **y)
{
    RECORD(x, y, "layer_norm(eps=%g)", eps);
    *y = NULL;
    if (!x)
        return mha_fail(GSL_EINVAL, "layer_norm: x is NULL");
    int status = check_eps("layer_norm", eps);
    if (!status)
        status = check_param("gamma", gamma, x);
    if (!status)
        status = check_param("beta", beta, x);
    if (!status)
        status = tensor_alloc_like(x, y);
    if (status)
        return status;

    size_t last = x->ndim - 1, d = x->shape[last], xs = x->strides[last];
    size_t rows = tensor_numel(x) / d;
    size_t idx[TENSOR_MAX_DIMS] = {0}; /* x's index of the row's start */
    for (size_t r = 0; r < rows; r++) {
        const double *x_r = tensor_at(x, idx);
        double *y_r = (*y)->data + r * d;
        // pass 1: the mean
        double mean = 0.0;
        for (size_t j = 0; j < d; j++)
            mean += x_r[j * xs];
        mean /= (double)d;
        // pass 2: the biased variance, from the deviations (no cancellation)
        double var = 0.0;
        for (size_t j = 0; j < d; j++) {
            double dev = x_r[j * xs] - mean;
            y_r[j] = dev;
            var += dev * dev;
        }
        var /= (double)d;
        // pass 3: scale to unit variance, then gamma and beta per feature
        double inv = 1.0 / sqrt(var + eps);
        for (size_t j = 0; j < d; j++) {
            double g = gamma ? gamma->data[j * gamma->strides[0]] : 1.0;
            double b = beta ? beta->data[j * beta->strides[0]] : 0.0;
            y_r[j] = g * (y_r[j] * inv) + b;
        }
        /* next row: count the leading index up, like an odometer */
        for (size_t dim = last; dim-- > 0;) {
            if (++idx[dim] < x->shape[dim])
                break;
            idx[dim] = 0;
        }
    }
    return GSL_SUCCESS;
}

int layernorm_forward(const layernorm *ln, const tensor *x, tensor **y)
{
    *y = NULL;
    if (x && x->shape[x->ndim - 1] != ln->d) {
        char xs[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EBADLEN,
                        "layer_norm: input shape %s ends in %zu features, the "
                        "layer normalises %zu",
                        tensor_shape_str(x, xs, sizeof xs),
                        x->shape[x->ndim - 1], ln->d);
    }
    return layernorm_apply(x, ln->gamma, ln->beta, ln->eps, y);
}
//<
