//> 03
/* test_softmax.c: softmax_lastdim, masked_softmax(_scaled), causal masks.
 *
 * Shapes: scores and weights are (B, Lq, Lk); valid_lens (B,) or (B, Lq).
 * The reference is naive_masked_softmax below, the masking rule of
 * softmax.h written another way with plain loops: a masked key scores
 * -inf (PyTorch's fill, so its exp is exactly 0), a row that sees no key
 * scores 0 everywhere (uniform), then subtract the max, exp, divide.  It
 * shares no code with src/nn/softmax.c.
 */
#include "check.h" /* first: it sets _GNU_SOURCE */

#include <float.h>

/* --- helpers -------------------------------------------------------- */

static tensor *uniform_tensor(size_t ndim, const size_t *shape,
                             unsigned long seed, double lo, double hi)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    gsl_rng *r = mha_rng_new(seed);
    tensor_fill_uniform(t, r, lo, hi);
    gsl_rng_free(r);
    return t;
}

/* Sum of n doubles, with the rounding error of each addition carried
 * along (Neumaier), so the check of a row sum measures the softmax, not
 * the test's own adding up. */
static double careful_sum(const double *v, size_t n, size_t stride)
{
    double sum = 0, c = 0;
    for (size_t k = 0; k < n; k++) {
        double x = v[k * stride], t = sum + x;
        c += fabs(sum) >= fabs(x) ? (sum - t) + x : (x - t) + sum;
        sum = t;
    }
    return sum + c;
}

/* Every row of a contiguous (..., n) tensor sums to 1 within 4 ulps. */
static void assert_rows_sum_to_one(const tensor *w)
{
    size_t n = w->shape[w->ndim - 1], rows = tensor_numel(w) / n;
    for (size_t r = 0; r < rows; r++) {
        double s = careful_sum(w->data + r * n, n, 1);
        cr_assert(fabs(s - 1.0) <= 4 * DBL_EPSILON,
                  "row %zu sums to 1 %+.3g", r, s - 1.0);
    }
}

static void assert_all_finite(const tensor *w)
{
    for (size_t k = 0; k < tensor_numel(w); k++)
        cr_assert(isfinite(w->data[k]), "element %zu is %g", k, w->data[k]);
}

/* valid_len of row (b, i): valid_lens NULL, (B,) or (B, Lq). */
static size_t naive_valid(const tensor *vl, size_t b, size_t i, size_t Lk)
{
    if (!vl)
        return Lk;
    return (size_t)(vl->ndim == 1 ? *TENSOR_AT(vl, b) : *TENSOR_AT(vl, b, i));
}

/* The masked softmax of scale * x, one element at a time. */
static tensor *naive_masked_softmax(const tensor *x, double scale,
                                    const tensor *vl)
{
    size_t B = x->shape[0], Lq = x->shape[1], Lk = x->shape[2];
    tensor *w;
    OK(tensor_alloc(SHAPE(B, Lq, Lk), &w));
    double s[64];
    cr_assert(Lk <= 64);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            size_t valid = naive_valid(vl, b, i, Lk);
            double m = -INFINITY, sum = 0;
            for (size_t j = 0; j < Lk; j++) {
                s[j] = !valid ? 0.0
                       : j < valid ? scale * *TENSOR_AT(x, b, i, j) : -INFINITY;
                m = s[j] > m ? s[j] : m;
            }
            for (size_t j = 0; j < Lk; j++)
                sum += exp(s[j] - m);
            for (size_t j = 0; j < Lk; j++)
                *TENSOR_AT(w, b, i, j) = exp(s[j] - m) / sum;
        }
    return w;
}

/* --- softmax over the last axis ------------------------------------- */

Test(softmax, rows_sum_to_one_for_every_ndim)
{
    const size_t shapes[][4] = {{7}, {3, 50}, {2, 3, 17}, {2, 2, 3, 101}};
    for (size_t c = 0; c < 4; c++) {
        size_t ndim = c + 1;
        tensor *x = uniform_tensor(ndim, shapes[c], 10 + c, -8, 8), *w;
        OK(softmax_lastdim(x, &w));
        cr_assert(tensor_same_shape(w, x));
        assert_rows_sum_to_one(w);
        FREE_ALL(x, w);
    }
}

Test(softmax, values_by_hand)
{
    // (0, log 2, log 5) -> (1, 2, 5) / 8; a constant row -> uniform
    const double v[] = {0, log(2.0), log(5.0), 3, 3, 3};
    tensor *x = make(SHAPE(2, 3), v), *w;
    OK(softmax_lastdim(x, &w));
    const double want[] = {1.0 / 8, 2.0 / 8, 5.0 / 8, 1.0 / 3, 1.0 / 3, 1.0 / 3};
    for (size_t k = 0; k < 6; k++)
        cr_assert(fabs(w->data[k] - want[k]) <= 2 * DBL_EPSILON * want[k],
                  "w[%zu] = %.17g, want %.17g", k, w->data[k], want[k]);
    FREE_ALL(x, w);
}

Test(softmax, large_logits_give_no_inf_or_nan)
{
    // rows: +-1000; +-1e300 mixed with 0; all -1e300; +-1e308 (their
    // difference overflows to -inf, whose exp is a clean 0)
    const double v[] = {1000, -1000, 0,     999,  1e300,  -1e300,
                        1e300, 0,    -1e300, -1e300, -1e300, -1e300,
                        1e308, -1e308, -1e308, 1e308};
    tensor *x = make(SHAPE(4, 4), v), *w;
    OK(softmax_lastdim(x, &w));
    assert_all_finite(w);
    assert_rows_sum_to_one(w);
    // row 0: exp(-1000) and exp(-1999) underflow; 1000 and 999 share the
    // weight as 1 : e^-1
    double e = exp(-1.0);
    const double want[] = {1 / (1 + e), 0, 0, e / (1 + e), 0.5, 0,   0.5,  0,
                           0.25,        0.25, 0.25, 0.25,  0.5, 0, 0, 0.5};
    for (size_t k = 0; k < 16; k++)
        cr_assert(fabs(w->data[k] - want[k]) <= 2 * DBL_EPSILON,
                  "w[%zu] = %.17g, want %.17g", k, w->data[k], want[k]);
    FREE_ALL(x, w);
}

Test(softmax, strided_input_equals_its_contiguous_copy)
{
    // x is (3, 5, 4) permuted to (4, 5, 3): the softmax axis has stride 20
    tensor *base = uniform_tensor(SHAPE(3, 5, 4), 7, -3, 3), *x, *packed;
    OK(tensor_permute(base, SHAPE(2, 1, 0), &x));
    OK(tensor_contiguous(x, &packed));
    tensor *w, *w_packed;
    OK(softmax_lastdim(x, &w));
    OK(softmax_lastdim(packed, &w_packed));
    cr_assert(tensor_same_shape(w, x));
    cr_assert_eq(rel_error(w, w_packed), 0.0);
    FREE_ALL(base, x, packed, w, w_packed);
}

/* --- masked softmax: d2l's examples --------------------------------- */

/* d2l's (2, 2, 4) uniform scores; w[b, i, j] must be 0.0 exactly for
 * j >= valid, the rest must match the naive loop and sum to 1. */
static void check_d2l_example(const tensor *vl, const size_t valid[2][2])
{
    tensor *x = uniform_tensor(SHAPE(2, 2, 4), 2024, 0, 1), *w;
    OK(masked_softmax(x, vl, &w));
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 2; i++)
            for (size_t j = 0; j < 4; j++) {
                double wij = *TENSOR_AT(w, b, i, j);
                if (j >= valid[b][i])
                    cr_assert(wij == 0.0, "w[%zu, %zu, %zu] = %g", b, i, j, wij);
                else
                    cr_assert(wij > 0.0);
            }
    assert_rows_sum_to_one(w);
    tensor *ref = naive_masked_softmax(x, 1.0, vl);
    cr_assert_leq(rel_error(w, ref), 1e-15);
    FREE_ALL(x, w, ref);
}

Test(masked_softmax, d2l_example_1d_valid_lens)
{
    tensor *vl = make(SHAPE(2), ((const double[]){2, 3}));
    check_d2l_example(vl, (const size_t[2][2]){{2, 2}, {3, 3}});
    tensor_free(vl);
}

Test(masked_softmax, d2l_example_2d_valid_lens)
{
    tensor *vl = make(SHAPE(2, 2), ((const double[]){1, 3, 2, 4}));
    check_d2l_example(vl, (const size_t[2][2]){{1, 3}, {2, 4}});
    tensor_free(vl);
}

Test(masked_softmax, values_by_hand)
{
    // row (0, log 3, 5, 7) with valid_len 2: (1, 3) / 4 then zeros;
    // the same row with valid_len 4: (1, 3, e^5, e^7) / (4 + e^5 + e^7)
    const double v[] = {0, log(3.0), 5, 7, 0, log(3.0), 5, 7};
    tensor *x = make(SHAPE(1, 2, 4), v), *w;
    tensor *vl = make(SHAPE(1, 2), ((const double[]){2, 4}));
    OK(masked_softmax(x, vl, &w));
    double z = 4 + exp(5.0) + exp(7.0);
    const double want[] = {0.25, 0.75, 0, 0, 1 / z, 3 / z, exp(5.0) / z,
                           exp(7.0) / z};
    for (size_t k = 0; k < 8; k++)
        cr_assert(fabs(w->data[k] - want[k]) <= 4 * DBL_EPSILON * want[k],
                  "w[%zu] = %.17g, want %.17g", k, w->data[k], want[k]);
    FREE_ALL(x, vl, w);
}

Test(masked_softmax, valid_len_zero_gives_uniform_weights)
{
    // a row that sees no key: each of the Lk = 7 keys gets 1/7
    tensor *x = uniform_tensor(SHAPE(2, 3, 7), 5, -50, 50), *w;
    tensor *vl = make(SHAPE(2), ((const double[]){0, 0}));
    OK(masked_softmax(x, vl, &w));
    for (size_t k = 0; k < tensor_numel(w); k++)
        cr_assert_eq(w->data[k], 1.0 / 7, "w[%zu] = %.17g", k, w->data[k]);
    FREE_ALL(x, vl, w);
}

Test(masked_softmax, masked_weights_are_exactly_zero)
{
    // scores up to +-40 and a wide row: masked weights are 0.0, not tiny
    tensor *x = uniform_tensor(SHAPE(3, 4, 60), 8, -40, 40), *w;
    tensor *vl = make(SHAPE(3), ((const double[]){1, 31, 59}));
    OK(masked_softmax(x, vl, &w));
    const size_t valid[] = {1, 31, 59};
    for (size_t b = 0; b < 3; b++)
        for (size_t i = 0; i < 4; i++) {
            for (size_t j = valid[b]; j < 60; j++)
                cr_assert(*TENSOR_AT(w, b, i, j) == 0.0);
            if (valid[b] == 1)
                cr_assert_eq(*TENSOR_AT(w, b, i, 0), 1.0);
        }
    assert_rows_sum_to_one(w);
    FREE_ALL(x, vl, w);
}

Test(masked_softmax, large_logits_with_a_mask)
{
    const double v[] = {1000,   -1000, 1e300,  -1e300, /* valid 3 */
                        1000,   1e300, -1e300, 1e300,  /* valid 1 */
                        -1000,  1000,  -1e300, 1e300}; /* valid 0 */
    tensor *x = make(SHAPE(3, 1, 4), v), *w;
    tensor *vl = make(SHAPE(3), ((const double[]){3, 1, 0}));
    OK(masked_softmax(x, vl, &w));
    assert_all_finite(w);
    assert_rows_sum_to_one(w);
    const double want[] = {0, 0, 1, 0, 1, 0, 0, 0, 0.25, 0.25, 0.25, 0.25};
    for (size_t k = 0; k < 12; k++)
        cr_assert_eq(w->data[k], want[k], "w[%zu] = %.17g", k, w->data[k]);
    FREE_ALL(x, vl, w);
}

Test(masked_softmax, masked_keys_get_nothing_below_minus_1e6)
{
    // d2l's corner: with -1e6 filled in, valid scores of -2e6 would lose
    // to the masked keys ({0, 0, 0.5, 0.5}); masked keys take no part here
    const double v[] = {-2e6, -2e6, 0, 0};
    tensor *x = make(SHAPE(1, 1, 4), v), *w;
    tensor *vl = make(SHAPE(1), ((const double[]){2}));
    OK(masked_softmax(x, vl, &w));
    const double want[] = {0.5, 0.5, 0, 0};
    for (size_t k = 0; k < 4; k++)
        cr_assert_eq(w->data[k], want[k], "w[%zu] = %.17g", k, w->data[k]);
    FREE_ALL(x, vl, w);
}

/* --- masked softmax: 1-D and 2-D valid_lens, scale, strides --------- */

Test(masked_softmax, valid_lens_1d_and_2d_agree_with_the_naive_loop)
{
    size_t B = 3, Lq = 5, Lk = 7;
    tensor *x = uniform_tensor(SHAPE(B, Lq, Lk), 11, -5, 5);
    // 1-D (B,): each example one length
    tensor *vl1 = make(SHAPE(3), ((const double[]){0, 4, 7}));
    // 2-D (B, Lq): the same lengths repeated down each example's rows
    tensor *vl_rep = make(SHAPE(3, 5), ((const double[]){0, 0, 0, 0, 0, 4, 4, 4,
                                                         4, 4, 7, 7, 7, 7, 7}));
    // 2-D (B, Lq): a different length on every row
    tensor *vl2 = make(SHAPE(3, 5), ((const double[]){1, 2, 3, 4, 5, 7, 6, 0,
                                                      3, 1, 2, 2, 7, 5, 0}));
    tensor *w1, *w_rep, *w2;
    OK(masked_softmax(x, vl1, &w1));
    OK(masked_softmax(x, vl_rep, &w_rep));
    OK(masked_softmax(x, vl2, &w2));
    cr_assert_eq(rel_error(w1, w_rep), 0.0);

    tensor *ref1 = naive_masked_softmax(x, 1.0, vl1);
    tensor *ref2 = naive_masked_softmax(x, 1.0, vl2);
    cr_assert_leq(rel_error(w1, ref1), 1e-15);
    cr_assert_leq(rel_error(w2, ref2), 1e-15);
    assert_rows_sum_to_one(w1);
    assert_rows_sum_to_one(w2);
    // masked keys weigh 0.0; a row with valid_len 0 is uniform instead
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            size_t valid = naive_valid(vl2, b, i, Lk);
            for (size_t j = valid; j < Lk; j++)
                cr_assert(*TENSOR_AT(w2, b, i, j) == (valid ? 0.0 : 1.0 / 7));
        }

    tensor *t[] = {x, vl1, vl_rep, vl2, w1, w_rep, w2, ref1, ref2};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        tensor_free(t[k]);
}

Test(masked_softmax, no_mask_is_the_plain_softmax)
{
    tensor *x = uniform_tensor(SHAPE(2, 3, 9), 12, -4, 4), *w, *plain;
    OK(masked_softmax(x, NULL, &w));
    OK(softmax_lastdim(x, &plain));
    cr_assert_eq(rel_error(w, plain), 0.0);
    FREE_ALL(x, w, plain);
}

Test(masked_softmax, scaled_equals_scaling_first_and_masks_after)
{
    size_t B = 2, Lq = 3, Lk = 6;
    double scale = 1 / sqrt(6.0);
    tensor *x = uniform_tensor(SHAPE(B, Lq, Lk), 13, -9, 9), *xs;
    OK(tensor_contiguous(x, &xs));
    for (size_t k = 0; k < tensor_numel(xs); k++)
        xs->data[k] *= scale;
    tensor *vl = make(SHAPE(2, 3), ((const double[]){6, 1, 3, 0, 2, 5}));
    tensor *fused, *after;
    OK(masked_softmax_scaled(x, scale, vl, &fused));
    OK(masked_softmax(xs, vl, &after));
    cr_assert_eq(rel_error(fused, after), 0.0);
    tensor *ref = naive_masked_softmax(x, scale, vl);
    cr_assert_leq(rel_error(fused, ref), 1e-15);

    // a tiny scale: were the mask scaled too, -1e6 * 1e-9 would not vanish
    tensor *tiny;
    OK(masked_softmax_scaled(x, 1e-9, vl, &tiny));
    for (size_t j = 3; j < Lk; j++)
        cr_assert(*TENSOR_AT(tiny, 0, 2, j) == 0.0);
    tensor *t[] = {x, xs, vl, fused, after, ref, tiny};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        tensor_free(t[k]);
}

Test(masked_softmax, strided_scores_and_valid_lens)
{
    // scores (2, 4, 3) permuted to (2, 3, 4); valid_lens (3, 2) permuted
    // to (2, 3): both read through their strides
    tensor *base = uniform_tensor(SHAPE(2, 4, 3), 14, -2, 2), *x, *xc;
    OK(tensor_permute(base, SHAPE(0, 2, 1), &x));
    OK(tensor_contiguous(x, &xc));
    tensor *vl_base = make(SHAPE(3, 2), ((const double[]){1, 4, 2, 0, 3, 2}));
    tensor *vl, *vlc;
    OK(tensor_permute(vl_base, SHAPE(1, 0), &vl));
    OK(tensor_contiguous(vl, &vlc));
    tensor *w, *wc;
    OK(masked_softmax(x, vl, &w));
    OK(masked_softmax(xc, vlc, &wc));
    cr_assert_eq(rel_error(w, wc), 0.0);
    tensor *ref = naive_masked_softmax(x, 1.0, vl);
    cr_assert_leq(rel_error(w, ref), 1e-15);
    tensor *t[] = {base, x, xc, vl_base, vl, vlc, w, wc, ref};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        tensor_free(t[k]);
}

Test(masked_softmax, inputs_are_not_modified)
{
    tensor *x = uniform_tensor(SHAPE(2, 2, 4), 15, -3, 3), *before, *w;
    tensor *vl = make(SHAPE(2), ((const double[]){1, 3})), *vl_before;
    OK(tensor_contiguous(x, &before));
    OK(tensor_contiguous(vl, &vl_before));
    OK(masked_softmax_scaled(x, 0.5, vl, &w));
    cr_assert(w->data != x->data);
    cr_assert_eq(rel_error(x, before), 0.0);
    cr_assert_eq(rel_error(vl, vl_before), 0.0);
    tensor *t[] = {x, before, vl, vl_before, w};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        tensor_free(t[k]);
}

Test(masked_softmax, keeps_the_dimension_names)
{
    tensor *x = uniform_tensor(SHAPE(2, 1, 3), 16, 0, 1), *w;
    OK(tensor_set_names(x, "B, Lq, Lk"));
    OK(masked_softmax(x, NULL, &w));
    char sym[TRACE_SHAPE_MAX];
    cr_assert_str_eq(tensor_sym_str(w, sym, sizeof sym), "(B, Lq, Lk)");
    FREE_ALL(x, w);
}

/* --- causal masks --------------------------------------------------- */

/* The length of row (b, i): one per example for (B,) (the same for every
 * query), one per row for (B, Lq), read through the strides; every key
 * without valid_lens. */
Test(masked_softmax, the_valid_length_of_a_row)
{
    tensor *per_example, *per_row, *transposed;
    OK(tensor_from_array(SHAPE(2), (double[]){3, 0}, &per_example));
    OK(tensor_from_array(SHAPE(3, 2), (double[]){1, 2, 3, 4, 5, 0},
                         &transposed));
    OK(tensor_permute(transposed, SHAPE(1, 0), &per_row)); /* (2, 3) */
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(softmax_valid_len(per_example, 0, i, 5), 3);
        cr_assert_eq(softmax_valid_len(per_example, 1, i, 5), 0);
        cr_assert_eq(softmax_valid_len(NULL, 1, i, 5), 5);
    }
    const size_t want[2][3] = {{1, 3, 5}, {2, 4, 0}};
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 3; i++)
            cr_assert_eq(softmax_valid_len(per_row, b, i, 5), want[b][i]);
    FREE_ALL(per_example, per_row, transposed);
}

/* The rules for valid_lens, found in row-major order: the shape first,
 * then the first entry that is not a whole number in min_len .. Lk. */
Test(masked_softmax, the_first_bad_length)
{
    tensor *lens;
    size_t b = 9, i = 9;
    cr_assert_eq(softmax_find_bad_len(NULL, 2, 3, 4, 1, &b, &i),
                 SOFTMAX_LENS_FINE);
    OK(tensor_from_array(SHAPE(2, 3), (double[]){1, 4, 2, 0, 3, 4}, &lens));
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 4, 0, &b, &i),
                 SOFTMAX_LENS_FINE);
    cr_assert_eq(b, 0);
    cr_assert_eq(i, 0);
    cr_assert_eq(softmax_find_bad_len(lens, 2, 2, 4, 0, &b, &i),
                 SOFTMAX_LENS_SHAPE);
    cr_assert_eq(softmax_find_bad_len(lens, 3, 3, 4, 0, &b, &i),
                 SOFTMAX_LENS_SHAPE);
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 4, 1, &b, &i),
                 SOFTMAX_LEN_TOO_SMALL);
    cr_assert(b == 1 && i == 0);
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 3, 0, &b, &i),
                 SOFTMAX_LEN_TOO_LARGE);
    cr_assert(b == 0 && i == 1);
    lens->data[4] = -1; /* after the 4 at (0, 1): that one comes first */
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 3, 0, &b, &i),
                 SOFTMAX_LEN_TOO_LARGE);
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 4, 0, &b, &i),
                 SOFTMAX_LEN_NEGATIVE);
    cr_assert(b == 1 && i == 1);
    lens->data[2] = NAN;
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 4, 0, &b, &i),
                 SOFTMAX_LEN_NOT_WHOLE);
    cr_assert(b == 0 && i == 2);
    char at[48];
    cr_assert_str_eq(softmax_len_index(lens, 1, 2, at, sizeof at), "1, 2");
    tensor_free(lens);
    OK(tensor_from_array(SHAPE(2), (double[]){2.5, 1}, &lens));
    cr_assert_eq(softmax_find_bad_len(lens, 2, 3, 4, 0, &b, &i),
                 SOFTMAX_LEN_NOT_WHOLE);
    cr_assert(b == 0 && i == 0);
    cr_assert_str_eq(softmax_len_index(lens, 1, 0, at, sizeof at), "1");
    tensor_free(lens);
}

Test(causal_valid_lens, rows_count_one_to_len)
{
    tensor *vl;
    OK(causal_valid_lens(2, 4, &vl));
    assert_shape(vl, SHAPE(2, 4));
    const double want[] = {1, 2, 3, 4, 1, 2, 3, 4};
    for (size_t k = 0; k < 8; k++)
        cr_assert_eq(vl->data[k], want[k]);
    tensor_free(vl);
}

Test(causal_valid_lens, as_a_mask_it_hides_the_future)
{
    // query i sees keys 0 .. i: the weights are lower triangular
    tensor *x = uniform_tensor(SHAPE(2, 5, 5), 17, -1, 1), *vl, *w;
    OK(causal_valid_lens(2, 5, &vl));
    OK(masked_softmax(x, vl, &w));
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 5; i++)
            for (size_t j = 0; j < 5; j++)
                cr_assert(j > i ? *TENSOR_AT(w, b, i, j) == 0.0
                                : *TENSOR_AT(w, b, i, j) > 0.0);
    cr_assert_eq(*TENSOR_AT(w, 1, 0, 0), 1.0);
    assert_rows_sum_to_one(w);
    FREE_ALL(x, vl, w);
}

/* --- errors --------------------------------------------------------- */

/* masked_softmax(x, vl) on scores (2, 2, 4) fails with status and msg,
 * and leaves out NULL. */
static void masked_fails(const tensor *vl, int status, const char *msg)
{
    tensor *x = uniform_tensor(SHAPE(2, 2, 4), 18, 0, 1);
    tensor *w = x; /* anything but NULL */
    FAILS(masked_softmax(x, vl, &w), status, msg);
    cr_assert_null(w);
    tensor_free(x);
}

Test(masked_softmax_errors, valid_len_larger_than_the_number_of_keys)
{
    tensor *vl = make(SHAPE(2), ((const double[]){2, 7}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[1] = 7 is larger than the number "
                 "of keys 4 (scores (2, 2, 4), valid_lens (2,))");
    tensor_free(vl);
}

Test(masked_softmax_errors, negative_valid_len)
{
    tensor *vl = make(SHAPE(2), ((const double[]){-1, 2}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[0] = -1 is negative "
                 "(scores (2, 2, 4), valid_lens (2,))");
    tensor_free(vl);
}

Test(masked_softmax_errors, fractional_valid_len)
{
    tensor *vl = make(SHAPE(2, 2), ((const double[]){1, 2, 2.5, 3}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[1, 0] = 2.5 is not a whole number "
                 "(scores (2, 2, 4), valid_lens (2, 2))");
    tensor_free(vl);
}

/* The length as it is: one ulp above 2 is not shown as 2. */
Test(masked_softmax_errors, nearly_whole_valid_len)
{
    tensor *vl = make(SHAPE(2), ((const double[]){2.0000000000000004, 3}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[0] = 2.0000000000000004 is not a "
                 "whole number (scores (2, 2, 4), valid_lens (2,))");
    tensor_free(vl);
}

Test(masked_softmax_errors, nan_valid_len)
{
    tensor *vl = make(SHAPE(2, 2), ((const double[]){1, NAN, 2, 3}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[0, 1] = nan is not a whole number "
                 "(scores (2, 2, 4), valid_lens (2, 2))");
    tensor_free(vl);
}

Test(masked_softmax_errors, infinite_valid_len)
{
    tensor *vl = make(SHAPE(2), ((const double[]){INFINITY, 1}));
    masked_fails(vl, GSL_EINVAL,
                 "masked_softmax: valid_lens[0] = inf is larger than the "
                 "number of keys 4 (scores (2, 2, 4), valid_lens (2,))");
    tensor_free(vl);
}

Test(masked_softmax_errors, valid_lens_for_another_batch)
{
    tensor *vl = make(SHAPE(3), ((const double[]){1, 2, 3}));
    masked_fails(vl, GSL_EBADLEN,
                 "masked_softmax: valid_lens has shape (3,), expected (2,) or "
                 "(2, 2) (scores (2, 2, 4))");
    tensor_free(vl);
}

Test(masked_softmax_errors, valid_lens_for_other_queries)
{
    tensor *vl;
    OK(tensor_alloc(SHAPE(2, 5), &vl));
    masked_fails(vl, GSL_EBADLEN,
                 "masked_softmax: valid_lens has shape (2, 5), expected (2,) or "
                 "(2, 2) (scores (2, 2, 4))");
    tensor_free(vl);
}

Test(masked_softmax_errors, valid_lens_with_three_dimensions)
{
    tensor *vl;
    OK(tensor_alloc(SHAPE(2, 2, 1), &vl));
    masked_fails(vl, GSL_EBADLEN,
                 "masked_softmax: valid_lens has shape (2, 2, 1), expected (2,) "
                 "or (2, 2) (scores (2, 2, 4))");
    tensor_free(vl);
}

Test(masked_softmax_errors, scores_not_3d)
{
    tensor *x, *w = NULL;
    OK(tensor_alloc(SHAPE(2, 4), &x));
    w = x;
    FAILS(masked_softmax(x, NULL, &w), GSL_EBADLEN,
          "masked_softmax: scores must be 3-D (B, Lq, Lk), got shape (2, 4)");
    cr_assert_null(w);
    tensor_free(x);
}

Test(masked_softmax_errors, null_scores)
{
    tensor *w;
    FAILS(masked_softmax(NULL, NULL, &w), GSL_EINVAL,
          "masked_softmax: scores is NULL");
    cr_assert_null(w);
    FAILS(softmax_lastdim(NULL, &w), GSL_EINVAL, "softmax_lastdim: x is NULL");
    cr_assert_null(w);
}

Test(masked_softmax_errors, scale_not_finite)
{
    tensor *x, *w;
    OK(tensor_alloc(SHAPE(2, 2, 4), &x));
    FAILS(masked_softmax_scaled(x, INFINITY, NULL, &w), GSL_EINVAL,
          "masked_softmax_scaled: scale inf is not finite (scores (2, 2, 4))");
    cr_assert_null(w);
    FAILS(masked_softmax_scaled(x, NAN, NULL, &w), GSL_EINVAL,
          "masked_softmax_scaled: scale nan is not finite (scores (2, 2, 4))");
    tensor_free(x);
}

Test(masked_softmax_errors, scaled_names_itself)
{
    tensor *x, *w, *vl = make(SHAPE(2), ((const double[]){5, 1}));
    OK(tensor_alloc(SHAPE(2, 2, 4), &x));
    FAILS(masked_softmax_scaled(x, 0.5, vl, &w), GSL_EINVAL,
          "masked_softmax_scaled: valid_lens[0] = 5 is larger than the number "
          "of keys 4 (scores (2, 2, 4), valid_lens (2,))");
    FREE_ALL(x, vl);
}

Test(causal_valid_lens, empty_sizes_fail)
{
    tensor *vl;
    FAILS(causal_valid_lens(0, 4, &vl), GSL_EINVAL,
          "causal_valid_lens: batch 0 and len 4 must both be >= 1");
    cr_assert_null(vl);
    FAILS(causal_valid_lens(2, 0, &vl), GSL_EINVAL,
          "causal_valid_lens: batch 2 and len 0 must both be >= 1");
    cr_assert_null(vl);
}

/* --- out of memory -------------------------------------------------- */

/* Fail the k-th allocation for k = 0, 1, ... until the call succeeds:
 * every failure is GSL_ENOMEM with out NULL (leaks: valgrind, ASan). */
#define EVERY_ALLOCATION_FAILS(call, out)                                     \
    do {                                                                      \
        long failures_;                                                       \
        out = NULL;                                                           \
        EACH_ALLOCATION_FAILS(failures_, call, cr_assert_null(out));          \
        cr_assert_gt(failures_, 0, "no allocation was made to fail");         \
        tensor_free(out);                                                     \
    } while (0)

Test(softmax_memory, every_allocation_may_fail)
{
    tensor *x = uniform_tensor(SHAPE(2, 3, 4), 19, 0, 1), *w;
    tensor *vl = make(SHAPE(2), ((const double[]){1, 3}));
    EVERY_ALLOCATION_FAILS(softmax_lastdim(x, &w), w);
    EVERY_ALLOCATION_FAILS(masked_softmax(x, vl, &w), w);
    EVERY_ALLOCATION_FAILS(masked_softmax_scaled(x, 0.5, NULL, &w), w);
    EVERY_ALLOCATION_FAILS(causal_valid_lens(2, 3, &w), w);
    FREE_ALL(x, vl);
}

/* --- trace ---------------------------------------------------------- */

Test(softmax_trace, one_line_per_call)
{
    tensor *x = uniform_tensor(SHAPE(2, 2, 4), 20, 0, 1), *w1, *w2, *w3, *vl;
    OK(tensor_set_names(x, "B, Lq, Lk"));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(causal_valid_lens(2, 2, &vl));
    OK(masked_softmax(x, vl, &w1));
    OK(masked_softmax_scaled(x, 0.5, NULL, &w2));
    OK(softmax_lastdim(x, &w3));
    trace_to(NULL);
    cr_assert_str_eq(
        capture_end(&c),
        "causal_valid_lens(2, 2)  new   -> (2, 2)\n"
        "masked_softmax(valid_lens (2, 2)) new   (2, 2, 4) -> (2, 2, 4)"
        "              (B, Lq, Lk)\n"
        "masked_softmax(scale 0.5, no mask) new   (2, 2, 4) -> (2, 2, 4)"
        "              (B, Lq, Lk)\n"
        "softmax(dim=-1)          new   (2, 2, 4) -> (2, 2, 4)"
        "              (B, Lq, Lk)\n");
    capture_free(&c);
    tensor *t[] = {x, w1, w2, w3, vl};
    for (size_t k = 0; k < sizeof t / sizeof t[0]; k++)
        tensor_free(t[k]);
}
//<
