/* tensor.c: dense tensors, views and copies; see tensor.h. */
#include "tensor.h"

#include <float.h>
#include <stdarg.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_randist.h>

#include "error.h"
#include "rowops.h"
#include "trace.h"

struct tensor_buffer {
    double *values;
    size_t size;   /* number of doubles */
    long refcount; /* tensors using this buffer */
};

/* --- creating and freeing ------------------------------------------- */

static int check_shape(const char *who, size_t ndim, const size_t *shape,
                       size_t *numel)
{
    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        return mha_fail(GSL_EINVAL,
                        "%s: %zu dimensions requested, a tensor has 1 to %d",
                        who, ndim, TENSOR_MAX_DIMS);
    char s[TRACE_SHAPE_MAX];
    size_t n = 1, bytes;
    for (size_t d = 0; d < ndim; d++)
        if (shape[d] == 0)
            return mha_fail(GSL_EINVAL,
                            "%s: dimension %zu of shape %s is 0; sizes must be >= 1",
                            who, d, shape_str(s, sizeof s, ndim, shape));
    int status = GSL_SUCCESS;
    for (size_t d = 0; d < ndim && status == GSL_SUCCESS; d++)
        status = mha_mul_size(n, shape[d], &n, who);
    if (status == GSL_SUCCESS)
        status = mha_mul_size(n, sizeof(double), &bytes, who);
    if (status != GSL_SUCCESS)
        return mha_fail(GSL_EOVRFLW,
                        "%s: shape %s is too large: its size in bytes "
                        "overflows size_t",
                        who, shape_str(s, sizeof s, ndim, shape));
    *numel = n;
    return GSL_SUCCESS;
}

/* Row-major strides for shape. */
static void contiguous_strides(size_t ndim, const size_t *shape,
                               size_t *strides)
{
    size_t s = 1;
    for (size_t d = ndim; d-- > 0;) {
        strides[d] = s;
        s *= shape[d];
    }
}

/* The next tensor's id (tensor.h): counts every header made. */
static unsigned long next_id(void)
{
    static unsigned long last = 0;
    return __atomic_add_fetch(&last, 1, __ATOMIC_RELAXED);
}

/* A new tensor header sharing buf (whose count it takes one more of). */
static tensor *new_header(tensor_buffer *buf, const char *who)
{
    tensor *t = mha_calloc(1, sizeof *t, who);
    if (!t)
        return NULL;
    t->buffer = buf;
    t->id = next_id();
    buf->refcount++;
    return t;
}

/* zero: 1 zeroed numbers, 0 uninitialised numbers, -1 no numbers (meta) */
static int alloc_uninit(const char *who, size_t ndim, const size_t *shape,
                        int zero, tensor **out)
{
    *out = NULL;
    size_t n = 0;
    int status = check_shape(who, ndim, shape, &n);
    if (status)
        return status;
    tensor_buffer *buf = mha_calloc(1, sizeof *buf, who);
    if (!buf)
        return GSL_ENOMEM;
    buf->values = zero < 0 ? NULL : mha_alloc_numbers(n, zero, who);
    if (!buf->values && zero >= 0) {
        free(buf);
        return GSL_ENOMEM;
    }
    buf->size = n;
    tensor *t = new_header(buf, who);
    if (!t) {
        free(buf->values);
        free(buf);
        return GSL_ENOMEM;
    }
    t->data = buf->values;
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    contiguous_strides(ndim, shape, t->strides);
    *out = t;
    return GSL_SUCCESS;
}

int tensor_alloc(size_t ndim, const size_t *shape, tensor **out)
{
    return alloc_uninit("tensor_alloc", ndim, shape, 1, out);
}

int tensor_alloc_meta(size_t ndim, const size_t *shape, tensor **out)
{
    return alloc_uninit("tensor_alloc_meta", ndim, shape, -1, out);
}

int tensor_from_array(size_t ndim, const size_t *shape, const double *values,
                      tensor **out)
{
    int status = alloc_uninit("tensor_from_array", ndim, shape, 0, out);
    if (status)
        return status;
    memcpy((*out)->data, values, tensor_numel(*out) * sizeof(double));
    return GSL_SUCCESS;
}

void tensor_free(tensor *t)
{
    if (!t)
        return;
    if (--t->buffer->refcount == 0) {
        free(t->buffer->values);
        free(t->buffer);
    }
    free(t);
}

/* --- reading the layout --------------------------------------------- */

size_t tensor_numel(const tensor *t)
{
    size_t n = 1;
    for (size_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

int tensor_is_contiguous(const tensor *t)
{
    size_t expect = 1;
    for (size_t d = t->ndim; d-- > 0;) {
        if (t->shape[d] != 1 && t->strides[d] != expect)
            return 0;
        expect *= t->shape[d];
    }
    return 1;
}

int tensor_same_shape(const tensor *a, const tensor *b)
{
    if (a->ndim != b->ndim)
        return 0;
    for (size_t d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d])
            return 0;
    return 1;
}

/* The index of the first of x[0 .. n-1] that is NaN or infinite, or n.
 * Blocks are tested with vector code (rowops_all_finite); only a block
 * holding a bad number is searched one by one.  A plain isfinite loop
 * with an early exit cannot be vectorised, and its passes over a
 * forward's inputs and projections showed in profiles. */
static size_t first_nonfinite_flat(const double *x, size_t n)
{
    for (size_t c = 0; c < n; c += 4096) {
        size_t m = n - c < 4096 ? n - c : 4096;
        if (rowops_all_finite(x + c, m))
            continue;
        for (size_t k = 0; k < m; k++)
            if (!isfinite(x[c + k]))
                return c + k;
    }
    return n;
}

/* The first element of t that is NaN or infinite, in row-major order:
 * 1 with its index in idx and its value in *bad, else 0. */
static int first_nonfinite(const tensor *t, size_t *idx, double *bad)
{
    size_t n = tensor_is_meta(t) ? 0 : tensor_numel(t);
    for (size_t d = 0; d < TENSOR_MAX_DIMS; d++)
        idx[d] = 0;
    if (tensor_is_contiguous(t)) {
        size_t k = first_nonfinite_flat(t->data, n);
        if (k == n)
            return 0;
        *bad = t->data[k];
        for (size_t d = t->ndim; d-- > 0;) { // k in row-major digits
            idx[d] = k % t->shape[d];
            k /= t->shape[d];
        }
        return 1;
    }
    for (size_t k = 0; k < n; k++) {
        double v = *tensor_at(t, idx);
        if (!isfinite(v)) {
            *bad = v;
            return 1;
        }
        for (size_t d = t->ndim; d-- > 0;) {
            if (++idx[d] < t->shape[d])
                break;
            idx[d] = 0;
        }
    }
    return 0;
}

/* "[0, 2, 5]" for the index idx of t. */
static const char *index_str(const tensor *t, const size_t *idx, char *at,
                             size_t n)
{
    size_t used = 0;
    at[0] = '\0';
    for (size_t d = 0; d < t->ndim && used < n; d++)
        used += (size_t)snprintf(at + used, n - used, "%s%zu", d ? ", " : "[",
                                 idx[d]);
    if (used < n)
        snprintf(at + used, n - used, "]");
    return at;
}

static const char *value_str(double v)
{
    return isnan(v) ? "nan" : v > 0 ? "inf" : "-inf";
}

int tensor_check_finite(const tensor *t, const char *who, const char *what)
{
    size_t idx[TENSOR_MAX_DIMS];
    double v;
    if (!first_nonfinite(t, idx, &v))
        return GSL_SUCCESS;
    char at[TRACE_SHAPE_MAX], s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_EDOM, "%s: %s%s = %s; %s must be finite (%s %s)", who,
                    what, index_str(t, idx, at, sizeof at), value_str(v), what,
                    what, tensor_shape_str(t, s, sizeof s));
}

int tensor_check_result(const tensor *t, const char *who, const char *stage,
                        const char *what)
{
    size_t idx[TENSOR_MAX_DIMS];
    double v;
    if (!first_nonfinite(t, idx, &v))
        return GSL_SUCCESS;
    char at[TRACE_SHAPE_MAX], s[TRACE_SHAPE_MAX];
    return mha_fail(GSL_ERANGE,
                    "%s: the %s overflowed: %s%s = %s from finite inputs "
                    "(%s %s)",
                    who, stage, what, index_str(t, idx, at, sizeof at),
                    value_str(v), what, tensor_shape_str(t, s, sizeof s));
}

tensor tensor_header(size_t ndim, const size_t *shape)
{
    tensor t = {.ndim = ndim};
    for (size_t d = 0; d < ndim && d < TENSOR_MAX_DIMS; d++)
        t.shape[d] = shape[d];
    return t;
}

tensor tensor_named(const tensor *x, const char *names)
{
    tensor t = *x;
    int any = 0;
    for (size_t d = 0; d < t.ndim; d++)
        any |= t.names[d][0] != '\0';
    if (!any)
        tensor_set_names(&t, names);
    return t;
}

int tensor_shares_buffer(const tensor *a, const tensor *b)
{
    return a->buffer == b->buffer;
}

static int check_index(const char *who, const tensor *t, const size_t *idx)
{
    if (tensor_is_meta(t)) {
        char s[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "%s: the shape-only tensor %s has no numbers", who,
                        tensor_shape_str(t, s, sizeof s));
    }
    for (size_t d = 0; d < t->ndim; d++)
        if (idx[d] >= t->shape[d]) {
            char s[TRACE_SHAPE_MAX], i[TRACE_SHAPE_MAX];
            return mha_fail(GSL_EINVAL,
                            "%s: index %s is out of range for shape %s "
                            "(dimension %zu)",
                            who, shape_str(i, sizeof i, t->ndim, idx),
                            tensor_shape_str(t, s, sizeof s), d);
        }
    return GSL_SUCCESS;
}

int tensor_get(const tensor *t, const size_t *idx, double *value)
{
    int status = check_index("tensor_get", t, idx);
    if (status)
        return status;
    *value = *tensor_at(t, idx);
    return GSL_SUCCESS;
}

int tensor_set(tensor *t, const size_t *idx, double value)
{
    int status = check_index("tensor_set", t, idx);
    if (status)
        return status;
    *tensor_at(t, idx) = value;
    return GSL_SUCCESS;
}

char *tensor_shape_str(const tensor *t, char *buf, size_t n)
{
    return shape_str(buf, n, t->ndim, t->shape);
}

char *tensor_sym_str(const tensor *t, char *buf, size_t n)
{
    trace_shape s = {.ndim = t->ndim};
    memcpy(s.dims, t->shape, sizeof s.dims);
    memcpy(s.names, t->names, sizeof s.names);
    return trace_sym_str(&s, buf, n);
}

/* Split "a, b, c" into trimmed fields; returns the count (or more than
 * max when there are too many). */
static size_t split_names(const char *names, char out[][TENSOR_NAME_MAX],
                          size_t max)
{
    size_t count = 0;
    const char *p = names;
    for (;;) {
        while (*p == ' ')
            p++;
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && p[len - 1] == ' ')
            len--;
        if (count < max) {
            if (len >= TENSOR_NAME_MAX)
                len = TENSOR_NAME_MAX - 1;
            memcpy(out[count], p, len);
            out[count][len] = '\0';
        }
        count++;
        if (!end)
            return count;
        p = end + 1;
    }
}

int tensor_set_names(tensor *t, const char *names)
{
    char parsed[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    if (!names || !*names) {
        memset(t->names, 0, sizeof t->names);
        return GSL_SUCCESS;
    }
    size_t count = split_names(names, parsed, TENSOR_MAX_DIMS);
    if (count != t->ndim) {
        char s[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "tensor_set_names: \"%s\" names %zu dimensions, "
                        "shape %s has %zu",
                        names, count, tensor_shape_str(t, s, sizeof s),
                        t->ndim);
    }
    memset(t->names, 0, sizeof t->names);
    memcpy(t->names, parsed, t->ndim * sizeof parsed[0]);
    return GSL_SUCCESS;
}

/* --- filling -------------------------------------------------------- */

/* Visit every element of t in row-major order. */
#define FOR_EACH_ELEMENT(t, ptr, ...)                                        \
    do {                                                                      \
        size_t idx_[TENSOR_MAX_DIMS] = {0};                                   \
        size_t n_ = tensor_is_meta(t) ? 0 : tensor_numel(t);                  \
        for (size_t k_ = 0; k_ < n_; k_++) {                                  \
            double *ptr = tensor_at((t), idx_);                               \
            __VA_ARGS__;                                                      \
            for (size_t d_ = (t)->ndim; d_-- > 0;) {                          \
                if (++idx_[d_] < (t)->shape[d_])                              \
                    break;                                                    \
                idx_[d_] = 0;                                                 \
            }                                                                 \
        }                                                                     \
    } while (0)

void tensor_fill(tensor *t, double value)
{
    FOR_EACH_ELEMENT(t, p, *p = value);
}

void tensor_fill_arange(tensor *t, double start, double step)
{
    double k = 0;
    FOR_EACH_ELEMENT(t, p, *p = start + step * k++);
}

void tensor_fill_uniform(tensor *t, gsl_rng *r, double lo, double hi)
{
    FOR_EACH_ELEMENT(t, p, *p = lo + (hi - lo) * gsl_rng_uniform(r));
}

void tensor_fill_normal(tensor *t, gsl_rng *r, double mean, double sd)
{
    FOR_EACH_ELEMENT(t, p, *p = mean + gsl_ran_gaussian_ziggurat(r, sd));
}

/* src into dst, both with the same numel, each read in row-major order. */
static void copy_elements(tensor *dst, const tensor *src)
{
    if (tensor_is_meta(dst) || tensor_is_meta(src))
        return; /* shapes alone: no numbers to move */
    if (tensor_is_contiguous(dst) && tensor_is_contiguous(src)) {
        memmove(dst->data, src->data, tensor_numel(src) * sizeof(double));
        return;
    }
    size_t sidx[TENSOR_MAX_DIMS] = {0};
    FOR_EACH_ELEMENT(dst, p, {
        *p = *tensor_at(src, sidx);
        for (size_t d = src->ndim; d-- > 0;) {
            if (++sidx[d] < src->shape[d])
                break;
            sidx[d] = 0;
        }
    });
}

int tensor_copy_into(tensor *dst, const tensor *src)
{
    if (!tensor_same_shape(dst, src)) {
        char a[TRACE_SHAPE_MAX], b[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EBADLEN,
                        "tensor_copy_into: source shape %s differs from "
                        "destination shape %s",
                        tensor_shape_str(src, a, sizeof a),
                        tensor_shape_str(dst, b, sizeof b));
    }
    copy_elements(dst, src);
    return GSL_SUCCESS;
}

/* A contiguous copy of x, not traced (the callers trace). */
static int copy_contiguous(const char *who, const tensor *x, tensor **out)
{
    int status = alloc_uninit(who, x->ndim, x->shape,
                              tensor_is_meta(x) ? -1 : 0, out);
    if (status)
        return status;
    copy_elements(*out, x);
    memcpy((*out)->names, x->names, sizeof x->names);
    return GSL_SUCCESS;
}

int tensor_contiguous(const tensor *x, tensor **out)
{
    int status = copy_contiguous("tensor_contiguous", x, out);
    if (status == GSL_SUCCESS)
        trace_step(TRACE_COPY, x, *out, "contiguous()");
    return status;
}

/* --- reshape -------------------------------------------------------- */

/* Resolve a requested shape (with at most one -1) for numel elements. */
static int infer_shape(const char *who, const tensor *x, size_t ndim,
                       const long *req, size_t *shape)
{
    char req_s[TRACE_SHAPE_MAX], xs[TRACE_SHAPE_MAX];
    size_t used = 0;
    req_s[0] = '(';
    used = 1;
    for (size_t d = 0; d < ndim && d < TENSOR_MAX_DIMS + 4; d++) {
        int w = snprintf(req_s + used, sizeof req_s - used, d ? ", %ld" : "%ld",
                         req[d]);
        used += w > 0 && (size_t)w < sizeof req_s - used ? (size_t)w : 0;
    }
    snprintf(req_s + used, sizeof req_s - used, ndim == 1 ? ",)" : ")");
    tensor_shape_str(x, xs, sizeof xs);

    if (ndim < 1 || ndim > TENSOR_MAX_DIMS)
        return mha_fail(GSL_EINVAL,
                        "%s: shape %s has %zu dimensions, a tensor has 1 to %d "
                        "(input shape %s)",
                        who, req_s, ndim, TENSOR_MAX_DIMS, xs);
    size_t numel = tensor_numel(x), known = 1;
    long infer_at = -1;
    for (size_t d = 0; d < ndim; d++) {
        if (req[d] == -1) {
            if (infer_at >= 0)
                return mha_fail(GSL_EINVAL,
                                "%s: shape %s has more than one -1 "
                                "(input shape %s)",
                                who, req_s, xs);
            infer_at = (long)d;
        } else if (req[d] <= 0) {
            return mha_fail(GSL_EINVAL,
                            "%s: shape %s has size %ld in dimension %zu; "
                            "sizes must be >= 1 or a single -1 (input shape %s)",
                            who, req_s, req[d], d, xs);
        } else {
            if ((size_t)req[d] > numel || known > numel / (size_t)req[d]) {
                return mha_fail(GSL_EBADLEN,
                                "%s: shape %s is invalid for input of size %zu "
                                "(input shape %s)",
                                who, req_s, numel, xs);
            }
            known *= (size_t)req[d];
            shape[d] = (size_t)req[d];
        }
    }
    if (infer_at >= 0) {
        if (numel % known != 0)
            return mha_fail(GSL_EBADLEN,
                            "%s: shape %s is invalid for input of size %zu "
                            "(input shape %s)",
                            who, req_s, numel, xs);
        shape[infer_at] = numel / known;
        known = numel;
    }
    if (known != numel)
        return mha_fail(GSL_EBADLEN,
                        "%s: shape %s is invalid for input of size %zu "
                        "(input shape %s)",
                        who, req_s, numel, xs);
    return GSL_SUCCESS;
}

/* PyTorch's rule for when a reshape can be a view (computeStride in
 * ATen): walk x's dimensions from the last, cutting them into chunks that
 * are contiguous among themselves; each chunk must be covered exactly by a
 * run of new dimensions, whose strides are then laid out inside the chunk.
 * Returns 1 and fills strides when a view is possible. */
static int view_strides(const tensor *x, size_t ndim, const size_t *shape,
                        size_t *strides)
{
    long view_d = (long)ndim - 1;
    size_t chunk_base = x->strides[x->ndim - 1];
    size_t tensor_numel_ = 1, view_numel = 1;
    for (long td = (long)x->ndim - 1; td >= 0; td--) {
        tensor_numel_ *= x->shape[td];
        int chunk_ends = td == 0 || (x->shape[td - 1] != 1 &&
                                     x->strides[td - 1] != tensor_numel_ * chunk_base);
        if (!chunk_ends)
            continue;
        while (view_d >= 0 &&
               (view_numel < tensor_numel_ || shape[view_d] == 1)) {
            strides[view_d] = view_numel * chunk_base;
            view_numel *= shape[view_d];
            view_d--;
        }
        if (view_numel != tensor_numel_)
            return 0;
        if (td > 0) {
            chunk_base = x->strides[td - 1];
            tensor_numel_ = 1;
            view_numel = 1;
        }
    }
    return view_d == -1;
}

/* The number of dimensions of size 1 in t from d on (step +1) or back
 * from d (step -1), at most n. */
static size_t ones_run(const tensor *t, size_t d, int step, size_t n)
{
    size_t k = 0;
    while (k < n && t->shape[d + (size_t)step * k] == 1)
        k++;
    return k;
}

/* One group of a reshape, x's dimensions a..b becoming y's c..d (one
 * product of sizes), named into out[c..d] from x's names.  As many 1s at
 * the start of both sides pair off in order, and so do as many at the
 * end; then the rest is named in one of three ways: the same sizes keep
 * their names; several dimensions merged into one are joined with '*'
 * ((B, h) -> B*h whatever B's value, so the names do not change when the
 * batch has one sample; an unnamed size 1 adds nothing); one dimension
 * named "a*b" split in two gives "a" and "b".  Any other group (a merge
 * with an unnamed dimension, a split its name does not explain, several
 * into several, 1s in unequal runs) is left unnamed. */
static void name_group(const tensor *x, size_t a, size_t b, const tensor *y,
                       size_t c, size_t d, char out[][TENSOR_NAME_MAX])
{
    size_t n = b - a < d - c ? b - a : d - c; // never the whole of a side
    size_t lead = ones_run(x, a, 1, n + 1);
    if (lead <= n && lead == ones_run(y, c, 1, n + 1))
        for (; lead > 0; lead--)
            strcpy(out[c++], x->names[a++]);
    n = b - a < d - c ? b - a : d - c;
    size_t tail = ones_run(x, b, -1, n + 1);
    if (tail <= n && tail == ones_run(y, d, -1, n + 1))
        for (; tail > 0; tail--)
            strcpy(out[d--], x->names[b--]);
    int same = b - a == d - c;
    for (size_t k = 0; same && k <= b - a; k++)
        same = x->shape[a + k] == y->shape[c + k];
    if (same) {
        for (size_t k = 0; k <= b - a; k++)
            strcpy(out[c + k], x->names[a + k]);
        return;
    }
    char joined[TENSOR_NAME_MAX * TENSOR_MAX_DIMS] = "";
    for (size_t k = a; k <= b; k++) {
        if (x->names[k][0] == '\0') {
            if (x->shape[k] != 1)
                return;
            continue;
        }
        if (joined[0])
            strcat(joined, "*");
        strcat(joined, x->names[k]);
    }
    if (!joined[0] || strlen(joined) >= TENSOR_NAME_MAX)
        return;
    if (c == d) { /* a merge: "B*h" */
        strcpy(out[c], joined);
        return;
    }
    if (a != b)
        return;
    size_t parts = 1; /* a split: "B*h" gives "B" and "h" */
    for (const char *p = joined; *p; p++)
        parts += *p == '*';
    if (parts != d - c + 1)
        return;
    const char *p = joined;
    for (size_t k = c; k <= d; k++) {
        size_t len = strcspn(p, "*");
        memcpy(out[k], p, len);
        out[k][len] = '\0';
        p += len + (p[len] != '\0');
    }
}

/* The next dimension of t from d on whose size is not 1 (t->ndim: none). */
static size_t next_wide(const tensor *t, size_t d)
{
    while (d < t->ndim && t->shape[d] == 1)
        d++;
    return d;
}

/* y's names from x's, with each size-1 dimension in the group of the
 * dimensions before it (ones_after 0) or after it (1).  The dimensions of
 * size > 1 fall into groups of one product on both sides, in one way
 * only; the groups are named by name_group. */
static void names_by_groups(const tensor *x, const tensor *y, int ones_after,
                            char out[][TENSOR_NAME_MAX])
{
    memset(out, 0, TENSOR_MAX_DIMS * TENSOR_NAME_MAX);
    /* the groups' first and last wide dimensions, in x and in y */
    size_t xf[TENSOR_MAX_DIMS], xl[TENSOR_MAX_DIMS];
    size_t yf[TENSOR_MAX_DIMS], yl[TENSOR_MAX_DIMS], n = 0;
    size_t i = next_wide(x, 0), j = next_wide(y, 0);
    while (i < x->ndim && j < y->ndim) {
        xf[n] = i, yf[n] = j;
        size_t pi = x->shape[i], pj = y->shape[j];
        while (pi != pj) {
            if (pi < pj && (i = next_wide(x, i + 1)) < x->ndim)
                pi *= x->shape[i];
            else if (pj < pi && (j = next_wide(y, j + 1)) < y->ndim)
                pj *= y->shape[j];
            else
                return;
        }
        xl[n] = i, yl[n++] = j;
        i = next_wide(x, i + 1);
        j = next_wide(y, j + 1);
    }
    if (i < x->ndim || j < y->ndim)
        return;
    if (n == 0) { /* every size is 1: one group */
        name_group(x, 0, x->ndim - 1, y, 0, y->ndim - 1, out);
        return;
    }
    for (size_t g = 0; g < n; g++) {
        size_t a = g == 0 ? 0 : ones_after ? xl[g - 1] + 1 : xf[g];
        size_t b = g + 1 == n ? x->ndim - 1 : ones_after ? xl[g] : xf[g + 1] - 1;
        size_t c = g == 0 ? 0 : ones_after ? yl[g - 1] + 1 : yf[g];
        size_t d = g + 1 == n ? y->ndim - 1 : ones_after ? yl[g] : yf[g + 1] - 1;
        name_group(x, a, b, y, c, d, out);
    }
}

/* Names for the reshaped dimensions, derived from x's by their sizes
 * (names_by_groups).  A size-1 dimension between two groups could belong
 * to either, and the sizes cannot say which: (B, G, Lk, p) with G = Lk =
 * 1 reshaped to (B*G, Lk, p) looks the same as to (B, G*Lk, p).  So the
 * names are worked out both ways, and a dimension is named only when the
 * two agree; a step that knows better passes its names. */
static void derive_names(const tensor *x, tensor *y)
{
    char before[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    char after[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    names_by_groups(x, y, 0, before);
    names_by_groups(x, y, 1, after);
    for (size_t d = 0; d < y->ndim; d++)
        if (!strcmp(before[d], after[d]))
            strcpy(y->names[d], before[d]);
}

/* tensor_reshape and tensor_view: work out the -1, then ask view_strides
 * whether the new shape can be read from x's buffer as it lies.  If it
 * can, the result is a new header on the same buffer: no number moves.  If
 * it cannot, reshape copies x into row-major order (a traced "copy") and
 * view refuses. */
static int reshape_impl(const char *who, const tensor *x, size_t ndim,
                        const long *req, const char *names, int allow_copy,
                        tensor **out)
{
    *out = NULL;
    size_t shape[TENSOR_MAX_DIMS] = {0}, strides[TENSOR_MAX_DIMS] = {0};
    int status = infer_shape(who, x, ndim, req, shape);
    if (status)
        return status;

    int copied = 0;
    tensor *y;
    if (view_strides(x, ndim, shape, strides)) {
        y = new_header(x->buffer, who);
        if (!y)
            return GSL_ENOMEM;
        y->data = x->data;
        memcpy(y->strides, strides, sizeof strides);
    } else if (allow_copy) {
        status = copy_contiguous(who, x, &y);
        if (status)
            return status;
        contiguous_strides(ndim, shape, y->strides);
        copied = 1;
    } else {
        char xs[TRACE_SHAPE_MAX], ys[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "%s: shape %s cannot be viewed as %s without a copy "
                        "(its strides do not allow it); use tensor_reshape",
                        who, tensor_shape_str(x, xs, sizeof xs),
                        shape_str(ys, sizeof ys, ndim, shape));
    }
    y->ndim = ndim;
    memset(y->shape, 0, sizeof y->shape);
    memcpy(y->shape, shape, ndim * sizeof shape[0]);
    for (size_t d = ndim; d < TENSOR_MAX_DIMS; d++)
        y->strides[d] = 0;
    memset(y->names, 0, sizeof y->names);
    if (names) {
        status = tensor_set_names(y, names);
        if (status) {
            tensor_free(y);
            return mha_fail_in(status, "%s", who);
        }
    } else {
        derive_names(x, y);
    }
    trace_step(copied ? TRACE_COPY : TRACE_VIEW, x, y, "%s%D",
               allow_copy ? "reshape" : "view", ndim, req);
    *out = y;
    return GSL_SUCCESS;
}

int tensor_reshape(const tensor *x, size_t ndim, const long *shape,
                   const char *names, tensor **out)
{
    return reshape_impl("tensor_reshape", x, ndim, shape, names, 1, out);
}

int tensor_view(const tensor *x, size_t ndim, const long *shape,
                const char *names, tensor **out)
{
    return reshape_impl("tensor_view", x, ndim, shape, names, 0, out);
}

/* --- permute -------------------------------------------------------- */

/* Output dimension d is input dimension perm[d]: shape, strides and
 * names are reordered and the data pointer is kept.  No number is read or
 * written, so a permute costs the same for any size of tensor. */
int tensor_permute(const tensor *x, size_t ndim, const size_t *perm,
                   tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX], ps[TRACE_SHAPE_MAX];
    int seen[TENSOR_MAX_DIMS] = {0};
    int ok = ndim == x->ndim;
    for (size_t d = 0; ok && d < ndim; d++) {
        ok = perm[d] < ndim && !seen[perm[d]];
        if (ok)
            seen[perm[d]] = 1;
    }
    if (!ok)
        return mha_fail(GSL_EINVAL,
                        "tensor_permute: %s is not a permutation of the %zu "
                        "dimensions of shape %s",
                        shape_str(ps, sizeof ps, ndim, perm),
                        x->ndim, tensor_shape_str(x, xs, sizeof xs));

    tensor *y = new_header(x->buffer, "tensor_permute");
    if (!y)
        return GSL_ENOMEM;
    y->data = x->data;
    y->ndim = ndim;
    for (size_t d = 0; d < ndim; d++) {
        y->shape[d] = x->shape[perm[d]];
        y->strides[d] = x->strides[perm[d]];
        memcpy(y->names[d], x->names[perm[d]], TENSOR_NAME_MAX);
    }
    trace_step(TRACE_VIEW, x, y, "permute%P", ndim, perm);
    *out = y;
    return GSL_SUCCESS;
}

/* --- narrow --------------------------------------------------------- */

int tensor_narrow(const tensor *x, size_t dim, size_t start, size_t length,
                  tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (dim >= x->ndim)
        return mha_fail(GSL_EINVAL,
                        "tensor_narrow: dimension %zu does not exist in shape %s",
                        dim, xs);
    if (length == 0 || start >= x->shape[dim] ||
        length > x->shape[dim] - start)
        return mha_fail(GSL_EINVAL,
                        "tensor_narrow: indices %zu..%zu (length %zu) do not fit "
                        "in dimension %zu of size %zu (shape %s)",
                        start, start + length, length, dim, x->shape[dim], xs);
    tensor *y = new_header(x->buffer, "tensor_narrow");
    if (!y)
        return GSL_ENOMEM;
    unsigned long id = y->id;
    *y = *x;
    y->id = id;
    if (!tensor_is_meta(x))
        y->data = x->data + start * x->strides[dim];
    y->shape[dim] = length;
    trace_step(TRACE_VIEW, x, y, "narrow(%zu, %zu, %zu)", dim, start, length);
    *out = y;
    return GSL_SUCCESS;
}

/* --- expand -------------------------------------------------------- */

/* Output dimension d reads x's dimension d - (ndim - x->ndim) when there
 * is one: its stride is kept, or set to 0 where a size 1 is repeated. */
int tensor_expand(const tensor *x, size_t ndim, const long *shape,
                  const char *names, tensor **out)
{
    *out = NULL;
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (ndim < x->ndim || ndim > TENSOR_MAX_DIMS)
        return mha_fail(GSL_EINVAL,
                        "tensor_expand: %zu sizes for shape %s, expected %zu "
                        "to %d",
                        ndim, xs, x->ndim, TENSOR_MAX_DIMS);
    size_t lead = ndim - x->ndim;
    size_t new_shape[TENSOR_MAX_DIMS] = {0}, new_strides[TENSOR_MAX_DIMS] = {0};
    for (size_t d = 0; d < ndim; d++) {
        size_t have = d < lead ? 1 : x->shape[d - lead];
        long want = shape[d];
        if (want == -1 && d >= lead) {
            new_shape[d] = have;
        } else if (want >= 1 && ((size_t)want == have || have == 1)) {
            new_shape[d] = (size_t)want;
        } else {
            return mha_fail(GSL_EINVAL,
                            "tensor_expand: size %ld for dimension %zu of "
                            "shape %s: only a dimension of size 1 expands "
                            "(-1 keeps a size)",
                            want, d, xs);
        }
        new_strides[d] = d < lead || (have == 1 && new_shape[d] != 1)
                             ? 0
                             : x->strides[d - lead];
    }
    tensor *y = new_header(x->buffer, "tensor_expand");
    if (!y)
        return GSL_ENOMEM;
    y->data = x->data;
    y->ndim = ndim;
    memcpy(y->shape, new_shape, sizeof new_shape);
    memcpy(y->strides, new_strides, sizeof new_strides);
    for (size_t d = lead; d < ndim; d++)
        memcpy(y->names[d], x->names[d - lead], TENSOR_NAME_MAX);
    if (names) {
        int status = tensor_set_names(y, names);
        if (status) {
            tensor_free(y);
            return mha_fail_in(status, "tensor_expand");
        }
    }
    trace_step(TRACE_VIEW, x, y, "expand%D", ndim, shape);
    *out = y;
    return GSL_SUCCESS;
}

/* --- printing ------------------------------------------------------- */

/* The layout of PyTorch's tensor printing (torch/_tensor_str.py), with its
 * defaults. */
#define PRINT_THRESHOLD 1000 /* more elements than this: summarise */
#define PRINT_EDGE 3         /* elements kept at each end when summarising */
#define PRINT_LINEWIDTH 80

typedef struct {
    FILE *f;
    const tensor *t;
    int summarise;
    int width;    /* every number padded to this */
    int decimals; /* digits after the point */
    int integral; /* all numbers whole: print "3." */
    int sci;      /* exponent notation */
} printer;

static int format_number(const printer *p, double v, char *buf, size_t n)
{
    if (v == 0)
        v = 0; /* no "-0" */
    if (isnan(v))
        return snprintf(buf, n, "nan");
    if (isinf(v))
        return snprintf(buf, n, v > 0 ? "inf" : "-inf");
    if (p->integral)
        return snprintf(buf, n, "%.0f.", v);
    if (p->sci)
        return snprintf(buf, n, "%.*e", p->decimals, v);
    return snprintf(buf, n, "%.*f", p->decimals, v);
}

/* Is index i of dimension d printed?  When summarising, a dimension longer
 * than 2 * PRINT_EDGE shows PRINT_EDGE indices at each end and "..." in
 * place of index PRINT_EDGE. */
static int shown(const printer *p, size_t d, size_t i)
{
    size_t len = p->t->shape[d];
    return !p->summarise || len <= 2 * PRINT_EDGE || i < PRINT_EDGE ||
           i >= len - PRINT_EDGE;
}

static int dots_at(const printer *p, size_t d, size_t i)
{
    return p->summarise && p->t->shape[d] > 2 * PRINT_EDGE && i == PRINT_EDGE;
}

/* The last dimension, its '[' at column `indent`: as many numbers to a line
 * as fit in PRINT_LINEWIDTH, each counted with the ", " after it; "..."
 * counts as one of them.  Continuation lines start one past the '['. */
static void print_row(const printer *p, size_t *idx, int indent)
{
    size_t d = p->t->ndim - 1;
    int per_line = (PRINT_LINEWIDTH - indent) / (p->width + 2);
    if (per_line < 1)
        per_line = 1;
    int on_line = 0;
    fputc('[', p->f);
    for (size_t i = 0; i < p->t->shape[d]; i++) {
        int dots = dots_at(p, d, i);
        if (!dots && !shown(p, d, i))
            continue;
        if (on_line == per_line) {
            fprintf(p->f, ",\n%*s", indent + 1, "");
            on_line = 0;
        } else if (on_line > 0) {
            fputs(", ", p->f);
        }
        if (dots) {
            fputs(" ...", p->f);
        } else {
            char num[64];
            idx[d] = i;
            format_number(p, *tensor_at(p->t, idx), num, sizeof num);
            fprintf(p->f, "%*s", p->width, num);
        }
        on_line++;
    }
    idx[d] = 0;
    fputc(']', p->f);
}

/* Dimension d and those inside it, its '[' at column `indent`.  The blocks
 * inside are separated by a comma, one newline per dimension they have
 * (so a blank line between 2-D blocks, two between 3-D ones) and the
 * indent one past the '['. */
static void print_block(const printer *p, size_t d, size_t *idx, int indent)
{
    if (d + 1 == p->t->ndim) {
        print_row(p, idx, indent);
        return;
    }
    int first = 1;
    fputc('[', p->f);
    for (size_t i = 0; i < p->t->shape[d]; i++) {
        int dots = dots_at(p, d, i);
        if (!dots && !shown(p, d, i))
            continue;
        if (!first) {
            fputc(',', p->f);
            for (size_t k = d + 1; k < p->t->ndim; k++)
                fputc('\n', p->f);
            fprintf(p->f, "%*s", indent + 1, "");
        }
        first = 0;
        if (dots) {
            fputs("...", p->f);
        } else {
            idx[d] = i;
            print_block(p, d + 1, idx, indent + 1);
        }
    }
    idx[d] = 0;
    fputc(']', p->f);
}

/* The next printed index after idx in row-major order (skipping what
 * "..." stands for); 0 after the last. */
static int next_shown(const printer *p, size_t *idx)
{
    for (size_t d = p->t->ndim; d-- > 0;) {
        if (++idx[d] == PRINT_EDGE && dots_at(p, d, PRINT_EDGE))
            idx[d] = p->t->shape[d] - PRINT_EDGE;
        if (idx[d] < p->t->shape[d])
            return 1;
        idx[d] = 0;
    }
    return 0;
}

void tensor_print(FILE *f, const tensor *t, int decimals)
{
    if (tensor_is_meta(t)) { /* as PyTorch prints a meta tensor */
        char s[TRACE_SHAPE_MAX];
        fprintf(f, "tensor(..., size=%s, device='meta')\n",
                tensor_shape_str(t, s, sizeof s));
        return;
    }
    printer p = {.f = f, .t = t, .decimals = decimals < 0 ? 0 : decimals};
    p.summarise = tensor_numel(t) > PRINT_THRESHOLD;
    p.integral = 1;
    double maxabs = 0, minabs = INFINITY;
    size_t idx[TENSOR_MAX_DIMS] = {0};
    /* pass 1: the number format, from the nonzero finite numbers shown */
    do {
        double v = *tensor_at(t, idx);
        if (isfinite(v) && v != 0) {
            if (v != floor(v))
                p.integral = 0;
            maxabs = fmax(maxabs, fabs(v));
            minabs = fmin(minabs, fabs(v));
        }
    } while (next_shown(&p, idx));
    /* exponents when fixed notation would hide the small numbers or
     * spell out huge ones: the rule NumPy and PyTorch share */
    if (maxabs > 0)
        p.sci = maxabs >= 1e8 || maxabs / minabs > 1000 ||
                (!p.integral && minabs < 1e-4);
    if (p.sci) {
        /* 1000 and 1001 must not both print as 1e+03 */
        p.integral = 0;
        if (p.decimals < 4)
            p.decimals = 4;
    }
    /* pass 2: the widest number shown sets the column width */
    do {
        char num[64];
        int w = format_number(&p, *tensor_at(t, idx), num, sizeof num);
        if (w > p.width)
            p.width = w;
    } while (next_shown(&p, idx));
    fputs("tensor(", f);
    print_block(&p, 0, idx, (int)strlen("tensor("));
    fputs(")\n", f);
}
