/* Chapter 13: training a tiny model, and heads that find their jobs.
 *
 * Trains a one-layer multi-head model with Adam on a task that needs two
 * looks at a sequence, after checking its backward pass against finite
 * differences, and shows what each head learned.  Run it with `make ch13`;
 * the book's page is docs/13_training.md.  MHA_QUICK=1 makes a short run
 * (20 steps, 100 held-out sequences; tools/memcheck.sh sets it);
 * MHA_TIMINGS=1 prints how long training took.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "lesson.h"

/*md
 * A model learns by moving its weights a little, again and again, in the
 * direction that lowers its loss. That direction is the gradient, and the
 * backward pass computes it: the chain rule applied step by step from the
 * loss back to every weight, each step the mirror of a forward step.
 *
 * The task needs attention and needs it twice. A sequence holds ten digits.
 * At every position the model answers two questions: *which digit came just
 * before this one?* and *which digit came first?* Each answer sits at one
 * position of the sequence, and the two positions differ, so a head, whose
 * softmax mostly picks one place, cannot fetch both. Watch the heads sort
 * this out between them.
 */

/* The lesson's settings; chapter 14 trains the same model again. */
enum { N_VOCAB = 10, L = 10, D = 32, HEADS = 4, BATCH = 32 };
#define STEPS 600
#define EVERY 50
#define LEARNING_RATE 3e-3
#define INIT_SEED 13
#define TRAIN_SEED 1313
#define TEST_SEED 2024
#define TEST_SEQUENCES 1000

static const char *const param_names[MODEL_NUM_PARAMS] = {
    "embed",      "pos",        "W_q weight", "W_q bias",
    "W_k weight", "W_k bias",   "W_v weight", "W_v bias",
    "W_o weight", "W_o bias",   "W_out weight", "W_out bias"};

/* What the sections share: the model and its gradients, the three random
 * streams, the held-out set, and what training records for sections 6
 * and 7. */
typedef struct {
    model_config cfg;
    model m, grads;
    gsl_rng *init, *train, *test;
    size_t steps, n_test;
    tensor *test_tok, *test_tgt; // (n_test, L), (n_test, L, 2)
    double *curve_x, *curve_y;   // (steps,): the loss at every step
    uint64_t *seen;              // (steps * BATCH,): the training sequences
} lesson;

static double seconds(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* A sequence as one number, base N_VOCAB: to find it among the training ones. */
static uint64_t code_of(const double *tokens)
{
    uint64_t c = 0;
    for (size_t i = 0; i < L; i++)
        c = c * N_VOCAB + (uint64_t)tokens[i];
    return c;
}

static int compare_codes(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void print_row(const char *label, const double *v, size_t stride)
{
    printf("%-10s", label);
    for (size_t i = 0; i < L; i++)
        printf(" %2.0f", v[i * stride]);
    printf("\n");
}

/* The loss on the batch, for the finite differences. */
static double loss_on(model *m, const tensor *tok, const tensor *tgt)
{
    model_score s;
    CHECK(model_loss(m, tok, tgt, NULL, NULL, NULL, &s));
    return s.loss;
}

static void task(lesson *l)
{
    section("1. The task");
    /*md
     * Tokens are digits drawn uniformly at random. For position $i$ the two
     * answers are $x_{i-1}$ (the previous token; at position 0, where there
     * is none, $x_0$ itself) and $x_0$ (the first token). Positions 0 and 1
     * are easy cases: their two answers coincide.  Three sequences and the
     * answers the model must give at each position:
     */
    tensor *tok, *tgt;
    CHECK(model_make_batch(&l->cfg, 3, l->init, &tok, &tgt));
    for (size_t b = 0; b < 3; b++) {
        printf("position  ");
        for (size_t i = 0; i < L; i++)
            printf(" %2zu", i);
        printf("\n");
        print_row("tokens", tok->data + b * L, 1);
        print_row("previous", tgt->data + b * L * 2, 2);
        print_row("first", tgt->data + b * L * 2 + 1, 2);
        printf("\n");
    }
    tensor_free(tok);
    tensor_free(tgt);
}

static void untrained(lesson *l)
{
    section("2. The model, untrained");
    /*md
     * An embedding turns each token into a vector of $d_{model} = 32$
     * numbers and a second embedding adds where it stands, so that
     * attention can tell position 3 from position 7. One multi-head
     * self-attention layer (4 heads of 8 features, causal: position $i$
     * sees positions $0..i$) mixes the positions, and a Linear layer reads
     * off $2 n_{vocab}$ scores, ten per answer ($n_{vocab}$ = 10 is the
     * size of the vocabulary, the tokens 0 to 9; the book keeps $V$ for
     * the values). The loss is the cross-entropy of
     * the scores: the softmax turns the ten scores of an answer into
     * probabilities, and the loss is minus the log of the probability
     * given to the right digit, averaged over all answers; guessing uniformly costs
     * $\log 10 \approx 2.3026$.
     *
     * The weights start random (`model_reset`): the embeddings from
     * $\mathcal N(0, 1/d_{model})$, so that a row has length about 1; the
     * attention layer Xavier, as in chapter 08; the output layer
     * PyTorch's default, the Kaiming-uniform bound $1/\sqrt{\mathrm{fan_{in}}}$
     * of chapter 11, which scales by fan_in alone where Xavier averages
     * fan_in and fan_out.
     */
    tensor *params[MODEL_NUM_PARAMS];
    model_params(&l->m, params);
    size_t count = 0;
    for (size_t i = 0; i < MODEL_NUM_PARAMS; i++)
        count += tensor_numel(params[i]);
    printf("vocabulary %d, length %d, d_model %d, %d heads of %d features:\n"
           "%zu parameters in %d tensors.\n\n",
           N_VOCAB, L, D, HEADS, D / HEADS, count, MODEL_NUM_PARAMS);
    CHECK(model_make_batch(&l->cfg, l->n_test, l->test, &l->test_tok,
                           &l->test_tgt));
    model_score s;
    CHECK(model_loss(&l->m, l->test_tok, l->test_tgt, NULL, NULL, NULL, &s));
    printf("before training, on %zu held-out sequences: loss %.4f, %.1f%% of\n"
           "answers right (guessing: 2.3026 and 10%%).\n",
           l->n_test, s.loss, 100.0 * (double)s.correct / (double)s.answers);
}

static void backward_traced(lesson *l)
{
    section("3. The backward pass of the attention layer, traced");
    /*md
     * The backward pass runs the forward steps in reverse, and every shape
     * comes back: the gradient of a tensor has that tensor's shape. Read
     * it beside chapter 08's forward trace, which it retraces from the
     * last step to the first. `W_o`'s
     * backward gives the gradient of the joined heads; `transpose_qkv`,
     * the forward's *split*, now undoes the forward's *join*, because a
     * gradient travels back through a reshuffle by the inverse reshuffle;
     * the attention backward gives $dQ$, $dK$, $dV$ for all $B \cdot h$
     * heads at once; `transpose_output` joins them again, once for each
     * of $dQ$, $dK$ and $dV$; the projections' backwards give the inputs'
     * gradients, and last the weights' (so `W_o backward` appears twice:
     * first for the gradient of its input, last for its own). The lines
     * that start with `#` say which block is which.  The
     * trace below is for 2 sequences through the untrained attention layer,
     * with a random gradient arriving from above.  In self-attention X is
     * queries, keys and values at once, so its gradient is the sum of the
     * three input gradients.
     *
     * The softmax step is the one with an idea in it. With
     * $w = \mathrm{softmax}(s)$,
     * $\partial L / \partial s_j = w_j (\partial L/\partial w_j - \sum_k w_k\, \partial L / \partial w_k)$:
     * raising
     * one score takes weight from all the others. A masked key's score
     * never enters the softmax (chapter 03), so its weight is exactly 0
     * and so is its gradient.  Here $s$ is the scaled score, $q \cdot k$
     * times the scale $1/\sqrt{d}$.  The code below returns the gradient
     * with respect to the unscaled product $q \cdot k$ directly, so it
     * multiplies by `scale` (the chain rule through
     * $s = \text{scale} \cdot q \cdot k$), the scale its trace line prints.
     *
     * @show src/nn/backward.c masked_softmax_backward
     */
    tensor *x, *g, *lens, *out, *dx_q, *dx_k, *dx_v;
    CHECK(tensor_alloc(SHAPE(2, L, D), &x));
    CHECK(tensor_alloc(SHAPE(2, L, D), &g));
    CHECK(tensor_set_names(x, "B, L, d_model"));
    tensor_fill_normal(x, l->init, 0, 1);
    tensor_fill_normal(g, l->init, 0, 1);
    CHECK(causal_valid_lens(2, L, &lens));
    multihead_cache cache = {0};
    CHECK(multihead_forward_cached(&l->m.attn, x, x, x, lens, NULL, &cache,
                                   &out, NULL));
    trace_to(stdout);
    CHECK(multihead_backward(&l->m.attn, &cache, g, &l->grads.attn, NULL, &dx_q,
                             &dx_k, &dx_v));
    trace_to(NULL);
    tensor *all[] = {x, g, lens, out, dx_q, dx_k, dx_v};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    multihead_cache_free(&cache);
}

static void gradient_check(lesson *l)
{
    section("4. Checking the gradients");
    /*md
     * A backward pass with a wrong sign or a forgotten term still produces
     * numbers, and training with them may even seem to work. So before
     * training, compare it with the definition of a derivative: nudge one
     * weight by $\pm\epsilon$ and see how the loss moves,
     * $(L(\theta + \epsilon) - L(\theta - \epsilon)) / 2\epsilon$. The
     * check uses 8 numbers of each tensor (all of them are checked in
     * `tests/test_model.c`); the worst relative error must be below
     * $10^{-6}$.
     *
     * One gradient is zero, and must be: the key bias adds the same number
     * $q \cdot b_k$ to every score of a query's row, and the softmax does
     * not change when a whole row moves together.
     */
    tensor *params[MODEL_NUM_PARAMS], *gparams[MODEL_NUM_PARAMS];
    model_params(&l->m, params);
    model_params(&l->grads, gparams);
    tensor *ctok, *ctgt;
    CHECK(model_make_batch(&l->cfg, 2, l->init, &ctok, &ctgt));
    for (size_t i = 0; i < MODEL_NUM_PARAMS; i++)
        tensor_fill(gparams[i], 0);
    CHECK(model_loss(&l->m, ctok, ctgt, NULL, &l->grads, NULL, NULL));
    printf("%-12s %-10s  %s\n", "tensor", "shape", "backward pass vs differences");
    int all_ok = 1;
    for (size_t i = 0; i < MODEL_NUM_PARAMS; i++) {
        size_t n = tensor_numel(params[i]);
        double diff = 0, big = 0, eps = 1e-5;
        for (size_t j = 0; j < 8; j++) {
            size_t k = j == 0 ? 0 : gsl_rng_uniform_int(l->init, n);
            double saved = params[i]->data[k];
            params[i]->data[k] = saved + eps;
            double up = loss_on(&l->m, ctok, ctgt);
            params[i]->data[k] = saved - eps;
            double down = loss_on(&l->m, ctok, ctgt);
            params[i]->data[k] = saved;
            double num = (up - down) / (2 * eps);
            double ana = gparams[i]->data[k];
            diff = fabs(num - ana) > diff ? fabs(num - ana) : diff;
            big = fabs(num) > big ? fabs(num) : big;
        }
        char shape[TRACE_SHAPE_MAX];
        tensor_shape_str(params[i], shape, sizeof shape);
        if (big < 1e-9) {
            int zero = diff < 1e-9;
            printf("%-12s %-10s  both zero: %s\n", param_names[i], shape,
                   yes_no(zero));
            all_ok &= zero;
        } else {
            int ok = diff / big <= 1e-6;
            printf("%-12s %-10s  relative error below 1e-6: %s\n",
                   param_names[i], shape, yes_no(ok));
            all_ok &= ok;
        }
    }
    printf("\nevery gradient agrees: %s\n", yes_no(all_ok));
    tensor_free(ctok);
    tensor_free(ctgt);
}

static void training(lesson *l)
{
    section("5. Training");
    /*md
     * One step: draw 32 fresh sequences, zero the gradients, run the
     * forward pass and the loss, run the backward pass (adding every
     * gradient into `grads`), and let Adam ([Kingma and Ba
     * 2014](https://arxiv.org/abs/1412.6980)) move every weight. Adam divides
     * each number's step by the size of its recent gradients, so every
     * weight moves by about the learning rate, $3 \cdot 10^{-3}$, whatever
     * the scale of its gradient.
     *
     * @show src/train/adam.c adam_step
     *
     * The progress lines give the loss on the step's batch, and how many
     * of each kind of answer the batch got right. Watch which answer is
     * learned first: the first token, because every query looks at the same
     * key 0.  The previous token needs a rule that moves with the query,
     * $i - 1$, which the position embeddings must learn.
     */
    tensor *params[MODEL_NUM_PARAMS], *gparams[MODEL_NUM_PARAMS];
    model_params(&l->m, params);
    model_params(&l->grads, gparams);
    adam opt;
    CHECK(adam_init(&opt, MODEL_NUM_PARAMS, params, gparams, LEARNING_RATE));
    printf("%zu steps of %d sequences, Adam with learning rate %g:\n\n",
           l->steps, BATCH, LEARNING_RATE);
    double wall0 = seconds(CLOCK_MONOTONIC);
    double cpu0 = seconds(CLOCK_PROCESS_CPUTIME_ID);
    for (size_t step = 1; step <= l->steps; step++) {
        tensor *tok, *tgt;
        model_score s;
        CHECK(model_make_batch(&l->cfg, BATCH, l->train, &tok, &tgt));
        for (size_t b = 0; b < BATCH; b++)
            l->seen[(step - 1) * BATCH + b] = code_of(tok->data + b * L);
        adam_zero_grad(&opt);
        CHECK(model_loss(&l->m, tok, tgt, NULL, &l->grads, NULL, &s));
        CHECK(adam_step(&opt));
        l->curve_x[step - 1] = (double)step;
        l->curve_y[step - 1] = s.loss;
        if (step % EVERY == 0 || step == l->steps)
            printf("step %4zu  loss %.4f  previous %3.0f%%  first %3.0f%%\n",
                   step, s.loss,
                   100.0 * (double)s.per_answer_correct[0] / (BATCH * L),
                   100.0 * (double)s.per_answer_correct[1] / (BATCH * L));
        tensor_free(tok);
        tensor_free(tgt);
    }
    double wall = seconds(CLOCK_MONOTONIC) - wall0;
    double cpu = seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
    if (getenv("MHA_TIMINGS"))
        printf("\n(training took %.2f s, %.2f s of CPU)\n", wall, cpu);
    adam_free(&opt);
}

static void loss_curve(const lesson *l)
{
    section("6. The loss curve");
    /*md
     * On a logarithmic axis. For a hundred steps the loss creeps down from
     * the guessing value, while the first-token answer is learned and the
     * heads search for the rule $i-1$; then, within about fifty steps, it
     * falls by two orders of magnitude as that rule clicks into place.
     * What follows is polish: the answers are already right, and the model
     * only grows more confident in them.
     */
    plot_options lopt = {.title = "training loss (cross-entropy per answer)",
                         .xlabel = "step", .ylabel = "loss", .log_y = 1};
    announce_plot(plot_line(l->curve_x, l->curve_y, l->steps, &lopt,
                            plot_base("13_loss"), HEATMAP_PNG | HEATMAP_SVG),
                  "13_loss");
}

static void held_out(lesson *l)
{
    section("7. Held-out sequences");
    /*md
     * The held-out sequences come from their own random stream. Ten digits
     * make $10^{10}$ possible sequences, of which training saw 19,200, so a
     * repeat is unlikely; the program checks anyway. The stated target:
     * more than 99% of the held-out answers right.
     */
    model_score s;
    CHECK(model_loss(&l->m, l->test_tok, l->test_tgt, NULL, NULL, NULL, &s));
    size_t n_seen = l->steps * BATCH, n_test = l->n_test;
    qsort(l->seen, n_seen, sizeof *l->seen, compare_codes);
    size_t repeats = 0;
    for (size_t b = 0; b < n_test; b++) {
        uint64_t c = code_of(l->test_tok->data + b * L);
        repeats += bsearch(&c, l->seen, n_seen, sizeof *l->seen,
                           compare_codes) != NULL;
    }
    double accuracy = (double)s.correct / (double)s.answers;
    printf("held-out sequences that training also saw: %zu of %zu\n\n", repeats,
           n_test);
    printf("loss %.4f\n", s.loss);
    printf("answers right: %zu of %zu (%.2f%%)\n", s.correct, s.answers,
           100.0 * accuracy);
    printf("  previous token: %.2f%%   first token: %.2f%%\n",
           100.0 * (double)s.per_answer_correct[0] / (n_test * L),
           100.0 * (double)s.per_answer_correct[1] / (n_test * L));
    printf("sequences with every answer right: %zu of %zu\n",
           s.sequences_correct, s.sequences);
    printf("more than 99%% right, as stated: %s\n\n", yes_no(accuracy > 0.99));
    tensor *answers;
    CHECK(model_predict(&l->m, l->test_tok, &answers, NULL));
    printf("The first held-out sequence and the model's answers:\n\n");
    printf("position  ");
    for (size_t i = 0; i < L; i++)
        printf(" %2zu", i);
    printf("\n");
    print_row("tokens", l->test_tok->data, 1);
    print_row("previous", answers->data, 2);
    print_row("first", answers->data + 1, 2);
    tensor_free(answers);
}

static void heads_learned(lesson *l)
{
    section("8. What each head learned");
    /*md
     * The weights of the four heads, for one held-out sequence (top row)
     * and averaged over all 1000 (bottom row). Query $i$ is a row, key $j$
     * a column; the upper triangle is blank because position $i$ may not
     * look ahead.
     *
     * The numbers under the pictures are computed from the weights: for
     * positions $i \ge 2$, where the previous and the first position
     * differ, the mean weight each head puts on key $i-1$, on key 0 and on
     * key $i$ itself.
     *
     * No one told the heads which job to take: the two jobs were found by
     * gradient descent from random weights and shared out between four
     * heads, and $W_o$ learned to read each answer from the heads that
     * fetch it.
     */
    size_t n_test = l->n_test;
    tensor *w; // (n_test, h, L, L): the attention's weights, no answers
    CHECK(model_predict(&l->m, l->test_tok, NULL, &w));
    tensor *grid; // (2, h, L, L): one sequence, the mean
    CHECK(tensor_alloc(SHAPE(2, HEADS, L, L), &grid));
    for (size_t hd = 0; hd < HEADS; hd++)
        for (size_t i = 0; i < L; i++)
            for (size_t j = 0; j < L; j++) {
                double sum = 0;
                for (size_t b = 0; b < n_test; b++)
                    sum += *TENSOR_AT(w, b, hd, i, j);
                *TENSOR_AT(grid, 0, hd, i, j) = *TENSOR_AT(w, 0, hd, i, j);
                *TENSOR_AT(grid, 1, hd, i, j) = sum / n_test;
            }
    char titles[2 * HEADS][40];
    const char *tp[2 * HEADS];
    for (size_t hd = 0; hd < HEADS; hd++) {
        snprintf(titles[hd], sizeof titles[0], "head %zu, sequence 0", hd);
        snprintf(titles[HEADS + hd], sizeof titles[0], "head %zu, mean", hd);
        tp[hd] = titles[hd];
        tp[HEADS + hd] = titles[HEADS + hd];
    }
    tensor *mean;
    CHECK(tensor_narrow(grid, 0, 1, 1, &mean));
    heatmap_options topt = {.titles = tp + HEADS, .ntitles = HEADS};
    printf("Mean weights over the held-out sequences:\n\n");
    CHECK(heatmap_terminal(stdout, mean, &topt));
    heatmap_options gopt = {.titles = tp, .ntitles = 2 * HEADS,
                            .title = "learned attention, per head"};
    printf("\n");
    draw_heatmap(grid, &gopt, "13_heads");
    printf("\n");
    for (size_t hd = 0; hd < HEADS; hd++) {
        double prev = 0, first = 0, self = 0;
        size_t n = 0;
        for (size_t b = 0; b < n_test; b++)
            for (size_t i = 2; i < L; i++, n++) {
                prev += *TENSOR_AT(w, b, hd, i, i - 1);
                first += *TENSOR_AT(w, b, hd, i, 0);
                self += *TENSOR_AT(w, b, hd, i, i);
            }
        prev /= (double)n;
        first /= (double)n;
        self /= (double)n;
        const char *found = first >= 0.5  ? "it fetches the first token"
                            : prev >= 0.5 ? "it fetches the previous token"
                            : self >= 0.5 ? "it looks at its own position"
                                          : "no single position";
        printf("head %zu puts %.3f on the previous position, %.3f on the\n"
               "       first, %.3f on itself: %s\n",
               hd, prev, first, self, found);
    }
    tensor_free(grid);
    tensor_free(mean);
    tensor_free(w);
}

int main(void)
{
    mha_program_init();
    lesson l = {.cfg = {.vocab = N_VOCAB, .seq_len = L, .d_model = D,
                        .num_heads = HEADS}};
    /* MHA_QUICK=1 (lesson.h): a short run for valgrind */
    l.steps = lesson_quick() ? 20 : STEPS;
    l.n_test = lesson_quick() ? 100 : TEST_SEQUENCES;
    l.init = mha_rng_new(INIT_SEED);
    l.train = mha_rng_new(TRAIN_SEED);
    l.test = mha_rng_new(TEST_SEED);
    l.curve_x = malloc(l.steps * sizeof *l.curve_x);
    l.curve_y = malloc(l.steps * sizeof *l.curve_y);
    l.seen = malloc(l.steps * BATCH * sizeof *l.seen);
    if (!l.init || !l.train || !l.test || !l.curve_x || !l.curve_y || !l.seen)
        return 1;
    CHECK(model_init(&l.m, &l.cfg));
    CHECK(model_init(&l.grads, &l.cfg));
    model_reset(&l.m, l.init);

    task(&l);
    untrained(&l);
    backward_traced(&l);
    gradient_check(&l);
    training(&l);
    loss_curve(&l);
    held_out(&l);
    heads_learned(&l);

    tensor_free(l.test_tok);
    tensor_free(l.test_tgt);
    free(l.curve_x);
    free(l.curve_y);
    free(l.seen);
    model_free(&l.m);
    model_free(&l.grads);
    gsl_rng_free(l.init);
    gsl_rng_free(l.train);
    gsl_rng_free(l.test);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Train with `HEADS` set to 1 (the `enum` of settings near the top
 *    of `chapters/13_training.c`). What loss does the model reach, and
 *    what does its single head do? Explain with the softmax why one
 *    head cannot fetch two positions as cleanly as two heads.
 * 2. Remove the position embedding: in section 5's `training`, call
 *    `tensor_fill(l->m.pos, 0)` before the loop and after every Adam
 *    step (`pos` is the model's `(L, D)` table of position vectors,
 *    `src/train/model.h`). Which answers can the model still give, at
 *    which positions, and why?
 * 3. Replace Adam by plain gradient descent,
 *    $\theta \leftarrow \theta - \eta g$. Find a learning rate $\eta$ that
 *    trains in 600 steps,
 *    and compare the loss curves.
 * 4. Add a third answer, the token two positions back. How many heads
 *    does the model need now? Check your guess.
 */
