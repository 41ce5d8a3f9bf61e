//> handout
/* grade_signal.c: which signal ended a test, for `make grade`.
 *
 * Criterion reports a test that dies of a signal as "CRASH!" without
 * naming the signal.  When tools/grade.py runs the suite it sets
 * MHA_GRADE_SIGNALS, and each test process then prints one line naming
 * the signal before dying of it as before ("grade: signal SIGSEGV"), so
 * the grade can say "crashed: SIGSEGV".  Without the variable nothing
 * changes: the suites that check signals themselves see the defaults. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const struct {
    int sig;
    const char *line;
} grade_signals[] = {
    {SIGSEGV, "grade: signal SIGSEGV\n"}, {SIGBUS, "grade: signal SIGBUS\n"},
    {SIGFPE, "grade: signal SIGFPE\n"},   {SIGILL, "grade: signal SIGILL\n"},
    {SIGABRT, "grade: signal SIGABRT\n"},
};
#define GRADE_SIGNALS (sizeof grade_signals / sizeof grade_signals[0])

/* Async-signal-safe: write(2), then the default action again (the
 * handler was installed with SA_RESETHAND) by raising the signal. */
static void grade_signal_say(int sig)
{
    for (size_t i = 0; i < GRADE_SIGNALS; i++)
        if (grade_signals[i].sig == sig) {
            ssize_t ignored = write(2, grade_signals[i].line,
                                    strlen(grade_signals[i].line));
            (void)ignored;
        }
    raise(sig);
}

__attribute__((constructor)) static void grade_signal_setup(void)
{
    if (!getenv("MHA_GRADE_SIGNALS"))
        return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = grade_signal_say;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < GRADE_SIGNALS; i++)
        sigaction(grade_signals[i].sig, &sa, NULL);
}
//<
