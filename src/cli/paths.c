//> handout
/* paths.c: outputs that are regular files, and one name per file; see
 * paths.h. */
#define _XOPEN_SOURCE 700 /* realpath */
#include "paths.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"

#ifndef NAME_MAX
#define NAME_MAX 255
#endif
#ifndef PATH_MAX
#define PATH_MAX 4096
#endif

/* What a path names: an existing file by (st_dev, st_ino), else the real
 * path of its directory and its own name. */
typedef struct identity {
    int exists;
    dev_t dev;
    ino_t ino;
    char name[PATH_MAX + NAME_MAX + 2];
} identity;

static void identify(const char *path, identity *id)
{
    struct stat st;
    memset(id, 0, sizeof *id);
    /* a dangling link names the file it points to, as a link to an
     * existing file does (stat follows it): resolve a few levels */
    char link[2][PATH_MAX];
    for (int level = 0; level < 8 && stat(path, &st) != 0 &&
                        lstat(path, &st) == 0 && S_ISLNK(st.st_mode);
         level++) {
        char target[PATH_MAX];
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            break;
        target[len] = '\0';
        const char *slash = strrchr(path, '/');
        char *next = link[level % 2];
        // a relative target is read from the link's own directory
        size_t dir = target[0] == '/' || !slash ? 0
                                                : (size_t)(slash - path) + 1;
        if (dir + (size_t)len >= PATH_MAX)
            break;
        memmove(next + dir, target, (size_t)len + 1);
        memmove(next, path, dir);
        path = next;
    }
    if (stat(path, &st) == 0) {
        id->exists = 1;
        id->dev = st.st_dev;
        id->ino = st.st_ino;
        return;
    }
    // not there (or a dangling link): the directory's real path + the name
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char dir[PATH_MAX], real[PATH_MAX];
    size_t dir_len = slash ? (size_t)(slash - path) : 0;
    if (dir_len >= sizeof dir) {
        snprintf(id->name, sizeof id->name, "%s", path);
        return;
    }
    if (slash && dir_len == 0)
        strcpy(dir, "/");
    else if (slash) {
        memcpy(dir, path, dir_len);
        dir[dir_len] = '\0';
    } else
        strcpy(dir, ".");
    if (realpath(dir, real))
        snprintf(id->name, sizeof id->name, "%s/%s", real, base);
    else
        snprintf(id->name, sizeof id->name, "%s", path);
}

static int same(const identity *a, const identity *b)
{
    if (a->exists != b->exists)
        return 0;
    if (a->exists)
        return a->dev == b->dev && a->ino == b->ino;
    return strcmp(a->name, b->name) == 0;
}

/* "a directory", "a FIFO" ... for a file of mode m that is not regular. */
static const char *kind_of(mode_t m)
{
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISSOCK(m))
        return "a socket";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    return "not a regular file";
}

/* "a directory", "a FIFO" ..., or NULL for a regular file or none. */
static const char *not_regular(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return NULL;
    return kind_of(st.st_mode);
}

int cli_open_input(const char *option, const char *path, FILE **out)
{
    *out = NULL;
    // O_NONBLOCK: opening a FIFO that has no writer returns at once
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return cli_error("cannot read %s '%s': %s", option, path,
                         strerror(errno));
    struct stat st;
    int e = fstat(fd, &st) != 0 ? errno : 0;
    if (!e && !S_ISREG(st.st_mode)) {
        close(fd);
        return cli_error("%s '%s' is %s, not a regular file", option, path,
                         kind_of(st.st_mode));
    }
    int flags = e ? -1 : fcntl(fd, F_GETFL);
    if (!e && (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0))
        e = errno;
    if (!e && !(*out = fdopen(fd, "r")))
        e = errno;
    if (e) {
        close(fd);
        return cli_error("cannot read %s '%s': %s", option, path, strerror(e));
    }
    return CLI_OK;
}

int cli_check_paths(const cli_path *outs, size_t nout, const cli_path *ins,
                    size_t nin)
{
    // 1. every output named, a regular file or nothing yet
    for (size_t i = 0; i < nout; i++) {
        if (outs[i].path && !*outs[i].path)
            return cli_error("%s '' is an empty name: give the file to write",
                             outs[i].option);
        const char *kind = outs[i].path ? not_regular(outs[i].path) : NULL;
        if (kind)
            return cli_error("%s '%s' is %s: mha writes only regular files "
                             "and will not replace it",
                             outs[i].option, outs[i].path, kind);
    }
    // 2. one name per output, and no output naming an input
    for (size_t i = 0; i < nout; i++) {
        if (!outs[i].path)
            continue;
        identity a, b;
        identify(outs[i].path, &a);
        for (size_t j = 0; j < i; j++) {
            if (!outs[j].path)
                continue;
            identify(outs[j].path, &b);
            if (same(&a, &b))
                return cli_error("%s '%s' and %s '%s' name the same file",
                                 outs[j].option, outs[j].path, outs[i].option,
                                 outs[i].path);
        }
        for (size_t j = 0; j < nin; j++) {
            if (!ins[j].path)
                continue;
            identify(ins[j].path, &b);
            if (same(&a, &b))
                return cli_error("%s '%s' and %s '%s' name the same file (an "
                                 "output must not replace an input)",
                                 outs[i].option, outs[i].path, ins[j].option,
                                 ins[j].path);
        }
    }
    // 3. no output a symbolic link: the finished output is renamed onto
    //    the path, which would replace the link itself (a link to
    //    /dev/stdout included), not write through it; 4. nor one
    //    write-protected, which the rename would replace whatever its
    //    permissions say (rm asks first, as root too)
    for (size_t i = 0; i < nout; i++) {
        struct stat st;
        if (!outs[i].path || lstat(outs[i].path, &st) != 0)
            continue;
        if (S_ISLNK(st.st_mode))
            return cli_error("%s '%s' is a symbolic link: mha would replace "
                             "the link, not write through it; give the file "
                             "it names",
                             outs[i].option, outs[i].path);
        if (S_ISREG(st.st_mode) &&
            ((st.st_mode & 0222) == 0 || access(outs[i].path, W_OK) != 0))
            return cli_error("%s '%s' is write-protected: mha would replace "
                             "it; make it writable, or remove it, first",
                             outs[i].option, outs[i].path);
    }
    return CLI_OK;
}
//<
