/* Chapter 08: the multi-head attention module.
 *
 * Everything so far, put together: project queries, keys and values with
 * W_q, W_k, W_v; split the d_model features into h heads (chapter 06);
 * repeat valid_lens per head (chapter 07); run scaled dot-product
 * attention (chapter 04) on all B*h heads at once; put the heads side by
 * side again; mix them with W_o.
 *
 * Shapes (d2l's example): B = 2, Lq = 4 queries, Lk = 6 key-value pairs,
 * d_model = num_hiddens = 100, h = 5 heads of p = 20 features.
 *   queries (B, Lq, d_q)  keys (B, Lk, d_k)  values (B, Lk, d_v)
 *   out (B, Lq, d_model); per-head weights (B, h, Lq, Lk)
 */
#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, Lq = 4, Lk = 6, D = 100, h = 5;

    section("1. d2l's example, with its whole trace");
    printf("num_hiddens = %zu, num_heads = %zu, batch %zu, %zu queries, %zu\n"
           "key-value pairs, valid_lens [3, 2].  Queries X and keys/values\n"
           "Y are all ones, as in d2l.  The weights are Xavier uniform\n"
           "(seed 8), dropout 0.5 but evaluation mode: no dropout.\n\n",
           D, h, B, Lq, Lk);
    gsl_rng *rng = mha_rng_new(8);
    if (!rng)
        return 1;
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h, .dropout = 0.5};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);

    tensor *x, *y, *lens, *out;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &x)); // (B, Lq, d_q)
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &y)); // (B, Lk, d_k) = (B, Lk, d_v)
    tensor_fill(x, 1);
    tensor_fill(y, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    trace_to(stdout);
    CHECK(multihead_forward(&m, x, y, y, lens, &out));
    trace_to(NULL);
    char s[TRACE_SHAPE_MAX];
    printf("\noutput shape: %s\n", tensor_shape_str(out, s, sizeof s));
    printf("\nReading the trace: the three projections are `new` (one dgemm\n"
           "each); in each split the reshape and permute are views and the\n"
           "last reshape copies (B = 2); attention runs on (B*h, ...) =\n"
           "(10, ...) as if there were 10 examples; transpose_output copies\n"
           "once to put the heads side by side; W_o computes the output.\n");

    section("2. What the heads see when every input is the same");
    printf("All keys are equal, so every head gives every valid key the\n"
           "same score: example 0 spreads 1/3 over keys 0-2, example 1\n"
           "1/2 over keys 0-1.  Head 0 of each example:\n\n");
    for (size_t b = 0; b < B; b++) {
        printf("example %zu, head 0, query 0:", b);
        for (size_t t = 0; t < Lk; t++)
            printf(" %.4f", *TENSOR_AT(m.weights, b, 0, 0, t));
        printf("\n");
    }

    section("3. Inputs worth looking at");
    printf("Now queries and keys drawn from a normal with standard\n"
           "deviation 2 (seed 8 continues), the same weights.  Each head\n"
           "projects them into its own 20-feature subspace, so each head\n"
           "scores the same keys differently:\n\n");
    tensor *xq, *xk, *out2;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &xq));
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &xk));
    tensor_fill_normal(xq, rng, 0, 2);
    tensor_fill_normal(xk, rng, 0, 2);
    CHECK(multihead_forward(&m, xq, xk, xk, lens, &out2));
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
    draw_heatmap(m.weights, &opt, "08_heads");
    printf("\nWhat to see: in every panel of example 0 the keys 3-5 are\n"
           "blank, and in example 1 the keys 2-5 (valid_lens [3, 2]): the\n"
           "mask holds in every head.  Within the valid keys the heads\n"
           "disagree: for the same query one head favours one key, another\n"
           "head another.  That is the point of several heads: each can\n"
           "attend to something different, and W_o combines what they\n"
           "found.\n");

    section("4. Cost");
    printf("Four projections of 2*B*L*d_model^2 flops each dominate for\n"
           "short sequences; the attention itself is 4*B*Lq*Lk*d_model flops\n"
           "(summed over heads: h heads of p = d_model/h features cost the\n"
           "same as one head of d_model).  Splitting into heads is free in\n"
           "flops: it only costs the two copies in the trace.\n");

    tensor_free(x);
    tensor_free(y);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(xq);
    tensor_free(xk);
    tensor_free(out2);
    multihead_free(&m);
    gsl_rng_free(rng);
    return 0;
}
