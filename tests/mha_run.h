//> full
/* mha_run.h: running the mha program from a test, for the CLI suites
 * (test_cli.c, test_cli_torch.c, test_forward_stream.c): a scratch
 * directory per test, mha run with its stdout and stderr captured, its
 * exit status, and the .npy inputs it reads.  Include after check.h and
 * scratch.h. */
#ifndef MHA_TEST_MHA_RUN_H
#define MHA_TEST_MHA_RUN_H

#include <errno.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef MHA_BIN
#error "MHA_BIN must name the built mha program"
#endif

/* --- a scratch directory per test (scratch.h) ----------------------- */

static char mha_path[4096]; /* MHA_BIN made absolute */

/* A scratch directory named after `name` (scratch.h), with mha_path set. */
static inline void mha_enter(const char *name)
{
    cr_assert_not_null(realpath(MHA_BIN, mha_path), "%s: %s (make build)",
                       MHA_BIN, strerror(errno));
    scratch_enter(name);
}

static inline void enter_scratch(void) { mha_enter("mha-cli"); }

static inline void leave_scratch(void) { scratch_leave(); }

/* --- running mha ----------------------------------------------------- */

typedef struct run {
    int status; /* exit status, or 128 + signal */
    char *out;  /* stdout, NUL-terminated */
    char *err;  /* stderr */
} run;

/* The file the next runs read as stdin (NULL: the test's own stdin). */
static const char *stdin_path;

/* The memory limit of the next runs, as `ulimit -v KIB` sets it (0: none),
 * and the seconds they may take before they are killed as hung (0: no
 * end). */
static rlim_t run_limit_kib;
static int run_timeout;

/* The file size limit of the next runs in bytes, as `ulimit -f` sets it in
 * blocks (0: none). */
static rlim_t run_fsize;

/* waitpid, but a child still running after run_timeout seconds is killed
 * and the test fails: a hang must fail, not block the suite. */
static inline void wait_for(pid_t pid, int *ws)
{
    if (!run_timeout) {
        cr_assert_eq(waitpid(pid, ws, 0), pid);
        return;
    }
    struct timespec tick = {0, 10000000}; // 10 ms
    for (long waited = 0;; waited++) {
        pid_t got = waitpid(pid, ws, WNOHANG);
        cr_assert_geq(got, 0);
        if (got == pid)
            return;
        if (waited >= 100L * run_timeout) {
            kill(pid, SIGKILL);
            waitpid(pid, ws, 0);
            cr_assert_fail("mha ran for %d s (ulimit -v %llu): it hangs",
                           run_timeout, (unsigned long long)run_limit_kib);
        }
        nanosleep(&tick, NULL);
    }
}

/* mha with args (argv[1] ...; NULL-terminated), in the current directory,
 * its stdout sent to the file stdout_path (run.out is then "") or, when
 * that is NULL, captured. */
static inline run mha_argv_to(char *const *args, const char *stdout_path)
{
    char *argv[64];
    size_t n = 0;
    argv[n++] = mha_path;
    for (; args[n - 1]; n++) {
        cr_assert_lt(n, 63);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    FILE *out = tmpfile(), *err = tmpfile();
    cr_assert(out && err);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = stdout_path ? open(stdout_path, O_WRONLY) : fileno(out);
        if (fd < 0)
            _exit(126);
        dup2(fd, 1);
        dup2(fileno(err), 2);
        if (stdin_path) {
            int in = open(stdin_path, O_RDONLY);
            if (in < 0 || dup2(in, 0) < 0)
                _exit(126);
        }
        struct rlimit lim = {run_limit_kib * 1024, run_limit_kib * 1024};
        if (run_limit_kib && setrlimit(RLIMIT_AS, &lim))
            _exit(126);
        struct rlimit fsize = {run_fsize, run_fsize};
        if (run_fsize && setrlimit(RLIMIT_FSIZE, &fsize))
            _exit(126);
        execv(mha_path, argv);
        _exit(127);
    }
    int ws;
    wait_for(pid, &ws);
    run r = {WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws),
             read_all(out), read_all(err)};
    fclose(out);
    fclose(err);
    return r;
}

static inline run mha_argv(char *const *args) { return mha_argv_to(args, NULL); }

/* mha with the arguments of a '|'-separated list: "trace|--batch|1";
 * "a||b" holds an empty argument; stdout to stdout_path, or captured. */
static inline run mha_to(const char *list, const char *stdout_path)
{
    char buf[2048], *args[64];
    size_t n = 0;
    cr_assert_lt(strlen(list), sizeof buf);
    strcpy(buf, list);
    for (char *s = buf;; n++) {
        cr_assert_lt(n, 63);
        args[n] = s;
        char *bar = strchr(s, '|');
        if (!bar)
            break;
        *bar = '\0';
        s = bar + 1;
    }
    args[n + 1] = NULL;
    return mha_argv_to(args, stdout_path);
}

static inline run mha(const char *list) { return mha_to(list, NULL); }

static inline void run_free(run *r)
{
    free(r->out);
    free(r->err);
}

/* mha ARGS, in the scratch directory as it is now: refused, exit 2,
 * exactly the line message (and its newline) on stderr, nothing on
 * stdout, every file as it was. */
static inline void mha_refused(const char *args, const char *message)
{
    snapshot before = snapshot_of(".");
    run r = mha(args);
    char want[2048];
    snprintf(want, sizeof want, "%s\n", message);
    cr_assert_eq(r.status, 2, "mha %s: exit %d, stderr %s", args, r.status,
                 r.err);
    cr_assert_str_eq(r.err, want, "mha %s: stderr %s", args, r.err);
    cr_assert_str_eq(r.out, "", "mha %s", args);
    cr_assert(snapshot_unchanged(&before, "."), "mha %s changed files", args);
    run_free(&r);
    free(before.data);
}

/* A table of runs mha must refuse, each with its message (mha_refused). */
typedef struct refusal {
    const char *args, *message;
} refusal;

static inline void mha_refuses_each(const refusal *cases, size_t n)
{
    for (size_t i = 0; i < n; i++)
        mha_refused(cases[i].args, cases[i].message);
}

/* --- .npy inputs ------------------------------------------------------ */

/* Seeded normal numbers, scale sd. */
static inline void put_normal(const char *path, size_t ndim, const size_t *shape,
                       gsl_rng *r, double sd)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    tensor_fill_normal(t, r, 0, sd);
    OK(npy_write(path, t));
    tensor_free(t);
}

static inline void put_values(const char *path, size_t ndim, const size_t *shape,
                       const double *values)
{
    tensor *t;
    OK(tensor_from_array(ndim, shape, values, &t));
    OK(npy_write(path, t));
    tensor_free(t);
}

/* A .npy file of any dtype, as np.save writes it (npy_write writes
 * float64 only): version 1.0, the header padded so the data starts at
 * byte 64, then `bytes`, n of them, as given. */
static inline void put_npy(const char *path, const char *descr, size_t ndim,
                           const size_t *shape, const void *bytes, size_t n)
{
    char dims[128] = "", header[256];
    for (size_t d = 0; d < ndim; d++) // (4,) and (2, 4)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), "%zu%s",
                 shape[d], ndim == 1 ? "," : d + 1 < ndim ? ", " : "");
    int len = snprintf(header, sizeof header,
                       "{'descr': '%s', 'fortran_order': False, 'shape': "
                       "(%s), }",
                       descr, dims);
    while ((10 + len + 1) % 64)
        header[len++] = ' ';
    header[len++] = '\n';
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                             (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    cr_assert_eq(fwrite(pre, 1, 10, f), 10);
    cr_assert_eq(fwrite(header, 1, (size_t)len, f), (size_t)len);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

#endif
//<
