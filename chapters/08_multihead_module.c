/* Chapter 08: the multi-head attention module.
 *
 * Runs d2l's example through multihead_forward with its whole shape trace,
 * then shows the heads' weights on equal and on random inputs, and counts
 * the cost.  Run it with `make ch08`; the book's page is
 * docs/08_multihead_module.md.
 */

/*md
 * ![The module's dataflow for d2l's example](../plots/module.svg)
 *
 * This is the module the first seven chapters were building towards.
 * Vectors in this book are rows, as PyTorch computes: a Linear layer with
 * weight $W$ of shape (out, in) maps a row $x$ to $x W^\top + b$, and a batch
 * of rows stacked as a matrix goes through in one product. Given a query
 * $q \in \mathbb{R}^{d_q}$, a key $k \in \mathbb{R}^{d_k}$ and a value
 * $v \in \mathbb{R}^{d_v}$, each head $i = 0, \dots, h - 1$ (counted from 0, as in the code) attends with its own
 * learned projections:
 *
 * $$\mathrm{head}_i = f\left(q\, W_i^{(q)\top},\; k\, W_i^{(k)\top},\; v\, W_i^{(v)\top}\right) \in \mathbb{R}^{p_v}$$
 *
 * with $W_i^{(q)} \in \mathbb{R}^{p_q \times d_q}$,
 * $W_i^{(k)} \in \mathbb{R}^{p_k \times d_k}$ and
 * $W_i^{(v)} \in \mathbb{R}^{p_v \times d_v}$. A last learned
 * [projection](glossary.md#projection)
 * $W_o \in \mathbb{R}^{p_o \times h p_v}$ mixes the heads, laid side by side
 * in one row:
 *
 * $$\mathrm{out} = \left[\mathrm{head}_0, \dots, \mathrm{head}_{h-1}\right] W_o^\top \in \mathbb{R}^{p_o}$$
 *
 * Here $f$ is the scaled dot-product attention of chapter 04, and, as in
 * [d2l](https://d2l.ai/chapter_attention-mechanisms-and-transformers/multihead-attention.html),
 * $p_q = p_k = p_v = p_o / h = d_{model}/h$. The subscripts are d2l's:
 * $p_o$ is the size of the module's output (here $d_{model}$ = 100; the
 * code calls it `D_out`, since a module may be made with another output
 * size, and the trace prints `d_model` when it is $d_{model}$), and
 * $p_q$, $p_k$, $p_v$ are one head's sizes. Since the three are equal, the
 * rest of the book calls them $p$ without a subscript, as chapter 06 did:
 * $p = d_{model}/h$ features per head.
 *
 * Why several heads instead of one big one? A single softmax gives each query
 * one distribution over the keys, an average of everything the query might
 * want. With $h$ heads, each in its own $p$-dimensional subspace, one query can
 * attend to a nearby position in one head and to a distant one in another, and
 * $W_o$ combines what they found. It costs no more than one head: $h$ heads of
 * $p = d_{model}/h$ features do the same number of flops as one head of
 * $d_{model}$.
 *
 * The implementation is the six steps of the earlier chapters: project with
 * W_q, W_k, W_v (chapter 02); split into heads (chapter 06); repeat
 * `valid_lens` per head (chapter 07); attend on all $B \cdot h$ heads at once
 * (chapter 04); join the heads (chapter 06); mix with W_o. Chapter 09 then
 * checks that this batched form really is $h$ separate heads, and chapter 10
 * uses the module for self-attention.
 */

#include <math.h>

#include "lesson.h"

/* d2l's example: B examples, Lq queries, Lk key-value pairs, D = d_model
 * features in H heads of D / H. */
enum { B = 2, Lq = 4, Lk = 6, D = 100, H = 5 };

/* What the sections share: the module, the random stream that made its
 * weights and goes on to make section 3's inputs, and the attention
 * weights of section 1's run, which section 2 reads. */
typedef struct {
    multihead m;
    gsl_rng *rng;
    tensor *weights; // (B, h, Lq, Lk)
} lesson;

/* The module's weights, drawn as section 1 explains. */
static void make_module(lesson *l)
{
    l->rng = mha_rng_new(8);
    if (!l->rng)
        exit(1);
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .dropout = 0.5};
    CHECK(multihead_init(&l->m, &cfg));
    multihead_reset_xavier(&l->m, l->rng);
}

/* The Xavier bound of a (fan_out, fan_in) weight, its largest entry and
 * its standard deviation against the target sqrt(2 / (fan_in + fan_out)). */
static void show_xavier(const char *name, const linear *layer)
{
    const tensor *w = layer->weight;
    size_t n = tensor_numel(w);
    double fans = (double)(layer->in_features + layer->out_features);
    double largest = 0, ss = 0;
    for (size_t e = 0; e < n; e++) {
        largest = fmax(largest, fabs(w->data[e]));
        ss += w->data[e] * w->data[e];
    }
    char s[TRACE_SHAPE_MAX];
    printf("%s %s: bound a %.4f, largest |w| %.4f, std %.4f (target %.4f)\n",
           name, tensor_shape_str(w, s, sizeof s), sqrt(6 / fans), largest,
           sqrt(ss / (double)n), sqrt(2 / fans));
}

static void whole_trace(lesson *l)
{
    section("1. d2l's example, with its whole trace");
    /*md
     * 100 hidden features in 5 heads of 20, 2 examples, 4 queries, 6 key-value
     * pairs, `valid_lens [3, 2]`. Queries X and keys/values Y are all ones, as
     * in d2l.
     *
     * The module is made from a configuration: the sizes, the number of
     * heads, whether the four layers have biases (not here: `bias` is 0,
     * as d2l's `bias=False`) and the dropout probability. The module holds
     * the configuration, its four layers and the pooling of chapter 04:
     *
     * @show src/nn/multihead.h multihead_config
     *
     * @show src/nn/multihead.h multihead
     *
     * The four weights are made by *[Xavier (Glorot) initialisation](glossary.md#xavier)*, d2l's
     * default. A layer has fan_in input features and fan_out output
     * features, so its weight has shape (fan_out, fan_in). Each entry is drawn
     * uniformly from $[-a, a]$ with
     * $a = \sqrt{6 / (\mathrm{fan_{in}} + \mathrm{fan_{out}})}$, which gives it
     * variance $2 / (\mathrm{fan_{in}} + \mathrm{fan_{out}})$. Why that scale:
     * an output feature is a sum of
     * fan_in products, so its variance is $\mathrm{fan_{in}}$ times the
     * weights' variance times the input's. Variance $1/\mathrm{fan_{in}}$ keeps
     * activations the same size from layer to layer; on the way back a
     * gradient is a sum of fan_out products and wants $1/\mathrm{fan_{out}}$.
     * Xavier compromises with one over the average of the two fans, so that
     * neither the activations nor the gradients grow or vanish through a stack
     * of layers. Larger weights
     * would also make the scores larger and the softmax sharper (chapter 04).
     * The first lines of the output check the draw:
     *
     * @show src/nn/linear.c linear_reset_xavier_uniform
     *
     * The module was made with `dropout = 0.5`, but runs in evaluation mode, so
     * nothing is dropped (chapter 04 explains dropout and the two modes).
     *
     * The forward pass is the six steps, in `multihead_steps`: ten calls,
     * since steps 1 and 2 are a projection and a split for each of Q, K and
     * V. Each step is a chapter: the projections are chapter 02's
     * `linear_steps`, the split and the join chapter 06's `transpose_qkv`
     * and `transpose_output`, the lengths chapter 07's `repeat_valid_lens`,
     * the attention chapter 04's `dot_attention_steps`. The module calls
     * the layers' and the attention's *steps*, not their doors, because
     * its own door has already checked everything they would. `STEP` runs
     * a call and, when it fails, jumps to the end:
     *
     * @show src/nn/multihead.c multihead_steps
     *
     * What the steps make is kept in one struct, `s`, so that the caller
     * can look at every stage afterwards and free them all in one place:
     *
     * @show src/nn/multihead_internal.h steps
     *
     * The steps hold no check of their own: as in chapter 04,
     * `multihead_forward`, the function a program calls, is the door. It
     * checks the inputs once (shapes that agree with each other and with
     * the layers, finite numbers, and what the doors of chapters 02 and
     * 04 would check: the layers' own weights and the dropout setting; a
     * message names the module, as in `multihead W_o: weight has shape
     * (8, 6), expected (8, 8)`), and nothing is traced before they pass.
     * Then it opens the trace's first line, `multihead(h=5)`, with
     * `SCOPE_OF` (it closes as the door returns; `TRACE_QKV_LENS` lists its
     * inputs as chapter 04's `TRACE_INPUTS` does, labelled q, k and v, with
     * `valid_lens` read on the side). The
     * module's line is opened in `multihead_forward`, since only it calls
     * `multihead_steps`; chapter 04's pooling opens its line in its steps,
     * since the module calls those steps and skips the pooling's door.
     * The door then gives the inputs the names the trace prints
     * (`name_inputs`: `NAMES(B, Lq, d_q)` is the text `"B, Lq, d_q"`, taken
     * from the code, so it compiles only where variables `B`, `Lq` and
     * `d_q` exist), runs the steps, and checks the result once at the end
     * (a NaN or an infinity from finite inputs means an overflow; only
     * then does `check_overflow` look for the step that made it). Every
     * step is a `STEP`, as in `multihead_steps`; at `done:` the door frees
     * what the steps made, and the output too if a step failed:
     *
     * @show src/nn/multihead.c multihead_forward
     *
     * Read the trace from top to bottom; every line is one step and its shapes.
     *
     * - `W_q: x W^T` maps the queries `(2, 4, 100)` to `(2, 4, 100)`, one dgemm.
     *   The shape does not change here because $d_q = d_{model} = 100$, but the
     *   numbers are new (`new`).
     * - `transpose_qkv(h=5)` gives `(2, 4, 5, 20)`, `(2, 5, 4, 20)`, then
     *   `(10, 4, 20)`: view, view, copy, because B = 2, h = 5 and $L_q$ = 4
     *   are all above 1 ([chapter 01's
     *   table](01_shapes_strides_views.md#summary-when-each-step-is-a-view)). The same for keys
     *   and values with 6 positions: `(10, 6, 20)`.
     * - `repeat_interleave(5)` turns `(2,)` into `(10,)`, one length per
     *   head: a view as `(2, 1)`, an expand to `(2, 5)`, and the copy that
     *   merges `(B, h)` as the data's was merged (chapter 07).
     * - `dot_attention` runs on 10 "examples", as if the heads were examples:
     *   scores `(10, 4, 6)`, masked softmax with scale $1/\sqrt{20}$ (the size
     *   of one head, not of the model), printed as 0.223607, and `(10, 4, 20)`
     *   outputs.
     * - `transpose_output(h=5)` puts the heads side by side: view, view, copy
     *   (h and $L_q$ above 1), back to `(2, 4, 100)`.
     * - `W_o` mixes them: `(2, 4, 100)`, the shape d2l prints.
     *
     * Each line has four columns, read left to right:
     *
     * 1. **the step**, indented by two spaces for each step it is part
     *    of, with its arguments as PyTorch would write them:
     *    `reshape(-1, 4, 20)`, `permute(0, 2, 1, 3)`; a line that only
     *    opens a group (`multihead(h=5)`, `transpose_qkv(h=5)`) names the
     *    group, and the indented lines under it are its steps;
     * 2. **what happened to the numbers**: `view` (none moved: the same
     *    buffer read with other strides), `copy` (moved into a new
     *    buffer) or `new` (computed); a group's line leaves it blank;
     * 3. **the shapes**, input `->` output, as Python tuples; a group's
     *    line gives its inputs alone, since it is printed before its
     *    steps run (its last step's line shows what it makes), and a
     *    product joins its two inputs with `@`;
     * 4. **the same output shape in the lesson's names**, `(B*h, Lq,
     *    d_model/h)`, so that `(10, 4, 20)` reads as ten (example, head)
     *    pairs of 4 queries of 20 features; a group's line with one input
     *    names that input's shape instead, and one with several names
     *    none.
     *
     * `mha trace` prints this trace for any sizes without computing
     * anything, running the module on shapes alone. This command prints exactly the lines of the output below, from
     * `queries ...` to `output ...` (the first says what the sizes
     * are, the last what the module returns), and `make test` checks
     * that it does:
     *
     * ```sh
     * build/mha trace --batch 2 --queries 4 --kv 6 --hiddens 100 --heads 5 --valid-lens 3,2
     * ```
     *
     * Change a size and read the trace again: with `--batch 1`, which
     * copies become views? `mha trace --quiz` turns such questions into
     * a worksheet ([reading a trace](reading-a-trace.md) has more).
     */
    show_xavier("W_q", &l->m.W_q);
    show_xavier("W_o", &l->m.W_o);
    printf("\n");
    tensor *x, *y, *lens, *out;
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &x)); // (B, Lq, d_q)
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &y)); // (B, Lk, d_k) = (B, Lk, d_v)
    tensor_fill(x, 1);
    tensor_fill(y, 1);
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    char s[TRACE_SHAPE_MAX], t[TRACE_SHAPE_MAX];
    printf("queries %s, keys and values %s: %d heads of %d features, "
           "valid_lens [3, 2]\n\n", tensor_shape_str(x, s, sizeof s),
           tensor_shape_str(y, t, sizeof t), H, D / H);
    trace_to(stdout);
    CHECK(multihead_forward(&l->m, x, y, y, lens, &out, &l->weights));
    trace_to(NULL);
    printf("\noutput %s, attention weights %s\n", tensor_shape_str(out, s, sizeof s),
           tensor_shape_str(l->weights, t, sizeof t));
    tensor_free(x);
    tensor_free(y);
    tensor_free(lens);
    tensor_free(out);
}

static void equal_inputs(const lesson *l)
{
    section("2. What the heads see when every input is the same");
    /*md
     * With X and Y all ones, every projected query is the same vector, and so
     * is every projected key, in every head. All valid keys get the same score,
     * and each head spreads its weight evenly: 1/3 over keys 0-2 in example 0
     * and 1/2 over keys 0-1 in example 1, exactly as in chapter 04's toy. This
     * input only shows that the shapes and the mask are right; to see the heads
     * do something different, they need different inputs.
     *
     * `weights`, the forward's second output, is `(B, h, Lq, Lk)`: the
     * attention's `(B*h, Lq, Lk)` weights of section 1's run, viewed with B
     * and h separated again, so `weights[b, i]` is head $i$ of example $b$.
     * Like PyTorch's `need_weights`, passing `NULL` instead says they are not
     * wanted; the module itself keeps nothing of the pass.
     */
    for (size_t b = 0; b < B; b++) {
        printf("example %zu, head 0, query 0:", b);
        for (size_t t = 0; t < Lk; t++)
            printf(" %.4f", *TENSOR_AT(l->weights, b, 0, 0, t));
        printf("\n");
    }
}

static void varied_inputs(lesson *l)
{
    section("3. Inputs worth looking at");
    /*md
     * Now queries, and keys that are also the values, drawn from a normal
     * with standard deviation 2 (the
     * random stream of the weights goes on), and the same weights. Each head
     * projects them into its own 20-feature subspace, so each head scores the
     * same keys differently. The grid has one panel per (example, head): rows
     * are queries, columns are keys, and all panels share one colour scale
     * from 0 (white; a masked key's weight is exactly 0, and a weight
     * near 0 is near white) to the largest weight, which
     * rounds to 1, as the legend under the grid prints. Under it, for
     * example 0, each head's favourite key for each query, with its weight.
     *
     * What to look for:
     *
     * - The mask. In example 0 keys 3-5 are blank in every panel, in example 1
     *   keys 2-5. Each of the 10 batch rows got the right length from
     *   `repeat_interleave`.
     * - Heads disagree. In example 0, head 0 sends every query to key 2
     *   (weights 0.909 to 0.999). Head 1 sends queries 0 and 1 to key 2 but
     *   query 2 to key 0 (0.990) and query 3 to key 1 (0.872). Head 4 is
     *   unsure about query 0: its favourite, key 2, gets only 0.580. The same
     *   query, five different answers.
     * - The weights are sharp: most rows have one cell above 0.75. The inputs
     *   have standard deviation 2, so the projected queries and keys are twice
     *   as large as for standard-normal inputs, and their dot products four
     *   times larger. Chapter 10 uses standard-normal inputs and its panels are
     *   much softer.
     *
     * The weights are untrained (Xavier), so no head means anything yet. What
     * the picture shows is the capacity: each head can attend to something
     * different, and W_o can combine what they found. Training is what makes
     * them specialise (chapter 13).
     *
     * The same weights go into `plots/08_view.html`, a page to open in a
     * browser (`mha view` writes such pages for any sizes or inputs). Its
     * head view joins each query to the keys it attends to, one colour per
     * head; hover a query to read its row. Its grid is the picture above,
     * with the masked keys striped so that they cannot be taken for small
     * weights, and its dataflow lists the steps of the trace with their
     * shapes, view, copy or new.
     */
    tensor *lens, *xq, *xk, *out;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &lens));
    CHECK(tensor_alloc(SHAPE(B, Lq, D), &xq));
    CHECK(tensor_alloc(SHAPE(B, Lk, D), &xk));
    tensor_fill_normal(xq, l->rng, 0, 2);
    tensor_fill_normal(xk, l->rng, 0, 2);
    trace_log log; // the steps, for the page's dataflow
    trace_log_start(&log);
    tensor *weights; // (B, h, Lq, Lk)
    CHECK(multihead_forward(&l->m, xq, xk, xk, lens, &out, &weights));
    trace_log_stop(&log);
    char titles[B * H][32];
    const char *tp[B * H];
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < H; i++) {
            snprintf(titles[b * H + i], sizeof titles[0], "example %zu, head %zu",
                     b, i);
            tp[b * H + i] = titles[b * H + i];
        }
    heatmap_options opt = {.titles = tp, .ntitles = B * H};
    CHECK(heatmap_terminal(stdout, weights, &opt));
    printf("\n");
    draw_heatmap(weights, &opt, "08_heads");
    explorer_page page = {.title = "Chapter 08: the heads of d2l's example",
                          .weights = weights, .valid_lens = lens,
                          .head_size = D / H, .trace = &log};
    draw_explorer(&page, "08_view");
    trace_log_free(&log);
    printf("\nexample 0, favourite key (weight) of queries 0 1 2 3:\n");
    for (size_t i = 0; i < H; i++) {
        printf("  head %zu:", i);
        for (size_t r = 0; r < Lq; r++) {
            size_t best = 0;
            for (size_t t = 1; t < Lk; t++)
                if (*TENSOR_AT(weights, 0, i, r, t) >
                    *TENSOR_AT(weights, 0, i, r, best))
                    best = t;
            printf("  %zu (%.3f)", best, *TENSOR_AT(weights, 0, i, r, best));
        }
        printf("\n");
    }
    tensor_free(lens);
    tensor_free(xq);
    tensor_free(xk);
    tensor_free(out);
    tensor_free(weights);
}

static void cost(void)
{
    section("4. Cost");
    /*md
     * With $L_q = L_k = L$ and $d_q = d_k = d_v = d_{model} = D$, one forward
     * pass costs about
     *
     * $$8 B L D^2 + 4 B L^2 D \text{ flops}$$
     *
     * the first term for the four projections, the second for the attention.
     * $h$ does not appear: splitting into heads changes how the work is
     * grouped, not how much there is. The memory for the weights is $B h L^2$
     * doubles, and that does grow with $h$. The projections dominate while
     * $L < 2D$; past that, the attention's $L^2$ term takes over.
     *
     * For d2l's example the program counts it exactly. Each projection costs
     * 2 flops per multiply-add for each row it maps:
     * $2 \cdot 8 \cdot 100 \cdot 100$ for the 8 query rows (W_q, W_o),
     * $2 \cdot 12 \cdot 100 \cdot 100$ for the 12 key and value rows (W_k,
     * W_v). The attention is
     * $4 B L_q L_k d_{model}$. With such short sequences the projections are
     * 98% of the work.
     *
     * Splitting into heads is free in flops; it costs only the copies in the
     * trace of section 1. Three reshapes copy in the `transpose_qkv` calls and
     * one in `transpose_output` (the 4,000 doubles the program counts), plus
     * the tiny `repeat_interleave` (10 lengths, not counted). For
     * $L_q = L_k = L$ that is $4 B L D$ doubles moved, against $8 B L D^2$
     * flops for the projections: noticeable only when $D$ is small.
     */
    double proj = 2.0 * (2 * B * Lq + 2 * B * Lk) * D * D;
    double attn = 4.0 * B * Lq * Lk * D;
    printf("projections  %8.0f flops (%.0f%% of the work)\n", proj,
           100 * proj / (proj + attn));
    printf("attention    %8.0f flops\n", attn);
    printf("copies       %8d doubles (%d KB)\n", 2 * (B * Lq + B * Lk) * D,
           2 * (B * Lq + B * Lk) * D * 8 / 1000);
    printf("weights      %8d doubles\n", B * H * Lq * Lk);
}

int main(void)
{
    mha_program_init();
    lesson l;
    make_module(&l);
    whole_trace(&l);
    equal_inputs(&l);
    varied_inputs(&l);
    cost();
    multihead_free(&l.m);
    tensor_free(l.weights);
    gsl_rng_free(l.rng);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Predict the shapes. For self-attention with B = 3, n = 5, d_model = 12 and
 *    h = 4, write down the shape after every step of the trace of section 1:
 *    the projections, the three steps of each `transpose_qkv`, the scores, the
 *    attention output, the three steps of `transpose_output`, and W_o. Mark
 *    each step view, copy or new. Check yourself with
 *    `mha trace --quiz --batch 3 --queries 5 --kv 5 --hiddens 12 --heads 4`.
 * 2. Visualize the attention weights of multiple heads. Change the standard
 *    deviation of the inputs in section 3 from 2 to 1, then to 4 (the last
 *    argument of the two `tensor_fill_normal` calls in section 3 of
 *    `chapters/08_multihead_module.c`; `make ch08` runs it again, and
 *    `git checkout chapters/` undoes the change), and look at
 *    `plots/08_heads.png` each time. Describe how the panels change, and
 *    explain it with chapter 04's section 5.
 * 3. Design an experiment to measure how important each head is. Hint: head $i$
 *    reaches the output only through columns $i p$ to $i p + p - 1$ of W_o
 *    (chapter 09, section 4), so zeroing them removes exactly that head. What
 *    would you measure with and without the head? How would you use the results
 *    to prune heads, and how would you check that the pruned model is still
 *    good? Why would the experiment say little about the untrained module of
 *    this chapter? Chapter 14 runs this experiment on a trained model.
 * 4. Count the flops of the four projections and of the attention for the sizes
 *    of exercise 1. Which dominates? At which sequence length would the two be
 *    equal for d_model = 12?
 */
