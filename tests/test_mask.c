//> 18
/* test_mask.c: mask.h, PyTorch's masks as one additive mask and the
 * module that reads them.
 *
 * The conversions are checked entry by entry; the module against chapter
 * 08's multihead_forward where both apply (valid_lens, causal, grouped
 * heads), and against a plain-loop reference written here, independently
 * of mask.c, for the masks, bias_kv, the zero key and averaged weights:
 * the scores of every (example, head, query, key) with the extra keys and
 * the mask's sum added, a softmax over the finite ones, the weighted
 * values, W_o. */
#include "check.h"

Test(mask, from_bool_in_both_polarities)
{
    tensor *m, *a;
    OK(tensor_from_array(SHAPE(2, 2), (double[]){0, 1, 1, 0}, &m));
    OK(mask_from_bool(m, 1, &a)); // True = may not attend
    double want_mha[] = {0, -INFINITY, -INFINITY, 0};
    for (size_t e = 0; e < 4; e++)
        cr_assert_eq(a->data[e], want_mha[e]);
    tensor_free(a);
    OK(mask_from_bool(m, 0, &a)); // True = may attend
    double want_sdpa[] = {-INFINITY, 0, 0, -INFINITY};
    for (size_t e = 0; e < 4; e++)
        cr_assert_eq(a->data[e], want_sdpa[e]);
    tensor_free(a);
    m->data[3] = 0.5;
    FAILS(mask_from_bool(m, 1, &a), GSL_EINVAL,
          "mask_from_bool: element 3 of the mask (2, 2) is 0.5; a bool mask "
          "holds 0 and 1");
    cr_assert_null(a);
    tensor_free(m);
}

Test(mask, key_padding_from_lens)
{
    tensor *lens, *kpm;
    OK(tensor_from_array(SHAPE(3), (double[]){3, 0, 4}, &lens));
    OK(mask_key_padding_from_lens(lens, 4, &kpm));
    cr_assert_eq(kpm->ndim, 2);
    double want[] = {0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0};
    for (size_t e = 0; e < 12; e++)
        cr_assert_eq(kpm->data[e], want[e], "entry %zu", e);
    tensor_free(kpm);
    FAILS(mask_key_padding_from_lens(lens, 3, &kpm), GSL_EINVAL,
          "mask_key_padding_from_lens: valid_lens[2] = 4 is not a whole "
          "number from 0 to Lk = 3");
    tensor_free(lens);
}

/* attn_mask (Lq, Lk) broadcast over B*h rows plus key_padding (B, Lk)
 * broadcast over heads and queries; and a (B*h, Lq, Lk) attn_mask as is. */
Test(mask, merge_adds_with_broadcasting)
{
    size_t B = 2, h = 3, Lq = 2, Lk = 3;
    tensor *am = arange(SHAPE(Lq, Lk)), *kp, *m; // am[i][j] = 3i + j
    OK(tensor_alloc(SHAPE(B, Lk), &kp));
    tensor_fill_arange(kp, 0, 10); // kp[b][j] = 10(3b + j)
    OK(mask_merge(am, kp, B, h, Lq, Lk, &m));
    cr_assert_eq(m->shape[0], B * h);
    for (size_t n = 0; n < B * h; n++)
        for (size_t i = 0; i < Lq; i++)
            for (size_t j = 0; j < Lk; j++)
                cr_assert_eq(*TENSOR_AT(m, n, i, j),
                             (double)(3 * i + j) + 10.0 * (double)(3 * (n / h) + j));
    tensor_free(m);
    tensor *am3 = arange(SHAPE(B * h, Lq, Lk));
    OK(mask_merge(am3, NULL, B, h, Lq, Lk, &m));
    for (size_t e = 0; e < B * h * Lq * Lk; e++)
        cr_assert_eq(m->data[e], (double)e);
    tensor_free(m);
    OK(mask_merge(NULL, NULL, B, h, Lq, Lk, &m)); // nothing hidden
    for (size_t e = 0; e < B * h * Lq * Lk; e++)
        cr_assert_eq(m->data[e], 0.0);
    FREE_ALL(m, am, kp, am3);
}

Test(mask, merge_refuses_shapes_that_do_not_fit)
{
    tensor *am, *kp, *m;
    OK(tensor_alloc(SHAPE(3, 2), &am));
    OK(tensor_alloc(SHAPE(2, 4), &kp));
    FAILS(mask_merge(am, NULL, 2, 1, 2, 3, &m), GSL_EBADLEN,
          "mask_merge: attn_mask (3, 2) must be (Lq, Lk) = (2, 3) or (B*h, "
          "Lq, Lk) = (2, 2, 3)");
    FAILS(mask_merge(NULL, kp, 2, 1, 2, 3, &m), GSL_EBADLEN,
          "mask_merge: key_padding_mask (2, 4) must be (B, Lk) = (2, 3)");
    FREE_ALL(am, kp);
}

Test(mask, grow_adds_a_visible_key_and_empty_rows_are_found)
{
    tensor *m, *g;
    OK(tensor_from_array(SHAPE(2, 1, 2),
                         (double[]){0, -INFINITY, -INFINITY, -INFINITY}, &m));
    size_t n = 9, i = 9;
    cr_assert_eq(mask_find_empty_row(m, &n, &i), 1);
    cr_assert_eq(n, 1);
    cr_assert_eq(i, 0);
    OK(mask_grow(m, "add_zero_attn", &g));
    cr_assert_eq(g->shape[2], 3);
    double want[] = {0, -INFINITY, 0, -INFINITY, -INFINITY, 0};
    for (size_t e = 0; e < 6; e++)
        cr_assert_eq(g->data[e], want[e]);
    cr_assert_eq(mask_find_empty_row(g, &n, &i), 0);
    FREE_ALL(m, g);
}

/* --- the module ------------------------------------------------------ */

enum { NB = 2, NQ = 3, NK = 5, NH = 4, NP = 2, ND = NH * NP };

static void random_module(multihead *m, size_t kv_heads, int causal,
                          gsl_rng *r)
{
    multihead_config cfg = {.query_size = 3, .key_size = 4, .value_size = 5,
                            .num_hiddens = ND, .num_heads = NH, .bias = 1,
                            .out_size = 6, .kv_heads = kv_heads,
                            .causal = causal & 1, .rope = (causal & 2) != 0};
    OK(multihead_init(m, &cfg));
    multihead_reset_xavier(m, r);
    random_biases(m, r);
}

/* y (rows, out) = x (rows, in) W^T + b, plain loops */
static void plain_linear(const linear *l, const double *x, size_t rows,
                         double *y)
{
    for (size_t r = 0; r < rows; r++)
        linear_by_dots(l, x + r * l->in_features, y + r * l->out_features);
}

/* The module by plain loops: mask (B*h, Lq, Lk') already holds every
 * hidden entry; bias_k/bias_v (G*p each) or NULL; zero: a zero key last. */
static void reference(const multihead *m, const tensor *q, const tensor *k,
                      const tensor *v, const double *mask, const double *bias_k,
                      const double *bias_v, int zero, double *out, double *w)
{
    size_t h = NH, G = m->cfg.kv_heads, p = NP;
    size_t Lk = k->shape[1], Lk2 = Lk + (bias_k != NULL) + (zero != 0);
    double Q[NB * NQ * ND], K[NB * NK * ND], V[NB * NK * ND];
    double heads[NB * NQ * ND];
    plain_linear(&m->W_q, q->data, NB * NQ, Q);
    plain_linear(&m->W_k, k->data, NB * Lk, K);
    plain_linear(&m->W_v, v->data, NB * Lk, V);
    size_t kv_of[NH]; // query head -> its key-value head: h/G heads a group
    for (size_t g = 0, i = 0; g < G; g++)
        for (size_t r = 0; r < h / G; r++)
            kv_of[i++] = g;
    for (size_t b = 0; b < NB; b++)
        for (size_t i = 0; i < h; i++) {
            size_t g = kv_of[i]; // the key-value head of query head i
            for (size_t t = 0; t < NQ; t++) {
                double *row = w + ((b * h + i) * NQ + t) * Lk2, max = -INFINITY;
                for (size_t j = 0; j < Lk2; j++) {
                    double key[NP] = {0};
                    for (size_t f = 0; f < p; f++)
                        key[f] = j < Lk ? K[(b * Lk + j) * G * p + g * p + f]
                                 : j == Lk && bias_k ? bias_k[g * p + f]
                                                     : 0;
                    double s = 0;
                    for (size_t f = 0; f < p; f++)
                        s += Q[(b * NQ + t) * ND + i * p + f] * key[f];
                    row[j] = s / sqrt((double)p) +
                             mask[((b * h + i) * NQ + t) * Lk2 + j];
                    max = fmax(max, row[j]);
                }
                double sum = 0;
                for (size_t j = 0; j < Lk2; j++)
                    sum += row[j] = isinf(row[j]) ? 0 : exp(row[j] - max);
                for (size_t f = 0; f < p; f++)
                    heads[(b * NQ + t) * ND + i * p + f] = 0;
                for (size_t j = 0; j < Lk2; j++) {
                    row[j] /= sum;
                    for (size_t f = 0; f < p; f++) {
                        double val = j < Lk ? V[(b * Lk + j) * G * p + g * p + f]
                                     : j == Lk && bias_v ? bias_v[g * p + f]
                                                         : 0;
                        heads[(b * NQ + t) * ND + i * p + f] += row[j] * val;
                    }
                }
            }
        }
    plain_linear(&m->W_o, heads, NB * NQ, out);
}

static void assert_near(const double *got, const double *want, size_t n,
                        double tol, const char *what)
{
    for (size_t e = 0; e < n; e++)
        cr_assert(fabs(got[e] - want[e]) <= tol, "%s[%zu]: %.17g, want %.17g",
                  what, e, got[e], want[e]);
}

/* valid_lens, causal, grouped heads and rope alone: chapter 08's module
 * (random_module's flag: 1 causal, 2 rope). */
Test(mask, module_equals_multihead_forward_where_both_apply)
{
    gsl_rng *r = mha_rng_new(18);
    tensor *q = normal_tensor(SHAPE(NB, NQ, 3), r, 1), *k = normal_tensor(SHAPE(NB, NK, 4), r, 1);
    tensor *v = normal_tensor(SHAPE(NB, NK, 5), r, 1), *lens;
    OK(tensor_from_array(SHAPE(NB, NQ), (double[]){5, 4, 3, 2, 1, 5}, &lens));
    size_t groups[] = {4, 2, 1};
    for (size_t c = 0; c < 12; c++) {
        multihead m;
        random_module(&m, groups[c % 3], (int)(c / 3), r);
        tensor *out, *w, *want, *want_w;
        mask_options opt = {.valid_lens = lens};
        OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
        OK(multihead_forward(&m, q, k, v, lens, &want, &want_w));
        assert_near(out->data, want->data, tensor_numel(want), 1e-12, "out");
        assert_near(w->data, want_w->data, tensor_numel(w), 1e-14, "A");
        FREE_ALL(out, w, want, want_w);
        multihead_free(&m);
    }
    FREE_ALL(q, k, v, lens);
    gsl_rng_free(r);
}

/* Every option at once against the plain loops above. */
Test(mask, module_equals_plain_loops_with_every_option)
{
    gsl_rng *r = mha_rng_new(29);
    tensor *q = normal_tensor(SHAPE(NB, NQ, 3), r, 1), *k = normal_tensor(SHAPE(NB, NK, 4), r, 1);
    tensor *v = normal_tensor(SHAPE(NB, NK, 5), r, 1);
    for (size_t c = 0; c < 8; c++) {
        size_t G = c % 2 ? 2 : 4;
        multihead m;
        random_module(&m, G, 0, r);
        int bias_kv = c & 2, zero = c & 4;
        size_t Lk2 = NK + (bias_kv != 0) + (zero != 0);
        tensor *am = normal_tensor(SHAPE(NQ, NK), r, 1), *kp, *bk = NULL, *bv = NULL;
        OK(tensor_from_array(SHAPE(NB, NK),
                             (double[]){0, -INFINITY, 0, 0, -INFINITY,
                                        -INFINITY, 0, -INFINITY, 0.5, 0},
                             &kp));
        am->data[1] = -INFINITY; // query 0 never sees key 1
        if (bias_kv) {
            bk = normal_tensor(SHAPE(1, 1, G * NP), r, 1);
            bv = normal_tensor(SHAPE(1, 1, G * NP), r, 1);
        }
        double mask[NB * NH * NQ * (NK + 2)];
        for (size_t n = 0; n < NB * NH; n++)
            for (size_t i = 0; i < NQ; i++)
                for (size_t j = 0; j < Lk2; j++)
                    mask[(n * NQ + i) * Lk2 + j] =
                        j < NK ? *TENSOR_AT(am, i, j) + *TENSOR_AT(kp, n / NH, j)
                               : 0;
        double want_out[NB * NQ * 6], want_w[NB * NH * NQ * (NK + 2)];
        reference(&m, q, k, v, mask, bk ? bk->data : NULL,
                  bv ? bv->data : NULL, zero, want_out, want_w);
        mask_options opt = {.attn_mask = am, .key_padding = kp, .bias_k = bk,
                            .bias_v = bv, .add_zero_attn = zero};
        tensor *out, *w;
        OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
        cr_assert_eq(w->shape[3], Lk2);
        assert_near(out->data, want_out, NB * NQ * 6, 1e-12, "out");
        assert_near(w->data, want_w, NB * NH * NQ * Lk2, 1e-14, "A");
        FREE_ALL(out, w);
        // averaged: the mean of the heads
        opt.average_weights = 1;
        OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
        cr_assert_eq(w->ndim, 3);
        for (size_t b = 0; b < NB; b++)
            for (size_t i = 0; i < NQ; i++)
                for (size_t j = 0; j < Lk2; j++) {
                    double mean = 0;
                    for (size_t hd = 0; hd < NH; hd++)
                        mean += want_w[((b * NH + hd) * NQ + i) * Lk2 + j] / NH;
                    cr_assert_float_eq(*TENSOR_AT(w, b, i, j), mean, 1e-14);
                }
        FREE_ALL(out, w, am, kp, bk, bv);
        multihead_free(&m);
    }
    FREE_ALL(q, k, v);
    gsl_rng_free(r);
}

Test(mask, an_empty_row_is_refused_before_any_product)
{
    gsl_rng *r = mha_rng_new(3);
    tensor *q = normal_tensor(SHAPE(NB, NQ, 3), r, 1), *k = normal_tensor(SHAPE(NB, NK, 4), r, 1);
    tensor *v = normal_tensor(SHAPE(NB, NK, 5), r, 1), *am;
    multihead m;
    random_module(&m, 4, 0, r);
    OK(tensor_alloc(SHAPE(NQ, NK), &am));
    tensor_fill(am, 0);
    for (size_t j = 0; j < NK; j++)
        *TENSOR_AT(am, 2, j) = -INFINITY;
    mask_options opt = {.attn_mask = am};
    tensor *out, *w;
    trace_log log;
    trace_log_start(&log);
    FAILS(multihead_forward_masked(&m, q, k, v, &opt, &out, &w), GSL_EDOM,
          "multihead_forward_masked: query 2 of example 0, head 0 sees no "
          "key: every entry of its row of the merged mask (8, 3, 5) is -inf "
          "(PyTorch's nn.MultiheadAttention gives NaN there)");
    trace_log_stop(&log);
    for (size_t i = 0; i < log.count; i++) // no projection was made
        cr_assert_null(strstr(log.records[i].op, "W_q"), "%s",
                       log.records[i].op);
    trace_log_free(&log);
    cr_assert_null(out);
    cr_assert_null(w);
    opt.add_zero_attn = 1; // the sink: the row gives it all its weight
    OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
    for (size_t n = 0; n < NB; n++)
        for (size_t hd = 0; hd < NH; hd++)
            cr_assert_eq(*TENSOR_AT(w, n, hd, 2, NK), 1.0);
    FREE_ALL(out, w, am, q, k, v);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* The causal rule with a key every query sees (add_zero_attn, or
 * add_bias_kv's bias_k): a row the rule and valid_lens leave with no key
 * of the input still sees the added one, as in PyTorch, and is not
 * refused.  Example 1 (valid length 0) gives the zero key all its
 * weight, so its output is W_o's bias; with bias_k, the learned key. */
Test(mask, causal_rows_left_with_the_added_key_alone_are_not_refused)
{
    gsl_rng *r = mha_rng_new(4);
    tensor *q = normal_tensor(SHAPE(NB, NQ, 3), r, 1), *k = normal_tensor(SHAPE(NB, NK, 4), r, 1);
    tensor *v = normal_tensor(SHAPE(NB, NK, 5), r, 1);
    tensor *lens = make(SHAPE(NB), (double[]){NK, 0});
    tensor *bk = normal_tensor(SHAPE(1, 1, ND), r, 1), *bv = normal_tensor(SHAPE(1, 1, ND), r, 1);
    multihead m;
    random_module(&m, NH, 1, r);
    mask_options opt = {.valid_lens = lens};
    tensor *out, *w;
    FAILS(multihead_forward_masked(&m, q, k, v, &opt, &out, &w), GSL_EINVAL,
          "multihead_forward_masked: multihead: causal: query 0 of example 1 "
          "sees no key (valid_len 0, Lq 3, Lk 5: query i sees key j only "
          "when j <= i + Lk - Lq)");
    opt.add_zero_attn = 1;
    OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
    for (size_t hd = 0; hd < NH; hd++)
        for (size_t i = 0; i < NQ; i++)
            cr_assert_eq(*TENSOR_AT(w, 1, hd, i, NK), 1.0);
    for (size_t i = 0; i < NQ; i++)
        for (size_t o = 0; o < 6; o++)
            cr_assert_eq(*TENSOR_AT(out, 1, i, o), *TENSOR_AT(m.W_o.bias, o));
    FREE_ALL(out, w);
    opt.add_zero_attn = 0;
    opt.bias_k = bk;
    opt.bias_v = bv;
    OK(multihead_forward_masked(&m, q, k, v, &opt, &out, &w));
    for (size_t hd = 0; hd < NH; hd++)
        for (size_t i = 0; i < NQ; i++)
            cr_assert_eq(*TENSOR_AT(w, 1, hd, i, NK), 1.0);
    FREE_ALL(out, w, lens, bk, bv, q, k, v);
    multihead_free(&m);
    gsl_rng_free(r);
}
//<
