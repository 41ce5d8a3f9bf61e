//> full
/* test_multihead_fast.c: multihead_forward_fast == multihead_forward
 * (the copy-based path) == naive_multihead (plain loops written in
 * test_multihead.c) == multihead_forward_naive, over shapes with masks,
 * B > 1, h > 1, Lq != Lk, strided inputs; its trace, errors and failed
 * allocations.
 *
 * Shapes: queries (B, Lq, d_q), keys (B, Lk, d_k), values (B, Lk, d_v),
 * out (B, Lq, D_out). */
#include "check.h"

#include <omp.h>

#include <criterion/parameterized.h>
#include <float.h>

/* test_multihead.c */
void naive_multihead(const multihead *m, size_t B, size_t Lq, size_t Lk,
                     const double *q, const double *k, const double *v,
                     const double *valid, int per_query, double *out,
                     double *weights);

/* --- the fast module -------------------------------------------------- */

static module_case fast_cases[] = {
    {2, 4, 6, 100, 100, 100, 100, 5, 0, 0, 1}, // d2l's example
    {2, 4, 6, 6, 6, 6, 6, 3, 0, 0, 1},
    {3, 5, 7, 10, 12, 14, 12, 4, 0, 1, 2},
    {1, 1, 1, 3, 3, 3, 4, 2, 0, 1, 0},
    {3, 2, 9, 5, 7, 11, 16, 8, 9, 1, 1},
    {2, 6, 3, 8, 4, 2, 6, 6, 0, 0, 2},
    {1, 8, 8, 16, 16, 16, 16, 1, 0, 1, 0},
    {4, 3, 5, 7, 7, 7, 20, 5, 3, 0, 2},
    {2, 33, 17, 24, 24, 24, 24, 4, 0, 1, 2}, // several query blocks
    {2, 17, 40, 32, 16, 8, 32, 8, 12, 1, 1},
    {2, 300, 280, 12, 12, 12, 16, 4, 0, 1, 2}, // projections split by rows
};

ParameterizedTestParameters(mha_fast, equals_copy_path_and_loops)
{
    return cr_make_param_array(module_case, fast_cases,
                               sizeof fast_cases / sizeof fast_cases[0]);
}

/* Every forward of m on (q, k, v, lens) against want (B, Lq, D_out). */
static void check_paths(multihead *m, const tensor *q, const tensor *k,
                        const tensor *v, const tensor *lens,
                        const tensor *want)
{
    tensor *copy, *fast, *naive;
    OK(multihead_forward(m, q, k, v, lens, &copy));
    tensor *copy_weights = NULL; // (B, h, Lq, Lk), as the copy path kept them
    OK(tensor_contiguous(m->weights, &copy_weights));
    double err = rel_error(copy, want);
    cr_assert(err <= 1e-12, "copy path vs loops: %g", err);
    OK(multihead_forward_naive(m, q, k, v, lens, &naive));
    err = rel_error(naive, want);
    cr_assert(err <= 1e-12, "multihead_forward_naive vs loops: %g", err);
    cr_assert_null(m->weights);
    const multihead_fast_options opts[] = {
        {MULTIHEAD_THREADS_HEADS, 0, 0}, {MULTIHEAD_THREADS_BLAS, 0, 0},
        {MULTIHEAD_THREADS_HEADS, 1, 1}, {MULTIHEAD_THREADS_HEADS, 3, 0},
        {MULTIHEAD_THREADS_BLAS, 5, 1},
    };
    for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
        OK(multihead_forward_fast(m, q, k, v, lens, &opts[o], &fast));
        cr_assert(tensor_same_shape(fast, want));
        err = rel_error(fast, copy);
        cr_assert(err <= 1e-12, "fast (threading %d, rows %zu) vs copy path: %g",
                  opts[o].threading, opts[o].block_rows, err);
        err = rel_error(fast, want);
        cr_assert(err <= 1e-12, "fast vs loops: %g", err);
        if (opts[o].keep_weights) {
            cr_assert_not_null(m->weights);
            cr_assert(tensor_same_shape(m->weights, copy_weights));
            cr_assert_str_eq(m->weights->names[1], "h");
            err = rel_error(m->weights, copy_weights);
            cr_assert(err <= 1e-12, "kept weights vs copy path's: %g", err);
        } else {
            cr_assert_null(m->weights, "the fast path keeps no weights "
                                       "unless asked");
        }
        tensor_free(fast);
    }
    OK(multihead_forward_fast(m, q, k, v, lens, NULL, &fast));
    cr_assert(rel_error(fast, copy) <= 1e-12);
    FREE_ALL(fast, copy, copy_weights, naive);
}

ParameterizedTest(module_case *c, mha_fast, equals_copy_path_and_loops)
{
    gsl_rng *r = mha_rng_new(11 + c->B * 7 + c->Lq * 3 + c->D);
    multihead m;
    tensor *q, *k, *v, *lens;
    case_module(c, r, 1.5, &m, &q, &k, &v, &lens);
    size_t dout = m.cfg.out_size;
    tensor *want;
    OK(tensor_alloc(SHAPE(c->B, c->Lq, dout), &want));
    naive_multihead(&m, c->B, c->Lq, c->Lk, q->data, k->data, v->data,
                    lens ? lens->data : NULL, c->lens == 2, want->data, NULL);
    check_paths(&m, q, k, v, lens, want);
    multihead_free(&m);
    FREE_ALL(q, k, v, lens, want);
    gsl_rng_free(r);
}

/* The projections of B*L >= 512 rows are split into one block of rows
 * per thread: one thread or several, the same numbers to the bit. */
Test(mha_fast, projections_split_by_rows_give_the_same_bits)
{
    gsl_rng *r = mha_rng_new(5);
    multihead m;
    SELF_MODULE(&m, 24, .num_hiddens = 24, .num_heads = 4, .bias = 1);
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    tensor *x = normal_tensor(SHAPE(3, 257, 24), r, 1.0);
    int threads = omp_get_max_threads();
    tensor *out[2];
    for (int i = 0; i < 2; i++) {
        omp_set_num_threads(i ? 2 : 1);
        OK(multihead_forward_fast(&m, x, x, x, NULL, NULL, &out[i]));
    }
    omp_set_num_threads(threads);
    cr_assert(memcmp(out[0]->data, out[1]->data,
                     tensor_numel(out[0]) * sizeof(double)) == 0,
              "one thread and two differ");
    tensor_free(out[0]);
    tensor_free(out[1]);
    tensor_free(x);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* Self-attention on strided inputs: X is every other row of a bigger
 * tensor, and the keys a permuted view; nothing is copied by hand. */
Test(mha_fast, strided_inputs)
{
    gsl_rng *r = mha_rng_new(5);
    multihead m;
    SELF_MODULE(&m, 8, .num_hiddens = 8, .num_heads = 2, .bias = 1);
    multihead_reset_xavier(&m, r);
    tensor *big = normal_tensor(SHAPE(2, 10, 8), r, 1.0);
    tensor *x, *kt, *k, *xc, *kc, *want;
    OK(tensor_narrow(big, 1, 2, 5, &x)); // (2, 5, 8), rows 2..6
    tensor *t = normal_tensor(SHAPE(2, 8, 7), r, 1.0);
    OK(tensor_permute(t, SHAPE(0, 2, 1), &kt)); // (2, 7, 8), last axis strided
    k = kt;
    OK(tensor_contiguous(x, &xc));
    OK(tensor_contiguous(k, &kc));
    OK(tensor_alloc(SHAPE(2, 5, 8), &want));
    naive_multihead(&m, 2, 5, 7, xc->data, kc->data, kc->data, NULL, 0,
                    want->data, NULL);
    check_paths(&m, x, k, k, NULL, want);
    multihead_free(&m);
    FREE_ALL(big, x, t, kt, xc, kc, want);
    gsl_rng_free(r);
}

/* The fast path's trace: projections, the head views, one line for all
 * heads, W_o; no transpose copies. */
Test(mha_fast, trace)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    tensor *q, *kv, *lens, *out;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_alloc(SHAPE(2, 5, 4), &kv));
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(multihead_forward_fast(&m, q, kv, kv, lens, NULL, &out));
    trace_to(NULL);
    const char *text = capture_end(&c);
    cr_assert_str_eq(text,
        "multihead_fast(h=2)            q (2, 3, 4), k (2, 5, 4), v (2, 5, 4)\n"
        "  W_q: x W^T + b         new   (2, 3, 4) -> (2, 3, 4)              (B, Lq, d_model)\n"
        "  reshape(2, 3, 2, -1)   view  (2, 3, 4) -> (2, 3, 2, 2)           (B, Lq, h, d_model/h)\n"
        "  permute(0, 2, 1, 3)    view  (2, 3, 2, 2) -> (2, 2, 3, 2)        (B, h, Lq, d_model/h)\n"
        "  W_k: x W^T + b         new   (2, 5, 4) -> (2, 5, 4)              (B, Lk, d_model)\n"
        "  reshape(2, 5, 2, -1)   view  (2, 5, 4) -> (2, 5, 2, 2)           (B, Lk, h, d_model/h)\n"
        "  permute(0, 2, 1, 3)    view  (2, 5, 2, 2) -> (2, 2, 5, 2)        (B, h, Lk, d_model/h)\n"
        "  W_v: x W^T + b         new   (2, 5, 4) -> (2, 5, 4)              (B, Lk, d_model)\n"
        "  reshape(2, 5, 2, -1)   view  (2, 5, 4) -> (2, 5, 2, 2)           (B, Lk, h, d_model/h)\n"
        "  permute(0, 2, 1, 3)    view  (2, 5, 2, 2) -> (2, 2, 5, 2)        (B, h, Lk, d_model/h)\n"
        "  reshape(2, 3, 2, -1)   view  (2, 3, 4) -> (2, 3, 2, 2)           (B, Lq, h, d_model/h)\n"
        "  permute(0, 2, 1, 3)    view  (2, 3, 2, 2) -> (2, 2, 3, 2)        (B, h, Lq, d_model/h)\n"
        "  attention per head(scale 1/sqrt(2), valid_lens (2,)) new   (2, 2, 3, 2), (2, 2, 5, 2), (2, 2, 5, 2) -> (2, 2, 3, 2)  (B, h, Lq, d_model/h)\n"
        "  W_o: x W^T + b         new   (2, 3, 4) -> (2, 3, 4)              (B, Lq, d_model)\n");
    capture_free(&c);
    multihead_free(&m);
    FREE_ALL(q, kv, lens, out);
}

Test(mha_fast, errors)
{
    multihead m;
    multihead_config cfg = {.query_size = 4, .key_size = 6, .value_size = 8,
                            .num_hiddens = 6, .num_heads = 3, .dropout = 0.5};
    OK(multihead_init(&m, &cfg));
    tensor *q, *k, *v, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_alloc(SHAPE(2, 5, 6), &k));
    OK(tensor_alloc(SHAPE(2, 5, 8), &v));
    FAILS(multihead_forward_fast(&m, k, k, v, NULL, NULL, &out), GSL_EBADLEN,
          "multihead: feature sizes queries (2, 5, 6), keys (2, 5, 6), values "
          "(2, 5, 8) do not match the layers' query_size 4, key_size 6, "
          "value_size 8");
    cr_assert_null(out);
    gsl_rng *r = mha_rng_new(1);
    multihead_train(&m, 1, r);
    FAILS(multihead_forward_fast(&m, q, k, v, NULL, NULL, &out), GSL_EINVAL,
          "multihead_forward_fast: training with dropout 0.5 is not "
          "supported here (multihead_forward has it)");
    FAILS(multihead_forward_naive(&m, q, k, v, NULL, &out), GSL_EINVAL,
          "multihead_forward_naive: training with dropout 0.5 is not "
          "supported here (multihead_forward has it)");
    cr_assert_null(out);
    multihead_train(&m, 0, NULL);
    OK(multihead_forward_fast(&m, q, k, v, NULL, NULL, &out));
    tensor_free(out);
    gsl_rng_free(r);
    multihead_free(&m);
    FREE_ALL(q, k, v);
}

/* Each allocation of either path may fail: GSL_ENOMEM, NULL out, no
 * leak (valgrind and ASan watch). */
Test(mha_fast, allocation_failures)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    tensor *q, *lens, *out;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 3}, &lens));
    for (int naive = 0; naive < 2; naive++) {
        int failures = 0;
        EACH_ALLOCATION_FAILS(failures,
            naive ? multihead_forward_naive(&m, q, q, q, lens, &out)
                  : multihead_forward_fast(&m, q, q, q, lens, NULL, &out),
            cr_assert_null(out));
        cr_assert_gt(failures, naive ? 4 : 10);
        tensor_free(out);
    }
    multihead_free(&m);
    FREE_ALL(q, lens);
}

/* Finite inputs whose arithmetic overflows: refused with GSL_ERANGE and
 * a message naming the stage and the first bad element, by the fast path
 * and by the copy path alike, never an output of NaN (overflow_module's
 * layers: each projection doubles a row of equal entries). */
static void overflow_case(double q, double k, double v, const char *fast,
                          const char *copy)
{
    multihead m;
    overflow_module(&m);
    tensor *tq, *tk, *tv, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 2, 2), &tq));
    OK(tensor_alloc(SHAPE(1, 2, 2), &tk));
    OK(tensor_alloc(SHAPE(1, 2, 2), &tv));
    tensor_fill(tq, q);
    tensor_fill(tk, k);
    tensor_fill(tv, v);
    FAILS(multihead_forward_fast(&m, tq, tk, tv, NULL, NULL, &out),
          GSL_ERANGE, fast);
    cr_assert_null(out);
    multihead_fast_options keep = {.keep_weights = 1};
    FAILS(multihead_forward_fast(&m, tq, tk, tv, NULL, &keep, &out),
          GSL_ERANGE, fast);
    cr_assert_null(out);
    cr_assert_null(m.weights);
    FAILS(multihead_forward(&m, tq, tk, tv, NULL, &out), GSL_ERANGE, copy);
    cr_assert_null(out);
    FREE_ALL(tq, tk, tv);
    multihead_free(&m);
}

Test(mha_fast, overflow_from_finite_inputs_is_refused)
{
    // the projection: 2 * 1e308
    overflow_case(1e308, 1, 1,
                  "multihead_forward_fast: the projection overflowed: "
                  "Q[0, 0, 0] = inf from finite inputs (Q (1, 2, 2))",
                  "multihead_forward: the projection overflowed: "
                  "Q[0, 0, 0] = inf from finite inputs (Q (1, 2, 2))");
    // the scores: Q and K 2e200 each, q.k = 8e400
    overflow_case(1e200, 1e200, 1,
                  "multihead_forward_fast: the scores overflowed: "
                  "scores[0, 0, 0, 0] = inf from finite inputs "
                  "(scores (1, 1, 2, 2), Q K^T per head)",
                  "multihead_forward: the scores' softmax overflowed: "
                  "weights[0, 0, 0] = nan from finite inputs "
                  "(weights (1, 2, 2))");
    // the output: V and the heads 0.4e308, out 4 * 2 * 0.4e308
    overflow_case(1, 1, 0.2e308,
                  "multihead_forward_fast: the output overflowed: "
                  "out[0, 0, 0] = inf from finite inputs (out (1, 2, 2))",
                  "multihead_forward: the output overflowed: "
                  "out[0, 0, 0] = inf from finite inputs (out (1, 2, 2))");
}
//<
