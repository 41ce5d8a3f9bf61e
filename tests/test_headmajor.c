//> 11
/* test_headmajor.c: the head-major module against a plain-loop version
 * written here from the einops version's formulas (no BLAS, no reshape),
 * against chapter 08's multihead module, and its init, dropout, trace, errors and
 * allocation failures. */
#include "check.h"

#include <criterion/parameterized.h>
#include <stdint.h>

/* The einops version's forward, line by line, with loops over (b, l) and
 * the head index i:  qp = w_qs(q) and head i of position (b, l) is qp[b, l, i*d_k
 * .. i*d_k + d_k - 1] (likewise k, v);
 *   attn[i, b, l, t] = qp_i . kp_i / sqrt(d_k), -inf where t >= valid,
 *                      softmax over t;
 *   o[b, l, i*d_v + j] = sum_t attn[i, b, l, t] vp[b, t, i*d_v + j];
 *   y = fc(o); y = layer_norm(y + q) when residual_norm.
 * valid: NULL, B lengths or B*Lq lengths (per_query).  q, k, v are
 * row-major; out (B, Lq, d_model) and attn (h, B, Lq, Lk) row-major. */
static void naive_headmajor(const headmajor *m, size_t B, size_t Lq,
                            size_t Lk, const double *q, const double *k,
                            const double *v, const double *valid,
                            int per_query, double *out, double *attn)
{
    const headmajor_config *c = &m->cfg;
    size_t h = c->n_head, D = c->d_model, dk = c->d_k, dv = c->d_v;
    double *qp = malloc(Lq * h * dk * sizeof *qp);
    double *kp = malloc(Lk * h * dk * sizeof *kp);
    double *vp = malloc(Lk * h * dv * sizeof *vp);
    double *o = malloc(h * dv * sizeof *o), *s = malloc(Lk * sizeof *s);
    for (size_t b = 0; b < B; b++) {
        for (size_t l = 0; l < Lq; l++)
            linear_by_dots(&m->w_qs, q + (b * Lq + l) * D, qp + l * h * dk);
        for (size_t t = 0; t < Lk; t++) {
            linear_by_dots(&m->w_ks, k + (b * Lk + t) * D, kp + t * h * dk);
            linear_by_dots(&m->w_vs, v + (b * Lk + t) * D, vp + t * h * dv);
        }
        for (size_t l = 0; l < Lq; l++) {
            double len = !valid ? (double)Lk
                                : per_query ? valid[b * Lq + l] : valid[b];
            for (size_t i = 0; i < h; i++) {
                double mx = -INFINITY, sum = 0;
                for (size_t t = 0; t < Lk; t++) {
                    double dot = 0;
                    for (size_t j = 0; j < dk; j++)
                        dot += qp[l * h * dk + i * dk + j] *
                               kp[t * h * dk + i * dk + j];
                    s[t] = (double)t < len ? dot / sqrt((double)dk) : -INFINITY;
                    mx = s[t] > mx ? s[t] : mx;
                }
                for (size_t t = 0; t < Lk; t++)
                    sum += s[t] = exp(s[t] - mx);
                for (size_t j = 0; j < dv; j++)
                    o[i * dv + j] = 0;
                for (size_t t = 0; t < Lk; t++) {
                    double w = s[t] / sum;
                    attn[((i * B + b) * Lq + l) * Lk + t] = w;
                    for (size_t j = 0; j < dv; j++)
                        o[i * dv + j] += w * vp[t * h * dv + i * dv + j];
                }
            }
            double *y = out + (b * Lq + l) * D;
            linear_by_dots(&m->fc, o, y);
            if (!m->residual_norm)
                continue;
            double mean = 0, var = 0;
            for (size_t j = 0; j < D; j++)
                mean += y[j] += q[(b * Lq + l) * D + j];
            mean /= D;
            for (size_t j = 0; j < D; j++)
                var += (y[j] - mean) * (y[j] - mean);
            var /= D;
            for (size_t j = 0; j < D; j++)
                y[j] = m->layer_norm.gamma->data[j] * (y[j] - mean) /
                           sqrt(var + m->layer_norm.eps) +
                       m->layer_norm.beta->data[j];
        }
    }
    free(qp);
    free(kp);
    free(vp);
    free(o);
    free(s);
}

struct hm_case {
    size_t B, Lq, Lk, h, D, dk, dv;
    int lens;     /* 0 none, 1 (B,), 2 (B, Lq) */
    int residual; /* residual + LayerNorm on */
};

static struct hm_case hm_cases[] = {
    {1, 3, 5, 1, 4, 2, 3, 0, 1}, {2, 4, 6, 2, 6, 3, 5, 1, 1},
    {3, 2, 7, 3, 8, 4, 2, 2, 1}, {2, 5, 3, 4, 12, 3, 4, 1, 0},
    {1, 1, 4, 2, 5, 1, 6, 2, 0}, {3, 6, 2, 3, 9, 5, 3, 0, 0},
    {2, 4, 8, 4, 16, 2, 7, 2, 1}, {3, 3, 4, 1, 7, 6, 2, 1, 0},
    {1, 7, 1, 3, 6, 2, 1, 1, 1}, {2, 1, 9, 2, 3, 4, 5, 0, 1},
};

/* A head-major module of cfg, its weights drawn from r. */
static void make_headmajor(headmajor *m, headmajor_config cfg, gsl_rng *r)
{
    OK(headmajor_init(m, &cfg));
    headmajor_reset(m, r);
}

ParameterizedTestParameters(head_major, equals_loops)
{
    return cr_make_param_array(struct hm_case, hm_cases,
                               sizeof hm_cases / sizeof hm_cases[0]);
}

ParameterizedTest(struct hm_case *c, head_major, equals_loops)
{
    gsl_rng *r = mha_rng_new(17 + c->B * 5 + c->Lq * 11 + c->h * 3 + c->dv);
    headmajor m;
    make_headmajor(&m, (headmajor_config){c->h, c->D, c->dk, c->dv, 0.1}, r);
    m.residual_norm = c->residual;
    /* a LayerNorm that does something beyond normalising */
    tensor_fill_normal(m.layer_norm.gamma, r, 1, 0.3);
    tensor_fill_normal(m.layer_norm.beta, r, 0, 0.3);
    tensor *q, *k, *v, *lens = NULL, *out, *attn;
    q = normal_tensor(SHAPE(c->B, c->Lq, c->D), r, 1);
    k = normal_tensor(SHAPE(c->B, c->Lk, c->D), r, 1);
    v = normal_tensor(SHAPE(c->B, c->Lk, c->D), r, 1);
    if (c->lens == 1)
        OK(tensor_alloc(SHAPE(c->B), &lens));
    else if (c->lens == 2)
        OK(tensor_alloc(SHAPE(c->B, c->Lq), &lens));
    if (lens) /* every length from 1 to Lk */
        for (size_t i = 0; i < tensor_numel(lens); i++)
            lens->data[i] = (double)(1 + (i * 3) % c->Lk);

    OK(headmajor_forward(&m, q, k, v, lens, &out, &attn));
    assert_shape(out, SHAPE(c->B, c->Lq, c->D));
    assert_shape(attn, SHAPE(c->h, c->B, c->Lq, c->Lk));

    tensor *want, *want_attn;
    OK(tensor_alloc(SHAPE(c->B, c->Lq, c->D), &want));
    OK(tensor_alloc(SHAPE(c->h, c->B, c->Lq, c->Lk), &want_attn));
    naive_headmajor(&m, c->B, c->Lq, c->Lk, q->data, k->data, v->data,
                    lens ? lens->data : NULL, c->lens == 2, want->data,
                    want_attn->data);
    double err = rel_error(out, want);
    cr_assert(err <= 1e-12, "output relative error %g", err);
    err = rel_error(attn, want_attn);
    cr_assert(err <= 1e-12, "attn relative error %g", err);
    /* masked keys weigh exactly 0 (-inf, not -1e6) */
    if (lens)
        for (size_t i = 0; i < c->h; i++)
            for (size_t b = 0; b < c->B; b++)
                for (size_t l = 0; l < c->Lq; l++) {
                    double len = c->lens == 1 ? *TENSOR_AT(lens, b)
                                              : *TENSOR_AT(lens, b, l);
                    for (size_t t = (size_t)len; t < c->Lk; t++)
                        cr_assert_eq(*TENSOR_AT(attn, i, b, l, t), 0.0);
                }

    headmajor_free(&m);
    FREE_ALL(q, k, v, lens, out, attn, want, want_attn);
    gsl_rng_free(r);
}

/* Inputs that are views with strides (q a permuted tensor, k a narrowed
 * one) give the numbers their contiguous copies give. */
Test(head_major, strided_inputs)
{
    gsl_rng *r = mha_rng_new(4);
    headmajor m;
    make_headmajor(&m, (headmajor_config){2, 6, 3, 2, 0}, r);
    tensor *qt, *q, *qc, *kbig, *k, *kc, *out1, *out2, *a1, *a2;
    qt = normal_tensor(SHAPE(2, 6, 3), r, 1);
    OK(tensor_permute(qt, SHAPE(0, 2, 1), &q)); // (2, 3, 6), strided
    OK(tensor_contiguous(q, &qc));
    kbig = normal_tensor(SHAPE(2, 4, 10), r, 1);
    OK(tensor_narrow(kbig, 2, 3, 6, &k)); // (2, 4, 6), rows 10 apart
    OK(tensor_contiguous(k, &kc));
    OK(headmajor_forward(&m, q, k, k, NULL, &out1, &a1));
    OK(headmajor_forward(&m, qc, kc, kc, NULL, &out2, &a2));
    cr_assert(rel_error(out1, out2) <= 1e-14);
    cr_assert(rel_error(a1, a2) <= 1e-14);
    headmajor_free(&m);
    FREE_ALL(qt, q, qc, kbig, k, kc, out1, out2, a1, a2);
    gsl_rng_free(r);
}

/* --- agreement with chapter 08's module ------------------------------ */

struct agree_case {
    size_t B, Lq, Lk, D, h;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq) */
    int bias; /* biases copied too (otherwise zero in both) */
};

static struct agree_case agree_cases[] = {
    {2, 4, 6, 100, 5, 1, 0}, {1, 3, 3, 8, 2, 0, 0}, {3, 5, 7, 12, 4, 2, 0},
    {2, 2, 5, 6, 1, 1, 1},   {3, 6, 4, 16, 8, 2, 1}, {1, 1, 2, 9, 3, 0, 1},
};

ParameterizedTestParameters(head_major, agrees_with_multihead)
{
    return cr_make_param_array(struct agree_case, agree_cases,
                               sizeof agree_cases / sizeof agree_cases[0]);
}

/* w_qs = W_q, w_ks = W_k, w_vs = W_v, fc = W_o, d_k = d_v = d_model/h,
 * no residual + LayerNorm: the same numbers, and attn (h, B, Lq, Lk) is
 * the module's weights (B, h, Lq, Lk) with the first two axes swapped. */
ParameterizedTest(struct agree_case *c, head_major, agrees_with_multihead)
{
    gsl_rng *r = mha_rng_new(23 + c->D + c->Lk);
    multihead mh;
    multihead_config mcfg = {.query_size = c->D, .key_size = c->D,
                             .value_size = c->D, .num_hiddens = c->D,
                             .num_heads = c->h, .bias = c->bias};
    OK(multihead_init(&mh, &mcfg));
    multihead_reset_xavier(&mh, r);
    headmajor hm;
    headmajor_config hcfg = {c->h, c->D, c->D / c->h, c->D / c->h, 0.1};
    OK(headmajor_init(&hm, &hcfg));
    hm.residual_norm = 0;
    OK(tensor_copy_into(hm.w_qs.weight, mh.W_q.weight));
    OK(tensor_copy_into(hm.w_ks.weight, mh.W_k.weight));
    OK(tensor_copy_into(hm.w_vs.weight, mh.W_v.weight));
    OK(tensor_copy_into(hm.fc.weight, mh.W_o.weight));
    if (c->bias) {
        linear *ml[] = {&mh.W_q, &mh.W_k, &mh.W_v, &mh.W_o};
        linear *hl[] = {&hm.w_qs, &hm.w_ks, &hm.w_vs, &hm.fc};
        for (size_t j = 0; j < 4; j++) {
            tensor_fill_uniform(ml[j]->bias, r, -0.5, 0.5);
            OK(tensor_copy_into(hl[j]->bias, ml[j]->bias));
        }
    }
    tensor *q, *k, *v, *lens = NULL, *out_m, *out_h, *attn;
    q = normal_tensor(SHAPE(c->B, c->Lq, c->D), r, 2);
    k = normal_tensor(SHAPE(c->B, c->Lk, c->D), r, 2);
    v = normal_tensor(SHAPE(c->B, c->Lk, c->D), r, 1);
    if (c->lens == 1)
        OK(tensor_alloc(SHAPE(c->B), &lens));
    else if (c->lens == 2)
        OK(tensor_alloc(SHAPE(c->B, c->Lq), &lens));
    if (lens)
        for (size_t i = 0; i < tensor_numel(lens); i++)
            lens->data[i] = (double)(1 + (i * 5 + 2) % c->Lk);
    tensor *w_m; // (B, h, Lq, Lk)
    OK(multihead_forward(&mh, q, k, v, lens, &out_m, &w_m));
    OK(headmajor_forward(&hm, q, k, v, lens, &out_h, &attn));
    double err = rel_error(out_h, out_m);
    cr_assert(err <= 1e-12, "outputs differ by %g", err);
    tensor *swapped;
    OK(tensor_permute(attn, SHAPE(1, 0, 2, 3), &swapped));
    err = rel_error(swapped, w_m);
    tensor_free(w_m);
    cr_assert(err <= 1e-12, "weights differ by %g", err);
    multihead_free(&mh);
    headmajor_free(&hm);
    FREE_ALL(q, k, v, lens, out_m, out_h, attn, swapped);
    gsl_rng_free(r);
}

/* Where they part: valid_len 0 is a uniform row for multihead and an
 * error here; residual + LayerNorm change the output (to per-position
 * mean 0 and variance just under 1). */
Test(head_major, differs_from_multihead)
{
    gsl_rng *r = mha_rng_new(31);
    multihead mh;
    multihead_config mcfg = {.query_size = 8, .key_size = 8, .value_size = 8,
                             .num_hiddens = 8, .num_heads = 2};
    OK(multihead_init(&mh, &mcfg));
    multihead_reset_xavier(&mh, r);
    headmajor hm;
    headmajor_config hcfg = {2, 8, 4, 4, 0};
    OK(headmajor_init(&hm, &hcfg));
    OK(tensor_copy_into(hm.w_qs.weight, mh.W_q.weight));
    OK(tensor_copy_into(hm.w_ks.weight, mh.W_k.weight));
    OK(tensor_copy_into(hm.w_vs.weight, mh.W_v.weight));
    OK(tensor_copy_into(hm.fc.weight, mh.W_o.weight));
    tensor *x, *lens, *out_m, *out_h = (tensor *)1, *attn = (tensor *)1;
    x = normal_tensor(SHAPE(2, 3, 8), r, 1);
    OK(tensor_from_array(SHAPE(2), (double[]){2, 0}, &lens));
    tensor *w_m;
    OK(multihead_forward(&mh, x, x, x, lens, &out_m, &w_m));
    for (size_t t = 0; t < 3; t++)
        cr_assert_float_eq(*TENSOR_AT(w_m, 1, 0, 0, t), 1.0 / 3, 1e-15);
    tensor_free(w_m);
    FAILS(headmajor_forward(&hm, x, x, x, lens, &out_h, &attn), GSL_EINVAL,
          "headmajor_forward: valid_lens[1] = 0 masks every key: softmax of a "
          "row of -inf is 0/0 = NaN (masked_softmax would give each key 1/3) "
          "(q (2, 3, 8), k (2, 3, 8), valid_lens (2,))");
    cr_assert_null(out_h);
    cr_assert_null(attn);
    tensor_free(out_m);

    /* residual + LayerNorm on (the default) */
    lens->data[1] = 3;
    OK(multihead_forward(&mh, x, x, x, lens, &out_m, NULL));
    OK(headmajor_forward(&hm, x, x, x, lens, &out_h, NULL));
    cr_assert_gt(rel_error(out_h, out_m), 0.1);
    for (size_t b = 0; b < 2; b++)
        for (size_t l = 0; l < 3; l++) {
            double mean = 0, var = 0, raw = 0, rmean = 0;
            for (size_t j = 0; j < 8; j++) {
                mean += *TENSOR_AT(out_h, b, l, j) / 8;
                rmean += (*TENSOR_AT(out_m, b, l, j) + *TENSOR_AT(x, b, l, j)) / 8;
            }
            for (size_t j = 0; j < 8; j++) {
                var += pow(*TENSOR_AT(out_h, b, l, j) - mean, 2) / 8;
                raw += pow(*TENSOR_AT(out_m, b, l, j) + *TENSOR_AT(x, b, l, j) -
                               rmean, 2) / 8;
            }
            cr_assert(fabs(mean) < 1e-14, "mean %g", mean);
            /* LayerNorm of (multihead's output + x): var/(var + eps) */
            cr_assert(fabs(var - raw / (raw + 1e-5)) < 1e-13, "var %.17g", var);
        }
    multihead_free(&mh);
    headmajor_free(&hm);
    FREE_ALL(x, lens, out_m, out_h);
    gsl_rng_free(r);
}

/* --- the rearranges ------------------------------------------------- */

/* x[b, l, i*d + j] is qh[i, b, l, j]; split and join are views, and join
 * after split gives x back in x's own buffer. */
Test(head_major, split_and_join_are_views)
{
    tensor *x = arange(SHAPE(2, 3, 12)), *heads, *back, *packed, *joined;
    OK(headmajor_split_heads(x, 4, &heads));
    assert_shape(heads, SHAPE(4, 2, 3, 3));
    /* strides (d, L*h*d, h*d, 1): the head-major layout */
    assert_strides(heads, SHAPE(3, 36, 12, 1));
    cr_assert(tensor_shares_buffer(heads, x));
    for (size_t i = 0; i < 4; i++)
        for (size_t b = 0; b < 2; b++)
            for (size_t l = 0; l < 3; l++)
                for (size_t j = 0; j < 3; j++)
                    cr_assert_eq(*TENSOR_AT(heads, i, b, l, j),
                                 *TENSOR_AT(x, b, l, i * 3 + j));
    OK(headmajor_join_heads(heads, &back));
    cr_assert(tensor_shares_buffer(back, x));
    cr_assert_eq(rel_error(back, x), 0.0);
    /* a head-major tensor that is contiguous as (h, B, L, d): the join's
     * reshape has to copy */
    OK(tensor_contiguous(heads, &packed));
    OK(headmajor_join_heads(packed, &joined));
    cr_assert(!tensor_shares_buffer(joined, packed));
    cr_assert_eq(rel_error(joined, x), 0.0);
    FREE_ALL(x, heads, back, packed, joined);
}

/* headmajor_join_heads as a split_refusal calls it (it takes no head
 * count). */
static int join_heads(const tensor *x, size_t heads, tensor **out)
{
    (void)heads;
    return headmajor_join_heads(x, out);
}

Test(head_major, split_join_errors)
{
    static const split_refusal cases[] = {
        {headmajor_split_heads, 3, {1, 2, 16}, 3, GSL_EBADLEN,
         "headmajor_split_heads: last size 16 of shape (1, 2, 16) is not "
         "divisible by n_head 3"},
        {headmajor_split_heads, 3, {1, 2, 16}, 0, GSL_EINVAL,
         "headmajor_split_heads: n_head is 0 (input (1, 2, 16))"},
        {headmajor_split_heads, 2, {2, 16}, 2, GSL_EINVAL,
         "headmajor_split_heads: input shape (2, 16) has 2 dimensions, "
         "expected 3 (B, L, h*d)"},
        {join_heads, 3, {1, 2, 16}, 0, GSL_EINVAL,
         "headmajor_join_heads: input shape (1, 2, 16) has 3 dimensions, "
         "expected 4 (h, B, L, d)"},
    };
    splits_refused(cases, sizeof cases / sizeof cases[0]);
}

/* --- initialisation -------------------------------------------------- */

static void sample_stats(const tensor *t, double *mean, double *sd,
                         double *maxabs)
{
    size_t n = tensor_numel(t);
    double s = 0, ss = 0, mx = 0;
    for (size_t e = 0; e < n; e++)
        s += t->data[e];
    s /= n;
    for (size_t e = 0; e < n; e++) {
        ss += (t->data[e] - s) * (t->data[e] - s);
        mx = fabs(t->data[e]) > mx ? fabs(t->data[e]) : mx;
    }
    *mean = s;
    *sd = sqrt(ss / (n - 1));
    *maxabs = mx;
}

/* d_model 512, h 8, d_k 64, d_v 32: each weight has 131072 to 262144
 * draws, so the sample std lands within 1% of its target (its own
 * standard error is about 0.2%); biases fill U(-a, a). */
Test(head_major, init_statistics)
{
    gsl_rng *r = mha_rng_new(2024);
    headmajor m;
    headmajor_config cfg = {8, 512, 64, 32, 0.1};
    OK(headmajor_init(&m, &cfg));
    /* before the reset everything is zero but gamma */
    cr_assert_eq(m.w_qs.weight->data[0], 0.0);
    headmajor_reset(&m, r);
    double qk = sqrt(2.0 / (512 + 64)), vs = sqrt(2.0 / (512 + 32));
    double fc = sqrt(2.0 / (8 * 32 + 512));
    cr_assert_float_eq(headmajor_std_qk(&cfg), qk, 1e-16);
    cr_assert_float_eq(headmajor_std_v(&cfg), vs, 1e-16);
    cr_assert_float_eq(headmajor_std_fc(&cfg), fc, 1e-16);
    struct {
        linear *l;
        double std;
        size_t rows, cols;
    } layers[] = {{&m.w_qs, qk, 512, 512},
                  {&m.w_ks, qk, 512, 512},
                  {&m.w_vs, vs, 256, 512},
                  {&m.fc, fc, 512, 256}};
    for (size_t j = 0; j < 4; j++) {
        linear *l = layers[j].l;
        cr_assert_eq(l->weight->shape[0], layers[j].rows);
        cr_assert_eq(l->weight->shape[1], layers[j].cols);
        double mean, sd, mx;
        sample_stats(l->weight, &mean, &sd, &mx);
        cr_assert(fabs(sd / layers[j].std - 1) < 0.01, "%s: std %g, target %g",
                  l->name, sd, layers[j].std);
        cr_assert(fabs(mean) < 0.01 * layers[j].std, "%s: mean %g", l->name,
                  mean);
        double a = 1.0 / sqrt((double)l->in_features);
        sample_stats(l->bias, &mean, &sd, &mx);
        cr_assert(mx <= a, "%s: bias %g outside +-%g", l->name, mx, a);
        cr_assert(mx > 0.95 * a, "%s: biases reach only %g of %g", l->name, mx, a);
        /* U(-a, a) has sd a/sqrt(3); 256-512 draws: within 10% */
        cr_assert(fabs(sd / (a / sqrt(3.0)) - 1) < 0.1, "%s: bias sd %g",
                  l->name, sd);
    }
    /* the four layers drew different numbers */
    cr_assert_neq(m.w_qs.weight->data[0], m.w_ks.weight->data[0]);
    for (size_t j = 0; j < 512; j++) {
        cr_assert_eq(m.layer_norm.gamma->data[j], 1.0);
        cr_assert_eq(m.layer_norm.beta->data[j], 0.0);
    }
    cr_assert_eq(m.layer_norm.eps, 1e-5);
    cr_assert_eq(m.residual_norm, 1);
    cr_assert_eq(m.training, 0);
    headmajor_free(&m);
    gsl_rng_free(r);
}

/* --- dropout --------------------------------------------------------- */

/* Evaluation mode draws nothing; training zeroes what the seeded rng's
 * draws below p say and scales the rest by 1/(1 - p), exactly. */
Test(head_major, dropout_train_and_eval)
{
    gsl_rng *r = mha_rng_new(9);
    headmajor m;
    make_headmajor(&m, (headmajor_config){4, 32, 8, 8, 0.25}, r);
    m.residual_norm = 0;
    tensor *x, *eval, *eval2, *train, *attn_e, *attn_t;
    x = normal_tensor(SHAPE(3, 20, 32), r, 1);

    gsl_rng *drop = mha_rng_new(77), *replay = mha_rng_new(77);
    headmajor_train(&m, 0, drop);
    OK(headmajor_forward(&m, x, x, x, NULL, &eval, &attn_e));
    cr_assert_eq(gsl_rng_get(drop), gsl_rng_get(replay),
                 "evaluation mode drew random numbers");
    gsl_rng_set(drop, 77);
    gsl_rng_set(replay, 77);

    headmajor_train(&m, 1, drop);
    OK(headmajor_forward(&m, x, x, x, NULL, &train, &attn_t));
    cr_assert_eq(rel_error(attn_t, attn_e), 0.0, "dropout is on fc's output");
    size_t n = tensor_numel(eval), zeros = 0;
    for (size_t e = 0; e < n; e++) {
        double want = gsl_rng_uniform(replay) < 0.25 ? 0.0
                                                       : eval->data[e] / 0.75;
        cr_assert_eq(train->data[e], want, "element %zu", e);
        zeros += train->data[e] == 0.0;
    }
    /* 1920 draws: the share of zeros is 0.25 +- 0.01 (one sd) */
    cr_assert(fabs((double)zeros / n - 0.25) < 0.04, "%zu zeros of %zu", zeros, n);

    /* the same seed gives the same dropout; evaluation again gives eval */
    tensor *train2;
    gsl_rng_set(drop, 77);
    OK(headmajor_forward(&m, x, x, x, NULL, &train2, NULL));
    cr_assert_eq(rel_error(train2, train), 0.0);
    headmajor_train(&m, 0, NULL);
    OK(headmajor_forward(&m, x, x, x, NULL, &eval2, NULL));
    cr_assert_eq(rel_error(eval2, eval), 0.0);

    /* with residual + LayerNorm the dropped-out fc output is what is
     * normalised: training changes the output there too */
    tensor *normed_e, *normed_t;
    m.residual_norm = 1;
    OK(headmajor_forward(&m, x, x, x, NULL, &normed_e, NULL));
    headmajor_train(&m, 1, drop);
    OK(headmajor_forward(&m, x, x, x, NULL, &normed_t, NULL));
    cr_assert_gt(rel_error(normed_t, normed_e), 0.01);

    headmajor_free(&m);
    FREE_ALL(x, eval, eval2, train, train2, attn_e, attn_t, normed_e,
             normed_t);
    gsl_rng_free(r);
    gsl_rng_free(drop);
    gsl_rng_free(replay);
}

/* --- the trace ------------------------------------------------------- */

Test(head_major, trace_of_a_small_call)
{
    headmajor m;
    headmajor_config cfg = {2, 4, 2, 3, 0.5};
    OK(headmajor_init(&m, &cfg));
    gsl_rng *drop = mha_rng_new(1);
    headmajor_train(&m, 1, drop);
    tensor *q, *k, *lens, *out, *attn;
    OK(tensor_alloc(SHAPE(1, 2, 4), &q));
    OK(tensor_alloc(SHAPE(1, 3, 4), &k));
    OK(tensor_from_array(SHAPE(1, 2), (double[]){2, 3}, &lens));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(headmajor_forward(&m, q, k, k, lens, &out, &attn));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
        "headmajor(h=2)                 q (1, 2, 4), k (1, 3, 4), v (1, 3, 4)\n"
        "  w_qs: x W^T + b        new   (1, 2, 4) -> (1, 2, 4)              (B, Lq, h*d_k)\n"
        "  rearrange(b l (head k) -> head b l k)       (1, 2, 4)                           (B, Lq, h*d_k)\n"
        "    reshape(1, 2, 2, -1) view  (1, 2, 4) -> (1, 2, 2, 2)           (B, Lq, h, d_k)\n"
        "    permute(2, 0, 1, 3)  view  (1, 2, 2, 2) -> (2, 1, 2, 2)        (h, B, Lq, d_k)\n"
        "  w_ks: x W^T + b        new   (1, 3, 4) -> (1, 3, 4)              (B, Lk, h*d_k)\n"
        "  rearrange(b t (head k) -> head b t k)       (1, 3, 4)                           (B, Lk, h*d_k)\n"
        "    reshape(1, 3, 2, -1) view  (1, 3, 4) -> (1, 3, 2, 2)           (B, Lk, h, d_k)\n"
        "    permute(2, 0, 1, 3)  view  (1, 3, 2, 2) -> (2, 1, 3, 2)        (h, B, Lk, d_k)\n"
        "  w_vs: x W^T + b        new   (1, 3, 4) -> (1, 3, 6)              (B, Lk, h*d_v)\n"
        "  rearrange(b t (head v) -> head b t v)       (1, 3, 6)                           (B, Lk, h*d_v)\n"
        "    reshape(1, 3, 2, -1) view  (1, 3, 6) -> (1, 3, 2, 3)           (B, Lk, h, d_v)\n"
        "    permute(2, 0, 1, 3)  view  (1, 3, 2, 3) -> (2, 1, 3, 3)        (h, B, Lk, d_v)\n"
        "  einsum(hblk,hbtk->hblt)/sqrt(2) new   (2, 1, 2, 2), (2, 1, 3, 2) -> (2, 1, 2, 3)  (h, B, Lq, Lk)\n"
        "  mask(valid_lens)       new   (1, 2) -> (1, 2, 3)                 (B, Lq, Lk)\n"
        "  masked_fill_(mask[None], -inf) new   (2, 1, 2, 3) -> (2, 1, 2, 3)        (h, B, Lq, Lk)\n"
        "  softmax(dim=-1)        new   (2, 1, 2, 3) -> (2, 1, 2, 3)        (h, B, Lq, Lk)\n"
        "  einsum(hblt,hbtv->hblv) new   (2, 1, 2, 3), (2, 1, 3, 3) -> (2, 1, 2, 3)  (h, B, Lq, d_v)\n"
        "  # written into a buffer (1, 2, 2, 3) laid out (B, Lq, h, d_v)\n"
        "  rearrange(head b l v -> b l (head v))       (2, 1, 2, 3)                        (h, B, Lq, d_v)\n"
        "    permute(1, 2, 0, 3)  view  (2, 1, 2, 3) -> (1, 2, 2, 3)        (B, Lq, h, d_v)\n"
        "    reshape(1, 2, -1)    view  (1, 2, 2, 3) -> (1, 2, 6)           (B, Lq, h*d_v)\n"
        "  fc: x W^T + b          new   (1, 2, 6) -> (1, 2, 4)              (B, Lq, d_model)\n"
        "  dropout_(p=0.5)        new   (1, 2, 4) -> (1, 2, 4)              (B, Lq, d_model)\n"
        "  add_(residual)         new   (1, 2, 4) + (1, 2, 4) -> (1, 2, 4)  (B, Lq, d_model)\n"
        "  layer_norm(eps=1e-05)  new   (1, 2, 4) -> (1, 2, 4)              (B, Lq, d_model)\n");
    capture_free(&c);
    /* without the mask and with residual_norm off, those lines go */
    m.residual_norm = 0;
    headmajor_train(&m, 0, NULL);
    tensor *out2;
    capture_start(&c);
    trace_to(c.f);
    OK(headmajor_forward(&m, q, k, k, NULL, &out2, NULL));
    trace_to(NULL);
    const char *text = capture_end(&c);
    cr_assert_null(strstr(text, "mask"));
    cr_assert_null(strstr(text, "dropout"));
    cr_assert_null(strstr(text, "layer_norm"));
    cr_assert_null(strstr(text, "add_"));
    cr_assert_not_null(strstr(text, "  fc: x W^T + b"));
    capture_free(&c);
    headmajor_free(&m);
    FREE_ALL(q, k, lens, out, out2, attn);
    gsl_rng_free(drop);
}

/* --- errors ---------------------------------------------------------- */

Test(head_major, config_errors)
{
    static const struct {
        headmajor_config cfg; /* n_head, d_model, d_k, d_v, dropout */
        int status;
        const char *message;
    } refused[] = {
        {{0, 8, 2, 2, 0.1}, GSL_EINVAL,
         "headmajor_init: sizes must be >= 1 (n_head 0, d_model 8, d_k 2, "
         "d_v 2)"},
        {{2, 8, 2, 0, 0.1}, GSL_EINVAL,
         "headmajor_init: sizes must be >= 1 (n_head 2, d_model 8, d_k 2, "
         "d_v 0)"},
        {{2, 8, 2, 2, 1}, GSL_EINVAL,
         "headmajor_init: dropout 1 is outside [0, 1)"},
        {{2, 8, 2, 2, -0.1}, GSL_EINVAL,
         "headmajor_init: dropout -0.1 is outside [0, 1)"},
        {{2, 8, SIZE_MAX / 2 + 1, 2, 0}, GSL_EOVRFLW,
         "headmajor_init: size 2 x 9223372036854775808 overflows size_t"},
    };
    headmajor m;
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
        FAILS(headmajor_init(&m, &refused[i].cfg), refused[i].status,
              refused[i].message);
    cr_assert_null(m.w_qs.weight);
}

/* Inputs the module (d_model 6) refuses: the shapes of q, k (ndim 0:
 * NULL) and v, and valid lengths of lens_dims dimensions (0: none). */
Test(head_major, input_errors)
{
    static const struct {
        size_t q_ndim, q[3], k_ndim, k[3], v[3];
        size_t lens_dims, lens_shape[2];
        double lens[6];
        int status;
        const char *message;
    } cases[] = {
        {3, {2, 3, 5}, 3, {2, 4, 6}, {2, 4, 6}, 0, {0}, {0}, GSL_EBADLEN,
         "headmajor_forward: q, k and v must end in d_model = 6 features "
         "(q (2, 3, 5), k (2, 4, 6), v (2, 4, 6))"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 5, 6}, 0, {0}, {0}, GSL_EBADLEN,
         "headmajor_forward: k has Lk = 4 but v has Lk = 5 (q (2, 3, 6), "
         "k (2, 4, 6), v (2, 5, 6))"},
        {3, {2, 3, 6}, 3, {3, 4, 6}, {3, 4, 6}, 0, {0}, {0}, GSL_EBADLEN,
         "headmajor_forward: batch sizes differ (q (2, 3, 6), k (3, 4, 6), "
         "v (3, 4, 6))"},
        {2, {2, 6}, 3, {2, 4, 6}, {2, 4, 6}, 0, {0}, {0}, GSL_EBADLEN,
         "headmajor_forward: q, k and v must be 3-D (B, L, d_model), got "
         "q (2, 6), k (2, 4, 6), v (2, 4, 6)"},
        {3, {2, 3, 6}, 0, {0}, {2, 4, 6}, 0, {0}, {0}, GSL_EINVAL,
         "headmajor_forward: k is NULL"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 4, 6}, 1, {3}, {1, 2, 3}, GSL_EBADLEN,
         "headmajor_forward: valid_lens has shape (3,), expected (2,) or "
         "(2, 3) (q (2, 3, 6), k (2, 4, 6))"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 4, 6}, 1, {2}, {1, 5}, GSL_EINVAL,
         "headmajor_forward: valid_lens[1] = 5 is larger than the number of "
         "keys 4 (q (2, 3, 6), k (2, 4, 6), valid_lens (2,))"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 4, 6}, 1, {2}, {1, 1.5}, GSL_EINVAL,
         "headmajor_forward: valid_lens[1] = 1.5 is not a whole number "
         "(q (2, 3, 6), k (2, 4, 6), valid_lens (2,))"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 4, 6}, 1, {2}, {0, 1}, GSL_EINVAL,
         "headmajor_forward: valid_lens[0] = 0 masks every key: softmax of a "
         "row of -inf is 0/0 = NaN (masked_softmax would give each key 1/4) "
         "(q (2, 3, 6), k (2, 4, 6), valid_lens (2,))"},
        {3, {2, 3, 6}, 3, {2, 4, 6}, {2, 4, 6}, 2, {2, 3},
         {1, 2, 3, 4, 0, 1}, GSL_EINVAL,
         "headmajor_forward: valid_lens[1, 1] = 0 masks every key: softmax "
         "of a row of -inf is 0/0 = NaN (masked_softmax would give each key "
         "1/4) (q (2, 3, 6), k (2, 4, 6), valid_lens (2, 3))"},
    };
    headmajor m;
    headmajor_config cfg = {2, 6, 3, 2, 0.1};
    OK(headmajor_init(&m, &cfg));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *q = zeros(cases[c].q_ndim, cases[c].q);
        tensor *k = zeros(cases[c].k_ndim, cases[c].k), *v = zeros(3, cases[c].v);
        tensor *lens = zeros(cases[c].lens_dims, cases[c].lens_shape);
        for (size_t i = 0; lens && i < tensor_numel(lens); i++)
            lens->data[i] = cases[c].lens[i];
        tensor *out = (tensor *)1, *attn = (tensor *)1;
        FAILS(headmajor_forward(&m, q, k, v, lens, &out, &attn),
              cases[c].status, cases[c].message);
        cr_assert_null(out, "case %zu left its output set", c);
        cr_assert_null(attn, "case %zu left its weights set", c);
        FREE_ALL(q, k, v, lens);
    }
    /* the module's own state */
    tensor *q = zeros(SHAPE(2, 3, 6)), *k = zeros(SHAPE(2, 4, 6));
    tensor *v = zeros(SHAPE(2, 4, 6));
    tensor *out = (tensor *)1, *attn = (tensor *)1;
    headmajor_train(&m, 1, NULL);
    FAILS(headmajor_forward(&m, q, k, v, NULL, &out, &attn), GSL_EINVAL,
          "headmajor_forward: training with dropout 0.1 needs a random "
          "generator (rng is NULL)");
    m.cfg.dropout = 2;
    FAILS(headmajor_forward(&m, q, k, v, NULL, &out, &attn), GSL_EINVAL,
          "headmajor_forward: dropout 2 is outside [0, 1)");
    cr_assert_null(out);
    cr_assert_null(attn);
    /* a layer replaced by one of the wrong shape is caught by the layer */
    m.cfg.dropout = 0;
    tensor_free(m.fc.weight);
    OK(tensor_alloc(SHAPE(6, 5), &m.fc.weight));
    FAILS(headmajor_forward(&m, q, k, v, NULL, &out, &attn), GSL_EBADLEN,
          "linear_forward fc: weight has shape (6, 5), expected (6, 4)");
    cr_assert_null(out);
    cr_assert_null(attn);
    headmajor_free(&m);
    FREE_ALL(q, k, v);
}

/* --- allocation failures --------------------------------------------- */

/* Every allocation of init and of a forward pass (mask, dropout and
 * LayerNorm included) may fail: GSL_ENOMEM, NULL outputs, no leak. */
Test(head_major, allocation_failures)
{
    headmajor m;
    headmajor_config cfg = {2, 4, 3, 2, 0.5};
    int failures = 0;
    EACH_ALLOCATION_FAILS(failures,
        headmajor_init(&m, &cfg),
        cr_assert_null(m.w_qs.weight);
        cr_assert_null(m.fc.bias);
        cr_assert_null(m.layer_norm.gamma));
    cr_assert_eq(failures, 30); /* 10 tensors of 3 allocations each */
    gsl_rng *r = mha_rng_new(3);
    headmajor_reset(&m, r);
    headmajor_train(&m, 1, r);
    tensor *q, *lens, *out, *attn;
    q = normal_tensor(SHAPE(2, 3, 4), r, 1);
    OK(tensor_from_array(SHAPE(2), (double[]){1, 3}, &lens));
    EACH_ALLOCATION_FAILS(failures,
        headmajor_forward(&m, q, q, q, lens, &out, &attn),
        cr_assert_null(out);
        cr_assert_null(attn));
    cr_assert_gt(failures, 30);
    FREE_ALL(out, attn);
    headmajor_free(&m);
    FREE_ALL(q, lens);
    gsl_rng_free(r);
}
//<
