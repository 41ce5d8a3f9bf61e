//> 04
/* test_attention.c: scaled dot-product attention pooling, and (chapter
 * 05) additive attention pooling.
 *
 * Shapes: queries (B, Lq, d) or (B, Lq, q_size), keys (B, Lk, d) or
 * (B, Lk, k_size), values (B, Lk, dv), weights (B, Lq, Lk), out
 * (B, Lq, dv); H = num_hiddens.
 *
 * The references are the naive_* functions below: the formulas of the
 * lesson as plain loops over tensor_at, no BLAS, no reshape, no code
 * shared with src/nn/attention.c or src/nn/softmax.c.
 */
#include "check.h" /* first: it sets _GNU_SOURCE */

#include <float.h>

#include <criterion/parameterized.h>

/* --- helpers -------------------------------------------------------- */

/* valid_lens for (B, Lq) rows: kind 0 none, 1 (B,), 2 (B, Lq), with
 * lengths drawn from 0 .. Lk. */
static tensor *random_valid_lens(int kind, size_t B, size_t Lq, size_t Lk,
                                 unsigned long seed)
{
    if (kind == 0)
        return NULL;
    tensor *vl;
    if (kind == 1)
        OK(tensor_alloc(SHAPE(B), &vl));
    else
        OK(tensor_alloc(SHAPE(B, Lq), &vl));
    gsl_rng *r = mha_rng_new(seed);
    for (size_t k = 0; k < tensor_numel(vl); k++)
        vl->data[k] = (double)gsl_rng_uniform_int(r, Lk + 1);
    gsl_rng_free(r);
    return vl;
}

static size_t naive_valid(const tensor *vl, size_t b, size_t i, size_t Lk)
{
    if (!vl)
        return Lk;
    return (size_t)(vl->ndim == 1 ? *TENSOR_AT(vl, b) : *TENSOR_AT(vl, b, i));
}

/* The masked softmax of one row of scores s, in place: a masked key
 * scores -inf (its exp is 0), a row that sees no key is uniform. */
static void naive_softmax_row(double *s, size_t Lk, size_t valid)
{
    double m = -INFINITY, sum = 0;
    for (size_t j = 0; j < Lk; j++) {
        if (!valid)
            s[j] = 0.0;
        else if (j >= valid)
            s[j] = -INFINITY;
        m = s[j] > m ? s[j] : m;
    }
    for (size_t j = 0; j < Lk; j++)
        sum += exp(s[j] - m);
    for (size_t j = 0; j < Lk; j++)
        s[j] = exp(s[j] - m) / sum;
}

/* out[b, i, :] = sum_j weights[b, i, j] values[b, j, :]; both written. */
static void naive_pool(const tensor *values, const tensor *weights,
                       tensor *out)
{
    size_t B = out->shape[0], Lq = out->shape[1], Lk = values->shape[1];
    size_t dv = values->shape[2];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++)
            for (size_t c = 0; c < dv; c++) {
                double sum = 0;
                for (size_t j = 0; j < Lk; j++)
                    sum += *TENSOR_AT(weights, b, i, j) *
                           *TENSOR_AT(values, b, j, c);
                *TENSOR_AT(out, b, i, c) = sum;
            }
}

#define MAX_KEYS 64

/* scores (B, Lq, Lk) of the dot product, q . k / sqrt(d), loop by loop. */
static tensor *naive_dot_scores(const tensor *q, const tensor *k)
{
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1], d = q->shape[2];
    tensor *scores;
    OK(tensor_alloc(SHAPE(B, Lq, Lk), &scores));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++)
            for (size_t j = 0; j < Lk; j++) {
                double score = 0;
                for (size_t c = 0; c < d; c++)
                    score += *TENSOR_AT(q, b, i, c) * *TENSOR_AT(k, b, j, c);
                *TENSOR_AT(scores, b, i, j) = score / sqrt((double)d);
            }
    return scores;
}

//> 05
/* scores (B, Lq, Lk) of the additive pooling, w_v . tanh(W_q q + W_k k),
 * with a's layers' weights read element by element. */
static tensor *naive_additive_scores(const additive_attention *a,
                                     const tensor *q, const tensor *k)
{
    size_t B = q->shape[0], Lq = q->shape[1], Lk = k->shape[1];
    tensor *scores;
    OK(tensor_alloc(SHAPE(B, Lq, Lk), &scores));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++)
            for (size_t j = 0; j < Lk; j++) {
                double score = 0;
                for (size_t h = 0; h < a->W_q.out_features; h++) {
                    double pre = 0;
                    for (size_t c = 0; c < q->shape[2]; c++)
                        pre += *TENSOR_AT(a->W_q.weight, h, c) *
                               *TENSOR_AT(q, b, i, c);
                    for (size_t c = 0; c < k->shape[2]; c++)
                        pre += *TENSOR_AT(a->W_k.weight, h, c) *
                               *TENSOR_AT(k, b, j, c);
                    score += *TENSOR_AT(a->w_v.weight, 0, h) * tanh(pre);
                }
                *TENSOR_AT(scores, b, i, j) = score;
            }
    return scores;
}

//<
/* softmax(scores, masked by vl) V, row by row; scores is freed. */
static void naive_attention(tensor *scores, const tensor *v, const tensor *vl,
                            tensor **out, tensor **weights)
{
    size_t B = scores->shape[0], Lq = scores->shape[1], Lk = scores->shape[2];
    cr_assert(Lk <= MAX_KEYS);
    OK(tensor_alloc(SHAPE(B, Lq, Lk), weights));
    OK(tensor_alloc(SHAPE(B, Lq, v->shape[2]), out));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < Lq; i++) {
            double s[MAX_KEYS];
            for (size_t j = 0; j < Lk; j++)
                s[j] = *TENSOR_AT(scores, b, i, j);
            naive_softmax_row(s, Lk, naive_valid(vl, b, i, Lk));
            for (size_t j = 0; j < Lk; j++)
                *TENSOR_AT(*weights, b, i, j) = s[j];
        }
    naive_pool(v, *weights, *out);
    tensor_free(scores);
}

//> 05
/* An additive attention with Xavier-uniform weights from seed. */
static void additive_with_weights(additive_attention *a, size_t k_size,
                                  size_t q_size, size_t H, double dropout,
                                  unsigned long seed)
{
    OK(additive_attention_init(a, k_size, q_size, H, dropout));
    gsl_rng *r = mha_rng_new(seed);
    linear_reset_xavier_uniform(&a->W_q, r);
    linear_reset_xavier_uniform(&a->W_k, r);
    linear_reset_xavier_uniform(&a->w_v, r);
    gsl_rng_free(r);
}
//<

/* --- both poolings against the naive loops, over a table of shapes -- */

typedef struct {
    size_t B, Lq, Lk;
    size_t d;      /* queries' features (and keys' for the dot product) */
    size_t k_size; /* keys' features for the additive pooling (chapter 05) */
    size_t dv, H;
    int valid_kind; /* 0 none, 1 (B,), 2 (B, Lq) */
} shape_case;

ParameterizedTestParameters(attention_shapes, match_the_naive_loops)
{
    static shape_case cases[] = {
        {1, 1, 1, 1, 1, 1, 1, 0},   {1, 1, 1, 1, 1, 1, 1, 1},
        {2, 1, 10, 2, 2, 4, 8, 1},  /* d2l's toy */
        {2, 4, 6, 20, 20, 20, 10, 1}, {3, 5, 3, 4, 6, 7, 5, 2},
        {3, 2, 9, 3, 5, 1, 6, 0},   {1, 7, 7, 8, 8, 3, 4, 2},
        {3, 6, 4, 5, 2, 8, 3, 1},   {1, 3, 12, 16, 3, 2, 7, 2},
        {3, 4, 4, 1, 1, 5, 2, 0},
    };
    return cr_make_param_array(shape_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(shape_case *c, attention_shapes, match_the_naive_loops)
{
    unsigned long seed = 100 * c->B + 10 * c->Lq + c->Lk;
    tensor *q = random_tensor(SHAPE(c->B, c->Lq, c->d), seed);
    tensor *k = random_tensor(SHAPE(c->B, c->Lk, c->d), seed + 1);
    tensor *v = random_tensor(SHAPE(c->B, c->Lk, c->dv), seed + 3);
    tensor *vl = random_valid_lens(c->valid_kind, c->B, c->Lq, c->Lk, seed);
    tensor *out, *w, *ref, *ref_w;

    dot_attention dot;
    OK(dot_attention_init(&dot, 0.0));
    OK(dot_attention_forward(&dot, q, k, v, vl, &out, &w));
    naive_attention(naive_dot_scores(q, k), v, vl, &ref, &ref_w);
    cr_assert_leq(rel_error(out, ref), 1e-13, "dot: %g", rel_error(out, ref));
    cr_assert_leq(rel_error(w, ref_w), 1e-13);
    FREE_ALL(out, w, ref, ref_w);
    dot_attention_free(&dot);

//> 05
    tensor *k_add = random_tensor(SHAPE(c->B, c->Lk, c->k_size), seed + 2);
    additive_attention add;
    additive_with_weights(&add, c->k_size, c->d, c->H, 0.0, seed);
    OK(additive_attention_forward(&add, q, k_add, v, vl, &out, &w));
    naive_attention(naive_additive_scores(&add, q, k_add), v, vl, &ref, &ref_w);
    cr_assert_leq(rel_error(out, ref), 1e-13, "additive: %g",
                  rel_error(out, ref));
    cr_assert_leq(rel_error(w, ref_w), 1e-13);
    FREE_ALL(out, w, ref, ref_w, k_add);
    additive_attention_free(&add);

//<
    FREE_ALL(q, k, v, vl);
}

/* --- d2l's toy, by hand --------------------------------------------- */

/* queries (2, 1, 2) anything, keys (2, 10, 2) all ones, values (2, 10, 4)
 * with values[b] = 0 .. 39 as a (10, 4) block, valid_lens [2, 6]. */
static void d2l_toy(tensor **q, tensor **k, tensor **v, tensor **vl)
{
    *q = random_tensor(SHAPE(2, 1, 2), 42);
    OK(tensor_alloc(SHAPE(2, 10, 2), k));
    tensor_fill(*k, 1.0);
    OK(tensor_alloc(SHAPE(2, 10, 4), v));
    for (size_t b = 0; b < 2; b++)
        for (size_t n = 0; n < 40; n++)
            (*v)->data[b * 40 + n] = (double)n;
    *vl = make(SHAPE(2), ((const double[]){2, 6}));
}

/* Every key is the same, so every valid key gets the same weight: the
 * output is the mean of the first 2 value rows, (0+4)/2 .. (3+7)/2, and
 * of the first 6, (0+4+...+20)/6 = 10 .. 13. */
static void check_d2l_toy_output(const tensor *out, const tensor *weights)
{
    cr_assert_eq(out->ndim, 3);
    cr_assert(out->shape[0] == 2 && out->shape[1] == 1 && out->shape[2] == 4);
    const double want[] = {2, 3, 4, 5, 10, 11, 12, 13};
    for (size_t n = 0; n < 8; n++)
        cr_assert(fabs(out->data[n] - want[n]) <= 1e-14 * want[n],
                  "out[%zu] = %.17g, want %g", n, out->data[n], want[n]);
    for (size_t j = 0; j < 10; j++) {
        cr_assert_eq(*TENSOR_AT(weights, 0, 0, j), j < 2 ? 0.5 : 0.0);
        double w1 = *TENSOR_AT(weights, 1, 0, j);
        if (j < 6)
            cr_assert(fabs(w1 - 1.0 / 6) <= 2 * DBL_EPSILON, "w = %.17g", w1);
        else
            cr_assert_eq(w1, 0.0);
    }
}

Test(dot_attention, d2l_toy_by_hand)
{
    tensor *q, *k, *v, *vl, *out, *w;
    d2l_toy(&q, &k, &v, &vl);
    dot_attention a;
    OK(dot_attention_init(&a, 0.5)); /* evaluation mode: no dropout */
    OK(dot_attention_forward(&a, q, k, v, vl, &out, &w));
    check_d2l_toy_output(out, w);
    dot_attention_free(&a);
    FREE_ALL(q, k, v, vl, out, w);
}

//> 05
Test(additive_attention, d2l_toy_by_hand)
{
    // whatever W_q, W_k and w_v are, identical keys score identically
    tensor *q, *k, *v, *vl, *out, *w;
    d2l_toy(&q, &k, &v, &vl);
    tensor *q20 = random_tensor(SHAPE(2, 1, 20), 43); /* d2l: q_size 20 */
    additive_attention a;
    additive_with_weights(&a, 2, 20, 8, 0.1, 44);
    OK(additive_attention_forward(&a, q20, k, v, vl, &out, &w));
    check_d2l_toy_output(out, w);
    additive_attention_free(&a);
    FREE_ALL(q, q20, k, v, vl, out, w);
}

Test(additive_attention, zero_weights_average_the_valid_values)
{
    // fresh from init every score is w_v . tanh(0) = 0: uniform weights
    tensor *q = random_tensor(SHAPE(1, 2, 3), 45), *k, *v, *out;
    k = random_tensor(SHAPE(1, 4, 5), 46);
    v = make(SHAPE(1, 4, 1), ((const double[]){1, 2, 4, 8}));
    tensor *vl = make(SHAPE(1, 2), ((const double[]){3, 4}));
    additive_attention a;
    OK(additive_attention_init(&a, 5, 3, 6, 0.0));
    OK(additive_attention_forward(&a, q, k, v, vl, &out, NULL));
    cr_assert(fabs(out->data[0] - 7.0 / 3) <= 2 * DBL_EPSILON * 7 / 3);
    cr_assert(fabs(out->data[1] - 15.0 / 4) <= 2 * DBL_EPSILON * 15 / 4);
    additive_attention_free(&a);
    FREE_ALL(q, k, v, vl, out);
}
//<

/* --- layouts, ownership, inputs ------------------------------------- */

Test(dot_attention, strided_inputs)
{
    // keys permuted from (B, d, Lk): the last axis is strided, so a copy;
    // queries permuted from (Lq, B, d): rows still contiguous, no copy
    size_t B = 3, Lq = 4, Lk = 5, d = 6, dv = 2;
    tensor *k_base = random_tensor(SHAPE(B, d, Lk), 50), *k;
    tensor *q_base = random_tensor(SHAPE(Lq, B, d), 51), *q;
    tensor *v = random_tensor(SHAPE(B, Lk, dv), 52);
    OK(tensor_permute(k_base, SHAPE(0, 2, 1), &k));
    OK(tensor_permute(q_base, SHAPE(1, 0, 2), &q));
    tensor *vl = make(SHAPE(3), ((const double[]){5, 2, 0}));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    tensor *out, *ref, *ref_w;
    OK(dot_attention_forward(&a, q, k, v, vl, &out, NULL));
    trace_to(NULL);
    const char *text = capture_end(&c);
    cr_assert(strstr(text, "  # Q K^T reads (3, 5, 6) with strides (30, 1, "
                           "5), not row-major per example: one contiguous "
                           "copy for dgemm\n"
                           "  contiguous()           copy  (3, 5, 6) -> "
                           "(3, 5, 6)\n"),
              "%s", text);
    cr_assert_null(strstr(text, "# queries"), "%s", text);
    naive_attention(naive_dot_scores(q, k), v, vl, &ref, &ref_w);
    cr_assert_leq(rel_error(out, ref), 1e-13);
    capture_free(&c);
    dot_attention_free(&a);
    FREE_ALL(k_base, k, q_base, q, v, vl, out, ref, ref_w);
}

//> 05
Test(additive_attention, strided_inputs)
{
    size_t B = 2, Lq = 3, Lk = 4, dv = 3;
    tensor *k_base = random_tensor(SHAPE(B, 5, Lk), 53), *k;
    tensor *v_base = random_tensor(SHAPE(B, dv, Lk), 54), *v;
    tensor *q = random_tensor(SHAPE(B, Lq, 2), 55);
    OK(tensor_permute(k_base, SHAPE(0, 2, 1), &k));
    OK(tensor_permute(v_base, SHAPE(0, 2, 1), &v));
    additive_attention a;
    additive_with_weights(&a, 5, 2, 4, 0.0, 56);
    tensor *out, *ref, *ref_w;
    OK(additive_attention_forward(&a, q, k, v, NULL, &out, NULL));
    naive_attention(naive_additive_scores(&a, q, k), v, NULL, &ref, &ref_w);
    cr_assert_leq(rel_error(out, ref), 1e-13);
    additive_attention_free(&a);
    FREE_ALL(k_base, k, v_base, v, q, out, ref, ref_w);
}
//<

Test(dot_attention, inputs_are_not_modified)
{
    tensor *q = random_tensor(SHAPE(2, 3, 4), 60);
    tensor *k = random_tensor(SHAPE(2, 5, 4), 61);
    tensor *v = random_tensor(SHAPE(2, 5, 3), 62);
    tensor *vl = make(SHAPE(2, 3), ((const double[]){1, 2, 3, 4, 5, 0}));
    tensor *before[4], *in[4] = {q, k, v, vl}, *out;
    for (int n = 0; n < 4; n++)
        OK(tensor_contiguous(in[n], &before[n]));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    OK(dot_attention_forward(&a, q, k, v, vl, &out, NULL));
    dot_attention_free(&a);
//> 05
    tensor_free(out);
    additive_attention add;
    additive_with_weights(&add, 4, 4, 3, 0.0, 63);
    OK(additive_attention_forward(&add, q, k, v, vl, &out, NULL));
    additive_attention_free(&add);
//<
    for (int n = 0; n < 4; n++) {
        cr_assert_eq(rel_error(in[n], before[n]), 0.0, "input %d changed", n);
        tensor_free(before[n]);
    }
    FREE_ALL(q, k, v, vl, out);
}

Test(dot_attention, weights_are_an_output_of_each_forward)
{
    tensor *q, *k, *v, *vl, *out, *w, *w2, *out2;
    d2l_toy(&q, &k, &v, &vl);
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    OK(dot_attention_forward(&a, q, k, v, vl, &out, &w));
    cr_assert_eq(*TENSOR_AT(w, 0, 0, 2), 0.0);
    // no mask now: every key of the toy weighs 1/10, in new weights; the
    // first call's are the caller's and stay as they were
    OK(dot_attention_forward(&a, q, k, v, NULL, &out2, &w2));
    cr_assert_neq(w2, w);
    cr_assert(fabs(*TENSOR_AT(w2, 0, 0, 2) - 0.1) <= 1e-16);
    cr_assert_eq(*TENSOR_AT(w, 0, 0, 2), 0.0);
    FREE_ALL(out2, w2);
    // NULL: not wanted, and the output is the same to the bit
    OK(dot_attention_forward(&a, q, k, v, vl, &out2, NULL));
    cr_assert_eq(rel_error(out2, out), 0.0);
    FREE_ALL(out, out2, w);
    // a failed forward leaves no weights, and no output
    tensor *bad = make(SHAPE(2), ((const double[]){2, 11}));
    out = w = q;
    FAILS(dot_attention_forward(&a, q, k, v, bad, &out, &w), GSL_EINVAL,
          "dot_attention_forward: valid_lens[1] = 11 is larger than the "
          "number of keys 10 (queries (2, 1, 2), keys (2, 10, 2), "
          "valid_lens (2,))");
    cr_assert_null(out);
    cr_assert_null(w);
    dot_attention_free(&a);
    FREE_ALL(q, k, v, vl, bad);
}

//> 05
Test(additive_attention, weights_null_means_not_wanted)
{
    tensor *q, *k, *v, *vl, *out, *w, *out2;
    d2l_toy(&q, &k, &v, &vl);
    tensor *q20 = random_tensor(SHAPE(2, 1, 20), 47);
    additive_attention a;
    additive_with_weights(&a, 2, 20, 8, 0.0, 48);
    OK(additive_attention_forward(&a, q20, k, v, vl, &out, &w));
    OK(additive_attention_forward(&a, q20, k, v, vl, &out2, NULL));
    cr_assert_eq(rel_error(out2, out), 0.0);
    check_d2l_toy_output(out, w);
    additive_attention_free(&a);
    FREE_ALL(q, q20, k, v, vl, out, out2, w);
}
//<

Test(dot_attention, names_follow_the_inputs)
{
    // heads folded into the batch, as the multi-head module will pass them
    tensor *q = random_tensor(SHAPE(4, 2, 3), 64);
    tensor *k = random_tensor(SHAPE(4, 5, 3), 65);
    tensor *v = random_tensor(SHAPE(4, 5, 3), 66), *out, *w;
    OK(tensor_set_names(q, "B*h, n, d_model/h"));
    OK(tensor_set_names(k, "B*h, m, d_model/h"));
    OK(tensor_set_names(v, "B*h, m, d_model/h"));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    OK(dot_attention_forward(&a, q, k, v, NULL, &out, &w));
    char sym[TRACE_SHAPE_MAX];
    cr_assert_str_eq(tensor_sym_str(w, sym, sizeof sym), "(B*h, n, m)");
    cr_assert_str_eq(tensor_sym_str(out, sym, sizeof sym),
                     "(B*h, n, d_model/h)");
    dot_attention_free(&a);
    FREE_ALL(q, k, v, out, w);
}

/* --- dropout -------------------------------------------------------- */

Test(dropout, evaluation_mode_is_deterministic_and_draws_nothing)
{
    tensor *q = random_tensor(SHAPE(2, 3, 4), 70);
    tensor *k = random_tensor(SHAPE(2, 6, 4), 71);
    tensor *v = random_tensor(SHAPE(2, 6, 5), 72), *out1, *out2, *plain;
    dot_attention a, none;
    OK(dot_attention_init(&a, 0.5));
    OK(dot_attention_init(&none, 0.0));
    cr_assert_eq(a.training, 0);
    a.rng = mha_rng_new(7);
    OK(dot_attention_forward(&a, q, k, v, NULL, &out1, NULL));
    OK(dot_attention_forward(&a, q, k, v, NULL, &out2, NULL));
    OK(dot_attention_forward(&none, q, k, v, NULL, &plain, NULL));
    cr_assert_eq(rel_error(out1, out2), 0.0);
    cr_assert_eq(rel_error(out1, plain), 0.0);
    gsl_rng *fresh = mha_rng_new(7);
    cr_assert_eq(gsl_rng_get(a.rng), gsl_rng_get(fresh), "rng was drawn");
    gsl_rng_free(fresh);
    gsl_rng_free(a.rng);
    dot_attention_free(&a);
    dot_attention_free(&none);
    FREE_ALL(q, k, v, out1, out2, plain);
}

/* A pooling's forward in training, with dropout p and the generator r. */
typedef void training_forward(double p, gsl_rng *r, const tensor *q,
                              const tensor *k, const tensor *v, tensor **out,
                              tensor **weights);

static void dot_in_training(double p, gsl_rng *r, const tensor *q,
                            const tensor *k, const tensor *v, tensor **out,
                            tensor **weights)
{
    dot_attention dot;
    OK(dot_attention_init(&dot, p));
    dot.training = 1;
    dot.rng = r;
    OK(dot_attention_forward(&dot, q, k, v, NULL, out, weights));
    dot_attention_free(&dot);
}

//> 05
static void additive_in_training(double p, gsl_rng *r, const tensor *q,
                                 const tensor *k, const tensor *v,
                                 tensor **out, tensor **weights)
{
    additive_attention add;
    additive_with_weights(&add, 3, 3, 4, p, 75);
    add.training = 1;
    add.rng = r;
    OK(additive_attention_forward(&add, q, k, v, NULL, out, weights));
    additive_attention_free(&add);
}

//<
/* The poolings, each in training. */
static training_forward *const trained[] = {
    dot_in_training,
//> 05
    additive_in_training,
//<
};
#define NTRAINED (sizeof trained / sizeof trained[0])

/* Training with dropout p: values (B, Lk, Lk) are identity matrices, so
 * out = the dropped-out weights themselves.  Each must be 0 or the kept
 * weight (the weights output, before dropout) divided by 1 - p; about p of them
 * are 0.  Returns the output. */
static tensor *check_dropout_pattern(training_forward *forward, double p,
                                     unsigned long seed)
{
    size_t B = 5, Lq = 40, Lk = 50, n = B * Lq * Lk;
    tensor *q = random_tensor(SHAPE(B, Lq, 3), 73);
    tensor *k = random_tensor(SHAPE(B, Lk, 3), 74), *v, *out;
    OK(tensor_alloc(SHAPE(B, Lk, Lk), &v));
    for (size_t b = 0; b < B; b++)
        for (size_t j = 0; j < Lk; j++)
            *TENSOR_AT(v, b, j, j) = 1.0;
    gsl_rng *r = mha_rng_new(seed);
    tensor *weights;
    forward(p, r, q, k, v, &out, &weights);
    size_t zeros = 0;
    for (size_t m = 0; m < n; m++) {
        double w = weights->data[m], o = out->data[m];
        cr_assert_gt(w, 0.0);
        if (o == 0.0)
            zeros++;
        else
            cr_assert(fabs(o - w / (1 - p)) <= 2 * DBL_EPSILON * o,
                      "weight %zu: %.17g kept as %.17g", m, w, o);
    }
    // the weights output is the softmax's, before dropout: rows sum to 1
    for (size_t row = 0; row < B * Lq; row++) {
        double sum = 0;
        for (size_t j = 0; j < Lk; j++)
            sum += weights->data[row * Lk + j];
        cr_assert(fabs(sum - 1) <= 1e-14);
    }
    // a binomial count: within 4 standard deviations of n p
    double sd = sqrt(n * p * (1 - p));
    cr_assert(fabs((double)zeros - n * p) <= 4 * sd,
              "%zu of %zu weights dropped, expected about %g", zeros, n, n * p);
    gsl_rng_free(r);
    FREE_ALL(q, k, v, weights);
    return out;
}

Test(dropout, training_zeroes_about_p_and_scales_the_rest)
{
    // p 0.3 for the dot product, 0.6 for the additive pooling
    for (size_t f = 0; f < NTRAINED; f++)
        tensor_free(check_dropout_pattern(trained[f], 0.3 + 0.3 * f, 1 + f));
}

Test(dropout, training_with_a_fixed_seed_repeats)
{
    for (size_t f = 0; f < NTRAINED; f++) {
        tensor *a = check_dropout_pattern(trained[f], 0.5, 9);
        tensor *b = check_dropout_pattern(trained[f], 0.5, 9);
        tensor *c = check_dropout_pattern(trained[f], 0.5, 10);
        cr_assert_eq(rel_error(a, b), 0.0);
        cr_assert_gt(rel_error(a, c), 0.0, "another seed, the same drops");
        FREE_ALL(a, b, c);
    }
}

Test(dropout, training_with_p_zero_needs_no_rng)
{
    tensor *q, *k, *v, *vl, *out, *w;
    d2l_toy(&q, &k, &v, &vl);
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    a.training = 1;
    OK(dot_attention_forward(&a, q, k, v, vl, &out, &w));
    check_d2l_toy_output(out, w);
    dot_attention_free(&a);
    FREE_ALL(q, k, v, vl, out, w);
}

/* --- errors --------------------------------------------------------- */

/* dot_attention_forward on queries (B, Lq, dq), keys (Bk, Lk, dk),
 * values (Bv, Lv, dv) fails with status and msg, and leaves out and the
 * weights NULL. */
static void dot_fails(const size_t *qs, const size_t *ks, const size_t *vs,
                      size_t qdim, const tensor *vl, int status,
                      const char *msg)
{
    tensor *q, *k, *v, *out = NULL, *w;
    OK(tensor_alloc(qdim, qs, &q));
    OK(tensor_alloc(3, ks, &k));
    OK(tensor_alloc(3, vs, &v));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    out = w = q;
    FAILS(dot_attention_forward(&a, q, k, v, vl, &out, &w), status, msg);
    cr_assert_null(out);
    cr_assert_null(w);
    dot_attention_free(&a);
    FREE_ALL(q, k, v);
}

#define S3(a, b, c) ((const size_t[]){a, b, c})

Test(dot_attention_errors, queries_not_3d)
{
    dot_fails((const size_t[]){2, 2}, S3(2, 10, 2), S3(2, 10, 4), 2, NULL,
              GSL_EBADLEN,
              "dot_attention_forward: queries, keys and values must be 3-D "
              "(B, L, features), got queries (2, 2), keys (2, 10, 2), "
              "values (2, 10, 4)");
}

Test(dot_attention_errors, batch_sizes_differ)
{
    dot_fails(S3(2, 1, 2), S3(3, 10, 2), S3(2, 10, 4), 3, NULL, GSL_EBADLEN,
              "dot_attention_forward: batch sizes differ (queries (2, 1, 2), "
              "keys (3, 10, 2), values (2, 10, 4))");
}

Test(dot_attention_errors, query_and_key_sizes_differ)
{
    dot_fails(S3(2, 1, 3), S3(2, 10, 2), S3(2, 10, 4), 3, NULL, GSL_EBADLEN,
              "dot_attention_forward: queries have d = 3 but keys have d = 2 "
              "(queries (2, 1, 3), keys (2, 10, 2), values (2, 10, 4))");
}

Test(dot_attention_errors, keys_and_values_differ_in_number)
{
    dot_fails(S3(2, 1, 2), S3(2, 10, 2), S3(2, 9, 4), 3, NULL, GSL_EBADLEN,
              "dot_attention_forward: keys have Lk = 10 but values have "
              "Lk = 9 (queries (2, 1, 2), keys (2, 10, 2), values (2, 9, 4))");
}

Test(dot_attention_errors, valid_lens_of_the_wrong_shape)
{
    tensor *vl;
    OK(tensor_alloc(SHAPE(3), &vl));
    dot_fails(S3(2, 2, 2), S3(2, 10, 2), S3(2, 10, 4), 3, vl, GSL_EBADLEN,
              "dot_attention_forward: valid_lens has shape (3,), expected "
              "(2,) or (2, 2) (queries (2, 2, 2), keys (2, 10, 2))");
    tensor_free(vl);
    OK(tensor_alloc(SHAPE(2, 5), &vl));
    dot_fails(S3(2, 2, 2), S3(2, 10, 2), S3(2, 10, 4), 3, vl, GSL_EBADLEN,
              "dot_attention_forward: valid_lens has shape (2, 5), expected "
              "(2,) or (2, 2) (queries (2, 2, 2), keys (2, 10, 2))");
    tensor_free(vl);
}

Test(dot_attention_errors, bad_valid_len_values)
{
    tensor *vl = make(SHAPE(2, 2), ((const double[]){1, 2, -3, 4}));
    dot_fails(S3(2, 2, 2), S3(2, 4, 2), S3(2, 4, 1), 3, vl, GSL_EINVAL,
              "dot_attention_forward: valid_lens[1, 0] = -3 is negative "
              "(queries (2, 2, 2), keys (2, 4, 2), valid_lens (2, 2))");
    tensor_free(vl);
    vl = make(SHAPE(2), ((const double[]){0.5, 1}));
    dot_fails(S3(2, 2, 2), S3(2, 4, 2), S3(2, 4, 1), 3, vl, GSL_EINVAL,
              "dot_attention_forward: valid_lens[0] = 0.5 is not a whole "
              "number (queries (2, 2, 2), keys (2, 4, 2), valid_lens (2,))");
    tensor_free(vl);
}

Test(dot_attention_errors, null_inputs)
{
    tensor *k, *out;
    OK(tensor_alloc(SHAPE(1, 1, 1), &k));
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    FAILS(dot_attention_forward(&a, NULL, k, k, NULL, &out, NULL), GSL_EINVAL,
          "dot_attention_forward: queries is NULL");
    FAILS(dot_attention_forward(&a, k, k, NULL, NULL, &out, NULL), GSL_EINVAL,
          "dot_attention_forward: values is NULL");
    cr_assert_null(out);
    dot_attention_free(&a);
    tensor_free(k);
}

Test(dot_attention_errors, dropout_settings)
{
    dot_attention a;
    FAILS(dot_attention_init(&a, 1.0), GSL_EINVAL,
          "dot_attention_init: dropout 1 is outside [0, 1)");
    FAILS(dot_attention_init(&a, -0.1), GSL_EINVAL,
          "dot_attention_init: dropout -0.1 is outside [0, 1)");
    FAILS(dot_attention_init(&a, NAN), GSL_EINVAL,
          "dot_attention_init: dropout nan is outside [0, 1)");
    dot_attention_free(&a); /* safe after a failed init */

    tensor *q, *k, *v, *vl, *out;
    d2l_toy(&q, &k, &v, &vl);
    OK(dot_attention_init(&a, 0.5));
    a.training = 1;
    FAILS(dot_attention_forward(&a, q, k, v, vl, &out, NULL), GSL_EINVAL,
          "dot_attention_forward: training with dropout 0.5 needs a random "
          "generator (rng is NULL)");
    cr_assert_null(out);
    a.dropout = 1.5;
    FAILS(dot_attention_forward(&a, q, k, v, vl, &out, NULL), GSL_EINVAL,
          "dot_attention_forward: dropout 1.5 is outside [0, 1)");
    dot_attention_free(&a);
    FREE_ALL(q, k, v, vl);
}

//> 05
Test(additive_attention_errors, feature_sizes_against_the_layers)
{
    tensor *q, *k, *v, *out, *w;
    OK(tensor_alloc(SHAPE(2, 1, 20), &q));
    OK(tensor_alloc(SHAPE(2, 10, 2), &k));
    OK(tensor_alloc(SHAPE(2, 10, 4), &v));
    additive_attention a;
    OK(additive_attention_init(&a, 3, 20, 8, 0.0)); /* keys of size 3 */
    w = q;
    FAILS(additive_attention_forward(&a, q, k, v, NULL, &out, &w), GSL_EBADLEN,
          "additive_attention_forward: keys have 2 features, W_k takes "
          "key_size 3 (queries (2, 1, 20), keys (2, 10, 2), values (2, 10, 4))");
    cr_assert_null(out);
    cr_assert_null(w);
    additive_attention_free(&a);
    OK(additive_attention_init(&a, 2, 16, 8, 0.0)); /* queries of size 16 */
    FAILS(additive_attention_forward(&a, q, k, v, NULL, &out, NULL), GSL_EBADLEN,
          "additive_attention_forward: queries have 20 features, W_q takes "
          "query_size 16 (queries (2, 1, 20), keys (2, 10, 2), "
          "values (2, 10, 4))");
    FAILS(additive_attention_forward(&a, q, k, q, NULL, &out, NULL), GSL_EBADLEN,
          "additive_attention_forward: keys have Lk = 10 but values have "
          "Lk = 1 (queries (2, 1, 20), keys (2, 10, 2), values (2, 1, 20))");
    additive_attention_free(&a);
    FREE_ALL(q, k, v);
}

Test(additive_attention_errors, init)
{
    additive_attention a;
    FAILS(additive_attention_init(&a, 2, 0, 8, 0.0), GSL_EINVAL,
          "linear_init W_q: in_features 0 and out_features 8 must both be "
          ">= 1");
    additive_attention_free(&a);
    FAILS(additive_attention_init(&a, 2, 3, 8, 1.0), GSL_EINVAL,
          "additive_attention_init: dropout 1 is outside [0, 1)");
    additive_attention_free(&a);
}

Test(additive_attention_errors, valid_lens_and_dropout)
{
    tensor *q, *k, *v, *out;
    OK(tensor_alloc(SHAPE(2, 3, 4), &q));
    OK(tensor_alloc(SHAPE(2, 5, 4), &k));
    OK(tensor_alloc(SHAPE(2, 5, 1), &v));
    tensor *vl = make(SHAPE(2, 3), ((const double[]){1, 2, 3, 4, 5, 6}));
    additive_attention a;
    OK(additive_attention_init(&a, 4, 4, 2, 0.2));
    FAILS(additive_attention_forward(&a, q, k, v, vl, &out, NULL), GSL_EINVAL,
          "additive_attention_forward: valid_lens[1, 2] = 6 is larger than "
          "the number of keys 5 (queries (2, 3, 4), keys (2, 5, 4), "
          "valid_lens (2, 3))");
    a.training = 1;
    FAILS(additive_attention_forward(&a, q, k, v, NULL, &out, NULL), GSL_EINVAL,
          "additive_attention_forward: training with dropout 0.2 needs a "
          "random generator (rng is NULL)");
    additive_attention_free(&a);
    FREE_ALL(q, k, v, vl);
}
//<

/* --- out of memory -------------------------------------------------- */

/* Fail allocation k = 0, 1, ... of `call` until it succeeds; each failure
 * must be GSL_ENOMEM with out and the weights output NULL, and must close
 * every trace_begin it opened (the trace goes to a memory stream), so a
 * line traced afterwards is not indented.  Leaks: valgrind and ASan. */
#define EVERY_ALLOCATION_FAILS(call, out, weights)                            \
    do {                                                                      \
        capture c_;                                                           \
        capture_start(&c_);                                                   \
        trace_to(c_.f);                                                       \
        int status_;                                                          \
        long k_ = 0;                                                          \
        do {                                                                  \
            mha_debug_fail_alloc_after(k_);                                   \
            status_ = (call);                                                 \
            mha_debug_fail_alloc_after(-1);                                   \
            if (status_ != GSL_SUCCESS) {                                     \
                cr_assert_eq(status_, GSL_ENOMEM, "allocation %ld: %s", k_,   \
                             mha_last_error());                               \
                cr_assert_null(out);                                          \
                cr_assert_null(weights);                                      \
            }                                                                 \
            k_++;                                                             \
        } while (status_ != GSL_SUCCESS && k_ < 1000);                        \
        fflush(c_.f);                                                         \
        size_t len_ = c_.len;                                                 \
        tensor_trace_note("top");                                                    \
        trace_to(NULL);                                                       \
        cr_assert_str_eq(capture_end(&c_) + len_, "# top\n");                 \
        capture_free(&c_);                                                    \
        cr_assert_eq(status_, GSL_SUCCESS);                                   \
        cr_assert_gt(k_, 5, "only %ld allocations", k_);                      \
        tensor_free(out);                                                     \
        tensor_free(weights);                                                 \
        out = weights = NULL;                                                 \
    } while (0)

Test(attention_memory, every_allocation_may_fail)
{
    // keys strided (one copy), 2-D valid_lens, training with dropout: every
    // allocation the forward passes can make
    tensor *q = random_tensor(SHAPE(2, 3, 4), 80), *k, *out = NULL, *w = NULL;
    tensor *k_base = random_tensor(SHAPE(2, 4, 5), 81);
    tensor *v = random_tensor(SHAPE(2, 5, 2), 82);
    OK(tensor_permute(k_base, SHAPE(0, 2, 1), &k));
    tensor *vl = make(SHAPE(2, 3), ((const double[]){1, 2, 3, 4, 5, 0}));

    dot_attention dot;
    OK(dot_attention_init(&dot, 0.5));
    dot.training = 1;
    dot.rng = mha_rng_new(1);
    EVERY_ALLOCATION_FAILS(dot_attention_forward(&dot, q, k, v, vl, &out, &w),
                           out, w);
    gsl_rng_free(dot.rng);
    dot_attention_free(&dot);

//> 05
    additive_attention add;
    additive_with_weights(&add, 4, 4, 3, 0.5, 83);
    add.training = 1;
    add.rng = mha_rng_new(2);
    EVERY_ALLOCATION_FAILS(
        additive_attention_forward(&add, q, k, v, vl, &out, &w), out, w);
    gsl_rng_free(add.rng);
    additive_attention_free(&add);

    // init: a failed init leaves nothing to free (and free is harmless)
    long k_ = 0;
    int status;
    do {
        mha_debug_fail_alloc_after(k_++);
        status = additive_attention_init(&add, 4, 4, 3, 0.0);
        mha_debug_fail_alloc_after(-1);
        if (status) {
            cr_assert_eq(status, GSL_ENOMEM);
            cr_assert_null(add.W_q.weight);
            cr_assert_null(add.W_k.weight);
            cr_assert_null(add.w_v.weight);
        }
        additive_attention_free(&add);
    } while (status != GSL_SUCCESS);
    cr_assert_gt(k_, 3);
//<
    FREE_ALL(q, k_base, k, v, vl);
}

/* --- trace ---------------------------------------------------------- */

/* The names a trace gives are the caller's: the inputs' own, carried
 * through each step (the lesson's names, as a chapter names its inputs). */
static void name_toy(tensor *q, tensor *k, tensor *v)
{
    OK(tensor_set_names(q, "B, Lq, d"));
    OK(tensor_set_names(k, "B, Lk, d"));
    OK(tensor_set_names(v, "B, Lk, dv"));
}

/* The trace of dot_attention_forward on d2l's toy, its inputs named as
 * a chapter names them (named) or not, held to want. */
static void dot_trace_is(int named, const char *want)
{
    tensor *q, *k, *v, *vl, *out;
    d2l_toy(&q, &k, &v, &vl);
    if (named)
        name_toy(q, k, v);
    dot_attention a;
    OK(dot_attention_init(&a, 0.0));
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(dot_attention_forward(&a, q, k, v, vl, &out, NULL));
    trace_to(NULL);
    cr_assert_str_eq(capture_end(&c), want);
    capture_free(&c);
    dot_attention_free(&a);
    FREE_ALL(q, k, v, vl, out);
}

Test(attention_trace, one_small_dot_product_attention)
{
    dot_trace_is(
        1,
        "dot_attention(scale 1/sqrt(2))       (2, 1, 2), (2, 10, 2), "
        "(2, 10, 4)\n"
        "  Q K^T                  new   (2, 1, 2) @ (2, 10, 2)^T -> "
        "(2, 1, 10)  (B, Lq, Lk)\n"
        "  masked_softmax(scale 0.707107, valid_lens (2,)) new   (2, 1, 10) "
        "-> (2, 1, 10)            (B, Lq, Lk)\n"
        "  weights V              new   (2, 1, 10) @ (2, 10, 4) -> (2, 1, 4)"
        "  (B, Lq, dv)\n");
}

/* Inputs without names: the trace gives sizes only, where a name would
 * be, and guesses none. */
Test(attention_trace, unnamed_inputs_give_sizes)
{
    dot_trace_is(
        0,
        "dot_attention(scale 1/sqrt(2))       (2, 1, 2), (2, 10, 2), "
        "(2, 10, 4)\n"
        "  Q K^T                  new   (2, 1, 2) @ (2, 10, 2)^T -> "
        "(2, 1, 10)\n"
        "  masked_softmax(scale 0.707107, valid_lens (2,)) new   (2, 1, 10) "
        "-> (2, 1, 10)\n"
        "  weights V              new   (2, 1, 10) @ (2, 10, 4) -> (2, 1, 4)"
        "\n");
}

//> 05
Test(attention_trace, additive_attention_with_dropout)
{
    tensor *q, *k, *v, *vl, *out;
    d2l_toy(&q, &k, &v, &vl);
    name_toy(q, k, v);
    additive_attention a;
    additive_with_weights(&a, 2, 2, 8, 0.25, 84);
    a.training = 1;
    a.rng = mha_rng_new(3);
    capture c;
    capture_start(&c);
    trace_to(c.f);
    OK(additive_attention_forward(&a, q, k, v, vl, &out, NULL));
    trace_to(NULL);
    cr_assert_str_eq(
        capture_end(&c),
        "additive_attention(num_hiddens 8)       (2, 1, 2), (2, 10, 2), "
        "(2, 10, 4)\n"
        "  W_q: x W^T             new   (2, 1, 2) -> (2, 1, 8)"
        "              (B, Lq, num_hiddens)\n"
        "  W_k: x W^T             new   (2, 10, 2) -> (2, 10, 8)"
        "            (B, Lk, num_hiddens)\n"
        "  tanh(q[:, :, None] + k[:, None]) new   (2, 1, 8) + (2, 10, 8) -> "
        "(2, 1, 10, 8)  (B, Lq, Lk, num_hiddens)\n"
        "  w_v: x W^T             new   (2, 1, 10, 8) -> (2, 1, 10, 1)"
        "      (B, Lq, Lk, 1)\n"
        "  reshape(2, 1, 10)      view  (2, 1, 10, 1) -> (2, 1, 10)"
        "         (B, Lq, Lk)\n"
        "  masked_softmax(valid_lens (2,)) new   (2, 1, 10) -> (2, 1, 10)"
        "            (B, Lq, Lk)\n"
        "  dropout(p=0.25)        new   (2, 1, 10) -> (2, 1, 10)"
        "            (B, Lq, Lk)\n"
        "  weights V              new   (2, 1, 10) @ (2, 10, 4) -> (2, 1, 4)"
        "  (B, Lq, dv)\n");
    capture_free(&c);
    gsl_rng_free(a.rng);
    additive_attention_free(&a);
    FREE_ALL(q, k, v, vl, out);
}
//<
//<
