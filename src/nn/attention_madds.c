//> 16
/* attention_madds.c: the work of attention in multiply-adds; see attention_madds.h.
 *
 * Shapes: n_q queries, n_k keys, d_model = h * p features. */
#include "nn/attention_madds.h"

#include "base/error.h"

/* Under the causal mask query i of the n_q sees key j when
 * j <= i + n_k - n_q: the queries are the last n_q of the n_k positions.
 * What the tests check (ex_attention_madds), against counts made by hand:
 * - a (query, key) pair costs d_model multiply-adds for its score and
 *   d_model for its share of the weighted sum;
 * - causal 0 counts every pair (4 queries, 4 keys, d_model 8: 256);
 *   causal 1 only the pairs the mask lets through, with n_q = 1 (one new
 *   query sees every key: 7 keys of d_model 8 are 112), n_q = n_k (the
 *   triangle: 3 queries see 1, 2 and 3 keys), n_q < n_k and n_q > n_k
 *   (the first n_q - n_k queries see nothing);
 * - n_q, n_k or d_model 0 is refused: GSL_EINVAL and a message that starts
 *   with "attention_madds" and names all three.
 * The handout blanks this body:
 * @exercise attention_madds (chapter 16): the multiply-adds of a decoding step. */
int attention_madds(size_t n_q, size_t n_k, size_t d_model, int causal,
                    double *madds)
{
    if (n_q == 0 || n_k == 0 || d_model == 0)
        return mha_fail(GSL_EINVAL,
                        "attention_madds: n_q %zu, n_k %zu and d_model %zu "
                        "must all be >= 1",
                        n_q, n_k, d_model);
    double pairs = 0; // (query, key) pairs whose score is computed
    for (size_t i = 0; i < n_q; i++) {
        if (!causal) {
            pairs += (double)n_k;
            continue;
        }
        // the last key query i sees is i + n_k - n_q (none if negative)
        if (i + n_k >= n_q)
            pairs += (double)(i + n_k - n_q + 1);
    }
    *madds = 2.0 * (double)d_model * pairs;
    return GSL_SUCCESS;
}
//<
