//> handout
/* npy_header.c: a .npy file's header, a Python dict literal, parsed and
 * checked without looking past its length; and the messages the reader
 * words (see npy.c). */
#include "io/npy.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "io/npy_internal.h"
#include "trace/trace.h"

/* --- messages -------------------------------------------------------- */

/* Record "who: path: message". */
int npy_fail_at(int status, const char *who, const char *path, const char *fmt,
                ...)
{
    char msg[MHA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return mha_fail(status, "%s: %s: %s", who, path, msg);
}

const char *npy_printable(char *buf, size_t cap, const char *s, size_t n)
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
    return npy_printable(buf, cap, s, n);
}

__attribute__((format(printf, 2, 3))) static int
header_error(const parser *p, const char *fmt, ...)
{
    char msg[MHA_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return npy_fail_at(GSL_EINVAL, p->who, p->path, "%s", msg);
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
                                p->pos, npy_printable(shown, sizeof shown,
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
    npy_printable(shape, sizeof shape, p->shape_text, p->shape_text_len);
    npy_printable(entry, sizeof entry, item, n);
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
            return npy_fail_at(GSL_EOVRFLW, p->who, p->path,
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
                                    npy_printable(shape, sizeof shape,
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
        npy_printable(shape, sizeof shape, p->shape_text, p->shape_text_len);
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
                            npy_printable(shown, sizeof shown, key, key_len),
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
    npy_printable(shown, sizeof shown, p->descr, p->descr_len);
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
        trace_dims_str(s, sizeof s, p->ndim, p->shape);
    else
        npy_printable(s, sizeof s, p->shape_text, p->shape_text_len);
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
            return npy_fail_at(GSL_EOVRFLW, p->who, p->path,
                           "shape %s has more elements than size_t can count",
                           s);
        numel *= p->shape[d];
    }
    if (numel > SIZE_MAX / h->itemsize)
        return npy_fail_at(GSL_EOVRFLW, p->who, p->path,
                       "shape %s of '%s' has %zu elements of %zu bytes, more "
                       "bytes than size_t can count",
                       s, h->descr, numel, h->itemsize);
    h->ndim = p->ndim;
    memcpy(h->shape, p->shape, p->ndim * sizeof p->shape[0]);
    h->numel = numel;
    h->data_bytes = numel * h->itemsize;
    return GSL_SUCCESS;
}

int npy_parse_header(const char *who, const char *path, const char *header,
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
                            npy_printable(shown, sizeof shown, header + len - 1, 1));
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
//<
