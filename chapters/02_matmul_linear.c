/* Chapter 02: matrix products with GSL BLAS, and the Linear layer.
 *
 * Every learned step of attention is a Linear layer, y = x W^T + b, and
 * every Linear layer is one matrix product.  This chapter does one by hand,
 * then lets GSL's BLAS (gsl_blas_dgemm) do it, then builds the layer that
 * takes a whole batch of sequences in a single dgemm call.
 *
 * Shapes:
 *   x  (B, L, D_in)        B sequences of L positions, D_in features each
 *   W  (D_out, D_in)       PyTorch's layout: one row per output feature
 *   b  (D_out,)
 *   y  (B, L, D_out)
 */
#include <gsl/gsl_blas.h>

#include "lesson.h"

/* Print a GSL matrix with `decimals` digits, one row per line. */
static void print_matrix(const char *name, const gsl_matrix *m, int decimals)
{
    printf("%s =\n", name);
    for (size_t i = 0; i < m->size1; i++) {
        printf("  [");
        for (size_t j = 0; j < m->size2; j++)
            printf("%s%*.*f", j ? ", " : "", decimals + 5, decimals,
                   gsl_matrix_get(m, i, j));
        printf("]\n");
    }
}

int main(void)
{
    mha_program_init();

    section("1. One matrix product, by hand and by dgemm");
    double a_data[] = {1, 2, 3,
                       4, 5, 6};   // a is (2, 3)
    double b_data[] = {7, 8,
                       9, 10,
                       11, 12};    // b is (3, 2)
    double c_data[4] = {0};        // c is (2, 2)
    gsl_matrix_view a = gsl_matrix_view_array(a_data, 2, 3);
    gsl_matrix_view b = gsl_matrix_view_array(b_data, 3, 2);
    gsl_matrix_view c = gsl_matrix_view_array(c_data, 2, 2);
    print_matrix("a", &a.matrix, 0);
    print_matrix("b", &b.matrix, 0);
    printf("\nc[i, j] is row i of a times column j of b:\n"
           "c[0, 0] = 1*7 + 2*9 + 3*11   = %g\n"
           "c[1, 1] = 4*8 + 5*10 + 6*12  = %g\n\n",
           1.0 * 7 + 2 * 9 + 3 * 11, 4.0 * 8 + 5 * 10 + 6 * 12);
    printf("gsl_blas_dgemm computes c = alpha a b + beta c in one call.\n"
           "gsl_matrix_view_array wraps our plain arrays: no copy.\n\n");
    CHECK(gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &a.matrix,
                         &b.matrix, 0.0, &c.matrix));
    print_matrix("c = a b", &c.matrix, 0);

    section("2. Transposes are free");
    printf("A Linear layer stores W as (D_out, D_in) and needs x W^T.\n"
           "dgemm reads W as transposed when told CblasTrans: nothing is\n"
           "copied, it just walks W by columns instead of rows.\n\n");
    double w_data[] = {1, 0, -1,
                       2, 1, 0};   // w is (D_out = 2, D_in = 3)
    double x_data[] = {1, 2, 3};   // x is (1, D_in = 3)
    double y_data[2] = {0};        // y is (1, D_out = 2)
    gsl_matrix_view w = gsl_matrix_view_array(w_data, 2, 3);
    gsl_matrix_view xv = gsl_matrix_view_array(x_data, 1, 3);
    gsl_matrix_view yv = gsl_matrix_view_array(y_data, 1, 2);
    CHECK(gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &xv.matrix,
                         &w.matrix, 0.0, &yv.matrix));
    print_matrix("W", &w.matrix, 0);
    print_matrix("x", &xv.matrix, 0);
    print_matrix("x W^T", &yv.matrix, 0);
    printf("check: 1*1 + 2*0 + 3*(-1) = -2 and 1*2 + 2*1 + 3*0 = 4\n");

    section("3. The Linear layer over (B, L, D_in)");
    printf("x has B = 2 sequences of L = 3 positions with D_in = 4\n"
           "features.  The layer does not care about B and L: it sees\n"
           "B*L = 6 rows of 4 features, one (6, 4) matrix on x's own\n"
           "memory, and makes one dgemm with the (5, 4) weight.\n\n");
    gsl_rng *rng = mha_rng_new(2);
    if (!rng)
        return 1;
    linear layer;
    CHECK(linear_init(&layer, "W", 4, 5, 1));
    snprintf(layer.out_name, sizeof layer.out_name, "D_out");
    linear_reset_pytorch(&layer, rng);
    printf("W, drawn from U(-1/sqrt(D_in), 1/sqrt(D_in)) with seed 2:\n");
    tensor_print(stdout, layer.weight, 4);
    printf("b:\n");
    tensor_print(stdout, layer.bias, 4);

    tensor *x, *y, *y_naive;
    CHECK(tensor_alloc(SHAPE(2, 3, 4), &x)); // x is (B, L, D_in)
    CHECK(tensor_set_names(x, "B, L, D_in"));
    tensor_fill_arange(x, -1.0, 0.125);
    printf("x, the numbers -1, -0.875, ... in order:\n");
    tensor_print(stdout, x, 4);
    printf("\n");
    trace_to(stdout);
    CHECK(linear_forward(&layer, x, &y)); // y is (B, L, D_out)
    trace_to(NULL);
    printf("\ny = x W^T + b:\n");
    tensor_print(stdout, y, 4);

    printf("\nThe same sums with three plain loops (the reference the tests\n"
           "hold the fast path to):\n");
    CHECK(linear_forward_naive(&layer, x, &y_naive));
    double worst = 0;
    for (size_t i = 0; i < tensor_numel(y); i++) {
        double d = y->data[i] - y_naive->data[i];
        worst = d > worst ? d : (-d > worst ? -d : worst);
    }
    printf("largest |dgemm - loops| below 1e-13: %s\n", yes_no(worst < 1e-13));

    section("4. What it costs");
    printf("Each of the B*L*D_out outputs is a D_in-term dot product: one\n"
           "multiply and one add per term, so 2*B*L*D_in*D_out = %d\n"
           "floating-point operations here.  In multi-head attention\n"
           "with B = 8, L = 512, D = 512, each projection is %.1f GFLOP:\n"
           "this is why the layer must be one big dgemm, not loops.\n",
           2 * 2 * 3 * 4 * 5, 2.0 * 8 * 512 * 512 * 512 / 1e9);

    tensor_free(x);
    tensor_free(y);
    tensor_free(y_naive);
    linear_free(&layer);
    gsl_rng_free(rng);
    return 0;
}
