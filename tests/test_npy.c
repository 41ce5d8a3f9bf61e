//> full
/* test_npy.c: reading and writing NumPy .npy files (src/io/npy.h).
 *
 * Four kinds of evidence:
 *   - files NumPy wrote (tests/fixtures/npy/, made by
 *     tools/make_npy_fixtures.py) read back to the values NumPy saved;
 *   - files built here byte by byte, each wrong in one way, refused with
 *     their exact status and message, by npy_read and npy_read_header;
 *   - what npy_write writes, compared byte for byte with np.save's output,
 *     read back bit for bit, and written atomically;
 *   - when python3 with numpy is around, NumPy itself loading our files.
 *
 * Tests that make files run in a scratch directory of their own (created
 * in .init, removed in .fini), so the paths in messages are short and
 * fixed: "npy_read: bad.npy: ...". */
#include "check.h" /* first: it brings criterion.h before parameterized.h */

#include <criterion/parameterized.h>
#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <ftw.h>
#include <signal.h>
#include <stdint.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"

#define FIXTURES "tests/fixtures/npy/"

/* --- a scratch directory per test (scratch.h) ----------------------- */

static void enter_scratch(void) { scratch_enter("npy-test"); }

static void leave_scratch(void) { scratch_leave(); }

/* --- bytes on disk --------------------------------------------------- */

static void put_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* The whole file; free() it. */
static unsigned char *slurp_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "fopen(%s): %s", path, strerror(errno));
    size_t cap = 1 << 16;
    unsigned char *buf = malloc(cap);
    cr_assert_not_null(buf);
    *n = fread(buf, 1, cap, f);
    cr_assert(feof(f), "%s is larger than the tests expect", path);
    fclose(f);
    return buf;
}

/* x as the 8 little-endian bytes of a .npy '<f8' element. */
static void le_f8(double x, unsigned char *b)
{
    uint64_t u;
    memcpy(&u, &x, sizeof u);
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(u >> (8 * i));
}

/* The lesson's test values: element k of a shape is k * 0.5 - 3, the
 * same rule as tools/make_npy_fixtures.py (exact in float32 too). */
static double arange_value(size_t k) { return (double)k * 0.5 - 3; }

/* A .npy file: magic, version major.minor, the length of header (2 bytes
 * little-endian in 1.0, 4 after), header exactly as given, then data_len
 * bytes of '<f8' arange values (the last one cut short if need be). */
static void put_npy(const char *path, unsigned major, unsigned minor,
                    const char *header, size_t data_len)
{
    size_t header_len = strlen(header), len_bytes = major == 1 ? 2 : 4;
    size_t pre = 8 + len_bytes, total = pre + header_len + data_len;
    unsigned char *buf = malloc(total + 8);
    cr_assert_not_null(buf);
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = (unsigned char)minor;
    for (size_t i = 0; i < len_bytes; i++)
        buf[8 + i] = (unsigned char)(header_len >> (8 * i));
    memcpy(buf + pre, header, header_len);
    for (size_t k = 0; 8 * k < data_len; k++)
        le_f8(arange_value(k), buf + pre + header_len + 8 * k);
    put_bytes(path, buf, total);
    free(buf);
}

/* The common case: version 1.0, the dict and its '\n', data_len bytes. */
static void put_dict(const char *path, const char *dict, size_t data_len)
{
    char header[1024];
    snprintf(header, sizeof header, "%s\n", dict);
    put_npy(path, 1, 0, header, data_len);
}

/* --- expectations ---------------------------------------------------- */

/* Both npy_read and npy_read_header refuse path with status and the
 * message "<function>: <path>: <rest>", leaving *out NULL and *h zeroed. */
static void rejects(const char *path, int status, const char *rest)
{
    char want[1024];
    tensor dummy, *t = &dummy;
    snprintf(want, sizeof want, "npy_read: %s: %s", path, rest);
    mha_clear_error();
    int got = npy_read(path, &t);
    cr_assert_eq(got, status, "npy_read(%s) returned %d, expected %d: %s",
                 path, got, status, mha_last_error());
    cr_assert_str_eq(mha_last_error(), want);
    cr_assert_null(t, "npy_read(%s) failed but left *out set", path);

    npy_header h, zero;
    memset(&h, 0xab, sizeof h);
    memset(&zero, 0, sizeof zero);
    snprintf(want, sizeof want, "npy_read_header: %s: %s", path, rest);
    mha_clear_error();
    got = npy_read_header(path, &h);
    cr_assert_eq(got, status, "npy_read_header(%s) returned %d, expected %d: %s",
                 path, got, status, mha_last_error());
    cr_assert_str_eq(mha_last_error(), want);
    cr_assert(memcmp(&h, &zero, sizeof h) == 0,
              "npy_read_header(%s) failed but left *h filled in", path);
}

/* t has this shape, is contiguous, and holds arange values exactly. */
static void assert_arange(const tensor *t, size_t ndim, const size_t *shape)
{
    char got[TRACE_SHAPE_MAX], want[TRACE_SHAPE_MAX];
    cr_assert_str_eq(tensor_shape_str(t, got, sizeof got),
                     trace_dims_str(want, sizeof want, ndim, shape));
    cr_assert(tensor_is_contiguous(t));
    for (size_t k = 0; k < tensor_numel(t); k++)
        cr_assert_eq(t->data[k], arange_value(k), "element %zu: %.17g != %.17g",
                     k, t->data[k], arange_value(k));
}

static void assert_values(const tensor *t, const double *want, size_t n)
{
    cr_assert_eq(tensor_numel(t), n);
    for (size_t k = 0; k < n; k++)
        cr_assert(memcmp(&t->data[k], &want[k], sizeof(double)) == 0,
                  "element %zu: %.17g != %.17g", k, t->data[k], want[k]);
}

/* ===================================================================== */
/* Reading files NumPy wrote                                             */
/* ===================================================================== */

Test(npy, reads_numpy_float64_1d_to_4d)
{
    struct {
        const char *path;
        size_t ndim, shape[4];
    } files[] = {
        {FIXTURES "f8_1d.npy", 1, {6}},
        {FIXTURES "f8_2d.npy", 2, {2, 3}},
        {FIXTURES "f8_3d.npy", 3, {2, 3, 4}},
        {FIXTURES "f8_4d.npy", 4, {2, 1, 3, 2}},
    };
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        tensor *t;
        OK(npy_read(files[i].path, &t));
        assert_arange(t, files[i].ndim, files[i].shape);
        tensor_free(t);
    }
}

Test(npy, widens_numpy_float32_exactly)
{
    tensor *t;
    OK(npy_read(FIXTURES "f4_3d.npy", &t));
    assert_arange(t, 3, (size_t[]){2, 3, 4});
    tensor_free(t);

    /* 0.1 and 1/3 are not floats: NumPy stored the nearest float, and
     * widening that float to double is exact */
    OK(npy_read(FIXTURES "f4_inexact.npy", &t));
    double want[] = {(double)0.1f, -2.5, (double)(1.0f / 3.0f),
                     ldexp(1, -149), INFINITY};
    assert_values(t, want, 5);
    cr_assert_neq(t->data[0], 0.1);
    tensor_free(t);
}

Test(npy, reads_numpy_integer_valid_lens)
{
    const char *one_d[] = {FIXTURES "i8_1d.npy", FIXTURES "i4_1d.npy"};
    const char *two_d[] = {FIXTURES "i8_2d.npy", FIXTURES "i4_2d.npy"};
    for (int i = 0; i < 2; i++) {
        tensor *t;
        char s[TRACE_SHAPE_MAX];
        OK(npy_read(one_d[i], &t));
        cr_assert_str_eq(tensor_shape_str(t, s, sizeof s), "(2,)");
        assert_values(t, (double[]){3, 2}, 2);
        tensor_free(t);
        OK(npy_read(two_d[i], &t));
        cr_assert_str_eq(tensor_shape_str(t, s, sizeof s), "(2, 4)");
        assert_values(t, (double[]){1, 2, 3, 4, 2, 2, 3, 3}, 8);
        tensor_free(t);
    }
}

Test(npy, reads_integers_at_the_edges_of_double)
{
    tensor *t;
    OK(npy_read(FIXTURES "i8_edges.npy", &t));
    assert_values(t, (double[]){-7, 0, 9007199254740992.0, 0x1p62, -0x1p63}, 5);
    tensor_free(t);
    OK(npy_read(FIXTURES "i4_edges.npy", &t));
    assert_values(t, (double[]){-2147483648.0, 2147483647.0, -1}, 3);
    tensor_free(t);
}

Test(npy, refuses_int64_that_a_double_cannot_hold)
{
    tensor dummy, *t = &dummy;
    FAILS(npy_read(FIXTURES "i8_inexact.npy", &t), GSL_EINVAL,
          "npy_read: " FIXTURES "i8_inexact.npy: element (1,) of shape (2,) "
          "is 9007199254740993, which a double cannot hold exactly");
    cr_assert_null(t);
    /* the header alone is fine: the values are checked when read */
    npy_header h;
    OK(npy_read_header(FIXTURES "i8_inexact.npy", &h));
}

Test(npy, reads_numpy_versions_2_and_3)
{
    const char *paths[] = {FIXTURES "v2_2d.npy", FIXTURES "v3_2d.npy"};
    for (unsigned v = 2; v <= 3; v++) {
        npy_header h;
        OK(npy_read_header(paths[v - 2], &h));
        cr_assert_eq(h.major, v);
        cr_assert_eq(h.minor, 0);
        cr_assert_eq(h.data_offset, 128);
        tensor *t;
        OK(npy_read(paths[v - 2], &t));
        assert_arange(t, 2, (size_t[]){2, 3});
        tensor_free(t);
    }
}

Test(npy, read_header_describes_the_file)
{
    npy_header h;
    OK(npy_read_header(FIXTURES "f8_3d.npy", &h));
    cr_assert_eq(h.major, 1);
    cr_assert_eq(h.minor, 0);
    cr_assert_str_eq(h.descr, "<f8");
    cr_assert_eq(h.itemsize, 8);
    cr_assert_eq(h.fortran_order, 0);
    cr_assert_eq(h.ndim, 3);
    cr_assert_eq(h.shape[0], 2);
    cr_assert_eq(h.shape[1], 3);
    cr_assert_eq(h.shape[2], 4);
    cr_assert_eq(h.shape[3], 0);
    cr_assert_eq(h.numel, 24);
    cr_assert_eq(h.data_offset, 128);
    cr_assert_eq(h.data_bytes, 192);

    OK(npy_read_header(FIXTURES "i4_2d.npy", &h));
    cr_assert_str_eq(h.descr, "<i4");
    cr_assert_eq(h.itemsize, 4);
    cr_assert_eq(h.data_bytes, 32);
}

/* Files NumPy writes that a tensor cannot hold, each with its reason. */
struct refused {
    char name[24];
    int status;
    char rest[200];
};

ParameterizedTestParameters(npy, refuses_numpy_files)
{
    static struct refused cases[] = {
        {"fortran_2d", GSL_EINVAL,
         "fortran_order is True; only C order is supported "
         "(save np.ascontiguousarray(a))"},
        {"big_endian", GSL_EINVAL,
         "descr '>f8' is big-endian; only little-endian '<f8', '<f4', '<i8' "
         "and '<i4' are supported (save a.astype('<f8'))"},
        {"complex128", GSL_EINVAL,
         "descr '<c16' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"uint8", GSL_EINVAL,
         "descr '|u1' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"float16", GSL_EINVAL,
         "descr '<f2' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"object", GSL_EINVAL,
         "descr '|O' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"structured", GSL_EINVAL,
         "descr is a list of fields (a structured dtype); only '<f8', '<f4', "
         "'<i8' and '<i4' are supported"},
        {"scalar_0d", GSL_EINVAL,
         "shape () is a 0-d array (a scalar); a tensor has 1 to 4 dimensions"},
        {"five_d", GSL_EINVAL,
         "shape (1, 1, 1, 1, 2) has 5 dimensions; a tensor has 1 to 4"},
        {"empty", GSL_EINVAL,
         "shape (2, 0) has size 0 in dimension 1 (an empty array); tensor "
         "sizes must be >= 1"},
    };
    return cr_make_param_array(struct refused, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct refused *c, npy, refuses_numpy_files)
{
    char path[64];
    snprintf(path, sizeof path, FIXTURES "%s.npy", c->name);
    rejects(path, c->status, c->rest);
}

/* ===================================================================== */
/* Headers built by hand: what is accepted                               */
/* ===================================================================== */

struct accepted {
    char why[64];
    unsigned major;
    char header[200]; /* exactly as in the file, '\n' included */
};

ParameterizedTestParameters(npy, accepts_header_variants)
{
    static struct accepted cases[] = {
        {"NumPy's own layout", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }"
         "                                                          \n"},
        {"keys in any order, no trailing comma", 1,
         "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f8'}\n"},
        {"double quotes, no spaces", 1,
         "{\"descr\":\"<f8\",\"fortran_order\":False,\"shape\":(2,3)}\n"},
        {"whitespace everywhere, trailing comma in the tuple", 1,
         "  { 'descr' : '<f8' ,\t'fortran_order':False,\r\n 'shape' : "
         "( 2 , 3 , ) , }  \t \n"},
        {"no padding: the data need not be aligned", 1,
         "{'descr':'<f8','fortran_order':False,'shape':(2,3)}\n"},
        {"Python 2 long sizes in version 1.0", 1,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3L), }\n"},
        {"Python 2 long sizes in version 2.0", 2,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3), }\n"},
        {"version 3.0", 3,
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }\n"},
    };
    return cr_make_param_array(struct accepted, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct accepted *c, npy, accepts_header_variants,
                  .init = enter_scratch, .fini = leave_scratch)
{
    put_npy("ok.npy", c->major, 0, c->header, 48);
    tensor *t;
    int status = npy_read("ok.npy", &t);
    cr_assert_eq(status, GSL_SUCCESS, "%s: %s", c->why, mha_last_error());
    assert_arange(t, 2, (size_t[]){2, 3});
    tensor_free(t);
}

Test(npy, reads_every_supported_descr_from_handmade_files,
     .init = enter_scratch, .fini = leave_scratch)
{
    /* [-1, 2] in each of the four types, little-endian */
    unsigned char f8[16], f4[8] = {0x00, 0x00, 0x80, 0xbf, 0x00, 0x00, 0x00, 0x40};
    unsigned char i8[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2};
    unsigned char i4[8] = {0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0};
    le_f8(-1, f8);
    le_f8(2, f8 + 8);
    struct {
        const char *descr;
        const unsigned char *data;
        size_t len;
    } kinds[] = {{"<f8", f8, 16}, {"<f4", f4, 8}, {"<i8", i8, 16}, {"<i4", i4, 8}};
    for (int i = 0; i < 4; i++) {
        char header[128];
        int n = snprintf(header, sizeof header,
                         "{'descr': '%s', 'fortran_order': False, 'shape': (2,), }\n",
                         kinds[i].descr);
        unsigned char file[256] = "\x93NUMPY\x01\x00";
        file[8] = (unsigned char)n;
        memcpy(file + 10, header, (size_t)n);
        memcpy(file + 10 + n, kinds[i].data, kinds[i].len);
        put_bytes("k.npy", file, 10 + (size_t)n + kinds[i].len);
        tensor *t;
        OK(npy_read("k.npy", &t));
        assert_values(t, (double[]){-1, 2}, 2);
        tensor_free(t);
    }
}

/* The size bytes of a .npy file in memory, read as a .npz member is
 * (npy_stream_header, then npy_stream_numbers with bool_ok). */
static int read_member(const unsigned char *file, size_t size, tensor **t,
                       npy_header *h)
{
    *t = NULL;
    FILE *f = fmemopen((void *)file, size, "rb");
    cr_assert_not_null(f);
    int status = npy_stream_header(f, size, "m.npy", h);
    if (!status)
        status = npy_stream_numbers(f, "m.npy", h, 1, t);
    fclose(f);
    return status;
}

/* np.save of np.array([True, False]): '|b1', one byte each, read as 1, 0
 * where a mask is read, refused where numbers are; the same bytes as a
 * .npz member; a byte other than 0 or 1 is refused with its index. */
Test(npy, reads_numpy_bool_masks)
{
    tensor *t;
    npy_header h;
    OK(npy_read_typed(FIXTURES "bool.npy", &t, &h));
    cr_assert_str_eq(h.descr, "|b1");
    cr_assert_eq(h.itemsize, 1);
    assert_values(t, (double[]){1, 0}, 2);
    tensor_free(t);
    static const char refused[] =
        "npy_read: " FIXTURES "bool.npy: shape (2,) of '|b1' is bool, not "
        "numbers; expected '<f8' or '<f4' (floats), '<i8' or '<i4' "
        "(integers)";
    cr_assert_eq(npy_read(FIXTURES "bool.npy", &t), GSL_EINVAL);
    cr_assert_null(t);
    cr_assert_str_eq(mha_last_error(), refused);
    cr_assert_eq(npy_read_mapped(FIXTURES "bool.npy", &t), GSL_EINVAL);
    cr_assert_null(t);
    cr_assert_str_eq(mha_last_error(), refused);
    const char header[] =
        "{'descr': '|b1', 'fortran_order': False, 'shape': (2, 2), }\n";
    unsigned char file[256] = "\x93NUMPY\x01\x00";
    size_t n = sizeof header - 1;
    file[8] = (unsigned char)n;
    memcpy(file + 10, header, n);
    memcpy(file + 10 + n, (unsigned char[]){0, 1, 1, 0}, 4);
    OK(read_member(file, 14 + n, &t, &h));
    assert_values(t, (double[]){0, 1, 1, 0}, 4);
    tensor_free(t);
    FILE *f = fmemopen(file, 14 + n, "rb");
    OK(npy_stream_header(f, 14 + n, "m.npy", &h));
    cr_assert_eq(npy_stream_numbers(f, "m.npy", &h, 0, &t), GSL_EINVAL);
    fclose(f);
    cr_assert_null(t);
    cr_assert_str_eq(mha_last_error(),
                     "npy_read: m.npy: shape (2, 2) of '|b1' is bool, not "
                     "numbers; expected '<f8' or '<f4' (floats), '<i8' or "
                     "'<i4' (integers)");
    file[10 + n + 2] = 7;
    cr_assert_eq(read_member(file, 14 + n, &t, &h), GSL_EINVAL);
    cr_assert_null(t);
    cr_assert_str_eq(mha_last_error(),
                     "npy_read: m.npy: element 2 of a '|b1' array is the byte "
                     "7; a bool is 0 or 1");
}

/* ===================================================================== */
/* Files broken by hand: what is refused, and how it is said             */
/* ===================================================================== */

Test(npy, refuses_an_empty_file, .init = enter_scratch, .fini = leave_scratch)
{
    put_bytes("bad.npy", "", 0);
    rejects("bad.npy", GSL_EINVAL, "empty file (0 bytes), not a .npy file");
}

Test(npy, refuses_a_file_of_just_the_magic, .init = enter_scratch,
     .fini = leave_scratch)
{
    put_bytes("bad.npy", "\x93NUMPY", 6);
    rejects("bad.npy", GSL_EINVAL,
            "file of 6 bytes ends before the format version (bytes 6 and 7)");
    put_bytes("bad.npy", "\x93NU", 3);
    rejects("bad.npy", GSL_EINVAL,
            "file of 3 bytes ends before the format version (bytes 6 and 7)");
}

Test(npy, refuses_a_bad_magic_string, .init = enter_scratch,
     .fini = leave_scratch)
{
    put_dict("bad.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48);
    FILE *f = fopen("bad.npy", "r+b");
    cr_assert_not_null(f);
    fseek(f, 5, SEEK_SET);
    fputc('X', f);
    fclose(f);
    rejects("bad.npy", GSL_EINVAL,
            "not a .npy file: it starts with the bytes 93 4e 55 4d 50 58, not "
            "the magic string 93 4e 55 4d 50 59 (\"\\x93NUMPY\")");

    put_bytes("text.npy", "hello, world\n", 13);
    rejects("text.npy", GSL_EINVAL,
            "not a .npy file: it starts with the bytes 68 65 6c 6c 6f 2c, not "
            "the magic string 93 4e 55 4d 50 59 (\"\\x93NUMPY\")");

    put_bytes("zip.npy", "PK", 2); /* shorter than the magic: still named */
    rejects("zip.npy", GSL_EINVAL,
            "not a .npy file: it starts with the bytes 50 4b, not the magic "
            "string 93 4e 55 4d 50 59 (\"\\x93NUMPY\")");
}

Test(npy, refuses_unknown_versions, .init = enter_scratch,
     .fini = leave_scratch)
{
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }\n";
    put_npy("bad.npy", 9, 0, dict, 48);
    rejects("bad.npy", GSL_EINVAL,
            "unsupported format version 9.0; this reader knows 1.0, 2.0 and 3.0");
    put_npy("bad.npy", 1, 1, dict, 48);
    rejects("bad.npy", GSL_EINVAL,
            "unsupported format version 1.1; this reader knows 1.0, 2.0 and 3.0");
    put_npy("bad.npy", 0, 0, dict, 48);
    rejects("bad.npy", GSL_EINVAL,
            "unsupported format version 0.0; this reader knows 1.0, 2.0 and 3.0");
}

Test(npy, refuses_a_file_ending_inside_the_header_length,
     .init = enter_scratch, .fini = leave_scratch)
{
    put_bytes("bad.npy", "\x93NUMPY\x01\x00\x76", 9);
    rejects("bad.npy", GSL_EINVAL,
            "file of 9 bytes ends inside the header length (bytes 8 to 9 of a "
            "version 1.0 file)");
    put_bytes("bad.npy", "\x93NUMPY\x02\x00\x76\x00", 10);
    rejects("bad.npy", GSL_EINVAL,
            "file of 10 bytes ends inside the header length (bytes 8 to 11 of "
            "a version 2.0 file)");
}

Test(npy, refuses_a_header_length_past_the_end, .init = enter_scratch,
     .fini = leave_scratch)
{
    /* 1000 = e8 03; the file holds 64 bytes of header and no data */
    unsigned char v1[74] = "\x93NUMPY\x01\x00\xe8\x03";
    memset(v1 + 10, ' ', 63);
    v1[73] = '\n';
    put_bytes("bad.npy", v1, sizeof v1);
    rejects("bad.npy", GSL_EBADLEN,
            "header length 1000 runs past the end of the file (1010 bytes of "
            "preamble and header, the file has 74)");

    /* 4 GiB - 1 in version 2.0: refused before anything is allocated */
    put_bytes("big.npy", "\x93NUMPY\x02\x00\xff\xff\xff\xff{}\n", 15);
    rejects("big.npy", GSL_EBADLEN,
            "header length 4294967295 runs past the end of the file "
            "(4294967307 bytes of preamble and header, the file has 15)");
}

Test(npy, refuses_an_empty_header, .init = enter_scratch,
     .fini = leave_scratch)
{
    put_npy("bad.npy", 1, 0, "", 48);
    rejects("bad.npy", GSL_EINVAL, "header is empty (header length 0)");
}

Test(npy, refuses_a_header_not_ending_in_newline, .init = enter_scratch,
     .fini = leave_scratch)
{
    put_npy("bad.npy", 1, 0,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }    ",
            48);
    rejects("bad.npy", GSL_EINVAL,
            "header does not end with a newline: its last byte is ' '");
    put_npy("bad.npy", 1, 0,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 48);
    rejects("bad.npy", GSL_EINVAL,
            "header does not end with a newline: its last byte is '}'");
}

Test(npy, refuses_truncated_data, .init = enter_scratch, .fini = leave_scratch)
{
    put_dict("bad.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 47);
    rejects("bad.npy", GSL_EBADLEN,
            "header says shape (2, 3) of '<f8' (48 bytes) but only 47 bytes follow");
    put_dict("bad.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 4), }", 0);
    rejects("bad.npy", GSL_EBADLEN,
            "header says shape (2, 3, 4) of '<f4' (96 bytes) but only 0 bytes follow");
}

Test(npy, refuses_trailing_data, .init = enter_scratch, .fini = leave_scratch)
{
    put_dict("bad.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 49);
    rejects("bad.npy", GSL_EBADLEN,
            "header says shape (2, 3) of '<f8' (48 bytes) but 49 bytes follow "
            "(1 extra)");
    /* a float64 file mislabelled float32: twice the bytes */
    put_dict("bad.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", 48);
    rejects("bad.npy", GSL_EBADLEN,
            "header says shape (6,) of '<f4' (24 bytes) but 48 bytes follow "
            "(24 extra)");
}

Test(npy, refuses_a_missing_file, .init = enter_scratch, .fini = leave_scratch)
{
    rejects("missing.npy", GSL_EFAILED,
            "cannot open: No such file or directory");
    rejects("no/such/dir/x.npy", GSL_EFAILED,
            "cannot open: No such file or directory");
}

Test(npy, refuses_what_is_not_a_regular_file, .init = enter_scratch,
     .fini = leave_scratch)
{
    cr_assert_eq(mkdir("dir.npy", 0755), 0);
    rejects("dir.npy", GSL_EFAILED, "is a directory, not a .npy file");
    rejects("/dev/null", GSL_EFAILED, "is not a regular file");
    /* a FIFO with no writer: refused at once, not waited on */
    cr_assert_eq(mkfifo("fifo.npy", 0600), 0);
    rejects("fifo.npy", GSL_EFAILED, "is not a regular file");
}

/* One header dict (written with a '\n', as version 1.0, followed by the
 * 48 bytes a (2, 3) '<f8' array needs) and how it must be refused. */
struct malformed {
    char why[64];
    char dict[200];
    int status;
    char rest[300];
};

ParameterizedTestParameters(npy, refuses_malformed_headers)
{
    static struct malformed cases[] = {
        {"not a dict",
         "['descr', '<f8']", GSL_EINVAL,
         "malformed header: expected '{' (the header is a Python dict), "
         "found [ (header byte 0)"},
        {"missing key",
         "{'descr': '<f8', 'fortran_order': False, }", GSL_EINVAL,
         "header has no 'shape' key"},
        {"no keys at all",
         "{}", GSL_EINVAL, "header has no 'descr' key"},
        {"duplicate key",
         "{'descr': '<f8', 'descr': '<f8', 'fortran_order': False, "
         "'shape': (2, 3), }", GSL_EINVAL,
         "header has the key 'descr' twice (header byte 17)"},
        {"unknown key",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), "
         "'extra': 1, }", GSL_EINVAL,
         "header has an unknown key 'extra' (header byte 58); the keys are "
         "'descr', 'fortran_order' and 'shape'"},
        {"unknown key, long: cut short in the message",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), "
         "'0123456789012345678901234567890123456789012345678901234567890123456789"
         "': 1}", GSL_EINVAL,
         "header has an unknown key '0123456789012345678901234567890123456789"
         "012345678901234567890123...' (header byte 58); the keys are "
         "'descr', 'fortran_order' and 'shape'"},
        {"key not a string",
         "{descr: '<f8', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: expected a quoted key or '}', found descr "
         "(header byte 1)"},
        {"missing colon",
         "{'descr' '<f8', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: expected ':' after 'descr', found '<f8' "
         "(header byte 9)"},
        {"missing comma",
         "{'descr': '<f8' 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: expected ',' or '}', found 'fortran_order' "
         "(header byte 16)"},
        {"unclosed dict",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), ",
         GSL_EINVAL,
         "malformed header: expected a quoted key or '}', found the end of "
         "the header (header byte 58)"},
        {"something after the dict",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), } x",
         GSL_EINVAL,
         "malformed header: x after the closing '}' (header byte 60)"},
        {"string closed by the next key's quote",
         "{'descr': '<f8, 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: expected ',' or '}', found fortran_order "
         "(header byte 17)"},
        {"string running to the end",
         "{'descr': \"<f8}", GSL_EINVAL,
         "malformed header: the string at header byte 10 is not closed"},
        {"escape in a string",
         "{'descr': '<f\\x38', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: the string at header byte 10 holds \\; escapes "
         "and non-ASCII characters are not supported"},
        {"non-ASCII in a string",
         "{'descr': '<f8\xc3\xa9', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: the string at header byte 10 holds \\xc3; "
         "escapes and non-ASCII characters are not supported"},
        {"NUL byte between tokens",
         "{'descr': '<f8',\x01 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "malformed header: expected a quoted key or '}', found \\x01 "
         "(header byte 16)"},
        {"descr without quotes",
         "{'descr': <f8, 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL, "descr must be a string such as '<f8', found <f8"},
        {"descr without byte order",
         "{'descr': 'f8', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr 'f8' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"descr with a space",
         "{'descr': '<f8 ', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr '<f8 ' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"descr int16",
         "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr '<i2' is not supported; expected '<f8' or '<f4' (floats), "
         "'<i8' or '<i4' (integers), '|b1' (bool)"},
        {"descr big-endian int32",
         "{'descr': '>i4', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr '>i4' is big-endian; only little-endian '<f8', '<f4', '<i8' "
         "and '<i4' are supported (save a.astype('<i4'))"},
        {"descr native order",
         "{'descr': '=f8', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr '=f8' does not say which byte order its numbers are in; "
         "expected '<f8'"},
        {"descr order not applicable",
         "{'descr': '|f8', 'fortran_order': False, 'shape': (2, 3), }",
         GSL_EINVAL,
         "descr '|f8' does not say which byte order its numbers are in; "
         "expected '<f8'"},
        {"fortran_order a string",
         "{'descr': '<f8', 'fortran_order': 'maybe', 'shape': (2, 3), }",
         GSL_EINVAL, "fortran_order must be True or False, found 'maybe'"},
        {"fortran_order lower case",
         "{'descr': '<f8', 'fortran_order': false, 'shape': (2, 3), }",
         GSL_EINVAL, "fortran_order must be True or False, found false"},
        {"fortran_order a number",
         "{'descr': '<f8', 'fortran_order': 0, 'shape': (2, 3), }",
         GSL_EINVAL, "fortran_order must be True or False, found 0"},
        {"fortran_order True",
         "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }",
         GSL_EINVAL,
         "fortran_order is True; only C order is supported "
         "(save np.ascontiguousarray(a))"},
        {"shape a list",
         "{'descr': '<f8', 'fortran_order': False, 'shape': [2, 3], }",
         GSL_EINVAL, "shape must be a tuple such as (2, 3), found ["},
        {"shape a number in parentheses",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (6), }",
         GSL_EINVAL,
         "shape (6) is not a tuple (Python reads it as a number); a 1-D shape "
         "is written (6,)"},
        {"shape unclosed",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3}",
         GSL_EINVAL,
         "malformed header: the shape tuple at header byte 50 is not closed"},
        {"shape with an empty entry",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2,,3), }",
         GSL_EINVAL, "shape (2,,3) is malformed: it has an empty entry"},
        {"shape of just a comma",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (,), }",
         GSL_EINVAL, "shape (,) is malformed: it has an empty entry"},
        {"shape with a negative size",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, -3), }",
         GSL_EINVAL, "shape (2, -3) has a negative size -3"},
        {"shape with a name",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, x), }",
         GSL_EINVAL, "shape (2, x) has an entry x that is not an integer"},
        {"shape with a float",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3.0), }",
         GSL_EINVAL, "shape (2, 3.0) has an entry 3.0 that is not an integer"},
        {"shape with a nested tuple",
         "{'descr': '<f8', 'fortran_order': False, 'shape': ((2, 3)), }",
         GSL_EINVAL, "shape ((2, 3) has an entry (2 that is not an integer"},
        {"shape with a plus sign",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (+2, 3), }",
         GSL_EINVAL, "shape (+2, 3) has an entry +2 that is not an integer"},
        {"Python 2 long suffix alone",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (L, 3), }",
         GSL_EINVAL, "shape (L, 3) has an entry L that is not an integer"},
        {"shape of zero size",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }",
         GSL_EINVAL,
         "shape (0,) has size 0 in dimension 0 (an empty array); tensor sizes "
         "must be >= 1"},
        {"shape 0-d",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
         GSL_EINVAL,
         "shape () is a 0-d array (a scalar); a tensor has 1 to 4 dimensions"},
        {"shape 5-d",
         "{'descr': '<f8', 'fortran_order': False, 'shape': (1,1,1,2,3), }",
         GSL_EINVAL, "shape (1, 1, 1, 2, 3) has 5 dimensions; a tensor has 1 to 4"},
        {"shape 17-d",
         "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,6), }",
         GSL_EINVAL,
         "shape (1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,6) has 17 dimensions; a "
         "tensor has 1 to 4"},
        {"size past size_t",
         "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (18446744073709551616,), }",
         GSL_EOVRFLW,
         "shape (18446744073709551616,) has a size 18446744073709551616 that "
         "does not fit in size_t"},
        {"element count past size_t",
         "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (4294967296, 4294967296, 4294967296), }",
         GSL_EOVRFLW,
         "shape (4294967296, 4294967296, 4294967296) has more elements than "
         "size_t can count"},
        {"byte count past size_t",
         "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (4611686018427387904, 2), }",
         GSL_EOVRFLW,
         "shape (4611686018427387904, 2) of '<f8' has 9223372036854775808 "
         "elements of 8 bytes, more bytes than size_t can count"},
        {"largest size_t size: its byte count overflows",
         "{'descr': '<f4', 'fortran_order': False, "
         "'shape': (18446744073709551615,), }",
         GSL_EOVRFLW,
         "shape (18446744073709551615,) of '<f4' has 18446744073709551615 "
         "elements of 4 bytes, more bytes than size_t can count"},
        {"huge but countable",
         "{'descr': '<f8', 'fortran_order': False, "
         "'shape': (1000000, 1000000), }",
         GSL_EBADLEN,
         "header says shape (1000000, 1000000) of '<f8' (8000000000000 bytes) "
         "but only 48 bytes follow"},
    };
    return cr_make_param_array(struct malformed, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(struct malformed *c, npy, refuses_malformed_headers,
                  .init = enter_scratch, .fini = leave_scratch)
{
    cr_log_info("%s", c->why);
    put_dict("bad.npy", c->dict, 48);
    rejects("bad.npy", c->status, c->rest);
}

Test(npy, refuses_python2_longs_in_version_3, .init = enter_scratch,
     .fini = leave_scratch)
{
    put_npy("bad.npy", 3, 0,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3), }\n", 48);
    rejects("bad.npy", GSL_EINVAL,
            "shape (2L, 3) has an entry 2L that is not an integer");
}

/* Every prefix of a good file is refused, none crashes. */
Test(npy, refuses_every_prefix_of_a_good_file, .init = enter_scratch,
     .fini = leave_scratch)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" FIXTURES "f8_2d.npy", scratch_home);
    size_t n;
    unsigned char *good = slurp_file(path, &n);
    cr_assert_eq(n, 176);
    for (size_t len = 0; len < n; len++) {
        put_bytes("cut.npy", good, len);
        tensor dummy, *t = &dummy;
        int status = npy_read("cut.npy", &t);
        cr_assert_neq(status, GSL_SUCCESS, "a %zu-byte prefix was accepted", len);
        cr_assert_null(t);
        cr_assert(strncmp(mha_last_error(), "npy_read: cut.npy: ", 19) == 0,
                  "%s", mha_last_error());
    }
    put_bytes("cut.npy", good, n);
    tensor *t;
    OK(npy_read("cut.npy", &t));
    tensor_free(t);
    free(good);
}

/* Random damage to a good file: any outcome but a crash, a leak (the
 * sanitizers and valgrind watch), a set *out on failure, or a message of
 * more than one line. */
Test(npy, survives_random_damage, .init = enter_scratch, .fini = leave_scratch)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" FIXTURES "i8_2d.npy", scratch_home);
    size_t n;
    unsigned char *good = slurp_file(path, &n);
    unsigned char *bad = malloc(n + 16);
    cr_assert_not_null(bad);
    gsl_rng *r = mha_rng_new(20240611);
    cr_assert_not_null(r);
    int accepted = 0;
    for (int trial = 0; trial < 400; trial++) {
        memcpy(bad, good, n);
        size_t len = n;
        /* damage the preamble and header more often than the data */
        int flips = 1 + (int)gsl_rng_uniform_int(r, 4);
        for (int i = 0; i < flips; i++) {
            size_t at = gsl_rng_uniform_int(r, trial % 2 ? 128 : n);
            bad[at] = (unsigned char)gsl_rng_uniform_int(r, 256);
        }
        if (trial % 7 == 0)
            len = gsl_rng_uniform_int(r, n + 16);
        for (size_t i = n; i < len; i++)
            bad[i] = (unsigned char)gsl_rng_uniform_int(r, 256);
        put_bytes("fuzz.npy", bad, len);
        tensor dummy, *t = &dummy;
        mha_clear_error();
        int status = npy_read("fuzz.npy", &t);
        if (status == GSL_SUCCESS) {
            accepted++;
            cr_assert_not_null(t);
            cr_assert_geq(t->ndim, 1);
            cr_assert_leq(t->ndim, 4);
            tensor_free(t);
        } else {
            cr_assert_null(t);
            const char *msg = mha_last_error();
            cr_assert(strncmp(msg, "npy_read: fuzz.npy: ", 20) == 0, "%s", msg);
            cr_assert_null(strchr(msg, '\n'), "%s", msg);
        }
    }
    /* flips in the data or padding leave a readable file */
    cr_assert_gt(accepted, 0);
    gsl_rng_free(r);
    free(bad);
    free(good);
}

Test(npy, read_failure_injection_leaks_nothing)
{
    /* allocation k fails, for k = 0, 1, 2 ... until none is left to fail */
    for (long k = 0;; k++) {
        cr_assert_lt(k, 20, "npy_read still failing after 20 allocations");
        tensor dummy, *t = &dummy;
        mha_debug_fail_alloc_after(k);
        int status = npy_read(FIXTURES "f4_3d.npy", &t);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS) {
            cr_assert_gt(k, 0);
            assert_arange(t, 3, (size_t[]){2, 3, 4});
            tensor_free(t);
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM, "k = %ld: %s", k, mha_last_error());
        cr_assert_null(t);
    }
    npy_header h;
    mha_debug_fail_alloc_after(0);
    FAILS(npy_read_header(FIXTURES "f4_3d.npy", &h), GSL_ENOMEM,
          "npy_read_header: out of memory allocating 118 x 1 bytes");
    mha_debug_fail_alloc_after(-1);
    OK(npy_read_header(FIXTURES "f4_3d.npy", &h));
}

/* ===================================================================== */
/* Writing                                                               */
/* ===================================================================== */

/* Write x, read it back: same shape, contiguous, the same bits. */
static void round_trip(const tensor *x)
{
    OK(npy_write("rt.npy", x));
    tensor *y, *want;
    OK(npy_read("rt.npy", &y));
    OK(tensor_contiguous(x, &want));
    cr_assert(tensor_same_shape(x, y));
    cr_assert(tensor_is_contiguous(y));
    for (size_t k = 0; k < tensor_numel(y); k++) {
        if (isnan(want->data[k]))
            cr_assert(isnan(y->data[k]), "element %zu lost its NaN", k);
        else
            cr_assert(memcmp(&y->data[k], &want->data[k], sizeof(double)) == 0,
                      "element %zu: %.17g != %.17g", k, y->data[k],
                      want->data[k]);
    }
    FREE_ALL(want, y);
}

Test(npy, round_trips_1d_to_4d, .init = enter_scratch, .fini = leave_scratch)
{
    struct {
        size_t ndim, shape[4];
    } shapes[] = {{1, {1}}, {1, {7}}, {2, {2, 3}}, {3, {1, 2, 16}},
                  {4, {2, 3, 4, 5}}, {4, {1, 1, 1, 1}}};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        tensor *x;
        OK(tensor_alloc(shapes[i].ndim, shapes[i].shape, &x));
        tensor_fill_arange(x, -3, 0.5);
        round_trip(x);
        tensor_free(x);
    }
}

Test(npy, round_trips_special_values, .init = enter_scratch,
     .fini = leave_scratch)
{
    double v[] = {0.0, -0.0, 4.9406564584124654e-324 /* smallest subnormal */,
                  -2.2250738585072009e-308 /* largest subnormal */, DBL_MIN,
                  1e308, DBL_MAX, -DBL_MAX, INFINITY, -INFINITY, NAN, -NAN,
                  0.1, 1.0 / 3.0};
    size_t n = sizeof v / sizeof v[0];
    tensor *x;
    OK(tensor_from_array(SHAPE(n), v, &x));
    round_trip(x);
    tensor_free(x);
    cr_assert(signbit(-0.0));
}

Test(npy, round_trips_a_permuted_view, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x, *p;
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    tensor_fill_arange(x, -3, 0.5);
    OK(tensor_permute(x, SHAPE(2, 0, 1), &p)); /* (4, 2, 3), not contiguous */
    cr_assert(!tensor_is_contiguous(p));
    round_trip(p);
    /* and the file holds p in its own row-major order: p[1, 0, 2] first
     * comes at offset 1*6 + 0*3 + 2 = 8, and is x[0, 2, 1] */
    tensor *y;
    OK(npy_read("rt.npy", &y));
    cr_assert_eq(y->data[8], *TENSOR_AT(x, 0, 2, 1));
    FREE_ALL(y, p, x);
}

/* A view of more numbers than the writer's 64 KiB buffer holds (8192)
 * goes out through it in several blocks; a contiguous tensor in one: both
 * read back number for number, in the view's row-major order. */
Test(npy, round_trips_views_larger_than_the_buffer, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x, *p, *y;
    OK(tensor_alloc(SHAPE(3, 5000), &x));
    tensor_fill_arange(x, 0, 1);
    OK(tensor_permute(x, SHAPE(1, 0), &p)); /* (5000, 3), not contiguous */
    OK(npy_write("big.npy", p));
    OK(npy_read("big.npy", &y));
    cr_assert_eq(y->ndim, 2);
    cr_assert(y->shape[0] == 5000 && y->shape[1] == 3);
    for (size_t i = 0; i < 5000; i++)
        for (size_t j = 0; j < 3; j++)
            cr_assert_eq(y->data[i * 3 + j], (double)(j * 5000 + i),
                         "[%zu, %zu]", i, j);
    tensor_free(y);
    OK(npy_write("big.npy", x));
    OK(npy_read("big.npy", &y));
    cr_assert(y->shape[0] == 3 && y->shape[1] == 5000);
    cr_assert(memcmp(y->data, x->data, 15000 * sizeof(double)) == 0);
    FREE_ALL(y, p, x);
}

/* The preamble np.save writes for an array of `dict`'s shape: NumPy 1.24's
 * output, checked once with NumPy: magic, version 1.0, header length, the
 * dict, `spaces` spaces and a newline, 128 bytes in all. */
static void assert_numpy_preamble(const unsigned char *got, const char *dict,
                                  size_t spaces)
{
    unsigned char want[128];
    size_t dict_len = strlen(dict);
    cr_assert_eq(10 + dict_len + spaces + 1, 128);
    memcpy(want, "\x93NUMPY\x01\x00\x76\x00", 10); /* 0x76 = 118 = 128 - 10 */
    memcpy(want + 10, dict, dict_len);
    memset(want + 10 + dict_len, ' ', spaces);
    want[127] = '\n';
    for (size_t i = 0; i < 128; i++)
        cr_assert_eq(got[i], want[i], "byte %zu: 0x%02x, NumPy writes 0x%02x",
                     i, got[i], want[i]);
}

Test(npy, writes_what_numpy_writes, .init = enter_scratch,
     .fini = leave_scratch)
{
    struct {
        size_t ndim, shape[4];
        const char *dict;
        size_t spaces;
    } cases[] = {
        {2, {2, 3}, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 58},
        {1, {8}, "{'descr': '<f8', 'fortran_order': False, 'shape': (8,), }", 60},
        {3, {1, 2, 16}, "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2, 16), }", 54},
        {4, {2, 3, 4, 5}, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 4, 5), }", 52},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tensor *x;
        OK(tensor_alloc(cases[i].ndim, cases[i].shape, &x));
        tensor_fill_arange(x, -3, 0.5);
        OK(npy_write("x.npy", x));
        size_t n;
        unsigned char *file = slurp_file("x.npy", &n);
        cr_assert_eq(n, 128 + 8 * tensor_numel(x));
        assert_numpy_preamble(file, cases[i].dict, cases[i].spaces);
        /* the data: little-endian float64 in row-major order, as
         * np.save(f, np.arange(6).reshape(2, 3) * 0.5 - 3) writes them */
        for (size_t k = 0; k < tensor_numel(x); k++) {
            unsigned char want[8];
            le_f8(arange_value(k), want);
            cr_assert(memcmp(file + 128 + 8 * k, want, 8) == 0, "element %zu", k);
        }
        if (i == 0) {
            static const unsigned char first[8] = {0, 0, 0, 0, 0, 0, 0x08, 0xc0};
            cr_assert(memcmp(file + 128, first, 8) == 0, "-3.0 is c008000000000000");
        }
        free(file);
        tensor_free(x);
    }
    /* ... and reads back through npy_read_header as what it is */
    npy_header h;
    OK(npy_read_header("x.npy", &h));
    cr_assert_eq(h.data_offset, 128);
    cr_assert_eq(h.ndim, 4);
}

Test(npy, formats_numpy_preambles_for_any_shape)
{
    unsigned char buf[NPY_PREAMBLE_MAX];
    size_t len;
    OK(npy_format_preamble(SHAPE(2, 3), buf, sizeof buf, &len));
    cr_assert_eq(len, 128);
    assert_numpy_preamble(buf, "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 58);

    /* 10 + 117 + 1 = 128 bytes before padding, already a multiple of 64:
     * NumPy pads a whole 64 more (checked with NumPy 1.24's
     * _write_array_header for this shape: 192 bytes, length 0xb6) */
    OK(npy_format_preamble(SHAPE(1, 10000000000000000, 10000000000000000000u),
                           buf, sizeof buf, &len));
    cr_assert_eq(len, 192);
    cr_assert_eq(buf[8], 0xb6);
    cr_assert_eq(buf[9], 0);
    const char *dict = "{'descr': '<f8', 'fortran_order': False, 'shape': "
                       "(1, 10000000000000000, 10000000000000000000), }";
    cr_assert(memcmp(buf + 10, dict, strlen(dict)) == 0);
    for (size_t i = 10 + strlen(dict); i < 191; i++)
        cr_assert_eq(buf[i], ' ', "byte %zu", i);
    cr_assert_eq(buf[191], '\n');

    /* the largest 4-d shape still fits NPY_PREAMBLE_MAX */
    size_t big[4] = {SIZE_MAX, SIZE_MAX, SIZE_MAX, SIZE_MAX};
    OK(npy_format_preamble(4, big, buf, sizeof buf, &len));
    cr_assert_eq(len, 192);

    FAILS(npy_format_preamble(SHAPE(2, 3), buf, 100, &len), GSL_EBADLEN,
          "npy_format_preamble: the preamble of shape (2, 3) takes 128 bytes, "
          "the buffer has 100");
    FAILS(npy_format_preamble(0, big, buf, sizeof buf, &len), GSL_EINVAL,
          "npy_format_preamble: 0 dimensions, a tensor has 1 to 4");
    FAILS(npy_format_preamble(5, (size_t[]){1, 1, 1, 1, 1}, buf, sizeof buf, &len),
          GSL_EINVAL, "npy_format_preamble: 5 dimensions, a tensor has 1 to 4");
}

Test(npy, write_replaces_an_existing_file, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *a, *b, *y;
    OK(tensor_alloc(SHAPE(2, 3), &a));
    OK(tensor_alloc(SHAPE(4), &b));
    tensor_fill(a, 1);
    tensor_fill(b, 2);
    OK(npy_write("x.npy", a));
    cr_assert_eq(chmod("x.npy", 0640), 0);
    OK(npy_write("x.npy", b));
    OK(npy_read("x.npy", &y));
    assert_values(y, (double[]){2, 2, 2, 2}, 4);
    /* the replacement keeps the permissions the file had */
    struct stat st;
    cr_assert_eq(stat("x.npy", &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0640);
    char names[256];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "x.npy");
    FREE_ALL(y, b, a);
}

Test(npy, write_gives_new_files_the_umask_permissions, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x;
    OK(tensor_alloc(SHAPE(3), &x));
    mode_t old = umask(027);
    OK(npy_write("x.npy", x));
    umask(old);
    struct stat st;
    cr_assert_eq(stat("x.npy", &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0640, "mode %o", st.st_mode & 07777);
    tensor_free(x);
}

Test(npy, write_into_a_missing_directory_fails_cleanly, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x;
    OK(tensor_alloc(SHAPE(3), &x));
    FAILS(npy_write("nodir/x.npy", x), GSL_EFAILED,
          "npy_write: nodir/x.npy: cannot create a temporary file next to "
          "it: No such file or directory");
    char names[256];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "");
    tensor_free(x);
}

Test(npy, write_over_a_directory_fails_cleanly, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x;
    OK(tensor_alloc(SHAPE(3), &x));
    cr_assert_eq(mkdir("sub", 0755), 0);
    FAILS(npy_write("sub", x), GSL_EFAILED,
          "npy_write: sub: cannot rename the temporary file over it: Is a "
          "directory; the file is left unchanged");
    char names[256];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "sub");
    list_dir("sub", names, sizeof names);
    cr_assert_str_eq(names, "");
    tensor_free(x);
}

/* A write that fails half-way (the file size limit stops it) leaves the
 * old file as it was and no temporary behind. */
Test(npy, failed_write_leaves_the_old_file, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *small, *big, *y;
    OK(tensor_alloc(SHAPE(2), &small));
    tensor_fill(small, 7);
    OK(npy_write("x.npy", small));

    OK(tensor_alloc(SHAPE(100, 100), &big)); /* 80 kB: past the limit */
    signal(SIGXFSZ, SIG_IGN); /* the write then fails with EFBIG */
    struct rlimit lim = {.rlim_cur = 4096, .rlim_max = RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    FAILS(npy_write("x.npy", big), GSL_EFAILED,
          "npy_write: x.npy: write failed: File too large; the file is left "
          "unchanged");
    lim.rlim_cur = RLIM_INFINITY;
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);

    char names[256];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "x.npy");
    OK(npy_read("x.npy", &y));
    assert_values(y, (double[]){7, 7}, 2);
    FREE_ALL(y, big, small);
}

Test(npy, write_failure_injection_leaves_nothing, .init = enter_scratch,
     .fini = leave_scratch)
{
    tensor *x;
    OK(tensor_alloc(SHAPE(2, 3), &x));
    for (long k = 0;; k++) {
        cr_assert_lt(k, 20, "npy_write still failing after 20 allocations");
        mha_debug_fail_alloc_after(k);
        int status = npy_write("x.npy", x);
        mha_debug_fail_alloc_after(-1);
        char names[256];
        list_dir(".", names, sizeof names);
        if (status == GSL_SUCCESS) {
            cr_assert_str_eq(names, "x.npy");
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM, "k = %ld: %s", k, mha_last_error());
        /* which allocation failed is fileset.c's business; the message
         * names the function called */
        const char *want = "npy_write: out of memory allocating ";
        cr_assert(!strncmp(mha_last_error(), want, strlen(want)), "k = %ld: %s",
                  k, mha_last_error());
        cr_assert_str_eq(names, "", "k = %ld left %s behind", k, names);
    }
    tensor_free(x);
}

/* ===================================================================== */
/* NumPy reads what we write (only where python3 has numpy)              */
/* ===================================================================== */

/* A python3 that can import numpy, or NULL. */
static const char *python_with_numpy(void)
{
    static const char *candidates[] = {"python3", "/usr/bin/python3"};
    for (size_t i = 0; i < sizeof candidates / sizeof candidates[0]; i++) {
        char cmd[256];
        snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1",
                 candidates[i]);
        if (system(cmd) == 0)
            return candidates[i];
    }
    return NULL;
}

Test(npy, numpy_loads_what_we_write, .init = enter_scratch,
     .fini = leave_scratch)
{
    const char *python = python_with_numpy();
    if (!python) {
        leave_scratch(); /* a skipped test does not reach its .fini */
        cr_skip_test("python3 with numpy is not installed");
    }

    tensor *x, *p;
    OK(tensor_alloc(SHAPE(6), &x));
    tensor_fill_arange(x, -3, 0.5);
    OK(npy_write("a_6.npy", x));
    tensor_free(x);
    OK(tensor_alloc(SHAPE(2, 3, 4, 5), &x));
    tensor_fill_arange(x, -3, 0.5);
    OK(npy_write("a_2_3_4_5.npy", x));
    tensor_free(x);
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    tensor_fill_arange(x, -3, 0.5);
    OK(tensor_permute(x, SHAPE(2, 0, 1), &p));
    OK(npy_write("permuted.npy", p));
    FREE_ALL(p, x);
    double v[] = {0.0, -0.0, 4.9406564584124654e-324, 1e308, DBL_MAX,
                  INFINITY, -INFINITY, NAN};
    OK(tensor_from_array(SHAPE(8), v, &x));
    OK(npy_write("specials.npy", x));
    tensor_free(x);

    char cmd[8600];
    snprintf(cmd, sizeof cmd,
             "cd %s && %s %s/tests/npy_numpy_check.py a_6.npy a_2_3_4_5.npy "
             "permuted.npy specials.npy",
             scratch_dir, python, scratch_home);
    int status = system(cmd);
    cr_assert_eq(status, 0, "tests/npy_numpy_check.py failed (status %d)", status);
}
/* ===================================================================== */
/* npy_read_mapped: big float64 files mapped, not copied                 */
/* ===================================================================== */

/* 1 when t's numbers lie in a mapping of the file named name
 * (/proc/self/maps), 0 when they lie anywhere else. */
static int mapped_from(const tensor *t, const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[4096];
    uintptr_t at = (uintptr_t)t->data;
    int found = 0;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char path[4096] = "";
        if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %4095s", &lo, &hi, path) < 2)
            continue;
        size_t n = strlen(path), m = strlen(name);
        found = at >= lo && at < hi && n > m && path[n - m - 1] == '/' &&
                strcmp(path + n - m, name) == 0;
    }
    fclose(f);
    return found;
}

/* npy_read_mapped reads path as npy_read does, bit for bit, from a
 * mapping of the file when mapped is 1 and not when it is 0, and leaves
 * the file's bytes as they were, during and after. */
static void read_mapped_as_npy_read(const char *path, int mapped)
{
    size_t n0, n1;
    char *before = file_bytes(path, &n0);
    tensor *want = NULL, *got = NULL;
    OK(npy_read(path, &want));
    OK(npy_read_mapped(path, &got));
    assert_values(got, want->data, tensor_numel(want));
    cr_assert_eq(got->ndim, want->ndim);
    for (size_t d = 0; d < want->ndim; d++)
        cr_assert_eq(got->shape[d], want->shape[d]);
    cr_assert(tensor_is_contiguous(got));
    cr_assert_eq(mapped_from(got, path), mapped, "%s: mapped %d, expected %d",
                 path, mapped_from(got, path), mapped);
    tensor *view = NULL; // a view keeps the mapping after the tensor goes
    OK(tensor_reshape(got, SIZES(-1), NULL, &view));
    tensor_free(got);
    assert_values(view, want->data, tensor_numel(want));
    tensor_free(view);
    char *after = file_bytes(path, &n1);
    cr_assert(n0 == n1 && memcmp(before, after, n0) == 0,
              "%s changed", path);
    FREE_ALL(want);
    free(before);
    free(after);
}

/* put_dict, the header padded as np.save pads it: the numbers start at a
 * multiple of 64 bytes. */
static void put_padded(const char *path, const char *dict, size_t data_len)
{
    char header[1024];
    int n = snprintf(header, sizeof header, "%s", dict);
    while ((10 + (size_t)n + 1) % 64 != 0)
        header[n++] = ' ';
    snprintf(header + n, sizeof header - (size_t)n, "\n");
    put_npy(path, 1, 0, header, data_len);
}

Test(npy, mapped_reads_big_float64_from_the_file_bit_for_bit,
     .init = enter_scratch, .fini = leave_scratch)
{
    /* 128 * 64 * 8 = 65,536 bytes of numbers: the smallest mapped */
    put_padded("edge.npy",
             "{'descr': '<f8', 'fortran_order': False, 'shape': (128, 64), }",
             65536);
    read_mapped_as_npy_read("edge.npy", 1);
    put_padded("big.npy",
             "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3, 100, 50), }",
             240000);
    read_mapped_as_npy_read("big.npy", 1);
    /* one number fewer: read, as small files are */
    put_padded("small.npy",
             "{'descr': '<f8', 'fortran_order': False, 'shape': (8191,), }",
             65528);
    read_mapped_as_npy_read("small.npy", 0);
    /* numbers not aligned for doubles (a header NumPy would pad): read */
    put_npy("odd.npy", 2, 0,
            "{'descr': '<f8', 'fortran_order': False, 'shape': (10000,), }  \n",
            80000);
    read_mapped_as_npy_read("odd.npy", 0);
    /* float32 and int64 are converted: read */
    unsigned char *b = calloc(40000, 4);
    cr_assert_not_null(b);
    for (size_t k = 0; k < 40000; k++) {
        float v = (float)arange_value(k);
        memcpy(b + 4 * k, &v, 4); // the tests run on little-endian hosts
    }
    char header[128];
    snprintf(header, sizeof header, "%s\n",
             "{'descr': '<f4', 'fortran_order': False, 'shape': (200, 200), }");
    size_t hl = strlen(header);
    unsigned char *file = malloc(10 + hl + 160000);
    cr_assert_not_null(file);
    memcpy(file, "\x93NUMPY\x01\x00", 8);
    file[8] = (unsigned char)hl;
    file[9] = 0;
    memcpy(file + 10, header, hl);
    memcpy(file + 10 + hl, b, 160000);
    put_bytes("f4.npy", file, 10 + hl + 160000);
    free(file);
    free(b);
    read_mapped_as_npy_read("f4.npy", 0);
}

/* What npy_read refuses, npy_read_mapped refuses with the same status and
 * message, a big file as a small one: nothing is mapped before the checks
 * pass. */
Test(npy, mapped_refuses_what_npy_read_refuses, .init = enter_scratch,
     .fini = leave_scratch)
{
    const char *dict =
        "{'descr': '<f8', 'fortran_order': False, 'shape': (100, 100), }";
    put_dict("short.npy", dict, 80000 - 8);
    put_dict("long.npy", dict, 80000 + 8);
    put_dict("empty_tail.npy", dict, 0);
    cr_assert_eq(mkdir("dir.npy", 0755), 0);
    cr_assert_eq(mkfifo("fifo.npy", 0600), 0);
    const char *const bad[] = {"short.npy", "long.npy", "empty_tail.npy",
                               "dir.npy", "fifo.npy", "/dev/zero",
                               "missing.npy"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        tensor dummy, *t = &dummy;
        int want = npy_read(bad[i], &t);
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", mha_last_error());
        cr_assert_neq(want, GSL_SUCCESS, "%s", bad[i]);
        t = &dummy;
        cr_assert_eq(npy_read_mapped(bad[i], &t), want, "%s", bad[i]);
        cr_assert_str_eq(mha_last_error(), msg);
        cr_assert_null(t);
    }
}

/* A mapped file cut short while its tensor lives: a read past its new
 * end ends the program with one line naming the file, status 2, and the
 * temporaries removed, as the caught signals remove them; a SIGBUS sent
 * by kill keeps its default action. */
static void read_after_cut(const char *path, const char *line)
{
    put_padded(path,
               "{'descr': '<f8', 'fortran_order': False, 'shape': (100, 100), }",
               80000);
    int err = -1;
    pid_t pid = fork_capturing_stderr(&err);
    if (pid == 0) {
        cleanup_install();
        cleanup_name("mha forward");
        tensor *t = NULL;
        // (/proc/self/maps writes a newline in a name as \012)
        if (npy_read_mapped(path, &t) ||
            (!strchr(path, '\n') && !mapped_from(t, path)))
            _exit(10);
        cleanup_hold();
        cleanup_entry *e = cleanup_add_file("test", "out.tmp");
        FILE *tmp = fopen("out.tmp", "w");
        cleanup_release();
        if (!e || !tmp || truncate(path, 128) != 0)
            _exit(11);
        volatile double x = t->data[9999]; // past the file's new end
        (void)x;
        _exit(12);
    }
    char got[1024] = "";
    size_t n = 0;
    ssize_t r;
    while ((r = read(err, got + n, sizeof got - 1 - n)) > 0)
        n += (size_t)r;
    got[n] = '\0';
    close(err);
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 2,
              "status %#x, stderr: %s", status, got);
    cr_assert_str_eq(got, line);
    cr_assert_eq(access("out.tmp", F_OK), -1, "the temporary stayed");
}

Test(npy, mapped_file_cut_short_ends_with_one_line_and_status_2,
     .init = enter_scratch, .fini = leave_scratch)
{
    read_after_cut("cut.npy",
                   "mha forward: cut.npy: the file was cut short while it "
                   "was read; nothing was written\n");
    read_after_cut("new\nline.npy",
                   "mha forward: new\\x0aline.npy: the file was cut short "
                   "while it was read; nothing was written\n");
    /* sent by kill: not a read of a mapping, the default action */
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        cleanup_install();
        raise(SIGBUS);
        _exit(12);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGBUS,
              "status %#x", status);
}

/* A preamble and three parts (one of them a strided view) make the bytes
 * npy_write_stream makes of the whole tensor; a part that cannot be
 * written fails as npy_write_stream does, and so does a NULL stream. */
Test(npy, written_in_parts_as_in_one_piece)
{
    tensor *x = arange(SHAPE(4, 3, 5)), *first, *middle, *last, *flipped;
    OK(tensor_narrow(x, 0, 0, 1, &first));
    OK(tensor_narrow(x, 0, 1, 2, &middle));
    OK(tensor_narrow(x, 0, 3, 1, &last));
    // the last example seen through a permuted copy: strided, same order
    tensor *t, *tc;
    OK(tensor_permute(last, SHAPE(0, 2, 1), &t));
    OK(tensor_contiguous(t, &tc));
    OK(tensor_permute(tc, SHAPE(0, 2, 1), &flipped));
    cr_assert_not(tensor_is_contiguous(flipped));
    FILE *whole = tmpfile(), *parts = tmpfile();
    cr_assert(whole && parts);
    OK(npy_write_stream(whole, x));
    OK(npy_write_preamble(parts, SHAPE(4, 3, 5)));
    OK(npy_write_part(parts, first));
    OK(npy_write_part(parts, middle));
    OK(npy_write_part(parts, flipped));
    size_t n_whole, n_parts;
    char *a = read_all_n(whole, &n_whole), *b = read_all_n(parts, &n_parts);
    cr_assert_eq(n_whole, 128 + 60 * sizeof(double));
    cr_assert_eq(n_parts, n_whole);
    cr_assert(memcmp(a, b, n_whole) == 0);
    free(a);
    free(b);
    fclose(whole);
    fclose(parts);
    FILE *full = fopen("/dev/full", "w");
    if (full) { // the preamble waits in the buffer; the part's flush fails
        OK(npy_write_preamble(full, SHAPE(4, 3, 5)));
        FAILS(npy_write_part(full, first), GSL_EFAILED,
              "npy_write_stream: write failed: No space left on device");
        fclose(full);
    }
    FAILS(npy_write_preamble(NULL, SHAPE(4, 3, 5)), GSL_EINVAL,
          "npy_write_stream: the stream is NULL");
    FAILS(npy_write_part(NULL, first), GSL_EINVAL,
          "npy_write_stream: the stream is NULL");
    FREE_ALL(x, first, middle, last, t, tc, flipped);
}
//<
