/* fuzz_npy: libFuzzer harness for the .npy reader.
 *
 * Every input is written to a file in memory (memfd_create: nothing on
 * disk, nothing left when the fuzzer stops mid-run) and read back by its
 * /proc/self/fd path with npy_read and npy_read_header: whatever the
 * bytes, the reader must return a status (never crash, hang, leak or
 * read out of bounds) and, on failure, leave one line of message and a
 * NULL tensor.  Built and run by `make fuzz`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "libmha.h"

static int fd = -1;
static char path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* the library's errors as statuses, as a program's; not the
     * program's signal handling (mha_program_init): the fuzzer owns its
     * signals, SIGALRM for its time-outs above all */
    gsl_set_error_handler_off();
    fd = memfd_create("mha-fuzz-npy", 0);
    if (fd < 0)
        abort();
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ftruncate(fd, 0) != 0)
        abort();
    for (size_t done = 0; done < size;) {
        ssize_t n = pwrite(fd, data + done, size - done, (off_t)done);
        if (n <= 0)
            abort();
        done += (size_t)n;
    }

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
    return 0;
}
