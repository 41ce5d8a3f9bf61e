/* Chapter 07: per-head valid_lens, repeat_interleave and not tile.
 *
 * After transpose_qkv the batch axis has B*h rows: row b*h + i is head i
 * of example b.  Every head of example b must see the same keys as
 * example b, so valid_lens has to be stretched the same way: each entry
 * repeated h times in place (torch.repeat_interleave).  Repeating the
 * whole list h times (tile) looks similar and is wrong.
 *
 * Shapes: valid_lens (B,) -> (B*h,), or (B, Lq) -> (B*h, Lq).
 */

/*md
 * Chapter 06 turned the $h$ heads of each example into $h$ rows of the batch:
 * batch row $b \cdot h + i$ holds head $i$ of example $b$. The mask must
 * follow. `valid_lens` still has one entry per *example*, `(B,)`, while the
 * attention now sees $B \cdot h$ rows. Every head of example $b$ must see the
 * keys of example $b$, so the new list needs
 *
 * $$\ell'_{b h + i} = \ell_b \qquad \text{for } i = 0, \dots, h-1$$
 *
 * that is, each entry repeated $h$ times *in place*: `[3, 2]` with h = 3
 * becomes `[3, 3, 3, 2, 2, 2]`. That is PyTorch's
 * `torch.repeat_interleave(valid_lens, h, dim=0)`, and `repeat_valid_lens`
 * here. Repeating the whole list instead (`tile`, giving `[3, 2, 3, 2, 3, 2]`)
 * has the same shape and the same numbers, and it is wrong. Nothing crashes:
 * some heads quietly attend to padding. This chapter shows which rows go wrong
 * and why. Chapter 08 then puts all the pieces together.
 */

#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, h = 3, Lq = 2, Lk = 4;

    section("1. One length per example: (B,) -> (B*h,)");
    /*md
     * Two examples with lengths 3 and 2, three heads. The trace shows a `copy`
     * from `(2,)` to `(6,)`: six small numbers, so the cost is nothing next to
     * the attention. The result `[3, 3, 3, 2, 2, 2]` gives rows 0-2 (the heads
     * of example 0) length 3 and rows 3-5 (the heads of example 1) length 2.
     *
     * @show src/multihead.c repeat_valid_lens
     *
     * The loop writes `out[(b*h + i)*row + j]`: the same $b h + i$ that
     * `transpose_qkv` used for the data. The mask and the data agree because
     * they use the same index formula.
     */
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
    /*md
     * The table lines up both candidates with the rows they will mask. `tile`
     * gives row $r$ the length $\ell_{r \bmod B}$, but row $r$ belongs to
     * example $\lfloor r/h \rfloor$. Here the two agree on four rows only by
     * accident of the sizes, and they disagree on rows 1 and 4. Row 1 is head 1
     * of example 0, which has 3 real keys: `repeat_interleave` gives it weights
     * `1/3, 1/3, 1/3, 0`, while `tile` gives `0.5, 0.5, 0, 0` and the head
     * never sees key 2. Row 4, head 1 of example 1, would get length 3 and
     * attend to a padding key.
     *
     * Note the kind of bug: every shape is right, and no test that only checks
     * shapes can see it. The tests of this library check the weights against a
     * plain-loop implementation instead.
     *
     * `tile` is not always wrong: it is the right repeat for a *head-major*
     * layout, where the batch row of head $i$ of example $b$ is
     * $i \cdot B + b$. The einops version stores its heads that way,
     * `(h, B, n, d_k)`, and chapter 11 builds it. The rule is to repeat
     * `valid_lens` in the same order as the data.
     */
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
    /*md
     * With one length per query, `valid_lens` is `(B, Lq)` and each *row* of
     * the table is repeated $h$ times: `[1, 3]` three times for example 0, then
     * `[2, 4]` three times for example 1, `(2, 2)` to `(6, 2)`. A causal mask
     * (chapter 03) is such a table and goes through the same step. The cost is
     * $B h L_q$ numbers, again negligible.
     */
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

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For B = 3, n = 5, d_model = 12, h = 4 and `valid_lens`
 *    `[2, 5, 3]`, what is the shape of the repeated `valid_lens`, and of the
 *    scores it masks? And if `valid_lens` is `(3, 5)`? Check yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --kv 5 --hiddens 12 --heads 4 --valid-lens 2,5,3`.
 * 2. For which values of B and h do `tile` and `repeat_interleave` give the
 *    same list, whatever the lengths? Why does this make a test with B = 1
 *    useless for finding the bug?
 * 3. In a head-major layout the batch row of head $i$ of example $b$ is
 *    $i \cdot B + b$. Write the index formula for the repeated `valid_lens` in
 *    that layout and show that it is `tile`.
 * 4. Coding: in the handout (`make handout`), `repeat_valid_lens` is a blank.
 *    Write it for both `(B,)` and `(B, Lq)` inputs. In the handout, `make
 *    grade EXERCISE=repeat_valid_lens` tells you when it passes.
 */
