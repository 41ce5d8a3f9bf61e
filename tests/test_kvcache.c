//> 16
/* test_kvcache.c: decoding with a key-value cache equals the causal
 * forward pass over the whole sequence, row by row, for G = h, 1 < G < h
 * and G = 1, B > 1, one position at a time and in chunks, with and without
 * rotary embeddings (each step turns its rows at their positions); the cache's
 * growth in the trace; the errors.
 *
 * Shapes: x (B, T, d) the whole sequence; the cache (B, G, capacity, p);
 * a step's rows x[:, s:s+n] (B, n, d) -> out (B, n, D_out). */
#include "check.h"

#include <complex.h>
#include <math.h>

#include <criterion/parameterized.h>

struct decode_case {
    size_t B, T, d, D, h, G, out;
    int bias;
    size_t chunks[6]; /* positions per step, summing to T (0 ends) */
    int rope;         /* rotary embeddings on Q and K */
};

static struct decode_case decode_cases[] = {
    {2, 6, 8, 8, 4, 4, 0, 1, {1, 1, 1, 1, 1, 1}, 0}, // multi-head attention
    {2, 9, 10, 12, 4, 4, 0, 1, {4, 1, 1, 3}, 0},     // a prefill, then steps
    {1, 5, 4, 8, 8, 8, 3, 0, {5}, 0},                // all at once
    {4, 8, 6, 6, 3, 3, 0, 1, {2, 2, 2, 2}, 0},
    // with rope: each step turns its rows at their own positions
    {1, 6, 6, 12, 3, 3, 0, 0, {1, 1, 1, 1, 1, 1}, 1},
//> 17
    {2, 6, 8, 8, 4, 2, 0, 0, {1, 1, 1, 1, 1, 1}, 0}, // grouped, G = 2
    {3, 7, 6, 12, 6, 1, 5, 1, {1, 1, 1, 1, 1, 2}, 0}, // multi-query
    {2, 9, 10, 12, 4, 2, 0, 1, {4, 1, 1, 3}, 0},
    {1, 5, 4, 8, 8, 4, 3, 0, {5}, 0},
    {2, 7, 8, 8, 4, 2, 0, 1, {3, 1, 1, 2}, 1},
    {1, 6, 6, 12, 3, 1, 0, 0, {1, 1, 1, 1, 1, 1}, 1},
//<
};

ParameterizedTestParameters(kvcache, decoding_equals_the_causal_pass)
{
    return cr_make_param_array(struct decode_case, decode_cases,
                               sizeof decode_cases / sizeof decode_cases[0]);
}

ParameterizedTest(struct decode_case *c, kvcache,
                  decoding_equals_the_causal_pass)
{
    gsl_rng *r = mha_rng_new(40 + c->T * 3 + c->G);
    multihead m;
    multihead_config cfg = {.query_size = c->d, .key_size = c->d,
                            .value_size = c->d, .num_hiddens = c->D,
                            .num_heads = c->h, .out_size = c->out,
                            .bias = c->bias, .causal = 1, .rope = c->rope};
//> 17
    cfg.kv_heads = c->G;
//<
    OK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    if (c->bias)
        random_biases(&m, r);
    tensor *x, *full, *full_w;
    OK(tensor_alloc(SHAPE(c->B, c->T, c->d), &x));
    tensor_fill_normal(x, r, 0, 1);
    OK(multihead_forward(&m, x, x, x, NULL, &full, &full_w)); // (B, T, D_out),
                                                             // (B, h, T, T)

    kv_cache cache;
    size_t p = c->D / c->h;
    OK(kv_cache_init(&cache, c->B, c->G, p, c->T));
    size_t start = 0;
    for (size_t s = 0; s < 6 && c->chunks[s]; s++) {
        size_t n = c->chunks[s];
        tensor *rows, *out, *w, *want, *want_w, *w_cols;
        OK(tensor_narrow(x, 1, start, n, &rows));
        OK(kv_cache_decode_step(&m, &cache, rows, &out, &w));
        cr_assert_eq(cache.length, start + n);
        OK(tensor_narrow(full, 1, start, n, &want));
        double err = rel_error(out, want);
        cr_assert(err <= 1e-12, "step at %zu (n %zu): %g", start, n, err);
        // the weights (B, h, n, t): the full pass's rows, first t columns
        OK(tensor_narrow(full_w, 2, start, n, &want_w));
        OK(tensor_narrow(want_w, 3, 0, start + n, &w_cols));
        err = rel_error(w, w_cols);
        cr_assert(err <= 1e-12, "weights at %zu: %g", start, err);
        FREE_ALL(rows, out, w, want, want_w, w_cols);
        start += n;
    }
    cr_assert_eq(start, c->T);
    // the cache holds the keys of every position: W_k x, split in G heads
    // (with rope, pair k of each head turned by t * theta_k)
    tensor keys;
    OK(kv_cache_view(&cache, &keys, NULL));
    cr_assert_eq(keys.shape[2], c->T);
    cr_assert(keys.borrowed, "a cache's view is borrowed: tensor_free refuses it");
    double want[16];
    cr_assert_leq(c->G * p, 16);
    for (size_t b = 0; b < c->B; b++)
        for (size_t t = 0; t < c->T; t++) {
            for (size_t f = 0; f < c->G * p; f++) {
                want[f] = c->bias ? m.W_k.bias->data[f] : 0;
                for (size_t j = 0; j < c->d; j++)
                    want[f] += m.W_k.weight->data[f * c->d + j] *
                               x->data[(b * c->T + t) * c->d + j];
            }
            for (size_t f = 0; c->rope && f < c->G * p; f += 2) {
                double a = (double)t * rope_theta(f % p / 2, p, 10000.0);
                // the pair as x0 + i x1, turned by e^(i a)
                double complex z = (want[f] + want[f + 1] * I) * cexp(I * a);
                want[f] = creal(z);
                want[f + 1] = cimag(z);
            }
            for (size_t f = 0; f < c->G * p; f++)
                cr_assert_float_eq(*TENSOR_AT(&keys, b, f / p, t, f % p),
                                   want[f], 1e-12);
        }
    kv_cache_free(&cache);
    multihead_free(&m);
    FREE_ALL(x, full, full_w);
    gsl_rng_free(r);
}

//> 17
/* The trace of two steps: the cache grows (B, G, t, p), t = 1 then 2. */
Test(kvcache, the_trace_shows_the_cache_growing)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .kv_heads = 1);
    kv_cache cache;
    OK(kv_cache_init(&cache, 2, 1, 2, 4));
    tensor *x, *out;
    OK(tensor_alloc(SHAPE(2, 1, 4), &x));
    OK(kv_cache_decode_step(&m, &cache, x, &out, NULL));
    tensor_free(out);
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(kv_cache_decode_step(&m, &cache, x, &out, NULL));
    trace_to(NULL);
    const char *text = capture_end(&c);
    // the header, then the append: the new position's keys (B, G, n, p)
    // copied in, and the cache (B, G, t, p) with t = 2 read as B*G heads
    const char *want[] = {
        "decode_step(h=2, G=1, positions 1..1)       x (2, 1, 4)\n",
        "  W_k: x W^T             new   (2, 1, 4) -> (2, 1, 2)              (B, n, G*d_model/h)\n",
        "  reshape(2, 1, 1, 2)    view  (2, 1, 2) -> (2, 1, 1, 2)           (B, G, n, d_model/h)\n"
        "  append keys at 1..1    copy  (2, 1, 1, 2) -> (2, 1, 2, 2)        (B, G, t, d_model/h)\n"
        "  reshape(2, 2, 2)       view  (2, 1, 2, 2) -> (2, 2, 2)           (B*G, t, d_model/h)\n",
        "  append values at 1..1  copy  (2, 1, 1, 2) -> (2, 1, 2, 2)        (B, G, t, d_model/h)\n",
        "  per-row lens(causal)   new   -> (2, 1)                           (B, Lq)\n"
        "  repeat_interleave(2)         (2, 1)                              (B, Lq)\n"
        "    view(2, 1, 1)        view  (2, 1) -> (2, 1, 1)                 (B, 1, Lq)\n"
        "    expand(2, 2, 1)      view  (2, 1, 1) -> (2, 2, 1)              (B, h, Lq)\n"
        "    reshape(4, 1)        copy  (2, 2, 1) -> (4, 1)                 (B*h, Lq)\n"
        "  grouped heads(h=2, G=1)       (4, 1, 2), (2, 2, 2), (2, 2, 2)\n",
        "    expand(-1, 2, -1, -1) view  (2, 1, 2, 2) -> (2, 2, 2, 2)        (B*G, h/G, t, d_model/h)\n",
        "      Q K^T              new   (2, 2, 2) @ (2, 2, 2)^T -> (2, 2, 2)  (B*G, h/G*Lq, t)\n",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        cr_assert_not_null(strstr(text, want[i]), "missing:\n%s\nin:\n%s",
                           want[i], text);
    cr_assert_eq(strncmp(text, want[0], strlen(want[0])), 0);
    capture_free(&c);
    FREE_ALL(out, x);
    kv_cache_free(&cache);
    multihead_free(&m);
}
//<

//> 17
Test(kvcache, errors)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .kv_heads = 1);
    kv_cache cache, wrong;
    FAILS(kv_cache_init(&cache, 2, 0, 2, 4), GSL_EINVAL,
          "kv_cache_init: batch 2, kv_heads 0, head_size 2 and capacity 4 "
          "must all be >= 1");
    OK(kv_cache_init(&cache, 2, 1, 2, 3));
    tensor keys;
    FAILS(kv_cache_view(&cache, &keys, NULL), GSL_EINVAL,
          "kv_cache_view: the cache is empty (length 0 of capacity 3): there "
          "is nothing to view");
    tensor *x, *x3, *out;
    OK(tensor_alloc(SHAPE(2, 2, 4), &x));
    OK(tensor_alloc(SHAPE(3, 1, 4), &x3));
    OK(kv_cache_decode_step(&m, &cache, x, &out, NULL));
    tensor_free(out);
    FAILS(kv_cache_decode_step(&m, &cache, x, &out, NULL), GSL_EBADLEN,
          "kv_cache_decode_step: the cache is full: capacity 3, length 2, "
          "and x (2, 2, 4) brings 2 new positions");
    cr_assert_null(out);
    cr_assert_eq(cache.length, 2, "a failed step leaves the cache as it was");
    FAILS(kv_cache_decode_step(&m, &cache, x3, &out, NULL), GSL_EBADLEN,
          "kv_cache_decode_step: the cache is (B, G, capacity, p) = (2, 1, "
          "3, 2) but x (3, 1, 4) and the module (h 2, G 1, p 2) need (3, 1, "
          "capacity, 2)");
    OK(kv_cache_init(&wrong, 2, 2, 2, 3));
    FAILS(kv_cache_decode_step(&m, &wrong, x, &out, NULL), GSL_EBADLEN,
          "kv_cache_decode_step: the cache is (B, G, capacity, p) = (2, 2, "
          "3, 2) but x (2, 2, 4) and the module (h 2, G 1, p 2) need (2, 1, "
          "capacity, 2)");
    multihead cross;
    multihead_config ccfg = {.query_size = 4, .key_size = 3, .value_size = 4,
                             .num_hiddens = 4, .num_heads = 2};
    OK(multihead_init(&cross, &ccfg));
    FAILS(kv_cache_decode_step(&cross, &wrong, x, &out, NULL), GSL_EINVAL,
          "kv_cache_decode_step: decoding is self-attention, but the module "
          "has query_size 4, key_size 3, value_size 4");
    multihead_free(&cross);
    kv_cache_free(&wrong);
    kv_cache_free(&cache);
    multihead_free(&m);
    FREE_ALL(x, x3);
}
//<

/* The step checks once, after its steps: a finite x whose projection
 * overflows is refused with GSL_ERANGE naming the projection and the
 * element, out NULL, the cache as it was (overflow_module's layers). */
static void decode_overflow(double x0, const char *message)
{
    multihead m;
    overflow_module(&m);
    kv_cache cache;
    OK(kv_cache_init(&cache, 1, 1, 2, 4));
    tensor *x, *out = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 1, 2), &x));
    tensor_fill(x, x0);
    FAILS(kv_cache_decode_step(&m, &cache, x, &out, NULL), GSL_ERANGE, message);
    cr_assert_null(out);
    cr_assert_eq(cache.length, 0, "a refused step leaves the cache empty");
    tensor_free(x);
    kv_cache_free(&cache);
    multihead_free(&m);
}

Test(kvcache, an_overflow_is_named_by_its_stage)
{
    // 1e308 + 1e308 = inf in every projection: Q is the first stage
    decode_overflow(1e308, "kv_cache_decode_step: the projection overflowed: "
                           "Q[0, 0, 0] = inf from finite inputs (Q (1, 1, 2))");
    // projections of 5e307 are finite, the score q . k / sqrt(2) is not:
    // its softmax row is NaN, and the heads are the first stage named
    decode_overflow(2.5e307, "kv_cache_decode_step: the weighted sum of the "
                             "values overflowed: heads[0, 0, 0] = nan from "
                             "finite inputs (heads (1, 1, 2))");
}

/* The module's weights are read for NaN and inf at the first step, into
 * an empty cache, and not at the later steps: a NaN put into W_o after
 * the first step is met as the output's, a stage of the step. */
Test(kvcache, the_weights_are_checked_at_the_first_step)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2);
    kv_cache cache;
    OK(kv_cache_init(&cache, 1, 2, 2, 3));
    tensor *x, *out;
    OK(tensor_alloc(SHAPE(1, 1, 4), &x));
    tensor_fill(x, 0.5);
    m.W_k.weight->data[5] = NAN;
    FAILS(kv_cache_decode_step(&m, &cache, x, &out, NULL), GSL_EDOM,
          "multihead: W_k[1, 1] = nan; W_k must be finite (W_k (4, 4))");
    cr_assert_eq(cache.length, 0);
    m.W_k.weight->data[5] = 0.25;
    OK(kv_cache_decode_step(&m, &cache, x, &out, NULL));
    tensor_free(out);
    m.W_o.weight->data[0] = NAN;
    FAILS(kv_cache_decode_step(&m, &cache, x, &out, NULL), GSL_ERANGE,
          "kv_cache_decode_step: the output overflowed: out[0, 0, 0] = nan "
          "from finite inputs (out (1, 1, 4))");
    cr_assert_null(out);
    cr_assert_eq(cache.length, 1, "a refused step leaves the cache as it was");
    kv_cache_free(&cache);
    multihead_free(&m);
    tensor_free(x);
}

//> 17
/* Every allocation of a step may fail: GSL_ENOMEM, out NULL, the cache's
 * length as it was, the trace listening again, nothing leaked (valgrind
 * and ASan check that); the grouped, causal forward pass likewise. */
Test(kvcache, allocation_failures)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .kv_heads = 1,
                    .causal = 1);
    kv_cache cache;
    OK(kv_cache_init(&cache, 2, 1, 2, 8));
    tensor *x, *out;
    OK(tensor_alloc(SHAPE(2, 2, 4), &x));
    tensor_fill_arange(x, -1, 0.125);
    OK(kv_cache_decode_step(&m, &cache, x, &out, NULL)); // length 2
    tensor_free(out);
    int failures = 0;
    tensor *w; // (B, h, n, t)
    trace_log log;
    trace_log_start(&log);
    EACH_ALLOCATION_FAILS(failures,
        kv_cache_decode_step(&m, &cache, x, &out, &w),
        cr_assert_null(out);
        cr_assert_null(w);
        cr_assert_eq(cache.length, 2);
        assert_trace_listens(&log));
    trace_log_stop(&log);
    trace_log_free(&log);
    cr_assert_eq(cache.length, 4);
    cr_assert_gt(failures, 10);
    cr_assert_eq(w->shape[3], 4);
    tensor_free(out);
    tensor_free(w);
    for (long k = 0;; k++) {
        mha_debug_fail_alloc_after(k);
        int status = multihead_forward(&m, x, x, x, NULL, &out, NULL);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "k = %ld: %s", k, mha_last_error());
        cr_assert_null(out);
    }
    FREE_ALL(out, x);
    kv_cache_free(&cache);
    multihead_free(&m);
}
//<
//<
