//> full
/* test_exercises.c: the tests of the coding exercises.
 *
 * Each suite ex_NAME checks one library function marked "@exercise NAME"
 * in src/, whose body `make handout` blanks for students.  A suite calls
 * only its own exercise (and no other exercise function), so a student's
 * `make grade` says exactly which exercises pass.  The expected values
 * come from index arithmetic written here, not from the library. */
#include "check.h"

/* Each assertion says what it expected and what it got: `make grade`
 * shows a student the first one that fails. */
#define EX_OK(call)                                                           \
    do {                                                                      \
        int ex_status_ = (call);                                              \
        cr_assert_eq(ex_status_, GSL_SUCCESS,                                 \
                     "%s: expected status 0 (GSL_SUCCESS), got %d: %s",       \
                     #call, ex_status_, mha_last_error());                    \
    } while (0)
#define EX_SIZE(got, want)                                                    \
    cr_assert_eq((size_t)(got), (size_t)(want), "%s: expected %zu, got %zu",  \
                 #got, (size_t)(want), (size_t)(got))
#define EX_VALUE(got, want)                                                   \
    cr_assert_eq((double)(got), (double)(want),                               \
                 "%s: expected %g, got %g", #got, (double)(want),             \
                 (double)(got))
#define EX_REFUSES(call)                                                      \
    cr_assert_neq((call), GSL_SUCCESS,                                        \
                  "%s: expected an error status, got 0 (GSL_SUCCESS)", #call)

/* --- ex_causal_valid_lens (chapter 03) ------------------------------- */

Test(ex_causal_valid_lens, rows_count_up_to_len)
{
    tensor *lens;
    EX_OK(causal_valid_lens(3, 5, &lens));
    EX_SIZE(lens->ndim, 2);
    EX_SIZE(lens->shape[0], 3);
    EX_SIZE(lens->shape[1], 5);
    for (size_t b = 0; b < 3; b++)
        for (size_t i = 0; i < 5; i++)
            EX_VALUE(*TENSOR_AT(lens, b, i), i + 1);
    tensor_free(lens);
}

/* A value first, so that a blank that fails everything passes nothing. */
Test(ex_causal_valid_lens, refuses_zero_sizes)
{
    tensor *lens;
    EX_OK(causal_valid_lens(1, 2, &lens));
    EX_VALUE(lens->data[1], 2);
    tensor_free(lens);
    EX_REFUSES(causal_valid_lens(0, 5, &lens));
    EX_REFUSES(causal_valid_lens(2, 0, &lens));
}

/* --- ex_linear_forward_naive (chapter 02) ---------------------------- */

Test(ex_linear_forward_naive, matches_hand_computed_values)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 1));
    double w[] = {1, 0, -1, 2, 1, 0}, b[] = {0.5, -1};
    memcpy(l.weight->data, w, sizeof w);
    memcpy(l.bias->data, b, sizeof b);
    tensor *x, *y;
    EX_OK(tensor_from_array(SHAPE(2, 1, 3), (double[]){1, 2, 3, -1, 0, 4}, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    EX_SIZE(y->ndim, 3);
    EX_SIZE(y->shape[2], 2);
    /* [1, 2, 3] -> [1 - 3 + 0.5, 2 + 2 - 1]; [-1, 0, 4] -> [-1 - 4 + 0.5, -2 - 1] */
    double want[] = {-1.5, 3, -4.5, -3};
    for (size_t i = 0; i < 4; i++)
        cr_assert_float_eq(y->data[i], want[i], 1e-15,
                           "y->data[%zu]: expected %g, got %g", i, want[i],
                           y->data[i]);
    tensor_free(x);
    tensor_free(y);
    linear_free(&l);
}

Test(ex_linear_forward_naive, refuses_a_feature_mismatch)
{
    linear l;
    EX_OK(linear_init(&l, "W", 3, 2, 0));
    double w[] = {1, 0, -1, 2, 1, 0};
    memcpy(l.weight->data, w, sizeof w);
    tensor *x, *y;
    // a value first: [1, 2, 3] -> [1 - 3, 2 + 2]
    EX_OK(tensor_from_array(SHAPE(1, 3), (double[]){1, 2, 3}, &x));
    EX_OK(linear_forward_naive(&l, x, &y));
    EX_VALUE(y->data[1], 4);
    tensor_free(x);
    tensor_free(y);
    EX_OK(tensor_alloc(SHAPE(2, 4), &x));
    EX_REFUSES(linear_forward_naive(&l, x, &y));
    tensor_free(x);
    linear_free(&l);
}

/* --- ex_transpose_qkv (chapter 06) ----------------------------------- */

Test(ex_transpose_qkv, every_number_lands_where_it_should)
{
    const size_t B = 2, n = 3, d = 8, h = 4, p = d / h;
    tensor *x, *heads;
    EX_OK(tensor_alloc(SHAPE(B, n, d), &x));
    tensor_fill_arange(x, 0, 1);
    EX_OK(transpose_qkv(x, h, &heads));
    EX_SIZE(heads->ndim, 3);
    EX_SIZE(heads->shape[0], B * h);
    EX_SIZE(heads->shape[1], n);
    EX_SIZE(heads->shape[2], p);
    /* x[b, i, j] = (b*n + i)*d + j lands at [b*h + j/p, i, j % p] */
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < d; j++)
                EX_VALUE(*TENSOR_AT(heads, b * h + j / p, i, j % p),
                         (b * n + i) * d + j);
    tensor_free(x);
    tensor_free(heads);
}

Test(ex_transpose_qkv, refuses_heads_that_do_not_divide)
{
    tensor *x, *heads;
    // a value first: x (1, 2, 4) = 0..7 in 2 heads; head 1 of row 0 is 2, 3
    EX_OK(tensor_alloc(SHAPE(1, 2, 4), &x));
    tensor_fill_arange(x, 0, 1);
    EX_OK(transpose_qkv(x, 2, &heads));
    EX_VALUE(*TENSOR_AT(heads, 1, 0, 0), 2);
    tensor_free(x);
    tensor_free(heads);
    EX_OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    EX_REFUSES(transpose_qkv(x, 3, &heads));
    tensor_free(x);
}

/* --- ex_transpose_output (chapter 06) -------------------------------- */

Test(ex_transpose_output, heads_go_back_side_by_side)
{
    const size_t B = 2, n = 3, h = 4, p = 2;
    tensor *heads, *joined;
    EX_OK(tensor_alloc(SHAPE(B * h, n, p), &heads));
    tensor_fill_arange(heads, 0, 1);
    EX_OK(transpose_output(heads, h, &joined));
    EX_SIZE(joined->ndim, 3);
    EX_SIZE(joined->shape[0], B);
    EX_SIZE(joined->shape[1], n);
    EX_SIZE(joined->shape[2], h * p);
    /* heads[r, i, j] = (r*n + i)*p + j, row r = b*h + head, goes to
     * joined[b, i, head*p + j] */
    for (size_t r = 0; r < B * h; r++)
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < p; j++)
                EX_VALUE(*TENSOR_AT(joined, r / h, i, (r % h) * p + j),
                         (r * n + i) * p + j);
    tensor_free(heads);
    tensor_free(joined);
}

Test(ex_transpose_output, refuses_a_batch_that_does_not_divide)
{
    tensor *heads, *joined;
    // a value first: 2 heads of (1, 1), 0 and 1, side by side
    EX_OK(tensor_alloc(SHAPE(2, 1, 1), &heads));
    tensor_fill_arange(heads, 0, 1);
    EX_OK(transpose_output(heads, 2, &joined));
    EX_VALUE(*TENSOR_AT(joined, 0, 0, 1), 1);
    tensor_free(heads);
    tensor_free(joined);
    EX_OK(tensor_alloc(SHAPE(6, 2, 2), &heads));
    EX_REFUSES(transpose_output(heads, 4, &joined));
    tensor_free(heads);
}

/* --- ex_repeat_valid_lens (chapter 07) ------------------------------- */

Test(ex_repeat_valid_lens, one_length_per_example)
{
    tensor *lens, *out;
    EX_OK(tensor_from_array(SHAPE(3), (double[]){4, 1, 2}, &lens));
    EX_OK(repeat_valid_lens(lens, 2, &out));
    EX_SIZE(out->ndim, 1);
    EX_SIZE(out->shape[0], 6);
    double want[] = {4, 4, 1, 1, 2, 2}; /* not 4, 1, 2, 4, 1, 2 */
    for (size_t i = 0; i < 6; i++)
        EX_VALUE(out->data[i], want[i]);
    tensor_free(lens);
    tensor_free(out);
}

Test(ex_repeat_valid_lens, one_length_per_query)
{
    tensor *lens, *out;
    EX_OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 3, 2, 4}, &lens));
    EX_OK(repeat_valid_lens(lens, 3, &out));
    EX_SIZE(out->ndim, 2);
    EX_SIZE(out->shape[0], 6);
    EX_SIZE(out->shape[1], 2);
    for (size_t r = 0; r < 6; r++) {
        cr_assert_eq(*TENSOR_AT(out, r, 0), r < 3 ? 1.0 : 2.0, "row %zu", r);
        cr_assert_eq(*TENSOR_AT(out, r, 1), r < 3 ? 3.0 : 4.0, "row %zu", r);
    }
    tensor_free(lens);
    tensor_free(out);
}

/* --- ex_rope_rotate_pair (chapter 15) -------------------------------- */

/* A quarter turn takes (1, 0) to (0, 1) and (0, 1) to (-1, 0). */
Test(ex_rope_rotate_pair, quarter_and_half_turns)
{
    double y0 = 7, y1 = 7;
    EX_OK(rope_rotate_pair(1, 0, M_PI / 2, &y0, &y1));
    cr_assert_float_eq(y0, 0.0, 1e-15, "y0: expected 0, got %g", y0);
    cr_assert_float_eq(y1, 1.0, 1e-15, "y1: expected 1, got %g", y1);
    EX_OK(rope_rotate_pair(0, 1, M_PI / 2, &y0, &y1));
    cr_assert_float_eq(y0, -1.0, 1e-15, "y0: expected -1, got %g", y0);
    cr_assert_float_eq(y1, 0.0, 1e-15, "y1: expected 0, got %g", y1);
    EX_OK(rope_rotate_pair(3, -2, M_PI, &y0, &y1));
    cr_assert_float_eq(y0, -3.0, 1e-15, "y0: expected -3, got %g", y0);
    cr_assert_float_eq(y1, 2.0, 1e-15, "y1: expected 2, got %g", y1);
}

/* Any angle: cos and sin worked out here; the length stays. */
Test(ex_rope_rotate_pair, any_angle_keeps_the_length)
{
    double y0, y1, a = 0.3;
    EX_OK(rope_rotate_pair(2, 1, a, &y0, &y1));
    double w0 = 2 * cos(a) - sin(a), w1 = 2 * sin(a) + cos(a);
    cr_assert_float_eq(y0, w0, 1e-15, "y0: expected %.17g, got %.17g", w0, y0);
    cr_assert_float_eq(y1, w1, 1e-15, "y1: expected %.17g, got %.17g", w1, y1);
    cr_assert_float_eq(y0 * y0 + y1 * y1, 5.0, 1e-14,
                       "length^2: expected 5, got %.17g", y0 * y0 + y1 * y1);
}

/* --- ex_gqa_kv_head (chapter 17) ------------------------------------- */

/* Head i of h reads key-value head floor(i * G / h): the groups are runs
 * of h/G consecutive heads. */
Test(ex_gqa_kv_head, consecutive_heads_share_a_group)
{
    size_t kv;
    size_t want_g2[8] = {0, 0, 0, 0, 1, 1, 1, 1}; /* not 0, 1, 0, 1, ... */
    for (size_t i = 0; i < 8; i++) {
        EX_OK(gqa_kv_head(i, 8, 2, &kv));
        EX_SIZE(kv, want_g2[i]);
    }
    for (size_t i = 0; i < 12; i++) {
        EX_OK(gqa_kv_head(i, 12, 3, &kv));
        EX_SIZE(kv, i * 3 / 12);
    }
}

Test(ex_gqa_kv_head, one_head_each_and_one_for_all)
{
    size_t kv;
    for (size_t i = 0; i < 6; i++) {
        EX_OK(gqa_kv_head(i, 6, 6, &kv)); /* multi-head: its own */
        EX_SIZE(kv, i);
        kv = 99;
        EX_OK(gqa_kv_head(i, 6, 0, &kv)); /* kv_heads 0 means num_heads */
        EX_SIZE(kv, i);
        EX_OK(gqa_kv_head(i, 6, 1, &kv)); /* multi-query: the only one */
        EX_SIZE(kv, 0);
    }
}

/* A value first, so that a blank that fails everything passes nothing. */
Test(ex_gqa_kv_head, refuses_groups_that_do_not_divide)
{
    size_t kv;
    EX_OK(gqa_kv_head(5, 8, 4, &kv));
    EX_SIZE(kv, 2);
    EX_REFUSES(gqa_kv_head(0, 8, 3, &kv));
    EX_REFUSES(gqa_kv_head(8, 8, 2, &kv));
    EX_REFUSES(gqa_kv_head(0, 0, 0, &kv));
}

/* --- ex_attention_madds (chapter 16) --------------------------------- */

/* The pairs counted one by one: query i sees key j under the causal mask
 * aligned at the end when j + n_q <= i + n_k. */
static double pairs_one_by_one(size_t n_q, size_t n_k, int causal)
{
    double n = 0;
    for (size_t i = 0; i < n_q; i++)
        for (size_t j = 0; j < n_k; j++)
            n += !causal || j + n_q <= i + n_k;
    return n;
}

Test(ex_attention_madds, one_new_query_meets_every_cached_key)
{
    double m;
    EX_OK(attention_madds(1, 7, 8, 1, &m));
    EX_VALUE(m, 2 * 8 * 7);
    EX_OK(attention_madds(1, 1, 4, 1, &m));
    EX_VALUE(m, 2 * 4);
    EX_OK(attention_madds(4, 4, 8, 0, &m)); /* recomputing: all 16 pairs */
    EX_VALUE(m, 2 * 8 * 16);
}

Test(ex_attention_madds, causal_counts_the_pairs_it_lets_through)
{
    double m;
    size_t sizes[][2] = {{3, 3}, {3, 8}, {1, 5}, {5, 5}, {6, 4}};
    for (size_t c = 0; c < sizeof sizes / sizeof sizes[0]; c++) {
        EX_OK(attention_madds(sizes[c][0], sizes[c][1], 6, 1, &m));
        EX_VALUE(m, 12 * pairs_one_by_one(sizes[c][0], sizes[c][1], 1));
        EX_OK(attention_madds(sizes[c][0], sizes[c][1], 6, 0, &m));
        EX_VALUE(m, 12 * pairs_one_by_one(sizes[c][0], sizes[c][1], 0));
    }
}

/* A value first, so that a blank that fails everything passes nothing. */
Test(ex_attention_madds, refuses_zero_sizes)
{
    double m;
    EX_OK(attention_madds(2, 2, 1, 1, &m));
    EX_VALUE(m, 6); /* pairs (0, 0), (1, 0), (1, 1) */
    EX_REFUSES(attention_madds(0, 2, 1, 1, &m));
    EX_REFUSES(attention_madds(2, 0, 1, 0, &m));
    EX_REFUSES(attention_madds(2, 2, 0, 1, &m));
}
/* --- ex_mask_key_padding_from_lens (chapter 18) --------------------------- */

/* Entry (b, j) is 1, True: ignore that key, exactly when j >= valid_lens[b]. */
Test(ex_mask_key_padding_from_lens, true_at_and_past_the_length)
{
    double lens[] = {3, 1, 5, 2};
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(4), lens, &vl));
    EX_OK(mask_key_padding_from_lens(vl, 5, &kpm));
    EX_SIZE(kpm->ndim, 2);
    EX_SIZE(kpm->shape[0], 4);
    EX_SIZE(kpm->shape[1], 5);
    for (size_t b = 0; b < 4; b++)
        for (size_t j = 0; j < 5; j++)
            EX_VALUE(*TENSOR_AT(kpm, b, j), (double)j >= lens[b] ? 1 : 0);
    tensor_free(kpm);
    tensor_free(vl);
}

/* A length of 0 ignores every key, a length of Lk none. */
Test(ex_mask_key_padding_from_lens, zero_and_full_lengths)
{
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(2), (double[]){0, 3}, &vl));
    EX_OK(mask_key_padding_from_lens(vl, 3, &kpm));
    for (size_t j = 0; j < 3; j++) {
        EX_VALUE(*TENSOR_AT(kpm, 0, j), 1);
        EX_VALUE(*TENSOR_AT(kpm, 1, j), 0);
    }
    tensor_free(kpm);
    tensor_free(vl);
}

/* A value first, so that a blank that fails everything passes nothing. */
Test(ex_mask_key_padding_from_lens, refuses_lengths_past_the_keys)
{
    tensor *vl, *kpm;
    EX_OK(tensor_from_array(SHAPE(1), (double[]){1}, &vl));
    EX_OK(mask_key_padding_from_lens(vl, 2, &kpm));
    EX_VALUE(*TENSOR_AT(kpm, 0, 1), 1);
    tensor_free(kpm);
    vl->data[0] = 3;
    EX_REFUSES(mask_key_padding_from_lens(vl, 2, &kpm));
    vl->data[0] = -1;
    EX_REFUSES(mask_key_padding_from_lens(vl, 2, &kpm));
    vl->data[0] = 0.5;
    EX_REFUSES(mask_key_padding_from_lens(vl, 2, &kpm));
    tensor_free(vl);
}
//<
