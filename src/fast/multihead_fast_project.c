//> full
/* multihead_fast_project.c: the fast path's projections, cut into blocks
 * of rows for the threads, and the big buffers it keeps between calls
 * (multihead_fast_internal.h). */
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "base/threads.h"
#include "fast/multihead_fast.h"
#include "fast/multihead_fast_internal.h"
#include "tensor/rowops.h"
#include "trace/trace.h"

/* The big buffers of a call (Q, K and V, each (B, L, D), or a chunk's,
 * and the scores' scratch) are kept for the next call of the same shapes
 * rather than freed: a new buffer of a MiB or more comes from the kernel
 * as fresh pages, which it must fault in and zero on the first touch
 * (malloc hands big blocks back to the kernel when they are freed), and
 * when it hands out huge pages it may first compact memory to find them.
 * That cost 2-10% of a forward pass (L = 64-2048, B = 8, D = 512), and at
 * times as long again as the pass itself (L = 128).  One spare per slot,
 * taken and put back with an atomic exchange, so that calls from several
 * threads each get a buffer of their own; smaller buffers, meta tensors
 * and calls while a trace is recorded (which numbers every tensor) go the
 * plain way.  multihead_fast_release frees the spares. */
static tensor *spares[SPARES];

int fast_spare_take(int slot, size_t ndim, const size_t *shape,
                      tensor **out)
{
    tensor *t = __atomic_exchange_n(&spares[slot], NULL, __ATOMIC_ACQ_REL);
    if (t && t->ndim == ndim &&
        memcmp(t->shape, shape, ndim * sizeof *shape) == 0) {
        *out = t;
        return GSL_SUCCESS;
    }
    tensor_free(t);
    return tensor_alloc_empty(ndim, shape, out);
}

void fast_spare_keep(int slot, tensor *t)
{
    if (!t || trace_on() || tensor_is_meta(t) || !tensor_is_contiguous(t) ||
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
int fast_project(const linear *l, const tensor *x, int slot, tensor *into,
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
        const size_t shape[] = {x->shape[0], x->shape[1], out};
        status = slot < SPARES ? fast_spare_take(slot, 3, shape, y)
                               : tensor_alloc_empty(3, shape, y);
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
//<
