//> 02
/* linear.h: the fully connected layer, y = x W^T + b.
 *
 * Shapes (PyTorch's nn.Linear layout):
 *     x      (..., in_features)      any number of leading dimensions
 *     weight (out_features, in_features)
 *     bias   (out_features,)         optional
 *     y      (..., out_features)
 *
 * linear_forward treats the leading dimensions of x as rows of one
 * (rows, in_features) matrix, with rows the product of the leading sizes,
 * and makes a single gsl_blas_dgemm call on GSL views of the tensor data:
 * no copy when x's rows are evenly spaced in memory (always true for a
 * contiguous x).  linear_forward_naive does the same sums with plain loops;
 * it is the reference the tests hold the fast path to.
 *
 * Ownership: linear_init allocates weight and bias inside the struct you
 * pass; linear_free releases them.  y is a new tensor you tensor_free.
 */
#ifndef MHA_LINEAR_H
#define MHA_LINEAR_H

#include <gsl/gsl_rng.h>

#include "tensor/tensor.h"

#define LINEAR_NAME_MAX 16

typedef struct linear {
    char name[LINEAR_NAME_MAX];     /* "W_q": named in traces and messages */
    size_t in_features, out_features;
    tensor *weight;                 /* (out_features, in_features) */
    tensor *bias;                   /* (out_features,), or NULL: no bias */
    char out_name[TENSOR_NAME_MAX]; /* symbolic name of y's last dimension */
} linear;

/* Allocate a layer with zero weights (and a zero bias when with_bias). */
int linear_init(linear *l, const char *name, size_t in_features,
                size_t out_features, int with_bias);
//> handout
/* The same layer with shape-only ("meta") parameters: no numbers, for a
 * trace of any size (tensor_alloc_meta). */
int linear_init_meta(linear *l, const char *name, size_t in_features,
                     size_t out_features, int with_bias);
//<
void linear_free(linear *l);

/* Names the last dimension of the layer's outputs, for the trace, as the
 * module's code names its size (spaces left out):
 * linear_name_output(&m->W_q, NAMES(d_model)). */
void linear_name_output(linear *l, const char *name);

/* Xavier (Glorot) uniform: W ~ U(-a, a), a = sqrt(6 / (in + out)); b = 0. */
void linear_reset_xavier_uniform(linear *l, gsl_rng *r);
/* PyTorch's nn.Linear default: W and b ~ U(-1/sqrt(in), 1/sqrt(in)). */
void linear_reset_pytorch(linear *l, gsl_rng *r);

/* y = x W^T + b with one dgemm over all rows of x: linear_check, then
 * linear_steps. */
int linear_forward(const linear *l, const tensor *x, tensor **y);

/* Whether the layer still has the parameters it was made with (weight
 * (out_features, in_features), bias (out_features,) or none) and x (NULL:
 * not checked) ends in in_features: GSL_SUCCESS, or GSL_EINVAL /
 * GSL_EBADLEN with a message that starts with who and the layer's name. */
int linear_check(const char *who, const linear *l, const tensor *x);

/* linear_forward's steps, with its trace line, on an x and a layer its
 * caller has checked: a module checks its layers once, at its door
 * (multihead_check_call), and its steps call this. */
int linear_steps(const linear *l, const tensor *x, tensor **y);

/* The same with three plain loops; the reference for the tests. */
int linear_forward_naive(const linear *l, const tensor *x, tensor **y);

#endif
//<
