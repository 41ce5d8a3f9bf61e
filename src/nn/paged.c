//> 21
/* paged.c: the paged key-value cache and a decoding step through it; see
 * paged.h.
 *
 * Shapes: pool keys, values (num_blocks, G, bs, p), contiguous, so that
 * key-value head g of slot s = block * bs + off starts at
 * ((block * G + g) * bs + off) * p; B sequences, one new position each;
 * x (B, 1, d_q); Q (B, 1, h*p); K, V (B, 1, G*p); heads (B, 1, h*p).
 */
#include "nn/paged.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "nn/kvcache.h"
#include "nn/linear.h"
#include "tensor/tensor_trace.h"

int paged_cache_init(paged_cache *c, size_t num_blocks, size_t block_size,
                     size_t kv_heads, size_t head_size, size_t max_seqs)
{
    const char *who = "paged_cache_init";
    memset(c, 0, sizeof *c);
    int status = MHA_CHECK_SIZES(who,
                                 "num_blocks, block_size, kv_heads, "
                                 "head_size, max_seqs",
                                 num_blocks, block_size, kv_heads, head_size,
                                 max_seqs);
    if (status)
        return status;
    // the sizes first: max_seqs for paged_cache_free, before any failure
    *c = (paged_cache){.num_blocks = num_blocks, .block_size = block_size,
                       .kv_heads = kv_heads, .head_size = head_size,
                       .max_seqs = max_seqs};
    STEP(kv_storage_alloc(num_blocks, kv_heads, block_size, head_size,
                          "blocks, G, block_size, d_model/h", &c->keys,
                          &c->values));
    c->refs = mha_calloc(num_blocks, sizeof *c->refs, who);
    c->free_list = mha_malloc(num_blocks, sizeof *c->free_list, who);
    c->seqs = mha_calloc(max_seqs, sizeof *c->seqs, who);
    status = c->refs && c->free_list && c->seqs ? GSL_SUCCESS : GSL_ENOMEM;
    for (size_t s = 0; !status && s < max_seqs; s++) {
        c->seqs[s].table = mha_malloc(num_blocks, sizeof *c->seqs[s].table, who);
        if (!c->seqs[s].table)
            status = GSL_ENOMEM;
    }
done:
    if (status) {
        paged_cache_free(c);
        return status;
    }
    // block 0 is taken first: the stack holds num_blocks-1 .. 0
    for (size_t i = 0; i < num_blocks; i++)
        c->free_list[i] = num_blocks - 1 - i;
    c->n_free = num_blocks;
    return GSL_SUCCESS;
}

void paged_cache_free(paged_cache *c)
{
    for (size_t s = 0; c->seqs && s < c->max_seqs; s++)
        free(c->seqs[s].table);
    free(c->seqs);
    free(c->refs);
    free(c->free_list);
    tensor_free(c->keys);
    tensor_free(c->values);
    memset(c, 0, sizeof *c);
}

/* A free sequence number into *seq. */
static int new_seq(paged_cache *c, const char *who, size_t *seq)
{
    for (size_t s = 0; s < c->max_seqs; s++)
        if (!c->seqs[s].live) {
            c->seqs[s].live = 1;
            c->seqs[s].length = c->seqs[s].nblocks = 0;
            *seq = s;
            return GSL_SUCCESS;
        }
    return mha_fail(GSL_EINVAL, "%s: all %zu sequences are in use", who,
                    c->max_seqs);
}

static int check_live(const paged_cache *c, const char *who, size_t seq)
{
    if (seq >= c->max_seqs || !c->seqs[seq].live)
        return mha_fail(GSL_EINVAL,
                        "%s: sequence %zu is not live (the cache holds %zu)",
                        who, seq, c->max_seqs);
    return GSL_SUCCESS;
}

int paged_seq_add(paged_cache *c, size_t *seq)
{
    return new_seq(c, "paged_seq_add", seq);
}

int paged_seq_fork(paged_cache *c, size_t parent, size_t *child)
{
    const char *who = "paged_seq_fork";
    int status = GSL_SUCCESS;
    STEP(check_live(c, who, parent));
    STEP(new_seq(c, who, child));
    paged_seq *p = &c->seqs[parent], *s = &c->seqs[*child];
    // the child's table is the parent's: every block now has one more holder
    memcpy(s->table, p->table, p->nblocks * sizeof *s->table);
    s->nblocks = p->nblocks;
    s->length = p->length;
    for (size_t j = 0; j < s->nblocks; j++)
        c->refs[s->table[j]]++;
done:
    return status;
}

int paged_seq_release(paged_cache *c, size_t seq)
{
    int status = check_live(c, "paged_seq_release", seq);
    if (status)
        return status;
    paged_seq *s = &c->seqs[seq];
    for (size_t j = s->nblocks; j-- > 0;)
        if (--c->refs[s->table[j]] == 0)
            c->free_list[c->n_free++] = s->table[j];
    s->live = 0;
    s->length = s->nblocks = 0;
    return GSL_SUCCESS;
}

/* The slot mapping: where position pos of a sequence lives in the pool.
 * What the tests check (ex_paged_slot), against slots written out by
 * hand:
 * - the slot of every position: the sequence's positions fill the blocks
 *   of its table in turn, block_size to a block and one to a row (blocks
 *   of 4, the table [5, 2, 7]: positions 0-3 are slots 20-23, rows 0-3 of
 *   block 5; positions 4-7 are slots 8-11, in block 2), not pos itself,
 *   nor table[pos];
 * - the last position of a block and the first of the next land in
 *   different blocks, wherever those are in the pool;
 * - block_size 0, or a pos past the table (pos >= nblocks * block_size):
 *   GSL_EINVAL and a message that starts with "paged_slot" and names pos
 *   and the positions the table covers, *slot left alone.
 * The handout blanks this body:
 * @exercise paged_slot (chapter 21): where a position lives in the pool. */
int paged_slot(const size_t *table, size_t nblocks, size_t block_size,
               size_t pos, size_t *slot)
{
    if (block_size == 0 || pos >= nblocks * block_size)
        return mha_fail(GSL_EINVAL,
                        "paged_slot: position %zu is past the table's %zu "
                        "blocks of %zu (%zu positions)",
                        pos, nblocks, block_size, nblocks * block_size);
    // the block that holds pos, then the row inside it
    size_t block = table[pos / block_size];
    *slot = block * block_size + pos % block_size;
    return GSL_SUCCESS;
}

/* --- a decoding step ------------------------------------------------ */

/* What sequence s's next position takes from the free list: 0 nothing
 * (it goes on in its own last block), 1 a new block (it starts one), 2
 * a copy of its last block (another table holds that block too).
 * released[b] counts the tables that stopped holding block b earlier in
 * the same step (they copied it): a block shared by two is copied by the
 * first that writes and then belongs to the other alone. */
static int take(const paged_cache *c, const paged_seq *s, size_t *released)
{
    if (s->length % c->block_size == 0)
        return 1;
    size_t last = s->table[s->nblocks - 1];
    if (c->refs[last] - released[last] > 1) {
        released[last]++;
        return 2;
    }
    return 0;
}

/* Where sequence s's next position will go, before anything changes:
 * its table as it will be (a new block, or a copy of its shared last
 * block, take's answer with released, taken from the free list at
 * *next_free, counted down), every
 * position 0 .. length looked up through it with paged_slot and found in
 * the pool, and *slot the new one.  scratch has room for num_blocks
 * entries. */
static int plan(const paged_cache *c, const paged_seq *s, size_t *next_free,
                size_t *released, size_t *scratch, size_t *slot)
{
    size_t bs = c->block_size, n = s->nblocks;
    memcpy(scratch, s->table, n * sizeof *scratch);
    int kind = take(c, s, released);
    if (kind == 1)
        scratch[n++] = c->free_list[--*next_free];
    else if (kind == 2)
        scratch[n - 1] = c->free_list[--*next_free];
    for (size_t t = 0; t <= s->length; t++) {
        int status = paged_slot(scratch, n, bs, t, slot);
        if (status)
            return mha_fail_in(status, "paged_decode_step");
        if (*slot >= c->num_blocks * bs)
            return mha_fail(GSL_EFAILED,
                            "paged_decode_step: paged_slot put position %zu "
                            "at slot %zu, past the pool's %zu",
                            t, *slot, c->num_blocks * bs);
    }
    return GSL_SUCCESS;
}

/* Room for sequence s's next position, as plan foresaw: a new block, or
 * its shared last block copied (the other tables keep the original). */
static void reserve(paged_cache *c, paged_seq *s)
{
    size_t bs = c->block_size, per_block = c->kv_heads * bs * c->head_size;
    if (s->length % bs == 0) {
        size_t b = c->free_list[--c->n_free];
        c->refs[b] = 1;
        s->table[s->nblocks++] = b;
    } else if (c->refs[s->table[s->nblocks - 1]] > 1) {
        size_t old = s->table[s->nblocks - 1], b = c->free_list[--c->n_free];
        memcpy(c->keys->data + b * per_block, c->keys->data + old * per_block,
               per_block * sizeof(double));
        memcpy(c->values->data + b * per_block,
               c->values->data + old * per_block, per_block * sizeof(double));
        c->refs[old]--;
        c->refs[b] = 1;
        s->table[s->nblocks - 1] = b;
    }
    s->length++;
}

static int check_step(const multihead *m, const paged_cache *c,
                      const size_t *seqs, size_t B, const tensor *x)
{
    const char *who = "paged_decode_step";
    const multihead_config *cfg = &m->cfg;
    if (!x || !seqs || !c || !c->keys)
        return mha_fail(GSL_EINVAL, "%s: x, seqs or the cache is NULL", who);
    if (cfg->query_size != cfg->key_size || cfg->query_size != cfg->value_size)
        return mha_fail(GSL_EINVAL,
                        "%s: decoding is self-attention, but the module has "
                        "query_size %zu, key_size %zu, value_size %zu",
                        who, cfg->query_size, cfg->key_size, cfg->value_size);
    char xs[TRACE_SHAPE_MAX];
    tensor_shape_str(x, xs, sizeof xs);
    if (x->ndim != 3 || x->shape[0] != B || x->shape[1] != 1 ||
        x->shape[2] != cfg->query_size)
        return mha_fail(GSL_EBADLEN,
                        "%s: x is %s, expected (%zu, 1, %zu): one new position "
                        "for each of the %zu sequences",
                        who, xs, B, cfg->query_size, B);
    size_t p = cfg->num_hiddens / cfg->num_heads;
    if (c->kv_heads != cfg->kv_heads || c->head_size != p)
        return mha_fail(GSL_EBADLEN,
                        "%s: the pool holds G %zu heads of p %zu but the "
                        "module has G %zu, p %zu",
                        who, c->kv_heads, c->head_size, cfg->kv_heads, p);
    for (size_t b = 0; b < B; b++) {
        int status = check_live(c, who, seqs[b]);
        if (status)
            return status;
        for (size_t a = 0; a < b; a++)
            if (seqs[a] == seqs[b])
                return mha_fail(GSL_EINVAL,
                                "%s: sequence %zu is given twice (rows %zu and "
                                "%zu of x)",
                                who, seqs[b], a, b);
    }
    int status = tensor_check_finite(x, who, "x");
    // the layers as they were made: the step calls their steps, which
    // check nothing
    const linear *layers[] = {&m->W_q, &m->W_k, &m->W_v, &m->W_o};
    for (size_t i = 0; i < 4 && !status; i++)
        status = linear_check(who, layers[i], i < 3 ? x : NULL);
    return status;
}

/* Step 5 for sequence b, query head i: heads[b, 0, i*p ..] = the
 * softmax-weighted sum of the values of key-value head g over positions
 * 0 .. len-1, every key and value read at its slot. */
static void paged_attention(const paged_cache *c, const paged_seq *s,
                            const double *q, size_t g, size_t p, double *out,
                            double *scores)
{
    size_t G = c->kv_heads, bs = c->block_size, len = s->length;
    double top = -INFINITY, sum = 0;
    for (size_t t = 0; t < len; t++) {
        size_t slot = 0; // plan found every position's slot
        paged_slot(s->table, s->nblocks, bs, t, &slot);
        const double *k = c->keys->data +
                          (((slot / bs) * G + g) * bs + slot % bs) * p;
        double dot = 0;
        for (size_t j = 0; j < p; j++)
            dot += q[j] * k[j];
        scores[t] = dot / sqrt((double)p);
        top = fmax(top, scores[t]);
    }
    for (size_t t = 0; t < len; t++)
        sum += scores[t] = exp(scores[t] - top);
    for (size_t j = 0; j < p; j++)
        out[j] = 0;
    for (size_t t = 0; t < len; t++) {
        size_t slot = 0; // plan found every position's slot
        paged_slot(s->table, s->nblocks, bs, t, &slot);
        const double *v = c->values->data +
                          (((slot / bs) * G + g) * bs + slot % bs) * p;
        for (size_t j = 0; j < p; j++)
            out[j] += scores[t] / sum * v[j];
    }
}

/* Step 2 for a ragged batch: row b of *x turned to position start[b]. */
static int rope_rows(const multihead *m, tensor **x, const size_t *start,
                     const char *name)
{
    size_t B = (*x)->shape[0];
    int status = GSL_SUCCESS;
    for (size_t b = 0; b < B && !status; b++) {
        // multihead_rope replaces its argument: turned starts as a second
        // view of the row, row stays to be written back into
        tensor *row = NULL, *turned = NULL;
        status = tensor_narrow(*x, 0, b, 1, &row);
        if (!status)
            status = tensor_narrow(*x, 0, b, 1, &turned);
        if (!status)
            status = multihead_rope(m, &turned, (long)start[b],
                                    "paged_decode_step", name);
        if (!status)
            status = tensor_copy_into(row, turned);
        tensor_free(turned);
        tensor_free(row);
    }
    return status;
}

/* The pool's and the tables' books as they were before a step reserved
 * its blocks, so that a step that fails after (W_o, the result's check)
 * puts them back and nothing changes on failure.  The numbers it wrote
 * went to blocks that are free again or past a sequence's length:
 * nobody's. */
typedef struct books {
    size_t n_free;
    size_t *refs;                    /* (num_blocks,) */
    size_t *length, *nblocks, *last; /* (B,) each: last, the last entry */
} books;

static void books_keep(const paged_cache *c, const size_t *seqs, size_t B,
                       books *k)
{
    k->n_free = c->n_free;
    memcpy(k->refs, c->refs, c->num_blocks * sizeof *k->refs);
    for (size_t b = 0; b < B; b++) {
        const paged_seq *s = &c->seqs[seqs[b]];
        k->length[b] = s->length;
        k->nblocks[b] = s->nblocks;
        k->last[b] = s->nblocks ? s->table[s->nblocks - 1] : 0;
    }
}

static void books_restore(paged_cache *c, const size_t *seqs, size_t B,
                          const books *k)
{
    c->n_free = k->n_free; // reserve only takes from the free list's end
    memcpy(c->refs, k->refs, c->num_blocks * sizeof *c->refs);
    for (size_t b = 0; b < B; b++) {
        paged_seq *s = &c->seqs[seqs[b]];
        s->length = k->length[b];
        s->nblocks = k->nblocks[b];
        if (s->nblocks)
            s->table[s->nblocks - 1] = k->last[b];
    }
}

int paged_decode_step(multihead *m, paged_cache *c, const size_t *seqs,
                      size_t B, const tensor *x, tensor **out)
{
    const char *who = "paged_decode_step";
    *out = NULL;
    int status = check_step(m, c, seqs, B, x);
    if (status)
        return status;
    size_t h = m->cfg.num_heads, G = c->kv_heads, p = c->head_size;
    size_t d_q = m->cfg.query_size, d_model = m->cfg.num_hiddens; // = h*p
    tensor x_in = tensor_named(x, NAMES(B, 1, d_q));
    SCOPE_OF(TRACE_INPUTS(TRACE_NAMED(x, "x")),
             "paged_decode_step(h=%zu, G=%zu, %zu sequences)", h, G, B);
    tensor *q = NULL, *k = NULL, *v = NULL, *slots = NULL, *heads = NULL;
    size_t *start = mha_malloc(B, sizeof *start, who);
    size_t longest = 1;
    for (size_t b = 0; start && b < B; b++) {
        start[b] = c->seqs[seqs[b]].length;
        longest = start[b] + 1 > longest ? start[b] + 1 : longest;
    }
    double *scores = mha_malloc(longest, sizeof *scores, who);
    size_t *slot = mha_malloc(B, sizeof *slot, who);
    size_t *scratch = mha_malloc(c->num_blocks, sizeof *scratch, who);
    size_t *released = mha_calloc(c->num_blocks, sizeof *released, who);
    size_t *kept = mha_malloc(3 * B, sizeof *kept, who);
    books before = {0, scratch, kept, kept + B, kept + 2 * B};
    int reserved = 0;
    status = start && scores && slot && scratch && released && kept
                 ? GSL_SUCCESS
                 : GSL_ENOMEM;
    if (status)
        goto done;
    // 3. the slot mapping, planned before anything changes: the blocks
    //    the step takes, then every sequence's table as it will be
    size_t need = 0;
    for (size_t b = 0; b < B; b++)
        need += take(c, &c->seqs[seqs[b]], released) != 0;
    if (need > c->n_free)
        STEP(mha_fail(GSL_ENOMEM,
                      "%s: out of blocks: the step needs %zu free block%s, "
                      "the pool has %zu of %zu",
                      who, need, need == 1 ? "" : "s", c->n_free,
                      c->num_blocks));
    size_t next_free = c->n_free;
    memset(released, 0, c->num_blocks * sizeof *released);
    for (size_t b = 0; b < B; b++)
        STEP(plan(c, &c->seqs[seqs[b]], &next_free, released, scratch,
                  &slot[b]));
    // 1. project the new positions
    STEP(linear_steps(&m->W_q, &x_in, &q));
    STEP(linear_steps(&m->W_k, &x_in, &k));
    STEP(linear_steps(&m->W_v, &x_in, &v));
    // 2. each row turned to its own sequence's position, the turns of Q
    //    and K shown as one step (below)
    if (m->cfg.rope) {
        QUIET;
        STEP(rope_rows(m, &q, start, "Q"));
        STEP(rope_rows(m, &k, start, "K"));
    }
    if (m->cfg.rope)
        tensor_trace_step(TRACE_NEW, q, q, "rope(each row at its own position)");
    STEP(tensor_alloc(SHAPE(B), &slots));
    STEP(tensor_alloc(SHAPE(B, 1, h * p), &heads));
    tensor_set_names(slots, NAMES(B));
    tensor_set_names(heads, NAMES(B, 1, d_model));
    // 3. the blocks as planned, their books kept first (scratch's
    //    plans are done), and 4. K and V written at the slots
    books_keep(c, seqs, B, &before);
    reserved = 1;
    for (size_t b = 0; b < B; b++) {
        reserve(c, &c->seqs[seqs[b]]);
        slots->data[b] = (double)slot[b];
        size_t bs = c->block_size;
        size_t at = ((slot[b] / bs) * G) * bs + slot[b] % bs;
        for (size_t g = 0; g < G; g++) {
            memcpy(c->keys->data + (at + g * bs) * p, k->data + (b * G + g) * p,
                   p * sizeof(double));
            memcpy(c->values->data + (at + g * bs) * p,
                   v->data + (b * G + g) * p, p * sizeof(double));
        }
    }
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, slots, TRACE_INPUTS(TRACE_IN(x)),
               "slot mapping");
    tensor_trace_emit(TRACE_COPY, TRACE_LIST, c->keys,
               TRACE_INPUTS(TRACE_IN(k), TRACE_IN(v), TRACE_SIDE(slots, "slots")),
               "write K, V at the slots");
    // 5. every query head of every sequence through its block table,
    //    group by group: the h/G query heads of group g read
    //    key-value head g
    for (size_t b = 0; b < B; b++)
        for (size_t g = 0, i = 0; g < G; g++)
            for (size_t r = 0; r < h / G; r++, i++)
                paged_attention(c, &c->seqs[seqs[b]],
                                q->data + (b * h + i) * p, g, p,
                                heads->data + (b * h + i) * p, scores);
    tensor_trace_emit(TRACE_NEW, TRACE_LIST, heads,
               TRACE_INPUTS(TRACE_NAMED(q, "q"), TRACE_NAMED(c->keys, "keys"),
                            TRACE_NAMED(c->values, "values")),
               "paged attention");
    // 6. W_o
    STEP(linear_steps(&m->W_o, heads, out));
    STEP(tensor_check_result(*out, who, "output", "out"));
done:
    if (status) {
        tensor_free(*out);
        *out = NULL;
        if (reserved)
            books_restore(c, seqs, B, &before);
    }
    free(kept);
    free(start);
    free(scores);
    free(slot);
    free(scratch);
    free(released);
    TENSORS_FREE(q, k, v, slots, heads);
    return status;
}

/* --- the picture ---------------------------------------------------- */

int paged_write_dot(FILE *f, const paged_cache *c)
{
    size_t bs = c->block_size;
    fprintf(f, "digraph block_tables {\n  rankdir=LR;\n"
               "  node [shape=record, fontname=\"Helvetica\"];\n");
    for (size_t s = 0; s < c->max_seqs; s++) {
        const paged_seq *q = &c->seqs[s];
        if (!q->live)
            continue;
        fprintf(f, "  seq%zu [label=\"sequence %zu\\n%zu positions", s, s,
                q->length);
        for (size_t j = 0; j < q->nblocks; j++)
            fprintf(f, "|<e%zu> %zu", j, j);
        fprintf(f, "\"];\n");
    }
    for (size_t b = 0; b < c->num_blocks; b++) {
        if (!c->refs[b])
            continue;
        size_t filled = 0; // the most rows any table holding b has written
        for (size_t s = 0; s < c->max_seqs; s++)
            for (size_t j = 0; c->seqs[s].live && j < c->seqs[s].nblocks; j++)
                if (c->seqs[s].table[j] == b) {
                    size_t rows = c->seqs[s].length - j * bs;
                    rows = rows > bs ? bs : rows;
                    filled = rows > filled ? rows : filled;
                }
        fprintf(f, "  block%zu [shape=box, %slabel=\"block %zu\\n%zu of %zu "
                   "rows%s\"];\n",
                b, c->refs[b] > 1 ? "style=filled, fillcolor=\"#f4c7c3\", " : "",
                b, filled, bs, c->refs[b] > 1 ? ", shared" : "");
    }
    for (size_t s = 0; s < c->max_seqs; s++)
        for (size_t j = 0; c->seqs[s].live && j < c->seqs[s].nblocks; j++)
            fprintf(f, "  seq%zu:e%zu -> block%zu;\n", s, j, c->seqs[s].table[j]);
    fprintf(f, "}\n");
    return ferror(f) ? mha_fail(GSL_EFAILED, "paged_write_dot: writing failed")
                     : GSL_SUCCESS;
}
//<
