//> 16
/* attention_madds.h: counting the work of attention, in multiply-adds.
 *
 * Shapes, in the lesson's names: n_q queries and n_k keys per sequence,
 * d_model = h * p features over all heads.  One query against one key
 * costs p multiply-adds per head for the score q.k and p more for its
 * share of the weighted sum of the values: 2 * d_model over the h heads.
 * The softmax and the projections are not counted here.
 */
#ifndef MHA_ATTENTION_MADDS_H
#define MHA_ATTENTION_MADDS_H

#include <stddef.h>

/* *madds = the multiply-adds of the scores and the weighted sum of n_q
 * queries against n_k keys, for one sequence of d_model features, over
 * the (query, key) pairs that are computed, each costing what the top of
 * this file says.  causal 0 counts every pair, as a module that makes the
 * whole (n_q, n_k) matrix and masks it afterwards does; causal 1 counts
 * only the pairs the causal mask lets through, aligned at the end (query
 * i sees key j when j <= i + n_k - n_q), as a decoding step with a
 * key-value cache computes them: one query against 7 keys of d_model 8
 * is 112.  GSL_EINVAL when n_q, n_k or d_model is 0. */
int attention_madds(size_t n_q, size_t n_k, size_t d_model, int causal,
                    double *madds);

#endif
//<
