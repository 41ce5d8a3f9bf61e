/* Chapter 01: shapes, strides and views.
 *
 * Multi-head attention is mostly bookkeeping: the same numbers are looked
 * at as (B, n, d_model), then as (B, n, h, d_model/h), then as
 * (B, h, n, d_model/h).  This chapter shows how a tensor can change shape
 * without moving a single number (a view), and when it cannot (a copy).
 *
 * Shapes, in the lesson's names:
 *   B        batch size: how many sequences at once
 *   n        sequence length: queries, or key-value pairs
 *   d_model  features per position (num_hiddens)
 *   h        number of heads; each head gets d_model/h features
 */
#include "lesson.h"

int main(void)
{
    mha_program_init();

    section("1. A tensor is a buffer, a shape and strides");
    printf("One sequence (B = 1) of n = 2 positions, d_model = 16 features\n"
           "each, holding the numbers 0..31 in order:\n\n");
    tensor *x;
    CHECK(tensor_alloc(SHAPE(1, 2, 16), &x)); // x is (B, n, d_model)
    CHECK(tensor_set_names(x, "B, n, d_model"));
    tensor_fill_arange(x, 0, 1);
    tensor_print(stdout, x, 4);
    printf("\n");
    show_layout("x", x);
    printf("\nThe strides say how far apart neighbours are in memory: the\n"
           "next feature is 1 double away, the next position 16, the next\n"
           "sequence 32.  So x[0, 1, 5] sits at 0*32 + 1*16 + 5*1 = 21:\n");
    printf("x[0, 1, 5] = %.0f\n", *TENSOR_AT(x, 0, 1, 5));

    section("2. Reshape to (B, n, h, d_model/h): a view");
    printf("Cut each 16-feature vector into h = 8 heads of 2 features.  No\n"
           "number moves: only the shape and strides change.  The trace\n"
           "prints one line per step: the operation, view or copy, the\n"
           "shapes, and the shape in the lesson's names.\n\n");
    trace_to(stdout);
    tensor *split;
    CHECK(tensor_reshape(x, DIMS(1, 2, 8, -1), "B, n, h, d_model/h", &split));
    trace_to(NULL);
    printf("\n");
    show_layout("split", split);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(split, x)));
    printf("split[0, 1, 2, 1] is head 2's second feature of position 1:\n"
           "offset 0*32 + 1*16 + 2*2 + 1*1 = 21, value %.0f\n",
           *TENSOR_AT(split, 0, 1, 2, 1));

    section("3. Permute to (B, h, n, d_model/h): a view with new strides");
    printf("Bring the head axis before the positions, so each head's\n"
           "(n, d_model/h) block can be worked on by itself.  permute only\n"
           "reorders the shape and the strides:\n\n");
    trace_to(stdout);
    tensor *heads;
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    trace_to(NULL);
    printf("\n");
    show_layout("heads", heads);
    printf("shares x's buffer: %s\n\n", yes_no(tensor_shares_buffer(heads, x)));
    tensor_print(stdout, heads, 4);
    printf("\nReading heads in order now jumps around memory: head 0 holds\n"
           "0, 1 (position 0) and 16, 17 (position 1).  The strides\n"
           "(32, 2, 16, 1) are no longer decreasing: not contiguous.\n");

    section("4. Reshape to (B*h, n, d_model/h): a view here, a copy in general");
    printf("Merging B and h into one axis needs a single stride that steps\n"
           "through both.  With B = 1 the batch axis has one index, so it\n"
           "never steps: h's stride 2 serves, and the reshape is a view.\n\n");
    trace_to(stdout);
    tensor *flat;
    CHECK(tensor_reshape(heads, DIMS(-1, 2, 2), NULL, &flat));
    trace_to(NULL);
    printf("\n");
    show_layout("flat", flat);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(flat, x)));

    printf("\nNow the same steps with B = 2 (the numbers 0..63).  Head h of\n"
           "sequence 1 starts 32 doubles after head h of sequence 0, but 8\n"
           "heads of stride 2 span only 16: no single stride reaches both,\n"
           "so the last reshape must copy the numbers into a new buffer.\n\n");
    tensor *x2, *split2, *heads2, *flat2;
    CHECK(tensor_alloc(SHAPE(2, 2, 16), &x2));
    CHECK(tensor_set_names(x2, "B, n, d_model"));
    tensor_fill_arange(x2, 0, 1);
    trace_to(stdout);
    CHECK(tensor_reshape(x2, DIMS(2, 2, 8, -1), "B, n, h, d_model/h", &split2));
    CHECK(tensor_permute(split2, SHAPE(0, 2, 1, 3), &heads2));
    CHECK(tensor_reshape(heads2, DIMS(-1, 2, 2), NULL, &flat2));
    trace_to(NULL);
    printf("\n");
    show_layout("flat2", flat2);
    printf("shares x2's buffer: %s\n",
           yes_no(tensor_shares_buffer(flat2, x2)));
    printf("flat2[8] is head 0 of sequence 1: ");
    tensor *first;
    CHECK(tensor_reshape(flat2, DIMS(16, 4), NULL, &first));
    printf("%.0f %.0f %.0f %.0f\n", *TENSOR_AT(first, 8, 0),
           *TENSOR_AT(first, 8, 1), *TENSOR_AT(first, 8, 2),
           *TENSOR_AT(first, 8, 3));

    section("5. Writing through a view, and contiguous()");
    printf("A view is the same memory, so writing through it changes the\n"
           "original.  Set heads[0, 3, 1, 0] = -1 and look at x:\n\n");
    *TENSOR_AT(heads, 0, 3, 1, 0) = -1;
    printf("x[0, 1, 6] = %.0f  (head 3, position 1, feature 0)\n",
           *TENSOR_AT(x, 0, 1, 6));
    *TENSOR_AT(heads, 0, 3, 1, 0) = 22;
    printf("\ncontiguous() always copies, into row-major order:\n\n");
    tensor *packed;
    trace_to(stdout);
    CHECK(tensor_contiguous(heads, &packed));
    trace_to(NULL);
    printf("\n");
    show_layout("packed", packed);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(packed, x)));

    section("6. -1 means \"whatever is left\"");
    printf("One size may be -1; it is worked out from the element count:\n\n");
    tensor *inferred;
    trace_to(stdout);
    CHECK(tensor_reshape(x, DIMS(4, -1), NULL, &inferred));
    trace_to(NULL);
    printf("\nWhen the count does not divide, reshape refuses and says why:\n");
    tensor *bad;
    int status = tensor_reshape(x, DIMS(3, -1), NULL, &bad);
    printf("status %d (%s): %s\n", status, gsl_strerror(status),
           mha_last_error());

    section("Summary");
    printf("reshape     a view when one stride per new axis can walk the\n"
           "            old memory, a copy otherwise (PyTorch's rule)\n"
           "permute     always a view: shape and strides reordered\n"
           "contiguous  always a copy, in row-major order\n");

    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
    tensor_free(flat);
    tensor_free(x2);
    tensor_free(split2);
    tensor_free(heads2);
    tensor_free(flat2);
    tensor_free(first);
    tensor_free(packed);
    tensor_free(inferred);
    return 0;
}
