//> 15
/* test_posenc.c: the sinusoidal table and rotary embeddings (posenc.h),
 * and the multi-head module's rope option on its three forward paths.
 *
 * Expected values are worked out by hand (sin 1, cos 0.02 ...) or from a
 * different formulation: a 2x2 rotation matrix per pair, the halves
 * pairing of GPT-NeoX, dot products of rotated vectors. */
#include "check.h"

#include <complex.h>

#include <criterion/parameterized.h>

/* --- the sinusoidal table ------------------------------------------- */

/* d = 4: w_0 = 1 and w_1 = 10000^(-2/4) = 1/100. */
Test(posenc, sinusoid_by_hand)
{
    tensor *P;
    OK(posenc_sinusoid(3, 4, &P));
    assert_shape(P, SHAPE(3, 4));
    double want[3][4] = {{0, 1, 0, 1},
                         {sin(1.0), cos(1.0), sin(0.01), cos(0.01)},
                         {sin(2.0), cos(2.0), sin(0.02), cos(0.02)}};
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 4; j++)
            cr_assert_float_eq(*TENSOR_AT(P, i, j), want[i][j], 1e-15,
                               "P[%zu, %zu] = %.17g, expected %.17g", i, j,
                               *TENSOR_AT(P, i, j), want[i][j]);
    /* the numbers printed by chapter 15 */
    cr_assert_float_eq(*TENSOR_AT(P, 1, 0), 0.8414709848078965, 1e-16);
    cr_assert_float_eq(*TENSOR_AT(P, 1, 1), 0.5403023058681398, 1e-16);
    tensor_free(P);
}

/* An odd d ends on a lone sine: d = 3, w_1 = 10000^(-2/3). */
Test(posenc, sinusoid_odd_width)
{
    tensor *P;
    OK(posenc_sinusoid(2, 3, &P));
    double w1 = 1.0 / cbrt(10000.0 * 10000.0);
    cr_assert_float_eq(*TENSOR_AT(P, 1, 2), sin(w1), 1e-15);
    cr_assert_float_eq(*TENSOR_AT(P, 1, 1), cos(1.0), 1e-15);
    cr_assert_float_eq(*TENSOR_AT(P, 0, 2), 0.0, 0.0);
    tensor_free(P);
    FAILS(posenc_sinusoid(0, 3, &P), GSL_EINVAL,
          "posenc_sinusoid: L 0 and d 3 must both be >= 1");
    cr_assert_null(P);
}

/* Row i + delta is row i turned, pair by pair, by delta w_j: a matrix
 * that does not depend on i. */
Test(posenc, shift_is_a_rotation)
{
    size_t L = 40, d = 8, delta = 7;
    tensor *P;
    OK(posenc_sinusoid(L, d, &P));
    for (size_t i = 0; i + delta < L; i++)
        for (size_t j = 0; 2 * j < d; j++) {
            double a = (double)delta * pow(10000.0, -(double)(2 * j) / d);
            double s0 = *TENSOR_AT(P, i, 2 * j), c0 = *TENSOR_AT(P, i, 2 * j + 1);
            /* cos(x + a) + i sin(x + a) = e^(i (x + a)) = (cos x + i sin x)
             * e^(i a) */
            double complex z = (c0 + s0 * I) * cexp(I * a);
            cr_assert_float_eq(*TENSOR_AT(P, i + delta, 2 * j), cimag(z), 1e-12);
            cr_assert_float_eq(*TENSOR_AT(P, i + delta, 2 * j + 1), creal(z),
                               1e-12);
        }
    tensor_free(P);
}

Test(posenc, add_to_every_example)
{
    tensor *x = arange(SHAPE(2, 3, 4)), *y;
    OK(posenc_add(x, &y));
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 4; j++) {
                double w = j < 2 ? 1.0 : 0.01, pos = (double)i * w;
                double p = j % 2 ? cos(pos) : sin(pos);
                cr_assert_float_eq(*TENSOR_AT(y, b, i, j),
                                   (double)(b * 12 + i * 4 + j) + p, 1e-14);
            }
    tensor_free(y);
    tensor *flat;
    OK(tensor_alloc(SHAPE(3, 4), &flat));
    FAILS(posenc_add(flat, &y), GSL_EINVAL,
          "posenc_add: x has shape (3, 4), expected 3 dimensions (B, L, d)");
    FREE_ALL(flat, x);
}

/* --- rotary embeddings ---------------------------------------------- */

Test(rope, one_pair_by_hand)
{
    double y0, y1;
    OK(rope_rotate_pair(1, 0, M_PI / 2, &y0, &y1));
    cr_assert_float_eq(y0, 0.0, 1e-16);
    cr_assert_float_eq(y1, 1.0, 1e-16);
    OK(rope_rotate_pair(3, 4, M_PI, &y0, &y1));
    cr_assert_float_eq(y0, -3.0, 1e-15);
    cr_assert_float_eq(y1, -4.0, 1e-15);
    cr_assert_float_eq(rope_theta(1, 4, 10000), 0.01, 1e-18);
    cr_assert_float_eq(rope_theta(0, 4, 10000), 1.0, 0.0);
}

/* x (1, 3, 8): two heads of p = 4, every pair (1, 0).  Pair k of row l
 * turns by (start + l) theta_k, theta = (1, 1/100), into (cos, sin). */
Test(rope, apply_by_hand)
{
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(1, 3, 8), &x));
    for (size_t l = 0; l < 3; l++)
        for (size_t j = 0; j < 8; j += 2)
            *TENSOR_AT(x, 0, l, j) = 1;
    OK(rope_apply(x, 4, 5, 10000, &y));
    for (size_t l = 0; l < 3; l++)
        for (size_t j = 0; j < 8; j += 2) {
            double theta = (j % 4) == 0 ? 1.0 : 0.01;
            double a = (double)(5 + l) * theta;
            cr_assert_float_eq(*TENSOR_AT(y, 0, l, j), cos(a), 1e-15,
                               "row %zu, feature %zu", l, j);
            cr_assert_float_eq(*TENSOR_AT(y, 0, l, j + 1), sin(a), 1e-15);
        }
    tensor *back;
    OK(rope_apply_inverse(y, 4, 5, 10000, &back));
    cr_assert_leq(rel_error(back, x), 1e-15);
    FREE_ALL(back, y, x);
}

/* The scores of turned vectors depend on the distance between their
 * positions only: q at m, k at n, and both shifted by s. */
Test(rope, scores_see_relative_positions)
{
    gsl_rng *r = rng_for_test(15);
    size_t p = 16;
    tensor *q, *k;
    OK(tensor_alloc(SHAPE(1, 1, p), &q));
    OK(tensor_alloc(SHAPE(1, 1, p), &k));
    tensor_fill_normal(q, r, 0, 1);
    tensor_fill_normal(k, r, 0, 1);
    long pairs[][2] = {{5, 2}, {40, 37}, {1003, 1000}, {3, 0}, {-7, -10}};
    double first = 0;
    for (size_t t = 0; t < sizeof pairs / sizeof pairs[0]; t++) {
        tensor *qr, *kr;
        OK(rope_apply(q, p, pairs[t][0], 10000, &qr));
        OK(rope_apply(k, p, pairs[t][1], 10000, &kr));
        double s = 0;
        for (size_t j = 0; j < p; j++)
            s += qr->data[j] * kr->data[j];
        if (t == 0)
            first = s;
        cr_assert_float_eq(s, first, 1e-12, "m %ld n %ld: %.17g vs %.17g",
                           pairs[t][0], pairs[t][1], s, first);
        FREE_ALL(qr, kr);
    }
    /* and a different distance gives a different score */
    tensor *qr, *kr;
    OK(rope_apply(q, p, 4, 10000, &qr));
    OK(rope_apply(k, p, 2, 10000, &kr));
    double s = 0;
    for (size_t j = 0; j < p; j++)
        s += qr->data[j] * kr->data[j];
    cr_assert_gt(fabs(s - first), 1e-3);
    FREE_ALL(qr, kr, q, k);
    gsl_rng_free(r);
}

/* GPT-NeoX pairs feature k with k + p/2.  Written here as its own loop,
 * it equals the interleaved rotation after moving feature 2k to k and
 * 2k + 1 to k + p/2. */
Test(rope, halves_are_interleaved_permuted)
{
    gsl_rng *r = rng_for_test(16);
    size_t L = 5, p = 8, half = 4;
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(1, L, p), &x));
    tensor_fill_normal(x, r, 0, 1);
    OK(rope_apply(x, p, 0, 10000, &y));
    for (size_t l = 0; l < L; l++) {
        double xh[8], yh[8];
        for (size_t k = 0; k < half; k++) { // the permutation
            xh[k] = *TENSOR_AT(x, 0, l, 2 * k);
            xh[k + half] = *TENSOR_AT(x, 0, l, 2 * k + 1);
        }
        for (size_t k = 0; k < half; k++) { // NeoX: k with k + p/2
            double a = (double)l * pow(10000.0, -(double)(2 * k) / (double)p);
            // (x_k, x_{k+p/2}) as a complex number, turned by e^(i a)
            double complex z = (xh[k] + xh[k + half] * I) * cexp(I * a);
            yh[k] = creal(z);
            yh[k + half] = cimag(z);
        }
        for (size_t k = 0; k < half; k++) {
            cr_assert_float_eq(yh[k], *TENSOR_AT(y, 0, l, 2 * k), 1e-14);
            cr_assert_float_eq(yh[k + half], *TENSOR_AT(y, 0, l, 2 * k + 1),
                               1e-14);
        }
    }
    FREE_ALL(x, y);
    gsl_rng_free(r);
}

/* Strided input (a permuted view) reads the same numbers. */
Test(rope, reads_any_strides)
{
    gsl_rng *r = rng_for_test(17);
    tensor *x = normal_tensor(SHAPE(4, 2, 6), r, 1), *xt, *xc, *a, *b;
    OK(tensor_permute(x, SHAPE(1, 0, 2), &xt)); // (2, 4, 6), a view
    OK(tensor_contiguous(xt, &xc));
    OK(rope_apply(xt, 2, 1, 100, &a));
    OK(rope_apply(xc, 2, 1, 100, &b));
    cr_assert_eq(rel_error(a, b), 0.0);
    FREE_ALL(x, xt, xc, a, b);
    gsl_rng_free(r);
}

/* What rope_apply (and its inverse) refuse: a head size p and a base on
 * x of shape (2, 3, 6), or (x2 set) of shape (3, 6). */
Test(rope, errors)
{
    static const struct {
        int inverse, x2;
        size_t p;
        double base;
        int status;
        const char *message;
    } cases[] = {
        {0, 0, 3, 10000, GSL_EBADLEN,
         "rope_apply: head size 3 must be even, at least 2 and divide the "
         "last dimension 6 of x (2, 3, 6)"},
        {0, 0, 4, 10000, GSL_EBADLEN,
         "rope_apply: head size 4 must be even, at least 2 and divide the "
         "last dimension 6 of x (2, 3, 6)"},
        {0, 0, 0, 10000, GSL_EBADLEN,
         "rope_apply: head size 0 must be even, at least 2 and divide the "
         "last dimension 6 of x (2, 3, 6)"},
        {0, 0, 2, 1, GSL_EINVAL,
         "rope_apply: base 1 must be a finite number > 1 (x (2, 3, 6))"},
        {0, 0, 2, 0.9999999999999999, GSL_EINVAL,
         "rope_apply: base 0.9999999999999999 must be a finite number > 1 "
         "(x (2, 3, 6))"},
        {1, 0, 2, NAN, GSL_EINVAL,
         "rope_apply_inverse: base nan must be a finite number > 1 "
         "(x (2, 3, 6))"},
        {0, 1, 2, 10000, GSL_EINVAL,
         "rope_apply: x has shape (3, 6), expected 3 dimensions (B, L, n*p)"},
    };
    tensor *x, *flat;
    OK(tensor_alloc(SHAPE(2, 3, 6), &x));
    OK(tensor_alloc(SHAPE(3, 6), &flat));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *in = cases[c].x2 ? flat : x, *y = (tensor *)1;
        FAILS((cases[c].inverse ? rope_apply_inverse : rope_apply)(
                  in, cases[c].p, 0, cases[c].base, &y),
              cases[c].status, cases[c].message);
        cr_assert_null(y, "case %zu left its output set", c);
    }
    FREE_ALL(x, flat);
}

//> full
/* One trace line, kind new, the positions in the op; shapes alone work. */
Test(rope, trace_and_shapes_alone)
{
    tensor *x, *y;
    OK(tensor_alloc_meta(SHAPE(2, 4, 6), &x));
    OK(tensor_set_names(x, "B, Lq, d_model"));
    TRACES(rope_apply(x, 2, 2, 10000, &y),
           "rope(p=2, pos 2..5)      new   (2, 4, 6) -> (2, 4, 6)"
           "              (B, Lq, d_model)\n");
    cr_assert(tensor_is_meta(y));
    FREE_ALL(x, y);
}
//<

Test(rope, every_allocation_may_fail)
{
    tensor *x, *y = NULL;
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    size_t allocs;
    OK_AFTER_ENOMEM(rope_apply(x, 2, 0, 10000, &y), y, "rope_apply: ", allocs);
    cr_assert_geq(allocs, 2); // out, theta
    FREE_ALL(y, x);
}

/* --- the module's rope option --------------------------------------- */

struct rope_case {
    size_t B, Lq, Lk, dq, dk, dv, D, h;
    int self, bias, lens;
    double base;
};

static struct rope_case rope_cases[] = {
    {2, 4, 4, 8, 8, 8, 8, 2, 1, 0, 0, 0},
    {1, 3, 7, 5, 6, 4, 12, 3, 0, 1, 1, 500},
    {2, 6, 2, 4, 4, 4, 8, 1, 0, 1, 2, 0},  /* Lq > Lk: positions below 0 */
    {3, 5, 5, 6, 6, 6, 16, 4, 1, 1, 1, 10000},
};

ParameterizedTestParameters(rope, module_three_paths)
{
    return cr_make_param_array(struct rope_case, rope_cases,
                               sizeof rope_cases / sizeof rope_cases[0]);
}

/* The copy path, the fast path and the plain loops agree with rope; and
 * the rope actually changes the output. */
ParameterizedTest(struct rope_case *rc, rope, module_three_paths)
{
    gsl_rng *r = rng_for_test(150);
    multihead_config cfg = {.query_size = rc->dq, .key_size = rc->self ? rc->dq : rc->dk,
                            .value_size = rc->self ? rc->dq : rc->dv,
                            .num_hiddens = rc->D, .num_heads = rc->h,
                            .bias = rc->bias, .rope = 1, .rope_base = rc->base};
    multihead m;
    OK(multihead_init(&m, &cfg));
    cr_assert_eq(m.cfg.rope_base, rc->base ? rc->base : 10000.0);
    multihead_reset_xavier(&m, r);
    if (rc->bias)
        tensor_fill_normal(m.W_q.bias, r, 0, 0.5);
    tensor *q, *k, *v, *lens = NULL;
    OK(tensor_alloc(SHAPE(rc->B, rc->Lq, rc->dq), &q));
    tensor_fill_normal(q, r, 0, 1);
    if (rc->self) {
        k = v = q;
    } else {
        OK(tensor_alloc(SHAPE(rc->B, rc->Lk, rc->dk), &k));
        OK(tensor_alloc(SHAPE(rc->B, rc->Lk, rc->dv), &v));
        tensor_fill_normal(k, r, 0, 1);
        tensor_fill_normal(v, r, 0, 1);
    }
    size_t Lk = k->shape[1];
    if (rc->lens == 1) {
        OK(tensor_alloc(SHAPE(rc->B), &lens));
        for (size_t b = 0; b < rc->B; b++)
            lens->data[b] = (double)(Lk - b % Lk);
    } else if (rc->lens == 2) {
        OK(causal_valid_lens(rc->B, rc->Lq, &lens));
        for (size_t i = 0; i < tensor_numel(lens); i++)
            lens->data[i] = fmin(lens->data[i], (double)Lk);
    }
    tensor *copy, *plain, *fast = NULL, *naive = NULL;
    OK(multihead_forward(&m, q, k, v, lens, &copy, NULL));
//> full
    // the fast path and the plain loops, which turn the pairs their own way
    OK(multihead_forward_fast(&m, q, k, v, lens, NULL, &fast, NULL));
    OK(multihead_forward_naive(&m, q, k, v, lens, &naive));
    cr_assert_leq(rel_error(copy, naive), 1e-12, "copy %g", rel_error(copy, naive));
    cr_assert_leq(rel_error(fast, naive), 1e-12, "fast %g", rel_error(fast, naive));
//<
    m.cfg.rope = 0;
    OK(multihead_forward(&m, q, k, v, lens, &plain, NULL));
    cr_assert_gt(rel_error(plain, copy), 1e-6, "case B %zu Lq %zu: %g", rc->B, rc->Lq, rel_error(plain, copy));
    FREE_ALL(copy, fast, naive, plain, lens, q);
    if (!rc->self) {
        FREE_ALL(k, v);
    }
    multihead_free(&m);
    gsl_rng_free(r);
}

/* With rope, an overflow in Q's projection is named as the projection's,
 * as without: the rotation is checked only once its input is finite. */
Test(rope, an_overflowing_projection_is_named_before_its_rotation)
{
    multihead m;
    SELF_MODULE(&m, 2, .num_hiddens = 2, .num_heads = 1, .rope = 1);
    tensor_fill(m.W_q.weight, 1);
    tensor_fill(m.W_k.weight, 1);
    tensor_fill(m.W_v.weight, 1);
    tensor_fill(m.W_o.weight, 1);
    tensor *q, *k, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 2, 2), &q));
    OK(tensor_alloc(SHAPE(1, 2, 2), &k));
    tensor_fill(q, 1e308); // W_q doubles it: inf
    tensor_fill(k, 1);
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_ERANGE,
          "multihead_forward: the projection overflowed: Q[0, 0, 0] = inf "
          "from finite inputs (Q (1, 2, 2))");
    cr_assert_null(out);
//> full
    FAILS(multihead_forward_fast(&m, q, k, k, NULL, NULL, &out, NULL), GSL_ERANGE,
          "multihead_forward_fast: the projection overflowed: Q[0, 0, 0] = "
          "inf from finite inputs (Q (1, 2, 2))");
    cr_assert_null(out);
//<
    FREE_ALL(q, k);
    multihead_free(&m);
}

/* One query and its keys: query position Lk - 1 (the end).  Its scores
 * in head 0 are (q R(Lk-1)) . (k_j R(j)), written out here with the
 * projections and a rotation matrix per pair, and the weights the module
 * keeps are their softmax. */
Test(rope, module_weights_by_hand)
{
    gsl_rng *r = rng_for_test(151);
    enum { LK = 4, D = 4 };
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = 1, .rope = 1};
    multihead m;
    OK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    tensor *q, *k, *out, *w;
    OK(tensor_alloc(SHAPE(1, 1, D), &q));
    OK(tensor_alloc(SHAPE(1, LK, D), &k));
    tensor_fill_normal(q, r, 0, 1);
    tensor_fill_normal(k, r, 0, 1);
    OK(multihead_forward(&m, q, k, k, NULL, &out, &w));
    double qp[D], kp[LK][D], s[LK], mx = -INFINITY, sum = 0;
    for (size_t o = 0; o < D; o++) {
        qp[o] = 0;
        for (size_t j = 0; j < D; j++)
            qp[o] += *TENSOR_AT(m.W_q.weight, o, j) * q->data[j];
        for (size_t t = 0; t < LK; t++) {
            kp[t][o] = 0;
            for (size_t j = 0; j < D; j++)
                kp[t][o] += *TENSOR_AT(m.W_k.weight, o, j) * *TENSOR_AT(k, 0, t, j);
        }
    }
    for (size_t t = 0; t < LK; t++) {
        s[t] = 0;
        for (size_t pr = 0; pr < D / 2; pr++) {
            double theta = pr == 0 ? 1.0 : 0.01; // 10000^(-2/4)
            double aq = (LK - 1) * theta, ak = (double)t * theta;
            // each pair as a complex number, turned by e^(i angle)
            double complex qz = (qp[2 * pr] + qp[2 * pr + 1] * I) * cexp(I * aq);
            double complex kz = (kp[t][2 * pr] + kp[t][2 * pr + 1] * I) * cexp(I * ak);
            double q0 = creal(qz), q1 = cimag(qz), k0 = creal(kz), k1 = cimag(kz);
            s[t] += (q0 * k0 + q1 * k1) / 2.0; // scale 1/sqrt(4)
        }
        mx = fmax(mx, s[t]);
    }
    for (size_t t = 0; t < LK; t++)
        sum += exp(s[t] - mx);
    for (size_t t = 0; t < LK; t++)
        cr_assert_float_eq(*TENSOR_AT(w, 0, 0, 0, t),
                           exp(s[t] - mx) / sum, 1e-14, "weight %zu", t);
    FREE_ALL(q, k, out, w);
    multihead_free(&m);
    gsl_rng_free(r);
}

Test(rope, module_refuses)
{
    static const struct {
        size_t num_heads;
        double rope_base;
        int status;
        const char *message;
    } refused[] = {
        {2, 0, GSL_EBADLEN,
         "multihead: rope turns pairs of features, but the head size "
         "p = d_model/h = 10/2 = 5 is odd"},
        {5, 0.5, GSL_EINVAL,
         "multihead: rope_base 0.5 must be a finite number > 1"},
        {5, INFINITY, GSL_EINVAL,
         "multihead: rope_base inf must be a finite number > 1"},
        {5, 1.0 - 0x1p-53, GSL_EINVAL, /* just below 1, not "1" */
         "multihead: rope_base 0.9999999999999999 must be a finite number > 1"},
    };
    multihead m;
    multihead_config cfg = {.query_size = 10, .key_size = 10,
                            .value_size = 10, .num_hiddens = 10, .rope = 1};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cfg.num_heads = refused[i].num_heads;
        cfg.rope_base = refused[i].rope_base;
        config_refused(&cfg, refused[i].status, refused[i].message);
    }
    /* without rope, an odd head size is fine and the base is not read */
    cfg.rope = 0;
    cfg.num_heads = 2;
    OK(multihead_init(&m, &cfg));
    multihead_free(&m);
}

//> full
/* The module's trace on shapes alone: the rope steps right after W_q and
 * W_k, before the split into heads. */
Test(rope, module_trace_shapes_alone)
{
    multihead m;
    SELF_MODULE(&m, 8, .num_hiddens = 8, .num_heads = 2, .rope = 1,
                    .shape_only = 1);
    tensor *q, *k, *out;
    OK(tensor_alloc_meta(SHAPE(1, 2, 8), &q));
    OK(tensor_alloc_meta(SHAPE(1, 5, 8), &k));
    trace_log log;
    trace_log_start(&log);
    OK(multihead_forward(&m, q, k, k, NULL, &out, NULL));
    trace_log_stop(&log);
    char line[512];
    cr_assert_str_eq(trace_format_text(&log.records[1], line, sizeof line),
                     "  W_q: x W^T             new   (1, 2, 8) -> (1, 2, 8)"
                     "              (B, Lq, d_model)");
    cr_assert_str_eq(trace_format_text(&log.records[2], line, sizeof line),
                     "  rope(p=4, pos 3..4)    new   (1, 2, 8) -> (1, 2, 8)"
                     "              (B, Lq, d_model)");
    size_t found = 0;
    for (size_t i = 0; i < log.count; i++)
        if (strncmp(log.records[i].op, "rope(p=4, pos 0..4)", 19) == 0)
            found = i;
    cr_assert_gt(found, 2);
    cr_assert_str_eq(log.records[found - 1].op, "W_k: x W^T");
    cr_assert(tensor_is_meta(out));
    trace_log_free(&log);
    FREE_ALL(q, k, out);
    multihead_free(&m);
}
//<
//<
