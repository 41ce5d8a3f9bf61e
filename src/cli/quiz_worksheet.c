//> handout
/* quiz_worksheet.c: a quiz as a printable worksheet, in pages (see
 * quiz.h). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "libmha.h"
#include "output.h"
#include "paths.h"
#include "quiz.h"

/* A page of a worksheet: 60 lines fit A4 and Letter at 10 or 11 points
 * with the usual margins; lines are at most 78 characters wide. */
enum { PAGE_LINES = 60, PAGE_WIDTH = 78, BLANK = 24, BLANK_AT = 40 };

/* A worksheet's lines, then printed in pages: keep[i] > 1 holds lines
 * i .. i + keep[i] - 1 on one page (a step and its questions). */
typedef struct sheet {
    char (*lines)[2 * PAGE_WIDTH];
    size_t *keep;
    size_t n, cap;
    int failed;
} sheet;

static void sheet_add(sheet *s, size_t keep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sheet_add(sheet *s, size_t keep, const char *fmt, ...)
{
    if (s->failed)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 128;
        void *l = realloc(s->lines, cap * sizeof *s->lines);
        if (l)
            s->lines = l;
        void *k = l ? realloc(s->keep, cap * sizeof *s->keep) : NULL;
        if (!l || !k) {
            s->failed = 1;
            return;
        }
        s->keep = k;
        s->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->lines[s->n], sizeof s->lines[0], fmt, ap);
    va_end(ap);
    s->keep[s->n++] = keep;
}

/* text at indent, cut at spaces into lines of PAGE_WIDTH at most, the
 * lines after the first indented by hang more; the lines it took. */
static size_t sheet_wrap(sheet *s, int indent, int hang, const char *text)
{
    size_t lines = 0;
    int width = PAGE_WIDTH - indent;
    while (*text) {
        int in = lines ? indent + hang : indent;
        int room = lines ? width - hang : width;
        size_t len = strlen(text);
        size_t cut = len;
        if ((int)len > room) {
            cut = (size_t)room;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = (size_t)room;
        }
        sheet_add(s, 1, "%*s%.*s", in, "", (int)cut, text);
        lines++;
        text += cut;
        while (*text == ' ')
            text++;
    }
    return lines;
}

/* The sheet in pages of PAGE_LINES, a form feed between them, each page
 * after the first headed by title and its number; a page break where
 * lines[i] is "\f". */
static void sheet_print(const sheet *s, const char *title)
{
    size_t pages = 1, used = 0;
    // count the pages first, then print with "page k of n"
    for (int pass = 0; pass < 2; pass++) {
        size_t page = 1;
        used = 0;
        for (size_t i = 0; i < s->n; i++) {
            int forced = !strcmp(s->lines[i], "\f");
            size_t keep = s->keep[i] > PAGE_LINES - 2 ? 1 : s->keep[i];
            if (forced || used + keep > PAGE_LINES) {
                page++;
                if (pass)
                    printf("\f%s, page %zu of %zu\n\n", title, page, pages);
                used = 2;
                if (forced)
                    continue;
            }
            if (pass)
                printf("%s\n", s->lines[i]);
            used++;
        }
        pages = page;
    }
}

/* The worksheet of z: a name line, the case, each step with its numbered
 * questions and a blank for each answer; with answers, the answers after
 * them on a page of their own. */
int quiz_print_worksheet(const quiz *z, int answers)
{
    sheet s = {0};
    char title[QUIZ_TEXT_MAX], cmd[2 * QUIZ_TEXT_MAX], desc[2 * QUIZ_TEXT_MAX];
    FILE *m = fmemopen(cmd, sizeof cmd, "w");
    if (m) {
        quiz_trace_command(m, &z->c);
        fclose(m);
    }
    m = fmemopen(desc, sizeof desc, "w");
    if (m) {
        quiz_describe(m, &z->c);
        fclose(m);
    }
    if (!m)
        return cli_error("out of memory writing the worksheet");
    char upto[32];
    quiz_upto_option(&z->c, upto, sizeof upto);
    if (z->c.seeded)
        snprintf(title, sizeof title, "mha quiz --seed %llu%s", z->c.seed, upto);
    else
        snprintf(title, sizeof title, "mha trace --quiz");
    sheet_add(&s, 1, "%s: %zu questions", title, z->n);
    sheet_add(&s, 1, "%s", "");
    sheet_add(&s, 1, "Name: %.40s   Date: %.16s",
              "________________________________________",
              "________________");
    sheet_add(&s, 1, "%s", "");
    sheet_wrap(&s, 0, 0, desc);
    if (!z->c.seeded)
        sheet_wrap(&s, 0, 0, cmd);
    sheet_add(&s, 1, "%s", "");
    sheet_wrap(&s, 0, 0, "Write each answer on its blank: a shape as (2, 4, "
                         "100); view or copy; values as [3, 3, 2, 2]; a "
                         "number as 3.");
    if (z->c.seeded) {
        // the line to type, on a line of its own so that no wrap splits it
        sheet_wrap(&s, 0, 0, "To type your answers in: a file whose first "
                             "line is this one line,");
        sheet_add(&s, 1, "    # mha quiz --seed %llu%s", z->c.seed, upto);
        sheet_wrap(&s, 0, 0, "then one answer a line, numbered as here "
                             "(\"1. (2, 3, 8)\"); mha quiz --answers FILE "
                             "grades it, as the quiz its first line names.");
    }
    sheet_add(&s, 1, "%s", "");
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        size_t first = s.n;
        sheet_wrap(&s, indent, 4, ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++) {
            char ask[2 * QUIZ_TEXT_MAX];
            snprintf(ask, sizeof ask, "%3zu. %s?", i + 1, z->qs[i].ask);
            int at = indent + 2;
            int gap = BLANK_AT - at - (int)strlen(ask); // blanks in a column
            if (gap < 2)
                gap = 2;
            if (at + (int)strlen(ask) + gap + BLANK <= PAGE_WIDTH) {
                sheet_add(&s, 1, "%*s%s%*s%.*s", at, "", ask, gap, "", BLANK,
                          "______________________________");
            } else {
                sheet_wrap(&s, at, 5, ask);
                sheet_add(&s, 1, "%*s%.*s", at + 5, "", BLANK,
                          "______________________________");
            }
        }
        if (s.n > first && !s.failed)
            s.keep[first] = s.n - first;
    }
    if (answers && !s.failed) {
        sheet_add(&s, 1, "\f");
        sheet_add(&s, 1, "Answers");
        sheet_add(&s, 1, "%s", "");
        for (size_t i = 0; i < z->n; i++) {
            char one[5 * QUIZ_TEXT_MAX];
            snprintf(one, sizeof one, "%3zu. %s", i + 1, z->qs[i].why);
            size_t first = s.n;
            sheet_wrap(&s, 0, 5, one);
            if (!s.failed)
                s.keep[first] = s.n - first;
        }
    }
    int status = CLI_OK;
    if (s.failed)
        status = cli_error("out of memory writing the worksheet");
    else
        sheet_print(&s, title);
    free(s.lines);
    free(s.keep);
    return status;
}
//<
