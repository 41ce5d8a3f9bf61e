/* Chapter 15, the key: positional encoding.
 *
 * The numbers the answers to chapter 15's exercises quote: a table 8 wide
 * read as points on circles, the periods of a 32-wide table's pairs, the
 * position a lone query is turned to, and section 5 with other bases.
 */
#include <gsl/gsl_math.h> /* M_PI */

#include "key.h"

enum { N = 6, D = 32, H = 4, P = D / H };

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The library's solution is `rope_rotate_pair` in
     * [`src/nn/posenc.c`](../../src/nn/posenc.c) (folded on the chapter's page);
     * `make grade EXERCISE=rope_rotate_pair` grades a student's. The
     * rotation is counter-clockwise:
     * $(y_0, y_1) = (x_0 \cos a - x_1 \sin a,\; x_0 \sin a + x_1 \cos a)$.
     * Turned the wrong way (the signs
     * of the $\sin$ terms swapped), every score still depends only on the
     * distance, so the chapter's section 4 check passes, but the scores
     * belong to the opposite distance and the tests (which compare with
     * the formula, with inputs where the direction shows) fail.
     */
    double y0, y1;
    CHECK(rope_rotate_pair(1, 0, M_PI / 2, &y0, &y1));
    printf("(1, 0) turned by pi/2: (%.4f, %.4f)\n", y0 + 0.0, y1);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * In a table 8 wide, pair $j$ (columns $2j$ and $2j + 1$) holds
     * $(\sin i\omega_j, \cos i\omega_j)$ with $\omega_j = 1/10000^{2j/8}$:
     * a point on the unit circle at angle $i \omega_j$, turning by
     * $\omega_j$ per position. Below, rows 0 to 7 and each pair's angle in
     * degrees (its turn so far, less whole turns). Pair 0 turns 1 radian (57.3
     * degrees) per position, pair 1 a tenth of that, pair 2 a hundredth,
     * pair 3 a thousandth.
     *
     * **Pair 0 plays the lowest bit**: it changes fastest from one
     * position to the next, as the lowest bit flips at every position;
     * each later pair is slower, as each higher bit flips less often. The
     * analogy is loose: a bit has period 2, 4, 8, ..., while pair 0 has
     * period $2\pi$ (6.28 positions, exercise 3) and the periods grow by a factor
     * of 10 per pair, and the values vary smoothly instead of jumping
     * between 0 and 1.
     */
    tensor *t;
    CHECK(posenc_sinusoid(8, 8, &t));
    printf("row   columns 0..7 of the table                             "
           "angle of pair 0..3 (degrees)\n");
    for (size_t i = 0; i < 8; i++) {
        printf("%3zu  ", i);
        for (size_t c = 0; c < 8; c++)
            printf(" %6.3f", *TENSOR_AT(t, i, c) + 0.0);
        printf("   ");
        for (size_t j = 0; j < 4; j++) {
            double a = atan2(*TENSOR_AT(t, i, 2 * j), *TENSOR_AT(t, i, 2 * j + 1)) *
                       180 / M_PI;
            printf(" %6.1f", a < 0 ? a + 360 : a);
        }
        printf("\n");
    }
    tensor_free(t);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * Pair $j$ turns by $\omega_j = 10000^{-2j/32}$ per position, so it is
     * back where it started after $2\pi / \omega_j = 2\pi \cdot 10000^{j/16}$
     * positions (not a whole number: it comes back close,
     * never exactly). Pair 0 after 6.28 positions, pair 15 after
     * 35332.95 (below).
     *
     * Two positions whose distance is a whole period look the same to a
     * pair, so the last pair, the slowest, tells positions apart only
     * within one of its periods, 35332.95 positions (the faster pairs
     * repeat sooner, and together they pin the position down within that
     * range). The base sets that range: the slowest pair's period tends to
     * $2\pi \cdot 10000$ (about 62832) as the table gets wider. The
     * base 10000 buys room for sequences far longer than any the model
     * will see, with the slow pairs changing gently between neighbours
     * while the fast ones resolve single steps.
     */
    for (size_t j = 0; j < 16; j++)
        printf("pair %2zu: period %10.2f positions\n", j,
               2 * M_PI * pow(10000, (double)j / 16));
    printf("the limit for a wide table: 2 pi 10000 = %.0f\n", 2 * M_PI * 10000);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * No. With $M = W_q^\top W_k$, the score is
     * $(x_i + p_i) M (x_j + p_j)^\top$, which expands into four terms:
     *
     * $$x_i M x_j^\top + x_i M p_j^\top + p_i M x_j^\top + p_i M p_j^\top$$
     *
     * The first depends on the contents only (no position at all). The two
     * cross terms depend on one absolute position each ($j$, then $i$),
     * not on the difference. Only the last could depend on $i - j$ alone,
     * and even it does so only for special $M$: section 2's rotation makes
     * $p_i p_j^\top$ a function of $i - j$ ($\sum_k \cos((i - j)\omega_k)$),
     * which survives $M$ only when $M$ commutes with the rotations (for
     * example $M$ = the identity). So $X + P$ is absolute, and the module
     * can at best learn a relative score; RoPE rotates $q$ and $k$
     * themselves, so that every term of $q_i \cdot k_j$ depends on $i - j$
     * (section 4).
     */
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * The trace shows `rope(p=20, pos 6..6)` on the query and `pos 0..6`
     * on the keys: the one query is turned to position 6, the last of the 7
     * keys (the program aligns the queries with the end of the keys, as
     * with `--causal`: query $i$ sits at position $i + L_k - L_q$). That is
     * what decoding with a cache needs: the new token is the latest
     * position, the cache holds the keys of positions 0 to 5, already
     * turned when they were computed, and the new query and key must be
     * turned to position 6 so that every score depends on the true
     * distance. Turning the lone query to position 0 would make it look 6
     * positions before its own key.
     */
    multihead m;
    multihead_config cfg = {.query_size = 100, .key_size = 100, .value_size = 100,
                            .num_hiddens = 100, .num_heads = 5, .shape_only = 1,
                            .rope = 1};
    CHECK(multihead_init(&m, &cfg));
    tensor *q, *kv, *out;
    CHECK(tensor_alloc_meta(SHAPE(2, 1, 100), &q));
    CHECK(tensor_alloc_meta(SHAPE(2, 7, 100), &kv));
    trace_to(stdout);
    CHECK(multihead_forward(&m, q, kv, kv, NULL, &out, NULL));
    trace_to(NULL);
    tensor_free(q);
    tensor_free(kv);
    tensor_free(out);
    multihead_free(&m);
}

/* Section 5's module with rope at base (0: no rope): its weights. */
static tensor *weights_with(double base)
{
    gsl_rng *rng = mha_rng_new(15);
    if (!rng)
        exit(1);
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);
    tensor *x, *y, *w;
    CHECK(tensor_alloc(SHAPE(1, N, D), &x));
    tensor_fill_normal(x, rng, 0, 1);
    multihead_free(&m);
    gsl_rng_free(rng);
    rng = mha_rng_new(15);
    if (!rng)
        exit(1);
    cfg.rope = base > 0;
    cfg.rope_base = base;
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);
    CHECK(multihead_forward(&m, x, x, x, NULL, &y, &w));
    tensor_free(x);
    tensor_free(y);
    multihead_free(&m);
    gsl_rng_free(rng);
    return w;
}

static void exercise6(void)
{
    section("Exercise 6");
    /*md
     * Pair $k$ of a head of $p = 8$ turns by $\theta_k = \mathrm{base}^{-2k/8}$
     * per position; pair 0 turns 1 radian whatever the base. Over the 6
     * positions of section 5 (distances up to 5), the other pairs turn
     * much more with base 100 and hardly at all with base 1000000 (the
     * angles below).
     *
     * - **Base 100**: every pair turns noticeably, so more of each head's
     *   features depend on distance, and the heatmaps change visibly from
     *   the chapter's: the same key is scored differently from each query.
     * - **Base 1000000**: only pair 0 still turns much; the other three are
     *   almost fixed and act like features without rope, so the heatmaps
     *   change little from the chapter's, whose pairs 1 to 3 already
     *   turned little over 6 positions.
     *
     * The last two columns measure it: the largest change of a weight
     * against the chapter's base 10000, larger for 100 than for 1000000;
     * and against the same module without rope, about the same for every
     * base, since pair 0 turns 5 radians over these positions whatever the
     * base. A small base suits short-range patterns; a large one keeps
     * slow pairs that separate positions over long contexts (why
     * long-context models raise the base).
     */
    tensor *plain = weights_with(0), *chapter = weights_with(10000);
    const double bases[3] = {100, 10000, 1000000};
    printf("base       angle of pairs 0..3 over 5 positions     largest |w - w'|,\n"
           "           (radians)                                w' of base 10000, "
           "without rope\n");
    for (int b = 0; b < 3; b++) {
        tensor *w = weights_with(bases[b]);
        printf("%-9.0f ", bases[b]);
        for (size_t k = 0; k < 4; k++)
            printf(" %8.4f", 5 * rope_theta(k, P, bases[b]));
        printf("   %16.4f %14.4f\n", largest_abs_diff(w, chapter),
               largest_abs_diff(w, plain));
        tensor_free(w);
    }
    tensor_free(plain);
    tensor_free(chapter);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5, exercise6)
