//> 17
/* test_masking.c: a masked key never gets weight, on any path.
 *
 * The rule (softmax.h): row (b, i) sees keys 0 .. see - 1, where see is
 * its valid length and, with causal, no more than i + Lk - Lq + 1; every
 * other key gets weight exactly 0 whatever the scores.  A row of valid
 * length 0 (no causal mask) sees every key alike.  d2l's -1e6 fill
 * breaks the rule when every visible score is below about -1e6 + 745;
 * these tests draw scores far below that, down to -1e308.
 *
 * The module is made so its scores are known exactly: W_q = I, W_k = -I,
 * W_v = I, W_o = I, no biases, and every head's queries and keys zero but
 * for their first feature, so head hd's score of query i against key j is
 * -q[b, i, hd p] k[b, j, g p] / sqrt(p) (g the head's key-value head):
 * one product, the same in any order of summation.  The reference below
 * applies the rule to those scores with plain loops. */
#include "check.h"

#include <float.h>

typedef struct mask_case {
    size_t B, Lq, Lk, h, G, p;
    int causal;
    int lens; /* 0: no valid_lens, 1: (B,), 2: (B, Lq) */
} mask_case;

/* 10^u with u uniform in (lo, hi), of random sign unless positive. */
static double magnitude(gsl_rng *r, double lo, double hi, int positive)
{
    double x = pow(10.0, lo + (hi - lo) * gsl_rng_uniform(r));
    return positive || gsl_rng_uniform(r) < 0.5 ? x : -x;
}

static size_t rows_see(const mask_case *c, const tensor *lens, size_t b,
                       size_t i)
{
    size_t see = c->Lk;
    if (lens)
        see = (size_t)(lens->ndim == 1 ? lens->data[b]
                                       : lens->data[b * c->Lq + i]);
    if (c->causal && i + c->Lk - c->Lq + 1 < see)
        see = i + c->Lk - c->Lq + 1;
    return see;
}

/* The weights (B, h, Lq, Lk) and the output (B, Lq, h p) by the rule. */
static void reference(const mask_case *c, const tensor *q, const tensor *k,
                      const tensor *v, const tensor *lens, tensor **w,
                      tensor **out)
{
    size_t B = c->B, Lq = c->Lq, Lk = c->Lk, h = c->h, p = c->p;
    OK(tensor_alloc(SHAPE(B, h, Lq, Lk), w));
    OK(tensor_alloc(SHAPE(B, Lq, h * p), out));
    double scale = 1.0 / sqrt((double)p), s[64];
    cr_assert(Lk <= 64);
    for (size_t b = 0; b < B; b++)
        for (size_t hd = 0; hd < h; hd++)
            for (size_t i = 0; i < Lq; i++) {
                size_t g, see = rows_see(c, lens, b, i);
                OK(gqa_kv_head(hd, h, c->G, &g)); // (ex_gqa_kv_head checks it)
                size_t n = see ? see : Lk; // valid_len 0: every key alike
                double mx = -INFINITY, sum = 0;
                for (size_t j = 0; j < n; j++) {
                    double dot = *TENSOR_AT(q, b, i, hd * p) *
                                 -*TENSOR_AT(k, b, j, g * p);
                    s[j] = see ? scale * dot : 0.0;
                    mx = fmax(mx, s[j]);
                }
                for (size_t j = 0; j < n; j++)
                    sum += s[j] = exp(s[j] - mx);
                double *w_bhi = TENSOR_AT(*w, b, hd, i, 0);
                for (size_t j = 0; j < Lk; j++)
                    w_bhi[j] = j < n ? s[j] / sum : 0.0;
                for (size_t f = 0; f < p; f++) {
                    double o = 0;
                    for (size_t j = 0; j < n; j++)
                        o += w_bhi[j] * *TENSOR_AT(v, b, j, g * p + f);
                    *TENSOR_AT(*out, b, i, hd * p + f) = o;
                }
            }
}

/* The module of the header: W_q, W_v, W_o identities, W_k minus one. */
static void exact_module(const mask_case *c, multihead *m)
{
    size_t D = c->h * c->p, Dkv = c->G * c->p;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = c->h,
                            .kv_heads = c->G, .causal = c->causal};
    OK(multihead_init(m, &cfg));
    for (size_t r = 0; r < D; r++) {
        *TENSOR_AT(m->W_q.weight, r, r) = 1;
        *TENSOR_AT(m->W_o.weight, r, r) = 1;
    }
    for (size_t r = 0; r < Dkv; r++) {
        *TENSOR_AT(m->W_k.weight, r, r) = -1;
        *TENSOR_AT(m->W_v.weight, r, r) = 1;
    }
}

/* Queries and keys zero but for each head's first feature, drawn at
 * magnitudes 10^-2 .. 10^154 (a score of up to 1e308); with `negative`
 * every score is below zero, most of them far below -1e6.  Values
 * (j + 1) + f / 4, so weight on the wrong key shows in the output. */
static void draw_inputs(const mask_case *c, gsl_rng *r, int negative,
                        tensor **q, tensor **k, tensor **v)
{
    size_t D = c->h * c->p;
    OK(tensor_alloc(SHAPE(c->B, c->Lq, D), q));
    OK(tensor_alloc(SHAPE(c->B, c->Lk, D), k));
    OK(tensor_alloc(SHAPE(c->B, c->Lk, D), v));
    for (size_t b = 0; b < c->B; b++) {
        for (size_t i = 0; i < c->Lq; i++)
            for (size_t hd = 0; hd < c->h; hd++)
                *TENSOR_AT(*q, b, i, hd * c->p) = magnitude(r, -2, 154, negative);
        for (size_t j = 0; j < c->Lk; j++) {
            for (size_t g = 0; g < c->G; g++)
                *TENSOR_AT(*k, b, j, g * c->p) = magnitude(r, -2, 154, negative);
            for (size_t f = 0; f < D; f++)
                *TENSOR_AT(*v, b, j, f) = (double)(j + 1) + (double)f / 4;
        }
    }
}

/* valid_lens as the case asks: lengths 1 .. Lk, or 0 .. Lk without
 * causal (a valid length of 0 with causal is refused). */
static tensor *draw_lens(const mask_case *c, gsl_rng *r)
{
    if (!c->lens)
        return NULL;
    size_t n = c->lens == 1 ? c->B : c->B * c->Lq;
    size_t lo = c->causal ? 1 : 0;
    tensor *lens;
    if (c->lens == 1)
        OK(tensor_alloc(SHAPE(c->B), &lens));
    else
        OK(tensor_alloc(SHAPE(c->B, c->Lq), &lens));
    for (size_t t = 0; t < n; t++)
        lens->data[t] = (double)(lo + gsl_rng_uniform_int(r, c->Lk - lo + 1));
    return lens;
}

/* Weights kept by a path: masked keys exactly 0, the rest as the rule. */
static void check_weights(const mask_case *c, const tensor *got,
                          const tensor *want, const char *path)
{
    cr_assert(got, "%s kept no weights", path);
    cr_assert(tensor_same_shape(got, want), "%s: weights' shape", path);
    for (size_t t = 0; t < tensor_numel(want); t++) {
        double g = got->data[t], w = want->data[t];
        if (w == 0.0)
            cr_assert(g == 0.0, "%s: weight %zu is %g on a masked key "
                      "(B %zu, Lq %zu, Lk %zu, h %zu, G %zu, causal %d, lens %d)",
                      path, t, g, c->B, c->Lq, c->Lk, c->h, c->G, c->causal,
                      c->lens);
        else
            cr_assert(fabs(g - w) <= 1e-12, "%s: weight %zu is %.17g, want "
                      "%.17g", path, t, g, w);
    }
}

static void check_out(const mask_case *c, const tensor *got,
                      const tensor *want, const char *path)
{
    double err = rel_error(got, want);
    cr_assert(err <= 1e-12, "%s: relative error %g (B %zu, Lq %zu, Lk %zu, "
              "h %zu, G %zu, causal %d, lens %d)", path, err, c->B, c->Lq,
              c->Lk, c->h, c->G, c->causal, c->lens);
}

/* Every forward path of the module on one case. */
static void check_forward_paths(const mask_case *c, gsl_rng *r, int negative)
{
    multihead m;
    exact_module(c, &m);
    tensor *q, *k, *v, *lens = draw_lens(c, r), *w, *want, *out;
    draw_inputs(c, r, negative, &q, &k, &v);
    reference(c, q, k, v, lens, &w, &want);

    tensor *got_w; // (B, h, Lq, Lk)
    OK(multihead_forward(&m, q, k, v, lens, &out, &got_w));
    check_out(c, out, want, "copy path");
    check_weights(c, got_w, w, "copy path");
    tensor_free(out);
    tensor_free(got_w);

//> full
    multihead_fast_options opts[] = {
        {.threading = MULTIHEAD_THREADS_HEADS},
        {.threading = MULTIHEAD_THREADS_BLAS, .block_rows = 1},
    };
    for (size_t o = 0; o < 2; o++) {
        OK(multihead_forward_fast(&m, q, k, v, lens, &opts[o], &out, &got_w));
        check_out(c, out, want, "fast path");
        check_weights(c, got_w, w, "fast path");
        tensor_free(out);
        tensor_free(got_w);
    }

//<
    size_t tiles[][2] = {{1, 1}, {2, 3}, {0, 0}};
    for (size_t t = 0; t < 3; t++) {
        OK(multihead_forward_tiled(&m, q, k, v, lens, tiles[t][0],
                                   tiles[t][1], &out));
        check_out(c, out, want, "tiled path");
        tensor_free(out);
    }

//> full
    OK(multihead_forward_naive(&m, q, k, v, lens, &out));
    check_out(c, out, want, "naive path");
    tensor_free(out);
//<

    // backward: a key no query of its example sees gets dK = dV = 0, and
    // dV is the weights' transpose times dout (W_o, W_v identities)
    multihead_cache cache = {0};
    tensor *dout, *dk, *dv;
    OK(multihead_forward_cached(&m, q, k, v, lens, NULL, &cache, &out, NULL));
    OK(tensor_alloc(SHAPE(c->B, c->Lq, c->h * c->p), &dout));
    tensor_fill_uniform(dout, r, -1, 1);
    OK(multihead_backward(&m, &cache, dout, NULL, NULL, NULL, &dk, &dv));
    for (size_t b = 0; b < c->B; b++)
        for (size_t j = 0; j < c->Lk; j++) {
            int seen = 0;
            for (size_t hd = 0; hd < c->h; hd++)
                for (size_t i = 0; i < c->Lq; i++)
                    seen |= *TENSOR_AT(w, b, hd, i, j) != 0.0;
            for (size_t g = 0; g < c->G; g++)
                for (size_t f = 0; f < c->p; f++) {
                    double want_dv = 0;
                    for (size_t hd = g * (c->h / c->G);
                         hd < (g + 1) * (c->h / c->G); hd++)
                        for (size_t i = 0; i < c->Lq; i++)
                            want_dv += *TENSOR_AT(w, b, hd, i, j) *
                                       *TENSOR_AT(dout, b, i, hd * c->p + f);
                    double got_dv = *TENSOR_AT(dv, b, j, g * c->p + f);
                    cr_assert(fabs(got_dv - want_dv) <= 1e-12 * (1 + fabs(want_dv)),
                              "backward: dV[%zu, %zu, %zu] = %.17g, want %.17g",
                              b, j, g * c->p + f, got_dv, want_dv);
                    if (!seen)
                        cr_assert(got_dv == 0.0 &&
                                  *TENSOR_AT(dk, b, j, g * c->p + f) == 0.0,
                                  "backward: key %zu of example %zu is seen by "
                                  "no query, yet has a gradient", j, b);
                }
        }
    FREE_ALL(q, k, v, lens, w, want, out, dout, dk, dv);
    multihead_cache_free(&cache);
    multihead_free(&m);
}

/* 200 random cases: sizes of 1 to 5, every G that divides h, causal or
 * not, valid_lens (B,), (B, Lq) or none, scores of either sign or all
 * far below zero. */
Test(masking, no_path_puts_weight_on_a_masked_key)
{
    gsl_rng *r = mha_rng_new(2203);
    const size_t heads[] = {1, 2, 4};
    for (int n = 0; n < 200; n++) {
        mask_case c = {.B = 1 + gsl_rng_uniform_int(r, 2),
                       .Lq = 1 + gsl_rng_uniform_int(r, 4),
                       .Lk = 1 + gsl_rng_uniform_int(r, 5),
                       .h = heads[gsl_rng_uniform_int(r, 3)],
                       .p = 1 + gsl_rng_uniform_int(r, 2),
                       .causal = (int)gsl_rng_uniform_int(r, 2),
                       .lens = (int)gsl_rng_uniform_int(r, 3)};
        do
            c.G = 1 + gsl_rng_uniform_int(r, c.h);
        while (c.h % c.G);
        if (c.causal && c.Lq > c.Lk)
            c.Lq = c.Lk;
        check_forward_paths(&c, r, n % 2);
    }
    gsl_rng_free(r);
}

/* Decoding with a cache: a prefill of all L positions at once is causal
 * within the step; one position a step sees only the cache.  Both give
 * the rule's causal rows at scores far below -1e6. */
Test(masking, decode_step_at_extreme_scores)
{
    gsl_rng *r = mha_rng_new(2204);
    for (int n = 0; n < 20; n++) {
        size_t L = 1 + gsl_rng_uniform_int(r, 5);
        mask_case c = {.B = 1 + gsl_rng_uniform_int(r, 2), .Lq = L, .Lk = L,
                       .h = 2, .G = 1 + gsl_rng_uniform_int(r, 2), .p = 2,
                       .causal = 1};
        multihead m;
        exact_module(&c, &m);
        tensor *x, *unused_k, *unused_v, *w, *want, *out;
        draw_inputs(&c, r, 1, &x, &unused_k, &unused_v);
        reference(&c, x, x, x, NULL, &w, &want);
        for (int chunk = 0; chunk < 2; chunk++) {
            kv_cache cache;
            OK(kv_cache_init(&cache, c.B, c.G, c.p, L));
            size_t step = chunk ? 1 : L;
            for (size_t t0 = 0; t0 < L; t0 += step) {
                tensor *xs;
                OK(tensor_narrow(x, 1, t0, step, &xs));
                OK(kv_cache_decode_step(&m, &cache, xs, &out, NULL));
                tensor_free(xs);
                for (size_t b = 0; b < c.B; b++)
                    for (size_t i = 0; i < step; i++)
                        for (size_t f = 0; f < c.h * c.p; f++) {
                            double g = *TENSOR_AT(out, b, i, f);
                            double e = *TENSOR_AT(want, b, t0 + i, f);
                            cr_assert(fabs(g - e) <= 1e-12 * (1 + fabs(e)),
                                      "decode (step %zu): out[%zu, %zu, %zu] "
                                      "= %.17g, want %.17g", step, b, t0 + i,
                                      f, g, e);
                        }
                tensor_free(out);
            }
            kv_cache_free(&cache);
        }
        FREE_ALL(x, unused_k, unused_v, w, want);
        multihead_free(&m);
    }
    gsl_rng_free(r);
}

/* The building blocks: masked_softmax and the fused row of the fast
 * paths, on scores drawn down to -1e308. */
Test(masking, softmax_rows_down_to_minus_1e308)
{
    gsl_rng *r = mha_rng_new(2205);
    for (int n = 0; n < 500; n++) {
        size_t Lk = 1 + gsl_rng_uniform_int(r, 9);
        size_t valid = gsl_rng_uniform_int(r, Lk + 1);
        tensor *x, *lens, *w;
        OK(tensor_alloc(SHAPE(1, 1, Lk), &x));
        for (size_t j = 0; j < Lk; j++)
            x->data[j] = -magnitude(r, 0, 308, 1); // -1 .. -1e308
        OK(tensor_from_array(SHAPE(1), (double[]){(double)valid}, &lens));
        OK(masked_softmax(x, lens, &w));
        double row[9], sum = 0;
        double s = rowops_softmax_unnormalized(x->data, Lk, 1.0, valid, row,
                                               NULL);
        for (size_t j = 0; j < Lk; j++) {
            sum += w->data[j];
            if (valid && j >= valid) {
                cr_assert(w->data[j] == 0.0, "masked_softmax: key %zu of %zu "
                          "(valid %zu) has weight %g", j, Lk, valid, w->data[j]);
                cr_assert(row[j] == 0.0, "fused row: key %zu has %g", j, row[j]);
            }
            if (!valid) {
                cr_assert(w->data[j] == 1.0 / (double)Lk);
                cr_assert(row[j] == 1.0);
            }
        }
        cr_assert(fabs(sum - 1.0) <= 4 * DBL_EPSILON);
        cr_assert(s >= 1.0);
        FREE_ALL(x, lens, w);
    }
    gsl_rng_free(r);
}
//<
