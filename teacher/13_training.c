/* Chapter 13, the key: training a tiny model.
 *
 * The numbers the answers to chapter 13's exercises quote: the chapter's
 * training run (same seeds, same steps) with one head, without the
 * position embedding, and with plain gradient descent.
 */
#include "key.h"

/* chapter 13's settings */
enum { N_VOCAB = 10, L = 10, D = 32, HEADS = 4, BATCH = 32, STEPS = 600 };
#define LEARNING_RATE 3e-3
#define TEST_SEQUENCES 1000

typedef struct {
    size_t heads;
    int no_pos;     /* the position embedding zeroed before and after every step */
    double sgd;     /* > 0: plain gradient descent with this rate, not Adam */
} run_config;

/* Train chapter 13's model as configured (the chapter's seeds), print the
 * loss every 100 steps and the held-out score; the trained model and its
 * held-out tokens and targets are returned for a closer look. */
static void train(const run_config *rc, model *m, tensor **test_tok,
                  tensor **test_tgt)
{
    model_config cfg = {.vocab = N_VOCAB, .seq_len = L, .d_model = D,
                        .num_heads = rc->heads};
    gsl_rng *init = mha_rng_new(13), *tr = mha_rng_new(1313),
            *te = mha_rng_new(2024);
    if (!init || !tr || !te)
        exit(1);
    model g;
    CHECK(model_init(m, &cfg));
    CHECK(model_init(&g, &cfg));
    model_reset(m, init);
    tensor *p[MODEL_NUM_PARAMS], *gp[MODEL_NUM_PARAMS];
    model_params(m, p);
    model_params(&g, gp);
    adam opt;
    CHECK(adam_init(&opt, MODEL_NUM_PARAMS, p, gp, LEARNING_RATE));
    if (rc->no_pos)
        tensor_fill(m->pos, 0);
    printf("  loss at step");
    for (int step = 1; step <= STEPS; step++) {
        tensor *tok, *tgt;
        model_score s;
        CHECK(model_make_batch(&cfg, BATCH, tr, &tok, &tgt));
        adam_zero_grad(&opt);
        int status = model_loss(m, tok, tgt, NULL, &g, NULL, &s);
        if (status && rc->sgd > 0) { // diverged: the library refuses NaN
            printf(" %d: diverged (%s)\n", step, mha_last_error());
            tensor_free(tok);
            tensor_free(tgt);
            *test_tok = *test_tgt = NULL;
            adam_free(&opt);
            model_free(&g);
            gsl_rng_free(init);
            gsl_rng_free(tr);
            gsl_rng_free(te);
            return;
        }
        CHECK(status);
        if (rc->sgd > 0)
            for (int k = 0; k < MODEL_NUM_PARAMS; k++)
                for (size_t n = 0; n < tensor_numel(p[k]); n++)
                    p[k]->data[n] -= rc->sgd * gp[k]->data[n];
        else
            CHECK(adam_step(&opt));
        if (rc->no_pos)
            tensor_fill(m->pos, 0);
        if (step % 100 == 0)
            printf(" %d: %.4f%s", step, s.loss, step == 300 ? "\n               " : "");
        tensor_free(tok);
        tensor_free(tgt);
    }
    printf("\n");
    model_score s;
    CHECK(model_make_batch(&cfg, TEST_SEQUENCES, te, test_tok, test_tgt));
    CHECK(model_loss(m, *test_tok, *test_tgt, NULL, NULL, NULL, &s));
    printf("  held out: loss %.4f, previous token %.2f%%, first token %.2f%%\n",
           s.loss, 100.0 * (double)s.per_answer_correct[0] / (TEST_SEQUENCES * L),
           100.0 * (double)s.per_answer_correct[1] / (TEST_SEQUENCES * L));
    adam_free(&opt);
    model_free(&g);
    gsl_rng_free(init);
    gsl_rng_free(tr);
    gsl_rng_free(te);
}

/* For each head, its mean weight on the previous position, the first and
 * itself, over the held-out sequences and positions 2 .. L-1 (chapter 13's
 * section 8). */
static void heads_look_at(model *m, const tensor *tok)
{
    tensor *w; // (n, h, L, L)
    CHECK(model_predict(m, tok, NULL, &w));
    for (size_t hd = 0; hd < w->shape[1]; hd++) {
        double prev = 0, first = 0, self = 0;
        size_t n = 0;
        for (size_t b = 0; b < w->shape[0]; b++)
            for (size_t i = 2; i < L; i++, n++) {
                prev += *TENSOR_AT(w, b, hd, i, i - 1);
                first += *TENSOR_AT(w, b, hd, i, 0);
                self += *TENSOR_AT(w, b, hd, i, i);
            }
        printf("  head %zu puts %.3f on the previous position, %.3f on the "
               "first, %.3f on itself\n", hd, prev / (double)n,
               first / (double)n, self / (double)n);
    }
    tensor_free(w);
}

/* The share of right answers of each kind at each position. */
static void by_position(model *m, const tensor *tok, const tensor *tgt)
{
    tensor *answers;
    CHECK(model_predict(m, tok, &answers, NULL));
    for (size_t a = 0; a < 2; a++) {
        printf("  %-9s", a ? "first" : "previous");
        for (size_t i = 0; i < L; i++) {
            size_t right = 0;
            for (size_t b = 0; b < tok->shape[0]; b++)
                right += *TENSOR_AT(answers, b, i, a) == *TENSOR_AT(tgt, b, i, a);
            printf(" %4.0f%%", 100.0 * (double)right / (double)tok->shape[0]);
        }
        printf("\n");
    }
    printf("  position ");
    for (size_t i = 0; i < L; i++)
        printf(" %5zu", i);
    printf("\n");
    tensor_free(answers);
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * For comparison, the chapter's run with 4 heads comes first: it ends
     * at a held-out loss of 0.0002 with every answer right. With one head
     * (of all 32 features) the loss stays far higher, 0.1007, about 500
     * times the chapter's, and the answers are right 96.52% and 95.47% of
     * the time (below): good, but not the clean solution.
     *
     * The single head splits its weight: it puts part of it on the previous
     * position and part on the first, as its line below shows, instead of
     * one head for each as in the chapter. The softmax gives a row weights
     * that sum to 1, so a head's output is one weighted average of the
     * value vectors: to fetch two positions it must share the weight
     * between them, and what it returns is a blend of the two tokens, each
     * at part strength and mixed with whatever else got weight. The output
     * layer then has to untangle two tokens from one average, which works
     * often but not always. Two heads each put nearly all their weight on one
     * position and return each token cleanly, in a subspace of its own.
     */
    model m;
    tensor *tok, *tgt;
    printf("4 heads (the chapter):\n");
    train(&(run_config){.heads = HEADS}, &m, &tok, &tgt);
    model_free(&m);
    tensor_free(tok);
    tensor_free(tgt);
    printf("1 head:\n");
    train(&(run_config){.heads = 1}, &m, &tok, &tgt);
    heads_look_at(&m, tok);
    model_free(&m);
    tensor_free(tok);
    tensor_free(tgt);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Neither answer, beyond the first two positions (below). Without a
     * position embedding the input at position $i$ is the token's
     * embedding alone, and the causal attention of query $i$ sees the
     * tokens at 0 to $i$ with nothing to tell them apart but their
     * content: its output depends only on the query's token and the
     * *collection* of visible tokens, not on their order. "The previous
     * token" and "the first token" are both questions of order, so no
     * setting of the weights can answer them in general. Where order does
     * not matter the model is right: at position 0 both answers are the
     * only visible token, and at position 1 both are token 0, the one
     * visible token that is not the query's own; there it scores 100%.
     * From position 2 on it can only guess among the visible tokens, and
     * its share falls as their number grows. Overall it
     * stays near half right, with a loss of 1.2354 against the chapter's
     * 0.0002.
     */
    model m;
    tensor *tok, *tgt;
    printf("no position embedding:\n");
    train(&(run_config){.heads = HEADS, .no_pos = 1}, &m, &tok, &tgt);
    printf("right answers by position:\n");
    by_position(&m, tok, tgt);
    model_free(&m);
    tensor_free(tok);
    tensor_free(tgt);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * Plain gradient descent, $\theta \leftarrow \theta - \eta g$ on every
     * parameter, with the chapter's seeds and batches (below). A rate of
     * 0.1 is too small for 600 steps: the loss is still 0.8765 at the end
     * and the model has learned only the first-token answer. A rate of 0.3
     * trains, to a held-out loss of 0.0040, and 1 trains about as well as
     * Adam (0.0003, against Adam's 0.0002 at a rate of 0.003). At 3 it
     * diverges: the parameters grow until the forward pass meets NaN,
     * which the library refuses.
     *
     * Compared with Adam's curve: gradient descent needs a rate about 300
     * times larger, because Adam divides each step by the running size of
     * the gradient and so takes steps of about its rate whatever the
     * gradient's scale, while gradient descent's steps are rate times
     * gradient, small where the gradients are small (early, and in the
     * embeddings). With a good rate the curves look alike; plain descent
     * is much more sensitive to the choice: a factor of 3 either side of
     * 1 is too slow or diverges.
     */
    const double rates[4] = {0.1, 0.3, 1, 3};
    for (int i = 0; i < 4; i++) {
        model m;
        tensor *tok, *tgt;
        printf("gradient descent, learning rate %g:\n", rates[i]);
        train(&(run_config){.heads = HEADS, .sgd = rates[i]}, &m, &tok, &tgt);
        model_free(&m);
        tensor_free(tok);
        tensor_free(tgt);
    }
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The key does not run this one: the task is fixed in the library
     * (`MODEL_ANSWERS` and `model_make_batch` in `src/train/model.c`), and adding
     * an answer means changing them: a third target per position
     * (`x[i-2]`, with a rule for $i < 2$ such as `x[0]`), and an output
     * layer of $3V$ scores.
     *
     * The guess: one head per position to fetch, so three heads: one on
     * $i-1$, one on $i-2$, one on 0. The chapter's 4 heads should still
     * learn the task (one head spare, or two sharing a job, as in chapter
     * 14); with 2 heads one of them has to split its weight between two
     * positions, as the single head of exercise 1 did, and the loss stays
     * well above the 4-head model's. Check it by training with `HEADS` 2,
     * 3 and 4 (d_model 32 is not divisible by 3: give `head_size` 8, or
     * set d_model to 24) and by reading section 8's table of what each
     * head looks at.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
