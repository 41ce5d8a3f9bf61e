/* Chapter 17: multi-query and grouped-query attention.
 *
 * Shares key-value heads between query heads: h = 8 query heads over
 * G = 8, 2 and 1 key-value heads.  Traces the sharing (a view, not a
 * copy), checks the grouped module against a multi-head module with the
 * keys and values repeated, draws the heads of each group, and sizes the
 * key-value cache of a large model by G.  Run it with `make ch17`; the
 * book's page is docs/17_grouped_query_attention.md.
 */

/*md
 * Chapter 16 ended with the cost of decoding: every step reads the whole
 * key-value cache, $2 \cdot L_{layers} \cdot h \cdot p$ numbers per
 * position, and for a large model at a long context that is gigabytes per
 * sequence, read again for every token. The queries are not the problem:
 * there is one new query per step. The keys and values are.
 *
 * *Multi-query attention* ([Shazeer
 * 2019](https://arxiv.org/abs/1911.02150)) keeps $h$ query heads and gives
 * them one key head and one value head to share. The cache shrinks $h$
 * times. *[Grouped-query attention](glossary.md#grouped-query-attention)* ([Ainslie et al.
 * 2023](https://arxiv.org/abs/2305.13245)) sits between:
 * $G$ key-value heads, each shared by a group of $h/G$ query heads. $G = h$
 * is the multi-head attention of chapter 08, $G = 1$ is multi-query
 * attention. [Llama 2](https://arxiv.org/abs/2307.09288) 70B and [Llama
 * 3](https://arxiv.org/abs/2407.21783) use $G = 8$; llama2.c calls $G$
 * `n_kv_heads`, and PyTorch's `scaled_dot_product_attention` takes
 * `enable_gqa=True` (from version 2.5) for keys and values with fewer
 * heads than the queries.
 *
 * In this library it is one field of the configuration, `kv_heads`. The
 * queries are projected and split into $h$ heads as before; W_k and W_v
 * project to $G \cdot p$ features instead of $d_{model}$, split into $G$
 * heads. This chapter uses $h = 8$ heads of $p = 4$ features
 * ($d_{model} = 32$) throughout.
 */

#include <math.h>

#include "lesson.h"

/* H query heads of P features, D = d_model = H * P; B sequences of N
 * positions for self-attention. */
enum { H = 8, P = 4, D = H * P, B = 2, N = 6 };

/* The three groupings the chapter compares: multi-head, grouped, multi-query. */
static const size_t Gs[] = {8, 2, 1};
#define NG (sizeof Gs / sizeof Gs[0])

/* What the sections share: the input X and, for each G, a grouped module. */
typedef struct {
    tensor *x;      // (B, n, d_model)
    multihead m[NG]; // kv_heads Gs[g]
} lesson;

static void which_head(void)
{
    section("1. Which key-value head a query head reads");
    /*md
     * The query heads are numbered $0, \dots, h-1$ and grouped in order,
     * $h/G$ consecutive heads to a group: the first group reads key-value
     * head 0, the next key-value head 1, and so on. With $h = 8$ and
     * $G = 2$, heads 0-3 read key-value head 0 and heads 4-7 read
     * key-value head 1. That is the same order as PyTorch's
     * `repeat_interleave` on the key-value heads, and llama2.c's (its
     * `kv_mul` query heads to a key head), and it is one of this chapter's
     * exercises. Its tests check that order (not head $i$ reading
     * $i \bmod G$), $G = h$ (each head its own) and $G = 1$ (all read head
     * 0); that `kv_heads` 0 means `num_heads`, as everywhere in the
     * library (plain multi-head attention); and that a $G$ that does not
     * divide $h$, $h = 0$, or a head number not below $h$ is refused with
     * `GSL_EINVAL` and a message naming the numbers:
     *
     * @show src/nn/gqa.c gqa_kv_head
     */
    printf("query head:    ");
    for (size_t i = 0; i < H; i++)
        printf(" %zu", i);
    printf("\n");
    for (size_t g = 0; g < NG; g++) {
        printf("G = %zu, kv head:", Gs[g]);
        for (size_t i = 0; i < H; i++) {
            size_t kv;
            CHECK(gqa_kv_head(i, H, Gs[g], &kv));
            printf(" %zu", kv);
        }
        printf("   (%zu query head%s per group)\n", H / Gs[g],
               H / Gs[g] == 1 ? "" : "s");
    }
}

/* The modules of every G: the G = 8 module's weights are Xavier; a
 * grouped one takes its W_q, W_o and, for key-value head k, the mean of
 * the G = 8 module's blocks of the heads in group k (Ainslie et al.'s way
 * to make a grouped model from a multi-head one). */
static void make_modules(lesson *l, gsl_rng *rng)
{
    for (size_t g = 0; g < NG; g++) {
        multihead_config cfg = {.query_size = D, .key_size = D,
                                .value_size = D, .num_hiddens = D,
                                .num_heads = H, .kv_heads = Gs[g]};
        CHECK(multihead_init(&l->m[g], &cfg));
    }
    multihead *mha = &l->m[0];
    multihead_reset_xavier(mha, rng);
    for (size_t g = 1; g < NG; g++) {
        multihead *m = &l->m[g];
        CHECK(tensor_copy_into(m->W_q.weight, mha->W_q.weight));
        CHECK(tensor_copy_into(m->W_o.weight, mha->W_o.weight));
        const linear *from[2] = {&mha->W_k, &mha->W_v};
        linear *to[2] = {&m->W_k, &m->W_v};
        for (size_t w = 0; w < 2; w++) {
            tensor_fill(to[w]->weight, 0);
            // row r of head i goes into row r of its group's head
            for (size_t i = 0; i < H; i++) {
                size_t kv;
                CHECK(gqa_kv_head(i, H, Gs[g], &kv));
                for (size_t r = 0; r < P; r++)
                    for (size_t c = 0; c < D; c++)
                        *TENSOR_AT(to[w]->weight, kv * P + r, c) +=
                            *TENSOR_AT(from[w]->weight, i * P + r, c) /
                            (double)(H / Gs[g]);
            }
        }
    }
}

static void shared_in_the_trace(lesson *l)
{
    section("2. Sharing is a view");
    /*md
     * The module with $G = 2$ on X `(2, 6, 32)`, two sequences of 6
     * positions, traced. What changes against chapter 08's trace:
     *
     * - W_k and W_v make 8 features, not 32: `(2, 6, 32) -> (2, 6, 8)`,
     *   $G \cdot p$. Their weights are `(8, 32)` where W_q's is `(32, 32)`.
     * - `transpose_qkv` splits the keys and values into $G = 2$ heads per
     *   sequence, `(4, 6, 4)`, `(B*G, Lk, p)`, and the queries into 8,
     *   `(16, 6, 4)`.
     * - The sharing, in the step `grouped heads`: a key head viewed as
     *   `(4, 1, 6, 4)` and expanded to `(4, 4, 6, 4)`,
     *   `(B*G, h/G, Lk, p)`. The expand is a view with stride 0 on the new
     *   axis: all four query heads of a group read the same numbers, and
     *   nothing is copied. Reshaping that expanded view to `(16, 6, 4)`
     *   is what `repeat_interleave` does, and it would copy (chapter 07
     *   repeated `valid_lens` that way); the module never does.
     *   In fact nothing reads the two expanded views at all: they are
     *   made for the trace, to show the sharing as a shape (which query
     *   heads read which key-value head), and freed at once.
     * - What the product does read comes next: the four query heads of a
     *   group are folded into the rows. Their queries are consecutive batch rows of `(16, 6, 4)`, so the
     *   view `(4, 24, 4)`, `(B*G, (h/G)*Lq, p)`, stacks them one under
     *   another, and one product per key head scores all 24 query rows
     *   against its 6 keys, `(4, 24, 6)`. A product of 24 rows is the same
     *   arithmetic as four products of 6 rows, in one BLAS call, and the
     *   keys it reads are the `(4, 6, 4)` heads as they are, not the
     *   expanded `(4, 4, 6, 4)`. The sharing is the same either way:
     *   every query row of a group meets its group's one key head.
     *
     * Then the heads are unfolded, a view back to `(16, 6, 4)`, joined and
     * mixed by W_o exactly as in chapter 08: the output is `(2, 6, 32)`
     * whatever $G$ is. In the module, K and V are split into $G$ heads,
     * and step 4 takes the folded path when $G < h$:
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * @show src/nn/multihead.c multihead_attend
     *
     * @show src/nn/multihead.c attend_groups
     */
    tensor *y;
    multihead *m = &l->m[1];
    trace_to(stdout);
    CHECK(multihead_forward(m, l->x, l->x, l->x, NULL, &y, NULL));
    trace_to(NULL);
    printf("\nweights by G (out features, in features):\n");
    for (size_t g = 0; g < NG; g++) {
        char q[TRACE_SHAPE_MAX], k[TRACE_SHAPE_MAX];
        printf("  G = %zu: W_q %s, W_k and W_v %s\n", Gs[g],
               tensor_shape_str(l->m[g].W_q.weight, q, sizeof q),
               tensor_shape_str(l->m[g].W_k.weight, k, sizeof k));
    }
    tensor_free(y);
}

static void same_as_repeated(lesson *l)
{
    section("3. The same as multi-head attention with repeated keys");
    /*md
     * What grouped-query attention computes, said another way: take the
     * grouped module's W_k, `(G*p, d_model)`, and repeat each head's block
     * of $p$ rows $h/G$ times in place, `repeat_interleave`, to get an
     * `(h*p, d_model)` weight; the same for W_v. A plain multi-head module
     * with those weights, and the grouped module's W_q and W_o, computes
     * the same output, since each of its heads then projects exactly the
     * keys and values of its group's key-value head.
     *
     * @show src/nn/gqa.c gqa_repeat_kv_weight
     *
     * The check below builds that module for each $G$, runs both on X with
     * a causal mask (chapter 16's decoding case), and compares the
     * outputs. Every score is the same dot product of the same numbers
     * either way, and only which buffer holds the keys differs, so they
     * agree to rounding (usually to the last bit). The repeated module holds $h/G$ copies of
     * every key-value weight and computes every key $h/G$ times: the
     * grouped module is that computation without the copies.
     */
    for (size_t g = 0; g < NG; g++) {
        multihead *m = &l->m[g];
        m->cfg.causal = 1;
        multihead_config cfg = m->cfg;
        cfg.kv_heads = 0;
        multihead rep;
        CHECK(multihead_init(&rep, &cfg));
        tensor *wk, *wv, *y_gqa, *y_rep;
        trace_quiet_begin();
        CHECK(gqa_repeat_kv_weight(m->W_k.weight, H, Gs[g], &wk));
        CHECK(gqa_repeat_kv_weight(m->W_v.weight, H, Gs[g], &wv));
        trace_quiet_end();
        CHECK(tensor_copy_into(rep.W_q.weight, m->W_q.weight));
        CHECK(tensor_copy_into(rep.W_k.weight, wk));
        CHECK(tensor_copy_into(rep.W_v.weight, wv));
        CHECK(tensor_copy_into(rep.W_o.weight, m->W_o.weight));
        CHECK(multihead_forward(m, l->x, l->x, l->x, NULL, &y_gqa, NULL));
        CHECK(multihead_forward(&rep, l->x, l->x, l->x, NULL, &y_rep, NULL));
        double diff = largest_abs_diff(y_gqa, y_rep);
        char s[TRACE_SHAPE_MAX];
        printf("G = %zu: W_k %s repeated to ", Gs[g],
               tensor_shape_str(m->W_k.weight, s, sizeof s));
        printf("%s; equal (largest difference below 1e-12): %s\n",
               tensor_shape_str(wk, s, sizeof s), yes_no(diff < 1e-12));
        m->cfg.causal = 0;
        tensor_free(wk);
        tensor_free(wv);
        tensor_free(y_gqa);
        tensor_free(y_rep);
        multihead_free(&rep);
    }
}

static void heads_of_a_group(lesson *l)
{
    section("4. The heads of one group");
    /*md
     * Heads that share a key head score their queries against the same
     * keys. Their weights still differ, because each head has its own
     * queries; but whatever the keys themselves favour, every head of the
     * group sees.
     *
     * To make that visible, X's feature 0 is set to 1 at every position,
     * and the first row of every query head in W_q reads only that
     * feature, with weight 6. So every query's first coordinate is 6,
     * and the score of key $j$ is $6 k_{j,0}$ plus what the other three
     * coordinates add: keys with a large first coordinate win in every
     * head that reads them. The grouped modules are made from the $G = 8$
     * one as Ainslie et al. make a grouped model from a multi-head one:
     * the key (and value) weight of a group is the mean of its heads'.
     *
     * The picture has one row per $G$ and one panel per query head of the
     * first sequence, each titled with the key-value head it reads. With
     * $G = 8$ every head has its own pattern; with $G = 2$ heads 0-3 look
     * alike and heads 4-7 look alike (here the first group's keys favour
     * keys 1 and 5, the second group's key 2); with $G = 1$ all eight look
     * alike.
     *
     * The table says the same with numbers: the mean absolute difference
     * between the weights of two heads, averaged over the pairs of heads
     * in one group and over the pairs in different groups. Heads of one
     * group differ by 0.0451 on average with $G = 2$ and by 0.0345 with
     * $G = 1$; heads that read different key-value heads differ by
     * 0.2169, as much as the eight independent heads of $G = 8$ do. The
     * queries alone keep heads of one group from being identical.
     *
     * `plots/17_view.html` is a page of the $G = 2$ case to open in a
     * browser: its grid boxes the query heads of each key-value head
     * together, so the two patterns are side by side.
     */
    heatmap_options opt = {0};
    tensor *all; // (G's, h, n, n): example 0's weights for each G
    CHECK(tensor_alloc(SHAPE(NG, H, N, N), &all));
    char titles[NG * H][32];
    const char *tp[NG * H];
    printf("mean |difference| of the weights of two query heads, over the "
           "pairs\nof heads in one group and in different groups:\n\n");
    printf("%-8s %14s %18s\n", "", "one group", "different groups");
    trace_log log; // the steps of G = 2, for the page's dataflow
    size_t g2 = 1;  // Gs[1] = 2
    tensor *w_g2 = NULL; // (B, h, n, n): the weights of G = 2, for the page
    for (size_t g = 0; g < NG; g++) {
        tensor *y, *w; // w (B, h, n, n)
        if (g == g2)
            trace_log_start(&log);
        CHECK(multihead_forward(&l->m[g], l->x, l->x, l->x, NULL, &y, &w));
        if (g == g2)
            trace_log_stop(&log);
        for (size_t i = 0; i < H; i++) {
            size_t kv;
            CHECK(gqa_kv_head(i, H, Gs[g], &kv));
            snprintf(titles[g * H + i], sizeof titles[0],
                     "G=%zu head %zu: kv %zu", Gs[g], i, kv);
            tp[g * H + i] = titles[g * H + i];
            for (size_t q = 0; q < N; q++)
                for (size_t k = 0; k < N; k++)
                    *TENSOR_AT(all, g, i, q, k) =
                        *TENSOR_AT(w, 0, i, q, k);
        }
        // [0]: pairs in one group, [1]: pairs in different groups
        double sum[2] = {0, 0};
        size_t pairs[2] = {0, 0};
        for (size_t a = 0; a < H; a++)
            for (size_t b = a + 1; b < H; b++) {
                size_t ka, kb;
                CHECK(gqa_kv_head(a, H, Gs[g], &ka));
                CHECK(gqa_kv_head(b, H, Gs[g], &kb));
                double d = 0;
                for (size_t q = 0; q < N; q++)
                    for (size_t k = 0; k < N; k++)
                        d += fabs(*TENSOR_AT(all, g, a, q, k) -
                                  *TENSOR_AT(all, g, b, q, k));
                sum[ka != kb] += d / (N * N);
                pairs[ka != kb]++;
            }
        printf("G = %zu  ", Gs[g]);
        for (size_t w = 0; w < 2; w++) {
            char cell[32] = "(no pairs)";
            if (pairs[w])
                snprintf(cell, sizeof cell, "%.4f", sum[w] / (double)pairs[w]);
            printf(w ? " %18s" : " %14s", cell);
        }
        printf("\n");
        tensor_free(y);
        if (g == g2)
            w_g2 = w;
        else
            tensor_free(w);
    }
    opt.titles = tp;
    opt.ntitles = NG * H;
    printf("\n");
    draw_heatmap(all, &opt, "17_heads");
    explorer_page page = {.title = "Chapter 17: 8 query heads over 2 "
                                   "key-value heads",
                          .weights = w_g2, .head_size = D / H,
                          .trace = &log, .kv_heads = Gs[g2]};
    draw_explorer(&page, "17_view");
    trace_log_free(&log);
    tensor_free(w_g2);
    tensor_free(all);
}

/* Bytes of keys and values cached: 2 (keys and values) per layer, kv
 * head, feature and position, of `bytes` each. */
static double cache_bytes(double layers, double kv_heads, double head_size,
                          double positions, double bytes)
{
    return 2 * layers * kv_heads * head_size * positions * bytes;
}

static void cache_by_g(lesson *l)
{
    section("5. The cache by G");
    /*md
     * The key-value cache of chapter 16 holds each layer's keys and values
     * as `(B, G, capacity, p)`: its size is proportional to $G$. For this
     * chapter's modules, with room for 6 positions, the library's caches
     * are below.
     *
     * For a model people use, the arithmetic is the same. Llama 2 70B has
     * 80 layers of 64 query heads of 128 features ($d_{model} = 8192$),
     * $G = 8$, a context of 4096 positions, and is served with 16-bit
     * numbers (2 bytes). Per position it caches
     * $2 \cdot 80 \cdot G \cdot 128 \cdot 2$ bytes: 320.0 KiB with
     * $G = 8$ where multi-head attention would need 2.5 MiB. A full context
     * of one sequence is 1.2 GiB instead of 10.0 GiB, and every step of
     * decoding reads all of it. With several sequences decoded at once
     * (a batch), the saving multiplies.
     *
     * The price is quality: fewer key-value heads can represent less.
     * Ainslie et al. report that $G = 8$ keeps nearly all of multi-head
     * attention's quality, where $G = 1$ loses more; their recipe is the
     * one section 4 used, mean-pooling the heads of each group, then a
     * little more training.
     */
    for (size_t g = 0; g < NG; g++) {
        kv_cache c;
        CHECK(kv_cache_init(&c, B, Gs[g], P, N));
        char k[TRACE_SHAPE_MAX], s[32];
        printf("G = %zu: cache keys %s and values as large, %s\n", Gs[g],
               tensor_shape_str(c.keys, k, sizeof k),
               bytes_str(2.0 * (double)tensor_numel(c.keys) * sizeof(double),
                         s, sizeof s));
        kv_cache_free(&c);
    }
    (void)l;
    const double layers = 80, heads = 64, head_size = 128, context = 4096,
                 bytes = 2;
    printf("\nLlama 2 70B's shape: %.0f layers, %.0f query heads of %.0f "
           "features,\n%.0f-bit numbers, one sequence of %.0f positions:\n\n",
           layers, heads, head_size, 8 * bytes, context);
    printf("%4s %22s %18s %18s\n", "G", "", "per position", "whole context");
    static const double all_g[] = {64, 32, 16, 8, 4, 2, 1};
    const size_t n = sizeof all_g / sizeof all_g[0];
    const char *labels[sizeof all_g / sizeof all_g[0]];
    char label_text[sizeof all_g / sizeof all_g[0]][16];
    double gib[sizeof all_g / sizeof all_g[0]];
    for (size_t i = 0; i < n; i++) {
        char a[32], b[32];
        double one = cache_bytes(layers, all_g[i], head_size, 1, bytes);
        double whole = cache_bytes(layers, all_g[i], head_size, context, bytes);
        const char *what = all_g[i] == heads ? "(multi-head)"
                           : all_g[i] == 8  ? "(Llama 2 70B)"
                           : all_g[i] == 1  ? "(multi-query)"
                                            : "";
        printf("%4.0f %22s %18s %18s\n", all_g[i], what,
               bytes_str(one, a, sizeof a), bytes_str(whole, b, sizeof b));
        snprintf(label_text[i], sizeof label_text[0], "G = %.0f", all_g[i]);
        labels[i] = label_text[i];
        gib[i] = whole / (1024.0 * 1024 * 1024);
    }
    plot_options opt = {.title = "key-value cache of one 4096-position "
                                 "sequence, Llama 2 70B's shape, 16-bit",
                        .xlabel = "key-value heads G (64 query heads)",
                        .ylabel = "GiB"};
    printf("\n");
    announce_plot(plot_bars(labels, gib, n, &opt, plot_base("17_cache_memory"),
                            HEATMAP_PNG | HEATMAP_SVG),
                  "17_cache_memory");
}

int main(void)
{
    mha_program_init();
    lesson l;
    gsl_rng *rng = mha_rng_new(17);
    if (!rng)
        exit(1);
    // X (B, n, d_model): standard normal, feature 0 the constant 1
    CHECK(tensor_alloc(SHAPE(B, N, D), &l.x));
    CHECK(tensor_set_names(l.x, "B, n, d_model"));
    tensor_fill_normal(l.x, rng, 0, 1);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < N; t++)
            *TENSOR_AT(l.x, b, t, 0) = 1;
    make_modules(&l, rng);
    // every query head's first row reads feature 0 alone, with weight 6
    for (size_t g = 0; g < NG; g++)
        for (size_t i = 0; i < H; i++)
            for (size_t c = 0; c < D; c++)
                *TENSOR_AT(l.m[g].W_q.weight, i * P, c) = c == 0 ? 6 : 0;
    which_head();
    shared_in_the_trace(&l);
    same_as_repeated(&l);
    heads_of_a_group(&l);
    cache_by_g(&l);
    for (size_t g = 0; g < NG; g++)
        multihead_free(&l.m[g]);
    tensor_free(l.x);
    gsl_rng_free(rng);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `gqa_kv_head` (`make grade EXERCISE=gqa_kv_head`). Then change
 *    it to give head $i$ the key-value head $i \bmod G$ instead. Does
 *    section 3's check still pass? Which layout does PyTorch's
 *    `repeat_interleave` assume, and what would go wrong loading Llama
 *    weights with the other one?
 * 2. Count the parameters of one attention layer of Llama 2 70B
 *    ($d_{model} = 8192$, 64 heads of 128) with $G = 64$, 8 and 1. Which
 *    share of the layer's weights do W_k and W_v hold in each case?
 * 3. Section 2's trace folds the query heads of a group into the rows.
 *    Change the program to trace the $G = 8$ module instead (the first
 *    of the three it makes, in `make_modules`): what does the fold
 *    become, and is it still a view? And with $G = 1$?
 * 4. Decode chapter 16's way with a grouped module: how many bytes does
 *    each step read from the cache for $G = 8$, 2 and 1, and how many
 *    multiply-adds does it do? Which of the two does grouping save?
 * 5. In section 4, set the weight 6 to 0. What is left of the groups in
 *    the picture, and why?
 */
