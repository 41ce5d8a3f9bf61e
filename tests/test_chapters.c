/* test_chapters.c: every chapter's printed output is part of the contract.
 *
 * Each chapter program is run and its output (stdout and stderr together)
 * must equal tests/expected/<chapter>.txt byte for byte, and it must exit
 * with status 0.  After a deliberate change, `make transcripts` rewrites
 * the expected files; review them with git diff before committing. */
#include <sys/wait.h>
#include <unistd.h>

/* check.h (criterion.h) first: criterion/parameterized.h before it leaves
 * Test() defined as criterion.h's documentation placeholder. */
#include "check.h"

#include <criterion/parameterized.h>

#ifndef CHAPTER_DIR
#error "CHAPTER_DIR must name the directory of the built chapters"
#endif

/* Parameters travel to the test process by value: no pointers inside. */
struct chapter {
    char name[64];
};
static struct chapter chapters[] = {
#define AS_PARAM(n) {n},
    CHAPTER_PARAMS
};

static char *slurp(FILE *f, size_t *len)
{
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    cr_assert_not_null(buf);
    size_t got;
    while ((got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) {
            buf = realloc(buf, cap *= 2);
            cr_assert_not_null(buf);
        }
    }
    *len = n;
    buf[n] = '\0';
    return buf;
}

/* The first line where a and b differ, for the failure message. */
static void first_difference(const char *a, const char *b, char *out, size_t n)
{
    int line = 1;
    const char *la = a, *lb = b;
    while (*a && *a == *b) {
        if (*a == '\n') {
            line++;
            la = a + 1;
            lb = b + 1;
        }
        a++;
        b++;
    }
    int wa = (int)strcspn(la, "\n"), wb = (int)strcspn(lb, "\n");
    snprintf(out, n, "line %d\n  got:      %.*s\n  expected: %.*s", line, wa,
             la, wb, lb);
}

ParameterizedTestParameters(chapters, transcript)
{
    return cr_make_param_array(struct chapter, chapters,
                               sizeof chapters / sizeof chapters[0]);
}

ParameterizedTest(struct chapter *ch, chapters, transcript)
{
    const char *name = ch->name;
    char dir[] = "/tmp/mha-chapter-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    /* chapters that draw write their plots here, not into plots/ */
    setenv("MHA_PLOTS_DIR", dir, 1);

    char cmd[512], path[512];
    snprintf(cmd, sizeof cmd, "%s/%s 2>&1", CHAPTER_DIR, name);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p, "cannot run %s", cmd);
    size_t got_len;
    char *got = slurp(p, &got_len);
    int status = pclose(p);

    snprintf(path, sizeof path, "tests/expected/%s.txt", name);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "no expected transcript %s (make transcripts)", path);
    size_t want_len;
    char *want = slurp(f, &want_len);
    fclose(f);

    /* every picture the chapter announces, heatmap or chart, was drawn,
     * into dir */
    size_t pictures = 0;
    static const char *const markers[] = {"[heatmap: plots/", "[plot: plots/"};
    for (size_t mk = 0; mk < 2; mk++) {
        for (const char *at = got; (at = strstr(at, markers[mk])); at++) {
            char base[128], file[700];
            cr_assert_eq(sscanf(at + strlen(markers[mk]), "%127[^.].png", base),
                         1);
            static const char *const ext[] = {"dat", "gp", "png", "svg"};
            for (size_t e = 0; e < 4; e++) {
                snprintf(file, sizeof file, "%s/%s.%s", dir, base, ext[e]);
                FILE *pf = fopen(file, "rb");
                cr_assert_not_null(pf, "%s announces %s but did not write it",
                                   name, file);
                unsigned char head[8] = {0};
                size_t n = fread(head, 1, sizeof head, pf);
                fclose(pf);
                cr_assert_gt(n, 0, "%s is empty", file);
                if (e == 2)
                    cr_assert(memcmp(head, "\x89PNG\r\n\x1a\n", 8) == 0,
                              "%s is not a PNG", file);
            }
            pictures++;
        }
    }
    if (strstr(name, "04_") == name)
        cr_assert_eq(pictures, 2, "chapter 04 draws the identity and the weights");

    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert_eq(system(cmd), 0);

    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s exited with status %d", name, status);
    char diff[1024] = "";
    if (got_len != want_len || memcmp(got, want, got_len) != 0)
        first_difference(got, want, diff, sizeof diff);
    cr_assert(diff[0] == '\0', "%s differs from %s at %s", name, path, diff);
    free(got);
    free(want);
}

//> full
/* The teacher's key (teacher/NN_topic.c, one program per chapter, built
 * beside the chapters) prints the numbers its answers quote: each key's
 * output must equal teacher/expected/<chapter>.txt, which the book's key
 * pages show (`make key` rewrites them).  A student's handout has no
 * teacher/ (and builds no key if one is left in it): nothing to check. */
#include <dirent.h>

Test(chapters, key_transcripts)
{
    DIR *d = access("HANDOUT", F_OK) == 0 ? NULL : opendir("teacher");
    if (!d)
        return;
    size_t keys = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || e->d_name[0] < '0' || e->d_name[0] > '9' ||
            e->d_name[2] != '_' || strcmp(e->d_name + n - 2, ".c") != 0)
            continue;
        char name[128], cmd[512], path[512];
        snprintf(name, sizeof name, "%.*s", (int)(n - 2), e->d_name);
        snprintf(cmd, sizeof cmd, "%s/../teacher/%s 2>&1", CHAPTER_DIR, name);
        FILE *p = popen(cmd, "r");
        cr_assert_not_null(p, "cannot run %s", cmd);
        size_t got_len, want_len;
        char *got = slurp(p, &got_len);
        int status = pclose(p);
        cr_expect(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "teacher/%s exited with status %d: %s", name, status, got);
        snprintf(path, sizeof path, "teacher/expected/%s.txt", name);
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "no %s (make key)", path);
        char *want = slurp(f, &want_len);
        fclose(f);
        char diff[1024] = "";
        if (got_len != want_len || memcmp(got, want, got_len) != 0)
            first_difference(got, want, diff, sizeof diff);
        cr_expect(diff[0] == '\0', "teacher/%s's output differs from %s at %s "
                  "(make key)", name, path, diff);
        free(got);
        free(want);
        keys++;
    }
    closedir(d);
    cr_assert_gt(keys, 0, "teacher/ holds no key program");
}
//<
