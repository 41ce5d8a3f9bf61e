//> 08
/* finite.c: tensors checked for NaN and infinities; see tensor.h. */
#include "tensor/tensor.h"

#include <float.h>
#include <math.h>
#include <stdio.h>

#include "base/error.h"
#include "tensor/rowops.h"
#include "trace/trace.h"

/* The index of the first of x[0 .. n-1] that is NaN or infinite, or n.
 * Blocks are tested with vector code (rowops_all_finite); only a block
 * holding a bad number is searched one by one.  A plain isfinite loop
 * with an early exit cannot be vectorised, and its passes over a
 * forward's inputs and projections showed in profiles. */
static size_t first_nonfinite_flat(const double *x, size_t n)
{
    for (size_t c = 0; c < n; c += 4096) {
        size_t m = n - c < 4096 ? n - c : 4096;
        if (rowops_all_finite(x + c, m))
            continue;
        for (size_t k = 0; k < m; k++)
            if (!isfinite(x[c + k]))
                return c + k;
    }
    return n;
}

/* The first element of t that is NaN or infinite, in row-major order:
 * 1 with its index in idx and its value in *bad, else 0. */
static int first_nonfinite(const tensor *t, size_t *idx, double *bad)
{
    size_t n = tensor_is_meta(t) ? 0 : tensor_numel(t);
    for (size_t d = 0; d < TENSOR_MAX_DIMS; d++)
        idx[d] = 0;
    if (tensor_is_contiguous(t)) {
        size_t k = first_nonfinite_flat(t->data, n);
        if (k == n)
            return 0;
        *bad = t->data[k];
        for (size_t d = t->ndim; d-- > 0;) { // k in row-major digits
            idx[d] = k % t->shape[d];
            k /= t->shape[d];
        }
        return 1;
    }
    for (size_t k = 0; k < n; k++) {
        double v = *tensor_at(t, idx);
        if (!isfinite(v)) {
            *bad = v;
            return 1;
        }
        for (size_t d = t->ndim; d-- > 0;) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* "[0, 2, 5]" for the index idx of t. */
static const char *index_str(const tensor *t, const size_t *idx, char *at,
                             size_t n)
{
    size_t used = 0;
    at[0] = '\0';
    for (size_t d = 0; d < t->ndim && used < n; d++)
        used += (size_t)snprintf(at + used, n - used, "%s%zu", d ? ", " : "[",
                                 idx[d]);
    if (used < n)
        snprintf(at + used, n - used, "]");
    return at;
}

static const char *value_str(double v)
{
    return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

int tensor_check_finite(const tensor *t, const char *who, const char *what)
{
    size_t idx[TENSOR_MAX_DIMS];
    double v;
    if (!first_nonfinite(t, idx, &v))
        return GSL_SUCCESS;
    char at[TRACE_SHAPE_MAX], s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_EDOM, "%s: %s%s = %s; %s must be finite (%s %s)", who,
                    what, index_str(t, idx, at, sizeof at), value_str(v), what,
                    what, tensor_shape_str(t, s, sizeof s));
}

int tensor_check_result(const tensor *t, const char *who, const char *stage,
                        const char *what)
{
    size_t idx[TENSOR_MAX_DIMS];
    double v;
    if (!first_nonfinite(t, idx, &v))
        return GSL_SUCCESS;
    char at[TRACE_SHAPE_MAX], s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_ERANGE,
                    "%s: the %s overflowed: %s%s = %s from finite inputs "
                    "(%s %s)",
                    who, stage, what, index_str(t, idx, at, sizeof at),
                    value_str(v), what, tensor_shape_str(t, s, sizeof s));
}
//<
