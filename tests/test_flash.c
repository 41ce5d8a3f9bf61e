//> 12
/* test_flash.c: online softmax by hand; flash_attention_forward ==
 * dot_attention_forward (exact attention) == plain loops written here,
 * over shapes, masks (none, (B,), (B, Lq), causal) and tile sizes that do
 * not divide L; d2l's corner where masked keys win; strided inputs, the
 * trace, errors and failed allocations.
 *
 * Shapes: queries (B, Lq, d), keys (B, Lk, d), values (B, Lk, dv),
 * out (B, Lq, dv). */
#include "check.h"

#include <criterion/parameterized.h>
#include <float.h>

/* --- online softmax and tiled attention ------------------------------ */

/* x = 1, 3 | 2, 5 in tiles of two.  Tile 1: m = 3, l = e^-2 + 1.  Tile 2
 * raises m to 5: alpha = e^-2, l = (e^-2 + 1) e^-2 + e^-3 + 1, which is
 * sum exp(x_j - 5) over all four. */
Test(flash, online_softmax_by_hand)
{
    double x[4] = {1, 3, 2, 5};
    online_softmax s;
    online_softmax_init(&s);
    cr_assert_eq(s.max, -INFINITY);
    cr_assert_eq(s.sum, 0.0);
    double alpha = online_softmax_update(&s, x, 2);
    cr_assert_eq(alpha, 0.0);
    cr_assert_eq(s.max, 3.0);
    cr_assert(fabs(s.sum - (exp(-2.0) + 1)) <= 2 * DBL_EPSILON);
    alpha = online_softmax_update(&s, x + 2, 2);
    cr_assert(fabs(alpha - exp(-2.0)) <= DBL_EPSILON * exp(-2.0));
    cr_assert_eq(s.max, 5.0);
    double want = exp(-4.0) + exp(-2.0) + exp(-3.0) + 1.0;
    cr_assert(fabs(s.sum - want) <= 4 * DBL_EPSILON * want);
    // a tile that does not raise the max leaves alpha at 1
    double low[2] = {0, 4};
    cr_assert_eq(online_softmax_update(&s, low, 2), 1.0);
    cr_assert(fabs(s.sum - (want + exp(-5.0) + exp(-1.0))) <= 8 * DBL_EPSILON);
}

/* softmax(q k^T / sqrt(d), masked) v with plain loops, the exact way. */
static void naive_attention(const tensor *q, const tensor *k, const tensor *v,
                            const tensor *lens, tensor *out)
{
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    size_t d = q->shape[2], dv = v->shape[2];
    double *s = malloc(Lk * sizeof *s);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            size_t len = !lens ? Lk
                         : lens->ndim == 1 ? (size_t)*TENSOR_AT(lens, b)
                                           : (size_t)*TENSOR_AT(lens, b, i);
            double mx = -INFINITY, sum = 0;
            for (size_t t = 0; t < Lk; t++) {
                double dot = 0;
                for (size_t j = 0; j < d; j++)
                    dot += *TENSOR_AT(q, b, i, j) * *TENSOR_AT(k, b, t, j);
                s[t] = !len ? 0.0 : t < len ? dot / sqrt((double)d) : -INFINITY;
                mx = s[t] > mx ? s[t] : mx;
            }
            for (size_t t = 0; t < Lk; t++)
                sum += s[t] = exp(s[t] - mx);
            for (size_t j = 0; j < dv; j++) {
                double o = 0;
                for (size_t t = 0; t < Lk; t++)
                    o += s[t] / sum * *TENSOR_AT(v, b, t, j);
                *TENSOR_AT(out, b, i, j) = o;
            }
        }
    free(s);
}

struct flash_case {
    size_t B, Lq, Lk, d, dv;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq), 3 causal (B, Lq) */
};

static struct flash_case flash_cases[] = {
    {2, 1, 10, 2, 4, 1},   {3, 7, 13, 4, 3, 0},  {2, 13, 7, 8, 5, 2},
    {2, 16, 16, 8, 8, 3},  {1, 1, 1, 3, 2, 0},   {4, 9, 30, 6, 6, 1},
    {2, 33, 47, 16, 9, 2}, {1, 40, 40, 5, 7, 3}, {3, 5, 64, 4, 4, 1},
};

/* tile sizes, (tile_q, tile_k): ones, sizes that divide nothing, bigger
 * than L, and the defaults */
static const size_t tiles[][2] = {{1, 1}, {2, 3}, {3, 5}, {4, 7}, {5, 16},
                                  {7, 2}, {64, 100}, {0, 0}};

ParameterizedTestParameters(flash, tiled_equals_exact)
{
    return cr_make_param_array(struct flash_case, flash_cases,
                               sizeof flash_cases / sizeof flash_cases[0]);
}

ParameterizedTest(struct flash_case *c, flash, tiled_equals_exact)
{
    gsl_rng *r = mha_rng_new(3 + c->B + 5 * c->Lq + 7 * c->Lk);
    tensor *q = normal_tensor(SHAPE(c->B, c->Lq, c->d), r, 2.0);
    tensor *k = normal_tensor(SHAPE(c->B, c->Lk, c->d), r, 2.0);
    tensor *v = normal_tensor(SHAPE(c->B, c->Lk, c->dv), r, 1.0);
    tensor *lens = case_lens(c->lens, c->B, c->Lq, c->Lk, 2);
    if (c->lens == 3) { /* query i sees keys 0 .. i */
        OK(tensor_alloc(SHAPE(c->B, c->Lq), &lens));
        for (size_t b = 0; b < c->B; b++)
            for (size_t i = 0; i < c->Lq; i++)
                lens->data[b * c->Lq + i] = (double)(i + 1 < c->Lk ? i + 1 : c->Lk);
    }
    dot_attention a;
    OK(dot_attention_init(&a, 0));
    tensor *exact, *loops, *tiled;
    OK(dot_attention_forward(&a, q, k, v, lens, &exact, NULL));
    OK(tensor_alloc(SHAPE(c->B, c->Lq, c->dv), &loops));
    naive_attention(q, k, v, lens, loops);
    cr_assert(rel_error(exact, loops) <= 1e-12);
    for (size_t t = 0; t < sizeof tiles / sizeof tiles[0]; t++) {
        OK(flash_attention_forward(q, k, v, lens, tiles[t][0], tiles[t][1],
                                   &tiled));
        cr_assert(tensor_same_shape(tiled, exact));
        double err = rel_error(tiled, exact);
        cr_assert(err <= 1e-12, "tiles %zux%zu: %g", tiles[t][0], tiles[t][1],
                  err);
        err = rel_error(tiled, loops);
        cr_assert(err <= 1e-12, "tiles %zux%zu vs loops: %g", tiles[t][0],
                  tiles[t][1], err);
        tensor_free(tiled);
    }
    dot_attention_free(&a);
    FREE_ALL(q, k, v, lens, exact, loops);
    gsl_rng_free(r);
}

/* d2l's corner: every valid score far below -1e6, where a -1e6 fill
 * would hand the weight to the masked keys.  Masked keys take no part:
 * rows 0 and 1 put all their weight on key 0, whose score (-1.2e6) is
 * 2000 above key 1's; row 2 (valid_len 0) averages every value.  Tiled
 * and exact agree for every tile width, skipping masked tiles included. */
Test(flash, masked_keys_get_nothing_when_valid_scores_are_below_minus_1e6)
{
    size_t B = 1, Lq = 3, Lk = 9, d = 4;
    tensor *q, *k, *v, *lens, *exact, *tiled;
    OK(tensor_alloc(SHAPE(B, Lq, d), &q));
    OK(tensor_alloc(SHAPE(B, Lk, d), &k));
    OK(tensor_alloc(SHAPE(B, Lk, 2), &v));
    tensor_fill(q, 1000.0);
    for (size_t t = 0; t < Lk; t++)
        for (size_t j = 0; j < d; j++)
            k->data[t * d + j] = -(double)(600 + t); // scores -1.2e6 ...
    tensor_fill_arange(v, 0, 1);
    OK(tensor_from_array(SHAPE(B, Lq), (double[]){2, 4, 0}, &lens));
    dot_attention a;
    OK(dot_attention_init(&a, 0));
    OK(dot_attention_forward(&a, q, k, v, lens, &exact, NULL));
    const double want[3][2] = {{0, 1}, {0, 1}, {8, 9}};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            cr_assert(fabs(*TENSOR_AT(exact, 0, i, j) - want[i][j]) < 1e-12,
                      "row %zu: %.17g", i, *TENSOR_AT(exact, 0, i, j));
    for (size_t t = 0; t < 4; t++) {
        OK(flash_attention_forward(q, k, v, lens, 1, tiles[t][1], &tiled));
        double err = rel_error(tiled, exact);
        cr_assert(err <= 1e-12, "tile_k %zu: %g", tiles[t][1], err);
        tensor_free(tiled);
    }
    dot_attention_free(&a);
    FREE_ALL(q, k, v, lens, exact);
}

/* Keys read through a permuted view are copied once, and the trace says
 * so; the numbers do not change. */
Test(flash, strided_inputs_and_trace)
{
    gsl_rng *r = mha_rng_new(9);
    tensor *q = normal_tensor(SHAPE(2, 5, 4), r, 1.0);
    tensor *kt = normal_tensor(SHAPE(2, 4, 6), r, 1.0);
    tensor *v = normal_tensor(SHAPE(2, 6, 3), r, 1.0);
    tensor *k, *kc, *lens, *exact, *tiled;
    OK(tensor_permute(kt, SHAPE(0, 2, 1), &k)); // (2, 6, 4), strides (24, 1, 6)
    OK(tensor_contiguous(k, &kc));
    OK(tensor_from_array(SHAPE(2), (double[]){6, 3}, &lens));
    dot_attention a;
    OK(dot_attention_init(&a, 0));
    OK(dot_attention_forward(&a, q, kc, v, lens, &exact, NULL));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(flash_attention_forward(q, k, v, lens, 2, 4, &tiled));
    trace_to(NULL);
    const char *text = capture_end(&c);
    cr_assert_str_eq(text,
        "# keys (2, 6, 4) have strides (24, 1, 6), not row-major per example: "
        "one contiguous copy for dgemm\n"
        "contiguous()             copy  (2, 6, 4) -> (2, 6, 4)\n"
        "flash_attention(tiles 2x4, valid_lens (2,)) new   (2, 5, 4), (2, 6, 4), "
        "(2, 6, 3) -> (2, 5, 3)  (B, Lq, dv)\n");
    cr_assert(rel_error(tiled, exact) <= 1e-12);
    capture_free(&c);
    dot_attention_free(&a);
    FREE_ALL(q, kt, v, k, kc, lens, exact, tiled);
    gsl_rng_free(r);
}

/* What flash_attention_forward refuses (queries of ndim 0: NULL), each
 * leaving *out NULL. */
Test(flash, errors)
{
    static const struct {
        size_t q_ndim, q[3], k[3], v[3];
        double lens[2]; /* all 0: no valid_lens */
        int status;
        const char *message;
    } cases[] = {
        {0, {0}, {2, 5, 4}, {2, 5, 2}, {0}, GSL_EINVAL,
         "flash_attention_forward: queries is NULL"},
        {3, {2, 3, 4}, {2, 5, 4}, {2, 4, 2}, {0}, GSL_EBADLEN,
         "flash_attention_forward: keys have Lk = 5 but values have Lk = 4 "
         "(queries (2, 3, 4), keys (2, 5, 4), values (2, 4, 2))"},
        {3, {2, 3, 4}, {2, 5, 3}, {2, 5, 2}, {0}, GSL_EBADLEN,
         "flash_attention_forward: queries have d = 4 but keys have d = 3 "
         "(queries (2, 3, 4), keys (2, 5, 3), values (2, 5, 2))"},
        {3, {2, 3, 4}, {2, 5, 4}, {2, 5, 2}, {1, 6}, GSL_EINVAL,
         "flash_attention_forward: valid_lens[1] = 6 is larger than the "
         "number of keys 5 (queries (2, 3, 4), keys (2, 5, 4), valid_lens "
         "(2,))"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *q = zeros(cases[c].q_ndim, cases[c].q);
        tensor *k = zeros(3, cases[c].k), *v = zeros(3, cases[c].v);
        tensor *lens = cases[c].lens[1] ? make(SHAPE(2), cases[c].lens) : NULL;
        tensor *out = (tensor *)1;
        FAILS(flash_attention_forward(q, k, v, lens, 0, 0, &out),
              cases[c].status, cases[c].message);
        cr_assert_null(out, "case %zu left its output set", c);
        FREE_ALL(q, k, v, lens);
    }
}

Test(flash, allocation_failures)
{
    gsl_rng *r = mha_rng_new(2);
    tensor *q = normal_tensor(SHAPE(2, 5, 4), r, 1.0);
    tensor *kt = normal_tensor(SHAPE(2, 4, 6), r, 1.0);
    tensor *k, *out;
    OK(tensor_permute(kt, SHAPE(0, 2, 1), &k)); // copied: one more allocation
    int failures = 0;
    for (long n = 0;; n++) {
        mha_debug_fail_alloc_after(n);
        int status = flash_attention_forward(q, k, k, NULL, 2, 3, &out);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "n = %ld: %s", n, mha_last_error());
        cr_assert_null(out);
        failures++;
    }
    cr_assert_geq(failures, 4);
    FREE_ALL(out, q, kt, k);
    gsl_rng_free(r);
}

/* Finite queries and keys whose scores overflow: refused, not NaN; NaN
 * in the inputs still passes through, as in dot_attention_forward. */
Test(flash, overflow_from_finite_inputs_is_refused)
{
    tensor *q, *v, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 2, 2), &q));
    OK(tensor_alloc(SHAPE(1, 2, 2), &v));
    tensor_fill(q, 1e200);
    tensor_fill(v, 1);
    FAILS(flash_attention_forward(q, q, v, NULL, 0, 0, &out), GSL_ERANGE,
          "flash_attention_forward: the attention overflowed: out[0, 0, 0] = "
          "nan from finite inputs (out (1, 2, 2))");
    cr_assert_null(out);
    tensor_fill(q, NAN);
    OK(flash_attention_forward(q, q, v, NULL, 0, 0, &out));
    cr_assert(isnan(out->data[0]));
    FREE_ALL(out, q, v);
}
//<
