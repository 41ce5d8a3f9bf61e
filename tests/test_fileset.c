//> 01
/* test_fileset.c: outputs that appear all together or not at all.  Every
 * test looks at the files themselves before and after: their bytes, their
 * permission bits, and the names in the directory (no temporary left). */
#include "check.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"

/* --- a scratch directory per test (scratch.h) -------------------------- */

static void enter_scratch(void) { scratch_enter("mha-fileset"); }

static void leave_scratch(void)
{
    mha_debug_fail_alloc_after(-1);
    scratch_leave();
}

TestSuite(fileset, .init = enter_scratch, .fini = leave_scratch);

/* A file holding text, with the given permission bits. */
static void put_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    cr_assert_eq(fputs(text, f) >= 0, 1);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod(path, mode), 0);
}

/* path holds exactly text and has permission bits mode. */
static void assert_file(const char *path, const char *text, mode_t mode)
{
    char *got = slurp(path);
    cr_assert_str_eq(got, text, "%s holds \"%s\", expected \"%s\"", path, got,
                     text);
    free(got);
    struct stat st;
    cr_assert_eq(stat(path, &st), 0);
    cr_assert_eq(st.st_mode & 07777, mode, "%s has mode %o, expected %o", path,
                 st.st_mode & 07777, mode);
}

static ino_t inode(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "lstat(%s): %s", path, strerror(errno));
    return st.st_ino;
}

/* What a new file gets: 0666 minus the umask. */
static mode_t new_file_mode(void)
{
    mode_t mask = umask(0);
    umask(mask);
    return 0666 & ~mask;
}

/* A set of n outputs, the stream of paths[i] given texts[i]. */
static fileset *set_of(size_t n, const char *const *paths,
                       const char *const *texts)
{
    fileset *set;
    OK(fileset_begin("test", &set));
    for (size_t i = 0; i < n; i++) {
        FILE *f;
        OK(fileset_add(set, paths[i], &f, NULL));
        fputs(texts[i], f);
    }
    return set;
}

/* path written as a one-file set holding text. */
static void write_one(const char *path, const char *text)
{
    fileset *set;
    FILE *f;
    OK(fileset_open("test", path, &set, &f, NULL));
    fputs(text, f);
    OK(fileset_commit(set, NULL));
    fileset_end(set);
}

#define LIST(...) ((const char *const[]){__VA_ARGS__})

/* --- commit: all of them ------------------------------------------------- */

Test(fileset, commit_puts_every_output_in_place_at_once)
{
    put_file("old.txt", "old contents\n", 0640);
    fileset *set;
    FILE *a, *b;
    const char *c_tmp;
    OK(fileset_begin("test", &set));
    OK(fileset_add(set, "old.txt", &a, NULL));
    OK(fileset_add(set, "new.txt", &b, NULL));
    OK(fileset_add_name(set, "child.txt", &c_tmp, NULL));
    fputs("new contents\n", a);
    fputs("a new file\n", b);
    /* another writer fills the third, in place */
    FILE *c = fopen(c_tmp, "w");
    cr_assert_not_null(c);
    fputs("from a child\n", c);
    fclose(c);

    /* before the commit: the paths are as they were, beside temporaries */
    assert_file("old.txt", "old contents\n", 0640);
    cr_assert(access("new.txt", F_OK) != 0);
    cr_assert(access("child.txt", F_OK) != 0);
    char want[512];
    long pid = (long)getpid();
    snprintf(want, sizeof want,
             "child.txt.tmp.%ld.0 new.txt.tmp.%ld.0 old.txt old.txt.tmp.%ld.0",
             pid, pid, pid);
    assert_names(want);

    fileset_failure why;
    OK(fileset_commit(set, &why));
    cr_assert_eq(why.step, FILESET_OK);
    cr_assert_eq(fileset_existed(set, 0), 1);
    cr_assert_eq(fileset_existed(set, 1), 0);
    fileset_end(set);

    /* the replaced file keeps its bits; new files get the umask's */
    assert_file("old.txt", "new contents\n", 0640);
    assert_file("new.txt", "a new file\n", new_file_mode());
    assert_file("child.txt", "from a child\n", new_file_mode());
    assert_names("child.txt new.txt old.txt");
}

Test(fileset, new_files_get_the_umask)
{
    mode_t old = umask(027);
    write_one("x", "x\n");
    umask(old);
    assert_file("x", "x\n", 0640);
}

Test(fileset, a_symbolic_link_is_replaced_not_followed)
{
    put_file("target", "the target\n", 0600);
    cr_assert_eq(symlink("target", "link"), 0);
    write_one("link", "new\n");
    struct stat st;
    cr_assert_eq(lstat("link", &st), 0);
    cr_assert(S_ISREG(st.st_mode), "link is still a link");
    /* the link's target gave its bits, and is untouched */
    assert_file("link", "new\n", 0600);
    assert_file("target", "the target\n", 0600);
}

/* --- abandoning a set: none of them -------------------------------------- */

Test(fileset, ending_without_commit_changes_nothing)
{
    put_file("a", "first\n", 0600);
    put_file("b", "second\n", 0644);
    ino_t a_ino = inode("a");
    fileset *set = set_of(3, LIST("a", "b", "c"),
                          LIST("replacement a\n", "replacement b\n",
                               "new c\n"));
    fileset_end(set);
    assert_file("a", "first\n", 0600);
    assert_file("b", "second\n", 0644);
    cr_assert_eq(inode("a"), a_ino);
    assert_names("a b");
}

/* --- a failure in the middle: nothing new, everything as it was --------- */

/* The third rename fails (its path is a directory that is not empty):
 * the two outputs already in place are undone, the replaced file put back
 * as the very file it was, the new one removed. */
Test(fileset, failed_rename_undoes_the_outputs_before_it)
{
    put_file("a", "old a\n", 0600);
    cr_assert_eq(mkdir("dir", 0755), 0);
    put_file("dir/inside", "keep me\n", 0644);
    ino_t a_ino = inode("a");
    fileset *set = set_of(3, LIST("a", "b", "dir"),
                          LIST("new a\n", "new b\n", "new dir\n"));
    fileset_failure why;
    mha_clear_error();
    int status = fileset_commit(set, &why);
    cr_assert_eq(status, GSL_EFAILED);
    cr_assert_eq(why.step, FILESET_RENAME);
    cr_assert_eq(why.index, 2);
    cr_assert_eq(why.undone, 2);
    cr_assert(why.err == EISDIR || why.err == ENOTEMPTY || why.err == EEXIST,
              "errno %d", why.err);
    cr_assert_eq(fileset_existed(set, 0), 1);
    cr_assert_eq(fileset_existed(set, 1), 0);
    char want[512];
    snprintf(want, sizeof want,
             "test: cannot rename dir.tmp.%ld.0 to dir: %s; then removed b, "
             "put back a",
             (long)getpid(), strerror(why.err));
    cr_assert_str_eq(mha_last_error(), want);
    fileset_end(set);

    assert_file("a", "old a\n", 0600);
    cr_assert_eq(inode("a"), a_ino, "a is not the file it was");
    assert_file("dir/inside", "keep me\n", 0644);
    assert_names("a dir");
}

/* A write that fails half-way (the file size limit stops it) fails the
 * commit before any rename. */
Test(fileset, failed_write_leaves_every_file_as_it_was)
{
    put_file("a", "old a\n", 0640);
    put_file("b", "old b\n", 0600);
    static char big[10001]; /* past the limit below */
    memset(big, 'x', sizeof big - 1);
    signal(SIGXFSZ, SIG_IGN); /* writes past the limit fail with EFBIG */
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    fileset *set = set_of(2, LIST("a", "b"), LIST("new a\n", big));
    fileset_failure why;
    int status = fileset_commit(set, &why);
    lim.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_assert_eq(status, GSL_EFAILED, "%s", mha_last_error());
    cr_assert_eq(why.step, FILESET_WRITE);
    cr_assert_eq(why.index, 1);
    cr_assert_eq(why.err, EFBIG);
    cr_assert_str_eq(mha_last_error(), "test: cannot write b: File too large");
    fileset_end(set);
    assert_file("a", "old a\n", 0640);
    assert_file("b", "old b\n", 0600);
    assert_names("a b");
}

/* A file that cannot be kept under a second name (a directory cannot be
 * hard-linked) stops the commit before anything is renamed. */
Test(fileset, no_second_name_no_rename)
{
    put_file("a", "old a\n", 0600);
    cr_assert_eq(mkdir("dir", 0755), 0);
    fileset *set = set_of(2, LIST("dir", "a"), LIST("new dir\n", "new a\n"));
    fileset_failure why;
    cr_assert_eq(fileset_commit(set, &why), GSL_EFAILED);
    cr_assert_eq(why.step, FILESET_KEEP);
    cr_assert_eq(why.index, 0);
    cr_assert_eq(why.undone, 0);
    fileset_end(set);
    assert_file("a", "old a\n", 0600);
    char names[256];
    list_dir("dir", names, sizeof names);
    cr_assert_str_eq(names, "");
    assert_names("a dir");
}

/* An output that cannot be created fails alone: the set keeps the ones
 * before it, and abandoning it leaves nothing. */
Test(fileset, failed_create_leaves_the_set_as_it_was)
{
    put_file("a", "old a\n", 0600);
    fileset *set;
    FILE *fa, *fb;
    OK(fileset_begin("test", &set));
    OK(fileset_add(set, "a", &fa, NULL));
    fputs("new a\n", fa);
    fileset_failure why;
    FAILS(fileset_add(set, "missing/b", &fb, &why), GSL_EFAILED,
          "test: cannot create missing/b: No such file or directory");
    cr_assert_null(fb);
    cr_assert_eq(why.step, FILESET_CREATE);
    cr_assert_eq(why.err, ENOENT);
    cr_assert_eq(why.index, 1);
    fileset_end(set);
    assert_file("a", "old a\n", 0600);
    assert_names("a");

    FILE *f;
    FAILS(fileset_open("test", "missing/c", &set, &f, &why), GSL_EFAILED,
          "test: cannot create missing/c: No such file or directory");
    cr_assert_null(set);
    cr_assert_null(f);
    assert_names("a");
}

Test(fileset, misuse_is_refused)
{
    fileset *set;
    FILE *f;
    const char *tmp;
    OK(fileset_begin("test", &set));
    FAILS(fileset_add(set, "", &f, NULL), GSL_EINVAL,
          "test: the output path is empty");
    FAILS(fileset_add_name(set, NULL, &tmp, NULL), GSL_EINVAL,
          "test: the output path is NULL");
    OK(fileset_add(set, "a", &f, NULL));
    OK(fileset_commit(set, NULL));
    FAILS(fileset_commit(set, NULL), GSL_EINVAL,
          "test: the set is already committed");
    FAILS(fileset_add(set, "b", &f, NULL), GSL_EINVAL,
          "test: cannot add b to a set already committed");
    fileset_end(set);
    fileset_end(NULL);
    assert_file("a", "", new_file_mode());
    assert_names("a");
}

/* Out of memory at every allocation of a set of three: GSL_ENOMEM, and
 * every file exactly as it was. */
Test(fileset, out_of_memory_anywhere_changes_nothing)
{
    put_file("a", "old a\n", 0600);
    put_file("b", "old b\n", 0644);
    long k = 0;
    for (;; k++) {
        cr_assert_lt(k, 100);
        mha_debug_fail_alloc_after(k);
        fileset *set = NULL;
        FILE *f;
        int status = fileset_begin("test", &set);
        const char *paths[3] = {"a", "b", "c"};
        for (int i = 0; i < 3 && !status; i++) {
            status = fileset_add(set, paths[i], &f, NULL);
            if (!status)
                fprintf(f, "new %s\n", paths[i]);
        }
        if (!status)
            status = fileset_commit(set, NULL);
        fileset_end(set);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "allocation %ld: %s", k,
                     mha_last_error());
        cr_assert(!strncmp(mha_last_error(), "test: out of memory", 19), "%s",
                  mha_last_error());
        assert_file("a", "old a\n", 0600);
        assert_file("b", "old b\n", 0644);
        assert_names("a b");
    }
    cr_assert_gt(k, 3, "only %ld allocations?", k);
    assert_file("a", "new a\n", 0600);
    assert_file("c", "new c\n", new_file_mode());
    assert_names("a b c");
}
//<
