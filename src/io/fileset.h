//> 01
/* fileset.h: files that appear all together or not at all.
 *
 * A program that writes several files (a chart's numbers and its script,
 * `mha forward`'s OUT and A, one picture in two formats) must never leave
 * some of them new and some old, nor a half-written file where a reader
 * would look.  A fileset writes each output to a temporary file beside it,
 * "<path>.tmp.<pid>.<n>" (in the same directory, so the final rename never
 * crosses file systems), and renames them into place only when every one
 * is complete:
 *
 *     fileset *set;
 *     FILE *dat, *gp;
 *     status = fileset_begin("heatmap_write", &set);
 *     status = fileset_add(set, "plots/x.dat", &dat, NULL);  write to dat
 *     status = fileset_add(set, "plots/x.gp", &gp, NULL);    write to gp
 *     status = fileset_commit(set, NULL);     all in place, or none
 *     fileset_end(set);                       free it (always, once)
 *
 * Ending a set that was not committed abandons it: every temporary is
 * removed and no path is touched.  A program that also writes to stdout
 * commits once stdout is complete.
 *
 * fileset_commit, in order:
 *   1. closes each stream and checks that every byte reached its file;
 *      gives each temporary the permission bits of the file it replaces
 *      (a new file keeps what creating it gave: 0666 minus the umask);
 *      flushes it to disk, so a crash leaves the old file or the new one;
 *   2. keeps each file that is there already under a second name, a hard
 *      link "<path>.old.<pid>.<n>": all but the last output's, which no
 *      rename follows (so a set of one file never makes one);
 *   3. renames each temporary over its path, in the order added;
 *   4. removes the second names.
 * When a rename fails, the outputs already renamed are undone: a file
 * that was there is put back (the very file: its contents, its mode), a
 * new one is removed.  So after any failure, every path names what it
 * named before, and no temporary is left.
 *
 * Nor after a signal: each temporary is registered with cleanup.h while
 * it exists, so a signal that ends the program (SIGINT, SIGTERM, SIGQUIT
 * ..., every one cleanup.h lists) removes it before the program ends (in
 * a program that called mha_program_init).  A signal that comes during
 * steps 2-4 waits until they are done, and finds every output in place,
 * new, and no second name left.
 *
 * A path is used as given: a symbolic link there is replaced by the file,
 * not followed (the replacement takes the permission bits of the link's
 * target).  Two outputs that name one file are the caller's to refuse.
 *
 * Errors follow error.h, each message naming the `who` the set was begun
 * with (a string that must outlive the set), e.g.
 *     heatmap_write: cannot create plots/missing/x.dat: No such file or directory
 * Callers that word their own messages pass a fileset_failure, which says
 * which step failed, for which output, and the errno.
 */
#ifndef MHA_FILESET_H
#define MHA_FILESET_H

#include <stddef.h>
#include <stdio.h>

typedef struct fileset fileset;

/* The step that failed. */
typedef enum fileset_step {
    FILESET_OK = 0, /* nothing failed */
    FILESET_MEMORY, /* out of memory (GSL_ENOMEM) */
    FILESET_USAGE,  /* a NULL or empty path, a set already committed */
    FILESET_CREATE, /* creating the temporary file */
    FILESET_WRITE,  /* a stream's bytes did not all reach its file */
    FILESET_MODE,   /* giving the temporary the replaced file's bits */
    FILESET_SYNC,   /* flushing the temporary to disk */
    FILESET_KEEP,   /* linking a file that is there to its second name */
    FILESET_RENAME  /* renaming the temporary over its path */
} fileset_step;

typedef struct fileset_failure {
    fileset_step step;
    int err;       /* the errno of the failed call, 0 if there was none */
    size_t index;  /* the output it concerns, from 0 in the order added */
    size_t undone; /* FILESET_RENAME: outputs 0 .. undone - 1 had been
                      renamed into place and were undone (fileset_existed
                      says which were put back and which removed) */
} fileset_failure;

/* Begin an empty set; *set is NULL on failure (GSL_ENOMEM). */
int fileset_begin(const char *who, fileset **set);

/* Add path to the set: create its temporary, exclusively, and open *f on
 * it for writing.  The stream is the set's: write to it, do not close it.
 * why (may be NULL) says what failed; the set is as it was before. */
int fileset_add(fileset *set, const char *path, FILE **f,
                fileset_failure *why);

/* Add path, for a file another writer fills (a child process such as
 * gnuplot): create its temporary, empty, and point *tmp at its name,
 * which the set owns.  The writer must write to that name in place (open
 * it, truncating), not replace it. */
int fileset_add_name(fileset *set, const char *path, const char **tmp,
                     fileset_failure *why);

/* Put every output in place, or none (see above).  why may be NULL.
 * Either way the set is then done: end it. */
int fileset_commit(fileset *set, fileset_failure *why);

/* 1 when output i's path named a file when fileset_commit ran (a file it
 * replaced, or put back after a failure), else 0. */
int fileset_existed(const fileset *set, size_t i);

/* Free the set.  Outputs not committed are abandoned: their temporaries
 * are removed.  NULL does nothing. */
void fileset_end(fileset *set);

/* The one-file case: fileset_begin and fileset_add in one call.  On
 * failure *set and *f are NULL and there is nothing to end. */
int fileset_open(const char *who, const char *path, fileset **set, FILE **f,
                 fileset_failure *why);

#endif
//<
