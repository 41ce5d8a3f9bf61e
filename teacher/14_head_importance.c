/* Chapter 14, the key: head importance.
 *
 * The numbers the answers to chapter 14's exercises quote: chapter 13's
 * model trained again with the chapter's seeds, pruned by a fixed
 * ranking, pruned by the gradient, and cut to two heads that do one job.
 */
#include <math.h>

#include "key.h"

/* chapter 13's settings, as chapter 14 uses them */
enum { V = 10, L = 10, D = 32, HEADS = 4, BATCH = 32, STEPS = 600 };
#define LEARNING_RATE 3e-3
#define TRAIN_SEED 1313

/* Chapter 14's training loop: steps of BATCH sequences from seed, Adam. */
static void train(model *m, size_t steps, unsigned long seed)
{
    gsl_rng *data = mha_rng_new(seed);
    if (!data)
        exit(1);
    model grads;
    CHECK(model_init(&grads, &m->cfg));
    tensor *params[MODEL_NUM_PARAMS], *gparams[MODEL_NUM_PARAMS];
    model_params(m, params);
    model_params(&grads, gparams);
    adam opt;
    CHECK(adam_init(&opt, MODEL_NUM_PARAMS, params, gparams, LEARNING_RATE));
    for (size_t step = 1; step <= steps; step++) {
        tensor *tok, *tgt;
        model_score s;
        CHECK(model_make_batch(&m->cfg, BATCH, data, &tok, &tgt));
        adam_zero_grad(&opt);
        CHECK(model_loss(m, tok, tgt, NULL, &grads, NULL, &s));
        CHECK(adam_step(&opt));
        tensor_free(tok);
        tensor_free(tgt);
    }
    adam_free(&opt);
    model_free(&grads);
    gsl_rng_free(data);
}

typedef struct {
    model m;
    tensor *tok, *tgt; /* the held-out sequences */
} lesson;

static void trained(lesson *l)
{
    model_config cfg = {.vocab = V, .seq_len = L, .d_model = D, .num_heads = HEADS};
    gsl_rng *init = mha_rng_new(13), *test = mha_rng_new(2024);
    if (!init || !test)
        exit(1);
    CHECK(model_init(&l->m, &cfg));
    model_reset(&l->m, init);
    train(&l->m, STEPS, TRAIN_SEED);
    CHECK(model_make_batch(&cfg, 1000, test, &l->tok, &l->tgt));
    gsl_rng_free(init);
    gsl_rng_free(test);
}

/* The held-out score with the heads whose mask entry is 0 removed. */
static model_score masked(lesson *l, const double *mask)
{
    tensor *t;
    model_score s;
    CHECK(tensor_from_array(SHAPE(HEADS), mask, &t));
    CHECK(model_loss(&l->m, l->tok, l->tgt, t, NULL, NULL, &s));
    tensor_free(t);
    return s;
}

static void print_score(const char *kept, model_score s)
{
    printf("  kept %-8s loss %.4f, answers right %.2f%%, previous %.2f%%, "
           "first %.2f%%\n", kept, s.loss, 100.0 * (double)s.correct / (double)s.answers,
           100.0 * (double)s.per_answer_correct[0] / (double)(s.sequences * L),
           100.0 * (double)s.per_answer_correct[1] / (double)(s.sequences * L));
}

static const char *kept_str(const double *mask, char *buf)
{
    size_t n = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < HEADS; i++)
        if (mask[i] != 0)
            n += (size_t)sprintf(buf + n, "%s%zu", n ? " " : "", i);
    return buf;
}

static void exercise1(lesson *l)
{
    section("Exercise 1");
    /*md
     * Section 2's one-at-a-time increases rank the heads, least important
     * first: 1 (0.0792), 2 (0.0998), 3 (0.1111), 0 (0.2085). Pruning by
     * that fixed ranking removes head 1, then head 2. But heads 1 and 2 do
     * the same job, both fetch the previous token (section 3: without the
     * pair, only 16.35% of the previous-token answers are right). Each
     * looked cheap to lose because the other covered for it; together they
     * are the whole job. With both gone the loss jumps to 1.2366 and only
     * 58.17% of the answers are right (below, as section 3 measured),
     * against 0.1252 and 98.48% for the heads section 5's re-measuring
     * keeps (0 and 2). Re-measuring each round sees that once head 1 is
     * gone, head 2 has become essential, and removes head 3 instead.
     */
    double mask[HEADS] = {1, 1, 1, 1};
    model_score full = masked(l, mask);
    double increase[HEADS];
    for (size_t i = 0; i < HEADS; i++) {
        mask[i] = 0;
        increase[i] = masked(l, mask).loss - full.loss;
        mask[i] = 1;
    }
    size_t order[HEADS] = {0, 1, 2, 3};
    for (size_t i = 0; i < HEADS; i++) // by increase, smallest first
        for (size_t j = i + 1; j < HEADS; j++)
            if (increase[order[j]] < increase[order[i]]) {
                size_t t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    printf("ranking by one-at-a-time increase, least important first:");
    for (size_t i = 0; i < HEADS; i++)
        printf(" %zu (%.4f)", order[i], increase[order[i]]);
    printf("\n");
    char buf[16];
    print_score(kept_str(mask, buf), full);
    for (size_t r = 0; r + 1 < HEADS; r++) {
        mask[order[r]] = 0;
        print_score(kept_str(mask, buf), masked(l, mask));
    }
}

static void exercise2(lesson *l)
{
    section("Exercise 2");
    /*md
     * Heads 0 and 3 are the pair that fetches the first token (section 3:
     * without them 27.44% of the first-token answers are right, and all the
     * previous-token ones still are). Kept alone, they leave no head for
     * the previous token: just pruned, the model gets only 16.35% of those
     * answers right (the first line below). Then 100 steps of training, as
     * section 6 does for heads 0 and 2 (same rate, the next seed).
     *
     * Training can teach one of them the other job: after 100 steps the
     * previous-token answers come back (second line), and the heads'
     * weights show one of the two now on the previous position (the two
     * lines after). Nothing in the model reserves a head for a job; the
     * gradient moves whichever head's W_q and W_k can lower the loss, and
     * with only two heads and two jobs, each gets one. After the same 100
     * steps the loss, 0.0080, is still above section 6's 0.0004: learning
     * a job anew takes longer than recovering from a mild loss.
     */
    model pruned;
    CHECK(model_prune_heads(&l->m, (size_t[]){0, 3}, 2, &pruned));
    model_score s;
    CHECK(model_loss(&pruned, l->tok, l->tgt, NULL, NULL, NULL, &s));
    printf("heads 0 and 3, just pruned:\n");
    print_score("0 3", s);
    train(&pruned, 100, TRAIN_SEED + 1);
    CHECK(model_loss(&pruned, l->tok, l->tgt, NULL, NULL, NULL, &s));
    printf("after 100 more steps:\n");
    print_score("0 3", s);
    tensor *w; // (B, 2, L, L): the two heads kept
    CHECK(model_predict(&pruned, l->tok, NULL, &w));
    const size_t was[2] = {0, 3};
    for (size_t hd = 0; hd < 2; hd++) {
        double prev = 0, first = 0;
        size_t n = 0;
        for (size_t b = 0; b < w->shape[0]; b++)
            for (size_t i = 2; i < L; i++, n++) {
                prev += *TENSOR_AT(w, b, hd, i, i - 1);
                first += *TENSOR_AT(w, b, hd, i, 0);
            }
        printf("  head %zu puts %.3f on the previous position, %.3f on the first\n",
               was[hd], prev / (double)n, first / (double)n);
    }
    tensor_free(w);
    model_free(&pruned);
}

static void exercise3(lesson *l)
{
    section("Exercise 3");
    /*md
     * Each round: the mask is 1 for the heads kept and 0 for those removed,
     * $|\partial L/\partial m_i|$ is computed on the held-out set for the
     * kept heads, and the head with the smallest goes. It does not choose
     * the same heads as masking: it removes 3, then 2, then 1 (below),
     * where section 5's masking removed 1, then 3, then 2. At each round
     * the heads it keeps do worse: 0.1113 against 0.0794 with three heads,
     * 0.1607 against 0.1252 with two; both end with head 0 alone. The
     * gradient is
     * a local, first-order measure: it says how the loss changes when a
     * mask moves a little from 1, not what happens at 0. On a trained
     * model the loss is near a minimum, every gradient is small (section
     * 4's are all a few $10^{-4}$), and their order says little about the
     * effect of removing a head entirely. (Once a head is gone the model
     * is off its minimum and the gradients grow hundreds of times, as
     * rounds 2 and 3 show, but they still measure a small step, not a
     * removal.)
     */
    double mask[HEADS] = {1, 1, 1, 1};
    char buf[16];
    for (size_t round = 0; round + 1 < HEADS; round++) {
        model grads;
        CHECK(model_init(&grads, &l->m.cfg));
        tensor *t, *dmask;
        CHECK(tensor_from_array(SHAPE(HEADS), mask, &t));
        CHECK(tensor_alloc(SHAPE(HEADS), &dmask));
        CHECK(model_loss(&l->m, l->tok, l->tgt, t, &grads, dmask, NULL));
        size_t drop = HEADS;
        printf("round %zu, |dL/dmask| of the kept heads:", round + 1);
        for (size_t i = 0; i < HEADS; i++)
            if (mask[i] != 0) {
                printf(" %zu: %.2e", i, fabs(dmask->data[i]));
                if (drop == HEADS || fabs(dmask->data[i]) < fabs(dmask->data[drop]))
                    drop = i;
            }
        printf("\n");
        mask[drop] = 0;
        print_score(kept_str(mask, buf), masked(l, mask));
        tensor_free(t);
        tensor_free(dmask);
        model_free(&grads);
    }
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The key cannot print timings (they depend on the machine), so here
     * is what to expect and why. The flop count (`model_flops`) counts only
     * the matrix products; for a model this small the measured time is
     * dominated by what it leaves out, so the time falls much less than
     * the flops when heads are pruned. Each cost it leaves out, with
     * $p$ fixed and $h$ heads (sequence length $L$, batch $B$):
     *
     * - **the softmax**: one exponential, a comparison and a division per
     *   score, $B h L^2$ of them; an exponential takes the time of
     *   several flops. It grows linearly with $h$, like the attention's
     *   flops.
     * - **the copies in `transpose_qkv`** (and `transpose_output`): each
     *   moves $B L h p$ doubles, also linear in $h$, but as memory traffic
     *   rather than arithmetic.
     * - **one small matrix product per head and sequence**: the scores and
     *   the weighted average are $B h$ calls of `gsl_blas_dgemm` on
     *   $L \times p$ matrices (here $10 \times 8$). Each call has a fixed
     *   overhead (argument checks, dispatch, blocking set-up) that
     *   outweighs its few hundred flops; their number grows linearly with
     *   $h$ while the work per call stays the same.
     *
     * So pruning heads saves all three in proportion, but the parts of the
     * model that do not depend on $h$ (the embeddings, the output layer,
     * the projections' per-call overhead) stay, which is why the measured
     * saving is smaller than the flop count's.
     */
}

int main(void)
{
    mha_program_init();
    lesson l;
    trained(&l);
    exercise1(&l);
    exercise2(&l);
    exercise3(&l);
    exercise4();
    model_free(&l.m);
    tensor_free(l.tok);
    tensor_free(l.tgt);
    return 0;
}
