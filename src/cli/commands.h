//> handout
/* commands.h: the mha program's subcommands, one file each (cmd_*.c),
 * called by main (mha.c) with the arguments after the command's name;
 * each returns the program's exit status (args.h: CLI_OK, CLI_USAGE ...). */
#ifndef MHA_CLI_COMMANDS_H
#define MHA_CLI_COMMANDS_H

#include <stddef.h>

//> 18
#include "torch.h"
//<

/* The number of entries of an array of options. */
#define NOPTS(a) (sizeof(a) / sizeof((a)[0]))

int cmd_quiz(int argc, char **argv);
//> 08
int cmd_trace(int argc, char **argv);
int cmd_forward(int argc, char **argv);
int cmd_heatmap(int argc, char **argv);
int cmd_view(int argc, char **argv);

/* How mha trace shows the records. */
typedef enum cmd_trace_show {
    SHOW_TEXT, /* the text trace between a description and the result */
    SHOW_QUIZ, /* a worksheet of the quiz's questions (quiz.h), answers after */
    SHOW_JSON, /* JSON lines, one object per record, nothing else */
    SHOW_DOT   /* the Graphviz dataflow of the module, nothing else */
} cmd_trace_show;

/* What mha trace runs: the sizes, G key-value heads, causal or not, RoPE
 * or not. */
typedef struct cmd_trace_case {
    size_t B, Lq, Lk, D, h, G;
    int causal;
    int rope;         /* rotary embeddings on Q and K */
    double rope_base; /* their base, 10000 unless --rope-base */
//> 18
    int torch;        /* PyTorch's options (torch.h), shapes alone: */
    cli_torch masks;
//<
//> 19
    size_t window, keep; /* --window, --keep-first (window.h) */
    int alibi, sinks;    /* --alibi, --sinks */
//<
} cmd_trace_case;

/* The module on the shapes of ts alone (mha trace; mha quiz --trace),
 * shown as asked; lens the valid_lens or NULL. */
int cmd_run_trace(const cmd_trace_case *ts, const double *lens,
                  cmd_trace_show show);
//<

#endif
//<
