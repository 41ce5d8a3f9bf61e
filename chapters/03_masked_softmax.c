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

/*md
 * Attention scores every key against a query and then needs *weights*:
 * non-negative numbers that sum to 1, so that the output is a weighted average
 * of the values. The softmax makes weights out of any real scores
 * $s_1, \dots, s_n$:
 *
 * $$\mathrm{softmax}(s)_j = \frac{e^{s_j}}{\sum_k e^{s_k}} = \frac{e^{s_j - m}}{\sum_k e^{s_k - m}}, \qquad m = \max_k s_k$$
 *
 * The second form is the same number, and it is the one to compute (section 1
 * shows why).
 *
 * Real batches also need *masking*. Sequences of different lengths are padded
 * to one length, and a query must give the padding weight exactly 0. A decoder
 * must not look at later positions. Both are expressed here as `valid_lens`:
 * row $(b, i)$ may only look at its first $\ell$ keys, and every score at a
 * position $j \ge \ell$ is replaced by $-10^6$ before the softmax, so its
 * weight underflows to exactly 0. `valid_lens` is `(B,)` (one length per
 * example) or `(B, Lq)` (one per query).
 *
 * Chapter 02 gave us matrix products. Chapter 04 feeds this softmax with the
 * scores $QK^\top/\sqrt{d}$ and has a complete attention head. The multi-head
 * module later has to stretch `valid_lens` to one entry per head (chapter 07).
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
    /*md
     * Computed literally, the softmax breaks on large scores: `exp(1000)` is
     * `inf` in double precision (anything above about 709.78 is), and
     * `inf / inf` is `NaN`. Subtracting the row's maximum $m$ first multiplies
     * numerator and denominator by the same $e^{-m}$, so the result is
     * unchanged. Now every exponent is $\le 0$, the largest term is $e^0 = 1$,
     * and nothing can overflow.
     *
     * The two printed rows show it: `[1000, 1001, 1002]` and `[0, 1, 2]` give
     * the same weights `[0.0900, 0.2447, 0.6652]`, because only differences of
     * scores matter ($1/(1 + e + e^2) = 0.0900$). Here is the row loop that
     * every softmax in the library runs, masked or not:
     *
     * @show src/softmax.c softmax_row
     *
     * Cost: a row of $n$ scores takes $n$ exponentials and about $3n$ other
     * operations, in three passes over a row that stays in cache. The weights
     * are a new tensor of the scores' shape.
     */
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
    /*md
     * d2l's example: scores `(2, 2, 4)` from a uniform draw, `valid_lens`
     * `[2, 3]`. Example 0 may use keys 0-1, example 1 keys 0-2, for every
     * query. `masked_softmax` checks the lengths first, then runs the row loop
     * above with each row's own length:
     *
     * @show src/softmax.c masked_impl
     *
     * Check row `(0, 0)` by hand: the valid scores are 0.5508 and 0.0707, so
     * the weights are $1/(1 + e^{0.0707 - 0.5508}) = 0.6178$ and $0.3822$, and
     * the masked scores 0.7081 and 0.8399 count for nothing: their weight is
     * $e^{-10^6 - 0.55}$, which underflows to exactly `0.0000`. The rows sum to
     * 1 (to all 15 printed digits), and the input scores are unchanged: the
     * result is a new tensor.
     */
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
    /*md
     * With `(B, Lq)` lengths each query row gets its own limit. Row `(0, 0)`
     * has length 1: one key is left, and its weight is exactly 1. Row `(0, 1)`
     * has length 3 and uses scores 0.2909, 0.1213, 0.5108, giving 0.3236,
     * 0.2731, 0.4032. Row `(1, 1)` has length 4, which masks nothing: it is the
     * plain softmax of its four scores. This is the form a causal mask takes in
     * section 5.
     */
    printf("valid_lens [[1, 3], [2, 4]]: in example 0 query 0 sees 1 key\n"
           "and query 1 sees 3; in example 1, 2 and 4 (all of them):\n\n");
    tensor *lens2, *w2;
    CHECK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens2));
    CHECK(masked_softmax(scores, lens2, &w2));
    tensor_print(stdout, w2, 4);
    printf("\nA length of 1 leaves one key: its weight is exactly %.1f.\n",
           *TENSOR_AT(w2, 0, 0, 0));

    section("4. A length of 0: uniform, not NaN");
    /*md
     * What if a row may see no key at all (length 0)? Every score becomes
     * $-10^6$, the shift by the maximum turns them all into 0, and each key
     * gets $e^0 / 4 = 0.25$: the uniform row printed for example 0. Example 1,
     * with length 4, is again the plain softmax.
     *
     * This is d2l's behaviour and the library keeps it, so its numbers match
     * d2l's. The printed note explains the alternative: with `-inf` instead of
     * $-10^6$, the maximum of the row is $-\infty$ and the shift computes
     * $-\infty - (-\infty)$, which is `NaN`. Neither answer is meaningful. A
     * query with nothing to look at should be ignored by whatever comes after.
     */
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
    /*md
     * In a decoder, position $i$ must not see later positions. As `valid_lens`
     * that is the `(B, L)` table whose every row is `1, 2, ..., L`: query $i$
     * sees keys $0, \dots, i$. With all scores equal (zero), query $i$ spreads
     * its weight evenly over $i + 1$ keys: 1, 0.5, 0.3333, 0.25, 0.2, 0.1667
     * down the diagonal.
     *
     * The heatmap shows the weights as a picture: row $i$ is query $i$, column
     * $j$ is key $j$, darker means more weight. Look for the lower triangle,
     * everything above the diagonal blank, and the shade fading down the rows
     * as each query shares its weight among more keys. In the terminal view a
     * cell shows which quarter of the colour scale its weight falls in; the PNG
     * below uses a continuous scale.
     *
     * The lengths are made by `causal_valid_lens` in `src/softmax.c` (and it is
     * one of the coding exercises below). Costs: the table is $B \cdot L$
     * numbers; the softmax still computes all $L^2$ entries per example, masked
     * or not.
     */
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
    /*md
     * Lengths are checked before anything is computed. A length larger than the
     * number of keys, a negative one, a fraction or NaN is refused with
     * `GSL_EINVAL` (status 4), and the message names the bad entry, its index
     * and both shapes, so you can find it in your data.
     */
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

/*md
 * ## Exercises
 *
 * 1. Compute by hand the weights of row `(0, 1)` in section 3 (scores 0.2909,
 *    0.1213, 0.5108, 0.5693, length 3) and compare them with the output.
 * 2. Multiply the two valid scores of row `(0, 0)` in section 2 by 10, then by
 *    0.1, and compute the weights again. Which limit makes the softmax pick the
 *    largest score, which makes it uniform? Keep the answer for chapter 04's
 *    division by $\sqrt{d}$.
 * 3. `valid_lens` can only hide the keys *after* a position. Which of these
 *    masks can be written as a `(B, Lq)` `valid_lens`, and which cannot: (a)
 *    causal; (b) padding at the start of a sequence instead of the end; (c) a
 *    window where query $i$ sees only keys $i-2$ to $i$?
 * 4. Coding: in the handout (`make handout`), `causal_valid_lens` is a blank.
 *    Write it: a `(batch, len)` tensor whose every row is `1, 2, ..., len`, and
 *    `GSL_EINVAL` with a message when `batch` or `len` is 0. In the handout,
 *    `make grade EXERCISE=causal_valid_lens` tells you when it passes.
 */
