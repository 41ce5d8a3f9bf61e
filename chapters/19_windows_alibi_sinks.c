/* Chapter 19: where attention may look: sliding windows, ALiBi, sinks.
 *
 * The keys a query sees under a causal mask, a sliding window and a
 * window that keeps the first keys; ALiBi's slopes and biases, head by
 * head; a sink logit that takes weight a row does not give its keys; the
 * rolling cache of a windowed decoder in the trace.  Run it with
 * `make ch19`; the book's page is docs/19_windows_alibi_sinks.md.
 */

/*md
 * Chapter 16's causal mask lets query $i$ see every key $j \le i$. Three
 * ideas of today's models change which keys a query sees and how position
 * enters its scores, and each has a cost or a puzzle the plain mask does
 * not:
 *
 * - a **[sliding window](glossary.md#sliding-window)** of $W$ keys
 *   ([Mistral 7B](https://arxiv.org/abs/2310.06825)): causal, and only
 *   the last $W$ keys, so that a decoder keeps $W$ keys and values, not
 *   all of them;
 * - **[ALiBi](glossary.md#alibi)** ([Press et al. 2021](https://arxiv.org/abs/2108.12409)):
 *   no positional encoding at all (chapter 15's are left out); each score
 *   gets a penalty proportional to the distance, with one slope per head;
 * - **[attention sinks](glossary.md#attention-sink)**: trained models park weight on the first token
 *   ([Xiao et al. 2023](https://arxiv.org/abs/2309.17453)), which bertviz
 *   users meet unexplained as "every token focuses on the first token"
 *   ([jessevig/bertviz#131](https://github.com/jessevig/bertviz/issues/131));
 *   a windowed cache must keep those first keys, and gpt-oss
 *   ([OpenAI 2025](https://arxiv.org/abs/2508.10925)) gives each head a
 *   learned sink logit instead.
 *
 * Positions are counted as for the causal mask: key $j$ at $j$, query
 * $i$ at $i' = i + L_k - L_q$. Every one of these rules keeps the
 * masking rule of chapter 03: a key a query may not see takes no part in
 * its softmax and gets weight exactly 0.
 */

#include <math.h>
#include <string.h>

#include "lesson.h"

enum { L = 8, W = 3 };

/* ALiBi's slope of head k of n (the exercise). */
static double slope(size_t n, size_t k)
{
    double m;
    CHECK(alibi_slope(n, k, &m));
    return m;
}

/* Print an (L, L) table of 0/1 or of numbers, rows = queries. */
static void show_table(const char *name, const double *t, int decimals)
{
    printf("%s:\n", name);
    for (size_t i = 0; i < L; i++) {
        printf("  ");
        for (size_t j = 0; j < L; j++)
            printf(decimals ? " %6.*f" : " %.*f", decimals, t[i * L + j]);
        printf("\n");
    }
    printf("\n");
}

static void which_keys(void)
{
    section("1. Which keys a query sees");
    /*md
     * A rule says, for a query at position $i'$ and a key at $j$, whether
     * the key is visible. Causal: $j \le i'$. A window of $W$: also
     * $j > i' - W$, so the last $W$ keys. StreamingLLM's fix keeps the
     * first `keep` positions visible as well, however far back:
     *
     * @show src/nn/window.c window_sees
     *
     * Below, eight positions ($L_q = L_k = 8$) and $W = 3$: the causal
     * triangle, the band of the window, and the band with key 0 kept.
     * Each row of the window sees at most 3 keys, so its work and its
     * cache do not grow with the length; information from further back
     * still reaches it, one window per layer.
     */
    window_rule causal = {.causal = 1};
    window_rule window = {.causal = 1, .window = W};
    window_rule kept = {.causal = 1, .window = W, .keep = 1};
    const window_rule *rules[] = {&causal, &window, &kept};
    const char *names[] = {"causal", "window 3", "window 3, key 0 kept"};
    tensor *grid;
    CHECK(tensor_alloc(SHAPE(1, 3, L, L), &grid));
    for (size_t r = 0; r < 3; r++) {
        double t[L * L];
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++)
                t[i * L + j] = window_sees(rules[r], (long)i, (long)j);
        show_table(names[r], t, 0);
        memcpy(TENSOR_AT(grid, 0, r, 0, 0), t, sizeof t);
    }
    heatmap_options opt = {.titles = names, .ntitles = 3};
    draw_heatmap(grid, &opt, "19_windows");
    tensor_free(grid);
}

static void alibi(void)
{
    section("2. ALiBi: a penalty by distance, one slope per head");
    /*md
     * ALiBi adds $-m_k (i' - j)$ to the scaled score of key $j$ in head
     * $k$ of $n$: nothing for the query's own position, more for each
     * step back. For $n$ a power of two the slopes form a geometric
     * sequence, 1/2, 1/4, ..., 1/256 for 8 heads (the paper's choice,
     * section 3 of Press et al. 2021) and $2^{-0.5}, 2^{-1}, \dots, 2^{-8}$
     * for 16; for $n$ not a power of two, BLOOM takes the slopes of the
     * largest power of two below $n$ and adds every other slope of twice
     * that many heads, which fall between them. Writing it is this
     * chapter's coding exercise:
     *
     * @show src/nn/window.c alibi_slope
     *
     * A head with a slope of 1/2 forgets fast: a key 10 positions back
     * loses 5 from its score, a factor of $e^{-5}$ in weight. A head with
     * 1/256 barely notices distance. The heads between them see at
     * different ranges, which is what lets ALiBi extrapolate to sequences
     * longer than those it was trained on.
     */
    for (size_t n = 8; n <= 12; n += 4) {
        printf("slopes for %zu heads:", n);
        for (size_t k = 0; k < n; k++)
            printf(" %.6g", slope(n, k));
        printf("\n");
    }
    for (size_t k = 8; k < 12; k++)
        printf("  12 heads, head %zu: 2^%.1f\n", k, log2(slope(12, k)));
    printf("\n");
    // the bias of each of 8 heads over 8 positions, causal
    tensor *grid;
    CHECK(tensor_alloc(SHAPE(2, 4, L, L), &grid));
    char titles[8][32];
    const char *tp[8];
    window_rule causal = {.causal = 1};
    for (size_t hd = 0; hd < 8; hd++) {
        double m = slope(8, hd);
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++)
                *TENSOR_AT(grid, hd / 4, hd % 4, i, j) =
                    window_sees(&causal, (long)i, (long)j)
                        ? m * ((double)j - (double)i) // -m (i - j)
                        : 0.0;
        snprintf(titles[hd], sizeof titles[hd], "head %zu, m = 1/%g", hd,
                 1 / m);
        tp[hd] = titles[hd];
    }
    double t[L * L];
    memcpy(t, TENSOR_AT(grid, 0, 0, 0, 0), sizeof t);
    show_table("the bias of head 0 (m = 1/2); future keys hidden, shown 0", t, 2);
    heatmap_options opt = {.titles = tp, .ntitles = 8, .scale_from_min = 1,
                           .title = "bias -m (i - j); the future keys "
                                    "(above the diagonal) are hidden, "
                                    "drawn at 0"};
    draw_heatmap(grid, &opt, "19_alibi");
    tensor_free(grid);
}

static void sinks(void)
{
    section("3. A sink: weight with nowhere to go");
    /*md
     * A softmax must hand out a total weight of 1. A head that has found
     * nothing worth reading in a row still has to put its weight
     * somewhere; trained models learn to put it on the first token, whose
     * value they keep small, and a windowed cache that drops that token
     * changes every later output. gpt-oss makes the place explicit: each
     * head $k$ has a logit $s_k$ (`r->sinks[head]` in the code) that
     * joins every row's softmax as one more score and is dropped after
     * it. With $M$ the row's largest score, the sink's included (`M`),
     * the scores $a_j$ of the keys the row sees (`out[j]` after pass 1),
     * and $Z = e^{s_k - M} + \sum_j e^{a_j - M}$ the softmax's sum over
     * the sink and those keys (the `sum` it returns), the sink takes
     * $e^{s_k - M}/Z$ and the keys share $1 - e^{s_k - M}/Z$, less than
     * 1: a row can attend to "nothing":
     *
     * @show src/nn/window.c window_softmax_row
     *
     * A hand-made case: one head, zero queries (so every score is 0), a
     * window of 3, and a sink logit of $\log 4$. A row that sees $n$ keys
     * gives each of them $1/(n + 4)$ and the sink $4/(n + 4)$: row 0 sees
     * one key and gives it a fifth, rows from 2 on see three and give
     * each a seventh. Every value is $(1, 1)$ (the inputs are ones, and
     * $W_v$ and $W_o$ the identity), so a row's output is the total
     * weight its keys take: the `out` column is 1 minus the `sink`
     * column.
     */
    multihead m;
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 2, .num_heads = 1, .window = W,
                            .sinks = 1};
    CHECK(multihead_init(&m, &cfg));
    linear *layers[4] = {&m.W_q, &m.W_k, &m.W_v, &m.W_o};
    for (size_t i = 0; i < 4; i++) // W_q = 0: every score 0; the rest 1
        for (size_t r = 0; r < 2; r++)
            for (size_t c = 0; c < 2; c++)
                *TENSOR_AT(layers[i]->weight, r, c) = i > 0 && r == c;
    m.sinks->data[0] = log(4.0);
    tensor *x, *out, *weights; // weights (1, 1, 6, 6)
    CHECK(tensor_alloc(SHAPE(1, 6, 2), &x));
    tensor_fill(x, 1.0); // every value (1, 1)
    CHECK(multihead_forward(&m, x, x, x, NULL, &out, &weights));
    printf("weights (Lq 6, Lk 6), the sink's share and the output:\n");
    for (size_t i = 0; i < 6; i++) {
        double sum = 0;
        printf("  ");
        for (size_t j = 0; j < 6; j++) {
            double w = *TENSOR_AT(weights, 0, 0, i, j);
            sum += w;
            printf(" %.4f", w);
        }
        printf("   sink %.4f   out %.4f\n", 1 - sum, *TENSOR_AT(out, 0, i, 0));
    }
    printf("\n");
    tensor *grid;
    CHECK(tensor_alloc(SHAPE(1, 1, 6, 7), &grid));
    for (size_t i = 0; i < 6; i++) {
        double sum = 0;
        for (size_t j = 0; j < 6; j++)
            sum += *TENSOR_AT(grid, 0, 0, i, j) =
                *TENSOR_AT(weights, 0, 0, i, j);
        *TENSOR_AT(grid, 0, 0, i, 6) = 1 - sum;
    }
    const char *title[] = {"window 3, sink log 4"};
    heatmap_options opt = {.titles = title, .ntitles = 1,
                           .xlabel = "Keys (the last column: the sink)"};
    draw_heatmap(grid, &opt, "19_sink");
    tensor_free(grid);
    tensor_free(x);
    tensor_free(out);
    tensor_free(weights);
    multihead_free(&m);
}

static void rolling(void)
{
    section("4. A rolling cache of W slots");
    /*md
     * Chapter 16's cache grows by one position per step. With a window, a
     * position more than $W - 1$ steps back is never read again, so the
     * cache needs $W$ slots only: position $t$ goes to slot $t \bmod W$,
     * over the position $W$ before it. With `keep` first positions kept,
     * they take the first slots for good and the window rolls in the
     * rest, slot $k + (t - k) \bmod W$ for position $t \ge k$:
     *
     * @show src/nn/window_cache.c store
     *
     * Each step reads the filled slots and its new positions together,
     * knowing each slot's position, so the rule of section 1 picks the
     * keys as before; then the new positions are written into their
     * slots. Below: $h = 2$ heads, $W = 3$ and key 0 kept, so 4 slots,
     * eight positions decoded one at a time, with section 2's ALiBi on
     * (the module is made with `.alibi = 1`; `alibi` in the trace's
     * `window_attend` line): its penalty counts the distance from each
     * slot's stored position, not from the slot's index, which is why
     * the cache keeps the positions. The slots' positions after each
     * step, the trace of the last step, and the outputs against the
     * windowed forward pass over the whole sequence.
     *
     * In the trace of the last step, position 7, the keys are 5: the 4
     * slots, holding positions 0, 4, 5 and 6, and the new position 7.
     * The query at 7 sees 4 of them, key 0 (kept) and the window 5, 6,
     * 7. Position 4 is still in its slot, since position 7 is written
     * over it only after the step, and the rule of section 1 gives it
     * weight 0: the step reads every filled slot and lets the rule
     * choose, rather than gathering the visible ones first.
     *
     * @show src/nn/window_cache.c multihead_decode_window
     */
    gsl_rng *r = mha_rng_new(19);
    multihead m;
    multihead_config cfg = {.query_size = 4, .key_size = 4, .value_size = 4,
                            .num_hiddens = 4, .num_heads = 2, .window = W,
                            .keep_first = 1, .alibi = 1};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    tensor *x, *full;
    CHECK(tensor_alloc(SHAPE(1, L, 4), &x));
    CHECK(tensor_set_names(x, "B, n, d"));
    tensor_fill_normal(x, r, 0, 1);
    CHECK(multihead_forward(&m, x, x, x, NULL, &full, NULL));
    window_cache c;
    CHECK(window_cache_init(&c, 1, 2, 2, W, 1));
    double worst = 0;
    for (size_t t = 0; t < L; t++) {
        tensor *xt, *y;
        CHECK(tensor_narrow(x, 1, t, 1, &xt));
        if (t == L - 1)
            trace_to(stdout);
        CHECK(multihead_decode_window(&m, &c, xt, &y, NULL));
        trace_to(NULL);
        if (t == L - 1)
            printf("\n");
        for (size_t o = 0; o < 4; o++)
            worst = fmax(worst, fabs(*TENSOR_AT(y, 0, 0, o) -
                                     *TENSOR_AT(full, 0, t, o)));
        printf("after position %zu, the slots hold positions", t);
        for (size_t s = 0; s < c.slots; s++)
            printf(c.pos[s] < 0 ? " -" : " %ld", c.pos[s]);
        printf("\n");
        tensor_free(xt);
        tensor_free(y);
    }
    char kib[32];
    // the last digits depend on the BLAS kernels: the bound, not the number
    printf("\nthe decoded outputs equal the forward pass's to 1e-12 over %d "
           "positions: %s\n", L, yes_no(worst <= 1e-12));
    printf("the cache: (B, G, slots, p) = (1, 2, %zu, 2) keys and values, "
           "%s, after 8 positions or 8 million\n",
           c.slots, bytes_str(2.0 * 2 * (double)c.slots * 2 * sizeof(double),
                              kib, sizeof kib));
    window_cache_free(&c);
    tensor_free(x);
    tensor_free(full);
    multihead_free(&m);
    gsl_rng_free(r);
}

int main(void)
{
    mha_program_init();
    which_keys();
    alibi();
    sinks();
    rolling();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `alibi_slope` (`make grade EXERCISE=alibi_slope`). Which
 *    slopes does it give for 6 heads, and which of them are not among
 *    the slopes for 4?
 * 2. With a window of $W$ in each of $N$ layers, how far back can
 *    information reach the last position? Mistral 7B has $W = 4096$ and
 *    32 layers.
 * 3. Section 1's rule with `keep`: how many keys does the last query of
 *    a sequence of 100 see with $W = 3$ and one key kept? Check it with
 *    `mha` on a self-attention case of one head: save 100 positions of 8
 *    features as `X.npy` (`np.save("X.npy", np.random.rand(1, 100, 8))`)
 *    and `np.eye(8)` as `I.npy`, run `mha forward --heads 1 --queries
 *    X.npy --wq I.npy --wk I.npy --wv I.npy --wo I.npy --window 3
 *    --keep-first 1 --out Y.npy --attention-out A.npy`, and list the keys
 *    whose weight is not 0 in `np.load("A.npy")[0, 0, 99]`, the last
 *    query's row.
 * 4. In section 3, which sink logit makes row 0 give its one key exactly
 *    half? What does a sink of $-\infty$ do?
 * 5. Section 4 decodes one position at a time. A prompt of 5 positions
 *    comes in one step with $W = 3$: why can the step not write the new
 *    keys into the slots before it attends, and what does
 *    `multihead_decode_window` do instead?
 */
