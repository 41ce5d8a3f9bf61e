/* Chapter 04, the key: scaled dot-product attention.
 *
 * The numbers the answers to chapter 04's exercises quote: d2l's toy with
 * one key changed, the largest weight of random scores with and without
 * the division by sqrt(d), and the memory of a layer's weights.
 */
#include <gsl/gsl_randist.h>

#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * $-\lVert q - k \rVert^2 / 2 = -\lVert q \rVert^2/2 + q \cdot k - \lVert k \rVert^2/2$.
     * The first term is the same for every key of the
     * query, and the softmax over keys does not change when a constant is
     * added to all the scores of a row
     * ($e^{s_j + c} / \sum_k e^{s_k + c} = e^{s_j} / \sum_k e^{s_k}$), so it
     * cancels and the weights are those
     * of $q \cdot k - \lVert k \rVert^2/2$.
     *
     * That equals the unscaled dot product's weights exactly when
     * $\lVert k \rVert^2$ is the same for every key the query sees (again a
     * constant per row), for example keys normalised to one length; in
     * general the $-\lVert k \rVert^2/2$ term penalises long keys, which
     * the dot product favours.
     *
     * On the toy of section 3 all keys are `(1, 1)`: every key has the same
     * norm, so the distance score gives the dot product's weights; and
     * since the keys are all equal, every score of a row is the same and
     * both give uniform weights over the valid keys, 0.5000 twice for
     * example 0 and 0.1667 six times for example 1, with the same output as
     * section 3 (printed below by the library with the distance score
     * written as $q \cdot k - \lVert k \rVert^2/2$, unscaled).
     */
    gsl_rng *rng = mha_rng_new(4);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens;
    d2l_toy_inputs(rng, 2, "B, Lq, d", "B, Lk, d", &q, &k, &v, &lens);
    for (size_t b = 0; b < 2; b++) {
        printf("example %zu, valid_len %.0f, weights:", b, lens->data[b]);
        size_t len = (size_t)lens->data[b];
        double s[10], max = -INFINITY, sum = 0;
        for (size_t j = 0; j < len; j++) {
            double qk = 0, kk = 0;
            for (size_t f = 0; f < 2; f++) {
                qk += *TENSOR_AT(q, b, 0, f) * *TENSOR_AT(k, b, j, f);
                kk += *TENSOR_AT(k, b, j, f) * *TENSOR_AT(k, b, j, f);
            }
            s[j] = qk - kk / 2;
            max = s[j] > max ? s[j] : max;
        }
        for (size_t j = 0; j < len; j++)
            sum += exp(s[j] - max);
        double out[4] = {0};
        for (size_t j = 0; j < 10; j++) {
            double w = j < len ? exp(s[j] - max) / sum : 0;
            printf(" %.4f", w);
            for (size_t f = 0; f < 4; f++)
                out[f] += w * *TENSOR_AT(v, b, j, f);
        }
        printf("\n  output: %.4f %.4f %.4f %.4f\n", out[0], out[1], out[2], out[3]);
    }
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    gsl_rng_free(rng);
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * Example 0 has valid length 2, so only keys 0 and 1 count. Its query
     * is $q = (-2.7993, 1.1746)$ (section 3). Key 0 is still `(1, 1)`:
     * its score is $(q_0 + q_1)/\sqrt{2}$, -1.1488 from the printed
     * (rounded) query and -1.1489 from the full one, a difference that
     * does not reach the weights' 4 decimals. Key 1 is now `(0, 0)`: its
     * score is 0. With two keys the weights are $1/(1 + e^{\mp 1.1488})$:
     * key 0 gets 0.2407 and key 1 gets 0.7593.
     * The output mixes value rows 0 (`0, 1, 2, 3`) and 1 (`4, 5, 6, 7`):
     * $0.2407 \cdot (0, 1, 2, 3) + 0.7593 \cdot (4, 5, 6, 7) = (0, 1, 2, 3) + 4 \cdot 0.7593$,
     * printed below as the library computes it with the
     * changed key. Example 1 is unchanged.
     */
    gsl_rng *rng = mha_rng_new(4);
    if (!rng)
        exit(1);
    tensor *q, *k, *v, *lens, *out, *w;
    d2l_toy_inputs(rng, 2, "B, Lq, d", "B, Lk, d", &q, &k, &v, &lens);
    *TENSOR_AT(k, 0, 1, 0) = 0;
    *TENSOR_AT(k, 0, 1, 1) = 0;
    printf("q of example 0: %.4f %.4f\n", *TENSOR_AT(q, 0, 0, 0),
           *TENSOR_AT(q, 0, 0, 1));
    printf("score of key 0: %.4f (from the rounded query %.4f), of key 1: 0\n",
           (*TENSOR_AT(q, 0, 0, 0) + *TENSOR_AT(q, 0, 0, 1)) / sqrt(2),
           (-2.7993 + 1.1746) / sqrt(2));
    dot_attention attn;
    CHECK(dot_attention_init(&attn, 0));
    CHECK(dot_attention_forward(&attn, q, k, v, lens, &out, &w));
    printf("weights of example 0: %.4f %.4f\n", *TENSOR_AT(w, 0, 0, 0),
           *TENSOR_AT(w, 0, 0, 1));
    printf("output of example 0: %.4f %.4f %.4f %.4f\n", *TENSOR_AT(out, 0, 0, 0),
           *TENSOR_AT(out, 0, 0, 1), *TENSOR_AT(out, 0, 0, 2),
           *TENSOR_AT(out, 0, 0, 3));
    dot_attention_free(&attn);
    tensor_free(out);
    tensor_free(w);
    tensor_free(q);
    tensor_free(k);
    tensor_free(v);
    tensor_free(lens);
    gsl_rng_free(rng);
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * With standard normal queries and keys, $q \cdot k$ has variance $d$
     * (section 5): for $d = 512$ the 10 scores spread with a standard
     * deviation near 22.6, so the largest is typically tens of units above
     * the next and its weight is nearly 1: the softmax is saturated, a
     * one-hot row whose gradient is almost zero. Divided by $\sqrt{d}$ the
     * scores have variance 1 and the largest weight stays moderate. The
     * averages below come from 2000 draws of a query and 10 keys (GSL's
     * generator, seed 4), the experiment the exercise describes.
     */
    enum { d = 512, nkeys = 10, draws = 2000 };
    gsl_rng *rng = mha_rng_new(4);
    if (!rng)
        exit(1);
    static double q[d], k[d];
    double sum_max[2] = {0, 0};
    for (int n = 0; n < draws; n++) {
        double s[nkeys];
        for (int f = 0; f < d; f++)
            q[f] = gsl_ran_gaussian_ziggurat(rng, 1);
        for (int j = 0; j < nkeys; j++) {
            s[j] = 0;
            for (int f = 0; f < d; f++) {
                k[f] = gsl_ran_gaussian_ziggurat(rng, 1);
                s[j] += q[f] * k[f];
            }
        }
        for (int scaled = 0; scaled < 2; scaled++) {
            double c = scaled ? 1 / sqrt(d) : 1, max = -INFINITY, sum = 0;
            for (int j = 0; j < nkeys; j++)
                max = c * s[j] > max ? c * s[j] : max;
            for (int j = 0; j < nkeys; j++)
                sum += exp(c * s[j] - max);
            sum_max[scaled] += 1 / sum; /* the largest weight: e^0 / sum */
        }
    }
    printf("sqrt(d) = %.1f\n", sqrt(d));
    printf("mean largest weight over %d draws, q . k:            %.4f\n", draws,
           sum_max[0] / draws);
    printf("mean largest weight over %d draws, q . k / sqrt(d):  %.4f\n", draws,
           sum_max[1] / draws);
    gsl_rng_free(rng);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * One weight per (example, head, query, key):
     * $B \cdot h \cdot L_q \cdot L_k$ doubles of 8 bytes each, as below: about
     * 17 GB (16 GiB)
     * for one layer, which is why chapter 12 never stores them.
     */
    const double n = 8.0 * 16 * 4096 * 4096;
    printf("B*h*Lq*Lk = %.0f weights\n", n);
    printf("in doubles: %.0f bytes = %.1f GB = %.0f GiB\n", n * 8, n * 8 / 1e9,
           n * 8 / (1024.0 * 1024 * 1024));
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4)
