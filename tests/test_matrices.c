//> 02
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

//> 04
/* --- tensor_bmm ----------------------------------------------------- */

/* c[b, i, j] = sum_t a[b, i, t] * b[b, t, j] (or b[b, j, t]), by loops. */
static double naive_bmm(const tensor *a, const tensor *b, int transpose_b,
                        size_t e, size_t i, size_t j)
{
    double s = 0.0;
    for (size_t t = 0; t < a->shape[2]; t++)
        s += *TENSOR_AT(a, e, i, t) *
             (transpose_b ? *TENSOR_AT(b, e, j, t) : *TENSOR_AT(b, e, t, j));
    return s;
}

static void assert_bmm(const tensor *a, const tensor *b, int transpose_b,
                       const tensor *c, double tol)
{
    size_t n = b->shape[transpose_b ? 1 : 2];
    cr_assert_eq(c->ndim, 3);
    cr_assert_eq(c->shape[0], a->shape[0]);
    cr_assert_eq(c->shape[1], a->shape[1]);
    cr_assert_eq(c->shape[2], n);
    cr_assert(tensor_is_contiguous(c));
    for (size_t e = 0; e < a->shape[0]; e++)
        for (size_t i = 0; i < a->shape[1]; i++)
            for (size_t j = 0; j < n; j++)
                cr_assert_float_eq(*TENSOR_AT(c, e, i, j),
                                   naive_bmm(a, b, transpose_b, e, i, j), tol,
                                   "c[%zu, %zu, %zu]", e, i, j);
}

/* Q K^T and weights V by hand on small integers: exact; the result named
 * after its operands, and the trace line the step's own. */
Test(bmm, products_names_and_trace)
{
    tensor *q = arange(SHAPE(2, 3, 4)), *k = arange(SHAPE(2, 5, 4));
    tensor *v = arange(SHAPE(2, 5, 2)), *s = NULL, *o = NULL;
    OK(tensor_set_names(q, "B, Lq, d"));
    OK(tensor_set_names(k, "B, Lk, d"));
    OK(tensor_set_names(v, "B, Lk, dv"));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(tensor_bmm(q, k, 1, "Q K^T", &s));
    OK(tensor_bmm(s, v, 0, "weights V", &o));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
                     "Q K^T                    new   (2, 3, 4) @ (2, 5, 4)^T -> "
                     "(2, 3, 5)  (B, Lq, Lk)\n"
                     "weights V                new   (2, 3, 5) @ (2, 5, 2) -> "
                     "(2, 3, 2)  (B, Lq, dv)\n");
    assert_bmm(q, k, 1, s, 0.0);
    assert_bmm(s, v, 0, o, 0.0);
    // by hand: q[1, 2] = 20..23, k[1, 4] = 36..39
    cr_assert_eq(*TENSOR_AT(s, 1, 2, 4), 20.0 * 36 + 21 * 37 + 22 * 38 + 23 * 39);
    capture_free(&c);
    FREE_ALL(q, k, v, s, o);
}

/* Sizes of 1; a permuted operand read through one copy (the trace says
 * so); one query against 64 keys or more (a decoding step's dgemv) gives
 * what dgemm gives to rounding. */
Test(bmm, edges_layouts_and_one_row)
{
    tensor *a = random_tensor(SHAPE(1, 1, 1), 1), *b = random_tensor(SHAPE(1, 1, 1), 2);
    tensor *c = NULL;
    OK(tensor_bmm(a, b, 0, "a b", &c));
    cr_assert_eq(c->data[0], a->data[0] * b->data[0]);
    tensor_free(c);

    tensor *kb = random_tensor(SHAPE(3, 6, 5), 3), *k = NULL;
    tensor *q = random_tensor(SHAPE(3, 4, 6), 4);
    OK(tensor_permute(kb, AXES(0, 2, 1), &k)); // (3, 5, 6), last axis strided
    capture cap;
    capture_start(&cap);
    trace_to(cap.f);
    OK(tensor_bmm(q, k, 1, "Q K^T", &c));
    trace_to(NULL);
    const char *text = capture_end(&cap);
    cr_assert(strstr(text, "# Q K^T reads (3, 5, 6) with strides (30, 1, 5)"),
              "%s", text);
    assert_bmm(q, k, 1, c, 1e-12);
    capture_free(&cap);
    tensor_free(c);

    // a decoding step: scores against 70 keys, then weights times values
    tensor *x = random_tensor(SHAPE(2, 1, 8), 5), *y = random_tensor(SHAPE(2, 70, 8), 6);
    tensor *w = random_tensor(SHAPE(2, 1, 70), 7), *vals = random_tensor(SHAPE(2, 70, 3), 8);
    tensor *sc = NULL, *o = NULL;
    OK(tensor_bmm(x, y, 1, "q K^T", &sc));
    OK(tensor_bmm(w, vals, 0, "w V", &o));
    assert_bmm(x, y, 1, sc, 1e-12);
    assert_bmm(w, vals, 0, o, 1e-12);
    FREE_ALL(x, y, w, vals, sc, o);
    FREE_ALL(kb, k, q, a, b);
}

/* Each allocation failing in turn (the result, a copy of a permuted
 * operand): GSL_ENOMEM, *out NULL, nothing left allocated (the sanitizer
 * and valgrind runs see the leaks). */
Test(bmm, failed_allocations)
{
    tensor *kb = random_tensor(SHAPE(2, 4, 3), 9), *k = NULL;
    tensor *q = random_tensor(SHAPE(2, 2, 4), 10), *c = NULL;
    OK(tensor_permute(kb, AXES(0, 2, 1), &k)); // (2, 3, 4): copied to read
    long failures;
    EACH_ALLOCATION_FAILS(failures, tensor_bmm(q, k, 1, "Q K^T", &c),
                          cr_assert_null(c));
    cr_assert_geq(failures, 2, "%ld allocations failed", failures);
    assert_bmm(q, k, 1, c, 1e-12);
    FREE_ALL(kb, k, q, c);
}
//<
//<
