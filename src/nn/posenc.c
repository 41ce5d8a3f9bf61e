//> 15
/* posenc.c: the sinusoidal table and rotary embeddings; see posenc.h.
 *
 * Shapes: P (L, d); x and out (B, L, n*p), n heads of p features, the
 * row at l being position start + l; theta (p/2,) one frequency per pair. */
#include "nn/posenc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* P[i, 2j] = sin(i w_j), P[i, 2j + 1] = cos(i w_j), w_j = 10000^(-2j/d)
 * (RoPE's frequency of pair j for a head of d, rope_theta): d2l's table,
 * row i for position i.  An odd d ends on a lone sine. */
int posenc_sinusoid(size_t L, size_t d, tensor **out)
{
    *out = NULL;
    if (L == 0 || d == 0)
        return mha_fail(GSL_EINVAL,
                        "posenc_sinusoid: L %zu and d %zu must both be >= 1",
                        L, d);
    int status = tensor_alloc(SHAPE(L, d), out);
    if (status)
        return mha_fail_in(status, "posenc_sinusoid");
    tensor_set_names(*out, NAMES(L, d));
    for (size_t j = 0; 2 * j < d; j++) {
        double w = rope_theta(j, d, ROPE_DEFAULT_BASE);
        for (size_t i = 0; i < L; i++) {
            double *p_i = (*out)->data + i * d;
            p_i[2 * j] = sin((double)i * w);
            if (2 * j + 1 < d)
                p_i[2 * j + 1] = cos((double)i * w);
        }
    }
    tensor_trace_step(TRACE_NEW, *out, *out, "sinusoidal P(L=%zu, d=%zu)", L, d);
    return GSL_SUCCESS;
}

/* x must have 3 dimensions, named dims in the message; its shape into
 * xs, for the messages of the checks that follow. */
static int check_3d(const char *who, const tensor *x, const char *dims,
                    char xs[TRACE_SHAPE_MAX])
{
    tensor_shape_str(x, xs, TRACE_SHAPE_MAX);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "%s: x has shape %s, expected 3 dimensions (%s)", who,
                        xs, dims);
    return GSL_SUCCESS;
}

int posenc_add(const tensor *x, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    int status = check_3d("posenc_add", x, "B, L, d", xs);
    if (status)
        return status;
    size_t B = x->shape[0], L = x->shape[1], d = x->shape[2];
    tensor *P = NULL; // (L, d)
    {
        QUIET; // the table is part of this one step
        STEP(posenc_sinusoid(L, d, &P));
    }
    STEP(tensor_alloc(SHAPE(B, L, d), out));
    memcpy((*out)->names, x->names, sizeof x->names);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < d; j++)
                *TENSOR_AT(*out, b, i, j) =
                    *TENSOR_AT(x, b, i, j) + P->data[i * d + j];
    tensor_trace_emit(TRACE_NEW, TRACE_SUM, *out,
               TRACE_INPUTS(TRACE_IN(x), TRACE_NAMED(P, "P")),
               "X + P (sinusoidal)");
done:
    tensor_free(P);
    if (status)
        return mha_fail_in(status, "posenc_add");
    return GSL_SUCCESS;
}

/* (y0, y1) is (x0, x1) turned counterclockwise by angle radians, about
 * the origin, from the first feature towards the second.  What the tests
 * check (ex_rope_rotate_pair): the turned pair, to 1e-15, for quarter and
 * half turns (pi/2 takes (1, 0) to (0, 1); turned the other way it gives
 * (0, -1)), no turn, negative angles and large ones (a far position),
 * the length of the pair kept; the status is GSL_SUCCESS.
 * The handout blanks this body:
 * @exercise rope_rotate_pair (chapter 15): turn one pair of features. */
int rope_rotate_pair(double x0, double x1, double angle, double *y0,
                     double *y1)
{
    double c = cos(angle), s = sin(angle);
    *y0 = x0 * c - x1 * s;
    *y1 = x0 * s + x1 * c;
    return GSL_SUCCESS;
}

double rope_theta(size_t k, size_t p, double base)
{
    return pow(base, -(double)(2 * k) / (double)p);
}

/* rope_apply (sign +1) and its inverse (sign -1). */
static int rotate(const char *who, const tensor *x, size_t p, long start,
                  double base, double sign, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    int status = check_3d(who, x, "B, L, n*p", xs);
    if (status)
        return status;
    char bs[TRACE_NUMBER_MAX];
    if (!(isfinite(base) && base > 1))
        return mha_fail(GSL_EINVAL,
                        "%s: base %s must be a finite number > 1 (x %s)", who,
                        trace_number_str(bs, sizeof bs, base), xs);
    size_t B = x->shape[0], L = x->shape[1], D = x->shape[2];
    if (p == 0 || p % 2 != 0 || D % p != 0)
        return mha_fail(GSL_EBADLEN,
                        "%s: head size %zu must be even, at least 2 and "
                        "divide the last dimension %zu of x %s",
                        who, p, D, xs);
    RECORD(x, out, "rope%s(p=%zu, pos %ld..%ld)", sign < 0 ? " inverse" : "",
           p, start, start + (long)L - (L > 0));
/*< handout
    status = tensor_alloc(SHAPE(B, L, D), out);
*/
//> handout
    int meta = tensor_is_meta(x); // shapes alone (mha trace)
    status = meta ? tensor_alloc_meta(SHAPE(B, L, D), out)
                  : tensor_alloc(SHAPE(B, L, D), out);
//<
    if (status)
        return mha_fail_in(status, "%s", who);
    memcpy((*out)->names, x->names, sizeof x->names);
/*< handout
    double *theta = mha_malloc(p / 2, sizeof *theta, who);
    if (!theta) {
*/
//> handout
    double *theta = meta ? NULL : mha_malloc(p / 2, sizeof *theta, who);
    if (!meta && !theta) {
//<
        tensor_free(*out);
        *out = NULL;
        return GSL_ENOMEM;
    }
/*< handout
    for (size_t k = 0; k < p / 2; k++)
*/
//> handout
    for (size_t k = 0; !meta && k < p / 2; k++)
//<
        theta[k] = rope_theta(k, p, base);
    // row (b, l) is position start + l; pair k of each head turns by
    // (start + l) * theta_k, the same angle in every head
/*< handout
    for (size_t b = 0; b < B && !status; b++)
*/
//> handout
    for (size_t b = 0; !meta && b < B && !status; b++)
//<
        for (size_t l = 0; l < L && !status; l++) {
            double pos = (double)start + (double)l;
            const double *x_bl = TENSOR_AT(x, b, l, 0);
            double *o_bl = TENSOR_AT(*out, b, l, 0);
            size_t s = x->strides[2];
            for (size_t j = 0; j < D && !status; j += 2) {
                size_t k = (j % p) / 2;
                status = rope_rotate_pair(x_bl[j * s], x_bl[(j + 1) * s],
                                          sign * pos * theta[k], &o_bl[j],
                                          &o_bl[j + 1]);
            }
        }
    free(theta);
    if (status) {
        tensor_free(*out);
        *out = NULL;
        return mha_fail_in(status, "%s", who);
    }
    return GSL_SUCCESS;
}

int rope_apply(const tensor *x, size_t head_size, long start, double base,
               tensor **out)
{
    return rotate("rope_apply", x, head_size, start, base, 1.0, out);
}

int rope_apply_inverse(const tensor *x, size_t head_size, long start,
                       double base, tensor **out)
{
    return rotate("rope_apply_inverse", x, head_size, start, base, -1.0, out);
}
//<
