//> 11
/* layernorm.h: layer normalisation over the last axis (nn.LayerNorm).
 *
 * Shapes:
 *   x      (..., d)     any 1 to 4 dimensions, any strides
 *   gamma  (d,)         scale per feature, or NULL: 1 everywhere
 *   beta   (d,)         shift per feature, or NULL: 0 everywhere
 *   y      (..., d)     x's shape and dimension names, contiguous
 *
 * Each row x_r = x[..., :] (one position of one example) is normalised on
 * its own:
 *
 *     mean_r = (1/d) sum_j x_rj
 *     var_r  = (1/d) sum_j (x_rj - mean_r)^2      the biased variance
 *     y_rj   = gamma_j (x_rj - mean_r) / sqrt(var_r + eps) + beta_j
 *
 * as PyTorch's nn.LayerNorm(d) does (eps 1e-5 by default, gamma 1 and
 * beta 0 when made).  With gamma 1 and beta 0 every row of y has mean 0
 * and variance var_r / (var_r + eps), just under 1: the features of each
 * position are put on one common scale whatever scale they came in.
 *
 * The variance is computed in two passes (the mean first, then the
 * squares of the deviations from it), not as E[x^2] - E[x]^2, which
 * cancels catastrophically when the mean is large next to the spread.
 *
 * Errors (GSL status and one message, nothing allocated): gamma or beta
 * not of shape (d,) for x's last size d (GSL_EBADLEN), eps negative or not
 * finite (GSL_EINVAL), GSL_ENOMEM.
 *
 * Ownership: layernorm_init allocates gamma and beta inside the struct you
 * pass; layernorm_free releases them.  y is a new tensor you tensor_free.
 */
#ifndef MHA_LAYERNORM_H
#define MHA_LAYERNORM_H

#include <stddef.h>

#include "tensor/tensor.h"

/* nn.LayerNorm's default eps. */
#define LAYERNORM_EPS 1e-5

typedef struct layernorm {
    size_t d;      /* normalised_shape: the size of the last axis */
    double eps;    /* added to the variance before the square root */
    tensor *gamma; /* (d,), starts at 1 */
    tensor *beta;  /* (d,), starts at 0 */
} layernorm;

/* gamma = 1, beta = 0, the given eps (LAYERNORM_EPS for PyTorch's).
 * GSL_EINVAL for d = 0 or a bad eps; GSL_ENOMEM. */
int layernorm_init(layernorm *ln, size_t d, double eps);
void layernorm_free(layernorm *ln);

/* y = layer norm of x with the struct's gamma, beta and eps. */
int layernorm_forward(const layernorm *ln, const tensor *x, tensor **y);

/* The same as a function (F.layer_norm): gamma and beta may be NULL. */
int layernorm_apply(const tensor *x, const tensor *gamma, const tensor *beta,
                    double eps, tensor **y);

#endif
//<
