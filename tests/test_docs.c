//> full
/* test_docs.c: the book in docs/ says what the code does.
 *
 * docs/ is written by `make docs` (tools/weave.c) from the chapters, their
 * checked transcripts and src/.  These tests weave a fresh copy and hold
 * docs/ to it byte for byte, so a page cannot go stale: change a chapter's
 * output, its prose or a function the book shows, and `make test` fails
 * until `make docs` has run. */
#include <ctype.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>

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

/* The book's pages, "docs/NAME.md", into pages (at most max of them);
 * returns how many. */
static size_t book_pages(char (*pages)[300], size_t max)
{
    DIR *d = opendir("docs");
    cr_assert_not_null(d, "no docs/: run make docs");
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d)) && count < max;) {
        size_t n = strlen(e->d_name);
        if (n > 3 && strcmp(e->d_name + n - 3, ".md") == 0)
            snprintf(pages[count++], sizeof pages[0], "docs/%.290s", e->d_name);
    }
    closedir(d);
    return count;
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
    snprintf(cmd, sizeof cmd, "%s %s %s %s", WEAVE, root, dir, MHA_BIN);
    run(cmd);
}

/* The file name in dir, read whole (NULL where there is none). */
static char *slurp_in(const char *dir, const char *name)
{
    char path[600];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return slurp_file(path);
}

/* What the shell command cmd prints on stdout, whole; its status from
 * pclose into *status. */
static char *command_output(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    for (int c; (c = fgetc(p)) != EOF;)
        fputc(c, out);
    fclose(out);
    *status = pclose(p);
    return text;
}

/* Weave ROOT into dir, which must fail: what it wrote to stderr. */
static char *weave_fails(const char *root, const char *dir)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s %s %s 2>&1 >/dev/null", WEAVE, root, dir);
    int status;
    char *err = command_output(cmd, &status);
    cr_assert_neq(status, 0, "`%s` succeeded", cmd);
    return err;
}

/* rm -rf the scratch trees root and (unless NULL) dir. */
static void remove_trees(const char *root, const char *dir)
{
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", root, dir ? dir : root);
    run(cmd);
}

/* The book's page docs/NAME, which make docs writes; free() it. */
static char *book_page(const char *name)
{
    char *page = slurp_in("docs", name);
    cr_assert_not_null(page, "no docs/%s: run make docs", name);
    return page;
}

/* A scratch tree for the weaver in root (a mkdtemp template): `what` of
 * this tree at its top ("chapters src", "src" ...), the transcripts in
 * tests/expected/ and the pages the book copies from tools/.  The caller
 * changes it further, weaves it and removes it. */
static void book_root(char *root, const char *what)
{
    cr_assert_not_null(mkdtemp(root));
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/tests %s/tools && cp -r %s %s/ && "
             "cp -r tests/expected %s/tests/ && "
             "cp tools/book-index.md tools/references.md tools/glossary.md "
             "tools/teachers-guide.md %s/tools/",
             root, root, what, root, root, root);
    run(cmd);
}

/* Every page of fresh/SUB equals docs/SUB's, and docs/SUB holds no page
 * fresh/SUB does not; returns how many pages it compared.  SUB is "" (the
 * book) or "teacher" (the key). */
static size_t same_pages(const char *fresh, const char *sub)
{
    char dir[600], docs[600];
    snprintf(dir, sizeof dir, "%s/%s", fresh, sub);
    snprintf(docs, sizeof docs, "docs/%s", sub);
    size_t pages = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "no %s", dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (e->d_name[0] == '.' || n < 3 || strcmp(e->d_name + n - 3, ".md") != 0)
            continue;
        char fresh_path[1300], doc_path[1300];
        snprintf(fresh_path, sizeof fresh_path, "%s/%s", dir, e->d_name);
        snprintf(doc_path, sizeof doc_path, "%s/%s", docs, e->d_name);
        char *page = slurp_file(fresh_path), *doc = slurp_file(doc_path);
        cr_assert_not_null(doc, "%s is missing: run make docs", doc_path);
        cr_assert_str_eq(doc, page, "%s is stale: run make docs", doc_path);
        free(page);
        free(doc);
        pages++;
    }
    closedir(d);
    d = opendir(docs);
    cr_assert_not_null(d, "no %s: run make docs", docs);
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 3 || strcmp(e->d_name + n - 3, ".md") != 0)
            continue;
        char fresh_path[1300];
        snprintf(fresh_path, sizeof fresh_path, "%s/%s", dir, e->d_name);
        struct stat st;
        cr_assert_eq(stat(fresh_path, &st), 0,
                     "%s/%s is not written by make docs: remove it", docs,
                     e->d_name);
    }
    closedir(d);
    return pages;
}

/* Every page woven now equals the committed one, and docs/ holds no page
 * the weaver would not write: the book's pages, and the teacher's key in
 * docs/teacher/ when there is a teacher/ to weave it from (a student's
 * handout has neither). */
Test(docs, the_book_is_current)
{
    char dir[64];
    weave_into(".", dir);
    cr_assert_gt(same_pages(dir, ""), 1);
    struct stat st;
    if (stat("teacher", &st) == 0)
        cr_assert_gt(same_pages(dir, "teacher"), 1);
    else
        cr_assert_neq(stat("docs/teacher", &st), 0,
                      "docs/teacher/ is not written by make docs without "
                      "teacher/: remove it");
    remove_trees(dir, NULL);
}

/* The check above is worth something only if a changed output changes the
 * page: weave a copy of the tree whose chapter 06 transcript has one more
 * line, and the page differs from docs/06_splitting_heads.md right there. */
Test(docs, a_changed_output_changes_the_page)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "chapters src");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "printf 'a line the page has not seen\\n' >> "
             "%s/tests/expected/06_splitting_heads.txt",
             root);
    run(cmd);
    char dir[64];
    weave_into(root, dir);
    char *fresh = slurp_in(dir, "06_splitting_heads.md");
    char *doc = slurp_file("docs/06_splitting_heads.md");
    cr_assert_not_null(fresh);
    cr_assert_not_null(doc);
    cr_assert_str_neq(fresh, doc);
    HOLDS(fresh, "a line the page has not seen");
    /* every other page is unchanged */
    char *other = slurp_in(dir, "07_valid_lens_per_head.md");
    char *other_doc = slurp_file("docs/07_valid_lens_per_head.md");
    cr_assert_str_eq(other, other_doc);
    free(fresh);
    free(doc);
    free(other);
    free(other_doc);
    remove_trees(root, dir);
}

/* The error of a weave of chapters/CHAPTER.c alone (with src/) whose
 * page asks for one more "@show FILE NAME" at its end. */
static char *weave_showing(const char *chapter, const char *show)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "src");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/chapters && cp chapters/%s.c %s/chapters/ && "
             "printf '/*md\\n * @show %s\\n */\\n' >> %s/chapters/%s.c",
             root, chapter, root, show, root, chapter);
    run(cmd);
    char dir[] = "/tmp/mha-docs-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *err = weave_fails(root, dir);
    remove_trees(root, dir);
    return err;
}

/* A broken reference is an error, not a silently shorter page. */
Test(docs, a_missing_function_stops_the_weaver)
{
    char *err = weave_showing("01_shapes_strides_views",
                              "src/tensor/tensor.c no_such_function");
    cr_assert_str_eq(err, "weave: chapters/01_shapes_strides_views.c: @show "
                          "src/tensor/tensor.c no_such_function: no definition of "
                          "no_such_function in src/tensor/tensor.c as of chapter 01\n");
    free(err);
}

/* The book is written whole or not at all: a weave that stops at the last
 * chapter (a transcript section its source does not have) has not
 * rewritten the pages before it, though chapter 01's would now differ,
 * and leaves no temporary. */
Test(docs, a_failed_weave_leaves_the_book_as_it_was)
{
    char dir[64];
    weave_into(".", dir);
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "chapters src");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "printf 'a line the page has not seen\\n' >> "
             "%s/tests/expected/01_shapes_strides_views.txt && "
             "last=$(ls %s/tests/expected | tail -n 1) && "
             "printf '## 99. No such section\\n' >> %s/tests/expected/$last && "
             "ls -lR --time-style=full-iso %s > %s/before && "
             "cat %s/*.md %s/teacher/*.md >> %s/before",
             root, root, root, dir, root, dir, dir, root);
    run(cmd);
    char *err = weave_fails(root, dir);
    HOLDS(err, "output section \"99. No such section\" has no section() call");
    free(err);
    snprintf(cmd, sizeof cmd,
             "ls -lR --time-style=full-iso %s > %s/after && "
             "cat %s/*.md %s/teacher/*.md >> %s/after && "
             "cmp -s %s/before %s/after && "
             "test -z \"$(ls -A %s | grep -v '\\.md$' | grep -vx teacher)\" && "
             "test -z \"$(ls -A %s/teacher | grep -v '\\.md$')\"",
             dir, root, dir, dir, root, root, root, dir, dir);
    run(cmd);
    remove_trees(root, dir);
}

/* The key answers every exercise of every chapter, in order: a key whose
 * sections skip an exercise, or a chapter with no key, stops the weaver
 * with one line, and a weave into an empty folder that stops there leaves
 * it empty, with no teacher/ made. */
Test(docs, a_key_that_skips_an_exercise_stops_the_weaver)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "chapters src teacher");
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "sed -i 's/section(\"Exercise 4\")/section(\"Exercise 5\")/' "
             "%s/teacher/06_splitting_heads.c",
             root);
    run(cmd);
    const char *want[2] = {
        "weave: teacher/06_splitting_heads.c: section 4 is \"Exercise 5\", "
        "not \"Exercise 4\"\n",
        "weave: teacher/17_grouped_query_attention.c is missing: chapter 17's "
        "exercises have no key\n"};
    for (int k = 0; k < 2; k++) {
        if (k == 1) {
            snprintf(cmd, sizeof cmd,
                     "cp teacher/06_splitting_heads.c %s/teacher/ && "
                     "rm %s/teacher/17_grouped_query_attention.c", root, root);
            run(cmd);
        }
        char dir[] = "/tmp/mha-docs-XXXXXX";
        cr_assert_not_null(mkdtemp(dir));
        char *err = weave_fails(root, dir);
        cr_assert_str_eq(err, want[k]);
        free(err);
        snprintf(cmd, sizeof cmd, "test -z \"$(ls -A %s)\" && rmdir %s", dir, dir);
        run(cmd);
    }
    remove_trees(root, NULL);
}

/* The book's contents point at the key only when there is one: woven
 * without teacher/ (as in a student's copy) it has no link to
 * teacher/README.md and no line of tools/book-index.md's "@key " lines,
 * while the committed book, woven with the key, has the link. */
Test(docs, the_contents_point_at_the_key_only_with_a_key)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "chapters src");
    char dir[64];
    weave_into(root, dir);
    char *without = slurp_in(dir, "README.md"), *with = slurp_file("docs/README.md");
    cr_assert_not_null(without);
    cr_assert_not_null(with);
    cr_assert_null(strstr(without, "teacher/README.md"));
    cr_assert_null(strstr(without, "@key"));
    HOLDS(with, "key](teacher/README.md)");
    cr_assert_null(strstr(with, "@key"));
    struct stat st;
    char path[600];
    snprintf(path, sizeof path, "%s/teacher", dir);
    cr_assert_neq(stat(path, &st), 0, "a book without teacher/ has no key");
    free(without);
    free(with);
    remove_trees(root, dir);
}

//> 15
/* The contents come in parts ("@part NN Title" after @chapters): a book
 * of chapters 01 and 15 only has the first part and the third, with
 * their headings, and no heading of the part that holds none of its
 * chapters. */
Test(docs, the_contents_come_in_parts)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "src");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/chapters && cp chapters/01_shapes_strides_views.c "
             "chapters/15_positional_encoding.c %s/chapters/",
             root, root);
    run(cmd);
    char dir[64];
    weave_into(root, dir);
    char *index = slurp_in(dir, "README.md");
    cr_assert_not_null(index);
    const char *one = strstr(index, "\n### Part 1: The module\n\n| # |");
    const char *ch01 = strstr(index, "\n| 01 | [");
    const char *three = strstr(index, "\n### Part 3: Attention in today's models\n");
    const char *ch15 = strstr(index, "\n| 15 | [");
    cr_assert(one && ch01 && three && ch15 && one < ch01 && ch01 < three &&
              three < ch15, "%s", index);
    cr_assert_null(strstr(index, "Part 2"), "%s", index);
    cr_assert_null(strstr(index, "@part"), "%s", index);
    free(index);
    remove_trees(root, dir);
}

/* A part that does not start after the part before it stops the weaver,
 * naming the line. */
Test(docs, parts_out_of_order_stop_the_weaver)
{
    char root[] = "/tmp/mha-docs-root-XXXXXX";
    book_root(root, "src");
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "mkdir -p %s/chapters && cp chapters/01_shapes_strides_views.c "
             "%s/chapters/ && sed -i 's/^@part 12 /@part 11 /; "
             "s/^@part 15 /@part 09 /' %s/tools/book-index.md",
             root, root, root);
    run(cmd);
    char dir[] = "/tmp/mha-docs-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char *err = weave_fails(root, dir);
    cr_assert_str_eq(err, "weave: tools/book-index.md: \"@part 09 Attention "
                          "in today's models\" is not \"@part NN Title\" "
                          "with NN above the part before it\n");
    free(err);
    char path[600];
    snprintf(path, sizeof path, "%s/README.md", dir);
    struct stat st;
    cr_assert_neq(stat(path, &st), 0, "a failed weave wrote %s", path);
    remove_trees(root, dir);
}
//<

/* Charts are pictures too: chapter 13 announces its loss curve as
 * "[plot: plots/13_loss.png ...]" and its page shows the book's copy,
 * docs/pictures/13_loss.png (plots/ is the chapters' own, untracked). */
Test(docs, charts_are_pictures_too)
{
    char dir[64];
    weave_into(".", dir);
    char *page = slurp_in(dir, "13_training.md");
    cr_assert_not_null(page);
    const char *said = strstr(page, "[plot: plots/13_loss.png");
    const char *shown = strstr(page, "![13_loss](pictures/13_loss.png)");
    cr_assert_not_null(said);
    cr_assert_not_null(shown);
    cr_assert_gt(shown, said);
    cr_assert_null(strstr(page, "](../plots/13_loss"));
    free(page);
    remove_trees(dir, NULL);
}

/* --- an exercise comes before its solution ----------------------------- */

/* A page that shows a function marked "@exercise NAME" shows it folded in
 * <details>, under "Solution: NAME", so that a reader who works alone meets
 * the exercise first: chapter 06 shows transpose_qkv, which its exercise 4
 * asks for, and the definition appears only inside the fold. */
Test(docs, an_exercise_is_shown_folded)
{
    char *page = book_page("06_splitting_heads.md");
    const char *said = strstr(page, "Exercise 4 below asks you to write "
                                    "`transpose_qkv`; its body is folded here:");
    const char *open = strstr(page, "<details><summary>Solution: transpose_qkv"
                                    "</summary>\n\n");
    const char *code = strstr(page, "int transpose_qkv(const tensor *x");
    cr_assert_not_null(said);
    cr_assert_not_null(open);
    cr_assert_not_null(code);
    cr_assert_lt(said, open);
    cr_assert_lt(open, code, "the solution's code appears before its fold");
    const char *close = strstr(open, "</details>");
    cr_assert_not_null(close);
    cr_assert_lt(code, close);
    cr_assert_lt(close, strstr(page, "## Exercises"));
    free(page);
}

/* A chapter that replaces lines of an earlier chapter's function shows
 * them as a diff does: the old lines marked "-" right above the new ones
 * marked "+" (page 16: the causal rule replaces step 3's repeat). */
Test(docs, replaced_lines_are_shown_removed)
{
    char *page = book_page("16_kv_cache.md");
    const char *said = strstr(page, "the lines marked `+` are new here, those "
                                    "marked `-` gone.\n\n```diff\n");
    cr_assert_not_null(said);
    const char *old = strstr(said, "\n-    if (valid_lens)\n"
                                   "-        STEP(repeat_valid_lens(valid_lens, h, "
                                   "&s->lens));\n"
                                   "+    STEP(head_lens(m, valid_lens, queries->"
                                   "shape[0], queries->shape[1],\n");
    cr_assert_not_null(old, "step 3's replaced lines are not shown removed");
    free(page);
}

/* A prototype over several lines ("...,\n    tensor **out);") is not the
 * definition: page 14 shows apply_head_mask's body. */
Test(docs, a_prototype_is_not_shown_for_the_definition)
{
    char *page = book_page("14_head_importance.md");
    const char *at = strstr(page, "static int apply_head_mask(");
    cr_assert_not_null(at);
    cr_assert_not_null(strstr(at, "tensor **unmasked)\n{\n"),
                       "page 14 shows apply_head_mask's prototype, not its body");
    free(page);
}

/* Every function the book shows with its "@exercise" mark is inside a
 * fold, on every page. */
Test(docs, every_shown_exercise_is_folded)
{
    static char pages[64][300];
    size_t npages = book_pages(pages, 64);
    int folded = 0;
    for (size_t p = 0; p < npages; p++) {
        const char *path = pages[p];
        char *page = slurp_file(path);
        cr_assert_not_null(page);
        for (const char *at = strstr(page, " * @exercise "); at;
             at = strstr(at + 1, " * @exercise ")) {
            const char *open = NULL, *close = NULL;
            for (const char *o = strstr(page, "<details>"); o && o < at;
                 o = strstr(o + 1, "<details>"))
                open = o;
            for (const char *c = strstr(page, "</details>"); c && c < at;
                 c = strstr(c + 1, "</details>"))
                close = c;
            cr_expect(open && (!close || close < open),
                      "%s shows an exercise's solution unfolded: %.60s",
                      path, at);
            folded++;
        }
        free(page);
    }
    cr_assert_geq(folded, 6, "only %d folded solutions found", folded);
}

/* --- every picture shown is there -------------------------------------- */

/* The targets of the markdown images ![alt](target) in page (or, with
 * links set, of every link [text](target) and image), outside ```
 * fences, one per line in out (at most size chars), each joined to dir
 * (the page's directory, "" for the top) and made plain: "a/../b" is
 * "b".  Links to the web (with "://" or mailto:) and to a place in the
 * same page ("#...") are left out, and a link's "#place" is dropped.
 * Returns how many. */
static int markdown_targets(const char *page, const char *dir, char *out,
                            size_t size, int links)
{
    int fenced = 0, n = 0;
    size_t used = 0;
    out[0] = '\0';
    for (const char *line = page; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (strncmp(line, "```", 3) == 0)
            fenced = !fenced;
        for (const char *at = line; !fenced && at < line + len;) {
            const char *img = strstr(at, links ? "](" : "![");
            if (!img || img >= line + len)
                break;
            const char *open = strstr(img, "](");
            const char *close = open ? strchr(open, ')') : NULL;
            if (!close || close >= line + len)
                break;
            char target[512], joined[1024], plain[1024] = "";
            snprintf(target, sizeof target, "%.*s", (int)(close - open - 2),
                     open + 2);
            target[strcspn(target, " ")] = '\0'; /* a "title" after it */
            if (links)
                target[strcspn(target, "#")] = '\0'; /* a place in it */
            at = close + 1;
            if (strstr(target, "://") || !target[0] ||
                strncmp(target, "mailto:", 7) == 0)
                continue;
            snprintf(joined, sizeof joined, "%s%s%s", dir, *dir ? "/" : "",
                     target);
            /* drop "." and resolve ".." against the part before it */
            char *rest;
            for (char *part = strtok_r(joined, "/", &rest); part;
                 part = strtok_r(NULL, "/", &rest)) {
                if (strcmp(part, ".") == 0)
                    continue;
                if (strcmp(part, "..") == 0) {
                    char *slash = strrchr(plain, '/');
                    if (slash)
                        *slash = '\0';
                    else if (plain[0])
                        plain[0] = '\0';
                    else
                        strcat(plain, ".."); /* above the top: left as is */
                    continue;
                }
                size_t k = strlen(plain);
                snprintf(plain + k, sizeof plain - k, "%s%s", k ? "/" : "", part);
            }
            used += (size_t)snprintf(out + used, used < size ? size - used : 0,
                                     "%s\n", plain);
            n++;
        }
        line = end ? end + 1 : NULL;
    }
    return n;
}

static int image_targets(const char *page, const char *dir, char *out,
                         size_t size)
{
    return markdown_targets(page, dir, out, size, 0);
}

Test(docs, image_targets_reads_markdown_images)
{
    char out[512];
    cr_assert_eq(image_targets("# T\n![a](pictures/x.png) and ![b](../plots/m.svg)\n"
                               "```\n![c](not/this.png)\n```\n"
                               "![d](https://example.org/y.png) ![e](./z.png \"t\")\n",
                               "docs", out, sizeof out), 3);
    cr_assert_str_eq(out, "docs/pictures/x.png\nplots/m.svg\ndocs/z.png\n");
    cr_assert_eq(image_targets("![x](docs/pictures/08_heads.png)\n", "", out,
                               sizeof out), 1);
    cr_assert_str_eq(out, "docs/pictures/08_heads.png\n");
    cr_assert_eq(image_targets("[a link](x.md), no image\n", "", out, sizeof out), 0);
}

/* The targets of every image (or, with links set, every link and image)
 * of the README and of the book's pages in docs/, each handed to
 * visit(page, target, ctx); returns how many. */
static int visit_targets(int links,
                         void (*visit)(const char *page, const char *target, void *ctx),
                         void *ctx)
{
    static char pages[64][300];
    snprintf(pages[0], sizeof pages[0], "README.md");
    size_t npages = 1 + book_pages(pages + 1, 63);
    int n = 0;
    for (size_t p = 0; p < npages; p++) {
        char *page = slurp_file(pages[p]);
        cr_assert_not_null(page, "cannot read %s", pages[p]);
        static char targets[65536];
        n += markdown_targets(page, strncmp(pages[p], "docs/", 5) == 0 ? "docs" : "",
                              targets, sizeof targets, links);
        for (char *t = strtok(targets, "\n"); t; t = strtok(NULL, "\n"))
            visit(pages[p], t, ctx);
        free(page);
    }
    return n;
}

static void picture_is_tracked(const char *page, const char *t, void *ctx)
{
    int git = *(int *)ctx;
    struct stat st;
    cr_expect(stat(t, &st) == 0 && S_ISREG(st.st_mode),
              "%s shows %s, which is not there", page, t);
    if (!git || strchr(t, '\''))
        return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "git ls-files --error-unmatch -- '%s' >/dev/null 2>&1", t);
    cr_expect(system(cmd) == 0, "%s shows %s, which git does not track", page, t);
}

/* Every image the book (the pages in docs/) and the README show names a file that
 * exists and that git tracks, so it shows on a fresh clone and online.
 * Outside a git checkout (a copy of the files) existence is all that can
 * be checked. */
Test(docs, every_picture_shown_is_tracked)
{
    int git = system("git rev-parse --is-inside-work-tree >/dev/null 2>&1") == 0;
    int images = visit_targets(0, picture_is_tracked, &git);
    cr_assert_gt(images, 20, "only %d images found", images);
}

Test(docs, link_targets_reads_markdown_links)
{
    char out[512];
    cr_assert_eq(markdown_targets("[a](x.md#part) and [b](../src/) [c](#here)\n"
                                  "```\n[d](not/this.md)\n```\n"
                                  "[e](https://example.org/) ![f](p.png)\n",
                                  "docs", out, sizeof out, 1), 3);
    cr_assert_str_eq(out, "docs/x.md\nsrc\ndocs/p.png\n");
}

static void link_resolves(const char *page, const char *t, void *ctx)
{
    (void)ctx;
    struct stat st;
    cr_expect(stat(t, &st) == 0, "%s links to %s, which is not there", page, t);
}

/* Every relative link and image of the README and of the pages in docs/
 * (the book, its reference pages) names a file or folder that is
 * there: a page moved or renamed cannot leave a link behind. */
Test(docs, every_relative_link_resolves)
{
    int links = visit_targets(1, link_resolves, NULL);
    cr_assert_gt(links, 100, "only %d links found", links);
}

/* The README is a front page: at most 300 lines. */
Test(docs, the_readme_is_a_front_page)
{
    char *readme = slurp_file("README.md");
    cr_assert_not_null(readme);
    int lines = 0;
    for (const char *c = readme; *c; c++)
        lines += *c == '\n';
    cr_expect_leq(lines, 300, "README.md has %d lines; keep it a front page "
                  "(at most 300) and move the rest to docs/", lines);
    free(readme);
}

/* --- the book's pictures change only when their data does -------------- */

/* tools/same-numbers.awk, which tools/docs-pictures.sh asks whether a
 * picture's data changed: its exit status for two files' text. */
static int same_numbers(const char *a, const char *b)
{
    char dir[] = "/tmp/mha-same-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], cmd[512];
    const char *text[] = {a, b};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%c", dir, 'a' + i);
        FILE *f = fopen(path, "w");
        cr_assert_not_null(f);
        fputs(text[i], f);
        fclose(f);
    }
    snprintf(cmd, sizeof cmd,
             "awk -f tools/same-numbers.awk %s/a %s/b >/dev/null; s=$?; "
             "rm -rf %s; exit $s", dir, dir, dir);
    int status = system(cmd);
    cr_assert(WIFEXITED(status));
    return WEXITSTATUS(status);
}

Test(docs, same_numbers_ignores_rounding_only)
{
    /* the last digits another CPU's kernels move: the same picture */
    cr_assert_eq(same_numbers("set cbrange [0.010373820135859656:1]\n1e-05 0\n",
                              "set cbrange [0.010373820135859661:1]\n1e-05 0\n"), 0);
    cr_assert_eq(same_numbers("\"head 1\" 0.07922792834957929\n",
                              "\"head 1\" 0.07922792834957941\n"), 0);
    cr_assert_eq(same_numbers("0 3e-17\n", "0 -2e-17\n"), 0);
    cr_assert_eq(same_numbers("", ""), 0);
    /* a number that moved in its 9th digit, other text, another line */
    cr_assert_eq(same_numbers("0.0103738201\n", "0.0103738202\n"), 1);
    cr_assert_eq(same_numbers("set cbrange [0:1]\n", "set cbrange [0:2]\n"), 1);
    cr_assert_eq(same_numbers("set title 'loss'\n", "set title 'Loss'\n"), 1);
    cr_assert_eq(same_numbers("1 2\n", "1 2\n3 4\n"), 1);
    cr_assert_eq(same_numbers("1 2\n3 4\n", "1 2\n"), 1);
    cr_assert_eq(same_numbers("1 2\n", ""), 1);
    cr_assert_eq(same_numbers("1 2\n", "1 2 3\n"), 1);
}

/* --- every page has one title ------------------------------------------ */

/* The "# " lines of a markdown page outside ``` fences: its H1 titles. */
static int h1_count(const char *page)
{
    int fenced = 0, n = 0;
    for (const char *line = page; line && *line;) {
        if (strncmp(line, "```", 3) == 0)
            fenced = !fenced;
        else if (!fenced && strncmp(line, "# ", 2) == 0)
            n++;
        line = strchr(line, '\n');
        line = line ? line + 1 : NULL;
    }
    return n;
}

Test(docs, h1_count_skips_code_blocks)
{
    cr_assert_eq(h1_count("# Title\n\ntext\n```sh\n# a comment\n```\n"), 1);
    cr_assert_eq(h1_count("# Title\n\n# Another\n"), 2);
    cr_assert_eq(h1_count("## Section\n #not a title\n"), 0);
}

/* Each of words[0 .. n-1] in text before end, in that order, or the
 * first that is missing (NULL when all are there). */
static const char *missing_in_order(const char *text, const char *end,
                                    const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *at = strstr(text, words[i]);
        if (!at || at >= end)
            return words[i];
        text = at;
    }
    return NULL;
}

/* A page that shows a function made of steps and its door: steps_def
 * whole in one code block, its calls in order and none of the words a
 * door's work needs (checks, the trace, names); then door_def, calling
 * its duties in order. *body_lines: the steps' body's lines. */
static void expect_steps_then_door(const char *page, const char *steps_def,
                                   const char *const *steps, size_t n_steps,
                                   const char *door_def,
                                   const char *const *duties, size_t n_duties,
                                   size_t *body_lines)
{
    const char *def = strstr(page, steps_def);
    cr_assert_not_null(def, "the page shows no %s", steps_def + 1);
    const char *open = strstr(def, "\n{\n"), *close = strstr(def, "\n}\n");
    cr_assert(open && close && open < close);
    *body_lines = 1; // the last line of the body ends at close
    for (const char *c = open + 3; c < close; c++)
        *body_lines += *c == '\n';
    char *body = strndup(def, (size_t)(close - def));
    cr_assert_null(strstr(body, "```"), "the steps span two code blocks");
    const char *gone = missing_in_order(body, body + strlen(body), steps,
                                        n_steps);
    cr_assert_null(gone, "no %s after the step before it", gone);
    static const char *const not_steps[] = {"check", "trace", "names",
                                            "mha_fail", "if (!status)"};
    for (size_t i = 0; i < sizeof not_steps / sizeof not_steps[0]; i++)
        cr_assert_null(strstr(body, not_steps[i]), "the steps hold %s",
                       not_steps[i]);
    free(body);
    const char *door = strstr(close, door_def);
    cr_assert_not_null(door, "the page shows no %s after the steps",
                       door_def + 1);
    const char *door_end = strstr(door, "\n}\n");
    cr_assert_not_null(door_end);
    gone = missing_in_order(door, door_end, duties, n_duties);
    cr_assert_null(gone, "the door does not call %s in turn", gone);
}

/* Page 02 shows the linear layer as every later page shows a whole
 * pass: its steps whole (the trace's line, RECORD, then x and W as
 * matrices, y, the product), then the door that checks the layer and x
 * (linear_check) and runs them. */
Test(docs, page_02_shows_the_linear_steps_then_their_door)
{
    char *page = book_page("02_matmul_linear.md");
    static const char *const steps[] = {"RECORD(x, y,",
                                        "STEP(tensor_as_rows(x, &xm))",
                                        "STEP(tensor_as_rows(l->weight, &wm))",
                                        "STEP(alloc_output(l, x, y))",
                                        "STEP(product(l, &xm, &wm, *y))"};
    static const char *const duties[] = {"linear_check(", "linear_steps("};
    size_t lines;
    expect_steps_then_door(page, "\nint linear_steps(", steps,
                           sizeof steps / sizeof steps[0],
                           "\nint linear_forward(", duties,
                           sizeof duties / sizeof duties[0], &lines);
    const char *product = strstr(page, "\nstatic int product(");
    cr_assert(product && product < strstr(page, "\nint linear_forward("),
              "the page shows the product before the door");
    free(page);
}

/* Page 04 is where a reader first meets steps and a door: the scaled dot
 * product's steps whole, the trace's record opened in one line (SCOPE_OF,
 * closed as they return), the scores Q K^T, the masked softmax, then
 * weigh_values, and the weights handed out; then the door that checks the
 * inputs (start_pooling) and runs the steps. */
Test(docs, page_04_shows_the_dot_product_steps_then_their_door)
{
    char *page = book_page("04_dot_product_attention.md");
    static const char *const steps[] = {"SCOPE_OF(",
                                        "STEP(tensor_bmm(queries, keys, 1",
                                        "STEP(masked_softmax_steps(",
                                        "STEP(weigh_values(",
                                        "give_weights("};
    static const char *const duties[] = {"start_pooling(",
                                         "dot_attention_steps("};
    size_t lines;
    expect_steps_then_door(page, "\nint dot_attention_steps(", steps,
                           sizeof steps / sizeof steps[0],
                           "\nint dot_attention_forward(", duties,
                           sizeof duties / sizeof duties[0], &lines);
    free(page);
}

/* Page 05 shows the additive pooling as page 04 shows the dot product:
 * its steps whole (the trace's record, W_q and W_k, the broadcast tanh,
 * w_v, the reshape to scores, the masked softmax, weigh_values, the
 * weights handed out), then its door, which checks the inputs and the
 * layers before it runs them. */
Test(docs, page_05_shows_the_additive_steps_then_their_door)
{
    char *page = book_page("05_additive_attention.md");
    static const char *const steps[] = {
        "SCOPE_OF(", "STEP(linear_steps(&a->W_q", "STEP(linear_steps(&a->W_k",
        "STEP(broadcast_tanh(", "STEP(linear_steps(&a->w_v",
        "STEP(tensor_reshape(scores4", "STEP(masked_softmax(",
        "STEP(weigh_values(", "give_weights("};
    static const char *const duties[] = {"start_pooling(", "linear_check(",
                                         "additive_attention_steps("};
    size_t lines;
    expect_steps_then_door(page, "\nstatic int additive_attention_steps(",
                           steps, sizeof steps / sizeof steps[0],
                           "\nint additive_attention_forward(", duties,
                           sizeof duties / sizeof duties[0], &lines);
    free(page);
}

/* Page 08 shows the module's six steps as of chapter 08 whole, in one
 * code block, in at most 30 lines of body, with nothing but the steps:
 * no check, no trace, no names; then the door that checks the inputs,
 * opens the trace's record in one line, names the inputs, runs the steps
 * and checks the result. */
Test(docs, page_08_shows_the_forward_pass_whole)
{
    char *page = book_page("08_multihead_module.md");
    static const char *const steps[] = {
        "linear_steps(&m->W_q", "transpose_qkv(s->q",
        "linear_steps(&m->W_k", "transpose_qkv(s->k",
        "linear_steps(&m->W_v", "transpose_qkv(s->v", "repeat_valid_lens(",
        "dot_attention_steps(", "transpose_output(",
        "linear_steps(&m->W_o"};
    static const char *const duties[] = {"multihead_check_inputs(",
                                         "SCOPE_OF(", "name_inputs(",
                                         "multihead_steps(", "check_overflow("};
    size_t lines;
    expect_steps_then_door(page, "\nstatic int multihead_steps(", steps,
                           sizeof steps / sizeof steps[0],
                           "\nint multihead_forward(", duties,
                           sizeof duties / sizeof duties[0], &lines);
    cr_assert_leq(lines, 30, "the body is %zu lines", lines);
    free(page);
}

/* Page 16 shows the decode step as page 08 shows the module: its steps
 * whole, one call each in order, nothing but the steps; then the door
 * that checks, opens the trace, runs them, checks the result and only
 * then moves the cache's length on. */
Test(docs, page_16_shows_the_decode_steps_then_their_door)
{
    char *page = book_page("16_kv_cache.md");
    static const char *const steps[] = {
        "STEP(kv_step_project(", "STEP(append(m, c->keys",
        "STEP(append(m, c->values",
        "STEP(valid_lens_per_row(", "STEP(repeat_valid_lens(",
        "STEP(multihead_attend(", "STEP(transpose_output(",
        "STEP(linear_steps(&m->W_o"};
    static const char *const duties[] = {"check_step(", "SCOPE_OF(",
                                         "decode_steps(",
                                         "multihead_find_overflow(",
                                         "c->length = t"};
    size_t lines;
    expect_steps_then_door(page, "\nstatic int decode_steps(", steps,
                           sizeof steps / sizeof steps[0],
                           "\nint kv_cache_decode_step(", duties,
                           sizeof duties / sizeof duties[0], &lines);
    free(page);
}

/* The weaver writes each page's title; prose adds no second one. */
Test(docs, every_page_has_one_title)
{
    static char paths[64][300];
    size_t pages = book_pages(paths, 64);
    for (size_t p = 0; p < pages; p++) {
        char *page = slurp_file(paths[p]);
        cr_assert_not_null(page);
        cr_expect_eq(h1_count(page), 1, "%s has %d H1 titles outside code",
                     paths[p], h1_count(page));
        free(page);
    }
    cr_assert_gt(pages, 14);
}

/* --- every glossary term is linked where it is taught ------------------ */

/* Whether a page up to chapter `chapter` links to the glossary's entry
 * `anchor` ("glossary.md#anchor"). */
static int glossary_link_before(const char (*pages)[300], size_t npages,
                                int chapter, const char *anchor)
{
    char link[96];
    snprintf(link, sizeof link, "](glossary.md#%s)", anchor);
    for (size_t p = 0; p < npages; p++) {
        const char *base = strrchr(pages[p], '/') + 1;
        if (!isdigit((unsigned char)base[0]) || atoi(base) > chapter)
            continue;
        char *page = slurp_file(pages[p]);
        cr_assert_not_null(page);
        int found = strstr(page, link) != NULL;
        free(page);
        if (found)
            return 1;
    }
    return 0;
}

/* Each term of tools/glossary.md ("- **term**<a id="anchor"></a>: ...
 * (chapter NN ...") has an anchor, and is linked to it from the page of
 * the first chapter it names or an earlier one. */
Test(docs, every_glossary_term_is_linked_where_taught)
{
    static char pages[64][300];
    size_t npages = book_pages(pages, 64);
    char *glossary = slurp_file("tools/glossary.md");
    cr_assert_not_null(glossary);
    int terms = 0;
    for (char *at = strstr(glossary, "\n- **"); at; at = strstr(at + 1, "\n- **")) {
        char *term = at + 5, *end = strstr(term, "**");
        cr_assert_not_null(end);
        int n = (int)(end - term);
        char anchor[64];
        cr_assert(sscanf(end, "**<a id=\"%63[^\"]\"></a>", anchor) == 1,
                  "glossary term '%.*s' has no anchor: write "
                  "**%.*s**<a id=\"name\"></a>", n, term, n, term);
        char *next = strstr(end, "\n- **");
        char *ch = strstr(end, "(chapter");
        cr_assert(ch && (!next || ch < next), "glossary term '%.*s' names no chapter",
                  n, term);
        ch += strcspn(ch, "0123456789");
        int chapter = atoi(ch);
        cr_expect(glossary_link_before((const char (*)[300])pages, npages, chapter,
                                       anchor),
                  "glossary term '%.*s' (chapter %02d) is linked from no page "
                  "up to chapter %02d: link its first use to glossary.md#%s",
                  n, term, chapter, chapter, anchor);
        terms++;
    }
    free(glossary);
    cr_assert_geq(terms, 25);
}

/* Every link into the glossary names an entry it has: a link to
 * glossary.md#name finds <a id="name"> there, so the reader lands on the
 * term, not at the top. */
Test(docs, every_glossary_link_lands_on_its_term)
{
    static char pages[64][300];
    size_t npages = book_pages(pages, 64);
    char *glossary = slurp_file("docs/glossary.md");
    cr_assert_not_null(glossary);
    int links = 0;
    for (size_t p = 0; p < npages; p++) {
        char *page = slurp_file(pages[p]);
        cr_assert_not_null(page);
        for (const char *at = page; (at = strstr(at, "](glossary.md")); at++) {
            const char *rest = at + strlen("](glossary.md");
            if (*rest == ')') { // the glossary as a whole: only by its name
                const char *open = at;
                while (open > page && *open != '[')
                    open--;
                cr_expect(strncmp(open, "[glossary]", 10) == 0,
                          "%s links %.*s to the top of the glossary: give "
                          "the term's anchor, glossary.md#name",
                          pages[p], (int)(rest - open + 1), open);
                continue;
            }
            char anchor[64], id[96];
            cr_assert(sscanf(rest, "#%63[^)]", anchor) == 1);
            snprintf(id, sizeof id, "<a id=\"%s\"></a>", anchor);
            cr_expect(strstr(glossary, id), "%s links to glossary.md#%s, "
                      "which the glossary has no anchor for", pages[p], anchor);
            links++;
        }
        free(page);
    }
    free(glossary);
    cr_assert_geq(links, 30);
}

/* --- inline math stays on one line ------------------------------------ */

/* The lines of text (outside ``` fences, code spans removed) of page
 * that hold an odd number of single $: an inline formula that a line
 * break cuts, which the printed book (tools/book.py, as cmark and KaTeX
 * read it) leaves as raw TeX, and whose second line may even read as a
 * list item ("+ 4 \cdot ..."). */
static int math_cut_by_a_line(const char *path, char *first, size_t n)
{
    char *page = slurp_file(path);
    cr_assert_not_null(page, "%s", path);
    int cuts = 0, fence = 0;
    for (char *line = page; line && *line;) {
        char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len >= 3 && strncmp(line, "```", 3) == 0)
            fence = !fence;
        int dollars = 0, code = 0;
        for (size_t i = 0; !fence && i < len; i++) {
            if (line[i] == '`')
                code = !code;
            else if (code)
                continue;
            else if (line[i] == '\\')
                i++;
            else if (line[i] == '$' && i + 1 < len && line[i + 1] == '$')
                i++;
            else if (line[i] == '$')
                dollars++;
        }
        if (dollars % 2 && cuts++ == 0)
            snprintf(first, n, "%.*s", (int)(len < 100 ? len : 100), line);
        line = end ? end + 1 : NULL;
    }
    free(page);
    return cuts;
}

Test(docs, inline_math_stays_on_one_line)
{
    static char pages[64][300];
    size_t npages = book_pages(pages, 64);
    char first[128];
    for (size_t p = 0; p < npages; p++) {
        int cuts = math_cut_by_a_line(pages[p], first, sizeof first);
        cr_expect_eq(cuts, 0, "%s: %d inline formulas cut by a line break, "
                     "the first on the line \"%s\": keep each $...$ on one "
                     "line of the chapter's source", pages[p], cuts, first);
    }
    DIR *d = opendir("docs/teacher");
    cr_assert_not_null(d);
    int keys = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (!strstr(e->d_name, ".md"))
            continue;
        char path[320];
        snprintf(path, sizeof path, "docs/teacher/%.290s", e->d_name);
        int cuts = math_cut_by_a_line(path, first, sizeof first);
        cr_expect_eq(cuts, 0, "%s: %d inline formulas cut by a line break, "
                     "the first on the line \"%s\"", path, cuts, first);
        keys++;
    }
    closedir(d);
    cr_assert_geq(keys, 21);
}

/* --- numbers in the prose come from the output ------------------------- */

/* The prose of a chapter source: the lines of its md comment blocks,
 * without the leading " * ".  Caller frees. */
static char *chapter_prose(const char *src)
{
    size_t cap = strlen(src) + 1, len = 0;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    int inside = 0;
    for (const char *line = src; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        const char *t = line;
        while (t < line + n && (*t == ' ' || *t == '\t'))
            t++;
        size_t tn = (size_t)(line + n - t);
        if (!inside && tn == 4 && strncmp(t, "/*md", 4) == 0) {
            inside = 1;
        } else if (inside && tn >= 2 && strncmp(t, "*/", 2) == 0) {
            inside = 0;
        } else if (inside) {
            if (tn && *t == '*') {
                t++;
                if (t < line + n && *t == ' ')
                    t++;
            }
            memcpy(out + len, t, (size_t)(line + n - t));
            len += (size_t)(line + n - t);
            out[len++] = '\n';
        }
        line = end ? end + 1 : NULL;
    }
    out[len] = '\0';
    return out;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Does number (e.g. "0.223607", "98%") occur in text as a whole number:
 * no digit or '.' right before it, no digit right after? */
static int occurs_whole(const char *text, const char *number)
{
    size_t n = strlen(number);
    for (const char *at = text; (at = strstr(at, number)); at++) {
        int before = at > text && (is_digit(at[-1]) || at[-1] == '.');
        int after = is_digit(at[n]) || (at[n] == '.' && is_digit(at[n + 1]));
        if (!before && !after)
            return 1;
    }
    return 0;
}

/* The rule: a number written in a chapter's prose with a decimal point
 * (0.223607, 1.5032) or a percent sign (98%, 100.00%) must occur, written
 * the same way, in the chapter's checked transcript; with whole_digits
 * above 0, so must every whole number of that many digits or more (the
 * key's rule, below).  Not counted: math ($...$ and $$...$$), `code`
 * spans, ``` fenced blocks and @show lines, where numbers are formulas,
 * code or examples, not results.  Returns how many numbers are missing
 * and lists them, space-separated, in missing (cut short at size). */
static int stale_numbers(const char *prose, const char *transcript,
                         int whole_digits, char *missing, size_t size)
{
    int stale = 0, fenced = 0, math = 0, code = 0;
    missing[0] = '\0';
    for (const char *p = prose; *p;) {
        int line_start = p == prose || p[-1] == '\n';
        if (line_start && strncmp(p, "```", 3) == 0) {
            fenced = !fenced;
            p += 3;
            continue;
        }
        if (line_start && strncmp(p, "@show ", 6) == 0) {
            const char *nl = strchr(p, '\n');
            p = nl ? nl + 1 : p + strlen(p);
            continue;
        }
        if (fenced) {
            p++;
            continue;
        }
        if (!math && !code && p[0] == ']' && p[1] == '(') {
            /* a link's address (an arXiv number) is not a quoted result */
            const char *close = strchr(p, ')');
            p = close ? close + 1 : p + strlen(p);
            continue;
        }
        if (!code && *p == '$') {
            size_t n = p[1] == '$' ? 2 : 1;
            math = math == (int)n ? 0 : math ? math : (int)n;
            p += n;
            continue;
        }
        if (!math && *p == '`') {
            code = !code;
            p++;
            continue;
        }
        if (math || code || !is_digit(*p) ||
            (p > prose && (is_digit(p[-1]) || p[-1] == '.'))) {
            p++;
            continue;
        }
        const char *q = p;
        while (is_digit(*q))
            q++;
        int decimal = *q == '.' && is_digit(q[1]);
        if (decimal)
            for (q++; is_digit(*q);)
                q++;
        if (*q == '%')
            q++;
        if (decimal || q[-1] == '%' ||
            (whole_digits > 0 && q - p >= whole_digits)) {
            char number[64];
            snprintf(number, sizeof number, "%.*s", (int)(q - p), p);
            if (!occurs_whole(transcript, number)) {
                size_t used = strlen(missing);
                snprintf(missing + used, size - used, "%s%s", used ? " " : "",
                         number);
                stale++;
            }
        }
        p = q;
    }
    return stale;
}

Test(docs, stale_numbers_finds_a_planted_number)
{
    const char *out = "loss 0.0002, 100.00% right\nscale 0.223607\n";
    char missing[256];
    cr_assert_eq(stale_numbers("The loss falls to 0.0002 and 100.00% of the "
                               "answers are right.\n", out, 0, missing,
                               sizeof missing), 0);
    /* a stale number, and one that is only a prefix of a printed one */
    cr_assert_eq(stale_numbers("The loss falls to 0.0003 with scale "
                               "0.2236.\n", out, 0, missing, sizeof missing), 2);
    cr_assert_str_eq(missing, "0.0003 0.2236");
    cr_assert_eq(stale_numbers("About 98% of the work.\n", out, 0, missing,
                               sizeof missing), 1);
    cr_assert_str_eq(missing, "98%");
    /* math, code spans, fenced code and @show lines are not checked;
     * whole numbers and a sentence's full stop are not decimals */
    cr_assert_eq(stale_numbers("$1/\\sqrt{20} = 0.5$ and $$x = 0.7$$, `0.9`,\n"
                               "```text\n1.5\n```\n@show src/a.c f 2.5\n"
                               "1e-12 and 3 heads, of 100.\n",
                               out, 0, missing, sizeof missing), 0);
    /* a link's address is not a quoted number; its text is */
    cr_assert_eq(stale_numbers("[Shazeer 2019](https://arxiv.org/abs/1911.02150) "
                               "and [0.7](x.md).\n", out, 0, missing, sizeof missing), 1);
    cr_assert_str_eq(missing, "0.7");
    char *prose = chapter_prose("/* Chapter 99: x.\n * 0.5 here is code\n */\n"
                                "/*md\n * Weights of 0.25.\n */\nint x;\n");
    cr_assert_str_eq(prose, "Weights of 0.25.\n");
    cr_assert_eq(stale_numbers(prose, out, 0, missing, sizeof missing), 1);
    free(prose);
    /* the key's rule: whole numbers of 3 digits or more count too, and a
     * printed "2048.5" is not the whole number 2048 */
    cr_assert_eq(stale_numbers("4096 flops and 2048 bytes, 17 heads, $n = 999$.\n",
                               "4096 flops, ratio 2048.5\n", 3, missing,
                               sizeof missing), 1);
    cr_assert_str_eq(missing, "2048");
}

Test(docs, numbers_in_the_prose_are_printed)
{
    DIR *d = opendir("chapters");
    cr_assert_not_null(d);
    struct dirent *e;
    size_t chapters = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || !is_digit(e->d_name[0]) || e->d_name[2] != '_' ||
            strcmp(e->d_name + n - 2, ".c") != 0)
            continue;
        char path[600];
        snprintf(path, sizeof path, "chapters/%s", e->d_name);
        char *src = slurp_file(path);
        snprintf(path, sizeof path, "tests/expected/%.*s.txt", (int)(n - 2),
                 e->d_name);
        char *transcript = slurp_file(path);
        cr_assert_not_null(src);
        cr_assert_not_null(transcript, "%s is missing", path);
        char *prose = chapter_prose(src);
        char missing[4096];
        stale_numbers(prose, transcript, 0, missing, sizeof missing);
        cr_expect_str_empty(missing, "chapters/%s quotes numbers its transcript "
                            "does not print: %s", e->d_name, missing);
        free(prose);
        free(src);
        free(transcript);
        chapters++;
    }
    closedir(d);
    cr_assert_gt(chapters, 13);
}
/* The marks-filter beside the weaver (marks.h) on a file of marks, as of
 * `args` ("02", "--handout 03" ...): what it prints and its exit status. */
static int marks_filter(const char *file, const char *args, char *out, size_t n)
{
    const char *w = WEAVE, *slash = strrchr(w, '/');
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%.*smarks-filter %s %s 2>/dev/null",
             slash ? (int)(slash - w + 1) : 0, w, args, file);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    size_t got = fread(out, 1, n - 1, p);
    out[got] = '\0';
    int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* A "handout" mark (the grading): in the full cut and a handout's cut
 * (--handout) of any chapter, in no chapter's snapshot; marks of chapters
 * inside it still apply. */
Test(docs, marks_filter_keeps_handout_lines_for_a_handout_only)
{
    char file[] = "/tmp/mha-marks-XXXXXX";
    int fd = mkstemp(file);
    cr_assert_geq(fd, 0);
    const char *text = "a\n#> handout\nb\n#> 03\nc\n#<\n#<\n#> 03\nd\n#<\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char out[256];
    cr_assert_eq(marks_filter(file, "02", out, sizeof out), 0);
    cr_assert_str_eq(out, "a\n");
    cr_assert_eq(marks_filter(file, "03", out, sizeof out), 0);
    cr_assert_str_eq(out, "a\nd\n");
    cr_assert_eq(marks_filter(file, "--handout 02", out, sizeof out), 0);
    cr_assert_str_eq(out, "a\nb\n");
    cr_assert_eq(marks_filter(file, "--handout 03", out, sizeof out), 0);
    cr_assert_str_eq(out, "a\nb\nc\nd\n");
    cr_assert_eq(marks_filter(file, "full", out, sizeof out), 0);
    cr_assert_str_eq(out, "a\nb\nc\nd\n");
    /* "handout" is a mark, not a cut */
    cr_assert_eq(marks_filter(file, "handout", out, sizeof out), 2);
    cr_assert_str_eq(out, "");
    unlink(file);
}

/* The teacher's key is held to a stricter rule: a number in a key's prose
 * (teacher/NN_topic.c) with a decimal point or a percent sign, or a whole
 * number of 3 digits or more, must occur in the key's checked output
 * (teacher/expected/), in the chapter's, or in the chapter's own prose,
 * where the exercise states its givens.  A student's handout has no
 * teacher/. */
Test(docs, numbers_in_the_key_are_printed)
{
    DIR *d = opendir("teacher");
    if (!d)
        return;
    struct dirent *e;
    size_t keys = 0;
    while ((e = readdir(d))) {
        size_t n = strlen(e->d_name);
        if (n < 5 || !is_digit(e->d_name[0]) || e->d_name[2] != '_' ||
            strcmp(e->d_name + n - 2, ".c") != 0)
            continue;
        const char *paths[] = {"teacher/%.*s.c", "teacher/expected/%.*s.txt",
                               "tests/expected/%.*s.txt", "chapters/%.*s.c"};
        char *text[4];
        for (size_t k = 0; k < 4; k++) {
            char path[600];
            snprintf(path, sizeof path, paths[k], (int)(n - 2), e->d_name);
            text[k] = slurp_file(path);
            cr_assert_not_null(text[k], "%s is missing", path);
        }
        char *prose = chapter_prose(text[0]), *given = chapter_prose(text[3]);
        size_t size = strlen(text[1]) + strlen(text[2]) + strlen(given) + 3;
        char *printed = malloc(size);
        cr_assert_not_null(printed);
        snprintf(printed, size, "%s\n%s\n%s", text[1], text[2], given);
        char missing[4096];
        stale_numbers(prose, printed, 3, missing, sizeof missing);
        cr_expect_str_empty(missing, "teacher/%s quotes numbers no program "
                            "prints: %s", e->d_name, missing);
        for (size_t k = 0; k < 4; k++)
            free(text[k]);
        free(prose);
        free(given);
        free(printed);
        keys++;
    }
    closedir(d);
    cr_assert_gt(keys, 0);
}

/* --- a picture says what the output beside it says ------------------- */

/* Page 21 draws the block tables (docs/pictures/21_block_tables.dot,
 * which make test holds to what the chapter draws) beside the tables its
 * output prints last before the picture: the same positions, the same
 * blocks in each table, the same blocks shared. */
Test(docs, page_21_draws_the_tables_it_prints)
{
    char *out = slurp_file("tests/expected/21_paged_kv_cache.txt");
    char *dot = slurp_file("docs/pictures/21_block_tables.dot");
    cr_assert_not_null(out);
    cr_assert_not_null(dot, "no docs/pictures/21_block_tables.dot: run make docs");
    char *graph = strstr(out, "[graph: plots/21_block_tables");
    cr_assert_not_null(graph);
    *graph = '\0';
    /* the last group of tables printed before the picture */
    char *last = NULL;
    for (char *at = out; (at = strstr(at, "\nsequence 0:")); at++)
        last = at;
    cr_assert_not_null(last);
    int seqs = 0, shared = 0;
    for (char *line = strtok(last + 1, "\n"); line; line = strtok(NULL, "\n")) {
        unsigned s, n, b, k;
        int used;
        if (sscanf(line, "sequence %u: %u positions, block table [%n", &s, &n, &used) == 2) {
            char want[128];
            snprintf(want, sizeof want, "label=\"sequence %u\\n%u positions", s, n);
            cr_expect_not_null(strstr(dot, want), "the picture does not show \"%s\"", want);
            char *entry = line + used;
            for (unsigned j = 0; sscanf(entry, "%u", &b) == 1; j++) {
                snprintf(want, sizeof want, "seq%u:e%u -> block%u;", s, j, b);
                cr_expect_not_null(strstr(dot, want), "the picture has no \"%s\"", want);
                entry += strcspn(entry, ",]");
                if (*entry == ',')
                    entry += 2;
            }
            seqs++;
        } else if (sscanf(line, "block %u is held by %u tables", &b, &k) == 2) {
            char want[64];
            snprintf(want, sizeof want, "label=\"block %u\\n", b);
            char *node = strstr(dot, want);
            cr_assert_not_null(node, "the picture has no block %u", b);
            const char *mark = strstr(node, "shared\"");
            cr_expect(mark && mark < strchr(node, ']'),
                      "block %u is shared, and the picture does not say so", b);
            shared++;
        }
    }
    cr_expect_eq(seqs, 4, "%d tables printed before the picture", seqs);
    /* every block the picture shades is one the output says is shared */
    int shaded = 0;
    for (char *at = dot; (at = strstr(at, "fillcolor")); at++)
        shaded++;
    cr_expect_eq(shaded, shared, "the picture shades %d blocks, the output "
                 "names %d shared", shaded, shared);
    free(out);
    free(dot);
}

/* Page 08 shows a `build/mha trace` command and says that it prints the
 * lines of its output from "queries ..." to "output ...": run the command
 * as the page writes it and compare, line for line. */
Test(docs, page_08_shows_what_mha_trace_prints)
{
    char *src = slurp_file("chapters/08_multihead_module.c");
    char *out = slurp_file("tests/expected/08_multihead_module.txt");
    cr_assert_not_null(src);
    cr_assert_not_null(out);
    char *cmd = strstr(src, "build/mha trace ");
    cr_assert_not_null(cmd, "page 08 shows no build/mha trace command");
    cmd += strlen("build/mha trace ");
    char args[256];
    snprintf(args, sizeof args, "%.*s", (int)strcspn(cmd, "\n"), cmd);
    cr_assert_eq(strspn(args, "abcdefghijklmnopqrstuvwxyz0123456789-, "),
                 strlen(args), "unexpected characters in \"%s\"", args);
    char line[512];
    snprintf(line, sizeof line, "%s trace %s", MHA_BIN, args);
    int status;
    char *printed = command_output(line, &status);
    cr_assert_eq(status, 0, "`%s` failed", line);
    char *from = strstr(out, "\nqueries (");
    cr_assert_not_null(from, "chapter 08 prints no \"queries (\" line");
    from++;
    char *to = strstr(from, "\noutput (");
    cr_assert_not_null(to);
    to = strchr(to + 1, '\n');
    cr_assert_not_null(to);
    to[1] = '\0';
    cr_expect_str_eq(printed, from, "`%s` does not print what page 08 says:\n%s",
                     line, printed);
    free(printed);
    free(src);
    free(out);
}

/* A function that clears its output and then only forwards to another
 * ("*heads = NULL; return attend(...);") is refused like one that only
 * forwards: the page must show the function that does the work (page 12
 * shows attend, not multihead_attend). */
Test(docs, clearing_an_output_then_forwarding_is_refused)
{
    char *err = weave_showing("12_memory_efficient_attention",
                              "src/nn/multihead.c multihead_attend");
    cr_assert_str_eq(err, "weave: chapters/12_memory_efficient_attention.c: @show "
                          "src/nn/multihead.c multihead_attend: its body only "
                          "forwards to another function; show the function that "
                          "does the work\n");
    free(err);
}

/* Page 19 says its sink's `out` column is 1 minus its `sink` column
 * (every value is 1): so it is, row by row, in the printed output. */
Test(docs, page_19_out_is_one_minus_the_sink)
{
    char *out = slurp_file("tests/expected/19_windows_alibi_sinks.txt");
    cr_assert_not_null(out);
    int rows = 0;
    for (char *at = out; (at = strstr(at, "   sink ")); at++) {
        double sink, o;
        cr_assert_eq(sscanf(at, "   sink %lf   out %lf", &sink, &o), 2);
        cr_expect_float_eq(o, 1 - sink, 1.5e-4, "out %.4f, sink %.4f", o, sink);
        rows++;
    }
    cr_expect_eq(rows, 6, "%d rows with a sink", rows);
    free(out);
}
//<
