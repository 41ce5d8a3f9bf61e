/* Chapter 05, the key: additive attention.
 *
 * The numbers the answers to chapter 05's exercises quote: section 2's toy
 * with W_q and W_k zeroed, and the memory of an additive pooling per head.
 */
#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The additive pooling takes them as they are: `W_q`, of shape
     * $(H, d_q)$, maps a query of $d_q$ features to $H$, and `W_k`, of
     * shape $(H, d_k)$, maps a key of $d_k$ features to the same $H$, where
     * they can be added. In section 1, `W_q` is `(8, 20)` and `W_k` is
     * `(8, 2)`. The dot product needs $q$ and $k$ of one size. Multi-head
     * attention (chapter 08) gets that from its projections: W_q, of shape
     * `(num_hiddens, query_size)`, and W_k, of shape
     * `(num_hiddens, key_size)`, map queries and keys of any sizes to the
     * same `num_hiddens` features, which each head cuts into pieces of
     * `num_hiddens / h`; the dot product of each head then compares pieces
     * of equal size.
     */
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * With `W_q` and `W_k` zero (and no biases: the layers have none),
     * every feature is $\tanh(0 + 0) = 0$, so every score is $w_v \cdot 0 = 0$
     * whatever the query and key. Equal scores give equal weights over
     * the valid keys: $1/2$ on keys 0 and 1 of example 0 and $1/6$ on keys 0
     * to 5 of example 1, 0 elsewhere. The output is the plain average of the
     * valid value rows: `(2, 3, 4, 5)` and `(10, 11, 12, 13)`. The pooling
     * has stopped looking at the queries and keys: it has become the
     * average pooling of d2l's first attention section. The run below is
     * the library's, on section 2's inputs (seed 5) with the two layers
     * zeroed.
     */
    gsl_rng *rng = mha_rng_new(5);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *k20, *out;
    d2l_toy_inputs(rng, 20, "B, Lq, q_size", "B, Lk, k_size", &q, &k, &v, &lens);
    CHECK(tensor_alloc(SHAPE(2, 10, 20), &k20));
    tensor_fill_normal(k20, rng, 0, 1);
    additive_attention add;
    CHECK(additive_attention_init(&add, 20, 20, 8, 0));
    linear_reset_pytorch(&add.W_q, rng);
    linear_reset_pytorch(&add.W_k, rng);
    linear_reset_pytorch(&add.w_v, rng);
    tensor_fill(add.W_q.weight, 0);
    tensor_fill(add.W_k.weight, 0);
    tensor *w;
    CHECK(additive_attention_forward(&add, q, k20, v, lens, &out, &w));
    printf("weights:\n");
    tensor_print(stdout, w, 4);
    printf("out:\n");
    tensor_print(stdout, out, 4);
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(k20);
    tensor_free(out);
    tensor_free(w);
    additive_attention_free(&add);
    gsl_rng_free(rng);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * The broadcast holds one $H$-vector per (example, head, query, key):
     * $B \cdot h \cdot L_q \cdot L_k \cdot H$ doubles. The dot product
     * holds one score per (example, head, query, key). The ratio is $H$,
     * 20 times the memory, and the broadcast is filled by
     * $L_q L_k H$ `tanh` calls per head instead of one matrix product.
     */
    const long B = 2, h = 5, Lq = 4, Lk = 6, H = 20;
    printf("broadcast features: B*h*Lq*Lk*H = %ld doubles\n", B * h * Lq * Lk * H);
    printf("dot-product scores: B*h*Lq*Lk   = %ld doubles\n", B * h * Lq * Lk);
    printf("ratio: %ld\n", H);
}

KEY_MAIN(exercise1, exercise2, exercise3)
