/* cleanup.c: temporaries, scratch directories and children removed on a
 * signal before the program ends by it; see cleanup.h. */
#define _POSIX_C_SOURCE 200809L /* sigaction, pthread_sigmask, pthread_kill */
#include "base/cleanup.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

typedef enum { ENTRY_FILE, ENTRY_DIR, ENTRY_CHILD } entry_kind;

struct cleanup_entry {
    cleanup_entry *prev, *next;
    entry_kind kind;
    pid_t pid;   /* ENTRY_CHILD: 0 until started */
    char path[]; /* ENTRY_FILE, ENTRY_DIR */
};

/* The registered entries, newest first: changed only with the signals
 * held off on the home thread, read by the handler on that thread. */
static cleanup_entry *head;
static pthread_t home; /* the thread that handles the signals */
static int installed;

/* cleanup_hold's depth on this thread, and the mask outside it */
static _Thread_local int held;
static _Thread_local sigset_t outer;

static const int caught[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
#define NCAUGHT (sizeof caught / sizeof caught[0])

static void caught_set(sigset_t *s)
{
    sigemptyset(s);
    for (size_t i = 0; i < NCAUGHT; i++)
        sigaddset(s, caught[i]);
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
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_CHILD && e->pid > 0)
            kill(e->pid, SIGKILL);
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_FILE)
            unlink(e->path);
    for (cleanup_entry *e = head; e; e = e->next)
        if (e->kind == ENTRY_DIR)
            rmdir(e->path);
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
    _exit(128 + sig); /* not reached: the default action ends the program */
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
    for (size_t i = 0; i < NCAUGHT; i++) {
        struct sigaction was;
        if (sigaction(caught[i], NULL, &was) == 0 && was.sa_handler == SIG_IGN)
            continue; /* nohup's SIGHUP, a background job's SIGINT */
        sigaction(caught[i], &sa, NULL);
    }
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    sigaction(SIGXFSZ, &ignore, NULL);
}
