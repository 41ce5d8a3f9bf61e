/* view.c: views and copies of tensors (contiguous, reshape, permute,
 * narrow, expand), each traced as it happens; see tensor.h. */
#include "tensor/tensor.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tensor/tensor_internal.h"
#include "tensor/tensor_trace.h"

/* A contiguous copy of x, not traced (the callers trace). */
static int copy_contiguous(const char *who, const tensor *x, tensor **out)
{
    int status = tensor_alloc_uninit(who, x->ndim, x->shape,
                              tensor_is_meta(x) ? -1 : 0, out);
    if (status)
        return status;
    tensor_copy_elements(*out, x);
    memcpy((*out)->names, x->names, sizeof x->names);
    return GSL_SUCCESS;
}

int tensor_contiguous(const tensor *x, tensor **out)
{
    int status = copy_contiguous("tensor_contiguous", x, out);
    if (status == GSL_SUCCESS)
        tensor_trace_step(TRACE_COPY, x, *out, "contiguous()");
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
 * named "a*b" split in two gives "a" and "b", and one named F split in
 * two, the first labelled a (DIMS, a not F itself) and the second not (a
 * -1), gives "a" and "F/a"; a merge of
 * "a" and "F/a" is F again.  Any other group (a merge
 * with an unnamed dimension, a split its name does not explain, several
 * into several, 1s in unequal runs) is left unnamed. */
static void name_group(const tensor *x, size_t a, size_t b, const tensor *y,
                       size_t c, size_t d, const char (*labels)[TENSOR_NAME_MAX],
                       char out[][TENSOR_NAME_MAX])
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
    char *star = strchr(joined, '*');
    if (c == d) { /* a merge: "B*h"; "h*d_model/h" is "d_model" */
        size_t la = star ? (size_t)(star - joined) : 0, lj = strlen(joined);
        if (star && b == a + 1 && lj > 2 * la + 2 && joined[lj - la - 1] == '/' &&
            !strncmp(joined, joined + lj - la, la)) {
            joined[lj - la - 1] = '\0';
            memmove(joined, star + 1, strlen(star + 1) + 1);
        }
        strcpy(out[c], joined);
        return;
    }
    if (a != b)
        return;
    size_t parts = 1; /* a split: "B*h" gives "B" and "h" */
    for (const char *p = joined; *p; p++)
        parts += *p == '*';
    if (parts == 1 && d == c + 1 && labels && labels[c][0] && !labels[d][0] &&
        strcmp(labels[c], joined) != 0 &&
        strlen(joined) + strlen(labels[c]) + 2 <= TENSOR_NAME_MAX) {
        strcpy(out[c], labels[c]); /* d_model as (h, p): "h", "d_model/h" */
        strcat(strcat(strcpy(out[d], joined), "/"), labels[c]);
        return;
    }
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
                            const char (*labels)[TENSOR_NAME_MAX],
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
        name_group(x, 0, x->ndim - 1, y, 0, y->ndim - 1, labels, out);
        return;
    }
    for (size_t g = 0; g < n; g++) {
        size_t a = g == 0 ? 0 : ones_after ? xl[g - 1] + 1 : xf[g];
        size_t b = g + 1 == n ? x->ndim - 1 : ones_after ? xl[g] : xf[g + 1] - 1;
        size_t c = g == 0 ? 0 : ones_after ? yl[g - 1] + 1 : yf[g];
        size_t d = g + 1 == n ? y->ndim - 1 : ones_after ? yl[g] : yf[g + 1] - 1;
        name_group(x, a, b, y, c, d, labels, out);
    }
}

/* A DIMS reshape that splits one dimension in two or merges two, the
 * -1 marking which: (B, n, h, -1) splits n's neighbour, (-1, h, n, p)
 * the first, (B*h stays) (-1, n, p) merges the first two, (B, n, -1) the
 * last two.  Then the sizes of 1 are no riddle: every other dimension
 * keeps x's name, and the pair is named as name_group names a group. */
static void split_or_merge(const tensor *x, tensor *y,
                           const char (*labels)[TENSOR_NAME_MAX], size_t rest)
{
    int split = y->ndim == x->ndim + 1;
    if (!split && y->ndim + 1 != x->ndim)
        return;
    size_t first = split && rest > 0 ? rest - 1 : rest; // the pair's first, in y
    for (size_t d = 0, e = 0; d < y->ndim; d++, e++) { // e: x's dimension
        if (d == first) {
            e += !split;
            d += split;
        } else if (x->shape[e] != y->shape[d]) {
            return;
        }
    }
    char out[TENSOR_MAX_DIMS][TENSOR_NAME_MAX] = {{0}};
    name_group(x, first, first + !split, y, first, first + split, labels, out);
    for (size_t d = 0, e = 0; d < y->ndim; d++, e++) {
        if (d == first) {
            strcpy(y->names[d], out[d]);
            if (split) {
                d++;
                strcpy(y->names[d], out[d]);
            } else {
                e++;
            }
        } else {
            strcpy(y->names[d], x->names[e]);
        }
    }
}

/* DIMS's labels name the dimensions of y that x's names leave unnamed,
 * when x has names: an unnamed x stays unnamed (reshape and expand). */
static void label_unnamed(const tensor *x, tensor *y,
                          const char (*labels)[TENSOR_NAME_MAX])
{
    int named = 0;
    for (size_t d = 0; d < x->ndim; d++)
        named |= x->names[d][0] != '\0';
    for (size_t d = 0; d < y->ndim && named; d++)
        if (!y->names[d][0])
            strcpy(y->names[d], labels[d]);
}

/* Names for the reshaped dimensions, derived from x's by their sizes
 * (names_by_groups).  A size-1 dimension between two groups could belong
 * to either, and the sizes cannot say which: (B, G, Lk, p) with G = Lk =
 * 1 reshaped to (B*G, Lk, p) looks the same as to (B, G*Lk, p).  So the
 * names are worked out both ways, and a dimension is named only when the
 * two agree; a step that knows better passes its names.  labels (NULL:
 * none) are DIMS's: they name the dimensions split off a named one, and,
 * when x has names, any dimension x's names leave unnamed; rest is the
 * dimension DIMS gave as -1 (-1: none). */
static void derive_names(const tensor *x, tensor *y,
                         const char (*labels)[TENSOR_NAME_MAX], long rest)
{
    char before[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    char after[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    names_by_groups(x, y, 0, labels, before);
    names_by_groups(x, y, 1, labels, after);
    for (size_t d = 0; d < y->ndim; d++)
        if (!strcmp(before[d], after[d]))
            strcpy(y->names[d], before[d]);
    if (labels && rest >= 0)
        split_or_merge(x, y, labels, (size_t)rest);
    if (labels)
        label_unnamed(x, y, labels);
}

/* DIMS's text "B, n, h * p" as one label per dimension, spaces taken
 * out ("h*p"); a number, a -1 or any other expression than names, '*'
 * and '/' ("(long)n", "y->shape[0]") labels nothing. */
#define LABEL_CHARS                                                           \
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_*/ "
static void read_labels(const char *text, char labels[][TENSOR_NAME_MAX])
{
    memset(labels, 0, TENSOR_MAX_DIMS * TENSOR_NAME_MAX);
    for (size_t d = 0; d < TENSOR_MAX_DIMS && *text; d++) {
        size_t len = strcspn(text, ","), k = 0;
        int ok = len > 0 && !strchr("0123456789-", text[strspn(text, " ")]);
        for (size_t i = 0; i < len && ok; i++) {
            ok = strchr(LABEL_CHARS, text[i]) && k + 1 < TENSOR_NAME_MAX;
            if (ok && text[i] != ' ')
                labels[d][k++] = text[i];
        }
        labels[d][ok ? k : 0] = '\0';
        text += len + (text[len] == ',');
    }
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
        y = tensor_new_header(x->buffer, who);
        if (!y)
            return GSL_ENOMEM;
        y->data = x->data;
        memcpy(y->strides, strides, sizeof strides);
    } else if (allow_copy) {
        status = copy_contiguous(who, x, &y);
        if (status)
            return status;
        tensor_contiguous_strides(ndim, shape, y->strides);
        copied = 1;
    } else {
        char xs[TRACE_SHAPE_MAX], ys[TRACE_SHAPE_MAX];
        return mha_fail(GSL_EINVAL,
                        "%s: shape %s cannot be viewed as %s without a copy "
                        "(its strides do not allow it); use tensor_reshape",
                        who, tensor_shape_str(x, xs, sizeof xs),
                        trace_dims_str(ys, sizeof ys, ndim, shape));
    }
    y->ndim = ndim;
    memset(y->shape, 0, sizeof y->shape);
    memcpy(y->shape, shape, ndim * sizeof shape[0]);
    for (size_t d = ndim; d < TENSOR_MAX_DIMS; d++)
        y->strides[d] = 0;
    memset(y->names, 0, sizeof y->names);
    char labels[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
    if (names && names[0] == TENSOR_LABELS[0]) {
        read_labels(names + 1, labels);
        long rest = -1;
        for (size_t d = 0; d < ndim; d++)
            rest = req[d] == -1 ? (long)d : rest;
        derive_names(x, y, (const char (*)[TENSOR_NAME_MAX])labels, rest);
    } else if (names) {
        status = tensor_set_names(y, names);
        if (status) {
            tensor_free(y);
            return mha_fail_in(status, "%s", who);
        }
    } else {
        derive_names(x, y, NULL, -1);
    }
    tensor_trace_step(copied ? TRACE_COPY : TRACE_VIEW, x, y, "%s%D",
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
                        trace_dims_str(ps, sizeof ps, ndim, perm),
                        x->ndim, tensor_shape_str(x, xs, sizeof xs));

    tensor *y = tensor_new_header(x->buffer, "tensor_permute");
    if (!y)
        return GSL_ENOMEM;
    y->data = x->data;
    y->ndim = ndim;
    for (size_t d = 0; d < ndim; d++) {
        y->shape[d] = x->shape[perm[d]];
        y->strides[d] = x->strides[perm[d]];
        memcpy(y->names[d], x->names[perm[d]], TENSOR_NAME_MAX);
    }
    tensor_trace_step(TRACE_VIEW, x, y, "permute%P", ndim, perm);
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
    tensor *y = tensor_new_header(x->buffer, "tensor_narrow");
    if (!y)
        return GSL_ENOMEM;
    unsigned long id = y->id;
    *y = *x;
    y->id = id;
    if (!tensor_is_meta(x))
        y->data = x->data + start * x->strides[dim];
    y->shape[dim] = length;
    tensor_trace_step(TRACE_VIEW, x, y, "narrow(%zu, %zu, %zu)", dim, start, length);
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
    tensor *y = tensor_new_header(x->buffer, "tensor_expand");
    if (!y)
        return GSL_ENOMEM;
    y->data = x->data;
    y->ndim = ndim;
    memcpy(y->shape, new_shape, sizeof new_shape);
    memcpy(y->strides, new_strides, sizeof new_strides);
    for (size_t d = lead; d < ndim; d++)
        memcpy(y->names[d], x->names[d - lead], TENSOR_NAME_MAX);
    if (names && names[0] == TENSOR_LABELS[0]) { /* labels: what x's leave */
        char labels[TENSOR_MAX_DIMS][TENSOR_NAME_MAX];
        read_labels(names + 1, labels);
        label_unnamed(x, y, (const char (*)[TENSOR_NAME_MAX])labels);
    } else if (names) {
        int status = tensor_set_names(y, names);
        if (status) {
            tensor_free(y);
            return mha_fail_in(status, "tensor_expand");
        }
    }
    tensor_trace_step(TRACE_VIEW, x, y, "expand%D", ndim, shape);
    *out = y;
    return GSL_SUCCESS;
}
