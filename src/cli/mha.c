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
 *   mha view     the same forward pass as one HTML page to explore (view.c)
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
 * (one line naming it, error.h).  A signal that ends a program (SIGINT,
 * SIGTERM, SIGQUIT ... cleanup.h) ends it by that signal, its temporaries
 * removed and gnuplot ended first; one that comes while the outputs are
 * renamed into place waits until all of them are (fileset.h).  The usage texts below are the program's documentation:
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
#include "commands.h"
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
//> 08
    "  trace     print the module's whole shape trace, run on shapes alone\n"
//<
    "  quiz      a case drawn from a seed, asked step by step: shapes, views\n"
    "            or copies, the repeated valid_lens (from chapter 06)\n"
//> 08
    "  forward   run the module on .npy inputs and weights, write .npy outputs\n"
    "  heatmap   draw every head's attention weights (PNG, SVG or terminal)\n"
    "  view      write one HTML page to explore the weights, heads and shapes\n"
    "            in a browser, with nothing loaded from outside\n"
//<
    "\n"
    "`mha <command> --help` describes each one.  Exit status: 0 on success,\n"
    "2 on bad input (one line on stderr, every file as it was before the run),\n"
    "3 in a student's handout when the command needs an exercise not written yet.\n";

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
/*< 08
        return cli_error("missing command: quiz (see mha --help)");
*/
//> 08
        return cli_error("missing command: trace, quiz, forward, heatmap or "
                         "view (see mha --help)");
//<
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        fputs(usage_main, stdout);
        return cli_flush_stdout(CLI_OK);
    }
    static const struct {
        const char *name, *label; /* label: the name its messages carry */
        int (*run)(int argc, char **argv);
    } commands[] = {
//> 08
        {"trace", "mha trace", cmd_trace},
//<
        {"quiz", "mha quiz", cmd_quiz},
//> 08
        {"forward", "mha forward", cmd_forward},
        {"heatmap", "mha heatmap", cmd_heatmap},
        {"view", "mha view", cmd_view},
//<
    };
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(cmd, commands[i].name) == 0) {
            cli_set_command(commands[i].label);
            return exit_status(commands[i].run(argc - 2, argv + 2));
        }
/*< 08
    return cli_error("unknown command '%s' (expected quiz; the others come "
                     "with chapter 08; see mha --help)",
                     cmd);
*/
//> 08
    return cli_error("unknown command '%s' (expected trace, quiz, forward, "
                     "heatmap or view; see mha --help)",
                     cmd);
//<
}
//<
