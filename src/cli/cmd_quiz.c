//> handout
/* cmd_quiz.c: mha quiz, a case asked step by step, answered, graded
 * (the program: mha.c). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "args.h"
#include "commands.h"
#include "libmha.h"
#include "output.h"
#include "paths.h"
#include "quiz.h"

static const char usage_quiz[] =
    "usage: mha quiz [--seed S] [--answers FILE | --solution | --worksheet |\n"
    "                --json | --grade-dir DIR] [--review] [--up-to NN]\n"
    "\n"
    "Pick a small case by the seed S (batch, queries, keys, heads and their\n"
    "size, key-value heads, causal or not, valid_lens) and ask about the\n"
    "module's forward pass, step by step: the shape each step makes; for a\n"
    "reshape or permute, whether it is a view or a copy; the values\n"
    "repeat_interleave makes of valid_lens; and a few questions about the\n"
    "case (the weights' shape, which key-value head a query head reads, the\n"
    "keys a causal query sees, the cache's shape).  Answers are read from\n"
    "stdin, one a line, each marked right or wrong with the reason in this\n"
    "case; the last line is score: K/N.  Without --seed, a seed is drawn\n"
    "from the clock and shown.  The answers come from the case's sizes\n"
    "alone, so a student's copy, exercises unwritten, asks and grades the\n"
    "same.\n"
    "\n"
    "  --seed S         the case: a whole number from 0 to\n"
    "                   999999999999999999 (the same S, the same case)\n"
    "  --answers FILE   grade FILE: one answer a line, in order or numbered\n"
    "                   as the worksheet numbers them (12. (8, 2, 2), 12) view);\n"
    "                   # starts a comment; a blank line is no answer (in a\n"
    "                   file without numbers).  Its first line may name the\n"
    "                   seed (# mha quiz --seed 17), and then --seed may be\n"
    "                   left out.  UTF-8 with or without a byte-order mark,\n"
    "                   UTF-16, Windows line ends are all read.  Prints each\n"
    "                   wrong or missing answer with its question, line and\n"
    "                   the reason, then score: K/N.  FILE must be a regular\n"
    "                   file (a FIFO or a device is refused, not waited on)\n"
    "  --solution       print the answers in the form --answers reads, the\n"
    "                   seed on the first line\n"
    "  --worksheet      print the questions to hand out: a name line, a\n"
    "                   numbered blank for each answer, pages of 60 lines at\n"
    "                   most (A4 or Letter), no answer\n"
    "  --grade-dir DIR  grade every file in DIR (not those named .*), each by\n"
    "                   the seed (and --up-to) its first line names; print a\n"
    "                   CSV on stdout (file,seed,score,max) and each file's\n"
    "                   feedback on stderr; exit 1 when some file names no\n"
    "                   seed\n"
    "  --json           print the module's own trace of the case, JSON lines\n"
    "  --review         after the score, print every step with its answer\n"
    "  --up-to NN       ask only what chapters 06 .. NN teach (default: the\n"
    "                   last chapter of this copy): before 17 no grouped\n"
    "                   heads, before 16 no causal mask, before 07 no\n"
    "                   valid_lens, before 08 no question on the module's\n"
    "                   weights.  A sheet's first line names it (before 17),\n"
    "                   and grading takes it from there; given with\n"
    "                   --answers or --grade-dir, it must match the sheet's.\n"
    "                   A sheet that names none is graded as the quiz its\n"
    "                   answers fit best, and a note says which\n"
    "\n"
    "An answer is a shape as a Python tuple, (2, 4, 100) or (8,) (brackets\n"
    "are fine too); view or copy; values as a list, [3, 3, 2, 2]; or a\n"
    "number, 3.  Exit status: 0 when every answer is right, 1 when some are\n"
    "wrong or missing, 2 on bad input (one line on stderr).\n";

/* --- mha quiz ------------------------------------------------------- */

/* The most an answer file may hold: a quiz's answers are a few hundred
 * bytes. */
#define ANSWERS_MAX (1 << 20)

/* An answer file's text, decoded (quiz_decode), into *text; option names
 * it in messages ("--answers", or the folder of --grade-dir). */
static int read_answer_file(const char *option, const char *path, char **text,
                            size_t *len)
{
    FILE *f;
    *text = NULL;
    if (cli_open_input(option, path, &f))
        return CLI_USAGE;
    char *raw = malloc(ANSWERS_MAX + 1);
    if (!raw) {
        fclose(f);
        return cli_error("out of memory reading %s '%s'", option, path);
    }
    size_t n = fread(raw, 1, ANSWERS_MAX + 1, f);
    int status = CLI_OK;
    if (ferror(f))
        status = cli_error("cannot read %s '%s': %s", option, path,
                           strerror(errno));
    else if (n > ANSWERS_MAX)
        status = cli_error("%s '%s' is larger than %d bytes; an answer file "
                           "holds one short line a question",
                           option, path, ANSWERS_MAX);
    fclose(f);
    char why[QUIZ_TEXT_MAX];
    if (!status && quiz_decode(raw, n, text, len, why, sizeof why))
        status = cli_error("%s '%s' is %s", option, path, why);
    free(raw);
    return status;
}

/* The chapters of a sheet whose first line names none, graded without
 * --up-to: those whose quiz its answers fit (quiz_fit_upto), a week's
 * quiz typed without its --up-to being the likeliest reason.  Said on f
 * after prefix when they are fewer than this copy's, or when a shorter
 * quiz fits as well. */
static int fit_upto(FILE *f, const char *prefix, const char *path,
                    const char *text, size_t len, unsigned long long seed)
{
    quiz_fit fit;
    int upto = quiz_fit_upto(text, len, seed, MHA_CHAPTER, &fit);
    char chapters[48];
    if (fit.same_from < upto)
        snprintf(chapters, sizeof chapters, "%02d to %02d (one quiz)",
                 fit.same_from, upto);
    else
        snprintf(chapters, sizeof chapters, "%02d", upto);
    if (upto == MHA_CHAPTER && fit.also < 0)
        return upto;
    fprintf(f, "%snote: %s names no --up-to in its first line", prefix, path);
    if (upto < MHA_CHAPTER)
        fprintf(f, "; its answers fit the quiz of --up-to %s best (%zu "
                   "right, %zu as the quiz of all chapters, %02d .. %02d), so "
                   "it is graded as that one",
                chapters, fit.right, fit.right_all, QUIZ_FIRST_CHAPTER,
                MHA_CHAPTER);
    else
        fprintf(f, ", so it is graded as the quiz of all chapters, %02d .. "
                   "%02d", QUIZ_FIRST_CHAPTER, MHA_CHAPTER);
    if (fit.also >= 0)
        fprintf(f, "; its %zu answers are as many as the quiz of --up-to %02d "
                   "asks, which that one begins with: if --up-to %02d was the "
                   "class's, give it\n",
                fit.given, fit.also, fit.also);
    else
        fprintf(f, "; give --up-to NN to grade it as another\n");
    return upto;
}

/* The chapters a sheet is graded up to: those its first line names
 * (sheet, -1: none), which a given --up-to must match (option: its
 * value, -1: not given); else the option's, else all of this copy's.
 * -1, with why (room n), when they differ. */
static int sheet_upto(int sheet, int option, char *why, size_t n)
{
    if (sheet >= 0 && option >= 0 && sheet != option &&
        !(sheet >= QUIZ_LAST_IDEA && option >= QUIZ_LAST_IDEA)) {
        snprintf(why, n, "is for --up-to %02d (its first line), not --up-to %02d",
                 sheet, option);
        return -1;
    }
    // a later chapter's sheet whose quiz is this copy's (08 .. 15 in a
    // copy cut at 08) is graded as it names
    if (sheet >= QUIZ_FIRST_CHAPTER &&
        (sheet <= MHA_CHAPTER ||
         (sheet < QUIZ_LAST_IDEA && quiz_same_quiz(sheet, MHA_CHAPTER))))
        return sheet;
    if (sheet >= 0) {
        snprintf(why, n, "is for --up-to %02d (its first line), which is not "
                         "a chapter %02d .. %02d",
                 sheet, QUIZ_FIRST_CHAPTER, MHA_CHAPTER);
        return -1;
    }
    return option >= 0 ? option : MHA_CHAPTER;
}

/* The quiz's steps, each question under its step with its answer and
 * the reason in this case (--review). */
static void print_answers(const quiz *z, FILE *f)
{
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        fprintf(f, "%*s%s\n", indent, "", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++)
            fprintf(f, "%*s%3zu. %s\n", indent + 2, "", i + 1, z->qs[i].why);
    }
}

/* The questions one by one on stdout, the answers from stdin, each
 * marked: *right counts the right ones. */
static int quiz_walk(const quiz *z, size_t *right)
{
    int echo = !isatty(STDIN_FILENO); // a piped answer shows in the transcript
    char *line = NULL, shown[QUIZ_TEXT_MAX];
    char typed[2048]; // an answer as the student sent it, escaped
    size_t cap = 0;
    int status = CLI_OK;
    for (size_t l = 0; l < z->nlines && !status; l++) {
        const quiz_line *ln = &z->lines[l];
        int indent = 2 * ln->depth;
        printf("%*s%s\n", indent, "", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count && !status; i++) {
            const quiz_question *q = &z->qs[i];
            for (;;) {
                printf("%*s%3zu. %s? ", indent + 2, "", i + 1, q->ask);
                fflush(stdout);
                errno = 0;
                ssize_t len = getline(&line, &cap, stdin);
                if (len < 0) {
                    printf("\n");
                    status = ferror(stdin)
                                 ? cli_error("cannot read stdin after %zu of "
                                             "%zu answers: %s",
                                             i, z->n, strerror(errno))
                                 : cli_error("stdin ended after %zu of %zu "
                                             "answers",
                                             i, z->n);
                    break;
                }
                // what was typed, escaped: a piped \x1b[2J must not
                // clear the screen; a control character is no answer
                size_t bad = quiz_bad_byte(line, (size_t)len);
                if (bad < (size_t)len) {
                    size_t end = (size_t)len;
                    while (end > 0 && strchr("\r\n", line[end - 1]))
                        end--;
                    if (echo)
                        printf("%s\n", quiz_escape(line, end, typed, sizeof typed));
                    printf("%*s     not an answer: %s is a control "
                           "character\n",
                           indent + 2, "", quiz_escape(line + bad, 1, typed, sizeof typed));
                    continue;
                }
                char *hash = strchr(line, '#');
                if (hash)
                    *hash = '\0';
                size_t al = strlen(line);
                while (al > 0 && strchr(" \t\r\n", line[al - 1]))
                    line[--al] = '\0';
                const char *a;
                quiz_numbered(line, &a);
                if (echo)
                    printf("%s\n", quiz_escape(a, strlen(a), typed, sizeof typed));
                int r = *a ? quiz_check(q, a, shown, sizeof shown) : -1;
                if (r >= 0) {
                    *right += (size_t)r;
                    if (r)
                        printf("%*s     right\n", indent + 2, "");
                    else
                        printf("%*s     wrong: %s\n", indent + 2, "", q->why);
                    break;
                }
                printf("%*s     not an answer: give %s\n", indent + 2, "",
                       quiz_not_an_answer);
            }
        }
    }
    free(line);
    return status;
}

static int quiz_ask(const quiz *z, int review)
{
    // a directory opens as stdin but reads as nothing: say so, before
    // any question
    struct stat st;
    if (fstat(STDIN_FILENO, &st) == 0 && S_ISDIR(st.st_mode))
        return cli_error("stdin is a directory: give the answers on stdin, "
                         "one a line, or grade a file with --answers FILE");
    printf("mha quiz --seed %llu: ", z->c.seed);
    quiz_describe(stdout, &z->c);
    printf("\n%zu questions on the module's forward pass, step by step: a "
           "shape, as (2, 4, 100);\nview or copy; values, as [3, 3, 2, 2]; "
           "or a number.\n\n",
           z->n);
    size_t right = 0;
    int status = quiz_walk(z, &right);
    if (!status) {
        printf("\nscore: %zu/%zu\n", right, z->n);
        if (review) {
            printf("\nThe steps and their answers:\n");
            print_answers(z, stdout);
        }
        status = right == z->n ? 0 : 1;
    }
    return status;
}

static void quiz_solution(const quiz *z)
{
    char upto[32];
    printf("# mha quiz --seed %llu%s: ", z->c.seed,
           quiz_upto_option(&z->c, upto, sizeof upto));
    quiz_describe(stdout, &z->c);
    if (z->c.upto >= 8) { // mha trace runs the module of chapter 08
        printf("\n# the same questions: ");
        quiz_trace_command(stdout, &z->c);
    }
    printf("\n");
    for (size_t l = 0; l < z->nlines; l++) {
        const quiz_line *ln = &z->lines[l];
        if (!ln->count)
            continue;
        printf("# %s\n", ln->text);
        for (size_t i = ln->first; i < ln->first + ln->count; i++)
            printf("%zu. %s\n", i + 1, z->qs[i].answer);
    }
}

static int quiz_grade_file(const char *path, const cli_option *seed_opt,
                           unsigned long long seed, int option_upto, int review)
{
    char *text;
    size_t len;
    if (read_answer_file("--answers", path, &text, &len))
        return CLI_USAGE;
    unsigned long long named;
    int sheet, upto;
    char why[160];
    int names = quiz_sheet_header(text, &named, &sheet);
    int status = CLI_OK;
    if ((upto = sheet_upto(sheet, option_upto, why, sizeof why)) < 0)
        status = cli_error("--answers '%s' %s", path, why);
    else if (seed_opt->value && names && named != seed)
        status = cli_error("--answers '%s' is for --seed %llu (its first "
                           "line), not --seed %llu",
                           path, named, seed);
    else if (!seed_opt->value && !names)
        status = cli_error("--answers '%s' names no seed in its first line "
                           "(\"# mha quiz --seed 17\"): give --seed S (and "
                           "--up-to NN, for a quiz of fewer chapters)",
                           path);
    if (!status) {
        quiz_case c;
        static quiz z;
        unsigned long long s = seed_opt->value ? seed : named;
        if (sheet < 0 && option_upto < 0) {
            char quoted[300];
            snprintf(quoted, sizeof quoted, "'%.280s'", path);
            upto = fit_upto(stderr, "mha quiz: ", quoted, text, len, s);
        }
        quiz_draw(s, upto, &c);
        quiz_build(&c, &z);
        size_t right = quiz_grade_text(&z, text, len, stdout, "", NULL);
        printf("score: %zu/%zu\n", right, z.n);
        if (review) {
            printf("\nThe steps and their answers:\n");
            print_answers(&z, stdout);
        }
        status = right == z.n ? 0 : 1;
    }
    free(text);
    return status;
}

/* A CSV field a spreadsheet will not run (OWASP's rule for CSV
 * injection): text starting with =, +, -, @, a tab or a carriage return
 * behind a single quote; then quoted when it holds a comma, a quote or a
 * line break (RFC 4180). */
static void csv_field(const char *s)
{
    const char *lead = *s && strchr("=+-@\t\r", *s) ? "'" : "";
    if (!strpbrk(s, ",\"\r\n")) {
        printf("%s%s", lead, s);
        return;
    }
    printf("\"%s", lead);
    for (; *s; s++) {
        if (*s == '"')
            putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static int skip_dot(const struct dirent *e)
{
    return e->d_name[0] != '.';
}

/* --grade-dir DIR: every answer file in DIR (not those whose names start
 * with a dot), in name order, graded by the seed (and the --up-to) its
 * first line names; a CSV on stdout (file, seed, score, max), the
 * feedback on stderr. */
static int quiz_grade_dir(const char *dir, int option_upto)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return cli_error("cannot read --grade-dir '%s': %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return cli_error("--grade-dir '%s' is not a folder", dir);
    struct dirent **names;
    int count = scandir(dir, &names, skip_dot, alphasort);
    if (count < 0)
        return cli_error("cannot read --grade-dir '%s': %s", dir, strerror(errno));
    static quiz z;
    int status = CLI_OK;
    size_t ungraded = 0;
    printf("file,seed,score,max\n");
    for (int i = 0; i < count; i++) {
        const char *name = names[i]->d_name;
        size_t plen = strlen(dir) + strlen(name) + 2;
        char *path = malloc(plen);
        char *text = NULL;
        size_t len = 0;
        unsigned long long seed;
        int ok = 0, sheet, upto = 0;
        char why[160];
        if (!path) {
            status = cli_error("out of memory grading --grade-dir '%s'", dir);
        } else {
            snprintf(path, plen, "%s/%s", dir, name);
            if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
                free(path);
                free(names[i]);
                continue;
            }
            if (read_answer_file("--grade-dir", path, &text, &len) == CLI_OK) {
                if (!quiz_sheet_header(text, &seed, &sheet))
                    fprintf(stderr, "mha quiz: %s: its first line names no "
                                    "seed (\"# mha quiz --seed 17\"); not "
                                    "graded\n",
                            path);
                else if ((upto = sheet_upto(sheet, option_upto, why,
                                            sizeof why)) < 0)
                    fprintf(stderr, "mha quiz: %s %s; not graded\n", path, why);
                else
                    ok = 1;
            }
        }
        if (ok) {
            quiz_case c;
            char prefix[512];
            snprintf(prefix, sizeof prefix, "%.500s: ", name);
            fflush(stdout);
            if (sheet < 0 && option_upto < 0)
                upto = fit_upto(stderr, prefix, "the sheet", text, len, seed);
            quiz_draw(seed, upto, &c);
            quiz_build(&c, &z);
            size_t right = quiz_grade_text(&z, text, len, stderr, prefix, NULL);
            fflush(stderr);
            csv_field(name);
            printf(",%llu,%zu,%zu\n", seed, right, z.n);
        } else {
            fflush(stderr);
            csv_field(name);
            printf(",,,\n");
            ungraded++;
        }
        free(text);
        free(path);
        free(names[i]);
    }
    free(names);
    if (!status && ungraded)
        status = 1;
    return status;
}

int cmd_quiz(int argc, char **argv)
{
    cli_option opts[] = {{"--seed", 1, NULL},      {"--answers", 1, NULL},
                         {"--solution", 0, NULL},  {"--json", 0, NULL},
                         {"--worksheet", 0, NULL}, {"--grade-dir", 1, NULL},
                         {"--review", 0, NULL},    {"--up-to", 1, NULL}};
    int status = cli_parse(argc, argv, opts, NOPTS(opts));
    if (status == CLI_HELP)
        return cli_print_usage(usage_quiz);
    if (status)
        return status;
    // --answers, --solution, --json, --worksheet, --grade-dir: one, or none
    const cli_option *mode;
    if (cli_at_most_one(&opts[1], 5, &mode))
        return CLI_USAGE;
    int review = opts[6].value != NULL;
    if (review && mode && mode != &opts[1])
        return cli_error("--review goes with grading, not with %s", mode->name);
    unsigned long long seed = 0;
    if (cli_parse_seed(&opts[0], &seed))
        return CLI_USAGE;
    // the chapters taught: this copy's, or fewer (--up-to); a sheet
    // graded names its own (sheet_upto)
    size_t upto = MHA_CHAPTER;
    if (cli_parse_count(&opts[7], 99, &upto))
        return CLI_USAGE;
    if (upto > MHA_CHAPTER)
        return cli_error("--up-to %s: this copy ends at chapter %02d, so its "
                         "quiz asks chapters %02d .. %02d at most",
                         opts[7].value, MHA_CHAPTER, QUIZ_FIRST_CHAPTER,
                         MHA_CHAPTER);
    int option_upto = opts[7].value ? (int)upto : -1;
    if (upto < QUIZ_FIRST_CHAPTER)
        return cli_error("the quiz starts at chapter %02d (%s); %s %02zu",
                         QUIZ_FIRST_CHAPTER, QUIZ_FIRST_TITLE,
                         opts[7].value ? "--up-to is" : "this copy ends at chapter",
                         upto);
    if (mode == &opts[5]) {
        if (opts[0].value)
            return cli_error("--grade-dir takes each file's seed from its "
                             "first line; leave out --seed");
        return cli_flush_stdout(quiz_grade_dir(opts[5].value, option_upto));
    }
    if (mode == &opts[1])
        return cli_flush_stdout(quiz_grade_file(opts[1].value, &opts[0], seed,
                                                 option_upto, review));
    if (!opts[0].value) {
        if (mode)
            return cli_error("%s needs --seed S: its answers are those of one "
                             "case",
                             mode->name);
        seed = (unsigned long long)time(NULL) % 100000;
    }
    quiz_case c;
    static quiz z;
    quiz_draw(seed, (int)upto, &c);
    quiz_build(&c, &z);
    if (mode == &opts[3]) {
        // the module's own trace of the case, as mha trace --json prints it
//> 08
        cmd_trace_case tc = {.B = c.B, .Lq = c.Lq, .Lk = c.Lk, .D = c.D,
                             .h = c.h, .G = c.G, .causal = c.causal};
        status = cmd_run_trace(&tc, c.has_lens ? c.lens : NULL, SHOW_JSON);
//<
/*< 08
        status = cli_error("--json traces the module, which comes with "
                           "chapter 08; this copy ends at chapter %02d",
                           MHA_CHAPTER);
*/
    } else if (mode == &opts[2]) {
        quiz_solution(&z);
    } else if (mode == &opts[4]) {
        status = quiz_print_worksheet(&z, 0);
    } else {
        status = quiz_ask(&z, review);
    }
    return cli_flush_stdout(status);
}
//<
