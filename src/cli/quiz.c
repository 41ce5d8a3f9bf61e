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

/* The last "-> " in [line, end), or NULL. */
static const char *last_arrow(const char *line, const char *end)
{
    const char *found = NULL;
    for (const char *p = line; p + 3 <= end; p++)
        if (memcmp(p, "-> ", 3) == 0)
            found = p;
    return found;
}

int quiz_hide(const char *trace, size_t first, char **questions,
              char **answers, size_t *count)
{
    *questions = *answers = NULL;
    *count = 0;
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
    for (const char *line = trace; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        const char *arrow = last_arrow(line, end);
        const char *shape = arrow ? arrow + 3 : NULL;
        const char *close = shape && *shape == '(' ? memchr(shape, ')', (size_t)(end - shape)) : NULL;
        if (!close) {
            fprintf(q, "%.*s\n", (int)(end - line), line);
        } else {
            size_t number = first + (*count)++;
            fprintf(q, "%.*s?%zu\n", (int)(shape - line), line, number);
            // the symbolic name: what follows the shape, trimmed
            const char *sym = close + 1;
            while (sym < end && *sym == ' ')
                sym++;
            char s[256], y[256], buf[600];
            snprintf(s, sizeof s, "%.*s", (int)(close + 1 - shape), shape);
            snprintf(y, sizeof y, "%.*s", (int)(end - sym), sym);
            quiz_answer(buf, sizeof buf, number, s, y);
            fprintf(a, "%s\n", buf);
        }
        line = *end ? end + 1 : end;
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
