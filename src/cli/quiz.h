/* quiz.h: a shape trace with its answers hidden, for the exercises.
 *
 * Every trace line that produces a tensor reads "... <inputs> -> <output>
 * <symbolic>" (trace.h).  quiz_hide keeps each line up to its last "-> "
 * and puts a numbered blank "?1", "?2" ... where the output shape and its
 * symbolic name were; the answers list the blanks in order:
 *
 *     W_q: x W^T             new   (1, 2, 16) -> ?1
 *     ...
 *     ?1   (1, 2, 16)        (B, Lq, d_model)
 *
 * Header lines of composite steps (no "->") show only their input and
 * stay as they are.
 */
#ifndef MHA_CLI_QUIZ_H
#define MHA_CLI_QUIZ_H

#include <stddef.h>

/* The question text and the answer lines for trace, in new buffers the
 * caller frees; *count blanks, numbered from first.  GSL_SUCCESS or
 * GSL_ENOMEM (with a message). */
int quiz_hide(const char *trace, size_t first, char **questions,
              char **answers, size_t *count);

/* One answer line, as quiz_hide writes them, into buf (size n). */
void quiz_answer(char *buf, size_t n, size_t number, const char *shape,
                 const char *sym);

#endif
