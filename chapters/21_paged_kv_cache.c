/* Chapter 21: a paged key-value cache.
 *
 * vLLM's cache: keys and values in fixed-size blocks from one pool, a
 * block table per sequence, the slot mapping that says where a new
 * position is written.  Decodes a ragged batch through it and checks it
 * against chapter 16's contiguous cache, shares a prompt between two
 * sequences and copies a block on write, and compares the memory a
 * contiguous and a paged cache hold for a batch of ragged sequences.
 * Run it with `make ch21`; the book's page is docs/21_paged_kv_cache.md.
 */

/*md
 * Chapter 16's cache is one buffer per batch, `(B, G, capacity, p)`,
 * allocated before the first step for the longest sequence the batch may
 * reach. A server decoding many requests at once pays for that: each
 * request holds room for its maximum length whether it uses it or not,
 * requests of different lengths cannot share one buffer's rows, and two
 * requests that begin with the same prompt hold two copies of its keys
 * and values. [Kwon et al. 2023](https://arxiv.org/abs/2309.06180)
 * measured that such systems use only a fifth to two fifths of their
 * cache memory for keys and values actually computed; the rest is
 * *fragmentation*.
 *
 * Their answer, vLLM's *[paged attention](glossary.md#paged-attention)*, borrows
 * virtual memory's pages. The cache is a pool of fixed-size *blocks*, each
 * room for `block_size` positions of every key-value head. A sequence
 * owns a *block table*, the list of its blocks in order, and takes a new
 * block from a free list only when it reaches one. Attention reads each
 * key through the table. This chapter uses a module of $h = 4$ heads of
 * $p = 4$ features with $G = 2$ key-value heads ($d_{model} = 16$), and a
 * pool of 12 blocks of 4 positions.
 */

#include <math.h>
#include <string.h>

#include "lesson.h"

/* The module: H heads of P features, G key-value heads; the pool: NB
 * blocks of BS positions, room for NS sequences. */
enum { H = 4, P = 4, D = H * P, G = 2, NB = 12, BS = 4, NS = 4 };

/* Token t of sequence s: a fixed row of D numbers. */
static void token(double *row, size_t s, size_t t)
{
    for (size_t j = 0; j < D; j++)
        row[j] = sin(1.0 + 0.7 * (double)s + 1.3 * (double)t + 0.37 * (double)j);
}

typedef struct {
    multihead m;
    paged_cache c;
    kv_cache ref[NS]; /* chapter 16's cache for each sequence, the check */
    size_t id[NS], fed[NS];
} lesson;

static void print_tables(const paged_cache *c)
{
    for (size_t s = 0; s < c->max_seqs; s++) {
        const paged_seq *q = &c->seqs[s];
        if (!q->live)
            continue;
        printf("sequence %zu: %2zu positions, block table [", s, q->length);
        for (size_t j = 0; j < q->nblocks; j++)
            printf("%s%zu", j ? ", " : "", q->table[j]);
        printf("]\n");
    }
    printf("free blocks: %zu of %zu\n", c->n_free, c->num_blocks);
}

/* One step for the sequences seqs[0 .. B-1] (lesson numbers): their next
 * tokens through the paged cache and, each alone, through chapter 16's;
 * returns the largest difference of the outputs. */
static double step(lesson *l, const size_t *seqs, size_t B)
{
    tensor *x, *y;
    size_t ids[NS];
    CHECK(tensor_alloc(SHAPE(B, 1, D), &x));
    for (size_t b = 0; b < B; b++) {
        token(x->data + b * D, seqs[b], l->fed[seqs[b]]++);
        ids[b] = l->id[seqs[b]];
    }
    CHECK(paged_decode_step(&l->m, &l->c, ids, B, x, &y));
    int tracing = trace_on();
    trace_to(NULL);
    double worst = 0;
    for (size_t b = 0; b < B; b++) {
        tensor *xb, *yb, *pb;
        CHECK(tensor_narrow(x, 0, b, 1, &xb));
        CHECK(tensor_narrow(y, 0, b, 1, &pb));
        CHECK(kv_cache_decode_step(&l->m, &l->ref[seqs[b]], xb, &yb, NULL));
        worst = fmax(worst, largest_abs_diff(pb, yb));
        tensor_free(xb);
        tensor_free(yb);
        tensor_free(pb);
    }
    if (tracing)
        trace_to(stdout);
    tensor_free(x);
    tensor_free(y);
    return worst;
}

static void blocks_and_tables(lesson *l)
{
    section("1. Blocks, block tables and the slot mapping");
    /*md
     * The pool holds keys `(12, 2, 4, 4)`, `(blocks, G, block_size, p)`,
     * and values as large. Three sequences start, and each is fed a
     * prompt one position per step: sequence 0 gets 6 positions, 1 gets
     * 3, 2 gets 9 (they take turns in one batch while they last). A
     * sequence takes a block when its length reaches a multiple of 4, so
     * their tables grow to 2, 1 and 3 blocks, in the order the blocks were
     * asked for: a table says nothing about where its blocks are in the
     * pool.
     *
     * A sequence's positions fill the blocks of its table in turn,
     * `block_size` to a block and one to a row, and *slots* number the
     * pool's positions block after block: slot $s$ is row `s % block_size`
     * of block `s / block_size`. Where position $t$ of a sequence lives,
     * its slot, is the *slot mapping*, the whole trick, and this chapter's
     * exercise: with blocks of 4 and the table `[5, 2, 7]`, positions 0-3
     * are slots 20-23 and positions 4-7 slots 8-11. (Chapter 19's rolling
     * cache also had slots, its own $W$ rows, reused as the window moves;
     * vLLM's slots here are never reused while a sequence lives, and there
     * is one numbering for the whole pool.) A slot is a position, not a row
     * of memory: the pool keeps the key-value-head axis between block and
     * row, so head $g$'s key at slot $s$ starts at element
     * `((s / block_size * G + g) * block_size + s % block_size) * p`, and
     * the $G$ keys of one slot lie `block_size * p` numbers apart.
     *
     *
     * @show src/nn/paged.c paged_slot
     */
    const size_t prompt[3] = {6, 3, 9};
    double worst = 0;
    for (size_t t = 0; t < 9; t++) {
        size_t seqs[3], B = 0;
        for (size_t s = 0; s < 3; s++)
            if (t < prompt[s])
                seqs[B++] = s;
        worst = fmax(worst, step(l, seqs, B));
    }
    print_tables(&l->c);
    printf("\nwhere sequence 2 keeps its positions (slot = block * 4 + row):\n");
    const paged_seq *q = &l->c.seqs[l->id[2]];
    for (size_t t = 0; t < q->length; t++) {
        size_t slot;
        CHECK(paged_slot(q->table, q->nblocks, BS, t, &slot));
        printf("%s%zu", t ? " " : "  ", slot);
    }
    printf("\n\nequal to chapter 16's cache (largest difference below 1e-12): "
           "%s\n", yes_no(worst < 1e-12));
}

static void ragged_batch(lesson *l)
{
    section("2. Decoding a ragged batch");
    /*md
     * The three sequences now hold 6, 3 and 9 positions: a *ragged*
     * batch, which chapter 16's `(B, G, capacity, p)` buffer cannot hold
     * with one `length`. The paged cache decodes them in one step. Read
     * the trace of that step:
     *
     * - the projections are chapter 16's, one row per sequence, `(3, 1,
     *   16)` for the queries and `(3, 1, 8)`, $G \cdot p$, for keys and
     *   values;
     * - `rope` turns each query and key by its own sequence's position
     *   (chapter 15's rotary embeddings; this module is made with
     *   `.rope = 1`, as the models served from paged caches are): a key
     *   is stored turned, so no cached key is touched again;
     * - `slot mapping` gives each sequence the slot of its next position,
     *   `(3,)`: sequence 0 writes row 2 of its second block, sequence 1
     *   row 3 of its first, and sequence 2 row 1 of its third;
     * - `write K, V at the slots` copies the new keys and values into the
     *   pool, which the cache holds already: its `copy` means numbers
     *   moved, with no arithmetic, and its output is the pool itself,
     *   written in place, not a new buffer;
     * - `paged attention` runs each query head against its own sequence's
     *   7, 4 and 10 positions, reading every key and value at its slot
     *   through the block table, and gives `(3, 1, 16)`; then W_o.
     *
     * After the step the outputs are compared, sequence by sequence, with
     * chapter 16's contiguous cache fed the same tokens one sequence at a
     * time.
     *
     * @show src/nn/paged.c paged_decode_step
     *
     * @show src/nn/paged.c paged_attention
     *
     * The slots are planned before anything changes: `plan` writes down
     * each sequence's table as it will be (a new block when the sequence
     * starts one, a copy when its last block is shared, section 3) and
     * looks every position up through it, so that a step that cannot
     * finish leaves the cache as it was. Then `reserve` takes the blocks
     * it planned:
     *
     * @show src/nn/paged.c plan
     *
     * @show src/nn/paged.c reserve
     */
    trace_to(stdout);
    double worst = step(l, (size_t[]){0, 1, 2}, 3);
    trace_to(NULL);
    printf("\n");
    print_tables(&l->c);
    printf("\nequal to chapter 16's cache, sequence by sequence (largest "
           "difference below 1e-12): %s\n", yes_no(worst < 1e-12));
}

static void shared_prefix(lesson *l)
{
    section("3. A shared prefix, copied on write");
    /*md
     * Two answers sampled from one prompt, or a beam search, share the
     * prompt's keys and values. Here sequence 3 is forked from sequence
     * 0: its table is a copy of 0's table, and each of the two blocks now
     * counts two tables that hold it. Nothing is copied, and the pool
     * has as many free blocks as before.
     *
     * Sequence 0 holds 7 positions: its first block is full, its second
     * holds 3 rows. When sequence 3 writes its next position, into row 3
     * of that shared block, it would overwrite what sequence 0 may write
     * there. So the first write into a shared block that is partly filled
     * *copies* the block to a free one and points the writer's table at
     * the copy (copy on write). The full first block stays shared for
     * good: no one writes into it again.
     */
    size_t child;
    CHECK(paged_seq_fork(&l->c, l->id[0], &child));
    l->id[3] = child;
    // the reference for sequence 3: sequence 0's history fed again
    for (size_t t = 0; t < l->fed[0]; t++) {
        tensor *x, *y;
        CHECK(tensor_alloc(SHAPE(1, 1, D), &x));
        token(x->data, 0, t);
        CHECK(kv_cache_decode_step(&l->m, &l->ref[3], x, &y, NULL));
        tensor_free(x);
        tensor_free(y);
    }
    printf("after the fork:\n");
    print_tables(&l->c);
    const paged_seq *s0 = &l->c.seqs[l->id[0]];
    size_t b0 = s0->table[0], b1 = s0->table[1];
    printf("block %zu is held by %zu tables, block %zu by %zu\n", b0,
           l->c.refs[b0], b1, l->c.refs[b1]);
    // sequence 0's blocks as they are now
    size_t per_block = G * BS * P;
    double *before = malloc(4 * per_block * sizeof *before);
    if (!before)
        exit(1);
    const size_t mine[2] = {b0, b1};
    for (size_t i = 0; i < 2; i++) {
        memcpy(before + 2 * i * per_block, l->c.keys->data + mine[i] * per_block,
               per_block * sizeof *before);
        memcpy(before + (2 * i + 1) * per_block,
               l->c.values->data + mine[i] * per_block,
               per_block * sizeof *before);
    }
    // sequence 3 goes on, and 1 and 2 with it; sequence 0 waits
    l->fed[3] = 0;
    double worst = 0;
    for (size_t t = 0; t < 2; t++)
        worst = fmax(worst, step(l, (size_t[]){3, 1, 2}, 3));
    printf("\nafter two steps of sequences 3, 1 and 2:\n");
    print_tables(&l->c);
    int same = 1;
    for (size_t i = 0; i < 2; i++)
        same = same &&
               memcmp(before + 2 * i * per_block,
                      l->c.keys->data + mine[i] * per_block,
                      per_block * sizeof *before) == 0 &&
               memcmp(before + (2 * i + 1) * per_block,
                      l->c.values->data + mine[i] * per_block,
                      per_block * sizeof *before) == 0;
    printf("sequence 0's blocks %zu and %zu unchanged: %s\n", b0, b1,
           yes_no(same));
    worst = fmax(worst, step(l, (size_t[]){0}, 1));
    printf("equal to chapter 16's cache, sequences 3, 1, 2 and then 0 (largest "
           "difference below 1e-12): %s\n", yes_no(worst < 1e-12));
    free(before);
    /*md
     * Sequence 0 has now written its eighth position too, into its own
     * block, which the copy left it alone with. The picture draws the
     * tables as the last lines of the output below print them, the state
     * after that step:
     * each sequence's entries in order, an arrow from each entry to its
     * block in the pool, and the blocks that two tables hold (shaded),
     * with how many of their rows are filled.
     */
    printf("\nafter one step of sequence 0, the tables the picture draws:\n");
    print_tables(&l->c);
    for (size_t b = 0; b < l->c.num_blocks; b++)
        if (l->c.refs[b] > 1)
            printf("block %zu is held by %zu tables\n", b, l->c.refs[b]);
    char path[1024];
    snprintf(path, sizeof path, "%s/21_block_tables.dot", plots_dir());
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    CHECK(paged_write_dot(f, &l->c));
    if (fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
    announce_graph("21_block_tables");
}

static void memory(void)
{
    section("4. Memory: contiguous against paged");
    /*md
     * How much a cache holds for a batch of ragged sequences. Take
     * Llama 2 70B's shape (chapter 17: 320 KiB of keys and values per
     * position with $G = 8$) and a batch of 8 requests, whose lengths so
     * far the program prints first. A contiguous cache reserves the
     * model's context, 4096 positions, for each; a paged one holds
     * $\lceil \text{length} / 16 \rceil$ blocks of 16 positions (vLLM's
     * default block size) for each.
     */
    const double lens[8] = {1812, 97, 530, 4000, 23, 1250, 310, 2901};
    const double per_position = 2 * 80 * 8 * 128 * 2.0, context = 4096;
    const double block = 16;
    double used = 0, paged = 0;
    for (size_t i = 0; i < 8; i++) {
        used += lens[i];
        paged += ceil(lens[i] / block) * block;
    }
    printf("the 8 lengths:");
    for (size_t i = 0; i < 8; i++)
        printf(" %.0f", lens[i]);
    printf("\n\n");
    double contiguous = 8 * context;
    const char *labels[3] = {"keys and values", "paged (blocks of 16)",
                             "contiguous (4096 each)"};
    double gib[3] = {used, paged, contiguous};
    printf("%-24s %10s %12s %8s\n", "", "positions", "memory", "wasted");
    for (size_t i = 0; i < 3; i++) {
        char s[32];
        printf("%-24s %10.0f %12s %7.1f%%\n", labels[i], gib[i],
               bytes_str(gib[i] * per_position, s, sizeof s),
               100 * (gib[i] - used) / gib[i]);
        gib[i] *= per_position / (1024.0 * 1024 * 1024);
    }
    plot_options opt = {.title = "a batch of 8 ragged sequences, Llama 2 70B's "
                                 "shape, 16-bit",
                        .xlabel = "cache", .ylabel = "GiB"};
    printf("\n");
    announce_plot(plot_bars(labels, gib, 3, &opt, plot_base("21_memory"),
                            HEATMAP_PNG | HEATMAP_SVG),
                  "21_memory");
    /*md
     * The contiguous cache wastes more than half of its 10 GiB on rows no
     * sequence reached; the paged cache wastes only the unfilled ends of
     * the last blocks, under 16 positions a sequence. That difference is
     * what lets a server decode more requests at once in the same memory,
     * the gain Kwon et al. report (2-4 times the throughput).
     */
}

int main(void)
{
    mha_program_init();
    lesson l = {0};
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = H, .kv_heads = G,
                            .rope = 1};
    CHECK(multihead_init(&l.m, &cfg));
    gsl_rng *rng = mha_rng_new(21);
    if (!rng)
        exit(1);
    multihead_reset_xavier(&l.m, rng);
    gsl_rng_free(rng);
    CHECK(paged_cache_init(&l.c, NB, BS, G, P, NS));
    for (size_t s = 0; s < NS; s++)
        CHECK(kv_cache_init(&l.ref[s], 1, G, P, 16));
    for (size_t s = 0; s < 3; s++)
        CHECK(paged_seq_add(&l.c, &l.id[s]));
    blocks_and_tables(&l);
    ragged_batch(&l);
    shared_prefix(&l);
    memory();
    for (size_t s = 0; s < NS; s++)
        kv_cache_free(&l.ref[s]);
    paged_cache_free(&l.c);
    multihead_free(&l.m);
    return 0;
}

/*md
 * ## Exercises
 *
 * 1. Write `paged_slot` (`make grade EXERCISE=paged_slot`). Then make it
 *    return `pos` itself: which of this chapter's checks fail, and which
 *    would still pass if every table were `[0, 1, 2, ...]`?
 * 2. In section 4, how many positions would blocks of 1, 16 and 256
 *    waste? Why does vLLM not use blocks of 1 position?
 * 3. In section 3, suppose sequence 0, not 3, writes first after the
 *    fork. Which block is copied, and whose table changes?
 * 4. A beam search keeps 4 beams that share a prompt of 1000 positions
 *    and have each added 50 of their own. How many positions do a
 *    contiguous cache (room for 4096 per beam) and a paged cache with
 *    blocks of 16 and shared prefixes hold?
 * 5. `paged_attention` reads a key through the table at every position.
 *    What does it lose against a contiguous cache, where the keys of one
 *    head lie one after another, and how does the block size trade that
 *    against waste?
 */
