/* Chapter 07: per-head valid_lens, repeat_interleave and not tile.
 *
 * Shows repeat_valid_lens on (B,) and (B, Lq) lengths with its trace, and
 * what tile would do to the rows and their weights instead.  Run it with
 * `make ch07`; the prose is docs/07_*.md.
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
 * `torch.repeat_interleave(valid_lens, h, dim=0)`
 * ([repeat_interleave](glossary.md#repeat_interleave)), and `repeat_valid_lens` here. Repeating the whole list instead (`tile`, giving `[3, 2, 3, 2, 3, 2]`)
 * has the same shape and the same numbers, and it is wrong. Nothing crashes:
 * some heads quietly attend to padding, and others never see some of their
 * real keys. This chapter shows which rows go wrong and why. Chapter 08 then puts all the pieces together.
 */

#include "lesson.h"

/* The lesson's sizes: B examples, h heads, Lq queries, Lk keys. */
enum { B = 2, h = 3, Lq = 2, Lk = 4 };

/* valid_lens [3, 2]: example 0 has 3 real keys, example 1 has 2. */
static tensor *example_lens(void)
{
    tensor *lens;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens)); // (B,)
    CHECK(tensor_set_names(lens, "B"));
    return lens;
}

static void one_length_per_example(void)
{
    section("1. One length per example: (B,) -> (B*h,)");
    /*md
     * Two examples with `valid_lens` `[3, 2]`: example 0 has 3 real keys,
     * example 1 has 2 (the rest is padding), and h = 3 heads. The repeat is
     * three steps, and the trace shows each:
     *
     * - a `view` of `(2,)` as `(2, 1)`, one column;
     * - an [`expand`](glossary.md#expand) of that column to `(2, 3)`, `(B, h)`:
     *   no number moves, every entry of row $b$ reads `valid_lens[b]`,
     *   because the new axis has stride 0 (moving along it moves 0
     *   doubles);
     * - a `reshape` to `(6,)`, merging `(B, h)` into `B*h`, the only
     *   `copy`: six small numbers, nothing next to the attention. (With
     *   B = 1 or h = 1 the merge is a view too, by chapter 01's rule, and
     *   nothing is copied at all.)
     *
     * The result `[3, 3, 3, 2, 2, 2]` gives rows 0-2 (the heads of example
     * 0) length 3 and rows 3-5 (the heads of example 1) length 2.
     *
     * Writing it is exercise 4. Its tests check `(B,)` to `(B h,)` and
     * `(B, Lq)` to `(B h, Lq)`, row $b h + i$ a copy of row $b$ (not
     * `tile`'s order, section 2); that a [meta](glossary.md#meta)
     * `valid_lens` (shapes alone, as `mha trace` passes it) gives a meta
     * result of the repeated shape; that 0 heads, or a `valid_lens` of
     * another number of dimensions, is refused with `GSL_EINVAL`, the
     * output NULL and a message naming the number; and that a failed
     * allocation returns `GSL_ENOMEM` with the output NULL.
     *
     * @show src/nn/heads.c repeat_valid_lens
     *
     * The last step merges `(B, h)` into `B*h` in that order, as
     * `transpose_qkv`'s last reshape merged `(B, h)` for the data: entry
     * $(b, i)$ lands at $b h + i$ in both. The mask and the data agree
     * because they merge the same two axes in the same order. (For `(B,
     * Lq)` lengths, section 3, the same three steps carry a row of `Lq`
     * along.)
     */
    tensor *lens = example_lens(), *per_head;
    trace_to(stdout);
    CHECK(repeat_valid_lens(lens, h, &per_head)); // (B*h,)
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, per_head, 0);
    tensor_free(lens);
    tensor_free(per_head);
}

/* Row 1's weights, with every key scored the same. */
static void show_row_1(const char *label, const tensor *lens)
{
    tensor *scores, *w;
    CHECK(tensor_alloc(SHAPE(B * h, 1, Lk), &scores)); // (B*h, 1, Lk), zeros
    CHECK(masked_softmax(scores, lens, &w));
    printf("%-18s row 1: %.4f %.4f %.4f %.4f\n", label, *TENSOR_AT(w, 1, 0, 0),
           *TENSOR_AT(w, 1, 0, 1), *TENSOR_AT(w, 1, 0, 2),
           *TENSOR_AT(w, 1, 0, 3));
    tensor_free(scores);
    tensor_free(w);
}

static void why_not_tile(void)
{
    section("2. Why not tile?");
    /*md
     * Tiling `[3, 2]` three times gives `[3, 2, 3, 2, 3, 2]`. The table lines
     * up both candidates with the rows they will mask: row $r$ is head
     * $r \bmod h$ of example $\lfloor r/h \rfloor$. `tile` gives row $r$ the
     * length $\ell_{r \bmod B}$ instead. Here the two agree on four rows only
     * by accident of the sizes, and they disagree on rows 1 and 4.
     *
     * Then the program gives every key the same score, so that each row
     * spreads its weight evenly over the keys it may see. Row 1 is head 1 of
     * example 0, which has 3 real keys: `repeat_interleave` gives it weights
     * 0.3333 on keys 0-2, while `tile` gives 0.5000 on keys 0-1 and the head
     * never sees key 2. Row 4, head 1 of example 1, would get length 3 and
     * attend to a padding key.
     *
     * The picture shows the keys each row may see under each repeat, one
     * row of cells per batch row $r$, dark where the key is visible and blank
     * where it is masked: under `tile`, rows 1 and 4 have swapped lengths.
     *
     * Note the kind of bug: every shape is right, and no test that only checks
     * shapes can see it. The tests of this library check the weights against a
     * plain-loop implementation instead.
     *
     * `tile` is not always wrong: it is the right repeat for a
     * *[head-major](glossary.md#head-major)* layout, where the heads axis comes first and the batch row of head $i$
     * of example $b$ is $i \cdot B + b$: expand `valid_lens` to `(h, B)`
     * instead of `(B, h)`, and the same merge gives `tile`. The einops version ([einops](https://github.com/arogozhnikov/einops) is a
     * Python library that rearranges axes by name) stores its heads that way,
     * `(h, B, n, d_k)`, and chapter 11 builds it. The rule is to repeat
     * `valid_lens` in the same order as the data.
     */
    tensor *lens = example_lens(), *per_head, *tiled;
    CHECK(repeat_valid_lens(lens, h, &per_head));
    CHECK(tensor_alloc(SHAPE(B * h), &tiled)); // (B*h,)
    for (size_t r = 0; r < B * h; r++)
        tiled->data[r] = lens->data[r % B];

    printf("  row  example  head  repeat_interleave  tile\n");
    int wrong = 0;
    for (size_t r = 0; r < B * h; r++) {
        double right = per_head->data[r], tile = tiled->data[r];
        printf("  %3zu  %7zu  %4zu  %17.0f  %4.0f%s\n", r, r / (size_t)h,
               r % (size_t)h, right, tile,
               tile != right ? "  <- wrong example's length" : "");
        wrong += tile != right;
    }
    printf("\ntile gives %d of the %d rows another example's length.\n\n",
           wrong, B * h);
    show_row_1("repeat_interleave,", per_head);
    show_row_1("tile,", tiled);

    /* masks is (2, B*h, Lk): 1 where row r may see key j, panel 0 for
     * repeat_interleave, panel 1 for tile */
    tensor *masks;
    CHECK(tensor_alloc(SHAPE(2, B * h, Lk), &masks));
    for (size_t r = 0; r < B * h; r++)
        for (size_t j = 0; j < Lk; j++) {
            *TENSOR_AT(masks, 0, r, j) = j < per_head->data[r];
            *TENSOR_AT(masks, 1, r, j) = j < tiled->data[r];
        }
    const char *titles[] = {"repeat_interleave", "tile"};
    heatmap_options opt = {.titles = titles, .ntitles = 2,
                           .ylabel = "row b*h+i", .palette = HEATMAP_GREYS};
    printf("\n");
    CHECK(heatmap_terminal(stdout, masks, &opt));
    printf("\n");
    draw_heatmap(masks, &opt, "07_masks");
    tensor_free(masks);
    tensor_free(lens);
    tensor_free(per_head);
    tensor_free(tiled);
}

static void one_length_per_query(void)
{
    section("3. One length per query: (B, Lq) -> (B*h, Lq)");
    /*md
     * With one length per query, `valid_lens` is `(B, Lq)` and each *row* of
     * the table is repeated $h$ times: `[1, 3]` three times for example 0, then
     * `[2, 4]` three times for example 1, `(2, 2)` to `(6, 2)`. A causal mask
     * (chapter 03) is such a table and goes through the same step. The cost is
     * $B h L_q$ numbers, again negligible.
     */
    tensor *lens, *per_head;
    CHECK(tensor_from_array(SHAPE(B, Lq), (double[]){1, 3, 2, 4}, &lens));
    CHECK(tensor_set_names(lens, "B, Lq"));
    tensor_print(stdout, lens, 0);
    printf("\n");
    trace_to(stdout);
    CHECK(repeat_valid_lens(lens, h, &per_head)); // (B*h, Lq)
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, per_head, 0);
    tensor_free(lens);
    tensor_free(per_head);
}

int main(void)
{
    mha_program_init();
    one_length_per_example();
    why_not_tile();
    one_length_per_query();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For B = 3, n = 5, d_model = 12, h = 4 and `valid_lens`
 *    `[2, 5, 3]`, what is the shape of the repeated `valid_lens`, and of the
 *    scores it masks? And if `valid_lens` is `(3, 5)`, one length per query?
 *    Check the first case yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --kv 5 --hiddens 12 --heads 4 --valid-lens 2,5,3`
 *    (`mha trace` takes one length per example only; the second case is
 *    section 3's rule).
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
