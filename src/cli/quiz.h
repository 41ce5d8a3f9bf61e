//> handout
/* quiz.h: the module's forward pass as questions, for mha quiz and the
 * worksheet of mha trace --quiz.
 *
 * The questions come from the case's sizes alone, by the rules of shapes
 * and strides, not from a run of the module: a student's copy, whose
 * transpose_qkv or repeat_valid_lens is not written yet (or is wrong),
 * asks the same questions and holds the same answers as the teacher's.
 * Each reshape is taken as splits and merges of axes: a split is always a
 * view, and axes merge without a copy only when each one's stride is the
 * next one's size times its stride (sizes of 1 aside), which is why a
 * question's reason can name the strides of its case.  A question shows
 * its step without what gives the answer away:
 *
 *     transpose_qkv(h=2) on step 1:
 *       step 2: reshape(...) on step 1
 *          2. its shape?
 *          3. view or copy?
 */
#ifndef MHA_CLI_QUIZ_H
#define MHA_CLI_QUIZ_H

#include <stddef.h>
#include <stdio.h>

#include "args.h" /* CLI_SEED_MAX */

/* --- one case ------------------------------------------------------- */

/* The chapter whose idea the quiz starts from (transpose_qkv's split
 * into heads), and its title for the line that says so. */
#define QUIZ_FIRST_CHAPTER 6
#define QUIZ_FIRST_TITLE "splitting heads"

/* The last chapter whose idea changes what the quiz draws (grouped
 * heads); a quiz up to it or any later chapter is the same quiz, and
 * its sheets name no --up-to. */
#define QUIZ_LAST_IDEA 17

/* The most examples a drawn case has. */
#define QUIZ_BATCH_MAX 3

/* The most valid lengths a case keeps, and the most values (B*h) a
 * question about repeat_interleave asks for. */
#define QUIZ_LENS_MAX 16

/* A case: d2l's module with h heads of D/h features, G key-value heads
 * (G divides h; G = h is plain multi-head attention), causal or not,
 * queries (B, Lq, D), keys and values (B, Lk, D), and one valid length
 * per example (lens[b], when has_lens).  A drawn case has B 1-3, Lq 1-4,
 * Lk 2-6 (at least Lq when causal), h 1-4, G any divisor of h, D/h 2-5,
 * causal one time in three, each valid length 1 to Lk: sizes of 1 are
 * drawn too, since they are what turns a copy into a view.  upto is the
 * last chapter whose ideas the quiz may ask (QUIZ_FIRST_CHAPTER or
 * later): a case drawn for an earlier chapter than 17 has G = h, than 16
 * no causal mask, than 07 no valid lengths; and the question about the
 * module's weights comes with chapter 08. */
typedef struct quiz_case {
    unsigned long long seed;
    int seeded; /* 1 for a drawn case (mha quiz), 0 for mha trace's sizes */
    int upto;   /* the last chapter taught */
    size_t B, Lq, Lk, D, h, G;
    int causal;
    int has_lens;
    double lens[QUIZ_LENS_MAX]; /* the first QUIZ_LENS_MAX of them */
} quiz_case;

/* The case of seed (0 .. CLI_SEED_MAX) for a class taught up to chapter
 * upto: the seed is mixed into 64 bits and each size read off them in
 * turn, every size of its range as likely as any other; every digit of
 * the seed counts.  The sizes are the same for every upto; what upto has
 * not taught yet (grouped heads, the causal mask, valid lengths) is then
 * left out. */
void quiz_draw(unsigned long long seed, int upto, quiz_case *c);

/* 1 when the quizzes up to chapters a and b ask the same questions: no
 * chapter whose idea changes what the quiz asks (07, 08, 16 and
 * QUIZ_LAST_IDEA: quiz_draw and quiz_build's) lies between them, as
 * between 08 and 15; else 0. */
int quiz_same_quiz(int a, int b);

/* The case in one line: "queries (2, 3, 8), keys and values (2, 4, 8):
 * 2 heads of 4 features, causal, valid_lens [3, 2]". */
void quiz_describe(FILE *f, const quiz_case *c);
/* "[3, 3, 2, 2]": n values, each exact (trace_number_str), into buf. */
void quiz_values_str(char *buf, size_t size, const double *v, size_t n);

/* " --up-to 08" when the case's upto is before QUIZ_LAST_IDEA (a quiz
 * of fewer ideas than the whole), else "": into buf (room n),
 * returned.  A sheet's first line names it, so that the sheet is graded
 * as the quiz it was drawn for wherever it is graded. */
const char *quiz_upto_option(const quiz_case *c, char *buf, size_t n);

/* The mha trace command that asks the same questions: "mha trace --batch
 * 2 --queries 3 ... --quiz". */
void quiz_trace_command(FILE *f, const quiz_case *c);

/* --- its questions -------------------------------------------------- */

/* What a question asks, and so the form of its answer. */
typedef enum quiz_form {
    QUIZ_SHAPE,  /* a shape: (2, 4, 100) */
    QUIZ_KIND,   /* view or copy */
    QUIZ_VALUES, /* the values a step makes: [3, 3, 2, 2] */
    QUIZ_NUMBER  /* one whole number: a head, a count */
} quiz_form;

#define QUIZ_TEXT_MAX 160
#define QUIZ_QUESTIONS_MAX 48
#define QUIZ_LINES_MAX 48

typedef struct quiz_question {
    quiz_form form;
    size_t step;                 /* the step it asks about; 0: the case */
    char ask[QUIZ_TEXT_MAX];     /* "its shape", "view or copy" ... */
    char answer[QUIZ_TEXT_MAX];  /* "(2, 3, 8)", "copy", "[3, 3]", "1" */
    char why[4 * QUIZ_TEXT_MAX]; /* the answer and its reason in this case */
} quiz_question;

/* A line of the quiz: a step ("step 3: permute(0, 2, 1, 3) on step 2",
 * step 3) or a heading (step 0), at depth (indent 2*depth), and the
 * questions asked under it, qs[first .. first + count - 1]. */
typedef struct quiz_line {
    int depth;
    size_t step;
    char text[QUIZ_TEXT_MAX];
    size_t first, count;
} quiz_line;

typedef struct quiz {
    quiz_case c;
    quiz_line lines[QUIZ_LINES_MAX];
    size_t nlines;
    quiz_question qs[QUIZ_QUESTIONS_MAX];
    size_t n;
} quiz;

/* The questions of case c, in order, into z: the split of Q into heads
 * asked step by step (shape, view or copy); K's and V's splits by their
 * results; the valid lengths per head (shape, and the values when B*h is
 * at most QUIZ_LENS_MAX and the mask is not causal); the attention (and
 * the grouping of heads when G < h; with causal or grouped heads the
 * lengths are one per query row first); the join and the output; then
 * questions about the case (the weights' shape; with G < h, which
 * key-value head a query head reads; when causal, the keys the first
 * query sees and the key cache's shape after Lk steps of decoding).
 * The same case always gives the same questions. */
void quiz_build(const quiz_case *c, quiz *z);

/* --- answers -------------------------------------------------------- */

/* A line as an answer file or stdin gives it, comments already cut and
 * trimmed: its question number when it starts with one ("12. (8, 2, 2)",
 * "12) view", "12: 3"; else 0) and the answer after it (*rest; "" when
 * there is none). */
size_t quiz_numbered(const char *line, const char **rest);

/* answer (a line's answer, numbering cut) against q: 1 right, 0 wrong,
 * -1 when it is no answer of any form (then shown is empty).  shown (room
 * n) gets the answer in q's form ("(2,4,100)" -> "(2, 4, 100)", "View" ->
 * "view", "[3, 3, 10]" for a shape -> "(3, 3, 10)").  A shape or values
 * may come in parentheses, brackets, or neither; a number bare. */
int quiz_check(const quiz_question *q, const char *answer, char *shown,
               size_t n);

/* Where a line of answers (len bytes, its newline included) holds a
 * byte that no answer may: a control character (NUL too, and DEL) other
 * than a tab, the newline that ends the line, or a carriage return right
 * before it.  Its offset, or len when there is none. */
size_t quiz_bad_byte(const char *line, size_t len);

/* text (len bytes) as a message may quote it, nothing raw: printable
 * ASCII as it is, a tab, carriage return and newline as \t, \r and \n,
 * every other byte as \xNN; into buf (size n), cut short when it does
 * not fit; returns buf. */
char *quiz_escape(const char *text, size_t len, char *buf, size_t n);

/* An answer file's text as UTF-8 (or ASCII), in a new string the caller
 * frees (*out, *out_len): a UTF-8 byte-order mark is dropped, UTF-16
 * (with its mark, or without one when every other byte is NUL) is
 * decoded.  0, or -1 with why (room n) saying what the text is
 * ("UTF-32", "UTF-16 that does not decode") or "out of memory". */
int quiz_decode(const char *text, size_t len, char **out, size_t *out_len,
                char *why, size_t n);

/* The seed a line names ("# mha quiz --seed 17: ...", "seed: 17"): 1
 * with *seed, or 0 when it names none. */
int quiz_seed_line(const char *line, unsigned long long *seed);

/* The chapter a line's "--up-to NN" names ("# mha quiz --seed 17 --up-to
 * 10: ..."): 1 with *upto, or 0 when it names none (or no chapter of
 * two digits at most). */
int quiz_upto_line(const char *line, int *upto);

/* A line that holds nothing but "--up-to NN" (behind a '#' or not): the
 * end of a first line that a student typed over two lines, as a
 * worksheet wraps it.  1 with *upto, else 0. */
int quiz_upto_only_line(const char *line, int *upto);

/* An answer file's header: its first line that is not blank, the seed
 * it names (1 when it names one, with *seed) and the chapter its
 * --up-to names (*upto, -1 for none), or the next line's, when that
 * line is its --up-to alone. */
int quiz_sheet_header(const char *text, unsigned long long *seed, int *upto);

/* What an answer looks like, for a message about one that is none. */
extern const char quiz_not_an_answer[];

/* Grades one answer text against z: each wrong, unreadable or missing
 * answer with its question number and line on fb (nothing when fb is
 * NULL), each line after prefix; returns the count of right answers, and
 * in *given (unless NULL) the number of the last question the text
 * answers, those beyond z's counted.  text (len bytes) is cut into
 * lines, so it is changed. */
size_t quiz_grade_text(const quiz *z, char *text, size_t len, FILE *fb,
                       const char *prefix, size_t *given);

/* What quiz_fit_upto found: the quiz a sheet fits (of chapters 06 ..
 * upto, the same as 06 .. same_from), its right answers in it and in the
 * quiz of all chapters, how many questions it answers (given), and a
 * quiz of fewer questions it answers as many right, whose count of
 * questions it answers exactly (also, -1: none): a prefix of the other,
 * which the sheet alone cannot tell from it. */
typedef struct quiz_fit {
    int upto, same_from, also;
    size_t right, right_all, given;
} quiz_fit;

/* The chapters a sheet that names none was most likely written for: of
 * the quizzes of seed cut at chapters 06 .. last, the one it gets the
 * most right (the later one on a tie: the quiz of all of them, last,
 * when nothing tells them apart), returned and in *fit.  A sheet lined
 * up against another quiz's questions gets few right. */
int quiz_fit_upto(const char *text, size_t len, unsigned long long seed,
                  int last, quiz_fit *fit);

/* The quiz as a printable worksheet on stdout, in pages of 60 lines of
 * at most 78 characters, a blank to write in after each question (the
 * answers too when answers is 1).  0, or 2 after one line when memory
 * or stdout fails. */
int quiz_print_worksheet(const quiz *z, int answers);

#endif
//<
