/* quiz.c: hide the output shapes of a trace (see quiz.h). */
#define _POSIX_C_SOURCE 200809L
#include "quiz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

void quiz_answer(char *buf, size_t n, size_t number, const char *shape,
                 const char *sym)
{
    char label[32];
    snprintf(label, sizeof label, "?%zu", number);
    snprintf(buf, n, "%-5s%-22s%s", label, shape, sym);
    // no trailing spaces when there is no symbolic name
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == ' ')
        buf[--len] = '\0';
}

int quiz_hide(const trace_log *log, size_t first, char **questions,
              char **answers, size_t *count)
{
    *questions = *answers = NULL;
    *count = 0;
    if (log->failed)
        return mha_fail(GSL_ENOMEM, "quiz_hide: out of memory (the trace "
                                    "lost a record)");
    size_t qlen = 0, alen = 0;
    FILE *q = open_memstream(questions, &qlen);
    FILE *a = q ? open_memstream(answers, &alen) : NULL;
    if (!q || !a) {
        if (q)
            fclose(q);
        free(*questions);
        *questions = NULL;
        return mha_fail(GSL_ENOMEM, "quiz_hide: out of memory");
    }
    char line[2048], blank[32], shape[TRACE_SHAPE_MAX], sym[TRACE_SHAPE_MAX];
    for (size_t i = 0; i < log->count; i++) {
        const trace_record *r = &log->records[i];
        if (r->kind == TRACE_NOTE || !r->has_output) {
            fprintf(q, "%s\n", trace_format_text(r, line, sizeof line));
            continue;
        }
        size_t number = first + (*count)++;
        snprintf(blank, sizeof blank, "?%zu", number);
        fprintf(q, "%s\n", trace_format_blank(r, blank, line, sizeof line));
        quiz_answer(line, sizeof line, number,
                    trace_shape_str(&r->output, shape, sizeof shape),
                    trace_sym_str(&r->output, sym, sizeof sym));
        fprintf(a, "%s\n", line);
    }
    int bad = ferror(q) || ferror(a);
    bad |= fclose(q) != 0;
    bad |= fclose(a) != 0;
    if (bad) {
        free(*questions);
        free(*answers);
        *questions = *answers = NULL;
        *count = 0;
        return mha_fail(GSL_ENOMEM, "quiz_hide: out of memory");
    }
    return GSL_SUCCESS;
}
