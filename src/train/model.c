//> 13
/* model.c: the tiny model of chapters 13-14 and its task; see model.h.
 *
 * Shapes: B sequences of L positions, D = d_model, h heads of p features,
 * H = h*p, V tokens.  tokens (B, L); X, A and dX (B, L, D); logits and
 * dlogits (B, L, 2V), where the V scores of answer a at position (b, i)
 * start at logits->data + ((b*L + i)*2 + a)*V. */
#include "train/model.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "nn/softmax.h"
#include "trace/trace.h"

int model_init(model *m, const model_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    model_config *c = &m->cfg;
    if (!c->vocab || !c->seq_len || !c->d_model || !c->num_heads)
        return mha_fail(GSL_EINVAL,
                        "model_init: sizes must be >= 1 (vocab %zu, seq_len "
                        "%zu, d_model %zu, num_heads %zu)",
                        c->vocab, c->seq_len, c->d_model, c->num_heads);
    if (!c->head_size) {
        if (c->d_model % c->num_heads)
            return mha_fail(GSL_EBADLEN,
                            "model_init: d_model %zu is not divisible by "
                            "num_heads %zu (give head_size)",
                            c->d_model, c->num_heads);
        c->head_size = c->d_model / c->num_heads;
    }
    size_t H;
    if (mha_mul_size(c->num_heads, c->head_size, &H, "model_init"))
        return GSL_EOVRFLW;
    multihead_config mc = {.query_size = c->d_model, .key_size = c->d_model,
                           .value_size = c->d_model, .num_hiddens = H,
                           .num_heads = c->num_heads, .out_size = c->d_model,
                           .bias = 1};
    int status = tensor_alloc(SHAPE(c->vocab, c->d_model), &m->embed);
    if (!status)
        status = tensor_alloc(SHAPE(c->seq_len, c->d_model), &m->pos);
    if (!status)
        status = multihead_init(&m->attn, &mc);
    if (!status)
        status = linear_init(&m->out, "W_out", c->d_model,
                             MODEL_ANSWERS * c->vocab, 1);
    if (status) {
        model_free(m);
        return status;
    }
    return GSL_SUCCESS;
}

void model_free(model *m)
{
    tensor_free(m->embed);
    tensor_free(m->pos);
    multihead_free(&m->attn);
    linear_free(&m->out);
    m->embed = m->pos = NULL;
}

void model_reset(model *m, gsl_rng *r)
{
    double sd = 1.0 / sqrt((double)m->cfg.d_model);
    tensor_fill_normal(m->embed, r, 0, sd);
    tensor_fill_normal(m->pos, r, 0, sd);
    multihead_reset_xavier(&m->attn, r);
    tensor_fill(m->attn.W_q.bias, 0);
    tensor_fill(m->attn.W_k.bias, 0);
    tensor_fill(m->attn.W_v.bias, 0);
    tensor_fill(m->attn.W_o.bias, 0);
    linear_reset_pytorch(&m->out, r);
}

size_t model_params(model *m, tensor **list)
{
    tensor *all[MODEL_NUM_PARAMS] = {
        m->embed,           m->pos,
        m->attn.W_q.weight, m->attn.W_q.bias,
        m->attn.W_k.weight, m->attn.W_k.bias,
        m->attn.W_v.weight, m->attn.W_v.bias,
        m->attn.W_o.weight, m->attn.W_o.bias,
        m->out.weight,      m->out.bias};
    memcpy(list, all, sizeof all);
    return MODEL_NUM_PARAMS;
}

int model_make_batch(const model_config *cfg, size_t batch, gsl_rng *r,
                     tensor **tokens, tensor **targets)
{
    *tokens = *targets = NULL;
    if (batch == 0)
        return mha_fail(GSL_EINVAL, "model_make_batch: batch is 0");
    size_t L = cfg->seq_len;
    // tokens is (B, L), targets (B, L, 2)
    int status = tensor_alloc(SHAPE(batch, L), tokens);
    if (!status)
        status = tensor_alloc(SHAPE(batch, L, MODEL_ANSWERS), targets);
    if (status) {
        tensor_free(*tokens);
        *tokens = NULL;
        return status;
    }
    for (size_t b = 0; b < batch; b++) {
        double *x = (*tokens)->data + b * L;
        double *t = (*targets)->data + b * L * MODEL_ANSWERS;
        for (size_t i = 0; i < L; i++)
            x[i] = (double)gsl_rng_uniform_int(r, cfg->vocab);
        for (size_t i = 0; i < L; i++) {
            t[i * MODEL_ANSWERS + 0] = x[i > 0 ? i - 1 : 0]; // previous
            t[i * MODEL_ANSWERS + 1] = x[0];                  // first
        }
    }
    return GSL_SUCCESS;
}

/* Whole numbers 0 .. V-1 in every element of t (contiguous). */
static int check_tokens(const char *who, const char *what, const tensor *t,
                        size_t V)
{
    for (size_t k = 0; k < tensor_numel(t); k++) {
        double v = t->data[k];
        if (!(v >= 0 && v < (double)V && v == floor(v)))
            return mha_fail(GSL_EINVAL,
                            "%s: %s element %zu is %g, not a token 0 .. %zu",
                            who, what, k, v, V - 1);
    }
    return GSL_SUCCESS;
}

/* tokens (B, L), contiguous, of tokens 0 .. V-1. */
static int check_input(const char *who, const model *m, const tensor *tokens)
{
    char ts[TRACE_SHAPE_MAX];
    if (!tokens)
        return mha_fail(GSL_EINVAL, "%s: tokens is NULL", who);
    if (tokens->ndim != 2 || tokens->shape[1] != m->cfg.seq_len ||
        !tensor_is_contiguous(tokens))
        return mha_fail(GSL_EINVAL,
                        "%s: tokens have shape %s, expected contiguous (B, "
                        "%zu)",
                        who, tensor_shape_str(tokens, ts, sizeof ts),
                        m->cfg.seq_len);
    return check_tokens(who, "tokens", tokens, m->cfg.vocab);
}

/* targets (B, L, 2) for tokens (B, L). */
static int check_targets(const char *who, const model *m,
                         const tensor *tokens, const tensor *targets)
{
    char ts[TRACE_SHAPE_MAX], gs[TRACE_SHAPE_MAX];
    if (!targets)
        return mha_fail(GSL_EINVAL, "%s: targets is NULL", who);
    size_t B = tokens->shape[0], L = m->cfg.seq_len;
    if (targets->ndim != 3 || targets->shape[0] != B ||
        targets->shape[1] != L || targets->shape[2] != MODEL_ANSWERS ||
        !tensor_is_contiguous(targets))
        return mha_fail(GSL_EINVAL,
                        "%s: targets have shape %s, expected contiguous "
                        "(%zu, %zu, %d) for tokens %s",
                        who, tensor_shape_str(targets, gs, sizeof gs), B, L,
                        MODEL_ANSWERS,
                        tensor_shape_str(tokens, ts, sizeof ts));
    return check_tokens(who, "targets", targets, m->cfg.vocab);
}

/* The forward pass: x (B, L, D) = embed[tokens] + pos, a (B, L, D) the
 * attention layer's output (cache, when given, filled for the backward;
 * weights, when not NULL, its weights (B, h, L, L)), logits (B, L, 2V).
 * On failure every output is NULL and the cache empty. */
static int forward(model *m, const tensor *tokens, const tensor *head_mask,
                   multihead_cache *cache, tensor **x, tensor **a,
                   tensor **logits, tensor **weights)
{
    size_t B = tokens->shape[0], L = m->cfg.seq_len, D = m->cfg.d_model;
    tensor *lens = NULL;
    *x = *a = *logits = NULL;
    // x (B, L, D) = embed[tokens] + pos: which token, and where
    int status = tensor_alloc(SHAPE(B, L, D), x);
    if (!status)
        status = tensor_set_names(*x, "B, L, d_model");
    if (!status)
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < L; i++) {
                size_t tok = (size_t)tokens->data[b * L + i];
                const double *e = m->embed->data + tok * D;
                const double *p = m->pos->data + i * D;
                double *x_bi = (*x)->data + (b * L + i) * D;
                for (size_t j = 0; j < D; j++)
                    x_bi[j] = e[j] + p[j];
            }
    // a (B, L, D): self-attention, position i sees positions 0 .. i
    if (!status)
        status = causal_valid_lens(B, L, &lens);
    if (!status)
        status = multihead_forward_cached(&m->attn, *x, *x, *x, lens,
                                          head_mask, cache, a, weights);
    // logits (B, L, 2V): V scores for each answer
    if (!status)
        status = linear_forward(&m->out, *a, logits);
    tensor_free(lens);
    if (status) {
        if (cache)
            multihead_cache_free(cache);
        if (weights) {
            tensor_free(*weights);
            *weights = NULL;
        }
        tensor_free(*x);
        tensor_free(*a);
        *x = *a = NULL;
    }
    return status;
}

/* Cross-entropy of the V scores z against target t, -log softmax(z)_t,
 * computed stably as logsumexp(z) - z_t; dz (V doubles) gets softmax(z) -
 * onehot(t), times `scale`.  Returns the loss; *right says whether the
 * largest score (the first, in a tie) is the target's. */
static double cross_entropy(const double *z, size_t V, size_t t, double scale,
                            double *dz, int *right)
{
    size_t best = 0;
    for (size_t j = 1; j < V; j++)
        if (z[j] > z[best])
            best = j;
    double sum = 0.0;
    for (size_t j = 0; j < V; j++)
        sum += exp(z[j] - z[best]);
    *right = best == t;
    if (dz) {
        for (size_t j = 0; j < V; j++)
            dz[j] = scale * exp(z[j] - z[best]) / sum;
        dz[t] -= scale;
    }
    return log(sum) + z[best] - z[t];
}

int model_loss(model *m, const tensor *tokens, const tensor *targets,
               const tensor *head_mask, model *grads, tensor *dhead_mask,
               model_score *score)
{
    const char *who = "model_loss";
    int status = check_input(who, m, tokens);
    if (!status)
        status = check_targets(who, m, tokens, targets);
    if (status)
        return status;
    if (grads && (grads->cfg.vocab != m->cfg.vocab ||
                  grads->cfg.seq_len != m->cfg.seq_len ||
                  grads->cfg.d_model != m->cfg.d_model ||
                  grads->cfg.num_heads != m->cfg.num_heads ||
                  grads->cfg.head_size != m->cfg.head_size))
        return mha_fail(GSL_EBADLEN,
                        "%s: grads is a model of another configuration", who);
    size_t B = tokens->shape[0], L = m->cfg.seq_len, D = m->cfg.d_model;
    size_t V = m->cfg.vocab, N = B * L * MODEL_ANSWERS;

    tensor *x = NULL, *a = NULL, *logits = NULL, *dlogits = NULL;
    tensor *da = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
    multihead_cache cache = {0}; // borrows x: freed before x is
    status = forward(m, tokens, head_mask, &cache, &x, &a, &logits, NULL);
    if (!status && grads)
        status = tensor_alloc(logits->ndim, logits->shape, &dlogits);
    if (status)
        goto done;
    // the loss of every answer, and (for the backward) its gradient
    model_score s = {0};
    double total = 0.0;
    for (size_t b = 0; b < B; b++) {
        int all_right = 1;
        for (size_t i = 0; i < L; i++)
            for (size_t ans = 0; ans < MODEL_ANSWERS; ans++) {
                size_t row = (b * L + i) * MODEL_ANSWERS + ans;
                size_t t = (size_t)targets->data[row];
                int right;
                total += cross_entropy(logits->data + row * V, V, t,
                                       1.0 / (double)N,
                                       dlogits ? dlogits->data + row * V
                                               : NULL,
                                       &right);
                s.correct += (size_t)right;
                s.per_answer_correct[ans] += (size_t)right;
                all_right &= right;
            }
        s.sequences_correct += (size_t)all_right;
    }
    s.loss = total / (double)N;
    s.answers = N;
    s.sequences = B;

    if (grads) {
        // backward: the output layer, then the attention layer ...
        status = linear_backward(&m->out, a, dlogits, &grads->out, &da);
        if (!status)
            status = multihead_backward(&m->attn, &cache, da, &grads->attn,
                                        dhead_mask, &dq, &dk, &dv);
        if (status)
            goto done;
        // ... then the embeddings: x fed queries, keys and values, so its
        // gradient is the sum of the three; each position's share goes to
        // the row of its token and the row of its position
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < L; i++) {
                size_t tok = (size_t)tokens->data[b * L + i];
                size_t off = (b * L + i) * D;
                double *de = grads->embed->data + tok * D;
                double *dp = grads->pos->data + i * D;
                for (size_t j = 0; j < D; j++) {
                    double g = dq->data[off + j] + dk->data[off + j] +
                               dv->data[off + j];
                    de[j] += g;
                    dp[j] += g;
                }
            }
    }
    if (score)
        *score = s;
done:
    multihead_cache_free(&cache);
    tensor *all[] = {x, a, logits, dlogits, da, dq, dk, dv};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        tensor_free(all[k]);
    return status;
}

int model_predict(model *m, const tensor *tokens, tensor **answers,
                  tensor **weights)
{
    if (answers)
        *answers = NULL;
    if (weights)
        *weights = NULL;
    int status = check_input("model_predict", m, tokens);
    if (status)
        return status;
    size_t B = tokens->shape[0], L = m->cfg.seq_len, V = m->cfg.vocab;
    tensor *x, *a, *logits;
    status = forward(m, tokens, NULL, NULL, &x, &a, &logits, weights);
    // answers (B, L, 2): the token with the largest score (the first, in a
    // tie), for each answer
    if (!status && answers)
        status = tensor_alloc(SHAPE(B, L, MODEL_ANSWERS), answers);
    if (!status && answers)
        for (size_t row = 0; row < B * L * MODEL_ANSWERS; row++) {
            const double *z = logits->data + row * V;
            size_t best = 0;
            for (size_t j = 1; j < V; j++)
                if (z[j] > z[best])
                    best = j;
            (*answers)->data[row] = (double)best;
        }
    if (status && weights) {
        tensor_free(*weights);
        *weights = NULL;
    }
    tensor_free(x);
    tensor_free(a);
    tensor_free(logits);
    return status;
}

//> 14
int model_prune_heads(const model *m, const size_t *keep, size_t nkeep,
                      model *out)
{
    memset(out, 0, sizeof *out);
    size_t h = m->cfg.num_heads, p = m->cfg.head_size, D = m->cfg.d_model;
    if (nkeep == 0 || nkeep > h)
        return mha_fail(GSL_EINVAL,
                        "model_prune_heads: keeping %zu of %zu heads; keep 1 "
                        "to %zu",
                        nkeep, h, h);
    for (size_t j = 0; j < nkeep; j++) {
        int repeated = 0;
        for (size_t i = 0; i < j; i++)
            repeated |= keep[i] == keep[j];
        if (keep[j] >= h || repeated)
            return mha_fail(GSL_EINVAL,
                            "model_prune_heads: head %zu (keep[%zu]) is %s",
                            keep[j], j,
                            repeated ? "listed twice" : "not a head of the model");
    }
    model_config cfg = m->cfg;
    cfg.num_heads = nkeep;
    int status = model_init(out, &cfg);
    if (status)
        return status;
    tensor_copy_into(out->embed, m->embed);
    tensor_copy_into(out->pos, m->pos);
    tensor_copy_into(out->out.weight, m->out.weight);
    tensor_copy_into(out->out.bias, m->out.bias);
    tensor_copy_into(out->attn.W_o.bias, m->attn.W_o.bias);
    const linear *src[3] = {&m->attn.W_q, &m->attn.W_k, &m->attn.W_v};
    linear *dst[3] = {&out->attn.W_q, &out->attn.W_k, &out->attn.W_v};
    size_t H = h * p, Hk = nkeep * p;
    for (size_t j = 0; j < nkeep; j++) {
        size_t from = keep[j] * p, to = j * p; // first feature of the head
        // W_q, W_k, W_v (H, D): the head's p rows, and its p biases
        for (int l = 0; l < 3; l++) {
            memcpy(dst[l]->weight->data + to * D,
                   src[l]->weight->data + from * D, p * D * sizeof(double));
            memcpy(dst[l]->bias->data + to, src[l]->bias->data + from,
                   p * sizeof(double));
        }
        // W_o (D, H): the head's p columns
        for (size_t o = 0; o < D; o++)
            memcpy(out->attn.W_o.weight->data + o * Hk + to,
                   m->attn.W_o.weight->data + o * H + from,
                   p * sizeof(double));
    }
    return GSL_SUCCESS;
}
//<

double model_flops(const model_config *cfg, size_t batch, double *attention)
{
    double L = (double)cfg->seq_len, D = (double)cfg->d_model;
    double h = (double)cfg->num_heads, V = (double)cfg->vocab;
    double p = (double)(cfg->head_size ? cfg->head_size
                                       : cfg->d_model / cfg->num_heads);
    double H = h * p;
    double projections = 3 * 2 * L * D * H; // W_q, W_k, W_v
    double scores = 2 * h * L * L * p;      // Q K^T, every head
    double pooling = 2 * h * L * L * p;     // weights V
    double mix = 2 * L * H * D;             // W_o
    double readout = 2 * L * D * MODEL_ANSWERS * V;
    double attn = (projections + scores + pooling + mix) * (double)batch;
    if (attention)
        *attention = attn;
    return attn + readout * (double)batch;
}
//<
