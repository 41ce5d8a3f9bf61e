/* Chapter 01: shapes, strides and views.
 *
 * Shows d2l's (1, 2, 16) tensor as a buffer, a shape and strides, and
 * which of reshape, permute and contiguous are views and which copy, with
 * the trace of each step.  Run it with `make ch01`; the prose is
 * docs/01_*.md.
 */

/*md
 * Multi-head attention moves very few numbers. Most of its steps only change
 * how a buffer of doubles is *looked at*: the same numbers are read as
 * `(B, n, d_model)`, then as `(B, n, h, d_model/h)`, then as
 * `(B, h, n, d_model/h)`. This first chapter is about that bookkeeping. Once
 * you can predict which steps are free and which ones copy, the trace of the
 * whole module in chapter 08 reads like a sentence.
 *
 * The book names shapes the way d2l does (*Dive into Deep Learning*, by
 * Zhang, Lipton, Li and Smola, [d2l.ai](https://d2l.ai); its
 * [multi-head attention section](https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html)
 * is the one this book follows, and the [references](references.md) list
 * every source): `B` is the [batch](glossary.md#batch) size (how many
 * sequences are processed at once), `n` the sequence length (how many
 * positions, queries or key-value pairs), [`d_model`](glossary.md#d_model) the number of features
 * per position, and `h` the number of heads (the attentions that run side by
 * side, chapter 06), each with `d_model/h` features.
 *
 * A tensor here is three things: a pointer to doubles, a shape, and
 * [strides](glossary.md#stride) (how many doubles to skip to move one index along each axis). Element
 * $(i_0, \dots, i_{k-1})$ lives at
 *
 * $$\mathrm{offset}(i_0, \dots, i_{k-1}) = \sum_{d=0}^{k-1} i_d \, s_d$$
 *
 * and a freshly allocated tensor is *[contiguous](glossary.md#contiguous)* (row-major): the last stride
 * is $s_{k-1} = 1$ and each earlier one is $s_d = s_{d+1} \, n_{d+1}$, where
 * $n_d$ is the size of axis $d$.
 *
 * Three operations change a shape:
 *
 * - [`permute`](glossary.md#permute) reorders the axes. It reorders shape and strides
 *   and never touches the data: always a *[view](glossary.md#view)*, a tensor
 *   that shares the buffer of the one it came from (the
 *   [glossary](glossary.md) collects the book's terms).
 * - [`reshape`](glossary.md#reshape) regroups the axes. It is a view when the
 *   existing strides can express the new shape, and a [copy](glossary.md#copy)
 *   otherwise (PyTorch's rule).
 * - [`contiguous`](glossary.md#contiguous) always copies, into row-major order.
 *
 * Chapter 02 puts views to work: the Linear layer reads a `(B, L, D)` tensor as
 * one matrix without copying it. Chapter 06 uses exactly the three steps of
 * this chapter to cut `d_model` features into `h` heads.
 */

#include "lesson.h"

static void buffer_shape_strides(void)
{
    section("1. A tensor is a buffer, a shape and strides");
    /*md
     * The program fills a `(1, 2, 16)` tensor with 0 to 31: one sequence
     * (B = 1) of n = 2 positions with $d_{model}$ = 16 features each. Its
     * strides `(32, 16, 1)` follow from the rule above: the next feature is 1
     * double away, the next position 16 (one position is 16 features), the
     * next sequence 32. To find `x[0, 1, 5]` the code computes
     * $0 \cdot 32 + 1 \cdot 16 + 5 \cdot 1 = 21$ and reads `data[21]`, which
     * holds 21 because the numbers were written in order.
     *
     * That is the whole data structure:
     *
     * @show src/tensor/tensor.h tensor
     *
     * `names` is only there for the trace, so that a line can print
     * `(B, n, d_model)` next to `(1, 2, 16)`. The buffer is reference-counted:
     * a view and the tensor it came from can be freed in any order.
     */
    tensor *x = counting_tensor(1, 2, 16); // x is (B, n, d_model)
    tensor_print(stdout, x, 4);
    printf("\n");
    show_layout("x", x);
    printf("x[0, 1, 5] = %.0f\n", *TENSOR_AT(x, 0, 1, 5));
    tensor_free(x);
}

static void reshape_is_a_view(void)
{
    section("2. Reshape to (B, n, h, d_model/h): a view");
    /*md
     * `reshape(1, 2, 8, -1)` cuts the 16 features of each position into h = 8
     * groups of 2. In memory nothing changes: the features of a position were
     * already side by side, and the new axes just step through them in smaller
     * pieces. The new strides `(32, 16, 2, 1)` say "the next head is 2 doubles
     * on, the next feature inside a head is 1 on". The check in the output,
     * `split[0, 1, 2, 1]` (head 2's second feature of position 1) at offset
     * $16 + 2 \cdot 2 + 1 = 21$, lands on the same double as `x[0, 1, 5]`: the
     * same number, seen through another shape.
     *
     * The *trace* prints one line per step: the operation, `view` or `copy`,
     * the shapes before and after, and the shape in the lesson's names.
     * Splitting one axis of a contiguous tensor is always a view. It costs a
     * new header, 200 bytes as the program prints (the shape, the strides
     * and the axes' names; no element), whatever the size of the tensor. Here
     * is the function behind `tensor_reshape`:
     *
     * @show src/tensor/view.c reshape_impl
     */
    tensor *x = counting_tensor(1, 2, 16), *split;
    trace_to(stdout);
    CHECK(tensor_reshape(x, SIZES(1, 2, 8, -1), "B, n, h, d_model/h", &split));
    trace_to(NULL);
    printf("\n");
    show_layout("split", split);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(split, x)));
    printf("split's own memory: its header, %zu bytes\n", sizeof *split);
    printf("split[0, 1, 2, 1] = %.0f\n", *TENSOR_AT(split, 0, 1, 2, 1));
    tensor_free(x);
    tensor_free(split);
}

/* x = 0..31 as (1, 2, 16), cut into 8 heads of 2 and permuted to
 * (B, h, n, d_model/h): the views of sections 2 and 3, untraced. */
static void heads_view(tensor **x, tensor **heads)
{
    tensor *split;
    *x = counting_tensor(1, 2, 16);
    CHECK(tensor_reshape(*x, SIZES(1, 2, 8, -1), "B, n, h, d_model/h", &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), heads));
    tensor_free(split);
}

static void permute_is_a_view(void)
{
    section("3. Permute to (B, h, n, d_model/h): a view with new strides");
    /*md
     * `permute(0, 2, 1, 3)` swaps the positions axis and the heads axis, so
     * that each head's `(n, d_model/h)` block can be worked on by itself. The
     * code shows how little that takes: shape and strides are reordered, the
     * data pointer stays. `heads` has strides `(32, 2, 16, 1)`, which are the
     * strides of `split` in the new order.
     *
     * @show src/tensor/view.c tensor_permute
     *
     * Look at the printed `heads`: head 0 is the block `[[0, 1], [16, 17]]`,
     * features 0-1 of position 0 and of position 1. That is what a head should
     * see: its own 2 features, at every position. But reading `heads` in index
     * order now visits offsets 0, 1, 16, 17, 2, 3, 18, 19, ...: the strides are
     * no longer decreasing, so the tensor is *not contiguous*. That matters for
     * the next step.
     *
     * The picture shows that walk: the 32 steps of the index order, 8 to a
     * row, for `x` and for `heads`, each cell coloured by the buffer offset
     * read at that step (white is offset 0, darkest 31). `x` climbs smoothly
     * through the buffer; `heads` jumps 16 ahead and back again every two
     * steps.
     */
    tensor *x = counting_tensor(1, 2, 16), *split, *heads;
    CHECK(tensor_reshape(x, SIZES(1, 2, 8, -1), "B, n, h, d_model/h", &split));
    trace_to(stdout);
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    trace_to(NULL);
    printf("\n");
    show_layout("heads", heads);
    printf("shares x's buffer: %s\n\n", yes_no(tensor_shares_buffer(heads, x)));
    tensor_print(stdout, heads, 4);

    /* walk is (2, 4, 8): the offset read at step 8r + c of the index
     * order, for x (panel 0) and heads (panel 1); x holds its own offsets */
    tensor *walk, *packed;
    CHECK(tensor_contiguous(heads, &packed));
    CHECK(tensor_alloc(SHAPE(2, 4, 8), &walk));
    for (size_t i = 0; i < 32; i++) {
        *TENSOR_AT(walk, 0, i / 8, i % 8) = x->data[i];
        *TENSOR_AT(walk, 1, i / 8, i % 8) = packed->data[i];
    }
    const char *titles[] = {"x", "heads"};
    heatmap_options opt = {.titles = titles, .ntitles = 2,
                           .xlabel = "step mod 8", .ylabel = "step / 8",
                           .palette = HEATMAP_BLUES,
                           .title = "buffer offset read at each step"};
    printf("\n");
    draw_heatmap(walk, &opt, "01_walk");
    tensor_free(walk);
    tensor_free(packed);
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
}

static void merge_batch_and_heads(void)
{
    section("4. Reshape to (B*h, n, d_model/h): a view here, a copy in general");
    /*md
     * The last step merges `B` and `h` into one axis of size `B*h`, so that
     * every head looks like one more example of a batch. A merged axis needs
     * one stride that walks through both old axes, and that only works when the
     * outer stride equals the inner stride times the inner size. For `(B, h)`
     * with strides `(32, 2)` and h = 8 the question is: is $32 = 2 \cdot 8$?
     * No. With B = 1 it does not matter, because an axis of size 1 never steps.
     * The merged axis takes h's stride 2, and `flat` is a view with strides
     * `(2, 16, 1)`.
     *
     * With B = 2 (the numbers 0 to 63) the same reshape has to copy. Head 0 of
     * sequence 1 starts at offset 32, but one stride of 2 would put row 8 at
     * offset 16. So `tensor_reshape` allocates a new `(16, 2, 2)` buffer and
     * writes the 64 numbers into it in row-major order: strides `(4, 2, 1)`,
     * contiguous, and `shares x2's buffer: no`. Row 8, head 0 of sequence 1,
     * reads `32 33 48 49`: features 0-1 of positions 0 and 1 of the second
     * sequence.
     *
     * The test that decides between view and copy is PyTorch's. It cuts the old
     * axes into runs that are contiguous among themselves and checks that each
     * run is covered by whole new axes:
     *
     * @show src/tensor/view.c view_strides
     *
     * Cost: the view is free; the copy reads and writes every element once,
     * $B \cdot n \cdot d_{model}$ doubles (64 here, 512 bytes each way). In the
     * multi-head module this copy happens once for each of Q, K and V, when
     * B, h and n are all above 1; the summary's table says exactly when.
     */
    tensor *x, *heads, *flat;
    heads_view(&x, &heads);
    trace_to(stdout);
    CHECK(tensor_reshape(heads, DIMS(-1, 2, 2), &flat));
    trace_to(NULL);
    printf("\n");
    show_layout("flat", flat);
    printf("shares x's buffer: %s\n\n", yes_no(tensor_shares_buffer(flat, x)));
    tensor_free(x);
    tensor_free(heads);
    tensor_free(flat);

    tensor *x2 = counting_tensor(2, 2, 16), *split2, *heads2, *flat2, *rows;
    trace_to(stdout);
    CHECK(tensor_reshape(x2, SIZES(2, 2, 8, -1), "B, n, h, d_model/h", &split2));
    CHECK(tensor_permute(split2, SHAPE(0, 2, 1, 3), &heads2));
    CHECK(tensor_reshape(heads2, DIMS(-1, 2, 2), &flat2));
    trace_to(NULL);
    printf("\n");
    show_layout("flat2", flat2);
    printf("shares x2's buffer: %s\n",
           yes_no(tensor_shares_buffer(flat2, x2)));
    CHECK(tensor_reshape(flat2, DIMS(16, 4), &rows));
    printf("flat2[8] (head 0 of sequence 1): %.0f %.0f %.0f %.0f\n",
           *TENSOR_AT(rows, 8, 0), *TENSOR_AT(rows, 8, 1),
           *TENSOR_AT(rows, 8, 2), *TENSOR_AT(rows, 8, 3));
    tensor_free(x2);
    tensor_free(split2);
    tensor_free(heads2);
    tensor_free(flat2);
    tensor_free(rows);
}

static void writing_through_a_view(void)
{
    section("5. Writing through a view, and contiguous()");
    /*md
     * A view is not a snapshot: it is the same memory. `heads[0, 3, 1, 0]`
     * (head 3, position 1, feature 0) sits at offset
     * $3 \cdot 2 + 1 \cdot 16 + 0 = 22$, which is also `x[0, 1, 6]`, so
     * writing -1 through `heads` changes `x`. A function that wrote into its
     * input could change its caller's data this way, through a view the caller
     * has forgotten about. That is why the library's functions only read their
     * inputs and return new tensors.
     *
     * `contiguous()` is the explicit copy, into row-major order. `packed` has
     * the shape of `heads`, `(1, 8, 2, 2)`, but its own buffer with row-major
     * strides `(32, 4, 2, 1)`. It costs one pass over the data, and it is what
     * a later step uses when it needs plain rows, for example a BLAS call.
     */
    tensor *x, *heads, *packed;
    heads_view(&x, &heads);
    *TENSOR_AT(heads, 0, 3, 1, 0) = -1;
    printf("after heads[0, 3, 1, 0] = -1:  x[0, 1, 6] = %.0f\n\n",
           *TENSOR_AT(x, 0, 1, 6));
    trace_to(stdout);
    CHECK(tensor_contiguous(heads, &packed));
    trace_to(NULL);
    printf("\n");
    show_layout("packed", packed);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(packed, x)));
    tensor_free(x);
    tensor_free(heads);
    tensor_free(packed);
}

static void minus_one(void)
{
    section("6. -1 means \"whatever is left\"");
    /*md
     * One size may be -1; it is worked out from the element count:
     * `reshape(4, -1)` on 32 numbers gives `(4, 8)`. The chapters use it the
     * way d2l does, `reshape(B, n, h, -1)`, so the code never computes
     * $d_{model}/h$ itself. When the count does not divide, nothing is
     * guessed: `(3, -1)` on 32 elements fails with `GSL_EBADLEN` (status 19)
     * and a message that names the requested shape, the element count and the
     * input shape.
     */
    tensor *x = counting_tensor(1, 2, 16), *inferred, *bad;
    trace_to(stdout);
    CHECK(tensor_reshape(x, DIMS(4, -1), &inferred));
    trace_to(NULL);
    printf("\n");
    int status = tensor_reshape(x, DIMS(3, -1), &bad);
    printf("status %d (%s): %s\n", status, gsl_strerror(status),
           mha_last_error());
    tensor_free(x);
    tensor_free(inferred);
}

static void summary(void)
{
    section("Summary: when each step is a view");
    /*md
     * Chapter 06 splits `d_model` features into `h` heads of $p = d_{model}/h$
     * with `transpose_qkv` (reshape, permute, reshape) and joins them again
     * with `transpose_output` (reshape, permute, reshape). Splitting an axis
     * and permuting are always views. Only the last reshape of each function
     * merges axes, and whether it can be a view depends on which sizes are 1,
     * because an axis of size 1 never steps (section 4):
     *
     * | step | a view when | a copy when |
     * |------|-------------|-------------|
     * | `transpose_qkv` 1: reshape `(B, n, d_model)` to `(B, n, h, p)` | always | never |
     * | `transpose_qkv` 2: permute to `(B, h, n, p)` | always | never |
     * | `transpose_qkv` 3: reshape to `(B*h, n, p)` | B = 1, h = 1 or n = 1 | B, h and n all > 1 |
     * | `transpose_output` 1: reshape `(B*h, n, p)` to `(B, h, n, p)` | always | never |
     * | `transpose_output` 2: permute to `(B, n, h, p)` | always | never |
     * | `transpose_output` 3: reshape to `(B, n, h*p)` | h = 1, n = 1 or p = 1 | h, n and p all > 1 |
     *
     * Merging B and h in `transpose_qkv` needs the batch stride $n h p$ to
     * equal $h$'s stride $p$ times $h$, which holds only when $n = 1$, unless
     * B or h is 1 and never steps. Merging h and p in `transpose_output`
     * needs $h$'s stride $n p$ to equal $p$, so $n = 1$, unless h or p is 1.
     * So chapter 06's `(1, 2, 16)` example is views all the way into the heads (B = 1)
     * and copies on the way back; with B = 2 and n = 2 both merges copy.
     *
     * The run below is the case of one query per sequence, the shape a
     * decoder (a model that writes one position at a time) meets at every step (chapter 16): B = 2, n = 1, 16 features in
     * 8 heads of 2. All six steps are views, and the output shares the
     * input's buffer.
     */
    tensor *x = counting_tensor(2, 1, 16), *split, *heads, *flat;
    tensor *unflat, *pos, *back;
    trace_to(stdout);
    CHECK(tensor_reshape(x, SIZES(2, 1, 8, -1), "B, n, h, p", &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    CHECK(tensor_reshape(heads, SIZES(-1, 1, 2), "B*h, n, p", &flat));
    CHECK(tensor_reshape(flat, SIZES(-1, 8, 1, 2), "B, h, n, p", &unflat));
    CHECK(tensor_permute(unflat, SHAPE(0, 2, 1, 3), &pos));
    CHECK(tensor_reshape(pos, SIZES(2, 1, -1), "B, n, h*p", &back));
    trace_to(NULL);
    printf("\nshares x's buffer: %s\n\n",
           yes_no(tensor_shares_buffer(back, x)));
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
    tensor_free(flat);
    tensor_free(unflat);
    tensor_free(pos);
    tensor_free(back);
    printf("reshape     a view when one stride per new axis can walk the\n"
           "            old memory, a copy otherwise (PyTorch's rule)\n"
           "permute     always a view: shape and strides reordered\n"
           "contiguous  always a copy, in row-major order\n");
}

int main(void)
{
    mha_program_init();
    buffer_shape_strides();
    reshape_is_a_view();
    permute_is_a_view();
    merge_batch_and_heads();
    writing_through_a_view();
    minus_one();
    summary();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. A contiguous tensor has shape `(2, 3, 4)`. Write down its strides. Permute
 *    it with `(2, 0, 1)`: what are the new shape and strides? Is the result
 *    contiguous?
 * 2. Take the permuted tensor of exercise 1. Is `reshape(4, 6)` a view or a
 *    copy? And `reshape(8, 3)`? Decide with the rule of section 4 (a merged
 *    pair of axes needs outer stride = inner stride × inner size), then check
 *    yourself with a few lines of C at the end of `main` in
 *    `chapters/01_shapes_strides_views.c`: `trace_to(stdout)`, then
 *    `tensor_alloc(SHAPE(2, 3, 4), &t)`, `tensor_permute(t, AXES(2, 0, 1),
 *    &p)` and `tensor_reshape(p, SIZES(4, 6), NULL, &r)`, as the sections
 *    do (the macros are in `src/tensor/tensor.h`). `make ch01` runs it;
 *    `git checkout chapters/` undoes it.
 * 3. In section 4 with B = 2, write down the offset of the first element of
 *    each of the 16 rows of the merged `B*h` axis. Show that no single stride
 *    produces that list. Then explain each "a view when" entry of the
 *    summary's table the same way: which offsets the merged axis would
 *    need, and why a size of 1 makes one stride enough (for
 *    `transpose_output`'s last step, list the offsets of the merged `h*p`
 *    axis).
 * 4. Write a loop that visits the elements of `heads` (section 3) in index
 *    order using only its shape and strides, and prints the offset of each.
 *    Which offsets come out, in which order?
 */
