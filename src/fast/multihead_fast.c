//> full
/* multihead_fast.c: multi-head attention read in place; see
 * multihead_fast.h for the steps.
 *
 * Shapes: B batch, Lq queries, Lk key-value pairs, d_model = num_hiddens
 * D, h heads of p = D/h features, D_out output features.
 *   Q (B, Lq, D), K and V (B, Lk, D)  projections, contiguous
 *   qh (B, h, Lq, p), kh and vh (B, h, Lk, p)  views of Q, K, V
 *   concat (B, Lq, D), Q's buffer, oh (B, h, Lq, p) a view of it
 *   scratch per thread: s (rows, Lk) scores, then weights; sums (rows,)
 */
#include "fast/multihead_fast.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "base/threads.h"
#include "nn/softmax.h"
#include "nn/window.h"
#include "tensor/matrices.h"
#include "tensor/rowops.h"
#include "tensor/tensor_trace.h"

/* What both paths here do first: check the inputs as multihead_forward
 * does, and refuse the one thing it does that they do not, dropout in
 * training. */
static int start(multihead *m, const tensor *queries, const tensor *keys,
                 const tensor *values, const tensor *valid_lens,
                 const char *who, tensor **out)
{
    *out = NULL;
    int status = multihead_check_inputs(m, queries, keys, values, valid_lens);
    if (status)
        return status;
    if (m->attention.training && m->attention.dropout > 0.0)
        return mha_fail(GSL_EINVAL,
                        "%s: training with dropout %g is not supported here "
                        "(multihead_forward has it)",
                        who, m->attention.dropout);
    return GSL_SUCCESS;
}

/* (B, L, D) -> (B, h, L, p): two views, each traced by tensor_reshape and
 * tensor_permute.  Head (b, i) of the result is an (L, p) matrix at
 * data + b*strides[0] + i*strides[1] whose rows are strides[2] = D apart. */
static int heads_view(const tensor *x, size_t h, tensor **out)
{
    *out = NULL;
    multihead_names nm;
    multihead_head_names(x, 0, &nm);
    tensor *split = NULL;
    int status = tensor_reshape(x, DIMS((long)x->shape[0], (long)x->shape[1],
                                        (long)h, -1),
                                nm.split, &split);
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), out);
    tensor_free(split);
    return status;
}

/* The four (B, h or G, L, p) views as batches of GSL matrices
 * (matrices.h): head (b, i) is matrix (b, i) of each, read in place. */
typedef struct heads {
    tensor_matrices q, k, v, o;
} heads;

/* Query rows per block: 2 MiB of (rows, Lk) scores, and from 64 to 256
 * rows.  Each block's first product packs all of K_bi (Lk, p) for BLAS,
 * so a block of few rows spends its time packing: at Lk = 2048, blocks
 * of 16 rows (scores within a 256 KiB cache) took 1.3x as long as
 * blocks of 128 (measured on the fast path, B = 8, D = 512, h = 8). */
static size_t auto_block_rows(size_t Lq, size_t Lk)
{
    size_t rows = ((size_t)2 << 20) / sizeof(double) / (Lk ? Lk : 1);
    rows = rows < 64 ? 64 : rows > 256 ? 256 : rows;
    return rows < Lq ? rows : Lq;
}

/* The first score (in row-major order over (B, h, Lq, Lk)) that
 * overflowed, found by whichever thread meets it. */
typedef struct bad_score {
    int found;
    size_t at[4]; /* b, i, row, key */
    double value;
} bad_score;

static void note_bad_score(bad_score *bad, size_t b, size_t i, size_t r,
                           size_t j, double value)
{
#pragma omp critical(multihead_fast_bad_score)
    {
        size_t at[4] = {b, i, r, j};
        int earlier = !bad->found;
        for (size_t d = 0; d < 4 && !earlier; d++) {
            if (at[d] != bad->at[d]) {
                earlier = at[d] < bad->at[d];
                break;
            }
        }
        if (earlier) {
            bad->found = 1;
            memcpy(bad->at, at, sizeof at);
            bad->value = value;
        }
    }
}

/* One block of one head: rows r0 .. r0 + rows - 1 of head (b, i).
 *   s (rows, Lk) = Q_bi[r0:] K_bi^T, then its unnormalised softmax
 *   O_bi[r0:] (rows, p) = s V_bi, then each row divided by its sum */
static int attend_block(const heads *hm, const tensor *valid_lens,
                        const tensor *weights, const window_rule *rule,
                        size_t b, size_t i, size_t r0, size_t rows,
                        double scale, double *s, double *sums, bad_score *bad)
{
    size_t Lk = hm->k.rows, p = hm->o.cols;
    // query head i reads key-value head i / (h/G): G = h, its own
    size_t g = i / (hm->q.count[1] / hm->k.count[1]);
    gsl_matrix_const_view q_r = TENSOR_MATRIX_ROWS(hm->q, b, i, r0, rows);
    gsl_matrix_const_view k = TENSOR_MATRIX(hm->k, b, g);
    gsl_matrix_const_view v = TENSOR_MATRIX(hm->v, b, g);
    gsl_matrix_view o = TENSOR_MATRIX_OUT(hm->o, b, i);
    gsl_matrix_view o_r = gsl_matrix_submatrix(&o.matrix, r0, 0, rows, p);
    gsl_matrix_view s_r = gsl_matrix_view_array(s, rows, Lk);
    // pass 1: the scores, K read transposed by BLAS
    int status = gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &q_r.matrix,
                                &k.matrix, 0.0, &s_r.matrix);
    // pass 2, row by row: finite inputs, yet a product can overflow, so
    // first check the scores the mask keeps (one inf or NaN would turn
    // the whole row into NaN); then scale, mask, exp(s - max), row sums
    for (size_t r = 0; r < rows && !status; r++) {
        double *s_row = s + r * Lk;
        size_t len = softmax_valid_len(valid_lens, b, r0 + r, Lk);
        if (!rowops_all_finite(s_row, len)) {
            size_t j = 0;
            while (isfinite(s_row[j])) // one of the first len is not
                j++;
            note_bad_score(bad, b, i, r0 + r, j, s_row[j]);
            status = GSL_ERANGE;
            break;
        }
        // a window, alibi or sinks (window.h): query r0 + r at its position
        long qpos = (long)Lk - (long)hm->q.rows + (long)(r0 + r);
        sums[r] = rule ? window_softmax_row(rule, i, s_row, Lk, scale, qpos,
                                            NULL, len, s_row, NULL)
                       : rowops_softmax_unnormalized(s_row, Lk, scale, len,
                                                     s_row, NULL);
    }
    // the weights, when they are kept: (B, h, Lq, Lk), contiguous
    for (size_t r = 0; weights && r < rows && !status; r++) {
        double *w_r = TENSOR_AT(weights, b, i, r0 + r, 0);
        for (size_t j = 0; j < Lk; j++)
            w_r[j] = s[r * Lk + j] / sums[r];
    }
    // pass 3: the weighted values, written into concat's columns
    if (!status)
        status = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &s_r.matrix,
                                &v.matrix, 0.0, &o_r.matrix);
    // pass 4: normalise p outputs per row rather than Lk weights
    for (size_t r = 0; r < rows && !status; r++)
        rowops_divide(o_r.matrix.data + r * o_r.matrix.tda, p, sums[r]);
    return status;
}

/* Are rows r0 .. r0 + rows - 1 of head (b, i)'s output all finite?
 * Checked by the thread that wrote them, while they are in its cache,
 * rather than by one thread over all of concat afterwards. */
static int block_finite(const heads *hm, size_t b, size_t i, size_t r0,
                        size_t rows)
{
    gsl_matrix_view o = TENSOR_MATRIX_OUT(hm->o, b, i);
    int all = 1;
    for (size_t r = r0; r < r0 + rows; r++)
        all &= rowops_all_finite(o.matrix.data + r * o.matrix.tda,
                                 o.matrix.size2);
    return all;
}

/* Every head of every example: B*h*ceil(Lq/rows) independent blocks.
 * *finite: 1 when every output written is finite (0 tells the caller to
 * look for the first that is not). */
static int attend_all(const tensor *qh, const tensor *kh, const tensor *vh,
                      const tensor *oh, const tensor *valid_lens,
                      const tensor *weights, const window_rule *rule,
                      const multihead_fast_options *opt, int *finite)
{
    *finite = 0;
    size_t B = qh->shape[0], h = qh->shape[1], Lq = qh->shape[2];
    size_t Lk = kh->shape[2], p = qh->shape[3];
    size_t rows = opt->block_rows ? opt->block_rows : auto_block_rows(Lq, Lk);
    if (rows > Lq)
        rows = Lq;
    size_t blocks = (Lq + rows - 1) / rows, items = B * h * blocks;
    heads hm;
    int status = tensor_matrices_in_place(qh, &hm.q);
    if (!status)
        status = tensor_matrices_in_place(kh, &hm.k);
    if (!status)
        status = tensor_matrices_in_place(vh, &hm.v);
    if (!status)
        status = tensor_matrices_in_place(oh, &hm.o);
    if (status)
        return status;

    // scratch: per thread, s (rows, Lk) and sums (rows,)
    size_t per_thread, total;
    if (mha_mul_size(rows, Lk + 1, &per_thread, "multihead_forward_fast"))
        return GSL_EOVRFLW;
    int nthreads = opt->threading == MULTIHEAD_THREADS_HEADS
                       ? threads_for(items, per_thread * sizeof(double))
                       : 1;
    int parallel = nthreads > 1;
    if (mha_mul_size(per_thread, (size_t)nthreads, &total,
                     "multihead_forward_fast"))
        return GSL_EOVRFLW;
    // at least MHA_HUGE_BYTES, so that it comes in huge pages (error.h):
    // what is not touched costs no memory
    size_t huge = MHA_HUGE_BYTES / sizeof(double);
    double *scratch = mha_alloc_numbers(total < huge ? huge : total, 0,
                                        "multihead_forward_fast");
    if (!scratch)
        return GSL_ENOMEM;
    double scale = 1.0 / sqrt((double)p);
    int failed = 0, unfinished = 0;
    bad_score bad = {0};
    int blas_threads = threads_blas_single(parallel);
    int lent = opt->threading == MULTIHEAD_THREADS_BLAS ? threads_blas_widen()
                                                        : 0;
#pragma omp parallel for schedule(dynamic) num_threads(nthreads) \
    reduction(| : failed, unfinished) if (parallel)
    for (size_t item = 0; item < items; item++) {
        size_t bi = item / blocks, r0 = (item % blocks) * rows;
        double *s = scratch + (size_t)threads_index() * per_thread;
        size_t n = Lq - r0 < rows ? Lq - r0 : rows;
        failed |= attend_block(&hm, valid_lens, weights, rule, bi / h, bi % h,
                               r0, n, scale, s, s + rows * Lk,
                               &bad) != GSL_SUCCESS;
        unfinished |= !failed && !block_finite(&hm, bi / h, bi % h, r0, n);
    }
    *finite = !unfinished;
    threads_blas_narrow(lent);
    threads_blas_restore(blas_threads);
    free(scratch);
    if (bad.found)
        return mha_fail(GSL_ERANGE,
                        "multihead_forward_fast: the scores overflowed: "
                        "scores[%zu, %zu, %zu, %zu] = %s from finite inputs "
                        "(scores (%zu, %zu, %zu, %zu), Q K^T per head)",
                        bad.at[0], bad.at[1], bad.at[2], bad.at[3],
                        isnan(bad.value) ? "nan" : bad.value > 0 ? "inf"
                                                                 : "-inf",
                        B, h, Lq, Lk);
    if (failed)
        return mha_fail(GSL_EFAILED,
                        "multihead_forward_fast: gsl_blas_dgemm failed on a "
                        "head");
    return GSL_SUCCESS;
}

static void trace_attention(const tensor *qh, const tensor *kh,
                            const tensor *vh, const tensor *oh,
                            const tensor *valid_lens)
{
    char kv[48] = "";
    if (kh->shape[1] < qh->shape[1])
        snprintf(kv, sizeof kv, ", head i reads kv head i/%zu",
                 qh->shape[1] / kh->shape[1]);
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, oh,
               TRACE_INPUTS(TRACE_IN(qh), TRACE_IN(kh), TRACE_IN(vh)),
               "attention per head(scale 1/sqrt(%zu)%s%s%T)", qh->shape[3],
               kv, valid_lens ? ", valid_lens " : "", valid_lens);
}

/* The big buffers of a call (Q, K and V, each (B, L, D)) are kept for the
 * next call of the same shapes rather than freed: a new buffer of a MiB
 * or more comes from the kernel as fresh pages, which it must fault in
 * and zero on the first touch (malloc hands big blocks back to the kernel
 * when they are freed), and when it hands out huge pages it may first
 * compact memory to find them.  That cost 2-10% of a forward pass
 * (L = 64-2048, B = 8, D = 512), and at times as long again as the pass
 * itself (L = 128).  One spare per slot, taken and put back with an
 * atomic exchange, so that calls from several threads each get a buffer
 * of their own; smaller buffers, meta tensors and calls while a trace is
 * recorded (which numbers every tensor) go the plain way.
 * multihead_fast_release frees the spares. */
enum { SPARE_Q, SPARE_K, SPARE_V, SPARES };
#define SPARE_MIN_BYTES ((size_t)1 << 20)
static tensor *spares[SPARES];

/* A contiguous (d0, d1, d2) tensor of unspecified numbers: the spare of
 * that slot when it has that shape, else a new one. */
static int spare_take(int slot, size_t d0, size_t d1, size_t d2,
                      tensor **out)
{
    tensor *t = __atomic_exchange_n(&spares[slot], NULL, __ATOMIC_ACQ_REL);
    if (t && t->shape[0] == d0 && t->shape[1] == d1 && t->shape[2] == d2) {
        *out = t;
        return GSL_SUCCESS;
    }
    tensor_free(t);
    return tensor_alloc_empty(SHAPE(d0, d1, d2), out);
}

/* t (owned, its views freed) kept as the spare of slot when it is worth
 * keeping, else freed. */
static void spare_keep(int slot, tensor *t)
{
    if (!t || trace_on() || tensor_is_meta(t) || t->ndim != 3 ||
        !tensor_is_contiguous(t) ||
        tensor_numel(t) < SPARE_MIN_BYTES / sizeof(double)) {
        tensor_free(t);
        return;
    }
    tensor_free(__atomic_exchange_n(&spares[slot], t, __ATOMIC_ACQ_REL));
}

void multihead_fast_release(void)
{
    for (int slot = 0; slot < SPARES; slot++)
        tensor_free(__atomic_exchange_n(&spares[slot], NULL,
                                        __ATOMIC_ACQ_REL));
}

/* A projection of many rows is cut into blocks of at least 256 rows (a
 * block that tall keeps OpenBLAS's kernels as fast as one product over
 * every row), and at most 8 blocks, each of which packs W once more. */
#define PROJECT_BLOCK_ROWS 256
#define PROJECT_BLOCKS_MAX 8

/* y = x W^T + b, as linear_forward computes it, with the B*L rows cut
 * into blocks that OpenMP's threads multiply at once, one-threaded
 * OpenBLAS in each.  The whole forward then runs on one pool of threads
 * (threads.h).  The blocks depend on the number of rows alone, not on
 * the threads: OpenBLAS's kernels may round a row differently in another
 * cut, so the numbers are the same for any thread count.  y is into
 * (owned; NULL: none) when it is a contiguous tensor of y's shape, else
 * the spare of slot (SPARES: a new tensor), every number of it written.
 * What is not a plain contiguous product (shapes alone, a trace being
 * recorded, strided inputs or weights, or fewer than two blocks of rows)
 * takes linear_forward itself. */
static int project(const linear *l, const tensor *x, int slot, tensor *into,
                   tensor **y, int *finite)
{
    *finite = 0;
    size_t in = l->in_features, out = l->out_features;
    size_t rows = x->ndim && in ? tensor_numel(x) / in : 0;
    size_t blocks = rows / PROJECT_BLOCK_ROWS;
    if (blocks > PROJECT_BLOCKS_MAX)
        blocks = PROJECT_BLOCKS_MAX;
    if (blocks < 2 || trace_on() || tensor_is_meta(x) ||
        tensor_is_meta(l->weight) || x->ndim != 3 || x->shape[2] != in ||
        !tensor_is_contiguous(x) || !tensor_is_contiguous(l->weight) ||
        (l->bias && (l->bias->ndim != 1 || l->bias->shape[0] != out ||
                     l->bias->strides[0] != 1))) {
        tensor_free(into);
        return linear_forward(l, x, y);
    }
    int n = threads_for(blocks, 0);
    int status = GSL_SUCCESS;
    if (into && into->ndim == 3 && tensor_is_contiguous(into) &&
        into->shape[0] == x->shape[0] && into->shape[1] == x->shape[1] &&
        into->shape[2] == out) {
        *y = into;
    } else {
        tensor_free(into);
        status = slot < SPARES
                     ? spare_take(slot, x->shape[0], x->shape[1], out, y)
                     : tensor_alloc_empty(SHAPE(x->shape[0], x->shape[1], out), y);
    }
    if (status)
        return mha_fail_in(status, "linear_forward %s", l->name);
    memcpy((*y)->names, x->names, sizeof x->names);
    snprintf((*y)->names[2], TENSOR_NAME_MAX, "%s", l->out_name);
    gsl_matrix_const_view wm =
        gsl_matrix_const_view_array(l->weight->data, out, in);
    int failed = 0, unfinished = 0;
    int blas_threads = threads_blas_single(n > 1);
#pragma omp parallel for num_threads(n) reduction(| : failed, unfinished) \
    if (n > 1)
    for (size_t k = 0; k < blocks; k++) {
        size_t r0 = rows * k / blocks, r1 = rows * (k + 1) / blocks;
        double *yd = (*y)->data + r0 * out;
        double beta = 0.0;
        if (l->bias) { // the bias in every row first, as linear_forward
            memcpy(yd, l->bias->data, out * sizeof *yd);
            for (size_t r = 1; r < r1 - r0; r++)
                memcpy(yd + r * out, yd, out * sizeof *yd);
            beta = 1.0;
        }
        gsl_matrix_const_view xm =
            gsl_matrix_const_view_array(x->data + r0 * in, r1 - r0, in);
        gsl_matrix_view ym = gsl_matrix_view_array(yd, r1 - r0, out);
        failed |= gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &xm.matrix,
                                 &wm.matrix, beta, &ym.matrix) != 0;
        // checked here, while in this thread's cache
        unfinished |= !rowops_all_finite(yd, (r1 - r0) * out);
    }
    threads_blas_restore(blas_threads);
    if (failed) {
        tensor_free(*y);
        *y = NULL;
        return mha_fail(GSL_EFAILED, "linear_forward %s: gsl_blas_dgemm "
                                     "failed", l->name);
    }
    *finite = !unfinished;
    return GSL_SUCCESS;
}

/* x projected by l (one dgemm), checked finite (the inputs were, so a
 * NaN or inf is an overflow), turned by position when the module has
 * rope (rope_start: the first row's position; V passes rope 0), and seen
 * as heads: (B, L, D) and its (B, h, L, p) view. */
static int project_heads(const multihead *m, const linear *l,
                         const tensor *x, size_t heads_count, int rope,
                         long rope_start, const char *name, int slot,
                         tensor **proj, tensor **heads)
{
    const char *who = "multihead_forward_fast";
    int finite;
    int status = project(l, x, slot, NULL, proj, &finite);
    if (!status && !finite)
        status = tensor_check_result(*proj, who, "projection", name);
    if (!status && rope)
        status = multihead_rope(m, proj, rope_start, who, name);
    if (!status)
        status = heads_view(*proj, heads_count, heads);
    return status;
}

int multihead_forward_fast(multihead *m, const tensor *queries,
                           const tensor *keys, const tensor *values,
                           const tensor *valid_lens,
                           const multihead_fast_options *opt, tensor **out,
                           tensor **weights)
{
    if (weights)
        *weights = NULL;
    int status = start(m, queries, keys, values, valid_lens,
                       "multihead_forward_fast", out);
    if (status)
        return status;
    const multihead_fast_options defaults = {MULTIHEAD_THREADS_HEADS, 0};
    if (!opt)
        opt = &defaults;
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t h = m->cfg.num_heads, D = m->cfg.num_hiddens;
    size_t G = m->cfg.kv_heads;
    tensor q_in = tensor_named(queries, "B, Lq, d_q");
    tensor k_in = tensor_named(keys, "B, Lk, d_k");
    tensor v_in = tensor_named(values, "B, Lk, d_v");

    char kv[48] = "", rule_opts[96];
    if (G < h)
        snprintf(kv, sizeof kv, ", G=%zu", G);
    window_rule rule; // a window, alibi or sinks (window.h)
    int ruled = multihead_window_rule(m, &rule);
    multihead_window_options(m, rule_opts, sizeof rule_opts);
    tensor_trace_begin(NULL,
                TRACE_QKV(queries, keys, values),
                "multihead_fast(h=%zu%s%s%s)", h, kv,
                m->cfg.causal && !m->cfg.window ? ", causal" : "", rule_opts);
    tensor *q = NULL, *k = NULL, *v = NULL;    // (B, L, D), (B, Lk, G*p)
    tensor *qh = NULL, *kh = NULL, *vh = NULL; // (B, h, Lq, p), (B, G, Lk, p)
    tensor *rows = NULL; // causal: (B, Lq) lengths, valid_lens folded in
    tensor *concat = NULL, *oh = NULL;         // (B, Lq, D); (B, h, Lq, p)

    // 1-2. project (one dgemm each), split into heads (views); the
    // inputs are finite (start), so a NaN or inf here is an overflow
    const char *who = "multihead_forward_fast";
    // (with rope, Q and K turned by position: keys at 0 .. Lk-1, queries
    // aligned at the end, Lk-Lq .. Lk-1)
    long Lk = (long)keys->shape[1];
    status = project_heads(m, &m->W_q, &q_in, h, 1, Lk - (long)Lq, "Q",
                           SPARE_Q, &q, &qh);
    if (!status)
        status = project_heads(m, &m->W_k, &k_in, G, 1, 0, "K", SPARE_K, &k,
                               &kh);
    if (!status)
        status = project_heads(m, &m->W_v, &v_in, G, 0, 0, "V", SPARE_V, &v,
                               &vh);
    // causal: one length per query row, min(valid_len, i + Lk - Lq + 1)
    if (!status && m->cfg.causal)
        status = valid_lens_per_row(valid_lens, 1, B, Lq, keys->shape[1], 0,
                                    &rows);
    const tensor *lens = rows ? rows : valid_lens;
    // 3. the output buffer, seen per head: Q's own, (B, Lq, D) as well.
    // The block of rows r0.. of head (b, i) is the only one to read those
    // rows of Q_bi, in its first product, and then writes its rows of
    // O_bi in the same place; a new buffer while a trace is recorded
    if (!status && trace_on()) {
        status = tensor_alloc(SHAPE(B, Lq, D), &concat);
    } else if (!status) {
        concat = q;
        q = NULL;
    }
    if (!status) {
        tensor_set_names(concat, "B, Lq, d_model");
        status = heads_view(concat, h, &oh);
    }
    // the weights (B, h, Lq, Lk), only when the caller wants them
    tensor *w = NULL;
    if (!status && weights) {
        status = tensor_alloc(SHAPE(B, h, Lq, keys->shape[1]), &w);
        if (!status)
            tensor_set_names(w, "B, h, Lq, Lk");
    }
    // 4. every head, in parallel, straight into concat (each block
    // checked finite as it is written; the first that is not found here)
    int finite = 0;
    if (!status)
        status = attend_all(qh, kh, vh, oh, lens, w, ruled ? &rule : NULL,
                            opt, &finite);
    if (!status && !finite)
        status = tensor_check_result(concat, who, "weighted sum of the values",
                                     "heads");
    if (!status)
        trace_attention(qh, kh, vh, oh, lens);
    // 5. W_o mixes the heads, into K's buffer when it has out's shape
    // (self-attention with d_model outputs): K is not read any more
    if (!status) {
        tensor *into = !trace_on() && k->shape[1] == Lq &&
                               k->shape[2] == m->W_o.out_features
                           ? k
                           : NULL;
        if (into)
            k = NULL;
        status = project(&m->W_o, concat, SPARES, into, out, &finite);
    }
    if (!status && !finite &&
        (status = tensor_check_result(*out, who, "output", "out"))) {
        tensor_free(*out);
        *out = NULL;
    }
    trace_end();
    if (!status && weights)
        *weights = w;
    else
        tensor_free(w);
    tensor_free(rows);
    tensor_free(qh);
    tensor_free(kh);
    tensor_free(vh);
    tensor_free(oh);
    spare_keep(SPARE_Q, q ? q : concat); // concat is Q's when q is NULL
    spare_keep(SPARE_K, k);
    spare_keep(SPARE_V, v);
    if (q)
        tensor_free(concat);
    return status;
}

/* --- the reference: plain loops ------------------------------------- */

/* y (out,) = W x + b for one vector x read with stride xs. */
static void naive_linear(const linear *l, const double *x, size_t xs,
                         double *y)
{
    for (size_t o = 0; o < l->out_features; o++) {
        double sum = l->bias ? *TENSOR_AT(l->bias, o) : 0.0;
        for (size_t j = 0; j < l->in_features; j++)
            sum += *TENSOR_AT(l->weight, o, j) * x[j * xs];
        y[o] = sum;
    }
}

/* With rope: the p features of one head of one projected vector at
 * position pos, turned pair by pair (features 2k, 2k + 1) by the angle
 * pos / base^(2k/p), written out from the formula of posenc.h. */
static void naive_rope(double *v, size_t p, double pos, double base)
{
    for (size_t k = 0; 2 * k < p; k++) {
        double angle = pos / pow(base, (double)(2 * k) / (double)p);
        double a = v[2 * k], b = v[2 * k + 1];
        v[2 * k] = cos(angle) * a - sin(angle) * b;
        v[2 * k + 1] = sin(angle) * a + cos(angle) * b;
    }
}

int multihead_forward_naive(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, tensor **out)
{
    int status = start(m, queries, keys, values, valid_lens,
                       "multihead_forward_naive", out);
    if (status)
        return status;
    size_t B = queries->shape[0], Lq = queries->shape[1], Lk = keys->shape[1];
    size_t D = m->cfg.num_hiddens, h = m->cfg.num_heads, p = D / h;
    size_t Dout = m->cfg.out_size, Dkv = m->cfg.kv_heads * p;
    size_t group = h / m->cfg.kv_heads; // query heads per key-value head
    // per example: qp (Lq, D), kp and vp (Lk, G*p); one query's concat
    // (D,) and one head's scores (Lk,)
    size_t nq, nk;
    if (mha_mul_size(Lq, D, &nq, "multihead_forward_naive") ||
        mha_mul_size(Lk, Dkv, &nk, "multihead_forward_naive"))
        return GSL_EOVRFLW;
    double *qp = mha_malloc(nq, sizeof *qp, "multihead_forward_naive");
    double *kp = qp ? mha_malloc(nk, sizeof *kp, "multihead_forward_naive") : NULL;
    double *vp = kp ? mha_malloc(nk, sizeof *vp, "multihead_forward_naive") : NULL;
    double *cat = vp ? mha_malloc(D, sizeof *cat, "multihead_forward_naive") : NULL;
    double *s = cat ? mha_malloc(Lk, sizeof *s, "multihead_forward_naive") : NULL;
    status = s ? tensor_alloc(SHAPE(B, Lq, Dout), out) : GSL_ENOMEM;
    if (status) {
        free(qp);
        free(kp);
        free(vp);
        free(cat);
        free(s);
        return status;
    }
    double scale = 1.0 / sqrt((double)p);
    int rope = m->cfg.rope;
    window_rule rule; // a window, alibi or sinks (window.h)
    int ruled = multihead_window_rule(m, &rule);
    for (size_t b = 0; b < B; b++) {
        // query i sits at position Lk - Lq + i, key t at position t
        for (size_t i = 0; i < Lq; i++) {
            naive_linear(&m->W_q, TENSOR_AT(queries, b, i, 0),
                         queries->strides[2], qp + i * D);
            for (size_t hd = 0; rope && hd < h; hd++)
                naive_rope(qp + i * D + hd * p, p,
                           (double)Lk - (double)Lq + (double)i,
                           m->cfg.rope_base);
        }
        for (size_t t = 0; t < Lk; t++) {
            naive_linear(&m->W_k, TENSOR_AT(keys, b, t, 0), keys->strides[2],
                         kp + t * Dkv);
            for (size_t hd = 0; rope && hd < m->cfg.kv_heads; hd++)
                naive_rope(kp + t * Dkv + hd * p, p, (double)t,
                           m->cfg.rope_base);
            naive_linear(&m->W_v, TENSOR_AT(values, b, t, 0),
                         values->strides[2], vp + t * Dkv);
        }
        for (size_t i = 0; i < Lq; i++) {
            size_t len = softmax_row_len(valid_lens, m->cfg.causal, b, i, Lq,
                                         Lk);
            for (size_t hd = 0; hd < h; hd++) {
                const double *q_i = qp + i * D + hd * p;
                size_t kv = (hd / group) * p; // its key-value head's columns
                // scores of query i against the keys it sees, 0 .. len - 1;
                // a row of valid length 0 sees every key at score 0
                size_t seen = len ? len : Lk;
                double mx = -INFINITY;
                // with a window, alibi or sinks: query i at position
                // pos, key t seen when the rule says so, its score less
                // slope * (pos - t), and the sink in the max and the sum
                long pos = (long)Lk - (long)Lq + (long)i;
                double slope = rule.slopes ? rule.slopes[hd] : 0.0;
                if (ruled && rule.sinks)
                    mx = rule.sinks[hd];
                for (size_t t = 0; t < seen; t++) {
                    const double *k_t = kp + t * Dkv + kv;
                    double dot = 0.0;
                    for (size_t j = 0; j < p; j++)
                        dot += q_i[j] * k_t[j];
                    s[t] = len ? scale * dot : 0.0;
                    s[t] -= slope * (double)(pos - (long)t);
                    if (ruled && !window_sees(&rule, pos, (long)t))
                        s[t] = -INFINITY;
                    mx = s[t] > mx ? s[t] : mx;
                }
                double sum = ruled && rule.sinks ? exp(rule.sinks[hd] - mx)
                                                 : 0.0;
                for (size_t t = 0; t < seen; t++)
                    sum += s[t] = exp(s[t] - mx);
                // the head's p outputs: the weighted average of the values
                for (size_t j = 0; j < p; j++) {
                    double o = 0.0;
                    for (size_t t = 0; t < seen; t++)
                        o += s[t] / sum * vp[t * Dkv + kv + j];
                    cat[hd * p + j] = o;
                }
            }
            naive_linear(&m->W_o, cat, 1, (*out)->data + (b * Lq + i) * Dout);
        }
    }
    free(qp);
    free(kp);
    free(vp);
    free(cat);
    free(s);
    return GSL_SUCCESS;
}
//<
