//> 16
/* madds.c: the work of attention in multiply-adds; see madds.h.
 *
 * Shapes: n_q queries, n_k keys, d_model = h * p features. */
#include "madds.h"

#include "error.h"

/* Query i of the n_q sees the keys j <= i + n_k - n_q under the causal
 * mask: i + n_k - n_q + 1 of them when that is positive, at most n_k.
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
