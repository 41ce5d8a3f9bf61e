/* Chapter 16, the key: causal decoding with a KV cache.
 *
 * The numbers the answers to chapter 16's exercises quote: the
 * multiply-adds of the chapter's prefill and step, decoding with other
 * prefills, a step past a full cache, and the cache of Llama 2 7B.
 */
#include "key.h"

enum { B = 1, N = 8, H = 2, P = 4, D = H * P };

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The library's solution is `attention_madds` in
     * [`src/nn/attention_madds.c`](../../src/nn/attention_madds.c) (folded on the chapter's page);
     * `make grade EXERCISE=attention_madds` grades a student's. Under the
     * causal mask query $i$ of $n_q$ sees $i + n_k - n_q + 1$ keys (at
     * most $n_k$); each (query, key) pair costs $d_{model}$ multiply-adds
     * for the score and $d_{model}$ for its share of the weighted average,
     * so the count is $2 \, d_{model} \times$ the pairs.
     *
     * The prefill of 3 positions: the queries see 1, 2 and 3 keys, 6 pairs,
     * $2 \cdot 8 \cdot 6 = 96$ multiply-adds. The step after it: one query
     * and 4 keys, 4 pairs, $2 \cdot 8 \cdot 4 = 64$ (the library's function
     * below).
     */
    double m;
    CHECK(attention_madds(3, 3, 8, 1, &m));
    printf("prefill, 3 queries and 3 keys, causal: %.0f multiply-adds\n", m);
    CHECK(attention_madds(1, 4, 8, 1, &m));
    printf("the step after, 1 query and 4 keys:    %.0f multiply-adds\n", m);
}

typedef struct {
    multihead m;
    tensor *x, *full;
} lesson;

/* Section 1 of chapter 16: the causal module, its input, its output. */
static void section1(lesson *l)
{
    gsl_rng *rng = mha_rng_new(16);
    if (!rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .causal = 1};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->x));
    tensor_fill_normal(l->x, rng, 0, 1);
    CHECK(multihead_forward(&l->m, l->x, l->x, l->x, NULL, &l->full, NULL));
    gsl_rng_free(rng);
}

static void lesson_free(lesson *l)
{
    multihead_free(&l->m);
    tensor_free(l->x);
    tensor_free(l->full);
}

/* Decode the sequence with a prefill of `prefill`, then one position a
 * step; the scores' rows of the prefill and section 3's check. */
static void decode(lesson *l, size_t prefill)
{
    kv_cache c;
    tensor *decoded;
    CHECK(kv_cache_init(&c, B, H, P, N));
    CHECK(tensor_alloc(SHAPE(B, N, D), &decoded));
    size_t rows = 0;
    for (size_t t = 0; t < N;) {
        size_t n = t == 0 ? prefill : 1;
        tensor *xt, *yt, *wt; // wt (B, h, n, t + n)
        CHECK(tensor_narrow(l->x, 1, t, n, &xt));
        CHECK(kv_cache_decode_step(&l->m, &c, xt, &yt, &wt));
        if (t == 0)
            rows = wt->shape[2];
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < D; j++)
                *TENSOR_AT(decoded, 0, t + i, j) = *TENSOR_AT(yt, 0, i, j);
        tensor_free(xt);
        tensor_free(yt);
        tensor_free(wt);
        t += n;
    }
    printf("prefill of %zu: rows of the prefill's scores per head %zu; equal "
           "to all 8 at once (below 1e-12): %s\n", prefill, rows,
           yes_no(largest_abs_diff(decoded, l->full) < 1e-12));
    tensor_free(decoded);
    kv_cache_free(&c);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * The check passes for every prefill: each position's output depends
     * only on its own query and the keys and values at positions up to it,
     * and those are the same whether they were computed in the prefill or
     * one step at a time (the cache holds exactly the keys and values the
     * full causal pass computes). The prefill's scores have one row per
     * prefilled position: 1, 5 and 8 rows (of as many keys) per head. With
     * a prefill of 8 there is no step left: the prefill is the whole causal
     * forward pass, written into the cache for steps to come.
     */
    lesson l;
    section1(&l);
    decode(&l, 1);
    decode(&l, 5);
    decode(&l, 8);
    lesson_free(&l);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * The cache has a fixed capacity, 8 positions: the step is refused
     * with an error that names the lengths (below), and the cache and the
     * outputs so far are left as they were; nothing is overwritten.
     *
     * A server whose conversation outgrows the cache has to choose: refuse
     * or end the conversation at the model's context length; drop the
     * oldest positions (a sliding window: keep the last $W$ keys, which
     * changes what the model can see, and with RoPE the kept keys keep
     * their rotations, so positions must keep counting up); shorten the
     * history by summarising it and starting a new cache from the
     * summary; or, below the model's limit, grow the cache (copy into a
     * larger one, or allocate it in pages as vLLM does, so that no copy is
     * needed). Recomputing from scratch at every step is the one choice
     * the cache exists to avoid.
     */
    lesson l;
    section1(&l);
    kv_cache c;
    tensor *y;
    CHECK(kv_cache_init(&c, B, H, P, N));
    CHECK(kv_cache_decode_step(&l.m, &c, l.x, &y, NULL));
    tensor_free(y);
    tensor *xt;
    CHECK(tensor_narrow(l.x, 1, 0, 1, &xt));
    int status = kv_cache_decode_step(&l.m, &c, xt, &y, NULL);
    printf("one more step after %zu of %zu positions: status %d (%s)\n  %s\n",
           c.length, c.capacity, status, gsl_strerror(status), mha_last_error());
    printf("cache length afterwards: %zu\n", c.length);
    tensor_free(xt);
    kv_cache_free(&c);
    lesson_free(&l);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * In one layer, the keys and values of a position are projections of
     * that position's input alone ($x_t W_k^\top$, $x_t W_v^\top$): a new
     * position does not change them, with or without a mask. What changes
     * without the mask is the *outputs* of the earlier positions: each
     * earlier query may now attend to the new key, so every earlier output
     * row is stale after each step and must be recomputed, which is all the
     * work the cache was meant to save. In a stack of layers it is worse:
     * the keys and values of layer 2 onwards are projections of layer 1's
     * outputs at each position, which have changed, so every cached key
     * and value above the first layer would be wrong. The causal mask is
     * what makes a position's output, and so everything computed from it,
     * final once computed.
     */
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * The cache holds a key and a value of $d_{model}$ numbers per layer
     * and position: $2 \cdot 32 \cdot 4096 \cdot 4096$ numbers of 2 bytes,
     * exactly 2 GiB per sequence of 4096 positions. A decoding step at the
     * end of such a sequence reads the whole cache, and all the weights,
     * about $7 \cdot 10^9$ numbers of 2 bytes, 14 GB. The cache read is
     * 0.153 of the weights' (below): for one sequence the weights
     * dominate, but each sequence of a batch has its own cache while all
     * share the weights, so with a batch of 6.5 such sequences (7 in
     * practice) the caches already weigh as much as the weights. That is what
     * grouped-query attention (chapter 17) shrinks.
     */
    const double layers = 32, d = 4096, t = 4096, bytes = 2;
    double cache = 2 * layers * t * d * bytes, weights = 7e9 * bytes;
    printf("cache: 2 * 32 * 4096 * 4096 * 2 = %.0f bytes = %.0f GiB\n", cache,
           cache / (1024.0 * 1024 * 1024));
    printf("per position: %.0f bytes = %.0f KiB\n", cache / t, cache / t / 1024);
    printf("weights read per step: %.0f bytes\n", weights);
    printf("cache / weights: %.3f; sequences whose caches weigh as much as the "
           "weights: %.1f\n", cache / weights, weights / cache);
}

static void exercise6(void)
{
    section("Exercise 6");
    /*md
     * With sequences of lengths $t_1, \dots, t_B$, the step's attention is
     * $2 \, d_{model} \sum_b t_b$ multiply-adds: each sequence's query
     * reads its own $t_b$ keys, not the longest one's (a padded
     * implementation that computes $B \cdot \max_b t_b$ scores wastes the
     * difference). The projections are unchanged, $4 d_{model}^2$ per
     * sequence.
     *
     * The masks: the cache now has one length per sequence, so the
     * causal rule "key $j$ visible when $j \le i + L_k - L_q$" must use
     * each sequence's own $L_k = t_b$: in a cache of one capacity, sequence
     * $b$'s new query sees keys 0 to $t_b$ and none of the unused slots
     * after them, a `valid_lens` of $t_b + 1$ per sequence (a `(B,)` one
     * rather than one shared length). Positions differ too: each sequence
     * writes its new key at its own position $t_b$, and RoPE turns its
     * query and key by that position, not by a shared step number.
     */
    double sum = 0, m;
    const size_t t[3] = {5, 17, 100};
    for (int b = 0; b < 3; b++) {
        CHECK(attention_madds(1, t[b] + 1, 4096, 1, &m));
        sum += m;
    }
    CHECK(attention_madds(1, 101, 4096, 1, &m));
    printf("three sequences with 6, 18 and 101 keys, d_model 4096: %.0f "
           "multiply-adds;\npadded to the longest: %.0f\n", sum, 3 * m);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5, exercise6)
