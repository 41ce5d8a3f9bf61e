//> 12
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
    return omp_get_max_threads();
#else
    return 1;
#endif
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
//<
