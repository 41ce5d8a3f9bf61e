/* Chapter 05: additive attention, the other scoring function.
 *
 * The dot product needs queries and keys of the same size.  Additive
 * attention (Bahdanau et al.) lets them differ: it projects both into a
 * hidden space of num_hiddens features, adds them, and scores the sum
 * with a one-layer network:
 *
 *     score(q, k) = w_v . tanh(W_q q + W_k k)
 *
 * Shapes:
 *   queries (B, Lq, q_size)   keys (B, Lk, k_size)   values (B, Lk, dv)
 *   W_q (num_hiddens, q_size), W_k (num_hiddens, k_size), w_v (1, num_hiddens)
 *   features (B, Lq, Lk, num_hiddens): every query added to every key
 *   scores, weights (B, Lq, Lk); out (B, Lq, dv)
 */

/*md
 * The dot product of chapter 04 is one way to score a query against a key. It
 * needs queries and keys of the same size, and it has no parameters of its own.
 * Additive attention (Bahdanau et al.) is the other classic choice. It projects
 * the query and the key into a hidden space of $H$ features, adds them, and
 * scores the sum with a one-layer network:
 *
 * $$a(q, k) = w_v^\top \tanh(W_q q + W_k k), \qquad W_q \in \mathbb{R}^{H \times d_q},\; W_k \in \mathbb{R}^{H \times d_k},\; w_v \in \mathbb{R}^{H}$$
 *
 * Because $W_q$ and $W_k$ map to the same $H$, the query size $d_q$ and the key
 * size $d_k$ may differ. The rest is unchanged: the masked softmax turns the
 * scores into weights, and the weights average the values.
 *
 * d2l's formula for multi-head attention allows any pooling $f$ in each
 * head. d2l, and this library, use the scaled dot product. This chapter shows
 * the alternative and its price, so that the choice in chapter 08 is an
 * informed one. Chapter 06 then starts on the heads themselves.
 */

#include "lesson.h"

/* Largest |a - b| over two tensors of the same shape. */
static double max_abs_diff(const tensor *a, const tensor *b)
{
    double worst = 0;
    for (size_t i = 0; i < tensor_numel(a); i++) {
        double d = a->data[i] - b->data[i];
        worst = d > worst ? d : (-d > worst ? -d : worst);
    }
    return worst;
}

int main(void)
{
    mha_program_init();

    section("1. d2l's toy with queries of 20 features");
    /*md
     * The same toy as chapter 04, but the queries now have 20 features and the
     * keys 2: the dot product could not compare them at all. The additive
     * pooling is built with `key_size` 2, `query_size` 20 and 8 hidden units.
     * (Its layers are called `W_q`, `W_k` and `w_v` like the formula's, but
     * they are this pooling's own small layers, not the projections of
     * multi-head attention.) Read the trace from the top:
     *
     * - `W_q` maps the queries `(2, 1, 20)` to `(2, 1, 8)`, `W_k` the keys
     *   `(2, 10, 2)` to `(2, 10, 8)`: both now live in the same 8-feature
     *   space.
     * - The broadcast adds every query to every key: `(2, 1, 10, 8)`, one
     *   8-feature vector per (example, query, key), then `tanh`.
     * - `w_v` scores each of those vectors: `(2, 1, 10, 1)`, and a reshape (a
     *   view) drops the last axis of size 1.
     * - From here on it is chapter 04: masked softmax, then `weights V`.
     *
     * @show src/attention.c additive_attention_forward
     *
     * The broadcast is the step to look at. It materialises the whole
     * `(B, Lq, Lk, H)` tensor:
     *
     * @show src/attention.c broadcast_tanh
     *
     * The output is the same as chapter 04's, `[2, 3, 4, 5]` and
     * `[10, 11, 12, 13]`: all keys are equal, so every valid key gets the same
     * score, whatever the scoring function, and the weights are 1/2 and 1/6
     * again. Cost: the features are $2 \cdot 1 \cdot 10 \cdot 8 = 160$ doubles,
     * and the layers cost $2 \cdot 2 \cdot 20 \cdot 8 = 640$ flops for `W_q`,
     * $2 \cdot 20 \cdot 2 \cdot 8 = 640$ for `W_k` and 320 for `w_v`.
     */
    printf("queries (2, 1, 20) from a standard normal (seed 5), keys\n"
           "(2, 10, 2) all ones, values (2, 10, 4) = 0..39 per example,\n"
           "valid_lens [2, 6]; 8 hidden units; the weights drawn from\n"
           "PyTorch's default U(-1/sqrt(in), 1/sqrt(in)).\n\n");
    gsl_rng *rng = mha_rng_new(5);
    if (!rng)
        return 1;
    tensor *q, *k, *v, *lens, *out;
    CHECK(tensor_alloc(SHAPE(2, 1, 20), &q)); // (B, Lq, q_size)
    CHECK(tensor_alloc(SHAPE(2, 10, 2), &k)); // (B, Lk, k_size)
    CHECK(tensor_alloc(SHAPE(2, 10, 4), &v)); // (B, Lk, dv)
    CHECK(tensor_set_names(q, "B, Lq, q_size"));
    CHECK(tensor_set_names(k, "B, Lk, k_size"));
    CHECK(tensor_set_names(v, "B, Lk, dv"));
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill(k, 1);
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 10; t++)
            for (size_t j = 0; j < 4; j++)
                *TENSOR_AT(v, b, t, j) = (double)(t * 4 + j);
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 6}, &lens));

    additive_attention add;
    CHECK(additive_attention_init(&add, 2, 20, 8, 0.1));
    linear_reset_pytorch(&add.W_q, rng);
    linear_reset_pytorch(&add.W_k, rng);
    linear_reset_pytorch(&add.w_v, rng);
    trace_to(stdout);
    CHECK(additive_attention_forward(&add, q, k, v, lens, &out));
    trace_to(NULL);
    printf("\nThe 4-D step is the broadcast: each of the Lq queries is added\n"
           "to each of the Lk keys in the hidden space, B*Lq*Lk*num_hiddens\n"
           "numbers, before w_v scores each sum.\n\n");
    printf("out (2, 1, 4):\n");
    tensor_print(stdout, out, 4);
    printf("\nThe same numbers as the dot product gave in chapter 04: the\n"
           "keys are all equal, so whatever the scoring function, every\n"
           "valid key scores the same and the weights are uniform:\n\n");
    tensor_print(stdout, add.weights, 4);

    section("2. Same inputs, different keys: the two poolings disagree");
    /*md
     * Now the keys get 20 random features, so both poolings can score them, and
     * the two sets of weights can be compared on the same inputs. They respect
     * the same mask (zeros past keys 1 and 5), but they rank the keys
     * differently. In example 0 the additive pooling gives 0.4584 and 0.5416,
     * the dot product 0.3815 and 0.6185. In example 1 the dot product puts
     * 0.5089 on key 1, where the additive pooling puts 0.1529: the largest
     * difference, 0.3560.
     *
     * In the heatmap all four panels share one colour scale (0 to 0.619), so
     * shades can be compared across panels. Look at example 1: the additive row
     * is spread out, with no key above 0.28, while the dot-product row has one
     * dark cell at key 1. Neither is better; both are untrained. The dot
     * product compares the raw features; the additive pooling scores them
     * through its own random layers. Training is what makes either one useful.
     */
    printf("Give the keys 20 random features too (seed 5 continues), so\n"
           "the dot product can score them, and compare the weights of\n"
           "both poolings on the same queries, keys and lengths:\n\n");
    tensor *k20, *out_add, *out_dot;
    CHECK(tensor_alloc(SHAPE(2, 10, 20), &k20));
    tensor_fill_normal(k20, rng, 0, 1);
    additive_attention add20;
    CHECK(additive_attention_init(&add20, 20, 20, 8, 0));
    linear_reset_pytorch(&add20.W_q, rng);
    linear_reset_pytorch(&add20.W_k, rng);
    linear_reset_pytorch(&add20.w_v, rng);
    dot_attention dot;
    CHECK(dot_attention_init(&dot, 0));
    CHECK(additive_attention_forward(&add20, q, k20, v, lens, &out_add));
    CHECK(dot_attention_forward(&dot, q, k20, v, lens, &out_dot));
    printf("additive weights:\n");
    tensor_print(stdout, add20.weights, 4);
    printf("dot-product weights:\n");
    tensor_print(stdout, dot.weights, 4);
    printf("\nlargest difference between the two sets of weights: %.4f\n",
           max_abs_diff(add20.weights, dot.weights));
    printf("Both respect the mask, and both are legitimate: the dot\n"
           "product compares the raw features (divided by sqrt(20)), the\n"
           "additive pooling scores through its own small random network.\n"
           "Untrained, neither ranking means anything yet; training is\n"
           "what turns either scoring function into a useful one.\n\n");

    tensor *both;
    CHECK(tensor_alloc(SHAPE(2, 2, 1, 10), &both)); // (pooling, B, Lq, Lk)
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 10; t++) {
            *TENSOR_AT(both, 0, b, 0, t) = *TENSOR_AT(add20.weights, b, 0, t);
            *TENSOR_AT(both, 1, b, 0, t) = *TENSOR_AT(dot.weights, b, 0, t);
        }
    const char *titles[] = {"additive, example 0", "additive, example 1",
                            "dot product, example 0", "dot product, example 1"};
    heatmap_options opt = {.titles = titles, .ntitles = 4};
    CHECK(heatmap_terminal(stdout, both, &opt));
    printf("\n");
    draw_heatmap(both, &opt, "05_additive_vs_dot");

    section("3. Cost");
    /*md
     * The memory of the broadcast grows with the product of the sequence
     * lengths and the hidden size: $B \cdot L_q \cdot L_k \cdot H$ doubles. For
     * $L_q = L_k = 1024$ and $H = 256$ that is 268 million doubles, about 2.1
     * GB, per example. The dot product needs only the `(Lq, Lk)` scores, and it
     * computes them with one matrix product, which BLAS runs at close to the
     * machine's peak. The additive pooling does its $L_q L_k H$ additions and
     * `tanh` calls element by element. That is why transformers, and the
     * multi-head module of chapter 08, use the scaled dot product.
     */
    printf("Additive attention materialises B*Lq*Lk*num_hiddens features\n"
           "(here 2*1*10*8 = 160); with Lq = Lk = 1024 and 256 hidden units\n"
           "that is 268 million doubles per example.  The dot product needs\n"
           "only the (Lq, Lk) scores, and runs as one matrix product: that\n"
           "is why transformers use it.\n");

    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(k20);
    tensor_free(out_add);
    tensor_free(out_dot);
    tensor_free(both);
    additive_attention_free(&add);
    additive_attention_free(&add20);
    dot_attention_free(&dot);
    gsl_rng_free(rng);
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
 *    output for the toy of section 2, and why?
 * 3. Suppose each head of chapter 08 (B = 2, 4 queries, 6 keys, 5 heads of 20
 *    features) used additive pooling with $H$ = 20. How many doubles would the
 *    broadcast features take, compared with the scores of the dot product?
 */
