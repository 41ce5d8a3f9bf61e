//> 01
/* heatmap_weights.h: the weights the heatmap suites draw. */
#ifndef MHA_TEST_HEATMAP_WEIGHTS_H
#define MHA_TEST_HEATMAP_WEIGHTS_H

#include "check.h"

/* The two-panel example most tests draw: panel (0, 1) holds 1/3, which
 * needs 16 digits to read back, and a -0 that must print as 0. */
static inline tensor *two_panels(void)
{
    tensor *t;
    OK(tensor_from_array(SHAPE(1, 2, 2, 3),
                         ((const double[]){0, 0.5, 1, 0.25, 0.1, 1,       //
                                           1.0 / 3, 0.75, 0.2, 0.9, 0.05, //
                                           -0.0}),
                         &t));
    return t;
}

/* A (2, 3, 2, 2) grid whose smallest weight (-0.5) sits in panel (1, 2)
 * and largest (2.5) in panel (0, 1), so the shared scale needs both. */
static inline tensor *six_panels(void)
{
    tensor *t;
    OK(tensor_alloc(SHAPE(2, 3, 2, 2), &t));
    tensor_fill_arange(t, 0, 0.01);
    *TENSOR_AT(t, 0, 1, 1, 0) = 2.5;
    *TENSOR_AT(t, 1, 2, 0, 1) = -0.5;
    return t;
}

static const char *const six_titles[6] = {"Head 1", "Head 2", "Head 3",
                                          "Head 4", "Head 5", "Head 6"};

#endif
//<
