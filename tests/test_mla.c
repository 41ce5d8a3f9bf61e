//> 20
/* test_mla.c: multi-head latent attention against plain loops written
 * here from its formulas (the per-head keys and values made explicitly,
 * RoPE as a complex product for each pair, RMSNorm the library's, which
 * its exercise's tests check), both paths, decoding through the latent
 * cache against the forward row by row, the weights, the trace of each
 * path, and the errors.  tools/mla_parity.py holds the same module to a
 * PyTorch reference written after the published model.
 *
 * Shapes: x (B, n, d_model); out (B, n, d_model); weights (B, h, n, n). */
#include "check.h"

#include <complex.h>

#include <criterion/parameterized.h>

/* y (out,) = W x, W (out, in) contiguous. */
static void loop_matvec(const tensor *w, const double *x, double *y)
{
    size_t out = w->shape[0], in = w->shape[1];
    for (size_t o = 0; o < out; o++) {
        double s = 0;
        for (size_t j = 0; j < in; j++)
            s += w->data[o * in + j] * x[j];
        y[o] = s;
    }
}

/* x (d,) in place: RMSNorm with weight w, by the library's mla_rms_norm,
 * which ex_mla_rms_norm holds to values computed outside it (the handout
 * has this file: no formula of an exercise is written here). */
static void loop_rms(double *x, size_t d, const tensor *w, double eps)
{
    tensor *row, *y;
    OK(tensor_from_array(SHAPE(1, d), x, &row));
    OK(mla_rms_norm(row, w, eps, &y));
    memcpy(x, y->data, d * sizeof *x);
    FREE_ALL(row, y);
}

/* Pairs (2k, 2k+1) of x (d,) turned by pos * base^(-2k/d): the pair as
 * the complex number x[2k] + i x[2k+1], times e^(i a). */
static void loop_rope(double *x, size_t d, size_t pos, double base)
{
    for (size_t k = 0; k < d / 2; k++) {
        double a = (double)pos * pow(base, -2.0 * (double)k / (double)d);
        double complex z = (x[2 * k] + x[2 * k + 1] * I) * cexp(I * a);
        x[2 * k] = creal(z);
        x[2 * k + 1] = cimag(z);
    }
}

/* The module from its formulas: query i of head j, (q_nope, q_pe), meets
 * key t of head j, (W_UK_j c_t, k_pe_t), causally; out is the values
 * W_UV_j c_t weighted, the heads joined, times wo.  out (B, n, d_model),
 * weights (B, h, n, n). */
static void loop_mla(const mla *m, const tensor *x, double *out,
                     double *weights)
{
    const mla_config *c = &m->cfg;
    size_t B = x->shape[0], n = x->shape[1], D = c->dim, h = c->num_heads;
    size_t dn = c->qk_nope_head_dim, dr = c->qk_rope_head_dim;
    size_t dv = c->v_head_dim, dc = c->kv_lora_rank, dq = dn + dr;
    size_t ql = c->q_lora_rank;
    double *q = calloc(n * h * dq, sizeof *q), *ct = calloc(n * (dc + dr), sizeof *ct);
    double *K = calloc(n * h * dq, sizeof *K), *V = calloc(n * h * dv, sizeof *V);
    double *kv = calloc(h * (dn + dv), sizeof *kv), *low = calloc(ql + 1, sizeof *low);
    double *cat = calloc(h * dv, sizeof *cat), *s = calloc(n, sizeof *s);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < n; i++) {
            const double *xi = x->data + (b * n + i) * D;
            double *qi = q + i * h * dq, *ci = ct + i * (dc + dr);
            if (ql) {
                loop_matvec(m->wq_a.weight, xi, low);
                loop_rms(low, ql, m->q_norm, c->eps);
                loop_matvec(m->wq_b.weight, low, qi);
            } else {
                loop_matvec(m->wq.weight, xi, qi);
            }
            for (size_t j = 0; j < h; j++)
                loop_rope(qi + j * dq + dn, dr, i, c->rope_base);
            loop_matvec(m->wkv_a.weight, xi, ci);
            loop_rms(ci, dc, m->kv_norm, c->eps);
            loop_rope(ci + dc, dr, i, c->rope_base);
            loop_matvec(m->wkv_b.weight, ci, kv); // (h*(dn+dv),) from c_t
            for (size_t j = 0; j < h; j++) {
                for (size_t e = 0; e < dn; e++)
                    K[(i * h + j) * dq + e] = kv[j * (dn + dv) + e];
                for (size_t e = 0; e < dr; e++)
                    K[(i * h + j) * dq + dn + e] = ci[dc + e];
                for (size_t e = 0; e < dv; e++)
                    V[(i * h + j) * dv + e] = kv[j * (dn + dv) + dn + e];
            }
        }
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < h; j++) {
                double mx = -INFINITY, sum = 0;
                for (size_t t = 0; t <= i; t++) {
                    double dot = 0;
                    for (size_t e = 0; e < dq; e++)
                        dot += q[(i * h + j) * dq + e] * K[(t * h + j) * dq + e];
                    s[t] = dot / sqrt((double)dq);
                    mx = fmax(mx, s[t]);
                }
                for (size_t t = 0; t <= i; t++)
                    sum += s[t] = exp(s[t] - mx);
                for (size_t e = 0; e < dv; e++)
                    cat[j * dv + e] = 0;
                for (size_t t = 0; t < n; t++) {
                    double w = t <= i ? s[t] / sum : 0;
                    weights[((b * h + j) * n + i) * n + t] = w;
                    for (size_t e = 0; e < dv; e++)
                        cat[j * dv + e] += w * V[(t * h + j) * dv + e];
                }
            }
            loop_matvec(m->wo.weight, cat, out + (b * n + i) * D);
        }
    }
    free(q), free(ct), free(K), free(V), free(kv), free(low), free(cat), free(s);
}

typedef struct mla_case {
    size_t B, n, dim, h, q_lora, dc, dn, dr, dv;
} mla_case;

static mla_case cases[] = {
    {1, 1, 4, 1, 0, 3, 2, 2, 2},   {2, 5, 8, 2, 6, 4, 3, 4, 5},
    {3, 4, 6, 4, 0, 2, 1, 2, 3},   {1, 7, 16, 3, 12, 10, 4, 6, 4},
    {2, 6, 5, 2, 3, 16, 2, 2, 1},
};

/* The case's module, its weights drawn from a generator seeded with
 * `seed`, and its input x (B, n, dim) of normal draws after them. */
static tensor *make_module(const mla_case *k, mla *m, unsigned long seed)
{
    mla_config cfg = {.dim = k->dim, .num_heads = k->h, .q_lora_rank = k->q_lora,
                      .kv_lora_rank = k->dc, .qk_nope_head_dim = k->dn,
                      .qk_rope_head_dim = k->dr, .v_head_dim = k->dv};
    OK(mla_init(m, &cfg));
    gsl_rng *r = rng_for_test(seed);
    mla_reset(m, r);
    tensor *x = normal_tensor(SHAPE(k->B, k->n, k->dim), r, 1);
    gsl_rng_free(r);
    return x;
}

ParameterizedTestParameters(mla, both_paths_equal_the_loops)
{
    return cr_make_param_array(mla_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(mla_case *k, mla, both_paths_equal_the_loops)
{
    mla m;
    tensor *x = make_module(k, &m, 20 + k->n);
    size_t B = k->B, n = k->n, D = k->dim, h = k->h;
    double *want = malloc(B * n * D * sizeof *want);
    double *ww = malloc(B * h * n * n * sizeof *ww);
    loop_mla(&m, x, want, ww);
    mla_path paths[] = {MLA_NAIVE, MLA_ABSORBED};
    for (int p = 0; p < 2; p++) {
        tensor *y, *w, *y2;
        OK(mla_forward(&m, x, paths[p], &y, &w));
        cr_assert_eq(y->ndim, 3);
        cr_assert(y->shape[0] == B && y->shape[1] == n && y->shape[2] == D);
        for (size_t e = 0; e < B * n * D; e++)
            cr_assert(fabs(y->data[e] - want[e]) < 1e-12,
                      "path %d, element %zu: %.17g, loops %.17g", p, e,
                      y->data[e], want[e]);
        cr_assert(w->shape[0] == B && w->shape[1] == h &&
                  w->shape[2] == n && w->shape[3] == n);
        for (size_t e = 0; e < B * h * n * n; e++)
            cr_assert(fabs(w->data[e] - ww[e]) < 1e-12,
                      "path %d, weight %zu: %.17g, loops %.17g", p, e,
                      w->data[e], ww[e]);
        // weights not wanted: the same output, to the bit
        OK(mla_forward(&m, x, paths[p], &y2, NULL));
        cr_assert_eq(rel_error(y2, y), 0.0);
        tensor_free(y);
        tensor_free(y2);
        tensor_free(w);
    }
    free(want);
    free(ww);
    tensor_free(x);
    mla_free(&m);
}

/* Decoding x in pieces of `sizes` (summing to n) through a latent cache
 * gives the forward's rows, by either path, and weights (B, h, len, t). */
static void decode_in_pieces(const mla_case *k, const size_t *sizes,
                             size_t count, mla_path path)
{
    mla m;
    tensor *x = make_module(k, &m, 7);
    tensor *full, *full_w; // (B, n, d_model), (B, h, n, n)
    OK(mla_forward(&m, x, MLA_NAIVE, &full, &full_w));
    mla_cache c;
    OK(mla_cache_init(&c, k->B, k->dc, k->dr, k->n));
    size_t at = 0;
    for (size_t s = 0; s < count; s++) {
        tensor *piece, *y, *w;
        OK(tensor_narrow(x, 1, at, sizes[s], &piece));
        OK(mla_decode_step(&m, &c, piece, path, &y, &w));
        cr_assert_eq(c.length, at + sizes[s]);
        cr_assert_eq(w->shape[2], sizes[s]);
        cr_assert_eq(w->shape[3], at + sizes[s]);
        // the forward's rows at .. at+len-1, their first t columns
        for (size_t e = 0; e < tensor_numel(w); e++) {
            size_t t = at + sizes[s], j = e % t, i = e / t % sizes[s];
            size_t bh = e / (t * sizes[s]);
            double want = full_w->data[(bh * k->n + at + i) * k->n + j];
            cr_assert(fabs(w->data[e] - want) < 1e-12,
                      "path %d, weight %zu: %.17g, forward %.17g", (int)path,
                      e, w->data[e], want);
        }
        tensor_free(w);
        for (size_t b = 0; b < k->B; b++)
            for (size_t i = 0; i < sizes[s]; i++)
                for (size_t f = 0; f < k->dim; f++) {
                    double got = *TENSOR_AT(y, b, i, f);
                    double want = *TENSOR_AT(full, b, at + i, f);
                    cr_assert(fabs(got - want) < 1e-12,
                              "path %d, position %zu, feature %zu: %.17g, "
                              "forward %.17g", (int)path, at + i, f, got, want);
                }
        FREE_ALL(piece, y);
        at += sizes[s];
    }
    mla_cache_free(&c);
    FREE_ALL(full, full_w, x);
    mla_free(&m);
}

Test(mla, decoding_one_position_a_step_equals_the_forward)
{
    mla_case k = cases[3];
    size_t ones[7] = {1, 1, 1, 1, 1, 1, 1};
    decode_in_pieces(&k, ones, 7, MLA_ABSORBED);
    decode_in_pieces(&k, ones, 7, MLA_NAIVE);
}

Test(mla, a_prefill_then_steps_equals_the_forward)
{
    mla_case k = cases[1];
    decode_in_pieces(&k, (size_t[]){3, 1, 1}, 3, MLA_ABSORBED);
    decode_in_pieces(&k, (size_t[]){2, 2, 1}, 3, MLA_NAIVE);
}

Test(mla, the_cache_holds_the_normed_latent_and_the_turned_key)
{
    mla_case k = cases[1];
    mla m;
    tensor *x = make_module(&k, &m, 3), *y;
    mla_cache c;
    OK(mla_cache_init(&c, k.B, k.dc, k.dr, k.n));
    OK(mla_decode_step(&m, &c, x, MLA_ABSORBED, &y, NULL));
    // position 3 of example 1, from the loops' steps
    const double *x13 = x->data + (1 * k.n + 3) * k.dim;
    double ckv[32];
    loop_matvec(m.wkv_a.weight, x13, ckv);
    loop_rms(ckv, k.dc, m.kv_norm, m.cfg.eps);
    loop_rope(ckv + k.dc, k.dr, 3, m.cfg.rope_base);
    for (size_t e = 0; e < k.dc; e++)
        cr_assert(fabs(*TENSOR_AT(c.latent, 1, 3, e) - ckv[e]) < 1e-14);
    for (size_t e = 0; e < k.dr; e++)
        cr_assert(fabs(*TENSOR_AT(c.pe, 1, 3, e) - ckv[k.dc + e]) < 1e-14);
    FREE_ALL(y, x);
    mla_cache_free(&c);
    mla_free(&m);
}

/* Each allocation of a forward pass and of a decoding step failed in
 * turn, on both paths, while a log listens: GSL_ENOMEM, the outputs NULL,
 * the cache's length as it was, the trace listening again at depth 0;
 * nothing leaked (valgrind and ASan check that). */
Test(mla, allocation_failures_leave_the_trace_listening)
{
    mla_case k = cases[1];
    mla m;
    tensor *x = make_module(&k, &m, 5), *y, *w;
    trace_log log;
    trace_log_start(&log);
    int failures;
    for (int p = 0; p < 2; p++) {
        mla_path path = p ? MLA_ABSORBED : MLA_NAIVE;
        EACH_ALLOCATION_FAILS(failures, mla_forward(&m, x, path, &y, &w),
            cr_assert_null(y);
            cr_assert_null(w);
            assert_trace_listens(&log));
        cr_assert_gt(failures, 10);
        FREE_ALL(y, w);
        mla_cache c;
        OK(mla_cache_init(&c, k.B, k.dc, k.dr, 2 * k.n));
        OK(mla_decode_step(&m, &c, x, path, &y, NULL));
        tensor_free(y);
        EACH_ALLOCATION_FAILS(failures,
            mla_decode_step(&m, &c, x, path, &y, &w),
            cr_assert_null(y);
            cr_assert_null(w);
            cr_assert_eq(c.length, k.n);
            assert_trace_listens(&log));
        cr_assert_gt(failures, 10);
        cr_assert_eq(c.length, 2 * k.n);
        FREE_ALL(y, w);
        mla_cache_free(&c);
    }
    trace_log_stop(&log);
    trace_log_free(&log);
    tensor_free(x);
    mla_free(&m);
}

Test(mla, rms_norm_values)
{
    // rows (3, 4) and (0, 0): mean squares 12.5 and 0
    tensor *x, *w, *y;
    OK(tensor_from_array(SHAPE(2, 2), (double[]){3, 4, 0, 0}, &x));
    OK(tensor_from_array(SHAPE(2), (double[]){1, 2}, &w));
    OK(mla_rms_norm(x, w, 1e-6, &y));
    double r = sqrt(12.5 + 1e-6);
    cr_assert(fabs(y->data[0] - 3 / r) < 1e-15);
    cr_assert(fabs(y->data[1] - 8 / r) < 1e-15);
    cr_assert(y->data[2] == 0 && y->data[3] == 0);
    FREE_ALL(y, x, w);
}

Test(mla, refuses_bad_configurations)
{
    static const struct {
        size_t kv_lora_rank, qk_rope_head_dim;
        double eps;
        const char *message; /* every one GSL_EINVAL */
    } refused[] = {
        {4, 3, 0,
         "mla_init: qk_rope_head_dim 3 must be even (RoPE turns pairs of "
         "features)"},
        {0, 2, 0,
         "mla_init: dim 8, num_heads 2, kv_lora_rank 0, qk_nope_head_dim 2, "
         "qk_rope_head_dim 2 and v_head_dim 2 must all be >= 1"},
        {4, 2, -1,
         "mla_init: rope_base 0 must be 0 (the default) or a finite number "
         "> 1, and eps -1 0 (the default) or a finite number > 0"},
    };
    mla m;
    mla_config cfg = {.dim = 8, .num_heads = 2, .qk_nope_head_dim = 2,
                      .v_head_dim = 2};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cfg.kv_lora_rank = refused[i].kv_lora_rank;
        cfg.qk_rope_head_dim = refused[i].qk_rope_head_dim;
        cfg.eps = refused[i].eps;
        FAILS(mla_init(&m, &cfg), GSL_EINVAL, refused[i].message);
    }
    cfg.eps = 0;
    OK(mla_init(&m, &cfg));
    cr_assert(m.cfg.eps == MLA_DEFAULT_EPS && m.cfg.rope_base == ROPE_DEFAULT_BASE);
    mla_free(&m);
}

Test(mla, refuses_bad_inputs_and_leaves_the_cache)
{
    mla_case k = cases[1]; // B 2, n 5, dim 8, d_c 4, d_r 4
    mla m;
    tensor *x = make_module(&k, &m, 5), *y = NULL, *bad;
    OK(tensor_alloc(SHAPE(2, 5, 7), &bad));
    tensor_fill(bad, 0);
    FAILS(mla_forward(&m, bad, MLA_NAIVE, &y, NULL), GSL_EBADLEN,
          "mla_forward: x has shape (2, 5, 7), expected (B, n, d_model) with "
          "d_model = dim 8");
    cr_assert_null(y);
    mla_cache c;
    OK(mla_cache_init(&c, 2, 4, 4, 6));
    tensor *first;
    OK(tensor_narrow(x, 1, 0, 2, &first));
    OK(mla_decode_step(&m, &c, first, MLA_ABSORBED, &y, NULL));
    tensor_free(y);
    FAILS(mla_decode_step(&m, &c, x, MLA_ABSORBED, &y, NULL), GSL_EBADLEN,
          "mla_decode_step: the cache is full: capacity 6, length 2, and x "
          "(2, 5, 8) brings 5 new positions");
    cr_assert_null(y);
    cr_assert_eq(c.length, 2);
    mla_cache other;
    OK(mla_cache_init(&other, 2, 3, 4, 6));
    FAILS(mla_decode_step(&m, &other, first, MLA_NAIVE, &y, NULL), GSL_EBADLEN,
          "mla_decode_step: the cache holds B 2, d_c 3, d_r 4 but x (2, 2, 8) "
          "and the module need B 2, d_c 4, d_r 4");
    cr_assert_eq(other.length, 0);
    mla_cache_free(&other);
    FAILS(mla_cache_init(&other, 2, 3, 0, 6), GSL_EINVAL,
          "mla_cache_init: batch 2, kv_lora_rank 3, rope_dim 0 and capacity "
          "6 must all be >= 1");
    tensor *w3;
    OK(tensor_alloc(SHAPE(3), &w3));
    FAILS(mla_rms_norm(x, w3, 1e-6, &y), GSL_EBADLEN,
          "mla_rms_norm: weight (3,), expected (8,) for x (2, 5, 8)");
    FREE_ALL(w3, first, bad, x);
    mla_cache_free(&c);
    mla_free(&m);
}

/* The ops of the depth-1 records of a traced call, joined by " | ". */
static void top_steps(const trace_log *log, char *buf, size_t n)
{
    buf[0] = 0;
    for (size_t i = 0; i < log->count; i++) {
        const trace_record *r = &log->records[i];
        if (r->depth != 1 && !(r->depth == 2 && strstr(r->op, "absorb")))
            continue;
        size_t used = strlen(buf);
        snprintf(buf + used, n - used, "%s%s", used ? " | " : "", r->op);
    }
}

Test(mla, the_trace_of_each_path)
{
    mla_case k = cases[1];
    mla m;
    tensor *x = make_module(&k, &m, 5), *y;
    trace_log log;
    char steps[2048], shape[TRACE_SHAPE_MAX];
    trace_log_start(&log);
    OK(mla_forward(&m, x, MLA_ABSORBED, &y, NULL));
    trace_log_stop(&log);
    top_steps(&log, steps, sizeof steps);
    // the scores meet the latent: (B, h*n, t) = (2, 10, 5)
    int found = 0;
    for (size_t i = 0; i < log.count; i++)
        if (strcmp(log.records[i].op, "scores") == 0) {
            trace_shape_str(&log.records[i].output, shape, sizeof shape);
            cr_assert_str_eq(shape, "(2, 10, 5)");
            trace_shape_str(&log.records[i].inputs[1].shape, shape, sizeof shape);
            cr_assert_str_eq(shape, "(2, 5, 8)"); // [c_kv | k_pe], d_c + d_r
            found = 1;
        }
    cr_assert(found, "no scores step in %s", steps);
    cr_assert(strstr(steps, "absorb W_UK"), "%s", steps);
    trace_log_free(&log);
    tensor_free(y);
    trace_log_start(&log);
    OK(mla_forward(&m, x, MLA_NAIVE, &y, NULL));
    trace_log_stop(&log);
    found = 0;
    for (size_t i = 0; i < log.count; i++)
        if (strcmp(log.records[i].op, "scores") == 0) {
            trace_shape_str(&log.records[i].output, shape, sizeof shape);
            cr_assert_str_eq(shape, "(4, 5, 5)"); // (B*h, n, t)
            trace_shape_str(&log.records[i].inputs[1].shape, shape, sizeof shape);
            cr_assert_str_eq(shape, "(4, 5, 7)"); // d_nope + d_r
            found = 1;
        }
    cr_assert(found);
    trace_log_free(&log);
    FREE_ALL(y, x);
    mla_free(&m);
}
//<
