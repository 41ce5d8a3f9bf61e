//> 04
/* qkv.h: queries, keys and values, the inputs every attention takes.
 *
 * Shapes, in the lesson's names:
 *   queries (B, Lq, d_q)   keys (B, Lk, d_k)   values (B, Lk, d_v)
 *
 * Whatever an attention does with them (every attention and module of
 * the library takes them), it first asks the same of them:
 *   1. all three are there (not NULL),
 *   2. all three are 3-D, batch first,
 *   3. one batch size B,
 *   4. as many values as keys: Lk,
 *   5. for a dot product only: a query and a key of one length, d_q = d_k.
 * Those rules live here, once.  qkv_find_fault says which rule the inputs
 * break, for a caller that words the message itself (the mha program
 * names its options and files); qkv_check words it for the library, under
 * the caller's name and in the caller's names for the inputs.  What only
 * one caller asks (the layers' feature sizes, valid_lens against Lq and
 * Lk) that caller checks next, with the shapes qkv_check wrote out.
 *
 * And every attention reads a batch of inputs the same way for BLAS: as B
 * matrices, copied once when their layout does not allow it
 * (qkv_as_matrices).
 */
#ifndef MHA_QKV_H
#define MHA_QKV_H

#include <stddef.h>

#include "tensor/tensor.h"

/* --- the rules ------------------------------------------------------ */

/* Which rule the inputs break, the first in the order above. */
typedef enum qkv_fault {
    QKV_FINE = 0,
    QKV_MISSING, /* input `which` is NULL */
    QKV_NOT_3D,  /* input `which` is not 3-D */
    QKV_BATCH,   /* input `which` (keys or values) has another batch size
                    than the queries */
    QKV_LENGTH,  /* the values (`which`) are not as many as the keys */
    QKV_DEPTH,   /* the keys (`which`) have another d than the queries */
} qkv_fault;

/* `which` input: the order of the arguments. */
enum { QKV_QUERIES = 0, QKV_KEYS = 1, QKV_VALUES = 2 };

/* same_d: 1 for a dot product (rule 5), 0 otherwise.  which (may be NULL)
 * gets the input at fault. */
qkv_fault qkv_find_fault(const tensor *queries, const tensor *keys,
                         const tensor *values, int same_d, int *which);

/* --- the messages --------------------------------------------------- */

/* How a caller's messages name its inputs. */
typedef struct qkv_names {
    const char *queries, *keys, *values; /* "queries", or "q" as in the
                                            einops version */
    const char *have;   /* the verb that agrees: "have", or "has" */
    const char *layout; /* the shape rule 2 asks for: "(B, L, features)" */
} qkv_names;

/* The lesson's names: queries, keys, values, "(B, L, features)". */
extern const qkv_names qkv_lesson_names;
/* headmajor.h's seed names its inputs q, k, v, "(B, L, d_model)". */
extern const qkv_names qkv_seed_names;

#define QKV_SHAPES_MAX 640

/* The inputs' shapes as the messages print them, for the caller's own
 * checks after qkv_check. */
typedef struct qkv_shapes {
    /* "queries (2, 1, 2), keys (2, 10, 2), values (2, 10, 4)" and `more` */
    char all[QKV_SHAPES_MAX];
    /* "queries (2, 1, 2), keys (2, 10, 2)": what valid_lens is checked
     * against (softmax_check_valid_lens' context) */
    char qk[QKV_SHAPES_MAX];
} qkv_shapes;

/* The rules above, and on failure one message naming `who` and every
 * shape, in the caller's names:
 *   <who>: queries is NULL                                   (GSL_EINVAL)
 *   <who>: queries, keys and values must be 3-D (B, L, features), got
 *          queries (2, 2), keys (2, 10, 2), values (2, 10, 4)
 *   <who>: batch sizes differ (queries (2, 1, 2), keys (3, 10, 2), ...)
 *   <who>: keys have Lk = 10 but values have Lk = 9 (queries ...)
 *   <who>: queries have d = 3 but keys have d = 2 (queries ...)
 * the last four GSL_EBADLEN.  more (may be NULL) is added to every list
 * of shapes, e.g. ", weights (2, 3, 5), dout (2, 3, 6)".  shapes (may be
 * NULL) gets the shapes, filled once all three inputs are there. */
int qkv_check(const char *who, const qkv_names *names, const tensor *queries,
              const tensor *keys, const tensor *values, int same_d,
              const char *more, qkv_shapes *shapes);

#endif
//<
