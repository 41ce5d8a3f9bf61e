/* program.h: what every program using libmha does first: switch GSL's
 * aborting error handler off, catch the signals that would leave
 * temporaries behind, make seeded random number generators, and say
 * which CBLAS the build uses. */
#ifndef MHA_PROGRAM_H
#define MHA_PROGRAM_H

#include <gsl/gsl_rng.h>

/* Call first in every program.  It
 *   - switches GSL's aborting error handler off, so failures come back as
 *     status codes (see error.h);
 *   - installs cleanup.h's handlers: SIGINT, SIGTERM, SIGHUP and SIGPIPE
 *     remove every temporary before the program ends by the signal, and
 *     SIGXFSZ is ignored, so a write beyond `ulimit -f` fails as a write. */
void mha_program_init(void);

/* A Mersenne Twister (gsl_rng_mt19937) seeded with seed: the same seed
 * gives the same numbers on every machine.  NULL when out of memory.
 * Free with gsl_rng_free. */
gsl_rng *mha_rng_new(unsigned long seed);

/* Which CBLAS gsl_blas_* calls end up in: "OpenBLAS <config>" or
 * "GSL reference CBLAS (libgslcblas)". */
const char *mha_cblas_name(void);

#endif
