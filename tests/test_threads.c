/* test_threads.c: how many threads a parallel loop starts (threads.h). */
#include "check.h"

#include <omp.h>

/* OMP_NUM_THREADS far beyond the machine gives the cores; a loop of
 * fewer items than threads starts one thread per item, and none is
 * never asked for. */
Test(threads, never_more_than_the_cores_or_the_items)
{
    int cores = omp_get_num_procs();
    omp_set_num_threads(100000);
    cr_assert_eq(threads_count(), cores);
    cr_assert_eq(threads_for(1000000), cores);
    cr_assert_eq(threads_for(1), 1);
    cr_assert_eq(threads_for(0), 1);
    if (cores > 1)
        cr_assert_eq(threads_for(2), 2);
    omp_set_num_threads(1);
    cr_assert_eq(threads_count(), 1);
    cr_assert_eq(threads_for(8), 1);
}
