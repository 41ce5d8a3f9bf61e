/* scratch.h: a scratch directory per test, made the current directory
 * (in a suite's .init, removed with all it holds in .fini), so the paths
 * in messages are short and fixed: "npy_read: bad.npy: ..."; the names a
 * directory holds, the text a file holds, and the state of a whole tree
 * to compare before and after a run. */
#ifndef MHA_TEST_SCRATCH_H
#define MHA_TEST_SCRATCH_H

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <criterion/criterion.h>

#include "check.h" /* HOLDS */

static char scratch_home[4096]; /* where the test started: the repository */
static char scratch_dir[64];    /* the scratch directory, absolute */

static inline int scratch_remove_entry(const char *path, const struct stat *st,
                                       int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Go back where the test started and remove the scratch directory, if
 * there is one. */
static inline void scratch_leave(void)
{
    if (scratch_dir[0] && chdir(scratch_home) == 0)
        nftw(scratch_dir, scratch_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    scratch_dir[0] = '\0';
}

/* Make /tmp/<prefix>-XXXXXX (a suite whose paths name it stays where it
 * started).  It is removed at the test process's exit too: a test that
 * skips (cr_skip_test) ends without its suite's .fini. */
static inline void scratch_make(const char *prefix)
{
    cr_assert_not_null(getcwd(scratch_home, sizeof scratch_home));
    snprintf(scratch_dir, sizeof scratch_dir, "/tmp/%s-XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(scratch_dir), "mkdtemp(%s): %s", scratch_dir,
                       strerror(errno));
    static int at_exit;
    if (!at_exit++)
        atexit(scratch_leave);
}

/* Make /tmp/<prefix>-XXXXXX and enter it. */
static inline void scratch_enter(const char *prefix)
{
    scratch_make(prefix);
    cr_assert_eq(chdir(scratch_dir), 0);
}


/* The names in dir (not . and ..), sorted, joined by spaces: "a.npy b". */
static inline void list_dir(const char *dir, char *out, size_t n)
{
    struct dirent **names;
    int count = scandir(dir, &names, NULL, alphasort);
    cr_assert_geq(count, 0, "scandir(%s): %s", dir, strerror(errno));
    out[0] = '\0';
    for (int i = 0; i < count; i++) {
        const char *name = names[i]->d_name;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
            if (out[0])
                strncat(out, " ", n - strlen(out) - 1);
            strncat(out, name, n - strlen(out) - 1);
        }
        free(names[i]);
    }
    free(names);
}

/* The current directory holds exactly the names `expected` (as list_dir
 * gives them). */
static inline void assert_names(const char *expected)
{
    char names[1024];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, expected);
}

/* All of stream f from its start, NUL-terminated (so that a text can be
 * read as a string); *n (when n is not NULL) its count of bytes, without
 * the NUL; free() it. */
static inline char *read_all_n(FILE *f, size_t *n)
{
    cr_assert_eq(fflush(f), 0);
    cr_assert_eq(fseek(f, 0, SEEK_END), 0);
    long len = ftell(f);
    cr_assert_geq(len, 0);
    rewind(f);
    char *buf = malloc((size_t)len + 1);
    cr_assert_not_null(buf);
    cr_assert_eq(fread(buf, 1, (size_t)len, f), (size_t)len);
    buf[len] = '\0';
    if (n)
        *n = (size_t)len;
    return buf;
}

static inline char *read_all(FILE *f) { return read_all_n(f, NULL); }

/* The whole file at path, as read_all_n; free() it. */
static inline char *file_bytes(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    char *bytes = read_all_n(f, n);
    fclose(f);
    return bytes;
}

/* The text of the file at path (up to 64 KiB), NUL-terminated; free() it. */
static inline char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    char *text = calloc(1, 1 << 16);
    size_t n = fread(text, 1, (1 << 16) - 1, f);
    text[n] = '\0';
    fclose(f);
    return text;
}

/* The file at path holds exactly `expected`. */
static inline void file_is(const char *path, const char *expected)
{
    char *text = slurp(path);
    cr_assert_str_eq(text, expected, "in %s", path);
    free(text);
}

/* The file at path holds each text named, anywhere in it (check.h's
 * HOLDS): FILE_HOLDS("x.gp", "set logscale y\n", "plot data using 1:2"). */
#define FILE_HOLDS(path, ...)                                                 \
    do {                                                                      \
        char *file_holds_ = slurp(path);                                      \
        HOLDS(file_holds_, __VA_ARGS__);                                      \
        free(file_holds_);                                                    \
    } while (0)

/* --- the state of a directory tree, to compare before and after -------- */

/* Everything under dir, as one string to compare: each entry's path,
 * type and permission bits, size, inode and link count, then a regular
 * file's bytes or a link's target (a FIFO or socket is not opened).
 * Equal snapshots mean every file is exactly as it was. */
typedef struct snapshot {
    char *data; /* with the files' bytes: NULs and all; free() it */
    size_t len;
} snapshot;

static inline void snapshot_into(FILE *f, const char *dir)
{
    struct dirent **names;
    int count = scandir(dir, &names, NULL, alphasort);
    cr_assert_geq(count, 0, "scandir(%s): %s", dir, strerror(errno));
    for (int i = 0; i < count; i++) {
        const char *name = names[i]->d_name;
        if (strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
            char path[4096];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", dir, name);
            cr_assert_eq(lstat(path, &st), 0, "lstat(%s)", path);
            fprintf(f, "%s %o %lld %llu %llu\n", path, (unsigned)st.st_mode,
                    (long long)st.st_size, (unsigned long long)st.st_ino,
                    (unsigned long long)st.st_nlink);
            if (S_ISREG(st.st_mode)) {
                FILE *in = fopen(path, "rb");
                cr_assert_not_null(in, "fopen(%s): %s", path, strerror(errno));
                char buf[8192];
                for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
                    fwrite(buf, 1, n, f);
                fclose(in);
            } else if (S_ISLNK(st.st_mode)) {
                char target[4096];
                ssize_t n = readlink(path, target, sizeof target);
                cr_assert_geq(n, 0, "readlink(%s)", path);
                fwrite(target, 1, (size_t)n, f);
            } else if (S_ISDIR(st.st_mode)) {
                snapshot_into(f, path);
            }
        }
        free(names[i]);
    }
    free(names);
}

static inline snapshot snapshot_of(const char *dir)
{
    snapshot s = {NULL, 0};
    FILE *f = open_memstream(&s.data, &s.len);
    cr_assert_not_null(f);
    snapshot_into(f, dir);
    fclose(f);
    return s;
}

/* Does dir hold exactly what it held when before was taken? */
static inline int snapshot_unchanged(const snapshot *before, const char *dir)
{
    snapshot now = snapshot_of(dir);
    int same = now.len == before->len &&
               memcmp(now.data, before->data, now.len) == 0;
    free(now.data);
    return same;
}

#endif
