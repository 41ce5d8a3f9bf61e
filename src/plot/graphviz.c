//> 21
/* graphviz.c: base.dot drawn by Graphviz's dot; see graphviz.h. */
#include "plot/graphviz.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/error.h"
#include "io/fileset.h"

/* dot -T<fmt> -o <out> <dot>: GSL_SUCCESS, GRAPHVIZ_MISSING or
 * GSL_EFAILED. */
static int run_dot(const char *who, const char *dot, const char *fmt,
                   const char *out, const char *image)
{
    char format[16], tail[1024];
    snprintf(format, sizeof format, "-T%s", fmt);
    // a path starting with '-' would read as an option
    size_t n = strlen(dot) + 3;
    char *src = mha_malloc(n, 1, who);
    if (!src)
        return GSL_ENOMEM;
    snprintf(src, n, "%s%s", dot[0] == '-' ? "./" : "", dot);
    char *argv[] = {"dot", format, "-o", (char *)out, src, NULL};
    cleanup_entry *child = cleanup_add_child(who);
    if (!child) {
        free(src);
        return GSL_ENOMEM;
    }
    int wstatus;
    int e = gnuplot_spawn(argv, child, &wstatus, tail, sizeof tail);
    cleanup_forget(child);
    free(src);
    if (e == ENOENT)
        return GRAPHVIZ_MISSING;
    if (e)
        return mha_fail(GSL_EFAILED, "%s: cannot run dot on %s: %s", who, dot,
                        strerror(e));
    if (wstatus == -1 || WIFSIGNALED(wstatus) || WEXITSTATUS(wstatus) != 0) {
        size_t len = strlen(tail);
        while (len > 0 && (tail[len - 1] == '\n' || tail[len - 1] == ' '))
            tail[--len] = '\0';
        const char *line = strrchr(tail, '\n') ? strrchr(tail, '\n') + 1 : tail;
        return mha_fail(GSL_EFAILED, "%s: dot %s %d rendering %s from %s%s%s",
                        who,
                        wstatus != -1 && WIFSIGNALED(wstatus)
                            ? "was killed by signal" : "exited with status",
                        wstatus == -1 ? -1
                        : WIFSIGNALED(wstatus) ? WTERMSIG(wstatus)
                                               : WEXITSTATUS(wstatus),
                        image, dot, *line ? ": " : "", line);
    }
    struct stat st;
    if (stat(out, &st) != 0 || st.st_size == 0)
        return mha_fail(GSL_EFAILED,
                        "%s: dot exited with status 0 but wrote no %s image "
                        "from %s", who, fmt, dot);
    return GSL_SUCCESS;
}

int graphviz_render(const char *who, const char *base, int formats)
{
    int status = gnuplot_check_formats(who, formats);
    if (status)
        return status;
    static const char *const fmts[2] = {"png", "svg"}; /* bit i: fmts[i] */
    size_t n = strlen(base) + 8;
    char *dot = mha_malloc(n, 1, who), *image = mha_malloc(n, 1, who);
    fileset *set = NULL;
    status = dot && image ? fileset_begin(who, &set) : GSL_ENOMEM;
    if (dot)
        snprintf(dot, n, "%s.dot", base);
    for (int i = 0; i < 2 && !status; i++) {
        if (!(formats & (1 << i)))
            continue;
        snprintf(image, n, "%s.%s", base, fmts[i]);
        const char *tmp;
        status = fileset_add_name(set, image, &tmp, NULL);
        if (!status)
            status = run_dot(who, dot, fmts[i], tmp, image);
    }
    if (status == GRAPHVIZ_MISSING)
        status = mha_fail(GRAPHVIZ_MISSING,
                          "dot not found; kept %s (install graphviz to render)",
                          dot);
    if (!status)
        status = fileset_commit(set, NULL);
    fileset_end(set);
    free(dot);
    free(image);
    return status;
}
//<
