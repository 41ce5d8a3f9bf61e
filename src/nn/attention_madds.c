//> 16
/* attention_madds.c: the work of attention in multiply-adds; see attention_madds.h.
 *
 * Shapes: n_q queries, n_k keys, d_model = h * p features. */
#include "nn/attention_madds.h"

#include "base/error.h"

/* Query i of the n_q sees the keys j <= i + n_k - n_q under the causal
 * mask: i + n_k - n_q + 1 of them when that is positive, at most n_k.
 * What the tests check (ex_attention_madds):
 * - *madds = 2 d_model per (query, key) pair: d_model for the score and
 *   d_model for the weighted sum;
 * - causal 0 counts all n_q n_k pairs; causal 1 the pairs above, with
 *   n_q = 1 (one new query: n_k pairs), n_q = n_k (the triangle,
 *   n(n+1)/2), n_q < n_k and n_q > n_k (the first n_q - n_k queries see
 *   nothing);
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
