//> handout
/* args.h: the command line of the mha program, read strictly.
 *
 * Each subcommand lists its options in a table; cli_parse walks argv
 * against it.  Options are long only: `--batch 2` or `--batch=2`.  What
 * counts as a mistake, each reported on one line on stderr as
 *
 *     mha <command>: <what was wrong, naming the option and the value>
 *
 * with exit status 2 (CLI_USAGE):
 *   - an option the table does not know, or an argument that is not an
 *     option at all;
 *   - an option given twice (the second value would silently win);
 *   - an option that takes a value at the end of argv, or followed by
 *     another option ("--out --trace" is a missing value, not a file
 *     called "--trace");
 *   - a flag given a value ("--trace=yes").
 * "--help" (or "-h") anywhere an option may stand asks for the usage text:
 * cli_parse returns CLI_HELP and the caller prints it on stdout.
 *
 * Numbers: cli_parse_count reads a whole number in [1, max], digits only:
 * no sign, no spaces, no hex, no exponent.  The messages say which of
 * empty, not a number, negative, zero or too large the value was.
 * cli_parse_list reads "3,2" into whole numbers >= 0, each entry checked
 * the same way.  cli_parse_number_above reads a real number (--rope-base).
 */
#ifndef MHA_CLI_ARGS_H
#define MHA_CLI_ARGS_H

#include <stddef.h>

/* What cli_ functions return (also the program's exit statuses). */
enum { CLI_OK = 0, CLI_USAGE = 2, CLI_HELP = -1 };

/* The largest number any size option accepts. */
#define CLI_COUNT_MAX 1000000

/* The largest --seed of every command: 18 digits. */
#define CLI_SEED_MAX 999999999999999999ULL

/* The most entries a --valid-lens list may have. */
#define CLI_LIST_MAX 4096

typedef struct cli_option {
    const char *name;  /* "--batch" */
    int takes_value;   /* 1: "--batch 2"; 0: a flag, "--trace" */
    const char *value; /* after cli_parse: the value, "" for a flag that
                          was given, NULL when the option was absent */
} cli_option;

/* The command name messages start with: "mha trace" ... ("mha" before
 * a subcommand is known). */
void cli_set_command(const char *name);
const char *cli_command(void);

/* Print "mha <command>: <message>" as one line on stderr; returns
 * CLI_USAGE so callers can `return cli_error(...)`.  When the failure is
 * an exercise not written yet (a student's handout, error.h), it prints
 * that exercise's line instead, and main exits with MHA_EXIT_EXERCISE. */
int cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fill opts[i].value from argv[0 .. argc-1] (the arguments after the
 * subcommand).  CLI_OK, CLI_HELP, or CLI_USAGE after printing why. */
int cli_parse(int argc, char **argv, cli_option *opts, size_t nopts);

/* The option named name in opts (it must be there). */
cli_option *cli_find(cli_option *opts, size_t nopts, const char *name);

/* At most one of the n options from opts on may be given (modes that
 * exclude each other): CLI_OK with *given the one given, or NULL; else
 * the one-line error "A and B exclude each other; give one of them". */
int cli_at_most_one(const cli_option *opts, size_t n, const cli_option **given);

/* opt->value as a whole number in [1, max] into *out.  An absent option
 * leaves *out as it is (the default) and returns CLI_OK. */
int cli_parse_count(const cli_option *opt, size_t max, size_t *out);

/* opt->value, a --seed, as a whole number from 0 to CLI_SEED_MAX
 * (digits only), the one range of every command, into *out.  An absent
 * option leaves *out as it is and returns CLI_OK. */
int cli_parse_seed(const cli_option *opt, unsigned long long *out);

/* opt->value as a finite number greater than above (strtod's forms:
 * 10000, 1e4, 500.5) into *out.  An absent option leaves *out as it is
 * and returns CLI_OK. */
int cli_parse_number_above(const cli_option *opt, double above, double *out);

/* opt->value, "3,2", as n whole numbers >= 0 (each at most
 * CLI_COUNT_MAX) into vals (room for cap).  CLI_USAGE after printing the
 * offending entry. */
int cli_parse_list(const cli_option *opt, double *vals, size_t cap,
                   size_t *n);

/* --valid-lens for a run of sizes alone (mha trace, mha view): when vl is
 * given, one whole length per example of the batch (B of them), none
 * larger than Lk, into lens (CLI_LIST_MAX room); CLI_OK, or CLI_USAGE
 * after one line naming the entry. */
int cli_sized_valid_lens(const cli_option *vl, size_t B, size_t Lk,
                         double *lens);

/* The bytes a run may use: MHA_MEMORY_LIMIT when set (what it says is
 * written into *from), else the machine's physical memory (0 when it
 * cannot be known).  CLI_USAGE when MHA_MEMORY_LIMIT is not a whole
 * number of bytes, or is 0 (which would read as no limit at all). */
int cli_memory_limit(double *bytes, char *from, size_t n);

#endif
//<
