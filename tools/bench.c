/* bench: how fast is multi-head attention here, measured against the
 * machine's own dgemm, and how do time and memory grow with L for exact
 * and tiled attention, and what a key-value cache saves when decoding.
 * `make bench` runs it; it prints tables, draws plots/bench_mha,
 * bench_memory, bench_forward and bench_decode (.png, .svg), and writes
 * the tables as Markdown to plots/bench.md for the README.
 *
 * Shapes: X (B, L, D) for self-attention, B = 8, D = d_model = 512, h = 8
 * heads of p = 64; flops of one forward 8*B*L*D^2 (four projections) +
 * 4*B*L^2*D (scores and weighted values, all heads).
 *
 * The machine is shared and its load drifts, so every number is a median
 * of several repetitions after a warm-up, and the figures that matter are
 * ratios between things measured side by side in the same run: MHA
 * against a dgemm of (B*L, D) x (D, D) timed in the same rounds, our time
 * against torch's timed right after ours.
 *
 * Parts (each a separate process where that is what makes it honest):
 *   1. OpenBLAS: dgemm, the fast path (heads in parallel, or BLAS
 *      threads), the copy-based path, the naive loops at small L, torch.
 *   2. GSL's reference CBLAS: the same program built with BLAS=gsl, run as
 *      a child (one process can hold only one CBLAS: gsl_blas_* call
 *      cblas_dgemm, resolved once per process).
 *   3. Tracing compiled out (-DMHA_NO_TRACE) against compiled in but off:
 *      a child built that way and this process take turns.
 *   4. Exact vs tiled attention, B*h = 8, d_h = 64, L up to 16384: each
 *      configuration in a fresh child process, peak RSS from wait4().
 *   5. `mha forward` (--mha BIN) as a whole process: at B = 8, L = 128
 *      and 512 and at B = 2, L = 2048, against torch alone and the fast
 *      path in this process, taking turns; and at B = 1 by L up to 16384,
 *      time and peak RSS against the copy-based module.
 *   6. Decoding one sequence (chapter 16): the time of one step with the
 *      key-value cache against recomputing the causal module on every
 *      position so far, t up to 1024.
 *
 *   bench [--quick] [--parts 123456] [--gsl BIN] [--notrace BIN]
 *         [--torch SCRIPT] [--mha BIN]
 *   bench --child-gsl | --child-notrace L REPS
 *   bench --child-memory exact|tiled|module L | --child-run ARGV...
 */
#define _GNU_SOURCE /* wait4, getline */
#include <dlfcn.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <gsl/gsl_blas.h>

#include "libmha.h"

#define B 8
#define D 512
#define H 8

static const size_t Ls[] = {64, 128, 256, 512, 1024, 2048};
#define NL (sizeof Ls / sizeof Ls[0])

static int quick; /* --quick: fewer repetitions, smaller memory sweep */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, size_t n)
{
    qsort(x, n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void die(const char *what)
{
    fprintf(stderr, "bench: %s: %s\n", what, mha_last_error());
    exit(1);
}

#define CHECK(call)                                                           \
    do {                                                                      \
        if ((call) != GSL_SUCCESS)                                            \
            die(#call);                                                       \
    } while (0)

static double mha_flops(size_t L)
{
    return 8.0 * B * L * D * D + 4.0 * B * (double)L * L * D;
}

/* --- the problem ------------------------------------------------------ */

typedef struct {
    size_t L;
    multihead m;
    tensor *x;                /* (B, L, D) */
    gsl_matrix *a, *w, *c;    /* dgemm reference: (B*L, D) x (D, D)^T */
} problem;

/* The module with biases, Xavier weights and X (batch, L, D) ~ N(0, 1),
 * the same numbers for the same (batch, L) in every process. */
static gsl_rng *make_module(size_t batch, size_t L, multihead *m, tensor **x)
{
    gsl_rng *r = mha_rng_new(2024);
    if (!r)
        die("mha_rng_new");
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .bias = 1};
    CHECK(multihead_init(m, &cfg));
    multihead_reset_xavier(m, r);
    tensor_fill_uniform(m->W_q.bias, r, -0.1, 0.1);
    tensor_fill_uniform(m->W_k.bias, r, -0.1, 0.1);
    tensor_fill_uniform(m->W_v.bias, r, -0.1, 0.1);
    tensor_fill_uniform(m->W_o.bias, r, -0.1, 0.1);
    CHECK(tensor_alloc(SHAPE(batch, L, D), x));
    tensor_fill_normal(*x, r, 0, 1);
    return r;
}

static void problem_init(problem *p, size_t batch, size_t L)
{
    p->L = L;
    gsl_rng *r = make_module(batch, L, &p->m, &p->x);
    p->a = gsl_matrix_alloc(batch * L, D);
    p->w = gsl_matrix_alloc(D, D);
    p->c = gsl_matrix_alloc(batch * L, D);
    if (!p->a || !p->w || !p->c) {
        fprintf(stderr, "bench: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < batch * L * D; i++)
        p->a->data[i] = gsl_rng_uniform(r) - 0.5;
    for (size_t i = 0; i < D * D; i++)
        p->w->data[i] = gsl_rng_uniform(r) - 0.5;
    gsl_rng_free(r);
}

static void problem_free(problem *p)
{
    multihead_fast_release(); // the fast path's buffers kept for this L
    multihead_free(&p->m);
    tensor_free(p->x);
    gsl_matrix_free(p->a);
    gsl_matrix_free(p->w);
    gsl_matrix_free(p->c);
}

/* One timed call of each kind, in seconds.  The dgemm runs on OpenBLAS's
 * own threads, as many as OpenMP's, started before the clock. */
static double time_dgemm(problem *p)
{
    int lent = threads_blas_widen();
    double t0 = now();
    gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, p->a, p->w, 0.0, p->c);
    double t = now() - t0;
    threads_blas_narrow(lent);
    return t;
}

/* The same dgemm the way the fast path runs its projections: OpenMP's
 * threads each multiply a block of rows with one-threaded OpenBLAS
 * (here one block per thread).  On some machines OpenBLAS's own threads
 * are much the slower of the two (an Intel Xeon: 31-94 GFLOP/s from one
 * length to the next, where these blocks ran at 105-118), and a
 * reference slower than the code it measures says nothing: the rate
 * taken is the faster of the two. */
static double time_dgemm_blocks(problem *p)
{
    int n = threads_count();
    size_t rows = p->a->size1, per = (rows + (size_t)n - 1) / (size_t)n;
    double t0 = now();
#pragma omp parallel for num_threads(n) schedule(static)
    for (int i = 0; i < n; i++) {
        size_t r0 = (size_t)i * per;
        if (r0 >= rows)
            continue;
        size_t m = rows - r0 < per ? rows - r0 : per;
        gsl_matrix_const_view a =
            gsl_matrix_const_submatrix(p->a, r0, 0, m, p->a->size2);
        gsl_matrix_view c = gsl_matrix_submatrix(p->c, r0, 0, m, p->c->size2);
        gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &a.matrix, p->w, 0.0,
                       &c.matrix);
    }
    return now() - t0;
}

enum { FAST, FAST_BLAS, COPY, NAIVE };

static double time_mha(problem *p, int kind)
{
    tensor *out = NULL;
    multihead_fast_options blas = {.threading = MULTIHEAD_THREADS_BLAS};
    double t0 = now();
    switch (kind) {
    case FAST:
        CHECK(multihead_forward_fast(&p->m, p->x, p->x, p->x, NULL, NULL, &out, NULL));
        break;
    case FAST_BLAS:
        CHECK(multihead_forward_fast(&p->m, p->x, p->x, p->x, NULL, &blas, &out, NULL));
        break;
    case COPY:
        CHECK(multihead_forward(&p->m, p->x, p->x, p->x, NULL, &out, NULL));
        break;
    default:
        CHECK(multihead_forward_naive(&p->m, p->x, p->x, p->x, NULL, &out));
    }
    double t = now() - t0;
    tensor_free(out);
    return t;
}

/* --- torch, a child waiting on a pipe ---------------------------------- */

typedef struct {
    pid_t pid;
    FILE *to, *from;
    char version[256];
    const char *script;
} torch_child;

static int torch_start(torch_child *t, const char *script, int threads)
{
    memset(t, 0, sizeof *t);
    if (!script || system("/usr/bin/python3 -c 'import torch' 2>/dev/null") != 0)
        return 0;
    int in[2], out[2];
    if (pipe(in) || pipe(out))
        return 0;
    t->pid = fork();
    if (t->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[1]);
        close(out[0]);
        char th[16];
        snprintf(th, sizeof th, "%d", threads);
        execl("/usr/bin/python3", "python3", script, th, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    t->script = script;
    t->to = fdopen(in[1], "w");
    t->from = fdopen(out[0], "r");
    char line[256];
    if (!t->from || !fgets(line, sizeof line, t->from) ||
        strncmp(line, "ready ", 6) != 0) {
        fprintf(stderr, "bench: torch did not start\n");
        return 0;
    }
    line[strcspn(line, "\n")] = '\0';
    snprintf(t->version, sizeof t->version, "%s", line + 6);
    return 1;
}

/* torch's median time in ms for L, and which of its paths was faster. */
static double torch_time(torch_child *t, size_t L, int reps, char *path,
                         size_t n)
{
    char line[256];
    fprintf(t->to, "%zu %d\n", L, reps);
    fflush(t->to);
    size_t l;
    double ms;
    char p[128];
    if (!fgets(line, sizeof line, t->from) ||
        sscanf(line, "%zu %lf %127s", &l, &ms, p) != 3 || l != L)
        return NAN;
    snprintf(path, n, "%s", p);
    return ms;
}

/* torch's median time in ms for (batch, L, D) in a process of its own,
 * the faster of its two paths (named into path), started while this
 * process waits with its threads asleep: torch timed as someone timing it
 * alone would.  NAN when it could not run. */
static double torch_alone(const char *script, int threads, size_t batch,
                          size_t L, int reps, char *path, size_t n)
{
    char cmd[1200], line[512], p[128];
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 '%s' %d %zu %d %zu", script,
             threads, L, reps, batch);
    FILE *f = popen(cmd, "r");
    double ms = NAN;
    size_t l;
    if (f && fgets(line, sizeof line, f) &&
        sscanf(line, "%zu %lf %127s", &l, &ms, p) == 3 && l == L)
        snprintf(path, n, "%s", p);
    else
        ms = NAN;
    if (f)
        pclose(f);
    return ms;
}

static void torch_stop(torch_child *t)
{
    if (!t->pid)
        return;
    fprintf(t->to, "quit\n");
    fclose(t->to);
    fclose(t->from);
    waitpid(t->pid, NULL, 0);
}

/* --- output: the terminal, Markdown and gnuplot ----------------------- */

static FILE *md; /* plots/bench.md */

static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

static void render(const char *gp)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "command -v gnuplot >/dev/null && gnuplot -e \"fmt='png'\" %s && "
             "gnuplot -e \"fmt='svg'\" %s",
             gp, gp);
    if (system(cmd) != 0)
        say("(gnuplot missing or failed: %s kept, not rendered)\n", gp);
}

/* --- part 1: OpenBLAS ---------------------------------------------------- */

typedef struct {
    double dgemm_gf, fast_ms, blas_ms, copy_ms, naive_ms, torch_ms;
    double torch_beside_ms, torch_alone_ms; /* torch_ms: the faster */
    char torch_path[128];
} row;

static void part_openblas(row *rows, torch_child *torch)
{
    say("\n## 1. Self-attention, B = %d, d_model = %d, h = %d, float64\n\n", B,
        D, H);
    say("%6s %9s %10s %8s %6s %10s %10s %10s %10s %9s\n", "L", "dgemm", "fast",
        "fast", "/dgemm", "BLAS-thr", "copy", "naive", "torch", "ours/");
    say("%6s %9s %10s %8s %6s %10s %10s %10s %10s %9s\n", "", "GFLOP/s", "ms",
        "GFLOP/s", "", "ms", "ms", "ms", "ms", "torch");
    for (size_t li = 0; li < NL; li++) {
        size_t L = Ls[li];
        row *r = &rows[li];
        problem p;
        problem_init(&p, B, L);
        int reps = quick ? 3 : L >= 1024 ? 3 : 5; // medians of 5 up to L = 512
        int copy = L <= 512; // beyond, its (B, h, L, L) tensors cost seconds
        // warm-up: page in every buffer, start every thread pool
        time_dgemm(&p);
        time_dgemm_blocks(&p);
        time_mha(&p, FAST);
        time_mha(&p, FAST_BLAS);
        if (copy)
            time_mha(&p, COPY);
        double td[16], tdb[16], tf[16], tb[16], tc[16];
        for (int k = 0; k < reps; k++) { // the kinds take turns
            td[k] = time_dgemm(&p);
            tdb[k] = time_dgemm_blocks(&p);
            tf[k] = time_mha(&p, FAST);
            tb[k] = time_mha(&p, FAST_BLAS);
            if (copy)
                tc[k] = time_mha(&p, COPY);
        }
        double td_best = fmin(median(td, reps), median(tdb, reps));
        r->dgemm_gf = 2.0 * B * L * D * D / td_best / 1e9;
        r->fast_ms = 1e3 * median(tf, reps);
        r->blas_ms = 1e3 * median(tb, reps);
        r->copy_ms = copy ? 1e3 * median(tc, reps) : NAN;
        r->naive_ms = L <= 128 ? 1e3 * time_mha(&p, NAIVE) : NAN;
        // torch two ways, the faster kept: the child waiting beside this
        // process, and a process of its own
        r->torch_ms = r->torch_beside_ms = r->torch_alone_ms = NAN;
        if (torch->pid) {
            char alone[128];
            r->torch_ms = r->torch_beside_ms = torch_time(
                torch, L, reps, r->torch_path, sizeof r->torch_path);
            double ms = r->torch_alone_ms = torch_alone(
                torch->script, threads_count(), B, L, reps, alone,
                sizeof alone);
            if (!(ms >= r->torch_ms)) { // also when the first is nan
                r->torch_ms = ms;
                snprintf(r->torch_path, sizeof r->torch_path, "%s", alone);
            }
        }
        double gf = mha_flops(L) / r->fast_ms / 1e6;
        say("%6zu %9.1f %10.1f %8.1f %6.2f %10.1f %10.1f %10.1f %10.1f %9.2f\n",
            L, r->dgemm_gf, r->fast_ms, gf, gf / r->dgemm_gf, r->blas_ms,
            r->copy_ms, r->naive_ms, r->torch_ms, r->fast_ms / r->torch_ms);
        problem_free(&p);
    }
}

/* --- part 2: GSL's reference CBLAS, in a child ------------------------ */

static void child_gsl(void)
{
    // L = 64, 128, 256: the reference dgemm is 20-30x slower
    for (size_t li = 0; li < 3; li++) {
        problem p;
        problem_init(&p, B, Ls[li]);
        time_dgemm(&p);
        time_mha(&p, FAST);
        double td[3], tf[3];
        for (int k = 0; k < 3; k++) {
            td[k] = time_dgemm(&p);
            tf[k] = time_mha(&p, FAST);
        }
        printf("gsl %zu %.4f %.4f\n", Ls[li],
               2.0 * B * Ls[li] * D * D / median(td, 3) / 1e9,
               1e3 * median(tf, 3));
        fflush(stdout);
        problem_free(&p);
    }
}

static void part_gsl(const char *bin, const row *rows, double *gsl_dgemm,
                     double *gsl_fast)
{
    say("\n## 2. OpenBLAS against GSL's reference CBLAS (same program, "
        "built with BLAS=gsl)\n\n");
    for (size_t i = 0; i < 3; i++)
        gsl_dgemm[i] = gsl_fast[i] = NAN;
    if (!bin) {
        say("(no --gsl binary given: skipped)\n");
        return;
    }
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s --child-gsl", bin);
    FILE *f = popen(cmd, "r");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        size_t L;
        double dg, ms;
        if (sscanf(line, "gsl %zu %lf %lf", &L, &dg, &ms) != 3)
            continue;
        for (size_t i = 0; i < 3; i++)
            if (Ls[i] == L) {
                gsl_dgemm[i] = dg;
                gsl_fast[i] = ms;
            }
    }
    if (f)
        pclose(f);
    say("%6s %12s %12s %10s %14s %14s %8s\n", "L", "dgemm GF/s", "dgemm GF/s",
        "dgemm", "fast ms", "fast ms", "fast");
    say("%6s %12s %12s %10s %14s %14s %8s\n", "", "OpenBLAS", "reference",
        "speed-up", "OpenBLAS", "reference", "speed-up");
    for (size_t i = 0; i < 3; i++)
        say("%6zu %12.1f %12.2f %10.1f %14.1f %14.1f %8.1f\n", Ls[i],
            rows[i].dgemm_gf, gsl_dgemm[i], rows[i].dgemm_gf / gsl_dgemm[i],
            rows[i].fast_ms, gsl_fast[i], gsl_fast[i] / rows[i].fast_ms);
}

/* --- part 3: tracing compiled out vs compiled in but off ---------------- */

static double fast_median_ms(size_t L, int reps)
{
    problem p;
    problem_init(&p, B, L);
    double t[64];
    time_mha(&p, FAST);
    time_mha(&p, FAST);
    for (int k = 0; k < reps; k++)
        t[k] = time_mha(&p, FAST);
    problem_free(&p);
    return 1e3 * median(t, reps);
}

/* The median ms of `bin --child-notrace L reps`: a fresh process. */
static double child_fast_ms(const char *bin, size_t L, int reps)
{
    char cmd[1200], line[128];
    snprintf(cmd, sizeof cmd, "%s --child-notrace %zu %d", bin, L, reps);
    FILE *f = popen(cmd, "r");
    double ms = NAN;
    if (f && fgets(line, sizeof line, f))
        ms = atof(line);
    if (f)
        pclose(f);
    return ms;
}

static void part_trace(const char *self, const char *bin, double *overhead)
{
    say("\n## 3. Tracing compiled in but off, against compiled out "
        "(-DMHA_NO_TRACE)\n\n");
    overhead[0] = overhead[1] = NAN;
    if (!bin) {
        say("(no --notrace binary given: skipped)\n");
        return;
    }
    // both in fresh child processes, taking turns round after round, so
    // that neither inherits this process's heap and drift hits both alike
    const size_t L2[2] = {64, 512};
    const int reps[2] = {quick ? 9 : 25, quick ? 3 : 5};
    int rounds = quick ? 3 : 5;
    say("%6s %14s %14s %10s %22s\n", "L", "in, off (ms)", "out (ms)",
        "cost", "rounds: min .. max");
    for (size_t li = 0; li < 2; li++) {
        double in[16], out[16], ratio[16];
        for (int r = 0; r < rounds; r++) {
            out[r] = child_fast_ms(bin, L2[li], reps[li]);
            in[r] = child_fast_ms(self, L2[li], reps[li]);
            ratio[r] = in[r] / out[r] - 1.0;
        }
        double lo = ratio[0], hi = ratio[0];
        for (int r = 1; r < rounds; r++) {
            lo = ratio[r] < lo ? ratio[r] : lo;
            hi = ratio[r] > hi ? ratio[r] : hi;
        }
        double mi = median(in, rounds), mo = median(out, rounds);
        overhead[li] = mi / mo - 1.0;
        say("%6zu %14.2f %14.2f %+9.1f%% %+10.1f%% .. %+.1f%%\n", L2[li], mi,
            mo, 100 * overhead[li], 100 * lo, 100 * hi);
    }
    say("\nCounted rather than timed: with tracing off, a forward of the fast\n"
        "path tests trace_on() (one load of a global pointer) a few dozen\n"
        "times, never inside the per-head loop: well under a microsecond\n"
        "against milliseconds.  The differences timed above are the noise\n"
        "of a shared machine (and of two builds' different code layout).\n");
}

/* --- part 4: exact vs tiled attention, memory ------------------------ */

static const size_t Lmem[] = {1024, 2048, 4096, 8192, 16384};
#define NMEM (sizeof Lmem / sizeof Lmem[0])
#define MEM_BH 8  /* B*h: B = 1, h = 8 */
#define MEM_DH 64 /* d_h */

/* One run of one kind at one L, in this (fresh) process; prints seconds. */
static void child_memory(const char *kind, size_t L)
{
    gsl_rng *r = mha_rng_new(7);
    tensor *q, *k, *v, *out;
    CHECK(tensor_alloc(SHAPE(MEM_BH, L, MEM_DH), &q));
    CHECK(tensor_alloc(SHAPE(MEM_BH, L, MEM_DH), &k));
    CHECK(tensor_alloc(SHAPE(MEM_BH, L, MEM_DH), &v));
    tensor_fill_normal(q, r, 0, 1);
    tensor_fill_normal(k, r, 0, 1);
    tensor_fill_normal(v, r, 0, 1);
    int exact = strcmp(kind, "exact") == 0;
    dot_attention a;
    CHECK(dot_attention_init(&a, 0));
    int reps = L <= 2048 ? 3 : 1;
    double t[3];
    for (int i = 0; i < reps; i++) {
        double t0 = now();
        if (exact)
            CHECK(dot_attention_forward(&a, q, k, v, NULL, &out, NULL));
        else
            CHECK(flash_attention_forward(q, k, v, NULL, 0, 0, &out));
        t[i] = now() - t0;
        tensor_free(out);
        dot_attention_free(&a);
    }
    printf("%.6f\n", median(t, reps));
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    gsl_rng_free(r);
}

static double mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    double kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib * 1024.0;
}

/* The CPU time, user and system, in seconds, of the last child that
 * spawn_measured or run_child ran. */
static double child_user, child_system;

/* Run argv[0] with argv as a child process, stdout into out (its first
 * n - 1 bytes) and stderr to /dev/null; its wall time from fork to exit
 * and its peak resident memory (wait4).  0 when it did not exit with 0.
 * A forked child's peak counts the pages it shared with this process
 * before exec, so call it from a small process: run_child does. */
static int spawn_measured(char *const argv[], char *out, size_t n,
                          double *wall, double *peak_mib)
{
    int fd[2];
    if (pipe(fd))
        return 0;
    double t0 = now();
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        freopen("/dev/null", "w", stderr);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t got = 0;
    ssize_t r;
    char chunk[4096];
    while ((r = read(fd[0], chunk, sizeof chunk)) > 0) { // keep the first n-1
        size_t k = (size_t)r < n - 1 - got ? (size_t)r : n - 1 - got;
        memcpy(out + got, chunk, k);
        got += k;
    }
    out[got] = '\0';
    close(fd[0]);
    int status;
    struct rusage ru;
    if (wait4(pid, &status, 0, &ru) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return 0;
    *wall = now() - t0;
    *peak_mib = (double)ru.ru_maxrss / 1024.0; // ru_maxrss is in KiB
    child_user = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec;
    child_system = (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
    return 1;
}

static const char *bench_self; /* this program, for run_child */

/* `bench --child-run ARGV...`: run ARGV as spawn_measured does and print
 * "WALL_SECONDS PEAK_KIB USER_SECONDS SYSTEM_SECONDS" on a line, then the
 * child's output. */
static int child_run(char *const argv[])
{
    char out[4096];
    double wall, peak_mib;
    if (!spawn_measured(argv, out, sizeof out, &wall, &peak_mib))
        return 1;
    printf("%.6f %.0f %.6f %.6f\n%s", wall, peak_mib * 1024.0, child_user,
           child_system, out);
    return 0;
}

/* spawn_measured, by way of a fresh `bench --child-run`: this process
 * holds hundreds of MiB after part 1, and a child forked from it would
 * report them as its own peak.  The wall time is the child's alone. */
static int run_child(char *const argv[], char *out, size_t n, double *wall,
                     double *peak_mib)
{
    size_t argc = 0;
    while (argv[argc])
        argc++;
    char **relay = malloc((argc + 3) * sizeof *relay);
    char buf[4096];
    double ignored, kib, user = 0, sys = 0;
    if (!relay)
        return 0;
    relay[0] = (char *)bench_self;
    relay[1] = "--child-run";
    memcpy(relay + 2, argv, (argc + 1) * sizeof *relay);
    int ok = spawn_measured(relay, buf, sizeof buf, &ignored, &kib) &&
             sscanf(buf, "%lf %lf %lf %lf", wall, &kib, &user, &sys) == 4;
    free(relay);
    if (!ok)
        return 0;
    child_user = user;
    child_system = sys;
    const char *rest = strchr(buf, '\n');
    snprintf(out, n, "%s", rest ? rest + 1 : "");
    *peak_mib = kib / 1024.0;
    return 1;
}

/* Run `self --child-memory kind L` and report the time it measured of
 * itself and its peak RSS. */
static int run_memory_child(const char *self, const char *kind, size_t L,
                            double *seconds, double *peak_mib)
{
    char ls[32], buf[64], *argv[] = {(char *)self, "--child-memory",
                                      (char *)kind, ls, NULL};
    double wall;
    snprintf(ls, sizeof ls, "%zu", L);
    if (!run_child(argv, buf, sizeof buf, &wall, peak_mib) || !*buf)
        return 0;
    *seconds = atof(buf);
    return 1;
}

static void part_memory(const char *self, double *t_exact, double *m_exact,
                        double *t_tiled, double *m_tiled)
{
    say("\n## 4. Exact against tiled attention: B*h = %d, d_h = %d, no mask\n\n",
        MEM_BH, MEM_DH);
    say("exact = dot_attention_forward: (B*h, L, L) scores and weights, "
        "2 x 8 B*h L^2 bytes\n"
        "tiled = flash_attention_forward, tiles %dx%d\n\n",
        FLASH_TILE_Q, FLASH_TILE_K);
    say("%7s %10s %10s %10s %10s %8s %12s %12s\n", "L", "exact s", "exact MiB",
        "tiled s", "tiled MiB", "tiled/", "Q,K,V,out", "exact needs");
    say("%7s %10s %10s %10s %10s %8s %12s %12s\n", "", "", "peak RSS", "",
        "peak RSS", "exact", "MiB", "scores+wts");
    double avail = mem_available();
    size_t n = quick ? 3 : NMEM;
    for (size_t i = 0; i < NMEM; i++)
        t_exact[i] = m_exact[i] = t_tiled[i] = m_tiled[i] = NAN;
    for (size_t i = 0; i < n; i++) {
        size_t L = Lmem[i];
        double need = 2.0 * 8.0 * MEM_BH * (double)L * (double)L;
        if (need < 0.5 * avail &&
            !run_memory_child(self, "exact", L, &t_exact[i], &m_exact[i]))
            say("(exact at L = %zu failed)\n", L);
        if (!run_memory_child(self, "tiled", L, &t_tiled[i], &m_tiled[i]))
            say("(tiled at L = %zu failed)\n", L);
        char skip[32] = "";
        if (isnan(t_exact[i]))
            snprintf(skip, sizeof skip, " (skipped)");
        say("%7zu %10.3f %10.0f %10.3f %10.0f %8.2f %12.0f %8.1f GiB%s\n", L,
            t_exact[i], m_exact[i], t_tiled[i], m_tiled[i],
            t_tiled[i] / t_exact[i], 4.0 * 8 * MEM_BH * L * MEM_DH / 1048576.0,
            need / 1073741824.0, skip);
    }
}

/* --- part 5: mha forward, the whole program --------------------------- */

/* The module's eight parameters and X (batch, L, D) as .npy files in dir,
 * the numbers of make_module. */
static const char *const cli_files[] = {"x",  "wq", "wk", "wv", "wo",
                                        "bq", "bk", "bv", "bo"};
#define NCLI_FILES (sizeof cli_files / sizeof cli_files[0])

static void write_cli_inputs(const char *dir, size_t batch, size_t L)
{
    multihead m;
    tensor *x;
    gsl_rng_free(make_module(batch, L, &m, &x));
    const tensor *t[NCLI_FILES] = {x,          m.W_q.weight, m.W_k.weight,
                                   m.W_v.weight, m.W_o.weight, m.W_q.bias,
                                   m.W_k.bias,   m.W_v.bias,   m.W_o.bias};
    char path[1100];
    for (size_t i = 0; i < NCLI_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, cli_files[i]);
        CHECK(npy_write(path, t[i]));
    }
    multihead_free(&m);
    tensor_free(x);
}

static void remove_cli_files(const char *dir)
{
    char path[1100];
    for (size_t i = 0; i < NCLI_FILES; i++) {
        snprintf(path, sizeof path, "%s/%s.npy", dir, cli_files[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/out.npy", dir);
    unlink(path);
}

/* `mha forward --heads 8` on dir's files, writing out_dir/out.npy (no
 * --attention-out): its wall time and peak RSS. */
static int run_cli(const char *mha, const char *dir, const char *out_dir,
                   double *wall, double *peak_mib)
{
    static const char *const opt[NCLI_FILES] = {
        "--queries", "--wq", "--wk", "--wv", "--wo",
        "--bq",      "--bk", "--bv", "--bo"};
    char path[NCLI_FILES + 1][1100], out[64];
    char *argv[2 * NCLI_FILES + 7];
    size_t a = 0;
    argv[a++] = (char *)mha;
    argv[a++] = "forward";
    argv[a++] = "--heads";
    argv[a++] = "8";
    for (size_t i = 0; i < NCLI_FILES; i++) {
        snprintf(path[i], sizeof path[i], "%s/%s.npy", dir, cli_files[i]);
        argv[a++] = (char *)opt[i];
        argv[a++] = path[i];
    }
    snprintf(path[NCLI_FILES], sizeof path[NCLI_FILES], "%s/out.npy",
             out_dir);
    argv[a++] = "--out";
    argv[a++] = path[NCLI_FILES];
    argv[a] = NULL;
    return run_child(argv, out, sizeof out, wall, peak_mib);
}

/* The copy-based module (multihead_forward, chapter 08's exact path) at
 * (1, L, D), in this fresh process. */
static void child_module(size_t L)
{
    multihead m;
    tensor *x, *out;
    gsl_rng_free(make_module(1, L, &m, &x));
    CHECK(multihead_forward(&m, x, x, x, NULL, &out, NULL));
    printf("done\n");
    tensor_free(out);
    tensor_free(x);
    multihead_free(&m);
}

/* Part 5's first table: `mha forward` against torch alone and the fast
 * path in process, at B = 8 by L and at B = 2, L = 2048 (where the
 * scores' rows are longest), each a median over interleaved rounds. */
static const size_t Bcli[] = {8, 8, 2}, Lcli[] = {128, 512, 2048};
#define NCLI (sizeof Lcli / sizeof Lcli[0])

typedef struct {
    /* by Bcli and Lcli: whole process ms, its user and system CPU ms, the
     * whole process writing to tmpfs ms, torch alone ms, the fast path in
     * process ms, and the medians of the rounds' ratios mha / torch and
     * mha / fast, on disk and on tmpfs */
    double cli_ms[NCLI], user_ms[NCLI], sys_ms[NCLI], shm_ms[NCLI];
    double torch_ms[NCLI], fast_ms[NCLI], vs_torch[NCLI], vs_fast[NCLI];
    double shm_vs_torch[NCLI], shm_vs_fast[NCLI];
    char torch_path[NCLI][128];
    int rounds;
    double t_cli[NMEM], m_cli[NMEM], t_copy[NMEM], m_copy[NMEM];
} cli_result;

/* run_cli writing its output to shm: its wall time in ms, or NAN when
 * there is no tmpfs (shm NULL) or the run failed. */
static double tmpfs_ms(const char *mha, const char *dir, const char *shm)
{
    double wall, mib;
    return shm && run_cli(mha, dir, shm, &wall, &mib) ? 1e3 * wall : NAN;
}

/* Round after round: `mha forward` as a process writing its output to
 * disk (beside its inputs, in dir), the same writing it to tmpfs (shm,
 * or none: NULL), torch in a process of its own (bench_torch.py, the
 * faster of its two paths), and the fast path in this process; each
 * ratio is taken within a round, and the medians of the rounds are kept.
 * On tmpfs the flush to disk that `mha forward` makes before it renames
 * its output into place (so that a crash leaves the old file or the new
 * one) costs nothing: the difference is the disk's. */
static void cli_against_torch(const char *mha, const char *dir,
                              const char *shm, const char *torch,
                              cli_result *c)
{
    int rounds = quick ? 1 : 5;
    c->rounds = rounds;
    say("D = %d, h = %d: mha forward (whole process: a fresh one each run, "
        "writing to disk,\nand to tmpfs) against torch alone (its own "
        "process, in-process time) and\nthe fast path in this process; %d "
        "interleaved rounds, medians\n\n", D, H, rounds);
    say("%3s %6s %9s %8s %8s %9s %9s %9s %7s %7s %7s %7s\n", "B", "L",
        "mha ms", "user ms", "sys ms", "tmpfs ms", "torch ms", "fast ms",
        "mha/", "mha/", "tmpfs/", "tmpfs/");
    say("%3s %6s %9s %8s %8s %9s %9s %9s %7s %7s %7s %7s\n", "", "", "", "",
        "", "", "", "", "torch", "fast", "torch", "fast");
    for (size_t li = 0; li < NCLI; li++) {
        size_t batch = Bcli[li], L = Lcli[li];
        double tm[8], tu[8], ts[8], th[8], tt[8], tf[8], rt[8], rf[8];
        double rht[8], rhf[8], wall, mib;
        write_cli_inputs(dir, batch, L);
        problem p;
        problem_init(&p, batch, L);
        time_mha(&p, FAST); // warm-up: page in, start the threads
        int ok = run_cli(mha, dir, dir, &wall, &mib);
        for (int r = 0; ok && r < rounds; r++) {
            // to disk and to tmpfs, the first of the two by turns
            int shm_first = r % 2;
            if (shm_first)
                th[r] = tmpfs_ms(mha, dir, shm);
            ok = run_cli(mha, dir, dir, &wall, &mib);
            tm[r] = 1e3 * wall;
            tu[r] = 1e3 * child_user;
            ts[r] = 1e3 * child_system;
            if (!shm_first)
                th[r] = tmpfs_ms(mha, dir, shm);
            tt[r] = torch ? torch_alone(torch, threads_count(), batch, L,
                                        L >= 512 ? 3 : 5, c->torch_path[li],
                                        sizeof c->torch_path[li])
                          : NAN;
            double f[5];
            for (int k = 0; k < 5; k++)
                f[k] = time_mha(&p, FAST);
            tf[r] = 1e3 * median(f, 5);
            rt[r] = tm[r] / tt[r];
            rf[r] = tm[r] / tf[r];
            rht[r] = th[r] / tt[r];
            rhf[r] = th[r] / tf[r];
        }
        problem_free(&p);
        remove_cli_files(dir);
        if (shm) {
            char out[1100];
            snprintf(out, sizeof out, "%s/out.npy", shm);
            unlink(out);
        }
        if (!ok) {
            say("(mha forward at B = %zu, L = %zu failed)\n", batch, L);
            continue;
        }
        c->cli_ms[li] = median(tm, rounds);
        c->user_ms[li] = median(tu, rounds);
        c->sys_ms[li] = median(ts, rounds);
        c->shm_ms[li] = median(th, rounds);
        c->torch_ms[li] = median(tt, rounds);
        c->fast_ms[li] = median(tf, rounds);
        c->vs_torch[li] = median(rt, rounds);
        c->vs_fast[li] = median(rf, rounds);
        c->shm_vs_torch[li] = median(rht, rounds);
        c->shm_vs_fast[li] = median(rhf, rounds);
        say("%3zu %6zu %9.1f %8.1f %8.1f %9.1f %9.1f %9.1f %7.2f %7.2f %7.2f "
            "%7.2f\n",
            batch, L, c->cli_ms[li], c->user_ms[li], c->sys_ms[li],
            c->shm_ms[li], c->torch_ms[li], c->fast_ms[li], c->vs_torch[li],
            c->vs_fast[li], c->shm_vs_torch[li], c->shm_vs_fast[li]);
    }
    say("\n");
}

/* A directory on tmpfs for `mha forward`'s output (in template, made by
 * mkdtemp), or NULL when /dev/shm is not a tmpfs this user can write. */
static char *tmpfs_dir(char *template)
{
    struct statfs fs;
    if (statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        return NULL;
    return mkdtemp(template);
}

static void part_cli(const char *mha, const char *self, const char *torch,
                     cli_result *c)
{
    say("\n## 5. mha forward, the whole program: read .npy, forward, write "
        ".npy\n\n");
    for (size_t i = 0; i < NCLI; i++) {
        c->cli_ms[i] = c->user_ms[i] = c->sys_ms[i] = c->torch_ms[i] = NAN;
        c->shm_ms[i] = c->shm_vs_torch[i] = c->shm_vs_fast[i] = NAN;
        c->fast_ms[i] = c->vs_torch[i] = c->vs_fast[i] = NAN;
        snprintf(c->torch_path[i], sizeof c->torch_path[i], "-");
    }
    c->rounds = 0;
    for (size_t i = 0; i < NMEM; i++)
        c->t_cli[i] = c->m_cli[i] = c->t_copy[i] = c->m_copy[i] = NAN;
    char dir[] = "/tmp/mha-bench.XXXXXX";
    if (!mha || !mkdtemp(dir)) {
        say("(no --mha program given, or no temporary directory: skipped)\n");
        return;
    }
    char shm_template[] = "/dev/shm/mha-bench.XXXXXX";
    char *shm = tmpfs_dir(shm_template);
    cli_against_torch(mha, dir, shm, torch, c);
    if (shm)
        rmdir(shm);

    say("B = 1, D = %d, h = %d, by L: mha forward (fast path, no "
        "--attention-out)\nagainst the copy-based module "
        "(multihead_forward), each a whole process\n\n", D, H);
    say("%7s %12s %12s %12s %12s %8s\n", "L", "forward s", "forward MiB",
        "copy s", "copy MiB", "forward/");
    say("%7s %12s %12s %12s %12s %8s\n", "", "", "peak RSS", "", "peak RSS",
        "copy");
    double avail = mem_available();
    size_t n = quick ? 3 : NMEM;
    for (size_t i = 0; i < n; i++) {
        size_t L = Lmem[i];
        write_cli_inputs(dir, 1, L);
        if (!run_cli(mha, dir, dir, &c->t_cli[i], &c->m_cli[i]))
            say("(mha forward at L = %zu failed)\n", L);
        remove_cli_files(dir);
        // the copy path holds scores and weights, (h, L, L) each
        double need = 2.0 * 8.0 * H * (double)L * (double)L;
        char ls[32], buf[64], *argv[] = {(char *)self, "--child-memory",
                                          "module", ls, NULL};
        snprintf(ls, sizeof ls, "%zu", L);
        if (need < 0.5 * avail &&
            !run_child(argv, buf, sizeof buf, &c->t_copy[i], &c->m_copy[i]))
            say("(the copy path at L = %zu failed)\n", L);
        say("%7zu %12.2f %12.0f %12.2f %12.0f %8.2f%s\n", L, c->t_cli[i],
            c->m_cli[i], c->t_copy[i], c->m_copy[i],
            c->t_cli[i] / c->t_copy[i],
            isnan(c->t_copy[i]) ? "  (copy path skipped: memory)" : "");
    }
    rmdir(dir);
}

/* --- part 6: decoding, with a key-value cache and recomputing ---------- */

/* One sequence (B = 1) of self-attention, D = 512, h = 8, causal: the
 * step that makes position t - 1, attending to t keys, two ways.  With the
 * cache (kvcache.h) it projects the one new position and attends its query
 * to the t cached keys; recomputing runs the causal module again on all t
 * positions, as a decoder without a cache must.  Chapter 16 counts the
 * work of both; this measures it. */
static const size_t Ldec[] = {16, 32, 64, 128, 256, 512, 1024};
#define NDEC (sizeof Ldec / sizeof Ldec[0])

typedef struct {
    double cached_ms[NDEC], recomputed_ms[NDEC];
} decode_result;

static void part_decode(decode_result *d)
{
    say("\n## 6. Decoding one sequence, D = %d, h = %d: the step that makes "
        "position t - 1\n\n", D, H);
    size_t T = Ldec[NDEC - 1];
    multihead m;
    tensor *x;
    gsl_rng_free(make_module(1, T, &m, &x));
    m.cfg.causal = 1;
    int reps = quick ? 1 : 3;
    // step k of a decode (k = 0 .. T-1) in rep r: steps[r * T + k], seconds
    double *steps = malloc((size_t)(reps + 1) * T * sizeof *steps);
    if (!steps)
        die("malloc");
    for (int r = 0; r <= reps; r++) { // r = 0 is the warm-up
        kv_cache c;
        CHECK(kv_cache_init(&c, 1, H, D / H, T));
        for (size_t k = 0; k < T; k++) {
            tensor *xt, *out;
            CHECK(tensor_narrow(x, 1, k, 1, &xt));
            double t0 = now();
            CHECK(kv_cache_decode_step(&m, &c, xt, &out, NULL));
            steps[(size_t)r * T + k] = now() - t0;
            tensor_free(out);
            tensor_free(xt);
        }
        kv_cache_free(&c);
    }
    say("%7s %14s %16s %12s\n", "t", "cached ms", "recomputed ms",
        "recomputed/");
    say("%7s %14s %16s %12s\n", "", "", "", "cached");
    for (size_t i = 0; i < NDEC; i++) {
        size_t t = Ldec[i];
        // cached: the steps that make positions t - 5 .. t - 1, every rep
        double w[5 * 8];
        size_t n = 0;
        for (int r = 1; r <= reps; r++)
            for (size_t k = t - 5; k < t; k++)
                w[n++] = steps[(size_t)r * T + k];
        d->cached_ms[i] = 1e3 * median(w, n);
        // recomputed: the causal module on positions 0 .. t - 1
        tensor *xt, *out;
        CHECK(tensor_narrow(x, 1, 0, t, &xt));
        double tr[8];
        for (int r = 0; r <= reps; r++) {
            double t0 = now();
            CHECK(multihead_forward(&m, xt, xt, xt, NULL, &out, NULL));
            if (r > 0)
                tr[r - 1] = now() - t0;
            tensor_free(out);
        }
        tensor_free(xt);
        d->recomputed_ms[i] = 1e3 * median(tr, (size_t)reps);
        say("%7zu %14.3f %16.2f %12.0f\n", t, d->cached_ms[i],
            d->recomputed_ms[i], d->recomputed_ms[i] / d->cached_ms[i]);
    }
    free(steps);
    multihead_free(&m);
    tensor_free(x);
}

/* --- charts and Markdown ----------------------------------------------- */

/* plots/NAME.{dat,gp}, rendered: seconds and peak RSS against L (Lmem)
 * for two kinds, a and b, side by side; `key` names their columns, `what`
 * says what was run, `label` names their lines. */
static void write_time_memory_chart(const char *name, const char *key_a,
                                    const double *t_a, const double *m_a,
                                    const char *key_b, const double *t_b,
                                    const double *m_b, const char *what,
                                    const char *title, const char *label_a,
                                    const char *label_b, const char *time_axis)
{
    char path[64];
    snprintf(path, sizeof path, "plots/%s.dat", name);
    FILE *f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f, "# L %s_s %s_MiB %s_s %s_MiB (%s)\n", key_a, key_a, key_b,
            key_b, what);
    for (size_t i = 0; i < NMEM; i++)
        fprintf(f, "%zu %.4f %.1f %.4f %.1f\n", Lmem[i], t_a[i], m_a[i],
                t_b[i], m_b[i]);
    fclose(f);
    snprintf(path, sizeof path, "plots/%s.gp", name);
    f = fopen(path, "w");
    if (!f)
        return;
    fprintf(f,
        "# gnuplot -e \"fmt='svg'\" plots/%s.gp  (data beside it)\n"
        "if (!exists('fmt')) fmt = 'png'\n"
        "dir = system('dirname ' . ARG0)\n"
        "if (fmt eq 'svg') { set terminal svg size 1000,420 font 'sans,12' } "
        "else { set terminal pngcairo size 1000,420 font 'sans,10' }\n"
        "set output dir . '/%s.' . fmt\n"
        "set datafile missing 'nan'\n"
        "set multiplot layout 1,2 title '%s'\n"
        "set logscale x 2\nset logscale y 10\nset grid\nset key left top\n"
        "set xlabel 'L'\n"
        "set ylabel '%s'\n"
        "plot dir . '/%s.dat' u 1:2 w lp lw 2 t '%s', '' u 1:4 w lp lw 2 t '%s'\n"
        "set ylabel 'peak RSS (MiB)'\n"
        "plot dir . '/%s.dat' u 1:3 w lp lw 2 t '%s', '' u 1:5 w lp lw 2 t '%s'\n"
        "unset multiplot\n",
        name, name, title, time_axis, name, label_a, label_b, name, label_a,
        label_b);
    fclose(f);
    render(path);
}

static void write_charts(const row *rows, const double *gsl_fast,
                         const double *te, const double *me, const double *tt,
                         const double *mt, const cli_result *c)
{
    mkdir("plots", 0777);
    FILE *f = fopen("plots/bench_mha.dat", "w");
    if (!f)
        return;
    fprintf(f, "# L dgemm fast fast_blas_threads copy naive torch gsl_fast "
               "(GFLOP/s, 8BLD^2 + 4BL^2D flops; nan: not run)\n");
    for (size_t i = 0; i < NL; i++) {
        double fl = mha_flops(Ls[i]) / 1e6;
        fprintf(f, "%zu %.3f %.3f %.3f %.3f %.3f %.3f %.3f\n", Ls[i],
                rows[i].dgemm_gf, fl / rows[i].fast_ms, fl / rows[i].blas_ms,
                fl / rows[i].copy_ms, fl / rows[i].naive_ms,
                fl / rows[i].torch_ms, i < 3 ? fl / gsl_fast[i] : NAN);
    }
    fclose(f);
    f = fopen("plots/bench_mha.gp", "w");
    if (!f)
        return;
    fprintf(f,
        "# gnuplot -e \"fmt='svg'\" plots/bench_mha.gp  (data beside it)\n"
        "if (!exists('fmt')) fmt = 'png'\n"
        "dir = system('dirname ' . ARG0)\n"
        "if (fmt eq 'svg') { set terminal svg size 800,500 font 'sans,12' } "
        "else { set terminal pngcairo size 800,500 font 'sans,10' }\n"
        "set output dir . '/bench_mha.' . fmt\n"
        "set title 'Self-attention forward, B = 8, D = 512, h = 8, float64'\n"
        "set xlabel 'sequence length L'\n"
        "set ylabel 'GFLOP/s  (8BLD^2 + 4BL^2D flops)'\n"
        "set logscale x 2\nset logscale y 10\nset key left top\nset grid\n"
        "set datafile missing 'nan'\n"
        "plot dir . '/bench_mha.dat' u 1:2 w lp lw 2 dt 2 t 'dgemm (B*L,D)x(D,D)', \\\n"
        "  '' u 1:3 w lp lw 2 t 'fast path, heads in parallel', \\\n"
        "  '' u 1:4 w lp t 'fast path, BLAS threads', \\\n"
        "  '' u 1:5 w lp t 'copy-based path (d2l)', \\\n"
        "  '' u 1:7 w lp t 'PyTorch float64', \\\n"
        "  '' u 1:8 w lp t 'fast path on GSL reference CBLAS', \\\n"
        "  '' u 1:6 w p pt 7 ps 1.5 t 'naive loops'\n");
    fclose(f);
    render("plots/bench_mha.gp");

    write_time_memory_chart("bench_memory", "exact", te, me, "tiled", tt, mt,
                            "B*h = 8, d_h = 64",
                            "Exact vs tiled attention, B*h = 8, d_h = 64",
                            "exact", "tiled", "seconds");
    write_time_memory_chart(
        "bench_forward", "forward", c->t_cli, c->m_cli, "copy", c->t_copy,
        c->m_copy, "mha forward and the copy-based module, B = 1, D = 512, h = 8",
        "mha forward against the copy-based module, B = 1, D = 512, h = 8",
        "mha forward", "copy-based module", "seconds (whole process)");
}

/* plots/bench_decode.{dat,gp}, rendered: part 6's times by t. */
static void write_decode_chart(const decode_result *d)
{
    FILE *f = fopen("plots/bench_decode.dat", "w");
    if (!f)
        return;
    fprintf(f, "# t cached_ms recomputed_ms (D = %d, h = %d, B = 1: the "
               "step that makes position t - 1; nan: not run)\n", D, H);
    for (size_t i = 0; i < NDEC; i++)
        fprintf(f, "%zu %.4f %.4f\n", Ldec[i], d->cached_ms[i],
                d->recomputed_ms[i]);
    fclose(f);
    f = fopen("plots/bench_decode.gp", "w");
    if (!f)
        return;
    fprintf(f,
        "# gnuplot -e \"fmt='svg'\" plots/bench_decode.gp  (data beside it)\n"
        "if (!exists('fmt')) fmt = 'png'\n"
        "dir = system('dirname ' . ARG0)\n"
        "if (fmt eq 'svg') { set terminal svg size 800,500 font 'sans,12' noenhanced } "
        "else { set terminal pngcairo size 800,500 font 'sans,10' noenhanced }\n"
        "set output dir . '/bench_decode.' . fmt\n"
        "set title 'Decoding one sequence, D = %d, h = %d, float64: time of "
        "one step'\n"
        "set xlabel 'keys attended to, t'\n"
        "set ylabel 'ms per step'\n"
        "set logscale x 2\nset logscale y 10\nset key left top\nset grid\n"
        "set datafile missing 'nan'\n"
        "plot dir . '/bench_decode.dat' u 1:2 w lp lw 2 t 'with the key-value "
        "cache (kv_cache_decode_step)', \\\n"
        "  '' u 1:3 w lp lw 2 t 'recomputing all t positions "
        "(multihead_forward, causal)'\n",
        D, H);
    fclose(f);
    render("plots/bench_decode.gp");
}

/* The 1-, 5- and 15-minute load averages, as /proc/loadavg gives them:
 * how busy the machine was while the numbers were taken. */
static void load_average(char *buf, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    double a[3];
    if (f && fscanf(f, "%lf %lf %lf", &a[0], &a[1], &a[2]) == 3)
        snprintf(buf, n, "%.2f %.2f %.2f", a[0], a[1], a[2]);
    else
        snprintf(buf, n, "unknown");
    if (f)
        fclose(f);
}

/* The kernels OpenBLAS chose for this CPU (its DYNAMIC_ARCH build picks
 * them when it loads; OPENBLAS_CORETYPE overrides the choice). */
static const char *blas_kernels(void)
{
    char *(*corename)(void) =
        (char *(*)(void))dlsym(RTLD_DEFAULT, "openblas_get_corename");
    return corename ? corename() : "none (not OpenBLAS)";
}

static void cpu_model(char *buf, size_t n)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    snprintf(buf, n, "unknown");
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *c = strchr(line, ':');
            if (c) {
                c[strcspn(c, "\n")] = '\0';
                snprintf(buf, n, "%s", c + 2);
            }
            break;
        }
    if (f)
        fclose(f);
}

/* The marker that starts part 6's section of plots/bench.md. */
#define DECODE_HEADING "Decoding one sequence, D = "

/* Part 6's table, to md; machine, when not NULL, says where it ran (a run
 * of part 6 alone, whose numbers are not the other tables'). */
static void write_decode_markdown(FILE *f, const char *machine,
                                  const decode_result *d)
{
    fprintf(f, "\n" DECODE_HEADING "%d, h = %d: the step that makes position "
               "t - 1, with the key-value cache and recomputing all t "
               "positions (causal)%s%s.\n\n"
               "| t | cached ms | recomputed ms | recomputed / cached |\n"
               "|---|---|---|---|\n",
            D, H, machine ? "; measured alone (--parts 6) on " : "",
            machine ? machine : "");
    for (size_t i = 0; i < NDEC; i++)
        fprintf(f, "| %zu | %.3f | %.2f | %.0f |\n", Ldec[i], d->cached_ms[i],
                d->recomputed_ms[i], d->recomputed_ms[i] / d->cached_ms[i]);
}

/* --parts 6 alone: replace part 6's section of plots/bench.md (or add
 * it), leaving the other tables as the last full run wrote them. */
static void update_decode_markdown(const char *machine, const decode_result *d)
{
    char *old = NULL;
    size_t cap = 0;
    FILE *f = fopen("plots/bench.md", "r");
    if (f) {
        ssize_t n = getdelim(&old, &cap, '\0', f);
        fclose(f);
        if (n < 0) {
            free(old);
            old = NULL;
        }
    }
    char *cut = old ? strstr(old, "\n" DECODE_HEADING) : NULL;
    if (cut)
        *cut = '\0';
    f = fopen("plots/bench.md", "w");
    if (f) {
        fputs(old ? old : "", f);
        write_decode_markdown(f, machine, d);
        fclose(f);
    }
    free(old);
}

static void write_markdown(const char *machine, const char *torch_version,
                           const row *rows, const double *gsl_dgemm,
                           const double *gsl_fast, const double *overhead,
                           const double *te, const double *me,
                           const double *tt, const double *mt,
                           const cli_result *c, const decode_result *d)
{
    md = fopen("plots/bench.md", "w");
    if (!md)
        return;
    fprintf(md, "Measured by `make bench` on %s.\n\n", machine);
    fprintf(md, "| L | dgemm GFLOP/s | fast ms | fast GFLOP/s | fast / dgemm | "
                "BLAS-threads ms | copy-based ms | naive ms | torch ms | "
                "ours / torch |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < NL; i++) {
        double gf = mha_flops(Ls[i]) / rows[i].fast_ms / 1e6;
        fprintf(md, "| %zu | %.1f | %.1f | %.1f | %.2f | %.1f | %.1f | %.0f | "
                    "%.1f | %.2f |\n",
                Ls[i], rows[i].dgemm_gf, rows[i].fast_ms, gf,
                gf / rows[i].dgemm_gf, rows[i].blas_ms, rows[i].copy_ms,
                rows[i].naive_ms, rows[i].torch_ms,
                rows[i].fast_ms / rows[i].torch_ms);
    }
    fprintf(md, "\ntorch: %s; torch ms is the faster of the child that "
                "waits beside bench and a process of its own:\n\n"
                "| L | torch beside bench ms | torch alone ms |\n"
                "|---|---|---|\n", torch_version);
    for (size_t i = 0; i < NL; i++)
        fprintf(md, "| %zu | %.1f | %.1f |\n", Ls[i], rows[i].torch_beside_ms,
                rows[i].torch_alone_ms);
    fprintf(md, "\n");
    fprintf(md, "| L | dgemm GFLOP/s OpenBLAS | dgemm GFLOP/s GSL reference | "
                "fast ms OpenBLAS | fast ms GSL reference | speed-up |\n"
                "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < 3; i++)
        fprintf(md, "| %zu | %.1f | %.2f | %.1f | %.1f | %.1f |\n", Ls[i],
                rows[i].dgemm_gf, gsl_dgemm[i], rows[i].fast_ms, gsl_fast[i],
                gsl_fast[i] / rows[i].fast_ms);
    fprintf(md, "\nTracing compiled in but off, against compiled out: "
                "%+.1f %% at L = 64, %+.1f %% at L = 512 (median of rounds "
                "taking turns).\n\n",
            100 * overhead[0], 100 * overhead[1]);
    fprintf(md, "| L | exact s | exact peak RSS MiB | tiled s | tiled peak RSS "
                "MiB | tiled / exact time | Q, K, V, out MiB |\n"
                "|---|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < NMEM; i++)
        fprintf(md, "| %zu | %.2f | %.0f | %.2f | %.0f | %.2f | %.0f |\n",
                Lmem[i], te[i], me[i], tt[i], mt[i], tt[i] / te[i],
                4.0 * 8 * MEM_BH * Lmem[i] * MEM_DH / 1048576.0);
    fprintf(md, "\n`mha forward` as a whole process (read .npy, forward, "
                "write .npy; a fresh process each run), D = %d, h = %d, "
                "writing its output to disk beside its inputs and to tmpfs "
                "(/dev/shm, where the flush to disk before the rename costs "
                "nothing), against torch alone (its own process, in-process "
                "time) and the fast path in process: %d interleaved rounds, "
                "medians.\n\n"
                "| B | L | mha forward ms | user ms | system ms | on tmpfs ms "
                "| torch alone ms | fast path ms | mha / torch | mha / fast "
                "| on tmpfs: mha / torch | on tmpfs: mha / fast |\n"
                "|---|---|---|---|---|---|---|---|---|---|---|---|\n",
            D, H, c->rounds);
    for (size_t i = 0; i < NCLI; i++)
        fprintf(md, "| %zu | %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f "
                    "| %.2f | %.2f | %.2f | %.2f |\n",
                Bcli[i], Lcli[i], c->cli_ms[i], c->user_ms[i], c->sys_ms[i],
                c->shm_ms[i], c->torch_ms[i], c->fast_ms[i], c->vs_torch[i],
                c->vs_fast[i], c->shm_vs_torch[i], c->shm_vs_fast[i]);
    fprintf(md, "\n");
    fprintf(md, "| L | mha forward s | mha forward peak RSS MiB | copy-based "
                "module s | copy-based peak RSS MiB | forward / copy time |\n"
                "|---|---|---|---|---|---|\n");
    for (size_t i = 0; i < NMEM; i++)
        fprintf(md, "| %zu | %.2f | %.0f | %.2f | %.0f | %.2f |\n", Lmem[i],
                c->t_cli[i], c->m_cli[i], c->t_copy[i], c->m_copy[i],
                c->t_cli[i] / c->t_copy[i]);
    write_decode_markdown(md, NULL, d);
    fclose(md);
}

int main(int argc, char **argv)
{
    mha_program_init();
    if (argc >= 2 && strcmp(argv[1], "--child-gsl") == 0) {
        child_gsl();
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "--child-notrace") == 0) {
        printf("%.6f\n", fast_median_ms((size_t)atol(argv[2]), atoi(argv[3])));
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "--child-run") == 0)
        return child_run(argv + 2);
    if (argc >= 4 && strcmp(argv[1], "--child-memory") == 0) {
        if (strcmp(argv[2], "module") == 0)
            child_module((size_t)atol(argv[3]));
        else
            child_memory(argv[2], (size_t)atol(argv[3]));
        return 0;
    }
    const char *gsl = NULL, *notrace = NULL, *torch_script = NULL, *mha = NULL;
    const char *parts = "123456";
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = 1;
        else if (strcmp(argv[i], "--parts") == 0 && i + 1 < argc)
            parts = argv[++i];
        else if (strcmp(argv[i], "--gsl") == 0 && i + 1 < argc)
            gsl = argv[++i];
        else if (strcmp(argv[i], "--notrace") == 0 && i + 1 < argc)
            notrace = argv[++i];
        else if (strcmp(argv[i], "--torch") == 0 && i + 1 < argc)
            torch_script = argv[++i];
        else if (strcmp(argv[i], "--mha") == 0 && i + 1 < argc)
            mha = argv[++i];
        else {
            fprintf(stderr, "usage: bench [--quick] [--parts 123456] [--gsl BIN] "
                            "[--notrace BIN] [--torch SCRIPT] [--mha BIN]\n");
            return 2;
        }
    }
    char self[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0) {
        fprintf(stderr, "bench: cannot find its own path\n");
        return 1;
    }
    self[n] = '\0';
    bench_self = self;

    double t0 = now();
    char cpu[256], machine[768];
    cpu_model(cpu, sizeof cpu);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(machine, sizeof machine,
             "%s, %ld cores; %s, kernels %s; %d OpenMP threads, OpenBLAS on "
             "%d (%d in the BLAS-threads column)", cpu, cores,
             mha_cblas_name(), blas_kernels(), threads_count(),
             threads_blas(), threads_count());
    char load_start[64], load_end[64];
    load_average(load_start, sizeof load_start);
    say("# bench\n\nmachine: %s\nload average at the start: %s\n", machine,
        load_start);
    /* part 5 first, on the machine as bench found it: the other parts
     * take and free up to 8 GiB, and for a while after that each fresh
     * page costs a trip through the hypervisor in a KVM guest, which a
     * whole process pays and torch's in-process time does not (README,
     * Performance) */
    cli_result cli;
    part_cli(strchr(parts, '5') ? mha : NULL, self, torch_script, &cli);
    torch_child torch;
    if (!strchr(parts, '1'))
        torch_script = NULL;
    if (torch_start(&torch, torch_script, threads_count()))
        say("torch: %s, same thread count\n", torch.version);
    else if (torch_script)
        say("torch: not measured (python3-torch is not importable by "
            "/usr/bin/python3; apt-get install python3-torch)\n");

    row rows[NL];
    double gsl_dgemm[3], gsl_fast[3], overhead[2];
    double te[NMEM], me[NMEM], tt[NMEM], mt[NMEM];
    for (size_t i = 0; i < NL; i++)
        rows[i] = (row){NAN, NAN, NAN, NAN, NAN, NAN, NAN, NAN, "-"};
    // parts left out (--parts) print nothing and leave nan in the tables
    if (strchr(parts, '1'))
        part_openblas(rows, &torch);
    torch_stop(&torch);
    if (!strchr(parts, '2'))
        gsl = NULL;
    if (!strchr(parts, '3'))
        notrace = NULL;
    part_gsl(gsl, rows, gsl_dgemm, gsl_fast);
    part_trace(self, notrace, overhead);
    for (size_t i = 0; i < NMEM; i++)
        te[i] = me[i] = tt[i] = mt[i] = NAN;
    if (strchr(parts, '4'))
        part_memory(self, te, me, tt, mt);
    decode_result dec;
    for (size_t i = 0; i < NDEC; i++)
        dec.cached_ms[i] = dec.recomputed_ms[i] = NAN;
    if (strchr(parts, '6'))
        part_decode(&dec);
    load_average(load_end, sizeof load_end);
    say("\nload average at the end: %s\n", load_end);
    char where[1024];
    snprintf(where, sizeof where, "%s; load average %s at the start, %s at "
             "the end", machine, load_start, load_end);
    // part 6 alone (--parts 6) leaves the other charts and tables as the
    // last full run made them
    int decode_only = strspn(parts, "6") == strlen(parts);
    if (!decode_only)
        write_charts(rows, gsl_fast, te, me, tt, mt, &cli);
    write_decode_chart(&dec);
    if (decode_only)
        update_decode_markdown(where, &dec);
    else
        write_markdown(where, torch.pid ? torch.version : "not measured",
                       rows, gsl_dgemm, gsl_fast, overhead, te, me, tt, mt,
                       &cli, &dec);
    say("\ncharts: plots/bench_mha.{png,svg}, plots/bench_memory.{png,svg}, "
        "plots/bench_forward.{png,svg}, plots/bench_decode.{png,svg}; "
        "tables: plots/bench.md\nbench took %.0f s\n",
        now() - t0);
    return 0;
}
