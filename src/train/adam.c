//> 13
/* adam.c: the Adam optimiser; see adam.h for the update.
 *
 * Shapes: params[i], grads[i], m[i] and v[i] share one shape; all are
 * contiguous, so element k of each is data[k]. */
#include "train/adam.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "trace/trace.h"

static int check_tensors(size_t n, tensor *const *params,
                         tensor *const *grads)
{
    const char *who = "adam_init";
    if (n == 0 || !params || !grads)
        return mha_fail(GSL_EINVAL, "adam_init: no parameters (n %zu)", n);
    for (size_t i = 0; i < n; i++) {
        if (!params[i] || !grads[i])
            return mha_fail(GSL_EINVAL, "%s: %s %zu is NULL", who,
                            !params[i] ? "parameter" : "gradient", i);
        char ps[TRACE_SHAPE_MAX], gs[TRACE_SHAPE_MAX];
        tensor_shape_str(params[i], ps, sizeof ps);
        tensor_shape_str(grads[i], gs, sizeof gs);
        if (!tensor_same_shape(params[i], grads[i]))
            return mha_fail(GSL_EBADLEN,
                            "%s: parameter %zu has shape %s but its gradient "
                            "%s",
                            who, i, ps, gs);
        if (!tensor_is_contiguous(params[i]) ||
            !tensor_is_contiguous(grads[i]))
            return mha_fail(GSL_EINVAL,
                            "%s: the %s of parameter %zu %s is not "
                            "contiguous",
                            who,
                            !tensor_is_contiguous(params[i]) ? "tensor"
                                                             : "gradient",
                            i, ps);
    }
    return GSL_SUCCESS;
}

int adam_init(adam *a, size_t n, tensor *const *params, tensor *const *grads,
              double lr)
{
    memset(a, 0, sizeof *a);
    int status = check_tensors(n, params, grads);
    if (status)
        return status;
    a->lr = lr;
    a->beta1 = 0.9;
    a->beta2 = 0.999;
    a->eps = 1e-8;
    a->beta1_t = a->beta2_t = 1.0;
    a->n = n;
    a->params = mha_calloc(n, sizeof *a->params, "adam_init");
    a->grads = a->params ? mha_calloc(n, sizeof *a->grads, "adam_init") : NULL;
    a->m = a->grads ? mha_calloc(n, sizeof *a->m, "adam_init") : NULL;
    a->v = a->m ? mha_calloc(n, sizeof *a->v, "adam_init") : NULL;
    status = a->v ? GSL_SUCCESS : GSL_ENOMEM;
    for (size_t i = 0; i < n && !status; i++) {
        a->params[i] = params[i];
        a->grads[i] = grads[i];
        // m[i] and v[i] have params[i]'s shape and start at 0
        status = tensor_alloc(params[i]->ndim, params[i]->shape, &a->m[i]);
        if (!status)
            status = tensor_alloc(params[i]->ndim, params[i]->shape, &a->v[i]);
    }
    if (status) {
        adam_free(a);
        return status;
    }
    return GSL_SUCCESS;
}

void adam_free(adam *a)
{
    for (size_t i = 0; a->m && i < a->n; i++)
        tensor_free(a->m[i]);
    for (size_t i = 0; a->v && i < a->n; i++)
        tensor_free(a->v[i]);
    free(a->params);
    free(a->grads);
    free(a->m);
    free(a->v);
    memset(a, 0, sizeof *a);
}

void adam_zero_grad(adam *a)
{
    for (size_t i = 0; i < a->n; i++)
        tensor_fill(a->grads[i], 0.0);
}

/* Check the settings, count the step, then update every number of every
 * parameter from its gradient and its two running means (adam.h). */
int adam_step(adam *a)
{
    if (!(a->lr > 0 && isfinite(a->lr)))
        return mha_fail(GSL_EINVAL,
                        "adam_step: learning rate %g must be positive and "
                        "finite",
                        a->lr);
    if (!(a->beta1 >= 0 && a->beta1 < 1) || !(a->beta2 >= 0 && a->beta2 < 1))
        return mha_fail(GSL_EINVAL,
                        "adam_step: beta1 %g and beta2 %g must be in [0, 1)",
                        a->beta1, a->beta2);
    if (!(a->eps > 0 && isfinite(a->eps)))
        return mha_fail(GSL_EINVAL,
                        "adam_step: eps %g must be positive and finite",
                        a->eps);
    a->steps++;
    a->beta1_t *= a->beta1;
    a->beta2_t *= a->beta2;
    double c1 = 1.0 - a->beta1_t, c2 = 1.0 - a->beta2_t;
    for (size_t i = 0; i < a->n; i++) {
        double *theta = a->params[i]->data;
        const double *g = a->grads[i]->data;
        double *m = a->m[i]->data, *v = a->v[i]->data;
        size_t count = tensor_numel(a->params[i]);
        for (size_t k = 0; k < count; k++) {
            m[k] = a->beta1 * m[k] + (1.0 - a->beta1) * g[k];
            v[k] = a->beta2 * v[k] + (1.0 - a->beta2) * g[k] * g[k];
            double m_hat = m[k] / c1, v_hat = v[k] / c2;
            theta[k] -= a->lr * m_hat / (sqrt(v_hat) + a->eps);
        }
    }
    return GSL_SUCCESS;
}
//<
