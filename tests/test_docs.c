/* test_docs.c: the book in docs/ says what the code does.
 *
 * docs/ is written by `make docs` (tools/weave.c) from the chapters, their
 * checked transcripts and src/.  These tests weave a fresh copy and hold
 * docs/ to it byte for byte, so a page cannot go stale: change a chapter's
 * output, its prose or a function the book shows, and `make test` fails
 * until `make docs` has run. */
#include <dirent.h>
#include <sys/stat.h>

#include "check.h"

#ifndef WEAVE
#error "WEAVE must name the weave program"
#endif

static char *slurp_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void run(const char *cmd)
{
    int status = system(cmd);
    cr_assert_eq(status, 0, "`%s` failed with status %d", cmd, status);
}

/* Weave ROOT into a new scratch directory, returned in dir. */
static void weave_into(const char *root, char *dir)
{
    strcpy(dir, "/tmp/mha-docs-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s", WEAVE, root, dir);
    run(cmd);
}

/* Every page woven now equals the committed one, and docs/ holds no page
 * the weaver would not write. */
Test(docs, the_book_is_current)
{
    char dir[64];
    weave_into(".", dir);
    size_t pages = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char fresh_path[600], doc_path[600];
        snprintf(fresh_path, sizeof fresh_path, "%s/%s", dir, e->d_name);
        snprintf(doc_path, sizeof doc_path, "docs/%s", e->d_name);
        char *fresh = slurp_file(fresh_path), *doc = slurp_file(doc_path);
        cr_assert_not_null(doc, "docs/%s is missing: run make docs", e->d_name);
        cr_assert_str_eq(doc, fresh, "docs/%s is stale: run make docs", e->d_name);
        free(fresh);
        free(doc);
        pages++;
    }
    closedir(d);
    d = opendir("docs");
    cr_assert_not_null(d, "no docs/: run make docs");
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 3, ".md") != 0)
            continue;
        char fresh_path[600];
        snprintf(fresh_path, sizeof fresh_path, "%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert_eq(stat(fresh_path, &st), 0,
                     "docs/%s is not written by make docs: remove it", e->d_name);
    }
    closedir(d);
    cr_assert_gt(pages, 1);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    run(cmd);
}

/* The check above is worth something only if a changed output changes the
 * page: weave a copy of the tree whose chapter 06 transcript has one more
 * line, and the page differs from docs/06_splitting_heads.md right there. */
Test(docs, a_changed_output_changes_the_page)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tests %s/tools && cp -r chapters src %s/ && "
             "cp -r tests/expected %s/tests/ && cp tools/book-index.md %s/tools/ && "
             "printf 'a line the page has not seen\\n' >> "
             "%s/tests/expected/06_splitting_heads.txt",
             root, root, root, root, root, root);
    run(cmd);
    char dir[64];
    weave_into(root, dir);
    char path[600];
    snprintf(path, sizeof path, "%s/06_splitting_heads.md", dir);
    char *fresh = slurp_file(path), *doc = slurp_file("docs/06_splitting_heads.md");
    cr_assert_not_null(fresh);
    cr_assert_not_null(doc);
    cr_assert_str_neq(fresh, doc);
    cr_assert_not_null(strstr(fresh, "a line the page has not seen"));
    /* every other page is unchanged */
    snprintf(path, sizeof path, "%s/07_valid_lens_per_head.md", dir);
    char *other = slurp_file(path), *other_doc = slurp_file("docs/07_valid_lens_per_head.md");
    cr_assert_str_eq(other, other_doc);
    free(fresh);
    free(doc);
    free(other);
    free(other_doc);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", root, dir);
    run(cmd);
}

/* A broken reference is an error, not a silently shorter page. */
Test(docs, a_missing_function_stops_the_weaver)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tests %s/tools %s/chapters && cp -r src %s/ && "
             "cp -r tests/expected %s/tests/ && cp tools/book-index.md %s/tools/ && "
             "cp chapters/01_shapes_strides_views.c %s/chapters/ && "
             "printf '/*md\\n * @show src/tensor.c no_such_function\\n */\\n' >> "
             "%s/chapters/01_shapes_strides_views.c",
             root, root, root, root, root, root, root, root);
    run(cmd);
    char dir[] = "/tmp/mha-docs-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    snprintf(cmd, sizeof cmd, "%s %s %s 2>%s/err", WEAVE, root, dir, dir);
    int status = system(cmd);
    cr_assert_neq(status, 0);
    char path[600];
    snprintf(path, sizeof path, "%s/err", dir);
    char *err = slurp_file(path);
    cr_assert_str_eq(err, "weave: chapters/01_shapes_strides_views.c: @show "
                          "src/tensor.c no_such_function: no definition of "
                          "no_such_function in src/tensor.c\n");
    free(err);
    snprintf(cmd, sizeof cmd, "rm -rf %s %s", root, dir);
    run(cmd);
}

/* Charts are pictures too: chapter 13 announces its loss curve as
 * "[plot: plots/13_loss.png ...]" and its page shows the image. */
Test(docs, charts_are_pictures_too)
{
    char dir[64], path[128];
    weave_into(".", dir);
    snprintf(path, sizeof path, "%s/13_training.md", dir);
    char *page = slurp_file(path);
    cr_assert_not_null(page);
    const char *said = strstr(page, "[plot: plots/13_loss.png");
    const char *shown = strstr(page, "![13_loss](../plots/13_loss.png)");
    cr_assert_not_null(said);
    cr_assert_not_null(shown);
    cr_assert_gt(shown, said);
    free(page);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    run(cmd);
}
