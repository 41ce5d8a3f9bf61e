/* trace.c: shape-trace records and their observers; see trace.h. */
#include "trace/trace.h"

#include "base/error.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

/* Each thread has its own trace, as it has its own error (base/error.c):
 * the records of the steps it runs, for the observers it attached. */
static _Thread_local trace_observer *observers = NULL; /* NULL: nobody listens */
#ifndef MHA_NO_TRACE
static _Thread_local int depth = 0;  /* nesting; kept when nobody listens */
static _Thread_local int quiet = 0;  /* open quiet scopes */
static _Thread_local size_t seq = 0; /* records delivered so far */
static const trace_sink *sink = NULL; /* trace_set_sink's, one per process */
_Thread_local const trace_sink *trace_sink_now = NULL; /* see follow() */
#endif

/* --- shapes ---------------------------------------------------------- */

char *trace_dims_str(char *buf, size_t n, size_t ndim, const size_t *shape)
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

char *trace_number_str(char *buf, size_t n, double v)
{
    if (n == 0)
        return buf;
    if (v == 0)
        v = 0; /* no "-0" */
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, n, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    return buf;
}

char *trace_shape_str(const trace_shape *s, char *buf, size_t n)
{
    return trace_dims_str(buf, n, s->ndim, s->dims);
}

char *trace_sym_str(const trace_shape *s, char *buf, size_t n)
{
    int any = 0;
    for (size_t d = 0; d < s->ndim; d++)
        any |= s->names[d][0] != '\0';
    if (n == 0)
        return buf;
    buf[0] = '\0';
    if (!any)
        return buf;
    size_t used = 0;
    for (size_t d = 0; d < s->ndim && used < n; d++) {
        int w = s->names[d][0]
                    ? snprintf(buf + used, n - used, "%s%s", d ? ", " : "(",
                               s->names[d])
                    : snprintf(buf + used, n - used, "%s%zu", d ? ", " : "(",
                               s->dims[d]);
        used += w > 0 ? (size_t)w : 0;
    }
    if (used < n)
        snprintf(buf + used, n - used, s->ndim == 1 ? ",)" : ")");
    return buf;
}

const char *trace_kind_name(trace_kind kind)
{
    static const char *const names[] = {"view", "copy", "new", "step", "note"};
    return kind <= TRACE_NOTE ? names[kind] : "?";
}

const char *trace_join_text(trace_join join)
{
    static const char *const text[] = {", ", " @ ", " + "};
    return join <= TRACE_SUM ? text[join] : ", ";
}

#ifndef MHA_NO_TRACE
/* --- emitting -------------------------------------------------------- */

static int listening(void) { return observers && !quiet; }

/* The emitters' pointer follows listening(): called wherever the
 * observers, the quiet scopes or the sink change. */
static void follow(void) { trace_sink_now = listening() ? sink : NULL; }

void trace_set_sink(const trace_sink *s)
{
    sink = s;
    follow();
}

int trace_on(void) { return listening(); }

void trace_deliver(trace_record *r)
{
    if (!listening())
        return;
    r->depth = depth;
    r->seq = seq++;
    for (trace_observer *o = observers; o; o = o->next)
        o->record(o->ctx, r);
}

void trace_enter(void) { depth++; }

void trace_end(void)
{
    if (depth > 0)
        depth--;
}

void trace_quiet_begin(void)
{
    quiet++;
    follow();
}

void trace_quiet_end(void)
{
    if (quiet > 0)
        quiet--;
    follow();
}
#endif

/* --- observers ------------------------------------------------------- */

void trace_attach(trace_observer *o)
{
#ifdef MHA_NO_TRACE
    (void)o; // compiled out: nothing is ever emitted
#else
    trace_detach(o);
    o->next = NULL;
    trace_observer **p = &observers;
    while (*p)
        p = &(*p)->next;
    *p = o;
    if (!observers->next)
        seq = 0; /* the first listener counts from 0 */
    follow();
#endif
}

void trace_detach(trace_observer *o)
{
    for (trace_observer **p = &observers; *p; p = &(*p)->next)
        if (*p == o) {
            *p = o->next;
            o->next = NULL;
            break;
        }
#ifndef MHA_NO_TRACE
    follow();
#endif
}

/* --- the text printer ------------------------------------------------ */

static size_t put(char *buf, size_t n, size_t used, const char *s)
{
    if (used < n)
        snprintf(buf + used, n - used, "%s", s);
    size_t len = strlen(s);
    return used + len < n ? used + len : n;
}

/* The inputs the text line shows: all but the side inputs. */
static size_t shown_inputs(const trace_record *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n_inputs; i++)
        k += !r->inputs[i].side;
    return k;
}

/* "q (2, 4, 100), k (2, 6, 100)" or "(10, 4, 20) @ (10, 6, 20)^T", then
 * " -> (10, 4, 6)" when the step has an output. */
static char *shapes_text(const trace_record *r, char *buf, size_t n)
{
    char s[TRACE_SHAPE_MAX];
    size_t used = 0, shown = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < r->n_inputs; i++) {
        const trace_operand *o = &r->inputs[i];
        if (o->side)
            continue;
        if (shown++)
            used = put(buf, n, used, trace_join_text(r->join));
        if (o->label[0]) {
            used = put(buf, n, used, o->label);
            used = put(buf, n, used, " ");
        }
        used = put(buf, n, used, trace_shape_str(&o->shape, s, sizeof s));
        if (o->transposed)
            used = put(buf, n, used, "^T");
    }
    if (r->has_output) {
        used = put(buf, n, used, shown ? " -> " : "-> ");
        put(buf, n, used, trace_shape_str(&r->output, s, sizeof s));
    }
    return buf;
}

char *trace_format_text(const trace_record *r, char *buf, size_t n)
{
    int indent = 2 * r->depth;
    if (r->kind == TRACE_NOTE) {
        snprintf(buf, n, "%*s# %s", indent, "", r->op);
        return buf;
    }
    char shapes[TRACE_MAX_INPUTS * (TRACE_SHAPE_MAX + TRACE_LABEL_MAX + 8) +
                TRACE_SHAPE_MAX];
    char sym[TRACE_SHAPE_MAX] = "";
    shapes_text(r, shapes, sizeof shapes);
    if (r->has_output) {
        trace_sym_str(&r->output, sym, sizeof sym);
    } else if (shown_inputs(r) == 1) {
        for (size_t i = 0; i < r->n_inputs; i++)
            if (!r->inputs[i].side)
                trace_sym_str(&r->inputs[i].shape, sym, sizeof sym);
    }
    int opw = TRACE_OP_WIDTH - indent;
    if (opw < 1)
        opw = 1;
    /* one space at least between columns, trailing blanks trimmed */
    snprintf(buf, n, "%*s%-*s %-4s  %-*s  %s", indent, "", opw, r->op,
             r->kind == TRACE_STEP ? "" : trace_kind_name(r->kind),
             TRACE_SHAPES_WIDTH, shapes, sym);
    size_t len = strlen(buf);
    while (len > 0 && buf[len - 1] == ' ')
        buf[--len] = '\0';
    return buf;
}

static void print_text(void *ctx, const trace_record *r)
{
    char line[2048];
    fprintf((FILE *)ctx, "%s\n", trace_format_text(r, line, sizeof line));
}

static _Thread_local trace_observer text_printer = {print_text, NULL, NULL};

/* One of the trace's own printers, on f or (NULL) off. */
static void print_to(trace_observer *printer, FILE *f)
{
    trace_detach(printer);
    printer->ctx = f;
    if (f)
        trace_attach(printer);
}

void trace_to(FILE *f) { print_to(&text_printer, f); }

/* --- JSON lines ------------------------------------------------------ */

void trace_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20 || c == '<')
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_shape(FILE *f, const trace_shape *s)
{
    fprintf(f, "{\"shape\": [");
    for (size_t d = 0; d < s->ndim; d++)
        fprintf(f, "%s%zu", d ? ", " : "", s->dims[d]);
    fprintf(f, "], \"names\": [");
    for (size_t d = 0; d < s->ndim; d++) {
        fprintf(f, "%s", d ? ", " : "");
        trace_json_string(f, s->names[d]);
    }
    fprintf(f, "], \"id\": %lu", s->id);
}

/* The op's name: "reshape" of "reshape(2, 4, 5, -1)", "W_q" of "W_q: x W^T". */
static size_t op_name_len(const char *op)
{
    size_t n = strcspn(op, "(:");
    while (n > 0 && op[n - 1] == ' ')
        n--;
    return n;
}

void trace_print_json(FILE *f, const trace_record *r)
{
    char name[TRACE_OP_MAX];
    size_t len = op_name_len(r->op);
    snprintf(name, sizeof name, "%.*s", (int)len, r->op);
    fprintf(f, "{\"seq\": %zu, \"depth\": %d, \"kind\": \"%s\", ", r->seq,
            r->depth, trace_kind_name(r->kind));
    fprintf(f, r->kind == TRACE_NOTE ? "\"text\": " : "\"op\": ");
    trace_json_string(f, r->op);
    if (r->kind != TRACE_NOTE) {
        fprintf(f, ", \"name\": ");
        trace_json_string(f, name);
        static const char *const joins[] = {"list", "matmul", "sum"};
        fprintf(f, ", \"join\": \"%s\", \"inputs\": [", joins[r->join]);
        for (size_t i = 0; i < r->n_inputs; i++) {
            fprintf(f, "%s", i ? ", " : "");
            json_shape(f, &r->inputs[i].shape);
            fprintf(f, ", \"label\": ");
            trace_json_string(f, r->inputs[i].label);
            fprintf(f, ", \"transposed\": %s, \"side\": %s}",
                    r->inputs[i].transposed ? "true" : "false",
                    r->inputs[i].side ? "true" : "false");
        }
        fprintf(f, "], \"output\": ");
        if (r->has_output) {
            json_shape(f, &r->output);
            fputc('}', f);
        } else {
            fprintf(f, "null");
        }
    }
    fputc('}', f);
}

static void print_json(void *ctx, const trace_record *r)
{
    trace_print_json((FILE *)ctx, r);
    fputc('\n', (FILE *)ctx);
}

static _Thread_local trace_observer json_printer = {print_json, NULL, NULL};

void trace_to_json(FILE *f) { print_to(&json_printer, f); }

/* --- the log --------------------------------------------------------- */

static void keep_record(void *ctx, const trace_record *r)
{
    trace_log *log = ctx;
    if (!mha_grow((void **)&log->records, &log->capacity, log->count,
                  sizeof *log->records, 64)) {
        log->failed = 1;
        return;
    }
    log->records[log->count++] = *r;
}

void trace_log_start(trace_log *log)
{
    memset(log, 0, sizeof *log);
    log->observer.record = keep_record;
    log->observer.ctx = log;
    trace_attach(&log->observer);
}

void trace_log_stop(trace_log *log) { trace_detach(&log->observer); }

void trace_log_free(trace_log *log)
{
    trace_log_stop(log);
    free(log->records);
    log->records = NULL;
    log->count = log->capacity = 0;
}
