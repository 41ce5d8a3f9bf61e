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

/*md
 * Now the heads. One attention function sees all $d_{model}$ features of the
 * queries and keys at once, so it can only attend in one way. Multi-head
 * attention runs $h$ heads side by side. Each has its own learned projections,
 * and so its own view of the data: one head may follow the previous word,
 * another the subject of the sentence. In d2l's notation, head $i$ is
 *
 * $$h_i = f\left(W_i^{(q)} q,\; W_i^{(k)} k,\; W_i^{(v)} v\right) \in \mathbb{R}^{p}, \qquad p = d_{model}/h$$
 *
 * Running $h$ small attentions one after the other would be slow. d2l does
 * something else. It makes *one* big projection to $d_{model} = h \cdot p$
 * features and then rearranges the result so that the $h$ heads of each example
 * look like $h$ extra examples in the batch. One call to the attention of
 * chapter 04 then handles all $B \cdot h$ heads. The rearrangement is
 * `transpose_qkv`, and it is exactly chapter 01's three steps:
 *
 * $$(B, n, d_{model}) \xrightarrow{\text{reshape}} (B, n, h, p) \xrightarrow{\text{permute}(0,2,1,3)} (B, h, n, p) \xrightarrow{\text{reshape}} (B h, n, p)$$
 *
 * Feature $j$ of position $i$ of example $b$ ends up in batch row
 * $b h + \lfloor j/p \rfloor$, at position $i$, slot $j \bmod p$.
 * `transpose_output` runs the steps backwards after attention. Chapter 07 fixes
 * the one thing that the reshuffle breaks, the per-example `valid_lens`, and
 * chapter 08 assembles the module.
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

    section("1. d2l's example: (1, 2, 16) into 8 heads");
    /*md
     * One sequence of 2 positions with 16 features, the numbers 0..31, cut into
     * 8 heads of 2 features. The trace shows each step with its shape, numeric
     * and symbolic:
     *
     * - `reshape(1, 2, 8, -1)`: `(1, 2, 16)` to `(1, 2, 8, 2)`. Each position's
     *   16 features become 8 groups of 2, one group per head. A view.
     * - `permute(0, 2, 1, 3)`: to `(1, 8, 2, 2)`. The head axis moves before
     *   the positions, so that each head's `(n, p)` block can be indexed on its
     *   own. A view.
     * - `reshape(-1, 2, 2)`: to `(8, 2, 2)`. Batch and heads merge into one
     *   axis of $B \cdot h = 8$. A view here, because B = 1 (chapter 01,
     *   section 4).
     *
     * @show src/multihead.c transpose_qkv
     */
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
    /*md
     * Row $b \cdot h + i$ of the result is head $i$ of example $b$: features
     * $i p$ to $i p + p - 1$ of *every* position. Row 2 is `[4, 5]`
     * (position 0) and `[20, 21]` (position 1): features 4 and 5 of both
     * positions. Nothing is mixed across positions; each head gets a narrow
     * vertical strip of the `(n, d_model)` matrix.
     *
     * The index rule in the output, `x[b, i, j]` to `[b*h + j/p, i, j % p]`, is
     * the one the tests check over a table of shapes. With `x[0, 1, 5] = 21`:
     * feature 5 belongs to head $\lfloor 5/2 \rfloor = 2$, slot
     * $5 \bmod 2 = 1$, so it lands at `heads[2, 1, 1]`, and the output reads 21
     * there.
     */
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
    /*md
     * With B = 2 the last step copies. The permuted tensor `(2, 8, 2, 2)` has
     * strides `(32, 2, 16, 1)`. Merging B and h would need the batch stride 32
     * to equal $h \cdot p = 8 \cdot 2 = 16$, and it does not. The copy packs
     * the blocks in the new order: row 8, the first head of example 1, is
     * `[32, 33]` and `[48, 49]`.
     *
     * Cost: the copy moves $B \cdot n \cdot d_{model} = 64$ doubles, and the
     * module makes three of them (queries, keys, values). That is small next to
     * a projection, which costs $2 \cdot B n d_{model}^2$ flops. It is still
     * memory traffic, though, and a faster implementation can avoid it by
     * handing each head to BLAS as a strided view instead.
     */
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
    /*md
     * After attention each head's output is `(n, p)` again, stacked as
     * `(B*h, n, p)`. `transpose_output` undoes the split in the opposite order:
     * `reshape(-1, 8, 2, 2)` takes `B*h` apart (a view), `permute(0, 2, 1, 3)`
     * puts the positions before the heads (a view), and `reshape(2, 2, -1)`
     * lays the $h$ heads of each position side by side as $d_{model}$ features.
     * That last step copies, and it would even with B = 1: the permuted strides
     * `(32, 2, 4, 1)` cannot be merged over `(h, p)`.
     *
     * @show src/multihead.c transpose_output
     *
     * The round trip gives back X *exactly* (`equals X exactly: yes`), not just
     * to rounding: these functions only move numbers, they never compute with
     * them.
     */
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
    /*md
     * Every head needs the same number of features, so $h$ must divide
     * $d_{model}$. With 16 features and 3 heads, `transpose_qkv` refuses with
     * `GSL_EBADLEN` (status 19) and says what it got:
     * `d_model 16 is not divisible by num_heads 3`. The module checks the same
     * thing when it is created, so the error appears before any data is
     * touched.
     */
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

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For B = 3, n = 5, d_model = 12 and h = 4, write down
 *    the shape after each of the three steps of `transpose_qkv`, and say for
 *    each step whether it is a view or a copy. Then do the same for
 *    `transpose_output` on the result. Check yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --hiddens 12 --heads 4`, which
 *    prints the module's trace with the shapes hidden, then the answers.
 * 2. With the sizes of exercise 1, where does `x[1, 3, 7]` land after
 *    `transpose_qkv`? Which elements of `x` make up row 6 of the result?
 * 3. For which shapes is the last reshape of `transpose_qkv` a view even though
 *    B > 1? Use chapter 01's rule, then check with the trace.
 * 4. Coding: in the handout (`make handout`), `transpose_qkv` and
 *    `transpose_output` are blanks. Write them with `tensor_reshape` and
 *    `tensor_permute`, freeing the intermediate tensors, and keep the error for
 *    a d_model not divisible by h. In the handout, `make grade
 *    EXERCISE=transpose_qkv` (and `EXERCISE=transpose_output`) tells you
 *    when each passes; the handout's book shows the blanks, so try it before
 *    you read the code above.
 */
