/* test_error.c: the error convention of src/base/error.c. */
#include "check.h"

#include <stdint.h>

Test(error, fail_records_and_returns)
{
    mha_clear_error();
    cr_assert_str_eq(mha_last_error(), "");
    cr_assert_eq(mha_fail(GSL_EBADLEN, "f: %d and %s", 3, "x"), GSL_EBADLEN);
    cr_assert_str_eq(mha_last_error(), "f: 3 and x");
    mha_clear_error();
    cr_assert_str_eq(mha_last_error(), "");
}

Test(error, long_messages_are_cut)
{
    char big[2 * MHA_ERROR_MAX];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mha_fail(GSL_EINVAL, "%s", big);
    cr_assert_eq(strlen(mha_last_error()), MHA_ERROR_MAX - 1);
}

Test(error, fail_in_puts_the_caller_first)
{
    mha_fail(GSL_ENOMEM, "tensor_alloc: out of memory allocating 3 x 8 bytes");
    cr_assert_eq(mha_fail_in(GSL_ENOMEM, "linear_forward %s", "W_q"), GSL_ENOMEM);
    cr_assert_str_eq(mha_last_error(), "linear_forward W_q: tensor_alloc: out "
                                       "of memory allocating 3 x 8 bytes");
    mha_fail_in(GSL_ENOMEM, "multihead");
    cr_assert_str_eq(mha_last_error(), "multihead: linear_forward W_q: "
                                       "tensor_alloc: out of memory allocating "
                                       "3 x 8 bytes");
}

/* A message that names the caller's function already says it once:
 * "f: x" under "f" is "f: x", and "f a.npy: x" under "f a.npy" is
 * itself; another function, or the same on another file, is named. */
Test(error, fail_in_names_a_function_once)
{
    mha_fail(GSL_EINVAL, "multihead_forward_masked: the output overflowed");
    mha_fail_in(GSL_EINVAL, "%s", "multihead_forward_masked");
    cr_assert_str_eq(mha_last_error(),
                     "multihead_forward_masked: the output overflowed");
    mha_fail(GSL_EFAILED, "explorer_save a.html: cannot write");
    mha_fail_in(GSL_EFAILED, "explorer_save %s", "a.html");
    cr_assert_str_eq(mha_last_error(), "explorer_save a.html: cannot write");
    mha_fail_in(GSL_EFAILED, "explorer_save %s", "b.html");
    cr_assert_str_eq(mha_last_error(), "explorer_save b.html: explorer_save "
                                       "a.html: cannot write");
    mha_fail(GSL_EINVAL, "multihead_forward: x");
    mha_fail_in(GSL_EINVAL, "multihead_forward_masked");
    cr_assert_str_eq(mha_last_error(),
                     "multihead_forward_masked: multihead_forward: x");
}

/* A context as long as the buffer leaves room for nothing else. */
Test(error, fail_in_cuts_long_messages)
{
    char big[MHA_ERROR_MAX + 10];
    memset(big, 'c', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mha_fail(GSL_EINVAL, "inner");
    mha_fail_in(GSL_EINVAL, "%s", big);
    cr_assert_eq(strlen(mha_last_error()), MHA_ERROR_MAX - 1);
    cr_assert_eq(mha_last_error()[0], 'c');

    /* a long inner message is cut at the end, the context kept whole */
    memset(big, 'i', sizeof big - 1);
    mha_fail(GSL_EINVAL, "%s", big);
    mha_fail_in(GSL_EINVAL, "outer");
    cr_assert_eq(strncmp(mha_last_error(), "outer: iii", 10), 0);
    cr_assert_eq(strlen(mha_last_error()), MHA_ERROR_MAX - 1);
}

Test(error, mul_size)
{
    size_t out = 7;
    OK(mha_mul_size(6, 7, &out, "who"));
    cr_assert_eq(out, 42);
    OK(mha_mul_size(SIZE_MAX, 0, &out, "who"));
    cr_assert_eq(out, 0);
    char want[MHA_ERROR_MAX];
    snprintf(want, sizeof want, "who: size %zu x 2 overflows size_t",
             SIZE_MAX / 2 + 1);
    out = 7;
    FAILS(mha_mul_size(SIZE_MAX / 2 + 1, 2, &out, "who"), GSL_EOVRFLW, want);
    cr_assert_eq(out, 7, "left alone on overflow");
}

Test(error, checked_allocation)
{
    double *p = mha_malloc(4, sizeof *p, "who");
    cr_assert_not_null(p);
    free(p);
    p = mha_calloc(4, sizeof *p, "who");
    for (int k = 0; k < 4; k++)
        cr_assert_eq(p[k], 0.0);
    free(p);
    /* zero elements still give a pointer to free */
    p = mha_malloc(0, sizeof *p, "who");
    cr_assert_not_null(p);
    free(p);

    char want[MHA_ERROR_MAX];
    snprintf(want, sizeof want, "who: size %zu x 8 overflows size_t",
             SIZE_MAX / 4);
    mha_clear_error();
    cr_assert_null(mha_malloc(SIZE_MAX / 4, 8, "who"));
    cr_assert_str_eq(mha_last_error(), want);
    mha_clear_error();
    cr_assert_null(mha_calloc(SIZE_MAX / 4, 8, "who"));
    cr_assert_str_eq(mha_last_error(), want);
}

/* mha_debug_fail_alloc_after(n): n allocations succeed, the next fails,
 * and then injection is off again. */
Test(error, failure_injection_counts)
{
    void *p[3];
    mha_debug_fail_alloc_after(2);
    p[0] = mha_malloc(1, 8, "a");
    p[1] = mha_calloc(1, 8, "b");
    mha_clear_error();
    p[2] = mha_malloc(5, 8, "c");
    cr_assert_not_null(p[0]);
    cr_assert_not_null(p[1]);
    cr_assert_null(p[2]);
    cr_assert_str_eq(mha_last_error(), "c: out of memory allocating 5 x 8 bytes");
    p[2] = mha_malloc(1, 8, "d");
    cr_assert_not_null(p[2], "one failure, then off");
    for (int k = 0; k < 3; k++)
        free(p[k]);

    mha_debug_fail_alloc_after(0);
    mha_debug_fail_alloc_after(-1);
    p[0] = mha_malloc(1, 8, "e");
    cr_assert_not_null(p[0], "switched off before it fired");
    free(p[0]);
}

/* A tensor's numbers: small buffers as before, big ones (MHA_HUGE_BYTES
 * and up, MHA_HUGE_ZEROED_BYTES zeroed) aligned to 2 MiB for huge pages;
 * zero-filled when asked, each one allocation to the failure injection,
 * and freed with free(). */
Test(error, numbers_small_and_huge)
{
    const size_t huge = MHA_HUGE_BYTES / sizeof(double);
    const size_t zeroed = MHA_HUGE_ZEROED_BYTES / sizeof(double);
    const size_t sizes[] = {0,      1,          1000,          huge - 1, huge,
                            zeroed - 1, zeroed, 3 * zeroed + 5};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int zero = 0; zero <= 1; zero++) {
            double *p = mha_alloc_numbers(sizes[i], zero, "who");
            cr_assert_not_null(p);
            if (sizes[i] >= (zero ? zeroed : huge))
                cr_assert_eq((uintptr_t)p % ((uintptr_t)2 << 20), 0,
                             "%zu numbers at %p", sizes[i], (void *)p);
            for (size_t k = 0; zero && k < sizes[i]; k++)
                cr_assert_eq(p[k], 0.0);
            if (sizes[i])
                p[sizes[i] - 1] = 1.0; // all of it is writable
            free(p);
        }
    }
    // one huge page's worth, the size of the fast path's buffers for a
    // chunk of examples (B = 8, L = 512, d_model = 512: 512 rows)
    double *one = mha_alloc_numbers(((size_t)2 << 20) / sizeof(double), 0,
                                    "one");
    cr_assert_eq((uintptr_t)one % ((uintptr_t)2 << 20), 0, "at %p",
                 (void *)one);
    free(one);
    mha_debug_fail_alloc_after(1);
    double *a = mha_alloc_numbers(huge, 1, "a");
    mha_clear_error();
    double *b = mha_alloc_numbers(huge, 0, "b");
    cr_assert_not_null(a);
    cr_assert_null(b);
    char want[MHA_ERROR_MAX];
    snprintf(want, sizeof want, "b: out of memory allocating %zu x 8 bytes",
             huge);
    cr_assert_str_eq(mha_last_error(), want);
    free(a);
    mha_clear_error();
    cr_assert_null(mha_alloc_numbers(SIZE_MAX / 4, 0, "who"));
    snprintf(want, sizeof want, "who: size %zu x 8 overflows size_t",
             SIZE_MAX / 4);
    cr_assert_str_eq(mha_last_error(), want);
}

/* A handout's blank fails with one line naming the exercise; callers'
 * context in front of it does not hide it; a new failure forgets it. */
Test(error, unwritten_exercise_names_itself)
{
    mha_clear_error();
    cr_assert_null(mha_unwritten_exercise());
    cr_assert_eq(mha_fail_exercise("transpose_qkv", "06", "src/nn/heads.c"),
                 GSL_EUNIMPL);
    const char *line = "this needs exercise transpose_qkv (chapter 06, "
                       "src/nn/heads.c): it is not written yet; see README.md";
    cr_assert_str_eq(mha_last_error(), line);
    cr_assert_str_eq(mha_unwritten_exercise(), line);
    mha_fail_in(GSL_EUNIMPL, "multihead_forward");
    cr_assert_str_eq(mha_unwritten_exercise(), line);
    mha_fail(GSL_EINVAL, "f: something else");
    cr_assert_null(mha_unwritten_exercise());
    mha_fail_exercise("causal_valid_lens", "03", "src/nn/softmax.c");
    mha_clear_error();
    cr_assert_null(mha_unwritten_exercise());
}

/* Sizes in messages come in the largest unit they reach. */
Test(error, bytes_in_messages)
{
    char buf[32];
    cr_assert_str_eq(mha_bytes_text(0, buf, sizeof buf), "0 bytes");
    cr_assert_str_eq(mha_bytes_text(1, buf, sizeof buf), "1 byte");
    cr_assert_str_eq(mha_bytes_text(1023, buf, sizeof buf), "1023 bytes");
    cr_assert_str_eq(mha_bytes_text(7680, buf, sizeof buf), "7.5 KiB");
    cr_assert_str_eq(mha_bytes_text(153600000, buf, sizeof buf), "146.5 MiB");
    cr_assert_str_eq(mha_bytes_text(2147483648.0, buf, sizeof buf), "2.00 GiB");
    cr_assert_str_eq(mha_bytes_text(8e12, buf, sizeof buf), "7450.58 GiB");
}
