//> 06
/* heads.c: a module's projections split into heads and joined again
 * (transpose_qkv, transpose_output), the lesson's names for the split
 * shapes, and valid_lens for every head; see multihead.h. */
#include "nn/multihead.h"

#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* The first la characters of a, then sep and b when sep is not 0 ("B*h",
 * "d_model/h"), into buf (TENSOR_NAME_MAX); "" when a part is missing
 * or the name would not fit. */
static void name_of(char *buf, const char *a, size_t la, char sep,
                    const char *b)
{
    size_t lb = sep ? strlen(b) : 0;
    buf[0] = '\0';
    if (la == 0 || (sep && lb == 0) || la + lb + 2 > TENSOR_NAME_MAX)
        return;
    memcpy(buf, a, la);
    buf[la] = sep;
    memcpy(buf + la + (sep != 0), b, lb);
    buf[la + (sep != 0) + lb] = '\0';
}

void multihead_head_names(const tensor *x, int from_rows, multihead_names *nm)
{
    memset(nm, 0, sizeof *nm);
    if (x->ndim != 3 || (!x->names[0][0] && !x->names[1][0] && !x->names[2][0]))
        return;
    // the parts: batch B, positions n, heads h, features F = h*p, p = F/h
    char B[TENSOR_NAME_MAX], h[TENSOR_NAME_MAX] = "h", F[TENSOR_NAME_MAX];
    char p[TENSOR_NAME_MAX], Bh[TENSOR_NAME_MAX];
    const char *n = x->names[1];
    if (from_rows) { // (B*h, n, p): the last factor of B*h is h
        const char *Bh_in = x->names[0], *star = strrchr(Bh_in, '*');
        name_of(B, Bh_in, star ? (size_t)(star - Bh_in) : 0, 0, "");
        if (star)
            name_of(h, star + 1, strlen(star + 1), 0, "");
        name_of(p, x->names[2], strlen(x->names[2]), 0, "");
        size_t lp = strlen(p), lh = strlen(h);
        if (lp > lh + 1 && p[lp - lh - 1] == '/' && !strcmp(p + lp - lh, h))
            name_of(F, p, lp - lh - 1, 0, ""); // d_model of d_model/h
        else
            name_of(F, h, strlen(h), '*', p);
    } else { // (B, n, F): F = G*p names its heads, any other F/h
        name_of(B, x->names[0], strlen(x->names[0]), 0, "");
        name_of(F, x->names[2], strlen(x->names[2]), 0, "");
        size_t lead = strcspn(F, "*/");
        if (F[lead] == '*' && lead > 0) {
            name_of(h, F, lead, 0, "");
            name_of(p, F + lead + 1, strlen(F + lead + 1), 0, "");
        } else {
            name_of(p, F, strlen(F), '/', "h");
        }
    }
    name_of(Bh, B, strlen(B), '*', h);
    snprintf(nm->joined, sizeof nm->joined, "%s, %s, %s", B, n, F);
    snprintf(nm->split, sizeof nm->split, "%s, %s, %s, %s", B, n, h, p);
    snprintf(nm->heads, sizeof nm->heads, "%s, %s, %s, %s", B, h, n, p);
    snprintf(nm->rows, sizeof nm->rows, "%s, %s, %s", Bh, n, p);
}

int multihead_check_heads(const char *who, const tensor *x, const char *dims,
                          const char *heads_name, size_t num_heads,
                          size_t axis, const char *size_name)
{
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "%s: input shape %s has %zu dimensions, expected 3 "
                        "(%s)",
                        who, xs, x->ndim, dims);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL, "%s: %s is 0 (input %s)", who, heads_name,
                        xs);
    size_t size = x->shape[axis];
    if (size % num_heads == 0)
        return GSL_SUCCESS;
    if (size_name)
        return mha_fail(GSL_EBADLEN,
                        "%s: %s %zu is not divisible by %s %zu (input shape "
                        "%s)",
                        who, size_name, size, heads_name, num_heads, xs);
    return mha_fail(GSL_EBADLEN,
                    "%s: %s %zu of shape %s is not divisible by %s %zu", who,
                    axis == 0 ? "first dimension" : "last size", size, xs,
                    heads_name, num_heads);
}

/* (B, n, d_model) -> (B, n, h, p) -> (B, h, n, p) -> (B*h, n, p), with
 * p = d_model/h: head i of example b becomes batch row b*h + i.  The first
 * two steps are views; the last is a view only when B, h or n is 1, and a
 * copy otherwise.
 * What the tests check (ex_transpose_qkv):
 * - *out is (B*h, n, p) and x[b, i, j] lands at [b*h + j/p, i, j % p]
 *   (a straight reshape to (B*h, n, p) does not: chapter 06, section 3);
 *   with one head it is x itself, reshaped;
 * - d_model not divisible by num_heads: GSL_EBADLEN; num_heads 0, or an
 *   x that is not 3-D: GSL_EINVAL; each with *out NULL and a message that
 *   starts with "transpose_qkv" and names the sizes refused (d_model and
 *   num_heads; num_heads 0; the shape of x);
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
int transpose_qkv(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    int status = multihead_check_heads("transpose_qkv", x, "B, n, d_model",
                                       "num_heads", num_heads, 2, "d_model");
    if (status)
        return status;
    size_t batch = x->shape[0], n = x->shape[1], d_model = x->shape[2];
    size_t p = d_model / num_heads;

    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "transpose_qkv(h=%zu)",
                num_heads);
    multihead_names nm;
    multihead_head_names(x, 0, &nm);
    tensor *split = NULL, *heads = NULL;
    // split is (B, n, h, p): a view, each row cut into h pieces of p
    status = tensor_reshape(x, DIMS((long)batch, (long)n, (long)num_heads, -1),
                            nm.split, &split);
    // heads is (B, h, n, p): a view, the head axis moved before n
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &heads);
    // out is (B*h, n, p): a copy unless B, h or n is 1 (then a view)
    if (!status)
        status = tensor_reshape(heads, DIMS(-1, (long)n, (long)p), nm.rows, out);
    trace_end();
    tensor_free(split);
    tensor_free(heads);
    return status;
}

/* The inverse of transpose_qkv: (B*h, n, p) -> (B, h, n, p) ->
 * (B, n, h, p) -> (B, n, h*p), so the h heads of each position sit side by
 * side again, head i in features i*p .. i*p + p - 1.
 * What the tests check (ex_transpose_output):
 * - *out is (B, n, h*p) and x[b*h + k, i, j] lands at [b, i, k*p + j];
 * - a first dimension not divisible by num_heads: GSL_EBADLEN; num_heads
 *   0, or an x that is not 3-D: GSL_EINVAL; each with *out NULL and a
 *   message that starts with "transpose_output" and names the sizes
 *   refused (the first dimension and num_heads; num_heads 0; the number
 *   of dimensions);
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_output (chapter 06): the heads side by side again. */
int transpose_output(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    int status = multihead_check_heads("transpose_output", x, "B*h, n, p",
                                       "num_heads", num_heads, 0, NULL);
    if (status)
        return status;
    size_t n = x->shape[1], p = x->shape[2];

    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "transpose_output(h=%zu)",
                num_heads);
    multihead_names nm;
    multihead_head_names(x, 1, &nm);
    tensor *split = NULL, *rows = NULL;
    // split is (B, h, n, p): a view, "B*h" taken apart again
    status = tensor_reshape(x, DIMS(-1, (long)num_heads, (long)n, (long)p),
                            nm.heads, &split);
    // rows is (B, n, h, p): a view, heads back next to their features
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &rows);
    // out is (B, n, h*p): the heads of each position side by side, a copy
    // unless h, n or p is 1 (chapter 01's table)
    if (!status)
        status = tensor_reshape(rows, DIMS((long)rows->shape[0], (long)n, -1),
                                nm.joined, out);
    trace_end();
    tensor_free(split);
    tensor_free(rows);
    return status;
}

//> 07
/* Row b*h + i of the output is row b of valid_lens: transpose_qkv put
 * head i of example b at batch row b*h + i, and that head must see the
 * keys of example b.
 * What the tests check (ex_repeat_valid_lens):
 * - (B,) gives (B*h,) and (B, Lq) gives (B*h, Lq), row b*h + i a copy of
 *   row b: [3, 2] with h = 3 is [3, 3, 3, 2, 2, 2], not tile's
 *   [3, 2, 3, 2, 3, 2] (chapter 07, section 2);
 * - a meta valid_lens (shapes only, no numbers: mha trace) gives a meta
 *   *out of the repeated shape;
 * - num_heads 0, or a valid_lens that is neither (B,) nor (B, Lq):
 *   GSL_EINVAL, *out NULL, a message that starts with "repeat_valid_lens"
 *   and names num_heads 0 or the number of dimensions;
 * - a failed allocation returns its status (GSL_ENOMEM) with *out NULL.
 * The handout blanks this body:
 * @exercise repeat_valid_lens (chapter 07): valid_lens for every head. */
int repeat_valid_lens(const tensor *valid_lens, size_t num_heads,
                      tensor **out)
{
    *out = NULL;
    char vs[TRACE_SHAPE_MAX];
    tensor_shape_str(valid_lens, vs, sizeof vs);
    if (valid_lens->ndim != 1 && valid_lens->ndim != 2)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: valid_lens shape %s has %zu "
                        "dimensions, expected (B,) or (B, Lq)",
                        vs, valid_lens->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: num_heads is 0 (valid_lens %s)", vs);
    size_t batch = valid_lens->shape[0];
    size_t row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;
    size_t shape[2] = {0, valid_lens->shape[1]};
    if (mha_mul_size(batch, num_heads, &shape[0], "repeat_valid_lens"))
        return GSL_EOVRFLW;
    int meta = tensor_is_meta(valid_lens);
    int status = meta ? tensor_alloc_meta(valid_lens->ndim, shape, out)
                      : tensor_alloc(valid_lens->ndim, shape, out);
    if (status)
        return status;
    // out[b*h + i] = valid_lens[b] for every head i: repeat_interleave
    for (size_t b = 0; b < (meta ? 0 : batch); b++)
        for (size_t i = 0; i < num_heads; i++)
            for (size_t j = 0; j < row; j++)
                (*out)->data[(b * num_heads + i) * row + j] =
                    *TENSOR_AT(valid_lens, b, j);
    if (valid_lens->names[0][0]) {
        snprintf((*out)->names[0], TENSOR_NAME_MAX, "%.*s*h", TENSOR_NAME_MAX - 3,
                 valid_lens->names[0]);
        if (valid_lens->ndim == 2)
            memcpy((*out)->names[1], valid_lens->names[1], TENSOR_NAME_MAX);
    }
    tensor_trace_step(TRACE_COPY, valid_lens, *out, "repeat_interleave(%zu)",
               num_heads);
    return GSL_SUCCESS;
}

//<
//<
