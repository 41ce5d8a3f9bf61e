/* Chapter 03: softmax, masked softmax, and causal masks.
 *
 * Shows the stable softmax, masked_softmax with one length per example
 * and per query, a length of 0, d2l's -1e6 fill and where it leaks, a
 * causal mask with its heatmap, and bad lengths refused.  Run it with `make ch03`; the prose is docs/03_*.md.
 */

/*md
 * Attention scores every key against a query and then needs *weights*:
 * non-negative numbers that sum to 1, so that the output is a weighted average
 * of the values. The [softmax](glossary.md#softmax) makes weights out of any real scores
 * $s_1, \dots, s_n$:
 *
 * $$\mathrm{softmax}(s)_j = \frac{e^{s_j}}{\sum_k e^{s_k}} = \frac{e^{s_j - m}}{\sum_k e^{s_k - m}}, \qquad m = \max_k s_k$$
 *
 * The second form is the same number, and it is the one to compute (section 1
 * shows why).
 *
 * Real batches also need *[masking](glossary.md#mask)*. Sequences of different lengths are *padded*
 * to one length (filled up with positions that mean nothing), and a query must
 * give the padding weight exactly 0. And a *decoder*, a model that writes its
 * output one position at a time (a translator, a text generator), must not look
 * at later positions: when it is trained (chapter 13) on whole sequences,
 * position $i$ may not peek at the answer in position $i + 1$. Both are
 * expressed here as [`valid_lens`](glossary.md#valid_lens): row $(b, i)$ may only look at its first
 * $\ell$ keys. The softmax runs over those $\ell$ scores alone, and every key
 * at a position $j \ge \ell$ gets weight exactly 0, whatever its score.
 * `valid_lens` is `(B,)` (one length per example) or `(B, Lq)` (one per query).
 * ([d2l](https://d2l.ai/chapter_attention-mechanisms-and-transformers/attention-scoring-functions.html) masks another way, with a score of $-10^6$; section 5 shows it, and the
 * rows where it fails.)
 *
 * Chapter 02 gave us matrix products. Chapter 04 feeds this softmax with the
 * scores $QK^\top/\sqrt{d}$ and has a complete attention head. The multi-head
 * module later has to stretch `valid_lens` to one entry per head (chapter 07).
 */

#include <float.h>
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

/* d2l's scores: (B, Lq, Lk) = (2, 2, 4) drawn uniformly from [0, 1) with
 * random seed 3.  The caller frees them. */
static tensor *d2l_scores(void)
{
    gsl_rng *rng = mha_rng_new(3);
    if (!rng)
        exit(1);
    tensor *scores;
    CHECK(tensor_alloc(SHAPE(2, 2, 4), &scores)); // (B, Lq, Lk)
    CHECK(tensor_set_names(scores, "B, Lq, Lk"));
    tensor_fill_uniform(scores, rng, 0, 1);
    gsl_rng_free(rng);
    return scores;
}

static void softmax_subtracts_the_maximum(void)
{
    section("1. Softmax, and why it subtracts the maximum");
    /*md
     * Computed literally, the softmax breaks on large scores: `exp(1000)` is
     * `inf` in double precision (anything above $\ln(\mathrm{DBL\_MAX})$, the
     * printed 709.78, is), and `inf / inf` is `NaN`. Subtracting the row's
     * maximum $m$ first multiplies numerator and denominator by the same
     * $e^{-m}$, so the result is unchanged. Now every exponent is $\le 0$, the
     * largest term is $e^0 = 1$, and nothing can overflow.
     *
     * The two printed rows show it: `[1000, 1001, 1002]` and `[0, 1, 2]` give
     * the same weights `[0.0900, 0.2447, 0.6652]`, because only differences of
     * scores matter ($1/(1 + e + e^2) = 0.0900$). Here is the row loop that
     * every softmax in the library runs, masked or not (a row that sees
     * `valid` keys takes its maximum and its sum over those keys only):
     *
     * @show src/nn/softmax.c softmax_row
     *
     * Cost: a row of $n$ scores takes $n$ exponentials and about $3n$ other
     * operations, in three passes over a row that stays in cache. The weights
     * are a new tensor of the scores' shape.
     */
    double big[] = {1000, 1001, 1002};
    double literal = exp(big[0]) / (exp(big[0]) + exp(big[1]) + exp(big[2]));
    printf("exp overflows above ln(DBL_MAX) = %.2f\n", log(DBL_MAX));
    printf("literal:  exp(1000) / (exp(1000) + exp(1001) + exp(1002)) = %s\n\n",
           isnan(literal) ? "NaN (inf / inf)" : "a number");
    tensor *x, *sx;
    CHECK(tensor_from_array(SHAPE(2, 3), (double[]){1000, 1001, 1002, 0, 1, 2},
                            &x));
    CHECK(softmax_lastdim(x, &sx));
    printf("scores:\n");
    tensor_print(stdout, x, 0);
    printf("softmax, shifted by the row maximum:\n");
    tensor_print(stdout, sx, 4);
    tensor_free(x);
    tensor_free(sx);
}

static void one_length_per_example(void)
{
    section("2. Masked softmax with one length per example");
    /*md
     * d2l's example: scores `(2, 2, 4)` drawn uniformly from $[0, 1)$ (random
     * seed 3), `valid_lens` `[2, 3]`. Example 0 may use keys 0-1, example 1
     * keys 0-2, for every query. `masked_softmax` is a trace line and
     * two steps. The line, `RECORD_OF`, is its trace line, printed when it returns as
     * chapter 02's `RECORD` is: the scores in, the weights out, and
     * `valid_lens` read on the side (`MASKED_INPUTS`), so that the step's
     * text names its shape. `RECORD(x, out, ...)` is the short form for
     * one input; `RECORD_OF` also takes the record's kind and how its
     * inputs are joined: `TRACE_NEW` (new numbers; `TRACE_VIEW` and
     * `TRACE_COPY` are the trace's other two kinds) and `TRACE_LIST`
     * (inputs listed with commas; `TRACE_MATMUL` joins two with `@`,
     * `TRACE_SUM` with `+`). The first step, `masked_check`, refuses a
     * bad shape or length before anything is computed (its messages are
     * below, with the chapter's other code); the second, `masked_rows`,
     * does the work. Chapter 04's scaled version shares both:
     *
     * @show src/nn/softmax.c masked_softmax
     *
     * `masked_rows` runs the row loop above with each row's own length:
     *
     * @show src/nn/softmax.c masked_rows
     *
     * Check row `(0, 0)` by hand: the valid scores are 0.5508 and 0.0707, so
     * the weights are $1/(1 + e^{0.0707 - 0.5508}) = 0.6178$ and $0.3822$, and
     * the masked scores 0.7081 and 0.8399 count for nothing: they are never
     * read, and their weight is exactly `0.0000`, though both are larger than
     * the valid ones. The rows sum to 1 (to all 15 printed digits), and the
     * input scores are unchanged: the result is a new tensor.
     */
    tensor *scores = d2l_scores(), *lens, *w;
    tensor_print(stdout, scores, 4);
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 3}, &lens)); // (B,)
    printf("\n");
    trace_to(stdout);
    CHECK(masked_softmax(scores, lens, &w));
    trace_to(NULL);
    printf("\n");
    tensor_print(stdout, w, 4);
    printf("\nrow sums: %.15f %.15f %.15f %.15f\n", row_sum(w, 0, 0),
           row_sum(w, 0, 1), row_sum(w, 1, 0), row_sum(w, 1, 1));
    printf("masked weights are exactly zero: %s\n",
           yes_no(*TENSOR_AT(w, 0, 0, 2) == 0.0 && *TENSOR_AT(w, 0, 1, 3) == 0.0 &&
                  *TENSOR_AT(w, 1, 0, 3) == 0.0));
    printf("the scores we passed in are unchanged: %s\n",
           yes_no(*TENSOR_AT(scores, 0, 0, 2) > 0));
    tensor_free(scores);
    tensor_free(lens);
    tensor_free(w);
}

static void one_length_per_query(void)
{
    section("3. One length per query");
    /*md
     * With `(B, Lq)` lengths each query row gets its own limit. Here they are
     * `[[1, 3], [2, 4]]`: in example 0, query 0 sees 1 key and query 1 sees 3;
     * in example 1, 2 and 4 (all of them). Row `(0, 0)` has one key left, and
     * its weight is exactly 1. Row `(0, 1)` uses scores 0.2909, 0.1213,
     * 0.5108, giving 0.3236, 0.2731, 0.4032. Row `(1, 1)` has length 4, which
     * masks nothing: it is the plain softmax of its four scores. This is the
     * form a [causal](glossary.md#causal) mask takes in section 6.
     */
    tensor *scores = d2l_scores(), *lens, *w;
    CHECK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    CHECK(masked_softmax(scores, lens, &w));
    tensor_print(stdout, w, 4);
    printf("\nweight of the one key of row (0, 0): %.1f\n",
           *TENSOR_AT(w, 0, 0, 0));
    tensor_free(scores);
    tensor_free(lens);
    tensor_free(w);
}

static void length_zero(void)
{
    section("4. A length of 0: uniform, not NaN");
    /*md
     * What if a row may see no key at all (length 0)? There is nothing to take
     * a softmax over, so some rule must decide. `masked_softmax` takes d2l's,
     * and so does the module built on it in chapter 08: every
     * key gets the same weight, $1/4 = 0.25$ here, the uniform row printed for
     * example 0 (lengths `[0, 4]`). Example 1, with length 4, is again the
     * plain softmax. (In d2l the rule falls out of its mask: every score
     * becomes $-10^6$ and the shift by the maximum turns them all into 0.)
     *
     * PyTorch's usual mask, `scores.masked_fill(mask, -inf)`, gives `NaN`
     * instead: the maximum of the row is $-\infty$ and the shift computes
     * $-\infty - (-\infty)$. Neither answer is meaningful. Here a fully
     * masked query's output is the plain mean of all the values, and whatever
     * comes after must ignore it, as it must ignore the padding. Where a
     * causal mask is asked for (chapter 16), a row that sees no key is
     * refused instead: the mean of all the values would include the future.
     * Chapter 11's head-major variant and chapter 18's PyTorch masks refuse
     * it too, each saying why; chapter 18 puts the rules side by side.
     */
    tensor *scores = d2l_scores(), *lens, *w;
    CHECK(tensor_from_array(SHAPE(2), (double[]){0, 4}, &lens));
    CHECK(masked_softmax(scores, lens, &w));
    tensor_print(stdout, w, 4);
    tensor_free(scores);
    tensor_free(lens);
    tensor_free(w);
}

/* d2l's masked_softmax: every score past the row's length becomes
 * D2L_MASK_VALUE, then the plain softmax of the whole row.  x is (1, 1, Lk);
 * the caller frees the result. */
#define D2L_MASK_VALUE -1e6
static tensor *d2l_masked_softmax(const tensor *x, size_t valid)
{
    tensor *filled, *w;
    CHECK(tensor_contiguous(x, &filled));
    for (size_t j = valid; j < x->shape[2]; j++)
        *TENSOR_AT(filled, 0, 0, j) = D2L_MASK_VALUE;
    CHECK(softmax_lastdim(filled, &w));
    tensor_free(filled);
    return w;
}

static void where_minus_1e6_leaks(void)
{
    section("5. d2l's -1e6, and where it leaks");
    /*md
     * d2l masks differently: it replaces every score at $j \ge \ell$ by
     * $-10^6$ and takes the plain softmax of the whole row. A masked key then
     * gets $e^{-10^6 - m}$ over the sum, where $m$ is the row's maximum. For
     * every ordinary row that is exactly 0: $e^{x}$ is 0 in double precision
     * below about $x = -745$ (the printed `exp(-746)`), and $-10^6 - m$ is far
     * below that.
     *
     * But a score can be anything. When every visible score is lower than
     * $-10^6 - 745$, the masked keys *are* the maximum, and they take the
     * weight. The row printed first has one visible key of score
     * $-3 \cdot 10^6$ (a query $(1000, 0)$ against a key $(-3000, 0)$ makes it)
     * and two
     * masked keys: d2l's fill gives the masked keys half the weight each and the
     * visible key none, the opposite of the mask. For a causal mask that is a
     * query reading the future; nothing signals it. The library's softmax
     * never reads a masked score, so the visible key gets weight 1 at any
     * score. The second row, with ordinary scores, shows the two ways agree
     * wherever $-10^6$ is low enough.
     *
     * PyTorch fills with $-\infty$ instead, which cannot leak either, but
     * makes a row of length 0 `NaN` (section 4). Leaving masked keys out
     * costs nothing extra: the loops just stop at the row's length.
     */
    printf("exp(-745) = %.3g, exp(-746) = %g\n\n", exp(-745.0), exp(-746.0));
    const double rows[2][3] = {{-3e6, 0.5, 0.8}, {0.5508, 0.0707, 0.7081}};
    for (size_t r = 0; r < 2; r++) {
        tensor *x, *lens, *ours, *d2l;
        CHECK(tensor_from_array(SHAPE(1, 1, 3), rows[r], &x)); // (B, Lq, Lk)
        CHECK(tensor_from_array(SHAPE(1), (double[]){1}, &lens));
        CHECK(masked_softmax(x, lens, &ours));
        d2l = d2l_masked_softmax(x, 1);
        printf("scores [%g, %g, %g], valid_len 1:\n", rows[r][0], rows[r][1],
               rows[r][2]);
        printf("  d2l's -1e6 fill: ");
        tensor_print(stdout, d2l, 4);
        printf("  masked_softmax:  ");
        tensor_print(stdout, ours, 4);
        printf("  with the -1e6 fill a masked key has weight: %s\n\n",
               yes_no(d2l->data[1] != 0.0 || d2l->data[2] != 0.0));
        tensor_free(x);
        tensor_free(lens);
        tensor_free(ours);
        tensor_free(d2l);
    }
}

static void causal_mask(void)
{
    section("6. A causal mask is a 2-D valid_lens");
    /*md
     * In a decoder, position $i$ must not see later positions. As `valid_lens`
     * that is the `(B, L)` table whose every row is `1, 2, ..., L`: query $i$
     * sees keys $0, \dots, i$. With all scores equal (zero), query $i$ spreads
     * its weight evenly over $i + 1$ keys: 1.0000, 0.5000, 0.3333, 0.2500,
     * 0.2000, 0.1667 down the diagonal, a lower triangle.
     *
     * The heatmap shows the weights as a picture: row $i$ is query $i$, column
     * $j$ is key $j$, darker means more weight. Look for the lower triangle,
     * everything above the diagonal blank, and the shade fading down the rows
     * as each query shares its weight among more keys. On every page, blank
     * means a weight of exactly 0: in the terminal view a blank cell is 0 and
     * any other cell shows which quarter of the colour scale, from 0 to the
     * largest weight, its weight falls in; the PNG below uses a continuous
     * scale from 0 (white) up.
     *
     * The lengths are made by `causal_valid_lens` in `src/nn/softmax.c` (and it is
     * one of the coding exercises below). Costs: the table is $B \cdot L$
     * numbers; the softmax still computes all $L^2$ entries per example, masked
     * or not.
     *
     * What the exercise's tests check: a `(batch, len)` tensor whose every
     * row is `1, 2, ..., len` (query $i$ sees $i + 1$ keys; a row
     * `0, 1, ..., len - 1` is the usual slip), for one example and for
     * several; `batch` or `len` 0 refused with `GSL_EINVAL`, the output
     * NULL and a message naming both numbers; and a failed allocation
     * returning `GSL_ENOMEM` with the output NULL.
     */
    tensor *causal, *scores, *w;
    CHECK(causal_valid_lens(1, 6, &causal));
    printf("valid_lens:\n");
    tensor_print(stdout, causal, 0);
    CHECK(tensor_alloc(SHAPE(1, 6, 6), &scores)); // (B, L, L), all zero
    CHECK(masked_softmax(scores, causal, &w));
    printf("\nweights:\n");
    tensor_print(stdout, w, 4);
    printf("\n");
    heatmap_options opt = {.title = "causal mask, equal scores"};
    CHECK(heatmap_terminal(stdout, w, &opt));
    printf("\n");
    draw_heatmap(w, &opt, "03_causal");
    tensor_free(causal);
    tensor_free(scores);
    tensor_free(w);
}

static void bad_lengths(void)
{
    section("7. Lengths that make no sense are refused");
    /*md
     * Lengths are checked before anything is computed. A length larger than the
     * number of keys, a negative one, a fraction or NaN is refused with
     * `GSL_EINVAL` (status 4), and the message names the bad entry, its index
     * and both shapes, so you can find it in your data.
     */
    tensor *scores = d2l_scores(), *lens, *w;
    CHECK(tensor_from_array(SHAPE(2), (double[]){2, 5}, &lens));
    int status = masked_softmax(scores, lens, &w);
    printf("valid_lens [2, 5] with 4 keys: status %d\n  %s\n", status,
           mha_last_error());
    lens->data[1] = -1;
    status = masked_softmax(scores, lens, &w);
    printf("valid_lens [2, -1]: status %d\n  %s\n", status, mha_last_error());
    tensor_free(scores);
    tensor_free(lens);
}

int main(void)
{
    mha_program_init();
    softmax_subtracts_the_maximum();
    one_length_per_example();
    one_length_per_query();
    length_zero();
    where_minus_1e6_leaks();
    causal_mask();
    bad_lengths();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Compute by hand the weights of row `(0, 1)` in section 3 (scores 0.2909,
 *    0.1213, 0.5108, 0.5693, length 3) and compare them with the output.
 * 2. Multiply the two valid scores of row `(0, 0)` in section 2 by 10, then by
 *    a tenth, and compute the weights again. Which limit makes the softmax pick the
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
