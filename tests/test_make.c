//> full
/* test_make.c: the Makefile's variables that name places and exercises,
 * checked before make writes or runs anything.
 *
 * Reading the Makefile writes BUILD/tests/chapter-list (even for make
 * -n), so a BUILD that is empty or absolute used to write at the root of
 * the file system; EXERCISE went to the shell unquoted.  Each case runs
 * make -n from the top of the project, as a user would, and must end in
 * one line on stderr, exit status 2, and nothing written. */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct made {
    int status;
    char err[4096];
} made;

/* make with args (NULL-terminated), from the top of the project, with
 * no MAKEFLAGS of the make that may be running the suite.  Not under
 * valgrind (make memcheck), which would check make itself. */
static made run_make(char *const *args)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("make is not ours to check under valgrind");
    char *argv[16] = {"make", "--no-print-directory"};
    size_t n = 2;
    for (; args[n - 2]; n++) {
        cr_assert_lt(n, 15);
        argv[n] = args[n - 2];
    }
    argv[n] = NULL;
    FILE *err = tmpfile();
    cr_assert_not_null(err);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 1) < 0 || dup2(fileno(err), 2) < 0)
            _exit(126);
        unsetenv("MAKEFLAGS");
        unsetenv("MFLAGS");
        unsetenv("MAKELEVEL");
        unsetenv("BUILD");
        unsetenv("EXERCISE");
        execvp("make", argv);
        _exit(127);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    made m = {WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws), ""};
    rewind(err);
    size_t len = fread(m.err, 1, sizeof m.err - 1, err);
    m.err[len] = '\0';
    fclose(err);
    return m;
}

/* Refused by make: status 2 and one line on stderr that holds want. */
static void assert_make_refuses(char *const *args, const char *want)
{
    made m = run_make(args);
    cr_assert_eq(m.status, 2, "%s: exit %d, stderr %s", args[0], m.status,
                 m.err);
    char *nl = strchr(m.err, '\n');
    cr_assert(nl && nl[1] == '\0', "not one line: %s", m.err);
    cr_assert(strstr(m.err, want) != NULL, "stderr: %s\nwanted: %s", m.err,
              want);
}

static void assert_absent(const char *path)
{
    struct stat st;
    cr_assert(lstat(path, &st) != 0 && errno == ENOENT, "%s was written",
              path);
}

#define BUILD_RULE                                                            \
    "must be build or a folder under build/ (letters, digits, . _ - and /; " \
    "no space, no . or .. step)"

Test(make, an_empty_build_is_refused_before_anything_is_written)
{
    struct stat st;
    int had_stamp = stat("/tests/chapter-list", &st) == 0;
    assert_make_refuses((char *[]){"-n", "BUILD=", "build", NULL},
                        "*** BUILD '' " BUILD_RULE ".  Stop.");
    if (!had_stamp)
        assert_absent("/tests/chapter-list");
    assert_make_refuses((char *[]){"-n", "BUILD= ", "build", NULL},
                        "*** BUILD '' " BUILD_RULE);
}

Test(make, a_build_with_a_space_is_refused)
{
    assert_make_refuses((char *[]){"BUILD=my build", "build", NULL},
                        "*** BUILD 'my build' " BUILD_RULE);
    assert_absent("my build");
}

/* Outside build/: absolute, the sources, a way out, characters the shell
 * or make would read. */
Test(make, a_build_outside_build_is_refused)
{
    char dir[] = "/tmp/mha-make-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    cr_assert_eq(rmdir(dir), 0); // a name nothing has
    char arg[64];
    snprintf(arg, sizeof arg, "BUILD=%s", dir);
    assert_make_refuses((char *[]){"-n", arg, "build", NULL}, BUILD_RULE);
    assert_absent(dir);
    const char *bad[] = {"BUILD=/", "BUILD=.",          "BUILD=src",
                         "BUILD=buildx", "BUILD=build/../x", "BUILD=build/./x",
                         "BUILD=build/a'b", "BUILD=build/a%b", "BUILD=build/*",
                         "BUILD=build/x:y"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char want[256];
        snprintf(want, sizeof want, "*** BUILD '%s' " BUILD_RULE,
                 bad[i] + strlen("BUILD="));
        assert_make_refuses((char *[]){"-n", (char *)bad[i], "build", NULL},
                            want);
    }
    assert_absent("x");
}

/* One exercise's name, or one line: 'a b' graded a, and '*' became the
 * file names of the top of the project. */
Test(make, exercise_is_one_name)
{
    const char *bad[] = {"a b", "*", "x;y", "ex/../a", "a-b"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char arg[64], want[256];
        snprintf(arg, sizeof arg, "EXERCISE=%s", bad[i]);
        snprintf(want, sizeof want,
                 "*** EXERCISE '%s' must be one exercise's name, letters, "
                 "digits and _ (make grade lists them).  Stop.",
                 bad[i]);
        assert_make_refuses((char *[]){"-n", "grade", arg, NULL}, want);
    }
}

/* tools/grade.py itself takes one name, whoever calls it: more is a
 * usage error, exit status 2. */
Test(make, grade_py_takes_one_name)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("the shell is not ours to check under valgrind");
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null < 0 || dup2(null, 2) < 0)
            _exit(126);
        execl("tools/grade.py", "grade.py", "run", "build/tests/run_tests",
              "build", "a", "b", (char *)NULL);
        _exit(127);
    }
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 2, "status %d", ws);
}

/* Every object names the headers it read (DEPFLAGS), in whichever folder
 * of src/ it sits: a header touched rebuilds what includes it, directly
 * or through another header, and nothing that does not. */
static int rebuilt_by(const char *header, const char *object)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("make is not ours to check under valgrind");
    char build[512];
    snprintf(build, sizeof build, "%s", CHAPTER_DIR);
    char *slash = strrchr(build, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    char cmd[2048], obj[600];
    snprintf(obj, sizeof obj, "%s/obj/%s.o", build, object);
    struct stat st;
    if (stat(obj, &st) != 0)
        cr_skip_test("%s is not built", obj);
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory "
             "-n BUILD=%s -W %s %s 2>&1", build, header, obj);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char out[8192];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    cr_assert_eq(pclose(p), 0, "%s: %s", cmd, out);
    char want[300];
    snprintf(want, sizeof want, "-c src/%s.c ", object);
    return strstr(out, want) != NULL;
}

/* Reading the Makefile leaves BUILD/tests/chapter-list as it is while the
 * chapters are the same: it was rewritten by every make, so every make
 * compiled every suite again (a minute of each student's grade). */
Test(make, the_chapter_list_is_written_only_when_the_chapters_change)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("make is not ours to check under valgrind");
    char build[512], stamp[600], cmd[2048];
    snprintf(build, sizeof build, "%s", CHAPTER_DIR);
    char *slash = strrchr(build, '/');
    cr_assert_not_null(slash);
    *slash = '\0';
    snprintf(stamp, sizeof stamp, "%s/tests/chapter-list", build);
    snprintf(cmd, sizeof cmd,
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make --no-print-directory "
             "-n BUILD=%s %s > /dev/null 2>&1", build, stamp);
    struct stat before, after;
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    cr_assert_eq(stat(stamp, &before), 0, "%s", stamp);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    cr_assert_eq(stat(stamp, &after), 0, "%s", stamp);
    cr_assert(before.st_mtim.tv_sec == after.st_mtim.tv_sec &&
                  before.st_mtim.tv_nsec == after.st_mtim.tv_nsec,
              "make rewrote %s though the chapters are the same", stamp);
}

Test(make, a_header_rebuilds_what_includes_it)
{
    cr_assert(rebuilt_by("src/tensor/tensor.h", "tensor/view"));
    cr_assert(rebuilt_by("src/tensor/tensor.h", "nn/attention")); /* through linear.h */
    cr_assert(rebuilt_by("src/trace/trace.h", "tensor/tensor_trace"));
    cr_assert(rebuilt_by("src/nn/softmax.h", "cli/mha"));
    cr_assert_not(rebuilt_by("src/plot/heatmap.h", "nn/attention"));
}

/* make help prints the comment at the top of the Makefile, its first
 * line to its last, without the "# " of each line or the marks that cut
 * a snapshot or a handout. */
Test(make, help_prints_the_makefiles_top_comment)
{
    if (getenv("MHA_MEMCHECK"))
        cr_skip_test("make is not ours to check under valgrind");
    FILE *p = popen("env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "
                    "make --no-print-directory help 2>&1", "r");
    cr_assert_not_null(p);
    static char out[16384];
    size_t len = fread(out, 1, sizeof out - 1, p);
    out[len] = '\0';
    int status = pclose(p);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "make help: status %d\n%s", status, out);
    const char *first = "Multi-head attention, step by step, in C.\n\n";
    cr_assert(!strncmp(out, first, strlen(first)), "make help begins:\n%.200s",
              out);
    cr_assert(strstr(out, "\n  make help         this list\n"), "%s", out);
    cr_assert(strstr(out, "\n  make walkthrough  run every chapter in order"),
              "%s", out);
    const char *last = "built into build/gslcblas.\n";
    cr_assert(len >= strlen(last) && !strcmp(out + len - strlen(last), last),
              "make help ends:\n%s", out + (len > 200 ? len - 200 : 0));
    cr_assert(!strstr(out, "\n#") && !strstr(out, "> full") &&
                  !strstr(out, "\n<"),
              "make help shows a comment mark:\n%s", out);
}
//<
