//> handout
/* output.h: the files mha writes, all of them or none.
 *
 * `mha forward --out OUT.npy --attention-out A.npy` must not leave OUT
 * behind when A cannot be written, and `mha heatmap --png F --svg G`
 * must not leave F when G fails.  So the outputs of a run are one fileset
 * (fileset.h): each file is written whole under a temporary name beside
 * its path, and only when all of them are complete are they renamed into
 * place.  If a rename fails after an earlier one succeeded, the earlier
 * ones are undone (a file that was there is put back, a new one removed):
 * a failed run leaves every file as it was, and says so.  gnuplot's data
 * and script for a picture go to a scratch directory beside it
 * (".mha-heatmap-XXXXXX"), removed once the picture is drawn.  A signal
 * that ends the run (SIGINT, SIGTERM, SIGQUIT ..., cleanup.h) removes
 * every temporary and the scratch directory first, and ends gnuplot; one
 * that comes while the outputs are renamed waits until every one is in
 * place (fileset.h).
 *
 * A new file gets the permission bits 0666 minus the umask, as np.save's
 * would; a file that is replaced keeps its bits.
 */
#ifndef MHA_CLI_OUTPUT_H
#define MHA_CLI_OUTPUT_H

#include <stddef.h>
#include <stdio.h>

#include "libmha.h"

/* One file to write: the option that named it (for messages), its path,
 * and what goes in it. */
typedef struct cli_output {
    const char *option;  /* "--out" */
    const char *path;    /* "out.npy" */
    const tensor *npy;   /* written as .npy ... */
    const tensor *image; /* ... or rendered as a heatmap of these weights */
    const heatmap_options *heatmap;
    int format;          /* HEATMAP_PNG or HEATMAP_SVG, for image */
} cli_output;

/* A run's outputs, written under their temporary names and not yet in
 * place: between the two steps the program finishes stdout, so that a
 * run whose stdout fails (`mha forward --trace ... > /dev/full`) leaves
 * no file behind either. */
typedef struct cli_staged {
    fileset *set;
    const cli_output *outs;
    size_t n;
} cli_staged;

/* Step 1: write all n outputs under their temporary names.  CLI_OK, or
 * CLI_USAGE after printing one line naming the option, the path and what
 * failed (nothing is left, and *staged needs no finishing). */
int cli_stage_outputs(const cli_output *outs, size_t n, cli_staged *staged);

/* Step 1 for an output the caller writes as it is made (o's .npy made a part
 * at a time: npy.h's npy_write_preamble and npy_write_part on *f): its
 * temporary created, and *staged set up with o alone.  Quiet: CLI_USAGE
 * without a line when the temporary cannot be made, with nothing to finish;
 * cli_stage_outputs then says why. */
int cli_stage_stream(const cli_output *o, cli_staged *staged, FILE **f);

/* Step 2: when status is CLI_OK, put every staged output in place, or
 * none (one line when that fails); otherwise abandon them all.  Returns
 * the run's status. */
int cli_finish_outputs(cli_staged *staged, int status);

/* Both steps at once, for a program that prints nothing on stdout. */
int cli_write_outputs(const cli_output *outs, size_t n);

/* status, unless stdout has not taken everything printed on it (think
 * `mha ... > /dev/full`): then one line saying so, and CLI_USAGE. */
int cli_flush_stdout(int status);

/* A subcommand's answer to --help: usage on stdout, then as
 * cli_flush_stdout(CLI_OK). */
int cli_print_usage(const char *usage);

#endif
//<
