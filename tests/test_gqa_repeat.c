//> 17
/* test_gqa_repeat.c: src/nn/gqa.c, the weights of a grouped module repeated
 * for a multi-head one; the mapping itself is an exercise
 * (test_exercises.c).  The grouped module is test_gqa.c's. */
#include "check.h"

/* h = 4 heads of p = 2 rows over G = 2 key-value heads, d_in = 3: row
 * block i of the result is block i / 2 of w, read through any strides. */
Test(gqa_repeat, repeat_copies_each_block_to_its_group)
{
    tensor *wt, *view, *out;
    // w is (G*p, d_in) = (4, 3) holding 0..11; view it through a transpose
    OK(tensor_alloc(SHAPE(3, 4), &wt));
    for (size_t r = 0; r < 4; r++)
        for (size_t c = 0; c < 3; c++)
            *TENSOR_AT(wt, c, r) = (double)(r * 3 + c);
    OK(tensor_permute(wt, SHAPE(1, 0), &view));
    OK(gqa_repeat_kv_weight(view, 4, 2, &out));
    assert_shape(out, SHAPE(8, 3));
    // out rows: w rows 0 1 0 1 2 3 2 3
    size_t src[8] = {0, 1, 0, 1, 2, 3, 2, 3};
    for (size_t r = 0; r < 8; r++)
        for (size_t c = 0; c < 3; c++)
            cr_assert_eq(*TENSOR_AT(out, r, c), (double)(src[r] * 3 + c),
                         "row %zu col %zu", r, c);
    tensor_free(out);
    // G = h: a plain copy; G = 1: the one block four times
    OK(gqa_repeat_kv_weight(view, 2, 0, &out));
    for (size_t r = 0; r < 4; r++)
        cr_assert_eq(*TENSOR_AT(out, r, 2), (double)(r * 3 + 2));
    tensor_free(out);
    OK(gqa_repeat_kv_weight(view, 3, 1, &out));
    cr_assert_eq(out->shape[0], 12);
    for (size_t r = 0; r < 12; r++)
        cr_assert_eq(*TENSOR_AT(out, r, 0), (double)((r % 4) * 3));
    FREE_ALL(out, view, wt);
}

Test(gqa_repeat, repeat_refuses_rows_that_do_not_split)
{
    tensor *w, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(6, 2), &w));
    FAILS(gqa_repeat_kv_weight(w, 8, 4, &out), GSL_EINVAL,
          "gqa_repeat_kv_weight: weight shape (6, 2), expected (G*p, d_in) "
          "with G = 4 key-value heads");
    cr_assert_null(out);
    FAILS(gqa_repeat_kv_weight(w, 4, 3, &out), GSL_EINVAL,
          "gqa_repeat_kv_weight: gqa_kv_head: num_heads 4 is not divisible "
          "by kv_heads 3");
    cr_assert_null(out);
    tensor_free(w);
}
//<
