/* program.c: program set-up shared by every program; see program.h. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "program.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "error.h"
#include "threads.h"

void mha_program_init_lazy(void) { gsl_set_error_handler_off(); }

void mha_program_init(void)
{
    mha_program_init_lazy();
    if (threads_blas_reserve()) {
        fprintf(stderr, "%s: %s\n", program_invocation_short_name,
                mha_last_error());
        exit(2);
    }
}

gsl_rng *mha_rng_new(unsigned long seed)
{
    gsl_rng *r = gsl_rng_alloc(gsl_rng_mt19937);
    if (r)
        gsl_rng_set(r, seed);
    else
        mha_fail(GSL_ENOMEM, "mha_rng_new: out of memory");
    return r;
}

const char *mha_cblas_name(void)
{
    /* OpenBLAS exports openblas_get_config; GSL's libgslcblas does not. */
    static char name[256];
    char *(*config)(void) = (char *(*)(void))dlsym(RTLD_DEFAULT,
                                                   "openblas_get_config");
    if (!config)
        return "GSL reference CBLAS (libgslcblas)";
    snprintf(name, sizeof name, "OpenBLAS (%s)", config());
    return name;
}
