/* Chapter 04: scaled dot-product attention, one head.
 *
 * Shows attention as a weighted average (one query, four keys), then
 * d2l's toy through dot_attention_forward with its trace and heatmaps,
 * dropout in training and evaluation, and why scores are divided by
 * sqrt(d).  Run it with `make ch04`; the prose is docs/04_*.md.
 */

/*md
 * This chapter builds one attention head. Section 1 shows what attention
 * computes on numbers small enough to check by hand. Section 2 shows how to
 * read the heatmaps that picture it. Section 3 then runs the
 * [scaled dot product](glossary.md#scaled-dot-product-attention), the version that every head of
 * multi-head attention uses, on
 * [d2l's](https://d2l.ai/chapter_attention-mechanisms-and-transformers/attention-scoring-functions.html)
 * toy example.
 */

#include <gsl/gsl_randist.h>

#include "lesson.h"

/* d2l's example function, f(x) = 2 sin(x) + x. */
static double toy_function(double x) { return 2 * sin(x) + x; }

static void what_attention_does(void)
{
    section("1. What attention does: one query, four keys");
    /*md
     * Attention answers a question by looking things up. It has a *query* (the
     * question) and a list of *key-value pairs*. Each key says what its pair is
     * about; each value is what the pair hands back. The query is compared
     * with every key, and each comparison becomes a *weight*. The answer is the
     * weighted average of the values.
     *
     * d2l starts with the oldest example of this, Nadaraya-Watson kernel
     * regression. The keys are points $x_i$ on a line, the values are
     * measurements $y_i = f(x_i)$ of a function, here d2l's
     * $f(x) = 2\sin(x) + x$. To estimate $f$ at a new point $q$ (the query),
     * score each key by how close it is:
     *
     * $$s_i = -\frac{(q - x_i)^2}{2}, \qquad \alpha_i = \mathrm{softmax}(s)_i = \frac{e^{s_i}}{\sum_j e^{s_j}}, \qquad \mathrm{answer} = \sum_i \alpha_i y_i$$
     *
     * The softmax is chapter 03's. It makes the weights non-negative and makes
     * them sum to 1, so the answer is a true average: it lies between the
     * smallest and the largest value. A key close to the query gets a large
     * weight; a far one gets almost none.
     *
     * The program takes 4 keys, 1, 2, 3 and 4, and the query 2.2. Key 2 is
     * nearest and gets the largest weight, 0.4100; key 4 is farthest and gets
     * 0.0828. The weights sum to 1.0000, and the answer is 3.3142. The true
     * value is $f(2.2) = 3.8170$: with four keys far apart, the average is
     * pulled towards the smaller values of keys 1 and 4. More keys, closer
     * together, would give a better estimate. Nothing here was learned: the
     * scoring rule was chosen by hand.
     *
     * Every attention in this book has these parts: queries, keys, values, a
     * score for each (query, key) pair, a softmax over the keys, and a
     * weighted average of the values. What changes is the score. Section 3
     * uses a dot product; chapter 05 uses a small network.
     */
    const double query = 2.2;
    double keys[] = {1, 2, 3, 4}, values[4], scores[4];
    for (size_t i = 0; i < 4; i++) {
        values[i] = toy_function(keys[i]);
        scores[i] = -(query - keys[i]) * (query - keys[i]) / 2;
    }
    tensor *s, *w;
    CHECK(tensor_from_array(SHAPE(4), scores, &s));
    CHECK(softmax_lastdim(s, &w));
    printf("query %.1f\n\n", query);
    printf("  key   value = f(key)     score   weight\n");
    double sum = 0, answer = 0;
    for (size_t i = 0; i < 4; i++) {
        printf("  %3.0f   %14.4f   %7.4f   %6.4f\n", keys[i], values[i],
               scores[i], w->data[i]);
        sum += w->data[i];
        answer += w->data[i] * values[i];
    }
    printf("\nsum of the weights:               %.4f\n", sum);
    printf("weighted average of the values:   %.4f\n", answer);
    printf("f(query) = 2 sin(2.2) + 2.2:      %.4f\n", toy_function(query));
    tensor_free(s);
    tensor_free(w);
}

static void reading_a_heatmap(void)
{
    section("2. Reading a heatmap: the identity");
    /*md
     * A heatmap draws a `(queries, keys)` matrix of weights: row $i$ is query
     * $i$, column $j$ is key $j$, and darker means more weight. The identity is
     * the simplest attention pattern: query $i$ puts all its weight on key $i$,
     * so the output for position $i$ is just value $i$ (a copy). Expect a dark
     * diagonal and nothing else.
     *
     * The terminal view maps each weight to one of five shades. Its legend says
     * which range each shade covers, and the scale runs from 0 to the largest
     * weight drawn, so compare shades within one picture, not across pictures.
     * The PNG uses a continuous colour scale with a colour bar.
     */
    tensor *eye;
    CHECK(tensor_alloc(SHAPE(10, 10), &eye)); // (queries, keys)
    for (size_t i = 0; i < 10; i++)
        *TENSOR_AT(eye, i, i) = 1;
    heatmap_options opt = {.title = "the identity: query i looks at key i"};
    CHECK(heatmap_terminal(stdout, eye, &opt));
    printf("\n");
    draw_heatmap(eye, &opt, "04_eye");
    tensor_free(eye);
}

static void d2l_toy(gsl_rng *rng)
{
    section("3. d2l's toy: two examples, ten key-value pairs");
    /*md
     * The scaled dot product scores a query $q$ against a key $k$ with
     * $q \cdot k / \sqrt{d}$, where $d$ is their number of features (section 5
     * explains the $\sqrt{d}$). For all queries of an example at once, with
     * $Q \in \mathbb{R}^{L_q \times d}$, $K \in \mathbb{R}^{L_k \times d}$,
     * $V \in \mathbb{R}^{L_k \times d_v}$ (one query, key or value per row):
     *
     * $$\mathrm{Attention}(Q, K, V) = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right) V$$
     *
     * $QK^\top$ is `(Lq, Lk)`: one score per (query, key) pair. The softmax
     * runs along each row, and multiplying by $V$ averages the value rows, as
     * in section 1. Queries and keys need the same size $d$ for the dot
     * product; values may have another. This is the $f$ that every head of
     * multi-head attention runs: chapter 08 cuts the projected queries, keys
     * and values into $h$ pieces and calls this same function on all of them at
     * once, as if the heads were extra examples.
     *
     * d2l's toy has two examples, each with one query of 2 features drawn from
     * a standard normal (mean 0, variance 1; random seed 4), 10 keys that are
     * all `(1, 1)`, and 10 values of 4 features holding the numbers 0 to 39.
     * Example 0 may use 2 keys, example 1 may use 6 (`valid_lens`, chapter 03).
     * The trace shows the three steps of the formula with their shapes:
     * `Q K^T` makes `(2, 1, 10)` scores, the masked softmax (scaled by
     * $1/\sqrt{2} = 0.707107$) keeps that shape, and `weights V` gives
     * `(2, 1, 4)`.
     *
     * The code is in two parts, as chapter 02's linear layer is, and
     * chapter 05's additive attention and chapter 08's module are built
     * the same way. (A *pooling* is d2l's word for this whole
     * computation: a query pools the values, weighted by how well it
     * matches their keys.) The *steps* are the formula, with the shape
     * each one makes: the product `Q K^T`, the masked softmax of the
     * scaled scores (chapter 03's `masked_softmax_steps`, which trusts
     * the lengths the door has checked), then `weigh_values`, which multiplies the weights by
     * `V`, after the dropout of section 4 when training (the trace's three
     * lines). The function's first line, `SCOPE_OF`, prints the trace's
     * line for the whole pooling, `dot_attention(scale 1/sqrt(2))` with the
     * shapes of the inputs `TRACE_INPUTS(TRACE_IN(queries), ...)` lists,
     * at once, before any step runs: unlike chapter
     * 02's `RECORD`, which prints when the function returns and not at all
     * when it fails, this line stays printed if a step fails, and every
     * line printed until the function returns is indented under it.
     * `STEP` runs a call and, if it fails, jumps to `done:`, where the
     * function frees what it made and hands the weights to a caller who
     * asked for them (`give_weights`: freed instead when nobody asked, or
     * when a step failed):
     *
     * @show src/nn/attention.c dot_attention_steps
     *
     * The *door*, `dot_attention_forward`, is the function a program
     * calls. It checks the inputs once, in `start_pooling` (shapes that
     * agree, `valid_lens` that fit them, the dropout setting), and
     * refuses bad ones with a message that names the shapes (or the
     * setting); then it runs the steps. So the steps hold no check of
     * their own and can be read as the lesson alone. What they call may
     * still refuse what it cannot do (chapter 03's masked softmax a
     * `valid_lens` that does not fit the scores), but through the door
     * that cannot happen: the door has checked it already. Chapter 08's
     * module, which checks its own inputs at its door, calls the steps
     * directly:
     *
     * @show src/nn/attention.c dot_attention_forward
     *
     * Both products are one operation of the tensor layer, a batched
     * matrix product (PyTorch's `torch.bmm`): one BLAS `dgemm` per
     * example, with `K` read transposed in place; it names its result
     * after its operands, `(B, Lq)` from the queries and `Lk` from the
     * keys, and prints its own trace line. It is an operation of the
     * tensor layer, as `reshape` and `permute` are, so it calls the trace
     * itself (`tensor_trace_emit`, at its end) instead of declaring its
     * line in a `RECORD` at its top as the lesson's functions do:
     *
     * @show src/tensor/matrices.c tensor_bmm
     *
     * The last step, from weights to output, is the same for every way of
     * scoring (chapter 05 reuses it): the weights dropped out in training,
     * then multiplied by the values:
     *
     * @show src/nn/attention.c weigh_values
     *
     * Every key is `(1, 1)`, so for example 0 each score is
     * $(-2.7993 + 1.1746)/\sqrt{2} = -1.1488$, the same for all 10 keys. Equal
     * scores give equal weights over the valid keys: 1/2 over keys 0-1 in
     * example 0, 1/6 over keys 0-5 in example 1. The outputs are therefore
     * plain averages of value rows, whatever the queries are:
     * $(0..3 + 4..7)/2$ = `[2, 3, 4, 5]` and
     * $(0..3 + \dots + 20..23)/6$ = `[10, 11, 12, 13]`. The toy checks the
     * plumbing (shapes, mask, averaging), not the scoring.
     *
     * The heatmap has one panel per example, each with its single query (the
     * weights `(2, 1, 10)` viewed as a grid `(1, 2, 1, 10)`: one row of 2
     * panels). Look for the mask: two dark cells for example 0, six lighter
     * ones for example 1, and nothing past them. The lighter shade is the
     * point: the same total weight 1 spread over more keys.
     */
    tensor *q, *k, *v, *lens, *out, *weights, *grid;
    d2l_toy_inputs(rng, 2, "B, Lq, d", "B, Lk, d", &q, &k, &v, &lens);
    printf("queries:\n");
    tensor_print(stdout, q, 4);

    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0.5)); // dropout 0.5, evaluation mode
    printf("\n");
    trace_to(stdout);
    CHECK(dot_attention_forward(&attn, q, k, v, lens, &out, &weights));
    trace_to(NULL);
    printf("\nout (2, 1, 4):\n");
    tensor_print(stdout, out, 4);
    printf("\nweights (2, 1, 10):\n");
    tensor_print(stdout, weights, 4);
    printf("\n");
    CHECK(tensor_reshape(weights, DIMS(1, 2, 1, 10), &grid));
    const char *titles[] = {"example 0, valid_len 2", "example 1, valid_len 6"};
    heatmap_options opt = {.titles = titles, .ntitles = 2};
    CHECK(heatmap_terminal(stdout, grid, &opt));
    printf("\n");
    draw_heatmap(grid, &opt, "04_weights");

    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    tensor_free(out);
    tensor_free(weights);
    tensor_free(grid);
    dot_attention_free(&attn);
}

static void dropout_and_evaluation(void)
{
    section("4. Dropout: on in training, off in evaluation");
    /*md
     * The program made section 3's attention with
     * `dot_attention_init(&attn, 0.5)` (in its own code, which this page
     * does not show), and the 0.5 did nothing. It is the *[dropout](glossary.md#dropout)* probability. Dropout is a trick
     * used while a model is trained (chapter 13): at every forward pass each
     * attention weight is set to 0 with probability $p$, and the weights that
     * are kept are divided by $1 - p$. A model that cannot count on any single
     * weight learns to spread what it knows, and it fits its training data
     * less blindly. The division keeps the output right *on average*: a kept
     * weight counts double when $p = 0.5$, and half of the weights are kept.
     *
     * When the model is used or measured (*evaluation*), random answers are
     * not wanted, so dropout is switched off and the weights are used as they
     * are. PyTorch holds this switch in every module: `model.train()` turns
     * dropout on, `model.eval()` turns it off, and d2l calls
     * `attention.eval()` before it runs its toy. Here the switch is the
     * struct's `training` field: 0, evaluation, is the default; 1 needs a
     * random-number generator in `rng`. The pooling holds nothing else:
     *
     * @show src/nn/attention.h dot_attention
     *
     * The program runs the toy of section 3 (queries from random seed 7 this
     * time; they do not matter) in both modes. In evaluation the output is
     * the same every time. In training each weight is kept with probability
     * one half, and a kept weight counts double. In run 1, example 0 kept
     * only key 1, now with weight 1, so its output is value row 1,
     * `[4, 5, 6, 7]`; example 1 kept only key 5, worth 1/3, so its output is a
     * third of value row 5: after dropout the weights no longer sum to 1. In
     * run 2, example 0 lost both of its weights and its output is all zeros.
     * The mean over 10000 training runs comes back close to the evaluation
     * output: that is what the division by $1 - p$ is for.
     */
    gsl_rng *rng = mha_rng_new(7);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *out;
    d2l_toy_inputs(rng, 2, "B, Lq, d", "B, Lk, d", &q, &k, &v, &lens);
    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0.5));
    CHECK(dot_attention_forward(&attn, q, k, v, lens, &out, NULL));
    printf("evaluation (training = 0), out:\n");
    tensor_print(stdout, out, 4);
    tensor_free(out);

    attn.training = 1;
    attn.rng = rng;
    for (int run = 1; run <= 2; run++) {
        CHECK(dot_attention_forward(&attn, q, k, v, lens, &out, NULL));
        printf("training run %d, out:\n", run);
        tensor_print(stdout, out, 4);
        tensor_free(out);
    }
    const int runs = 10000;
    double mean[2][4] = {{0}};
    for (int run = 0; run < runs; run++) {
        CHECK(dot_attention_forward(&attn, q, k, v, lens, &out, NULL));
        for (size_t b = 0; b < 2; b++)
            for (size_t j = 0; j < 4; j++)
                mean[b][j] += *TENSOR_AT(out, b, 0, j) / runs;
        tensor_free(out);
    }
    printf("mean over %d training runs:\n", runs);
    for (size_t b = 0; b < 2; b++)
        printf("  example %zu: [%.2f, %.2f, %.2f, %.2f]\n", b, mean[b][0],
               mean[b][1], mean[b][2], mean[b][3]);

    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    dot_attention_free(&attn);
    gsl_rng_free(rng);
}

static void why_sqrt_d(gsl_rng *rng)
{
    section("5. Why divide by sqrt(d)?");
    /*md
     * If the entries of $q$ and $k$ are independent with mean 0 and variance
     * 1, each product $q_j k_j$ has variance 1 and their sum $q \cdot k$ has
     * variance $d$. The program measures it over 20000 random pairs (random
     * seed 4, continued from section 3), and the table agrees: 2.0, 64.1 and
     * 509.7 for d = 2, 64 and 512. At d = 512 the scores have a standard
     * deviation of about $\sqrt{509.7} \approx 22.6$. Between two random keys
     * that is a gap of tens, and $e^{20}$ is about $5 \cdot 10^8$: the softmax
     * gives almost all weight to one key.
     *
     * Training adjusts the model's parameters a little at a time, in the
     * direction given by the *gradient*: how much the output changes when a
     * parameter changes. A softmax with all its weight on one key hardly
     * changes when its scores move a little, so its gradients are near zero
     * and training barely moves it. Dividing by $\sqrt{d}$ brings the
     * variance back to 1 for every $d$ (the last column), and the weights stay
     * soft enough to learn.
     *
     * In multi-head attention the $d$ here is the size of one head,
     * $d_{model}/h$, not $d_{model}$: chapter 08's trace shows
     * `scale 1/sqrt(20)` for 100 features in 5 heads.
     */
    printf("     d   var(q . k)   var(q . k / sqrt(d))\n");
    size_t dims[] = {2, 64, 512};
    const int pairs = 20000;
    for (size_t n = 0; n < 3; n++) {
        size_t d = dims[n];
        double sum = 0, sum2 = 0;
        for (int s = 0; s < pairs; s++) {
            double dot = 0;
            for (size_t j = 0; j < d; j++)
                dot += gsl_ran_gaussian_ziggurat(rng, 1) *
                       gsl_ran_gaussian_ziggurat(rng, 1);
            sum += dot;
            sum2 += dot * dot;
        }
        double var = sum2 / pairs - (sum / pairs) * (sum / pairs);
        printf("  %4zu   %10.1f   %20.2f\n", d, var, var / (double)d);
    }
}

static void cost(void)
{
    section("6. Cost");
    /*md
     * $QK^\top$ is $B L_q L_k$ dot products of length $d$, and weights times
     * $V$ another $B L_q L_k d_v$ multiply-adds: $2 B L_q L_k (d + d_v)$
     * flops. For the toy that is 240 flops and 20 weights. Both products are
     * one dgemm per example on views of the inputs; $K$ is read transposed by
     * BLAS, not copied (an input whose examples are not each row-major is
     * copied once: the note `tensor_bmm` traces before that copy, in its
     * code above, says so). The `(B, Lq, Lk)` weights are a second output, for
     * the heatmaps: `&weights` asks for them, `NULL` says they are not wanted,
     * and the struct keeps nothing of the pass.
     *
     * The formula is the important part: with $L_q = L_k = L$, time and memory
     * grow as $L^2$. One head over $L = 4096$ positions has a
     * $4096 \times 4096$ weight matrix, about 16.8 million doubles (134 MB) per
     * example. That quadratic term is what the memory-efficient attention of a
     * later chapter avoids keeping.
     */
    const double L = 4096;
    printf("toy: 2*B*Lq*Lk*(d + dv) = %d flops, B*Lq*Lk = %d weights\n",
           2 * 2 * 1 * 10 * (2 + 4), 2 * 1 * 10);
    printf("L = 4096: L*L = %.1f million weights, %.0f MB per example\n",
           L * L / 1e6, L * L * sizeof(double) / 1e6);
}

int main(void)
{
    mha_program_init();
    gsl_rng *rng = mha_rng_new(4);
    if (!rng)
        return 1;
    what_attention_does();
    reading_a_heatmap();
    d2l_toy(rng);
    dropout_and_evaluation();
    why_sqrt_d(rng);
    cost();
    gsl_rng_free(rng);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Distance-based attention: replace the score $q \cdot k / \sqrt{d}$ by
 *    $-\lVert q - k \rVert^2 / 2$, the score of section 1. Expand the square
 *    and show that the softmax over keys of this score equals the softmax of
 *    $q \cdot k - \lVert k \rVert^2 / 2$ (the $\lVert q \rVert^2$ term
 *    cancels). When does it give exactly the same weights as the unscaled dot
 *    product? What would it give on the toy of section 3, where all keys are
 *    `(1, 1)`?
 * 2. Change key 1 of example 0 to `(0, 0)` and keep the rest. Compute by hand
 *    the weights of example 0 and its output. (One of the two weights is
 *    $1/(1 + e^{-1.1488}) = 0.7593$.)
 * 3. Drop the division by $\sqrt{d}$: for d = 512 and 10 random keys, what is
 *    the typical largest weight of a query? Estimate it by modifying section 5
 *    (draw a query and 10 keys, softmax the 10 scores, average the maximum over
 *    many draws), then again with the division.
 * 4. With B = 8, h = 16 heads and $L_q = L_k = 4096$, how much memory do the
 *    attention weights of one multi-head layer take in doubles?
 */
