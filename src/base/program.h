/* program.h: what every program using libmha does first: switch GSL's
 * aborting error handler off, catch the signals that would leave
 * temporaries behind, check at exit that stdout took every byte, make
 * seeded random number generators, and say which CBLAS the build uses. */
#ifndef MHA_PROGRAM_H
#define MHA_PROGRAM_H

#include <gsl/gsl_rng.h>

/* Call first in every program.  It
 *   - confines OpenBLAS to one thread when it is linked into the program
 *     from its static archive (threads_confine_blas in threads.h);
 *   - switches GSL's aborting error handler off, so failures come back as
 *     status codes (see error.h);
 *   - installs cleanup.h's handlers: SIGINT, SIGTERM, SIGQUIT and every
 *     other signal that ends a program (but a fault's) remove every
 *     temporary before the program ends by the signal, and
 *     SIGXFSZ is ignored, so a write beyond `ulimit -f` fails as a write;
 *   - checks stdout at exit (mha_stdout_check, then fclose): a program
 *     that ends with status 0 but whose output did not all reach stdout
 *     (a full disk, `> /dev/full`) prints one line on stderr,
 *         01_shapes_strides_views: cannot write to stdout: No space left on device
 *     and exits with status 1 instead.  A program that ends with another
 *     status has said why already; its stdout is closed quietly;
 *   - under a memory limit (ulimit -v) makes OpenBLAS take its buffer
 *     while that can be checked (threads_blas_reserve in threads.h).  When
 *     the limit leaves no room for it, the program would hang at its first
 *     matrix product: this says so in one line on stderr and exits with
 *     status 2 instead. */
void mha_program_init(void);

/* The same but the last point, for a program only some of whose commands
 * multiply matrices (mha: trace and quiz run on shapes alone): it never
 * exits, and the commands that do multiply call threads_blas_reserve
 * themselves before they start. */
void mha_program_init_lazy(void);

/* Whether stdout took everything printed so far: flushes it, then asks
 * ferror.  GSL_SUCCESS, or GSL_EFAILED with the message (error.h)
 *     cannot write to stdout: No space left on device
 * ("an earlier write failed" in place of the reason when that write was
 * the last, with nothing left to flush).  For a program that reports the
 * failure in its own words before it goes on (build/mha puts its outputs
 * in place only once stdout is complete). */
int mha_stdout_check(void);

/* A Mersenne Twister (gsl_rng_mt19937) seeded with seed: the same seed
 * gives the same numbers on every machine.  NULL when out of memory.
 * Free with gsl_rng_free. */
gsl_rng *mha_rng_new(unsigned long seed);

/* Which CBLAS gsl_blas_* calls end up in: "OpenBLAS <config>" or
 * "GSL reference CBLAS (libgslcblas)". */
const char *mha_cblas_name(void);

#endif
