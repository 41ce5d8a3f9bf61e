//> full
/* multihead_naive.c: multihead_forward_naive (multihead_fast.h), the
 * forward pass from plain loops, one query, head and key at a time: the
 * reference the fast path is held to, and the benchmark's floor. */
#include <math.h>

#include "base/error.h"
#include "fast/multihead_fast.h"
#include "fast/multihead_fast_internal.h"
#include "nn/softmax.h"
#include "nn/window.h"

/* y (out,) = W x + b for one vector x read with stride xs. */
static void naive_linear(const linear *l, const double *x, size_t xs,
                         double *y)
{
    for (size_t o = 0; o < l->out_features; o++) {
        double sum = l->bias ? *TENSOR_AT(l->bias, o) : 0.0;
        for (size_t j = 0; j < l->in_features; j++)
            sum += *TENSOR_AT(l->weight, o, j) * x[j * xs];
        y[o] = sum;
    }
}

/* With rope: the p features of one head of one projected vector at
 * position pos, turned pair by pair (features 2k, 2k + 1) by the angle
 * pos / base^(2k/p), written out from the formula of posenc.h. */
static void naive_rope(double *v, size_t p, double pos, double base)
{
    for (size_t k = 0; 2 * k < p; k++) {
        double angle = pos / pow(base, (double)(2 * k) / (double)p);
        double a = v[2 * k], b = v[2 * k + 1];
        v[2 * k] = cos(angle) * a - sin(angle) * b;
        v[2 * k + 1] = sin(angle) * a + cos(angle) * b;
    }
}

int multihead_forward_naive(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, tensor **out)
{
    int status = multihead_fast_start(m, queries, keys, values, valid_lens,
                                  "multihead_forward_naive", out);
    if (status)
        return status;
    size_t B = queries->shape[0], Lq = queries->shape[1], Lk = keys->shape[1];
    size_t D = m->cfg.num_hiddens, h = m->cfg.num_heads, p = D / h;
    size_t Dout = m->cfg.out_size, Dkv = m->cfg.kv_heads * p;
    size_t group = h / m->cfg.kv_heads; // query heads per key-value head
    // per example: qp (Lq, D), kp and vp (Lk, G*p); one query's concat
    // (D,) and one head's scores (Lk,)
    size_t nq, nk;
    if (mha_mul_size(Lq, D, &nq, "multihead_forward_naive") ||
        mha_mul_size(Lk, Dkv, &nk, "multihead_forward_naive"))
        return GSL_EOVRFLW;
    double *qp = mha_malloc(nq, sizeof *qp, "multihead_forward_naive");
    double *kp = qp ? mha_malloc(nk, sizeof *kp, "multihead_forward_naive") : NULL;
    double *vp = kp ? mha_malloc(nk, sizeof *vp, "multihead_forward_naive") : NULL;
    double *cat = vp ? mha_malloc(D, sizeof *cat, "multihead_forward_naive") : NULL;
    double *s = cat ? mha_malloc(Lk, sizeof *s, "multihead_forward_naive") : NULL;
    status = s ? tensor_alloc(SHAPE(B, Lq, Dout), out) : GSL_ENOMEM;
    if (status) {
        free(qp);
        free(kp);
        free(vp);
        free(cat);
        free(s);
        return status;
    }
    double scale = 1.0 / sqrt((double)p);
    int rope = m->cfg.rope;
    window_rule rule; // a window, alibi or sinks (window.h)
    int ruled = multihead_window_rule(m, &rule);
    for (size_t b = 0; b < B; b++) {
        // query i sits at position Lk - Lq + i, key t at position t
        for (size_t i = 0; i < Lq; i++) {
            naive_linear(&m->W_q, TENSOR_AT(queries, b, i, 0),
                         queries->strides[2], qp + i * D);
            for (size_t hd = 0; rope && hd < h; hd++)
                naive_rope(qp + i * D + hd * p, p,
                           (double)Lk - (double)Lq + (double)i,
                           m->cfg.rope_base);
        }
        for (size_t t = 0; t < Lk; t++) {
            naive_linear(&m->W_k, TENSOR_AT(keys, b, t, 0), keys->strides[2],
                         kp + t * Dkv);
            for (size_t hd = 0; rope && hd < m->cfg.kv_heads; hd++)
                naive_rope(kp + t * Dkv + hd * p, p, (double)t,
                           m->cfg.rope_base);
            naive_linear(&m->W_v, TENSOR_AT(values, b, t, 0),
                         values->strides[2], vp + t * Dkv);
        }
        for (size_t i = 0; i < Lq; i++) {
            size_t len = softmax_row_len(valid_lens, m->cfg.causal, b, i, Lq,
                                         Lk);
            for (size_t hd = 0; hd < h; hd++) {
                const double *q_i = qp + i * D + hd * p;
                size_t kv = (hd / group) * p; // its key-value head's columns
                // scores of query i against the keys it sees, 0 .. len - 1;
                // a row of valid length 0 sees every key at score 0
                size_t seen = len ? len : Lk;
                double mx = -INFINITY;
                // with a window, alibi or sinks: query i at position
                // pos, key t seen when the rule says so, its score less
                // slope * (pos - t), and the sink in the max and the sum
                long pos = (long)Lk - (long)Lq + (long)i;
                double slope = rule.slopes ? rule.slopes[hd] : 0.0;
                if (ruled && rule.sinks)
                    mx = rule.sinks[hd];
                for (size_t t = 0; t < seen; t++) {
                    const double *k_t = kp + t * Dkv + kv;
                    double dot = 0.0;
                    for (size_t j = 0; j < p; j++)
                        dot += q_i[j] * k_t[j];
                    s[t] = len ? scale * dot : 0.0;
                    s[t] -= slope * (double)(pos - (long)t);
                    if (ruled && !window_sees(&rule, pos, (long)t))
                        s[t] = -INFINITY;
                    mx = s[t] > mx ? s[t] : mx;
                }
                double sum = ruled && rule.sinks ? exp(rule.sinks[hd] - mx)
                                                 : 0.0;
                for (size_t t = 0; t < seen; t++)
                    sum += s[t] = exp(s[t] - mx);
                // the head's p outputs: the weighted average of the values
                for (size_t j = 0; j < p; j++) {
                    double o = 0.0;
                    for (size_t t = 0; t < seen; t++)
                        o += s[t] / sum * vp[t * Dkv + kv + j];
                    cat[hd * p + j] = o;
                }
            }
            naive_linear(&m->W_o, cat, 1, (*out)->data + (b * Lq + i) * Dout);
        }
    }
    free(qp);
    free(kp);
    free(vp);
    free(cat);
    free(s);
    return GSL_SUCCESS;
}
//<
