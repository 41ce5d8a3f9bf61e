//> handout
//> 18
/* torch.c: PyTorch's nn.MultiheadAttention options of torch.h, read and
 * checked.
 *
 * Shapes (E = D = h*p, G*p the projected keys' width):
 *   attn_mask (Lq, Lk) or (B*h, Lq, Lk), key_padding_mask (B, Lk)
 *   in_proj_weight (3E, Din), in_proj_bias (3E,), bias_k, bias_v (1, 1, G*p)
 */
#define _GNU_SOURCE /* fopencookie */
#include "torch.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zip.h>

enum { WQ, WK, WV, WO, BQ, BK, BV, BO, NW };

static const char *value_of(cli_option *opts, size_t nopts, const char *name)
{
    return cli_find(opts, nopts, name)->value;
}

int cli_torch_wanted(cli_option *opts, size_t nopts)
{
    static const char *const names[] = {CLI_TORCH_FILES, "--add-zero-attn",
                                        "--average-attn-weights"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (value_of(opts, nopts, names[i]))
            return 1;
    return 0;
}

/* The first of names[0 .. n-1] given, or NULL. */
static const char *first_given(cli_option *opts, size_t nopts,
                               const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (value_of(opts, nopts, names[i]))
            return names[i];
    return NULL;
}

int cli_torch_check_options(cli_option *opts, size_t nopts, int need_out)
{
#define V(name) value_of(opts, nopts, name)
    const char *sd = V("--state-dict"), *ipw = V("--in-proj-weight");
    const char *ipb = V("--in-proj-bias"), *bk = V("--bias-k"), *bv = V("--bias-v");
    static const char *const held[] = {
        "--wq", "--wk", "--wv", "--wo", "--bq", "--bk", "--bv", "--bo",
        "--in-proj-weight", "--in-proj-bias", "--bias-k", "--bias-v"};
    const char *o;
    if (sd && (o = first_given(opts, nopts, held, 12)))
        return cli_error("--state-dict '%s' holds the weights; leave out %s "
                         "'%s'",
                         sd, o, V(o));
    if (ipw && (o = first_given(opts, nopts, held, 3)))
        return cli_error("--in-proj-weight '%s' packs W_q, W_k and W_v; "
                         "leave out %s '%s'",
                         ipw, o, V(o));
    if (ipb && (o = first_given(opts, nopts, held + 4, 3)))
        return cli_error("--in-proj-bias '%s' packs b_q, b_k and b_v; leave "
                         "out %s '%s'",
                         ipb, o, V(o));
    if (!bk != !bv)
        return cli_error("%s '%s' needs %s too: add_bias_kv appends one key "
                         "and one value",
                         bk ? "--bias-k" : "--bias-v", bk ? bk : bv,
                         bk ? "--bias-v" : "--bias-k");
    if (bk && V("--rope"))
        return cli_error("--bias-k '%s' is a learned key with no position, "
                         "which --rope cannot turn; give one or the other",
                         bk);
    size_t heads = 1, kv_heads = 1;
    cli_parse_count(cli_find(opts, nopts, "--heads"), CLI_COUNT_MAX, &heads);
    kv_heads = heads;
    cli_parse_count(cli_find(opts, nopts, "--kv-heads"), CLI_COUNT_MAX,
                    &kv_heads); // both checked already
    const char *packed = ipw ? "--in-proj-weight" : ipb ? "--in-proj-bias"
                                                        : NULL;
    if (packed && kv_heads < heads)
        return cli_error("%s '%s' packs three projections of D rows each; "
                         "with --kv-heads %zu < --heads %zu, W_k and W_v have "
                         "G*D/h rows: give --wq, --wk and --wv (and --bq, "
                         "--bk, --bv)",
                         packed, V(packed), kv_heads, heads);
    if (need_out && V("--average-attn-weights") && !V("--attention-out"))
        return cli_error("--average-attn-weights shapes the weights written "
                         "to --attention-out; give --attention-out A.npy");
    return CLI_OK;
#undef V
}

/* --- .npz: a zip of .npy files, read with libzip --------------------- */

/* The state_dict names nn.MultiheadAttention uses, in the order kept. */
static const char *const sd_names[] = {
    "in_proj_weight", "q_proj_weight", "k_proj_weight",  "v_proj_weight",
    "in_proj_bias",   "out_proj.weight", "out_proj.bias", "bias_k",
    "bias_v"};
enum { SD_IN_W, SD_Q_W, SD_K_W, SD_V_W, SD_IN_B, SD_OUT_W, SD_OUT_B,
       SD_BIAS_K, SD_BIAS_V, SD_N };

/* Which of sd_names the member called name is: SD_N for none. */
static size_t sd_index(const char *name)
{
    size_t len = name ? strlen(name) : 0;
    if (len <= 4 || strcmp(name + len - 4, ".npy") != 0)
        return SD_N;
    size_t k = 0;
    while (k < SD_N && !(strlen(sd_names[k]) == len - 4 &&
                         strncmp(sd_names[k], name, len - 4) == 0))
        k++;
    return k;
}

/* A member as it is inflated, read through a stdio stream (fopencookie)
 * so the .npy reader reads it as a file: never past the size its entry
 * in the archive's directory gives, and libzip's failure kept. */
typedef struct member {
    zip_file_t *zf;
    zip_uint64_t left; /* bytes not read yet */
    int failed;        /* libzip refused a read: zip_file_strerror says why */
} member;

static ssize_t member_read(void *cookie, char *buf, size_t n)
{
    member *m = cookie;
    if (n > m->left)
        n = (size_t)m->left;
    if (n == 0)
        return 0;
    zip_int64_t got = zip_fread(m->zf, buf, n);
    if (got < 0) {
        m->failed = 1;
        errno = EIO;
        return -1;
    }
    m->left -= (zip_uint64_t)got;
    return (ssize_t)got;
}

/* libzip's refusal of member name of the archive at path. */
static int damaged(const char *path, const char *name, const char *why)
{
    return cli_error("--state-dict %s: member %s is damaged (libzip: %s); "
                     "nothing was read from it",
                     path, name, why);
}

/* Member i (named name, its directory entry zs) of z, at path, inflated
 * into *out, with *used the bytes its predecessors' numbers take and
 * limit (said as from) the bytes a run may use.  Before inflating, the
 * size its entry gives must fit the limit; before a number is read, its
 * header's shape, as doubles, too; once read, libzip must find the
 * member's CRC-32 and size as its entry gives them. */
static int read_member(const char *path, zip_t *z, zip_uint64_t i,
                       const char *name, const zip_stat_t *zs, double limit,
                       const char *from, double *used, tensor **out)
{
    char label[512], size[32];
    snprintf(label, sizeof label, "%s:%.*s", path, (int)(strlen(name) - 4),
             name);
    if (limit > 0 && (double)zs->size > limit - *used)
        return cli_error("--state-dict %s: member %s inflates to %s (%ju "
                         "bytes), more than the memory left: %s",
                         path, name,
                         mha_bytes_text((double)zs->size, size, sizeof size),
                         (uintmax_t)zs->size, from);
    member m = {zip_fopen_index(z, i, 0), zs->size, 0};
    if (!m.zf)
        return damaged(path, name, zip_strerror(z));
    FILE *f = fopencookie(&m, "rb", (cookie_io_functions_t){.read = member_read});
    if (!f) {
        zip_fclose(m.zf);
        return cli_error("--state-dict %s: member %s: cannot read: %s", path,
                         name, strerror(errno));
    }
    npy_header h;
    int bad = npy_stream_header(f, (size_t)zs->size, label, &h) != 0;
    double bytes = (double)h.numel * sizeof(double);
    int too_big = !bad && limit > 0 && bytes > limit - *used;
    if (!bad && !too_big)
        bad = npy_stream_numbers(f, label, &h, 0, out) != 0;
    fclose(f);
    // to its end, where libzip checks the member's CRC-32 and size: a
    // member the .npy reader refused may be a damaged one, which is the
    // better thing to say
    char rest[4096];
    zip_int64_t got = 0;
    while (!too_big && !m.failed &&
           (got = zip_fread(m.zf, rest, bad ? sizeof rest : 1)) > 0 && bad)
        ;
    int status = CLI_OK;
    char s[TRACE_SHAPE_MAX];
    if (m.failed || got < 0)
        status = damaged(path, name, zip_file_strerror(m.zf));
    else if (got > 0)
        status = cli_error("--state-dict %s: member %s inflates to more than "
                           "the %ju bytes its directory entry gives",
                           path, name, (uintmax_t)zs->size);
    else if (too_big)
        status = cli_error("--state-dict %s: member %s has shape %s, %s as "
                           "doubles (%.0f bytes), more than the memory "
                           "left: %s",
                           path, name,
                           trace_dims_str(s, sizeof s, h.ndim, h.shape),
                           mha_bytes_text(bytes, size, sizeof size), bytes,
                           from);
    else if (bad)
        status = cli_error("--state-dict: %s", mha_last_error());
    zip_fclose(m.zf);
    if (status) {
        tensor_free(*out);
        *out = NULL;
        return status;
    }
    *used += bytes;
    return CLI_OK;
}

/* The archive at path, refused by libzip with err. */
static int not_an_archive(const char *path, int err)
{
    zip_error_t ze;
    zip_error_init_with_code(&ze, err);
    int status = cli_error("--state-dict %s is not a .npz archive (libzip: "
                           "%s); save one with "
                           "numpy.savez(path, **state_dict)",
                           path, zip_error_strerror(&ze));
    zip_error_fini(&ze);
    return status;
}

/* Every member of the archive at path into sd[0 .. SD_N-1] by its name.
 * Before any is inflated, a member of another name, or one listed twice,
 * is refused. */
static int read_npz(const char *path, tensor **sd)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return cli_error("--state-dict %s: cannot open: %s", path,
                         strerror(errno));
    if (!S_ISREG(st.st_mode))
        return cli_error("--state-dict %s is not a regular file", path);
    double limit = 0;
    char from[96];
    if (cli_memory_limit(&limit, from, sizeof from))
        return CLI_USAGE;
    int err = 0;
    // ZIP_CHECKCONS: each member's local header must agree with the
    // directory at the end of the archive, and no name may be listed
    // twice; for that, the archive is opened again without it, to name
    // the member
    zip_t *z = zip_open(path, ZIP_RDONLY | ZIP_CHECKCONS, &err);
    int twice = !z && err == ZIP_ER_EXISTS;
    if (twice)
        z = zip_open(path, ZIP_RDONLY, &(int){0});
    if (!z)
        return not_an_archive(path, err);
    int status = CLI_OK;
    zip_int64_t n = zip_get_num_entries(z, 0);
    zip_int64_t first[SD_N];
    for (size_t k = 0; k < SD_N; k++)
        first[k] = -1;
    for (zip_int64_t i = 0; i < n && !status; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        size_t k = sd_index(name);
        if (k == SD_N)
            status = cli_error("--state-dict %s holds '%s', which is not in "
                               "nn.MultiheadAttention's state_dict "
                               "(in_proj_weight, q_proj_weight, "
                               "k_proj_weight, v_proj_weight, in_proj_bias, "
                               "out_proj.weight, out_proj.bias, bias_k, "
                               "bias_v, each a .npy)",
                               path, name ? name : "?");
        else if (first[k] >= 0)
            status = cli_error("--state-dict %s holds %s twice (members %jd "
                               "and %jd): which one is the module's?",
                               path, name, (intmax_t)first[k] + 1,
                               (intmax_t)i + 1);
        else
            first[k] = i;
    }
    if (twice && !status)
        status = not_an_archive(path, err);
    double used = 0;
    for (zip_int64_t i = 0; i < n && !status; i++) {
        const char *name = zip_get_name(z, (zip_uint64_t)i, 0);
        zip_stat_t zs;
        if (zip_stat_index(z, (zip_uint64_t)i, 0, &zs) != 0 ||
            (zs.valid & (ZIP_STAT_SIZE | ZIP_STAT_CRC)) !=
                (ZIP_STAT_SIZE | ZIP_STAT_CRC))
            status = damaged(path, name, zip_strerror(z));
        else
            status = read_member(path, z, (zip_uint64_t)i, name, &zs, limit,
                                 from, &used, &sd[sd_index(name)]);
    }
    zip_discard(z);
    return status;
}

/* rows [r0, r0 + n) of the 2-D w, or the entries [r0, r0 + n) of the 1-D
 * w, as a new tensor */
static int rows_of(const tensor *w, size_t r0, size_t n, tensor **out)
{
    tensor *v = NULL;
    int status = tensor_narrow(w, 0, r0, n, &v);
    if (!status)
        status = tensor_contiguous(v, out);
    tensor_free(v);
    return status ? cli_error("%s", mha_last_error()) : CLI_OK;
}

/* A packed (3E, Din) weight or (3E,) bias split into three, into
 * w[first .. first+2], each called "label[a:b]". */
static int unpack(const char *option, const char *label, const tensor *t,
                  int bias, size_t dq, size_t dk, size_t dv, tensor **w,
                  const char **options, char (*paths)[256], int first)
{
    char s[TRACE_SHAPE_MAX];
    tensor_shape_str(t, s, sizeof s);
    if (t->ndim != (bias ? 1u : 2u))
        return cli_error("%s %s has shape %s, expected %s", option, label, s,
                         bias ? "1 dimension (3E,)" : "2 dimensions (3E, E)");
    if (t->shape[0] % 3 != 0)
        return cli_error("%s %s has shape %s: its %zu %s are not 3E (W_q, "
                         "W_k and W_v%s stacked)",
                         option, label, s, t->shape[0],
                         bias ? "entries" : "rows", bias ? "'s biases" : "");
    if (!bias && (t->shape[1] != dq || t->shape[1] != dk || t->shape[1] != dv))
        return cli_error("%s %s has shape %s but the queries have %zu "
                         "features, the keys %zu and the values %zu: packed "
                         "projections share one input size (give --wq, --wk "
                         "and --wv)",
                         option, label, s, dq, dk, dv);
    size_t E = t->shape[0] / 3;
    for (int i = 0; i < 3; i++) {
        if (rows_of(t, (size_t)i * E, E, &w[first + i]))
            return CLI_USAGE;
        options[first + i] = option;
        snprintf(paths[first + i], 256, "%s[%zu:%zu]", label, (size_t)i * E,
                 (size_t)(i + 1) * E);
    }
    return CLI_OK;
}

int cli_torch_weights(cli_option *opts, size_t nopts, size_t dq, size_t dk,
                      size_t dv, tensor **w, const char **options,
                      char (*paths)[256])
{
    const char *ipw = value_of(opts, nopts, "--in-proj-weight");
    const char *ipb = value_of(opts, nopts, "--in-proj-bias");
    const char *sd_path = value_of(opts, nopts, "--state-dict");
    tensor *t = NULL;
    int status = CLI_OK;
    if (ipw) {
        if (npy_read(ipw, &t))
            return cli_error("--in-proj-weight: %s", mha_last_error());
        status = unpack("--in-proj-weight", ipw, t, 0, dq, dk, dv, w, options,
                        paths, WQ);
        tensor_free(t);
    }
    if (!status && ipb) {
        if (npy_read(ipb, &t))
            return cli_error("--in-proj-bias: %s", mha_last_error());
        status = unpack("--in-proj-bias", ipb, t, 1, dq, dk, dv, w, options,
                        paths, BQ);
        tensor_free(t);
    }
    if (status || !sd_path)
        return status;

    tensor *sd[SD_N] = {NULL};
    char label[SD_N][256];
    for (int k = 0; k < SD_N; k++)
        snprintf(label[k], sizeof label[k], "%s:%s", sd_path, sd_names[k]);
    status = read_npz(sd_path, sd);
    int separate = sd[SD_Q_W] || sd[SD_K_W] || sd[SD_V_W];
    if (!status && sd[SD_IN_W] && separate)
        status = cli_error("--state-dict %s holds in_proj_weight and "
                           "q/k/v_proj_weight; a module has one or the other",
                           sd_path);
    else if (!status && !sd[SD_IN_W] &&
             !(sd[SD_Q_W] && sd[SD_K_W] && sd[SD_V_W]))
        status = cli_error("--state-dict %s has no in_proj_weight, nor all "
                           "of q_proj_weight, k_proj_weight and "
                           "v_proj_weight",
                           sd_path);
    else if (!status && !sd[SD_OUT_W])
        status = cli_error("--state-dict %s has no out_proj.weight", sd_path);
    if (!status && sd[SD_IN_W])
        status = unpack("--state-dict", label[SD_IN_W], sd[SD_IN_W], 0, dq,
                        dk, dv, w, options, paths, WQ);
    if (!status && sd[SD_IN_B])
        status = unpack("--state-dict", label[SD_IN_B], sd[SD_IN_B], 1, dq,
                        dk, dv, w, options, paths, BQ);
    // the rest go as they are: their shapes are checked as --wq's are
    static const int moved[][2] = {{SD_Q_W, WQ}, {SD_K_W, WK}, {SD_V_W, WV},
                                   {SD_OUT_W, WO}, {SD_OUT_B, BO}};
    for (size_t i = 0; i < 5 && !status; i++) {
        int k = moved[i][0], to = moved[i][1];
        if (!sd[k])
            continue;
        w[to] = sd[k];
        sd[k] = NULL;
        options[to] = "--state-dict";
        snprintf(paths[to], 256, "%s", label[k]);
    }
    for (int k = 0; k < SD_N; k++)
        tensor_free(sd[k]);
    return status;
}

/* --- the masks and bias_kv -------------------------------------------- */

/* A mask file as an additive mask: bool through mask_from_bool (True =
 * may not attend), float as it is, finite or -inf. */
static int read_mask(const char *option, const char *path, tensor **out)
{
    tensor *t = NULL;
    npy_header h;
    *out = NULL;
    if (npy_read_typed(path, &t, &h))
        return cli_error("%s: %s", option, mha_last_error());
    int status = CLI_OK;
    if (strcmp(h.descr, "|b1") == 0) {
        if (mask_from_bool(t, 1, out))
            status = cli_error("%s %s: %s", option, path, mha_last_error());
        tensor_free(t);
        return status;
    }
    if (h.descr[1] == 'i') {
        tensor_free(t);
        return cli_error("%s %s holds integers ('%s'); a mask is bool (True: "
                         "may not attend) or float (added to the scores)",
                         option, path, h.descr);
    }
    size_t n = tensor_numel(t);
    for (size_t e = 0; e < n; e++)
        if (isnan(t->data[e]) || t->data[e] == INFINITY) {
            char v[TRACE_NUMBER_MAX], s[TRACE_SHAPE_MAX];
            status = cli_error("%s %s: element %zu of %s is %s; a float mask "
                               "holds finite numbers, or -inf to hide a key",
                               option, path, e,
                               tensor_shape_str(t, s, sizeof s),
                               trace_number_str(v, sizeof v, t->data[e]));
            tensor_free(t);
            return status;
        }
    *out = t;
    return CLI_OK;
}

int cli_torch_load(cli_option *opts, size_t nopts, size_t B, size_t h,
                   size_t Lq, size_t Lk, size_t kv_width, cli_torch *t)
{
    memset(t, 0, sizeof *t);
    t->add_zero_attn = value_of(opts, nopts, "--add-zero-attn") != NULL;
    t->average_weights =
        value_of(opts, nopts, "--average-attn-weights") != NULL;
    const char *am = value_of(opts, nopts, "--attn-mask");
    const char *kp = value_of(opts, nopts, "--key-padding-mask");
    char s[TRACE_SHAPE_MAX];
    if (am && read_mask("--attn-mask", am, &t->attn_mask))
        return CLI_USAGE;
    if (t->attn_mask) {
        const tensor *m = t->attn_mask;
        int two = m->ndim == 2 && m->shape[0] == Lq && m->shape[1] == Lk;
        int three = m->ndim == 3 && m->shape[0] == B * h &&
                    m->shape[1] == Lq && m->shape[2] == Lk;
        if (!two && !three)
            return cli_error("--attn-mask %s has shape %s but B %zu, --heads "
                             "%zu, Lq %zu and Lk %zu need (Lq, Lk) = (%zu, "
                             "%zu) or (B*h, Lq, Lk) = (%zu, %zu, %zu)",
                             am, tensor_shape_str(m, s, sizeof s), B, h, Lq,
                             Lk, Lq, Lk, B * h, Lq, Lk);
    }
    if (kp && read_mask("--key-padding-mask", kp, &t->key_padding))
        return CLI_USAGE;
    if (t->key_padding) {
        const tensor *m = t->key_padding;
        if (!(m->ndim == 2 && m->shape[0] == B && m->shape[1] == Lk))
            return cli_error("--key-padding-mask %s has shape %s but the keys "
                             "need (B, Lk) = (%zu, %zu)",
                             kp, tensor_shape_str(m, s, sizeof s), B, Lk);
    }
    // bias_k and bias_v: their own files, or the state dict's
    const char *sd_path = value_of(opts, nopts, "--state-dict");
    const char *opt[2] = {"--bias-k", "--bias-v"};
    tensor **dst[2] = {&t->bias_k, &t->bias_v};
    char where[2][512];
    if (sd_path) {
        tensor *sd[SD_N] = {NULL};
        if (read_npz(sd_path, sd)) {
            for (int k = 0; k < SD_N; k++)
                tensor_free(sd[k]);
            return CLI_USAGE;
        }
        t->bias_k = sd[SD_BIAS_K];
        t->bias_v = sd[SD_BIAS_V];
        sd[SD_BIAS_K] = sd[SD_BIAS_V] = NULL;
        for (int k = 0; k < SD_N; k++)
            tensor_free(sd[k]);
        if (!t->bias_k != !t->bias_v)
            return cli_error("--state-dict %s holds %s without %s: "
                             "add_bias_kv makes both",
                             sd_path, t->bias_k ? "bias_k" : "bias_v",
                             t->bias_k ? "bias_v" : "bias_k");
        if (t->bias_k && value_of(opts, nopts, "--rope"))
            return cli_error("--state-dict %s holds bias_k, a learned key "
                             "with no position, which --rope cannot turn",
                             sd_path);
        for (int i = 0; i < 2; i++) {
            opt[i] = "--state-dict";
            snprintf(where[i], sizeof where[i], "%s:%s", sd_path,
                     i ? "bias_v" : "bias_k");
        }
    } else {
        for (int i = 0; i < 2; i++) {
            const char *p = value_of(opts, nopts, opt[i]);
            snprintf(where[i], sizeof where[i], "%s", p ? p : "");
            if (p && npy_read(p, dst[i]))
                return cli_error("%s: %s", opt[i], mha_last_error());
        }
    }
    for (int i = 0; i < 2; i++) {
        const tensor *b = *dst[i];
        if (b && !(b->ndim == 3 && b->shape[0] == 1 && b->shape[1] == 1 &&
                   b->shape[2] == kv_width))
            return cli_error("%s %s has shape %s but it must be (1, 1, %zu): "
                             "one %s as wide as the projected %s",
                             opt[i], where[i], tensor_shape_str(b, s, sizeof s),
                             kv_width, i ? "value" : "key",
                             i ? "values" : "keys");
        if (b && tensor_check_finite(b, opt[i], i ? "bias_v" : "bias_k"))
            return cli_error("%s", mha_last_error());
    }
    return CLI_OK;
}

int cli_torch_forward(const multihead *m, const tensor *q, const tensor *k,
                      const tensor *v, const tensor *valid_lens,
                      const cli_torch *t, tensor **out, tensor **weights)
{
    mask_options opt = {.attn_mask = t->attn_mask,
                        .key_padding = t->key_padding,
                        .valid_lens = valid_lens,
                        .bias_k = t->bias_k,
                        .bias_v = t->bias_v,
                        .add_zero_attn = t->add_zero_attn,
                        .average_weights = t->average_weights};
    if (multihead_forward_masked(m, q, k, v, &opt, out, weights))
        return cli_error("%s", mha_last_error());
    return CLI_OK;
}

int cli_torch_heatmap_weights(const multihead *m, const tensor *q,
                              const tensor *k, const tensor *v,
                              const tensor *valid_lens, const cli_torch *t,
                              tensor **out, tensor **weights, tensor **panels)
{
    *panels = NULL;
    if (cli_torch_forward(m, q, k, v, valid_lens, t, out, weights))
        return CLI_USAGE;
    const tensor *a = *weights;
    long shape[4] = {(long)a->shape[0], 1, (long)a->shape[1],
                     (long)a->shape[2]};
    if (!t->average_weights)
        for (int d = 0; d < 4; d++)
            shape[d] = (long)a->shape[d];
    if (tensor_view(a, 4, shape, NULL, panels))
        return cli_error("%s", mha_last_error());
    return CLI_OK;
}

int cli_torch_trace_options(cli_option *opts, size_t nopts, size_t B,
                            size_t h, size_t Lq, size_t Lk, size_t kv_width,
                            int *wanted, cli_torch *t)
{
    memset(t, 0, sizeof *t);
    const char *am = value_of(opts, nopts, "--attn-mask");
    int kp = value_of(opts, nopts, "--key-padding-mask") != NULL;
    int bias_kv = value_of(opts, nopts, "--add-bias-kv") != NULL;
    t->add_zero_attn = value_of(opts, nopts, "--add-zero-attn") != NULL;
    t->average_weights =
        value_of(opts, nopts, "--average-attn-weights") != NULL;
    *wanted = am || kp || bias_kv || t->add_zero_attn || t->average_weights;
    if (am && strcmp(am, "2d") && strcmp(am, "3d"))
        return cli_error("--attn-mask '%s' is not a shape: give 2d for (Lq, "
                         "Lk) or 3d for (B*h, Lq, Lk)",
                         am);
    if (bias_kv && value_of(opts, nopts, "--rope"))
        return cli_error("--add-bias-kv appends a learned key with no "
                         "position, which --rope cannot turn; give one or "
                         "the other");
    int status = 0;
    if (am && !strcmp(am, "2d"))
        status = tensor_alloc_meta(SHAPE(Lq, Lk), &t->attn_mask);
    else if (am)
        status = tensor_alloc_meta(SHAPE(B * h, Lq, Lk), &t->attn_mask);
    if (!status && kp)
        status = tensor_alloc_meta(SHAPE(B, Lk), &t->key_padding);
    if (!status && bias_kv)
        status = tensor_alloc_meta(SHAPE(1, 1, kv_width), &t->bias_k);
    if (!status && bias_kv)
        status = tensor_alloc_meta(SHAPE(1, 1, kv_width), &t->bias_v);
    return status ? cli_error("%s", mha_last_error()) : CLI_OK;
}

void cli_torch_describe(FILE *f, const cli_torch *t)
{
    char s[TRACE_SHAPE_MAX];
    if (t->attn_mask)
        fprintf(f, "attn_mask %s, ",
                tensor_shape_str(t->attn_mask, s, sizeof s));
    if (t->key_padding)
        fprintf(f, "key_padding_mask %s, ",
                tensor_shape_str(t->key_padding, s, sizeof s));
    if (t->bias_k)
        fprintf(f, "add_bias_kv, ");
    if (t->add_zero_attn)
        fprintf(f, "add_zero_attn, ");
    if (t->average_weights)
        fprintf(f, "averaged weights, ");
}

void cli_torch_free(cli_torch *t)
{
    tensor_free(t->attn_mask);
    tensor_free(t->key_padding);
    tensor_free(t->bias_k);
    tensor_free(t->bias_v);
    memset(t, 0, sizeof *t);
}
//<
//<
