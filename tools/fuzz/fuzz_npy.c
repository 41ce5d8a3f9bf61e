/* fuzz_npy: libFuzzer harness for the .npy reader.
 *
 * Every input is written to a file and read back with npy_read and
 * npy_read_header: whatever the bytes, the reader must return a status
 * (never crash, hang, leak or read out of bounds) and, on failure, leave
 * one line of message and a NULL tensor.  Built and run by `make fuzz`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libmha.h"

static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* the library's errors as statuses, as a program's; not the
     * program's signal handling (mha_program_init): the fuzzer owns its
     * signals, SIGALRM for its time-outs above all */
    gsl_set_error_handler_off();
    snprintf(path, sizeof path, "/dev/shm/mha-fuzz-npy-%ld.npy", (long)getpid());
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        abort();
    if (size && fwrite(data, 1, size, f) != size)
        abort();
    fclose(f);

    tensor *t = (tensor *)1;
    int status = npy_read(path, &t);
    if (status == GSL_SUCCESS) {
        /* a tensor that was read must be whole: touch every element */
        double sum = 0;
        for (size_t i = 0; i < tensor_numel(t); i++)
            sum += t->data[i];
        (void)sum;
        tensor_free(t);
    } else {
        if (t != NULL)
            abort();
        const char *msg = mha_last_error();
        if (!msg[0] || strchr(msg, '\n'))
            abort();
    }
    npy_header h;
    status = npy_read_header(path, &h);
    if (status != GSL_SUCCESS && strchr(mha_last_error(), '\n'))
        abort();
    unlink(path);
    return 0;
}
