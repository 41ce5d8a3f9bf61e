//> handout
/* output.c: every output of a run in one fileset, committed together (see
 * output.h). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include "output.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"

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

/* The line for o when adding it to the set failed. */
static int add_failed(const cli_output *o, const fileset_failure *why)
{
    if (why->step == FILESET_CREATE)
        return cli_error("%s %s: cannot create a file next to it: %s",
                         o->option, o->path, strerror(why->err));
    return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
}

static int stage_npy(fileset *set, const cli_output *o)
{
    FILE *f;
    fileset_failure why;
    if (fileset_add(set, o->path, &f, &why))
        return add_failed(o, &why);
    if (npy_write_stream(f, o->npy))
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    return CLI_OK;
}

/* Draw base.gp into the set's temporary for o's path. */
static int draw(fileset *set, const cli_output *o, const char *base)
{
    if (heatmap_write(o->image, o->heatmap, base))
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    char *script = join(base, ".gp");
    if (!script)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    const char *tmp;
    fileset_failure why;
    int status = CLI_OK;
    if (fileset_add_name(set, o->path, &tmp, &why)) {
        status = add_failed(o, &why);
    } else {
        const char *fmt = o->format == HEATMAP_PNG ? "png" : "svg";
        int drawn = gnuplot_run("mha", script, fmt, tmp, o->path);
        if (drawn == GNUPLOT_MISSING)
            status = cli_error("%s %s: gnuplot not found (install "
                               "gnuplot-nox, or use --terminal)",
                               o->option, o->path);
        else if (drawn)
            status = cli_error("%s %s: %s", o->option, o->path,
                               mha_last_error());
    }
    free(script);
    return status;
}

/* The scratch directory's files: gnuplot's data and script. */
static const char *const scratch_files[] = {"/heatmap.dat", "/heatmap.gp"};
#define NSCRATCH (sizeof scratch_files / sizeof scratch_files[0])

/* Register the scratch directory and the files that will be in it with
 * cleanup.h (reg[0] the directory), so that a signal removes them. */
static int register_scratch(const char *scratch, cleanup_entry **reg)
{
    reg[0] = cleanup_add_dir("mha", scratch);
    for (size_t i = 0; i < NSCRATCH && reg[i]; i++) {
        char *path = join(scratch, scratch_files[i]);
        reg[i + 1] = path ? cleanup_add_file("mha", path) : NULL;
        free(path);
    }
    return reg[NSCRATCH] != NULL;
}

/* gnuplot draws from a data file and a script: they go to a scratch
 * directory beside the picture, removed once it is drawn (or by the
 * signal that ends the run, cleanup.h). */
static int stage_image(fileset *set, const cli_output *o)
{
    static const char pattern[] = ".mha-heatmap-XXXXXX";
    const char *slash = strrchr(o->path, '/');
    size_t dir_len = slash ? (size_t)(slash - o->path) + 1 : 0;
    char *scratch = mha_malloc(dir_len + sizeof pattern, 1, "mha");
    if (!scratch)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    memcpy(scratch, o->path, dir_len);
    memcpy(scratch + dir_len, pattern, sizeof pattern);
    cleanup_entry *reg[NSCRATCH + 1] = {NULL};
    // made and registered with the signals held off
    cleanup_hold();
    int made = mkdtemp(scratch) != NULL, e = errno;
    int registered = made && register_scratch(scratch, reg);
    if (made && !registered)
        rmdir(scratch);
    cleanup_release();
    if (!made || !registered) {
        for (size_t i = 0; i <= NSCRATCH; i++)
            cleanup_forget(reg[i]);
        free(scratch);
        if (!made)
            return cli_error("%s %s: cannot create a directory next to it: %s",
                             o->option, o->path, strerror(e));
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    }
    char *base = join(scratch, "/heatmap");
    int status = base ? draw(set, o, base)
                      : cli_error("%s %s: %s", o->option, o->path,
                                  mha_last_error());
    for (size_t i = 0; i < NSCRATCH; i++) {
        char path[4096];
        if ((size_t)snprintf(path, sizeof path, "%s%s", scratch,
                             scratch_files[i]) < sizeof path)
            unlink(path);
    }
    rmdir(scratch);
    for (size_t i = 0; i <= NSCRATCH; i++)
        cleanup_forget(reg[i]);
    free(base);
    free(scratch);
    return status;
}

/* The line for a commit that failed: which output, and what was undone. */
static int commit_failed(const fileset *set, const cli_output *outs,
                         const fileset_failure *why)
{
    const cli_output *o = &outs[why->index];
    if (why->step != FILESET_RENAME)
        return cli_error("%s %s: %s", o->option, o->path, mha_last_error());
    char undone[1024] = "";
    size_t used = 0;
    for (size_t j = 0; j < why->undone && used < sizeof undone; j++) {
        int n = snprintf(undone + used, sizeof undone - used, "%s%s %s %s",
                         j ? ", " : "; ",
                         fileset_existed(set, j) ? "put back the old"
                                                 : "removed",
                         outs[j].option, outs[j].path);
        used += n > 0 ? (size_t)n : 0;
    }
    return cli_error("%s %s: cannot rename the finished file onto it: %s%s",
                     o->option, o->path, strerror(why->err), undone);
}

int cli_stage_outputs(const cli_output *outs, size_t n, cli_staged *staged)
{
    *staged = (cli_staged){.outs = outs, .n = n};
    fileset *set;
    if (fileset_begin("mha", &set))
        return cli_error("%s", mha_last_error());
    int status = CLI_OK;
    // every file complete under its temporary name
    for (size_t i = 0; i < n && !status; i++)
        status = outs[i].npy ? stage_npy(set, &outs[i])
                             : stage_image(set, &outs[i]);
    if (status)
        fileset_end(set);
    else
        staged->set = set;
    return status;
}

int cli_stage_stream(const cli_output *o, cli_staged *staged, FILE **f)
{
    *staged = (cli_staged){.outs = o, .n = 1};
    fileset *set;
    if (fileset_begin("mha", &set))
        return CLI_USAGE;
    if (fileset_add(set, o->path, f, NULL)) {
        fileset_end(set);
        return CLI_USAGE;
    }
    staged->set = set;
    return CLI_OK;
}

int cli_finish_outputs(cli_staged *staged, int status)
{
    fileset *set = staged->set;
    staged->set = NULL;
    if (!set)
        return status;
    // all into place, or none
    fileset_failure why;
    if (!status && fileset_commit(set, &why))
        status = commit_failed(set, staged->outs, &why);
    fileset_end(set);
    return status;
}

int cli_write_outputs(const cli_output *outs, size_t n)
{
    cli_staged staged;
    int status = cli_stage_outputs(outs, n, &staged);
    return cli_finish_outputs(&staged, status);
}

int cli_flush_stdout(int status)
{
    if (mha_stdout_check() && !status)
        status = cli_error("%s", mha_last_error());
    return status;
}

int cli_print_usage(const char *usage)
{
    // a text longer than stdout's buffer is written at once: its errno
    // is the one to say
    errno = 0;
    if (fputs(usage, stdout) == EOF && errno)
        return cli_error("cannot write to stdout: %s", strerror(errno));
    return cli_flush_stdout(CLI_OK);
}
//<
