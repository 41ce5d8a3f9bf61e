//> 19
/* multihead_window.c: the module under a window, ALiBi or sinks
 * (window.h): the rule it follows, its options as the trace names them,
 * a row its window leaves empty, and step 4 by the rule; see multihead.h. */
#include "nn/multihead.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "nn/flash.h"
#include "nn/multihead_internal.h"
#include "nn/softmax.h"
#include "nn/window.h"

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

/* Step 4 by the rule: window_attend on every head, its weights handed
 * out as dot_attention's are, for the caller and the cache of the
 * backward; or, in the tiled pass, tile by tile (flash.h), with none. */
int multihead_attend_window(multihead *m, const window_rule *r,
                            const tensor *qh, const tensor *kh,
                            const tensor *vh, const tensor *lens,
                            tensor **heads, tensor **weights)
{
    if (weights)
        *weights = NULL;
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
    if (!status && weights)
        *weights = w;
    else
        tensor_free(w);
    return status;
}
//<
