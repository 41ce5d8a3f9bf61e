/* trace.h: the shape trace, one line per step.
 *
 * Every operation that changes a shape (reshape, permute, contiguous, a
 * Linear layer, a batched product ...) reports one line here when tracing is
 * on.  A line reads, column by column:
 *
 *     <indent><op with its arguments> <kind>  <input> -> <output>  <symbolic>
 *
 *     reshape(1, 2, 8, -1)     view  (1, 2, 16) -> (1, 2, 8, 2)          (B, n, h, d_model/h)
 *
 * The op takes TRACE_OP_WIDTH columns (indent included) and one space,
 * the kind 4 and two spaces, the shapes TRACE_SHAPES_WIDTH and two spaces;
 * a longer entry pushes the rest right, and trailing blanks are trimmed.
 *
 * kind is `view` (no data moved: only shape and strides changed), `copy`
 * (the same numbers written to a new buffer in a new order) or `new` (new
 * numbers computed, e.g. by a matrix product).  Shapes print as Python
 * tuples: (1, 2, 16), and a 1-D shape as (8,).  The symbolic column gives the
 * output shape in the lesson's names when the tensors carry them.
 *
 * Steps made inside a larger step are indented under it: trace_begin()
 * prints the larger step's header line and indents, trace_end() undoes it.
 *
 * Tracing is off by default and then costs one test of a global pointer per
 * step.  trace_to(stdout) switches it on, trace_to(NULL) off; any FILE* will
 * do (a file, a memory stream in the tests).  The state is global: one trace
 * per process.
 *
 * Compiling everything with -DMHA_NO_TRACE takes tracing out altogether:
 * trace_on() is the constant 0, so every `if (trace_on())` block is dead
 * code, and trace_to() does nothing.  `make bench` builds the library that
 * way too, to show that tracing compiled in but off costs nothing
 * measurable.
 */
#ifndef MHA_TRACE_H
#define MHA_TRACE_H

#include <stddef.h>
#include <stdio.h>

/* Widths of the op and shapes columns; longer entries push the rest right. */
#define TRACE_OP_WIDTH 24
#define TRACE_SHAPES_WIDTH 34

/* Room for any shape tuple of up to 4 dims, or two joined by " -> ". */
#define TRACE_SHAPE_MAX 160

extern FILE *trace_stream; /* where lines go; NULL: tracing is off */

/* Send the trace to f, or switch it off with NULL. */
void trace_to(FILE *f);

#ifdef MHA_NO_TRACE
static inline int trace_on(void) { return 0; }
#else
static inline int trace_on(void) { return trace_stream != NULL; }
#endif

/* One step: op (with its arguments), kind ("view", "copy", "new" or ""),
 * shapes ("(1, 2, 16) -> (1, 2, 8, 2)") and the symbolic shape ("" if
 * none).  Printed at the current indent.  No-op when tracing is off. */
void trace_line(const char *op, const char *kind, const char *shapes,
                const char *sym);

/* A step made of steps: prints its header like trace_line, then indents
 * the lines that follow by two spaces until the matching trace_end(). */
void trace_begin(const char *op, const char *shapes, const char *sym);
void trace_end(void);

/* A free-form note at the current indent, prefixed with "# ". */
void trace_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Format a shape as a Python tuple into buf (size n, >= TRACE_SHAPE_MAX is
 * always enough) and return buf: (1, 2, 16), (8,).  Works whether or not
 * tracing is on. */
char *shape_str(char *buf, size_t n, size_t ndim, const size_t *shape);

#endif
