/* marks.c: the chapter marks; see marks.h. */
#include "marks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 16

int marks_chapter(const char *s)
{
    if (strcmp(s, "full") == 0)
        return MARKS_FULL;
    if (strcmp(s, "handout") == 0)
        return MARKS_HANDOUT;
    if (strlen(s) != 2 || s[0] < '0' || s[0] > '9' || s[1] < '0' || s[1] > '9')
        return -1;
    int ch = (s[0] - '0') * 10 + (s[1] - '0');
    return ch >= 1 && ch < MARKS_FULL ? ch : -1;
}

/* The mark on line (leading blanks skipped): '>' for "//> NN" or "#> NN",
 * '<' for "//<" or "#<", 'r' for the opening of a replaced block, 'e' for
 * a line holding only the end of a block comment, 0 for any other line.
 * *arg receives NN's text for '>' and 'r'. */
static int mark_of(const char *line, char *arg, size_t n)
{
    while (*line == ' ' || *line == '\t')
        line++;
    const char *rest = NULL;
    int kind = 0;
    if (!strncmp(line, "//>", 3) || !strncmp(line, "//<", 3)) {
        kind = line[2];
        rest = line + 3;
    } else if (!strncmp(line, "#>", 2) || !strncmp(line, "#<", 2)) {
        kind = line[1];
        rest = line + 2;
    } else if (!strncmp(line, "/*<", 3)) {
        kind = 'r';
        rest = line + 3;
    } else if (!strcmp(line, "*/")) {
        return 'e';
    } else {
        return 0;
    }
    // the rest: blanks, then (for '>' and 'r') one word, then nothing
    while (*rest == ' ' || *rest == '\t')
        rest++;
    size_t len = strcspn(rest, " \t");
    if (len >= n)
        len = n - 1;
    memcpy(arg, rest, len);
    arg[len] = '\0';
    rest += strcspn(rest, " \t");
    while (*rest == ' ' || *rest == '\t')
        rest++;
    if (*rest)
        return 0; // "//> 12 and more": prose, not a mark
    if (kind == '<' && arg[0])
        return 0;
    return kind;
}

/* Does a mark of chapter c let the lines inside it into the cut `ch`
 * (marks_classify's)?  A "handout" mark: in the full build and in a cut
 * asked with MARKS_WITH_HANDOUT (every snapshot and handout), never in a
 * page of the book. */
static int allows(int c, int ch)
{
    int as_of = ch & ~MARKS_WITH_HANDOUT;
    if (c == MARKS_HANDOUT)
        return as_of == MARKS_FULL || (ch & MARKS_WITH_HANDOUT);
    return as_of >= c;
}

int marks_classify(char *const *lines, size_t n, int ch, marks_line *out,
                   char *err, size_t errn)
{
    int open[MAX_DEPTH]; // the chapters of the open marks, innermost last
    size_t open_line[MAX_DEPTH];
    size_t depth = 0;
    int replaced = 0;     // inside a replaced block: the chapter replacing
    size_t replaced_at = 0;
    for (size_t i = 0; i < n; i++) {
        char arg[32];
        int kind = mark_of(lines[i], arg, sizeof arg);
        int inner = depth ? open[depth - 1] : 0;
        out[i].chapter = inner;
        out[i].keep = 0;
        if (replaced) {
            if (kind == 'e') {
                replaced = 0;
                continue;
            }
            if (kind == 'r') {
                snprintf(err, errn, "line %zu: a replaced block inside the "
                         "one opened at line %zu", i + 1, replaced_at);
                return -1;
            }
            // code of the chapters before `replaced`, in the marks around
            int keep = !allows(replaced, ch);
            for (size_t d = 0; d < depth; d++)
                keep = keep && allows(open[d], ch);
            out[i].keep = keep;
            continue;
        }
        if (kind == '>' || kind == 'r') {
            int c = marks_chapter(arg);
            if (c < 0) {
                snprintf(err, errn, "line %zu: '%s' is no chapter (01 .. 98, "
                         "full or handout)", i + 1, arg);
                return -1;
            }
            if (kind == 'r') {
                replaced = c;
                replaced_at = i + 1;
                continue;
            }
            if (depth == MAX_DEPTH) {
                snprintf(err, errn, "line %zu: marks nested deeper than %d",
                         i + 1, MAX_DEPTH);
                return -1;
            }
            open_line[depth] = i + 1;
            open[depth++] = c;
            continue;
        }
        if (kind == '<') {
            if (!depth) {
                snprintf(err, errn, "line %zu: a mark's end with no mark open",
                         i + 1);
                return -1;
            }
            depth--;
            continue;
        }
        int keep = 1;
        for (size_t d = 0; d < depth; d++)
            keep = keep && allows(open[d], ch);
        out[i].keep = keep;
    }
    if (replaced) {
        snprintf(err, errn, "line %zu: the replaced block opened here does "
                 "not end", replaced_at);
        return -1;
    }
    if (depth) {
        snprintf(err, errn, "line %zu: the mark opened here does not end",
                 open_line[depth - 1]);
        return -1;
    }
    return 0;
}
