//> 19
/* window_cache.c: decoding with a window in keep + W slots; see
 * window_cache.h.
 *
 * Shapes: storage (B, G, S, p), S = keep + W slots; x (B, n, d_q);
 * Q (B, n, d_model), K and V (B, n, G*p); qh (B*h, n, p); the keys a
 * step reads, the f filled slots and the n new positions, (B*G, f+n, p).
 */
#include "nn/window_cache.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor_trace.h"
#include "nn/kvcache.h"
#include "nn/window.h"

int window_cache_init(window_cache *c, size_t batch, size_t kv_heads,
                      size_t head_size, size_t window, size_t keep)
{
    memset(c, 0, sizeof *c);
    int status = MHA_CHECK_SIZES("window_cache_init",
                                 "batch, kv_heads, head_size, window", batch,
                                 kv_heads, head_size, window);
    if (status)
        return status;
    size_t slots = keep + window;
    *c = (window_cache){.batch = batch, .kv_heads = kv_heads,
                        .head_size = head_size, .window = window,
                        .keep = keep, .slots = slots};
    STEP(kv_storage_alloc(batch, kv_heads, slots, head_size, NULL, &c->keys,
                          &c->values));
    c->pos = mha_malloc(slots, sizeof *c->pos, "window_cache_init");
    STEP(c->pos ? GSL_SUCCESS : GSL_ENOMEM);
    for (size_t s = 0; s < slots; s++)
        c->pos[s] = -1; // empty
done:
    if (status)
        window_cache_free(c);
    return status;
}

void window_cache_free(window_cache *c)
{
    tensor_free(c->keys);
    tensor_free(c->values);
    free(c->pos);
    memset(c, 0, sizeof *c);
}

size_t window_cache_slot(const window_cache *c, size_t t)
{
    return t < c->keep ? t : c->keep + (t - c->keep) % c->window;
}

static int check_step(const multihead *m, const window_cache *c,
                      const tensor *x)
{
    const char *who = "multihead_decode_window";
    const multihead_config *cfg = &m->cfg;
    int status = kv_check_decoding(m, c ? c->keys : NULL, x, who);
    if (status)
        return status;
    if (cfg->window != c->window || cfg->keep_first != c->keep)
        return mha_fail(GSL_EINVAL,
                        "%s: the module has window %zu, keep_first %zu but "
                        "the cache window %zu, keep %zu",
                        who, cfg->window, cfg->keep_first, c->window, c->keep);
    status = multihead_check_inputs(m, x, x, x, NULL);
    if (status)
        return status;
    size_t B = x->shape[0], G = cfg->kv_heads;
    size_t p = cfg->num_hiddens / cfg->num_heads;
    char xs[TRACE_SHAPE_MAX];
    if (c->batch != B || c->kv_heads != G || c->head_size != p)
        return mha_fail(GSL_EBADLEN,
                        "%s: the cache is (B, G, slots, p) = (%zu, %zu, %zu, "
                        "%zu) but x %s and the module (h %zu, G %zu, p %zu) "
                        "need (%zu, %zu, slots, %zu)",
                        who, c->batch, c->kv_heads, c->slots, c->head_size,
                        tensor_shape_str(x, xs, sizeof xs), cfg->num_heads, G,
                        p, B, G, p);
    return GSL_SUCCESS;
}

/* The keys (or values) a step reads: the f filled slots of storage in
 * slot order, then the new heads (B*G, n, p): (B*G, f+n, p), new; the
 * trace calls p d_model/h, by the module's sizes. */
static int gather(const multihead *m, const tensor *storage, size_t f,
                  const tensor *heads, tensor **out)
{
    size_t BG = heads->shape[0], n = heads->shape[1], p = heads->shape[2];
    size_t B = storage->shape[0], G = storage->shape[1], S = storage->shape[2];
    size_t d_model = m->cfg.num_hiddens, h = m->cfg.num_heads; // p = d_model/h
    const tensor *hc = heads;
    tensor *copy = NULL;
    int status = GSL_SUCCESS;
    STEP(tensor_alloc(SHAPE(BG, f + n, p), out));
    if (!tensor_is_contiguous(heads)) {
        QUIET; // part of this step, whose record the caller emits
        STEP(tensor_contiguous(heads, &copy));
        hc = copy;
    }
    for (size_t g = 0; g < BG; g++) {
        double *o = (*out)->data + g * (f + n) * p;
        memcpy(o, storage->data + g * S * p, f * p * sizeof *o);
        memcpy(o + f * p, hc->data + g * n * p, n * p * sizeof *o);
    }
    tensor_set_names(*out, NAMES(B * G, f + n, d_model / h));
done:
    tensor_free(copy);
    if (status) {
        tensor_free(*out);
        *out = NULL;
    }
    return status;
}

/* The new positions length .. length+n-1 into their slots, keys and
 * values; a slot taken twice in one step keeps the later position. */
static void store(window_cache *c, const tensor *kh, const tensor *vh)
{
    size_t BG = kh->shape[0], n = kh->shape[1], p = c->head_size;
    for (size_t t = 0; t < n; t++) {
        size_t pos = c->length + t, s = window_cache_slot(c, pos);
        for (size_t g = 0; g < BG; g++) {
            memcpy(c->keys->data + (g * c->slots + s) * p,
                   TENSOR_AT(kh, g, t, 0), p * sizeof(double));
            memcpy(c->values->data + (g * c->slots + s) * p,
                   TENSOR_AT(vh, g, t, 0), p * sizeof(double));
        }
        c->pos[s] = (long)pos;
    }
    tensor_trace_note("positions %zu..%zu into slots %zu..: slot of t = t for t < "
               "%zu, else %zu + (t - %zu) mod %zu",
               c->length, c->length + n - 1,
               window_cache_slot(c, c->length), c->keep, c->keep, c->keep,
               c->window);
}

int multihead_decode_window(multihead *m, window_cache *c, const tensor *x,
                            tensor **out, tensor **weights)
{
    const char *who = "multihead_decode_window";
    *out = NULL;
    if (weights)
        *weights = NULL;
    int status = check_step(m, c, x);
    if (status)
        return status;
    size_t B = x->shape[0], n = x->shape[1], h = m->cfg.num_heads;
    size_t f = c->length < c->slots ? c->length : c->slots; // filled slots
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(x, "x")),
             "decode_window(h=%zu, G=%zu, window %zu, keep %zu, slots "
             "%zu, positions %zu..%zu)",
             h, m->cfg.kv_heads, c->window, c->keep, c->slots, c->length,
             c->length + n - 1);
    kv_step s = {0};                           // the new positions' heads
    tensor *keys = NULL, *values = NULL;       // (B*G, f+n, p)
    tensor *w = NULL, *heads = NULL, *concat = NULL;
    long *kpos = mha_malloc(f + n, sizeof *kpos, who);
    STEP(kpos ? GSL_SUCCESS : GSL_ENOMEM);
    // 1-3. project the new positions, turn Q and K by position, split
    STEP(kv_step_project(m, x, c->length, who, &s));
    // 4. the keys the queries may see: the filled slots, then the new
    STEP(gather(m, c->keys, f, s.kh, &keys));
    STEP(gather(m, c->values, f, s.vh, &values));
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, keys,
               TRACE_INPUTS(TRACE_IN(s.kh)),
               "keys: %zu slots + %zu new", f, n);
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, values,
               TRACE_INPUTS(TRACE_IN(s.vh)),
               "values: %zu slots + %zu new", f, n);
    for (size_t s = 0; s < f; s++)
        kpos[s] = c->pos[s];
    for (size_t t = 0; t < n; t++)
        kpos[f + t] = (long)(c->length + t);
    // 5. attend by the rule: query i at position length + i
    window_rule r;
    multihead_window_rule(m, &r);
    STEP(window_attend(&r, h, s.qh, keys, values, NULL, (long)c->length, kpos,
                       &w, &heads));
    // 6. join the heads, W_o
    STEP(transpose_output(heads, h, &concat));
    STEP(linear_steps(&m->W_o, concat, out));
    // 7. the new positions into their slots, over the ones W before
    STEP(multihead_find_overflow(who, *out, NULL, 0));
    if (weights) {
        QUIET; // handing the weights out is no step of the pass
        STEP(tensor_view(w, SIZES((long)B, (long)h, (long)n, (long)(f + n)),
                         NAMES(B, h, n, f + n), weights));
    }
    store(c, s.kh, s.vh);
done:
    if (status) {
        tensor_free(*out);
        *out = NULL;
    } else {
        c->length += n;
    }
    kv_step_free(&s);
    TENSORS_FREE(keys, values, w, heads, concat);
    free(kpos);
    return status;
}
//<
