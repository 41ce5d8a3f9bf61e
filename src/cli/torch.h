//> handout
//> 18
/* torch.h: PyTorch's nn.MultiheadAttention options on `mha forward` and
 * `mha heatmap`, with PyTorch's meanings and shapes (E = D = h*p):
 *
 *   --attn-mask M.npy         (Lq, Lk) or (B*h, Lq, Lk); bool: True = may
 *                             not attend; float: added to the scaled scores
 *   --key-padding-mask P.npy  (B, Lk); bool: True = ignore that key; float:
 *                             added
 *   --in-proj-weight W.npy    (3E, E): W_q, W_k, W_v stacked, as a
 *                             state_dict stores them; instead of --wq/--wk/--wv
 *   --in-proj-bias b.npy      (3E,): b_q, b_k, b_v stacked
 *   --bias-k BK.npy --bias-v BV.npy   (1, 1, E) each: add_bias_kv
 *   --add-zero-attn           a zero key and value per head
 *   --average-attn-weights    A is (B, Lq, Lk'), the mean over heads
 *   --state-dict model.npz    np.savez(**module.state_dict()) read by
 *                             libzip: in_proj_weight or q_proj_weight,
 *                             k_proj_weight, v_proj_weight; in_proj_bias;
 *                             out_proj.weight, out_proj.bias; bias_k, bias_v
 *
 * With any of them the module runs as multihead_forward_masked (mask.h):
 * every mask merged into one, Lk' = Lk + 1 with add_bias_kv and + 1 more
 * with add_zero_attn.  The combinations without a meaning are refused by
 * cli_torch_check_options, each in one line, before any file is read.
 */
#ifndef MHA_CLI_TORCH_H
#define MHA_CLI_TORCH_H

#include <stdio.h>

#include "args.h"
#include "libmha.h"

#define CLI_TORCH_OPTIONS                                                     \
    {"--attn-mask", 1, NULL}, {"--key-padding-mask", 1, NULL},                \
    {"--in-proj-weight", 1, NULL}, {"--in-proj-bias", 1, NULL},               \
    {"--bias-k", 1, NULL}, {"--bias-v", 1, NULL},                             \
    {"--add-zero-attn", 0, NULL}, {"--average-attn-weights", 0, NULL},        \
    {"--state-dict", 1, NULL}

/* The files among them, for the check that no output names an input. */
#define CLI_TORCH_FILES                                                       \
    "--attn-mask", "--key-padding-mask", "--in-proj-weight",                  \
        "--in-proj-bias", "--bias-k", "--bias-v", "--state-dict"

/* What the options hold once read: the masks as additive masks, bias_k
 * and bias_v, the flags. */
typedef struct cli_torch {
    tensor *attn_mask, *key_padding, *bias_k, *bias_v;
    int add_zero_attn, average_weights;
} cli_torch;

/* 1 when any of PyTorch's options is given. */
int cli_torch_wanted(cli_option *opts, size_t nopts);

/* The combinations, before any file is read: CLI_OK or CLI_USAGE after
 * one line.  need_out: 1 for mha forward, where --average-attn-weights
 * shapes --attention-out and so needs it. */
int cli_torch_check_options(cli_option *opts, size_t nopts, int need_out);

/* The weights the options give, W_q, W_k, W_v, W_o, b_q, b_k, b_v, b_o
 * into w[0 .. 7] (left NULL where they give none; yours to free), the
 * option each came from into options[0 .. 7] and what messages call it
 * into paths[0 .. 7]: "w.npy[0:8]" (rows 0 to 7 of the packed matrix),
 * "model.npz:out_proj.weight".  dq, dk, dv: the features of the queries,
 * keys and values, which packed projections share. */
int cli_torch_weights(cli_option *opts, size_t nopts, size_t dq, size_t dk,
                      size_t dv, tensor **w, const char **options,
                      char (*paths)[256]);

/* Read the masks and bias_kv (shapes checked against B, h, Lq, Lk and the
 * key-value width G*p) into t; bool masks become additive (mask.h). */
int cli_torch_load(cli_option *opts, size_t nopts, size_t B, size_t h,
                   size_t Lq, size_t Lk, size_t kv_width, cli_torch *t);

/* The module as nn.MultiheadAttention runs it with t's options
 * (multihead_forward_masked): out (B, Lq, D_out) and, when weights is
 * not NULL, A (B, h, Lq, Lk') or averaged (B, Lq, Lk').  CLI_OK, or
 * CLI_USAGE after one line (an empty row, an overflow). */
int cli_torch_forward(const multihead *m, const tensor *q, const tensor *k,
                      const tensor *v, const tensor *valid_lens,
                      const cli_torch *t, tensor **out, tensor **weights);

/* cli_torch_forward for mha heatmap: A into *weights and, into *panels,
 * a (B, h, Lq, Lk') view of it, or (B, 1, Lq, Lk') when averaged: one
 * panel per example, the mean of the heads. */
int cli_torch_heatmap_weights(const multihead *m, const tensor *q,
                              const tensor *k, const tensor *v,
                              const tensor *valid_lens, const cli_torch *t,
                              tensor **out, tensor **weights, tensor **panels);

/* mha trace's options for the same steps on shapes alone: no files,
 * only which masks and keys there are. */
#define CLI_TORCH_TRACE_OPTIONS                                               \
    {"--attn-mask", 1, NULL}, {"--key-padding-mask", 0, NULL},                \
    {"--add-bias-kv", 0, NULL}, {"--add-zero-attn", 0, NULL},                 \
    {"--average-attn-weights", 0, NULL}

/* Those options into t, as shape-only masks and bias_k, bias_v (G*p
 * wide): --attn-mask 2d is (Lq, Lk), 3d (B*h, Lq, Lk).  *wanted 1 when
 * any is given.  CLI_USAGE after one line for another --attn-mask value,
 * or --add-bias-kv with --rope. */
int cli_torch_trace_options(cli_option *opts, size_t nopts, size_t B,
                            size_t h, size_t Lq, size_t Lk, size_t kv_width,
                            int *wanted, cli_torch *t);

/* "attn_mask (4, 6), key_padding_mask (2, 6), add_bias_kv, add_zero_attn,
 * averaged weights; " for mha trace's description; nothing when t holds
 * none of them. */
void cli_torch_describe(FILE *f, const cli_torch *t);

void cli_torch_free(cli_torch *t);

#endif
//<
//<
