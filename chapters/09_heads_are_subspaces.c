/* Chapter 09: heads are subspaces.
 *
 * The formula of multi-head attention speaks of h separate heads, each
 * with its own small projections W_i^(q), W_i^(k), W_i^(v) of p rows:
 *
 *     head_i = attention(W_i^(q) q, W_i^(k) k, W_i^(v) v)
 *     out    = W_o [head_1; ...; head_h]
 *
 * The module of chapter 08 never builds h small projections: it makes one
 * big one and reshapes.  This chapter computes the heads one by one from
 * slices of the big weights and checks that the answers agree: W_i^(q) is
 * simply rows i*p .. (i+1)*p - 1 of W_q, a GSL submatrix view, no copy.
 *
 * Shapes: B = 2, Lq = 4, Lk = 6, d_model = 100, h = 5, p = 20.
 *   W_q (d_model, d_q); W_i^(q) = W_q[i*p : (i+1)*p, :] is (p, d_q)
 *   head_i (B, Lq, p); concat (B, Lq, d_model); out (B, Lq, d_model)
 */
#include <math.h>

#include "lesson.h"

/* A layer whose weight and bias are rows [row0, row0 + rows) of big's:
 * tensor_narrow makes views into big's buffers, so nothing is copied. */
static void slice_rows(const linear *big, size_t row0, size_t rows,
                       const char *name, linear *out)
{
    CHECK(linear_init(out, name, big->in_features, rows, 0));
    tensor_free(out->weight);
    CHECK(tensor_narrow(big->weight, 0, row0, rows, &out->weight));
    if (big->bias)
        CHECK(tensor_narrow(big->bias, 0, row0, rows, &out->bias));
}

int main(void)
{
    mha_program_init();
    const size_t B = 2, Lq = 4, Lk = 6, D = 100, h = 5, p = D / h;

    gsl_rng *rng = mha_rng_new(9);
    if (!rng)
        return 1;
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h, .bias = 1};
    CHECK(multihead_init(&m, &cfg));
    multihead_reset_xavier(&m, rng);
    tensor_fill_uniform(m.W_q.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(m.W_k.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(m.W_v.bias, rng, -0.1, 0.1);
    tensor_fill_uniform(m.W_o.bias, rng, -0.1, 0.1);

    tensor *q, *kv, *lens, *out;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &q));
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &kv));
    tensor_fill_normal(q, rng, 0, 1);
    tensor_fill_normal(kv, rng, 0, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));

    section("1. The batched module of chapter 08");
    printf("The same sizes as chapter 08, random inputs (seed 9), biases\n"
           "on all four layers.  One forward pass:\n\n");
    CHECK(multihead_forward(&m, q, kv, kv, lens, &out));
    char s[TRACE_SHAPE_MAX];
    printf("out %s\n", tensor_shape_str(out, s, sizeof s));

    section("2. Five heads, one at a time");
    printf("Head i uses rows %zu*i .. %zu*i + %zu of W_q, W_k and W_v (and of\n"
           "their biases): its own %zu-feature subspace.  Each head is an\n"
           "ordinary single-head attention with d = %zu:\n\n",
           p, p, p - 1, p, p);
    tensor *concat;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &concat)); // (B, Lq, h*p)
    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0));
    for (size_t i = 0; i < h; i++) {
        linear wq, wk, wv;
        slice_rows(&m.W_q, i * p, p, "W_q_i", &wq);
        slice_rows(&m.W_k, i * p, p, "W_k_i", &wk);
        slice_rows(&m.W_v, i * p, p, "W_v_i", &wv);
        tensor *qi, *ki, *vi, *head;
        CHECK(linear_forward(&wq, q, &qi));  // (B, Lq, p)
        CHECK(linear_forward(&wk, kv, &ki)); // (B, Lk, p)
        CHECK(linear_forward(&wv, kv, &vi)); // (B, Lk, p)
        CHECK(dot_attention_forward(&attn, qi, ki, vi, lens, &head));
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < Lq; t++)
                for (size_t j = 0; j < p; j++)
                    *TENSOR_AT(concat, b, t, i * p + j) = *TENSOR_AT(head, b, t, j);
        /* the same head inside the batched module: m.weights[:, i] */
        size_t best = 0;
        double agree = 0;
        for (size_t t = 0; t < Lk; t++) {
            if (*TENSOR_AT(attn.weights, 0, 0, t) > *TENSOR_AT(attn.weights, 0, 0, best))
                best = t;
            for (size_t b = 0; b < B; b++)
                for (size_t r = 0; r < Lq; r++)
                    agree = fmax(agree, fabs(*TENSOR_AT(attn.weights, b, r, t) -
                                             *TENSOR_AT(m.weights, b, i, r, t)));
        }
        printf("head %zu: example 0, query 0 favours key %zu (weight %.4f);\n"
               "        the module's head %zu has the same weights: %s\n",
               i, best, *TENSOR_AT(attn.weights, 0, 0, best), i,
               yes_no(agree < 1e-12));
        tensor_free(qi);
        tensor_free(ki);
        tensor_free(vi);
        tensor_free(head);
        linear_free(&wq);
        linear_free(&wk);
        linear_free(&wv);
    }

    section("3. Concatenate, project, compare");
    printf("Stack the heads side by side (columns i*p.. of concat) and\n"
           "apply W_o:\n\n");
    tensor *out_heads;
    CHECK(linear_forward(&m.W_o, concat, &out_heads));
    double diff = 0, ref = 0;
    for (size_t n = 0; n < tensor_numel(out); n++) {
        diff = fmax(diff, fabs(out->data[n] - out_heads->data[n]));
        ref = fmax(ref, fabs(out->data[n]));
    }
    printf("largest |batched - one head at a time| / largest |out|\n"
           "  below 1e-12: %s\n", yes_no(diff / ref < 1e-12));
    printf("\nThe batched module is the five small heads, computed in one\n"
           "go: only rounding (a few units in the last place, from sums\n"
           "taken in a different order) tells them apart.  The reshapes of\n"
           "chapter 06 are nothing more than a way to hand each head its\n"
           "own block of the big projection's output.\n");

    section("4. W_o, read the same way");
    printf("W_o (d_model, h*p) has one block of p columns per head, so\n"
           "out = b_o + sum over heads of head_i W_o[:, i*p:(i+1)*p]^T:\n"
           "each head writes into the output through its own slice of\n"
           "W_o, and the heads' contributions simply add up.  Checking it\n"
           "with W_o's column blocks as narrow views (no copies):\n\n");
    tensor *sum;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &sum));
    for (size_t i = 0; i < h; i++) {
        linear wo_i;
        CHECK(linear_init(&wo_i, "W_o_i", p, D, 0));
        tensor_free(wo_i.weight);
        CHECK(tensor_narrow(m.W_o.weight, 1, i * p, p, &wo_i.weight)); // (D, p)
        tensor *head_i, *part;
        CHECK(tensor_narrow(concat, 2, i * p, p, &head_i)); // (B, Lq, p)
        CHECK(linear_forward(&wo_i, head_i, &part));        // (B, Lq, D)
        for (size_t n = 0; n < tensor_numel(sum); n++)
            sum->data[n] += part->data[n];
        tensor_free(head_i);
        tensor_free(part);
        linear_free(&wo_i);
    }
    double worst = 0;
    for (size_t b = 0; b < B; b++)
        for (size_t r = 0; r < Lq; r++)
            for (size_t j = 0; j < D; j++)
                worst = fmax(worst, fabs(*TENSOR_AT(sum, b, r, j) +
                                         *TENSOR_AT(m.W_o.bias, j) -
                                         *TENSOR_AT(out, b, r, j)));
    printf("b_o + sum of the five per-head contributions equals out\n"
           "  (below 1e-12): %s\n", yes_no(worst / ref < 1e-12));

    tensor_free(q);
    tensor_free(kv);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(concat);
    tensor_free(out_heads);
    tensor_free(sum);
    dot_attention_free(&attn);
    multihead_free(&m);
    gsl_rng_free(rng);
    return 0;
}
