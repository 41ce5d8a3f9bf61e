//> handout
/* npy.h: NumPy's .npy files, so the tensors of this walkthrough can be
 * checked against NumPy and PyTorch (np.save / np.load, torch.from_numpy).
 *
 * A .npy file is a preamble, a header and the raw numbers:
 *
 *     \x93NUMPY  1 0  76 0  {'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }  ...  \n  <48 bytes>
 *     magic      version  header length  header: a Python dict literal, padded   data, C order
 *
 * The version 1.0 header length is 2 bytes, little-endian; versions 2.0 and
 * 3.0 use 4 bytes (3.0 is 2.0 with a UTF-8 header instead of Latin-1).
 *
 * What npy_read accepts
 *   - format versions 1.0, 2.0 and 3.0.  The headers this reader accepts
 *     are plain ASCII, so 3.0's UTF-8 changes nothing for them.
 *   - descr '<f8' (float64, read as is), '<f4' (float32, widened to double,
 *     which is exact), '<i8' and '<i4' (integers, for valid_lens files,
 *     converted to double; an int64 that a double cannot hold exactly is an
 *     error rather than a silent rounding), and '|b1' (bool, for masks:
 *     0.0 and 1.0; any other byte is an error) where a mask is read
 *     (npy_read_typed): where numbers are read, bool is refused.
 *   - fortran_order False, and a shape of 1 to TENSOR_MAX_DIMS sizes, each
 *     at least 1 (tensors have no empty dimensions).
 *   - the header as a Python dict literal with exactly the keys 'descr',
 *     'fortran_order' and 'shape', in any order, keys and descr in single
 *     or double quotes (no escapes), whitespace (space, tab, newline, CR)
 *     between tokens, an optional trailing comma, and the whole header
 *     ending in '\n'.  Sizes are decimal integers; in versions 1.0 and 2.0
 *     a Python 2 long suffix 'L' is allowed, as NumPy's own reader does.
 *   - any header length that fits in the file.  The format asks writers to
 *     pad so the data starts at a multiple of 64 bytes (older NumPy used
 *     16) but NumPy's reader does not insist, so neither does this one.
 *
 * What npy_read rejects, with the status and a message naming the path
 *   - GSL_EFAILED: a missing or unreadable file, a directory or anything
 *     else that is not a regular file, a failed read.
 *   - GSL_EINVAL: an empty file, a wrong magic string, an unknown version,
 *     a file that ends inside the preamble, a malformed header (missing,
 *     duplicated or unknown key, bad syntax, a header not ending in '\n'),
 *     any other descr: big-endian '>f8', '=f8' (native order: the file does
 *     not say which order that was, so it is refused rather than guessed),
 *     '|u1', '<c16', structured and object dtypes ...;
 *     fortran_order True (C order is required); a 0-d or 5-d shape; a size
 *     of 0; a negative or non-integer size; an int64 not exact as a double.
 *   - GSL_EBADLEN: a header length that runs past the end of the file;
 *     data shorter (truncated) or longer (trailing bytes) than
 *     product(shape) * itemsize.
 *   - GSL_EOVRFLW: a size, element count or byte count that overflows
 *     size_t.
 *   - GSL_ENOMEM: out of memory.
 *
 * What npy_write writes: float64 '<f8', C order, format 1.0, byte for byte
 * what NumPy 1.24's np.save writes for the same array, including its
 * header padding (spare spaces for the first size to grow, then spaces and
 * a '\n' so the data starts at a multiple of 64 bytes).
 *
 * Bytes on disk are little-endian whatever the host; the code assembles
 * and splits them with shifts, so it does not depend on the host's order.
 */
#ifndef MHA_NPY_H
#define MHA_NPY_H

#include <stddef.h>
#include <stdio.h>

#include "tensor/tensor.h"

#define NPY_DESCR_MAX 8     /* room for "<f8" and its NUL */
#define NPY_PREAMBLE_MAX 256 /* enough for the preamble of any tensor */

/* What a .npy header says, once checked. */
typedef struct npy_header {
    unsigned major, minor;          /* format version: 1.0, 2.0 or 3.0 */
    char descr[NPY_DESCR_MAX];      /* "<f8", "<f4", "<i8", "<i4" or "|b1" */
    size_t itemsize;                /* bytes per element: 8, 4 or 1 */
    int fortran_order;              /* always 0: Fortran order is rejected */
    size_t ndim;                    /* 1 .. TENSOR_MAX_DIMS */
    size_t shape[TENSOR_MAX_DIMS];  /* entries past ndim are 0 */
    size_t numel;                   /* product of the shape */
    size_t data_offset;             /* where the data starts in the file */
    size_t data_bytes;              /* numel * itemsize: what follows */
} npy_header;

/* Read path into a new contiguous tensor (yours to tensor_free).  On
 * failure *out is NULL and the status and message say why (see above).
 * A bool '|b1' array is refused (GSL_EINVAL, naming its descr): it holds
 * no numbers; npy_read_typed reads masks. */
int npy_read(const char *path, tensor **out);

/* npy_read, with no copy of a big float64 file's numbers: when the file
 * is '<f8' of 64 KiB of numbers or more (and the host little-endian),
 * the tensor reads them from a private read-only mapping of the file,
 * which tensor_free unmaps; every other file is read as npy_read reads
 * it.  Same checks, statuses and messages as npy_read; the file is never
 * written.  The numbers are READ-ONLY: writing one faults.  A file that
 * changes size between its check and its mapping is read instead (and
 * refused as npy_read refuses it).  One cut short while the tensor lives
 * makes a read past its new end raise SIGBUS, as any mapped file does:
 * in a program that called cleanup_install (mha does), that ends it with
 * one line naming the file, its temporaries removed, and status 2
 * (cleanup_add_mapping, base/cleanup.h). */
int npy_read_mapped(const char *path, tensor **out);

/* npy_read, also accepting '|b1' (bool, read as 0.0 and 1.0; a byte
 * other than 0 or 1 is GSL_EINVAL), with the header it read into *h
 * (its descr says whether the array was bool). */
int npy_read_typed(const char *path, tensor **out, npy_header *h);

/* npy_read_typed in two steps on a stream f holding size bytes of a
 * .npy file (a member of a .npz archive as it is inflated), name standing
 * for the path in messages: its preamble and header into *h, which
 * leaves f at the numbers (all zeros in *h on failure); then the numbers
 * into a new tensor *out, a bool array only with bool_ok.  Between the
 * two a caller can refuse what the header says, a shape bigger than the
 * memory it may use, before a byte of the numbers is read. */
int npy_stream_header(FILE *f, size_t size, const char *name, npy_header *h);
int npy_stream_numbers(FILE *f, const char *name, const npy_header *h,
                       int bool_ok, tensor **out);

/* Check path's preamble, header and length as npy_read does, without
 * reading the data.  On failure *h is all zeros. */
int npy_read_header(const char *path, npy_header *h);

/* Write t (any strides; read in logical row-major order) to path as
 * float64.  Atomic (fileset.h): the bytes go to a temporary file next to
 * path ("<path>.tmp.<pid>.<n>"), which is renamed over path only once
 * everything is written and flushed to disk; on any failure the temporary
 * is removed and path is left as it was.  An existing file keeps its
 * permission bits; a new one gets 0666 minus the umask, as np.save's
 * would; a symbolic link at path is replaced by the file, not followed.
 * A missing directory, a path that is a directory or a failed write is
 * GSL_EFAILED. */
int npy_write(const char *path, const tensor *t);

/* The bytes npy_write puts in a file, written to the stream f, e.g. one a
 * fileset made for several outputs at once.  GSL_EFAILED when a write
 * fails. */
int npy_write_stream(FILE *f, const tensor *t);

/* npy_write_stream in steps, for an array made a part at a time: the
 * preamble of a float64 C-order array of the given shape, then its
 * numbers part after part (each part's in row-major order, and the
 * stream flushed after each), the parts together the whole array.  The
 * same bytes, and on a failed write the same GSL_EFAILED and message, as
 * npy_write_stream. */
int npy_write_preamble(FILE *f, size_t ndim, const size_t *shape);
int npy_write_part(FILE *f, const tensor *part);

/* The preamble (magic, version, header length, header) npy_write puts
 * before the data of a float64 C-order array of the given shape, as NumPy
 * writes it, into buf (cap bytes; NPY_PREAMBLE_MAX always suffices); its
 * length, a multiple of 64, into *len. */
int npy_format_preamble(size_t ndim, const size_t *shape, unsigned char *buf,
                        size_t cap, size_t *len);

#endif
//<
