/* weave: write the book in docs/ from the chapters, their transcripts and
 * the library sources.  Nothing in docs/ is written by hand.
 *
 *     weave ROOT OUT [MHA]  read ROOT/chapters, ROOT/tests/expected,
 *                           ROOT/src, ROOT/tools/book-index.md and the
 *                           pages it copies (ROOT/tools/references.md,
 *                           ROOT/tools/glossary.md ... below; with the
 *                           key ROOT/tools/teachers-guide.md), running
 *                           the mha program MHA for its --help texts;
 *                           write OUT/
 *
 * A chapter page is assembled from:
 *   - the chapter's title, from its first line "/" "* Chapter NN: Title.";
 *   - its prose: comment blocks that open with "/" "*md" in
 *     chapters/NN_topic.c; a block before the first section() call is the
 *     introduction, a block after section("N. Title") belongs to that
 *     section, and a block whose first line is "## Exercises" closes the
 *     page;
 *   - library code, pulled in by a prose line "@show src/FILE NAME": the
 *     definition of function NAME (or of typedef struct NAME), with the
 *     comment right above it, as src/FILE has it as of the page's chapter
 *     (tools/marks.h: the lines later chapters add are left out).  When
 *     the page's chapter adds lines to a function an earlier chapter
 *     wrote, or replaces some, they are marked as a diff marks them: "+"
 *     added, "-" gone (shown right above what replaces them).  A function
 *     whose body only forwards to another (one return of one call, once
 *     its outputs are cleared) is refused: the page must show the code
 *     that does the work;
 *   - the program's output, section by section, from the transcript
 *     tests/expected/NN_topic.txt that tests/test_chapters.c holds the
 *     program to: every "## Title" line of the output starts a section,
 *     and it must match a section() call of the source;
 *   - the pictures the output announces: heatmaps ("[heatmap: plots/X.png
 *     ...]"), charts ("[plot: plots/X.png ...]") and graphs ("[graph:
 *     plots/X.png ...]", drawn by Graphviz), in their order, shown
 *     from OUT/pictures/X.png, the copies tools/docs-pictures.sh keeps
 *     (plots/ is the chapters' own, untracked); and a link to each page of
 *     the explorer the output announces ("[explorer: plots/X.html]"),
 *     OUT/pictures/X.html.
 * Anything that does not fit (an @show that finds nothing, an output
 * section with no section() call) is an error: the book cannot drift
 * silently.
 *
 * The contents page, docs/README.md, is tools/book-index.md with the
 * table of chapters at its "@chapters" line, one table per part when
 * "@part NN Title" lines follow it (the part starts at chapter NN).
 *
 * The reference pages beside the chapters are copied from tools/: the
 * references and the glossary always, the others (the library's map,
 * reading a trace, the mha program, checking against PyTorch,
 * performance, working on the project) when ROOT/tools has them.  Two
 * kinds of line in them are filled in:
 *   - "@bench | L | dgemm": the table of ROOT/plots/bench.md (what the
 *     last `make bench` wrote) whose first line starts so, with the line
 *     that says where it was measured when "@bench measured" asks;
 *   - "@help" or "@help forward": what `mha --help` or `mha forward
 *     --help` prints, run from the program MHA named on the command
 *     line; a page with such a line is left out when none is named.
 *
 * The teacher's key, when ROOT/teacher exists (a student's handout has
 * none): OUT/teacher/NN_topic.md for every chapter, from the key program
 * ROOT/teacher/NN_topic.c and its checked output
 * ROOT/teacher/expected/NN_topic.txt, read as a chapter is read.  Its
 * sections are "Exercise 1", "Exercise 2" ..., one for each item of the
 * chapter's "## Exercises" block, in order and none missing: each shows
 * the exercise's text, taken from the chapter, then the answer's prose
 * and what the key program prints for it.  OUT/teacher/README.md lists
 * them, from ROOT/teacher/index.md.  The lines of tools/book-index.md
 * that open with "@key " point at it: they are kept (without the mark)
 * only when the key is woven.
 *
 * The book is written whole or not at all: every page is woven in memory
 * first, then written under a temporary name beside it (".NAME.tmp.PID")
 * and renamed into place once all are written.  An error, a full disk or
 * SIGINT, SIGTERM, SIGHUP on the way leaves OUT as it was, with no
 * temporary.  Exit status 0, or 1 after one line on stderr.
 */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "marks.h"

#define MAX_SECTIONS 32
#define MAX_CHAPTERS 64
/* the chapters, their keys, the contents, the key's index and the pages
 * copied from tools/ (at most 8) */
#define MAX_PAGES (2 * MAX_CHAPTERS + 10)

static const char *root = ".";

/* the mha program whose --help texts the reference shows, or NULL */
static const char *mha_program;

/* The temporaries written so far, removed by die() or by a signal: fixed
 * arrays, so that the handler needs nothing but unlink. */
static char temporaries[MAX_PAGES][600];
static volatile sig_atomic_t ntemporaries;

/* OUT/teacher when this run made it, removed with the temporaries */
static char made_dir[600];

static void remove_temporaries(void)
{
    for (sig_atomic_t i = 0; i < ntemporaries; i++)
        unlink(temporaries[i]);
    if (made_dir[0])
        rmdir(made_dir);
}

static void die(const char *fmt, ...)
{
    remove_temporaries();
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "weave: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

/* --- growing strings ------------------------------------------------ */

typedef struct {
    char *s;
    size_t len, cap;
} buf;

static void put(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        b->cap = (b->len + n + 1) * 2;
        b->s = realloc(b->s, b->cap);
        if (!b->s)
            die("out of memory");
    }
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = '\0';
}

static void puts_(buf *b, const char *s) { put(b, s, strlen(s)); }

static void printf_(buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *tmp = malloc((size_t)n + 1);
    if (n < 0 || !tmp)
        die("out of memory");
    va_start(ap, fmt);
    vsnprintf(tmp, (size_t)n + 1, fmt, ap);
    va_end(ap);
    put(b, tmp, (size_t)n);
    free(tmp);
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        die("cannot read %s: %s", path, strerror(errno));
    buf b = {0};
    char chunk[8192];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        put(&b, chunk, n);
    fclose(f);
    if (!b.s)
        put(&b, "", 0);
    return b.s;
}

/* The next line of *p (without its '\n'), advancing *p; NULL at the end.
 * The returned string is a fresh copy. */
static char *next_line(const char **p)
{
    if (!**p)
        return NULL;
    const char *end = strchr(*p, '\n');
    size_t n = end ? (size_t)(end - *p) : strlen(*p);
    char *line = strndup(*p, n);
    if (!line)
        die("out of memory");
    *p += n + (end ? 1 : 0);
    return line;
}

/* Drop blank lines at both ends of b. */
static void trim_blank_lines(buf *b)
{
    if (!b->s)
        return;
    char *start = b->s;
    while (*start == '\n')
        start++;
    size_t n = strlen(start);
    while (n > 0 && (start[n - 1] == '\n' || start[n - 1] == ' '))
        n--;
    memmove(b->s, start, n);
    b->s[n] = '\0';
    b->len = n;
}

/* --- the chapter source --------------------------------------------- */

typedef struct {
    char title[160]; /* "1. d2l's example" */
    buf prose;       /* markdown from the md comment blocks */
} section;

typedef struct {
    const char *src; /* where it is read from: "chapters" or "teacher" */
    const char *out; /* where its output is: "tests/expected" or
                        "teacher/expected" */
    char name[128];  /* "06_splitting_heads" */
    char number[8];  /* "06" */
    char title[160]; /* "splitting heads, transpose_qkv and ..." */
    buf intro, exercises;
    buf shows;       /* its "@show FILE NAME" lines, "FILE NAME\n" each */
    section sections[MAX_SECTIONS];
    int nsections;
} chapter;

/* A line of an md comment block without the comment's leading " * ". */
static const char *prose_text(const char *line)
{
    while (*line == ' ' || *line == '\t')
        line++;
    if (line[0] == '*' && line[1] != '/') {
        line++;
        if (*line == ' ')
            line++;
    }
    return line;
}

static void show_code(buf *out, const char *directive, const char *where,
                      int chapter, const char *page_src);
static void rest_of_code(buf *out, const chapter *c);

static void parse_chapter(chapter *c, const char *src)
{
    const char *p = src;
    char *line = next_line(&p);
    const char *tag = line ? strstr(line, "Chapter ") : NULL;
    const char *colon = tag ? strchr(tag, ':') : NULL;
    if (!colon)
        die("%s/%s.c: the first line must read \"/* Chapter NN: Title.\"",
            c->src, c->name);
    snprintf(c->title, sizeof c->title, "%s", colon + 2);
    size_t tl = strlen(c->title);
    if (tl && c->title[tl - 1] == '.')
        c->title[tl - 1] = '\0';
    c->title[0] = (char)(c->title[0] >= 'a' && c->title[0] <= 'z'
                             ? c->title[0] - 'a' + 'A' : c->title[0]);
    free(line);

    section *current = NULL;
    while ((line = next_line(&p))) {
        const char *call = strstr(line, "section(\"");
        if (call && !strstr(line, "static")) {
            if (c->nsections == MAX_SECTIONS)
                die("%s/%s.c: more than %d sections", c->src, c->name,
                    MAX_SECTIONS);
            current = &c->sections[c->nsections++];
            /* the C string literal, with its \" and \\ escapes undone */
            const char *t = call + strlen("section(\"");
            size_t k = 0;
            for (; *t && *t != '"' && k + 1 < sizeof current->title; t++)
                current->title[k++] = *t == '\\' && t[1] ? *++t : *t;
            current->title[k] = '\0';
            if (*t != '"')
                die("%s/%s.c: section title not on one line", c->src, c->name);
        }
        const char *trimmed = line;
        while (*trimmed == ' ')
            trimmed++;
        if (strcmp(trimmed, "/*md") == 0) {
            buf block = {0};
            char *l;
            int closed = 0;
            while ((l = next_line(&p))) {
                const char *t = l;
                while (*t == ' ')
                    t++;
                if (strncmp(t, "*/", 2) == 0) {
                    free(l);
                    closed = 1;
                    break;
                }
                const char *text = prose_text(l);
                if (strncmp(text, "@show ", 6) == 0) {
                    char where[256];
                    snprintf(where, sizeof where, "%s/%.127s.c", c->src, c->name);
                    show_code(&block, text + 6, where, atoi(c->number), src);
                    puts_(&c->shows, text + 6);
                    puts_(&c->shows, "\n");
                } else {
                    puts_(&block, text);
                    puts_(&block, "\n");
                }
                free(l);
            }
            if (!closed)
                die("%s/%s.c: an md comment block is not closed", c->src,
                    c->name);
            trim_blank_lines(&block);
            buf *into = strncmp(block.s ? block.s : "", "## Exercises", 12) == 0
                            ? &c->exercises
                        : current ? &current->prose : &c->intro;
            if (into->len)
                puts_(into, "\n\n");
            puts_(into, block.s ? block.s : "");
            free(block.s);
        }
        free(line);
    }
}

/* --- @show: library code by name ------------------------------------ */

/* Is line the first line of NAME's definition: a declaration at column 0
 * naming NAME( that is not a prototype, or "typedef struct NAME ..."? */
static int starts_definition(const char *line, const char *name)
{
    if (line[0] == ' ' || line[0] == '\t' || line[0] == '/' || line[0] == '*' ||
        line[0] == '#' || line[0] == '\0')
        return 0;
    char pat[160];
    snprintf(pat, sizeof pat, "typedef struct %s ", name);
    if (strncmp(line, pat, strlen(pat)) == 0)
        return 1;
    snprintf(pat, sizeof pat, "%s(", name);
    const char *at = strstr(line, pat);
    if (!at || (at > line && (at[-1] == '_' || (at[-1] >= 'a' && at[-1] <= 'z') ||
                              (at[-1] >= 'A' && at[-1] <= 'Z') ||
                              (at[-1] >= '0' && at[-1] <= '9'))))
        return 0;
    size_t n = strlen(line);
    return line[n - 1] != ';';
}

/* A statement that only clears an output before the work, "*heads =
 * NULL;": it does not count as work of the function's own. */
static int clears_an_output(const char *t)
{
    if (*t++ != '*')
        return 0;
    size_t n = strspn(t, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    return n > 0 && strcmp(t + n, " = NULL;") == 0;
}

/* Does the body of the definition in lines[first .. last] (its braces
 * included) only forward to another function: one statement, a return
 * of a call, besides clearing its outputs? */

static int only_forwards(char **lines, size_t start, size_t last)
{
    buf body = {0};
    size_t i = start;
    while (i <= last && !strchr(lines[i], '{'))
        i++;
    for (i++; i < last; i++) {
        const char *t = lines[i];
        while (*t == ' ' || *t == '\t')
            t++;
        if (!*t || !strncmp(t, "//", 2) || clears_an_output(t))
            continue;
        puts_(&body, t);
        puts_(&body, " ");
    }
    const char *b = body.s ? body.s : "";
    const char *semi = strchr(b, ';');
    int forwards = !strncmp(b, "return ", 7) && strchr(b, '(') && semi &&
                   !strchr(semi + 1, ';') && !strstr(b, "/*");
    free(body.s);
    return forwards;
}

/* The number of the item in page_src's "## Exercises" block that says
 * "EXERCISE=NAME" (the coding exercise that asks for NAME), or 0. */
static int exercise_number(const char *page_src, const char *name)
{
    const char *block = strstr(page_src, "## Exercises");
    if (!block)
        return 0;
    char want[160];
    snprintf(want, sizeof want, "EXERCISE=%s", name);
    size_t wl = strlen(want);
    const char *p = block;
    char *l;
    int item = 0, found = 0;
    while (!found && (l = next_line(&p))) {
        const char *t = prose_text(l);
        size_t digits = strspn(t, "0123456789");
        if (digits && t[digits] == '.' && t[digits + 1] == ' ')
            item = atoi(t);
        for (const char *at = strstr(t, want); at && !found; at = strstr(at + 1, want))
            found = !((at[wl] >= 'a' && at[wl] <= 'z') || at[wl] == '_' ||
                      (at[wl] >= '0' && at[wl] <= '9'));
        free(l);
    }
    return found ? item : 0;
}

/* The lines of ROOT/FILE, without their newlines, in *n. */
static char **file_lines(const char *file, size_t *n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, file);
    char *text = read_file(path);
    const char *p = text;
    char **all = NULL, *l;
    size_t cap = 0;
    *n = 0;
    while ((l = next_line(&p))) {
        if (*n == cap) {
            cap = cap ? cap * 2 : 256;
            all = realloc(all, cap * sizeof *all);
            if (!all)
                die("out of memory");
        }
        all[(*n)++] = l;
    }
    free(text);
    return all;
}

static void show_code(buf *out, const char *directive, const char *where,
                      int chapter, const char *page_src)
{
    char file[256], name[128];
    if (sscanf(directive, "%255s %127s", file, name) != 2)
        die("%s: \"@show %s\" needs a file and a name", where, directive);
    /* the file's lines, then those of the code as of the page's chapter,
     * each with the chapter that added it */
    size_t n_all;
    char **all = file_lines(file, &n_all);
    marks_line *cls = calloc(n_all ? n_all : 1, sizeof *cls);
    marks_line *before = calloc(n_all ? n_all : 1, sizeof *before);
    char **lines = malloc((n_all ? n_all : 1) * sizeof *lines);
    int *added_by = malloc((n_all ? n_all : 1) * sizeof *added_by);
    /* removed[i]: the first of the lines the chapter before had and this
     * one replaces, right above lines[i] (an index into all), and
     * nremoved[i] how many */
    size_t *removed = malloc((n_all ? n_all : 1) * sizeof *removed);
    size_t *nremoved = calloc(n_all ? n_all : 1, sizeof *nremoved);
    char err[256];
    if (!cls || !before || !lines || !added_by || !removed || !nremoved)
        die("out of memory");
    if (marks_classify(all, n_all, chapter, cls, err, sizeof err) != 0 ||
        (chapter > 1 &&
         marks_classify(all, n_all, chapter - 1, before, err, sizeof err) != 0))
        die("%s: %s", file, err);
    size_t n = 0, run = 0, run_start = 0;
    for (size_t i = 0; i < n_all; i++) {
        if (chapter > 1 && before[i].keep && !cls[i].keep) {
            if (run++ == 0)
                run_start = i;
        } else if (cls[i].keep) {
            added_by[n] = cls[i].chapter;
            removed[n] = run_start;
            nremoved[n] = run;
            run = 0;
            lines[n++] = all[i];
        }
    }

    /* the definition's first line: a declaration naming NAME( whose
     * parameter list does not end in ");" (a prototype over several
     * lines), or the typedef */
    size_t start = n;
    for (size_t i = 0; i < n && start == n; i++)
        if (starts_definition(lines[i], name)) {
            size_t j = i;
            while (j < n && !strchr(lines[j], ')'))
                j++;
            if (j < n && strstr(lines[j], ");") == NULL)
                start = i;
            else if (strncmp(lines[i], "typedef", 7) == 0)
                start = i;
        }
    if (start == n)
        die("%s: @show %s %s: no definition of %s in %s as of chapter %02d",
            where, file, name, name, file, chapter);
    size_t first = start;
    if (first > 0 && strstr(lines[first - 1], "*/")) {
        while (first > 0 && !strstr(lines[first - 1], "/*"))
            first--;
        if (first > 0)
            first--;
    }
    size_t last = start;
    while (last < n && lines[last][0] != '}')
        last++;
    if (last == n)
        die("%s: @show %s %s: the definition does not end", where, file, name);
    if (strncmp(lines[start], "typedef", 7) && only_forwards(lines, start, last))
        die("%s: @show %s %s: its body only forwards to another function; "
            "show the function that does the work", where, file, name);

    /* A function marked "@exercise NAME" in its comment is the answer to
     * an exercise: folded, so that a reader meets the exercise first.  A
     * handout's blank (its body calls mha_fail_exercise) is shown open. */
    char mark[160];
    snprintf(mark, sizeof mark, "@exercise %s ", name);
    int solution = 0, blank = 0;
    for (size_t i = first; i < start; i++)
        solution |= strstr(lines[i], mark) != NULL;
    for (size_t i = start; i <= last; i++)
        blank |= strstr(lines[i], "mha_fail_exercise(") != NULL;
    solution &= !blank;
    if (solution) {
        int k = exercise_number(page_src, name);
        if (k)
            printf_(out, "Exercise %d below asks you to write `%s`; its "
                         "body is folded here:\n\n", k, name);
        else
            printf_(out, "An exercise asks you to write `%s`; its body is "
                         "folded here:\n\n", name);
        printf_(out, "<details><summary>Solution: %s</summary>\n\n", name);
    }

    /* lines this chapter adds to, or takes from, a definition an earlier
     * chapter wrote */
    int adds = 0, takes = 0;
    if (added_by[start] < chapter)
        for (size_t i = first; i <= last; i++) {
            adds |= added_by[i] == chapter;
            takes |= i > start && nremoved[i] > 0;
        }
    if (adds || takes)
        printf_(out, "From [`%s`](../%s), as of this chapter: %s.\n\n```diff\n",
                file, file,
                !takes ? "the lines marked `+` are new here"
                : !adds ? "the lines marked `-` are gone here"
                        : "the lines marked `+` are new here, those marked "
                          "`-` gone");
    else
        printf_(out, "From [`%s`](../%s):\n\n```c\n", file, file);
    for (size_t i = first; i <= last; i++) {
        for (size_t r = 0; (adds || takes) && i > start && r < nremoved[i]; r++) {
            puts_(out, "-");
            puts_(out, all[removed[i] + r]);
            puts_(out, "\n");
        }
        if (adds || takes)
            puts_(out, added_by[i] == chapter ? "+" : " ");
        puts_(out, lines[i]);
        puts_(out, "\n");
    }
    puts_(out, "```\n");
    if (solution)
        puts_(out, "\n</details>\n");
    for (size_t i = 0; i < n_all; i++)
        free(all[i]);
    free(all);
    free(lines);
    free(added_by);
    free(removed);
    free(nremoved);
    free(before);
    free(cls);
}

/* --- the rest of a chapter's code ----------------------------------- */

/* The lines of ROOT/FILE as of chapter ch, in *n (none when ch is 0 or
 * the file is not there yet). */
static char **code_as_of(const char *file, int ch, size_t *n)
{
    *n = 0;
    if (ch < 1)
        return NULL;
    size_t n_all;
    char **all = file_lines(file, &n_all);
    marks_line *cls = calloc(n_all ? n_all : 1, sizeof *cls);
    char err[256];
    if (!cls)
        die("out of memory");
    if (marks_classify(all, n_all, ch, cls, err, sizeof err) != 0)
        die("%s: %s", file, err);
    size_t k = 0;
    for (size_t i = 0; i < n_all; i++) {
        if (cls[i].keep)
            all[k++] = all[i];
        else
            free(all[i]);
    }
    free(cls);
    *n = k;
    return all;
}

static void free_lines(char **lines, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

/* If lines[i] opens a function's definition (at column 0, not a
 * prototype), its name into name (size 128), and 1. */
static int defines(char **lines, size_t n, size_t i, char *name)
{
    const char *l = lines[i], *paren = strchr(l, '(');
    if (!paren || !((l[0] >= 'a' && l[0] <= 'z') || l[0] == '_') ||
        strncmp(l, "typedef", 7) == 0)
        return 0;
    const char *end = paren;
    while (end > l && (end[-1] == '_' || (end[-1] >= 'a' && end[-1] <= 'z') ||
                       (end[-1] >= 'A' && end[-1] <= 'Z') ||
                       (end[-1] >= '0' && end[-1] <= '9')))
        end--;
    size_t len = (size_t)(paren - end);
    if (len == 0 || len >= 128 || (strchr(l, '=') && strchr(l, '=') < paren))
        return 0;
    memcpy(name, end, len);
    name[len] = '\0';
    if (!starts_definition(l, name))
        return 0;
    /* the line where the parameter list closes */
    int depth = 0;
    size_t j = i;
    for (const char *t = paren; j < n; t = lines[++j]) {
        for (; *t && !(depth == 1 && *t == ')'); t++)
            depth += (*t == '(') - (*t == ')');
        if (*t)
            return strchr(t, ';') == NULL &&
                   (strchr(t, '{') || (j + 1 < n && lines[j + 1][0] == '{'));
        if (j + 1 == n)
            break;
    }
    return 0;
}

/* NAME's definition in lines, from the comment right above it to its
 * closing brace, as one text (NULL: none); *forwards says whether its
 * body only forwards to another function. */
static char *definition_text(char **lines, size_t n, const char *name,
                             int *forwards)
{
    char found[128];
    for (size_t i = 0; i < n; i++) {
        if (!defines(lines, n, i, found) || strcmp(found, name) != 0)
            continue;
        size_t first = i, last = i;
        if (first > 0 && strstr(lines[first - 1], "*/")) {
            while (first > 0 && !strstr(lines[first - 1], "/*"))
                first--;
            if (first > 0)
                first--;
        }
        while (last < n && lines[last][0] != '}')
            last++;
        if (last == n)
            return NULL;
        if (forwards)
            *forwards = only_forwards(lines, i, last);
        buf t = {0};
        for (size_t k = first; k <= last; k++) {
            puts_(&t, lines[k]);
            puts_(&t, "\n");
        }
        return t.s;
    }
    return NULL;
}

static int by_string(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every function the chapter adds to src/tensor and src/nn, or changes,
 * is on its page: the sections show the lesson's (their "@show" lines),
 * and this part the others, each whole and folded, or, when its body
 * only forwards to another function, named in one line. */
static void rest_of_code(buf *out, const chapter *c)
{
    if (strcmp(c->src, "chapters") != 0)
        return;
    int ch = atoi(c->number), shown = 0;
    buf named = {0};
    static const char *const dirs[] = {"src/tensor", "src/nn"};
    for (size_t k = 0; k < sizeof dirs / sizeof dirs[0]; k++) {
        char dir[512];
        snprintf(dir, sizeof dir, "%s/%s", root, dirs[k]);
        DIR *d = opendir(dir);
        if (!d)
            continue;
        char *files[256];
        size_t nfiles = 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            size_t len = strlen(e->d_name);
            if (len > 2 && strcmp(e->d_name + len - 2, ".c") == 0 && nfiles < 256)
                files[nfiles++] = strdup(e->d_name);
        }
        closedir(d);
        qsort(files, nfiles, sizeof files[0], by_string);
        for (size_t f = 0; f < nfiles; f++) {
            char file[300];
            snprintf(file, sizeof file, "%s/%s", dirs[k], files[f]);
            size_t n_now, n_before;
            char **now = code_as_of(file, ch, &n_now);
            char **before = code_as_of(file, ch - 1, &n_before);
            char seen[64][128];
            size_t nseen = 0;
            for (size_t i = 0; i < n_now; i++) {
                char name[128];
                if (!defines(now, n_now, i, name))
                    continue;
                int again = 0;
                for (size_t s = 0; s < nseen && !again; s++)
                    again = strcmp(seen[s], name) == 0;
                if (again)
                    continue;
                if (nseen < 64)
                    strcpy(seen[nseen++], name);
                int forwards = 0;
                char *text_now = definition_text(now, n_now, name, &forwards);
                char *text_before = definition_text(before, n_before, name, NULL);
                char directive[440];
                snprintf(directive, sizeof directive, "%s %s\n", file, name);
                char line_of[444];
                snprintf(line_of, sizeof line_of, "\n%s", directive);
                int on_page = c->shows.s &&
                              (strncmp(c->shows.s, directive, strlen(directive)) == 0 ||
                               strstr(c->shows.s, line_of) != NULL);
                int same = text_now && text_before && strcmp(text_now, text_before) == 0;
                if (text_now && !same && !on_page) {
                    if (forwards) {
                        /* its one statement, on one line */
                        const char *r = strstr(text_now, "\n{");
                        r = r ? strstr(r, "return ") : NULL;
                        printf_(&named, "- `%s` (%s): `", name, file);
                        for (int space = 0; r && *r && *r != ';'; r++) {
                            int blank = *r == ' ' || *r == '\n';
                            if (!blank || !space)
                                put(&named, blank ? " " : r, 1);
                            space = blank;
                        }
                        puts_(&named, ";`\n");
                    } else {
                        if (!shown++)
                            printf_(out, "\n## The rest of this chapter's code\n\n"
                                         "Every function this chapter adds to "
                                         "`src/tensor` and `src/nn`, or changes, "
                                         "is on this page: the sections above "
                                         "show the lesson's, and here are the "
                                         "others, each whole as the library has "
                                         "it as of this chapter (a change to an "
                                         "earlier chapter's function marked as a "
                                         "diff). Open one to read it.\n");
                        printf_(out, "\n<details><summary><code>%s</code> "
                                     "(%s)%s</summary>\n\n",
                                name, file, text_before ? ", changed" : "");
                        char where[200];
                        snprintf(where, sizeof where, "the rest of chapter %s's code",
                                 c->number);
                        directive[strlen(directive) - 1] = '\0';
                        show_code(out, directive, where, ch, "");
                        puts_(out, "\n</details>\n");
                    }
                }
                free(text_now);
                free(text_before);
            }
            free_lines(now, n_now);
            free_lines(before, n_before);
            free(files[f]);
        }
    }
    if (named.len) {
        if (!shown)
            printf_(out, "\n## The rest of this chapter's code\n");
        printf_(out, "\nThese are one `return` each, shown here on one line "
                     "(a line before it that only sets an output to NULL is "
                     "left out):\n\n%s",
                named.s);
    }
    free(named.s);
}

/* --- the transcript ------------------------------------------------- */

/* Split the output into its "## Title" sections, matched to c's. */
static void weave_output(const chapter *c, const char *out, buf page[])
{
    const char *p = out;
    char *line;
    int k = -1;
    while ((line = next_line(&p))) {
        if (strncmp(line, "## ", 3) == 0) {
            k = -1;
            for (int s = 0; s < c->nsections && k < 0; s++)
                if (strcmp(c->sections[s].title, line + 3) == 0)
                    k = s;
            if (k < 0)
                die("%s/%s.txt: output section \"%s\" has no "
                    "section() call in %s/%s.c",
                    c->out, c->name, line + 3, c->src, c->name);
        } else if (k >= 0) {
            puts_(&page[k], line);
            puts_(&page[k], "\n");
        } else if (line[0]) {
            die("%s/%s.txt: output before the first section", c->out,
                c->name);
        }
        free(line);
    }
    for (int s = 0; s < c->nsections; s++)
        trim_blank_lines(&page[s]);
}

/* The pictures an output section announces, heatmaps and charts, as
 * markdown images in the order they appear, from the book's pictures/. */
static void pictures(buf *page, const char *output)
{
    static const char *const markers[] = {"[heatmap: plots/", "[plot: plots/",
                                          "[graph: plots/"};
    for (const char *at = output; (at = strchr(at, '[')); at++)
        for (size_t m = 0; m < sizeof markers / sizeof markers[0]; m++) {
            size_t n = strlen(markers[m]);
            char base[128];
            if (strncmp(at, markers[m], n) == 0 &&
                sscanf(at + n, "%127[^.].png", base) == 1)
                printf_(page, "\n![%s](pictures/%s.png)\n", base, base);
        }
    // a page of mha's explorer (src/plot/explorer.h): a link, since it is a
    // page to open, not a picture to show
    static const char explorer[] = "[explorer: plots/";
    for (const char *at = output; (at = strstr(at, explorer)); at++) {
        char base[128];
        if (sscanf(at + strlen(explorer), "%127[^.].html", base) == 1)
            printf_(page, "\n[**Explore these weights: pictures/%s.html**]"
                          "(pictures/%s.html), one page that opens in a "
                          "browser with no network: the head view, the grid "
                          "of heads, the dataflow of the trace and, for "
                          "causal attention, the decoding steps (GitHub "
                          "shows its source; open it from a clone)\n",
                    base, base);
    }
}

/* --- pages ---------------------------------------------------------- */

static void nav(buf *b, const chapter *all, int i, int n)
{
    if (i > 0)
        printf_(b, "[← %s. %s](%s.md) · ", all[i - 1].number, all[i - 1].title,
                all[i - 1].name);
    puts_(b, "[contents](README.md)");
    if (i + 1 < n)
        printf_(b, " · [%s. %s →](%s.md)", all[i + 1].number, all[i + 1].title,
                all[i + 1].name);
    puts_(b, "\n");
}

/* The pages, woven before any is written. */
static struct {
    char name[160];
    buf text;
} pages[MAX_PAGES];
static int npages;

/* The reference pages written (write_copy), with their titles, for the
 * contents' "@reference" line. */
static struct {
    char name[64], title[160];
} references[8];
static int nreferences;

static void keep_page(const char *name, buf *b)
{
    if (npages == MAX_PAGES)
        die("more than %d pages", MAX_PAGES);
    snprintf(pages[npages].name, sizeof pages[npages].name, "%s", name);
    pages[npages++].text = *b;
}

/* On SIGINT, SIGTERM or SIGHUP while the pages are written: no
 * temporary left, and the signal's own end. */
static void on_signal(int sig)
{
    remove_temporaries();
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Every page under its temporary name, then every one into place. */
static void write_pages(const char *dir)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    sigset_t caught, outer;
    sigemptyset(&caught);
    for (size_t k = 0; k < sizeof sigs / sizeof sigs[0]; k++) {
        struct sigaction sa = {0}, was;
        sa.sa_handler = on_signal;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sigs[k], NULL, &was) == 0 && was.sa_handler != SIG_IGN)
            sigaction(sigs[k], &sa, NULL);
        sigaddset(&caught, sigs[k]);
    }
    for (int i = 0; i < npages; i++) {
        /* a page in a folder, "teacher/06_x.md", has its temporary
         * beside it: "teacher/.06_x.md.tmp.PID" */
        char *tmp = temporaries[i];
        const char *slash = strrchr(pages[i].name, '/');
        int folder = slash ? (int)(slash + 1 - pages[i].name) : 0;
        int len = snprintf(tmp, sizeof temporaries[i], "%s/%.*s.%s.tmp.%ld",
                           dir, folder, pages[i].name, pages[i].name + folder,
                           (long)getpid());
        if (len < 0 || (size_t)len >= sizeof temporaries[i])
            die("%s: the path is too long", dir);
        /* made and listed with the signals held off */
        sigprocmask(SIG_BLOCK, &caught, &outer);
        FILE *f = fopen(tmp, "wbx");
        int e = errno;
        if (f)
            ntemporaries = i + 1;
        sigprocmask(SIG_SETMASK, &outer, NULL);
        if (!f)
            die("cannot write %s/%s: %s", dir, pages[i].name, strerror(e));
        const buf *b = &pages[i].text;
        e = 0;
        if (fwrite(b->s, 1, b->len, f) != b->len || fflush(f) != 0)
            e = errno;
        if (fclose(f) != 0 && !e)
            e = errno;
        if (e)
            die("cannot write %s/%s: %s", dir, pages[i].name, strerror(e));
    }
    for (int i = 0; i < npages; i++) {
        char path[sizeof temporaries[i]]; /* shorter than the temporary */
        if (snprintf(path, sizeof path, "%s/%s", dir, pages[i].name) >=
                (int)sizeof path ||
            rename(temporaries[i], path) != 0)
            die("cannot rename %s to %s: %s (%d of %d pages were in place)",
                temporaries[i], path, strerror(errno), i, npages);
    }
    ntemporaries = 0;
    made_dir[0] = '\0';
}

static void write_chapter(const chapter *all, int i, int n)
{
    const chapter *c = &all[i];
    char path[512];
    snprintf(path, sizeof path, "%.300s/tests/expected/%.127s.txt", root, c->name);
    char *out = read_file(path);
    buf outputs[MAX_SECTIONS] = {{0}};
    weave_output(c, out, outputs);

    buf b = {0};
    printf_(&b, "<!-- Written by `make docs` from chapters/%s.c, its output "
                "tests/expected/%s.txt and src/. Edit those, not this. -->\n\n",
            c->name, c->name);
    printf_(&b, "# %s. %s\n\n", c->number, c->title);
    nav(&b, all, i, n);
    if (c->intro.len)
        printf_(&b, "\n%s\n", c->intro.s);
    printf_(&b, "\nThe program: [`chapters/%s.c`](../chapters/%s.c). Run it "
                "with `make ch%s`.\n",
            c->name, c->name, c->number);
    for (int s = 0; s < c->nsections; s++) {
        printf_(&b, "\n## %s\n", c->sections[s].title);
        if (c->sections[s].prose.len)
            printf_(&b, "\n%s\n", c->sections[s].prose.s);
        if (outputs[s].len) {
            printf_(&b, "\n```text\n%s\n```\n", outputs[s].s);
            pictures(&b, outputs[s].s);
        }
        free(outputs[s].s);
    }
    if (c->exercises.len)
        printf_(&b, "\n%s\n", c->exercises.s);
    rest_of_code(&b, c);
    puts_(&b, "\n---\n\n");
    nav(&b, all, i, n);
    char file[160];
    snprintf(file, sizeof file, "%.127s.md", c->name);
    keep_page(file, &b);
    free(out);
}

/* A contents page made from the template ROOT/NAME: the generated-page
 * header and the template up to its "@chapters" line go into b; returns
 * the template, which the caller frees, with *rest at what follows that
 * line. */
static char *index_template(const char *name, buf *b, const char **rest)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", root, name);
    char *tmpl = read_file(path);
    const char *at = strstr(tmpl, "@chapters\n");
    if (!at)
        die("%s has no @chapters line", name);
    printf_(b, "<!-- Written by `make docs` from %s and the chapters. Edit "
               "those, not this. -->\n\n", name);
    put(b, tmpl, (size_t)(at - tmpl));
    *rest = at + strlen("@chapters\n");
    return tmpl;
}

/* text into b, but for its lines that open with "@key ": those only when
 * the book has the teacher's key (with_key), without the "@key ". */
static void put_key_lines(buf *b, const char *text, int with_key)
{
    const char *p = text;
    char *l;
    while ((l = next_line(&p))) {
        int key_line = strncmp(l, "@key ", 5) == 0;
        if (strcmp(l, "@reference") == 0) {
            for (int k = 0; k < nreferences; k++)
                printf_(b, "- [%s](%s)\n", references[k].title,
                        references[k].name);
        } else if (!key_line || with_key) {
            puts_(b, key_line ? l + 5 : l);
            if (p[-1] == '\n')
                puts_(b, "\n");
        }
        free(l);
    }
}

/* The parts of the book: the lines "@part NN Title" right after the
 * template's @chapters line, each the first chapter of a part and its
 * title, in increasing order; *rest moves past them.  Returns how many
 * (0: one table, no parts). */
#define MAX_PARTS 16
static int read_parts(const char **rest, int *first, char titles[][128])
{
    int n = 0;
    while (strncmp(*rest, "@part ", 6) == 0) {
        const char *p = *rest;
        char *line = next_line(&p);
        int ch = 0, used = 0;
        if (sscanf(line + 6, "%2d %n", &ch, &used) < 1 || used == 0 ||
            !line[6 + used] || ch < 1 || (n > 0 && ch <= first[n - 1]) ||
            n == MAX_PARTS)
            die("tools/book-index.md: \"%s\" is not \"@part NN Title\" "
                "with NN above the part before it", line);
        first[n] = ch;
        snprintf(titles[n], 128, "%s", line + 6 + used);
        n++;
        free(line);
        *rest = p;
    }
    return n;
}

/* docs/README.md: tools/book-index.md with the chapter table at @chapters,
 * one table per part when the template names parts (read_parts; a part
 * with no chapter in this book, as in a handout of the first chapters,
 * is left out); its "@key " lines only when with_key (a student's copy
 * has no key). */
static void write_index(const chapter *all, int n, int with_key)
{
    buf b = {0};
    const char *rest;
    char *tmpl = index_template("tools/book-index.md", &b, &rest);
    int first[MAX_PARTS];
    char titles[MAX_PARTS][128];
    int nparts = read_parts(&rest, first, titles);
    if (nparts > 0 && n > 0 && atoi(all[0].number) < first[0])
        die("tools/book-index.md: chapter %s comes before the first part, "
            "which starts at %02d", all[0].number, first[0]);
    int part = -1;
    for (int i = 0; i < n; i++) {
        int now = part;
        while (now + 1 < nparts && atoi(all[i].number) >= first[now + 1])
            now++;
        if (i == 0 || now != part) {
            if (now >= 0)
                printf_(&b, "%s### Part %d: %s\n\n", i ? "\n" : "", now + 1,
                        titles[now]);
            puts_(&b, "| # | chapter |\n|---|---------|\n");
            part = now;
        }
        printf_(&b, "| %s | [%s](%s.md) |\n", all[i].number, all[i].title,
                all[i].name);
    }
    put_key_lines(&b, rest, with_key);
    keep_page("README.md", &b);
    free(tmpl);
}

/* The block of ROOT/plots/bench.md (blank lines between blocks) whose
 * first line starts with prefix, into b. */
static void put_bench(buf *b, const char *name, const char *prefix)
{
    char path[512];
    snprintf(path, sizeof path, "%s/plots/bench.md", root);
    char *text = read_file(path);
    const char *p = text;
    int at_start = 1, found = 0;
    char *l;
    while ((l = next_line(&p))) {
        if (!l[0]) {
            at_start = 1;
            if (found)
                found = 2;
        } else if (at_start) {
            at_start = 0;
            if (!found && strncmp(l, prefix, strlen(prefix)) == 0)
                found = 1;
        }
        if (found == 1) {
            puts_(b, l);
            puts_(b, "\n");
        }
        free(l);
    }
    free(text);
    if (!found)
        die("tools/%s: \"@bench %s\": plots/bench.md has no block that "
            "starts so", name, prefix);
}

/* What `MHA [command] --help` prints, as a block of text, into b. */
static void put_help(buf *b, const char *name, const char *command)
{
    int fd[2];
    if (pipe(fd) != 0)
        die("pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (command[0])
            execl(mha_program, mha_program, command, "--help", (char *)NULL);
        else
            execl(mha_program, mha_program, "--help", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    buf text = {0};
    char chunk[4096];
    ssize_t n;
    while ((n = read(fd[0], chunk, sizeof chunk)) > 0)
        put(&text, chunk, (size_t)n);
    close(fd[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0 || !text.len)
        die("tools/%s: `%s%s%s --help` failed", name, mha_program,
            command[0] ? " " : "", command);
    trim_blank_lines(&text);
    printf_(b, "```text\n$ mha%s%s --help\n%s\n```\n", command[0] ? " " : "",
            command, text.s);
    free(text.s);
}

/* docs/NAME: tools/NAME under the generated-page header, with its @bench
 * and @help lines filled in, so that the pages beside the chapters are
 * checked like the book.  A page that is optional and not in tools/, or
 * that needs mha's help when no program was named, is not written. */
static void write_copy(const char *name, int optional)
{
    char path[512];
    snprintf(path, sizeof path, "%s/tools/%s", root, name);
    struct stat st;
    if (optional && stat(path, &st) != 0)
        return;
    char *text = read_file(path);
    if (strstr(text, "\n@help") && !mha_program) {
        free(text);
        return;
    }
    buf b = {0};
    int bench = strstr(text, "\n@bench") != NULL, help = strstr(text, "\n@help") != NULL;
    printf_(&b, "<!-- Written by `make docs` from tools/%s%s%s. Edit %s, not "
                "this. -->\n\n", name,
            bench ? " and the tables of plots/bench.md (`make bench`)" : "",
            help ? " and the --help texts of build/mha" : "",
            bench || help ? "those" : "that");
    const char *p = text;
    char *l;
    while ((l = next_line(&p))) {
        if (strcmp(l, "@bench measured") == 0)
            put_bench(&b, name, "Measured by");
        else if (strncmp(l, "@bench ", 7) == 0)
            put_bench(&b, name, l + 7);
        else if (strcmp(l, "@help") == 0 || strncmp(l, "@help ", 6) == 0)
            put_help(&b, name, l[5] ? l + 6 : "");
        else {
            puts_(&b, l);
            if (p[-1] == '\n')
                puts_(&b, "\n");
        }
        free(l);
    }
    if (optional) {
        const char *title = strncmp(text, "# ", 2) == 0 ? text + 2 : NULL;
        if (!title || nreferences == (int)(sizeof references / sizeof references[0]))
            die("tools/%s must open with its \"# Title\" line", name);
        snprintf(references[nreferences].name, sizeof references[0].name, "%s", name);
        snprintf(references[nreferences].title, sizeof references[0].title, "%.*s",
                 (int)strcspn(title, "\n"), title);
        nreferences++;
    }
    keep_page(name, &b);
    free(text);
}

/* --- the teacher's key -------------------------------------------- */

/* The items of chapter c's "## Exercises" block, each from its "N. " line
 * up to the next item, into items[0 ..]; returns how many. */
static int exercise_items(const chapter *c, buf *items, int max)
{
    const char *p = c->exercises.s ? c->exercises.s : "";
    char *l;
    int n = 0;
    while ((l = next_line(&p))) {
        size_t digits = strspn(l, "0123456789");
        if (digits && l[digits] == '.' && l[digits + 1] == ' ') {
            if (n == max)
                die("chapters/%s.c: more than %d exercises", c->name, max);
            if (atoi(l) != n + 1)
                die("chapters/%s.c: exercise %d is numbered %d", c->name, n + 1,
                    atoi(l));
            n++;
        }
        if (n > 0) {
            puts_(&items[n - 1], l);
            puts_(&items[n - 1], "\n");
        }
        free(l);
    }
    for (int k = 0; k < n; k++)
        trim_blank_lines(&items[k]);
    return n;
}

static void key_nav(buf *b, const chapter *all, int i, int n)
{
    if (i > 0)
        printf_(b, "[← key to %s](%s.md) · ", all[i - 1].number, all[i - 1].name);
    puts_(b, "[the key's contents](README.md)");
    if (i + 1 < n)
        printf_(b, " · [key to %s →](%s.md)", all[i + 1].number, all[i + 1].name);
    puts_(b, "\n");
}

/* teacher/NN_topic.md: the answers to chapter all[i]'s exercises, from
 * its key keys[i], one section per exercise. */
static void write_key(const chapter *all, const chapter *keys, int i, int n)
{
    const chapter *c = &all[i], *k = &keys[i];
    buf items[MAX_SECTIONS] = {{0}};
    int nitems = exercise_items(c, items, MAX_SECTIONS);
    if (k->nsections != nitems)
        die("teacher/%s.c answers %d exercises; chapters/%s.c has %d",
            k->name, k->nsections, c->name, nitems);
    for (int s = 0; s < nitems; s++) {
        char want[32];
        snprintf(want, sizeof want, "Exercise %d", s + 1);
        if (strcmp(k->sections[s].title, want) != 0)
            die("teacher/%s.c: section %d is \"%s\", not \"%s\"", k->name,
                s + 1, k->sections[s].title, want);
        if (!k->sections[s].prose.len)
            die("teacher/%s.c: exercise %d has no answer", k->name, s + 1);
    }
    char path[512];
    snprintf(path, sizeof path, "%.300s/teacher/expected/%.127s.txt", root,
             k->name);
    char *out = read_file(path);
    buf outputs[MAX_SECTIONS] = {{0}};
    weave_output(k, out, outputs);

    buf b = {0};
    printf_(&b, "<!-- Written by `make docs` from teacher/%s.c, its output "
                "teacher/expected/%s.txt and chapters/%s.c. Edit those, not "
                "this. -->\n\n", k->name, k->name, c->name);
    printf_(&b, "# Key to %s. %s\n\n", c->number, c->title);
    key_nav(&b, all, i, n);
    printf_(&b, "\nThe answers to the exercises of [chapter %s](../%s.md). "
                "The numbers are printed by the key's program "
                "[`teacher/%s.c`](../../teacher/%s.c), whose output `make "
                "test` holds to [`teacher/expected/%s.txt`](../../teacher/"
                "expected/%s.txt).\n",
            c->number, c->name, k->name, k->name, k->name, k->name);
    if (k->intro.len)
        printf_(&b, "\n%s\n", k->intro.s);
    for (int s = 0; s < nitems; s++) {
        printf_(&b, "\n## %s\n\n", k->sections[s].title);
        const char *q = items[s].s;
        char *l;
        while ((l = next_line(&q))) {
            printf_(&b, ">%s%s\n", l[0] ? " " : "", l);
            free(l);
        }
        printf_(&b, "\n%s\n", k->sections[s].prose.s);
        if (outputs[s].len)
            printf_(&b, "\n```text\n%s\n```\n", outputs[s].s);
        free(outputs[s].s);
        free(items[s].s);
    }
    puts_(&b, "\n---\n\n");
    key_nav(&b, all, i, n);
    char file[160];
    snprintf(file, sizeof file, "teacher/%.127s.md", c->name);
    keep_page(file, &b);
    free(out);
}

/* teacher/README.md: teacher/index.md with the table of chapters and
 * their exercises at @chapters. */
static void write_key_index(const chapter *all, int n)
{
    buf b = {0};
    const char *rest;
    char *tmpl = index_template("teacher/index.md", &b, &rest);
    puts_(&b, "| # | chapter | exercises |\n|---|---------|-----------|\n");
    for (int i = 0; i < n; i++) {
        buf items[MAX_SECTIONS] = {{0}};
        int nitems = exercise_items(&all[i], items, MAX_SECTIONS);
        printf_(&b, "| %s | [%s](%s.md) |", all[i].number, all[i].title,
                all[i].name);
        for (int s = 0; s < nitems; s++) {
            printf_(&b, "%s[%d](%s.md#exercise-%d)", s ? " · " : " ", s + 1,
                    all[i].name, s + 1);
            free(items[s].s);
        }
        puts_(&b, " |\n");
    }
    puts_(&b, rest);
    keep_page("teacher/README.md", &b);
    free(tmpl);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    if (argc != 3 && argc != 4) {
        fprintf(stderr, "usage: weave ROOT OUTDIR [MHA]\n");
        return 2;
    }
    root = argv[1];
    mha_program = argc == 4 ? argv[3] : NULL;
    char dir[512];
    snprintf(dir, sizeof dir, "%s/chapters", root);
    DIR *d = opendir(dir);
    if (!d)
        die("cannot open %s: %s", dir, strerror(errno));
    char *names[MAX_CHAPTERS];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len > 5 && e->d_name[0] >= '0' && e->d_name[0] <= '9' &&
            e->d_name[2] == '_' && strcmp(e->d_name + len - 2, ".c") == 0) {
            if (n == MAX_CHAPTERS)
                die("more than %d chapters", MAX_CHAPTERS);
            names[n++] = strndup(e->d_name, len - 2);
        }
    }
    closedir(d);
    qsort(names, (size_t)n, sizeof names[0], by_name);

    static chapter all[MAX_CHAPTERS];
    for (int i = 0; i < n; i++) {
        chapter *c = &all[i];
        c->src = "chapters";
        c->out = "tests/expected";
        snprintf(c->name, sizeof c->name, "%s", names[i]);
        snprintf(c->number, sizeof c->number, "%.2s", names[i]);
        char path[512];
        snprintf(path, sizeof path, "%s/chapters/%s.c", root, names[i]);
        char *src = read_file(path);
        parse_chapter(c, src);
        free(src);
    }
    for (int i = 0; i < n; i++)
        write_chapter(all, i, n);
    snprintf(dir, sizeof dir, "%s/teacher", root);
    DIR *t = opendir(dir);
    write_copy("references.md", 0);
    write_copy("glossary.md", 0);
    static const char *reference[] = {"reading-a-trace.md", "cli.md",
                                      "library.md", "pytorch.md",
                                      "performance.md", "contributing.md"};
    for (size_t k = 0; k < sizeof reference / sizeof reference[0]; k++)
        write_copy(reference[k], 1);
    if (t) // the teachers' guide goes with the key: no handout has it
        write_copy("teachers-guide.md", 0);
    write_index(all, n, t != NULL);

    /* the key: one for every chapter, and none for a chapter not there */
    static chapter keys[MAX_CHAPTERS];
    if (t) {
        while ((e = readdir(t))) {
            size_t len = strlen(e->d_name);
            int chapter_key = len > 5 && e->d_name[0] >= '0' &&
                              e->d_name[0] <= '9' && e->d_name[2] == '_' &&
                              strcmp(e->d_name + len - 2, ".c") == 0;
            int known = 0;
            for (int i = 0; i < n && chapter_key && !known; i++)
                known = strlen(names[i]) == len - 2 &&
                        strncmp(names[i], e->d_name, len - 2) == 0;
            if (chapter_key && !known)
                die("teacher/%s is the key to no chapter (chapters/%s)",
                    e->d_name, e->d_name);
        }
        closedir(t);
        for (int i = 0; i < n; i++) {
            chapter *k = &keys[i];
            k->src = "teacher";
            k->out = "teacher/expected";
            snprintf(k->name, sizeof k->name, "%s", names[i]);
            snprintf(k->number, sizeof k->number, "%.2s", names[i]);
            char path[512];
            snprintf(path, sizeof path, "%s/teacher/%s.c", root, names[i]);
            if (access(path, F_OK) != 0)
                die("teacher/%s.c is missing: chapter %s's exercises have no "
                    "key", names[i], k->number);
            char *src = read_file(path);
            parse_chapter(k, src);
            free(src);
        }
        for (int i = 0; i < n; i++)
            write_key(all, keys, i, n);
        write_key_index(all, n);
        snprintf(dir, sizeof dir, "%s/teacher", argv[2]);
        if (mkdir(dir, 0777) == 0)
            snprintf(made_dir, sizeof made_dir, "%s", dir);
        else if (errno != EEXIST)
            die("cannot make %s: %s", dir, strerror(errno));
    }
    write_pages(argv[2]);
    for (int i = 0; i < npages; i++)
        free(pages[i].text.s);
    for (int i = 0; i < n; i++) {
        for (chapter *c = &all[i]; c; c = c == &all[i] ? &keys[i] : NULL) {
            free(c->intro.s);
            free(c->exercises.s);
            free(c->shows.s);
            for (int s = 0; s < c->nsections; s++)
                free(c->sections[s].prose.s);
        }
        free(names[i]);
    }
    return 0;
}
