//> handout
/* npy.c: reading and writing NumPy .npy files; see npy.h for the format
 * and for what is accepted.
 *
 * The reader trusts nothing in the file: every length is compared with the
 * file's size before anything is allocated or read, every product of sizes
 * is checked for overflow, and the header parser never looks past the
 * header it was given (it works on a length, not on a NUL terminator, since
 * the header may hold NUL bytes). */
#define _XOPEN_SOURCE 700 /* open flags, fstat */
#define _DEFAULT_SOURCE   /* MAP_POPULATE */
#include "io/npy.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/fileset.h"
#include "io/npy_internal.h"
#include "trace/trace.h"

/* The bytes of a .npy file are IEEE 754 binary64 and binary32 numbers;
 * the conversions below copy their bits into C's double and float. */
_Static_assert(sizeof(double) == 8 && sizeof(float) == 4,
               "npy.c assumes 8-byte doubles and 4-byte floats");

#define MAGIC_LEN 6
static const unsigned char npy_magic[MAGIC_LEN] = {0x93, 'N', 'U', 'M',
                                                   'P',  'Y'};

/* --- little-endian bytes, whatever the host's order ------------------ */

static uint64_t get_le(const unsigned char *b, size_t n)
{
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;)
        v = v << 8 | b[i];
    return v;
}

static void put_le(unsigned char *b, uint64_t v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        b[i] = (unsigned char)(v & 0xff);
        v >>= 8;
    }
}

/* On a little-endian host a float64's bytes in memory are the file's:
 * the numbers are read and written as one block, with no loop over them. */
static int host_little_endian(void)
{
    const uint16_t one = 1;
    unsigned char first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* --- reading --------------------------------------------------------- */

/* Open path, which must be a regular file, and find its size.  O_NONBLOCK
 * keeps a FIFO from blocking the open; for regular files it changes
 * nothing. */
static int open_regular(const char *who, const char *path, FILE **out,
                        size_t *size)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return npy_fail_at(GSL_EFAILED, who, path, "cannot open: %s",
                       strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return npy_fail_at(GSL_EFAILED, who, path, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return npy_fail_at(GSL_EFAILED, who, path,
                       "is a directory, not a .npy file");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return npy_fail_at(GSL_EFAILED, who, path, "is not a regular file");
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return npy_fail_at(GSL_EOVRFLW, who, path,
                       "file of %jd bytes is larger than size_t can count",
                       (intmax_t)st.st_size);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return npy_fail_at(GSL_EFAILED, who, path, "cannot open: %s", strerror(e));
    }
    *size = (size_t)st.st_size;
    *out = f;
    return GSL_SUCCESS;
}

/* Exactly n bytes.  The sizes were checked against the file's size, so a
 * short read means an I/O error or a file that shrank meanwhile. */
static int read_exact(const char *who, const char *path, FILE *f, void *buf,
                      size_t n, const char *what)
{
    if (n == 0)
        return GSL_SUCCESS;
    size_t got = fread(buf, 1, n, f);
    if (got == n)
        return GSL_SUCCESS;
    if (ferror(f))
        return npy_fail_at(GSL_EFAILED, who, path, "cannot read the %s: %s", what,
                       strerror(errno));
    return npy_fail_at(GSL_EFAILED, who, path,
                   "the file ended after %zu of the %zu bytes of the %s; "
                   "did it change while being read?",
                   got, n, what);
}

/* The preamble and header of f (size bytes long) into h. */
static int read_header_from(const char *who, const char *path, FILE *f,
                            size_t size, npy_header *h)
{
    unsigned char pre[12];
    if (size == 0)
        return npy_fail_at(GSL_EINVAL, who, path, "empty file (0 bytes), not a .npy file");

    /* pass 1: the magic string and the version */
    size_t n = size < 8 ? size : 8;
    int status = read_exact(who, path, f, pre, n, "preamble");
    if (status)
        return status;
    size_t m = n < MAGIC_LEN ? n : MAGIC_LEN;
    if (memcmp(pre, npy_magic, m) != 0) {
        char hex[3 * MAGIC_LEN] = "";
        for (size_t i = 0, used = 0; i < m; i++)
            used += (size_t)snprintf(hex + used, sizeof hex - used,
                                     i ? " %02x" : "%02x", pre[i]);
        return npy_fail_at(GSL_EINVAL, who, path,
                       "not a .npy file: it starts with the bytes %s, not the "
                       "magic string 93 4e 55 4d 50 59 (\"\\x93NUMPY\")",
                       hex);
    }
    if (size < 8)
        return npy_fail_at(GSL_EINVAL, who, path,
                       "file of %zu bytes ends before the format version "
                       "(bytes 6 and 7)",
                       size);
    unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return npy_fail_at(GSL_EINVAL, who, path,
                       "unsupported format version %u.%u; this reader knows "
                       "1.0, 2.0 and 3.0",
                       major, minor);

    /* pass 2: the header length, 2 bytes in version 1.0, 4 after */
    size_t len_bytes = major == 1 ? 2 : 4, pre_len = 8 + len_bytes;
    if (size < pre_len)
        return npy_fail_at(GSL_EINVAL, who, path,
                       "file of %zu bytes ends inside the header length "
                       "(bytes 8 to %zu of a version %u.0 file)",
                       size, pre_len - 1, major);
    status = read_exact(who, path, f, pre + 8, len_bytes, "preamble");
    if (status)
        return status;
    size_t header_len = (size_t)get_le(pre + 8, len_bytes);
    if (header_len > size - pre_len)
        return npy_fail_at(GSL_EBADLEN, who, path,
                       "header length %zu runs past the end of the file (%ju "
                       "bytes of preamble and header, the file has %zu)",
                       header_len, (uintmax_t)pre_len + header_len, size);

    /* pass 3: the header itself */
    char *header = mha_malloc(header_len ? header_len : 1, 1, who);
    if (!header)
        return GSL_ENOMEM;
    status = read_exact(who, path, f, header, header_len, "header");
    if (status == GSL_SUCCESS)
        status = npy_parse_header(who, path, header, header_len, major, h);
    free(header);
    if (status)
        return status;
    h->major = major;
    h->minor = minor;
    h->data_offset = pre_len + header_len;

    /* pass 4: exactly the data must follow */
    size_t follow = size - h->data_offset;
    if (follow != h->data_bytes) {
        char s[TRACE_SHAPE_MAX];
        trace_dims_str(s, sizeof s, h->ndim, h->shape);
        if (follow < h->data_bytes)
            return npy_fail_at(GSL_EBADLEN, who, path,
                           "header says shape %s of '%s' (%zu bytes) but only "
                           "%zu bytes follow",
                           s, h->descr, h->data_bytes, follow);
        return npy_fail_at(GSL_EBADLEN, who, path,
                       "header says shape %s of '%s' (%zu bytes) but %zu bytes "
                       "follow (%zu extra)",
                       s, h->descr, h->data_bytes, follow,
                       follow - h->data_bytes);
    }
    return GSL_SUCCESS;
}

/* The int64 v as a double, or 0 when no double equals it (beyond 2^53
 * only some integers are doubles). */
static int int64_exact(int64_t v, double *out)
{
    double d = (double)v;
    /* 2^63 is where INT64_MAX rounds to, and is not an int64 */
    if (d >= 9223372036854775808.0 || (int64_t)d != v)
        return 0;
    *out = d;
    return 1;
}

/* Turn the file's bytes, read into the start of t's buffer, into doubles
 * in place.  4-byte items go last to first, so item i is read before the
 * double written at 8 i overwrites it (8 i >= 4 i + 4 for i >= 1). */
static int decode(const char *who, const char *path, const npy_header *h,
                  tensor *t)
{
    unsigned char *b = (unsigned char *)t->data;
    double *x = t->data;
    size_t n = h->numel;
    char kind = h->descr[1];
    if (h->itemsize == 1) { // bool: last to first, as below; 0 or 1 only
        for (size_t i = n; i-- > 0;) {
            if (b[i] > 1)
                return npy_fail_at(GSL_EINVAL, who, path,
                               "element %zu of a '|b1' array is the byte %u; "
                               "a bool is 0 or 1",
                               i, (unsigned)b[i]);
            x[i] = b[i];
        }
        return GSL_SUCCESS;
    }
    if (h->itemsize == 4) {
        for (size_t i = n; i-- > 0;) {
            uint32_t u = (uint32_t)get_le(b + 4 * i, 4);
            if (kind == 'f') {
                float v;
                memcpy(&v, &u, sizeof v);
                x[i] = v;
            } else {
                x[i] = u <= INT32_MAX ? (double)(int32_t)u
                                      : -(double)(int32_t)~u - 1;
            }
        }
        return GSL_SUCCESS;
    }
    if (kind == 'f' && host_little_endian())
        return GSL_SUCCESS; // read as the doubles they are
    for (size_t i = 0; i < n; i++) {
        uint64_t u = get_le(b + 8 * i, 8);
        if (kind == 'f') {
            memcpy(&x[i], &u, sizeof u);
            continue;
        }
        int64_t v = u <= INT64_MAX ? (int64_t)u : -(int64_t)~u - 1;
        if (!int64_exact(v, &x[i])) {
            size_t idx[TENSOR_MAX_DIMS], rest = i;
            for (size_t d = h->ndim; d-- > 0;) {
                idx[d] = rest % h->shape[d];
                rest /= h->shape[d];
            }
            char s[TRACE_SHAPE_MAX], is[TRACE_SHAPE_MAX];
            return npy_fail_at(GSL_EINVAL, who, path,
                           "element %s of shape %s is %" PRId64 ", which a "
                           "double cannot hold exactly",
                           trace_dims_str(is, sizeof is, h->ndim, idx),
                           trace_dims_str(s, sizeof s, h->ndim, h->shape), v);
        }
    }
    return GSL_SUCCESS;
}

/* npy_read_mapped maps float64 numbers of at least this many bytes;
 * smaller files are read, which costs less than a mapping. */
#define MAP_MIN_BYTES ((size_t)64 << 10)

/* The numbers of f (a regular file of size bytes whose header h is
 * checked) as a tensor over a private read-only mapping of the file, into
 * *out: 1 when they are little-endian float64 of MAP_MIN_BYTES or more,
 * aligned for doubles, and the file still has size bytes once mapped; 0
 * otherwise (nothing mapped), for the caller to read them instead. */
static int map_numbers(const char *path, FILE *f, size_t size,
                       const npy_header *h, tensor **out)
{
    if (strcmp(h->descr, "<f8") != 0 || !host_little_endian() ||
        h->data_offset % sizeof(double) != 0 || h->data_bytes < MAP_MIN_BYTES)
        return 0;
    int fd = fileno(f);
    // MAP_POPULATE: the file's cached pages are mapped at once, with no
    // fault for each page on its first read
    void *map = mmap(NULL, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED)
        return 0;
    struct stat st;
    // a file that changed size since it was measured is read instead,
    // which says how
    if (fstat(fd, &st) != 0 || (uintmax_t)st.st_size != size ||
        tensor_from_mapping(h->ndim, h->shape, map, size, h->data_offset,
                            path, out) != GSL_SUCCESS) {
        munmap(map, size);
        return 0;
    }
    return 1;
}

/* A bool array where numbers are wanted: the header h of path is
 * refused, naming its descr. */
static int not_numbers(const char *who, const char *path, const npy_header *h)
{
    char s[TRACE_SHAPE_MAX];
    return npy_fail_at(GSL_EINVAL, who, path,
                       "shape %s of '%s' is bool, not numbers; expected "
                       "'<f8' or '<f4' (floats), '<i8' or '<i4' (integers)",
                       trace_dims_str(s, sizeof s, h->ndim, h->shape),
                       h->descr);
}

/* The numbers after the header h, which f is positioned at, into a new
 * tensor *out. */
static int read_numbers(const char *who, const char *path, FILE *f,
                        const npy_header *h, tensor **out)
{
    tensor *t = NULL;
    int status = tensor_alloc_empty(h->ndim, h->shape, &t);
    /* the file's bytes fit in the tensor's buffer: itemsize <= 8 */
    if (status == GSL_SUCCESS)
        status = read_exact(who, path, f, t->data, h->data_bytes, "data");
    if (status == GSL_SUCCESS)
        status = decode(who, path, h, t);
    if (status) {
        tensor_free(t);
        return status;
    }
    *out = t;
    return GSL_SUCCESS;
}

/* The header in f (size bytes, named path in messages) into *h and,
 * unless out is NULL, the tensor after it into *out; with map, mapped
 * when map_numbers can; a bool array only with bool_ok. */
static int read_stream(const char *who, const char *path, FILE *f,
                       size_t size, tensor **out, npy_header *h, int map,
                       int bool_ok)
{
    int status = read_header_from(who, path, f, size, h);
    if (status == GSL_SUCCESS && !bool_ok && h->itemsize == 1)
        status = not_numbers(who, path, h);
    if (!out || status)
        return status;
    if (map && map_numbers(path, f, size, h, out))
        return GSL_SUCCESS;
    return read_numbers(who, path, f, h, out);
}

/* The file at path, opened (a regular file) and read by read_stream: its
 * header into h, and with out its numbers too.  h is all zero unless the
 * whole read succeeds. */
static int read_file(const char *who, const char *path, tensor **out,
                     npy_header *h, int map, int bool_ok)
{
    memset(h, 0, sizeof *h);
    FILE *f = NULL;
    size_t size = 0;
    int status = open_regular(who, path, &f, &size);
    if (status)
        return status;
    status = read_stream(who, path, f, size, out, h, map, bool_ok);
    fclose(f);
    if (status)
        memset(h, 0, sizeof *h);
    return status;
}

int npy_read_header(const char *path, npy_header *h)
{
    return read_file("npy_read_header", path, NULL, h, 0, 1);
}

int npy_read_typed(const char *path, tensor **out, npy_header *h)
{
    *out = NULL;
    return read_file("npy_read", path, out, h, 0, 1);
}

int npy_read(const char *path, tensor **out)
{
    npy_header h;
    *out = NULL;
    return read_file("npy_read", path, out, &h, 0, 0);
}

int npy_read_mapped(const char *path, tensor **out)
{
    npy_header h;
    *out = NULL;
    return read_file("npy_read", path, out, &h, 1, 0);
}

int npy_stream_header(FILE *f, size_t size, const char *name, npy_header *h)
{
    memset(h, 0, sizeof *h);
    int status = read_header_from("npy_read", name, f, size, h);
    if (status)
        memset(h, 0, sizeof *h);
    return status;
}

int npy_stream_numbers(FILE *f, const char *name, const npy_header *h,
                       int bool_ok, tensor **out)
{
    *out = NULL;
    if (!bool_ok && h->itemsize == 1)
        return not_numbers("npy_read", name, h);
    return read_numbers("npy_read", name, f, h, out);
}

/* --- writing --------------------------------------------------------- */

int npy_format_preamble(size_t ndim, const size_t *shape, unsigned char *buf,
                        size_t cap, size_t *len)
{
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        return mha_fail(GSL_EINVAL,
                        "npy_format_preamble: %zu dimensions, a tensor has 1 "
                        "to %d",
                        ndim, TENSOR_MAX_DIMS);
    char s[TRACE_SHAPE_MAX], dict[NPY_PREAMBLE_MAX], first[24];
    trace_dims_str(s, sizeof s, ndim, shape);
    int dict_len = snprintf(dict, sizeof dict,
                            "{'descr': '<f8', 'fortran_order': False, "
                            "'shape': %s, }",
                            s);
    /* NumPy leaves room for the first size to grow to 21 digits, so that
     * appending along it can rewrite the header in place. */
    int first_len = snprintf(first, sizeof first, "%zu", shape[0]);
    size_t spare = first_len < 21 ? (size_t)(21 - first_len) : 0;
    size_t header_len = (size_t)dict_len + spare + 1; /* + '\n' */
    /* then spaces up to a multiple of 64, counting the 10-byte preamble;
     * NumPy adds a whole 64 when it is already a multiple, and so do we */
    size_t pad = 64 - (10 + header_len) % 64;
    size_t total = 10 + header_len + pad;
    if (total > cap)
        return mha_fail(GSL_EBADLEN,
                        "npy_format_preamble: the preamble of shape %s takes "
                        "%zu bytes, the buffer has %zu",
                        s, total, cap);
    memcpy(buf, npy_magic, MAGIC_LEN);
    buf[6] = 1;
    buf[7] = 0;
    put_le(buf + 8, header_len + pad, 2);
    memcpy(buf + 10, dict, (size_t)dict_len);
    memset(buf + 10 + dict_len, ' ', spare + pad);
    buf[total - 1] = '\n';
    *len = total;
    return GSL_SUCCESS;
}

/* The numbers of t in row-major order, as little-endian float64: a
 * contiguous tensor on a little-endian host in one fwrite (which hands
 * a block that large straight to write), any other through a buffer of
 * 64 KiB. */
static int write_data(FILE *f, const tensor *t)
{
    unsigned char chunk[1 << 16];
    size_t used = 0, n = tensor_numel(t);
    if (host_little_endian() && tensor_is_contiguous(t))
        return fwrite(t->data, sizeof *t->data, n, f) != n ? -1 : 0;
    size_t idx[TENSOR_MAX_DIMS] = {0};
    for (size_t k = 0; k < n; k++) {
        uint64_t u;
        memcpy(&u, tensor_at(t, idx), sizeof u);
        put_le(chunk + used, u, 8);
        used += 8;
        if (used == sizeof chunk) {
            if (fwrite(chunk, 1, used, f) != used)
                return -1;
            used = 0;
        }
        for (size_t d = t->ndim; d-- > 0;) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return used && fwrite(chunk, 1, used, f) != used ? -1 : 0;
}

/* The preamble and the numbers of t onto f: 0, or -1 with errno set when
 * a write fails. */
static int put_npy(FILE *f, const tensor *t, const unsigned char *pre,
                   size_t pre_len)
{
    if (fwrite(pre, 1, pre_len, f) != pre_len || write_data(f, t) != 0)
        return -1;
    return fflush(f);
}

/* The npy_write_stream steps' messages: a NULL stream, a write that
 * failed. */
static int null_stream(void)
{
    return mha_fail(GSL_EINVAL, "npy_write_stream: the stream is NULL");
}

static int write_failed(void)
{
    return mha_fail(GSL_EFAILED, "npy_write_stream: write failed: %s",
                    strerror(errno));
}

int npy_write_preamble(FILE *f, size_t ndim, const size_t *shape)
{
    unsigned char pre[NPY_PREAMBLE_MAX];
    size_t pre_len;
    if (!f)
        return null_stream();
    int status = npy_format_preamble(ndim, shape, pre, sizeof pre, &pre_len);
    if (status)
        return status;
    return fwrite(pre, 1, pre_len, f) != pre_len ? write_failed()
                                                 : GSL_SUCCESS;
}

int npy_write_part(FILE *f, const tensor *part)
{
    if (!f)
        return null_stream();
    return write_data(f, part) != 0 || fflush(f) != 0 ? write_failed()
                                                      : GSL_SUCCESS;
}

int npy_write_stream(FILE *f, const tensor *t)
{
    int status = npy_write_preamble(f, t->ndim, t->shape);
    return status ? status : npy_write_part(f, t);
}

/* npy_write's message for a step of the commit that failed. */
static int left_unchanged(const char *who, const char *path, const char *step,
                          int err)
{
    return npy_fail_at(GSL_EFAILED, who, path,
                   "%s: %s; the file is left unchanged", step,
                   err ? strerror(err) : "unknown error");
}

int npy_write(const char *path, const tensor *t)
{
    const char *who = "npy_write";
    unsigned char pre[NPY_PREAMBLE_MAX];
    size_t pre_len;
    int status = npy_format_preamble(t->ndim, t->shape, pre, sizeof pre,
                                     &pre_len);
    if (status)
        return status;

    /* a temporary beside path, renamed over it once complete and on disk:
     * path itself is only touched by that rename (fileset.h) */
    fileset *set;
    FILE *f;
    fileset_failure why;
    status = fileset_open(who, path, &set, &f, &why);
    if (status && why.step == FILESET_CREATE)
        return npy_fail_at(GSL_EFAILED, who, path,
                       "cannot create a temporary file next to it: %s",
                       strerror(why.err));
    if (status)
        return status;
    if (put_npy(f, t, pre, pre_len) != 0) {
        int e = errno;
        fileset_end(set);
        return left_unchanged(who, path, "write failed", e);
    }
    status = fileset_commit(set, &why);
    fileset_end(set);
    switch (status ? why.step : FILESET_OK) {
    case FILESET_WRITE:
        return left_unchanged(who, path, "write failed", why.err);
    case FILESET_MODE:
        return left_unchanged(who, path,
                              "cannot set the permissions of the temporary "
                              "file",
                              why.err);
    case FILESET_SYNC:
        return left_unchanged(who, path, "cannot flush to disk", why.err);
    case FILESET_RENAME:
        return left_unchanged(who, path,
                              "cannot rename the temporary file over it",
                              why.err);
    default:
        return status;
    }
}
//<
