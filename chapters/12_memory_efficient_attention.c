/* Chapter 12: memory-efficient attention.
 *
 * Computes attention a tile of keys at a time (online softmax, tiled
 * attention in the style of FlashAttention), by hand and with
 * flash_attention_forward, and checks it against exact attention.  Run it
 * with `make ch12`; the book's page is docs/12_memory_efficient_attention.md.
 */
/*md
 * Every attention so far built the whole matrix of scores
 * $S = QK^\top/\sqrt{d}$, one row per query and one column per key, then
 * the whole matrix of weights $\mathrm{softmax}(S)$, and only then the
 * output $\mathrm{softmax}(S)\,V$.  Those two matrices grow with the
 * square of the sequence length.  The output does not: it has one row of
 * $d_v$ numbers per query.  This chapter gets the output without ever
 * holding the matrices, and gets exactly the same numbers. It is the idea
 * behind FlashAttention ([Dao et al. 2022](https://arxiv.org/abs/2205.14135)),
 * here on the CPU and without its care for the GPU's memory hierarchy.
 */
#include <math.h>

#include "lesson.h"

static void print_row(const char *label, const double *x, size_t n)
{
    printf("%s", label);
    for (size_t j = 0; j < n; j++)
        printf(" %7.4f", x[j]);
    printf("\n");
}

static void quadratic_wall(void)
{
    section("1. The quadratic wall");
    /*md
     * With $B \cdot h$ heads of $L$ queries and $L$ keys, exact attention
     * stores $B h L^2$ scores and as many weights, 8 bytes each.  Queries,
     * keys, values and the output together are only $4 B h L d_h$
     * numbers.  At $L = 16384$, $h = 8$, $d_h = 64$ the scores alone are
     * 16 GiB, while everything the caller hands in and gets back is
     * 256 MiB.  The matrices grow four times per doubling of $L$; what
     * the caller keeps grows two times.
     */
    printf("B*h = 8 heads, d_h = 64, self-attention of length L:\n\n");
    printf("%7s %14s %14s %16s\n", "L", "scores", "scores+weights",
           "Q, K, V and out");
    for (size_t L = 1024; L <= 16384; L *= 2) {
        char a[32], b[32], c[32];
        double s = 8.0 * (double)L * (double)L * 8.0;
        printf("%7zu %14s %14s %16s\n", L, bytes_str(s, a, sizeof a),
               bytes_str(2 * s, b, sizeof b),
               bytes_str(4.0 * 8 * (double)L * 64 * 8, c, sizeof c));
    }
}

static void online(void)
{
    section("2. Online softmax: a running max and a running sum");
    /*md
     * The stable softmax of chapter 03 needs the row's maximum $m$ before
     * it takes the first exponential:
     * $\mathrm{softmax}(x)_j = e^{x_j - m} / \ell$ with
     * $\ell = \sum_j e^{x_j - m}$.  So it reads the row twice.
     *
     * Online softmax reads it once, a tile at a time, and keeps two
     * numbers: the largest score seen so far, $m$, and the sum $\ell$ of
     * $e^{x_j - m}$ over the scores seen so far.  When a new tile brings a
     * larger maximum $m'$, every term already in $\ell$ was computed
     * against the old $m$, and
     * $e^{x_j - m'} = e^{x_j - m}\, e^{m - m'}$, so one multiplication
     * fixes all of them at once:
     *
     * $$m' = \max(m, \max_{j \in \text{tile}} x_j), \qquad
     *   \alpha = e^{m - m'}, \qquad
     *   \ell' = \alpha\,\ell + \sum_{j \in \text{tile}} e^{x_j - m'}.$$
     *
     * Before the first tile $m = -\infty$ and $\ell = 0$, so $\alpha = 0$.
     * When a tile does not raise the maximum, $\alpha = 1$.  After the
     * last tile, $m$ and $\ell$ are exactly the row's maximum and the
     * softmax's denominator.
     *
     * Check the table by hand: the first tile gives $m = 3$ and
     * $\ell = e^{-2} + 1 + e^{-1}$; the second raises $m$ to 5, so
     * $\alpha = e^{3-5}$ shrinks the old sum before the new terms join;
     * the third raises $m$ to 6, $\alpha = e^{-1}$.
     *
     * The picture shows the weights $e^{x_j - m} / \ell$ as they stand
     * after each tile, one row per tile, over the keys seen so far (the
     * keys not yet read are blank). Each new maximum shrinks the earlier
     * weights: key 1 is the darkest after the first tile and almost white
     * after the third. The last row is the softmax.
     */
    double x[8] = {1, 3, 2, 5, 0, 4, 6, 2};
    printf("scores x = [1, 3, 2, 5, 0, 4, 6, 2], in tiles of 3:\n\n");
    printf("%-18s %9s %6s %9s %9s\n", "tile", "tile max", "m", "alpha", "l");
    online_softmax st;
    online_softmax_init(&st);
    tensor *seen; // (tiles, 8): the weights after each tile, 0 for unread keys
    CHECK(tensor_alloc(SHAPE(3, 8), &seen));
    printf("%-18s %9s %6s %9s %9.4f\n", "(start)", "", "-inf", "", st.sum);
    for (size_t t0 = 0; t0 < 8; t0 += 3) {
        size_t n = 8 - t0 < 3 ? 8 - t0 : 3;
        double tmax = x[t0];
        char tile[32] = "", *at = tile;
        for (size_t j = 0; j < n; j++) {
            tmax = x[t0 + j] > tmax ? x[t0 + j] : tmax;
            at += snprintf(at, sizeof tile - (size_t)(at - tile), "%s%g",
                           j ? ", " : "[", x[t0 + j]);
        }
        snprintf(at, sizeof tile - (size_t)(at - tile), "]");
        double alpha = online_softmax_update(&st, x + t0, n);
        printf("%-18s %9g %6g %9.4f %9.4f\n", tile, tmax, st.max, alpha, st.sum);
        for (size_t j = 0; j < t0 + n; j++)
            *TENSOR_AT(seen, t0 / 3, j) = exp(x[j] - st.max) / st.sum;
    }
    double w[8];
    for (size_t j = 0; j < 8; j++)
        w[j] = exp(x[j] - st.max) / st.sum;
    tensor *xt, *ws;
    CHECK(tensor_from_array(SHAPE(8), x, &xt));
    CHECK(softmax_lastdim(xt, &ws));
    double diff = 0;
    for (size_t j = 0; j < 8; j++)
        diff = fmax(diff, fabs(w[j] - ws->data[j]));
    printf("\nweights exp(x - m) / l:\n");
    print_row("  online   ", w, 8);
    print_row("  softmax  ", ws->data, 8);
    printf("same as softmax_lastdim (difference below 1e-15): %s\n\n",
           yes_no(diff < 1e-15));
    heatmap_options opt = {.xlabel = "key", .ylabel = "after tile"};
    CHECK(heatmap_terminal(stdout, seen, &opt));
    printf("\n");
    draw_heatmap(seen, &opt, "12_online");
    tensor_free(seen);
    tensor_free(xt);
    tensor_free(ws);
}

static void carrying(void)
{
    section("3. Carrying the output along");
    /*md
     * The output row of one query is a weighted sum of value rows,
     * $o = \sum_j \mathrm{softmax}(s)_j\, v_j$.  Keep it unnormalised,
     * $\tilde o = \sum_j e^{s_j - m} v_j$, and it obeys the same rule as
     * $\ell$: when the maximum moves from $m$ to $m'$,
     *
     * $$\tilde o' = \alpha\, \tilde o + \sum_{j \in \text{tile}}
     *   e^{s_j - m'}\, v_j,$$
     *
     * and at the end $o = \tilde o / \ell$.  One tile of keys and values at
     * a time is all that is ever needed.  Below, one query against six
     * keys in tiles of two, with the numbers after each tile.
     */
    // q (1, 1, 2), k (1, 6, 2), v (1, 6, 2): small whole numbers
    double qv[2] = {1, 2};
    double kv[12] = {1, 0, 0, 1, 2, 1, -1, 1, 1, 2, 0, -1};
    double vv[12] = {1, 0, 0, 1, 2, 2, -1, 3, 4, 1, 0, -2};
    printf("q = (1, 2); keys (1, 0) (0, 1) (2, 1) (-1, 1) (1, 2) (0, -1);\n"
           "values (1, 0) (0, 1) (2, 2) (-1, 3) (4, 1) (0, -2); d = 2, so the\n"
           "scores are q.k / sqrt(2).\n\n");
    printf("%-6s %24s %8s %8s %8s %18s\n", "keys", "scores", "m", "alpha", "l",
           "unnormalised o");
    online_softmax os;
    online_softmax_init(&os);
    double o[2] = {0, 0};
    for (size_t t0 = 0; t0 < 6; t0 += 2) {
        double s[2];
        for (size_t j = 0; j < 2; j++)
            s[j] = (qv[0] * kv[2 * (t0 + j)] + qv[1] * kv[2 * (t0 + j) + 1]) /
                   sqrt(2.0);
        double alpha = online_softmax_update(&os, s, 2);
        for (size_t c = 0; c < 2; c++) {
            o[c] *= alpha;
            for (size_t j = 0; j < 2; j++)
                o[c] += exp(s[j] - os.max) * vv[2 * (t0 + j) + c];
        }
        printf("%zu-%-4zu %11.4f, %10.4f %8.4f %8.4f %8.4f %8.4f, %7.4f\n", t0,
               t0 + 1, s[0], s[1], os.max, alpha, os.sum, o[0], o[1]);
    }
    printf("\no = unnormalised o / l = (%.4f, %.4f)\n", o[0] / os.sum,
           o[1] / os.sum);
    tensor *q1, *k1, *v1, *exact;
    dot_attention att;
    CHECK(tensor_from_array(SHAPE(1, 1, 2), qv, &q1));
    CHECK(tensor_from_array(SHAPE(1, 6, 2), kv, &k1));
    CHECK(tensor_from_array(SHAPE(1, 6, 2), vv, &v1));
    CHECK(dot_attention_init(&att, 0));
    CHECK(dot_attention_forward(&att, q1, k1, v1, NULL, &exact, NULL));
    printf("exact attention (chapter 04) gives (%.4f, %.4f)\n",
           exact->data[0], exact->data[1]);
    tensor_free(q1);
    tensor_free(k1);
    tensor_free(v1);
    tensor_free(exact);
    dot_attention_free(&att);
}

static void tiled(void)
{
    section("4. Tiled attention in the library");
    /*md
     * `flash_attention_forward` (src/nn/flash.c) does section 3 for a whole
     * block of `tile_q` queries at once, so that each step is a matrix
     * product:
     *
     * 1. $S = Q_\text{block} K_\text{tile}^\top$, a `(tile_q, tile_k)`
     *    dgemm;
     * 2. per row: scale by $1/\sqrt d$, mask, the new max, $\alpha$, the
     *    exponentials in place of the scores, the new $\ell$, and
     *    $\tilde o \mathrel{*}= \alpha$;
     * 3. $\tilde O \mathrel{+}= P\, V_\text{tile}$, a dgemm with
     *    $\beta = 1$;
     *
     * and at the end divides each output row by its $\ell$.  Masks work
     * as in chapter 03: keys beyond a row's valid length never enter its
     * $m$ or $\ell$.  A tile lying wholly beyond the valid length of every
     * row in the block is skipped, so a causal mask halves the work.
     * The blocks of queries are independent, so they run in parallel.
     * One block of queries, every key tile:
     *
     * @show src/nn/flash.c flash_block
     *
     * The module takes it as its step 4 (`multihead_forward_tiled` sets
     * `m->tiled`): from this chapter on, step 4 is `multihead_attend`.
     * As of this chapter it only clears its output and hands the work to
     * `attend` (chapters 17 and 19 give it more to choose), so here is
     * `attend`, which attends exactly, keeping the weights, or tile by
     * tile:
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * @show src/nn/multihead.c attend
     *
     * The module's trace line says so: from this chapter on, the door
     * writes its line with `options`, which adds `, tiled` after the
     * module's parenthesis when step 4 runs tile by tile (the chapters
     * after this add their options to it too: causal, the key-value
     * heads, a window). It is shown at the end of this page.
     *
     * The example: $B = 2$, $L_q = 5$, $L_k = 7$, $d = 4$, $d_v = 3$,
     * `valid_lens` `[7, 3]`, tiles of 2 queries by 3 keys (neither divides 5
     * or 7).  Its trace has one line: no `(5, 7)` scores or weights were
     * made.
     */
    gsl_rng *rng = mha_rng_new(12);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *tiles, *full;
    CHECK(tensor_alloc(SHAPE(2, 5, 4), &q));
    CHECK(tensor_alloc(SHAPE(2, 7, 4), &k));
    CHECK(tensor_alloc(SHAPE(2, 7, 3), &v));
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill_normal(k, rng, 0, 1);
    tensor_fill_normal(v, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(2), (double[]){7, 3}, &lens));
    trace_to(stdout);
    CHECK(flash_attention_forward(q, k, v, lens, 2, 3, &tiles));
    trace_to(NULL);
    dot_attention att;
    CHECK(dot_attention_init(&att, 0));
    CHECK(dot_attention_forward(&att, q, k, v, lens, &full, NULL));
    double err = 0, ref = 0;
    for (size_t i = 0; i < tensor_numel(full); i++) {
        err = fmax(err, fabs(tiles->data[i] - full->data[i]));
        ref = fmax(ref, fabs(full->data[i]));
    }
    printf("\nexample 1, query 0: tiled (%.4f, %.4f, %.4f), exact (%.4f, "
           "%.4f, %.4f)\n",
           *TENSOR_AT(tiles, 1, 0, 0), *TENSOR_AT(tiles, 1, 0, 1),
           *TENSOR_AT(tiles, 1, 0, 2), *TENSOR_AT(full, 1, 0, 0),
           *TENSOR_AT(full, 1, 0, 1), *TENSOR_AT(full, 1, 0, 2));
    printf("equal to exact attention (relative difference below 1e-12): %s\n",
           yes_no(err <= 1e-12 * ref));
    tensor *all[] = {q, k, v, lens, tiles, full};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    dot_attention_free(&att);
    gsl_rng_free(rng);
}

static void costs(void)
{
    section("5. What it costs");
    /*md
     * The flops are the same as exact attention's, $4 B L_q L_k d$, plus
     * the rescaling, which touches $d_v$ numbers per row per tile.  The
     * memory is not: per thread one `(tile_q, tile_k)` tile of scores
     * and three numbers per query row of the block, whatever $L$ is; the
     * output is the only buffer that grows, linearly.  `make bench`
     * measures both paths up to $L = 16384$ in separate processes (peak
     * resident memory per run) and draws `plots/bench_memory.png`;
     * [the performance page](performance.md) has the numbers of its last
     * run, with the machine it ran on.
     */
    char a[32], b[32];
    printf("tiles %d x %d: a score tile is %s per thread, for any L.\n",
           FLASH_TILE_Q, FLASH_TILE_K,
           bytes_str(FLASH_TILE_Q * FLASH_TILE_K * 8.0, a, sizeof a));
    printf("At L = 16384, B*h = 8, d_h = 64: exact needs %s of scores and\n"
           "weights; tiled needs the %s output beside the inputs.\n",
           bytes_str(2 * 8.0 * 16384.0 * 16384.0 * 8, a, sizeof a),
           bytes_str(8.0 * 16384 * 64 * 8, b, sizeof b));
}

int main(void)
{
    mha_program_init();
    quadratic_wall();
    online();
    carrying();
    tiled();
    costs();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Run section 2 with tiles of 1, 2 and 8 (change the loop).  Which
 *    values of $\alpha$ appear, and why is $\ell$ the same at the end?
 * 2. Show that the order of the tiles does not matter: feed the tiles
 *    of section 2 last to first and compare $m$ and $\ell$.
 * 3. With a causal mask (`causal_valid_lens`) and `tile_q = tile_k`,
 *    how many of the $(L/t)^2$ tiles does `flash_attention_forward`
 *    compute?  Count them with a counter in `flash_block`.
 * 4. The backward pass needs the weights.  FlashAttention keeps only
 *    $m$ and $\ell$ per row and recomputes the scores tile by tile.
 *    Why are $m$ and $\ell$ enough to rebuild any weight?
 */
