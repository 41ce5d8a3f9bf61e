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
    tensor *copy_weights; // (B, h, Lq, Lk), the copy path's
    OK(multihead_forward(m, q, k, v, lens, &copy, &copy_weights));
    double err = rel_error(copy, want);
    cr_assert(err <= 1e-12, "copy path vs loops: %g", err);
    OK(multihead_forward_naive(m, q, k, v, lens, &naive));
    err = rel_error(naive, want);
    cr_assert(err <= 1e-12, "multihead_forward_naive vs loops: %g", err);
    const struct {
        multihead_fast_options opt;
        int weights; // ask for the weights
    } runs[] = {
        {{.threading = MULTIHEAD_THREADS_HEADS}, 0},
        {{.threading = MULTIHEAD_THREADS_BLAS}, 0},
        {{.threading = MULTIHEAD_THREADS_HEADS, .block_rows = 1}, 1},
        {{.threading = MULTIHEAD_THREADS_HEADS, .block_rows = 3}, 0},
        {{.threading = MULTIHEAD_THREADS_BLAS, .block_rows = 5}, 1},
        // a chunk of examples at a time (with the weights, the whole
        // batch all the same)
        {{.threading = MULTIHEAD_THREADS_HEADS, .chunk = 1}, 0},
        {{.threading = MULTIHEAD_THREADS_BLAS, .block_rows = 2, .chunk = 2},
         0},
        {{.threading = MULTIHEAD_THREADS_HEADS, .chunk = 1}, 1},
    };
    for (size_t o = 0; o < sizeof runs / sizeof runs[0]; o++) {
        const multihead_fast_options *opt = &runs[o].opt;
        tensor *w = NULL;
        OK(multihead_forward_fast(m, q, k, v, lens, opt, &fast,
                                  runs[o].weights ? &w : NULL));
        cr_assert(tensor_same_shape(fast, want));
        err = rel_error(fast, copy);
        cr_assert(err <= 1e-12,
                  "fast (threading %d, rows %zu, chunk %zu) vs copy path: %g",
                  opt->threading, opt->block_rows, opt->chunk, err);
        err = rel_error(fast, want);
        cr_assert(err <= 1e-12, "fast vs loops: %g", err);
        if (runs[o].weights) {
            cr_assert_not_null(w);
            cr_assert(tensor_same_shape(w, copy_weights));
            cr_assert_str_eq(w->names[1], "h");
            err = rel_error(w, copy_weights);
            cr_assert(err <= 1e-12, "weights vs the copy path's: %g", err);
        }
        tensor_free(fast);
        tensor_free(w);
    }
    OK(multihead_forward_fast(m, q, k, v, lens, NULL, &fast, NULL));
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
        OK(multihead_forward_fast(&m, x, x, x, NULL, NULL, &out[i], NULL));
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
    OK(multihead_forward_fast(&m, q, kv, kv, lens, NULL, &out, NULL));
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
    FAILS(multihead_forward_fast(&m, k, k, v, NULL, NULL, &out, NULL), GSL_EBADLEN,
          "multihead: feature sizes queries (2, 5, 6), keys (2, 5, 6), values "
          "(2, 5, 8) do not match the layers' query_size 4, key_size 6, "
          "value_size 8");
    cr_assert_null(out);
    gsl_rng *r = mha_rng_new(1);
    multihead_train(&m, 1, r);
    FAILS(multihead_forward_fast(&m, q, k, v, NULL, NULL, &out, NULL), GSL_EINVAL,
          "multihead_forward_fast: training with dropout 0.5 is not "
          "supported here (multihead_forward has it)");
    FAILS(multihead_forward_naive(&m, q, k, v, NULL, &out), GSL_EINVAL,
          "multihead_forward_naive: training with dropout 0.5 is not "
          "supported here (multihead_forward has it)");
    cr_assert_null(out);
    multihead_train(&m, 0, NULL);
    OK(multihead_forward_fast(&m, q, k, v, NULL, NULL, &out, NULL));
    tensor_free(out);
    gsl_rng_free(r);
    multihead_free(&m);
    FREE_ALL(q, k, v);
}

/* Buffers of a MiB or more (here Q, K, V and concat, (2, 300, 256)) are
 * kept from one call for the next of the same shapes: each call's
 * numbers are its own inputs' (against the plain loops), an earlier
 * output is not written over, and a call after multihead_fast_release,
 * or with other shapes, is right too.  Masks per query row (lengths 0 to
 * Lk) and blocks of 7 query rows, which do not divide Lq. */
Test(mha_fast, big_buffers_kept_between_calls)
{
    gsl_rng *r = mha_rng_new(29);
    multihead m;
    multihead_config cfg = {.query_size = 256, .key_size = 256,
                            .value_size = 256, .num_hiddens = 256,
                            .num_heads = 4, .bias = 1};
    OK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    const multihead_fast_options opts[] = {
        {.threading = MULTIHEAD_THREADS_HEADS},
        {.threading = MULTIHEAD_THREADS_HEADS, .block_rows = 7},
        {.threading = MULTIHEAD_THREADS_HEADS, .chunk = 1}};
    tensor *first = NULL, *first_copy = NULL;
    // rounds: new inputs; new inputs, same shapes; after release; Lq 301
    for (int round = 0; round < 4; round++) {
        if (round == 2)
            multihead_fast_release();
        size_t Lq = round == 3 ? 301 : 300, Lk = 300;
        tensor *q = normal_tensor(SHAPE(2, Lq, 256), r, 1.0);
        tensor *k = normal_tensor(SHAPE(2, Lk, 256), r, 1.0);
        tensor *v = normal_tensor(SHAPE(2, Lk, 256), r, 1.0);
        tensor *lens;
        OK(tensor_alloc(SHAPE(2, Lq), &lens));
        for (size_t i = 0; i < 2 * Lq; i++)
            lens->data[i] = (double)((i * 37 + round) % (Lk + 1));
        tensor *want, *fast;
        OK(multihead_forward_naive(&m, q, k, v, lens, &want));
        for (size_t o = 0; o < sizeof opts / sizeof opts[0]; o++) {
            tensor *w = NULL; // the weights too, in the second cut
            OK(multihead_forward_fast(&m, q, k, v, lens, &opts[o], &fast,
                                      o == 1 ? &w : NULL));
            cr_assert_eq(w != NULL, o == 1);
            tensor_free(w);
            double err = rel_error(fast, want);
            cr_assert(err <= 1e-12, "round %d, rows %zu: fast vs loops: %g",
                      round, opts[o].block_rows, err);
            if (round == 0 && o == 0) {
                first = fast;
                OK(tensor_contiguous(fast, &first_copy));
                // a copy of its own, not first's buffer
                cr_assert_not(tensor_shares_buffer(first, first_copy));
            } else {
                tensor_free(fast);
            }
        }
        tensor_free(want);
        tensor_free(q);
        tensor_free(k);
        tensor_free(v);
        tensor_free(lens);
    }
    cr_assert(memcmp(first->data, first_copy->data,
                     tensor_numel(first) * sizeof(double)) == 0,
              "a later call wrote over an earlier output");
    tensor_free(first);
    tensor_free(first_copy);
    multihead_fast_release();
    multihead_free(&m);
    gsl_rng_free(r);
}

/* Each allocation of either path may fail: GSL_ENOMEM, NULL out, no
 * leak (valgrind and ASan watch). */
Test(mha_fast, allocation_failures)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1);
    tensor *q, *lens, *out, *w = NULL;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 3}, &lens));
    int with_weights = 0;
    for (int naive = 0; naive < 2; naive++) {
        int failures = 0;
        EACH_ALLOCATION_FAILS(failures,
            naive ? multihead_forward_naive(&m, q, q, q, lens, &out)
                  : multihead_forward_fast(&m, q, q, q, lens, NULL, &out, &w),
            cr_assert_null(out);
            cr_assert_null(w));
        cr_assert_gt(failures, naive ? 4 : 10);
        if (!naive)
            with_weights = failures;
        tensor_free(out);
        tensor_free(w);
        w = NULL;
    }
    // weights not wanted: the (B, h, Lq, Lk) tensor is never allocated,
    // so the allocations of one tensor_alloc fewer can fail
    int one_tensor = 0, without = 0;
    EACH_ALLOCATION_FAILS(one_tensor, tensor_alloc(SHAPE(2, 2, 3, 3), &w),
                          cr_assert_null(w));
    tensor_free(w);
    EACH_ALLOCATION_FAILS(without,
        multihead_forward_fast(&m, q, q, q, lens, NULL, &out, NULL),
        cr_assert_null(out));
    cr_assert_eq(without, with_weights - one_tensor, "%d, %d, %d", without,
                 with_weights, one_tensor);
    tensor_free(out);
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
    FAILS(multihead_forward_fast(&m, tq, tk, tv, NULL, NULL, &out, NULL),
          GSL_ERANGE, fast);
    cr_assert_null(out);
    tensor *w = tq;
    FAILS(multihead_forward_fast(&m, tq, tk, tv, NULL, NULL, &out, &w),
          GSL_ERANGE, fast);
    cr_assert_null(out);
    cr_assert_null(w);
    w = tq;
    FAILS(multihead_forward(&m, tq, tk, tv, NULL, &out, &w), GSL_ERANGE, copy);
    cr_assert_null(out);
    cr_assert_null(w);
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

/* The same refusals at B*L = 600 rows, where each thread checks the
 * blocks of rows it wrote (projections, heads, output) and the first bad
 * element is then found in the whole tensor: the message names it, not
 * the first of its block.  overflow_module (1 head, d = 2, W_q, W_k, W_v
 * all ones, W_o all fours), inputs 0 except as said, so every score is
 * 0; per-row lengths choose the keys each query sees. */
static void overflow_rows_case(size_t q_row, double q, double v0, double v1,
                               size_t split, double len_a, double len_b,
                               const char *message)
{
    multihead m;
    overflow_module(&m);
    tensor *tq, *tv, *lens, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 600, 2), &tq));
    OK(tensor_alloc(SHAPE(1, 600, 2), &tv));
    OK(tensor_alloc(SHAPE(1, 600), &lens));
    tq->data[2 * q_row] = tq->data[2 * q_row + 1] = q;
    for (size_t j = 0; j < 600; j++) {
        tv->data[2 * j] = tv->data[2 * j + 1] = j == 0 ? v0 : v1;
        lens->data[j] = j < split ? len_a : len_b; // keys row j sees
    }
    FAILS(multihead_forward_fast(&m, tq, tq, tv, lens, NULL, &out, NULL),
          GSL_ERANGE, message);
    cr_assert_null(out);
    tensor_free(tq);
    tensor_free(tv);
    tensor_free(lens);
    multihead_free(&m);
}

Test(mha_fast, overflow_found_in_blocks_of_rows)
{
    // the projection: query row 450 (the second block of rows) 1e308,
    // Q's row 2e308 (and K's, which is never reached)
    overflow_rows_case(450, 1e308, 0, 0, 0, 600, 600,
                       "multihead_forward_fast: the projection overflowed: "
                       "Q[0, 450, 0] = inf from finite inputs "
                       "(Q (1, 600, 2))");
    // the weighted sum: rows 0-399 see value 0 alone (0.4e308 after W_v),
    // rows 400- all 600 values, 599 of them 0.4e308 too, summed (times
    // exp(0) = 1) before the division
    overflow_rows_case(0, 0, 0.2e308, 0.2e308, 400, 1, 600,
                       "multihead_forward_fast: the weighted sum of the "
                       "values overflowed: heads[0, 400, 0] = inf from "
                       "finite inputs (heads (1, 600, 2))");
    // the output: rows 0-99 see values 0 and 1 (0.4e308 and 0 after
    // W_v), their mean 0.2e308, out 4 * 2 * 0.2e308 = 1.6e308; rows 100-
    // see value 0 alone, out 3.2e308
    overflow_rows_case(0, 0, 0.2e308, 0, 100, 2, 1,
                       "multihead_forward_fast: the output overflowed: "
                       "out[0, 100, 0] = inf from finite inputs "
                       "(out (1, 600, 2))");
}

/* --- a chunk of examples at a time ------------------------------------ */

/* B = 80, L = 128, D = 64: Q alone would take 5 MiB, so the batch goes
 * in chunks by itself (of 27, 27 and 26 examples); the same numbers, to
 * rounding, as the whole batch at once and as chunks of 1, 7 (the last
 * of 3) and 79, causal with (B, Lq) valid lengths and grouped keys and
 * values. */
Test(mha_fast, chunks_match_the_whole_batch)
{
    if (getenv("MHA_MEMCHECK")) // small chunks are checked there above
        cr_skip_test("five passes of 0.7 GFLOP are slow under valgrind");
    gsl_rng *r = mha_rng_new(8);
    multihead m;
    SELF_MODULE(&m, 64, .num_hiddens = 64, .num_heads = 4, .kv_heads = 2,
                .causal = 1, .bias = 1);
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    size_t B = 80, L = 128;
    tensor *x = normal_tensor(SHAPE(B, L, 64), r, 1.0), *lens, *whole;
    OK(tensor_alloc(SHAPE(B, L), &lens));
    for (size_t i = 0; i < B * L; i++)
        lens->data[i] = (double)(1 + (i * 13) % L);
    const multihead_fast_options all = {.chunk = B};
    OK(multihead_forward_fast(&m, x, x, x, lens, &all, &whole, NULL));
    const size_t chunks[] = {0, 1, 7, 79};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        const multihead_fast_options opt = {.chunk = chunks[c]};
        tensor *out;
        OK(multihead_forward_fast(&m, x, x, x, lens, &opt, &out, NULL));
        cr_assert(tensor_same_shape(out, whole));
        double err = rel_error(out, whole);
        cr_assert(err <= 1e-14, "chunks of %zu: %g", chunks[c], err);
        tensor_free(out);
    }
    multihead_fast_release();
    FREE_ALL(x, lens, whole);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* An overflow found in a chunk is named as the whole batch's pass names
 * it: the example's index in the batch, the batch's shapes, and the first
 * stage to overflow anywhere (example 0's scores overflow, but example
 * 2's projection comes first in the whole batch's order). */
Test(mha_fast, overflow_in_a_chunk_named_as_the_whole_batch)
{
    multihead m;
    overflow_module(&m);
    tensor *q, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(4, 2, 2), &q));
    const multihead_fast_options one = {.chunk = 1}, two = {.chunk = 2};
    q->data[3 * 4 + 2] = q->data[3 * 4 + 3] = 1e308; // example 3, query 1
    FAILS(multihead_forward_fast(&m, q, q, q, NULL, &one, &out, NULL),
          GSL_ERANGE,
          "multihead_forward_fast: the projection overflowed: "
          "Q[3, 1, 0] = inf from finite inputs (Q (4, 2, 2))");
    cr_assert_null(out);
    tensor_fill(q, 1e200); // examples 0 and 1: the scores overflow
    for (size_t i = 8; i < 16; i++)
        q->data[i] = i == 10 || i == 11 ? 1e308 : 0; // example 2: Q
    FAILS(multihead_forward_fast(&m, q, q, q, NULL, &two, &out, NULL),
          GSL_ERANGE,
          "multihead_forward_fast: the projection overflowed: "
          "Q[2, 1, 0] = inf from finite inputs (Q (4, 2, 2))");
    cr_assert_null(out);
    tensor_free(q);
    multihead_free(&m);
}

/* A sink that counts its parts. */
static int count_part(void *ctx, const tensor *part)
{
    (void)part;
    ++*(size_t *)ctx;
    return GSL_SUCCESS;
}

/* Each allocation of a pass in chunks may fail: GSL_ENOMEM, NULL out, no
 * leak; the chunks' own (out, the buffers, the views of a chunk) are
 * among them. */
Test(mha_fast, allocation_failures_in_chunks)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .bias = 1,
                .causal = 1);
    tensor *q, *lens, *out;
    OK(tensor_alloc(SHAPE(3, 3, 4), &q));
    OK(tensor_from_array(SHAPE(3), (double[]){1, 3, 2}, &lens));
    const multihead_fast_options whole = {.chunk = 3}, two = {.chunk = 2};
    int in_chunks = 0, at_once = 0;
    EACH_ALLOCATION_FAILS(in_chunks,
        multihead_forward_fast(&m, q, q, q, lens, &two, &out, NULL),
        cr_assert_null(out));
    tensor_free(out);
    EACH_ALLOCATION_FAILS(at_once,
        multihead_forward_fast(&m, q, q, q, lens, &whole, &out, NULL),
        cr_assert_null(out));
    tensor_free(out);
    // two passes, each with its views, against one
    cr_assert_gt(in_chunks, at_once, "%d, %d", in_chunks, at_once);
    // with a sink: out is never made
    int sunk = 0;
    size_t calls = 0;
    const multihead_fast_options to_sink = {.chunk = 2, .sink = count_part,
                                            .sink_ctx = &calls};
    EACH_ALLOCATION_FAILS(sunk,
        multihead_forward_fast(&m, q, q, q, lens, &to_sink, &out, NULL),
        cr_assert_null(out));
    cr_assert_null(out);
    cr_assert_gt(sunk, 0);
    cr_assert_lt(sunk, in_chunks, "%d, %d", sunk, in_chunks);
    multihead_free(&m);
    FREE_ALL(q, lens);
}

/* --- the output handed to a sink -------------------------------------- */

/* What a sink was given: the parts, copied, and how many calls. */
typedef struct parts {
    tensor *got[8];
    size_t calls, stop_at; /* stop_at > 0: that call returns GSL_EBADFUNC */
} parts;

static int keep_part(void *ctx, const tensor *part)
{
    parts *p = ctx;
    cr_assert_lt(p->calls, 8);
    cr_assert(tensor_is_contiguous(part));
    OK(tensor_contiguous(part, &p->got[p->calls]));
    return ++p->calls == p->stop_at ? GSL_EBADFUNC : GSL_SUCCESS;
}

/* The parts a sink is given, in order, are out, bit for bit, as the same
 * call without a sink returns it: in chunks of 2 (three parts of B = 5)
 * and the whole batch at once (one part), self-attention (out written
 * over K's buffer) and cross-attention (a buffer of its own); *out stays
 * NULL. */
Test(mha_fast, a_sink_gets_out_a_chunk_at_a_time)
{
    gsl_rng *r = mha_rng_new(12);
    multihead m;
    SELF_MODULE(&m, 8, .num_hiddens = 8, .num_heads = 2, .bias = 1);
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    tensor *x = normal_tensor(SHAPE(5, 6, 8), r, 1.0);
    tensor *kv = normal_tensor(SHAPE(5, 9, 8), r, 1.0);
    for (int cross = 0; cross < 2; cross++) {
        for (size_t chunk = 0; chunk <= 2; chunk += 2) {
            parts p = {.calls = 0};
            multihead_fast_options opt = {.chunk = chunk};
            tensor *want, *out = (tensor *)1;
            const tensor *k = cross ? kv : x;
            OK(multihead_forward_fast(&m, x, k, k, NULL, &opt, &want, NULL));
            opt.sink = keep_part;
            opt.sink_ctx = &p;
            OK(multihead_forward_fast(&m, x, k, k, NULL, &opt, &out, NULL));
            cr_assert_null(out);
            cr_assert_eq(p.calls, chunk ? 3u : 1u, "chunk %zu: %zu parts",
                         chunk, p.calls);
            size_t at = 0;
            for (size_t i = 0; i < p.calls; i++) {
                size_t n = tensor_numel(p.got[i]);
                cr_assert_eq(p.got[i]->shape[0], chunk && i < 2 ? 2u
                                                 : chunk     ? 1u
                                                             : 5u);
                cr_assert(memcmp(p.got[i]->data, want->data + at,
                                 n * sizeof(double)) == 0,
                          "cross %d, chunk %zu: part %zu differs", cross,
                          chunk, i);
                at += n;
                tensor_free(p.got[i]);
            }
            cr_assert_eq(at, tensor_numel(want));
            tensor_free(want);
        }
    }
    multihead_fast_release();
    FREE_ALL(x, kv);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* Whether a call of multihead_forward_fast right after a call just like
 * it, with the spares that call kept, succeeds when its allocations fail
 * from the (k+1)-th on (from a fresh start: failed calls take and free
 * spares too); a failure must be GSL_ENOMEM. */
static int warm_call_fits(multihead *m, const tensor *q, const tensor *kv,
                          const multihead_fast_options *opt, long k)
{
    tensor *out = NULL;
    multihead_fast_release();
    OK(multihead_forward_fast(m, q, kv, kv, NULL, opt, &out, NULL));
    tensor_free(out);
    out = NULL;
    mha_debug_fail_alloc_after(k);
    int status = multihead_forward_fast(m, q, kv, kv, NULL, opt, &out, NULL);
    mha_debug_fail_alloc_after(-1);
    tensor_free(out);
    multihead_fast_release();
    if (status != GSL_SUCCESS)
        cr_assert_eq(status, GSL_ENOMEM, "%s", mha_last_error());
    return status == GSL_SUCCESS;
}

/* The allocations such a warm call makes: the least k it fits in.  A
 * call that fits in k fits in k + 1, so the least is found by doubling,
 * then halving, in a dozen calls rather than one per allocation. */
static int allocations_when_warm(multihead *m, const tensor *q,
                                 const tensor *kv,
                                 const multihead_fast_options *opt)
{
    if (warm_call_fits(m, q, kv, opt, 0))
        return 0;
    long lo = 0, hi = 1; // lo does not fit; hi is tried next
    while (!warm_call_fits(m, q, kv, opt, hi)) {
        lo = hi;
        hi *= 2;
        cr_assert_lt(hi, 1 << 20, "no count of allocations lets the call through");
    }
    while (hi - lo > 1) {
        long mid = lo + (hi - lo) / 2;
        if (warm_call_fits(m, q, kv, opt, mid))
            hi = mid;
        else
            lo = mid;
    }
    return (int)hi;
}

/* Cross-attention with a sink keeps K's buffer for the next call as the
 * call without a sink does (the output, of another shape, is not kept
 * in K's place): out (1, 600, 256) and K (1, 700, 256), 1.2 and 1.4 MiB,
 * are big enough to be kept; no chunks. */
Test(mha_fast, a_sink_leaves_the_kept_buffers_as_they_were)
{
    gsl_rng *r = mha_rng_new(13);
    multihead m;
    SELF_MODULE(&m, 256, .num_hiddens = 256, .num_heads = 4);
    multihead_reset_xavier(&m, r);
    tensor *q = normal_tensor(SHAPE(1, 600, 256), r, 1.0);
    tensor *kv = normal_tensor(SHAPE(1, 700, 256), r, 1.0);
    size_t calls = 0;
    const multihead_fast_options plain = {.chunk = 0},
                                 to_sink = {.sink = count_part,
                                            .sink_ctx = &calls};
    if (getenv("MHA_MEMCHECK")) {
        // under valgrind a call takes most of a minute: each warm call
        // once, for what it does to memory; the plain and sanitizer
        // passes count the allocations
        cr_assert(warm_call_fits(&m, q, kv, &plain, -1));
        cr_assert(warm_call_fits(&m, q, kv, &to_sink, -1));
        cr_assert_gt(calls, 0u);
        FREE_ALL(q, kv);
        multihead_free(&m);
        gsl_rng_free(r);
        return;
    }
    int without = allocations_when_warm(&m, q, kv, &plain);
    int with = allocations_when_warm(&m, q, kv, &to_sink);
    cr_assert_gt(calls, 0u);
    cr_assert_eq(with, without, "with a sink %d allocations, without %d",
                 with, without);
    FREE_ALL(q, kv);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* A sink's refusal ends the pass with its status, after that part: no
 * more parts, *out NULL; at once or in chunks. */
Test(mha_fast, a_sink_that_refuses_stops_the_pass)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2);
    tensor *x = zeros(SHAPE(3, 2, 4)), *out = (tensor *)1;
    for (size_t chunk = 0; chunk <= 1; chunk++) {
        parts p = {.stop_at = 1};
        const multihead_fast_options opt = {.chunk = chunk, .sink = keep_part,
                                            .sink_ctx = &p};
        cr_assert_eq(multihead_forward_fast(&m, x, x, x, NULL, &opt, &out,
                                            NULL),
                     GSL_EBADFUNC);
        cr_assert_null(out);
        cr_assert_eq(p.calls, 1u);
        tensor_free(p.got[0]);
    }
    tensor_free(x);
    multihead_free(&m);
}

/* An overflow in the last of three chunks, with a sink: the first two
 * parts were handed over, and the refusal names the overflow as the
 * whole batch's pass does. */
Test(mha_fast, an_overflow_after_parts_were_handed_over)
{
    multihead m;
    overflow_module(&m);
    tensor *q = zeros(SHAPE(3, 2, 2)), *out = (tensor *)1;
    q->data[2 * 4 + 2] = q->data[2 * 4 + 3] = 1e308; // example 2, query 1
    parts p = {.calls = 0};
    const multihead_fast_options opt = {.chunk = 1, .sink = keep_part,
                                        .sink_ctx = &p};
    FAILS(multihead_forward_fast(&m, q, q, q, NULL, &opt, &out, NULL),
          GSL_ERANGE,
          "multihead_forward_fast: the projection overflowed: "
          "Q[2, 1, 0] = inf from finite inputs (Q (3, 2, 2))");
    cr_assert_null(out);
    cr_assert_eq(p.calls, 2u);
    tensor_free(p.got[0]);
    tensor_free(p.got[1]);
    tensor_free(q);
    multihead_free(&m);
}
//<
