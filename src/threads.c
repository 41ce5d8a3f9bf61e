/* threads.c: OpenMP and OpenBLAS thread counts; see threads.h. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "threads.h"

#include <dlfcn.h>

#ifdef _OPENMP
#include <omp.h>
#endif

int threads_count(void)
{
#ifdef _OPENMP
    /* OMP_NUM_THREADS asks; the cores this process may run on bound it
     * (libgomp starts every thread asked for, and fails or crashes when
     * that is tens of thousands) */
    int asked = omp_get_max_threads(), cores = omp_get_num_procs();
    return asked < cores ? asked : cores > 0 ? cores : 1;
#else
    return 1;
#endif
}

int threads_for(size_t items)
{
    size_t n = (size_t)threads_count();
    return (int)(items < n ? (items ? items : 1) : n);
}

int threads_index(void)
{
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

/* OpenBLAS's own calls, looked up at run time: a build on GSL's reference
 * CBLAS has none, and must still link. */
int threads_blas(void)
{
    int (*get)(void) = (int (*)(void))dlsym(RTLD_DEFAULT,
                                            "openblas_get_num_threads");
    return get ? get() : 0;
}

void threads_set_blas(int n)
{
    void (*set)(int) = (void (*)(int))dlsym(RTLD_DEFAULT,
                                            "openblas_set_num_threads");
    if (set && n > 0)
        set(n);
}

int threads_blas_single(int parallel)
{
    int saved = parallel ? threads_blas() : 0;
    if (saved > 1)
        threads_set_blas(1);
    return saved;
}

void threads_blas_restore(int saved)
{
    if (saved > 1)
        threads_set_blas(saved);
}
