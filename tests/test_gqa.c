//> 17
/* test_gqa.c: causal attention aligned at the end, and grouped-query
 * attention (G key-value heads shared by h/G query heads each): the
 * per-row lengths, tensor_expand's stride-0 view against
 * repeat_interleave's copy, the copy path, the tiled path and the fast
 * paths against plain loops written here, the trace of the grouped step,
 * and the errors.
 *
 * Shapes: queries (B, Lq, d_q), keys (B, Lk, d_k), values (B, Lk, d_v);
 * W_q (D, d_q), W_k (G*p, d_k), W_v (G*p, d_v), W_o (D_out, D), p = D/h;
 * out (B, Lq, D_out), weights (B, h, Lq, Lk). */
#include "check.h"

#include <criterion/parameterized.h>

/* The module from its formulas: the query heads read the key-value heads
 * in order, h/G consecutive heads to each (kv_of below, filled group by
 * group); query i sees keys j < valid_len and, with causal,
 * j <= i + Lk - Lq; the softmax runs over the visible keys only (no
 * -1e6 anywhere).  valid: NULL, (B,) or (B, Lq) by per_query.  weights
 * (B, h, Lq, Lk) may be NULL. */
static void loop_gqa(const multihead *m, size_t B, size_t Lq, size_t Lk,
                     const double *q, const double *k, const double *v,
                     const double *valid, int per_query, double *out,
                     double *weights)
{
    const multihead_config *c = &m->cfg;
    size_t D = c->num_hiddens, h = c->num_heads, G = c->kv_heads, p = D / h;
    size_t Dkv = G * p;
    size_t kv_of[64]; // query head -> the key-value head it reads
    cr_assert_leq(h, 64);
    for (size_t g = 0, hd = 0; g < G; g++)
        for (size_t r = 0; r < h / G; r++)
            kv_of[hd++] = g;
    double *qp = malloc(Lq * D * sizeof *qp), *kp = malloc(Lk * Dkv * sizeof *kp);
    double *vp = malloc(Lk * Dkv * sizeof *vp), *cat = malloc(D * sizeof *cat);
    double *s = malloc(Lk * sizeof *s);
    for (size_t b = 0; b < B; b++) {
        for (size_t i = 0; i < Lq; i++)
            linear_by_dots(&m->W_q, q + (b * Lq + i) * c->query_size, qp + i * D);
        for (size_t t = 0; t < Lk; t++) {
            linear_by_dots(&m->W_k, k + (b * Lk + t) * c->key_size, kp + t * Dkv);
            linear_by_dots(&m->W_v, v + (b * Lk + t) * c->value_size, vp + t * Dkv);
        }
        for (size_t i = 0; i < Lq; i++) {
            size_t see = !valid ? Lk : (size_t)(per_query ? valid[b * Lq + i] : valid[b]);
            if (c->causal && i + Lk - Lq + 1 < see)
                see = i + Lk - Lq + 1;
            for (size_t hd = 0; hd < h; hd++) {
                size_t g = kv_of[hd]; // the key-value head it reads
                double mx = -INFINITY, sum = 0;
                for (size_t t = 0; t < see; t++) {
                    double dot = 0;
                    for (size_t j = 0; j < p; j++)
                        dot += qp[i * D + hd * p + j] * kp[t * Dkv + g * p + j];
                    s[t] = dot / sqrt((double)p);
                    mx = s[t] > mx ? s[t] : mx;
                }
                for (size_t t = 0; t < see; t++)
                    sum += s[t] = exp(s[t] - mx);
                for (size_t j = 0; j < p; j++)
                    cat[hd * p + j] = 0;
                for (size_t t = 0; t < Lk; t++) {
                    double w = t < see ? s[t] / sum : 0;
                    if (weights)
                        weights[((b * h + hd) * Lq + i) * Lk + t] = w;
                    for (size_t j = 0; j < p && t < see; j++)
                        cat[hd * p + j] += w * vp[t * Dkv + g * p + j];
                }
            }
            linear_by_dots(&m->W_o, cat, out + (b * Lq + i) * c->out_size);
        }
    }
    free(qp);
    free(kp);
    free(vp);
    free(cat);
    free(s);
}

/* --- the lengths a row sees ----------------------------------------- */

Test(gqa, row_len_is_aligned_at_the_end)
{
    // Lq 3, Lk 5: queries are positions 2, 3, 4 and see 3, 4, 5 keys
    for (size_t i = 0; i < 3; i++)
        cr_assert_eq(softmax_row_len(NULL, 1, 0, i, 3, 5), i + 3);
    // Lq = Lk: the usual triangle
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(softmax_row_len(NULL, 1, 0, i, 4, 4), i + 1);
    // Lq 4 > Lk 2: rows 0 and 1 see nothing, rows 2 and 3 see 1 and 2
    size_t want[4] = {0, 0, 1, 2};
    for (size_t i = 0; i < 4; i++)
        cr_assert_eq(softmax_row_len(NULL, 1, 0, i, 4, 2), want[i]);
    // with valid_lens (B,) = [2, 5]: the smaller of the two
    tensor *vl;
    OK(tensor_from_array(SHAPE(2), (double[]){2, 5}, &vl));
    cr_assert_eq(softmax_row_len(vl, 1, 0, 2, 3, 5), 2);
    cr_assert_eq(softmax_row_len(vl, 1, 1, 0, 3, 5), 3);
    cr_assert_eq(softmax_row_len(vl, 0, 0, 0, 3, 5), 2);
    // causal off: the valid length, causal on and nothing else: the rule
    tensor *rows;
    OK(valid_lens_per_row(vl, 1, 2, 3, 5, 0, &rows));
    double expect[6] = {2, 2, 2, 3, 4, 5};
    cr_assert_eq(rows->ndim, 2);
    for (size_t j = 0; j < 6; j++)
        cr_assert_eq(rows->data[j], expect[j], "entry %zu", j);
    tensor_free(rows);
    OK(valid_lens_per_row(vl, 0, 2, 3, 5, 0, &rows));
    double plain[6] = {2, 2, 2, 5, 5, 5};
    for (size_t j = 0; j < 6; j++)
        cr_assert_eq(rows->data[j], plain[j], "entry %zu", j);
    FREE_ALL(rows, vl);
}

Test(gqa, empty_rows_are_found)
{
    size_t b, i;
    cr_assert_eq(softmax_find_empty_row(NULL, 1, 2, 4, 4, &b, &i), 0);
    cr_assert_eq(softmax_find_empty_row(NULL, 1, 2, 5, 3, &b, &i), 1);
    cr_assert_eq(b, 0);
    cr_assert_eq(i, 0);
    cr_assert_eq(softmax_find_empty_row(NULL, 0, 2, 5, 3, &b, &i), 0);
    tensor *vl;
    OK(tensor_from_array(SHAPE(2, 2), (double[]){1, 1, 1, 0}, &vl));
    cr_assert_eq(softmax_find_empty_row(vl, 1, 2, 2, 2, &b, &i), 1);
    cr_assert_eq(b, 1);
    cr_assert_eq(i, 1);
    tensor_free(vl);
}

/* --- expand: a view with stride 0 ------------------------------------ */

Test(gqa, expand_reads_one_head_for_the_whole_group)
{
    tensor *kh = arange(SHAPE(4, 3, 2)); // (B*G, Lk, p)
    tensor *one, *shared, *copied;
    OK(tensor_view(kh, SIZES(4, 1, 3, 2), NULL, &one));
    OK(tensor_expand(one, SIZES(-1, 3, -1, -1), NULL, &shared));
    assert_shape(shared, SHAPE(4, 3, 3, 2));
    assert_strides(shared, SHAPE(6, 0, 2, 1));
    cr_assert(tensor_shares_buffer(shared, kh));
    // every query head j of group g reads the very same doubles
    for (size_t g = 0; g < 4; g++)
        for (size_t j = 0; j < 3; j++)
            for (size_t t = 0; t < 3; t++)
                cr_assert_eq(TENSOR_AT(shared, g, j, t, 1),
                             TENSOR_AT(kh, g, t, 1));
    // flattening the group into the batch cannot be a view: it copies,
    // and the copy is repeat_interleave(kh, 3, dim=0)
    TRACES(tensor_reshape(shared, SIZES(12, 3, 2), NULL, &copied),
           "reshape(12, 3, 2)        copy  (4, 3, 3, 2) -> (12, 3, 2)\n");
    for (size_t r = 0; r < 12; r++)
        for (size_t t = 0; t < 3; t++)
            for (size_t e = 0; e < 2; e++)
                cr_assert_eq(*TENSOR_AT(copied, r, t, e),
                             (double)((r / 3) * 6 + t * 2 + e));
    FREE_ALL(kh, one, shared, copied);
}

Test(gqa, expand_trace_new_dims_and_errors)
{
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 1), &x));
    tensor_set_names(x, "B, one");
    TRACES(tensor_expand(x, SIZES(3, -1, 5), NULL, &y),
           "expand(3, -1, 5)         view  (2, 1) -> (3, 2, 5)                 (3, B, one)\n");
    assert_strides(y, SHAPE(0, 1, 0));
    tensor_free(y);
    FAILS(tensor_expand(x, SIZES(3, 5), NULL, &y), GSL_EINVAL,
          "tensor_expand: size 3 for dimension 0 of shape (2, 1): only a "
          "dimension of size 1 expands (-1 keeps a size)");
    cr_assert_null(y);
    FAILS(tensor_expand(x, SIZES(5), NULL, &y), GSL_EINVAL,
          "tensor_expand: 1 sizes for shape (2, 1), expected 2 to 4");
    FAILS(tensor_expand(x, SIZES(-1, 1, 1), NULL, &y), GSL_EINVAL,
          "tensor_expand: size -1 for dimension 0 of shape (2, 1): only a "
          "dimension of size 1 expands (-1 keeps a size)");
    tensor_free(x);
}

/* --- the module: copy, tiled, fast and naive paths ------------------ */

struct gqa_case {
    size_t B, Lq, Lk, dq, dk, dv, D, h, G;
    int causal;
    int lens; /* 0 none, 1 (B,), 2 (B, Lq) */
    int bias;
};

static struct gqa_case gqa_cases[] = {
    {2, 4, 6, 8, 8, 8, 8, 4, 2, 0, 0, 0},
    {2, 4, 6, 8, 6, 5, 8, 4, 2, 1, 1, 1},
    {3, 5, 5, 12, 12, 12, 12, 6, 3, 1, 2, 1},
    {1, 3, 7, 6, 6, 6, 12, 4, 1, 1, 0, 0},  // multi-query, B = 1
    {2, 6, 6, 10, 7, 9, 16, 8, 2, 0, 2, 1},
    {2, 1, 9, 8, 8, 8, 8, 2, 1, 1, 1, 0},   // one query: a decoding step
    {4, 7, 7, 6, 6, 6, 6, 3, 3, 1, 2, 1},   // G = h, causal
    {2, 33, 40, 16, 16, 16, 16, 4, 2, 1, 2, 0}, // several tiles
    {1, 1, 1, 4, 4, 4, 4, 2, 1, 1, 0, 1},
    {3, 2, 5, 5, 5, 5, 10, 5, 1, 0, 1, 0},
};

ParameterizedTestParameters(gqa, paths_equal_loops)
{
    return cr_make_param_array(struct gqa_case, gqa_cases,
                               sizeof gqa_cases / sizeof gqa_cases[0]);
}

ParameterizedTest(struct gqa_case *c, gqa, paths_equal_loops)
{
    gsl_rng *r = mha_rng_new(31 + c->B * 5 + c->Lq * 7 + c->G);
    multihead m;
    multihead_config cfg = {.query_size = c->dq, .key_size = c->dk,
                            .value_size = c->dv, .num_hiddens = c->D,
                            .num_heads = c->h, .bias = c->bias,
                            .kv_heads = c->G, .causal = c->causal};
    OK(multihead_init(&m, &cfg));
    size_t p = c->D / c->h;
    cr_assert_eq(m.W_k.weight->shape[0], c->G * p);
    cr_assert_eq(m.W_v.weight->shape[0], c->G * p);
    multihead_reset_xavier(&m, r);
    if (c->bias)
        random_biases(&m, r);
    tensor *q = normal_tensor(SHAPE(c->B, c->Lq, c->dq), r, 1);
    tensor *k = normal_tensor(SHAPE(c->B, c->Lk, c->dk), r, 1);
    tensor *v = normal_tensor(SHAPE(c->B, c->Lk, c->dv), r, 1);
    tensor *lens = NULL;
    if (c->lens == 1)
        OK(tensor_alloc(SHAPE(c->B), &lens));
    else if (c->lens == 2)
        OK(tensor_alloc(SHAPE(c->B, c->Lq), &lens));
    if (lens) /* 1 .. Lk: causal rows may not be empty */
        for (size_t i = 0; i < tensor_numel(lens); i++)
            lens->data[i] = (double)(1 + (i * 5 + 2) % c->Lk);
    tensor *want, *want_w, *copy, *tiled, *fast = NULL, *naive = NULL;
    OK(tensor_alloc(SHAPE(c->B, c->Lq, c->D), &want));
    OK(tensor_alloc(SHAPE(c->B, c->h, c->Lq, c->Lk), &want_w));
    loop_gqa(&m, c->B, c->Lq, c->Lk, q->data, k->data, v->data,
             lens ? lens->data : NULL, c->lens == 2, want->data, want_w->data);

    tensor *w; // (B, h, Lq, Lk)
    OK(multihead_forward(&m, q, k, v, lens, &copy, &w));
    double err = rel_error(copy, want);
    cr_assert(err <= 1e-12, "copy path vs loops: %g", err);
    cr_assert(tensor_same_shape(w, want_w));
    err = rel_error(w, want_w);
    cr_assert(err <= 1e-12, "weights vs loops: %g", err);
    tensor_free(w);

    OK(multihead_forward_tiled(&m, q, k, v, lens, 4, 8, &tiled));
    err = rel_error(tiled, copy);
    cr_assert(err <= 1e-12, "tiled vs copy path: %g", err);
    tensor_free(tiled);
    OK(multihead_forward_tiled(&m, q, k, v, lens, 0, 0, &tiled));
    err = rel_error(tiled, copy);
    cr_assert(err <= 1e-12, "tiled (default tiles) vs copy path: %g", err);

//> full
    multihead_fast_options opt = {.block_rows = 3};
    OK(multihead_forward_fast(&m, q, k, v, lens, &opt, &fast, &w));
    err = rel_error(fast, copy);
    cr_assert(err <= 1e-12, "fast vs copy path: %g", err);
    err = rel_error(w, want_w);
    cr_assert(err <= 1e-12, "fast weights vs loops: %g", err);
    tensor_free(fast);
    tensor_free(w);
    OK(multihead_forward_fast(&m, q, k, v, lens, NULL, &fast, NULL));
    err = rel_error(fast, copy);
    cr_assert(err <= 1e-12, "fast (default) vs copy path: %g", err);
    OK(multihead_forward_naive(&m, q, k, v, lens, &naive));
    err = rel_error(naive, want);
    cr_assert(err <= 1e-12, "naive vs loops: %g", err);
//<

    multihead_free(&m);
    FREE_ALL(q, k, v, lens, want, want_w, copy, tiled, fast, naive);
    gsl_rng_free(r);
}

/* The folded attention equals attention on K and V whose heads were
 * copied h/G times (repeat_interleave, as PyTorch's enable_gqa does
 * without a kernel of its own): same heads, one copy fewer. */
Test(gqa, folding_equals_repeat_interleave)
{
    const size_t B = 2, Lq = 3, Lk = 5, h = 6, G = 2, p = 2, group = h / G;
    gsl_rng *r = mha_rng_new(8);
    multihead m;
    SELF_MODULE(&m, 12, .num_hiddens = h * p, .num_heads = h, .kv_heads = G,
                    .causal = 1);
    tensor *qh = normal_tensor(SHAPE(B * h, Lq, p), r, 1);
    tensor *kh = normal_tensor(SHAPE(B * G, Lk, p), r, 1);
    tensor *vh = normal_tensor(SHAPE(B * G, Lk, p), r, 1);
    tensor *rows, *lens, *heads, *k4, *ke, *kr, *v4, *ve, *vr, *ref;
    OK(valid_lens_per_row(NULL, 1, B, Lq, Lk, 0, &rows));
    OK(repeat_valid_lens(rows, h, &lens));
    OK(multihead_attend(&m, qh, kh, vh, lens, &heads, NULL));
    // repeat_interleave by expand + reshape: the reshape copies
    OK(tensor_view(kh, SIZES(B * G, 1, Lk, p), NULL, &k4));
    OK(tensor_expand(k4, SIZES(-1, group, -1, -1), NULL, &ke));
    OK(tensor_reshape(ke, SIZES(B * h, Lk, p), NULL, &kr));
    OK(tensor_view(vh, SIZES(B * G, 1, Lk, p), NULL, &v4));
    OK(tensor_expand(v4, SIZES(-1, group, -1, -1), NULL, &ve));
    OK(tensor_reshape(ve, SIZES(B * h, Lk, p), NULL, &vr));
    cr_assert(!tensor_shares_buffer(kr, kh), "repeat_interleave copies");
    dot_attention a;
    OK(dot_attention_init(&a, 0));
    OK(dot_attention_forward(&a, qh, kr, vr, lens, &ref, NULL));
    double err = rel_error(heads, ref);
    cr_assert(err <= 1e-14, "folded vs repeated: %g", err);
    // the heads of group g of example b (batch rows in order) read key
    // head g of example b
    for (size_t b = 0, i = 0; b < B; b++)
        for (size_t g = 0; g < G; g++)
            for (size_t r = 0; r < group; r++, i++)
                cr_assert_eq(*TENSOR_AT(kr, i, 4, 1),
                             *TENSOR_AT(kh, b * G + g, 4, 1));
    dot_attention_free(&a);
    FREE_ALL(qh, kh, vh, rows, lens, heads, k4, ke, kr, v4, ve, vr, ref);
    multihead_free(&m);
    gsl_rng_free(r);
}

/* --- errors ----------------------------------------------------------- */

Test(gqa, config_and_empty_row_errors)
{
    static const struct {
        size_t kv_heads;
        const char *message;
    } refused[] = {
        {3, "multihead: kv_heads G = 3 does not divide num_heads h = 4 (each "
            "key-value head serves h/G query heads)"},
        {8, "multihead: kv_heads G = 8 does not divide num_heads h = 4 (each "
            "key-value head serves h/G query heads)"},
    };
    multihead m;
    multihead_config cfg = {.query_size = 8, .key_size = 8, .value_size = 8,
                            .num_hiddens = 8, .num_heads = 4};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cfg.kv_heads = refused[i].kv_heads;
        config_refused(&cfg, GSL_EBADLEN, refused[i].message);
    }
    cfg.kv_heads = 0; // 0: one key-value head per query head
    OK(multihead_init(&m, &cfg));
    cr_assert_eq(m.cfg.kv_heads, 4);
    cr_assert_eq(m.W_k.weight->shape[0], 8);
    multihead_free(&m);

    cfg.kv_heads = 2;
    cfg.causal = 1;
    OK(multihead_init(&m, &cfg));
    tensor *q, *k, *vl, *out;
    OK(tensor_alloc(SHAPE(2, 5, 8), &q));
    OK(tensor_alloc(SHAPE(2, 3, 8), &k));
    FAILS(multihead_forward(&m, q, k, k, NULL, &out, NULL), GSL_EINVAL,
          "multihead: causal: query 0 of example 0 sees no key (Lq 5, Lk 3: "
          "query i sees key j only when j <= i + Lk - Lq)");
    cr_assert_null(out);
    OK(tensor_from_array(SHAPE(2), (double[]){3, 0}, &vl));
    FAILS(multihead_forward(&m, k, k, k, vl, &out, NULL), GSL_EINVAL,
          "multihead: causal: query 0 of example 1 sees no key (valid_len 0, "
          "Lq 3, Lk 3: query i sees key j only when j <= i + Lk - Lq)");
//> full
    FAILS(multihead_forward_fast(&m, k, k, k, vl, NULL, &out, NULL), GSL_EINVAL,
          "multihead: causal: query 0 of example 1 sees no key (valid_len 0, "
          "Lq 3, Lk 3: query i sees key j only when j <= i + Lk - Lq)");
//<
    FAILS(multihead_forward_tiled(&m, k, k, k, vl, 0, 0, &out), GSL_EINVAL,
          "multihead: causal: query 0 of example 1 sees no key (valid_len 0, "
          "Lq 3, Lk 3: query i sees key j only when j <= i + Lk - Lq)");
    // without causal, valid_len 0 is d2l's uniform row, as ever
    m.cfg.causal = 0;
    tensor *w;
    OK(multihead_forward(&m, k, k, k, vl, &out, &w));
    for (size_t j = 0; j < 3; j++)
        cr_assert_float_eq(*TENSOR_AT(w, 1, 3, 0, j), 1.0 / 3, 1e-15);
    tensor_free(out);
    tensor_free(w);
    multihead_free(&m);
    FREE_ALL(q, k, vl);
}

/* --- the backward pass -------------------------------------------------- */

/* A grouped module equals the multi-head module whose W_k and W_v repeat
 * each key-value head's rows for the h/G query heads that read it (and
 * b_k, b_v likewise): the same forward, and gradients that are those of
 * the copies summed over each group, as a shared weight's must be.
 * Causal with per-row valid_lens, B = 2. */
Test(gqa, backward_sums_the_group_of_a_shared_head)
{
    const size_t B = 2, Lq = 4, Lk = 6, d = 5, D = 8, h = 4, G = 2, p = 2;
    const size_t group = h / G;
    gsl_rng *r = mha_rng_new(77);
    multihead gm, fm, gg, fg;
    multihead_config gcfg = {.query_size = d, .key_size = d, .value_size = d,
                             .num_hiddens = D, .num_heads = h, .bias = 1,
                             .kv_heads = G, .causal = 1};
    multihead_config fcfg = gcfg;
    fcfg.kv_heads = h;
    OK(multihead_init(&gm, &gcfg));
    OK(multihead_init(&fm, &fcfg));
    OK(multihead_init(&gg, &gcfg));
    OK(multihead_init(&fg, &fcfg));
    multihead_reset_xavier(&gm, r);
    random_biases(&gm, r);
    OK(tensor_copy_into(fm.W_q.weight, gm.W_q.weight));
    OK(tensor_copy_into(fm.W_q.bias, gm.W_q.bias));
    OK(tensor_copy_into(fm.W_o.weight, gm.W_o.weight));
    OK(tensor_copy_into(fm.W_o.bias, gm.W_o.bias));
    // row hd*p + e of the full W_k is row g*p + e of the grouped, for the
    // query heads hd of group g
    for (size_t g = 0; g < G; g++)
        for (size_t hd = g * group; hd < (g + 1) * group; hd++)
            for (size_t e = 0; e < p; e++) {
                size_t fr = hd * p + e, gr = g * p + e;
                for (size_t j = 0; j < d; j++) {
                    *TENSOR_AT(fm.W_k.weight, fr, j) = *TENSOR_AT(gm.W_k.weight, gr, j);
                    *TENSOR_AT(fm.W_v.weight, fr, j) = *TENSOR_AT(gm.W_v.weight, gr, j);
                }
                fm.W_k.bias->data[fr] = gm.W_k.bias->data[gr];
                fm.W_v.bias->data[fr] = gm.W_v.bias->data[gr];
            }
    tensor *q = normal_tensor(SHAPE(B, Lq, d), r, 1), *k = normal_tensor(SHAPE(B, Lk, d), r, 1);
    tensor *v = normal_tensor(SHAPE(B, Lk, d), r, 1), *dout = normal_tensor(SHAPE(B, Lq, D), r, 1);
    tensor *lens, *gout, *fout, *gdq, *gdk, *gdv, *fdq, *fdk, *fdv;
    OK(tensor_from_array(SHAPE(B, Lq), (double[]){2, 6, 4, 5, 6, 1, 3, 6}, &lens));
    multihead_cache gc = {0}, fc = {0};
    OK(multihead_forward_cached(&gm, q, k, v, lens, NULL, &gc, &gout, NULL));
    OK(multihead_forward_cached(&fm, q, k, v, lens, NULL, &fc, &fout, NULL));
    double err = rel_error(gout, fout);
    cr_assert(err <= 1e-13, "forward: %g", err);
    OK(multihead_backward(&gm, &gc, dout, &gg, NULL, &gdq, &gdk, &gdv));
    OK(multihead_backward(&fm, &fc, dout, &fg, NULL, &fdq, &fdk, &fdv));
    cr_assert(rel_error(gdq, fdq) <= 1e-12, "dq: %g", rel_error(gdq, fdq));
    cr_assert(rel_error(gdk, fdk) <= 1e-12, "dk: %g", rel_error(gdk, fdk));
    cr_assert(rel_error(gdv, fdv) <= 1e-12, "dv: %g", rel_error(gdv, fdv));
    cr_assert(rel_error(gg.W_q.weight, fg.W_q.weight) <= 1e-12);
    cr_assert(rel_error(gg.W_o.weight, fg.W_o.weight) <= 1e-12);
    // the grouped dW_k: the full module's rows summed over each group
    tensor *sum_k, *sum_v, *sum_bk, *sum_bv;
    OK(tensor_alloc(SHAPE(G * p, d), &sum_k));
    OK(tensor_alloc(SHAPE(G * p, d), &sum_v));
    OK(tensor_alloc(SHAPE(G * p), &sum_bk));
    OK(tensor_alloc(SHAPE(G * p), &sum_bv));
    for (size_t g = 0; g < G; g++)
        for (size_t hd = g * group; hd < (g + 1) * group; hd++)
            for (size_t e = 0; e < p; e++) {
                size_t fr = hd * p + e, gr = g * p + e;
                for (size_t j = 0; j < d; j++) {
                    *TENSOR_AT(sum_k, gr, j) += *TENSOR_AT(fg.W_k.weight, fr, j);
                    *TENSOR_AT(sum_v, gr, j) += *TENSOR_AT(fg.W_v.weight, fr, j);
                }
                sum_bk->data[gr] += fg.W_k.bias->data[fr];
                sum_bv->data[gr] += fg.W_v.bias->data[fr];
            }
    cr_assert(rel_error(gg.W_k.weight, sum_k) <= 1e-12, "dW_k: %g",
              rel_error(gg.W_k.weight, sum_k));
    cr_assert(rel_error(gg.W_v.weight, sum_v) <= 1e-12, "dW_v: %g",
              rel_error(gg.W_v.weight, sum_v));
    cr_assert(rel_error(gg.W_v.bias, sum_bv) <= 1e-12);
    // b_k's gradient is 0 up to rounding (a shift of every key of a row
    // leaves its softmax as it was): compare absolutely
    for (size_t i = 0; i < G * p; i++)
        cr_assert(fabs(gg.W_k.bias->data[i] - sum_bk->data[i]) <= 1e-12);
    multihead_cache_free(&gc);
    multihead_cache_free(&fc);
    multihead *mods[] = {&gm, &fm, &gg, &fg};
    for (size_t i = 0; i < 4; i++)
        multihead_free(mods[i]);
    FREE_ALL(q, k, v, dout, lens, gout, fout, gdq, gdk, gdv, fdq, fdk, fdv,
             sum_k, sum_v, sum_bk, sum_bv);
    gsl_rng_free(r);
}
//<
