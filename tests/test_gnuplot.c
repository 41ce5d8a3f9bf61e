//> 01
/* test_gnuplot.c: what heatmaps and charts share (gnuplot.h): the one
 * quoting rule, numbers, checks, the script's opening, the data and script
 * written together, and rendering every format asked for or none.  The
 * pictures themselves are test_heatmap.c's and test_plot.c's. */
#include "check.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "scratch.h"

static void enter_scratch(void) { scratch_enter("mha-gnuplot"); }

static void leave_scratch(void)
{
    unsetenv("MHA_GNUPLOT");
    scratch_leave();
}

TestSuite(gnuplot, .init = enter_scratch, .fini = leave_scratch);

/* --- text and numbers ---------------------------------------------------- */

Test(gnuplot, quoting_doubles_quotes_and_nothing_else)
{
    /* no backslash escapes, no `command` substitution inside '...' */
    const char *s = "it's `rm -rf` \\n $HOME \"x\"";
    const char *want = "'it''s `rm -rf` \\n $HOME \"x\".dat'";
    char *q = gnuplot_quoted("test", s, ".dat");
    cr_assert_str_eq(q, want);
    free(q);
    capture c;
    capture_start(&c);
    gnuplot_put_quoted(c.f, s, ".dat");
    cr_assert_str_eq(capture_end(&c), want);
    capture_free(&c);
    q = gnuplot_quoted("test", "", "");
    cr_assert_str_eq(q, "''");
    free(q);
}

/* gnuplot reads a single-quoted string that opens with a doubled quote as
 * an empty string and a stray token: text that starts with a quote goes
 * between double quotes, backslashes and double quotes escaped, and
 * gnuplot reads back exactly that text. */
Test(gnuplot, text_that_starts_with_a_quote)
{
    const char *s = "'it's \\ \"y\"";
    char *q = gnuplot_quoted("test", s, ".png");
    cr_assert_str_eq(q, "\"'it's \\\\ \\\"y\\\".png\"");
    free(q);
    if (!heatmap_gnuplot_available())
        cr_skip_test("gnuplot is not installed");
    FILE *f = fopen("print.gp", "w");
    cr_assert_not_null(f);
    fputs("print ", f);
    gnuplot_put_quoted(f, s, ".png");
    fputs("\n", f);
    cr_assert_eq(fclose(f), 0);
    FILE *p = popen("gnuplot print.gp 2>&1", "r");
    cr_assert_not_null(p);
    char line[64] = "";
    cr_assert_not_null(fgets(line, sizeof line, p));
    pclose(p);
    cr_assert_str_eq(line, "'it's \\ \"y\".png\n");
}

Test(gnuplot, numbers_are_the_shortest_that_read_back)
{
    const double v[] = {0.1, 1.0 / 3, -0.0, 2.5, 1e300, -4.9e-324};
    capture c;
    capture_start(&c);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        gnuplot_put_number(c.f, v[i]);
        fputc(' ', c.f);
    }
    cr_assert_str_eq(capture_end(&c), "0.1 0.3333333333333333 0 2.5 1e+300 "
                                      "-4.94065645841247e-324 ");
    capture_free(&c);
}

/* Text, with and without double quotes allowed: NULL where it passes. */
static const struct {
    const char *what, *text;
    int no_double_quotes;
    const char *message;
} text_cases[] = {
    {"the title", "say \"hi\"", 0, NULL},
    {"the title", NULL, 1, NULL},
    {"the title", "a\tb", 0,
     "f: the title contains control character 0x09; labels and titles are "
     "single lines"},
    {"labels[1]", "say \"hi\"", 1,
     "f: labels[1] contains a double quote 0x22; labels and titles are "
     "single lines without double quotes"},
    {"the x label", "a\nb", 1,
     "f: the x label contains control character 0x0a; labels and titles are "
     "single lines without double quotes"},
};

/* Base paths (with the example plots/y): NULL where it passes. */
static const struct {
    const char *base, *message;
} base_cases[] = {
    {"plots/x", NULL},
    {NULL, "f: the output path is NULL"},
    {"", "f: the output path is empty"},
    {"plots/", "f: output path plots/ ends in '/'; give a file name without "
               "extension, e.g. plots/y"},
    {"a\x7f", "f: the output path contains control character 0x7f; labels "
              "and titles are single lines"},
};

Test(gnuplot, checks_name_what_is_wrong)
{
    for (size_t i = 0; i < sizeof text_cases / sizeof text_cases[0]; i++) {
        mha_clear_error();
        int status = gnuplot_check_text("f", text_cases[i].what,
                                        text_cases[i].text,
                                        text_cases[i].no_double_quotes);
        const char *want = text_cases[i].message;
        cr_assert_eq(status, want ? GSL_EINVAL : GSL_SUCCESS, "case %zu", i);
        cr_assert_str_eq(mha_last_error(), want ? want : "", "case %zu", i);
    }
    for (size_t i = 0; i < sizeof base_cases / sizeof base_cases[0]; i++) {
        mha_clear_error();
        int status = gnuplot_check_base("f", base_cases[i].base, "plots/y", 0);
        const char *want = base_cases[i].message;
        cr_assert_eq(status, want ? GSL_EINVAL : GSL_SUCCESS, "case %zu", i);
        cr_assert_str_eq(mha_last_error(), want ? want : "", "case %zu", i);
    }
    OK(gnuplot_check_formats("f", GNUPLOT_PNG | GNUPLOT_SVG));
    FAILS(gnuplot_check_formats("f", 0), GSL_EINVAL,
          "f: formats 0 is not HEATMAP_PNG (1), HEATMAP_SVG (2) or both (3)");
}

/* --- the script's opening ------------------------------------------------ */

Test(gnuplot, preamble_finds_data_and_picture_beside_the_script)
{
    capture c;
    capture_start(&c);
    gnuplot_put_preamble(c.f, "it's", 300, 200, "%d points from %s.dat", 3,
                         "it's");
    cr_assert_str_eq(
        capture_end(&c),
        "# 3 points from it's.dat.  Render beside this script with\n"
        "#     gnuplot -e \"fmt='png'\" it's.gp    (fmt: 'png' or 'svg')\n"
        "if (!exists(\"fmt\")) fmt = 'png'\n"
        "# the data and the image live beside this script, wherever gnuplot "
        "runs:\n"
        "# ARG0 is the script's path as gnuplot was given it\n"
        "here = ''\n"
        "do for [i = 1:strlen(ARG0)] { if (ARG0[i:i] eq '/') "
        "{ here = ARG0[1:i] } }\n"
        "data = here . 'it''s.dat'\n"
        "if (!exists(\"out\")) out = here . 'it''s.' . fmt\n"
        "if (fmt eq 'svg') {\n"
        "    set terminal svg size 300,200 font 'sans,11' noenhanced "
        "background '#ffffff'\n"
        "} else { if (fmt eq 'png') {\n"
        "    set terminal pngcairo size 300,200 font 'sans,11' noenhanced "
        "background '#ffffff'\n"
        "} else {\n"
        "    exit error sprintf(\"fmt must be 'png' or 'svg', not '%s'\", "
        "fmt)\n"
        "} }\n"
        "set output out\n");
    capture_free(&c);
}

/* --- the data and the script, both or neither ---------------------------- */

static void write_pair(FILE *dat, FILE *gp, const char *name, const void *ctx)
{
    fprintf(dat, "%s data for %s.gp\n", (const char *)ctx, name);
    fprintf(gp, "%s script for %s.dat\n", (const char *)ctx, name);
}

static void put_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s: %s", path, strerror(errno));
    fputs(text, f);
    cr_assert_eq(fclose(f), 0);
}

Test(gnuplot, write_replaces_data_and_script_together)
{
    put_text("x.dat", "old data\n");
    OK(gnuplot_write("test", "x", write_pair, "new"));
    file_is("x.dat", "new data for x.gp\n");
    file_is("x.gp", "new script for x.dat\n");
    assert_names("x.dat x.gp");
}

/* The script cannot take its place (a directory has its name): the data
 * file, renamed first, is put back as it was. */
Test(gnuplot, write_is_both_or_neither)
{
    put_text("x.dat", "old data\n");
    cr_assert_eq(mkdir("x.gp", 0755), 0);
    cr_assert_eq(gnuplot_write("test", "x", write_pair, "new"), GSL_EFAILED);
    file_is("x.dat", "old data\n");
    assert_names("x.dat x.gp");
}

/* --- rendering ------------------------------------------------------------ */

/* An executable shell script ./name that stands in for gnuplot. */
static void put_program(const char *name, const char *body)
{
    char text[1024];
    snprintf(text, sizeof text, "#!/bin/sh\n%s\n", body);
    put_text(name, text);
    cr_assert_eq(chmod(name, 0755), 0);
}

/* A gnuplot that draws "<fmt> image" into out, and fails for an SVG. */
static const char *const png_only =
    "case \"$3\" in *\"fmt='svg'\"*) echo 'no svg here' >&2; exit 1;; esac\n"
    "out=${3#*out=\\'}\n"
    "echo png image > \"${out%\\'}\"";

Test(gnuplot, render_makes_every_format)
{
    put_program("fake", png_only);
    setenv("MHA_GNUPLOT", "./fake", 1);
    cr_assert_eq(gnuplot_available(), 1);
    OK(gnuplot_write("test", "x", write_pair, "new"));
    OK(gnuplot_render("test", "x", GNUPLOT_PNG));
    file_is("x.png", "png image\n");
    assert_names("fake x.dat x.gp x.png");
}

/* The PNG is drawn, then the SVG fails: neither image changes. */
Test(gnuplot, render_makes_every_format_or_none)
{
    put_program("fake", png_only);
    setenv("MHA_GNUPLOT", "./fake", 1);
    OK(gnuplot_write("test", "x", write_pair, "new"));
    put_text("x.png", "old png\n");
    FAILS(gnuplot_render("test", "x", GNUPLOT_PNG | GNUPLOT_SVG), GSL_EFAILED,
          "test: ./fake exited with status 1 rendering x.svg from x.gp: no "
          "svg here");
    file_is("x.png", "old png\n");
    assert_names("fake x.dat x.gp x.png");
}

Test(gnuplot, render_without_gnuplot_keeps_data_and_script)
{
    setenv("MHA_GNUPLOT", "/nonexistent/gnuplot", 1);
    cr_assert_eq(gnuplot_available(), 0);
    OK(gnuplot_write("test", "x", write_pair, "new"));
    FAILS(gnuplot_render("test", "x", GNUPLOT_SVG), GNUPLOT_MISSING,
          "gnuplot not found (MHA_GNUPLOT=/nonexistent/gnuplot); kept x.dat "
          "and x.gp (install gnuplot-nox to render)");
    FAILS(gnuplot_run("test", "x.gp", "png", "x.png", "x.png"),
          GNUPLOT_MISSING,
          "gnuplot not found (MHA_GNUPLOT=/nonexistent/gnuplot); install "
          "gnuplot-nox to render");
    assert_names("x.dat x.gp");
}
//<
