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

#endif
//<
