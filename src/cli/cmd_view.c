//> handout
//> 08
/* cmd_view.c: mha view, one HTML page to explore a forward pass in a browser
 * (explorer.h).
 *
 * Two ways to give the case:
 *   sizes   --queries Lq as a number, with --batch, --kv, --hiddens, as
 *           mha trace takes them: Xavier weights and inputs drawn from
 *           --seed (normal, sd 1), or d2l's inputs of ones (--d2l)
 *   files   --queries Q.npy and the other inputs of mha forward
 * Either way the module runs once (the lesson's multihead_forward, with
 * its trace recorded) and the page gets the weights (B, h, Lq, Lk), the
 * masks and the trace.  Nothing is printed; the page is written whole or
 * not at all.
 */
#define _POSIX_C_SOURCE 200809L
#include "commands.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "inputs.h"
#include "libmha.h"
#include "output.h"
#include "paths.h"

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

/* The page holds every weight as text: at most this many of them
 * (a page of about 40 MB). */
#define VIEW_WEIGHTS_MAX ((size_t)1 << 22)

/* The sizes form draws W_q, W_k, W_v and W_o, (D, D) each: 128 MiB at
 * this D. */
#define VIEW_HIDDENS_MAX 2048

static const char usage_view[] =
    "usage: mha view --html F [--batch B] [--queries Lq] [--kv Lk] [--hiddens D]\n"
    "                [--heads h] [--valid-lens 3,2]\n"
//> 15
    "                [--rope [--rope-base B]]\n"
//<
//> 16
    "                [--causal]\n"
//<
//> 17
    "                [--kv-heads G]\n"
//<
//> 19
    "                [--window W [--keep-first K]] [--alibi] [--sinks S.npy]\n"
//<
    "                [--seed S | --d2l] [--labels a,b,c] [--query-labels x,y]\n"
    "                [--title T]\n"
    "       mha view --html F --heads h --queries Q.npy ... (the inputs of mha forward)\n"
    "                and the options above but --batch, --kv, --hiddens, --seed\n"
    "                and --d2l\n"
    "\n"
    "Run the module once and write one HTML page to explore it in a browser:\n"
    "nothing in it is loaded from elsewhere, so it opens from the file with no\n"
    "network.  It shows\n"
    "  - the head view: queries and keys as two columns, a line from each\n"
    "    query to each key it sees, as wide and dark as its weight, one\n"
    "    colour per head, heads switched on and off; hover a query for its\n"
    "    row of weights.  Past 64 positions, 64 at a time, picked on a\n"
    "    thumbnail of the whole matrix;\n"
    "  - the grid: every head's weights as a heatmap, one colour scale,\n"
    "    masked keys striped grey, key-value groups boxed; click to enlarge;\n"
    "  - the dataflow: the module's steps from its trace, each with its\n"
    "    shapes and whether it was a view, a copy or new numbers;\n"
    "  - where each number goes: each step of the split into heads and of\n"
    "    the join, every number drawn where it lands and, beneath, where it\n"
    "    lies in memory: a view leaves memory as it was, a copy reorders it.\n"
    "    Hover a number to follow it; past 512 numbers a step, a sample;\n"
//> 16
    "  - with --causal, a slider over the decoding steps: the cache growing\n"
    "    and each new query's row of weights.\n"
//<
    "Each view saves itself as SVG or PNG.\n"
    "\n"
    "  --html F         the page to write (required)\n"
    "  --queries Lq     a number: the sizes of mha trace (--batch 2, --queries 4,\n"
    "                   --kv 6, --hiddens 100, --heads 5 by default), Xavier\n"
    "                   weights and normal inputs drawn from --seed S (a whole\n"
    "                   number from 0 to 999999999999999999, as mha quiz's;\n"
    "                   default 0) or, with --d2l, inputs of ones as in d2l's\n"
    "                   example; a file name (anything but digits): the .npy\n"
    "                   inputs of mha forward (see mha forward --help)\n"
    "  --valid-lens L   one valid length per example, e.g. 3,2 (or, with\n"
    "                   files, --valid-lens-file VL.npy)\n"
//> 15
    "  --rope, --rope-base B  rotary embeddings on Q and K, as mha forward\n"
    "                   takes them\n"
//<
//> 16
    "  --causal         query i sees key j only when j <= i + Lk - Lq\n"
//<
//> 17
    "  --kv-heads G     G key-value heads, each shared by h/G query heads\n"
//<
//> 19
    "  --window W, --keep-first K, --alibi  as mha forward takes them\n"
    "                   (chapter 19): query i sees the keys j with\n"
    "                   i + Lk - Lq - W < j <= i + Lk - Lq, and the first K;\n"
    "                   the page stripes the others\n"
    "  --sinks S.npy    a sink logit per head, (h,): each row's weights sum\n"
    "                   to less than 1, the rest goes to the head's sink\n"
//<
    "  --labels a,b,c   the keys' labels, one per key (tokens, say; no commas\n"
    "                   in a label); the queries get them too when Lq = Lk.\n"
    "                   Default: positions\n"
    "  --query-labels x,y  the queries' labels, one per query\n"
    "  --title T        the page's heading\n"
    "\n"
    "The module's options take effect in both forms, the sizes' and the\n"
    "files'.\n"
//> 18
    "PyTorch's options (--attn-mask and the others of mha forward) are\n"
    "refused, each by name: mha forward takes them.\n"
//<
    "\n"
    "The page holds every weight: B*h*Lq*Lk may be at most 4194304; with\n"
    "sizes, D at most 2048.  Bad input: one line on stderr, exit status 2,\n"
    "and F as it was; the page is written whole or not at all.  Stopped\n"
    "by a signal, mha removes its temporary file and ends by that signal\n"
    "(exit status 128 + its number: 130 for SIGINT), F as it was; one that\n"
    "comes as the page is renamed into place waits until it is, and F is\n"
    "then the new page.\n";

/* The options of mha forward that name files: in the sizes form none of
 * them may be given. */
static const char *const file_options[] = {
    "--keys", "--values", "--wq", "--wk", "--wv", "--wo", "--bq", "--bk",
    "--bv", "--bo", "--valid-lens-file",
//> 18
    CLI_TORCH_FILES,
//<
};

/* "a,b,c" into n labels (pointers into a copy, *buf, to free), one for
 * each of the want things (one: what one of them is called, many: what
 * several are). */
static int parse_labels(const cli_option *opt, size_t want, const char *one,
                        const char *many, char **buf, const char ***labels)
{
    *buf = NULL;
    *labels = NULL;
    if (!opt->value)
        return CLI_OK;
    size_t n = 1;
    for (const char *s = opt->value; *s; s++)
        n += *s == ',';
    if (n != want)
        return cli_error("%s '%s' has %zu label%s but there %s %zu %s",
                         opt->name, opt->value, n, n == 1 ? "" : "s",
                         want == 1 ? "is" : "are", want,
                         want == 1 ? one : many);
    *buf = strdup(opt->value);
    *labels = mha_malloc(n, sizeof **labels, "mha view");
    if (!*buf || !*labels) {
        free(*buf);
        free(*labels);
        return cli_error("out of memory reading %s", opt->name);
    }
    char *s = *buf;
    for (size_t i = 0; i < n; i++) {
        (*labels)[i] = s;
        char *comma = strchr(s, ',');
        if (comma) {
            *comma = '\0';
            s = comma + 1;
        }
    }
    return CLI_OK;
}

static int all_digits(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

/* The module and its inputs from sizes: Xavier weights and normal inputs
 * from the seed, or d2l's ones. */
typedef struct view_case {
    multihead m;
    int has_m;
    tensor *x, *y, *lens; /* (B, Lq, D), (B, Lk, D), (B,) or NULL */
} view_case;

static void view_case_free(view_case *c)
{
    if (c->has_m)
        multihead_free(&c->m);
    tensor_free(c->x);
    tensor_free(c->y);
    tensor_free(c->lens);
}

static int sizes_case(cli_option *opts, size_t nopts, view_case *c)
{
    size_t B = 2, Lq = 4, Lk = 6, D = 100, h = 5;
    unsigned long long seed = 0;
    if (cli_parse_count(cli_find(opts, nopts, "--batch"), CLI_COUNT_MAX, &B) ||
        cli_parse_count(cli_find(opts, nopts, "--queries"), CLI_COUNT_MAX, &Lq) ||
        cli_parse_count(cli_find(opts, nopts, "--kv"), CLI_COUNT_MAX, &Lk) ||
        cli_parse_count(cli_find(opts, nopts, "--hiddens"), CLI_COUNT_MAX, &D) ||
        cli_parse_count(cli_find(opts, nopts, "--heads"), CLI_COUNT_MAX, &h))
        return CLI_USAGE;
    const cli_option *so = cli_find(opts, nopts, "--seed");
    int d2l = cli_find(opts, nopts, "--d2l")->value != NULL;
    if (so->value && d2l)
        return cli_error("--seed and --d2l exclude each other: --d2l's inputs "
                         "are ones (the weights are drawn from seed 0)");
    if (cli_parse_seed(so, &seed))
        return CLI_USAGE;
    if (D % h != 0)
        return cli_error("--heads %zu does not divide --hiddens %zu", h, D);
    if (D > VIEW_HIDDENS_MAX)
        return cli_error("--hiddens %zu is more than %d, the most this draws "
                         "weights for (four (D, D) matrices); mha trace "
                         "takes any size",
                         D, VIEW_HIDDENS_MAX);
    if (B > VIEW_WEIGHTS_MAX / h / Lq / Lk || B * h * Lq * Lk > VIEW_WEIGHTS_MAX)
        return cli_error("the page would hold %zu x %zu x %zu x %zu weights, "
                         "more than %zu; choose smaller sizes",
                         B, h, Lq, Lk, VIEW_WEIGHTS_MAX);
    if (B > VIEW_WEIGHTS_MAX / Lq / D || B > VIEW_WEIGHTS_MAX / Lk / D)
        return cli_error("the inputs (%zu, %zu, %zu) and (%zu, %zu, %zu) hold "
                         "more than %zu numbers; choose smaller sizes",
                         B, Lq, D, B, Lk, D, VIEW_WEIGHTS_MAX);
    const cli_option *vl = cli_find(opts, nopts, "--valid-lens");
    double lens[CLI_LIST_MAX];
    if (cli_sized_valid_lens(vl, B, Lk, lens))
        return CLI_USAGE;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h};
//> 15
    if (cli_rope_options(opts, nopts, &cfg.rope, &cfg.rope_base))
        return CLI_USAGE;
//<
//> 16
    cfg.causal = cli_find(opts, nopts, "--causal")->value != NULL;
//<
//> 17
    if (cli_kv_heads_option(cli_find(opts, nopts, "--kv-heads"), h,
                            &cfg.kv_heads))
        return CLI_USAGE;
//<
//> 19
    // as mha forward takes them: a window, the first keys, ALiBi, sinks
    if (cli_window_options(opts, nopts, cfg.causal, &cfg.window,
                           &cfg.keep_first, &cfg.alibi))
        return CLI_USAGE;
    const char *sinks_path = cli_find(opts, nopts, "--sinks")->value;
    tensor *sinks = NULL; // (h,)
    if (sinks_path && cli_read_sinks(sinks_path, h, &sinks))
        return CLI_USAGE;
    cfg.sinks = sinks != NULL;
//<
    if (multihead_init(&c->m, &cfg)) {
//> 19
        tensor_free(sinks);
//<
        return cli_error("%s", mha_last_error());
    }
    c->has_m = 1;
//> 19
    int copied = !sinks || !tensor_copy_into(c->m.sinks, sinks);
    tensor_free(sinks);
    if (!copied)
        return cli_error("--sinks: %s", mha_last_error());
//<
    gsl_rng *rng = mha_rng_new(seed);
    if (!rng)
        return cli_error("%s", mha_last_error());
    multihead_reset_xavier(&c->m, rng);
    int status = CLI_OK;
    if (tensor_alloc(SHAPE(B, Lq, D), &c->x) ||
        tensor_alloc(SHAPE(B, Lk, D), &c->y) ||
        (vl->value && tensor_from_array(SHAPE(B), lens, &c->lens)))
        status = cli_error("%s", mha_last_error());
    if (!status && d2l) {
        tensor_fill(c->x, 1);
        tensor_fill(c->y, 1);
    } else if (!status) {
        tensor_fill_normal(c->x, rng, 0, 1);
        tensor_fill_normal(c->y, rng, 0, 1);
    }
    gsl_rng_free(rng);
    return status;
}

int cmd_view(int argc, char **argv)
{
    cli_option opts[] = {CLI_INPUT_OPTIONS,
                         {"--batch", 1, NULL},   {"--kv", 1, NULL},
                         {"--hiddens", 1, NULL}, {"--seed", 1, NULL},
                         {"--d2l", 0, NULL},     {"--labels", 1, NULL},
                         {"--query-labels", 1, NULL},
                         {"--title", 1, NULL},   {"--html", 1, NULL}};
    size_t nopts = NOPTS(opts);
    int status = cli_parse(argc, argv, opts, nopts);
    if (status == CLI_HELP)
        return cli_print_usage(usage_view);
    if (status)
        return status;
    const char *html = cli_find(opts, nopts, "--html")->value;
    if (!html)
        return cli_error("--html is required: the page to write (see mha view "
                         "--help)");
//> 18
    // PyTorch's options are mha forward's: refused in both forms, by name
    static const cli_option torch[] = {CLI_TORCH_OPTIONS};
    for (size_t i = 0; i < NOPTS(torch); i++)
        if (cli_find(opts, nopts, torch[i].name)->value)
            return cli_error("%s is one of PyTorch's options: mha view takes "
                             "the module's own options, not PyTorch's "
                             "(mha forward takes them)",
                             torch[i].name);
//<
    const char *q = cli_find(opts, nopts, "--queries")->value;
    int sizes = !q || all_digits(q);
    static const char *const size_options[] = {"--batch", "--kv", "--hiddens",
                                               "--seed", "--d2l"};
    if (sizes) {
        for (size_t i = 0; i < NOPTS(file_options); i++)
            if (cli_find(opts, nopts, file_options[i])->value)
                return cli_error("%s names a file, but --queries %s is a "
                                 "number: give --queries Q.npy and the other "
                                 "inputs of mha forward, or sizes alone",
                                 file_options[i], q ? q : "(default 4)");
    } else {
        for (size_t i = 0; i < NOPTS(size_options); i++)
            if (cli_find(opts, nopts, size_options[i])->value)
                return cli_error("%s goes with sizes, but --queries '%s' is a "
                                 "file: the inputs give the sizes",
                                 size_options[i], q);
    }

    cli_inputs in = {0};
    view_case c = {0};
    int has_in = 0;
    const cli_path out = {"--html", html};
    cli_path sinks = {"--sinks", NULL}; // an input in both forms
//> 19
    sinks.path = cli_find(opts, nopts, "--sinks")->value;
//<
    if (sizes) {
        if ((status = cli_check_paths(&out, 1, &sinks, 1)))
            return status;
        status = sizes_case(opts, nopts, &c);
        // OpenBLAS's buffer, or one line saying the memory limit leaves
        // no room for it (threads.h)
        if (!status && threads_blas_reserve())
            status = cli_error("%s", mha_last_error());
    } else {
        cli_path ins[NOPTS(file_options) + 2];
        ins[0] = (cli_path){"--queries", q};
        ins[1] = sinks;
        for (size_t i = 0; i < NOPTS(file_options); i++)
            ins[i + 2] = (cli_path){file_options[i],
                                    cli_find(opts, nopts, file_options[i])->value};
        if ((status = cli_inputs_check_options(opts, nopts)) ||
            (status = cli_check_paths(&out, 1, ins, NOPTS(ins))) ||
            (status = cli_inputs_check_memory(
                 opts, nopts, 1,
                 "the page needs every weight: use shorter sequences")))
            return status;
        if (threads_blas_reserve())
            return cli_error("%s", mha_last_error());
        status = cli_inputs_load(opts, nopts, &in);
        has_in = 1;
        if (!status) {
            size_t B = in.queries->shape[0], Lq = in.queries->shape[1],
                   Lk = in.keys->shape[1], h = in.m.cfg.num_heads;
            if (B > VIEW_WEIGHTS_MAX / h / Lq / Lk ||
                B * h * Lq * Lk > VIEW_WEIGHTS_MAX)
                status = cli_error("the page would hold %zu x %zu x %zu x %zu "
                                   "weights, more than %zu; use shorter "
                                   "sequences",
                                   B, h, Lq, Lk, (size_t)VIEW_WEIGHTS_MAX);
        }
    }
    multihead *m = sizes ? &c.m : &in.m;
    const tensor *x = sizes ? c.x : in.queries, *k = sizes ? c.y : in.keys,
                 *v = sizes ? c.y : in.values,
                 *lens = sizes ? c.lens : in.valid_lens;

    char *kbuf = NULL, *qbuf = NULL;
    const char **klabels = NULL, **qlabels = NULL;
    if (!status) {
        size_t Lq = x->shape[1], Lk = k->shape[1];
        status = parse_labels(cli_find(opts, nopts, "--labels"), Lk, "key",
                              "keys", &kbuf, &klabels);
        if (!status)
            status = parse_labels(cli_find(opts, nopts, "--query-labels"), Lq,
                                  "query", "queries", &qbuf, &qlabels);
        if (!status && !qlabels && Lq == Lk)
            qlabels = klabels;
    }

    trace_log log;
    int logged = 0;
    tensor *o = NULL, *w = NULL; // (B, Lq, D_out), (B, h, Lq, Lk)
    if (!status) {
        trace_log_start(&log);
        logged = 1;
        if (multihead_forward(m, x, k, v, lens, &o, &w))
            status = cli_error("%s", mha_last_error());
        trace_log_stop(&log);
        if (!status && log.failed)
            status = cli_error("out of memory (the trace lost a record)");
    }
    if (!status) {
        char title[256];
        const char *t = cli_find(opts, nopts, "--title")->value;
        if (!t) {
            char ws[TRACE_SHAPE_MAX];
            snprintf(title, sizeof title, "Attention weights %s, %s",
                     tensor_shape_str(w, ws, sizeof ws),
                     !sizes ? q
                     : cli_find(opts, nopts, "--d2l")->value
                         ? "d2l's inputs (ones)"
                         : "random inputs");
            t = title;
        }
        explorer_page page = {.title = t, .weights = w,
                              .valid_lens = lens,
                              .head_size = m->cfg.num_hiddens / m->cfg.num_heads,
                              .query_labels = qlabels, .key_labels = klabels,
                              .trace = &log};
//> 16
        page.causal = m->cfg.causal;
//<
//> 17
        page.kv_heads = m->cfg.kv_heads;
//<
//> 19
        page.window = m->cfg.window;
        page.keep_first = m->cfg.keep_first;
        page.alibi = m->cfg.alibi;
        page.sinks = m->cfg.sinks;
//<
        if (explorer_save(html, &page))
            status = cli_error("--html %s: %s", html, mha_last_error());
    }
    if (logged)
        trace_log_free(&log);
    tensor_free(o);
    tensor_free(w);
    free(kbuf);
    free(qbuf);
    free(klabels);
    if (qlabels != klabels)
        free(qlabels);
    view_case_free(&c);
    if (has_in)
        cli_inputs_free(&in);
    return status;
}
//<
//<
