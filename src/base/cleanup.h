/* cleanup.h: what a signal removes before the program ends.
 *
 * Outputs are written under temporary names and renamed into place when
 * complete (fileset.h); gnuplot draws into one of them from a child
 * process (gnuplot.h); `mha heatmap` keeps gnuplot's data and script in a
 * scratch directory.  A program stopped half-way must not leave them
 * behind: not on Ctrl-C (SIGINT), kill (SIGTERM), a terminal that closes
 * (SIGHUP), a reader that leaves the pipe (SIGPIPE, as in
 * `mha forward --trace ... | true`), Ctrl-\ (SIGQUIT), abort (SIGABRT),
 * a CPU time limit (SIGXCPU), a timer (SIGALRM, SIGVTALRM, SIGPROF), nor
 * any other signal whose default action ends the program (SIGUSR1,
 * SIGUSR2, SIGPOLL, SIGPWR, SIGSTKFLT, SIGRTMIN to SIGRTMAX).  So each
 * is registered here while it exists, and cleanup_install (mha_program_init
 * calls it) catches every one of those signals.  On one of them the handler
 *   1. ends every registered child with SIGKILL (what it was drawing
 *      goes away with its temporary),
 *   2. removes every registered file, then every registered directory,
 *   3. ends the program by the same signal, its default action raised
 *      again, so the exit status tells the truth (a shell shows 128 + the
 *      signal's number: 130 for SIGINT, 129 for SIGHUP, 131 for SIGQUIT,
 *      141 for SIGPIPE, 143 for SIGTERM).
 * A signal that was ignored when the program started (SIGHUP under nohup,
 * SIGINT in a script's background job) stays ignored, and one the program
 * holding the library handles itself (a fuzzer's SIGALRM, a profiler's
 * SIGPROF) stays its own.  The signals that
 * report a fault of the program itself (SIGSEGV, SIGBUS, SIGILL, SIGFPE,
 * SIGTRAP, SIGSYS) keep their default action, and a sanitizer's report:
 * a fault is a bug to see, not a stop to tidy after (but SIGBUS from a
 * mapped file cut short, below).

 * SIGXFSZ, sent for a write beyond the file size limit (`ulimit -f`), is
 * ignored instead of caught: the write then fails with EFBIG, "File too
 * large", and the program reports it as any failed write, with every
 * temporary removed and every file as it was, rather than dying with a
 * core dump.  Children (gnuplot) get its default action back.
 *
 * The handler uses async-signal-safe calls only (kill, unlink, rmdir,
 * sigaction, raise).  It runs on the thread that called cleanup_install:
 * a signal that lands on another thread (an OpenMP or OpenBLAS worker) is
 * passed on to it.  That thread registers and forgets with the signals
 * held off (cleanup_hold), so the handler never meets the list half
 * changed; other threads must not register.  A forked child starts with
 * an empty list: its parent's temporaries are not its own.
 *
 * Registering works without cleanup_install too (then no signal is
 * caught).  Errors follow error.h: registering needs memory, and returns
 * NULL with GSL_ENOMEM recorded, naming who, when there is none.
 */
#ifndef MHA_CLEANUP_H
#define MHA_CLEANUP_H

#include <signal.h>
#include <sys/types.h>

typedef struct cleanup_entry cleanup_entry;

/* Remove the file at path on a signal (path is copied).  Register a file
 * in the same held stretch (cleanup_hold) that creates it, so that no
 * signal finds it made and not registered. */
cleanup_entry *cleanup_add_file(const char *who, const char *path);

/* Remove the directory at path on a signal, after every file: it must
 * then be empty, so register what goes in it too. */
cleanup_entry *cleanup_add_dir(const char *who, const char *path);

/* End a child process on a signal: register before starting it, then
 * cleanup_set_child with its pid (until then there is nothing to end). */
cleanup_entry *cleanup_add_child(const char *who);
void cleanup_set_child(cleanup_entry *e, pid_t pid);

/* A file's bytes mapped at start (bytes of them), read in place: when
 * the file is cut short while they are mapped, a read past its new end
 * raises SIGBUS.  Once cleanup_install has run, that SIGBUS removes what
 * a caught signal removes, says one line on stderr, "NAME: PATH: the file
 * was cut short while it was read; nothing was written" (NAME set by
 * cleanup_name, "mha" unless set; PATH's control bytes as \xNN), and
 * exits with status 2, so every file is as it was.  A SIGBUS at any other
 * address keeps its default action.  Forget the entry before unmapping. */
cleanup_entry *cleanup_add_mapping(const char *who, const void *start,
                                   size_t bytes, const char *path);

/* The name that line starts with (kept, not copied): the command. */
void cleanup_name(const char *name);

/* Stop caring: the file is gone or in place, the child reaped.  Frees e;
 * NULL does nothing. */
void cleanup_forget(cleanup_entry *e);

/* Hold the caught signals off on this thread until the matching
 * cleanup_release (pairs nest): one that arrives meanwhile waits, and is
 * handled at the release. */
void cleanup_hold(void);
void cleanup_release(void);

/* The signals' mask as it was outside every hold, for a child to start
 * with (gnuplot.c).  sigset_t is POSIX's: declared for a file that asks
 * for POSIX (a strict -std=c11 one that does not, libmha.h's readers,
 * has no sigset_t). */
#ifdef _POSIX_C_SOURCE
void cleanup_outer_mask(sigset_t *mask);
#endif

/* Catch every signal listed above, and ignore SIGXFSZ, as above.  Once
 * per process; later calls do nothing. */
void cleanup_install(void);

#endif
