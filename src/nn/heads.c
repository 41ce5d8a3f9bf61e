//> 06
/* heads.c: a module's projections split into heads and joined again
 * (transpose_qkv, transpose_output), and valid_lens for every head; see
 * multihead.h. */
#include "nn/multihead.h"

#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* (B, n, d_model) -> (B, n, h, p) -> (B, h, n, p) -> (B*h, n, p), with
 * p = d_model/h: head i of example b becomes batch row b*h + i.
 * What the tests check (ex_transpose_qkv):
 * - *out is (B*h, n, p), head k of example b (features k*p .. k*p + p - 1
 *   of each of its positions) in batch row b*h + k, every number where
 *   d2l's example puts it (a straight reshape to (B*h, n, p) does not:
 *   chapter 06, section 3); with one head it is x itself, reshaped;
 * - d_model not divisible by h: the reshape to (B, n, h, p) refuses,
 *   GSL_EBADLEN, naming the shapes; 0 heads: GSL_EINVAL; each with *out
 *   NULL (that x is 3-D is the caller's: the module of chapter 08 checks
 *   it at its door);
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
int transpose_qkv(const tensor *x, size_t h, tensor **out)
{
    SCOPE(x, "transpose_qkv(h=%zu)", h);
    size_t B = x->shape[0], n = x->shape[1];
    tensor *split = NULL, *heads = NULL;
    int status = GSL_SUCCESS;
    *out = NULL;
    STEP(tensor_reshape(x, DIMS(B, n, h, -1), &split));    // (B, n, h, p): a view
    size_t p = split->shape[3];
    STEP(tensor_permute(split, AXES(0, 2, 1, 3), &heads)); // (B, h, n, p): a view
    STEP(tensor_reshape(heads, DIMS(-1, n, p), out));      // (B*h, n, p): a copy unless B, h or n is 1
done:
    TENSORS_FREE(split, heads);
    return status;
}

/* The inverse of transpose_qkv: (B*h, n, p) -> (B, h, n, p) ->
 * (B, n, h, p) -> (B, n, h*p), so the h heads of each position sit side by
 * side again, head i in features i*p .. i*p + p - 1.
 * What the tests check (ex_transpose_output):
 * - *out is (B, n, h*p), batch row b*h + k (head k of example b) back in
 *   features k*p .. k*p + p - 1 of example b, every number in its place;
 * - a first dimension not divisible by h: the reshape to (B, h, n, p)
 *   refuses, GSL_EBADLEN, naming the shapes; 0 heads, or an x that is
 *   not 3-D (its missing third size reads 0): the reshape refuses,
 *   GSL_EINVAL; each with *out NULL;
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_output (chapter 06): the heads side by side again. */
int transpose_output(const tensor *x, size_t h, tensor **out)
{
    SCOPE(x, "transpose_output(h=%zu)", h);
    size_t n = x->shape[1], p = x->shape[2];
    tensor *split = NULL, *rows = NULL;
    int status = GSL_SUCCESS;
    *out = NULL;
    STEP(tensor_reshape(x, DIMS(-1, h, n, p), &split));   // (B, h, n, p): a view
    size_t B = split->shape[0];
    STEP(tensor_permute(split, AXES(0, 2, 1, 3), &rows)); // (B, n, h, p): a view
    STEP(tensor_reshape(rows, DIMS(B, n, -1), out));      // (B, n, h*p): a copy unless h, n or p is 1
done:
    TENSORS_FREE(split, rows);
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
