/* threads.h: how the fast paths share the machine's cores with OpenBLAS.
 *
 * Two ways to use T cores for attention:
 *   - BLAS threads: one loop over the heads, each matrix product split
 *     over T threads by OpenBLAS.  The small per-head products split
 *     badly, and the softmax between them runs on one core.
 *   - a parallel loop over heads (OpenMP): T heads at once, each with a
 *     one-threaded OpenBLAS, softmax included.
 * Doing both at once would start T x T threads on T cores
 * (oversubscription: they take turns and thrash each other's caches), so
 * around a parallel loop OpenBLAS is set to one thread and restored
 * after.  The big projection products run outside the loop with all of
 * OpenBLAS's threads.
 *
 * T is OpenMP's thread count (OMP_NUM_THREADS, by default the number of
 * cores), never more than the cores: OMP_NUM_THREADS=100000 on 2 cores
 * runs 2 threads, as OMP_NUM_THREADS=2 does, and a loop of 8 items runs
 * at most 8.  The items are independent, so the result is the same for
 * any T.  Under GSL's reference CBLAS there are no BLAS threads to set.
 * The OpenBLAS setting is global to the process: do not call the fast
 * paths from several threads of your own at once.
 */
#ifndef MHA_THREADS_H
#define MHA_THREADS_H

#include <stddef.h>

/* The most threads a parallel loop uses: OpenMP's count, at most the
 * cores (1 without OpenMP). */
int threads_count(void);

/* The threads for a parallel loop over items independent items:
 * threads_count(), at most items, at least 1.  Give it to the loop as
 * `num_threads(n) if (n > 1)`, and size per-thread scratch by it. */
int threads_for(size_t items);

/* This thread's index in a parallel loop, 0 .. threads_count() - 1. */
int threads_index(void);

/* OpenBLAS's thread count, or 0 when the CBLAS is not OpenBLAS. */
int threads_blas(void);

/* Set OpenBLAS's thread count (nothing under another CBLAS). */
void threads_set_blas(int n);

/* Around a parallel loop whose threads each call BLAS: when parallel,
 * BLAS runs one-threaded inside (threads_blas_single returns what to
 * restore), so the two levels do not oversubscribe the cores. */
int threads_blas_single(int parallel);
void threads_blas_restore(int saved);

#endif
