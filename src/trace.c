/* trace.c: the shape trace; see trace.h for the format. */
#include "trace.h"

#include <stdarg.h>
#include <string.h>

FILE *trace_stream = NULL;
static int depth = 0; /* nesting level; kept even when tracing is off */

void trace_to(FILE *f)
{
#ifdef MHA_NO_TRACE
    (void)f; // compiled out: the stream stays NULL
#else
    trace_stream = f;
#endif
}

char *shape_str(char *buf, size_t n, size_t ndim, const size_t *shape)
{
    size_t used = 0;
    int w = snprintf(buf, n, "(");
    used = w > 0 ? (size_t)w : 0;
    for (size_t d = 0; d < ndim && used < n; d++) {
        w = snprintf(buf + used, n - used, d ? ", %zu" : "%zu", shape[d]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < n)
        snprintf(buf + used, n - used, ndim == 1 ? ",)" : ")");
    return buf;
}

static void emit(const char *op, const char *kind, const char *shapes,
                 const char *sym)
{
    int indent = 2 * depth;
    int opw = TRACE_OP_WIDTH - indent;
    if (opw < 1)
        opw = 1;
    /* one space at least between columns, trailing blanks trimmed */
    char line[1024];
    int n = snprintf(line, sizeof line, "%*s%-*s %-4s  %-*s  %s", indent, "",
                     opw, op ? op : "", kind ? kind : "", TRACE_SHAPES_WIDTH,
                     shapes ? shapes : "", sym ? sym : "");
    if (n < 0)
        return;
    size_t len = strlen(line);
    while (len > 0 && line[len - 1] == ' ')
        line[--len] = '\0';
    fprintf(trace_stream, "%s\n", line);
}

void trace_line(const char *op, const char *kind, const char *shapes,
                const char *sym)
{
    if (trace_stream)
        emit(op, kind, shapes, sym);
}

void trace_begin(const char *op, const char *shapes, const char *sym)
{
    if (trace_stream)
        emit(op, "", shapes, sym);
    depth++;
}

void trace_end(void)
{
    if (depth > 0)
        depth--;
}

void trace_note(const char *fmt, ...)
{
    if (!trace_stream)
        return;
    fprintf(trace_stream, "%*s# ", 2 * depth, "");
    va_list ap;
    va_start(ap, fmt);
    vfprintf(trace_stream, fmt, ap);
    va_end(ap);
    fputc('\n', trace_stream);
}
