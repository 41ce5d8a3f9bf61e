/* Chapter 10: self-attention.
 *
 * Runs chapter 08's module on one sequence as queries, keys and values,
 * with its trace and weights; checks that reordering the positions only
 * reorders the output; counts the cost.  Run it with `make ch10`; the
 * book's page is docs/10_self_attention.md.
 */

/*md
 * So far queries came from one place and keys and values from another, as in a
 * translation model, where the decoder's words query the encoder's. In
 * *self-attention* one sequence plays all three parts. Given tokens (the
 * units a text is cut into, each a vector of features)
 * $x_1, \dots, x_n$ with $x_i \in \mathbb{R}^d$, the output is a sequence of
 * the same length,
 *
 * $$y_i = f\left(x_i, (x_1, x_1), \dots, (x_n, x_n)\right)$$
 *
 * The notation is d2l's: $f$ is attention pooling with the query first and
 * then the key-value pairs, one pair $(k_j, v_j)$ per position. Here every
 * pair is $(x_j, x_j)$, because the key and the value of position $j$ are
 * both made from $x_j$ (by different projections), and the query is $x_i$;
 * so each position queries every position of its own sequence, itself included,
 * and takes back a weighted average of their values. With the module of chapter
 * 08 this is just `multihead_forward(m, X, X, X, ...)`: the three projections
 * W_q, W_k and W_v make three different views of the same X.
 *
 * Self-attention is the layer transformers are built from. Its output has the
 * shape of its input, `(B, n, d_model)`, so layers stack. This chapter shows
 * the trace, the `(B, h, n, n)` weights, the one symmetry that makes positional
 * encodings necessary, and the cost that grows with $n^2$. Chapter 11 rebuilds
 * the module in the head-major [einsum](glossary.md#einsum) form, with a
 * [residual connection](glossary.md#residual-connection) and
 * [LayerNorm](glossary.md#layernorm) ([Ba et al. 2016](https://arxiv.org/abs/1607.06450)) around it.
 */

#include <math.h>

#include "lesson.h"

/* B sequences of N positions, D = d_model features in H heads */
enum { B = 2, N = 4, D = 100, H = 5 };

/* What the sections share: the module and X, made in section 1. */
typedef struct {
    multihead m;
    tensor *x; // (B, n, d_model)
} lesson;

static void attends_to_itself(lesson *l)
{
    section("1. X attends to itself");
    /*md
     * X is `(2, 4, 100)`, drawn from a standard normal, and 5 heads;
     * `valid_lens [3, 2]` as in chapter 08: example 0 has 3 real positions,
     * example 1 has 2, the rest is padding.
     *
     * The trace is chapter 08's with $L_q = L_k = n = 4$: all three inputs are
     * `(2, 4, 100)`, the scores are `(10, 4, 4)`, and the symbolic column says
     * `(B*h, n, n)`, every position against every position. The output
     * `(2, 4, 100)` has X's shape, ready for the next layer.
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
     *   query is $x_i W_q^\top$ and its key is $x_i W_k^\top$, two different
     *   projections. In example 0, head 0, position 1 gives 0.6742 to position
     *   2 and only 0.2798 to itself (the row under the picture).
     * - Softer weights than chapter 08. The largest weight is 0.935 and many
     *   rows are spread over two or three keys. X is standard normal here,
     *   where chapter 08's inputs had standard deviation 2, so the scores are
     *   about four times smaller.
     */
    gsl_rng *rng = mha_rng_new(10);
    if (!rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    tensor *lens, *y, *weights; // weights (B, h, n, n)
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->x)); // (B, n, d_model)
    CHECK(tensor_set_names(l->x, "B, n, d_model"));
    tensor_fill_normal(l->x, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    trace_to(stdout);
    CHECK(multihead_forward(&l->m, l->x, l->x, l->x, lens, &y, &weights));
    trace_to(NULL);
    char s[TRACE_SHAPE_MAX], t[TRACE_SHAPE_MAX];
    printf("\nX %s -> Y %s\n\n", tensor_shape_str(l->x, s, sizeof s),
           tensor_shape_str(y, t, sizeof t));
    char titles[B * H][32];
    const char *tp[B * H];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < H; i++) {
            snprintf(titles[b * H + i], sizeof titles[0], "example %zu, head %zu",
                     b, i);
            tp[b * H + i] = titles[b * H + i];
        }
    heatmap_options opt = {.titles = tp, .ntitles = B * H};
    CHECK(heatmap_terminal(stdout, weights, &opt));
    printf("\n");
    draw_heatmap(weights, &opt, "10_self_attention");
    printf("\nexample 0, head 0, query 1:");
    for (size_t j = 0; j < N; j++)
        printf(" %.4f", *TENSOR_AT(weights, 0, 0, 1, j));
    printf("\n");
    tensor_free(lens);
    tensor_free(y);
    tensor_free(weights);
    gsl_rng_free(rng);
}

static void order(lesson *l)
{
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
    tensor *y_plain, *xs, *y_swapped;
    CHECK(multihead_forward(&l->m, l->x, l->x, l->x, NULL, &y_plain, NULL));
    CHECK(tensor_contiguous(l->x, &xs));
    for (size_t j = 0; j < D; j++) {
        double t = *TENSOR_AT(xs, 0, 0, j);
        *TENSOR_AT(xs, 0, 0, j) = *TENSOR_AT(xs, 0, 2, j);
        *TENSOR_AT(xs, 0, 2, j) = t;
    }
    CHECK(multihead_forward(&l->m, xs, xs, xs, NULL, &y_swapped, NULL));
    size_t perm[N] = {2, 1, 0, 3};
    double worst = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(*TENSOR_AT(y_swapped, 0, i, j) -
                                     *TENSOR_AT(y_plain, 0, perm[i], j)));
    printf("positions 0 and 2 of example 0 swapped, no mask:\n"
           "output row i of the swapped run equals output row perm(i) of\n"
           "the plain run, to rounding (below 1e-12): %s\n",
           yes_no(worst < 1e-12));
    tensor_free(y_plain);
    tensor_free(xs);
    tensor_free(y_swapped);
}

static void cost(void)
{
    section("3. Cost");
    /*md
     * For this example, the scores cost $2 B n^2 d_{model}$ flops and the
     * weighted average as much again, against $8 B n d_{model}^2$ for the four
     * projections. The attention part grows with $n^2$, the projections with
     * $n$, so for long sequences the attention takes over (at
     * $n = 2 d_{model}$, chapter 08). Memory grows the same way: the weights
     * are $B h n^2$ doubles.
     *
     * What $n^2$ buys: a recurrent network needs $n$ steps, one after the
     * other, to carry information from the first position to the last.
     * Self-attention connects every pair of positions in one step, and all
     * positions are computed in parallel.
     */
    printf("scores       %6d flops\n", 2 * B * N * N * D);
    printf("projections  %6d flops\n", 8 * B * N * D * D);
    printf("weights      %6d doubles\n", B * H * N * N);
}

int main(void)
{
    mha_program_init();
    lesson l;
    attends_to_itself(&l);
    order(&l);
    cost();
    tensor_free(l.x);
    multihead_free(&l.m);
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
 *    positional encoding) in both runs of section 2: in the second, after
 *    the positions are swapped, so the row now at position $i$ gets
 *    $0.1 \cdot i$ (the encoding belongs to the place, not to the row).
 *    Does the check still say `yes`? Why? And if the encoding were added
 *    before the swap, so that it moved with its row?
 * 4. In section 1, position 3 of example 0 is padding, but it still gets an
 *    output row. Where in a model would you stop such rows from affecting the
 *    result, and what would happen if nothing did?
 */
