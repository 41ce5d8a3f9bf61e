//> 08
/* multihead.c: the multi-head attention module and its forward pass; see
 * multihead.h for the steps (splitting into heads and joining them:
 * heads.c; the cache the backward pass reads: multihead_cache.c).
 *
 * Shapes: B batch, Lq queries, Lk key-value pairs, d_model = num_hiddens,
 * h heads of p = d_model/h features, D_out output features. */
#include "nn/multihead.h"

#include <math.h>
#include <string.h>

#include "base/error.h"
#include "nn/multihead_internal.h"
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"
//> 12
#include "nn/flash.h"
//<
//> 15
#include "nn/posenc.h"
//<
//> 19
#include "nn/window.h"
//<

/* --- the module ----------------------------------------------------- */

int multihead_init(multihead *m, const multihead_config *cfg)
{
    memset(m, 0, sizeof *m);
    m->cfg = *cfg;
    if (m->cfg.out_size == 0)
        m->cfg.out_size = cfg->num_hiddens;
    const multihead_config *c = &m->cfg;
    if (c->num_heads == 0 || c->num_hiddens == 0 || c->query_size == 0 ||
        c->key_size == 0 || c->value_size == 0)
        return mha_fail(GSL_EINVAL,
                        "multihead: sizes must be >= 1 (query_size %zu, "
                        "key_size %zu, value_size %zu, num_hiddens %zu, "
                        "num_heads %zu)",
                        c->query_size, c->key_size, c->value_size,
                        c->num_hiddens, c->num_heads);
    if (c->num_hiddens % c->num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "multihead: num_hiddens %zu is not divisible by "
                        "num_heads %zu",
                        c->num_hiddens, c->num_heads);
//> 15
    if (c->rope && (c->num_hiddens / c->num_heads) % 2 != 0)
        return mha_fail(GSL_EBADLEN,
                        "multihead: rope turns pairs of features, but the "
                        "head size p = d_model/h = %zu/%zu = %zu is odd",
                        c->num_hiddens, c->num_heads,
                        c->num_hiddens / c->num_heads);
    if (c->rope && m->cfg.rope_base == 0)
        m->cfg.rope_base = ROPE_DEFAULT_BASE;
    char base[TRACE_NUMBER_MAX];
    if (c->rope && !(isfinite(c->rope_base) && c->rope_base > 1))
        return mha_fail(GSL_EINVAL,
                        "multihead: rope_base %s must be a finite number > 1",
                        trace_number_str(base, sizeof base, c->rope_base));
//<
//> 17
    if (m->cfg.kv_heads == 0)
        m->cfg.kv_heads = c->num_heads;
    if (c->num_heads % c->kv_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "multihead: kv_heads G = %zu does not divide "
                        "num_heads h = %zu (each key-value head serves h/G "
                        "query heads)",
                        c->kv_heads, c->num_heads);
//<
    // the sizes under the lesson's names, which name the layers' outputs
    size_t d_q = c->query_size, d_k = c->key_size, d_v = c->value_size;
    size_t d_model = c->num_hiddens, D_out = c->out_size;
    size_t kv_size = d_model; // keys and values: h heads of p
    const char *kv_name = NAMES(d_model);
//> 17
    // with G key-value heads: G heads of p = d_model/h features each
    size_t G = c->kv_heads, h = c->num_heads;
    kv_size = G * (d_model / h);
    if (G < h)
        kv_name = NAMES(G*d_model/h);
//<
    // a pointer, since `mha trace` makes layers of shapes alone
    // (linear_init_meta), in lines the book does not show
    int (*init)(linear *, const char *, size_t, size_t, int) = linear_init;
//> handout
    if (c->shape_only)
        init = linear_init_meta;
//<
    int status = GSL_SUCCESS;
    STEP(dot_attention_init(&m->attention, c->dropout));
    STEP(init(&m->W_q, "W_q", d_q, d_model, c->bias));
    STEP(init(&m->W_k, "W_k", d_k, kv_size, c->bias));
    STEP(init(&m->W_v, "W_v", d_v, kv_size, c->bias));
    STEP(init(&m->W_o, "W_o", d_model, D_out, c->bias));
    linear_name_output(&m->W_q, NAMES(d_model));
    linear_name_output(&m->W_k, kv_name);
    linear_name_output(&m->W_v, kv_name);
    // W_o maps back to d_model features unless out_size asks otherwise
    linear_name_output(&m->W_o, D_out == d_model ? NAMES(d_model)
                                                 : NAMES(D_out));
//> 19
    if (c->window)
        m->cfg.causal = 1; // a window is causal, and shorter
    if (c->alibi && !c->causal)
        STEP(mha_fail(GSL_EINVAL,
                      "multihead: alibi needs causal or a window (its bias "
                      "-m_h (i' - j) grows with the distance to earlier "
                      "keys)"));
    if (c->keep_first && !c->window)
        STEP(mha_fail(GSL_EINVAL,
                      "multihead: keep_first %zu needs a window (every key "
                      "is kept without one)",
                      c->keep_first));
    if (c->alibi)
        STEP(alibi_slopes(c->num_heads, &m->slopes));
    if (c->sinks) {
        STEP(tensor_alloc(SHAPE(h), &m->sinks));
        tensor_set_names(m->sinks, NAMES(h));
    }
//<
done:
    if (status)
        multihead_free(m);
    return status;
}

void multihead_free(multihead *m)
{
    linear_free(&m->W_q);
    linear_free(&m->W_k);
    linear_free(&m->W_v);
    linear_free(&m->W_o);
    dot_attention_free(&m->attention);
//> 19
    tensor_free(m->slopes);
    tensor_free(m->sinks);
    m->slopes = m->sinks = NULL;
//<
}

//> 15
int multihead_rope(const multihead *m, tensor **x, long start,
                   const char *who, const char *name)
{
    if (!m->cfg.rope)
        return GSL_SUCCESS;
    // an overflow before the rotation is the projection's, and named so
    int status = tensor_check_result(*x, who, "projection", name);
    if (status)
        return status;
    tensor *turned = NULL;
    status = rope_apply(*x, m->cfg.num_hiddens / m->cfg.num_heads, start,
                            m->cfg.rope_base, &turned);
    if (status)
        return status;
    tensor_free(*x);
    *x = turned;
    return tensor_check_result(*x, who, "rotation", name);
}
//<

//> 17
int multihead_split_kv(const multihead *m, const tensor *x, const char *name,
                       tensor **out)
{
    size_t h = m->cfg.num_heads, G = m->cfg.kv_heads;
    if (G < h)
        tensor_trace_note("%s has G = %zu key-value heads, not h = %zu: transpose_qkv "
                   "splits it with h=%zu",
                   name, G, h, G);
    return transpose_qkv(x, G, out);
}
//<

void multihead_reset_xavier(multihead *m, gsl_rng *r)
{
    linear_reset_xavier_uniform(&m->W_q, r);
    linear_reset_xavier_uniform(&m->W_k, r);
    linear_reset_xavier_uniform(&m->W_v, r);
    linear_reset_xavier_uniform(&m->W_o, r);
}

void multihead_train(multihead *m, int training, gsl_rng *rng)
{
    m->attention.training = training;
    m->attention.rng = rng;
}

/* --- the forward pass ----------------------------------------------- */

static void steps_free(steps *s)
{
    tensor *all[] = {s->q,    s->k,     s->v,      s->qh,     s->kh,
                     s->vh,   s->lens,  s->heads,  s->concat, s->weights};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
//> 14
    tensor_free(s->unmasked);
//<
}

//> 12
/* The module as its trace header names it after "multihead(": "h=5)", its
 * options, then the parenthesis closed; later chapters add options inside
 * it (", causal") and after it (", tiled"). */
static const char *options(const multihead *m, char *buf, size_t n)
{
    snprintf(buf, n, "h=%zu", m->cfg.num_heads);
//> 17
    if (m->cfg.kv_heads < m->cfg.num_heads)
        snprintf(buf + strlen(buf), n - strlen(buf), ", G=%zu", m->cfg.kv_heads);
//<
//> 16
/*< 19
    if (m->cfg.causal)
*/
//> 19
    if (m->cfg.causal && !m->cfg.window) // a window says so itself
//<
        snprintf(buf + strlen(buf), n - strlen(buf), ", causal");
//<
//> 19
    multihead_window_options(m, buf + strlen(buf), n - strlen(buf));
//<
    snprintf(buf + strlen(buf), n - strlen(buf), ")");
//> 13
    if (m->cache)
        snprintf(buf + strlen(buf), n - strlen(buf), ", cached");
//<
//> 12
    if (m->tiled)
        snprintf(buf + strlen(buf), n - strlen(buf), ", tiled");
//<
    return buf;
}
//<

int multihead_find_overflow(const char *who, const tensor *out,
                            const multihead_stage *stages, size_t n)
{
    if (tensor_check_result(out, who, "output", "out") == GSL_SUCCESS)
        return GSL_SUCCESS;
    int status = GSL_SUCCESS;
    for (size_t i = 0; i < n && !status; i++)
        if (stages[i].result)
            status = tensor_check_result(stages[i].result, who,
                                         stages[i].what, stages[i].name);
    return status ? status : tensor_check_result(out, who, "output", "out");
}

/* The forward pass's stages for multihead_find_overflow: the
 * projections, the weights when they were made (an overflowing score
 * makes its row NaN; tile by tile none are), the heads. */
static int check_overflow(const steps *s, const tensor *out)
{
    multihead_stage stages[] = {
        {s->q, "projection", "Q"},
        {s->k, "projection", "K"},
        {s->v, "projection", "V"},
        {s->weights, "scores' softmax", "weights"},
        {s->heads, "weighted sum of the values", "heads"},
    };
    return multihead_find_overflow("multihead_forward", out, stages,
                                   sizeof stages / sizeof stages[0]);
}

/* A view made untraced (QUIET: no trace line until the function
 * returns), since handing the weights out is no step of the pass: the
 * numbers are the same however step 4 laid out its rows. */
int multihead_head_weights(const multihead *m, const tensor *w, size_t B,
                           size_t Lq, tensor **out)
{
    *out = NULL;
    if (!w)
        return GSL_SUCCESS;
    long h = (long)m->cfg.num_heads, Lk = (long)w->shape[w->ndim - 1];
    QUIET;
    return tensor_view(w, SIZES((long)B, h, (long)Lq, Lk),
                       NAMES(B, h, Lq, Lk), out);
}

//> 14
static int apply_head_mask(const tensor *mask, tensor **heads,
                           tensor **unmasked);
//<
//> 16
static int head_lens(const multihead *m, const tensor *valid_lens,
                     size_t batch, size_t Lq, size_t Lk, tensor **out);
//<

/* The inputs under the lesson's names, as the trace prints them: views
 * that share the caller's tensors (tensor_named). */
typedef struct inputs {
    tensor q, k, v; /* (B, Lq, d_q), (B, Lk, d_k), (B, Lk, d_v) */
    tensor lens;    /* (B,) or (B, Lq), when there are valid_lens */
} inputs;

/* The inputs named for the steps, by the names of their sizes. */
static inputs name_inputs(const tensor *queries, const tensor *keys,
                          const tensor *values, const tensor *valid_lens)
{
    size_t B = queries->shape[0], Lq = queries->shape[1], Lk = keys->shape[1];
    size_t d_q = queries->shape[2], d_k = keys->shape[2];
    size_t d_v = values->shape[2];
    inputs in = {.q = tensor_named(queries, NAMES(B, Lq, d_q)),
                 .k = tensor_named(keys, NAMES(B, Lk, d_k)),
                 .v = tensor_named(values, NAMES(B, Lk, d_v))};
    if (valid_lens)
        in.lens = tensor_named(valid_lens, valid_lens->ndim == 2
                                               ? NAMES(B, Lq)
                                               : NAMES(B));
    return in;
}

/* The six steps of multihead.h, each call with the shape it makes (steps
 * 1-2 are a projection and a split for each of Q, K and V), on inputs
 * multihead_forward has checked; what each step makes stays in *s, for
 * multihead_forward to check and free. */
static int multihead_steps(multihead *m, const tensor *queries,
                           const tensor *keys, const tensor *values,
                           const tensor *valid_lens, steps *s, tensor **out)
{
    size_t h = m->cfg.num_heads;
//> 15
    long Lq = (long)queries->shape[1], Lk = (long)keys->shape[1];
//<
    int status = GSL_SUCCESS;
    // 1-2. project Q with W_q, then split it into h heads:
    //      (B, Lq, d_q) -> (B, Lq, d_model) -> (B*h, Lq, d_model/h)
    STEP(linear_steps(&m->W_q, queries, &s->q));
//> 15
    STEP(multihead_rope(m, &s->q, Lk - Lq, "multihead_forward", "Q"));
//<
    STEP(transpose_qkv(s->q, h, &s->qh));
    //      K and V alike: (B, Lk, d_k) -> (B, Lk, d_model) -> (B*h, Lk, d_model/h)
    STEP(linear_steps(&m->W_k, keys, &s->k));
//> 15
    STEP(multihead_rope(m, &s->k, 0, "multihead_forward", "K"));
//<
/*< 17
    STEP(transpose_qkv(s->k, h, &s->kh));
*/
//> 17
    STEP(multihead_split_kv(m, s->k, "K", &s->kh)); // G heads: (B*G, Lk, p)
//<
    STEP(linear_steps(&m->W_v, values, &s->v));
/*< 17
    STEP(transpose_qkv(s->v, h, &s->vh));
*/
//> 17
    STEP(multihead_split_kv(m, s->v, "V", &s->vh));
//<
    // 3. valid_lens for every head, in repeat_interleave order: (B*h,)
    //    or (B*h, Lq)
/*< 16
    if (valid_lens)
        STEP(repeat_valid_lens(valid_lens, h, &s->lens));
*/
//> 16
    STEP(head_lens(m, valid_lens, queries->shape[0], queries->shape[1],
                   keys->shape[1], &s->lens)); // causal too
//<
    // 4. attention on all B*h heads at once: (B*h, Lq, d_model/h), and
    //    their weights (B*h, Lq, Lk)
/*< 12
    STEP(dot_attention_steps(&m->attention, s->qh, s->kh, s->vh, s->lens,
                             &s->heads, &s->weights));
*/
//> 12
    STEP(multihead_attend(m, s->qh, s->kh, s->vh, s->lens, &s->heads,
                          &s->weights));
//<
//> 14
    if (m->head_mask) // head i's outputs times head_mask[i]
        STEP(apply_head_mask(m->head_mask, &s->heads, &s->unmasked));
//<
    // 5. the heads side by side again: (B, Lq, d_model)
    STEP(transpose_output(s->heads, h, &s->concat));
    // 6. W_o mixes them: (B, Lq, D_out)
    STEP(linear_steps(&m->W_o, s->concat, out));
done:
    return status;
}

/* The module's door: the inputs are checked (finite, shapes that agree),
 * the trace's line for the module opened (the module, its options, its
 * inputs), the inputs named as the trace shows them, the six steps run on
 * them (multihead_steps), and the result is checked once at the end
 * (check_overflow).  The per-head weights go to the caller who asks for
 * them, as (B, h, Lq, Lk). */
int multihead_forward(multihead *m, const tensor *queries,
                      const tensor *keys, const tensor *values,
                      const tensor *valid_lens, tensor **out,
                      tensor **weights)
{
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = multihead_check_inputs(m, queries, keys, values, valid_lens);
    if (status)
        return status;
/*< 12
    SCOPE_OF(TRACE_QKV_LENS(queries, keys, values, valid_lens),
             "multihead(h=%zu)", m->cfg.num_heads);
*/
//> 12
    char opt[128];
    SCOPE_OF(TRACE_QKV_LENS(queries, keys, values, valid_lens), "multihead(%s",
             options(m, opt, sizeof opt));
//<
    inputs in = name_inputs(queries, keys, values, valid_lens);
    steps s = {0};
    STEP(multihead_steps(m, &in.q, &in.k, &in.v,
                         valid_lens ? &in.lens : NULL, &s, out));
    STEP(check_overflow(&s, *out));
//> 13
    if (m->cache) // what the backward pass reads
        STEP(multihead_keep_steps(m, &s, queries, keys, values));
//<
    if (weights) // the per-head weights, (B, h, Lq, Lk)
        STEP(multihead_head_weights(m, s.weights, queries->shape[0],
                                    queries->shape[1], weights));
done:
    steps_free(&s);
    if (status) {
        tensor_free(*out);
        *out = NULL;
    }
    return status;
}

//> 16
/* Step 3 with the causal rule: the lengths each head's rows see, (B*h,)
 * or (B*h, Lq), or NULL for no mask.  With causal, valid_lens and the
 * causal rule become one length per row (B, Lq) first. */
static int head_lens(const multihead *m, const tensor *valid_lens,
                     size_t batch, size_t Lq, size_t Lk, tensor **out)
{
    *out = NULL;
    size_t h = m->cfg.num_heads;
    if (!valid_lens && !m->cfg.causal)
        return GSL_SUCCESS; // no mask
    int per_row = m->cfg.causal;
//> 17
    // with G < h the folded rows of step 4b need one length per row too
    per_row = per_row || m->cfg.kv_heads < h;
//<
    if (!per_row)
        return repeat_valid_lens(valid_lens, h, out);
    tensor *rows = NULL; // (B, Lq)
    int shape_only = 0;
//> handout
    shape_only = m->cfg.shape_only;
//<
    int status = GSL_SUCCESS;
    STEP(valid_lens_per_row(valid_lens, m->cfg.causal, batch, Lq, Lk,
                            shape_only, &rows));
    STEP(repeat_valid_lens(rows, h, out));
done:
    tensor_free(rows);
    return status;
}
//<

//> 17
/* x (B*G, Lk, p), one key-value head per batch row, shared by the h/G
 * query heads of its group: the view (B*G, h/G, Lk, p) with stride 0
 * along the group, made and traced to show the sharing (nothing reads it:
 * the folded rows of step 4b read x itself). */
static int share_heads(const tensor *x, size_t h, size_t G)
{
    tensor *one = NULL, *shared = NULL;
    // x's names, and the new dimension's: 1, then h/G
    char names[4 * TENSOR_NAME_MAX] = "", single[4 * TENSOR_NAME_MAX] = "";
    if (x->names[0][0]) {
        snprintf(single, sizeof single, "%s, 1, %s, %s", x->names[0],
                 x->names[1], x->names[2]);
        snprintf(names, sizeof names, "%s, %s, %s, %s", x->names[0],
                 NAMES(h / G), x->names[1], x->names[2]);
    }
    int status = GSL_SUCCESS;
    STEP(tensor_view(x, SIZES((long)x->shape[0], 1, (long)x->shape[1],
                              (long)x->shape[2]),
                     single[0] ? single : NULL, &one));
    STEP(tensor_expand(one, SIZES(-1, (long)(h / G), -1, -1),
                       names[0] ? names : NULL, &shared));
done:
    tensor_free(one);
    tensor_free(shared);
    return status;
}
//<

//> 12
/* Step 4 as the module asks for it: exactly, with its weights *w when
 * w is not NULL, or tile by tile (flash.h), with none (*w NULL). */
static int attend(multihead *m, const tensor *q, const tensor *k,
                  const tensor *v, const tensor *lens, tensor **out,
                  tensor **w)
{
    if (w)
        *w = NULL;
    if (m->tiled)
        return flash_attention_forward(q, k, v, lens, m->tile_q, m->tile_k,
                                       out);
    return dot_attention_steps(&m->attention, q, k, v, lens, out, w);
}

//> 17
/* Steps 4a-4d of multihead.h: each key-value head read by its group's
 * h/G query heads, which are folded into the rows of one attention; *w
 * its weights (B*G, h/G*Lq, Lk) when w is not NULL. */
static int attend_groups(multihead *m, const tensor *qh, const tensor *kh,
                         const tensor *vh, const tensor *lens,
                         tensor **heads, tensor **w)
{
    if (w)
        *w = NULL;
    size_t h = m->cfg.num_heads, G = m->cfg.kv_heads;
    size_t d_model = m->cfg.num_hiddens; // p = d_model/h
    size_t B = kh->shape[0] / G, Lq = qh->shape[1], p = qh->shape[2];
    SCOPE_OF(TRACE_INPUTS(TRACE_IN(qh), TRACE_IN(kh), TRACE_IN(vh)),
             "grouped heads(h=%zu, G=%zu)", h, G);
    tensor *qg = NULL, *lg = NULL, *hg = NULL;
    int status = GSL_SUCCESS;
    // 4a. every query head of a group reads its key-value head: stride 0
    STEP(share_heads(kh, h, G));
    STEP(share_heads(vh, h, G));
    // 4b. the group's h/G query heads one under another: (B*G, h/G*Lq, p)
    tensor_trace_note("a product over the expanded h/G is one over h/G times "
                      "the rows: fold the group's query heads into Lq");
    STEP(tensor_reshape(qh, SIZES((long)(B * G), (long)(h / G * Lq), (long)p),
                        NAMES(B * G, h / G * Lq, d_model / h), &qg));
    if (lens && lens->ndim == 2)
        STEP(tensor_reshape(lens, SIZES((long)(B * G), (long)(h / G * Lq)),
                            NAMES(B * G, h / G * Lq), &lg));
    // 4c. attention on the B*G groups, the key-value heads as they are
    STEP(attend(m, qg, kh, vh, lg, &hg, w));
    // 4d. the heads back as (B*h, Lq, p)
    STEP(tensor_view(hg, SIZES((long)(B * h), (long)Lq, (long)p),
                     NAMES(B * h, Lq, d_model / h), heads));
done:
    tensor_free(qg);
    tensor_free(lg);
    tensor_free(hg);
    if (status && w) {
        tensor_free(*w);
        *w = NULL;
    }
    return status;
}
//<

int multihead_attend(multihead *m, const tensor *qh, const tensor *kh,
                     const tensor *vh, const tensor *lens, tensor **heads,
                     tensor **weights)
{
    *heads = NULL;
/*< 17
    return attend(m, qh, kh, vh, lens, heads, weights);
*/
//> 19
    window_rule r;
    if (multihead_window_rule(m, &r)) // every head at once, by the rule
        return multihead_attend_window(m, &r, qh, kh, vh, lens, heads,
                                       weights);
//<
//> 17
    if (m->cfg.kv_heads < m->cfg.num_heads)
        return attend_groups(m, qh, kh, vh, lens, heads, weights);
    return attend(m, qh, kh, vh, lens, heads, weights);
//<
}

int multihead_forward_tiled(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, size_t tile_q,
                            size_t tile_k, tensor **out)
{
    *out = NULL;
    if (m->attention.training && m->attention.dropout > 0.0)
        return mha_fail(GSL_EINVAL,
                        "multihead_forward_tiled: training with dropout %g is "
                        "not supported here (multihead_forward has it)",
                        m->attention.dropout);
    m->tiled = 1;
    m->tile_q = tile_q;
    m->tile_k = tile_k;
    int status = multihead_forward(m, queries, keys, values, valid_lens, out,
                                   NULL);
    m->tiled = 0;
    return status;
}
//<

//> 14
/* *heads (B*h, L, p) becomes its copy with batch row b*h + i multiplied
 * by mask[i] (head i of every example, scaled); the heads as they were
 * go to *unmasked. */
static int apply_head_mask(const tensor *mask, tensor **heads,
                           tensor **unmasked)
{
    const tensor *x = *heads;
    tensor *out;
    int status = tensor_alloc_like(x, &out);
    if (status)
        return status;
    size_t h = mask->shape[0], rows = x->shape[0];
    size_t per_row = x->shape[1] * x->shape[2];
    for (size_t r = 0; r < rows; r++) {
        double scale = mask->data[(r % h) * mask->strides[0]];
        const double *x_r = x->data + r * per_row;
        double *o_r = out->data + r * per_row;
        for (size_t j = 0; j < per_row; j++)
            o_r[j] = scale * x_r[j];
    }
    tensor_trace_step(TRACE_NEW, x, out, "head_mask (h=%zu)", h);
    *unmasked = *heads;
    *heads = out;
    return GSL_SUCCESS;
}
//<

//<
