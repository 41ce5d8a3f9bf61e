/* Chapter 04: scaled dot-product attention, one head.
 *
 * A query asks, the keys answer, the values are what is handed back.  Each
 * query scores every key with a dot product, the masked softmax turns the
 * scores into weights, and the output is the weighted average of the
 * values:
 *
 *     out = softmax(Q K^T / sqrt(d)) V
 *
 * Shapes:
 *   queries (B, Lq, d)    keys (B, Lk, d)    values (B, Lk, dv)
 *   scores and weights (B, Lq, Lk)           out (B, Lq, dv)
 */
#include <math.h>

#include <gsl/gsl_randist.h>

#include "lesson.h"

int main(void)
{
    mha_program_init();

    section("1. Reading a heatmap: the identity");
    printf("A heatmap draws a (queries, keys) matrix of weights: row i is\n"
           "query i, column j key j, darker means more weight.  The 10 x 10\n"
           "identity is attention where each query looks only at the key\n"
           "with its own index:\n\n");
    tensor *eye;
    CHECK(tensor_alloc(SHAPE(10, 10), &eye));
    for (size_t i = 0; i < 10; i++)
        *TENSOR_AT(eye, i, i) = 1;
    heatmap_options eye_opt = {.title = "the identity: query i looks at key i"};
    CHECK(heatmap_terminal(stdout, eye, &eye_opt));
    printf("\n");
    draw_heatmap(eye, &eye_opt, "04_eye");

    section("2. d2l's toy: two examples, ten key-value pairs");
    printf("queries (2, 1, 2) from a standard normal (seed 4); keys\n"
           "(2, 10, 2) all ones; values (2, 10, 4) hold 0..39 as a (10, 4)\n"
           "block in each example; valid_lens [2, 6].\n\n");
    gsl_rng *rng = mha_rng_new(4);
    if (!rng)
        return 1;
    tensor *q, *k, *v, *lens, *out;
    CHECK(tensor_alloc(SHAPE(2, 1, 2), &q));  // (B, Lq, d)
    CHECK(tensor_alloc(SHAPE(2, 10, 2), &k)); // (B, Lk, d)
    CHECK(tensor_alloc(SHAPE(2, 10, 4), &v)); // (B, Lk, dv)
    CHECK(tensor_set_names(q, "B, Lq, d"));
    CHECK(tensor_set_names(k, "B, Lk, d"));
    CHECK(tensor_set_names(v, "B, Lk, dv"));
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill(k, 1);
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 10; t++)
            for (size_t j = 0; j < 4; j++)
                *TENSOR_AT(v, b, t, j) = (double)(t * 4 + j);
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 6}, &lens));
    printf("queries:\n");
    tensor_print(stdout, q, 4);

    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0.5)); // dropout 0.5, but evaluation mode
    printf("\n");
    trace_to(stdout);
    CHECK(dot_attention_forward(&attn, q, k, v, lens, &out));
    trace_to(NULL);
    printf("\nout (2, 1, 4):\n");
    tensor_print(stdout, out, 4);
    printf("\nEvery key is the same vector, so every key gets the same\n"
           "score and the weights are uniform over the valid keys: example\n"
           "0 averages value rows 0-1, example 1 rows 0-5.  By hand:\n"
           "  (0..3 + 4..7) / 2      = [2, 3, 4, 5]\n"
           "  (0..3 + ... + 20..23) / 6 = [10, 11, 12, 13]\n"
           "whatever the queries are.\n\n");
    printf("weights (2, 1, 10):\n");
    tensor_print(stdout, attn.weights, 4);
    printf("\n");
    tensor *wgrid;
    CHECK(tensor_reshape(attn.weights, DIMS(1, 1, 2, 10), NULL, &wgrid));
    heatmap_options w_opt = {.title = "dot-product weights, valid_lens [2, 6]"};
    CHECK(heatmap_terminal(stdout, wgrid, &w_opt));
    printf("\n");
    draw_heatmap(wgrid, &w_opt, "04_weights");

    section("3. Why divide by sqrt(d)?");
    printf("If the entries of q and k are independent with mean 0 and\n"
           "variance 1, q . k is a sum of d such products: variance d.\n"
           "Large d makes the scores spread out, the softmax saturates\n"
           "to one key, and learning stalls.  Dividing by sqrt(d) brings\n"
           "the variance back to 1.  Measured over 20000 random pairs:\n\n");
    printf("     d   var(q . k)   var(q . k / sqrt(d))\n");
    size_t dims[] = {2, 64, 512};
    for (size_t n = 0; n < 3; n++) {
        size_t d = dims[n];
        double sum = 0, sum2 = 0;
        const int pairs = 20000;
        for (int s = 0; s < pairs; s++) {
            double dot = 0;
            for (size_t j = 0; j < d; j++)
                dot += gsl_ran_gaussian_ziggurat(rng, 1) *
                       gsl_ran_gaussian_ziggurat(rng, 1);
            sum += dot;
            sum2 += dot * dot;
        }
        double var = sum2 / pairs - (sum / pairs) * (sum / pairs);
        printf("  %4zu   %10.1f   %20.2f\n", d, var, var / (double)d);
    }

    section("4. Cost");
    printf("Q K^T is B*Lq*Lk dot products of length d, and weights V another\n"
           "B*Lq*Lk*dv multiply-adds: 2*B*Lq*Lk*(d + dv) flops, and a\n"
           "(B, Lq, Lk) weight matrix in memory.  Both grow with the square\n"
           "of the sequence length when Lq = Lk = L.\n");

    tensor_free(eye);
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(wgrid);
    dot_attention_free(&attn);
    gsl_rng_free(rng);
    return 0;
}
