//> 13
/* test_backward.c: every gradient of backward.h against central finite
 * differences of the forward passes, on small shapes.
 *
 * The check: a scalar loss L = sum(out * G) with G a fixed random tensor
 * (so dL/dout = G), and for every element x_k of every input and parameter
 *     (L(x_k + eps) - L(x_k - eps)) / (2 eps)
 * against the backward's dL/dx_k.  The error is normwise, max |a - n| /
 * max |n| over a tensor (rel_error in check.h), and must be <= 1e-6; with
 * eps = 1e-5 the differences are good to about 1e-10.  The forward passes
 * the differences go through are the library's own (multihead_forward,
 * not the cached variant), so the check shares no code with the backward.
 * `--verbose` logs the worst error of each case. */
#include "check.h"

#include <criterion/logging.h>
#include <criterion/parameterized.h>

#define EPS 1e-5
#define TOLERANCE 1e-6

/* --- helpers -------------------------------------------------------- */

static tensor *normal3(gsl_rng *r, size_t a, size_t b, size_t c)
{
    tensor *t;
    OK(tensor_alloc(SHAPE(a, b, c), &t));
    tensor_fill_normal(t, r, 0, 1);
    return t;
}

/* sum(out * g) over two contiguous tensors of one shape */
static double dot_all(const tensor *out, const tensor *g)
{
    cr_assert(tensor_same_shape(out, g));
    double s = 0;
    for (size_t k = 0; k < tensor_numel(out); k++)
        s += out->data[k] * g->data[k];
    return s;
}

typedef double (*loss_fn)(void *ctx);

/* Central differences of loss with respect to every element of x
 * (contiguous), into a new tensor of x's shape. */
static tensor *numeric_grad(loss_fn loss, void *ctx, tensor *x)
{
    tensor *g;
    OK(tensor_alloc(x->ndim, x->shape, &g));
    cr_assert(tensor_is_contiguous(x));
    for (size_t k = 0; k < tensor_numel(x); k++) {
        double saved = x->data[k];
        x->data[k] = saved + EPS;
        double up = loss(ctx);
        x->data[k] = saved - EPS;
        double down = loss(ctx);
        x->data[k] = saved;
        g->data[k] = (up - down) / (2 * EPS);
    }
    return g;
}

static double max_abs(const tensor *t)
{
    double m = 0;
    for (size_t k = 0; k < tensor_numel(t); k++)
        m = fabs(t->data[k]) > m ? fabs(t->data[k]) : m;
    return m;
}

/* Check one analytic gradient; returns its error for the log.  A gradient
 * that is zero in truth (the key bias's: adding one number to every score
 * of a row leaves the softmax as it was) comes out of the differences as
 * rounding noise near 1e-11, where a relative error means nothing: then
 * the analytic gradient must be zero to 1e-12 and the error counts as 0. */
static double check_grad(const char *what, loss_fn loss, void *ctx, tensor *x,
                         const tensor *analytic)
{
    cr_assert_not_null(analytic, "%s: no gradient", what);
    tensor *num = numeric_grad(loss, ctx, x);
    double err = 0;
    if (max_abs(num) < 1e-8) {
        cr_assert_leq(max_abs(analytic), 1e-12,
                      "%s: the gradient is 0 by differences, %g here", what,
                      max_abs(analytic));
    } else {
        err = rel_error(analytic, num);
        cr_assert_leq(err, TOLERANCE, "%s: relative error %.3g", what, err);
    }
    tensor_free(num);
    return err;
}

static double worse(double a, double b) { return a > b ? a : b; }

/* --- Linear --------------------------------------------------------- */

struct linear_ctx {
    linear *l;
    tensor *x, *g;
};

static double linear_loss(void *p)
{
    struct linear_ctx *c = p;
    tensor *y;
    OK(linear_forward(c->l, c->x, &y));
    double s = dot_all(y, c->g);
    tensor_free(y);
    return s;
}

struct linear_case {
    size_t ndim, shape[3]; /* x's leading shape, then in */
    size_t in, out;
    int bias;
};

static struct linear_case linear_cases[] = {
    {2, {5, 0, 0}, 3, 4, 1},  {3, {2, 3, 0}, 4, 2, 0},
    {4, {2, 2, 3}, 2, 3, 1},  {2, {1, 0, 0}, 1, 1, 1},
    {3, {3, 1, 0}, 6, 5, 1},
};

ParameterizedTestParameters(backward, linear_gradcheck)
{
    return cr_make_param_array(struct linear_case, linear_cases,
                               sizeof linear_cases / sizeof linear_cases[0]);
}

ParameterizedTest(struct linear_case *lc, backward, linear_gradcheck)
{
    gsl_rng *r = rng_for_test(11);
    linear l, grad;
    OK(linear_init(&l, "W", lc->in, lc->out, lc->bias));
    OK(linear_init(&grad, "dW", lc->in, lc->out, lc->bias));
    linear_reset_pytorch(&l, r);
    size_t xs[4], ys[4];
    for (size_t d = 0; d + 1 < lc->ndim; d++)
        xs[d] = ys[d] = lc->shape[d];
    xs[lc->ndim - 1] = lc->in;
    ys[lc->ndim - 1] = lc->out;
    tensor *x, *g, *dx;
    OK(tensor_alloc(lc->ndim, xs, &x));
    OK(tensor_alloc(lc->ndim, ys, &g));
    tensor_fill_normal(x, r, 0, 1);
    tensor_fill_normal(g, r, 0, 1);
    OK(linear_backward(&l, x, g, &grad, &dx));
    struct linear_ctx c = {&l, x, g};
    double err = check_grad("dx", linear_loss, &c, x, dx);
    err = worse(err, check_grad("dW", linear_loss, &c, l.weight, grad.weight));
    if (lc->bias)
        err = worse(err, check_grad("db", linear_loss, &c, l.bias, grad.bias));
    cr_log_info("linear %zu-D: worst relative error %.3g", lc->ndim, err);
    FREE_ALL(x, g, dx);
    linear_free(&l);
    linear_free(&grad);
    gsl_rng_free(r);
}

/* The same sums by hand, in plain loops, for a permuted (non-contiguous)
 * x and a weight that is a narrow view of a bigger one; the gradients
 * accumulate over two calls. */
Test(backward, linear_views_and_accumulation)
{
    gsl_rng *r = rng_for_test(12);
    tensor *big, *xt, *x, *g, *dx;
    OK(tensor_alloc(SHAPE(3, 2, 4), &xt)); // x^T-ish: (in, rows, 4)
    tensor_fill_normal(xt, r, 0, 1);
    OK(tensor_permute(xt, SHAPE(1, 2, 0), &x)); // (2, 4, 3): in = 3
    cr_assert(!tensor_is_contiguous(x));
    linear l = {0}, grad;
    snprintf(l.name, sizeof l.name, "W");
    l.in_features = 3;
    l.out_features = 2;
    OK(tensor_alloc(SHAPE(5, 3), &big));
    tensor_fill_normal(big, r, 0, 1);
    OK(tensor_narrow(big, 0, 1, 2, &l.weight)); // rows 1..2 of big
    OK(tensor_alloc(SHAPE(2), &l.bias));
    OK(linear_init(&grad, "dW", 3, 2, 1));
    OK(tensor_alloc(SHAPE(2, 4, 2), &g));
    tensor_fill_normal(g, r, 0, 1);
    OK(linear_backward(&l, x, g, &grad, &dx));
    tensor_free(dx);
    OK(linear_backward(&l, x, g, &grad, &dx));
    for (size_t a = 0; a < 2; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t i = 0; i < 3; i++) {
                double want = 0;
                for (size_t o = 0; o < 2; o++)
                    want += *TENSOR_AT(g, a, b, o) * *TENSOR_AT(big, 1 + o, i);
                cr_assert_float_eq(*TENSOR_AT(dx, a, b, i), want, 1e-13);
            }
    for (size_t o = 0; o < 2; o++) {
        double db = 0;
        for (size_t a = 0; a < 2; a++)
            for (size_t b = 0; b < 4; b++)
                db += *TENSOR_AT(g, a, b, o);
        cr_assert_float_eq(*TENSOR_AT(grad.bias, o), 2 * db, 1e-13);
        for (size_t i = 0; i < 3; i++) {
            double dw = 0;
            for (size_t a = 0; a < 2; a++)
                for (size_t b = 0; b < 4; b++)
                    dw += *TENSOR_AT(g, a, b, o) * *TENSOR_AT(xt, i, a, b);
            cr_assert_float_eq(*TENSOR_AT(grad.weight, o, i), 2 * dw, 1e-13);
        }
    }
    FREE_ALL(dx, big, xt, x, g);
    linear_free(&l);
    linear_free(&grad);
    gsl_rng_free(r);
}

/* --- masked softmax ------------------------------------------------- */

struct softmax_ctx {
    tensor *scores, *lens, *g;
    double scale;
};

static double softmax_loss(void *p)
{
    struct softmax_ctx *c = p;
    tensor *w;
    OK(masked_softmax_scaled(c->scores, c->scale, c->lens, &w));
    double s = dot_all(w, c->g);
    tensor_free(w);
    return s;
}

/* No mask, per-example lengths, per-query lengths with a 0 row. */
Test(backward, masked_softmax_gradcheck)
{
    gsl_rng *r = rng_for_test(13);
    tensor *lens1, *lens2;
    OK(tensor_from_array(SHAPE(2), (double[]){2, 4}, &lens1));
    OK(tensor_from_array(SHAPE(2, 3), (double[]){1, 0, 3, 4, 2, 5}, &lens2));
    tensor *masks[3] = {NULL, lens1, lens2};
    double scales[3] = {1.0, 0.5, 2.0};
    for (int mcase = 0; mcase < 3; mcase++) {
        tensor *s = normal3(r, 2, 3, 5), *g = normal3(r, 2, 3, 5), *w, *ds;
        OK(masked_softmax_scaled(s, scales[mcase], masks[mcase], &w));
        OK(masked_softmax_backward(w, g, scales[mcase], masks[mcase], &ds));
        struct softmax_ctx c = {s, masks[mcase], g, scales[mcase]};
        double err = check_grad("dscores", softmax_loss, &c, s, ds);
        cr_log_info("masked softmax, mask %d: worst relative error %.3g",
                    mcase, err);
        /* masked keys: exactly 0; a valid_len 0 row: 0 everywhere */
        for (size_t b = 0; b < 2; b++)
            for (size_t i = 0; i < 3; i++) {
                size_t valid = 5;
                if (mcase == 1)
                    valid = (size_t)lens1->data[b];
                if (mcase == 2)
                    valid = (size_t)lens2->data[b * 3 + i];
                for (size_t j = valid; j < 5; j++)
                    cr_assert_eq(*TENSOR_AT(ds, b, i, j), 0.0);
            }
        FREE_ALL(s, g, w, ds);
    }
    FREE_ALL(lens1, lens2);
    gsl_rng_free(r);
}

/* One row by hand: w = (0.5, 0.5), dw = (1, 0): sum w dw = 0.5, so
 * ds = (0.5 * 0.5, 0.5 * -0.5) = (0.25, -0.25), times the scale 2. */
Test(backward, masked_softmax_by_hand)
{
    tensor *w, *dw, *ds;
    OK(tensor_from_array(SHAPE(1, 1, 3), (double[]){0.5, 0.5, 0}, &w));
    OK(tensor_from_array(SHAPE(1, 1, 3), (double[]){1, 0, 7}, &dw));
    tensor *lens;
    OK(tensor_from_array(SHAPE(1), (double[]){2}, &lens));
    OK(masked_softmax_backward(w, dw, 2.0, lens, &ds));
    cr_assert_eq(ds->data[0], 0.5);
    cr_assert_eq(ds->data[1], -0.5);
    cr_assert_eq(ds->data[2], 0.0);
    FREE_ALL(w, dw, ds, lens);
}

/* --- scaled dot-product attention ----------------------------------- */

enum { NO_MASK, PER_EXAMPLE, PER_QUERY };

/* valid_lens for the cases: per example 1 + 2b mod Lk (some keys masked),
 * per query (b + 2i) mod (Lk + 1), which reaches 0 and Lk. */
static tensor *make_lens(int kind, size_t B, size_t Lq, size_t Lk)
{
    tensor *t = NULL;
    if (kind == PER_EXAMPLE) {
        OK(tensor_alloc(SHAPE(B), &t));
        for (size_t b = 0; b < B; b++)
            t->data[b] = (double)(1 + (2 * b) % Lk);
    } else if (kind == PER_QUERY) {
        OK(tensor_alloc(SHAPE(B, Lq), &t));
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < Lq; i++)
                t->data[b * Lq + i] = (double)((b + 2 * i) % (Lk + 1));
    }
    return t;
}

/* Keys that no query of example b may see: j >= every valid_len of b,
 * when no row of b has valid_len 0 (such a row sees all keys evenly). */
static size_t first_masked_key(const tensor *lens, size_t b, size_t Lq,
                               size_t Lk)
{
    if (!lens)
        return Lk;
    if (lens->ndim == 1)
        return (size_t)lens->data[b];
    size_t most = 0;
    for (size_t i = 0; i < Lq; i++) {
        size_t v = (size_t)lens->data[b * Lq + i];
        if (v == 0)
            return Lk;
        most = v > most ? v : most;
    }
    return most;
}

/* Rows of keys j >= first masked key are exactly zero in dk (B, Lk, *). */
static void assert_masked_rows_zero(const char *what, const tensor *dk,
                                    const tensor *lens, size_t Lq)
{
    size_t B = dk->shape[0], Lk = dk->shape[1];
    for (size_t b = 0; b < B; b++)
        for (size_t j = first_masked_key(lens, b, Lq, Lk); j < Lk; j++)
            for (size_t f = 0; f < dk->shape[2]; f++)
                cr_assert_eq(*TENSOR_AT(dk, b, j, f), 0.0,
                             "%s[%zu, %zu, %zu] of a masked key is %g", what,
                             b, j, f, *TENSOR_AT(dk, b, j, f));
}

struct attention_ctx {
    dot_attention *a;
    tensor *q, *k, *v, *lens, *g;
};

static double attention_loss(void *p)
{
    struct attention_ctx *c = p;
    tensor *out;
    OK(dot_attention_forward(c->a, c->q, c->k, c->v, c->lens, &out, NULL));
    double s = dot_all(out, c->g);
    tensor_free(out);
    return s;
}

struct attention_case {
    size_t B, Lq, Lk, d, dv;
    int mask;
};

static struct attention_case attention_cases[] = {
    {1, 1, 1, 1, 1, NO_MASK},   {2, 3, 4, 2, 3, PER_EXAMPLE},
    {2, 4, 3, 3, 2, PER_QUERY}, {3, 2, 5, 4, 1, PER_EXAMPLE},
    {1, 5, 5, 2, 2, PER_QUERY}, {2, 1, 6, 3, 4, NO_MASK},
};

ParameterizedTestParameters(backward, attention_gradcheck)
{
    return cr_make_param_array(struct attention_case, attention_cases,
                               sizeof attention_cases /
                                   sizeof attention_cases[0]);
}

ParameterizedTest(struct attention_case *ac, backward, attention_gradcheck)
{
    gsl_rng *r = rng_for_test(14);
    tensor *q = normal3(r, ac->B, ac->Lq, ac->d);
    tensor *k = normal3(r, ac->B, ac->Lk, ac->d);
    tensor *v = normal3(r, ac->B, ac->Lk, ac->dv);
    tensor *g = normal3(r, ac->B, ac->Lq, ac->dv);
    tensor *lens = make_lens(ac->mask, ac->B, ac->Lq, ac->Lk);
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    tensor *out, *w, *dq, *dk, *dv;
    OK(dot_attention_forward(&a, q, k, v, lens, &out, &w));
    OK(dot_attention_backward(q, k, v, lens, w, g, &dq, &dk, &dv));
    tensor_free(w);
    struct attention_ctx c = {&a, q, k, v, lens, g};
    double err = check_grad("dqueries", attention_loss, &c, q, dq);
    err = worse(err, check_grad("dkeys", attention_loss, &c, k, dk));
    err = worse(err, check_grad("dvalues", attention_loss, &c, v, dv));
    cr_log_info("attention (%zu, %zu, %zu): worst relative error %.3g", ac->B,
                ac->Lq, ac->Lk, err);
    assert_masked_rows_zero("dkeys", dk, lens, ac->Lq);
    assert_masked_rows_zero("dvalues", dv, lens, ac->Lq);
    FREE_ALL(q, k, v, g, lens, out, dq, dk, dv);
    dot_attention_free(&a);
    gsl_rng_free(r);
}

/* A row with valid_len 0 averages all values whatever the scores: its
 * queries and keys get no gradient, every value 1/Lk of dout. */
Test(backward, attention_all_masked_row)
{
    gsl_rng *r = rng_for_test(15);
    tensor *q = normal3(r, 1, 1, 2), *k = normal3(r, 1, 4, 2);
    tensor *v = normal3(r, 1, 4, 3), *g = normal3(r, 1, 1, 3);
    tensor *lens, *out, *w, *dq, *dk, *dv;
    OK(tensor_from_array(SHAPE(1), (double[]){0}, &lens));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    OK(dot_attention_forward(&a, q, k, v, lens, &out, &w));
    OK(dot_attention_backward(q, k, v, lens, w, g, &dq, &dk, &dv));
    for (size_t f = 0; f < 2; f++)
        cr_assert_eq(dq->data[f], 0.0);
    for (size_t j = 0; j < 8; j++)
        cr_assert_eq(dk->data[j], 0.0);
    for (size_t j = 0; j < 4; j++)
        for (size_t f = 0; f < 3; f++)
            cr_assert_float_eq(*TENSOR_AT(dv, 0, j, f), g->data[f] / 4, 1e-15);
    FREE_ALL(q, k, v, g, lens, out, w, dq, dk, dv);
    dot_attention_free(&a);
    gsl_rng_free(r);
}

/* Only what is asked for is computed; the rest stay NULL-safe. */
Test(backward, attention_partial_outputs)
{
    gsl_rng *r = rng_for_test(16);
    tensor *q = normal3(r, 2, 3, 2), *k = normal3(r, 2, 4, 2);
    tensor *v = normal3(r, 2, 4, 3), *g = normal3(r, 2, 3, 3);
    tensor *out, *w, *dv_only, *dq, *dk, *dv;
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    OK(dot_attention_forward(&a, q, k, v, NULL, &out, &w));
    OK(dot_attention_backward(q, k, v, NULL, w, g, &dq, &dk, &dv));
    OK(dot_attention_backward(q, k, v, NULL, w, g, NULL, NULL, &dv_only));
    cr_assert_eq(rel_error(dv_only, dv), 0.0);
    FREE_ALL(q, k, v, g, out, w, dv_only, dq, dk, dv);
    dot_attention_free(&a);
    gsl_rng_free(r);
}

/* --- the multi-head module ------------------------------------------ */

struct mh_case {
    size_t B, Lq, Lk, dq, dk, dv, D, h, Dout;
    int bias, mask, head_mask, rope;
};

static struct mh_case mh_cases[] = {
    /* B  Lq Lk dq dk dv D  h  Dout bias mask        head mask, rope */
    {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, NO_MASK, 0, 0},
    {2, 3, 4, 3, 5, 2, 6, 2, 0, 1, PER_EXAMPLE, 0, 0},
    {1, 5, 2, 3, 3, 3, 4, 1, 0, 1, NO_MASK, 0, 0},
//> 14
    {2, 4, 3, 4, 4, 4, 8, 4, 3, 1, PER_QUERY, 1, 0},
    {3, 2, 5, 2, 3, 4, 6, 3, 5, 0, PER_EXAMPLE, 1, 0},
    {1, 3, 6, 4, 2, 3, 8, 2, 2, 1, PER_QUERY, 1, 0},
//<
//> 15
    /* rope: queries at Lk-Lq .. Lk-1, negative when Lq > Lk */
    {2, 3, 4, 3, 5, 2, 8, 2, 0, 1, PER_EXAMPLE, 0, 1},
    {1, 5, 2, 3, 3, 3, 4, 2, 0, 1, NO_MASK, 1, 1},
    {2, 4, 4, 4, 4, 4, 12, 2, 3, 0, PER_QUERY, 0, 1},
//<
};

struct mh_ctx {
    multihead *m;
    tensor *q, *k, *v, *lens, *mask, *g;
};

static double mh_loss(void *p)
{
    struct mh_ctx *c = p;
    tensor *out;
    if (c->mask) {
        multihead_cache cache = {0};
        OK(multihead_forward_cached(c->m, c->q, c->k, c->v, c->lens, c->mask,
                                    &cache, &out, NULL));
        multihead_cache_free(&cache);
    } else {
        OK(multihead_forward(c->m, c->q, c->k, c->v, c->lens, &out, NULL));
    }
    double s = dot_all(out, c->g);
    tensor_free(out);
    return s;
}

ParameterizedTestParameters(backward, multihead_gradcheck)
{
    return cr_make_param_array(struct mh_case, mh_cases,
                               sizeof mh_cases / sizeof mh_cases[0]);
}

ParameterizedTest(struct mh_case *mc, backward, multihead_gradcheck)
{
    gsl_rng *r = rng_for_test(17);
    multihead_config cfg = {.query_size = mc->dq, .key_size = mc->dk,
                            .value_size = mc->dv, .num_hiddens = mc->D,
                            .num_heads = mc->h, .out_size = mc->Dout,
                            .bias = mc->bias};
//> 15
    cfg.rope = mc->rope;
//<
    multihead m, grads;
    OK(multihead_init(&m, &cfg));
    OK(multihead_init(&grads, &cfg));
    multihead_reset_xavier(&m, r);
    linear *layers[4] = {&m.W_q, &m.W_k, &m.W_v, &m.W_o};
    if (mc->bias) /* nonzero biases, so that they matter */
        for (int i = 0; i < 4; i++)
            tensor_fill_normal(layers[i]->bias, r, 0, 0.5);
    size_t Dout = m.cfg.out_size;
    tensor *q = normal3(r, mc->B, mc->Lq, mc->dq);
    tensor *k = normal3(r, mc->B, mc->Lk, mc->dk);
    tensor *v = normal3(r, mc->B, mc->Lk, mc->dv);
    tensor *g = normal3(r, mc->B, mc->Lq, Dout);
    tensor *lens = make_lens(mc->mask, mc->B, mc->Lq, mc->Lk);
    tensor *mask = NULL, *dmask = NULL;
    if (mc->head_mask) {
        OK(tensor_alloc(SHAPE(mc->h), &mask));
        OK(tensor_alloc(SHAPE(mc->h), &dmask));
        tensor_fill_uniform(mask, r, 0, 1.5);
    }
    multihead_cache cache = {0};
    tensor *out, *dq, *dk, *dv;
    OK(multihead_forward_cached(&m, q, k, v, lens, mask, &cache, &out, NULL));
    OK(multihead_backward(&m, &cache, g, &grads, dmask, &dq, &dk, &dv));

    struct mh_ctx c = {&m, q, k, v, lens, mask, g};
    double err = check_grad("dqueries", mh_loss, &c, q, dq);
    err = worse(err, check_grad("dkeys", mh_loss, &c, k, dk));
    err = worse(err, check_grad("dvalues", mh_loss, &c, v, dv));
    linear *dlayers[4] = {&grads.W_q, &grads.W_k, &grads.W_v, &grads.W_o};
    static const char *names[4] = {"W_q", "W_k", "W_v", "W_o"};
    for (int i = 0; i < 4; i++) {
        err = worse(err, check_grad(names[i], mh_loss, &c, layers[i]->weight,
                                    dlayers[i]->weight));
        if (mc->bias)
            err = worse(err, check_grad(names[i], mh_loss, &c, layers[i]->bias,
                                        dlayers[i]->bias));
    }
    if (mask)
        err = worse(err, check_grad("head_mask", mh_loss, &c, mask, dmask));
    cr_log_info("multihead B %zu, h %zu: worst relative error %.3g", mc->B,
                mc->h, err);
    assert_masked_rows_zero("dkeys", dk, lens, mc->Lq);
    assert_masked_rows_zero("dvalues", dv, lens, mc->Lq);

    FREE_ALL(q, k, v, g, lens, mask, dmask, out, dq, dk, dv);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&grads);
    gsl_rng_free(r);
}

/* Self-attention: one X for queries, keys and values, so dX is the sum of
 * the three input gradients. */
/* m of cfg with Xavier weights drawn from r, and (unless grads is NULL)
 * a module of the same shape to take its gradients. */
static void make_module(multihead *m, multihead *grads,
                        const multihead_config *cfg, gsl_rng *r)
{
    OK(multihead_init(m, cfg));
    if (grads)
        OK(multihead_init(grads, cfg));
    multihead_reset_xavier(m, r);
}

/* The small module of the gradient, trace and memory tests. */
static const multihead_config small_config = {
    .query_size = 3, .key_size = 3, .value_size = 3, .num_hiddens = 4,
    .num_heads = 2, .bias = 1};

struct self_ctx {
    multihead *m;
    tensor *x, *lens, *g;
};

static double self_loss(void *p)
{
    struct self_ctx *c = p;
    tensor *out;
    OK(multihead_forward(c->m, c->x, c->x, c->x, c->lens, &out, NULL));
    double s = dot_all(out, c->g);
    tensor_free(out);
    return s;
}

Test(backward, multihead_self_attention)
{
    gsl_rng *r = rng_for_test(18);
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    multihead_reset_xavier(&m, r);
    tensor *x = normal3(r, 2, 3, 4), *g = normal3(r, 2, 3, 4), *lens;
    OK(causal_valid_lens(2, 3, &lens));
    multihead_cache cache = {0};
    tensor *out, *dq, *dk, *dv;
    OK(multihead_forward_cached(&m, x, x, x, lens, NULL, &cache, &out, NULL));
    OK(multihead_backward(&m, &cache, g, NULL, NULL, &dq, &dk, &dv));
    for (size_t i = 0; i < tensor_numel(dq); i++)
        dq->data[i] += dk->data[i] + dv->data[i];
    struct self_ctx c = {&m, x, lens, g};
    check_grad("dX", self_loss, &c, x, dq);
    FREE_ALL(x, g, lens, out, dq, dk, dv);
    multihead_cache_free(&cache);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* The cached forward computes what multihead_forward computes, to the
 * bit, gives and saves the same weights, and a mask of ones changes
 * nothing. */
Test(backward, forward_cached_equals_forward)
{
    gsl_rng *r = rng_for_test(19);
    multihead m;
    multihead_config cfg = {.query_size = 3, .key_size = 5, .value_size = 2,
                            .num_hiddens = 6, .num_heads = 3, .bias = 1};
    make_module(&m, NULL, &cfg, r);
    tensor *q = normal3(r, 2, 4, 3), *k = normal3(r, 2, 5, 5);
    tensor *v = normal3(r, 2, 5, 2), *lens = make_lens(PER_QUERY, 2, 4, 5);
    tensor *ones = NULL, *out, *cached, *masked = NULL, *w, *cw, *saved;
    OK(multihead_forward(&m, q, k, v, lens, &out, &w));
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, q, k, v, lens, NULL, &cache, &cached, &cw));
    cr_assert_eq(rel_error(cached, out), 0.0);
    cr_assert_eq(rel_error(cw, w), 0.0);
    // the saved weights (B*h, Lq, Lk) are the same numbers
    OK(tensor_reshape(w, SIZES(6, 4, 5), NULL, &saved));
    cr_assert_eq(rel_error(cache.weights, saved), 0.0);
    tensor_free(saved);
    tensor_free(cw);
//> 14
    // a mask of ones changes nothing
    OK(tensor_alloc(SHAPE(3), &ones));
    tensor_fill(ones, 1);
    OK(multihead_forward_cached(&m, q, k, v, lens, ones, &cache, &masked, NULL));
    cr_assert_eq(rel_error(masked, out), 0.0);
    cr_assert_not_null(cache.head_mask);
//<
    cr_assert_eq(cache.queries, q);
    FREE_ALL(q, k, v, lens, ones, out, cached, masked, w);
    multihead_cache_free(&cache);
    multihead_free(&m);
    gsl_rng_free(r);
}

//> 14
/* A zero in the head mask silences that head: its attention output no
 * longer reaches W_o, so the output equals that of a module whose W_o
 * columns for the head are zero. */
Test(backward, head_mask_zero_removes_the_head)
{
    gsl_rng *r = rng_for_test(20);
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 6, .num_heads = 3);
    multihead_reset_xavier(&m, r);
    tensor *x = normal3(r, 2, 3, 4), *mask, *out_masked, *out_zeroed;
    OK(tensor_from_array(SHAPE(3), (double[]){1, 0, 1}, &mask));
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, x, x, x, NULL, mask, &cache, &out_masked, NULL));
    for (size_t o = 0; o < 6; o++)
        for (size_t j = 2; j < 4; j++) /* head 1 is features 2..3 */
            *TENSOR_AT(m.W_o.weight, o, j) = 0;
    OK(multihead_forward(&m, x, x, x, NULL, &out_zeroed, NULL));
    cr_assert_leq(rel_error(out_masked, out_zeroed), 1e-15);
    FREE_ALL(x, mask, out_masked, out_zeroed);
    multihead_cache_free(&cache);
    multihead_free(&m);
    gsl_rng_free(r);
}
//<

//> 14
/* Two backward passes add up: the parameters' gradients double (to the
 * rounding of one addition: a BLAS may add into dW term by term). */
Test(backward, multihead_gradients_accumulate)
{
    gsl_rng *r = rng_for_test(21);
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 4, .num_heads = 2, .bias = 1};
    multihead m, once, twice;
    OK(multihead_init(&m, &cfg));
    OK(multihead_init(&once, &cfg));
    OK(multihead_init(&twice, &cfg));
    multihead_reset_xavier(&m, r);
    tensor *x = normal3(r, 1, 3, 2), *g = normal3(r, 1, 3, 4), *out;
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, x, x, x, NULL, NULL, &cache, &out, NULL));
    OK(multihead_backward(&m, &cache, g, &once, NULL, NULL, NULL, NULL));
    OK(multihead_backward(&m, &cache, g, &twice, NULL, NULL, NULL, NULL));
    OK(multihead_backward(&m, &cache, g, &twice, NULL, NULL, NULL, NULL));
    linear *a[4] = {&once.W_q, &once.W_k, &once.W_v, &once.W_o};
    linear *b[4] = {&twice.W_q, &twice.W_k, &twice.W_v, &twice.W_o};
    for (int i = 0; i < 4; i++) {
        cr_assert_gt(fabs(a[i]->weight->data[0]), 0);
        for (size_t j = 0; j < tensor_numel(a[i]->weight); j++)
            cr_assert_float_eq(b[i]->weight->data[j],
                               2 * a[i]->weight->data[j], 1e-14);
        for (size_t j = 0; j < tensor_numel(a[i]->bias); j++)
            cr_assert_float_eq(b[i]->bias->data[j], 2 * a[i]->bias->data[j],
                               1e-14);
    }
    FREE_ALL(x, g, out);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&once);
    multihead_free(&twice);
    gsl_rng_free(r);
}
//<

/* The key bias moves every score of a row by the same amount, which the
 * softmax ignores: its gradient is zero (to rounding), while W_k's is
 * not. */
Test(backward, key_bias_gets_no_gradient)
{
    gsl_rng *r = rng_for_test(22);
    multihead m, grads;
    make_module(&m, &grads, &small_config, r);
    tensor_fill_normal(m.W_k.bias, r, 0, 1);
    tensor *x = normal3(r, 2, 4, 3), *g = normal3(r, 2, 4, 4), *out;
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, x, x, x, NULL, NULL, &cache, &out, NULL));
    OK(multihead_backward(&m, &cache, g, &grads, NULL, NULL, NULL, NULL));
    cr_assert_leq(max_abs(grads.W_k.bias), 1e-15);
    cr_assert_gt(max_abs(grads.W_k.weight), 1e-3);
    cr_assert_gt(max_abs(grads.W_q.bias), 1e-3);
    FREE_ALL(x, g, out);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&grads);
    gsl_rng_free(r);
}

/* --- the trace ------------------------------------------------------ */

//> 14
Test(backward_trace, one_small_module)
{
    gsl_rng *r = rng_for_test(23);
    multihead m, grads;
    make_module(&m, &grads, &small_config, r);
    tensor *q = normal3(r, 2, 2, 3), *k = normal3(r, 2, 3, 3);
    tensor *g = normal3(r, 2, 2, 4), *lens, *mask, *dmask, *out, *dq;
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 0.5}, &mask));
    OK(tensor_alloc(SHAPE(2), &dmask));
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, q, k, k, lens, mask, &cache, &out, NULL));
    TRACES(multihead_backward(&m, &cache, g, &grads, dmask, &dq, NULL, NULL),
           "multihead_backward(h=2)        dout (2, 2, 4)                      (B, Lq, d_model)\n"
           "  # the joined heads' gradient, through W_o\n"
           "  W_o backward                 dy (2, 2, 4)                        (B, Lq, d_model)\n"
           "    dx = dy W            new   (2, 2, 4) @ (4, 4) -> (2, 2, 4)     (B, Lq, d_model)\n"
           "  transpose_qkv(h=2)           (2, 2, 4)                           (B, Lq, d_model)\n"
           "    reshape(2, 2, 2, -1) view  (2, 2, 4) -> (2, 2, 2, 2)           (B, Lq, h, d_model/h)\n"
           "    permute(0, 2, 1, 3)  view  (2, 2, 2, 2) -> (2, 2, 2, 2)        (B, h, Lq, d_model/h)\n"
           "    reshape(-1, 2, 2)    copy  (2, 2, 2, 2) -> (4, 2, 2)           (B*h, Lq, d_model/h)\n"
           "  head_mask backward     new   (4, 2, 2) -> (4, 2, 2)              (B*h, Lq, d_model/h)\n"
           "  dmask += sum(dy * heads) new   (4, 2, 2), (4, 2, 2) -> (2,)\n"
           "  dot_attention_backward(scale 1/sqrt(2))       dout (4, 2, 2)                      (B*h, Lq, d_model/h)\n"
           "    dV = w^T dout        new   (4, 2, 3)^T @ (4, 2, 2) -> (4, 3, 2)  (B*h, Lk, d_model/h)\n"
           "    dw = dout V^T        new   (4, 2, 2) @ (4, 3, 2)^T -> (4, 2, 3)  (B*h, Lq, Lk)\n"
           "    masked_softmax_backward(scale 0.707107, valid_lens (4,)) new   (4, 2, 3) -> (4, 2, 3)              (B*h, Lq, Lk)\n"
           "    dQ = ds K            new   (4, 2, 3) @ (4, 3, 2) -> (4, 2, 2)  (B*h, Lq, d_model/h)\n"
           "    dK = ds^T Q          new   (4, 2, 3)^T @ (4, 2, 2) -> (4, 3, 2)  (B*h, Lk, d_model/h)\n"
           "  # dQ: the query heads' gradients side by side\n"
           "  transpose_output(h=2)        (4, 2, 2)                           (B*h, Lq, d_model/h)\n"
           "    reshape(-1, 2, 2, 2) view  (4, 2, 2) -> (2, 2, 2, 2)           (B, h, Lq, d_model/h)\n"
           "    permute(0, 2, 1, 3)  view  (2, 2, 2, 2) -> (2, 2, 2, 2)        (B, Lq, h, d_model/h)\n"
           "    reshape(2, 2, -1)    copy  (2, 2, 2, 2) -> (2, 2, 4)           (B, Lq, d_model)\n"
           "  # dK: the key heads' gradients side by side\n"
           "  transpose_output(h=2)        (4, 3, 2)                           (B*h, Lk, d_model/h)\n"
           "    reshape(-1, 2, 3, 2) view  (4, 3, 2) -> (2, 2, 3, 2)           (B, h, Lk, d_model/h)\n"
           "    permute(0, 2, 1, 3)  view  (2, 2, 3, 2) -> (2, 3, 2, 2)        (B, Lk, h, d_model/h)\n"
           "    reshape(2, 3, -1)    copy  (2, 3, 2, 2) -> (2, 3, 4)           (B, Lk, d_model)\n"
           "  # dV: the value heads' gradients side by side\n"
           "  transpose_output(h=2)        (4, 3, 2)                           (B*h, Lk, d_model/h)\n"
           "    reshape(-1, 2, 3, 2) view  (4, 3, 2) -> (2, 2, 3, 2)           (B, h, Lk, d_model/h)\n"
           "    permute(0, 2, 1, 3)  view  (2, 2, 3, 2) -> (2, 3, 2, 2)        (B, Lk, h, d_model/h)\n"
           "    reshape(2, 3, -1)    copy  (2, 3, 2, 2) -> (2, 3, 4)           (B, Lk, d_model)\n"
           "  # the inputs' gradients, through W_q, W_k and W_v\n"
           "  W_q backward                 dy (2, 2, 4)                        (B, Lq, d_model)\n"
           "    dx = dy W            new   (2, 2, 4) @ (4, 3) -> (2, 2, 3)     (B, Lq, d_q)\n"
           "  # the layers' own gradients: W_o's from dout, the others from dQ, dK, dV\n"
           "  W_o backward                 dy (2, 2, 4)                        (B, Lq, d_model)\n"
           "    dW += dy^T x         new   (4, 4)^T @ (4, 4) -> (4, 4)\n"
           "    db += sum(dy, rows)  new   (4, 4) -> (4,)\n"
           "  W_q backward                 dy (2, 2, 4)                        (B, Lq, d_model)\n"
           "    dW += dy^T x         new   (4, 4)^T @ (4, 3) -> (4, 3)\n"
           "    db += sum(dy, rows)  new   (4, 4) -> (4,)\n"
           "  W_k backward                 dy (2, 3, 4)                        (B, Lk, d_model)\n"
           "    dW += dy^T x         new   (6, 4)^T @ (6, 3) -> (4, 3)\n"
           "    db += sum(dy, rows)  new   (6, 4) -> (4,)\n"
           "  W_v backward                 dy (2, 3, 4)                        (B, Lk, d_model)\n"
           "    dW += dy^T x         new   (6, 4)^T @ (6, 3) -> (4, 3)\n"
           "    db += sum(dy, rows)  new   (6, 4) -> (4,)\n");
    FREE_ALL(q, k, g, lens, mask, dmask, out, dq);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&grads);
    gsl_rng_free(r);
}
//<

Test(backward_trace, masked_softmax_without_mask)
{
    tensor *w, *dw, *ds;
    OK(tensor_from_array(SHAPE(1, 1, 2), (double[]){0.25, 0.75}, &w));
    OK(tensor_from_array(SHAPE(1, 1, 2), (double[]){1, 1}, &dw));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(masked_softmax_backward(w, dw, 1.0, NULL, &ds));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
                     "masked_softmax_backward(no mask) new   (1, 1, 2) -> "
                     "(1, 1, 2)\n");
    /* a gradient equal on every weight changes nothing: sum w = 1 */
    cr_assert_eq(ds->data[0], 0.0);
    cr_assert_eq(ds->data[1], 0.0);
    capture_free(&c);
    FREE_ALL(w, dw, ds);
}

/* --- errors --------------------------------------------------------- */

Test(backward_errors, linear)
{
    linear l, g_small, g_nobias;
    OK(linear_init(&l, "W_q", 3, 4, 1));
    OK(linear_init(&g_small, "dW", 2, 4, 1));
    OK(linear_init(&g_nobias, "dW", 3, 4, 0));
    tensor *x, *x5, *dy, *dy5, *dx = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3), &x));
    OK(tensor_alloc(SHAPE(2, 5), &x5));
    OK(tensor_alloc(SHAPE(2, 4), &dy));
    OK(tensor_alloc(SHAPE(2, 5), &dy5));
    FAILS(linear_backward(&l, x, dy5, NULL, &dx), GSL_EBADLEN,
          "linear_backward W_q: dy has shape (2, 5); for x (2, 3) it must "
          "be x's shape with 4 (out_features) last");
    cr_assert_null(dx);
    FAILS(linear_backward(&l, x5, dy, NULL, &dx), GSL_EBADLEN,
          "linear_backward W_q: x of shape (2, 5) ends in 5 features, the "
          "layer takes 3 (weight (4, 3))");
    FAILS(linear_backward(&l, x, dy, &g_small, &dx), GSL_EBADLEN,
          "linear_backward W_q: the gradient's weight has shape (4, 2), the "
          "layer's (4, 3)");
    FAILS(linear_backward(&l, x, dy, &g_nobias, &dx), GSL_EBADLEN,
          "linear_backward W_q: the layer has a bias but its gradient has "
          "none");
    FAILS(linear_backward(&l, NULL, dy, NULL, &dx), GSL_EINVAL,
          "linear_backward W_q: x is NULL");
    FREE_ALL(x, x5, dy, dy5);
    linear_free(&l);
    linear_free(&g_small);
    linear_free(&g_nobias);
}

Test(backward_errors, masked_softmax)
{
    tensor *w, *w2, *lens, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &w));
    OK(tensor_alloc(SHAPE(2, 3, 5), &w2));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 5}, &lens));
    FAILS(masked_softmax_backward(w, w2, 1.0, NULL, &out), GSL_EBADLEN,
          "masked_softmax_backward: dweights has shape (2, 3, 5), weights "
          "(2, 3, 4); they must agree");
    cr_assert_null(out);
    FAILS(masked_softmax_backward(w, w, INFINITY, NULL, &out), GSL_EINVAL,
          "masked_softmax_backward: scale inf is not finite (weights "
          "(2, 3, 4))");
    FAILS(masked_softmax_backward(w, w, 1.0, lens, &out), GSL_EINVAL,
          "masked_softmax_backward: valid_lens[1] = 5 is larger than the "
          "number of keys 4 (weights (2, 3, 4), valid_lens (2,))");
    FREE_ALL(w, w2, lens);
}

Test(backward_errors, attention)
{
    tensor *q, *k, *v, *w, *dout, *q3, *dq = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_alloc(SHAPE(2, 5, 4), &k));
    OK(tensor_alloc(SHAPE(2, 5, 6), &v));
    OK(tensor_alloc(SHAPE(2, 3, 5), &w));
    OK(tensor_alloc(SHAPE(2, 3, 6), &dout));
    OK(tensor_alloc(SHAPE(3, 3, 4), &q3));
    FAILS(dot_attention_backward(q3, k, v, NULL, w, dout, &dq, NULL, NULL),
          GSL_EBADLEN,
          "dot_attention_backward: batch sizes differ (queries (3, 3, 4), "
          "keys (2, 5, 4), values (2, 5, 6), weights (2, 3, 5), dout "
          "(2, 3, 6))");
    cr_assert_null(dq);
    FAILS(dot_attention_backward(q, k, v, NULL, dout, dout, &dq, NULL, NULL),
          GSL_EBADLEN,
          "dot_attention_backward: weights must be (B, Lq, Lk) = (2, 3, 5) "
          "(queries (2, 3, 4), keys (2, 5, 4), values (2, 5, 6), weights "
          "(2, 3, 6), dout (2, 3, 6))");
    FAILS(dot_attention_backward(q, k, v, NULL, w, w, &dq, NULL, NULL),
          GSL_EBADLEN,
          "dot_attention_backward: dout must be (B, Lq, dv) = (2, 3, 6) "
          "(queries (2, 3, 4), keys (2, 5, 4), values (2, 5, 6), weights "
          "(2, 3, 5), dout (2, 3, 5))");
    FAILS(dot_attention_backward(q, k, v, NULL, NULL, dout, &dq, NULL, NULL),
          GSL_EINVAL, "dot_attention_backward: weights is NULL");
    FREE_ALL(q, k, v, w, dout, q3);
}

Test(backward_errors, module)
{
    gsl_rng *r = rng_for_test(24);
    multihead_config cfg = {.query_size = 3, .key_size = 3, .value_size = 3,
                            .num_hiddens = 4, .num_heads = 2, .dropout = 0.5};
    multihead_config other = cfg;
    other.num_heads = 4;
    multihead m, g_other;
    OK(multihead_init(&m, &cfg));
    OK(multihead_init(&g_other, &other));
    tensor *x = normal3(r, 2, 3, 3), *mask3, *mask2, *d2, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(3), &mask3));
    OK(tensor_alloc(SHAPE(2), &mask2));
    OK(tensor_alloc(SHAPE(2), &d2));
    multihead_cache cache = {0};
    FAILS(multihead_backward(&m, &cache, x, NULL, NULL, NULL, NULL, NULL),
          GSL_EINVAL,
          "multihead_backward: the cache is empty; run "
          "multihead_forward_cached first");
    multihead_train(&m, 1, r);
    FAILS(multihead_forward_cached(&m, x, x, x, NULL, NULL, &cache, &out, NULL),
          GSL_EINVAL,
          "multihead_forward_cached: dropout 0.5 in training mode: the "
          "backward pass needs the dropped weights, which are not kept; "
          "train with dropout 0 or in evaluation mode");
    cr_assert_null(out);
    multihead_train(&m, 0, NULL);
//> 14
    FAILS(multihead_forward_cached(&m, x, x, x, NULL, mask3, &cache, &out, NULL),
          GSL_EBADLEN,
          "multihead_forward_cached: head_mask has shape (3,), expected (2,) "
          "for num_heads 2");
    cr_assert_null(cache.concat);
//<
    /* the shapes are checked as multihead_forward checks them */
    tensor *x4 = normal3(r, 2, 3, 4);
    FAILS(multihead_forward_cached(&m, x, x4, x, NULL, NULL, &cache, &out, NULL),
          GSL_EBADLEN,
          "multihead: feature sizes queries (2, 3, 3), keys (2, 3, 4), "
          "values (2, 3, 3) do not match the layers' query_size 3, "
          "key_size 3, value_size 3");
    tensor_free(x4);
    OK(multihead_forward_cached(&m, x, x, x, NULL, NULL, &cache, &out, NULL));
    tensor *dq = (tensor *)1;
    FAILS(multihead_backward(&m, &cache, x, NULL, NULL, &dq, NULL, NULL),
          GSL_EBADLEN,
          "multihead_backward: dout has shape (2, 3, 3), the forward's "
          "output was (2, 3, 4)");
    cr_assert_null(dq);
    tensor *g;
    OK(tensor_alloc(SHAPE(2, 3, 4), &g));
    FAILS(multihead_backward(&m, &cache, g, &g_other, NULL, NULL, NULL, NULL),
          GSL_EBADLEN,
          "multihead_backward: grads is a module of another configuration "
          "(num_hiddens 4, num_heads 4, out_size 4; the module's 4, 2, 4)");
//> 14
    FAILS(multihead_backward(&m, &cache, g, NULL, d2, NULL, NULL, NULL),
          GSL_EINVAL,
          "multihead_backward: dhead_mask asked for, but the forward had no "
          "head mask");
//<
    FREE_ALL(x, mask3, mask2, d2, out, g);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&g_other);
    gsl_rng_free(r);
}

/* --- every allocation may fail -------------------------------------- */

/* k = 0, 1, 2 ...: the k-th allocation fails, until none does.  Each
 * failure returns GSL_ENOMEM, leaves the outputs NULL, the cache empty and
 * nothing leaked (the sanitizer and valgrind runs check that). */
Test(backward_memory, every_allocation_may_fail)
{
    gsl_rng *r = rng_for_test(25);
    multihead m, grads;
    make_module(&m, &grads, &small_config, r);
    /* B = 1: the heads are strided views, so the packing copies count */
    tensor *x = normal3(r, 1, 3, 3), *g = normal3(r, 1, 3, 4), *lens;
    tensor *mask = NULL, *dmask = NULL;
    OK(causal_valid_lens(1, 3, &lens));
//> 14
    OK(tensor_from_array(SHAPE(2), (double[]){1, 0.5}, &mask));
    OK(tensor_alloc(SHAPE(2), &dmask));
//<
    multihead_cache cache = {0};
    tensor *out = NULL;
    long failures = 0;
    EACH_ALLOCATION_FAILS(failures,
        multihead_forward_cached(&m, x, x, x, lens, mask, &cache, &out, NULL),
        cr_assert_null(out);
        cr_assert_null(cache.concat);
        cr_assert_null(cache.weights));
    cr_assert_gt(failures, 10);
    failures = 0;
    for (long k = 0;; k++) {
        tensor *dq = (tensor *)1, *dk = (tensor *)1, *dv = (tensor *)1;
        mha_debug_fail_alloc_after(k);
        int status = multihead_backward(&m, &cache, g, &grads, dmask, &dq, &dk,
                                        &dv);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS) {
            FREE_ALL(dq, dk, dv);
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM, "k = %ld: %s", k, mha_last_error());
        cr_assert_null(dq);
        cr_assert_null(dk);
        cr_assert_null(dv);
        failures++;
    }
    cr_assert_gt(failures, 20);
    /* linear_backward alone: a failure adds nothing to the gradient */
    linear lg;
    OK(linear_init(&lg, "dW_q", 3, 4, 1));
    tensor *xt, *xp, *dy = normal3(r, 1, 3, 4);
    OK(tensor_alloc(SHAPE(3, 1, 3), &xt));
    tensor_fill_normal(xt, r, 0, 1);
    OK(tensor_permute(xt, SHAPE(1, 0, 2), &xp)); /* strided: packed */
    failures = 0;
    for (long k = 0;; k++) {
        tensor *dx = (tensor *)1;
        mha_debug_fail_alloc_after(k);
        int status = linear_backward(&m.W_q, xp, dy, &lg, &dx);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS) {
            tensor_free(dx);
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM);
        cr_assert_null(dx);
        cr_assert_eq(max_abs(lg.weight), 0.0);
        cr_assert_eq(max_abs(lg.bias), 0.0);
        failures++;
    }
    cr_assert_gt(failures, 0);
    cr_assert_gt(max_abs(lg.weight), 0.0);
    FREE_ALL(x, g, lens, mask, dmask, out, xt, xp, dy);
    linear_free(&lg);
    multihead_cache_free(&cache);
    multihead_free(&m);
    multihead_free(&grads);
    gsl_rng_free(r);
}
//<
