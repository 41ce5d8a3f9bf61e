//> 02
/* matrices.h: a tensor read as GSL matrices, for the batched products
 * BLAS computes.
 *
 * GSL's matrix views want unit steps along a row and rows at least a row
 * apart (their tda).  A tensor of 2 to 4 dimensions is read as a batch of
 * matrices of its last two sizes: one matrix for 2 dimensions, B for 3,
 * h x B (or B x h) for 4, matrix (a, b) starting at data + a*step[0] +
 * b*step[1].  Read in place when its layout allows it; otherwise (a
 * permuted view) one contiguous copy is read instead, made once and
 * traced as the copy it is.  Every batched product of the library reads
 * its tensors through these functions.
 */
#ifndef MHA_TENSOR_MATRICES_H
#define MHA_TENSOR_MATRICES_H

#include <gsl/gsl_blas.h>
#include <gsl/gsl_matrix.h>

#include "tensor/tensor.h"

typedef struct tensor_matrices {
    double *data;    /* matrix (0, 0) */
    size_t count[2]; /* matrices along each batch dimension (1: none) */
    size_t step[2];  /* doubles from one matrix to the next along each */
    size_t rows, cols, tda;
    tensor *packed; /* the contiguous copy read instead of x, or NULL */
} tensor_matrices;

/* x (2 to 4 dimensions) as a batch of (rows, cols) matrices, in place or
 * through one copy.  what, when not NULL, names x in a trace note saying
 * why it was copied ("queries %T have strides ..."). */
int tensor_as_matrices(const tensor *x, const char *what, tensor_matrices *m);

/* The same, never copying: GSL_EINVAL with a message when x's layout
 * cannot be read in place (an output the caller writes through m). */
int tensor_matrices_in_place(const tensor *x, tensor_matrices *m);

/* x as one (numel / cols, cols) matrix, its leading dimensions counted as
 * rows, as the Linear layer reads its input: in place when they step
 * through memory evenly, as one dimension would; else one copy. */
int tensor_as_rows(const tensor *x, tensor_matrices *m);

//> 04
/* The batched product c_i = alpha op(a_i) op(b_i), matrix by matrix over
 * a's batch (b and c have the same counts), c written in place (from
 * tensor_matrices_in_place, or an output read through it).  A failure of
 * BLAS is reported as "who: gsl_blas_dgemm failed (reason)". */
int tensor_matrices_dgemm(const char *who, CBLAS_TRANSPOSE_t ta,
                          const tensor_matrices *a, CBLAS_TRANSPOSE_t tb,
                          const tensor_matrices *b, double alpha,
                          const tensor_matrices *c);

/* c = a @ b, or a @ b^T with transpose_b, for each of a's matrices: a
 * (B, m, k) and b (B, k, n) or (B, n, k) give c (B, m, n), new and
 * contiguous, its names a's first two and b's free one; the trace shows
 * the step as label ("Q K^T").  The sizes are the caller's to check. */
int tensor_bmm(const tensor *a, const tensor *b, int transpose_b,
               const char *label, tensor **out);
//<

/* Frees the copy, if any (m itself is the caller's). */
void tensor_matrices_free(tensor_matrices *m);

/* Matrix (a, b) of m, its data, and rows r0 .. r0 + n - 1 of it, as GSL
 * views (macros: GSL's view types are const qualified, so a function
 * returning one draws a warning). */
#define TENSOR_MATRIX_DATA(m, a, b) \
    ((m).data + (a) * (m).step[0] + (b) * (m).step[1])
#define TENSOR_MATRIX(m, a, b)                                                \
    gsl_matrix_const_view_array_with_tda(TENSOR_MATRIX_DATA(m, a, b),         \
                                         (m).rows, (m).cols, (m).tda)
#define TENSOR_MATRIX_ROWS(m, a, b, r0, n)                                    \
    gsl_matrix_const_view_array_with_tda(                                     \
        TENSOR_MATRIX_DATA(m, a, b) + (r0) * (m).tda, (n), (m).cols, (m).tda)
/* A view to write through (m from tensor_matrices_in_place). */
#define TENSOR_MATRIX_OUT(m, a, b)                                            \
    gsl_matrix_view_array_with_tda(TENSOR_MATRIX_DATA(m, a, b), (m).rows,     \
                                   (m).cols, (m).tda)

#endif
//<
