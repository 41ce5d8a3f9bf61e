//> handout
/* quiz.c: a case asked step by step (see quiz.h). */
#define _POSIX_C_SOURCE 200809L
#include "quiz.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

/* --- drawing a case ------------------------------------------------- */

/* splitmix64's output function (Steele, Lea and Flood 2014): each bit of
 * z changes about half the bits of the result. */
static unsigned long long mix64(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* The next digit of k in base r: a size from a range of r.  The ranges
 * multiply to under 10^6, so 2^64 leaves no size favoured. */
static size_t digit(unsigned long long *k, size_t r)
{
    size_t d = (size_t)(*k % r);
    *k /= r;
    return d;
}

void quiz_draw(unsigned long long seed, int upto, quiz_case *c)
{
    memset(c, 0, sizeof *c);
    unsigned long long k = mix64(seed);
    c->seed = seed;
    c->seeded = 1;
    c->upto = upto;
    c->causal = digit(&k, 3) == 0;
    c->Lq = 1 + digit(&k, 4);
    // causal: every query sees a key only when Lk >= Lq
    size_t lk_min = c->causal && c->Lq > 2 ? c->Lq : 2;
    c->Lk = lk_min + digit(&k, 7 - lk_min);
    c->h = 1 + digit(&k, 4);
    size_t divisors[4], nd = 0;
    for (size_t g = 1; g <= c->h; g++)
        if (c->h % g == 0)
            divisors[nd++] = g;
    c->G = divisors[digit(&k, nd)];
    c->D = c->h * (2 + digit(&k, 4));
    c->B = 1 + digit(&k, QUIZ_BATCH_MAX);
    c->has_lens = 1;
    for (size_t b = 0; b < c->B; b++)
        c->lens[b] = (double)(1 + digit(&k, c->Lk));
    // what the class has not met yet: grouped heads (chapter 17), the
    // causal mask of decoding (16), valid lengths per head (07)
    if (upto < 17)
        c->G = c->h;
    if (upto < 16)
        c->causal = 0;
    if (upto < 7)
        c->has_lens = 0;
}

int quiz_same_quiz(int a, int b)
{
    static const int ideas[] = {7, 8, 16, QUIZ_LAST_IDEA};
    for (size_t i = 0; i < sizeof ideas / sizeof ideas[0]; i++)
        if ((a >= ideas[i]) != (b >= ideas[i]))
            return 0;
    return 1;
}

/* "[3, 3, 2, 2]": n values into buf. */
void quiz_values_str(char *buf, size_t size, const double *v, size_t n)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    char num[TRACE_NUMBER_MAX];
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                                trace_number_str(num, sizeof num, v[i]));
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

void quiz_describe(FILE *f, const quiz_case *c)
{
    size_t p = c->D / c->h;
    fprintf(f, "queries (%zu, %zu, %zu), keys and values (%zu, %zu, %zu): %zu "
               "head%s of %zu feature%s, ",
            c->B, c->Lq, c->D, c->B, c->Lk, c->D, c->h, c->h == 1 ? "" : "s",
            p, p == 1 ? "" : "s");
    if (c->G < c->h)
        fprintf(f, "%zu key-value head%s, ", c->G, c->G == 1 ? "" : "s");
    if (c->causal)
        fprintf(f, "causal, ");
    if (!c->has_lens) {
        fprintf(f, "no valid_lens");
        return;
    }
    char lens[QUIZ_TEXT_MAX];
    if (c->B > QUIZ_LENS_MAX) {
        quiz_values_str(lens, sizeof lens, c->lens, QUIZ_LENS_MAX);
        fprintf(f, "valid_lens %.*s, ...] (%zu of them)", (int)strlen(lens) - 1,
                lens, c->B);
        return;
    }
    quiz_values_str(lens, sizeof lens, c->lens, c->B);
    fprintf(f, "valid_lens %s", lens);
}

const char *quiz_upto_option(const quiz_case *c, char *buf, size_t n)
{
    if (c->upto >= QUIZ_LAST_IDEA)
        snprintf(buf, n, "%s", "");
    else
        snprintf(buf, n, " --up-to %02d", c->upto);
    return buf;
}

void quiz_trace_command(FILE *f, const quiz_case *c)
{
    fprintf(f, "mha trace --batch %zu --queries %zu --kv %zu --hiddens %zu "
               "--heads %zu",
            c->B, c->Lq, c->Lk, c->D, c->h);
    if (c->G < c->h)
        fprintf(f, " --kv-heads %zu", c->G);
    if (c->causal)
        fprintf(f, " --causal");
    if (c->has_lens && c->B <= QUIZ_LENS_MAX) {
        char num[TRACE_NUMBER_MAX];
        for (size_t b = 0; b < c->B; b++)
            fprintf(f, "%s%s", b ? "," : " --valid-lens ",
                    trace_number_str(num, sizeof num, c->lens[b]));
    }
    fprintf(f, " --quiz");
}

/* --- shapes and strides --------------------------------------------- */

/* A tensor as the quiz follows it: its sizes, its strides (in numbers)
 * and the lesson's name of each axis.  No numbers. */
typedef struct qt {
    size_t nd;
    size_t dim[4];
    size_t stride[4];
    char name[4][24];
} qt;

/* A new tensor: its numbers one row after another, so the last axis has
 * stride 1 and each axis before it steps over all the axes after it. */
static qt fresh(size_t nd, const size_t *dim, const char *const *name)
{
    qt t = {.nd = nd};
    size_t step = 1;
    for (size_t i = nd; i-- > 0;) {
        t.dim[i] = dim[i];
        t.stride[i] = step;
        step *= dim[i];
        snprintf(t.name[i], sizeof t.name[i], "%s", name[i]);
    }
    return t;
}

/* The same sizes and names, its numbers written out afresh (a copy). */
static qt rewritten(const qt *t)
{
    const char *names[4] = {t->name[0], t->name[1], t->name[2], t->name[3]};
    return fresh(t->nd, t->dim, names);
}

static char *tuple(char *buf, size_t n, size_t nd, const size_t *v)
{
    return trace_dims_str(buf, n, nd, v);
}

static char *names_str(char *buf, size_t n, const qt *t)
{
    size_t len = (size_t)snprintf(buf, n, "(");
    for (size_t i = 0; i < t->nd && len < n; i++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? ", " : "",
                                t->name[i]);
    if (len < n)
        snprintf(buf + len, n - len, ")");
    return buf;
}

/* Axis a cut into (x, y), y the inner: a view whatever the strides, the
 * outer piece stepping over y of the inner's. */
static void split(qt *t, size_t a, size_t x, size_t y, const char *nx,
                  const char *ny, char *why, size_t n)
{
    if (t->nd >= 4 || a >= t->nd)
        return; // not reached: the quiz splits tensors of 3 axes
    size_t s = t->stride[a];
    char was[24];
    snprintf(was, sizeof was, "%s", t->name[a]);
    qt o = *t; // the axes after a move one place on
    for (size_t k = a + 1; k < t->nd && k + 1 < 4; k++) {
        o.dim[k + 1] = t->dim[k];
        o.stride[k + 1] = t->stride[k];
        memcpy(o.name[k + 1], t->name[k], sizeof o.name[0]);
    }
    *t = o;
    t->nd++;
    t->dim[a] = x;
    t->dim[a + 1] = y;
    t->stride[a + 1] = s;
    t->stride[a] = y * s;
    snprintf(t->name[a], sizeof t->name[a], "%s", nx);
    snprintf(t->name[a + 1], sizeof t->name[a + 1], "%s", ny);
    if (why)
        snprintf(why, n, "view: splitting one axis never copies: %s (stride "
                         "%zu) becomes %s and %s with strides %zu and %zu",
                 was, s, nx, ny, y * s, s);
}

/* Axes 1 and 2 swapped, as permute(0, 2, 1, 3) does. */
static void swap12(qt *t, char *why, size_t n)
{
    char before[TRACE_SHAPE_MAX], after[TRACE_SHAPE_MAX];
    tuple(before, sizeof before, t->nd, t->stride);
    size_t d = t->dim[1], s = t->stride[1];
    char nm[24];
    memcpy(nm, t->name[1], sizeof nm);
    t->dim[1] = t->dim[2];
    t->stride[1] = t->stride[2];
    memcpy(t->name[1], t->name[2], sizeof nm);
    t->dim[2] = d;
    t->stride[2] = s;
    memcpy(t->name[2], nm, sizeof nm);
    tuple(after, sizeof after, t->nd, t->stride);
    if (why)
        snprintf(why, n, "view: a permute only reorders the axes and their "
                         "strides, %s -> %s; no number moves",
                 before, after);
}

/* Axes a and a + 1 merged into one named name: 1 when that is a view,
 * 0 when the numbers must be copied (t is then the copy).  Two axes
 * merge in place only when the outer's stride is the inner's size times
 * the inner's stride, so that walking the merged axis steps evenly; an
 * axis of size 1 is never walked, and so never in the way. */
static int merge(qt *t, size_t a, const char *name, char *why, size_t n)
{
    size_t o = a, i = a + 1; // outer, inner
    char strides[TRACE_SHAPE_MAX];
    tuple(strides, sizeof strides, t->nd, t->stride);
    int view = 1;
    if (t->dim[o] == 1 || t->dim[i] == 1) {
        const char *one = t->dim[o] == 1 ? t->name[o] : t->name[i];
        const char *other = t->dim[o] == 1 ? t->name[i] : t->name[o];
        if (t->dim[o] == 1 && t->dim[i] == 1)
            snprintf(why, n, "view: %s and %s are both 1, so %s has one "
                             "position and no stride to match",
                     t->name[o], t->name[i], name);
        else
            snprintf(why, n, "view: %s is 1, so %s is the axis of %s alone "
                             "and no stride has to match",
                     one, name, other);
    } else if (t->stride[o] == t->dim[i] * t->stride[i]) {
        snprintf(why, n, "view: the strides are %s and stride(%s) = %s x "
                         "stride(%s) = %zu x %zu = %zu: %s and %s lie one "
                         "after the other in memory, so they merge",
                 strides, t->name[o], t->name[i], t->name[i], t->dim[i],
                 t->stride[i], t->stride[o], t->name[o], t->name[i]);
    } else {
        view = 0;
        snprintf(why, n, "copy: the strides are %s; %s and %s merge in place "
                         "only when stride(%s) = %s x stride(%s) = %zu x %zu "
                         "= %zu, and it is %zu, so the numbers are gathered "
                         "into a new buffer",
                 strides, t->name[o], t->name[i], t->name[o], t->name[i],
                 t->name[i], t->dim[i], t->stride[i],
                 t->dim[i] * t->stride[i], t->stride[o]);
    }
    size_t inner = t->dim[o] == 1 ? t->stride[i] : t->dim[i] == 1 ? t->stride[o]
                                                                 : t->stride[i];
    t->dim[o] *= t->dim[i];
    t->stride[o] = inner;
    snprintf(t->name[o], sizeof t->name[o], "%s", name);
    for (size_t k = i; k + 1 < t->nd; k++) {
        t->dim[k] = t->dim[k + 1];
        t->stride[k] = t->stride[k + 1];
        memcpy(t->name[k], t->name[k + 1], sizeof t->name[k]);
    }
    t->nd--;
    if (!view)
        *t = rewritten(t);
    return view;
}

/* --- the questions -------------------------------------------------- */

typedef struct builder {
    quiz *z;
    size_t steps;
} builder;

static quiz_line *line_v(builder *b, int depth, int is_step, const char *fmt,
                         va_list ap)
{
    quiz *z = b->z;
    if (z->nlines == QUIZ_LINES_MAX)
        return &z->lines[z->nlines - 1]; // not reached: a quiz has ~30 lines
    quiz_line *l = &z->lines[z->nlines++];
    memset(l, 0, sizeof *l);
    l->depth = depth;
    l->first = z->n;
    char text[QUIZ_TEXT_MAX];
    vsnprintf(text, sizeof text, fmt, ap);
    if (is_step) {
        l->step = ++b->steps;
        snprintf(l->text, sizeof l->text, "step %zu: %.*s", l->step,
                 (int)sizeof l->text - 16, text);
    } else {
        snprintf(l->text, sizeof l->text, "%s", text);
    }
    return l;
}

static void heading(builder *b, int depth, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void heading(builder *b, int depth, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    line_v(b, depth, 0, fmt, ap);
    va_end(ap);
}

/* A step: its number. */
static size_t step(builder *b, int depth, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static size_t step(builder *b, int depth, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    quiz_line *l = line_v(b, depth, 1, fmt, ap);
    va_end(ap);
    return l->step;
}

/* A question under the last line. */
static quiz_question *ask(builder *b, quiz_form form, const char *what)
{
    quiz *z = b->z;
    if (z->n == QUIZ_QUESTIONS_MAX)
        return &z->qs[z->n - 1]; // not reached: a quiz asks ~30
    quiz_line *l = &z->lines[z->nlines - 1];
    if (!l->count)
        l->first = z->n;
    l->count++;
    quiz_question *q = &z->qs[z->n++];
    memset(q, 0, sizeof *q);
    q->form = form;
    q->step = l->step;
    snprintf(q->ask, sizeof q->ask, "%s", what);
    return q;
}

static void ask_shape(builder *b, const qt *t, const char *what)
{
    quiz_question *q = ask(b, QUIZ_SHAPE, what ? what : "its shape");
    char sym[TRACE_SHAPE_MAX];
    tuple(q->answer, sizeof q->answer, t->nd, t->dim);
    snprintf(q->why, sizeof q->why, "%s, that is %s", q->answer,
             names_str(sym, sizeof sym, t));
}

static void ask_kind(builder *b, int view, const char *why, const char *what)
{
    quiz_question *q = ask(b, QUIZ_KIND, what ? what : "view or copy");
    snprintf(q->answer, sizeof q->answer, "%s", view ? "view" : "copy");
    snprintf(q->why, sizeof q->why, "%s", why);
}

/* Q, K or V split into heads (transpose_qkv with `heads` heads) in t,
 * its kinds' reasons into why[3]; the last reshape's kind returned. */
static int heads_of(qt *t, size_t heads, const char *hname, const char *rows,
                    char why[3][3 * QUIZ_TEXT_MAX])
{
    size_t p = t->dim[2] / heads;
    split(t, 2, heads, p, hname, "d_model/h", why[0], sizeof why[0]);
    swap12(t, why[1], sizeof why[1]);
    return merge(t, 0, rows, why[2], sizeof why[2]);
}

void quiz_build(const quiz_case *c, quiz *z)
{
    memset(z, 0, sizeof *z);
    z->c = *c;
    builder bd = {z, 0}, *b = &bd;
    size_t B = c->B, Lq = c->Lq, Lk = c->Lk, D = c->D, h = c->h, G = c->G;
    size_t p = D / h, per = h / G; // features a head, query heads a group
    int grouped = G < h;
    char why[3][3 * QUIZ_TEXT_MAX];

    heading(b, 0, "multihead(h=%zu%s%.0zu%s) on q (%zu, %zu, %zu), k (%zu, "
                  "%zu, %zu), v (%zu, %zu, %zu):",
            h, grouped ? ", G=" : "", grouped ? G : 0,
            c->causal ? ", causal" : "", B, Lq, D, B, Lk, D, B, Lk, D);

    // Q, asked step by step
    size_t sq = step(b, 1, "W_q: x W^T on q (%zu, %zu, %zu)", B, Lq, D);
    qt q = fresh(3, (size_t[]){B, Lq, D}, (const char *[]){"B", "Lq", "d_model"});
    ask_shape(b, &q, NULL);
    heading(b, 1, "transpose_qkv(h=%zu) on step %zu:", h, sq);
    size_t s = step(b, 2, "reshape(...) on step %zu", sq);
    split(&q, 2, h, p, "h", "d_model/h", why[0], sizeof why[0]);
    ask_shape(b, &q, NULL);
    ask_kind(b, 1, why[0], NULL);
    s = step(b, 2, "permute(0, 2, 1, 3) on step %zu", s);
    swap12(&q, why[1], sizeof why[1]);
    ask_shape(b, &q, NULL);
    ask_kind(b, 1, why[1], NULL);
    size_t sqh = step(b, 2, "reshape(...) on step %zu", s);
    int view = merge(&q, 0, "B*h", why[2], sizeof why[2]);
    ask_shape(b, &q, NULL);
    ask_kind(b, view, why[2], NULL);

    // K and V: the same split, asked by its result (G heads when grouped)
    const char *kvh = grouped ? "G" : "h", *kvrows = grouped ? "B*G" : "B*h";
    const char *kvf = grouped ? "G*d_model/h" : "d_model";
    size_t sk = step(b, 1, "W_k: x W^T on k (%zu, %zu, %zu)", B, Lk, D);
    qt k = fresh(3, (size_t[]){B, Lk, G * p}, (const char *[]){"B", "Lk", kvf});
    ask_shape(b, &k, NULL);
    if (grouped)
        heading(b, 1, "# K has G = %zu key-value head%s, not h = %zu: "
                      "transpose_qkv splits it with h=%zu",
                G, G == 1 ? "" : "s", h, G);
    size_t skh = step(b, 1, "transpose_qkv(h=%zu) on step %zu", G, sk);
    view = heads_of(&k, G, kvh, kvrows, why);
    ask_shape(b, &k, NULL);
    ask_kind(b, view, why[2], "its last reshape: view or copy");
    size_t svh = step(b, 1, "W_v: x W^T on v (%zu, %zu, %zu), then "
                            "transpose_qkv(h=%zu)",
                      B, Lk, D, G);
    qt v = fresh(3, (size_t[]){B, Lk, G * p}, (const char *[]){"B", "Lk", kvf});
    heads_of(&v, G, kvh, kvrows, why);
    ask_shape(b, &v, NULL);

    // the valid lengths of every head's rows
    size_t rows = B * h;
    // with causal or grouped heads, one length per query row (B, Lq)
    // first: the folded rows of grouped heads mix the queries of h/G heads
    if (c->causal || (grouped && c->has_lens)) {
        size_t sr = step(b, 1, "per-row lens(%s)",
                         !c->causal ? "valid_lens"
                         : c->has_lens ? "causal, valid_lens" : "causal");
        qt r = fresh(2, (size_t[]){B, Lq}, (const char *[]){"B", "Lq"});
        ask_shape(b, &r, NULL);
        step(b, 1, "repeat_interleave(%zu) on step %zu", h, sr);
        r = fresh(2, (size_t[]){rows, Lq}, (const char *[]){"B*h", "Lq"});
        ask_shape(b, &r, NULL);
    } else if (c->has_lens) {
        step(b, 1, "repeat_interleave(%zu) on valid_lens (%zu,)", h, B);
        qt r = fresh(1, (size_t[]){rows}, (const char *[]){"B*h"});
        ask_shape(b, &r, NULL);
        if (rows <= QUIZ_LENS_MAX) {
            // each example's length once for each of its heads, in turn
            double once[QUIZ_LENS_MAX] = {0}, dealt[QUIZ_LENS_MAX] = {0};
            size_t m = 0;
            for (size_t e = 0; e < B; e++)
                for (size_t copies = h; copies > 0; copies--)
                    once[m++] = c->lens[e];
            for (size_t r2 = 0; r2 < rows; r2++) // tile: the whole list h times
                dealt[r2] = c->lens[r2 % B];
            quiz_question *qv = ask(b, QUIZ_VALUES, "its values");
            quiz_values_str(qv->answer, sizeof qv->answer, once, rows);
            char tiled[QUIZ_TEXT_MAX];
            quiz_values_str(tiled, sizeof tiled, dealt, rows);
            if (strcmp(tiled, qv->answer))
                snprintf(qv->why, sizeof qv->why,
                         "%s: each example's length once for each of its %zu "
                         "heads, in order, as the heads' rows lie after "
                         "transpose_qkv (repeat_interleave; tile would give %s)",
                         qv->answer, h, tiled);
            else
                snprintf(qv->why, sizeof qv->why,
                         "%s: each example's length once for each of its %zu "
                         "head%s, in order (with %s, tile gives the same)",
                         qv->answer, h, h == 1 ? "" : "s",
                         B == 1 ? "one example" : "one head");
        }
    }

    // attention, over every head at once
    size_t sa;
    if (!grouped) {
        heading(b, 1, "dot_attention on steps %zu, %zu, %zu:", sqh, skh, svh);
        size_t ss = step(b, 2, "Q K^T on step %zu, step %zu^T", sqh, skh);
        qt sc = fresh(3, (size_t[]){rows, Lq, Lk}, (const char *[]){"B*h", "Lq", "Lk"});
        ask_shape(b, &sc, NULL);
        sa = step(b, 2, "weights V: softmax(step %zu) @ step %zu", ss, svh);
        qt o = fresh(3, (size_t[]){rows, Lq, p},
                     (const char *[]){"B*h", "Lq", "d_model/h"});
        ask_shape(b, &o, NULL);
    } else {
        heading(b, 1, "grouped heads(h=%zu, G=%zu) on steps %zu, %zu, %zu:", h,
                G, sqh, skh, svh);
        size_t se = step(b, 2, "view(...), expand(...) on step %zu", skh);
        qt e = k;
        split(&e, 0, B * G, 1, "B*G", "1", NULL, 0);
        e.dim[1] = per;
        e.stride[1] = 0;
        snprintf(e.name[1], sizeof e.name[1], "h/G");
        ask_shape(b, &e, NULL);
        char ewhy[3 * QUIZ_TEXT_MAX];
        snprintf(ewhy, sizeof ewhy,
                 "view: view(...) adds an axis of size 1 and expand(...) "
                 "stretches it to h/G = %zu with stride 0, so the %zu query "
                 "head%s of a group read one key-value head's numbers; none "
                 "is copied",
                 per, per, per == 1 ? "" : "s");
        ask_kind(b, 1, ewhy, NULL);
        heading(b, 2, "# fold each group's h/G query heads into Lq: one "
                      "product per key-value head");
        size_t sf = step(b, 2, "reshape(...) on step %zu", sqh);
        qt f = q;
        split(&f, 0, B * G, per, "B*G", "h/G", NULL, 0);
        view = merge(&f, 1, "h/G*Lq", why[0], sizeof why[0]);
        ask_shape(b, &f, NULL);
        ask_kind(b, view, why[0], NULL);
        size_t ss = step(b, 2, "Q K^T on step %zu, step %zu^T", sf, se);
        qt sc = fresh(3, (size_t[]){B * G, per * Lq, Lk},
                      (const char *[]){"B*G", "h/G*Lq", "Lk"});
        ask_shape(b, &sc, NULL);
        size_t sw = step(b, 2, "weights V: softmax(step %zu) @ step %zu, "
                                "expanded as step %zu",
                         ss, svh, se);
        qt o = fresh(3, (size_t[]){B * G, per * Lq, p},
                     (const char *[]){"B*G", "h/G*Lq", "d_model/h"});
        ask_shape(b, &o, NULL);
        sa = step(b, 2, "view(...) on step %zu", sw);
        o = fresh(3, (size_t[]){rows, Lq, p}, (const char *[]){"B*h", "Lq", "d_model/h"});
        ask_shape(b, &o, NULL);
    }

    // the heads side by side again, and the output
    heading(b, 1, "transpose_output(h=%zu) on step %zu:", h, sa);
    qt o = fresh(3, (size_t[]){rows, Lq, p}, (const char *[]){"B*h", "Lq", "d_model/h"});
    s = step(b, 2, "reshape(...) on step %zu", sa);
    split(&o, 0, B, h, "B", "h", NULL, 0);
    ask_shape(b, &o, NULL);
    s = step(b, 2, "permute(0, 2, 1, 3) on step %zu", s);
    swap12(&o, NULL, 0);
    ask_shape(b, &o, NULL);
    s = step(b, 2, "reshape(...) on step %zu", s);
    view = merge(&o, 2, "d_model", why[0], sizeof why[0]);
    ask_shape(b, &o, NULL);
    ask_kind(b, view, why[0], NULL);
    step(b, 1, "W_o: x W^T on step %zu", s);
    ask_shape(b, &o, NULL);

    // about the case as a whole
    heading(b, 0, "and about this case:");
    qt w = fresh(4, (size_t[]){B, h, Lq, Lk}, (const char *[]){"B", "h", "Lq", "Lk"});
    if (c->upto >= 8) // the module's forward (chapter 08)
        ask_shape(b, &w, "the attention weights the forward returns: their shape");
    if (grouped) {
        // heads in order, per to a group: count the groups before head i
        // which head: one the sizes pick, so mha trace asks the same
        size_t head = (B + Lq + Lk) % h, kv = 0;
        for (size_t first = per; first <= head; first += per)
            kv++;
        char what[QUIZ_TEXT_MAX];
        if (G == 1)
            snprintf(what, sizeof what, "which key-value head does query "
                                        "head %zu read",
                     head);
        else
            snprintf(what, sizeof what, "which key-value head (0 to %zu) "
                                        "does query head %zu read",
                     G - 1, head);
        quiz_question *qn = ask(b, QUIZ_NUMBER, what);
        snprintf(qn->answer, sizeof qn->answer, "%zu", kv);
        snprintf(qn->why, sizeof qn->why,
                 "%zu: the heads are grouped in order, h/G = %zu to a group: "
                 "heads %zu to %zu read key-value head %zu",
                 kv, per, kv * per, kv * per + per - 1, kv);
    }
    if (c->causal) {
        // query 0 stands at key Lk - Lq: it sees keys 0 .. Lk - Lq
        size_t upto = Lk - Lq + 1, len = c->has_lens ? (size_t)c->lens[0] : Lk;
        size_t sees = len < upto ? len : upto;
        quiz_question *qn = ask(b, QUIZ_NUMBER, "how many keys does the first "
                                               "query of example 0 see");
        snprintf(qn->answer, sizeof qn->answer, "%zu", sees);
        if (c->has_lens)
            snprintf(qn->why, sizeof qn->why,
                     "%zu: query i sees key j when j <= i + Lk - Lq, %zu key%s "
                     "for query 0, and j < its valid length %zu: the fewer",
                     sees, upto, upto == 1 ? "" : "s", len);
        else
            snprintf(qn->why, sizeof qn->why,
                     "%zu: query i sees key j when j <= i + Lk - Lq = %zu for "
                     "query 0",
                     sees, upto - 1);
        qt cache = fresh(4, (size_t[]){B, G, Lk, p},
                         (const char *[]){"B", "G", "t", "d_model/h"});
        ask_shape(b, &cache, "decoding one query at a time with a KV cache: "
                             "the key cache's shape after Lk steps");
    }
}
//<
