/* tensor.h: a dense tensor of doubles with up to 4 dimensions.
 *
 * A tensor is a window on a buffer of doubles: `data` points at element
 * (0, 0, ...), `shape[d]` says how many indices dimension d has, and
 * `strides[d]` how many doubles to step to move one index along d.  Element
 * (i0, i1, i2) of a 3-D tensor lives at
 *
 *     data[i0 * strides[0] + i1 * strides[1] + i2 * strides[2]]
 *
 * A freshly allocated tensor is contiguous (row-major, C order): the last
 * dimension has stride 1 and each earlier stride is the product of the later
 * sizes, so (1, 2, 16) has strides (32, 16, 1).
 *
 * Views and copies, following PyTorch:
 *   - tensor_permute never moves data: it reorders shape and strides.
 *   - tensor_reshape returns a view when the strides allow the new shape
 *     to be read from the same buffer, and a contiguous copy otherwise.
 *   - tensor_contiguous always copies into a fresh row-major buffer.
 *
 * Ownership, the whole of it:
 *   - Every `tensor *` a tensor_ function hands out through an out-parameter
 *     is yours and you free it with tensor_free() (NULL is fine).
 *   - Views share the buffer of the tensor they came from.  The buffer is
 *     reference-counted: it lives until the last tensor using it is freed,
 *     so a view and its base can be freed in any order.
 *   - Writing through a view writes the base's numbers (that is what a view
 *     is).
 *   - On failure the out-parameter is set to NULL and nothing is leaked.
 *
 * Dimension names: a tensor may carry a symbolic name per dimension ("B",
 * "n", "d_model/h") for the shape trace.  permute reorders them, reshape
 * joins merged dimensions with '*' ("B*h") and splits such a product back;
 * where that does not settle a name the caller passes the names.  Sizes
 * cannot say where a dimension of size 1 between two others belongs
 * ((2, 1, 1, 2) -> (2, 1, 2) merges the first 1 or the second); reshape
 * then leaves the dimensions in doubt unnamed rather than guess.
 *
 * Sizes: 1 to TENSOR_MAX_DIMS dimensions, each of size >= 1.
 */
#ifndef MHA_TENSOR_H
#define MHA_TENSOR_H

#include <stddef.h>
#include <stdio.h>
#include <gsl/gsl_rng.h>

#define TENSOR_MAX_DIMS 4
#define TENSOR_NAME_MAX 24

typedef struct tensor_buffer tensor_buffer; /* the shared, counted storage */

typedef struct tensor {
    double *data;                    /* element (0, ..., 0) */
    size_t ndim;                     /* 1 .. TENSOR_MAX_DIMS */
    size_t shape[TENSOR_MAX_DIMS];   /* entries past ndim are 0 */
    size_t strides[TENSOR_MAX_DIMS]; /* in elements, not bytes */
    char names[TENSOR_MAX_DIMS][TENSOR_NAME_MAX]; /* "" when unnamed */
    tensor_buffer *buffer;
    int borrowed;     /* 1: a header sharing another tensor's numbers with
                         no count of its own (tensor_named, tensor_header):
                         tensor_free refuses it */
    unsigned long id; /* which tensor this is, for the trace: 1, 2, 3 ...
                         in the order made (0 for a header of your own) */
} tensor;

/* Shape literals: tensor_alloc(SHAPE(1, 2, 16), &x) passes the count and
 * the sizes.  A reshape's target is DIMS or SIZES, and may hold one -1:
 *   - DIMS(n, h, -1) passes the count, the sizes and their own text,
 *     "n, h, -1", as labels: a variable named as the lesson names it
 *     names its dimension in the trace (tensor_reshape says which);
 *     tensor_reshape(x, DIMS(n, h, -1), &split);
 *   - SIZES(8, 2, 2) passes the count and the sizes, and the call then
 *     takes the names itself: tensor_reshape(x, SIZES(8, 2, 2),
 *     "B*h, n, d_model/h", &y), or NULL to derive them from x's. */
#define SHAPE(...) (sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t)), \
                   ((const size_t[]){__VA_ARGS__})
#define SIZES(...) (sizeof((long[]){__VA_ARGS__}) / sizeof(long)), \
                   ((const long[]){__VA_ARGS__})
#define DIMS(...) SIZES(__VA_ARGS__), TENSOR_LABELS #__VA_ARGS__
/* Names from the code: NAMES(B, Lq, d_q) is the text "B, Lq, d_q", and
 * compiles only where B, Lq and d_q are values in scope, so the trace
 * calls a dimension what the code calls its size:
 *     size_t B = q->shape[0], Lq = q->shape[1], d_q = q->shape[2];
 *     tensor q_in = tensor_named(q, NAMES(B, Lq, d_q));
 * (for tensor_named, tensor_set_names and a SIZES reshape's names). */
#define NAMES(...) ((void)sizeof((double[]){__VA_ARGS__}), #__VA_ARGS__)
/* The mark DIMS puts before its labels, telling them from names. */
#define TENSOR_LABELS "\x1f"
/* A permutation: tensor_permute(x, AXES(1, 0), &y). */
#define AXES(...) SHAPE(__VA_ARGS__)

/* Element access: *TENSOR_AT(x, 0, 1, 5) is x[0, 1, 5]. */
#define TENSOR_AT(t, ...) \
    tensor_at((t), (const size_t[TENSOR_MAX_DIMS]){__VA_ARGS__})

/* --- creating and freeing ------------------------------------------- */

/* A new contiguous tensor of the given shape, filled with zeros. */
int tensor_alloc(size_t ndim, const size_t *shape, tensor **out);
//> handout
/* The same with its numbers not set, as torch.empty: for a tensor whose
 * every number is written before any is read (a file's numbers, a
 * product's output), so that no thread zeroes it first. */
int tensor_alloc_empty(size_t ndim, const size_t *shape, tensor **out);
//<

/* A shape-only ("meta") tensor, as PyTorch's device="meta": a shape and
 * names with no numbers behind them (data is NULL).  Every shape step of
 * the library accepts one and returns one, tracing as a real run would,
 * so a trace of any size costs nothing; numbers are never read. */
int tensor_alloc_meta(size_t ndim, const size_t *shape, tensor **out);
/* 1 when t has no numbers (tensor_alloc_meta and its views and results). */
static inline int tensor_is_meta(const tensor *t) { return t->data == NULL; }

/* A new contiguous tensor of x's shape and dimension names, filled with
 * zeros (a gradient of x, a result shaped like it). */
int tensor_alloc_like(const tensor *x, tensor **out);

/* A new contiguous tensor holding a copy of `values` (row-major order,
 * product-of-shape many). */
int tensor_from_array(size_t ndim, const size_t *shape, const double *values,
                      tensor **out);

/* A new contiguous tensor with x's shape, names and numbers. */
int tensor_contiguous(const tensor *x, tensor **out);

/* Release t's reference to its buffer and t itself.  NULL is fine.  A
 * borrowed header (t->borrowed) is refused: nothing is freed, and the
 * error names the tensor (mha_last_error). */
void tensor_free(tensor *t);

/* tensor_free on each of the n tensors of list (NULL ones are fine);
 * TENSORS_FREE(a, b, c) frees a function's tensors in one line. */
void tensor_free_each(size_t n, tensor *const *list);
#define TENSORS_FREE(...)                                                     \
    tensor_free_each(sizeof((tensor *[]){__VA_ARGS__}) / sizeof(tensor *),    \
                     (tensor *const[]){__VA_ARGS__})

/* --- reading the layout --------------------------------------------- */

size_t tensor_numel(const tensor *t);
int tensor_is_contiguous(const tensor *t);
/* 1 when a and b have the same ndim and sizes. */
int tensor_same_shape(const tensor *a, const tensor *b);
/* 1 when a and b read the same buffer (one is a view of the other, or
 * both are views of a third). */
int tensor_shares_buffer(const tensor *a, const tensor *b);

/* Pointer to the element at idx[0..ndim-1] (entries past ndim ignored).
 * Indices are not checked: this is the inner-loop accessor. */
static inline double *tensor_at(const tensor *t, const size_t *idx)
{
    size_t off = 0;
    for (size_t d = 0; d < t->ndim; d++)
        off += idx[d] * t->strides[d];
    return t->data + off;
}

/* Like tensor_at but checked: GSL_EINVAL with a message naming the index
 * and the shape when an index is out of range. */
int tensor_get(const tensor *t, const size_t *idx, double *value);
int tensor_set(tensor *t, const size_t *idx, double value);

//> 08
/* GSL_SUCCESS when every element of t is finite; otherwise GSL_EDOM with
 * the message "<who>: <what>[0, 2, 5] = nan; <what> must be finite
 * (<what> (2, 4, 100))" naming the first bad element in row-major order. */
int tensor_check_finite(const tensor *t, const char *who, const char *what);

/* The same check on a result computed from finite numbers, where a NaN or
 * an infinity means the arithmetic overflowed: GSL_ERANGE with "<who>:
 * the <stage> overflowed: <what>[1, 3, 0] = inf from finite inputs
 * (<what> (2, 4, 8))".  A tensor of shapes alone passes. */
int tensor_check_result(const tensor *t, const char *who, const char *stage,
                        const char *what);
//<

/* A copy of x's header with names set from `names` when x has none (x's
 * own names win), for the trace of a module's inputs.  It shares x's
 * buffer WITHOUT a count of its own (it is marked borrowed): keep it on
 * the stack and use it while x lives; tensor_free refuses it. */
tensor tensor_named(const tensor *x, const char *names);

/* A header with shape and no numbers, for a step's trace to name a shape
 * that no tensor has (a product's rows read as one matrix, a result to
 * come).  Borrowed, like tensor_named's: keep it on the stack. */
tensor tensor_header(size_t ndim, const size_t *shape);

/* "(1, 2, 16)" into buf and return buf. */
char *tensor_shape_str(const tensor *t, char *buf, size_t n);
/* "(B, n, d_model)" into buf (unnamed dims print their size), or "" when
 * the tensor has no names at all; returns buf. */
char *tensor_sym_str(const tensor *t, char *buf, size_t n);

/* Name the dimensions: names is a comma-separated list with one entry per
 * dimension, e.g. "B, n, d_model"; NULL or "" clears all names. */
int tensor_set_names(tensor *t, const char *names);

/* One name of such a list, from text up to its first ',' or its end,
 * into out without its spaces ("h * p" is h*p: NAMES keeps the code's
 * spacing), cut at TENSOR_NAME_MAX - 1 characters; returns where it
 * stopped (the ',' or the end). */
const char *tensor_name_copy(char out[TENSOR_NAME_MAX], const char *text);

/* --- shape operations ----------------------------------------------- */

/* View or copy of x with the given shape (PyTorch's reshape).  At most one
 * entry may be -1: it is inferred from the others.  names (see
 * tensor_set_names) may be NULL to derive names from x's.  Labels (DIMS)
 * name what x's names do not settle, when x has names: a dimension split
 * off a named one takes its label (F split into DIMS(h, p) gives h and
 * F/h), and the rest keep what x's names give; a label that is a number
 * or has a parenthesis names nothing.  "B * h" is written "B*h". */
int tensor_reshape(const tensor *x, size_t ndim, const long *shape,
                   const char *names, tensor **out);

/* Like tensor_reshape but never copies: GSL_EINVAL when the strides do not
 * allow a view (PyTorch's view). */
int tensor_view(const tensor *x, size_t ndim, const long *shape,
                const char *names, tensor **out);

/* View of x with its dimensions reordered: output dimension d is input
 * dimension perm[d].  perm must be a permutation of 0 .. x->ndim-1. */
int tensor_permute(const tensor *x, size_t ndim, const size_t *perm,
                   tensor **out);

/* View of indices [start, start + length) of dimension dim of x (PyTorch's
 * narrow): rows 20..39 of a (100, 100) weight are narrow(w, 0, 20, 20). */
int tensor_narrow(const tensor *x, size_t dim, size_t start, size_t length,
                  tensor **out);

/* View of x with size-1 dimensions repeated (PyTorch's expand): x's
 * dimensions are matched with the last x->ndim entries of shape; an entry
 * of -1 or x's own size keeps that dimension, a size-1 dimension may take
 * any size >= 1 and gets stride 0, so every index along it reads the same
 * numbers; leading entries beyond x->ndim are new dimensions, stride 0
 * too.  Never a copy (the trace says view), so writing through it writes
 * one number many times: treat it as read-only.  names (see
 * tensor_set_names) may be NULL to keep x's (new dimensions unnamed);
 * DIMS's labels keep x's names and, as tensor_reshape's, name the
 * dimensions x's leave unnamed when x has names: (B, 1) expanded to
 * DIMS(B, h) is (B, h); an unnamed x stays unnamed.
 * Grouped-query attention shares one key head among h/G query heads this
 * way: (B*G, 1, Lk, p) -> (B*G, h/G, Lk, p).  Reshaping the result to
 * (B*h, Lk, p) cannot be a view and copies: that copy is
 * repeat_interleave.  GSL_EINVAL for a size that is neither -1, x's size
 * nor an expansion of a size-1 dimension, or fewer entries than x->ndim. */
int tensor_expand(const tensor *x, size_t ndim, const long *shape,
                  const char *names, tensor **out);

/* --- filling (logical row-major order, whatever the strides) -------- */

void tensor_fill(tensor *t, double value);
/* start, start + step, start + 2 step, ... in row-major order */
void tensor_fill_arange(tensor *t, double start, double step);
/* independent draws from U[lo, hi) or N(mean, sd^2) using r */
void tensor_fill_uniform(tensor *t, gsl_rng *r, double lo, double hi);
void tensor_fill_normal(tensor *t, gsl_rng *r, double mean, double sd);
/* Copy src's numbers into dst (same shape, any strides). */
int tensor_copy_into(tensor *dst, const tensor *src);
//> handout
/* dst lets go of its numbers and reads src's from now on, with no copy
 * (PyTorch's param.data = src): same shape, both not borrowed; dst takes
 * src's strides and a count of its buffer, so either may be freed first.
 * A module's weights take a file's numbers this way. */
int tensor_share_numbers(tensor *dst, tensor *src);

/* A new contiguous tensor whose numbers are those at map + offset, inside
 * a mapping of map_bytes bytes made by mmap: the tensor owns the mapping,
 * which tensor_free unmaps with the last reference to it.  offset must be
 * a multiple of sizeof(double) and the numbers must fit in the mapping
 * (GSL_EINVAL otherwise, the mapping left to the caller).  A read-only
 * mapping makes read-only numbers: for inputs that are only read.  path
 * names the mapped file: cut short while the tensor lives, it ends the
 * program with one line naming it and status 2 (cleanup_add_mapping). */
int tensor_from_mapping(size_t ndim, const size_t *shape, void *map,
                        size_t map_bytes, size_t offset, const char *path,
                        tensor **out);
//<

/* --- printing ------------------------------------------------------- */

/* Print as PyTorch prints a tensor:
 *
 *     tensor([[0., 1., 2.],
 *             [3., 4., 5.]])
 *
 * one bracket level per dimension, a shared number format and width, rows
 * on their own lines (a blank line between 2-D blocks), rows longer than
 * 80 columns wrapped, and, when the tensor has more than 1000 elements,
 * "..." for all but 3 indices at each end of the longer dimensions.
 * The format is chosen from the nonzero finite numbers shown: "3." when
 * all are whole, `decimals` digits after the point otherwise (4 is a good
 * default), and exponents (1.0000e+08) when the largest magnitude is
 * 1e8 or more, more than 1000 times the smallest, or, for fractions, the
 * smallest is below 1e-4, with at least 4 digits after the point there so
 * that 1000 and 1001 stay apart.  nan, inf and -inf print as such. */
void tensor_print(FILE *f, const tensor *t, int decimals);

#endif
