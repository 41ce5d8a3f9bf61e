//> handout
//> 08
/* cmd_forward.c: mha forward and mha heatmap, the module on .npy files
 * (the program: mha.c). */
#define _GNU_SOURCE /* sync_file_range */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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

static const char usage_forward[] =
    "usage: mha forward --heads h --queries Q.npy [--keys K.npy] [--values V.npy]\n"
    "                   --wq WQ.npy --wk WK.npy --wv WV.npy --wo WO.npy\n"
    "                   [--bq B.npy] [--bk B.npy] [--bv B.npy] [--bo B.npy]\n"
    "                   [--valid-lens 3,2 | --valid-lens-file VL.npy]\n"
    "                   --out OUT.npy [--attention-out A.npy] [--trace]\n"
//> 15
    "                   [--rope [--rope-base B]]\n"
//<
//> 16
    "                   [--causal]\n"
//<
//> 17
    "                   [--kv-heads G]\n"
//<
//> 19
    "                   [--window W [--keep-first K]] [--alibi] [--sinks S.npy]\n"
//<
//> 18
    "                   [PyTorch's options, below]\n"
//<
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
/*< 16
    "      as in d2l.  A key a query does not see gets weight exactly 0\n"
    "      whatever the scores: the softmax runs over the visible keys only\n"
    "      (no -1e6 fill)\n"
*/
//> 16
    "      as in d2l.  A key a query does not see (here or with --causal)\n"
    "      gets weight exactly 0 whatever the scores: the softmax runs over\n"
    "      the visible keys only (no -1e6 fill)\n"
//<
//> 17
    "  --kv-heads G: G key-value heads (grouped-query attention; G = 1 is\n"
    "      multi-query): G divides h, W_k is (G*D/h, Dk), W_v (G*D/h, Dv),\n"
    "      b_k and b_v (G*D/h,), and the query heads share them in order,\n"
    "      h/G consecutive heads to each key-value head.  Default G = h:\n"
    "      every head its own keys and values\n"
//<
//> 16
    "  --causal: query i sees key j only when j <= i + Lk - Lq (the queries\n"
    "      are the last Lq positions, as when decoding with a cache; with\n"
    "      Lq = Lk the usual causal mask); with valid_lens, the smaller of\n"
    "      the two.  A query left with no key (Lq > Lk, or a valid length\n"
    "      of 0) is refused before any work: uniform weights would let it\n"
    "      see the future\n"
//<
//> 15
    "  --rope  rotary embeddings (RoPE, interleaved pairs as in llama2.c):\n"
    "      each head's features 2k, 2k+1 of Q and K turned by the angle\n"
    "      position * B^(-2k/p), keys at positions 0 .. Lk-1 and queries at\n"
    "      Lk-Lq .. Lk-1; p = D/h must be even.  --rope-base B: a finite\n"
    "      number > 1 (default 10000)\n"
//<
//> 19
    "  --window --keep-first --alibi --sinks: chapter 19\n"
//<
//> 18
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
    "      every weight option; each member's CRC-32 and size checked, one\n"
    "      listed twice or larger than the memory refused\n"
    "  A row with every key hidden (a valid length of 0 too) is refused\n"
    "  before any work; nn.MultiheadAttention gives NaN there\n"
//<
    "\n"
    "Writes OUT (B, Lq, D_out) and, with --attention-out, every head's\n"
    "weights A (B, h, Lq, Lk) as float64 .npy: both or neither, put in\n"
    "place only once stdout is written.  --trace prints the shape trace on\n"
    "stdout.  Refused before any work: an output that is a directory, FIFO,\n"
    "socket, device, symbolic link or write-protected file; two names\n"
    "(./x, links) for one file among the outputs and inputs; a run needing\n"
    "more memory than the machine has (or than MHA_MEMORY_LIMIT bytes, when\n"
    "set).  A result that overflows (NaN or inf from finite input) is\n"
    "refused too.\n"
    "\n"
    "Stopped by a signal (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE: a\n"
    "closed pipe, SIGALRM, SIGXCPU, SIGUSR1 ...: any that ends a program\n"
    "but a fault's), mha removes its temporary files and ends by that\n"
    "signal, exit status 128 + its number (130 for SIGINT, 143 for\n"
    "SIGTERM), every file as it was.  One that comes while the finished\n"
    "outputs are renamed into place waits until all are: every output is\n"
    "then new, no temporary left, and mha ends by it all the same.  Beyond\n"
    "the file size limit (ulimit -f) a write fails: one line, exit status\n"
    "2, every file as it was.\n";

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
//> 18
    "With --average-attn-weights, one panel per example: the mean of the\n"
    "heads.  "
//<
    "Give at least one; see `mha forward --help` for the inputs and for\n"
    "what is refused before any work.  Stopped by a signal, mha ends\n"
    "gnuplot, removes its temporary files and its scratch directory, and\n"
    "ends by that signal, as `mha forward --help` says: every file as it\n"
    "was, or, when the signal comes while the pictures are renamed into\n"
    "place, every picture new.\n";

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
//> 18
    CLI_TORCH_FILES,
//<
};

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

/* The start both commands share: argv into opts (CLI_INPUT_OPTIONS and
 * the command's own), the options checked before any file is opened
 * (torch_weights: 1 when PyTorch's options may ask for A, as
 * cli_torch_check_options takes it).  CLI_OK, CLI_HELP (--help), or
 * CLI_USAGE after one line. */
static int parse_options(int argc, char **argv, cli_option *opts,
                         size_t nopts, int torch_weights)
{
    int status = cli_parse(argc, argv, opts, nopts);
    if (status || (status = cli_inputs_check_options(opts, nopts)))
        return status;
//> 18
    return cli_torch_check_options(opts, nopts, torch_weights);
//<
/*< 18
    (void)torch_weights;
    return CLI_OK;
*/
}

/* The checks both commands make once the outputs are named, before any
 * input is read: the paths (check_paths), the memory the run needs
 * (keep_weights and hint as cli_inputs_check_memory takes them), and
 * OpenBLAS's buffer; then the inputs loaded into *in.  CLI_OK; CLI_USAGE
 * after one line, with *in ready for cli_inputs_free either way. */
static int load_inputs(cli_option *opts, size_t nopts, const cli_path *outs,
                       size_t nout, int keep_weights, const char *hint,
                       cli_inputs *in)
{
    memset(in, 0, sizeof *in);
    int status = check_paths(opts, nopts, outs, nout);
    if (status ||
        (status = cli_inputs_check_memory(opts, nopts, keep_weights, hint)) ||
        (status = blas_ready()))
        return status;
    return cli_inputs_load(opts, nopts, in);
}

/* The module on the loaded inputs: the fast path, with no copies of the
 * heads, making the weights (B, h, Lq, Lk) only when asked for (weights
 * not NULL), so that memory stays linear in the lengths.  A student's
 * copy has no fast path: there it is the lesson's multihead_forward. */
static int module_forward(cli_inputs *in, tensor **out, tensor **weights)
{
/*< full
    return multihead_forward(&in->m, in->queries, in->keys, in->values,
                             in->valid_lens, out, weights);
*/
//> full
    return multihead_forward_fast(&in->m, in->queries, in->keys, in->values,
                                  in->valid_lens, NULL, out, weights);
//<
}

//> full
/* --out written while the module makes it: each chunk of examples the
 * fast path hands over goes to the staged file at once (output.h), so
 * the whole output never sits in memory beside the file's pages.  A
 * write that fails stops the writing, not the pass: a refusal of the
 * module's comes first, as when the file is written after it. */
typedef struct out_stream {
    FILE *f;
    int failed;       /* a write failed; the line to print: */
    char why[512];
} out_stream;

static void stream_failed(out_stream *s)
{
    s->failed = 1;
    snprintf(s->why, sizeof s->why, "%s", mha_last_error());
}

static int write_part(void *ctx, const tensor *part)
{
    out_stream *s = ctx;
    if (!s->failed && npy_write_part(s->f, part))
        stream_failed(s);
    // the disk may start on this part while the next is made, so that the
    // flush to disk before the rename has less left to wait for
    if (!s->failed)
        (void)sync_file_range(fileno(s->f), 0, 0, SYNC_FILE_RANGE_WRITE);
    return GSL_SUCCESS;
}
//<

/* The module on the loaded inputs with --out written as it is made: *o
 * staged into *staged when its temporary can be made (*streamed 1; CLI_OK
 * or CLI_USAGE after one line), else nothing done (*streamed 0), for the
 * usual way.  A student's copy has no fast path: there it is always the
 * usual way. */
static int forward_streamed(cli_inputs *in, const cli_output *o,
                            cli_staged *staged, int *streamed)
{
    *streamed = 0;
/*< full
    (void)in;
    (void)o;
    (void)staged;
    return CLI_OK;
*/
//> full
    out_stream s = {.failed = 0};
    if (cli_stage_stream(o, staged, &s.f))
        return CLI_OK;
    *streamed = 1;
    const size_t shape[] = {in->queries->shape[0], in->queries->shape[1],
                            in->m.W_o.out_features};
    if (npy_write_preamble(s.f, 3, shape))
        stream_failed(&s);
    const multihead_fast_options opt = {.sink = write_part, .sink_ctx = &s};
    tensor *out = NULL;
    if (multihead_forward_fast(&in->m, in->queries, in->keys, in->values,
                               in->valid_lens, &opt, &out, NULL))
        return cli_error("%s", mha_last_error());
    return s.failed ? cli_error("%s %s: %s", o->option, o->path, s.why)
                    : CLI_OK;
//<
}

int cmd_forward(int argc, char **argv)
{
    cli_option opts[] = {CLI_INPUT_OPTIONS,
                         {"--out", 1, NULL},
                         {"--attention-out", 1, NULL},
                         {"--trace", 0, NULL}};
    int status = parse_options(argc, argv, opts, NOPTS(opts), 1);
    if (status)
        return status == CLI_HELP ? cli_print_usage(usage_forward) : status;
    const char *out_path = cli_find(opts, NOPTS(opts), "--out")->value;
    const char *a_path = cli_find(opts, NOPTS(opts), "--attention-out")->value;
    int trace = cli_find(opts, NOPTS(opts), "--trace")->value != NULL;
    if (!out_path)
        return cli_error("--out is required (see mha forward --help)");
    const cli_path outs_named[] = {{"--out", out_path},
                                   {"--attention-out", a_path}};
    cli_inputs in;
    status = load_inputs(
        opts, NOPTS(opts), outs_named, 2, a_path != NULL,
        a_path ? "drop --attention-out, or use mha trace for shapes alone"
               : "use mha trace for shapes alone",
        &in);
    tensor *out = NULL, *a = NULL; // (B, Lq, D_out); A (B, h, Lq, Lk)
    cli_output outs[2] = {
        {.option = "--out", .path = out_path},
        {.option = "--attention-out", .path = a_path},
    };
    cli_staged staged = {0};
    int streamed = 0; // --out written as it was made
    if (!status) {
        if (trace)
            trace_to(stdout);
        int torch = 0; // PyTorch's options: its forward pass
//> 18
        torch = in.has_torch;
        if (torch)
            status = cli_torch_forward(&in.m, in.queries, in.keys, in.values,
                                       in.valid_lens, &in.torch, &out,
                                       a_path ? &a : NULL);
//<
        if (!torch && !a_path)
            status = forward_streamed(&in, &outs[0], &staged, &streamed);
        if (!status && !torch && !streamed &&
            module_forward(&in, &out, a_path ? &a : NULL))
            status = cli_error("%s", mha_last_error());
        trace_to(NULL);
    }
    outs[0].npy = out;
    outs[1].npy = a;
    if (!status && !streamed)
        status = cli_stage_outputs(outs, a_path ? 2 : 1, &staged);
    // stdout complete first: a failed trace leaves no file behind
    status = cli_finish_outputs(&staged, cli_flush_stdout(status));
    tensor_free(out);
    tensor_free(a);
    cli_inputs_free(&in);
    return status;
}

int cmd_heatmap(int argc, char **argv)
{
    cli_option opts[] = {CLI_INPUT_OPTIONS,
                         {"--png", 1, NULL},
                         {"--svg", 1, NULL},
                         {"--terminal", 0, NULL}};
    int status = parse_options(argc, argv, opts, NOPTS(opts), 0);
    if (status)
        return status == CLI_HELP ? cli_print_usage(usage_heatmap) : status;
    const char *png = cli_find(opts, NOPTS(opts), "--png")->value;
    const char *svg = cli_find(opts, NOPTS(opts), "--svg")->value;
    int terminal = cli_find(opts, NOPTS(opts), "--terminal")->value != NULL;
    if (!png && !svg && !terminal)
        return cli_error("nothing to draw: give --png F, --svg F or --terminal");
    const cli_path outs_named[] = {{"--png", png}, {"--svg", svg}};
    cli_inputs in;
    status = load_inputs(opts, NOPTS(opts), outs_named, 2, 1,
                         "the heatmap needs every weight: use shorter "
                         "sequences, or mha trace for shapes alone",
                         &in);
    tensor *out = NULL;
    char (*titles)[64] = NULL; // "example b, head i", panel by panel
    const char **tp = NULL;
    cli_output outs[2];
    cli_staged staged = {0};
    tensor *a = NULL, *w = NULL; // PyTorch's options: A, and A as panels
    int torch = 0, mean = 0; // PyTorch's options; the mean of the heads
//> 18
    torch = !status && in.has_torch;
    mean = torch && in.torch.average_weights;
    if (torch)
        status = cli_torch_heatmap_weights(&in.m, in.queries, in.keys,
                                           in.values, in.valid_lens,
                                           &in.torch, &out, &a, &w);
//<
    if (!status && !torch && module_forward(&in, &out, &w))
        status = cli_error("%s", mha_last_error());
    // one title per panel: rows are examples, columns heads (one panel,
    // the mean, with --average-attn-weights)
    size_t B = 0, h = in.m.cfg.num_heads, panels = 0;
    if (mean)
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
                if (mean)
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
    status = cli_finish_outputs(&staged, cli_flush_stdout(status));
    free(titles);
    free(tp);
    tensor_free(out);
    tensor_free(w);
    tensor_free(a);
    cli_inputs_free(&in);
    return status;
}
//<
//<
