//> 02
/* matrices.c: a tensor read as GSL matrices; see matrices.h. */
#include "tensor/matrices.h"

#include <string.h>

#include <gsl/gsl_errno.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"

/* m's layout for x as it is; 1 when GSL can read it in place. */
static int layout(const tensor *x, tensor_matrices *m)
{
    size_t nd = x->ndim, batch = nd - 2;
    m->data = x->data;
    m->rows = x->shape[nd - 2];
    m->cols = x->shape[nd - 1];
    m->tda = m->rows > 1 ? x->strides[nd - 2] : m->cols;
    for (size_t d = 0; d < 2; d++) {
        m->count[d] = d < batch ? x->shape[d] : 1;
        m->step[d] = d < batch ? x->strides[d] : 0;
    }
    return (m->cols == 1 || x->strides[nd - 1] == 1) && m->tda >= m->cols;
}

static int check_dims(const char *who, const tensor *x)
{
    if (x->ndim >= 2 && x->ndim <= 4)
        return GSL_SUCCESS;
    char s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_EINVAL,
                    "%s: a tensor of %zu dimensions %s cannot be read as "
                    "matrices (2 to 4 dimensions)",
                    who, x->ndim, tensor_shape_str(x, s, sizeof s));
}

int tensor_as_matrices(const tensor *x, const char *what, tensor_matrices *m)
{
    memset(m, 0, sizeof *m);
    int status = check_dims("tensor_as_matrices", x);
    if (status || layout(x, m))
        return status;
    if (what)
        tensor_trace_note("%s %T have strides %P, not row-major per example: "
                          "one contiguous copy for dgemm",
                          what, x, x->ndim, x->strides);
    status = tensor_contiguous(x, &m->packed);
    if (status)
        return status;
    layout(m->packed, m);
    return GSL_SUCCESS;
}

int tensor_matrices_in_place(const tensor *x, tensor_matrices *m)
{
    memset(m, 0, sizeof *m);
    int status = check_dims("tensor_matrices_in_place", x);
    if (status || layout(x, m))
        return status;
    char s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_EINVAL,
                    "tensor_matrices_in_place: %s with strides %zu apart in "
                    "its rows cannot be read by GSL in place",
                    tensor_shape_str(x, s, sizeof s), x->strides[x->ndim - 1]);
}

/* Can x be read as a (rows, cols) matrix whose rows are `tda` doubles
 * apart?  True when the last dimension has unit stride and the leading
 * dimensions step through memory evenly, as one dimension would. */
static int rows_evenly_spaced(const tensor *x, size_t *tda)
{
    size_t last = x->ndim - 1;
    if (x->shape[last] != 1 && x->strides[last] != 1)
        return 0;
    size_t step = 0; /* stride of the innermost leading dim of size > 1 */
    size_t span = 0; /* what the next dim out must step to continue it */
    for (size_t d = last; d-- > 0;) {
        if (x->shape[d] == 1)
            continue;
        if (step == 0)
            step = x->strides[d];
        else if (x->strides[d] != span)
            return 0;
        span = x->strides[d] * x->shape[d];
    }
    *tda = step ? step : x->shape[last];
    return *tda >= x->shape[last];
}

int tensor_as_rows(const tensor *x, tensor_matrices *m)
{
    memset(m, 0, sizeof *m);
    m->cols = x->shape[x->ndim - 1];
    m->rows = tensor_numel(x) / m->cols;
    m->count[0] = m->count[1] = 1;
    if (!rows_evenly_spaced(x, &m->tda)) {
        int status = tensor_contiguous(x, &m->packed);
        if (status)
            return status;
        x = m->packed;
        m->tda = m->cols;
    }
    m->data = x->data;
    return GSL_SUCCESS;
}

//> full
/* One row against this many rows or more is multiplied with dgemv, which
 * reads them once, where dgemm first copies them into its packed layout:
 * at a decoding step of 1024 positions that copy was most of the step.
 * Against fewer the copy costs nothing worth saving, and the lessons'
 * small examples keep dgemm's rounding. */
#define DGEMV_ROWS 64

/* c = a b or a b^T for a of one row: dgemv, matrix by matrix. */
static int gemv_rows(const tensor_matrices *a, const tensor_matrices *b,
                     int transpose_b, const tensor_matrices *c)
{
    int status = GSL_SUCCESS;
    for (size_t i = 0; i < a->count[0] && !status; i++) {
        gsl_matrix_const_view a_i = TENSOR_MATRIX(*a, i, 0);
        gsl_matrix_const_view b_i = TENSOR_MATRIX(*b, i, 0);
        gsl_matrix_view c_i = TENSOR_MATRIX_OUT(*c, i, 0);
        gsl_vector_const_view x = gsl_matrix_const_row(&a_i.matrix, 0);
        gsl_vector_view y = gsl_matrix_row(&c_i.matrix, 0);
        status = gsl_blas_dgemv(transpose_b ? CblasNoTrans : CblasTrans, 1.0,
                                &b_i.matrix, &x.vector, 0.0, &y.vector);
    }
    if (status)
        return mha_fail(status, "tensor_bmm: gsl_blas_dgemv failed (%s)",
                        gsl_strerror(status));
    return GSL_SUCCESS;
}
//<

//> 04
int tensor_matrices_dgemm(const char *who, CBLAS_TRANSPOSE_t ta,
                          const tensor_matrices *a, CBLAS_TRANSPOSE_t tb,
                          const tensor_matrices *b, double alpha,
                          const tensor_matrices *c)
{
    int status = GSL_SUCCESS;
    for (size_t i = 0; i < a->count[0] && !status; i++)
        for (size_t j = 0; j < a->count[1] && !status; j++) {
            gsl_matrix_const_view a_ij = TENSOR_MATRIX(*a, i, j);
            gsl_matrix_const_view b_ij = TENSOR_MATRIX(*b, i, j);
            gsl_matrix_view c_ij = TENSOR_MATRIX_OUT(*c, i, j);
            status = gsl_blas_dgemm(ta, tb, alpha, &a_ij.matrix, &b_ij.matrix,
                                    0.0, &c_ij.matrix);
        }
    if (status)
        return mha_fail(status, "%s: gsl_blas_dgemm failed (%s)", who,
                        gsl_strerror(status));
    return GSL_SUCCESS;
}

/* c = a @ b, or a @ b^T with transpose_b, for each of a's matrices: a
 * (B, m, k) and b (B, k, n) or (B, n, k) give c (B, m, n), new and
 * contiguous, named after a's first two dimensions and b's free one, and
 * traced as label ("Q K^T"). */
int tensor_bmm(const tensor *a, const tensor *b, int transpose_b,
               const char *label, tensor **out)
{
    size_t n = b->shape[transpose_b ? 1 : 2];
    tensor_matrices am = {0}, bm = {0}, cm = {0};
/*< handout
    int status = tensor_alloc(SHAPE(a->shape[0], a->shape[1], n), out);
    for (size_t i = 0; i < 2 && !status; i++) {
*/
//> handout
    int meta = tensor_is_meta(a) || tensor_is_meta(b); // shapes only: mha trace
    int status = meta ? tensor_alloc_meta(SHAPE(a->shape[0], a->shape[1], n), out)
                      : tensor_alloc(SHAPE(a->shape[0], a->shape[1], n), out);
    for (size_t i = 0; i < (meta ? 0 : 2) && !status; i++) {
//<
        const tensor *x = i ? b : a;
        if (!layout(x, &cm))
            tensor_trace_note("%s reads %T with strides %P, not row-major per "
                              "example: one contiguous copy for dgemm",
                              label, x, x->ndim, x->strides);
        status = tensor_as_matrices(x, NULL, i ? &bm : &am);
    }
/*< handout
    if (!status)
*/
//> handout
    if (!status && !meta)
//<
        status = tensor_matrices_in_place(*out, &cm);
//> full
    if (!status && !meta && a->shape[1] == 1 && b->shape[1] >= DGEMV_ROWS)
        status = gemv_rows(&am, &bm, transpose_b, &cm); // a decoding step
    else
//<
/*< handout
    if (!status)
*/
//> handout
    if (!status && !meta)
//<
        status = tensor_matrices_dgemm("tensor_bmm", CblasNoTrans, &am,
                                       transpose_b ? CblasTrans : CblasNoTrans,
                                       &bm, 1.0, &cm);
    tensor_matrices_free(&am);
    tensor_matrices_free(&bm);
    if (status) {
        tensor_free(*out);
        *out = NULL;
        return status;
    }
    memcpy((*out)->names, a->names, 2 * TENSOR_NAME_MAX);
    memcpy((*out)->names[2], b->names[transpose_b ? 1 : 2], TENSOR_NAME_MAX);
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, *out,
                      TRACE_INPUTS(TRACE_IN(a), TRACE_IN_T(b, transpose_b)),
                      "%s", label);
    return GSL_SUCCESS;
}
//<

void tensor_matrices_free(tensor_matrices *m)
{
    tensor_free(m->packed);
    m->packed = NULL;
}
//<
