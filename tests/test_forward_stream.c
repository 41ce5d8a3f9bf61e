//> full
/* test_forward_stream.c: `mha forward` writes --out while the fast path
 * makes it, a chunk of examples at a time (multihead_fast.h's sink, the
 * staged file of output.h), and the file is the one the usual way gives;
 * a write that fails, or a refusal after parts were written, leaves every
 * file as it was and says what the usual way says.
 *
 * Inputs: X (384, 64, 16), self-attention, 4 heads, weights W (16, 16)
 * and biases: little work, so that it runs under valgrind too.  Q would
 * take 3 MiB, more than the fast path's 2 MiB, so it goes in chunks
 * (multihead_fast.c), two of 192 examples: OUT's two parts of 1.5 MiB
 * after a preamble of 128 bytes.  With --attention-out the whole batch
 * goes at once and OUT is written after the pass, the usual way: the
 * reference here. */
#include "check.h"

#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#include "scratch.h"
#include "mha_run.h"

#define B 384
#define L 64
#define D 16

#define FORWARD                                                               \
    "forward|--heads|4|--queries|x.npy|--wq|w.npy|--wk|w.npy|--wv|w.npy|"     \
    "--wo|w.npy|--bq|b.npy|--bk|b.npy|--bv|b.npy|--bo|b.npy"
#define WHOLE "|--attention-out|a.npy"

static void enter(void) { mha_enter("mha-stream"); }

/* The inputs, and out.npy from an earlier run (some bytes of its own). */
static void write_inputs(void)
{
    gsl_rng *r = mha_rng_new(41);
    cr_assert_not_null(r);
    tensor *x;
    OK(tensor_alloc(SHAPE(B, L, D), &x));
    tensor_fill_normal(x, r, 0, 1);
    OK(npy_write("x.npy", x));
    tensor_free(x);
    put_normal("w.npy", SHAPE(D, D), r, 0.25);
    put_normal("b.npy", SHAPE(D), r, 0.1);
    gsl_rng_free(r);
    FILE *f = fopen("out.npy", "w");
    cr_assert_not_null(f);
    fputs("an earlier output\n", f);
    fclose(f);
}

/* Streamed, OUT is the usual way's, byte for byte but for rounding:
 * the same preamble and shape, the numbers within 1e-14 relative. */
Test(forward_stream, out_is_the_whole_batchs, .init = enter,
     .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD "|--out|whole.npy" WHOLE);
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    r = mha(FORWARD "|--out|out.npy");
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_str_eq(r.err, "");
    run_free(&r);
    size_t n_got, n_want;
    char *got = file_bytes("out.npy", &n_got);
    char *want = file_bytes("whole.npy", &n_want);
    cr_assert_eq(n_got, 128 + (size_t)B * L * D * sizeof(double));
    cr_assert_eq(n_got, n_want);
    cr_assert(memcmp(got, want, 128) == 0, "the preambles differ");
    free(got);
    free(want);
    tensor *a, *b;
    OK(npy_read("out.npy", &a));
    OK(npy_read("whole.npy", &b));
    double err = rel_error(a, b);
    cr_assert(err <= 1e-14, "streamed against the whole batch: %g", err);
    FREE_ALL(a, b);
}

/* The numbers are the library's to the bit: mha links GSL and OpenBLAS
 * from their static archives where this test links the shared libraries
 * (Makefile), and the fast path of this process, in the same chunks,
 * gives every byte of OUT's numbers. */
Test(forward_stream, out_is_the_librarys_to_the_bit, .init = enter,
     .fini = leave_scratch)
{
    write_inputs();
    run r = mha(FORWARD "|--out|out.npy");
    cr_assert_eq(r.status, 0, "%s", r.err);
    run_free(&r);
    tensor *x, *w, *b, *out, *got;
    OK(npy_read("x.npy", &x));
    OK(npy_read("w.npy", &w));
    OK(npy_read("b.npy", &b));
    multihead m;
    multihead_config cfg = {.query_size = D, .key_size = D, .value_size = D,
                            .num_hiddens = D, .num_heads = 4, .bias = 1};
    OK(multihead_init(&m, &cfg));
    linear *l[] = {&m.W_q, &m.W_k, &m.W_v, &m.W_o};
    for (int i = 0; i < 4; i++) {
        OK(tensor_copy_into(l[i]->weight, w));
        OK(tensor_copy_into(l[i]->bias, b));
    }
    OK(multihead_forward_fast(&m, x, x, x, NULL, NULL, &out, NULL));
    OK(npy_read("out.npy", &got));
    cr_assert_eq(tensor_numel(got), (size_t)B * L * D);
    cr_assert(memcmp(got->data, out->data, tensor_numel(out) * sizeof(double))
                  == 0,
              "mha forward's numbers differ from the library's");
    multihead_free(&m);
    FREE_ALL(x, w, b, out, got);
}

/* The threads of process pid: the entries of /proc/PID/task. */
static int threads_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    cr_assert_not_null(d, "%s: %s", path, strerror(errno));
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

/* Is process pid waiting in read? */
static int reading(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
    FILE *f = fopen(path, "r");
    long nr = -1;
    if (f && fscanf(f, "%ld", &nr) != 1)
        nr = -1;
    if (f)
        fclose(f);
    return nr == SYS_read;
}

/* mha runs OpenBLAS on one thread with its pool stopped (threads.h), the
 * static archive linked in as much as the shared library: waiting for
 * its first answer on stdin (mha quiz), the process has one thread, its
 * main one (then it is killed).  OpenBLAS's pool, left running, would be
 * a second, polling a core for 0.1 s. */
Test(forward_stream, openblas_runs_on_one_thread, .init = enter,
     .fini = leave_scratch)
{
    skip_under_valgrind();
    int answers[2];
    cr_assert_eq(pipe(answers), 0);
    pid_t pid = fork();
    cr_assert_neq(pid, -1);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(answers[0], STDIN_FILENO);
        dup2(null, STDOUT_FILENO);
        dup2(null, STDERR_FILENO);
        close(answers[1]);
        execl(mha_path, "mha", "quiz", "--seed", "1", (char *)NULL);
        _exit(127);
    }
    close(answers[0]);
    int waiting = 0;
    for (int i = 0; i < 1000 && !waiting; i++) // 10 s at most
        if (!(waiting = reading(pid)))
            usleep(10000);
    int threads = waiting ? threads_of(pid) : 0;
    kill(pid, SIGKILL);
    close(answers[1]);
    int ws;
    cr_assert_eq(waitpid(pid, &ws, 0), pid);
    cr_assert(waiting, "mha quiz never waited for an answer");
    cr_assert_eq(threads, 1, "mha runs %d threads", threads);
}

/* Past the file size limit after the first part: one line, exit 2, the
 * earlier out.npy as it was and no temporary left; the same line as the
 * usual way's, which writes OUT after the pass. */
Test(forward_stream, a_write_that_fails_after_a_part, .init = enter,
     .fini = leave_scratch)
{
    skip_under_valgrind();
    write_inputs();
    run_fsize = 9 << 18; // 2.25 MiB: the first part fits, the second not
    const char *line = "mha forward: --out out.npy: npy_write_stream: "
                       "write failed: File too large";
    mha_refused(FORWARD "|--out|out.npy", line);
    // the usual way: A too is past the limit, but OUT comes first
    mha_refused(FORWARD "|--out|out.npy" WHOLE, line);
    run_fsize = 0;
}

/* A refusal of the module's in the last chunk, after the first part was
 * written, or with the first write failing: the refusal, named as the
 * whole batch's pass names it, and every file as it was. */
Test(forward_stream, a_refusal_after_a_part_comes_first, .init = enter,
     .fini = leave_scratch)
{
    skip_under_valgrind();
    write_inputs();
    // the last example's first query: its projection overflows
    tensor *x;
    OK(npy_read("x.npy", &x));
    for (size_t j = 0; j < D; j++)
        *TENSOR_AT(x, B - 1, 0, j) = 1.7e308;
    OK(npy_write("x.npy", x));
    tensor_free(x);
    run whole = mha(FORWARD "|--out|out.npy" WHOLE);
    cr_assert_eq(whole.status, 2);
    const char *starts = "mha forward: multihead_forward_fast: the "
                         "projection overflowed: Q[383, 0, ";
    cr_assert(strncmp(whole.err, starts, strlen(starts)) == 0, "%s",
              whole.err);
    char line[512];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(whole.err, "\n"),
             whole.err);
    run_free(&whole);
    mha_refused(FORWARD "|--out|out.npy", line);
    run_fsize = 1 << 20; // the first part's write fails too
    mha_refused(FORWARD "|--out|out.npy", line);
    run_fsize = 0;
}
//<
