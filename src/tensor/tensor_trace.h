/* tensor_trace.h: tensors' steps as trace records (trace/trace.h).
 *
 * The trace keeps plain shapes; this is where a step on tensors becomes a
 * record: each tensor's sizes, names and id are copied into it, and the
 * op text is formatted, only when someone listens.  The op text's format
 * is printf's (%s, %d, %zu, %ld, %g ...), except that %g with no
 * precision prints its number exactly (trace_number_str: "dropout(p=%g)"
 * shows the very p; "%.6g" rounds, for a number shown only to be read),
 * plus three of its own, so that the library never formats text: %T the
 * shape of a `const tensor *` ("valid_lens %T"), %D a size_t count and a
 * `const long *` ("reshape%D": reshape(2, 4, -1)), %P a size_t count and
 * a `const size_t *` ("permute%P").
 *
 * Each emitter below tests one pointer, the trace's trace_sink_now (NULL
 * while nobody listens on this thread), and only when it is set calls
 * through it to the sink: tensor_trace.c's functions that build the
 * record and deliver it.  A step made of steps opens with
 * tensor_trace_begin and closes with the trace's trace_end, listened to
 * or not; the records in between sit one level deeper.  Lesson code
 * calls none of these: one SCOPE or RECORD line at a function's top
 * (below) does it.
 * Compiled with -DMHA_NO_TRACE, every emitter is an empty inline function.
 */
#ifndef MHA_TENSOR_TRACE_H
#define MHA_TENSOR_TRACE_H

#include "tensor/tensor.h"
#include "trace/trace.h"

/* An input as a step names it: the tensor, an optional label, whether
 * the step reads it transposed and whether it is a side input (see
 * trace_operand).  Only t is needed: {x} will do.  An input whose t is
 * NULL is left out (an optional input that was not given). */
typedef struct tensor_trace_in {
    const tensor *t;
    const char *label;
    int transposed;
    int side;
} tensor_trace_in;

/* TRACE_INPUTS(TRACE_IN(x), TRACE_NAMED(q, "q"), TRACE_IN_T(k, 1),
 * TRACE_SIDE(lens, "valid_lens")) passes the count and the inputs: a
 * tensor as it is, with a label, read transposed (or not, by the flag),
 * and read on the side, not shown in the text line. */
#define TRACE_IN(x) {(x), NULL, 0, 0}
#define TRACE_NAMED(x, label) {(x), (label), 0, 0}
#define TRACE_IN_T(x, transposed) {(x), NULL, (transposed), 0}
#define TRACE_SIDE(x, label) {(x), (label), 0, 1}
#define TRACE_INPUTS(...) \
    (sizeof((tensor_trace_in[]){__VA_ARGS__}) / sizeof(tensor_trace_in)), \
        ((const tensor_trace_in[]){__VA_ARGS__})
/* The three inputs of an attention module, labelled q, k and v. */
#define TRACE_QKV(q, k, v) \
    TRACE_INPUTS(TRACE_NAMED(q, "q"), TRACE_NAMED(k, "k"), TRACE_NAMED(v, "v"))
/* The same, and valid_lens read on the side (when it is not NULL). */
#define TRACE_QKV_LENS(q, k, v, lens)                                         \
    TRACE_INPUTS(TRACE_NAMED(q, "q"), TRACE_NAMED(k, "k"), TRACE_NAMED(v, "v"), \
                 TRACE_SIDE(lens, "valid_lens"))

/* One line at the top of a function gives its record; the function's
 * return closes it (the compiler's cleanup attribute), however it
 * returns.  Two kinds of function, two lines:
 *
 *     SCOPE(x, "transpose_qkv(h=%zu)", h);
 *
 * a step made of steps: its record is delivered at once, and the records
 * of the steps inside sit one level deeper until it returns;
 *
 *     RECORD(x, out, "softmax(dim=-1)");
 *
 * a step that computes: its record, new numbers from x, is delivered as
 * it returns, with *out's shape, and not at all when it fails (*out
 * NULL).  The op text and the inputs are taken when the line runs, the
 * output when the function returns.
 *
 * x is the one input the record shows; SCOPE_OF takes TRACE_INPUTS, and
 * RECORD_OF the kind and the join as well:
 *
 *     SCOPE_OF(TRACE_QKV(q, k, v), "multihead(h=%zu)", h);
 *     RECORD_OF(TRACE_NEW, TRACE_SUM, TRACE_INPUTS(TRACE_IN(q), TRACE_IN(k)),
 *               out, "tanh(q + k)"); */
#define SCOPE(x, ...) SCOPE_OF(TRACE_INPUTS(TRACE_IN(x)), __VA_ARGS__)
#define SCOPE_OF(...)                                                         \
    __attribute__((cleanup(tensor_trace_close), unused)) int trace_scope_ = \
        tensor_trace_open(__VA_ARGS__)
#define RECORD(x, out, ...)                                                   \
    RECORD_OF(TRACE_NEW, TRACE_LIST, TRACE_INPUTS(TRACE_IN(x)), out,         \
              __VA_ARGS__)
#define RECORD_OF(...)                                                        \
    __attribute__((cleanup(tensor_trace_deliver), unused))                   \
    tensor_trace_pending trace_record_ = tensor_trace_prepare(__VA_ARGS__)

/* What RECORD keeps until the function returns: where its output will
 * be, and which of this thread's waiting records is its own (-1: none,
 * since nobody listened when the line ran). */
typedef struct tensor_trace_pending {
    tensor *const *out;
    int slot;
} tensor_trace_pending;

#ifndef MHA_NO_TRACE
/* What SCOPE calls: tensor_trace_begin, returning 1; and trace_end. */
int tensor_trace_open(size_t n_inputs, const tensor_trace_in *inputs,
                      const char *fmt, ...);
static inline void tensor_trace_close(int *open)
{
    (void)open;
    trace_end();
}
/* What RECORD calls: the record built now (when someone listens) and
 * kept; then delivered with *out's shape as the function returns, or
 * dropped when *out is NULL. */
tensor_trace_pending tensor_trace_prepare(trace_kind kind, trace_join join,
                                          size_t n_inputs,
                                          const tensor_trace_in *inputs,
                                          tensor *const *out,
                                          const char *fmt, ...);
void tensor_trace_deliver(tensor_trace_pending *p);
/* One step with any inputs: kind TRACE_VIEW, TRACE_COPY or TRACE_NEW; out
 * may be NULL.  fmt and what follows make the op text. */
void tensor_trace_emit(trace_kind kind, trace_join join, const tensor *out,
                       size_t n_inputs, const tensor_trace_in *inputs,
                       const char *fmt, ...);
/* The common case: one input x, one output y. */
void tensor_trace_step(trace_kind kind, const tensor *x, const tensor *y,
                       const char *fmt, ...);
/* A step made of steps: its record (inputs; the output when it is known
 * before the inner steps run, else NULL), then the inner steps one level
 * deeper until the matching trace_end(). */
void tensor_trace_begin(const tensor *out, size_t n_inputs,
                        const tensor_trace_in *inputs, const char *fmt, ...);
/* A free-form note at the current depth; the text printer shows "# text". */
void tensor_trace_note(const char *fmt, ...);
#else /* compiled out: empty functions the optimizer removes whole */
static inline void tensor_trace_emit(trace_kind kind, trace_join join,
                                     const tensor *out, size_t n_inputs,
                                     const tensor_trace_in *inputs,
                                     const char *fmt, ...)
{
    (void)kind, (void)join, (void)out, (void)n_inputs, (void)inputs, (void)fmt;
}
static inline void tensor_trace_step(trace_kind kind, const tensor *x,
                                     const tensor *y, const char *fmt, ...)
{
    (void)kind, (void)x, (void)y, (void)fmt;
}
static inline void tensor_trace_begin(const tensor *out, size_t n_inputs,
                                      const tensor_trace_in *inputs,
                                      const char *fmt, ...)
{
    (void)out, (void)n_inputs, (void)inputs, (void)fmt;
}
static inline void tensor_trace_note(const char *fmt, ...) { (void)fmt; }
static inline int tensor_trace_open(size_t n_inputs,
                                    const tensor_trace_in *inputs,
                                    const char *fmt, ...)
{
    (void)n_inputs, (void)inputs, (void)fmt;
    return 1;
}
static inline void tensor_trace_close(int *open) { (void)open; }
static inline tensor_trace_pending
tensor_trace_prepare(trace_kind kind, trace_join join, size_t n_inputs,
                     const tensor_trace_in *inputs, tensor *const *out,
                     const char *fmt, ...)
{
    (void)kind, (void)join, (void)n_inputs, (void)inputs, (void)fmt;
    return (tensor_trace_pending){out, -1};
}
static inline void tensor_trace_deliver(tensor_trace_pending *p) { (void)p; }
#endif

#endif
