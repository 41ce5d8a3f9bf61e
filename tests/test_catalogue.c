//> 08
/* test_catalogue.c: the bad-input catalogue of the library, one table.
 *
 * Every row is one way a user can get the input wrong, with the status it
 * must get and the one line it must say.  (The command-line program's
 * rows, 68 of them with exit status 2, are in tests/test_cli.c.)  Each
 * case also checks that the out-parameter stays NULL and that no output
 * file appears; leaks are caught by running this file under valgrind
 * (make memcheck) and LeakSanitizer (make sanitize). */
#include "check.h"

#include <criterion/parameterized.h>
#include <sys/stat.h>
#include <unistd.h>

/* --- building blocks for the cases ------------------------------------ */

typedef struct {
    multihead m;
    tensor *q, *k, *v, *lens;
} setup;

/* A valid module and inputs: d_q 6, d_k 5, d_v 4, D 8, h 2, B 2, Lq 3,
 * Lk 4; each case then breaks one thing. */
static void good(setup *s, int bias)
{
    multihead_config cfg = {.query_size = 6, .key_size = 5, .value_size = 4,
                            .num_hiddens = 8, .num_heads = 2, .bias = bias};
    OK(multihead_init(&s->m, &cfg));
    gsl_rng *r = mha_rng_new(1);
    multihead_reset_xavier(&s->m, r);
    gsl_rng_free(r);
    OK(tensor_alloc(SHAPE(2, 3, 6), &s->q));
    OK(tensor_alloc(SHAPE(2, 4, 5), &s->k));
    OK(tensor_alloc(SHAPE(2, 4, 4), &s->v));
    OK(tensor_from_array(SHAPE(2), (double[]){4, 1}, &s->lens));
}

static void done(setup *s)
{
    multihead_free(&s->m);
    tensor_free(s->q);
    tensor_free(s->k);
    tensor_free(s->v);
    tensor_free(s->lens);
}

static int forward(setup *s)
{
    tensor *out = (tensor *)1;
    int status = multihead_forward(&s->m, s->q, s->k, s->v, s->lens, &out, NULL);
    cr_assert_null(out, "a failed forward must leave out NULL");
    return status;
}

static void replace(tensor **t, size_t ndim, const size_t *shape)
{
    tensor_free(*t);
    OK(tensor_alloc(ndim, shape, t));
}

/* --- the module -------------------------------------------------------- */

/* multihead_init of a self-attention module of size inputs, hiddens and
 * heads (each of these refused, so nothing is left to free). */
static int init_refused(size_t size, size_t hiddens, size_t heads)
{
    multihead m;
    multihead_config cfg = {.query_size = size, .key_size = size,
                            .value_size = size, .num_hiddens = hiddens,
                            .num_heads = heads};
    return multihead_init(&m, &cfg);
}

static int heads_do_not_divide(void) { return init_refused(100, 100, 3); }
static int zero_heads(void) { return init_refused(100, 100, 0); }
static int zero_hiddens(void) { return init_refused(4, 0, 2); }

#define FORWARD_CASE(name, bias, ...)                                         \
    static int name(void)                                                     \
    {                                                                         \
        setup s;                                                              \
        good(&s, bias);                                                       \
        __VA_ARGS__;                                                          \
        int status = forward(&s);                                             \
        done(&s);                                                             \
        return status;                                                        \
    }

FORWARD_CASE(queries_wrong_features, 0, replace(&s.q, SHAPE(2, 3, 7)))
FORWARD_CASE(keys_wrong_features, 0, replace(&s.k, SHAPE(2, 4, 6)))
FORWARD_CASE(values_wrong_features, 0, replace(&s.v, SHAPE(2, 4, 5)))
FORWARD_CASE(queries_not_3d, 0, replace(&s.q, SHAPE(6, 6)))
FORWARD_CASE(batch_sizes_differ, 0, replace(&s.k, SHAPE(3, 4, 5)))
FORWARD_CASE(keys_values_lengths_differ, 0, replace(&s.v, SHAPE(2, 5, 4)))
FORWARD_CASE(w_q_wrong_shape, 0, replace(&s.m.W_q.weight, SHAPE(8, 7)))
FORWARD_CASE(w_k_wrong_shape, 0, replace(&s.m.W_k.weight, SHAPE(9, 5)))
FORWARD_CASE(w_v_wrong_shape, 0, replace(&s.m.W_v.weight, SHAPE(8, 3)))
FORWARD_CASE(w_o_wrong_shape, 0, replace(&s.m.W_o.weight, SHAPE(8, 6)))
FORWARD_CASE(b_q_wrong_shape, 1, replace(&s.m.W_q.bias, SHAPE(7)))
FORWARD_CASE(b_o_wrong_shape, 1, replace(&s.m.W_o.bias, SHAPE(2, 4)))
FORWARD_CASE(valid_lens_wrong_length, 0, replace(&s.lens, SHAPE(3)))
FORWARD_CASE(valid_lens_wrong_rows, 0, replace(&s.lens, SHAPE(2, 4)))
FORWARD_CASE(valid_lens_negative, 0, s.lens->data[1] = -2)
FORWARD_CASE(valid_lens_too_large, 0, s.lens->data[0] = 5)
FORWARD_CASE(valid_lens_fractional, 0, s.lens->data[0] = 1.5)
FORWARD_CASE(valid_lens_nan, 0, s.lens->data[1] = NAN)
FORWARD_CASE(queries_nan, 0, *TENSOR_AT(s.q, 1, 0, 2) = NAN)
FORWARD_CASE(values_inf, 0, *TENSOR_AT(s.v, 0, 3, 3) = INFINITY)
FORWARD_CASE(weight_nan, 0, *TENSOR_AT(s.m.W_k.weight, 2, 1) = NAN)

/* --- tensors ----------------------------------------------------------- */

static int zero_size_dimension(void)
{
    tensor *t = (tensor *)1;
    int status = tensor_alloc(SHAPE(2, 0, 3), &t);
    cr_assert_null(t);
    return status;
}

static int size_overflows(void)
{
    tensor *t = (tensor *)1;
    int status = tensor_alloc(SHAPE((size_t)1 << 32, (size_t)1 << 32, 2), &t);
    cr_assert_null(t);
    return status;
}

static int reshape_does_not_divide(void)
{
    tensor *x, *y = (tensor *)1;
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    int status = tensor_reshape(x, SIZES(3, -1), NULL, &y);
    cr_assert_null(y);
    tensor_free(x);
    return status;
}

//> full
/* --- .npy files ---------------------------------------------------------- */

/* A file of the given bytes in the current (scratch) directory. */
static void write_bytes(const char *path, const void *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    fclose(f);
}

/* A v1 .npy file with the given header dict and `data` bytes of data. */
static void write_npy(const char *path, const char *dict, size_t data)
{
    char head[128];
    size_t dl = strlen(dict);
    size_t len = 10 + dl + 1;
    size_t pad = (64 - len % 64) % 64;
    memcpy(head, "\x93NUMPY\x01\x00", 8);
    head[8] = (char)((dl + 1 + pad) & 0xff);
    head[9] = (char)((dl + 1 + pad) >> 8);
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    fwrite(head, 1, 10, f);
    fwrite(dict, 1, dl, f);
    for (size_t i = 0; i < pad; i++)
        fputc(' ', f);
    fputc('\n', f);
    for (size_t i = 0; i < data; i++)
        fputc(0, f);
    fclose(f);
}

static int npy_case(const char *path)
{
    tensor *t = (tensor *)1;
    int status = npy_read(path, &t);
    cr_assert_null(t);
    return status;
}

static int npy_truncated(void)
{
    write_npy("t.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 3), }", 40);
    return npy_case("t.npy");
}

static int npy_lying_header_length(void)
{
    unsigned char b[] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0xff, 0x7f, '{'};
    write_bytes("l.npy", b, sizeof b);
    return npy_case("l.npy");
}

static int npy_wrong_dtype(void)
{
    write_npy("d.npy", "{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }", 32);
    return npy_case("d.npy");
}

static int npy_big_endian(void)
{
    write_npy("b.npy", "{'descr': '>f8', 'fortran_order': False, 'shape': (2,), }", 16);
    return npy_case("b.npy");
}

static int npy_fortran_order(void)
{
    write_npy("f.npy", "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 2), }", 32);
    return npy_case("f.npy");
}

static int npy_shape_overflows(void)
{
    write_npy("o.npy", "{'descr': '<f8', 'fortran_order': False, "
                       "'shape': (4294967296, 4294967296, 4294967296), }", 0);
    return npy_case("o.npy");
}

static int npy_bad_magic(void)
{
    write_bytes("m.npy", "\x93NUMPZ\x01\x00\x00\x00", 10);
    return npy_case("m.npy");
}

static int npy_missing_file(void) { return npy_case("missing.npy"); }

static int npy_unreadable(void)
{
    write_npy("u.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }", 8);
    chmod("u.npy", 0);
    if (access("u.npy", R_OK) == 0) /* root reads anything: a directory then */
        return npy_case(".");
    return npy_case("u.npy");
}

static int npy_write_missing_directory(void)
{
    tensor *t;
    OK(tensor_alloc(SHAPE(2), &t));
    int status = npy_write("no/such/dir/out.npy", t);
    tensor_free(t);
    return status;
}
//<

/* --- the table ------------------------------------------------------------ */

struct entry {
    char name[40];
    int (*run)(void);
    int status;
    char message[240];
};

static struct entry catalogue[] = {
    {"heads_do_not_divide", heads_do_not_divide, GSL_EBADLEN,
     "multihead: num_hiddens 100 is not divisible by num_heads 3"},
    {"zero_heads", zero_heads, GSL_EINVAL,
     "multihead: sizes must be >= 1 (query_size 100, key_size 100, value_size "
     "100, num_hiddens 100, num_heads 0)"},
    {"zero_hiddens", zero_hiddens, GSL_EINVAL,
     "multihead: sizes must be >= 1 (query_size 4, key_size 4, value_size 4, "
     "num_hiddens 0, num_heads 2)"},
    {"queries_wrong_features", queries_wrong_features, GSL_EBADLEN,
     "multihead: feature sizes queries (2, 3, 7), keys (2, 4, 5), values "
     "(2, 4, 4) do not match the layers' query_size 6, key_size 5, value_size 4"},
    {"keys_wrong_features", keys_wrong_features, GSL_EBADLEN,
     "multihead: feature sizes queries (2, 3, 6), keys (2, 4, 6), values "
     "(2, 4, 4) do not match the layers' query_size 6, key_size 5, value_size 4"},
    {"values_wrong_features", values_wrong_features, GSL_EBADLEN,
     "multihead: feature sizes queries (2, 3, 6), keys (2, 4, 5), values "
     "(2, 4, 5) do not match the layers' query_size 6, key_size 5, value_size 4"},
    {"queries_not_3d", queries_not_3d, GSL_EBADLEN,
     "multihead: queries, keys and values must be 3-D (B, L, features), got "
     "queries (6, 6), keys (2, 4, 5), values (2, 4, 4)"},
    {"batch_sizes_differ", batch_sizes_differ, GSL_EBADLEN,
     "multihead: batch sizes differ (queries (2, 3, 6), keys (3, 4, 5), values "
     "(2, 4, 4))"},
    {"keys_values_lengths_differ", keys_values_lengths_differ, GSL_EBADLEN,
     "multihead: keys have Lk = 4 but values have Lk = 5 (queries (2, 3, 6), "
     "keys (2, 4, 5), values (2, 5, 4))"},
    {"w_q_wrong_shape", w_q_wrong_shape, GSL_EBADLEN,
     "multihead W_q: weight has shape (8, 7), expected (8, 6)"},
    {"w_k_wrong_shape", w_k_wrong_shape, GSL_EBADLEN,
     "multihead W_k: weight has shape (9, 5), expected (8, 5)"},
    {"w_v_wrong_shape", w_v_wrong_shape, GSL_EBADLEN,
     "multihead W_v: weight has shape (8, 3), expected (8, 4)"},
    {"w_o_wrong_shape", w_o_wrong_shape, GSL_EBADLEN,
     "multihead W_o: weight has shape (8, 6), expected (8, 8)"},
    {"b_q_wrong_shape", b_q_wrong_shape, GSL_EBADLEN,
     "multihead W_q: bias has shape (7,), expected (8,)"},
    {"b_o_wrong_shape", b_o_wrong_shape, GSL_EBADLEN,
     "multihead W_o: bias has shape (2, 4), expected (8,)"},
    {"valid_lens_wrong_length", valid_lens_wrong_length, GSL_EBADLEN,
     "multihead: valid_lens has shape (3,), expected (2,) or (2, 3) (queries "
     "(2, 3, 6), keys (2, 4, 5))"},
    {"valid_lens_wrong_rows", valid_lens_wrong_rows, GSL_EBADLEN,
     "multihead: valid_lens has shape (2, 4), expected (2,) or (2, 3) (queries "
     "(2, 3, 6), keys (2, 4, 5))"},
    {"valid_lens_negative", valid_lens_negative, GSL_EINVAL,
     "multihead: valid_lens[1] = -2 is negative (queries (2, 3, 6), keys "
     "(2, 4, 5), valid_lens (2,))"},
    {"valid_lens_too_large", valid_lens_too_large, GSL_EINVAL,
     "multihead: valid_lens[0] = 5 is larger than the number of keys 4 "
     "(queries (2, 3, 6), keys (2, 4, 5), valid_lens (2,))"},
    {"valid_lens_fractional", valid_lens_fractional, GSL_EINVAL,
     "multihead: valid_lens[0] = 1.5 is not a whole number (queries (2, 3, 6), "
     "keys (2, 4, 5), valid_lens (2,))"},
    {"valid_lens_nan", valid_lens_nan, GSL_EINVAL,
     "multihead: valid_lens[1] = nan is not a whole number (queries (2, 3, 6), "
     "keys (2, 4, 5), valid_lens (2,))"},
    {"queries_nan", queries_nan, GSL_EDOM,
     "multihead: queries[1, 0, 2] = nan; queries must be finite (queries "
     "(2, 3, 6))"},
    {"values_inf", values_inf, GSL_EDOM,
     "multihead: values[0, 3, 3] = inf; values must be finite (values (2, 4, 4))"},
    {"weight_nan", weight_nan, GSL_EDOM,
     "multihead: W_k[2, 1] = nan; W_k must be finite (W_k (8, 5))"},
    {"zero_size_dimension", zero_size_dimension, GSL_EINVAL,
     "tensor_alloc: dimension 1 of shape (2, 0, 3) is 0; sizes must be >= 1"},
    {"size_overflows", size_overflows, GSL_EOVRFLW,
     "tensor_alloc: shape (4294967296, 4294967296, 2) is too large: its size "
     "in bytes overflows size_t"},
    {"reshape_does_not_divide", reshape_does_not_divide, GSL_EBADLEN,
     "tensor_reshape: shape (3, -1) is invalid for input of size 32 (input "
     "shape (1, 2, 16))"},
//> full
    {"npy_truncated", npy_truncated, GSL_EBADLEN, ""},
    {"npy_lying_header_length", npy_lying_header_length, GSL_EBADLEN, ""},
    {"npy_wrong_dtype", npy_wrong_dtype, GSL_EINVAL, ""},
    {"npy_big_endian", npy_big_endian, GSL_EINVAL, ""},
    {"npy_fortran_order", npy_fortran_order, GSL_EINVAL, ""},
    {"npy_shape_overflows", npy_shape_overflows, GSL_EOVRFLW, ""},
    {"npy_bad_magic", npy_bad_magic, GSL_EINVAL, ""},
    {"npy_missing_file", npy_missing_file, GSL_EFAILED, ""},
    {"npy_unreadable", npy_unreadable, GSL_EFAILED, ""},
    {"npy_write_missing_directory", npy_write_missing_directory, GSL_EFAILED, ""},
//<
};

ParameterizedTestParameters(catalogue, bad_input)
{
    return cr_make_param_array(struct entry, catalogue,
                               sizeof catalogue / sizeof catalogue[0]);
}

static char scratch[64];

static void enter(void)
{
    strcpy(scratch, "/tmp/mha-catalogue-XXXXXX");
    cr_assert_not_null(mkdtemp(scratch));
    cr_assert_eq(chdir(scratch), 0);
}

/* Everything the case left in its scratch directory, listed. */
static void listing(char *buf, size_t n)
{
    FILE *p = popen("ls -A", "r");
    cr_assert_not_null(p);
    size_t got = fread(buf, 1, n - 1, p);
    buf[got] = '\0';
    pclose(p);
}

/* Each case: its status, its one line, no file written but its inputs. */
ParameterizedTest(struct entry *e, catalogue, bad_input, .init = enter)
{
    /* the parameter is a copy made in another process: its function
     * pointer is not ours, so find the row in this process's table */
    int (*run)(void) = NULL;
    for (size_t i = 0; i < sizeof catalogue / sizeof catalogue[0]; i++)
        if (strcmp(catalogue[i].name, e->name) == 0)
            run = catalogue[i].run;
    cr_assert_not_null(run);
    char before[1024], after[1024];
    mha_clear_error();
    listing(before, sizeof before);
    int status = run();
    cr_assert_eq(status, e->status, "%s: status %d, expected %d (%s)", e->name,
                 status, e->status, mha_last_error());
    const char *msg = mha_last_error();
    cr_assert(msg[0] != '\0', "%s: no message", e->name);
    cr_assert_null(strchr(msg, '\n'), "%s: the message is not one line", e->name);
    if (e->message[0])
        cr_assert_str_eq(msg, e->message, "%s", e->name);
    else /* the .npy rows: the message names the reader and the file */
        cr_assert((strncmp(msg, "npy_", 4) == 0 && strstr(msg, ".npy") != NULL) ||
                      strstr(msg, ": .:") != NULL,
                  "%s: %s", e->name, msg);
    listing(after, sizeof after);
    /* the npy cases write their input first; nothing else may appear */
    if (strncmp(e->name, "npy_", 4) != 0)
        cr_assert_str_eq(after, before, "%s left files behind", e->name);
    else
        cr_assert_null(strstr(after, "out.npy"), "%s left out.npy", e->name);
    char cmd[200];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx %s; rm -rf %s", scratch, scratch);
    cr_assert_eq(chdir("/"), 0);
    cr_assert_eq(system(cmd), 0);
}

/* --- numbers that must stay finite ----------------------------------------- */

/* One key (Lk = 1, valid_len 1): all the weight on it, out = W_o (W_v v). */
Test(catalogue, a_single_key)
{
    setup s;
    good(&s, 0);
    replace(&s.k, SHAPE(2, 1, 5));
    replace(&s.v, SHAPE(2, 1, 4));
    tensor_fill(s.k, 3);
    tensor_fill(s.v, -2);
    s.lens->data[0] = 1;
    s.lens->data[1] = 1;
    tensor *out, *w;
    OK(multihead_forward(&s.m, s.q, s.k, s.v, s.lens, &out, &w));
    for (size_t i = 0; i < tensor_numel(w); i++)
        cr_assert_eq(w->data[i], 1.0);
    for (size_t i = 0; i < tensor_numel(out); i++)
        cr_assert(isfinite(out->data[i]));
    tensor_free(out);
    tensor_free(w);
    done(&s);
}

/* Tiny (1e-300) and huge (1e100) weights: scores underflow to 0 or grow
 * to 1e200, and every weight and output stays finite. */
Test(catalogue, tiny_and_huge_weights)
{
    const double scales[] = {1e-300, 1e100};
    for (int n = 0; n < 2; n++) {
        setup s;
        good(&s, 0);
        gsl_rng *r = mha_rng_new(3);
        tensor_fill_normal(s.q, r, 0, 1);
        tensor_fill_normal(s.k, r, 0, 1);
        tensor_fill_normal(s.v, r, 0, 1);
        gsl_rng_free(r);
        linear *layers[] = {&s.m.W_q, &s.m.W_k};
        for (int l = 0; l < 2; l++)
            for (size_t i = 0; i < tensor_numel(layers[l]->weight); i++)
                layers[l]->weight->data[i] *= scales[n];
        tensor *out, *w;
        OK(multihead_forward(&s.m, s.q, s.k, s.v, s.lens, &out, &w));
        for (size_t i = 0; i < tensor_numel(w); i++)
            cr_assert(isfinite(w->data[i]), "scale %g", scales[n]);
        for (size_t i = 0; i < tensor_numel(out); i++)
            cr_assert(isfinite(out->data[i]), "scale %g", scales[n]);
        /* 1e-300: every score underflows to 0, the weights are uniform */
        if (n == 0)
            cr_assert_float_eq(*TENSOR_AT(w, 0, 1, 2, 3), 0.25, 1e-15);
        tensor_free(out);
        tensor_free(w);
        done(&s);
    }
}
//<
