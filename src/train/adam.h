//> 13
/* adam.h: the Adam optimiser (Kingma and Ba, 2015), as torch.optim.Adam.
 *
 * Gradient descent moves each parameter against its gradient, theta -=
 * lr * g.  One learning rate rarely suits every parameter: some gradients
 * are large, some tiny, some noisy.  Adam keeps two running averages per
 * number and scales each step by them.  For a parameter theta with
 * gradient g, at step t = 1, 2, ...:
 *
 *     m = beta1 m + (1 - beta1) g        the mean of recent gradients
 *     v = beta2 v + (1 - beta2) g^2      the mean of their squares
 *     m_hat = m / (1 - beta1^t)          both start at 0, so early on they
 *     v_hat = v / (1 - beta2^t)          are too small: these undo that
 *     theta -= lr m_hat / (sqrt(v_hat) + eps)
 *
 * m_hat / sqrt(v_hat) is about +-1 when the gradient keeps its sign and
 * smaller when it flips about, so each number moves by about lr at most,
 * whatever the scale of its gradient.  Defaults, PyTorch's: beta1 0.9,
 * beta2 0.999, eps 1e-8, no weight decay.
 *
 * beta1^t and beta2^t are kept by multiplying once per step, not by pow(),
 * so the arithmetic is the same on every machine.
 *
 * Shapes: params[i] and grads[i] have one shape each (any), and must be
 * contiguous; the moments m[i] and v[i] have that shape too.
 *
 * Ownership: the optimiser borrows the parameter and gradient tensors (they
 * must outlive it) and owns the moments; adam_free releases them.
 */
#ifndef MHA_ADAM_H
#define MHA_ADAM_H

#include <stddef.h>

#include "tensor/tensor.h"

typedef struct adam {
    double lr, beta1, beta2, eps; /* may be changed between steps */
    size_t steps;                 /* steps taken so far: t */
    size_t n;                     /* number of parameter tensors */
    tensor **params, **grads;     /* n each, borrowed */
    tensor **m, **v;              /* n each: the moments, owned */
    double beta1_t, beta2_t;      /* beta1^t and beta2^t */
} adam;

/* An optimiser for n parameter tensors and their gradients, learning rate
 * lr, PyTorch's other defaults.  GSL_EINVAL for n = 0, a NULL tensor, a
 * non-contiguous one; GSL_EBADLEN when a gradient's shape is not its
 * parameter's.  Copies the two pointer arrays. */
int adam_init(adam *a, size_t n, tensor *const *params, tensor *const *grads,
              double lr);
void adam_free(adam *a);

/* Set every gradient to 0, before the backward passes of a step. */
void adam_zero_grad(adam *a);

/* One update of every parameter from its gradient.  GSL_EINVAL (and no
 * change) when lr is not positive and finite, a beta is outside [0, 1) or
 * eps is not positive. */
int adam_step(adam *a);

#endif
//<
