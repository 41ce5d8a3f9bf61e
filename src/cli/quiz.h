//> full
/* quiz.h: the module's forward pass as questions, for mha quiz and the
 * worksheet of mha trace --quiz.
 *
 * The questions come from the records of a trace log (trace.h): each step
 * that makes a tensor asks its shape, a reshape or permute also asks view
 * or copy, and repeat_interleave asks the values it makes.  A question
 * shows its step without what gives the answer away (quiz_show):
 *
 *     transpose_qkv(h=2) on step 1:
 *       step 2: reshape(...) on step 1
 *         2. its shape?
 *         3. view or copy?
 */
#ifndef MHA_CLI_QUIZ_H
#define MHA_CLI_QUIZ_H

#include <stddef.h>

#include "trace.h"

/* --- mha quiz: one case, asked step by step ----------------------- */

/* The most examples a drawn case has. */
#define QUIZ_BATCH_MAX 3

/* The largest seed: 18 digits. */
#define QUIZ_SEED_MAX 999999999999999999ULL

/* A case: small sizes, d2l's module with h heads of D/h features,
 * queries (B, Lq, D), keys and values (B, Lk, D), and one valid length
 * per example, each from a small range so that every shape can be worked
 * out by hand, and each range wide enough that the quiz asks something
 * of chapters 06 and 07: B 2-3, Lq 2-5, Lk 2-6, h 2-4, D/h 2-5, each
 * valid length 1 to Lk. */
typedef struct quiz_case {
    unsigned long long seed;
    size_t B, Lq, Lk, D, h;
    double lens[QUIZ_BATCH_MAX];
} quiz_case;

/* How many cases there are: 25,440. */
size_t quiz_cases(void);

/* The case of seed (0 .. QUIZ_SEED_MAX): every digit of the seed counts,
 * so 1 and 4294967297 ask different cases, and so do 0 and 4357 (both
 * pairs share one case under a 32-bit generator's seeding).  The seed is
 * mixed into 64 bits and picks one of the quiz_cases() cases, each as
 * likely as any other: two seeds ask the same case only by chance, 1 in
 * 25,440. */
void quiz_draw(unsigned long long seed, quiz_case *c);

/* Run the module on c's shapes alone and keep its records in log
 * (trace_log_free frees them, also after a failure). */
int quiz_trace(const quiz_case *c, trace_log *log);

/* What a question asks, and so the form of its answer. */
typedef enum quiz_form {
    QUIZ_SHAPE, /* the step's output shape: (2, 4, 100) */
    QUIZ_KIND,  /* view or copy */
    QUIZ_LENS   /* the values repeat_interleave makes: [3, 3, 2, 2] */
} quiz_form;

typedef struct quiz_question {
    quiz_form form;
    size_t step;   /* 1, 2 ... : the record's number among the steps */
    size_t record; /* its index in the log */
    char answer[TRACE_SHAPE_MAX]; /* as quiz_parse writes it */
} quiz_question;

/* The questions for the records of log, in order, in a new array the
 * caller frees: each step that makes a tensor asks its shape, a view or
 * a copy asks which, and repeat_interleave asks its values (only when c,
 * the case that gives them, is not NULL). */
int quiz_questions(const quiz_case *c, const trace_log *log,
                   quiz_question **qs, size_t *n);

/* One answer as written (a line, any comment already cut off) into its
 * form and its canonical text (room n): "(2,4,100)" -> "(2, 4, 100)",
 * "View" -> "view", "[3,3, 2]" -> "[3, 3, 2]".  0, or -1 when it is none
 * of the three forms. */
int quiz_parse(const char *text, quiz_form *form, char *canon, size_t n);

/* Where a line of answers (len bytes as getline read it, its newline
 * included) holds a byte that no answer may: a control character (NUL
 * too, and DEL) other than a tab, the newline that ends the line, or a
 * carriage return right before it.  Its offset, or len when there is
 * none.  "view\0garbage" must not read as "view". */
size_t quiz_bad_byte(const char *line, size_t len);

/* text (len bytes) as a message may quote it, nothing raw: printable
 * ASCII as it is, a tab, carriage return and newline as \t, \r and \n,
 * every other byte as \xNN ("\x1b[2J"
 * shows, instead of clearing the screen); into buf (size n), cut short
 * when it does not fit; returns buf. */
char *quiz_escape(const char *text, size_t len, char *buf, size_t n);

/* The case in one line: "queries (2, 3, 8), keys and values ..." */
void quiz_describe(FILE *f, const quiz_case *c);

/* Record r as a question shows it, into buf (size n): its op, with the
 * arguments that would give its shape away left out, and its inputs,
 * each a shape the case gives or "step K" for a step's output (ids:
 * the output ids of steps 1, 2 ...; nsteps of them so far). */
char *quiz_show(const trace_record *r, const unsigned long *ids,
                size_t nsteps, char *buf, size_t n);

#endif
//<
