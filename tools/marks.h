/* marks.h: the chapter marks in the sources, and the code as of a chapter.
 *
 * The project is one codebase whose lines are marked with the chapter
 * that adds them, as Crafting Interpreters marks its snippets.  A mark is
 * a line of its own (any indentation):
 *
 *     //> NN          the lines up to the matching //< are added by
 *     ...             chapter NN (01 .. 98), or by "full": the full build
 *     //<             only (the CLI, the fast path, the tools), or by
 *                     "handout": every cut (a snapshot, a student's
 *                     handout) but never a page of the book: the mha
 *                     program, .npy files, the grading; chapter marks
 *                     inside it cut the program by chapter
 *
 * and a block comment that opens with "/" "*< NN" on a line of its own
 * and closes with a line holding only its end: the lines between are code
 * that the chapters before NN have and chapter NN replaces (with lines it
 * marks "//> NN"); the full source keeps them as that comment, so they
 * must hold no block comment themselves.
 * and in a Makefile or a shell script "#> NN" and "#<".  Marks nest: a
 * line belongs to the code as of chapter N when every mark around it
 * allows N.  A file that no chapter before N has (it is wholly inside a
 * mark) is left out of N's snapshot.  Lines outside every mark belong to
 * every chapter.  The marks themselves are never part of a snapshot or of
 * a page of the book.
 */
#ifndef MHA_MARKS_H
#define MHA_MARKS_H

#include <stddef.h>

#define MARKS_FULL 99 /* "full": the chapter number of the full build */
#define MARKS_HANDOUT 100 /* "handout": a mark's number for the grading */
/* ch | MARKS_WITH_HANDOUT: the code as of ch and the lines marked
 * "handout", as a student's handout of chapters 01 .. ch has them */
#define MARKS_WITH_HANDOUT 0x100

/* What each line of a file is, as of chapter `ch` (1 .. MARKS_FULL). */
typedef struct marks_line {
    int keep;    /* 1: part of the code as of ch (a mark line never is) */
    int chapter; /* the chapter that adds it: the innermost "//> NN"
                    around it, 0 outside every mark */
} marks_line;

/* Classify the n lines of a file (without their newlines) as of chapter
 * ch (1 .. MARKS_FULL, or'ed with MARKS_WITH_HANDOUT for a handout's
 * cut) into out[0 .. n-1].  0 on success; on a malformed mark (a //< with
 * no //> open, a mark left open at the end, a chapter that is not 01 ..
 * 98 or "full", a replaced block inside another replaced block) -1, with
 * a message naming the line (1-based) in err. */
int marks_classify(char *const *lines, size_t n, int ch, marks_line *out,
                   char *err, size_t errn);

/* "08" -> 8, "full" -> MARKS_FULL, "handout" -> MARKS_HANDOUT, anything
 * else -> -1. */
int marks_chapter(const char *s);

#endif
