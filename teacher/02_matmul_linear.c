/* Chapter 02, the key: matrix products and the Linear layer.
 *
 * The numbers the answers to chapter 02's exercises quote: one output of
 * the Linear layer by hand, the flops and weights of chapter 08's four
 * projections, and the row offsets linear_forward looks at.
 */
#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * $y[1, 2, 4] = b_4 + \sum_k W[4, k] \, x[1, 2, k]$: row 4 of `W`
     * against row `(1, 2)` of `x`, which holds 1.5000, 1.6250, 1.7500 and
     * 1.8750.
     * With the printed values of `W` and `b` (rounded to 4 decimals):
     *
     * $$-0.2003 \cdot 1.5 - 0.0148 \cdot 1.625 - 0.2332 \cdot 1.75 + 0.1327 \cdot 1.875 - 0.3654$$
     *
     * The four products and the sum are printed below: -0.8492, as the
     * chapter prints. (`W` and `b` are printed rounded to 4 decimals and
     * the chapter computes with their full values, so a hand computation
     * may differ from the output in its last digit; here it does not.)
     */
    const double w[4] = {-0.2003, -0.0148, -0.2332, 0.1327}, b = -0.3654;
    const double x[4] = {1.5, 1.625, 1.75, 1.875};
    double y = b;
    for (int k = 0; k < 4; k++) {
        printf("W[4, %d] x[1, 2, %d] = %8.4f * %.4f = %9.6f\n", k, k, w[k], x[k],
               w[k] * x[k]);
        y += w[k] * x[k];
    }
    printf("plus b[4] = %.4f:  y[1, 2, 4] = %.6f, to 4 decimals %.4f\n", b, y, y);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * A projection of $R$ rows of $D_{in}$ features to $D_{out}$ takes
     * $2 R \, D_{in} D_{out}$ flops (a multiply and an add per weight and
     * row; the bias adds only $R \, D_{out}$ more and is left out, as in
     * section 4). W_q reads the $2 \cdot 4$ query rows, W_k and W_v the
     * $2 \cdot 6$ key-value rows, W_o the $2 \cdot 4$ rows of the attention
     * output; every weight is $100 \times 100$. The chapter 08 module has
     * no biases (d2l's `bias=False`); with them it would hold 4 vectors of
     * 100 more (below).
     */
    const long B = 2, Lq = 4, Lk = 6, D = 100;
    long wq = 2 * B * Lq * D * D, wk = 2 * B * Lk * D * D, wo = wq;
    printf("W_q: 2*B*Lq*D*D = %ld flops\n", wq);
    printf("W_k: 2*B*Lk*D*D = %ld flops\n", wk);
    printf("W_v: 2*B*Lk*D*D = %ld flops\n", wk);
    printf("W_o: 2*B*Lq*D*D = %ld flops\n", wo);
    printf("total:             %ld flops\n", wq + 2 * wk + wo);
    printf("weights: 4*D*D =   %ld doubles (%ld bytes)\n", 4 * D * D,
           4 * D * D * 8);
    printf("biases, if it had them: 4*D = %ld doubles\n", 4 * D);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * No. With 2 input features, the 16 rows are `heads[0, i, j, :]`, head
     * $i$ and position $j$, and in index order they start at offset
     * $2i + 16j$: 0, 16, 2, 18, ... (below). A matrix for BLAS needs its
     * rows one fixed step apart (its leading dimension). `rows_evenly_spaced`
     * checks this from the inside out: the last axis must have stride 1
     * (it has); the innermost leading axis of size above 1, the positions,
     * sets the step, 16, and the span it covers, $16 \cdot 2 = 32$; the
     * next axis out, the heads, would have to step by that span, but its
     * stride is 2. So it returns 0 and `linear_forward` copies `heads` with
     * `tensor_contiguous` before the one dgemm.
     */
    tensor *x = counting_tensor(1, 2, 16), *split, *heads;
    CHECK(tensor_reshape(x, DIMS(1, 2, 8, -1), &split));
    CHECK(tensor_permute(split, SHAPE(0, 2, 1, 3), &heads));
    show_layout("heads", heads);
    printf("row offsets in index order:");
    for (size_t i = 0; i < 8; i++)
        for (size_t j = 0; j < 2; j++)
            printf(" %zu", i * heads->strides[1] + j * heads->strides[2]);
    printf("\n");
    tensor_free(x);
    tensor_free(split);
    tensor_free(heads);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The work is $2 B L D_{in} D_{out}$ flops, 2.1 GFLOP per call here
     * (below, and section 4 of the chapter); GFLOP/s is that number over
     * the seconds a call takes (time several calls with
     * `clock_gettime(CLOCK_MONOTONIC, ...)` and keep the best). The
     * answer depends on the machine, so the key cannot print it; what to
     * expect is the shape of the result: the naive triple loop reads `W`
     * column by column from memory for every row and runs on one core,
     * while OpenBLAS blocks the product for the caches, uses the vector
     * units and every core, and is one to two orders of magnitude faster.
     * With `BLAS=gsl` (GSL's reference CBLAS, plain loops without blocking)
     * most of the gap closes; `make info` says which CBLAS a build uses.
     */
    const double flops = 2.0 * 8 * 512 * 512 * 512;
    printf("2*B*L*D_in*D_out = %.0f flops = %.1f GFLOP per call\n", flops,
           flops / 1e9);
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * The library's solution is `linear_forward_naive` in
     * [`src/nn/linear.c`](../../src/nn/linear.c) (folded on the chapter's page).
     * In a student's copy, `make grade EXERCISE=linear_forward_naive`
     * grades it. What to look for: the output `(…, D_out)` is allocated
     * with `x`'s leading shape; the loops run over rows, outputs and
     * inputs, with the bias as the starting value; `x` is read through
     * `tensor_at` with the row's multi-index (so a permuted `x` works
     * without a copy), `W` as `W[o, i]` (out_features first, PyTorch's
     * layout).
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
