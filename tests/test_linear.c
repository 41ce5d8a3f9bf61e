//> 02
/* test_linear.c: y = x W^T + b, three ways.
 *
 * linear_forward (one dgemm) is held to linear_forward_naive (loops over
 * tensors) and to a third formulation written here: a triple loop over
 * plain arrays, x's numbers found by hand-written index arithmetic.
 */
#include "check.h"

#include <criterion/parameterized.h>
#include <gsl/gsl_randist.h>

#define MAXD TENSOR_MAX_DIMS

static void reset(void)
{
    trace_to(NULL);
    mha_debug_fail_alloc_after(-1);
}

TestSuite(linear, .init = reset, .fini = reset);

/* n numbers from U(-1, 1) with a fixed seed. */
static double *random_array(size_t n, unsigned long seed)
{
    gsl_rng *r = mha_rng_new(seed);
    double *v = malloc(n * sizeof *v);
    cr_assert(r && v);
    for (size_t k = 0; k < n; k++)
        v[k] = 2 * gsl_rng_uniform(r) - 1;
    gsl_rng_free(r);
    return v;
}

/* A layer whose weight (and bias) hold the given plain arrays. */
static void layer(linear *l, size_t in, size_t out, const double *w,
                  const double *b)
{
    OK(linear_init(l, "W", in, out, b != NULL));
    memcpy(l->weight->data, w, in * out * sizeof *w);
    if (b)
        memcpy(l->bias->data, b, out * sizeof *b);
}

/* The reference: y[r][o] = b[o] + sum_i x[r][i] w[o][i] over plain arrays,
 * x given row-major as (rows, in). */
static tensor *reference(const double *x, size_t rows, size_t in, size_t out,
                         const double *w, const double *b, size_t ndim,
                         const size_t *shape)
{
    size_t yshape[MAXD];
    memcpy(yshape, shape, ndim * sizeof *shape);
    yshape[ndim - 1] = out;
    tensor *y = NULL;
    OK(tensor_alloc(ndim, yshape, &y));
    for (size_t r = 0; r < rows; r++)
        for (size_t o = 0; o < out; o++) {
            double sum = b ? b[o] : 0.0;
            for (size_t i = 0; i < in; i++)
                sum += x[r * in + i] * w[o * in + i];
            y->data[r * out + o] = sum;
        }
    return y;
}

/* --- the three agree ------------------------------------------------- */

typedef struct {
    size_t ndim;
    size_t shape[MAXD]; /* x's shape; the last entry is in_features */
    size_t out;
    int bias;
} forward_case;

ParameterizedTestParameters(linear, three_ways_agree)
{
    static forward_case cases[] = {
        {1, {5}, 3, 1},          {1, {5}, 3, 0},
        {2, {3, 7}, 4, 1},       {2, {3, 7}, 11, 0},
        {3, {2, 3, 4}, 6, 1},    {3, {2, 3, 4}, 6, 0},
        {4, {2, 1, 3, 5}, 2, 1}, {4, {2, 1, 3, 5}, 9, 0},
        {2, {4, 1}, 3, 1},       {2, {4, 6}, 1, 1},
        {3, {1, 2, 16}, 16, 1},
    };
    return cr_make_param_array(forward_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(forward_case *c, linear, three_ways_agree)
{
    size_t in = c->shape[c->ndim - 1], out = c->out, n = 1;
    for (size_t d = 0; d < c->ndim; d++)
        n *= c->shape[d];
    size_t rows = n / in;
    double *xv = random_array(n, 1), *w = random_array(out * in, 2);
    double *b = c->bias ? random_array(out, 3) : NULL;
    linear l;
    layer(&l, in, out, w, b);
    tensor *x = NULL, *fast = NULL, *naive = NULL;
    OK(tensor_from_array(c->ndim, c->shape, xv, &x));
    tensor *ref = reference(xv, rows, in, out, w, b, c->ndim, c->shape);

    OK(linear_forward(&l, x, &fast));
    OK(linear_forward_naive(&l, x, &naive));
    cr_assert(tensor_same_shape(fast, ref));
    cr_assert(tensor_is_contiguous(fast));
    double e1 = rel_error(fast, ref), e2 = rel_error(naive, ref);
    cr_assert_leq(e1, 1e-13, "dgemm vs plain arrays: %g", e1);
    cr_assert_leq(e2, 1e-13, "naive vs plain arrays: %g", e2);
    cr_assert_leq(rel_error(fast, naive), 1e-13);
    /* and the numbers are not all zero: the check could fail */
    cr_assert_gt(fabs(ref->data[0]) + fabs(ref->data[out - 1]), 1e-3);
    /* neither x nor the layer changed */
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(x->data[k], xv[k]);
    cr_assert_eq(memcmp(l.weight->data, w, in * out * sizeof *w), 0);

    FREE_ALL(ref, naive, fast, x);
    linear_free(&l);
    free(b);
    free(w);
    free(xv);
}

/* The d2l sizes: hiddens 100 from queries of 20, a (2, 4, 20) batch. */
Test(linear, lesson_sizes)
{
    size_t in = 20, out = 100, rows = 8;
    double *xv = random_array(rows * in, 4), *w = random_array(out * in, 5);
    double *b = random_array(out, 6);
    linear l;
    layer(&l, in, out, w, b);
    tensor *x = NULL, *y = NULL;
    OK(tensor_from_array(SHAPE(2, 4, 20), xv, &x));
    tensor *ref = reference(xv, rows, in, out, w, b, 3, (size_t[]){2, 4, 20});
    OK(linear_forward(&l, x, &y));
    cr_assert_leq(rel_error(y, ref), 1e-13);
    FREE_ALL(ref, y, x);
    linear_free(&l);
    free(b);
    free(w);
    free(xv);
}

/* --- inputs that are not contiguous ----------------------------------- */

/* Run x through the layer with the trace on; check the numbers against
 * `want_x` (x's numbers in row-major order) and return the trace. */
static const char *forward_traced(capture *c, const linear *l, const tensor *x,
                                  const double *want_x, const double *w,
                                  const double *b)
{
    size_t in = l->in_features, out = l->out_features, rows = tensor_numel(x) / in;
    tensor *fast = NULL, *naive = NULL;
    tensor *ref = reference(want_x, rows, in, out, w, b, x->ndim, x->shape);
    capture_start(c);
    trace_to(c->f);
    OK(linear_forward(l, x, &fast));
    trace_to(NULL);
    const char *text = capture_end(c);
    OK(linear_forward_naive(l, x, &naive));
    cr_assert_leq(rel_error(fast, ref), 1e-13, "%g", rel_error(fast, ref));
    cr_assert_leq(rel_error(naive, ref), 1e-13);
    FREE_ALL(ref, naive, fast);
    return text;
}

/* (3, 2, 4) permuted to (2, 3, 4): rows 4 apart but in the order
 * 0, 2, 4, 1, 3, 5 of memory, so dgemm needs a packed copy. */
Test(linear, permuted_input_is_packed)
{
    double *base = random_array(24, 7), *w = random_array(5 * 4, 8);
    double *b = random_array(5, 9), want_x[24];
    linear l;
    layer(&l, 4, 5, w, b);
    tensor *x0 = NULL, *x = NULL;
    OK(tensor_from_array(SHAPE(3, 2, 4), base, &x0));
    OK(tensor_set_names(x0, "n, B, d"));
    OK(tensor_permute(x0, SHAPE(1, 0, 2), &x));
    /* x[i][j][k] = base[j][i][k] */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 3; j++)
            for (size_t k = 0; k < 4; k++)
                want_x[12 * i + 4 * j + k] = base[8 * j + 4 * i + k];
    capture c;
    cr_assert_str_eq(forward_traced(&c, &l, x, want_x, w, b),
        "contiguous()             copy  (2, 3, 4) -> (2, 3, 4)              (B, n, d)\n"
        "W: x W^T + b             new   (2, 3, 4) -> (2, 3, 5)              (B, n, 5)\n");
    capture_free(&c);
    FREE_ALL(x, x0);
    linear_free(&l);
    free(b);
    free(w);
    free(base);
}

/* (1, B, n, d) permuted to (B, 1, n, d), an axis of 1 moved: the rows are
 * still evenly spaced, so dgemm reads x where it is. */
Test(linear, permuted_input_with_even_rows)
{
    double *base = random_array(2 * 3 * 4, 10), *w = random_array(3 * 4, 11);
    linear l;
    layer(&l, 4, 3, w, NULL);
    tensor *x0 = NULL, *x = NULL;
    OK(tensor_from_array(SHAPE(1, 2, 3, 4), base, &x0));
    OK(tensor_permute(x0, SHAPE(1, 0, 2, 3), &x));
    cr_assert_eq(x->strides[1], 24);
    capture c;
    /* x[i][0][j][k] = base[0][i][j][k]: the same order in memory */
    cr_assert_str_eq(forward_traced(&c, &l, x, base, w, NULL),
        "W: x W^T                 new   (2, 1, 3, 4) -> (2, 1, 3, 3)\n");
    capture_free(&c);
    FREE_ALL(x, x0);
    linear_free(&l);
    free(w);
    free(base);
}

/* A window on wider rows, such as a slice makes: columns 2..5 of a (3, 8)
 * buffer, rows 8 apart.  Read in place with a leading dimension of 8. */
Test(linear, strided_rows_read_in_place)
{
    double *base = random_array(3 * 8, 12), *w = random_array(2 * 4, 13);
    double *b = random_array(2, 14), want_x[12];
    linear l;
    layer(&l, 4, 2, w, b);
    tensor *wide = NULL;
    OK(tensor_from_array(SHAPE(3, 8), base, &wide));
    tensor window = tensor_named(wide, NULL); /* borrows wide's buffer */
    window.data = wide->data + 2;
    window.shape[1] = 4;
    for (size_t r = 0; r < 3; r++)
        for (size_t k = 0; k < 4; k++)
            want_x[4 * r + k] = base[8 * r + 2 + k];
    capture c;
    cr_assert_str_eq(forward_traced(&c, &l, &window, want_x, w, b),
        "W: x W^T + b             new   (3, 4) -> (3, 2)\n");
    capture_free(&c);

    /* every other column: the last stride is 2, so it has to be packed */
    window.data = wide->data + 1;
    window.strides[1] = 2;
    for (size_t r = 0; r < 3; r++)
        for (size_t k = 0; k < 4; k++)
            want_x[4 * r + k] = base[8 * r + 1 + 2 * k];
    cr_assert_str_eq(forward_traced(&c, &l, &window, want_x, w, b),
        "contiguous()             copy  (3, 4) -> (3, 4)\n"
        "W: x W^T + b             new   (3, 4) -> (3, 2)\n");
    capture_free(&c);
    tensor_free(wide);
    linear_free(&l);
    free(b);
    free(w);
    free(base);
}

/* A transposed (in, rows) matrix read as (rows, in): the last stride is
 * not 1, so a copy. */
Test(linear, transposed_input_is_packed)
{
    double *base = random_array(4 * 6, 15), *w = random_array(3 * 4, 16);
    double want_x[24];
    linear l;
    layer(&l, 4, 3, w, NULL);
    tensor *x0 = NULL, *x = NULL;
    OK(tensor_from_array(SHAPE(4, 6), base, &x0));
    OK(tensor_permute(x0, SHAPE(1, 0), &x)); /* (6, 4), x[r][i] = base[i][r] */
    for (size_t r = 0; r < 6; r++)
        for (size_t i = 0; i < 4; i++)
            want_x[4 * r + i] = base[6 * i + r];
    capture c;
    cr_assert_str_eq(forward_traced(&c, &l, x, want_x, w, NULL),
        "contiguous()             copy  (6, 4) -> (6, 4)\n"
        "W: x W^T                 new   (6, 4) -> (6, 3)\n");
    capture_free(&c);
    FREE_ALL(x, x0);
    linear_free(&l);
    free(w);
    free(base);
}

/* Random permuted inputs: the three ways agree, and linear_forward packs
 * x exactly when its rows cannot be read in place, i.e. when no row
 * spacing tda >= in_features puts element (r, i) at offset
 * off[0] + r tda + i (decided here by brute force). */
Test(linear, random_permuted_inputs)
{
    gsl_rng *r = mha_rng_new(99);
    size_t packed = 0, in_place = 0;
    for (int trial = 0; trial < 500; trial++) {
        size_t ndim = 1 + gsl_rng_uniform_int(r, MAXD), base[MAXD], perm[MAXD];
        size_t n = 1, bstride[MAXD];
        for (size_t d = 0; d < ndim; d++) {
            base[d] = 1 + gsl_rng_uniform_int(r, 3);
            n *= base[d];
            perm[d] = d;
        }
        for (size_t d = ndim, s = 1; d-- > 0;) {
            bstride[d] = s;
            s *= base[d];
        }
        gsl_ran_shuffle(r, perm, ndim, sizeof perm[0]);
        double *bv = random_array(n, (unsigned long)trial);
        tensor *b = NULL, *x = NULL, *fast = NULL, *naive = NULL;
        OK(tensor_from_array(ndim, base, bv, &b));
        OK(tensor_permute(b, ndim, perm, &x));

        size_t in = x->shape[ndim - 1], out = 1 + gsl_rng_uniform_int(r, 4);
        size_t rows = n / in, off[81] = {0}, xi[MAXD];
        double xv[81];
        for (size_t f = 0; f < n; f++) {
            unravel(f, ndim, x->shape, xi);
            off[f] = 0;
            for (size_t d = 0; d < ndim; d++)
                off[f] += xi[d] * bstride[perm[d]];
            xv[f] = bv[off[f]];
        }
        int even = 1;
        size_t tda = in;
        if (rows > 1) {
            even = off[in] >= off[0] && off[in] - off[0] >= in;
            tda = off[in] - off[0];
        }
        for (size_t f = 0; even && f < n; f++)
            even = off[f] == off[0] + (f / in) * tda + f % in;

        double *w = random_array(out * in, 1000 + (unsigned long)trial);
        linear l;
        layer(&l, in, out, w, NULL);
        capture c;
        capture_start(&c);
        trace_to(c.f);
        OK(linear_forward(&l, x, &fast));
        trace_to(NULL);
        const char *text = capture_end(&c);
        int copied = strstr(text, "contiguous()") != NULL;
        cr_assert_eq(copied, !even, "trial %d: %s", trial, text);
        copied ? packed++ : in_place++;
        capture_free(&c);

        OK(linear_forward_naive(&l, x, &naive));
        tensor *ref = reference(xv, rows, in, out, w, NULL, ndim, x->shape);
        cr_assert_leq(rel_error(fast, ref), 1e-13, "trial %d", trial);
        cr_assert_leq(rel_error(naive, ref), 1e-13, "trial %d", trial);
        FREE_ALL(ref, naive, fast);
        linear_free(&l);
        FREE_ALL(x, b);
        free(w);
        free(bv);
    }
    cr_assert_gt(packed, 100);
    cr_assert_gt(in_place, 100);
    gsl_rng_free(r);
}

/* --- names ------------------------------------------------------------ */

Test(linear, output_names)
{
    linear l;
    OK(linear_init(&l, "W_q", 4, 6, 1));
    tensor *x = NULL, *y = NULL;
    char buf[TRACE_SHAPE_MAX];
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    OK(tensor_set_names(x, "B, n, d_in"));
    /* no out_name: the last dimension shows its size */
    OK(linear_forward(&l, x, &y));
    cr_assert_str_eq(tensor_sym_str(y, buf, sizeof buf), "(B, n, 6)");
    tensor_free(y);
    snprintf(l.out_name, sizeof l.out_name, "d_model");
    OK(linear_forward(&l, x, &y));
    cr_assert_str_eq(tensor_sym_str(y, buf, sizeof buf), "(B, n, d_model)");
    tensor_free(y);
    OK(linear_forward_naive(&l, x, &y));
    cr_assert_str_eq(tensor_sym_str(y, buf, sizeof buf), "(B, n, d_model)");
    tensor_free(y);
    /* an unnamed input gets only the last name */
    OK(tensor_set_names(x, NULL));
    OK(linear_forward(&l, x, &y));
    cr_assert_str_eq(tensor_sym_str(y, buf, sizeof buf), "(2, 3, d_model)");
    FREE_ALL(y, x);
    linear_free(&l);
}

/* --- initialisation --------------------------------------------------- */

Test(linear, init_is_zero)
{
    linear l;
    OK(linear_init(&l, "W_k", 3, 5, 1));
    cr_assert_str_eq(l.name, "W_k");
    cr_assert_eq(l.in_features, 3);
    cr_assert_eq(l.out_features, 5);
    cr_assert_eq(l.weight->ndim, 2);
    cr_assert_eq(l.weight->shape[0], 5);
    cr_assert_eq(l.weight->shape[1], 3);
    cr_assert_eq(l.bias->ndim, 1);
    cr_assert_eq(l.bias->shape[0], 5);
    for (size_t k = 0; k < 15; k++)
        cr_assert_eq(l.weight->data[k], 0.0);
    for (size_t k = 0; k < 5; k++)
        cr_assert_eq(l.bias->data[k], 0.0);
    linear_free(&l);
    cr_assert_null(l.weight);
    cr_assert_null(l.bias);
    linear_free(&l); /* twice is harmless */

    OK(linear_init(&l, NULL, 3, 5, 0));
    cr_assert_str_eq(l.name, "linear");
    cr_assert_null(l.bias);
    linear_free(&l);
}

/* every entry of t within [-a, a], and the extremes near +-a */
static void assert_spread(const tensor *t, double a)
{
    double lo = INFINITY, hi = -INFINITY;
    size_t n = tensor_numel(t);
    for (size_t k = 0; k < n; k++) {
        cr_assert_leq(fabs(t->data[k]), a, "%g outside +-%g", t->data[k], a);
        lo = fmin(lo, t->data[k]);
        hi = fmax(hi, t->data[k]);
    }
    cr_assert_lt(lo, -0.9 * a, "smallest %g of +-%g", lo, a);
    cr_assert_gt(hi, 0.9 * a, "largest %g of +-%g", hi, a);
}

Test(linear, xavier_uniform_bounds)
{
    linear l;
    gsl_rng *r = mha_rng_new(1);
    OK(linear_init(&l, "W_q", 50, 70, 1));
    tensor_fill(l.bias, 3.0);
    linear_reset_xavier_uniform(&l, r);
    double a = sqrt(6.0 / (50 + 70));
    assert_spread(l.weight, a);
    for (size_t k = 0; k < 70; k++)
        cr_assert_eq(l.bias->data[k], 0.0, "Xavier sets the bias to zero");
    /* the same seed, the same weights */
    linear m;
    gsl_rng *r2 = mha_rng_new(1);
    OK(linear_init(&m, "W_q", 50, 70, 0));
    linear_reset_xavier_uniform(&m, r2);
    cr_assert_eq(memcmp(l.weight->data, m.weight->data, 50 * 70 * sizeof(double)), 0);
    gsl_rng_free(r2);
    gsl_rng_free(r);
    linear_free(&m);
    linear_free(&l);
}

Test(linear, pytorch_default_bounds)
{
    linear l;
    gsl_rng *r = mha_rng_new(2);
    OK(linear_init(&l, "W_o", 40, 300, 1));
    linear_reset_pytorch(&l, r);
    double a = 1.0 / sqrt(40.0);
    assert_spread(l.weight, a);
    assert_spread(l.bias, a);
    gsl_rng_free(r);
    linear_free(&l);
}

/* --- errors ------------------------------------------------------------ */

/* linear_forward, or with naive set linear_forward_naive: what it
 * refuses must leave *y NULL. */
static void forward_fails(const linear *l, const tensor *x, int naive,
                          const char *message)
{
    tensor *y = (tensor *)&y;
    FAILS((naive ? linear_forward_naive : linear_forward)(l, x, &y),
          GSL_EBADLEN, message);
    cr_assert_null(y);
}

/* Inputs of a shape the layer W_q (4 in, 3 out) does not take. */
Test(linear, input_width_mismatch)
{
    static const struct {
        size_t ndim, shape[2];
        int naive;
        const char *message;
    } cases[] = {
        {2, {2, 5}, 0,
         "linear_forward W_q: input shape (2, 5) ends in 5 features, the "
         "layer takes 4 (weight (3, 4))"},
        {2, {2, 5}, 1,
         "linear_forward_naive W_q: input shape (2, 5) ends in 5 features, "
         "the layer takes 4 (weight (3, 4))"},
        {1, {3}, 0,
         "linear_forward W_q: input shape (3,) ends in 3 features, the "
         "layer takes 4 (weight (3, 4))"},
    };
    linear l;
    OK(linear_init(&l, "W_q", 4, 3, 1));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *x;
        OK(tensor_alloc(cases[c].ndim, cases[c].shape, &x));
        forward_fails(&l, x, cases[c].naive, cases[c].message);
        tensor_free(x);
    }
    linear_free(&l);
}

/* W_v (4 in, 3 out) with its weight or its bias swapped for one of the
 * wrong shape, then put back: the forward works again. */
Test(linear, parameters_of_the_wrong_shape)
{
    static const struct {
        int bias; /* 0: the weight */
        size_t ndim, shape[2];
        int naive;
        const char *message;
    } cases[] = {
        {0, 2, {4, 3}, 0, /* transposed by mistake */
         "linear_forward W_v: weight has shape (4, 3), expected (3, 4)"},
        {0, 1, {12}, 1,
         "linear_forward_naive W_v: weight has shape (12,), expected (3, 4)"},
        {1, 1, {4}, 0, "linear_forward W_v: bias has shape (4,), expected (3,)"},
        {1, 2, {3, 1}, 0,
         "linear_forward W_v: bias has shape (3, 1), expected (3,)"},
    };
    linear l;
    OK(linear_init(&l, "W_v", 4, 3, 1));
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 4), &x));
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor **p = cases[c].bias ? &l.bias : &l.weight, *right = *p;
        OK(tensor_alloc(cases[c].ndim, cases[c].shape, p));
        forward_fails(&l, x, cases[c].naive, cases[c].message);
        tensor_free(*p);
        *p = right;
    }
    OK(linear_forward(&l, x, &y));
    FREE_ALL(y, x);
    linear_free(&l);
}

/* A freed layer, or one whose init failed, is refused, not followed. */
Test(linear, forward_without_weight)
{
    linear l;
    tensor *x = NULL, *y = (tensor *)&y;
    OK(tensor_alloc(SHAPE(2, 4), &x));
    OK(linear_init(&l, "W_k", 4, 3, 1));
    linear_free(&l);
    FAILS(linear_forward(&l, x, &y), GSL_EINVAL,
          "linear_forward W_k: the layer has no weight (linear_init failed "
          "or linear_free was called)");
    cr_assert_null(y);
    cr_assert_neq(linear_init(&l, "W_v", 0, 3, 1), GSL_SUCCESS);
    FAILS(linear_forward_naive(&l, x, &y), GSL_EINVAL,
          "linear_forward_naive W_v: the layer has no weight (linear_init "
          "failed or linear_free was called)");
    tensor_free(x);
}

Test(linear, init_rejects_zero_sizes)
{
    linear l;
    FAILS(linear_init(&l, "W_q", 0, 4, 1), GSL_EINVAL,
          "linear_init W_q: in_features 0 and out_features 4 must both be >= 1");
    cr_assert_null(l.weight);
    cr_assert_null(l.bias);
    linear_free(&l);
    FAILS(linear_init(&l, "W_q", 4, 0, 0), GSL_EINVAL,
          "linear_init W_q: in_features 4 and out_features 0 must both be >= 1");
    FAILS(linear_init(&l, NULL, 0, 0, 0), GSL_EINVAL,
          "linear_init linear: in_features 0 and out_features 0 must both be >= 1");
    /* a long name is cut to fit */
    FAILS(linear_init(&l, "a_name_longer_than_fifteen", 0, 1, 0), GSL_EINVAL,
          "linear_init a_name_longer_t: in_features 0 and out_features 1 must "
          "both be >= 1");
}

/* --- allocation failures ---------------------------------------------- */

Test(linear, init_out_of_memory)
{
    linear l;
    size_t allocs = 0;
    /* weight: buffer record, numbers, header; then the same for the bias */
    OK_AFTER_ENOMEM(linear_init(&l, "W_q", 4, 3, 1), l.weight,
                    "linear_init W_q: tensor_alloc: out of memory allocating ",
                    allocs);
    cr_assert_eq(allocs, 6);
    linear_free(&l);
    mha_debug_fail_alloc_after(4);
    FAILS(linear_init(&l, "W_q", 4, 3, 1), GSL_ENOMEM,
          "linear_init W_q: tensor_alloc: out of memory allocating 3 x 8 bytes");
    mha_debug_fail_alloc_after(-1);
    cr_assert_null(l.weight);
    cr_assert_null(l.bias);
}

Test(linear, forward_out_of_memory)
{
    linear l;
    OK(linear_init(&l, "W_q", 4, 3, 1));
    tensor *x0 = NULL, *x = NULL, *y = NULL;
    size_t allocs = 0;
    OK(tensor_alloc(SHAPE(3, 2, 4), &x0));
    /* contiguous input: the output's three allocations */
    OK_AFTER_ENOMEM(linear_forward(&l, x0, &y), y,
                    "linear_forward W_q: tensor_alloc: out of memory", allocs);
    cr_assert_eq(allocs, 3);
    tensor_free(y);
    OK_AFTER_ENOMEM(linear_forward_naive(&l, x0, &y), y,
                    "linear_forward_naive W_q: tensor_alloc: out of memory",
                    allocs);
    cr_assert_eq(allocs, 3);
    tensor_free(y);
    /* a permuted input: three for the packed copy, then three */
    OK(tensor_permute(x0, SHAPE(1, 0, 2), &x));
    OK_AFTER_ENOMEM(linear_forward(&l, x, &y), y, "linear_forward W_q: ", allocs);
    cr_assert_eq(allocs, 6);
    tensor_free(y);
    mha_debug_fail_alloc_after(1);
    FAILS(linear_forward(&l, x, &y), GSL_ENOMEM,
          "linear_forward W_q: tensor_contiguous: out of memory allocating "
          "24 x 8 bytes");
    mha_debug_fail_alloc_after(4);
    FAILS(linear_forward(&l, x, &y), GSL_ENOMEM,
          "linear_forward W_q: tensor_alloc: out of memory allocating "
          "18 x 8 bytes");
    mha_debug_fail_alloc_after(-1);
    FREE_ALL(x, x0);
    linear_free(&l);
}

/* A layer whose weight is a view into a bigger one (rows 3..5 of a (8, 4)
 * weight, or columns 1..3 of a (5, 6) weight) reads it through its strides:
 * the BLAS path equals the loops, and no contiguous() copy of x is made. */
Test(linear, weights_that_are_views)
{
    gsl_rng *r = mha_rng_new(5);
    tensor *big_rows = normal_tensor(SHAPE(8, 4), r, 1);
    tensor *big_cols = normal_tensor(SHAPE(5, 6), r, 1);
    tensor *x = normal_tensor(SHAPE(2, 3, 4), r, 1);
    tensor *x3 = normal_tensor(SHAPE(2, 3, 3), r, 1);
    const struct {
        const char *name;
        size_t in, out;
        tensor *big;    /* the weight: narrow(big, dim, start, len) */
        size_t dim, start;
        tensor *x;
    } views[] = {
        {"rows", 4, 3, big_rows, 0, 3, x},  // (3, 4), rows 3..5
        {"cols", 3, 5, big_cols, 1, 1, x3}, // (5, 3), columns 1..3
    };
    for (size_t v = 0; v < 2; v++) {
        const size_t dim = views[v].dim, start = views[v].start;
        linear l;
        tensor *y, *y_naive;
        OK(linear_init(&l, views[v].name, views[v].in, views[v].out, 0));
        tensor_free(l.weight);
        OK(tensor_narrow(views[v].big, dim, start,
                         dim == 0 ? views[v].out : views[v].in, &l.weight));
        OK(linear_forward(&l, views[v].x, &y));
        OK(linear_forward_naive(&l, views[v].x, &y_naive));
        cr_assert(rel_error(y, y_naive) <= 1e-13, "%s", views[v].name);
        /* by hand, one element: y[1, 2, 0] = sum_i x[1, 2, i] W[0, i],
         * W[0, i] being big[start, i] (rows) or big[0, start + i] (cols) */
        double want = 0;
        for (size_t i = 0; i < views[v].in; i++)
            want += *TENSOR_AT(views[v].x, 1, 2, i) *
                    *TENSOR_AT(views[v].big, dim == 0 ? start : 0,
                               dim == 0 ? i : start + i);
        cr_assert_float_eq(*TENSOR_AT(y, 1, 2, 0), want, 1e-13, "%s",
                           views[v].name);
        FREE_ALL(y, y_naive);
        linear_free(&l);
    }
    FREE_ALL(big_rows, big_cols, x, x3);
    gsl_rng_free(r);
}
//<
