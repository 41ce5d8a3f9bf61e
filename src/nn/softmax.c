//> 03
/* softmax.c: stable softmax and masked softmax; see softmax.h.
 *
 * Shapes: x is (..., n); scores and out are (B, Lq, Lk); valid_lens is
 * (B,) or (B, Lq).  Every output row is contiguous: out_bi = out + (b*Lq +
 * i)*Lk.  Inputs may have any strides and are read, never written.
 */
#include "nn/softmax.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* One row: o = softmax(s) over the first `valid` keys, s_j = scale * x_j,
 * and weight exactly 0 for every key after them: a masked key takes no
 * part in the maximum or the sum, whatever the scores.  valid == 0 (a row
 * that sees no key) gives every key 1/n, d2l's rule (softmax.h).  x is
 * read with stride xs (in doubles); o is a contiguous row of n doubles.
 * x is read once, in pass 1; the later passes run over o, which is still
 * in cache. */
static void softmax_row(const double *x, size_t xs, size_t n, double scale,
                        size_t valid, double *o)
{
    if (valid == 0) {
        for (size_t j = 0; j < n; j++)
            o[j] = 1.0 / (double)n;
        return;
    }
    // pass 1: the scaled scores of the keys the row sees, and their maximum
    double max = -INFINITY;
    for (size_t j = 0; j < valid; j++) {
        o[j] = scale * x[j * xs];
        if (o[j] > max)
            max = o[j];
    }
    // pass 2: exp(s_j - max) <= 1, and their sum.  The sum is compensated
    // (Neumaier): the rounding error of each addition is kept in c and
    // added back at the end, so the row sums to 1 within a few ulps
    // however many keys it has.
    double sum = 0.0, c = 0.0;
    for (size_t j = 0; j < valid; j++) {
        double e = exp(o[j] - max);
        double t = sum + e;
        c += fabs(sum) >= fabs(e) ? (sum - t) + e : (e - t) + sum;
        sum = t;
        o[j] = e;
    }
    sum += c;
    // pass 3: normalise; dividing (not multiplying by 1/sum) rounds each
    // weight correctly.  sum >= 1: the maximum contributed exp(0) = 1.
    // The masked keys get 0.
    for (size_t j = 0; j < valid; j++)
        o[j] /= sum;
    for (size_t j = valid; j < n; j++)
        o[j] = 0.0;
}

/* --- softmax over the last axis ------------------------------------- */

int softmax_lastdim(const tensor *x, tensor **out)
{
    RECORD(x, out, "softmax(dim=-1)");
    *out = NULL;
    if (!x)
        return mha_fail(GSL_EINVAL, "softmax_lastdim: x is NULL");
/*< handout
    int status = tensor_alloc(x->ndim, x->shape, out);
*/
//> handout
    int status = tensor_is_meta(x) ? tensor_alloc_meta(x->ndim, x->shape, out)
                                   : tensor_alloc(x->ndim, x->shape, out);
//<
    if (status)
        return status;
    memcpy((*out)->names, x->names, sizeof x->names);
//> handout
    if (tensor_is_meta(x))
        return GSL_SUCCESS;
//<

    // x is (rows, n) once its leading dimensions are counted as one
    size_t last = x->ndim - 1, n = x->shape[last];
    size_t rows = tensor_numel(x) / n;
    size_t idx[TENSOR_MAX_DIMS] = {0}; /* x's index of the row's start */
    for (size_t r = 0; r < rows; r++) {
        softmax_row(tensor_at(x, idx), x->strides[last], n, 1.0, n,
                    (*out)->data + r * n);
        // next row: count the leading index up, like an odometer
        for (size_t d = last; d-- > 0;) {
            if (++idx[d] < x->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return GSL_SUCCESS;
}

/* --- valid_lens ----------------------------------------------------- */

size_t softmax_valid_len(const tensor *valid_lens, size_t b, size_t i,
                         size_t num_keys)
{
    if (!valid_lens)
        return num_keys;
    return (size_t)(valid_lens->ndim == 1 ? *TENSOR_AT(valid_lens, b)
                                          : *TENSOR_AT(valid_lens, b, i));
}

softmax_lens_fault softmax_find_bad_len(const tensor *valid_lens,
                                        size_t batch, size_t num_queries,
                                        size_t num_keys, size_t min_len,
                                        size_t *b, size_t *i)
{
    *b = *i = 0;
    if (!valid_lens)
        return SOFTMAX_LENS_FINE;
    int per_example = valid_lens->ndim == 1 && valid_lens->shape[0] == batch;
    int per_query = valid_lens->ndim == 2 && valid_lens->shape[0] == batch &&
                    valid_lens->shape[1] == num_queries;
    if (!per_example && !per_query)
        return SOFTMAX_LENS_SHAPE;
//> handout
    if (tensor_is_meta(valid_lens))
        return SOFTMAX_LENS_FINE; /* shapes alone: no lengths to check */
//<
    // valid_lens is (B,) or (B, Lq): b runs over B, i over 1 or Lq
    size_t rows = per_query ? num_queries : 1;
    for (*b = 0; *b < batch; ++*b)
        for (*i = 0; *i < rows; ++*i) {
            double v = *TENSOR_AT(valid_lens, *b, *i);
            if (isnan(v) || v != floor(v))
                return SOFTMAX_LEN_NOT_WHOLE;
            if (v < 0)
                return SOFTMAX_LEN_NEGATIVE;
            if (v > (double)num_keys)
                return SOFTMAX_LEN_TOO_LARGE;
            if (v < (double)min_len)
                return SOFTMAX_LEN_TOO_SMALL;
        }
    *b = *i = 0;
    return SOFTMAX_LENS_FINE;
}

char *softmax_len_index(const tensor *valid_lens, size_t b, size_t i,
                        char *buf, size_t n)
{
    if (valid_lens->ndim == 2)
        snprintf(buf, n, "%zu, %zu", b, i);
    else
        snprintf(buf, n, "%zu", b);
    return buf;
}

int softmax_check_valid_lens(const char *who, const char *context,
                             size_t batch, size_t num_queries,
                             size_t num_keys, const tensor *valid_lens)
{
    size_t b, i;
    softmax_lens_fault fault = softmax_find_bad_len(
        valid_lens, batch, num_queries, num_keys, 0, &b, &i);
    if (!fault)
        return GSL_SUCCESS;
    char vs[TRACE_SHAPE_MAX];
    tensor_shape_str(valid_lens, vs, sizeof vs);
    if (fault == SOFTMAX_LENS_SHAPE)
        return mha_fail(GSL_EBADLEN,
                        "%s: valid_lens has shape %s, expected (%zu,) or "
                        "(%zu, %zu) (%s)",
                        who, vs, batch, batch, num_queries, context);
    char at[48], problem[48];
    if (fault == SOFTMAX_LEN_TOO_LARGE)
        snprintf(problem, sizeof problem,
                 "is larger than the number of keys %zu", num_keys);
    else
        snprintf(problem, sizeof problem, "%s",
                 fault == SOFTMAX_LEN_NEGATIVE ? "is negative"
                                               : "is not a whole number");
    char v[TRACE_NUMBER_MAX];
    return mha_fail(GSL_EINVAL,
                    "%s: valid_lens[%s] = %s %s (%s, valid_lens %s)", who,
                    softmax_len_index(valid_lens, b, i, at, sizeof at),
                    trace_number_str(v, sizeof v, *TENSOR_AT(valid_lens, b, i)),
                    problem, context, vs);
}

/* --- masked softmax ------------------------------------------------- */

/* The shapes and the lengths, before anything is computed: scores 3-D,
 * the scale finite, valid_lens as softmax_check_valid_lens asks. */
static int masked_check(const char *who, const tensor *scores, double scale,
                        const tensor *valid_lens)
{
    if (!scores)
        return mha_fail(GSL_EINVAL, "%s: scores is NULL", who);
    char ss[TRACE_SHAPE_MAX], context[TRACE_SHAPE_MAX + 16];
    tensor_shape_str(scores, ss, sizeof ss);
    if (scores->ndim != 3)
        return mha_fail(GSL_EBADLEN,
                        "%s: scores must be 3-D (B, Lq, Lk), got shape %s", who,
                        ss);
    if (!isfinite(scale))
        return mha_fail(GSL_EINVAL, "%s: scale %g is not finite (scores %s)",
                        who, scale, ss);
    size_t B = scores->shape[0], Lq = scores->shape[1], Lk = scores->shape[2];
    snprintf(context, sizeof context, "scores %s", ss);
    return softmax_check_valid_lens(who, context, B, Lq, Lk, valid_lens);
}

/* softmax_row on every (b, i) row of scores, with that row's own length:
 * valid_lens[b] when valid_lens is (B,), valid_lens[b, i] when (B, Lq). */
static int masked_rows(const tensor *scores, double scale,
                       const tensor *valid_lens, tensor **out)
{
    *out = NULL;
    size_t B = scores->shape[0], Lq = scores->shape[1], Lk = scores->shape[2];
    int status;
/*< handout
    // out is (B, Lq, Lk), contiguous
    status = tensor_alloc(3, scores->shape, out);
*/
//> handout
    // out is (B, Lq, Lk), contiguous; shapes alone when either input is
    int meta = tensor_is_meta(scores) || (valid_lens && tensor_is_meta(valid_lens));
    status = meta ? tensor_alloc_meta(3, scores->shape, out)
                  : tensor_alloc(3, scores->shape, out);
//<
    if (status)
        return status;
    memcpy((*out)->names, scores->names, sizeof scores->names);
/*< handout
    for (size_t b = 0; b < B; b++)
*/
//> handout
    for (size_t b = 0; b < (meta ? 0 : B); b++)
//<
        for (size_t i = 0; i < Lq; i++) {
            size_t valid = softmax_valid_len(valid_lens, b, i, Lk);
            const double *scores_bi =
                scores->data + b * scores->strides[0] + i * scores->strides[1];
            double *out_bi = (*out)->data + (b * Lq + i) * Lk;
            softmax_row(scores_bi, scores->strides[2], Lk, scale, valid,
                        out_bi);
        }
    return GSL_SUCCESS;
}

/* valid_lens is a side input to the trace: the op text names its shape,
 * and the dataflow (trace_write_dot) sees where it came from. */
#define MASKED_INPUTS(scores, valid_lens) \
    TRACE_INPUTS(TRACE_IN(scores), TRACE_SIDE(valid_lens, "valid_lens"))

/* Checked first: nothing is computed for a bad valid_lens. */
int masked_softmax(const tensor *scores, const tensor *valid_lens,
                   tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_LIST, MASKED_INPUTS(scores, valid_lens), out,
              "masked_softmax(%s%T)", valid_lens ? "valid_lens " : "no mask",
              valid_lens);
    *out = NULL;
    int status = masked_check("masked_softmax", scores, 1.0, valid_lens);
    return status ? status : masked_rows(scores, 1.0, valid_lens, out);
}

/* The door: checked once, then the steps. */
int masked_softmax_scaled(const tensor *scores, double scale,
                          const tensor *valid_lens, tensor **out)
{
    *out = NULL;
    int status = masked_check("masked_softmax_scaled", scores, scale,
                              valid_lens);
    return status ? status
                  : masked_softmax_steps(scores, scale, valid_lens, out);
}

/* The scale to 6 digits in the trace, to be read: the step that chose it
 * says what it is exactly ("dot_attention(scale 1/sqrt(20))"). */
int masked_softmax_steps(const tensor *scores, double scale,
                         const tensor *valid_lens, tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_LIST, MASKED_INPUTS(scores, valid_lens), out,
              "masked_softmax(scale %.6g, %s%T)", scale,
              valid_lens ? "valid_lens " : "no mask", valid_lens);
    return masked_rows(scores, scale, valid_lens, out);
}

/* --- causal masks --------------------------------------------------- */

/* Rows 1, 2, ..., len: query i sees keys 0 .. i.
 * What the tests check (ex_causal_valid_lens):
 * - *out is (batch, len) and every row is 1, 2, ..., len (query 0 sees
 *   one key, itself, not none);
 * - batch or len 0 is refused: GSL_EINVAL, *out NULL, a message that
 *   starts with "causal_valid_lens" and names both numbers;
 * - a failed allocation returns its status (GSL_ENOMEM) with *out NULL.
 * The handout blanks this body:
 * @exercise causal_valid_lens (chapter 03): the valid_lens of a causal mask. */
int causal_valid_lens(size_t batch, size_t len, tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_LIST, 0, NULL, out, "causal_valid_lens(%zu, %zu)",
              batch, len);
    *out = NULL;
    if (batch == 0 || len == 0)
        return mha_fail(GSL_EINVAL,
                        "causal_valid_lens: batch %zu and len %zu must both be "
                        ">= 1",
                        batch, len);
    // out is (B, L): row b is 1, 2, ..., L whatever b
    int status = tensor_alloc(SHAPE(batch, len), out);
    if (status)
        return status;
    for (size_t b = 0; b < batch; b++)
        for (size_t i = 0; i < len; i++)
            (*out)->data[b * len + i] = (double)(i + 1);
    return GSL_SUCCESS;
}

/* --- causal masks aligned at the end -------------------------------- */

size_t softmax_row_len(const tensor *valid_lens, int causal, size_t b,
                       size_t i, size_t num_queries, size_t num_keys)
{
    size_t len = softmax_valid_len(valid_lens, b, i, num_keys);
    if (!causal)
        return len;
    // query i is position i + Lk - Lq of the keys: it sees up to there
    if (i + num_keys < num_queries)
        return 0;
    size_t seen = i + num_keys - num_queries + 1;
    return seen < len ? seen : len;
}

int softmax_find_empty_row(const tensor *valid_lens, int causal,
                           size_t batch, size_t num_queries,
                           size_t num_keys, size_t *b, size_t *i)
{
    *b = *i = 0;
/*< handout
    if (!causal)
        return 0;
*/
//> handout
    if (!causal || (valid_lens && tensor_is_meta(valid_lens)))
        return 0;
//<
    for (*b = 0; *b < batch; ++*b)
        for (*i = 0; *i < num_queries; ++*i)
            if (softmax_row_len(valid_lens, causal, *b, *i, num_queries,
                                num_keys) == 0)
                return 1;
    *b = *i = 0;
    return 0;
}

int valid_lens_per_row(const tensor *valid_lens, int causal, size_t batch,
                       size_t num_queries, size_t num_keys, int shape_only,
                       tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_LIST,
              TRACE_INPUTS(TRACE_SIDE(valid_lens, "valid_lens")), out,
              "per-row lens(%s%T)",
              causal ? (valid_lens ? "causal, valid_lens " : "causal")
                     : "valid_lens ",
              valid_lens);
    *out = NULL;
    int status = MHA_CHECK_SIZES("valid_lens_per_row",
                                 "batch, num_queries, num_keys", batch,
                                 num_queries, num_keys);
    if (status)
        return status;
    // out is (B, Lq): row (b, i)'s length, whatever valid_lens' shape
    size_t B = batch, Lq = num_queries;
    int meta = shape_only || (valid_lens && tensor_is_meta(valid_lens));
    status = meta ? tensor_alloc_meta(SHAPE(B, Lq), out)
                  : tensor_alloc(SHAPE(B, Lq), out);
    if (status)
        return status;
    for (size_t b = 0; b < (meta ? 0 : B); b++)
        for (size_t i = 0; i < Lq; i++)
            (*out)->data[b * Lq + i] = (double)softmax_row_len(
                valid_lens, causal, b, i, Lq, num_keys);
    tensor_set_names(*out, NAMES(B, Lq));
    return GSL_SUCCESS;
}
//<
