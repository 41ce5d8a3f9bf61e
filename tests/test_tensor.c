/* test_tensor.c: shapes, strides, views and copies of src/tensor/tensor.c.
 *
 * The expected numbers are never read back from the library: element values
 * come from row-major index arithmetic written out here (unravel and ravel
 * in check.h), strides are written by hand, and whether a reshape is a view
 * or a copy is worked out case by case with PyTorch's rule, the reason
 * beside each case.
 *
 * Most sources are made by `positions`: a contiguous tensor whose every
 * element holds its own row-major position, so the value read anywhere says
 * which element of the buffer was reached.
 */
#include "check.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <sys/mman.h>

#include <criterion/parameterized.h>
#include <gsl/gsl_randist.h>

#define MAXD TENSOR_MAX_DIMS

/* A contiguous tensor holding 0, 1, 2, ... in row-major order, built from a
 * plain array (not with tensor_fill_arange, which is tested on its own). */
static tensor *positions(size_t ndim, const size_t *shape)
{
    size_t n = 1;
    for (size_t d = 0; d < ndim; d++)
        n *= shape[d];
    double *v = malloc(n * sizeof *v);
    cr_assert_not_null(v);
    for (size_t k = 0; k < n; k++)
        v[k] = (double)k;
    tensor *t = NULL;
    int status = tensor_from_array(ndim, shape, v, &t);
    free(v);
    cr_assert_eq(status, GSL_SUCCESS, "%s", mha_last_error());
    return t;
}

/* The value at index xi of positions(base).permute(perm): output dimension
 * d is base dimension perm[d], so the base index has s[perm[d]] = xi[d]. */
static double permuted_value(size_t ndim, const size_t *base,
                             const size_t *perm, const size_t *xi)
{
    size_t s[MAXD] = {0};
    for (size_t d = 0; d < ndim; d++)
        s[perm[d]] = xi[d];
    return (double)ravel(ndim, base, s);
}

/* "(2, 3, 4)", "(24,)": written here, not with the library's shape_str. */
static const char *tuple(char *buf, size_t n, size_t ndim, const size_t *s)
{
    size_t used = (size_t)snprintf(buf, n, "(");
    for (size_t d = 0; d < ndim; d++)
        used += (size_t)snprintf(buf + used, n - used, "%s%zu",
                                 d ? ", " : "", s[d]);
    snprintf(buf + used, n - used, ndim == 1 ? ",)" : ")");
    return buf;
}

/* The next permutation in lexicographic order; 0 after the last. */
static int next_permutation(size_t n, size_t *p)
{
    if (n < 2)
        return 0;
    size_t i = n - 1;
    while (i > 0 && p[i - 1] >= p[i])
        i--;
    if (i == 0)
        return 0;
    size_t j = n - 1;
    while (p[j] <= p[i - 1])
        j--;
    size_t tmp = p[i - 1];
    p[i - 1] = p[j];
    p[j] = tmp;
    for (size_t a = i, b = n - 1; a < b; a++, b--) {
        tmp = p[a];
        p[a] = p[b];
        p[b] = tmp;
    }
    return 1;
}

/* --- alloc and from_array ------------------------------------------- */

typedef struct {
    size_t ndim;
    size_t shape[MAXD];
    size_t strides[MAXD]; /* row-major, worked out by hand */
    size_t numel;
} layout_case;

static layout_case layout_cases[] = {
    {1, {7}, {1}, 7},
    {1, {1}, {1}, 1},
    {2, {3, 5}, {5, 1}, 15},
    {2, {5, 3}, {3, 1}, 15},
    {3, {1, 2, 16}, {32, 16, 1}, 32},
    {3, {2, 3, 4}, {12, 4, 1}, 24},
    {4, {2, 3, 4, 5}, {60, 20, 5, 1}, 120},
    {4, {4, 1, 3, 1}, {3, 3, 1, 1}, 12},
    {4, {1, 8, 2, 2}, {32, 4, 2, 1}, 32},
    {4, {1, 1, 1, 1}, {1, 1, 1, 1}, 1},
};

ParameterizedTestParameters(tensor, alloc_layout)
{
    return cr_make_param_array(layout_case, layout_cases,
                               sizeof layout_cases / sizeof layout_cases[0]);
}

ParameterizedTest(layout_case *c, tensor, alloc_layout)
{
    tensor *t = NULL;
    OK(tensor_alloc(c->ndim, c->shape, &t));
    assert_shape(t, c->ndim, c->shape);
    for (size_t d = 0; d < MAXD; d++)
        cr_assert_eq(t->strides[d], d < c->ndim ? c->strides[d] : 0,
                     "strides[%zu] = %zu", d, t->strides[d]);
    cr_assert_eq(tensor_numel(t), c->numel);
    cr_assert(tensor_is_contiguous(t));
    for (size_t d = 0; d < MAXD; d++)
        cr_assert_str_eq(t->names[d], "");
    for (size_t k = 0; k < c->numel; k++)
        cr_assert_eq(t->data[k], 0.0, "element %zu is %g", k, t->data[k]);
    tensor_free(t);
}

ParameterizedTestParameters(tensor, from_array_layout)
{
    return cr_make_param_array(layout_case, layout_cases,
                               sizeof layout_cases / sizeof layout_cases[0]);
}

ParameterizedTest(layout_case *c, tensor, from_array_layout)
{
    double *v = malloc(c->numel * sizeof *v);
    for (size_t k = 0; k < c->numel; k++)
        v[k] = 0.5 * (double)k - 3;
    tensor *t = NULL;
    OK(tensor_from_array(c->ndim, c->shape, v, &t));
    assert_shape(t, c->ndim, c->shape);
    for (size_t d = 0; d < c->ndim; d++)
        cr_assert_eq(t->strides[d], c->strides[d]);
    cr_assert_neq(t->data, v, "from_array must copy, not borrow");
    /* element (i0, i1, ...) is v at sum i_d * stride_d (hand strides) */
    size_t idx[MAXD];
    for (size_t k = 0; k < c->numel; k++) {
        unravel(k, c->ndim, c->shape, idx);
        size_t off = 0;
        for (size_t d = 0; d < c->ndim; d++)
            off += idx[d] * c->strides[d];
        cr_assert_eq(off, k);
        cr_assert_eq(*tensor_at(t, idx), v[k]);
    }
    v[0] = 99;
    cr_assert_eq(t->data[0], -3.0, "the copy follows its source");
    free(v);
    tensor_free(t);
}

Test(tensor, shape_literal_macros)
{
    tensor *t = NULL;
    OK(tensor_alloc(SHAPE(1, 2, 16), &t));
    size_t want[] = {1, 2, 16};
    assert_shape(t, 3, want);
    *TENSOR_AT(t, 0, 1, 5) = 7;
    cr_assert_eq(t->data[16 + 5], 7.0);
    tensor_free(t);
}

Test(tensor, alloc_errors)
{
    tensor *t = (tensor *)&t;
    FAILS(tensor_alloc(0, NULL, &t), GSL_EINVAL,
          "tensor_alloc: 0 dimensions requested, a tensor has 1 to 4");
    cr_assert_null(t);
    size_t five[] = {1, 2, 3, 4, 5};
    t = (tensor *)&t;
    FAILS(tensor_alloc(5, five, &t), GSL_EINVAL,
          "tensor_alloc: 5 dimensions requested, a tensor has 1 to 4");
    cr_assert_null(t);
    FAILS(tensor_alloc(SHAPE(2, 0, 3), &t), GSL_EINVAL,
          "tensor_alloc: dimension 1 of shape (2, 0, 3) is 0; sizes must be >= 1");
    FAILS(tensor_alloc(SHAPE(0), &t), GSL_EINVAL,
          "tensor_alloc: dimension 0 of shape (0,) is 0; sizes must be >= 1");
    double v[1] = {1};
    FAILS(tensor_from_array(SHAPE(4, 0), v, &t), GSL_EINVAL,
          "tensor_from_array: dimension 1 of shape (4, 0) is 0; sizes must be >= 1");
    cr_assert_null(t);
}

/* A borrowed header (tensor_named, tensor_header, a cache's view) owns
 * nothing: tensor_free refuses it with a message naming it, and the
 * tensor it borrows from stays whole (freed once, below, under the
 * sanitizers and valgrind). */
Test(tensor, free_refuses_a_borrowed_header)
{
    tensor *x = NULL;
    cr_assert_eq(tensor_alloc(SHAPE(2, 3), &x), GSL_SUCCESS);
    *TENSOR_AT(x, 1, 2) = 7.5;
    tensor named = tensor_named(x, "B, d");
    tensor header = tensor_header(SHAPE(4, 1));
    cr_assert(named.borrowed && header.borrowed && !x->borrowed);
    mha_clear_error();
    tensor_free(&named);
    char want[160];
    snprintf(want, sizeof want,
             "tensor_free: tensor (2, 3) (id %lu) is a borrowed header: "
             "it shares another tensor's numbers and owns nothing; it "
             "is left alone", x->id);
    cr_assert_str_eq(mha_last_error(), want);
    tensor_free(&header);
    cr_assert_str_eq(mha_last_error(),
                     "tensor_free: tensor (4, 1) (id 0) is a borrowed header: "
                     "it shares another tensor's numbers and owns nothing; "
                     "it is left alone");
    cr_assert_eq(*TENSOR_AT(&named, 1, 2), 7.5);
    /* a view of a borrowed header has a count of its own: freed as usual */
    tensor *v = NULL;
    cr_assert_eq(tensor_reshape(&named, SIZES(6), NULL, &v), GSL_SUCCESS);
    cr_assert(!v->borrowed);
    tensor_free(x);
    cr_assert_eq(v->data[5], 7.5);
    tensor_free(v);
}

/* Sizes whose element count, or byte count, does not fit in size_t. */
Test(tensor, alloc_overflow)
{
    char want[MHA_ERROR_MAX];
    tensor *t = (tensor *)&t;
    size_t half = SIZE_MAX / 2; /* x 3 overflows the element count */
    snprintf(want, sizeof want,
             "tensor_alloc: shape (%zu, 3) is too large: its size in bytes "
             "overflows size_t", half);
    FAILS(tensor_alloc(SHAPE(half, 3), &t), GSL_EOVRFLW, want);
    cr_assert_null(t);

    size_t big = (size_t)1 << (sizeof(size_t) * 4); /* 2^32 on 64 bits */
    snprintf(want, sizeof want,
             "tensor_alloc: shape (%zu, %zu) is too large: its size in bytes "
             "overflows size_t", big, big);
    FAILS(tensor_alloc(SHAPE(big, big), &t), GSL_EOVRFLW, want);

    /* the count fits, the count times sizeof(double) does not */
    size_t eighth = SIZE_MAX / sizeof(double) + 1;
    snprintf(want, sizeof want,
             "tensor_alloc: shape (%zu,) is too large: its size in bytes "
             "overflows size_t", eighth);
    FAILS(tensor_alloc(SHAPE(eighth), &t), GSL_EOVRFLW, want);
    cr_assert_null(t);
}

//> handout
/* tensor_alloc_empty: the shape and strides of tensor_alloc, a buffer of
 * its own (numbers unset until written), the same refusals under its
 * own name. */
Test(tensor, alloc_empty)
{
    tensor *t = NULL;
    OK(tensor_alloc_empty(SHAPE(2, 3, 4), &t));
    assert_shape(t, SHAPE(2, 3, 4));
    cr_assert(tensor_is_contiguous(t));
    assert_strides(t, SHAPE(12, 4, 1));
    for (size_t i = 0; i < 24; i++) // every number writable, then readable
        t->data[i] = (double)i;
    cr_assert_eq(*TENSOR_AT(t, 1, 2, 3), 23.0);
    tensor_free(t);
    char want[MHA_ERROR_MAX];
    size_t half = SIZE_MAX / 2;
    snprintf(want, sizeof want,
             "tensor_alloc_empty: shape (%zu, 3) is too large: its size in "
             "bytes overflows size_t", half);
    t = (tensor *)&t;
    FAILS(tensor_alloc_empty(SHAPE(half, 3), &t), GSL_EOVRFLW, want);
    cr_assert_null(t);
}
//<

/* --- permute --------------------------------------------------------- */

typedef struct {
    size_t ndim;
    size_t shape[MAXD];
} shape_case;

/* The shapes the permute tests take, each in every order: ones of size
 * 1 among them, and d2l's (1, 2, 16) and (1, 8, 2, 2). */
static shape_case permute_shapes[] = {
    {1, {5}},          {2, {2, 3}},       {2, {1, 4}},       {2, {3, 5}},
    {3, {2, 3, 4}},    {3, {1, 2, 16}},   {3, {4, 1, 2}},    {4, {2, 3, 4, 5}},
    {4, {1, 2, 8, 2}}, {4, {3, 1, 2, 1}}, {4, {1, 8, 2, 2}},
};
#define OVER_PERMUTE_SHAPES(test)                                            \
    ParameterizedTestParameters(tensor, test)                                 \
    {                                                                         \
        return cr_make_param_array(shape_case, permute_shapes,               \
                                   sizeof permute_shapes /                    \
                                       sizeof permute_shapes[0]);             \
    }

OVER_PERMUTE_SHAPES(permute_every_order)

/* Every permutation of every shape: out[o] == x[s] with s[perm[d]] = o[d]. */
ParameterizedTest(shape_case *c, tensor, permute_every_order)
{
    static const char *const names[] = {"a", "b", "c", "d"};
    char list[32] = "";
    for (size_t d = 0; d < c->ndim; d++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
                 d ? ", " : "", names[d]);
    tensor *x = positions(c->ndim, c->shape);
    OK(tensor_set_names(x, list));

    size_t perm[MAXD] = {0, 1, 2, 3}, count = 0;
    do {
        tensor *y = NULL;
        OK(tensor_permute(x, c->ndim, perm, &y));
        count++;
        cr_assert_eq(y->ndim, c->ndim);
        for (size_t d = 0; d < c->ndim; d++) {
            cr_assert_eq(y->shape[d], c->shape[perm[d]]);
            cr_assert_str_eq(y->names[d], names[perm[d]]);
        }
        cr_assert_eq(y->data, x->data, "a permute is a view");
        cr_assert_eq(y->buffer, x->buffer);

        size_t n = tensor_numel(y), o[MAXD];
        cr_assert_eq(n, tensor_numel(x));
        for (size_t f = 0; f < n; f++) {
            unravel(f, y->ndim, y->shape, o);
            double want = permuted_value(c->ndim, c->shape, perm, o);
            cr_assert_eq(*tensor_at(y, o), want,
                         "perm #%zu, element %zu: %g, expected %g", count, f,
                         *tensor_at(y, o), want);
        }
        tensor_free(y);
    } while (next_permutation(c->ndim, perm));

    size_t factorial = 1;
    for (size_t k = 2; k <= c->ndim; k++)
        factorial *= k;
    cr_assert_eq(count, factorial);
    tensor_free(x);
}

Test(tensor, permute_errors)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *y = (tensor *)&y;
    FAILS(tensor_permute(x, SHAPE(0, 1, 3), &y), GSL_EINVAL,
          "tensor_permute: (0, 1, 3) is not a permutation of the 3 dimensions "
          "of shape (2, 3, 4)");
    cr_assert_null(y);
    FAILS(tensor_permute(x, SHAPE(0, 0, 1), &y), GSL_EINVAL,
          "tensor_permute: (0, 0, 1) is not a permutation of the 3 dimensions "
          "of shape (2, 3, 4)");
    FAILS(tensor_permute(x, SHAPE(2, 1, 2), &y), GSL_EINVAL,
          "tensor_permute: (2, 1, 2) is not a permutation of the 3 dimensions "
          "of shape (2, 3, 4)");
    FAILS(tensor_permute(x, SHAPE(1, 0), &y), GSL_EINVAL,
          "tensor_permute: (1, 0) is not a permutation of the 3 dimensions "
          "of shape (2, 3, 4)");
    FAILS(tensor_permute(x, SHAPE(0, 1, 2, 3), &y), GSL_EINVAL,
          "tensor_permute: (0, 1, 2, 3) is not a permutation of the 3 "
          "dimensions of shape (2, 3, 4)");
    cr_assert_null(y);
    tensor_free(x);
}

/* Too many entries: the message shows every one of them. */
Test(tensor, permute_error_shows_whole_argument)
{
    tensor *x = positions(SHAPE(2, 3, 4, 5)), *y = (tensor *)&y;
    FAILS(tensor_permute(x, SHAPE(0, 1, 2, 3, 4), &y), GSL_EINVAL,
          "tensor_permute: (0, 1, 2, 3, 4) is not a permutation of the 4 "
          "dimensions of shape (2, 3, 4, 5)");
    cr_assert_null(y);
    tensor_free(x);
}

/* --- reshape: view or copy -------------------------------------------- */

/* positions(base).permute(perm).reshape(req): PyTorch's answer in `view`.
 *
 * PyTorch's rule (computeStride): cut the source's dimensions, from the
 * last, into chunks inside which each stride is the next one times its
 * size (size-1 dimensions never cut a chunk); the reshape is a view when
 * every chunk is covered exactly by a run of new dimensions. */
typedef struct {
    size_t ndim;
    size_t base[MAXD];
    size_t perm[MAXD];
    size_t new_ndim;
    long req[MAXD];
    size_t want[MAXD];
    int view;
} reshape_case;

#define ID2 {0, 1}
#define ID3 {0, 1, 2}
#define ID4 {0, 1, 2, 3}

static reshape_case reshape_cases[] = {
    /* contiguous: one chunk, so any shape of the same size is a view */
    {3, {2, 3, 4}, ID3, 1, {24}, {24}, 1},
    {3, {2, 3, 4}, ID3, 2, {4, 6}, {4, 6}, 1},
    {3, {2, 3, 4}, ID3, 2, {12, 2}, {12, 2}, 1},
    {3, {2, 3, 4}, ID3, 4, {2, 3, 2, 2}, {2, 3, 2, 2}, 1},
    {1, {24}, {0}, 4, {1, 24, 1, 1}, {1, 24, 1, 1}, 1},
    {4, {2, 3, 4, 5}, ID4, 2, {6, 20}, {6, 20}, 1},
    {4, {2, 3, 4, 5}, ID4, 3, {5, 4, 6}, {5, 4, 6}, 1},

    /* d2l transpose_qkv with B = 1, n = 2, d_model = 16, h = 8 */
    /* (1, 2, 16) -> (1, 2, 8, 2): contiguous source, a view */
    {3, {1, 2, 16}, ID3, 4, {1, 2, 8, -1}, {1, 2, 8, 2}, 1},
    /* permute(0, 2, 1, 3) gives (1, 8, 2, 2) with strides (32, 2, 16, 1);
     * -> (8, 2, 2): B has size 1 so it does not cut h's chunk; the chunks
     * are {B, h} (8 elements, base stride 2), {n} (stride 16) and {d}
     * (stride 1), each covered by one new dimension: a view */
    {4, {1, 2, 8, 2}, {0, 2, 1, 3}, 3, {-1, 2, 2}, {8, 2, 2}, 1},

    /* the same with B = 2: (2, 8, 2, 2), strides (32, 2, 16, 1); B's
     * stride 32 is not 8 * 2, so B and h are separate chunks and the new
     * dimension of 16 would have to span both: a copy */
    {3, {2, 2, 16}, ID3, 4, {2, 2, 8, -1}, {2, 2, 8, 2}, 1},
    {4, {2, 2, 8, 2}, {0, 2, 1, 3}, 3, {-1, 2, 2}, {16, 2, 2}, 0},

    /* transpose_output: (B*h, n, d/h) -> (B, h, n, d/h), contiguous: view */
    {3, {8, 2, 2}, ID3, 4, {-1, 8, 2, 2}, {1, 8, 2, 2}, 1},
    /* ... permute(0, 2, 1, 3) -> (1, 2, 8, 2) strides (32, 2, 16, 1);
     * -> (1, 2, 16) merges h (stride 16) and d/h (stride 1): 16 != 2 * 1,
     * two chunks under one new dimension: a copy */
    {4, {1, 8, 2, 2}, {0, 2, 1, 3}, 3, {1, 2, -1}, {1, 2, 16}, 0},

    /* merging dimensions of a permuted tensor */
    /* (3, 2) strides (1, 3): 3 != 2 * 1, a copy */
    {2, {2, 3}, {1, 0}, 1, {6}, {6}, 0},
    /* (4, 2, 3) strides (1, 12, 4): merging 4 and 2, 12 != 2 * 1: copy */
    {3, {2, 3, 4}, {2, 0, 1}, 2, {8, 3}, {8, 3}, 0},
    /* (3, 2, 4) strides (4, 12, 1): merging 3 and 2, 4 != 2 * 12: copy */
    {3, {2, 3, 4}, {1, 0, 2}, 2, {6, 4}, {6, 4}, 0},
    /* (3, 2, 4) strides (4, 12, 1): merging 2 and 4, 12 != 4 * 1: copy */
    {3, {2, 3, 4}, {1, 0, 2}, 2, {3, 8}, {3, 8}, 0},
    /* (4, 2, 3) strides (1, 12, 4): merging 2 and 3, 12 == 3 * 4, one
     * chunk: a view although the source is permuted */
    {3, {2, 3, 4}, {2, 0, 1}, 2, {4, 6}, {4, 6}, 1},
    /* size 1 does not rescue a merge: (1, 3, 2) strides (6, 1, 3), merging
     * 3 and 2 (1 != 2 * 3): copy */
    {3, {1, 2, 3}, {0, 2, 1}, 2, {1, 6}, {1, 6}, 0},

    /* splitting a dimension of a permuted tensor: a view, the new strides
     * subdivide the old one */
    /* (4, 2, 3) strides (1, 12, 4): 4 -> (2, 2) with strides (2, 1) */
    {3, {2, 3, 4}, {2, 0, 1}, 4, {2, 2, 2, 3}, {2, 2, 2, 3}, 1},
    /* (6, 2) strides (1, 6): 6 -> (3, 2) with strides (2, 1) */
    {2, {2, 6}, {1, 0}, 3, {3, 2, 2}, {3, 2, 2}, 1},
    /* (4, 3, 2) strides (1, 4, 12): 2 -> (2, 1), 4 -> (2, 2) */
    {3, {2, 3, 4}, {2, 1, 0}, 4, {2, 2, 3, 2}, {2, 2, 3, 2}, 1},

    /* size-1 dimensions inserted or removed: a size-1 dimension holds no
     * chunk and takes any stride, so these are views */
    /* (6, 2) strides (1, 6) -> (6, 1, 2) */
    {2, {2, 6}, {1, 0}, 3, {6, 1, 2}, {6, 1, 2}, 1},
    /* (6, 2) strides (1, 6) -> (1, 6, 2, 1) */
    {2, {2, 6}, {1, 0}, 4, {1, 6, 2, 1}, {1, 6, 2, 1}, 1},
    /* (3, 1, 2) strides (1, 3, 3) -> (3, 2) */
    {3, {2, 1, 3}, {2, 1, 0}, 2, {3, 2}, {3, 2}, 1},
    /* (3, 1, 2, 1) strides (1, 3, 3, 6) -> (3, 2) */
    {4, {1, 2, 1, 3}, {3, 2, 1, 0}, 2, {3, 2}, {3, 2}, 1},
    /* (3, 1, 2, 1) strides (1, 3, 3, 6) -> (1, 3, 2, 1) */
    {4, {1, 2, 1, 3}, {3, 2, 1, 0}, 4, {1, 3, 2, 1}, {1, 3, 2, 1}, 1},
    /* the same shape again is always a view */
    {3, {2, 3, 4}, {2, 0, 1}, 3, {4, 2, 3}, {4, 2, 3}, 1},
};

ParameterizedTestParameters(tensor, reshape_view_or_copy)
{
    return cr_make_param_array(reshape_case, reshape_cases,
                               sizeof reshape_cases / sizeof reshape_cases[0]);
}

ParameterizedTest(reshape_case *c, tensor, reshape_view_or_copy)
{
    tensor *base = positions(c->ndim, c->base), *x = NULL, *y = NULL;
    OK(tensor_permute(base, c->ndim, c->perm, &x));
    OK(tensor_reshape(x, c->new_ndim, c->req, NULL, &y));
    assert_shape(y, c->new_ndim, c->want);
    if (c->view) {
        cr_assert_eq(y->data, base->data, "expected a view");
        cr_assert_eq(y->buffer, base->buffer);
    } else {
        cr_assert_neq(y->data, base->data, "expected a copy");
        cr_assert_neq(y->buffer, base->buffer);
        cr_assert(tensor_is_contiguous(y));
    }

    /* element f of y in row-major order is element f of x in row-major
     * order, x's value found from the base by hand */
    size_t n = tensor_numel(y), yi[MAXD], xi[MAXD], s[MAXD];
    for (size_t f = 0; f < n; f++) {
        unravel(f, y->ndim, y->shape, yi);
        unravel(f, x->ndim, x->shape, xi);
        double want = permuted_value(c->ndim, c->base, c->perm, xi);
        cr_assert_eq(*tensor_at(y, yi), want, "element %zu: %g, expected %g",
                     f, *tensor_at(y, yi), want);
    }
    /* writing through y: reaches the base exactly when y is a view */
    for (size_t f = 0; f < n; f++) {
        unravel(f, y->ndim, y->shape, yi);
        *tensor_at(y, yi) = -1.0 - (double)f;
    }
    for (size_t f = 0; f < n; f++) {
        unravel(f, x->ndim, x->shape, xi);
        for (size_t d = 0; d < c->ndim; d++)
            s[c->perm[d]] = xi[d];
        size_t at = ravel(c->ndim, c->base, s);
        cr_assert_eq(base->data[at], c->view ? -1.0 - (double)f : (double)at,
                     "base element %zu after writing y", at);
    }

    /* tensor_view: the same view, or a refusal where reshape copies */
    tensor *v = (tensor *)&v;
    if (c->view) {
        OK(tensor_view(x, c->new_ndim, c->req, NULL, &v));
        assert_shape(v, c->new_ndim, c->want);
        cr_assert_eq(v->data, base->data);
        for (size_t d = 0; d < c->new_ndim; d++)
            cr_assert_eq(v->strides[d], y->strides[d]);
        tensor_free(v);
    } else {
        char xs[64], ys[64], want[MHA_ERROR_MAX];
        snprintf(want, sizeof want,
                 "tensor_view: shape %s cannot be viewed as %s without a "
                 "copy (its strides do not allow it); use tensor_reshape",
                 tuple(xs, sizeof xs, x->ndim, x->shape),
                 tuple(ys, sizeof ys, c->new_ndim, c->want));
        FAILS(tensor_view(x, c->new_ndim, c->req, NULL, &v), GSL_EINVAL, want);
        cr_assert_null(v);
    }
    FREE_ALL(y, x, base);
}

/* --- reshape: inferring -1, and bad shapes ---------------------------- */

typedef struct {
    size_t ndim;
    long req[MAXD];
    size_t want[MAXD];
} infer_case;

ParameterizedTestParameters(tensor, reshape_infers_minus_one)
{
    /* all from (2, 3, 4), 24 elements */
    static infer_case cases[] = {
        {1, {-1}, {24}},
        {2, {4, -1}, {4, 6}},
        {2, {-1, 4}, {6, 4}},
        {3, {2, -1, 2}, {2, 6, 2}},
        /* 3 * 8 is already 24, so -1 stands for 1: valid, as in PyTorch */
        {3, {-1, 3, 8}, {1, 3, 8}},
        {4, {-1, 1, 1, 24}, {1, 1, 1, 24}},
        {2, {24, -1}, {24, 1}},
        {4, {2, 3, 2, -1}, {2, 3, 2, 2}},
    };
    return cr_make_param_array(infer_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(infer_case *c, tensor, reshape_infers_minus_one)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *y = NULL;
    OK(tensor_reshape(x, c->ndim, c->req, NULL, &y));
    assert_shape(y, c->ndim, c->want);
    cr_assert_eq(y->data, x->data);
    size_t idx[MAXD];
    for (size_t f = 0; f < 24; f++) {
        unravel(f, y->ndim, y->shape, idx);
        cr_assert_eq(*tensor_at(y, idx), (double)f);
    }
    FREE_ALL(y, x);
}

typedef struct {
    size_t ndim;
    long req[6];
    int status;
    char message[200]; /* in the struct: Criterion copies the parameters
                        * into the test's process, pointers would dangle */
} bad_shape_case;

ParameterizedTestParameters(tensor, reshape_rejects)
{
    /* all from (2, 3, 4), 24 elements */
    static bad_shape_case cases[] = {
        {3, {-1, -1, 4}, GSL_EINVAL,
         "tensor_reshape: shape (-1, -1, 4) has more than one -1 "
         "(input shape (2, 3, 4))"},
        {2, {0, -1}, GSL_EINVAL,
         "tensor_reshape: shape (0, -1) has size 0 in dimension 0; sizes "
         "must be >= 1 or a single -1 (input shape (2, 3, 4))"},
        {3, {2, -2, 6}, GSL_EINVAL,
         "tensor_reshape: shape (2, -2, 6) has size -2 in dimension 1; "
         "sizes must be >= 1 or a single -1 (input shape (2, 3, 4))"},
        {3, {2, 12, 0}, GSL_EINVAL,
         "tensor_reshape: shape (2, 12, 0) has size 0 in dimension 2; "
         "sizes must be >= 1 or a single -1 (input shape (2, 3, 4))"},
        /* 24 is not a multiple of 5 */
        {2, {-1, 5}, GSL_EBADLEN,
         "tensor_reshape: shape (-1, 5) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        /* 25 > 24 */
        {2, {5, 5}, GSL_EBADLEN,
         "tensor_reshape: shape (5, 5) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        {2, {25, -1}, GSL_EBADLEN,
         "tensor_reshape: shape (25, -1) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        {3, {2, 3, 5}, GSL_EBADLEN,
         "tensor_reshape: shape (2, 3, 5) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        /* 6 < 24 */
        {2, {2, 3}, GSL_EBADLEN,
         "tensor_reshape: shape (2, 3) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        {1, {25}, GSL_EBADLEN,
         "tensor_reshape: shape (25,) is invalid for input of size 24 "
         "(input shape (2, 3, 4))"},
        /* a product that would overflow is still just too large */
        {3, {LONG_MAX, LONG_MAX, -1}, GSL_EBADLEN,
         "tensor_reshape: shape (9223372036854775807, 9223372036854775807, "
         "-1) is invalid for input of size 24 (input shape (2, 3, 4))"},
        {5, {1, 1, 2, 3, 4}, GSL_EINVAL,
         "tensor_reshape: shape (1, 1, 2, 3, 4) has 5 dimensions, a tensor "
         "has 1 to 4 (input shape (2, 3, 4))"},
        {6, {1, 1, 1, 2, 3, 4}, GSL_EINVAL,
         "tensor_reshape: shape (1, 1, 1, 2, 3, 4) has 6 dimensions, a "
         "tensor has 1 to 4 (input shape (2, 3, 4))"},
        {0, {0}, GSL_EINVAL,
         "tensor_reshape: shape () has 0 dimensions, a tensor has 1 to 4 "
         "(input shape (2, 3, 4))"},
    };
    return cr_make_param_array(bad_shape_case, cases,
                               sizeof cases / sizeof cases[0]);
}

ParameterizedTest(bad_shape_case *c, tensor, reshape_rejects)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *y = (tensor *)&y;
    FAILS(tensor_reshape(x, c->ndim, c->req, NULL, &y), c->status, c->message);
    cr_assert_null(y);
    /* tensor_view checks the same way and names itself */
    char want[MHA_ERROR_MAX];
    snprintf(want, sizeof want, "tensor_view%s",
             c->message + strlen("tensor_reshape"));
    y = (tensor *)&y;
    FAILS(tensor_view(x, c->ndim, c->req, NULL, &y), c->status, want);
    cr_assert_null(y);
    tensor_free(x);
}

/* Could a view do what the reshape asks?  off[f] is the buffer offset of
 * the element the reshape must put at row-major position f of `shape`.  A
 * view exists when one stride per dimension reaches all of them:
 * off[f] = off[0] + sum_d idx[d] * stride[d].  This is brute force, not
 * PyTorch's rule, so the two can be checked against each other. */
static int strides_exist(size_t ndim, const size_t *shape, const size_t *off,
                         size_t n)
{
    long stride[MAXD] = {0};
    size_t e[MAXD] = {0}, idx[MAXD];
    for (size_t d = 0; d < ndim; d++)
        if (shape[d] > 1) {
            e[d] = 1;
            stride[d] = (long)off[ravel(ndim, shape, e)] - (long)off[0];
            e[d] = 0;
            if (stride[d] < 0)
                return 0; /* strides are unsigned */
        }
    for (size_t f = 0; f < n; f++) {
        unravel(f, ndim, shape, idx);
        long at = (long)off[0];
        for (size_t d = 0; d < ndim; d++)
            at += (long)idx[d] * stride[d];
        if (at != (long)off[f])
            return 0;
    }
    return 1;
}

/* Random permuted sources and random targets of the same size: the
 * numbers always come out in row-major order, and reshape gives a view
 * exactly when some strides could serve (brute force above). */
Test(tensor, reshape_random_against_brute_force)
{
    gsl_rng *r = mha_rng_new(2024);
    size_t views = 0, copies = 0;
    for (int trial = 0; trial < 3000; trial++) {
        size_t ndim = 1 + gsl_rng_uniform_int(r, MAXD), base[MAXD], perm[MAXD];
        size_t n = 1;
        for (size_t d = 0; d < ndim; d++) {
            base[d] = 1 + gsl_rng_uniform_int(r, 4);
            n *= base[d];
            perm[d] = d;
        }
        gsl_ran_shuffle(r, perm, ndim, sizeof perm[0]);
        /* a target shape: split n into up to 4 factors */
        size_t new_ndim = 1 + gsl_rng_uniform_int(r, MAXD), left = n;
        long req[MAXD];
        for (size_t d = 0; d + 1 < new_ndim; d++) {
            size_t divisors[64], count = 0;
            for (size_t k = 1; k <= left; k++)
                if (left % k == 0)
                    divisors[count++] = k;
            req[d] = (long)divisors[gsl_rng_uniform_int(r, count)];
            left /= (size_t)req[d];
        }
        req[new_ndim - 1] = (long)left;

        tensor *b = positions(ndim, base), *x = NULL, *y = NULL;
        OK(tensor_permute(b, ndim, perm, &x));
        OK(tensor_reshape(x, new_ndim, req, NULL, &y));
        /* the offset in b's buffer of x's element f, by hand */
        size_t off[256], xi[MAXD], yi[MAXD];
        for (size_t f = 0; f < n; f++) {
            unravel(f, ndim, x->shape, xi);
            off[f] = (size_t)permuted_value(ndim, base, perm, xi);
            unravel(f, new_ndim, y->shape, yi);
            cr_assert_eq(*tensor_at(y, yi), (double)off[f], "trial %d", trial);
        }
        int view = y->buffer == b->buffer;
        cr_assert_eq(view, strides_exist(new_ndim, y->shape, off, n),
                     "trial %d: reshape gave a %s", trial, view ? "view" : "copy");
        view ? views++ : copies++;
        FREE_ALL(y, x, b);
    }
    /* both outcomes were exercised, many times */
    cr_assert_gt(views, 500);
    cr_assert_gt(copies, 500);
    gsl_rng_free(r);
}

/* --- round trips ------------------------------------------------------ */

typedef struct {
    size_t ndim;
    size_t shape[MAXD];
    size_t perm[MAXD]; /* applied first */
    size_t new_ndim;
    long req[MAXD];
} trip_case;

ParameterizedTestParameters(tensor, reshape_round_trip)
{
    static trip_case cases[] = {
        {3, {2, 3, 4}, ID3, 2, {6, 4}},
        {3, {2, 3, 4}, ID3, 4, {1, 4, 3, 2}},
        {3, {1, 2, 16}, ID3, 4, {1, 2, 8, 2}},
        {4, {2, 2, 8, 2}, {0, 2, 1, 3}, 3, {16, 2, 2}},  /* copy, then view */
        {4, {1, 2, 8, 2}, {0, 2, 1, 3}, 3, {8, 2, 2}},   /* view both ways */
        {3, {2, 3, 4}, {2, 0, 1}, 2, {8, 3}},            /* copy */
        {3, {2, 3, 4}, {2, 0, 1}, 4, {2, 2, 2, 3}},      /* view */
        {2, {5, 7}, {1, 0}, 1, {35}},
    };
    return cr_make_param_array(trip_case, cases, sizeof cases / sizeof cases[0]);
}

ParameterizedTest(trip_case *c, tensor, reshape_round_trip)
{
    tensor *base = positions(c->ndim, c->shape), *x = NULL, *y = NULL, *z = NULL;
    OK(tensor_permute(base, c->ndim, c->perm, &x));
    OK(tensor_reshape(x, c->new_ndim, c->req, NULL, &y));
    long back[MAXD];
    for (size_t d = 0; d < x->ndim; d++)
        back[d] = (long)x->shape[d];
    OK(tensor_reshape(y, x->ndim, back, NULL, &z));
    cr_assert(tensor_same_shape(z, x));
    size_t n = tensor_numel(x), idx[MAXD];
    for (size_t f = 0; f < n; f++) {
        unravel(f, x->ndim, x->shape, idx);
        cr_assert_eq(*tensor_at(z, idx), *tensor_at(x, idx), "element %zu", f);
        cr_assert_eq(*tensor_at(z, idx),
                     permuted_value(c->ndim, c->shape, c->perm, idx));
    }
    FREE_ALL(z, y, x, base);
}

OVER_PERMUTE_SHAPES(permute_round_trip)

/* Permuting by p and then by p's inverse gives the original layout. */
ParameterizedTest(shape_case *c, tensor, permute_round_trip)
{
    tensor *x = positions(c->ndim, c->shape);
    size_t perm[MAXD] = {0, 1, 2, 3};
    do {
        size_t inv[MAXD];
        for (size_t d = 0; d < c->ndim; d++)
            inv[perm[d]] = d;
        tensor *y = NULL, *z = NULL;
        OK(tensor_permute(x, c->ndim, perm, &y));
        OK(tensor_permute(y, c->ndim, inv, &z));
        cr_assert(tensor_same_shape(z, x));
        for (size_t d = 0; d < c->ndim; d++)
            cr_assert_eq(z->strides[d], x->strides[d]);
        size_t n = tensor_numel(x), idx[MAXD];
        for (size_t f = 0; f < n; f++) {
            unravel(f, x->ndim, x->shape, idx);
            cr_assert_eq(*tensor_at(z, idx), (double)f);
        }
        FREE_ALL(z, y);
    } while (next_permutation(c->ndim, perm));
    tensor_free(x);
}

OVER_PERMUTE_SHAPES(contiguous_of_permuted)

/* contiguous() of a permuted view: row-major strides, the same values. */
ParameterizedTest(shape_case *c, tensor, contiguous_of_permuted)
{
    static const char *const names[] = {"p", "p, q", "p, q, r", "p, q, r, s"};
    tensor *x = positions(c->ndim, c->shape);
    size_t perm[MAXD] = {0, 1, 2, 3};
    do {
        tensor *y = NULL, *z = NULL;
        OK(tensor_permute(x, c->ndim, perm, &y));
        OK(tensor_set_names(y, names[c->ndim - 1]));
        OK(tensor_contiguous(y, &z));
        cr_assert(tensor_same_shape(z, y));
        cr_assert(tensor_is_contiguous(z));
        cr_assert_neq(z->buffer, x->buffer);
        size_t stride = 1;
        for (size_t d = c->ndim; d-- > 0;) {
            cr_assert_eq(z->strides[d], stride);
            stride *= z->shape[d];
            cr_assert_str_eq(z->names[d], y->names[d]);
        }
        size_t n = tensor_numel(x), idx[MAXD];
        for (size_t f = 0; f < n; f++) {
            unravel(f, y->ndim, y->shape, idx);
            cr_assert_eq(z->data[f], permuted_value(c->ndim, c->shape, perm, idx));
        }
        z->data[0] = -7;
        cr_assert_eq(x->data[0], 0.0, "a copy does not write its source");
        FREE_ALL(z, y);
    } while (next_permutation(c->ndim, perm));
    tensor_free(x);
}

Test(tensor, is_contiguous)
{
    tensor *x = positions(SHAPE(2, 3)), *y = NULL, *z = NULL;
    cr_assert(tensor_is_contiguous(x));
    OK(tensor_permute(x, SHAPE(1, 0), &y));
    cr_assert_not(tensor_is_contiguous(y));
    FREE_ALL(y, x);
    /* (1, 3) permuted to (3, 1): strides (1, 3), the size-1 dimension's
     * stride never matters */
    x = positions(SHAPE(1, 3));
    OK(tensor_permute(x, SHAPE(1, 0), &y));
    cr_assert_eq(y->strides[1], 3);
    cr_assert(tensor_is_contiguous(y));
    OK(tensor_reshape(y, SIZES(3), NULL, &z));
    cr_assert_eq(z->data, x->data);
    FREE_ALL(z, y, x);
}

Test(tensor, same_shape)
{
    tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    OK(tensor_alloc(SHAPE(2, 3), &a));
    OK(tensor_alloc(SHAPE(2, 3), &b));
    OK(tensor_alloc(SHAPE(3, 2), &c));
    OK(tensor_alloc(SHAPE(2, 3, 1), &d));
    cr_assert(tensor_same_shape(a, b));
    cr_assert_not(tensor_same_shape(a, c));
    cr_assert_not(tensor_same_shape(a, d));
    FREE_ALL(a, b, c, d);
}

/* --- names ------------------------------------------------------------ */

Test(tensor, set_names)
{
    tensor *x = NULL;
    char buf[TRACE_SHAPE_MAX];
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "");
    OK(tensor_set_names(x, "B, n, d_model"));
    cr_assert_str_eq(x->names[0], "B");
    cr_assert_str_eq(x->names[1], "n");
    cr_assert_str_eq(x->names[2], "d_model");
    cr_assert_str_eq(x->names[3], "");
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "(B, n, d_model)");
    /* blanks around the entries are trimmed */
    OK(tensor_set_names(x, "  B ,n,   d_model/h  "));
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "(B, n, d_model/h)");
    /* NAMES takes the names from the code, and a name loses the spaces
     * the code puts inside it */
    size_t B = 1, n = 2, h = 8, d_nope = 1, d_r = 1;
    cr_assert_str_eq(NAMES(B, n, h*(d_nope + d_r)), "B, n, h*(d_nope + d_r)");
    OK(tensor_set_names(x, NAMES(B, n, h*(d_nope + d_r))));
    cr_assert_str_eq(x->names[2], "h*(d_nope+d_r)");
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf),
                     "(B, n, h*(d_nope+d_r))");
    /* one name at a time, as a layer's output name is read: up to the
     * first comma, without its spaces */
    char one[TENSOR_NAME_MAX];
    const char *rest = tensor_name_copy(one, "h * d_k , n");
    cr_assert_str_eq(one, "h*d_k");
    cr_assert_str_eq(rest, ", n");
    cr_assert_str_eq(tensor_name_copy(one, " d_model "), "");
    cr_assert_str_eq(one, "d_model");
    /* a name longer than TENSOR_NAME_MAX - 1 characters is cut there */
    char longer[TENSOR_NAME_MAX + 8];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    longer[0] = 'B', longer[1] = ',', longer[2] = 'n', longer[3] = ',';
    OK(tensor_set_names(x, longer));
    cr_assert_eq(strlen(x->names[2]), TENSOR_NAME_MAX - 1);
    /* an empty entry leaves that dimension unnamed: its size shows */
    OK(tensor_set_names(x, "B, , d_model"));
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "(B, 2, d_model)");
    /* wrong counts change nothing */
    FAILS(tensor_set_names(x, "B, n"), GSL_EINVAL,
          "tensor_set_names: \"B, n\" names 2 dimensions, shape (1, 2, 16) "
          "has 3");
    FAILS(tensor_set_names(x, "B, n, h, d"), GSL_EINVAL,
          "tensor_set_names: \"B, n, h, d\" names 4 dimensions, shape "
          "(1, 2, 16) has 3");
    FAILS(tensor_set_names(x, "a, b, c, d, e, f"), GSL_EINVAL,
          "tensor_set_names: \"a, b, c, d, e, f\" names 6 dimensions, shape "
          "(1, 2, 16) has 3");
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "(B, 2, d_model)");
    /* NULL and "" clear */
    OK(tensor_set_names(x, NULL));
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "");
    OK(tensor_set_names(x, "B, n, d"));
    OK(tensor_set_names(x, ""));
    cr_assert_str_eq(x->names[0], "");
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "");
    tensor_free(x);

    OK(tensor_alloc(SHAPE(8), &x));
    OK(tensor_set_names(x, "B*h"));
    cr_assert_str_eq(tensor_sym_str(x, buf, sizeof buf), "(B*h,)");
    FAILS(tensor_set_names(x, "B, h"), GSL_EINVAL,
          "tensor_set_names: \"B, h\" names 2 dimensions, shape (8,) has 1");
    tensor_free(x);
}

Test(tensor, sym_str_short_buffer)
{
    tensor *x = NULL;
    char buf[8];
    memset(buf, 'z', sizeof buf);
    OK(tensor_alloc(SHAPE(1, 2, 16), &x));
    OK(tensor_set_names(x, "B, n, d_model"));
    tensor_sym_str(x, buf, sizeof buf);
    cr_assert_str_eq(buf, "(B, n, ", "cut to the buffer, terminated");
    tensor_free(x);
}

/* A zero-size buffer is not written, like snprintf's. */
Test(tensor, sym_str_zero_buffer)
{
    tensor *x = NULL;
    char buf[2] = "z";
    OK(tensor_alloc(SHAPE(2, 3), &x));
    cr_assert_eq(tensor_sym_str(x, buf, 0), buf);
    cr_assert_str_eq(buf, "z");
    OK(tensor_set_names(x, "n, d"));
    tensor_sym_str(x, buf, 0);
    cr_assert_str_eq(buf, "z");
    tensor_shape_str(x, buf, 0);
    cr_assert_str_eq(buf, "z");
    tensor_free(x);
}

/* Names move with the dimensions; reshape derives them. */
Test(tensor, names_follow_permute_and_reshape)
{
    tensor *x = NULL, *p = NULL, *m = NULL, *s = NULL;
    char buf[TRACE_SHAPE_MAX];
    OK(tensor_alloc(SHAPE(2, 8, 3, 2), &x));
    OK(tensor_set_names(x, "B, h, n, d_model/h"));
    OK(tensor_permute(x, SHAPE(2, 0, 3, 1), &p));
    cr_assert_str_eq(tensor_sym_str(p, buf, sizeof buf), "(n, B, d_model/h, h)");
    tensor_free(p);

    /* merged dimensions are joined with '*' */
    OK(tensor_reshape(x, SIZES(-1, 3, 2), NULL, &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(B*h, n, d_model/h)");
    /* and a product splits back into its factors */
    OK(tensor_reshape(m, SIZES(2, 8, 3, 2), NULL, &s));
    cr_assert_str_eq(tensor_sym_str(s, buf, sizeof buf), "(B, h, n, d_model/h)");
    tensor_free(s);
    /* three into one and back */
    tensor_free(m);
    OK(tensor_reshape(x, SIZES(2, 48), NULL, &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(B, h*n*d_model/h)");
    OK(tensor_reshape(m, SIZES(2, 8, 3, 2), NULL, &s));
    cr_assert_str_eq(tensor_sym_str(s, buf, sizeof buf), "(B, h, n, d_model/h)");
    tensor_free(s);
    /* a split the name does not explain leaves the new dimensions unnamed */
    OK(tensor_reshape(m, SIZES(2, 6, 8), NULL, &s));
    cr_assert_str_eq(tensor_sym_str(s, buf, sizeof buf), "(B, 6, 8)");
    FREE_ALL(s, m);
    /* names passed to reshape win over derived ones */
    OK(tensor_reshape(x, SIZES(16, 6), "rows, cols", &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(rows, cols)");
    tensor_free(m);
    /* a merge with an unnamed dimension has no name */
    OK(tensor_set_names(x, "B, , n, d"));
    OK(tensor_reshape(x, SIZES(16, 6), NULL, &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(16, n*d)");
    FREE_ALL(m, x);
}

/* The lesson's batch of one: the symbolic shape does not depend on B's
 * value, so (B, h, n, d) -> (B*h, n, d) -> (B, h, n, d) when B = 1 too. */
Test(tensor, names_keep_a_batch_of_one)
{
    tensor *x = NULL, *m = NULL, *s = NULL;
    char buf[TRACE_SHAPE_MAX];
    OK(tensor_alloc(SHAPE(1, 8, 2, 2), &x));
    OK(tensor_set_names(x, "B, h, n, d_model/h"));
    OK(tensor_reshape(x, SIZES(-1, 2, 2), NULL, &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(B*h, n, d_model/h)");
    OK(tensor_reshape(m, SIZES(-1, 8, 2, 2), NULL, &s));
    cr_assert_str_eq(tensor_sym_str(s, buf, sizeof buf), "(B, h, n, d_model/h)");
    FREE_ALL(s, m);
    /* an unnamed size-1 dimension adds nothing to a merged name */
    OK(tensor_set_names(x, ", h, n, d_model/h"));
    OK(tensor_reshape(x, SIZES(-1, 2, 2), NULL, &m));
    cr_assert_str_eq(tensor_sym_str(m, buf, sizeof buf), "(h, n, d_model/h)");
    FREE_ALL(m, x);
}

/* A size-1 dimension between two others could belong to either: the
 * sizes of (B, G, Lk, p) = (2, 1, 1, 2) reshaped to (2, 1, 2) do not
 * say whether G or Lk was merged into B.  Reshape names only what every
 * reading agrees on, and leaves the rest unnamed rather than guess. */
Test(tensor, names_are_not_guessed_at_a_size_of_1)
{
    static const struct {
        size_t ndim, shape[MAXD];
        const char *names;
        size_t to_ndim;
        long to[MAXD];
        const char *pass; /* the names reshape is given, or NULL */
        const char *want;
    } cases[] = {
        /* (B*G, Lk, p) or (B, G*Lk, p): nothing agrees, no name */
        {4, {2, 1, 1, 2}, "B, G, Lk, d_model/h", 3, {2, 1, 2}, NULL, ""},
        /* (B*h, Lq, p) with h = 1 split to four: the 1 is h or a part of Lq */
        {3, {2, 4, 4}, "B*h, Lq, d_model/h", 4, {2, 1, 4, 4}, NULL,
         "(2, 1, 4, d_model/h)"},
        /* the step that knows passes the names */
        {3, {2, 4, 4}, "B*h, Lq, d_model/h", 4, {2, 1, 4, 4},
         "B, h, Lq, d_model/h", "(B, h, Lq, d_model/h)"},
        /* as many 1s on both sides pair off: (B, h, Lq, p) with Lq = 1 ->
         * (B*h, Lq, p) */
        {4, {2, 5, 1, 20}, "B, h, Lq, d_model/h", 3, {10, 1, 20}, NULL,
         "(B*h, Lq, d_model/h)"},
        /* a reshape to the same shape keeps every name, 1s and all */
        {4, {2, 5, 1, 20}, "B, h, Lq, d_model/h", 4, {2, 5, 1, 20}, NULL,
         "(B, h, Lq, d_model/h)"},
        /* B = h = 1: (1, 1, n, p) -> (1, n, p) is B*h or h*n */
        {4, {1, 1, 2, 2}, "B, h, n, d_model/h", 3, {1, 2, 2}, NULL,
         "(1, 2, d_model/h)"},
        /* ones everywhere: one group, named only when nothing moves */
        {4, {1, 1, 1, 1}, "B, h, Lq, d_model/h", 4, {1, 1, 1, 1}, NULL,
         "(B, h, Lq, d_model/h)"},
        {4, {1, 1, 1, 1}, "B, h, Lq, d_model/h", 3, {1, 1, 1}, NULL, ""},
    };
    char buf[TRACE_SHAPE_MAX];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tensor *x = zeros(cases[c].ndim, cases[c].shape), *y;
        OK(tensor_set_names(x, cases[c].names));
        OK(tensor_reshape(x, cases[c].to_ndim, cases[c].to, cases[c].pass,
                          &y));
        cr_assert_str_eq(tensor_sym_str(y, buf, sizeof buf), cases[c].want,
                         "case %zu", c);
        FREE_ALL(y, x);
    }
}

Test(tensor, reshape_with_wrong_name_count)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *y = (tensor *)&y;
    FAILS(tensor_reshape(x, SIZES(6, 4), "a, b, c", &y), GSL_EINVAL,
          "tensor_reshape: tensor_set_names: \"a, b, c\" names 3 dimensions, "
          "shape (6, 4) has 2");
    cr_assert_null(y);
    /* the copy path frees its copy too */
    tensor *p = NULL;
    OK(tensor_permute(x, SHAPE(2, 1, 0), &p));
    y = (tensor *)&y;
    FAILS(tensor_reshape(p, SIZES(24), "a, b", &y), GSL_EINVAL,
          "tensor_reshape: tensor_set_names: \"a, b\" names 2 dimensions, "
          "shape (24,) has 1");
    cr_assert_null(y);
    FREE_ALL(p, x);
}

/* --- filling and copying ---------------------------------------------- */

Test(tensor, fill_and_arange)
{
    tensor *x = NULL;
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    tensor_fill(x, 2.5);
    for (size_t k = 0; k < 24; k++)
        cr_assert_eq(x->data[k], 2.5);
    tensor_fill_arange(x, 1.0, 0.5);
    for (size_t k = 0; k < 24; k++)
        cr_assert_eq(x->data[k], 1.0 + 0.5 * (double)k);
    tensor_free(x);
}

/* On a permuted view, filling follows the view's own row-major order. */
Test(tensor, fill_permuted_view_in_logical_order)
{
    tensor *x = NULL, *t = NULL;
    OK(tensor_alloc(SHAPE(2, 3, 4), &x));
    OK(tensor_permute(x, SHAPE(2, 0, 1), &t)); /* (4, 2, 3) */
    tensor_fill_arange(t, 0.0, 1.0);
    /* t[i, j, k] = 6 i + 3 j + k lives at x[j, k, i] = x->data[12 j + 4 k + i] */
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 2; j++)
            for (size_t k = 0; k < 3; k++)
                cr_assert_eq(x->data[12 * j + 4 * k + i],
                             (double)(6 * i + 3 * j + k));
    tensor_fill(t, -1.0);
    for (size_t k = 0; k < 24; k++)
        cr_assert_eq(x->data[k], -1.0);
    FREE_ALL(t, x);
}

Test(tensor, fill_uniform_is_reproducible)
{
    enum { N = 20000 };
    gsl_rng *r1 = mha_rng_new(42), *r2 = mha_rng_new(42), *r3 = mha_rng_new(43);
    tensor *a = NULL, *b = NULL, *c = NULL;
    OK(tensor_alloc(SHAPE(N), &a));
    OK(tensor_alloc(SHAPE(N), &b));
    OK(tensor_alloc(SHAPE(N), &c));
    tensor_fill_uniform(a, r1, -0.5, 2.0);
    tensor_fill_uniform(b, r2, -0.5, 2.0);
    tensor_fill_uniform(c, r3, -0.5, 2.0);
    cr_assert_eq(memcmp(a->data, b->data, N * sizeof(double)), 0,
                 "the same seed gives the same numbers");
    cr_assert_neq(memcmp(a->data, c->data, N * sizeof(double)), 0,
                  "another seed gives other numbers");
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    for (size_t k = 0; k < N; k++) {
        cr_assert(a->data[k] >= -0.5 && a->data[k] < 2.0, "%g", a->data[k]);
        lo = fmin(lo, a->data[k]);
        hi = fmax(hi, a->data[k]);
        sum += a->data[k];
    }
    /* the whole range is used, and evenly: the mean is 0.75, its standard
     * error 2.5 / sqrt(12 N) ~ 0.005 */
    cr_assert_lt(lo, -0.49);
    cr_assert_gt(hi, 1.99);
    cr_assert_lt(fabs(sum / N - 0.75), 0.03, "mean %g", sum / N);
    gsl_rng_free(r1);
    gsl_rng_free(r2);
    gsl_rng_free(r3);
    FREE_ALL(a, b, c);
}

Test(tensor, fill_normal_is_reproducible)
{
    enum { N = 100000 };
    gsl_rng *r1 = mha_rng_new(7), *r2 = mha_rng_new(7);
    tensor *a = NULL, *b = NULL;
    OK(tensor_alloc(SHAPE(N), &a));
    OK(tensor_alloc(SHAPE(10, N / 10), &b));
    tensor_fill_normal(a, r1, 5.0, 2.0);
    tensor_fill_normal(b, r2, 5.0, 2.0);
    cr_assert_eq(memcmp(a->data, b->data, N * sizeof(double)), 0);
    double sum = 0, sq = 0;
    for (size_t k = 0; k < N; k++) {
        cr_assert(isfinite(a->data[k]));
        sum += a->data[k];
    }
    double mean = sum / N;
    for (size_t k = 0; k < N; k++)
        sq += (a->data[k] - mean) * (a->data[k] - mean);
    double sd = sqrt(sq / (N - 1));
    /* standard errors: 2 / sqrt(N) ~ 0.006 for the mean, ~ 0.0045 for sd */
    cr_assert_lt(fabs(mean - 5.0), 0.04, "mean %g", mean);
    cr_assert_lt(fabs(sd - 2.0), 0.03, "sd %g", sd);
    gsl_rng_free(r1);
    gsl_rng_free(r2);
    FREE_ALL(a, b);
}

/* The random fills also follow a view's row-major order: the same seed
 * gives a permuted view the numbers a contiguous tensor gets. */
Test(tensor, fill_random_permuted_view)
{
    gsl_rng *r1 = mha_rng_new(3), *r2 = mha_rng_new(3);
    tensor *x = NULL, *t = NULL, *c = NULL;
    OK(tensor_alloc(SHAPE(3, 4), &x));
    OK(tensor_permute(x, SHAPE(1, 0), &t)); /* (4, 3) */
    OK(tensor_alloc(SHAPE(4, 3), &c));
    tensor_fill_normal(t, r1, 0.0, 1.0);
    tensor_fill_normal(c, r2, 0.0, 1.0);
    for (size_t i = 0; i < 4; i++)
        for (size_t j = 0; j < 3; j++)
            cr_assert_eq(x->data[4 * j + i], c->data[3 * i + j]);
    gsl_rng_free(r1);
    gsl_rng_free(r2);
    FREE_ALL(c, t, x);
}

Test(tensor, copy_into_any_strides)
{
    tensor *src = positions(SHAPE(2, 3)), *srcT = NULL;
    tensor *dst = NULL, *dbase = NULL, *dstT = NULL;
    OK(tensor_permute(src, SHAPE(1, 0), &srcT)); /* (3, 2), srcT[i][j] = 3j + i */

    /* strided source, contiguous destination */
    OK(tensor_alloc(SHAPE(3, 2), &dst));
    OK(tensor_copy_into(dst, srcT));
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            cr_assert_eq(dst->data[2 * i + j], (double)(3 * j + i));

    /* strided destination, contiguous source */
    OK(tensor_alloc(SHAPE(2, 3), &dbase));
    OK(tensor_permute(dbase, SHAPE(1, 0), &dstT)); /* (3, 2) */
    OK(tensor_copy_into(dstT, dst));
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < 2; j++)
            cr_assert_eq(dbase->data[3 * j + i], dst->data[2 * i + j]);

    /* both strided */
    tensor_fill(dbase, 0);
    OK(tensor_copy_into(dstT, srcT));
    for (size_t k = 0; k < 6; k++)
        cr_assert_eq(dbase->data[k], (double)k);

    /* both contiguous */
    tensor_fill(dst, 0);
    tensor *c = positions(SHAPE(3, 2));
    OK(tensor_copy_into(dst, c));
    for (size_t k = 0; k < 6; k++)
        cr_assert_eq(dst->data[k], (double)k);

    FAILS(tensor_copy_into(dst, src), GSL_EBADLEN,
          "tensor_copy_into: source shape (2, 3) differs from destination "
          "shape (3, 2)");
    tensor *flat = positions(SHAPE(6));
    FAILS(tensor_copy_into(dst, flat), GSL_EBADLEN,
          "tensor_copy_into: source shape (6,) differs from destination "
          "shape (3, 2)");
    for (size_t k = 0; k < 6; k++)
        cr_assert_eq(dst->data[k], (double)k, "a failed copy writes nothing");
    FREE_ALL(flat, c, dstT, dbase, dst, srcT, src);
}

/* --- checked access --------------------------------------------------- */

Test(tensor, get_and_set)
{
    tensor *x = positions(SHAPE(2, 3)), *t = NULL;
    double v = 0;
    OK(tensor_get(x, (size_t[]){1, 2}, &v));
    cr_assert_eq(v, 5.0);
    OK(tensor_permute(x, SHAPE(1, 0), &t)); /* t[2][1] is x[1][2] */
    OK(tensor_get(t, (size_t[]){2, 1}, &v));
    cr_assert_eq(v, 5.0);
    OK(tensor_set(t, (size_t[]){0, 1}, -4.0));
    cr_assert_eq(x->data[3], -4.0);

    v = 123;
    FAILS(tensor_get(x, (size_t[]){2, 0}, &v), GSL_EINVAL,
          "tensor_get: index (2, 0) is out of range for shape (2, 3) "
          "(dimension 0)");
    cr_assert_eq(v, 123.0, "a failed get leaves the value alone");
    FAILS(tensor_get(x, (size_t[]){1, 3}, &v), GSL_EINVAL,
          "tensor_get: index (1, 3) is out of range for shape (2, 3) "
          "(dimension 1)");
    FAILS(tensor_set(t, (size_t[]){3, 1}, 9.0), GSL_EINVAL,
          "tensor_set: index (3, 1) is out of range for shape (3, 2) "
          "(dimension 0)");
    for (size_t k = 0; k < 6; k++)
        cr_assert_neq(x->data[k], 9.0);
    FREE_ALL(t, x);

    x = positions(SHAPE(4));
    FAILS(tensor_set(x, (size_t[]){4}, 1.0), GSL_EINVAL,
          "tensor_set: index (4,) is out of range for shape (4,) "
          "(dimension 0)");
    tensor_free(x);
}

/* --- ownership -------------------------------------------------------- */

Test(tensor, free_base_before_view)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *p = NULL, *r = NULL;
    OK(tensor_permute(x, SHAPE(2, 0, 1), &p));
    OK(tensor_reshape(p, SIZES(2, 2, 2, 3), NULL, &r)); /* a view of a view */
    FREE_ALL(x, p);
    /* r alone keeps the buffer alive */
    size_t idx[MAXD], shape[] = {2, 3, 4}, perm[] = {2, 0, 1}, pshape[] = {4, 2, 3};
    for (size_t f = 0; f < 24; f++) {
        unravel(f, 4, r->shape, idx);
        size_t pi[MAXD];
        unravel(f, 3, pshape, pi);
        cr_assert_eq(*tensor_at(r, idx), permuted_value(3, shape, perm, pi));
    }
    tensor_free(r);
}

/* Three tensors on one buffer, freed in each of the 6 orders. */
Test(tensor, free_in_any_order)
{
    size_t order[3] = {0, 1, 2};
    do {
        tensor *t[3] = {positions(SHAPE(4, 6)), NULL, NULL};
        OK(tensor_permute(t[0], SHAPE(1, 0), &t[1]));
        OK(tensor_reshape(t[0], SIZES(2, 12), NULL, &t[2]));
        for (size_t k = 0; k < 3; k++) {
            tensor_free(t[order[k]]);
            t[order[k]] = NULL;
            /* the ones left still read the buffer */
            if (t[1])
                cr_assert_eq(*TENSOR_AT(t[1], 5, 3), 23.0);
            if (t[2])
                cr_assert_eq(*TENSOR_AT(t[2], 1, 11), 23.0);
            if (t[0])
                cr_assert_eq(*TENSOR_AT(t[0], 3, 5), 23.0);
        }
    } while (next_permutation(3, order));
    tensor_free(NULL);
}

/* --- allocation failures ---------------------------------------------- */

Test(tensor, alloc_out_of_memory)
{
    tensor *t = NULL;
    size_t allocs = 0;
    /* the buffer record, its numbers, the header */
    OK_AFTER_ENOMEM(tensor_alloc(SHAPE(2, 3, 4), &t), t,
                    "tensor_alloc: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 3);
    tensor_free(t);

    double v[6] = {1, 2, 3, 4, 5, 6};
    OK_AFTER_ENOMEM(tensor_from_array(SHAPE(2, 3), v, &t), t,
                    "tensor_from_array: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 3);
    cr_assert_eq(t->data[5], 6.0);
    tensor_free(t);

    /* the numbers' allocation, with its size in the message */
    mha_debug_fail_alloc_after(1);
    FAILS(tensor_alloc(SHAPE(2, 3, 4), &t), GSL_ENOMEM,
          "tensor_alloc: out of memory allocating 24 x 8 bytes");
    mha_debug_fail_alloc_after(-1);
}

Test(tensor, reshape_out_of_memory)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *p = NULL, *y = NULL;
    size_t allocs = 0;
    /* a view: only a header */
    OK_AFTER_ENOMEM(tensor_reshape(x, SIZES(6, 4), NULL, &y), y,
                    "tensor_reshape: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 1);
    cr_assert_eq(y->data, x->data);
    tensor_free(y);
    /* a copy: buffer record, numbers, header */
    OK(tensor_permute(x, SHAPE(2, 0, 1), &p));
    OK_AFTER_ENOMEM(tensor_reshape(p, SIZES(8, 3), NULL, &y), y,
                    "tensor_reshape: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 3);
    cr_assert_neq(y->data, x->data);
    cr_assert_eq(*TENSOR_AT(y, 7, 2), 23.0); /* p[3][1][2] = x[1][2][3] */
    tensor_free(y);
    OK_AFTER_ENOMEM(tensor_view(x, SIZES(4, 6), NULL, &y), y,
                    "tensor_view: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 1);
    FREE_ALL(y, p, x);
}

Test(tensor, contiguous_and_permute_out_of_memory)
{
    tensor *x = positions(SHAPE(2, 3, 4)), *p = NULL, *c = NULL;
    size_t allocs = 0;
    OK_AFTER_ENOMEM(tensor_permute(x, SHAPE(2, 0, 1), &p), p,
                    "tensor_permute: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 1);
    OK_AFTER_ENOMEM(tensor_contiguous(p, &c), c,
                    "tensor_contiguous: out of memory allocating ", allocs);
    cr_assert_eq(allocs, 3);
    cr_assert(tensor_is_contiguous(c));
    cr_assert_eq(c->data[23], 23.0);
    cr_assert_eq(c->data[1], 4.0); /* p[0][0][1] = x[0][1][0] */
    FREE_ALL(c, p, x);
}

/* --- printing --------------------------------------------------------- */

/* What tensor_print writes, as a string (freed by capture_free). */
static const char *printed(capture *c, const tensor *t, int decimals)
{
    capture_start(c);
    tensor_print(c->f, t, decimals);
    return capture_end(c);
}

static void check_print(size_t ndim, const size_t *shape, const double *v,
                        int decimals, const char *want)
{
    tensor *t = NULL;
    capture c;
    OK(tensor_from_array(ndim, shape, v, &t));
    cr_assert_str_eq(printed(&c, t, decimals), want);
    capture_free(&c);
    tensor_free(t);
}

/* shape filled with start, start + 1, ... */
static void check_print_arange(size_t ndim, const size_t *shape, double start,
                               const char *want)
{
    tensor *t = positions(ndim, shape);
    size_t n = tensor_numel(t);
    for (size_t k = 0; k < n; k++)
        t->data[k] += start;
    capture c;
    cr_assert_str_eq(printed(&c, t, 4), want);
    capture_free(&c);
    tensor_free(t);
}

Test(tensor_print, one_dimension)
{
    check_print_arange(SHAPE(4), 0, "tensor([0., 1., 2., 3.])\n");
    check_print(SHAPE(1), (double[]){-2}, 4, "tensor([-2.])\n");
}

Test(tensor_print, integers_2d)
{
    check_print_arange(SHAPE(2, 3), 0,
                       "tensor([[0., 1., 2.],\n"
                       "        [3., 4., 5.]])\n");
}

/* One blank line between the (2, 4) blocks; the numbers share a width. */
Test(tensor_print, integers_3d)
{
    check_print_arange(SHAPE(2, 2, 4), 0,
                       "tensor([[[ 0.,  1.,  2.,  3.],\n"
                       "         [ 4.,  5.,  6.,  7.]],\n"
                       "\n"
                       "        [[ 8.,  9., 10., 11.],\n"
                       "         [12., 13., 14., 15.]]])\n");
}

/* Two blank lines between the 3-D blocks of a 4-D tensor. */
Test(tensor_print, integers_4d)
{
    check_print_arange(SHAPE(2, 1, 2, 2), 0,
                       "tensor([[[[0., 1.],\n"
                       "          [2., 3.]]],\n"
                       "\n"
                       "\n"
                       "        [[[4., 5.],\n"
                       "          [6., 7.]]]])\n");
}

Test(tensor_print, fractions_and_negatives)
{
    check_print(SHAPE(2, 2), (double[]){0.5, -1.25, 3.14159, 2}, 4,
                "tensor([[ 0.5000, -1.2500],\n"
                "        [ 3.1416,  2.0000]])\n");
    check_print(SHAPE(2), (double[]){0.5, -1.25}, 2, "tensor([ 0.50, -1.25])\n");
    /* no "-0." for a negative zero */
    check_print(SHAPE(2), (double[]){-0.0, 1}, 4, "tensor([0., 1.])\n");
}

Test(tensor_print, nan_and_inf)
{
    check_print(SHAPE(4), (double[]){1, NAN, INFINITY, -INFINITY}, 4,
                "tensor([  1.,  nan,  inf, -inf])\n");
    check_print(SHAPE(2), (double[]){0.5, NAN}, 4, "tensor([0.5000,    nan])\n");
    check_print(SHAPE(2), (double[]){NAN, NAN}, 4, "tensor([nan, nan])\n");
}

/* A (1, 2, 16) tensor: rows wrap at 80 columns, the continuation indented
 * one past the row's bracket. */
Test(tensor_print, rows_wrap_at_80_columns)
{
    check_print_arange(SHAPE(1, 2, 16), 0,
        "tensor([[[ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "          14., 15.],\n"
        "         [16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27., 28., 29.,\n"
        "          30., 31.]]])\n");
}

/* More than 1000 elements: three at each end of every long dimension. */
Test(tensor_print, summarised)
{
    check_print_arange(SHAPE(40, 40), 1000,
                       "tensor([[1000., 1001., 1002.,  ..., 1037., 1038., 1039.],\n"
                       "        [1040., 1041., 1042.,  ..., 1077., 1078., 1079.],\n"
                       "        [1080., 1081., 1082.,  ..., 1117., 1118., 1119.],\n"
                       "        ...,\n"
                       "        [2480., 2481., 2482.,  ..., 2517., 2518., 2519.],\n"
                       "        [2520., 2521., 2522.,  ..., 2557., 2558., 2559.],\n"
                       "        [2560., 2561., 2562.,  ..., 2597., 2598., 2599.]])\n");
}

/* In 3-D the "..." between blocks has a blank line on each side. */
Test(tensor_print, summarised_3d)
{
    check_print_arange(SHAPE(7, 2, 72), 1000,
                       "tensor([[[1000., 1001., 1002.,  ..., 1069., 1070., 1071.],\n"
                       "         [1072., 1073., 1074.,  ..., 1141., 1142., 1143.]],\n"
                       "\n"
                       "        [[1144., 1145., 1146.,  ..., 1213., 1214., 1215.],\n"
                       "         [1216., 1217., 1218.,  ..., 1285., 1286., 1287.]],\n"
                       "\n"
                       "        [[1288., 1289., 1290.,  ..., 1357., 1358., 1359.],\n"
                       "         [1360., 1361., 1362.,  ..., 1429., 1430., 1431.]],\n"
                       "\n"
                       "        ...,\n"
                       "\n"
                       "        [[1576., 1577., 1578.,  ..., 1645., 1646., 1647.],\n"
                       "         [1648., 1649., 1650.,  ..., 1717., 1718., 1719.]],\n"
                       "\n"
                       "        [[1720., 1721., 1722.,  ..., 1789., 1790., 1791.],\n"
                       "         [1792., 1793., 1794.,  ..., 1861., 1862., 1863.]],\n"
                       "\n"
                       "        [[1864., 1865., 1866.,  ..., 1933., 1934., 1935.],\n"
                       "         [1936., 1937., 1938.,  ..., 2005., 2006., 2007.]]])\n");
}

/* The number format comes from the numbers shown: a hidden 0.5 does not
 * turn the zeros shown into 0.0000. */
Test(tensor_print, summary_format_from_shown_numbers)
{
    tensor *t = NULL;
    capture c;
    OK(tensor_alloc(SHAPE(40, 40), &t));
    *TENSOR_AT(t, 20, 20) = 0.5;
    cr_assert_str_eq(printed(&c, t, 4),
                     "tensor([[0., 0., 0.,  ..., 0., 0., 0.],\n"
                     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
                     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
                     "        ...,\n"
                     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
                     "        [0., 0., 0.,  ..., 0., 0., 0.],\n"
                     "        [0., 0., 0.,  ..., 0., 0., 0.]])\n");
    capture_free(&c);
    tensor_free(t);
}

/* Exponent notation, as NumPy and PyTorch choose it: a magnitude of 1e8
 * or more, or a spread of more than 1000 between the largest and the
 * smallest nonzero magnitude, or (for fractions) one below 1e-4. */
Test(tensor_print, exponent_notation)
{
    check_print(SHAPE(2), (double[]){1e8, 2e8}, 4,
                "tensor([1.0000e+08, 2.0000e+08])\n");
    check_print(SHAPE(2), (double[]){99999999, 50000000}, 4,
                "tensor([99999999., 50000000.])\n");
    check_print(SHAPE(3), (double[]){1.5e8, -2.25, 0}, 4,
                "tensor([ 1.5000e+08, -2.2500e+00,  0.0000e+00])\n");
    check_print(SHAPE(2), (double[]){1, 1001}, 4,
                "tensor([1.0000e+00, 1.0010e+03])\n");
    check_print(SHAPE(2), (double[]){1, 1000}, 4, "tensor([   1., 1000.])\n");
    check_print(SHAPE(2), (double[]){5e-5, 9e-5}, 4,
                "tensor([5.0000e-05, 9.0000e-05])\n");
    check_print(SHAPE(2), (double[]){1e-4, 2e-4}, 4,
                "tensor([0.0001, 0.0002])\n");
    check_print(SHAPE(3), (double[]){1e9, NAN, -INFINITY}, 4,
                "tensor([1.0000e+09,        nan,       -inf])\n");
}

/* An arange of 1600 spans more than 1000: exponents, and the rows wrap. */
Test(tensor_print, summarised_exponents)
{
    check_print_arange(SHAPE(40, 40), 0,
        "tensor([[0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 3.7000e+01, 3.8000e+01,\n"
        "         3.9000e+01],\n"
        "        [4.0000e+01, 4.1000e+01, 4.2000e+01,  ..., 7.7000e+01, 7.8000e+01,\n"
        "         7.9000e+01],\n"
        "        [8.0000e+01, 8.1000e+01, 8.2000e+01,  ..., 1.1700e+02, 1.1800e+02,\n"
        "         1.1900e+02],\n"
        "        ...,\n"
        "        [1.4800e+03, 1.4810e+03, 1.4820e+03,  ..., 1.5170e+03, 1.5180e+03,\n"
        "         1.5190e+03],\n"
        "        [1.5200e+03, 1.5210e+03, 1.5220e+03,  ..., 1.5570e+03, 1.5580e+03,\n"
        "         1.5590e+03],\n"
        "        [1.5600e+03, 1.5610e+03, 1.5620e+03,  ..., 1.5970e+03, 1.5980e+03,\n"
        "         1.5990e+03]])\n");
}

/* A permuted view prints its own logical order. */
Test(tensor_print, permuted_view)
{
    tensor *x = positions(SHAPE(2, 3)), *t = NULL;
    capture c;
    OK(tensor_permute(x, SHAPE(1, 0), &t));
    cr_assert_str_eq(printed(&c, t, 4),
                     "tensor([[0., 3.],\n"
                     "        [1., 4.],\n"
                     "        [2., 5.]])\n");
    capture_free(&c);
    FREE_ALL(t, x);
}

/* --- narrow ------------------------------------------------------------ */

/* narrow(x, dim, start, len)[.., i, ..] == x[.., start + i, ..], a view. */
Test(tensor, narrow_is_a_view_of_the_right_indices)
{
    tensor *x, *rows, *cols;
    OK(tensor_alloc(SHAPE(4, 5, 6), &x));
    tensor_fill_arange(x, 0, 1);
    OK(tensor_narrow(x, 1, 2, 3, &rows)); // (4, 3, 6)
    OK(tensor_narrow(rows, 2, 1, 4, &cols)); // (4, 3, 4)
    assert_shape(cols, SHAPE(4, 3, 4));
    cr_assert(tensor_shares_buffer(cols, x));
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 3; b++)
            for (size_t c = 0; c < 4; c++)
                cr_assert_eq(*TENSOR_AT(cols, a, b, c),
                             (double)(a * 30 + (b + 2) * 6 + (c + 1)));
    cr_assert(!tensor_is_contiguous(cols));
    *TENSOR_AT(cols, 0, 0, 0) = -1;
    cr_assert_eq(*TENSOR_AT(x, 0, 2, 1), -1);
    tensor_free(x); /* the views keep the buffer alive */
    cr_assert_eq(*TENSOR_AT(rows, 3, 2, 5), 3 * 30 + 4 * 6 + 5);
    FREE_ALL(rows, cols);
}

Test(tensor, narrow_trace_and_errors)
{
    tensor *x, *y = (tensor *)1;
    OK(tensor_alloc(SHAPE(100, 100), &x));
    OK(tensor_set_names(x, "d_model, d_q"));
    TRACES(tensor_narrow(x, 0, 20, 20, &y),
           "narrow(0, 20, 20)        view  (100, 100) -> (20, 100)"
           "             (d_model, d_q)\n");
    tensor_free(y);
    FAILS(tensor_narrow(x, 2, 0, 1, &y), GSL_EINVAL,
          "tensor_narrow: dimension 2 does not exist in shape (100, 100)");
    cr_assert_null(y);
    FAILS(tensor_narrow(x, 1, 90, 11, &y), GSL_EINVAL,
          "tensor_narrow: indices 90..101 (length 11) do not fit in dimension "
          "1 of size 100 (shape (100, 100))");
    FAILS(tensor_narrow(x, 1, 0, 0, &y), GSL_EINVAL,
          "tensor_narrow: indices 0..0 (length 0) do not fit in dimension 1 "
          "of size 100 (shape (100, 100))");
    tensor_free(x);
}

//> 08
/* The first non-finite number is found wherever it is: before, at and
 * after the scan's 512-number blocks, in a contiguous tensor and in a
 * permuted view (first in the view's row-major order, not in memory). */
Test(tensor, check_finite_finds_the_first_bad_number)
{
    const size_t at[] = {0, 1, 510, 511, 512, 513, 1023, 1024, 2047, 4199};
    const double bad[] = {NAN, INFINITY, -INFINITY};
    tensor *x;
    OK(tensor_alloc(SHAPE(3, 700, 2), &x)); // 4200 numbers
    for (size_t a = 0; a < sizeof at / sizeof at[0]; a++)
        for (size_t b = 0; b < 3; b++) {
            tensor_fill_arange(x, -2100, 1);
            x->data[1] = -0.0;          // finite, as are the extremes
            x->data[2] = DBL_MAX;
            x->data[3] = 4.9e-324;
            x->data[at[a]] = bad[b];
            if (at[a] + 7 < 4200)
                x->data[at[a] + 7] = NAN; // a later one is not reported
            char want[160];
            snprintf(want, sizeof want,
                     "t: x[%zu, %zu, %zu] = %s; x must be finite (x (3, 700, 2))",
                     at[a] / 1400, at[a] % 1400 / 2, at[a] % 2,
                     b == 0 ? "nan" : b == 1 ? "inf" : "-inf");
            FAILS(tensor_check_finite(x, "t", "x"), GSL_EDOM, want);
        }
    tensor_fill_arange(x, 0, 1);
    OK(tensor_check_finite(x, "t", "x"));
    // (3, 700, 2) -> (2, 700, 3): element [i, j, k] is x[k, j, i]
    tensor *p;
    OK(tensor_permute(x, SHAPE(2, 1, 0), &p));
    x->data[0 * 1400 + 5 * 2 + 1] = INFINITY; // p[1, 5, 0]
    x->data[2 * 1400 + 3 * 2 + 0] = NAN;      // p[0, 3, 2]: first in p
    FAILS(tensor_check_finite(p, "t", "p"), GSL_EDOM,
          "t: p[0, 3, 2] = nan; p must be finite (p (2, 700, 3))");
    FAILS(tensor_check_finite(x, "t", "x"), GSL_EDOM,
          "t: x[0, 5, 1] = inf; x must be finite (x (3, 700, 2))");
    FREE_ALL(p, x);
}
//<

//> full
/* --- numbers shared and numbers mapped (tensor_share_numbers,
 * tensor_from_mapping): how mha forward takes its inputs with no copy -- */

/* dst reads src's numbers from then on: a write through one shows in the
 * other, its old numbers go, and either may be freed first. */
Test(tensor, share_numbers_reads_the_source_with_no_copy)
{
    for (int src_first = 0; src_first < 2; src_first++) {
        tensor *dst = NULL, *src = positions(SHAPE(2, 3));
        cr_assert_eq(tensor_alloc(SHAPE(2, 3), &dst), GSL_SUCCESS);
        cr_assert_eq(tensor_share_numbers(dst, src), GSL_SUCCESS);
        cr_assert(dst->data == src->data && tensor_shares_buffer(dst, src));
        cr_assert_eq(*TENSOR_AT(dst, 1, 2), 5.0);
        *TENSOR_AT(src, 0, 1) = -2.5;
        cr_assert_eq(*TENSOR_AT(dst, 0, 1), -2.5);
        cr_assert_eq(tensor_share_numbers(dst, src), GSL_SUCCESS); // again
        tensor_free(src_first ? src : dst);
        tensor *left = src_first ? dst : src;
        cr_assert_eq(*TENSOR_AT(left, 1, 0), 3.0);
        tensor_free(left);
    }
}

Test(tensor, share_numbers_refuses_another_shape_or_a_borrowed_header)
{
    tensor *dst = positions(SHAPE(2, 3)), *src = positions(SHAPE(3, 2));
    double *before = dst->data;
    cr_assert_eq(tensor_share_numbers(dst, src), GSL_EBADLEN);
    cr_assert_str_eq(mha_last_error(),
                     "tensor_share_numbers: source shape (3, 2) differs "
                     "from destination shape (2, 3)");
    tensor named = tensor_named(dst, "");
    tensor *same = positions(SHAPE(2, 3));
    cr_assert_eq(tensor_share_numbers(same, &named), GSL_EINVAL);
    char want[200];
    snprintf(want, sizeof want,
             "tensor_share_numbers: tensor (2, 3) (id %lu) is a borrowed "
             "header, with no buffer of its own to share", named.id);
    cr_assert_str_eq(mha_last_error(), want);
    cr_assert(dst->data == before && *TENSOR_AT(same, 1, 2) == 5.0);
    FREE_ALL(dst, src, same);
}

/* A tensor over an anonymous mapping reads the numbers at the offset and
 * unmaps it when freed (sanitizers and valgrind see no leak); an offset
 * not aligned for doubles or numbers past the end are refused, the
 * mapping left to the caller. */
Test(tensor, from_mapping_reads_the_mapping_and_unmaps_it)
{
    size_t bytes = 2 * 4096;
    double *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(map, MAP_FAILED);
    for (size_t k = 0; k < bytes / sizeof(double); k++)
        map[k] = (double)k;
    tensor *t = NULL;
    cr_assert_eq(tensor_from_mapping(SHAPE(3, 4), map, bytes, 16, "m.npy",
                                     &t),
                 GSL_SUCCESS);
    cr_assert(tensor_is_contiguous(t));
    cr_assert_eq(*TENSOR_AT(t, 0, 0), 2.0); // offset 16 bytes: element 2
    cr_assert_eq(*TENSOR_AT(t, 2, 3), 13.0);
    tensor *v = NULL; // a view keeps the mapping past the tensor's free
    cr_assert_eq(tensor_reshape(t, SIZES(12), NULL, &v), GSL_SUCCESS);
    tensor_free(t);
    cr_assert_eq(v->data[11], 13.0);
    tensor_free(v);

    double *map2 = mmap(NULL, bytes, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS,
                        -1, 0);
    cr_assert_neq(map2, MAP_FAILED);
    cr_assert_eq(tensor_from_mapping(SHAPE(2), map2, bytes, 12, "m.npy",
                                     &t),
                 GSL_EINVAL);
    cr_assert_null(t);
    cr_assert_str_eq(mha_last_error(),
                     "tensor_from_mapping: 2 numbers at offset 12 do not fit "
                     "in a mapping of 8192 bytes, aligned for doubles");
    cr_assert_eq(tensor_from_mapping(SHAPE(1024), map2, bytes, 8, "m.npy",
                                     &t),
                 GSL_EINVAL);
    cr_assert_str_eq(mha_last_error(),
                     "tensor_from_mapping: 1024 numbers at offset 8 do not "
                     "fit in a mapping of 8192 bytes, aligned for doubles");
    cr_assert_eq(munmap(map2, bytes), 0);
}
//<

/* A column repeated by name: (n,) viewed as DIMS(n, 1) is (n, 1) (a label
 * that is x's own name splits nothing off, not "n/n"), expanded to
 * DIMS(n, k) is (n, k) (expand's labels name what x's names leave
 * unnamed, and never rename a named one; an unnamed x stays unnamed),
 * and merged to DIMS(n * k) is n*k; at n = 1 and k = 1 too, where every
 * size is 1. */
Test(tensor, dims_labels_name_a_repeated_column)
{
    for (size_t n = 1; n <= 2; n++)
        for (size_t k = 1; k <= 3; k += 2) {
            tensor *x, *col, *wide, *flat, *other;
            OK(tensor_alloc(SHAPE(n), &x));
            OK(tensor_set_names(x, "n"));
            OK(tensor_view(x, DIMS(n, 1), &col));
            char s[TRACE_SHAPE_MAX];
            cr_assert_str_eq(tensor_sym_str(col, s, sizeof s), "(n, 1)",
                             "n %zu k %zu", n, k);
            OK(tensor_expand(col, DIMS(n, k), &wide));
            cr_assert_str_eq(tensor_sym_str(wide, s, sizeof s), "(n, k)",
                             "n %zu k %zu", n, k);
            cr_assert(k == 1 || wide->strides[1] == 0); // read k times
            OK(tensor_reshape(wide, DIMS(n * k), &flat));
            cr_assert_str_eq(tensor_sym_str(flat, s, sizeof s), "(n*k,)",
                             "n %zu k %zu", n, k);
            /* a named dimension keeps its name whatever the label says */
            size_t m = k;
            OK(tensor_expand(wide, DIMS(m, n, k), &other));
            cr_assert_str_eq(tensor_sym_str(other, s, sizeof s),
                             "(m, n, k)", "n %zu k %zu", n, k);
            /* as the reshape's, expand's labels name nothing of an
             * unnamed tensor */
            tensor *plain;
            OK(tensor_set_names(col, NULL));
            OK(tensor_expand(col, DIMS(n, k), &plain));
            cr_assert_str_eq(tensor_sym_str(plain, s, sizeof s), "",
                             "n %zu k %zu", n, k);
            TENSORS_FREE(x, col, wide, flat, other, plain);
        }
}

/* DIMS's labels: the variables' names label what x's names leave open.
 * x is (n, d_model) = (3, 4); h = 2 and h = 1 split d_model into
 * (h, d_model/h), even where a size 1 could belong to either side; the
 * merge back gives d_model again; an unnamed x stays unnamed. */
Test(tensor, dims_labels_name_the_split)
{
    for (size_t h = 1; h <= 2; h++) {
        size_t n = 3;
        tensor *x, *split, *back, *plain;
        OK(tensor_alloc(SHAPE(3, 4), &x));
        OK(tensor_set_names(x, "n, d_model"));
        OK(tensor_reshape(x, DIMS(n, h, -1), &split));
        char s[TRACE_SHAPE_MAX];
        cr_assert_str_eq(tensor_sym_str(split, s, sizeof s),
                         "(n, h, d_model/h)", "h = %zu", h);
        OK(tensor_reshape(split, DIMS(n, -1), &back));
        cr_assert_str_eq(tensor_sym_str(back, s, sizeof s), "(n, d_model)",
                         "h = %zu", h);
        OK(tensor_set_names(x, NULL));
        OK(tensor_reshape(x, DIMS(n, h, -1), &plain));
        cr_assert_str_eq(tensor_sym_str(plain, s, sizeof s), "");
        TENSORS_FREE(x, split, back, plain);
    }
}
