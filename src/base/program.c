/* program.c: program set-up shared by every program; see program.h. */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "base/program.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "base/threads.h"

int mha_stdout_check(void)
{
    errno = 0;
    if (fflush(stdout) != 0) {
        int e = errno;
        return mha_fail(GSL_EFAILED, "cannot write to stdout: %s",
                        e ? strerror(e) : "a write failed");
    }
    if (ferror(stdout))
        return mha_fail(GSL_EFAILED,
                        "cannot write to stdout: an earlier write failed");
    return GSL_SUCCESS;
}

/* At exit (on_exit gives the status): stdout complete and closed, or one
 * line and status 1 for a program that was about to report success. */
static void finish_stdout(int status, void *unused)
{
    (void)unused;
    int failed = mha_stdout_check() != GSL_SUCCESS;
    if (fclose(stdout) != 0 && !failed) {
        int e = errno;
        failed = 1;
        mha_fail(GSL_EFAILED, "cannot write to stdout: %s", strerror(e));
    }
    if (!failed || status != 0)
        return;
    fprintf(stderr, "%s: %s\n", program_invocation_short_name,
            mha_last_error());
    _exit(1); /* exit() may not be called again from an exit handler */
}

/* A standard stream started closed (`>&-`) would be the next file the
 * program opens, and what it prints would land in that file (an output
 * .npy): hold each closed one with /dev/null, opened the other way round,
 * so that reading stdin or writing stdout or stderr fails as it would
 * have. */
static void hold_closed_standard_streams(void)
{
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
            continue;
        int held = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
        if (held >= 0 && held != fd) {
            dup2(held, fd);
            close(held);
        }
    }
}

void mha_program_init_lazy(void)
{
    static int done;
    if (done)
        return;
    done = 1;
    threads_confine_blas(); // when OpenBLAS is linked in (threads.h)
    hold_closed_standard_streams();
    gsl_set_error_handler_off();
    cleanup_install();
    on_exit(finish_stdout, NULL);
}

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
