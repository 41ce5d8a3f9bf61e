/* Chapter 06: splitting heads, transpose_qkv and transpose_output.
 *
 * Shows d2l's (1, 2, 16) cut into 8 heads with its trace, where each
 * number lands, what goes wrong with a straight reshape, which steps
 * copy, and the way back.  Run it with `make ch06`; the prose is
 * docs/06_*.md.
 */

/*md
 * Now the heads. One attention function sees all $d_{model}$ features of the
 * queries and keys at once, so it can only attend in one way. Multi-head
 * attention runs $h$ [heads](glossary.md#head) side by side. Each has its own learned projections,
 * and so its own view of the data: one head may follow the previous word,
 * another the subject of the sentence. With $q$, $k$ and $v$ rows, as in
 * chapter 02, head $i$ is
 *
 * $$\mathrm{head}_i = f\left(q W_i^{(q)\top},\; k W_i^{(k)\top},\; v W_i^{(v)\top}\right) \in \mathbb{R}^{p}, \qquad p = d_{model}/h$$
 *
 * a row of $p$ features, where $f$ is chapter 04's attention and each $W_i$
 * is a learned weight with $p$ rows, stored as PyTorch stores it. (The
 * Transformer paper writes $\mathrm{head}_i$ too; $h$ alone is always the
 * number of heads.)
 *
 * Running $h$ small attentions one after the other would be slow.
 * [d2l](https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html) does
 * something else. It makes *one* big projection to $d_{model} = h \cdot p$
 * features and then rearranges the result so that the $h$ heads of each example
 * look like $h$ extra examples in the batch. One call to the attention of
 * chapter 04 then handles all $B \cdot h$ heads. The rearrangement is
 * `transpose_qkv`, and it is exactly chapter 01's three steps:
 *
 * $$(B, n, d_{model}) \xrightarrow{\text{reshape}} (B, n, h, p) \xrightarrow{\text{permute}(0,2,1,3)} (B, h, n, p) \xrightarrow{\text{reshape}} (B h, n, p)$$
 *
 * Feature $j$ of position $i$ of example $b$ ends up in batch row
 * $b h + \lfloor j/p \rfloor$, at position $i$, as that head's feature
 * $j \bmod p$.
 * `transpose_output` runs the steps backwards after attention. Chapter 07 fixes
 * the one thing that the reshuffle breaks, the per-example `valid_lens`, and
 * chapter 08 assembles the module.
 */

#include "lesson.h"

/* Print one head's (n, p) block from a (B*h, n, p) tensor. */
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

static void small_example(void)
{
    section("1. A small example: (1, 2, 16) into 8 heads");
    /*md
     * One sequence (B = 1) of n = 2 positions with $d_{model}$ = 16 features,
     * the numbers 0 to 31, cut into h = 8 heads of p = 16/8 = 2 features. The
     * trace shows each step with its shape, numeric and symbolic:
     *
     * - `reshape(1, 2, 8, -1)`: `(1, 2, 16)` to `(1, 2, 8, 2)`. Each position's
     *   16 features become 8 groups of 2, one group per head. A view.
     * - `permute(0, 2, 1, 3)`: to `(1, 8, 2, 2)`. The head axis moves before
     *   the positions, so that each head's `(n, p)` block can be indexed on its
     *   own. A view.
     * - `reshape(-1, 2, 2)`: to `(8, 2, 2)`. Batch and heads merge into one
     *   axis of $B \cdot h = 8$. A view here, because B = 1 ([chapter 01's
     *   table](01_shapes_strides_views.md#summary-when-each-step-is-a-view)).
     *
     * The picture draws the result as 8 panels, one per head: each panel is
     * that head's `(n, p)` block, rows the 2 positions, columns the head's
     * 2 features, coloured by the number that landed there (white is 0, darkest 31).
     * Head $i$ holds features $2i$ and $2i+1$ of both positions: the colour
     * steps by 2 from panel to panel and by 16 from the top row to the
     * bottom one.
     *
     * `transpose_qkv` is exercise 4. Its tests check the shape
     * `(B*h, n, p)`; that every number lands where section 2 says, for
     * this example and for B = 2, where the last step copies (a straight
     * reshape gets both wrong: section 3); one head; the refusals of
     * section 6 (`GSL_EBADLEN` when $h$ does not divide $d_{model}$,
     * `GSL_EINVAL` for 0 heads, each with the output NULL and the
     * reshape's message naming the shapes); and that when an allocation
     * fails it returns `GSL_ENOMEM` with the output NULL, the tensors it
     * made before freed. It checks nothing itself: the reshape refuses
     * what it cannot do, and the module checks its inputs once, at the
     * door. `STEP` runs a step and, if it fails, jumps to `done:`, where
     * the function frees what it made (`TENSORS_FREE` frees each tensor
     * it is given, NULL ones too); `SCOPE` prints the trace's line for the
     * function, with its input, before its steps run (it is chapter 04's
     * `SCOPE_OF` for one input, as `RECORD` is `RECORD_OF`'s); the lines of the
     * steps after it are indented under it until the function returns,
     * however it returns (a failed step that jumps to `done:` too).
     * `DIMS(...)` passes both the sizes and the names of the variables
     * that hold them. The input's names come first: a dimension that
     * keeps its size keeps its name (in chapter 08's module, the queries'
     * `Lq` stays `Lq`, though this code calls it `n`), a
     * merge joins names (`B*h`), and a split of a named dimension is
     * named by the label and what is left (`d_model` split as `h, -1`
     * gives `h` and `d_model/h`, which the comments call `p`). A label
     * names only what the input's names leave open. `AXES(0, 2, 1, 3)`
     * lists the axes in their new order, as PyTorch's `permute(0, 2, 1,
     * 3)` does.
     *
     * @show src/nn/heads.c transpose_qkv
     */
    tensor *x = counting_tensor(1, 2, 16), *heads;
    tensor_print(stdout, x, 0);
    printf("\n");
    trace_to(stdout);
    CHECK(transpose_qkv(x, 8, &heads)); // heads is (B*h, n, p)
    trace_to(NULL);
    printf("\n");
    const char *titles[] = {"head 0", "head 1", "head 2", "head 3",
                            "head 4", "head 5", "head 6", "head 7"};
    heatmap_options opt = {.titles = titles, .ntitles = 8,
                           .xlabel = "feature",
                           .ylabel = "position", .palette = HEATMAP_BLUES,
                           .title = "(8, 2, 2): where the numbers 0 to 31 land"};
    draw_heatmap(heads, &opt, "06_heads");
    tensor_free(x);
    tensor_free(heads);
}

static void where_each_number_goes(void)
{
    section("2. Where each number goes");
    /*md
     * Row $b \cdot h + i$ of the result is head $i$ of example $b$: features
     * $i p$ to $i p + p - 1$ of *every* position. Row 2 is `[4, 5]`
     * (position 0) and `[20, 21]` (position 1): features 4 and 5 of both
     * positions. Nothing is mixed across positions; each head gets a narrow
     * vertical strip of the `(n, d_model)` matrix.
     *
     * In general `x[b, i, j]` lands at `[b*h + j/p, i, j % p]`, the rule the
     * tests check over a table of shapes. With `x[0, 1, 5] = 21`: feature 5
     * belongs to head $\lfloor 5/2 \rfloor = 2$, as its feature $5 \bmod 2 = 1$, so it
     * lands at `heads[2, 1, 1]`, and the output reads 21 there.
     *
     * The picture follows all 32 numbers through the three steps, as the
     * module splits its queries. Each stage draws the tensor as blocks, every
     * cell labelled with the number it holds (here a number is also its index
     * in x), and under it the same numbers in the order they lie in memory,
     * with the strides (the page calls n `Lq`, the queries' length, as the
     * module does). `x[0, 1, 5] = 21` is lit at every stage: at
     * `[0, 1, 2, 1]` after the reshape, `[0, 2, 1, 1]` after the permute and
     * `[2, 1, 1]` at the end. Read the memory rows from top to bottom: for
     * (1, 2, 16) they are one and the same row, 0 to 31, because none of the
     * three steps moves a number. Only the strides change. The second half
     * of the picture is `transpose_output`, section 5.
     *
     * ![Where each number goes: the stages of transpose_qkv and transpose_output for (1, 2, 16) with 8 heads, each over its memory](pictures/06_numbers.svg)
     *
     * [**Follow any number: pictures/06_numbers.html**](pictures/06_numbers.html),
     * the page `mha view --batch 1 --queries 2 --kv 2 --hiddens 16 --heads 8
     * --d2l --html v.html` writes, with its own title (open it from a clone: GitHub
     * shows its source). `--d2l` gives inputs of ones, as d2l's example,
     * so each query weighs its two keys alike: the page is here for where
     * the numbers go, not for the weights.
     * `mha` is the project's command-line program, `build/mha` once `make
     * walkthrough` has run: `mha trace` prints the module's trace for any
     * sizes, `mha view` writes such pages ([its manual](cli.md)).
     * Hover or tap a number and it lights up at every stage and in every
     * memory row; the buttons walk the steps one at a time.
     */
    tensor *x = counting_tensor(1, 2, 16), *heads;
    CHECK(transpose_qkv(x, 8, &heads));
    for (size_t r = 0; r < heads->shape[0]; r++)
        show_head(heads, r, 8);
    printf("\nx[0, 1, 5] = %.0f    heads[2, 1, 1] = %.0f\n",
           *TENSOR_AT(x, 0, 1, 5), *TENSOR_AT(heads, 2, 1, 1));
    tensor_free(x);
    tensor_free(heads);
}

/* q = k = v = x through chapter 04's attention, heads split by `split`
 * (1: transpose_qkv and transpose_output; 0: a straight reshape to
 * (B*h, n, p) and back).  out is (B, n, d_model). */
static void attend_split(const tensor *x, size_t h, int split, tensor **out)
{
    size_t B = x->shape[0], n = x->shape[1], p = x->shape[2] / h;
    tensor *heads, *o;
    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0));
    if (split)
        CHECK(transpose_qkv(x, h, &heads));
    else
        CHECK(tensor_reshape(x, SIZES((long)(B * h), (long)n, (long)p), NULL,
                             &heads));
    CHECK(dot_attention_forward(&attn, heads, heads, heads, NULL, &o, NULL));
    if (split)
        CHECK(transpose_output(o, h, out));
    else
        CHECK(tensor_reshape(o, SIZES((long)B, (long)n, -1), NULL, out));
    tensor_free(heads);
    tensor_free(o);
    dot_attention_free(&attn);
}

static void the_straight_reshape(void)
{
    section("3. Why not reshape straight to (B*h, n, p)?");
    /*md
     * The question everyone asks: the target is `(B*h, n, p)`, and
     * `(1, 2, 16)` has as many numbers as `(8, 2, 2)`, so why not one reshape
     * and no permute? Because a reshape never moves a number. It reads the
     * buffer in order, 0, 1, 2, ..., and cuts it into the new shape: the
     * first head gets the first $n \cdot p = 4$ numbers, `[0, 1]` and
     * `[2, 3]`. Those are features 0-3 of position 0. The head's "positions"
     * are now pieces of one position, and rows 0-3 hold only position 0,
     * rows 4-7 only position 1.
     *
     * Nothing fails: every shape is right, and the attention runs. But it
     * computes something else. Within a head, attention compares its rows with
     * each other, and those rows are no longer positions: a head never sees
     * the other position at all. The program runs chapter 04's attention on
     * one input both ways, with queries, keys and values all equal to a
     * `(1, 2, 16)` drawn from a standard normal (random seed 6), and puts the
     * heads back together each way (`transpose_output` for the right split, a
     * straight reshape back for the wrong one). The outputs disagree already in
     * position 0's first features, by up to 1.6987 over the 32 outputs.
     *
     * The permute is what keeps each position a position. The test suite pins
     * this down by hand on a smaller case, `(1, 2, 4)` with 2 heads
     * (`heads/straight_reshape_*` in `tests/test_multihead.c`).
     */
    tensor *x = counting_tensor(1, 2, 16), *wrong;
    trace_to(stdout);
    CHECK(tensor_reshape(x, SIZES(8, 2, 2), "B*h, n, d_model/h", &wrong));
    trace_to(NULL);
    printf("\n");
    for (size_t r = 0; r < wrong->shape[0]; r++)
        show_head(wrong, r, 8);
    tensor_free(x);
    tensor_free(wrong);

    gsl_rng *rng = mha_rng_new(6);
    if (!rng)
        exit(1);
    tensor *r, *right_out, *wrong_out;
    CHECK(tensor_alloc(SHAPE(1, 2, 16), &r));
    tensor_fill_normal(r, rng, 0, 1);
    attend_split(r, 8, 1, &right_out);
    attend_split(r, 8, 0, &wrong_out);
    printf("\nattention output, position 0, features 0-3:\n");
    printf("  permute, then reshape:  %8.4f %8.4f %8.4f %8.4f\n",
           right_out->data[0], right_out->data[1], right_out->data[2],
           right_out->data[3]);
    printf("  straight reshape:       %8.4f %8.4f %8.4f %8.4f\n",
           wrong_out->data[0], wrong_out->data[1], wrong_out->data[2],
           wrong_out->data[3]);
    printf("largest difference over all 32 outputs: %.4f\n",
           largest_abs_diff(right_out, wrong_out));
    tensor_free(r);
    tensor_free(right_out);
    tensor_free(wrong_out);
    gsl_rng_free(rng);
}

static void which_steps_copy(void)
{
    section("4. Which steps copy");
    /*md
     * In section 1 every step was a view: with B = 1 even the last reshape can
     * walk the permuted memory with one stride per axis. With B = 2 and n = 2
     * (the numbers 0 to 63) the last step copies. It would be a view again
     * with one head or with one position per sequence (n = 1, a single
     * query): [chapter 01's
     * table](01_shapes_strides_views.md#summary-when-each-step-is-a-view)
     * lists when each step is a view. The permuted tensor
     * `(2, 8, 2, 2)` has strides `(32, 2, 16, 1)`. Merging B and h would need
     * the batch stride 32 to equal $h \cdot p = 8 \cdot 2 = 16$, and it does
     * not. The copy packs the blocks in the new order: row 8, the first head
     * of example 1, is `[32, 33]` and `[48, 49]`.
     *
     * So which of the three steps moves numbers in memory? For (1, 2, 16),
     * none: all three are views. For (2, 3, 16), as for this (2, 2, 16), only
     * the third, the reshape to `(B*h, n, p)`. The first two are views for
     * any sizes; the third copies whenever B, h and n are all more than 1. In
     * the page of `mha view --batch 2 --queries 3 --kv 3 --hiddens 16 --heads 8`
     * the memory under the first two steps is the input's row, unchanged,
     * and under the third a new buffer, the numbers in the new order.
     *
     * Cost: the copy moves $B \cdot n \cdot d_{model} = 64$ doubles, and the
     * module makes three of them (queries, keys, values). That is small next to
     * a projection, which costs $2 \cdot B n d_{model}^2$ flops. It is still
     * memory traffic, though, and a faster implementation can avoid it by
     * handing each head to BLAS as a strided view instead.
     */
    tensor *x2 = counting_tensor(2, 2, 16), *heads2;
    trace_to(stdout);
    CHECK(transpose_qkv(x2, 8, &heads2)); // heads2 is (B*h, n, p)
    trace_to(NULL);
    printf("\n");
    show_head(heads2, 0, 8);
    show_head(heads2, 7, 8);
    show_head(heads2, 8, 8);
    show_head(heads2, 15, 8);
    tensor_free(x2);
    tensor_free(heads2);
}

static void and_back(void)
{
    section("5. And back: transpose_output");
    /*md
     * After attention each head's output is `(n, p)` again, stacked as
     * `(B*h, n, p)`. `transpose_output` undoes the split in the opposite order:
     * `reshape(-1, 8, 2, 2)` takes `B*h` apart (a view), `permute(0, 2, 1, 3)`
     * puts the positions before the heads (a view), and `reshape(2, 2, -1)`
     * lays the $h$ heads of each position side by side as $d_{model}$ features.
     * That last step copies, and it would even with B = 1: the permuted strides
     * `(32, 2, 4, 1)` cannot be merged over `(h, p)`. It is a view only when
     * h, n or p is 1 (one head, one query, or one feature per head), since an
     * axis of size 1 never steps and there is nothing to interleave
     * ([chapter 01's
     * table](01_shapes_strides_views.md#summary-when-each-step-is-a-view)).
     *
     * `transpose_output` is the other half of exercise 4, and its tests
     * check the same things the other way: the shape `(B, n, h p)`,
     * `x[b h + k, i, j]` at `[b, i, k p + j]` for B = 1 and B = 2,
     * `GSL_EBADLEN` when $h$ does not divide the first dimension and
     * `GSL_EINVAL` for 0 heads or an input of fewer than 3 dimensions
     * (the output NULL, a message naming the sizes; a 4-D input is the
     * caller's to refuse, as the module's door does), and `GSL_ENOMEM` with the output
     * NULL when an allocation fails.
     *
     * @show src/nn/heads.c transpose_output
     *
     * The round trip gives back X *exactly*, not just to rounding: these
     * functions only move numbers, they never compute with them.
     */
    tensor *x2 = counting_tensor(2, 2, 16), *heads2, *back;
    CHECK(transpose_qkv(x2, 8, &heads2));
    trace_to(stdout);
    CHECK(transpose_output(heads2, 8, &back)); // back is (B, n, d_model)
    trace_to(NULL);
    printf("\ntranspose_output(transpose_qkv(X)) equals X exactly: %s\n",
           yes_no(largest_abs_diff(back, x2) == 0));
    tensor_free(x2);
    tensor_free(heads2);
    tensor_free(back);
}

static void not_divisible(void)
{
    section("6. When d_model does not divide into h heads");
    /*md
     * Every head needs the same number of features, so $h$ must divide
     * $d_{model}$. Asked for 3 heads of 16 features, `transpose_qkv`'s first
     * reshape refuses with `GSL_EBADLEN` (status 19), naming the shapes, as
     * PyTorch's reshape does. The module checks the same thing when it is
     * created, so there the error appears before any data is touched.
     * (The trace is off in this section: what is printed is the status
     * and the message alone.)
     */
    tensor *x = counting_tensor(1, 2, 16), *bad;
    int status = transpose_qkv(x, 3, &bad);
    printf("status %d: %s\n", status, mha_last_error());
    tensor_free(x);
}

int main(void)
{
    mha_program_init();
    small_example();
    where_each_number_goes();
    the_straight_reshape();
    which_steps_copy();
    and_back();
    not_divisible();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For B = 3, n = 5, d_model = 12 and h = 4, write down
 *    the shape after each of the three steps of `transpose_qkv`, and say for
 *    each step whether it is a view or a copy. Then do the same for
 *    `transpose_output` on the result. Check yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --kv 5 --hiddens 12 --heads 4`,
 *    which asks each step's shape, and view or copy for the steps of the
 *    split and the join's last reshape, then gives the answers with the
 *    strides behind them.
 * 2. With the sizes of exercise 1, where does `x[1, 3, 7]` land after
 *    `transpose_qkv`? Which elements of `x` make up row 6 of the result?
 * 3. Chapter 01's table says when the last reshape of `transpose_qkv` is a
 *    view. Show why from the strides of `(B, h, n, p)` after the permute: for
 *    B = 2, h = 3, n = 1, p = 4, write them down and check that one stride
 *    covers the merged `B*h` axis. Then confirm it with `mha trace`.
 * 4. Coding: in the handout (`make handout`), `transpose_qkv` and
 *    `transpose_output` are blanks. Write them with `tensor_reshape` and
 *    `tensor_permute`, freeing the intermediate tensors; the reshape refuses
 *    a d_model not divisible by h for you. In the handout, `make grade
 *    EXERCISE=transpose_qkv` (and `EXERCISE=transpose_output`) tells you
 *    when each passes. The page folds the library's solution above; write
 *    yours before you open it.
 */
