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
#include "npy.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "fileset.h"
#include "trace.h"

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

/* --- messages -------------------------------------------------------- */

/* Record "who: path: message". */
__attribute__((format(printf, 4, 5))) static int
fail_at(int status, const char *who, const char *path, const char *fmt, ...)
{
    char msg[MHA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mha_fail(status, "%s: %s: %s", who, path, msg);
}

/* A message quotes at most SHOW_MAX bytes of the file, each shown as
 * itself when printable ASCII and as \xNN otherwise, so a hostile header
 * cannot put a newline or a terminal escape into the one-line message. */
#define SHOW_MAX 64
#define SHOW_CAP (4 * SHOW_MAX + 4)

static const char *printable(char *buf, size_t cap, const char *s, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n && i < SHOW_MAX; i++) {
        unsigned char c = (unsigned char)s[i];
        if (used + 8 > cap)
            break;
        if (c >= 0x20 && c < 0x7f)
            buf[used++] = (char)c;
        else
            used += (size_t)snprintf(buf + used, cap - used, "\\x%02x", c);
        buf[used] = '\0';
    }
    if (n > SHOW_MAX && used + 4 <= cap)
        memcpy(buf + used, "...", 4);
    return buf;
}

/* --- the header: a Python dict literal ------------------------------- */

enum { KEY_DESCR, KEY_FORTRAN, KEY_SHAPE, NKEYS };
static const char *const key_names[NKEYS] = {"descr", "fortran_order",
                                             "shape"};

/* More sizes than a tensor has are still counted and, up to this many,
 * kept, so the message about a 5-d array can print its shape. */
#define SHAPE_KEEP 16

typedef struct parser {
    const char *who, *path;
    const char *h;  /* the header, without its final '\n' */
    size_t len;     /* its length */
    size_t pos;     /* the next byte to look at */
    int allow_long; /* versions 1.0 and 2.0: Python 2's 3L is a size */

    int seen[NKEYS];
    const char *descr; /* the descr string's contents, not terminated */
    size_t descr_len;
    int fortran_order;
    const char *shape_text; /* "(2, 3)" as written, for messages */
    size_t shape_text_len;
    size_t ndim; /* how many sizes the tuple has */
    size_t shape[SHAPE_KEEP];
} parser;

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Characters that end a bare token such as True or 12. */
static int is_delim(char c)
{
    return is_space(c) || (c != '\0' && strchr(",:{}()[]'\"", c) != NULL);
}

static void skip_space(parser *p)
{
    while (p->pos < p->len && is_space(p->h[p->pos]))
        p->pos++;
}

/* The token at pos as a message shows it: a whole quoted string, a bare
 * word, or one punctuation character. */
static const char *token_at(const parser *p, size_t pos, char *buf,
                            size_t cap)
{
    if (pos >= p->len)
        return "the end of the header";
    const char *s = p->h + pos;
    size_t n = 1, rest = p->len - pos;
    if (*s == '\'' || *s == '"') {
        while (n < rest && s[n] != *s)
            n++;
        if (n < rest)
            n++;
    } else if (!is_delim(*s)) {
        while (n < rest && !is_delim(s[n]))
            n++;
    }
    return printable(buf, cap, s, n);
}

__attribute__((format(printf, 2, 3))) static int
header_error(const parser *p, const char *fmt, ...)
{
    char msg[MHA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return fail_at(GSL_EINVAL, p->who, p->path, "%s", msg);
}

/* "malformed header: expected ':' after 'descr', found = (header byte 9)" */
static int expected(const parser *p, const char *what)
{
    char tok[SHOW_CAP];
    return header_error(p, "malformed header: expected %s, found %s (header byte %zu)",
                        what, token_at(p, p->pos, tok, sizeof tok), p->pos);
}

/* A quoted string (no escapes: nothing this reader accepts needs one). */
static int parse_string(parser *p, const char *what, const char **s,
                        size_t *n)
{
    if (p->pos >= p->len || (p->h[p->pos] != '\'' && p->h[p->pos] != '"'))
        return expected(p, what);
    char quote = p->h[p->pos];
    size_t start = p->pos + 1, end = start;
    for (; end < p->len && p->h[end] != quote; end++) {
        unsigned char c = (unsigned char)p->h[end];
        if (c == '\\' || c < 0x20 || c >= 0x7f) {
            char shown[SHOW_CAP];
            return header_error(p,
                                "malformed header: the string at header byte %zu "
                                "holds %s; escapes and non-ASCII characters "
                                "are not supported",
                                p->pos, printable(shown, sizeof shown,
                                                  p->h + end, 1));
        }
    }
    if (end >= p->len)
        return header_error(p,
                            "malformed header: the string at header byte %zu "
                            "is not closed",
                            p->pos);
    *s = p->h + start;
    *n = end - start;
    p->pos = end + 1;
    return GSL_SUCCESS;
}

/* True or False, as Python writes them. */
static int parse_fortran_order(parser *p)
{
    size_t start = p->pos, end = start;
    while (end < p->len && !is_delim(p->h[end]))
        end++;
    size_t n = end - start;
    if (n == 4 && memcmp(p->h + start, "True", 4) == 0)
        p->fortran_order = 1;
    else if (n == 5 && memcmp(p->h + start, "False", 5) == 0)
        p->fortran_order = 0;
    else {
        char tok[SHOW_CAP];
        return header_error(p, "fortran_order must be True or False, found %s",
                            token_at(p, start, tok, sizeof tok));
    }
    p->pos = end;
    return GSL_SUCCESS;
}

/* One size of the shape tuple, item[0..n), already trimmed. */
static int parse_size(parser *p, const char *item, size_t n, size_t *value)
{
    char shape[SHOW_CAP], entry[SHOW_CAP];
    printable(shape, sizeof shape, p->shape_text, p->shape_text_len);
    printable(entry, sizeof entry, item, n);
    size_t digits = n;
    if (p->allow_long && digits > 1 && item[digits - 1] == 'L')
        digits--;
    int negative = n > 1 && item[0] == '-';
    size_t first = negative ? 1 : 0;
    int all_digits = digits > first;
    for (size_t i = first; i < digits; i++)
        all_digits &= item[i] >= '0' && item[i] <= '9';
    if (!all_digits)
        return header_error(p, "shape %s has an entry %s that is not an integer",
                            shape, entry);
    if (negative)
        return header_error(p, "shape %s has a negative size %s", shape, entry);
    size_t v = 0;
    for (size_t i = 0; i < digits; i++) {
        size_t d = (size_t)(item[i] - '0');
        if (v > (SIZE_MAX - d) / 10)
            return fail_at(GSL_EOVRFLW, p->who, p->path,
                           "shape %s has a size %s that does not fit in size_t",
                           shape, entry);
        v = v * 10 + d;
    }
    *value = v;
    return GSL_SUCCESS;
}

/* A tuple of sizes: (), (3,), (2, 3), (2, 3,) ... */
static int parse_shape(parser *p)
{
    if (p->pos >= p->len || p->h[p->pos] != '(') {
        char tok[SHOW_CAP];
        return header_error(p, "shape must be a tuple such as (2, 3), found %s",
                            token_at(p, p->pos, tok, sizeof tok));
    }
    size_t open = p->pos, close = open + 1;
    while (close < p->len && p->h[close] != ')')
        close++;
    if (close >= p->len)
        return header_error(p,
                            "malformed header: the shape tuple at header byte "
                            "%zu is not closed",
                            open);
    p->shape_text = p->h + open;
    p->shape_text_len = close + 1 - open;

    /* The items between the commas, each trimmed of blanks. */
    size_t commas = 0, start = open + 1;
    p->ndim = 0;
    for (;;) {
        size_t end = start;
        while (end < close && p->h[end] != ',')
            end++;
        size_t a = start, b = end;
        while (a < b && is_space(p->h[a]))
            a++;
        while (b > a && is_space(p->h[b - 1]))
            b--;
        int last = end == close;
        if (a == b) {
            /* only the last item may be empty: the inside of () or what
             * follows the trailing comma of (3,) */
            if (!last) {
                char shape[SHOW_CAP];
                return header_error(p, "shape %s is malformed: it has an empty entry",
                                    printable(shape, sizeof shape,
                                              p->shape_text,
                                              p->shape_text_len));
            }
        } else {
            size_t v = 0;
            int status = parse_size(p, p->h + a, b - a, &v);
            if (status)
                return status;
            if (p->ndim < SHAPE_KEEP)
                p->shape[p->ndim] = v;
            p->ndim++;
        }
        if (last)
            break;
        commas++;
        start = end + 1;
    }
    if (p->ndim == 1 && commas == 0) {
        char shape[SHOW_CAP];
        printable(shape, sizeof shape, p->shape_text, p->shape_text_len);
        return header_error(p,
                            "shape %s is not a tuple (Python reads it as a "
                            "number); a 1-D shape is written (%zu,)",
                            shape, p->shape[0]);
    }
    p->pos = close + 1;
    return GSL_SUCCESS;
}

/* One "key: value" entry. */
static int parse_entry(parser *p)
{
    size_t key_pos = p->pos;
    const char *key;
    size_t key_len;
    int status = parse_string(p, "a quoted key or '}'", &key, &key_len);
    if (status)
        return status;
    int k = 0;
    while (k < NKEYS && !(strlen(key_names[k]) == key_len &&
                          memcmp(key_names[k], key, key_len) == 0))
        k++;
    if (k == NKEYS) {
        char shown[SHOW_CAP];
        return header_error(p,
                            "header has an unknown key '%s' (header byte %zu); "
                            "the keys are 'descr', 'fortran_order' and 'shape'",
                            printable(shown, sizeof shown, key, key_len),
                            key_pos);
    }
    if (p->seen[k])
        return header_error(p, "header has the key '%s' twice (header byte %zu)",
                            key_names[k], key_pos);
    p->seen[k] = 1;

    skip_space(p);
    if (p->pos >= p->len || p->h[p->pos] != ':') {
        char what[40];
        snprintf(what, sizeof what, "':' after '%s'", key_names[k]);
        return expected(p, what);
    }
    p->pos++;
    skip_space(p);
    switch (k) {
    case KEY_DESCR:
        if (p->pos < p->len && p->h[p->pos] == '[')
            return header_error(p,
                                "descr is a list of fields (a structured "
                                "dtype); only '<f8', '<f4', '<i8' and '<i4' "
                                "are supported");
        if (p->pos >= p->len ||
            (p->h[p->pos] != '\'' && p->h[p->pos] != '"')) {
            char tok[SHOW_CAP];
            return header_error(p, "descr must be a string such as '<f8', found %s",
                                token_at(p, p->pos, tok, sizeof tok));
        }
        return parse_string(p, "a string", &p->descr, &p->descr_len);
    case KEY_FORTRAN:
        return parse_fortran_order(p);
    default:
        return parse_shape(p);
    }
}

/* The whole header: { entries } then blanks. */
static int parse_dict(parser *p)
{
    skip_space(p);
    if (p->pos >= p->len || p->h[p->pos] != '{')
        return expected(p, "'{' (the header is a Python dict)");
    p->pos++;
    for (;;) {
        skip_space(p);
        if (p->pos < p->len && p->h[p->pos] == '}')
            break;
        int status = parse_entry(p);
        if (status)
            return status;
        skip_space(p);
        if (p->pos < p->len && p->h[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->h[p->pos] == '}')
            break;
        return expected(p, "',' or '}'");
    }
    p->pos++; /* the '}' */
    skip_space(p);
    if (p->pos < p->len) {
        char tok[SHOW_CAP];
        return header_error(p,
                            "malformed header: %s after the closing '}' "
                            "(header byte %zu)",
                            token_at(p, p->pos, tok, sizeof tok), p->pos);
    }
    for (int k = 0; k < NKEYS; k++)
        if (!p->seen[k])
            return header_error(p, "header has no '%s' key", key_names[k]);
    return GSL_SUCCESS;
}

/* --- what the header says, checked ----------------------------------- */

static const struct {
    const char *descr;
    size_t itemsize;
} dtypes[] = {{"<f8", 8}, {"<f4", 4}, {"<i8", 8}, {"<i4", 4}, {"|b1", 1}};
#define NDTYPES (sizeof dtypes / sizeof dtypes[0])

static int check_descr(const parser *p, npy_header *h)
{
    for (size_t i = 0; i < NDTYPES; i++)
        if (p->descr_len == 3 && memcmp(p->descr, dtypes[i].descr, 3) == 0) {
            memcpy(h->descr, dtypes[i].descr, 4);
            h->itemsize = dtypes[i].itemsize;
            return GSL_SUCCESS;
        }
    char shown[SHOW_CAP];
    printable(shown, sizeof shown, p->descr, p->descr_len);
    /* a type we know in another byte order: say what is wrong with it */
    for (size_t i = 0; p->descr_len == 3 && i < NDTYPES; i++) {
        if (memcmp(p->descr + 1, dtypes[i].descr + 1, 2) != 0)
            continue;
        if (p->descr[0] == '>')
            return header_error(p,
                                "descr '%s' is big-endian; only little-endian "
                                "'<f8', '<f4', '<i8' and '<i4' are supported "
                                "(save a.astype('%s'))",
                                shown, dtypes[i].descr);
        if (p->descr[0] == '=' || p->descr[0] == '|')
            return header_error(p,
                                "descr '%s' does not say which byte order its "
                                "numbers are in; expected '%s'",
                                shown, dtypes[i].descr);
    }
    return header_error(p,
                        "descr '%s' is not supported; expected '<f8' or '<f4' "
                        "(floats), '<i8' or '<i4' (integers), '|b1' (bool)",
                        shown);
}

static int check_shape(const parser *p, npy_header *h)
{
    char s[SHOW_CAP];
    if (p->ndim <= SHAPE_KEEP)
        shape_str(s, sizeof s, p->ndim, p->shape);
    else
        printable(s, sizeof s, p->shape_text, p->shape_text_len);
    if (p->ndim == 0)
        return header_error(p,
                            "shape () is a 0-d array (a scalar); a tensor has 1 "
                            "to %d dimensions",
                            TENSOR_MAX_DIMS);
    if (p->ndim > TENSOR_MAX_DIMS)
        return header_error(p,
                            "shape %s has %zu dimensions; a tensor has 1 to %d",
                            s, p->ndim, TENSOR_MAX_DIMS);
    size_t numel = 1;
    for (size_t d = 0; d < p->ndim; d++)
        if (p->shape[d] == 0)
            return header_error(p,
                                "shape %s has size 0 in dimension %zu (an empty "
                                "array); tensor sizes must be >= 1",
                                s, d);
    for (size_t d = 0; d < p->ndim; d++) {
        if (numel > SIZE_MAX / p->shape[d])
            return fail_at(GSL_EOVRFLW, p->who, p->path,
                           "shape %s has more elements than size_t can count",
                           s);
        numel *= p->shape[d];
    }
    if (numel > SIZE_MAX / h->itemsize)
        return fail_at(GSL_EOVRFLW, p->who, p->path,
                       "shape %s of '%s' has %zu elements of %zu bytes, more "
                       "bytes than size_t can count",
                       s, h->descr, numel, h->itemsize);
    h->ndim = p->ndim;
    memcpy(h->shape, p->shape, p->ndim * sizeof p->shape[0]);
    h->numel = numel;
    h->data_bytes = numel * h->itemsize;
    return GSL_SUCCESS;
}

/* Parse and check header[0..len), which ends in '\n', into h. */
static int parse_header(const char *who, const char *path, const char *header,
                        size_t len, unsigned major, npy_header *h)
{
    parser p = {.who = who, .path = path, .h = header, .len = len,
                .allow_long = major <= 2};
    if (len == 0)
        return header_error(&p, "header is empty (header length 0)");
    if (header[len - 1] != '\n') {
        char shown[SHOW_CAP];
        return header_error(&p,
                            "header does not end with a newline: its last byte "
                            "is '%s'",
                            printable(shown, sizeof shown, header + len - 1, 1));
    }
    p.len = len - 1;
    int status = parse_dict(&p);
    if (status == GSL_SUCCESS)
        status = check_descr(&p, h);
    if (status == GSL_SUCCESS && p.fortran_order)
        status = header_error(&p,
                              "fortran_order is True; only C order is supported "
                              "(save np.ascontiguousarray(a))");
    if (status == GSL_SUCCESS)
        status = check_shape(&p, h);
    return status;
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
        return fail_at(GSL_EFAILED, who, path, "cannot open: %s",
                       strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail_at(GSL_EFAILED, who, path, "cannot stat: %s", strerror(e));
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        return fail_at(GSL_EFAILED, who, path,
                       "is a directory, not a .npy file");
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail_at(GSL_EFAILED, who, path, "is not a regular file");
    }
    if ((uintmax_t)st.st_size > SIZE_MAX) {
        close(fd);
        return fail_at(GSL_EOVRFLW, who, path,
                       "file of %jd bytes is larger than size_t can count",
                       (intmax_t)st.st_size);
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        return fail_at(GSL_EFAILED, who, path, "cannot open: %s", strerror(e));
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
        return fail_at(GSL_EFAILED, who, path, "cannot read the %s: %s", what,
                       strerror(errno));
    return fail_at(GSL_EFAILED, who, path,
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
        return fail_at(GSL_EINVAL, who, path, "empty file (0 bytes), not a .npy file");

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
        return fail_at(GSL_EINVAL, who, path,
                       "not a .npy file: it starts with the bytes %s, not the "
                       "magic string 93 4e 55 4d 50 59 (\"\\x93NUMPY\")",
                       hex);
    }
    if (size < 8)
        return fail_at(GSL_EINVAL, who, path,
                       "file of %zu bytes ends before the format version "
                       "(bytes 6 and 7)",
                       size);
    unsigned major = pre[6], minor = pre[7];
    if (major < 1 || major > 3 || minor != 0)
        return fail_at(GSL_EINVAL, who, path,
                       "unsupported format version %u.%u; this reader knows "
                       "1.0, 2.0 and 3.0",
                       major, minor);

    /* pass 2: the header length, 2 bytes in version 1.0, 4 after */
    size_t len_bytes = major == 1 ? 2 : 4, pre_len = 8 + len_bytes;
    if (size < pre_len)
        return fail_at(GSL_EINVAL, who, path,
                       "file of %zu bytes ends inside the header length "
                       "(bytes 8 to %zu of a version %u.0 file)",
                       size, pre_len - 1, major);
    status = read_exact(who, path, f, pre + 8, len_bytes, "preamble");
    if (status)
        return status;
    size_t header_len = (size_t)get_le(pre + 8, len_bytes);
    if (header_len > size - pre_len)
        return fail_at(GSL_EBADLEN, who, path,
                       "header length %zu runs past the end of the file (%ju "
                       "bytes of preamble and header, the file has %zu)",
                       header_len, (uintmax_t)pre_len + header_len, size);

    /* pass 3: the header itself */
    char *header = mha_malloc(header_len ? header_len : 1, 1, who);
    if (!header)
        return GSL_ENOMEM;
    status = read_exact(who, path, f, header, header_len, "header");
    if (status == GSL_SUCCESS)
        status = parse_header(who, path, header, header_len, major, h);
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
        shape_str(s, sizeof s, h->ndim, h->shape);
        if (follow < h->data_bytes)
            return fail_at(GSL_EBADLEN, who, path,
                           "header says shape %s of '%s' (%zu bytes) but only "
                           "%zu bytes follow",
                           s, h->descr, h->data_bytes, follow);
        return fail_at(GSL_EBADLEN, who, path,
                       "header says shape %s of '%s' (%zu bytes) but %zu bytes "
                       "follow (%zu extra)",
                       s, h->descr, h->data_bytes, follow,
                       follow - h->data_bytes);
    }
    return GSL_SUCCESS;
}

int npy_read_header(const char *path, npy_header *h)
{
    const char *who = "npy_read_header";
    memset(h, 0, sizeof *h);
    FILE *f = NULL;
    size_t size = 0;
    int status = open_regular(who, path, &f, &size);
    if (status)
        return status;
    status = read_header_from(who, path, f, size, h);
    fclose(f);
    if (status)
        memset(h, 0, sizeof *h);
    return status;
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
                return fail_at(GSL_EINVAL, who, path,
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
            return fail_at(GSL_EINVAL, who, path,
                           "element %s of shape %s is %" PRId64 ", which a "
                           "double cannot hold exactly",
                           shape_str(is, sizeof is, h->ndim, idx),
                           shape_str(s, sizeof s, h->ndim, h->shape), v);
        }
    }
    return GSL_SUCCESS;
}

/* The tensor in f (size bytes, named path in messages) into *out, and
 * its header into *h. */
static int read_stream(const char *who, const char *path, FILE *f,
                       size_t size, tensor **out, npy_header *h)
{
    int status = read_header_from(who, path, f, size, h);
    tensor *t = NULL;
    if (status == GSL_SUCCESS)
        status = tensor_alloc(h->ndim, h->shape, &t);
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

int npy_read_typed(const char *path, tensor **out, npy_header *h)
{
    const char *who = "npy_read";
    *out = NULL;
    memset(h, 0, sizeof *h);
    FILE *f = NULL;
    size_t size = 0;
    int status = open_regular(who, path, &f, &size);
    if (status)
        return status;
    status = read_stream(who, path, f, size, out, h);
    fclose(f);
    return status;
}

int npy_read(const char *path, tensor **out)
{
    npy_header h;
    return npy_read_typed(path, out, &h);
}

int npy_read_memory(const void *bytes, size_t size, const char *name,
                    tensor **out, npy_header *h)
{
    const char *who = "npy_read";
    *out = NULL;
    memset(h, 0, sizeof *h);
    if (size == 0) // fmemopen refuses an empty buffer
        return fail_at(GSL_EINVAL, who, name,
                       "empty file (0 bytes), not a .npy file");
    FILE *f = fmemopen((void *)bytes, size, "rb");
    if (!f)
        return fail_at(GSL_ENOMEM, who, name, "cannot open in memory: %s",
                       strerror(errno));
    int status = read_stream(who, name, f, size, out, h);
    fclose(f);
    return status;
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
    shape_str(s, sizeof s, ndim, shape);
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

int npy_write_stream(FILE *f, const tensor *t)
{
    const char *who = "npy_write_stream";
    unsigned char pre[NPY_PREAMBLE_MAX];
    size_t pre_len;
    if (!f)
        return mha_fail(GSL_EINVAL, "%s: the stream is NULL", who);
    int status = npy_format_preamble(t->ndim, t->shape, pre, sizeof pre,
                                     &pre_len);
    if (status)
        return status;
    if (put_npy(f, t, pre, pre_len) != 0)
        return mha_fail(GSL_EFAILED, "%s: write failed: %s", who,
                        strerror(errno));
    return GSL_SUCCESS;
}

/* npy_write's message for a step of the commit that failed. */
static int left_unchanged(const char *who, const char *path, const char *step,
                          int err)
{
    return fail_at(GSL_EFAILED, who, path,
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
        return fail_at(GSL_EFAILED, who, path,
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
