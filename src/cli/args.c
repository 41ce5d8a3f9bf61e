//> handout
/* args.c: the strict command-line reader of args.h. */
#include "args.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/cleanup.h"
#include "base/error.h"
#include "trace/trace.h"

static const char *command = "mha";

void cli_set_command(const char *name)
{
    command = name;
    cleanup_name(name); // a mapped input cut short says it with this name
}

const char *cli_command(void) { return command; }

int cli_error(const char *fmt, ...)
{
    /* In a student's handout: the exercise the command needs, alone */
    if (mha_unwritten_exercise()) {
        fprintf(stderr, "%s\n", mha_unwritten_exercise());
        return CLI_USAGE;
    }
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* Values and file names come from the user: a newline or a terminal
     * escape among them must not break the one line, so control bytes
     * print as \xNN. */
    fprintf(stderr, "%s: ", command);
    for (const unsigned char *c = (const unsigned char *)msg; *c; c++) {
        if (*c < 0x20 || *c == 0x7f)
            fprintf(stderr, "\\x%02x", *c);
        else
            fputc(*c, stderr);
    }
    fputc('\n', stderr);
    return CLI_USAGE;
}

cli_option *cli_find(cli_option *opts, size_t nopts, const char *name)
{
    for (size_t i = 0; i < nopts; i++)
        if (strcmp(opts[i].name, name) == 0)
            return &opts[i];
    return NULL;
}

int cli_at_most_one(const cli_option *opts, size_t n, const cli_option **given)
{
    *given = NULL;
    for (size_t i = 0; i < n; i++) {
        if (!opts[i].value)
            continue;
        if (*given)
            return cli_error("%s and %s exclude each other; give one of them",
                             (*given)->name, opts[i].name);
        *given = &opts[i];
    }
    return CLI_OK;
}

int cli_parse(int argc, char **argv, cli_option *opts, size_t nopts)
{
    for (size_t i = 0; i < nopts; i++)
        opts[i].value = NULL;
    for (int i = 0; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0)
            return CLI_HELP;
        if (strncmp(arg, "--", 2) != 0 || arg[2] == '\0') {
            if (arg[0] == '-')
                return cli_error("unknown option '%s' (see %s --help)", arg,
                                 command);
            return cli_error("unexpected argument '%s' (options start with "
                             "--; see %s --help)",
                             arg, command);
        }
        // "--name=value" or "--name"
        const char *eq = strchr(arg, '=');
        size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
        cli_option *opt = NULL;
        for (size_t k = 0; k < nopts && !opt; k++)
            if (strlen(opts[k].name) == len && strncmp(opts[k].name, arg, len) == 0)
                opt = &opts[k];
        if (!opt)
            return cli_error("unknown option '%.*s' (see %s --help)", (int)len,
                             arg, command);
        const char *value;
        if (!opt->takes_value) {
            if (eq)
                return cli_error("%s takes no value, got '%s'", opt->name,
                                 eq + 1);
            value = "";
        } else if (eq) {
            value = eq + 1;
        } else if (i + 1 >= argc) {
            return cli_error("%s needs a value", opt->name);
        } else if (strncmp(argv[i + 1], "--", 2) == 0 && argv[i + 1][2]) {
            return cli_error("%s needs a value, got the option '%s'",
                             opt->name, argv[i + 1]);
        } else {
            value = argv[++i];
        }
        if (opt->value) {
            if (!opt->takes_value)
                return cli_error("%s given twice", opt->name);
            return cli_error("%s given twice ('%s', then '%s')", opt->name,
                             opt->value, value);
        }
        opt->value = value;
    }
    return CLI_OK;
}

/* The len bytes at s as a whole number in [min, max] into *out: NULL, or
 * why not. */
static const char *count_problem(const char *s, size_t len, size_t min,
                                 size_t max, size_t *out)
{
    if (len == 0)
        return "is empty";
    size_t start = s[0] == '-' && len > 1 ? 1 : 0;
    size_t v = 0;
    int big = 0;
    for (size_t i = start; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return "is not a whole number";
        size_t digit = (size_t)(s[i] - '0');
        // saturate: anything above max is "too large", however long
        if (!big && v > (max - digit) / 10)
            big = 1;
        if (!big)
            v = v * 10 + digit;
    }
    if (start)
        return big || v ? "is negative" : "has a minus sign";
    if (big)
        return "is too large";
    if (v < min)
        return v == 0 ? "is zero" : "is too small";
    *out = v;
    return NULL;
}

int cli_parse_count(const cli_option *opt, size_t max, size_t *out)
{
    if (!opt->value)
        return CLI_OK;
    size_t v = 0;
    const char *problem =
        count_problem(opt->value, strlen(opt->value), 1, max, &v);
    if (problem)
        return cli_error("%s '%s' %s (expected 1 to %zu)",
                         opt->name, opt->value, problem, max);
    *out = v;
    return CLI_OK;
}

int cli_parse_number_above(const cli_option *opt, double above, double *out)
{
    if (!opt->value)
        return CLI_OK;
    const char *s = opt->value;
    char *end = NULL;
    errno = 0;
    double v = *s && !isspace((unsigned char)*s) ? strtod(s, &end) : 0;
    if (!end || end == s || *end)
        return cli_error("%s '%s' is not a number", opt->name, s);
    if (!isfinite(v) || errno == ERANGE || !(v > above))
        return cli_error("%s '%s' must be a finite number > %g", opt->name, s,
                         above);
    *out = v;
    return CLI_OK;
}

int cli_parse_list(const cli_option *opt, double *vals, size_t cap,
                   size_t *n)
{
    *n = 0;
    const char *s = opt->value;
    for (size_t entry = 1;; entry++) {
        size_t len = strcspn(s, ",");
        if (*n == cap)
            return cli_error("%s '%s' has more than %zu entries", opt->name,
                             opt->value, cap);
        size_t v = 0;
        const char *problem = count_problem(s, len, 0, CLI_COUNT_MAX, &v);
        if (problem)
            return cli_error("%s '%s': entry %zu ('%.*s') %s (expected whole "
                             "numbers from 0 to %d, separated by commas)",
                             opt->name, opt->value, entry, (int)len, s, problem,
                             CLI_COUNT_MAX);
        vals[(*n)++] = (double)v;
        if (!s[len])
            return CLI_OK;
        s += len + 1;
    }
}

int cli_sized_valid_lens(const cli_option *vl, size_t B, size_t Lk,
                         double *lens)
{
    size_t n = 0;
    if (!vl->value)
        return CLI_OK;
    if (cli_parse_list(vl, lens, CLI_LIST_MAX, &n))
        return CLI_USAGE;
    if (n != B)
        return cli_error("--valid-lens '%s' has %zu entr%s but --batch is %zu",
                         vl->value, n, n == 1 ? "y" : "ies", B);
    char v[TRACE_NUMBER_MAX];
    for (size_t b = 0; b < B; b++)
        if (lens[b] > (double)Lk)
            return cli_error("--valid-lens '%s': entry %zu (%s) is larger "
                             "than --kv %zu",
                             vl->value, b + 1,
                             trace_number_str(v, sizeof v, lens[b]), Lk);
    return CLI_OK;
}

int cli_memory_limit(double *bytes, char *from, size_t n)
{
    const char *env = getenv("MHA_MEMORY_LIMIT");
    char size[32];
    if (env) {
        if (!*env || strspn(env, "0123456789") != strlen(env))
            return cli_error("MHA_MEMORY_LIMIT '%s' is not a whole number of "
                             "bytes (8 GB is 8000000000)",
                             env);
        *bytes = strtod(env, NULL);
        if (*bytes < 1)
            return cli_error("MHA_MEMORY_LIMIT '%s' allows no memory at all: "
                             "give the bytes a run may use, or unset it for "
                             "the machine's memory",
                             env);
        mha_bytes_text(*bytes, size, sizeof size);
        if (*bytes < 1024) // already in bytes
            snprintf(from, n, "MHA_MEMORY_LIMIT is %s", size);
        else
            snprintf(from, n, "MHA_MEMORY_LIMIT is %s (%.0f bytes)", size,
                     *bytes);
        return CLI_OK;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    *bytes = pages > 0 && page > 0 ? (double)pages * (double)page : 0;
    snprintf(from, n, "the machine has %s",
             mha_bytes_text(*bytes, size, sizeof size));
    return CLI_OK;
}

int cli_parse_seed(const cli_option *opt, unsigned long long *seed)
{
    if (!opt->value)
        return CLI_OK;
    const char *v = opt->value;
    size_t len = strlen(v);
    if (len == 0 || strspn(v, "0123456789") != len)
        return cli_error("%s '%s' is not a whole number from 0 to %llu",
                         opt->name, v, CLI_SEED_MAX);
    unsigned long long s = 0;
    for (const char *p = v; *p; p++) {
        unsigned d = (unsigned)(*p - '0');
        if (s > (CLI_SEED_MAX - d) / 10)
            return cli_error("%s '%s' is larger than %llu, the largest seed",
                             opt->name, v, CLI_SEED_MAX);
        s = s * 10 + d;
    }
    *seed = s;
    return CLI_OK;
}
//<
