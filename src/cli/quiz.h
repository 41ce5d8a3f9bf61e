/* quiz.h: a shape trace with its answers hidden, for the exercises.
 *
 * quiz_hide reads the records of a trace log (trace.h) and prints each as
 * the text trace does, except that a record that makes a tensor shows a
 * numbered blank "?1", "?2" ... in place of its output shape and symbolic
 * name; the answers list the blanks in order:
 *
 *     W_q: x W^T             new   (1, 2, 16) -> ?1
 *     ...
 *     ?1   (1, 2, 16)        (B, Lq, d_model)
 *
 * Records with no output (the header lines of composite steps, which show
 * only their input, and notes) print as they are.
 */
#ifndef MHA_CLI_QUIZ_H
#define MHA_CLI_QUIZ_H

#include <stddef.h>

#include "trace.h"

/* The question text and the answer lines for the records of log, in new
 * buffers the caller frees; *count blanks, numbered from first.
 * GSL_SUCCESS, or GSL_ENOMEM (with a message) when memory runs out or the
 * log lost a record for want of it. */
int quiz_hide(const trace_log *log, size_t first, char **questions,
              char **answers, size_t *count);

/* One answer line, as quiz_hide writes them, into buf (size n). */
void quiz_answer(char *buf, size_t n, size_t number, const char *shape,
                 const char *sym);

#endif
