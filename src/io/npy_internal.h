//> handout
/* npy_internal.h: what the reader's files share (npy.c, npy_header.c) and
 * nobody else sees. */
#ifndef MHA_NPY_INTERNAL_H
#define MHA_NPY_INTERNAL_H

#include <stddef.h>

#include "io/npy.h"

/* Record "who: path: message"; returns status. */
__attribute__((format(printf, 4, 5))) int
npy_fail_at(int status, const char *who, const char *path, const char *fmt,
            ...);

/* A message quotes at most SHOW_MAX bytes of the file, each shown as
 * itself when printable ASCII and as \xNN otherwise, so a hostile header
 * cannot put a newline or a terminal escape into the one-line message:
 * s[0 .. n) so into buf (SHOW_CAP bytes); returns buf. */
#define SHOW_MAX 64
#define SHOW_CAP (4 * SHOW_MAX + 4)
const char *npy_printable(char *buf, size_t cap, const char *s, size_t n);

/* Parse and check header[0 .. len), which ends in '\n', of a file of
 * format version major, into h. */
int npy_parse_header(const char *who, const char *path, const char *header,
                     size_t len, unsigned major, npy_header *h);

#endif
//<
