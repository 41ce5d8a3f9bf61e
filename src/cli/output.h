/* output.h: the files mha writes, all of them or none.
 *
 * `mha forward --out OUT.npy --attention-out A.npy` must not leave OUT
 * behind when A cannot be written, and `mha heatmap --png F --svg G`
 * must not leave F when G fails.  So every file is first written whole
 * under a temporary name in its own directory ("<path>.mha-XXXXXX", or a
 * temporary directory ".mha-heatmap-XXXXXX" for gnuplot's files), and
 * only when all of them are complete are they renamed into place.  If a
 * rename fails after an earlier one succeeded, the earlier files are
 * removed again: a failed run leaves none of its outputs, and says so.
 *
 * A new file gets the permission bits 0666 minus the umask, as np.save's
 * would; a file that is replaced keeps its bits.
 */
#ifndef MHA_CLI_OUTPUT_H
#define MHA_CLI_OUTPUT_H

#include <stddef.h>

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
    char *tmp;           /* set while in flight */
    char *tmp_dir;       /* the heatmap's scratch directory, likewise */
} cli_output;

/* Write all n outputs, or none.  CLI_OK, or CLI_USAGE after printing one
 * line naming the option, the path and what failed. */
int cli_write_outputs(cli_output *outs, size_t n);

#endif
