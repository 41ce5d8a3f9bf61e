/* Chapter 14: head importance, by masking and pruning heads.
 *
 * Trains chapter 13's model again, measures each head's importance by
 * masking heads and by the gradient, prunes heads and fine-tunes what is
 * left.  Run it with `make ch14`; the book's page is
 * docs/14_head_importance.md.  MHA_QUICK=1 makes a short run (20 steps,
 * 100 held-out sequences; tools/memcheck.sh sets it); MHA_TIMINGS=1
 * measures the pruned models' speed.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <string.h>
#include <time.h>

#include "lesson.h"

/*md
 * Chapter 13's model has four heads for two jobs: two fetch the first
 * token, two the previous one. Are all four needed? The direct experiment
 * removes a head and measures what the model loses: multiply the head's
 * output by 0 (a *head mask*) and compare the loss on held-out data with
 * and without it. A head whose removal costs nothing can go, and with it
 * its share of the computation.
 */

/* Chapter 13's settings: the same model, trained the same way. */
enum { V = 10, L = 10, D = 32, HEADS = 4, BATCH = 32 };
#define STEPS 600
#define LEARNING_RATE 3e-3
#define INIT_SEED 13
#define TRAIN_SEED 1313
#define TEST_SEED 2024
#define TEST_SEQUENCES 1000

/* What the sections share: chapter 13's model and held-out set, its
 * score, each head's importance by masking (section 2) and the two heads
 * pruning keeps (section 5). */
typedef struct {
    model_config cfg;
    model m;
    size_t steps, n_test;
    int timings;
    tensor *tok, *tgt; // (n_test, L), (n_test, L, 2)
    model_score base;
    double increase[HEADS];
    size_t two[2];
} lesson;

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Chapter 13's training loop, without its printing: steps of BATCH
 * sequences drawn with the given seed.  Returns the last batch's loss. */
static double train(model *m, size_t steps, unsigned long seed)
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
    model_score s = {0};
    for (size_t step = 1; step <= steps; step++) {
        tensor *tok, *tgt;
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
    return s.loss;
}

static double percent(size_t part, size_t whole)
{
    return 100.0 * (double)part / (double)whole;
}

/* "0 1 3" for the heads whose mask entry is 1. */
static const char *heads_of(const double *mask, char *buf, size_t n)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < HEADS && used < n; i++)
        if (mask[i] != 0)
            used += (size_t)snprintf(buf + used, n - used, "%s%zu",
                                     used ? " " : "", i);
    return buf;
}

static void trained(lesson *l)
{
    section("1. The trained model");
    /*md
     * Training is deterministic: the same seeds, the same batches and the
     * same arithmetic give the same weights, so this is chapter 13's model
     * to the last bit.
     */
    gsl_rng *init = mha_rng_new(INIT_SEED), *test = mha_rng_new(TEST_SEED);
    if (!init || !test)
        exit(1);
    CHECK(model_init(&l->m, &l->cfg));
    model_reset(&l->m, init);
    double last = train(&l->m, l->steps, TRAIN_SEED);
    CHECK(model_make_batch(&l->cfg, l->n_test, test, &l->tok, &l->tgt));
    CHECK(model_loss(&l->m, l->tok, l->tgt, NULL, NULL, NULL, &l->base));
    printf("%zu steps, last training loss %.4f\n", l->steps, last);
    printf("%zu held-out sequences: loss %.4f, %.2f%% of answers right\n",
           l->n_test, l->base.loss, percent(l->base.correct, l->base.answers));
    gsl_rng_free(init);
    gsl_rng_free(test);
}

static void one_head(lesson *l)
{
    section("2. Masking one head at a time");
    /*md
     * The head mask is a vector of $h$ factors, one per head, multiplying
     * each head's output before $W_o$ mixes them (`head_mask` in
     * `multihead_steps`). All ones is the model as trained;
     * a 0 silences one head. The importance of head $i$ is the increase
     * of the held-out loss when it alone is silenced. In the forward
     * pass it is one step more, between the attention and the join:
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * @show src/nn/multihead.c apply_head_mask
     */
    tensor *mask;
    CHECK(tensor_alloc(SHAPE(HEADS), &mask));
    const model_score *base = &l->base;
    printf("masked   held-out   increase   answers   previous   first\n"
           "head     loss                  right     right      right\n");
    printf("none     %8.4f   %8s   %6.2f%%   %6.2f%%   %6.2f%%\n", base->loss,
           "", percent(base->correct, base->answers),
           percent(base->per_answer_correct[0], base->answers / 2),
           percent(base->per_answer_correct[1], base->answers / 2));
    for (size_t i = 0; i < HEADS; i++) {
        tensor_fill(mask, 1);
        mask->data[i] = 0;
        model_score s;
        CHECK(model_loss(&l->m, l->tok, l->tgt, mask, NULL, NULL, &s));
        l->increase[i] = s.loss - base->loss;
        printf("%-8zu %8.4f   %8.4f   %6.2f%%   %6.2f%%   %6.2f%%\n", i,
               s.loss, l->increase[i], percent(s.correct, s.answers),
               percent(s.per_answer_correct[0], s.answers / 2),
               percent(s.per_answer_correct[1], s.answers / 2));
    }
    const char *labels[HEADS] = {"head 0", "head 1", "head 2", "head 3"};
    plot_options bopt = {.title = "held-out loss increase when one head is "
                                  "masked",
                         .xlabel = "masked head", .ylabel = "loss increase"};
    printf("\n");
    announce_plot(plot_bars(labels, l->increase, HEADS, &bopt,
                            plot_base("14_importance"),
                            HEATMAP_PNG | HEATMAP_SVG),
                  "14_importance");
    tensor_free(mask);
}

static void two_heads(lesson *l)
{
    section("3. Two heads at a time");
    /*md
     * One head at a time misses what heads do together. Two heads that
     * fetch the same token share the job: silence either and the other
     * still gets most of those answers right, so each looks only
     * moderately important; silence both and that answer falls towards
     * guessing. Masking every pair shows which heads share a job.
     */
    tensor *mask;
    CHECK(tensor_alloc(SHAPE(HEADS), &mask));
    printf("masked     held-out   answers   previous   first\n"
           "heads      loss       right     right      right\n");
    char lost[128] = "";
    for (size_t i = 0; i < HEADS; i++)
        for (size_t j = i + 1; j < HEADS; j++) {
            tensor_fill(mask, 1);
            mask->data[i] = mask->data[j] = 0;
            model_score s;
            CHECK(model_loss(&l->m, l->tok, l->tgt, mask, NULL, NULL, &s));
            double prev = percent(s.per_answer_correct[0], s.answers / 2);
            double first = percent(s.per_answer_correct[1], s.answers / 2);
            printf("%zu and %zu    %8.4f   %6.2f%%   %6.2f%%   %6.2f%%\n", i, j,
                   s.loss, percent(s.correct, s.answers), prev, first);
            if (prev < 50 || first < 50) {
                size_t used = strlen(lost);
                snprintf(lost + used, sizeof lost - used,
                         "%s  heads %zu and %zu: the %s", used ? "\n" : "", i, j,
                         prev < 50 ? "previous token" : "first token");
            }
        }
    printf("\npairs without which an answer is mostly lost:\n%s\n",
           lost[0] ? lost : "none");
    tensor_free(mask);
}

static void gradient(lesson *l)
{
    section("4. What the gradient says");
    /*md
     * Masking costs one evaluation per head (per pair: $h(h-1)/2$ of
     * them). [Michel, Levy and Neubig (2019)](https://arxiv.org/abs/1905.10650) estimate all $h$ importances
     * with one backward pass instead: the gradient of the loss with
     * respect to the mask at 1, $\partial L / \partial m_i$, says how fast
     * the loss changes as head $i$ is turned down, and
     * $|\partial L / \partial m_i|$ is their importance score.
     *
     * It is a linear estimate of a large change (turning a head fully off),
     * taken where this model's loss is nearly 0 and so every gradient is
     * small. Compare the two rankings below (rank 1 is the most important
     * head): they need not agree.
     */
    tensor *mask;
    CHECK(tensor_alloc(SHAPE(HEADS), &mask));
    const double *increase = l->increase;
    model grads;
    CHECK(model_init(&grads, &l->cfg));
    tensor *dmask;
    CHECK(tensor_alloc(SHAPE(HEADS), &dmask));
    tensor_fill(mask, 1);
    CHECK(model_loss(&l->m, l->tok, l->tgt, mask, &grads, dmask, NULL));
    printf("head   |dL/dmask|   rank by masking   rank by gradient\n");
    for (size_t i = 0; i < HEADS; i++) {
        size_t rank_mask = 1, rank_grad = 1;
        for (size_t j = 0; j < HEADS; j++) {
            rank_mask += increase[j] > increase[i];
            rank_grad += fabs(dmask->data[j]) > fabs(dmask->data[i]);
        }
        printf("%-6zu %10.2e   %15zu   %16zu\n", i, fabs(dmask->data[i]),
               rank_mask, rank_grad);
    }
    size_t top_mask = 0, top_grad = 0;
    for (size_t i = 1; i < HEADS; i++) {
        top_mask = increase[i] > increase[top_mask] ? i : top_mask;
        top_grad = fabs(dmask->data[i]) > fabs(dmask->data[top_grad])
                       ? i
                       : top_grad;
    }
    printf("\nmost important: head %zu by masking, head %zu by the gradient\n",
           top_mask, top_grad);
    tensor_free(dmask);
    model_free(&grads);
    tensor_free(mask);
}

static void pruning(lesson *l)
{
    section("5. Pruning");
    /*md
     * Pruning removes heads for good: `model_prune_heads` copies the model
     * without the rows of $W_q$, $W_k$, $W_v$ and the columns of $W_o$
     * that belong to the pruned heads, so it computes exactly what the
     * masked model computes, with fewer numbers.
     *
     * Which head to remove next? Section 3 showed why the one-at-a-time
     * ranking is not enough: so remove heads one by one, each time the one
     * whose removal costs least *given the heads already removed*
     * (measured again at every round).
     *
     * The cost of a forward pass is counted exactly, in floating-point
     * operations of the matrix products (2 per multiply-add): the
     * projections and $W_o$ shrink with the number of heads, and so do
     * $QK^\top$ and the weighted sum of the values; only the output layer
     * stays. Times are left out of the transcript, which must be the same
     * on every machine; `MHA_TIMINGS=1` adds them.
     *
     * Two heads still give most of the answers; one head cannot fetch two
     * positions, and the answers it does not fetch fall towards guessing.
     *
     * The rounds are this chapter's own code, the function `pruning` in
     * [chapters/14_head_importance.c](../chapters/14_head_importance.c)
     * (exercises 1-3 change its choice of the head to remove);
     * `model_prune_heads` is the training library's, in
     * [src/train/model.c](../src/train/model.c).
     */
    const model_config cfg = l->cfg;
    model *m = &l->m;
    tensor *mask;
    CHECK(tensor_alloc(SHAPE(HEADS), &mask));
    double full_attn, full = model_flops(&cfg, 1, &full_attn);
    printf("per sequence, the full model costs %.0f flops, %.0f of them in\n"
           "the multi-head layer.\n\n",
           full, full_attn);
    double keep[HEADS];
    for (size_t i = 0; i < HEADS; i++)
        keep[i] = 1;
    double full_time = 0;
    model_score two_score = l->base;
    l->two[0] = 0;
    l->two[1] = 1;
    int timings = l->timings;
    printf("heads     held-out   answers   flops per   saved%s\n"
           "kept      loss       right     sequence%s\n",
           timings ? "   time, vs" : "", timings ? "            all 4" : "");
    for (size_t kept = HEADS; kept >= 1; kept--) {
        if (kept < HEADS) {
            /* remove the head whose loss, with it masked too, is least */
            size_t best = HEADS;
            double best_loss = INFINITY;
            for (size_t i = 0; i < HEADS; i++) {
                if (keep[i] == 0)
                    continue;
                memcpy(mask->data, keep, sizeof keep);
                mask->data[i] = 0;
                model_score s;
                CHECK(model_loss(m, l->tok, l->tgt, mask, NULL, NULL, &s));
                if (s.loss < best_loss) {
                    best_loss = s.loss;
                    best = i;
                }
            }
            keep[best] = 0;
        }
        size_t list[HEADS], n = 0;
        for (size_t i = 0; i < HEADS; i++)
            if (keep[i] != 0)
                list[n++] = i;
        model pruned;
        CHECK(model_prune_heads(m, list, n, &pruned));
        model_score s;
        CHECK(model_loss(&pruned, l->tok, l->tgt, NULL, NULL, NULL, &s));
        double flops = model_flops(&pruned.cfg, 1, NULL);
        if (kept == 2) {
            l->two[0] = list[0];
            l->two[1] = list[1];
            two_score = s;
        }
        char names[32];
        printf("%-9s %8.4f   %6.2f%%   %9.0f   %4.0f%%",
               heads_of(keep, names, sizeof names),
               s.loss, percent(s.correct, s.answers), flops,
               100.0 * (1 - flops / full));
        if (timings) {
            /* the forward pass over the held-out set, the fastest of 25
             * runs: the others were slowed by whatever else the machine
             * was doing */
            double t = INFINITY;
            for (int r = 0; r < 25; r++) {
                double t0 = seconds();
                CHECK(model_loss(&pruned, l->tok, l->tgt, NULL, NULL, NULL, &s));
                double dt = seconds() - t0;
                t = dt < t ? dt : t;
            }
            if (kept == HEADS)
                full_time = t;
            printf("   %.2f (%.1f ms)", t / full_time, 1e3 * t);
        }
        printf("\n");
        model_free(&pruned);
        if (kept == 1)
            break;
    }
    model_config two_cfg = cfg;
    two_cfg.num_heads = 2;
    two_cfg.head_size = D / HEADS;
    double two_flops = model_flops(&two_cfg, 1, NULL);
    printf("\nheads %zu and %zu: %.2f%% of the answers at %.0f%% of the flops\n",
           l->two[0], l->two[1], percent(two_score.correct, two_score.answers),
           100.0 * two_flops / full);
    tensor_free(mask);
}

static void fine_tune(lesson *l)
{
    section("6. Pruned, then trained a little more");
    /*md
     * The heads that remain were trained to work beside the removed ones:
     * $W_o$ learned to add up what both heads of a pair fetch, and now
     * half of each sum is missing. A short spell of training on the pruned
     * model lets $W_o$ and the remaining heads adjust. This prune-then-
     * fine-tune recipe is how pruning is done in practice.
     */
    size_t steps = l->steps;
    const size_t *two = l->two;
    const model_score base = l->base;
    const tensor *tok = l->tok, *tgt = l->tgt;
    double full = model_flops(&l->cfg, 1, NULL);
    model_config two_cfg = l->cfg;
    two_cfg.num_heads = 2;
    two_cfg.head_size = D / HEADS;
    double two_flops = model_flops(&two_cfg, 1, NULL);
    size_t tune = steps < 100 ? steps : 100;
    model pruned;
    CHECK(model_prune_heads(&l->m, two, 2, &pruned));
    model_score before, after;
    CHECK(model_loss(&pruned, tok, tgt, NULL, NULL, NULL, &before));
    train(&pruned, tune, TRAIN_SEED + 1);
    CHECK(model_loss(&pruned, tok, tgt, NULL, NULL, NULL, &after));
    printf("heads %zu and %zu, held-out:\n", two[0], two[1]);
    printf("  just pruned:           loss %.4f, %.2f%% of answers right\n",
           before.loss, percent(before.correct, before.answers));
    printf("  after %3zu more steps:  loss %.4f, %.2f%% of answers right\n",
           tune, after.loss, percent(after.correct, after.answers));
    printf("  the full model:        loss %.4f, %.2f%% of answers right\n",
           base.loss, percent(base.correct, base.answers));
    printf("\nat %.0f flops per sequence instead of %.0f.\n", two_flops,
           full);
    model_free(&pruned);
}

int main(void)
{
    mha_program_init();
    lesson l = {.cfg = {.vocab = V, .seq_len = L, .d_model = D,
                        .num_heads = HEADS}};
    /* MHA_QUICK=1 (lesson.h): a short run for valgrind */
    l.steps = lesson_quick() ? 20 : STEPS;
    l.n_test = lesson_quick() ? 100 : TEST_SEQUENCES;
    l.timings = getenv("MHA_TIMINGS") != NULL;
    trained(&l);
    one_head(&l);
    two_heads(&l);
    gradient(&l);
    pruning(&l);
    fine_tune(&l);
    tensor_free(l.tok);
    tensor_free(l.tgt);
    model_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Prune by the one-at-a-time ranking of section 2 instead of
 *    re-measuring each round. Which heads go first, and what happens
 *    to the loss when two are gone?
 * 2. Prune to two heads that do the *same* job (both fetching the
 *    first token) and train them for 100 steps as in section 6. Can
 *    training teach one of them the other job?
 * 3. Use $|\partial L/\partial m_i|$ of section 4, recomputed each
 *    round, as the pruning criterion. Does it choose the same heads as
 *    masking?
 * 4. With `MHA_TIMINGS=1`, compare the measured times with the flop
 *    count. Which costs does the count leave out (the softmax, the
 *    copies in `transpose_qkv`, one small matrix product per head and
 *    sequence), and how does each of them grow with the number of
 *    heads?
 */
