//> 13
/* model.h: a tiny model to train, and the task it learns (chapters 13-14).
 *
 * The task.  A sequence holds L tokens, whole numbers 0 .. V-1.  At every
 * position i the model gives two answers:
 *   answer 0, "previous": the token just before, x[i-1] (x[0] at i = 0,
 *             where nothing comes before and x[0] is all there is to see);
 *   answer 1, "first":    the first token of the sequence, x[0].
 * Each answer needs attention to look at one particular position, and the
 * two positions differ (i-1 and 0), while one head's softmax can look at
 * mostly one place: the model needs two heads, each finding its pattern.
 *
 * The model, with its shapes (B sequences, L positions, D = d_model, h
 * heads of p features each, V tokens):
 *   tokens  (B, L)                     whole numbers stored as doubles
 *   X = embed[tokens] + pos            (B, L, D)  what and where
 *   A = multihead(X, X, X, causal)     (B, L, D)  position i sees 0 .. i
 *   logits = A W_out^T + b_out         (B, L, 2V) V scores per answer
 *   loss = mean cross-entropy over the B*L*2 answers
 * The multi-head layer has biases, h*p hidden features and out_size D.
 *
 * Training is model_loss with a gradient model (a second model of the same
 * configuration, whose tensors hold the gradients) and an Adam step over
 * model_params.  model_predict hands out the attention weights, (B, h,
 * L, L), when asked.
 *
 * Ownership: model_init allocates every tensor inside the struct you pass;
 * model_free releases them.  Batches are new tensors you free.
 */
#ifndef MHA_MODEL_H
#define MHA_MODEL_H

#include <stddef.h>

#include <gsl/gsl_rng.h>

#include "nn/backward.h"
#include "nn/linear.h"
#include "nn/multihead.h"
#include "tensor/tensor.h"

/* Answers per position: previous token, first token. */
#define MODEL_ANSWERS 2
/* The parameter tensors of a model, in model_params order. */
#define MODEL_NUM_PARAMS 12

typedef struct model_config {
    size_t vocab;     /* V */
    size_t seq_len;   /* L */
    size_t d_model;   /* D */
    size_t num_heads; /* h */
    size_t head_size; /* p; 0: d_model / num_heads */
} model_config;

typedef struct model {
    model_config cfg;
    tensor *embed;         /* (V, D) one row per token */
    tensor *pos;           /* (L, D) one row per position */
    multihead attn;        /* D -> h*p -> D, with biases */
    linear out;            /* (2V, D) and (2V,) */
} model;

/* Zero parameters.  GSL_EINVAL for a zero size, GSL_EBADLEN when head_size
 * is 0 and d_model is not divisible by num_heads. */
int model_init(model *m, const model_config *cfg);
void model_free(model *m);

/* Embeddings from N(0, 1/D) so a row has length about 1, the attention
 * layer Xavier-uniform (zero biases), the output layer PyTorch's default. */
void model_reset(model *m, gsl_rng *r);

/* The parameter tensors in a fixed order: embed, pos, W_q's weight and
 * bias, W_k's, W_v's, W_o's, then the output layer's.  list holds
 * MODEL_NUM_PARAMS pointers; returns how many it wrote. */
size_t model_params(model *m, tensor **list);

/* A batch of the task: tokens (B, L) drawn uniformly from 0 .. V-1 with
 * r, and targets (B, L, 2), answer 0 then answer 1 at each position.
 * GSL_EINVAL when batch is 0. */
int model_make_batch(const model_config *cfg, size_t batch, gsl_rng *r,
                     tensor **tokens, tensor **targets);

/* How the model did on a batch. */
typedef struct model_score {
    double loss;                 /* mean cross-entropy per answer */
    size_t answers, correct;     /* answers given, and right (argmax) */
    size_t per_answer_correct[MODEL_ANSWERS]; /* right, by kind of answer */
    size_t sequences, sequences_correct; /* sequences with every answer right */
} model_score;

/* The forward pass and the loss on tokens (B, L) against targets (B, L,
 * 2); the head mask (h,) multiplies each head's output (NULL: all 1).
 * With grads (a model of m's configuration) the backward pass too: the
 * gradient of the mean loss is added to every tensor of grads, and to
 * dhead_mask ((h,), or NULL; needs a head_mask).  score may be NULL.
 * GSL_EINVAL for tokens outside 0 .. V-1 or shapes that are not (B, L)
 * and (B, L, 2). */
int model_loss(model *m, const tensor *tokens, const tensor *targets,
               const tensor *head_mask, model *grads, tensor *dhead_mask,
               model_score *score);

/* The model's answers for tokens (B, L): answers (B, L, 2), at each
 * position the token with the largest score for each answer, and weights
 * (B, h, L, L) the attention's weights.  Either may be NULL when not
 * wanted; on failure both are left NULL. */
int model_predict(model *m, const tensor *tokens, tensor **answers,
                  tensor **weights);

//> 14
/* A copy of m that keeps only the heads keep[0 .. nkeep-1] (distinct,
 * each < h, in the order given): W_q, W_k and W_v lose the rows of the
 * other heads, W_o their columns.  It computes what m computes with the
 * other heads masked to 0, with h*p fewer features.  *out is a model you
 * model_free.  GSL_EINVAL for a bad or repeated head index or nkeep 0. */
int model_prune_heads(const model *m, const size_t *keep, size_t nkeep,
                      model *out);
//<

/* Floating-point operations of one forward pass over `batch` sequences,
 * counting 2 per multiply-add of the matrix products (the projections,
 * Q K^T, weights V, W_o and the output layer; the softmax and the
 * additions are left out).  *attention gets the share of the multi-head
 * layer, the part that pruning heads shrinks. */
double model_flops(const model_config *cfg, size_t batch, double *attention);

#endif
//<
