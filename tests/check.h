/* check.h: helpers shared by the Criterion suites. */
#ifndef MHA_TEST_CHECK_H
#define MHA_TEST_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <criterion/criterion.h>

#include "mha.h"

/* A library call that must succeed; on failure show its message. */
#define OK(call)                                                              \
    do {                                                                      \
        int ok_status_ = (call);                                              \
        cr_assert_eq(ok_status_, GSL_SUCCESS, "%s returned %d: %s", #call,    \
                     ok_status_, mha_last_error());                           \
    } while (0)

/* A library call that must fail with `status` and exactly `message`. */
#define FAILS(call, status, message)                                          \
    do {                                                                      \
        mha_clear_error();                                                    \
        int fails_status_ = (call);                                           \
        cr_assert_eq(fails_status_, (status), "%s returned %d, expected %d",  \
                     #call, fails_status_, (status));                         \
        cr_assert_str_eq(mha_last_error(), (message));                        \
    } while (0)

/* max |a - b| over max |b|: the normwise relative error of a against the
 * reference b (b all zero: the absolute error).  Shapes must agree. */
static inline double rel_error(const tensor *a, const tensor *b)
{
    cr_assert(tensor_same_shape(a, b), "shapes differ");
    double diff = 0, ref = 0;
    size_t idx[TENSOR_MAX_DIMS] = {0}, n = tensor_numel(a);
    for (size_t k = 0; k < n; k++) {
        double x = *tensor_at(a, idx), y = *tensor_at(b, idx);
        if (isnan(x) != isnan(y))
            return INFINITY;
        if (fabs(x - y) > diff)
            diff = fabs(x - y);
        if (fabs(y) > ref)
            ref = fabs(y);
        for (size_t d = a->ndim; d-- > 0;) {
            if (++idx[d] < a->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return ref > 0 ? diff / ref : diff;
}

/* Collect the trace (or anything else written to a FILE*) in memory. */
typedef struct {
    FILE *f;
    char *text;
    size_t len;
} capture;

static inline void capture_start(capture *c)
{
    c->text = NULL;
    c->len = 0;
    c->f = open_memstream(&c->text, &c->len);
    cr_assert_not_null(c->f);
}

/* Ends the capture and returns the text (freed by capture_free). */
static inline const char *capture_end(capture *c)
{
    fclose(c->f);
    c->f = NULL;
    return c->text;
}

static inline void capture_free(capture *c) { free(c->text); }

#endif
