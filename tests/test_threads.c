/* test_threads.c: how many threads a parallel loop starts (threads.h). */
#include "check.h"

#include <omp.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gsl/gsl_blas.h>

/* OMP_NUM_THREADS far beyond the machine gives the cores; a loop of
 * fewer items than threads starts one thread per item, and none is
 * never asked for. */
Test(threads, never_more_than_the_cores_or_the_items)
{
    int cores = omp_get_num_procs();
    omp_set_num_threads(100000);
    cr_assert_eq(threads_count(), cores);
    cr_assert_eq(threads_for(1000000, 0), cores);
    cr_assert_eq(threads_for(1, 0), 1);
    cr_assert_eq(threads_for(0, 0), 1);
    if (cores > 1)
        cr_assert_eq(threads_for(2, 0), 2);
    omp_set_num_threads(1);
    cr_assert_eq(threads_count(), 1);
    cr_assert_eq(threads_for(8, 0), 1);
}

/* What the process maps now, in bytes (/proc/self/statm). */
static size_t mapped(void)
{
    unsigned long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return (size_t)pages * (size_t)sysconf(_SC_PAGESIZE);
}

/* The limit tests need OpenBLAS, and a process whose address space is its
 * own: not under AddressSanitizer nor valgrind. */
static void skip_unless_limits_apply(void)
{
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("AddressSanitizer cannot run under a memory limit");
#endif
    skip_under_valgrind(); // valgrind keeps the address space for itself
    if (!threads_blas())
        cr_skip_test("the CBLAS is not OpenBLAS");
}

static void limit_to(size_t bytes)
{
    struct rlimit r;
    cr_assert_eq(getrlimit(RLIMIT_AS, &r), 0);
    r.rlim_cur = bytes; // the soft limit, which can be raised again
    cr_assert_eq(setrlimit(RLIMIT_AS, &r), 0);
}

/* A limit with no room for OpenBLAS's 128 MiB buffer: refused in one
 * line that names it, where a product would have hung; and a loop runs on
 * one thread. */
Test(threads, no_room_for_the_blas_buffer_is_said)
{
    skip_unless_limits_apply();
    limit_to(mapped() + ((size_t)64 << 20));
    mha_clear_error();
    cr_assert_eq(threads_blas_reserve(), GSL_ENOMEM);
    const char *want = "threads_blas_reserve: the memory limit (ulimit -v ";
    cr_assert(strncmp(mha_last_error(), want, strlen(want)) == 0, "%s",
              mha_last_error());
    cr_assert(strstr(mha_last_error(), "leaves no room for OpenBLAS's 128 "
                                       "MiB buffer beside the ") != NULL);
    cr_assert_eq(threads_for(1000, 0), 1);
}

/* c = a a for (128, 128) matrices, large enough to need OpenBLAS's
 * buffer, allocated before (their memory is not the product's). */
static gsl_matrix *a128, *c128;

static void product_matrices(void)
{
    a128 = gsl_matrix_calloc(128, 128);
    c128 = gsl_matrix_calloc(128, 128);
    cr_assert(a128 && c128);
}

static void one_product(void)
{
    if (!a128)
        product_matrices();
    OK(gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, a128, a128, 0.0, c128));
}

/* Room for the buffer: it is held once threads_blas_reserve returns (a
 * product then maps nothing more; this process, started without a
 * limit, stopped OpenBLAS's pool and may hold it from then on), and a
 * loop gets a second thread only where the limit leaves room for that
 * thread's buffer, stack and scratch. */
Test(threads, the_blas_buffer_is_taken_while_there_is_room)
{
    skip_unless_limits_apply();
    omp_set_num_threads(2);
    product_matrices();
    limit_to(mapped() + ((size_t)300 << 20));
    OK(threads_blas_reserve());
    size_t held = mapped();
    one_product();
    cr_assert_eq(mapped(), held, "the product mapped %zu more bytes",
                 mapped() - held);
    OK(threads_blas_reserve()); // once is enough
    // 170 MiB left: not enough for a second thread's 200 MiB
    limit_to(held + ((size_t)170 << 20));
    cr_assert_eq(threads_for(1000, 0), 1);
    if (omp_get_num_procs() > 1) {
        limit_to(mapped() + ((size_t)400 << 20));
        cr_assert_eq(threads_for(1000, (size_t)300 << 20), 1, "scratch");
        cr_assert_eq(threads_for(1000, 0), 2);
    }
}

/* Started without a memory limit, a program runs OpenBLAS on one thread
 * (OpenMP's loops use the cores); threads_blas_widen lends it
 * threads_count() threads and threads_blas_narrow takes them back. */
Test(threads, blas_is_one_thread_until_widened)
{
    if (!threads_blas())
        cr_skip_test("the CBLAS is not OpenBLAS");
    struct rlimit as, data;
    cr_assert_eq(getrlimit(RLIMIT_AS, &as), 0);
    cr_assert_eq(getrlimit(RLIMIT_DATA, &data), 0);
    if (as.rlim_cur != RLIM_INFINITY || data.rlim_cur != RLIM_INFINITY)
        cr_skip_test("started under a memory limit");
    omp_set_num_threads(omp_get_num_procs());
    cr_assert_eq(threads_blas(), 1);
    int before = threads_blas_widen();
    if (threads_count() == 1) {
        cr_assert_eq(before, 0); // nothing to lend
        cr_assert_eq(threads_blas(), 1);
        return;
    }
    cr_assert_eq(before, 1);
    cr_assert_eq(threads_blas(), threads_count());
    one_product(); // on the pool, started again
    threads_blas_narrow(before);
    cr_assert_eq(threads_blas(), 1);
    one_product();
    threads_blas_narrow(0); // nothing lent: nothing to do
    cr_assert_eq(threads_blas(), 1);
}
