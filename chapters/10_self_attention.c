/* Chapter 10: self-attention.
 *
 * In self-attention one sequence plays all three parts: each position's
 * vector is a query, a key and a value at once, so every position gathers
 * information from every other position of the same sequence:
 *
 *     y_i = f(x_i, (x_1, x_1), ..., (x_n, x_n))
 *
 * Shapes: X (B, n, d_model) = (2, 4, 100) is queries, keys and values;
 * the output has X's shape, so self-attention layers stack.
 */

/*md
 * So far queries came from one place and keys and values from another, as in a
 * translation model, where the decoder's words query the encoder's. In
 * *self-attention* one sequence plays all three parts. Given tokens
 * $x_1, \dots, x_n$ with $x_i \in \mathbb{R}^d$, the output is a sequence of
 * the same length,
 *
 * $$y_i = f\left(x_i, (x_1, x_1), \dots, (x_n, x_n)\right)$$
 *
 * so each position queries every position of its own sequence, itself included,
 * and takes back a weighted average of their values. With the module of chapter
 * 08 this is just `multihead_forward(m, X, X, X, ...)`: the three projections
 * W_q, W_k and W_v make three different views of the same X.
 *
 * Self-attention is the layer transformers are built from. Its output has the
 * shape of its input, `(B, n, d_model)`, so layers stack. This chapter shows
 * the trace, the `(B, h, n, n)` weights, the one symmetry that makes positional
 * encodings necessary, and the cost that grows with $n^2$. Chapter 11 rebuilds
 * the module in the head-major einsum form, with a residual connection and
 * LayerNorm around it.
 */

#include <math.h>

#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, n = 4, D = 100, h = 5;

    section("1. X attends to itself");
    /*md
     * The trace is chapter 08's with $L_q = L_k = n = 4$: all three inputs are
     * `(2, 4, 100)`, the scores are `(10, 4, 4)`, and the symbolic column says
     * `(B*h, n, n)`, every position against every position. The output
     * `(2, 4, 100)` has X's shape.
     *
     * In the heatmap, each panel is one head of one example: row $i$ is
     * position $i$ as a query, column $j$ is position $j$ as a key. What to
     * look for:
     *
     * - The padding. In example 0 column 3 is blank, in example 1 columns 2-3:
     *   no position takes anything from a padding position. But the padding
     *   positions still have rows of their own (row 3 of example 0, rows 2-3 of
     *   example 1). `valid_lens` masks keys, not queries, so these rows are
     *   computed like the others, and whatever comes next must ignore them.
     * - No diagonal. A position does not automatically attend to itself: its
     *   query is $W_q x_i$ and its key is $W_k x_i$, two different projections.
     *   In example 0, head 0, position 1 gives 0.67 to position 2 and only 0.28
     *   to itself (`plots/10_self_attention.dat`).
     * - Softer weights than chapter 08. The largest weight is 0.935 and many
     *   rows are spread over two or three keys. X is standard normal here,
     *   where chapter 08's inputs had standard deviation 2, so the scores are
     *   about four times smaller.
     */
    printf("X (2, 4, 100) from a standard normal (seed 10); 5 heads;\n"
           "valid_lens [3, 2] as in chapter 08: example 0 has 3 real\n"
           "positions, example 1 has 2, the rest is padding.\n\n");
    gsl_rng *rng = mha_rng_new(10);
    if (!rng)
        return 1;
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);
    tensor *x, *lens, *y;
    CHECK(tensor_alloc(SHAPE(B, n, D), &x)); // (B, n, d_model)
    CHECK(tensor_set_names(x, "B, n, d_model"));
    tensor_fill_normal(x, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    trace_to(stdout);
    CHECK(multihead_forward(&m, x, x, x, lens, &y));
    trace_to(NULL);
    char s[TRACE_SHAPE_MAX];
    printf("\nX %s -> Y %s: the same shape, ready for the next layer.\n",
           tensor_shape_str(x, s, sizeof s), tensor_shape_str(y, s, sizeof s));
    printf("\nThe weights are (B, h, n, n): every position against every\n"
           "position, per head.\n\n");
    char titles[10][32];
    const char *tp[10];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < h; i++) {
            snprintf(titles[b * h + i], sizeof titles[0], "example %zu, head %zu",
                     b, i);
            tp[b * h + i] = titles[b * h + i];
        }
    heatmap_options opt = {.titles = tp, .ntitles = B * h};
    CHECK(heatmap_terminal(stdout, m.weights, &opt));
    printf("\n");
    draw_heatmap(m.weights, &opt, "10_self_attention");

    section("2. Order does not matter to attention");
    /*md
     * Swap positions 0 and 2 of example 0 and run the module again, without a
     * mask. Output row 0 of the swapped run equals output row 2 of the plain
     * run, and so on, to rounding. In general, for any permutation matrix $P$
     * that reorders the positions,
     *
     * $$\mathrm{MHA}(PX, PX, PX) = P \, \mathrm{MHA}(X, X, X)$$
     *
     * The reason: every step either works on each position alone (the
     * projections) or compares all positions with all others and sums over them
     * (the attention). Neither cares where a position is in the sequence.
     *
     * The mask was left out on purpose. `valid_lens` is tied to positions: with
     * length 3, swapping positions 0 and 3 of example 0 would move a real
     * position into the padding and change which keys are visible. Without a
     * mask, every swap works. For language this symmetry is a problem: "dog
     * bites man" and "man bites dog" would give the same outputs, only
     * reordered. Transformers therefore add a positional encoding to X, a
     * vector that depends on the position, before the first layer.
     */
    printf("Swap positions 0 and 2 of example 0 and run again (no mask,\n"
           "so the padding does not get in the way).  Attention only\n"
           "compares vectors with each other: the outputs swap the same\n"
           "way and nothing else changes.\n\n");
    tensor *y_plain, *xs, *y_swapped;
    CHECK(multihead_forward(&m, x, x, x, NULL, &y_plain));
    CHECK(tensor_contiguous(x, &xs));
    for (size_t j = 0; j < D; j++) {
        double t = *TENSOR_AT(xs, 0, 0, j);
        *TENSOR_AT(xs, 0, 0, j) = *TENSOR_AT(xs, 0, 2, j);
        *TENSOR_AT(xs, 0, 2, j) = t;
    }
    CHECK(multihead_forward(&m, xs, xs, xs, NULL, &y_swapped));
    size_t perm[4] = {2, 1, 0, 3};
    double worst = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(*TENSOR_AT(y_swapped, 0, i, j) -
                                     *TENSOR_AT(y_plain, 0, perm[i], j)));
    printf("output row i of the swapped run equals output row perm(i) of\n"
           "the plain run, to rounding (below 1e-12): %s\n",
           yes_no(worst < 1e-12));
    printf("\nSo self-attention alone cannot tell a sentence from its\n"
           "anagram: transformers add positional encodings to X first.\n");

    section("3. Cost");
    /*md
     * For this example, the scores cost $2 \cdot B n^2 d_{model} = 6400$ flops
     * and the weighted average as much again, against 640,000 for the four
     * projections ($8 B n d_{model}^2$). The attention part grows with $n^2$,
     * the projections with $n$, so for long sequences the attention takes over
     * (at $n = 2 d_{model}$, chapter 08). Memory grows the same way: the
     * weights are $B h n^2$ doubles.
     *
     * What $n^2$ buys is in the printed comparison. A recurrent network needs
     * $n$ steps, one after the other, to carry information from the first
     * position to the last. Self-attention connects every pair of positions in
     * one step, and all positions are computed in parallel.
     */
    printf("Every position against every position: the scores are\n"
           "B*h*n*n numbers and computing them costs 2*B*n*n*d_model\n"
           "flops, quadratic in the sequence length.  Recurrent networks\n"
           "pay n sequential steps instead; self-attention pays n^2 work\n"
           "but every position can be computed in parallel, and any two\n"
           "positions are one step apart.\n");

    tensor_free(x);
    tensor_free(lens);
    tensor_free(y);
    tensor_free(y_plain);
    tensor_free(xs);
    tensor_free(y_swapped);
    multihead_free(&m);
    gsl_rng_free(rng);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. How does the cost of multi-head self-attention scale? For d_model = 512,
 *    h = 8 and B = 1, compute the flops of the four projections, the flops of
 *    the attention, and the memory of the weights (in MB) for n = 128, 1024
 *    and 8192. Where does the attention take over? What changes if you double
 *    h? If you double d_model?
 * 2. Would section 2's result still hold with a causal mask (chapter 03)? With
 *    `valid_lens` `[3, 2]`? Predict, then try it in the chapter.
 * 3. Add $0.1 \cdot i$ to every feature of position $i$ of X (a crude
 *    positional encoding) before the two runs of section 2. Does the check
 *    still say `yes`? Why?
 * 4. In section 1, position 3 of example 0 is padding, but it still gets an
 *    output row. Where in a model would you stop such rows from affecting the
 *    result, and what would happen if nothing did?
 */
