/* Chapter 09: heads are subspaces.
 *
 * Computes the five heads of chapter 08's module one at a time, from row
 * slices of its weights, and checks that they give the batched module's
 * weights and output.  Run it with `make ch09`; the book's page is
 * docs/09_heads_are_subspaces.md.
 */

/*md
 * The formula of chapter 08 speaks of $h$ separate heads with their own small
 * projections $W_i^{(q)}, W_i^{(k)}, W_i^{(v)}$ of $p$ rows each. The code
 * never builds them: it makes one big projection to $d_{model} = h p$ features
 * and reshapes. This chapter shows that the two are the same thing, so that you
 * can trust the reshapes and think in heads.
 *
 * The key fact: with rows as vectors, $y = q W_q^\top$, output feature $j$ of a
 * Linear layer uses only row $j$ of its weight. So features $ip$ to
 * $(i+1)p - 1$ of $q W_q^\top$, which `transpose_qkv` hands to head $i$, are
 * computed by rows $ip$ to $(i+1)p - 1$ of $W_q$ alone:
 *
 * $$W_i^{(q)} = W_q[\,ip : (i+1)p,\ :\,] \in \mathbb{R}^{p \times d_q}$$
 *
 * (slices as in Python: rows $ip$ up to, not including, $(i+1)p$; heads
 * are counted from 0 to $h - 1$, as in the code and in chapter 08's
 * formula), and the same for $W_k$, $W_v$ and their biases. The big projection *is* $h$
 * small ones stacked. At the other end, $W_o$ splits by columns: head $i$ only
 * meets columns $ip$ to $(i+1)p - 1$ of $W_o$, so
 *
 * $$\mathrm{out} = b_o + \sum_{i=0}^{h-1} \mathrm{head}_i\, W_o[\,:,\ ip : (i+1)p\,]^\top$$
 *
 * and each head adds its own contribution to the output. Each head works in its
 * own $p$-dimensional *subspace* of the $d_{model}$ features. The program
 * computes the heads one at a time from slices of the big weights and checks
 * that the module of chapter 08 gives the same answer. Chapter 10 then uses the
 * module for self-attention.
 */

#include <math.h>

#include "lesson.h"

/* chapter 08's sizes: B examples, Lq queries, Lk keys, D = d_model
 * features in H heads of P */
enum { B = 2, Lq = 4, Lk = 6, D = 100, H = 5, P = D / H };

/* What the sections share: the module and its inputs (section 1), the
 * batched output and weights (section 1) and the heads side by side
 * (section 2). */
typedef struct {
    multihead m;
    tensor *q, *kv, *lens; // (B, Lq, D), (B, Lk, D), (B,)
    tensor *out;           // (B, Lq, D), the batched module's
    tensor *weights;       // (B, h, Lq, Lk), the batched module's
    tensor *concat;        // (B, Lq, H*P), the heads one at a time
} lesson;

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

/* largest |a - b| over largest |b|, for two tensors of one shape */
static double relative_diff(const tensor *a, const tensor *b)
{
    double diff = 0, ref = 0;
    for (size_t n = 0; n < tensor_numel(b); n++) {
        diff = fmax(diff, fabs(a->data[n] - b->data[n]));
        ref = fmax(ref, fabs(b->data[n]));
    }
    return diff / ref;
}

static void batched(lesson *l)
{
    section("1. The batched module of chapter 08");
    /*md
     * The module of chapter 08 with the same sizes (B = 2, 4 queries, 6 keys,
     * 100 features in 5 heads of 20, and the same `valid_lens = [3, 2]`:
     * example 0 sees keys 0-2, example 1 keys 0-1), random standard-normal
     * inputs, and this time biases on all four layers, so that the slicing
     * has to cover them too. One forward pass gives the `(2, 4, 100)`
     * result the rest of the chapter must reproduce.
     */
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
    CHECK(multihead_forward(&l->m, l->q, l->kv, l->kv, l->lens, &l->out,
                            &l->weights));
    char s[TRACE_SHAPE_MAX];
    printf("out %s\n", tensor_shape_str(l->out, s, sizeof s));
    gsl_rng_free(rng);
}

static void one_head_at_a_time(lesson *l)
{
    section("2. Five heads, one at a time");
    /*md
     * The chapter's function `slice_rows` builds head $i$'s projection from the
     * big one without copying anything. It makes a `linear` layer whose weight
     * is `tensor_narrow(W, 0, i*p, p)`, a view of rows $20i$ to $20i + 19$ of
     * the `(100, 100)` weight. That view has shape `(20, 100)` and keeps W's
     * strides `(100, 1)`. The bias gets the same narrow view of 20 entries.
     * `linear_forward` reads a weight through its row stride, so the view goes
     * straight to dgemm.
     *
     * @show chapters/09_heads_are_subspaces.c slice_rows
     *
     * Each head is then an ordinary single-head attention (chapter 04) with
     * $d = 20$: project Q, K and V with the sliced layers to `(B, L, 20)`, and
     * attend. The per-head weights are compared with `weights[:, i]` from the
     * module, and all five agree below 1e-12. The favourite keys differ from
     * head to head: query 0 of example 0 prefers key 0 in head 0 (0.4076), key
     * 2 in heads 1 to 3 (0.5710, 0.4220, 0.5896), and key 1 in head 4 (0.4941).
     * The picture draws the weights of the five sliced heads, one row of
     * panels per example: the loop's own weights, which equal the module's
     * `weights[:, i]`, with the padding keys blank (keys 3-5 of example 0,
     * 2-5 of example 1).
     *
     * Cost: the loop makes 15 projections of `(B*L, 100)` by `(20, 100)`
     * instead of 3 of `(B*L, 100)` by `(100, 100)`. Each is a fifth of the
     * size, so the flops are the same. The attention runs 5 times on 2 examples
     * instead of once on 10: the same flops again. The batched form wins on
     * overhead (fewer, larger BLAS calls), not on arithmetic.
     */
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &l->concat)); // (B, Lq, h*p)
    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0));
    tensor *sliced; // (B, h, Lq, Lk): each sliced head's weights
    CHECK(tensor_alloc(SHAPE(B, H, Lq, Lk), &sliced));
    printf("example 0, query 0: favourite key (weight); same weights as the\n"
           "module's head, below 1e-12\n");
    for (size_t i = 0; i < H; i++) {
        linear wq, wk, wv;
        slice_rows(&l->m.W_q, i * P, P, "W_q_i", &wq);
        slice_rows(&l->m.W_k, i * P, P, "W_k_i", &wk);
        slice_rows(&l->m.W_v, i * P, P, "W_v_i", &wv);
        tensor *qi, *ki, *vi, *head, *w; // w (B, Lq, Lk): head i's weights
        CHECK(linear_forward(&wq, l->q, &qi));  // (B, Lq, p)
        CHECK(linear_forward(&wk, l->kv, &ki)); // (B, Lk, p)
        CHECK(linear_forward(&wv, l->kv, &vi)); // (B, Lk, p)
        CHECK(dot_attention_forward(&attn, qi, ki, vi, l->lens, &head, &w));
        for (size_t b = 0; b < B; b++)
            for (size_t t = 0; t < Lq; t++)
                for (size_t j = 0; j < P; j++)
                    *TENSOR_AT(l->concat, b, t, i * P + j) = *TENSOR_AT(head, b, t, j);
        for (size_t b = 0; b < B; b++)
            for (size_t r = 0; r < Lq; r++)
                for (size_t t = 0; t < Lk; t++)
                    *TENSOR_AT(sliced, b, i, r, t) = *TENSOR_AT(w, b, r, t);
        /* the same head inside the batched module: weights[:, i] */
        size_t best = 0;
        double agree = 0;
        for (size_t t = 0; t < Lk; t++) {
            if (*TENSOR_AT(w, 0, 0, t) > *TENSOR_AT(w, 0, 0, best))
                best = t;
            for (size_t b = 0; b < B; b++)
                for (size_t r = 0; r < Lq; r++)
                    agree = fmax(agree, fabs(*TENSOR_AT(w, b, r, t) -
                                             *TENSOR_AT(l->weights, b, i, r, t)));
        }
        printf("head %zu (rows %2zu-%2zu): key %zu (%.4f); same weights: %s\n", i,
               i * P, i * P + P - 1, best,
               *TENSOR_AT(w, 0, 0, best), yes_no(agree < 1e-12));
        tensor_free(qi);
        tensor_free(ki);
        tensor_free(vi);
        tensor_free(head);
        tensor_free(w);
        linear_free(&wq);
        linear_free(&wk);
        linear_free(&wv);
    }
    const char *titles[2 * H] = {"ex 0, head 0", "head 1", "head 2", "head 3",
                                 "head 4", "ex 1, head 0", "head 1", "head 2",
                                 "head 3", "head 4"};
    heatmap_options opt = {.titles = titles, .ntitles = 2 * H};
    printf("\n");
    draw_heatmap(sliced, &opt, "09_sliced_heads");
    tensor_free(sliced);
    dot_attention_free(&attn);
}

static void concatenate(const lesson *l)
{
    section("3. Concatenate, project, compare");
    /*md
     * The loop also writes each head's `(B, Lq, 20)` output into columns $20i$
     * to $20i + 19$ of `concat`: the concatenation of the formula, the same
     * layout that `transpose_output` produces. `W_o` applied to it gives the
     * module's output to within 1e-12 of the largest entry.
     *
     * The two are not bit-for-bit equal, and they should not be expected to.
     * BLAS adds the terms of a dot product in an order that depends on the
     * sizes of the matrices it is given. The batched module and the per-head
     * loop give it different sizes, so the last bits of the sums differ. That
     * is why the comparison is relative and uses a tolerance. Only that
     * rounding tells the two apart: the reshapes of chapter 06 are nothing more
     * than a way to hand each head its own block of the big projection's
     * output.
     */
    tensor *out_heads;
    CHECK(linear_forward(&l->m.W_o, l->concat, &out_heads));
    printf("largest |batched - one head at a time| / largest |out|\n"
           "  below 1e-12: %s\n", yes_no(relative_diff(out_heads, l->out) < 1e-12));
    tensor_free(out_heads);
}

static void output_blocks(const lesson *l)
{
    section("4. W_o, read the same way");
    /*md
     * The same idea at the output. W_o's weight is `(100, 100)`, and its
     * columns $20i$ to $20i + 19$ are the only ones that touch head $i$'s
     * features. The program narrows them (`tensor_narrow(W_o, 1, i*p, p)`, a
     * `(100, 20)` view with strides `(100, 1)`), applies each block to its head
     * alone, and adds up the five contributions plus the bias. The sum equals
     * the module's output: each head writes into the output through its own
     * slice of W_o, and the heads' contributions simply add up.
     *
     * This is the decomposition to remember for head importance (chapter 08's
     * exercise, chapter 14): removing head $i$ means dropping one term of this
     * sum. Everything else stays the same.
     */
    tensor *sum;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &sum));
    for (size_t i = 0; i < H; i++) {
        linear wo_i;
        CHECK(linear_init(&wo_i, "W_o_i", P, D, 0));
        tensor_free(wo_i.weight);
        CHECK(tensor_narrow(l->m.W_o.weight, 1, i * P, P, &wo_i.weight)); // (D, p)
        tensor *head_i, *part;
        CHECK(tensor_narrow(l->concat, 2, i * P, P, &head_i)); // (B, Lq, p)
        CHECK(linear_forward(&wo_i, head_i, &part));           // (B, Lq, D)
        for (size_t n = 0; n < tensor_numel(sum); n++)
            sum->data[n] += part->data[n];
        tensor_free(head_i);
        tensor_free(part);
        linear_free(&wo_i);
    }
    for (size_t b = 0; b < B; b++)
        for (size_t r = 0; r < Lq; r++)
            for (size_t j = 0; j < D; j++)
                *TENSOR_AT(sum, b, r, j) += *TENSOR_AT(l->m.W_o.bias, j);
    printf("b_o + sum of the five per-head contributions equals out\n"
           "  (below 1e-12): %s\n", yes_no(relative_diff(sum, l->out) < 1e-12));
    tensor_free(sum);
}

int main(void)
{
    mha_program_init();
    lesson l;
    batched(&l);
    one_head_at_a_time(&l);
    concatenate(&l);
    output_blocks(&l);
    tensor_free(l.q);
    tensor_free(l.kv);
    tensor_free(l.lens);
    tensor_free(l.out);
    tensor_free(l.weights);
    tensor_free(l.concat);
    multihead_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Show on paper that features $ip$ to $(i+1)p - 1$ of $x W_q^\top + b_q$
 *    equal $x (W_i^{(q)})^\top + b_q[ip : (i+1)p]$. Which property of the
 *    matrix product makes this work?
 * 2. Swap the row blocks of heads 0 and 1 in W_q, W_k and W_v (and in their
 *    biases). What must you change in W_o so that the module's output does not
 *    change? What does this say about the order of the heads?
 * 3. In section 4, leave head 2's contribution out of the sum and measure the
 *    largest change of the output relative to its largest entry. Do the same
 *    for each head. Is one of them much less important than the others in this
 *    untrained module? (Chapter 14 measures it on a trained one.)
 */
