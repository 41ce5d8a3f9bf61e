/* Chapter 11: the head-major ("einsum") variant, with residual + LayerNorm.
 *
 * The einops version writes multi-head attention with einops and einsum:
 * the heads go first, (h, B, L, d_k), each head's scores are an einsum, and the
 * result passes through dropout, a residual connection and a LayerNorm.
 * This chapter runs that module (src/headmajor.c), shows that its
 * rearranges cost no copies, and holds it against chapter 08's module.
 *
 * Shapes, in the einops version's names: B batch, Lq queries, Lk key-value
 * pairs, d_model features in and out, h heads of d_k (queries, keys) and d_v
 * (values) features each.
 *   q (B, Lq, d_model), k and v (B, Lk, d_model)
 *   q, k, v per head (h, B, L, d_k) or (h, B, L, d_v): views
 *   attn (h, B, Lq, Lk); output (B, Lq, d_model)
 */
/*md
 * Chapter 08 folded the heads into the batch: after `transpose_qkv` a
 * tensor is $(B \cdot h, n, d_{model}/h)$, and attention treats the
 * $B \cdot h$ heads as that many independent examples.  The einops version (a
 * `MultiHeadAttentionNew` written with einops) puts the heads in front
 * instead:
 *
 * ```python
 * q = rearrange(self.w_qs(q), 'b l (head k) -> head b l k', head=h)
 * attn = torch.einsum('hblk,hbtk->hblt', [q, k]) / np.sqrt(d_k)
 * output = torch.einsum('hblt,hbtv->hblv', [attn, v])
 * output = rearrange(output, 'head b l v -> b l (head v)')
 * output = self.layer_norm(self.dropout(self.fc(output)) + residual)
 * ```
 *
 * The layout is $(h, B, L, d_k)$.  Each head has its own sizes $d_k$ and
 * $d_v$, which need not be $d_{model}/h$, and the module ends in the
 * "Add & Norm" of the Transformer: the input is added back and every
 * position is normalised.
 */
#include <math.h>

#include <gsl/gsl_matrix.h>

#include "lesson.h"

/* max |a - b| over two tensors of one shape, any strides */
static double max_abs_diff(const tensor *a, const tensor *b)
{
    double worst = 0;
    size_t idx[TENSOR_MAX_DIMS] = {0};
    for (size_t e = 0; e < tensor_numel(a); e++) {
        double d = fabs(*tensor_at(a, idx) - *tensor_at(b, idx));
        worst = isnan(d) ? INFINITY : fmax(worst, d);
        for (size_t k = a->ndim; k-- > 0;) {
            if (++idx[k] < a->shape[k])
                break;
            idx[k] = 0;
        }
    }
    return worst;
}

/* mean and biased variance of y[b, l, :] */
static void position_stats(const tensor *y, size_t b, size_t l, double *mean,
                           double *var)
{
    size_t D = y->shape[2];
    double m = 0, v = 0;
    for (size_t j = 0; j < D; j++)
        m += *TENSOR_AT(y, b, l, j);
    m /= (double)D;
    for (size_t j = 0; j < D; j++)
        v += pow(*TENSOR_AT(y, b, l, j) - m, 2);
    *mean = m;
    *var = v / (double)D;
}

/* multihead's four layers copied into a head-major module with
 * d_k = d_v = d_model/h: w_qs = W_q, w_ks = W_k, w_vs = W_v, fc = W_o */
static void copy_weights(headmajor *hm, const multihead *mh)
{
    CHECK(tensor_copy_into(hm->w_qs.weight, mh->W_q.weight));
    CHECK(tensor_copy_into(hm->w_ks.weight, mh->W_k.weight));
    CHECK(tensor_copy_into(hm->w_vs.weight, mh->W_v.weight));
    CHECK(tensor_copy_into(hm->fc.weight, mh->W_o.weight));
    tensor_fill(hm->w_qs.bias, 0);
    tensor_fill(hm->w_ks.bias, 0);
    tensor_fill(hm->w_vs.bias, 0);
    tensor_fill(hm->fc.bias, 0);
}

int main(void)
{
    mha_program_init();
    char s[TRACE_SHAPE_MAX], t[TRACE_SHAPE_MAX];
    gsl_rng *rng = mha_rng_new(11);
    if (!rng)
        return 1;

    section("1. The einops version's module, traced");
    /*md
     * A small module: $h = 2$ heads, $d_{model} = 8$, $d_k = 3$ and
     * $d_v = 2$, so $h d_k = 6$ and $h d_v = 4$ are not $d_{model}$: in
     * this variant the per-head sizes are free, and `fc` maps the
     * $h d_v$ joined features back to $d_{model}$.  The batch has
     * $B = 2$ examples of $L_q = 3$ queries and $L_k = 4$ keys, with
     * valid lengths $[3, 2]$.
     *
     * Read the trace from the top: three projections (`new`), each
     * followed by a `rearrange` made of two `view` lines; the two
     * einsums (`new`); the mask, the softmax; the join (two views
     * again); then `fc`, the residual and the LayerNorm.  Steps marked
     * with PyTorch's trailing underscore (`masked_fill_`, `add_`)
     * overwrite a buffer the module owns instead of allocating one.
     */
    const size_t B = 2, Lq = 3, Lk = 4;
    headmajor_config cfg = {.n_head = 2, .d_model = 8, .d_k = 3, .d_v = 2,
                            .dropout = 0.1};
    headmajor m;
    CHECK(headmajor_init(&m, &cfg));
    headmajor_reset(&m, rng);
    printf("n_head 2, d_model 8, d_k 3, d_v 2, dropout 0.1 (evaluation\n"
           "mode: off); B 2, Lq 3, Lk 4, valid_lens [3, 2]; inputs from a\n"
           "standard normal (seed 11).\n\n");
    tensor *q, *kv, *lens, *out, *attn;
    CHECK(tensor_alloc(SHAPE(B, Lq, 8), &q));  // (B, Lq, d_model)
    CHECK(tensor_alloc(SHAPE(B, Lk, 8), &kv)); // (B, Lk, d_model)
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill_normal(kv, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    trace_to(stdout);
    CHECK(headmajor_forward(&m, q, kv, kv, lens, &out, &attn));
    trace_to(NULL);
    printf("\noutput %s, attn %s\n", tensor_shape_str(out, s, sizeof s),
           tensor_shape_str(attn, t, sizeof t));

    section("2. Heads first, and nothing copied");
    /*md
     * After `w_qs` a query is a row of $h d_k$ numbers: head 0's $d_k$
     * features, then head 1's.  Reshaping $(B, L_q, h d_k)$ to
     * $(B, L_q, h, d_k)$ only splits the last axis, and
     * `permute(2, 0, 1, 3)` only reorders shape and strides, so the
     * head-major tensor is a view with strides $(d_k, L_q h d_k, h d_k, 1)$.
     *
     * It is not contiguous, but it does not need to be.  For a fixed
     * head $i$ and example $b$ the block $(L_q, d_k)$ starts at element
     * $i d_k + b L_q h d_k$ and its rows are $h d_k$ apart with unit
     * steps inside a row: exactly a GSL matrix with `tda` $= h d_k$.  So
     * each einsum is one `gsl_blas_dgemm` per (head, example) on such
     * views, and the output einsum writes each head's $(L_q, d_v)$ block
     * straight into its columns of a $(B, L_q, h d_v)$ buffer: the join
     * is two views as well.
     *
     * Chapter 06's `transpose_qkv` goes on to $(B h, n, d_{model}/h)$.
     * With $B > 1$ no single stride steps over both the heads and the
     * examples, so that last reshape copies every number, once for each
     * of $Q$, $K$, $V$, and `transpose_output` copies once more.  The
     * arithmetic is the same; the head-major layout just never asks for
     * a flat batch axis.
     */
    printf("w_qs(q) split into heads, as the module does it:\n\n");
    tensor *qp, *qh;
    CHECK(linear_forward(&m.w_qs, q, &qp)); // (B, Lq, h*d_k)
    CHECK(tensor_set_names(qp, "B, Lq, h*d_k"));
    trace_to(stdout);
    CHECK(headmajor_split_heads(qp, 2, &qh)); // (h, B, Lq, d_k)
    trace_to(NULL);
    printf("\n");
    show_layout("w_qs(q)", qp);
    show_layout("heads  ", qh);
    printf("heads share w_qs(q)'s buffer: %s\n\n",
           yes_no(tensor_shares_buffer(qh, qp)));
    size_t hd = 1, bd = 1; // the block of head 1, example 1
    size_t start = hd * qh->strides[0] + bd * qh->strides[1];
    printf("Block (head %zu, example %zu) as dgemm reads it: data + %zu,\n"
           "%zu rows of %zu, tda %zu:\n\n",
           hd, bd, start, qh->shape[2], qh->shape[3], qh->strides[2]);
    gsl_matrix_const_view block = gsl_matrix_const_view_array_with_tda(
        qp->data + start, qh->shape[2], qh->shape[3], qh->strides[2]);
    int same = 1;
    for (size_t l = 0; l < Lq; l++) {
        printf("  ");
        for (size_t j = 0; j < 3; j++) {
            double x = gsl_matrix_get(&block.matrix, l, j);
            printf(" %8.4f", x);
            same &= x == *TENSOR_AT(qh, hd, bd, l, j) &&
                    x == *TENSOR_AT(qp, bd, l, hd * 3 + j);
        }
        printf("\n");
    }
    printf("\nthe same numbers as heads[1, 1] and as columns 3-5 of\n"
           "w_qs(q)[1]: %s\n", yes_no(same));
    printf("\nChapter 06's transpose_qkv on the same (2, 3, 6), h = 2 (its\n"
           "names say h*d_k/h, which is d_k):\n\n");
    tensor *flat;
    trace_to(stdout);
    CHECK(transpose_qkv(qp, 2, &flat)); // (B*h, Lq, d_k), a copy
    trace_to(NULL);
    printf("\nflat shares w_qs(q)'s buffer: %s\n",
           yes_no(tensor_shares_buffer(flat, qp)));

    section("3. The initial weights");
    /*md
     * The seed overrides `nn.Linear`'s default for the weights:
     *
     * - `w_qs`, `w_ks`: $\mathcal N(0, \sigma^2)$ with
     *   $\sigma = \sqrt{2 / (d_{model} + d_k)}$,
     * - `w_vs`: the same with $d_v$,
     * - `fc`: Xavier normal, $\sigma = \sqrt{2 / (\text{fan\_in} + \text{fan\_out})}
     *   = \sqrt{2 / (h d_v + d_{model})}$.
     *
     * The biases keep PyTorch's default, $\mathcal U(-1/\sqrt{in},
     * 1/\sqrt{in})$, and the LayerNorm starts as $\gamma = 1$,
     * $\beta = 0$.  For the Transformer's sizes ($d_{model} = 512$,
     * $h = 8$, $d_k = d_v = 64$) the projections get $\sigma \approx
     * 0.059$, more than twice the $1/\sqrt{3 \cdot 512} \approx 0.026$
     * of `nn.Linear`'s own Kaiming-uniform default.  The sample standard
     * deviations of one draw land within a fraction of a percent of the
     * targets: each matrix has over 260 000 entries.
     */
    headmajor_config big = {.n_head = 8, .d_model = 512, .d_k = 64, .d_v = 64,
                            .dropout = 0.1};
    headmajor mb;
    CHECK(headmajor_init(&mb, &big));
    headmajor_reset(&mb, rng);
    printf("n_head 8, d_model 512, d_k = d_v = 64:\n\n");
    printf("  layer  weight        target std  sample std  bias bound\n");
    const linear *layers[] = {&mb.w_qs, &mb.w_ks, &mb.w_vs, &mb.fc};
    double targets[] = {headmajor_std_qk(&big), headmajor_std_qk(&big),
                        headmajor_std_v(&big), headmajor_std_fc(&big)};
    for (size_t j = 0; j < 4; j++) {
        const tensor *w = layers[j]->weight;
        size_t n = tensor_numel(w);
        double mean = 0, ss = 0, bmax = 0;
        for (size_t e = 0; e < n; e++)
            mean += w->data[e] / (double)n;
        for (size_t e = 0; e < n; e++)
            ss += pow(w->data[e] - mean, 2);
        for (size_t e = 0; e < layers[j]->out_features; e++)
            bmax = fmax(bmax, fabs(layers[j]->bias->data[e]));
        double bound = 1 / sqrt((double)layers[j]->in_features);
        printf("  %-5s  %-12s  %.4f      %.4f      %.4f (max |b| %.4f)\n",
               layers[j]->name, tensor_shape_str(w, s, sizeof s), targets[j],
               sqrt(ss / (double)(n - 1)), bound, bmax);
    }
    headmajor_free(&mb);

    section("4. Residual + LayerNorm");
    /*md
     * The last line of the seed is
     * $\text{output} = \text{LayerNorm}(\text{fc}(\cdot) + q)$.  The
     * residual lets a stack of such layers pass its input through
     * unchanged when attention has nothing to add; the LayerNorm then
     * rescales each position $(b, l)$ on its own:
     *
     * $$y_j = \gamma_j \frac{x_j - \mu}{\sqrt{\sigma^2 + \epsilon}} + \beta_j,
     * \quad \mu = \frac1{d}\sum_j x_j,\quad
     * \sigma^2 = \frac1{d}\sum_j (x_j - \mu)^2$$
     *
     * with the biased variance and $\epsilon = 10^{-5}$.  With
     * $\gamma = 1$, $\beta = 0$ every position comes out with mean 0
     * and variance $\sigma^2 / (\sigma^2 + \epsilon)$, just under 1,
     * whatever scale attention produced.  `residual_norm = 0` switches
     * both off and leaves the raw output of `fc`.
     */
    tensor *raw;
    m.residual_norm = 0;
    CHECK(headmajor_forward(&m, q, kv, kv, lens, &raw, NULL));
    m.residual_norm = 1;
    printf("Per position of the output of section 1:\n\n"
           "  (b, l)   raw fc output         after residual + LayerNorm\n"
           "           mean      variance    |mean| < 1e-12   variance\n");
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < Lq; l++) {
            double rm, rv, nm, nv;
            position_stats(raw, b, l, &rm, &rv);
            position_stats(out, b, l, &nm, &nv);
            printf("  (%zu, %zu)   %8.4f  %8.4f    %-14s   %.6f\n", b, l, rm,
                   rv, yes_no(fabs(nm) < 1e-12), nv);
        }
    printf("\nThe variances after the norm are 1 - eps/(var + eps) for the\n"
           "variance var of fc's output plus q at that position.\n");

    section("5. Where it agrees with chapter 08's module");
    /*md
     * Give the head-major module chapter 08's weights: $d_k = d_v =
     * d_{model}/h$, `w_qs` $= W_q$, `w_ks` $= W_k$, `w_vs` $= W_v$,
     * `fc` $= W_o$, zero biases, and switch residual + LayerNorm off.
     * Both modules then compute
     *
     * $$\text{head}_i = \text{softmax}\Big(\frac{Q_i K_i^\top}{\sqrt{d_k}}
     * \Big) V_i, \qquad \text{out} = [\text{head}_0, \dots,
     * \text{head}_{h-1}]\, W_o^\top$$
     *
     * with head $i$ reading features $i d_k \dots (i+1) d_k - 1$ in both
     * layouts, so the outputs agree to rounding.  The masks differ in
     * how they mask ($-\infty$ here, $-10^6$ in d2l's `masked_softmax`)
     * but both give a masked key a weight of exactly 0 as long as a row
     * has a valid key.  The weights agree too, up to the order of the
     * first two axes: `attn` is $(h, B, L_q, L_k)$, chapter 08 keeps
     * $(B, h, L_q, L_k)$, and `permute(1, 0, 2, 3)` (a view) turns one
     * into the other.
     */
    const size_t D = 100, h = 5, B8 = 2, Lq8 = 4, Lk8 = 6;
    printf("Chapter 08's example: d_model 100, 5 heads, B 2, Lq 4, Lk 6;\n"
           "Xavier weights (seed 8); queries and keys/values drawn with\n"
           "standard deviation 2.\n\n");
    gsl_rng *rng8 = mha_rng_new(8);
    if (!rng8)
        return 1;
    multihead mh;
    multihead_config mcfg = {.query_size = D, .key_size = D, .value_size = D,
                             .num_hiddens = D, .num_heads = h};
    CHECK(multihead_init(&mh, &mcfg));
    multihead_reset_xavier(&mh, rng8);
    headmajor hm;
    headmajor_config hcfg = {.n_head = h, .d_model = D, .d_k = D / h,
                             .d_v = D / h, .dropout = 0.1};
    CHECK(headmajor_init(&hm, &hcfg));
    copy_weights(&hm, &mh);
    hm.residual_norm = 0;
    tensor *xq, *xk, *lens8, *lens8q;
    CHECK(tensor_alloc(SHAPE(B8, Lq8, D), &xq));
    CHECK(tensor_alloc(SHAPE(B8, Lk8, D), &xk));
    tensor_fill_normal(xq, rng8, 0, 2);
    tensor_fill_normal(xk, rng8, 0, 2);
    CHECK(tensor_from_array(SHAPE(B8), (double[]){3, 2}, &lens8));
    CHECK(tensor_from_array(SHAPE(B8, Lq8), (double[]){1, 2, 3, 4, 6, 5, 4, 1},
                            &lens8q));
    const tensor *masks[] = {NULL, lens8, lens8q};
    const char *mask_names[] = {"no mask", "valid_lens [3, 2]",
                                "valid_lens (B, Lq)"};
    printf("attn is (h, B, Lq, Lk) = (5, 2, 4, 6), chapter 08's weights\n"
           "(B, h, Lq, Lk) = (2, 5, 4, 6); attn.permute(1, 0, 2, 3) is\n"
           "compared with the weights.  Below 1e-12:\n\n"
           "  mask                outputs agree   weights agree\n");
    for (size_t c = 0; c < 3; c++) {
        tensor *out_m, *out_h, *attn_h, *swapped;
        CHECK(multihead_forward(&mh, xq, xk, xk, masks[c], &out_m));
        CHECK(headmajor_forward(&hm, xq, xk, xk, masks[c], &out_h, &attn_h));
        CHECK(tensor_permute(attn_h, SHAPE(1, 0, 2, 3), &swapped));
        printf("  %-19s %-15s %s\n", mask_names[c],
               yes_no(max_abs_diff(out_h, out_m) < 1e-12),
               yes_no(max_abs_diff(swapped, mh.weights) < 1e-12));
        tensor_free(out_m);
        tensor_free(out_h);
        tensor_free(attn_h);
        tensor_free(swapped);
    }

    section("6. Where they differ");
    /*md
     * **A row with nothing to attend to.**  With valid length 0 every
     * key of a row is masked.  d2l's $-10^6$ leaves a row of equal
     * scores, so `masked_softmax` gives each key $1/L_k$.  The einops version's
     * $-\infty$ leaves $\text{softmax}(-\infty, \dots, -\infty)$, where
     * the largest score is $-\infty$ itself: $e^{-\infty - (-\infty)}$ is
     * NaN, and so is every number downstream of that query.  Neither
     * answer is meaningful (a padded query has nothing to look at), and
     * a NaN spreads silently through the next layer, so `headmajor`
     * refuses valid length 0 and says why.  Recent PyTorch versions of
     * `scaled_dot_product_attention` make a third choice, zero weights
     * for such a row; that is exercise 1.
     *
     * **Add & Norm.**  With the residual and the LayerNorm on, the
     * outputs are no longer chapter 08's: each position is chapter 08's
     * output plus the query, normalised to mean 0 and variance 1.
     */
    tensor *lens0, *out0, *out1 = NULL;
    CHECK(tensor_from_array(SHAPE(B8), (double[]){3, 0}, &lens0));
    CHECK(multihead_forward(&mh, xq, xk, xk, lens0, &out0));
    printf("valid_lens [3, 0], chapter 08's module, example 1, head 0,\n"
           "query 0:");
    for (size_t k = 0; k < Lk8; k++)
        printf(" %.4f", *TENSOR_AT(mh.weights, 1, 0, 0, k));
    printf("\n\nthe head-major module:\n");
    int status = headmajor_forward(&hm, xq, xk, xk, lens0, &out1, NULL);
    printf("status %d (GSL_EINVAL), out %s\n%s\n", status,
           out1 ? "set" : "NULL", mha_last_error());
    double row[3] = {-INFINITY, -INFINITY, -INFINITY};
    double mx = fmax(row[0], fmax(row[1], row[2]));
    printf("\nthe einops version's softmax of (-inf, -inf, -inf): exp(-inf - max) with\n"
           "max = -inf is NaN: %s\n",
           yes_no(isnan(exp(row[0] - mx))));

    tensor *out_m, *out_h;
    hm.residual_norm = 1;
    CHECK(multihead_forward(&mh, xq, xk, xk, lens8, &out_m));
    CHECK(headmajor_forward(&hm, xq, xk, xk, lens8, &out_h, NULL));
    double mean, var, mean08, var08;
    position_stats(out_h, 0, 0, &mean, &var);
    position_stats(out_m, 0, 0, &mean08, &var08);
    printf("\nresidual + LayerNorm on, valid_lens [3, 2]: the outputs now\n"
           "differ (by more than 0.1: %s).  Position (0, 0):\n"
           "  chapter 08: mean %7.4f, variance %.4f\n"
           "  head-major: |mean| < 1e-12: %s, variance %.6f\n",
           yes_no(max_abs_diff(out_h, out_m) > 0.1), mean08, var08,
           yes_no(fabs(mean) < 1e-12), var);

    section("7. What each head looks at");
    /*md
     * Self-attention with the einops version's initialisation: $h = 4$ heads,
     * $d_{model} = 16$, $d_k = d_v = 4$, two sequences of 6 positions
     * under a causal mask (position $l$ sees positions $0 \dots l$), so
     * every row has at least one valid key.  `attn` is
     * $(h, B, L_q, L_k)$; the picture shows it through the
     * `permute(1, 0, 2, 3)` view, one row of panels per example and one
     * panel per head, as chapter 08 drew its weights.
     */
    headmajor_config scfg = {.n_head = 4, .d_model = 16, .d_k = 4, .d_v = 4,
                             .dropout = 0.1};
    headmajor ms;
    CHECK(headmajor_init(&ms, &scfg));
    headmajor_reset(&ms, rng);
    tensor *x, *causal, *y, *a, *panels;
    CHECK(tensor_alloc(SHAPE(2, 6, 16), &x)); // (B, n, d_model)
    tensor_fill_normal(x, rng, 0, 1);
    CHECK(causal_valid_lens(2, 6, &causal));
    CHECK(headmajor_forward(&ms, x, x, x, causal, &y, &a));
    CHECK(tensor_permute(a, SHAPE(1, 0, 2, 3), &panels)); // (B, h, n, n)
    char titles[8][32];
    const char *tp[8];
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 4; i++) {
            snprintf(titles[b * 4 + i], sizeof titles[0],
                     "example %zu, head %zu", b, i);
            tp[b * 4 + i] = titles[b * 4 + i];
        }
    heatmap_options opt = {.titles = tp, .ntitles = 8, .term_columns = 88};
    CHECK(heatmap_terminal(stdout, panels, &opt));
    printf("\n");
    draw_heatmap(panels, &opt, "11_heads");
    printf("\nAbove the diagonal every panel is blank: the causal mask's\n"
           "-inf gives those keys weight 0.  Row 0 can only look at key 0\n"
           "(weight 1); further down, each head spreads its weight its own\n"
           "way over the keys it may see.\n");

    /*md
     * ## Exercises
     *
     * 1. Recent versions of PyTorch's `scaled_dot_product_attention`
     *    give a fully masked row zero weights instead of NaN.  Change
     *    the module so that valid length 0 is allowed and gives a row of
     *    zeros.  What does the output at such a query become before the
     *    residual, and after it?
     * 2. Count the doubles copied by chapter 08's forward pass for
     *    $B = 2$, $L_q = 4$, $L_k = 6$, $d_{model} = 100$, $h = 5$ (read
     *    its trace), and by this module's.  Where in chapter 08's
     *    pipeline would a strided GSL view have saved each copy?
     * 3. Move the LayerNorm to the front (pre-norm, as GPT-2 does):
     *    $\text{out} = q + \text{fc}(\text{attn}(\text{LN}(q), \dots))$.
     *    Which tests in `tests/test_headmajor.c` would have to change,
     *    and why does section 4's "mean 0, variance 1" no longer hold?
     * 4. Set $d_k = 1$ with $h = 8$ and $d_{model} = 8$.  How many
     *    numbers does each head's score use, and what does the
     *    $1/\sqrt{d_k}$ scaling do then?
     */
    tensor_free(q);
    tensor_free(kv);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(attn);
    tensor_free(qp);
    tensor_free(qh);
    tensor_free(flat);
    tensor_free(raw);
    tensor_free(xq);
    tensor_free(xk);
    tensor_free(lens8);
    tensor_free(lens8q);
    tensor_free(lens0);
    tensor_free(out0);
    tensor_free(out_m);
    tensor_free(out_h);
    tensor_free(x);
    tensor_free(causal);
    tensor_free(y);
    tensor_free(a);
    tensor_free(panels);
    headmajor_free(&m);
    headmajor_free(&hm);
    headmajor_free(&ms);
    multihead_free(&mh);
    gsl_rng_free(rng);
    gsl_rng_free(rng8);
    return 0;
}
