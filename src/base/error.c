/* error.c: failure messages and checked allocation; see error.h. */
#define _DEFAULT_SOURCE /* madvise, MADV_HUGEPAGE */
#include "base/error.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static _Thread_local char last_error[MHA_ERROR_MAX];
static _Thread_local long fail_countdown = -1;
/* 1 while last_error is an unwritten exercise's (mha_fail_exercise) */
static _Thread_local int unwritten;

int mha_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    unwritten = 0;
    return status;
}

int mha_fail_in(int status, const char *fmt, ...)
{
    char context[MHA_ERROR_MAX], inner[MHA_ERROR_MAX];
    memcpy(inner, last_error, sizeof inner);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(context, sizeof context, fmt, ap);
    va_end(ap);
    /* an inner message that starts with the context's function, "f: x"
     * under the context "f", is "f: x" still, not "f: f: x"; one that
     * starts with the whole context ("f a.npy: x" under "f a.npy") is
     * itself */
    const char *rest = inner;
    size_t name = strcspn(context, " :");
    if (name > 0 && strncmp(inner, context, name) == 0) {
        size_t whole = strlen(context);
        if (inner[name] == ':')
            rest = inner + name + 1 + (inner[name + 1] == ' ');
        else if (strncmp(inner, context, whole) == 0 && inner[whole] == ':')
            return status; // last_error holds inner already
    }
    /* context ": " rest, cut to the buffer */
    const char *parts[] = {context, ": ", rest};
    size_t used = 0;
    for (size_t k = 0; k < sizeof parts / sizeof parts[0]; k++) {
        size_t len = strlen(parts[k]), room = sizeof last_error - 1 - used;
        if (len > room)
            len = room;
        memcpy(last_error + used, parts[k], len);
        used += len;
    }
    last_error[used] = '\0';
    return status;
}

//> 03
int mha_check_sizes(const char *who, const char *names, size_t n,
                    const size_t *sizes)
{
    size_t i = 0;
    while (i < n && sizes[i] != 0)
        i++;
    if (i == n)
        return GSL_SUCCESS;
    /* "a 1, b 0 and c 3": each name of `names` followed by its size */
    char list[MHA_ERROR_MAX] = "";
    size_t used = 0;
    const char *name = names;
    for (i = 0; i < n && used < sizeof list; i++) {
        size_t len = strcspn(name, ",");
        const char *sep = i == 0 ? "" : i + 1 == n ? " and " : ", ";
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%.*s %zu",
                                 sep, (int)len, name, sizes[i]);
        name += len;
        name += strspn(name, ", ");
    }
    return mha_fail(GSL_EINVAL, "%s: %s must all be >= 1", who, list);
}
//<

const char *mha_last_error(void) { return last_error; }

void mha_clear_error(void)
{
    last_error[0] = '\0';
    unwritten = 0;
}

int mha_fail_exercise(const char *name, const char *chapter, const char *file)
{
    mha_fail(GSL_EUNIMPL,
             "this needs exercise %s (chapter %s, %s): it is not written yet; "
             "see README.md",
             name, chapter, file);
    unwritten = 1;
    return GSL_EUNIMPL;
}

/* mha_fail_in has put callers' names in front of the line: the line
 * itself is the part from "this needs exercise". */
const char *mha_unwritten_exercise(void)
{
    return unwritten ? strstr(last_error, "this needs exercise ") : NULL;
}

void mha_debug_fail_alloc_after(long n) { fail_countdown = n; }

int mha_mul_size(size_t n, size_t m, size_t *out, const char *who)
{
    if (m != 0 && n > SIZE_MAX / m)
        return mha_fail(GSL_EOVRFLW, "%s: size %zu x %zu overflows size_t",
                        who, n, m);
    *out = n * m;
    return GSL_SUCCESS;
}

/* The message of every allocation that fails; returns NULL. */
static void *out_of_memory(const char *who, size_t n, size_t size)
{
    mha_fail(GSL_ENOMEM, "%s: out of memory allocating %zu x %zu bytes", who,
             n, size);
    return NULL;
}

/* One place decides whether an allocation may go ahead, so the failure
 * injection of the tests reaches every allocation of the library. */
static int may_allocate(size_t n, size_t size, const char *who)
{
    size_t bytes;
    if (mha_mul_size(n, size, &bytes, who) != GSL_SUCCESS)
        return 0;
    if (fail_countdown == 0) {
        fail_countdown = -1;
        out_of_memory(who, n, size);
        return 0;
    }
    if (fail_countdown > 0)
        fail_countdown--;
    return 1;
}

const char *mha_bytes_text(double bytes, char *buf, size_t size)
{
    if (bytes >= 1073741824.0)
        snprintf(buf, size, "%.2f GiB", bytes / 1073741824.0);
    else if (bytes >= 1048576.0)
        snprintf(buf, size, "%.1f MiB", bytes / 1048576.0);
    else if (bytes >= 1024.0)
        snprintf(buf, size, "%.1f KiB", bytes / 1024.0);
    else
        snprintf(buf, size, "%.0f byte%s", bytes, bytes == 1 ? "" : "s");
    return buf;
}

void *mha_malloc(size_t n, size_t size, const char *who)
{
    if (!may_allocate(n, size, who))
        return NULL;
    size_t bytes = n * size;
    void *p = malloc(bytes ? bytes : 1);
    return p ? p : out_of_memory(who, n, size);
}

void *mha_calloc(size_t n, size_t size, const char *who)
{
    if (!may_allocate(n, size, who))
        return NULL;
    void *p = calloc(n ? n : 1, size ? size : 1);
    return p ? p : out_of_memory(who, n, size);
}

double *mha_alloc_numbers(size_t n, int zero, const char *who)
{
    if (n < (zero ? MHA_HUGE_ZEROED_BYTES : MHA_HUGE_BYTES) / sizeof(double))
        return zero ? mha_calloc(n, sizeof(double), who)
                    : mha_malloc(n, sizeof(double), who);
    if (!may_allocate(n, sizeof(double), who))
        return NULL;
    void *p = NULL;
    size_t bytes = n * sizeof(double);
    if (posix_memalign(&p, (size_t)2 << 20, bytes) != 0)
        return out_of_memory(who, n, sizeof(double));
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE); // a hint: refused is fine
#endif
    if (zero)
        memset(p, 0, bytes);
    return p;
}

int mha_grow(void **items, size_t *capacity, size_t count, size_t size,
             size_t first)
{
    if (count < *capacity)
        return 1;
    size_t cap = *capacity ? 2 * *capacity : first;
    if (cap < *capacity || (size && cap > SIZE_MAX / size))
        return 0;
    void *p = realloc(*items, cap * size);
    if (!p)
        return 0;
    *items = p;
    *capacity = cap;
    return 1;
}
