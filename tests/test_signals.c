//> full
/* test_signals.c: a run of mha stopped half-way leaves every file as it
 * was (cleanup.h, fileset.h).
 *
 * Each test starts build/mha as a child in a directory of its own,
 * work/, which holds the inputs and the outputs of an earlier run
 * (out.npy, a.npy, heads.png), stops it where its temporaries exist,
 * and then holds it to
 *   - the exit it owes: killed by that very signal (SIGINT, SIGTERM,
 *     SIGHUP, SIGPIPE, SIGQUIT and every other that ends a program but a
 *     fault's), nothing said; or, past the file size limit,
 *     exit status 2 and one line saying "File too large";
 *   - work/ exactly as before: the same names (no *.tmp.*, no
 *     .mha-heatmap-* directory), the same bytes, modes and inodes;
 *   - gnuplot's end: a stand-in for gnuplot (aux/gnuplot, a script that
 *     writes its pid to aux/gnuplot.pid and sleeps) is gone too.
 * Where it is stopped:
 *   - writing: its stdout is a pipe filled up beforehand, so `--trace`
 *     blocks at the end, with OUT and A written under their temporary
 *     names and waiting for stdout to be complete;
 *   - drawing: while the stand-in gnuplot "draws" the heatmap into its
 *     temporary, from the script in the scratch directory;
 *   - SIGPIPE: its stdout is a pipe nobody reads any more;
 *   - SIGXFSZ: under setrlimit(RLIMIT_FSIZE) of 200 bytes, less than any
 *     output, the signal ignored and the write failing instead;
 *   - committing: strace delivers the signal as OUT is renamed into
 *     place, and the run ends by it once A is in place too: every
 *     output new, no temporary and no second name left.
 *
 * Inputs: q (2, 4, 8), W_q, W_k, W_v, W_o (8, 8), 2 heads: OUT
 * (2, 4, 8) and A (2, 2, 4, 4), 640 bytes each as .npy, and a trace of
 * about 1.2 KB, less than stdout's buffer, so that the child writes it
 * only once its outputs are staged.
 */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "scratch.h"

#ifndef MHA_BIN
#error "MHA_BIN must name the built mha program"
#endif

static char mha_path[4096]; /* MHA_BIN made absolute */

#define INPUTS                                                                \
    "--heads", "2", "--queries", "q.npy", "--wq", "wq.npy", "--wk", "wk.npy",  \
        "--wv", "wv.npy", "--wo", "wo.npy"

/* The stand-in for gnuplot: says who it is, then takes its time. */
static const char fake_gnuplot[] = "#!/bin/sh\n"
                                   "echo $$ > \"$MHA_TEST_GNUPLOT_PID\"\n"
                                   "exec sleep 60\n";

static void put_text(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    cr_assert_geq(fputs(text, f), 0);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
}

/* work/ with the inputs and an earlier run's outputs; aux/ with the
 * stand-in gnuplot. */
static void enter_scratch(void)
{
    cr_assert_not_null(realpath(MHA_BIN, mha_path), "%s: %s (make build)",
                       MHA_BIN, strerror(errno));
    scratch_enter("mha-signals");
    cr_assert_eq(mkdir("work", 0755), 0);
    cr_assert_eq(mkdir("aux", 0755), 0);
    gsl_rng *r = mha_rng_new(5);
    cr_assert_not_null(r);
    static const char *const names[] = {"work/q.npy", "work/wq.npy",
                                        "work/wk.npy", "work/wv.npy",
                                        "work/wo.npy"};
    for (size_t i = 0; i < 5; i++) {
        tensor *t;
        if (i == 0)
            OK(tensor_alloc(SHAPE(2, 4, 8), &t));
        else
            OK(tensor_alloc(SHAPE(8, 8), &t));
        tensor_fill_normal(t, r, 0, i ? 0.3 : 1);
        OK(npy_write(names[i], t));
        tensor_free(t);
    }
    gsl_rng_free(r);
    tensor *old;
    OK(tensor_alloc(SHAPE(3), &old));
    tensor_fill_arange(old, 1, 1);
    OK(npy_write("work/out.npy", old));
    OK(npy_write("work/a.npy", old));
    tensor_free(old);
    cr_assert_eq(chmod("work/out.npy", 0640), 0);
    put_text("work/heads.png", "an earlier picture\n", 0600);
    put_text("aux/gnuplot", fake_gnuplot, 0755);
}

static void leave_scratch(void) { scratch_leave(); }

TestSuite(signals, .init = enter_scratch, .fini = leave_scratch);

/* --- what the directory holds ----------------------------------------- */

/* work/'s state (scratch.h's snapshot). */
static snapshot snapshot_take(void) { return snapshot_of("work"); }

/* work/ is exactly as it was in before (which is freed). */
static void assert_unchanged(snapshot *before)
{
    cr_assert(snapshot_unchanged(before, "work"),
              "work/ changed (names, bytes, modes or inodes)");
    free(before->data);
}

/* How many names in work/ contain part. */
static int names_with(const char *part)
{
    DIR *d = opendir("work");
    cr_assert_not_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

/* --- the child ----------------------------------------------------------- */

typedef struct child {
    pid_t pid;
    int err; /* the read end of its stderr */
} child;

/* How the child starts, beyond its arguments. */
typedef struct setup {
    int out;       /* its stdout (a descriptor of ours), or -1: /dev/null */
    int ignore;    /* a signal it starts with ignored, as under nohup */
    rlim_t fsize;  /* its file size limit in bytes, 0 for none */
    int fake_plot; /* MHA_GNUPLOT is the stand-in */
    const char *inject; /* run under strace -e inject=... (NULL: not) */
} setup;

/* mha args... in work/, as s says, every signal at its default action
 * and none blocked: what the test process does with them is not its
 * business. */
static child start(const setup *s, char *const args[])
{
    char *argv[40];
    size_t n = 0, first;
    if (s->inject) {
        static char *const strace[] = {"strace", "-f", "-qq", "-o",
                                       "/dev/null", "-e"};
        for (; n < 6; n++)
            argv[n] = strace[n];
        argv[n++] = (char *)s->inject;
    }
    argv[n++] = mha_path;
    for (first = n; args[n - first]; n++)
        argv[n] = args[n - first];
    argv[n] = NULL;
    char pid_file[4200], plot[4200];
    snprintf(pid_file, sizeof pid_file, "%s/aux/gnuplot.pid", scratch_dir);
    snprintf(plot, sizeof plot, "%s/aux/gnuplot", scratch_dir);
    int err;
    pid_t pid = fork_capturing_stderr(&err);
    if (pid == 0) {
        int out = s->out >= 0 ? s->out : open("/dev/null", O_WRONLY);
        if (out < 0 || dup2(out, 1) < 0 || chdir("work") != 0)
            _exit(126);
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL); // SIGKILL and SIGSTOP refuse: no matter
        // SIGQUIT, SIGABRT and SIGXCPU dump core by default: not in work/
        struct rlimit no_core = {0, 0};
        if (setrlimit(RLIMIT_CORE, &no_core) != 0)
            _exit(126);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        if (s->ignore)
            signal(s->ignore, SIG_IGN);
        if (s->fsize) {
            struct rlimit rl = {s->fsize, s->fsize};
            if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
                _exit(126);
        }
        if (s->fake_plot) {
            setenv("MHA_GNUPLOT", plot, 1);
            setenv("MHA_TEST_GNUPLOT_PID", pid_file, 1);
        }
        if (s->inject)
            execvp(argv[0], argv);
        else
            execv(mha_path, argv);
        _exit(127);
    }
    return (child){pid, err};
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void pause_ms(long ms)
{
    struct timespec t = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

/* The child's wait status, within a minute (then it is killed: fail). */
static int finish(child *c, char *err, size_t n)
{
    int ws = 0;
    double t0 = now();
    for (;;) {
        pid_t got = waitpid(c->pid, &ws, WNOHANG);
        cr_assert_geq(got, 0, "waitpid: %s", strerror(errno));
        if (got == c->pid)
            break;
        if (now() - t0 > 60) {
            kill(c->pid, SIGKILL);
            waitpid(c->pid, &ws, 0);
            cr_assert_fail("mha did not end within a minute");
        }
        pause_ms(5);
    }
    read_until_eof(c->err, err, n);
    return ws;
}

/* Until cond(arg) holds, for up to a minute. */
static void await(int (*cond)(void *), void *arg,
                  const char *what, const child *c)
{
    double t0 = now();
    while (!cond(arg)) {
        int ws;
        cr_assert_eq(waitpid(c->pid, &ws, WNOHANG), 0,
                     "mha ended before %s", what);
        cr_assert_lt(now() - t0, 60, "no %s within a minute", what);
        pause_ms(2);
    }
}

/* work/ holds at least *(int *)n temporaries */
static int temporaries(void *n) { return names_with(".tmp.") >= *(int *)n; }

/* the stand-in gnuplot wrote its pid, into *(pid_t *)pid */
static int gnuplot_started(void *pid)
{
    FILE *f = fopen("aux/gnuplot.pid", "r");
    if (!f)
        return 0;
    long p = 0;
    char nl = 0;
    int ok = fscanf(f, "%ld%c", &p, &nl) == 2 && nl == '\n';
    fclose(f);
    if (ok)
        *(pid_t *)pid = (pid_t)p;
    return ok;
}

/* A pipe whose buffer is full: a write to w blocks until r is read. */
static void full_pipe(int *r, int *w)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    int flags = fcntl(fds[1], F_GETFL);
    cr_assert_eq(fcntl(fds[1], F_SETFL, flags | O_NONBLOCK), 0);
    char block[4096];
    memset(block, 'x', sizeof block);
    while (write(fds[1], block, sizeof block) > 0)
        ;
    cr_assert_eq(errno, EAGAIN);
    cr_assert_eq(fcntl(fds[1], F_SETFL, flags), 0);
    *r = fds[0];
    *w = fds[1];
}

/* Killed by sig, without a word, and work/ as it was. */
static void assert_ended_by(int ws, const char *err, int sig,
                            snapshot *before)
{
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == sig,
              "mha should have ended by signal %d (%s); wait status %#x, "
              "stderr: %s",
              sig, strsignal(sig), ws, err);
    cr_assert_str_eq(err, "");
    assert_unchanged(before);
}

/* --- stopped while writing --------------------------------------------- */

/* mha forward --trace with its stdout on a full pipe (*r its reading
 * end) and `ignore` (0: none) ignored, sent sig while OUT and A are
 * temporaries waiting for stdout; with out_alone, no --attention-out,
 * so that OUT is written while the module makes it (cmd_forward.c), and
 * its temporary alone waits. */
static child signalled_while_writing(int sig, int ignore, int out_alone,
                                     int *r)
{
    int w;
    full_pipe(r, &w);
    setup s = {.out = w, .ignore = ignore};
    char *args[] = {"forward", INPUTS, "--trace", "--out", "out.npy",
                    out_alone ? NULL : "--attention-out", "a.npy", NULL};
    child c = start(&s, args);
    close(w);
    int staged = out_alone ? 1 : 2;
    await(temporaries, &staged, out_alone ? "OUT staged" : "OUT and A staged",
          &c);
    cr_assert_eq(kill(c.pid, sig), 0);
    return c;
}

/* mha forward --trace with its stdout blocked: sig arrives while OUT (and
 * A) are temporaries waiting for stdout. */
static void stop_while_writing(int sig, int out_alone)
{
    skip_under_valgrind();
    snapshot before = snapshot_take();
    int r;
    child c = signalled_while_writing(sig, 0, out_alone, &r);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    close(r);
    assert_ended_by(ws, err, sig, &before);
}

Test(signals, sigint_while_writing) { stop_while_writing(SIGINT, 0); }
Test(signals, sigterm_while_writing) { stop_while_writing(SIGTERM, 0); }
Test(signals, sighup_while_writing) { stop_while_writing(SIGHUP, 0); }
Test(signals, sigterm_while_writing_out_alone)
{
    stop_while_writing(SIGTERM, 1);
}

/* Every other signal whose default action ends a program, but those of a
 * fault (SIGSEGV ...): the same as SIGINT. */
Test(signals, every_fatal_signal_while_writing)
{
    const int sigs[] = {SIGQUIT,   SIGABRT, SIGUSR1,  SIGUSR2,
                        SIGALRM,   SIGXCPU, SIGVTALRM, SIGPROF,
                        SIGSTKFLT, SIGPOLL, SIGPWR,   SIGRTMIN,
                        SIGRTMAX};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        stop_while_writing(sigs[i], 0);
}

/* Signalled as OUT is renamed over its old file (strace's inject: the
 * first rename), with A still a temporary: the signal waits until A is
 * in place too, then ends the run.  Every output is new, each the bytes
 * an undisturbed run writes, and no temporary or second name is left. */
static void stop_while_committing(const char *inject, int sig)
{
    skip_under_valgrind();
    if (system("strace -V > /dev/null 2>&1") != 0)
        cr_skip_test("strace is not installed");
    char *plain[] = {"forward", INPUTS, "--out", "../aux/out.npy",
                     "--attention-out", "../aux/a.npy", NULL};
    setup quiet = {.out = -1};
    child c = start(&quiet, plain);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%s", err);
    setup s = {.out = -1, .inject = inject};
    char *args[] = {"forward", INPUTS, "--out", "out.npy",
                    "--attention-out", "a.npy", NULL};
    c = start(&s, args);
    ws = finish(&c, err, sizeof err);
    cr_assert(WIFSIGNALED(ws) && WTERMSIG(ws) == sig,
              "%s: wait status %#x, stderr: %s", inject, ws, err);
    cr_assert_eq(names_with(".tmp."), 0, "%s: a temporary is left", inject);
    cr_assert_eq(names_with(".old."), 0, "%s: a second name is left", inject);
    const char *pairs[][2] = {{"work/out.npy", "aux/out.npy"},
                              {"work/a.npy", "aux/a.npy"}};
    for (int i = 0; i < 2; i++) {
        size_t n, m;
        char *got = file_bytes(pairs[i][0], &n);
        char *want = file_bytes(pairs[i][1], &m);
        cr_assert(n == m && memcmp(got, want, n) == 0,
                  "%s: %s is not the new output", inject, pairs[i][0]);
        free(got);
        free(want);
    }
}

Test(signals, sigquit_while_committing)
{
    stop_while_committing("inject=rename:signal=SIGQUIT:when=1", SIGQUIT);
}

Test(signals, sigint_while_committing)
{
    stop_while_committing("inject=rename:signal=SIGINT:when=1", SIGINT);
}

Test(signals, sigusr1_while_keeping_the_old_file)
{
    stop_while_committing("inject=link:signal=SIGUSR1:when=1", SIGUSR1);
}

/* --- stopped while gnuplot draws ---------------------------------------- */

/* 1 once pid is no process or a zombie (ended, not yet reaped by
 * whoever adopted it). */
static int process_ended(pid_t pid)
{
    char path[64], stat[256] = "";
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 1;
    size_t n = fread(stat, 1, sizeof stat - 1, f);
    fclose(f);
    stat[n] = '\0';
    const char *paren = strrchr(stat, ')'); // "pid (comm) S ..."
    return paren && (paren[2] == 'Z' || paren[2] == 'X');
}

/* mha heatmap --png while gnuplot runs: sig ends mha and gnuplot, and
 * takes the picture's temporary and the scratch directory along. */
static void stop_while_drawing(int sig)
{
    skip_under_valgrind();
    snapshot before = snapshot_take();
    setup s = {.out = -1, .fake_plot = 1};
    char *args[] = {"heatmap", INPUTS, "--png", "heads.png", NULL};
    child c = start(&s, args);
    pid_t plot = 0;
    await(gnuplot_started, &plot, "gnuplot", &c);
    cr_assert_eq(names_with(".mha-heatmap-"), 1);
    cr_assert_eq(names_with("heads.png.tmp."), 1);
    cr_assert_eq(kill(c.pid, sig), 0);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    assert_ended_by(ws, err, sig, &before);
    double t0 = now();
    while (!process_ended(plot)) {
        if (now() - t0 > 10) {
            kill(plot, SIGKILL);
            cr_assert_fail("gnuplot (pid %ld) outlived mha", (long)plot);
        }
        pause_ms(5);
    }
}

Test(signals, sigint_while_gnuplot_draws) { stop_while_drawing(SIGINT); }
Test(signals, sigterm_while_gnuplot_draws) { stop_while_drawing(SIGTERM); }
Test(signals, sighup_while_gnuplot_draws) { stop_while_drawing(SIGHUP); }

/* --- a reader that went away ------------------------------------------- */

/* stdout is a pipe with no reader: the first write, after OUT and A (or
 * the picture) are staged, raises SIGPIPE. */
static void stop_by_a_closed_pipe(char *const args[])
{
    skip_under_valgrind();
    snapshot before = snapshot_take();
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    close(fds[0]);
    setup s = {.out = fds[1]};
    child c = start(&s, args);
    close(fds[1]);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    assert_ended_by(ws, err, SIGPIPE, &before);
}

Test(signals, sigpipe_forward_trace)
{
    char *args[] = {"forward", INPUTS, "--trace", "--out", "out.npy",
                    "--attention-out", "a.npy", NULL};
    stop_by_a_closed_pipe(args);
}

Test(signals, sigpipe_heatmap_terminal)
{
    if (!heatmap_gnuplot_available())
        cr_skip_test("gnuplot is not installed");
    char *args[] = {"heatmap", INPUTS, "--terminal", "--png", "heads.png",
                    NULL};
    stop_by_a_closed_pipe(args);
}

/* --- the file size limit ----------------------------------------------- */

/* Under a 200-byte limit: SIGXFSZ ignored, the write fails, and the run
 * ends as any failed write does. */
static void over_the_limit(char *const args[], const char *starts)
{
    skip_under_valgrind();
    snapshot before = snapshot_take();
    setup s = {.out = -1, .fsize = 200};
    child c = start(&s, args);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 2,
              "wait status %#x, stderr: %s", ws, err);
    cr_assert(strncmp(err, starts, strlen(starts)) == 0, "stderr: %s", err);
    size_t len = strlen(err);
    cr_assert(len > 0 && err[len - 1] == '\n' && !memchr(err, '\n', len - 1),
              "not one line: %s", err);
    cr_assert_not_null(strstr(err, ": File too large\n"), "stderr: %s", err);
    assert_unchanged(&before);
}

Test(signals, sigxfsz_forward)
{
    char *args[] = {"forward", INPUTS, "--out", "out.npy", "--attention-out",
                    "a.npy", NULL};
    over_the_limit(args, "mha forward: --out out.npy: ");
}

/* --out alone, written while the module makes it */
Test(signals, sigxfsz_forward_out_alone)
{
    char *args[] = {"forward", INPUTS, "--out", "out.npy", NULL};
    over_the_limit(args, "mha forward: --out out.npy: ");
}

Test(signals, sigxfsz_heatmap)
{
    char *args[] = {"heatmap", INPUTS, "--png", "heads.png", NULL};
    over_the_limit(args, "mha heatmap: --png heads.png: ");
}

/* --- a signal ignored from the start stays ignored ---------------------- */

/* Under nohup, SIGHUP does not stop the run: once stdout is read, the
 * outputs are in place and the exit status is 0. */
Test(signals, an_ignored_sighup_stays_ignored)
{
    skip_under_valgrind();
    int r;
    child c = signalled_while_writing(SIGHUP, SIGHUP, 0, &r);
    char buf[4096];
    while (read(r, buf, sizeof buf) > 0)
        ;
    close(r);
    char err[1024];
    int ws = finish(&c, err, sizeof err);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
              "wait status %#x, stderr: %s", ws, err);
    cr_assert_eq(names_with(".tmp."), 0);
    tensor *out;
    OK(npy_read("work/out.npy", &out));
    cr_assert_eq(out->ndim, 3);
    tensor_free(out);
}
//<
