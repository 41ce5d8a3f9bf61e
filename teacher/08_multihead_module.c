/* Chapter 08, the key: the multi-head attention module.
 *
 * The numbers the answers to chapter 08's exercises quote: the module's
 * trace for the exercise's sizes, how sharp section 3's weights are for
 * three standard deviations of the inputs, and the flop counts.
 */
#include "key.h"

enum { B = 2, Lq = 4, Lk = 6, D = 100, H = 5 };

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * With $p = 3$ and self-attention (n = 5 queries and keys), the trace
     * below (the module on shapes alone, as `mha trace` runs it):
     *
     * - W_q, W_k, W_v: `(3, 5, 12)` to `(3, 5, 12)`, each **new**;
     * - each `transpose_qkv`: `(3, 5, 4, 3)` view, `(3, 4, 5, 3)` view,
     *   `(12, 5, 3)` **copy** (B, h and n all above 1);
     * - the scores $QK^\top$: `(12, 5, 5)` new; the masked softmax
     *   `(12, 5, 5)` new; weights times V: `(12, 5, 3)` new;
     * - `transpose_output`: `(3, 4, 5, 3)` view, `(3, 5, 4, 3)` view,
     *   `(3, 5, 12)` **copy**;
     * - W_o: `(3, 5, 12)` new.
     *
     * Four copies in all, each of $3 \cdot 5 \cdot 12$ doubles.
     */
    shape_trace(3, 5, 5, 12, 4, 0, NULL);
}

/* Section 3 of chapter 08 with inputs of standard deviation sd: the mean
 * largest weight of a row and how many of the 40 rows have a weight above
 * 0.75. */
static void sharpness(double sd)
{
    gsl_rng *rng = mha_rng_new(8);
    if (!rng)
        exit(1);
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .dropout = 0.5};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);
    tensor *lens, *xq, *xk, *out, *w; // w (B, h, Lq, Lk)
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &xq));
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &xk));
    tensor_fill_normal(xq, rng, 0, sd);
    tensor_fill_normal(xk, rng, 0, sd);
    CHECK(multihead_forward(&m, xq, xk, xk, lens, &out, &w));
    double sum = 0;
    int sharp = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < H; i++)
            for (size_t r = 0; r < Lq; r++) {
                double best = 0;
                for (size_t t = 0; t < Lk; t++)
                    best = fmax(best, *TENSOR_AT(w, b, i, r, t));
                sum += best;
                sharp += best > 0.75;
            }
    printf("standard deviation %.0f: mean largest weight %.3f, rows with a "
           "weight above 0.75: %d of %d\n", sd, sum / (B * H * Lq), sharp,
           B * H * Lq);
    tensor_free(lens);
    tensor_free(xq);
    tensor_free(xk);
    tensor_free(out);
    tensor_free(w);
    multihead_free(&m);
    gsl_rng_free(rng);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * The inputs are the same normal draws scaled by the standard
     * deviation, so only their size changes. The projections are linear,
     * so the queries and keys scale with it too, and every score
     * $q \cdot k / \sqrt{p}$ scales with its square: a fourth of section 3's at
     * standard deviation 1, four times at 4. Chapter 04's section 5 showed
     * that the softmax needs scores of variance about 1 to stay soft; the
     * $1/\sqrt{p}$ only corrects for the number of features, not for the
     * inputs' size. So at 1 the panels are soft, several keys per row in
     * middle shades; at 2 (the chapter) most rows have one dark cell; at 4
     * nearly every row is one black cell and the rest white, a hard
     * argmax. The numbers below
     * measure it (each run redraws section 3 with the chapter's seed): the
     * mean largest weight of a row rises and so does the count of rows
     * with a weight above 0.75. Masked keys stay blank in every case.
     */
    sharpness(1);
    sharpness(2);
    sharpness(4);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * An experiment:
     *
     * 1. Fix a held-out set of inputs and a measure of the model's quality
     *    on it: the loss, or the accuracy of the task.
     * 2. For each head $i$, zero columns $i p$ to $i p + p - 1$ of W_o (or
     *    multiply head $i$'s output by a mask $m_i = 0$) and measure again.
     *    The head's importance is how much worse the model gets; restore it
     *    afterwards.
     * 3. Prune: remove the least important head, measure again (the others'
     *    importance changes once one is gone), and repeat while the quality
     *    stays within a tolerance you fix in advance, such as a hundredth
     *    of the loss.
     * 4. Check the pruned model on data not used to choose the heads (a
     *    test set), optionally after a short fine-tuning; compare its
     *    quality and its cost (flops, time) with the full model's.
     *
     * On this chapter's module the experiment says little: its weights are
     * random (Xavier) and there is no task, so there is no quality to lose;
     * zeroing a head changes the output by an amount that reflects only the
     * random sizes of its weights. Importance only means something once
     * training has given the heads jobs (chapter 14 shows one head that
     * matters and others that do not).
     */
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The projections: four of $2 \, B n \, d^2$ flops (n = 5 rows per
     * example for each, self-attention). The attention: $QK^\top$ and
     * weights times V, each $2 \, B h \, n^2 p = 2 B n^2 d$ flops (the
     * softmax's few operations per score left out). The projections
     * dominate here, almost 5 times. In general the ratio is
     * $8 B n d^2 / 4 B n^2 d = 2d/n$, so the two are equal at $n = 2d$:
     * n = 24 for d_model = 12. Longer sequences make the attention
     * dominate, since it grows as $n^2$.
     */
    const long b = 3, n = 5, d = 12;
    long proj = 4 * 2 * b * n * d * d, attn = 2 * 2 * b * n * n * d;
    printf("projections: 4 * 2*B*n*d^2 = %ld flops\n", proj);
    printf("attention:   2 * 2*B*n^2*d = %ld flops\n", attn);
    printf("ratio: %.2f\n", (double)proj / (double)attn);
    printf("equal at n = 2*d = %ld\n", 2 * d);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
