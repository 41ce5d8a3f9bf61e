/* Chapter 07, the key: valid_lens per head.
 *
 * The numbers the answers to chapter 07's exercises quote: the repeated
 * valid_lens and the scores' shape for the exercise's sizes, and tile
 * against repeat_interleave.
 */
#include "key.h"

static void print_list(const char *label, const double *v, size_t n)
{
    printf("%s", label);
    for (size_t i = 0; i < n; i++)
        printf(" %.0f", v[i]);
    printf("\n");
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * `repeat_valid_lens` turns the `(3,)` lengths into `(B*h,)` = `(12,)`,
     * each length 4 times in a row, and the scores they mask are
     * `(B*h, Lq, Lk)` = `(12, 5, 5)` (the trace below; answers 12 and 14 of
     * the worksheet with `--valid-lens 2,5,3`). With a `(3, 5)` `valid_lens` (one length per query)
     * the repeated one is `(12, 5)`, each row 4 times, and the scores are
     * still `(12, 5, 5)`: the mask's shape changes, not the scores'.
     */
    shape_trace(3, 5, 5, 12, 4, 0, (double[]){2, 5, 3});
    printf("\n");
    tensor *lens, *rep, *lens2, *rep2;
    CHECK(tensor_from_array(SHAPE(3), (double[]){2, 5, 3}, &lens));
    CHECK(repeat_valid_lens(lens, 4, &rep));
    print_list("repeated [2, 5, 3]:", rep->data, 12);
    CHECK(tensor_alloc(SHAPE(3, 5), &lens2));
    tensor_fill(lens2, 5);
    CHECK(repeat_valid_lens(lens2, 4, &rep2));
    show_layout("repeated (3, 5) valid_lens", rep2);
    tensor_free(lens);
    tensor_free(rep);
    tensor_free(lens2);
    tensor_free(rep2);
}

/* repeat_interleave and tile of lens (B,) for h heads, and the rows where
 * they differ. */
static void compare(const double *lens, size_t B, size_t h)
{
    double rep[16], tile[16];
    size_t differ = 0;
    for (size_t r = 0; r < B * h; r++) {
        rep[r] = lens[r / h];
        tile[r] = lens[r % B];
        differ += rep[r] != tile[r];
    }
    printf("B = %zu, h = %zu:\n", B, h);
    print_list("  repeat_interleave:", rep, B * h);
    print_list("  tile:             ", tile, B * h);
    printf("  rows that differ: %zu\n", differ);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Row $r$ of the `(B*h,)` list is head $r \bmod h$ of example
     * $\lfloor r/h \rfloor$. `repeat_interleave` gives it `lens[r / h]`,
     * `tile` gives it `lens[r mod B]`. They agree for every list of lengths
     * exactly when $\lfloor r/h \rfloor = r \bmod B$ for every row, which
     * holds when **B = 1** (both are 0) or **h = 1** (both are $r$); for
     * $B, h \ge 2$ row 1 already differs (0 against 1). With B = 1 there is
     * one length, and both lists are that length $h$ times: a test with
     * B = 1 passes with the bug, so the tests (and section 2) use B = 2 and
     * different lengths.
     */
    compare((double[]){3}, 1, 4);
    compare((double[]){3, 2}, 2, 1);
    compare((double[]){3, 2}, 2, 3);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * In a head-major layout, row $r = i B + b$ belongs to head
     * $i = \lfloor r/B \rfloor$ of example $b = r \bmod B$, and needs that
     * example's length: `rep[r] = lens[r mod B]`. That is `tile`: the whole
     * list of B lengths, repeated h times (`[3, 2, 3, 2, 3, 2]` for
     * `[3, 2]` and h = 3). Which one is right depends only on how the
     * batch rows were laid out: chapter 06's `transpose_qkv` is batch-major
     * ($b h + i$), so it needs `repeat_interleave`; a module that put the
     * head first in its batch rows would need `tile`.
     */
    double lens[2] = {3, 2}, rep[6];
    for (size_t r = 0; r < 6; r++)
        rep[r] = lens[r % 2];
    print_list("head-major rows i*B + b of [3, 2], h = 3:", rep, 6);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The library's solution is `repeat_valid_lens` in
     * [`src/nn/heads.c`](../../src/nn/heads.c) (folded on the chapter's
     * page); `make grade EXERCISE=repeat_valid_lens` grades a student's.
     * Points to check: a `(B,)` input gives `(B*h,)` and a `(B, Lq)` input
     * gives `(B*h, Lq)`, each row repeated h times in place
     * (`repeat_interleave`, not `tile`); any other number of dimensions is
     * refused with a message; the input is only read.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
