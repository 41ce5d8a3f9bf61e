//> full
/* multihead_fast_internal.h: what multihead_fast.c and multihead_naive.c
 * share, not part of the library's interface. */
#ifndef MHA_MULTIHEAD_FAST_INTERNAL_H
#define MHA_MULTIHEAD_FAST_INTERNAL_H

#include "nn/multihead.h"

/* What both paths do first: check the inputs as multihead_forward does
 * (*out set to NULL), and refuse the one thing it does that they do not,
 * dropout in training (GSL_EINVAL, naming who). */
int multihead_fast_start(multihead *m, const tensor *queries,
                         const tensor *keys, const tensor *values,
                         const tensor *valid_lens, const char *who,
                         tensor **out);

/* The buffers kept between calls, by slot (multihead_fast_project.c):
 * the big buffers of a call (Q, K and V, each (B, L, D), or a chunk's,
 * and the scores' scratch). */
enum { SPARE_Q, SPARE_K, SPARE_V, SPARE_SCORES, SPARES };
#define SPARE_MIN_BYTES ((size_t)1 << 20) /* smaller ones are not kept */

/* A contiguous tensor of that shape and unspecified numbers: the spare of
 * that slot when it has that shape, else a new one. */
int fast_spare_take(int slot, size_t ndim, const size_t *shape,
                    tensor **out);

/* t (owned, its views freed) kept as the spare of slot when it is worth
 * keeping, else freed. */
void fast_spare_keep(int slot, tensor *t);

/* The fewest rows a block of a projection has (fast_project). */
#define PROJECT_BLOCK_ROWS 256

/* y = x W^T + b as linear_forward computes it, the rows cut into blocks
 * for the threads; y into `into` or the spare of slot (see the file). */
int fast_project(const linear *l, const tensor *x, int slot, tensor *into,
                 tensor **y, int *finite);

#endif
//<
