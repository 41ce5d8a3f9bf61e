//> full
/* mha.c: the mha program, multi-head attention from the command line.
 *
 *   mha trace    the module's whole shape trace, run on shapes alone
 *                (--quiz: each step asked as mha quiz asks it, the
 *                answers at the end; --json: JSON lines; --dot: a
 *                Graphviz dataflow)
 *   mha quiz     a small case drawn from a seed, asked step by step (the
 *                shape each step makes, view or copy, the repeated
 *                valid_lens); answers from stdin or a file, then a score
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
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    "                 [--quiz | --json | --dot]\n"
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
    "  --attn-mask 2d|3d, --key-padding-mask, --add-bias-kv, --add-zero-attn,\n"
    "  --average-attn-weights  PyTorch's options (see mha forward --help):\n"
    "                   the mask merge, Lk growing by one for each added key\n"
    "  --quiz           a worksheet: each step as mha quiz asks it (its\n"
    "                   shape; view or copy), then the answers\n"
    "  --json           the trace as JSON lines, one object per step, and\n"
    "                   nothing else\n"
    "  --dot            the module's dataflow graph in Graphviz's language,\n"
    "                   and nothing else: mha trace --dot | dot -Tsvg > g.svg\n"
    "\n"
    "--quiz, --json and --dot exclude each other.  Queries, keys and values\n"
    "have D features each, as in d2l's example.\n";

static const char usage_quiz[] =
    "usage: mha quiz [--seed S] [--answers FILE | --solution | --json] [--review]\n"
    "\n"
    "Pick a small case by the seed S (batch, queries, keys, hiddens,\n"
    "heads, valid_lens) and ask about the module's forward pass, step by\n"
    "step: the shape each step makes; for a reshape or permute, whether it\n"
    "is a view or a copy; and the values repeat_interleave makes of\n"
    "valid_lens.  Answers are read from stdin, one a line, each marked\n"
    "right or wrong with the right answer; the last line is score: K/N.\n"
    "Without --seed, a seed is drawn from the clock and shown.  Every digit\n"
    "of a seed counts, and each of the 25440 cases is as likely: two seeds\n"
    "ask the same case only by chance, 1 in 25440.\n"
    "\n"
    "  --seed S         the case: a whole number from 0 to\n"
    "                   999999999999999999 (the same S, the same case)\n"
    "  --answers FILE   grade FILE instead: one answer per line, in order;\n"
    "                   blank lines and # comments are skipped.  Prints each\n"
    "                   wrong answer with the right one, then score: K/N.\n"
    "                   FILE is a regular file of text: a FIFO, a device or\n"
    "                   a control character in it (a NUL, an escape; not a\n"
    "                   tab, nor a carriage return at a line's end) is\n"
    "                   refused.  To answer through a pipe, leave out\n"
    "                   --answers: the answers are read from stdin\n"
    "  --solution       print the answers in the form --answers reads\n"
    "  --json           print the case's trace records as JSON lines\n"
    "  --review         after the score, print the whole trace\n"
    "\n"
    "An answer is a shape as a Python tuple, (2, 4, 100) or (8,); a kind,\n"
    "view or copy; or values as a list, [3, 3, 2, 2].  Exit status: 0 when\n"
    "every answer is right, 1 when some are wrong, 2 on bad input (one line\n"
    "on stderr).\n";

static const char usage_forward[] =
    "usage: mha forward --heads h --queries Q.npy [--keys K.npy] [--values V.npy]\n"
    "                   --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy\n"
    "                   [--bq B.npy] [--bk B.npy] [--bv B.npy] [--bo B.npy]\n"
    "                   [--valid-lens 3,2 | --valid-lens-file VL.npy]\n"
    "                   [--kv-heads G] [--causal]\n"
    "                   --out OUT.npy [--attention-out A.npy] [--trace]\n"
    "                   [--rope [--rope-base B]]\n"
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
    SHOW_QUIZ, /* the text trace with its output shapes blank, answers after */
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
    if (ts->causal)
        fprintf(f, "causal, ");
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

/* `mha trace --quiz`: the trace's steps as mha quiz asks them, every
 * question numbered, then the answers (below, with the quiz). */
static int quiz_worksheet(const trace_log *log);

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
    int logging = show == SHOW_QUIZ || show == SHOW_DOT, logged = 0;
    if (!status) {
        if (show == SHOW_QUIZ)
            fprintf(hold, "Answer each numbered question: the shape a step "
                          "makes, as (2, 4, 100),\nand for a reshape or "
                          "permute, view or copy.  The answers follow the "
                          "steps.\n\n");
        if (show == SHOW_TEXT || show == SHOW_QUIZ) {
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
    if (!status && show == SHOW_QUIZ)
        status = quiz_worksheet(&log);
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
                         {"--causal", 0, NULL},  CLI_ROPE_OPTIONS,
                         CLI_TORCH_TRACE_OPTIONS};
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
    if (causal && Lq > Lk)
        return cli_error("--causal with --queries %zu > --kv %zu: query 0 "
                         "would see no key (query i sees key j only when "
                         "j <= i + Lk - Lq)",
                         Lq, Lk);
    for (size_t b = 0; causal && vl->value && b < B; b++)
        if (lens[b] == 0)
            return cli_error("--causal with --valid-lens '%s': entry %zu is 0, "
                             "so its queries would see no key",
                             vl->value, b + 1);
    if (too_large("the queries", 3, (size_t[]){B, Lq, D}) ||
        too_large("the keys", 3, (size_t[]){B, Lk, D}) ||
        too_large("the attention weights", 4, (size_t[]){B, h, Lq, Lk}))
        return CLI_USAGE;
    trace_case shape = {B, Lq, Lk, D, h, G, causal, rope,
                        rope_base ? rope_base : ROPE_DEFAULT_BASE, 0, {0}};
    if (cli_torch_trace_options(opts, NOPTS(opts), B, h, Lq, Lk, G * (D / h),
                                &shape.torch, &shape.masks)) {
        cli_torch_free(&shape.masks);
        return CLI_USAGE;
    }
    status = run_trace(&shape, vl->value ? lens : NULL, show);
    cli_torch_free(&shape.masks);
    return flush_stdout(status);
}

/* --- mha quiz ------------------------------------------------------- */

static const char *const form_name[] = {"its shape", "view or copy",
                                        "its values"};

/* Why an answer is what it is, in one line. */
static void reason(const quiz_question *q, const trace_record *r, char *buf,
                   size_t n)
{
    char sym[TRACE_SHAPE_MAX];
    switch (q->form) {
    case QUIZ_SHAPE:
        trace_sym_str(&r->output, sym, sizeof sym);
        snprintf(buf, n, "%s%s%s", q->answer, sym[0] ? ", that is " : "", sym);
        break;
    case QUIZ_KIND:
        snprintf(buf, n, "%s: %s", q->answer,
                 r->kind == TRACE_VIEW
                     ? "only the shape and strides change, no number moves"
                     : "the numbers are written to a new buffer");
        break;
    case QUIZ_LENS:
        snprintf(buf, n, "%s: each example's length once per head, in order "
                         "(repeat_interleave, not tile)",
                 q->answer);
        break;
    }
}

/* A line's answer: the text before any #, trimmed; "" for none. */
static char *cut_comment(char *line)
{
    char *hash = strchr(line, '#');
    if (hash)
        *hash = '\0';
    while (*line == ' ' || *line == '\t')
        line++;
    size_t len = strlen(line);
    while (len > 0 && strchr(" \t\r\n", line[len - 1]))
        line[--len] = '\0';
    return line;
}

static void print_review(const trace_log *log)
{
    char line[2048];
    printf("\nThe whole trace:\n");
    for (size_t i = 0; i < log->count; i++)
        printf("%s\n", trace_format_text(&log->records[i], line, sizeof line));
}

/* The answer file's answers, checked for form only: CLI_OK with *got
 * (count of them == n) in canonical form.  The file is text: a control
 * character in it (a NUL, an escape ...) is refused, since the answer
 * before it would otherwise be read as the whole line. */
static int read_answers(const char *path, size_t n, unsigned long long seed,
                        char (*got)[TRACE_SHAPE_MAX], quiz_form *forms)
{
    FILE *f;
    if (cli_open_input("--answers", path, &f))
        return CLI_USAGE;
    char *line = NULL, shown[4 * TRACE_SHAPE_MAX];
    size_t cap = 0, k = 0, lineno = 0;
    ssize_t len;
    int status = CLI_OK;
    while (!status && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t bad = quiz_bad_byte(line, (size_t)len);
        if (bad < (size_t)len) {
            status = cli_error("--answers '%s' line %zu, byte %zu: %s is a "
                               "control character, not text",
                               path, lineno, bad + 1,
                               quiz_escape(line + bad, 1, shown, sizeof shown));
            continue;
        }
        char *a = cut_comment(line);
        if (!*a)
            continue;
        if (k == n)
            status = cli_error("--answers '%s' has more than the %zu answers "
                               "the quiz for --seed %llu asks (line %zu)",
                               path, n, seed, lineno);
        else if (quiz_parse(a, &forms[k], got[k], TRACE_SHAPE_MAX))
            status = cli_error("--answers '%s' line %zu: '%s' is not an "
                               "answer (a shape like (2, 4, 100), view or "
                               "copy, or values like [3, 3, 2, 2])",
                               path, lineno,
                               quiz_escape(a, strlen(a), shown, sizeof shown));
        else
            k++;
    }
    if (!status && ferror(f))
        status = cli_error("cannot read --answers '%s': %s", path,
                           strerror(errno));
    if (!status && k < n)
        status = cli_error("--answers '%s' has %zu answer%s; the quiz for "
                           "--seed %llu asks %zu",
                           path, k, k == 1 ? "" : "s", seed, n);
    free(line);
    fclose(f);
    return status;
}

static int quiz_grade_file(const char *path, const quiz_case *c,
                           const trace_log *log, const quiz_question *qs,
                           size_t n, int review)
{
    char (*got)[TRACE_SHAPE_MAX] = mha_malloc(n, sizeof *got, "mha quiz");
    quiz_form *forms = mha_malloc(n, sizeof *forms, "mha quiz");
    int status = !got || !forms ? cli_error("%s", mha_last_error()) : CLI_OK;
    if (!status)
        status = read_answers(path, n, c->seed, got, forms);
    if (!status) {
        size_t right = 0;
        for (size_t i = 0; i < n; i++) {
            if (forms[i] == qs[i].form && !strcmp(got[i], qs[i].answer)) {
                right++;
                continue;
            }
            printf("question %zu (step %zu, %s, %s): answered %s, right "
                   "answer %s\n",
                   i + 1, qs[i].step, log->records[qs[i].record].op,
                   form_name[qs[i].form], got[i], qs[i].answer);
        }
        printf("score: %zu/%zu\n", right, n);
        if (review)
            print_review(log);
        status = right == n ? 0 : 1;
    }
    free(got);
    free(forms);
    return status;
}

/* The questions one by one on stdout, the answers from stdin. */
/* The steps of log as the quiz shows them, each question under its step:
 * with ask, each answered from stdin and marked (*right counts the right
 * ones); without, each only printed with its number, for a worksheet. */
static int quiz_walk(const trace_log *log, const quiz_question *qs, size_t n,
                     int ask, size_t *right)
{
    int echo = !isatty(STDIN_FILENO); // a piped answer shows in the transcript
    unsigned long *ids = mha_malloc(log->count + 1, sizeof *ids, "mha quiz");
    if (!ids)
        return cli_error("%s", mha_last_error());
    char *line = NULL, shown[2048], why[3 * TRACE_SHAPE_MAX], canon[TRACE_SHAPE_MAX];
    char typed[2048]; // an answer as the student sent it, escaped
    size_t cap = 0, steps = 0, next = 0;
    int status = CLI_OK;
    for (size_t i = 0; i < log->count && !status; i++) {
        const trace_record *r = &log->records[i];
        int indent = 2 * r->depth;
        quiz_show(r, ids, steps, shown, sizeof shown);
        if (next == n || qs[next].record != i) {
            if (r->kind != TRACE_NOTE)
                printf("%*s%s:\n", indent, "", shown);
            continue;
        }
        printf("%*sstep %zu: %s\n", indent, "", qs[next].step, shown);
        ids[steps++] = r->output.id;
        for (; next < n && qs[next].record == i && !status; next++) {
            const quiz_question *q = &qs[next];
            if (!ask) {
                printf("%*s  %zu. %s?\n", indent, "", next + 1,
                       form_name[q->form]);
                continue;
            }
            for (;;) {
                printf("%*s  %zu. %s? ", indent, "", next + 1,
                       form_name[q->form]);
                fflush(stdout);
                errno = 0;
                ssize_t len = getline(&line, &cap, stdin);
                if (len < 0) {
                    printf("\n");
                    status = ferror(stdin)
                                 ? cli_error("cannot read stdin after %zu of "
                                             "%zu answers: %s",
                                             next, n, strerror(errno))
                                 : cli_error("stdin ended after %zu of %zu "
                                             "answers",
                                             next, n);
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
                           indent, "", quiz_escape(line + bad, 1, typed, sizeof typed));
                    continue;
                }
                char *a = cut_comment(line);
                quiz_form form;
                if (echo)
                    printf("%s\n", quiz_escape(a, strlen(a), typed, sizeof typed));
                if (*a && !quiz_parse(a, &form, canon, sizeof canon)) {
                    int ok = form == q->form && !strcmp(canon, q->answer);
                    *right += ok;
                    reason(q, r, why, sizeof why);
                    if (ok)
                        printf("%*s     right\n", indent, "");
                    else
                        printf("%*s     wrong: %s\n", indent, "", why);
                    break;
                }
                printf("%*s     not an answer: give a shape like (2, 4, 100), "
                       "view or copy, or values like [3, 3, 2, 2]\n",
                       indent, "");
            }
        }
    }
    free(line);
    free(ids);
    return status;
}

static int quiz_ask(const quiz_case *c, const trace_log *log,
                    const quiz_question *qs, size_t n, int review)
{
    // a directory opens as stdin but reads as nothing: say so, before
    // any question
    struct stat st;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_error("stdin is a directory: give the answers on stdin, "
                         "one a line, or grade a file with --answers FILE");
    printf("mha quiz --seed %llu: ", c->seed);
    quiz_describe(stdout, c);
    printf("\n%zu questions on the module's forward pass, step by step: the "
           "shape each step makes,\nas (2, 4, 100); view or copy; the values "
           "repeat_interleave makes, as [3, 3, 2, 2].\n\n",
           n);
    size_t right = 0;
    int status = quiz_walk(log, qs, n, 1, &right);
    if (!status) {
        printf("\nscore: %zu/%zu\n", right, n);
        if (review)
            print_review(log);
        status = right == n ? 0 : 1;
    }
    return status;
}

static int quiz_worksheet(const trace_log *log)
{
    quiz_question *qs = NULL;
    size_t n = 0;
    if (quiz_questions(NULL, log, &qs, &n))
        return cli_error("%s", mha_last_error());
    int status = quiz_walk(log, qs, n, 0, NULL);
    if (!status) {
        char why[3 * TRACE_SHAPE_MAX];
        printf("\nAnswers:\n");
        for (size_t i = 0; i < n; i++) {
            reason(&qs[i], &log->records[qs[i].record], why, sizeof why);
            printf("%3zu. %s\n", i + 1, why);
        }
    }
    free(qs);
    return status;
}

static void quiz_solution(const quiz_case *c, const trace_log *log,
                          const quiz_question *qs, size_t n)
{
    printf("# mha quiz --seed %llu: ", c->seed);
    quiz_describe(stdout, c);
    printf("\n");
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || qs[i].step != qs[i - 1].step)
            printf("# step %zu: %s\n", qs[i].step, log->records[qs[i].record].op);
        printf("%s\n", qs[i].answer);
    }
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
    cli_option opts[] = {{"--seed", 1, NULL},     {"--answers", 1, NULL},
                         {"--solution", 0, NULL}, {"--json", 0, NULL},
                         {"--review", 0, NULL}};
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        fputs(usage_quiz, stdout);
        return flush_stdout(CLI_OK);
    }
    if (status)
        return status;
    const cli_option *mode; // --answers, --solution, --json: one, or none
    if (cli_at_most_one(&opts[1], 3, &mode))
        return CLI_USAGE;
    int review = opts[4].value != NULL;
    if (review && mode && mode != &opts[1])
        return cli_error("--review goes with grading, not with %s", mode->name);
    unsigned long long seed = 0;
    if (opts[0].value) {
        if (parse_seed(opts[0].value, &seed))
            return CLI_USAGE;
    } else if (mode) {
        return cli_error("%s needs --seed S: its answers are those of one case",
                         mode->name);
    } else {
        seed = (unsigned long long)time(NULL) % 100000;
    }

    quiz_case c;
    trace_log log = {0};
    quiz_question *qs = NULL;
    size_t n = 0;
    quiz_draw(seed, &c);
    if (quiz_trace(&c, &log) || quiz_questions(&c, &log, &qs, &n))
        status = cli_error("%s", mha_last_error());
    else if (mode == &opts[3])
        for (size_t i = 0; i < log.count; i++) {
            trace_print_json(stdout, &log.records[i]);
            printf("\n");
        }
    else if (mode == &opts[2])
        quiz_solution(&c, &log, qs, n);
    else if (mode == &opts[1])
        status = quiz_grade_file(opts[1].value, &c, &log, qs, n, review);
    else
        status = quiz_ask(&c, &log, qs, n, review);
    free(qs);
    trace_log_free(&log);
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
    "--bq", "--bk", "--bv", "--bo", "--valid-lens-file", CLI_TORCH_FILES};

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
        /* the fast path: no copies of the heads; the weights are kept
         * only when asked for, so memory stays linear in the lengths */
        multihead_fast_options fast = {.keep_weights = a_path != NULL};
        if (in.has_torch)
            status = cli_torch_forward(&in.m, in.queries, in.keys, in.values,
                                       in.valid_lens, &in.torch, &out,
                                       a_path ? &a : NULL);
        else if (multihead_forward_fast(&in.m, in.queries, in.keys, in.values,
                                        in.valid_lens, &fast, &out))
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
    multihead_fast_options fast = {.keep_weights = 1};
    tensor *a = NULL, *w = NULL; // PyTorch's options: A, and A as panels
    if (!status && in.has_torch)
        status = cli_torch_heatmap_weights(&in.m, in.queries, in.keys,
                                           in.values, in.valid_lens,
                                           &in.torch, &out, &a, &w);
    else if (!status && multihead_forward_fast(&in.m, in.queries, in.keys,
                                               in.values, in.valid_lens, &fast,
                                               &out))
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
