//> 13
/* backward.h: the backward pass, the gradients that training needs.
 *
 * The forward pass maps inputs and parameters to an output.  Training
 * needs the other direction: given how the loss L changes with the output,
 * dL/dout, how does it change with each input and each parameter?  The
 * chain rule answers one step at a time, walking the forward steps in
 * reverse order: each function here takes the gradient of its forward's
 * output and returns the gradients of that forward's inputs.
 *
 * Notation: dX means dL/dX and always has the shape of X.
 *
 * Linear, y = x W^T + b, with x read as (rows, in) like the forward does:
 *   x (..., in)   W (out, in)   b (out,)   y and dy (..., out)
 *   dx  = dy W                 (rows, out) @ (out, in)  -> (rows, in)
 *   dW += dy^T x               (out, rows) @ (rows, in) -> (out, in)
 *   db += dy summed over rows  (out,)
 *
 * Masked softmax, w = softmax(scale * s) over the valid keys of each row:
 *   ds_j = scale * w_j * (dw_j - sum_k w_k dw_k)   for a valid key j
 *   ds_j = 0                                        for a masked key j
 * A masked key takes no part in its row's softmax (softmax.h), so its
 * score has no effect on the loss: its gradient is exactly 0 (and a row
 * with valid_len 0, uniform whatever its scores, gets 0 everywhere).
 *
 * Scaled dot-product attention, out = w V, w = softmax(Q K^T / sqrt(d)):
 *   queries (B, Lq, d)  keys (B, Lk, d)  values (B, Lk, dv)
 *   weights w (B, Lq, Lk)  out and dout (B, Lq, dv)
 *   dV = w^T dout       (B, Lk, Lq) @ (B, Lq, dv) -> (B, Lk, dv)
 *   dw = dout V^T       (B, Lq, dv) @ (B, dv, Lk) -> (B, Lq, Lk)
 *   ds = the masked softmax backward of dw, scale 1/sqrt(d)
 *   dQ = ds K           (B, Lq, Lk) @ (B, Lk, d)  -> (B, Lq, d)
 *   dK = ds^T Q         (B, Lk, Lq) @ (B, Lq, d)  -> (B, Lk, d)
 * A key that every query of its example masks gets dK = dV = 0 exactly.
 *
 * Multi-head attention: the module's six steps (multihead.h), backwards:
 *   6. W_o's backward: dconcat (B, Lq, d_model), dW_o, db_o
 *   5. transpose_qkv cuts dconcat into heads, (B*h, Lq, p): a gradient
 *      moves back through a reshuffle by the inverse reshuffle, and
 *      transpose_qkv is the inverse of transpose_output
 *   4. the attention backward on all B*h heads: dQh, dKh, dVh
 *   3. valid_lens are whole numbers: nothing to differentiate
 *   2. transpose_output puts each gradient's heads side by side again,
 *      (B, L, d_model); with rope, dQ and dK are turned back by the
 *      forward's angles (rope_apply_inverse): the rotation is orthogonal,
 *      so its transpose, the backward, is the inverse rotation
 *   1. the W_q, W_k, W_v backwards: dqueries, dkeys, dvalues and the
 *      weights' gradients.  In self-attention queries, keys and values are
 *      one tensor X, and dX is the sum of the three.
 *
 * Grouped-query attention (G < h key-value heads, multihead.h) and
 * causal attention need nothing new.  The forward folded the h/G query
 * heads of a group into the rows of one attention, so step 4 runs
 * backwards on the same folded views, (B*G, (h/G)*Lq, ...): a key-value
 * head's dK and dV come out summed over the h/G query heads that read
 * it, as the gradient of a shared input must.  The causal mask lives in
 * the per-row lengths the forward kept, so masked keys get 0 as above.
 *
 * What the backward needs from the forward: the inputs of each step (x
 * for a Linear layer, Q, K, V and the weights for the attention).  They
 * are passed explicitly, never read from a module: the functions below
 * take them as arguments, and the forward pass saves them for
 * multihead_backward in a multihead_cache when given one
 * (multihead_forward_cached, multihead.h), as PyTorch's autograd saves
 * tensors for backward; no cache, nothing saved.
 *
 * The forward's head mask (h,), optional, multiplies head i's output by
 * mask[i] before W_o.  Its gradient is
 *   dmask_i += sum over b, q, j of dheads[b*h + i, q, j] * heads[b*h + i, q, j].
 *
 * Gradients of parameters accumulate (+=), as PyTorch's .grad does, so
 * several backward passes (a batch in pieces, a layer used twice) add up;
 * zero them before each training step (adam_zero_grad).  A layer's
 * gradient has the layer's shapes, so it is kept in a second struct of the
 * same type: a `linear` (or `multihead`) made by linear_init (or
 * multihead_init) with the same sizes, whose weight holds dW and whose
 * bias holds db.
 *
 * Gradients of inputs are new contiguous tensors, named like the input,
 * that you tensor_free; pass NULL for one you do not need and it is not
 * computed.  Every step traces one line (kind `new`) and every function a
 * header line, like the forward passes.  Errors follow error.h: a status,
 * one message naming the function and the shapes, outputs NULL, nothing
 * leaked.  linear_backward adds nothing when it fails; multihead_backward
 * may have added some of its layers' gradients by then (they come last, one
 * layer after another), so zero grads before trying again.
 *
 * Dropout: the backward differentiates the evaluation-mode forward (no
 * dropout).  A forward that fills a cache refuses to run in training mode
 * with dropout > 0, since the dropped weights are not kept.
 */
#ifndef MHA_BACKWARD_H
#define MHA_BACKWARD_H

#include "nn/linear.h"
#include "nn/multihead.h"
#include "tensor/tensor.h"

/* --- Linear --------------------------------------------------------- */

/* Given x (the forward's input) and dy, set *dx = dy W (dx may be NULL)
 * and add dy^T x to grad->weight and dy's row sums to grad->bias (grad may
 * be NULL; it must have l's shapes, with a bias exactly when l has one).
 * GSL_EBADLEN when dy is not x's shape with out_features last or grad's
 * shapes differ from l's. */
int linear_backward(const linear *l, const tensor *x, const tensor *dy,
                    linear *grad, tensor **dx);

/* --- masked softmax ------------------------------------------------- */

/* weights (B, Lq, Lk) is what masked_softmax_scaled(scores, scale,
 * valid_lens) returned (masked_softmax: scale 1), dweights its gradient;
 * *dscores (B, Lq, Lk) is the gradient of the unscaled scores. */
int masked_softmax_backward(const tensor *weights, const tensor *dweights,
                            double scale, const tensor *valid_lens,
                            tensor **dscores);

/* --- scaled dot-product attention ----------------------------------- */

/* The inputs and valid_lens of a dot_attention_forward in evaluation mode,
 * the weights it gave (its weights output) and dout (B, Lq, dv); any of
 * dqueries, dkeys, dvalues may be NULL. */
int dot_attention_backward(const tensor *queries, const tensor *keys,
                           const tensor *values, const tensor *valid_lens,
                           const tensor *weights, const tensor *dout,
                           tensor **dqueries, tensor **dkeys,
                           tensor **dvalues);

/* --- the multi-head module ------------------------------------------ */

/* Given the cache a forward of m filled (multihead.h) and dout (B, Lq,
 * D_out): add the gradients of all four layers to grads (a multihead with
 * m's configuration, or NULL), of the head mask to dhead_mask ((h,), or
 * NULL; the forward must have had a mask), and set the input gradients
 * that are asked for (each may be NULL). */
int multihead_backward(const multihead *m, const multihead_cache *c,
                       const tensor *dout, multihead *grads,
                       tensor *dhead_mask, tensor **dqueries, tensor **dkeys,
                       tensor **dvalues);

#endif
//<
