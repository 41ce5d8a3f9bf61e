/* Chapter 02: matrix products with GSL BLAS, and the Linear layer.
 *
 * Shows one matrix product by hand and by gsl_blas_dgemm, a transposed
 * read, and linear_forward over a (B, L, D_in) batch in one dgemm, checked
 * against plain loops.  Run it with `make ch02`; the prose is
 * docs/02_*.md.
 */

/*md
 * Every learned step of multi-head attention is a Linear layer. *Learned*
 * means that the layer's numbers, its weight $W$ and bias $b$, are not
 * written by hand: they start random and are fitted to examples while the
 * model is *trained* (chapter 13 trains one). The queries, keys and values
 * are each *[projected](glossary.md#projection)* by one ($W_q$, $W_k$, $W_v$): every row is multiplied
 * by the layer's weight, which turns it into a row of new features, each a
 * learned weighted sum of the old ones. The heads are
 * mixed at the end by a fourth ($W_o$). A Linear layer maps each row
 * $x$ of $D_{in}$ features to $D_{out}$ features:
 *
 * $$y = x W^\top + b, \qquad W \in \mathbb{R}^{D_{out} \times D_{in}},\; b \in \mathbb{R}^{D_{out}}$$
 *
 * $W$ is stored as PyTorch stores it, one row per output feature, so output
 * feature $o$ is the dot product of $x$ with row $o$ of $W$, plus $b_o$.
 *
 * One convention holds for the whole book: a vector is a *row*, as in
 * PyTorch. $x$ is a row of $D_{in}$ numbers, $y$ a row of $D_{out}$, and a
 * batch of vectors is a matrix with one vector per row, so the same formula
 * $y = x W^\top + b$ holds for one vector or for a whole batch. Books that use
 * column vectors write $W x$ instead; it is the same product, transposed.
 *
 * For short sequences these four projections are most of the work of multi-head
 * attention, so they must be fast. The trick is the one of chapter 01: a
 * `(B, L, D_in)` tensor is also, without any copy, a `(B*L, D_in)` matrix. So a
 * whole batch of sequences goes through the layer in a single call to BLAS's
 * matrix product, `dgemm`, which GSL wraps as `gsl_blas_dgemm`.
 *
 * Next, chapter 03 turns scores into weights with a softmax. Chapter 04 then
 * uses two more matrix products per example: $QK^\top$ and weights times $V$.
 */

#include <gsl/gsl_blas.h>

#include "lesson.h"

/* Print a GSL matrix with `decimals` digits, one row per line. */
static void print_matrix(const char *name, const gsl_matrix *m, int decimals)
{
    printf("%s =\n", name);
    for (size_t i = 0; i < m->size1; i++) {
        printf("  [");
        for (size_t j = 0; j < m->size2; j++)
            printf("%s%*.*f", j ? ", " : "", decimals + 5, decimals,
                   gsl_matrix_get(m, i, j));
        printf("]\n");
    }
}

static void one_product(void)
{
    section("1. One matrix product, by hand and by dgemm");
    /*md
     * An entry of a matrix product is a dot product:
     * $c_{ij} = \sum_k a_{ik} b_{kj}$, row $i$ of `a` against column $j$ of
     * `b`. The output shows two of them worked out, `c[0, 0] = 58` and
     * `c[1, 1] = 154`. For `a` of shape `(m, k)` and `b` of shape `(k, n)` that
     * is $m \cdot n$ dot products of length $k$: $2mnk$ floating-point
     * operations (*[flops](glossary.md#flop)*: a multiply and an add per term), here
     * $2 \cdot 2 \cdot 2 \cdot 3 = 24$.
     *
     * BLAS (Basic Linear Algebra Subprograms) is the standard library
     * interface for vector and matrix arithmetic, and `dgemm` is its
     * general matrix product on doubles. GSL wraps it as `gsl_blas_dgemm`,
     * which computes $c = \alpha\, a b + \beta\, c$ in one call; with
     * $\alpha = 1$ and $\beta = 0$ that is just the product.
     * `gsl_matrix_view_array` does for GSL what a view does in chapter 01: it
     * wraps our plain C arrays as matrices (pointer, rows, columns, row
     * stride) without copying them.
     */
    double a_data[] = {1, 2, 3,
                       4, 5, 6};   // a is (2, 3)
    double b_data[] = {7, 8,
                       9, 10,
                       11, 12};    // b is (3, 2)
    double c_data[4] = {0};        // c is (2, 2)
    gsl_matrix_view a = gsl_matrix_view_array(a_data, 2, 3);
    gsl_matrix_view b = gsl_matrix_view_array(b_data, 3, 2);
    gsl_matrix_view c = gsl_matrix_view_array(c_data, 2, 2);
    print_matrix("a", &a.matrix, 0);
    print_matrix("b", &b.matrix, 0);
    printf("\nc[0, 0] = 1*7 + 2*9 + 3*11   = %g\n"
           "c[1, 1] = 4*8 + 5*10 + 6*12  = %g\n\n",
           1.0 * 7 + 2 * 9 + 3 * 11, 4.0 * 8 + 5 * 10 + 6 * 12);
    CHECK(gsl_blas_dgemm(CblasNoTrans, CblasNoTrans, 1.0, &a.matrix,
                         &b.matrix, 0.0, &c.matrix));
    print_matrix("c = a b", &c.matrix, 0);
}

static void transposes_are_free(void)
{
    section("2. Transposes are free");
    /*md
     * The layer needs $x W^\top$, but $W$ is stored as `(D_out, D_in)`. There
     * is no need to build the transpose: `CblasTrans` tells dgemm to read `W`'s
     * rows as columns. Check the output by hand: row 0 of `W` is `[1, 0, -1]`,
     * so $y_0 = 1 \cdot 1 + 2 \cdot 0 + 3 \cdot (-1) = -2$; row 1 is
     * `[2, 1, 0]`, so $y_1 = 4$. A transposed read costs nothing extra, which
     * is why the library keeps PyTorch's layout instead of storing $W^\top$.
     */
    double w_data[] = {1, 0, -1,
                       2, 1, 0};   // w is (D_out = 2, D_in = 3)
    double x_data[] = {1, 2, 3};   // x is (1, D_in = 3)
    double y_data[2] = {0};        // y is (1, D_out = 2)
    gsl_matrix_view w = gsl_matrix_view_array(w_data, 2, 3);
    gsl_matrix_view xv = gsl_matrix_view_array(x_data, 1, 3);
    gsl_matrix_view yv = gsl_matrix_view_array(y_data, 1, 2);
    CHECK(gsl_blas_dgemm(CblasNoTrans, CblasTrans, 1.0, &xv.matrix,
                         &w.matrix, 0.0, &yv.matrix));
    print_matrix("W", &w.matrix, 0);
    print_matrix("x", &xv.matrix, 0);
    print_matrix("x W^T", &yv.matrix, 0);
    printf("check: 1*1 + 2*0 + 3*(-1) = -2 and 1*2 + 2*1 + 3*0 = 4\n");
}

static void linear_layer(void)
{
    section("3. The Linear layer over (B, L, D_in)");
    /*md
     * Now the real layer. `x` is `(2, 3, 4)`: B = 2 sequences of L = 3
     * positions with 4 features, the numbers `-1, -0.875, ...` in steps of
     * `0.125`. `linear_forward` ignores how the leading axes are split; it sees
     * $2 \cdot 3 = 6$ rows of 4 features, wraps `x`'s own memory as a `(6, 4)`
     * GSL matrix, and makes one dgemm with the `(5, 4)` weight. The result is
     * written straight into `y`, a new `(2, 3, 5)` tensor; the trace line says
     * `new` because these are new numbers, not a view.
     *
     * `W` and `b` start as PyTorch starts them: each number drawn uniformly
     * from $[-1/\sqrt{D_{in}}, 1/\sqrt{D_{in}}]$, here with random seed 2. (A
     * random seed is the number that starts the random-number generator: the
     * same seed draws the same numbers on every run, which is what lets the
     * transcript be checked.)
     *
     * The layer is a struct: its name, its sizes, the weight, the bias
     * (`NULL` for a layer without one) and the name the trace gives the
     * output's last axis:
     *
     * @show src/nn/linear.h linear
     *
     * The layer is written in two parts, as every function this book
     * teaches as a whole. Its *steps* hold only what it computes, one
     * call each: `x` as a `(6, 4)` matrix, `W` as `(5, 4)`, a new `y`,
     * and the product. `STEP` runs a call and keeps what it returns in
     * `status`; if that is an error, it jumps to `done:`, where the
     * function frees what it made (`y` too) and returns the error. The
     * function's first line, `RECORD`, says what the trace's line will be (here
     * `W: x W^T + b`, from `x` to `y`: the layer's name, then the
     * formula); the line is printed as the function returns with `y`,
     * after the lines of any step inside, and not at all when it fails:
     *
     * @show src/nn/linear.c linear_steps
     *
     * The product writes `b` into every row of `y` first, so that one
     * dgemm adds $x W^T$ onto it (GSL's `beta = 1`:
     * $y \leftarrow x W^T + 1 \cdot y$). In the sums, the bias still comes
     * last: dgemm adds up
     * each output's products, then adds that sum to the bias already in
     * `y`. `TENSOR_MATRIX(xm, 0, 0)` is GSL's view of the one matrix
     * `tensor_as_rows` made of `x` (a batch of matrices has more; chapter
     * 04's products read matrix `(b, 0)` of each example `b`).
     * `tensor_as_rows` and the other ways to read a tensor as GSL
     * matrices are this chapter's, shown whole at the end of this page:
     *
     * @show src/nn/linear.c product
     *
     * The *door*, `linear_forward`, is the function a program calls. It
     * checks the layer and `x` once (`linear_check`: the weight and bias
     * still have the shapes the layer was made with, and `x`'s last
     * dimension is `in_features`), runs the steps, and when a step fails
     * adds the layer's name to the message. Its messages start with the
     * function a program called and the layer's name, `linear_forward W:`.
     * A module that has checked its layers at its own door (chapter 08)
     * calls `linear_steps` directly; its messages then name the module,
     * `multihead W_o: weight has shape ...`:
     *
     * @show src/nn/linear.c linear_forward
     *
     * @show src/nn/linear.c linear_check
     *
     * Check one output by hand. Row 0 of `x` is `[-1, -0.875, -0.75, -0.625]`,
     * row 0 of `W` is `[-0.0640, -0.3149, -0.4741, 0.4315]` and $b_0 = 0.1211$:
     *
     * $$0.1211 + 0.0640 + 0.2755 + 0.3556 - 0.2697 = 0.5465$$
     *
     * which is `y[0, 0, 0]`. There is a pattern to see too: each row of `x` is
     * the previous row plus $0.5$ in every feature, so each row of `y` is the
     * previous row plus $0.5 \times$ (the sum of each row of `W`). For output 0
     * that is $0.5 \cdot (-0.4215) = -0.2107$: 0.5465, 0.3358, 0.1251, ...
     *
     * The picture draws `y`, one panel per sequence, rows the positions and
     * columns the 5 output features. Unlike attention weights these numbers
     * are signed, so this page's colour scale runs from the smallest (dark
     * purple) to the largest (yellow), and 0 has no colour of its own. Each
     * column changes by the same step from row to row, and sequence 1 goes on
     * where sequence 0 stops: the pattern above.
     *
     * The library keeps the slow version too. It does the same sums with three
     * plain loops, and the tests hold the fast path to it. Writing it is
     * exercise 5; its tests check that every row of a batch gets
     * `bias[o]` plus the sum of `x[r, i] W[o, i]`, that a layer without a
     * bias (`l->bias` is NULL) adds nothing, that a permuted view of `x`
     * works (so `x` is read through `tensor_at`, not as `x->data` in
     * order), that an `x` whose last dimension is not `in_features` is
     * refused as `linear_forward` refuses it (`GSL_EBADLEN`, `*y` NULL, a
     * message naming both sizes), and that a failed allocation returns
     * `GSL_ENOMEM` with `*y` NULL and nothing left allocated.
     *
     * @show src/nn/linear.c linear_forward_naive
     *
     * The last line of the output compares the two. They agree to below
     * $10^{-13}$, not exactly: BLAS may add the terms of a dot product in
     * another order, and floating-point addition is not associative.
     */
    gsl_rng *rng = mha_rng_new(2);
    if (!rng)
        exit(1);
    linear layer;
    size_t D_in = 4, D_out = 5;
    CHECK(linear_init(&layer, "W", D_in, D_out, 1));
    linear_name_output(&layer, NAMES(D_out)); // y's last dimension is D_out
    linear_reset_pytorch(&layer, rng);
    printf("W:\n");
    tensor_print(stdout, layer.weight, 4);
    printf("b:\n");
    tensor_print(stdout, layer.bias, 4);

    tensor *x, *y, *y_naive;
    size_t B = 2, L = 3;
    CHECK(tensor_alloc(SHAPE(B, L, D_in), &x));
    CHECK(tensor_set_names(x, NAMES(B, L, D_in)));
    tensor_fill_arange(x, -1.0, 0.125);
    printf("x:\n");
    tensor_print(stdout, x, 4);
    printf("\n");
    trace_to(stdout);
    CHECK(linear_forward(&layer, x, &y)); // y is (B, L, D_out)
    trace_to(NULL);
    printf("\ny = x W^T + b:\n");
    tensor_print(stdout, y, 4);
    const char *titles[] = {"y[0], sequence 0", "y[1], sequence 1"};
    heatmap_options opt = {.titles = titles, .ntitles = 2,
                           .xlabel = "output feature", .ylabel = "position",
                           .palette = HEATMAP_VIRIDIS};
    printf("\n");
    draw_heatmap(y, &opt, "02_linear");

    CHECK(linear_forward_naive(&layer, x, &y_naive));
    printf("\nlargest |dgemm - loops| below 1e-13: %s\n",
           yes_no(largest_abs_diff(y, y_naive) < 1e-13));
    tensor_free(x);
    tensor_free(y);
    tensor_free(y_naive);
    linear_free(&layer);
    gsl_rng_free(rng);
}

static void what_it_costs(void)
{
    section("4. What it costs");
    /*md
     * The flop count is the one of section 1 with $m = B \cdot L$,
     * $k = D_{in}$, $n = D_{out}$: $2 \cdot B L D_{in} D_{out}$, 240 here.
     * With B = 8, L = 512 and D = 512, one projection is 2.1 GFLOP (a GFLOP is
     * $10^9$ flops), and multi-head attention has four of them: 8.6 GFLOP
     * before any attention is computed. Memory: the weight is
     * $D_{out} D_{in}$ doubles (2 MiB for 512 × 512), and the output is a new
     * $B L D_{out}$ tensor (16 MiB here). The input is not copied.
     *
     * The naive loops do the same flops, but an optimized dgemm (OpenBLAS here,
     * see `make info`) runs them in blocks that fit the processor's cache (its
     * small, fast memory) on vector units (which do several multiply-adds at
     * once) and is many times faster on large matrices. That is why the layer
     * must be one big dgemm.
     */
    double projection = 2.0 * 8 * 512 * 512 * 512 / 1e9;
    printf("toy:                     2*B*L*D_in*D_out = %d flops\n",
           2 * 2 * 3 * 4 * 5);
    printf("B = 8, L = D = 512:      %.1f GFLOP per projection, "
           "%.1f GFLOP for four\n", projection, 4 * projection);
}

int main(void)
{
    mha_program_init();
    one_product();
    transposes_are_free();
    linear_layer();
    what_it_costs();
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Compute `y[1, 2, 4]` by hand from the printed `W`, `b` and `x` and compare
 *    with the output (-0.8492).
 * 2. The multi-head module of chapter 08 has B = 2, 4 queries, 6 key-value
 *    pairs and `d_model` = 100. How many flops do its four projections take
 *    (W_q on the queries, W_k and W_v on the keys and values, W_o on the
 *    output), and how many doubles do their weights hold?
 * 3. Chapter 01's `heads`, shape `(1, 8, 2, 2)` with strides `(32, 2, 16, 1)`,
 *    is fed to a Linear layer with 2 input features. Can `linear_forward` read
 *    it as a matrix of 16 rows without a copy? Read `rows_evenly_spaced` in
 *    `src/tensor/matrices.c` (shown whole at the end of this page)
 *    and explain its answer.
 * 4. Time `linear_forward` against `linear_forward_naive` for B = 8, L = 512,
 *    D_in = D_out = 512 (a few lines at the end of `main` in
 *    `chapters/02_matmul_linear.c`, each call between two
 *    `clock_gettime(CLOCK_MONOTONIC, ...)` readings from `<time.h>`; `make
 *    ch02` runs it, `git checkout chapters/` undoes it). How many GFLOP/s
 *    does each reach? Run `make info` to see which BLAS you measured.
 * 5. Coding: in the handout (`make handout`), `linear_forward_naive` is a
 *    blank. Write it with three plain loops, reading `x` through `tensor_at`
 *    so that any strides work. In the handout, `make grade
 *    EXERCISE=linear_forward_naive` tells you when it passes.
 */
