/* Chapter 06: splitting heads, transpose_qkv and transpose_output.
 *
 * h heads could be h separate attention modules, each with its own small
 * projections.  d2l computes all of them at once instead: one big
 * projection to d_model = h * p features, then a reshuffle that makes the
 * h heads of each example look like h extra examples of the batch.  That
 * reshuffle is transpose_qkv; transpose_output undoes it.
 *
 * Shapes: B batch, n positions, d_model features, h heads, p = d_model/h.
 *   transpose_qkv     (B, n, d_model) -> (B, n, h, p) -> (B, h, n, p)
 *                                     -> (B*h, n, p)
 *   transpose_output  (B*h, n, p) -> (B, h, n, p) -> (B, n, h, p)
 *                                 -> (B, n, d_model)
 */
#include "lesson.h"

/* Print one head's (n, p) block from the (B*h, n, p) result. */
static void show_head(const tensor *heads, size_t row, size_t h)
{
    printf("  row %2zu = example %zu, head %zu:", row, row / h, row % h);
    for (size_t i = 0; i < heads->shape[1]; i++) {
        printf("  [");
        for (size_t j = 0; j < heads->shape[2]; j++)
            printf("%s%2.0f", j ? ", " : "", *TENSOR_AT(heads, row, i, j));
        printf("]");
    }
    printf("\n");
}

int main(void)
{
    mha_program_init();

    section("1. The seeds' example: (1, 2, 16) into 8 heads");
    printf("X holds one sequence (B = 1) of n = 2 positions with\n"
           "d_model = 16 features, the numbers 0..31.  With h = 8 heads\n"
           "each head gets p = 16/8 = 2 features of every position.\n\n");
    tensor *x;
    CHECK(tensor_alloc(SHAPE(1, 2, 16), &x)); // x is (B, n, d_model)
    CHECK(tensor_set_names(x, "B, n, d_model"));
    tensor_fill_arange(x, 0, 1);
    tensor_print(stdout, x, 0);
    printf("\n");
    trace_to(stdout);
    tensor *heads;
    CHECK(transpose_qkv(x, 8, &heads)); // heads is (B*h, n, p)
    trace_to(NULL);

    section("2. Where each number goes");
    printf("Row b*h + i of the result is head i of example b: the\n"
           "features i*p .. i*p + p - 1 of every position of example b.\n\n");
    for (size_t r = 0; r < heads->shape[0]; r++)
        show_head(heads, r, 8);
    printf("\nIn general x[b, i, j] lands at [b*h + j/p, i, j %% p].\n"
           "For example x[0, 1, 5] = %.0f is feature 5 = 2*2 + 1 of\n"
           "position 1, so it goes to head 5/2 = 2, slot 5 %% 2 = 1:\n"
           "heads[2, 1, 1] = %.0f\n",
           *TENSOR_AT(x, 0, 1, 5), *TENSOR_AT(heads, 2, 1, 1));

    section("3. Which steps copy");
    printf("Above, every step was a view: with B = 1 even the last reshape\n"
           "can walk the permuted memory with one stride per axis.  With\n"
           "B = 2 (the numbers 0..63) the last reshape has to copy, because\n"
           "no single stride steps through both the heads (stride p = 2)\n"
           "and the examples (stride n*d_model = 32):\n\n");
    tensor *x2, *heads2;
    CHECK(tensor_alloc(SHAPE(2, 2, 16), &x2)); // x2 is (B, n, d_model)
    CHECK(tensor_set_names(x2, "B, n, d_model"));
    tensor_fill_arange(x2, 0, 1);
    trace_to(stdout);
    CHECK(transpose_qkv(x2, 8, &heads2)); // heads2 is (B*h, n, p)
    trace_to(NULL);
    printf("\n");
    show_head(heads2, 0, 8);
    show_head(heads2, 7, 8);
    show_head(heads2, 8, 8);
    show_head(heads2, 15, 8);
    printf("\nThe copy moves B*n*d_model = 64 doubles.  That is cheap next\n"
           "to the projections around it (2*B*n*d_model^2 flops each), but\n"
           "it is still memory traffic a fast implementation avoids by\n"
           "reading each head through a strided view instead.\n");

    section("4. And back: transpose_output");
    printf("After attention each head's output is (n, p) again, stacked\n"
           "as (B*h, n, p).  transpose_output runs the steps backwards and\n"
           "puts the heads of each position side by side:\n\n");
    tensor *back;
    trace_to(stdout);
    CHECK(transpose_output(heads2, 8, &back)); // back is (B, n, d_model)
    trace_to(NULL);
    double worst = 0;
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 16; j++) {
                double d = *TENSOR_AT(back, b, i, j) - *TENSOR_AT(x2, b, i, j);
                worst = d > worst ? d : (-d > worst ? -d : worst);
            }
    printf("\ntranspose_output(transpose_qkv(X)) equals X exactly: %s\n",
           yes_no(worst == 0));

    section("5. When d_model does not divide into h heads");
    printf("Each head needs the same number of features, so h must divide\n"
           "d_model.  Asking for 3 heads of 16 features:\n\n");
    tensor *bad;
    int status = transpose_qkv(x, 3, &bad);
    printf("status %d: %s\n", status, mha_last_error());

    tensor_free(x);
    tensor_free(heads);
    tensor_free(x2);
    tensor_free(heads2);
    tensor_free(back);
    return 0;
}
