/* Chapter 10, the key: self-attention.
 *
 * The numbers the answers to chapter 10's exercises quote: the cost table
 * for three lengths, and section 2's check with masks and with a crude
 * positional encoding.
 */
#include "key.h"

enum { B = 2, N = 4, D = 100, H = 5 };

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * With $B = 1$: the projections take $4 \cdot 2 n d^2 = 8 n d^2$
     * flops; the attention (scores and weighted average)
     * $2 \cdot 2 h n^2 p = 4 n^2 d$; the weights are $h n^2$ doubles. The table
     * below has
     * the three lengths. The attention takes over at $n = 2d = 1024$, where
     * the two are equal; at 8192 it is 8 times the projections, and the
     * weights alone take 4295.0 MB.
     *
     * Doubling h changes no flop count ($h p = d$ stays), but doubles the
     * weights' memory ($h n^2$). Doubling d_model multiplies the
     * projections by 4 and the attention by 2, moves the crossover to
     * $n = 2048$, and leaves the weights' memory as it is.
     */
    const double d = 512, h = 8;
    const double ns[3] = {128, 1024, 8192};
    printf("     n   projections (GFLOP)   attention (GFLOP)   weights (MB)\n");
    for (int i = 0; i < 3; i++) {
        double n = ns[i];
        printf("%6.0f   %19.3f   %17.3f   %12.1f\n", n, 8 * n * d * d / 1e9,
               4 * n * n * d / 1e9, h * n * n * 8 / 1e6);
    }
    printf("crossover: n = 2 * d_model = %.0f\n", 2 * d);
}

typedef struct {
    multihead m;
    tensor *x;
} lesson;

static void section1(lesson *l)
{
    gsl_rng *rng = mha_rng_new(10);
    if (!rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    CHECK(tensor_alloc(SHAPE(B, N, D), &l->x));
    tensor_fill_normal(l->x, rng, 0, 1);
    gsl_rng_free(rng);
}

/* Section 2's check: positions 0 and 2 of example 0 swapped, with lens as
 * the mask and pos added to position i's features before each run; the
 * largest |swapped row i - plain row perm(i)|. */
static double order_check(lesson *l, const tensor *lens, double pos)
{
    tensor *xp, *xs, *y_plain, *y_swapped;
    CHECK(tensor_contiguous(l->x, &xp));
    CHECK(tensor_contiguous(l->x, &xs));
    for (size_t j = 0; j < D; j++) {
        double t = *TENSOR_AT(xs, 0, 0, j);
        *TENSOR_AT(xs, 0, 0, j) = *TENSOR_AT(xs, 0, 2, j);
        *TENSOR_AT(xs, 0, 2, j) = t;
    }
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < N; i++)
            for (size_t j = 0; j < D; j++) {
                *TENSOR_AT(xp, b, i, j) += pos * (double)i;
                *TENSOR_AT(xs, b, i, j) += pos * (double)i;
            }
    CHECK(multihead_forward(&l->m, xp, xp, xp, lens, &y_plain, NULL));
    CHECK(multihead_forward(&l->m, xs, xs, xs, lens, &y_swapped, NULL));
    size_t perm[N] = {2, 1, 0, 3};
    double worst = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(*TENSOR_AT(y_swapped, 0, i, j) -
                                     *TENSOR_AT(y_plain, 0, perm[i], j)));
    tensor_free(xp);
    tensor_free(xs);
    tensor_free(y_plain);
    tensor_free(y_swapped);
    return worst;
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * **Causal mask: no.** The mask is tied to positions: position 0 sees
     * only key 0, position 2 sees keys 0 to 2. After the swap, the row at
     * position 0 holds old position 2's features but sees only itself,
     * while in the plain run old position 2 saw three keys; the outputs
     * differ. (A causal model is not permutation-equivariant: order
     * matters through the mask, which is how a decoder without positional
     * encoding still learns something of order.)
     *
     * **`valid_lens` `[3, 2]`: yes**, for this swap. Example 0's visible
     * keys are positions 0 to 2, and swapping 0 and 2 keeps that set of
     * keys the same, so every query still averages over the same keys. A
     * swap that crossed the length (0 and 3) would move a real position
     * into the padding and break it, as the chapter says.
     *
     * The library's runs, section 2's check with each mask:
     */
    lesson l;
    section1(&l);
    tensor *causal, *lens;
    CHECK(causal_valid_lens(B, N, &causal));
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    printf("no mask:            largest difference below 1e-12: %s\n",
           yes_no(order_check(&l, NULL, 0) < 1e-12));
    double worst = order_check(&l, causal, 0);
    printf("causal mask:        largest difference below 1e-12: %s (%.3f)\n",
           yes_no(worst < 1e-12), worst);
    printf("valid_lens [3, 2]:  largest difference below 1e-12: %s\n",
           yes_no(order_check(&l, lens, 0) < 1e-12));
    tensor_free(causal);
    tensor_free(lens);
    tensor_free(l.x);
    multihead_free(&l.m);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * No. The encoding is added by position, after the order is chosen: the
     * plain run sees $x_0 + 0, x_1 + 0.1, x_2 + 0.2, \dots$ and the swapped
     * run $x_2 + 0, x_1 + 0.1, x_0 + 0.2, \dots$. The swapped input is no
     * longer a reordering of the plain one ($P(X + E) \ne PX + E$), so the
     * output is no longer the reordered output: the module now sees where
     * each position is. That is the point of a positional encoding
     * (chapter 15 builds real ones).
     *
     * Added before the swap, the encoding moves with its row: the swapped
     * input is $P(X + E)$, a reordering of the plain run's $X + E$, and
     * the check says `yes` again, as it does for any $X$.  An encoding
     * only tells positions apart when it stays with the place.
     */
    lesson l;
    section1(&l);
    double worst = order_check(&l, NULL, 0.1);
    printf("0.1 * i added, no mask: largest difference below 1e-12: %s (%.3f)\n",
           yes_no(worst < 1e-12), worst);
    tensor_free(l.x);
    multihead_free(&l.m);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * `valid_lens` masks keys, so a padding position never feeds a real
     * one inside this layer, and the next layers mask it as a key again.
     * Its own output row has to be stopped where rows are combined or
     * scored: in the loss (a per-position loss weighted by a 0/1 mask, so
     * padded positions add nothing and the mean divides by the number of
     * real positions), and in any pooling over positions (an average or a
     * maximum over the sequence must skip them). If nothing did, the
     * padding rows, which hold an average of the real values computed from
     * a meaningless query, would count in the loss and the pooled
     * representation: results would depend on how much padding a batch
     * happens to have, and training would spend its gradients on rows that
     * do not exist.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
