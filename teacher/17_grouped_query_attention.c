/* Chapter 17, the key: multi-query and grouped-query attention.
 *
 * The numbers the answers to chapter 17's exercises quote: the other
 * layout of the groups against section 3's check, Llama 2 70B's
 * parameters, the traces for G = 8 and 1, a decoding step's reads and
 * work, and section 4 with its weight 6 set to 0.
 */
#include "key.h"

enum { H = 8, P = 4, D = H * P, B = 2, N = 6 };
static const size_t Gs[] = {8, 2, 1};
#define NG (sizeof Gs / sizeof Gs[0])

typedef struct {
    tensor *x;
    multihead m[NG];
} lesson;

/* Chapter 17's main and make_modules: X with feature 0 the constant 1,
 * the G = 8 module Xavier, the grouped ones its key and value heads
 * averaged over each group, and every query head's first row of W_q
 * reading feature 0 alone with weight w0 (6 in the chapter). */
static void setup(lesson *l, double w0)
{
    gsl_rng *rng = mha_rng_new(17);
    if (!rng)
        exit(1);
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->x));
    tensor_fill_normal(l->x, rng, 0, 1);
    for (size_t b = 0; b < B; b++)
        for (size_t t = 0; t < N; t++)
            *TENSOR_AT(l->x, b, t, 0) = 1;
    for (size_t g = 0; g < NG; g++) {
        multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                                .num_hiddens = D, .num_heads = H,
                                .kv_heads = Gs[g]};
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
    for (size_t g = 0; g < NG; g++)
        for (size_t i = 0; i < H; i++)
            for (size_t c = 0; c < D; c++)
                *TENSOR_AT(l->m[g].W_q.weight, i * P, c) = c == 0 ? w0 : 0;
    gsl_rng_free(rng);
}

static void lesson_free(lesson *l)
{
    for (size_t g = 0; g < NG; g++)
        multihead_free(&l->m[g]);
    tensor_free(l->x);
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The library's solution is `gqa_kv_head` in
     * [`src/nn/gqa.c`](../../src/nn/gqa.c) (folded on the chapter's page); `make
     * grade EXERCISE=gqa_kv_head` grades a student's. Its rules: head $i$
     * reads key-value head $i / (h/G)$; `kv_heads` 0 means $G = h$; $h$ not
     * divisible by $G$, or a head $\ge h$, is `GSL_EINVAL` with a message.
     *
     * With $i \bmod G$ instead, section 3's check fails for $G = 2$ and
     * still passes for $G = 8$ and $G = 1$ (below: the module against
     * multi-head attention whose key and value weights are repeated by the
     * $i \bmod G$ rule). For $G = h$ both rules give $i$, for $G = 1$ both
     * give 0; in between they pair the heads differently: with $i \bmod 2$,
     * heads 0, 2, 4, 6 read key-value head 0, while the module's forward
     * pass, which expands each key-value head over $h/G$ consecutive query
     * heads (section 2's `expand`), gives heads 0 to 3 head 0.
     * `gqa_repeat_kv_weight` uses `gqa_kv_head`, so the repeated weights
     * follow the new rule and the module does not.
     *
     * PyTorch's `repeat_interleave(h/G, dim=1)` (and Llama's `repeat_kv`)
     * repeats each key-value head $h/G$ times in a row: `[kv0, kv0, kv0,
     * kv0, kv1, ...]`, the $i / (h/G)$ layout. Loading Llama weights with
     * the other layout pairs most query heads with the wrong key-value
     * head: every shape still fits, nothing fails, and the outputs are
     * simply wrong, with no error to say so.
     */
    lesson l;
    setup(&l, 6);
    for (size_t g = 0; g < NG; g++) {
        multihead *m = &l.m[g];
        m->cfg.causal = 1;
        multihead_config cfg = m->cfg;
        cfg.kv_heads = 0;
        multihead rep;
        CHECK(multihead_init(&rep, &cfg));
        CHECK(tensor_copy_into(rep.W_q.weight, m->W_q.weight));
        CHECK(tensor_copy_into(rep.W_o.weight, m->W_o.weight));
        for (size_t i = 0; i < H; i++) { // block i reads block i mod G
            size_t kv = i % Gs[g];
            for (size_t r = 0; r < P; r++)
                for (size_t c = 0; c < D; c++) {
                    *TENSOR_AT(rep.W_k.weight, i * P + r, c) =
                        *TENSOR_AT(m->W_k.weight, kv * P + r, c);
                    *TENSOR_AT(rep.W_v.weight, i * P + r, c) =
                        *TENSOR_AT(m->W_v.weight, kv * P + r, c);
                }
        }
        tensor *y_gqa, *y_rep;
        CHECK(multihead_forward(m, l.x, l.x, l.x, NULL, &y_gqa, NULL));
        CHECK(multihead_forward(&rep, l.x, l.x, l.x, NULL, &y_rep, NULL));
        printf("G = %zu, head i reads i mod G: equal (largest difference below "
               "1e-12): %s\n", Gs[g], yes_no(largest_abs_diff(y_gqa, y_rep) < 1e-12));
        tensor_free(y_gqa);
        tensor_free(y_rep);
        multihead_free(&rep);
    }
    lesson_free(&l);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * W_q and W_o are $8192 \times 8192$ whatever $G$; W_k and W_v are
     * $(128 G) \times 8192$ each (no biases in Llama). The totals and the
     * share of W_k and W_v are below: half the layer with $G = 64$
     * (multi-head), a ninth with $G = 8$ (Llama 2 70B's choice), and 1.54%
     * with $G = 1$ (multi-query). Grouping shrinks the layer by 44% at
     * $G = 8$ while keeping 8 distinct key-value heads.
     */
    const double d = 8192, p = 128;
    double full = 0;
    printf("   G   W_q + W_o      W_k + W_v      layer          share of W_k, W_v\n");
    const double Gl[3] = {64, 8, 1};
    for (int g = 0; g < 3; g++) {
        double qo = 2 * d * d, kv = 2 * Gl[g] * p * d;
        if (g == 0)
            full = qo + kv;
        printf("%4.0f   %-12.0f   %-12.0f   %-12.0f   %.2f%%\n", Gl[g], qo, kv,
               qo + kv, 100 * kv / (qo + kv));
    }
    printf("G = 8 against G = 64: %.0f%% fewer parameters\n",
           100 * (1 - (2 * d * d + 2 * 8 * p * d) / full));
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * With $G = 8$ each group has one query head, and there is nothing to
     * fold: the module takes chapter 08's path, `dot_attention` on
     * `(16, 6, 4)` queries, keys and values, with no `view`, no `expand`
     * and no fold in the trace (the first trace below). With $G = 1$ all 8
     * query heads of a sequence share the one key-value head: the key and
     * value heads are viewed as `(2, 1, 6, 4)` and expanded to
     * `(2, 8, 6, 4)` (views: a stride of 0 over the heads), and the fold
     * puts the $8 \cdot 6 = 48$ query rows of a sequence into one matrix,
     * `(2, 48, 4)` against keys `(2, 6, 4)`: two products of 48 rows
     * instead of 16 of 6. The folded result is viewed back as
     * `(16, 6, 4)`; every step of the fold is still a view (the second
     * trace).
     */
    shape_trace(B, N, 0, D, H, 8, NULL);
    printf("\n");
    shape_trace(B, N, 0, D, H, 1, NULL);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * A decoding step at position $t$ (the query sees $t$ keys) reads the
     * cache's keys and values of the $G$ key-value heads: $2 \, G \, t \, p$
     * numbers per sequence and layer. It computes the scores and the
     * weighted average of all $h$ query heads:
     * $2 \, h \, p \, t = 2 \, d_{model} \, t$ multiply-adds (chapter 16's
     * count), the same for
     * every $G$. Below, chapter 17's module ($h = 8$, $p = 4$, doubles of 8
     * bytes) at the last of its 6 positions. Grouping saves the reads, in
     * proportion to $G/h$, not the arithmetic: which is what a decoding
     * step needs, since it is limited by memory traffic (chapter 16,
     * exercise 5), not by multiply-adds.
     */
    const size_t t = N;
    for (size_t g = 0; g < NG; g++) {
        double madds;
        CHECK(attention_madds(1, t, D, 1, &madds));
        printf("G = %zu: reads 2*G*t*p*8 = %4zu bytes of cache, %.0f "
               "multiply-adds\n", Gs[g], 2 * Gs[g] * t * P * 8, madds);
    }
}

/* Section 4's table: the mean |difference| of the weights of two query
 * heads of one group and of different groups, for each G. */
static void group_table(lesson *l)
{
    printf("          one group   different groups\n");
    for (size_t g = 0; g < NG; g++) {
        tensor *y, *w; // w (B, h, n, n)
        CHECK(multihead_forward(&l->m[g], l->x, l->x, l->x, NULL, &y, &w));
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
                        d += fabs(*TENSOR_AT(w, 0, a, q, k) - *TENSOR_AT(w, 0, b, q, k));
                sum[ka != kb] += d / (N * N);
                pairs[ka != kb]++;
            }
        printf("G = %zu ", Gs[g]);
        for (size_t k = 0; k < 2; k++) {
            char cell[32] = "(no pairs)";
            if (pairs[k])
                snprintf(cell, sizeof cell, "%.4f", sum[k] / (double)pairs[k]);
            printf(k ? " %18s" : " %13s", cell);
        }
        printf("\n");
        tensor_free(y);
        tensor_free(w);
    }
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * With the weight 6, every query's first coordinate is 6 and every
     * head of a group scores the keys mostly by their shared first
     * coordinate, so the heads of a group look alike. With 0, the first
     * coordinate of every query is 0 and the shared keys' preference is
     * gone from the scores: each head scores the keys by its own three
     * remaining query coordinates, drawn independently, so heads of one
     * group differ as much as heads of different groups, 0.0614 against
     * 0.0595 for $G = 2$ (the second table, against the chapter's
     * first). The groups all but
     * vanish from the picture: sharing keys makes heads *able* to agree,
     * it is the queries that decide whether they do. (The weights are
     * also softer: the scores lose their largest term.)
     */
    lesson l;
    setup(&l, 6);
    printf("weight 6 (the chapter):\n");
    group_table(&l);
    lesson_free(&l);
    setup(&l, 0);
    printf("\nweight 0:\n");
    group_table(&l);
    lesson_free(&l);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
