//> 08
/* explorer.h: attention weights as one HTML page to explore in a browser.
 *
 * The page holds everything it shows: the weights and the trace as JSON,
 * its script and its style inline (src/explorer.js and src/explorer.css,
 * built into the library), pictures as inline SVG.  It loads nothing
 * from anywhere, so it opens from a file on a machine with no network.
 * What it draws:
 *
 *   head view   queries and keys as two columns of labels, a line from
 *               each query to each key it sees, as wide and as dark as
 *               its weight, one colour per head; heads toggled on and
 *               off; hovering a query shows its row of weights
 *   grid        each (example, head) panel of weights as a heatmap, one
 *               colour scale for all, masked keys hatched (a weight of
 *               0.001 is near white, a masked key is grey stripes); a
 *               click enlarges a panel
 *   dataflow    the module's steps from the trace, each with its output
 *               shape and view, copy or new; hovering a step shows its
 *               input and output shapes with the lesson's names
 *   numbers     each stage of the split into heads and of the join, every
 *               number where it lands and, beneath, where it lies in
 *               memory (numbers.h); hovering a number lights it at every
 *               stage, buttons walk the steps
 *
 * Past 64 positions the head view shows 64 at a time, chosen on a
 * thumbnail of the whole matrix.  Each view saves itself as SVG or PNG.
 *
 * Shapes: weights (B, h, Lq, Lk), valid_lens (B,) or (B, Lq) as the
 * module takes them (mask.h).  The page says which keys each query sees
 * as the module's masks make them: valid_lens, causal and, from chapter
 * 19, a window that keeps the first keys too, so a row sees the keys
 * [0, first) and [lo, hi).
 */
#ifndef MHA_EXPLORER_H
#define MHA_EXPLORER_H

#include <stdio.h>

#include "tensor/tensor.h"
#include "trace/trace.h"

typedef struct explorer_page {
    const char *title;        /* the page's heading */
    const tensor *weights;    /* (B, h, Lq, Lk) */
    const tensor *valid_lens; /* (B,) or (B, Lq), or NULL: which keys a
                                 query sees (0: every key, uniform, as d2l) */
    size_t head_size;         /* p = D/h, for the shapes the page names;
                                 0 when unknown */
    const char *const *query_labels; /* Lq labels, or NULL: positions */
    const char *const *key_labels;   /* Lk labels, or NULL: positions */
    const trace_log *trace;   /* the forward pass's records, or NULL */
//> 16
    int causal; /* query i sees key j only when j <= i + Lk - Lq; the
                   page adds a slider over the decoding steps */
//<
//> 17
    size_t kv_heads; /* G key-value heads (0: h); the grid shows the
                        query heads of each group together */
//<
//> 19
    size_t window;     /* W: query i' = i + Lk - Lq sees key j only when
                          j > i' - W (or j < keep_first); 0: no window
                          (window.h; the module sets causal with it) */
    size_t keep_first; /* with a window, the first keys every query sees */
    int alibi;         /* 1: ALiBi's bias was added to the scores */
    int sinks;         /* 1: a sink logit per head took part in each row's
                          softmax, so a row sums to less than 1 */
//<
} explorer_page;

/* Write the page to f.  GSL_SUCCESS, or GSL_EINVAL (weights not 4-D,
 * valid_lens or labels that do not fit them) or GSL_ENOMEM, with the
 * message in mha_last_error(); f may then hold part of a page. */
int explorer_write(FILE *f, const explorer_page *page);

/* Write the page to path, whole or not at all (fileset.h): a failure
 * leaves whatever was at path as it was. */
int explorer_save(const char *path, const explorer_page *page);

#endif
//<
