/* print.c: tensors printed as PyTorch prints them; see tensor.h. */
#include "tensor/tensor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "trace/trace.h"

/* --- printing ------------------------------------------------------- */

/* The layout of PyTorch's tensor printing (torch/_tensor_str.py), with its
 * defaults. */
#define PRINT_THRESHOLD 1000 /* more elements than this: summarise */
#define PRINT_EDGE 3         /* elements kept at each end when summarising */
#define PRINT_LINEWIDTH 80

typedef struct {
    FILE *f;
    const tensor *t;
    int summarise;
    int width;    /* every number padded to this */
    int decimals; /* digits after the point */
    int integral; /* all numbers whole: print "3." */
    int sci;      /* exponent notation */
} printer;

static int format_number(const printer *p, double v, char *buf, size_t n)
{
    if (v == 0)
        v = 0; /* no "-0" */
    if (isnan(v))
        return snprintf(buf, n, "nan");
    if (isinf(v))
        return snprintf(buf, n, v > 0 ? "inf" : "-inf");
    if (p->integral)
        return snprintf(buf, n, "%.0f.", v);
    if (p->sci)
        return snprintf(buf, n, "%.*e", p->decimals, v);
    return snprintf(buf, n, "%.*f", p->decimals, v);
}

/* When summarising, a dimension longer than 2 * PRINT_EDGE shows
 * PRINT_EDGE indices at each end and "..." in place of index PRINT_EDGE. */
static int dots_at(const printer *p, size_t d, size_t i)
{
    return p->summarise && p->t->shape[d] > 2 * PRINT_EDGE && i == PRINT_EDGE;
}

/* The index of dimension d printed after i: i + 1, or after the "..." the
 * first of the last PRINT_EDGE. */
static size_t next_index(const printer *p, size_t d, size_t i)
{
    return dots_at(p, d, i) ? p->t->shape[d] - PRINT_EDGE : i + 1;
}

/* The last dimension, its '[' at column `indent`: as many numbers to a line
 * as fit in PRINT_LINEWIDTH, each counted with the ", " after it; "..."
 * counts as one of them.  Continuation lines start one past the '['. */
static void print_row(const printer *p, size_t *idx, int indent)
{
    size_t d = p->t->ndim - 1;
    int per_line = (PRINT_LINEWIDTH - indent) / (p->width + 2);
    if (per_line < 1)
        per_line = 1;
    int on_line = 0;
    fputc('[', p->f);
    for (size_t i = 0; i < p->t->shape[d]; i = next_index(p, d, i)) {
        int dots = dots_at(p, d, i);
        if (on_line == per_line) {
            fprintf(p->f, ",\n%*s", indent + 1, "");
            on_line = 0;
        } else if (on_line > 0) {
            fputs(", ", p->f);
        }
        if (dots) {
            fputs(" ...", p->f);
        } else {
            char num[64];
            idx[d] = i;
            format_number(p, *tensor_at(p->t, idx), num, sizeof num);
            fprintf(p->f, "%*s", p->width, num);
        }
        on_line++;
    }
    idx[d] = 0;
    fputc(']', p->f);
}

/* Dimension d and those inside it, its '[' at column `indent`.  The blocks
 * inside are separated by a comma, one newline per dimension they have
 * (so a blank line between 2-D blocks, two between 3-D ones) and the
 * indent one past the '['. */
static void print_block(const printer *p, size_t d, size_t *idx, int indent)
{
    if (d + 1 == p->t->ndim) {
        print_row(p, idx, indent);
        return;
    }
    int first = 1;
    fputc('[', p->f);
    for (size_t i = 0; i < p->t->shape[d]; i = next_index(p, d, i)) {
        int dots = dots_at(p, d, i);
        if (!first) {
            fputc(',', p->f);
            for (size_t k = d + 1; k < p->t->ndim; k++)
                fputc('\n', p->f);
            fprintf(p->f, "%*s", indent + 1, "");
        }
        first = 0;
        if (dots) {
            fputs("...", p->f);
        } else {
            idx[d] = i;
            print_block(p, d + 1, idx, indent + 1);
        }
    }
    idx[d] = 0;
    fputc(']', p->f);
}

/* The next printed index after idx in row-major order (skipping what
 * "..." stands for); 0 after the last. */
static int next_shown(const printer *p, size_t *idx)
{
    for (size_t d = p->t->ndim; d-- > 0;) {
        idx[d] = next_index(p, d, idx[d]);
        if (dots_at(p, d, idx[d]))
            idx[d] = next_index(p, d, idx[d]);
        if (idx[d] < p->t->shape[d])
            return 1;
        idx[d] = 0;
    }
    return 0;
}

void tensor_print(FILE *f, const tensor *t, int decimals)
{
    if (tensor_is_meta(t)) { /* as PyTorch prints a meta tensor */
        char s[TRACE_SHAPE_MAX];
        fprintf(f, "tensor(..., size=%s, device='meta')\n",
                tensor_shape_str(t, s, sizeof s));
        return;
    }
    printer p = {.f = f, .t = t, .decimals = decimals < 0 ? 0 : decimals};
    p.summarise = tensor_numel(t) > PRINT_THRESHOLD;
    p.integral = 1;
    double maxabs = 0, minabs = INFINITY;
    size_t idx[TENSOR_MAX_DIMS] = {0};
    /* pass 1: the number format, from the nonzero finite numbers shown */
    do {
        double v = *tensor_at(t, idx);
        if (isfinite(v) && v != 0) {
            if (v != floor(v))
                p.integral = 0;
            maxabs = fmax(maxabs, fabs(v));
            minabs = fmin(minabs, fabs(v));
        }
    } while (next_shown(&p, idx));
    /* exponents when fixed notation would hide the small numbers or
     * spell out huge ones: the rule NumPy and PyTorch share */
    if (maxabs > 0)
        p.sci = maxabs >= 1e8 || maxabs / minabs > 1000 ||
                (!p.integral && minabs < 1e-4);
    if (p.sci) {
        /* 1000 and 1001 must not both print as 1e+03 */
        p.integral = 0;
        if (p.decimals < 4)
            p.decimals = 4;
    }
    /* pass 2: the widest number shown sets the column width */
    do {
        char num[64];
        int w = format_number(&p, *tensor_at(t, idx), num, sizeof num);
        if (w > p.width)
            p.width = w;
    } while (next_shown(&p, idx));
    fputs("tensor(", f);
    print_block(&p, 0, idx, (int)strlen("tensor("));
    fputs(")\n", f);
}
