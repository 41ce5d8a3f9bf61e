//> handout
/* mha.c: the mha program, multi-head attention from the command line.
 *
 *   mha trace    the module's whole shape trace, run on shapes alone
 *                (--quiz: mha quiz's worksheet for these sizes;
 *                --json: JSON lines; --dot: a Graphviz dataflow)
 *   mha quiz     a small case drawn from a seed, asked step by step (the
 *                shape each step makes, view or copy, the repeated
 *                valid_lens); answers from stdin, a file or a folder of
 *                them (a class), then a score; a printable worksheet
 *   mha forward  the module on .npy inputs and weights, .npy outputs
 *   mha heatmap  the same forward pass, every head's weights drawn
 *
 * Shapes (batch-first, weights in PyTorch's layout):
 *   Q (B, Lq, Dq), K (B, Lk, Dk), V (B, Lk, Dv)
 *   W_q (D, Dq), W_k (D, Dk), W_v (D, Dv), W_o (D_out, D)
 *   with --kv-heads G: W_k (G*D/h, Dk), W_v (G*D/h, Dv)
 *   OUT (B, Lq, D_out), A (B, h, Lq, Lk), valid_lens (B,) or (B, Lq)
 *
 * Exit status 0 on success; 2 on any bad input, after one line on stderr,
 * with every file as it was before the run (paths.h, output.h); 3 in a
 * student's handout when the command needs an exercise not written yet
 * (one line naming it, error.h).  SIGINT, SIGTERM, SIGHUP and SIGPIPE
 * end it by that signal, its temporaries removed and gnuplot ended first
 * (cleanup.h).  The usage texts below are the program's documentation:
 * `mha --help`, `mha forward --help` ...
 */
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
#include "inputs.h"
#include "libmha.h"
#include "output.h"
#include "paths.h"
#include "quiz.h"

static const char usage_main[] =
    "usage: mha <command> [options]\n"
    "\n"
    "Multi-head attention from the command line: arrays in NumPy .npy\n"
    "files, batch-first, weights in PyTorch's layout.\n"
    "\n"
    "commands:\n"
    "  trace     print the module's whole shape trace, run on shapes alone\n"
    "  quiz      a case drawn from a seed, asked step by step: shapes, views\n"
    "            or copies, the repeated valid_lens\n"
    "  forward   run the module on .npy inputs and weights, write .npy outputs\n"
    "  heatmap   draw every head's attention weights (PNG, SVG or terminal)\n"
    "\n"
    "`mha <command> --help` describes each one.  Exit status: 0 on success,\n"
    "2 on bad input (one line on stderr, every file as it was before the run),\n"
    "3 in a student's handout when the command needs an exercise not written yet.\n";

static const char usage_trace[] =
    "usage: mha trace [--batch B] [--queries Lq] [--kv Lk] [--hiddens D]\n"
    "                 [--heads h] [--kv-heads G] [--causal] [--valid-lens 3,2]\n"
    "                 [--rope [--rope-base B]] [PyTorch's options]\n"
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
    "  --kv-heads G     key-value heads, each shared by h/G query heads\n"
    "                   (grouped-query attention); must divide h (default h)\n"
    "  --causal         query i sees key j only when j <= i + Lk - Lq\n"
    "  --valid-lens L   one valid length per example, e.g. 3,2 (default none)\n"
    "  --rope           rotary embeddings: Q and K turned by position right\n"
    "                   after their projections (D/h must be even)\n"
    "  --rope-base B    their base, a finite number > 1 (default 10000)\n"
//> 19
    "  --window W, --keep-first K, --alibi  see README.md, chapter 19\n"
    "  --sinks          a sink logit per head (zeros: shapes only here)\n"
//<
    "  --attn-mask 2d|3d, --key-padding-mask, --add-bias-kv, --add-zero-attn,\n"
    "  --average-attn-weights  PyTorch's options (see mha forward --help):\n"
    "                   the mask merge, Lk growing by one for each added key\n"
    "  --quiz           a worksheet: the questions mha quiz asks of a case\n"
    "                   of these sizes, in the same order, with a name line\n"
    "                   and a blank for each answer, then the answers on a\n"
    "                   page of their own (not with --rope)\n"
    "  --no-answers     with --quiz: leave the answers out\n"
    "  --json           the trace as JSON lines, one object per step, and\n"
    "                   nothing else\n"
    "  --dot            the module's dataflow graph in Graphviz's language,\n"
    "                   and nothing else: mha trace --dot | dot -Tsvg > g.svg\n"
    "\n"
    "--quiz, --json and --dot exclude each other.  Queries, keys and values\n"
    "have D features each, as in d2l's example.\n";

static const char usage_quiz[] =
    "usage: mha quiz [--seed S] [--answers FILE | --solution | --worksheet |\n"
    "                --json | --grade-dir DIR] [--review]\n"
    "\n"
    "Pick a small case by the seed S (batch, queries, keys, heads and their\n"
    "size, key-value heads, causal or not, valid_lens) and ask about the\n"
    "module's forward pass, step by step: the shape each step makes; for a\n"
    "reshape or permute, whether it is a view or a copy; the values\n"
    "repeat_interleave makes of valid_lens; and a few questions about the\n"
    "case (the weights' shape, which key-value head a query head reads, the\n"
    "keys a causal query sees, the cache's shape).  Answers are read from\n"
    "stdin, one a line, each marked right or wrong with the reason in this\n"
    "case; the last line is score: K/N.  Without --seed, a seed is drawn\n"
    "from the clock and shown.  The answers come from the case's sizes\n"
    "alone, so a student's copy, exercises unwritten, asks and grades the\n"
    "same.\n"
    "\n"
    "  --seed S         the case: a whole number from 0 to\n"
    "                   999999999999999999 (the same S, the same case)\n"
    "  --answers FILE   grade FILE: one answer a line, in order or numbered\n"
    "                   as the worksheet numbers them (12. (8, 2, 2), 12) view);\n"
    "                   # starts a comment; a blank line is no answer (in a\n"
    "                   file without numbers).  Its first line may name the\n"
    "                   seed (# mha quiz --seed 17), and then --seed may be\n"
    "                   left out.  UTF-8 with or without a byte-order mark,\n"
    "                   UTF-16, Windows line ends are all read.  Prints each\n"
    "                   wrong or missing answer with its question, line and\n"
    "                   the reason, then score: K/N.  FILE must be a regular\n"
    "                   file (a FIFO or a device is refused, not waited on)\n"
    "  --solution       print the answers in the form --answers reads, the\n"
    "                   seed on the first line\n"
    "  --worksheet      print the questions to hand out: a name line, a\n"
    "                   numbered blank for each answer, pages of 60 lines at\n"
    "                   most (A4 or Letter), no answer\n"
    "  --grade-dir DIR  grade every file in DIR (not those named .*), each by\n"
    "                   the seed its first line names; print a CSV on stdout\n"
    "                   (file,seed,score,max) and each file's feedback on\n"
    "                   stderr; exit 1 when some file names no seed\n"
    "  --json           print the module's own trace of the case, JSON lines\n"
    "  --review         after the score, print every step with its answer\n"
    "\n"
    "An answer is a shape as a Python tuple, (2, 4, 100) or (8,) (brackets\n"
    "are fine too); view or copy; values as a list, [3, 3, 2, 2]; or a\n"
    "number, 3.  Exit status: 0 when every answer is right, 1 when some are\n"
    "wrong or missing, 2 on bad input (one line on stderr).\n";

static const char usage_forward[] =
    "usage: mha forward --heads h --queries Q.npy [--keys K.npy] [--values V.npy]\n"
    "                   --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy\n"
    "                   [--bq B.npy] [--bk B.npy] [--bv B.npy] [--bo B.npy]\n"
    "                   [--valid-lens 3,2 | --valid-lens-file VL.npy]\n"
/*< 19
    "                   [--kv-heads G] [--causal]\n"
*/
//> 19
    "                   [--kv-heads G] [--causal] [--window W [--keep-first K]]\n"
//<
    "                   --out OUT.npy [--attention-out A.npy] [--trace]\n"
/*< 19
    "                   [--rope [--rope-base B]]\n"
*/
//> 19
    "                   [--rope [--rope-base B]] [--alibi] [--sinks S.npy]\n"
//<
    "                   [PyTorch's options, below]\n"
    "\n"
    "Multi-head attention on arrays read from .npy files (float64, float32,\n"
    "int64 or int32, C order), batch-first, weights as in PyTorch's nn.Linear:\n"
    "\n"
    "  Q (B, Lq, Dq)  K (B, Lk, Dk)  V (B, Lk, Dv)  keys and values default\n"
    "                                               to the queries\n"
    "  W_q (D, Dq)  W_k (D, Dk)  W_v (D, Dv)  W_o (D_out, D)  h must divide D\n"
    "  b_q, b_k, b_v (D,)  b_o (D_out,)  optional; a bias not given is zero\n"
    "  valid_lens (B,) or (B, Lq): whole numbers 0 .. Lk, from a list (one\n"
    "      per example) or a file; query i of example b sees only the first\n"
    "      valid_lens[b] (or valid_lens[b, i]) keys; 0 gives uniform weights,\n"
    "      as in d2l.  A key a query does not see (here or with --causal)\n"
    "      gets weight exactly 0 whatever the scores: the softmax runs over\n"
    "      the visible keys only (no -1e6 fill)\n"
    "  --kv-heads G: G key-value heads (grouped-query attention; G = 1 is\n"
    "      multi-query): G divides h, W_k is (G*D/h, Dk), W_v (G*D/h, Dv),\n"
    "      b_k and b_v (G*D/h,), and query head i reads key-value head\n"
    "      i / (h/G).  Default G = h: every head its own keys and values\n"
    "  --causal: query i sees key j only when j <= i + Lk - Lq (the queries\n"
    "      are the last Lq positions, as when decoding with a cache; with\n"
    "      Lq = Lk the usual causal mask); with valid_lens, the smaller of\n"
    "      the two.  A query left with no key (Lq > Lk, or a valid length\n"
    "      of 0) is refused before any work: uniform weights would let it\n"
    "      see the future\n"
    "  --rope  rotary embeddings (RoPE, interleaved pairs as in llama2.c):\n"
    "      each head's features 2k, 2k+1 of Q and K turned by the angle\n"
    "      position * B^(-2k/p), keys at positions 0 .. Lk-1 and queries at\n"
    "      Lk-Lq .. Lk-1; p = D/h must be even.  --rope-base B: a finite\n"
    "      number > 1 (default 10000)\n"
//> 19
    "  --window --keep-first --alibi --sinks: chapter 19\n"
//<
    "\n"
    "PyTorch's nn.MultiheadAttention options, with its meanings:\n"
    "  --attn-mask M.npy (Lq, Lk) or (B*h, Lq, Lk); --key-padding-mask P.npy\n"
    "      (B, Lk).  Bool: True = may NOT attend (SDPA's bool mask is the\n"
    "      opposite); float: added to the scaled scores, -inf hides a key\n"
    "  --in-proj-weight W.npy (3D, Din), --in-proj-bias b.npy (3D,): W_q,\n"
    "      W_k, W_v (b_q, b_k, b_v) stacked; not with --kv-heads\n"
    "  --bias-k BK.npy --bias-v BV.npy (1, 1, G*D/h): add_bias_kv, a key and\n"
    "      value appended after the projections (not with --rope);\n"
    "      --add-zero-attn: a zero key and value per head.  Each adds a key,\n"
    "      Lk' = Lk + 1, that every query may see\n"
    "  --average-attn-weights: A is (B, Lq, Lk'), the mean over the heads\n"
    "  --state-dict model.npz: numpy.savez(f, **module.state_dict()) for\n"
    "      every weight option\n"
    "  A row with every key hidden (a valid length of 0 too) is refused\n"
    "  before any work; nn.MultiheadAttention gives NaN there\n"
    "\n"
    "Writes OUT (B, Lq, D_out) and, with --attention-out, every head's\n"
    "weights A (B, h, Lq, Lk) as float64 .npy: both or neither, put in\n"
    "place only once stdout is written.  --trace prints the shape trace on\n"
    "stdout.  Refused before any work: an output that is a directory, FIFO,\n"
    "socket, device or symbolic link; two names (./x, links) for one file\n"
    "among the outputs and inputs; a run needing more memory than the\n"
    "machine has (or than MHA_MEMORY_LIMIT bytes, when set).  A result\n"
    "that overflows (NaN or inf from finite input) is refused too.\n"
    "\n"
    "Stopped by SIGINT, SIGTERM, SIGHUP or SIGPIPE (a closed pipe), mha\n"
    "removes its temporary files first and ends by that signal; beyond the\n"
    "file size limit (ulimit -f) a write fails: one line, exit status 2.\n"
    "Either way every file is as it was before the run.\n";

static const char usage_heatmap[] =
    "usage: mha heatmap --heads h --queries Q.npy ... (the inputs of mha forward)\n"
    "                   [--png F] [--svg F] [--terminal]\n"
    "\n"
    "Run the forward pass of `mha forward` and draw every head's attention\n"
    "weights: a grid with one row per example and one column per head, each\n"
    "panel Lq x Lk (queries down, keys across), one colour scale for all.\n"
    "\n"
    "  --png F       render with gnuplot into the PNG file F\n"
    "  --svg F       the same as SVG\n"
    "  --terminal    draw with Unicode shades on stdout\n"
    "\n"
    "With --average-attn-weights, one panel per example: the mean of the\n"
    "heads.  Give at least one; see `mha forward --help` for the inputs and for\n"
    "what is refused before any work.  Stopped by SIGINT, SIGTERM, SIGHUP\n"
    "or SIGPIPE, mha ends gnuplot, removes its temporary files and its\n"
    "scratch directory, and ends by that signal: every file is as it was.\n";

#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

/* stdout must have taken everything we printed (think `mha ... > /dev/full`). */
static int flush_stdout(int status)
{
    if (mha_stdout_check() && !status)
        status = cli_error("%s", mha_last_error());
    return status;
}

/* --- mha trace ------------------------------------------------------ */

/* How mha trace shows the records. */
typedef enum trace_show {
    SHOW_TEXT, /* the text trace between a description and the result */
    SHOW_QUIZ, /* a worksheet of the quiz's questions (quiz.h), answers after */
    SHOW_JSON, /* JSON lines, one object per record, nothing else */
    SHOW_DOT   /* the Graphviz dataflow of the module, nothing else */
} trace_show;

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
                             what, shape_str(s, sizeof s, ndim, shape),
                             (size_t)SIZE_MAX);
        }
        bytes *= shape[d];
    }
    return CLI_OK;
}

/* What mha trace runs: the sizes, G key-value heads, causal or not, RoPE
 * or not. */
typedef struct trace_case {
    size_t B, Lq, Lk, D, h, G;
    int causal;
    int rope;         /* rotary embeddings on Q and K */
    double rope_base; /* their base, 10000 unless --rope-base */
    int torch;        /* PyTorch's options (torch.h), shapes alone: */
    cli_torch masks;
//> 19
    size_t window, keep; /* --window, --keep-first (window.h) */
    int alibi, sinks;    /* --alibi, --sinks */
//<
} trace_case;

/* "queries (1, 2, 16), keys and values (1, 6, 16): 8 heads of 2 features,
 * valid_lens [3, 2]", with "2 key-value heads, causal, " when asked */
static void describe_trace(FILE *f, const trace_case *ts, const double *lens)
{
    size_t B = ts->B, Lq = ts->Lq, Lk = ts->Lk, D = ts->D, h = ts->h;
    char v[TRACE_NUMBER_MAX]; // every number exactly, as given
    if (ts->rope)
        fprintf(f, "rope (base %s) on Q and K; ", number_str(v, sizeof v, ts->rope_base));
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
    cli_torch_describe(f, &ts->masks);
    if (!lens) {
        fprintf(f, "no valid_lens\n");
        return;
    }
    fprintf(f, "valid_lens [");
    for (size_t b = 0; b < B; b++)
        fprintf(f, "%s%s", b ? ", " : "", number_str(v, sizeof v, lens[b]));
    fprintf(f, "]\n");
}

/* A quiz's worksheet (below, with mha quiz). */
struct quiz;
static int print_worksheet(const struct quiz *z, int answers);

/* valid_lens keep their numbers unless the module's repeat per head
 * (B*h of them) would be large; then they too are shapes alone, and the
 * trace reads the same. */
#define TRACE_LENS_MAX (1UL << 20)

/* The module on shapes alone: a shape-only module (cfg.shape_only) and
 * queries and keys with no numbers run every step and emit every record,
 * computing nothing, so the trace of any size is instant. */
static int run_trace(const trace_case *ts, const double *lens,
                     trace_show show)
{
    size_t B = ts->B, Lq = ts->Lq, Lk = ts->Lk, D = ts->D, h = ts->h;
    int status = CLI_OK;
    multihead m;
    int has_m = 0;
    tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL; // (B, Lq, D), (B, Lk, D)
    tensor *a = NULL; // the weights with PyTorch's options
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h,
                            .shape_only = 1, .kv_heads = ts->G,
                            .causal = ts->causal, .rope = ts->rope,
                            .rope_base = ts->rope_base};
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
        if (ts->torch)
            status = cli_torch_forward(&m, x, y, y, vl, &ts->masks, &out, &a);
        else if (multihead_forward(&m, x, y, y, vl, &out))
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
               tensor_shape_str(ts->torch ? a : m.weights, ws, sizeof ws));
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

static int cmd_trace(int argc, char **argv)
{
    cli_option opts[] = {{"--batch", 1, NULL},   {"--queries", 1, NULL},
                         {"--kv", 1, NULL},      {"--hiddens", 1, NULL},
                         {"--heads", 1, NULL},   {"--valid-lens", 1, NULL},
                         {"--quiz", 0, NULL},    {"--json", 0, NULL},
                         {"--dot", 0, NULL},     {"--kv-heads", 1, NULL},
                         {"--causal", 0, NULL},  {"--no-answers", 0, NULL},
                         CLI_ROPE_OPTIONS,       CLI_TORCH_TRACE_OPTIONS,
//> 19
                         CLI_WINDOW_OPTIONS,     {"--sinks", 0, NULL},
//<
    };
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        fputs(usage_trace, stdout);
        return flush_stdout(CLI_OK);
    }
    if (status)
        return status;
    // --quiz, --json and --dot: one way to show the trace, or none
    const cli_option *way;
    if (cli_at_most_one(&opts[6], 3, &way))
        return CLI_USAGE;
    trace_show show = !way             ? SHOW_TEXT
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
    int rope;
    double rope_base;
    if (cli_rope_options(opts, NOPTS(opts), &rope, &rope_base))
        return CLI_USAGE;
    size_t G; // key-value heads
    if (cli_kv_heads_option(&opts[9], h, &G))
        return CLI_USAGE;
    int causal = opts[10].value != NULL;
//> 19
    // a window is causal too (window.h)
    causal = causal || cli_find(opts, NOPTS(opts), "--window")->value;
//<
    double lens[CLI_LIST_MAX];
    size_t n = 0;
    const cli_option *vl = &opts[5];
    if (vl->value) {
        if (cli_parse_list(vl, lens, CLI_LIST_MAX, &n))
            return CLI_USAGE;
        if (n != B)
            return cli_error("--valid-lens '%s' has %zu entr%s but --batch is "
                             "%zu",
                             vl->value, n, n == 1 ? "y" : "ies", B);
        char v[TRACE_NUMBER_MAX];
        for (size_t b = 0; b < B; b++)
            if (lens[b] > (double)Lk)
                return cli_error("--valid-lens '%s': entry %zu (%s) is larger "
                                 "than --kv %zu",
                                 vl->value, b + 1,
                                 number_str(v, sizeof v, lens[b]), Lk);
    }
    // causal: every query must see a key (multihead.h); said before the
    // description, so a refused trace prints nothing on stdout
    const char *rule = "--causal"; // the option that asked for the rule
//> 19
    if (!opts[10].value)
        rule = "--window";
//<
    if (causal && Lq > Lk)
        return cli_error("%s with --queries %zu > --kv %zu: query 0 "
                         "would see no key (query i sees key j only when "
                         "j <= i + Lk - Lq)",
                         rule, Lq, Lk);
    for (size_t b = 0; causal && vl->value && b < B; b++)
        if (lens[b] == 0)
            return cli_error("%s with --valid-lens '%s': entry %zu is 0, "
                             "so its queries would see no key",
                             rule, vl->value, b + 1);
    if (too_large("the queries", 3, (size_t[]){B, Lq, D}) ||
        too_large("the keys", 3, (size_t[]){B, Lk, D}) ||
        too_large("the attention weights", 4, (size_t[]){B, h, Lq, Lk}))
        return CLI_USAGE;
    int no_answers = opts[11].value != NULL;
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
                       .causal = causal, .has_lens = vl->value != NULL};
        for (size_t b = 0; b < B && b < QUIZ_LENS_MAX && vl->value; b++)
            c.lens[b] = lens[b];
        static quiz z;
        quiz_build(&c, &z);
        return flush_stdout(print_worksheet(&z, !no_answers));
    }
/*< 19
    trace_case shape = {B, Lq, Lk, D, h, G, causal, rope,
                        rope_base ? rope_base : ROPE_DEFAULT_BASE, 0, {0}};
*/
//> 19
    trace_case shape = {B, Lq, Lk, D, h, G, causal, rope,
                        rope_base ? rope_base : ROPE_DEFAULT_BASE, 0, {0},
                        0, 0, 0, 0};
    if (cli_window_options(opts, NOPTS(opts), causal, &shape.window,
                           &shape.keep, &shape.alibi))
        return CLI_USAGE;
    shape.sinks = cli_find(opts, NOPTS(opts), "--sinks")->value != NULL;
//<
    if (cli_torch_trace_options(opts, NOPTS(opts), B, h, Lq, Lk, G * (D / h),
                                &shape.torch, &shape.masks)) {
        cli_torch_free(&shape.masks);
        return CLI_USAGE;
    }
//> 19
    if (shape.torch && (shape.window || shape.alibi || shape.sinks)) {
        cli_torch_free(&shape.masks);
        return cli_error(CLI_WINDOW_NOT_TORCH);
    }
//<
    status = run_trace(&shape, vl->value ? lens : NULL, show);
    cli_torch_free(&shape.masks);
    return flush_stdout(status);
}

/* --- mha quiz ------------------------------------------------------- */

/* A page of a worksheet: 60 lines fit A4 and Letter at 10 or 11 points
 * with the usual margins; lines are at most 78 characters wide. */
enum { PAGE_LINES = 60, PAGE_WIDTH = 78, BLANK = 24, BLANK_AT = 40 };

/* A question's where: "question 5 (line 6, step 3, its shape)". */
static void where_str(char *buf, size_t n, const quiz_question *q, size_t i,
                      size_t line)
{
    char at[32] = "", st[32] = "";
    if (line)
        snprintf(at, sizeof at, "line %zu, ", line);
    if (q->step)
        snprintf(st, sizeof st, "step %zu, ", q->step);
    snprintf(buf, n, "question %zu (%s%s%s)", i + 1, at, st, q->ask);
}

static const char not_an_answer[] =
    "a shape like (2, 4, 100), view or copy, values like [3, 3, 2, 2], or "
    "a number";

/* "Name: Ada" (any case, spaces before the colon): a student's name,
 * no answer. */
static int name_line(const char *a)
{
    if (strncasecmp(a, "name", 4))
        return 0;
    const char *p = a + 4;
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == ':';
}

/* Grading one answer text: the feedback (each wrong, unreadable or
 * missing answer with its question number and line) on fb, each line
 * after prefix; the count of right answers.  Lines: one answer each, in
 * the questions' order or numbered ("12. (8, 2, 2)", "12) view"); a
 * blank line is no answer (in a file with no numbers), # starts a
 * comment, and a first line naming the seed or a "Name:" line is no
 * answer.  text is changed (cut into lines). */
static size_t grade_text(const quiz *z, char *text, size_t len, FILE *fb,
                         const char *prefix)
{
    size_t n = z->n;
    const char *got[QUIZ_QUESTIONS_MAX] = {0};
    size_t at[QUIZ_QUESTIONS_MAX] = {0}, blank[QUIZ_QUESTIONS_MAX] = {0};
    size_t badbyte[QUIZ_QUESTIONS_MAX] = {0};
    char esc[4 * QUIZ_TEXT_MAX];
    // numbered answers place themselves; in a file of them a blank line
    // says nothing
    int numbered = 0, started = 0;
    for (char *p = text; p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(text + len - p);
        char saved = p[l];
        p[l] = '\0';
        const char *rest;
        if (quiz_numbered(p, &rest))
            numbered = 1;
        p[l] = saved;
        p += l + 1;
    }
    size_t lineno = 0, next = 0;
    for (char *p = text; p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(text + len - p);
        p[l] = '\0';
        char *line = p;
        p += l + 1;
        lineno++;
        size_t bad = quiz_bad_byte(line, l);
        char *hash = strchr(line, '#');
        int comment = hash != NULL;
        if (hash)
            *hash = '\0';
        char *a = line;
        while (*a == ' ' || *a == '\t')
            a++;
        size_t al = strlen(a);
        while (al > 0 && strchr(" \t\r", a[al - 1]))
            a[--al] = '\0';
        if (!*a && comment)
            continue;
        unsigned long long s;
        if (!started && *a && quiz_seed_line(a, &s))
            continue;
        if (name_line(a))
            continue;
        const char *rest;
        size_t k = quiz_numbered(a, &rest);
        if (!*a) {
            if (!numbered && started && next < n && !blank[next]) {
                blank[next] = lineno;
                next++;
            }
            continue;
        }
        started = 1;
        size_t i = k ? k - 1 : next;
        if (k > n) {
            fprintf(fb, "%sline %zu: answers question %zu, but the quiz asks "
                        "%zu; it is not counted\n",
                    prefix, lineno, k, n);
            continue;
        }
        if (i >= n) {
            fprintf(fb, "%sline %zu: '%s' is an answer beyond the %zu "
                        "questions; it is not counted\n",
                    prefix, lineno, quiz_escape(rest, strlen(rest), esc, sizeof esc), n);
            continue;
        }
        if (at[i]) {
            fprintf(fb, "%sline %zu: a second answer to question %zu (the "
                        "first is on line %zu); it is not counted\n",
                    prefix, lineno, i + 1, at[i]);
            next = i + 1;
            continue;
        }
        at[i] = lineno;
        got[i] = rest;
        badbyte[i] = bad < l ? bad + 1 : 0;
        next = i + 1;
    }
    size_t right = 0;
    char where[2 * QUIZ_TEXT_MAX], shown[QUIZ_TEXT_MAX];
    for (size_t i = 0; i < n; i++) {
        const quiz_question *q = &z->qs[i];
        if (!at[i]) {
            where_str(where, sizeof where, q, i, blank[i]);
            if (blank[i])
                fprintf(fb, "%s%s: no answer (a blank line); right: %s\n",
                        prefix, where, q->why);
            else
                fprintf(fb, "%s%s: no answer (%s); right: %s\n", prefix, where,
                        numbered ? "no line numbered so" : "the answers end "
                                                           "before it",
                        q->why);
            continue;
        }
        where_str(where, sizeof where, q, i, at[i]);
        if (badbyte[i]) {
            const char *raw = got[i];
            fprintf(fb, "%s%s: byte %zu of the line is a control character, "
                        "not text ('%s'); right: %s\n",
                    prefix, where, badbyte[i],
                    quiz_escape(raw, strlen(raw), esc, sizeof esc), q->why);
            continue;
        }
        int r = *got[i] ? quiz_check(q, got[i], shown, sizeof shown) : -2;
        if (r == 1) {
            right++;
            continue;
        }
        if (r == -2)
            fprintf(fb, "%s%s: no answer (the line has its number only); "
                        "right: %s\n",
                    prefix, where, q->why);
        else if (r < 0)
            fprintf(fb, "%s%s: '%s' is not an answer (%s); right: %s\n", prefix,
                    where, quiz_escape(got[i], strlen(got[i]), esc, sizeof esc),
                    not_an_answer, q->why);
        else
            fprintf(fb, "%s%s: answered %s; right: %s\n", prefix, where, shown,
                    q->why);
    }
    return right;
}

/* The most an answer file may hold: a quiz's answers are a few hundred
 * bytes. */
#define ANSWERS_MAX (1 << 20)

/* An answer file's text, decoded (quiz_decode), into *text; option names
 * it in messages ("--answers", or the folder of --grade-dir). */
static int read_answer_file(const char *option, const char *path, char **text,
                            size_t *len)
{
    FILE *f;
    *text = NULL;
    if (cli_open_input(option, path, &f))
        return CLI_USAGE;
    char *raw = malloc(ANSWERS_MAX + 1);
    if (!raw) {
        fclose(f);
        return cli_error("out of memory reading %s '%s'", option, path);
    }
    size_t n = fread(raw, 1, ANSWERS_MAX + 1, f);
    int status = CLI_OK;
    if (ferror(f))
        status = cli_error("cannot read %s '%s': %s", option, path,
                           strerror(errno));
    else if (n > ANSWERS_MAX)
        status = cli_error("%s '%s' is larger than %d bytes; an answer file "
                           "holds one short line a question",
                           option, path, ANSWERS_MAX);
    fclose(f);
    char why[QUIZ_TEXT_MAX];
    if (!status && quiz_decode(raw, n, text, len, why, sizeof why))
        status = cli_error("%s '%s' is %s", option, path, why);
    free(raw);
    return status;
}

/* The seed the first line that is not blank names, if it names one. */
static int first_line_seed(const char *text, unsigned long long *seed)
{
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    const char *end = strchr(p, '\n');
    char line[256];
    size_t l = end ? (size_t)(end - p) : strlen(p);
    if (l >= sizeof line)
        l = sizeof line - 1;
    memcpy(line, p, l);
    line[l] = '\0';
    return quiz_seed_line(line, seed);
}

/* A worksheet's lines, then printed in pages: keep[i] > 1 holds lines
 * i .. i + keep[i] - 1 on one page (a step and its questions). */
typedef struct sheet {
    char (*lines)[2 * PAGE_WIDTH];
    size_t *keep;
    size_t n, cap;
    int failed;
} sheet;

static void sheet_add(sheet *s, size_t keep, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void sheet_add(sheet *s, size_t keep, const char *fmt, ...)
{
    if (s->failed)
        return;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 128;
        void *l = realloc(s->lines, cap * sizeof *s->lines);
        if (l)
            s->lines = l;
        void *k = l ? realloc(s->keep, cap * sizeof *s->keep) : NULL;
        if (!l || !k) {
            s->failed = 1;
            return;
        }
        s->keep = k;
        s->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->lines[s->n], sizeof s->lines[0], fmt, ap);
    va_end(ap);
    s->keep[s->n++] = keep;
}

/* text at indent, cut at spaces into lines of PAGE_WIDTH at most, the
 * lines after the first indented by hang more; the lines it took. */
static size_t sheet_wrap(sheet *s, int indent, int hang, const char *text)
{
    size_t lines = 0;
    int width = PAGE_WIDTH - indent;
    while (*text) {
        int in = lines ? indent + hang : indent;
        int room = lines ? width - hang : width;
        size_t len = strlen(text);
        size_t cut = len;
        if ((int)len > room) {
            cut = (size_t)room;
            while (cut > 0 && text[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = (size_t)room;
        }
        sheet_add(s, 1, "%*s%.*s", in, "", (int)cut, text);
        lines++;
        text += cut;
        while (*text == ' ')
            text++;
    }
    return lines;
}

/* The sheet in pages of PAGE_LINES, a form feed between them, each page
 * after the first headed by title and its number; a page break where
 * lines[i] is "\f". */
static void sheet_print(const sheet *s, const char *title)
{
    size_t pages = 1, used = 0;
    // count the pages first, then print with "page k of n"
    for (int pass = 0; pass < 2; pass++) {
        size_t page = 1;
        used = 0;
        for (size_t i = 0; i < s->n; i++) {
            int forced = !strcmp(s->lines[i], "\f");
            size_t keep = s->keep[i] > PAGE_LINES - 2 ? 1 : s->keep[i];
            if (forced || used + keep > PAGE_LINES) {
                page++;
                if (pass)
                    printf("\f%s, page %zu of %zu\n\n", title, page, pages);
                used = 2;
                if (forced)
                    continue;
            }
            if (pass)
                printf("%s\n", s->lines[i]);
            used++;
        }
        pages = page;
    }
}

/* The worksheet of z: a name line, the case, each step with its numbered
 * questions and a blank for each answer; with answers, the answers after
 * them on a page of their own. */
static int print_worksheet(const struct quiz *z, int answers)
{
    sheet s = {0};
    char title[QUIZ_TEXT_MAX], cmd[2 * QUIZ_TEXT_MAX], desc[2 * QUIZ_TEXT_MAX];
    FILE *m = fmemopen(cmd, sizeof cmd, "w");
    if (m) {
        quiz_trace_command(m, &z->c);
        fclose(m);
    }
    m = fmemopen(desc, sizeof desc, "w");
    if (m) {
        quiz_describe(m, &z->c);
        fclose(m);
    }
    if (!m)
        return cli_error("out of memory writing the worksheet");
    if (z->c.seeded)
        snprintf(title, sizeof title, "mha quiz --seed %llu", z->c.seed);
    else
        snprintf(title, sizeof title, "mha trace --quiz");
    sheet_add(&s, 1, "%s: %zu questions", title, z->n);
    sheet_add(&s, 1, "%s", "");
    sheet_add(&s, 1, "Name: %.40s   Date: %.16s",
              "________________________________________",
              "________________");
    sheet_add(&s, 1, "%s", "");
    sheet_wrap(&s, 0, 0, desc);
    if (!z->c.seeded)
        sheet_wrap(&s, 0, 0, cmd);
    sheet_add(&s, 1, "%s", "");
    sheet_wrap(&s, 0, 0, "Write each answer on its blank: a shape as (2, 4, "
                         "100); view or copy; values as [3, 3, 2, 2]; a "
                         "number as 3.");
    if (z->c.seeded) {
        char typed[3 * QUIZ_TEXT_MAX];
        snprintf(typed, sizeof typed,
                 "To type your answers in: a file whose first line is "
                 "\"# mha quiz --seed %llu\", then one answer a line, numbered "
                 "as here (\"1. (2, 3, 8)\"); mha quiz --seed %llu --answers "
                 "FILE grades it.",
                 z->c.seed, z->c.seed);
        sheet_wrap(&s, 0, 0, typed);
    }
    sheet_add(&s, 1, "%s", "");
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        size_t first = s.n;
        sheet_wrap(&s, indent, 4, ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++) {
            char ask[2 * QUIZ_TEXT_MAX];
            snprintf(ask, sizeof ask, "%3zu. %s?", i + 1, z->qs[i].ask);
            int at = indent + 2;
            int gap = BLANK_AT - at - (int)strlen(ask); // blanks in a column
            if (gap < 2)
                gap = 2;
            if (at + (int)strlen(ask) + gap + BLANK <= PAGE_WIDTH) {
                sheet_add(&s, 1, "%*s%s%*s%.*s", at, "", ask, gap, "", BLANK,
                          "______________________________");
            } else {
                sheet_wrap(&s, at, 5, ask);
                sheet_add(&s, 1, "%*s%.*s", at + 5, "", BLANK,
                          "______________________________");
            }
        }
        if (s.n > first && !s.failed)
            s.keep[first] = s.n - first;
    }
    if (answers && !s.failed) {
        sheet_add(&s, 1, "\f");
        sheet_add(&s, 1, "Answers");
        sheet_add(&s, 1, "%s", "");
        for (size_t i = 0; i < z->n; i++) {
            char one[5 * QUIZ_TEXT_MAX];
            snprintf(one, sizeof one, "%3zu. %s", i + 1, z->qs[i].why);
            size_t first = s.n;
            sheet_wrap(&s, 0, 5, one);
            if (!s.failed)
                s.keep[first] = s.n - first;
        }
    }
    int status = CLI_OK;
    if (s.failed)
        status = cli_error("out of memory writing the worksheet");
    else
        sheet_print(&s, title);
    free(s.lines);
    free(s.keep);
    return status;
}

/* The quiz's steps, each question under its step with its answer and
 * the reason in this case (--review). */
static void print_answers(const quiz *z, FILE *f)
{
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        fprintf(f, "%*s%s\n", indent, "", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++)
            fprintf(f, "%*s%3zu. %s\n", indent + 2, "", i + 1, z->qs[i].why);
    }
}

/* The questions one by one on stdout, the answers from stdin, each
 * marked: *right counts the right ones. */
static int quiz_walk(const quiz *z, size_t *right)
{
    int echo = !isatty(STDIN_FILENO); // a piped answer shows in the transcript
    char *line = NULL, shown[QUIZ_TEXT_MAX];
    char typed[2048]; // an answer as the student sent it, escaped
    size_t cap = 0;
    int status = CLI_OK;
    for (size_t l = 0; l < z->nlines && !status; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        printf("%*s%s\n", indent, "", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count && !status; i++) {
            const quiz_question *q = &z->qs[i];
            for (;;) {
                printf("%*s%3zu. %s? ", indent + 2, "", i + 1, q->ask);
                fflush(stdout);
                errno = 0;
                ssize_t len = getline(&line, &cap, stdin);
                if (len < 0) {
                    printf("\n");
                    status = ferror(stdin)
                                 ? cli_error("cannot read stdin after %zu of "
                                             "%zu answers: %s",
                                             i, z->n, strerror(errno))
                                 : cli_error("stdin ended after %zu of %zu "
                                             "answers",
                                             i, z->n);
                    break;
                }
                // what was typed, escaped: a piped \x1b[2J must not
                // clear the screen; a control character is no answer
                size_t bad = quiz_bad_byte(line, (size_t)len);
                if (bad < (size_t)len) {
                    size_t end = (size_t)len;
                    while (end > 0 && strchr("\r\n", line[end - 1]))
                        end--;
                    if (echo)
                        printf("%s\n", quiz_escape(line, end, typed, sizeof typed));
                    printf("%*s     not an answer: %s is a control "
                           "character\n",
                           indent + 2, "", quiz_escape(line + bad, 1, typed, sizeof typed));
                    continue;
                }
                char *hash = strchr(line, '#');
                if (hash)
                    *hash = '\0';
                size_t al = strlen(line);
                while (al > 0 && strchr(" \t\r\n", line[al - 1]))
                    line[--al] = '\0';
                const char *a;
                quiz_numbered(line, &a);
                if (echo)
                    printf("%s\n", quiz_escape(a, strlen(a), typed, sizeof typed));
                int r = *a ? quiz_check(q, a, shown, sizeof shown) : -1;
                if (r >= 0) {
                    *right += (size_t)r;
                    if (r)
                        printf("%*s     right\n", indent + 2, "");
                    else
                        printf("%*s     wrong: %s\n", indent + 2, "", q->why);
                    break;
                }
                printf("%*s     not an answer: give %s\n", indent + 2, "",
                       not_an_answer);
            }
        }
    }
    free(line);
    return status;
}

static int quiz_ask(const quiz *z, int review)
{
    // a directory opens as stdin but reads as nothing: say so, before
    // any question
    struct stat st;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_error("stdin is a directory: give the answers on stdin, "
                         "one a line, or grade a file with --answers FILE");
    printf("mha quiz --seed %llu: ", z->c.seed);
    quiz_describe(stdout, &z->c);
    printf("\n%zu questions on the module's forward pass, step by step: a "
           "shape, as (2, 4, 100);\nview or copy; values, as [3, 3, 2, 2]; "
           "or a number.\n\n",
           z->n);
    size_t right = 0;
    int status = quiz_walk(z, &right);
    if (!status) {
        printf("\nscore: %zu/%zu\n", right, z->n);
        if (review) {
            printf("\nThe steps and their answers:\n");
            print_answers(z, stdout);
        }
        status = right == z->n ? 0 : 1;
    }
    return status;
}

static void quiz_solution(const quiz *z)
{
    printf("# mha quiz --seed %llu: ", z->c.seed);
    quiz_describe(stdout, &z->c);
    printf("\n# the same questions: ");
    quiz_trace_command(stdout, &z->c);
    printf("\n");
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        if (!ln->count)
            continue;
        printf("# %s\n", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++)
            printf("%zu. %s\n", i + 1, z->qs[i].answer);
    }
}

static int quiz_grade_file(const char *path, const cli_option *seed_opt,
                           unsigned long long seed, int review)
{
    char *text;
    size_t len;
    if (read_answer_file("--answers", path, &text, &len))
        return CLI_USAGE;
    unsigned long long named;
    int names = first_line_seed(text, &named);
    int status = CLI_OK;
    if (seed_opt->value && names && named != seed)
        status = cli_error("--answers '%s' is for --seed %llu (its first "
                           "line), not --seed %llu",
                           path, named, seed);
    else if (!seed_opt->value && !names)
        status = cli_error("--answers '%s' names no seed in its first line "
                           "(\"# mha quiz --seed 17\"): give --seed S",
                           path);
    if (!status) {
        quiz_case c;
        static quiz z;
        quiz_draw(seed_opt->value ? seed : named, &c);
        quiz_build(&c, &z);
        size_t right = grade_text(&z, text, len, stdout, "");
        printf("score: %zu/%zu\n", right, z.n);
        if (review) {
            printf("\nThe steps and their answers:\n");
            print_answers(&z, stdout);
        }
        status = right == z.n ? 0 : 1;
    }
    free(text);
    return status;
}

/* A CSV field: as it is, or quoted when it holds a comma, a quote or a
 * line break (RFC 4180). */
static void csv_field(const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static int skip_dot(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* --grade-dir DIR: every answer file in DIR (not those whose names start
 * with a dot), in name order, graded by the seed its first line names; a
 * CSV on stdout (file, seed, score, max), the feedback on stderr. */
static int quiz_grade_dir(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cli_error("cannot read --grade-dir '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cli_error("--grade-dir '%s' is not a folder", dir);
    struct dirent **names;
    int count = scandir(dir, &names, skip_dot, alphasort);
    if (count < 0)
        return cli_error("cannot read --grade-dir '%s': %s", dir, strerror(errno));
    static quiz z;
    int status = CLI_OK;
    size_t ungraded = 0;
    printf("file,seed,score,max\n");
    for (int i = 0; i < count; i++) {
        const char *name = names[i]->d_name;
        size_t plen = strlen(dir) + strlen(name) + 2;
        char *path = malloc(plen);
        char *text = NULL;
        size_t len = 0;
        unsigned long long seed;
        int ok = 0;
        if (!path) {
            status = cli_error("out of memory grading --grade-dir '%s'", dir);
        } else {
            snprintf(path, plen, "%s/%s", dir, name);
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                free(path);
                free(names[i]);
                continue;
            }
            if (read_answer_file("--grade-dir", path, &text, &len) == CLI_OK) {
                if (first_line_seed(text, &seed))
                    ok = 1;
                else
                    fprintf(stderr, "mha quiz: %s: its first line names no "
                                    "seed (\"# mha quiz --seed 17\"); not "
                                    "graded\n",
                            path);
            }
        }
        csv_field(name);
        if (ok) {
            quiz_case c;
            quiz_draw(seed, &c);
            quiz_build(&c, &z);
            char prefix[512];
            snprintf(prefix, sizeof prefix, "%.500s: ", name);
            fflush(stdout);
            size_t right = grade_text(&z, text, len, stderr, prefix);
            printf(",%llu,%zu,%zu\n", seed, right, z.n);
        } else {
            printf(",,,\n");
            ungraded++;
        }
        free(text);
        free(path);
        free(names[i]);
    }
    free(names);
    if (!status && ungraded)
        status = 1;
    return status;
}

/* --seed: a whole number from 0 to QUIZ_SEED_MAX, digits only. */
static int parse_seed(const char *v, unsigned long long *seed)
{
    size_t len = strlen(v);
    if (len == 0 || strspn(v, "0123456789") != len)
        return cli_error("--seed '%s' is not a whole number from 0 to %llu",
                         v, QUIZ_SEED_MAX);
    unsigned long long s = 0;
    for (const char *p = v; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (s > (QUIZ_SEED_MAX - d) / 10)
            return cli_error("--seed '%s' is larger than %llu, the largest "
                             "seed",
                             v, QUIZ_SEED_MAX);
        s = s * 10 + d;
    }
    *seed = s;
    return CLI_OK;
}

static int cmd_quiz(int argc, char **argv)
{
    cli_option opts[] = {{"--seed", 1, NULL},      {"--answers", 1, NULL},
                         {"--solution", 0, NULL},  {"--json", 0, NULL},
                         {"--worksheet", 0, NULL}, {"--grade-dir", 1, NULL},
                         {"--review", 0, NULL}};
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        fputs(usage_quiz, stdout);
        return flush_stdout(CLI_OK);
    }
    if (status)
        return status;
    // --answers, --solution, --json, --worksheet, --grade-dir: one, or none
    const cli_option *mode;
    if (cli_at_most_one(&opts[1], 5, &mode))
        return CLI_USAGE;
    int review = opts[6].value != NULL;
    if (review && mode && mode != &opts[1])
        return cli_error("--review goes with grading, not with %s", mode->name);
    unsigned long long seed = 0;
    if (opts[0].value && parse_seed(opts[0].value, &seed))
        return CLI_USAGE;
    if (mode == &opts[5]) {
        if (opts[0].value)
            return cli_error("--grade-dir takes each file's seed from its "
                             "first line; leave out --seed");
        return flush_stdout(quiz_grade_dir(opts[5].value));
    }
    if (mode == &opts[1])
        return flush_stdout(quiz_grade_file(opts[1].value, &opts[0], seed, review));
    if (!opts[0].value) {
        if (mode)
            return cli_error("%s needs --seed S: its answers are those of one "
                             "case",
                             mode->name);
        seed = (unsigned long long)time(NULL) % 100000;
    }
    quiz_case c;
    static quiz z;
    quiz_draw(seed, &c);
    quiz_build(&c, &z);
    if (mode == &opts[3]) {
        // the module's own trace of the case, as mha trace --json prints it
/*< 19
        trace_case tc = {c.B, c.Lq, c.Lk, c.D, c.h, c.G, c.causal, 0,
                         ROPE_DEFAULT_BASE, 0, {0}};
*/
//> 19
        trace_case tc = {c.B, c.Lq, c.Lk, c.D, c.h, c.G, c.causal, 0,
                         ROPE_DEFAULT_BASE, 0, {0}, 0, 0, 0, 0};
//<
        status = run_trace(&tc, c.lens, SHOW_JSON);
    } else if (mode == &opts[2]) {
        quiz_solution(&z);
    } else if (mode == &opts[4]) {
        status = print_worksheet(&z, 0);
    } else {
        status = quiz_ask(&z, review);
    }
    return flush_stdout(status);
}

/* --- mha forward and mha heatmap ------------------------------------ */

/* OpenBLAS's buffer taken before the inputs are read, or one line saying
 * the memory limit leaves no room for it (threads.h). */
static int blas_ready(void)
{
    return threads_blas_reserve() ? cli_error("%s", mha_last_error()) : CLI_OK;
}

/* The input files both commands read, for cli_check_paths. */
static const char *const input_files[] = {
    "--queries", "--keys", "--values", "--wq", "--wk", "--wv", "--wo",
    "--bq", "--bk", "--bv", "--bo", "--valid-lens-file",
//> 19
    "--sinks",
//<
    CLI_TORCH_FILES};

/* The outputs regular files (or new), each with one name, none an input
 * (paths.h): checked before anything is read. */
static int check_paths(cli_option *opts, size_t nopts, const cli_path *outs,
                       size_t nout)
{
    cli_path ins[NOPTS(input_files)];
    for (size_t i = 0; i < NOPTS(input_files); i++)
        ins[i] = (cli_path){input_files[i],
                            cli_find(opts, nopts, input_files[i])->value};
    return cli_check_paths(outs, nout, ins, NOPTS(ins));
}

/* The module on the loaded inputs: the fast path, with no copies of the
 * heads, keeping the weights (B, h, Lq, Lk) in in->m.weights only when
 * asked for, so that memory stays linear in the lengths.  A student's
 * copy has no fast path: there it is the lesson's multihead_forward,
 * which always keeps them. */
static int module_forward(cli_inputs *in, int keep_weights, tensor **out)
{
/*< full
    (void)keep_weights;
    return multihead_forward(&in->m, in->queries, in->keys, in->values,
                             in->valid_lens, out);
*/
//> full
    multihead_fast_options fast = {.keep_weights = keep_weights};
    return multihead_forward_fast(&in->m, in->queries, in->keys, in->values,
                                  in->valid_lens, &fast, out);
//<
}

static int cmd_forward(int argc, char **argv)
{
    cli_option opts[] = {CLI_INPUT_OPTIONS,
                         {"--out", 1, NULL},
                         {"--attention-out", 1, NULL},
                         {"--trace", 0, NULL}};
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        fputs(usage_forward, stdout);
        return flush_stdout(CLI_OK);
    }
    if (status || (status = cli_inputs_check_options(opts, NOPTS(opts))) ||
        (status = cli_torch_check_options(opts, NOPTS(opts), 1)))
        return status;
    const char *out_path = cli_find(opts, NOPTS(opts), "--out")->value;
    const char *a_path = cli_find(opts, NOPTS(opts), "--attention-out")->value;
    int trace = cli_find(opts, NOPTS(opts), "--trace")->value != NULL;
    if (!out_path)
        return cli_error("--out is required (see mha forward --help)");
    const cli_path outs_named[] = {{"--out", out_path},
                                   {"--attention-out", a_path}};
    if ((status = check_paths(opts, NOPTS(opts), outs_named, 2)) ||
        (status = cli_inputs_check_memory(
             opts, NOPTS(opts), a_path != NULL,
             a_path ? "drop --attention-out, or use mha trace for shapes alone"
                    : "use mha trace for shapes alone")) ||
        (status = blas_ready()))
        return status;

    cli_inputs in;
    status = cli_inputs_load(opts, NOPTS(opts), &in);
    tensor *out = NULL, *a = NULL; // (B, Lq, D_out); A with PyTorch's options
    if (!status) {
        if (trace)
            trace_to(stdout);
        if (in.has_torch)
            status = cli_torch_forward(&in.m, in.queries, in.keys, in.values,
                                       in.valid_lens, &in.torch, &out,
                                       a_path ? &a : NULL);
        else if (module_forward(&in, a_path != NULL, &out))
            status = cli_error("%s", mha_last_error());
        trace_to(NULL);
    }
    cli_output outs[2] = {
        {.option = "--out", .path = out_path, .npy = out},
        {.option = "--attention-out", .path = a_path,
         .npy = in.has_torch ? a : in.m.weights},
    };
    cli_staged staged = {0};
    if (!status)
        status = cli_stage_outputs(outs, a_path ? 2 : 1, &staged);
    // stdout complete first: a failed trace leaves no file behind
    status = cli_finish_outputs(&staged, flush_stdout(status));
    tensor_free(out);
    tensor_free(a);
    cli_inputs_free(&in);
    return status;
}

static int cmd_heatmap(int argc, char **argv)
{
    cli_option opts[] = {CLI_INPUT_OPTIONS,
                         {"--png", 1, NULL},
                         {"--svg", 1, NULL},
                         {"--terminal", 0, NULL}};
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        fputs(usage_heatmap, stdout);
        return flush_stdout(CLI_OK);
    }
    if (status || (status = cli_inputs_check_options(opts, NOPTS(opts))) ||
        (status = cli_torch_check_options(opts, NOPTS(opts), 0)))
        return status;
    const char *png = cli_find(opts, NOPTS(opts), "--png")->value;
    const char *svg = cli_find(opts, NOPTS(opts), "--svg")->value;
    int terminal = cli_find(opts, NOPTS(opts), "--terminal")->value != NULL;
    if (!png && !svg && !terminal)
        return cli_error("nothing to draw: give --png F, --svg F or --terminal");
    const cli_path outs_named[] = {{"--png", png}, {"--svg", svg}};
    if ((status = check_paths(opts, NOPTS(opts), outs_named, 2)) ||
        (status = cli_inputs_check_memory(
             opts, NOPTS(opts), 1,
             "the heatmap needs every weight: use shorter sequences, or mha "
             "trace for shapes alone")) ||
        (status = blas_ready()))
        return status;

    cli_inputs in;
    status = cli_inputs_load(opts, NOPTS(opts), &in);
    tensor *out = NULL;
    char (*titles)[64] = NULL; // "example b, head i", panel by panel
    const char **tp = NULL;
    cli_output outs[2];
    cli_staged staged = {0};
    tensor *a = NULL, *w = NULL; // PyTorch's options: A, and A as panels
    if (!status && in.has_torch)
        status = cli_torch_heatmap_weights(&in.m, in.queries, in.keys,
                                           in.values, in.valid_lens,
                                           &in.torch, &out, &a, &w);
    else if (!status && module_forward(&in, 1, &out))
        status = cli_error("%s", mha_last_error());
    if (!status && !in.has_torch)
        w = in.m.weights;
    // one title per panel: rows are examples, columns heads (one panel,
    // the mean, with --average-attn-weights)
    size_t B = 0, h = in.m.cfg.num_heads, panels = 0;
    if (in.has_torch && in.torch.average_weights)
        h = 1;
    if (!status) {
        B = in.queries->shape[0];
        panels = B * h;
        titles = mha_malloc(panels, sizeof *titles, "mha heatmap");
        tp = mha_malloc(panels, sizeof *tp, "mha heatmap");
        if (!titles || !tp)
            status = cli_error("%s", mha_last_error());
    }
    if (!status) {
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < h; i++) {
                if (in.has_torch && in.torch.average_weights)
                    snprintf(titles[b * h + i], sizeof titles[0],
                             "example %zu, mean of %zu heads", b,
                             in.m.cfg.num_heads);
                else
                    snprintf(titles[b * h + i], sizeof titles[0],
                             "example %zu, head %zu", b, i);
                tp[b * h + i] = titles[b * h + i];
            }
        heatmap_options opt = {.titles = tp, .ntitles = panels};
        size_t n = 0;
        if (png)
            outs[n++] = (cli_output){.option = "--png", .path = png,
                                     .image = w, .heatmap = &opt,
                                     .format = HEATMAP_PNG};
        if (svg)
            outs[n++] = (cli_output){.option = "--svg", .path = svg,
                                     .image = w, .heatmap = &opt,
                                     .format = HEATMAP_SVG};
        status = cli_stage_outputs(outs, n, &staged);
        if (!status && terminal && heatmap_terminal(stdout, w, &opt))
            status = cli_error("--terminal: %s", mha_last_error());
    }
    // stdout complete first: a failed --terminal leaves no picture behind
    status = cli_finish_outputs(&staged, flush_stdout(status));
    free(titles);
    free(tp);
    tensor_free(out);
    if (in.has_torch)
        tensor_free(w);
    tensor_free(a);
    cli_inputs_free(&in);
    return status;
}

/* A command stopped by an exercise not written yet (a student's handout)
 * exits with its own status, MHA_EXIT_EXERCISE. */
static int exit_status(int status)
{
    return status && mha_unwritten_exercise() ? MHA_EXIT_EXERCISE : status;
}

int main(int argc, char **argv)
{
    // only forward and heatmap multiply matrices: they reserve OpenBLAS's
    // buffer themselves (blas_ready), so help, trace and quiz run under any
    // memory limit
    mha_program_init_lazy();
    /* A testing aid: MHA_DEBUG_FAIL_ALLOC_AFTER=k makes the library's
     * allocation after the next k fail (error.h), so tests/test_cli.c can
     * check that every one of them ends in one line and exit status 2. */
    const char *fail_after = getenv("MHA_DEBUG_FAIL_ALLOC_AFTER");
    if (fail_after && *fail_after)
        mha_debug_fail_alloc_after(strtol(fail_after, NULL, 10));
    if (argc < 2)
        return cli_error("missing command: trace, quiz, forward or heatmap "
                         "(see mha --help)");
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage_main, stdout);
        return flush_stdout(CLI_OK);
    }
    if (strcmp(cmd, "trace") == 0) {
        cli_set_command("mha trace");
        return exit_status(cmd_trace(argc - 2, argv + 2));
    }
    if (strcmp(cmd, "quiz") == 0) {
        cli_set_command("mha quiz");
        return exit_status(cmd_quiz(argc - 2, argv + 2));
    }
    if (strcmp(cmd, "forward") == 0) {
        cli_set_command("mha forward");
        return exit_status(cmd_forward(argc - 2, argv + 2));
    }
    if (strcmp(cmd, "heatmap") == 0) {
        cli_set_command("mha heatmap");
        return exit_status(cmd_heatmap(argc - 2, argv + 2));
    }
    return cli_error("unknown command '%s' (expected trace, quiz, forward "
                     "or heatmap; see mha --help)",
                     cmd);
}
//<
