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
#include "fast/multihead_fast_internal.h"

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

int multihead_fast_start(multihead *m, const tensor *queries,
                         const tensor *keys, const tensor *values,
                         const tensor *valid_lens, const char *who,
                         tensor **out)
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
    size_t B = x->shape[0], L = x->shape[1];
    tensor *split = NULL;
    int status = tensor_reshape(x, DIMS(B, L, h, -1), &split);
    if (!status)
        status = tensor_permute(split, AXES(0, 2, 1, 3), out);
    tensor_free(split);
    return status;
}

/* The four (B, h or G, L, p) views as batches of GSL matrices
 * (matrices.h): head (b, i) is matrix (b, i) of each, read in place. */
typedef struct heads {
    tensor_matrices q, k, v, o;
} heads;

/* Query rows per block: 4 MiB of (rows, Lk) scores, and from 64 to 256
 * rows.  Each block's products pack all of K_bi and V_bi (Lk, p) for
 * BLAS, so a block of few rows spends its time packing: at Lk = 2048,
 * blocks of 16 rows (scores within a 256 KiB cache) took 1.3x as long as
 * blocks of 128 (measured on the fast path, B = 8, D = 512, h = 8).
 * Scores that stay in a 1 MiB cache do not pay for it either: at
 * Lk = 2048 (cachegrind, one thread, a 1 MiB last-level cache), blocks
 * of 32 rows missed that cache 9% more often than blocks of 128, and
 * blocks of 256 9% less often, with 0.5% fewer instructions; each
 * block's scores leave the cache once at any size from 64 rows up, while
 * K and V are read again for every block. */
static size_t auto_block_rows(size_t Lq, size_t Lk)
{
    size_t rows = ((size_t)4 << 20) / sizeof(double) / (Lk ? Lk : 1);
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
    // pass 2, row by row: scale, mask, exp(s - max), row sums.  The
    // inputs are finite, yet a product can overflow: a score the mask
    // keeps that is inf or NaN (it would turn the whole row into NaN) is
    // refused, found by the softmax as it looks for the maximum, or
    // before a window's rule
    for (size_t r = 0; r < rows && !status; r++) {
        double *s_row = s + r * Lk;
        size_t len = softmax_valid_len(valid_lens, b, r0 + r, Lk);
        // a window, alibi or sinks (window.h): query r0 + r at its position
        long qpos = (long)Lk - (long)hm->q.rows + (long)(r0 + r);
        if (rule)
            sums[r] = rowops_all_finite(s_row, len)
                          ? window_softmax_row(rule, i, s_row, Lk, scale, qpos,
                                               NULL, len, s_row, NULL)
                          : NAN;
        else
            sums[r] = rowops_softmax_unnormalized(s_row, Lk, scale, len, s_row,
                                                  NULL);
        if (isnan(sums[r])) {
            size_t j = 0;
            while (j + 1 < len && isfinite(s_row[j])) // one of them is not
                j++;
            note_bad_score(bad, b, i, r0 + r, j, s_row[j]);
            status = GSL_ERANGE;
        }
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
    // what is not touched costs no memory; kept for the next call when a
    // MiB or more of it is used
    size_t huge = MHA_HUGE_BYTES / sizeof(double);
    tensor *kept = NULL;
    status = fast_spare_take(SPARE_SCORES,
                             SHAPE(total < huge ? huge : total), &kept);
    if (status)
        return status;
    double *scratch = kept->data;
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
    if (total < SPARE_MIN_BYTES / sizeof(double)) // little of it was used
        tensor_free(kept);
    else
        fast_spare_keep(SPARE_SCORES, kept);
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

/* x projected by l (one dgemm) into `into` (owned: project), checked
 * finite (the inputs were, so a NaN or inf is an overflow), turned by
 * position when the module has rope (rope_start: the first row's
 * position; V passes rope 0), and seen as heads: (B, L, D) and its
 * (B, h, L, p) view. */
static int project_heads(const multihead *m, const linear *l,
                         const tensor *x, size_t heads_count, int rope,
                         long rope_start, const char *name, int slot,
                         tensor *into, tensor **proj, tensor **heads)
{
    const char *who = "multihead_forward_fast";
    int finite;
    int status = fast_project(l, x, slot, into, proj, &finite);
    if (!status && !finite)
        status = tensor_check_result(*proj, who, "projection", name);
    if (!status && rope)
        status = multihead_rope(m, proj, rope_start, who, name);
    if (!status)
        status = heads_view(*proj, heads_count, heads);
    return status;
}

/* One pass of steps 1-5 (multihead_fast.h) over some examples: the whole
 * batch, or one chunk of it (chunk_examples).  A chunk brings the
 * buffers its projections and its output go into; the whole batch takes
 * Q, K and V from the spares and puts them back. */
typedef struct pass {
    const tensor *q, *k, *v;    /* (c, Lq, d_q), (c, Lk, d_k), (c, Lk, d_v) */
    const tensor *valid_lens;   /* NULL, (c,) or (c, Lq) */
    tensor *bufs[SPARE_SCORES]; /* a chunk's: views (owned) of its Q, K
                                   and V buffers; else NULL */
    tensor *into;               /* a chunk's: its view (owned) of out,
                                   or NULL when a sink takes the parts */
} pass;

static int forward_pass(multihead *m, pass *ps, const window_rule *rule,
                        const multihead_fast_options *opt, tensor **out,
                        tensor **weights)
{
    const char *who = "multihead_forward_fast";
    size_t B = ps->q->shape[0], Lq = ps->q->shape[1];
    size_t h = m->cfg.num_heads, D = m->cfg.num_hiddens;
    size_t G = m->cfg.kv_heads;
    long Lk = (long)ps->k->shape[1];
    int chunk = ps->bufs[SPARE_Q] != NULL;
    tensor *q = NULL, *k = NULL, *v = NULL;    // (B, L, D), (B, Lk, G*p)
    tensor *qh = NULL, *kh = NULL, *vh = NULL; // (B, h, Lq, p), (B, G, Lk, p)
    tensor *rows = NULL; // causal: (B, Lq) lengths, valid_lens folded in
    tensor *concat = NULL, *oh = NULL;         // (B, Lq, D); (B, h, Lq, p)

    // 1-2. project (one dgemm each), split into heads (views); the
    // inputs are finite (start), so a NaN or inf here is an overflow
    // (with rope, Q and K turned by position: keys at 0 .. Lk-1, queries
    // aligned at the end, Lk-Lq .. Lk-1)
    int status = project_heads(m, &m->W_q, ps->q, h, 1, Lk - (long)Lq, "Q",
                               SPARE_Q, ps->bufs[SPARE_Q], &q, &qh);
    if (!status)
        status = project_heads(m, &m->W_k, ps->k, G, 1, 0, "K", SPARE_K,
                               ps->bufs[SPARE_K], &k, &kh);
    else
        tensor_free(ps->bufs[SPARE_K]);
    if (!status)
        status = project_heads(m, &m->W_v, ps->v, G, 0, 0, "V", SPARE_V,
                               ps->bufs[SPARE_V], &v, &vh);
    else
        tensor_free(ps->bufs[SPARE_V]);
    // causal: one length per query row, min(valid_len, i + Lk - Lq + 1)
    if (!status && m->cfg.causal)
        status = valid_lens_per_row(ps->valid_lens, 1, B, Lq, (size_t)Lk, 0,
                                    &rows);
    const tensor *lens = rows ? rows : ps->valid_lens;
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
        status = tensor_alloc(SHAPE(B, h, Lq, (size_t)Lk), &w);
        if (!status)
            tensor_set_names(w, "B, h, Lq, Lk");
    }
    // 4. every head, in parallel, straight into concat (each block
    // checked finite as it is written; the first that is not found here)
    int finite = 0;
    if (!status)
        status = attend_all(qh, kh, vh, oh, lens, w, rule, opt, &finite);
    if (!status && !finite)
        status = tensor_check_result(concat, who, "weighted sum of the values",
                                     "heads");
    if (!status)
        trace_attention(qh, kh, vh, oh, lens);
    // 5. W_o mixes the heads: a chunk's into its part of out when there
    // is one; else into K's buffer when it has out's shape
    // (self-attention with d_model outputs), as K is not read any more
    tensor *into = ps->into;
    ps->into = NULL;
    if (!status && !into && !trace_on() && k->shape[1] == Lq &&
        k->shape[2] == m->W_o.out_features) {
        into = k;
        k = NULL;
    }
    if (!status)
        status = fast_project(&m->W_o, concat, SPARES, into, out, &finite);
    else
        tensor_free(into);
    if (!status && !finite &&
        (status = tensor_check_result(*out, who, "output", "out"))) {
        tensor_free(*out);
        *out = NULL;
    }
    if (!status && weights)
        *weights = w;
    else
        tensor_free(w);
    TENSORS_FREE(rows, qh, kh, vh, oh);
    tensor *used[SPARE_SCORES] = {q ? q : concat, k, v}; // concat is Q's
    for (int slot = 0; slot < SPARE_SCORES; slot++) // when q is NULL
        if (chunk)
            tensor_free(used[slot]);
        else
            fast_spare_keep(slot, used[slot]);
    if (q)
        tensor_free(concat);
    return status;
}

/* Examples per chunk.  A batch whose Q, K or V would take more than
 * CHUNK_BYTES goes through steps 1-5 a chunk of examples at a time,
 * each chunk's Q, K and V in the same buffers: a forward pass then
 * touches that much fresh memory and the output, where the whole batch
 * at once touches every projection (at B = 8, L = 512, D = 512, 48 MiB
 * against 6).  In a process that runs once (mha forward), fresh memory
 * is paid for page by page, and in a virtual machine each first touch of
 * a page can cost a trip to the host.  At least two blocks of projected
 * rows per chunk, so that its projections are the threaded products of
 * project; chunks as even as they can be.  (The caller passes the whole
 * batch at once while a trace is recorded, as the trace shows the whole
 * batch's steps, and when the weights are asked for, as they take
 * (B, h, Lq, Lk) anyway.)  The chunks depend on the shapes alone, and so
 * do the numbers. */
#define CHUNK_BYTES ((size_t)2 << 20)

static size_t chunk_examples(const multihead *m, const tensor *queries,
                             const tensor *keys)
{
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t Lk = keys->shape[1];
    size_t L = Lq > Lk ? Lq : Lk, shortest = Lq < Lk ? Lq : Lk;
    size_t width = m->W_q.out_features > m->W_k.out_features
                       ? m->W_q.out_features
                       : m->W_k.out_features;
    if (tensor_is_meta(queries) || tensor_is_meta(keys))
        return B;
    size_t numbers = CHUNK_BYTES / sizeof(double), example = L * width;
    size_t per = example < numbers ? numbers / example : 1;
    size_t least = (2 * PROJECT_BLOCK_ROWS + shortest - 1) / shortest;
    if (per < least)
        per = least;
    if (per >= B)
        return B;
    size_t chunks = (B + per - 1) / per;
    return (B + chunks - 1) / chunks;
}

/* The batch in chunks of `per` examples (chunk_examples): out (B, Lq,
 * D_out) is made first, and each chunk's pass writes its part of it; or,
 * with a sink, each chunk's part goes to the sink.  *overflow: 1 when a
 * chunk's pass found an overflow (GSL_ERANGE). */
static int forward_chunks(multihead *m, const tensor *queries,
                          const tensor *keys, const tensor *values,
                          const tensor *valid_lens, size_t per,
                          const window_rule *rule,
                          const multihead_fast_options *opt, tensor **out,
                          int *overflow)
{
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t Lk = keys->shape[1], Dout = m->W_o.out_features;
    const linear *proj[SPARE_SCORES] = {&m->W_q, &m->W_k, &m->W_v};
    tensor *bufs[SPARE_SCORES] = {NULL, NULL, NULL};
    *out = NULL;
    int status = opt->sink ? GSL_SUCCESS
                           : tensor_alloc_empty(SHAPE(B, Lq, Dout), out);
    for (int slot = 0; slot < SPARE_SCORES && !status; slot++)
        status = fast_spare_take(slot,
                                 SHAPE(per, slot == SPARE_Q ? Lq : Lk,
                                       proj[slot]->out_features),
                                 &bufs[slot]);
    for (size_t b0 = 0; b0 < B && !status; b0 += per) {
        size_t c = B - b0 < per ? B - b0 : per;
        tensor *in[3] = {NULL, NULL, NULL}, *lens = NULL, *y = NULL;
        const tensor *whole[3] = {queries, keys, values};
        pass ps = {.into = NULL};
        for (int i = 0; i < 3 && !status; i++)
            status = tensor_narrow(whole[i], 0, b0, c, &in[i]);
        for (int slot = 0; slot < SPARE_SCORES && !status; slot++)
            status = tensor_narrow(bufs[slot], 0, 0, c, &ps.bufs[slot]);
        if (!status && valid_lens)
            status = tensor_narrow(valid_lens, 0, b0, c, &lens);
        if (!status && *out)
            status = tensor_narrow(*out, 0, b0, c, &ps.into);
        if (status) {
            tensor_free_each(SPARE_SCORES, ps.bufs);
        } else {
            ps.q = in[0], ps.k = in[1], ps.v = in[2], ps.valid_lens = lens;
            status = forward_pass(m, &ps, rule, opt, &y, NULL);
            *overflow = status == GSL_ERANGE;
        }
        if (!status && opt->sink) {
            status = opt->sink(opt->sink_ctx, y);
        } else if (!status) {
            // a projection that could not take its buffer made a new one
            double *part = (*out)->data + b0 * Lq * Dout;
            if (y->data != part)
                memcpy(part, y->data, c * Lq * Dout * sizeof *part);
        }
        tensor_free(y);
        tensor_free(lens);
        tensor_free_each(3, in);
    }
    for (int slot = 0; slot < SPARE_SCORES; slot++)
        fast_spare_keep(slot, bufs[slot]);
    if (status) {
        tensor_free(*out);
        *out = NULL;
    }
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
    int status = multihead_fast_start(m, queries, keys, values, valid_lens,
                                      "multihead_forward_fast", out);
    if (status)
        return status;
    const multihead_fast_options defaults = {.chunk = 0};
    if (!opt)
        opt = &defaults;
    size_t h = m->cfg.num_heads, G = m->cfg.kv_heads;
    char kv[48] = "", rule_opts[96];
    if (G < h)
        snprintf(kv, sizeof kv, ", G=%zu", G);
    window_rule rule; // a window, alibi or sinks (window.h)
    const window_rule *ruled = multihead_window_rule(m, &rule) ? &rule : NULL;
    multihead_window_options(m, rule_opts, sizeof rule_opts);
    tensor_trace_begin(NULL,
                TRACE_QKV(queries, keys, values),
                "multihead_fast(h=%zu%s%s%s)", h, kv,
                m->cfg.causal && !m->cfg.window ? ", causal" : "", rule_opts);
    size_t B = queries->shape[0];
    size_t per = weights || trace_on() ? B
                 : opt->chunk         ? opt->chunk
                                      : chunk_examples(m, queries, keys);
    int chunked = per < B, overflow = 0;
    if (chunked)
        status = forward_chunks(m, queries, keys, values, valid_lens, per,
                                ruled, opt, out, &overflow);
    // the whole batch at once; also after an overflow in a chunk, so that
    // the message names it as the whole batch's pass finds it
    if (!chunked || overflow) {
        tensor q_in = tensor_named(queries, "B, Lq, d_q");
        tensor k_in = tensor_named(keys, "B, Lk, d_k");
        tensor v_in = tensor_named(values, "B, Lk, d_v");
        pass ps = {.q = &q_in, .k = &k_in, .v = &v_in,
                   .valid_lens = valid_lens};
        int again = forward_pass(m, &ps, ruled, opt, out, weights);
        // (a sink has had the chunks before the overflow: the whole
        // batch's output goes nowhere, and if it had no overflow after
        // all, the chunk's refusal stands)
        if (!chunked || again)
            status = again;
        if (!status && opt->sink && !chunked)
            status = opt->sink(opt->sink_ctx, *out);
        if (opt->sink || status) {
            // out was written over K's buffer when it has K's shape
            // (forward_pass): that goes back to K's slot, else K's own
            // buffer is there already
            if (*out && keys->shape[1] == queries->shape[1] &&
                m->W_k.out_features == m->W_o.out_features)
                fast_spare_keep(SPARE_K, *out);
            else
                tensor_free(*out);
            *out = NULL;
        }
    }
    trace_end();
    return status;
}
//<
