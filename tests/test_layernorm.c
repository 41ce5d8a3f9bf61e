//> 11
/* test_layernorm.c: layer normalisation against a loop written here from
 * the formula (mean and biased variance by hand), values worked out by
 * hand, and the error messages. */
#include "check.h"

#include <criterion/parameterized.h>

/* y[r, j] = gamma_j (x[r, j] - mean_r) / sqrt(var_r + eps) + beta_j over
 * the rows of a contiguous (rows, d) array; gamma/beta NULL: 1 and 0. */
static void naive_layer_norm(const double *x, size_t rows, size_t d,
                             const double *gamma, const double *beta,
                             double eps, double *y)
{
    for (size_t r = 0; r < rows; r++) {
        double mean = 0, var = 0;
        for (size_t j = 0; j < d; j++)
            mean += x[r * d + j];
        mean /= d;
        for (size_t j = 0; j < d; j++)
            var += (x[r * d + j] - mean) * (x[r * d + j] - mean);
        var /= d;
        for (size_t j = 0; j < d; j++)
            y[r * d + j] = (gamma ? gamma[j] : 1) * (x[r * d + j] - mean) /
                               sqrt(var + eps) +
                           (beta ? beta[j] : 0);
    }
}

struct ln_case {
    size_t ndim, shape[4];
    double eps, scale, offset; /* x ~ offset + scale * N(0, 1) */
    int affine;                /* random gamma and beta */
};

static struct ln_case ln_cases[] = {
    {1, {5}, 1e-5, 1, 0, 0},         {2, {3, 4}, 1e-5, 1, 0, 1},
    {3, {2, 4, 6}, 1e-5, 3, 2, 1},   {4, {2, 3, 2, 8}, 1e-3, 1, 0, 1},
    {3, {1, 1, 100}, 1e-5, 0.01, 0, 0}, {2, {7, 1}, 1e-5, 1, 0, 1},
    {3, {2, 5, 3}, 0.0, 1, 0, 1},    {2, {4, 50}, 1e-5, 1e3, 1e4, 1},
};

ParameterizedTestParameters(layer_norm, equals_loops)
{
    return cr_make_param_array(struct ln_case, ln_cases,
                               sizeof ln_cases / sizeof ln_cases[0]);
}

ParameterizedTest(struct ln_case *c, layer_norm, equals_loops)
{
    gsl_rng *r = mha_rng_new(11 + c->ndim * 7 + c->shape[c->ndim - 1]);
    size_t d = c->shape[c->ndim - 1];
    tensor *x, *y, *want;
    OK(tensor_alloc(c->ndim, c->shape, &x));
    tensor_fill_normal(x, r, c->offset, c->scale);
    layernorm ln;
    OK(layernorm_init(&ln, d, c->eps));
    if (c->affine) {
        tensor_fill_normal(ln.gamma, r, 1, 0.5);
        tensor_fill_normal(ln.beta, r, 0, 0.5);
    }
    OK(layernorm_forward(&ln, x, &y));
    cr_assert(tensor_same_shape(y, x));
    cr_assert(tensor_is_contiguous(y));
    OK(tensor_alloc(c->ndim, c->shape, &want));
    naive_layer_norm(x->data, tensor_numel(x) / d, d, ln.gamma->data,
                     ln.beta->data, c->eps, want->data);
    /* d = 1: every row is its own mean, y = beta exactly */
    double err = rel_error(y, want);
    cr_assert(err <= 1e-13, "relative error %g", err);
    layernorm_free(&ln);
    FREE_ALL(x, y, want);
    gsl_rng_free(r);
}

/* A row worked out by hand: x = (1, 2, 3, 6), mean 3, deviations
 * (-2, -1, 0, 3), biased variance (4 + 1 + 0 + 9)/4 = 3.5. */
Test(layer_norm, by_hand)
{
    tensor *x, *y, *g, *b;
    OK(tensor_from_array(SHAPE(1, 4), (double[]){1, 2, 3, 6}, &x));
    OK(layernorm_apply(x, NULL, NULL, 0.5, &y)); /* var + eps = 4: sd 2 */
    double want[] = {-1, -0.5, 0, 1.5};
    for (size_t j = 0; j < 4; j++)
        cr_assert_float_eq(y->data[j], want[j], 1e-15, "j = %zu", j);
    tensor_free(y);
    /* gamma and beta per feature: y_j = gamma_j * want_j + beta_j */
    OK(tensor_from_array(SHAPE(4), (double[]){2, -1, 5, 0.5}, &g));
    OK(tensor_from_array(SHAPE(4), (double[]){0, 1, -3, 10}, &b));
    OK(layernorm_apply(x, g, b, 0.5, &y));
    double want_gb[] = {-2, 1.5, -3, 10.75};
    for (size_t j = 0; j < 4; j++)
        cr_assert_float_eq(y->data[j], want_gb[j], 1e-15, "j = %zu", j);
    tensor_free(y);
    /* only beta: gamma NULL counts as 1 */
    OK(layernorm_apply(x, NULL, b, 0.5, &y));
    for (size_t j = 0; j < 4; j++)
        cr_assert_float_eq(y->data[j], want[j] + b->data[j], 1e-15);
    FREE_ALL(y, x, g, b);
}

/* With gamma 1, beta 0 each row comes out with mean 0 and variance
 * var/(var + eps); the two-pass variance keeps that even when the mean
 * is 1e8 times the spread, where E[x^2] - E[x]^2 (two numbers near 1e16,
 * one ulp apart is 2) would lose every digit.  What is left is the
 * rounding of x itself: ulp(1e8) = 1.5e-8 next to a spread of 1. */
Test(layer_norm, unit_variance_and_large_mean)
{
    gsl_rng *r = mha_rng_new(3);
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(6, 32), &x));
    tensor_fill_normal(x, r, 1e8, 1);
    layernorm ln;
    OK(layernorm_init(&ln, 32, LAYERNORM_EPS));
    cr_assert_eq(ln.eps, 1e-5);
    OK(layernorm_forward(&ln, x, &y));
    for (size_t row = 0; row < 6; row++) {
        double mean = 0, var = 0, xm = 0, xv = 0;
        for (size_t j = 0; j < 32; j++)
            xm += x->data[row * 32 + j] / 32;
        for (size_t j = 0; j < 32; j++) {
            mean += y->data[row * 32 + j] / 32;
            xv += pow(x->data[row * 32 + j] - xm, 2) / 32;
        }
        for (size_t j = 0; j < 32; j++)
            var += pow(y->data[row * 32 + j] - mean, 2) / 32;
        cr_assert(fabs(mean) < 1e-7, "row %zu mean %g", row, mean);
        cr_assert(fabs(var - xv / (xv + 1e-5)) < 1e-7, "row %zu var %.17g",
                  row, var);
        cr_assert(var < 1.0);
    }
    layernorm_free(&ln);
    FREE_ALL(x, y);
    gsl_rng_free(r);
}

/* Rows read through strides: a permuted view normalises its own last
 * axis, which is a strided column of the base. */
Test(layer_norm, strided_input)
{
    gsl_rng *r = mha_rng_new(5);
    tensor *x = normal_tensor(SHAPE(3, 5, 4), r, 2), *xt, *packed, *y, *want;
    OK(tensor_permute(x, SHAPE(0, 2, 1), &xt)); // (3, 4, 5), last stride 4
    OK(tensor_contiguous(xt, &packed));
    OK(layernorm_apply(xt, NULL, NULL, 1e-5, &y));
    OK(tensor_alloc(SHAPE(3, 4, 5), &want));
    naive_layer_norm(packed->data, 12, 5, NULL, NULL, 1e-5, want->data);
    cr_assert(rel_error(y, want) <= 1e-13);
    FREE_ALL(x, xt, packed, y, want);
    gsl_rng_free(r);
}

Test(layer_norm, init_values)
{
    layernorm ln;
    OK(layernorm_init(&ln, 3, LAYERNORM_EPS));
    cr_assert_eq(ln.d, 3);
    for (size_t j = 0; j < 3; j++) {
        cr_assert_eq(ln.gamma->data[j], 1.0);
        cr_assert_eq(ln.beta->data[j], 0.0);
    }
    layernorm_free(&ln);
    cr_assert_null(ln.gamma);
    layernorm_free(&ln); /* twice is harmless */
}

Test(layer_norm, trace_line)
{
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 4, 6), &x));
    OK(tensor_set_names(x, "B, Lq, d_model"));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(layernorm_apply(x, NULL, NULL, 1e-5, &y));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
        "layer_norm(eps=1e-05)    new   (2, 4, 6) -> (2, 4, 6)              (B, Lq, d_model)\n");
    /* a constant row has variance 0: eps alone keeps it finite (all 0) */
    for (size_t k = 0; k < 48; k++)
        cr_assert_eq(y->data[k], 0.0);
    capture_free(&c);
    FREE_ALL(x, y);
}

Test(layer_norm, errors)
{
    tensor *x, *g5, *g2d, *y = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    OK(tensor_alloc(SHAPE(5), &g5));
    OK(tensor_alloc(SHAPE(1, 4), &g2d));
    FAILS(layernorm_apply(x, g5, NULL, 1e-5, &y), GSL_EBADLEN,
          "layer_norm: gamma has shape (5,), expected (4,) for input shape "
          "(2, 3, 4)");
    cr_assert_null(y);
    FAILS(layernorm_apply(x, NULL, g2d, 1e-5, &y), GSL_EBADLEN,
          "layer_norm: beta has shape (1, 4), expected (4,) for input shape "
          "(2, 3, 4)");
    FAILS(layernorm_apply(x, NULL, NULL, -1, &y), GSL_EINVAL,
          "layer_norm: eps -1 must be finite and >= 0");
    FAILS(layernorm_apply(x, NULL, NULL, NAN, &y), GSL_EINVAL,
          "layer_norm: eps nan must be finite and >= 0");
    FAILS(layernorm_apply(NULL, NULL, NULL, 1e-5, &y), GSL_EINVAL,
          "layer_norm: x is NULL");
    layernorm ln;
    FAILS(layernorm_init(&ln, 0, 1e-5), GSL_EINVAL,
          "layernorm_init: d is 0; sizes must be >= 1");
    FAILS(layernorm_init(&ln, 4, INFINITY), GSL_EINVAL,
          "layernorm_init: eps inf must be finite and >= 0");
    OK(layernorm_init(&ln, 5, 1e-5));
    FAILS(layernorm_forward(&ln, x, &y), GSL_EBADLEN,
          "layer_norm: input shape (2, 3, 4) ends in 4 features, the layer "
          "normalises 5");
    cr_assert_null(y);
    /* a gamma replaced by one of the wrong size is caught, not read past */
    tensor_free(ln.gamma);
    ln.gamma = g5;
    g5 = NULL;
    tensor *x5;
    OK(tensor_alloc(SHAPE(2, 5), &x5));
    tensor_free(ln.beta);
    OK(tensor_alloc(SHAPE(4), &ln.beta));
    FAILS(layernorm_forward(&ln, x5, &y), GSL_EBADLEN,
          "layer_norm: beta has shape (4,), expected (5,) for input shape "
          "(2, 5)");
    layernorm_free(&ln);
    FREE_ALL(x, x5, g2d);
}

Test(layer_norm, allocation_failures)
{
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 3), &x));
    int failures = 0;
    EACH_ALLOCATION_FAILS(failures,
        layernorm_apply(x, NULL, NULL, 1e-5, &y),
        cr_assert_null(y));
    cr_assert_eq(failures, 3); /* buffer record, values, header */
    tensor_free(y);
    layernorm ln;
    EACH_ALLOCATION_FAILS(failures,
        layernorm_init(&ln, 4, 1e-5),
        cr_assert_null(ln.gamma);
        cr_assert_null(ln.beta));
    cr_assert_eq(failures, 6);
    layernorm_free(&ln);
    tensor_free(x);
}
//<
