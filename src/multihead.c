//> 06
/* multihead.c: multi-head attention; see multihead.h for the steps.
 *
 * Shapes: B batch, Lq queries, Lk key-value pairs, d_model = num_hiddens,
 * h heads of p = d_model/h features, D_out output features. */
#include "multihead.h"

#include <math.h>
#include <string.h>

#include "error.h"
#include "qkv.h"
#include "softmax.h"
#include "trace.h"
//> 12
#include "flash.h"
//<
//> 15
#include "posenc.h"
//<
//> 19
#include "window.h"
//<

/* The first la characters of a, then sep and b when sep is not 0 ("B*h",
 * "d_model/h"), into buf (TENSOR_NAME_MAX); "" when a part is missing
 * or the name would not fit. */
static void name_of(char *buf, const char *a, size_t la, char sep,
                    const char *b)
{
    size_t lb = sep ? strlen(b) : 0;
    buf[0] = '\0';
    if (la == 0 || (sep && lb == 0) || la + lb + 2 > TENSOR_NAME_MAX)
        return;
    memcpy(buf, a, la);
    buf[la] = sep;
    memcpy(buf + la + (sep != 0), b, lb);
    buf[la + (sep != 0) + lb] = '\0';
}

void multihead_head_names(const tensor *x, int from_rows, multihead_names *nm)
{
    memset(nm, 0, sizeof *nm);
    if (x->ndim != 3 || (!x->names[0][0] && !x->names[1][0] && !x->names[2][0]))
        return;
    // the parts: batch B, positions n, heads h, features F = h*p, p = F/h
    char B[TENSOR_NAME_MAX], h[TENSOR_NAME_MAX] = "h", F[TENSOR_NAME_MAX];
    char p[TENSOR_NAME_MAX], Bh[TENSOR_NAME_MAX];
    const char *n = x->names[1];
    if (from_rows) { // (B*h, n, p): the last factor of B*h is h
        const char *Bh_in = x->names[0], *star = strrchr(Bh_in, '*');
        name_of(B, Bh_in, star ? (size_t)(star - Bh_in) : 0, 0, "");
        if (star)
            name_of(h, star + 1, strlen(star + 1), 0, "");
        name_of(p, x->names[2], strlen(x->names[2]), 0, "");
        size_t lp = strlen(p), lh = strlen(h);
        if (lp > lh + 1 && p[lp - lh - 1] == '/' && !strcmp(p + lp - lh, h))
            name_of(F, p, lp - lh - 1, 0, ""); // d_model of d_model/h
        else
            name_of(F, h, strlen(h), '*', p);
    } else { // (B, n, F): F = G*p names its heads, any other F/h
        name_of(B, x->names[0], strlen(x->names[0]), 0, "");
        name_of(F, x->names[2], strlen(x->names[2]), 0, "");
        size_t lead = strcspn(F, "*/");
        if (F[lead] == '*' && lead > 0) {
            name_of(h, F, lead, 0, "");
            name_of(p, F + lead + 1, strlen(F + lead + 1), 0, "");
        } else {
            name_of(p, F, strlen(F), '/', "h");
        }
    }
    name_of(Bh, B, strlen(B), '*', h);
    snprintf(nm->joined, sizeof nm->joined, "%s, %s, %s", B, n, F);
    snprintf(nm->split, sizeof nm->split, "%s, %s, %s, %s", B, n, h, p);
    snprintf(nm->heads, sizeof nm->heads, "%s, %s, %s, %s", B, h, n, p);
    snprintf(nm->rows, sizeof nm->rows, "%s, %s, %s", Bh, n, p);
}

/* (B, n, d_model) -> (B, n, h, p) -> (B, h, n, p) -> (B*h, n, p), with
 * p = d_model/h: head i of example b becomes batch row b*h + i.  The first
 * two steps are views; the last is a view only when B, h or n is 1, and a
 * copy otherwise.
 * What the tests check (ex_transpose_qkv):
 * - *out is (B*h, n, p) and x[b, i, j] lands at [b*h + j/p, i, j % p]
 *   (a straight reshape to (B*h, n, p) does not: chapter 06, section 3);
 *   with one head it is x itself, reshaped;
 * - d_model not divisible by num_heads: GSL_EBADLEN; num_heads 0, or an
 *   x that is not 3-D: GSL_EINVAL; each with *out NULL and a message that
 *   starts with "transpose_qkv" and names the sizes refused (d_model and
 *   num_heads; num_heads 0; the shape of x);
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
int transpose_qkv(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "transpose_qkv: input shape %s has %zu dimensions, "
                        "expected 3 (B, n, d_model)",
                        xs, x->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL, "transpose_qkv: num_heads is 0 (input %s)",
                        xs);
    size_t batch = x->shape[0], n = x->shape[1], d_model = x->shape[2];
    if (d_model % num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "transpose_qkv: d_model %zu is not divisible by "
                        "num_heads %zu (input shape %s)",
                        d_model, num_heads, xs);
    size_t p = d_model / num_heads;

    trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "transpose_qkv(h=%zu)",
                num_heads);
    multihead_names nm;
    multihead_head_names(x, 0, &nm);
    tensor *split = NULL, *heads = NULL;
    // split is (B, n, h, p): a view, each row cut into h pieces of p
    int status = tensor_reshape(x, DIMS((long)batch, (long)n, (long)num_heads, -1),
                                nm.split, &split);
    // heads is (B, h, n, p): a view, the head axis moved before n
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &heads);
    // out is (B*h, n, p): a copy unless B, h or n is 1 (then a view)
    if (!status)
        status = tensor_reshape(heads, DIMS(-1, (long)n, (long)p), nm.rows, out);
    trace_end();
    tensor_free(split);
    tensor_free(heads);
    return status;
}

/* The inverse of transpose_qkv: (B*h, n, p) -> (B, h, n, p) ->
 * (B, n, h, p) -> (B, n, h*p), so the h heads of each position sit side by
 * side again, head i in features i*p .. i*p + p - 1.
 * What the tests check (ex_transpose_output):
 * - *out is (B, n, h*p) and x[b*h + k, i, j] lands at [b, i, k*p + j];
 * - a first dimension not divisible by num_heads: GSL_EBADLEN; num_heads
 *   0, or an x that is not 3-D: GSL_EINVAL; each with *out NULL and a
 *   message that starts with "transpose_output" and names the sizes
 *   refused (the first dimension and num_heads; num_heads 0; the number
 *   of dimensions);
 * - the intermediate tensors are freed; a failed allocation returns its
 *   status (GSL_ENOMEM) with *out NULL and nothing left allocated.
 * The handout blanks this body:
 * @exercise transpose_output (chapter 06): the heads side by side again. */
int transpose_output(const tensor *x, size_t num_heads, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3)
        return mha_fail(GSL_EINVAL,
                        "transpose_output: input shape %s has %zu dimensions, "
                        "expected 3 (B*h, n, p)",
                        xs, x->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL,
                        "transpose_output: num_heads is 0 (input %s)", xs);
    if (x->shape[0] % num_heads != 0)
        return mha_fail(GSL_EBADLEN,
                        "transpose_output: first dimension %zu of shape %s is "
                        "not divisible by num_heads %zu",
                        x->shape[0], xs, num_heads);
    size_t n = x->shape[1], p = x->shape[2];

    trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "transpose_output(h=%zu)",
                num_heads);
    multihead_names nm;
    multihead_head_names(x, 1, &nm);
    tensor *split = NULL, *rows = NULL;
    // split is (B, h, n, p): a view, "B*h" taken apart again
    int status = tensor_reshape(x, DIMS(-1, (long)num_heads, (long)n, (long)p),
                                nm.heads, &split);
    // rows is (B, n, h, p): a view, heads back next to their features
    if (!status)
        status = tensor_permute(split, SHAPE(0, 2, 1, 3), &rows);
    // out is (B, n, h*p): the heads of each position side by side, a copy
    // unless h, n or p is 1 (chapter 01's table)
    if (!status)
        status = tensor_reshape(rows, DIMS((long)rows->shape[0], (long)n, -1),
                                nm.joined, out);
    trace_end();
    tensor_free(split);
    tensor_free(rows);
    return status;
}

//> 07
/* Row b*h + i of the output is row b of valid_lens: transpose_qkv put
 * head i of example b at batch row b*h + i, and that head must see the
 * keys of example b.
 * What the tests check (ex_repeat_valid_lens):
 * - (B,) gives (B*h,) and (B, Lq) gives (B*h, Lq), row b*h + i a copy of
 *   row b: [3, 2] with h = 3 is [3, 3, 3, 2, 2, 2], not tile's
 *   [3, 2, 3, 2, 3, 2] (chapter 07, section 2);
 * - a meta valid_lens (shapes only, no numbers: mha trace) gives a meta
 *   *out of the repeated shape;
 * - num_heads 0, or a valid_lens that is neither (B,) nor (B, Lq):
 *   GSL_EINVAL, *out NULL, a message that starts with "repeat_valid_lens"
 *   and names num_heads 0 or the number of dimensions;
 * - a failed allocation returns its status (GSL_ENOMEM) with *out NULL.
 * The handout blanks this body:
 * @exercise repeat_valid_lens (chapter 07): valid_lens for every head. */
int repeat_valid_lens(const tensor *valid_lens, size_t num_heads,
                      tensor **out)
{
    *out = NULL;
    char vs[TRACE_SHAPE_MAX];
    tensor_shape_str(valid_lens, vs, sizeof vs);
    if (valid_lens->ndim != 1 && valid_lens->ndim != 2)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: valid_lens shape %s has %zu "
                        "dimensions, expected (B,) or (B, Lq)",
                        vs, valid_lens->ndim);
    if (num_heads == 0)
        return mha_fail(GSL_EINVAL,
                        "repeat_valid_lens: num_heads is 0 (valid_lens %s)", vs);
    size_t batch = valid_lens->shape[0];
    size_t row = valid_lens->ndim == 2 ? valid_lens->shape[1] : 1;
    size_t shape[2] = {0, valid_lens->shape[1]};
    if (mha_mul_size(batch, num_heads, &shape[0], "repeat_valid_lens"))
        return GSL_EOVRFLW;
    int meta = tensor_is_meta(valid_lens);
    int status = meta ? tensor_alloc_meta(valid_lens->ndim, shape, out)
                      : tensor_alloc(valid_lens->ndim, shape, out);
    if (status)
        return status;
    // out[b*h + i] = valid_lens[b] for every head i: repeat_interleave
    for (size_t b = 0; b < (meta ? 0 : batch); b++)
        for (size_t i = 0; i < num_heads; i++)
            for (size_t j = 0; j < row; j++)
                (*out)->data[(b * num_heads + i) * row + j] =
                    *TENSOR_AT(valid_lens, b, j);
    if (valid_lens->names[0][0]) {
        snprintf((*out)->names[0], TENSOR_NAME_MAX, "%.*s*h", TENSOR_NAME_MAX - 3,
                 valid_lens->names[0]);
        if (valid_lens->ndim == 2)
            memcpy((*out)->names[1], valid_lens->names[1], TENSOR_NAME_MAX);
    }
    trace_step(TRACE_COPY, valid_lens, *out, "repeat_interleave(%zu)",
               num_heads);
    return GSL_SUCCESS;
}

//<

//> 08
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
                        number_str(base, sizeof base, c->rope_base));
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
    size_t kv_size = c->num_hiddens; // keys and values: h heads of p
//> 17
    // with G key-value heads: G heads of p = d_model/h features each
    kv_size = c->kv_heads * (c->num_hiddens / c->num_heads);
//<
    int status = dot_attention_init(&m->attention, c->dropout);
    int (*init)(linear *, const char *, size_t, size_t, int) = linear_init;
//> handout
    if (c->shape_only)
        init = linear_init_meta;
//<
    if (!status)
        status = init(&m->W_q, "W_q", c->query_size, c->num_hiddens, c->bias);
    if (!status)
        status = init(&m->W_k, "W_k", c->key_size, kv_size, c->bias);
    if (!status)
        status = init(&m->W_v, "W_v", c->value_size, kv_size, c->bias);
    if (!status)
        status = init(&m->W_o, "W_o", c->num_hiddens, c->out_size, c->bias);
    if (status) {
        multihead_free(m);
        return status;
    }
    snprintf(m->W_q.out_name, TENSOR_NAME_MAX, "d_model");
    const char *kv_name = "d_model";
//> 17
    if (c->kv_heads < c->num_heads)
        kv_name = "G*d_model/h";
//<
//> 19
    if (c->window)
        m->cfg.causal = 1; // a window is causal, and shorter
    if (c->alibi && !c->causal)
        status = mha_fail(GSL_EINVAL,
                          "multihead: alibi needs causal or a window (its bias "
                          "-m_h (i' - j) grows with the distance to earlier "
                          "keys)");
    if (!status && c->keep_first && !c->window)
        status = mha_fail(GSL_EINVAL,
                          "multihead: keep_first %zu needs a window (every "
                          "key is kept without one)",
                          c->keep_first);
    if (!status && c->alibi)
        status = alibi_slopes(c->num_heads, &m->slopes);
    if (!status && c->sinks && !(status = tensor_alloc(SHAPE(c->num_heads),
                                                       &m->sinks)))
        tensor_set_names(m->sinks, "h");
    if (status) {
        multihead_free(m);
        return status;
    }
//<
    snprintf(m->W_k.out_name, TENSOR_NAME_MAX, "%s", kv_name);
    snprintf(m->W_v.out_name, TENSOR_NAME_MAX, "%s", kv_name);
    snprintf(m->W_o.out_name, TENSOR_NAME_MAX,
             c->out_size == c->num_hiddens ? "d_model" : "D_out");
    return GSL_SUCCESS;
}

void multihead_free(multihead *m)
{
    linear_free(&m->W_q);
    linear_free(&m->W_k);
    linear_free(&m->W_v);
    linear_free(&m->W_o);
    dot_attention_free(&m->attention);
    tensor_free(m->weights);
    m->weights = NULL;
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
        trace_note("%s has G = %zu key-value heads, not h = %zu: transpose_qkv "
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

/* The inputs by the rules every attention follows (qkv.h), then against
 * the configuration; one message names every shape, so the reader sees
 * the whole disagreement at once. */
int multihead_check_inputs(const multihead *m, const tensor *q,
                           const tensor *k, const tensor *v,
                           const tensor *valid_lens)
{
    const multihead_config *c = &m->cfg;
    qkv_shapes shapes;
    int status = qkv_check("multihead", &qkv_lesson_names, q, k, v, 0, NULL,
                           &shapes);
    if (status)
        return status;
    if (q->shape[2] != c->query_size || k->shape[2] != c->key_size ||
        v->shape[2] != c->value_size)
        return mha_fail(GSL_EBADLEN,
                        "multihead: feature sizes %s do not match the layers' "
                        "query_size %zu, key_size %zu, value_size %zu",
                        shapes.all, c->query_size, c->key_size, c->value_size);
    /* valid_lens against the queries and keys, before the repeat per
     * head makes its indices harder to read */
    status = softmax_check_valid_lens("multihead", shapes.qk, q->shape[0],
                                      q->shape[1], k->shape[1], valid_lens);
    if (status)
        return status;
//> 16
    size_t b, i, Lq = q->shape[1], Lk = k->shape[1];
    if (softmax_find_empty_row(valid_lens, c->causal, q->shape[0], Lq, Lk, &b,
                               &i))
        return mha_fail(GSL_EINVAL,
                        "multihead: causal: query %zu of example %zu sees no "
                        "key (valid_len %zu, Lq %zu, Lk %zu: query i sees key "
                        "j only when j <= i + Lk - Lq)",
                        i, b, softmax_valid_len(valid_lens, b, i, Lk), Lq, Lk);
//<
//> 19
    if (multihead_empty_window_row(m, valid_lens, q->shape[0], Lq, Lk, &b,
                                   &i) && !c->window)
        return mha_fail(GSL_EINVAL,
                        "multihead: query %zu of example %zu sees no key "
                        "(valid_len 0), and a row's weights need one with "
                        "alibi or sinks",
                        i, b);
    if (multihead_empty_window_row(m, valid_lens, q->shape[0], Lq, Lk, &b, &i))
        return mha_fail(GSL_EINVAL,
                        "multihead: window: query %zu of example %zu sees no "
                        "key (valid_len %zu, Lq %zu, Lk %zu, window %zu: query "
                        "i sees key j only when i + Lk - Lq - %zu < j <= i + "
                        "Lk - Lq)",
                        i, b, softmax_valid_len(valid_lens, b, i, Lk), Lq, Lk,
                        c->window, c->window);
    if (m->sinks && (status = tensor_check_finite(m->sinks, "multihead",
                                                  "sinks")))
        return status;
//<
    /* NaN or inf anywhere would spread to whole rows of the output (a
     * single inf score makes inf - inf in the softmax): refuse them here,
     * naming the element, rather than return numbers that mean nothing */
    const tensor *checked[] = {q, k, v, m->W_q.weight, m->W_k.weight,
                               m->W_v.weight, m->W_o.weight, m->W_q.bias,
                               m->W_k.bias, m->W_v.bias, m->W_o.bias};
    static const char *const names[] = {"queries", "keys", "values", "W_q",
                                        "W_k", "W_v", "W_o", "b_q", "b_k",
                                        "b_v", "b_o"};
    for (size_t i = 0; i < sizeof checked / sizeof checked[0]; i++)
        if (checked[i] &&
            (status = tensor_check_finite(checked[i], "multihead", names[i])))
            return status;
    return GSL_SUCCESS;
}

/* --- the forward pass ----------------------------------------------- */

/* What the steps make, in their order, all freed when the pass ends. */
typedef struct steps {
    tensor *q, *k, *v;    /* (B, Lq, d_model), (B, Lk, d_model) */
    tensor *qh, *kh, *vh; /* (B*h, Lq, d_model/h), (B*h, Lk, d_model/h) */
    tensor *lens;         /* (B*h,) or (B*h, Lq), or NULL: no mask */
    tensor *heads;        /* (B*h, Lq, d_model/h) */
    tensor *concat;       /* (B, Lq, d_model) */
//> 14
    tensor *unmasked;     /* the heads before the head mask, or NULL */
//<
} steps;

static void steps_free(steps *s)
{
    tensor *all[] = {s->q,     s->k,    s->v,     s->qh, s->kh,
                     s->vh,    s->lens, s->heads, s->concat};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
//> 14
    tensor_free(s->unmasked);
//<
}

/* The module as its trace header names it: "h=5", and its options. */
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
 * makes its row NaN), the heads. */
static int check_overflow(const multihead *m, const steps *s,
                          const tensor *out)
{
    const tensor *weights = m->attention.weights;
//> 12
    if (m->tiled)
        weights = NULL; // tile by tile: no weights were made
//<
    multihead_stage stages[] = {
        {s->q, "projection", "Q"},
        {s->k, "projection", "K"},
        {s->v, "projection", "V"},
        {weights, "scores' softmax", "weights"},
        {s->heads, "weighted sum of the values", "heads"},
    };
    return multihead_find_overflow("multihead_forward", out, stages,
                                   sizeof stages / sizeof stages[0]);
}

/* The attention's weights, (B*h, Lq, Lk) (the same numbers however step
 * 4 was computed), kept in m as (B, h, Lq, Lk): a view, made untraced,
 * since keeping is no step of the pass.  m's earlier weights go only
 * once the new ones are there. */
static int keep_weights(multihead *m, size_t batch, size_t Lq)
{
    trace_quiet_begin();
    tensor *w = NULL;
    const tensor *aw = m->attention.weights;
    long h = (long)m->cfg.num_heads, Lk = (long)aw->shape[2];
    int status = tensor_view(aw, DIMS((long)batch, h, (long)Lq, Lk),
                             "B, h, Lq, Lk", &w);
    trace_quiet_end();
    if (status)
        return status;
    tensor_free(m->weights);
    m->weights = w;
    return GSL_SUCCESS;
}

//> 13
static int keep_steps(multihead *m, steps *s, const tensor *queries,
                      const tensor *keys, const tensor *values);
//<
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

static inputs lesson_names(const tensor *queries, const tensor *keys,
                           const tensor *values, const tensor *valid_lens)
{
    inputs in = {.q = tensor_named(queries, "B, Lq, d_q"),
                 .k = tensor_named(keys, "B, Lk, d_k"),
                 .v = tensor_named(values, "B, Lk, d_v")};
    if (valid_lens)
        in.lens = tensor_named(valid_lens,
                               valid_lens->ndim == 2 ? "B, Lq" : "B");
    return in;
}

/* The trace's header line for the pass: the module, its options, its
 * inputs.  trace_end closes it. */
static void begin_trace(const multihead *m, const tensor *queries,
                        const tensor *keys, const tensor *values,
                        const tensor *valid_lens)
{
    char opt[128];
    trace_begin(NULL,
                TRACE_INPUTS(TRACE_NAMED(queries, "q"), TRACE_NAMED(keys, "k"),
                             TRACE_NAMED(values, "v"),
                             TRACE_SIDE(valid_lens, "valid_lens")),
                "multihead(%s", options(m, opt, sizeof opt));
}

/* Run a step; on failure, skip to the end of the pass. */
#define STEP(call)                                                            \
    do {                                                                      \
        if ((status = (call)) != GSL_SUCCESS)                                 \
            goto done;                                                        \
    } while (0)

/* The six steps of multihead.h, each one call, with the shape it makes.
 * The inputs are checked first (finite, shapes that agree), and the
 * result once at the end (check_overflow).  The per-head weights stay
 * in m->weights as (B, h, Lq, Lk). */
int multihead_forward(multihead *m, const tensor *queries,
                      const tensor *keys, const tensor *values,
                      const tensor *valid_lens, tensor **out)
{
    *out = NULL;
    int status = multihead_check_inputs(m, queries, keys, values, valid_lens);
    if (status)
        return status;
    size_t h = m->cfg.num_heads;
//> 15
    long Lq = (long)queries->shape[1], Lk = (long)keys->shape[1];
//<
    inputs in = lesson_names(queries, keys, values, valid_lens);
    steps s = {0};
    begin_trace(m, queries, keys, values, valid_lens);

    // 1-2. project Q with W_q, then split it into h heads:
    //      (B, Lq, d_q) -> (B, Lq, d_model) -> (B*h, Lq, d_model/h)
    STEP(linear_forward(&m->W_q, &in.q, &s.q));
//> 15
    STEP(multihead_rope(m, &s.q, Lk - Lq, "multihead_forward", "Q"));
//<
    STEP(transpose_qkv(s.q, h, &s.qh));
    //      K and V alike: (B, Lk, d_k) -> (B, Lk, d_model) -> (B*h, Lk, d_model/h)
    STEP(linear_forward(&m->W_k, &in.k, &s.k));
//> 15
    STEP(multihead_rope(m, &s.k, 0, "multihead_forward", "K"));
//<
/*< 17
    STEP(transpose_qkv(s.k, h, &s.kh));
*/
//> 17
    STEP(multihead_split_kv(m, s.k, "K", &s.kh)); // G heads: (B*G, Lk, p)
//<
    STEP(linear_forward(&m->W_v, &in.v, &s.v));
/*< 17
    STEP(transpose_qkv(s.v, h, &s.vh));
*/
//> 17
    STEP(multihead_split_kv(m, s.v, "V", &s.vh));
//<
    // 3. valid_lens for every head, in repeat_interleave order: (B*h,)
    //    or (B*h, Lq)
/*< 16
    if (valid_lens)
        STEP(repeat_valid_lens(&in.lens, h, &s.lens));
*/
//> 16
    STEP(head_lens(m, valid_lens ? &in.lens : NULL, queries->shape[0],
                   queries->shape[1], keys->shape[1], &s.lens)); // causal too
//<
    // 4. attention on all B*h heads at once: (B*h, Lq, d_model/h)
/*< 12
    STEP(dot_attention_forward(&m->attention, s.qh, s.kh, s.vh, s.lens,
                               &s.heads));
*/
//> 12
    STEP(multihead_attend(m, s.qh, s.kh, s.vh, s.lens, &s.heads));
//<
//> 14
    if (m->head_mask) // head i's outputs times head_mask[i]
        STEP(apply_head_mask(m->head_mask, &s.heads, &s.unmasked));
//<
    // 5. the heads side by side again: (B, Lq, d_model)
    STEP(transpose_output(s.heads, h, &s.concat));
    // 6. W_o mixes them: (B, Lq, D_out)
    STEP(linear_forward(&m->W_o, s.concat, out));
done:
    trace_end();
    if (!status)
        status = check_overflow(m, &s, *out);
/*< 12
    if (!status) // the per-head weights, (B, h, Lq, Lk)
        status = keep_weights(m, queries->shape[0], queries->shape[1]);
*/
//> 13
    if (!status && m->cache) // what the backward pass reads
        status = keep_steps(m, &s, queries, keys, values);
//<
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
    int status = valid_lens_per_row(valid_lens, m->cfg.causal, batch, Lq, Lk,
                                    shape_only, &rows);
    if (!status)
        status = repeat_valid_lens(rows, h, out);
    tensor_free(rows);
    return status;
}
//<

//> 17
/* x (B*G, Lk, p), one key-value head per batch row, shared by the h/G
 * query heads of its group: the view (B*G, h/G, Lk, p) with stride 0
 * along the group, made and traced to show the sharing (nothing reads it:
 * the folded rows of step 4b read x itself). */
static int share_heads(const tensor *x, size_t group)
{
    tensor *one = NULL, *shared = NULL;
    char names[4 * TENSOR_NAME_MAX] = "", single[4 * TENSOR_NAME_MAX] = "";
    if (x->names[0][0]) {
        snprintf(single, sizeof single, "%s, 1, %s, %s", x->names[0],
                 x->names[1], x->names[2]);
        snprintf(names, sizeof names, "%s, h/G, %s, %s", x->names[0],
                 x->names[1], x->names[2]);
    }
    int status = tensor_view(x, DIMS((long)x->shape[0], 1, (long)x->shape[1],
                                     (long)x->shape[2]),
                             single[0] ? single : NULL, &one);
    if (!status)
        status = tensor_expand(one, DIMS(-1, (long)group, -1, -1),
                               names[0] ? names : NULL, &shared);
    tensor_free(one);
    tensor_free(shared);
    return status;
}
//<

//> 12
/* Step 4 as the module asks for it: exactly, with the weights kept, or
 * tile by tile (flash.h). */
static int attend(multihead *m, const tensor *q, const tensor *k,
                  const tensor *v, const tensor *lens, tensor **out)
{
    if (m->tiled)
        return flash_attention_forward(q, k, v, lens, m->tile_q, m->tile_k,
                                       out);
    return dot_attention_forward(&m->attention, q, k, v, lens, out);
}

//> 17
/* Steps 4a-4d of multihead.h: each key-value head read by its group's
 * h/G query heads, which are folded into the rows of one attention. */
static int attend_groups(multihead *m, const tensor *qh, const tensor *kh,
                         const tensor *vh, const tensor *lens,
                         tensor **heads)
{
    size_t h = m->cfg.num_heads, G = m->cfg.kv_heads, group = h / G;
    long BG = (long)kh->shape[0], Lq = (long)qh->shape[1];
    long p = (long)qh->shape[2];
    trace_begin(NULL, TRACE_INPUTS(TRACE_IN(qh), TRACE_IN(kh), TRACE_IN(vh)),
                "grouped heads(h=%zu, G=%zu)", h, G);
    tensor *qg = NULL, *lg = NULL, *hg = NULL;
    // 4a. every query head of a group reads its key-value head: stride 0
    int status = share_heads(kh, group);
    if (!status)
        status = share_heads(vh, group);
    // 4b. the group's h/G query heads one under another: (B*G, h/G*Lq, p)
    if (!status)
        trace_note("a product over the expanded h/G is one over h/G times "
                   "the rows: fold the group's query heads into Lq");
    if (!status)
        status = tensor_reshape(qh, DIMS(BG, (long)group * Lq, p),
                                "B*G, h/G*Lq, d_model/h", &qg);
    if (!status && lens && lens->ndim == 2)
        status = tensor_view(lens, DIMS(BG, (long)group * Lq), "B*G, h/G*Lq",
                             &lg);
    // 4c. attention on the B*G groups, the key-value heads as they are
    if (!status)
        status = attend(m, qg, kh, vh, lg, &hg);
    // 4d. the heads back as (B*h, Lq, p)
    if (!status)
        status = tensor_view(hg, DIMS((long)h * (BG / (long)G), Lq, p),
                             "B*h, Lq, d_model/h", heads);
    trace_end();
    tensor_free(qg);
    tensor_free(lg);
    tensor_free(hg);
    return status;
}
//<

//> 19
/* --- windows, ALiBi and sinks (window.h) ---------------------------- */

int multihead_window_rule(const multihead *m, window_rule *r)
{
    const multihead_config *c = &m->cfg;
    *r = (window_rule){.causal = c->causal, .window = c->window,
                       .keep = c->window ? c->keep_first : 0,
                       .slopes = m->slopes ? m->slopes->data : NULL,
                       .sinks = m->sinks ? m->sinks->data : NULL};
    return c->window || r->slopes || r->sinks;
}

void multihead_window_options(const multihead *m, char *buf, size_t n)
{
    const multihead_config *c = &m->cfg;
    buf[0] = '\0';
    if (c->window)
        snprintf(buf, n, ", window %zu", c->window);
    if (c->window && c->keep_first)
        snprintf(buf + strlen(buf), n - strlen(buf), ", keep %zu",
                 c->keep_first);
    if (c->alibi)
        snprintf(buf + strlen(buf), n - strlen(buf), ", alibi");
    if (c->sinks)
        snprintf(buf + strlen(buf), n - strlen(buf), ", sinks");
}

int multihead_empty_window_row(const multihead *m, const tensor *valid_lens,
                               size_t B, size_t Lq, size_t Lk, size_t *b,
                               size_t *i)
{
    window_rule r;
    if (!multihead_window_rule(m, &r) || (valid_lens && tensor_is_meta(valid_lens)))
        return 0;
    // the visible keys are [0, keep) and (i' - W, i'], below the row's
    // length: none when neither key 0 nor the last one is visible
    for (*b = 0; *b < B; (*b)++)
        for (*i = 0; *i < Lq; (*i)++) {
            size_t len = softmax_row_len(valid_lens, r.causal, *b, *i, Lq, Lk);
            long qpos = (long)(*i + Lk) - (long)Lq;
            if (len == 0 || (!window_sees(&r, qpos, (long)len - 1) &&
                             !window_sees(&r, qpos, 0)))
                return 1;
        }
    return 0;
}

/* Step 4 by the rule: window_attend on every head, its weights kept as
 * dot_attention's are, so that m->weights and the cache of the backward
 * read them; or, in the tiled pass, tile by tile (flash.h). */
static int attend_window(multihead *m, const window_rule *r,
                         const tensor *qh, const tensor *kh, const tensor *vh,
                         const tensor *lens, tensor **heads)
{
    if (m->attention.training && m->attention.dropout > 0.0)
        return mha_fail(GSL_EINVAL,
                        "multihead: dropout %g in training with a window, "
                        "alibi or sinks is not supported",
                        m->attention.dropout);
    long q0 = (long)kh->shape[1] - (long)qh->shape[1];
    if (m->tiled) // tile by tile, no weights kept
        return flash_attention_forward_window(qh, kh, vh, lens, r,
                                              m->cfg.num_heads, q0, m->tile_q,
                                              m->tile_k, heads);
    tensor *w = NULL;
    int status = window_attend(r, m->cfg.num_heads, qh, kh, vh, lens, q0,
                               NULL, &w, heads);
    if (!status) {
        tensor_free(m->attention.weights);
        m->attention.weights = w;
        status = keep_weights(m, qh->shape[0] / m->cfg.num_heads,
                              qh->shape[1]);
    }
    if (status) {
        tensor_free(*heads);
        *heads = NULL;
    }
    return status;
}
//<

int multihead_attend(multihead *m, const tensor *qh, const tensor *kh,
                     const tensor *vh, const tensor *lens, tensor **heads)
{
    *heads = NULL;
    size_t h = m->cfg.num_heads;
/*< 17
    int status = attend(m, qh, kh, vh, lens, heads);
*/
//> 19
    window_rule r;
    if (multihead_window_rule(m, &r)) // every head at once, by the rule
        return attend_window(m, &r, qh, kh, vh, lens, heads);
//<
//> 17
    int status = m->cfg.kv_heads < h ? attend_groups(m, qh, kh, vh, lens, heads)
                                     : attend(m, qh, kh, vh, lens, heads);
//<
    if (!status && !m->tiled) // the per-head weights, (B, h, Lq, Lk)
        status = keep_weights(m, qh->shape[0] / h, qh->shape[1]);
    if (status) {
        tensor_free(*heads);
        *heads = NULL;
    }
    return status;
}

int multihead_forward_tiled(multihead *m, const tensor *queries,
                            const tensor *keys, const tensor *values,
                            const tensor *valid_lens, size_t tile_q,
                            size_t tile_k, tensor **out)
{
    *out = NULL;
    tensor_free(m->weights);
    m->weights = NULL;
    if (m->attention.training && m->attention.dropout > 0.0)
        return mha_fail(GSL_EINVAL,
                        "multihead_forward_tiled: training with dropout %g is "
                        "not supported here (multihead_forward has it)",
                        m->attention.dropout);
    m->tiled = 1;
    m->tile_q = tile_q;
    m->tile_k = tile_k;
    int status = multihead_forward(m, queries, keys, values, valid_lens, out);
    m->tiled = 0;
    return status;
}
//<

//> 13
/* --- a cache for the backward pass ----------------------------------- */

void multihead_cache_free(multihead_cache *c)
{
    tensor_free(c->lens);
    tensor_free(c->qh);
    tensor_free(c->kh);
    tensor_free(c->vh);
    tensor_free(c->weights);
    tensor_free(c->heads);
    tensor_free(c->head_mask);
    tensor_free(c->concat);
    memset(c, 0, sizeof *c);
}

/* The steps' tensors the backward pass reads, handed over to m->cache
 * (taken out of s, so the pass does not free them), and the weights as
 * (B*h, Lq, Lk). */
static int keep_steps(multihead *m, steps *s, const tensor *queries,
                      const tensor *keys, const tensor *values)
{
    multihead_cache *c = m->cache;
    const tensor *aw = m->attention.weights;
    trace_quiet_begin();
    int status = tensor_view(aw, DIMS((long)aw->shape[0], (long)aw->shape[1],
                                      (long)aw->shape[2]),
                             NULL, &c->weights);
    trace_quiet_end();
//> 14
    if (!status && m->head_mask) {
        status = tensor_alloc(SHAPE(m->cfg.num_heads), &c->head_mask);
        if (!status)
            status = tensor_copy_into(c->head_mask, m->head_mask);
    }
//<
    if (status)
        return status;
    c->queries = queries;
    c->keys = keys;
    c->values = values;
    c->lens = s->lens;
    c->qh = s->qh;
    c->kh = s->kh;
    c->vh = s->vh;
    c->heads = s->heads;
    c->concat = s->concat;
    s->lens = s->qh = s->kh = s->vh = s->heads = s->concat = NULL;
//> 14
    if (s->unmasked) { // the heads before the mask, which its gradient reads
        tensor_free(c->heads);
        c->heads = s->unmasked;
        s->unmasked = NULL;
    }
//<
    return GSL_SUCCESS;
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
    int status = tensor_alloc(x->ndim, x->shape, &out);
    if (status)
        return status;
    memcpy(out->names, x->names, sizeof x->names);
    size_t h = mask->shape[0], rows = x->shape[0];
    size_t per_row = x->shape[1] * x->shape[2];
    for (size_t r = 0; r < rows; r++) {
        double scale = mask->data[(r % h) * mask->strides[0]];
        const double *x_r = x->data + r * per_row;
        double *o_r = out->data + r * per_row;
        for (size_t j = 0; j < per_row; j++)
            o_r[j] = scale * x_r[j];
    }
    trace_step(TRACE_NEW, x, out, "head_mask (h=%zu)", h);
    *unmasked = *heads;
    *heads = out;
    return GSL_SUCCESS;
}
//<

//> 13
/* The forward pass with its two options (multihead.h), which it sets on
 * m for this one call: checked here, then multihead_forward. */
int multihead_forward_cached(multihead *m, const tensor *queries,
                             const tensor *keys, const tensor *values,
                             const tensor *valid_lens,
                             const tensor *head_mask, multihead_cache *c,
                             tensor **out)
{
    const char *who = "multihead_forward_cached";
    *out = NULL;
    if (c)
        multihead_cache_free(c);
    if (c && m->attention.training && m->attention.dropout > 0)
        return mha_fail(GSL_EINVAL,
                        "%s: dropout %g in training mode: the backward pass "
                        "needs the dropped weights, which are not kept; "
                        "train with dropout 0 or in evaluation mode",
                        who, m->attention.dropout);
/*< 14
    if (head_mask)
        return mha_fail(GSL_EINVAL, "%s: this module takes no head mask", who);
*/
//> 14
    size_t h = m->cfg.num_heads;
    if (head_mask && (head_mask->ndim != 1 || head_mask->shape[0] != h)) {
        int status = multihead_check_inputs(m, queries, keys, values,
                                            valid_lens);
        if (status)
            return status;
        char hs[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EBADLEN,
                        "%s: head_mask has shape %s, expected (%zu,) for "
                        "num_heads %zu",
                        who, tensor_shape_str(head_mask, hs, sizeof hs), h, h);
    }
    m->head_mask = head_mask;
//<
    m->cache = c;
    int status = multihead_forward(m, queries, keys, values, valid_lens, out);
    m->cache = NULL;
//> 14
    m->head_mask = NULL;
//<
    if (status && c)
        multihead_cache_free(c);
    return status;
}
//<
//<
//<
