/* tensor_internal.h: what the files of tensor/ share and nobody else
 * sees: the buffer behind a tensor, and the steps that make headers. */
#ifndef MHA_TENSOR_INTERNAL_H
#define MHA_TENSOR_INTERNAL_H

#include "base/cleanup.h"
#include "tensor/tensor.h"

/* The numbers, shared by every tensor that views them. */
struct tensor_buffer {
    double *values;
    size_t size;   /* number of doubles */
    long refcount; /* tensors using this buffer */
//> handout
    void *mapping;        /* NULL, or the mmap values live in ... */
    size_t mapping_bytes; /* ... of this many bytes, unmapped on free */
    cleanup_entry *mapping_entry; /* its SIGBUS line (base/cleanup.h) */
//<
};

/* Row-major strides for shape. */
void tensor_contiguous_strides(size_t ndim, const size_t *shape,
                               size_t *strides);
/* A new tensor header sharing buf (whose count it takes one more of). */
tensor *tensor_new_header(tensor_buffer *buf, const char *who);
/* A new contiguous tensor of shape; zero: 1 zeroed numbers, 0
 * uninitialised numbers, -1 no numbers (meta). */
int tensor_alloc_uninit(const char *who, size_t ndim, const size_t *shape,
                        int zero, tensor **out);
/* src into dst, both with the same numel, each read in row-major order. */
void tensor_copy_elements(tensor *dst, const tensor *src);

#endif
