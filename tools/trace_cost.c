/* trace-cost: one multi-head forward pass, for counting instructions.
 *
 * tools/trace_cost.sh builds this twice, with tracing compiled in (and
 * switched off, the default) and with -DMHA_NO_TRACE (compiled out), and
 * runs both under valgrind's callgrind, which counts instructions: the
 * same count every run, whatever else the machine is doing, where a
 * timing on a shared machine cannot resolve 1%.
 *
 *     trace-cost [copy|fast]   the copy-based d2l path or the fast path
 */
#include <stdio.h>
#include <string.h>

#include "libmha.h"

int main(int argc, char **argv)
{
    mha_program_init();
    int fast = argc > 1 && strcmp(argv[1], "fast") == 0;
    /* B 2, L 64, d_model 128, h 8: small enough for callgrind */
    const size_t B = 2, L = 64, D = 128, h = 8;
    gsl_rng *r = mha_rng_new(1);
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = h};
    tensor *x, *lens, *out;
    if (!r || multihead_init(&m, &cfg) || tensor_alloc(SHAPE(B, L, D), &x) ||
        tensor_from_array(SHAPE(2), (double[]){40, 64}, &lens)) {
        fprintf(stderr, "trace-cost: %s\n", mha_last_error());
        return 1;
    }
    multihead_reset_xavier(&m, r);
    tensor_fill_normal(x, r, 0, 1);
    int status = fast ? multihead_forward_fast(&m, x, x, x, lens, NULL, &out, NULL)
                      : multihead_forward(&m, x, x, x, lens, &out, NULL);
    if (status) {
        fprintf(stderr, "trace-cost: %s\n", mha_last_error());
        return 1;
    }
    tensor_free(out);
    tensor_free(x);
    tensor_free(lens);
    multihead_free(&m);
    gsl_rng_free(r);
    return 0;
}
