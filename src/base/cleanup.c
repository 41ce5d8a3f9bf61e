/* cleanup.c: temporaries, scratch directories and children removed on a
 * signal before the program ends by it; see cleanup.h. */
#define _GNU_SOURCE /* sigaction, pthread_sigmask, pthread_kill; NSIG, SIGSTKFLT, SIGPWR */
#include "base/cleanup.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

typedef enum { ENTRY_FILE, ENTRY_DIR, ENTRY_CHILD, ENTRY_MAP } entry_kind;

struct cleanup_entry {
    cleanup_entry *prev, *next;
    entry_kind kind;
    pid_t pid;         /* ENTRY_CHILD: 0 until started */
    const char *start; /* ENTRY_MAP: the mapped bytes ... */
    size_t bytes;      /* ... and how many */
    char path[];       /* ENTRY_FILE, ENTRY_DIR; ENTRY_MAP: its line */
};

/* The registered entries, newest first: changed only with the signals
 * held off on the home thread, read by the handler on that thread. */
static cleanup_entry *head;
static pthread_t home; /* the thread that handles the signals */
static int installed;

/* cleanup_hold's depth on this thread, and the mask outside it */
static _Thread_local int held;
static _Thread_local sigset_t outer;

/* Every signal whose default action ends the program and that may be
 * caught, but those that report the program's own fault (SIGSEGV,
 * SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS: their default action, and a
 * sanitizer's report, stay) and SIGXFSZ (ignored, cleanup.h); then the
 * real-time signals, SIGRTMIN to SIGRTMAX. */
static const int caught[] = {
    SIGINT,  SIGTERM, SIGHUP,  SIGPIPE,   SIGQUIT, SIGABRT, SIGUSR1,
    SIGUSR2, SIGALRM, SIGXCPU, SIGVTALRM, SIGPROF,
#ifdef SIGSTKFLT
    SIGSTKFLT,
#endif
#ifdef SIGPOLL
    SIGPOLL,
#endif
#ifdef SIGPWR
    SIGPWR,
#endif
};
#define NCAUGHT (sizeof caught / sizeof caught[0])

static void caught_set(sigset_t *s)
{
    sigemptyset(s);
    for (size_t i = 0; i < NCAUGHT; i++)
        sigaddset(s, caught[i]);
#ifdef SIGRTMIN
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaddset(s, sig);
#endif
}

void cleanup_hold(void)
{
    if (held++ == 0) {
        sigset_t s;
        caught_set(&s);
        pthread_sigmask(SIG_BLOCK, &s, &outer);
    }
}

void cleanup_release(void)
{
    if (held > 0 && --held == 0)
        pthread_sigmask(SIG_SETMASK, &outer, NULL);
}

void cleanup_outer_mask(sigset_t *mask)
{
    if (held)
        *mask = outer;
    else
        pthread_sigmask(SIG_BLOCK, NULL, mask);
}

static cleanup_entry *add(const char *who, entry_kind kind, const char *path)
{
    size_t len = strlen(path);
    cleanup_entry *e = mha_malloc(1, sizeof *e + len + 1, who);
    if (!e)
        return NULL;
    e->kind = kind;
    e->pid = 0;
    e->start = NULL;
    e->bytes = 0;
    memcpy(e->path, path, len + 1);
    cleanup_hold();
    e->prev = NULL;
    e->next = head;
    if (head)
        head->prev = e;
    head = e;
    cleanup_release();
    return e;
}

cleanup_entry *cleanup_add_file(const char *who, const char *path)
{
    return add(who, ENTRY_FILE, path);
}

cleanup_entry *cleanup_add_dir(const char *who, const char *path)
{
    return add(who, ENTRY_DIR, path);
}

cleanup_entry *cleanup_add_child(const char *who)
{
    return add(who, ENTRY_CHILD, "");
}

/* The line said when the file behind a mapping is cut short: the file's
 * name with its control bytes as \xNN, so that it stays one line. */
cleanup_entry *cleanup_add_mapping(const char *who, const void *start,
                                   size_t bytes, const char *path)
{
    static const char said[] =
        ": the file was cut short while it was read; nothing was written\n";
    size_t len = 0;
    for (const char *c = path; *c; c++)
        len += (unsigned char)*c < 0x20 || *c == 0x7f ? 4 : 1;
    char *line = mha_malloc(1, len + sizeof said, who);
    if (!line)
        return NULL;
    char *w = line;
    for (const char *c = path; *c; c++) {
        unsigned char u = (unsigned char)*c;
        if (u < 0x20 || u == 0x7f) {
            *w++ = '\\';
            *w++ = 'x';
            *w++ = "0123456789abcdef"[u >> 4];
            *w++ = "0123456789abcdef"[u & 15];
        } else {
            *w++ = *c;
        }
    }
    memcpy(w, said, sizeof said);
    cleanup_hold();
    cleanup_entry *e = add(who, ENTRY_MAP, line);
    if (e) {
        e->start = start;
        e->bytes = bytes;
    }
    cleanup_release();
    free(line);
    return e;
}

void cleanup_set_child(cleanup_entry *e, pid_t pid)
{
    cleanup_hold();
    e->pid = pid;
    cleanup_release();
}

void cleanup_forget(cleanup_entry *e)
{
    if (!e)
        return;
    cleanup_hold();
    if (e->prev)
        e->prev->next = e->next;
    else
        head = e->next;
    if (e->next)
        e->next->prev = e->prev;
    cleanup_release();
    free(e);
}

/* Children, files, then directories. */
static void remove_all(void)
{
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_CHILD && e->pid > 0)
            kill(e->pid, SIGKILL);
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_FILE)
            unlink(e->path);
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_DIR)
            rmdir(e->path);
}

/* sig's default action, now: the program ends by it. */
static void default_action(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
    raise(sig);
}

/* The handler: children, files, directories, then the signal's own
 * default action.  Every call in it is async-signal-safe. */
static void on_signal(int sig)
{
    if (!pthread_equal(pthread_self(), home)) {
        /* a worker thread: the home thread owns the list */
        int saved = errno;
        pthread_kill(home, sig);
        errno = saved;
        return;
    }
    remove_all();
    default_action(sig);
    _exit(128 + sig); /* not reached: the default action ends the program */
}

static const char *bus_name = "mha"; /* cleanup_name's */

void cleanup_name(const char *name)
{
    bus_name = name;
}

/* SIGBUS, on the thread that read: inside a registered mapping, the file
 * behind it was cut short.  Everything is removed as on the caught
 * signals, its line is said and the program exits with status 2.  Any
 * other SIGBUS (a fault of the program, or one sent by kill) gets its
 * default action. */
static void on_bus(int sig, siginfo_t *si, void *context)
{
    (void)context;
    const char *at = si->si_addr;
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_MAP && at >= e->start &&
            (size_t)(at - e->start) < e->bytes) {
            remove_all();
            ssize_t ignored = write(2, bus_name, strlen(bus_name));
            ignored = write(2, ": ", 2);
            ignored = write(2, e->path, strlen(e->path));
            (void)ignored;
            _exit(2);
        }
    default_action(sig); /* one sent by kill: no read repeats it */
}

/* In a forked child: it owns none of its parent's entries (the memory
 * stays with the copy of the parent's heap), and its one thread handles
 * the signals. */
static void forked(void)
{
    head = NULL;
    home = pthread_self();
}

void cleanup_install(void)
{
    if (installed)
        return;
    installed = 1;
    home = pthread_self();
    pthread_atfork(NULL, NULL, forked);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    caught_set(&sa.sa_mask); /* one signal at a time */
    sa.sa_flags = SA_RESTART; /* a worker's interrupted call goes on */
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction was;
        /* only a signal left at its default: not nohup's ignored SIGHUP
         * or a background job's SIGINT, nor one the program that holds
         * the library handles itself (a fuzzer's or profiler's timer) */
        if (!sigismember(&sa.sa_mask, sig) ||
            (sigaction(sig, NULL, &was) == 0 && was.sa_handler != SIG_DFL))
            continue;
        sigaction(sig, &sa, NULL);
    }
    struct sigaction bus;
    memset(&bus, 0, sizeof bus);
    bus.sa_sigaction = on_bus;
    bus.sa_flags = SA_SIGINFO;
    sigfillset(&bus.sa_mask);
    sigaction(SIGBUS, &bus, NULL);
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, NULL);
}
