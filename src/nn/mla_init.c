//> 20
/* mla_init.c: the latent attention module set up (its layers, checked
 * sizes, initial weights) and RMSNorm, the latent's normalisation; the
 * module's paths: mla.c. */
#include "nn/mla.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "nn/posenc.h"
#include "tensor/tensor_trace.h"

/* --- setting up ----------------------------------------------------- */

static int check_config(const char *who, const mla_config *c)
{
    int status = MHA_CHECK_SIZES(who, "dim, num_heads, kv_lora_rank, "
                                 "qk_nope_head_dim, qk_rope_head_dim, "
                                 "v_head_dim",
                                 c->dim, c->num_heads, c->kv_lora_rank,
                                 c->qk_nope_head_dim, c->qk_rope_head_dim,
                                 c->v_head_dim);
    if (status)
        return status;
    if (c->qk_rope_head_dim % 2 != 0)
        return mha_fail(GSL_EINVAL,
                        "%s: qk_rope_head_dim %zu must be even (RoPE turns "
                        "pairs of features)",
                        who, c->qk_rope_head_dim);
    char bs[TRACE_NUMBER_MAX], es[TRACE_NUMBER_MAX];
    if (!(c->rope_base == 0 || (isfinite(c->rope_base) && c->rope_base > 1)) ||
        !(c->eps == 0 || (isfinite(c->eps) && c->eps > 0)))
        return mha_fail(GSL_EINVAL,
                        "%s: rope_base %s must be 0 (the default) or a finite "
                        "number > 1, and eps %s 0 (the default) or a finite "
                        "number > 0",
                        who, trace_number_str(bs, sizeof bs, c->rope_base),
                        trace_number_str(es, sizeof es, c->eps));
    return GSL_SUCCESS;
}

int mla_init(mla *m, const mla_config *cfg)
{
    memset(m, 0, sizeof *m);
    int status = check_config("mla_init", cfg);
    if (status)
        return status;
    m->cfg = *cfg;
    if (m->cfg.rope_base == 0)
        m->cfg.rope_base = ROPE_DEFAULT_BASE;
    if (m->cfg.eps == 0)
        m->cfg.eps = MLA_DEFAULT_EPS;
    const mla_config *c = &m->cfg;
    // the sizes under the lesson's names, which name the layers' outputs
    size_t d_model = c->dim, h = c->num_heads, d_c = c->kv_lora_rank;
    size_t d_nope = c->qk_nope_head_dim, d_r = c->qk_rope_head_dim;
    size_t d_v = c->v_head_dim, qk = d_nope + d_r;
    if (c->q_lora_rank == 0) {
        STEP(linear_init(&m->wq, "wq", d_model, h * qk, 0));
    } else {
        STEP(linear_init(&m->wq_a, "wq_a", d_model, c->q_lora_rank, 0));
        STEP(tensor_alloc(SHAPE(c->q_lora_rank), &m->q_norm));
        STEP(linear_init(&m->wq_b, "wq_b", c->q_lora_rank, h * qk, 0));
    }
    STEP(linear_init(&m->wkv_a, "wkv_a", d_model, d_c + d_r, 0));
    STEP(tensor_alloc(SHAPE(d_c), &m->kv_norm));
    STEP(linear_init(&m->wkv_b, "wkv_b", d_c, h * (d_nope + d_v), 0));
    STEP(linear_init(&m->wo, "wo", h * d_v, d_model, 0));
done:
    if (status) {
        mla_free(m);
        return mha_fail_in(status, "mla_init");
    }
    if (m->q_norm)
        tensor_fill(m->q_norm, 1);
    tensor_fill(m->kv_norm, 1);
    // the names the trace gives each layer's output features; the queries'
    // low rank is d_q', a name with a prime, which no C name can have
    linear_name_output(&m->wq, NAMES(h * (d_nope + d_r)));
    linear_name_output(&m->wq_a, "d_q'");
    linear_name_output(&m->wq_b, NAMES(h * (d_nope + d_r)));
    linear_name_output(&m->wkv_a, NAMES(d_c + d_r));
    linear_name_output(&m->wkv_b, NAMES(h * (d_nope + d_v)));
    linear_name_output(&m->wo, NAMES(d_model));
    return GSL_SUCCESS;
}

void mla_free(mla *m)
{
    linear *layers[] = {&m->wq, &m->wq_a, &m->wq_b, &m->wkv_a, &m->wkv_b,
                        &m->wo};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (layers[i]->weight)
            linear_free(layers[i]);
    tensor_free(m->q_norm);
    tensor_free(m->kv_norm);
    memset(m, 0, sizeof *m);
}

void mla_reset(mla *m, gsl_rng *r)
{
    linear *layers[] = {&m->wq, &m->wq_a, &m->wq_b, &m->wkv_a, &m->wkv_b,
                        &m->wo};
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (layers[i]->weight)
            linear_reset_pytorch(layers[i], r);
    if (m->q_norm)
        tensor_fill_uniform(m->q_norm, r, 0.5, 1.5);
    tensor_fill_uniform(m->kv_norm, r, 0.5, 1.5);
}

/* --- RMSNorm -------------------------------------------------------- */

/* Each row of x divided by its root mean square (eps added to the mean
 * of its squares, under the root), then scaled feature by feature by the
 * weight.  Unlike LayerNorm (chapter 11) it subtracts no mean and adds no
 * shift.
 * What the tests check (ex_mla_rms_norm):
 * - out has x's shape and every row normalised, to 1e-14 of the values
 *   computed once in Python from the definition, for any leading
 *   dimensions and for a view x (the rows of a narrowed tensor): x's row
 *   [3, 4] with weight [2, 2] and eps 1e-6 gives [1.69706, 2.26274];
 * - a row of zeros stays zeros (eps keeps the division finite);
 * - a weight that is not (d,) for x (..., d): GSL_EBADLEN; an eps that is
 *   not a finite number > 0: GSL_EINVAL; each with *out NULL and a
 *   message that starts with "mla_rms_norm" and names the shapes or eps.
 * The handout blanks this body:
 * @exercise mla_rms_norm (chapter 20): RMSNorm, the latent's normalisation. */
int mla_rms_norm(const tensor *x, const tensor *weight, double eps,
                 tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX], ws[TRACE_SHAPE_MAX], es[TRACE_NUMBER_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    tensor_shape_str(weight, ws, sizeof ws);
    size_t d = x->shape[x->ndim - 1];
    if (weight->ndim != 1 || weight->shape[0] != d)
        return mha_fail(GSL_EBADLEN,
                        "mla_rms_norm: weight %s, expected (%zu,) for x %s", ws,
                        d, xs);
    if (!(isfinite(eps) && eps > 0))
        return mha_fail(GSL_EINVAL,
                        "mla_rms_norm: eps %s must be a finite number > 0 (x %s)",
                        trace_number_str(es, sizeof es, eps), xs);
    // y starts as a contiguous copy of x: rows of d, normalised in place
    tensor *y = NULL;
    int status = GSL_SUCCESS;
    {
        QUIET; // the copy is part of this one step
        STEP(tensor_contiguous(x, &y));
    }
    size_t rows = tensor_numel(y) / d;
    for (size_t r = 0; r < rows; r++) {
        double *y_r = y->data + r * d;
        // the mean of the squares, then one factor for the row
        double mean_square = 0;
        for (size_t j = 0; j < d; j++) {
            double v = y_r[j];
            mean_square += v * v / (double)d;
        }
        double root = sqrt(mean_square + eps); // never 0: eps > 0
        for (size_t j = 0; j < d; j++)
            y_r[j] = y_r[j] / root * *TENSOR_AT(weight, j);
    }
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, y, TRACE_INPUTS(TRACE_IN(x)),
               "rms_norm(eps=%g)", eps);
    *out = y;
done:
    if (status)
        return mha_fail_in(status, "mla_rms_norm");
    return GSL_SUCCESS;
}
//<
