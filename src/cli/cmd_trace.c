//> handout
//> 08
/* cmd_trace.c: mha trace, the module's whole shape trace on shapes
 * alone (the program: mha.c). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "inputs.h"
#include "libmha.h"
#include "output.h"
#include "paths.h"
#include "quiz.h"

static const char usage_trace[] =
    "usage: mha trace [--batch B] [--queries Lq] [--kv Lk] [--hiddens D]\n"
    "                 [--heads h] [--valid-lens 3,2]\n"
//> 15
    "                 [--rope [--rope-base B]]\n"
//<
//> 16
    "                 [--causal]\n"
//<
//> 17
    "                 [--kv-heads G]\n"
//<
//> 18
    "                 [PyTorch's options]\n"
//<
//> 19
    "                 [--window W [--keep-first K]] [--alibi] [--sinks]\n"
//<
    "                 [--quiz [--no-answers] | --json | --dot]\n"
    "\n"
    "Run the multi-head attention module once and print every shape step:\n"
    "the projections, the split into heads, the attention of all B*h heads\n"
    "at once, the join, the output projection.  It runs on shapes alone, as\n"
    "PyTorch's meta tensors do: no number is stored or computed, so any size\n"
    "is instant.\n"
    "\n"
    "  --batch B        examples in the batch (default 2)\n"
    "  --queries Lq     queries per example (default 4)\n"
    "  --kv Lk          key-value pairs per example (default 6)\n"
    "  --hiddens D      num_hiddens, cut into h heads of D/h (default 100)\n"
    "  --heads h        number of heads; must divide D (default 5)\n"
    "  --valid-lens L   one valid length per example, e.g. 3,2 (default none)\n"
//> 17
    "  --kv-heads G     key-value heads, each shared by h/G query heads\n"
    "                   (grouped-query attention); must divide h (default h)\n"
//<
//> 16
    "  --causal         query i sees key j only when j <= i + Lk - Lq\n"
//<
//> 15
    "  --rope           rotary embeddings: Q and K turned by position right\n"
    "                   after their projections (D/h must be even)\n"
    "  --rope-base B    their base, a finite number > 1 (default 10000)\n"
//<
//> 19
    "  --window W, --keep-first K, --alibi  see mha forward --help, chapter 19\n"
    "  --sinks          a sink logit per head (zeros: shapes only here)\n"
//<
//> 18
    "  --attn-mask 2d|3d, --key-padding-mask, --add-bias-kv, --add-zero-attn,\n"
    "  --average-attn-weights  PyTorch's options (see mha forward --help):\n"
    "                   the mask merge, Lk growing by one for each added key\n"
//<
    "  --quiz           a worksheet: the questions mha quiz asks of a case\n"
    "                   of these sizes, in the same order, with a name line\n"
    "                   and a blank for each answer, then the answers on a\n"
/*< 15
    "                   page of their own\n"
*/
//> 15
    "                   page of their own (not with --rope)\n"
//<
    "  --no-answers     with --quiz: leave the answers out\n"
    "  --json           the trace as JSON lines, one object per step, and\n"
    "                   nothing else\n"
    "  --dot            the module's dataflow graph in Graphviz's language,\n"
    "                   and nothing else: mha trace --dot | dot -Tsvg > g.svg\n"
    "\n"
    "--quiz, --json and --dot exclude each other.  Queries, keys and values\n"
    "have D features each, as in d2l's example.\n";

/* --- mha trace ------------------------------------------------------ */


/* Shapes alone have no size limit, but their byte counts must fit in a
 * size_t: the library counts bytes even for tensors without numbers. */
static int too_large(const char *what, size_t ndim, const size_t *shape)
{
    size_t bytes = sizeof(double);
    for (size_t d = 0; d < ndim; d++) {
        if (shape[d] && bytes > SIZE_MAX / shape[d]) {
            char s[TRACE_SHAPE_MAX];
            return cli_error("%s %s would take more than %zu bytes, the most "
                             "a size_t counts; choose smaller sizes",
                             what, trace_dims_str(s, sizeof s, ndim, shape),
                             (size_t)SIZE_MAX);
        }
        bytes *= shape[d];
    }
    return CLI_OK;
}


/* "queries (1, 2, 16), keys and values (1, 6, 16): 8 heads of 2 features,
 * valid_lens [3, 2]", with "2 key-value heads, causal, " when asked */
static void describe_trace(FILE *f, const cmd_trace_case *ts, const double *lens)
{
    size_t B = ts->B, Lq = ts->Lq, Lk = ts->Lk, D = ts->D, h = ts->h;
    char v[TRACE_NUMBER_MAX]; // every number exactly, as given
//> 15
    if (ts->rope)
        fprintf(f, "rope (base %s) on Q and K; ", trace_number_str(v, sizeof v, ts->rope_base));
//<
    fprintf(f, "queries (%zu, %zu, %zu), keys and values (%zu, %zu, %zu): %zu "
               "head%s of %zu feature%s, ",
            B, Lq, D, B, Lk, D, h, h == 1 ? "" : "s", D / h,
            D / h == 1 ? "" : "s");
    if (ts->G < h)
        fprintf(f, "%zu key-value head%s, ", ts->G, ts->G == 1 ? "" : "s");
/*< 19
    if (ts->causal)
*/
//> 19
    if (ts->causal && !ts->window) // a window says so itself
//<
        fprintf(f, "causal, ");
//> 19
    if (ts->window)
        fprintf(f, "window %zu, ", ts->window);
    if (ts->keep)
        fprintf(f, "the first %zu kept, ", ts->keep);
    if (ts->alibi)
        fprintf(f, "alibi, ");
    if (ts->sinks)
        fprintf(f, "sinks, ");
//<
//> 18
    cli_torch_describe(f, &ts->masks);
//<
    if (!lens) {
        fprintf(f, "no valid_lens\n");
        return;
    }
    fprintf(f, "valid_lens [");
    for (size_t b = 0; b < B; b++)
        fprintf(f, "%s%s", b ? ", " : "", trace_number_str(v, sizeof v, lens[b]));
    fprintf(f, "]\n");
}

/* valid_lens keep their numbers unless the module's repeat per head
 * (B*h of them) would be large; then they too are shapes alone, and the
 * trace reads the same. */
#define TRACE_LENS_MAX (1UL << 20)

/* The module on shapes alone: a shape-only module (cfg.shape_only) and
 * queries and keys with no numbers run every step and emit every record,
 * computing nothing, so the trace of any size is instant. */
int cmd_run_trace(const cmd_trace_case *ts, const double *lens,
                  cmd_trace_show show)
{
    size_t B = ts->B, Lq = ts->Lq, Lk = ts->Lk, D = ts->D, h = ts->h;
    int status = CLI_OK;
    multihead m;
    int has_m = 0;
    tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL; // (B, Lq, D), (B, Lk, D)
    tensor *a = NULL; // the weights with PyTorch's options
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h,
                            .shape_only = 1};
//> 15
    cfg.rope = ts->rope;
    cfg.rope_base = ts->rope_base;
//<
//> 16
    cfg.causal = ts->causal;
//<
//> 17
    cfg.kv_heads = ts->G;
//<
//> 19
    cfg.window = ts->window;
    cfg.keep_first = ts->keep;
    cfg.alibi = ts->alibi;
    cfg.sinks = ts->sinks;
//<
    if (multihead_init(&m, &cfg))
        status = cli_error("%s", mha_last_error());
    else
        has_m = 1;
    if (!status && (tensor_alloc_meta(SHAPE(B, Lq, D), &x) ||
                    tensor_alloc_meta(SHAPE(B, Lk, D), &y) ||
                    (lens && (B * h > TRACE_LENS_MAX
                                  ? tensor_alloc_meta(SHAPE(B), &vl)
                                  : tensor_from_array(SHAPE(B), lens, &vl)))))
        status = cli_error("%s", mha_last_error());

    /* The description and the records are held until the module has run
     * to its end: a run stopped on the way (in a student's handout, by an
     * exercise not written yet) prints its one line and nothing else.  A
     * trace is a few dozen lines whatever the sizes. */
    char *held = NULL;
    size_t held_len = 0;
    FILE *hold = NULL;
    if (!status && !(hold = open_memstream(&held, &held_len)))
        status = cli_error("out of memory holding the trace");
    trace_log log; // the records, for the quiz and the graph
    int logging = show == SHOW_DOT, logged = 0;
    if (!status) {
        if (show == SHOW_TEXT) {
            describe_trace(hold, ts, lens);
            fprintf(hold, "\n");
        }
        if (logging) {
            trace_log_start(&log);
            logged = 1;
        }
        if (show == SHOW_TEXT)
            trace_to(hold);
        if (show == SHOW_JSON)
            trace_to_json(hold);
        int torch = 0; // PyTorch's options: its forward pass
//> 18
        torch = ts->torch;
        if (torch)
            status = cli_torch_forward(&m, x, y, y, vl, &ts->masks, &out, &a);
//<
        if (!torch && multihead_forward(&m, x, y, y, vl, &out, &a))
            status = cli_error("%s", mha_last_error());
        trace_to(NULL);
        trace_to_json(NULL);
        if (logged)
            trace_log_stop(&log);
    }
    if (hold && fclose(hold) && !status)
        status = cli_error("out of memory holding the trace");
    if (!status && fwrite(held, 1, held_len, stdout) != held_len)
        status = cli_error("cannot write to stdout: %s", strerror(errno));
    free(held);
    if (!status && logged && log.failed)
        status = cli_error("out of memory (the trace lost a record)");

    if (!status && show == SHOW_TEXT) {
        char os[TRACE_SHAPE_MAX], ws[TRACE_SHAPE_MAX];
        printf("\noutput %s, attention weights %s\n",
               tensor_shape_str(out, os, sizeof os),
               tensor_shape_str(a, ws, sizeof ws));
    }
    if (!status && show == SHOW_DOT)
        trace_write_dot(stdout, &log, 1);
    if (logged)
        trace_log_free(&log);
    tensor_free(x);
    tensor_free(y);
    tensor_free(vl);
    tensor_free(out);
    tensor_free(a);
    if (has_m)
        multihead_free(&m);
    return status;
}

int cmd_trace(int argc, char **argv)
{
    cli_option opts[] = {{"--batch", 1, NULL},   {"--queries", 1, NULL},
                         {"--kv", 1, NULL},      {"--hiddens", 1, NULL},
                         {"--heads", 1, NULL},   {"--valid-lens", 1, NULL},
                         {"--quiz", 0, NULL},    {"--json", 0, NULL},
                         {"--dot", 0, NULL},     {"--no-answers", 0, NULL},
//> 15
                         CLI_ROPE_OPTIONS,
//<
//> 16
                         {"--causal", 0, NULL},
//<
//> 17
                         {"--kv-heads", 1, NULL},
//<
//> 18
                         CLI_TORCH_TRACE_OPTIONS,
//<
//> 19
                         CLI_WINDOW_OPTIONS,     {"--sinks", 0, NULL},
//<
    };
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP)
        return cli_print_usage(usage_trace);
    if (status)
        return status;
    // --quiz, --json and --dot: one way to show the trace, or none
    const cli_option *way;
    if (cli_at_most_one(&opts[6], 3, &way))
        return CLI_USAGE;
    cmd_trace_show show = !way             ? SHOW_TEXT
                      : way == &opts[6] ? SHOW_QUIZ
                      : way == &opts[7] ? SHOW_JSON
                                        : SHOW_DOT;
    size_t B = 2, Lq = 4, Lk = 6, D = 100, h = 5;
    if (cli_parse_count(&opts[0], CLI_COUNT_MAX, &B) ||
        cli_parse_count(&opts[1], CLI_COUNT_MAX, &Lq) ||
        cli_parse_count(&opts[2], CLI_COUNT_MAX, &Lk) ||
        cli_parse_count(&opts[3], CLI_COUNT_MAX, &D) ||
        cli_parse_count(&opts[4], CLI_COUNT_MAX, &h))
        return CLI_USAGE;
    if (D % h != 0)
        return cli_error("--heads %zu does not divide --hiddens %zu", h, D);
    int rope = 0, causal = 0;
    double rope_base = 0;
    size_t G = h; // key-value heads
//> 15
    if (cli_rope_options(opts, NOPTS(opts), &rope, &rope_base))
        return CLI_USAGE;
//<
//> 16
    int causal_asked = cli_find(opts, NOPTS(opts), "--causal")->value != NULL;
    causal = causal_asked;
//<
//> 17
    if (cli_kv_heads_option(cli_find(opts, NOPTS(opts), "--kv-heads"), h, &G))
        return CLI_USAGE;
//<
//> 19
    // a window is causal too (window.h)
    causal = causal || cli_find(opts, NOPTS(opts), "--window")->value;
//<
    double lens[CLI_LIST_MAX];
    const cli_option *vl = &opts[5];
    if (cli_sized_valid_lens(vl, B, Lk, lens))
        return CLI_USAGE;
    // causal: every query must see a key (multihead.h); said before the
    // description, so a refused trace prints nothing on stdout
    const char *rule = "--causal"; // the option that asked for the rule
//> 19
    if (!causal_asked)
        rule = "--window";
//<
    int empty = causal; // a row of the causal rule may see no key
//> 18
    // unless PyTorch's options append a key every query sees
    empty = empty && !cli_find(opts, NOPTS(opts), "--add-zero-attn")->value &&
            !cli_find(opts, NOPTS(opts), "--add-bias-kv")->value;
//<
    if (empty && Lq > Lk)
        return cli_error("%s with --queries %zu > --kv %zu: query 0 "
                         "would see no key (query i sees key j only when "
                         "j <= i + Lk - Lq)",
                         rule, Lq, Lk);
    for (size_t b = 0; empty && vl->value && b < B; b++)
        if (lens[b] == 0)
            return cli_error("%s with --valid-lens '%s': entry %zu is 0, "
                             "so its queries would see no key",
                             rule, vl->value, b + 1);
    if (too_large("the queries", 3, (size_t[]){B, Lq, D}) ||
        too_large("the keys", 3, (size_t[]){B, Lk, D}) ||
        too_large("the attention weights", 4, (size_t[]){B, h, Lq, Lk}))
        return CLI_USAGE;
    int no_answers = opts[9].value != NULL;
    if (no_answers && show != SHOW_QUIZ)
        return cli_error("--no-answers goes with --quiz");
    if (show == SHOW_QUIZ) {
        // the quiz's questions for these sizes, from the sizes alone
        if (rope)
            return cli_error("--quiz asks the module without rotary "
                             "embeddings; leave out --rope");
//> 19
        if (cli_find(opts, NOPTS(opts), "--window")->value ||
            cli_find(opts, NOPTS(opts), "--alibi")->value ||
            cli_find(opts, NOPTS(opts), "--sinks")->value)
            return cli_error("--quiz asks the module without --window, "
                             "--alibi or --sinks; leave them out");
//<
        quiz_case c = {.B = B, .Lq = Lq, .Lk = Lk, .D = D, .h = h, .G = G,
                       .causal = causal, .has_lens = vl->value != NULL,
                       .upto = MHA_CHAPTER};
        for (size_t b = 0; b < B && b < QUIZ_LENS_MAX && vl->value; b++)
            c.lens[b] = lens[b];
        static quiz z;
        quiz_build(&c, &z);
        return cli_flush_stdout(quiz_print_worksheet(&z, !no_answers));
    }
    cmd_trace_case shape = {.B = B, .Lq = Lq, .Lk = Lk, .D = D, .h = h,
                            .G = G, .causal = causal, .rope = rope,
                            .rope_base = rope_base};
//> 15
    if (!rope_base)
        shape.rope_base = ROPE_DEFAULT_BASE;
//<
//> 19
    if (cli_window_options(opts, NOPTS(opts), causal, &shape.window,
                           &shape.keep, &shape.alibi))
        return CLI_USAGE;
    shape.sinks = cli_find(opts, NOPTS(opts), "--sinks")->value != NULL;
//<
//> 18
    if (cli_torch_trace_options(opts, NOPTS(opts), B, h, Lq, Lk, G * (D / h),
                                &shape.torch, &shape.masks)) {
        cli_torch_free(&shape.masks);
        return CLI_USAGE;
    }
//<
//> 19
    if (shape.torch && (shape.window || shape.alibi || shape.sinks)) {
        cli_torch_free(&shape.masks);
        return cli_error(CLI_WINDOW_NOT_TORCH);
    }
//<
    status = cmd_run_trace(&shape, vl->value ? lens : NULL, show);
//> 18
    cli_torch_free(&shape.masks);
//<
    return cli_flush_stdout(status);
}
//<
//<
