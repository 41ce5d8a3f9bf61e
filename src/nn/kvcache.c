//> 16
/* kvcache.c: the key-value cache and one step of decoding; see kvcache.h.
 *
 * Shapes: B batch, G key-value heads, h query heads, p = d_model/h, n new
 * positions, t = length + n positions after the step.
 *   storage  keys, values (B, G, capacity, p), contiguous
 *   x (B, n, d_q); Q (B, n, d_model); K, V (B, n, G*p)
 *   qh (B*h, n, p); kh, vh (B*G, n, p) the new heads, k4 (B, G, n, p)
 *   cached keys and values (B, G, t, p) -> (B*G, t, p), views
 *   lens (B*h, n): query i sees length + i + 1 positions
 */
#include "nn/kvcache.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "nn/linear.h"
#include "nn/softmax.h"
#include "tensor/tensor_trace.h"

int kv_cache_init(kv_cache *c, size_t batch, size_t kv_heads,
                  size_t head_size, size_t capacity)
{
    memset(c, 0, sizeof *c);
    int status = MHA_CHECK_SIZES("kv_cache_init",
                                 "batch, kv_heads, head_size, capacity",
                                 batch, kv_heads, head_size, capacity);
    if (status)
        return status;
    *c = (kv_cache){.batch = batch, .kv_heads = kv_heads,
                    .head_size = head_size, .capacity = capacity};
    status = kv_storage_alloc(batch, kv_heads, capacity, head_size,
                              "B, G, capacity, d_model/h", &c->keys,
                              &c->values);
    if (status)
        memset(c, 0, sizeof *c);
    return status;
}

int kv_storage_alloc(size_t rows, size_t kv_heads, size_t cols,
                     size_t head_size, const char *names, tensor **keys,
                     tensor **values)
{
    *keys = *values = NULL;
    int status = GSL_SUCCESS;
    STEP(tensor_alloc(SHAPE(rows, kv_heads, cols, head_size), keys));
    STEP(tensor_alloc(SHAPE(rows, kv_heads, cols, head_size), values));
    tensor_set_names(*keys, names);
    tensor_set_names(*values, names);
done:
    if (status) {
        tensor_free(*keys);
        *keys = NULL;
    }
    return status;
}

void kv_cache_free(kv_cache *c)
{
    tensor_free(c->keys);
    tensor_free(c->values);
    memset(c, 0, sizeof *c);
}

/* Positions 0 .. t-1 of storage s as a header (B, G, t, p) sharing its
 * numbers (no count of its own). */
static tensor filled(const tensor *s, size_t t)
{
    tensor all = tensor_named(s, NULL);
    all.shape[2] = t;
    tensor_name_copy(all.names[2], NAMES(t));
    return all;
}

int kv_cache_view(const kv_cache *c, tensor *keys, tensor *values)
{
    if (!c || !c->keys)
        return mha_fail(GSL_EINVAL, "kv_cache_view: the cache is not "
                                    "initialised");
    if (c->length == 0)
        return mha_fail(GSL_EINVAL,
                        "kv_cache_view: the cache is empty (length 0 of "
                        "capacity %zu): there is nothing to view",
                        c->capacity);
    if (keys)
        *keys = filled(c->keys, c->length);
    if (values)
        *values = filled(c->values, c->length);
    return GSL_SUCCESS;
}

int kv_check_decoding(const multihead *m, const tensor *keys,
                      const tensor *x, const char *who)
{
    const multihead_config *cfg = &m->cfg;
    if (!x)
        return mha_fail(GSL_EINVAL, "%s: x is NULL", who);
    if (!keys)
        return mha_fail(GSL_EINVAL, "%s: the cache is NULL or not initialised",
                        who);
    if (cfg->query_size != cfg->key_size || cfg->query_size != cfg->value_size)
        return mha_fail(GSL_EINVAL,
                        "%s: decoding is self-attention, but the module has "
                        "query_size %zu, key_size %zu, value_size %zu",
                        who, cfg->query_size, cfg->key_size, cfg->value_size);
    return GSL_SUCCESS;
}

/* The step's inputs against the module and the cache, before any work. */
static int check_step(const multihead *m, const kv_cache *c, const tensor *x)
{
    const char *who = "kv_cache_decode_step";
    const multihead_config *cfg = &m->cfg;
    int status = kv_check_decoding(m, c ? c->keys : NULL, x, who);
    if (status)
        return status;
    // the weights are read for non-finite numbers at the first step, into
    // an empty cache; later steps check x alone: reading all four every
    // step cost as much as the step's products
    status = c->length == 0 ? multihead_check_inputs(m, x, x, x, NULL)
                            : multihead_check_call(m, x, x, x, NULL);
    if (status)
        return status;
    size_t B = x->shape[0], n = x->shape[1];
    size_t G = cfg->num_heads, p = cfg->num_hiddens / cfg->num_heads;
//> 17
    G = cfg->kv_heads; // the key-value heads the cache holds
//<
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (c->batch != B || c->kv_heads != G || c->head_size != p)
        return mha_fail(GSL_EBADLEN,
                        "%s: the cache is (B, G, capacity, p) = (%zu, %zu, "
                        "%zu, %zu) but x %s and the module (h %zu, G %zu, p "
                        "%zu) need (%zu, %zu, capacity, %zu)",
                        who, c->batch, c->kv_heads, c->capacity, c->head_size,
                        xs, cfg->num_heads, G, p, B, G, p);
    if (n > c->capacity - c->length)
        return mha_fail(GSL_EBADLEN,
                        "%s: the cache is full: capacity %zu, length %zu, and "
                        "x %s brings %zu new position%s",
                        who, c->capacity, c->length, xs, n, n == 1 ? "" : "s");
    return GSL_SUCCESS;
}

/* Step 4 for one of keys and values: the new heads (B*G, n, p) copied to
 * positions length .. t-1 of the storage, and all t positions read back
 * as (B*G, t, p), a view of the storage; the trace calls p d_model/h,
 * by the module's sizes. */
static int append(const multihead *m, tensor *storage, const tensor *heads,
                  size_t length, const char *what, tensor **all)
{
    *all = NULL;
    size_t B = storage->shape[0], G = storage->shape[1], p = storage->shape[3];
    size_t n = heads->shape[1], t = length + n;
    size_t d_model = m->cfg.num_hiddens, h = m->cfg.num_heads; // p = d_model/h
    tensor *k4 = NULL, *slot = NULL, *grown = NULL;
    int status = GSL_SUCCESS;
    // the new heads as (B, G, n, p): a view of a fresh split
    STEP(tensor_reshape(heads, SIZES((long)B, (long)G, (long)n, (long)p),
                        NAMES(B, G, n, d_model / h), &k4));
    {
        QUIET; // the append's one record is below
        STEP(tensor_narrow(storage, 2, length, n, &slot));
        STEP(tensor_copy_into(slot, k4));
        STEP(tensor_narrow(storage, 2, 0, t, &grown));
    }
    tensor_name_copy(grown->names[2], NAMES(t));
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, grown, TRACE_INPUTS(TRACE_IN(k4)),
               "append %s at %zu..%zu", what, length, t - 1);
    STEP(tensor_reshape(grown, SIZES((long)(B * G), (long)t, (long)p),
                        NAMES(B * G, t, d_model / h), all));
done:
    TENSORS_FREE(k4, slot, grown);
    return status;
}

int kv_step_project(multihead *m, const tensor *x, size_t start,
                    const char *who, kv_step *s)
{
    size_t B = x->shape[0], n = x->shape[1], d_q = x->shape[2];
    tensor x_in = tensor_named(x, NAMES(B, n, d_q));
    int status = GSL_SUCCESS;
    // 1. project the new positions
    STEP(linear_steps(&m->W_q, &x_in, &s->q));
    STEP(linear_steps(&m->W_k, &x_in, &s->k));
    STEP(linear_steps(&m->W_v, &x_in, &s->v));
    // 2. with rope, q and k turned by position: the new rows are positions
    //    start .. start+n-1, the same angles the whole-sequence forward
    //    gives them (multihead_rope)
    STEP(multihead_rope(m, &s->q, (long)start, who, "Q"));
    STEP(multihead_rope(m, &s->k, (long)start, who, "K"));
    // 3. split: h query heads, G key-value heads
    STEP(kv_step_split(m, s));
done:
    return status;
}

int kv_step_split(const multihead *m, kv_step *s)
{
    int status = GSL_SUCCESS;
    STEP(transpose_qkv(s->q, m->cfg.num_heads, &s->qh));
/*< 17
    STEP(transpose_qkv(s->k, m->cfg.num_heads, &s->kh));
    STEP(transpose_qkv(s->v, m->cfg.num_heads, &s->vh));
*/
//> 17
    STEP(multihead_split_kv(m, s->k, "K", &s->kh));
    STEP(multihead_split_kv(m, s->v, "V", &s->vh));
//<
done:
    return status;
}

void kv_step_free(kv_step *s)
{
    TENSORS_FREE(s->q, s->k, s->v, s->qh, s->kh, s->vh);
    memset(s, 0, sizeof *s);
}

/* What one decode step makes, all freed when the step ends. */
typedef struct decoded {
    kv_step s;                   /* the new positions' heads */
    tensor *keys, *values;       /* (B*G, t, p): the cache so far */
    tensor *rows, *lens;         /* (B, n), (B*h, n) */
    tensor *heads, *concat;      /* (B*h, n, p), (B, n, d_model) */
    tensor *w; /* (B*h, n, t): the weights, when the caller wants them */
} decoded;

/* The steps of one decode step, each one call, on inputs
 * kv_cache_decode_step has checked; what each makes stays in *d. */
static int decode_steps(multihead *m, kv_cache *c, const tensor *x,
                        int want_weights, decoded *d, tensor **out)
{
    size_t B = x->shape[0], n = x->shape[1], t = c->length + n;
    size_t h = m->cfg.num_heads;
    int status = GSL_SUCCESS;
    // 1-3. project the new positions, turn them by position, split heads
    STEP(kv_step_project(m, x, c->length, "kv_cache_decode_step", &d->s));
    // 4. the cache grows to t positions
    STEP(append(m, c->keys, d->s.kh, c->length, "keys", &d->keys));
    STEP(append(m, c->values, d->s.vh, c->length, "values", &d->values));
    // 5. query i (position length + i) sees positions 0 .. length + i
    STEP(valid_lens_per_row(NULL, 1 /* causal */, B, n, t, 0 /* numbers */,
                            &d->rows));
    STEP(repeat_valid_lens(d->rows, h, &d->lens));
    STEP(multihead_attend(m, d->s.qh, d->keys, d->values, d->lens,
                          &d->heads, want_weights ? &d->w : NULL));
    // 6. the heads side by side, mixed by W_o
    STEP(transpose_output(d->heads, h, &d->concat));
    STEP(linear_steps(&m->W_o, d->concat, out));
done:
    return status;
}

int kv_cache_decode_step(multihead *m, kv_cache *c, const tensor *x,
                         tensor **out, tensor **weights)
{
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = check_step(m, c, x);
    if (status)
        return status;
    size_t B = x->shape[0], n = x->shape[1], t = c->length + n;
    size_t h = m->cfg.num_heads, G = h; // G: key-value heads
//> 17
    G = m->cfg.kv_heads;
//<
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(x, "x")),
             "decode_step(h=%zu, G=%zu, positions %zu..%zu)", h, G, c->length,
             t - 1);
    decoded d = {0};
    status = decode_steps(m, c, x, weights != NULL, &d, out);
    // once after the steps: a non-finite output is traced to its stage
    multihead_stage stages[] = {{d.s.q, "projection", "Q"},
                                {d.s.k, "projection", "K"},
                                {d.s.v, "projection", "V"},
                                {d.heads, "weighted sum of the values", "heads"}};
    if (!status)
        status = multihead_find_overflow("kv_cache_decode_step", *out, stages,
                                         sizeof stages / sizeof stages[0]);
    if (!status && weights) // per head: (B, h, n, t)
        status = multihead_head_weights(m, d.w, B, n, weights);
    if (status) {
        tensor_free(*out);
        *out = NULL;
    } else {
        c->length = t;
    }
    kv_step_free(&d.s);
    TENSORS_FREE(d.keys, d.values, d.rows, d.lens, d.heads, d.concat, d.w);
    return status;
}
//<
