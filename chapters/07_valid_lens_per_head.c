/* Chapter 07: valid_lens per head, repeat_interleave and not tile.
 *
 * After transpose_qkv the batch axis has B*h rows: row b*h + i is head i
 * of example b.  Every head of example b must see the same keys as
 * example b, so valid_lens has to be stretched the same way: each entry
 * repeated h times in place (torch.repeat_interleave).  Repeating the
 * whole list h times (tile) looks similar and is wrong.
 *
 * Shapes: valid_lens (B,) -> (B*h,), or (B, Lq) -> (B*h, Lq).
 */
#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, h = 3, Lq = 2, Lk = 4;

    section("1. One length per example: (B,) -> (B*h,)");
    printf("Two examples with valid_lens [3, 2]: example 0 has 3 real\n"
           "keys, example 1 has 2 (the rest is padding).  With h = 3\n"
           "heads, repeat_interleave gives each head its example's length:\n\n");
    tensor *lens, *per_head;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens)); // (B,)
    CHECK(tensor_set_names(lens, "B"));
    trace_to(stdout);
    CHECK(repeat_valid_lens(lens, h, &per_head)); // (B*h,)
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, per_head, 0);

    section("2. Why not tile?");
    printf("Tiling [3, 2] three times gives [3, 2, 3, 2, 3, 2].  Line the\n"
           "rows up with the heads they belong to (row r is head r %% h of\n"
           "example r / h):\n\n");
    printf("  row  example  head  repeat_interleave  tile\n");
    int wrong = 0;
    for (size_t r = 0; r < B * h; r++) {
        double tiled = lens->data[r % B];
        double right = per_head->data[r];
        printf("  %3zu  %7zu  %4zu  %17.0f  %4.0f%s\n", r, r / h, r % h, right,
               tiled, tiled != right ? "  <- wrong example's length" : "");
        wrong += tiled != right;
    }
    printf("\nTiling gives %d of the %zu rows another example's length.\n",
           wrong, B * h);

    printf("\nWhat that does to attention: give every key the same score,\n"
           "so each row spreads its weight evenly over the keys it may see.\n"
           "Head 1 of example 0 (row 1) should see 3 keys:\n\n");
    tensor *scores, *w_right, *w_tiled, *tiled;
    CHECK(tensor_alloc(SHAPE(B * h, 1, Lk), &scores)); // (B*h, 1, Lk), zeros
    CHECK(tensor_alloc(SHAPE(B * h), &tiled));
    for (size_t r = 0; r < B * h; r++)
        tiled->data[r] = lens->data[r % B];
    CHECK(masked_softmax(scores, per_head, &w_right));
    CHECK(masked_softmax(scores, tiled, &w_tiled));
    printf("repeat_interleave, row 1: %.4f %.4f %.4f %.4f\n",
           *TENSOR_AT(w_right, 1, 0, 0), *TENSOR_AT(w_right, 1, 0, 1),
           *TENSOR_AT(w_right, 1, 0, 2), *TENSOR_AT(w_right, 1, 0, 3));
    printf("tile,              row 1: %.4f %.4f %.4f %.4f\n",
           *TENSOR_AT(w_tiled, 1, 0, 0), *TENSOR_AT(w_tiled, 1, 0, 1),
           *TENSOR_AT(w_tiled, 1, 0, 2), *TENSOR_AT(w_tiled, 1, 0, 3));
    printf("\nWith tile, that head ignores a real key of example 0; in\n"
           "row 4 (head 1 of example 1) it would attend to padding.\n");

    section("3. One length per query: (B, Lq) -> (B*h, Lq)");
    printf("2-D valid_lens give every query row its own length (a causal\n"
           "mask is one: query i sees keys 0..i).  The rows of the (B, Lq)\n"
           "table are repeated the same way:\n\n");
    tensor *lens2, *per_head2;
    CHECK(tensor_from_array(SHAPE(B, Lq), (double[]){1, 3, 2, 4}, &lens2));
    CHECK(tensor_set_names(lens2, "B, Lq"));
    tensor_print(stdout, lens2, 0);
    printf("\n");
    trace_to(stdout);
    CHECK(repeat_valid_lens(lens2, h, &per_head2)); // (B*h, Lq)
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, per_head2, 0);

    tensor_free(lens);
    tensor_free(per_head);
    tensor_free(scores);
    tensor_free(w_right);
    tensor_free(w_tiled);
    tensor_free(tiled);
    tensor_free(lens2);
    tensor_free(per_head2);
    return 0;
}
