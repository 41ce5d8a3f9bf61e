/* threads.c: OpenMP and OpenBLAS thread counts, and what a memory limit
 * leaves room for; see threads.h. */
/* RTLD_DEFAULT, sched_getaffinity, pthread_getattr_default_np */
#define _GNU_SOURCE
#include "base/threads.h"

#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"

#ifdef _OPENMP
#include <omp.h>
#endif

/* --- the memory limit --------------------------------------------------- */

/* The buffer OpenBLAS takes per thread: its BUFFER_SIZE on x86-64 and
 * arm64 (128 MiB), and a MiB for what it maps beside it. */
#define BLAS_BUFFER ((size_t)129 << 20)
/* A glibc malloc arena, which a new thread's first malloc may reserve. */
#define MALLOC_ARENA ((size_t)64 << 20)
/* Under a limit, OpenBLAS keeps one thread of its pool per GiB of it. */
#define BLAS_POOL_SHARE ((size_t)1 << 30)

typedef struct limit {
    size_t bytes;      /* the smaller of the soft limits; 0: none */
    const char *flag;  /* the ulimit option that sets it: "-v" or "-d" */
    int resource;      /* RLIMIT_AS or RLIMIT_DATA */
} limit;

/* The address-space limit (ulimit -v) and the data limit (ulimit -d,
 * which counts private writable mappings such as OpenBLAS's buffer):
 * whichever is smaller. */
static limit memory_limit(void)
{
    limit l = {0, NULL, 0};
    static const struct {
        int resource;
        const char *flag;
    } kinds[] = {{RLIMIT_AS, "-v"}, {RLIMIT_DATA, "-d"}};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        struct rlimit r;
        if (getrlimit(kinds[i].resource, &r) || r.rlim_cur == RLIM_INFINITY)
            continue;
        if (!l.bytes || r.rlim_cur < l.bytes)
            l = (limit){(size_t)r.rlim_cur, kinds[i].flag, kinds[i].resource};
    }
    return l;
}

/* Would a mapping of n bytes fit now?  Mapped as OpenBLAS maps its
 * buffer (private, writable, so both limits count it), then let go. */
static int room_for(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return 0;
    munmap(p, n);
    return 1;
}

/* What the process maps now, counted as the limit l counts it: all of
 * it (ulimit -v), or data and stack (ulimit -d). */
static size_t in_use(const limit *l)
{
    unsigned long size = 0, resident, shared, text, lib, data;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    int n = fscanf(f, "%lu %lu %lu %lu %lu %lu", &size, &resident, &shared,
                   &text, &lib, &data);
    fclose(f);
    if (n != 6)
        return 0;
    long page = sysconf(_SC_PAGESIZE);
    return (size_t)(l->resource == RLIMIT_DATA ? data : size) *
           (size_t)(page > 0 ? page : 4096);
}

/* --- OpenBLAS's pool, cut before it starts ------------------------------ */

/* A count as OpenBLAS reads one from its environment (atoi; 0 when
 * absent or not positive). */
static long env_count(char **envp, const char *name)
{
    size_t len = strlen(name);
    for (char **e = envp; *e; e++) {
        if (strncmp(*e, name, len) || (*e)[len] != '=')
            continue;
        long n = 0;
        const char *s = *e + len + 1;
        for (; *s >= '0' && *s <= '9' && n < 100000; s++)
            n = 10 * n + (*s - '0');
        return n;
    }
    return 0;
}

/* The pool OpenBLAS starts when it loads: OPENBLAS_NUM_THREADS, else
 * GOTO_NUM_THREADS, else OMP_NUM_THREADS, else the cores; never more
 * than the cores. */
static long blas_pool_size(char **envp)
{
    cpu_set_t set;
    long cores = 1024;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    long n = env_count(envp, "OPENBLAS_NUM_THREADS");
    if (n <= 0)
        n = env_count(envp, "GOTO_NUM_THREADS");
    if (n <= 0)
        n = env_count(envp, "OMP_NUM_THREADS");
    if (n <= 0 || n > cores)
        n = cores;
    return n;
}

/* Runs before any shared library's constructor (an executable's
 * .preinit_array comes first), so before OpenBLAS reads its environment
 * and starts its pool, each thread of which takes its buffer at once and,
 * under a limit with no room for it, retries for ever.  When the pool
 * would be bigger than the limit allows (one thread per GiB), the program
 * runs itself again with OPENBLAS_NUM_THREADS set to that: the C library
 * is not set up yet, so the new environment is built by hand here and
 * handed to execve; if that fails, the program carries on as it was. */
static void fit_blas_pool(int argc, char **argv, char **envp)
{
    (void)argc;
    limit l = memory_limit();
    if (!l.bytes || !envp || !argv)
        return;
    long allowed = (long)(l.bytes / BLAS_POOL_SHARE);
    allowed = allowed < 1 ? 1 : allowed > 9999 ? 9999 : allowed;
    if (blas_pool_size(envp) <= allowed)
        return;
    static char setting[] = "OPENBLAS_NUM_THREADS=0000";
    char *digits = setting + strlen("OPENBLAS_NUM_THREADS="), *end = digits;
    char rev[4];
    int k = 0;
    do
        rev[k++] = (char)('0' + allowed % 10);
    while ((allowed /= 10) > 0);
    while (k > 0)
        *end++ = rev[--k];
    *end = '\0';
    size_t n = 0;
    while (envp[n])
        n++;
    char **env = mmap(NULL, (n + 2) * sizeof *env, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (env == MAP_FAILED)
        return;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(envp[i], "OPENBLAS_NUM_THREADS=", 21))
            env[m++] = envp[i];
    env[m++] = setting;
    env[m] = NULL;
    execve("/proc/self/exe", argv, env);
    munmap(env, (n + 2) * sizeof *env);
}

/* OpenBLAS's own pool (Debian's pthread build) starts when it loads, and
 * again whenever its thread count is set; while its threads wait for
 * work they poll with sched_yield for 2^28 clock cycles (about 0.1 s)
 * before they sleep, and inside a product they poll while they wait for
 * each other.  Beside OpenMP's threads on as many cores, that polling
 * took the cores from them (`mha forward` at B = 8, L = 512 spent as much
 * time in the kernel as in its own code).  So OpenBLAS is confined to one
 * thread, the caller's, and its pool stopped, once it has started it, as
 * OpenBLAS itself stops it before a fork: every parallel loop is
 * OpenMP's.  Under a memory limit OpenBLAS is left as fit_blas_pool sized
 * it: starting its pool again would take its buffers again. */
static int blas_confined;

static void stop_blas_pool(void)
{
    void (*shutdown)(void) =
        (void (*)(void))dlsym(RTLD_DEFAULT, "blas_thread_shutdown_");
    if (shutdown)
        shutdown();
}

void threads_confine_blas(void)
{
    if (blas_confined || memory_limit().bytes || !threads_blas())
        return;
    threads_set_blas(1);
    stop_blas_pool();
    blas_confined = 1;
}

/* Is OpenBLAS part of this program's own file, linked from its static
 * archive (the full build's mha is: Makefile)?  Then its constructor has
 * not run when this file's runs (an executable's run in the order its
 * parts were linked, and the archive comes after libmha), and asking it
 * anything would start it early: mha_program_init_lazy confines it. */
static int blas_in_program(void)
{
    void *get = dlsym(RTLD_DEFAULT, "openblas_get_num_threads");
    Dl_info blas, self;
    return get && dladdr(get, &blas) && dladdr((void *)&blas_confined, &self) &&
           blas.dli_fbase == self.dli_fbase;
}

/* A shared OpenBLAS has started by now: shared libraries' constructors
 * run before the program's. */
__attribute__((constructor)) static void confine_blas(void)
{
    if (!blas_in_program())
        threads_confine_blas();
}

__attribute__((section(".preinit_array"), used)) static void (
    *const fit_blas_pool_first)(int, char **, char **) = fit_blas_pool;

/* --- thread counts ------------------------------------------------------ */

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

/* Threads known to hold an OpenBLAS buffer (counted under a limit only):
 * the main thread once threads_blas_reserve took it, and those a parallel
 * loop started, which stay in OpenMP's pool with their buffers. */
static int blas_holders;

/* What one more thread takes: its buffer, its stack, a malloc arena. */
static size_t thread_cost(void)
{
    size_t stack = (size_t)8 << 20;
    pthread_attr_t attr;
    if (pthread_getattr_default_np(&attr) == 0) {
        size_t s;
        if (pthread_attr_getstacksize(&attr, &s) == 0 && s > 0)
            stack = s;
        pthread_attr_destroy(&attr);
    }
    return BLAS_BUFFER + stack + MALLOC_ARENA;
}

int threads_for(size_t items, size_t scratch)
{
    int n = threads_count();
    if ((size_t)n > items)
        n = items ? (int)items : 1;
    if (n <= blas_holders || !memory_limit().bytes || !threads_blas())
        return n;
    // the threads that have no buffer yet, and every thread's scratch
    size_t cost = thread_cost();
    while (n > 1 && (scratch > SIZE_MAX / 2 / (size_t)n ||
                     !room_for((size_t)(n - blas_holders) * cost +
                               (size_t)n * scratch)))
        n--;
    if (n > blas_holders)
        blas_holders = n;
    return n;
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

int threads_blas_widen(void)
{
    int before = threads_blas(), n = threads_count();
    if (!before || before >= n)
        return 0;
    threads_set_blas(n);
    return before;
}

void threads_blas_narrow(int before)
{
    if (!before)
        return;
    threads_set_blas(before);
    if (blas_confined)
        stop_blas_pool();
}

int threads_blas_reserve(void)
{
    limit l = memory_limit();
    if (blas_holders > 0 || !l.bytes || !threads_blas())
        return GSL_SUCCESS;
    if (!room_for(BLAS_BUFFER)) {
        char lim[32], used[32];
        return mha_fail(GSL_ENOMEM,
                        "threads_blas_reserve: the memory limit (ulimit %s "
                        "%zu, %s) leaves no room for OpenBLAS's 128 MiB "
                        "buffer beside the %s in use; raise the limit",
                        l.flag, l.bytes / 1024,
                        mha_bytes_text((double)l.bytes, lim, sizeof lim),
                        mha_bytes_text((double)in_use(&l), used, sizeof used));
    }
    /* One product larger than OpenBLAS's small-matrix path (M N K up to
     * 100^3 takes no buffer) makes it take this thread's buffer now, which
     * it keeps and reuses for every later product. */
    enum { N = 128 };
    double *a = calloc(3 * (size_t)N * N, sizeof *a);
    if (!a)
        return mha_fail(GSL_ENOMEM, "threads_blas_reserve: out of memory "
                                    "allocating 3 x %d x %d doubles", N, N);
    gsl_matrix_view A = gsl_matrix_view_array(a, N, N);
    gsl_matrix_view B = gsl_matrix_view_array(a + N * N, N, N);
    gsl_matrix_view C = gsl_matrix_view_array(a + 2 * N * N, N, N);
    int status = gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &A.matrix,
                                &B.matrix, 0.0, &C.matrix);
    free(a);
    if (status)
        return mha_fail(status, "threads_blas_reserve: gsl_blas_dgemm failed");
    blas_holders = 1;
    return GSL_SUCCESS;
}
