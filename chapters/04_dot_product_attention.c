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

/*md
 * This chapter builds one attention head. Each query asks a question, each key
 * says what its position offers, and each value is what the position hands
 * back. A query scores every key with a dot product; chapter 03's masked
 * softmax turns the scores into weights; the output for the query is the
 * weighted average of the values. For all queries at once, with
 * $Q \in \mathbb{R}^{L_q \times d}$, $K \in \mathbb{R}^{L_k \times d}$,
 * $V \in \mathbb{R}^{L_k \times d_v}$ per example:
 *
 * $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right) V$$
 *
 * $QK^\top$ is `(Lq, Lk)`: one score per (query, key) pair. The softmax runs
 * along each row, and multiplying by $V$ averages the value rows. Queries and
 * keys need the same size $d$ for the dot product; values may have another.
 *
 * This is the $f$ that every head of multi-head attention runs. Chapter 08 does
 * not write a new one: it cuts the projected queries, keys and values into h
 * pieces and calls this same function on all of them at once, as if the heads
 * were extra examples. Chapter 05 shows the other classic scoring function,
 * additive attention. The first heatmaps appear here, so section 1 starts with
 * how to read one.
 */

#include <math.h>

#include <gsl/gsl_randist.h>

#include "lesson.h"

int main(void)
{
    mha_program_init();

    section("1. Reading a heatmap: the identity");
    /*md
     * A heatmap draws a `(queries, keys)` matrix of weights: row $i$ is query
     * $i$, column $j$ is key $j$, and darker means more weight. The identity is
     * the simplest attention pattern: query $i$ puts all its weight on key $i$,
     * so the output for position $i$ is just value $i$ (a copy). Expect a dark
     * diagonal and nothing else.
     *
     * The terminal view maps each weight to one of five shades. Its legend says
     * which range each shade covers, and the scale runs from 0 to the largest
     * weight drawn, so compare shades within one picture, not across pictures.
     * The PNG uses a continuous colour scale with a colour bar.
     */
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
    /*md
     * Two examples, each with one query of 2 features, 10 keys and 10 values of
     * 4 features; example 0 may use 2 keys, example 1 may use 6. The trace
     * shows the three steps of the formula with their shapes: `Q K^T` makes
     * `(2, 1, 10)` scores, the masked softmax (scaled by
     * $1/\sqrt{2} = 0.707107$) keeps that shape, and `weights V` gives
     * `(2, 1, 4)`.
     *
     * @show src/attention.c dot_attention_forward
     *
     * The last two steps, from scores to output, are the same for every way
     * of scoring (chapter 05 reuses them):
     *
     * @show src/attention.c weigh_values
     *
     * Every key is `(1, 1)`, so for example 0 each score is
     * $(-2.7993 + 1.1746)/\sqrt{2} = -1.1488$, the same for all 10 keys. Equal
     * scores give equal weights over the valid keys: 1/2 over keys 0-1 in
     * example 0, 1/6 over keys 0-5 in example 1. The outputs are therefore
     * plain averages of value rows: `[2, 3, 4, 5]` and `[10, 11, 12, 13]`,
     * whatever the queries are. The toy checks the plumbing (shapes, mask,
     * averaging), not the scoring.
     *
     * The heatmap has one panel per example, each with its single query (the
     * weights `(2, 1, 10)` viewed as a grid `(1, 2, 1, 10)`: one row of 2
     * panels). Look for the mask: two dark cells for example 0, six lighter
     * ones for example 1, and nothing past them. The lighter shade is the
     * point: the same total weight 1 spread over more keys.
     *
     * Cost: the scores take $2 \cdot L_q L_k d$ flops per example and the
     * average $2 \cdot L_q L_k d_v$. Both are one dgemm per example on views of
     * the inputs; $K$ is read transposed by BLAS, never copied. The
     * `(B, Lq, Lk)` weights are kept in the struct for the heatmaps.
     */
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
    CHECK(tensor_reshape(attn.weights, DIMS(1, 2, 1, 10), NULL, &wgrid));
    const char *w_titles[] = {"example 0, valid_len 2", "example 1, valid_len 6"};
    heatmap_options w_opt = {.titles = w_titles, .ntitles = 2};
    CHECK(heatmap_terminal(stdout, wgrid, &w_opt));
    printf("\n");
    draw_heatmap(wgrid, &w_opt, "04_weights");

    section("3. Why divide by sqrt(d)?");
    /*md
     * Why the $\sqrt{d}$? If the entries of $q$ and $k$ are independent with
     * mean 0 and variance 1, each product $q_j k_j$ has variance 1 and their
     * sum $q \cdot k$ has variance $d$. The measured table agrees: 2.0, 64.1
     * and 509.7 for d = 2, 64 and 512. At d = 512 the scores have a standard
     * deviation of about 22.6. Between two random keys that is a gap of tens,
     * and $e^{20}$ is about $5 \cdot 10^8$: the softmax gives almost all weight
     * to one key. A saturated softmax has gradients near zero, so training
     * barely moves it. Dividing by $\sqrt{d}$ brings the variance back to 1 for
     * every $d$ (the last column), and the weights stay soft enough to learn.
     *
     * In multi-head attention the $d$ here is the size of one head,
     * $d_{model}/h$, not $d_{model}$: chapter 08's trace shows
     * `scale 1/sqrt(20)` for 100 features in 5 heads.
     */
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
    /*md
     * For the toy, $2 \cdot 2 \cdot 1 \cdot 10 \cdot (2 + 4) = 240$ flops and
     * 20 weights. The formula is the important part: with $L_q = L_k = L$, time
     * and memory grow as $L^2$. One head over $L = 4096$ positions has a
     * $4096 \times 4096$ weight matrix, 16.8 million doubles (134 MB) per
     * example. That quadratic term is what the memory-efficient attention of a
     * later chapter avoids keeping.
     */
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

/*md
 * ## Exercises
 *
 * 1. Distance-based attention: replace the score $q \cdot k / \sqrt{d}$ by
 *    $-\lVert q - k \rVert^2 / 2$. Expand the square and show that the softmax
 *    over keys of this score equals the softmax of
 *    $q \cdot k - \lVert k \rVert^2 / 2$ (the $\lVert q \rVert^2$ term
 *    cancels). When does it give exactly the same weights as the unscaled dot
 *    product? What would it give on the toy of section 2, where all keys are
 *    `(1, 1)`?
 * 2. Change key 1 of example 0 to `(0, 0)` and keep the rest. Compute by hand
 *    the weights of example 0 and its output. (You should find weights 0.2407
 *    and 0.7593.)
 * 3. Drop the division by $\sqrt{d}$: for d = 512 and 10 random keys, what is
 *    the typical largest weight of a query? Estimate it by modifying section 3
 *    (draw a query and 10 keys, softmax the 10 scores, average the maximum over
 *    many draws), then again with the division.
 * 4. With B = 8, h = 16 heads and $L_q = L_k = 4096$, how much memory do the
 *    attention weights of one multi-head layer take in doubles?
 */
