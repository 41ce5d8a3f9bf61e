//> handout
/* trace_dot.c: a trace log as a Graphviz dataflow graph (trace.h).
 *
 * One of the trace's printers, like the text and JSON ones: it reads the
 * records of a log and knows nothing of the code that emitted them.
 *
 * The graph of the steps at one depth; depth 1 of multihead(h=5) on d2l's
 * example, with k = v and valid_lens:
 *
 *     q            k = v                          valid_lens
 *     |            /     \                              |
 *    W_q        W_k       W_v                   repeat_interleave
 *     |          |         |                            |
 *   transpose_qkv x3: (10, 4, 20), (10, 6, 20), (10, 6, 20), copy
 *     \__________|_________|____________________________/
 *                      dot_attention
 *                           |  (10, 4, 20) new
 *                    transpose_output
 *                           |  (2, 4, 100) copy
 *                          W_o -> output
 *
 * Nodes:
 *   - a box per step at `depth`, named s0, s1 ... in record order;
 *   - an ellipse per input, in0, in1 ...: the labelled operands of the
 *     steps one level up (q, k, v, valid_lens), and any tensor a shown
 *     step reads that no shown step made.  Inputs that are one tensor
 *     (the same id) are one node: "q = k = v" for self-attention;
 *   - "out", the last step's output.
 *
 * Edges go from the step that made a tensor to every step that reads it,
 * matched by tensor id, and carry its shape and how it was made.  A step
 * made of steps reads what its inner steps read from outside it, makes
 * what its last direct child makes, and is `new` when any inner step
 * computes numbers, else `copy` when any copies, else `view`.
 */
#include "trace/trace.h"

#include "base/error.h"

#include <stdlib.h>
#include <string.h>

/* One box: its record, and the records inside it [first, end). */
typedef struct dot_step {
    const trace_record *r;
    size_t first, end;
    trace_kind kind;        /* view, copy or new: how its output was made */
    const trace_shape *out; /* NULL when it makes nothing */
} dot_step;

/* One ellipse: a tensor no shown step made. */
typedef struct dot_input {
    unsigned long id;
    char label[4 * TRACE_LABEL_MAX + TRACE_SHAPE_MAX];
} dot_input;

/* A string in dot's double quotes: " and \ escaped. */
static void dot_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

/* The kind of a step made of steps: new > copy > view over its inner
 * records (notes and the steps' own records aside). */
static trace_kind inner_kind(const trace_log *log, size_t first, size_t end)
{
    trace_kind kind = TRACE_VIEW;
    for (size_t i = first; i < end; i++) {
        trace_kind k = log->records[i].kind;
        if (k == TRACE_NEW)
            return TRACE_NEW;
        if (k == TRACE_COPY)
            kind = TRACE_COPY;
    }
    return kind;
}

/* The step that made tensor id (its output), or -1. */
static long producer(const dot_step *steps, size_t n, unsigned long id)
{
    for (size_t i = n; i-- > 0;)
        if (steps[i].out && steps[i].out->id == id)
            return (long)i;
    return -1;
}

/* 1 when a record inside step s, before record `before`, made tensor id:
 * an intermediate of s, not something s reads from outside. */
static int made_inside(const trace_log *log, const dot_step *s, size_t before,
                       unsigned long id)
{
    for (size_t i = s->first; i < before; i++)
        if (log->records[i].has_output && log->records[i].output.id == id)
            return 1;
    return 0;
}

/* Calls visit(step, operand) for each tensor step s reads from outside,
 * once per tensor, in the order first read: its own record's operands,
 * then those of its inner records not made inside it. */
typedef void (*read_fn)(void *ctx, size_t step, const trace_operand *o);

static void for_each_read(const trace_log *log, const dot_step *steps,
                          size_t k, read_fn visit, void *ctx)
{
    const dot_step *s = &steps[k];
    unsigned long seen[64];
    size_t nseen = 0;
    for (size_t i = s->first - 1; i < s->end; i++) {
        const trace_record *r = &log->records[i];
        for (size_t j = 0; j < r->n_inputs; j++) {
            const trace_operand *o = &r->inputs[j];
            if (i >= s->first && made_inside(log, s, i, o->shape.id))
                continue;
            int dup = 0;
            for (size_t m = 0; m < nseen && !dup; m++)
                dup = seen[m] == o->shape.id;
            if (dup)
                continue;
            if (nseen < sizeof seen / sizeof seen[0])
                seen[nseen++] = o->shape.id;
            visit(ctx, k, o);
        }
    }
}

/* --- the inputs ------------------------------------------------------ */

typedef struct input_list {
    dot_input *items;
    size_t count, capacity;
    int failed;
    const dot_step *steps;
} input_list;

static dot_input *find_input(input_list *l, unsigned long id)
{
    for (size_t i = 0; i < l->count; i++)
        if (l->items[i].id == id)
            return &l->items[i];
    return NULL;
}

/* 1 when label is one of the names of "k = v". */
static int has_label(const char *labels, const char *label)
{
    size_t len = strlen(label);
    for (const char *p = labels;; p += 3) {
        if (!strncmp(p, label, len) && (p[len] == '\0' || p[len] == ' '))
            return 1;
        if (!(p = strstr(p, " = ")))
            return 0;
    }
}

/* Add o as an input, or join its label to the input with its id. */
static void add_input(input_list *l, const trace_operand *o)
{
    dot_input *in = find_input(l, o->shape.id);
    if (in) {
        /* "k" and then "v" of the same tensor: "k = v"; a name read
         * twice (valid_lens by the module and by a step inside) once */
        if (o->label[0] && in->label[0] != '(' &&
            !has_label(in->label, o->label) &&
            strlen(in->label) + strlen(o->label) + 4 < sizeof in->label) {
            strcat(in->label, " = ");
            strcat(in->label, o->label);
        }
        return;
    }
    if (!mha_grow((void **)&l->items, &l->capacity, l->count,
                  sizeof *l->items, 8)) {
        l->failed = 1;
        return;
    }
    in = &l->items[l->count++];
    in->id = o->shape.id;
    if (o->label[0]) {
        snprintf(in->label, sizeof in->label, "%s", o->label);
    } else {
        /* no label: the shape in the lesson's names, else in numbers */
        trace_sym_str(&o->shape, in->label, sizeof in->label);
        if (!in->label[0])
            trace_shape_str(&o->shape, in->label, sizeof in->label);
    }
}

/* A tensor a step reads that no shown step made is an input. */
static void note_read(void *ctx, size_t step, const trace_operand *o)
{
    input_list *l = ctx;
    if (producer(l->steps, step, o->shape.id) < 0)
        add_input(l, o);
}

/* --- the edges ------------------------------------------------------- */

typedef struct edge_ctx {
    FILE *f;
    const dot_step *steps;
    size_t nsteps;
    input_list *inputs;
} edge_ctx;

/* An edge's label: the shape, and under it how it was made (none for
 * an input's edge). */
static void edge_label(FILE *f, const trace_shape *s, const char *kind)
{
    char shape[TRACE_SHAPE_MAX];
    fprintf(f, " [label=\"%s%s%s\"];\n", trace_shape_str(s, shape, sizeof shape),
            kind ? "\\n" : "", kind ? kind : "");
}

static void write_edge(void *ctx, size_t step, const trace_operand *o)
{
    edge_ctx *e = ctx;
    long from = producer(e->steps, step, o->shape.id);
    if (from >= 0) {
        fprintf(e->f, "  s%ld -> s%zu", from, step);
        edge_label(e->f, &o->shape, trace_kind_name(e->steps[from].kind));
        return;
    }
    dot_input *in = find_input(e->inputs, o->shape.id);
    if (in) {
        fprintf(e->f, "  in%zu -> s%zu", (size_t)(in - e->inputs->items), step);
        edge_label(e->f, &o->shape, NULL);
    }
}

/* --- the graph ------------------------------------------------------- */

void trace_write_dot(FILE *f, const trace_log *log, int depth)
{
    size_t n = log->count;
    dot_step *steps = n ? calloc(n, sizeof *steps) : NULL;
    size_t nsteps = 0;
    input_list inputs = {0};
    if (n && !steps) {
        fprintf(f, "digraph trace {\n  // out of memory\n}\n");
        return;
    }
    /* the boxes, and the labelled operands of the steps around them */
    for (size_t i = 0; i < n; i++) {
        const trace_record *r = &log->records[i];
        if (r->depth == depth - 1 && r->kind == TRACE_STEP)
            for (size_t j = 0; j < r->n_inputs; j++)
                if (r->inputs[j].label[0])
                    add_input(&inputs, &r->inputs[j]);
        if (r->depth != depth || r->kind == TRACE_NOTE)
            continue;
        dot_step *s = &steps[nsteps++];
        s->r = r;
        s->first = i + 1;
        s->end = i + 1;
        while (s->end < n && log->records[s->end].depth > depth)
            s->end++;
        s->kind = r->kind;
        s->out = r->has_output ? &r->output : NULL;
        if (r->kind == TRACE_STEP) {
            s->kind = inner_kind(log, s->first, s->end);
            /* it makes what its last direct child makes */
            for (size_t c = s->first; c < s->end; c++) {
                const trace_record *child = &log->records[c];
                if (child->depth == depth + 1 && child->kind != TRACE_NOTE)
                    s->out = child->has_output ? &child->output : NULL;
            }
        }
    }
    inputs.steps = steps;
    for (size_t k = 0; k < nsteps; k++)
        for_each_read(log, steps, k, note_read, &inputs);

    fprintf(f, "digraph trace {\n");
    fprintf(f, "  rankdir=TB;\n");
    fprintf(f, "  node [fontname=\"monospace\", fontsize=11];\n");
    fprintf(f, "  edge [fontname=\"monospace\", fontsize=9];\n");
    if (inputs.failed)
        fprintf(f, "  // out of memory: some inputs are missing\n");
    for (size_t i = 0; i < inputs.count; i++) {
        fprintf(f, "  in%zu [shape=ellipse, label=", i);
        dot_string(f, inputs.items[i].label);
        fprintf(f, "];\n");
    }
    for (size_t k = 0; k < nsteps; k++) {
        fprintf(f, "  s%zu [shape=box, label=", k);
        dot_string(f, steps[k].r->op);
        fprintf(f, "];\n");
    }
    edge_ctx e = {f, steps, nsteps, &inputs};
    for (size_t k = 0; k < nsteps; k++)
        for_each_read(log, steps, k, write_edge, &e);
    /* the last step's output leaves the graph */
    if (nsteps && steps[nsteps - 1].out) {
        fprintf(f, "  out [shape=ellipse, label=\"output\"];\n");
        fprintf(f, "  s%zu -> out", nsteps - 1);
        edge_label(f, steps[nsteps - 1].out,
                   trace_kind_name(steps[nsteps - 1].kind));
    }
    fprintf(f, "}\n");
    free(inputs.items);
    free(steps);
}
//<
