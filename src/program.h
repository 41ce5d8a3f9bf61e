/* program.h: what every program using libmha does first: switch GSL's
 * aborting error handler off, make seeded random number generators, and
 * say which CBLAS the build uses. */
#ifndef MHA_PROGRAM_H
#define MHA_PROGRAM_H

#include <gsl/gsl_rng.h>

/* Call first in every program: switches GSL's aborting error handler off,
 * so failures come back as status codes (see error.h), and under a memory
 * limit (ulimit -v) makes OpenBLAS take its buffer while that can be
 * checked (threads_blas_reserve in threads.h).  When the limit leaves no
 * room for it, the program would hang at its first matrix product: this
 * says so in one line on stderr and exits with status 2 instead. */
void mha_program_init(void);

/* The same for a program only some of whose commands multiply matrices
 * (mha: trace and quiz run on shapes alone): it never exits, and the
 * commands that do multiply call threads_blas_reserve themselves before
 * they start. */
void mha_program_init_lazy(void);

/* A Mersenne Twister (gsl_rng_mt19937) seeded with seed: the same seed
 * gives the same numbers on every machine.  NULL when out of memory.
 * Free with gsl_rng_free. */
gsl_rng *mha_rng_new(unsigned long seed);

/* Which CBLAS gsl_blas_* calls end up in: "OpenBLAS <config>" or
 * "GSL reference CBLAS (libgslcblas)". */
const char *mha_cblas_name(void);

#endif
