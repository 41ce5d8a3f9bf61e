/* test_matrices.c: tensors read as GSL matrices (src/tensor/matrices.h):
 * in place when their layout allows it, through one traced copy when not,
 * each matrix's numbers where the tensor has them. */
#include "check.h"

#include <gsl/gsl_matrix.h>

/* Element (a, b, r, c) of m as a naive index into x would find it. */
static double at(const tensor_matrices *m, size_t a, size_t b, size_t r,
                 size_t c)
{
    gsl_matrix_const_view v = TENSOR_MATRIX(*m, a, b);
    return gsl_matrix_get(&v.matrix, r, c);
}

/* m's layout: count[0] x count[1] matrices of rows x cols, each row tda
 * numbers from the next. */
static void assert_layout(const tensor_matrices *m, size_t count0,
                          size_t count1, size_t rows, size_t cols, size_t tda)
{
    cr_assert_eq(m->count[0], count0);
    cr_assert_eq(m->count[1], count1);
    cr_assert_eq(m->rows, rows);
    cr_assert_eq(m->cols, cols);
    cr_assert_eq(m->tda, tda);
}

/* A contiguous 3-D input is read in place; a permuted one whose last
 * axis is strided is copied once, and the trace says so. */
Test(matrices, three_dims_in_place_or_copied_once)
{
    tensor *x = arange(SHAPE(2, 3, 4)), *p = NULL;
    tensor_matrices m;
    OK(tensor_as_matrices(x, "keys", &m));
    cr_assert_null(m.packed);
    cr_assert_eq(m.data, x->data);
    assert_layout(&m, 2, 1, 3, 4, 4);
    cr_assert_eq(m.step[0], 12);
    cr_assert_eq(at(&m, 1, 0, 2, 3), 23.0);

    OK(tensor_permute(x, SHAPE(0, 2, 1), &p)); /* (2, 4, 3), strides 12, 1, 4 */
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(tensor_as_matrices(p, "keys", &m));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
                     "# keys (2, 4, 3) have strides (12, 1, 4), not "
                     "row-major per example: one contiguous copy for dgemm\n"
                     "contiguous()             copy  (2, 4, 3) -> (2, 4, 3)\n");
    capture_free(&c);
    cr_assert_not_null(m.packed);
    assert_layout(&m, 2, 1, 4, 3, 3);
    for (size_t b = 0; b < 2; b++)
        for (size_t r = 0; r < 4; r++)
            for (size_t k = 0; k < 3; k++)
                cr_assert_eq(at(&m, b, 0, r, k), *TENSOR_AT(p, b, r, k));
    tensor_matrices_free(&m);
    cr_assert_null(m.packed);
    /* no name: the copy, without the note */
    capture_start(&c);
    trace_to(c.f);
    OK(tensor_as_matrices(p, NULL, &m));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
                     "contiguous()             copy  (2, 4, 3) -> (2, 4, 3)\n");
    capture_free(&c);
    tensor_matrices_free(&m);
    FREE_ALL(x, p);
}

/* Four dimensions: a batch of batches, (h, B) or (B, h), read through
 * both strides in place (a permuted view whose rows stay unit-stepped);
 * two dimensions: one matrix, a narrowed one through its row stride. */
Test(matrices, four_and_two_dims)
{
    /* x (B, L, h*d) with h = 2, d = 2 */
    tensor *x = arange(SHAPE(2, 3, 4)), *s = NULL, *hm = NULL, *w = NULL;
    tensor *n = NULL;
    OK(tensor_reshape(x, SIZES(2, 3, 2, 2), NULL, &s));
    OK(tensor_permute(s, SHAPE(2, 0, 1, 3), &hm)); /* (h, B, L, d) */
    tensor_matrices m;
    OK(tensor_matrices_in_place(hm, &m));
    assert_layout(&m, 2, 2, 3, 2, 4);
    for (size_t i = 0; i < 2; i++)
        for (size_t b = 0; b < 2; b++)
            for (size_t l = 0; l < 3; l++)
                for (size_t k = 0; k < 2; k++)
                    cr_assert_eq(at(&m, i, b, l, k), *TENSOR_AT(hm, i, b, l, k));
    /* written through: the tensor sees it */
    gsl_matrix_view o = TENSOR_MATRIX_OUT(m, 1, 0);
    gsl_matrix_set(&o.matrix, 2, 1, -7.0);
    cr_assert_eq(*TENSOR_AT(hm, 1, 0, 2, 1), -7.0);
    cr_assert_eq(*TENSOR_AT(x, 0, 2, 3), -7.0);
    /* rows r0 .. r0 + n - 1 of one matrix */
    gsl_matrix_const_view r = TENSOR_MATRIX_ROWS(m, 0, 1, 1, 2);
    cr_assert_eq(r.matrix.size1, 2);
    cr_assert_eq(gsl_matrix_get(&r.matrix, 1, 0), *TENSOR_AT(hm, 0, 1, 2, 0));

    w = arange(SHAPE(5, 3));
    OK(tensor_narrow(w, 0, 1, 3, &n)); /* rows 1 .. 3, still 3 apart */
    OK(tensor_as_matrices(n, NULL, &m));
    cr_assert_null(m.packed);
    cr_assert_eq(m.count[0] * m.count[1], 1);
    cr_assert_eq(m.tda, 3);
    cr_assert_eq(at(&m, 0, 0, 2, 1), 10.0);
    FREE_ALL(n, w, hm, s, x);
}

/* What cannot be read in place is refused where the caller writes
 * through the view; a tensor of 1 or 5+ dimensions is no batch of
 * matrices. */
Test(matrices, refusals)
{
    tensor *x = NULL, *t = NULL, *v = NULL;
    OK(tensor_alloc(SHAPE(2, 3), &x));
    OK(tensor_permute(x, SHAPE(1, 0), &t)); /* (3, 2), strides 1, 3 */
    tensor_matrices m;
    FAILS(tensor_matrices_in_place(t, &m), GSL_EINVAL,
          "tensor_matrices_in_place: (3, 2) with strides 3 apart in its rows "
          "cannot be read by GSL in place");
    OK(tensor_view(x, SIZES(6), NULL, &v));
    FAILS(tensor_as_matrices(v, NULL, &m), GSL_EINVAL,
          "tensor_as_matrices: a tensor of 1 dimensions (6,) cannot be read "
          "as matrices (2 to 4 dimensions)");
    cr_assert_null(m.packed);
    FREE_ALL(v, t, x);
}

/* The Linear layer's reading: every leading dimension a row.  Leading
 * dimensions that step evenly are read in place (a narrowed batch); a
 * transposed one is copied. */
Test(matrices, rows_in_place_when_evenly_spaced)
{
    tensor *x = arange(SHAPE(4, 2, 3)), *n = NULL, *t = NULL;
    OK(tensor_narrow(x, 0, 1, 2, &n)); /* (2, 2, 3): rows 6 .. 17 */
    tensor_matrices m;
    OK(tensor_as_rows(n, &m));
    cr_assert_null(m.packed);
    assert_layout(&m, 1, 1, 4, 3, 3);
    cr_assert_eq(at(&m, 0, 0, 3, 2), 17.0);
    OK(tensor_permute(x, SHAPE(1, 0, 2), &t)); /* (2, 4, 3): uneven */
    OK(tensor_as_rows(t, &m));
    cr_assert_not_null(m.packed);
    cr_assert_eq(m.rows, 8);
    cr_assert_eq(at(&m, 0, 0, 1, 0), *TENSOR_AT(t, 0, 1, 0));
    cr_assert_eq(at(&m, 0, 0, 4, 0), *TENSOR_AT(t, 1, 0, 0));
    tensor_matrices_free(&m);
    FREE_ALL(t, n, x);
}
