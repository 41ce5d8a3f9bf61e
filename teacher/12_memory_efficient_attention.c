/* Chapter 12, the key: memory-efficient attention.
 *
 * The numbers the answers to chapter 12's exercises quote: section 2's
 * online softmax with other tiles and in the other order, and the tiles a
 * causal mask leaves to compute.
 */
#include <string.h>

#include "key.h"

static const double x[8] = {1, 3, 2, 5, 0, 4, 6, 2};

/* The online softmax of x over the tiles given by their starts (the last
 * ends at 8), in the order given, one line per tile. */
static void online(const size_t *starts, size_t ntiles)
{
    double m = -INFINITY, l = 0;
    printf("tile                 tile max      m     alpha         l\n");
    for (size_t t = 0; t < ntiles; t++) {
        size_t a = starts[t], b = 8;
        for (size_t u = 0; u < ntiles; u++)
            if (starts[u] > a && starts[u] < b)
                b = starts[u];
        double tile_max = -INFINITY, sum = 0;
        char text[64] = "[";
        for (size_t i = a; i < b; i++) {
            tile_max = fmax(tile_max, x[i]);
            size_t n = strlen(text);
            snprintf(text + n, sizeof text - n, "%s%.0f", i > a ? ", " : "", x[i]);
        }
        strcat(text, "]");
        double m_new = fmax(m, tile_max), alpha = exp(m - m_new);
        for (size_t i = a; i < b; i++)
            sum += exp(x[i] - m_new);
        l = alpha * l + sum;
        m = m_new;
        printf("%-26s %2.0f %6.0f %9.4f %9.4f\n", text, tile_max, m, alpha, l);
    }
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * $\alpha = e^{m_{old} - m_{new}}$ rescales what was summed so far
     * whenever a tile raises the running maximum: it is $e^{-\infty} = 0$ on
     * the first tile (nothing summed yet), 1 when the maximum does not
     * change, and $e^{-(\text{rise})}$ when it rises. With tiles of 1 the
     * maximum rises at 1, 3, 5 and 6, so $\alpha$ takes the values
     * $e^{-2}$ = 0.1353 (1 to 3, and 3 to 5) and $e^{-1}$ = 0.3679 (5 to 6)
     * and 1 for the scores that are not a new maximum. With tiles of 2 the
     * running maximum goes 3, 5, 5, 6, so $\alpha$ is 0, 0.1353, 1 and
     * 0.3679. With one tile
     * of 8 there is only the first tile, $\alpha = 0$, and it is the plain
     * softmax.
     *
     * $\ell$ ends the same, 1.5988 in every run, because every rescaling is
     * exact: after the last tile, $\ell = \sum_i e^{x_i - m}$ with $m$ the
     * maximum of all scores, 6, however the sum was split. Only the
     * intermediate $\ell$ and the order of the floating-point additions
     * differ (in the last digits at most).
     */
    printf("tiles of 1:\n");
    online((size_t[]){0, 1, 2, 3, 4, 5, 6, 7}, 8);
    printf("\ntiles of 2:\n");
    online((size_t[]){0, 2, 4, 6}, 4);
    printf("\ntiles of 8:\n");
    online((size_t[]){0}, 1);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Last to first, the first tile is `[6, 2]`, which holds the maximum: $m$
     * is 6 at once and never rises, so every later $\alpha$ is 1 and the
     * tiles' sums simply add. $m$ ends at 6 and $\ell$ at 1.5988, as in the
     * chapter. In general, after the last tile $m = \max_i x_i$ (the max of
     * maxima does not depend on the order) and $\ell = \sum_i e^{x_i - m}$
     * (each term was rescaled to the final $m$ exactly once), both
     * independent of the order; the output accumulator $o$ is rescaled by
     * the same factors, so the attention's result does not depend on the
     * order either, up to rounding.
     */
    online((size_t[]){6, 3, 0}, 3);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * A query tile $i$ (rows $it$ to $it + t - 1$) under the causal mask
     * sees keys up to its last row, $it + t - 1$, so `flash_block` runs
     * the key tiles $0, \dots, i$ (it stops at the most keys any of its
     * rows sees) and skips the rest whole. That is
     * $1 + 2 + \dots + T = T(T + 1)/2$ of the $T^2$ tiles, $T = L/t$: a little
     * over half. A
     * counter in `flash_block`'s loop over `k0` gives the counts below,
     * computed here with its rule for some sizes. (Inside the diagonal
     * tiles, the masked scores are still computed by the dgemm and then
     * zeroed.)
     */
    const size_t cases[][2] = {{8, 2}, {1024, 64}, {4096, 256}};
    for (size_t c = 0; c < 3; c++) {
        size_t L = cases[c][0], t = cases[c][1], T = L / t, count = 0;
        for (size_t r0 = 0; r0 < L; r0 += t) {
            size_t last_seen = r0 + t; // causal: row r sees r + 1 keys
            for (size_t k0 = 0; k0 < last_seen; k0 += t)
                count++;
        }
        printf("L = %4zu, tiles of %3zu: %3zu of %3zu tiles computed, "
               "T(T+1)/2 = %zu\n", L, t, count, T * T, T * (T + 1) / 2);
    }
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * A weight is $P_{ij} = e^{s_{ij} - m_i} / \ell_i$, where $s_{ij}$ is
     * the scaled score of query $i$ and key $j$, and $m_i$ and $\ell_i$ are
     * row $i$'s final maximum and sum. $s_{ij}$ can be recomputed from $q_i$
     * and $k_j$, which the backward pass has anyway (one dot product, tile
     * by tile as in the forward pass); $m_i$ and $\ell_i$ are the only
     * quantities that depend on the whole row, and after the last tile they
     * are exact (exercise 2), not running values. So the two numbers per
     * row, $2 L$ in all instead of $L^2$ weights, rebuild any weight
     * exactly; FlashAttention even stores the one number $m_i + \ln \ell_i$
     * (the log-sum-exp), since $P_{ij} = e^{s_{ij} - (m_i + \ln \ell_i)}$.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
