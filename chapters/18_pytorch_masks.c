/* Chapter 18: PyTorch's masks: three conventions, one picture.
 *
 * d2l's valid_lens, a bool mask in both of PyTorch's polarities, a float
 * mask and key padding, each turned into one additive mask and run
 * through one module; what each does to a row with no key; add_zero_attn
 * as a sink; add_bias_kv and the keys growing in the trace.  Run it with
 * `make ch18`; the book's page is docs/18_pytorch_masks.md.
 */

/*md
 * Chapter 03 masked keys with d2l's `valid_lens`: query $i$ of example
 * $b$ sees the first `valid_lens[b]` keys. PyTorch says the same thing
 * three other ways, and they do not agree with each other:
 *
 * - `nn.MultiheadAttention` takes a bool `attn_mask` of shape $(L_q, L_k)$ or
 *   $(B \cdot h, L_q, L_k)$ and a bool `key_padding_mask` of
 *   shape $(B, L_k)$, where **True means "may not attend"**;
 * - `F.scaled_dot_product_attention` takes a bool `attn_mask` where
 *   **True means "may attend"**: the same type, the opposite meaning
 *   ([pytorch#170415](https://github.com/pytorch/pytorch/issues/170415),
 *   [LLMs-from-scratch#1061](https://github.com/rasbt/LLMs-from-scratch/discussions/1061));
 * - both take a float mask instead, *added* to the scaled scores before
 *   the softmax: $-\infty$ hides a key, any other number only shifts it.
 *
 * "Masking has got to be the most confusing part", as a user of
 * x-transformers put it
 * ([lucidrains/x-transformers#164](https://github.com/lucidrains/x-transformers/issues/164)).
 * This chapter puts all of them on one small example, turns each into
 * one additive mask, and runs them through one module: two examples
 * ($B = 2$) of 3 queries and 4 keys, one head of $p = 2$ features, with
 * projections that are the identity, so that the weights are
 * $\mathrm{softmax}(q k^\top / \sqrt{2} + \text{mask})$ and nothing else.
 */

#include <math.h>

#include "lesson.h"

enum { B = 2, LQ = 3, LK = 4, P = 2 };

/* The inputs and the module the sections share. */
typedef struct {
    tensor *q, *k;   // (B, Lq, p), (B, Lk, p); the values are the keys
    tensor *lens;    // (B,): d2l's valid_lens [3, 2]
    multihead m;     // one head, identity projections
} lesson;

/* Print a (B, L, n) or (L, n) mask or weights with its name. */
static void show(const char *name, const tensor *t)
{
    printf("%s:\n", name);
    tensor_print(stdout, t, 4);
    printf("\n");
}

/* 1 when a and b (contiguous, one shape) hold the same numbers, -inf
 * included (-inf - -inf is NaN, so a difference would not say). */
static int same_numbers(const tensor *a, const tensor *b)
{
    for (size_t e = 0; e < tensor_numel(a); e++)
        if (a->data[e] != b->data[e])
            return 0;
    return 1;
}

/* Run the module with opt; the weights (B, h, Lq, Lk') into *w. */
static void run(lesson *l, const mask_options *opt, tensor **w)
{
    tensor *out;
    CHECK(multihead_forward_masked(&l->m, l->q, l->k, l->k, opt, &out, w));
    tensor_free(out);
}

static void three_conventions(lesson *l, tensor **kpm, tensor **additive)
{
    section("1. Three ways to say which keys a query sees");
    /*md
     * The chapter's inputs are small enough to work by hand: 2 examples
     * of 3 queries and 4 keys, two features each, the values equal to the
     * keys, one head, and every layer the identity with no bias, so a
     * score is $q \cdot k / \sqrt{2}$ and an output row is a weighted sum
     * of the keys. The section's output prints them first, then the masks.
     */
    show("queries (B, Lq, p)", l->q);
    show("keys, also the values (B, Lk, p)", l->k);
    /*md
     * d2l's `valid_lens` [3, 2] say: example 0 sees keys 0-2, example 1
     * keys 0-1. As PyTorch's `key_padding_mask` that is a $(B, L_k)$ bool
     * table with True at the keys to ignore, every key at or past the
     * length. Writing it is this chapter's coding exercise:
     *
     * @show src/nn/mask.c mask_key_padding_from_lens
     *
     * SDPA's mask is its negation, True at the keys to keep. Neither is
     * added to anything: `mask_from_bool` turns either one into an
     * additive mask, 0 where a key is seen and $-\infty$ where it is not,
     * given which polarity it is in:
     *
     * @show src/nn/mask.c mask_from_bool
     */
    CHECK(mask_key_padding_from_lens(l->lens, LK, kpm));
    printf("valid_lens [3, 2]\n\n");
    show("key_padding_mask, True = ignore (nn.MultiheadAttention)", *kpm);
    tensor *keep; // SDPA's polarity: True = attend
    CHECK(tensor_alloc(SHAPE(B, LK), &keep));
    for (size_t e = 0; e < B * LK; e++)
        keep->data[e] = 1 - (*kpm)->data[e];
    show("the same keys as SDPA's mask, True = attend", keep);
    tensor *from_sdpa;
    CHECK(mask_from_bool(*kpm, 1, additive));
    CHECK(mask_from_bool(keep, 0, &from_sdpa));
    show("additive, from either", *additive);
    printf("the two additive masks are equal: %s\n",
           yes_no(same_numbers(*additive, from_sdpa)));
    /*md
     * Read with the wrong polarity, the same table hides exactly the keys
     * it meant to keep: example 1 would see keys 2 and 3 and nothing
     * else. Nothing fails; the numbers are just wrong.
     */
    tensor *wrong;
    CHECK(mask_from_bool(keep, 1, &wrong));
    show("SDPA's mask read as nn.MultiheadAttention's (wrong)", wrong);
    tensor_free(keep);
    tensor_free(from_sdpa);
    tensor_free(wrong);
}

static void one_module(lesson *l, const tensor *kpm_additive,
                       tensor **w_lens)
{
    section("2. One module, every convention");
    /*md
     * The module merges whatever masks it is given into one additive
     * mask of shape $(B \cdot h, L_q, L_k)$, row $b h + i$ for head $i$ of
     * example $b$: `attn_mask` broadcast over the rows when it is
     * $(L_q, L_k)$, `key_padding_mask` over the heads and queries, then
     * $-\infty$ past each row's valid length and, with `causal`, past the
     * diagonal. Masks *add*: a key is hidden when any of them hides it.
     *
     * @show src/nn/mask.c mask_merge
     *
     * Run with d2l's `valid_lens`, with the key padding mask, and with
     * the same padding written as a 3-D `attn_mask`, the module gives the
     * same weights, and the same as chapter 08's module, which knows only
     * `valid_lens`. Run with section 1's mistake, SDPA's mask read as
     * nn.MultiheadAttention's, it runs just as well, and every query of
     * example 0 gives all its weight to key 3, the one it should not see.
     */
    mask_options by_lens = {.valid_lens = l->lens};
    mask_options by_padding = {.key_padding = kpm_additive};
    tensor *am3; // (B*h, Lq, Lk): each query row of example b its padding
    CHECK(tensor_alloc(SHAPE(B, LQ, LK), &am3));
    for (size_t b = 0; b < B; b++)
        for (size_t i = 0; i < LQ; i++)
            for (size_t j = 0; j < LK; j++)
                *TENSOR_AT(am3, b, i, j) = *TENSOR_AT(kpm_additive, b, j);
    mask_options by_attn = {.attn_mask = am3};
    tensor *w_pad, *w_attn, *out08, *w08;
    run(l, &by_lens, w_lens);
    run(l, &by_padding, &w_pad);
    run(l, &by_attn, &w_attn);
    CHECK(multihead_forward(&l->m, l->q, l->k, l->k, l->lens, &out08, &w08));
    show("weights with valid_lens (B, h, Lq, Lk)", *w_lens);
    printf("largest |difference| from them:\n");
    printf("  key_padding_mask          %g\n", largest_abs_diff(*w_lens, w_pad));
    printf("  attn_mask (B*h, Lq, Lk)   %g\n", largest_abs_diff(*w_lens, w_attn));
    printf("  chapter 08's module       %g\n\n",
           largest_abs_diff(*w_lens, w08));
    tensor *wrong, *w_wrong; // 0 and -inf swapped: the keys kept are hidden
    CHECK(tensor_alloc(SHAPE(B, LK), &wrong));
    for (size_t e = 0; e < B * LK; e++)
        wrong->data[e] = kpm_additive->data[e] == 0 ? -INFINITY : 0;
    mask_options by_wrong = {.key_padding = wrong};
    run(l, &by_wrong, &w_wrong);
    show("weights with the mask read the wrong way", w_wrong);
    tensor *all[] = {am3, w_pad, w_attn, out08, w08, wrong, w_wrong};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void float_masks(lesson *l, const tensor *kpm_additive,
                        const tensor *w_lens, tensor **grid)
{
    section("3. A float mask shifts; masks add");
    /*md
     * A float mask does more than hide. Below, key $j$ of query $i$ gets
     * $-|i - j|$ added to its score: nearer keys are favoured, the way
     * ALiBi ([Press et al. 2021](https://arxiv.org/abs/2108.12409)) biases
     * attention by distance, and no key is hidden. Given with the key
     * padding as well, the two add up: the padding hides its keys, and the
     * float mask shifts the ones left. The heatmap puts the three side by
     * side, one row per example.
     */
    tensor *dist; // (Lq, Lk): -|i - j|
    CHECK(tensor_alloc(SHAPE(LQ, LK), &dist));
    for (size_t i = 0; i < LQ; i++)
        for (size_t j = 0; j < LK; j++)
            *TENSOR_AT(dist, i, j) = -fabs((double)i - (double)j);
    show("float attn_mask, -|i - j|", dist);
    mask_options by_dist = {.attn_mask = dist};
    mask_options both = {.attn_mask = dist, .key_padding = kpm_additive};
    tensor *w_dist, *w_both;
    run(l, &by_dist, &w_dist);
    run(l, &both, &w_both);
    show("weights with the float mask", w_dist);
    show("weights with the float mask and the key padding", w_both);
    // the heatmap: one row per example, one column per convention
    CHECK(tensor_alloc(SHAPE(B, 3, LQ, LK), grid));
    const tensor *cols[3] = {w_lens, w_dist, w_both};
    for (size_t b = 0; b < B; b++)
        for (size_t c = 0; c < 3; c++)
            for (size_t i = 0; i < LQ; i++)
                for (size_t j = 0; j < LK; j++)
                    *TENSOR_AT(*grid, b, c, i, j) =
                        *TENSOR_AT(cols[c], b, 0, i, j);
    tensor_free(dist);
    tensor_free(w_dist);
    tensor_free(w_both);
}

/* A softmax over row[0 .. n-1] as PyTorch's eager kernel computes it:
 * subtract the maximum, exponentiate, divide by the sum.  A row of all
 * -inf has maximum -inf, and -inf - (-inf) is NaN. */
static void plain_softmax(const double *row, size_t n, double *out)
{
    double max = -INFINITY, sum = 0;
    for (size_t j = 0; j < n; j++)
        max = row[j] > max ? row[j] : max;
    for (size_t j = 0; j < n; j++)
        sum += out[j] = exp(row[j] - max);
    for (size_t j = 0; j < n; j++)
        out[j] /= sum;
}

static void empty_row(lesson *l)
{
    section("4. A row with no key");
    /*md
     * Give example 1 a valid length of 0: its queries may see no key at
     * all. The conventions part here.
     *
     * - d2l fills masked scores with $-10^6$, so a row of nothing but
     *   masked keys is uniform: every key $1/L_k$. Chapter 03's
     *   `masked_softmax` keeps that rule.
     * - `nn.MultiheadAttention` fills them with $-\infty$; the row's
     *   maximum is $-\infty$ too, and $-\infty - (-\infty)$ is NaN
     *   ([pytorch#41508](https://github.com/pytorch/pytorch/issues/41508),
     *   open since 2020). The NaN spreads to that row of the output.
     * - Some of `F.scaled_dot_product_attention`'s fused kernels return
     *   zeros for such a row instead, and d2l's own masked softmax was
     *   changed to keep it uniform on purpose
     *   ([d2l-en#2423](https://github.com/d2l-ai/d2l-en/pull/2423)).
     *
     * Which answer this library gives depends on which of its paths
     * runs the row, and each path has one rule:
     *
     * - d2l's `masked_softmax` and the module built on it (chapter 08's
     *   `multihead_forward`; `mha forward` with `--valid-lens` alone)
     *   keep d2l's uniform row: the first line below.
     * - This chapter's `multihead_forward_masked`, the module as
     *   `nn.MultiheadAttention` runs it (`mha forward` with any of
     *   PyTorch's options), refuses such a row before computing anything
     *   and names it: the last lines below. Three answers to one
     *   question are three ways to be surprised, and with PyTorch's
     *   conventions an error is the only answer that cannot be mistaken
     *   for PyTorch's NaN or zeros.
     * - Chapter 11's head-major variant, and every causal or windowed
     *   path (chapters 16 and 19), refuse it too: there a uniform row
     *   would read the padding or the future.
     */
    tensor *lens0, *kpm0, *scores, *w;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 0}, &lens0));
    CHECK(tensor_alloc(SHAPE(B, LQ, LK), &scores));
    tensor_fill(scores, 1);
    CHECK(masked_softmax(scores, lens0, &w));
    printf("d2l's masked_softmax, valid_len 0:  ");
    for (size_t j = 0; j < LK; j++)
        printf(" %.4f", *TENSOR_AT(w, 1, 0, j));
    printf("\n");
    double hidden[LK] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    double nan_row[LK];
    plain_softmax(hidden, LK, nan_row);
    printf("softmax of four -inf (PyTorch's):   ");
    for (size_t j = 0; j < LK; j++) // printf may write NaN as -nan
        printf(isnan(nan_row[j]) ? " nan" : " %.4f", nan_row[j]);
    printf("\n");
    CHECK(mask_key_padding_from_lens(lens0, LK, &kpm0));
    tensor *additive, *out, *a;
    CHECK(mask_from_bool(kpm0, 1, &additive));
    mask_options opt = {.key_padding = additive};
    int status = multihead_forward_masked(&l->m, l->q, l->k, l->k, &opt,
                                          &out, &a);
    printf("this library, key_padding_mask:     status %d (GSL_EDOM)\n  %s\n",
           status, mha_last_error());
    mha_clear_error();
    tensor *all[] = {lens0, kpm0, scores, w, additive};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void sink(lesson *l, tensor **grid)
{
    section("5. add_zero_attn: a key that is always there");
    /*md
     * `add_zero_attn` appends one more key and value to every head after
     * the split, both zero. Its score is $q \cdot 0 = 0$ whatever the
     * query, and the masks grow a column of 0 for it, so every row sees at
     * least that key. The row of example 1 that was refused above now
     * gives all its weight to the zero key, and its output is the zero
     * value: attending to nothing, written as a number. A row that sees
     * other keys gives the zero key the share $1 / (1 + \sum_j e^{s_j})$,
     * $s_j$ its scores with the mask added: it is a *sink*, a place for
     * weight to go when no key deserves it
     * ([Xiao et al. 2023](https://arxiv.org/abs/2309.17453) found trained
     * models making one of the first token).
     *
     * @show src/nn/mask.c mask_grow
     */
    tensor *lens0, *kpm0, *additive, *w, *out;
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 0}, &lens0));
    CHECK(mask_key_padding_from_lens(lens0, LK, &kpm0));
    CHECK(mask_from_bool(kpm0, 1, &additive));
    mask_options opt = {.key_padding = additive, .add_zero_attn = 1};
    CHECK(multihead_forward_masked(&l->m, l->q, l->k, l->k, &opt, &out, &w));
    show("weights with add_zero_attn (B, h, Lq, Lk + 1)", w);
    show("output", out);
    CHECK(tensor_alloc(SHAPE(B, 1, LQ, LK + 1), grid));
    CHECK(tensor_copy_into(*grid, w));
    tensor *all[] = {lens0, kpm0, additive, w, out};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

static void growing(lesson *l)
{
    section("6. The keys grow: add_bias_kv and add_zero_attn in the trace");
    /*md
     * `add_bias_kv` appends a learned key `bias_k` and value `bias_v`,
     * each $(1, 1, d_{model})$, to K and V after the projections and
     * before the split. With both options $L_k$ grows twice, 4 to 5 to 6,
     * and the merged mask grows with it before any product is taken. The
     * trace of the whole module shows each step; `mha trace
     * --add-bias-kv --add-zero-attn --key-padding-mask` shows the same
     * for any size:
     *
     * @show src/nn/mask.c multihead_forward_masked
     *
     * Its steps 1-2, the projections and the split with the keys the two
     * options append, are one function that `mha trace` runs too, on
     * shapes alone:
     *
     * @show src/nn/mask.c project_heads
     *
     * The run below also asks for `average_weights`, PyTorch's
     * `average_attn_weights=True` (the default of
     * `nn.MultiheadAttention.forward`): the weights handed back are the
     * mean over the heads, `(B, Lq, Lk')` instead of `(B, h, Lq, Lk')`,
     * the trace's last line. It changes only what is returned: the
     * output is made from each head's own weights. With this chapter's
     * one head the mean of one head is that head, so the numbers printed
     * are its weights; with $h$ heads each entry would be the mean of $h$
     * of them (`mha forward --average-attn-weights`).
     *
     * The padding is section 1's: `valid_lens` [3, 2] as a key padding
     * mask over the 4 keys, so example 0 ignores key 3 and example 1
     * keys 2 and 3. Each option adds a column to it, as PyTorch pads its
     * mask with False: the bias key (column 4) and the zero key (column
     * 5) are seen by every query of both examples. In the weights below,
     * columns 3 (both examples) and 2 (example 1) are 0, and columns 4
     * and 5 are not.
     */
    tensor *kpm, *additive, *bk, *bv, *out, *w;
    CHECK(mask_key_padding_from_lens(l->lens, LK, &kpm));
    CHECK(mask_from_bool(kpm, 1, &additive));
    CHECK(tensor_from_array(SHAPE(1, 1, P), (double[]){1, -1}, &bk));
    CHECK(tensor_from_array(SHAPE(1, 1, P), (double[]){0.5, 0.5}, &bv));
    mask_options opt = {.key_padding = additive, .bias_k = bk, .bias_v = bv,
                        .add_zero_attn = 1, .average_weights = 1};
    trace_to(stdout);
    CHECK(multihead_forward_masked(&l->m, l->q, l->k, l->k, &opt, &out, &w));
    trace_to(NULL);
    printf("\n");
    show("weights, averaged over the heads (B, Lq, Lk + 2)", w);
    tensor *all[] = {kpm, additive, bk, bv, out, w};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
}

int main(void)
{
    mha_program_init();
    lesson l;
    // queries and keys of two features; the values are the keys
    CHECK(tensor_from_array(SHAPE(B, LQ, P),
                            (double[]){1, 0, 0, 1, 1, 1, 2, 0, 0, 2, 1, -1},
                            &l.q));
    CHECK(tensor_from_array(SHAPE(B, LK, P),
                            (double[]){1, 0, 0, 1, 1, 1, -1, 0,
                                       0, 1, 1, 0, -1, 1, 1, 1},
                            &l.k));
    CHECK(tensor_set_names(l.q, "B, Lq, p"));
    CHECK(tensor_set_names(l.k, "B, Lk, p"));
    CHECK(tensor_from_array(SHAPE(B), (double[]){3, 2}, &l.lens));
    multihead_config cfg = {.query_size = P, .key_size = P, .value_size = P,
                            .num_hiddens = P, .num_heads = 1};
    CHECK(multihead_init(&l.m, &cfg));
    linear *layers[4] = {&l.m.W_q, &l.m.W_k, &l.m.W_v, &l.m.W_o};
    for (size_t i = 0; i < 4; i++)
        for (size_t r = 0; r < P; r++)
            for (size_t c = 0; c < P; c++)
                *TENSOR_AT(layers[i]->weight, r, c) = r == c;

    tensor *kpm, *additive, *w_lens, *grid, *sinks;
    three_conventions(&l, &kpm, &additive);
    one_module(&l, additive, &w_lens);
    float_masks(&l, additive, w_lens, &grid);
    const char *titles[] = {"valid_lens [3, 2]", "float -|i - j|",
                            "float + key padding", NULL, NULL, NULL};
    heatmap_options opt = {.titles = titles, .ntitles = 6};
    draw_heatmap(grid, &opt, "18_masks");
    empty_row(&l);
    sink(&l, &sinks);
    const char *sink_titles[] = {"example 0, valid_len 3",
                                 "example 1, valid_len 0"};
    heatmap_options sopt = {.titles = sink_titles, .ntitles = 2,
                            .xlabel = "Keys (the last one: zeros)"};
    draw_heatmap(sinks, &sopt, "18_sink");
    growing(&l);
    tensor *all[] = {l.q, l.k, l.lens, kpm, additive, w_lens, grid, sinks};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tensor_free(all[i]);
    multihead_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `mask_key_padding_from_lens` (`make grade
 *    EXERCISE=mask_key_padding_from_lens`). d2l also takes `valid_lens` of
 *    shape $(B, L_q)$, one length per query: which of PyTorch's masks can
 *    hold those, and of what shape?
 * 2. Section 2 read SDPA's mask with nn.MultiheadAttention's polarity.
 *    Which keys did the queries of example 1 see then? Work out the
 *    weights of its query 0 by hand and compare them with the output.
 * 3. A float mask of all zeros, and one of all 5s: what do they change?
 *    What does a float mask of all $-\infty$ in one row do, in PyTorch
 *    and here?
 * 4. With `add_zero_attn`, a query sees keys of scores $s_j$ (scaled,
 *    mask included). What weight does the zero key get? Check it against
 *    section 5's first row. With a single other key of score $s$, for
 *    which $s$ does the zero key take more than half?
 * 5. With `causal` and `add_bias_kv`, every query sees `bias_k`, which
 *    sits after the last key. Does that let a query see the future? And
 *    why does this library refuse `add_bias_kv` with `rope`?
 */
