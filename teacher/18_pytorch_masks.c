/* Chapter 18, the key: PyTorch's masks.
 *
 * The numbers the answers to chapter 18's exercises quote: the weights of
 * section 2's misread mask worked by hand, a constant float mask against
 * none, and the zero key's weight of section 5's first row.  The example
 * is the chapter's: one head of p = 2, identity projections, the values
 * the keys, scores q . k / sqrt(2), valid_lens [3, 2].
 */
#include <math.h>

#include "key.h"

/* The weights of the scores s[0 .. n-1], each scaled by 1/sqrt(2) and
 * shifted by add[j] (-INFINITY hides a key), into w. */
static void weights(const double *s, const double *add, size_t n, double *w)
{
    double top = -INFINITY, sum = 0;
    for (size_t j = 0; j < n; j++)
        top = fmax(top, s[j] / sqrt(2) + add[j]);
    for (size_t j = 0; j < n; j++)
        sum += w[j] = exp(s[j] / sqrt(2) + add[j] - top);
    for (size_t j = 0; j < n; j++)
        w[j] /= sum;
}

static void print_row(const char *label, const double *w, size_t n)
{
    printf("%s", label);
    for (size_t j = 0; j < n; j++)
        printf(" %.4f", w[j]);
    printf("\n");
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The body, after the checks that are already written above it:
     * allocate `(B, Lk)` and set entry $(b, j)$ to 1 (True: ignore this
     * key) when $j \ge$ `valid_lens[b]`, else 0; on any failure free what
     * was made and leave `*out` NULL. For `[3, 2]` and $L_k = 4$ that is
     * the mask section 1 prints, `[[0, 0, 0, 1], [0, 0, 1, 1]]`. In a
     * student's copy, `make grade EXERCISE=mask_key_padding_from_lens`
     * runs its four tests: the values, the lengths 0 and $L_k$, the
     * refusals (a length past $L_k$, negative or fractional, and a
     * `valid_lens` that is not `(B,)`), and the clean-up when memory runs
     * out. The library's solution is folded on the chapter's page.
     *
     * `valid_lens` of shape $(B, L_q)$ give each query its own length,
     * which `key_padding_mask`, one row of $L_k$ per example, cannot hold:
     * they go into `attn_mask` in its 3-D shape $(B h, L_q, L_k)$. Row
     * $b h + i$ (head $i$ of example $b$) holds True at $(q, j)$ when
     * $j \ge$ `valid_lens[b, q]`: each example's rows repeated $h$ times in
     * a row, as `repeat_interleave` repeats them (chapter 07), not tiled.
     * Below, the lengths `[[1, 2, 3], [2, 2, 1]]` for two heads.
     */
    const double lens[2][3] = {{1, 2, 3}, {2, 2, 1}};
    size_t h = 2, Lk = 4;
    for (size_t b = 0; b < 2; b++)
        for (size_t i = 0; i < h; i++) {
            printf("attn_mask row %zu (example %zu, head %zu):", b * h + i, b, i);
            for (size_t q = 0; q < 3; q++) {
                printf(" [");
                for (size_t j = 0; j < Lk; j++)
                    printf("%s%d", j ? " " : "", (double)j >= lens[b][q]);
                printf("]");
            }
            printf("\n");
        }
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * SDPA's mask says True = attend, `[[1, 1, 1, 0], [1, 1, 0, 0]]`. Read
     * as True = may not attend, it hides exactly the keys meant to be seen
     * and shows the ones meant to be hidden: example 0 sees key 3 alone,
     * example 1 keys 2 and 3 alone (section 1 prints that additive mask).
     * So every query of example 0 gives key 3 the weight 1.
     *
     * Query 0 of example 1, $q = (2, 0)$, against key 2, $(-1, 1)$, and
     * key 3, $(1, 1)$: scores $-2$ and $2$, scaled by $1/\sqrt 2$ to
     * $-1.4142$ and $1.4142$, a difference of 2.8284. Key 3 gets
     * $1 / (1 + e^{-2.8284}) = 1 / 1.0591 = 0.9442$ and key 2 the rest,
     * 0.0558: section 2's row `[0, 0, 0.0558, 0.9442]`. Nothing fails; the
     * numbers are simply those of the wrong keys.
     */
    double s[] = {-2, 2}, add[] = {0, 0}, w[2];
    printf("scores -2 and 2, scaled: %.4f and %.4f, difference %.4f\n",
           -2 / sqrt(2), 2 / sqrt(2), 4 / sqrt(2));
    printf("1 + e^-%.4f = %.4f\n", 4 / sqrt(2), 1 + exp(-4 / sqrt(2)));
    weights(s, add, 2, w);
    print_row("weights of keys 2 and 3:", w, 2);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * A float mask of all zeros adds nothing. All 5s add the same 5 to
     * every score of a row, and a softmax does not change when a constant
     * is added to its whole row
     * ($e^{s_j + 5} / \sum_k e^{s_k + 5} = e^{s_j} / \sum_k e^{s_k}$): the
     * weights are again those without a
     * mask. Only differences within a row matter, which is why section
     * 3's $-|i - j|$ changes them. Below, example 0's query 0 (scores 1,
     * 0, 1, 0 against the four keys) with no mask, zeros and 5s.
     *
     * A row of all $-\infty$ hides every key of that query. PyTorch's
     * nn.MultiheadAttention then takes the softmax of four $-\infty$: the
     * maximum is $-\infty$, $-\infty - (-\infty)$ is NaN, and the row and
     * that query's output are NaN (section 4 prints it). This library
     * refuses the row before any product, with status 1 (GSL_EDOM) and a
     * message naming the query, the example and the head; d2l's
     * masked_softmax, with a valid length of 0, gives each key 1/4.
     */
    double s[] = {1, 0, 1, 0}, none[] = {0, 0, 0, 0}, fives[] = {5, 5, 5, 5};
    double w[4], w5[4];
    weights(s, none, 4, w);
    print_row("no mask, or zeros:", w, 4);
    weights(s, fives, 4, w5);
    print_row("all 5s:           ", w5, 4);
    double most = 0;
    for (size_t j = 0; j < 4; j++)
        most = fmax(most, fabs(w[j] - w5[j]));
    printf("the same to 1e-15: %s\n", most <= 1e-15 ? "yes" : "no");
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The zero key's score is $q \cdot 0 = 0$, so $e^0 = 1$ joins the sum
     * beside the other keys' $e^{s_j}$: its weight is
     * $1 / (1 + \sum_j e^{s_j})$, with $s_j$ the scaled scores and the
     * mask added (a hidden key adds $e^{-\infty} = 0$).
     *
     * Section 5, example 0, query 0, $q = (1, 0)$, sees keys 0 to 2 (key 3
     * is padding): scores 1, 0, 1, scaled 0.7071, 0, 0.7071, and
     * $e^{0.7071} = 2.0281$. With the zero key the sum is
     * $1 + 2.0281 + 1 + 2.0281 = 6.0562$: the zero key gets
     * $1 / 6.0562 = 0.1651$, keys 0 and 2 get $2.0281 / 6.0562 = 0.3349$
     * each and key 1 0.1651, section 5's first row
     * `[0.3349, 0.1651, 0.3349, 0.0000, 0.1651]`. In example 1 (valid
     * length 0) the zero key is all that is left: weight 1 and an output
     * row of zeros, as printed there.
     *
     * With a single other key of score $s$ the zero key gets
     * $1 / (1 + e^s)$: more than half exactly when $e^s < 1$, that is for
     * $s < 0$ (a half at $s = 0$).
     */
    double e = exp(1 / sqrt(2)), sum = 1 + e + 1 + e;
    printf("scaled score of 1: %.4f, e^that: %.4f\n", 1 / sqrt(2), e);
    printf("sum with the zero key: %.4f\n", sum);
    printf("zero key %.4f, keys 0 and 2 %.4f, key 1 %.4f\n", 1 / sum, e / sum,
           1 / sum);
    for (double s = -1; s <= 1; s += 1)
        printf("one key of score %+.0f: the zero key gets %.4f\n", s,
               1 / (1 + exp(s)));
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * No future is seen. The causal rule hides key $j$ from query $i$
     * when $j > i + L_k - L_q$, with $j$ a position of the sequence.
     * `bias_k` and `bias_v` are not positions: they are learned constants,
     * the same for every input, appended after the projections. They
     * carry nothing from any token, so a query that attends to them learns
     * nothing about later tokens; the mask grows a column of 0 for them
     * (PyTorch pads `attn_mask` with 0 the same way), visible to every
     * query, as section 6's trace shows.
     *
     * With rope, every key is turned by the angle of its position before
     * the scores. `bias_k` has no position: turning it by $L_k$ (after the
     * last key) would make a "constant" key that depends on the length of
     * the input, and leaving it unturned gives it no relative position at
     * all. nn.MultiheadAttention has no rotary embeddings, so there is no
     * reference meaning to follow; `mha` refuses the pair in one line
     * rather than choose one silently.
     */
    printf("(no numbers: the answer is the rule above and section 6's trace)\n");
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
