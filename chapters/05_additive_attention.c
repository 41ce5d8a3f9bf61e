/* Chapter 05: additive attention, the other scoring function.
 *
 * Shows additive_attention_forward on d2l's toy with its trace, compares
 * its weights with the dot product's on the same inputs, and what its
 * broadcast costs.  Run it with `make ch05`; the prose is docs/05_*.md.
 */

/*md
 * The dot product of chapter 04 is one way to score a query against a key. It
 * needs queries and keys of the same size, and it has no parameters of its own.
 * Additive attention ([Bahdanau et al. 2014](https://arxiv.org/abs/1409.0473))
 * is the other classic choice. It projects
 * the query and the key into a hidden space of $H$ features, adds them, and
 * scores the sum with a one-layer network:
 *
 * $$a(q, k) = \tanh\left(q W_q^\top + k W_k^\top\right) w_v^\top, \qquad W_q \in \mathbb{R}^{H \times d_q},\; W_k \in \mathbb{R}^{H \times d_k},\; w_v \in \mathbb{R}^{1 \times H}$$
 *
 * with $q$ and $k$ rows, as everywhere in this book (chapter 02): each of the
 * three is a Linear layer without bias, $y = x W^\top$.
 *
 * Because $W_q$ and $W_k$ map to the same $H$, the query size $d_q$ and the key
 * size $d_k$ may differ. The rest is unchanged: the masked softmax turns the
 * scores into weights, and the weights average the values.
 *
 * Multi-head attention (chapters 06 to 08) runs $h$ attentions side by
 * side, each on its own projections of the queries, keys and values, and
 * [d2l's multi-head attention section](https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html)
 * leaves open which attention $f$ each head runs: any scoring function
 * fits. d2l, and this library, use the scaled dot product. This chapter shows
 * the alternative and its price, so that the choice in chapter 08 is an
 * informed one. Chapter 06 then starts on the heads themselves.
 */

#include "lesson.h"

/* Additive attention with PyTorch's initial weights, drawn from rng. */
static void additive_init(additive_attention *a, size_t k_size, size_t q_size,
                          gsl_rng *rng)
{
    CHECK(additive_attention_init(a, k_size, q_size, 8, 0));
    linear_reset_pytorch(&a->W_q, rng);
    linear_reset_pytorch(&a->W_k, rng);
    linear_reset_pytorch(&a->w_v, rng);
}

static void d2l_toy(void)
{
    section("1. d2l's toy with queries of 20 features");
    /*md
     * The same toy as chapter 04, but the queries now have 20 features (drawn
     * from a standard normal, random seed 5) and the keys 2: the dot product
     * could not compare them at all. The additive pooling is built with
     * `key_size` 2, `query_size` 20 and $H$ = 8 hidden units. Its three
     * layers start as PyTorch starts them, each number drawn uniformly from
     * $[-1/\sqrt{in}, 1/\sqrt{in}]$ where $in$ is the layer's number of
     * inputs. (They are called `W_q`, `W_k` and `w_v` like the formula's, but
     * they are this pooling's own small layers, not the projections of
     * multi-head attention.) Read the trace from the top:
     *
     * - `W_q` maps the queries `(2, 1, 20)` to `(2, 1, 8)`, `W_k` the keys
     *   `(2, 10, 2)` to `(2, 10, 8)`: both now live in the same 8-feature
     *   space.
     * - The *broadcast* adds every query to every key. NumPy and PyTorch write
     *   it `q[:, :, None] + k[:, None]`: the query tensor gets a new axis for
     *   the keys and the key tensor one for the queries, each is repeated along
     *   its new axis (without copying), and the sum is `(2, 1, 10, 8)`: one
     *   8-feature vector per (example, query, key). Then `tanh` squashes each
     *   number into $(-1, 1)$.
     * - `w_v` scores each of those vectors: `(2, 1, 10, 1)`, and a reshape (a
     *   view) drops the last axis of size 1.
     * - From here on it is chapter 04: masked softmax, then `weights V`.
     *
     * The code is in two parts, as in chapter 04. The steps, one call
     * each, under the trace's first line, `additive_attention(num_hiddens
     * 8)` (`SIZES(B, Lq, Lk)` is the reshape's new shape, and `NULL`
     * lets the reshape name its dimensions after those of `scores4`).
     * The layers run as chapter 02's `linear_steps`, which add no check
     * of their own: the door has checked the layers:
     *
     * @show src/nn/attention.c additive_attention_steps
     *
     * The door, `additive_attention_forward`, checks the inputs with
     * chapter 04's `start_pooling`. Here it asks that the queries and the
     * keys have the numbers of features `W_q` and `W_k` take, where the
     * dot product asked for one size for both. Then it checks the three
     * layers (`linear_check`, chapter 02) and runs the steps:
     *
     * @show src/nn/attention.c additive_attention_forward
     *
     * The broadcast is the step to look at. It materialises the whole
     * `(B, Lq, Lk, H)` tensor:
     *
     * @show src/nn/attention.c broadcast_tanh
     *
     * The output is the same as chapter 04's, `[2, 3, 4, 5]` and
     * `[10, 11, 12, 13]`: all keys are equal, so every valid key gets the same
     * score, whatever the scoring function, and the weights are 1/2 and 1/6
     * again. Cost: the features are
     * $B L_q L_k H = 2 \cdot 1 \cdot 10 \cdot 8 = 160$ doubles. A linear layer
     * costs 2 flops (a multiply
     * and an add) per row, input feature and output feature. `W_q` takes
     * $B L_q = 2$ query rows of 20 features: $2 \cdot 2 \cdot 20 \cdot 8 = 640$
     * flops. `W_k` takes $B L_k = 20$ key rows of 2 features:
     * $2 \cdot 20 \cdot 2 \cdot 8 = 640$ flops, the same count from the
     * other shape. `w_v` takes the 160 features to one score each:
     * $2 \cdot 160 = 320$ flops.
     */
    gsl_rng *rng = mha_rng_new(5);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *out, *weights;
    d2l_toy_inputs(rng, 20, "B, Lq, q_size", "B, Lk, k_size", &q, &k,
                   &v, &lens);
    additive_attention add;
    additive_init(&add, 2, 20, rng);
    trace_to(stdout);
    CHECK(additive_attention_forward(&add, q, k, v, lens, &out, &weights));
    trace_to(NULL);
    printf("\nout (2, 1, 4):\n");
    tensor_print(stdout, out, 4);
    printf("\nweights (2, 1, 10):\n");
    tensor_print(stdout, weights, 4);

    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(weights);
    additive_attention_free(&add);
    gsl_rng_free(rng);
}

static void the_poolings_disagree(void)
{
    section("2. Same inputs, different keys: the two poolings disagree");
    /*md
     * Now the keys get 20 random features, so both poolings can score them, and
     * the two sets of weights can be compared on the same inputs. Random seed
     * 5 again gives the queries of section 1; the keys and a new additive
     * pooling (20 key features, 20 query features, 8 hidden units) are drawn
     * after them. The dot product divides by $\sqrt{20}$.
     *
     * Both respect the same mask (zeros past keys 1 and 5), but they rank the
     * keys differently. In example 0 the additive pooling gives 0.3493 and
     * 0.6507; the dot product gives 0.0785 and 0.9215, nearly all on key 1.
     * In example 1 the dot product puts 0.5411 on key 0, where the additive
     * pooling puts 0.1249. The largest difference between the two sets of
     * weights is 0.4161.
     *
     * In the heatmap all four panels share one colour scale (from 0 to the
     * largest weight drawn), so shades can be compared across panels. Look at
     * example 1: the additive row is spread out, with no weight above 0.2221,
     * while the dot-product row has one dark cell at key 0. Neither is better;
     * both are untrained. The dot product compares the raw features; the
     * additive pooling scores them through its own random layers. Training is
     * what makes either one useful.
     */
    gsl_rng *rng = mha_rng_new(5);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *k20, *out_add, *out_dot, *w_add, *w_dot;
    d2l_toy_inputs(rng, 20, "B, Lq, q_size", "B, Lk, k_size", &q, &k,
                   &v, &lens);
    CHECK(tensor_alloc(SHAPE(2, 10, 20), &k20)); // (B, Lk, k_size)
    tensor_fill_normal(k20, rng, 0, 1);
    additive_attention add;
    additive_init(&add, 20, 20, rng);
    dot_attention dot;
    CHECK(dot_attention_init(&dot, 0));
    CHECK(additive_attention_forward(&add, q, k20, v, lens, &out_add, &w_add));
    CHECK(dot_attention_forward(&dot, q, k20, v, lens, &out_dot, &w_dot));
    printf("additive weights:\n");
    tensor_print(stdout, w_add, 4);
    printf("dot-product weights:\n");
    tensor_print(stdout, w_dot, 4);
    double most = 0;
    for (size_t t = 0; t < 10; t++)
        most = fmax(most, *TENSOR_AT(w_add, 1, 0, t));
    printf("\nlargest difference between the two sets of weights: %.4f\n",
           largest_abs_diff(w_add, w_dot));
    printf("largest additive weight in example 1: %.4f\n\n", most);

    tensor *both;
    CHECK(tensor_alloc(SHAPE(2, 2, 1, 10), &both)); // (pooling, B, Lq, Lk)
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 10; t++) {
            *TENSOR_AT(both, 0, b, 0, t) = *TENSOR_AT(w_add, b, 0, t);
            *TENSOR_AT(both, 1, b, 0, t) = *TENSOR_AT(w_dot, b, 0, t);
        }
    const char *titles[] = {"additive, example 0", "additive, example 1",
                            "dot product, example 0", "dot product, example 1"};
    heatmap_options opt = {.titles = titles, .ntitles = 4};
    CHECK(heatmap_terminal(stdout, both, &opt));
    printf("\n");
    draw_heatmap(both, &opt, "05_additive_vs_dot");

    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(k20);
    tensor_free(out_add);
    tensor_free(out_dot);
    tensor_free(w_add);
    tensor_free(w_dot);
    tensor_free(both);
    additive_attention_free(&add);
    dot_attention_free(&dot);
    gsl_rng_free(rng);
}

static void cost(void)
{
    section("3. Cost");
    /*md
     * The memory of the broadcast grows with the product of the sequence
     * lengths and the hidden size: $B \cdot L_q \cdot L_k \cdot H$ doubles,
     * 160 for the toy. For $L_q = L_k = 1024$ and $H = 256$ that is 268
     * million doubles, about 2.1 GB, per example. The dot product needs only
     * the `(Lq, Lk)` scores, and it computes them with one matrix product,
     * which BLAS runs at close to the machine's peak. The additive pooling
     * does its $L_q L_k H$ additions and `tanh` calls element by element.
     * That is why transformers (the models built from multi-head attention,
     * after [Vaswani et al.
     * 2017](https://arxiv.org/abs/1706.03762)), and the multi-head module of chapter 08,
     * use the scaled dot product.
     */
    const double big = 1024.0 * 1024 * 256;
    printf("toy: B*Lq*Lk*H = 2*1*10*8 = %d doubles\n", 2 * 1 * 10 * 8);
    printf("Lq = Lk = 1024, H = 256: %.0f million doubles, %.1f GB per "
           "example\n", big / 1e6, big * sizeof(double) / 1e9);
}

int main(void)
{
    mha_program_init();
    d2l_toy();
    the_poolings_disagree();
    cost();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Queries and keys of different sizes: which of the two poolings handles
 *    them as they are, and how (name the two matrices that do it)? Section 1
 *    uses queries of 20 features and keys of 2. How does multi-head attention
 *    (chapter 08) let the dot product work with a `query_size` different from
 *    the `key_size`?
 * 2. Set `W_q` and `W_k` to zero. What are the scores, the weights and the
 *    output for the toy of section 2 (its values are section 1's: key t of
 *    either example holds 4t .. 4t + 3; valid_lens [2, 6]), and why?
 * 3. Suppose each head of chapter 08 (B = 2, 4 queries, 6 keys, 5 heads of 20
 *    features) used additive pooling with $H$ = 20. How many doubles would the
 *    broadcast features take, compared with the scores of the dot product?
 */
