//> 08
/* explorer.c: one self-contained HTML page of attention weights; see
 * explorer.h.
 *
 * The page is a skeleton, the data as JSON in a <script
 * type="application/json"> element, and the style and script, which are
 * src/explorer.css and src/explorer.js built in (the Makefile turns them
 * into explorer_assets.h with xxd -i).  The script draws everything; the
 * C side only writes numbers and names. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include "plot/explorer.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "explorer_assets.h"
#include "io/fileset.h"
#include "plot/numbers.h"
#include "trace/trace.h"

/* s as HTML text: & < > " escaped. */
static void html_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* "labels": [...] of n labels, or positions "0" .. "n-1" */
static void json_labels(FILE *f, const char *key, const char *const *labels,
                        size_t n)
{
    fprintf(f, ",\n\"%s\": [", key);
    for (size_t i = 0; i < n; i++) {
        fputs(i ? ", " : "", f);
        if (labels) {
            trace_json_string(f, labels[i]);
        } else {
            fprintf(f, "\"%zu\"", i);
        }
    }
    fputc(']', f);
}

/* The keys query i of example b sees, as the module's masks make them
 * (mask.h, window.h): [0, first) and [lo, hi), with first = 0 but for a
 * window that keeps the first keys, and first < lo when it is not 0. */
static void visible_keys(const explorer_page *p, size_t b, size_t i,
                         size_t *first, size_t *lo, size_t *hi)
{
    size_t Lq = p->weights->shape[2], Lk = p->weights->shape[3];
    *first = 0;
    *lo = 0;
    *hi = Lk;
    const tensor *vl = p->valid_lens;
    if (vl) {
        double len = vl->ndim == 1 ? *TENSOR_AT(vl, b) : *TENSOR_AT(vl, b, i);
        if (len > 0 && len < (double)Lk)
            *hi = (size_t)len; // 0: every key, uniformly, as d2l
    }
//> 16
    if (p->causal && i + Lk - Lq + 1 < *hi)
        *hi = i + Lk - Lq + 1;
//<
//> 19
    // a window: query i' = i + Lk - Lq sees j > i' - W, and j < keep_first
    size_t at = i + Lk - Lq;
    if (p->window && i + Lk < Lq) // before key 0: nothing (refused)
        *hi = 0;
    else if (p->window && at + 1 < *hi) // a window is causal too
        *hi = at + 1;
    if (p->window && *hi && at + 1 > p->window) {
        *lo = at + 1 - p->window < *hi ? at + 1 - p->window : *hi;
        *first = p->keep_first < *hi ? p->keep_first : *hi;
        if (*first >= *lo) // the two ranges touch: one
            *first = *lo = 0;
    }
//<
    (void)Lq;
}

/* The page's data, as one JSON object. */
static int write_data(FILE *f, const explorer_page *p)
{
    const tensor *w = p->weights;
    size_t B = w->shape[0], h = w->shape[1], Lq = w->shape[2],
           Lk = w->shape[3];
    size_t G = h;
    int causal = 0;
//> 16
    causal = p->causal;
//<
//> 19
    causal = causal || p->window; // a window is causal too (window.h)
//<
//> 17
    if (p->kv_heads)
        G = p->kv_heads;
//<
    fputs("{\"title\": ", f);
    trace_json_string(f, p->title ? p->title : "attention weights");
    fprintf(f, ", \"B\": %zu, \"h\": %zu, \"G\": %zu, \"Lq\": %zu, "
               "\"Lk\": %zu, \"p\": %zu, \"causal\": %s",
            B, h, G, Lq, Lk, p->head_size, causal ? "true" : "false");
//> 19
    fprintf(f, ", \"window\": %zu, \"keep\": %zu, \"alibi\": %s, "
               "\"sinks\": %s",
            p->window, p->window ? p->keep_first : 0,
            p->alibi ? "true" : "false", p->sinks ? "true" : "false");
//<
    json_labels(f, "queries", p->query_labels, Lq);
    json_labels(f, "keys", p->key_labels, Lk);
    // [lo, hi) of every (example, query) row: the list of lo, then of
    // hi; with a window that keeps the first keys, then [0, first)
    int ranges = 2;
//> 19
    if (p->window && p->keep_first)
        ranges = 3;
//<
    for (int end = 0; end < ranges; end++) {
        fputs(end == 2 ? "],\n\"first\": [" : end ? "],\n\"hi\": ["
                                               : ",\n\"lo\": [", f);
        for (size_t b = 0; b < B; b++)
            for (size_t i = 0; i < Lq; i++) {
                size_t first, lo, hi;
                visible_keys(p, b, i, &first, &lo, &hi);
                fprintf(f, "%s%zu", b || i ? ", " : "",
                        end == 2 ? first : end ? hi : lo);
            }
    }
    // the weights, row after row: w[((b*h + i)*Lq + q)*Lk + k]; six
    // significant digits are more than a picture shows
    fputs("],\n\"w\": [", f);
    size_t n = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < h; i++)
            for (size_t q = 0; q < Lq; q++) {
                fputc('\n', f);
                for (size_t k = 0; k < Lk; k++) {
                    double v = *TENSOR_AT(w, b, i, q, k);
                    fprintf(f, "%s%.6g", n++ ? "," : "", v);
                }
            }
    fputs("],\n\"trace\": [", f);
    if (p->trace)
        for (size_t r = 0; r < p->trace->count; r++) {
            fputs(r ? ",\n" : "\n", f);
            trace_print_json(f, &p->trace->records[r]);
        }
    fputs("],\n\"numbers\": ", f);
    int status = numbers_write_json(f, p->trace);
    fputs("}", f);
    return status;
}

/* Copy the held JSON to f, with every < written \u003c (a < can only
 * stand inside a JSON string). */
static void put_json(FILE *f, const char *json, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '<')
            fputs("\\u003c", f);
        else
            fputc(json[i], f);
    }
}

static int check_page(const explorer_page *p)
{
    const tensor *w = p->weights;
    if (!w || w->ndim != 4)
        return mha_fail(GSL_EINVAL, "explorer_write: the weights must be "
                                    "(B, h, Lq, Lk), not %zu-D",
                        w ? w->ndim : 0);
    const tensor *vl = p->valid_lens;
    if (vl && !((vl->ndim == 1 && vl->shape[0] == w->shape[0]) ||
                (vl->ndim == 2 && vl->shape[0] == w->shape[0] &&
                 vl->shape[1] == w->shape[2])))
        return mha_fail(GSL_EINVAL, "explorer_write: valid_lens must be "
                                    "(%zu,) or (%zu, %zu) for weights with "
                                    "B = %zu and Lq = %zu",
                        w->shape[0], w->shape[0], w->shape[2], w->shape[0],
                        w->shape[2]);
//> 17
    if (p->kv_heads && w->shape[1] % p->kv_heads)
        return mha_fail(GSL_EINVAL, "explorer_write: kv_heads %zu does not "
                                    "divide the %zu heads",
                        p->kv_heads, w->shape[1]);
//<
    return GSL_SUCCESS;
}

int explorer_write(FILE *f, const explorer_page *p)
{
    int status = check_page(p);
    if (status)
        return status;
    char *json = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&json, &len);
    if (!mem)
        return mha_fail(GSL_ENOMEM, "explorer_write: out of memory");
    status = write_data(mem, p);
    if (fclose(mem) || status) {
        free(json);
        return mha_fail(GSL_ENOMEM, "explorer_write: out of memory");
    }
    const char *title = p->title ? p->title : "attention weights";
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n"
          "<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width\">\n"
          "<title>", f);
    html_text(f, title);
    fputs("</title>\n<style>\n", f);
    fwrite(explorer_css, 1, explorer_css_len, f);
    fputs("</style>\n</head>\n<body>\n<h1>", f);
    html_text(f, title);
    fputs("</h1>\n<noscript><p>This page draws with its own script, which "
          "is in the file: let it run.</p></noscript>\n"
          "<main id=\"app\"></main>\n"
          "<script type=\"application/json\" id=\"mha-data\">", f);
    put_json(f, json, len);
    free(json);
    fputs("</script>\n<script>\n", f);
    fwrite(explorer_js, 1, explorer_js_len, f);
    fputs("</script>\n</body>\n</html>\n", f);
    return GSL_SUCCESS;
}

int explorer_save(const char *path, const explorer_page *p)
{
    int status = check_page(p);
    if (status)
        return status;
    fileset *set;
    FILE *f;
    fileset_failure why;
    if (fileset_open("explorer_save", path, &set, &f, &why))
        return why.step == FILESET_CREATE
                   ? mha_fail(GSL_EFAILED, "explorer_save %s: cannot create "
                                           "a file next to it: %s",
                              path, strerror(why.err))
                   : mha_fail_in(GSL_EFAILED, "explorer_save %s", path);
    status = explorer_write(f, p);
    if (status) {
        fileset_end(set);
        return mha_fail_in(status, "explorer_save %s", path);
    }
    status = fileset_commit(set, &why);
    fileset_end(set);
    if (status)
        return mha_fail(GSL_EFAILED, "explorer_save %s: %s; the file is as "
                                     "it was",
                        path, why.err ? strerror(why.err) : "write failed");
    return GSL_SUCCESS;
}
//<
