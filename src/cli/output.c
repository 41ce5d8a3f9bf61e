/* output.c: write every output under a temporary name, then rename them
 * all into place (see output.h). */
#define _POSIX_C_SOURCE 200809L
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"

/* The bits a file at path should get: its own when it exists, else what
 * a new file gets under the current umask. */
static mode_t mode_for(const char *path)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode))
        return st.st_mode & 07777;
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* "<s><suffix>" in a new buffer, or NULL. */
static char *join(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    char *out = mha_malloc(a + b + 1, 1, "mha");
    if (out) {
        memcpy(out, s, a);
        memcpy(out + a, suffix, b + 1);
    }
    return out;
}

static int stage_npy(cli_output *o)
{
    o->tmp = join(o->path, ".mha-XXXXXX");
    if (!o->tmp)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        int e = errno;
        free(o->tmp);
        o->tmp = NULL;
        return cli_error("%s %s: cannot create a file next to it: %s",
                         o->option, o->path, strerror(e));
    }
    int bad = fchmod(fd, mode_for(o->path));
    int e = errno;
    close(fd);
    if (bad)
        return cli_error("%s %s: cannot set the permissions of a new file: %s",
                         o->option, o->path, strerror(e));
    if (npy_write(o->tmp, o->npy))
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    return CLI_OK;
}

/* The files heatmap_render may leave in the scratch directory. */
static const char *const scratch_ext[] = {".dat", ".gp", ".png", ".svg"};

static int stage_image(cli_output *o)
{
    // the scratch directory goes beside path, so rename never crosses
    // file systems
    const char *slash = strrchr(o->path, '/');
    size_t dir_len = slash ? (size_t)(slash - o->path) + 1 : 0;
    char *dir = mha_malloc(dir_len + 1, 1, "mha");
    if (!dir)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    memcpy(dir, o->path, dir_len);
    dir[dir_len] = '\0';
    o->tmp_dir = join(dir, ".mha-heatmap-XXXXXX");
    free(dir);
    if (!o->tmp_dir)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    if (!mkdtemp(o->tmp_dir)) {
        int e = errno;
        free(o->tmp_dir);
        o->tmp_dir = NULL;
        return cli_error("%s %s: cannot create a directory next to it: %s",
                         o->option, o->path, strerror(e));
    }
    char *base = join(o->tmp_dir, "/heatmap");
    if (!base)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    int status = heatmap_render(o->image, o->heatmap, base, o->format);
    o->tmp = join(base, o->format == HEATMAP_PNG ? ".png" : ".svg");
    free(base);
    if (status == HEATMAP_NO_GNUPLOT)
        return cli_error("%s %s: gnuplot not found (install gnuplot-nox, or "
                         "use --terminal)",
                         o->option, o->path);
    if (status)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    if (!o->tmp)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    if (chmod(o->tmp, mode_for(o->path)) != 0)
        return cli_error("%s %s: cannot set the permissions of a new file: %s",
                         o->option, o->path, strerror(errno));
    return CLI_OK;
}

/* Remove whatever o still has in flight. */
static void discard(cli_output *o)
{
    if (o->tmp)
        unlink(o->tmp);
    free(o->tmp);
    o->tmp = NULL;
    if (o->tmp_dir) {
        for (size_t i = 0; i < sizeof scratch_ext / sizeof scratch_ext[0]; i++) {
            char *f = join(o->tmp_dir, "/heatmap");
            char *g = f ? join(f, scratch_ext[i]) : NULL;
            if (g)
                unlink(g);
            free(f);
            free(g);
        }
        rmdir(o->tmp_dir);
        free(o->tmp_dir);
        o->tmp_dir = NULL;
    }
}

int cli_write_outputs(cli_output *outs, size_t n)
{
    int status = CLI_OK;
    // pass 1: every file complete under its temporary name
    for (size_t i = 0; i < n && !status; i++)
        status = outs[i].npy ? stage_npy(&outs[i]) : stage_image(&outs[i]);
    // pass 2: all into place, or none
    size_t placed = 0;
    for (; placed < n && !status; placed++) {
        cli_output *o = &outs[placed];
        if (rename(o->tmp, o->path) == 0) {
            free(o->tmp);
            o->tmp = NULL;
            continue;
        }
        int e = errno;
        char undone[1024] = "";
        for (size_t j = 0; j < placed; j++) {
            unlink(outs[j].path);
            size_t used = strlen(undone);
            snprintf(undone + used, sizeof undone - used, "%s %s %s",
                     j ? "," : "; removed", outs[j].option, outs[j].path);
        }
        status = cli_error("%s %s: cannot rename the finished file onto it: "
                           "%s%s",
                           o->option, o->path, strerror(e), undone);
    }
    for (size_t i = 0; i < n; i++)
        discard(&outs[i]);
    return status;
}
