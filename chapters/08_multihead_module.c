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

/*md
 * ![The module's dataflow for d2l's example](../plots/module.svg)
 *
 * This is the module the first seven chapters were building towards. Given a
 * query $q \in \mathbb{R}^{d_q}$, a key $k \in \mathbb{R}^{d_k}$ and a value
 * $v \in \mathbb{R}^{d_v}$, each head $i = 1, \dots, h$ attends with its own
 * learned projections:
 *
 * $$h_i = f\left(W_i^{(q)} q,\; W_i^{(k)} k,\; W_i^{(v)} v\right) \in \mathbb{R}^{p_v}$$
 *
 * with $W_i^{(q)} \in \mathbb{R}^{p_q \times d_q}$,
 * $W_i^{(k)} \in \mathbb{R}^{p_k \times d_k}$ and
 * $W_i^{(v)} \in \mathbb{R}^{p_v \times d_v}$. A last learned projection
 * $W_o \in \mathbb{R}^{p_o \times h p_v}$ mixes the concatenated heads:
 *
 * $$\mathrm{out} = W_o \, \mathrm{concat}(h_1, \dots, h_h) \in \mathbb{R}^{p_o}$$
 *
 * Here $f$ is the scaled dot-product attention of chapter 04, and, as in d2l,
 * $p_q = p_k = p_v = p_o / h = d_{model}/h$.
 *
 * Why several heads instead of one big one? A single softmax gives each query
 * one distribution over the keys, an average of everything the query might
 * want. With $h$ heads, each in its own $p$-dimensional subspace, one query can
 * attend to a nearby position in one head and to a distant one in another, and
 * $W_o$ combines what they found. It costs no more than one head: $h$ heads of
 * $p = d_{model}/h$ features do the same number of flops as one head of
 * $d_{model}$.
 *
 * The implementation is the six steps of the earlier chapters: project with
 * W_q, W_k, W_v (chapter 02); split into heads (chapter 06); repeat
 * `valid_lens` per head (chapter 07); attend on all $B \cdot h$ heads at once
 * (chapter 04); join the heads (chapter 06); mix with W_o. Chapter 09 then
 * checks that this batched form really is $h$ separate heads, and chapter 10
 * uses the module for self-attention.
 */

#include "lesson.h"

int main(void)
{
    mha_program_init();
    const size_t B = 2, Lq = 4, Lk = 6, D = 100, h = 5;

    section("1. d2l's example, with its whole trace");
    /*md
     * 100 hidden features in 5 heads of 20, 2 examples, 4 queries, 6 key-value
     * pairs, `valid_lens [3, 2]`. The whole forward pass is one function,
     * `multihead_forward_cached`; `multihead_forward`, which this chapter
     * calls, runs it without its two options, a head mask and a cache for
     * the backward pass (chapters 13 and 14 use them):
     *
     * @show src/multihead.c multihead_forward
     *
     * @show src/multihead.c multihead_forward_cached
     *
     * Read the trace from top to bottom; every line is one step and its shapes.
     *
     * - `W_q: x W^T` maps the queries `(2, 4, 100)` to `(2, 4, 100)`. The shape
     *   does not change here because $d_q = d_{model} = 100$, but the numbers
     *   are new (`new`).
     * - `transpose_qkv(h=5)` gives `(2, 4, 5, 20)`, `(2, 5, 4, 20)`, then
     *   `(10, 4, 20)`: view, view, copy (B = 2, chapter 06). The same for keys
     *   and values with 6 positions: `(10, 6, 20)`.
     * - `repeat_interleave(5)` turns `(2,)` into `(10,)`: one length per head
     *   (chapter 07).
     * - `dot_attention` runs on 10 "examples": scores `(10, 4, 6)`, masked
     *   softmax with scale $1/\sqrt{20} = 0.223607$ (the size of one head, not
     *   of the model), and `(10, 4, 20)` outputs.
     * - `transpose_output(h=5)` puts the heads side by side: view, view, copy,
     *   back to `(2, 4, 100)`.
     * - `W_o` mixes them: `(2, 4, 100)`, the shape d2l prints.
     *
     * Cost of this example. The four projections take
     * $2 \cdot 8 \cdot 100 \cdot 100 = 160{,}000$ flops each for the 8 query
     * rows (W_q, W_o) and $240{,}000$ each for the 12 key and value rows (W_k,
     * W_v): 800,000 flops. The attention itself is
     * $4 \cdot B L_q L_k d_{model} = 19{,}200$ flops. With such short sequences
     * the projections are 98% of the work. The four copies move
     * $800 + 1200 + 1200 + 800 = 4000$ doubles (32 KB); the weights are
     * $10 \cdot 4 \cdot 6 = 240$ doubles.
     */
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
    /*md
     * With X and Y all ones, every projected query is the same vector, and so
     * is every projected key, in every head. All valid keys get the same score,
     * and each head spreads its weight evenly: 1/3 over keys 0-2 in example 0
     * and 1/2 over keys 0-1 in example 1, exactly as in chapter 04's toy. This
     * input only shows that the shapes and the mask are right; to see the heads
     * do something different, they need different inputs.
     *
     * `m.weights` is `(B, h, Lq, Lk)`: the module keeps the attention's
     * `(B*h, Lq, Lk)` weights and views them with B and h separated again, so
     * `m.weights[b, i]` is head $i$ of example $b$.
     */
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
    /*md
     * Now random queries and keys (standard deviation 2), with the same
     * weights. The grid has one panel per (example, head): rows are queries,
     * columns are keys, and all panels share one colour scale from 0 to 1.
     *
     * What to look for:
     *
     * - The mask. In example 0 keys 3-5 are blank in every panel, in example 1
     *   keys 2-5. Each of the 10 batch rows got the right length from
     *   `repeat_interleave`.
     * - Heads disagree. In example 0, head 0 sends every query to key 2
     *   (weights 0.91 to 0.999 in `plots/08_heads.dat`). Head 1 sends queries 0
     *   and 1 to key 2 but query 2 to key 0 (0.99) and query 3 to key 1 (0.87).
     *   Head 4 splits query 0 between keys 1 and 2 (0.42 and 0.58). The same
     *   query, five different answers.
     * - The weights are sharp: most rows have one cell above 0.75. The inputs
     *   have standard deviation 2, so the projected queries and keys are twice
     *   as large as for standard-normal inputs, and their dot products four
     *   times larger. Chapter 10 uses standard-normal inputs and its panels are
     *   much softer.
     *
     * The weights are untrained (Xavier-uniform), so no head means anything
     * yet. What the picture shows is the capacity: each head can attend to
     * something different, and W_o can combine what they found. Training is
     * what makes them specialise.
     */
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
    /*md
     * With $L_q = L_k = L$ and $d_q = d_k = d_v = d_{model} = D$, one forward
     * pass costs about
     *
     * $$8 B L D^2 + 4 B L^2 D \text{ flops}$$
     *
     * the first term for the four projections, the second for the attention.
     * $h$ does not appear: splitting into heads changes how the work is
     * grouped, not how much there is. The memory for the weights is $B h L^2$
     * doubles, and that does grow with $h$. The projections dominate while
     * $L < 2D$; past that, the attention's $L^2$ term takes over.
     *
     * Counting the copies in the trace of section 1 exactly: three reshapes
     * copy in the `transpose_qkv` calls and one in `transpose_output`, plus the
     * tiny `repeat_interleave`. For $L_q = L_k = L$ that is $4 B L D$ doubles
     * moved, against $8 B L D^2$ flops for the projections: noticeable only
     * when $D$ is small.
     */
    printf("Four projections of 2*B*L*d_model^2 flops each dominate for\n"
           "short sequences; the attention itself is 4*B*Lq*Lk*d_model flops\n"
           "(summed over heads: h heads of p = d_model/h features cost the\n"
           "same as one head of d_model).  Splitting into heads is free in\n"
           "flops: it only costs the copies in the trace, one per split of\n"
           "Q, K and V and one to join the heads.\n");

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

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For self-attention with B = 3, n = 5, d_model = 12 and
 *    h = 4, write down the shape after every step of the trace of section 1:
 *    the projections, the three steps of each `transpose_qkv`, the scores, the
 *    attention output, the three steps of `transpose_output`, and W_o. Mark
 *    each step view, copy or new. Check yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --kv 5 --hiddens 12 --heads 4`.
 * 2. Visualize the attention weights of multiple heads. Change the standard
 *    deviation of the inputs in section 3 from 2 to 1, then to 4, and look at
 *    `plots/08_heads.png` each time. Describe how the panels change, and
 *    explain it with chapter 04's section 3.
 * 3. Design an experiment to measure how important each head is. Hint: head $i$
 *    reaches the output only through columns $i p$ to $i p + p - 1$ of W_o
 *    (chapter 09, section 4), so zeroing them removes exactly that head. What
 *    would you measure with and without the head? How would you use the results
 *    to prune heads, and how would you check that the pruned model is still
 *    good? Why would the experiment say little about the untrained module of
 *    this chapter? Chapter 14 runs this experiment on a trained model.
 * 4. Count the flops of the four projections and of the attention for the sizes
 *    of exercise 1. Which dominates? At which sequence length would the two be
 *    equal for d_model = 12?
 */
