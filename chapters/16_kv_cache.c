/* Chapter 16: causal decoding with a key-value cache.
 *
 * Causal self-attention and its heatmap; generating one position at a
 * time with kv_cache_decode_step, the cache growing in the trace;
 * checked against causal attention over the whole sequence; the work per
 * step with the cache and without it.  Run it with `make ch16`; the
 * book's page is docs/16_kv_cache.md.
 */

/*md
 * A language model writes text one token at a time. At step $t$ it has
 * the tokens $x_0, \dots, x_{t-1}$; it runs them through its layers, reads
 * the next token off the output of the last position, appends it, and
 * starts again. Two things make this work with attention.
 *
 * First, the model must be *causal*: position $i$ may attend only to
 * positions $j \le i$. It was trained that way (chapter 13's model was
 * too), predicting every next token of a training text at once while
 * seeing only the tokens before it; and it is the only way the output of
 * position $i$ can be final before the later tokens exist.
 *
 * Second, what that buys: position $j$'s key and value depend on $x_j$
 * alone in one layer (in a stack of causal layers, on positions $\le j$
 * only, since no layer lets a position see later ones), so they never
 * change once computed. Running the whole sequence again
 * at every step recomputes all of them, and all the scores of the old
 * queries, to get one new row. A decoder keeps the keys and values of the
 * positions seen so far in a *[key-value cache](glossary.md#kv-cache)*, and each step computes the
 * new position's query, key and value, appends the key and value to the
 * cache, and attends with the one new query to everything cached. That is
 * what llama2.c's `key_cache` and `value_cache` are, and what every
 * serving library does.
 *
 * This chapter uses one module with $h = 2$ heads of $p = 4$ features
 * ($d_{model} = 8$) on one sequence of 8 positions.
 */

#include <math.h>

#include "lesson.h"

/* One sequence (B = 1) of N positions, D = d_model features in H heads
 * of P; the cache has room for all N positions. */
enum { B = 1, N = 8, H = 2, P = 4, D = H * P, PREFILL = 3 };

/* What the sections share: the module, the sequence, and its outputs by
 * full causal attention (section 1) and by decoding (section 2). */
typedef struct {
    multihead m;
    tensor *x;       // (B, n, d_model)
    tensor *full;    // (B, n, d_model): causal attention over all n at once
    tensor *decoded; // (B, n, d_model): the same rows, step by step
} lesson;

static void causal(lesson *l)
{
    section("1. Causal attention");
    /*md
     * With `causal = 1` in its configuration, the module lets query $i$ see
     * key $j$ only when $j \le i$: each row of the weights is a softmax
     * over the keys up to and including its own position, and the upper
     * triangle is exactly 0. Chapter 03 made this mask as `valid_lens`
     * that count up, `[1, 2, ..., n]`, one length per query; the module
     * builds those lengths itself. Below, the self-attention of the 8
     * positions, both heads. Row 0 has a single weight, 1: the first
     * position can only attend to itself.
     *
     * When there are fewer queries than keys, $L_q < L_k$, the queries
     * are taken to be the *last* $L_q$ positions: query $i$ sees key $j$
     * when $j \le i + L_k - L_q$. That is the decoding case of section 2,
     * where the keys include everything cached and the queries are only the
     * new positions.
     *
     * `plots/16_view.html` holds the same weights as a page to open in a
     * browser. Its slider steps through the decoding of section 2: at each
     * step one more key and value are cached, and the new query's row of
     * weights is the row of this triangle.
     */
    gsl_rng *rng = mha_rng_new(16);
    if (!rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .causal = 1};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->x));
    CHECK(tensor_set_names(l->x, "B, n, d_model"));
    tensor_fill_normal(l->x, rng, 0, 1);
    trace_log log; // the steps, for the page's dataflow
    trace_log_start(&log);
    tensor *weights; // (B, h, n, n)
    CHECK(multihead_forward(&l->m, l->x, l->x, l->x, NULL, &l->full, &weights));
    trace_log_stop(&log);
    const char *titles[H] = {"head 0", "head 1"};
    heatmap_options opt = {.titles = titles, .ntitles = H};
    CHECK(heatmap_terminal(stdout, weights, &opt));
    printf("\n");
    draw_heatmap(weights, &opt, "16_causal");
    explorer_page page = {.title = "Chapter 16: causal self-attention",
                          .weights = weights, .head_size = D / H,
                          .trace = &log, .causal = 1};
    draw_explorer(&page, "16_view");
    trace_log_free(&log);
    printf("\nhead 0, query 3:");
    for (size_t j = 0; j < N; j++)
        printf(" %.4f", *TENSOR_AT(weights, 0, 0, 3, j));
    printf("\n");
    tensor_free(weights);
    gsl_rng_free(rng);
}

static void decoding(lesson *l)
{
    section("2. Decoding with a cache");
    /*md
     * `kv_cache_init` allocates the cache for a batch of sequences: keys and
     * values of shape `(B, G, capacity, p)`, $G$ key-value heads (here every
     * head has its own, $G = h = 2$; chapter 17 shares them), with room for
     * `capacity` positions, and `length` 0 positions filled.
     *
     * @show src/nn/kvcache.h kv_cache
     *
     * `kv_cache_decode_step` takes the $n$ new positions, `(B, n, d_model)`,
     * and does one step: projects them, splits the heads, writes their keys
     * and values into the cache at positions `length` to `length + n - 1`,
     * attends with the $n$ new queries to all cached positions under the
     * causal mask aligned at the end, and mixes the heads with W_o. Its
     * output is the $n$ new rows, `(B, n, d_model)`. The steps, one call
     * each:
     *
     * @show src/nn/kvcache.c decode_steps
     *
     * and the door around them, as `multihead_forward` is the module's
     * (chapter 08): the new positions are checked against the module and
     * the room left in the cache, the steps run, the result is checked
     * once, and the cache's `length` moves on only when all went well:
     *
     * @show src/nn/kvcache.c kv_cache_decode_step
     *
     * Its steps 1 to 3, the new positions' own work, are a function of
     * their own, which the window cache of chapter 19 calls too:
     *
     * @show src/nn/kvcache.c kv_step_project
     *
     * Its step 3, the split, is one more, which chapter 18's masked forward
     * calls too:
     *
     * @show src/nn/kvcache.c kv_step_split
     *
     * The causal mask enters the module's forward pass at step 3, as one
     * length per query row (`head_lens`):
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * @show src/nn/multihead.c head_lens
     *
     * The first step takes the first 3 positions at once: a prompt is
     * known in advance, so its positions are processed together (the
     * *[prefill](glossary.md#prefill)*), with a causal mask among them. Then one position per
     * step, as generation goes. The traces of the prefill and of the
     * first single step are below. In the second, the line
     * `append keys at 3..3` is the cache growing: the new key heads,
     * `(1, 2, 1, 4)`, are copied into the storage at position 3, and its
     * filled part is now `(1, 2, 4, 4)`, `(B, G, t, p)`. The query is
     * `(2, 1, 4)`, one row per head; the keys it reads are the cache's
     * first 4 positions, a view, `(2, 4, 4)`, `(B*G, t, p)`; and the
     * scores are `(2, 1, 4)`: one new row of the weights, not a `(4, 4)`
     * matrix. Nothing of positions 0 to 2 is projected again.
     *
     * In this sequence the inputs are given in advance, as if each had
     * been generated; in a language model $x_t$ would be the embedding of
     * the token read off step $t - 1$'s output. The attention does not care
     * where they come from.
     */
    kv_cache c;
    CHECK(kv_cache_init(&c, B, H, P, N));
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->decoded));
    char ks[TRACE_SHAPE_MAX];
    printf("an empty cache: keys %s, length %zu\n\n",
           tensor_shape_str(c.keys, ks, sizeof ks), c.length);
    for (size_t t = 0; t < N;) {
        size_t n = t == 0 ? PREFILL : 1;
        tensor *xt, *yt;
        CHECK(tensor_narrow(l->x, 1, t, n, &xt)); // (B, n, d_model), a view
        if (t <= PREFILL) {
            printf("%s, positions %zu to %zu:\n", t ? "step" : "prefill", t,
                   t + n - 1);
            trace_to(stdout);
        }
        CHECK(kv_cache_decode_step(&l->m, &c, xt, &yt, NULL));
        trace_to(NULL);
        if (t <= PREFILL)
            printf("\n");
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < D; j++)
                *TENSOR_AT(l->decoded, 0, t + i, j) = *TENSOR_AT(yt, 0, i, j);
        printf("after position %zu: cache length %zu of %zu; the newest query "
               "attended to %zu keys\n",
               t + n - 1, c.length, c.capacity, t + n);
        tensor_free(xt);
        tensor_free(yt);
        t += n;
    }
    kv_cache_free(&c);
}

static void same_numbers(lesson *l)
{
    section("3. The same numbers as attention over the whole sequence");
    /*md
     * The cache changes how much is computed, not what: row $t$ of the
     * decoded outputs must equal row $t$ of section 1's causal attention
     * over all 8 positions at once. They are computed in different orders
     * (one product of 8 query rows there, products of 3 and of 1 here), so
     * they agree to rounding, not bit for bit.
     */
    double diff = largest_abs_diff(l->decoded, l->full);
    printf("position 7, first 4 features:\n");
    printf("  decoded step by step  ");
    for (size_t j = 0; j < 4; j++)
        printf(" %8.4f", *TENSOR_AT(l->decoded, 0, N - 1, j));
    printf("\n  all 8 at once         ");
    for (size_t j = 0; j < 4; j++)
        printf(" %8.4f", *TENSOR_AT(l->full, 0, N - 1, j));
    printf("\n\nequal over all positions (largest difference below 1e-12): "
           "%s\n",
           yes_no(diff < 1e-12));
}

/* Multiply-adds of the attention in a step with t keys, the one that
 * makes position t - 1 (attention_madds.h): with the cache, the new query against the t
 * keys; recomputing, the t queries against the keys the causal mask lets
 * each see, t (t + 1) / 2 pairs. */
static double madds_cached(size_t t, size_t d_model)
{
    double m;
    CHECK(attention_madds(1, t, d_model, 1, &m));
    return m;
}
static double madds_recomputed(size_t t, size_t d_model)
{
    double m;
    CHECK(attention_madds(t, t, d_model, 1, &m));
    return m;
}

static void work(void)
{
    section("4. The work per step");
    /*md
     * Count the multiply-adds of the attention itself (the scores and the
     * weighted sum of the values) in a step whose new query has $t$ keys
     * to attend to: the step that makes position $t - 1$, counting from
     * 0 as the trace does. With the cache, one query meets
     * $t$ keys in each head: $t \cdot p$ multiply-adds per head for the
     * scores and as many for the weighted sum, $2 t \, d_{model}$ in all,
     * growing linearly with $t$. Without it, the module runs again on all
     * $t$ positions. Query $i$ needs only the $i + 1$ keys the causal mask
     * lets it see, so $t$ queries make $1 + 2 + \dots + t = t(t+1)/2$
     * pairs: $t(t+1)\, d_{model}$ multiply-adds, and the step costs
     * $(t+1)/2$ times as much. (`multihead_forward` as written computes
     * all $t^2$ scores and zeroes the upper triangle in the softmax, nearly twice
     * that work; the count here is what a causal recompute needs at
     * least, so the comparison is fair to it.)
     * `attention_madds` counts them, for $n_q$ queries against $n_k$ keys,
     * every pair or only the pairs a causal mask lets through; it is this
     * chapter's exercise. Its tests check counts worked out by hand: the
     * cost of a pair (half of it counts the scores alone); every pair
     * without the mask; with it, one new query against $n_k$ keys, the
     * triangle of $n_q = n_k$, and the mask aligned at the end when
     * $n_q < n_k$ and when $n_q > n_k$ (the first $n_q - n_k$ queries see
     * nothing); and that $n_q$, $n_k$ or $d_{model}$ 0 is refused with
     * `GSL_EINVAL` and a message naming all three:
     *
     * @show src/nn/attention_madds.c attention_madds
     *
     * The projections cost more again: with the cache, W_q, W_k, W_v
     * and W_o are applied to the one new position,
     * $4\,d_{model}^2$ multiply-adds; recomputing, to all $t$ of them,
     * $t$ times as much. Over
     * a whole sequence of $T$ steps the attention costs about
     * $T^2 d_{model}$ multiply-adds with the cache and
     * $\frac{1}{3} T^3 d_{model}$ without. The table is for one layer of
     * $d_{model} = 4096$ (the size of Llama 2 7B), and the chart draws the
     * two columns of attention for every $t$ up to 512.
     *
     * What the cache costs is memory: $2 \cdot t \cdot G \cdot p$ numbers
     * per layer and sequence, read in full by every step. For a large
     * model at a long context that is gigabytes, and reading it, not
     * multiplying, becomes what limits the speed of decoding. Chapter 17
     * makes it smaller.
     *
     * Measured, the time per step follows the counts: `make bench` decodes
     * a sequence both ways (module of $d_{model} = 512$, 8 heads) and
     * draws the time of each step. With the cache the time per step
     * hardly grows at these sizes, where the fixed costs of a step
     * outweigh its work; recomputing, it grows with $t^2$ and is soon
     * orders of magnitude larger. The times are not in this chapter's
     * output, which must be the same on every machine; the
     * [performance page](performance.md) quotes one run.
     *
     * ![time per decoding step, with the cache and recomputing, measured by make bench](../plots/bench_decode.png)
     */
    const size_t d_model = 4096;
    printf("one layer, d_model = %zu: multiply-adds of a step whose query "
           "has t keys\n\n",
           d_model);
    printf("%6s %16s %16s %8s %16s %16s\n", "t", "attention,", "attention,",
           "", "projections,", "projections,");
    printf("%6s %16s %16s %8s %16s %16s\n", "", "cached", "recomputed",
           "ratio", "cached", "recomputed");
    for (size_t t = 1; t <= 4096; t *= 4) {
        double a = madds_cached(t, d_model), r = madds_recomputed(t, d_model);
        double proj = 4.0 * (double)d_model * (double)d_model;
        printf("%6zu %16.0f %16.0f %8.1f %16.0f %16.0f\n", t, a, r, r / a,
               proj, (double)t * proj);
    }
    const size_t T = 4096;
    double cached = 0, recomputed = 0;
    for (size_t t = 1; t <= T; t++) {
        cached += madds_cached(t, d_model);
        recomputed += madds_recomputed(t, d_model);
    }
    printf("\na whole sequence of %zu steps, attention: %.3g cached, %.3g "
           "recomputed (%.0f times as many)\n",
           T, cached, recomputed, recomputed / cached);
    enum { STEPS = 512 };
    // ys (2, STEPS): the line with the cache, then the recomputed one
    double ts[STEPS], ys[2 * STEPS];
    for (size_t i = 0; i < STEPS; i++) {
        ts[i] = (double)(i + 1);
        ys[i] = madds_cached(i + 1, d_model) / 1e6;
        ys[STEPS + i] = madds_recomputed(i + 1, d_model) / 1e6;
    }
    const char *const labels[2] = {"with the cache: 2 t d_model",
                             "recomputed: t (t+1) d_model"};
    plot_options opt = {.title = "attention multiply-adds of one decoding "
                                 "step, d_model = 4096",
                        .xlabel = "keys attended to, t",
                        .ylabel = "million multiply-adds",
                        .log_y = 1};
    printf("\n");
    announce_plot(plot_lines(ts, ys, STEPS, 2, labels, &opt,
                             plot_base("16_work"), HEATMAP_PNG | HEATMAP_SVG),
                  "16_work");
}

int main(void)
{
    mha_program_init();
    lesson l;
    causal(&l);
    decoding(&l);
    same_numbers(&l);
    work();
    tensor_free(l.x);
    tensor_free(l.full);
    tensor_free(l.decoded);
    multihead_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `attention_madds` (`make grade EXERCISE=attention_madds`).
 *    How many multiply-adds does this chapter's prefill of 3 positions
 *    take with $d_{model} = 8$, counting only the pairs the causal mask
 *    lets through? And the step after it?
 * 2. Decode the 8 positions with a prefill of 1, of 5 and of 8. Does
 *    section 3's check still pass? How many rows do the scores of the
 *    prefill have in each case?
 * 3. Call `kv_cache_decode_step` once more after the cache is full. What
 *    happens, and what should a server do when a conversation outgrows the
 *    cache?
 * 4. Without the causal mask, could a decoder keep a cache? Which of the
 *    cached keys or values would be wrong after a new position arrives?
 * 5. For Llama 2 7B (32 layers, $d_{model} = 4096$, 32 heads, no key-value
 *    sharing, 16-bit numbers), how many bytes does the cache of one
 *    sequence of 4096 positions hold? How many bytes does one decoding
 *    step read, and how does that compare with the weights (about
 *    $7 \cdot 10^9$ numbers) it also reads?
 * 6. Section 4 counts the attention of one new query. With a batch of
 *    $B$ sequences of different lengths in one cache, what changes in the
 *    count, and in the masks?
 */
