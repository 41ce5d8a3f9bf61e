/* tensor_trace.c: tensors' steps as trace records; see tensor_trace.h. */
#include "tensor/tensor_trace.h"

#include <stdarg.h>
#include <string.h>

#ifndef MHA_NO_TRACE
_Static_assert(TENSOR_MAX_DIMS <= TRACE_MAX_DIMS &&
                   TENSOR_NAME_MAX <= TRACE_NAME_MAX,
               "a record holds any tensor's shape and names");

static void keep_shape(trace_shape *s, const tensor *t)
{
    s->ndim = t->ndim;
    memcpy(s->dims, t->shape, sizeof t->shape);
    for (size_t d = 0; d < TENSOR_MAX_DIMS; d++)
        memcpy(s->names[d], t->names[d], sizeof t->names[d]);
    s->id = t->id;
}

/* --- the op text: printf's format plus %T, a tensor's shape ---------- */

/* "(a, b, c)" of count numbers, from l (signed) or z, into buf (size n);
 * returns the characters written. */
static int put_tuple(char *buf, size_t n, size_t count, const long *l,
                     const size_t *z)
{
    int w = snprintf(buf, n, "(");
    for (size_t i = 0; i < count && w > 0 && (size_t)w < n; i++)
        w += l ? snprintf(buf + w, n - w, i ? ", %ld" : "%ld", l[i])
               : snprintf(buf + w, n - w, i ? ", %zu" : "%zu", z[i]);
    if (w > 0 && (size_t)w < n)
        w += snprintf(buf + w, n - w, ")");
    return w;
}

static void format_op(char *buf, size_t n, const char *fmt, va_list ap)
{
    size_t used = 0;
    buf[0] = '\0';
    for (const char *p = fmt; *p && used + 1 < n; p++) {
        if (*p != '%') {
            buf[used++] = *p;
            buf[used] = '\0';
            continue;
        }
        /* one conversion: flags, width, precision, length, then the letter */
        char spec[16];
        size_t k = 0;
        spec[k++] = *p++;
        while (*p && strchr("-+ #0123456789.", *p) && k < 8)
            spec[k++] = *p++;
        int lng = 0, size = 0;
        while (*p == 'l' || *p == 'z') {
            lng |= *p == 'l';
            size |= *p == 'z';
            spec[k++] = *p++;
        }
        if (!*p)
            break;
        spec[k++] = *p;
        spec[k] = '\0';
        int w = 0;
        char s[TRACE_SHAPE_MAX];
        switch (*p) {
        case 'T': { /* a tensor's shape; nothing for NULL */
            const tensor *t = va_arg(ap, const tensor *);
            w = t ? snprintf(buf + used, n - used, "%s",
                             tensor_shape_str(t, s, sizeof s))
                  : 0;
            break;
        }
        case 'D': { /* (size_t n, const long *v): "(2, 4, -1)" */
            size_t count = va_arg(ap, size_t);
            w = put_tuple(buf + used, n - used, count,
                          va_arg(ap, const long *), NULL);
            break;
        }
        case 'P': { /* (size_t n, const size_t *v): "(0, 2, 1, 3)" */
            size_t count = va_arg(ap, size_t);
            w = put_tuple(buf + used, n - used, count, NULL,
                          va_arg(ap, const size_t *));
            break;
        }
        case 's':
            w = snprintf(buf + used, n - used, spec, va_arg(ap, const char *));
            break;
        case 'd':
        case 'i':
        case 'u':
            w = size  ? snprintf(buf + used, n - used, spec, va_arg(ap, size_t))
                : lng ? snprintf(buf + used, n - used, spec, va_arg(ap, long))
                      : snprintf(buf + used, n - used, spec, va_arg(ap, int));
            break;
        case 'g': /* exactly, unless a precision rounds it */
            if (!strchr(spec, '.')) {
                char num[TRACE_NUMBER_MAX];
                w = snprintf(buf + used, n - used, "%s",
                             trace_number_str(num, sizeof num, va_arg(ap, double)));
                break;
            }
            /* fall through */
        case 'e':
        case 'f':
            w = snprintf(buf + used, n - used, spec, va_arg(ap, double));
            break;
        case '%':
            w = snprintf(buf + used, n - used, "%%");
            break;
        default: /* not a conversion the trace knows: shown as written */
            w = snprintf(buf + used, n - used, "%s", spec);
        }
        used += w > 0 ? (size_t)w : 0;
        if (used >= n)
            used = n - 1;
    }
}

/* --- building records: the sink ------------------------------------ */

/* r: the record of a step, op text and inputs; the output when there
 * is one. */
static void build(trace_record *r, trace_kind kind, trace_join join,
                  const tensor *out, size_t n_inputs,
                  const tensor_trace_in *inputs, const char *fmt, va_list ap)
{
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->join = join;
    format_op(r->op, sizeof r->op, fmt, ap);
    for (size_t i = 0; i < n_inputs && r->n_inputs < TRACE_MAX_INPUTS; i++) {
        if (!inputs[i].t)
            continue; /* an optional input not given */
        trace_operand *o = &r->inputs[r->n_inputs++];
        keep_shape(&o->shape, inputs[i].t);
        if (inputs[i].label)
            snprintf(o->label, sizeof o->label, "%s", inputs[i].label);
        o->transposed = inputs[i].transposed;
        o->side = inputs[i].side;
    }
    if (out) {
        r->has_output = 1;
        keep_shape(&r->output, out);
    }
}

static void emit(trace_kind kind, trace_join join, const tensor *out,
                 size_t n_inputs, const tensor_trace_in *inputs, const char *fmt,
                 va_list ap)
{
    trace_record r;
    build(&r, kind, join, out, n_inputs, inputs, fmt, ap);
    trace_deliver(&r);
}

static void emit_note(const char *fmt, va_list ap)
{
    trace_record r;
    memset(&r, 0, sizeof r);
    r.kind = TRACE_NOTE;
    format_op(r.op, sizeof r.op, fmt, ap);
    trace_deliver(&r);
}

/* What trace_sink_now points at while someone listens (trace/trace.h):
 * a step's record, and a note's. */
struct trace_sink {
    void (*record)(trace_kind kind, trace_join join, const tensor *out,
                   size_t n_inputs, const tensor_trace_in *inputs,
                   const char *fmt, va_list ap);
    void (*note)(const char *fmt, va_list ap);
};

static const trace_sink builders = {emit, emit_note};

static void give_sink(void) __attribute__((constructor));

/* The trace gets the sink, builders (emit for a step's record, emit_note
 * for a note's), as the program loads: the constructor attribute on the
 * declaration of give_sink runs it before main. */
static void give_sink(void)
{
    trace_set_sink(&builders);
}

/* --- emitting: one test, then through the sink ----------------------- */

void tensor_trace_emit(trace_kind kind, trace_join join, const tensor *out,
                size_t n_inputs, const tensor_trace_in *inputs, const char *fmt, ...)
{
    if (!trace_sink_now)
        return;
    va_list ap;
    va_start(ap, fmt);
    trace_sink_now->record(kind, join, out, n_inputs, inputs, fmt, ap);
    va_end(ap);
}

void tensor_trace_step(trace_kind kind, const tensor *x, const tensor *y,
                const char *fmt, ...)
{
    if (!trace_sink_now)
        return;
    va_list ap;
    va_start(ap, fmt);
    trace_sink_now->record(kind, TRACE_LIST, y, 1,
                           &(tensor_trace_in){x, NULL, 0, 0}, fmt, ap);
    va_end(ap);
}

/* A step made of steps: its record, then one level deeper, listened to
 * or not (trace_end comes either way). */
static void open_step(const tensor *out, size_t n_inputs,
                      const tensor_trace_in *inputs, const char *fmt,
                      va_list ap)
{
    if (trace_sink_now)
        trace_sink_now->record(TRACE_STEP, TRACE_LIST, out, n_inputs, inputs,
                               fmt, ap);
    trace_enter();
}

void tensor_trace_begin(const tensor *out, size_t n_inputs,
                        const tensor_trace_in *inputs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    open_step(out, n_inputs, inputs, fmt, ap);
    va_end(ap);
}

int tensor_trace_open(size_t n_inputs, const tensor_trace_in *inputs,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    open_step(NULL, n_inputs, inputs, fmt, ap);
    va_end(ap);
    return 1;
}

/* The records RECORD lines have built and their functions have not yet
 * returned, innermost last: they nest as calls do.  Deeper than this,
 * a record is not kept (no lesson comes near: a RECORD function that
 * calls another is two deep). */
#define PENDING_MAX 16
static _Thread_local trace_record pending[PENDING_MAX];
static _Thread_local int n_pending;

tensor_trace_pending tensor_trace_prepare(trace_kind kind, trace_join join,
                                          size_t n_inputs,
                                          const tensor_trace_in *inputs,
                                          tensor *const *out,
                                          const char *fmt, ...)
{
    tensor_trace_pending p = {out, -1};
    if (!trace_sink_now || n_pending == PENDING_MAX)
        return p;
    p.slot = n_pending++;
    va_list ap;
    va_start(ap, fmt);
    build(&pending[p.slot], kind, join, NULL, n_inputs, inputs, fmt, ap);
    va_end(ap);
    return p;
}

void tensor_trace_deliver(tensor_trace_pending *p)
{
    if (p->slot < 0)
        return;
    n_pending = p->slot; /* the innermost: calls return in order */
    trace_record *r = &pending[p->slot];
    if (!*p->out || !trace_sink_now)
        return; /* it failed, or nobody listens any more */
    r->has_output = 1;
    keep_shape(&r->output, *p->out);
    trace_deliver(r);
}

void tensor_trace_note(const char *fmt, ...)
{
    if (!trace_sink_now)
        return;
    va_list ap;
    va_start(ap, fmt);
    trace_sink_now->note(fmt, ap);
    va_end(ap);
}
#endif
