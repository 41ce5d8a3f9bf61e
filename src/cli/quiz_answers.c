//> handout
/* quiz_answers.c: a student's answers to the quiz, read and checked (see
 * quiz.h). */
#define _POSIX_C_SOURCE 200809L
#include "quiz.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <iconv.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "trace/trace.h"

/* --- answers -------------------------------------------------------- */

size_t quiz_numbered(const char *line, const char **rest)
{
    const char *p = line;
    while (*p == ' ' || *p == '\t')
        p++;
    const char *start = p;
    if (*p == 'q' || *p == 'Q')
        p++;
    size_t k = 0, digits = 0;
    for (; *p >= '0' && *p <= '9' && digits < 4; p++, digits++)
        k = k * 10 + (size_t)(*p - '0');
    while (*p == ' ' || *p == '\t')
        p++;
    if (digits && digits < 4 && k > 0 && (*p == '.' || *p == ')' || *p == ':') &&
        !(p[0] == '.' && p[1] >= '0' && p[1] <= '9')) {
        for (p++; *p == ' ' || *p == '\t'; p++)
            ;
        *rest = p;
        return k;
    }
    *rest = start;
    return 0;
}

/* Whole numbers separated by commas (a trailing one allowed, as in
 * Python's (8,)), up to close or the end: their count, or 0 when the
 * text is not such a list. */
static size_t parse_list(const char *p, char close, unsigned long *vals,
                         size_t cap)
{
    size_t n = 0;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == close)
            return n > 0 && (!close || p[1] == '\0') ? n : 0;
        if (*p < '0' || *p > '9' || n == cap)
            return 0;
        unsigned long v = 0;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (v > 100000000UL)
                return 0;
            v = v * 10 + (unsigned long)(*p - '0');
        }
        vals[n++] = v;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == ',')
            p++;
        else if (*p != close)
            return 0;
    }
}

int quiz_check(const quiz_question *q, const char *answer, char *shown,
               size_t n)
{
    shown[0] = '\0';
    size_t len = strlen(answer);
    while (len > 0 && strchr(" \t\r\n", answer[len - 1]))
        len--;
    char text[256];
    if (len == 0 || len >= sizeof text)
        return -1;
    memcpy(text, answer, len);
    text[len] = '\0';
    if (len < 8) {
        char word[8];
        for (size_t i = 0; i <= len; i++)
            word[i] = (char)(text[i] >= 'A' && text[i] <= 'Z' ? text[i] + 32 : text[i]);
        if (!strcmp(word, "view") || !strcmp(word, "copy") || !strcmp(word, "new")) {
            snprintf(shown, n, "%s", word);
            return q->form == QUIZ_KIND && !strcmp(word, q->answer);
        }
    }
    unsigned long vals[64];
    char close = text[0] == '(' ? ')' : text[0] == '[' ? ']' : '\0';
    size_t k = parse_list(close ? text + 1 : text, close, vals, 64);
    if (k == 0)
        return -1;
    if (q->form == QUIZ_NUMBER && k == 1 && !close) {
        snprintf(shown, n, "%lu", vals[0]);
    } else if (q->form == QUIZ_VALUES) {
        double d[64];
        for (size_t i = 0; i < k; i++)
            d[i] = (double)vals[i];
        quiz_values_str(shown, n, d, k);
    } else {
        size_t dims[64];
        for (size_t i = 0; i < k; i++)
            dims[i] = vals[i];
        char s[TRACE_SHAPE_MAX];
        if (k <= 8)
            snprintf(shown, n, "%s", trace_dims_str(s, sizeof s, k, dims));
        else
            snprintf(shown, n, "%s", text);
    }
    if (q->form == QUIZ_NUMBER && k == 1)
        return (unsigned long)strtoul(q->answer, NULL, 10) == vals[0] &&
               !close;
    return q->form != QUIZ_KIND && !strcmp(shown, q->answer);
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

/* UTF-16 text (len bytes, after a mark of skip bytes) into UTF-8, by
 * iconv. */
static int from_utf16(const char *text, size_t len, size_t skip,
                      const char *code, char **out, size_t *out_len,
                      char *why, size_t n)
{
    size_t cap = 2 * len + 4; // a UTF-16 unit gives at most 3 bytes
    char *buf = malloc(cap);
    if (!buf) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    iconv_t cd = iconv_open("UTF-8", code);
    if (cd == (iconv_t)-1) {
        free(buf);
        snprintf(why, n, "%s, which this system cannot decode: save it as "
                         "UTF-8",
                 code);
        return -1;
    }
    char *in = (char *)text, *o = buf;
    size_t left = len, room = cap - 1;
    size_t r = iconv(cd, &in, &left, &o, &room);
    iconv_close(cd);
    if (r == (size_t)-1) {
        free(buf);
        snprintf(why, n, "%s that does not decode at byte %zu: save it as "
                         "UTF-8",
                 code, skip + (size_t)(in - text) + 1);
        return -1;
    }
    *o = '\0';
    *out = buf;
    *out_len = (size_t)(o - buf);
    return 0;
}

int quiz_decode(const char *text, size_t len, char **out, size_t *out_len,
                char *why, size_t n)
{
    const unsigned char *u = (const unsigned char *)text;
    *out = NULL;
    *out_len = 0;
    if (len >= 4 && ((u[0] == 0xff && u[1] == 0xfe && !u[2] && !u[3]) ||
                     (!u[0] && !u[1] && u[2] == 0xfe && u[3] == 0xff))) {
        snprintf(why, n, "UTF-32: save it as UTF-8");
        return -1;
    }
    if (len >= 2 && u[0] == 0xff && u[1] == 0xfe)
        return from_utf16(text + 2, len - 2, 2, "UTF-16LE", out, out_len, why, n);
    if (len >= 2 && u[0] == 0xfe && u[1] == 0xff)
        return from_utf16(text + 2, len - 2, 2, "UTF-16BE", out, out_len, why, n);
    // UTF-16 without its mark: an answer file is ASCII, so every other
    // byte is NUL
    if (len >= 2 && len % 2 == 0) {
        size_t odd = 0, even = 0;
        for (size_t i = 0; i < len; i++)
            if (!u[i] && i % 2)
                odd++;
            else if (!u[i])
                even++;
        if (odd == len / 2 && !even)
            return from_utf16(text, len, 0, "UTF-16LE", out, out_len, why, n);
        if (even == len / 2 && !odd)
            return from_utf16(text, len, 0, "UTF-16BE", out, out_len, why, n);
    }
    size_t skip = len >= 3 && u[0] == 0xef && u[1] == 0xbb && u[2] == 0xbf ? 3 : 0;
    char *buf = malloc(len - skip + 1);
    if (!buf) {
        snprintf(why, n, "out of memory");
        return -1;
    }
    memcpy(buf, text + skip, len - skip);
    buf[len - skip] = '\0';
    *out = buf;
    *out_len = len - skip;
    return 0;
}

int quiz_seed_line(const char *line, unsigned long long *seed)
{
    for (const char *p = line; *p; p++) {
        if (strncmp(p, "seed", 4) && strncmp(p, "Seed", 4) && strncmp(p, "SEED", 4))
            continue;
        const char *d = p + 4;
        while (*d == ' ' || *d == '\t' || *d == '=' || *d == ':')
            d++;
        if (*d < '0' || *d > '9')
            continue;
        unsigned long long s = 0;
        for (; *d >= '0' && *d <= '9'; d++) {
            unsigned v = (unsigned)(*d - '0');
            if (s > (CLI_SEED_MAX - v) / 10)
                return 0;
            s = s * 10 + v;
        }
        *seed = s;
        return 1;
    }
    return 0;
}

int quiz_upto_line(const char *line, int *upto)
{
    const char *p = strstr(line, "--up-to");
    if (!p)
        return 0;
    p += strlen("--up-to");
    while (*p == ' ' || *p == '\t' || *p == '=')
        p++;
    if (*p < '0' || *p > '9')
        return 0;
    int n = 0, digits = 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++)
        n = n * 10 + (*p - '0');
    if (digits > 2)
        return 0;
    *upto = n;
    return 1;
}

int quiz_upto_only_line(const char *line, int *upto)
{
    line += strspn(line, " \t#");
    if (strncmp(line, "--up-to", 7) || !quiz_upto_line(line, upto))
        return 0;
    line += 7;
    line += strspn(line, " \t=");
    line += strspn(line, "0123456789");
    return line[strspn(line, " \t\r:")] == '\0';
}

int quiz_sheet_header(const char *text, unsigned long long *seed, int *upto)
{
    const char *p = text;
    while (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')
        p++;
    const char *end = strchr(p, '\n');
    char line[256];
    size_t l = end ? (size_t)(end - p) : strlen(p);
    if (l >= sizeof line)
        l = sizeof line - 1;
    memcpy(line, p, l);
    line[l] = '\0';
    if (!quiz_upto_line(line, upto)) {
        *upto = -1;
        const char *next = end ? end + 1 : p + l;
        next += strspn(next, " \t\r\n");
        const char *stop = strchr(next, '\n');
        char second[64];
        size_t m = stop ? (size_t)(stop - next) : strlen(next);
        if (m < sizeof second) {
            memcpy(second, next, m);
            second[m] = '\0';
            if (!quiz_upto_only_line(second, upto))
                *upto = -1;
        }
    }
    return quiz_seed_line(line, seed);
}

/* A question's where: "question 5 (line 6, step 3, its shape)". */
static void where_str(char *buf, size_t n, const quiz_question *q, size_t i,
                      size_t line)
{
    char at[32] = "", st[32] = "";
    if (line)
        snprintf(at, sizeof at, "line %zu, ", line);
    if (q->step)
        snprintf(st, sizeof st, "step %zu, ", q->step);
    snprintf(buf, n, "question %zu (%s%s%s)", i + 1, at, st, q->ask);
}

const char quiz_not_an_answer[] =
    "a shape like (2, 4, 100), view or copy, values like [3, 3, 2, 2], or "
    "a number";

/* "Name: Ada" (any case, spaces before the colon): a student's name,
 * no answer. */
static int name_line(const char *a)
{
    if (strncasecmp(a, "name", 4))
        return 0;
    const char *p = a + 4;
    while (*p == ' ' || *p == '\t')
        p++;
    return *p == ':';
}

/* fprintf on fb, or nothing when fb is NULL (quiz_fit_upto's trials). */
static void say(FILE *fb, const char *fmt, ...)
{
    if (!fb)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(fb, fmt, ap);
    va_end(ap);
}

/* Grading one answer text: the feedback (each wrong, unreadable or
 * missing answer with its question number and line) on fb, each line
 * after prefix; the count of right answers.  Lines: one answer each, in
 * the questions' order or numbered ("12. (8, 2, 2)", "12) view"); a
 * blank line is no answer (in a file with no numbers), # starts a
 * comment, and a first line naming the seed or a "Name:" line is no
 * answer.  text is changed (cut into lines). */
size_t quiz_grade_text(const quiz *z, char *text, size_t len, FILE *fb,
                       const char *prefix, size_t *given)
{
    size_t n = z->n, dummy;
    given = given ? given : &dummy;
    *given = 0;
    const char *got[QUIZ_QUESTIONS_MAX] = {0};
    size_t at[QUIZ_QUESTIONS_MAX] = {0}, blank[QUIZ_QUESTIONS_MAX] = {0};
    size_t badbyte[QUIZ_QUESTIONS_MAX] = {0};
    char esc[4 * QUIZ_TEXT_MAX];
    // numbered answers place themselves; in a file of them a blank line
    // says nothing
    int numbered = 0, started = 0;
    for (char *p = text; p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(text + len - p);
        char saved = p[l];
        p[l] = '\0';
        const char *rest;
        if (quiz_numbered(p, &rest))
            numbered = 1;
        p[l] = saved;
        p += l + 1;
    }
    size_t lineno = 0, next = 0;
    for (char *p = text; p < text + len;) {
        char *end = memchr(p, '\n', (size_t)(text + len - p));
        size_t l = end ? (size_t)(end - p) : (size_t)(text + len - p);
        p[l] = '\0';
        char *line = p;
        p += l + 1;
        lineno++;
        size_t bad = quiz_bad_byte(line, l);
        char *hash = strchr(line, '#');
        int comment = hash != NULL;
        if (hash)
            *hash = '\0';
        char *a = line;
        while (*a == ' ' || *a == '\t')
            a++;
        size_t al = strlen(a);
        while (al > 0 && strchr(" \t\r", a[al - 1]))
            a[--al] = '\0';
        if (!*a && comment)
            continue;
        unsigned long long s;
        int u;
        if (!started && *a && quiz_seed_line(a, &s))
            continue;
        if (!started && *a && quiz_upto_only_line(a, &u)) // a header's end
            continue;
        if (name_line(a))
            continue;
        const char *rest;
        size_t k = quiz_numbered(a, &rest);
        if (!*a) {
            if (!numbered && started && next < n && !blank[next]) {
                blank[next] = lineno;
                next++;
            }
            continue;
        }
        started = 1;
        size_t i = k ? k - 1 : next;
        if (*rest && i + 1 > *given)
            *given = i + 1;
        if (k > n) {
            say(fb, "%sline %zu: answers question %zu, but the quiz asks "
                        "%zu; it is not counted\n",
                    prefix, lineno, k, n);
            continue;
        }
        if (i >= n) {
            say(fb, "%sline %zu: '%s' is an answer beyond the %zu "
                        "questions; it is not counted\n",
                    prefix, lineno, quiz_escape(rest, strlen(rest), esc, sizeof esc), n);
            continue;
        }
        if (at[i]) {
            say(fb, "%sline %zu: a second answer to question %zu (the "
                        "first is on line %zu); it is not counted\n",
                    prefix, lineno, i + 1, at[i]);
            next = i + 1;
            continue;
        }
        at[i] = lineno;
        got[i] = rest;
        badbyte[i] = bad < l ? bad + 1 : 0;
        next = i + 1;
    }
    size_t right = 0;
    char where[2 * QUIZ_TEXT_MAX], shown[QUIZ_TEXT_MAX];
    for (size_t i = 0; i < n; i++) {
        const quiz_question *q = &z->qs[i];
        if (!at[i]) {
            where_str(where, sizeof where, q, i, blank[i]);
            if (blank[i])
                say(fb, "%s%s: no answer (a blank line); right: %s\n",
                        prefix, where, q->why);
            else
                say(fb, "%s%s: no answer (%s); right: %s\n", prefix, where,
                        numbered ? "no line numbered so" : "the answers end "
                                                           "before it",
                        q->why);
            continue;
        }
        where_str(where, sizeof where, q, i, at[i]);
        if (badbyte[i]) {
            const char *raw = got[i];
            say(fb, "%s%s: byte %zu of the line is a control character, "
                        "not text ('%s'); right: %s\n",
                    prefix, where, badbyte[i],
                    quiz_escape(raw, strlen(raw), esc, sizeof esc), q->why);
            continue;
        }
        int r = *got[i] ? quiz_check(q, got[i], shown, sizeof shown) : -2;
        if (r == 1) {
            right++;
            continue;
        }
        if (r == -2)
            say(fb, "%s%s: no answer (the line has its number only); "
                        "right: %s\n",
                    prefix, where, q->why);
        else if (r < 0)
            say(fb, "%s%s: '%s' is not an answer (%s); right: %s\n", prefix,
                    where, quiz_escape(got[i], strlen(got[i]), esc, sizeof esc),
                    quiz_not_an_answer, q->why);
        else
            say(fb, "%s%s: answered %s; right: %s\n", prefix, where, shown,
                    q->why);
    }
    return right;
}

/* Whether a and b ask the same questions with the same answers. */
static int same_questions(const quiz *a, const quiz *b)
{
    int same = a->n == b->n;
    for (size_t i = 0; same && i < a->n; i++)
        same = !strcmp(a->qs[i].ask, b->qs[i].ask) &&
               !strcmp(a->qs[i].answer, b->qs[i].answer);
    return same;
}

/* Each quiz of the seed, from the one of chapters 06 .. last (or of
 * QUIZ_LAST_IDEA, past which it does not change) down to 06's, the
 * sheet graded silently on a copy: the first with the most right, and
 * below it those that ask the same; and the first of fewer questions,
 * as many as the sheet answers, that it gets as many right. */
int quiz_fit_upto(const char *text, size_t len, unsigned long long seed,
                  int last, quiz_fit *fit)
{
    quiz *z = malloc(sizeof *z), *best = malloc(sizeof *best);
    char *copy = malloc(len + 1);
    int top = last < QUIZ_LAST_IDEA ? last : QUIZ_LAST_IDEA;
    *fit = (quiz_fit){.upto = last, .same_from = last, .also = -1};
    for (int u = top; z && best && copy && u >= QUIZ_FIRST_CHAPTER; u--) {
        quiz_case c;
        quiz_draw(seed, u, &c);
        quiz_build(&c, z);
        memcpy(copy, text, len);
        copy[len] = '\0';
        size_t given, r = quiz_grade_text(z, copy, len, NULL, "", &given);
        if (u == top) {
            fit->right_all = r;
            fit->given = given;
        }
        if (u == top || r > fit->right) {
            fit->upto = fit->same_from = u == top ? last : u;
            fit->right = r;
            fit->also = -1;
            *best = *z;
        } else if (same_questions(z, best)) {
            fit->same_from = u;
        } else if (r == fit->right && r > 0 && z->n == given &&
                   best->n != given && fit->also < 0) {
            fit->also = u;
        }
    }
    free(copy);
    free(best);
    free(z);
    return fit->upto;
}
//<
