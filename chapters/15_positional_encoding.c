/* Chapter 15: positional encoding, sinusoidal and rotary.
 *
 * Builds d2l's sinusoidal table P and draws it, checks that a shift of
 * positions is a rotation of P, shows chapter 10's symmetry broken by
 * X + P, then rotary embeddings (RoPE): scores that see only relative
 * positions, the two pairing conventions, and the module with rope.  Run
 * it with `make ch15`; the book's page is docs/15_positional_encoding.md.
 */

/*md
 * Chapter 10 ended on a symmetry: permute the positions of X and the
 * output of self-attention permutes with them. Nothing in the module knows
 * where a token stands. This chapter gives it two ways to know.
 *
 * The first is d2l's (in its [section on self-attention and positional
 * encoding](https://d2l.ai/chapter_attention-mechanisms-and-transformers/self-attention-and-positional-encoding.html),
 * after the Transformer paper, [Vaswani et al.
 * 2017](https://arxiv.org/abs/1706.03762)): add to X a table $P$ of the
 * same shape whose row $i$ is a fingerprint of position $i$. The second is what llama-style models do (the RoFormer paper,
 * [Su et al. 2021](https://arxiv.org/abs/2104.09864), and [Llama
 * 2](https://arxiv.org/abs/2307.09288);
 * [llama2.c](https://github.com/karpathy/llama2.c)'s `run.c`): leave X alone and *rotate* the queries and keys by
 * an angle that grows with the position ([RoPE](glossary.md#rope), rotary
 * positional encoding), so that the score of query $i$
 * against key $j$ depends on $i - j$ alone.
 */

#include <math.h>
#include <string.h>

#include "lesson.h"

/* d2l's figure: 60 positions of an encoding 32 wide */
enum { STEPS = 60, DIM = 32 };
/* the module of sections 3 and 5: one sequence of N positions, D = d_model
 * features in H heads of P = D/H */
enum { N = 6, D = 32, H = 4, P = D / H };

/* What the sections share: the module, its input and its config. */
typedef struct {
    multihead_config cfg;
    multihead m;
    tensor *x; // (1, n, d_model)
} lesson;

static void table(void)
{
    section("1. The sinusoidal table");
    /*md
     * Row $i$ of $P$ is position $i$; its columns come in pairs, a sine and
     * a cosine of the same frequency:
     *
     * $$P_{i, 2j} = \sin\left(\frac{i}{10000^{2j/d}}\right), \qquad
     *   P_{i, 2j+1} = \cos\left(\frac{i}{10000^{2j/d}}\right)$$
     *
     * Pair 0 turns by one radian per position; each later pair turns more
     * slowly, down to $10000^{-30/32}$ radians per position for the last
     * pair of a 32-wide table. Row 0 is $(0, 1, 0, 1, \dots)$: every sine
     * at 0, every cosine at 1. For an odd $d$ the last column is a sine
     * with no cosine beside it.
     *
     * @show src/nn/posenc.c posenc_sinusoid
     *
     * The heatmap is d2l's figure: positions down, columns across. The
     * first columns change from one row to the next, the last ones hardly
     * at all, like the low and high bits of a binary counter, but smooth.
     * The curves are columns 6 to 9, as d2l plots them: two pairs, the
     * second slower than the first.
     */
    tensor *p;
    CHECK(posenc_sinusoid(STEPS, DIM, &p)); // (L, d)
    printf("P (%d, %d); rows 0 to 3, columns 0 to 5:\n", STEPS, DIM);
    for (size_t i = 0; i < 4; i++) {
        printf("  row %zu:", i);
        for (size_t j = 0; j < 6; j++)
            printf(" %9.6f", *TENSOR_AT(p, i, j));
        printf("\n");
    }
    printf("\nby hand: sin(1) = %.6f, cos(1) = %.6f, "
           "sin(1 / 10000^(4/32)) = %.6f\n",
           sin(1.0), cos(1.0), sin(pow(10000.0, -4.0 / 32.0)));
    heatmap_options opt = {.xlabel = "column j", .ylabel = "position i",
                           .palette = HEATMAP_BLUES, .width = 420,
                           .height = 640};
    printf("\n");
    draw_heatmap(p, &opt, "15_posenc");
    double x[STEPS], cols[4 * STEPS];
    const char *names[4] = {"col 6", "col 7", "col 8", "col 9"};
    for (size_t i = 0; i < STEPS; i++) {
        x[i] = (double)i;
        for (size_t c = 0; c < 4; c++)
            cols[c * STEPS + i] = *TENSOR_AT(p, i, 6 + c);
    }
    plot_options popt = {.title = "columns 6 to 9 of P",
                         .xlabel = "position i", .ylabel = "P[i, j]"};
    announce_plot(plot_lines(x, cols, STEPS, 4, names, &popt,
                             plot_base("15_columns"),
                             HEATMAP_PNG | HEATMAP_SVG),
                  "15_columns");
    tensor_free(p);
}

static void shift(void)
{
    section("2. A shift of positions is a rotation");
    /*md
     * Why sines and cosines? Because moving $\delta$ positions on is the
     * same linear map for every position. Write $w_j = 10000^{-2j/d}$ and
     * take pair $j$ cosine first,
     * $(P_{i, 2j+1}, P_{i, 2j}) = (\cos i w_j, \sin i w_j)$: the point at angle
     * $i w_j$ on the unit
     * circle. The addition formulas give
     *
     * $$\begin{pmatrix} P_{i+\delta, 2j+1} \\ P_{i+\delta, 2j} \end{pmatrix}
     *   = \begin{pmatrix} \cos \delta w_j & -\sin \delta w_j \\
     *                     \sin \delta w_j & \cos \delta w_j \end{pmatrix}
     *     \begin{pmatrix} P_{i, 2j+1} \\ P_{i, 2j} \end{pmatrix}$$
     *
     * a rotation by $\delta w_j$, counterclockwise (from the first axis
     * towards the second), that depends on $\delta$ and not on $i$. It is
     * the same matrix, turning the same way, as RoPE's in section 4. So a layer can
     * learn "the token three places back" as one fixed linear map, which
     * is what d2l means by relative positional information. The check
     * below builds the matrix for $\delta = 5$ and applies it to every row.
     */
    tensor *p;
    CHECK(posenc_sinusoid(STEPS, DIM, &p));
    const size_t delta = 5;
    double worst = 0;
    for (size_t j = 0; 2 * j < DIM; j++) {
        double a = (double)delta * pow(10000.0, -(double)(2 * j) / DIM);
        // m turns (cos, sin) counterclockwise by a, as rope_rotate_pair
        double m[2][2] = {{cos(a), -sin(a)}, {sin(a), cos(a)}};
        for (size_t i = 0; i + delta < STEPS; i++) {
            double s = *TENSOR_AT(p, i, 2 * j), c = *TENSOR_AT(p, i, 2 * j + 1);
            worst = fmax(worst, fabs(*TENSOR_AT(p, i + delta, 2 * j + 1) -
                                     (m[0][0] * c + m[0][1] * s)));
            worst = fmax(worst, fabs(*TENSOR_AT(p, i + delta, 2 * j) -
                                     (m[1][0] * c + m[1][1] * s)));
        }
    }
    printf("rows i + %zu against the rotation of rows i, for all %zu rows\n"
           "and %d pairs: equal to rounding (below 1e-12): %s\n",
           delta, STEPS - delta, DIM / 2, yes_no(worst < 1e-12));
    tensor_free(p);
}

/* Largest |y_swapped[i] - y[perm(i)]| over example 0, perm swapping
 * positions 0 and 2: 0 when the module is permutation-equivariant. */
static double swap_check(multihead *m, const tensor *x, int add_p)
{
    tensor *xs, *in, *ins, *y, *ys;
    CHECK(tensor_contiguous(x, &xs));
    for (size_t j = 0; j < D; j++) {
        double t = *TENSOR_AT(xs, 0, 0, j);
        *TENSOR_AT(xs, 0, 0, j) = *TENSOR_AT(xs, 0, 2, j);
        *TENSOR_AT(xs, 0, 2, j) = t;
    }
    if (add_p) {
        CHECK(posenc_add(x, &in));
        CHECK(posenc_add(xs, &ins));
    } else {
        CHECK(tensor_contiguous(x, &in));
        CHECK(tensor_contiguous(xs, &ins));
    }
    CHECK(multihead_forward(m, in, in, in, NULL, &y, NULL));
    CHECK(multihead_forward(m, ins, ins, ins, NULL, &ys, NULL));
    size_t perm[N] = {2, 1, 0, 3, 4, 5};
    double worst = 0;
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(*TENSOR_AT(ys, 0, i, j) -
                                     *TENSOR_AT(y, 0, perm[i], j)));
    tensor *all[] = {xs, in, ins, y, ys};
    for (size_t i = 0; i < 5; i++)
        tensor_free(all[i]);
    return worst;
}

static void order_again(lesson *l)
{
    section("3. Order matters again");
    /*md
     * Chapter 10's check, on a sequence of 6 positions of 32 features and
     * a module of 4 heads: swap positions 0 and 2, run the module, and
     * compare output row $i$ with row $\mathrm{perm}(i)$ of the plain run.
     * Without an encoding the rows match to rounding. With $P$ added to
     * both inputs they do not: position 0 now carries row 0 of $P$
     * whatever token sits there, so swapping tokens changes what each
     * position sees, and the outputs change by far more than rounding.
     */
    gsl_rng *rng = mha_rng_new(15);
    if (!rng)
        exit(1);
    CHECK(multihead_init(&l->m, &l->cfg));
    multihead_reset_xavier(&l->m, rng);
    CHECK(tensor_alloc(SHAPE(1, N, D), &l->x));
    CHECK(tensor_set_names(l->x, "B, n, d_model"));
    tensor_fill_normal(l->x, rng, 0, 1);
    gsl_rng_free(rng);
    double plain = swap_check(&l->m, l->x, 0);
    double with_p = swap_check(&l->m, l->x, 1);
    printf("positions 0 and 2 swapped; do the outputs only swap too?\n");
    printf("  X alone:  %s (largest difference below 1e-12)\n",
           yes_no(plain < 1e-12));
    printf("  X + P:    %s (largest difference %.4f)\n",
           yes_no(with_p < 1e-12), with_p);
}

/* q . k over p features of two (1, 1, p) tensors */
static double dot(const tensor *q, const tensor *k)
{
    double s = 0;
    for (size_t j = 0; j < q->shape[2]; j++)
        s += q->data[j] * k->data[j];
    return s;
}

/* x (1, 1, P) turned for position pos the GPT-NeoX way: feature k paired
 * with feature k + P/2, into y. */
static void rotate_halves(const double *x, long pos, double *y)
{
    for (size_t k = 0; k < P / 2; k++) {
        double a = (double)pos * rope_theta(k, P, ROPE_DEFAULT_BASE);
        y[k] = x[k] * cos(a) - x[k + P / 2] * sin(a);
        y[k + P / 2] = x[k + P / 2] * cos(a) + x[k] * sin(a);
    }
}

static void rotary(void)
{
    section("4. Rotary embeddings: turn the queries and keys");
    /*md
     * RoPE adds nothing to X. After the projections, each head's features
     * are taken in pairs $(x_{2k}, x_{2k+1})$ and pair $k$ of the vector at
     * position $m$ is turned by the angle $m \theta_k$, with
     * $\theta_k = 10000^{-2k/p}$ for a head of $p$ features: the table's
     * frequencies, now applied as rotations. The turn is counterclockwise,
     * from the first feature of the pair towards the second: at an angle
     * $\alpha$ the pair $(x_0, x_1)$ becomes
     *
     * $$(x_0 \cos\alpha - x_1 \sin\alpha,\; x_0 \sin\alpha + x_1 \cos\alpha),
     *   \qquad R(\alpha) = \begin{pmatrix} \cos\alpha & -\sin\alpha \\
     *   \sin\alpha & \cos\alpha \end{pmatrix}$$
     *
     * the matrix of section 2, and what the tests expect (RoFormer and
     * llama2.c turn the same way). One pair is the exercise of this
     * chapter. Its tests check the turned pair to $10^{-15}$ for quarter
     * turns ($\pi/2$ takes $(1, 0)$ to $(0, 1)$; a turn the other way
     * gives $(0, -1)$, the usual slip), a half turn and no turn, negative
     * angles and a large one (a far position), whose pair keeps its
     * length:
     *
     * @show src/nn/posenc.c rope_rotate_pair
     *
     * and the whole tensor, $(B, L, n p)$ for any number $n$ of heads,
     * position `start + l` for row $l$:
     *
     * @show src/nn/posenc.c rotate
     *
     * Why it works: a rotation $R$ keeps dot products, and
     * $R(m\theta_k)^\top R(n\theta_k) = R((n - m)\theta_k)$ for every pair $k$.
     * So the score of a
     * query at $m$ against a key at $n$ is
     *
     * $$(R_m q) \cdot (R_n k) = q \cdot R_{n-m}\, k$$
     *
     * which depends on the distance $n - m$ and not on where the pair
     * sits. Below, one query and one key of a head of 8 are turned for
     * three pairs of positions with the key 2 before the query
     * ($n - m = -2$), far from each other; the scores agree to 1e-12. A
     * key 3 before ($n - m = -3$) scores differently.
     *
     * Which features pair up is a convention. This library pairs
     * neighbours, $2k$ with $2k + 1$ (RoFormer, llama2.c); [GPT-NeoX](https://github.com/EleutherAI/gpt-neox) pairs
     * feature $k$ with $k + p/2$, the two halves of the head. The two are
     * one rotation seen through a fixed permutation of the features
     * ($2k \to k$, $2k + 1 \to k + p/2$): permute q and k, turn them the
     * halves way, and the scores are the same. A model trained in one
     * convention loads in the other by permuting the rows of $W_q$ and
     * $W_k$ once.
     */
    gsl_rng *rng = mha_rng_new(1515);
    if (!rng)
        exit(1);
    tensor *q, *k; // (1, 1, p): one position, one head
    CHECK(tensor_alloc(SHAPE(1, 1, P), &q));
    CHECK(tensor_alloc(SHAPE(1, 1, P), &k));
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill_normal(k, rng, 0, 1);
    gsl_rng_free(rng);
    long pos[][2] = {{2, 0}, {9, 7}, {1002, 1000}, {3, 0}};
    double first = 0, worst = 0;
    printf("query at m, key at n, score (R_m q) . (R_n k):\n");
    for (size_t t = 0; t < 4; t++) {
        tensor *qr, *kr;
        CHECK(rope_apply(q, P, pos[t][0], ROPE_DEFAULT_BASE, &qr));
        CHECK(rope_apply(k, P, pos[t][1], ROPE_DEFAULT_BASE, &kr));
        double s = dot(qr, kr);
        if (t == 0)
            first = s;
        else if (t < 3)
            worst = fmax(worst, fabs(s - first));
        printf("  m %4ld  n %4ld  n - m %ld  score %.12f\n", pos[t][0],
               pos[t][1], pos[t][1] - pos[t][0], s);
        tensor_free(qr);
        tensor_free(kr);
    }
    printf("the three scores at distance 2 agree to 1e-12: %s\n",
           yes_no(worst < 1e-12));

    // the GPT-NeoX halves: permute the features, turn, take the scores
    double qh[P], kh[P], qt[P], kt[P];
    for (size_t j = 0; j < P / 2; j++) {
        qh[j] = q->data[2 * j];
        qh[j + P / 2] = q->data[2 * j + 1];
        kh[j] = k->data[2 * j];
        kh[j + P / 2] = k->data[2 * j + 1];
    }
    double halves_worst = 0;
    for (size_t t = 0; t < 4; t++) {
        rotate_halves(qh, pos[t][0], qt);
        rotate_halves(kh, pos[t][1], kt);
        double s = 0;
        for (size_t j = 0; j < P; j++)
            s += qt[j] * kt[j];
        tensor *qr, *kr;
        CHECK(rope_apply(q, P, pos[t][0], ROPE_DEFAULT_BASE, &qr));
        CHECK(rope_apply(k, P, pos[t][1], ROPE_DEFAULT_BASE, &kr));
        halves_worst = fmax(halves_worst, fabs(s - dot(qr, kr)));
        tensor_free(qr);
        tensor_free(kr);
    }
    printf("\nthe halves convention (GPT-NeoX) on permuted features gives\n"
           "the same four scores (below 1e-12): %s\n",
           yes_no(halves_worst < 1e-12));
    tensor_free(q);
    tensor_free(k);
}

static void module(lesson *l)
{
    section("5. The module with RoPE");
    /*md
     * In the module, `rope` is an option of its configuration
     * (`multihead_config.rope`, and `mha forward --rope` on the command
     * line). Q and K are turned right after their projections, before the
     * split into heads; V is not, since values carry content, not
     * position. Keys sit at positions $0 \dots L_k - 1$ and queries at the
     * end, $L_k - L_q \dots L_k - 1$: in self-attention both are
     * $0 \dots n - 1$, and when a model decodes one token at a time with a
     * cache of earlier keys, the new query is the last position. The trace
     * shows the two `rope` steps, each a `new` tensor of the projection's
     * shape:
     *
     * @show src/nn/multihead.c multihead_rope
     *
     * In the forward pass it is one call after each projection:
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * RoPE breaks chapter 10's symmetry as $P$ does: the swap check says
     * no. The heatmaps are the module's weights per head. This module is
     * untrained, so they look no more orderly than chapter 10's: RoPE makes
     * the distance between a query and a key part of their score, and it
     * is training that would teach a head to look, say, one token back.
     */
    multihead_free(&l->m);
    gsl_rng *rng = mha_rng_new(15);
    if (!rng)
        exit(1);
    multihead_config cfg = l->cfg;
    cfg.rope = 1;
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    gsl_rng_free(rng);
    tensor *y, *weights; // weights (B, h, n, n)
    trace_to(stdout);
    CHECK(multihead_forward(&l->m, l->x, l->x, l->x, NULL, &y, &weights));
    trace_to(NULL);
    printf("\nwith rope, positions 0 and 2 swapped, do the outputs only swap "
           "too? %s\n\n",
           yes_no(swap_check(&l->m, l->x, 0) < 1e-12));
    char titles[H][16];
    const char *tp[H];
    for (size_t i = 0; i < H; i++) {
        snprintf(titles[i], sizeof titles[0], "head %zu", i);
        tp[i] = titles[i];
    }
    heatmap_options opt = {.titles = tp, .ntitles = H};
    CHECK(heatmap_terminal(stdout, weights, &opt));
    printf("\n");
    draw_heatmap(weights, &opt, "15_rope_heads");
    tensor_free(y);
    tensor_free(weights);
}

int main(void)
{
    mha_program_init();
    lesson l = {.cfg = {.query_size = D, .key_size = D, .value_size = D,
                        .num_hiddens = D, .num_heads = H}};
    table();
    shift();
    order_again(&l);
    rotary();
    module(&l);
    tensor_free(l.x);
    multihead_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `rope_rotate_pair` (in the handout its body is blank; `make
 *    grade EXERCISE=rope_rotate_pair` checks it). Then run this chapter:
 *    sections 4 and 5 need it.
 * 2. d2l compares the table's columns with the binary representation of
 *    the position. Print rows 0 to 7 of a table 8 wide and read each pair
 *    as a point on a circle: which pair plays the part of the lowest bit?
 * 3. After how many positions does pair $j$ of a 32-wide table come back
 *    to where it started? What does that say about the longest sequence
 *    the last pair can tell apart, and what does the base 10000 buy?
 * 4. Section 2 found a fixed rotation for a shift. Is $X + P$ still
 *    relative, that is, does $(x_i + p_i) W_q^\top \cdot (x_j + p_j) W_k^\top$
 *    depend on $i - j$ alone? Expand it and find the terms that
 *    do not.
 * 5. Run `build/mha trace --rope --queries 1 --kv 7`: at which position
 *    is the one query turned, and why is that what decoding with a cache
 *    needs?
 * 6. Change the rope base of section 5 to 100 (`cfg.rope_base`) and then
 *    to 1000000. How do the heatmaps change, and why?
 */
