//> 01
/* gnuplot.c: what every gnuplot picture shares: checks, numbers and
 * quoted text, the script's opening, the data and script written
 * together, and gnuplot run without a shell; see gnuplot.h. */
#define _GNU_SOURCE /* pipe2, O_CLOEXEC, ..._addclosefrom_np */
#include "plot/gnuplot.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "io/fileset.h"
#include "trace/trace.h"

extern char **environ;

/* --- checks -------------------------------------------------------------- */

int gnuplot_check_text(const char *who, const char *what, const char *s,
                       int no_double_quotes)
{
    for (const unsigned char *p = (const unsigned char *)s; s && *p; p++) {
        int control = *p < 0x20 || *p == 0x7f;
        if (!control && !(no_double_quotes && *p == '"'))
            continue;
        if (!no_double_quotes)
            return mha_fail(GSL_EINVAL,
                            "%s: %s contains control character 0x%02x; "
                            "labels and titles are single lines",
                            who, what, *p);
        return mha_fail(GSL_EINVAL,
                        "%s: %s contains %s 0x%02x; labels and titles are "
                        "single lines without double quotes",
                        who, what,
                        control ? "control character" : "a double quote", *p);
    }
    return GSL_SUCCESS;
}

int gnuplot_check_base(const char *who, const char *base, const char *example,
                       int no_double_quotes)
{
    if (!base || !*base)
        return mha_fail(GSL_EINVAL, "%s: the output path is %s", who,
                        base ? "empty" : "NULL");
    const char *slash = strrchr(base, '/');
    if (slash && !slash[1])
        return mha_fail(GSL_EINVAL,
                        "%s: output path %s ends in '/'; give a file name "
                        "without extension, e.g. %s",
                        who, base, example);
    return gnuplot_check_text(who, "the output path", base, no_double_quotes);
}

int gnuplot_check_formats(const char *who, int formats)
{
    /* named as the callers of heatmap.h and plot.h write them */
    if (formats == 0 || (formats & ~(GNUPLOT_PNG | GNUPLOT_SVG)))
        return mha_fail(GSL_EINVAL,
                        "%s: formats %d is not HEATMAP_PNG (1), HEATMAP_SVG "
                        "(2) or both (3)",
                        who, formats);
    return GSL_SUCCESS;
}

/* --- numbers and text ---------------------------------------------------- */

void gnuplot_put_number(FILE *f, double v)
{
    char buf[TRACE_NUMBER_MAX];
    fputs(trace_number_str(buf, sizeof buf, v), f);
}

/* Where quote() puts its characters: a stream, a buffer, or (neither)
 * nowhere, only counting them. */
typedef struct {
    FILE *f;
    char *buf;
    size_t n;
} sink;

static void put(sink *k, char c)
{
    if (k->f)
        fputc(c, k->f);
    else if (k->buf)
        k->buf[k->n] = c;
    k->n++;
}

/* The one quoting rule: s then suffix between single quotes, each quote
 * inside doubled.  gnuplot reads a string that opens with a doubled quote
 * as an empty string and a stray token, so text that starts with a quote
 * goes between double quotes instead, with a backslash before each
 * backslash and double quote (the only escapes such text then needs). */
static void quote(sink *k, const char *s, const char *suffix)
{
    const char *parts[2] = {s, suffix};
    int dq = s[0] == '\'' || (!s[0] && suffix[0] == '\'');
    put(k, dq ? '"' : '\'');
    for (int i = 0; i < 2; i++)
        for (const char *p = parts[i]; *p; p++) {
            if (!dq && *p == '\'')
                put(k, '\'');
            if (dq && (*p == '\\' || *p == '"'))
                put(k, '\\');
            put(k, *p);
        }
    put(k, dq ? '"' : '\'');
}

void gnuplot_put_quoted(FILE *f, const char *s, const char *suffix)
{
    sink k = {.f = f};
    quote(&k, s, suffix);
}

char *gnuplot_quoted(const char *who, const char *s, const char *suffix)
{
    sink k = {0};
    quote(&k, s, suffix);
    k.buf = mha_malloc(k.n + 1, 1, who);
    if (!k.buf)
        return NULL;
    k.n = 0;
    quote(&k, s, suffix);
    k.buf[k.n] = '\0';
    return k.buf;
}

/* --- the script's opening, and the files written together ---------------- */

void gnuplot_put_preamble(FILE *f, const char *name, int width, int height,
                          const char *what, ...)
{
    va_list ap;
    va_start(ap, what);
    fputs("# ", f);
    vfprintf(f, what, ap);
    va_end(ap);
    fprintf(f,
            ".  Render beside this script with\n"
            "#     gnuplot -e \"fmt='png'\" %s.gp    (fmt: 'png' or 'svg')\n",
            name);
    fputs("if (!exists(\"fmt\")) fmt = 'png'\n", f);
    fputs("# the data and the image live beside this script, wherever "
          "gnuplot runs:\n"
          "# ARG0 is the script's path as gnuplot was given it\n"
          "here = ''\n"
          "do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') "
          "{ here = ARG0[1:i] } }\n",
          f);
    fputs("data = here . ", f);
    gnuplot_put_quoted(f, name, ".dat");
    fputs("\nif (!exists(\"out\")) out = here . ", f);
    gnuplot_put_quoted(f, name, ".");
    fputs(" . fmt\n", f);
    fprintf(f,
            "if (fmt eq 'svg') {\n"
            "    set terminal svg size %d,%d font 'sans,11' noenhanced "
            "background '#ffffff'\n"
            "} else { if (fmt eq 'png') {\n"
            "    set terminal pngcairo size %d,%d font 'sans,11' noenhanced "
            "background '#ffffff'\n"
            "} else {\n"
            "    exit error sprintf(\"fmt must be 'png' or 'svg', not '%%s'\", "
            "fmt)\n"
            "} }\n"
            "set output out\n",
            width, height, width, height);
}

/* a then b in a new string, or NULL (out of memory, recorded). */
static char *concat(const char *who, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *s = mha_malloc(na + nb + 1, 1, who);
    if (s) {
        memcpy(s, a, na);
        memcpy(s + na, b, nb + 1);
    }
    return s;
}

int gnuplot_write(const char *who, const char *base, gnuplot_writer write,
                  const void *ctx)
{
    const char *slash = strrchr(base, '/');
    const char *name = slash ? slash + 1 : base;
    char *dat_path = concat(who, base, ".dat");
    char *gp_path = dat_path ? concat(who, base, ".gp") : NULL;
    fileset *set = NULL;
    FILE *dat, *gp;
    int status = gp_path ? fileset_begin(who, &set) : GSL_ENOMEM;
    if (!status)
        status = fileset_add(set, dat_path, &dat, NULL);
    if (!status)
        status = fileset_add(set, gp_path, &gp, NULL);
    if (!status) {
        write(dat, gp, name, ctx);
        status = fileset_commit(set, NULL);
    }
    fileset_end(set);
    free(dat_path);
    free(gp_path);
    return status;
}

/* --- running gnuplot ------------------------------------------------------ */

static const char *gnuplot_program(void)
{
    const char *p = getenv("MHA_GNUPLOT");
    return p && *p ? p : "gnuplot";
}

static int is_executable(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) &&
           access(path, X_OK) == 0;
}

/* The lookup posix_spawnp and execvp make: a name with a '/' is a path,
 * any other name is searched for along PATH. */
static int program_exists(const char *prog)
{
    if (strchr(prog, '/'))
        return is_executable(prog);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    char buf[4096];
    for (const char *p = path;;) {
        const char *end = strchr(p, ':');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        /* an empty PATH entry means the current directory */
        int n = len ? snprintf(buf, sizeof buf, "%.*s/%s", (int)len, p, prog)
                    : snprintf(buf, sizeof buf, "%s", prog);
        if (n > 0 && (size_t)n < sizeof buf && is_executable(buf))
            return 1;
        if (!end)
            return 0;
        p = end + 1;
    }
}

int gnuplot_available(void) { return program_exists(gnuplot_program()); }

/* GNUPLOT_MISSING, saying which gnuplot was looked for; with kept (a base
 * path), that base.dat and base.gp are kept. */
static int not_found(const char *kept)
{
    const char *env = getenv("MHA_GNUPLOT");
    int overridden = env && *env;
    char which[MHA_ERROR_MAX];
    snprintf(which, sizeof which, "gnuplot not found%s%s%s",
             overridden ? " (MHA_GNUPLOT=" : "", overridden ? env : "",
             overridden ? ")" : "");
    if (!kept)
        return mha_fail(GNUPLOT_MISSING, "%s; install gnuplot-nox to render",
                        which);
    return mha_fail(GNUPLOT_MISSING,
                    "%s; kept %s.dat and %s.gp (install gnuplot-nox to "
                    "render)",
                    which, kept, kept);
}

/* The last non-blank line of text, trimmed, in place. */
static const char *last_line(char *text)
{
    size_t n = strlen(text);
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\r' ||
                     text[n - 1] == ' '))
        text[--n] = '\0';
    char *nl = strrchr(text, '\n');
    return nl ? nl + 1 : text;
}

/* The attributes gnuplot starts with: the signal mask this program had
 * outside cleanup_hold, and SIGXFSZ's default action, which cleanup.h
 * turns to "ignore" here (a signal this program catches gets its default
 * back at exec by itself). */
static int child_attributes(posix_spawnattr_t *attr)
{
    int e = posix_spawnattr_init(attr);
    if (e)
        return e;
    sigset_t mask, dfl;
    cleanup_outer_mask(&mask);
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGXFSZ);
    e = posix_spawnattr_setsigmask(attr, &mask);
    if (!e)
        e = posix_spawnattr_setsigdefault(attr, &dfl);
    if (!e)
        e = posix_spawnattr_setflags(attr, POSIX_SPAWN_SETSIGMASK |
                                               POSIX_SPAWN_SETSIGDEF);
    if (e)
        posix_spawnattr_destroy(attr);
    return e;
}

/* Start argv[0] with stdin from /dev/null and stdout and stderr into a
 * pipe, keep the last tailn - 1 bytes it prints in tail, and wait for it.
 * Returns 0 and the wait status in *wstatus (-1 if it was lost), or the
 * errno of a start that failed (ENOENT: no such program).  While it runs
 * it is registered with cleanup.h (child), so a signal that ends this
 * program ends it too. */
int gnuplot_spawn(char *const argv[], cleanup_entry *child, int *wstatus,
                  char *tail, size_t tailn)
{
    tail[0] = '\0';
    *wstatus = -1;
    int fds[2];
    /* close-on-exec: the child inherits only the dup2'ed copies, and no
     * other child this program starts holds the pipe open */
    if (pipe2(fds, O_CLOEXEC) != 0)
        return errno;
    pid_t pid = -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    int e = child_attributes(&attr);
    if (e) {
        close(fds[0]);
        close(fds[1]);
        return e;
    }
    e = posix_spawn_file_actions_init(&fa);
    if (!e) {
        e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY,
                                             0);
        if (!e)
            e = posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
        if (!e)
            e = posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 34)
        /* and nothing else: the caller's own descriptors, opened without
         * close-on-exec, stay out of the child's hands */
        if (!e)
            e = posix_spawn_file_actions_addclosefrom_np(&fa, 3);
#endif
        /* started and registered with the signals held off: none finds
         * it running and not registered */
        cleanup_hold();
        if (!e)
            e = posix_spawnp(&pid, argv[0], &fa, &attr, argv, environ);
        if (!e)
            cleanup_set_child(child, pid);
        cleanup_release();
        posix_spawn_file_actions_destroy(&fa);
    }
    posix_spawnattr_destroy(&attr);
    close(fds[1]); /* else the read below never sees end-of-file */
    if (e) {
        close(fds[0]);
        return e;
    }

    /* keep the tail: gnuplot's error comes last */
    size_t have = 0;
    for (;;) {
        char chunk[512];
        ssize_t got = read(fds[0], chunk, sizeof chunk);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (ssize_t i = 0; i < got; i++) {
            if (have + 1 >= tailn) {
                memmove(tail, tail + tailn / 2, have - tailn / 2);
                have -= tailn / 2;
            }
            tail[have++] = chunk[i];
        }
    }
    tail[have] = '\0';
    close(fds[0]);
    /* wait for its end without reaping it, so that its pid is not free
     * for another process while it is still registered */
    siginfo_t info;
    while (waitid(P_PID, (id_t)pid, &info, WEXITED | WNOWAIT) < 0 &&
           errno == EINTR)
        ;
    cleanup_set_child(child, 0);
    while (waitpid(pid, wstatus, 0) < 0)
        if (errno != EINTR) {
            *wstatus = -1;
            break;
        }
    return 0;
}

int gnuplot_run(const char *who, const char *script, const char *fmt,
                const char *out, const char *image)
{
    const char *prog = gnuplot_program();
    if (!program_exists(prog))
        return not_found(NULL);
    /* -e "fmt='png'; out='...'", the path quoted for gnuplot */
    char *quoted_out = gnuplot_quoted(who, out, "");
    char *setvars = NULL, *script_arg = NULL;
    if (quoted_out)
        setvars = mha_malloc(strlen(quoted_out) + strlen(fmt) + 16, 1, who);
    if (setvars) {
        sprintf(setvars, "fmt='%s'; out=%s", fmt, quoted_out);
        /* a script path starting with '-' would read as an option */
        script_arg = concat(who, script[0] == '-' ? "./" : "", script);
    }
    free(quoted_out);
    if (!script_arg) {
        free(setvars);
        return GSL_ENOMEM;
    }
    char *argv[] = {(char *)prog, "-d", "-e", setvars, script_arg, NULL};
    int wstatus;
    char tail[1024];
    cleanup_entry *child = cleanup_add_child(who);
    if (!child) {
        free(setvars);
        free(script_arg);
        return GSL_ENOMEM;
    }
    int e = gnuplot_spawn(argv, child, &wstatus, tail, sizeof tail);
    cleanup_forget(child);
    free(setvars);
    free(script_arg);

    struct stat st;
    if (e == ENOENT)
        return not_found(NULL);
    if (e)
        return mha_fail(GSL_EFAILED, "%s: cannot run %s on %s: %s", who, prog,
                        script, strerror(e));
    if (wstatus == -1)
        return mha_fail(GSL_EFAILED, "%s: lost track of %s on %s", who, prog,
                        script);
    if (WIFSIGNALED(wstatus))
        return mha_fail(GSL_EFAILED,
                        "%s: %s was killed by signal %d rendering %s from %s",
                        who, prog, WTERMSIG(wstatus), image, script);
    if (WEXITSTATUS(wstatus) != 0) {
        const char *line = last_line(tail);
        return mha_fail(GSL_EFAILED,
                        "%s: %s exited with status %d rendering %s from %s%s%s",
                        who, prog, WEXITSTATUS(wstatus), image, script,
                        *line ? ": " : "", line);
    }
    if (stat(out, &st) != 0 || st.st_size == 0)
        return mha_fail(GSL_EFAILED,
                        "%s: %s exited with status 0 but wrote no %s image "
                        "from %s",
                        who, prog, fmt, script);
    return GSL_SUCCESS;
}

int gnuplot_render(const char *who, const char *base, int formats)
{
    int status = gnuplot_check_formats(who, formats);
    if (status)
        return status;
    if (!gnuplot_available())
        return not_found(base);
    static const char *const fmts[2] = {"png", "svg"}; /* bit i: fmts[i] */
    char *script = concat(who, base, ".gp");
    fileset *set = NULL;
    status = script ? fileset_begin(who, &set) : GSL_ENOMEM;
    for (int i = 0; i < 2 && !status; i++) {
        if (!(formats & (1 << i)))
            continue;
        char ext[8];
        snprintf(ext, sizeof ext, ".%s", fmts[i]);
        char *image = concat(who, base, ext);
        const char *tmp;
        status = image ? fileset_add_name(set, image, &tmp, NULL) : GSL_ENOMEM;
        if (!status)
            status = gnuplot_run(who, script, fmts[i], tmp, image);
        if (status == GNUPLOT_MISSING)
            status = not_found(base);
        free(image);
    }
    if (!status)
        status = fileset_commit(set, NULL);
    fileset_end(set);
    free(script);
    return status;
}
//<
