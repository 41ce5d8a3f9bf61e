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
