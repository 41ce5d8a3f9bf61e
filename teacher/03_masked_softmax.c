/* Chapter 03, the key: softmax and masks.
 *
 * The numbers the answers to chapter 03's exercises quote: one row's
 * weights from its printed scores, and a row's weights as its scores are
 * scaled.
 */
#include "key.h"

/* The softmax of the first len of s[0 .. n-1], the rest 0, printed. */
static void print_softmax(const char *label, const double *s, size_t n, size_t len)
{
    double max = s[0], sum = 0;
    for (size_t j = 1; j < len; j++)
        max = s[j] > max ? s[j] : max;
    for (size_t j = 0; j < len; j++)
        sum += exp(s[j] - max);
    printf("%s", label);
    for (size_t j = 0; j < n; j++)
        printf(" %.4f", j < len ? exp(s[j] - max) / sum : 0.0);
    printf("\n");
}

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * Only the first 3 scores count: $w_j = e^{s_j} / \sum_{k<3} e^{s_k}$,
     * and the fourth weight is exactly 0. The exponentials and their sum
     * are below; the weights agree with row `(0, 1)` of section 3's
     * output, 0.3236, 0.2731, 0.4032 and 0.0000, and sum to 1.
     */
    const double s[4] = {0.2909, 0.1213, 0.5108, 0.5693};
    double sum = 0;
    for (int j = 0; j < 3; j++) {
        printf("exp(%.4f) = %.4f\n", s[j], exp(s[j]));
        sum += exp(s[j]);
    }
    printf("sum = %.4f\n", sum);
    print_softmax("weights:", s, 4, 3);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Row `(0, 0)` of section 2 has valid length 2 and scores 0.5508 and
     * 0.0707, weights 0.6178 and 0.3822. With two scores the softmax is a
     * logistic function of their difference, $w_0 = 1/(1 + e^{-(s_0 - s_1)})$,
     * so scaling the scores scales the difference (printed below). Times
     * 10 the larger score takes almost all the weight, 0.9918; times a
     * tenth the weights are nearly equal, 0.5120 and 0.4880. A large
     * scale makes the softmax pick the largest score (the limit is the
     * argmax, a one-hot row); a small one makes it uniform (the limit is
     * $1/n$ each). Chapter 04 divides by $\sqrt{d}$ to keep the scores in
     * between, where the weights still depend on the scores and gradients
     * still flow.
     */
    const double s[2] = {0.5508, 0.0707};
    const double scale[3] = {1, 10, 0.1};
    for (int i = 0; i < 3; i++) {
        double t[2] = {s[0] * scale[i], s[1] * scale[i]};
        char label[64];
        snprintf(label, sizeof label, "scores %7.4f %7.4f, difference %7.5f, weights:",
                 t[0], t[1], t[0] - t[1]);
        print_softmax(label, t, 2, 2);
    }
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * A `(B, Lq)` `valid_lens` gives each query a prefix of the keys,
     * keys 0 to $\ell - 1$.
     *
     * - (a) **Causal: yes.** Query $i$ sees keys 0 to $i$, a prefix of
     *   length $i + 1$ (with $L_q = L_k$; section 6's `causal_valid_lens`
     *   is exactly this).
     * - (b) **Padding at the start: no.** The visible keys are a suffix,
     *   positions $P$ to $L_k - 1$ after $P$ pads; a prefix length cannot
     *   hide keys in front of visible ones. (Padding on the right, or
     *   shifting the sequences, turns it back into (a)'s kind.)
     * - (c) **A window of keys $i-2$ to $i$: no**, except for the first
     *   three queries, where the window starts at key 0 and it is the
     *   causal prefix. From query 3 on, keys 0 to $i-3$ must be hidden
     *   while later keys are seen, and a length cannot say that. Both (b)
     *   and (c) need a full mask, one flag per (query, key) pair: an
     *   attention mask such as chapter 18's `attn_mask` (`mha forward
     *   --attn-mask`).
     */
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * The library's solution is `causal_valid_lens` in
     * [`src/nn/softmax.c`](../../src/nn/softmax.c) (folded on the chapter's
     * page); `make grade EXERCISE=causal_valid_lens` grades a student's.
     * Points to check: the shape is `(batch, len)`, row $b$ holds
     * $1, 2, \dots, len$ as doubles; `batch` or `len` 0 returns
     * `GSL_EINVAL` with a message naming the sizes and sets no output;
     * nothing leaks on failure.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
