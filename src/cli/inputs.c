//> handout
//> 08
/* inputs.c: read and check the inputs of `mha forward` / `mha heatmap`.
 *
 * Shapes: queries (B, Lq, Dq), keys (B, Lk, Dk), values (B, Lk, Dv);
 * W_q (D, Dq), W_k (D, Dk), W_v (D, Dv), W_o (D_out, D); biases (D,) and
 * (D_out,); valid_lens (B,) or (B, Lq). */
#include "inputs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nn/qkv.h"

/* The files, in the order they are read and checked. */
enum { Q, K, V, WQ, WK, WV, WO, BQ, BK, BV, BO, VL, NFILES };
static const char *const file_option[NFILES] = {
    "--queries", "--keys", "--values", "--wq", "--wk", "--wv", "--wo",
    "--bq", "--bk", "--bv", "--bo", "--valid-lens-file"};

/* The option a weight came from when PyTorch's options gave it
 * (--in-proj-weight, --state-dict), for the messages; NULL: its own. */
static const char *given_by[NFILES];

static const char *option_of(int f)
{
    return given_by[f] ? given_by[f] : file_option[f];
}

/* The option's value; NULL when it is not given, or when this program
 * has no such option (a handout's, cut before the option's chapter). */
static const char *value_of(cli_option *opts, size_t nopts, const char *name)
{
    const cli_option *o = cli_find(opts, nopts, name);
    return o ? o->value : NULL;
}

/* --valid-lens read into lens (n of them; n = 0 when it is not given):
 * CLI_OK, or CLI_USAGE after the parser's one line. */
static int parse_lens(cli_option *opts, size_t nopts, double *lens,
                      size_t *n)
{
    const cli_option *list = cli_find(opts, nopts, "--valid-lens");
    *n = 0;
    if (list->value && cli_parse_list(list, lens, CLI_LIST_MAX, n))
        return CLI_USAGE;
    return CLI_OK;
}

//> 15
int cli_rope_options(cli_option *opts, size_t nopts, int *rope, double *base)
{
    const cli_option *on = cli_find(opts, nopts, "--rope");
    const cli_option *b = cli_find(opts, nopts, "--rope-base");
    *rope = on->value != NULL;
    *base = 0;
    if (b->value && !on->value)
        return cli_error("--rope-base '%s' needs --rope", b->value);
    return cli_parse_number_above(b, 1, base);
}
//<

//> 19
int cli_window_options(cli_option *opts, size_t nopts, int causal,
                       size_t *window, size_t *keep, int *alibi)
{
    const cli_option *w = cli_find(opts, nopts, "--window");
    const cli_option *k = cli_find(opts, nopts, "--keep-first");
    *window = *keep = 0;
    *alibi = value_of(opts, nopts, "--alibi") != NULL;
    if (cli_parse_count(w, CLI_COUNT_MAX, window))
        return CLI_USAGE;
    if (k->value && !w->value)
        return cli_error("--keep-first '%s' needs --window (without one "
                         "every earlier key is seen)",
                         k->value);
    if (cli_parse_count(k, CLI_COUNT_MAX, keep))
        return CLI_USAGE;
    if (*alibi && !causal && !w->value)
        return cli_error("--alibi needs --causal or --window (its bias "
                         "-m_h (i' - j) counts the distance to earlier keys)");
    return CLI_OK;
}
//<

//> 19
int cli_read_sinks(const char *path, size_t heads, tensor **sinks)
{
    *sinks = NULL;
    if (npy_read(path, sinks))
        return cli_error("--sinks: %s", mha_last_error());
    char ss[TRACE_SHAPE_MAX];
    if ((*sinks)->ndim != 1 || (*sinks)->shape[0] != heads) {
        int status = cli_error("--sinks %s has shape %s but --heads %zu "
                               "needs (%zu,): one sink logit per head",
                               path, tensor_shape_str(*sinks, ss, sizeof ss),
                               heads, heads);
        tensor_free(*sinks);
        *sinks = NULL;
        return status;
    }
    return CLI_OK;
}
//<

//> 17
int cli_kv_heads_option(const cli_option *kv, size_t heads, size_t *kv_heads)
{
    *kv_heads = heads;
    if (cli_parse_count(kv, CLI_COUNT_MAX, kv_heads))
        return CLI_USAGE;
    if (heads % *kv_heads != 0)
        return cli_error("--kv-heads %zu does not divide --heads %zu (each "
                         "key-value head serves --heads / --kv-heads query "
                         "heads)",
                         *kv_heads, heads);
    return CLI_OK;
}
//<

int cli_inputs_check_options(cli_option *opts, size_t nopts)
{
    static const char *const required[] = {"--heads", "--queries", "--wq",
                                           "--wk", "--wv", "--wo"};
    size_t given = 6; // required[given .. 5] come from another option
    int sd = 0;
//> 18
    // packed projections or a state dict give W_q, W_k, W_v (and W_o)
    sd = value_of(opts, nopts, "--state-dict") != NULL;
    if (sd || value_of(opts, nopts, "--in-proj-weight"))
        given = 2;
//<
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
        if ((i < given || (i == 5 && !sd)) &&
            !value_of(opts, nopts, required[i]))
            return cli_error("%s is required (see %s --help)", required[i],
                             cli_command());
    size_t heads = 0;
    if (cli_parse_count(cli_find(opts, nopts, "--heads"), CLI_COUNT_MAX, &heads))
        return CLI_USAGE;
//> 17
    size_t kv_heads = 0;
    if (cli_kv_heads_option(cli_find(opts, nopts, "--kv-heads"), heads,
                            &kv_heads))
        return CLI_USAGE;
//<
    if (value_of(opts, nopts, "--valid-lens") &&
        value_of(opts, nopts, "--valid-lens-file"))
        return cli_error("--valid-lens '%s' and --valid-lens-file '%s': give "
                         "one or the other",
                         value_of(opts, nopts, "--valid-lens"),
                         value_of(opts, nopts, "--valid-lens-file"));
//> 15
    int rope;
    double base;
    if (cli_rope_options(opts, nopts, &rope, &base))
        return CLI_USAGE;
//<
//> 19
    size_t window, keep;
    int alibi;
    if (cli_window_options(opts, nopts, value_of(opts, nopts, "--causal") != NULL,
                           &window, &keep, &alibi))
        return CLI_USAGE;
    if ((window || alibi || value_of(opts, nopts, "--sinks")) &&
        cli_torch_wanted(opts, nopts))
        return cli_error(CLI_WINDOW_NOT_TORCH);
//<
    double lens[CLI_LIST_MAX];
    size_t n;
    return parse_lens(opts, nopts, lens, &n);
}

/* "the keys (2, 6, 7)", or "the keys (= queries) (2, 4, 5)" when the keys
 * are the queries because --keys was not given. */
static const char *describe(char *buf, size_t n, const char *what,
                            const tensor *t, int defaulted)
{
    char s[TRACE_SHAPE_MAX];
    snprintf(buf, n, "the %s%s %s", what, defaulted ? " (= queries)" : "",
             tensor_shape_str(t, s, sizeof s));
    return buf;
}

/* valid_lens by the rules of softmax.h, in the program's words: from
 * --valid-lens (parsed as whole numbers >= 0 already) or from
 * --valid-lens-file. */
static int check_valid_lens(cli_option *opts, size_t nopts, cli_inputs *in,
                            int keys_defaulted)
{
    const tensor *q = in->queries;
    size_t B = q->shape[0], Lq = q->shape[1], Lk = in->keys->shape[1];
    char qs[TRACE_SHAPE_MAX], kd[2 * TRACE_SHAPE_MAX];
    tensor_shape_str(q, qs, sizeof qs);
    describe(kd, sizeof kd, "keys", in->keys, keys_defaulted);

    const cli_option *list = cli_find(opts, nopts, "--valid-lens");
    double lens[CLI_LIST_MAX];
    size_t n;
    if (parse_lens(opts, nopts, lens, &n))
        return CLI_USAGE;
    if (list->value) {
        if (n != B)
            return cli_error("--valid-lens '%s' has %zu entr%s but the queries "
                             "%s have batch size %zu",
                             list->value, n, n == 1 ? "y" : "ies", qs, B);
        if (tensor_from_array(1, &B, lens, &in->valid_lens))
            return cli_error("--valid-lens: %s", mha_last_error());
    }
    const tensor *vl = in->valid_lens;
    size_t b, i;
    softmax_lens_fault fault = softmax_find_bad_len(vl, B, Lq, Lk, 0, &b, &i);
    if (!fault)
        return CLI_OK;
    char v[TRACE_NUMBER_MAX];
    trace_number_str(v, sizeof v, *TENSOR_AT(vl, b, i));
    if (list->value) // only a number above Lk is left to refuse
        return cli_error("--valid-lens '%s': entry %zu (%s) is larger than "
                         "the number of keys, %zu (%s)",
                         list->value, b + 1, v, Lk, kd);
    const char *path = value_of(opts, nopts, "--valid-lens-file");
    char vs[TRACE_SHAPE_MAX], at[48], tail[3 * TRACE_SHAPE_MAX] = "";
    tensor_shape_str(vl, vs, sizeof vs);
    if (fault == SOFTMAX_LENS_SHAPE)
        return cli_error("--valid-lens-file %s has shape %s but the queries %s "
                         "need (%zu,) or (%zu, %zu)",
                         path, vs, qs, B, B, Lq);
    if (fault == SOFTMAX_LEN_TOO_LARGE)
        snprintf(tail, sizeof tail, " %zu (%s)", Lk, kd);
    return cli_error("--valid-lens-file %s: valid_lens[%s] = %s %s%s", path,
                     softmax_len_index(vl, b, i, at, sizeof at), v,
                     fault == SOFTMAX_LEN_NOT_WHOLE ? "is not a whole number"
                     : fault == SOFTMAX_LEN_NEGATIVE
                         ? "is negative"
                         : "is larger than the number of keys,",
                     tail);
}

/* t must have ndim dimensions; layout names them, e.g. "(D, Dq)". */
static int need_ndim(const char *opt, const char *path, const tensor *t,
                     size_t ndim, const char *layout)
{
    if (t->ndim == ndim)
        return CLI_OK;
    char s[TRACE_SHAPE_MAX];
    return cli_error("%s %s has shape %s, expected %zu dimension%s %s", opt,
                     path, tensor_shape_str(t, s, sizeof s), ndim,
                     ndim == 1 ? "" : "s", layout);
}

static int check_shapes(const char *const *path, tensor *const *f,
                        size_t heads, size_t kv_heads, int k_def, int v_def)
{
    const tensor *q = f[Q], *k = k_def ? f[Q] : f[K], *v = v_def ? f[Q] : f[V];
    char qs[TRACE_SHAPE_MAX], ks[TRACE_SHAPE_MAX], vs[TRACE_SHAPE_MAX];
    char kd[2 * TRACE_SHAPE_MAX], vd[2 * TRACE_SHAPE_MAX];
    char s[TRACE_SHAPE_MAX], wq[TRACE_SHAPE_MAX], wo[TRACE_SHAPE_MAX];
    tensor_shape_str(q, qs, sizeof qs);
    tensor_shape_str(k, ks, sizeof ks);
    tensor_shape_str(v, vs, sizeof vs);
    describe(kd, sizeof kd, "keys", k, k_def);
    describe(vd, sizeof vd, "values", v, v_def);

    // the inputs by the rules of every attention (qkv.h): 3-D, one batch
    // size, keys and values of one length.  The input at fault, `at`, is
    // Q, K or V: qkv.h counts them in that order too.
    static const char *const layout[3] = {"(B, Lq, Dq)", "(B, Lk, Dk)",
                                          "(B, Lk, Dv)"};
    const tensor *in[3] = {q, k, v};
    int at;
    switch (qkv_find_fault(q, k, v, 0, &at)) {
    case QKV_NOT_3D:
        return need_ndim(option_of(at), path[at], in[at], 3, layout[at]);
    case QKV_BATCH:
        return cli_error("%s %s has shape %s but the queries %s have batch "
                         "size %zu",
                         option_of(at), path[at],
                         tensor_shape_str(in[at], s, sizeof s), qs,
                         q->shape[0]);
    case QKV_LENGTH:
        if (v_def)
            return cli_error("--keys %s has shape %s but %s have %zu positions "
                             "(give --values too)",
                             path[K], ks, vd, v->shape[1]);
        return cli_error("--values %s has shape %s but %s have %zu positions",
                         path[V], vs, kd, k->shape[1]);
    default:
        break;
    }

    // the weights: 2-D, one column per input feature
    if (need_ndim("--wq", path[WQ], f[WQ], 2, "(D, Dq)") ||
        need_ndim("--wk", path[WK], f[WK], 2, "(D, Dk)") ||
        need_ndim("--wv", path[WV], f[WV], 2, "(D, Dv)") ||
        need_ndim("--wo", path[WO], f[WO], 2, "(D_out, D)"))
        return CLI_USAGE;
    const tensor *in_of[3] = {q, k, v};
    const char *in_desc[3] = {"the queries", kd, vd};
    for (int w = WQ; w <= WV; w++) {
        const tensor *x = in_of[w - WQ];
        char xs[2 * TRACE_SHAPE_MAX];
        if (w == WQ)
            snprintf(xs, sizeof xs, "%s %s", in_desc[0], qs);
        else
            snprintf(xs, sizeof xs, "%s", in_desc[w - WQ]);
        if (f[w]->shape[1] != x->shape[2])
            return cli_error("%s %s has shape %s but %s have %zu features",
                             option_of(w), path[w],
                             tensor_shape_str(f[w], s, sizeof s), xs,
                             x->shape[2]);
    }

    // D from W_q: the rows of W_k and W_v, the columns of W_o, the biases
    size_t D = f[WQ]->shape[0], D_out = f[WO]->shape[0];
    tensor_shape_str(f[WQ], wq, sizeof wq);
    tensor_shape_str(f[WO], wo, sizeof wo);
    // with G < h key-value heads, W_k and W_v have G*D/h rows
    size_t D_kv = kv_heads < heads && D % heads == 0 ? kv_heads * (D / heads) : D;
    for (int w = WK; w <= WV; w++) {
        if (D_kv == D || f[w]->shape[0] == D_kv)
            continue;
        return cli_error("%s %s has shape %s but with --heads %zu and "
                         "--kv-heads %zu it must be (%zu, %zu): G*D/h rows, "
                         "D = %zu (--wq %s has shape %s)",
                         option_of(w), path[w],
                         tensor_shape_str(f[w], s, sizeof s), heads, kv_heads,
                         D_kv, f[w]->shape[1], D, path[WQ], wq);
    }
    for (int w = WK; w <= WO; w++) {
        size_t got = w == WO ? f[w]->shape[1] : f[w]->shape[0];
        if (w != WO && D_kv != D)
            continue; // checked above
        // fewer rows that make whole heads: grouped-query weights
        size_t p = D % heads == 0 ? D / heads : 0;
        if (w != WO && got < D && p && got % p == 0 && heads % (got / p) == 0)
            return cli_error("%s %s has shape %s but D = %zu (--wq %s has "
                             "shape %s); for grouped-query attention with "
                             "G*D/h = %zu rows, give --kv-heads %zu",
                             option_of(w), path[w],
                             tensor_shape_str(f[w], s, sizeof s), D, path[WQ],
                             wq, got, got / p);
        if (got != D)
            return cli_error("%s %s has shape %s but D = %zu (--wq %s has "
                             "shape %s)",
                             option_of(w), path[w],
                             tensor_shape_str(f[w], s, sizeof s), D, path[WQ],
                             wq);
    }
    if (D % heads != 0)
        return cli_error("--heads %zu does not divide D = %zu (--wq %s has "
                         "shape %s)",
                         heads, D, path[WQ], wq);
    for (int b = BQ; b <= BO; b++) {
        if (!f[b])
            continue;
        const char *layout = b == BO ? "(D_out,)" : "(D,)";
        if (need_ndim(option_of(b), path[b], f[b], 1, layout))
            return CLI_USAGE;
        tensor_shape_str(f[b], s, sizeof s);
        if ((b == BK || b == BV) && D_kv != D) {
            if (f[b]->shape[0] != D_kv)
                return cli_error("%s %s has shape %s but with --heads %zu and "
                                 "--kv-heads %zu it must be (%zu,): G*D/h, "
                                 "D = %zu (--wq %s has shape %s)",
                                 option_of(b), path[b], s, heads, kv_heads,
                                 D_kv, D, path[WQ], wq);
            continue;
        }
        if (b != BO && f[b]->shape[0] != D)
            return cli_error("%s %s has shape %s but D = %zu (--wq %s has "
                             "shape %s)",
                             option_of(b), path[b], s, D, path[WQ], wq);
        if (b == BO && f[b]->shape[0] != D_out)
            return cli_error("--bo %s has shape %s but D_out = %zu (--wo %s "
                             "has shape %s)",
                             path[b], s, D_out, path[WO], wo);
    }
    return CLI_OK;
}

/* Hand the checked weights to a module configured from their shapes
 * and the options' choices in opt (kv_heads, causal, rope, rope_base; the
 * module refuses an odd head size with --rope, naming it). */
static int build_module(tensor *const *f, size_t heads,
                        const multihead_config *opt, cli_inputs *in)
{
    multihead_config cfg = {
        .query_size = f[WQ]->shape[1], .key_size = f[WK]->shape[1],
        .value_size = f[WV]->shape[1], .num_hiddens = f[WQ]->shape[0],
        .num_heads = heads, .out_size = f[WO]->shape[0],
        .bias = f[BQ] || f[BK] || f[BV] || f[BO]};
/*< 15
    (void)opt; // the options of chapters 15 and on
*/
//> 15
    cfg.rope = opt->rope;
    cfg.rope_base = opt->rope_base;
//<
//> 16
    cfg.causal = opt->causal;
//<
//> 17
    cfg.kv_heads = opt->kv_heads;
//<
//> 19
    cfg.window = opt->window;
    cfg.keep_first = opt->keep_first;
    cfg.alibi = opt->alibi;
    cfg.sinks = opt->sinks;
//<
    int status = multihead_init(&in->m, &cfg);
    if (status)
        return cli_error("%s", mha_last_error());
    in->has_m = 1;
    linear *layer[4] = {&in->m.W_q, &in->m.W_k, &in->m.W_v, &in->m.W_o};
    // the module reads the files' numbers, with no copy of them
    for (int i = 0; i < 4 && !status; i++) {
        status = tensor_share_numbers(layer[i]->weight, f[WQ + i]);
        if (!status && f[BQ + i])
            status = tensor_share_numbers(layer[i]->bias, f[BQ + i]);
    }
    return status ? cli_error("%s", mha_last_error()) : CLI_OK;
}

int cli_inputs_check_memory(cli_option *opts, size_t nopts, int keep_weights,
                            const char *hint)
{
    npy_header h[NFILES];
    double bytes = 0; // the inputs as read, then the module's weights
    for (int i = 0; i < NFILES; i++) {
        memset(&h[i], 0, sizeof h[i]);
        const char *path = value_of(opts, nopts, option_of(i));
        if (!path)
            continue;
        int status = npy_read_header(path, &h[i]);
        if (status == GSL_ENOMEM)
            return cli_error("%s: %s", option_of(i), mha_last_error());
        if (status) {
            mha_clear_error();
            return CLI_OK; // cli_inputs_load says why
        }
        bytes += (double)h[i].numel * sizeof(double) * (i >= WQ ? 2 : 1);
    }
    const npy_header *q = &h[Q], *k = h[K].ndim ? &h[K] : q;
//> 18
    // packed projections: W_q is the first third of --in-proj-weight
    const char *packed = value_of(opts, nopts, "--in-proj-weight");
    npy_header ipw = {0};
    if (packed && npy_read_header(packed, &ipw) == GSL_SUCCESS &&
        ipw.ndim == 2 && ipw.shape[0] % 3 == 0) {
        h[WQ] = ipw;
        h[WQ].shape[0] /= 3;
        bytes += (double)ipw.numel * sizeof(double) * 2;
    }
//<
    mha_clear_error();
    if (q->ndim != 3 || k->ndim != 3 || h[WQ].ndim != 2 || h[WO].ndim != 2)
        return CLI_OK;
    size_t heads = 1, kv_heads;
    cli_parse_count(cli_find(opts, nopts, "--heads"), CLI_COUNT_MAX, &heads);
    kv_heads = heads;
//> 17
    cli_kv_heads_option(cli_find(opts, nopts, "--kv-heads"), heads,
                        &kv_heads); // checked by cli_inputs_check_options
//<
    double B = (double)q->shape[0], Lq = (double)q->shape[1];
    double Lk = (double)k->shape[1], D = (double)h[WQ].shape[0];
    double Dout = (double)h[WO].shape[0];
    // G key-value heads of D/h features: G*D/h (D when G = h)
    double D_kv = D * (double)kv_heads / (double)heads;
    // Q and the joined heads (B, Lq, D), K and V (B, Lk, G*D/h), out
    // (B, Lq, D_out)
    bytes += (2 * B * Lq * D + 2 * B * Lk * D_kv + B * Lq * Dout) *
             sizeof(double);
    if (keep_weights) // (B, h, Lq, Lk)
        bytes += B * (double)heads * Lq * Lk * sizeof(double);
//> 18
    if (cli_torch_wanted(opts, nopts)) // the merged mask, scores and A,
        bytes += 3 * B * (double)heads * Lq * (Lk + 2) * sizeof(double);
//<
    double limit = 0;
    char from[128], need[32];
    if (cli_memory_limit(&limit, from, sizeof from))
        return CLI_USAGE;
    if (limit > 0 && bytes > limit)
        return cli_error("the run needs about %s of memory (%.0f bytes) but "
                         "%s; %s",
                         mha_bytes_text(bytes, need, sizeof need), bytes, from,
                         hint);
    return CLI_OK;
}

int cli_inputs_load(cli_option *opts, size_t nopts, cli_inputs *in)
{
    memset(in, 0, sizeof *in);
    const char *path[NFILES];
    tensor *f[NFILES] = {NULL};
    for (int i = 0; i < NFILES; i++)
        path[i] = value_of(opts, nopts, option_of(i));
    size_t heads = 0, kv_heads = 0;
    cli_parse_count(cli_find(opts, nopts, "--heads"), CLI_COUNT_MAX, &heads);
    kv_heads = heads;
    // what the options choose of the module; build_module adds the sizes
    multihead_config opt = {0};
//> 16
    opt.causal = value_of(opts, nopts, "--causal") != NULL;
//<
//> 17
    cli_kv_heads_option(cli_find(opts, nopts, "--kv-heads"), heads,
                        &kv_heads); // checked by cli_inputs_check_options
    opt.kv_heads = kv_heads;
//<

    int status = CLI_OK;
    for (int i = 0; i < NFILES && !status; i++)
        if (path[i] && npy_read_mapped(path[i], &f[i]))
            status = cli_error("%s: %s", option_of(i), mha_last_error());
    int k_def = !path[K], v_def = !path[V];
    memset(given_by, 0, sizeof given_by);
//> 18
    // the weights PyTorch's options give, split into W_q, W_k, W_v ...
    char torch_path[8][256];
    const char *torch_option[8] = {NULL};
    tensor *q3 = f[Q], *k3 = k_def ? f[Q] : f[K], *v3 = v_def ? f[Q] : f[V];
    if (!status && q3->ndim == 3 && k3->ndim == 3 && v3->ndim == 3)
        status = cli_torch_weights(opts, nopts, q3->shape[2], k3->shape[2],
                                   v3->shape[2], &f[WQ], torch_option,
                                   torch_path);
    for (int i = 0; i < 8; i++)
        if (torch_option[i]) {
            given_by[WQ + i] = torch_option[i];
            path[WQ + i] = torch_path[i];
        }
//<
    if (!status)
        status = check_shapes(path, f, heads, kv_heads, k_def, v_def);
    if (!status) {
        // the module takes copies; the inputs stay for the forward pass
        in->queries = f[Q];
        in->keys = k_def ? f[Q] : f[K];
        in->values = v_def ? f[Q] : f[V];
        in->valid_lens = f[VL];
        f[Q] = f[K] = f[V] = f[VL] = NULL;
        status = check_valid_lens(opts, nopts, in, k_def);
    }
//> 15
    if (!status)
        status = cli_rope_options(opts, nopts, &opt.rope, &opt.rope_base);
//<
//> 19
    tensor *sinks = NULL; // (h,)
    const char *sinks_path = value_of(opts, nopts, "--sinks");
    if (!status)
        status = cli_window_options(opts, nopts, opt.causal, &opt.window,
                                    &opt.keep_first, &opt.alibi);
    if (!status && sinks_path) {
        opt.sinks = 1;
        status = cli_read_sinks(sinks_path, heads, &sinks);
    }
//<
    if (!status)
        status = build_module(f, heads, &opt, in);
//> 19
    if (!status && sinks && tensor_copy_into(in->m.sinks, sinks))
        status = cli_error("--sinks: %s", mha_last_error());
    tensor_free(sinks);
//<
//> 18
    if (!status && cli_torch_wanted(opts, nopts)) {
        in->has_torch = 1;
        size_t p = in->m.cfg.num_hiddens / heads;
        status = cli_torch_load(opts, nopts, in->queries->shape[0], heads,
                                in->queries->shape[1], in->keys->shape[1],
                                in->m.cfg.kv_heads * p, &in->torch);
    }
//<
    for (int i = 0; i < NFILES; i++)
        tensor_free(f[i]);
    memset(given_by, 0, sizeof given_by);
    return status;
}

void cli_inputs_free(cli_inputs *in)
{
    if (in->keys != in->queries)
        tensor_free(in->keys);
    if (in->values != in->queries)
        tensor_free(in->values);
    tensor_free(in->queries);
    tensor_free(in->valid_lens);
    if (in->has_m)
        multihead_free(&in->m);
//> 18
    if (in->has_torch)
        cli_torch_free(&in->torch);
//<
    memset(in, 0, sizeof *in);
}
//<
//<
