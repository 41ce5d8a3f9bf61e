//> handout
//> 08
/* inputs.h: what `mha forward` and `mha heatmap` read, checked.
 *
 * Shapes (batch-first, PyTorch's weight layout):
 *   queries (B, Lq, Dq)   keys (B, Lk, Dk)   values (B, Lk, Dv)
 *   W_q (D, Dq)  W_k (D, Dk)  W_v (D, Dv)  W_o (D_out, D)
 *   b_q, b_k, b_v (D,)  b_o (D_out,)        each optional; a missing one is 0
 *   valid_lens (B,) or (B, Lq), whole numbers 0 .. Lk
 *   D = h * p: --heads h must divide D; with --rope, p must be even
 *   with --kv-heads G (G divides h; default h): W_k (G*p, Dk), W_v
 *   (G*p, Dv), b_k and b_v (G*p,): G key-value heads of p features
 *
 * keys default to the queries, and values to the queries (self-attention,
 * as d2l calls the module with X, X, X).  D and D_out are read off W_q and
 * W_o; everything else must agree with them, and each disagreement is one
 * line naming the option, its file and both shapes, e.g.
 *
 *   mha forward: --wk wk.npy has shape (8, 5) but the keys (2, 6, 7) have 7 features
 *
 * The multihead module is configured from these shapes and loaded with
 * the weights; nothing is computed yet.
 */
#ifndef MHA_CLI_INPUTS_H
#define MHA_CLI_INPUTS_H

#include "args.h"
#include "libmha.h"
//> 18
#include "torch.h"
//<

/* The options both subcommands take, for their tables: those of the
 * module of chapter 08, then each later chapter's (each list below starts
 * with a comma, and is empty before its chapter). */
#define CLI_INPUT_OPTIONS                                                     \
    {"--heads", 1, NULL}, {"--queries", 1, NULL}, {"--keys", 1, NULL},        \
    {"--values", 1, NULL}, {"--wq", 1, NULL}, {"--wk", 1, NULL},              \
    {"--wv", 1, NULL}, {"--wo", 1, NULL}, {"--bq", 1, NULL},                  \
    {"--bk", 1, NULL}, {"--bv", 1, NULL}, {"--bo", 1, NULL},                  \
    {"--valid-lens", 1, NULL}, {"--valid-lens-file", 1, NULL}              \
    CLI_ROPE_INPUT_OPTIONS CLI_CAUSAL_INPUT_OPTIONS CLI_KV_INPUT_OPTIONS      \
    CLI_WINDOW_INPUT_OPTIONS CLI_TORCH_INPUT_OPTIONS

//> 15
/* Rotary embeddings on Q and K (posenc.h): mha forward, heatmap and trace. */
#define CLI_ROPE_OPTIONS {"--rope", 0, NULL}, {"--rope-base", 1, NULL}
#define CLI_ROPE_INPUT_OPTIONS , CLI_ROPE_OPTIONS
//<
/*< 15
#define CLI_ROPE_INPUT_OPTIONS
*/
//> 16
#define CLI_CAUSAL_INPUT_OPTIONS , {"--causal", 0, NULL}
//<
/*< 16
#define CLI_CAUSAL_INPUT_OPTIONS
*/
//> 17
#define CLI_KV_INPUT_OPTIONS , {"--kv-heads", 1, NULL}
//<
/*< 17
#define CLI_KV_INPUT_OPTIONS
*/
//> 18
#define CLI_TORCH_INPUT_OPTIONS , CLI_TORCH_OPTIONS
//<
/*< 18
#define CLI_TORCH_INPUT_OPTIONS
*/

//> 19
/* Where attention may look (window.h): --window W, --keep-first K and
 * --alibi, for mha forward, heatmap and trace; forward and heatmap read
 * --sinks S.npy (h,), trace takes --sinks alone (shapes only). */
#define CLI_WINDOW_OPTIONS                                                    \
    {"--window", 1, NULL}, {"--keep-first", 1, NULL}, {"--alibi", 0, NULL}

/* What mha says to --window, --alibi or --sinks beside PyTorch's options,
 * which have masks of their own (torch.h). */
#define CLI_WINDOW_NOT_TORCH                                                  \
    "--window, --alibi and --sinks do not combine with PyTorch's options "    \
    "(--attn-mask and the others)"

/* --window, --keep-first and --alibi from opts (which must hold
 * CLI_WINDOW_OPTIONS) into *window, *keep (0 when absent) and *alibi.
 * CLI_USAGE after one line for a count that is not a whole number >= 1,
 * --keep-first without --window, or --alibi with neither causal nor
 * --window. */
int cli_window_options(cli_option *opts, size_t nopts, int causal,
                       size_t *window, size_t *keep, int *alibi);
/* --sinks S.npy read into *sinks (h,), one sink logit per head: CLI_OK,
 * or CLI_USAGE after one line (a file that cannot be read, or another
 * shape than (heads,)), *sinks NULL. */
int cli_read_sinks(const char *path, size_t heads, tensor **sinks);
/* Forward's and heatmap's share of them, --sinks with its file. */
#define CLI_WINDOW_INPUT_OPTIONS , CLI_WINDOW_OPTIONS, {"--sinks", 1, NULL}
//<
/*< 19
#define CLI_WINDOW_INPUT_OPTIONS
*/

typedef struct cli_inputs {
    tensor *queries;    /* (B, Lq, Dq) */
    tensor *keys;       /* (B, Lk, Dk): its own file, or the queries again */
    tensor *values;     /* (B, Lk, Dv): likewise */
    tensor *valid_lens; /* (B,) or (B, Lq), or NULL */
    multihead m;        /* configured and loaded */
    int has_m;          /* 1 once m needs multihead_free */
//> 18
    int has_torch;      /* 1: PyTorch's options (torch.h), read into torch */
    cli_torch torch;
//<
} cli_inputs;

//> 15
/* --rope and --rope-base from opts (which must hold CLI_ROPE_OPTIONS):
 * *rope 1 when --rope is given, *base the number after --rope-base (0,
 * the module's default 10000, when absent).  CLI_USAGE after one line for
 * --rope-base without --rope or one that is not a finite number > 1. */
int cli_rope_options(cli_option *opts, size_t nopts, int *rope, double *base);
//<

//> 17
/* --kv-heads, the key-value heads G, into *kv_heads: heads when the
 * option is absent.  CLI_USAGE after one line when it is not a whole
 * number >= 1 or does not divide heads (mha forward, heatmap and trace). */
int cli_kv_heads_option(const cli_option *kv, size_t heads, size_t *kv_heads);
//<

/* The input options present and well formed (no file is opened): run
 * this first, so a usage mistake is reported before any work.  --kv-heads
 * must be a whole number >= 1 that divides --heads. */
int cli_inputs_check_options(cli_option *opts, size_t nopts);

/* The memory a forward pass of these inputs needs, estimated from the
 * .npy headers alone (no data is read): the inputs, the weights twice
 * (a margin: the module shares them, but PyTorch's packed weights are
 * split into copies), the projections Q (B, Lq, D), K and V (B, Lk,
 * G*D/h) and the joined heads, the (B, h, Lq, Lk) attention weights when
 * keep_weights, the output; with PyTorch's options (torch.h) the merged
 * mask, the scores and A too, each (B*h, Lq, Lk + 2) at most.  When it is
 * more than the machine's physical memory (or the environment variable
 * MHA_MEMORY_LIMIT, in bytes, when set; 0 or anything but digits is
 * refused), one line giving the estimate in bytes and in the largest unit
 * it reaches (mha_bytes_text), and hint, and CLI_USAGE:
 *
 *   mha forward: the run needs about 7450.58 GiB of memory (8000000000000 bytes) but the machine has 15.52 GiB; drop --attention-out, or use mha trace for shapes alone
 *
 * Headers that cannot be read or shapes that do not fit are left to
 * cli_inputs_load, which says what is wrong: CLI_OK. */
int cli_inputs_check_memory(cli_option *opts, size_t nopts, int keep_weights,
                            const char *hint);

/* Read every input file, check all shapes, build the module.  CLI_OK or
 * CLI_USAGE (after printing one line); in is then ready for
 * cli_inputs_free either way. */
int cli_inputs_load(cli_option *opts, size_t nopts, cli_inputs *in);

void cli_inputs_free(cli_inputs *in);

#endif
//<
//<
