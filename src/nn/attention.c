//> 04
/* attention.c: scaled dot-product attention, and (chapter 05) additive
 * attention; see attention.h.
 *
 * Shapes: queries (B, Lq, d), keys (B, Lk, d), values (B, Lk, dv);
 * scores and weights (B, Lq, Lk); out (B, Lq, dv); the additive pooling's
 * q (B, Lq, H), k (B, Lk, H) and features (B, Lq, Lk, H), H = num_hiddens.
 * Tensors made here are contiguous, so batch slice b of scores starts at
 * scores->data + b*Lq*Lk.
 */
#include "nn/attention.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <gsl/gsl_blas.h>

#include "base/error.h"
#include "nn/qkv.h"
#include "tensor/matrices.h"
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"

/* --- shared checks -------------------------------------------------- */

int attention_check_dropout(const char *who, double p, int training,
                            const gsl_rng *rng)
{
    char ps[TRACE_NUMBER_MAX];
    trace_number_str(ps, sizeof ps, p);
    if (!(p >= 0.0 && p < 1.0))
        return mha_fail(GSL_EINVAL, "%s: dropout %s is outside [0, 1)", who, ps);
    if (training && p > 0.0 && !rng)
        return mha_fail(GSL_EINVAL,
                        "%s: training with dropout %s needs a random "
                        "generator (rng is NULL)",
                        who, ps);
    return GSL_SUCCESS;
}

/* --- dropout -------------------------------------------------------- */

/* out = weights with each entry zeroed with probability p, the rest
 * divided by 1 - p.  Called in training mode with p > 0 only. */
static int dropout_weights(const tensor *weights, double p, gsl_rng *rng,
                           tensor **out)
{
    RECORD(weights, out, "dropout(p=%g)", p);
/*< handout
    int status = tensor_alloc(weights->ndim, weights->shape, out);
*/
//> handout
    int meta = tensor_is_meta(weights);
    int status = meta ? tensor_alloc_meta(weights->ndim, weights->shape, out)
                      : tensor_alloc(weights->ndim, weights->shape, out);
//<
    if (status)
        return status;
    memcpy((*out)->names, weights->names, sizeof weights->names);
/*< handout
    size_t n = tensor_numel(weights);
*/
//> handout
    size_t n = meta ? 0 : tensor_numel(weights);
//<
    for (size_t k = 0; k < n; k++)
        (*out)->data[k] =
            gsl_rng_uniform(rng) < p ? 0.0 : weights->data[k] / (1.0 - p);
    return GSL_SUCCESS;
}

/* What the weights become before they meet the values: themselves in
 * evaluation mode (*dropped NULL, nothing drawn), a dropped-out copy in
 * training. */
static int maybe_dropout(double p, int training, gsl_rng *rng,
                         const tensor *weights, tensor **dropped)
{
    *dropped = NULL;
    if (!training || p == 0.0)
        return GSL_SUCCESS;
    return dropout_weights(weights, p, rng, dropped);
}

/* --- the steps every pooling shares (chapter 05's additive one too) -- */

/* What a pooling does first: no outputs yet (*out, and *weights when
 * wanted, NULL), then the checks: the dropout settings, the inputs (qkv.h,
 * with same_d for the dot product's q . k), and valid_lens against them.
 * shapes gets the inputs' shapes, for a door that checks more. */
static int start_pooling(const char *who, const tensor *q, const tensor *k,
                         const tensor *v, const tensor *valid_lens, int same_d,
                         double p, int training, const gsl_rng *rng,
                         qkv_shapes *shapes, tensor **out, tensor **weights)
{
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = GSL_SUCCESS;
    STEP(attention_check_dropout(who, p, training, rng));
    STEP(qkv_check(who, &qkv_lesson_names, q, k, v, same_d, NULL, shapes));
    STEP(softmax_check_valid_lens(who, shapes->qk, q->shape[0], q->shape[1],
                                  k->shape[1], valid_lens));
done:
    return status;
}

/* From the weights (B, Lq, Lk) on, every pooling is the same: dropped
 * out in training, then out (B, Lq, dv) = weights @ values. */
static int weigh_values(const tensor *weights, double p, int training,
                        gsl_rng *rng, const tensor *values, tensor **out)
{
    tensor *dropped = NULL;
    int status = GSL_SUCCESS;
    STEP(maybe_dropout(p, training, rng, weights, &dropped));
    STEP(tensor_bmm(dropped ? dropped : weights, values, 0, "weights V", out));
done:
    tensor_free(dropped);
    return status;
}

/* The weights w of a forward to the caller who asked for them, or freed;
 * NULL to both when the forward failed. */
static void give_weights(int status, tensor *w, tensor **weights)
{
    if (status) {
        tensor_free(w);
        w = NULL;
    }
    if (weights)
        *weights = w;
    else
        tensor_free(w);
}

/* --- scaled dot-product attention ----------------------------------- */

int dot_attention_init(dot_attention *a, double dropout)
{
    memset(a, 0, sizeof *a);
    int status = attention_check_dropout("dot_attention_init", dropout, 0,
                                         NULL);
    if (status)
        return status;
    a->dropout = dropout;
    return GSL_SUCCESS;
}

/* Nothing to release: the module holds settings only (the weights are
 * an output, the rng the caller's); init and free still come in pairs. */
void dot_attention_free(dot_attention *a)
{
    (void)a;
}

/* The steps of the scaled dot product, on inputs dot_attention_forward
 * (or a module's door) has checked, under the trace's line for the
 * pooling: per example b, scores_b = Q_b K_b^T (one dgemm, K read
 * transposed by BLAS), weights = masked softmax of scores / sqrt(d),
 * dropout when training, out_b = weights_b V_b (a second dgemm).  The
 * weights before dropout go to *weights when the caller wants them, for
 * the heatmaps. */
int dot_attention_steps(const dot_attention *a, const tensor *queries,
                        const tensor *keys, const tensor *values,
                        const tensor *valid_lens, tensor **out,
                        tensor **weights)
{
    size_t d = queries->shape[2]; // queries (B, Lq, d), keys (B, Lk, d)
    SCOPE_OF(TRACE_INPUTS(TRACE_IN(queries), TRACE_IN(keys), TRACE_IN(values)),
             "dot_attention(scale 1/sqrt(%zu))", d);
    tensor *scores = NULL, *w = NULL;
    *out = NULL;
    int status = GSL_SUCCESS;
    // scores (B, Lq, Lk): Q_b K_b^T for each example b
    STEP(tensor_bmm(queries, keys, 1, "Q K^T", &scores));
    // weights (B, Lq, Lk): softmax over the keys of Q K^T / sqrt(d), each
    // row summing to 1 over its valid keys
    STEP(masked_softmax_steps(scores, 1.0 / sqrt((double)d), valid_lens, &w));
    // out (B, Lq, dv): weights V
    STEP(weigh_values(w, a->dropout, a->training, a->rng, values, out));
done:
    tensor_free(scores);
    give_weights(status, w, weights);
    return status;
}

/* The door: the inputs are checked (start_pooling), then the steps run
 * (dot_attention_steps). */
int dot_attention_forward(dot_attention *a, const tensor *queries,
                          const tensor *keys, const tensor *values,
                          const tensor *valid_lens, tensor **out,
                          tensor **weights)
{
    qkv_shapes shapes;
    int status = start_pooling("dot_attention_forward", queries, keys, values,
                               valid_lens, 1, a->dropout, a->training, a->rng,
                               &shapes, out, weights);
    if (status)
        return status;
    return dot_attention_steps(a, queries, keys, values, valid_lens, out,
                               weights);
}

//> 05
/* --- additive attention --------------------------------------------- */

int additive_attention_init(additive_attention *a, size_t key_size,
                            size_t query_size, size_t num_hiddens,
                            double dropout)
{
    memset(a, 0, sizeof *a);
    int status = GSL_SUCCESS;
    STEP(attention_check_dropout("additive_attention_init", dropout, 0, NULL));
    STEP(linear_init(&a->W_q, "W_q", query_size, num_hiddens, 0));
    STEP(linear_init(&a->W_k, "W_k", key_size, num_hiddens, 0));
    STEP(linear_init(&a->w_v, "w_v", num_hiddens, 1, 0));
    linear_name_output(&a->W_q, NAMES(num_hiddens));
    linear_name_output(&a->W_k, NAMES(num_hiddens));
    a->dropout = dropout;
done:
    if (status)
        additive_attention_free(a);
    return status;
}

void additive_attention_free(additive_attention *a)
{
    linear_free(&a->W_q);
    linear_free(&a->W_k);
    linear_free(&a->w_v);
}

/* features (B, Lq, Lk, H) = tanh(q (B, Lq, H) + k (B, Lk, H)), q and k
 * contiguous: every query meets every key, as q.unsqueeze(2) +
 * k.unsqueeze(1) broadcasts in d2l. */
static int broadcast_tanh(const tensor *q, const tensor *k, tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_SUM, TRACE_INPUTS(TRACE_IN(q), TRACE_IN(k)), out,
              "tanh(q[:, :, None] + k[:, None])");
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    size_t H = q->shape[2];
    int status = tensor_alloc(SHAPE(B, Lq, Lk, H), out);
    if (status)
        return status;
    memcpy((*out)->names, q->names, 2 * TENSOR_NAME_MAX); // (B, Lq, Lk, H)
    memcpy((*out)->names[2], k->names[1], TENSOR_NAME_MAX);
    memcpy((*out)->names[3], q->names[2], TENSOR_NAME_MAX);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            const double *q_bi = q->data + (b * Lq + i) * H;
            for (size_t j = 0; j < Lk; j++) {
                const double *k_bj = k->data + (b * Lk + j) * H;
                double *f_bij = (*out)->data + ((b * Lq + i) * Lk + j) * H;
                for (size_t h = 0; h < H; h++)
                    f_bij[h] = tanh(q_bi[h] + k_bj[h]);
            }
        }
    return GSL_SUCCESS;
}

/* The steps of additive attention, on inputs additive_attention_forward
 * has checked, under the trace's line for the pooling: project queries
 * and keys to H = num_hiddens features (W_q, W_k), add every query to
 * every key and take tanh (broadcast_tanh), score each sum with w_v, then
 * the same masked softmax and weights @ values as the dot product; the
 * weights before dropout to the caller who wants them. */
static int additive_attention_steps(const additive_attention *a,
                                    const tensor *queries, const tensor *keys,
                                    const tensor *values,
                                    const tensor *valid_lens, tensor **out,
                                    tensor **weights)
{
    SCOPE_OF(TRACE_INPUTS(TRACE_IN(queries), TRACE_IN(keys), TRACE_IN(values)),
             "additive_attention(num_hiddens %zu)", a->W_q.out_features);
    size_t B = queries->shape[0], Lq = queries->shape[1];
    size_t Lk = keys->shape[1];
    tensor *q = NULL, *k = NULL, *features = NULL, *scores4 = NULL;
    tensor *scores = NULL, *w = NULL;
    *out = NULL;
    int status = GSL_SUCCESS;
    // q is (B, Lq, H), k is (B, Lk, H)
    STEP(linear_steps(&a->W_q, queries, &q));
    STEP(linear_steps(&a->W_k, keys, &k));
    // features is (B, Lq, Lk, H)
    STEP(broadcast_tanh(q, k, &features));
    // scores4 is (B, Lq, Lk, 1); scores (B, Lq, Lk) is a view of it
    STEP(linear_steps(&a->w_v, features, &scores4));
    STEP(tensor_reshape(scores4, SIZES((long)B, (long)Lq, (long)Lk), NULL,
                        &scores));
    // weights (B, Lq, Lk): softmax over the keys of the scores
    STEP(masked_softmax(scores, valid_lens, &w));
    // out (B, Lq, dv): weights V
    STEP(weigh_values(w, a->dropout, a->training, a->rng, values, out));
done:
    tensor_free(q);
    tensor_free(k);
    tensor_free(features);
    tensor_free(scores4);
    tensor_free(scores);
    give_weights(status, w, weights);
    return status;
}

/* The door, as dot_attention_forward's: the inputs are checked
 * (start_pooling), their features against W_q and W_k, and the layers'
 * weights (linear_check); then the steps run (additive_attention_steps). */
int additive_attention_forward(additive_attention *a, const tensor *queries,
                               const tensor *keys, const tensor *values,
                               const tensor *valid_lens, tensor **out,
                               tensor **weights)
{
    const char *who = "additive_attention_forward";
    qkv_shapes shapes;
    int status = GSL_SUCCESS;
    STEP(start_pooling(who, queries, keys, values, valid_lens, 0, a->dropout,
                       a->training, a->rng, &shapes, out, weights));
    if (queries->shape[2] != a->W_q.in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s: queries have %zu features, W_q takes query_size "
                        "%zu (%s)",
                        who, queries->shape[2], a->W_q.in_features, shapes.all);
    if (keys->shape[2] != a->W_k.in_features)
        return mha_fail(GSL_EBADLEN,
                        "%s: keys have %zu features, W_k takes key_size %zu "
                        "(%s)",
                        who, keys->shape[2], a->W_k.in_features, shapes.all);
    STEP(linear_check(who, &a->W_q, NULL)); // the features are checked above
    STEP(linear_check(who, &a->W_k, NULL));
    STEP(linear_check(who, &a->w_v, NULL));
    status = additive_attention_steps(a, queries, keys, values, valid_lens,
                                      out, weights);
done:
    return status;
}
//<
//<
