//> 06
/* heads.c: a module's projections split into heads and joined again
 * (transpose_qkv, transpose_output), and valid_lens for every head; see
 * multihead.h. */
#include "nn/multihead.h"

#include <limits.h>
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
 *   refuses, GSL_EBADLEN, naming the shapes; 0 heads, or an x of
 *   fewer than 3 dimensions (its missing third size reads 0): the
 *   reshape refuses, GSL_EINVAL; each with *out NULL (that x is not 4-D
 *   is the caller's: the module of chapter 08 checks it at its door);
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
int repeat_valid_lens(const tensor *valid_lens, size_t h, tensor **out)
{
    *out = NULL;
    size_t B = valid_lens->shape[0];
    if (valid_lens->ndim > 2 || h == 0 || h > LONG_MAX / B) {
        char vs[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: valid_lens %s is %zu-D, "
                        "num_heads %zu: expected a 1-D (B,) or 2-D (B, Lq) "
                        "valid_lens and num_heads from 1 to LONG_MAX / B",
                        tensor_shape_str(valid_lens, vs, sizeof vs),
                        valid_lens->ndim, h);
    }
    SCOPE(valid_lens, "repeat_interleave(%zu)", h);
    tensor *col = NULL, *wide = NULL;
    int status = GSL_SUCCESS;
    if (valid_lens->ndim == 1) {
        STEP(tensor_view(valid_lens, DIMS(B, 1), &col)); // (B, 1): a view
        STEP(tensor_expand(col, DIMS(B, h), &wide));      // (B, h): row b read h times
        STEP(tensor_reshape(wide, DIMS(B * h), out));     // (B*h,): a copy unless B or h is 1
    } else {
        size_t Lq = valid_lens->shape[1];
        STEP(tensor_view(valid_lens, DIMS(B, 1, Lq), &col)); // (B, 1, Lq)
        STEP(tensor_expand(col, DIMS(B, h, Lq), &wide));      // (B, h, Lq)
        STEP(tensor_reshape(wide, DIMS(B * h, Lq), out));     // (B*h, Lq)
    }
done:
    TENSORS_FREE(col, wide);
    return status;
}

//<
//<
