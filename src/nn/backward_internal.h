//> 13
/* backward_internal.h: what the backward passes share (backward.c,
 * multihead_backward.c) and nobody else sees. */
#ifndef MHA_BACKWARD_INTERNAL_H
#define MHA_BACKWARD_INTERNAL_H

#include "tensor/tensor.h"

/* The input gradients a backward pass hands out, each pointer NULL when
 * that gradient is not asked for (and then not computed): all NULL until
 * the pass succeeds. */
void backward_clear_outputs(tensor **dqueries, tensor **dkeys,
                            tensor **dvalues);
/* dq, dk, dv to the caller's pointers when the pass succeeded, freed when
 * it failed.  Returns status. */
int backward_hand_out(int status, tensor *dq, tensor *dk, tensor *dv,
                      tensor **dqueries, tensor **dkeys, tensor **dvalues);

#endif
//<
