/* test_exercises.c: the tests of the coding exercises.
 *
 * Each suite ex_NAME checks one library function marked "@exercise NAME"
 * in src/, whose body `make handout` blanks for students.  A suite calls
 * only its own exercise (and no other exercise function), so a student's
 * `make grade` says exactly which exercises pass.  The expected values
 * come from index arithmetic written here, not from the library. */
#include "check.h"

/* --- ex_causal_valid_lens (chapter 03) ------------------------------- */

Test(ex_causal_valid_lens, rows_count_up_to_len)
{
    tensor *lens;
    OK(causal_valid_lens(3, 5, &lens));
    cr_assert_eq(lens->ndim, 2);
    cr_assert_eq(lens->shape[0], 3);
    cr_assert_eq(lens->shape[1], 5);
    for (size_t b = 0; b < 3; b++)
        for (size_t i = 0; i < 5; i++)
            cr_assert_eq(*TENSOR_AT(lens, b, i), (double)(i + 1), "[%zu, %zu]", b, i);
    tensor_free(lens);
}

Test(ex_causal_valid_lens, refuses_zero_sizes)
{
    tensor *lens;
    cr_assert_neq(causal_valid_lens(0, 5, &lens), GSL_SUCCESS);
    cr_assert_neq(causal_valid_lens(2, 0, &lens), GSL_SUCCESS);
}

/* --- ex_linear_forward_naive (chapter 02) ---------------------------- */

Test(ex_linear_forward_naive, matches_hand_computed_values)
{
    linear l;
    OK(linear_init(&l, "W", 3, 2, 1));
    double w[] = {1, 0, -1, 2, 1, 0}, b[] = {0.5, -1};
    memcpy(l.weight->data, w, sizeof w);
    memcpy(l.bias->data, b, sizeof b);
    tensor *x, *y;
    OK(tensor_from_array(SHAPE(2, 1, 3), (double[]){1, 2, 3, -1, 0, 4}, &x));
    OK(linear_forward_naive(&l, x, &y));
    cr_assert_eq(y->ndim, 3);
    cr_assert_eq(y->shape[2], 2);
    /* [1, 2, 3] -> [1 - 3 + 0.5, 2 + 2 - 1]; [-1, 0, 4] -> [-1 - 4 + 0.5, -2 - 1] */
    double want[] = {-1.5, 3, -4.5, -3};
    for (size_t i = 0; i < 4; i++)
        cr_assert_float_eq(y->data[i], want[i], 1e-15, "element %zu", i);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

Test(ex_linear_forward_naive, refuses_a_feature_mismatch)
{
    linear l;
    OK(linear_init(&l, "W", 3, 2, 0));
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 4), &x));
    cr_assert_neq(linear_forward_naive(&l, x, &y), GSL_SUCCESS);
    tensor_free(x);
    linear_free(&l);
}

/* --- ex_transpose_qkv (chapter 06) ----------------------------------- */

Test(ex_transpose_qkv, every_number_lands_where_it_should)
{
    const size_t B = 2, n = 3, d = 8, h = 4, p = d / h;
    tensor *x, *heads;
    OK(tensor_alloc(SHAPE(B, n, d), &x));
    tensor_fill_arange(x, 0, 1);
    OK(transpose_qkv(x, h, &heads));
    cr_assert_eq(heads->ndim, 3);
    cr_assert_eq(heads->shape[0], B * h);
    cr_assert_eq(heads->shape[1], n);
    cr_assert_eq(heads->shape[2], p);
    /* x[b, i, j] = (b*n + i)*d + j lands at [b*h + j/p, i, j % p] */
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                cr_assert_eq(*TENSOR_AT(heads, b * h + j / p, i, j % p),
                             (double)((b * n + i) * d + j));
    tensor_free(x);
    tensor_free(heads);
}

Test(ex_transpose_qkv, refuses_heads_that_do_not_divide)
{
    tensor *x, *heads;
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    cr_assert_neq(transpose_qkv(x, 3, &heads), GSL_SUCCESS);
    tensor_free(x);
}

/* --- ex_transpose_output (chapter 06) -------------------------------- */

Test(ex_transpose_output, heads_go_back_side_by_side)
{
    const size_t B = 2, n = 3, h = 4, p = 2;
    tensor *heads, *joined;
    OK(tensor_alloc(SHAPE(B * h, n, p), &heads));
    tensor_fill_arange(heads, 0, 1);
    OK(transpose_output(heads, h, &joined));
    cr_assert_eq(joined->ndim, 3);
    cr_assert_eq(joined->shape[0], B);
    cr_assert_eq(joined->shape[1], n);
    cr_assert_eq(joined->shape[2], h * p);
    /* heads[r, i, j] = (r*n + i)*p + j, row r = b*h + head, goes to
     * joined[b, i, head*p + j] */
    for (size_t r = 0; r < B * h; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < p; j++)
                cr_assert_eq(*TENSOR_AT(joined, r / h, i, (r % h) * p + j),
                             (double)((r * n + i) * p + j));
    tensor_free(heads);
    tensor_free(joined);
}

Test(ex_transpose_output, refuses_a_batch_that_does_not_divide)
{
    tensor *heads, *joined;
    OK(tensor_alloc(SHAPE(6, 2, 2), &heads));
    cr_assert_neq(transpose_output(heads, 4, &joined), GSL_SUCCESS);
    tensor_free(heads);
}

/* --- ex_repeat_valid_lens (chapter 07) ------------------------------- */

Test(ex_repeat_valid_lens, one_length_per_example)
{
    tensor *lens, *out;
    OK(tensor_from_array(SHAPE(3), (double[]){4, 1, 2}, &lens));
    OK(repeat_valid_lens(lens, 2, &out));
    cr_assert_eq(out->ndim, 1);
    cr_assert_eq(out->shape[0], 6);
    double want[] = {4, 4, 1, 1, 2, 2}; /* not 4, 1, 2, 4, 1, 2 */
    for (size_t i = 0; i < 6; i++)
        cr_assert_eq(out->data[i], want[i], "row %zu", i);
    tensor_free(lens);
    tensor_free(out);
}

Test(ex_repeat_valid_lens, one_length_per_query)
{
    tensor *lens, *out;
    OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    OK(repeat_valid_lens(lens, 3, &out));
    cr_assert_eq(out->ndim, 2);
    cr_assert_eq(out->shape[0], 6);
    cr_assert_eq(out->shape[1], 2);
    for (size_t r = 0; r < 6; r++) {
        cr_assert_eq(*TENSOR_AT(out, r, 0), r < 3 ? 1.0 : 2.0, "row %zu", r);
        cr_assert_eq(*TENSOR_AT(out, r, 1), r < 3 ? 3.0 : 4.0, "row %zu", r);
    }
    tensor_free(lens);
    tensor_free(out);
}
