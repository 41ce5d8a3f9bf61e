//> 01
/* fileset.c: outputs written under temporary names and renamed into place
 * together; see fileset.h. */
#define _POSIX_C_SOURCE 200809L /* O_CLOEXEC, fchmod, fsync, link, lstat */
#include "io/fileset.h"

#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"

/* One output: its path, the temporary it is written to, and while the
 * set is committed the second name of the file it replaces. */
typedef struct {
    char *path;
    char *tmp;  /* path + ".tmp.<pid>.<n>"; NULL once renamed into place */
    cleanup_entry *reg; /* tmp, removed on a signal (cleanup.h) */
    char *old;  /* path + ".old.<pid>.<n>" while kept, else NULL */
    FILE *f;    /* fileset_add's stream, open until the commit */
    int existed;
} output;

struct fileset {
    const char *who;
    output *out; /* n outputs, room for cap */
    size_t n, cap;
    int committed; /* fileset_commit has run */
};

/* Record a failure in *why (if given) and return status. */
static int failed(fileset_failure *why, int status, fileset_step step,
                  int err, size_t index)
{
    if (why)
        *why = (fileset_failure){.step = step, .err = err, .index = index};
    return status;
}

int fileset_begin(const char *who, fileset **set)
{
    *set = mha_calloc(1, sizeof **set, who);
    if (!*set)
        return GSL_ENOMEM;
    (*set)->who = who;
    return GSL_SUCCESS;
}

/* path + suffix + ".<pid>.<n>" for n = 0, 1, ... until make(name) does
 * not fail with EEXIST: the first name no other file has.  make returns
 * 0 or -1 with errno set.  Returns the name (the caller frees it), or
 * NULL with errno set (ENOMEM: out of memory, recorded). */
static char *unique_name(const char *who, const char *path,
                         const char *suffix, int (*make)(const char *, void *),
                         void *ctx)
{
    size_t n = strlen(path) + strlen(suffix) + 48;
    char *name = mha_malloc(n, 1, who);
    if (!name) {
        errno = ENOMEM;
        return NULL;
    }
    /* a name near NAME_MAX has no room for the suffix: then the temporary
     * is ".mha<suffix>..." in the same directory */
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    int dir_len = (int)(base - path);
    int short_base = strlen(base) + strlen(suffix) + 32 > NAME_MAX;
    for (int attempt = 0; attempt < 100; attempt++) {
        if (short_base)
            snprintf(name, n, "%.*s.mha%s.%ld.%d", dir_len, path, suffix,
                     (long)getpid(), attempt);
        else
            snprintf(name, n, "%s%s.%ld.%d", path, suffix, (long)getpid(),
                     attempt);
        if (make(name, ctx) == 0)
            return name;
        if (errno != EEXIST)
            break;
    }
    int e = errno;
    free(name);
    errno = e;
    return NULL;
}

/* Create an empty file exclusively; its descriptor into *(int *)ctx. */
static int create_file(const char *name, void *ctx)
{
    int fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    *(int *)ctx = fd;
    return fd < 0 ? -1 : 0;
}

/* A second name for the file at (const char *)ctx. */
static int link_file(const char *name, void *ctx)
{
    return link((const char *)ctx, name);
}

/* Make room for one more output and create its temporary; *fd is its
 * descriptor.  The set is unchanged on failure. */
static int add(fileset *set, const char *path, int *fd, fileset_failure *why)
{
    const char *who = set->who;
    size_t index = set->n;
    if (!path || !*path)
        return failed(why,
                      mha_fail(GSL_EINVAL, "%s: the output path is %s", who,
                               path ? "empty" : "NULL"),
                      FILESET_USAGE, 0, index);
    if (set->committed)
        return failed(why,
                      mha_fail(GSL_EINVAL,
                               "%s: cannot add %s to a set already committed",
                               who, path),
                      FILESET_USAGE, 0, index);
    if (set->n == set->cap) {
        size_t cap = set->cap ? 2 * set->cap : 4;
        output *grown = mha_malloc(cap, sizeof *grown, who);
        if (!grown)
            return failed(why, GSL_ENOMEM, FILESET_MEMORY, 0, index);
        if (set->n)
            memcpy(grown, set->out, set->n * sizeof *grown);
        free(set->out);
        set->out = grown;
        set->cap = cap;
    }
    output o = {0};
    size_t len = strlen(path);
    o.path = mha_malloc(len + 1, 1, who);
    if (!o.path)
        return failed(why, GSL_ENOMEM, FILESET_MEMORY, 0, index);
    memcpy(o.path, path, len + 1);
    /* made and registered with the signals held off: no signal finds the
     * temporary there and not registered */
    cleanup_hold();
    o.tmp = unique_name(who, path, ".tmp", create_file, fd);
    int e = errno; /* why it could not be made, when it could not */
    if (o.tmp && !(o.reg = cleanup_add_file(who, o.tmp))) {
        close(*fd);
        unlink(o.tmp);
        free(o.tmp);
        free(o.path);
        cleanup_release();
        return failed(why, GSL_ENOMEM, FILESET_MEMORY, 0, index);
    }
    cleanup_release();
    if (!o.tmp) {
        free(o.path);
        if (e == ENOMEM)
            return failed(why, GSL_ENOMEM, FILESET_MEMORY, 0, index);
        return failed(why,
                      mha_fail(GSL_EFAILED, "%s: cannot create %s: %s", who,
                               path, strerror(e)),
                      FILESET_CREATE, e, index);
    }
    set->out[set->n++] = o;
    return GSL_SUCCESS;
}

/* Forget the last output added, removing its temporary. */
static void drop_last(fileset *set)
{
    output *o = &set->out[--set->n];
    unlink(o->tmp);
    cleanup_forget(o->reg);
    free(o->tmp);
    free(o->path);
}

int fileset_add(fileset *set, const char *path, FILE **f,
                fileset_failure *why)
{
    *f = NULL;
    int fd = -1;
    int status = add(set, path, &fd, why);
    if (status)
        return status;
    FILE *stream = fdopen(fd, "w");
    if (!stream) {
        int e = errno;
        close(fd);
        status = mha_fail(GSL_ENOMEM, "%s: cannot open a stream on %s: %s",
                          set->who, set->out[set->n - 1].tmp, strerror(e));
        drop_last(set);
        return failed(why, status, FILESET_MEMORY, e, set->n);
    }
    set->out[set->n - 1].f = stream;
    *f = stream;
    return GSL_SUCCESS;
}

int fileset_add_name(fileset *set, const char *path, const char **tmp,
                     fileset_failure *why)
{
    *tmp = NULL;
    int fd = -1;
    int status = add(set, path, &fd, why);
    if (status)
        return status;
    close(fd);
    *tmp = set->out[set->n - 1].tmp;
    return GSL_SUCCESS;
}

int fileset_open(const char *who, const char *path, fileset **set, FILE **f,
                 fileset_failure *why)
{
    *f = NULL;
    int status = fileset_begin(who, set);
    if (status)
        return failed(why, status, FILESET_MEMORY, 0, 0);
    status = fileset_add(*set, path, f, why);
    if (status) {
        fileset_end(*set);
        *set = NULL;
    }
    return status;
}

/* --- the commit ---------------------------------------------------------- */

/* Step 1 for output i: every byte in the file, the bits of the file it
 * replaces, and on disk. */
static int finish(fileset *set, size_t i, fileset_failure *why)
{
    const char *who = set->who;
    output *o = &set->out[i];
    int fd;
    if (o->f) {
        if (fflush(o->f) != 0 || ferror(o->f)) {
            int e = errno;
            fclose(o->f);
            o->f = NULL;
            return failed(why,
                          mha_fail(GSL_EFAILED, "%s: cannot write %s: %s", who,
                                   o->path, strerror(e)),
                          FILESET_WRITE, e, i);
        }
        fd = fileno(o->f);
    } else {
        fd = open(o->tmp, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            return failed(why,
                          mha_fail(GSL_EFAILED, "%s: cannot open %s: %s", who,
                                   o->tmp, strerror(e)),
                          FILESET_WRITE, e, i);
        }
    }
    int status = GSL_SUCCESS;
    struct stat st;
    if (stat(o->path, &st) == 0 && S_ISREG(st.st_mode) &&
        fchmod(fd, st.st_mode & 07777) != 0) {
        int e = errno;
        status = failed(why,
                        mha_fail(GSL_EFAILED,
                                 "%s: cannot give %s the permissions of %s: %s",
                                 who, o->tmp, o->path, strerror(e)),
                        FILESET_MODE, e, i);
    } else if (fsync(fd) != 0) {
        int e = errno;
        status = failed(why,
                        mha_fail(GSL_EFAILED, "%s: cannot flush %s to disk: %s",
                                 who, o->path, strerror(e)),
                        FILESET_SYNC, e, i);
    }
    int closed = o->f ? fclose(o->f) : close(fd);
    int e = errno;
    o->f = NULL;
    if (!status && closed != 0)
        status = failed(why,
                        mha_fail(GSL_EFAILED, "%s: cannot write %s: %s", who,
                                 o->path, strerror(e)),
                        FILESET_WRITE, e, i);
    return status;
}

/* Step 2 for output i: whether its path names a file, and unless it is
 * the last output, a second name for that file. */
static int keep(fileset *set, size_t i, fileset_failure *why)
{
    output *o = &set->out[i];
    struct stat st;
    o->existed = lstat(o->path, &st) == 0;
    if (!o->existed || i + 1 == set->n)
        return GSL_SUCCESS;
    o->old = unique_name(set->who, o->path, ".old", link_file, o->path);
    if (o->old)
        return GSL_SUCCESS;
    int e = errno;
    if (e == ENOMEM)
        return failed(why, GSL_ENOMEM, FILESET_MEMORY, 0, i);
    return failed(why,
                  mha_fail(GSL_EFAILED,
                           "%s: cannot keep %s under a second name while it "
                           "is replaced: %s",
                           set->who, o->path, strerror(e)),
                  FILESET_KEEP, e, i);
}

/* Undo the renames of outputs 0 .. placed - 1, last first, and say so at
 * the end of the message of the failure that made it necessary. */
static void undo(fileset *set, size_t placed)
{
    char done[MHA_ERROR_MAX] = "";
    size_t used = 0;
    for (size_t j = placed; j-- > 0;) {
        output *o = &set->out[j];
        const char *what = "removed";
        int e = 0;
        if (o->old) {
            what = "put back";
            if (rename(o->old, o->path) != 0)
                e = errno;
            else {
                free(o->old);
                o->old = NULL;
            }
        } else if (unlink(o->path) != 0) {
            e = errno;
        }
        int n;
        if (!e)
            n = snprintf(done + used, sizeof done - used, "%s %s %s",
                         used ? "," : "; then", what, o->path);
        else if (o->old)
            n = snprintf(done + used, sizeof done - used,
                         "%s could not put back %s (%s; it is kept as %s)",
                         used ? "," : "; then", o->path, strerror(e), o->old);
        else
            n = snprintf(done + used, sizeof done - used,
                         "%s could not remove %s (%s)", used ? "," : "; then",
                         o->path, strerror(e));
        if (n > 0)
            used += (size_t)n < sizeof done - used ? (size_t)n
                                                   : sizeof done - used - 1;
        if (e && o->old) {
            /* the old file lives on under its second name only: leave it */
            free(o->old);
            o->old = NULL;
        }
    }
    char message[MHA_ERROR_MAX];
    snprintf(message, sizeof message, "%s%s", mha_last_error(), done);
    mha_fail(GSL_EFAILED, "%s", message);
}

int fileset_commit(fileset *set, fileset_failure *why)
{
    if (set->committed)
        return failed(why,
                      mha_fail(GSL_EINVAL, "%s: the set is already committed",
                               set->who),
                      FILESET_USAGE, 0, 0);
    set->committed = 1;
    int status = GSL_SUCCESS;
    for (size_t i = 0; i < set->n && !status; i++)
        status = finish(set, i, why);
    /* A signal while the files are kept, renamed and undone waits until
     * every path names its new file or its old one (cleanup.h): then it
     * finds no temporary and no second name to remove. */
    cleanup_hold();
    for (size_t i = 0; i < set->n && !status; i++)
        status = keep(set, i, why);
    size_t placed = 0;
    for (; placed < set->n && !status; placed++) {
        output *o = &set->out[placed];
        if (rename(o->tmp, o->path) != 0) {
            int e = errno;
            status = failed(why,
                            mha_fail(GSL_EFAILED,
                                     "%s: cannot rename %s to %s: %s",
                                     set->who, o->tmp, o->path, strerror(e)),
                            FILESET_RENAME, e, placed);
            if (why)
                why->undone = placed;
            undo(set, placed);
            break;
        }
        cleanup_forget(o->reg);
        o->reg = NULL;
        free(o->tmp);
        o->tmp = NULL;
    }
    /* the second names go: their files are replaced, or back in place */
    for (size_t i = 0; i < set->n; i++) {
        if (set->out[i].old)
            unlink(set->out[i].old);
        free(set->out[i].old);
        set->out[i].old = NULL;
    }
    cleanup_release();
    if (!status && why)
        *why = (fileset_failure){0};
    return status;
}

int fileset_existed(const fileset *set, size_t i)
{
    return set && i < set->n && set->out[i].existed;
}

void fileset_end(fileset *set)
{
    if (!set)
        return;
    for (size_t i = 0; i < set->n; i++) {
        output *o = &set->out[i];
        if (o->f)
            fclose(o->f);
        if (o->tmp)
            unlink(o->tmp);
        cleanup_forget(o->reg);
        free(o->tmp);
        free(o->old);
        free(o->path);
    }
    free(set->out);
    free(set);
}
//<
