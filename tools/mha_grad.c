/* mha-grad: the multi-head module's gradients on .npy files, for
 * tools/parity.py to hold against PyTorch's autograd.
 *
 *     mha-grad <the inputs of mha forward> --grad-out DOUT.npy --dir DIR
 *
 * Reads the same inputs as `mha forward` (see `mha forward --help`) and
 * the gradient of the loss with respect to the output, DOUT (B, Lq, D_out),
 * runs multihead_forward_cached and multihead_backward, and writes into
 * DIR: dq.npy, dk.npy, dv.npy (the gradients of the queries, keys and
 * values, each for its own role: in self-attention the input's gradient
 * is their sum), dwq.npy, dwk.npy, dwv.npy, dwo.npy and, when the module
 * has biases, dbq.npy, dbk.npy, dbv.npy, dbo.npy.  With --rope the
 * backward turns dQ and dK back by the forward's angles.  Errors: one line on
 * stderr, exit status 2, as mha. */
#include <stdio.h>
#include <string.h>

#include "cli/args.h"
#include "cli/inputs.h"
#include "cli/output.h"
#include "libmha.h"

#define NOPTS(o) (sizeof(o) / sizeof((o)[0]))

int main(int argc, char **argv)
{
    mha_program_init();
    cli_set_command("mha-grad");
    cli_option opts[] = {CLI_INPUT_OPTIONS, {"--grad-out", 1, NULL},
                         {"--dir", 1, NULL}};
    int status = cli_parse(argc - 1, argv + 1, opts, NOPTS(opts));
    if (status == CLI_HELP) {
        puts("usage: mha-grad <the inputs of mha forward> --grad-out DOUT.npy "
             "--dir DIR");
        return mha_stdout_check() ? cli_error("%s", mha_last_error()) : CLI_OK;
    }
    if (status || (status = cli_inputs_check_options(opts, NOPTS(opts))))
        return status;
    const char *dout_path = cli_find(opts, NOPTS(opts), "--grad-out")->value;
    const char *dir = cli_find(opts, NOPTS(opts), "--dir")->value;
    if (!dout_path || !dir)
        return cli_error("--grad-out and --dir are required");

    cli_inputs in;
    status = cli_inputs_load(opts, NOPTS(opts), &in);
    tensor *dout = NULL, *out = NULL, *dq = NULL, *dk = NULL, *dv = NULL;
    multihead_cache cache = {0};
    multihead grads;
    int has_grads = 0;
    if (!status && npy_read(dout_path, &dout))
        status = cli_error("--grad-out %s", mha_last_error());
    if (!status && (multihead_forward_cached(&in.m, in.queries, in.keys,
                                             in.values, in.valid_lens, NULL,
                                             &cache, &out, NULL) ||
                    multihead_init(&grads, &in.m.cfg) ||
                    (has_grads = 1, multihead_backward(&in.m, &cache, dout,
                                                       &grads, NULL, &dq, &dk,
                                                       &dv))))
        status = cli_error("%s", mha_last_error());
    if (!status) {
        char paths[11][1024];
        const char *names[11] = {"dq", "dk", "dv", "dwq", "dwk", "dwv",
                                 "dwo", "dbq", "dbk", "dbv", "dbo"};
        const tensor *t[11] = {dq, dk, dv, grads.W_q.weight, grads.W_k.weight,
                               grads.W_v.weight, grads.W_o.weight,
                               grads.W_q.bias, grads.W_k.bias, grads.W_v.bias,
                               grads.W_o.bias};
        cli_output outs[11];
        size_t n = in.m.cfg.bias ? 11 : 7;
        for (size_t i = 0; i < n; i++) {
            snprintf(paths[i], sizeof paths[i], "%s/%s.npy", dir, names[i]);
            outs[i] = (cli_output){.option = "--dir", .path = paths[i],
                                   .npy = t[i]};
        }
        status = cli_write_outputs(outs, n);
    }
    if (has_grads)
        multihead_free(&grads);
    multihead_cache_free(&cache);
    tensor_free(dout);
    tensor_free(out);
    tensor_free(dq);
    tensor_free(dk);
    tensor_free(dv);
    cli_inputs_free(&in);
    return status;
}
