//> full
/* multihead_fast.h: the multi-head module again, without the copies.
 *
 * multihead_forward (multihead.h) follows d2l step by step: transpose_qkv
 * copies Q, K and V into (B*h, L, p), attention keeps the whole
 * (B*h, Lq, Lk) weights, transpose_output copies the heads back.  Those
 * copies are the lesson of chapters 06-10.  The numbers never needed
 * them: head i of example b is columns i*p .. i*p + p - 1 of the rows of
 * example b in the projected (B, L, d_model) matrix, which GSL can read
 * in place as a (L, p) matrix whose rows are d_model doubles apart
 * (gsl_matrix_view_array_with_tda).
 *
 * Shapes (as in multihead.h): queries (B, Lq, d_q), keys (B, Lk, d_k),
 * values (B, Lk, d_v); Q (B, Lq, d_model), K and V (B, Lk, d_model);
 * p = d_model/h; out (B, Lq, D_out).
 *
 * multihead_forward_fast, step by step:
 *   1. Q, K, V: one dgemm each over all B*L rows (linear_forward); with
 *      the rope option, Q and K then turned by position (multihead_rope).
 *   2. heads as views: (B, L, d_model) -reshape-> (B, L, h, p)
 *      -permute-> (B, h, L, p), no copy; head (b, i) is a (L, p) matrix
 *      with tda d_model.
 *   3. concat (B, Lq, d_model) is Q's buffer itself (while a trace is
 *      recorded, a new one), viewed the same way as (B, h, Lq, p): each
 *      block of query rows of a head reads its rows of Q_bi in its first
 *      product and writes its output over them, so nothing is
 *      transposed back and no (B, Lq, d_model) buffer is added.
 *   4. per head (b, i), a block of query rows at a time:
 *        S = Q_bi K_bi^T            one dgemm, (rows, Lk), scratch
 *        P = exp(S/sqrt(p) - max)   fused scale + mask + exp (rowops.h)
 *        O_bi = P V_bi              one dgemm, into concat's columns
 *        O_bi row r /= sum_r        the normalisation, on p numbers per
 *                                   row instead of Lk
 *      The heads run in parallel (threads.h), one-threaded BLAS inside.
 *   5. out = concat W_o^T (+ b_o): one dgemm, written over K's buffer
 *      when it has out's shape (self-attention, D_out = d_model), as
 *      nothing reads K any more.
 * No (B*h, Lq, Lk) tensor exists: the scratch is rows x Lk per thread.
 *
 * A big batch goes through steps 1-5 a chunk of examples at a time, each
 * chunk's Q, K and V in the same buffers and its output straight into its
 * rows of out (or to opt->sink): chunks of about 2 MiB of Q (at B = 8,
 * L = 512, D = 512, one example: 6 MiB of projections where the whole
 * batch at once takes 48), and at least 512 rows each, so that the
 * projections stay one product per block of rows.  Fresh memory costs a
 * page fault a page, and in a virtual machine a first touch can cost a
 * trip to the host: in one `mha forward` at that size, a sixth of the
 * time was the kernel zeroing fresh pages.  The chunks depend on the
 * shapes alone (opt->chunk sets them), so the numbers do too; they match
 * the whole batch's to rounding.  While a trace is recorded and when the
 * weights are asked for, the whole batch goes at once; and so it goes
 * again after an overflow in a chunk, so that the message names the
 * first overflow of the whole batch.
 *
 * Grouped-query attention (cfg.kv_heads = G < h, multihead.h): K and V
 * are (B, Lk, G*p), viewed as (B, G, Lk, p), and query head i reads key
 * head i / (h/G) in place: sharing costs nothing here, not even a view.
 * Causal attention: valid_lens and the causal rule become one length per
 * query row, (B, Lq) (valid_lens_per_row, softmax.h), before step 4.
 *
 * The result equals multihead_forward's to rounding (the tests hold it
 * to 1e-12 relative, and to the plain loops of multihead_forward_naive).
 * It makes no attention weights unless asked (weights not NULL): then
 * *weights is (B, h, Lq, Lk), as multihead_forward gives them, each
 * block's weights written there as they are made (memory then grows with
 * Lq * Lk); else memory stays linear in the lengths.  Dropout in
 * training mode is not supported here (GSL_EINVAL): the copy-based path
 * has it.
 *
 * The trace shows the steps above: the three projections, the views that
 * split Q, K, V and concat into heads, one summary line for all the
 * heads' attention (not one per head: a trace inside the loop would cost
 * in the loop), and W_o.
 */
#ifndef MHA_MULTIHEAD_FAST_H
#define MHA_MULTIHEAD_FAST_H

#include "nn/multihead.h"

typedef enum {
    MULTIHEAD_THREADS_HEADS = 0, /* parallel loop over heads, 1-thread BLAS */
    MULTIHEAD_THREADS_BLAS = 1,  /* heads one by one, BLAS's threads inside */
} multihead_threading;

typedef struct multihead_fast_options {
    multihead_threading threading;
    size_t block_rows; /* query rows per block; 0: chosen from Lk */
    size_t chunk;      /* examples per pass of steps 1-5; 0: chosen from
                          the shapes (below) */
    /* When not NULL, out goes to sink rather than to *out (left NULL): a
     * part at a time, each the rows of out for some examples, in order,
     * the parts together the whole of it.  A part may be read during the
     * call only.  A nonzero return stops the pass, as its status.  Not
     * with the weights. */
    int (*sink)(void *ctx, const tensor *part);
    void *sink_ctx;
} multihead_fast_options;

/* The forward pass of multihead.h, computed as above.  opt may be NULL
 * (parallel over heads, automatic blocks).  Errors as multihead_forward,
 * plus GSL_EINVAL in training mode with dropout > 0.  An overflow from
 * finite inputs is GSL_ERANGE, naming its stage: a projection (checked
 * after each linear), the scores (each block's, those the mask keeps),
 * the weighted sum of the values (before its division by the row sums,
 * so values near 1e308 can overflow here where multihead_forward does
 * not), or the output. */
int multihead_forward_fast(multihead *m, const tensor *queries,
                           const tensor *keys, const tensor *values,
                           const tensor *valid_lens,
                           const multihead_fast_options *opt, tensor **out,
                           tensor **weights);

/* multihead_forward_fast keeps its big buffers (Q, which concat shares,
 * K and V, when each is a MiB or more) for the next call of the same
 * shapes, since new ones cost page faults on every call; this frees them
 * (at most one set, the last call's).  Optional: the next call allocates
 * again. */
void multihead_fast_release(void);

/* The same numbers from plain loops, one query, head and key at a time,
 * straight from the formulas: no BLAS, no views, no copies (with rope,
 * each head's pairs turned by angles computed on the spot).  Slow (it is
 * the reference, and the benchmark's floor).  It makes no weights. */
int multihead_forward_naive(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, tensor **out);

#endif
//<
