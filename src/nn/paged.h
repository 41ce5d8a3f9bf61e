//> 21
/* paged.h: a paged key-value cache, as vLLM keeps one (Kwon et al. 2023).
 *
 * Chapter 16's cache gives each batch a contiguous (B, G, capacity, p)
 * buffer, allocated up front for the longest sequence it may hold: a
 * short sequence leaves most of its rows unused, and two sequences that
 * begin with the same prompt hold two copies of it.  A paged cache holds
 * keys and values in fixed-size *blocks* of block_size positions, all in
 * one pool, and gives each sequence a *block table*: entry j is the
 * block that holds its positions j*block_size .. (j+1)*block_size - 1.
 * Blocks are taken from a free list only when a sequence reaches them, so
 * a sequence wastes at most block_size - 1 rows, and sequences of
 * different lengths (a ragged batch) decode side by side.
 *
 * Position t of a sequence lives at a *slot*, a row of the pool read as
 * (num_blocks * block_size) rows, in the block its table names for it
 * (the slot mapping, paged_slot below).  A sequence forked from another shares all its
 * blocks (each block counts the tables that hold it); the first write
 * into a shared block that is partly filled copies it to a free block
 * first (copy on write), so the other sequence's blocks are never
 * touched.
 *
 * Shapes, in the lesson's names (multihead.h, kvcache.h):
 *   pool     keys and values (num_blocks, G, block_size, p) each
 *   x        (B, 1, d_q): one new position for each of B sequences
 *   out      (B, 1, D_out)
 *
 * paged_decode_step, step by step (self-attention, one position each):
 *   1. project: Q (B, 1, d_model), K and V (B, 1, G*p)
 *   2. with rope, each row turned to its own sequence's position
 *   3. the slot mapping: a slot for each sequence's next position (a new
 *      block when it starts one, a copy when its last block is shared)
 *   4. write K and V at those slots
 *   5. paged attention: query head i of sequence b against the t_b + 1
 *      positions of b, each key and value read through b's block table
 *      (the key-value head of its group, gqa.h), softmax, weighted sum
 *   6. join the heads and apply W_o
 * The numbers are those of chapter 16's cache, sequence by sequence (the
 * tests hold them to 1e-12).  A step that fails changes nothing.
 *
 * Ownership: paged_cache_init allocates the pool and the tables,
 * paged_cache_free releases them.  Errors follow error.h.
 */
#ifndef MHA_PAGED_H
#define MHA_PAGED_H

#include <stddef.h>
#include <stdio.h>

#include "nn/multihead.h"
#include "tensor/tensor.h"

typedef struct paged_seq {
    int live;       /* 1 while the sequence exists */
    size_t length;  /* positions written */
    size_t nblocks; /* entries of table in use */
    size_t *table;  /* (num_blocks,): the block of each block_size positions */
} paged_seq;

typedef struct paged_cache {
    size_t num_blocks, block_size, kv_heads, head_size; /* pool, bs, G, p */
    size_t max_seqs;
    tensor *keys, *values; /* (num_blocks, G, block_size, p) each */
    size_t *refs;          /* (num_blocks,): tables holding each block */
    size_t *free_list;     /* the free blocks, the next one taken last */
    size_t n_free;
    paged_seq *seqs;       /* (max_seqs,) */
} paged_cache;

/* All blocks free, no sequence.  GSL_EINVAL when a size is 0. */
int paged_cache_init(paged_cache *c, size_t num_blocks, size_t block_size,
                     size_t kv_heads, size_t head_size, size_t max_seqs);
void paged_cache_free(paged_cache *c);

/* A new empty sequence; *seq its number.  GSL_EINVAL when max_seqs are
 * live. */
int paged_seq_add(paged_cache *c, size_t *seq);
/* A new sequence that shares every block of `parent` (a common prefix)
 * and its length.  GSL_EINVAL for a parent that is not live or when
 * max_seqs are live. */
int paged_seq_fork(paged_cache *c, size_t parent, size_t *child);
/* The sequence ends: its blocks that no other table holds are free
 * again.  GSL_EINVAL for a sequence that is not live. */
int paged_seq_release(paged_cache *c, size_t seq);

/* *slot = the slot of position pos of a sequence whose block table is
 * table[0 .. nblocks-1]: the table lists the pool's blocks that hold the
 * sequence's positions, block_size positions to a block in order, one to
 * a row, and slots number the rows of the pool block after block (block
 * b's rows are slots b * block_size onwards).  With blocks of 4 and the
 * table [5, 2, 7], positions 0-3 are slots 20-23 and 4-7 slots 8-11.
 * GSL_EINVAL when block_size is 0 or pos is past the table (pos >=
 * nblocks * block_size). */
int paged_slot(const size_t *table, size_t nblocks, size_t block_size,
               size_t pos, size_t *slot);

/* One decoding step for B live sequences seqs[0 .. B-1] (distinct): x
 * (B, 1, d_q) their next positions, out (B, 1, D_out).  GSL_EBADLEN when
 * x is not (B, 1, d_q) or the pool's G and p are not the module's;
 * GSL_EINVAL for a sequence not live or given twice, or a module that is
 * not self-attention; GSL_ENOMEM "out of blocks" when the free blocks do
 * not cover the step (the message names how many it needs and has).
 * Nothing changes on failure. */
int paged_decode_step(multihead *m, paged_cache *c, const size_t *seqs,
                      size_t B, const tensor *x, tensor **out);

/* The block tables in Graphviz's dot language: each live sequence a row
 * of its table's entries, each used block of the pool a box with how
 * many of its rows are filled and how many tables hold it, an edge from
 * every entry to its block (a shared block has several). */
int paged_write_dot(FILE *f, const paged_cache *c);

#endif
//<
