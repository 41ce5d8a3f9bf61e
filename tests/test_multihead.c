//> 06
/* test_multihead.c: transpose_qkv, transpose_output, repeat_valid_lens and
 * the multi-head module, against index arithmetic and a plain-loop
 * implementation written here from the formulas (no BLAS, no reshape). */
#include "check.h"

#include <criterion/parameterized.h>
#include <float.h>
#include <limits.h>
#include <stdint.h>

/* --- transpose_qkv / transpose_output -------------------------------- */

struct split_case {
    size_t B, n, d, h;
};

static struct split_case split_cases[] = {
    {1, 2, 16, 8}, {2, 2, 16, 8}, {3, 4, 6, 3}, {2, 5, 100, 5},
    {1, 1, 4, 4},  {4, 3, 8, 1},  {2, 7, 12, 2}, {1, 3, 9, 3},
};

ParameterizedTestParameters(heads, transpose_index_map)
{
    return cr_make_param_array(struct split_case, split_cases,
                               sizeof split_cases / sizeof split_cases[0]);
}

/* x[b, i, j] lands at out[b*h + j/p, i, j % p], and back again. */
ParameterizedTest(struct split_case *c, heads, transpose_index_map)
{
    size_t p = c->d / c->h;
    tensor *x, *heads, *back;
    OK(tensor_alloc(SHAPE(c->B, c->n, c->d), &x));
    tensor_fill_arange(x, 1, 1);
    OK(transpose_qkv(x, c->h, &heads));
    assert_shape(heads, SHAPE(c->B * c->h, c->n, p));
    for (size_t b = 0; b < c->B; b++)
        for (size_t i = 0; i < c->n; i++)
            for (size_t j = 0; j < c->d; j++)
                cr_assert_eq(*TENSOR_AT(heads, b * c->h + j / p, i, j % p),
                             *TENSOR_AT(x, b, i, j), "(%zu, %zu, %zu)", b, i, j);
    OK(transpose_output(heads, c->h, &back));
    cr_assert(tensor_same_shape(back, x));
    cr_assert_eq(rel_error(back, x), 0.0);
    FREE_ALL(x, heads, back);
}

/* With B = 1 the whole split is views; with B > 1 the last reshape copies
 * (and h > 1: with one head the permute changes nothing that matters). */
Test(heads, transpose_qkv_views_and_copies)
{
    tensor *x1, *x2, *h1, *h2;
    OK(tensor_alloc(SHAPE(1, 2, 16), &x1));
    OK(tensor_alloc(SHAPE(2, 2, 16), &x2));
    OK(transpose_qkv(x1, 8, &h1));
    OK(transpose_qkv(x2, 8, &h2));
    cr_assert(tensor_shares_buffer(h1, x1));
    cr_assert(!tensor_shares_buffer(h2, x2));
    FREE_ALL(x1, x2, h1, h2);
}

/* d2l's walk, (1, 2, 16) -> (1, 2, 8, 2) -> (1, 8, 2, 2) -> (8, 2, 2)
 * and back.  Undoing the split of X's own views lands on X's layout again,
 * so even the last reshape is a view; attention's output is new,
 * contiguous (B*h, n, p) memory, and putting its heads side by side copies. */
Test(heads, transpose_trace_of_the_seeds)
{
    tensor *x, *heads, *back, *fresh, *joined;
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    OK(tensor_set_names(x, "B, n, d_model"));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(transpose_qkv(x, 8, &heads));
    OK(transpose_output(heads, 8, &back));
    OK(tensor_contiguous(heads, &fresh));
    OK(transpose_output(fresh, 8, &joined));
    trace_to(NULL);
    const char *text = capture_end(&c);
    cr_assert_str_eq(text,
        SEED_WALK_TRACE
        "contiguous()             copy  (8, 2, 2) -> (8, 2, 2)              (B*h, n, d_model/h)\n"
        "transpose_output(h=8)          (8, 2, 2)                           (B*h, n, d_model/h)\n"
        "  reshape(-1, 8, 2, 2)   view  (8, 2, 2) -> (1, 8, 2, 2)           (B, h, n, d_model/h)\n"
        "  permute(0, 2, 1, 3)    view  (1, 8, 2, 2) -> (1, 2, 8, 2)        (B, n, h, d_model/h)\n"
        "  reshape(1, 2, -1)      copy  (1, 2, 8, 2) -> (1, 2, 16)          (B, n, d_model)\n");
    cr_assert(tensor_shares_buffer(back, x));
    cr_assert(!tensor_shares_buffer(joined, fresh));
    cr_assert_eq(rel_error(joined, x), 0.0);
    capture_free(&c);
    FREE_ALL(x, heads, back, fresh, joined);
}

Test(heads, transpose_errors)
{
    static const split_refusal cases[] = {
        {transpose_qkv, 3, {1, 2, 16}, 3, GSL_EBADLEN,
         "tensor_reshape: shape (1, 2, 3, -1) is invalid for input of size "
         "32 (input shape (1, 2, 16))"},
        {transpose_qkv, 3, {1, 2, 16}, 0, GSL_EINVAL,
         "tensor_reshape: shape (1, 2, 0, -1) has size 0 in dimension 2; "
         "sizes must be >= 1 or a single -1 (input shape (1, 2, 16))"},
        {transpose_output, 3, {1, 2, 16}, 3, GSL_EBADLEN,
         "tensor_reshape: shape (-1, 3, 2, 16) is invalid for input of size "
         "32 (input shape (1, 2, 16))"},
        {transpose_output, 2, {2, 16}, 2, GSL_EINVAL,
         "tensor_reshape: shape (-1, 2, 16, 0) has size 0 in dimension 3; "
         "sizes must be >= 1 or a single -1 (input shape (2, 16))"},
    };
    splits_refused(cases, sizeof cases / sizeof cases[0]);
}

/* Chapter 06's wrong turn, by hand.  x is (B, n, d_model) = (1, 2, 4),
 * position 0 = [1, 2, 3, 4], position 1 = [5, 6, 7, 8], h = 2, p = 2.
 * transpose_qkv: head 0 = features 0-1 of both positions,
 *   [[1, 2], [5, 6]]; head 1 = [[3, 4], [7, 8]].
 * A straight reshape to (B*h, n, p) instead: head 0 = [[1, 2], [3, 4]],
 *   all of position 0; head 1 = [[5, 6], [7, 8]], all of position 1. */
Test(heads, straight_reshape_puts_one_position_in_a_head)
{
    tensor *x, *right, *wrong;
    OK(tensor_from_array(SHAPE(1, 2, 4), (double[]){1, 2, 3, 4, 5, 6, 7, 8},
                         &x));
    OK(transpose_qkv(x, 2, &right));
    OK(tensor_reshape(x, SIZES(2, 2, 2), NULL, &wrong));
    const double want_right[] = {1, 2, 5, 6, 3, 4, 7, 8};
    const double want_wrong[] = {1, 2, 3, 4, 5, 6, 7, 8};
    size_t k = 0;
    for (size_t r = 0; r < 2; r++)
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 2; j++, k++) {
                cr_expect_eq(*TENSOR_AT(right, r, i, j), want_right[k],
                             "transpose_qkv [%zu, %zu, %zu]", r, i, j);
                cr_expect_eq(*TENSOR_AT(wrong, r, i, j), want_wrong[k],
                             "straight reshape [%zu, %zu, %zu]", r, i, j);
            }
    FREE_ALL(x, right, wrong);
}

/* The same values attended with keys all zero: every weight is 1/2, so
 * each head's output, at both of its rows, is the mean of its two value
 * rows.  Right split: head 0 -> [3, 4], head 1 -> [5, 6], and both
 * positions read [3, 4, 5, 6].  Straight reshape: head 0 -> [2, 3] twice,
 * head 1 -> [6, 7] twice, read back as position 0 = [2, 3, 2, 3] and
 * position 1 = [6, 7, 6, 7]: no position ever sees the other. */
Test(heads, straight_reshape_changes_the_attention_output)
{
    tensor *v, *k, *vh, *kh, *o, *out;
    OK(tensor_from_array(SHAPE(1, 2, 4), (double[]){1, 2, 3, 4, 5, 6, 7, 8},
                         &v));
    OK(tensor_alloc(SHAPE(1, 2, 4), &k)); // zeros: equal scores
    dot_attention attn;
    OK(dot_attention_init(&attn, 0));

    OK(transpose_qkv(v, 2, &vh));
    OK(transpose_qkv(k, 2, &kh));
    OK(dot_attention_forward(&attn, vh, kh, vh, NULL, &o, NULL));
    OK(transpose_output(o, 2, &out));
    const double want_right[] = {3, 4, 5, 6, 3, 4, 5, 6};
    for (size_t i = 0; i < 8; i++)
        cr_expect_float_eq(out->data[i], want_right[i], 1e-12, "right [%zu]",
                           i);
    FREE_ALL(vh, kh, o, out);

    OK(tensor_reshape(v, SIZES(2, 2, 2), NULL, &vh));
    OK(tensor_reshape(k, SIZES(2, 2, 2), NULL, &kh));
    OK(dot_attention_forward(&attn, vh, kh, vh, NULL, &o, NULL));
    OK(tensor_reshape(o, SIZES(1, 2, 4), NULL, &out));
    const double want_wrong[] = {2, 3, 2, 3, 6, 7, 6, 7};
    for (size_t i = 0; i < 8; i++)
        cr_expect_float_eq(out->data[i], want_wrong[i], 1e-12, "wrong [%zu]",
                           i);
    FREE_ALL(vh, kh, o, out, v, k);
    dot_attention_free(&attn);
}

//> 07
/* --- repeat_valid_lens ----------------------------------------------- */

Test(heads, repeat_interleave_order_1d)
{
    tensor *lens, *out;
    OK(tensor_from_array(SHAPE(3), (double[]){3, 2, 5}, &lens));
    OK(repeat_valid_lens(lens, 2, &out));
    cr_assert_eq(out->ndim, 1);
    cr_assert_eq(out->shape[0], 6);
    double want[] = {3, 3, 2, 2, 5, 5};
    for (size_t r = 0; r < 6; r++)
        cr_assert_eq(out->data[r], want[r], "row %zu", r);
    FREE_ALL(lens, out);
}

Test(heads, repeat_interleave_order_2d)
{
    tensor *lens, *out;
    OK(tensor_from_array(SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, &lens));
    OK(repeat_valid_lens(lens, 3, &out));
    assert_shape(out, SHAPE(6, 3));
    /* row b*h + i is example b's row, whatever the head i */
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 3; j++)
                cr_assert_eq(*TENSOR_AT(out, b * 3 + i, j),
                             (double)(b * 3 + j + 1));
    FREE_ALL(lens, out);
}

Test(heads, repeat_errors)
{
    tensor *lens, *out;
    OK(tensor_alloc(SHAPE(2, 2, 2), &lens));
    FAILS(repeat_valid_lens(lens, 2, &out), GSL_EINVAL,
          "repeat_valid_lens: valid_lens (2, 2, 2) is 3-D, num_heads 2: "
          "expected a 1-D (B,) or 2-D (B, Lq) valid_lens and num_heads from "
          "1 to LONG_MAX / B");
    tensor_free(lens);
    OK(tensor_alloc(SHAPE(2), &lens));
    FAILS(repeat_valid_lens(lens, 0, &out), GSL_EINVAL,
          "repeat_valid_lens: valid_lens (2,) is 1-D, num_heads 0: expected "
          "a 1-D (B,) or 2-D (B, Lq) valid_lens and num_heads from 1 to "
          "LONG_MAX / B");
    /* so many heads that the B*h rows would not fit a shape's size:
     * refused, not wrapped round to a few rows */
    FAILS(repeat_valid_lens(lens, SIZE_MAX, &out), GSL_EINVAL,
          "repeat_valid_lens: valid_lens (2,) is 1-D, num_heads "
          "18446744073709551615: expected a 1-D (B,) or 2-D (B, Lq) "
          "valid_lens and num_heads from 1 to LONG_MAX / B");
    FAILS(repeat_valid_lens(lens, (size_t)LONG_MAX / 2 + 1, &out),
          GSL_EINVAL,
          "repeat_valid_lens: valid_lens (2,) is 1-D, num_heads "
          "4611686018427387904: expected a 1-D (B,) or 2-D (B, Lq) "
          "valid_lens and num_heads from 1 to LONG_MAX / B");
    /* the largest that fits goes as far as the allocation, which
     * refuses */
    cr_assert_neq(repeat_valid_lens(lens, (size_t)LONG_MAX / 2, &out),
                  GSL_SUCCESS);
    cr_assert_null(out);
    tensor_free(lens);
}
//<

//> 08
/* --- the module against plain loops ---------------------------------- */

/* The module from its formulas: per example b, per head hd, project each
 * query, key and value with rows hd*p .. hd*p + p - 1 of the weights,
 * score, mask with -inf beyond the valid length (all 0 when it is 0:
 * uniform), softmax, average the
 * values, write the head's p outputs into columns hd*p.., then W_o.
 * valid: NULL, or B lengths (per_query 0) or B*Lq lengths (per_query 1).
 * out is (B, Lq, D_out) row-major; weights (B, h, Lq, Lk) or NULL.
 * Not static: test_multihead_fast.c holds the fast paths to it too. */
void naive_multihead(const multihead *m, size_t B, size_t Lq, size_t Lk,
                     const double *q, const double *k, const double *v,
                     const double *valid, int per_query, double *out,
                     double *weights)
{
    const multihead_config *c = &m->cfg;
    size_t D = c->num_hiddens, h = c->num_heads, p = D / h;
    double *qp = malloc(Lq * D * sizeof *qp), *kp = malloc(Lk * D * sizeof *kp);
    double *vp = malloc(Lk * D * sizeof *vp), *concat = malloc(D * sizeof *concat);
    double *s = malloc(Lk * sizeof *s);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < Lq; i++)
            linear_by_dots(&m->W_q, q + (b * Lq + i) * c->query_size, qp + i * D);
        for (size_t t = 0; t < Lk; t++) {
            linear_by_dots(&m->W_k, k + (b * Lk + t) * c->key_size, kp + t * D);
            linear_by_dots(&m->W_v, v + (b * Lk + t) * c->value_size, vp + t * D);
        }
        for (size_t i = 0; i < Lq; i++) {
            size_t len = !valid ? Lk : (size_t)(per_query ? valid[b * Lq + i] : valid[b]);
            for (size_t hd = 0; hd < h; hd++) {
                double mx = -INFINITY, sum = 0;
                for (size_t t = 0; t < Lk; t++) {
                    double dot = 0;
                    for (size_t j = 0; j < p; j++)
                        dot += qp[i * D + hd * p + j] * kp[t * D + hd * p + j];
                    s[t] = !len ? 0.0 : t < len ? dot / sqrt((double)p) : -INFINITY;
                    mx = s[t] > mx ? s[t] : mx;
                }
                for (size_t t = 0; t < Lk; t++)
                    sum += s[t] = exp(s[t] - mx);
                for (size_t j = 0; j < p; j++)
                    concat[hd * p + j] = 0;
                for (size_t t = 0; t < Lk; t++) {
                    double w = s[t] / sum;
                    if (weights)
                        weights[((b * h + hd) * Lq + i) * Lk + t] = w;
                    for (size_t j = 0; j < p; j++)
                        concat[hd * p + j] += w * vp[t * D + hd * p + j];
                }
            }
            linear_by_dots(&m->W_o, concat, out + (b * Lq + i) * c->out_size);
        }
    }
    free(qp);
    free(kp);
    free(vp);
    free(concat);
    free(s);
}

static module_case module_cases[] = {
    {2, 4, 6, 6, 6, 6, 6, 3, 0, 0, 1},
    {2, 4, 6, 100, 100, 100, 100, 5, 0, 0, 1},
    {3, 5, 7, 10, 12, 14, 12, 4, 0, 1, 2},
    {1, 1, 1, 3, 3, 3, 4, 2, 0, 1, 0},
    {3, 2, 9, 5, 7, 11, 16, 8, 9, 1, 1},
    {2, 6, 3, 8, 4, 2, 6, 6, 0, 0, 2},
    {1, 8, 8, 16, 16, 16, 16, 1, 0, 1, 0},
    {4, 3, 5, 7, 7, 7, 20, 5, 3, 0, 2},
};

ParameterizedTestParameters(heads, module_equals_loops)
{
    return cr_make_param_array(module_case, module_cases,
                               sizeof module_cases / sizeof module_cases[0]);
}

ParameterizedTest(module_case *c, heads, module_equals_loops)
{
    gsl_rng *r = mha_rng_new(7 + c->B * 13 + c->Lq * 31 + c->D);
    multihead m;
    tensor *q, *k, *v, *lens, *out;
    case_module(c, r, 1, &m, &q, &k, &v, &lens);

    tensor *w;
    OK(multihead_forward(&m, q, k, v, lens, &out, &w));
    size_t dout = m.cfg.out_size;
    assert_shape(out, SHAPE(c->B, c->Lq, dout));

    tensor *want, *want_w;
    OK(tensor_alloc(SHAPE(c->B, c->Lq, dout), &want));
    OK(tensor_alloc(SHAPE(c->B, c->h, c->Lq, c->Lk), &want_w));
    naive_multihead(&m, c->B, c->Lq, c->Lk, q->data, k->data, v->data,
                    lens ? lens->data : NULL, c->lens == 2, want->data,
                    want_w->data);
    double err = rel_error(out, want);
    cr_assert(err <= 1e-12, "output relative error %g", err);
    cr_assert_not_null(w);
    err = rel_error(w, want_w);
    cr_assert(err <= 1e-12, "weights relative error %g", err);
    // weights not wanted: the same output, to the bit
    tensor *out2;
    OK(multihead_forward(&m, q, k, v, lens, &out2, NULL));
    cr_assert_eq(rel_error(out2, out), 0.0);
    tensor_free(out2);
    tensor_free(w);

    multihead_free(&m);
    FREE_ALL(q, k, v, lens, out, want, want_w);
    gsl_rng_free(r);
}

/* d2l's example: ones in, (2, 4, 100) out; identical keys give identical
 * scores, so every head spreads its weight evenly over the valid keys. */
Test(heads, d2l_example_shape_and_uniform_weights)
{
    gsl_rng *r = mha_rng_new(0);
    multihead m;
    SELF_MODULE(&m, 100, .num_hiddens = 100, .num_heads = 5, .dropout = 0.5);
    multihead_reset_xavier(&m, r);
    tensor *x, *y, *lens, *out, *w;
    OK(tensor_alloc(SHAPE(2, 4, 100), &x));
    OK(tensor_alloc(SHAPE(2, 6, 100), &y));
    tensor_fill(x, 1);
    tensor_fill(y, 1);
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    OK(multihead_forward(&m, x, y, y, lens, &out, &w));
    char sym[TRACE_SHAPE_MAX];
    cr_assert_str_eq(tensor_sym_str(w, sym, sizeof sym), "(B, h, Lq, Lk)");
    assert_shape(out, SHAPE(2, 4, 100));
    for (size_t b = 0; b < 2; b++)
        for (size_t hd = 0; hd < 5; hd++)
            for (size_t i = 0; i < 4; i++)
                for (size_t t = 0; t < 6; t++) {
                    double want = t < (b ? 2u : 3u) ? 1.0 / (b ? 2 : 3) : 0.0;
                    cr_assert(fabs(*TENSOR_AT(w, b, hd, i, t) - want) <= 1e-15);
                }
    multihead_free(&m);
    FREE_ALL(w, x, y, lens, out);
    gsl_rng_free(r);
}

Test(heads, config_errors)
{
    multihead_config cfg = {.query_size = 100, .key_size = 100,
                            .value_size = 100, .num_hiddens = 100,
                            .num_heads = 3};
    config_refused(&cfg, GSL_EBADLEN,
                   "multihead: num_hiddens 100 is not divisible by num_heads 3");
    cfg.num_heads = 0;
    config_refused(&cfg, GSL_EINVAL,
                   "multihead: sizes must be >= 1 (query_size 100, key_size "
                   "100, value_size 100, num_hiddens 100, num_heads 0)");
}

/* Inputs the module (query_size 4, key_size 6, value_size 8) refuses:
 * the shapes of queries, keys and values, the valid lengths (none where
 * lens_dims is 0, else lens_dims numbers of shape lens_shape). */
Test(heads, input_errors)
{
    static const struct {
        size_t q[3], k[3], v[3];
        size_t lens_dims, lens_shape[2];
        double lens[8]; /* the first numbers of the lengths, the rest 0 */
        int status;
        const char *message;
    } cases[] = {
        {{2, 5, 6}, {2, 5, 6}, {2, 5, 8}, 0, {0}, {0}, GSL_EBADLEN,
         "multihead: feature sizes queries (2, 5, 6), keys (2, 5, 6), values "
         "(2, 5, 8) do not match the layers' query_size 4, key_size 6, "
         "value_size 8"},
        {{2, 3, 4}, {2, 5, 6}, {2, 4, 8}, 0, {0}, {0}, GSL_EBADLEN,
         "multihead: keys have Lk = 5 but values have Lk = 4 (queries "
         "(2, 3, 4), keys (2, 5, 6), values (2, 4, 8))"},
        {{3, 3, 4}, {2, 5, 6}, {2, 5, 8}, 0, {0}, {0}, GSL_EBADLEN,
         "multihead: batch sizes differ (queries (3, 3, 4), keys (2, 5, 6), "
         "values (2, 5, 8))"},
        {{2, 3, 4}, {2, 5, 6}, {2, 5, 8}, 1, {3}, {1, 2, 3}, GSL_EBADLEN,
         "multihead: valid_lens has shape (3,), expected (2,) or (2, 3) "
         "(queries (2, 3, 4), keys (2, 5, 6))"},
        {{2, 3, 4}, {2, 5, 6}, {2, 5, 8}, 2, {2, 4}, {0}, GSL_EBADLEN,
         "multihead: valid_lens has shape (2, 4), expected (2,) or (2, 3) "
         "(queries (2, 3, 4), keys (2, 5, 6))"},
        {{2, 3, 4}, {2, 5, 6}, {2, 5, 8}, 1, {2}, {1, 6}, GSL_EINVAL,
         "multihead: valid_lens[1] = 6 is larger than the number of keys 5 "
         "(queries (2, 3, 4), keys (2, 5, 6), valid_lens (2,))"},
        {{2, 3, 4}, {2, 5, 6}, {2, 5, 8}, 1, {2}, {1, -1}, GSL_EINVAL,
         "multihead: valid_lens[1] = -1 is negative (queries (2, 3, 4), keys "
         "(2, 5, 6), valid_lens (2,))"},
        {{2, 3, 4}, {2, 5, 6}, {2, 5, 8}, 1, {2}, {1, 2.5}, GSL_EINVAL,
         "multihead: valid_lens[1] = 2.5 is not a whole number (queries "
         "(2, 3, 4), keys (2, 5, 6), valid_lens (2,))"},
    };
    multihead m;
    multihead_config cfg = {.query_size = 4, .key_size = 6, .value_size = 8,
                            .num_hiddens = 6, .num_heads = 3};
    OK(multihead_init(&m, &cfg));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *q = zeros(3, cases[c].q), *k = zeros(3, cases[c].k);
        tensor *v = zeros(3, cases[c].v), *out = (tensor *)1;
        tensor *lens = zeros(cases[c].lens_dims, cases[c].lens_shape);
        for (size_t i = 0; lens && i < tensor_numel(lens); i++)
            lens->data[i] = cases[c].lens[i];
        FAILS(multihead_forward(&m, q, k, v, lens, &out, NULL),
              cases[c].status, cases[c].message);
        cr_assert_null(out, "case %zu left its output set", c);
        FREE_ALL(q, k, v, lens);
    }
    multihead_free(&m);
}

/* The module's steps call the layers' and the attention's steps, which
 * check nothing, so the door checks what their doors would: training
 * with dropout and no random generator, and a layer whose weight lost
 * its shape, are refused before any step runs (the trace holds no
 * record), the layer named after the module.  */
Test(heads, the_door_checks_the_layers_and_dropout_before_any_step)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .dropout = 0.5);
    tensor *q, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    trace_log log;
    trace_log_start(&log);
    multihead_train(&m, 1, NULL);
    FAILS(multihead_forward(&m, q, q, q, NULL, &out, NULL), GSL_EINVAL,
          "multihead: training with dropout 0.5 needs a random generator "
          "(rng is NULL)");
    cr_assert_null(out);
    multihead_train(&m, 0, NULL);
    tensor_free(m.W_o.weight);
    OK(tensor_alloc(SHAPE(4, 3), &m.W_o.weight));
    out = (tensor *)1;
    FAILS(multihead_forward(&m, q, q, q, NULL, &out, NULL), GSL_EBADLEN,
          "multihead W_o: weight has shape (4, 3), expected (4, 4)");
    cr_assert_null(out);
    trace_log_stop(&log);
    cr_assert_eq(log.count, 0, "%zu records: a step ran", log.count);
    trace_log_free(&log);
    tensor_free(q);
    multihead_free(&m);
}

/* Every allocation of a forward pass may fail: each failure is reported
 * as GSL_ENOMEM, leaves out and the weights NULL, and leaks nothing
 * (checked under valgrind and ASan). */
Test(heads, allocation_failures)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    tensor *q, *lens, *out, *w;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 3}, &lens));
    int failures = 0;
    EACH_ALLOCATION_FAILS(failures,
        multihead_forward(&m, q, q, q, lens, &out, &w),
        cr_assert_null(out);
        cr_assert_null(w));
    cr_assert_gt(failures, 10);
    tensor_free(out);
    tensor_free(w);
    // without the weights, one allocation fewer can fail: the view
    int without = 0;
    EACH_ALLOCATION_FAILS(without,
        multihead_forward(&m, q, q, q, lens, &out, NULL),
        cr_assert_null(out));
    cr_assert_eq(without, failures - 1);
    tensor_free(out);
    multihead_free(&m);
    FREE_ALL(q, lens);
}

/* Chapter 09's claim: h separate heads whose projections are rows
 * i*p .. (i+1)*p - 1 of W_q, W_k, W_v (narrow views), each a plain
 * single-head attention, concatenated and projected by W_o, equal the
 * batched module. */
Test(heads, separate_heads_equal_the_module)
{
    const size_t B = 3, Lq = 4, Lk = 5, dq = 7, dk = 6, dv = 9, D = 12, h = 3;
    const size_t p = D / h;
    gsl_rng *r = mha_rng_new(99);
    multihead m;
    multihead_config cfg = {.query_size = dq, .key_size = dk, .value_size = dv,
                            .num_hiddens = D, .num_heads = h, .out_size = 10,
                            .bias = 1};
    OK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    tensor *q, *k, *v, *lens, *out, *concat, *joined;
    OK(tensor_alloc(SHAPE(B, Lq, dq), &q));
    OK(tensor_alloc(SHAPE(B, Lk, dk), &k));
    OK(tensor_alloc(SHAPE(B, Lk, dv), &v));
    tensor_fill_normal(q, r, 0, 1);
    tensor_fill_normal(k, r, 0, 1);
    tensor_fill_normal(v, r, 0, 1);
    OK(tensor_from_array(SHAPE(B, Lq), (double[]){1, 2, 3, 4, 5, 4, 3, 2, 1, 1, 5, 5},
                         &lens));
    OK(multihead_forward(&m, q, k, v, lens, &out, NULL));

    OK(tensor_alloc(SHAPE(B, Lq, D), &concat));
    dot_attention a;
    OK(dot_attention_init(&a, 0));
    const linear *big[3] = {&m.W_q, &m.W_k, &m.W_v};
    const tensor *in[3] = {q, k, v};
    for (size_t i = 0; i < h; i++) {
        tensor *proj[3], *head;
        for (int w = 0; w < 3; w++) {
            linear small;
            OK(linear_init(&small, "W_i", big[w]->in_features, p, 0));
            tensor_free(small.weight);
            OK(tensor_narrow(big[w]->weight, 0, i * p, p, &small.weight));
            OK(tensor_narrow(big[w]->bias, 0, i * p, p, &small.bias));
            cr_assert(tensor_shares_buffer(small.weight, big[w]->weight));
            OK(linear_forward(&small, in[w], &proj[w])); // (B, L, p)
            linear_free(&small);
        }
        OK(dot_attention_forward(&a, proj[0], proj[1], proj[2], lens, &head, NULL));
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < Lq; t++)
                for (size_t j = 0; j < p; j++)
                    *TENSOR_AT(concat, b, t, i * p + j) = *TENSOR_AT(head, b, t, j);
        for (int w = 0; w < 3; w++)
            tensor_free(proj[w]);
        tensor_free(head);
    }
    OK(linear_forward(&m.W_o, concat, &joined));
    double err = rel_error(joined, out);
    cr_assert(err <= 1e-12, "relative error %g", err);

    dot_attention_free(&a);
    multihead_free(&m);
    FREE_ALL(q, k, v, lens, out, concat, joined);
    gsl_rng_free(r);
}

/* The exact trace of d2l's example (B 2, Lq 4, Lk 6, D 100, h 5, valid
 * [3, 2]) is chapter 08's transcript; here its skeleton: the split of each
 * projection copies (B = 2), the join copies, and the shapes are these. */
Test(heads, module_trace_shapes)
{
    multihead m;
    SELF_MODULE(&m, 100, .num_hiddens = 100, .num_heads = 5);
    tensor *x, *y, *lens, *out;
    OK(tensor_alloc(SHAPE(2, 4, 100), &x));
    OK(tensor_alloc(SHAPE(2, 6, 100), &y));
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(multihead_forward(&m, x, y, y, lens, &out, NULL));
    trace_to(NULL);
    const char *text = capture_end(&c);
    const char *want[] = {
        "multihead(h=5)                 q (2, 4, 100), k (2, 6, 100), v (2, 6, 100)\n",
        "  W_q: x W^T             new   (2, 4, 100) -> (2, 4, 100)          (B, Lq, d_model)\n",
        "    reshape(-1, 4, 20)   copy  (2, 5, 4, 20) -> (10, 4, 20)        (B*h, Lq, d_model/h)\n",
        "    reshape(-1, 6, 20)   copy  (2, 5, 6, 20) -> (10, 6, 20)        (B*h, Lk, d_model/h)\n",
        "  repeat_interleave(5)         (2,)                                (B,)\n",
        "    view(2, 1)           view  (2,) -> (2, 1)                      (B, 1)\n",
        "    expand(2, 5)         view  (2, 1) -> (2, 5)                    (B, h)\n",
        "    reshape(10)          copy  (2, 5) -> (10,)                     (B*h,)\n",
        "    Q K^T                new   (10, 4, 20) @ (10, 6, 20)^T -> (10, 4, 6)  (B*h, Lq, Lk)\n",
        "    reshape(2, 4, -1)    copy  (2, 4, 5, 20) -> (2, 4, 100)        (B, Lq, d_model)\n",
        "  W_o: x W^T             new   (2, 4, 100) -> (2, 4, 100)          (B, Lq, d_model)\n",
    };
    const char *at = text;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const char *found = strstr(at, want[i]);
        cr_assert_not_null(found, "missing or out of order: %s\nin:\n%s", want[i], text);
        at = found + strlen(want[i]);
    }
    capture_free(&c);
    multihead_free(&m);
    FREE_ALL(x, y, lens, out);
}

/* NaN and infinity are refused at the module's door, naming the element;
 * an infinity in a key would otherwise turn a whole row into NaN. */
Test(heads, non_finite_inputs_are_refused)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    tensor *q, *k, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_alloc(SHAPE(2, 5, 4), &k));
    *TENSOR_AT(q, 1, 2, 3) = NAN;
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_EDOM,
          "multihead: queries[1, 2, 3] = nan; queries must be finite "
          "(queries (2, 3, 4))");
    cr_assert_null(out);
    *TENSOR_AT(q, 1, 2, 3) = 0;
    *TENSOR_AT(k, 0, 4, 0) = -INFINITY;
    FAILS(multihead_forward(&m, q, k, q, NULL, &out, NULL), GSL_EBADLEN,
          "multihead: keys have Lk = 5 but values have Lk = 3 (queries "
          "(2, 3, 4), keys (2, 5, 4), values (2, 3, 4))");
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_EDOM,
          "multihead: keys[0, 4, 0] = -inf; keys must be finite (keys (2, 5, 4))");
    *TENSOR_AT(k, 0, 4, 0) = 0;
    *TENSOR_AT(m.W_o.weight, 3, 1) = INFINITY;
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_EDOM,
          "multihead: W_o[3, 1] = inf; W_o must be finite (W_o (4, 4))");
    *TENSOR_AT(m.W_o.weight, 3, 1) = 0;
    m.W_v.bias->data[2] = NAN;
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_EDOM,
          "multihead: b_v[2] = nan; b_v must be finite (b_v (4,))");
    m.W_v.bias->data[2] = 0;
    OK(multihead_forward(&m, q, k, k, NULL, &out, NULL));
    FREE_ALL(out, q, k);
    multihead_free(&m);
}

/* Huge but finite numbers stay finite where the math is finite: scores of
 * 1e300 saturate the softmax instead of overflowing it. */
Test(heads, huge_finite_inputs_give_finite_outputs)
{
    multihead m;
    SELF_MODULE(&m, 2, .num_hiddens = 2, .num_heads = 1);
    /* identity projections: scores are q . k / sqrt(2) */
    double eye[] = {1, 0, 0, 1};
    memcpy(m.W_q.weight->data, eye, sizeof eye);
    memcpy(m.W_k.weight->data, eye, sizeof eye);
    memcpy(m.W_v.weight->data, eye, sizeof eye);
    memcpy(m.W_o.weight->data, eye, sizeof eye);
    tensor *q, *k, *v, *out, *w;
    OK(tensor_from_array(SHAPE(1, 1, 2), (double[]){1e150, 0}, &q));
    OK(tensor_from_array(SHAPE(1, 3, 2), (double[]){1e150, 0, -1e150, 0, 0, 1}, &k));
    OK(tensor_from_array(SHAPE(1, 3, 2), (double[]){1, 2, 3, 4, 5, 6}, &v));
    OK(multihead_forward(&m, q, k, v, NULL, &out, &w));
    /* score of key 0 is 1e300/sqrt(2), the others far below: all weight
     * on key 0, so out = v[0] exactly */
    cr_assert_eq(*TENSOR_AT(out, 0, 0, 0), 1.0);
    cr_assert_eq(*TENSOR_AT(out, 0, 0, 1), 2.0);
    cr_assert_eq(*TENSOR_AT(w, 0, 0, 0, 1), 0.0);
    FREE_ALL(w, q, k, v, out);
    multihead_free(&m);
}
//<

//> 13
/* --- the options: a cache for the backward, a head mask -------------- */

/* A module with biases that count and inputs to match: d_q 5, d_k 3,
 * d_v 4, D 6 in h 3 heads of p 2, D_out 7; B 2, Lq 3, Lk 4, valid_lens
 * (B, Lq) with a 0 among them. */
typedef struct {
    multihead m;
    tensor *q, *k, *v, *lens;
} opt_setup;

static void opt_setup_init(opt_setup *s)
{
    gsl_rng *r = mha_rng_new(41);
    multihead_config cfg = {.query_size = 5, .key_size = 3, .value_size = 4,
                            .num_hiddens = 6, .num_heads = 3, .out_size = 7,
                            .bias = 1};
    OK(multihead_init(&s->m, &cfg));
    multihead_reset_xavier(&s->m, r);
    linear *layers[4] = {&s->m.W_q, &s->m.W_k, &s->m.W_v, &s->m.W_o};
    for (int i = 0; i < 4; i++)
        tensor_fill_uniform(layers[i]->bias, r, -0.5, 0.5);
    tensor **in[3] = {&s->q, &s->k, &s->v};
    const size_t shapes[3][3] = {{2, 3, 5}, {2, 4, 3}, {2, 4, 4}};
    for (int i = 0; i < 3; i++) {
        OK(tensor_alloc(3, shapes[i], in[i]));
        tensor_fill_normal(*in[i], r, 0, 1);
    }
    OK(tensor_from_array(SHAPE(2, 3), (double[]){4, 1, 2, 0, 3, 4},
                         &s->lens));
    gsl_rng_free(r);
}

static void opt_setup_free(opt_setup *s)
{
    FREE_ALL(s->q, s->k, s->v, s->lens);
    multihead_free(&s->m);
}

/* What the forward's steps compute, from the formulas with plain loops:
 * the projections qp (B, Lq, D), kp and vp (B, Lk, D); the weights
 * (B, h, Lq, Lk) (naive_multihead's); each head's output heads
 * (B, h, Lq, p) = weights @ vp's columns of the head; and out (B, Lq,
 * D_out) = W_o (mask[i] * heads of head i, side by side) + b_o, where
 * mask may be NULL (all ones).  Every array row-major, freed by the
 * caller. */
typedef struct {
    double *qp, *kp, *vp, *weights, *heads, *out;
} steps;

static steps naive_steps(const opt_setup *s, const double *mask)
{
    const multihead *m = &s->m;
    size_t B = s->q->shape[0], Lq = s->q->shape[1], Lk = s->k->shape[1];
    size_t D = m->cfg.num_hiddens, h = m->cfg.num_heads, p = D / h;
    size_t Dout = m->cfg.out_size;
    steps st = {malloc(B * Lq * D * sizeof(double)),
                malloc(B * Lk * D * sizeof(double)),
                malloc(B * Lk * D * sizeof(double)),
                malloc(B * h * Lq * Lk * sizeof(double)),
                calloc(B * h * Lq * p, sizeof(double)),
                malloc(B * Lq * Dout * sizeof(double))};
    double *unused = malloc(B * Lq * Dout * sizeof(double));
    naive_multihead(m, B, Lq, Lk, s->q->data, s->k->data, s->v->data,
                    s->lens->data, 1, unused, st.weights);
    free(unused);
    for (size_t r = 0; r < B * Lq; r++)
        linear_by_dots(&m->W_q, s->q->data + r * m->cfg.query_size,
                     st.qp + r * D);
    for (size_t r = 0; r < B * Lk; r++) {
        linear_by_dots(&m->W_k, s->k->data + r * m->cfg.key_size, st.kp + r * D);
        linear_by_dots(&m->W_v, s->v->data + r * m->cfg.value_size,
                     st.vp + r * D);
    }
    double *concat = malloc(D * sizeof *concat);
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < Lq; l++) {
            for (size_t i = 0; i < h; i++)
                for (size_t j = 0; j < p; j++) {
                    double *o = &st.heads[((b * h + i) * Lq + l) * p + j];
                    for (size_t t = 0; t < Lk; t++)
                        *o += st.weights[((b * h + i) * Lq + l) * Lk + t] *
                              st.vp[(b * Lk + t) * D + i * p + j];
                    concat[i * p + j] = (mask ? mask[i] : 1.0) * *o;
                }
            linear_by_dots(&m->W_o, concat, st.out + (b * Lq + l) * Dout);
        }
    free(concat);
    return st;
}

static void steps_free(steps *st)
{
    double *all[] = {st->qp, st->kp, st->vp, st->weights, st->heads, st->out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        free(all[i]);
}

/* |got - want| <= 1e-12 (1 + |want|) for t, any strides, against a
 * row-major array of t's shape. */
static void assert_close(const char *what, const tensor *t, const double *want)
{
    size_t idx[TENSOR_MAX_DIMS], n = tensor_numel(t);
    for (size_t f = 0; f < n; f++) {
        unravel(f, t->ndim, t->shape, idx);
        double got = *tensor_at(t, idx);
        cr_assert(fabs(got - want[f]) <= 1e-12 * (1 + fabs(want[f])),
                  "%s[%zu] = %.17g, the loops give %.17g", what, f, got,
                  want[f]);
    }
}

/* The cache holds, for the backward, what each step was given, and those
 * are the numbers the formulas give: each head's projections (B*h, L, p),
 * the weights and the heads' outputs (B*h, Lq, ...), the lengths repeated
 * per head, W_o's input; the inputs themselves, borrowed. */
Test(heads, the_cache_holds_each_steps_inputs)
{
    opt_setup s;
    opt_setup_init(&s);
    size_t B = 2, Lq = 3, Lk = 4, D = 6, h = 3, p = 2;
    steps st = naive_steps(&s, NULL);
    multihead_cache c = {0};
    tensor *out, *w;
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, s.lens, NULL, &c, &out, &w));
    assert_close("out", out, st.out);
    cr_assert_eq(c.queries, s.q);
    cr_assert_eq(c.keys, s.k);
    cr_assert_eq(c.values, s.v);
    cr_assert_null(c.head_mask);
    // head i of example b is row b*h + i: columns i*p .. of its projection
    const tensor *split[3] = {c.qh, c.kh, c.vh};
    const double *proj[3] = {st.qp, st.kp, st.vp};
    const size_t len[3] = {Lq, Lk, Lk};
    for (int w = 0; w < 3; w++) {
        cr_assert_eq(split[w]->ndim, 3);
        cr_assert_eq(split[w]->shape[0], B * h);
        cr_assert_eq(split[w]->shape[1], len[w]);
        cr_assert_eq(split[w]->shape[2], p);
        double *want = malloc(B * h * len[w] * p * sizeof *want);
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < h; i++)
                for (size_t l = 0; l < len[w]; l++)
                    for (size_t j = 0; j < p; j++)
                        want[((b * h + i) * len[w] + l) * p + j] =
                            proj[w][(b * len[w] + l) * D + i * p + j];
        assert_close(w == 0 ? "qh" : w == 1 ? "kh" : "vh", split[w], want);
        free(want);
    }
    cr_assert_eq(c.weights->ndim, 3);
    cr_assert_eq(c.weights->shape[0], B * h);
    assert_close("weights", c.weights, st.weights);
    cr_assert_eq(c.heads->shape[0], B * h);
    assert_close("heads", c.heads, st.heads);
    // lens (B*h, Lq): row b*h + i is valid_lens[b]
    cr_assert_eq(c.lens->shape[0], B * h);
    cr_assert_eq(c.lens->shape[1], Lq);
    for (size_t r = 0; r < B * h; r++)
        for (size_t l = 0; l < Lq; l++)
            cr_assert_eq(*TENSOR_AT(c.lens, r, l),
                         s.lens->data[(r / h) * Lq + l]);
    // concat (B, Lq, D): head i's outputs in columns i*p ..
    double *want = malloc(B * Lq * D * sizeof *want);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < h; i++)
            for (size_t l = 0; l < Lq; l++)
                for (size_t j = 0; j < p; j++)
                    want[(b * Lq + l) * D + i * p + j] =
                        st.heads[((b * h + i) * Lq + l) * p + j];
    assert_close("concat", c.concat, want);
    free(want);
    // the weights output is multihead_forward's, (B, h, Lq, Lk); the
    // cache's are the same numbers, its own reference (the caller may free
    // either first)
    cr_assert_eq(w->ndim, 4);
    assert_close("weights", w, st.weights);
    tensor_free(w);
    assert_close("the cache's weights", c.weights, st.weights);
    // a second forward replaces the cache's contents; a failed one
    // empties it
    tensor *again;
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, NULL, NULL, &c, &again, NULL));
    cr_assert_null(c.lens);
    cr_assert_gt(rel_error(again, out), 0); /* no valid_lens now */
    tensor_free(again);
    FAILS(multihead_forward_cached(&s.m, s.q, s.q, s.v, NULL, NULL, &c, &again, NULL),
          GSL_EBADLEN,
          "multihead: keys have Lk = 3 but values have Lk = 4 (queries "
          "(2, 3, 5), keys (2, 3, 5), values (2, 4, 4))");
    cr_assert_null(again);
    cr_assert_null(c.concat);
    cr_assert_null(c.queries);
    tensor_free(out);
    steps_free(&st);
    multihead_cache_free(&c);
    opt_setup_free(&s);
}

//> 14
/* The head mask scales head i's output by mask[i] before W_o mixes the
 * heads: with the mask (1, 0, 0.5), head 1 adds nothing to the output
 * and head 2 half of what it adds unmasked, as the loops compute it.  The
 * cache keeps the heads' outputs before the mask and W_o's input after
 * it, and a copy of the mask. */
Test(heads, head_mask_scales_each_heads_contribution)
{
    opt_setup s;
    opt_setup_init(&s);
    size_t B = 2, Lq = 3, D = 6, h = 3, p = 2;
    const double m3[3] = {1, 0, 0.5};
    steps st = naive_steps(&s, m3);
    tensor *mask, *out, *cached;
    OK(tensor_from_array(SHAPE(3), m3, &mask));
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, s.lens, mask, NULL,
                                &out, NULL));
    assert_close("out", out, st.out);
    /* removing head 1's columns from W_o removes the same contribution */
    steps plain = naive_steps(&s, NULL);
    for (size_t r = 0; r < B * Lq; r++)
        for (size_t o = 0; o < s.m.cfg.out_size; o++) {
            double gone = 0.0;
            for (size_t j = 0; j < p; j++)
                gone += *TENSOR_AT(s.m.W_o.weight, o, 1 * p + j) *
                            plain.heads[(((r / Lq) * h + 1) * Lq + r % Lq) * p + j] +
                        0.5 * *TENSOR_AT(s.m.W_o.weight, o, 2 * p + j) *
                            plain.heads[(((r / Lq) * h + 2) * Lq + r % Lq) * p + j];
            double want = plain.out[r * s.m.cfg.out_size + o] - gone;
            cr_assert(fabs(out->data[r * s.m.cfg.out_size + o] - want) <=
                      1e-12 * (1 + fabs(want)));
        }
    /* with a cache: the same output, the heads before the mask */
    multihead_cache c = {0};
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, s.lens, mask, &c,
                                &cached, NULL));
    cr_assert_eq(rel_error(cached, out), 0.0);
    assert_close("heads", c.heads, st.heads);
    cr_assert_not_null(c.head_mask);
    cr_assert(!tensor_shares_buffer(c.head_mask, mask));
    assert_close("head_mask", c.head_mask, m3);
    for (size_t b = 0; b < B; b++)
        for (size_t l = 0; l < Lq; l++)
            for (size_t j = 0; j < D; j++)
                cr_assert_eq(*TENSOR_AT(c.concat, b, l, j),
                             m3[j / p] * *TENSOR_AT(c.heads, b * h + j / p,
                                                    l, j % p));
    FREE_ALL(mask, out, cached);
    steps_free(&st);
    steps_free(&plain);
    multihead_cache_free(&c);
    opt_setup_free(&s);
}
//<

//> 14
/* No options is multihead_forward, to the bit, and a mask of ones
 * changes nothing either; the trace's header says when a cache is
 * filled, and a head mask is one more line before the heads are
 * joined. */
Test(heads, no_options_is_the_plain_forward)
{
    opt_setup s;
    opt_setup_init(&s);
    tensor *plain, *none, *ones, *masked;
    OK(multihead_forward(&s.m, s.q, s.k, s.v, s.lens, &plain, NULL));
    capture cap;
    capture_start(&cap);
    trace_to(cap.f);
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, s.lens, NULL, NULL,
                                &none, NULL));
    trace_to(NULL);
    cr_assert_eq(rel_error(none, plain), 0.0);
    cr_assert(strncmp(capture_end(&cap), "multihead(h=3)    ", 18) == 0);
    capture_free(&cap);
    OK(tensor_alloc(SHAPE(3), &ones));
    tensor_fill(ones, 1);
    multihead_cache c = {0};
    capture_start(&cap);
    trace_to(cap.f);
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, s.lens, ones, &c,
                                &masked, NULL));
    trace_to(NULL);
    const char *text = capture_end(&cap);
    cr_assert_eq(rel_error(masked, plain), 0.0);
    cr_assert(strncmp(text, "multihead(h=3), cached  ", 24) == 0, "%s", text);
    const char *line = strstr(text, "\n  head_mask (h=3)        new   "
                                    "(6, 3, 2) -> (6, 3, 2)");
    cr_assert_not_null(line, "%s", text);
    cr_assert_not_null(strstr(line, "\n  transpose_output(h=3)"), "%s", text);
    capture_free(&cap);
    FREE_ALL(plain, none, ones, masked);
    multihead_cache_free(&c);
    opt_setup_free(&s);
}
//<

//> 14
/* Without a cache, a head mask of the wrong shape is refused as with
 * one, and training with dropout runs: only a cache needs the weights
 * dropout would drop. */
Test(heads, options_without_a_cache)
{
    opt_setup s;
    opt_setup_init(&s);
    tensor *mask2, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(2), &mask2));
    FAILS(multihead_forward_cached(&s.m, s.q, s.k, s.v, NULL, mask2, NULL,
                                   &out, NULL),
          GSL_EBADLEN,
          "multihead_forward_cached: head_mask has shape (2,), expected (3,) "
          "for num_heads 3");
    cr_assert_null(out);
    gsl_rng *r = mha_rng_new(3);
    s.m.attention.dropout = 0.25;
    multihead_train(&s.m, 1, r);
    OK(multihead_forward_cached(&s.m, s.q, s.k, s.v, NULL, NULL, NULL, &out, NULL));
    FREE_ALL(out, mask2);
    gsl_rng_free(r);
    opt_setup_free(&s);
}
//<
//<

//<
