//> 04
/* attention.h: attention pooling, the f of d2l's chapter on attention.
 *
 * Shapes, in the lesson's names:
 *   B        batch size
 *   Lq, Lk   number of queries; number of key-value pairs
 *   d        features of a query and of a key (dot product: they match)
 *   q_size, k_size   features of queries and keys (additive: they may differ)
 *   dv       features of a value
 *   num_hiddens      width of the additive attention's hidden layer
 *
 *   queries (B, Lq, d), keys (B, Lk, d), values (B, Lk, dv)
 *   valid_lens NULL, (B,) or (B, Lq): see softmax.h
 *   weights (B, Lq, Lk): row (b, i) says how much query i of example b
 *           takes from each value; every row sums to 1
 *   out (B, Lq, dv) = weights @ values, one weighted average per query
 *
 * Both poolings differ only in how they score a query against a key:
 *   scaled dot product  score(q, k) = q . k / sqrt(d)
 *   additive            score(q, k) = tanh(q W_q^T + k W_k^T) w_v^T
 * then masked_softmax turns the scores of each query into weights.
 *
 * Dropout on the weights, as in d2l.  In training mode (training = 1) with
 * dropout p > 0, each weight is zeroed with probability p and the others
 * are divided by 1 - p (inverted dropout: the expected output stays the
 * same, so evaluation needs no rescaling).  The numbers come from rng, one
 * gsl_rng_uniform draw per weight in row-major order, so a seeded rng
 * gives the same result every time.  In evaluation mode (the default)
 * dropout does nothing and draws nothing.  dropout must be in [0, 1);
 * training with dropout > 0 and no rng is an error.
 *
 * The weights are an output, as PyTorch's MultiheadAttention returns
 * them when need_weights: pass &weights to get the softmax output before
 * dropout, the numbers d2l plots, as a new tensor you tensor_free; pass
 * NULL when you do not want them (they are made to weigh the values all
 * the same, and freed).  A failed forward leaves *weights NULL.  The
 * struct keeps nothing of a forward pass.  rng belongs to the caller, who
 * frees it.
 *
 * Every forward checks its inputs by the rules all attentions share
 * (qkv.h) before it computes anything, traces a header line and one line
 * per step (see trace.h); out is a new contiguous tensor you tensor_free.
 * Inputs are only read.
 */
#ifndef MHA_ATTENTION_H
#define MHA_ATTENTION_H

#include <gsl/gsl_rng.h>

#include "nn/linear.h"
#include "tensor/tensor.h"

/* --- dropout's settings -------------------------------------------- */

/* The rule above, for every module with dropout (headmajor.h too):
 * GSL_EINVAL, naming who, when p is not in [0, 1) or when training with
 * p > 0 has no rng. */
int attention_check_dropout(const char *who, double p, int training,
                            const gsl_rng *rng);

/* --- scaled dot-product attention ----------------------------------- */

typedef struct dot_attention {
    double dropout;  /* probability of zeroing a weight in training */
    int training;    /* 0: evaluation (default), 1: training */
    gsl_rng *rng;    /* dropout's random numbers; the caller's */
} dot_attention;

/* Evaluation mode, no rng.  GSL_EINVAL when dropout is not in [0, 1). */
int dot_attention_init(dot_attention *a, double dropout);
void dot_attention_free(dot_attention *a);

/* out = softmax(Q K^T / sqrt(d), masked by valid_lens) V, and weights
 * (B, Lq, Lk) the softmax (NULL: not wanted).
 *
 * Per example b, two gsl_blas_dgemm calls on GSL views of the tensor data:
 * scores_b = Q_b K_b^T (K read transposed by BLAS, never copied) and
 * out_b = weights_b V_b.  The 1/sqrt(d) is applied inside the softmax
 * (masked_softmax_scaled), in the same pass as the mask.  An input whose
 * batch slices are not row-major matrices (e.g. a permuted view whose last
 * axis is not contiguous) is copied once, and the trace says so.
 *
 * GSL_EBADLEN when the shapes do not fit together (Q, K, V not 3-D, batch
 * sizes, d of Q and K, Lk of K and V, valid_lens' shape), GSL_EINVAL for
 * bad valid_lens values or dropout settings, GSL_ENOMEM. */
int dot_attention_forward(dot_attention *a, const tensor *queries,
                          const tensor *keys, const tensor *values,
                          const tensor *valid_lens, tensor **out,
                          tensor **weights);

/* dot_attention_forward's steps, with the trace's line for the pooling,
 * on inputs its caller has checked: the module's door checks its own
 * inputs once, and its steps call this on the heads it made. */
int dot_attention_steps(const dot_attention *a, const tensor *queries,
                        const tensor *keys, const tensor *values,
                        const tensor *valid_lens, tensor **out,
                        tensor **weights);

//> 05
/* --- additive attention --------------------------------------------- */

typedef struct additive_attention {
    linear W_q;      /* (num_hiddens, q_size), no bias */
    linear W_k;      /* (num_hiddens, k_size), no bias */
    linear w_v;      /* (1, num_hiddens), no bias */
    double dropout;  /* as in dot_attention */
    int training;
    gsl_rng *rng;
} additive_attention;

/* The three layers with zero weights: set them with linear_reset_* (see
 * linear.h) or by hand.  Evaluation mode, no rng.  GSL_EINVAL for a zero
 * size or a dropout outside [0, 1); GSL_ENOMEM. */
int additive_attention_init(additive_attention *a, size_t key_size,
                            size_t query_size, size_t num_hiddens,
                            double dropout);
void additive_attention_free(additive_attention *a);

/* out = softmax(tanh(q W_q^T + k W_k^T) w_v^T, masked by valid_lens) V,
 * and weights (B, Lq, Lk) the softmax (NULL: not wanted).
 *
 * queries (B, Lq, q_size) and keys (B, Lk, k_size) are projected to
 * num_hiddens features each; every query is added to every key by
 * broadcasting, features (B, Lq, Lk, num_hiddens), which w_v scores down
 * to (B, Lq, Lk, 1) and a reshape view squeezes to (B, Lq, Lk).  The
 * features tensor is the memory cost of this pooling: B*Lq*Lk*num_hiddens
 * doubles.  Errors as for dot_attention_forward, with the feature sizes
 * checked against W_q and W_k. */
int additive_attention_forward(additive_attention *a, const tensor *queries,
                               const tensor *keys, const tensor *values,
                               const tensor *valid_lens, tensor **out,
                               tensor **weights);

//<

#endif
//<
