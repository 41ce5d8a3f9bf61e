/* Chapter 20, the key: multi-head latent attention.
 *
 * The numbers the answers to chapter 20's exercises quote: RMSNorm and
 * LayerNorm on one row, the size of a W_UK folded into wq_b, rotations
 * composing by the difference of positions, the multiply-adds of a
 * decoding step by each path, and the G that caches as much as MLA.
 */
#include <math.h>

#include <gsl/gsl_randist.h>

#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The library's solution is `mla_rms_norm` in
     * [`src/nn/mla_init.c`](../../src/nn/mla_init.c) (folded on the chapter's page); `make
     * grade EXERCISE=mla_rms_norm` grades a student's: the values over
     * rows of any leading dimensions, a view as input, a row of zeros,
     * and the refusals. Per row: the sum of squares,
     * $1/\sqrt{\text{mean} + \epsilon}$, then each feature times that and its
     * weight.
     *
     * LayerNorm (chapter 11) first subtracts the row's mean and divides
     * by the standard deviation, then scales by $\gamma$ and shifts by
     * $\beta$. RMSNorm subtracts nothing and shifts nothing: it keeps the
     * direction of the row and only fixes its scale. A row of zeros has
     * mean square 0; $\epsilon > 0$ keeps the divisor $\sqrt{\epsilon}$,
     * and $0/\sqrt{\epsilon} = 0$. The row $(1, 2, 3, 6)$ with unit
     * weights:
     */
    tensor *x, *w, *y, *gamma, *beta, *ln;
    CHECK(tensor_from_array(SHAPE(1, 4), (double[]){1, 2, 3, 6}, &x));
    CHECK(tensor_from_array(SHAPE(4), (double[]){1, 1, 1, 1}, &w));
    CHECK(tensor_from_array(SHAPE(4), (double[]){0, 0, 0, 0}, &beta));
    CHECK(tensor_from_array(SHAPE(4), (double[]){1, 1, 1, 1}, &gamma));
    CHECK(mla_rms_norm(x, w, 1e-6, &y));
    CHECK(layernorm_apply(x, gamma, beta, 1e-6, &ln));
    printf("RMSNorm:   ");
    for (size_t j = 0; j < 4; j++)
        printf(" %8.4f", y->data[j]);
    printf("\nLayerNorm: ");
    for (size_t j = 0; j < 4; j++)
        printf(" %8.4f", ln->data[j]);
    printf("\n");
    tensor *made[] = {x, w, y, gamma, beta, ln};
    for (size_t i = 0; i < sizeof made / sizeof made[0]; i++)
        tensor_free(made[i]);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Folding $W_{UK}$ into `wq_b` replaces, per head, the $d_{nope}$
     * rows of the no-rope query by the $d_c$ rows of $W_{UK,j}^\top$
     * times them; the $d_r$ rope rows stay. The folded weight is
     * $(h (d_c + d_r), d_q')$: `(56, 16)` in the chapter (against `wq_b`'s
     * `(48, 16)` and `wkv_b`'s $W_{UK}$ part). For DeepSeek-V2 it is
     * larger than the two it replaces, and every step reads it:
     */
    const struct {
        const char *name;
        double h, dn, dr, dc, dq;
    } sizes[] = {{"chapter 20", 4, 8, 4, 10, 16},
                 {"DeepSeek-V2", 128, 128, 64, 512, 1536}};
    for (size_t i = 0; i < 2; i++) {
        double h = sizes[i].h, dn = sizes[i].dn, dr = sizes[i].dr;
        double dc = sizes[i].dc, dq = sizes[i].dq;
        double folded = h * (dc + dr) * dq, wq_b = h * (dn + dr) * dq;
        double w_uk = h * dn * dc;
        printf("%-12s folded (%.0f, %.0f): %.0f numbers; wq_b %.0f + W_UK %.0f "
               "= %.0f\n",
               sizes[i].name, h * (dc + dr), dq, folded, wq_b, w_uk,
               wq_b + w_uk);
        if (i == 1)
            printf("%-12s in millions: %.0f against %.0f\n", "", folded / 1e6,
                   (wq_b + w_uk) / 1e6);
    }
    /*md
     * The fold is smaller exactly when $d_q' (d_c - d_{nope}) < d_{nope} d_c$,
     * and a query costs as many multiply-adds as the weights have
     * numbers. In the chapter's small module it holds, $16 \cdot 2 < 80$:
     * 896 numbers against 1088. With DeepSeek-V2's sizes it is far from
     * holding, $1536 \cdot 384$ against $128 \cdot 512$: the folded
     * weight has 113 million numbers where the two factors have 46
     * million, since going through the narrow $d_{nope} = 128$ is cheaper
     * than through $d_c = 512$. The published code keeps the two apart
     * and applies $W_{UK}$ at run time.
     */
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * A key turned by its position is $R_t W_{UK} c_t$, the query $R_i q_i$,
     * and their product
     * $q_i^\top R_i^\top R_t W_{UK} c_t = q_i^\top R_{t-i} W_{UK} c_t$. The
     * matrix between the query and the latent now
     * depends on $t - i$: there is no one matrix to fold into the query,
     * and a cache of $c_t$ would need the keys turned again at every step.
     * Keeping RoPE on $d_r$ features of their own, with the turned
     * $k_{pe}$ cached, leaves $W_{UK}$ free of positions. The check below
     * turns random pairs by $i$ and by $t$ and compares $R_i^\top R_t$
     * with $R_{t-i}$ (the fact the argument rests on):
     */
    gsl_rng *rng = mha_rng_new(20);
    if (!rng)
        exit(1);
    double worst = 0;
    for (size_t i = 0; i < 8; i++)
        for (size_t t = 0; t < 8; t++) {
            double a = gsl_ran_gaussian(rng, 1), b = gsl_ran_gaussian(rng, 1);
            double c = gsl_ran_gaussian(rng, 1), d = gsl_ran_gaussian(rng, 1);
            double qi0, qi1, kt0, kt1, k0, k1;
            CHECK(rope_rotate_pair(a, b, (double)i, &qi0, &qi1));
            CHECK(rope_rotate_pair(c, d, (double)t, &kt0, &kt1));
            CHECK(rope_rotate_pair(c, d, (double)t - (double)i, &k0, &k1));
            worst = fmax(worst, fabs((qi0 * kt0 + qi1 * kt1) - (a * k0 + b * k1)));
        }
    printf("(R_i q) . (R_t k) = q . (R_(t-i) k) for i, t in 0..7: largest "
           "difference below 1e-12: %s\n", yes_no(worst < 1e-12));
    gsl_rng_free(rng);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * One head at position $t$ (so $t + 1$ keys; below, $t$ keys). The
     * naive path of the chapter up-projects every cached latent:
     * $t \cdot d_c (d_{nope} + d_v)$, then $t (d_{nope} + d_r)$ for the scores
     * and
     * $t \cdot d_v$ for the values. The absorbed path: $d_{nope} d_c$ for
     * the query, $t (d_c + d_r)$ for the scores, $t \cdot d_c$ for the sum
     * of latents and $d_c d_v$ for $W_{UV}$. With DeepSeek-V2's sizes:
     */
    const double dc = 512, dn = 128, dr = 64, dv = 128;
    printf("%6s %16s %16s\n", "t", "naive", "absorbed");
    const double ts[] = {1, 2, 16, 4096};
    for (size_t i = 0; i < 4; i++) {
        double t = ts[i];
        double naive = t * dc * (dn + dv) + t * (dn + dr) + t * dv;
        double absorbed = dn * dc + t * (dc + dr) + t * dc + dc * dv;
        printf("%6.0f %16.0f %16.0f\n", t, naive, absorbed);
        if (i == 3)
            printf("\nat t = 4096 the naive path does %.0f times as many\n",
                   naive / absorbed);
    }
    /*md
     * The absorbed path does less from $t = 2$ on, and at 4096 positions
     * about 117 times less. A naive path that caches every head's keys and values
     * (the published code's `naive`, with its `k_cache` and `v_cache`)
     * up-projects only the new position, $d_c (d_{nope} + d_v)$ once, and
     * then does the least arithmetic of all, $t (d_{nope} + d_r + d_v)$;
     * but it caches 32,768 numbers per position and layer instead of 576,
     * and reading them is what decoding waits for.
     */
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * Grouped-query attention caches $2 G d_h$ numbers per position and
     * layer, MLA $d_c + d_r$. For Llama 2 70B's $d_h = 128$ and the
     * chapter's $d_c = 512$, $d_r = 64$:
     */
    double g = (512.0 + 64.0) / (2 * 128.0);
    printf("G = (512 + 64) / (2 * 128) = %.2f\n", g);
    /*md
     * Not a whole number: no grouping caches exactly as much. $G = 2$
     * caches a little less (512 numbers), $G = 3$ more (768). The same
     * 2.25 holds for DeepSeek-V2, whose heads are also 128 wide: it is the
     * comparison the DeepSeek-V2 paper draws, with every head keeping
     * keys of its own.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
