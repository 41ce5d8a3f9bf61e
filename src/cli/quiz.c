//> full
/* quiz.c: a case asked step by step (see quiz.h). */
#define _POSIX_C_SOURCE 200809L
#include "quiz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "libmha.h"

/* --- mha quiz ------------------------------------------------------- */

/* The ranges of a case: at least 2 examples, 2 queries and 2 heads, since
 * with one of each every reshape is a view and repeat_interleave looks
 * like tile, and the quiz would test nothing of chapters 06 and 07. */
enum { B_MIN = 2, LQ_MIN = 2, LQ_N = 4, LK_MIN = 2, LK_MAX = 6, H_MIN = 2,
       H_N = 3, P_MIN = 2, P_N = 4 };

/* Lk^B: the valid lengths of B examples, each 1 to Lk. */
static size_t lens_cases(size_t B, size_t Lk)
{
    size_t n = 1;
    for (size_t b = 0; b < B; b++)
        n *= Lk;
    return n;
}

size_t quiz_cases(void)
{
    size_t n = 0;
    for (size_t B = B_MIN; B <= QUIZ_BATCH_MAX; B++)
        for (size_t Lk = LK_MIN; Lk <= LK_MAX; Lk++)
            n += lens_cases(B, Lk);
    return n * LQ_N * H_N * P_N;
}

/* splitmix64's output function (Steele, Lea and Flood 2014): each bit of
 * z changes about half the bits of the result. */
static unsigned long long mix64(unsigned long long z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void quiz_draw(unsigned long long seed, quiz_case *c)
{
    // case k of the quiz_cases(), its sizes read off k digit by digit
    // (mixed radix), the valid lengths last; 2^64 / 25,440 is so large
    // that the remainder favours no case
    unsigned long long k = mix64(seed) % quiz_cases();
    c->seed = seed;
    c->Lq = LQ_MIN + k % LQ_N;
    k /= LQ_N;
    c->h = H_MIN + k % H_N;
    k /= H_N;
    c->D = c->h * (P_MIN + k % P_N);
    k /= P_N;
    for (size_t B = B_MIN; B <= QUIZ_BATCH_MAX; B++)
        for (size_t Lk = LK_MIN; Lk <= LK_MAX; Lk++) {
            size_t n = lens_cases(B, Lk);
            if (k >= n) {
                k -= n;
                continue;
            }
            c->B = B;
            c->Lk = Lk;
            for (size_t b = 0; b < B; b++, k /= Lk)
                c->lens[b] = (double)(1 + k % Lk);
            return;
        }
}

int quiz_trace(const quiz_case *c, trace_log *log)
{
    memset(log, 0, sizeof *log);
    multihead m;
    multihead_config cfg = {.query_size = c->D, .key_size = c->D,
                            .value_size = c->D, .num_hiddens = c->D,
                            .num_heads = c->h, .shape_only = 1};
    int status = multihead_init(&m, &cfg);
    if (status)
        return status;
    tensor *x = NULL, *y = NULL, *vl = NULL, *out = NULL; // (B, Lq, D), (B, Lk, D), (B,)
    status = tensor_alloc_meta(SHAPE(c->B, c->Lq, c->D), &x);
    if (!status)
        status = tensor_alloc_meta(SHAPE(c->B, c->Lk, c->D), &y);
    if (!status)
        status = tensor_from_array(SHAPE(c->B), c->lens, &vl);
    if (!status) {
        trace_log_start(log);
        status = multihead_forward(&m, x, y, y, vl, &out);
        trace_log_stop(log);
        if (!status && log->failed)
            status = mha_fail(GSL_ENOMEM, "quiz_trace: out of memory (the "
                                          "trace lost a record)");
    }
    tensor_free(x);
    tensor_free(y);
    tensor_free(vl);
    tensor_free(out);
    multihead_free(&m);
    return status;
}

/* "[3, 3, 2, 2]": n values into buf. */
static void lens_str(char *buf, size_t size, const double *v, size_t n)
{
    size_t len = (size_t)snprintf(buf, size, "[");
    char num[TRACE_NUMBER_MAX];
    for (size_t i = 0; i < n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
                                number_str(num, sizeof num, v[i]));
    if (len < size)
        snprintf(buf + len, size - len, "]");
}

int quiz_questions(const quiz_case *c, const trace_log *log,
                   quiz_question **qs, size_t *n)
{
    *qs = NULL;
    *n = 0;
    size_t step = 0;
    // at most three questions a record: its shape, view or copy, values
    *qs = mha_malloc(3 * log->count + 1, sizeof **qs, "quiz_questions");
    if (!*qs)
        return GSL_ENOMEM;
    for (size_t i = 0; i < log->count; i++) {
        const trace_record *r = &log->records[i];
        if (!r->has_output || (r->kind != TRACE_VIEW && r->kind != TRACE_COPY &&
                               r->kind != TRACE_NEW))
            continue;
        step++;
        int lens = strncmp(r->op, "repeat_interleave", 17) == 0;
        quiz_question *q = &(*qs)[(*n)++];
        *q = (quiz_question){.form = QUIZ_SHAPE, .step = step, .record = i};
        trace_shape_str(&r->output, q->answer, sizeof q->answer);
        if (r->kind != TRACE_NEW) {
            q = &(*qs)[(*n)++];
            *q = (quiz_question){.form = QUIZ_KIND, .step = step, .record = i};
            snprintf(q->answer, sizeof q->answer, "%s", trace_kind_name(r->kind));
        }
        if (lens && c) {
            // repeat_interleave: example b's length once for each head
            double rep[QUIZ_BATCH_MAX * 4];
            size_t k = 0;
            for (size_t b = 0; b < c->B; b++)
                for (size_t j = 0; j < c->h && k < sizeof rep / sizeof rep[0]; j++)
                    rep[k++] = c->lens[b];
            q = &(*qs)[(*n)++];
            *q = (quiz_question){.form = QUIZ_LENS, .step = step, .record = i};
            lens_str(q->answer, sizeof q->answer, rep, k);
        }
    }
    return GSL_SUCCESS;
}

/* Whole numbers separated by commas up to `close`, into vals (at most
 * cap); a trailing comma is allowed, as in Python's (8,).  The text after
 * `close`, or NULL when it is not such a list. */
static const char *parse_ints(const char *p, char close, unsigned long *vals,
                              size_t cap, size_t *n)
{
    *n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == close && (*n > 0 || close == ']'))
            return *n > 0 ? p + 1 : NULL;
        if (*p < '0' || *p > '9' || *n == cap)
            return NULL;
        unsigned long v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (v > 100000000UL)
                return NULL;
            v = v * 10 + (unsigned long)(*p - '0');
        }
        vals[(*n)++] = v;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ',')
            p++;
        else if (*p != close)
            return NULL;
    }
}

int quiz_parse(const char *text, quiz_form *form, char *canon, size_t n)
{
    while (*text == ' ' || *text == '\t')
        text++;
    size_t len = strlen(text);
    while (len > 0 && strchr(" \t\r\n", text[len - 1]))
        len--;
    char word[16];
    if (len > 0 && len < sizeof word) {
        for (size_t i = 0; i < len; i++)
            word[i] = (char)(text[i] >= 'A' && text[i] <= 'Z' ? text[i] + 32
                                                               : text[i]);
        word[len] = '\0';
        if (!strcmp(word, "view") || !strcmp(word, "copy") ||
            !strcmp(word, "new")) {
            *form = QUIZ_KIND;
            snprintf(canon, n, "%s", word);
            return 0;
        }
    }
    unsigned long vals[64];
    size_t k = 0;
    char close = *text == '(' ? ')' : *text == '[' ? ']' : '\0';
    if (!close)
        return -1;
    const char *end = parse_ints(text + 1, close, vals, close == ')' ? 8 : 64, &k);
    if (!end || end != text + len)
        return -1;
    if (close == ')') {
        size_t dims[8];
        for (size_t i = 0; i < k; i++)
            dims[i] = vals[i];
        char s[TRACE_SHAPE_MAX];
        snprintf(canon, n, "%s", shape_str(s, sizeof s, k, dims));
        *form = QUIZ_SHAPE;
    } else {
        double d[64];
        for (size_t i = 0; i < k; i++)
            d[i] = (double)vals[i];
        lens_str(canon, n, d, k);
        *form = QUIZ_LENS;
    }
    return 0;
}

size_t quiz_bad_byte(const char *line, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)line[i];
        int end = i + 1 == len || (i + 2 == len && line[i + 1] == '\n');
        if ((c < 0x20 || c == 0x7f) && c != '\t' &&
            !(c == '\n' && i + 1 == len) && !(c == '\r' && end))
            return i;
    }
    return len;
}

char *quiz_escape(const char *text, size_t len, char *buf, size_t n)
{
    size_t k = 0;
    if (n == 0)
        return buf;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        char one[8];
        if (c >= 0x20 && c < 0x7f)
            snprintf(one, sizeof one, "%c", c);
        else if (c == '\t' || c == '\r' || c == '\n')
            snprintf(one, sizeof one, "\\%c", c == '\t' ? 't' : c == '\r' ? 'r' : 'n');
        else
            snprintf(one, sizeof one, "\\x%02x", c);
        size_t w = strlen(one);
        if (k + w >= n)
            break;
        memcpy(buf + k, one, w);
        k += w;
    }
    buf[k] = '\0';
    return buf;
}

void quiz_describe(FILE *f, const quiz_case *c)
{
    char lens[64];
    lens_str(lens, sizeof lens, c->lens, c->B);
    fprintf(f,
            "queries (%zu, %zu, %zu), keys and values (%zu, %zu, %zu), "
            "%zu head%s (num_hiddens %zu), valid_lens %s",
            c->B, c->Lq, c->D, c->B, c->Lk, c->D, c->h, c->h == 1 ? "" : "s",
            c->D, lens);
}

/* The op without what gives the answer away: a reshape's sizes (they are
 * the output shape, or all of it but one -1), and any shape among the
 * arguments ("valid_lens (4,)" is an earlier step's output).  Which
 * reshape it is, the student knows from where it stands in the steps. */
static void hide_args(const char *op, char *buf, size_t n)
{
    const char *open = strchr(op, '(');
    if (!strncmp(op, "reshape(", 8)) {
        snprintf(buf, n, "reshape(...)");
        return;
    }
    size_t k = 0;
    for (const char *p = op; *p && k + 1 < n; p++) {
        if (open && p > open && p[0] == ' ' && p[1] == '(') {
            int level = 0; // skip " (4,)"
            for (p++; *p; p++) {
                level += *p == '(';
                level -= *p == ')';
                if (level == 0)
                    break;
            }
            if (!*p)
                break;
            continue;
        }
        buf[k++] = *p;
    }
    buf[k] = '\0';
}

char *quiz_show(const trace_record *r, const unsigned long *ids,
                size_t nsteps, char *buf, size_t n)
{
    char op[TRACE_OP_MAX];
    hide_args(r->op, op, sizeof op);
    size_t len = (size_t)snprintf(buf, n, "%s on ", op);
    const char *join = trace_join_text(r->join);
    int first = 1;
    for (size_t i = 0; i < r->n_inputs && len < n; i++) {
        const trace_operand *in = &r->inputs[i];
        if (in->side)
            continue;
        char what[TRACE_SHAPE_MAX];
        size_t step = 0;
        for (size_t s = nsteps; s > 0 && !step; s--)
            if (ids[s - 1] == in->shape.id)
                step = s;
        if (step)
            snprintf(what, sizeof what, "step %zu", step);
        else
            trace_shape_str(&in->shape, what, sizeof what);
        len += (size_t)snprintf(buf + len, n - len, "%s%s%s%s%s",
                                first ? "" : join, in->label,
                                in->label[0] ? " " : "", what,
                                in->transposed ? "^T" : "");
        first = 0;
    }
    return buf;
}
//<
