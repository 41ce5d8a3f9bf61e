//> 19
/* window.c: sliding windows, ALiBi and sinks; see window.h.
 *
 * Shapes: qh (B*h, Lq, p), kh and vh (B*G, Lk, p), weights (B*h, Lq, Lk),
 * heads (B*h, Lq, p).
 */
#include "nn/window.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"

/* --- ALiBi's slopes ------------------------------------------------- */

/* BLOOM's get_slopes, one head at a time.
 * What the tests check (ex_alibi_slope), each slope to 1e-15 of the
 * paper's code's:
 * - n a power of two: the geometric slopes of n heads (n = 8: 1/2, 1/4
 *   ... 1/256; n = 1: 1/256; n = 16: 2^-0.5, 2^-1 ... 2^-8);
 * - otherwise the P slopes of P = the largest power of two below n come
 *   first, then every other slope of 2P heads, from the first: n = 12
 *   ends with 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5; n = 3, 6 and 20 too;
 * - n = 0 or head >= n: GSL_EINVAL, *m left alone, and a message that
 *   starts with "alibi_slope" and names the numbers refused.
 * The handout blanks this body:
 * @exercise alibi_slope (chapter 19): ALiBi's slope of one head. */
int alibi_slope(size_t n, size_t head, double *m)
{
    if (head >= n)
        return mha_fail(GSL_EINVAL,
                        "alibi_slope: head %zu is out of range for %zu heads",
                        head, n);
    size_t P = 1; // the largest power of two <= n
    while (P * 2 <= n)
        P *= 2;
    if (head < P) { // the slopes of P heads: 2^(-8/P), its square ...
        *m = pow(2.0, -8.0 * (double)(head + 1) / (double)P);
        return GSL_SUCCESS;
    }
    // the rest: every other slope of 2P heads, k = 0, 2, 4 ...
    size_t k = 2 * (head - P);
    *m = pow(2.0, -8.0 * (double)(k + 1) / (double)(2 * P));
    return GSL_SUCCESS;
}

int alibi_slopes(size_t n, tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_LIST, 0, NULL, out, "alibi_slopes(%zu)", n);
    *out = NULL;
    if (n == 0)
        return mha_fail(GSL_EINVAL, "alibi_slopes: n is 0 (one slope per head)");
    size_t h = n; // out is (h,): one slope per head
    int status = GSL_SUCCESS;
    STEP(tensor_alloc(SHAPE(h), out));
    for (size_t k = 0; k < h; k++)
        STEP(alibi_slope(h, k, (*out)->data + k));
    tensor_set_names(*out, NAMES(h));
done:
    if (status) {
        tensor_free(*out);
        *out = NULL;
    }
    return status;
}

/* --- which keys a row sees ------------------------------------------ */

int window_sees(const window_rule *r, long qpos, long kpos)
{
    if (r->causal && kpos > qpos)
        return 0; // the future
    if (r->window && kpos <= qpos - (long)r->window && kpos >= (long)r->keep)
        return 0; // out of the window, and not one of the first kept
    return 1;
}

double window_softmax_row(const window_rule *r, size_t head, const double *s,
                          size_t n, double scale, long qpos,
                          const long *kpos, size_t len, double *out,
                          double *row_max)
{
    double slope = r->slopes ? r->slopes[head] : 0.0;
    double M = r->sinks ? r->sinks[head] : -INFINITY;
    // pass 1: a_j for the visible keys (-inf marks the others), and M
    for (size_t j = 0; j < n; j++) {
        long kp = kpos ? kpos[j] : (long)j;
        if (j >= len || !window_sees(r, qpos, kp)) {
            out[j] = -INFINITY;
            continue;
        }
        out[j] = scale * s[j] - slope * (double)(qpos - kp);
        M = out[j] > M ? out[j] : M;
    }
    // pass 2: exp(a_j - M), exactly 0.0 for a hidden key; the sink's term
    double sum = r->sinks ? exp(r->sinks[head] - M) : 0.0;
    for (size_t j = 0; j < n; j++) {
        out[j] = out[j] == -INFINITY ? 0.0 : exp(out[j] - M);
        sum += out[j];
    }
    if (row_max)
        *row_max = M;
    return sum;
}

/* --- step 4 under the rule ------------------------------------------ */

/* x as a contiguous tensor: x itself (*copy NULL) or a copy in *copy. */
static int contiguous(const tensor *x, const tensor **c, tensor **copy)
{
    *copy = NULL;
    *c = x;
    if (tensor_is_contiguous(x))
        return GSL_SUCCESS;
    QUIET;
    int status = tensor_contiguous(x, copy);
    *c = *copy;
    return status;
}

static void trace_rule(const window_rule *r, const tensor *qh,
                       const tensor *kh, const tensor *vh, const tensor *lens,
                       const tensor *heads)
{
    char what[96] = "";
    if (r->window)
        snprintf(what, sizeof what, "window %zu", r->window);
    if (r->window && r->keep)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", keep %zu",
                 r->keep);
    if (!r->window && r->causal)
        snprintf(what + strlen(what), sizeof what - strlen(what), "causal");
    if (r->slopes)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", alibi");
    if (r->sinks)
        snprintf(what + strlen(what), sizeof what - strlen(what), ", sinks");
    const char *rest = what[0] ? what + (what[0] == ',' ? 2 : 0) : "none";
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, heads,
               TRACE_INPUTS(TRACE_IN(qh), TRACE_IN(kh), TRACE_IN(vh)),
               "window_attend(%s%s%T)", rest, lens ? ", lens " : "", lens);
}

int window_attend(const window_rule *r, size_t h, const tensor *qh,
                  const tensor *kh, const tensor *vh, const tensor *lens,
                  long q0, const long *kpos, tensor **weights,
                  tensor **heads)
{
    const char *who = "window_attend";
    *weights = *heads = NULL;
    size_t BH = qh->shape[0], Lq = qh->shape[1], p = qh->shape[2];
    size_t BG = kh->shape[0], Lk = kh->shape[1], pv = vh->shape[2];
    size_t B = BH / h, G = BG / B, group = h / G;
    if (tensor_is_meta(qh) || tensor_is_meta(kh)) { // shapes alone
        int status = tensor_alloc_meta(SHAPE(BH, Lq, Lk), weights);
        if (!status)
            status = tensor_alloc_meta(SHAPE(BH, Lq, pv), heads);
        if (status) {
            tensor_free(*weights);
            *weights = NULL;
            return status;
        }
        tensor_set_names(*weights, NAMES(B * h, Lq, Lk));
        memcpy((*heads)->names, qh->names, sizeof qh->names);
        trace_rule(r, qh, kh, vh, lens, *heads);
        return GSL_SUCCESS;
    }
    const tensor *q = qh, *k = kh, *v = vh;
    tensor *qc = NULL, *kc = NULL, *vc = NULL, *w = NULL, *o = NULL;
    int status = GSL_SUCCESS;
    STEP(contiguous(qh, &q, &qc));
    STEP(contiguous(kh, &k, &kc));
    STEP(contiguous(vh, &v, &vc));
    STEP(tensor_alloc(SHAPE(BH, Lq, Lk), &w));
    STEP(tensor_alloc(SHAPE(BH, Lq, pv), &o));
    double scale = 1.0 / sqrt((double)p);
    for (size_t n = 0; n < BH; n++) {
        size_t b = n / h, i = n % h, g = b * G + i / group;
        gsl_matrix_const_view q_n =
            gsl_matrix_const_view_array(q->data + n * Lq * p, Lq, p);
        gsl_matrix_const_view k_g =
            gsl_matrix_const_view_array(k->data + g * Lk * p, Lk, p);
        gsl_matrix_const_view v_g =
            gsl_matrix_const_view_array(v->data + g * Lk * pv, Lk, pv);
        gsl_matrix_view w_n = gsl_matrix_view_array(w->data + n * Lq * Lk, Lq, Lk);
        gsl_matrix_view o_n = gsl_matrix_view_array(o->data + n * Lq * pv, Lq, pv);
        // pass 1: the scores Q_n K_g^T, (Lq, Lk)
        STEP(gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &q_n.matrix,
                            &k_g.matrix, 0.0, &w_n.matrix));
        // pass 2, row by row: the visible scores finite, then the softmax
        for (size_t row = 0; row < Lq; row++) {
            double *s = w->data + (n * Lq + row) * Lk;
            size_t len = softmax_valid_len(lens, n, row, Lk);
            long qpos = q0 + (long)row;
            for (size_t j = 0; j < len; j++)
                if (!isfinite(s[j]) &&
                    window_sees(r, qpos, kpos ? kpos[j] : (long)j))
                    STEP(mha_fail(GSL_ERANGE,
                                  "%s: the scores overflowed: scores[%zu, "
                                  "%zu, %zu] = %g from finite inputs "
                                  "(scores (%zu, %zu, %zu))",
                                  who, n, row, j, s[j], BH, Lq, Lk));
            double sum = window_softmax_row(r, i, s, Lk, scale, qpos, kpos, len,
                                            s, NULL);
            for (size_t j = 0; j < Lk; j++)
                s[j] /= sum;
        }
        // pass 3: the heads, weights V_g
        STEP(gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &w_n.matrix,
                            &v_g.matrix, 0.0, &o_n.matrix));
    }
    tensor_set_names(w, NAMES(B * h, Lq, Lk));
    memcpy(o->names, qh->names, sizeof o->names);
    trace_rule(r, qh, kh, vh, lens, o);
    *weights = w;
    *heads = o;
done:
    if (status) {
        tensor_free(w);
        tensor_free(o);
    }
    tensor_free(qc);
    tensor_free(kc);
    tensor_free(vc);
    return status;
}
//<
