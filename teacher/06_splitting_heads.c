/* Chapter 06, the key: splitting heads.
 *
 * The numbers the answers to chapter 06's exercises quote: the traces of
 * transpose_qkv and transpose_output for the exercise's sizes, where one
 * element lands, and the strides of a case where the merge is a view.
 */
#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * $p = 12/4 = 3$. `transpose_qkv`:
     *
     * 1. reshape `(3, 5, 12)` to `(3, 5, 4, 3)`: a **view** (splitting an
     *    axis);
     * 2. permute to `(3, 4, 5, 3)`: a **view** (always);
     * 3. reshape to `(12, 5, 3)`: a **copy**, since B, h and n are all
     *    above 1 (chapter 01's table).
     *
     * `transpose_output` on that `(12, 5, 3)`:
     *
     * 1. reshape to `(3, 4, 5, 3)`: a **view**;
     * 2. permute to `(3, 5, 4, 3)`: a **view**;
     * 3. reshape to `(3, 5, 12)`: a **copy**, since h, n and p are all
     *    above 1.
     *
     * The library's trace of both, below, says the same; so do answers 2 to
     * 7 (the queries' `transpose_qkv`) and 14 to 17 (`transpose_output`) of
     * the `mha trace --quiz` worksheet.
     */
    tensor *x, *heads, *back;
    CHECK(tensor_alloc(SHAPE(3, 5, 12), &x));
    CHECK(tensor_set_names(x, "B, n, d_model"));
    trace_to(stdout);
    CHECK(transpose_qkv(x, 4, &heads));
    CHECK(transpose_output(heads, 4, &back));
    trace_to(NULL);
    tensor_free(x);
    tensor_free(heads);
    tensor_free(back);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Feature 7 belongs to head $7 / 3 = 2$ (integer division) as its
     * feature $7 \bmod 3 = 1$; example 1's heads are rows $1 \cdot 4$ to
     * $1 \cdot 4 + 3$, so head 2 is row 6. The position stays: `x[1, 3, 7]`
     * lands at `heads[6, 3, 1]`. In general `x[b, t, f]` lands at
     * `heads[b h + f / p, t, f mod p]`.
     *
     * Row 6 is head 2 of example 1: features 6 to 8 of every position of
     * example 1, `x[1, t, 6:9]` for $t = 0, \dots, 4$. Below, `x` holds
     * its own flat offsets ($60 b + 12 t + f$), so each number names its
     * element.
     */
    tensor *x, *heads;
    CHECK(tensor_alloc(SHAPE(3, 5, 12), &x));
    for (size_t i = 0; i < 180; i++)
        x->data[i] = (double)i;
    CHECK(transpose_qkv(x, 4, &heads));
    printf("x[1, 3, 7] = %.0f    heads[6, 3, 1] = %.0f\n\n", *TENSOR_AT(x, 1, 3, 7),
           *TENSOR_AT(heads, 6, 3, 1));
    printf("row 6 of heads:\n");
    for (size_t t = 0; t < 5; t++) {
        printf("  position %zu:", t);
        for (size_t j = 0; j < 3; j++) {
            double v = *TENSOR_AT(heads, 6, t, j);
            size_t o = (size_t)v;
            printf("  %3.0f = x[%zu, %zu, %zu]", v, o / 60, o % 60 / 12, o % 12);
        }
        printf("\n");
    }
    tensor_free(x);
    tensor_free(heads);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * `x` is `(2, 1, 12)` with strides `(12, 12, 1)`. The split to
     * `(2, 1, 3, 4)` has strides `(12, 12, 4, 1)`; the permute to
     * `(B, h, n, p)` = `(2, 3, 1, 4)` has strides `(12, 4, 12, 1)`. Merging
     * B (stride 12) and h (stride 4, size 3) needs $12 = 4 \cdot 3$: it
     * holds, because with $n = 1$ the batch stride $n h p$ is just $h p$.
     * One stride, 4, walks all $B h = 6$ rows (offsets 0, 4, ..., 20), so
     * the reshape is a view and the result shares `x`'s buffer. `mha trace
     * --batch 2 --queries 1 --hiddens 12 --heads 3` shows the same `view`
     * on the queries' last reshape (the keys' has $n = 6$, `--kv`'s
     * default, and copies).
     */
    tensor *x, *split, *heads, *flat;
    CHECK(tensor_alloc(SHAPE(2, 1, 12), &x));
    CHECK(tensor_reshape(x, DIMS(2, 1, 3, -1), &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    show_layout("x", x);
    show_layout("split", split);
    show_layout("permuted", heads);
    trace_to(stdout);
    CHECK(tensor_reshape(heads, DIMS(-1, 1, 4), &flat));
    trace_to(NULL);
    show_layout("merged", flat);
    printf("shares x's buffer: %s\n", yes_no(tensor_shares_buffer(flat, x)));
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
    tensor_free(flat);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The library's solutions are `transpose_qkv` and `transpose_output`
     * in [`src/nn/heads.c`](../../src/nn/heads.c) (folded on the
     * chapter's page); `make grade EXERCISE=transpose_qkv` and
     * `EXERCISE=transpose_output` grade a student's. The usual mistakes:
     * reshaping straight to `(B*h, n, p)` (section 3 of the chapter: the
     * shapes are right and the heads are wrong, and a test with B = 1 and
     * n = 1 cannot see it); a permute of `(0, 2, 1, 3)` forgotten in
     * `transpose_output`; the intermediate tensors not freed (each reshape
     * and permute returns a new header that must be freed, views
     * included); and d_model not divisible by h reported as anything but
     * `GSL_EBADLEN` with a message naming both numbers.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
