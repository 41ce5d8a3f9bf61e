/* test_trace.c: the shape trace, line by line and column by column.
 *
 * The layout (src/trace/trace.c), columns counted from 0:
 *
 *     0                        25    31                                  67
 *     op, padded to 24 - indent, one space, kind padded to 4, two spaces,
 *     "in -> out" padded to 34, two spaces, the symbolic shape
 *
 * An op wider than its column pushes the rest right, one space after it;
 * blanks at the end of a line are trimmed.  The rulers below mark the
 * columns.
 */
#include "check.h"

#include <pthread.h>
#include <stdint.h>

#include <criterion/parameterized.h>

/* Whatever a failed assertion left behind: tracing off, no open blocks. */
static void reset_trace(void)
{
    trace_to(NULL);
    for (int k = 0; k < 64; k++)
        trace_end();
}

TestSuite(trace, .init = reset_trace, .fini = reset_trace);

/* --- the lesson's example ------------------------------------------- */

//> 06
/* d2l's transpose_qkv for X (1, 2, 16), h = 8, then transpose_output of
 * its result, each traced with its three steps.  With B = 1 every step is
 * a view, the last one too: undoing the steps on the same buffer brings
 * back X's own layout, (1, 2, 8, 2) with strides (16, 16, 2, 1), which is
 * contiguous. */
Test(trace, transpose_qkv_and_back)
{
    capture c;
    tensor *x = arange(SHAPE(1, 2, 16)), *q = NULL, *f = NULL;
    OK(tensor_set_names(x, "B, n, d_model"));
    capture_trace(&c);
    OK(transpose_qkv(x, 8, &q));
    OK(transpose_output(q, 8, &f));
    capture_trace_is(&c, SEED_WALK_TRACE);
    /* the round trip gives X back, in X's own buffer */
    cr_assert_eq(f->data, x->data);
    for (size_t k = 0; k < 32; k++)
        cr_assert_eq(*TENSOR_AT(f, 0, k / 16, k % 16), (double)k);
    FREE_ALL(f, q, x);
}
//<

//> 06
/* transpose_output of new numbers, as attention pooling returns them: a
 * contiguous (8, 2, 2).  After the permute, h and d_model/h are no longer
 * next to each other in memory, so merging them copies. */
Test(trace, transpose_output_of_new_numbers)
{
    tensor *o = arange(SHAPE(8, 2, 2)), *f = NULL;
    OK(tensor_set_names(o, "B*h, n, d_model/h"));
    TRACES(transpose_output(o, 8, &f),
           "transpose_output(h=8)          (8, 2, 2)                           (B*h, n, d_model/h)\n"
           "  reshape(-1, 8, 2, 2)   view  (8, 2, 2) -> (1, 8, 2, 2)           (B, h, n, d_model/h)\n"
           "  permute(0, 2, 1, 3)    view  (1, 8, 2, 2) -> (1, 2, 8, 2)        (B, n, h, d_model/h)\n"
           "  reshape(1, 2, -1)      copy  (1, 2, 8, 2) -> (1, 2, 16)          (B, n, d_model)\n");
    /* out[0][i][2 j + k] = o[j][i][k] = 4 j + 2 i + k */
    for (size_t i = 0; i < 2; i++)
        for (size_t j = 0; j < 8; j++)
            for (size_t k = 0; k < 2; k++)
                cr_assert_eq(*TENSOR_AT(f, 0, i, 2 * j + k),
                             (double)(4 * j + 2 * i + k));
    FREE_ALL(f, o);
}
//<

//> 06
/* With B = 2 the last reshape of transpose_qkv has to copy. */
Test(trace, transpose_qkv_batch_of_two)
{
    tensor *x = arange(SHAPE(2, 2, 16)), *q = NULL;
    OK(tensor_set_names(x, "B, n, d_model"));
    TRACES(transpose_qkv(x, 8, &q),
           "transpose_qkv(h=8)             (2, 2, 16)                          (B, n, d_model)\n"
           "  reshape(2, 2, 8, -1)   view  (2, 2, 16) -> (2, 2, 8, 2)          (B, n, h, d_model/h)\n"
           "  permute(0, 2, 1, 3)    view  (2, 2, 8, 2) -> (2, 8, 2, 2)        (B, h, n, d_model/h)\n"
           "  reshape(-1, 2, 2)      copy  (2, 8, 2, 2) -> (16, 2, 2)          (B*h, n, d_model/h)\n");
    FREE_ALL(q, x);
}
//<

Test(trace, contiguous_and_view)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *t = NULL, *y = NULL, *v = NULL;
    OK(tensor_set_names(x, "n, d"));
    OK(tensor_permute(x, SHAPE(1, 0), &t));
    capture_trace(&c);
    OK(tensor_contiguous(t, &y));
    OK(tensor_view(y, SIZES(-1), NULL, &v));
    capture_trace_is(&c,
        "contiguous()             copy  (3, 2) -> (3, 2)                    (d, n)\n"
        "view(-1)                 view  (3, 2) -> (6,)                      (d*n,)\n");
    FREE_ALL(v, y, t, x);
}

/* Each thread has its own trace: a step another thread runs reaches
 * that thread's observers only, and its open steps do not change this
 * thread's depth. */
static void *reshape_in_a_thread(void *arg)
{
    trace_log *log = arg;
    trace_log_start(log);
    tensor *x = arange(SHAPE(2, 3)), *y = NULL;
    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "outer");
    OK(tensor_reshape(x, SIZES(3, 2), NULL, &y));
    /* left open: only this thread's depth is 1 */
    trace_log_stop(log);
    FREE_ALL(y, x);
    return NULL;
}

Test(trace, each_thread_has_its_own)
{
    trace_log mine, theirs;
    trace_log_start(&mine);
    pthread_t other;
    cr_assert_eq(pthread_create(&other, NULL, reshape_in_a_thread, &theirs), 0);
    cr_assert_eq(pthread_join(other, NULL), 0);
    tensor *x = arange(SHAPE(6)), *y = NULL;
    OK(tensor_reshape(x, SIZES(2, 3), NULL, &y));
    trace_log_stop(&mine);
    cr_assert_eq(theirs.count, 2);
    cr_assert_str_eq(theirs.records[1].op, "reshape(3, 2)");
    cr_assert_eq(theirs.records[1].depth, 1);
    cr_assert_eq(mine.count, 1, "the other thread's records reached this one");
    cr_assert_str_eq(mine.records[0].op, "reshape(2, 3)");
    cr_assert_eq(mine.records[0].depth, 0);
    cr_assert_eq(mine.records[0].seq, 0);
    trace_log_free(&mine);
    trace_log_free(&theirs);
    FREE_ALL(y, x);
}

/* Unnamed tensors have no symbolic column, and 1-D shapes keep their
 * comma: (8,). */
Test(trace, unnamed_and_one_dimensional)
{
    capture c;
    tensor *x = arange(SHAPE(2, 4)), *y = NULL, *z = NULL, *w = NULL;
    capture_trace(&c);
    OK(tensor_reshape(x, SIZES(-1), NULL, &y));
    OK(tensor_permute(y, SHAPE(0), &z));
    OK(tensor_reshape(z, SIZES(4, 2), NULL, &w));
    capture_trace_is(&c,
        "reshape(-1)              view  (2, 4) -> (8,)\n"
        "permute(0)               view  (8,) -> (8,)\n"
        "reshape(4, 2)            view  (8,) -> (4, 2)\n");
    FREE_ALL(w, z, y, x);
}

//> 02
Test(trace, linear_layer)
{
    capture c;
    linear l;
    OK(linear_init(&l, "W_q", 4, 6, 1));
    snprintf(l.out_name, sizeof l.out_name, "d_model");
    tensor *x = arange(SHAPE(2, 3, 4)), *y = NULL, *z = NULL;
    OK(tensor_set_names(x, "B, n, d_in"));
    capture_trace(&c);
    OK(linear_forward(&l, x, &y));
    linear_free(&l);
    OK(linear_init(&l, "W_o", 4, 6, 0));
    OK(linear_forward_naive(&l, x, &z));
    capture_trace_is(&c,
        "W_q: x W^T + b           new   (2, 3, 4) -> (2, 3, 6)              (B, n, d_model)\n"
        "W_o: x W^T               new   (2, 3, 4) -> (2, 3, 6)              (B, n, 6)\n");
    FREE_ALL(z, y, x);
    linear_free(&l);
}
//<

/* --- records, blocks and notes ------------------------------------- */

/* A shape with names and no numbers, for records made by hand. */
static tensor shaped(size_t ndim, const size_t *shape, const char *names)
{
    tensor t = tensor_header(ndim, shape);
    if (names)
        OK(tensor_set_names(&t, names));
    return t;
}

//> 06
Test(trace, nested_blocks)
{
    capture c;
    tensor x = shaped(SHAPE(1, 2, 16), "B, n, d_model");
    tensor s = shaped(SHAPE(1, 2, 8, 2), NULL);
    tensor h = shaped(SHAPE(8, 2, 2), NULL);
    capture_trace(&c);
    tensor_trace_begin(&x, TRACE_INPUTS(TRACE_IN(&x)), "multihead");
    tensor_trace_step(TRACE_NEW, &x, &x, "W_q: x W^T");
    tensor_trace_begin(&h, TRACE_INPUTS(TRACE_IN(&x)), "transpose_qkv(h=%d)", 8);
    tensor_trace_step(TRACE_VIEW, &x, &s, "reshape%D", (size_t)4,
               (const long[]){1, 2, 8, -1});
    tensor_trace_note("h = %d heads of %d", 8, 2);
    trace_end();
    tensor_trace_step(TRACE_NEW, &h, &h, "attention");
    trace_end();
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, NULL, 0, NULL, "done");
    tensor_trace_note("back at the left");
    capture_trace_is(&c,
        /*0         1         2         3         4         5         6         7
          01234567890123456789012345678901234567890123456789012345678901234567890 */
        "multihead                      (1, 2, 16) -> (1, 2, 16)            (B, n, d_model)\n"
        "  W_q: x W^T             new   (1, 2, 16) -> (1, 2, 16)            (B, n, d_model)\n"
        "  transpose_qkv(h=8)           (1, 2, 16) -> (8, 2, 2)\n"
        "    reshape(1, 2, 8, -1) view  (1, 2, 16) -> (1, 2, 8, 2)\n"
        "    # h = 8 heads of 2\n"
        "  attention              new   (8, 2, 2) -> (8, 2, 2)\n"
        "done                     new\n"
        "# back at the left\n");
}
//<

//> 06
/* A library step inside a block is indented like any other line. */
Test(trace, library_steps_in_a_block)
{
    capture c;
    tensor *x = arange(SHAPE(1, 2, 16)), *y = NULL;
    tensor h = shaped(SHAPE(8, 2, 2), NULL);
    capture_trace(&c);
    tensor_trace_begin(&h, TRACE_INPUTS(TRACE_IN(x)), "transpose_qkv(h=8)");
    OK(tensor_reshape(x, SIZES(1, 2, 8, -1), NULL, &y));
    trace_end();
    capture_trace_is(&c,
        "transpose_qkv(h=8)             (1, 2, 16) -> (8, 2, 2)\n"
        "  reshape(1, 2, 8, -1)   view  (1, 2, 16) -> (1, 2, 8, 2)\n");
    FREE_ALL(y, x);
}
//<

/* An op wider than its column pushes the rest right, one space after it;
 * so do shapes wider than theirs, two spaces after them.  Labels, ^T and
 * the three joins. */
Test(trace, long_ops_push_columns)
{
    capture c;
    tensor n = shaped(SHAPE(2), "n");
    tensor a = shaped(SHAPE(1, 2, 3, 4), "a, b, c, d");
    tensor q = shaped(SHAPE(10, 4, 20), NULL), k = shaped(SHAPE(10, 6, 20), NULL);
    tensor s = shaped(SHAPE(10, 4, 6), NULL);
    capture_trace(&c);
    tensor_trace_step(TRACE_VIEW, &n, &n, "exactly_twenty_four_wide");
    tensor_trace_step(TRACE_COPY, &n, &n, "twenty_five_chars_wide_op");
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, &a, TRACE_INPUTS(TRACE_IN(&a), TRACE_IN(&a)),
               "op");
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, &s,
               TRACE_INPUTS(TRACE_IN(&q), TRACE_IN_T(&k, 1)), "Q K^T");
    tensor_trace_emit(TRACE_NEW, TRACE_SUM, &q,
               TRACE_INPUTS(TRACE_NAMED(&q, "x"), TRACE_IN(&q)), "add");
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, &n, 0, NULL, "made(%s, %g, %ld, %T)",
               "s", 0.5, -3L, &q);
    capture_trace_is(&c,
        /*0         1         2         3         4         5         6         7
          01234567890123456789012345678901234567890123456789012345678901234567890 */
        "exactly_twenty_four_wide view  (2,) -> (2,)                        (n,)\n"
        "twenty_five_chars_wide_op copy  (2,) -> (2,)                        (n,)\n"
        "op                       new   (1, 2, 3, 4), (1, 2, 3, 4) -> (1, 2, 3, 4)  (a, b, c, d)\n"
        "Q K^T                    new   (10, 4, 20) @ (10, 6, 20)^T -> (10, 4, 6)\n"
        "add                      new   x (10, 4, 20) + (10, 4, 20) -> (10, 4, 20)\n"
        "made(s, 0.5, -3, (10, 4, 20)) new   -> (2,)                             (n,)\n");
}

/* Deep blocks shrink the op column to nothing, but the space after the op
 * stays. */
Test(trace, deep_nesting)
{
    capture c;
    tensor n = shaped(SHAPE(2), NULL);
    capture_trace(&c);
    for (int k = 0; k < 12; k++)
        tensor_trace_begin(NULL, 0, NULL, "b");
    tensor_trace_step(TRACE_VIEW, &n, &n, "deep");
    trace_end();
    tensor_trace_step(TRACE_VIEW, &n, &n, "deep");
    for (int k = 0; k < 11; k++)
        trace_end();
    tensor_trace_step(TRACE_VIEW, &n, &n, "top");
    capture_trace_is(&c,
        "b\n"
        "  b\n"
        "    b\n"
        "      b\n"
        "        b\n"
        "          b\n"
        "            b\n"
        "              b\n"
        "                b\n"
        "                  b\n"
        "                    b\n"
        "                      b\n"
        "                        deep view  (2,) -> (2,)\n"
        "                      deep view  (2,) -> (2,)\n"
        "top                      view  (2,) -> (2,)\n");
}

Test(trace, off_writes_nothing)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *z = NULL, *w = NULL;
    capture_start(&c);
    trace_to(c.f);
    trace_to(NULL);
    cr_assert_not(trace_on());
    OK(tensor_reshape(x, SIZES(3, 2), NULL, &y));
    OK(tensor_permute(x, SHAPE(1, 0), &z));
    OK(tensor_contiguous(z, &w));
    tensor_trace_step(TRACE_VIEW, x, x, "op");
    tensor_trace_begin(NULL, 0, NULL, "block");
    tensor_trace_note("a note");
    trace_end();
    cr_assert_str_eq(capture_end(&c), "");
    capture_free(&c);
    FREE_ALL(w, z, y, x);
}

/* Switching off inside a block and back on keeps the depth: blocks opened
 * and closed while off still count. */
Test(trace, off_and_on_inside_blocks)
{
    capture c;
    tensor n = shaped(SHAPE(1), NULL);
    capture_start(&c);
    trace_to(c.f);
    cr_assert(trace_on());
    tensor_trace_begin(NULL, 0, NULL, "outer");
    tensor_trace_step(TRACE_VIEW, &n, &n, "a");
    trace_to(NULL);
    tensor_trace_begin(NULL, 0, NULL, "inner");
    tensor_trace_step(TRACE_VIEW, &n, &n, "hidden");
    trace_to(c.f);
    tensor_trace_step(TRACE_VIEW, &n, &n, "b");
    tensor_trace_note("in inner");
    trace_end();
    tensor_trace_step(TRACE_VIEW, &n, &n, "c");
    trace_end();
    tensor_trace_step(TRACE_VIEW, &n, &n, "d");
    trace_end(); /* one too many: stays at the left */
    tensor_trace_step(TRACE_VIEW, &n, &n, "e");
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c),
        "outer\n"
        "  a                      view  (1,) -> (1,)\n"
        "    b                    view  (1,) -> (1,)\n"
        "    # in inner\n"
        "  c                      view  (1,) -> (1,)\n"
        "d                        view  (1,) -> (1,)\n"
        "e                        view  (1,) -> (1,)\n");
    capture_free(&c);
}

/* A failed step writes no trace line. */
Test(trace, failures_write_nothing)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL;
    capture_trace(&c);
    cr_assert_neq(tensor_reshape(x, SIZES(4, -1), NULL, &y), GSL_SUCCESS);
    cr_assert_neq(tensor_permute(x, SHAPE(0, 0), &y), GSL_SUCCESS);
    cr_assert_neq(tensor_view(x, SIZES(7), NULL, &y), GSL_SUCCESS);
    mha_debug_fail_alloc_after(0);
    cr_assert_eq(tensor_contiguous(x, &y), GSL_ENOMEM);
    mha_debug_fail_alloc_after(-1);
    capture_trace_is(&c, "");
    tensor_free(x);
}

//> 06
Test(trace, shape_str)
{
    char buf[TRACE_SHAPE_MAX];
    cr_assert_str_eq(trace_dims_str(buf, sizeof buf, 1, (size_t[]){8}), "(8,)");
    cr_assert_str_eq(trace_dims_str(buf, sizeof buf, 3, (size_t[]){1, 2, 16}),
                     "(1, 2, 16)");
    cr_assert_str_eq(trace_dims_str(buf, sizeof buf, 0, NULL), "()");
    /* the largest 4-D shape fits in TRACE_SHAPE_MAX */
    size_t m = SIZE_MAX;
    trace_dims_str(buf, sizeof buf, 4, (size_t[]){m, m, m, m});
    char want[TRACE_SHAPE_MAX];
    snprintf(want, sizeof want, "(%zu, %zu, %zu, %zu)", m, m, m, m);
    cr_assert_str_eq(buf, want);
    /* a short buffer is cut and terminated */
    char small[6];
    cr_assert_str_eq(trace_dims_str(small, sizeof small, 3, (size_t[]){1, 2, 16}),
                     "(1, 2");
}
//<

/* --- records and their observers ------------------------------------ */

//> 06
/* The records of d2l's transpose_qkv: what each one holds. */
Test(trace, records_hold_the_steps)
{
    tensor *x = arange(SHAPE(1, 2, 16)), *y = NULL;
    OK(tensor_set_names(x, "B, n, d_model"));
    trace_log log;
    trace_log_start(&log);
    OK(transpose_qkv(x, 8, &y));
    trace_log_stop(&log);
    cr_assert_eq(log.count, 4);
    const trace_record *r = log.records;
    cr_assert_eq(r[0].kind, TRACE_STEP);
    cr_assert_str_eq(r[0].op, "transpose_qkv(h=8)");
    cr_assert_eq(r[0].depth, 0);
    cr_assert_eq(r[0].n_inputs, 1);
    cr_assert_eq(r[0].inputs[0].shape.id, x->id);
    cr_assert_not(r[0].has_output);
    static const char *const ops[] = {"reshape(1, 2, 8, -1)",
                                      "permute(0, 2, 1, 3)",
                                      "reshape(-1, 2, 2)"};
    static const trace_kind kinds[] = {TRACE_VIEW, TRACE_VIEW, TRACE_VIEW};
    static const size_t out[3][4] = {{1, 2, 8, 2}, {1, 8, 2, 2}, {8, 2, 2, 0}};
    for (size_t i = 1; i < 4; i++) {
        cr_assert_str_eq(r[i].op, ops[i - 1]);
        cr_assert_eq(r[i].kind, kinds[i - 1], "record %zu", i);
        cr_assert_eq(r[i].depth, 1);
        cr_assert_eq(r[i].seq, i);
        cr_assert(r[i].has_output);
        cr_assert_arr_eq(r[i].output.dims, out[i - 1], sizeof out[0]);
        /* each step reads what the one before it made */
        if (i > 1)
            cr_assert_eq(r[i].inputs[0].shape.id, r[i - 1].output.id);
    }
    cr_assert_eq(r[3].output.id, y->id);
    cr_assert_str_eq(r[3].output.names[0], "B*h");
    cr_assert_str_eq(r[3].output.names[2], "d_model/h");
    trace_log_free(&log);
    FREE_ALL(y, x);
}
//<

//> 06
/* Two observers see the same records; the text is what trace_format_text
 * makes of each. */
Test(trace, text_is_one_line_per_record)
{
    capture c;
    tensor *x = arange(SHAPE(2, 4, 6)), *y = NULL;
    trace_log log;
    capture_start(&c);
    trace_to(c.f);
    trace_log_start(&log);
    OK(transpose_qkv(x, 3, &y));
    trace_log_stop(&log);
    trace_to(NULL);
    const char *text = capture_end(&c);
    char expect[4096] = "", line[512];
    for (size_t i = 0; i < log.count; i++) {
        strcat(expect, trace_format_text(&log.records[i], line, sizeof line));
        strcat(expect, "\n");
    }
    cr_assert_eq(log.count, 4);
    cr_assert_str_eq(text, expect);
    cr_assert_str_eq(text,
        "transpose_qkv(h=3)             (2, 4, 6)\n"
        "  reshape(2, 4, 3, -1)   view  (2, 4, 6) -> (2, 4, 3, 2)\n"
        "  permute(0, 2, 1, 3)    view  (2, 4, 3, 2) -> (2, 3, 4, 2)\n"
        "  reshape(-1, 4, 2)      copy  (2, 3, 4, 2) -> (6, 4, 2)\n");
    trace_log_free(&log);
    capture_free(&c);
    FREE_ALL(y, x);
}
//<

Test(trace, json_lines)
{
    capture c;
    tensor *x = arange(SHAPE(1, 2, 16)), *y = NULL;
    OK(tensor_set_names(x, "B, n, d_model"));
    tensor q = tensor_header(SHAPE(2, 3));
    capture_start(&c);
    trace_to_json(c.f);
    OK(tensor_reshape(x, SIZES(1, 2, 8, -1), NULL, &y));
    tensor_trace_emit(TRACE_NEW, TRACE_MATMUL, NULL,
               TRACE_INPUTS(TRACE_NAMED(&q, "q\"1"), TRACE_IN_T(&q, 1)), "Q K^T");
    tensor_trace_note("a \\ note");
    trace_to_json(NULL);
    char expect[1024];
    snprintf(expect, sizeof expect,
        "{\"seq\": 0, \"depth\": 0, \"kind\": \"view\", \"op\": \"reshape(1, 2, 8, -1)\", "
        "\"name\": \"reshape\", \"join\": \"list\", \"inputs\": [{\"shape\": [1, 2, 16], "
        "\"names\": [\"B\", \"n\", \"d_model\"], \"id\": %lu, \"label\": \"\", "
        "\"transposed\": false, \"side\": false}], \"output\": {\"shape\": [1, 2, 8, 2], "
        "\"names\": [\"B\", \"n\", \"\", \"\"], \"id\": %lu}}\n"
        "{\"seq\": 1, \"depth\": 0, \"kind\": \"new\", \"op\": \"Q K^T\", \"name\": \"Q K^T\", "
        "\"join\": \"matmul\", \"inputs\": [{\"shape\": [2, 3], \"names\": [\"\", \"\"], "
        "\"id\": 0, \"label\": \"q\\\"1\", \"transposed\": false, \"side\": false}, {\"shape\": [2, 3], "
        "\"names\": [\"\", \"\"], \"id\": 0, \"label\": \"\", \"transposed\": true, \"side\": false}], "
        "\"output\": null}\n"
        "{\"seq\": 2, \"depth\": 0, \"kind\": \"note\", \"text\": \"a \\\\ note\"}\n",
        x->id, y->id);
    cr_assert_str_eq(capture_end(&c), expect);
    capture_free(&c);
    FREE_ALL(y, x);
}

/* Steps inside a quiet scope are not shown, nested scopes included, and
 * the depth of what follows is right. */
Test(trace, quiet_scopes)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *z = NULL, *w = NULL;
    capture_trace(&c);
    trace_quiet_begin();
    cr_assert_not(trace_on());
    OK(tensor_reshape(x, SIZES(3, 2), NULL, &y));
    trace_quiet_begin();
    tensor_trace_begin(NULL, 0, NULL, "hidden block");
    OK(tensor_permute(x, SHAPE(1, 0), &z));
    trace_quiet_end();
    tensor_trace_note("still quiet");
    trace_quiet_end();
    cr_assert(trace_on());
    OK(tensor_contiguous(z, &w));
    trace_end();
    trace_quiet_end(); /* one too many does no harm */
    tensor_trace_note("shown");
    capture_trace_is(&c,
        "  contiguous()           copy  (3, 2) -> (3, 2)\n"
        "# shown\n");
    FREE_ALL(w, z, y, x);
}

/* QUIET: the steps of a block as STEPs, out of the trace.  x (2, 3)
 * reshaped to (3, 2), then to (-1, cols): cols 4 does not divide 6, so
 * that STEP fails and jumps out of the block to done:. */
static int quiet_steps(const tensor *x, long cols, tensor **y, tensor **z)
{
    int status = GSL_SUCCESS;
    {
        QUIET;
        STEP(tensor_reshape(x, SIZES(3, 2), NULL, y));
        STEP(tensor_reshape(x, SIZES(-1, cols), NULL, z));
    }
    tensor_trace_note("after the block");
done:
    tensor_trace_note("done: %s", status ? "failed" : "ok");
    return status;
}

/* A block left normally: nothing of it shown, the trace listens after. */
Test(trace, quiet_block_left_normally)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *z = NULL, *w = NULL;
    capture_trace(&c);
    OK(quiet_steps(x, 2, &y, &z));
    cr_assert(trace_on());
    OK(tensor_contiguous(z, &w));
    capture_trace_is(&c,
        "# after the block\n"
        "# done: ok\n"
        "contiguous()             copy  (3, 2) -> (3, 2)\n");
    FREE_ALL(w, z, y, x);
}

/* A STEP that fails inside the block leaves it through its cleanup: the
 * trace listens again at done: and after, with its status kept. */
Test(trace, quiet_block_left_by_a_failed_step)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *z = NULL, *w = NULL;
    capture_trace(&c);
    cr_assert_eq(quiet_steps(x, 4, &y, &z), GSL_EBADLEN);
    cr_assert_str_eq(mha_last_error(), "tensor_reshape: shape (-1, 4) is "
                     "invalid for input of size 6 (input shape (2, 3))");
    cr_assert_null(z);
    cr_assert(trace_on());
    OK(tensor_contiguous(y, &w));
    capture_trace_is(&c,
        "# done: failed\n"
        "contiguous()             copy  (3, 2) -> (3, 2)\n");
    FREE_ALL(w, y, x);
}

/* A return from inside a block (QUIET; return f();) ends it too, after
 * the call. */
static int quiet_return(const tensor *x, tensor **y)
{
    QUIET;
    return tensor_permute(x, SHAPE(1, 0), y);
}

/* Quiet blocks nest, with each other and with the pair, as the pair does
 * (quiet_scopes above): quiet until the outermost ends. */
Test(trace, quiet_blocks_nest)
{
    capture c;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *z = NULL, *w = NULL;
    capture_trace(&c);
    {
        QUIET;
        cr_assert_not(trace_on());
        OK(tensor_reshape(x, SIZES(3, 2), NULL, &y));
        {
            QUIET;
            OK(quiet_return(x, &z));
            cr_assert_not(trace_on());
        }
        trace_quiet_begin();
        {
            QUIET;
        }
        cr_assert_not(trace_on());
        trace_quiet_end();
        tensor_trace_note("still quiet");
        cr_assert_not(trace_on());
    }
    cr_assert(trace_on());
    OK(quiet_return(z, &w));
    cr_assert(trace_on());
    tensor_trace_note("shown");
    capture_trace_is(&c, "# shown\n");
    FREE_ALL(w, z, y, x);
}

/* A failed STEP inside a quiet block inside a SCOPE: both close, the
 * record of the scope is shown, and what follows sits at depth 0. */
static int scoped_quiet_failure(const tensor *x, tensor **y)
{
    SCOPE(x, "scoped");
    int status = GSL_SUCCESS;
    {
        QUIET;
        STEP(tensor_reshape(x, SIZES(4, -1), NULL, y));
    }
    tensor_trace_note("not reached");
done:
    tensor_trace_note("done");
    return status;
}

Test(trace, quiet_block_in_a_scope)
{
    trace_log log;
    tensor *x = arange(SHAPE(2, 3)), *y = NULL, *w = NULL;
    trace_log_start(&log);
    cr_assert_eq(scoped_quiet_failure(x, &y), GSL_EBADLEN);
    cr_assert(trace_on());
    OK(tensor_contiguous(x, &w));
    trace_log_stop(&log);
    cr_assert_eq(log.count, 3);
    cr_assert_str_eq(log.records[0].op, "scoped");
    cr_assert_eq(log.records[0].depth, 0);
    cr_assert_str_eq(log.records[1].op, "done");
    cr_assert_eq(log.records[1].depth, 1);
    cr_assert_str_eq(log.records[2].op, "contiguous()");
    cr_assert_eq(log.records[2].depth, 0);
    trace_log_free(&log);
    FREE_ALL(w, x);
}

/* The emitters' one pointer is set only while someone listens on this
 * thread and no quiet scope is open; a SCOPE that runs while nobody
 * listens still opens and closes its level. */
static void scoped_step(const tensor *x)
{
    SCOPE(x, "scoped");
    tensor_trace_step(TRACE_VIEW, x, x, "inside");
}

Test(trace, sink_only_while_listening)
{
    trace_log log;
    tensor *x = arange(SHAPE(2));
    cr_assert_null(trace_sink_now);
    scoped_step(x);
    trace_log_start(&log);
    cr_assert_not_null(trace_sink_now);
    trace_quiet_begin();
    cr_assert_null(trace_sink_now);
    scoped_step(x);
    trace_quiet_end();
    cr_assert_not_null(trace_sink_now);
    scoped_step(x);
    trace_log_stop(&log);
    cr_assert_null(trace_sink_now);
    cr_assert_eq(log.count, 2);
    cr_assert_str_eq(log.records[0].op, "scoped");
    cr_assert_eq(log.records[0].depth, 0);
    cr_assert_str_eq(log.records[1].op, "inside");
    cr_assert_eq(log.records[1].depth, 1);
    trace_log_free(&log);
    FREE_ALL(x);
}

/* RECORD: a function's own record, kept from its first line and
 * delivered as it returns, with *out's shape; none when it fails.  The
 * records of what it calls come first, at the same depth; a RECORD
 * inside another is delivered before it. */
static int recorded_copy(const tensor *x, int fail, tensor **out)
{
    RECORD(x, out, "recorded(%d)", fail);
    *out = NULL;
    if (fail == 1)
        return mha_fail(GSL_EINVAL, "recorded: asked to fail");
    int status = tensor_contiguous(x, out);
    if (!status && fail == 2) {
        tensor_free(*out);
        *out = NULL;
        return mha_fail(GSL_EINVAL, "recorded: failed after its step");
    }
    return status;
}

static int recorded_twice(const tensor *x, tensor **out)
{
    RECORD_OF(TRACE_NEW, TRACE_SUM, TRACE_INPUTS(TRACE_IN(x), TRACE_IN(x)), out,
              "outer %s", "sum");
    tensor *inner = NULL;
    int status = recorded_copy(x, 0, &inner);
    if (!status)
        status = tensor_reshape(inner, SIZES(-1), NULL, out);
    tensor_free(inner);
    return status;
}

Test(trace, record_at_return)
{
    trace_log log;
    tensor *x = NULL, *y = NULL, *z = NULL, *w = NULL;
    OK(tensor_from_array(SHAPE(2, 3), (double[]){1, 2, 3, 4, 5, 6}, &x));
    OK(tensor_permute(x, SHAPE(1, 0), &y)); // (3, 2), not contiguous
    trace_log_start(&log);
    OK(recorded_copy(y, 0, &z));
    cr_assert_eq(recorded_copy(y, 1, &w), GSL_EINVAL);
    cr_assert_null(w);
    cr_assert_eq(recorded_copy(y, 2, &w), GSL_EINVAL);
    cr_assert_null(w);
    tensor_free(z);
    OK(recorded_twice(y, &z));
    trace_log_stop(&log);
    // the copy, then recorded(0) with the copy's shape; the failures
    // leave their copy's record only; then the nested pair
    const char *ops[] = {"contiguous()", "recorded(0)", "contiguous()",
                         "contiguous()", "recorded(0)", "reshape(-1)",
                         "outer sum"};
    cr_assert_eq(log.count, sizeof ops / sizeof ops[0]);
    for (size_t i = 0; i < log.count; i++) {
        const trace_record *r = &log.records[i];
        cr_assert_str_eq(r->op, ops[i]);
        cr_assert_eq(r->depth, 0, "%s", r->op);
        cr_assert(r->has_output, "%s", r->op);
    }
    const trace_record *rec = &log.records[1], *outer = &log.records[6];
    cr_assert_eq(rec->kind, TRACE_NEW);
    cr_assert_eq(rec->n_inputs, 1);
    cr_assert_eq(rec->inputs[0].shape.dims[0], 3);
    cr_assert_eq(rec->output.ndim, 2);
    cr_assert_eq(rec->output.dims[0], 3);
    cr_assert_eq(outer->kind, TRACE_NEW);
    cr_assert_eq(outer->join, TRACE_SUM);
    cr_assert_eq(outer->n_inputs, 2);
    cr_assert_eq(outer->output.ndim, 1);
    cr_assert_eq(outer->output.dims[0], 6);
    trace_log_free(&log);
    FREE_ALL(x, y, z);
}

/* A RECORD line that runs while nobody listens (or in a quiet block)
 * keeps nothing and delivers nothing, even if someone listens by the
 * time its function returns; one that runs while someone listens is
 * dropped if nobody does by then.  Deeper than the kept records go, a
 * record is left out and the ones around it still come. */
static int recorded_deep(const tensor *x, int depth, tensor **out)
{
    RECORD(x, out, "deep %d", depth);
    if (depth == 0)
        return tensor_contiguous(x, out);
    tensor *inner = NULL;
    int status = recorded_deep(x, depth - 1, &inner);
    if (!status)
        status = tensor_contiguous(inner, out);
    tensor_free(inner);
    return status;
}

static int recorded_then_listened(const tensor *x, trace_log *log,
                                  int start, tensor **out)
{
    RECORD(x, out, "switched");
    if (start)
        trace_log_start(log);
    else
        trace_log_stop(log);
    return tensor_contiguous(x, out);
}

Test(trace, record_only_while_listening)
{
    trace_log log;
    tensor *x = arange(SHAPE(2)), *y = NULL;
    OK(recorded_then_listened(x, &log, 1, &y)); // starts listening
    tensor_free(y);
    {
        QUIET;
        OK(recorded_copy(x, 0, &y));
        tensor_free(y);
    }
    OK(recorded_then_listened(x, &log, 0, &y)); // stops listening
    tensor_free(y);
    // the first call's copy alone: its RECORD ran before the log
    // started, the second's copy and record came after it stopped
    cr_assert_eq(log.count, 1);
    cr_assert_str_eq(log.records[0].op, "contiguous()");
    trace_log_free(&log);

    trace_log_start(&log);
    OK(recorded_deep(x, 19, &y)); // 20 records waiting at once
    trace_log_stop(&log);
    size_t deep = 0, copies = 0;
    for (size_t i = 0; i < log.count; i++) {
        deep += !strncmp(log.records[i].op, "deep ", 5);
        copies += !strcmp(log.records[i].op, "contiguous()");
    }
    cr_assert_eq(copies, 20);
    cr_assert_eq(deep, 16, "the 16 outermost are kept");
    cr_assert_str_eq(log.records[log.count - 1].op, "deep 19");
    trace_log_free(&log);
    // and a RECORD after them is kept again
    trace_log_start(&log);
    tensor_free(y);
    OK(recorded_copy(x, 0, &y));
    trace_log_stop(&log);
    cr_assert_eq(log.count, 2);
    cr_assert_str_eq(log.records[1].op, "recorded(0)");
    trace_log_free(&log);
    FREE_ALL(x, y);
}

/* The op text: printf's conversions and the trace's own three. */
Test(trace, op_formats)
{
    trace_log log;
    tensor t = tensor_header(SHAPE(4, 1));
    trace_log_start(&log);
    tensor_trace_note("%s|%5.2f|%zu|%ld|%d|%g|%%|%T|%D|%P|%T.", "a", 3.14159,
               (size_t)7, -8L, 9, 1e-7, &t, (size_t)3,
               (const long[]){2, -1, 5}, (size_t)1, (const size_t[]){0},
               (const tensor *)NULL);
    trace_log_stop(&log);
    cr_assert_eq(log.count, 1);
    cr_assert_str_eq(log.records[0].op, "a| 3.14|7|-8|9|1e-07|%|(4, 1)|(2, -1, 5)|(0)|.");
    trace_log_free(&log);
}

/* %g in an op prints its number exactly; a precision rounds it. */
Test(trace, op_numbers_are_exact)
{
    trace_log log;
    trace_log_start(&log);
    tensor_trace_note("p=%g base=%g third=%g %.3g big=%g", 0.1, 1.0000000000000002,
               1.0 / 3, 1.0 / 3, 1e6);
    trace_log_stop(&log);
    cr_assert_str_eq(log.records[0].op, "p=0.1 base=1.0000000000000002 "
                                        "third=0.3333333333333333 0.333 "
                                        "big=1000000");
    trace_log_free(&log);
}

/* The shortest of %.15g, %.16g, %.17g that reads back as the number. */
Test(trace, number_str)
{
    static const struct {
        double v;
        const char *text;
    } cases[] = {
        {0.1, "0.1"},
        {1.0000000000000002, "1.0000000000000002"},
        {0.9999999999999999, "0.9999999999999999"},
        {1.0 / 3, "0.3333333333333333"},
        {0.1 + 0.2, "0.30000000000000004"}, /* 17 digits */
        {10000, "10000"},
        {1e6, "1000000"},
        {1e-5, "1e-05"},
        {1e300, "1e+300"},
        {-0.0, "0"},
        {-2.5, "-2.5"},
        {INFINITY, "inf"},
        {-INFINITY, "-inf"},
    };
    char buf[TRACE_NUMBER_MAX];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_str_eq(trace_number_str(buf, sizeof buf, cases[i].v), cases[i].text);
        cr_assert(isinf(cases[i].v) || strtod(buf, NULL) == cases[i].v, "%s", buf);
    }
    cr_assert_str_eq(trace_number_str(buf, sizeof buf, NAN), "nan");
}

//> 08
/* A real run emits one record per line the chapters show: chapter 08's
 * trace of d2l's example, line for line, from the records. */
Test(trace, every_step_of_the_module_is_a_record)
{
    multihead m;
    SELF_MODULE(&m, 100, .num_hiddens = 100, .num_heads = 5);
    tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL;
    OK(tensor_alloc(SHAPE(2, 4, 100), &x));
    OK(tensor_alloc(SHAPE(2, 6, 100), &y));
    OK(tensor_from_array(SHAPE(2), (const double[]){3, 2}, &vl));
    tensor_fill(x, 1);
    tensor_fill(y, 1);
    trace_log log;
    trace_log_start(&log);
    OK(multihead_forward(&m, x, y, y, vl, &out, NULL));
    trace_log_stop(&log);
    /* the trace of chapter 08's first section, as its transcript has it */
    FILE *f = fopen("tests/expected/08_multihead_module.txt", "r");
    cr_assert_not_null(f);
    char line[512], mine[512];
    size_t i = 0;
    int in_trace = 0;
    while (fgets(line, sizeof line, f) && i <= log.count) {
        line[strcspn(line, "\n")] = '\0';
        if (!in_trace && strncmp(line, "multihead(h=5)", 14) != 0)
            continue;
        in_trace = 1;
        if (!line[0])
            break;
        cr_assert_lt(i, log.count, "more lines than records at \"%s\"", line);
        cr_assert_str_eq(trace_format_text(&log.records[i], mine, sizeof mine),
                         line, "record %zu", i);
        i++;
    }
    fclose(f);
    cr_assert_eq(i, log.count, "%zu lines, %zu records", i, log.count);
    cr_assert_eq(log.count, 29);
    trace_log_free(&log);
    FREE_ALL(out, vl, y, x);
    multihead_free(&m);
}
//<

//> full
/* --- shape-only tensors ---------------------------------------------- */

//> full
Test(trace, meta_tensors_have_no_numbers)
{
    tensor *x = NULL, *y = NULL, *z = NULL, *w = NULL, *n = NULL;
    OK(tensor_alloc_meta(SHAPE(2, 3, 4), &x));
    cr_assert(tensor_is_meta(x));
    cr_assert_null(x->data);
    tensor_fill(x, 1.0); /* nothing to fill: no crash */
//> 08
    OK(tensor_check_finite(x, "test", "x"));
//<
    OK(tensor_permute(x, SHAPE(0, 2, 1), &y));
    OK(tensor_reshape(y, SIZES(-1, 3), NULL, &z)); /* a "copy", of nothing */
    OK(tensor_narrow(x, 2, 1, 2, &n));
    OK(tensor_contiguous(n, &w));
    cr_assert(tensor_is_meta(y) && tensor_is_meta(z) && tensor_is_meta(w) &&
              tensor_is_meta(n));
    cr_assert_eq(z->shape[0], 8);
    double v;
    FAILS(tensor_get(x, (const size_t[]){0, 0, 0}, &v), GSL_EINVAL,
          "tensor_get: the shape-only tensor (2, 3, 4) has no numbers");
    capture c;
    capture_start(&c);
    tensor_print(c.f, x, 4);
    cr_assert_str_eq(capture_end(&c), "tensor(..., size=(2, 3, 4), device='meta')\n");
    capture_free(&c);
    FREE_ALL(n, w, z, y, x);
}
//<

//> full
/* A shape-only module of a size no machine here could hold in numbers
 * (4.5 GiB of weights, 96 GiB of (8*96, 4096, 4096) scores) runs every
 * step and makes the real run's shapes. */
Test(trace, a_shape_only_module_of_any_size)
{
    multihead m;
    SELF_MODULE(&m, 12288, .num_hiddens = 12288, .num_heads = 96,
                    .shape_only = 1);
    tensor *x = NULL, *out = NULL, *w = NULL;
    OK(tensor_alloc_meta(SHAPE(8, 4096, 12288), &x));
    trace_log log;
    trace_log_start(&log);
    OK(multihead_forward(&m, x, x, x, NULL, &out, &w));
    trace_log_stop(&log);
    cr_assert(tensor_is_meta(out));
    assert_shape(out, SHAPE(8, 4096, 12288));
    cr_assert(tensor_is_meta(w));
    cr_assert_eq(w->shape[1], 96);
    cr_assert_eq(log.count, 25); /* 26 less the repeat of valid_lens */
    char line[512];
    cr_assert_str_eq(trace_format_text(&log.records[5], line, sizeof line),
        "    reshape(-1, 4096, 128) copy  (8, 96, 4096, 128) -> (768, 4096, 128)  (B*h, Lq, d_model/h)");
    trace_log_free(&log);
    FREE_ALL(out, w, x);
    multihead_free(&m);
}
//<
//<

/* --- side inputs and blanks ------------------------------------------ */

//> 03
/* masked_softmax reads valid_lens on the side: the record holds it (the
 * dataflow needs it), the text line leaves it to the op text, and JSON
 * marks it. */
Test(trace, side_inputs_stay_out_of_the_text_line)
{
    tensor *scores = arange(SHAPE(2, 3, 4)), *out = NULL, *lens = NULL;
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    OK(tensor_set_names(scores, "B, Lq, Lk"));
    trace_log log;
    trace_log_start(&log);
    OK(masked_softmax(scores, lens, &out));
    trace_log_stop(&log);
    cr_assert_eq(log.count, 1);
    const trace_record *r = &log.records[0];
    cr_assert_eq(r->n_inputs, 2);
    cr_assert_not(r->inputs[0].side);
    cr_assert(r->inputs[1].side);
    cr_assert_str_eq(r->inputs[1].label, "valid_lens");
    cr_assert_eq(r->inputs[1].shape.id, lens->id);
    char line[512];
    cr_assert_str_eq(trace_format_text(r, line, sizeof line),
        "masked_softmax(valid_lens (2,)) new   (2, 3, 4) -> (2, 3, 4)              (B, Lq, Lk)");
    capture c;
    capture_start(&c);
    trace_print_json(c.f, r);
    const char *json = capture_end(&c);
    cr_assert_not_null(strstr(json, "\"label\": \"valid_lens\", \"transposed\": false, \"side\": true}"),
                       "%s", json);
    cr_assert_not_null(strstr(json, "\"label\": \"\", \"transposed\": false, \"side\": false}"),
                       "%s", json);
    capture_free(&c);
    trace_log_free(&log);
    FREE_ALL(out, lens, scores);
}
//<

//> full
/* --- shapes alone ---------------------------------------------------- */

/* The module's forward pass on one shape: B, Lq, Lk, d_q, d_model, h;
 * valid_lens none, (B,) or (B, Lq); keys and values the queries or not.
 * Keys and values have d_q + 1 and d_q + 2 features unless they are the
 * queries. */
typedef struct meta_case {
    size_t B, Lq, Lk, dq, D, h;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq) */
    int self; /* keys = values = queries (Lk is Lq) */
} meta_case;

//> full
static meta_case meta_cases[] = {
    {2, 4, 6, 100, 100, 5, 1, 0},  /* d2l's example, valid_lens [3, 2] */
    {2, 4, 6, 100, 100, 5, 0, 0},  /* ... without valid_lens */
    {1, 2, 2, 16, 16, 8, 0, 0},    /* B = 1: every split is a view */
    {3, 5, 4, 12, 12, 4, 2, 0},    /* 2-D valid_lens */
    {4, 7, 3, 30, 30, 30, 1, 0},   /* d_model/h = 1: W_o packs its input */
    {2, 3, 3, 8, 8, 2, 0, 1},      /* self-attention */
    {1, 1, 1, 1, 1, 1, 2, 0},      /* ones everywhere */
    {2, 4, 6, 5, 8, 2, 1, 0},      /* d_q differs from d_model */
    {3, 2, 5, 6, 12, 3, 2, 1},     /* self-attention, 2-D valid_lens */
};
//<

//> full
/* The records of multihead_forward for case c: with numbers, or shapes
 * alone (a shape-only module and meta inputs; valid_lens meta too when
 * meta_lens). */
static void run_case(const meta_case *c, int meta, int meta_lens,
                     trace_log *log)
{
    size_t Lk = c->self ? c->Lq : c->Lk;
    size_t dk = c->self ? c->dq : c->dq + 1, dv = c->self ? c->dq : c->dq + 2;
    multihead m;
    multihead_config cfg = {.query_size = c->dq, .key_size = dk,
                            .value_size = dv, .num_hiddens = c->D,
                            .num_heads = c->h, .shape_only = meta};
    OK(multihead_init(&m, &cfg));
    int (*alloc)(size_t, const size_t *, tensor **) =
        meta ? tensor_alloc_meta : tensor_alloc;
    tensor *q = NULL, *k = NULL, *v = NULL, *lens = NULL, *out = NULL;
    OK(alloc(SHAPE(c->B, c->Lq, c->dq), &q));
    if (!c->self) {
        OK(alloc(SHAPE(c->B, Lk, dk), &k));
        OK(alloc(SHAPE(c->B, Lk, dv), &v));
    }
    if (c->lens) {
        size_t shape[2] = {c->B, c->Lq};
        OK(tensor_alloc(c->lens, shape, &lens));
        if (meta && meta_lens) {
            tensor_free(lens);
            OK(tensor_alloc_meta(c->lens, shape, &lens));
        } else {
            for (size_t i = 0; i < tensor_numel(lens); i++)
                lens->data[i] = (double)((i + 1) % (Lk + 1));
        }
    }
    trace_log_start(log);
    OK(multihead_forward(&m, q, c->self ? q : k, c->self ? q : v, lens, &out, NULL));
    trace_log_stop(log);
    cr_assert_not(log->failed);
    cr_assert_eq(tensor_is_meta(out), meta);
    FREE_ALL(out, lens, v, k, q);
    multihead_free(&m);
}
//<

//> full
static void assert_same_shape(const trace_shape *a, const trace_shape *b,
                              const char *what, size_t seq)
{
    char as[TRACE_SHAPE_MAX], bs[TRACE_SHAPE_MAX];
    cr_assert_eq(a->ndim, b->ndim, "record %zu, %s: %s vs %s", seq, what,
                 trace_shape_str(a, as, sizeof as),
                 trace_shape_str(b, bs, sizeof bs));
    for (size_t d = 0; d < a->ndim; d++) {
        cr_assert_eq(a->dims[d], b->dims[d], "record %zu, %s: %s vs %s", seq,
                     what, trace_shape_str(a, as, sizeof as),
                     trace_shape_str(b, bs, sizeof bs));
        cr_assert_str_eq(a->names[d], b->names[d], "record %zu, %s", seq, what);
    }
}
//<

/* ids differ from run to run, but the same tensors must be the same:
 * id a of one run always goes with id b of the other, both ways. */
typedef struct id_map {
    unsigned long a[512], b[512];
    size_t n;
} id_map;

//> full
static void assert_same_id(id_map *m, unsigned long a, unsigned long b,
                           size_t seq)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->a[i] == a || m->b[i] == b) {
            cr_assert(m->a[i] == a && m->b[i] == b,
                      "record %zu: tensor ids %lu and %lu do not correspond",
                      seq, a, b);
            return;
        }
    cr_assert_lt(m->n, 512);
    m->a[m->n] = a;
    m->b[m->n++] = b;
}
//<

//> full
/* The same records: op, kind, depth, join, every shape with its names,
 * labels and flags, and the same tensors flowing between them. */
static void assert_same_records(const trace_log *real, const trace_log *meta)
{
    cr_assert_eq(meta->count, real->count, "%zu records vs %zu", meta->count,
                 real->count);
    id_map ids = {.n = 0};
    char a[1024], b[1024];
    for (size_t i = 0; i < real->count; i++) {
        const trace_record *r = &real->records[i], *s = &meta->records[i];
        cr_assert_str_eq(trace_format_text(s, b, sizeof b),
                         trace_format_text(r, a, sizeof a), "record %zu", i);
        cr_assert_str_eq(s->op, r->op, "record %zu", i);
        cr_assert_eq(s->kind, r->kind, "record %zu: %s", i, r->op);
        cr_assert_eq(s->depth, r->depth, "record %zu: %s", i, r->op);
        cr_assert_eq(s->join, r->join, "record %zu: %s", i, r->op);
        cr_assert_eq(s->n_inputs, r->n_inputs, "record %zu: %s", i, r->op);
        for (size_t j = 0; j < r->n_inputs; j++) {
            const trace_operand *x = &r->inputs[j], *y = &s->inputs[j];
            assert_same_shape(&x->shape, &y->shape, "an input", i);
            cr_assert_str_eq(y->label, x->label, "record %zu", i);
            cr_assert_eq(y->transposed, x->transposed, "record %zu", i);
            cr_assert_eq(y->side, x->side, "record %zu", i);
            assert_same_id(&ids, x->shape.id, y->shape.id, i);
        }
        cr_assert_eq(s->has_output, r->has_output, "record %zu: %s", i, r->op);
        if (r->has_output) {
            assert_same_shape(&r->output, &s->output, "the output", i);
            /* 0: a header for a shape to come, not a tensor */
            if (r->output.id && s->output.id)
                assert_same_id(&ids, r->output.id, s->output.id, i);
        }
    }
}
//<

//> full
ParameterizedTestParameters(trace, shape_only_records_equal_a_real_run)
{
    return cr_make_param_array(meta_case, meta_cases,
                               sizeof meta_cases / sizeof meta_cases[0]);
}
//<

//> full
ParameterizedTest(meta_case *c, trace, shape_only_records_equal_a_real_run)
{
    trace_log real, meta, meta_lens;
    run_case(c, 0, 0, &real);
    run_case(c, 1, 0, &meta);
    run_case(c, 1, 1, &meta_lens);
    cr_assert_gt(real.count, 20);
    assert_same_records(&real, &meta);
    assert_same_records(&real, &meta_lens);
    trace_log_free(&real);
    trace_log_free(&meta);
    trace_log_free(&meta_lens);
}
//<

/* --- the lesson's names at every size ------------------------------- */

/* mha trace's module at one size: B, Lq, Lk, d_model, h, G; each run with
 * and without valid_lens and causal (when every query sees a key), and
 * with RoPE when p = d_model/h is even. */
typedef struct names_case {
    size_t B, Lq, Lk, D, h, G;
} names_case;

/* 1 in every position in turn, then everywhere: B 2, Lq 3, Lk 5, h 4,
 * G 2, p 6 apart from the 1 (D = 1 makes h = G = p = 1 too). */
static names_case names_cases[] = {
    {2, 3, 5, 24, 4, 2}, /* no 1 anywhere */
    {1, 3, 5, 24, 4, 2}, /* B = 1 */
    {2, 1, 5, 24, 4, 2}, /* Lq = 1 */
    {2, 3, 1, 24, 4, 2}, /* Lk = 1 */
    {2, 3, 5, 1, 1, 1},  /* d_model = 1 */
    {2, 3, 5, 6, 1, 1},  /* h = 1 */
    {2, 3, 5, 24, 4, 1}, /* G = 1 */
    {2, 3, 5, 4, 4, 2},  /* p = 1 */
    {1, 1, 1, 1, 1, 1},  /* all 1 */
};

/* One step as the lesson names it: its op (the start of it; "#" for a
 * note) and its symbolic shape ("" for none). */
typedef struct named_step {
    const char *op;
    char sym[64];
} named_step;

typedef struct named_steps {
    named_step s[64];
    size_t n;
} named_steps;

static void step_is(named_steps *e, const char *op, const char *sym)
{
    cr_assert_lt(e->n, 64);
    e->s[e->n].op = op;
    snprintf(e->s[e->n++].sym, sizeof e->s[0].sym, "%s", sym);
}

/* The split of transpose_qkv for positions n into `heads` (h or G) of
 * d_model/h, from (B, n, F). */
static void split_is(named_steps *e, const char *n, const char *heads,
                     const char *F)
{
    char s[64];
    snprintf(s, sizeof s, "(B, %s, %s)", n, F);
    step_is(e, "transpose_qkv", s);
    snprintf(s, sizeof s, "(B, %s, %s, d_model/h)", n, heads);
    step_is(e, "reshape", s);
    snprintf(s, sizeof s, "(B, %s, %s, d_model/h)", heads, n);
    step_is(e, "permute", s);
    snprintf(s, sizeof s, "(B*%s, %s, d_model/h)", heads, n);
    step_is(e, "reshape", s);
}

/* The module's steps in the lesson's names (multihead.h), written out
 * from what each step does: they are the same at every size. */
static void lesson_steps(int grouped, int lens, int causal, int rope,
                         named_steps *e)
{
    const char *kv = grouped ? "G*d_model/h" : "d_model";
    const char *g = grouped ? "G" : "h";
    char s[64];
    e->n = 0;
    step_is(e, "multihead", ""); // three inputs: no one shape to name
    step_is(e, "W_q", "(B, Lq, d_model)");
    if (rope)
        step_is(e, "rope", "(B, Lq, d_model)");
    split_is(e, "Lq", "h", "d_model");
    snprintf(s, sizeof s, "(B, Lk, %s)", kv);
    step_is(e, "W_k", s);
    if (rope)
        step_is(e, "rope", s);
    if (grouped)
        step_is(e, "#", "");
    split_is(e, "Lk", g, kv);
    step_is(e, "W_v", s);
    if (grouped)
        step_is(e, "#", "");
    split_is(e, "Lk", g, kv);
    int rows = causal || (grouped && lens); // one length per query row
    if (rows)
        step_is(e, "per-row lens", "(B, Lq)");
    if (rows || lens) { // a column, h of it side by side, then their merge
        const char *row = rows ? ", Lq" : "";
        snprintf(s, sizeof s, "(B%s)", rows ? ", Lq" : ",");
        step_is(e, "repeat_interleave", s);
        snprintf(s, sizeof s, "(B, 1%s)", row);
        step_is(e, "view", s);
        snprintf(s, sizeof s, "(B, h%s)", row);
        step_is(e, "expand", s);
        snprintf(s, sizeof s, "(B*h%s)", rows ? ", Lq" : ",");
        step_is(e, "reshape", s);
    }
    const char *q = "(B*h, Lq, d_model/h)", *w = "(B*h, Lq, Lk)";
    if (grouped) {
        q = "(B*G, h/G*Lq, d_model/h)";
        w = "(B*G, h/G*Lq, Lk)";
        step_is(e, "grouped heads", "");
        for (int k = 0; k < 2; k++) { // keys, then values
            step_is(e, "view", "(B*G, 1, Lk, d_model/h)");
            step_is(e, "expand", "(B*G, h/G, Lk, d_model/h)");
        }
        step_is(e, "#", "");
        step_is(e, "reshape", q);
        if (rows)
            step_is(e, "reshape", "(B*G, h/G*Lq)");
    }
    step_is(e, "dot_attention", ""); // three inputs, no output: no names
    step_is(e, "Q K^T", w);
    step_is(e, "masked_softmax", w);
    step_is(e, "weights V", q);
    if (grouped)
        step_is(e, "view", "(B*h, Lq, d_model/h)");
    step_is(e, "transpose_output", "(B*h, Lq, d_model/h)");
    step_is(e, "reshape", "(B, h, Lq, d_model/h)");
    step_is(e, "permute", "(B, Lq, h, d_model/h)");
    step_is(e, "reshape", "(B, Lq, d_model)");
    step_is(e, "W_o", "(B, Lq, d_model)");
}

/* The size a name stands for in case c, left to right: "h/G*Lq" is
 * (h / G) * Lq; "1" is 1.  0 for a name the lesson does not use. */
static size_t name_size(const char *name, const names_case *c)
{
    size_t v = 1;
    char op = '*';
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, "*/"), x = 0;
        static const char *const names[] = {"B", "Lq", "Lk", "d_model",
                                            "h", "G", "1"};
        const size_t sizes[] = {c->B, c->Lq, c->Lk, c->D, c->h, c->G, 1};
        for (size_t k = 0; k < 7; k++)
            if (strlen(names[k]) == len && !strncmp(p, names[k], len))
                x = sizes[k];
        if (!x)
            return 0;
        v = op == '*' ? v * x : v / x;
        op = p[len];
        p += len + (p[len] != '\0');
    }
    return v;
}

/* Every line of mha trace's module at every size of the table, in every
 * variant, ends in the lesson's names for its step, the names mean the
 * line's sizes, and the records (which JSON prints) hold them. */
ParameterizedTestParameters(trace, the_lesson_names_at_every_size)
{
    return cr_make_param_array(names_case, names_cases,
                               sizeof names_cases / sizeof names_cases[0]);
}

ParameterizedTest(names_case *c, trace, the_lesson_names_at_every_size)
{
    size_t p = c->D / c->h;
    for (int variant = 0; variant < 8; variant++) {
        int lens = variant & 1, causal = (variant >> 1) & 1;
        int rope = (variant >> 2) & 1;
        if ((causal && c->Lq > c->Lk) || (rope && p % 2))
            continue;
        multihead m;
        SELF_MODULE(&m, c->D, .num_hiddens = c->D, .num_heads = c->h,
                        .kv_heads = c->G, .causal = causal, .rope = rope,
                        .shape_only = 1);
        tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL;
        OK(tensor_alloc_meta(SHAPE(c->B, c->Lq, c->D), &x));
        OK(tensor_alloc_meta(SHAPE(c->B, c->Lk, c->D), &y));
        if (lens) {
            OK(tensor_alloc(SHAPE(c->B), &vl));
            tensor_fill(vl, (double)c->Lk);
        }
        trace_log log;
        trace_log_start(&log);
        OK(multihead_forward(&m, x, y, y, vl, &out, NULL));
        trace_log_stop(&log);

        named_steps e;
        lesson_steps(c->G < c->h, lens, causal, rope, &e);
        char line[1024], sym[TRACE_SHAPE_MAX];
        size_t k = 0; // the step expected next
        for (size_t i = 0; i < log.count; i++, k++) {
            const trace_record *r = &log.records[i];
            trace_format_text(r, line, sizeof line);
            /* a Linear layer first packs an input it cannot read as rows
             * (contiguous(), the names as they were) */
            int packs = !strncmp(r->op, "contiguous", 10) && k > 0;
            if (packs)
                k--;
            cr_assert_lt(k, e.n, "B %zu Lq %zu Lk %zu D %zu h %zu G %zu, "
                         "variant %d: more records than steps at\n%s",
                         c->B, c->Lq, c->Lk, c->D, c->h, c->G, variant, line);
            const char *want = e.s[k].sym;
            if (!packs && !strcmp(e.s[k].op, "#")) {
                cr_assert_eq(r->kind, TRACE_NOTE, "%s", line);
                continue;
            }
            cr_assert(packs || !strncmp(r->op, e.s[k].op, strlen(e.s[k].op)),
                      "record %zu is %s, expected %s", i, r->op, e.s[k].op);
            /* the shape the line names: the output's, else a lone input's */
            const trace_shape *s = r->has_output ? &r->output
                                   : r->n_inputs == 1 ? &r->inputs[0].shape
                                                      : NULL;
            size_t len = strlen(line), wl = strlen(want);
            if (!wl) {
                cr_assert(!s || !*trace_sym_str(s, sym, sizeof sym), "%s",
                          line);
                continue;
            }
            /* the symbolic column ends the line, after two spaces */
            cr_assert(s && len > wl + 2 && !strcmp(line + len - wl, want) &&
                          !strncmp(line + len - wl - 2, "  ", 2),
                      "B %zu Lq %zu Lk %zu D %zu h %zu G %zu, variant %d, "
                      "record %zu: expected %s in\n%s",
                      c->B, c->Lq, c->Lk, c->D, c->h, c->G, variant, i, want,
                      line);
            /* the record's names (JSON's "names") say the same, and each
             * stands for its dimension's size */
            cr_assert_str_eq(trace_sym_str(s, sym, sizeof sym), want, "%s",
                             line);
            for (size_t d = 0; d < s->ndim; d++)
                cr_assert_eq(name_size(s->names[d], c), s->dims[d],
                             "%s: %s is %zu", line, s->names[d], s->dims[d]);
        }
        cr_assert_eq(k, e.n, "B %zu Lq %zu Lk %zu D %zu h %zu G %zu, "
                     "variant %d: %zu steps of %zu", c->B, c->Lq, c->Lk,
                     c->D, c->h, c->G, variant, k, e.n);
        trace_log_free(&log);
        FREE_ALL(out, vl, y, x);
        multihead_free(&m);
    }
}

/* --- the dataflow graph ---------------------------------------------- */

/* The graph trace_write_dot draws of log's steps down to depth (free()
 * it). */
static char *dot_of(const trace_log *log, int depth)
{
    capture c;
    capture_start(&c);
    trace_write_dot(c.f, log, depth);
    return (char *)capture_end(&c);
}

/* The graph down to depth of the shape-only module m (d features) run on
 * queries (2, 4, d), keys and values one tensor (2, 6, d) and valid_lens
 * (3, 2), or with self on the queries alone, three times. */
static char *module_graph(multihead *m, size_t d, int self, int depth)
{
    tensor *q = NULL, *kv = NULL, *lens = NULL, *out = NULL;
    OK(tensor_alloc_meta(SHAPE(2, 4, d), &q));
    OK(tensor_alloc_meta(SHAPE(2, 6, d), &kv));
    OK(tensor_from_array(SHAPE(2), (double[]){3, 2}, &lens));
    trace_log log;
    trace_log_start(&log);
    OK(multihead_forward(m, q, self ? q : kv, self ? q : kv,
                         self ? NULL : lens, &out, NULL));
    trace_log_stop(&log);
    char *dot = dot_of(&log, depth);
    trace_log_free(&log);
    FREE_ALL(out, lens, kv, q);
    return dot;
}

/* d2l's example as `mha trace --valid-lens 3,2` runs it (keys and values
 * one tensor), on shapes alone. */
static char *d2l_graph(int self, int depth)
{
    multihead m;
    SELF_MODULE(&m, 100, .num_hiddens = 100, .num_heads = 5, .shape_only = 1);
    char *dot = module_graph(&m, 100, self, depth);
    multihead_free(&m);
    return dot;
}

Test(trace, dot_of_the_module)
{
    char *dot = d2l_graph(0, 1);
    cr_assert_str_eq(dot,
        "digraph trace {\n"
        "  rankdir=TB;\n"
        "  node [fontname=\"monospace\", fontsize=11];\n"
        "  edge [fontname=\"monospace\", fontsize=9];\n"
        "  in0 [shape=ellipse, label=\"q\"];\n"
        "  in1 [shape=ellipse, label=\"k = v\"];\n"
        "  in2 [shape=ellipse, label=\"valid_lens\"];\n"
        "  s0 [shape=box, label=\"W_q: x W^T\"];\n"
        "  s1 [shape=box, label=\"transpose_qkv(h=5)\"];\n"
        "  s2 [shape=box, label=\"W_k: x W^T\"];\n"
        "  s3 [shape=box, label=\"transpose_qkv(h=5)\"];\n"
        "  s4 [shape=box, label=\"W_v: x W^T\"];\n"
        "  s5 [shape=box, label=\"transpose_qkv(h=5)\"];\n"
        "  s6 [shape=box, label=\"repeat_interleave(5)\"];\n"
        "  s7 [shape=box, label=\"dot_attention(scale 1/sqrt(20))\"];\n"
        "  s8 [shape=box, label=\"transpose_output(h=5)\"];\n"
        "  s9 [shape=box, label=\"W_o: x W^T\"];\n"
        "  in0 -> s0 [label=\"(2, 4, 100)\"];\n"
        "  s0 -> s1 [label=\"(2, 4, 100)\\nnew\"];\n"
        "  in1 -> s2 [label=\"(2, 6, 100)\"];\n"
        "  s2 -> s3 [label=\"(2, 6, 100)\\nnew\"];\n"
        "  in1 -> s4 [label=\"(2, 6, 100)\"];\n"
        "  s4 -> s5 [label=\"(2, 6, 100)\\nnew\"];\n"
        "  in2 -> s6 [label=\"(2,)\"];\n"
        "  s1 -> s7 [label=\"(10, 4, 20)\\ncopy\"];\n"
        "  s3 -> s7 [label=\"(10, 6, 20)\\ncopy\"];\n"
        "  s5 -> s7 [label=\"(10, 6, 20)\\ncopy\"];\n"
        "  s6 -> s7 [label=\"(10,)\\ncopy\"];\n"
        "  s7 -> s8 [label=\"(10, 4, 20)\\nnew\"];\n"
        "  s8 -> s9 [label=\"(2, 4, 100)\\ncopy\"];\n"
        "  out [shape=ellipse, label=\"output\"];\n"
        "  s9 -> out [label=\"(2, 4, 100)\\nnew\"];\n"
        "}\n");
    free(dot);
}

/* Self-attention: one tensor read three times is one input node. */
Test(trace, dot_merges_inputs_with_one_id)
{
    char *dot = d2l_graph(1, 1);
    HOLDS(dot, "  in0 [shape=ellipse, label=\"q = k = v\"];\n",
          "  in0 -> s0 [label=\"(2, 4, 100)\"];\n"
          "  s0 -> s1 [label=\"(2, 4, 100)\\nnew\"];\n"
          "  in0 -> s2 [label=\"(2, 4, 100)\"];\n");
    cr_assert_null(strstr(dot, "in1"), "%s", dot);
    cr_assert_null(strstr(dot, "repeat_interleave"), "%s", dot);
    free(dot);
}

/* One level down the boxes are the single steps: the split's views,
 * its copy, and the products inside dot_attention. */
Test(trace, dot_one_level_down)
{
    char *dot = d2l_graph(0, 2);
    HOLDS(dot, "  s0 [shape=box, label=\"reshape(2, 4, 5, -1)\"];\n",
          "  s0 -> s1 [label=\"(2, 4, 5, 20)\\nview\"];\n",
          "  s1 -> s2 [label=\"(2, 5, 4, 20)\\nview\"];\n",
          /* inputs nobody labelled go by their names */
          "  in0 [shape=ellipse, label=\"(B, Lq, d_model)\"];\n",
          /* Q K^T reads the two splits' copies; valid_lens (B,) goes
           * through repeat_interleave's view, expand and copy, and its
           * copy into the masked softmax */
          "  s12 [shape=box, label=\"Q K^T\"];\n",
          "  s2 -> s12 [label=\"(10, 4, 20)\\ncopy\"];\n",
          "  in3 [shape=ellipse, label=\"(B,)\"];\n",
          "  in3 -> s9 [label=\"(2,)\"];\n",
          "  s9 -> s10 [label=\"(2, 1)\\nview\"];\n",
          "  s10 -> s11 [label=\"(2, 5)\\nview\"];\n",
          "  s11 -> s13 [label=\"(10,)\\ncopy\"];\n");
    free(dot);
}

/* Steps made by hand: a step of views is a view, a step with a copy a
 * copy; notes are not boxes; a step's output is its last child's. */
Test(trace, dot_kinds_of_steps_made_of_steps)
{
    tensor *x = NULL, *a = NULL, *b = NULL, *c = NULL;
    OK(tensor_alloc_meta(SHAPE(2, 3, 4), &x));
    trace_log log;
    trace_log_start(&log);
    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_NAMED(x, "x")), "outer");
    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_IN(x)), "views");
    OK(tensor_permute(x, SHAPE(2, 0, 1), &a));
    tensor_trace_note("just a note");
    trace_end();
    tensor_trace_note("another note");
    tensor_trace_begin(NULL, TRACE_INPUTS(TRACE_IN(a)), "copies");
    OK(tensor_permute(a, SHAPE(1, 0, 2), &b));
    OK(tensor_contiguous(b, &c));
    trace_end();
    trace_end();
    trace_log_stop(&log);
    char *dot = dot_of(&log, 1);
    cr_assert_str_eq(dot,
        "digraph trace {\n"
        "  rankdir=TB;\n"
        "  node [fontname=\"monospace\", fontsize=11];\n"
        "  edge [fontname=\"monospace\", fontsize=9];\n"
        "  in0 [shape=ellipse, label=\"x\"];\n"
        "  s0 [shape=box, label=\"views\"];\n"
        "  s1 [shape=box, label=\"copies\"];\n"
        "  in0 -> s0 [label=\"(2, 3, 4)\"];\n"
        "  s0 -> s1 [label=\"(4, 2, 3)\\nview\"];\n"
        "  out [shape=ellipse, label=\"output\"];\n"
        "  s1 -> out [label=\"(2, 4, 3)\\ncopy\"];\n"
        "}\n");
    free(dot);
    /* nothing at that depth: an empty graph, still a graph */
    dot = dot_of(&log, 5);
    cr_assert_str_eq(dot,
        "digraph trace {\n"
        "  rankdir=TB;\n"
        "  node [fontname=\"monospace\", fontsize=11];\n"
        "  edge [fontname=\"monospace\", fontsize=9];\n"
        "}\n");
    free(dot);
    trace_log_free(&log);
    FREE_ALL(c, b, a, x);
}

/* Quotes and backslashes in an op are escaped for dot. */
Test(trace, dot_escapes_labels)
{
    tensor *x = NULL, *y = NULL;
    OK(tensor_alloc_meta(SHAPE(2), &x));
    OK(tensor_alloc_meta(SHAPE(2), &y));
    trace_log log;
    trace_log_start(&log);
    tensor_trace_step(TRACE_NEW, x, y, "say(\"hi\\\")");
    trace_log_stop(&log);
    char *dot = dot_of(&log, 0);
    HOLDS(dot, "  s0 [shape=box, label=\"say(\\\"hi\\\\\\\")\"];\n");
    free(dot);
    trace_log_free(&log);
    FREE_ALL(y, x);
}

/* A JSON string escapes quotes, backslashes, control characters and <
 * (so that the JSON may sit inside an HTML <script> element). */
Test(trace, json_strings_escaped)
{
    capture cap;
    capture_start(&cap);
    trace_json_string(cap.f, "a\"b\\c\nd</script>");
    cr_assert_str_eq(capture_end(&cap),
                     "\"a\\\"b\\\\c\\u000ad\\u003c/script>\"");
    capture_free(&cap);
}

/* An input read under one name by the module and again by a step inside
 * it (valid_lens, read by multihead and by the per-row lengths of causal
 * or grouped attention) is named once; two names of one tensor join. */
Test(trace, dot_names_an_input_once)
{
    for (int grouped = 0; grouped < 2; grouped++) {
        multihead m;
        SELF_MODULE(&m, 8, .num_hiddens = 8, .num_heads = 4,
                        .kv_heads = grouped ? 2 : 4, .causal = !grouped,
                        .shape_only = 1);
        char *dot = module_graph(&m, 8, 0, 1);
        HOLDS(dot,
              "  in0 [shape=ellipse, label=\"q\"];\n"
              "  in1 [shape=ellipse, label=\"k = v\"];\n"
              "  in2 [shape=ellipse, label=\"valid_lens\"];\n",
              grouped
                  ? "  s6 [shape=box, label=\"per-row lens(valid_lens (2,))\"];\n"
                  : "  s6 [shape=box, label=\"per-row lens(causal, valid_lens (2,))\"];\n",
              "  in2 -> s6 [label=\"(2,)\"];\n");
        free(dot);
        multihead_free(&m);
    }
}
//<
