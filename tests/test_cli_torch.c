//> full
/* test_cli_torch.c: PyTorch's nn.MultiheadAttention options of `mha
 * forward` and `mha heatmap` (src/cli/torch.h), run as a child process.
 *
 * Each option is checked against another formulation of the same module:
 * a bool key padding mask against d2l's valid_lens, float and 3-D masks
 * against the bool one, packed projections and a .npz state dict against
 * the separate files, averaged weights against the mean of the per-head
 * ones; add_zero_attn and add_bias_kv by hand, with zero queries (every
 * score 0, so the weights are uniform over the keys that are left).  Each
 * refused combination is run and its one line, exit status 2 and the
 * unchanged directory checked.
 *
 * Inputs written by write_inputs(): B 2, Lq 3, Lk 4, E = D = 4, h 2 heads
 * of 2: q (2, 3, 4), k (2, 4, 4), v (2, 4, 4), wq wk wv wo (4, 4), bq bk
 * bv bo (4,).
 */
#include "check.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zip.h>

#include "scratch.h"
#include "mha_run.h"

static void enter(void) { mha_enter("mha-torch"); }

static void leave(void) { scratch_leave(); }

/* Each of want occurs in text, in this order (a piece of a line or more). */
static void assert_in_order(const char *text, const char *const *want, size_t n)
{
    const char *at = text;
    for (size_t i = 0; i < n; i++) {
        const char *hit = strstr(at, want[i]);
        cr_assert_not_null(hit, "no '%s' after the earlier lines in:\n%s",
                           want[i], text);
        at = hit;
    }
}

static void assert_ok(const char *args)
{
    run r = mha(args);
    cr_assert_eq(r.status, 0, "mha %s: exit %d: %s", args, r.status, r.err);
    cr_assert_str_eq(r.err, "");
    run_free(&r);
}

/* A NumPy bool array ('|b1'), as np.save writes one: bits[i] 0 or 1. */
static void put_bool(const char *path, size_t ndim, const size_t *shape,
                     const unsigned char *bits)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    put_npy(path, "|b1", ndim, shape, bits, n);
}

/* A .npz as numpy.savez writes one: each .npy file given as a member
 * "name.npy" (names[i] <- files[i]). */
static void put_npz(const char *path, const char *const *names,
                    const char *const *files, size_t n)
{
    int err;
    zip_t *z = zip_open(path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    cr_assert_not_null(z);
    for (size_t i = 0; i < n; i++) {
        char member[128];
        snprintf(member, sizeof member, "%s.npy", names[i]);
        zip_source_t *src = zip_source_file(z, files[i], 0, -1);
        cr_assert_not_null(src);
        cr_assert_geq(zip_file_add(z, member, src, ZIP_FL_OVERWRITE), 0);
    }
    cr_assert_eq(zip_close(z), 0, "%s", zip_strerror(z));
}

static tensor *load(const char *path)
{
    tensor *t;
    OK(npy_read(path, &t));
    return t;
}

static void assert_close(const char *a, const char *b, double tol)
{
    tensor *x = load(a), *y = load(b);
    cr_assert(tensor_same_shape(x, y), "%s and %s differ in shape", a, b);
    size_t n = tensor_numel(x);
    for (size_t e = 0; e < n; e++)
        cr_assert(fabs(x->data[e] - y->data[e]) <= tol,
                  "%s and %s differ at %zu: %.17g, %.17g", a, b, e,
                  x->data[e], y->data[e]);
    FREE_ALL(x, y);
}

static void write_inputs(void)
{
    gsl_rng *r = mha_rng_new(29);
    put_normal("q.npy", SHAPE(2, 3, 4), r, 1);
    put_normal("k.npy", SHAPE(2, 4, 4), r, 1);
    put_normal("v.npy", SHAPE(2, 4, 4), r, 1);
    const char *w[] = {"wq.npy", "wk.npy", "wv.npy", "wo.npy"};
    const char *b[] = {"bq.npy", "bk.npy", "bv.npy", "bo.npy"};
    for (int i = 0; i < 4; i++) {
        put_normal(w[i], SHAPE(4, 4), r, 0.5);
        put_normal(b[i], SHAPE(4), r, 0.5);
    }
    put_normal("bias_k.npy", SHAPE(1, 1, 4), r, 1);
    put_normal("bias_v.npy", SHAPE(1, 1, 4), r, 1);
    gsl_rng_free(r);
    // W_q, W_k, W_v stacked (12, 4) and b_q, b_k, b_v (12,)
    tensor *ws[3], *bs[3];
    double packed[48], packed_b[12];
    for (int i = 0; i < 3; i++) {
        ws[i] = load(w[i]);
        bs[i] = load(b[i]);
        memcpy(packed + 16 * i, ws[i]->data, 16 * sizeof(double));
        memcpy(packed_b + 4 * i, bs[i]->data, 4 * sizeof(double));
        tensor_free(ws[i]);
        tensor_free(bs[i]);
    }
    put_values("ipw.npy", SHAPE(12, 4), packed);
    put_values("ipb.npy", SHAPE(12), packed_b);
}

#define QKV "forward|--heads|2|--queries|q.npy|--keys|k.npy|--values|v.npy"
#define WEIGHTS "|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy"
#define BIASES "|--bq|bq.npy|--bk|bk.npy|--bv|bv.npy|--bo|bo.npy"
#define BASE QKV WEIGHTS BIASES

/* --- masks: three conventions, one module ---------------------------- */

/* valid_lens [3, 2] hide keys 3.. of example 0 and 2.. of example 1:
 * as a bool key padding mask (True = ignore), as a float one (-inf), and
 * as a bool (B*h, Lq, Lk) attn_mask, each row of example b the same. */
Test(cli_torch, masks_agree_with_valid_lens, .init = enter, .fini = leave)
{
    write_inputs();
    assert_ok(BASE "|--valid-lens|3,2|--out|o0.npy|--attention-out|a0.npy");
    unsigned char kpm[] = {0, 0, 0, 1, 0, 0, 1, 1};
    put_bool("kpm.npy", SHAPE(2, 4), kpm);
    assert_ok(BASE "|--key-padding-mask|kpm.npy|--out|o1.npy|--attention-out|a1.npy");
    double inf = INFINITY;
    put_values("kpmf.npy", SHAPE(2, 4), (double[]){0, 0, 0, -inf, 0, 0, -inf, -inf});
    assert_ok(BASE "|--key-padding-mask|kpmf.npy|--out|o2.npy|--attention-out|a2.npy");
    unsigned char am[4 * 3 * 4];
    for (size_t n = 0; n < 4; n++) // row n = b*h + i: example n / 2
        for (size_t i = 0; i < 3; i++)
            memcpy(am + (n * 3 + i) * 4, kpm + (n / 2) * 4, 4);
    put_bool("am.npy", SHAPE(4, 3, 4), am);
    assert_ok(BASE "|--attn-mask|am.npy|--out|o3.npy|--attention-out|a3.npy");
    // the masks with valid_lens as well: each hides what the other does
    assert_ok(BASE "|--attn-mask|am.npy|--valid-lens|3,2|--out|o4.npy|--attention-out|a4.npy");
    const char *outs[] = {"o1.npy", "o2.npy", "o3.npy", "o4.npy"};
    const char *as[] = {"a1.npy", "a2.npy", "a3.npy", "a4.npy"};
    for (int i = 0; i < 4; i++) {
        assert_close("o0.npy", outs[i], 1e-12);
        assert_close("a0.npy", as[i], 1e-15);
    }
    tensor *a = load("a1.npy"); // hidden keys weigh exactly 0
    cr_assert_eq(*TENSOR_AT(a, 0, 1, 2, 3), 0.0);
    cr_assert_eq(*TENSOR_AT(a, 1, 0, 0, 2), 0.0);
    tensor_free(a);
}

/* The options combine with --rope, --causal and --kv-heads: the key
 * padding of valid_lens [4, 3] under each gives the numbers of
 * --valid-lens itself (chapter 08's fast path). */
Test(cli_torch, masks_combine_with_rope_causal_and_grouped_heads,
     .init = enter, .fini = leave)
{
    write_inputs();
    unsigned char kpm[] = {0, 0, 0, 0, 0, 0, 0, 1};
    put_bool("kpm.npy", SHAPE(2, 4), kpm);
    gsl_rng *r = mha_rng_new(5);
    put_normal("wk2.npy", SHAPE(2, 4), r, 1);
    static const char *const modes[] = {"|--rope", "|--causal",
                                        "|--rope|--causal"};
    char a[2048], b[2048];
    for (size_t i = 0; i < 3; i++) {
        snprintf(a, sizeof a, "%s%s|--valid-lens|4,3|--out|o1.npy"
                 "|--attention-out|a1.npy", BASE, modes[i]);
        snprintf(b, sizeof b, "%s%s|--key-padding-mask|kpm.npy|--out|o2.npy"
                 "|--attention-out|a2.npy", BASE, modes[i]);
        assert_ok(a);
        assert_ok(b);
        assert_close("o1.npy", "o2.npy", 1e-12);
        assert_close("a1.npy", "a2.npy", 1e-14);
    }
    // one key-value head: W_k and W_v (2, 4), b_k and b_v (2,)
    put_normal("wv2.npy", SHAPE(2, 4), r, 1);
    put_normal("b2.npy", SHAPE(2), r, 1);
    gsl_rng_free(r);
#define GQA QKV "|--wq|wq.npy|--wk|wk2.npy|--wv|wv2.npy|--wo|wo.npy|--bk|b2.npy" \
            "|--bv|b2.npy|--kv-heads|1"
    assert_ok(GQA "|--valid-lens|4,3|--out|o3.npy|--attention-out|a3.npy");
    assert_ok(GQA "|--key-padding-mask|kpm.npy|--out|o4.npy|--attention-out|a4.npy");
    assert_close("o3.npy", "o4.npy", 1e-12);
    assert_close("a3.npy", "a4.npy", 1e-14);
    // with a sink too, under rope: it runs, one more key
    assert_ok(BASE "|--rope|--key-padding-mask|kpm.npy|--add-zero-attn|--out|o5.npy"
                   "|--attention-out|a5.npy");
    tensor *w = load("a5.npy");
    cr_assert_eq(w->shape[3], 5);
    tensor_free(w);
}

/* With zero queries every score is 0, so the weights are the softmax of
 * the float mask alone: [log 2, 0, 0, -inf] gives [1/2, 1/4, 1/4, 0]. */
Test(cli_torch, float_mask_is_added_to_the_scores, .init = enter, .fini = leave)
{
    write_inputs();
    put_values("zq.npy", SHAPE(2, 3, 4), (double[24]){0});
    double row[] = {log(2), 0, 0, -INFINITY};
    double m[12];
    for (int i = 0; i < 3; i++)
        memcpy(m + 4 * i, row, sizeof row);
    put_values("fm.npy", SHAPE(3, 4), m);
    assert_ok("forward|--heads|2|--queries|zq.npy|--keys|k.npy|--values|v.npy"
              WEIGHTS "|--attn-mask|fm.npy|--out|o.npy|--attention-out|a.npy");
    tensor *a = load("a.npy");
    double want[] = {0.5, 0.25, 0.25, 0};
    for (size_t e = 0; e < tensor_numel(a); e++)
        cr_assert_float_eq(a->data[e], want[e % 4], 1e-15, "A[%zu] = %.17g",
                           e, a->data[e]);
    tensor_free(a);
}

/* --- keys that the options add --------------------------------------- */

/* Zero queries, W_v = W_o = I: every key weighs 1/Lk', and out[b, i] is
 * the mean of the value rows that are left: v[b, 0..3], bias_v, zeros. */
Test(cli_torch, zero_attn_and_bias_kv_add_a_key_each, .init = enter,
     .fini = leave)
{
    write_inputs();
    put_values("zq.npy", SHAPE(2, 3, 4), (double[24]){0});
    double eye[16] = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1};
    put_values("eye.npy", SHAPE(4, 4), eye);
#define ZERO_Q "forward|--heads|2|--queries|zq.npy|--keys|k.npy|--values|v.npy" \
               "|--wq|wq.npy|--wk|wk.npy|--wv|eye.npy|--wo|eye.npy"
    assert_ok(ZERO_Q "|--add-zero-attn|--out|o5.npy|--attention-out|a5.npy");
    assert_ok(ZERO_Q "|--add-zero-attn|--bias-k|bias_k.npy|--bias-v|bias_v.npy"
                     "|--out|o6.npy|--attention-out|a6.npy");
    tensor *v = load("v.npy"), *bv = load("bias_v.npy");
    const char *outs[] = {"o5.npy", "o6.npy"}, *as[] = {"a5.npy", "a6.npy"};
    for (int c = 0; c < 2; c++) {
        size_t keys = 5 + (size_t)c;
        tensor *a = load(as[c]), *o = load(outs[c]);
        cr_assert_eq(a->ndim, 4);
        cr_assert_eq(a->shape[3], keys, "Lk' = %zu", a->shape[3]);
        for (size_t e = 0; e < tensor_numel(a); e++)
            cr_assert_float_eq(a->data[e], 1.0 / (double)keys, 1e-15);
        for (size_t b = 0; b < 2; b++)
            for (size_t i = 0; i < 3; i++)
                for (size_t f = 0; f < 4; f++) {
                    double sum = c ? *TENSOR_AT(bv, 0, 0, f) : 0;
                    for (size_t j = 0; j < 4; j++)
                        sum += *TENSOR_AT(v, b, j, f);
                    cr_assert_float_eq(*TENSOR_AT(o, b, i, f),
                                       sum / (double)keys, 1e-14);
                }
        FREE_ALL(a, o);
    }
    FREE_ALL(v, bv);
}

/* A row whose every key is hidden is refused, naming it; the zero key of
 * add_zero_attn is never hidden, so the same masks then run, the row
 * giving all its weight to that key. */
Test(cli_torch, an_empty_row_is_refused_unless_a_sink_is_added, .init = enter,
     .fini = leave)
{
    write_inputs();
    unsigned char kpm[] = {0, 0, 0, 0, 1, 1, 1, 1};
    put_bool("kpm.npy", SHAPE(2, 4), kpm);
    mha_refused(BASE "|--key-padding-mask|kpm.npy|--out|o.npy",
                   "mha forward: multihead_forward_masked: query 0 of example "
                   "1, head 0 sees no key: every entry of its row of the "
                   "merged mask (4, 3, 4) is -inf (PyTorch's "
                   "nn.MultiheadAttention gives NaN there)");
    // valid_lens 0: d2l's uniform row, but with PyTorch's options an empty one
    mha_refused(BASE "|--average-attn-weights|--valid-lens|4,0|--out|o.npy"
                        "|--attention-out|a.npy",
                   "mha forward: multihead_forward_masked: query 0 of example "
                   "1, head 0 sees no key: every entry of its row of the "
                   "merged mask (4, 3, 4) is -inf (PyTorch's "
                   "nn.MultiheadAttention gives NaN there)");
    // a float mask may hide a key with -inf too
    double inf = INFINITY;
    put_values("kpmf.npy", SHAPE(2, 4), (double[]){-inf, 0, -inf, -inf, -inf, -inf, -inf, -inf});
    mha_refused(BASE "|--key-padding-mask|kpmf.npy|--out|o.npy",
                   "mha forward: multihead_forward_masked: query 0 of example "
                   "1, head 0 sees no key: every entry of its row of the "
                   "merged mask (4, 3, 4) is -inf (PyTorch's "
                   "nn.MultiheadAttention gives NaN there)");
    assert_ok(BASE "|--key-padding-mask|kpm.npy|--add-zero-attn|--out|o.npy"
                   "|--attention-out|a.npy");
    tensor *a = load("a.npy");
    for (size_t i = 0; i < 2; i++)
        for (size_t q = 0; q < 3; q++) {
            cr_assert_eq(*TENSOR_AT(a, 1, i, q, 4), 1.0);
            cr_assert_eq(*TENSOR_AT(a, 1, i, q, 0), 0.0);
        }
    tensor_free(a);
}

/* --- weights as PyTorch stores them ---------------------------------- */

Test(cli_torch, average_attn_weights_is_the_mean_of_the_heads, .init = enter,
     .fini = leave)
{
    write_inputs();
    assert_ok(BASE "|--add-zero-attn|--out|o1.npy|--attention-out|a1.npy");
    assert_ok(BASE "|--add-zero-attn|--average-attn-weights|--out|o2.npy"
                   "|--attention-out|a2.npy");
    assert_close("o1.npy", "o2.npy", 0);
    tensor *a = load("a1.npy"), *m = load("a2.npy");
    cr_assert_eq(m->ndim, 3);
    cr_assert_eq(m->shape[2], 5);
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 3; i++)
            for (size_t j = 0; j < 5; j++)
                cr_assert_float_eq(*TENSOR_AT(m, b, i, j),
                                   (*TENSOR_AT(a, b, 0, i, j) +
                                    *TENSOR_AT(a, b, 1, i, j)) / 2,
                                   1e-16);
    FREE_ALL(a, m);
}

/* The packed in_proj_weight and in_proj_bias, and a .npz state dict of
 * either layout, give the numbers of the separate files, bit for bit. */
Test(cli_torch, packed_and_state_dict_equal_the_separate_files, .init = enter,
     .fini = leave)
{
    write_inputs();
    assert_ok(BASE "|--bias-k|bias_k.npy|--bias-v|bias_v.npy|--out|o0.npy"
                   "|--attention-out|a0.npy");
    assert_ok(QKV "|--in-proj-weight|ipw.npy|--in-proj-bias|ipb.npy|--wo|wo.npy"
                  "|--bo|bo.npy|--bias-k|bias_k.npy|--bias-v|bias_v.npy"
                  "|--out|o1.npy|--attention-out|a1.npy");
    const char *names[] = {"in_proj_weight", "in_proj_bias", "out_proj.weight",
                           "out_proj.bias", "bias_k", "bias_v"};
    const char *files[] = {"ipw.npy", "ipb.npy", "wo.npy", "bo.npy",
                           "bias_k.npy", "bias_v.npy"};
    put_npz("model.npz", names, files, 6);
    assert_ok(QKV "|--state-dict|model.npz|--out|o2.npy|--attention-out|a2.npy");
    const char *sep[] = {"q_proj_weight", "k_proj_weight", "v_proj_weight",
                         "in_proj_bias", "out_proj.weight", "out_proj.bias",
                         "bias_k", "bias_v"};
    const char *sep_files[] = {"wq.npy", "wk.npy", "wv.npy", "ipb.npy",
                               "wo.npy", "bo.npy", "bias_k.npy", "bias_v.npy"};
    put_npz("sep.npz", sep, sep_files, 8);
    assert_ok(QKV "|--state-dict|sep.npz|--out|o3.npy|--attention-out|a3.npy");
    const char *o[] = {"o1.npy", "o2.npy", "o3.npy"};
    const char *a[] = {"a1.npy", "a2.npy", "a3.npy"};
    for (int i = 0; i < 3; i++) {
        assert_close("o0.npy", o[i], 0);
        assert_close("a0.npy", a[i], 0);
    }
}

/* --- a damaged state dict ------------------------------------------- */

/* The state dict fixture `name` (tools/make_npy_fixtures.py, made by
 * NumPy) copied here as to. */
static void copy_fixture(const char *name, const char *to)
{
    char from[4200];
    snprintf(from, sizeof from, "%s/tests/fixtures/npy/%s", scratch_home,
             name);
    size_t n;
    char *bytes = file_bytes(from, &n);
    FILE *f = fopen(to, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
    free(bytes);
}

#define SD_RUN "forward|--heads|2|--queries|q.npy|--state-dict|"

/* numpy.savez_compressed's archive with one bit flipped in the deflated
 * bytes of its first member, in_proj_weight.npy, at every third byte
 * (bit i % 8 of byte i): each run refuses it with exit 2 and one line
 * naming the archive and the member, writing nothing, or (a bit deflate
 * does not read) gives the intact archive's numbers.  Never other
 * numbers: a flip that inflates without error is caught by the member's
 * CRC-32, which at least one of them must be. */
Test(cli_torch, a_damaged_state_dict_is_refused, .init = enter, .fini = leave)
{
    write_inputs();
    copy_fixture("state_dict.npz", "sd.npz");
    assert_ok(SD_RUN "sd.npz|--out|ref.npy");
    tensor *ref = load("ref.npy");
    size_t n;
    unsigned char *good = (unsigned char *)file_bytes("sd.npz", &n);
    int err;
    zip_t *z = zip_open("sd.npz", ZIP_RDONLY, &err);
    cr_assert_not_null(z);
    zip_stat_t zs;
    cr_assert_eq(zip_stat_index(z, 0, 0, &zs), 0);
    cr_assert_str_eq(zs.name, "in_proj_weight.npy");
    cr_assert_eq(zs.comp_method, ZIP_CM_DEFLATE);
    zip_discard(z);
    // its local header: 30 bytes, then the name and the extra field
    size_t start = 30 + (good[26] | good[27] << 8) + (good[28] | good[29] << 8);
    cr_assert_leq(start + zs.comp_size, n);
    int crc = 0;
    // every third byte; under valgrind (make memcheck), where each run
    // takes a second or more, every fifteenth
    size_t step = getenv("MHA_MEMCHECK") ? 15 : 3;
    for (size_t i = start; i < start + zs.comp_size; i += step) {
        good[i] ^= (unsigned char)(1 << i % 8);
        FILE *f = fopen("bad.npz", "wb");
        cr_assert_eq(fwrite(good, 1, n, f), n);
        cr_assert_eq(fclose(f), 0);
        good[i] ^= (unsigned char)(1 << i % 8);
        run r = mha(SD_RUN "bad.npz|--out|o.npy");
        if (r.status == 0) {
            tensor *o = load("o.npy");
            cr_assert(memcmp(o->data, ref->data, 24 * sizeof(double)) == 0,
                      "byte %zu, bit %zu flipped: exit 0 with other numbers",
                      i, i % 8);
            tensor_free(o);
            cr_assert_eq(unlink("o.npy"), 0);
        } else {
            cr_assert_eq(r.status, 2, "byte %zu: exit %d: %s", i, r.status,
                         r.err);
            cr_assert(strncmp(r.err, "mha forward: --state-dict bad.npz", 33)
                          == 0 && strstr(r.err, "in_proj_weight"),
                      "byte %zu: %s", i, r.err);
            cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1,
                         "byte %zu: %s", i, r.err);
            cr_assert_neq(access("o.npy", F_OK), 0, "byte %zu", i);
            crc += strcmp(r.err, "mha forward: --state-dict bad.npz: member "
                                 "in_proj_weight.npy is damaged (libzip: CRC "
                                 "error); nothing was read from it\n") == 0;
        }
        run_free(&r);
    }
    cr_assert_gt(crc, 0, "no flip was caught by the CRC-32");
    char names[1024];
    list_dir(".", names, sizeof names);
    cr_assert_null(strstr(names, ".tmp."), "a temporary is left: %s", names);
    tensor_free(ref);
    free(good);
}

/* A member listed twice (NumPy's zipfile writes one with a warning), a
 * bool member, and members bigger than MHA_MEMORY_LIMIT: by the size the
 * archive's directory gives, before inflating (1,200,128 bytes: a 128-byte
 * header and 37500 * 4 float64 zeros), and by the shape in its header,
 * 37500 * 4 float32 which are 1,200,000 bytes as doubles, before a
 * number is read. */
Test(cli_torch, a_state_dict_is_bounded_and_listed_once, .init = enter,
     .fini = leave)
{
    write_inputs();
    copy_fixture("state_dict_twice.npz", "twice.npz");
    unsigned char bits[48] = {0};
    put_bool("ipw_bool.npy", SHAPE(12, 4), bits);
    put_npz("bool.npz", (const char *[]){"in_proj_weight", "out_proj.weight"},
            (const char *[]){"ipw_bool.npy", "wo.npy"}, 2);
    char *zeros = calloc(1, 1200000);
    cr_assert_not_null(zeros);
    put_npy("ipw_f8.npy", "<f8", SHAPE(37500, 4), zeros, 1200000);
    put_npy("ipw_f4.npy", "<f4", SHAPE(37500, 4), zeros, 600000);
    free(zeros);
    put_npz("f8.npz", (const char *[]){"in_proj_weight", "out_proj.weight"},
            (const char *[]){"ipw_f8.npy", "wo.npy"}, 2);
    put_npz("f4.npz", (const char *[]){"in_proj_weight", "out_proj.weight"},
            (const char *[]){"ipw_f4.npy", "wo.npy"}, 2);
    static const refusal cases[] = {
        {SD_RUN "twice.npz|--out|o.npy",
         "mha forward: --state-dict twice.npz holds in_proj_weight.npy twice "
         "(members 1 and 5): which one is the module's?"},
        {SD_RUN "bool.npz|--out|o.npy",
         "mha forward: --state-dict: npy_read: bool.npz:in_proj_weight: shape "
         "(12, 4) of '|b1' is bool, not numbers; expected '<f8' or '<f4' "
         "(floats), '<i8' or '<i4' (integers)"},
    };
    mha_refuses_each(cases, sizeof cases / sizeof cases[0]);
    cr_assert_eq(setenv("MHA_MEMORY_LIMIT", "100000", 1), 0);
    mha_refused(SD_RUN "f8.npz|--out|o.npy",
                "mha forward: --state-dict f8.npz: member in_proj_weight.npy "
                "inflates to 1.1 MiB (1200128 bytes), more than the memory "
                "left: MHA_MEMORY_LIMIT is 97.7 KiB (100000 bytes)");
    cr_assert_eq(setenv("MHA_MEMORY_LIMIT", "1000000", 1), 0);
    mha_refused(SD_RUN "f4.npz|--out|o.npy",
                "mha forward: --state-dict f4.npz: member in_proj_weight.npy "
                "has shape (37500, 4), 1.1 MiB as doubles (1200000 bytes), "
                "more than the memory left: MHA_MEMORY_LIMIT is 976.6 KiB "
                "(1000000 bytes)");
    unsetenv("MHA_MEMORY_LIMIT");
}

/* --- the trace and the heatmap --------------------------------------- */

Test(cli_torch, trace_shows_the_merge_and_the_keys_growing, .init = enter,
     .fini = leave)
{
    write_inputs();
    unsigned char kpm[] = {0, 0, 0, 1, 0, 0, 1, 1};
    put_bool("kpm.npy", SHAPE(2, 4), kpm);
    run r = mha(BASE "|--key-padding-mask|kpm.npy|--bias-k|bias_k.npy"
                     "|--bias-v|bias_v.npy|--add-zero-attn|--trace|--out|o.npy");
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *want[] = {
        "mask merge",
        "key_padding (2, 4) -> (4, 3, 4)",
        "# add_bias_kv: one more key, bias_k: Lk 4 -> 5, and the mask grows a "
        "column of 0, visible to every query",
        "pad(mask, (0, 1), value=0)",
        "(4, 3, 4) -> (4, 3, 5)",
        "# add_zero_attn: one more key, zeros: Lk 5 -> 6",
        "(4, 3, 5) -> (4, 3, 6)",
        "cat(K, bias_k, dim=1)",
        "cat(V, bias_v, dim=1)",
        "# add_zero_attn: a zero key and value appended to every head after "
        "the split",
        "cat(K, zeros, dim=1)",
        "softmax(Q K^T / sqrt(2) + mask)"};
    assert_in_order(r.out, want, sizeof want / sizeof want[0]);
    run_free(&r);
}

/* mha trace runs the same steps on shapes alone, at any size. */
Test(cli_torch, mha_trace_takes_the_options_on_shapes_alone, .init = enter,
     .fini = leave)
{
    run r = mha("trace|--batch|8|--queries|4096|--kv|4096|--hiddens|12288|"
                "--heads|96|--kv-heads|8|--attn-mask|3d|--key-padding-mask|"
                "--add-bias-kv|--add-zero-attn|--average-attn-weights");
    cr_assert_eq(r.status, 0, "%s", r.err);
    const char *want[] = {
        "queries (8, 4096, 12288), keys and values (8, 4096, 12288): 96 heads "
        "of 128 features, 8 key-value heads, attn_mask (768, 4096, 4096), "
        "key_padding_mask (8, 4096), add_bias_kv, add_zero_attn, averaged "
        "weights, no valid_lens\n",
        "mask merge             new   attn_mask (768, 4096, 4096) + "
        "key_padding (8, 4096) -> (768, 4096, 4096)",
        "# add_bias_kv: one more key, bias_k: Lk 4096 -> 4097",
        "(768, 4096, 4096) -> (768, 4096, 4097)",
        "# add_zero_attn: one more key, zeros: Lk 4097 -> 4098",
        "(768, 4096, 4097) -> (768, 4096, 4098)",
        "cat(K, bias_k, dim=1)  copy  (8, 4096, 1024), bias_k (1, 1, 1024) -> "
        "(8, 4097, 1024)",
        "cat(K, zeros, dim=1)   copy  (64, 4097, 128) -> (64, 4098, 128)",
        "mean over heads (average_attn_weights) new   (768, 4096, 4098) -> "
        "(8, 4096, 4098)",
        "output (8, 4096, 12288), attention weights (8, 4096, 4098)\n"};
    assert_in_order(r.out, want, sizeof want / sizeof want[0]);
    run_free(&r);
    mha_refused("trace|--attn-mask|4d",
                   "mha trace: --attn-mask '4d' is not a shape: give 2d for "
                   "(Lq, Lk) or 3d for (B*h, Lq, Lk)");
    mha_refused("trace|--hiddens|8|--heads|2|--rope|--add-bias-kv",
                   "mha trace: --add-bias-kv appends a learned key with no "
                   "position, which --rope cannot turn; give one or the other");
}

Test(cli_torch, heatmap_draws_the_mean_of_the_heads, .init = enter,
     .fini = leave)
{
    write_inputs();
    run r = mha("heatmap|--heads|2|--queries|q.npy|--keys|k.npy|--values|v.npy"
                WEIGHTS "|--add-zero-attn|--average-attn-weights|--terminal");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "example 0, mean of 2 heads"), "%s", r.out);
    cr_assert_not_null(strstr(r.out, "example 1, mean of 2 heads"), "%s", r.out);
    cr_assert_null(strstr(r.out, "head 1"), "%s", r.out);
    run_free(&r);
}

/* --- what is refused ------------------------------------------------- */

Test(cli_torch, refuses_combinations_without_a_meaning, .init = enter,
     .fini = leave)
{
    write_inputs();
    put_npz("model.npz", (const char *[]){"in_proj_weight", "out_proj.weight"},
            (const char *[]){"ipw.npy", "wo.npy"}, 2);
    static const refusal cases[] = {
        {QKV "|--state-dict|model.npz|--wq|wq.npy|--out|o.npy",
         "mha forward: --state-dict 'model.npz' holds the weights; leave out "
         "--wq 'wq.npy'"},
        {QKV "|--state-dict|model.npz|--bias-k|bias_k.npy|--bias-v|bias_v.npy"
             "|--out|o.npy",
         "mha forward: --state-dict 'model.npz' holds the weights; leave out "
         "--bias-k 'bias_k.npy'"},
        {QKV "|--in-proj-weight|ipw.npy|--wk|wk.npy|--wo|wo.npy|--out|o.npy",
         "mha forward: --in-proj-weight 'ipw.npy' packs W_q, W_k and W_v; "
         "leave out --wk 'wk.npy'"},
        {BASE "|--in-proj-bias|ipb.npy|--out|o.npy",
         "mha forward: --in-proj-bias 'ipb.npy' packs b_q, b_k and b_v; leave "
         "out --bq 'bq.npy'"},
        {BASE "|--bias-k|bias_k.npy|--out|o.npy",
         "mha forward: --bias-k 'bias_k.npy' needs --bias-v too: add_bias_kv "
         "appends one key and one value"},
        {BASE "|--bias-v|bias_v.npy|--out|o.npy",
         "mha forward: --bias-v 'bias_v.npy' needs --bias-k too: add_bias_kv "
         "appends one key and one value"},
        {BASE "|--bias-k|bias_k.npy|--bias-v|bias_v.npy|--rope|--out|o.npy",
         "mha forward: --bias-k 'bias_k.npy' is a learned key with no "
         "position, which --rope cannot turn; give one or the other"},
        {QKV "|--in-proj-weight|ipw.npy|--wo|wo.npy|--kv-heads|1|--out|o.npy",
         "mha forward: --in-proj-weight 'ipw.npy' packs three projections of "
         "D rows each; with --kv-heads 1 < --heads 2, W_k and W_v have G*D/h "
         "rows: give --wq, --wk and --wv (and --bq, --bk, --bv)"},
        {QKV WEIGHTS "|--in-proj-bias|ipb.npy|--kv-heads|1|--out|o.npy",
         "mha forward: --in-proj-bias 'ipb.npy' packs three projections of "
         "D rows each; with --kv-heads 1 < --heads 2, W_k and W_v have G*D/h "
         "rows: give --wq, --wk and --wv (and --bq, --bk, --bv)"},
        {BASE "|--average-attn-weights|--out|o.npy",
         "mha forward: --average-attn-weights shapes the weights written to "
         "--attention-out; give --attention-out A.npy"},
        {QKV "|--wo|wo.npy|--out|o.npy",
         "mha forward: --wq is required (see mha forward --help)"},
        {QKV "|--in-proj-weight|ipw.npy|--out|o.npy",
         "mha forward: --wo is required (see mha forward --help)"},
        {BASE "|--attn-mask|q.npy|--out|q.npy",
         "mha forward: --out 'q.npy' and --queries 'q.npy' name the same file "
         "(an output must not replace an input)"},
        {BASE "|--attn-mask|am.npy|--out|./am.npy",
         "mha forward: --out './am.npy' and --attn-mask 'am.npy' name the "
         "same file (an output must not replace an input)"},
    };
    unsigned char am[12] = {0};
    put_bool("am.npy", SHAPE(3, 4), am);
    mha_refuses_each(cases, sizeof cases / sizeof cases[0]);
}

/* The estimate counts the merged mask, the scores and A of the masked
 * module, and reads D off a packed --in-proj-weight. */
Test(cli_torch, memory_is_estimated_with_the_options, .init = enter,
     .fini = leave)
{
    put_values("q.npy", SHAPE(1, 3000, 4), (double[12000]){0});
    put_values("ipw.npy", SHAPE(12, 4), (double[48]){0});
    put_values("eye.npy", SHAPE(4, 4), (double[16]){1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1,
                                             0, 0, 0, 0, 1});
    setenv("MHA_MEMORY_LIMIT", "100000000", 1);
    assert_ok("forward|--heads|2|--queries|q.npy|--wq|eye.npy|--wk|eye.npy|"
              "--wv|eye.npy|--wo|eye.npy|--out|o.npy");
    mha_refused("forward|--heads|2|--queries|q.npy|--in-proj-weight|ipw.npy"
                   "|--wo|eye.npy|--add-zero-attn|--out|o2.npy",
                   // q 96000 + W_o 2*128 + packed 2*384 + Q, K, V, the
                   // joined heads and out 480000 + mask, scores and A
                   // 3 * 2 * 3000 * 3002 * 8 = 432288000 bytes
                   "mha forward: the run needs about 412.8 MiB of memory "
                   "(432865024 bytes) but MHA_MEMORY_LIMIT is 95.4 MiB "
                   "(100000000 bytes); use mha trace for shapes alone");
    unsetenv("MHA_MEMORY_LIMIT");
}

Test(cli_torch, refuses_files_that_do_not_fit, .init = enter, .fini = leave)
{
    write_inputs();
    unsigned char bits[30] = {0};
    put_bool("m35.npy", SHAPE(3, 5), bits);
    put_bool("kp24.npy", SHAPE(4, 2), bits);
    put_bool("kp234.npy", SHAPE(2, 3, 4), bits); // a mask given as queries
    put_bool("kp23.npy", SHAPE(2, 3), bits);
    double huge[24];
    for (int i = 0; i < 24; i++)
        huge[i] = 1e200;
    put_values("huge.npy", SHAPE(2, 3, 4), huge);
    put_values("nan.npy", SHAPE(3, 4), (double[12]){[5] = NAN});
    put_values("pinf.npy", SHAPE(3, 4), (double[12]){[0] = INFINITY});
    put_values("bk14.npy", SHAPE(1, 4), (double[4]){0});
    put_values("ipw_bad.npy", SHAPE(10, 4), (double[40]){0});
    put_values("ipw_cols.npy", SHAPE(12, 3), (double[36]){0});
    FILE *f = fopen("i8.npy", "wb"); // an int64 mask
    const char h[] = "{'descr': '<i8', 'fortran_order': False, 'shape': (3, "
                     "4), }";
    char header[128 - 10];
    memset(header, ' ', sizeof header);
    memcpy(header, h, sizeof h - 1);
    header[sizeof header - 1] = '\n';
    fwrite("\x93NUMPY\x01\x00\x76\x00", 1, 10, f);
    fwrite(header, 1, sizeof header, f);
    fwrite((long long[12]){0}, 8, 12, f);
    fclose(f);
    f = fopen("notzip.npz", "w");
    fputs("not a zip\n", f);
    fclose(f);
    put_npz("extra.npz", (const char *[]){"in_proj_weight", "weight"},
            (const char *[]){"ipw.npy", "wo.npy"}, 2);
    put_npz("noout.npz", (const char *[]){"in_proj_weight"},
            (const char *[]){"ipw.npy"}, 1);
    put_npz("both.npz",
            (const char *[]){"in_proj_weight", "q_proj_weight", "out_proj.weight"},
            (const char *[]){"ipw.npy", "wq.npy", "wo.npy"}, 3);
    put_npz("onlyk.npz",
            (const char *[]){"in_proj_weight", "out_proj.weight", "bias_k"},
            (const char *[]){"ipw.npy", "wo.npy", "bias_k.npy"}, 3);
    static const refusal cases[] = {
        {BASE "|--attn-mask|m35.npy|--out|o.npy",
         "mha forward: --attn-mask m35.npy has shape (3, 5) but B 2, --heads "
         "2, Lq 3 and Lk 4 need (Lq, Lk) = (3, 4) or (B*h, Lq, Lk) = (4, 3, 4)"},
        {BASE "|--key-padding-mask|kp24.npy|--out|o.npy",
         "mha forward: --key-padding-mask kp24.npy has shape (4, 2) but the "
         "keys need (B, Lk) = (2, 4)"},
        {BASE "|--attn-mask|nan.npy|--out|o.npy",
         "mha forward: --attn-mask nan.npy: element 5 of (3, 4) is nan; a "
         "float mask holds finite numbers, or -inf to hide a key"},
        {BASE "|--key-padding-mask|pinf.npy|--out|o.npy",
         "mha forward: --key-padding-mask pinf.npy: element 0 of (3, 4) is "
         "inf; a float mask holds finite numbers, or -inf to hide a key"},
        {BASE "|--attn-mask|i8.npy|--out|o.npy",
         "mha forward: --attn-mask i8.npy holds integers ('<i8'); a mask is "
         "bool (True: may not attend) or float (added to the scores)"},
        {"forward|--heads|2|--queries|kp234.npy" WEIGHTS "|--out|o.npy",
         "mha forward: --queries: npy_read: kp234.npy: shape (2, 3, 4) of "
         "'|b1' is bool, not numbers; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers)"},
        // scores of 1e400: the masked module names itself once
        {"forward|--heads|2|--queries|huge.npy" WEIGHTS
         "|--key-padding-mask|kp23.npy|--out|o.npy",
         "mha forward: multihead_forward_masked: the output overflowed: out[0, "
         "0, 0] = nan from finite inputs (out (2, 3, 4))"},
        {BASE "|--bias-k|bk14.npy|--bias-v|bias_v.npy|--out|o.npy",
         "mha forward: --bias-k bk14.npy has shape (1, 4) but it must be (1, 1, "
         "4): one key as wide as the projected keys"},
        {QKV "|--in-proj-weight|ipw_bad.npy|--wo|wo.npy|--out|o.npy",
         "mha forward: --in-proj-weight ipw_bad.npy has shape (10, 4): its 10 "
         "rows are not 3E (W_q, W_k and W_v stacked)"},
        {QKV "|--in-proj-weight|ipw_cols.npy|--wo|wo.npy|--out|o.npy",
         "mha forward: --in-proj-weight ipw_cols.npy has shape (12, 3) but the "
         "queries have 4 features, the keys 4 and the values 4: packed "
         "projections share one input size (give --wq, --wk and --wv)"},
        {QKV "|--state-dict|extra.npz|--out|o.npy",
         "mha forward: --state-dict extra.npz holds 'weight.npy', which is not "
         "in nn.MultiheadAttention's state_dict (in_proj_weight, "
         "q_proj_weight, k_proj_weight, v_proj_weight, in_proj_bias, "
         "out_proj.weight, out_proj.bias, bias_k, bias_v, each a .npy)"},
        {QKV "|--state-dict|noout.npz|--out|o.npy",
         "mha forward: --state-dict noout.npz has no out_proj.weight"},
        {QKV "|--state-dict|both.npz|--out|o.npy",
         "mha forward: --state-dict both.npz holds in_proj_weight and "
         "q/k/v_proj_weight; a module has one or the other"},
        {QKV "|--state-dict|onlyk.npz|--out|o.npy",
         "mha forward: --state-dict onlyk.npz holds bias_k without bias_v: "
         "add_bias_kv makes both"},
        {QKV "|--state-dict|missing.npz|--out|o.npy",
         "mha forward: --state-dict missing.npz: cannot open: No such file or "
         "directory"},
    };
    mha_refuses_each(cases, sizeof cases / sizeof cases[0]);
    // not a zip: libzip's own words follow
    run r = mha(QKV "|--state-dict|notzip.npz|--out|o.npy");
    cr_assert_eq(r.status, 2);
    cr_assert(strncmp(r.err, "mha forward: --state-dict notzip.npz is not a "
                             ".npz archive (libzip: ",
                      59) == 0,
              "%s", r.err);
    cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1);
    run_free(&r);
}
//<
