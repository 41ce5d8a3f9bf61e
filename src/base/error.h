/* error.h: how libmha reports failure.
 *
 * Every library function that can fail returns a GSL status code:
 * GSL_SUCCESS (0) when it worked, otherwise GSL_EINVAL (a bad argument),
 * GSL_EBADLEN (shapes that do not fit together), GSL_ENOMEM (out of memory),
 * GSL_EOVRFLW (a size that does not fit in size_t) ...  On failure it also
 * leaves a one-line message that names the function, the offending values
 * and the shapes involved, for example
 *
 *     tensor_reshape: shape (4, -1) is invalid for input of size 6 (shape (2, 3))
 *
 * mha_last_error() returns that message until the next failure.  Nothing in
 * the library aborts or prints on its own: the program decides what to do.
 * Programs call mha_program_init() first, which also switches off GSL's
 * default handler (the one that aborts).
 *
 * The message buffer is per thread.
 */
#ifndef MHA_ERROR_H
#define MHA_ERROR_H

#include <stddef.h>
#include <gsl/gsl_errno.h>

#define MHA_ERROR_MAX 512

/* Record a failure: formats the message, stores it, returns status, so a
 * caller can write `return mha_fail(GSL_EINVAL, "f: ...", ...);`. */
int mha_fail(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Pass on the failure of a call made on the way: puts the caller's
 * context in front of the message that call recorded, e.g.
 *
 *     linear_forward W_q: tensor_alloc: out of memory allocating 18 x 8 bytes
 *
 * from `return mha_fail_in(status, "linear_forward %s", l->name);`, so the
 * message names the function the program called.  Returns status. */
int mha_fail_in(int status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The library's one idiom for a function made of steps: each step is
 * STEP(call); the first that fails leaves its status in `status` and its
 * message as it is, and jumps to `done:`, where the function frees what
 * it made and returns status:
 *
 *     int status = GSL_SUCCESS;
 *     STEP(tensor_permute(x, AXES(1, 0), &xt));
 *     STEP(tensor_contiguous(xt, out));
 * done:
 *     tensor_free(xt);
 *     return status; */
#define STEP(call)                                                            \
    do {                                                                      \
        if ((status = (call)) != GSL_SUCCESS)                                 \
            goto done;                                                        \
    } while (0)

//> 03
/* Sizes that must not be 0: GSL_EINVAL when one of the n sizes is, with
 * the message "who: batch 2, heads 0 and p 4 must all be >= 1" (names
 * "batch, heads, p", one a size); GSL_SUCCESS otherwise.
 * MHA_CHECK_SIZES(who, names, a, b, c) counts the sizes. */
int mha_check_sizes(const char *who, const char *names, size_t n,
                    const size_t *sizes);
#define MHA_CHECK_SIZES(who, names, ...)                                      \
    mha_check_sizes((who), (names),                                           \
                    sizeof((size_t[]){__VA_ARGS__}) / sizeof(size_t),         \
                    (const size_t[]){__VA_ARGS__})
//<

/* The message of the last failure on this thread ("" if none). */
const char *mha_last_error(void);

/* Forget the last failure. */
void mha_clear_error(void);

/* The handout's blanks (tools/stub.awk) fail through this: it records the
 * message
 *
 *     this needs exercise NAME (chapter CHAPTER, FILE): it is not written yet; see README.md
 *
 * as the last failure and returns GSL_EUNIMPL.  mha_unwritten_exercise()
 * returns that line while the last failure is the blank's, or a caller's
 * mha_fail_in around it; NULL otherwise (mha_fail and mha_clear_error
 * forget it).  Programs print it alone and exit with MHA_EXIT_EXERCISE, so
 * a student sees which function to write instead of a message from deep
 * inside the library. */
int mha_fail_exercise(const char *name, const char *chapter, const char *file);
const char *mha_unwritten_exercise(void);

/* The exit status of a program stopped by an unwritten exercise: 3, apart
 * from a chapter's other failures (1) and the mha program's bad input (2). */
#define MHA_EXIT_EXERCISE 3

/* Checked allocation: n elements of `size` bytes each.  Returns NULL and
 * records GSL_EOVRFLW or GSL_ENOMEM (naming `who`) when n * size overflows
 * size_t or malloc fails.  mha_calloc zero-fills.  Free with free(). */
void *mha_malloc(size_t n, size_t size, const char *who);
void *mha_calloc(size_t n, size_t size, const char *who);

/* n doubles for a tensor's numbers, zero-filled when `zero`, checked as
 * above.  A buffer of MHA_HUGE_BYTES or more is aligned to 2 MiB and
 * offered to the kernel for transparent huge pages (madvise), so that
 * touching it for the first time takes one page fault per 2 MiB rather
 * than per 4 KiB: for the projections of a forward pass, the faults were
 * a fifth of its time.  From one huge page up: the fast path's buffers for
 * a chunk of examples are 2 MiB each (multihead_fast.c), and in a virtual
 * machine touching 6 MiB of fresh memory took 3.8 ms in 4 KiB pages and
 * 0.2 ms in huge pages.  A zeroed buffer below MHA_HUGE_ZEROED_BYTES
 * comes from calloc, whose fresh pages from the kernel are zero already
 * and cost nothing until touched (mha forward's module allocates its
 * 2 MiB weights zeroed, then takes the files' numbers instead); a huge
 * one is zeroed by hand.  Free with free(). */
#define MHA_HUGE_BYTES ((size_t)2 << 20)
#define MHA_HUGE_ZEROED_BYTES ((size_t)4 << 20)
double *mha_alloc_numbers(size_t n, int zero, const char *who);

/* Room for one more item in a growing array: when count has reached
 * *capacity, realloc *items (of size-byte items) to twice the capacity, or
 * to `first` items when it is empty.  Returns 0 (with *items untouched)
 * when memory runs out, 1 otherwise.  No message: the caller decides.
 * Not subject to mha_debug_fail_alloc_after. */
int mha_grow(void **items, size_t *capacity, size_t count, size_t size,
             size_t first);

/* A size for a message, in the largest unit it reaches: "512 bytes"
 * (or "1 byte") under 1 KiB, then "7.5 KiB", "146.5 MiB", "2.00 GiB".
 * Writes into buf (24 bytes are enough) and returns it. */
const char *mha_bytes_text(double bytes, char *buf, size_t size);

/* n * m into *out, or GSL_EOVRFLW (with a message naming `who`). */
int mha_mul_size(size_t n, size_t m, size_t *out, const char *who);

/* Testing aid: make the allocation after the next `n` succeed fail
 * (n = 0: the very next one).  A negative n switches injection off. */
void mha_debug_fail_alloc_after(long n);

#endif
