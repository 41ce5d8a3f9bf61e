//> 19
/* test_window.c: sliding windows, ALiBi and sinks (window.h), on every
 * path, against a reference written here from the papers.
 *
 * The reference (ref_forward) knows nothing of window.c but ALiBi's
 * slopes, alibi_slope's (ex_alibi_slope holds them to fixtures, and the
 * full build to BLOOM's get_slopes, recursive, as its Python reads), its own visible
 * set (Mistral's i' - W < j <= i', StreamingLLM's first keys, valid_lens
 * as d2l), its own scores (Press et al.: q.k/sqrt(p) + m_h (j - i')) and
 * gpt-oss's sink: the logits with the sink appended, one softmax over
 * them, the sink's column dropped.  It runs on plain arrays in plain
 * loops.  The module's copy path, fast path, tiled pass and plain loops
 * are held to it within 1e-12, the backward pass to central differences, and so is `mha forward` on 40 cases drawn from a fresh
 * seed each run (printed when a case fails); decoding with a rolling
 * cache equals the windowed forward row by row, its memory constant, and
 * so does chapter 16's growing cache under the same rule.
 *
 * Shapes: queries (B, Lq, dq), keys and values (B, Lk, dk), (B, Lk, dv);
 * W_q (D, dq), W_k and W_v (G*p, .), W_o (Do, D); A (B, h, Lq, Lk).
 */
#include "check.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <time.h>

#include <criterion/parameterized.h>
#include <gsl/gsl_randist.h>

//> full
#include "scratch.h"
#include "mha_run.h"
//<

/* --- the reference ---------------------------------------------------- */

//> full
/* BLOOM's get_slopes(n), as its Python reads: a power of two gets
 * start * ratio^i with start = ratio = 2^(-2^-(log2 n - 3)); otherwise the
 * slopes of the closest power of two below n, then get_slopes(2 P)[0::2]
 * cut to the n - P missing. */
static void ref_slopes(size_t n, double *out)
{
    double l = log2((double)n);
    if (l == floor(l)) {
        double start = pow(2.0, -pow(2.0, -(l - 3)));
        for (size_t i = 0; i < n; i++)
            out[i] = start * pow(start, (double)i);
        return;
    }
    size_t P = (size_t)pow(2.0, floor(l));
    ref_slopes(P, out);
    double *twice = malloc(2 * P * sizeof *twice);
    cr_assert_not_null(twice);
    ref_slopes(2 * P, twice);
    for (size_t k = 0; k < n - P; k++)
        out[P + k] = twice[2 * k];
    free(twice);
}
//<

typedef struct ref_case {
    size_t B, Lq, Lk, dq, dk, dv, h, G, p, Do;
    size_t window, keep; /* 0: no window */
    int causal, alibi, sinks;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq) */
} ref_case;

typedef struct ref_arrays {
    double *q, *k, *v, *wq, *wk, *wv, *wo, *sinks, *lens;
} ref_arrays;

/* out (B, Lq, Do) and A (B, h, Lq, Lk) of the case, in plain loops. */
static void ref_forward(const ref_case *c, const ref_arrays *a, double *out,
                        double *A)
{
    size_t D = c->h * c->p, Dkv = c->G * c->p;
    double *Q = calloc(c->Lq * D, sizeof *Q), *K = calloc(c->Lk * Dkv, sizeof *K);
    double *V = calloc(c->Lk * Dkv, sizeof *V), *cat = calloc(D, sizeof *cat);
    double *logit = calloc(c->Lk + 1, sizeof *logit), slopes[64];
    cr_assert(Q && K && V && cat && logit && c->h <= 64);
    for (size_t k = 0; c->alibi && k < c->h; k++) // ex_alibi_slope checks them
        OK(alibi_slope(c->h, k, &slopes[k]));
    for (size_t b = 0; b < c->B; b++) {
        for (size_t i = 0; i < c->Lq; i++)
            for (size_t o = 0; o < D; o++) {
                double s = 0;
                for (size_t j = 0; j < c->dq; j++)
                    s += a->wq[o * c->dq + j] * a->q[(b * c->Lq + i) * c->dq + j];
                Q[i * D + o] = s;
            }
        for (size_t t = 0; t < c->Lk; t++)
            for (size_t o = 0; o < Dkv; o++) {
                double s = 0, u = 0;
                for (size_t j = 0; j < c->dk; j++)
                    s += a->wk[o * c->dk + j] * a->k[(b * c->Lk + t) * c->dk + j];
                for (size_t j = 0; j < c->dv; j++)
                    u += a->wv[o * c->dv + j] * a->v[(b * c->Lk + t) * c->dv + j];
                K[t * Dkv + o] = s;
                V[t * Dkv + o] = u;
            }
        for (size_t i = 0; i < c->Lq; i++) {
            long ip = (long)(i + c->Lk) - (long)c->Lq; // i'
            size_t len = c->lens == 0   ? c->Lk
                         : c->lens == 1 ? (size_t)a->lens[b * c->Lq]
                                        : (size_t)a->lens[b * c->Lq + i];
            for (size_t hd = 0; hd < c->h; hd++) {
                size_t kv; // the key-value head it reads (ex_gqa_kv_head checks it)
                OK(gqa_kv_head(hd, c->h, c->G, &kv));
                // the logits of the visible keys, -inf for the others, the
                // sink appended as logit Lk
                double mx = -INFINITY;
                for (size_t j = 0; j < c->Lk; j++) {
                    long jj = (long)j;
                    int seen = j < len;
                    if (c->causal || c->window)
                        seen = seen && jj <= ip;
                    if (c->window)
                        seen = seen && (jj > ip - (long)c->window ||
                                        j < c->keep);
                    double dot = 0;
                    for (size_t f = 0; f < c->p; f++)
                        dot += Q[i * D + hd * c->p + f] * K[j * Dkv + kv * c->p + f];
                    logit[j] = seen ? dot / sqrt((double)c->p) +
                                          (c->alibi ? slopes[hd] * (double)(jj - ip) : 0)
                                    : -INFINITY;
                    mx = logit[j] > mx ? logit[j] : mx;
                }
                size_t n = c->Lk;
                if (c->sinks) {
                    logit[n++] = a->sinks[hd];
                    mx = a->sinks[hd] > mx ? a->sinks[hd] : mx;
                }
                double z = 0;
                for (size_t j = 0; j < n; j++)
                    z += exp(logit[j] - mx);
                double *A_row = A + ((b * c->h + hd) * c->Lq + i) * c->Lk;
                for (size_t j = 0; j < c->Lk; j++) // the sink's column dropped
                    A_row[j] = exp(logit[j] - mx) / z;
                for (size_t f = 0; f < c->p; f++) {
                    double s = 0;
                    for (size_t j = 0; j < c->Lk; j++)
                        s += A_row[j] * V[j * Dkv + kv * c->p + f];
                    cat[hd * c->p + f] = s;
                }
            }
            for (size_t o = 0; o < c->Do; o++) {
                double s = 0;
                for (size_t f = 0; f < D; f++)
                    s += a->wo[o * D + f] * cat[f];
                out[(b * c->Lq + i) * c->Do + o] = s;
            }
        }
    }
    free(Q);
    free(K);
    free(V);
    free(cat);
    free(logit);
}

/* The case's arrays drawn from r: inputs N(0, 1), weights U(-1, 1)/sqrt(fan
 * in), sinks N(0, 1), valid lengths that leave every row a key. */
static void draw_arrays(const ref_case *c, gsl_rng *r, ref_arrays *a)
{
    size_t D = c->h * c->p, Dkv = c->G * c->p;
    size_t n[] = {c->B * c->Lq * c->dq, c->B * c->Lk * c->dk,
                  c->B * c->Lk * c->dv, D * c->dq, Dkv * c->dk, Dkv * c->dv,
                  c->Do * D, c->h, c->B * c->Lq};
    double **dst[] = {&a->q, &a->k, &a->v, &a->wq, &a->wk, &a->wv, &a->wo,
                      &a->sinks, &a->lens};
    size_t fan[] = {0, 0, 0, c->dq, c->dk, c->dv, D, 0, 0};
    for (size_t f = 0; f < 9; f++) {
        *dst[f] = malloc(n[f] * sizeof **dst[f]);
        cr_assert_not_null(*dst[f]);
        for (size_t j = 0; j < n[f]; j++)
            (*dst[f])[j] = fan[f] ? (2 * gsl_rng_uniform(r) - 1) / sqrt((double)fan[f])
                                  : gsl_ran_gaussian(r, 1.0);
    }
    // a valid length per example or per row: at least the last key the
    // row's window reaches (i' - W + 1), or 1 with keep (key 0 is seen)
    for (size_t b = 0; b < c->B; b++)
        for (size_t i = 0; i < c->Lq; i++) {
            size_t ip = i + c->Lk - c->Lq, lo = 1;
            if (c->window && !c->keep && ip + 1 > c->window)
                lo = ip - c->window + 2;
            if (c->lens == 1) // one length for all rows: the last row's
                ip = c->Lk - 1, lo = c->window && !c->keep && c->Lk > c->window
                                         ? c->Lk - c->window + 1
                                         : 1;
            size_t hi = c->Lk;
            (void)ip;
            a->lens[b * c->Lq + i] = (double)(lo + gsl_rng_uniform_int(r, hi - lo + 1));
        }
}

static void free_arrays(ref_arrays *a)
{
    double *all[] = {a->q, a->k, a->v, a->wq, a->wk, a->wv, a->wo, a->sinks,
                     a->lens};
    for (size_t f = 0; f < 9; f++)
        free(all[f]);
}

/* largest |got - want| / largest |want| over n numbers */
static double normwise(const double *got, const double *want, size_t n)
{
    double d = 0, ref = 0;
    for (size_t j = 0; j < n; j++) {
        if (isnan(got[j]))
            return INFINITY;
        d = fmax(d, fabs(got[j] - want[j]));
        ref = fmax(ref, fabs(want[j]));
    }
    return ref > 0 ? d / ref : d;
}

/* A random case of the options' combination `combo` (bit 0 window, bit 1
 * alibi, bit 2 sinks, bit 3 keep): sizes small, G a divisor of h. */
static ref_case draw_case(gsl_rng *r, unsigned combo)
{
    ref_case c = {0};
    c.B = 1 + gsl_rng_uniform_int(r, 3);
    c.h = 1 + gsl_rng_uniform_int(r, 12);
    size_t div[12], nd = 0;
    for (size_t g = 1; g <= c.h; g++)
        if (c.h % g == 0)
            div[nd++] = g;
    c.G = div[gsl_rng_uniform_int(r, nd)];
    c.p = 1 + gsl_rng_uniform_int(r, 5);
    c.Lk = 1 + gsl_rng_uniform_int(r, 16);
    c.Lq = 1 + gsl_rng_uniform_int(r, c.Lk);
    c.dq = 1 + gsl_rng_uniform_int(r, 7);
    c.dk = 1 + gsl_rng_uniform_int(r, 7);
    c.dv = 1 + gsl_rng_uniform_int(r, 7);
    c.Do = 1 + gsl_rng_uniform_int(r, 7);
    c.window = combo & 1 ? 1 + gsl_rng_uniform_int(r, 6) : 0;
    c.keep = combo & 1 && combo & 8 ? 1 + gsl_rng_uniform_int(r, 3) : 0;
    c.alibi = (combo & 2) != 0;
    c.sinks = (combo & 4) != 0;
    c.causal = c.window || c.alibi || gsl_rng_uniform_int(r, 2);
    c.lens = (int)gsl_rng_uniform_int(r, 3);
    return c;
}

//> full
/* --- ALiBi's slopes ---------------------------------------------------- */

Test(window, alibi_slopes_against_bloom)
{
    // every n to 64 against BLOOM's recursion, as a tensor (h,)
    double want[64];
    for (size_t n = 1; n <= 64; n++) {
        tensor *s;
        OK(alibi_slopes(n, &s));
        cr_assert_eq(s->ndim, 1);
        cr_assert_eq(s->shape[0], n);
        ref_slopes(n, want);
        for (size_t k = 0; k < n; k++)
            cr_assert_float_eq(s->data[k], want[k], 1e-15,
                               "n %zu head %zu: %.17g, want %.17g", n, k,
                               s->data[k], want[k]);
        tensor_free(s);
    }
    tensor *s;
    FAILS(alibi_slopes(0, &s), GSL_EINVAL,
          "alibi_slopes: n is 0 (one slope per head)");
    cr_assert_null(s);
}
//<

/* --- the module's paths against the reference ------------------------ */

/* The module of case c loaded with a's weights. */
static void module_of(const ref_case *c, const ref_arrays *a, multihead *m)
{
    multihead_config cfg = {.query_size = c->dq, .key_size = c->dk,
                            .value_size = c->dv, .num_hiddens = c->h * c->p,
                            .num_heads = c->h, .out_size = c->Do,
                            .kv_heads = c->G, .causal = c->causal,
                            .window = c->window, .keep_first = c->keep,
                            .alibi = c->alibi, .sinks = c->sinks};
    OK(multihead_init(m, &cfg));
    size_t D = c->h * c->p, Dkv = c->G * c->p;
    memcpy(m->W_q.weight->data, a->wq, D * c->dq * sizeof(double));
    memcpy(m->W_k.weight->data, a->wk, Dkv * c->dk * sizeof(double));
    memcpy(m->W_v.weight->data, a->wv, Dkv * c->dv * sizeof(double));
    memcpy(m->W_o.weight->data, a->wo, c->Do * D * sizeof(double));
    if (c->sinks)
        memcpy(m->sinks->data, a->sinks, c->h * sizeof(double));
}

static void inputs_of(const ref_case *c, const ref_arrays *a, tensor **q,
                      tensor **k, tensor **v, tensor **vl)
{
    OK(tensor_from_array(SHAPE(c->B, c->Lq, c->dq), a->q, q));
    OK(tensor_from_array(SHAPE(c->B, c->Lk, c->dk), a->k, k));
    OK(tensor_from_array(SHAPE(c->B, c->Lk, c->dv), a->v, v));
    *vl = NULL;
    if (c->lens == 1) {
        double l[8];
        for (size_t b = 0; b < c->B; b++)
            l[b] = a->lens[b * c->Lq];
        OK(tensor_from_array(SHAPE(c->B), l, vl));
    } else if (c->lens == 2) {
        OK(tensor_from_array(SHAPE(c->B, c->Lq), a->lens, vl));
    }
}

Test(window, every_path_equals_the_reference)
{
    gsl_rng *r = mha_rng_new(19);
    for (int t = 0; t < 64; t++) {
        ref_case c = draw_case(r, (unsigned)t % 16);
        ref_arrays a;
        draw_arrays(&c, r, &a);
        if (c.lens == 1) // the reference reads row 0's length for all rows
            for (size_t b = 0; b < c.B; b++)
                for (size_t i = 1; i < c.Lq; i++)
                    a.lens[b * c.Lq + i] = a.lens[b * c.Lq];
        size_t no = c.B * c.Lq * c.Do, na = c.B * c.h * c.Lq * c.Lk;
        double *out = malloc(no * sizeof *out), *A = malloc(na * sizeof *A);
        ref_forward(&c, &a, out, A);
        multihead m;
        module_of(&c, &a, &m);
        tensor *q, *k, *v, *vl, *y;
        inputs_of(&c, &a, &q, &k, &v, &vl);
        const char *path[] = {"copy", "tiled", "fast", "naive"};
        int paths = 2;
//> full
        paths = 4;
//<
        for (int p = 0; p < paths; p++) {
            tensor *w = NULL; // (B, h, Lq, Lk), from the paths that make it
            if (p == 0)
                OK(multihead_forward(&m, q, k, v, vl, &y, &w));
            else if (p == 1) // tiles of 2 x 3: a window crosses them
                OK(multihead_forward_tiled(&m, q, k, v, vl, 2, 3, &y));
//> full
            if (p == 2)
                OK(multihead_forward_fast(&m, q, k, v, vl, NULL, &y, &w));
            else if (p == 3)
                OK(multihead_forward_naive(&m, q, k, v, vl, &y));
//<
            double e = normwise(y->data, out, no);
            cr_assert_leq(e, 1e-12,
                          "case %d (%s path): out differs by %.1e (B %zu Lq "
                          "%zu Lk %zu h %zu G %zu p %zu W %zu keep %zu causal "
                          "%d alibi %d sinks %d lens %d)",
                          t, path[p], e, c.B, c.Lq, c.Lk, c.h, c.G, c.p,
                          c.window, c.keep, c.causal, c.alibi, c.sinks, c.lens);
            if (p == 0 || p == 2) { // the paths that make the weights
                e = normwise(w->data, A, na);
                cr_assert_leq(e, 1e-12, "case %d (%s path): A by %.1e", t,
                              path[p], e);
                for (size_t j = 0; j < na; j++) // hidden keys: exactly 0
                    cr_assert(A[j] != 0 || w->data[j] == 0.0,
                              "case %d (%s): weight %zu is %g, not 0", t,
                              path[p], j, w->data[j]);
            }
            tensor_free(y);
            tensor_free(w);
        }
        FREE_ALL(q, k, v, vl);
        multihead_free(&m);
        free_arrays(&a);
        free(out);
        free(A);
    }
    gsl_rng_free(r);
}

Test(window, the_window_and_the_sink_by_hand)
{
    // zero queries: every score 0.  Lq = Lk = 4, W = 2, a sink of log 2:
    // row i sees keys i-1 and i (row 0 key 0 alone), each of weight
    // 1 / (n + 2) beside the sink's 2 / (n + 2)
    multihead m;
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 2, .num_heads = 1, .window = 2,
                            .sinks = 1};
    OK(multihead_init(&m, &cfg));
    cr_assert_eq(m.cfg.causal, 1, "a window is causal");
    m.sinks->data[0] = log(2.0);
    tensor *x, *y, *w;
    OK(tensor_alloc(SHAPE(1, 4, 2), &x));
    OK(multihead_forward(&m, x, x, x, NULL, &y, &w));
    double want[4][4] = {{1.0 / 3, 0, 0, 0},
                         {0.25, 0.25, 0, 0},
                         {0, 0.25, 0.25, 0},
                         {0, 0, 0.25, 0.25}};
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 4; j++)
            cr_assert_float_eq(*TENSOR_AT(w, 0, 0, i, j), want[i][j],
                               1e-15, "weight (%zu, %zu)", i, j);
    FREE_ALL(y, w, x);
    multihead_free(&m);
}

Test(window, refusals)
{
    multihead m;
    multihead_config cfg = {.query_size = 2, .key_size = 2, .value_size = 2,
                            .num_hiddens = 2, .num_heads = 1, .alibi = 1};
    config_refused(&cfg, GSL_EINVAL,
                   "multihead: alibi needs causal or a window (its bias "
                   "-m_h (i' - j) grows with the distance to earlier keys)");
    cfg.alibi = 0;
    cfg.keep_first = 2;
    config_refused(&cfg, GSL_EINVAL,
                   "multihead: keep_first 2 needs a window (every key is kept "
                   "without one)");
    // valid_len 1 and a window of 2: query 3 sees keys 2 and 3, both past it
    cfg.keep_first = 0;
    cfg.window = 2;
    OK(multihead_init(&m, &cfg));
    tensor *x, *vl, *y;
    OK(tensor_alloc(SHAPE(1, 4, 2), &x));
    OK(tensor_from_array(SHAPE(1), (double[]){1}, &vl));
    FAILS(multihead_forward(&m, x, x, x, vl, &y, NULL), GSL_EINVAL,
          "multihead: window: query 2 of example 0 sees no key (valid_len 1, "
          "Lq 4, Lk 4, window 2: query i sees key j only when i + Lk - Lq - "
          "2 < j <= i + Lk - Lq)");
    cr_assert_null(y);
    multihead_free(&m);
    // with the first key kept, every row sees key 0
    cfg.keep_first = 1;
    OK(multihead_init(&m, &cfg));
    tensor *w;
    OK(multihead_forward(&m, x, x, x, vl, &y, &w));
    cr_assert_eq(*TENSOR_AT(w, 0, 0, 3, 0), 1.0);
    tensor_free(y);
    tensor_free(w);
    multihead_free(&m);
    // a sink alone and a row of valid_len 0
    cfg = (multihead_config){.query_size = 2, .key_size = 2, .value_size = 2,
                             .num_hiddens = 2, .num_heads = 1, .sinks = 1};
    OK(multihead_init(&m, &cfg));
    vl->data[0] = 0;
    FAILS(multihead_forward(&m, x, x, x, vl, &y, NULL), GSL_EINVAL,
          "multihead: query 0 of example 0 sees no key (valid_len 0), and a "
          "row's weights need one with alibi or sinks");
    m.sinks->data[0] = NAN;
    vl->data[0] = 1;
    FAILS(multihead_forward(&m, x, x, x, vl, &y, NULL), GSL_EDOM,
          "multihead: sinks[0] = nan; sinks must be finite (sinks (1,))");
    multihead_free(&m);
    FREE_ALL(vl, x);
}

/* The backward pass reads the weights the forward saved: a hidden key's
 * weight is 0, so its gradient is too, and the ALiBi bias is a constant.
 * The gradient of sum(out * g) by the queries and by W_k against central
 * differences, with a window, ALiBi and sinks, G < h. */
Test(window, the_backward_pass_follows_the_rule)
{
    gsl_rng *r = mha_rng_new(23);
    multihead m;
    multihead_config cfg = {.query_size = 3, .key_size = 3, .value_size = 3,
                            .num_hiddens = 8, .num_heads = 4, .kv_heads = 2,
                            .window = 2, .keep_first = 1, .alibi = 1,
                            .sinks = 1};
    OK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, r);
    tensor_fill_normal(m.sinks, r, 0, 1);
    multihead grads;
    OK(multihead_init(&grads, &cfg));
    tensor *x, *g, *y, *dq = NULL, *dk = NULL, *dv = NULL;
    OK(tensor_alloc(SHAPE(2, 5, 3), &x));
    tensor_fill_normal(x, r, 0, 1);
    OK(tensor_alloc(SHAPE(2, 5, 8), &g));
    tensor_fill_normal(g, r, 0, 1);
    multihead_cache cache = {0};
    OK(multihead_forward_cached(&m, x, x, x, NULL, NULL, &cache, &y, NULL));
    OK(multihead_backward(&m, &cache, g, &grads, NULL, &dq, &dk, &dv));
    // the loss as a function of one number
    double *knob[] = {x->data + 7, x->data + 22, m.W_k.weight->data + 5,
                      m.W_q.weight->data + 11};
    double *grad[] = {NULL, NULL, grads.W_k.weight->data + 5,
                      grads.W_q.weight->data + 11};
    for (size_t t = 0; t < 4; t++) {
        double keep = *knob[t], loss[2], h = 1e-6;
        for (int side = 0; side < 2; side++) {
            *knob[t] = keep + (side ? h : -h);
            tensor *z;
            OK(multihead_forward(&m, x, x, x, NULL, &z, NULL));
            loss[side] = 0;
            for (size_t j = 0; j < tensor_numel(z); j++)
                loss[side] += z->data[j] * g->data[j];
            tensor_free(z);
        }
        *knob[t] = keep;
        double numeric = (loss[1] - loss[0]) / (2 * h);
        // x is queries, keys and values at once: its gradient is the sum
        double got = grad[t] ? *grad[t]
                             : dq->data[knob[t] - x->data] +
                                   dk->data[knob[t] - x->data] +
                                   dv->data[knob[t] - x->data];
        cr_assert(fabs(got - numeric) <= 1e-7 * (1 + fabs(numeric)),
                  "number %zu: backward %.12g, differences %.12g", t, got,
                  numeric);
    }
    multihead_cache_free(&cache);
    FREE_ALL(x, g, y, dq, dk, dv);
    multihead_free(&grads);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* --- decoding with a rolling cache ------------------------------------ */

struct roll_case {
    size_t B, T, d, D, h, G, W, keep;
    int alibi, sinks, rope;
    size_t chunks[8];
};

static struct roll_case roll_cases[] = {
    {2, 8, 6, 8, 4, 4, 3, 0, 0, 0, 0, {1, 1, 1, 1, 1, 1, 1, 1}},
    {1, 8, 5, 12, 6, 2, 4, 2, 1, 1, 0, {1, 1, 1, 1, 1, 1, 1, 1}},
    {2, 11, 4, 8, 2, 1, 2, 1, 0, 1, 1, {5, 1, 1, 1, 3}},    // a long prefill
    {1, 12, 6, 8, 4, 2, 5, 0, 1, 0, 0, {3, 3, 3, 3}},
    {3, 7, 4, 4, 1, 1, 1, 0, 0, 1, 0, {1, 1, 1, 1, 1, 1, 1}}, // W = 1
};

ParameterizedTestParameters(window, decoding_equals_the_windowed_pass)
{
    return cr_make_param_array(struct roll_case, roll_cases,
                               sizeof roll_cases / sizeof roll_cases[0]);
}

ParameterizedTest(struct roll_case *c, window, decoding_equals_the_windowed_pass)
{
    gsl_rng *r = mha_rng_new(7 + c->T);
    multihead m;
    SELF_MODULE(&m, c->d, .num_hiddens = c->D, .num_heads = c->h,
                    .kv_heads = c->G, .bias = 1, .window = c->W,
                    .keep_first = c->keep, .alibi = c->alibi,
                    .sinks = c->sinks, .rope = c->rope);
    multihead_reset_xavier(&m, r);
    random_biases(&m, r);
    if (m.sinks)
        tensor_fill_normal(m.sinks, r, 0, 1);
    tensor *x, *full;
    OK(tensor_alloc(SHAPE(c->B, c->T, c->d), &x));
    tensor_fill_normal(x, r, 0, 1);
    OK(multihead_forward(&m, x, x, x, NULL, &full, NULL));
    window_cache cache;
    size_t p = c->D / c->h;
    OK(window_cache_init(&cache, c->B, c->G, p, c->W, c->keep));
    tensor *keys0 = cache.keys; // the storage is never reallocated
    kv_cache grown; // chapter 16's cache, all T positions, by the same rule
    OK(kv_cache_init(&grown, c->B, c->G, p, c->T));
    size_t s = 0;
    for (size_t step = 0; s < c->T; step++) {
        size_t n = c->chunks[step];
        tensor *xs, *y;
        OK(tensor_narrow(x, 1, s, n, &xs));
        tensor *y16;
        OK(kv_cache_decode_step(&m, &grown, xs, &y16, NULL));
        OK(multihead_decode_window(&m, &cache, xs, &y, NULL));
        cr_assert_leq(rel_error(y16, y), 1e-12, "step %zu: the growing cache "
                      "differs", step);
        tensor_free(y16);
        for (size_t b = 0; b < c->B; b++)
            for (size_t i = 0; i < n; i++)
                for (size_t o = 0; o < c->D; o++) {
                    double got = *TENSOR_AT(y, b, i, o);
                    double want = *TENSOR_AT(full, b, s + i, o);
                    cr_assert(fabs(got - want) <= 1e-12 * (1 + fabs(want)),
                              "position %zu, example %zu, feature %zu: %.17g, "
                              "the forward gives %.17g",
                              s + i, b, o, got, want);
                }
        s += n;
        cr_assert_eq(cache.length, s);
        cr_assert_eq(cache.keys, keys0);
        cr_assert_eq(cache.keys->shape[2], c->keep + c->W, "slots: keep + W");
        FREE_ALL(xs, y);
    }
    window_cache_free(&cache);
    kv_cache_free(&grown);
    FREE_ALL(x, full);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* Each allocation of a decoding step failed in turn while a log listens,
 * with one example and two key-value heads (the new heads a view, copied
 * to be gathered): GSL_ENOMEM, the outputs NULL, the cache's length as it
 * was, the trace listening again at depth 0; nothing leaked. */
Test(window, allocation_failures_leave_the_trace_listening)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .window = 2,
                .keep_first = 1);
    window_cache c;
    OK(window_cache_init(&c, 1, 2, 2, 2, 1));
    tensor *x, *y, *w;
    OK(tensor_alloc(SHAPE(1, 2, 4), &x));
    tensor_fill_arange(x, -1, 0.125);
    trace_log log;
    trace_log_start(&log);
    int failures;
    for (size_t step = 0; step < 3; step++) {
        EACH_ALLOCATION_FAILS(failures,
            multihead_decode_window(&m, &c, x, &y, &w),
            cr_assert_null(y);
            cr_assert_null(w);
            cr_assert_eq(c.length, 2 * step);
            assert_trace_listens(&log));
        cr_assert_gt(failures, 10);
        FREE_ALL(y, w);
    }
    trace_log_stop(&log);
    trace_log_free(&log);
    tensor_free(x);
    window_cache_free(&c);
    multihead_free(&m);
}

Test(window, the_trace_shows_the_slots)
{
    multihead m;
    SELF_MODULE(&m, 4, .num_hiddens = 4, .num_heads = 2, .window = 2);
    window_cache c;
    OK(window_cache_init(&c, 1, 2, 2, 2, 0));
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(1, 1, 4), &x));
    for (int t = 0; t < 3; t++) {
        OK(multihead_decode_window(&m, &c, x, &y, NULL));
        tensor_free(y);
    }
    cr_assert_eq(c.pos[0], 2, "position 2 overwrote position 0");
    cr_assert_eq(c.pos[1], 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    trace_to(f);
    tensor *w; // (B, h, n, f+n)
    OK(multihead_decode_window(&m, &c, x, &y, &w));
    trace_to(NULL);
    fclose(f);
    cr_assert_not_null(strstr(buf, "decode_window(h=2, G=2, window 2, keep 0, "
                                   "slots 2, positions 3..3)"), "%s", buf);
    cr_assert_not_null(strstr(buf, "keys: 2 slots + 1 new"), "%s", buf);
    cr_assert_not_null(strstr(buf, "positions 3..3 into slots 1..: slot of t "
                                   "= t for t < 0, else 0 + (t - 0) mod 2"),
                       "%s", buf);
    cr_assert_eq(w->shape[3], 3);
    cr_assert_eq(*TENSOR_AT(w, 0, 0, 0, 1), 0.0,
                 "slot 1 holds position 1, outside the window of 3");
    free(buf);
    FREE_ALL(y, w, x);
    window_cache_free(&c);
    multihead_free(&m);
    FAILS(window_cache_init(&c, 1, 1, 1, 0, 1), GSL_EINVAL,
          "window_cache_init: batch 1, kv_heads 1, head_size 1 and window 0 "
          "must all be >= 1");
}

//> full
/* --- mha forward: 40 fresh cases ------------------------------------- */

static void save(const char *name, size_t ndim, const size_t *shape,
                 const double *v)
{
    tensor *t;
    OK(tensor_from_array(ndim, shape, v, &t));
    OK(npy_write(name, t));
    tensor_free(t);
}

Test(window, mha_forward_matches_the_reference_on_fresh_cases,
     .init = enter_scratch, .fini = leave_scratch, .timeout = 120)
{
    unsigned long seed = (unsigned long)time(NULL) ^ (unsigned long)getpid();
    gsl_rng *r = mha_rng_new(seed);
    double worst = 0;
    // under valgrind (make memcheck), each combination once, within the
    // time-out
    int cases = getenv("MHA_MEMCHECK") ? 15 : 40;
    for (int t = 0; t < cases; t++) {
        // every combination of window, alibi and sinks (with keep), and
        // never none of them
        unsigned combo = 1 + (unsigned)t % 15;
        ref_case c = draw_case(r, combo);
        ref_arrays a;
        draw_arrays(&c, r, &a);
        if (c.lens == 1)
            for (size_t b = 0; b < c.B; b++)
                for (size_t i = 1; i < c.Lq; i++)
                    a.lens[b * c.Lq + i] = a.lens[b * c.Lq];
        size_t D = c.h * c.p, Dkv = c.G * c.p;
        save("q.npy", SHAPE(c.B, c.Lq, c.dq), a.q);
        save("k.npy", SHAPE(c.B, c.Lk, c.dk), a.k);
        save("v.npy", SHAPE(c.B, c.Lk, c.dv), a.v);
        save("wq.npy", SHAPE(D, c.dq), a.wq);
        save("wk.npy", SHAPE(Dkv, c.dk), a.wk);
        save("wv.npy", SHAPE(Dkv, c.dv), a.wv);
        save("wo.npy", SHAPE(c.Do, D), a.wo);
        save("s.npy", SHAPE(c.h), a.sinks);
        save("vl.npy", SHAPE(c.B, c.Lq), a.lens);
        char cmd[1024];
        int n = snprintf(cmd, sizeof cmd,
                         "forward|--heads|%zu|--kv-heads|%zu|--queries|q.npy|"
                         "--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|"
                         "--wv|wv.npy|--wo|wo.npy|--out|out.npy|"
                         "--attention-out|a.npy",
                         c.h, c.G);
        if (c.window)
            n += snprintf(cmd + n, sizeof cmd - n, "|--window|%zu", c.window);
        if (c.keep)
            n += snprintf(cmd + n, sizeof cmd - n, "|--keep-first|%zu", c.keep);
        if (c.causal && !c.window)
            n += snprintf(cmd + n, sizeof cmd - n, "|--causal");
        if (c.alibi)
            n += snprintf(cmd + n, sizeof cmd - n, "|--alibi");
        if (c.sinks)
            n += snprintf(cmd + n, sizeof cmd - n, "|--sinks|s.npy");
        if (c.lens == 2)
            n += snprintf(cmd + n, sizeof cmd - n, "|--valid-lens-file|vl.npy");
        for (size_t b = 0; c.lens == 1 && b < c.B; b++)
            n += snprintf(cmd + n, sizeof cmd - n, "%s%.0f",
                          b ? "," : "|--valid-lens|", a.lens[b * c.Lq]);
        run res = mha(cmd);
        cr_assert_eq(res.status, 0, "seed %lu case %d: %s\n%s", seed, t,
                     res.err, cmd);
        tensor *out, *A;
        OK(npy_read("out.npy", &out));
        OK(npy_read("a.npy", &A));
        size_t no = c.B * c.Lq * c.Do, na = c.B * c.h * c.Lq * c.Lk;
        double *want = malloc(no * sizeof *want), *wa = malloc(na * sizeof *wa);
        ref_forward(&c, &a, want, wa);
        double e = fmax(normwise(out->data, want, no), normwise(A->data, wa, na));
        cr_assert_leq(e, 1e-12, "seed %lu case %d: differs by %.1e\n%s", seed,
                      t, e, cmd);
        worst = fmax(worst, e);
        free(want);
        free(wa);
        FREE_ALL(out, A);
        run_free(&res);
        free_arrays(&a);
    }
    gsl_rng_free(r);
    cr_log_info("%d cases, seed %lu: largest relative error %.1e", cases, seed, worst);
}

/* --- mha: the options' refusals --------------------------------------- */

static void put_inputs(void)
{
    gsl_rng *r = mha_rng_new(3);
    put_normal("x.npy", SHAPE(1, 4, 4), r, 1);
    put_normal("w.npy", SHAPE(4, 4), r, 0.5);
    put_normal("s.npy", SHAPE(3), r, 1);
    gsl_rng_free(r);
}

#define BASE "forward|--heads|2|--queries|x.npy|--wq|w.npy|--wk|w.npy|" \
             "--wv|w.npy|--wo|w.npy|--out|o.npy"

Test(window, mha_refuses_bad_options, .init = enter_scratch,
     .fini = leave_scratch)
{
    static const refusal cases[] = {
        {BASE "|--alibi",
         "mha forward: --alibi needs --causal or --window (its bias -m_h "
         "(i' - j) counts the distance to earlier keys)"},
        {BASE "|--keep-first|2",
         "mha forward: --keep-first '2' needs --window (without one every "
         "earlier key is seen)"},
        {BASE "|--window|0",
         "mha forward: --window '0' is zero (expected 1 "
         "to 1000000)"},
        {BASE "|--sinks|s.npy",
         "mha forward: --sinks s.npy has shape (3,) but --heads 2 needs "
         "(2,): one sink logit per head"},
        {BASE "|--window|2|--add-zero-attn",
         "mha forward: --window, --alibi and --sinks do not combine with "
         "PyTorch's options (--attn-mask and the others)"},
        {BASE "|--window|1|--valid-lens|1",
         "mha forward: multihead: window: query 1 of example 0 sees no key "
         "(valid_len 1, Lq 4, Lk 4, window 1: query i sees key j only when "
         "i + Lk - Lq - 1 < j <= i + Lk - Lq)"},
        {"trace|--window|2|--queries|5|--kv|3",
         "mha trace: --window with --queries 5 > --kv 3: query 0 would see "
         "no key (query i sees key j only when j <= i + Lk - Lq)"},
        {"trace|--window|2|--quiz",
         "mha trace: --quiz asks the module without --window, --alibi or "
         "--sinks; leave them out"},
    };
    put_inputs();
    mha_refuses_each(cases, sizeof cases / sizeof cases[0]);
}

Test(window, mha_trace_and_the_sum_below_one, .init = enter_scratch,
     .fini = leave_scratch)
{
    run res = mha("trace|--batch|1|--queries|3|--kv|5|--hiddens|8|--heads|4|"
                  "--kv-heads|2|--window|2|--alibi|--sinks");
    cr_assert_eq(res.status, 0, "%s", res.err);
    cr_assert_not_null(strstr(res.out, "window 2, alibi, sinks, "), "%s",
                       res.out);
    cr_assert_not_null(strstr(res.out, "multihead(h=4, G=2, window 2, alibi, "
                                       "sinks)"), "%s", res.out);
    cr_assert_not_null(strstr(res.out, "window_attend(window 2, alibi, sinks, "
                                       "lens (4, 3)) new   (4, 3, 2), (2, 5, 2), "
                                       "(2, 5, 2) -> (4, 3, 2)"),
                       "%s", res.out);
    run_free(&res);
    // with a sink, each row of A sums to less than 1
    put_inputs();
    save("s2.npy", SHAPE(2), (double[]){0.5, -1});
    res = mha(BASE "|--window|3|--sinks|s2.npy|--attention-out|a.npy");
    cr_assert_eq(res.status, 0, "%s", res.err);
    tensor *A;
    OK(npy_read("a.npy", &A));
    for (size_t i = 0; i < 2 * 4; i++) {
        double sum = 0;
        for (size_t j = 0; j < 4; j++)
            sum += A->data[i * 4 + j];
        cr_assert_lt(sum, 1.0, "row %zu sums to %.17g", i, sum);
        cr_assert_gt(sum, 0.0);
    }
    tensor_free(A);
    run_free(&res);
}
//<
//<
