/* threads.h: how the fast paths share the machine's cores with OpenBLAS.
 *
 * Two ways to use T cores for attention:
 *   - BLAS threads: one loop over the heads, each matrix product split
 *     over T threads by OpenBLAS.  The small per-head products split
 *     badly, and the softmax between them runs on one core.
 *   - a parallel loop over heads (OpenMP): T heads at once, each with a
 *     one-threaded OpenBLAS, softmax included.
 * Doing both at once would start T x T threads on T cores
 * (oversubscription: they take turns and thrash each other's caches).
 * Even one after the other, OpenBLAS's idle threads poll for work beside
 * OpenMP's.  So a program runs one pool of threads, OpenMP's: OpenBLAS
 * is confined to one thread (threads_blas_widen lends it T for the BLAS
 * threads way), and the big projection products are split by rows over
 * OpenMP's threads too.
 *
 * T is OpenMP's thread count (OMP_NUM_THREADS, by default the number of
 * cores), never more than the cores: OMP_NUM_THREADS=100000 on 2 cores
 * runs 2 threads, as OMP_NUM_THREADS=2 does, and a loop of 8 items runs
 * at most 8.  The items are independent, so the result is the same for
 * any T.  Under GSL's reference CBLAS there are no BLAS threads to set.
 * The OpenBLAS setting is global to the process: do not call the fast
 * paths from several threads of your own at once.
 *
 * Under a memory limit (ulimit -v, or ulimit -d), threads cost memory
 * that must be counted: OpenBLAS (0.3.21, Debian's pthread build) takes a
 * buffer of 128 MiB in each thread of its pool when it loads and in each
 * thread that calls it, on its first matrix product; when the limit
 * leaves no room it retries for ever (OpenBLAS issue 5289), at 100% CPU,
 * and the program never ends, `mha --help` included, whose exit waits for
 * the pool.  So, under a limit:
 *   1. OpenBLAS's pool keeps one thread per GiB of the limit (at least
 *      one): before OpenBLAS loads, a program whose pool would be bigger
 *      runs itself again with OPENBLAS_NUM_THREADS set to that (nothing
 *      runs twice: this happens before main);
 *   2. mha_program_init takes the main thread's buffer at once, while
 *      that can be checked, or says in one line that the limit leaves no
 *      room for it (threads_blas_reserve);
 *   3. a parallel loop starts only the threads the limit leaves room
 *      for, each with its buffer, stack and scratch (threads_for), down
 *      to one; the result is the same.
 * Without a limit none of this costs anything.
 */
#ifndef MHA_THREADS_H
#define MHA_THREADS_H

#include <stddef.h>

/* The most threads a parallel loop uses: OpenMP's count, at most the
 * cores (1 without OpenMP). */
int threads_count(void);

/* The threads for a parallel loop over items independent items, each
 * thread with scratch bytes of its own: threads_count(), at most items,
 * under a memory limit at most what it leaves room for, at least 1.
 * Give it to the loop as `num_threads(n) if (n > 1)`, and allocate the
 * scratch for n threads right after. */
int threads_for(size_t items, size_t scratch);

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

/* OpenBLAS runs one-threaded in a program (its own pool stopped once it
 * has started it; not under a memory limit, where it keeps the pool
 * fit for the limit): OpenMP's loops use the cores.  Around code that
 * wants OpenBLAS's threads in its products instead, threads_blas_widen
 * gives it threads_count() (it returns what threads_blas_narrow puts
 * back, and stops the pool again). */
int threads_blas_widen(void);
void threads_blas_narrow(int before);

/* Confine OpenBLAS as above, once.  A program whose OpenBLAS is a shared
 * library has it done as it loads; one that links OpenBLAS's static
 * archive has it done by mha_program_init_lazy (program.h), since
 * OpenBLAS starts only after libmha's own start-up code there. */
void threads_confine_blas(void);

/* Under a memory limit, make OpenBLAS take this thread's buffer now (one
 * small product), after checking there is room for it: GSL_SUCCESS, or
 * GSL_ENOMEM and a one-line message naming the limit, e.g.
 *
 *   threads_blas_reserve: the memory limit (ulimit -v 150000, 146.5 MiB) leaves no room for OpenBLAS's 128 MiB buffer beside the 45.2 MiB in use; raise the limit
 *
 * Call it before the first matrix product (mha_program_init does); once
 * it succeeded, or without a limit or OpenBLAS, it does nothing. */
int threads_blas_reserve(void);

#endif
