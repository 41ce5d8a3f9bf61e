/* Chapter 20: multi-head latent attention.
 *
 * DeepSeek-V2's and V3's attention: keys and values made from one small
 * latent per position, with a rotary key shared by all heads.  Traces
 * the naive path (the latent up-projected to every head's keys and
 * values) and the absorbed path (attention run on the latent itself),
 * checks that they agree, decodes through a cache of latents, and sizes
 * the cache against multi-head, grouped-query and multi-query attention.
 * Run it with `make ch20`; the book's page is
 * docs/20_multihead_latent_attention.md.
 */

/*md
 * Chapter 17 made the key-value cache smaller by giving several query
 * heads one key head and one value head to share. Every head of a group
 * then sees the same keys, which is what costs quality.
 * *[Multi-head latent attention](glossary.md#multi-head-latent-attention)* (MLA, [DeepSeek-AI
 * 2024](https://arxiv.org/abs/2405.04434), DeepSeek-V2, and [DeepSeek-V3](https://arxiv.org/abs/2412.19437))
 * shrinks the cache another way. Each position gets one *latent* vector
 * $c_{kv}$ of $d_c$ features, a down-projection of $x$, and every head's
 * keys and values are up-projections of it. Vectors are rows here, as in
 * the whole book (chapter 02), and a weight is stored as PyTorch stores
 * it, `(out, in)`: head $j$'s key is $c_{kv} W_{UK,j}^\top$ and its value
 * $c_{kv} W_{UV,j}^\top$, with $W_{UK,j}$ of shape $(d_{nope}, d_c)$ and
 * $W_{UV,j}$ of shape $(d_v, d_c)$. (The paper writes column vectors,
 * $W^{UK} c^{KV}$; it is the same product, transposed.) The heads keep
 * keys of their own, and yet the cache need only hold $c_{kv}$.
 *
 * Rotary positions (chapter 15) do not fit that picture: a key turned
 * by its position is no longer $c_{kv} W_{UK,j}^\top$ for a fixed matrix. So
 * MLA keeps RoPE apart. Each query head has a second part of $d_r$
 * features that is turned, and all heads share one turned key $k_{pe}$
 * of $d_r$ features per position. A head's score is the sum of the two
 * dot products:
 *
 * $$s_{j,it} = \frac{q_{nope,j,i} \cdot c_{kv,t} W_{UK,j}^\top + q_{pe,j,i}
 * \cdot k_{pe,t}}{\sqrt{d_{nope} + d_r}}$$
 *
 * The queries have a low-rank path too ($x \to d_q'$ features, RMS-normalised,
 * $\to$ every head's $d_{nope} + d_r$), which saves
 * weights, not cache. The library follows the published model's code
 * (DeepSeek-V3's `inference/model.py`, class `MLA`) and its names:
 * `wq_a`, `q_norm`, `wq_b` for the queries, `wkv_a` for $[c_{kv} \mid k_{pe}]$,
 * `kv_norm`, `wkv_b` holding every head's $W_{UK}$ and $W_{UV}$,
 * and `wo`.
 */

#include <math.h>

#include "lesson.h"

/* The chapter's sizes: B sequences of N positions, d_model D, H heads,
 * query rank QL, latent DC, DN + DR query and key features per head (DR
 * rotated), DV value features per head. */
enum { B = 2, N = 5, D = 32, H = 4, QL = 16, DC = 10, DN = 8, DR = 4, DV = 6 };

static void make_module(mla *m, tensor **x)
{
    mla_config cfg = {.dim = D, .num_heads = H, .q_lora_rank = QL,
                      .kv_lora_rank = DC, .qk_nope_head_dim = DN,
                      .qk_rope_head_dim = DR, .v_head_dim = DV};
    CHECK(mla_init(m, &cfg));
    gsl_rng *rng = mha_rng_new(20);
    if (!rng)
        exit(1);
    mla_reset(m, rng);
    CHECK(tensor_alloc(SHAPE(B, N, D), x));
    CHECK(tensor_set_names(*x, "B, n, d_model"));
    tensor_fill_normal(*x, rng, 0, 1);
    gsl_rng_free(rng);
}

static void the_weights(const mla *m)
{
    section("1. The weights and their shapes");
    /*md
     * This chapter's module is small: $d_{model} = 32$, $h = 4$ heads,
     * a query rank $d_q' = 16$, a latent of $d_c = 10$ features, and per
     * head $d_{nope} = 8$ query and key features without rotation, $d_r = 4$
     * with, and $d_v = 6$ value features. Its weights, in PyTorch's
     * layout (out features, in features):
     *
     * - `wkv_a` makes $d_c + d_r = 14$ features per position: the first
     *   10 are $c_{kv}$, RMS-normalised by `kv_norm` (the normalisation
     *   is this chapter's exercise), the last 4 are $k_{pe}$, turned by
     *   RoPE. Those 14 numbers are all that is cached.
     * - `wkv_b` is `(h*(d_nope + d_v), d_c)`, `(56, 10)`: for each head in
     *   turn, 8 rows of $W_{UK}$ then 6 rows of $W_{UV}$. Viewed as
     *   `(h, d_nope + d_v, d_c)`, head $j$'s $W_{UK,j}$ is `(8, 10)` and
     *   its $W_{UV,j}$ `(6, 10)`. These are the shapes learners stumble
     *   on ([DeepSeek-V2 issue
     *   10](https://github.com/deepseek-ai/DeepSeek-V2/issues/10)).
     * - `wq_b` makes $h (d_{nope} + d_r) = 48$ features: per head 8 to
     *   meet the up-projected keys and 4 to meet $k_{pe}$.
     *
     * @show src/nn/mla_init.c mla_init
     */
    const struct {
        const char *name;
        const tensor *w;
    } ws[] = {{"wq_a", m->wq_a.weight}, {"q_norm", m->q_norm},
              {"wq_b", m->wq_b.weight}, {"wkv_a", m->wkv_a.weight},
              {"kv_norm", m->kv_norm},  {"wkv_b", m->wkv_b.weight},
              {"wo", m->wo.weight}};
    for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) {
        char s[TRACE_SHAPE_MAX];
        printf("%-8s %s\n", ws[i].name,
               tensor_shape_str(ws[i].w, s, sizeof s));
    }
}

static void naive_path(mla *m, const tensor *x)
{
    section("2. The naive path");
    /*md
     * The naive path makes every head's keys and values, as chapter 08's
     * module does, and then attends as usual. Read the trace for $B = 2$
     * sequences of $n = 5$ positions:
     *
     * - The queries: `wq_a` to 16 features, `rms_norm`, `wq_b` to 48,
     *   viewed as `(2, 5, 4, 12)`, 12 = $d_{nope} + d_r$ per head. The
     *   last 4 of each head are cut out (`narrow`, a view), copied into
     *   a `(2, 5, 16)` (4 heads of 4: a narrow's rows are not evenly
     *   spaced, so the `reshape` copies), turned by `rope_apply`, and
     *   written back
     *   into the queries' own buffer (`into q[..., 8:]`, a copy).
     * - The latent: `wkv_a` to `(2, 5, 14)`, split into $c_{kv}$
     *   `(2, 5, 10)`, normalised, and $k_{pe}$ `(2, 5, 4)`, turned. Had
     *   we a cache, these are the two tensors it would keep.
     * - Up-projection: `wkv_b` on the latent gives `(2, 5, 56)`, viewed
     *   as `(2, 5, 4, 14)`: per head 8 key features and 6 value features.
     * - The keys: each head's 8 up-projected features beside the *same*
     *   $k_{pe}$, expanded over the heads with stride 0 (chapter 17's
     *   sharing, a view): `cat` makes `(2, 5, 4, 12)`.
     * - From there it is chapter 08's attention: the keys, values and
     *   queries, their heads side by side, go into the batch with chapter
     *   06's `transpose_qkv`, `(8, 5, 12)` and `(8, 5, 6)`; the scores
     *   are `(8, 5, 5)`, `(B*h, n, t)`, the causal softmax is scaled by
     *   $1/\sqrt{12}$, the values give `(8, 5, 6)`, `transpose_output`
     *   joins the heads to `(2, 5, 24)` and `wo` maps them back to 32.
     *
     * `rms_norm` is the published model's *[RMSNorm](glossary.md#rmsnorm)* ([Zhang
     * and Sennrich 2019](https://arxiv.org/abs/1910.07467)), LayerNorm without the
     * mean: each row divided by its root mean square and scaled feature
     * by feature by a learned weight. It keeps the latent's size in
     * check whatever $x$ is:
     *
     * @show src/nn/mla_init.c mla_rms_norm
     *
     * @show src/nn/mla.c attend_naive
     */
    tensor *y;
    trace_to(stdout);
    CHECK(mla_forward(m, x, MLA_NAIVE, &y, NULL));
    trace_to(NULL);
    tensor_free(y);
}

static void absorbed_path(mla *m, const tensor *x)
{
    section("3. The absorbed path");
    /*md
     * At inference the up-projections need not be made at all. The
     * score's first term is a product of three factors, and it can be
     * grouped the other way:
     *
     * $$q_{nope} \cdot (c_{kv} W_{UK}^\top) = (q_{nope} W_{UK}) \cdot
     * c_{kv}$$
     *
     * $W_{UK}$ is *absorbed* into the query: $q_{nope} W_{UK}$, `(n,
     * d_nope) @ (d_nope, d_c)`, moves each head's query into the latent's
     * space, and it meets $c_{kv}$ directly. Likewise the values: the
     * weighted sum of the rows $c_{kv,t} W_{UV}^\top$ is the weighted sum of
     * the $c_{kv,t}$ times $W_{UV}^\top$, so attention sums latents and
     * $W_{UV}$ comes after, once per query instead of once per key. In the published code these
     * are the `einsum`s `bshd,hdc->bshc` and `bshc,hdc->bshd`.
     *
     * In the trace, what differs from section 2 starts after the latent:
     *
     * - `absorb W_UK`: per head, the 8 features times $W_{UK,j}$
     *   `(8, 10)` give 10, and the 4 turned ones are kept beside them:
     *   14 = $d_c + d_r$ features. The heads are folded into the rows,
     *   `(2, 20, 14)`, `(B, h*n, d_c + d_r)`.
     * - The keys are the latent and $k_{pe}$ side by side, `(2, 5, 14)`,
     *   one for all heads, and the values are the latent itself,
     *   `(2, 5, 10)`: this is multi-query attention (chapter 17, $G = 1$)
     *   with keys of 14 features and values of 10. The scores
     *   are `(2, 20, 5)`, one product per sequence for all 20 query rows.
     * - The scale stays $1/\sqrt{d_{nope} + d_r} = 1/\sqrt{12}$: the
     *   scores are the same numbers, only computed in another order.
     * - `W_UV per head` turns each head's `(5, 10)` latent output into
     *   its `(5, 6)` values ($W_{UV,j}$ read transposed), side by side in
     *   `(2, 5, 24)`.
     *
     * No head's own keys or values, `(B, h, t, d)`, are made: every
     * head reads the one latent of each position (the scores still hold
     * a row for each head and query). With DeepSeek-V2's 128 heads, that
     * is what saves the memory and the reading.
     *
     * @show src/nn/mla.c absorb_query
     *
     * @show src/nn/mla.c attend_absorbed
     */
    tensor *y;
    trace_to(stdout);
    CHECK(mla_forward(m, x, MLA_ABSORBED, &y, NULL));
    trace_to(NULL);
    tensor_free(y);
}

static void same_numbers(mla *m, const tensor *x)
{
    section("4. The same numbers");
    /*md
     * The two groupings of one product agree to rounding. The outputs of
     * both paths, and their attention weights, `(B, h, n, t)`:
     */
    tensor *yn, *ya, *wn, *wa; // (B, n, d_model), (B, h, n, t)
    CHECK(mla_forward(m, x, MLA_NAIVE, &yn, &wn));
    CHECK(mla_forward(m, x, MLA_ABSORBED, &ya, &wa));
    double dy = largest_abs_diff(yn, ya), dw = largest_abs_diff(wn, wa);
    printf("outputs: equal (largest difference below 1e-12): %s\n",
           yes_no(dy < 1e-12));
    printf("weights: equal (largest difference below 1e-12): %s\n",
           yes_no(dw < 1e-12));
    printf("\nhead 0 of sequence 0, its weights (query rows, key columns):\n");
    tensor *w0;
    CHECK(tensor_alloc(SHAPE(N, N), &w0));
    for (size_t i = 0; i < N; i++)
        for (size_t t = 0; t < N; t++)
            *TENSOR_AT(w0, i, t) = *TENSOR_AT(wa, 0, 0, i, t);
    tensor_print(stdout, w0, 4);
    /*md
     * The rows are causal (query $i$ sees positions $0 .. i$) and sum to
     * 1. The test suite holds both paths to plain loops written from the
     * formulas, and `make parity` holds them, and decoding through the
     * cache, to a PyTorch reference that follows the published model's
     * code line by line, over fresh random sizes and numbers, to 1e-12.
     */
    tensor_free(w0);
    tensor_free(yn);
    tensor_free(ya);
    tensor_free(wn);
    tensor_free(wa);
}

static void decoding(mla *m, const tensor *x)
{
    section("5. Decoding with a latent cache");
    /*md
     * A latent cache keeps, per position, $c_{kv}$ (normalised) and
     * $k_{pe}$ (turned): `(B, capacity, d_c)` and `(B, capacity, d_r)`.
     * A step projects the new positions, appends their latents, and runs
     * the absorbed path over every position the cache holds, as
     * chapter 16's step did with keys and values. Below, the 5 positions
     * of X are decoded one per step and each step's output row is
     * compared with the row of section 4's forward pass over all 5. The
     * last step is traced: the cache grows to `(2, 5, 10)` and
     * `(2, 5, 4)`, the one new query row per head meets all 5.
     *
     * @show src/nn/mla.c mla_decode_step
     */
    tensor *full;
    CHECK(mla_forward(m, x, MLA_NAIVE, &full, NULL));
    mla_cache c;
    CHECK(mla_cache_init(&c, B, DC, DR, N));
    for (size_t t = 0; t < N; t++) {
        tensor *xt, *yt, *row;
        CHECK(tensor_narrow(x, 1, t, 1, &xt));
        if (t == N - 1) {
            printf("\n");
            trace_to(stdout);
        }
        CHECK(mla_decode_step(m, &c, xt, MLA_ABSORBED, &yt, NULL));
        trace_to(NULL);
        CHECK(tensor_narrow(full, 1, t, 1, &row));
        char s[TRACE_SHAPE_MAX];
        printf("%sstep %zu: cache %s, equal to the forward's row %zu: %s\n",
               t == N - 1 ? "\n" : "", t,
               trace_dims_str(s, sizeof s, 3, (size_t[]){B, c.length, DC}), t,
               yes_no(largest_abs_diff(yt, row) < 1e-12));
        tensor_free(xt);
        tensor_free(yt);
        tensor_free(row);
    }
    mla_cache_free(&c);
    tensor_free(full);
}

/* Numbers cached per position and layer. */
static double per_head(double kv_heads, double head_size)
{
    return 2 * kv_heads * head_size; // a key and a value per key-value head
}

static void cache_table(void)
{
    section("6. What the cache holds per position");
    /*md
     * Per position and layer, multi-head attention caches a key and a
     * value for each of $h$ heads, $2 h d_h$ numbers; grouped-query
     * attention $2 G d_h$; multi-query $2 d_h$; latent attention
     * $d_c + d_r$, whatever $h$ is. In the first three a key is a head's
     * $d_h$ features, and RoPE turns those same features (chapter 15), so
     * no extra rotary features are counted; MLA's $d_r$ are features of
     * their own, held once for all heads by its shared key. That is how
     * the DeepSeek-V2 paper compares them (its Table 1), and the sizes
     * below are that paper's: DeepSeek-V2 has 60 layers of 128 heads of
     * $d_h = 128$ features, $d_c = 512 = 4 d_h$ and $d_r = 64 = d_h / 2$:
     * 576 numbers where multi-head attention would cache 32,768, 57 times
     * fewer. That is as much as grouped-query attention with
     * $G = 576 / (2 \cdot 128) = 2.25$ groups, the comparison the paper
     * draws; yet every head still has keys and values of its own.
     * DeepSeek-V3, whose published code the library follows, keeps these
     * sizes per layer; the table counts V2's 60 layers.
     *
     * For Llama 2 70B's shape (chapter 17: 80 layers, 64 heads of 128),
     * the table puts MLA with the same choice, $d_c = 4 d_h$ and $d_r = d_h/2$.
     * Bytes are for 16-bit numbers over all layers, for one
     * position and for a sequence of 4096.
     */
    static const struct {
        const char *model;
        double layers, heads, head_size;
    } models[] = {{"DeepSeek-V2", 60, 128, 128}, {"Llama 2 70B", 80, 64, 128}};
    const double bytes = 2, context = 4096;
    printf("%-12s %-26s %9s %14s %14s\n", "model", "attention", "numbers",
           "per position", "4096 positions");
    const char *labels[4] = {"MHA", "GQA (G = 8)", "MQA", "MLA"};
    double kib[4];
    for (size_t i = 0; i < 2; i++) {
        double hd = models[i].head_size, L = models[i].layers;
        struct {
            const char *what;
            double numbers;
        } rows[] = {{"multi-head (G = h)", per_head(models[i].heads, hd)},
                    {"grouped-query (G = 8)", per_head(8, hd)},
                    {"multi-query (G = 1)", per_head(1, hd)},
                    {"latent (d_c 512, d_r 64)", 4 * hd + hd / 2}};
        for (size_t r = 0; r < 4; r++) {
            char a[32], b[32];
            double one = rows[r].numbers * L * bytes;
            printf("%-12s %-26s %9.0f %14s %14s\n", r ? "" : models[i].model,
                   rows[r].what, rows[r].numbers, bytes_str(one, a, sizeof a),
                   bytes_str(one * context, b, sizeof b));
            if (i == 0)
                kib[r] = one / 1024;
        }
    }
    plot_options opt = {.title = "cache per position, DeepSeek-V2's shape, "
                                 "16-bit",
                        .xlabel = "attention", .ylabel = "KiB"};
    printf("\n");
    announce_plot(plot_bars(labels, kib, 4, &opt, plot_base("20_cache_bytes"),
                            HEATMAP_PNG | HEATMAP_SVG),
                  "20_cache_bytes");
    /*md
     * What MLA pays is work: each step the absorbed query
     * $q_{nope} W_{UK}$ and the output's $W_{UV}$ cost
     * $h \cdot d_{nope} \cdot d_c$ multiply-adds each per query, and the scores
     * are over
     * $d_c + d_r = 576$ features instead of multi-head attention's
     * $d_h = 128$ (MLA without the absorption scores over
     * $d_{nope} + d_r = 192$). Decoding is bound by reading the cache, not by
     * arithmetic, so the trade pays.
     */
}

int main(void)
{
    mha_program_init();
    mla m;
    tensor *x;
    make_module(&m, &x);
    the_weights(&m);
    naive_path(&m, x);
    absorbed_path(&m, x);
    same_numbers(&m, x);
    decoding(&m, x);
    cache_table();
    tensor_free(x);
    mla_free(&m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `mla_rms_norm` (`make grade EXERCISE=mla_rms_norm`). How does
 *    it differ from chapter 11's LayerNorm, and why is a row of zeros
 *    not a division by zero?
 * 2. Section 3 absorbs $W_{UK}$ into each query at every step. It could
 *    be folded into `wq_b` once instead: what shape would the folded
 *    weight have for this chapter's sizes, and for DeepSeek-V2's ($h = 128$,
 *    $d_{nope} = 128$, $d_c = 512$, $d_q' = 1536$)? Is that a good
 *    trade?
 * 3. Why can $k_{pe}$ not be folded into the latent, that is, why does
 *    RoPE need features of its own? Write the score of a key turned by
 *    its position $t$ and see what would have to be absorbed.
 * 4. Count the multiply-adds of one decoding step at position $t$ for
 *    one head by the naive path (up-projecting all $t$ latents) and by
 *    the absorbed path, with DeepSeek-V2's sizes. From which $t$ does
 *    the absorbed path do less?
 * 5. In section 6, with which $G$ would grouped-query attention cache
 *    exactly as much as MLA for Llama 2 70B's shape? Is that a whole
 *    number?
 */
