//> 21
/* test_paged.c: the paged key-value cache against chapter 16's
 * contiguous cache, sequence by sequence, over ragged batches (sequences
 * that start at different steps and so have different lengths), with and
 * without RoPE and with grouped key-value heads; a shared prefix and its
 * copy on write, which leaves the other sequence's blocks as they were;
 * the free list; the refusals, which change nothing; the picture.
 *
 * Shapes: x (B, 1, d_model) one position per sequence; out (B, 1,
 * d_model); the reference's caches (1, G, capacity, p), one per sequence. */
#include "check.h"

enum { D = 16, H = 4, P = D / H };

/* The module (G key-value heads, RoPE or not, Xavier weights drawn with
 * `seed`) and a paged cache for it of num_blocks blocks of block_size
 * positions, for at most max_seqs sequences. */
static void make_paged(multihead *m, paged_cache *c, size_t G, int rope,
                       unsigned long seed, size_t num_blocks,
                       size_t block_size, size_t max_seqs)
{
    SELF_MODULE(m, D, .num_hiddens = D, .num_heads = H, .kv_heads = G,
                .rope = rope);
    gsl_rng *r = rng_for_test(seed);
    multihead_reset_xavier(m, r);
    gsl_rng_free(r);
    OK(paged_cache_init(c, num_blocks, block_size, G, P, max_seqs));
}

/* Token t of sequence s: a fixed pseudo-random row. */
static void token(double *row, size_t s, size_t t)
{
    for (size_t j = 0; j < D; j++)
        row[j] = sin(1.0 + 0.7 * (double)s + 1.3 * (double)t + 0.37 * (double)j);
}

/* One step of the ragged batch x (B, 1, D) through the paged cache, row b
 * as sequence seqs[b], and each row alone through its contiguous cache
 * refs[b]: the largest difference of their outputs. */
static double step_both(multihead *m, paged_cache *c, const size_t *seqs,
                        kv_cache *const *refs, const tensor *x)
{
    size_t B = x->shape[0];
    tensor *y;
    OK(paged_decode_step(m, c, seqs, B, x, &y));
    double worst = 0;
    for (size_t b = 0; b < B; b++) {
        tensor *xb, *yb;
        OK(tensor_narrow(x, 0, b, 1, &xb));
        OK(kv_cache_decode_step(m, refs[b], xb, &yb, NULL));
        for (size_t j = 0; j < D; j++)
            worst = fmax(worst, fabs(y->data[b * D + j] - yb->data[j]));
        FREE_ALL(xb, yb);
    }
    tensor_free(y);
    return worst;
}

/* Sequence s starts at step start[s] and runs len[s] positions; every
 * step decodes the sequences that are running as one ragged batch through
 * the paged cache, and each alone through its own contiguous cache; their
 * outputs agree to 1e-12.  Returns the largest difference. */
static double ragged(size_t G, int rope, size_t block_size, size_t nseq,
                     const size_t *start, const size_t *len)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, G, rope, 11, 64, block_size, nseq);
    kv_cache ref[8];
    size_t id[8], steps = 0;
    for (size_t s = 0; s < nseq; s++) {
        OK(paged_seq_add(&c, &id[s]));
        OK(kv_cache_init(&ref[s], 1, G, P, len[s]));
        steps = start[s] + len[s] > steps ? start[s] + len[s] : steps;
    }
    double worst = 0;
    for (size_t step = 0; step < steps; step++) {
        size_t batch[8], B = 0;
        for (size_t s = 0; s < nseq; s++)
            if (step >= start[s] && step < start[s] + len[s])
                batch[B++] = s;
        if (B == 0)
            continue;
        tensor *x = zeros(SHAPE(B, 1, D));
        size_t seqs[8];
        kv_cache *refs[8];
        for (size_t b = 0; b < B; b++) {
            token(x->data + b * D, batch[b], step - start[batch[b]]);
            seqs[b] = id[batch[b]];
            refs[b] = &ref[batch[b]];
        }
        worst = fmax(worst, step_both(&m, &c, seqs, refs, x));
        tensor_free(x);
    }
    for (size_t s = 0; s < nseq; s++) {
        cr_assert_eq(c.seqs[id[s]].length, len[s]);
        kv_cache_free(&ref[s]);
    }
    paged_cache_free(&c);
    multihead_free(&m);
    return worst;
}

Test(paged, a_ragged_batch_equals_the_contiguous_cache)
{
    size_t start[] = {0, 2, 3, 7}, len[] = {9, 5, 11, 2};
    cr_assert_lt(ragged(4, 0, 4, 4, start, len), 1e-12);
    cr_assert_lt(ragged(2, 0, 3, 4, start, len), 1e-12);
    cr_assert_lt(ragged(1, 1, 4, 4, start, len), 1e-12);
    cr_assert_lt(ragged(2, 1, 1, 4, start, len), 1e-12); // one position a block
}

/* Blocks are taken as needed: ceil(length / block_size) per sequence. */
Test(paged, blocks_are_taken_as_sequences_reach_them)
{
    size_t start[] = {0}, len[] = {1};
    cr_assert_lt(ragged(4, 0, 4, 1, start, len), 1e-12);
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 0, 3, 8, 4, 2);
    size_t a, b;
    OK(paged_seq_add(&c, &a));
    OK(paged_seq_add(&c, &b));
    tensor *x = zeros(SHAPE(2, 1, D)), *y;
    for (size_t t = 0; t < 5; t++) {
        token(x->data, 0, t);
        token(x->data + D, 1, t);
        OK(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x, &y));
        tensor_free(y);
        // after t + 1 positions: ceil((t + 1) / 4) blocks each
        cr_assert_eq(c.seqs[a].nblocks, t / 4 + 1);
        cr_assert_eq(c.n_free, 8 - 2 * (t / 4 + 1));
    }
    // the blocks were taken in turn: a 0, b 1, then a 2, b 3
    cr_assert(c.seqs[a].table[0] == 0 && c.seqs[b].table[0] == 1 &&
              c.seqs[a].table[1] == 2 && c.seqs[b].table[1] == 3);
    OK(paged_seq_release(&c, a));
    cr_assert_eq(c.n_free, 6);
    FAILS(paged_seq_release(&c, a), GSL_EINVAL,
          "paged_seq_release: sequence 0 is not live (the cache holds 2)");
    tensor_free(x);
    paged_cache_free(&c);
    multihead_free(&m);
}

/* Sequence A writes 6 positions (blocks of 4: one full, one with 2 rows);
 * B is forked from it and both go on.  B's first write copies the shared
 * half-full block; A's blocks keep their numbers, bit for bit; and each
 * sequence's outputs equal a contiguous cache fed its whole history. */
Test(paged, a_shared_prefix_is_copied_on_write)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 1, 5, 8, 4, 2);
    kv_cache ra, rb;
    OK(kv_cache_init(&ra, 1, 2, P, 12));
    OK(kv_cache_init(&rb, 1, 2, P, 12));
    size_t a, b;
    OK(paged_seq_add(&c, &a));
    tensor *x1 = zeros(SHAPE(1, 1, D)), *y, *yr;
    for (size_t t = 0; t < 6; t++) { // the shared prompt
        token(x1->data, 0, t);
        OK(paged_decode_step(&m, &c, &a, 1, x1, &y));
        OK(kv_cache_decode_step(&m, &ra, x1, &yr, NULL));
        tensor_free(yr);
        OK(kv_cache_decode_step(&m, &rb, x1, &yr, NULL));
        FREE_ALL(yr, y);
    }
    OK(paged_seq_fork(&c, a, &b));
    cr_assert_eq(c.seqs[b].length, 6);
    size_t a0 = c.seqs[a].table[0], a1 = c.seqs[a].table[1];
    cr_assert(c.seqs[b].table[0] == a0 && c.seqs[b].table[1] == a1);
    cr_assert(c.refs[a0] == 2 && c.refs[a1] == 2);
    cr_assert_eq(c.n_free, 6); // forking copies nothing
    // A's blocks as they are now
    size_t per_block = 2 * 4 * P;
    double *before = malloc(2 * 2 * per_block * sizeof *before);
    const size_t blocks[2] = {a0, a1};
    for (size_t i = 0; i < 2; i++) {
        memcpy(before + (2 * i) * per_block, c.keys->data + blocks[i] * per_block,
               per_block * sizeof *before);
        memcpy(before + (2 * i + 1) * per_block,
               c.values->data + blocks[i] * per_block, per_block * sizeof *before);
    }
    // B goes on alone for 3 positions: its first write copies block a1
    double worst = 0;
    for (size_t t = 0; t < 3; t++) {
        token(x1->data, 1, t);
        worst = fmax(worst, step_both(&m, &c, &b, (kv_cache *[]){&rb}, x1));
    }
    cr_assert_lt(worst, 1e-12);
    cr_assert_eq(c.seqs[b].table[0], a0); // the full block is still shared
    cr_assert_neq(c.seqs[b].table[1], a1); // the half-full one was copied
    cr_assert(c.refs[a0] == 2 && c.refs[a1] == 1);
    cr_assert(c.seqs[a].table[0] == a0 && c.seqs[a].table[1] == a1);
    for (size_t i = 0; i < 2; i++) {
        cr_assert(memcmp(before + (2 * i) * per_block,
                         c.keys->data + blocks[i] * per_block,
                         per_block * sizeof *before) == 0,
                  "the keys of A's block %zu changed", blocks[i]);
        cr_assert(memcmp(before + (2 * i + 1) * per_block,
                         c.values->data + blocks[i] * per_block,
                         per_block * sizeof *before) == 0,
                  "the values of A's block %zu changed", blocks[i]);
    }
    // A goes on: it writes into its own block a1 and matches its history
    for (size_t t = 6; t < 9; t++) {
        token(x1->data, 0, t);
        worst = fmax(worst, step_both(&m, &c, &a, (kv_cache *[]){&ra}, x1));
    }
    cr_assert_lt(worst, 1e-12);
    cr_assert_eq(c.seqs[a].table[1], a1);
    // releasing A frees a1 and its third block, not the shared a0
    size_t free_before = c.n_free;
    OK(paged_seq_release(&c, a));
    cr_assert_eq(c.n_free, free_before + 2);
    cr_assert_eq(c.refs[a0], 1);
    free(before);
    tensor_free(x1);
    kv_cache_free(&ra);
    kv_cache_free(&rb);
    paged_cache_free(&c);
    multihead_free(&m);
}

/* A ragged batch with shared prefixes: sequences 0 and 1 run, 2 is
 * forked from 0 after 5 positions and 3 from 2 after 2 more, and from
 * then on parent and children decode in the same steps (the first of
 * them to write into a shared block copies it).  Each equals a
 * contiguous cache fed its whole history, to 1e-12, and the blocks a
 * sequence stopped sharing are never written by the other. */
Test(paged, ragged_batches_with_shared_prefixes)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 1, 13, 40, 3, 4);
    kv_cache ref[4];
    size_t id[4], fed[4] = {0}, hist[4][32], nhist[4] = {0};
    for (size_t s = 0; s < 4; s++)
        OK(kv_cache_init(&ref[s], 1, 2, P, 32));
    OK(paged_seq_add(&c, &id[0]));
    OK(paged_seq_add(&c, &id[1]));
    int live[4] = {1, 1, 0, 0};
    double worst = 0;
    for (size_t step = 0; step < 14; step++) {
        if (step == 5 || step == 7) { // fork: 2 from 0, then 3 from 2
            size_t child = step == 5 ? 2 : 3, parent = child - (step == 5 ? 2 : 1);
            OK(paged_seq_fork(&c, id[parent], &id[child]));
            live[child] = 1;
            // the child's reference is fed the parent's history
            for (size_t t = 0; t < nhist[parent]; t++) {
                tensor *x = zeros(SHAPE(1, 1, D)), *y;
                token(x->data, hist[parent][t] / 100, hist[parent][t] % 100);
                OK(kv_cache_decode_step(&m, &ref[child], x, &y, NULL));
                FREE_ALL(x, y);
                hist[child][nhist[child]++] = hist[parent][t];
            }
            fed[child] = 0;
        }
        size_t batch[4], B = 0;
        for (size_t s = 0; s < 4; s++)
            if (live[s] && !(s == 1 && step % 3 == 2)) // 1 skips a step now and then
                batch[B++] = s;
        tensor *x = zeros(SHAPE(B, 1, D));
        size_t seqs[4];
        kv_cache *refs[4];
        for (size_t b = 0; b < B; b++) {
            size_t s = batch[b], tok = 10 + s; // a token stream of its own
            token(x->data + b * D, tok, fed[s]);
            hist[s][nhist[s]++] = tok * 100 + fed[s]++;
            seqs[b] = id[s];
            refs[b] = &ref[s];
        }
        worst = fmax(worst, step_both(&m, &c, seqs, refs, x));
        tensor_free(x);
    }
    cr_assert_lt(worst, 1e-12);
    // the first block of 0 is still held by 0, 2 and 3
    cr_assert_eq(c.refs[c.seqs[id[0]].table[0]], 3);
    for (size_t s = 0; s < 4; s++)
        kv_cache_free(&ref[s]);
    paged_cache_free(&c);
    multihead_free(&m);
}

/* The pool's and the live tables' books, to hold a failed step to
 * "nothing changes": how many blocks are free, each block's count, and
 * each live sequence's length and table. */
typedef struct books_copy {
    size_t n_free, refs[16], length[4], nblocks[4], table[4][16];
} books_copy;

static books_copy books_of(const paged_cache *c)
{
    books_copy k;
    memset(&k, 0, sizeof k);
    cr_assert(c->num_blocks <= 16 && c->max_seqs <= 4);
    k.n_free = c->n_free;
    memcpy(k.refs, c->refs, c->num_blocks * sizeof *c->refs);
    for (size_t s = 0; s < c->max_seqs; s++)
        if (c->seqs[s].live) {
            k.length[s] = c->seqs[s].length;
            k.nblocks[s] = c->seqs[s].nblocks;
            memcpy(k.table[s], c->seqs[s].table,
                   c->seqs[s].nblocks * sizeof(size_t));
        }
    return k;
}

/* Each allocation of a step with RoPE failed in turn while a log listens:
 * GSL_ENOMEM, no output, the trace listening again at depth 0, and the
 * cache's books as they were, whether the step takes a new block, writes
 * into a block of its own, or copies a shared block first (a fork's);
 * nothing leaked (valgrind and ASan check that). */
Test(paged, allocation_failures_leave_the_trace_listening)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 1, 5, 16, 2, 3);
    size_t a, b, f;
    OK(paged_seq_add(&c, &a));
    OK(paged_seq_add(&c, &b));
    tensor *x, *y;
    OK(tensor_alloc(SHAPE(2, 1, D), &x));
    trace_log log;
    trace_log_start(&log);
    int failures;
    for (size_t t = 0; t < 4; t++) {
        size_t seqs[2] = {a, b};
        if (t == 3) { // a's last block half full, shared with its fork
            OK(paged_seq_fork(&c, a, &f));
            seqs[1] = f;
        }
        token(x->data, 0, t);
        token(x->data + D, 1, t);
        books_copy before = books_of(&c);
        EACH_ALLOCATION_FAILS(failures,
            paged_decode_step(&m, &c, seqs, 2, x, &y),
            cr_assert_null(y);
            assert_trace_listens(&log);
            books_copy now = books_of(&c);
            cr_assert(memcmp(&now, &before, sizeof now) == 0,
                      "step %zu: a failed step changed the cache", t));
        cr_assert_gt(failures, 10);
        tensor_free(y);
    }
    cr_assert_eq(c.seqs[a].length, 4);
    cr_assert_eq(c.seqs[f].length, 4);
    cr_assert_neq(c.seqs[a].table[1], c.seqs[f].table[1]); // copied on write
    trace_log_stop(&log);
    trace_log_free(&log);
    tensor_free(x);
    paged_cache_free(&c);
    multihead_free(&m);
}

/* A step that fails after its blocks were taken and K, V written (an
 * output that overflows, found by the result's check) puts the books
 * back: the next step sees the cache as it was and gives the output it
 * would have given. */
Test(paged, a_step_failing_late_changes_nothing)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 0, 5, 4, 2, 2);
    size_t a, b;
    OK(paged_seq_add(&c, &a));
    OK(paged_seq_add(&c, &b));
    tensor *x, *y = NULL, *want = NULL;
    OK(tensor_alloc(SHAPE(2, 1, D), &x));
    token(x->data, 0, 0);
    token(x->data + D, 1, 0);
    OK(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x, &y));
    tensor_free(y);
    y = NULL;
    token(x->data, 0, 1);
    token(x->data + D, 1, 1);
    books_copy before = books_of(&c);
    tensor *huge = full(SHAPE(2, 1, D), 1e200); // scores overflow to inf
    cr_assert_neq(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, huge, &y),
                  GSL_SUCCESS);
    cr_assert_null(y);
    tensor_free(huge);
    books_copy now = books_of(&c);
    cr_assert(memcmp(&now, &before, sizeof now) == 0,
              "the failed step changed the cache's books");
    OK(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x, &want));
    cr_assert_eq(c.seqs[a].length, 2);
    cr_assert_eq(c.seqs[b].length, 2);
    /* the same step on a fresh cache fed the same two tokens */
    paged_cache fresh;
    OK(paged_cache_init(&fresh, 4, 2, 2, P, 2));
    size_t fa, fb;
    OK(paged_seq_add(&fresh, &fa));
    OK(paged_seq_add(&fresh, &fb));
    token(x->data, 0, 0);
    token(x->data + D, 1, 0);
    OK(paged_decode_step(&m, &fresh, (size_t[]){fa, fb}, 2, x, &y));
    tensor_free(y);
    token(x->data, 0, 1);
    token(x->data + D, 1, 1);
    OK(paged_decode_step(&m, &fresh, (size_t[]){fa, fb}, 2, x, &y));
    for (size_t i = 0; i < tensor_numel(y); i++)
        cr_assert_eq(y->data[i], want->data[i], "output %zu", i);
    paged_cache_free(&fresh);
    FREE_ALL(x, y, want);
    paged_cache_free(&c);
    multihead_free(&m);
}

Test(paged, refusals_change_nothing)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 0, 9, 2, 2, 3);
    size_t a, b;
    OK(paged_seq_add(&c, &a));
    OK(paged_seq_add(&c, &b));
    tensor *x2 = full(SHAPE(2, 1, D), 0.5), *x1 = full(SHAPE(1, 1, D), 0.25);
    tensor *y = NULL;
    OK(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x2, &y)); // a block each
    tensor_free(y);
    y = NULL;
    OK(paged_decode_step(&m, &c, &a, 1, x1, &y));
    tensor_free(y);
    y = NULL;
    // both blocks are in use, a's is full: a needs a third
    double *pool = malloc(tensor_numel(c.keys) * sizeof *pool);
    memcpy(pool, c.keys->data, tensor_numel(c.keys) * sizeof *pool);
    FAILS(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x2, &y), GSL_ENOMEM,
          "paged_decode_step: out of blocks: the step needs 1 free block, the "
          "pool has 0 of 2");
    cr_assert_null(y);
    cr_assert(c.seqs[a].length == 2 && c.seqs[b].length == 1 && c.n_free == 0);
    cr_assert(memcmp(pool, c.keys->data, tensor_numel(c.keys) * sizeof *pool) == 0);
    FAILS(paged_decode_step(&m, &c, (size_t[]){a, a}, 2, x2, &y), GSL_EINVAL,
          "paged_decode_step: sequence 0 is given twice (rows 0 and 1 of x)");
    FAILS(paged_decode_step(&m, &c, (size_t[]){2}, 1, x1, &y), GSL_EINVAL,
          "paged_decode_step: sequence 2 is not live (the cache holds 3)");
    FAILS(paged_decode_step(&m, &c, &b, 1, x2, &y), GSL_EBADLEN,
          "paged_decode_step: x is (2, 1, 16), expected (1, 1, 16): one new "
          "position for each of the 1 sequences");
    paged_cache other;
    OK(paged_cache_init(&other, 2, 2, 4, P, 1));
    size_t o;
    OK(paged_seq_add(&other, &o));
    FAILS(paged_decode_step(&m, &other, &o, 1, x1, &y), GSL_EBADLEN,
          "paged_decode_step: the pool holds G 4 heads of p 4 but the module "
          "has G 2, p 4");
    cr_assert_null(y);
    paged_cache_free(&other);
    FAILS(paged_cache_init(&other, 2, 0, 4, P, 1), GSL_EINVAL,
          "paged_cache_init: num_blocks 2, block_size 0, kv_heads 4, "
          "head_size 4 and max_seqs 1 must all be >= 1");
    size_t s3, s4;
    OK(paged_seq_add(&c, &s3));
    FAILS(paged_seq_add(&c, &s4), GSL_EINVAL,
          "paged_seq_add: all 3 sequences are in use");
    FAILS(paged_seq_fork(&c, a, &s4), GSL_EINVAL,
          "paged_seq_fork: all 3 sequences are in use");
    cr_assert_eq(c.refs[c.seqs[a].table[0]], 1); // the failed fork shared nothing
    free(pool);
    FREE_ALL(x1, x2);
    paged_cache_free(&c);
    multihead_free(&m);
}

Test(paged, the_slot_mapping_in_the_trace_and_the_picture)
{
    multihead m;
    paged_cache c;
    make_paged(&m, &c, 2, 0, 9, 6, 2, 2);
    size_t a, b;
    OK(paged_seq_add(&c, &a));
    tensor *x1 = full(SHAPE(1, 1, D), 0.5), *x2 = full(SHAPE(2, 1, D), 0.5);
    tensor *y;
    for (int t = 0; t < 3; t++) { // a: blocks 0 (full) and 1 (one row)
        OK(paged_decode_step(&m, &c, &a, 1, x1, &y));
        tensor_free(y);
    }
    OK(paged_seq_fork(&c, a, &b));
    trace_log log;
    trace_log_start(&log);
    OK(paged_decode_step(&m, &c, (size_t[]){a, b}, 2, x2, &y));
    trace_log_stop(&log);
    // a writes row 1 of a copy of block 1 (block 2, slot 5); b then owns
    // block 1 alone and writes its row 1 (slot 3)
    cr_assert(c.seqs[a].table[1] == 2 && c.seqs[b].table[1] == 1);
    int found = 0;
    for (size_t i = 0; i < log.count; i++)
        if (strcmp(log.records[i].op, "slot mapping") == 0)
            found = 1;
    cr_assert(found);
    trace_log_free(&log);
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    OK(paged_write_dot(f, &c));
    fclose(f);
    HOLDS(text,
          "seq0:e0 -> block0;\n  seq0:e1 -> block2;\n"
          "  seq1:e0 -> block0;\n  seq1:e1 -> block1;\n",
          "label=\"block 0\\n2 of 2 rows, shared\"",
          "label=\"block 2\\n2 of 2 rows\"");
    free(text);
    FREE_ALL(y, x1, x2);
    paged_cache_free(&c);
    multihead_free(&m);
}
//<
