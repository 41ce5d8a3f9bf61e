//> 08
/* test_numbers.c: where each number of the split and join goes, as
 * plot/numbers.h writes it for the explorer's page.
 *
 *   - for (1, 2, 16) and (2, 3, 16) with 8 heads, every drawn position of
 *     every stage holds the input element the arithmetic of
 *     transpose_qkv and transpose_output puts there, worked out here
 *     index by index;
 *   - each stage's view or copy is the trace's, and what the strides say
 *     by hand: for B = 1 no step of the split copies, for B = 2 the last
 *     one does; a view's numbers stay where the input put them (slot k
 *     holds element k), a copy's lie in its own order;
 *   - past 512 numbers a stage draws a sample, the same at every stage;
 *   - a step the view cannot run again is named, not guessed;
 *   - no split in the trace: an empty list. */
#include "check.h"

#include "plot/numbers.h"

/* The list numbers_write_json writes for log, in memory (to free). */
static char *numbers_json(const trace_log *log)
{
    char *json = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&json, &len);
    cr_assert_not_null(f);
    OK(numbers_write_json(f, log));
    cr_assert_eq(fclose(f), 0);
    return json;
}

/* The integers of the list after "key": [ at or after *at (which moves
 * past it), into v (room for cap); returns how many. */
static size_t json_list(const char **at, const char *key, long *v, size_t cap)
{
    char want[32];
    snprintf(want, sizeof want, "\"%s\": [", key);
    const char *s = strstr(*at, want);
    cr_assert_not_null(s, "no %s after %.40s", key, *at);
    s += strlen(want);
    size_t n = 0;
    while (*s != ']') {
        char *end;
        long x = strtol(s, &end, 10);
        cr_assert_neq(end, s, "not a number at %.20s", s);
        cr_assert_lt(n, cap);
        v[n++] = x;
        s = end;
        while (*s == ',' || *s == ' ')
            s++;
    }
    *at = s;
    return n;
}

/* The kind of the stage whose record starts at or after *at. */
static void next_kind(const char **at, char *kind)
{
    const char *s = strstr(*at, "\"kind\": \"");
    cr_assert_not_null(s);
    s += strlen("\"kind\": \"");
    size_t n = strcspn(s, "\"");
    memcpy(kind, s, n);
    kind[n] = '\0';
    *at = s + n;
}

/* The split of (B, n, 16) into 8 heads and the join of a contiguous
 * tensor of the split's shape (as the attention's output is), traced. */
static void split_and_join(size_t B, size_t n, trace_log *log)
{
    tensor *x, *heads, *out, *back;
    OK(tensor_alloc(SHAPE(B, n, 16), &x));
    OK(tensor_set_names(x, "B, n, d_model"));
    OK(tensor_alloc(SHAPE(B * 8, n, 2), &out));
    trace_log_start(log);
    OK(transpose_qkv(x, 8, &heads));
    OK(transpose_output(out, 8, &back));
    trace_log_stop(log);
    cr_assert_eq(log->failed, 0);
    tensor_free(x);
    tensor_free(heads);
    tensor_free(out);
    tensor_free(back);
}

/* x[b, i, j] of (B, n, D) at stage k of transpose_qkv with h heads: the
 * indices of the position that holds it (p = D/h). */
static void qkv_at(size_t k, size_t h, size_t p, size_t b, size_t i, size_t j,
                   size_t *at)
{
    size_t all[4][4] = {{b, i, j}, {b, i, j / p, j % p},
                        {b, j / p, i, j % p}, {b * h + j / p, i, j % p}};
    memcpy(at, all[k], sizeof all[k]);
}

/* x[r, i, j] of (B*h, n, p) at stage k of transpose_output. */
static void output_at(size_t k, size_t h, size_t p, size_t r, size_t i,
                      size_t j, size_t *at)
{
    size_t all[4][4] = {{r, i, j}, {r / h, r % h, i, j},
                        {r / h, i, r % h, j}, {r / h, i, (r % h) * p + j}};
    memcpy(at, all[k], sizeof all[k]);
}

/* Every stage of both entries of (B, n, 16) with 8 heads: each drawn
 * position (all of them: 16*B*n <= 512) holds the element the
 * arithmetic puts there, and the stages' kinds are want_qkv[k] and
 * want_out[k] and the trace's. */
static void check_case(size_t B, size_t n, const char *const *want_qkv,
                       const char *const *want_out)
{
    trace_log log;
    split_and_join(B, n, &log);
    char *json = numbers_json(&log);
    const char *at = json;
    size_t h = 8, p = 2, N = B * n * 16;
    cr_assert(strncmp(json, "[\n{\"op\": \"transpose_qkv(h=8)\"", 29) == 0,
              "%.60s", json);
    cr_assert_not_null(strstr(json, "\"op\": \"transpose_output(h=8)\""));
    // the trace's kinds of the steps inside the split, then the join
    const char *traced[6];
    size_t nt = 0;
    for (size_t r = 0; r < log.count; r++)
        if (log.records[r].depth == 1)
            traced[nt++] = trace_kind_name(log.records[r].kind);
    cr_assert_eq(nt, 6);
    long shape[4], strides[4], cells[512], slots[512];
    for (int split = 0; split < 2; split++) {
        at = strstr(at, "\"stages\": [");
        cr_assert_not_null(at);
        size_t in_shape[3] = {split ? B * h : B, n, split ? p : 16};
        for (size_t k = 0; k < 4; k++) {
            char kind[16];
            next_kind(&at, kind);
            const char *want = (split ? want_out : want_qkv)[k];
            cr_assert_str_eq(kind, want, "entry %d, stage %zu", split, k);
            if (k)
                cr_assert_str_eq(kind, traced[3 * split + k - 1]);
            size_t nd = json_list(&at, "shape", shape, 4);
            cr_assert_eq(json_list(&at, "strides", strides, 4), nd);
            size_t nc = json_list(&at, "cells", cells, 512);
            cr_assert_eq(json_list(&at, "slots", slots, 512), nc);
            cr_assert_eq(nc, N, "stage %zu draws %zu of %zu", k, nc, N);
            // position c in row-major order of shape, and the input
            // element the arithmetic puts there
            size_t expect[512];
            for (size_t e = 0; e < N; e++) {
                size_t a = e / (in_shape[1] * in_shape[2]),
                       b = e / in_shape[2] % in_shape[1], c = e % in_shape[2];
                size_t pos[4] = {0};
                (split ? output_at : qkv_at)(k, h, p, a, b, c, pos);
                size_t flat = 0;
                for (size_t d = 0; d < nd; d++)
                    flat = flat * (size_t)shape[d] + pos[d];
                expect[flat] = e;
            }
            for (size_t c = 0; c < N; c++) {
                cr_assert_eq((size_t)cells[c], expect[c],
                             "entry %d, stage %zu, position %zu holds %ld, "
                             "not %zu", split, k, c, cells[c], expect[c]);
                // in the input's buffer slot e holds element e; a copy
                // writes its buffer in its own order
                size_t slot = !strcmp(kind, "copy") ? c : expect[c];
                cr_assert_eq((size_t)slots[c], slot, "entry %d, stage %zu, "
                             "position %zu in slot %ld, not %zu", split, k, c,
                             slots[c], slot);
            }
        }
    }
    free(json);
    trace_log_free(&log);
}

Test(numbers, slide_example_only_views_in_the_split)
{
    static const char *const qkv[] = {"input", "view", "view", "view"};
    // the join's last reshape merges (h, p) of strides (2*2, 1): a copy
    static const char *const out[] = {"input", "view", "view", "copy"};
    check_case(1, 2, qkv, out);
}

Test(numbers, two_examples_the_last_step_copies)
{
    // (2, 8, 3, 2) permuted has strides (48, 2, 16, 1): merging B and h
    // needs 48 = 8*2, which it is not
    static const char *const qkv[] = {"input", "view", "view", "copy"};
    static const char *const out[] = {"input", "view", "view", "copy"};
    check_case(2, 3, qkv, out);
}

Test(numbers, the_permuted_strides_by_hand)
{
    trace_log log;
    split_and_join(2, 3, &log);
    char *json = numbers_json(&log);
    const char *at = strstr(json, "\"op\": \"permute(0, 2, 1, 3)\"");
    cr_assert_not_null(at);
    long v[4];
    cr_assert_eq(json_list(&at, "shape", v, 4), 4);
    cr_assert(v[0] == 2 && v[1] == 8 && v[2] == 3 && v[3] == 2);
    cr_assert_eq(json_list(&at, "strides", v, 4), 4);
    cr_assert(v[0] == 48 && v[1] == 2 && v[2] == 16 && v[3] == 1,
              "strides (%ld, %ld, %ld, %ld)", v[0], v[1], v[2], v[3]);
    cr_assert_not_null(strstr(json, "\"names\": [\"B\", \"h\", \"n\", "
                                    "\"d_model/h\"]"), "%s", json);
    free(json);
    trace_log_free(&log);
}

Test(numbers, a_sample_past_512_the_same_at_every_stage)
{
    trace_log log;
    tensor *x, *heads;
    OK(tensor_alloc(SHAPE(1, 100, 32), &x));
    trace_log_start(&log);
    OK(transpose_qkv(x, 4, &heads));
    trace_log_stop(&log);
    char *json = numbers_json(&log);
    // (1, 100, 4, 8): 100 halved to 50, 25, then 13: 1*13*4*8 = 416
    cr_assert_not_null(strstr(json, "\"numel\": 3200, \"shown\": 416"), "%.200s",
                       json);
    const char *at = json;
    static long first[512], cells[512];
    size_t n0 = json_list(&at, "cells", first, 512);
    cr_assert_eq(n0, 416);
    for (size_t c = 0; c < n0; c++) // positions 0-12, every feature
        cr_assert_eq(first[c], (long)c);
    for (int k = 1; k < 4; k++) {
        size_t n = json_list(&at, "cells", cells, 512);
        cr_assert_eq(n, n0);
        long sorted[512];
        memcpy(sorted, cells, n * sizeof *cells);
        for (size_t i = 1; i < n; i++) // insertion sort: 416 numbers
            for (size_t j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                long t = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = t;
            }
        cr_assert_arr_eq(sorted, first, n * sizeof *first, "stage %d", k);
    }
    free(json);
    trace_log_free(&log);
    tensor_free(x);
    tensor_free(heads);
}

/* A split whose inside holds a step that is no reshape or permute. */
Test(numbers, a_step_it_cannot_run_again_is_named)
{
    trace_record r[2] = {0};
    r[0].kind = TRACE_STEP;
    strcpy(r[0].op, "transpose_qkv(h=2)");
    r[0].n_inputs = 1;
    r[0].inputs[0].shape = (trace_shape){.ndim = 3, .dims = {1, 2, 4}};
    r[1].depth = 1;
    r[1].kind = TRACE_COPY;
    strcpy(r[1].op, "contiguous");
    r[1].has_output = 1;
    r[1].output = (trace_shape){.ndim = 3, .dims = {1, 2, 4}};
    trace_log log = {.records = r, .count = 2};
    char *json = numbers_json(&log);
    cr_assert_str_eq(json, "[\n{\"op\": \"transpose_qkv(h=2)\", \"of\": "
                           "\"queries\", \"note\": \"The step contiguous is "
                           "not a reshape or a permute: this view cannot "
                           "follow the numbers through it.\", \"numel\": "
                           "8, \"shown\": 0, \"stages\": []}]");
    free(json);
}

/* The join of transpose_qkv's own result, a view for B = 1: its last
 * step is a view in the trace, but would copy from a contiguous input.
 * The entry says so rather than draw memory that was not there. */
Test(numbers, an_input_that_was_not_contiguous_is_said)
{
    trace_log log;
    tensor *x, *heads, *back;
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    OK(transpose_qkv(x, 8, &heads));
    trace_log_start(&log);
    OK(transpose_output(heads, 8, &back));
    trace_log_stop(&log);
    char *json = numbers_json(&log);
    cr_assert_str_eq(json, "[\n{\"op\": \"transpose_output(h=8)\", \"of\": "
                           "\"heads' outputs\", \"note\": \"The step "
                           "reshape(1, 2, -1) was a view in the trace but is "
                           "a copy from a contiguous input: the input was not "
                           "contiguous, and this view cannot show its "
                           "memory.\", \"numel\": 32, \"shown\": 0, "
                           "\"stages\": []}]");
    free(json);
    trace_log_free(&log);
    tensor_free(x);
    tensor_free(heads);
    tensor_free(back);
}

Test(numbers, no_split_no_entry)
{
    trace_log log;
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 3), &x));
    trace_log_start(&log);
    OK(tensor_reshape(x, SIZES(3, 2), NULL, &y));
    trace_log_stop(&log);
    char *json = numbers_json(&log);
    cr_assert_str_eq(json, "[]");
    free(json);
    trace_log_free(&log);
    tensor_free(x);
    tensor_free(y);
    json = numbers_json(NULL);
    cr_assert_str_eq(json, "[]");
    free(json);
}
//<
