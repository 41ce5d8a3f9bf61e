//> full
/* test_cli.c: the mha program (src/cli/), run as a child process.
 *
 * What the CLI contract in DESIGN.md promises, checked from outside:
 *   - `mha trace` prints the module's whole shape trace, with the split
 *     (1, 2, 16) -> (1, 2, 8, 2) -> (1, 8, 2, 2) -> (8, 2, 2) and the way
 *     back; --quiz asks each step as mha quiz does and lists the answers;
 *   - `mha forward` reads .npy files and writes OUT and A equal to
 *     multihead_forward run here in-process on the same numbers, and to
 *     values worked out by hand (equal keys: uniform weights);
 *   - `mha heatmap` draws the same weights heatmap_terminal draws here, and
 *     renders a PNG;
 *   - every bad invocation gets exactly one line on stderr, exit status 2,
 *     and leaves the directory as it was: no output file, no temporary.
 *
 * Each test runs in a scratch directory of its own (the child inherits
 * it as its working directory), so paths in messages are short and fixed.
 *
 * Shapes of the standard inputs written by write_inputs():
 *   B 2, Lq 4, Lk 6, Dq 5, Dk 7, Dv 3, D 8 = 2 heads of 4, D_out 6
 *   q (2, 4, 5)  k (2, 6, 7)  v (2, 6, 3)
 *   wq (8, 5)  wk (8, 7)  wv (8, 3)  wo (6, 8)  bq bk bv (8,)  bo (6,)
 */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <ftw.h>
#include <stdint.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "scratch.h"
#include "mha_run.h"

/* The run succeeded quietly on stderr. */
static void assert_ok(const run *r, const char *what)
{
    cr_assert_eq(r->status, 0, "%s: exit %d, stderr: %s", what, r->status,
                 r->err);
    cr_assert_str_eq(r->err, "", "%s", what);
}

/* Line k (0-based) of text into buf, or "" past the end. */
static const char *line_at(const char *text, size_t k, char *buf, size_t n)
{
    for (; k > 0 && text; k--) {
        text = strchr(text, '\n');
        if (text)
            text++;
    }
    if (!text)
        text = "";
    size_t len = strcspn(text, "\n");
    cr_assert_lt(len, n);
    memcpy(buf, text, len);
    buf[len] = '\0';
    return buf;
}

static size_t count_lines(const char *text)
{
    size_t n = 0;
    for (; *text; text++)
        n += *text == '\n';
    return n;
}

/* The lines `want` appear in text in this order (others may come between). */
static void assert_lines_in_order(const char *text, const char *const *want,
                                  size_t n)
{
    size_t k = 0, lines = count_lines(text);
    char buf[512];
    for (size_t i = 0; i < n; i++) {
        while (k < lines && strcmp(line_at(text, k, buf, sizeof buf), want[i]))
            k++;
        cr_assert_lt(k, lines, "line not found (in order):\n%s\nin:\n%s",
                     want[i], text);
        k++;
    }
}

/* --- files ------------------------------------------------------------ */

/* A tensor of the given shape with values start, start + step, ... */
static tensor *ramp(size_t ndim, const size_t *shape, double start,
                    double step)
{
    tensor *t;
    OK(tensor_alloc(ndim, shape, &t));
    tensor_fill_arange(t, start, step);
    return t;
}

/* An int64 .npy file, as np.save(path, np.array(values, dtype=np.int64))
 * writes it (npy_write writes float64 only). */
static void put_int64(const char *path, size_t ndim, const size_t *shape,
                      const int64_t *values)
{
    size_t numel = 1;
    for (size_t d = 0; d < ndim; d++)
        numel *= shape[d];
    unsigned char *bytes = malloc(8 * numel);
    cr_assert_not_null(bytes);
    for (size_t i = 0; i < numel; i++)
        for (int k = 0; k < 8; k++) // little-endian
            bytes[8 * i + k] = (unsigned char)((uint64_t)values[i] >> (8 * k));
    put_npy(path, "<i8", ndim, shape, bytes, 8 * numel);
    free(bytes);
}

/* The scratch directory's state (scratch.h's snapshot). */
static snapshot snapshot_take(void) { return snapshot_of("."); }

/* Every file under the current directory as it was in before. */
static void assert_unchanged(const snapshot *before, const char *args)
{
    cr_assert(snapshot_unchanged(before, "."),
              "mha %s changed the files (names, bytes, modes or inodes)",
              args);
}

/* The run was refused: exit status 2, exactly the one line message on
 * stderr, nothing on stdout, and every file as it was in before. */
static void assert_refused(const run *r, const char *message,
                           const snapshot *before, const char *args)
{
    char want[1024];
    snprintf(want, sizeof want, "%s\n", message);
    cr_assert_eq(r->status, 2, "mha %s: exit %d, stderr %s", args, r->status,
                 r->err);
    cr_assert_str_eq(r->err, want, "mha %s: stderr %s", args, r->err);
    cr_assert_str_eq(r->out, "", "mha %s", args);
    assert_unchanged(before, args);
}

/* mha ARGS, in the scratch directory as it is now: refused with exactly
 * message, and every file left as it was. */
static void assert_run_refused(const char *args, const char *message)
{
    snapshot before = snapshot_take();
    run r = mha(args);
    assert_refused(&r, message, &before, args);
    run_free(&r);
    free(before.data);
}

/* The standard inputs (see the top of the file), seeded. */
static void write_inputs(void)
{
    gsl_rng *r = mha_rng_new(31);
    cr_assert_not_null(r);
    put_normal("q.npy", SHAPE(2, 4, 5), r, 1);
    put_normal("k.npy", SHAPE(2, 6, 7), r, 1);
    put_normal("v.npy", SHAPE(2, 6, 3), r, 1);
    put_normal("wq.npy", SHAPE(8, 5), r, 0.5);
    put_normal("wk.npy", SHAPE(8, 7), r, 0.5);
    put_normal("wv.npy", SHAPE(8, 3), r, 0.5);
    put_normal("wo.npy", SHAPE(6, 8), r, 0.5);
    put_normal("bq.npy", SHAPE(8), r, 0.5);
    put_normal("bk.npy", SHAPE(8), r, 0.5);
    put_normal("bv.npy", SHAPE(8), r, 0.5);
    put_normal("bo.npy", SHAPE(6), r, 0.5);
    gsl_rng_free(r);
}

static tensor *load(const char *path)
{
    tensor *t;
    OK(npy_read(path, &t));
    return t;
}

/* > 0: reference() runs the module with rope and this base (the --rope
 * tests set it and put it back to 0). */
static double reference_rope_base;

/* multihead_forward in this process on the files' numbers: the
 * reference for what mha writes.  k, v and the biases may be NULL. */
static void reference(size_t heads, const char *q, const char *k,
                      const char *v, int bias, const tensor *valid_lens,
                      tensor **out, tensor **weights)
{
    tensor *tq = load(q), *tk = k ? load(k) : tq, *tv = v ? load(v) : tq;
    tensor *w[4] = {load("wq.npy"), load(k ? "wk.npy" : "wk_self.npy"),
                    load(v ? "wv.npy" : "wv_self.npy"), load("wo.npy")};
    multihead m;
    multihead_config cfg = {.query_size = tq->shape[2],
                            .key_size = tk->shape[2],
                            .value_size = tv->shape[2],
                            .num_hiddens = w[0]->shape[0],
                            .num_heads = heads,
                            .out_size = w[3]->shape[0],
                            .bias = bias, .rope = reference_rope_base > 0,
                            .rope_base = reference_rope_base};
    OK(multihead_init(&m, &cfg));
    linear *layer[4] = {&m.W_q, &m.W_k, &m.W_v, &m.W_o};
    static const char *const bias_file[4] = {"bq.npy", "bk.npy", "bv.npy",
                                             "bo.npy"};
    for (int i = 0; i < 4; i++) {
        OK(tensor_copy_into(layer[i]->weight, w[i]));
        if (bias) {
            tensor *b = load(bias_file[i]);
            OK(tensor_copy_into(layer[i]->bias, b));
            tensor_free(b);
        }
        tensor_free(w[i]);
    }
    OK(multihead_forward(&m, tq, tk, tv, valid_lens, out, weights));
    if (tk != tq)
        tensor_free(tk);
    if (tv != tq)
        tensor_free(tv);
    tensor_free(tq);
    multihead_free(&m);
}

/* OUT and A as mha wrote them against the in-process reference. */
static void assert_matches(size_t heads, const char *k, const char *v,
                           int bias, const tensor *valid_lens,
                           size_t out_ndim, const size_t *out_shape,
                           size_t a_ndim, const size_t *a_shape)
{
    cr_assert(out_ndim == 3 && a_ndim == 4);
    tensor *want_out, *want_a;
    reference(heads, "q.npy", k, v, bias, valid_lens, &want_out, &want_a);
    tensor *got_out = load("out.npy"), *got_a = load("a.npy");
    for (size_t d = 0; d < 3; d++)
        cr_assert_eq(got_out->shape[d], out_shape[d]);
    for (size_t d = 0; d < 4; d++)
        cr_assert_eq(got_a->shape[d], a_shape[d]);
    cr_assert_leq(rel_error(got_out, want_out), 1e-13);
    cr_assert_leq(rel_error(got_a, want_a), 1e-13);
    FREE_ALL(want_out, want_a, got_out, got_a);
}

#define INPUTS                                                                \
    "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|"    \
    "--wv|wv.npy|--wo|wo.npy"
#define FORWARD "forward|--heads|2|" INPUTS
#define OUTS "|--out|out.npy|--attention-out|a.npy"

/* --- mha trace -------------------------------------------------------- */

Test(cli, trace_shows_the_split_and_the_join_in_order, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha("trace|--batch|1|--queries|2|--hiddens|16|--heads|8");
    assert_ok(&r, "trace");
    static const char *const want[] = {
        "queries (1, 2, 16), keys and values (1, 6, 16): 8 heads of 2 features, no valid_lens",
        "",
        "multihead(h=8)                 q (1, 2, 16), k (1, 6, 16), v (1, 6, 16)",
        "  W_q: x W^T             new   (1, 2, 16) -> (1, 2, 16)            (B, Lq, d_model)",
        "  transpose_qkv(h=8)           (1, 2, 16)                          (B, Lq, d_model)",
        "    reshape(1, 2, 8, -1) view  (1, 2, 16) -> (1, 2, 8, 2)          (B, Lq, h, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (1, 2, 8, 2) -> (1, 8, 2, 2)        (B, h, Lq, d_model/h)",
        "    reshape(-1, 2, 2)    view  (1, 8, 2, 2) -> (8, 2, 2)           (B*h, Lq, d_model/h)",
        "  transpose_output(h=8)        (8, 2, 2)                           (B*h, Lq, d_model/h)",
        "    reshape(-1, 8, 2, 2) view  (8, 2, 2) -> (1, 8, 2, 2)           (B, h, Lq, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (1, 8, 2, 2) -> (1, 2, 8, 2)        (B, Lq, h, d_model/h)",
        "    reshape(1, 2, -1)    copy  (1, 2, 8, 2) -> (1, 2, 16)          (B, Lq, d_model)",
        "  W_o: x W^T             new   (1, 2, 16) -> (1, 2, 16)            (B, Lq, d_model)",
        "",
        "output (1, 2, 16), attention weights (1, 8, 2, 6)",
    };
    assert_lines_in_order(r.out, want, sizeof want / sizeof want[0]);
    // the first three lines open the output, the last one closes it
    char buf[512];
    cr_assert_str_eq(line_at(r.out, 0, buf, sizeof buf), want[0]);
    cr_assert_str_eq(line_at(r.out, 2, buf, sizeof buf), want[2]);
    cr_assert_str_eq(line_at(r.out, count_lines(r.out) - 1, buf, sizeof buf),
                     want[14]);
    // the keys are split the same way, with Lk = 6 positions
    static const char *const keys[] = {
        "    reshape(1, 6, 8, -1) view  (1, 6, 16) -> (1, 6, 8, 2)          (B, Lk, h, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (1, 6, 8, 2) -> (1, 8, 6, 2)        (B, h, Lk, d_model/h)",
        "    reshape(-1, 6, 2)    view  (1, 8, 6, 2) -> (8, 6, 2)           (B*h, Lk, d_model/h)",
    };
    assert_lines_in_order(r.out, keys, 3);
    run_free(&r);
}

Test(cli, trace_defaults_are_d2l_example, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha("trace");
    assert_ok(&r, "trace");
    static const char *const want[] = {
        "queries (2, 4, 100), keys and values (2, 6, 100): 5 heads of 20 features, no valid_lens",
        "    reshape(-1, 4, 20)   copy  (2, 5, 4, 20) -> (10, 4, 20)        (B*h, Lq, d_model/h)",
        "output (2, 4, 100), attention weights (2, 5, 4, 6)",
    };
    assert_lines_in_order(r.out, want, 3);
    cr_assert_null(strstr(r.out, "repeat_interleave"));
    run_free(&r);

    r = mha("trace|--valid-lens|3,2");
    assert_ok(&r, "trace --valid-lens");
    static const char *const lens[] = {
        "queries (2, 4, 100), keys and values (2, 6, 100): 5 heads of 20 features, valid_lens [3, 2]",
        "  repeat_interleave(5)         (2,)                                (B,)",
        "    reshape(10)          copy  (2, 5) -> (10,)                     (B*h,)",
        "    masked_softmax(scale 0.223607, valid_lens (10,)) new   (10, 4, 6) -> (10, 4, 6)            (B*h, Lq, Lk)",
    };
    assert_lines_in_order(r.out, lens, sizeof lens / sizeof lens[0]);
    run_free(&r);
}

/* --- mha trace --json and --dot ---------------------------------------- */

/* A small JSON reader, enough to read a JSON line back: objects, arrays,
 * strings (with \" \\ \uXXXX escapes), numbers, true, false, null.  The
 * tree is plain: a value's kind, and its number, string, items or keys. */
typedef enum { J_NULL, J_BOOL, J_NUMBER, J_STRING, J_ARRAY, J_OBJECT } jkind;

typedef struct jvalue {
    jkind kind;
    double number; /* J_NUMBER; J_BOOL: 0 or 1 */
    char *string;  /* J_STRING */
    size_t n;      /* J_ARRAY, J_OBJECT: how many items */
    struct jvalue *items;
    char **keys;   /* J_OBJECT: the key of each item */
} jvalue;

static void jfree(jvalue *v)
{
    for (size_t i = 0; i < v->n; i++) {
        jfree(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
}

static const char *jspace(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    return p;
}

/* A JSON string at p (at its opening quote) into a new buffer. */
static const char *jstring(const char *p, char **out)
{
    size_t len = strlen(p);
    char *s = malloc(len + 1), *w = s;
    cr_assert_not_null(s);
    for (p++; *p != '"'; p++) {
        cr_assert(*p && (unsigned char)*p >= 0x20, "bad string in JSON");
        if (*p != '\\') {
            *w++ = *p;
            continue;
        }
        p++;
        if (*p == 'u') {
            unsigned code;
            cr_assert_eq(sscanf(p + 1, "%4x", &code), 1, "bad \\u escape");
            cr_assert_lt(code, 0x80, "the trace writes only ASCII");
            *w++ = (char)code;
            p += 4;
        } else {
            cr_assert_not_null(strchr("\"\\/bfnrt", *p), "bad escape \\%c", *p);
            *w++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p;
        }
    }
    *w = '\0';
    *out = s;
    return p + 1;
}

static const char *jparse(const char *p, jvalue *v)
{
    memset(v, 0, sizeof *v);
    p = jspace(p);
    if (*p == '{' || *p == '[') {
        int object = *p == '{';
        char close = object ? '}' : ']';
        v->kind = object ? J_OBJECT : J_ARRAY;
        size_t cap = 8;
        v->items = calloc(cap, sizeof *v->items);
        v->keys = object ? calloc(cap, sizeof *v->keys) : NULL;
        p = jspace(p + 1);
        if (*p == close)
            return p + 1;
        for (;;) {
            if (v->n == cap) {
                cap *= 2;
                v->items = realloc(v->items, cap * sizeof *v->items);
                if (object)
                    v->keys = realloc(v->keys, cap * sizeof *v->keys);
            }
            cr_assert_not_null(v->items);
            if (object) {
                p = jspace(p);
                cr_assert_eq(*p, '"', "a key must be a string: %s", p);
                p = jspace(jstring(p, &v->keys[v->n]));
                cr_assert_eq(*p, ':', "':' expected: %s", p);
                p++;
            }
            p = jspace(jparse(p, &v->items[v->n++]));
            if (*p == ',') {
                p++;
                continue;
            }
            cr_assert_eq(*p, close, "'%c' expected: %s", close, p);
            return p + 1;
        }
    }
    if (*p == '"') {
        v->kind = J_STRING;
        return jstring(p, &v->string);
    }
    if (strncmp(p, "true", 4) == 0 || strncmp(p, "false", 5) == 0) {
        v->kind = J_BOOL;
        v->number = *p == 't';
        return p + (*p == 't' ? 4 : 5);
    }
    if (strncmp(p, "null", 4) == 0) {
        v->kind = J_NULL;
        return p + 4;
    }
    char *end;
    v->kind = J_NUMBER;
    v->number = strtod(p, &end);
    cr_assert(end != p && (*p == '-' || (*p >= '0' && *p <= '9')),
              "not JSON: %s", p);
    return end;
}

/* The item under key in object v, of kind `kind`. */
static const jvalue *jget(const jvalue *v, const char *key, jkind kind)
{
    cr_assert_eq(v->kind, J_OBJECT);
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0) {
            cr_assert_eq(v->items[i].kind, kind, "\"%s\" has kind %d, not %d",
                         key, v->items[i].kind, kind);
            return &v->items[i];
        }
    cr_assert_fail("no key \"%s\"", key);
    return NULL;
}

/* Exactly these keys, in this order. */
static void assert_keys(const jvalue *v, const char *const *keys, size_t n)
{
    cr_assert_eq(v->kind, J_OBJECT);
    cr_assert_eq(v->n, n, "%zu keys, expected %zu", v->n, n);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(v->keys[i], keys[i]);
}

/* A shape object ({"shape": [...], "names": [...], "id": n, ...}) against
 * a record's shape; ids must correspond one to one (map[k] pairs). */
static void assert_json_shape(const jvalue *v, const trace_shape *s,
                              unsigned long (*map)[2], size_t *nmap)
{
    const jvalue *dims = jget(v, "shape", J_ARRAY);
    const jvalue *names = jget(v, "names", J_ARRAY);
    cr_assert_eq(dims->n, s->ndim);
    cr_assert_eq(names->n, s->ndim);
    for (size_t d = 0; d < s->ndim; d++) {
        cr_assert_eq(dims->items[d].kind, J_NUMBER);
        cr_assert_eq(dims->items[d].number, (double)s->dims[d]);
        cr_assert_eq(names->items[d].kind, J_STRING);
        cr_assert_str_eq(names->items[d].string, s->names[d]);
    }
    unsigned long id = (unsigned long)jget(v, "id", J_NUMBER)->number;
    if (!id || !s->id) {
        cr_assert_eq(id, s->id, "id 0 is a header, in both runs or neither");
        return;
    }
    for (size_t k = 0; k < *nmap; k++)
        if (map[k][0] == id || map[k][1] == s->id) {
            cr_assert(map[k][0] == id && map[k][1] == s->id,
                      "tensor ids %lu and %lu do not correspond", id, s->id);
            return;
        }
    cr_assert_lt(*nmap, 256);
    map[*nmap][0] = id;
    map[(*nmap)++][1] = s->id;
}

/* What `mha trace` runs, in this process: a shape-only module on d_model
 * features with meta queries and keys (keys and values one tensor) and
 * real valid_lens when given; the records in log. */
static void trace_in_process(size_t B, size_t Lq, size_t Lk, size_t D,
                             size_t h, const double *lens, trace_log *log)
{
    multihead m;
    SELF_MODULE(&m, D, .num_hiddens = D, .num_heads = h, .shape_only = 1);
    tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL;
    OK(tensor_alloc_meta(SHAPE(B, Lq, D), &x));
    OK(tensor_alloc_meta(SHAPE(B, Lk, D), &y));
    if (lens)
        OK(tensor_from_array(SHAPE(B), lens, &vl));
    trace_log_start(log);
    OK(multihead_forward(&m, x, y, y, vl, &out, NULL));
    trace_log_stop(log);
    cr_assert_not(log->failed);
    FREE_ALL(out, vl, y, x);
    multihead_free(&m);
}

/* Every line of --json is one object with the record's keys; its shapes,
 * names, labels and flags are those of the same run's records, whose
 * text lines are the plain trace's, line for line. */
Test(cli, trace_json_lines_are_the_records, .init = enter_scratch,
     .fini = leave_scratch)
{
    static const struct {
        const char *args;
        size_t B, Lq, Lk, D, h;
        double lens[3];
    } cases[] = {
        {"trace|--valid-lens|3,2", 2, 4, 6, 100, 5, {3, 2}},
        {"trace|--batch|1|--queries|2|--hiddens|16|--heads|8", 1, 2, 6, 16, 8, {0}},
        {"trace|--batch|3|--queries|5|--kv|2|--hiddens|12|--heads|12|--valid-lens|0,1,2",
         3, 5, 2, 12, 12, {0, 1, 2}},
    };
    static const char *const record_keys[] = {"seq", "depth", "kind", "op",
                                              "name", "join", "inputs",
                                              "output"};
    static const char *const input_keys[] = {"shape", "names", "id", "label",
                                             "transposed", "side"};
    static const char *const output_keys[] = {"shape", "names", "id"};
    static const char *const joins[] = {"list", "matmul", "sum"};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char args[256];
        snprintf(args, sizeof args, "%s|--json", cases[c].args);
        run json = mha(args), text = mha(cases[c].args);
        assert_ok(&json, args);
        assert_ok(&text, cases[c].args);
        trace_log log;
        trace_in_process(cases[c].B, cases[c].Lq, cases[c].Lk, cases[c].D,
                         cases[c].h, strstr(args, "valid") ? cases[c].lens : NULL,
                         &log);
        cr_assert_eq(count_lines(json.out), log.count, "%s: %zu lines, %zu records",
                     args, count_lines(json.out), log.count);
        /* the text trace: a description, a blank line, the records, a
         * blank line, the result */
        cr_assert_eq(count_lines(text.out), log.count + 4);
        unsigned long ids[256][2];
        size_t nids = 0;
        const char *p = json.out;
        for (size_t i = 0; i < log.count; i++) {
            const trace_record *r = &log.records[i];
            char want[2048], got[2048];
            cr_assert_str_eq(line_at(text.out, i + 2, got, sizeof got),
                             trace_format_text(r, want, sizeof want));
            jvalue v;
            p = jparse(p, &v);
            cr_assert_eq(*p, '\n', "%s: line %zu holds more than one value", args, i);
            p++;
            assert_keys(&v, record_keys, 8);
            cr_assert_eq(jget(&v, "seq", J_NUMBER)->number, (double)i);
            cr_assert_eq(jget(&v, "depth", J_NUMBER)->number, (double)r->depth);
            cr_assert_str_eq(jget(&v, "kind", J_STRING)->string,
                             trace_kind_name(r->kind));
            cr_assert_str_eq(jget(&v, "op", J_STRING)->string, r->op);
            cr_assert_str_eq(jget(&v, "join", J_STRING)->string, joins[r->join]);
            const char *name = jget(&v, "name", J_STRING)->string;
            cr_assert(strncmp(r->op, name, strlen(name)) == 0 && name[0],
                      "name '%s' of op '%s'", name, r->op);
            const jvalue *in = jget(&v, "inputs", J_ARRAY);
            cr_assert_eq(in->n, r->n_inputs, "record %zu: %s", i, r->op);
            for (size_t j = 0; j < in->n; j++) {
                assert_keys(&in->items[j], input_keys, 6);
                assert_json_shape(&in->items[j], &r->inputs[j].shape, ids, &nids);
                cr_assert_str_eq(jget(&in->items[j], "label", J_STRING)->string,
                                 r->inputs[j].label);
                cr_assert_eq(jget(&in->items[j], "transposed", J_BOOL)->number,
                             (double)r->inputs[j].transposed);
                cr_assert_eq(jget(&in->items[j], "side", J_BOOL)->number,
                             (double)r->inputs[j].side);
            }
            if (r->has_output) {
                const jvalue *out = jget(&v, "output", J_OBJECT);
                assert_keys(out, output_keys, 3);
                assert_json_shape(out, &r->output, ids, &nids);
            } else {
                jget(&v, "output", J_NULL);
            }
            jfree(&v);
        }
        cr_assert_eq(*p, '\0', "%s: more after the records", args);
        trace_log_free(&log);
        run_free(&json);
        run_free(&text);
    }
}

/* --dot is the graph trace_write_dot draws of the same run, and nothing
 * else; on d2l's example the split's copies flow into dot_attention. */
Test(cli, trace_dot_is_the_module_graph, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha("trace|--valid-lens|3,2|--dot");
    assert_ok(&r, "trace --dot");
    trace_log log;
    trace_in_process(2, 4, 6, 100, 5, (double[]){3, 2}, &log);
    capture c;
    capture_start(&c);
    trace_write_dot(c.f, &log, 1);
    cr_assert_str_eq(r.out, capture_end(&c));
    capture_free(&c);
    trace_log_free(&log);
    static const char *const want[] = {
        "digraph trace {",
        "  in0 [shape=ellipse, label=\"q\"];",
        "  in1 [shape=ellipse, label=\"k = v\"];",
        "  in2 [shape=ellipse, label=\"valid_lens\"];",
        "  s0 [shape=box, label=\"W_q: x W^T\"];",
        "  s1 [shape=box, label=\"transpose_qkv(h=5)\"];",
        "  s6 [shape=box, label=\"repeat_interleave(5)\"];",
        "  s7 [shape=box, label=\"dot_attention(scale 1/sqrt(20))\"];",
        "  s8 [shape=box, label=\"transpose_output(h=5)\"];",
        "  s9 [shape=box, label=\"W_o: x W^T\"];",
        "  in0 -> s0 [label=\"(2, 4, 100)\"];",
        "  s0 -> s1 [label=\"(2, 4, 100)\\nnew\"];",
        "  in2 -> s6 [label=\"(2,)\"];",
        "  s1 -> s7 [label=\"(10, 4, 20)\\ncopy\"];",
        "  s3 -> s7 [label=\"(10, 6, 20)\\ncopy\"];",
        "  s6 -> s7 [label=\"(10,)\\ncopy\"];",
        "  s7 -> s8 [label=\"(10, 4, 20)\\nnew\"];",
        "  s8 -> s9 [label=\"(2, 4, 100)\\ncopy\"];",
        "  s9 -> out [label=\"(2, 4, 100)\\nnew\"];",
        "}",
    };
    assert_lines_in_order(r.out, want, sizeof want / sizeof want[0]);
    run_free(&r);
}

/* Graphviz reads what --dot writes. */
Test(cli, trace_dot_is_accepted_by_graphviz, .init = enter_scratch,
     .fini = leave_scratch)
{
    if (system("command -v dot > /dev/null 2>&1") != 0)
        cr_skip_test("dot (Graphviz) is not installed; tools/deps.sh installs it");
    static const char *const args[] = {
        "trace|--valid-lens|3,2|--dot",
        "trace|--batch|1|--queries|2|--hiddens|16|--heads|8|--dot",
        "trace|--batch|8|--queries|4096|--kv|4096|--hiddens|12288|--heads|96|--dot",
    };
    for (size_t i = 0; i < sizeof args / sizeof args[0]; i++) {
        run r = mha(args[i]);
        assert_ok(&r, args[i]);
        FILE *f = fopen("g.dot", "w");
        cr_assert_not_null(f);
        fputs(r.out, f);
        cr_assert_eq(fclose(f), 0);
        int status = system("dot -Tsvg g.dot > g.svg 2> dot.err");
        FILE *e = fopen("dot.err", "r");
        cr_assert_not_null(e);
        char *err = read_all(e);
        fclose(e);
        cr_assert_eq(status, 0, "%s: dot -Tsvg failed: %s", args[i], err);
        cr_assert_str_eq(err, "", "%s: dot -Tsvg complained", args[i]);
        free(err);
        FILE *svg = fopen("g.svg", "r");
        cr_assert_not_null(svg);
        char *text = read_all(svg);
        fclose(svg);
        cr_assert_not_null(strstr(text, "<svg"), "%s", args[i]);
        cr_assert_not_null(strstr(text, "dot_attention"), "%s", args[i]);
        free(text);
        run_free(&r);
    }
}

static int under_valgrind(void);

/* Shapes alone: a layer as wide as GPT-3's over 4096 positions (the
 * attention weights alone would be 96 GiB of numbers) traces at once. */
Test(cli, trace_of_any_size_runs_on_shapes_alone, .init = enter_scratch,
     .fini = leave_scratch)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run r = mha("trace|--batch|8|--queries|4096|--kv|4096|--hiddens|12288|"
                "--heads|96|--valid-lens|4096,1,2,3,4,5,6,7");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_ok(&r, "trace, GPT-3's width");
    static const char *const want[] = {
        "queries (8, 4096, 12288), keys and values (8, 4096, 12288): 96 heads of 128 features, valid_lens [4096, 1, 2, 3, 4, 5, 6, 7]",
        "    reshape(-1, 4096, 128) copy  (8, 96, 4096, 128) -> (768, 4096, 128)  (B*h, Lq, d_model/h)",
        "  repeat_interleave(96)        (8,)                                (B,)",
        "    expand(8, 96)        view  (8, 1) -> (8, 96)                   (B, h)",
        "    reshape(768)         copy  (8, 96) -> (768,)                   (B*h,)",
        "    Q K^T                new   (768, 4096, 128) @ (768, 4096, 128)^T -> (768, 4096, 4096)  (B*h, Lq, Lk)",
        "  W_o: x W^T             new   (8, 4096, 12288) -> (8, 4096, 12288)  (B, Lq, d_model)",
        "",
        "output (8, 4096, 12288), attention weights (8, 96, 4096, 4096)",
    };
    assert_lines_in_order(r.out, want, sizeof want / sizeof want[0]);
    char last[512];
    cr_assert_str_eq(line_at(r.out, count_lines(r.out) - 1, last, sizeof last),
                     want[8]);
    double seconds = (double)(t1.tv_sec - t0.tv_sec) +
                     (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    struct rusage ru;
    cr_assert_eq(getrusage(RUSAGE_CHILDREN, &ru), 0);
    if (!under_valgrind()) {
        cr_assert_lt(seconds, 5.0, "took %.2f s", seconds);
        cr_assert_lt(ru.ru_maxrss, 256L * 1024, "peak RSS %ld KiB", ru.ru_maxrss);
    }
    run_free(&r);
}

Test(cli, help_goes_to_stdout_with_status_0, .init = enter_scratch,
     .fini = leave_scratch)
{
    static const char *const cases[][2] = {
        {"--help", "usage: mha <command> [options]"},
        {"-h", "usage: mha <command> [options]"},
        {"trace|--help", "usage: mha trace [--batch B] [--queries Lq] [--kv Lk] [--hiddens D]"},
        {"forward|--help", "usage: mha forward --heads h --queries Q.npy [--keys K.npy] [--values V.npy]"},
        {"forward|--heads|2|--help", "usage: mha forward --heads h --queries Q.npy [--keys K.npy] [--values V.npy]"},
        {"heatmap|--help", "usage: mha heatmap --heads h --queries Q.npy ... (the inputs of mha forward)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run r = mha(cases[i][0]);
        assert_ok(&r, cases[i][0]);
        char buf[512];
        cr_assert_str_eq(line_at(r.out, 0, buf, sizeof buf), cases[i][1]);
        run_free(&r);
    }
}

/* --- mha forward ------------------------------------------------------ */

Test(cli, forward_matches_the_module_in_process, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD OUTS);
    assert_ok(&r, "forward");
    cr_assert_str_eq(r.out, "", "forward prints nothing without --trace");
    assert_matches(2, "k.npy", "v.npy", 0, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    run_free(&r);
}

Test(cli, forward_with_biases, .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD "|--bq|bq.npy|--bk|bk.npy|--bv|bv.npy|--bo|bo.npy" OUTS);
    assert_ok(&r, "forward with biases");
    assert_matches(2, "k.npy", "v.npy", 1, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    // and the biases change the result: without them it differs
    tensor *with = load("out.npy"), *without, *w;
    reference(2, "q.npy", "k.npy", "v.npy", 0, NULL, &without, &w);
    cr_assert_gt(rel_error(with, without), 1e-3);
    FREE_ALL(with, without, w);
    run_free(&r);
}

/* A bias left out is zero: --bo alone is the biased module with b_q, b_k,
 * b_v = 0. */
Test(cli, forward_missing_biases_are_zero, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    tensor *zero;
    OK(tensor_alloc(SHAPE(8), &zero));
    OK(npy_write("bq.npy", zero));
    OK(npy_write("bk.npy", zero));
    OK(npy_write("bv.npy", zero));
    run r = mha(FORWARD "|--bo|bo.npy" OUTS);
    assert_ok(&r, "forward --bo");
    assert_matches(2, "k.npy", "v.npy", 1, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    tensor_free(zero);
    run_free(&r);
}

Test(cli, forward_keys_and_values_default_to_the_queries,
     .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    gsl_rng *rng = mha_rng_new(5);
    put_normal("wk_self.npy", SHAPE(8, 5), rng, 0.5);
    put_normal("wv_self.npy", SHAPE(8, 5), rng, 0.5);
    gsl_rng_free(rng);
    run r = mha("forward|--heads|4|--queries|q.npy|--wq|wq.npy|--wk|"
                "wk_self.npy|--wv|wv_self.npy|--wo|wo.npy" OUTS);
    assert_ok(&r, "self-attention");
    assert_matches(4, NULL, NULL, 0, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 4, 4, 4));
    run_free(&r);
}

/* One file, several spellings of the same valid_lens. */
Test(cli, forward_valid_lens_from_the_command_line_and_from_files,
     .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    tensor *one, *two;
    OK(tensor_from_array(SHAPE(2), (double[]){3, 1}, &one));
    OK(tensor_from_array(SHAPE(2, 4), (double[]){1, 2, 3, 6, 6, 5, 0, 2}, &two));
    put_int64("vl_i8.npy", SHAPE(2), (int64_t[]){3, 1});
    put_values("vl_f8.npy", SHAPE(2), (double[]){3, 1});
    put_int64("vl2_i8.npy", SHAPE(2, 4), (int64_t[]){1, 2, 3, 6, 6, 5, 0, 2});
    put_values("vl2_f8.npy", SHAPE(2, 4), (double[]){1, 2, 3, 6, 6, 5, 0, 2});
    static const struct {
        const char *option;
        int two_d;
    } cases[] = {
        {"--valid-lens|3,1", 0},
        {"--valid-lens=3,1", 0},
        {"--valid-lens-file|vl_i8.npy", 0},
        {"--valid-lens-file|vl_f8.npy", 0},
        {"--valid-lens-file|vl2_i8.npy", 1},
        {"--valid-lens-file|vl2_f8.npy", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char args[1024];
        snprintf(args, sizeof args, FORWARD "|%s" OUTS, cases[i].option);
        run r = mha(args);
        assert_ok(&r, cases[i].option);
        assert_matches(2, "k.npy", "v.npy", 0, cases[i].two_d ? two : one,
                       SHAPE(2, 4, 6), SHAPE(2, 2, 4, 6));
        // masked keys get exactly 0
        tensor *a = load("a.npy");
        for (size_t b = 0; b < 2; b++)
            for (size_t h = 0; h < 2; h++)
                for (size_t q = 0; q < 4; q++) {
                    double len = cases[i].two_d ? *TENSOR_AT(two, b, q)
                                                : *TENSOR_AT(one, b);
                    for (size_t k = (size_t)len; k < 6 && len > 0; k++)
                        cr_assert_eq(*TENSOR_AT(a, b, h, q, k), 0.0);
                }
        tensor_free(a);
        run_free(&r);
    }
    FREE_ALL(one, two);
}

/* Equal keys score equally: every head gives each valid key 1/valid_len,
 * masked keys 0; valid_len 0 gives d2l's uniform 1/Lk.  Worked out by
 * hand, not by the module. */
Test(cli, attention_out_holds_the_weights_by_hand, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    tensor *k = ramp(SHAPE(2, 6, 7), 0, 0), *row = ramp(SHAPE(7), 0.5, -0.25);
    for (size_t b = 0; b < 2; b++)
        for (size_t t = 0; t < 6; t++)
            for (size_t j = 0; j < 7; j++)
                *TENSOR_AT(k, b, t, j) = *TENSOR_AT(row, j);
    OK(npy_write("k_same.npy", k));
    run r = mha("forward|--heads|2|--queries|q.npy|--keys|k_same.npy|--values|"
                "v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|"
                "--valid-lens|4,0" OUTS);
    assert_ok(&r, "forward, equal keys");
    tensor *a = load("a.npy");
    const double lens[2] = {4, 0};
    for (size_t b = 0; b < 2; b++)
        for (size_t h = 0; h < 2; h++)
            for (size_t q = 0; q < 4; q++)
                for (size_t t = 0; t < 6; t++) {
                    double want = lens[b] == 0 ? 1.0 / 6
                                  : t < lens[b] ? 1.0 / lens[b] : 0.0;
                    cr_assert_float_eq(*TENSOR_AT(a, b, h, q, t), want, 1e-15,
                                       "A[%zu, %zu, %zu, %zu]", b, h, q, t);
                }
    FREE_ALL(a, k, row);
    run_free(&r);
}

Test(cli, forward_trace_and_only_out, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD "|--out|out.npy|--trace");
    assert_ok(&r, "forward --trace");
    /* the fast path runs: heads are views, nothing is copied */
    static const char *const want[] = {
        "multihead_fast(h=2)            q (2, 4, 5), k (2, 6, 7), v (2, 6, 3)",
        "  W_q: x W^T             new   (2, 4, 5) -> (2, 4, 8)              (B, Lq, d_model)",
        "  permute(0, 2, 1, 3)    view  (2, 4, 2, 4) -> (2, 2, 4, 4)        (B, h, Lq, d_model/h)",
        "  attention per head(scale 1/sqrt(4)) new   (2, 2, 4, 4), (2, 2, 6, 4), (2, 2, 6, 4) -> (2, 2, 4, 4)  (B, h, Lq, d_model/h)",
        "  W_o: x W^T             new   (2, 4, 8) -> (2, 4, 6)              (B, Lq, D_out)",
    };
    assert_lines_in_order(r.out, want, 5);
    cr_assert_null(strstr(r.out, " copy "), "the fast path copies nothing");
    char names[512];
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "bk.npy bo.npy bq.npy bv.npy k.npy out.npy q.npy "
                            "v.npy wk.npy wo.npy wq.npy wv.npy");
    run_free(&r);
}

/* --rope: the numbers of the module with rope in this process; the
 * trace shows Q turned for positions 2..5 (queries at the end of the 6
 * keys) and K for 0..5; --rope-base changes the numbers. */
Test(cli, forward_rope, .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD OUTS "|--rope|--trace");
    assert_ok(&r, "forward --rope");
    static const char *const want[] = {
        "  W_q: x W^T             new   (2, 4, 5) -> (2, 4, 8)              (B, Lq, d_model)",
        "  rope(p=4, pos 2..5)    new   (2, 4, 8) -> (2, 4, 8)              (B, Lq, d_model)",
        "  W_k: x W^T             new   (2, 6, 7) -> (2, 6, 8)              (B, Lk, d_model)",
        "  rope(p=4, pos 0..5)    new   (2, 6, 8) -> (2, 6, 8)              (B, Lk, d_model)",
        "  W_v: x W^T             new   (2, 6, 3) -> (2, 6, 8)              (B, Lk, d_model)",
    };
    assert_lines_in_order(r.out, want, 5);
    run_free(&r);
    reference_rope_base = 10000;
    assert_matches(2, "k.npy", "v.npy", 0, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    tensor *plain_out, *plain_a, *got = load("out.npy");
    reference_rope_base = 0;
    reference(2, "q.npy", "k.npy", "v.npy", 0, NULL, &plain_out, &plain_a);
    cr_assert_gt(rel_error(got, plain_out), 1e-3, "--rope changed nothing");
    tensor_free(got);

    r = mha(FORWARD OUTS "|--rope|--rope-base|500");
    assert_ok(&r, "forward --rope --rope-base 500");
    run_free(&r);
    reference_rope_base = 500;
    assert_matches(2, "k.npy", "v.npy", 0, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    reference_rope_base = 0;
    FREE_ALL(plain_out, plain_a);
}

/* mha trace --rope: the rope steps on shapes alone, and the line that
 * describes the case says so. */
Test(cli, trace_rope, .init = enter_scratch, .fini = leave_scratch)
{
    run r = mha("trace|--batch|1|--queries|3|--kv|5|--hiddens|8|--heads|2|"
                "--rope|--rope-base|1e4");
    assert_ok(&r, "trace --rope");
    static const char *const want[] = {
        ("rope (base 10000) on Q and K; queries (1, 3, 8), keys and values "
         "(1, 5, 8): 2 heads of 4 features, no valid_lens"),
        "  rope(p=4, pos 2..4)    new   (1, 3, 8) -> (1, 3, 8)              (B, Lq, d_model)",
        "  rope(p=4, pos 0..4)    new   (1, 5, 8) -> (1, 5, 8)              (B, Lk, d_model)",
    };
    assert_lines_in_order(r.out, want, 3);
    run_free(&r);
}

/* Numbers in the description are the very numbers given: a base one
 * ulp above 1 is not "1", and a length of a million is not "1e+06". */
Test(cli, trace_prints_numbers_exactly, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha("trace|--batch|1|--queries|3|--kv|5|--hiddens|8|--heads|2|"
                "--rope|--rope-base|1.0000000000000002");
    assert_ok(&r, "trace --rope-base 1.0000000000000002");
    char line[512];
    cr_assert_str_eq(line_at(r.out, 0, line, sizeof line),
                     "rope (base 1.0000000000000002) on Q and K; queries "
                     "(1, 3, 8), keys and values (1, 5, 8): 2 heads of 4 "
                     "features, no valid_lens");
    run_free(&r);
    r = mha("trace|--kv|1000000|--valid-lens|1000000,2");
    assert_ok(&r, "trace --valid-lens 1000000,2");
    cr_assert_str_eq(line_at(r.out, 0, line, sizeof line),
                     "queries (2, 4, 100), keys and values (2, 1000000, 100): "
                     "5 heads of 20 features, valid_lens [1000000, 2]");
    run_free(&r);
    r = mha("trace|--kv|10|--valid-lens|1000000,2");
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, "mha trace: --valid-lens '1000000,2': entry 1 "
                            "(1000000) is larger than --kv 10\n");
    cr_assert_str_eq(r.out, "");
    run_free(&r);
}

/* Replacing files: the new numbers, the old permission bits. */
Test(cli, forward_replaces_existing_outputs, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    tensor *junk = ramp(SHAPE(3), 1, 1);
    OK(npy_write("out.npy", junk));
    OK(npy_write("a.npy", junk));
    cr_assert_eq(chmod("out.npy", 0640), 0);
    run r = mha(FORWARD OUTS);
    assert_ok(&r, "forward over old files");
    assert_matches(2, "k.npy", "v.npy", 0, NULL, SHAPE(2, 4, 6),
                   SHAPE(2, 2, 4, 6));
    struct stat st;
    cr_assert_eq(stat("out.npy", &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0640);
    tensor_free(junk);
    run_free(&r);
}

/* --- mha heatmap ------------------------------------------------------ */

Test(cli, heatmap_terminal_is_heatmap_terminal, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    run r = mha("heatmap|--heads|2|" INPUTS "|--valid-lens|3,2|--terminal");
    assert_ok(&r, "heatmap --terminal");
    tensor *lens, *out, *w;
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    reference(2, "q.npy", "k.npy", "v.npy", 0, lens, &out, &w);
    const char *titles[] = {"example 0, head 0", "example 0, head 1",
                            "example 1, head 0", "example 1, head 1"};
    heatmap_options opt = {.titles = titles, .ntitles = 4};
    capture c;
    capture_start(&c);
    OK(heatmap_terminal(c.f, w, &opt));
    cr_assert_str_eq(r.out, capture_end(&c));
    cr_assert_not_null(strstr(r.out, "example 1, head 1"));
    capture_free(&c);
    FREE_ALL(lens, out, w);
    run_free(&r);
}

Test(cli, heatmap_png_and_svg, .init = enter_scratch, .fini = leave_scratch)
{
    if (!heatmap_gnuplot_available())
        cr_skip_test("gnuplot is not installed");
    write_inputs();
    cr_assert_eq(mkdir("pics", 0755), 0);
    run r = mha("heatmap|--heads|2|" INPUTS "|--png|pics/heads.png|--svg|"
                "heads.svg");
    assert_ok(&r, "heatmap --png --svg");
    cr_assert_str_eq(r.out, "");
    unsigned char head[8] = {0};
    FILE *f = fopen("pics/heads.png", "rb");
    cr_assert_not_null(f);
    cr_assert_eq(fread(head, 1, 8, f), 8);
    fclose(f);
    cr_assert(memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0, "not a PNG");
    f = fopen("heads.svg", "rb");
    cr_assert_not_null(f);
    char *svg = read_all(f);
    fclose(f);
    cr_assert_not_null(strstr(svg, "<svg"));
    free(svg);
    // gnuplot's data and script stayed in the scratch directories, gone
    char names[512];
    list_dir("pics", names, sizeof names);
    cr_assert_str_eq(names, "heads.png");
    list_dir(".", names, sizeof names);
    cr_assert_str_eq(names, "bk.npy bo.npy bq.npy bv.npy heads.svg k.npy "
                            "pics q.npy v.npy wk.npy wo.npy wq.npy wv.npy");
    run_free(&r);
}

/* --- bad invocations -------------------------------------------------- */

/* Files a careless output path could hit: old.npy and old.svg (outputs
 * of an earlier run, with their own permission bits), a directory sub
 * holding a file, a FIFO, a socket, and other names for files: qlink and
 * oldlink (symbolic links to q.npy and old.npy), qhard and oldhard (hard
 * links), here (a symbolic link to this directory). */
static void write_special_files(void)
{
    tensor *old = ramp(SHAPE(3), 1, 1);
    OK(npy_write("old.npy", old));
    tensor_free(old);
    cr_assert_eq(chmod("old.npy", 0640), 0);
    FILE *f = fopen("old.svg", "w");
    cr_assert_not_null(f);
    fputs("<svg>an earlier picture</svg>\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod("old.svg", 0600), 0);
    cr_assert_eq(mkdir("sub", 0755), 0);
    f = fopen("sub/keep.txt", "w");
    cr_assert_not_null(f);
    fputs("kept\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(mkfifo("pipe", 0644), 0);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    strcpy(addr.sun_path, "sock");
    cr_assert_eq(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    close(fd);
    cr_assert_eq(symlink("q.npy", "qlink"), 0);
    cr_assert_eq(symlink("old.npy", "oldlink"), 0);
    cr_assert_eq(link("q.npy", "qhard"), 0);
    cr_assert_eq(link("old.npy", "oldhard"), 0);
    cr_assert_eq(symlink(".", "here"), 0);
}

/* The inputs each wrong in one way (the standard shapes are at the top). */
static void write_bad_inputs(void)
{
    write_inputs();
    gsl_rng *r = mha_rng_new(7);
    put_normal("q2d.npy", SHAPE(4, 5), r, 1);
    put_normal("k_batch.npy", SHAPE(3, 6, 7), r, 1);
    put_normal("v_batch.npy", SHAPE(3, 6, 3), r, 1);
    put_normal("v_len.npy", SHAPE(2, 5, 3), r, 1);
    put_normal("wq_cols.npy", SHAPE(8, 6), r, 1);
    put_normal("keys_w.npy", SHAPE(8, 5), r, 1);
    put_normal("wv_cols.npy", SHAPE(8, 4), r, 1);
    put_normal("wk_rows.npy", SHAPE(9, 7), r, 1);
    put_normal("wv_rows.npy", SHAPE(9, 3), r, 1);
    put_normal("wo_cols.npy", SHAPE(6, 9), r, 1);
    put_normal("b7.npy", SHAPE(7), r, 1);
    put_normal("b5.npy", SHAPE(5), r, 1);
    put_normal("b8x1.npy", SHAPE(8, 1), r, 1);
    put_normal("b8.npy", SHAPE(8), r, 1);
    put_values("vl3.npy", SHAPE(3), (double[]){1, 2, 3});
    put_values("vl_neg.npy", SHAPE(2), (double[]){2, -1});
    put_values("vl_frac.npy", SHAPE(2), (double[]){2.5, 1});
    put_int64("vl2_big.npy", SHAPE(2, 4), (int64_t[]){1, 2, 3, 4, 1, 2, 7, 1});
    put_values("vl2_shape.npy", SHAPE(2, 3), (double[]){1, 1, 1, 1, 1, 1});
    gsl_rng_free(r);
    // finite numbers whose products overflow: 1e200 * 1e200, 5 * 1e308
    tensor *t = ramp(SHAPE(2, 4, 5), 0, 0);
    tensor_fill(t, 1e200);
    OK(npy_write("q_huge.npy", t));
    tensor_fill(t, 1e308);
    OK(npy_write("q_max.npy", t));
    tensor_free(t);
    t = ramp(SHAPE(2, 6, 7), 0, 0);
    tensor_fill(t, 1e200);
    OK(npy_write("k_huge.npy", t));
    tensor_free(t);
    t = ramp(SHAPE(8, 5), 1, 0);
    OK(npy_write("wq_ones.npy", t));
    tensor_free(t);
    t = ramp(SHAPE(8, 7), 1, 0);
    OK(npy_write("wk_ones.npy", t));
    tensor_free(t);
    write_special_files();
}

struct bad_case {
    const char *args;    /* '|'-separated */
    const char *message; /* the one line on stderr, without its newline */
};

#define F2 "forward|--heads|2|"
#define REST_Q "|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy"

static const struct bad_case bad_cases[] = {
    // the command line itself
    {"", "mha: missing command: trace, quiz, forward, heatmap or view (see mha --help)"},
    {"backward", "mha: unknown command 'backward' (expected trace, quiz, forward, heatmap or view; see mha --help)"},
    {FORWARD "|--out|out.npy|--bogus|1", "mha forward: unknown option '--bogus' (see mha forward --help)"},
    {FORWARD "|-o|out.npy", "mha forward: unknown option '-o' (see mha forward --help)"},
    {FORWARD "|out.npy", "mha forward: unexpected argument 'out.npy' (options start with --; see mha forward --help)"},
    {FORWARD "|--out", "mha forward: --out needs a value"},
    {FORWARD "|--out|--trace", "mha forward: --out needs a value, got the option '--trace'"},
    {FORWARD "|--out|out.npy|--trace=yes", "mha forward: --trace takes no value, got 'yes'"},
    {FORWARD "|--out|out.npy|--wq|wq.npy", "mha forward: --wq given twice ('wq.npy', then 'wq.npy')"},
    {FORWARD "|--out|out.npy|--trace|--trace", "mha forward: --trace given twice"},
    {"forward|" INPUTS "|--out|out.npy", "mha forward: --heads is required (see mha forward --help)"},
    {FORWARD, "mha forward: --out is required (see mha forward --help)"},
    {"forward|--heads|2|--queries|q.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wq is required (see mha forward --help)"},
    // numbers
    {"forward|--heads|x|" INPUTS "|--out|out.npy", "mha forward: --heads 'x' is not a whole number (expected 1 to 1000000)"},
    {"forward|--heads|2x|" INPUTS "|--out|out.npy", "mha forward: --heads '2x' is not a whole number (expected 1 to 1000000)"},
    {"forward|--heads|-2|" INPUTS "|--out|out.npy", "mha forward: --heads '-2' is negative (expected 1 to 1000000)"},
    {"forward|--heads|0|" INPUTS "|--out|out.npy", "mha forward: --heads '0' is zero (expected 1 to 1000000)"},
    {"forward|--heads||" INPUTS "|--out|out.npy", "mha forward: --heads '' is empty (expected 1 to 1000000)"},
    {"forward|--heads|18446744073709551617|" INPUTS "|--out|out.npy",
     "mha forward: --heads '18446744073709551617' is too large (expected 1 to 1000000)"},
    {"forward|--heads| 2|" INPUTS "|--out|out.npy", "mha forward: --heads ' 2' is not a whole number (expected 1 to 1000000)"},
    {"trace|--batch|1e3", "mha trace: --batch '1e3' is not a whole number (expected 1 to 1000000)"},
    {"trace|--kv|1000001", "mha trace: --kv '1000001' is too large (expected 1 to 1000000)"},
    {"trace|--hiddens|0x10", "mha trace: --hiddens '0x10' is not a whole number (expected 1 to 1000000)"},
    {"trace|--heads|3", "mha trace: --heads 3 does not divide --hiddens 100"},
    {"trace|--valid-lens|3", "mha trace: --valid-lens '3' has 1 entry but --batch is 2"},
    {"trace|--valid-lens|3,7", "mha trace: --valid-lens '3,7': entry 2 (7) is larger than --kv 6"},
    {"trace|--batch|1000000|--queries|1000000|--kv|1000000|--hiddens|1000000|--heads|1000000",
     "mha trace: the attention weights (1000000, 1000000, 1000000, 1000000) would take more than 18446744073709551615 bytes, the most a size_t counts; choose smaller sizes"},
    {"trace|--json|--dot", "mha trace: --json and --dot exclude each other; give one of them"},
    {"trace|--quiz|--json", "mha trace: --quiz and --json exclude each other; give one of them"},
    {"trace|--dot|--batch|1|--quiz", "mha trace: --quiz and --dot exclude each other; give one of them"},
    {"trace|--json|--json", "mha trace: --json given twice"},
    // shapes
    {"forward|--heads|3|" INPUTS "|--out|out.npy", "mha forward: --heads 3 does not divide D = 8 (--wq wq.npy has shape (8, 5))"},
    {F2 "--queries|q2d.npy" REST_Q, "mha forward: --queries q2d.npy has shape (4, 5), expected 3 dimensions (B, Lq, Dq)"},
    {F2 "--queries|q.npy|--keys|q2d.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --keys q2d.npy has shape (4, 5), expected 3 dimensions (B, Lk, Dk)"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|q2d.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --values q2d.npy has shape (4, 5), expected 3 dimensions (B, Lk, Dv)"},
    {F2 "--queries|q.npy|--keys|k_batch.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --keys k_batch.npy has shape (3, 6, 7) but the queries (2, 4, 5) have batch size 2"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v_batch.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --values v_batch.npy has shape (3, 6, 3) but the queries (2, 4, 5) have batch size 2"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v_len.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --values v_len.npy has shape (2, 5, 3) but the keys (2, 6, 7) have 6 positions"},
    {F2 "--queries|q.npy|--keys|k.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --keys k.npy has shape (2, 6, 7) but the values (= queries) (2, 4, 5) have 4 positions (give --values too)"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq_cols.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wq wq_cols.npy has shape (8, 6) but the queries (2, 4, 5) have 5 features"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|keys_w.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wk keys_w.npy has shape (8, 5) but the keys (2, 6, 7) have 7 features"},
    {F2 "--queries|q.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --values v.npy has shape (2, 6, 3) but the keys (= queries) (2, 4, 5) have 4 positions"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv_cols.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wv wv_cols.npy has shape (8, 4) but the values (2, 6, 3) have 3 features"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk_rows.npy|--wv|wv.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wk wk_rows.npy has shape (9, 7) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv_rows.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wv wv_rows.npy has shape (9, 3) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo_cols.npy|--out|out.npy",
     "mha forward: --wo wo_cols.npy has shape (6, 9) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|b8.npy|--out|out.npy",
     "mha forward: --wo b8.npy has shape (8,), expected 2 dimensions (D_out, D)"},
    {FORWARD "|--bq|b7.npy|--out|out.npy", "mha forward: --bq b7.npy has shape (7,) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {FORWARD "|--bk|b7.npy|--out|out.npy", "mha forward: --bk b7.npy has shape (7,) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {FORWARD "|--bv|b7.npy|--out|out.npy", "mha forward: --bv b7.npy has shape (7,) but D = 8 (--wq wq.npy has shape (8, 5))"},
    {FORWARD "|--bo|b5.npy|--out|out.npy", "mha forward: --bo b5.npy has shape (5,) but D_out = 6 (--wo wo.npy has shape (6, 8))"},
    {FORWARD "|--bo|b8.npy|--out|out.npy", "mha forward: --bo b8.npy has shape (8,) but D_out = 6 (--wo wo.npy has shape (6, 8))"},
    {FORWARD "|--bq|b8x1.npy|--out|out.npy", "mha forward: --bq b8x1.npy has shape (8, 1), expected 1 dimension (D,)"},
    // valid_lens
    {FORWARD "|--valid-lens|3,2,1|--out|out.npy", "mha forward: --valid-lens '3,2,1' has 3 entries but the queries (2, 4, 5) have batch size 2"},
    {FORWARD "|--valid-lens|3,-1|--out|out.npy",
     "mha forward: --valid-lens '3,-1': entry 2 ('-1') is negative (expected whole numbers from 0 to 1000000, separated by commas)"},
    {FORWARD "|--valid-lens|3,,1|--out|out.npy",
     "mha forward: --valid-lens '3,,1': entry 2 ('') is empty (expected whole numbers from 0 to 1000000, separated by commas)"},
    {FORWARD "|--valid-lens|3;1|--out|out.npy",
     "mha forward: --valid-lens '3;1': entry 1 ('3;1') is not a whole number (expected whole numbers from 0 to 1000000, separated by commas)"},
    {FORWARD "|--valid-lens|3,7|--out|out.npy",
     "mha forward: --valid-lens '3,7': entry 2 (7) is larger than the number of keys, 6 (the keys (2, 6, 7))"},
    {FORWARD "|--valid-lens-file|vl3.npy|--out|out.npy",
     "mha forward: --valid-lens-file vl3.npy has shape (3,) but the queries (2, 4, 5) need (2,) or (2, 4)"},
    {FORWARD "|--valid-lens-file|vl2_shape.npy|--out|out.npy",
     "mha forward: --valid-lens-file vl2_shape.npy has shape (2, 3) but the queries (2, 4, 5) need (2,) or (2, 4)"},
    {FORWARD "|--valid-lens-file|vl_neg.npy|--out|out.npy", "mha forward: --valid-lens-file vl_neg.npy: valid_lens[1] = -1 is negative"},
    {FORWARD "|--valid-lens-file|vl_frac.npy|--out|out.npy", "mha forward: --valid-lens-file vl_frac.npy: valid_lens[0] = 2.5 is not a whole number"},
    {FORWARD "|--valid-lens-file|vl2_big.npy|--out|out.npy",
     "mha forward: --valid-lens-file vl2_big.npy: valid_lens[1, 2] = 7 is larger than the number of keys, 6 (the keys (2, 6, 7))"},
    {FORWARD "|--valid-lens|3,2|--valid-lens-file|vl3.npy|--out|out.npy",
     "mha forward: --valid-lens '3,2' and --valid-lens-file 'vl3.npy': give one or the other"},
    // files
    {F2 "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk.npy|--wv|nothere.npy|--wo|wo.npy|--out|out.npy",
     "mha forward: --wv: npy_read: nothere.npy: cannot open: No such file or directory"},
    {FORWARD "|--out|nodir/out.npy", "mha forward: --out nodir/out.npy: cannot create a file next to it: No such file or directory"},
    {FORWARD "|--out|out.npy|--attention-out|nodir/a.npy",
     "mha forward: --attention-out nodir/a.npy: cannot create a file next to it: No such file or directory"},
    {FORWARD "|--out|x.npy|--attention-out|x.npy", "mha forward: --out 'x.npy' and --attention-out 'x.npy' name the same file"},
    // outputs that are not regular files: refused, never replaced
    {FORWARD "|--out|pipe", "mha forward: --out 'pipe' is a FIFO: mha writes only regular files and will not replace it"},
    {FORWARD "|--out|sock", "mha forward: --out 'sock' is a socket: mha writes only regular files and will not replace it"},
    {FORWARD "|--out|/dev/null", "mha forward: --out '/dev/null' is a character device: mha writes only regular files and will not replace it"},
    {FORWARD "|--out|old.npy|--attention-out|sub",
     "mha forward: --attention-out 'sub' is a directory: mha writes only regular files and will not replace it"},
    {FORWARD "|--out|here", "mha forward: --out 'here' is a directory: mha writes only regular files and will not replace it"},
    {"heatmap|--heads|2|" INPUTS "|--svg|old.svg|--png|sub",
     "mha heatmap: --png 'sub' is a directory: mha writes only regular files and will not replace it"},
    // a failed run keeps the files an earlier run wrote
    {FORWARD "|--out|old.npy|--attention-out|nodir/a.npy",
     "mha forward: --attention-out nodir/a.npy: cannot create a file next to it: No such file or directory"},
    {"heatmap|--heads|2|" INPUTS "|--png|nodir/h.png|--svg|old.svg",
     "mha heatmap: --png nodir/h.png: cannot create a directory next to it: No such file or directory"},
    // two names for one file: ./x, a symbolic link, a hard link, a linked directory
    {FORWARD "|--out|out.npy|--attention-out|./out.npy", "mha forward: --out 'out.npy' and --attention-out './out.npy' name the same file"},
    {FORWARD "|--out|old.npy|--attention-out|oldlink", "mha forward: --out 'old.npy' and --attention-out 'oldlink' name the same file"},
    {FORWARD "|--out|oldhard|--attention-out|old.npy", "mha forward: --out 'oldhard' and --attention-out 'old.npy' name the same file"},
    {FORWARD "|--out|out.npy|--attention-out|here/out.npy", "mha forward: --out 'out.npy' and --attention-out 'here/out.npy' name the same file"},
    {"heatmap|--heads|2|" INPUTS "|--png|x.png|--svg|./x.png", "mha heatmap: --png 'x.png' and --svg './x.png' name the same file"},
    {"heatmap|--heads|2|" INPUTS "|--png|old.svg|--svg|here/old.svg", "mha heatmap: --png 'old.svg' and --svg 'here/old.svg' name the same file"},
    // an output with no name
    {FORWARD "|--out||--attention-out|a.npy", "mha forward: --out '' is an empty name: give the file to write"},
    {"heatmap|--heads|2|" INPUTS "|--svg|", "mha heatmap: --svg '' is an empty name: give the file to write"},
    // an output that would replace an input
    {FORWARD "|--out|./q.npy", "mha forward: --out './q.npy' and --queries 'q.npy' name the same file (an output must not replace an input)"},
    {FORWARD "|--out|out.npy|--attention-out|qlink",
     "mha forward: --attention-out 'qlink' and --queries 'q.npy' name the same file (an output must not replace an input)"},
    {FORWARD "|--out|qhard", "mha forward: --out 'qhard' and --queries 'q.npy' name the same file (an output must not replace an input)"},
    {FORWARD "|--bo|bo.npy|--out|here/bo.npy", "mha forward: --out 'here/bo.npy' and --bo 'bo.npy' name the same file (an output must not replace an input)"},
    {FORWARD "|--valid-lens-file|vl3.npy|--out|out.npy|--attention-out|vl3.npy",
     "mha forward: --attention-out 'vl3.npy' and --valid-lens-file 'vl3.npy' name the same file (an output must not replace an input)"},
    {"heatmap|--heads|2|" INPUTS "|--svg|wo.npy", "mha heatmap: --svg 'wo.npy' and --wo 'wo.npy' name the same file (an output must not replace an input)"},
    // finite inputs, results that overflow: refused, never NaN in a file
    {F2 "--queries|q_max.npy|--keys|k.npy|--values|v.npy|--wq|wq_ones.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|--out|old.npy",
     "mha forward: multihead_forward_fast: the projection overflowed: Q[0, 0, 0] = inf from finite inputs (Q (2, 4, 8))"},
    {F2 "--queries|q_huge.npy|--keys|k_huge.npy|--values|v.npy|--wq|wq_ones.npy|--wk|wk_ones.npy|--wv|wv.npy|--wo|wo.npy|--out|old.npy|--attention-out|a.npy",
     "mha forward: multihead_forward_fast: the scores overflowed: scores[0, 0, 0, 0] = inf from finite inputs (scores (2, 2, 4, 6), Q K^T per head)"},
    {"heatmap|--heads|2|--queries|q_huge.npy|--keys|k_huge.npy|--values|v.npy|--wq|wq_ones.npy|--wk|wk_ones.npy|--wv|wv.npy|--wo|wo.npy|--terminal|--svg|old.svg",
     "mha heatmap: multihead_forward_fast: the scores overflowed: scores[0, 0, 0, 0] = inf from finite inputs (scores (2, 2, 4, 6), Q K^T per head)"},
    // rope
    {FORWARD "|--out|out.npy|--rope-base|500", "mha forward: --rope-base '500' needs --rope"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|1", "mha forward: --rope-base '1' must be a finite number > 1"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|-3", "mha forward: --rope-base '-3' must be a finite number > 1"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|inf", "mha forward: --rope-base 'inf' must be a finite number > 1"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|nan", "mha forward: --rope-base 'nan' must be a finite number > 1"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|1e999", "mha forward: --rope-base '1e999' must be a finite number > 1"},
    {FORWARD "|--out|out.npy|--rope|--rope-base|10k", "mha forward: --rope-base '10k' is not a number"},
    {FORWARD "|--out|out.npy|--rope|--rope-base| 10", "mha forward: --rope-base ' 10' is not a number"},
    {FORWARD "|--out|out.npy|--rope=yes", "mha forward: --rope takes no value, got 'yes'"},
    {"forward|--heads|8|" INPUTS "|--out|out.npy|--rope",
     "mha forward: multihead: rope turns pairs of features, but the head size p = d_model/h = 8/8 = 1 is odd"},
    {"heatmap|--heads|8|" INPUTS "|--terminal|--rope",
     "mha heatmap: multihead: rope turns pairs of features, but the head size p = d_model/h = 8/8 = 1 is odd"},
    {"heatmap|--heads|2|" INPUTS "|--terminal|--rope-base|2", "mha heatmap: --rope-base '2' needs --rope"},
    {"trace|--hiddens|10|--heads|2|--rope",
     "mha trace: multihead: rope turns pairs of features, but the head size p = d_model/h = 10/2 = 5 is odd"},
    {"trace|--rope|--rope-base|0.5", "mha trace: --rope-base '0.5' must be a finite number > 1"},
    {"trace|--rope-base|100", "mha trace: --rope-base '100' needs --rope"},
    // heatmap
    {"heatmap|--heads|2|" INPUTS, "mha heatmap: nothing to draw: give --png F, --svg F or --terminal"},
    {"heatmap|--heads|2|" INPUTS "|--out|out.npy", "mha heatmap: unknown option '--out' (see mha heatmap --help)"},
    {"heatmap|--heads|3|" INPUTS "|--terminal", "mha heatmap: --heads 3 does not divide D = 8 (--wq wq.npy has shape (8, 5))"},
    {"heatmap|--heads|2|" INPUTS "|--png|nodir/h.png",
     "mha heatmap: --png nodir/h.png: cannot create a directory next to it: No such file or directory"},
};

/* The same, with MHA_MEMORY_LIMIT set for the run. */
struct limit_case {
    const char *limit; /* MHA_MEMORY_LIMIT, bytes */
    const char *args;
    const char *message;
};

static const struct limit_case limit_cases[] = {
    // memory: the standard run needs 7680 bytes with its weights (B, h, Lq, Lk), 6912 without
    {"7000", FORWARD OUTS, "mha forward: the run needs about 7.5 KiB of memory (7680 bytes) but MHA_MEMORY_LIMIT is 6.8 KiB (7000 bytes); "
                   "drop --attention-out, or use mha trace for shapes alone"},
    {"6911", FORWARD "|--out|out.npy", "mha forward: the run needs about 6.8 KiB of memory (6912 bytes) but MHA_MEMORY_LIMIT is 6.7 KiB (6911 bytes); "
                               "use mha trace for shapes alone"},
    {"7679", "heatmap|--heads|2|" INPUTS "|--terminal", "mha heatmap: the run needs about 7.5 KiB of memory (7680 bytes) but MHA_MEMORY_LIMIT is 7.5 KiB (7679 bytes); "
                                               "the heatmap needs every weight: use shorter sequences, or mha trace for shapes alone"},
    {"1", FORWARD OUTS, "mha forward: the run needs about 7.5 KiB of memory (7680 bytes) but MHA_MEMORY_LIMIT is 1 byte; "
                "drop --attention-out, or use mha trace for shapes alone"},
    {"7 GB", FORWARD OUTS, "mha forward: MHA_MEMORY_LIMIT '7 GB' is not a whole number of bytes (8 GB is 8000000000)"},
    {"", FORWARD OUTS, "mha forward: MHA_MEMORY_LIMIT '' is not a whole number of bytes (8 GB is 8000000000)"},
    {"-5", FORWARD OUTS, "mha forward: MHA_MEMORY_LIMIT '-5' is not a whole number of bytes (8 GB is 8000000000)"},
    // 0 would read as no limit at all
    {"0", FORWARD OUTS, "mha forward: MHA_MEMORY_LIMIT '0' allows no memory at all: give the bytes a run may use, or unset it for the machine's memory"},
    {"000", "heatmap|--heads|2|" INPUTS "|--terminal", "mha heatmap: MHA_MEMORY_LIMIT '000' allows no memory at all: give the bytes a run may use, or unset it for the machine's memory"},
};

/* Under valgrind (make memcheck) every process costs a second or two: the
 * sanitizer build and the plain one run every case, valgrind every 4th
 * (the sanitizer's leak checker covers the rest). */
static int under_valgrind(void)
{
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload") != NULL;
}

Test(cli, bad_invocations, .init = enter_scratch, .fini = leave_scratch)
{
    write_bad_inputs();
    snapshot before = snapshot_take();
    size_t n = sizeof bad_cases / sizeof bad_cases[0];
    cr_assert_geq(n, 80);
    for (size_t i = 0; i < n; i += under_valgrind() ? 4 : 1) {
        const struct bad_case *c = &bad_cases[i];
        run r = c->args[0] ? mha(c->args) : mha_argv((char *[]){NULL});
        assert_refused(&r, c->message, &before, c->args);
        run_free(&r);
    }
    for (size_t i = 0; i < sizeof limit_cases / sizeof limit_cases[0]; i++) {
        const struct limit_case *c = &limit_cases[i];
        cr_assert_eq(setenv("MHA_MEMORY_LIMIT", c->limit, 1), 0);
        run r = mha(c->args);
        unsetenv("MHA_MEMORY_LIMIT");
        assert_refused(&r, c->message, &before, c->args);
        run_free(&r);
    }
    free(before.data);
}

/* A .npy cut short: npy_read's own message, behind the option's name. */
Test(cli, truncated_npy_is_refused, .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    FILE *f = fopen("k.npy", "rb");
    cr_assert_not_null(f);
    char *bytes = read_all(f);
    fclose(f);
    f = fopen("cut.npy", "wb");
    cr_assert_eq(fwrite(bytes, 1, 128 + 40, f), 128 + 40); // data is 672 bytes
    fclose(f);
    free(bytes);
    tensor *t;
    mha_clear_error();
    cr_assert_eq(npy_read("cut.npy", &t), GSL_EBADLEN);
    char want[MHA_ERROR_MAX + 64];
    snprintf(want, sizeof want, "mha forward: --keys: %s\n", mha_last_error());
    cr_assert_not_null(strstr(want, "cut.npy"));
    run r = mha("forward|--heads|2|--queries|q.npy|--keys|cut.npy|--values|"
                "v.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy" OUTS);
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, want);
    cr_assert(access("out.npy", F_OK) != 0 && access("a.npy", F_OK) != 0);
    run_free(&r);
}

/* When A cannot be written, OUT is not written either, and a file already
 * there keeps its old numbers. */
Test(cli, failed_attention_out_leaves_out_alone, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    tensor *old = ramp(SHAPE(3), 1, 1);
    OK(npy_write("out.npy", old));
    run r = mha(FORWARD "|--out|out.npy|--attention-out|nodir/a.npy");
    cr_assert_eq(r.status, 2);
    tensor *now = load("out.npy");
    cr_assert(tensor_same_shape(now, old));
    cr_assert_eq(rel_error(now, old), 0.0);
    FREE_ALL(now, old);
    run_free(&r);
}

/* An output naming a directory is refused before any work, so OUT, new
 * or already there, is never touched.  (The fileset's own suite checks
 * the undo of a rename that fails all the same.) */
Test(cli, attention_out_naming_a_directory_keeps_out, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    tensor *old = ramp(SHAPE(3), 1, 1);
    OK(npy_write("out.npy", old));
    tensor_free(old);
    cr_assert_eq(chmod("out.npy", 0600), 0);
    cr_assert_eq(mkdir("sub", 0755), 0);
    assert_run_refused(FORWARD "|--out|out.npy|--attention-out|sub",
                       "mha forward: --attention-out 'sub' is a directory: "
                       "mha writes only regular files and will not replace it");
}

/* The PNG is drawn, then the SVG cannot be: the PNG of an earlier run is
 * still there, byte for byte, and no new file appears. */
Test(cli, failed_svg_keeps_the_earlier_png, .init = enter_scratch,
     .fini = leave_scratch)
{
    if (!heatmap_gnuplot_available())
        cr_skip_test("gnuplot is not installed");
    write_inputs();
    FILE *f = fopen("old.png", "wb");
    cr_assert_not_null(f);
    fputs("an earlier picture\n", f);
    cr_assert_eq(fclose(f), 0);
    cr_assert_eq(chmod("old.png", 0604), 0);
    assert_run_refused("heatmap|--heads|2|" INPUTS "|--png|old.png|--svg|"
                       "nodir/h.svg",
                       "mha heatmap: --svg nodir/h.svg: cannot create a "
                       "directory next to it: No such file or directory");
}

/* An absolute path and a relative one for one file, existing or not. */
Test(cli, absolute_and_relative_names_of_one_file_are_refused,
     .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    char cwd[2048], args[4096], message[4096];
    cr_assert_not_null(getcwd(cwd, sizeof cwd));
    snprintf(args, sizeof args, FORWARD "|--out|out.npy|--attention-out|%s/out.npy", cwd);
    snprintf(message, sizeof message, "mha forward: --out 'out.npy' and --attention-out '%s/out.npy' name the same file", cwd);
    assert_run_refused(args, message);
    snprintf(args, sizeof args, FORWARD "|--out|%s/k.npy", cwd);
    snprintf(message, sizeof message, "mha forward: --out '%s/k.npy' and --keys 'k.npy' name the same file (an output must not replace an input)", cwd);
    assert_run_refused(args, message);
}

/* A dangling link names the file it will point to: an output through it
 * and an output at its target are one file, as with a link to a file
 * that exists. */
Test(cli, a_dangling_link_to_another_output_is_refused, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    cr_assert_eq(symlink("o.npy", "ol.npy"), 0);
    assert_run_refused(FORWARD "|--out|o.npy|--attention-out|ol.npy",
                       "mha forward: --out 'o.npy' and --attention-out "
                       "'ol.npy' name the same file");
}

/* An output name as long as a name may be (255 bytes) is written: its
 * temporary takes a short name beside it. */
Test(cli, an_output_name_of_255_bytes_is_written, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    char name[256], args[1024];
    memset(name, 'x', 251);
    strcpy(name + 251, ".npy");
    snprintf(args, sizeof args, FORWARD "|--out|%s", name);
    run r = mha(args);
    assert_ok(&r, "a 255-byte output name");
    cr_assert_eq(access(name, F_OK), 0);
    run_free(&r);
}

/* stdout that cannot take the trace or the terminal picture: the run
 * fails with one line, and the outputs it wrote stay temporaries, removed;
 * the files of an earlier run are as they were. */
Test(cli, failed_stdout_leaves_every_file_as_it_was, .init = enter_scratch,
     .fini = leave_scratch)
{
    skip_under_valgrind();
    if (access("/dev/full", W_OK) != 0)
        cr_skip_test("no /dev/full");
    write_inputs();
    tensor *old = ramp(SHAPE(3), 1, 1);
    OK(npy_write("out.npy", old));
    tensor_free(old);
    cr_assert_eq(chmod("out.npy", 0640), 0);
    snapshot before = snapshot_take();
    const char *args = FORWARD "|--trace" OUTS;
    run r = mha_to(args, "/dev/full");
    assert_refused(&r, "mha forward: cannot write to stdout: No space left on "
                       "device",
                   &before, args);
    run_free(&r);
    if (heatmap_gnuplot_available()) {
        args = "heatmap|--heads|2|" INPUTS "|--terminal|--svg|out.svg";
        r = mha_to(args, "/dev/full");
        assert_refused(&r, "mha heatmap: --terminal: heatmap_terminal: "
                           "cannot write the heatmap: No space left on "
                           "device",
                       &before, args);
        run_free(&r);
    }
    // and with stdout working, the same runs succeed
    r = mha(FORWARD "|--trace" OUTS);
    assert_ok(&r, "forward --trace");
    cr_assert_neq(r.out[0], '\0');
    run_free(&r);
    free(before.data);
}

/* A request beyond the machine's memory is refused at once, from the
 * .npy headers, before anything is allocated: here the weights (1, 1,
 * 10^6, 10^6) alone would take 8 TB. */
Test(cli, a_run_beyond_physical_memory_is_refused_at_once,
     .init = enter_scratch, .fini = leave_scratch)
{
    tensor *t = ramp(SHAPE(1, 1000000, 1), 0, 1e-6);
    OK(npy_write("long.npy", t));
    tensor_free(t);
    t = ramp(SHAPE(1, 1), 1, 0);
    OK(npy_write("w.npy", t));
    tensor_free(t);
    snapshot before = snapshot_take();
    const char *args = "forward|--heads|1|--queries|long.npy|--wq|w.npy|--wk|"
                       "w.npy|--wv|w.npy|--wo|w.npy|--out|out.npy|"
                       "--attention-out|a.npy";
    // inputs 8e6 + weights 64 + projections, heads, out 4.0e7 + A 8e12
    double need = 8e6 + 64 + 5 * 8e6 + 8e12;
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGE_SIZE);
    cr_assert_lt(phys, need, "this machine has more than 8 TB");
    char message[512];
    snprintf(message, sizeof message,
             "mha forward: the run needs about %.2f GiB of memory (%.0f "
             "bytes) but the machine has %.2f GiB; drop --attention-out, or "
             "use mha trace for shapes alone",
             need / 1073741824.0, need, phys / 1073741824.0);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    run r = mha(args);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_refused(&r, message, &before, args);
    run_free(&r);
    if (!under_valgrind())
        cr_assert_lt((double)(t1.tv_sec - t0.tv_sec), 5.0, "not at once");
    // within a limit, the run goes ahead: without its weights it is small
    cr_assert_eq(setenv("MHA_MEMORY_LIMIT", "6912", 1), 0);
    write_inputs();
    r = mha(FORWARD "|--out|out.npy");
    unsetenv("MHA_MEMORY_LIMIT");
    assert_ok(&r, "forward within MHA_MEMORY_LIMIT");
    run_free(&r);
    free(before.data);
}

/* A control character in a value cannot break the one line. */
Test(cli, messages_stay_on_one_line, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha_argv((char *[]){"trace", "--batch", "2\n3", NULL});
    cr_assert_eq(r.status, 2);
    cr_assert_str_eq(r.err, "mha trace: --batch '2\\x0a3' is not a whole "
                            "number (expected 1 to 1000000)\n");
    run_free(&r);
}

/* --- out of memory ---------------------------------------------------- */

/* The sweep below tries every allocation, or every 16th under valgrind. */

/* Fail the library's allocation number k = 0, 1, 2 ... in turn until the
 * run succeeds: each failure must be one line saying so, exit status 2,
 * and no file left.  Returns how many runs failed. */
static long sweep_allocations(const char *args)
{
    char before[2048], after[2048];
    list_dir(".", before, sizeof before);
    long step = under_valgrind() ? 16 : 1, failed = 0;
    for (long k = 0;; k += step) {
        cr_assert_lt(k, 5000, "mha %s never succeeded", args);
        char value[32];
        snprintf(value, sizeof value, "%ld", k);
        cr_assert_eq(setenv("MHA_DEBUG_FAIL_ALLOC_AFTER", value, 1), 0);
        run r = mha(args);
        if (r.status == 0) {
            run_free(&r);
            break;
        }
        cr_assert_eq(r.status, 2, "allocation %ld: exit %d, stderr %s", k,
                     r.status, r.err);
        size_t len = strlen(r.err);
        cr_assert(len > 0 && strchr(r.err, '\n') == r.err + len - 1,
                  "allocation %ld: not one line: %s", k, r.err);
        cr_assert_not_null(strstr(r.err, "out of memory"),
                           "allocation %ld: %s", k, r.err);
        list_dir(".", after, sizeof after);
        cr_assert_str_eq(after, before, "allocation %ld left files", k);
        failed++;
        run_free(&r);
    }
    unsetenv("MHA_DEBUG_FAIL_ALLOC_AFTER");
    return failed;
}

Test(cli, forward_survives_every_failed_allocation, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    put_int64("vl2.npy", SHAPE(2, 4), (int64_t[]){1, 2, 3, 6, 6, 5, 0, 2});
    long failed = sweep_allocations(
        FORWARD "|--bq|bq.npy|--bo|bo.npy|--valid-lens-file|vl2.npy|--trace" OUTS);
    // reading 9 files, the module and the forward pass allocate plenty
    cr_assert_gt(failed, under_valgrind() ? 4 : 60, "only %ld failures", failed);
    cr_assert(access("out.npy", F_OK) == 0 && access("a.npy", F_OK) == 0);
}

Test(cli, trace_and_heatmap_survive_every_failed_allocation,
     .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    long failed = sweep_allocations("trace|--batch|1|--queries|2|--hiddens|16|"
                                    "--heads|8|--valid-lens|2|--dot");
    cr_assert_gt(failed, under_valgrind() ? 2 : 30, "trace: only %ld", failed);
    failed = sweep_allocations("heatmap|--heads|2|" INPUTS "|--terminal");
    cr_assert_gt(failed, under_valgrind() ? 2 : 30, "heatmap: only %ld", failed);
}

/* --- mha quiz ------------------------------------------------------- */

/* text into path. */
static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    cr_assert_geq(fputs(text, f), 0);
    cr_assert_eq(fclose(f), 0);
}

/* n bytes into path, NULs and all. */
static void put_bytes(const char *path, const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    cr_assert_eq(fwrite(bytes, 1, n, f), n);
    cr_assert_eq(fclose(f), 0);
}

/* `mha quiz --seed S --solution` (its first line names the seed; then
 * "# step ..." comments and numbered answers). */
static char *solution_of(unsigned seed)
{
    char args[64];
    snprintf(args, sizeof args, "quiz|--seed|%u|--solution", seed);
    run r = mha(args);
    assert_ok(&r, args);
    free(r.err);
    return r.out;
}

/* `mha quiz --seed S --up-to NN --solution`. */
static char *solution_of_upto(unsigned seed, const char *upto)
{
    char args[80];
    snprintf(args, sizeof args, "quiz|--seed|%u|--up-to|%s|--solution", seed,
             upto);
    run r = mha(args);
    assert_ok(&r, args);
    free(r.err);
    return r.out;
}

/* The answers of a solution: answer k (1-based) into buf; the count. */
static size_t answers_of(const char *sol, char (*ans)[160], size_t cap)
{
    size_t n = 0;
    char line[512];
    for (size_t i = 0, lines = count_lines(sol); i < lines; i++) {
        line_at(sol, i, line, sizeof line);
        size_t k;
        int at;
        if (line[0] == '#' || sscanf(line, "%zu. %n", &k, &at) != 1)
            continue;
        cr_assert_eq(k, n + 1, "answer %zu numbered %zu", n + 1, k);
        cr_assert_lt(n, cap);
        snprintf(ans[n++], 160, "%s", line + at);
    }
    return n;
}

/* The quiz's tests ask seed 23's case: queries (3, 4, 12), keys and
 * values (3, 5, 12), 3 heads of 4 features, valid_lens [2, 1, 1]: 21
 * questions, the last reshapes of the splits and the join copies, and
 * repeat_interleave's 9 values differ from tile's. */
#define SEED "23"
#define SEED_N 21

/* More than any quiz asks. */
#define QUIZ_MAX_ANSWERS 64

/* The key is the module's own trace, worked out from the sizes alone:
 * for 200 seeds, each shape the key gives is the output of a step of
 * `mha trace` for the case's sizes (the trace --solution names), in
 * order, and each view or copy is that step's kind; and the worksheet
 * of mha trace --quiz for those sizes asks as many questions. */
Test(cli, quiz_key_is_the_module_trace, .init = enter_scratch,
     .fini = leave_scratch, .timeout = 120)
{
    // under valgrind (make memcheck) each mha run takes seconds: a few
    // seeds there, for the memory; the breadth is the plain run's
    unsigned seeds = getenv("MHA_MEMCHECK") ? 6 : 200;
    for (unsigned seed = 1; seed <= seeds; seed++) {
        char *sol = solution_of(seed);
        char ans[QUIZ_MAX_ANSWERS][160];
        size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
        // the trace command, from the second line
        char cmd[512], args[600];
        line_at(sol, 1, cmd, sizeof cmd);
        const char *at = strstr(cmd, "mha trace ");
        cr_assert_not_null(at, "%s", cmd);
        snprintf(args, sizeof args, "%s", at + 4);
        *strstr(args, " --quiz") = '\0';
        for (char *p = args; *p; p++)
            if (*p == ' ')
                *p = '|';
        run tr = mha(args);
        assert_ok(&tr, args);
        // the steps asked about come before "# and about this case:"
        size_t asked = 0;
        for (size_t i = 0, lines = count_lines(sol); i < lines; i++) {
            char line[512];
            if (!strcmp(line_at(sol, i, line, sizeof line), "# and about this case:"))
                break;
            asked += line[0] != '#';
        }
        size_t t = 0, tlines = count_lines(tr.out);
        for (size_t k = 0; k < asked; k++) {
            if (ans[k][0] != '(') // values and kinds go with a shape
                continue;
            const char *kind = k + 1 < asked && ans[k + 1][0] != '(' &&
                                       ans[k + 1][0] != '['
                                   ? ans[k + 1]
                                   : NULL;
            char want[200], line[512];
            snprintf(want, sizeof want, "-> %.160s ", ans[k]);
            int found = 0;
            for (; t < tlines && !found; t++) {
                line_at(tr.out, t, line, sizeof line);
                char *arrow = strstr(line, want);
                if (!arrow)
                    continue;
                found = !kind || strstr(line, kind[0] == 'v' ? " view  (" : " copy  (");
            }
            cr_assert(found, "seed %u, answer %zu: no step makes %s%s%s in:\n%s",
                      seed, k + 1, ans[k], kind ? " as a " : "",
                      kind ? kind : "", tr.out);
        }
        // the worksheet for those sizes asks the same number of questions
        snprintf(args + strlen(args), sizeof args - strlen(args), "|--quiz|--no-answers");
        run ws = mha(args);
        assert_ok(&ws, args);
        char title[64];
        snprintf(title, sizeof title, "mha trace --quiz: %zu questions\n", n);
        cr_assert(!strncmp(ws.out, title, strlen(title)), "seed %u: %.80s", seed,
                  ws.out);
        run_free(&tr);
        run_free(&ws);
        free(sol);
    }
}

/* The teacher's answer file scores N/N, with --seed or from the seed its
 * first line names; a wrong view or copy is told the reason in its case,
 * strides and all, with its question number and line. */
Test(cli, quiz_answer_file_graded, .init = enter_scratch, .fini = leave_scratch)
{
    char *sol = solution_of(23);
    put_text("answers.txt", sol);
    run r = mha("quiz|--seed|" SEED "|--answers|answers.txt");
    assert_ok(&r, "quiz --answers");
    cr_assert_str_eq(r.out, "score: " "21/21\n");
    run_free(&r);
    r = mha("quiz|--answers|answers.txt");
    assert_ok(&r, "quiz --answers, the seed from the file");
    cr_assert_str_eq(r.out, "score: 21/21\n");
    run_free(&r);

    char *p = strstr(sol, "\n7. copy\n");
    cr_assert_not_null(p, "%s", sol);
    memcpy(p + 4, "VIEW", 4);
    p = strstr(sol, "\n2. (3, 4, 3, 4)\n");
    cr_assert_not_null(p);
    memcpy(p + 4, "[3,4,3,4]   ", 12); // brackets for a tuple are fine
    put_text("answers.txt", sol);
    r = mha("quiz|--answers|answers.txt");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    // a short score from a sheet that names no --up-to, which the quiz
    // of all chapters fits best and no shorter quiz fits as well: nothing
    // to note
    cr_assert_str_eq(r.err, "");
    cr_assert_str_eq(r.out,
                     "question 7 (line 13, step 4, view or copy): answered "
                     "view; right: copy: the strides are (48, 4, 12, 1); B and "
                     "h merge in place only when stride(B) = h x stride(h) = "
                     "3 x 4 = 12, and it is 48, so the numbers are gathered "
                     "into a new buffer\n"
                     "score: 20/21\n");
    run_free(&r);
    free(sol);
}

/* seed 23's answers, unnumbered, with line k (1-based) of the answers
 * written as `repl` (NULL: left out), each line ending in eol, after a
 * first line naming the seed: into path. */
static void put_plain(const char *path, const char *bom, size_t k,
                      const char *repl, const char *eol)
{
    char *sol = solution_of(23);
    char ans[QUIZ_MAX_ANSWERS][160], text[8192];
    size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
    snprintf(text, sizeof text, "%s# mha quiz --seed 23%s", bom, eol);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 == k && !repl)
            continue;
        strcat(text, i + 1 == k ? repl : ans[i]);
        strcat(text, eol);
    }
    put_text(path, text);
    free(sol);
}

/* Answer files as students type them: a byte-order mark, Windows line
 * ends, numbers before the answers, brackets around shapes, UTF-16, tabs
 * and comments all grade as the answers they hold; a blank line is no
 * answer and the rest are graded on; a missing answer, or one that is
 * not an answer, is said with its question and line; a score always. */
Test(cli, quiz_answer_files_forgiven, .init = enter_scratch,
     .fini = leave_scratch)
{
    // BOM, CRLF and numbers: the solution itself, as Notepad saves it
    char *sol = solution_of(23), text[8192] = "\xef\xbb\xbf";
    for (char *p = sol; *p; p++) {
        if (*p == '\n')
            strcat(text, "\r");
        strncat(text, p, 1);
    }
    put_text("bom_crlf.txt", text);
    // numbers in other styles, out of order, brackets, a tab and a note
    char ans[QUIZ_MAX_ANSWERS][160];
    size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
    cr_assert_eq(n, SEED_N);
    snprintf(text, sizeof text, "Seed: 23\nName: Ada\n");
    for (size_t i = n; i-- > 0;) {
        char one[200];
        if (ans[i][0] == '(') {
            ans[i][0] = '[';
            ans[i][strlen(ans[i]) - 1] = ']';
        }
        snprintf(one, sizeof one, "%zu)\t%s   # sure\n", i + 1, ans[i]);
        strcat(text, one);
    }
    put_text("numbered.txt", text);
    // UTF-16 with its mark, as PowerShell writes it
    char wide[16384];
    size_t w = 0;
    wide[w++] = (char)0xff;
    wide[w++] = (char)0xfe;
    for (char *p = sol; *p; p++) {
        wide[w++] = *p;
        wide[w++] = 0;
    }
    put_bytes("utf16.txt", wide, w);
    for (size_t i = 0; i < 3; i++) {
        static const char *const files[] = {"bom_crlf.txt", "numbered.txt",
                                            "utf16.txt"};
        char args[128];
        snprintf(args, sizeof args, "quiz|--answers|%s", files[i]);
        run r = mha(args);
        assert_ok(&r, args);
        cr_assert_str_eq(r.out, "score: 21/21\n", "%s", files[i]);
        run_free(&r);
    }

    put_plain("blank.txt", "", 5, "", "\n");
    put_plain("missing.txt", "", 5, NULL, "\n");
    put_plain("junk.txt", "", 2, "(3, 4, 3, 4", "\n");
    put_plain("nul.txt", "", 3, "view\x01garbage", "\n");
    run r = mha("quiz|--answers|blank.txt");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "question 5 (line 6, step 3, view or copy): no "
                            "answer (a blank line); right: view: a permute "
                            "only reorders the axes and their strides, (48, "
                            "12, 4, 1) -> (48, 4, 12, 1); no number moves\n"
                            "score: 20/21\n");
    run_free(&r);
    r = mha("quiz|--answers|missing.txt");
    cr_assert_eq(r.status, 1);
    // every answer after the fifth is one early: each is wrong, and the
    // last question has none
    cr_assert(strstr(r.out, "question 21 (step 0, the attention weights") == NULL);
    cr_assert(strstr(r.out, "question 21 (the attention weights the forward "
                            "returns: their shape): no answer (the answers end "
                            "before it); right: (3, 3, 4, 5), that is (B, h, "
                            "Lq, Lk)\n"),
              "%s", r.out);
    cr_assert(strstr(r.out, "\nscore: "), "%s", r.out);
    run_free(&r);
    r = mha("quiz|--answers|junk.txt");
    cr_assert_eq(r.status, 1);
    cr_assert_str_eq(r.out, "question 2 (line 3, step 2, its shape): '(3, 4, "
                            "3, 4' is not an answer (a shape like (2, 4, 100), "
                            "view or copy, values like [3, 3, 2, 2], or a "
                            "number); right: (3, 4, 3, 4), that is (B, Lq, h, "
                            "d_model/h)\nscore: 20/21\n");
    run_free(&r);
    r = mha("quiz|--answers|nul.txt");
    cr_assert_eq(r.status, 1);
    cr_assert_str_eq(r.out, "question 3 (line 4, step 2, view or copy): byte 5 "
                            "of the line is a control character, not text "
                            "('view\\x01garbage'); right: view: splitting one "
                            "axis never copies: d_model (stride 1) becomes h "
                            "and d_model/h with strides 4 and 1\n"
                            "score: 20/21\n");
    run_free(&r);
    free(sol);
}

/* --grade-dir: a file name a spreadsheet would run as a formula is
 * neutralised in the CSV, behind a single quote (OWASP's rule for CSV
 * injection), and quoted when it needs quotes. */
Test(cli, quiz_grade_dir_neutralises_formulas, .init = enter_scratch,
     .fini = leave_scratch)
{
    cr_assert_eq(mkdir("class", 0755), 0);
    static const char *const names[] = {
        "class/=HYPERLINK(\"http:,x\").txt", "class/+1.txt", "class/-2.txt",
        "class/@SUM(A1).txt", "class/\tt.txt", "class/\rr.txt", "class/a=b.txt"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        put_text(names[i], "(3, 4, 12)\n");
    run r = mha("quiz|--grade-dir|class");
    cr_assert_eq(r.status, 1, "exit %d", r.status);
    cr_assert_str_eq(r.out, "file,seed,score,max\n"
                            "'\tt.txt,,,\n"
                            "\"'\rr.txt\",,,\n"
                            "'+1.txt,,,\n"
                            "'-2.txt,,,\n"
                            "\"'=HYPERLINK(\"\"http:,x\"\").txt\",,,\n"
                            "'@SUM(A1).txt,,,\n"
                            "a=b.txt,,,\n");
    run_free(&r);
}

/* --grade-dir: a class at once.  Every file in the folder, by name, each
 * graded by the seed its first line names: a CSV on stdout, the
 * feedback on stderr, each line after its file's name. */
Test(cli, quiz_grade_dir_grades_a_class, .init = enter_scratch,
     .fini = leave_scratch)
{
    cr_assert_eq(mkdir("class", 0755), 0);
    cr_assert_eq(mkdir("class/sub", 0755), 0);
    put_plain("class/ada.txt", "\xef\xbb\xbf", 0, NULL, "\r\n");
    put_plain("class/bob, jr.txt", "", 4, "", "\n");
    put_plain("class/cy.txt", "", 21, NULL, "\n");
    char *sol = solution_of(7);
    put_text("class/dee.txt", sol);
    free(sol);
    put_text("class/.hidden", "not graded");
    put_text("class/eve.txt", "(3, 4, 12)\n");
    snapshot before = snapshot_take();
    run r = mha("quiz|--grade-dir|class");
    cr_assert_eq(r.status, 1, "exit %d", r.status);
    cr_assert_str_eq(r.out, "file,seed,score,max\n"
                            "ada.txt,23,21,21\n"
                            "\"bob, jr.txt\",23,20,21\n"
                            "cy.txt,23,20,21\n"
                            "dee.txt,7,29,29\n"
                            "eve.txt,,,\n");
    static const char *const want[] = {
        "bob, jr.txt: question 4 (line 5, step 3, its shape): no answer (a "
        "blank line); right: (3, 3, 4, 4), that is (B, h, Lq, d_model/h)",
        "cy.txt: note: the sheet names no --up-to in its first line, so it "
        "is graded as the quiz of all chapters, 06 .. 21; its 20 answers are "
        "as many as the quiz of --up-to 07 asks, which that one begins with: "
        "if --up-to 07 was the class's, give it",
        "cy.txt: question 21 (the attention weights the forward returns: "
        "their shape): no answer (the answers end before it); right: (3, 3, 4, 5), "
        "that is (B, h, Lq, Lk)",
        "mha quiz: class/eve.txt: its first line names no seed (\"# mha quiz "
        "--seed 17\"); not graded",
    };
    assert_lines_in_order(r.err, want, 4);
    cr_assert_eq(count_lines(r.err), 4, "%s", r.err);
    assert_unchanged(&before, "quiz --grade-dir class");
    free(before.data);
    run_free(&r);
    assert_run_refused("quiz|--grade-dir|nodir",
                       "mha quiz: cannot read --grade-dir 'nodir': No such "
                       "file or directory");
    assert_run_refused("quiz|--grade-dir|class/ada.txt",
                       "mha quiz: --grade-dir 'class/ada.txt' is not a folder");
    assert_run_refused("quiz|--seed|1|--grade-dir|class",
                       "mha quiz: --grade-dir takes each file's seed from its "
                       "first line; leave out --seed");
}

/* A sheet of a quiz of fewer chapters names them in its first line, and
 * is graded as that quiz wherever it is graded (a handout's mha, at its
 * last chapter, prints "--up-to 10" too); a given --up-to must match.
 * From chapter 17 on the quiz is the whole one, and its sheets name no
 * chapter. */
Test(cli, quiz_sheets_name_their_chapters, .init = enter_scratch,
     .fini = leave_scratch)
{
    run r = mha("quiz|--seed|17|--up-to|10|--solution");
    assert_ok(&r, "quiz --up-to 10 --solution");
    const char *head = "# mha quiz --seed 17 --up-to 10: queries (1, 2, 4), "
                       "keys and values (1, 5, 4): 2 heads of 2 features, "
                       "valid_lens [4]\n";
    cr_assert(!strncmp(r.out, head, strlen(head)), "%s", r.out);
    put_text("week2.txt", r.out);
    run_free(&r);
    r = mha("quiz|--seed|17|--up-to|17|--solution");
    assert_ok(&r, "quiz --up-to 17 --solution");
    cr_assert(!strncmp(r.out, "# mha quiz --seed 17: ", 22), "%s", r.out);
    put_text("whole.txt", r.out);
    run_free(&r);

    r = mha("quiz|--answers|week2.txt");
    assert_ok(&r, "quiz --answers week2.txt");
    cr_assert_str_eq(r.out, "score: 21/21\n");
    run_free(&r);
    // the worksheet tells a student to type that first line
    r = mha("quiz|--seed|17|--up-to|10|--worksheet");
    assert_ok(&r, "quiz --up-to 10 --worksheet");
    cr_assert(!strncmp(r.out, "mha quiz --seed 17 --up-to 10: 21 questions\n",
                       44), "%s", r.out);
    cr_assert(strstr(r.out, "first line is this one line,\n"
                            "    # mha quiz --seed 17 --up-to 10\n"
                            "then one answer a line"),
              "%s", r.out);
    run_free(&r);
    r = mha("quiz|--answers|week2.txt|--up-to|10");
    assert_ok(&r, "quiz --answers week2.txt --up-to 10");
    cr_assert_str_eq(r.out, "score: 21/21\n");
    run_free(&r);
    // the first line typed over two, as a wrapped worksheet showed it:
    // its --up-to, alone on the next line, is the header's
    {
        char *sol = solution_of_upto(17, "10");
        char split[8192] = "# mha quiz --seed 17\n  --up-to 10\n";
        for (const char *l = sol; *l;) {
            const char *nl = strchr(l, '\n');
            size_t len = nl ? (size_t)(nl - l) + 1 : strlen(l);
            if (l[0] != '#')
                strncat(split, l, len);
            l += len;
        }
        put_text("split.txt", split);
        free(sol);
        r = mha("quiz|--answers|split.txt");
        assert_ok(&r, "quiz --answers split.txt");
        cr_assert_str_eq(r.out, "score: 21/21\n");
        run_free(&r);
    }
    assert_run_refused("quiz|--answers|week2.txt|--up-to|12",
                       "mha quiz: --answers 'week2.txt' is for --up-to 10 "
                       "(its first line), not --up-to 12");
    put_text("week99.txt", "# mha quiz --seed 17 --up-to 99\n");
    assert_run_refused("quiz|--answers|week99.txt",
                       "mha quiz: --answers 'week99.txt' is for --up-to 99 "
                       "(its first line), which is not a chapter 06 .. 21");

    cr_assert_eq(mkdir("class", 0755), 0);
    cr_assert_eq(rename("week2.txt", "class/a.txt"), 0);
    cr_assert_eq(rename("whole.txt", "class/b.txt"), 0);
    r = mha("quiz|--grade-dir|class");
    assert_ok(&r, "quiz --grade-dir class");
    cr_assert_str_eq(r.out, "file,seed,score,max\n"
                            "a.txt,17,21,21\n"
                            "b.txt,17,29,29\n");
    run_free(&r);
    r = mha("quiz|--grade-dir|class|--up-to|12");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    const char *rows = "file,seed,score,max\na.txt,,,\nb.txt,17,";
    cr_assert(!strncmp(r.out, rows, strlen(rows)), "%s", r.out);
    cr_assert(strstr(r.err, "mha quiz: class/a.txt is for --up-to 10 (its "
                            "first line), not --up-to 12; not graded\n"),
              "%s", r.err);
    run_free(&r);
}

/* A week's sheet whose first line lost its --up-to (a student typed
 * "# mha quiz --seed 17"), graded with no --up-to: it is graded as the
 * quiz its answers fit, chapters 06 .. 10 (21 questions, which --up-to
 * 08 .. 15 all ask), not as the 29 questions of all chapters, against
 * which its answers fall out of line (7 right); a note says so. */
Test(cli, quiz_sheet_without_upto_graded_as_the_quiz_it_fits,
     .init = enter_scratch, .fini = leave_scratch)
{
    char *sol = solution_of_upto(17, "10");
    char *p = strstr(sol, " --up-to 10");
    cr_assert_not_null(p, "%s", sol);
    memmove(p, p + strlen(" --up-to 10"), strlen(p + strlen(" --up-to 10")) + 1);
    p = strstr(sol, "\n5. view\n");
    cr_assert_not_null(p, "%s", sol);
    memcpy(p + 4, "copy", 4); // one wrong answer
    put_text("week2.txt", sol);
    free(sol);
    run r = mha("quiz|--answers|week2.txt");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(!strcmp(r.out + strlen(r.out) - strlen("score: 20/21\n"),
                      "score: 20/21\n"), "%s", r.out);
    cr_assert_str_eq(r.err, "mha quiz: note: 'week2.txt' names no --up-to in "
                            "its first line; its answers fit the quiz of "
                            "--up-to 08 to 15 (one quiz) best (20 right, 7 as "
                            "the quiz of all chapters, 06 .. 21), so it is "
                            "graded as that one; give --up-to NN to grade it "
                            "as another\n");
    run_free(&r);
    // given --up-to, it is graded as that quiz, with no note
    r = mha("quiz|--answers|week2.txt|--up-to|21");
    cr_assert_eq(r.status, 1, "exit %d: %s", r.status, r.err);
    cr_assert(strstr(r.out, "score: 7/29\n"), "%s", r.out);
    cr_assert_eq(strstr(r.err, "note"), NULL, "%s", r.err);
    run_free(&r);
    // in a class's folder, the same
    cr_assert_eq(mkdir("class", 0755), 0);
    cr_assert_eq(rename("week2.txt", "class/a.txt"), 0);
    r = mha("quiz|--grade-dir|class");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "file,seed,score,max\na.txt,17,20,21\n");
    cr_assert(strstr(r.err, "a.txt: note: the sheet names no --up-to in its "
                            "first line; its answers fit the quiz of --up-to "
                            "08 to 15 (one quiz) best"), "%s", r.err);
    run_free(&r);
}

/* The lines of a worksheet's questions: "  step 1: ..." and "  1. its
 * shape?", blanks cut off, from the first step to the end. */
static char *questions_of(const char *sheet)
{
    const char *p = strstr(sheet, "\nmultihead(");
    cr_assert_not_null(p, "%s", sheet);
    char *q = strdup(p + 1);
    cr_assert_not_null(q);
    char *o = q;
    for (const char *s = q; *s; s++) { // drop the blanks
        if (*s == '_' || (*s == ' ' && s[1] == ' ' && s[2] == '_'))
            continue;
        *o++ = *s;
    }
    *o = '\0';
    return q;
}

/* A printable worksheet: a name line and numbered blanks, no answer, in
 * pages of at most 60 lines of at most 78 characters; a sheet filled in
 * and typed up grades N/N; mha trace --quiz --no-answers for the case's
 * sizes asks the same questions in the same order. */
Test(cli, quiz_worksheet_prints_and_grades, .init = enter_scratch,
     .fini = leave_scratch)
{
    run ws = mha("quiz|--seed|26|--worksheet");
    assert_ok(&ws, "quiz --worksheet");
    cr_assert(strstr(ws.out, "\nName: ____"), "%.300s", ws.out);
    cr_assert_null(strstr(ws.out, "that is"), "an answer shows:\n%s", ws.out);
    cr_assert_null(strstr(ws.out, "->"), "%s", ws.out);
    size_t lines = 0, width = 0, pages = 1, k = 0;
    for (const char *p = ws.out; *p; p++) {
        if (*p == '\f') {
            cr_assert_leq(lines, 60, "page %zu has %zu lines", pages, lines);
            pages++;
            lines = 0;
        } else if (*p == '\n') {
            lines++;
            cr_assert_leq(width, 78);
            width = 0;
        } else {
            width++;
        }
    }
    cr_assert_leq(lines, 60);
    char *sol = solution_of(26);
    char ans[QUIZ_MAX_ANSWERS][160], typed[8192] = "# mha quiz --seed 26\n";
    size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
    // every question numbered once, in order, each with its blank
    char want[64];
    for (k = 1; k <= n; k++) {
        snprintf(want, sizeof want, " %zu. ", k);
        const char *at = strstr(ws.out, want);
        cr_assert_not_null(at, "question %zu", k);
        const char *blank = strchr(at, '?') + 1;
        blank += strspn(blank, " \n");
        cr_assert(!strncmp(blank, "____", 4), "question %zu: no blank", k);
        char one[200];
        snprintf(one, sizeof one, "%zu. %.160s\n", k, ans[k - 1]);
        strcat(typed, one);
    }
    snprintf(want, sizeof want, " %zu. ", n + 1);
    cr_assert_null(strstr(ws.out, want));
    put_text("typed.txt", typed);
    run r = mha("quiz|--seed|26|--answers|typed.txt");
    assert_ok(&r, "the typed worksheet");
    char score[32];
    snprintf(score, sizeof score, "score: %zu/%zu\n", n, n);
    cr_assert_str_eq(r.out, score);
    run_free(&r);

    // the trace's worksheet for the same sizes: the same questions
    run tq = mha("trace|--batch|2|--queries|4|--kv|4|--hiddens|12|--heads|3|"
                 "--kv-heads|1|--valid-lens|1,2|--quiz|--no-answers");
    assert_ok(&tq, "trace --quiz --no-answers");
    cr_assert(strstr(tq.out, "\nName: ____"));
    cr_assert_null(strstr(tq.out, "Answers"));
    cr_assert_null(strstr(tq.out, "that is"));
    char *a = questions_of(ws.out), *b = questions_of(tq.out);
    // page headers differ by title; compare without them
    for (char *s = a; (s = strchr(s, '\f'));)
        memmove(s, strchr(s, '\n') + 2, strlen(strchr(s, '\n') + 2) + 1);
    for (char *s = b; (s = strchr(s, '\f'));)
        memmove(s, strchr(s, '\n') + 2, strlen(strchr(s, '\n') + 2) + 1);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
    // with its answers, on a page of their own after the questions
    run ta = mha("trace|--batch|2|--queries|4|--kv|4|--hiddens|12|--heads|3|"
                 "--kv-heads|1|--valid-lens|1,2|--quiz");
    assert_ok(&ta, "trace --quiz");
    const char *key = strstr(ta.out, "\fmha trace --quiz, page ");
    cr_assert_not_null(key);
    cr_assert(strstr(key, "\n\nAnswers\n\n  1. (2, 4, 12), that is (B, Lq, "
                          "d_model)\n"), "%s", key);
    cr_assert(!strncmp(ta.out, tq.out, (size_t)(key - ta.out)));
    run_free(&ta);
    run_free(&tq);
    run_free(&ws);
    free(sol);
}

Test(cli, quiz_refuses_in_one_line, .init = enter_scratch,
     .fini = leave_scratch)
{
    char *sol = solution_of(23);
    put_text("good.txt", sol);
    free(sol);
    put_text("noseed.txt", "(3, 4, 12)\n");
    put_bytes("utf32.txt", "\xff\xfe\0\0(\0\0\0", 8);
    put_bytes("half.txt", "\xff\xfe(\0\x00\xd8", 6); // a lone surrogate
    static const struct {
        const char *args, *message;
    } cases[] = {
        {"quiz|--seed|23|--answers|nofile.txt",
         "mha quiz: cannot read --answers 'nofile.txt': No such file or directory"},
        {"quiz|--seed|23|--answers|.",
         "mha quiz: --answers '.' is a directory, not a regular file"},
        {"quiz|--seed|24|--answers|good.txt",
         "mha quiz: --answers 'good.txt' is for --seed 23 (its first line), "
         "not --seed 24"},
        {"quiz|--answers|noseed.txt",
         "mha quiz: --answers 'noseed.txt' names no seed in its first line "
         "(\"# mha quiz --seed 17\"): give --seed S (and --up-to NN, for a "
         "quiz of fewer chapters)"},
        {"quiz|--seed|23|--answers|utf32.txt",
         "mha quiz: --answers 'utf32.txt' is UTF-32: save it as UTF-8"},
        {"quiz|--seed|23|--answers|half.txt",
         "mha quiz: --answers 'half.txt' is UTF-16LE that does not decode at "
         "byte 5: save it as UTF-8"},
        {"quiz|--solution", "mha quiz: --solution needs --seed S: its answers "
                            "are those of one case"},
        {"quiz|--worksheet", "mha quiz: --worksheet needs --seed S: its "
                             "answers are those of one case"},
        {"quiz|--seed|x1", "mha quiz: --seed 'x1' is not a whole number "
                           "from 0 to 999999999999999999"},
        {"quiz|--seed|23|--solution|--worksheet",
         "mha quiz: --solution and --worksheet exclude each other; give one "
         "of them"},
        {"quiz|--seed|23|--solution|--review",
         "mha quiz: --review goes with grading, not with --solution"},
        {"trace|--no-answers", "mha trace: --no-answers goes with --quiz"},
        {"trace|--quiz|--rope", "mha trace: --quiz asks the module without "
                                "rotary embeddings; leave out --rope"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_run_refused(cases[i].args, cases[i].message);
}

/* --answers reads a regular file and nothing else, and never waits: a
 * FIFO with no writer is refused at once (a plain open would wait for a
 * writer forever), and so are devices and directories. */
Test(cli, quiz_answers_must_be_a_regular_file, .init = enter_scratch,
     .fini = leave_scratch, .timeout = 30)
{
    cr_assert_eq(mkfifo("answers.fifo", 0600), 0, "%s", strerror(errno));
    static const struct {
        const char *args, *message;
    } refused[] = {
        {"quiz|--seed|752|--answers|answers.fifo",
         "mha quiz: --answers 'answers.fifo' is a FIFO, not a regular file"},
        {"quiz|--seed|752|--answers|/dev/null",
         "mha quiz: --answers '/dev/null' is a character device, not a "
         "regular file"},
    };
    char want[400];
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        time_t start = time(NULL);
        run r = mha(refused[i].args);
        cr_assert_leq(time(NULL) - start, 5, "%s waited", refused[i].args);
        cr_assert_eq(r.status, 2, "%s: exit %d", refused[i].args, r.status);
        snprintf(want, sizeof want, "%s\n", refused[i].message);
        cr_assert_str_eq(r.err, want, "%s", refused[i].args);
        cr_assert_str_eq(r.out, "", "%s", refused[i].args);
        run_free(&r);
    }
}

/* Answers piped in come back escaped: an escape sequence does not reach
 * the terminal, and an answer holding a control character is no answer
 * (its first part would otherwise count), so the question is asked
 * again; a typo is asked again; a wrong answer gets its reason; the
 * score last, then with --review the steps and their answers. */
Test(cli, quiz_interactive_through_a_pipe, .init = enter_scratch,
     .fini = leave_scratch)
{
    char *sol = solution_of(23);
    char ans[QUIZ_MAX_ANSWERS][160];
    size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
    char text[8192];
    size_t len = 0;
    static const char bad[] = "(3, 4, 12)\0junk\n\x1b[2J(3, 4, 12)\n";
    memcpy(text, bad, sizeof bad - 1);
    len = sizeof bad - 1;
    for (size_t k = 0; k < n; k++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s%s\n",
                                k == 6 ? "viwe\n" : "",
                                k == 6 ? "view" : ans[k]);
    put_bytes("stdin.txt", text, len);
    stdin_path = "stdin.txt";
    run r = mha("quiz|--seed|23|--review");
    stdin_path = NULL;
    cr_assert_eq(r.status, 1, "exit %d, stderr %s", r.status, r.err);
    static const char *const want[] = {
        "mha quiz --seed 23: queries (3, 4, 12), keys and values (3, 5, 12): "
        "3 heads of 4 features, valid_lens [2, 1, 1]",
        "multihead(h=3) on q (3, 4, 12), k (3, 5, 12), v (3, 5, 12):",
        "  step 1: W_q: x W^T on q (3, 4, 12)",
        "      1. its shape? (3, 4, 12)\\x00junk",
        "         not an answer: \\x00 is a control character",
        "      1. its shape? \\x1b[2J(3, 4, 12)",
        "         not an answer: \\x1b is a control character",
        "      1. its shape? (3, 4, 12)",
        "         right",
        "    step 4: reshape(...) on step 3",
        "        7. view or copy? viwe",
        "           not an answer: give a shape like (2, 4, 100), view or "
        "copy, values like [3, 3, 2, 2], or a number",
        "        7. view or copy? view",
        "           wrong: copy: the strides are (48, 4, 12, 1); B and h merge "
        "in place only when stride(B) = h x stride(h) = 3 x 4 = 12, and it is "
        "48, so the numbers are gathered into a new buffer",
        "  step 8: repeat_interleave(3) on valid_lens (3,)",
        "     13. its values? [2, 2, 2, 1, 1, 1, 1, 1, 1]",
        "score: 20/21",
        "The steps and their answers:",
        "     13. [2, 2, 2, 1, 1, 1, 1, 1, 1]: each example's length once for "
        "each of its 3 heads, in order, as the heads' rows lie after "
        "transpose_qkv (repeat_interleave; tile would give [2, 1, 1, 2, 1, 1, "
        "2, 1, 1])",
    };
    assert_lines_in_order(r.out, want, sizeof want / sizeof want[0]);
    cr_assert_null(strchr(r.out, '\x1b'), "a raw escape came back");
    run_free(&r);
    free(sol);
}

/* A directory as stdin opens, but reads as an error, not as the end of
 * the answers: said at once, before any question; stdin that ends early
 * is said too. */
Test(cli, quiz_stdin_a_directory_is_said, .init = enter_scratch,
     .fini = leave_scratch)
{
    cr_assert_eq(mkdir("answers", 0755), 0);
    stdin_path = "answers";
    snapshot before = snapshot_take();
    run r = mha("quiz|--seed|7");
    stdin_path = NULL;
    assert_refused(&r, "mha quiz: stdin is a directory: give the answers on "
                       "stdin, one a line, or grade a file with --answers "
                       "FILE",
                   &before, "quiz --seed 7 < answers");
    run_free(&r);
    free(before.data);
    put_text("empty.txt", "");
    stdin_path = "empty.txt";
    r = mha("quiz|--seed|23");
    stdin_path = NULL;
    cr_assert_eq(r.status, 2, "exit %d", r.status);
    cr_assert_str_eq(r.err, "mha quiz: stdin ended after 0 of 21 answers\n");
    cr_assert_null(strstr(r.out, "(3, 4, 3, 4)"), "%s", r.out);
    run_free(&r);
}

/* Every digit of a seed counts: 0 is not 4357 (the seed a 32-bit
 * generator takes for 0), and 1 is not 2^32 + 1; one seed always asks
 * one case; 0 and the largest seed are seeds, one more is refused. */
Test(cli, quiz_seeds_draw_different_cases, .init = enter_scratch,
     .fini = leave_scratch)
{
    static const unsigned long long seeds[] = {0, 4357, 1, 4294967297ULL,
                                               999999999999999999ULL};
    char *cases[5];
    for (size_t i = 0; i < 5; i++) {
        char args[64];
        snprintf(args, sizeof args, "quiz|--seed|%llu|--solution", seeds[i]);
        run r = mha(args);
        assert_ok(&r, args);
        cases[i] = strndup(strchr(r.out, ':') + 2, strcspn(r.out, "\n") - (size_t)(strchr(r.out, ':') + 2 - r.out));
        for (size_t j = 0; j < i; j++)
            cr_assert_str_neq(cases[i], cases[j], "--seed %llu and --seed %llu",
                              seeds[i], seeds[j]);
        run_free(&r);
    }
    cr_assert_str_eq(cases[2], "queries (2, 2, 4), keys and values (2, 2, 4): "
                               "2 heads of 2 features, 1 key-value head, "
                               "valid_lens [1, 2]");
    for (size_t i = 0; i < 5; i++)
        free(cases[i]);
    run a = mha("quiz|--seed|00001|--solution"), b = mha("quiz|--seed|1|--solution");
    assert_ok(&a, "quiz --seed 00001");
    cr_assert_str_eq(strchr(a.out, '\n'), strchr(b.out, '\n'), "00001 is the seed 1");
    run_free(&a);
    run_free(&b);
    assert_run_refused("quiz|--seed|1000000000000000000",
                       "mha quiz: --seed '1000000000000000000' is larger than "
                       "999999999999999999, the largest seed");
    assert_run_refused("quiz|--seed|-1", "mha quiz: --seed '-1' is not a whole "
                                         "number from 0 to 999999999999999999");
}

/* Cases differ: over seeds 1..30 the sizes of 1 that chapters 01 and 06
 * teach (B = 1, Lq = 1, h = 1), grouped heads and causal masks all come
 * up, and the view/copy answers take at least 4 patterns, so a
 * neighbour's answers are no use. */
Test(cli, quiz_cases_differ, .init = enter_scratch, .fini = leave_scratch)
{
    int b1 = 0, lq1 = 0, h1 = 0, grouped = 0, causal = 0;
    char patterns[30][64];
    size_t npat = 0;
    for (unsigned seed = 1; seed <= 30; seed++) {
        char *sol = solution_of(seed);
        size_t B, Lq, D, Lk, h;
        cr_assert_eq(sscanf(sol, "# mha quiz --seed %*u: queries (%zu, %zu, "
                                 "%zu), keys and values (%*u, %zu, %*u): %zu head",
                            &B, &Lq, &D, &Lk, &h), 5, "%s", sol);
        cr_assert(B >= 1 && B <= 3 && Lq >= 1 && Lq <= 4 && h >= 1 && h <= 4 &&
                  Lk >= 2 && Lk <= 6 && D % h == 0 && D / h >= 2 && D / h <= 5,
                  "seed %u: %.120s", seed, sol);
        b1 += B == 1;
        lq1 += Lq == 1;
        h1 += h == 1;
        grouped += strstr(sol, "key-value head") != NULL;
        causal += strstr(sol, "causal") != NULL;
        char ans[QUIZ_MAX_ANSWERS][160], pat[64] = "";
        size_t n = answers_of(sol, ans, QUIZ_MAX_ANSWERS);
        for (size_t k = 0; k < n; k++)
            if (!strcmp(ans[k], "view") || !strcmp(ans[k], "copy"))
                strcat(pat, ans[k][0] == 'v' ? "v" : "c");
        size_t j = 0;
        while (j < npat && strcmp(patterns[j], pat))
            j++;
        if (j == npat)
            snprintf(patterns[npat++], sizeof patterns[0], "%s", pat);
        free(sol);
    }
    cr_assert(b1 && lq1 && h1 && grouped && causal,
              "B=1 %d, Lq=1 %d, h=1 %d, grouped %d, causal %d", b1, lq1, h1,
              grouped, causal);
    cr_assert_geq(npat, 4, "%zu view/copy patterns", npat);
}

/* --- grouped-query and causal attention -------------------------------- */

/* h = 4 heads of p = 2 over D = 8, G = 2 key-value heads: W_k (4, 7),
 * W_v (4, 3), b_k and b_v (4,); the rest as write_inputs.  Also keys
 * and values of 3 positions, fewer than the 4 queries. */
static void write_gqa_inputs(void)
{
    write_inputs();
    gsl_rng *r = mha_rng_new(32);
    put_normal("wk2.npy", SHAPE(4, 7), r, 0.5);
    put_normal("wv2.npy", SHAPE(4, 3), r, 0.5);
    put_normal("bk2.npy", SHAPE(4), r, 0.5);
    put_normal("bv2.npy", SHAPE(4), r, 0.5);
    put_normal("k3.npy", SHAPE(2, 3, 7), r, 1);
    put_normal("v3.npy", SHAPE(2, 3, 3), r, 1);
    gsl_rng_free(r);
}

#define GQA_INPUTS                                                            \
    "--queries|q.npy|--keys|k.npy|--values|v.npy|--wq|wq.npy|--wk|wk2.npy|"   \
    "--wv|wv2.npy|--wo|wo.npy|--bq|bq.npy|--bk|bk2.npy|--bv|bv2.npy|--bo|bo.npy"

/* mha forward --kv-heads 2 --causal writes what the module computes in
 * this process (its copy path; mha runs the fast path), and the weights
 * are causal: query i of 4 sees keys 0 .. i + 2 of 6. */
Test(cli, forward_grouped_and_causal, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_gqa_inputs();
    run r = mha("forward|--heads|4|--kv-heads|2|--causal|" GQA_INPUTS
                "|--valid-lens|5,6" OUTS);
    assert_ok(&r, "forward --kv-heads 2 --causal");
    run_free(&r);
    tensor *q = load("q.npy"), *k = load("k.npy"), *v = load("v.npy");
    multihead m;
    multihead_config cfg = {.query_size = 5, .key_size = 7, .value_size = 3,
                            .num_hiddens = 8, .num_heads = 4, .out_size = 6,
                            .bias = 1, .kv_heads = 2, .causal = 1};
    OK(multihead_init(&m, &cfg));
    const char *files[8] = {"wq.npy", "wk2.npy", "wv2.npy", "wo.npy",
                            "bq.npy", "bk2.npy", "bv2.npy", "bo.npy"};
    tensor *dst[8] = {m.W_q.weight, m.W_k.weight, m.W_v.weight, m.W_o.weight,
                      m.W_q.bias, m.W_k.bias, m.W_v.bias, m.W_o.bias};
    for (int i = 0; i < 8; i++) {
        tensor *t = load(files[i]);
        OK(tensor_copy_into(dst[i], t));
        tensor_free(t);
    }
    tensor *vl, *want, *want_a, *got = load("out.npy"), *a = load("a.npy");
    OK(tensor_from_array(SHAPE(2), (double[]){5, 6}, &vl));
    OK(multihead_forward(&m, q, k, v, vl, &want, &want_a));
    cr_assert_leq(rel_error(got, want), 1e-13);
    cr_assert_leq(rel_error(a, want_a), 1e-13);
    // row i of example 0 sees min(5, i + 3) keys, of example 1 i + 3
    for (size_t b = 0; b < 2; b++)
        for (size_t hd = 0; hd < 4; hd++)
            for (size_t i = 0; i < 4; i++)
                for (size_t j = 0; j < 6; j++) {
                    size_t see = i + 3 < (b ? 6 : 5) ? i + 3 : (b ? 6 : 5);
                    double w = *TENSOR_AT(a, b, hd, i, j);
                    cr_assert(j < see ? w > 0 : w == 0, "a[%zu, %zu, %zu, %zu] = %g",
                              b, hd, i, j, w);
                }
    multihead_free(&m);
    FREE_ALL(q, k, v, vl, want, want_a, got, a);
}

Test(cli, trace_of_grouped_heads, .init = enter_scratch, .fini = leave_scratch)
{
    run r = mha("trace|--kv-heads|2|--heads|4|--hiddens|8|--causal");
    assert_ok(&r, "trace --kv-heads 2");
    static const char *const want[] = {
        "queries (2, 4, 8), keys and values (2, 6, 8): 4 heads of 2 features, 2 key-value heads, causal, no valid_lens",
        "multihead(h=4, G=2, causal)       q (2, 4, 8), k (2, 6, 8), v (2, 6, 8)",
        "  W_k: x W^T             new   (2, 6, 8) -> (2, 6, 4)              (B, Lk, G*d_model/h)",
        "  # K has G = 2 key-value heads, not h = 4: transpose_qkv splits it with h=2",
        "  transpose_qkv(h=2)           (2, 6, 4)                           (B, Lk, G*d_model/h)",
        "    reshape(2, 6, 2, -1) view  (2, 6, 4) -> (2, 6, 2, 2)           (B, Lk, G, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (2, 6, 2, 2) -> (2, 2, 6, 2)        (B, G, Lk, d_model/h)",
        "    reshape(-1, 6, 2)    copy  (2, 2, 6, 2) -> (4, 6, 2)           (B*G, Lk, d_model/h)",
        "  per-row lens(causal)   new   -> (2, 4)                           (B, Lq)",
        "  repeat_interleave(4)         (2, 4)                              (B, Lq)",
        "    view(2, 1, 4)        view  (2, 4) -> (2, 1, 4)                 (B, 1, Lq)",
        "    expand(2, 4, 4)      view  (2, 1, 4) -> (2, 4, 4)              (B, h, Lq)",
        "    reshape(8, 4)        copy  (2, 4, 4) -> (8, 4)                 (B*h, Lq)",
        "  grouped heads(h=4, G=2)       (8, 4, 2), (4, 6, 2), (4, 6, 2)",
        "    view(4, 1, 6, 2)     view  (4, 6, 2) -> (4, 1, 6, 2)           (B*G, 1, Lk, d_model/h)",
        "    expand(-1, 2, -1, -1) view  (4, 1, 6, 2) -> (4, 2, 6, 2)        (B*G, h/G, Lk, d_model/h)",
        "    reshape(4, 8, 2)     view  (8, 4, 2) -> (4, 8, 2)              (B*G, h/G*Lq, d_model/h)",
        "    reshape(4, 8)        view  (8, 4) -> (4, 8)                    (B*G, h/G*Lq)",
        "      Q K^T              new   (4, 8, 2) @ (4, 6, 2)^T -> (4, 8, 6)  (B*G, h/G*Lq, Lk)",
        "    view(8, 4, 2)        view  (4, 8, 2) -> (8, 4, 2)              (B*h, Lq, d_model/h)",
        "output (2, 4, 8), attention weights (2, 4, 4, 6)",
    };
    assert_lines_in_order(r.out, want, sizeof want / sizeof want[0]);
    cr_assert_null(strstr(r.out, "(8, 6, 2)"), "no key or value head is "
                                               "copied per query head");
    run_free(&r);
    // with G = h there is nothing to say: no note
    r = mha("trace|--kv-heads|4|--heads|4|--hiddens|8");
    assert_ok(&r, "trace --kv-heads 4");
    cr_assert_null(strstr(r.out, "key-value heads, not h"), "%s", r.out);
    run_free(&r);
}

/* A size of 1 says nothing of which axis it is: with h = 1 the join
 * still takes B*h apart into B and h, and with G = Lk = 1 the split of
 * the keys still makes B*G heads of Lk positions, in the text and in the
 * JSON records alike. */
Test(cli, trace_names_at_size_1, .init = enter_scratch, .fini = leave_scratch)
{
    run r = mha("trace|--heads|1|--hiddens|4");
    assert_ok(&r, "trace --heads 1");
    static const char *const one_head[] = {
        "  transpose_output(h=1)        (2, 4, 4)                           (B*h, Lq, d_model/h)",
        "    reshape(-1, 1, 4, 4) view  (2, 4, 4) -> (2, 1, 4, 4)           (B, h, Lq, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (2, 1, 4, 4) -> (2, 4, 1, 4)        (B, Lq, h, d_model/h)",
        "    reshape(2, 4, -1)    view  (2, 4, 1, 4) -> (2, 4, 4)           (B, Lq, d_model)",
        "  W_o: x W^T             new   (2, 4, 4) -> (2, 4, 4)              (B, Lq, d_model)",
    };
    assert_lines_in_order(r.out, one_head, 5);
    run_free(&r);
    r = mha("trace|--heads|1|--hiddens|4|--json");
    assert_ok(&r, "trace --heads 1 --json");
    cr_assert_not_null(strstr(r.out, "\"output\": {\"shape\": [2, 1, 4, 4], "
                                     "\"names\": [\"B\", \"h\", \"Lq\", \"d_model/h\"]"),
                       "%s", r.out);
    cr_assert_not_null(strstr(r.out, "\"output\": {\"shape\": [2, 4, 4], "
                                     "\"names\": [\"B\", \"Lq\", \"d_model\"]"),
                       "%s", r.out);
    cr_assert_null(strstr(r.out, "\"B*h\", \"\""), "%s", r.out);
    run_free(&r);

    r = mha("trace|--heads|4|--hiddens|8|--kv-heads|1|--kv|1");
    assert_ok(&r, "trace --kv-heads 1 --kv 1");
    static const char *const one_kv_head[] = {
        "  transpose_qkv(h=1)           (2, 1, 2)                           (B, Lk, G*d_model/h)",
        "    reshape(2, 1, 1, -1) view  (2, 1, 2) -> (2, 1, 1, 2)           (B, Lk, G, d_model/h)",
        "    permute(0, 2, 1, 3)  view  (2, 1, 1, 2) -> (2, 1, 1, 2)        (B, G, Lk, d_model/h)",
        "    reshape(-1, 1, 2)    view  (2, 1, 1, 2) -> (2, 1, 2)           (B*G, Lk, d_model/h)",
        "    view(2, 1, 1, 2)     view  (2, 1, 2) -> (2, 1, 1, 2)           (B*G, 1, Lk, d_model/h)",
        "    expand(-1, 4, -1, -1) view  (2, 1, 1, 2) -> (2, 4, 1, 2)        (B*G, h/G, Lk, d_model/h)",
        "      Q K^T              new   (2, 16, 2) @ (2, 1, 2)^T -> (2, 16, 1)  (B*G, h/G*Lq, Lk)",
    };
    assert_lines_in_order(r.out, one_kv_head, 7);
    cr_assert_null(strstr(r.out, "G*Lk"), "%s", r.out);
    run_free(&r);
    r = mha("trace|--heads|4|--hiddens|8|--kv-heads|1|--kv|1|--json");
    assert_ok(&r, "trace --kv-heads 1 --kv 1 --json");
    cr_assert_not_null(strstr(r.out, "\"output\": {\"shape\": [2, 1, 2], "
                                     "\"names\": [\"B*G\", \"Lk\", \"d_model/h\"]"),
                       "%s", r.out);
    cr_assert_null(strstr(r.out, "G*Lk"), "%s", r.out);
    run_free(&r);
}

Test(cli, grouped_and_causal_refusals, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_gqa_inputs();
    assert_run_refused("forward|--heads|4|--kv-heads|0|" GQA_INPUTS OUTS,
                       "mha forward: --kv-heads '0' is zero (expected 1 to "
                       "1000000)");
    assert_run_refused("forward|--heads|4|--kv-heads|3|" GQA_INPUTS OUTS,
                       "mha forward: --kv-heads 3 does not divide --heads 4 "
                       "(each key-value head serves --heads / --kv-heads "
                       "query heads)");
    assert_run_refused("forward|--heads|4|--kv-heads|2|" INPUTS OUTS,
                       "mha forward: --wk wk.npy has shape (8, 7) but with "
                       "--heads 4 and --kv-heads 2 it must be (4, 7): G*D/h "
                       "rows, D = 8 (--wq wq.npy has shape (8, 5))");
    assert_run_refused("forward|--heads|4|--kv-heads|2|--queries|q.npy|--keys|"
                       "k.npy|--values|v.npy|--wq|wq.npy|--wk|wk2.npy|--wv|"
                       "wv.npy|--wo|wo.npy" OUTS,
                       "mha forward: --wv wv.npy has shape (8, 3) but with "
                       "--heads 4 and --kv-heads 2 it must be (4, 3): G*D/h "
                       "rows, D = 8 (--wq wq.npy has shape (8, 5))");
    assert_run_refused("forward|--heads|4|--kv-heads|2|--queries|q.npy|--keys|"
                       "k.npy|--values|v.npy|--wq|wq.npy|--wk|wk2.npy|--wv|"
                       "wv2.npy|--wo|wo.npy|--bk|bk.npy" OUTS,
                       "mha forward: --bk bk.npy has shape (8,) but with "
                       "--heads 4 and --kv-heads 2 it must be (4,): G*D/h, "
                       "D = 8 (--wq wq.npy has shape (8, 5))");
    assert_run_refused("forward|--heads|4|" GQA_INPUTS OUTS,
                       "mha forward: --wk wk2.npy has shape (4, 7) but D = 8 "
                       "(--wq wq.npy has shape (8, 5)); for grouped-query "
                       "attention with G*D/h = 4 rows, give --kv-heads 2");
    // 4 queries, 3 keys: query 0 would see none
    assert_run_refused("forward|--heads|2|--causal|--queries|q.npy|--keys|"
                       "k3.npy|--values|v3.npy|--wq|wq.npy|--wk|wk.npy|--wv|"
                       "wv.npy|--wo|wo.npy" OUTS,
                       "mha forward: multihead: causal: query 0 of example 0 "
                       "sees no key (Lq 4, Lk 3: query i sees key j only when "
                       "j <= i + Lk - Lq)");
    assert_run_refused("heatmap|--heads|4|--kv-heads|2|--causal|" GQA_INPUTS
                       "|--valid-lens|0,6|--terminal",
                       "mha heatmap: multihead: causal: query 0 of example 0 "
                       "sees no key (valid_len 0, Lq 4, Lk 6: query i sees key "
                       "j only when j <= i + Lk - Lq)");
    assert_run_refused("trace|--queries|7|--kv|3|--causal",
                       "mha trace: --causal with --queries 7 > --kv 3: query "
                       "0 would see no key (query i sees key j only when "
                       "j <= i + Lk - Lq)");
    assert_run_refused("trace|--causal|--valid-lens|3,0",
                       "mha trace: --causal with --valid-lens '3,0': entry 2 "
                       "is 0, so its queries would see no key");
    assert_run_refused("trace|--heads|4|--hiddens|8|--kv-heads|3",
                       "mha trace: --kv-heads 3 does not divide --heads 4 "
                       "(each key-value head serves --heads / --kv-heads "
                       "query heads)");
    // and the grouped heatmap draws
    run r = mha("heatmap|--heads|4|--kv-heads|1|--causal|" GQA_INPUTS
                "|--wk|wk1.npy|--terminal");
    cr_assert_eq(r.status, 2); // --wk given twice
    run_free(&r);
    r = mha("heatmap|--heads|4|--kv-heads|2|--causal|" GQA_INPUTS "|--terminal");
    assert_ok(&r, "heatmap --kv-heads 2 --causal --terminal");
    cr_assert_not_null(strstr(r.out, "example 1, head 3"), "%s", r.out);
    run_free(&r);
//> 18
    // a key appended for every query (add_zero_attn, add_bias_kv): no row
    // of the causal rule is left empty, as in PyTorch
    r = mha("trace|--queries|7|--kv|3|--causal|--add-zero-attn");
    assert_ok(&r, "trace --queries 7 --kv 3 --causal --add-zero-attn");
    run_free(&r);
    r = mha("trace|--causal|--valid-lens|3,0|--add-bias-kv");
    assert_ok(&r, "trace --causal --valid-lens 3,0 --add-bias-kv");
    run_free(&r);
//<
}

/* The memory estimate counts K and V at G*D/h features: by hand, the
 * inputs 160 doubles, the weights and biases 150 twice (file and
 * module), Q and the joined heads 2*2*4*8, K and V 2*2*6*4 (not
 * 2*2*6*8), out 2*4*6: 5856 bytes. */
Test(cli, memory_estimate_of_grouped_heads, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_gqa_inputs();
    const char *args = "forward|--heads|4|--kv-heads|2|" GQA_INPUTS
                       "|--out|out.npy";
    cr_assert_eq(setenv("MHA_MEMORY_LIMIT", "5855", 1), 0);
    assert_run_refused(args, "mha forward: the run needs about 5.7 KiB of "
                             "memory (5856 bytes) but MHA_MEMORY_LIMIT is "
                             "5.7 KiB (5855 bytes); use mha trace for shapes "
                             "alone");
    cr_assert_eq(setenv("MHA_MEMORY_LIMIT", "5856", 1), 0);
    run r = mha(args);
    unsetenv("MHA_MEMORY_LIMIT");
    assert_ok(&r, "forward within the limit");
    run_free(&r);
}

/* --- a masked key never gets weight ------------------------------------ */

/* Three queries (1000, 0) against three keys (-3000, 0), values (j + 1, 0),
 * identity weights, one head: every score is -3e6 / sqrt(2), far below
 * d2l's -1e6 fill, under which query 0 gave [0, .5, .5] and OUT[:, :, 0]
 * [2.5, 3.0, 2.0].  Masked keys get weight exactly 0. */
static void write_extreme_inputs(void)
{
    put_values("xq.npy", SHAPE(1, 3, 2), (double[]){1000, 0, 1000, 0, 1000, 0});
    put_values("xk.npy", SHAPE(1, 3, 2), (double[]){-3000, 0, -3000, 0, -3000, 0});
    put_values("xv.npy", SHAPE(1, 3, 2), (double[]){1, 0, 2, 0, 3, 0});
    put_values("eye.npy", SHAPE(2, 2), (double[]){1, 0, 0, 1});
}

#define EXTREME_INPUTS                                                        \
    "--queries|xq.npy|--keys|xk.npy|--values|xv.npy|--wq|eye.npy|--wk|"       \
    "eye.npy|--wv|eye.npy|--wo|eye.npy"

static void assert_weights_and_out(const double *want_a, const double *want_out,
                                   const char *what)
{
    tensor *a = load("a.npy"), *out = load("out.npy");
    for (size_t t = 0; t < 9; t++)
        cr_assert_eq(a->data[t], want_a[t], "%s: A[%zu] = %.17g, want %.17g",
                     what, t, a->data[t], want_a[t]);
    for (size_t i = 0; i < 3; i++) {
        cr_assert_eq(*TENSOR_AT(out, 0, i, 0), want_out[i], "%s: OUT[0, %zu, 0] "
                     "= %.17g", what, i, *TENSOR_AT(out, 0, i, 0));
        cr_assert_eq(*TENSOR_AT(out, 0, i, 1), 0.0);
    }
    FREE_ALL(a, out);
}

Test(cli, causal_and_valid_lens_never_leak, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_extreme_inputs();
    run r = mha("forward|--heads|1|--causal|" EXTREME_INPUTS
                "|--out|out.npy|--attention-out|a.npy");
    assert_ok(&r, "forward --causal at scores of -2.1e6");
    run_free(&r);
    const double third = 1.0 / 3;
    assert_weights_and_out((double[]){1, 0, 0, .5, .5, 0, third, third, third},
                           (double[]){1.0, 1.5, 2.0}, "--causal");

    r = mha("forward|--heads|1|--valid-lens|1|" EXTREME_INPUTS
            "|--out|out.npy|--attention-out|a.npy");
    assert_ok(&r, "forward --valid-lens 1 at scores of -2.1e6");
    run_free(&r);
    assert_weights_and_out((double[]){1, 0, 0, 1, 0, 0, 1, 0, 0},
                           (double[]){1, 1, 1}, "--valid-lens 1");

    // RoPE turns q and k, so the scores change; the mask does not
    r = mha("forward|--heads|1|--causal|--rope|" EXTREME_INPUTS
            "|--out|out.npy|--attention-out|a.npy");
    assert_ok(&r, "forward --causal --rope");
    run_free(&r);
    tensor *a = load("a.npy");
    for (size_t i = 0; i < 3; i++)
        for (size_t j = i + 1; j < 3; j++)
            cr_assert_eq(*TENSOR_AT(a, 0, 0, i, j), 0.0, "--rope: A[%zu, %zu]", i, j);
    cr_assert_eq(*TENSOR_AT(a, 0, 0, 0, 0), 1.0);
    tensor_free(a);

    // the heatmap draws the same exact lower triangle
    r = mha("heatmap|--heads|1|--causal|" EXTREME_INPUTS "|--terminal");
    assert_ok(&r, "heatmap --causal --terminal");
    tensor *w;
    OK(tensor_from_array(SHAPE(1, 1, 3, 3),
                         (double[]){1, 0, 0, .5, .5, 0, third, third, third}, &w));
    const char *titles[] = {"example 0, head 0"};
    heatmap_options opt = {.titles = titles, .ntitles = 1};
    capture c;
    capture_start(&c);
    OK(heatmap_terminal(c.f, w, &opt));
    cr_assert_str_eq(r.out, capture_end(&c));
    capture_free(&c);
    tensor_free(w);
    run_free(&r);
}

/* --- threads and memory limits ---------------------------------------- */

/* A thread count far beyond the machine runs on its cores, and far
 * beyond the work on as many threads as there are blocks of it (the
 * standard inputs make 2 examples x 2 heads x 1 block): libgomp used to
 * crash starting 100000 threads and give up on 40000.  The numbers are
 * those of one thread, byte for byte. */
Test(cli, a_huge_thread_count_is_capped_with_the_same_result,
     .init = enter_scratch, .fini = leave_scratch)
{
    write_inputs();
    const char *counts[] = {"1", "100000", "40000", "3"};
    char *want_out = NULL, *want_a = NULL;
    size_t want_out_len = 0, want_a_len = 0;
    for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
        cr_assert_eq(setenv("OMP_NUM_THREADS", counts[i], 1), 0);
        run r = mha(FORWARD OUTS);
        unsetenv("OMP_NUM_THREADS");
        assert_ok(&r, counts[i]);
        run_free(&r);
        size_t out_len, a_len;
        char *out = file_bytes("out.npy", &out_len);
        char *a = file_bytes("a.npy", &a_len);
        if (i == 0) {
            want_out = out, want_out_len = out_len;
            want_a = a, want_a_len = a_len;
            continue;
        }
        cr_assert(out_len == want_out_len &&
                      memcmp(out, want_out, out_len) == 0,
                  "OMP_NUM_THREADS=%s: out.npy differs from one thread's",
                  counts[i]);
        cr_assert(a_len == want_a_len && memcmp(a, want_a, a_len) == 0,
                  "OMP_NUM_THREADS=%s: a.npy differs from one thread's",
                  counts[i]);
        free(out);
        free(a);
    }
    free(want_out);
    free(want_a);
}

/* Under a memory limit every command runs or says so in one line with
 * exit status 2, within seconds.  OpenBLAS takes a 128 MiB buffer per
 * thread and, when the limit leaves no room, used to retry for ever:
 * `mha --help` spun at 100% CPU under ulimit -v 150000, forward and
 * heatmap up to about 350000.  Help, trace and quiz multiply no matrix
 * and always run; forward and heatmap need OpenBLAS's buffer, 173 MiB in
 * all with the program, and are refused below that, by name. */
Test(cli, every_command_runs_or_says_so_under_a_memory_limit,
     .init = enter_scratch, .fini = leave_scratch)
{
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("AddressSanitizer cannot run under a memory limit");
#endif
    skip_under_valgrind();
    write_inputs();
    static const char *const commands[] = {
        "--help", "trace", "quiz|--seed|7|--solution", FORWARD OUTS,
        "heatmap|--heads|2|" INPUTS "|--terminal"};
    static const rlim_t limits[] = {60000,  100000, 150000,
                                    200000, 250000, 300000};
    run_timeout = 10;
    for (size_t i = 0; i < sizeof limits / sizeof *limits; i++) {
        for (size_t c = 0; c < sizeof commands / sizeof *commands; c++) {
            run_limit_kib = limits[i];
            run r = mha(commands[c]);
            run_limit_kib = 0;
            if (c < 3 || r.status == 0) {
                assert_ok(&r, commands[c]);
                if (c != 3) // forward writes files, the others stdout
                    cr_assert_neq(r.out[0], '\0', "%s", commands[c]);
            } else {
                cr_assert_eq(r.status, 2, "ulimit -v %llu, %s: exit %d",
                             (unsigned long long)limits[i], commands[c],
                             r.status);
                cr_assert_eq(count_lines(r.err), 1, "%s", r.err);
                cr_assert_str_eq(r.out, "");
            }
            if (limits[i] <= 150000 && c >= 3) // no room for the buffer
                cr_assert(strstr(r.err, ": threads_blas_reserve: the memory "
                                        "limit (ulimit -v ") != NULL,
                          "ulimit -v %llu, %s: %s",
                          (unsigned long long)limits[i], commands[c], r.err);
            if (limits[i] >= 200000) // room for it and these small inputs
                cr_assert_eq(r.status, 0, "ulimit -v %llu, %s: %s",
                             (unsigned long long)limits[i], commands[c],
                             r.err);
            run_free(&r);
        }
    }
    run_timeout = 0;
}

/* Where the limit leaves room for the buffer, the numbers are those of
 * an unlimited run, byte for byte (fewer threads, same result). */
Test(cli, forward_under_a_memory_limit_writes_the_same_numbers,
     .init = enter_scratch, .fini = leave_scratch)
{
#ifdef __SANITIZE_ADDRESS__
    cr_skip_test("AddressSanitizer cannot run under a memory limit");
#endif
    skip_under_valgrind();
    write_inputs();
    run r = mha(FORWARD OUTS);
    assert_ok(&r, "forward");
    run_free(&r);
    size_t want_len, got_len;
    char *want = file_bytes("a.npy", &want_len);
    run_timeout = 10;
    run_limit_kib = 250000;
    r = mha(FORWARD OUTS);
    run_limit_kib = 0;
    run_timeout = 0;
    assert_ok(&r, "forward under ulimit -v 250000");
    run_free(&r);
    char *got = file_bytes("a.npy", &got_len);
    cr_assert(got_len == want_len && memcmp(got, want, got_len) == 0,
              "a.npy differs under the limit");
    free(got);
    free(want);
}
/* An output that is a symbolic link is refused: the finished file is
 * renamed onto its path, which would replace the link itself (run as
 * root, --out /dev/stdout replaced /dev/stdout). */
Test(cli, an_output_that_is_a_symbolic_link_is_refused, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    cr_assert_eq(symlink("/proc/self/fd/1", "so"), 0);
    cr_assert_eq(symlink("kept.npy", "dangling"), 0);
    assert_run_refused(FORWARD "|--out|so",
                       "mha forward: --out 'so' is a symbolic link: mha would "
                       "replace the link, not write through it; give the file "
                       "it names");
    assert_run_refused(FORWARD "|--out|out.npy|--attention-out|dangling",
                       "mha forward: --attention-out 'dangling' is a symbolic "
                       "link: mha would replace the link, not write through "
                       "it; give the file it names");
}

/* A write-protected output is refused: the finished file is renamed onto
 * its path, which would replace it whatever its permissions say, so mha
 * asks first, as rm does (as root too).  Made writable, it is replaced. */
Test(cli, a_write_protected_output_is_refused, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    FILE *f = fopen("ro.npy", "w");
    cr_assert_not_null(f);
    fputs("kept\n", f);
    fclose(f);
    cr_assert_eq(chmod("ro.npy", 0444), 0);
    assert_run_refused(FORWARD "|--out|ro.npy",
                       "mha forward: --out 'ro.npy' is write-protected: mha "
                       "would replace it; make it writable, or remove it, "
                       "first");
    assert_run_refused(FORWARD "|--out|out.npy|--attention-out|ro.npy",
                       "mha forward: --attention-out 'ro.npy' is "
                       "write-protected: mha would replace it; make it "
                       "writable, or remove it, first");
    cr_assert_eq(chmod("ro.npy", 0644), 0);
    run r = mha(FORWARD "|--out|ro.npy");
    assert_ok(&r, "forward --out ro.npy, writable again");
    run_free(&r);
}

/* Started with stdout closed, mha must not print into the first file it
 * opens (the output's temporary): the trace fails to print, the run is
 * refused with exit 2, and no output appears. */
Test(cli, a_closed_stdout_is_not_an_output, .init = enter_scratch,
     .fini = leave_scratch)
{
    write_inputs();
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "'%s' forward --heads 2 --queries q.npy --keys k.npy --values "
             "v.npy --wq wq.npy --wk wk.npy --wv wv.npy --wo wo.npy --out "
             "out.npy --trace >&- 2>err.txt",
             mha_path);
    int ws = system(cmd);
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 2, "exit %d", WEXITSTATUS(ws));
    struct stat st;
    cr_assert_neq(stat("out.npy", &st), 0, "out.npy appeared");
    FILE *f = fopen("err.txt", "r");
    char line[256] = "";
    cr_assert_not_null(fgets(line, sizeof line, f));
    fclose(f);
    cr_assert_str_eq(line, "mha forward: cannot write to stdout: Bad file "
                           "descriptor\n");
}
/* --- big inputs, mapped rather than read (npy_read_mapped) ------------ */

/* One run of mha forward on inputs big enough to be mapped (64 KiB of
 * numbers or more: Q at B = 1, and every weight at D = 128), against
 * the fast path in this process on the same numbers read with npy_read:
 * the same output to the bit, and every input file as it was. */
typedef struct big_case {
    size_t B, L, Lk, kv_heads; /* Lk > 0: keys and values of their own */
    int causal, bias;
    const char *valid_lens; /* "--valid-lens" list, or NULL */
    int lens_2d;            /* 1: a (B, Lq) --valid-lens-file instead */
} big_case;

static void assert_big_case(const big_case *c)
{
    const size_t D = 128, h = 4, p = D / h, G = c->kv_heads ? c->kv_heads : h;
    gsl_rng *r = mha_rng_new(7);
    cr_assert_not_null(r);
    put_normal("q.npy", SHAPE(c->B, c->L, D), r, 1);
    if (c->Lk)
        put_normal("kv.npy", SHAPE(c->B, c->Lk, D), r, 1);
    put_normal("wq.npy", SHAPE(D, D), r, 0.1);
    put_normal("wk.npy", SHAPE(G * p, D), r, 0.1);
    put_normal("wv.npy", SHAPE(G * p, D), r, 0.1);
    put_normal("wo.npy", SHAPE(D, D), r, 0.1);
    put_normal("bq.npy", SHAPE(D), r, 0.1);
    put_normal("bk.npy", SHAPE(G * p), r, 0.1);
    put_normal("bv.npy", SHAPE(G * p), r, 0.1);
    put_normal("bo.npy", SHAPE(D), r, 0.1);
    gsl_rng_free(r);
    size_t Lk = c->Lk ? c->Lk : c->L;
    int64_t *lens2 = NULL; // (B, Lq): row i of example b sees (7 b + i) % Lk + 1
    if (c->lens_2d) {
        lens2 = malloc(c->B * c->L * sizeof *lens2);
        cr_assert_not_null(lens2);
        for (size_t i = 0; i < c->B * c->L; i++)
            lens2[i] = (int64_t)((7 * (i / c->L) + i % c->L) % Lk + 1);
        put_int64("vl.npy", SHAPE(c->B, c->L), lens2);
    }
    char args[1024], g[32];
    snprintf(g, sizeof g, "%zu", G);
    snprintf(args, sizeof args,
             "forward|--heads|4|--kv-heads|%s|--queries|q.npy%s|--wq|wq.npy|"
             "--wk|wk.npy|--wv|wv.npy|--wo|wo.npy%s%s%s%s%s|--out|out.npy",
             g, c->Lk ? "|--keys|kv.npy|--values|kv.npy" : "",
             c->bias ? "|--bq|bq.npy|--bk|bk.npy|--bv|bv.npy|--bo|bo.npy" : "",
             c->causal ? "|--causal" : "", c->valid_lens ? "|--valid-lens|" : "",
             c->valid_lens ? c->valid_lens : "",
             c->lens_2d ? "|--valid-lens-file|vl.npy" : "");
    unlink("out.npy"); // the last case's
    snapshot before = snapshot_take();
    run res = mha(args);
    assert_ok(&res, args);
    run_free(&res);
    cr_assert_eq(unlink("out.npy"), 0); // the rest as it was
    assert_unchanged(&before, args);
    free(before.data);
    res = mha(args);
    run_free(&res);

    tensor *q = load("q.npy"), *kv = c->Lk ? load("kv.npy") : q, *vl = NULL;
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h, .out_size = D,
                            .bias = c->bias, .kv_heads = G,
                            .causal = c->causal};
    OK(multihead_init(&m, &cfg));
    static const char *const wf[4] = {"wq.npy", "wk.npy", "wv.npy", "wo.npy"};
    static const char *const bf[4] = {"bq.npy", "bk.npy", "bv.npy", "bo.npy"};
    linear *layer[4] = {&m.W_q, &m.W_k, &m.W_v, &m.W_o};
    for (int i = 0; i < 4; i++) {
        tensor *w = load(wf[i]), *b = c->bias ? load(bf[i]) : NULL;
        OK(tensor_copy_into(layer[i]->weight, w));
        if (b)
            OK(tensor_copy_into(layer[i]->bias, b));
        FREE_ALL(w, b);
    }
    if (c->valid_lens) {
        double lens[16];
        size_t n = 0;
        for (const char *s = c->valid_lens; *s; s += strcspn(s, ","),
                        s += *s == ',')
            lens[n++] = strtod(s, NULL);
        OK(tensor_from_array(SHAPE(n), lens, &vl));
    }
    if (lens2) {
        OK(tensor_alloc(SHAPE(c->B, c->L), &vl));
        for (size_t i = 0; i < c->B * c->L; i++)
            vl->data[i] = (double)lens2[i];
        free(lens2);
    }
    tensor *want = NULL, *got = load("out.npy");
    OK(multihead_forward_fast(&m, q, kv, kv, vl, NULL, &want, NULL));
    cr_assert(tensor_same_shape(got, want));
    cr_assert(memcmp(got->data, want->data,
                     tensor_numel(want) * sizeof(double)) == 0,
              "mha %s: the output differs from the fast path's", args);
    multihead_fast_release();
    multihead_free(&m);
    if (kv != q)
        tensor_free(kv);
    FREE_ALL(q, vl, want, got);
}

Test(cli, big_mapped_inputs_give_the_fast_paths_numbers_to_the_bit,
     .init = enter_scratch, .fini = leave_scratch)
{
    const big_case cases[] = {
        {.B = 1, .L = 64},                           // Q 64 KiB: mapped
        {.B = 3, .L = 70, .bias = 1},                // B not a power of 2
        {.B = 2, .L = 64, .causal = 1, .kv_heads = 2},
        {.B = 3, .L = 64, .Lk = 90, .valid_lens = "90,1,45", .bias = 1},
        {.B = 2, .L = 40, .Lk = 100, .causal = 1, .kv_heads = 1},
        // Q of 4.5 MiB and more: in huge pages once projected
        {.B = 9, .L = 512, .causal = 1, .bias = 1},
        {.B = 10, .L = 512, .Lk = 300, .kv_heads = 2,
         .valid_lens = "300,1,2,3,150,299,7,8,9,10"},
        {.B = 9, .L = 512, .Lk = 200, .lens_2d = 1, .bias = 1},
    };
    // under valgrind (make memcheck) one case of huge pages, the path the
    // others share: each takes minutes there
    size_t n = sizeof cases / sizeof cases[0] - (getenv("MHA_MEMCHECK") ? 2 : 0);
    for (size_t i = 0; i < n; i++)
        assert_big_case(&cases[i]);
}
//<
