/* fuzz_cli_args: libFuzzer harness for the mha program's argument parsing.
 *
 * The input is split at newlines into argv entries and parsed against the
 * option tables of `mha trace` and `mha forward`, then every size option
 * goes through cli_parse_count and --valid-lens through cli_parse_list.
 * Whatever the bytes, parsing must end in CLI_OK, CLI_HELP or CLI_USAGE,
 * never crash, and never read past an entry.  Built by `make fuzz`. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"

#define MAX_ARGS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* one heap block per entry, so ASan sees any read past its end */
    char *argv[MAX_ARGS];
    int argc = 0;
    size_t start = 0;
    for (size_t i = 0; i <= size && argc < MAX_ARGS; i++) {
        if (i == size || data[i] == '\n') {
            size_t n = i - start;
            argv[argc] = malloc(n + 1);
            if (!argv[argc])
                abort();
            memcpy(argv[argc], data + start, n);
            argv[argc][n] = '\0';
            argc++;
            start = i + 1;
        }
    }

    cli_option trace_opts[] = {
        {"--batch", 1, NULL},   {"--queries", 1, NULL}, {"--kv", 1, NULL},
        {"--hiddens", 1, NULL}, {"--heads", 1, NULL},   {"--valid-lens", 1, NULL},
        {"--quiz", 0, NULL},    {"--json", 0, NULL},    {"--dot", 0, NULL},
    };
    size_t n = sizeof trace_opts / sizeof trace_opts[0];
    cli_set_command("trace");
    int status = cli_parse(argc, argv, trace_opts, n);
    if (status != CLI_OK && status != CLI_HELP && status != CLI_USAGE)
        abort();
    if (status == CLI_OK) {
        for (size_t i = 0; i < 5; i++) {
            size_t value = 7;
            status = cli_parse_count(&trace_opts[i], CLI_COUNT_MAX, &value);
            if (status == CLI_OK && (value < 1 || value > CLI_COUNT_MAX))
                abort();
        }
        double lens[8];
        size_t got = 0;
        if (trace_opts[5].value &&
            cli_parse_list(&trace_opts[5], lens, 8, &got) == CLI_OK) {
            if (got > 8)
                abort();
            for (size_t i = 0; i < got; i++)
                if (!(lens[i] >= 0 && lens[i] <= CLI_COUNT_MAX))
                    abort();
        }
    }

    cli_option forward_opts[] = {
        {"--heads", 1, NULL}, {"--queries", 1, NULL}, {"--keys", 1, NULL},
        {"--values", 1, NULL}, {"--wq", 1, NULL}, {"--wk", 1, NULL},
        {"--wv", 1, NULL}, {"--wo", 1, NULL}, {"--bq", 1, NULL},
        {"--bk", 1, NULL}, {"--bv", 1, NULL}, {"--bo", 1, NULL},
        {"--valid-lens", 1, NULL}, {"--valid-lens-file", 1, NULL},
        {"--out", 1, NULL}, {"--attention-out", 1, NULL}, {"--trace", 0, NULL},
    };
    cli_set_command("forward");
    status = cli_parse(argc, argv, forward_opts,
                       sizeof forward_opts / sizeof forward_opts[0]);
    if (status != CLI_OK && status != CLI_HELP && status != CLI_USAGE)
        abort();

    for (int i = 0; i < argc; i++)
        free(argv[i]);
    return 0;
}
