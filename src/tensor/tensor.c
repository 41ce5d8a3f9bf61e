/* tensor.c: dense tensors, their storage, names and fills; see tensor.h
 * (views: view.c, checks for non-finite numbers: finite.c, printing:
 * print.c). */
#include "tensor/tensor.h"

#include <stdlib.h>
#include <string.h>
//> handout
#include <sys/mman.h>
//<

#include <gsl/gsl_randist.h>

#include "base/error.h"
#include "tensor/tensor_internal.h"
#include "trace/trace.h"

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
                            who, d, trace_dims_str(s, sizeof s, ndim, shape));
    int status = GSL_SUCCESS;
    for (size_t d = 0; d < ndim && status == GSL_SUCCESS; d++)
        status = mha_mul_size(n, shape[d], &n, who);
    if (status == GSL_SUCCESS)
        status = mha_mul_size(n, sizeof(double), &bytes, who);
    if (status != GSL_SUCCESS)
        return mha_fail(GSL_EOVRFLW,
                        "%s: shape %s is too large: its size in bytes "
                        "overflows size_t",
                        who, trace_dims_str(s, sizeof s, ndim, shape));
    *numel = n;
    return GSL_SUCCESS;
}

/* Row-major strides for shape. */
void tensor_contiguous_strides(size_t ndim, const size_t *shape,
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
tensor *tensor_new_header(tensor_buffer *buf, const char *who)
{
    tensor *t = mha_calloc(1, sizeof *t, who);
    if (!t)
        return NULL;
    t->buffer = buf;
    t->id = next_id();
    buf->refcount++;
    return t;
}

/* A new contiguous header of shape over buf's numbers (NULL when out of
 * memory). */
static tensor *contiguous_header(tensor_buffer *buf, size_t ndim,
                                 const size_t *shape, const char *who)
{
    tensor *t = tensor_new_header(buf, who);
    if (!t)
        return NULL;
    t->data = buf->values;
    t->ndim = ndim;
    memcpy(t->shape, shape, ndim * sizeof *shape);
    tensor_contiguous_strides(ndim, shape, t->strides);
    return t;
}

/* zero: 1 zeroed numbers, 0 uninitialised numbers, -1 no numbers (meta) */
int tensor_alloc_uninit(const char *who, size_t ndim, const size_t *shape,
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
    *out = contiguous_header(buf, ndim, shape, who);
    if (!*out) {
        free(buf->values);
        free(buf);
        return GSL_ENOMEM;
    }
    return GSL_SUCCESS;
}

//> handout
int tensor_from_mapping(size_t ndim, const size_t *shape, void *map,
                        size_t map_bytes, size_t offset, const char *path,
                        tensor **out)
{
    *out = NULL;
    size_t n = 0;
    int status = check_shape("tensor_from_mapping", ndim, shape, &n);
    if (status)
        return status;
    if (offset % sizeof(double) != 0 || offset > map_bytes ||
        n > (map_bytes - offset) / sizeof(double))
        return mha_fail(GSL_EINVAL,
                        "tensor_from_mapping: %zu numbers at offset %zu do "
                        "not fit in a mapping of %zu bytes, aligned for "
                        "doubles",
                        n, offset, map_bytes);
    tensor_buffer *buf = mha_calloc(1, sizeof *buf, "tensor_from_mapping");
    if (!buf)
        return GSL_ENOMEM;
    buf->values = (double *)((char *)map + offset);
    buf->size = n;
    buf->mapping = map;
    buf->mapping_bytes = map_bytes;
    buf->mapping_entry = cleanup_add_mapping("tensor_from_mapping", map,
                                             map_bytes, path);
    *out = buf->mapping_entry
               ? contiguous_header(buf, ndim, shape, "tensor_from_mapping")
               : NULL;
    if (!*out) {
        cleanup_forget(buf->mapping_entry);
        free(buf); // the mapping stays the caller's
        return GSL_ENOMEM;
    }
    return GSL_SUCCESS;
}
//<

int tensor_alloc(size_t ndim, const size_t *shape, tensor **out)
{
    return tensor_alloc_uninit("tensor_alloc", ndim, shape, 1, out);
}

//> handout
int tensor_alloc_empty(size_t ndim, const size_t *shape, tensor **out)
{
    return tensor_alloc_uninit("tensor_alloc_empty", ndim, shape, 0, out);
}
//<

int tensor_alloc_meta(size_t ndim, const size_t *shape, tensor **out)
{
    return tensor_alloc_uninit("tensor_alloc_meta", ndim, shape, -1, out);
}

int tensor_alloc_like(const tensor *x, tensor **out)
{
    int status = tensor_alloc_uninit("tensor_alloc_like", x->ndim, x->shape,
                                     1, out);
    if (status == GSL_SUCCESS)
        memcpy((*out)->names, x->names, sizeof x->names);
    return status;
}

int tensor_from_array(size_t ndim, const size_t *shape, const double *values,
                      tensor **out)
{
    int status = tensor_alloc_uninit("tensor_from_array", ndim, shape, 0, out);
    if (status)
        return status;
    memcpy((*out)->data, values, tensor_numel(*out) * sizeof(double));
    return GSL_SUCCESS;
}

/* One reference to buf less; the numbers and buf go with the last. */
static void buffer_release(tensor_buffer *buf)
{
    if (--buf->refcount > 0)
        return;
//> handout
    if (buf->mapping) { // a file's numbers (tensor_from_mapping)
        cleanup_forget(buf->mapping_entry);
        munmap(buf->mapping, buf->mapping_bytes);
        free(buf);
        return;
    }
//<
    free(buf->values);
    free(buf);
}

void tensor_free(tensor *t)
{
    if (!t)
        return;
    if (t->borrowed) {
        char sh[TRACE_SHAPE_MAX];
        mha_fail(GSL_EINVAL,
                 "tensor_free: tensor %s (id %lu) is a borrowed header: "
                 "it shares another tensor's numbers and owns nothing; it "
                 "is left alone",
                 tensor_shape_str(t, sh, sizeof sh), t->id);
        return;
    }
    buffer_release(t->buffer);
    free(t);
}

void tensor_free_each(size_t n, tensor *const *list)
{
    for (size_t i = 0; i < n; i++)
        tensor_free(list[i]);
}

//> handout
int tensor_share_numbers(tensor *dst, tensor *src)
{
    char a[TRACE_SHAPE_MAX], b[TRACE_SHAPE_MAX];
    if (!tensor_same_shape(dst, src))
        return mha_fail(GSL_EBADLEN,
                        "tensor_share_numbers: source shape %s differs from "
                        "destination shape %s",
                        tensor_shape_str(src, a, sizeof a),
                        tensor_shape_str(dst, b, sizeof b));
    if (dst->borrowed || src->borrowed)
        return mha_fail(GSL_EINVAL,
                        "tensor_share_numbers: tensor %s (id %lu) is a "
                        "borrowed header, with no buffer of its own to share",
                        tensor_shape_str(dst->borrowed ? dst : src, a, sizeof a),
                        dst->borrowed ? dst->id : src->id);
    src->buffer->refcount++; // first, in case both share one buffer
    buffer_release(dst->buffer);
    dst->buffer = src->buffer;
    dst->data = src->data;
    memcpy(dst->strides, src->strides, sizeof dst->strides);
    return GSL_SUCCESS;
}
//<

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


tensor tensor_header(size_t ndim, const size_t *shape)
{
    tensor t = {.ndim = ndim, .borrowed = 1};
    for (size_t d = 0; d < ndim && d < TENSOR_MAX_DIMS; d++)
        t.shape[d] = shape[d];
    return t;
}

tensor tensor_named(const tensor *x, const char *names)
{
    tensor t = *x;
    t.borrowed = 1;
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
                            who, trace_dims_str(i, sizeof i, t->ndim, idx),
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
    return trace_dims_str(buf, n, t->ndim, t->shape);
}

char *tensor_sym_str(const tensor *t, char *buf, size_t n)
{
    trace_shape s = {.ndim = t->ndim};
    memcpy(s.dims, t->shape, sizeof s.dims);
    memcpy(s.names, t->names, sizeof s.names);
    return trace_sym_str(&s, buf, n);
}

const char *tensor_name_copy(char out[TENSOR_NAME_MAX], const char *text)
{
    size_t len = 0;
    for (; *text && *text != ','; text++)
        if (*text != ' ' && len + 1 < TENSOR_NAME_MAX)
            out[len++] = *text;
    out[len] = '\0';
    return text;
}

/* Split "B, n, h * p" into one name per dimension (tensor_name_copy);
 * returns the count (more than max when there are too many). */
static size_t split_names(const char *names, char out[][TENSOR_NAME_MAX],
                          size_t max)
{
    char spare[TENSOR_NAME_MAX]; // where the names past max go
    for (size_t count = 0;; count++, names++) {
        names = tensor_name_copy(count < max ? out[count] : spare, names);
        if (!*names)
            return count + 1;
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
void tensor_copy_elements(tensor *dst, const tensor *src)
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
    tensor_copy_elements(dst, src);
    return GSL_SUCCESS;
}
