/* Chapter 03: softmax, masked softmax, and causal masks.
 *
 * Attention turns scores into weights with a softmax: every weight is
 * positive and each query's weights sum to 1, so the output is a weighted
 * average of the values.  Padding and "no peeking ahead" are expressed by
 * masking: some keys must get weight exactly 0.
 *
 * Shapes:
 *   scores      (B, Lq, Lk)  one row of Lk key scores per query
 *   valid_lens  (B,)         one length per example, for all its queries
 *               (B, Lq)      one length per query
 *   weights     (B, Lq, Lk)  rows sum to 1; keys past the length get 0
 */
#include <math.h>

#include "lesson.h"

/* Sum of row (b, i) of a (B, Lq, Lk) tensor. */
static double row_sum(const tensor *w, size_t b, size_t i)
{
    double s = 0;
    for (size_t t = 0; t < w->shape[2]; t++)
        s += *TENSOR_AT(w, b, i, t);
    return s;
}

int main(void)
{
    mha_program_init();

    section("1. Softmax, and why it subtracts the maximum");
    printf("softmax(x)_j = exp(x_j) / sum_k exp(x_k).  Done literally, it\n"
           "breaks as soon as a score passes about 709, where exp overflows:\n\n");
    double big[] = {1000, 1001, 1002};
    double naive_sum = exp(big[0]) + exp(big[1]) + exp(big[2]);
    double literal = exp(big[0]) / naive_sum;
    printf("literal:  exp(1000) / (exp(1000) + exp(1001) + exp(1002)) = %s\n",
           isnan(literal) ? "NaN (inf / inf)" : "a number");
    printf("\nSubtracting the row's maximum first changes nothing in exact\n"
           "arithmetic (the factor exp(-max) cancels) and keeps every\n"
           "exponent <= 0:\n\n");
    tensor *x, *sx;
    CHECK(tensor_from_array(SHAPE(2, 3), (double[]){1000, 1001, 1002, 0, 1, 2},
                            &x));
    CHECK(softmax_lastdim(x, &sx));
    tensor_print(stdout, x, 0);
    tensor_print(stdout, sx, 4);
    printf("Both rows give the same weights: only differences of scores\n"
           "matter.\n");

    section("2. Masked softmax with one length per example");
    printf("d2l's example: scores (2, 2, 4) drawn uniformly from [0, 1)\n"
           "(seed 3), valid_lens [2, 3].  Example 0 may use its first 2\n"
           "keys, example 1 its first 3.  Masked scores become -1e6 before\n"
           "the softmax, so their weights underflow to exactly 0:\n\n");
    gsl_rng *rng = mha_rng_new(3);
    if (!rng)
        return 1;
    tensor *scores, *lens1, *w1;
    CHECK(tensor_alloc(SHAPE(2, 2, 4), &scores)); // (B, Lq, Lk)
    CHECK(tensor_set_names(scores, "B, Lq, Lk"));
    tensor_fill_uniform(scores, rng, 0, 1);
    tensor_print(stdout, scores, 4);
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 3}, &lens1)); // (B,)
    printf("\n");
    trace_to(stdout);
    CHECK(masked_softmax(scores, lens1, &w1));
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, w1, 4);
    printf("\nrow sums: %.15f %.15f %.15f %.15f\n", row_sum(w1, 0, 0),
           row_sum(w1, 0, 1), row_sum(w1, 1, 0), row_sum(w1, 1, 1));
    printf("masked weights are exactly zero: %s\n",
           yes_no(*TENSOR_AT(w1, 0, 0, 2) == 0.0 && *TENSOR_AT(w1, 0, 1, 3) == 0.0 &&
                  *TENSOR_AT(w1, 1, 0, 3) == 0.0));
    printf("the scores we passed in are unchanged: %s\n",
           yes_no(*TENSOR_AT(scores, 0, 0, 2) > 0));

    section("3. One length per query");
    printf("valid_lens [[1, 3], [2, 4]]: in example 0 query 0 sees 1 key\n"
           "and query 1 sees 3; in example 1, 2 and 4 (all of them):\n\n");
    tensor *lens2, *w2;
    CHECK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens2));
    CHECK(masked_softmax(scores, lens2, &w2));
    tensor_print(stdout, w2, 4);
    printf("\nA length of 1 leaves one key: its weight is exactly %.1f.\n",
           *TENSOR_AT(w2, 0, 0, 0));

    section("4. A length of 0: uniform, not NaN");
    printf("If a row may see no key at all, every score is -1e6, the\n"
           "shift makes them all 0, and the row comes out uniform:\n\n");
    tensor *lens0, *w0;
    CHECK(tensor_from_array(SHAPE(2), (double[]){0, 4}, &lens0));
    CHECK(masked_softmax(scores, lens0, &w0));
    tensor_print(stdout, w0, 4);
    printf("\nThat is d2l's choice, and this library keeps it.  PyTorch's\n"
           "usual mask, scores.masked_fill(mask, -inf), gives NaN here\n"
           "(exp(-inf - (-inf))): a fully padded query must be dropped by\n"
           "the caller there.  Here its output is the plain mean of all\n"
           "values, which downstream masking must then ignore.\n");

    section("5. A causal mask is a 2-D valid_lens");
    printf("In a decoder, query i may only look at keys 0..i.  That is\n"
           "valid_lens (B, L) with rows 1, 2, ..., L:\n\n");
    tensor *causal, *cscores, *cw;
    CHECK(causal_valid_lens(1, 6, &causal));
    tensor_print(stdout, causal, 0);
    CHECK(tensor_alloc(SHAPE(1, 6, 6), &cscores)); // (B, L, L), all zero
    CHECK(masked_softmax(cscores, causal, &cw));
    printf("\nWith equal scores, query i spreads its weight evenly over\n"
           "keys 0..i: a lower triangle.\n\n");
    tensor_print(stdout, cw, 4);
    printf("\n");
    heatmap_options opt = {.title = "causal mask, equal scores"};
    CHECK(heatmap_terminal(stdout, cw, &opt));
    printf("\n");
    draw_heatmap(cw, &opt, "03_causal");

    section("6. Lengths that make no sense are refused");
    tensor *lens_bad, *wbad;
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 5}, &lens_bad));
    int status = masked_softmax(scores, lens_bad, &wbad);
    printf("valid_lens [2, 5] with 4 keys: status %d\n  %s\n", status,
           mha_last_error());
    lens_bad->data[1] = -1;
    status = masked_softmax(scores, lens_bad, &wbad);
    printf("valid_lens [2, -1]: status %d\n  %s\n", status, mha_last_error());

    tensor_free(x);
    tensor_free(sx);
    tensor_free(scores);
    tensor_free(lens1);
    tensor_free(w1);
    tensor_free(lens2);
    tensor_free(w2);
    tensor_free(lens0);
    tensor_free(w0);
    tensor_free(causal);
    tensor_free(cscores);
    tensor_free(cw);
    tensor_free(lens_bad);
    gsl_rng_free(rng);
    return 0;
}
