//> 12
/* flash.c: online softmax and tiled attention; see flash.h.
 *
 * Shapes: queries (B, Lq, d), keys (B, Lk, d), values (B, Lk, dv),
 * out (B, Lq, dv), contiguous (made here).  Per thread:
 *   s (tile_q, tile_k)  the scores of one tile, then their exps
 *   m, l (tile_q,)      running max and sum per query row
 *   see (tile_q,)       how many keys each query row sees (its valid
 *                       length; -Lk for a row of valid length 0, which
 *                       sees every key alike)
 */
#include "nn/flash.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "base/threads.h"
#include "nn/qkv.h"
#include "nn/softmax.h"
//> 19
#include "nn/window.h"
//<
#include "tensor/matrices.h"
#include "tensor/rowops.h"
#include "tensor/tensor_trace.h"

/* --- online softmax ------------------------------------------------- */

void online_softmax_init(online_softmax *s)
{
    s->max = -INFINITY;
    s->sum = 0.0;
}

double online_softmax_update(online_softmax *s, const double *x, size_t n)
{
    double m = s->max;
    for (size_t j = 0; j < n; j++)
        m = x[j] > m ? x[j] : m;
    // every earlier exp(x_j - old max) becomes exp(x_j - m) by one factor
    double alpha = exp(s->max - m);
    double sum = 0.0;
    for (size_t j = 0; j < n; j++)
        sum += exp(x[j] - m);
    s->sum = alpha * s->sum + sum;
    s->max = m;
    return alpha;
}

/* --- tiled attention ------------------------------------------------ */

typedef struct {
    tensor_matrices q, k, v;
    const tensor *valid_lens;
    size_t Lq, Lk, d, dv, tq, tk;
    double scale;
    tensor *out;
//> 19
    const window_rule *rule; /* a window, alibi or sinks, or NULL */
    size_t heads, group;     /* h, h/G: row b of q is head b % h, and
                                reads key-value batch row (b/h)*G + ... */
    long q0;                 /* the position of query 0 */
//<
} flash_job;

//> 19
/* One tile of row `row` under the rule (window.h): the scores s (kn,)
 * of keys k0 .. k0 + kn - 1, the first `valid` of them within the row's
 * length, become a_j (scaled, less the ALiBi bias) for the keys the rule
 * shows, then exp(a_j - m') (0.0 for the others); m, l and the row's
 * output o (dv,) are carried over as the online softmax does. */
static void rule_tile(const flash_job *j, size_t head, size_t row, size_t k0,
                      size_t kn, size_t valid, double *s, double *m,
                      double *l, double *o)
{
    const window_rule *r = j->rule;
    long qpos = j->q0 + (long)row;
    double slope = r->slopes ? r->slopes[head] : 0.0, tile_max = -INFINITY;
    for (size_t t = 0; t < kn; t++) {
        long key = (long)(k0 + t);
        if (t >= valid || !window_sees(r, qpos, key)) {
            s[t] = -INFINITY;
            continue;
        }
        s[t] = j->scale * s[t] - slope * (double)(qpos - key);
        tile_max = s[t] > tile_max ? s[t] : tile_max;
    }
    if (tile_max == -INFINITY) { // nothing seen here: adds exactly nothing
        rowops_fill(s, kn, 0.0);
        return;
    }
    double m_new = *m > tile_max ? *m : tile_max;
    double alpha = exp(*m - m_new), sum = 0.0;
    for (size_t t = 0; t < kn; t++) {
        s[t] = s[t] == -INFINITY ? 0.0 : exp(s[t] - m_new);
        sum += s[t];
    }
    *l = alpha * *l + sum;
    if (alpha != 1.0)
        rowops_scale(o, j->dv, alpha);
    *m = m_new;
}
//<

/* Query rows r0 .. r0 + n - 1 of example b, every key tile.  s, m, l, see
 * are this thread's scratch.  Row r sees keys 0 .. see[r] - 1 (its valid
 * length; a row of valid length 0 sees every key at one equal score,
 * softmax.h's uniform row); keys after them are never part of its sums,
 * and a tile no row sees is skipped whole: a causal mask does about half
 * the work. */
static int flash_block(const flash_job *j, size_t b, size_t r0, size_t n,
                       double *s, double *m, double *l, double *see)
{
    size_t Lk = j->Lk, dv = j->dv, tk = j->tk;
    double *o = j->out->data + (b * j->Lq + r0) * dv; // (n, dv), contiguous
    gsl_matrix_view o_m = gsl_matrix_view_array(o, n, dv);
    gsl_matrix_const_view q_m = TENSOR_MATRIX_ROWS(j->q, b, 0, r0, n);
    double last_seen = 0.0; // the most keys any row of the block sees
//> 19
    size_t kb = b; // the batch row of the keys and values
    size_t head = 0; // with a rule: this row's head, and its sink
    if (j->rule) {
        head = b % j->heads;
        kb = (b / j->heads) * (j->heads / j->group) + head / j->group;
    }
//<
    for (size_t r = 0; r < n; r++) {
        m[r] = -INFINITY;
        l[r] = 0.0;
//> 19
        if (j->rule && j->rule->sinks) { // the sink's term, exp(s - s)
            m[r] = j->rule->sinks[head];
            l[r] = 1.0;
        }
//<
        size_t len = softmax_valid_len(j->valid_lens, b, r0 + r, Lk);
        see[r] = len ? (double)len : -(double)Lk; // negative: uniform row
        last_seen = fabs(see[r]) > last_seen ? fabs(see[r]) : last_seen;
    }
    for (size_t k0 = 0; (double)k0 < last_seen; k0 += tk) {
        size_t kn = Lk - k0 < tk ? Lk - k0 : tk;
        // pass 1: S = Q_rows K_tile^T, (n, kn)
/*< 19
        gsl_matrix_const_view k_m = TENSOR_MATRIX_ROWS(j->k, b, 0, k0, kn);
*/
//> 19
        gsl_matrix_const_view k_m = TENSOR_MATRIX_ROWS(j->k, kb, 0, k0, kn);
//<
        gsl_matrix_view s_m = gsl_matrix_view_array(s, n, kn);
        int status = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &q_m.matrix,
                                    &k_m.matrix, 0.0, &s_m.matrix);
        if (status)
            return status;
        // pass 2: per row, the new max, the tile's exps over the keys it
        // sees (0 for the rest), rescaled l and o
        for (size_t r = 0; r < n; r++) {
            double *s_r = s + r * kn, len = fabs(see[r]);
            size_t valid = len <= (double)k0 ? 0
                           : len - (double)k0 >= (double)kn
                               ? kn
                               : (size_t)(len - (double)k0);
            if (valid == 0) {
                rowops_fill(s_r, kn, 0.0); // adds exactly nothing
                continue;
            }
//> 19
            if (j->rule) {
                rule_tile(j, head, r0 + r, k0, kn, valid, s_r, &m[r], &l[r],
                          o + r * dv);
                continue;
            }
//<
            if (see[r] < 0)
                rowops_fill(s_r, kn, 0.0); // the uniform row: equal scores
            double tile_max = j->scale * rowops_max(s_r, valid);
            double m_new = m[r] > tile_max ? m[r] : tile_max;
            double alpha = exp(m[r] - m_new); // 0 on the first tile
            double sum = rowops_exp_shifted(s_r, valid, j->scale, m_new, s_r);
            rowops_fill(s_r + valid, kn - valid, 0.0);
            l[r] = alpha * l[r] + sum;
            if (alpha != 1.0)
                rowops_scale(o + r * dv, dv, alpha);
            m[r] = m_new;
        }
        // pass 3: O += P V_tile
/*< 19
        gsl_matrix_const_view v_m = TENSOR_MATRIX_ROWS(j->v, b, 0, k0, kn);
*/
//> 19
        gsl_matrix_const_view v_m = TENSOR_MATRIX_ROWS(j->v, kb, 0, k0, kn);
//<
        status = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &s_m.matrix,
                                &v_m.matrix, 1.0, &o_m.matrix);
        if (status)
            return status;
    }
    // pass 4: the softmax's denominator, once per output row
    for (size_t r = 0; r < n; r++)
        rowops_divide(o + r * dv, dv, l[r]);
    return GSL_SUCCESS;
}

static void trace_flash(const flash_job *j, const tensor *q, const tensor *k,
                        const tensor *v, const tensor *valid_lens)
{
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, j->out,
               TRACE_INPUTS(TRACE_IN(q), TRACE_IN(k), TRACE_IN(v)),
               "flash_attention(tiles %zux%zu%s%T)", j->tq, j->tk,
               valid_lens ? ", valid_lens " : "", valid_lens);
}

static void set_name(tensor *t, size_t d, const tensor *from, size_t fd,
                     const char *lesson)
{
    snprintf(t->names[d], TENSOR_NAME_MAX, "%s",
             from->names[fd][0] ? from->names[fd] : lesson);
}

static int flash_run(flash_job *jp, const tensor *queries, const tensor *keys,
                     const tensor *values, const tensor *valid_lens,
                     size_t tile_q, size_t tile_k, tensor **out);

int flash_attention_forward(const tensor *queries, const tensor *keys,
                            const tensor *values, const tensor *valid_lens,
                            size_t tile_q, size_t tile_k, tensor **out)
{
    const char *who = "flash_attention_forward";
    *out = NULL;
    qkv_shapes shapes;
    int status = GSL_SUCCESS;
    STEP(qkv_check(who, &qkv_lesson_names, queries, keys, values, 1, NULL,
                   &shapes));
    STEP(softmax_check_valid_lens(who, shapes.qk, queries->shape[0],
                                  queries->shape[1], keys->shape[1],
                                  valid_lens));
    flash_job j = {.valid_lens = valid_lens};
    STEP(flash_run(&j, queries, keys, values, valid_lens, tile_q, tile_k, out));
done:
    return status;
}

/* The tiles of job j (valid_lens and, with chapter 19, the rule set). */
static int flash_run(flash_job *jp, const tensor *queries, const tensor *keys,
                     const tensor *values, const tensor *valid_lens,
                     size_t tile_q, size_t tile_k, tensor **out)
{
    const char *who = "flash_attention_forward";
    int status = GSL_SUCCESS;
    flash_job j = *jp;
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t dv = values->shape[2];
    j.Lq = Lq;
    j.Lk = keys->shape[1];
    j.d = queries->shape[2];
    j.dv = dv;
    j.tq = tile_q ? tile_q : FLASH_TILE_Q;
    j.tk = tile_k ? tile_k : FLASH_TILE_K;
    j.tq = j.tq < j.Lq ? j.tq : j.Lq;
    j.tk = j.tk < j.Lk ? j.tk : j.Lk;
    j.scale = 1.0 / sqrt((double)j.d);

    size_t blocks = (j.Lq + j.tq - 1) / j.tq, items = B * blocks;
    // scratch per thread: s (tq, tk), then m, l, see (tq,) each
    size_t per_thread, total;
    if (mha_mul_size(j.tq, j.tk + 3, &per_thread, who))
        return GSL_EOVRFLW;
    int nthreads = threads_for(items, per_thread * sizeof(double));
    int parallel = nthreads > 1;
    if (mha_mul_size(per_thread, (size_t)nthreads, &total, who))
        return GSL_EOVRFLW;
    double *scratch = NULL;
    STEP(tensor_as_matrices(queries, "queries", &j.q));
    STEP(tensor_as_matrices(keys, "keys", &j.k));
    STEP(tensor_as_matrices(values, "values", &j.v));
    // out is (B, Lq, dv), zero: the running sums start there
    STEP(tensor_alloc(SHAPE(B, Lq, dv), &j.out));
    scratch = mha_malloc(total, sizeof(double), who);
    STEP(scratch ? GSL_SUCCESS : GSL_ENOMEM);
    set_name(j.out, 0, queries, 0, NAMES(B));
    set_name(j.out, 1, queries, 1, NAMES(Lq));
    set_name(j.out, 2, values, 2, NAMES(dv));
    int failed = 0;
    int blas_threads = threads_blas_single(parallel);
#pragma omp parallel for schedule(dynamic) num_threads(nthreads) \
    reduction(| : failed) if (parallel)
    for (size_t item = 0; item < items; item++) {
        size_t b = item / blocks, r0 = (item % blocks) * j.tq;
        size_t n = j.Lq - r0 < j.tq ? j.Lq - r0 : j.tq;
        double *s = scratch + (size_t)threads_index() * per_thread;
        double *m = s + j.tq * j.tk;
        failed |= flash_block(&j, b, r0, n, s, m, m + j.tq,
                              m + 2 * j.tq) != GSL_SUCCESS;
    }
    threads_blas_restore(blas_threads);
    if (failed)
        STEP(mha_fail(GSL_EFAILED, "%s: gsl_blas_dgemm failed", who));
    /* NaN or inf in the inputs pass through (IEEE arithmetic, as in
     * attention.h); from finite inputs they mean a score overflowed */
    if (tensor_check_result(j.out, who, "attention", "out")) {
        if (!tensor_check_finite(queries, who, "queries") &&
            !tensor_check_finite(keys, who, "keys") &&
            !tensor_check_finite(values, who, "values"))
            STEP(tensor_check_result(j.out, who, "attention", "out"));
        else
            mha_clear_error();
    }
    trace_flash(&j, queries, keys, values, valid_lens);
done:
    free(scratch);
    tensor_matrices_free(&j.q);
    tensor_matrices_free(&j.k);
    tensor_matrices_free(&j.v);
    if (status) {
        tensor_free(j.out);
        return status;
    }
    *out = j.out;
    return GSL_SUCCESS;
}
//> 19
int flash_attention_forward_window(const tensor *queries, const tensor *keys,
                                   const tensor *values,
                                   const tensor *valid_lens,
                                   const window_rule *r, size_t h, long q0,
                                   size_t tile_q, size_t tile_k, tensor **out)
{
    *out = NULL;
    size_t BH = queries->shape[0], BG = keys->shape[0];
    if (h == 0 || BH % h || BG % (BH / h) || h % (BG / (BH / h)))
        return mha_fail(GSL_EBADLEN,
                        "flash_attention_forward_window: queries of %zu heads "
                        "and keys of %zu do not fit h %zu",
                        BH, BG, h);
    flash_job j = {.valid_lens = valid_lens, .rule = r, .heads = h,
                   .group = h / (BG / (BH / h)), .q0 = q0};
    return flash_run(&j, queries, keys, values, valid_lens, tile_q, tile_k,
                     out);
}
//<
//<
