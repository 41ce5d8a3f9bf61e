/* mla-run: multi-head latent attention (src/nn/mla.h) on .npy files, for
 * tools/mla_parity.py to hold against its NumPy reference.
 *
 *     mla-run DIR HEADS NOPE ROPE V [PREFILL]
 *
 * HEADS is h, NOPE d_nope, ROPE d_r, V d_v.  DIR holds x.npy (B, n,
 * d_model) and the weights in the published model's names and PyTorch's
 * layout: wq.npy, or wq_a.npy, q_norm.npy and wq_b.npy; wkv_a.npy,
 * kv_norm.npy, wkv_b.npy and wo.npy.  mla-run writes into DIR:
 *   naive.npy     mla_forward by the naive path, (B, n, d_model)
 *   absorbed.npy  mla_forward by the absorbed path
 *   decoded.npy   the absorbed path through the latent cache: the first
 *                 PREFILL positions (default 1) in one step, then one
 *                 position per step, the outputs stacked
 *   weights.npy   the absorbed forward's weights (B, h, n, n)
 * Errors: one line on stderr, exit status 2. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "libmha.h"

static int fail(const char *what)
{
    fprintf(stderr, "mla-run: %s: %s\n", what, mha_last_error());
    return 2;
}

/* A size argument: digits only, at least `least`. */
static int size_arg(const char *s, size_t least, size_t *out)
{
    char *end;
    if (!*s || strspn(s, "0123456789") != strlen(s))
        return 1;
    unsigned long long v = strtoull(s, &end, 10);
    if (v < least)
        return 1;
    *out = (size_t)v;
    return 0;
}

/* DIR/name.npy into *t, or NULL when missing and optional. */
static int load(const char *dir, const char *name, int optional, tensor **t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    *t = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return optional ? GSL_SUCCESS
                        : mha_fail(GSL_EINVAL, "%s: cannot open", path);
    fclose(f);
    return npy_read(path, t);
}

static int save(const char *dir, const char *name, const tensor *t)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.npy", dir, name);
    return npy_write(path, t);
}

/* w's numbers into layer l, whose weight must have w's shape. */
static int set_weight(tensor *into, const tensor *w, const char *name)
{
    if (!w || !tensor_same_shape(into, w)) {
        char a[TRACE_SHAPE_MAX], b[TRACE_SHAPE_MAX] = "missing";
        tensor_shape_str(into, a, sizeof a);
        if (w)
            tensor_shape_str(w, b, sizeof b);
        return mha_fail(GSL_EBADLEN, "%s is %s, the sizes need %s", name, b,
                        a);
    }
    return tensor_copy_into(into, w);
}

int main(int argc, char **argv)
{
    mha_program_init();
    mla_config cfg = {0};
    size_t prefill = 1;
    if ((argc != 6 && argc != 7) ||
        size_arg(argv[2], 1, &cfg.num_heads) ||
        size_arg(argv[3], 1, &cfg.qk_nope_head_dim) ||
        size_arg(argv[4], 2, &cfg.qk_rope_head_dim) ||
        size_arg(argv[5], 1, &cfg.v_head_dim) ||
        (argc == 7 && size_arg(argv[6], 1, &prefill))) {
        fprintf(stderr, "usage: mla-run DIR HEADS NOPE ROPE V [PREFILL] "
                        "(sizes >= 1, ROPE even, PREFILL >= 1)\n");
        return 2;
    }
    const char *dir = argv[1];
    const char *names[] = {"x",     "wq",      "wq_a",  "q_norm", "wq_b",
                           "wkv_a", "kv_norm", "wkv_b", "wo"};
    enum { X, WQ, WQ_A, Q_NORM, WQ_B, WKV_A, KV_NORM, WKV_B, WO, N_IN };
    tensor *in[N_IN] = {0};
    int rc = 0;
    for (int i = 0; i < N_IN && !rc; i++)
        if (load(dir, names[i], i == WQ || i == WQ_A || i == Q_NORM || i == WQ_B,
                 &in[i]))
            rc = fail(names[i]);
    mla m = {0};
    mla_cache c = {0};
    tensor *naive = NULL, *absorbed = NULL, *decoded = NULL, *step = NULL;
    tensor *weights = NULL; // (B, h, n, n), the absorbed path's
    if (!rc) {
        if (in[X]->ndim != 3 || in[WKV_A]->ndim != 2 || in[WKV_B]->ndim != 2) {
            fprintf(stderr, "mla-run: x must be 3-D, wkv_a and wkv_b 2-D\n");
            rc = 2;
        } else {
            cfg.dim = in[X]->shape[2];
            cfg.kv_lora_rank = in[WKV_B]->shape[1];
            cfg.q_lora_rank = in[WQ_A] ? in[WQ_A]->shape[0] : 0;
            if (mla_init(&m, &cfg))
                rc = fail("mla_init");
        }
    }
    if (!rc) {
        struct {
            tensor *into;
            int from;
        } sets[] = {{m.wq.weight, WQ},       {m.wq_a.weight, WQ_A},
                    {m.q_norm, Q_NORM},      {m.wq_b.weight, WQ_B},
                    {m.wkv_a.weight, WKV_A}, {m.kv_norm, KV_NORM},
                    {m.wkv_b.weight, WKV_B}, {m.wo.weight, WO}};
        for (size_t i = 0; i < sizeof sets / sizeof sets[0] && !rc; i++)
            if (sets[i].into &&
                set_weight(sets[i].into, in[sets[i].from], names[sets[i].from]))
                rc = fail(names[sets[i].from]);
    }
    if (!rc && mla_forward(&m, in[X], MLA_NAIVE, &naive, NULL))
        rc = fail("naive");
    if (!rc && mla_forward(&m, in[X], MLA_ABSORBED, &absorbed, &weights))
        rc = fail("absorbed");
    if (!rc && (save(dir, "naive", naive) || save(dir, "absorbed", absorbed) ||
                save(dir, "weights", weights)))
        rc = fail("writing");
    size_t B = in[X] ? in[X]->shape[0] : 0, n = in[X] ? in[X]->shape[1] : 0;
    if (!rc && prefill > n) {
        fprintf(stderr, "mla-run: PREFILL %zu is more than x's %zu positions\n",
                prefill, n);
        rc = 2;
    }
    if (!rc && (mla_cache_init(&c, B, cfg.kv_lora_rank, cfg.qk_rope_head_dim,
                               n) ||
                tensor_alloc(SHAPE(B, n, cfg.dim), &decoded)))
        rc = fail("the cache");
    for (size_t at = 0; !rc && at < n;) {
        size_t len = at == 0 ? prefill : 1;
        tensor *xs = NULL, *slot = NULL;
        if (tensor_narrow(in[X], 1, at, len, &xs) ||
            mla_decode_step(&m, &c, xs, MLA_ABSORBED, &step, NULL) ||
            tensor_narrow(decoded, 1, at, len, &slot) ||
            tensor_copy_into(slot, step))
            rc = fail("decoding");
        tensor_free(xs);
        tensor_free(slot);
        tensor_free(step);
        step = NULL;
        at += len;
    }
    if (!rc && save(dir, "decoded", decoded))
        rc = fail("writing");
    for (int i = 0; i < N_IN; i++)
        tensor_free(in[i]);
    tensor_free(naive);
    tensor_free(absorbed);
    tensor_free(weights);
    tensor_free(decoded);
    mla_cache_free(&c);
    mla_free(&m);
    return rc;
}
