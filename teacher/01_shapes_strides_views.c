/* Chapter 01, the key: shapes, strides and views.
 *
 * The numbers the answers to chapter 01's exercises quote, computed with
 * the library: strides, views and copies as the trace reports them, and
 * the buffer offsets of a walk in index order.
 */
#include "key.h"

/* A (2, 3, 4) tensor holding 0..23, permuted with (2, 0, 1). */
static void permuted(tensor **x, tensor **p)
{
    CHECK(tensor_alloc(SHAPE(2, 3, 4), x));
    for (size_t i = 0; i < 24; i++)
        (*x)->data[i] = (double)i;
    CHECK(tensor_permute(*x, SHAPE(2, 0, 1), p));
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * Row-major strides: the last axis 1, then $4$, then $3 \cdot 4 = 12$,
     * so `(12, 4, 1)`. `permute(2, 0, 1)` puts old axis 2 first, then 0,
     * then 1, for shape and strides alike: shape `(4, 2, 3)`, strides
     * `(1, 12, 4)`. It is not contiguous: row-major strides for
     * `(4, 2, 3)` would be `(6, 3, 1)`; here the last stride is not 1 and
     * the strides do not decrease.
     */
    tensor *x, *p;
    permuted(&x, &p);
    show_layout("x", x);
    trace_to(stdout);
    tensor *again;
    CHECK(tensor_permute(x, SHAPE(2, 0, 1), &again));
    trace_to(NULL);
    show_layout("permuted", p);
    tensor_free(again);
    tensor_free(x);
    tensor_free(p);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * The permuted tensor is `(4, 2, 3)` with strides `(1, 12, 4)`.
     *
     * - `reshape(4, 6)` keeps axis 0 and merges axes 1 and 2, sizes 2 and
     *   3, strides 12 and 4. The rule asks whether $12 = 4 \cdot 3$: yes,
     *   so it is a **view**, shape `(4, 6)` with strides `(1, 4)`.
     * - `reshape(8, 3)` merges axes 0 and 1, sizes 4 and 2, strides 1 and
     *   12. The rule asks whether $1 = 12 \cdot 2$: no, so it is a **copy**
     *   into a new row-major `(8, 3)` buffer, strides `(3, 1)`.
     *
     * A few lines of C that check it (this program's own):
     *
     * ```c
     * tensor_permute(x, SHAPE(2, 0, 1), &p);
     * trace_to(stdout);
     * tensor_reshape(p, DIMS(4, 6), &a);
     * tensor_reshape(p, DIMS(8, 3), &b);
     * ```
     */
    tensor *x, *p, *a, *b;
    permuted(&x, &p);
    trace_to(stdout);
    CHECK(tensor_reshape(p, DIMS(4, 6), &a));
    CHECK(tensor_reshape(p, DIMS(8, 3), &b));
    trace_to(NULL);
    printf("\n");
    show_layout("reshape(4, 6)", a);
    printf("shares the buffer: %s\n", yes_no(tensor_shares_buffer(a, x)));
    show_layout("reshape(8, 3)", b);
    printf("shares the buffer: %s\n", yes_no(tensor_shares_buffer(b, x)));
    tensor_free(x);
    tensor_free(p);
    tensor_free(a);
    tensor_free(b);
}

/* The offsets of the rows of the merged B*h axis of (B, h, n, p) heads cut
 * from a contiguous (B, n, h*p) tensor, printed on one line. */
static void merged_rows(size_t B, size_t n, size_t h, size_t p)
{
    tensor *x, *split, *heads;
    CHECK(tensor_alloc(SHAPE(B, n, h * p), &x));
    CHECK(tensor_reshape(x, SIZES((long)B, (long)n, (long)h, -1), NULL, &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    printf("B=%zu n=%zu h=%zu p=%zu: strides of (B, h) %zu, %zu; rows of B*h at",
           B, n, h, p, heads->strides[0], heads->strides[1]);
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < h; i++)
            printf(" %zu", b * heads->strides[0] + i * heads->strides[1]);
    printf("\n");
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * After the permute, `(B, h, n, p)` = `(2, 8, 2, 2)` has strides
     * `(32, 2, 16, 1)`, so row $r = 8b + i$ of the merged axis (head $i$
     * of sequence $b$) starts at $32b + 2i$: 0, 2, ..., 14 for sequence 0,
     * then 32, 34, ..., 46 for sequence 1 (the first line below). One
     * stride $s$ would put row $r$ at $rs$: row 1 at 2 forces $s = 2$, and
     * then row 8 would be at 16, not 32. The jump from 14 to 32 is the
     * other sequence's positions in between, so no single stride works and
     * the reshape copies.
     *
     * The table's "view" rows:
     *
     * - `transpose_qkv` 3 with **B = 1**: $b$ is always 0 and the offsets
     *   are $2i$, one stride (the second line).
     * - with **h = 1**: $i$ is always 0 and the offsets are $b \cdot n p$,
     *   the batch stride alone (the third line).
     * - with **n = 1**: the batch stride $n h p$ becomes $h p$, exactly
     *   $p \cdot h$, so the offsets are $p r$ without a jump (the fourth
     *   line): the sequences' heads lie side by side.
     * - `transpose_output` 3 merges $h$ and $p$ of `(B, n, h, p)`, strides
     *   $n p$ and 1. The offsets of the $h p$ features are $i \cdot n p + j$;
     *   one stride needs $n p = p$, that is $n = 1$, or an axis that never
     *   steps, $h = 1$ or $p = 1$.
     * - Splits and permutes never merge axes, so they are always views.
     */
    merged_rows(2, 2, 8, 2);
    merged_rows(1, 2, 8, 2);
    merged_rows(2, 2, 1, 16);
    merged_rows(2, 1, 8, 2);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * Count the index like an odometer, last axis fastest, and add
     * index times stride:
     *
     * ```c
     * for (size_t i0 = 0; i0 < t->shape[0]; i0++)
     *     for (size_t i1 = 0; i1 < t->shape[1]; i1++)
     *         for (size_t i2 = 0; i2 < t->shape[2]; i2++)
     *             for (size_t i3 = 0; i3 < t->shape[3]; i3++)
     *                 printf("%zu ", i0 * t->strides[0] + i1 * t->strides[1] +
     *                                i2 * t->strides[2] + i3 * t->strides[3]);
     * ```
     *
     * `heads` is `(1, 8, 2, 2)` with strides `(32, 2, 16, 1)`: for each
     * head $i$ the walk reads $2i$, $2i + 1$ (position 0), then $2i + 16$,
     * $2i + 17$ (position 1), so the offsets come out as below: all 32,
     * each once, but jumping 16 ahead and back, the walk chapter 01's
     * picture shows. The value read at each offset equals the offset,
     * since `x` holds 0 to 31.
     */
    tensor *x, *split, *heads;
    x = counting_tensor(1, 2, 16);
    CHECK(tensor_reshape(x, DIMS(1, 2, 8, -1), &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    const tensor *t = heads;
    for (size_t i0 = 0; i0 < t->shape[0]; i0++)
        for (size_t i1 = 0; i1 < t->shape[1]; i1++) {
            printf("head %zu:", i1);
            for (size_t i2 = 0; i2 < t->shape[2]; i2++)
                for (size_t i3 = 0; i3 < t->shape[3]; i3++)
                    printf(" %zu", i0 * t->strides[0] + i1 * t->strides[1] +
                                       i2 * t->strides[2] + i3 * t->strides[3]);
            printf("\n");
        }
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
