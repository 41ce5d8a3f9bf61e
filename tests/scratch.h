/* scratch.h: a scratch directory per test, made the current directory
 * (in a suite's .init, removed with all it holds in .fini), so the paths
 * in messages are short and fixed: "npy_read: bad.npy: ..."; the names a
 * directory holds, and the text a file holds. */
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

static char scratch_home[4096]; /* where the test started: the repository */
static char scratch_dir[64];    /* the scratch directory, absolute */

/* Make /tmp/<prefix>-XXXXXX and enter it. */
static inline void scratch_enter(const char *prefix)
{
    cr_assert_not_null(getcwd(scratch_home, sizeof scratch_home));
    snprintf(scratch_dir, sizeof scratch_dir, "/tmp/%s-XXXXXX", prefix);
    cr_assert_not_null(mkdtemp(scratch_dir), "mkdtemp(%s): %s", scratch_dir,
                       strerror(errno));
    cr_assert_eq(chdir(scratch_dir), 0);
}

static inline int scratch_remove_entry(const char *path, const struct stat *st,
                                       int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    return remove(path);
}

/* Go back where the test started and remove the scratch directory. */
static inline void scratch_leave(void)
{
    if (chdir(scratch_home) == 0)
        nftw(scratch_dir, scratch_remove_entry, 8, FTW_DEPTH | FTW_PHYS);
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

#endif
