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
#include <math.h>

#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, n = 4, D = 100, h = 5;

    section("1. X attends to itself");
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
