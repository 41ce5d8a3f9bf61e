/* mha.h: everything libmha offers, for programs that want it all. */
#ifndef MHA_H
#define MHA_H

#include <gsl/gsl_rng.h>

#include "adam.h"
#include "attention.h"
#include "backward.h"
#include "error.h"
#include "flash.h"
#include "headmajor.h"
#include "heatmap.h"
#include "layernorm.h"
#include "linear.h"
#include "model.h"
#include "multihead.h"
#include "multihead_fast.h"
#include "npy.h"
#include "plot.h"
#include "rowops.h"
#include "softmax.h"
#include "tensor.h"
#include "threads.h"
#include "trace.h"

/* Call first in every program: switches GSL's aborting error handler off,
 * so failures come back as status codes (see error.h). */
void mha_program_init(void);

/* A Mersenne Twister (gsl_rng_mt19937) seeded with seed: the same seed
 * gives the same numbers on every machine.  NULL when out of memory.
 * Free with gsl_rng_free. */
gsl_rng *mha_rng_new(unsigned long seed);

/* Which CBLAS gsl_blas_* calls end up in: "OpenBLAS <config>" or
 * "GSL reference CBLAS (libgslcblas)". */
const char *mha_cblas_name(void);

#endif
