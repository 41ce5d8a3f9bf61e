//> full
/* test_programs.c: every program says so when its output did not reach
 * stdout.
 *
 * Each chapter, each mha command that prints and each tool that prints
 * runs with stdout on /dev/full (every write fails with ENOSPC): it must
 * exit non-zero with exactly one line on stderr, naming the failure.  A
 * program that exited 0 there would let `make transcripts` on a full disk
 * replace a transcript with an empty file.  mha keeps its own contract:
 * exit status 2 and "mha <command>: cannot write to stdout: ...".
 */
#include "check.h"

#include <criterion/parameterized.h>
#include <fcntl.h>
#include <libgen.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef CHAPTER_DIR
#error "CHAPTER_DIR must name the directory of the built chapters"
#endif
#ifndef MHA_BIN
#error "MHA_BIN must name the built mha program"
#endif

/* A program's exit status (or 128 + signal) and its stderr. */
typedef struct ran {
    int status;
    char err[4096];
} ran;

/* argv[0] with stdout on /dev/full; stderr captured. */
static ran run_to_full(char *const argv[])
{
    ran r = {0};
    int err;
    pid_t pid = fork_capturing_stderr(&err);
    if (pid == 0) {
        int full = open("/dev/full", O_WRONLY);
        if (full < 0 || dup2(full, 1) < 0)
            _exit(126);
        execv(argv[0], argv);
        _exit(127);
    }
    read_until_eof(err, r.err, sizeof r.err);
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    r.status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
    return r;
}

/* Exit status `status` (or any non-zero one when it is -1) and exactly
 * one line on stderr that holds "No space left on device". */
static void assert_one_line_failure(const ran *r, int status, const char *what)
{
    if (status < 0)
        cr_assert(r->status != 0, "%s exited with status 0 on /dev/full", what);
    else
        cr_assert_eq(r->status, status, "%s: exit %d, stderr: %s", what,
                     r->status, r->err);
    size_t len = strlen(r->err);
    cr_assert(len > 0 && r->err[len - 1] == '\n' &&
                  !memchr(r->err, '\n', len - 1),
              "%s: not one line on stderr: %s", what, r->err);
    cr_assert_not_null(strstr(r->err, "No space left on device"),
                       "%s: stderr: %s", what, r->err);
}

/* Runs that stop half-way are about exit statuses, not memory: the
 * chapters' whole runs are valgrind's (tools/memcheck.sh). */
static void need_dev_full(void)
{
    skip_under_valgrind();
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no /dev/full");
}

/* --- the chapters -------------------------------------------------------- */

struct chapter {
    char name[64];
};
static struct chapter chapters[] = {
#define AS_PARAM(n) {n},
    CHAPTER_PARAMS
};

ParameterizedTestParameters(programs, chapter_on_a_full_disk)
{
    return cr_make_param_array(struct chapter, chapters,
                               sizeof chapters / sizeof chapters[0]);
}

ParameterizedTest(struct chapter *ch, programs, chapter_on_a_full_disk)
{
    need_dev_full();
    char dir[] = "/tmp/mha-programs-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    setenv("MHA_PLOTS_DIR", dir, 1); // its pictures go here, not to plots/
    setenv("MHA_QUICK", "1", 1);     // the short run: what fails is stdout
    char path[512];
    snprintf(path, sizeof path, "%s/%s", CHAPTER_DIR, ch->name);
    char *argv[] = {path, NULL};
    ran r = run_to_full(argv);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);
    assert_one_line_failure(&r, 1, ch->name);
}

/* --- mha ------------------------------------------------------------------ */

Test(programs, every_mha_command_on_a_full_disk)
{
    need_dev_full();
    static const struct {
        const char *args; /* '|'-separated */
        const char *line;
    } cases[] = {
        {"--help", "mha: cannot write to stdout: No space left on device\n"},
        {"trace", "mha trace: cannot write to stdout: No space left on device\n"},
        {"trace|--json", "mha trace: cannot write to stdout: No space left on device\n"},
        {"trace|--dot", "mha trace: cannot write to stdout: No space left on device\n"},
        {"trace|--quiz", "mha trace: cannot write to stdout: No space left on device\n"},
        {"quiz|--seed|3|--solution", "mha quiz: cannot write to stdout: No space left on device\n"},
        {"quiz|--seed|3|--json", "mha quiz: cannot write to stdout: No space left on device\n"},
        {"forward|--help", "mha forward: cannot write to stdout: No space left on device\n"},
        {"heatmap|--help", "mha heatmap: cannot write to stdout: No space left on device\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[256], *argv[16];
        size_t n = 0;
        argv[n++] = MHA_BIN;
        snprintf(buf, sizeof buf, "%s", cases[i].args);
        for (char *s = strtok(buf, "|"); s; s = strtok(NULL, "|"))
            argv[n++] = s;
        argv[n] = NULL;
        ran r = run_to_full(argv);
        cr_assert_eq(r.status, 2, "mha %s: exit %d, stderr: %s",
                     cases[i].args, r.status, r.err);
        cr_assert_str_eq(r.err, cases[i].line, "mha %s", cases[i].args);
    }
}

/* --- the tools that print ------------------------------------------------- */

/* build/<name>, beside build/mha. */
static void tool(const char *name, char *path, size_t n)
{
    char bin[512];
    snprintf(bin, sizeof bin, "%s", MHA_BIN);
    snprintf(path, n, "%s/%s", dirname(bin), name);
    if (access(path, X_OK) != 0)
        cr_skip_test("%s is not built", path);
}

Test(programs, cblas_info_on_a_full_disk)
{
    need_dev_full();
    char path[600];
    tool("cblas-info", path, sizeof path);
    char *argv[] = {path, NULL};
    ran r = run_to_full(argv);
    assert_one_line_failure(&r, 1, "cblas-info");
    cr_assert_str_eq(r.err,
                     "cblas-info: cannot write to stdout: No space left on "
                     "device\n");
}

Test(programs, bench_on_a_full_disk)
{
    need_dev_full();
    char path[600];
    tool("bench", path, sizeof path);
    char *argv[] = {path, "--child-notrace", "32", "1", NULL}; // one line
    ran r = run_to_full(argv);
    assert_one_line_failure(&r, 1, "bench");
}

Test(programs, mha_grad_on_a_full_disk)
{
    need_dev_full();
    char path[600];
    tool("mha-grad", path, sizeof path);
    char *argv[] = {path, "--help", NULL};
    ran r = run_to_full(argv);
    assert_one_line_failure(&r, 2, "mha-grad");
    cr_assert_str_eq(r.err,
                     "mha-grad: cannot write to stdout: No space left on "
                     "device\n");
}
//<
