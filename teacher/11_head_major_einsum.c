/* Chapter 11, the key: the head-major einsum module.
 *
 * The numbers the answers to chapter 11's exercises quote: the copies of
 * chapter 08's forward pass, counted from its trace, and a head's score
 * with one feature.
 */
#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The change: where the module now refuses a valid length of 0
     * (`headmajor.h` says why), let the softmax write a row of zeros for a
     * query that sees no key: after `masked_fill_` with $-\infty$, a row
     * whose every score is $-\infty$ gets weights 0 instead of
     * $0/0 = \mathrm{NaN}$ (test for it before dividing by the row's
     * sum). The weighted average of such a row
     * is the zero vector, in every head.
     *
     * Before the residual, that query's output is $\mathrm{fc}(0) = b_{fc}$,
     * fc's bias, the same vector for every such query, whatever
     * its input. After it, the output is $\mathrm{LN}(q + b_{fc})$: the
     * query itself, shifted by the bias and normalised, so the layer
     * passes the position through almost unchanged instead of producing
     * NaN, which would have spread to every later layer and to the loss.
     * The tests to add: a row with valid length 0 gives weights exactly 0
     * and the output $\mathrm{LN}(q + b_{fc})$ (with fc's bias and
     * LayerNorm's $\gamma$, $\beta$ set to something other than 0 and 1, so
     * that the test can see them).
     */
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Chapter 08's trace (below, the module on shapes alone with chapter
     * 08's sizes) has five copies: the last reshape of each
     * `transpose_qkv`, for Q `(2, 4, 100)` and for K and V `(2, 6, 100)`,
     * the last reshape of `transpose_output`, `(2, 4, 100)`, and the
     * `repeat_interleave` of the 2 lengths into 10. That is 4010 doubles.
     * This module copies none: section 2's split is two views, the einsum
     * writes into a buffer laid out `(B, Lq, h, d_v)` so that the final
     * rearrange is a view too, and the mask broadcasts over the heads
     * (`mask[None]`) instead of repeating the lengths.
     *
     * Where a strided view would have saved each copy in chapter 08:
     *
     * - **Q, K and V**: head $i$ of example $b$ is the block of rows of
     *   example $b$ and columns $ip$ to $ip + p - 1$ of the projected
     *   `(B, n, d_model)` tensor: a `gsl_matrix_view_array_with_tda` of
     *   $n \times p$ with tda = d_model, which `gsl_blas_dgemm` reads in
     *   place (section 2 shows one, "tda 6"). The scores and the weighted
     *   average can run on those views, no `(B*h, n, p)` copy.
     * - **The output**: the weighted average of head $i$ can be written
     *   straight into columns $ip$ to $ip + p - 1$ of a `(B, n, d_model)`
     *   buffer, again a view with tda = d_model, so `transpose_output`
     *   has nothing to move.
     * - **valid_lens**: the head's batch row $b h + i$ reads length
     *   `lens[b]` directly (an index, $\lfloor r/h \rfloor$), no repeated
     *   list.
     */
    shape_trace(2, 4, 6, 100, 5, 0, (double[]){3, 2});
    const long q = 2 * 4 * 100, kv = 2 * 6 * 100;
    printf("\ndoubles copied: Q %ld + K %ld + V %ld + output %ld + valid_lens %d = %ld\n",
           q, kv, kv, q, 10, q + 2 * kv + q + 10);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * Pre-norm computes $\mathrm{LN}(q)$ first, runs the attention on it,
     * and adds the result to the untouched $q$: the last operation is the
     * addition, not the LayerNorm.
     *
     * Tests in `tests/test_headmajor.c` that would change:
     *
     * - `equals_loops`: its naive reference computes
     *   $\mathrm{LN}(q + \mathrm{fc}(\dots))$ when the residual is on; it
     *   must compute $q + \mathrm{fc}(\mathrm{attn}(\mathrm{LN}(q), \dots))$
     *   (and, pre-norm, the keys and values of self-attention would be
     *   normalised too).
     * - `differs_from_multihead`: it checks that residual + LayerNorm give
     *   each position mean 0 and variance just under 1; that no longer
     *   holds.
     * - `trace_of_a_small_call`: the expected trace has `layer_norm` last;
     *   it moves to the front, before the projections.
     * - `dropout_train_and_eval`: its replay of a training call applies
     *   dropout to fc's output, adds the residual and normalises, in that
     *   order; the order changes.
     *
     * Those with the residual off (`agrees_with_multihead`), the views of
     * the split and join, the initial weights and the errors stay.
     *
     * Section 4's "mean 0, variance 1" was a property of the LayerNorm's
     * output, and the output is no longer the LayerNorm's:
     * $q + \mathrm{fc}(\dots)$ has whatever mean and variance $q$ and the
     * attention give it, so each position keeps its own scale. (That is
     * what pre-norm is for: the residual path carries $q$ unchanged
     * through every layer, which makes deep stacks train more easily; a
     * final LayerNorm after the last layer normalises once.)
     */
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * With $d_k = 1$ each head's query and key are one number each, so its
     * score is one product, $q \cdot k_j = q k_j$: one number from the
     * query, one from the key. The scaling is by $1/\sqrt{1} = 1$: it does
     * nothing. The softmax of $q k_j$ over the keys is then monotone in
     * $k_j$: a head with $q > 0$ prefers the keys with the largest $k_j$, one
     * with $q < 0$ the smallest, and $|q|$ only sets how sharply. Each head
     * can rank the keys along a single direction of the input and nothing
     * else; eight such heads are eight one-dimensional rankings. Below,
     * the scores and weights of one such head for a query of 2 and of -2
     * and keys -1, 0, 1, 2.
     */
    const double k[4] = {-1, 0, 1, 2}, qs[2] = {2, -2};
    for (int n = 0; n < 2; n++) {
        double s[4], max = -INFINITY, sum = 0;
        for (int j = 0; j < 4; j++) {
            s[j] = qs[n] * k[j] / sqrt(1) + 0.0;
            s[j] = s[j] == 0 ? 0 : s[j]; /* no -0 */
            max = fmax(max, s[j]);
        }
        for (int j = 0; j < 4; j++)
            sum += exp(s[j] - max);
        printf("q = %2.0f: scores", qs[n]);
        for (int j = 0; j < 4; j++)
            printf(" %3.0f", s[j]);
        printf(", weights");
        for (int j = 0; j < 4; j++)
            printf(" %.4f", exp(s[j] - max) / sum);
        printf("\n");
    }
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
