#define _POSIX_C_SOURCE 200809L /* clock_gettime */
/* cblas-info: say which CBLAS this build's gsl_blas_* calls run on, and
 * how fast its dgemm is on a (512, 512) x (512, 512) product. */
#include <stdio.h>
#include <time.h>

#include <gsl/gsl_blas.h>

#include "libmha.h"

int main(void)
{
    mha_program_init();
    printf("CBLAS: %s\n", mha_cblas_name());

    enum { N = 512 };
    gsl_matrix *a = gsl_matrix_alloc(N, N), *b = gsl_matrix_alloc(N, N);
    gsl_matrix *c = gsl_matrix_alloc(N, N);
    if (!a || !b || !c) {
        fprintf(stderr, "cblas-info: out of memory\n");
        return 1;
    }
    gsl_matrix_set_all(a, 1.0);
    gsl_matrix_set_all(b, 0.5);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a, b, 0.0, c);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    printf("dgemm %dx%d: %.3f s, %.2f GFLOP/s\n", N, N, s, 2.0 * N * N * N / s / 1e9);
    gsl_matrix_free(a);
    gsl_matrix_free(b);
    gsl_matrix_free(c);
    return 0;
}
