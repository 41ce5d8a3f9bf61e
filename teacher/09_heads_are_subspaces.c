/* Chapter 09, the key: heads are subspaces.
 *
 * The numbers the answers to chapter 09's exercises quote: section 1's
 * module with heads 0 and 1 swapped, and each head's share of the output.
 */
#include "key.h"

enum { B = 2, Lq = 4, Lk = 6, D = 100, H = 5, P = D / H };

typedef struct {
    multihead m;
    tensor *q, *kv, *lens, *out;
} lesson;

/* Section 1 of chapter 09: the module with biases, its inputs, its output. */
static void section1(lesson *l)
{
    gsl_rng *rng = mha_rng_new(9);
    if (!rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .bias = 1};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, rng);
    tensor_fill_uniform(l->m.W_q.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(l->m.W_k.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(l->m.W_v.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(l->m.W_o.bias, rng, -0.1, 0.1);
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &l->q));
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &l->kv));
    tensor_fill_normal(l->q, rng, 0, 1);
    tensor_fill_normal(l->kv, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &l->lens));
    CHECK(multihead_forward(&l->m, l->q, l->kv, l->kv, l->lens, &l->out, NULL));
    gsl_rng_free(rng);
}

static void lesson_free(lesson *l)
{
    multihead_free(&l->m);
    tensor_free(l->q);
    tensor_free(l->kv);
    tensor_free(l->lens);
    tensor_free(l->out);
}

/* largest |a - b| over largest |b| */
static double relative_diff(const tensor *a, const tensor *b)
{
    double diff = 0, ref = 0;
    for (size_t n = 0; n < tensor_numel(b); n++) {
        diff = fmax(diff, fabs(a->data[n] - b->data[n]));
        ref = fmax(ref, fabs(b->data[n]));
    }
    return diff / ref;
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * Feature $f = ip + j$ ($0 \le j < p$) of $x W_q^\top + b_q$ is
     * $\sum_k x_k W_q[ip + j, k] + b_q[ip + j]$. It reads only row
     * $ip + j$ of $W_q$, which is row $j$ of the block
     * $W_i^{(q)} = W_q[ip : (i+1)p, :]$, and entry $j$ of $b_q[ip : (i+1)p]$:
     * so
     * features $ip$ to $(i+1)p - 1$ are
     * $x (W_i^{(q)})^\top + b_q[ip : (i+1)p]$. The property is that a matrix
     * product is computed column
     * by column (block-wise): $x [A \; B] = [xA \; xB]$, each column of
     * the result depends only on the matching column of the right factor
     * (here, the matching row of $W_q$). Nothing mixes features across
     * heads before the attention; only W_o mixes them afterwards.
     */
}

/* Swap rows [0, P) and [P, 2P) of dim 0 (a weight's rows, a bias), or
 * columns of dim 1, of t. */
static void swap_blocks(tensor *t, size_t dim)
{
    size_t rows = dim == 0 ? P : t->shape[0], cols = dim == 0 ? t->shape[1] : P;
    if (t->ndim == 1) {
        for (size_t j = 0; j < P; j++) {
            double s = t->data[j];
            t->data[j] = t->data[P + j];
            t->data[P + j] = s;
        }
        return;
    }
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            double *a = TENSOR_AT(t, r, c);
            double *b = dim == 0 ? TENSOR_AT(t, r + P, c) : TENSOR_AT(t, r, c + P);
            double s = *a;
            *a = *b;
            *b = s;
        }
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * After the swap, head 0 computes with head 1's old weights and
     * biases, so it produces exactly what head 1 produced, and head 1 what
     * head 0 did. The concatenated heads therefore have their blocks of
     * features $0 \dots p-1$ and $p \dots 2p-1$ swapped. W_o reads block
     * $i$ through its columns $ip$ to $ip + p - 1$, so **swap columns 0 to
     * 19 of W_o with columns 20 to 39** (b_o stays) and the output is the
     * same. Below, the library's run: with W_o also swapped the output
     * equals section 1's to rounding; without, it does not.
     *
     * The heads have no order: any permutation of them, applied to the row
     * blocks of W_q, W_k, W_v (and biases) and to the column blocks of W_o,
     * is the same function. A head's index is only a name, which is why a
     * trained model's "head 3" means nothing in another training run.
     */
    lesson l;
    section1(&l);
    linear *in[3] = {&l.m.W_q, &l.m.W_k, &l.m.W_v};
    for (int k = 0; k < 3; k++) {
        swap_blocks(in[k]->weight, 0);
        swap_blocks(in[k]->bias, 0);
    }
    tensor *out;
    CHECK(multihead_forward(&l.m, l.q, l.kv, l.kv, l.lens, &out, NULL));
    printf("heads 0 and 1 swapped in W_q, W_k, W_v only: relative change %.3f\n",
           relative_diff(out, l.out));
    tensor_free(out);
    swap_blocks(l.m.W_o.weight, 1);
    CHECK(multihead_forward(&l.m, l.q, l.kv, l.kv, l.lens, &out, NULL));
    printf("and columns 0-19 and 20-39 of W_o swapped: relative change below "
           "1e-12: %s\n", yes_no(relative_diff(out, l.out) < 1e-12));
    tensor_free(out);
    lesson_free(&l);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * Leaving head $i$ out of section 4's sum is the same as zeroing
     * columns $ip$ to $ip + p - 1$ of W_o; the change of the output is head
     * $i$'s contribution. Below, for each head, the largest change over
     * the largest entry of the output. They are all of one size (between
     * 0.368 and 0.536 here): none is much less important than the others.
     * That is expected of an untrained module: its heads differ only by
     * the random draws of their weights, so each carries a similar share
     * of the output, and removing any one changes it by a similar amount.
     * Chapter 14 finds, on a trained model, heads that carry the task and
     * heads that can go.
     */
    lesson l;
    section1(&l);
    tensor *wo;
    CHECK(tensor_contiguous(l.m.W_o.weight, &wo));
    for (size_t i = 0; i < H; i++) {
        for (size_t r = 0; r < D; r++)
            for (size_t c = i * P; c < (i + 1) * P; c++)
                *TENSOR_AT(l.m.W_o.weight, r, c) = 0;
        tensor *out;
        CHECK(multihead_forward(&l.m, l.q, l.kv, l.kv, l.lens, &out, NULL));
        printf("without head %zu: largest change / largest |out| = %.3f\n", i,
               relative_diff(out, l.out));
        tensor_free(out);
        CHECK(tensor_copy_into(l.m.W_o.weight, wo));
    }
    tensor_free(wo);
    lesson_free(&l);
}

KEY_MAIN(exercise1, exercise2, exercise3)
