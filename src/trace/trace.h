/* trace.h: the shape trace as data, one record per step.
 *
 * Every operation that changes a shape (reshape, permute, contiguous, a
 * Linear layer, a batched product ...) emits one record: what the step
 * was, with its arguments; whether it moved numbers; the shapes that went
 * in and the shape that came out, with the lesson's names for their
 * dimensions; and how deep it sits inside larger steps.  The library emits
 * records and knows nothing of who reads them.  Observers read them:
 *
 *   - the text printer (trace_to), one line per record:
 *
 *         <indent><op> <kind>  <inputs> -> <output>  <symbolic>
 *
 *         reshape(1, 2, 8, -1)     view  (1, 2, 16) -> (1, 2, 8, 2)          (B, n, h, d_model/h)
 *
 *     The op takes TRACE_OP_WIDTH columns (indent included) and one
 *     space, the kind 4 and two spaces, the shapes TRACE_SHAPES_WIDTH and
 *     two spaces; a longer entry pushes the rest right, and trailing
 *     blanks are trimmed.  The symbolic column gives the output shape in
 *     the lesson's names (for a step with no output yet, its one input's).
 *   - JSON lines (trace_to_json), one object per record, shapes as arrays;
 *   - a log (trace_log_start) that keeps every record in memory, for the
 *     quiz, for tests, and for the Graphviz dataflow (trace_write_dot).
 *
 * kind is `view` (no number moved: only shape and strides changed), `copy`
 * (the same numbers written to a new buffer in a new order) or `new` (new
 * numbers computed, e.g. by a matrix product).  A step made of steps
 * (tensor_trace_begin ... trace_end) is a `step` record, and the records emitted
 * until its trace_end sit one level deeper.  Shapes print as Python
 * tuples: (1, 2, 16), and a 1-D shape as (8,).
 *
 * The trace knows plain shapes only: the layer above turns a step on
 * tensors into a record (tensor/tensor_trace.h) in functions of its own,
 * its sink, and hands the record to trace_deliver.  That layer gives the
 * trace its sink once (trace_set_sink); trace_sink_now points at it while
 * some observer listens and no quiet section is open, and is NULL
 * otherwise.  An emitter tests that one pointer and calls through it, so
 * no record is built while nobody listens, and a reader following the
 * emitter's calls stops at the pointer, as at the observers.
 * trace_quiet_begin and trace_quiet_end bracket code that runs steps
 * without showing them; QUIET does the same for a block.
 * The state is per thread, as the error state is (base/error.h): a thread
 * sees the records of the steps it runs, for the observers it attached
 * (the fast paths emit their records outside their parallel loops), and
 * its own trace_sink_now and depth.
 *
 * Compiling everything with -DMHA_NO_TRACE takes tracing out altogether:
 * the emitting calls are empty inline functions and compile to nothing.  `make bench` and `make
 * trace-cost` build the library that way too, to show that tracing
 * compiled in but switched off costs nothing measurable.
 */
#ifndef MHA_TRACE_H
#define MHA_TRACE_H

#include <stddef.h>
#include <stdio.h>

/* The most dimensions a shape has, and the longest name of one
 * (tensor/tensor.h's tensors fit them). */
#define TRACE_MAX_DIMS 4
#define TRACE_NAME_MAX 24


/* Widths of the op and shapes columns; longer entries push the rest right. */
#define TRACE_OP_WIDTH 24
#define TRACE_SHAPES_WIDTH 34

/* Room for any shape tuple of up to 4 dims, or two joined by " -> ". */
#define TRACE_SHAPE_MAX 160

#define TRACE_OP_MAX 192 /* an op with its arguments, or a note */
#define TRACE_LABEL_MAX 16
#define TRACE_MAX_INPUTS 4

typedef enum trace_kind {
    TRACE_VIEW, /* no number moved */
    TRACE_COPY, /* the same numbers in a new buffer, in a new order */
    TRACE_NEW,  /* new numbers computed */
    TRACE_STEP, /* a step made of steps: the records up to its end nest in it */
    TRACE_NOTE  /* free text, in op */
} trace_kind;

/* How the text printer joins the inputs: "a, b", "a @ b", "a + b". */
typedef enum trace_join { TRACE_LIST, TRACE_MATMUL, TRACE_SUM } trace_join;

/* A shape as the record keeps it: sizes and the lesson's names ("" when a
 * dimension has none), and which tensor it was (an id: tensor/tensor.h's). */
typedef struct trace_shape {
    size_t ndim;
    size_t dims[TRACE_MAX_DIMS];
    char names[TRACE_MAX_DIMS][TRACE_NAME_MAX];
    unsigned long id;
} trace_shape;

typedef struct trace_operand {
    trace_shape shape;
    char label[TRACE_LABEL_MAX]; /* "q" prints "q (2, 4, 100)"; "" for none */
    int transposed;              /* prints (10, 6, 20)^T */
    int side; /* read, but left out of the text line (the op text may name
                 it): a mask's valid_lens.  JSON and the dataflow show it. */
} trace_operand;

typedef struct trace_record {
    size_t seq;              /* 0, 1, 2 ... in the order emitted */
    int depth;               /* 0 at the top, +1 inside each open step */
    trace_kind kind;
    char op[TRACE_OP_MAX];   /* "reshape(2, 4, 5, -1)"; a note's text */
    trace_join join;
    size_t n_inputs;
    trace_operand inputs[TRACE_MAX_INPUTS];
    int has_output;
    trace_shape output;
} trace_record;

/* --- emitting -------------------------------------------------------- */

#ifndef MHA_NO_TRACE
/* The functions that build records for the emitters of the layer above
 * (tensor/tensor_trace.c defines the struct); the trace only points at
 * it. */
typedef struct trace_sink trace_sink;
/* The sink, given once per process by the layer that builds records
 * (tensor_trace.c does as the program loads). */
void trace_set_sink(const trace_sink *s);
/* This thread's way to the sink: the sink while some observer listens
 * and no quiet scope is open, NULL otherwise.  Set here, on attach,
 * detach and quiet scopes; the emitters only read it. */
extern _Thread_local const trace_sink *trace_sink_now;
/* Deliver r to every observer (when one listens and no quiet scope is
 * open), with its seq and depth set here.  The layer that knows tensors
 * fills the rest (tensor/tensor_trace.h). */
void trace_deliver(trace_record *r);
/* The records delivered from now on sit one level deeper, until the
 * matching trace_end(): the inside of a step made of steps. */
void trace_enter(void);
void trace_end(void);
/* Steps run between these are not shown (they nest). */
void trace_quiet_begin(void);
void trace_quiet_end(void);
/* 1 when some observer is listening (and no quiet scope is open): for
 * programs that print things of their own beside the trace (the emitters
 * test trace_sink_now). */
int trace_on(void);
#else /* compiled out: empty functions the optimizer removes whole */
static inline void trace_deliver(trace_record *r) { (void)r; }
static inline void trace_enter(void) {}
static inline void trace_end(void) {}
static inline void trace_quiet_begin(void) {}
static inline void trace_quiet_end(void) {}
static inline int trace_on(void) { return 0; }
#endif

/* One line at the top of a block keeps the steps run in it out of the
 * trace until the block is left, however it is left: falling off its end,
 * a return, or a STEP's jump to done: (the compiler's cleanup attribute
 * calls trace_quiet_end, as SCOPE's calls trace_end), so the steps inside
 * are STEPs like any others:
 *
 *     {
 *         QUIET; // the copies are one record, emitted below
 *         STEP(tensor_narrow(*out, 2, 0, da, &left));
 *         STEP(tensor_copy_into(left, a));
 *     }
 *
 * Quiet blocks nest.  done: stays outside the block: a goto may leave the
 * scope of QUIET's variable but not jump into it past the line (clang
 * refuses that jump; gcc takes it and ends a quiet block never begun).
 * Compiled out (MHA_NO_TRACE), it does nothing. */
#define QUIET                                                                 \
    __attribute__((cleanup(trace_quiet_close), unused)) int trace_quiet_ =    \
        trace_quiet_open()
/* What QUIET calls: trace_quiet_begin, returning 1; and trace_quiet_end. */
static inline int trace_quiet_open(void)
{
    trace_quiet_begin();
    return 1;
}
static inline void trace_quiet_close(int *open)
{
    (void)open;
    trace_quiet_end();
}

/* --- observing ------------------------------------------------------ */

typedef struct trace_observer {
    void (*record)(void *ctx, const trace_record *r);
    void *ctx;
    struct trace_observer *next; /* the trace's own list; leave it alone */
} trace_observer;

/* Listen to every record from now on / stop.  Several may listen; each
 * sees the records in order.  The observer must live until detached. */
void trace_attach(trace_observer *o);
void trace_detach(trace_observer *o);

/* The text printer on f (NULL: switch it off).  One per thread. */
void trace_to(FILE *f);
/* JSON lines on f (NULL: switch it off).  One per thread. */
void trace_to_json(FILE *f);

/* One record as the text printer's line (without the newline) into buf;
 * returns buf. */
char *trace_format_text(const trace_record *r, char *buf, size_t n);
/* One record as one JSON object (without the newline) on f. */
void trace_print_json(FILE *f, const trace_record *r);
/* s as a JSON string on f: quotes, backslashes and control characters
 * escaped, and < written \u003c, so that JSON inside an HTML <script>
 * element (mha view's pages) cannot close it. */
void trace_json_string(FILE *f, const char *s);

/* Every record in memory, in order. */
typedef struct trace_log {
    trace_record *records;
    size_t count, capacity;
    int failed; /* 1 when a record was lost for want of memory */
    trace_observer observer;
} trace_log;

/* Start keeping records in log (zeroed here) / stop; free its memory. */
void trace_log_start(trace_log *log);
void trace_log_stop(trace_log *log);
void trace_log_free(trace_log *log);

/* The dataflow graph of the steps at depth `depth` of log (1 shows a
 * module's projections, splits, attention, join and output layer) in
 * Graphviz's dot language: inputs as ellipses (one per tensor: "q = k = v"
 * for self-attention), steps as boxes named s0, s1 ... in record order,
 * the last step's output as "output"; each edge goes from the step that
 * made a tensor (matched by id) to each step that reads it, labelled with
 * its shape and whether it was a view, a copy or new numbers.  A step
 * made of steps reads what its inner steps read, makes what its last
 * child makes, and is new if any inner step is, else copy if any copies.
 * trace_dot.c draws an example. */
void trace_write_dot(FILE *f, const trace_log *log, int depth);

/* Format a shape as a Python tuple into buf (size n, >= TRACE_SHAPE_MAX is
 * always enough) and return buf: (1, 2, 16), (8,). */
char *trace_dims_str(char *buf, size_t n, size_t ndim, const size_t *shape);

/* Room for any number as trace_number_str writes it. */
#define TRACE_NUMBER_MAX 32

/* A number as the trace, its descriptions and messages print it: exactly,
 * as the shortest of %.15g, %.16g and %.17g that reads back as v, so 0.1
 * stays "0.1" and 1.0000000000000002 is not "1" (-0 is "0").  Into buf
 * (size n, >= TRACE_NUMBER_MAX); returns buf. */
char *trace_number_str(char *buf, size_t n, double v);
/* A record's shape as a tuple, and in the lesson's names ("" when it has
 * none: unnamed dimensions of a named shape print their size). */
char *trace_shape_str(const trace_shape *s, char *buf, size_t n);
char *trace_sym_str(const trace_shape *s, char *buf, size_t n);
/* "view", "copy", "new", "step" or "note". */
const char *trace_kind_name(trace_kind kind);
/* What stands between a record's inputs in a line: ", " (a list), " @ "
 * (a product) or " + " (a sum). */
const char *trace_join_text(trace_join join);

#endif
