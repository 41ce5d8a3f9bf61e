//> 18
/* mask.c: PyTorch's masks as one additive mask, and the module that reads
 * them; see mask.h.
 *
 * Shapes: attn_mask (Lq, Lk) or (B*h, Lq, Lk), key_padding (B, Lk),
 * merged (B*h, Lq, Lk'), weights (B, h, Lq, Lk') or (B, Lq, Lk'),
 * out (B, Lq, D_out). */
#include "nn/mask.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "nn/gqa.h"
#include "nn/kvcache.h"
#include "nn/linear.h"
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"

/* The records of the steps below, one home each: the steps and the
 * shapes-alone pass (mha trace) emit the same lines. */
static void trace_merge(const tensor *am, const tensor *kp, const tensor *m)
{
    tensor_trace_emit(TRACE_NEW, TRACE_SUM, m,
               TRACE_INPUTS(TRACE_NAMED(am, "attn_mask"),
                            TRACE_NAMED(kp, "key_padding")),
               "mask merge");
}

static void trace_grow(const char *why, const tensor *mask, const tensor *g)
{
    tensor_trace_note("%s: one more key, %s: Lk %zu -> %zu, and the mask grows a "
               "column of 0, visible to every query",
               why, strcmp(why, "add_bias_kv") ? "zeros" : "bias_k",
               mask->shape[2], mask->shape[2] + 1);
    tensor_trace_step(TRACE_COPY, mask, g, "pad(mask, (0, 1), value=0)");
}

static void trace_scores(const tensor *Qh, const tensor *Kh,
                         const tensor *mask, const tensor *w,
                         const tensor *Vh, const tensor *heads)
{
    tensor_trace_emit(TRACE_NEW, TRACE_SUM, w,
               TRACE_INPUTS(TRACE_IN(Qh), TRACE_IN_T(Kh, 1),
                            TRACE_NAMED(mask, "mask")),
               "softmax(Q K^T / sqrt(%zu) + mask)", Qh->shape[2]);
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, heads,
               TRACE_INPUTS(TRACE_IN(w), TRACE_IN(Vh)), "weights V");
}

static void trace_cat(const tensor *x, const tensor *extra, const char *name,
                      const tensor *y)
{
    if (extra) // add_bias_kv, before the split
        tensor_trace_emit(TRACE_COPY, TRACE_LIST, y,
                   TRACE_INPUTS(TRACE_IN(x), TRACE_NAMED(extra, name)),
                   "cat(%s, %s, dim=1)", name[5] == 'k' ? "K" : "V", name);
    else // add_zero_attn, after it
        tensor_trace_step(TRACE_COPY, x, y, "cat(%s, zeros, dim=1)", name);
}

static void trace_weights(const tensor *w, const tensor *y, int average)
{
    tensor_trace_step(average ? TRACE_NEW : TRACE_VIEW, w, y,
               average ? "mean over heads (average_attn_weights)"
                       : "reshape(B, h, Lq, Lk)");
}

/* What the trace says where K and V grow. */
static const char note_bias_kv[] =
    "add_bias_kv: bias_k and bias_v appended to K and V, before the split";
static const char note_zero_attn[] =
    "add_zero_attn: a zero key and value appended to every head after the "
    "split; its score is 0, a sink any row may give weight to";

static void trace_lens(int causal)
{
    tensor_trace_note("valid_lens%s: keys past each row's length get -inf",
               causal ? " and the causal rule" : "");
}

int mask_from_bool(const tensor *m, int true_hides, tensor **out)
{
    *out = NULL;
    tensor *x;
    int status = tensor_contiguous(m, &x);
    if (status)
        return mha_fail_in(status, "mask_from_bool");
    size_t n = tensor_numel(x);
    for (size_t e = 0; e < n; e++) {
        if (x->data[e] != 0 && x->data[e] != 1) {
            char v[TRACE_NUMBER_MAX], s[TRACE_SHAPE_MAX];
            trace_number_str(v, sizeof v, x->data[e]);
            tensor_shape_str(x, s, sizeof s);
            tensor_free(x);
            return mha_fail(GSL_EINVAL,
                            "mask_from_bool: element %zu of the mask %s is %s; "
                            "a bool mask holds 0 and 1",
                            e, s, v);
        }
        // the entry that hides: True in MHA's polarity, False in SDPA's
        int hides = (x->data[e] == 1) == (true_hides != 0);
        x->data[e] = hides ? -INFINITY : 0.0;
    }
    *out = x;
    return GSL_SUCCESS;
}

/* valid_lens (B,) against Lk: whole numbers 0 .. Lk. */
static int check_lens(const tensor *valid_lens, size_t Lk)
{
    char s[TRACE_SHAPE_MAX];
    tensor_shape_str(valid_lens, s, sizeof s);
    if (valid_lens->ndim != 1 || Lk == 0)
        return mha_fail(GSL_EINVAL,
                        "mask_key_padding_from_lens: valid_lens %s with Lk "
                        "%zu; expected (B,) and Lk >= 1",
                        s, Lk);
    for (size_t b = 0; b < valid_lens->shape[0]; b++) {
        double v = *TENSOR_AT(valid_lens, b);
        if (!(v >= 0 && v <= (double)Lk && v == floor(v)))
            return mha_fail(GSL_EINVAL,
                            "mask_key_padding_from_lens: valid_lens[%zu] = %g "
                            "is not a whole number from 0 to Lk = %zu",
                            b, v, Lk);
    }
    return GSL_SUCCESS;
}

/* What the tests check (ex_mask_key_padding_from_lens), against masks
 * written out by hand:
 * - *out is (B, Lk), row b False (0) for example b's first valid_lens[b]
 *   keys and True (1) after them: [3, 1] with Lk 4 gives [[0, 0, 0, 1],
 *   [0, 1, 1, 1]]; a length 0 hides every key, a length Lk none;
 * - a length past Lk, below 0 or not whole, or a valid_lens that is not
 *   (B,): GSL_EINVAL, *out NULL and a message that starts with
 *   "mask_key_padding_from_lens" and names what it refuses and Lk;
 * - a failed allocation returns its status (GSL_ENOMEM) with *out NULL
 *   and nothing left allocated.
 * The handout blanks this body:
 * @exercise mask_key_padding_from_lens (chapter 18): d2l's valid_lens as PyTorch's key_padding_mask. */
int mask_key_padding_from_lens(const tensor *valid_lens, size_t Lk,
                               tensor **out)
{
    *out = NULL;
    int status = check_lens(valid_lens, Lk);
    if (status)
        return status;
    size_t B = valid_lens->shape[0];
    tensor *kpm;
    status = tensor_alloc(SHAPE(B, Lk), &kpm);
    if (status)
        return mha_fail_in(status, "mask_key_padding_from_lens");
    // True (1) means "ignore this key": every key at or past the length
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < Lk; j++)
            *TENSOR_AT(kpm, b, j) = (double)j >= *TENSOR_AT(valid_lens, b);
    *out = kpm;
    return GSL_SUCCESS;
}

int mask_merge(const tensor *attn_mask, const tensor *key_padding, size_t B,
               size_t h, size_t Lq, size_t Lk, tensor **out)
{
    *out = NULL;
    char a[TRACE_SHAPE_MAX] = "", k[TRACE_SHAPE_MAX] = "";
    if (attn_mask)
        tensor_shape_str(attn_mask, a, sizeof a);
    if (key_padding)
        tensor_shape_str(key_padding, k, sizeof k);
    const tensor *am = attn_mask, *kp = key_padding;
    int am_2d = am && am->ndim == 2 && am->shape[0] == Lq && am->shape[1] == Lk;
    int am_3d = am && am->ndim == 3 && am->shape[0] == B * h &&
                am->shape[1] == Lq && am->shape[2] == Lk;
    if (am && !am_2d && !am_3d)
        return mha_fail(GSL_EBADLEN,
                        "mask_merge: attn_mask %s must be (Lq, Lk) = (%zu, %zu) "
                        "or (B*h, Lq, Lk) = (%zu, %zu, %zu)",
                        a, Lq, Lk, B * h, Lq, Lk);
    if (kp && !(kp->ndim == 2 && kp->shape[0] == B && kp->shape[1] == Lk))
        return mha_fail(GSL_EBADLEN,
                        "mask_merge: key_padding_mask %s must be (B, Lk) = "
                        "(%zu, %zu)",
                        k, B, Lk);
    tensor *m;
    int status = tensor_alloc(SHAPE(B * h, Lq, Lk), &m);
    if (status)
        return mha_fail_in(status, "mask_merge");
    tensor_set_names(m, NAMES(B * h, Lq, Lk));
    // row n = b*h + i of the merged mask: head i of example b
    for (size_t n = 0; n < B * h; n++)
        for (size_t i = 0; i < Lq; i++)
            for (size_t j = 0; j < Lk; j++) {
                double s = 0;
                if (am)
                    s += am_2d ? *TENSOR_AT(am, i, j) : *TENSOR_AT(am, n, i, j);
                if (kp)
                    s += *TENSOR_AT(kp, n / h, j);
                *TENSOR_AT(m, n, i, j) = s;
            }
    trace_merge(am, kp, m);
    *out = m;
    return GSL_SUCCESS;
}

int mask_grow(const tensor *mask, const char *why, tensor **out)
{
    *out = NULL;
    size_t N = mask->shape[0], Lq = mask->shape[1], Lk = mask->shape[2];
    tensor *g;
    int meta = tensor_is_meta(mask);
    int status = meta ? tensor_alloc_meta(SHAPE(N, Lq, Lk + 1), &g)
                      : tensor_alloc(SHAPE(N, Lq, Lk + 1), &g);
    if (status)
        return mha_fail_in(status, "mask_grow");
    tensor_set_names(g, "B*h, Lq, Lk'");
    for (size_t n = 0; n < (meta ? 0 : N); n++)
        for (size_t i = 0; i < Lq; i++) {
            for (size_t j = 0; j < Lk; j++)
                *TENSOR_AT(g, n, i, j) = *TENSOR_AT(mask, n, i, j);
            *TENSOR_AT(g, n, i, Lk) = 0.0; // the new key: visible
        }
    trace_grow(why, mask, g);
    *out = g;
    return GSL_SUCCESS;
}

int mask_find_empty_row(const tensor *mask, size_t *n, size_t *i)
{
    for (size_t r = 0; r < mask->shape[0]; r++)
        for (size_t q = 0; q < mask->shape[1]; q++) {
            size_t j = 0;
            while (j < mask->shape[2] && *TENSOR_AT(mask, r, q, j) == -INFINITY)
                j++;
            if (j == mask->shape[2]) {
                *n = r;
                *i = q;
                return 1;
            }
        }
    return 0;
}

/* The merged mask with one more key for bias_k and one for the zero key,
 * as opt asks: visible to every query. */
static int mask_add_keys(const mask_options *opt, tensor **mask)
{
    const char *why[2] = {opt->bias_k ? "add_bias_kv" : NULL,
                          opt->add_zero_attn ? "add_zero_attn" : NULL};
    int status = GSL_SUCCESS;
    for (int g = 0; g < 2; g++) {
        tensor *grown = NULL;
        if (why[g])
            STEP(mask_grow(*mask, why[g], &grown));
        if (grown) {
            tensor_free(*mask);
            *mask = grown;
        }
    }
done:
    return status;
}

/* Step 0: every mask of the call as one (B*h, Lq, Lk'), checked for
 * empty rows.  valid_lens and the causal rule hide keys j >= the row's
 * length (a length of 0 hides them all: PyTorch's key_padding_mask would). */
static int merged_mask(const multihead *m, size_t B, size_t Lq, size_t Lk,
                       const mask_options *opt, tensor **out)
{
    size_t h = m->cfg.num_heads;
    tensor *mask = NULL;
    int status = GSL_SUCCESS;
    STEP(mask_merge(opt->attn_mask, opt->key_padding, B, h, Lq, Lk, &mask));
    if (opt->valid_lens || m->cfg.causal) {
        for (size_t n = 0; n < B * h; n++)
            for (size_t i = 0; i < Lq; i++) {
                size_t len = softmax_row_len(opt->valid_lens, m->cfg.causal,
                                             n / h, i, Lq, Lk);
                for (size_t j = len; j < Lk; j++)
                    *TENSOR_AT(mask, n, i, j) = -INFINITY;
            }
        trace_lens(m->cfg.causal);
    }
    STEP(mask_add_keys(opt, &mask));
    size_t n, i;
    if (mask_find_empty_row(mask, &n, &i)) {
        char s[TRACE_SHAPE_MAX];
        STEP(mha_fail(GSL_EDOM,
                      "query %zu of example %zu, head %zu sees no key: "
                      "every entry of its row of the merged mask %s is "
                      "-inf (PyTorch's nn.MultiheadAttention gives NaN "
                      "there)",
                      i, n / h, n % h, tensor_shape_str(mask, s, sizeof s)));
    }
done:
    if (status) {
        tensor_free(mask);
        return status;
    }
    *out = mask;
    return GSL_SUCCESS;
}

/* x (N, L, F) with one more key (or value) appended to every n:
 * (N, L + 1, F).  add_bias_kv appends extra (1, 1, F), bias_k or bias_v,
 * to the projections (B, Lk, G*p) before the split into heads;
 * add_zero_attn (extra NULL) appends zeros to the heads (B*G, Lk', p)
 * after it.  name: "bias_k", "bias_v", or "K", "V" for the zeros.  A
 * shape-only x gives a shape-only *out. */
static int append_key(const tensor *x, const tensor *extra, const char *name,
                      tensor **out)
{
    size_t N = x->shape[0], L = x->shape[1], F = x->shape[2];
    tensor *y;
    int meta = tensor_is_meta(x);
    int status = meta ? tensor_alloc_meta(SHAPE(N, L + 1, F), &y)
                      : tensor_alloc(SHAPE(N, L + 1, F), &y);
    if (status)
        return status;
    tensor_set_names(y, extra ? "B, Lk', G*p" : "B*G, Lk', p");
    for (size_t n = 0; n < (meta ? 0 : N); n++) {
        for (size_t l = 0; l < L; l++)
            for (size_t f = 0; f < F; f++)
                *TENSOR_AT(y, n, l, f) = *TENSOR_AT(x, n, l, f);
        for (size_t f = 0; f < F; f++)
            *TENSOR_AT(y, n, L, f) = extra ? *TENSOR_AT(extra, 0, 0, f) : 0.0;
    }
    trace_cat(x, extra, name, y);
    *out = y;
    return GSL_SUCCESS;
}

/* *k and *v each with one more key, in place of the two: bias_k and
 * bias_v (add_bias_kv, before the split into heads), or zeros when they
 * are NULL (add_zero_attn, after it). */
static int append_keys(tensor **k, tensor **v, const tensor *bias_k,
                       const tensor *bias_v)
{
    tensor_trace_note("%s", bias_k ? note_bias_kv : note_zero_attn);
    tensor **x[2] = {k, v};
    const tensor *extra[2] = {bias_k, bias_v};
    const char *name[2] = {bias_k ? "bias_k" : "K", bias_k ? "bias_v" : "V"};
    int status = GSL_SUCCESS;
    for (int i = 0; i < 2; i++) {
        tensor *y = NULL;
        STEP(append_key(*x[i], extra[i], name[i], &y));
        tensor_free(*x[i]);
        *x[i] = y;
    }
done:
    return status;
}

/* Steps 1-2 of the masked forward, with numbers or on shapes alone: Q, K
 * and V projected (B, Lq, d_model), (B, Lk, G*p), Q and K turned by
 * position (RoPE), add_bias_kv's key and value appended (Lk -> Lk + 1),
 * the split into heads (kv_step_split), and add_zero_attn's zero key and
 * value appended to every head after it.  What it made is in *s (all
 * NULL before), for kv_step_free. */
static int project_heads(const multihead *m, const tensor *queries,
                         const tensor *keys, const tensor *values,
                         const mask_options *opt, const char *who, kv_step *s)
{
    long Lq = (long)queries->shape[1], Lk = (long)keys->shape[1];
    int status = GSL_SUCCESS;
    // step 1: the projections, and RoPE on Q and K
    STEP(linear_steps(&m->W_q, queries, &s->q));
    STEP(linear_steps(&m->W_k, keys, &s->k));
    STEP(linear_steps(&m->W_v, values, &s->v));
    STEP(multihead_rope(m, &s->q, Lk - Lq, who, "Q"));
    STEP(multihead_rope(m, &s->k, 0, who, "K"));
    // add_bias_kv: one learned key and value per example, Lk -> Lk + 1
    if (opt->bias_k)
        STEP(append_keys(&s->k, &s->v, opt->bias_k, opt->bias_v));
    // step 2: split into heads
    STEP(kv_step_split(m, s));
    // add_zero_attn: a zero key and value in every head, after the split
    if (opt->add_zero_attn)
        STEP(append_keys(&s->kh, &s->vh, NULL, NULL));
done:
    return status;
}

/* Steps 3-4 for every row n = b*h + i of the queries Qh (B*h, Lq, p):
 * scores against its group's key-value head of example b in Kh (gqa.h),
 * plus the mask, softmax over the visible keys (a -inf entry gets weight
 * exactly 0), the weighted values into heads (B*h, Lq, p). */
static void attend(const multihead *m, const tensor *Qh, const tensor *Kh,
                   const tensor *Vh, const tensor *mask, tensor *w,
                   tensor *heads)
{
    size_t h = m->cfg.num_heads, G = m->cfg.kv_heads ? m->cfg.kv_heads : h;
    size_t N = Qh->shape[0], Lq = Qh->shape[1], p = Qh->shape[2];
    size_t Lk = Kh->shape[1];
    double scale = 1.0 / sqrt((double)p);
    for (size_t n = 0; n < N; n++) {
        size_t kv = 0;
        gqa_kv_head(n % h, h, G, &kv);
        size_t r = (n / h) * G + kv; // the row of Kh and Vh it reads
        for (size_t i = 0; i < Lq; i++) {
            double *w_ni = w->data + (n * Lq + i) * Lk;
            // pass 1: the scaled scores plus the mask, and the row max
            double max = -INFINITY;
            for (size_t j = 0; j < Lk; j++) {
                double s = 0;
                for (size_t f = 0; f < p; f++)
                    s += *TENSOR_AT(Qh, n, i, f) * *TENSOR_AT(Kh, r, j, f);
                w_ni[j] = s * scale + *TENSOR_AT(mask, n, i, j);
                if (w_ni[j] > max)
                    max = w_ni[j];
            }
            // pass 2: exp and sum over the visible keys; hidden ones are 0
            double sum = 0;
            for (size_t j = 0; j < Lk; j++) {
                w_ni[j] = w_ni[j] == -INFINITY ? 0.0 : exp(w_ni[j] - max);
                sum += w_ni[j];
            }
            // pass 3: normalise, and the weighted sum of the values
            for (size_t f = 0; f < p; f++)
                *TENSOR_AT(heads, n, i, f) = 0;
            for (size_t j = 0; j < Lk; j++) {
                w_ni[j] /= sum;
                for (size_t f = 0; f < p; f++)
                    *TENSOR_AT(heads, n, i, f) += w_ni[j] * *TENSOR_AT(Vh, r, j, f);
            }
        }
    }
}

/* weights (B*h, Lq, Lk) as (B, h, Lq, Lk), or its mean over the heads
 * (B, Lq, Lk): average_attn_weights. */
static int shape_weights(const tensor *w, size_t B, size_t h, int average,
                         tensor **out)
{
    size_t Lq = w->shape[1], Lk = w->shape[2];
    tensor *y;
    int status = average ? tensor_alloc(SHAPE(B, Lq, Lk), &y)
                         : tensor_alloc(SHAPE(B, h, Lq, Lk), &y);
    if (status)
        return status;
    if (average) {
        tensor_fill(y, 0);
        for (size_t n = 0; n < B * h; n++)
            for (size_t e = 0; e < Lq * Lk; e++)
                y->data[(n / h) * Lq * Lk + e] += w->data[n * Lq * Lk + e];
        for (size_t e = 0; e < B * Lq * Lk; e++)
            y->data[e] /= (double)h;
    } else {
        memcpy(y->data, w->data, B * h * Lq * Lk * sizeof(double));
    }
    tensor_set_names(y, average ? "B, Lq, Lk'" : "B, h, Lq, Lk'");
    trace_weights(w, y, average);
    *out = y;
    return GSL_SUCCESS;
}

//> handout
/* A shape-only tensor named names into *t, replacing the one there. */
static int meta_step(tensor **t, size_t ndim, const size_t *shape,
                     const char *names)
{
    tensor *y;
    int status = tensor_alloc_meta(ndim, shape, &y);
    if (status)
        return status;
    tensor_set_names(y, names);
    tensor_free(*t);
    *t = y;
    return GSL_SUCCESS;
}

/* multihead_forward_masked on shapes alone (mha trace): the same steps
 * and records, no numbers; the module is shape-only and opt's masks and
 * bias_k, bias_v are shape-only tensors or NULL. */
static int shapes_alone(const multihead *m, const tensor *queries,
                        const tensor *keys, const tensor *values,
                        const mask_options *opt, tensor **out,
                        tensor **weights)
{
    size_t B = queries->shape[0], Lq = queries->shape[1], Lk = keys->shape[1];
    size_t h = m->cfg.num_heads, p = m->cfg.num_hiddens / h;
    tensor *mask = NULL, *w = NULL, *heads = NULL, *joined = NULL;
    kv_step s = {0};
    int status = GSL_SUCCESS;
    STEP(meta_step(&mask, SHAPE(B * h, Lq, Lk), NAMES(B * h, Lq, Lk)));
    trace_merge(opt->attn_mask, opt->key_padding, mask);
    if (opt->valid_lens || m->cfg.causal)
        trace_lens(m->cfg.causal);
    STEP(mask_add_keys(opt, &mask));
    STEP(project_heads(m, queries, keys, values, opt, "mha", &s));
    size_t Lk2 = mask->shape[2];
    STEP(meta_step(&w, SHAPE(B * h, Lq, Lk2), "B*h, Lq, Lk'"));
    STEP(meta_step(&heads, SHAPE(B * h, Lq, p), NAMES(B * h, Lq, p)));
    trace_scores(s.qh, s.kh, mask, w, s.vh, heads);
    STEP(transpose_output(heads, h, &joined));
    STEP(linear_steps(&m->W_o, joined, out));
    if (weights) {
        STEP(opt->average_weights
                 ? meta_step(weights, SHAPE(B, Lq, Lk2), "B, Lq, Lk'")
                 : meta_step(weights, SHAPE(B, h, Lq, Lk2), "B, h, Lq, Lk'"));
        trace_weights(w, *weights, opt->average_weights);
    }
done:
    kv_step_free(&s);
    TENSORS_FREE(mask, w, heads, joined);
    return status;
}
//<

int multihead_forward_masked(const multihead *m, const tensor *queries,
                             const tensor *keys, const tensor *values,
                             const mask_options *opt, tensor **out,
                             tensor **weights)
{
    const char *who = "multihead_forward_masked";
    *out = NULL;
    if (weights)
        *weights = NULL;
    size_t B = queries->shape[0], Lq = queries->shape[1], Lk = keys->shape[1];
    size_t h = m->cfg.num_heads, p = m->cfg.num_hiddens / h;
    tensor *mask = NULL, *w = NULL, *heads = NULL, *joined = NULL;
    kv_step s = {0}; // the projections and their heads
    SCOPE_OF(TRACE_QKV(queries, keys, values),
             "multihead_masked(h=%zu)", h);
//> handout
    if (tensor_is_meta(queries)) { // mha trace: shapes alone
        int status = shapes_alone(m, queries, keys, values, opt, out, weights);
        return status ? mha_fail_in(status, "%s", who) : GSL_SUCCESS;
    }
//<
    int status = GSL_SUCCESS;
    // step 0: the masks, merged and checked before any product.  A key
    // appended for every query (add_bias_kv, add_zero_attn) leaves no row
    // empty: the causal rule's rows are checked with it, in the merged
    // mask, not before
    multihead checked = *m;
    checked.cfg.causal = m->cfg.causal && !opt->bias_k && !opt->add_zero_attn;
    STEP(multihead_check_inputs(&checked, queries, keys, values,
                                opt->valid_lens));
    STEP(merged_mask(m, B, Lq, Lk, opt, &mask));
    // steps 1-2: the projections, RoPE, the split into heads, and the
    // keys add_bias_kv and add_zero_attn append
    STEP(project_heads(m, queries, keys, values, opt, who, &s));
    // steps 3-4: masked scores, softmax, the weighted values
    size_t Lk2 = s.kh ? s.kh->shape[1] : 0;
    STEP(tensor_alloc(SHAPE(B * h, Lq, Lk2), &w));
    STEP(tensor_alloc(SHAPE(B * h, Lq, p), &heads));
    tensor_set_names(w, "B*h, Lq, Lk'");
    tensor_set_names(heads, NAMES(B * h, Lq, p));
    attend(m, s.qh, s.kh, s.vh, mask, w, heads);
    trace_scores(s.qh, s.kh, mask, w, s.vh, heads);
    // step 5: join the heads, W_o
    STEP(transpose_output(heads, h, &joined));
    STEP(linear_steps(&m->W_o, joined, out));
    if (weights)
        STEP(shape_weights(w, B, h, opt->average_weights, weights));
    STEP(tensor_check_result(*out, who, "output", "out"));
done:
    kv_step_free(&s);
    TENSORS_FREE(mask, w, heads, joined);
    if (status) {
        tensor_free(*out);
        *out = NULL;
        if (weights) {
            tensor_free(*weights);
            *weights = NULL;
        }
        return mha_fail_in(status, "%s", who);
    }
    return GSL_SUCCESS;
}
//<
