/* Chapter 19, the key: sliding windows, ALiBi and sinks.
 *
 * The numbers the answers to chapter 19's exercises quote: the slopes of
 * 6 heads, the reach of a stack of windowed layers, the keys the last
 * query of 100 sees with one key kept, the sink logit that halves a row,
 * and the slots of a prompt decoded in one step.
 */
#include <math.h>

#include "key.h"

static double slope(size_t n, size_t k)
{
    double m;
    CHECK(alibi_slope(n, k, &m));
    return m;
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The body: refuse `head >= n` with GSL_EINVAL and a message naming
     * both; find $P$, the largest power of two $\le n$; a head $k < P$
     * gets $2^{-8(k+1)/P}$; the others get $2^{-8(k'+1)/(2P)}$ for
     * $k' = 2(k - P)$, every other slope of $2P$ heads. In a student's copy,
     * `make grade EXERCISE=alibi_slope` runs its three tests: powers of
     * two, other counts, the refusals. The library's solution is folded
     * on the chapter's page.
     *
     * For 6 heads, $P = 4$: the slopes of 4 heads,
     * $2^{-2}, 2^{-4}, 2^{-6}, 2^{-8}$, then two of the slopes of 8 heads with
     * an even
     * index, $2^{-1}$ and $2^{-3}$. Those two are the ones 4 heads do not
     * have; they fall between (and above) the others, so the 6 heads
     * still cover short and long ranges.
     */
    for (size_t n = 4; n <= 6; n += 2) {
        printf("%zu heads:", n);
        for (size_t k = 0; k < n; k++)
            printf(" 2^%g", log2(slope(n, k)));
        printf("\n");
    }
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * One layer moves information at most $W - 1$ positions forward:
     * query $i'$ reads keys back to $i' - W + 1$. The next layer's
     * query reads those positions' outputs, each of which already holds
     * what was $W - 1$ before them, and so on: after $N$ layers the last
     * position can depend on tokens $N (W - 1)$ back. For Mistral 7B,
     * $W = 4096$ and 32 layers, that is 131040 positions, the "about
     * 131K tokens" of its paper, though the further back, the more
     * layers the information had to be carried through.
     */
    printf("N (W - 1) = 32 * 4095 = %d\n", 32 * 4095);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * The last query is at $i' = 99$. The window shows keys $j$ with
     * $99 - 3 < j \le 99$: 97, 98 and 99. Key 0 is kept: 4 keys in all.
     * `mha forward --window 3 --keep-first 1 --attention-out A.npy` on
     * 100 positions writes a row of A with exactly those four entries
     * not zero (the rest are exactly 0). The rule, counted:
     */
    window_rule r = {.causal = 1, .window = 3, .keep = 1};
    printf("keys seen by query 99:");
    for (long j = 0; j < 100; j++)
        if (window_sees(&r, 99, j))
            printf(" %ld", j);
    printf("\n");
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * Row 0 sees one key, score 0. With a sink logit $s$ its weight is
     * $e^0 / (e^0 + e^s) = 1 / (1 + e^s)$: a half when $e^s = 1$, so
     * $s = 0$ (section 3's $\log 4$ gave it $1/5$). A sink of $-\infty$
     * adds $e^{-\infty} = 0$ to every sum: no sink at all, the rows sum
     * to 1 again.
     */
    for (double s = -1; s <= 1; s += 1)
        printf("sink %+.0f: row 0's key gets %.4f\n", s, 1 / (1 + exp(s)));
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * With $W = 3$ slots, positions 0 to 4 go to slots 0, 1, 2, 0, 1:
     * positions 3 and 4 would overwrite positions 0 and 1 before queries
     * 1 to 3 of the same step, which still see them, had read them. So
     * `multihead_decode_window` does not write first: it gathers the
     * filled slots and all $n$ new positions, $(B G, f + n, p)$, with each
     * one's position, lets the rule pick each query's keys, and only then
     * writes the new positions into their slots, a later one over an
     * earlier in the same slot. After the step the slots hold the last
     * three positions, and the weights of the step are $(B, h, 5, 5)$.
     */
    multihead m;
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 2, .num_heads = 1, .window = 3};
    CHECK(multihead_init(&m, &cfg));
    window_cache c;
    CHECK(window_cache_init(&c, 1, 1, 2, 3, 0));
    tensor *x, *y, *w;
    CHECK(tensor_alloc(SHAPE(1, 5, 2), &x));
    CHECK(multihead_decode_window(&m, &c, x, &y, &w));
    printf("slots after a prompt of 5:");
    for (size_t s = 0; s < c.slots; s++)
        printf(" %ld", c.pos[s]);
    char ws[TRACE_SHAPE_MAX];
    printf("\nweights of the step: %s\n",
           tensor_shape_str(w, ws, sizeof ws));
    tensor_free(x);
    tensor_free(y);
    tensor_free(w);
    window_cache_free(&c);
    multihead_free(&m);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
