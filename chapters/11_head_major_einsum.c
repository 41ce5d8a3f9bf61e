/* Chapter 11: the head-major ("einsum") variant, with residual + LayerNorm.
 *
 * Runs the einops version's module (src/nn/headmajor.c) with its trace, shows
 * that its head split is a view, checks its initial weights and its
 * LayerNorm, and holds it against chapter 08's module.  Run it with
 * `make ch11`; the book's page is docs/11_head_major_einsum.md.
 */
/*md
 * Chapter 08 folded the heads into the batch: after `transpose_qkv` a
 * tensor is $(B \cdot h, n, d_{model}/h)$, and attention treats the
 * $B \cdot h$ heads as that many independent examples.  The einops version
 * (`MultiHeadAttentionNew` from einops' tutorial *Writing better code with
 * PyTorch and einops*, [einops.rocks/pytorch-examples](https://einops.rocks/pytorch-examples.html),
 * written with [einops](https://github.com/arogozhnikov/einops)) puts the heads in front
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
 * `rearrange` names the axes with letters and says how to regroup
 * them: `(head k)` splits the last axis into heads of `k` features.
 * `einsum` names every axis of its inputs with a letter and multiplies
 * them element by element; a letter missing from the output after
 * `->` is summed over.  So `'hblk,hbtk->hblt'` is, for every head `h`
 * and example `b`, the product of queries `(l, k)` with keys `(t, k)`
 * summed over `k`: the scores $Q K^\top$.
 *
 * The layout is $(h, B, L, d_k)$.  Each head has its own sizes $d_k$ and
 * $d_v$, which need not be $d_{model}/h$, and the module ends in the
 * "Add & Norm" of the Transformer ([Vaswani et al.
 * 2017](https://arxiv.org/abs/1706.03762)). *Add*: the module's input is
 * added back to its output (a *residual* connection, so a layer only has
 * to learn a correction to its input). *Norm*: every position's
 * $d_{model}$ features are then shifted and scaled to mean 0 and
 * variance 1, and multiplied and shifted again by learned $\gamma$ and
 * $\beta$ (*LayerNorm*, [Ba et al. 2016](https://arxiv.org/abs/1607.06450)).
 */
#include <math.h>

#include <gsl/gsl_matrix.h>

#include "lesson.h"

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

/* What sections 1, 2, 4 and 7 share: the random stream (seed 11) and
 * section 1's small module, its inputs and output. */
typedef struct {
    gsl_rng *rng;
    headmajor m;
    tensor *q, *kv, *lens, *out; // (B, Lq, 8), (B, Lk, 8), (B,), (B, Lq, 8)
} lesson;

/* What sections 5 and 6 share: chapter 08's module and example, and a
 * head-major module with the same weights. */
typedef struct {
    multihead mh;
    headmajor hm;
    tensor *xq, *xk, *lens; // (B, Lq, D), (B, Lk, D), (B,)
} pair;

enum { B = 2, Lq = 3, Lk = 4 };            // section 1's batch
enum { D8 = 100, H8 = 5, Lq8 = 4, Lk8 = 6 }; // chapter 08's example

static void traced(lesson *l)
{
    section("1. The einops version's module, traced");
    /*md
     * A small module: $h = 2$ heads, $d_{model} = 8$, $d_k = 3$ and
     * $d_v = 2$, so $h d_k = 6$ and $h d_v = 4$ are not $d_{model}$: in
     * this variant the per-head sizes are free, and `fc` maps the
     * $h d_v$ joined features back to $d_{model}$.  The batch has
     * $B = 2$ examples of $L_q = 3$ queries and $L_k = 4$ keys, with
     * valid lengths $[3, 2]$, drawn from a standard normal.  The module
     * has dropout 0.1 but runs in evaluation mode, so nothing is dropped
     * (chapter 04).
     *
     * Read the trace from the top: three projections (`new`), each
     * followed by a `rearrange` made of two `view` lines; the two
     * einsums (`new`); the mask, the softmax; the join (two views
     * again); then `fc`, the residual and the LayerNorm.  Steps named
     * with PyTorch's trailing underscore (`masked_fill_`, `add_`) work
     * in place: they write their result over the tensor they were given
     * (the scores, the output of `fc`) and allocate nothing.  The trace
     * still marks them `new`, because its middle column says what
     * happened to the numbers, not to the memory: `view` and `copy` move
     * numbers without changing them, `new` computes numbers that were
     * not there before, in a fresh buffer or, as here, over an old one
     * ([reading a trace](reading-a-trace.md)).
     * `masked_fill_(mask[None], -inf)` is the mask: `mask` is one
     * `(B, Lq, Lk)` table of true (masked) and false, made from
     * `valid_lens`, and `mask[None]` is NumPy's and PyTorch's way of
     * putting a new axis of size 1 in front, `(1, B, Lq, Lk)`, so that
     * the same table is *broadcast* (reused) over the $h$ heads of the
     * scores `(h, B, Lq, Lk)`. Every masked score becomes $-\infty$,
     * whose exponential in the softmax is 0.
     * The module's forward pass, in the einops version's order:
     *
     * @show src/nn/headmajor.c headmajor_forward
     */
    l->rng = mha_rng_new(11);
    if (!l->rng)
        exit(1);
    headmajor_config cfg = {.n_head = 2, .d_model = 8, .d_k = 3, .d_v = 2,
                            .dropout = 0.1};
    CHECK(headmajor_init(&l->m, &cfg));
    headmajor_reset(&l->m, l->rng);
    CHECK(tensor_alloc(SHAPE(B, Lq, 8), &l->q));  // (B, Lq, d_model)
    CHECK(tensor_alloc(SHAPE(B, Lk, 8), &l->kv)); // (B, Lk, d_model)
    tensor_fill_normal(l->q, l->rng, 0, 1);
    tensor_fill_normal(l->kv, l->rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &l->lens));
    tensor *attn;
    trace_to(stdout);
    CHECK(headmajor_forward(&l->m, l->q, l->kv, l->kv, l->lens, &l->out, &attn));
    trace_to(NULL);
    char s[TRACE_SHAPE_MAX], t[TRACE_SHAPE_MAX];
    printf("\noutput %s, attn %s\n", tensor_shape_str(l->out, s, sizeof s),
           tensor_shape_str(attn, t, sizeof t));
    tensor_free(attn);
}

static void heads_first(const lesson *l)
{
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
     * steps inside a row: exactly a GSL matrix with `tda` $= h d_k$ (GSL's name for
     * the distance between the starts of two rows).  So
     * each einsum is one `gsl_blas_dgemm` per (head, example) on such
     * views, and the output einsum writes each head's $(L_q, d_v)$ block
     * straight into its columns of a $(B, L_q, h d_v)$ buffer: the join
     * is two views as well.
     *
     * Chapter 06's `transpose_qkv` goes on to $(B h, n, d_{model}/h)$.
     * With $B$, $h$ and $n$ all above 1 no single stride steps over both
     * the heads and the examples, so that last reshape copies every
     * number, once for each of $Q$, $K$, $V$, and `transpose_output`
     * copies once more ([chapter 01's
     * table](01_shapes_strides_views.md#summary-when-each-step-is-a-view)).  The
     * arithmetic is the same; the head-major layout just never asks for
     * a flat batch axis.  (Chapter 06's trace names the head size
     * `d_model/h`, since there the heads cut d_model; here the
     * projections make $h\,d_k$ features of their own, 6 against a
     * d_model of 8, so the head size is $d_k$, the name the trace above
     * prints.)
     */
    printf("w_qs(q) split into heads:\n\n");
    tensor *qp, *qh;
    CHECK(linear_forward(&l->m.w_qs, l->q, &qp)); // (B, Lq, h*d_k)
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
    for (size_t r = 0; r < Lq; r++) {
        printf("  ");
        for (size_t j = 0; j < 3; j++) {
            double x = gsl_matrix_get(&block.matrix, r, j);
            printf(" %8.4f", x);
            same &= x == *TENSOR_AT(qh, hd, bd, r, j) &&
                    x == *TENSOR_AT(qp, bd, r, hd * 3 + j);
        }
        printf("\n");
    }
    printf("\nthe same numbers as heads[1, 1] and as columns 3-5 of\n"
           "w_qs(q)[1]: %s\n", yes_no(same));
    printf("\nchapter 06's transpose_qkv on the same (2, 3, 6), h = 2:\n\n");
    tensor *flat;
    trace_to(stdout);
    CHECK(transpose_qkv(qp, 2, &flat)); // (B*h, Lq, d_k), a copy
    trace_to(NULL);
    printf("\nflat shares w_qs(q)'s buffer: %s\n",
           yes_no(tensor_shares_buffer(flat, qp)));
    tensor_free(qp);
    tensor_free(qh);
    tensor_free(flat);
}

static void initial_weights(lesson *l)
{
    section("3. The initial weights");
    /*md
     * The einops version overrides `nn.Linear`'s default for the weights:
     *
     * - `w_qs`, `w_ks`: $\mathcal N(0, \sigma^2)$ with
     *   $\sigma = \sqrt{2 / (d_{model} + d_k)}$,
     * - `w_vs`: the same with $d_v$,
     * - `fc`: Xavier normal, the normal form of chapter 08's Xavier
     *   uniform: the same variance $2 / (\text{fan\_in} + \text{fan\_out})$,
     *   drawn from $\mathcal N(0, \sigma^2)$ with
     *   $\sigma = \sqrt{2 / (\text{fan\_in} + \text{fan\_out})} = \sqrt{2 / (h d_v + d_{model})}$
     *   instead of from $\mathcal U(-a, a)$.
     *
     * The biases keep PyTorch's default,
     * $\mathcal U(-1/\sqrt{in}, 1/\sqrt{in})$, and the LayerNorm starts as
     * $\gamma = 1$,
     * $\beta = 0$.  That default is a form of *Kaiming (He)
     * initialisation*, which sets a weight's scale from fan_in alone
     * (variance $2/\mathrm{fan_{in}}$ in its usual form, made for layers
     * followed by a ReLU, which sets negative numbers to 0); `nn.Linear` uses a uniform variant whose bound
     * $1/\sqrt{\mathrm{fan_{in}}}$ gives variance $1/(3\,\mathrm{fan_{in}})$.
     * For the Transformer's sizes ($d_{model} = 512$,
     * $h = 8$, $d_k = d_v = 64$) the projections get $\sigma \approx 0.059$,
     * more than twice the $1/\sqrt{3 \cdot 512} \approx 0.026$
     * of `nn.Linear`'s own default.  The sample standard
     * deviations of one draw land within a fraction of a percent of the
     * targets: each matrix has over 260 000 entries.
     */
    headmajor_config big = {.n_head = 8, .d_model = 512, .d_k = 64, .d_v = 64,
                            .dropout = 0.1};
    headmajor mb;
    CHECK(headmajor_init(&mb, &big));
    headmajor_reset(&mb, l->rng);
    char s[TRACE_SHAPE_MAX];
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
}

static void residual_norm(lesson *l)
{
    section("4. Residual + LayerNorm");
    /*md
     * The last line of the einops version is
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
     * whatever scale attention produced ($\sigma^2$ is the variance of
     * `fc`'s output plus $q$ at that position).  `residual_norm = 0` switches
     * both off and leaves the raw output of `fc`.
     */
    tensor *raw;
    l->m.residual_norm = 0;
    CHECK(headmajor_forward(&l->m, l->q, l->kv, l->kv, l->lens, &raw, NULL));
    l->m.residual_norm = 1;
    printf("Per position of the output of section 1:\n\n"
           "  (b, l)   raw fc output         after residual + LayerNorm\n"
           "           mean      variance    |mean| < 1e-12   variance\n");
    for (size_t b = 0; b < B; b++)
        for (size_t r = 0; r < Lq; r++) {
            double rm, rv, nm, nv;
            position_stats(raw, b, r, &rm, &rv);
            position_stats(l->out, b, r, &nm, &nv);
            printf("  (%zu, %zu)   %8.4f  %8.4f    %-14s   %.6f\n", b, r, rm,
                   rv, yes_no(fabs(nm) < 1e-12), nv);
        }
    tensor_free(raw);
}

/* Chapter 08's module and example (seed 8), and a head-major module with
 * its weights, residual + LayerNorm off. */
static void make_pair(pair *p)
{
    gsl_rng *rng8 = mha_rng_new(8);
    if (!rng8)
        exit(1);
    multihead_config mcfg = {.query_size = D8, .key_size = D8, .value_size = D8,
                             .num_hiddens = D8, .num_heads = H8};
    CHECK(multihead_init(&p->mh, &mcfg));
    multihead_reset_xavier(&p->mh, rng8);
    headmajor_config hcfg = {.n_head = H8, .d_model = D8, .d_k = D8 / H8,
                             .d_v = D8 / H8, .dropout = 0.1};
    CHECK(headmajor_init(&p->hm, &hcfg));
    copy_weights(&p->hm, &p->mh);
    p->hm.residual_norm = 0;
    CHECK(tensor_alloc(SHAPE(B, Lq8, D8), &p->xq));
    CHECK(tensor_alloc(SHAPE(B, Lk8, D8), &p->xk));
    tensor_fill_normal(p->xq, rng8, 0, 2);
    tensor_fill_normal(p->xk, rng8, 0, 2);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &p->lens));
    gsl_rng_free(rng8);
}

static void free_pair(pair *p)
{
    multihead_free(&p->mh);
    headmajor_free(&p->hm);
    tensor_free(p->xq);
    tensor_free(p->xk);
    tensor_free(p->lens);
}

static void agrees(pair *p)
{
    section("5. Where it agrees with chapter 08's module");
    /*md
     * Give the head-major module chapter 08's weights:
     * $d_k = d_v = d_{model}/h$, `w_qs` $= W_q$, `w_ks` $= W_k$, `w_vs`
     * $= W_v$,
     * `fc` $= W_o$, zero biases, and switch residual + LayerNorm off.
     * Both modules then compute
     *
     * $$\text{head}_i = \text{softmax}\Big(\frac{Q_i K_i^\top}{\sqrt{d_k}}
     * \Big) V_i, \qquad \text{out} = [\text{head}_0, \dots,
     * \text{head}_{h-1}]\, W_o^\top$$
     *
     * with head $i$ reading features $i d_k \dots (i+1) d_k - 1$ in both
     * layouts, so the outputs agree to rounding.  The masks differ in
     * how they mask ($-\infty$ here; chapter 03's `masked_softmax` leaves
     * masked keys out of the sum) but both give a masked key a weight of
     * exactly 0 as long as a row has a valid key.  The weights agree too, up to the order of the
     * first two axes: `attn` is $(h, B, L_q, L_k)$, chapter 08 keeps
     * $(B, h, L_q, L_k)$, and `permute(1, 0, 2, 3)` (a view) turns one
     * into the other.
     *
     * The program runs chapter 08's example (100 features, 5 heads,
     * Xavier weights, inputs with standard deviation 2) through both
     * modules, with no mask, with `valid_lens` `[3, 2]` and with one
     * length per query.
     */
    tensor *lens_q;
    CHECK(tensor_from_array(SHAPE(B, Lq8), (double[]){1, 2, 3, 4, 6, 5, 4, 1},
                            &lens_q));
    const tensor *masks[] = {NULL, p->lens, lens_q};
    const char *mask_names[] = {"no mask", "valid_lens [3, 2]",
                                "valid_lens (B, Lq)"};
    printf("below 1e-12, attn.permute(1, 0, 2, 3) against the weights:\n\n"
           "  mask                outputs agree   weights agree\n");
    for (size_t c = 0; c < 3; c++) {
        tensor *out_m, *w_m, *out_h, *attn_h, *swapped;
        CHECK(multihead_forward(&p->mh, p->xq, p->xk, p->xk, masks[c], &out_m,
                                &w_m));
        CHECK(headmajor_forward(&p->hm, p->xq, p->xk, p->xk, masks[c], &out_h,
                                &attn_h));
        CHECK(tensor_permute(attn_h, SHAPE(1, 0, 2, 3), &swapped));
        printf("  %-19s %-15s %s\n", mask_names[c],
               yes_no(largest_abs_diff(out_h, out_m) < 1e-12),
               yes_no(largest_abs_diff(swapped, w_m) < 1e-12));
        tensor_free(out_m);
        tensor_free(w_m);
        tensor_free(out_h);
        tensor_free(attn_h);
        tensor_free(swapped);
    }
    tensor_free(lens_q);
}

static void differs(pair *p)
{
    section("6. Where they differ");
    /*md
     * **A row with nothing to attend to.**  With valid length 0 every
     * key of a row is masked.  `masked_softmax` follows [d2l](https://d2l.ai/chapter_attention-mechanisms-and-transformers/attention-scoring-functions.html)'s rule (its
     * $-10^6$ leaves a row of equal scores) and gives each key $1/L_k$.  The einops version's
     * $-\infty$ leaves $\text{softmax}(-\infty, \dots, -\infty)$, where
     * the largest score is $-\infty$ itself: $e^{-\infty - (-\infty)}$ is
     * NaN, and so is every number downstream of that query.  Neither
     * answer is meaningful (a padded query has nothing to look at), and
     * a NaN spreads silently through the next layer, so `headmajor`
     * refuses valid length 0 and says why.  Some of the fused kernels of
     * PyTorch's `scaled_dot_product_attention` make a third choice, zero
     * weights for such a row (chapter 18 lists who does what); that is
     * exercise 1.
     *
     * **Add & Norm.**  With the residual and the LayerNorm on, the
     * outputs are no longer chapter 08's: each position is chapter 08's
     * output plus the query, normalised to mean 0 and variance 1.
     */
    tensor *lens0, *out0, *w0, *out1 = NULL;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 0}, &lens0));
    CHECK(multihead_forward(&p->mh, p->xq, p->xk, p->xk, lens0, &out0, &w0));
    printf("valid_lens [3, 0], chapter 08's module, example 1, head 0,\n"
           "query 0:");
    for (size_t k = 0; k < Lk8; k++)
        printf(" %.4f", *TENSOR_AT(w0, 1, 0, 0, k));
    printf("\n\nthe head-major module:\n");
    int status = headmajor_forward(&p->hm, p->xq, p->xk, p->xk, lens0, &out1,
                                   NULL);
    printf("status %d (GSL_EINVAL), out %s\n%s\n", status,
           out1 ? "set" : "NULL", mha_last_error());
    double row[3] = {-INFINITY, -INFINITY, -INFINITY};
    double mx = fmax(row[0], fmax(row[1], row[2]));
    printf("\nthe einops version's softmax of (-inf, -inf, -inf): exp(-inf - max) with\n"
           "max = -inf is NaN: %s\n",
           yes_no(isnan(exp(row[0] - mx))));

    tensor *out_m, *out_h;
    p->hm.residual_norm = 1;
    CHECK(multihead_forward(&p->mh, p->xq, p->xk, p->xk, p->lens, &out_m,
                            NULL));
    CHECK(headmajor_forward(&p->hm, p->xq, p->xk, p->xk, p->lens, &out_h, NULL));
    p->hm.residual_norm = 0;
    double mean, var, mean08, var08;
    position_stats(out_h, 0, 0, &mean, &var);
    position_stats(out_m, 0, 0, &mean08, &var08);
    printf("\nresidual + LayerNorm on, valid_lens [3, 2]: the outputs now\n"
           "differ (by more than 0.1: %s).  Position (0, 0):\n"
           "  chapter 08: mean %7.4f, variance %.4f\n"
           "  head-major: |mean| < 1e-12: %s, variance %.6f\n",
           yes_no(largest_abs_diff(out_h, out_m) > 0.1), mean08, var08,
           yes_no(fabs(mean) < 1e-12), var);
    tensor_free(lens0);
    tensor_free(out0);
    tensor_free(w0);
    tensor_free(out_m);
    tensor_free(out_h);
}

static void what_heads_look_at(lesson *l)
{
    section("7. What each head looks at");
    /*md
     * Self-attention with the einops version's initialisation: $h = 4$ heads,
     * $d_{model} = 16$, $d_k = d_v = 4$, two sequences of 6 positions
     * under a causal mask (position $l$ sees positions $0 \dots l$), so
     * every row has at least one valid key.  `attn` is
     * $(h, B, L_q, L_k)$; the picture shows it through the
     * `permute(1, 0, 2, 3)` view, one row of panels per example and one
     * panel per head, as chapter 08 drew its weights.
     *
     * Above the diagonal every panel is blank: the causal mask's
     * $-\infty$ gives those keys weight 0.  Row 0 can only look at key 0
     * (weight 1); further down, each head spreads its weight its own
     * way over the keys it may see.  In the picture a key the mask hides
     * and a visible key of a very small weight are both near white; the
     * terminal's drawing tells them apart, a blank for exactly 0 and `░░`
     * for any weight above it.
     */
    headmajor_config scfg = {.n_head = 4, .d_model = 16, .d_k = 4, .d_v = 4,
                             .dropout = 0.1};
    headmajor ms;
    CHECK(headmajor_init(&ms, &scfg));
    headmajor_reset(&ms, l->rng);
    tensor *x, *causal, *y, *a, *panels;
    CHECK(tensor_alloc(SHAPE(2, 6, 16), &x)); // (B, n, d_model)
    tensor_fill_normal(x, l->rng, 0, 1);
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
    tensor *all[] = {x, causal, y, a, panels};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    headmajor_free(&ms);
}

int main(void)
{
    mha_program_init();
    lesson l;
    traced(&l);
    heads_first(&l);
    initial_weights(&l);
    residual_norm(&l);
    pair p;
    make_pair(&p);
    agrees(&p);
    differs(&p);
    free_pair(&p);
    what_heads_look_at(&l);
    tensor_free(l.q);
    tensor_free(l.kv);
    tensor_free(l.lens);
    tensor_free(l.out);
    headmajor_free(&l.m);
    gsl_rng_free(l.rng);
    return 0;
}

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
