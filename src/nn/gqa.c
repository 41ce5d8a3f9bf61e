//> 17
/* gqa.c: which key-value head a query head reads; see gqa.h.
 *
 * Shapes: w (G*p, d_in) -> (h*p, d_in), p the head size. */
#include "nn/gqa.h"

#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* Heads are grouped in order: with h = 8 and G = 2, heads 0-3 read
 * key-value head 0 and heads 4-7 key-value head 1.
 * What the tests check (ex_gqa_kv_head):
 * - *kv for every head: consecutive heads share a group, h/G of them,
 *   the first group reading key-value head 0, the next 1 ... (h = 12,
 *   G = 3: heads 0-3 read 0, 4-7 read 1, 8-11 read 2), not head i
 *   reading head i mod G; kv_heads = num_heads gives each head its own,
 *   kv_heads 1 gives all head 0;
 * - kv_heads 0 means num_heads (plain multi-head: *kv = head);
 * - kv_heads that does not divide num_heads, num_heads 0, or head >=
 *   num_heads: GSL_EINVAL and a message that starts with "gqa_kv_head"
 *   and names the numbers refused.
 * The handout blanks this body:
 * @exercise gqa_kv_head (chapter 17): the key-value head a query head reads. */
int gqa_kv_head(size_t head, size_t num_heads, size_t kv_heads, size_t *kv)
{
    size_t groups = kv_heads ? kv_heads : num_heads;
    if (num_heads == 0 || num_heads % groups != 0)
        return mha_fail(GSL_EINVAL,
                        "gqa_kv_head: num_heads %zu is not divisible by "
                        "kv_heads %zu",
                        num_heads, groups);
    if (head >= num_heads)
        return mha_fail(GSL_EINVAL,
                        "gqa_kv_head: head %zu is out of range for %zu heads",
                        head, num_heads);
    // each group holds num_heads / groups query heads, in order
    size_t per_group = num_heads / groups;
    *kv = head / per_group;
    return GSL_SUCCESS;
}

int gqa_repeat_kv_weight(const tensor *w, size_t num_heads, size_t kv_heads,
                         tensor **out)
{
    *out = NULL;
    size_t groups = kv_heads ? kv_heads : num_heads;
    char ws[TRACE_SHAPE_MAX];
    tensor_shape_str(w, ws, sizeof ws);
    if (w->ndim != 2 || groups == 0 || w->shape[0] % groups != 0)
        return mha_fail(GSL_EINVAL,
                        "gqa_repeat_kv_weight: weight shape %s, expected "
                        "(G*p, d_in) with G = %zu key-value heads",
                        ws, groups);
    size_t p = w->shape[0] / groups, d_in = w->shape[1];
    tensor *y;
    int status = tensor_alloc(SHAPE(num_heads * p, d_in), &y);
    if (status)
        return mha_fail_in(status, "gqa_repeat_kv_weight");
    // block i of y (rows i*p ..) is block kv of w, row by row (w may be a view)
    for (size_t i = 0; i < num_heads; i++) {
        size_t kv = 0;
        status = gqa_kv_head(i, num_heads, groups, &kv);
        if (status) {
            tensor_free(y);
            return mha_fail_in(status, "gqa_repeat_kv_weight");
        }
        for (size_t r = 0; r < p; r++)
            for (size_t c = 0; c < d_in; c++)
                y->data[(i * p + r) * d_in + c] =
                    *TENSOR_AT(w, kv * p + r, c);
    }
    tensor_trace_step(TRACE_COPY, w, y, "repeat_interleave(%zu, dim=0) of %zu head "
               "blocks", num_heads / groups, groups);
    *out = y;
    return GSL_SUCCESS;
}
//<
