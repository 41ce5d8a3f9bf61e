//> 21
/* test_graphviz.c: a dot file drawn by Graphviz: both pictures or none, a
 * dot that fails named with its message, dot not installed said so with
 * the source kept, and the block tables of a paged cache drawn. */
#include "check.h"

#include <stdlib.h>
#include <unistd.h>

#include "scratch.h"

static char saved_path[4096];

static void enter_scratch(void)
{
    const char *p = getenv("PATH");
    snprintf(saved_path, sizeof saved_path, "%s", p ? p : "");
    scratch_enter("mha-graphviz");
}

static void leave_scratch(void)
{
    setenv("PATH", saved_path, 1);
    scratch_leave();
}

TestSuite(graphviz, .init = enter_scratch, .fini = leave_scratch);

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

Test(graphviz, draws_png_and_svg)
{
    write_text("g.dot", "digraph g { a -> b; }\n");
    OK(graphviz_render("test", "g", GNUPLOT_PNG | GNUPLOT_SVG));
    assert_names("g.dot g.png g.svg");
    char *png = slurp("g.png"), *svg = slurp("g.svg");
    cr_assert(memcmp(png, "\x89PNG", 4) == 0, "g.png is not a PNG");
    cr_assert_not_null(strstr(svg, "<svg"), "g.svg is not an SVG");
    free(png);
    free(svg);
}

Test(graphviz, a_dot_that_fails_leaves_no_picture)
{
    write_text("bad.dot", "digraph g { a -> ; }\n");
    mha_clear_error();
    cr_assert_eq(graphviz_render("test", "bad", GNUPLOT_PNG | GNUPLOT_SVG),
                 GSL_EFAILED);
    const char *msg = mha_last_error();
    cr_assert(strncmp(msg, "test: dot exited with status 1 rendering bad.png "
                           "from bad.dot: ", 61) == 0, "%s", msg);
    assert_names("bad.dot");
}

Test(graphviz, without_dot_the_source_is_kept)
{
    /* valgrind's launcher, tracing the child, reports the failed exec of
     * a program not on PATH otherwise than the kernel does */
    skip_under_valgrind();
    write_text("g.dot", "digraph g { a -> b; }\n");
    setenv("PATH", "/nonexistent", 1);
    FAILS(graphviz_render("test", "g", GNUPLOT_PNG), GRAPHVIZ_MISSING,
          "dot not found; kept g.dot (install graphviz to render)");
    assert_names("g.dot");
}

Test(graphviz, refuses_no_format)
{
    write_text("g.dot", "digraph g { a -> b; }\n");
    mha_clear_error();
    cr_assert_eq(graphviz_render("test", "g", 0), GSL_EINVAL);
    assert_names("g.dot");
}
//<
