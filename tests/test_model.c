//> 13
/* test_model.c: the tiny model of chapters 13-14: its task, its loss by
 * hand, every gradient against central differences, pruning against
 * masking, its flop count by hand. */
#include "check.h"

static void small_model(model *m, model *g, size_t h, unsigned long seed)
{
    model_config cfg = {.vocab = 4, .seq_len = 3, .d_model = 4,
                        .num_heads = h};
    OK(model_init(m, &cfg));
    if (g)
        OK(model_init(g, &cfg));
    gsl_rng *r = mha_rng_new(seed);
    model_reset(m, r);
    /* biases too, so that their gradients are exercised */
    tensor_fill_normal(m->attn.W_q.bias, r, 0, 0.3);
    tensor_fill_normal(m->attn.W_v.bias, r, 0, 0.3);
    tensor_fill_normal(m->attn.W_o.bias, r, 0, 0.3);
    gsl_rng_free(r);
}

/* The targets: the previous token (the token itself at position 0) and
 * the first token. */
Test(model, batch_targets)
{
    model_config cfg = {.vocab = 7, .seq_len = 5, .d_model = 4,
                        .num_heads = 2};
    gsl_rng *r = mha_rng_new(41);
    tensor *tok, *tgt;
    OK(model_make_batch(&cfg, 6, r, &tok, &tgt));
    assert_shape(tok, SHAPE(6, 5));
    cr_assert_eq(tgt->shape[2], 2);
    int seen[7] = {0};
    for (size_t b = 0; b < 6; b++)
        for (size_t i = 0; i < 5; i++) {
            double x = *TENSOR_AT(tok, b, i);
            cr_assert(x >= 0 && x < 7 && x == floor(x));
            seen[(int)x] = 1;
            cr_assert_eq(*TENSOR_AT(tgt, b, i, 0),
                         *TENSOR_AT(tok, b, i ? i - 1 : 0));
            cr_assert_eq(*TENSOR_AT(tgt, b, i, 1), *TENSOR_AT(tok, b, 0));
        }
    int kinds = 0;
    for (int v = 0; v < 7; v++)
        kinds += seen[v];
    cr_assert_geq(kinds, 5, "30 draws from 7 tokens show most of them");
    FREE_ALL(tok, tgt);
    gsl_rng_free(r);
}

/* All parameters zero: every logit is 0, so each answer's loss is log V
 * and the first token, 0, wins every tie. */
Test(model, zero_model_loss_is_log_v)
{
    model_config cfg = {.vocab = 5, .seq_len = 4, .d_model = 6,
                        .num_heads = 3};
    model m;
    OK(model_init(&m, &cfg));
    tensor *tok, *tgt;
    OK(tensor_from_array(SHAPE(1, 4), (double[]){0, 3, 0, 2}, &tok));
    OK(tensor_from_array(SHAPE(1, 4, 2),
                         (double[]){0, 0, 0, 0, 3, 0, 0, 0}, &tgt));
    model_score s;
    OK(model_loss(&m, tok, tgt, NULL, NULL, NULL, &s));
    cr_assert_float_eq(s.loss, log(5.0), 1e-15);
    cr_assert_eq(s.answers, 8);
    cr_assert_eq(s.correct, 7); /* all but the 3 */
    cr_assert_eq(s.per_answer_correct[0], 3);
    cr_assert_eq(s.per_answer_correct[1], 4);
    cr_assert_eq(s.sequences, 1);
    cr_assert_eq(s.sequences_correct, 0);
    /* the weights model_predict gives: causal, so query 0 sees only key 0 */
    tensor *w;
    OK(model_predict(&m, tok, NULL, &w));
    cr_assert_eq(w->shape[1], 3);
    cr_assert_eq(*TENSOR_AT(w, 0, 2, 0, 0), 1.0);
    cr_assert_eq(*TENSOR_AT(w, 0, 2, 0, 1), 0.0);
    cr_assert_float_eq(*TENSOR_AT(w, 0, 1, 3, 2), 0.25, 1e-15);
    FREE_ALL(w, tok, tgt);
    model_free(&m);
}

struct loss_ctx {
    model *m;
    tensor *tok, *tgt, *mask;
};

static double loss_of(void *p)
{
    struct loss_ctx *c = p;
    model_score s;
    OK(model_loss(c->m, c->tok, c->tgt, c->mask, NULL, NULL, &s));
    return s.loss;
}

/* Every parameter of the model and the head mask, by central
 * differences: relative error <= 1e-6. */
Test(model, gradcheck_every_parameter)
{
    model m, g;
    small_model(&m, &g, 2, 42);
    gsl_rng *r = mha_rng_new(43);
    tensor *tok, *tgt, *mask = NULL, *dmask = NULL;
    size_t n = MODEL_NUM_PARAMS; // the parameters checked
    OK(model_make_batch(&m.cfg, 3, r, &tok, &tgt));
//> 14
    // and the head mask, as one parameter more
    OK(tensor_from_array(SHAPE(2), (double[]){0.8, 1.3}, &mask));
    OK(tensor_alloc(SHAPE(2), &dmask));
    n++;
//<
    OK(model_loss(&m, tok, tgt, mask, &g, dmask, NULL));
    tensor *params[MODEL_NUM_PARAMS + 1], *grads[MODEL_NUM_PARAMS + 1];
    cr_assert_eq(model_params(&m, params), MODEL_NUM_PARAMS);
    model_params(&g, grads);
    params[MODEL_NUM_PARAMS] = mask;
    grads[MODEL_NUM_PARAMS] = dmask;
    struct loss_ctx c = {&m, tok, tgt, mask};
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        tensor *num;
        OK(tensor_alloc(params[i]->ndim, params[i]->shape, &num));
        for (size_t k = 0; k < tensor_numel(num); k++) {
            double saved = params[i]->data[k], eps = 1e-5;
            params[i]->data[k] = saved + eps;
            double up = loss_of(&c);
            params[i]->data[k] = saved - eps;
            double down = loss_of(&c);
            params[i]->data[k] = saved;
            num->data[k] = (up - down) / (2 * eps);
        }
        double big = 0;
        for (size_t k = 0; k < tensor_numel(num); k++)
            big = fabs(num->data[k]) > big ? fabs(num->data[k]) : big;
        if (i == 5) { /* W_k's bias: zero in truth (softmax ignores a shift) */
            cr_assert_lt(big, 1e-9);
        } else {
            double err = rel_error(grads[i], num);
            cr_assert_leq(err, 1e-6, "parameter %zu: relative error %g", i,
                          err);
            worst = err > worst ? err : worst;
        }
        tensor_free(num);
    }
    cr_log_info("model: worst relative error %.3g", worst);
    FREE_ALL(tok, tgt, mask, dmask);
    model_free(&m);
    model_free(&g);
    gsl_rng_free(r);
}

//> 14
/* Keeping heads 2 and 0 gives what masking heads 1 and 3 gives. */
Test(model, pruning_equals_masking)
{
    model m, pruned;
    small_model(&m, NULL, 4, 44);
    gsl_rng *r = mha_rng_new(45);
    tensor *tok, *tgt, *mask;
    OK(model_make_batch(&m.cfg, 5, r, &tok, &tgt));
    OK(tensor_from_array(SHAPE(4), (double[]){1, 0, 1, 0}, &mask));
    model_score masked, small;
    OK(model_loss(&m, tok, tgt, mask, NULL, NULL, &masked));
    OK(model_prune_heads(&m, (size_t[]){2, 0}, 2, &pruned));
    cr_assert_eq(pruned.cfg.num_heads, 2);
    cr_assert_eq(pruned.cfg.head_size, 1);
    cr_assert_eq(pruned.attn.W_q.weight->shape[0], 2);
    cr_assert_eq(pruned.attn.W_o.weight->shape[1], 2);
    /* head 2's row of W_q is now row 0; its column of W_o column 0 */
    cr_assert_eq(*TENSOR_AT(pruned.attn.W_q.weight, 0, 3),
                 *TENSOR_AT(m.attn.W_q.weight, 2, 3));
    cr_assert_eq(*TENSOR_AT(pruned.attn.W_o.weight, 1, 0),
                 *TENSOR_AT(m.attn.W_o.weight, 1, 2));
    OK(model_loss(&pruned, tok, tgt, NULL, NULL, NULL, &small));
    cr_assert_float_eq(small.loss, masked.loss, 1e-14);
    cr_assert_eq(small.correct, masked.correct);
    model_free(&pruned);
    FAILS(model_prune_heads(&m, (size_t[]){1, 1}, 2, &pruned), GSL_EINVAL,
          "model_prune_heads: head 1 (keep[1]) is listed twice");
    FAILS(model_prune_heads(&m, (size_t[]){4}, 1, &pruned), GSL_EINVAL,
          "model_prune_heads: head 4 (keep[0]) is not a head of the model");
    FAILS(model_prune_heads(&m, NULL, 0, &pruned), GSL_EINVAL,
          "model_prune_heads: keeping 0 of 4 heads; keep 1 to 4");
    FREE_ALL(tok, tgt, mask);
    model_free(&m);
    gsl_rng_free(r);
}
//<

/* L = 10, D = 32, h = 4, p = 8, V = 10, per sequence:
 *   projections 3 * 2 * 10 * 32 * 32 = 61440
 *   Q K^T and weights V  2 * (2 * 4 * 10 * 10 * 8) = 12800
 *   W_o 2 * 10 * 32 * 32 = 20480, readout 2 * 10 * 32 * 20 = 12800. */
Test(model, flops_by_hand)
{
    model_config cfg = {.vocab = 10, .seq_len = 10, .d_model = 32,
                        .num_heads = 4};
    double attn;
    cr_assert_eq(model_flops(&cfg, 1, &attn), 107520.0);
    cr_assert_eq(attn, 94720.0);
    cr_assert_eq(model_flops(&cfg, 3, NULL), 3 * 107520.0);
    cfg.num_heads = 2;
    cfg.head_size = 8; /* two heads pruned: everything but the readout halves */
    cr_assert_eq(model_flops(&cfg, 1, &attn), 94720.0 / 2 + 12800);
}

Test(model, errors)
{
    model m;
    model_config bad = {.vocab = 4, .seq_len = 3, .d_model = 5,
                        .num_heads = 2};
    FAILS(model_init(&m, &bad), GSL_EBADLEN,
          "model_init: d_model 5 is not divisible by num_heads 2 (give "
          "head_size)");
    bad.vocab = 0;
    FAILS(model_init(&m, &bad), GSL_EINVAL,
          "model_init: sizes must be >= 1 (vocab 0, seq_len 3, d_model 5, "
          "num_heads 2)");
    small_model(&m, NULL, 2, 46);
    tensor *tok, *tgt, *tok4, *bad_tok;
    OK(tensor_from_array(SHAPE(1, 3), (double[]){0, 1, 2}, &tok));
    OK(tensor_alloc(SHAPE(1, 3, 2), &tgt));
    OK(tensor_alloc(SHAPE(1, 4), &tok4));
    OK(tensor_from_array(SHAPE(1, 3), (double[]){0, 4, 2}, &bad_tok));
    FAILS(model_loss(&m, tok4, tgt, NULL, NULL, NULL, NULL), GSL_EINVAL,
          "model_loss: tokens have shape (1, 4), expected contiguous (B, 3)");
    FAILS(model_loss(&m, tok, tok, NULL, NULL, NULL, NULL), GSL_EINVAL,
          "model_loss: targets have shape (1, 3), expected contiguous "
          "(1, 3, 2) for tokens (1, 3)");
    FAILS(model_loss(&m, bad_tok, tgt, NULL, NULL, NULL, NULL), GSL_EINVAL,
          "model_loss: tokens element 1 is 4, not a token 0 .. 3");
    model other;
    model_config oc = m.cfg;
    oc.num_heads = 4;
    oc.head_size = 0;
    OK(model_init(&other, &oc));
    FAILS(model_loss(&m, tok, tgt, NULL, &other, NULL, NULL), GSL_EBADLEN,
          "model_loss: grads is a model of another configuration");
    gsl_rng *r = mha_rng_new(1);
    tensor *t1 = (tensor *)1, *t2 = (tensor *)1;
    FAILS(model_make_batch(&m.cfg, 0, r, &t1, &t2), GSL_EINVAL,
          "model_make_batch: batch is 0");
    cr_assert_null(t1);
    cr_assert_null(t2);
    FREE_ALL(tok, tgt, tok4, bad_tok);
    model_free(&m);
    model_free(&other);
    gsl_rng_free(r);
}

Test(model, every_allocation_may_fail)
{
    model m, g;
    small_model(&m, &g, 2, 47);
    gsl_rng *r = mha_rng_new(48);
    tensor *tok, *tgt;
    OK(model_make_batch(&m.cfg, 2, r, &tok, &tgt));
    long failures = 0;
    for (long k = 0;; k++) {
        model_score s = {.loss = -1};
        mha_debug_fail_alloc_after(k);
        int status = model_loss(&m, tok, tgt, NULL, &g, NULL, &s);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "k = %ld: %s", k, mha_last_error());
        cr_assert_eq(s.loss, -1, "a failed call reports no score");
        failures++;
    }
    cr_assert_gt(failures, 30);
//> 14
    model pruned;
    for (long k = 0;; k++) {
        mha_debug_fail_alloc_after(k);
        int status = model_prune_heads(&m, (size_t[]){1}, 1, &pruned);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM);
        cr_assert_null(pruned.embed);
    }
    model_free(&pruned);
//<
    for (long k = 0;; k++) {
        model fresh;
        mha_debug_fail_alloc_after(k);
        int status = model_init(&fresh, &m.cfg);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS) {
            model_free(&fresh);
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM);
    }
    FREE_ALL(tok, tgt);
    model_free(&m);
    model_free(&g);
    gsl_rng_free(r);
}

/* The answers model_predict gives are the ones model_loss counts right. */
Test(model, predictions_agree_with_the_score)
{
    model m;
    small_model(&m, NULL, 2, 49);
    gsl_rng *r = mha_rng_new(50);
    tensor *tok, *tgt, *ans;
    OK(model_make_batch(&m.cfg, 20, r, &tok, &tgt));
    model_score s;
    OK(model_loss(&m, tok, tgt, NULL, NULL, NULL, &s));
    OK(model_predict(&m, tok, &ans, NULL));
    cr_assert_eq(ans->ndim, 3);
    cr_assert_eq(ans->shape[0], 20);
    cr_assert_eq(ans->shape[2], 2);
    size_t right = 0;
    for (size_t k = 0; k < tensor_numel(ans); k++)
        right += ans->data[k] == tgt->data[k];
    cr_assert_eq(right, s.correct);
    cr_assert_gt(right, 0);
    cr_assert_lt(right, s.answers, "an untrained model is not always right");
    // the weights too: the multi-head layer's on embed[tok] + pos, causal,
    // (B, h, L, L); the answers are the same with them
    tensor *ans2, *w, *x, *lens, *a, *want_w;
    OK(model_predict(&m, tok, &ans2, &w));
    cr_assert_eq(rel_error(ans2, ans), 0.0);
    size_t B = 20, L = m.cfg.seq_len, D = m.cfg.d_model;
    OK(tensor_alloc(SHAPE(B, L, D), &x));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < D; j++)
                *TENSOR_AT(x, b, i, j) =
                    *TENSOR_AT(m.embed, (size_t)*TENSOR_AT(tok, b, i), j) +
                    *TENSOR_AT(m.pos, i, j);
    OK(causal_valid_lens(B, L, &lens));
    OK(multihead_forward(&m.attn, x, x, x, lens, &a, &want_w));
    cr_assert_eq(rel_error(w, want_w), 0.0);
    tensor *made[] = {ans2, ans, x, lens, a, want_w};
    for (size_t i = 0; i < 6; i++)
        tensor_free(made[i]);
    for (long k = 0;; k++) {
        mha_debug_fail_alloc_after(k);
        int status = model_predict(&m, tok, &ans, &ans2);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM);
        cr_assert_null(ans);
        cr_assert_null(ans2);
    }
    FREE_ALL(ans, ans2, w, tok, tgt);
    model_free(&m);
    gsl_rng_free(r);
}
//<
