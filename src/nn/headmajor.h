//> 11
/* headmajor.h: multi-head attention with the heads first, einsum style.
 *
 * The einops version's module (MultiHeadAttentionNew, after Dai et al. 2019)
 * in C.  It computes what chapter 08's module computes, with three
 * differences: the heads are laid out first, (h, B, L, d_k), instead of
 * being folded into the batch, (B*h, L, d_model/h); the per-head sizes
 * d_k and d_v are free (not d_model/h); and the output goes through
 * dropout, a residual connection and a LayerNorm.
 *
 * Shapes, in the einops version's names:
 *   B        batch size
 *   Lq, Lk   number of queries; number of key-value pairs
 *   d_model  features of every input and of the output
 *   h        n_head
 *   d_k      features per head of a projected query and key
 *   d_v      features per head of a projected value
 *
 *   q (B, Lq, d_model), k (B, Lk, d_model), v (B, Lk, d_model)
 *   valid_lens NULL, (B,) or (B, Lq), whole numbers 1 .. Lk
 *   out (B, Lq, d_model); attn (h, B, Lq, Lk)
 *
 * The layers (PyTorch layout, all with a bias as nn.Linear has):
 *   w_qs (h*d_k, d_model)  w_ks (h*d_k, d_model)  w_vs (h*d_v, d_model)
 *   fc   (d_model, h*d_v)  layer_norm over d_model (eps 1e-5)
 *
 * The forward pass, step by step (the einops version's lines):
 *   1. residual = q
 *   2. project and split, for q (and likewise k, v):
 *        w_qs(q) (B, Lq, h*d_k) -reshape-> (B, Lq, h, d_k)
 *                               -permute(2, 0, 1, 3)-> (h, B, Lq, d_k)
 *      both VIEWS: each head's (Lq, d_k) block of example b is a matrix
 *      with unit column stride and row stride h*d_k, which GSL reads as
 *      it is (gsl_matrix_const_view_array_with_tda); nothing is copied.
 *   3. attn = einsum('hblk,hbtk->hblt', q, k) / sqrt(d_k): one
 *      gsl_blas_dgemm per (head, example) on those strided views.
 *   4. mask: valid_lens become a (B, Lq, Lk) mask (1 where key t >=
 *      valid_len) and attn.masked_fill_(mask[None], -inf).
 *   5. attn = softmax over t (the last axis).
 *   6. output = einsum('hblt,hbtv->hblv', attn, v): one dgemm per (head,
 *      example), written through strided views straight into a
 *      (B, Lq, h, d_v) buffer, so that
 *        rearrange 'head b l v -> b l (head v)'
 *      is a permute and a reshape that are both views again.
 *   7. output = dropout(fc(output))    (dropout in training mode only)
 *   8. output = layer_norm(output + residual)   (when residual_norm)
 *
 * Masking, and how it differs from masked_softmax (softmax.h).  The seed
 * fills masked scores with -inf, PyTorch's usual way; a masked key gets
 * weight exp(-inf) = 0 exactly, whatever the other scores.  A row whose
 * keys are ALL masked (valid_len 0) would be softmax of a row of -inf,
 * 0/0 = NaN in the einops version's module, where masked_softmax follows
 * d2l's rule, uniform weights 1/Lk.  Neither is its intent, so this module rejects valid_len 0
 * (GSL_EINVAL) and says why.  For valid_lens >= 1 the two agree: chapter
 * 11 and the tests hold this module to multihead_forward.
 *
 * Dropout, as nn.Dropout: in training mode (training = 1, p > 0) each
 * element of fc's output is zeroed with probability p and the others are
 * divided by 1 - p, one gsl_rng_uniform draw per element in row-major
 * order from rng (the caller's), so a seeded rng repeats.  In evaluation
 * mode (the default) it does nothing and draws nothing.
 *
 * The trace: every step reports a line; the rearranges show as `view`
 * lines under a rearrange(...) header, the einsums, the projections and
 * the norm as `new`.  Steps that overwrite a buffer of this module's own
 * in place carry PyTorch's trailing underscore (masked_fill_, dropout_,
 * add_) and the kind `new`: new numbers, no new buffer.
 *
 * Ownership: headmajor_init allocates the layers inside the struct you
 * pass; headmajor_free releases them.  out and attn are new tensors you
 * tensor_free.  The inputs are only read.
 */
#ifndef MHA_HEADMAJOR_H
#define MHA_HEADMAJOR_H

#include <gsl/gsl_rng.h>

#include "nn/layernorm.h"
#include "nn/linear.h"
#include "tensor/tensor.h"

typedef struct headmajor_config {
    size_t n_head;  /* h */
    size_t d_model; /* features in and out */
    size_t d_k;     /* per head, queries and keys */
    size_t d_v;     /* per head, values */
    double dropout; /* on fc's output in training; the einops version's
                       default 0.1 */
} headmajor_config;

typedef struct headmajor {
    headmajor_config cfg;
    linear w_qs;          /* (h*d_k, d_model) + bias */
    linear w_ks;          /* (h*d_k, d_model) + bias */
    linear w_vs;          /* (h*d_v, d_model) + bias */
    linear fc;            /* (d_model, h*d_v) + bias */
    layernorm layer_norm; /* over d_model, eps 1e-5, gamma 1, beta 0 */
    int residual_norm;    /* 1 (init): out = layer_norm(fc(..) + q);
                             0: out = dropout(fc(..)), the raw attention
                             output, to compare with other modules */
    int training;         /* 0: evaluation (init), 1: training */
    gsl_rng *rng;         /* dropout's random numbers; the caller's */
} headmajor;

/* Allocate the layers: zero weights and biases (see headmajor_reset),
 * gamma 1, beta 0, residual_norm on, evaluation mode.  GSL_EINVAL for a
 * zero size or a dropout outside [0, 1); GSL_ENOMEM. */
int headmajor_init(headmajor *m, const headmajor_config *cfg);
void headmajor_free(headmajor *m);

/* The einops version's initialisation, drawn from r in this order: for each of
 * w_qs, w_ks, w_vs, fc, first the weight, then the bias.
 *   w_qs, w_ks weights ~ N(0, 2/(d_model + d_k))   (std sqrt of that)
 *   w_vs weight        ~ N(0, 2/(d_model + d_v))
 *   fc weight: Xavier normal, std sqrt(2/(fan_in + fan_out))
 *              = sqrt(2/(h*d_v + d_model))
 *   biases: nn.Linear's default, U(-1/sqrt(in), 1/sqrt(in)) with in the
 *           layer's in_features (d_model; h*d_v for fc)
 * gamma and beta are set back to 1 and 0. */
void headmajor_reset(headmajor *m, gsl_rng *r);

/* The standard deviations headmajor_reset draws the weights with. */
double headmajor_std_qk(const headmajor_config *cfg);
double headmajor_std_v(const headmajor_config *cfg);
double headmajor_std_fc(const headmajor_config *cfg);

/* Evaluation mode (training 0) or training mode with rng for dropout. */
void headmajor_train(headmajor *m, int training, gsl_rng *rng);

/* (B, L, h*d) -> (h, B, L, d): reshape (B, L, h, d) then
 * permute(2, 0, 1, 3), both views, traced under a rearrange header.
 * GSL_EINVAL unless x is 3-D; GSL_EBADLEN when h does not divide its last
 * size. */
int headmajor_split_heads(const tensor *x, size_t n_head, tensor **out);

/* (h, B, L, d) -> (B, L, h*d): permute(1, 2, 0, 3) then reshape, views
 * when x is a head-major view of a (B, L, h, d) buffer (as the forward
 * pass makes it), a copy for the reshape otherwise (PyTorch's rule).
 * GSL_EINVAL unless x is 4-D. */
int headmajor_join_heads(const tensor *x, tensor **out);

/* The forward pass above.  attn may be NULL when not wanted.  Errors
 * (nothing allocated, *out and *attn NULL): inputs not 3-D, batch sizes
 * or key/value lengths that differ, a feature size other than d_model
 * (GSL_EBADLEN); valid_lens of the wrong shape (GSL_EBADLEN) or with a
 * value that is not a whole number in 1 .. Lk (GSL_EINVAL; 0 included,
 * see above); training with dropout and no rng (GSL_EINVAL);
 * GSL_ENOMEM. */
int headmajor_forward(headmajor *m, const tensor *q, const tensor *k,
                      const tensor *v, const tensor *valid_lens, tensor **out,
                      tensor **attn);

#endif
//<
