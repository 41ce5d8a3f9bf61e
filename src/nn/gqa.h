//> 17
/* gqa.h: grouped-query attention's one rule, which key-value head each
 * query head reads, and the copy that turns a grouped module back into a
 * plain multi-head one.
 *
 * Shapes, in the lesson's names:
 *   h   num_heads, the query heads; p = d_model/h features each
 *   G   kv_heads, the key-value heads; G divides h
 *   the query heads form G groups of h/G consecutive heads, in order,
 *   and every head of the g-th group reads key-value head g.
 *
 * G = h is multi-head attention (every query head has its own keys and
 * values), G = 1 multi-query attention (Shazeer 2019: one key head and
 * one value head for all), and anything between is grouped-query
 * attention (Ainslie et al. 2023; Llama 2 70B has h = 64, G = 8).
 * multihead_config's kv_heads (multihead.h) makes the module grouped;
 * these functions say which head reads what, and build the equivalent
 * multi-head weights that chapter 17 checks the grouped module against.
 */
#ifndef MHA_GQA_H
#define MHA_GQA_H

#include <stddef.h>

#include "tensor/tensor.h"

/* *kv = the key-value head that query head `head` reads: the num_heads
 * query heads are split in order into kv_heads groups of equal size, and
 * the heads of the g-th group read key-value head g (h = 8, G = 2: heads
 * 0-3 read 0, heads 4-7 read 1).  kv_heads 0 means num_heads (every head
 * its own).  GSL_EINVAL when num_heads is 0, when kv_heads does not
 * divide num_heads, or when head >= num_heads. */
int gqa_kv_head(size_t head, size_t num_heads, size_t kv_heads, size_t *kv);

/* The weight of a key or value projection of G heads, (G*p, d_in), made
 * into one of h heads, (h*p, d_in): row block i (rows i*p .. i*p + p - 1)
 * is a copy of row block gqa_kv_head(i) of w.  It is repeat_interleave of
 * the head blocks, torch's w.view(G, p, d_in).repeat_interleave(h/G, 0),
 * traced as one copy.  A multi-head module with these W_k and W_v (and
 * the grouped module's W_q and W_o) computes what the grouped module
 * does.  GSL_EINVAL for a w that is not 2-D or whose rows do not split
 * into kv_heads blocks, and for the errors of gqa_kv_head. */
int gqa_repeat_kv_weight(const tensor *w, size_t num_heads, size_t kv_heads,
                         tensor **out);

#endif
//<
