/* Chapter 21, the key: a paged key-value cache.
 *
 * The numbers the answers to chapter 21's exercises quote: a table of
 * blocks [0, 1, 2, ...] against a scattered one, section 4's waste by
 * block size, the copy when the parent writes first, a beam search's
 * positions, and how many keys a block keeps together.
 */
#include <math.h>

#include "key.h"

static void exercise1(void)
{
    section("Exercise 1");
    /*md
     * The library's solution is `paged_slot` in
     * [`src/nn/paged.c`](../../src/nn/paged.c) (folded on the chapter's page);
     * `make grade EXERCISE=paged_slot` grades a student's: the slots of
     * tables whose blocks lie anywhere in the pool, one position a block,
     * and the refusals. The body is the bounds check and one line:
     * `table[pos / block_size] * block_size + pos % block_size`.
     *
     * Returning `pos` itself is right only when the table is `[0, 1, 2,
     * ...]`, one sequence whose blocks happen to be the first of the pool
     * in order: that is a contiguous cache, and a single sequence decoded
     * alone in a fresh pool would still pass. In the chapter, sequence 1
     * writes its position 0 at slot 0, sequence 0's own, in the very first
     * step: section 1's comparison with chapter 16 fails at once, and
     * every check after it. Below, the slots of sequence 2's table `[2, 4,
     * 5]` against the position:
     */
    const size_t table[3] = {2, 4, 5};
    for (size_t pos = 0; pos < 10; pos++) {
        size_t slot;
        CHECK(paged_slot(table, 3, 4, pos, &slot));
        printf("position %zu: slot %2zu%s\n", pos, slot,
               slot == pos ? "" : "  (not the position)");
    }
}

static void exercise2(void)
{
    section("Exercise 2");
    /*md
     * A sequence of length $L$ holds $\lceil L / b \rceil$ blocks of $b$
     * positions, so it wastes $\lceil L / b \rceil b - L$ positions, at
     * most $b - 1$. For section 4's 8 lengths:
     */
    const double lens[8] = {1812, 97, 530, 4000, 23, 1250, 310, 2901};
    const double sizes[3] = {1, 16, 256};
    for (size_t i = 0; i < 3; i++) {
        double held = 0, used = 0;
        for (size_t s = 0; s < 8; s++) {
            held += ceil(lens[s] / sizes[i]) * sizes[i];
            used += lens[s];
        }
        printf("blocks of %3.0f: %5.0f positions held, %4.0f wasted, %3.0f "
               "table entries\n",
               sizes[i], held, held - used, held / sizes[i]);
    }
    /*md
     * Blocks of 1 waste nothing, but every position is then a table entry
     * and every key is read from wherever its block happens to be: the
     * tables grow as long as the sequences, and a GPU reads no two keys
     * in a row. Blocks of 256 waste more than 1000 positions here. vLLM's
     * default, 16, wastes 85 positions (0.8%) with tables 16 times
     * shorter than the sequences.
     */
}

static void exercise3(void)
{
    section("Exercise 3");
    /*md
     * Right after the fork both tables are `[0, 3]`, and block 3 (3 rows
     * filled) is held by two. Whichever sequence writes first into it
     * copies it: if sequence 0 writes first, block 3 is copied to a free
     * block, sequence 0's table becomes `[0, copy]`, and sequence 3 keeps
     * block 3, now held by it alone, and later writes into it in place.
     * The numbers are the same either way; only which table points at the
     * copy changes. The library's run of it, with sequence 0 alone in a
     * fresh pool (its blocks are 0 and 1, and block 2 is the next free):
     */
    multihead m;
    multihead_config cfg = {.query_size = 16, .key_size = 16,
                            .value_size = 16, .num_hiddens = 16,
                            .num_heads = 4, .kv_heads = 2};
    CHECK(multihead_init(&m, &cfg));
    gsl_rng *rng = mha_rng_new(21);
    if (!rng)
        exit(1);
    multihead_reset_xavier(&m, rng);
    gsl_rng_free(rng);
    paged_cache c;
    CHECK(paged_cache_init(&c, 12, 4, 2, 4, 2));
    size_t a, b;
    CHECK(paged_seq_add(&c, &a));
    tensor *x, *y;
    CHECK(tensor_alloc(SHAPE(1, 1, 16), &x));
    for (size_t t = 0; t < 7; t++) {
        tensor_fill(x, sin((double)t));
        CHECK(paged_decode_step(&m, &c, &a, 1, x, &y));
        tensor_free(y);
    }
    CHECK(paged_seq_fork(&c, a, &b));
    CHECK(paged_decode_step(&m, &c, &a, 1, x, &y));
    tensor_free(y);
    printf("sequence 0 (wrote first): [%zu, %zu]\nsequence 1 (forked):      "
           "[%zu, %zu]\n",
           c.seqs[a].table[0], c.seqs[a].table[1], c.seqs[b].table[0],
           c.seqs[b].table[1]);
    tensor_free(x);
    paged_cache_free(&c);
    multihead_free(&m);
}

static void exercise4(void)
{
    section("Exercise 4");
    /*md
     * Contiguous: 4 beams of 4096 positions. Paged with sharing: the
     * prompt's 1000 positions are 62 full blocks (992 positions) shared by
     * all four, and the 63rd block, 8 rows of prompt, is copied by each
     * beam on its first write; each beam then holds its 8 + 50 = 58
     * positions of its own in $\lceil 58/16 \rceil = 4$ blocks. Without
     * sharing, each beam would hold $\lceil 1050/16 \rceil = 66$ blocks.
     */
    double shared = floor(1000.0 / 16) * 16;
    double own = ceil((1000.0 - shared + 50) / 16) * 16;
    printf("contiguous:               %5.0f positions\n", 4 * 4096.0);
    printf("paged, prefix shared:     %5.0f positions (%.0f shared + 4 x %.0f)\n",
           shared + 4 * own, shared, own);
    printf("paged, nothing shared:    %5.0f positions\n",
           4 * ceil(1050.0 / 16) * 16);
}

static void exercise5(void)
{
    section("Exercise 5");
    /*md
     * In a contiguous cache the $t$ keys of one head are one array: a
     * kernel streams them from memory in order. Through a table, only the
     * `block_size` keys of one block lie together; at each block's end
     * the kernel looks up the next entry and jumps. Larger blocks make
     * longer runs and shorter tables but waste more of each sequence's
     * last block (exercise 2). With this chapter's pool, one block of one
     * key-value head is `block_size` $\times p$ numbers in a row:
     */
    printf("block of 4 positions, p = 4: %d numbers in a row (%d bytes as "
           "doubles)\n", 4 * 4, 4 * 4 * 8);
    printf("block of 16, p = 128, 16-bit: %d numbers in a row (%d bytes)\n",
           16 * 128, 16 * 128 * 2);
    /*md
     * vLLM's kernels read a block of 16 positions of 128 features, 4 KiB
     * in a row per head, which is enough for the memory system; the
     * lookups cost little next to reading the keys themselves.
     */
}

KEY_MAIN(exercise1, exercise2, exercise3, exercise4, exercise5)
