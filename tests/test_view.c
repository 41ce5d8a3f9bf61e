//> full
/* test_view.c: `mha view` and the page plot/explorer.h writes.
 *
 *   - the README's case (B 2, Lq 4, Lk 6, D 100, 5 heads, valid_lens 3, 2)
 *     writes one file under 1 MiB, says nothing, and the page holds the
 *     sizes and, for each (example, query), the keys it sees;
 *   - the weights in the page are those `mha forward --attention-out`
 *     writes for the same .npy inputs (to the 6 digits the page keeps);
 *   - d2l's inputs of ones give every query the same scores, so weights
 *     1/3 on keys 0-2 of example 0 and 1/2 on keys 0-1 of example 1:
 *     worked out by hand;
 *   - labels and titles cannot close the page's elements;
 *   - the module's own options (--window, --keep-first, --alibi, --sinks)
 *     take effect in the sizes form as in the files form, and the page's
 *     keys seen per row ("first", "lo", "hi") are the keys whose weight
 *     mha forward does not set to exactly 0; PyTorch's options are
 *     refused in both forms, by name;
 *   - bad invocations: one line, exit status 2, the directory as it was.
 *
 * tools/test-view.py checks the page in Chromium. */
#include "check.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"
#include "mha_run.h"

static void enter(void) { mha_enter("mha-view"); }

/* The numbers of the page's "w": [...] array, into w (room for cap);
 * returns how many. */
static size_t page_weights(const char *page, double *w, size_t cap)
{
    const char *s = strstr(page, "\"w\": [");
    cr_assert_not_null(s, "the page has no weights");
    s += strlen("\"w\": [");
    size_t n = 0;
    while (*s != ']') {
        char *end;
        cr_assert_lt(n, cap);
        w[n++] = strtod(s, &end);
        cr_assert_neq(end, s, "not a number at %.20s", s);
        s = end;
        while (*s == ',' || *s == '\n')
            s++;
    }
    return n;
}

/* The page's JSON list "name": [...] of whole numbers into v (room for
 * cap); returns how many, or 0 when the page has no such list. */
static size_t page_list(const char *page, const char *name, size_t *v,
                        size_t cap)
{
    char key[32];
    snprintf(key, sizeof key, "\"%s\": [", name);
    const char *s = strstr(page, key);
    if (!s)
        return 0;
    s += strlen(key);
    size_t n = 0;
    while (*s != ']') {
        char *end;
        cr_assert_lt(n, cap);
        v[n++] = strtoul(s, &end, 10);
        cr_assert_neq(end, s, "not a number at %.20s", s);
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    return n;
}

/* What the page says row r sees: key k in [lo, hi) or below first. */
static int page_sees(const size_t *first, const size_t *lo, const size_t *hi,
                     size_t r, size_t k)
{
    return (k >= lo[r] && k < hi[r]) || (first && k < first[r]);
}

/* `mha ARGS` that writes v.html: it ran (exit 0), and the page it wrote,
 * to be freed. */
static char *view_page(const char *args)
{
    run r = mha(args);
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    run_free(&r);
    size_t size;
    return file_bytes("v.html", &size);
}

/* Query i (of Lq, the last of Lk positions) sees key j under a window W
 * that keeps the first K, and a valid length len: window.h's rule. */
static int window_rule_sees(size_t i, size_t j, size_t Lq, size_t Lk,
                            size_t W, size_t K, size_t len)
{
    size_t at = i + Lk - Lq;
    return j < len && j <= at && (j + W > at || j < K);
}

Test(view, readme_case, .init = enter, .fini = leave_scratch)
{
    run r = mha("view|--batch|2|--queries|4|--kv|6|--hiddens|100|--heads|5|"
                "--valid-lens|3,2|--html|v.html");
    cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_assert_str_eq(r.out, "");
    cr_assert_str_eq(r.err, "");
    assert_names("v.html");
    size_t size;
    char *page = file_bytes("v.html", &size);
    cr_assert_lt(size, (size_t)1 << 20, "%zu bytes", size);
    cr_assert_eq(strncmp(page, "<!DOCTYPE html>\n<html lang=\"en\">", 31), 0);
    cr_assert_not_null(strstr(page, "\"B\": 2, \"h\": 5, \"G\": 5, \"Lq\": 4, "
                                    "\"Lk\": 6, \"p\": 20, \"causal\": false"));
    // example 0 sees keys 0-2, example 1 keys 0-1, every query
    cr_assert_not_null(strstr(page, "\"lo\": [0, 0, 0, 0, 0, 0, 0, 0],\n"
                                    "\"hi\": [3, 3, 3, 3, 2, 2, 2, 2]"));
    // nothing from outside: no URL but the SVG namespace the script names
    const char *s = page;
    while ((s = strstr(s, "http")) != NULL) {
        cr_assert_eq(strncmp(s, "http://www.w3.org/2000/svg", 26), 0,
                     "the page names %.40s", s);
        s++;
    }
    cr_assert_null(strstr(page, " src="));
    cr_assert_null(strstr(page, "<link"));
    static double w[2 * 5 * 4 * 6 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 5 * 4 * 6 + 1), 2 * 5 * 4 * 6);
    // every row sums to 1 over the keys it sees, 0 on the others
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 5 * 4; i++) {
            double sum = 0;
            for (size_t k = 0; k < 6; k++) {
                double v = w[(b * 20 + i) * 6 + k];
                if (k >= (b ? 2u : 3u))
                    cr_assert_eq(v, 0.0);
                sum += v;
            }
            cr_assert_float_eq(sum, 1.0, 1e-5);
        }
    free(page);
    run_free(&r);
}

/* d2l's example: queries and keys of ones, so every query scores every
 * key alike and the weights are 1/valid_len on the keys it sees. */
Test(view, d2l_inputs_give_uniform_weights, .init = enter, .fini = leave_scratch)
{
    char *page = view_page(
        "view|--d2l|--valid-lens|3,2|--html|v.html|--title|d2l's example");
    cr_assert_not_null(strstr(page, "<title>d2l's example</title>"));
    static double w[2 * 5 * 4 * 6 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 5 * 4 * 6 + 1), 240);
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < 20; i++)
            for (size_t k = 0; k < 6; k++) {
                size_t len = b ? 2 : 3;
                cr_assert_float_eq(w[(b * 20 + i) * 6 + k],
                                   k < len ? 1.0 / (double)len : 0.0, 1e-6);
            }
    free(page);
}

/* The page's weights against mha forward's A, on the same .npy inputs. */
Test(view, weights_are_mha_forward_s, .init = enter, .fini = leave_scratch)
{
    gsl_rng *g = mha_rng_new(5);
    put_normal("q.npy", SHAPE(2, 3, 6), g, 1);
    put_normal("k.npy", SHAPE(2, 5, 4), g, 1);
    put_normal("wq.npy", SHAPE(8, 6), g, 0.5);
    put_normal("wk.npy", SHAPE(4, 4), g, 0.5); // G 2 key-value heads of p 2
    put_normal("wv.npy", SHAPE(4, 4), g, 0.5);
    put_normal("wo.npy", SHAPE(8, 8), g, 0.5);
    gsl_rng_free(g);
#define FILES "--heads|4|--kv-heads|2|--queries|q.npy|--keys|k.npy|--values|" \
              "k.npy|--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|"       \
              "--valid-lens|4,2|--causal"
    run r = mha("forward|" FILES "|--out|o.npy|--attention-out|a.npy");
    cr_assert_eq(r.status, 0, "forward: %s", r.err);
    run_free(&r);
    r = mha("view|" FILES "|--labels|the,cat,sat,on,mat|--html|v.html");
    cr_assert_eq(r.status, 0, "view: %s", r.err);
    tensor *a;
    OK(npy_read("a.npy", &a));
    cr_assert_eq(a->ndim, 4);
    size_t size;
    char *page = file_bytes("v.html", &size);
    static double w[2 * 4 * 3 * 5 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 4 * 3 * 5 + 1), 120);
    for (size_t n = 0; n < 120; n++)
        cr_assert_float_eq(w[n], a->data[n], 1e-6 * (1 + fabs(a->data[n])),
                           "weight %zu: %g in the page, %g from forward", n,
                           w[n], a->data[n]);
    cr_assert_not_null(strstr(page, "\"G\": 2, \"Lq\": 3, \"Lk\": 5, \"p\": 2, "
                                    "\"causal\": true"));
    // causal with Lq 3 < Lk 5: query i sees keys 0 .. i + 2, and example
    // 1 only its first 2
    cr_assert_not_null(strstr(page, "\"hi\": [3, 4, 4, 2, 2, 2]"));
    cr_assert_not_null(strstr(page, "\"keys\": [\"the\", \"cat\", \"sat\", "
                                    "\"on\", \"mat\"]"));
    cr_assert_not_null(strstr(page, "\"queries\": [\"0\", \"1\", \"2\"]"));
    tensor_free(a);
    free(page);
    run_free(&r);
#undef FILES
}

/* A label or title holding markup stays text: the JSON writes < as
 * \u003c, the title is escaped. */
Test(view, labels_cannot_close_the_page, .init = enter, .fini = leave_scratch)
{
    tensor *w;
    OK(tensor_alloc(SHAPE(1, 1, 2, 2), &w));
    tensor_fill(w, 0.5);
    const char *keys[] = {"</script><script>alert(1)</script>", "a\"b\\c"};
    explorer_page page = {.title = "<b>&",
                          .weights = w,
                          .key_labels = keys,
                          .query_labels = keys};
    OK(explorer_save("p.html", &page));
    size_t size;
    char *text = file_bytes("p.html", &size);
    cr_assert_not_null(strstr(text, "<title>&lt;b&gt;&amp;</title>"));
    cr_assert_not_null(strstr(text, "\"\\u003c/script>\\u003cscript>alert(1)"
                                    "\\u003c/script>\", \"a\\\"b\\\\c\""));
    // two scripts (the data and the code), each closed once
    size_t opened = 0, closed = 0;
    for (const char *s = text; (s = strstr(s, "<script")); s++)
        opened++;
    for (const char *s = text; (s = strstr(s, "</script>")); s++)
        closed++;
    cr_assert_eq(opened, 2);
    cr_assert_eq(closed, 2);
    free(text);
    tensor_free(w);
}

Test(view, explorer_refuses_shapes, .init = enter, .fini = leave_scratch)
{
    tensor *w, *lens;
    OK(tensor_alloc(SHAPE(2, 4, 3), &w));
    explorer_page page = {.weights = w};
    cr_assert_eq(explorer_save("p.html", &page), GSL_EINVAL);
    cr_assert_str_eq(mha_last_error(), "explorer_write: the weights must be "
                                       "(B, h, Lq, Lk), not 3-D");
    tensor_free(w);
    OK(tensor_alloc(SHAPE(2, 1, 3, 4), &w));
    OK(tensor_alloc(SHAPE(3), &lens));
    page = (explorer_page){.weights = w, .valid_lens = lens};
    cr_assert_eq(explorer_save("p.html", &page), GSL_EINVAL);
    cr_assert_str_eq(mha_last_error(), "explorer_write: valid_lens must be "
                                       "(2,) or (2, 3) for weights with B = 2 "
                                       "and Lq = 3");
    page = (explorer_page){.weights = w, .kv_heads = 3};
    cr_assert_eq(explorer_save("p.html", &page), GSL_EINVAL);
    cr_assert_str_eq(mha_last_error(), "explorer_write: kv_heads 3 does not "
                                       "divide the 1 heads");
    assert_names("");
    FREE_ALL(w, lens);
}

/* One line, exit 2, and the directory as it was (old.html untouched). */
static void refused(const char *args, const char *line)
{
    FILE *f = fopen("old.html", "w");
    cr_assert_not_null(f);
    fputs("an earlier page\n", f);
    fclose(f);
    cr_assert_eq(mkdir("dir", 0755), 0);
    snapshot before = snapshot_of(".");
    run r = mha(args);
    cr_assert_eq(r.status, 2, "%s: exit %d", args, r.status);
    cr_assert_str_eq(r.out, "");
    cr_assert_str_eq(r.err, line, "%s", args);
    cr_assert(snapshot_unchanged(&before, "."), "%s changed the directory", args);
    free(before.data);
    run_free(&r);
    remove("old.html");
    rmdir("dir");
}

Test(view, bad_invocations, .init = enter, .fini = leave_scratch)
{
    refused("view|--queries|4", "mha view: --html is required: the page to "
                                "write (see mha view --help)\n");
    refused("view|--heads|3|--html|old.html",
            "mha view: --heads 3 does not divide --hiddens 100\n");
    refused("view|--labels|a,b|--html|old.html",
            "mha view: --labels 'a,b' has 2 labels but there are 6 keys\n");
    refused("view|--html||--seed|1",
            "mha view: --html '' is an empty name: give the file to write\n");
    refused("view|--kv|1|--labels|a,b|--html|old.html",
            "mha view: --labels 'a,b' has 2 labels but there is 1 key\n");
    refused("view|--query-labels|x|--html|old.html",
            "mha view: --query-labels 'x' has 1 label but there are 4 "
            "queries\n");
    // one range for every command's --seed, mha quiz's: 0 is the default
    refused("view|--seed|-1|--html|old.html",
            "mha view: --seed '-1' is not a whole number from 0 to "
            "999999999999999999\n");
    refused("view|--seed|1000000000000000000|--html|old.html",
            "mha view: --seed '1000000000000000000' is larger than "
            "999999999999999999, the largest seed\n");
    refused("view|--seed|3|--d2l|--html|old.html",
            "mha view: --seed and --d2l exclude each other: --d2l's inputs "
            "are ones (the weights are drawn from seed 0)\n");
    refused("view|--wq|wq.npy|--html|old.html",
            "mha view: --wq names a file, but --queries (default 4) is a "
            "number: give --queries Q.npy and the other inputs of mha "
            "forward, or sizes alone\n");
    refused("view|--queries|q.npy|--batch|2|--html|old.html",
            "mha view: --batch goes with sizes, but --queries 'q.npy' is a "
            "file: the inputs give the sizes\n");
    refused("view|--batch|1|--queries|4096|--kv|4096|--hiddens|1|--heads|1|"
            "--html|old.html",
            "mha view: the page would hold 1 x 1 x 4096 x 4096 weights, more "
            "than 4194304; choose smaller sizes\n");
    refused("view|--hiddens|4096|--heads|1|--html|old.html",
            "mha view: --hiddens 4096 is more than 2048, the most this draws "
            "weights for (four (D, D) matrices); mha trace takes any size\n");
    refused("view|--valid-lens|3,7|--html|old.html",
            "mha view: --valid-lens '3,7': entry 2 (7) is larger than --kv 6\n");
    refused("view|--causal|--queries|7|--html|old.html",
            "mha view: multihead: causal: query 0 of example 0 sees no key "
            "(Lq 7, Lk 6: query i sees key j only when j <= i + Lk - Lq)\n");
}

/* The sizes form applies --window and --keep-first as the files form and
 * mha trace do: with d2l's inputs of ones every visible key scores alike,
 * so a row's weights are 1/n on the n keys the window leaves it, and the
 * page says which. */
Test(view, sizes_form_takes_the_window, .init = enter, .fini = leave_scratch)
{
    char *page = view_page("view|--d2l|--batch|1|--queries|5|--kv|5|"
                           "--hiddens|8|--heads|2|--window|2|--keep-first|1|"
                           "--html|v.html");
    cr_assert_not_null(strstr(page, "\"causal\": true, \"window\": 2, "
                                    "\"keep\": 1, \"alibi\": false, "
                                    "\"sinks\": false"));
    // query 3 sees keys 0, 2, 3; query 4 keys 0, 3, 4
    cr_assert_not_null(strstr(page, "\"lo\": [0, 0, 0, 2, 3],\n"
                                    "\"hi\": [1, 2, 3, 4, 5],\n"
                                    "\"first\": [0, 0, 0, 1, 1]"));
    static double w[2 * 5 * 5 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 5 * 5 + 1), 50);
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < 5; i++) {
            size_t n = 0;
            for (size_t j = 0; j < 5; j++)
                n += window_rule_sees(i, j, 5, 5, 2, 1, 5);
            for (size_t j = 0; j < 5; j++)
                cr_assert_float_eq(w[(h * 5 + i) * 5 + j],
                                   window_rule_sees(i, j, 5, 5, 2, 1, 5)
                                       ? 1.0 / (double)n
                                       : 0.0,
                                   1e-6, "head %zu, query %zu, key %zu", h,
                                   i, j);
        }
    free(page);
}

/* --alibi in the sizes form: with d2l's ones the scores differ only by
 * ALiBi's bias -m_h (i - j), m_0 = 2^-4 and m_1 = 2^-8 for 2 heads, so
 * query i's weights are exp(-m_h (i - j)) over keys 0 .. i, normalised. */
Test(view, sizes_form_takes_alibi, .init = enter, .fini = leave_scratch)
{
    char *page = view_page("view|--d2l|--batch|1|--queries|4|--kv|4|"
                           "--hiddens|8|--heads|2|--causal|--alibi|"
                           "--html|v.html");
    cr_assert_not_null(strstr(page, "\"alibi\": true"));
    static double w[2 * 4 * 4 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 4 * 4 + 1), 32);
    const double m[2] = {1.0 / 16, 1.0 / 256};
    for (size_t h = 0; h < 2; h++)
        for (size_t i = 0; i < 4; i++) {
            double z = 0;
            for (size_t j = 0; j <= i; j++)
                z += exp(-m[h] * (double)(i - j));
            for (size_t j = 0; j < 4; j++)
                cr_assert_float_eq(w[(h * 4 + i) * 4 + j],
                                   j <= i ? exp(-m[h] * (double)(i - j)) / z
                                          : 0.0,
                                   1e-6, "head %zu, query %zu, key %zu", h,
                                   i, j);
        }
    free(page);
}

/* --sinks S.npy in the sizes form: each row gives part of its weight to
 * its head's sink (sums below 1), the rest alike over its keys (d2l's
 * ones); a larger sink logit takes more. */
Test(view, sizes_form_takes_sinks, .init = enter, .fini = leave_scratch)
{
    put_values("s.npy", SHAPE(2), (double[]){0, 3});
    char *page = view_page("view|--d2l|--batch|1|--queries|3|--kv|3|"
                           "--hiddens|8|--heads|2|--sinks|s.npy|--html|v.html");
    cr_assert_not_null(strstr(page, "\"sinks\": true"));
    static double w[2 * 3 * 3 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 3 * 3 + 1), 18);
    for (size_t i = 0; i < 3; i++) {
        double sum[2] = {0, 0};
        for (size_t h = 0; h < 2; h++)
            for (size_t j = 0; j < 3; j++) {
                sum[h] += w[(h * 3 + i) * 3 + j];
                cr_assert_float_eq(w[(h * 3 + i) * 3 + j],
                                   w[(h * 3 + i) * 3], 1e-6);
            }
        cr_assert_lt(sum[0], 0.999, "query %zu sums to %g", i, sum[0]);
        cr_assert_lt(sum[1], sum[0], "query %zu: %g, %g", i, sum[1], sum[0]);
    }
    free(page);
}

/* The files form with --window 2 --keep-first 1 and valid_lens: the
 * weights are mha forward's, and the keys the page says each row sees
 * are those whose weight is not exactly 0, as window.h's rule has it. */
Test(view, window_keys_seen_are_mha_forward_s, .init = enter,
     .fini = leave_scratch)
{
    gsl_rng *g = mha_rng_new(7);
    put_normal("q.npy", SHAPE(2, 4, 6), g, 1);
    put_normal("k.npy", SHAPE(2, 6, 6), g, 1);
    put_normal("wq.npy", SHAPE(4, 6), g, 0.5);
    put_normal("wk.npy", SHAPE(4, 6), g, 0.5);
    put_normal("wv.npy", SHAPE(4, 6), g, 0.5);
    put_normal("wo.npy", SHAPE(4, 4), g, 0.5);
    gsl_rng_free(g);
#define FILES "--heads|2|--queries|q.npy|--keys|k.npy|--values|k.npy|"    \
              "--wq|wq.npy|--wk|wk.npy|--wv|wv.npy|--wo|wo.npy|"          \
              "--valid-lens|6,4|--window|2|--keep-first|1"
    run r = mha("forward|" FILES "|--out|o.npy|--attention-out|a.npy");
    cr_assert_eq(r.status, 0, "forward: %s", r.err);
    run_free(&r);
    r = mha("view|" FILES "|--html|v.html");
    cr_assert_eq(r.status, 0, "view: %s", r.err);
#undef FILES
    tensor *a; // (2, 2, 4, 6)
    OK(npy_read("a.npy", &a));
    size_t size;
    char *page = file_bytes("v.html", &size);
    cr_assert_not_null(strstr(page, "\"causal\": true, \"window\": 2, "
                                    "\"keep\": 1"));
    static double w[2 * 2 * 4 * 6 + 1];
    cr_assert_eq(page_weights(page, w, 2 * 2 * 4 * 6 + 1), 96);
    size_t first[8], lo[8], hi[8];
    cr_assert_eq(page_list(page, "first", first, 8), 8);
    cr_assert_eq(page_list(page, "lo", lo, 8), 8);
    cr_assert_eq(page_list(page, "hi", hi, 8), 8);
    const size_t lens[2] = {6, 4};
    for (size_t b = 0; b < 2; b++)
        for (size_t h = 0; h < 2; h++)
            for (size_t i = 0; i < 4; i++)
                for (size_t j = 0; j < 6; j++) {
                    size_t n = ((b * 2 + h) * 4 + i) * 6 + j;
                    int sees = window_rule_sees(i, j, 4, 6, 2, 1, lens[b]);
                    cr_assert_float_eq(w[n], a->data[n],
                                       1e-6 * (1 + fabs(a->data[n])));
                    cr_assert_eq(a->data[n] != 0.0, sees,
                                 "example %zu head %zu query %zu key %zu: "
                                 "weight %g", b, h, i, j, a->data[n]);
                    cr_assert_eq(page_sees(first, lo, hi, b * 4 + i, j), sees,
                                 "example %zu query %zu key %zu: the page "
                                 "says %s", b, i, j,
                                 sees ? "masked" : "seen");
                }
    tensor_free(a);
    free(page);
    run_free(&r);
}

/* PyTorch's options are mha forward's: mha view refuses each by name in
 * either form, before any file is read. */
Test(view, refuses_pytorch_s_options, .init = enter, .fini = leave_scratch)
{
#define TORCH(o)                                                              \
    "mha view: " o " is one of PyTorch's options: mha view takes the "      \
    "module's own options, not PyTorch's (mha forward takes them)\n"
    refused("view|--queries|4|--add-zero-attn|--html|old.html",
            TORCH("--add-zero-attn"));
    refused("view|--average-attn-weights|--html|old.html",
            TORCH("--average-attn-weights"));
    refused("view|--queries|4|--attn-mask|m.npy|--html|old.html",
            TORCH("--attn-mask"));
    refused("view|--d2l|--key-padding-mask|p.npy|--html|old.html",
            TORCH("--key-padding-mask"));
    refused("view|--heads|2|--queries|q.npy|--wq|wq.npy|--wk|wk.npy|--wv|"
            "wv.npy|--wo|wo.npy|--add-zero-attn|--html|old.html",
            TORCH("--add-zero-attn"));
    refused("view|--heads|2|--queries|q.npy|--state-dict|m.npz|--html|"
            "old.html",
            TORCH("--state-dict"));
#undef TORCH
}

/* The module's own options in the sizes form: refused as mha forward
 * refuses them, and --sinks is an input the page may not replace. */
Test(view, sizes_form_checks_the_module_s_options, .init = enter,
     .fini = leave_scratch)
{
    refused("view|--keep-first|1|--html|old.html",
            "mha view: --keep-first '1' needs --window (without one every "
            "earlier key is seen)\n");
    refused("view|--alibi|--html|old.html",
            "mha view: --alibi needs --causal or --window (its bias -m_h "
            "(i' - j) counts the distance to earlier keys)\n");
    refused("view|--window|0|--html|old.html",
            "mha view: --window '0' is zero (expected 1 to 1000000)\n");
    refused("view|--window|2|--valid-lens|1,1|--queries|6|--kv|6|--html|"
            "old.html",
            "mha view: multihead: window: query 2 of example 0 sees no key "
            "(valid_len 1, Lq 6, Lk 6, window 2: query i sees key j only "
            "when i + Lk - Lq - 2 < j <= i + Lk - Lq)\n");
    refused("view|--sinks|old.html|--html|old.html",
            "mha view: --html 'old.html' and --sinks 'old.html' name the "
            "same file (an output must not replace an input)\n");
    put_values("s.npy", SHAPE(3), (double[]){0, 0, 0});
    refused("view|--sinks|s.npy|--html|old.html",
            "mha view: --sinks s.npy has shape (3,) but --heads 5 needs "
            "(5,): one sink logit per head\n");
    gsl_rng *g = mha_rng_new(3);
    put_normal("q.npy", SHAPE(1, 2, 4), g, 1);
    put_normal("w.npy", SHAPE(4, 4), g, 1);
    gsl_rng_free(g);
    refused("view|--heads|2|--queries|q.npy|--wq|w.npy|--wk|w.npy|--wv|"
            "w.npy|--wo|w.npy|--sinks|old.html|--html|./old.html",
            "mha view: --html './old.html' and --sinks 'old.html' name the "
            "same file (an output must not replace an input)\n");
}

Test(view, html_must_be_a_regular_file, .init = enter, .fini = leave_scratch)
{
    cr_assert_eq(mkdir("dir", 0755), 0);
    snapshot before = snapshot_of(".");
    run r = mha("view|--html|dir");
    cr_assert_eq(r.status, 2);
    cr_assert_eq(strchr(r.err, '\n'), r.err + strlen(r.err) - 1, "%s", r.err);
    cr_assert_not_null(strstr(r.err, "mha view: --html"), "%s", r.err);
    cr_assert(snapshot_unchanged(&before, "."));
    free(before.data);
    run_free(&r);
}

Test(view, help, .init = enter, .fini = leave_scratch)
{
    run r = mha("view|--help");
    cr_assert_eq(r.status, 0);
    cr_assert_eq(strncmp(r.out, "usage: mha view --html F", 24), 0, "%s", r.out);
    cr_assert_not_null(strstr(r.out, "  --labels a,b,c   the keys' labels"));
    // every option of the module it takes, named
    const char *takes[] = {"[--rope [--rope-base B]]", "[--causal]",
                           "[--kv-heads G]", "[--window W [--keep-first K]]",
                           "[--alibi]", "[--sinks S.npy]", "\n  --rope,",
                           "\n  --causal ", "\n  --kv-heads G ",
                           "\n  --window W, --keep-first K, --alibi ",
                           "\n  --sinks S.npy "};
    for (size_t i = 0; i < sizeof takes / sizeof takes[0]; i++)
        cr_assert_not_null(strstr(r.out, takes[i]), "no %s in\n%s", takes[i],
                           r.out);
    cr_assert_str_eq(r.err, "");
    run_free(&r);
}
//<
