//> handout
/* paths.h: the files a run names, checked before any work.
 *
 * A run of mha must never lose or half-write a file the user owns.  The
 * fileset (fileset.h) makes the writing safe; what it cannot see is a
 * command line that asks for something unsafe.  Before anything is read
 * or computed, cli_check_paths refuses, with one line naming the options
 * and paths and exit status 2:
 *
 *   - an output with an empty name:
 *       mha forward: --out '' is an empty name: give the file to write
 *   - an output that names an existing directory, FIFO, socket or device
 *     (the rename would replace it with a regular file, or fail half-way
 *     through the set):
 *       mha forward: --out 'pipe' is a FIFO: mha writes only regular
 *       files and will not replace it
 *   - two outputs that name one file, or an output that names an input,
 *     by any spelling: ./x, an absolute path, a symbolic link, a hard
 *     link.  Files that exist are compared by identity (st_dev, st_ino);
 *     a file that does not exist yet by the real path of its directory
 *     plus its name:
 *       mha forward: --out './q.npy' and --queries 'q.npy' name the same
 *       file (an output must not replace an input)
 *   - an output that is a symbolic link (the rename would replace the
 *     link, not write through it; as root, --out /dev/stdout would have
 *     replaced /dev/stdout):
 *       mha forward: --out 'so' is a symbolic link: mha would replace the
 *       link, not write through it; give the file it names
 *   - an output that is write-protected: no write permission bit at all
 *     (as root too, as rm asks), or none for this user; the rename would
 *     replace it regardless:
 *       mha forward: --out 'ro.npy' is write-protected: mha would replace
 *       it; make it writable, or remove it, first
 *
 * Inputs that do not exist are left to the reader, which says so.
 */
#ifndef MHA_CLI_PATHS_H
#define MHA_CLI_PATHS_H

#include <stddef.h>
#include <stdio.h>

/* One path from the command line: the option that named it, its value
 * (NULL: the option was not given, and the entry is skipped). */
typedef struct cli_path {
    const char *option;
    const char *path;
} cli_path;

/* Check outs[0 .. nout-1] against each other and against ins[0 ..
 * nin-1], as above.  CLI_OK, or CLI_USAGE after printing one line. */
int cli_check_paths(const cli_path *outs, size_t nout, const cli_path *ins,
                    size_t nin);

/* A text input named by option (--answers), opened for reading only when
 * it is a regular file, and without waiting: a FIFO with no writer would
 * hold a plain fopen() forever.  CLI_OK with *f (fclose it), or
 * CLI_USAGE after one line:
 *   mha quiz: cannot read --answers 'a.txt': No such file or directory
 *   mha quiz: --answers 'pipe' is a FIFO, not a regular file */
int cli_open_input(const char *option, const char *path, FILE **f);

#endif
//<
