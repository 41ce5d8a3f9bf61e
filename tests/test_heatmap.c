//> 01
/* test_heatmap.c: the heatmap modules: the .dat and .gp files they write,
 * gnuplot's renders, and every way to get them wrong (the terminal view
 * has test_heatmap_terminal.c). */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "heatmap_weights.h"
#include "scratch.h"

/* --- a scratch directory per test (scratch.h) --------------------------- */

static void make_dir(void) { scratch_make("mha-heatmap"); }

/* The test may have failed half-way: put back what a test can change, so
 * the next one (in the same process under --no-fork) starts clean. */
static void remove_dir(void)
{
    unsetenv("MHA_GNUPLOT");
    mha_debug_fail_alloc_after(-1);
    scratch_leave();
}

TestSuite(heatmap, .init = make_dir, .fini = remove_dir);

/* dir/name into buf. */
static char *in_dir(char *buf, size_t n, const char *name)
{
    snprintf(buf, n, "%s/%s", scratch_dir, name);
    return buf;
}

/* The names in the scratch directory, sorted, joined by spaces. */
static char *listing(void)
{
    struct dirent **names;
    int n = scandir(scratch_dir, &names, NULL, alphasort);
    cr_assert_geq(n, 0);
    char *out = calloc(1, 4096);
    for (int i = 0; i < n; i++) {
        if (names[i]->d_name[0] != '.') {
            if (out[0])
                strcat(out, " ");
            strncat(out, names[i]->d_name, 4096 - strlen(out) - 2);
        }
        free(names[i]);
    }
    free(names);
    return out;
}

static void assert_listing(const char *expected)
{
    char *got = listing();
    cr_assert_str_eq(got, expected, "files in %s: \"%s\", expected \"%s\"",
                     scratch_dir, got, expected);
    free(got);
}

static size_t count(const char *text, const char *what)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

/* The script's lines for panel (r, c): from its "# panel (r, c)" comment
 * to the next blank line; freed by the caller. */
static char *panel_section(const char *script, size_t r, size_t c)
{
    char head[64];
    snprintf(head, sizeof head, "\n# panel (%zu, %zu)\n", r, c);
    const char *start = strstr(script, head);
    cr_assert_not_null(start, "no %s in the script", head + 1);
    start++;
    const char *end = strstr(start, "\n\n");
    size_t n = end ? (size_t)(end - start) : strlen(start);
    char *s = malloc(n + 1);
    memcpy(s, start, n);
    s[n] = '\0';
    return s;
}

/* A shell script standing in for gnuplot, executable, in the scratch
 * directory; returns its path in buf. */
static char *fake_gnuplot(char *buf, size_t n, const char *body)
{
    in_dir(buf, n, "fake-gnuplot");
    FILE *f = fopen(buf, "w");
    cr_assert_not_null(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    cr_assert_eq(chmod(buf, 0755), 0);
    return buf;
}

/* --- base.dat ------------------------------------------------------------ */

Test(heatmap, dat_file_holds_one_block_per_panel)
{
    tensor *t = two_panels();
    const char *titles[] = {"Head 1", "it's head 2"};
    heatmap_options opt = {.titles = titles, .ntitles = 2};
    char base[256], path[256];
    OK(heatmap_write(t, &opt, in_dir(base, sizeof base, "w")));

    char *dat = file_bytes(in_dir(path, sizeof path, "w.dat"), NULL);
    cr_assert_str_eq(
        dat,
        "# Attention weights, drawn by w.gp: a 1 x 2 grid of panels, each\n"
        "# 2 queries x 3 keys (weights of shape (1, 2, 2, 3)).\n"
        "# One block per panel in row-major panel order, blocks separated by "
        "two blank\n"
        "# lines (gnuplot's index 0, 1, ...); line q of a block holds query "
        "q's weights\n"
        "# over keys 0 to 2.  Each number is the shortest of %.15g, %.16g and "
        "%.17g\n"
        "# that reads back as the same double.\n"
        "# panel (0, 0), index 0: Head 1\n"
        "0 0.5 1\n"
        "0.25 0.1 1\n"
        "\n"
        "\n"
        "# panel (0, 1), index 1: it's head 2\n"
        "0.3333333333333333 0.75 0.2\n"
        "0.9 0.05 0\n");
    assert_listing("w.dat w.gp");
    free(dat);
    tensor_free(t);
}

Test(heatmap, dat_numbers_read_back_exactly)
{
    /* numbers that need 15, 16 and 17 significant digits */
    double values[4] = {0.1, 1.0 / 3, 2.0 / 3, 0.1 + 0.2};
    tensor *t;
    OK(tensor_from_array(SHAPE(2, 2), values, &t));
    char base[256], path[256];
    OK(heatmap_write(t, NULL, in_dir(base, sizeof base, "w")));
    char *dat = file_bytes(in_dir(path, sizeof path, "w.dat"), NULL);
    cr_assert(strstr(dat, "\n0.1 0.3333333333333333\n"
                          "0.6666666666666666 0.30000000000000004\n"),
              "%s", dat);
    const char *numbers = strstr(dat, "index 0\n") + strlen("index 0\n");
    char *end;
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(strtod(numbers, &end), values[i]);
        numbers = end;
    }
    free(dat);
    tensor_free(t);
}

Test(heatmap, dat_is_the_same_for_any_strides)
{
    /* a permuted view reads its numbers through strides; its contiguous
     * copy holds them in order: the files must not tell them apart */
    tensor *base_t, *view, *copy;
    OK(tensor_alloc(SHAPE(2, 3, 4), &base_t));
    tensor_fill_arange(base_t, 0, 0.125);
    OK(tensor_permute(base_t, 3, (const size_t[]){0, 2, 1}, &view));
    OK(tensor_contiguous(view, &copy));
    char base[256], path[256];
    in_dir(base, sizeof base, "w");
    in_dir(path, sizeof path, "w.dat");

    OK(heatmap_write(view, NULL, base));
    char *from_view = file_bytes(path, NULL);
    OK(heatmap_write(copy, NULL, base));
    char *from_copy = file_bytes(path, NULL);
    cr_assert_str_eq(from_view, from_copy);
    /* panel (0, 1) is base_t[1] transposed: its first row is
     * base_t[1, 0, 0], base_t[1, 1, 0], base_t[1, 2, 0] */
    cr_assert(strstr(from_view, "# panel (0, 1), index 1\n1.5 2 2.5\n"),
              "%s", from_view);
    free(from_view);
    free(from_copy);
    FREE_ALL(copy, view, base_t);
}

Test(heatmap, two_and_three_dimensional_weights)
{
    char base[256], path[256];
    in_dir(base, sizeof base, "w");

    /* (Lq, Lk): one panel */
    tensor *one = arange(SHAPE(2, 3));
    OK(heatmap_write(one, NULL, base));
    char *dat = file_bytes(in_dir(path, sizeof path, "w.dat"), NULL);
    char *gp = file_bytes(in_dir(path, sizeof path, "w.gp"), NULL);
    HOLDS(dat, "a 1 x 1 grid of panels",
          "# panel (0, 0), index 0\n0 1 2\n3 4 5\n");
    cr_assert_eq(count(dat, "# panel"), 1);
    HOLDS(gp, "set multiplot layout 1,1 ");
    /* a single panel both hides and draws no other colour box */
    cr_assert_eq(count(gp, "unset colorbox"), 0);
    cr_assert_eq(count(gp, "set colorbox user"), 1);
    free(dat);
    free(gp);

    /* (cols, Lq, Lk): one row of panels */
    tensor *row = arange(SHAPE(3, 2, 2));
    OK(heatmap_write(row, NULL, base));
    dat = file_bytes(in_dir(path, sizeof path, "w.dat"), NULL);
    gp = file_bytes(in_dir(path, sizeof path, "w.gp"), NULL);
    HOLDS(dat, "a 1 x 3 grid of panels",
          "# panel (0, 2), index 2\n8 9\n10 11\n");
    HOLDS(gp, "set multiplot layout 1,3 ", "set cbrange [0:11]\n");
    free(dat);
    free(gp);
    FREE_ALL(row, one);
}

/* --- base.gp -------------------------------------------------------------- */

Test(heatmap, gp_script_draws_the_grid_on_one_scale)
{
    tensor *t = six_panels();
    heatmap_options opt = {.titles = six_titles, .ntitles = 6};
    char base[256], path[256];
    OK(heatmap_write(t, &opt, in_dir(base, sizeof base, "w")));
    char *gp = file_bytes(in_dir(path, sizeof path, "w.gp"), NULL);

    HOLDS(gp, "data = here . 'w.dat'\n", "\nset multiplot layout 2,3 ",
          /* one colour scale: the smallest and largest weight of all
           * panels (and one colour box, below) */
          "\nset cbrange [-0.5:2.5]\n",
          /* tight ranges, query 0 on top */
          "\nset xrange [-0.5:1.5]\nset yrange [1.5:-0.5]\n",
          "set palette defined (0 '#ffffff', ");
    cr_assert_eq(count(gp, "set cbrange"), 1);
    cr_assert_eq(count(gp, "set colorbox user"), 1);
    cr_assert_eq(count(gp, "unset colorbox"), 1);
    cr_assert_eq(count(gp, "\nplot "), 6);

    for (size_t r = 0; r < 2; r++)
        for (size_t c = 0; c < 3; c++) {
            char *s = panel_section(gp, r, c), want[96];
            snprintf(want, sizeof want, "set title 'Head %zu'\n",
                     r * 3 + c + 1);
            cr_assert(strstr(s, want), "panel (%zu, %zu):\n%s", r, c, s);
            /* the axis labels on the bottom row and left column only */
            cr_assert_eq(strstr(s, "set xlabel 'Keys'") != NULL, r == 1,
                         "panel (%zu, %zu):\n%s", r, c, s);
            cr_assert_eq(strstr(s, "unset xlabel") != NULL, r != 1);
            cr_assert_eq(strstr(s, "set ylabel 'Queries'") != NULL, c == 0,
                         "panel (%zu, %zu):\n%s", r, c, s);
            cr_assert_eq(strstr(s, "unset ylabel") != NULL, c != 0);
            cr_assert_eq(strstr(s, "set format x ''") != NULL, r != 1);
            cr_assert_eq(strstr(s, "set format y ''") != NULL, c != 0);
            snprintf(want, sizeof want, "plot data index %zu matrix with @cells",
                     r * 3 + c);
            cr_assert(strstr(s, want), "panel (%zu, %zu):\n%s", r, c, s);
            /* the colour box is the last panel's */
            cr_assert_eq(strstr(s, "set colorbox user") != NULL,
                         r == 1 && c == 2);
            free(s);
        }
    free(gp);
    tensor_free(t);
}

Test(heatmap, gp_script_quotes_text_for_gnuplot)
{
    /* in gnuplot's single quotes '' is a quote and nothing else is
     * special: no `command` substitution, no backslash escapes */
    tensor *t;
    OK(tensor_alloc(SHAPE(2, 2), &t));
    heatmap_options opt = {.title = "it's `touch pwned` $HOME \\n",
                           .xlabel = "key's",
                           .ylabel = "query \"q\""};
    char base[256], path[256];
    OK(heatmap_write(t, &opt, in_dir(base, sizeof base, "it's a map")));
    FILE_HOLDS(in_dir(path, sizeof path, "it's a map.gp"),
               " title 'it''s `touch pwned` $HOME \\n' font",
               "set xlabel 'key''s'\n", "set ylabel 'query \"q\"'\n",
               "data = here . 'it''s a map.dat'\n",
               "out = here . 'it''s a map.' . fmt\n");
    assert_listing("it's a map.dat it's a map.gp");
    tensor_free(t);
}

Test(heatmap, options_reach_the_script)
{
    tensor *t = six_panels();
    char base[256], path[256];
    in_dir(base, sizeof base, "w");
    in_dir(path, sizeof path, "w.gp");

    heatmap_options opt = {.palette = HEATMAP_VIRIDIS, .width = 900,
                           .height = 500, .title = "Weights",
                           .xlabel = "", .ylabel = "Positions"};
    OK(heatmap_write(t, &opt, base));
    char *gp = file_bytes(path, NULL);
    cr_assert(strstr(gp, "set palette defined (0 '#440154', "));
    cr_assert(strstr(gp, "set terminal pngcairo size 900,500 "));
    cr_assert(strstr(gp, "set terminal svg size 900,500 "));
    cr_assert(strstr(gp, "set multiplot layout 2,3 title 'Weights' font"));
    cr_assert_eq(count(gp, "; set xlabel"), 0);
    cr_assert_eq(count(gp, "set ylabel 'Positions'"), 2);
    cr_assert_eq(count(gp, "\nset title"), 0);
    cr_assert_eq(count(gp, "\nunset title"), 6);
    free(gp);

    /* automatic sizes grow with the grid */
    OK(heatmap_write(t, NULL, base));
    FILE_HOLDS(path, "set terminal pngcairo size 932,574 ");
    tensor *one = zeros(SHAPE(2, 2));
    OK(heatmap_write(one, NULL, base));
    FILE_HOLDS(path, "set terminal pngcairo size 420,316 ");
    FREE_ALL(one, t);
}

/* Weights that are all above 0 still get a scale from 0, so that white
 * means exactly 0 on every picture; a caller may ask for the smallest
 * weight instead, and values below 0 always start the scale. */
Test(heatmap, the_scale_of_weights_starts_at_zero)
{
    char base[256], path[256];
    in_dir(base, sizeof base, "w");
    in_dir(path, sizeof path, "w.gp");
    tensor *t = make(SHAPE(2, 2), (double[]){0.5, 1, 1.5, 2});
    OK(heatmap_write(t, NULL, base));
    FILE_HOLDS(path, "\nset cbrange [0:2]\n",
               "# one colour scale for every panel: from 0 (white, exactly 0) "
               "to the\n# largest weight\n");
    heatmap_options opt = {.scale_from_min = 1};
    OK(heatmap_write(t, &opt, base));
    FILE_HOLDS(path, "\nset cbrange [0.5:2]\n");
    tensor_fill_arange(t, -1, 1); /* -1, 0, 1, 2 */
    OK(heatmap_write(t, NULL, base));
    FILE_HOLDS(path, "\nset cbrange [-1:2]\n");
    tensor_free(t);
}

Test(heatmap, equal_weights_widen_the_scale)
{
    char base[256], path[256];
    in_dir(base, sizeof base, "w");
    in_dir(path, sizeof path, "w.gp");
    tensor *t = full(SHAPE(2, 2), 0.25);
    OK(heatmap_write(t, NULL, base));
    FILE_HOLDS(path, "\nset cbrange [0:0.5]\n");
    tensor_fill(t, 0);
    OK(heatmap_write(t, NULL, base));
    FILE_HOLDS(path, "\nset cbrange [-1:1]\n");
    tensor_free(t);
}

Test(heatmap, single_queries_are_drawn_as_boxes)
{
    /* gnuplot's image wants 2 x 2 cells or more */
    tensor *t;
    OK(tensor_alloc(SHAPE(3, 1, 10), &t));
    tensor_fill_arange(t, 0, 0.01);
    char base[256], path[256];
    OK(heatmap_write(t, NULL, in_dir(base, sizeof base, "w")));
    FILE_HOLDS(in_dir(path, sizeof path, "w.gp"),
               "cells = 'boxxyerror fs solid noborder fc palette'",
               "plot data index 2 matrix using 1:2:(half):(half):3 with "
               "@cells\n");
    tensor_free(t);
}

Test(heatmap, same_input_same_bytes)
{
    tensor *t = six_panels();
    heatmap_options opt = {.titles = six_titles, .ntitles = 6,
                           .title = "Weights"};
    char base[256], dat[256], gp[256];
    in_dir(base, sizeof base, "w");
    OK(heatmap_write(t, &opt, base));
    size_t n1, n2, m1, m2;
    char *d1 = file_bytes(in_dir(dat, sizeof dat, "w.dat"), &n1);
    char *g1 = file_bytes(in_dir(gp, sizeof gp, "w.gp"), &m1);
    OK(heatmap_write(t, &opt, base));
    char *d2 = file_bytes(dat, &n2), *g2 = file_bytes(gp, &m2);
    cr_assert(n1 == n2 && !memcmp(d1, d2, n1));
    cr_assert(m1 == m2 && !memcmp(g1, g2, m1));
    free(d1);
    free(d2);
    free(g1);
    free(g2);
    tensor_free(t);
}

/* --- rendering with gnuplot ---------------------------------------------- */

static void need_gnuplot(void)
{
    if (!heatmap_gnuplot_available())
        cr_skip_test("gnuplot is not installed");
}

Test(heatmap, renders_png_and_svg)
{
    need_gnuplot();
    tensor *t = six_panels();
    heatmap_options opt = {.titles = six_titles, .ntitles = 6};
    char base[256], path[256];
    OK(heatmap_render(t, &opt, in_dir(base, sizeof base, "w"),
                      HEATMAP_PNG | HEATMAP_SVG));
    size_t n;
    char *png = file_bytes(in_dir(path, sizeof path, "w.png"), &n);
    cr_assert_gt(n, 8);
    cr_assert(!memcmp(png, "\x89PNG\r\n\x1a\n", 8), "not a PNG");
    char *svg = file_bytes(in_dir(path, sizeof path, "w.svg"), &n);
    cr_assert(!strncmp(svg, "<?xml", 5) || !strncmp(svg, "<svg", 4));
    cr_assert(strstr(svg, "</svg>"));
    assert_listing("w.dat w.gp w.png w.svg");
    free(png);
    free(svg);
    tensor_free(t);
}

Test(heatmap, renders_the_same_bytes_twice)
{
    need_gnuplot();
    tensor *t = six_panels();
    char base[256], png[256], svg[256];
    in_dir(base, sizeof base, "w");
    OK(heatmap_render(t, NULL, base, HEATMAP_PNG | HEATMAP_SVG));
    size_t n1, n2, m1, m2;
    char *p1 = file_bytes(in_dir(png, sizeof png, "w.png"), &n1);
    char *s1 = file_bytes(in_dir(svg, sizeof svg, "w.svg"), &m1);
    OK(heatmap_render(t, NULL, base, HEATMAP_PNG | HEATMAP_SVG));
    char *p2 = file_bytes(png, &n2), *s2 = file_bytes(svg, &m2);
    cr_assert(n1 == n2 && !memcmp(p1, p2, n1), "the PNGs differ");
    cr_assert(m1 == m2 && !memcmp(s1, s2, m1), "the SVGs differ");
    free(p1);
    free(p2);
    free(s1);
    free(s2);
    tensor_free(t);
}

Test(heatmap, renders_strange_paths_and_titles_literally)
{
    need_gnuplot();
    tensor *t = arange(SHAPE(1, 6));
    char base[256], path[256], cmd[300];
    /* were the title run through a shell or gnuplot's backquotes, the
     * file "pwned" would appear */
    snprintf(cmd, sizeof cmd, "it's `touch %s/pwned` $(touch %s/pwned)",
             scratch_dir, scratch_dir);
    heatmap_options opt = {.title = cmd};
    OK(heatmap_render(t, &opt, in_dir(base, sizeof base, "it's a map"),
                      HEATMAP_PNG));
    size_t n;
    char *png = file_bytes(in_dir(path, sizeof path, "it's a map.png"), &n);
    cr_assert(n > 8 && !memcmp(png, "\x89PNG", 4));
    assert_listing("it's a map.dat it's a map.gp it's a map.png");
    free(png);
    tensor_free(t);
}

Test(heatmap, rerendering_by_hand_from_elsewhere)
{
    /* the script finds its data beside itself, as plots/README.md says */
    need_gnuplot();
    tensor *t = six_panels();
    char base[256], path[256], cmd[512];
    OK(heatmap_write(t, NULL, in_dir(base, sizeof base, "w")));
    snprintf(cmd, sizeof cmd,
             "cd / && gnuplot -d -e \"fmt='svg'\" %s/w.gp 2>&1", scratch_dir);
    cr_assert_eq(system(cmd), 0);
    char *svg = file_bytes(in_dir(path, sizeof path, "w.svg"), NULL);
    cr_assert(strstr(svg, "</svg>"));
    free(svg);
    tensor_free(t);
}

Test(heatmap, missing_gnuplot_keeps_the_data_and_script)
{
    tensor *t = six_panels();
    char base[256], msg[1024];
    in_dir(base, sizeof base, "w");

    /* a path that is not there, and a name looked up on PATH */
    const struct {
        const char *gnuplot;
        int formats;
    } missing[] = {{"/nonexistent/gnuplot", HEATMAP_PNG},
                   {"mha-no-such-gnuplot", HEATMAP_SVG}};
    for (size_t i = 0; i < 2; i++) {
        setenv("MHA_GNUPLOT", missing[i].gnuplot, 1);
        cr_assert_eq(heatmap_gnuplot_available(), 0);
        snprintf(msg, sizeof msg,
                 "heatmap: gnuplot not found (MHA_GNUPLOT=%s); kept %s/w.dat "
                 "and %s/w.gp (install gnuplot-nox to render)",
                 missing[i].gnuplot, scratch_dir, scratch_dir);
        FAILS(heatmap_render(t, NULL, base, missing[i].formats),
              HEATMAP_NO_GNUPLOT, msg);
        assert_listing("w.dat w.gp");
    }

    /* no gnuplot on PATH at all */
    unsetenv("MHA_GNUPLOT");
    char *path = strdup(getenv("PATH") ? getenv("PATH") : "");
    setenv("PATH", scratch_dir, 1);
    cr_assert_eq(heatmap_gnuplot_available(), 0);
    snprintf(msg, sizeof msg,
             "heatmap: gnuplot not found; kept %s/w.dat and %s/w.gp "
             "(install gnuplot-nox to render)",
             scratch_dir, scratch_dir);
    mha_clear_error();
    int status = heatmap_render(t, NULL, base, HEATMAP_PNG | HEATMAP_SVG);
    setenv("PATH", path, 1);
    free(path);
    cr_assert_eq(status, HEATMAP_NO_GNUPLOT);
    cr_assert_str_eq(mha_last_error(), msg);
    assert_listing("w.dat w.gp");
    tensor_free(t);
}

Test(heatmap, failing_gnuplot_reports_its_status_and_last_words)
{
    tensor *t = six_panels();
    char base[256], prog[256], msg[1024];
    in_dir(base, sizeof base, "w");
    fake_gnuplot(prog, sizeof prog,
                 "echo 'plot data index 0 matrix with @cells' >&2\n"
                 "echo '\"w.gp\" line 42: something broke' >&2\n"
                 "echo >&2\n"
                 "exit 3");
    setenv("MHA_GNUPLOT", prog, 1);
    cr_assert_eq(heatmap_gnuplot_available(), 1);
    snprintf(msg, sizeof msg,
             "heatmap_render: %s exited with status 3 rendering %s.png from "
             "%s.gp: \"w.gp\" line 42: something broke",
             prog, base, base);
    FAILS(heatmap_render(t, NULL, base, HEATMAP_PNG), GSL_EFAILED, msg);
    /* the data and script stay for a look; no image, no temporaries */
    assert_listing("fake-gnuplot w.dat w.gp");
    tensor_free(t);
}

Test(heatmap, gnuplot_killed_or_silent_is_a_failure)
{
    tensor *t = six_panels();
    char base[256], prog[256], msg[1024];
    in_dir(base, sizeof base, "w");

    fake_gnuplot(prog, sizeof prog, "kill -9 $$");
    setenv("MHA_GNUPLOT", prog, 1);
    snprintf(msg, sizeof msg,
             "heatmap_render: %s was killed by signal 9 rendering %s.svg "
             "from %s.gp",
             prog, base, base);
    FAILS(heatmap_render(t, NULL, base, HEATMAP_SVG), GSL_EFAILED, msg);
    assert_listing("fake-gnuplot w.dat w.gp");

    fake_gnuplot(prog, sizeof prog, "exit 0");
    snprintf(msg, sizeof msg,
             "heatmap_render: %s exited with status 0 but wrote no png image "
             "from %s.gp",
             prog, base);
    FAILS(heatmap_render(t, NULL, base, HEATMAP_PNG), GSL_EFAILED, msg);
    assert_listing("fake-gnuplot w.dat w.gp");
    tensor_free(t);
}

Test(heatmap, gnuplot_gets_its_arguments_without_a_shell)
{
    skip_under_valgrind();
    tensor *t = six_panels();
    char prog[256], args[256], body[512];
    snprintf(body, sizeof body, "printf '%%s\\n' \"$@\" > '%s/args'\nexit 1",
             scratch_dir);
    setenv("MHA_GNUPLOT", fake_gnuplot(prog, sizeof prog, body), 1);
    /* a relative path that starts with '-' must not pass for an option */
    cr_assert_eq(chdir(scratch_dir), 0);
    cr_assert_eq(heatmap_render(t, NULL, "-it's", HEATMAP_PNG), GSL_EFAILED);
    char *got = file_bytes(in_dir(args, sizeof args, "args"), NULL);
    char expected[1024];
    snprintf(expected, sizeof expected,
             "-d\n-e\nfmt='png'; out='-it''s.png.tmp.%ld.0'\n./-it's.gp\n",
             (long)getpid());
    cr_assert_str_eq(got, expected);
    assert_listing("-it's.dat -it's.gp args fake-gnuplot");
    free(got);
    tensor_free(t);
}

Test(heatmap, gnuplot_inherits_no_descriptors)
{
    skip_under_valgrind();
    /* a file the caller holds open without close-on-exec */
    char held[256], prog[256], state[256], body[512];
    FILE *f = fopen(in_dir(held, sizeof held, "held"), "w");
    cr_assert_not_null(f);
    cr_assert_gt(fileno(f), 2);
    /* look for it by the file it names, not by its number: the shell
     * running the script holds the script on a descriptor of its own
     * (dash: 10), and that can be the number the caller's file had (it
     * is under valgrind) */
    snprintf(body, sizeof body,
             "state=closed\n"
             "for f in /proc/$$/fd/*; do\n"
             "  [ \"$(readlink \"$f\")\" = '%s' ] && state=open\n"
             "done\n"
             "echo $state > '%s/fd-state'\nexit 1",
             held, scratch_dir);
    setenv("MHA_GNUPLOT", fake_gnuplot(prog, sizeof prog, body), 1);
    tensor *t = six_panels();
    char base[256];
    cr_assert_eq(heatmap_render(t, NULL, in_dir(base, sizeof base, "w"),
                                HEATMAP_PNG),
                 GSL_EFAILED);
    fclose(f);
    char *got = file_bytes(in_dir(state, sizeof state, "fd-state"), NULL);
    cr_assert_str_eq(got, "closed\n");
    free(got);
    tensor_free(t);
}

/* --- bad input: a status, an exact message, no file ---------------------- */

#define EXPECTED_DIMS "expected (Lq, Lk), (cols, Lq, Lk) or (rows, cols, Lq, Lk)"

Test(heatmap, rejects_tensors_of_the_wrong_rank)
{
    char base[256];
    in_dir(base, sizeof base, "w");
    FAILS(heatmap_write(NULL, NULL, base), GSL_EINVAL,
          "heatmap_write: the weights tensor is NULL");

    tensor *v;
    OK(tensor_alloc(SHAPE(5), &v));
    FAILS(heatmap_write(v, NULL, base), GSL_EINVAL,
          "heatmap_write: weights of shape (5,) are 1-D; " EXPECTED_DIMS);
    tensor_free(v);

    /* no tensor_ function makes these, but a hand-filled struct can */
    double x = 1;
    tensor scalar = {.data = &x, .ndim = 0};
    FAILS(heatmap_write(&scalar, NULL, base), GSL_EINVAL,
          "heatmap_write: weights of shape () are 0-D; " EXPECTED_DIMS);
    tensor five = {.data = &x, .ndim = 5};
    FAILS(heatmap_write(&five, NULL, base), GSL_EINVAL,
          "heatmap_write: weights are 5-D; " EXPECTED_DIMS);
    tensor empty = {.data = &x, .ndim = 2, .shape = {3, 0}};
    FAILS(heatmap_write(&empty, NULL, base), GSL_EINVAL,
          "heatmap_write: weights of shape (3, 0) have size 0 in dimension 1");
    assert_listing("");
}

Test(heatmap, rejects_weights_that_are_not_finite)
{
    char base[256];
    in_dir(base, sizeof base, "w");
    tensor *t = six_panels();
    *TENSOR_AT(t, 1, 2, 0, 1) = NAN;
    FAILS(heatmap_write(t, NULL, base), GSL_EINVAL,
          "heatmap_write: weights[1, 2, 0, 1] is nan (panel (1, 2), query 0, "
          "key 1) in weights of shape (2, 3, 2, 2); weights must be finite");
    FAILS(heatmap_render(t, NULL, base, HEATMAP_PNG), GSL_EINVAL,
          "heatmap_render: weights[1, 2, 0, 1] is nan (panel (1, 2), query 0, "
          "key 1) in weights of shape (2, 3, 2, 2); weights must be finite");
    tensor_free(t);

    OK(tensor_alloc(SHAPE(2, 2, 2), &t));
    *TENSOR_AT(t, 1, 0, 1) = -INFINITY;
    FAILS(heatmap_write(t, NULL, base), GSL_EINVAL,
          "heatmap_write: weights[1, 0, 1] is -inf (panel (0, 1), query 0, "
          "key 1) in weights of shape (2, 2, 2); weights must be finite");
    *TENSOR_AT(t, 0, 1, 0) = INFINITY;
    FAILS(heatmap_write(t, NULL, base), GSL_EINVAL,
          "heatmap_write: weights[0, 1, 0] is inf (panel (0, 0), query 1, "
          "key 0) in weights of shape (2, 2, 2); weights must be finite");
    assert_listing("");
    tensor_free(t);
}

Test(heatmap, rejects_bad_options)
{
    char base[256];
    in_dir(base, sizeof base, "w");
    tensor *t = six_panels();
    static const char *const titles[6] = {"a", "two\nlines", "c", "d", "e",
                                          "f"};
    const struct {
        heatmap_options opt;
        int status;
        const char *message;
    } cases[] = {
        {{.titles = six_titles, .ntitles = 2}, GSL_EBADLEN,
         "heatmap_write: 2 titles for 6 panels (a 2 x 3 grid, weights of "
         "shape (2, 3, 2, 2))"},
        {{.ntitles = 6}, GSL_EINVAL,
         "heatmap_write: ntitles is 6 but titles is NULL"},
        {{.titles = titles, .ntitles = 6}, GSL_EINVAL,
         "heatmap_write: the title of panel (0, 1) contains control "
         "character 0x0a; labels and titles are single lines"},
        {{.xlabel = "tab\there"}, GSL_EINVAL,
         "heatmap_write: the x label contains control character 0x09; "
         "labels and titles are single lines"},
        {{.palette = 9}, GSL_EINVAL,
         "heatmap_write: palette 9 is not one of 0 to 3"},
        {{.width = -1}, GSL_EINVAL,
         "heatmap_write: width -1 is out of range; use 0 (automatic) or 1 "
         "to 16384 pixels"},
        {{.height = 20000}, GSL_EINVAL,
         "heatmap_write: height 20000 is out of range; use 0 (automatic) or "
         "1 to 16384 pixels"},
        {{.width = 200}, GSL_EINVAL,
         "heatmap_write: 200 x 0 pixels leave no room for a 2 x 3 grid of "
         "(2, 2) panels; the margins alone take 212 x 94 (0 sizes it "
         "automatically)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        FAILS(heatmap_write(t, &cases[i].opt, base), cases[i].status,
              cases[i].message);
    heatmap_options opt = {.term_columns = -1};
    FAILS(heatmap_terminal(stdout, t, &opt), GSL_EINVAL,
          "heatmap_terminal: term_columns -1 is negative; use 0 (80 columns) "
          "or the terminal's width");
    FAILS(heatmap_render(t, NULL, base, 0), GSL_EINVAL,
          "heatmap_render: formats 0 is not HEATMAP_PNG (1), HEATMAP_SVG (2) "
          "or both (3)");
    FAILS(heatmap_render(t, NULL, base, 4), GSL_EINVAL,
          "heatmap_render: formats 4 is not HEATMAP_PNG (1), HEATMAP_SVG (2) "
          "or both (3)");
    assert_listing("");
    tensor_free(t);
}

Test(heatmap, rejects_paths_it_cannot_write)
{
    tensor *t = six_panels();
    char base[256], msg[512];
    in_dir(base, sizeof base, "missing/w");
    for (int render = 0; render < 2; render++) {
        snprintf(msg, sizeof msg,
                 "%s: cannot create %s/missing/w.dat: No such file or "
                 "directory",
                 render ? "heatmap_render" : "heatmap_write", scratch_dir);
        FAILS(render ? heatmap_render(t, NULL, base, HEATMAP_PNG)
                     : heatmap_write(t, NULL, base),
              GSL_EFAILED, msg);
    }

    FAILS(heatmap_write(t, NULL, ""), GSL_EINVAL,
          "heatmap_write: the output path is empty");
    FAILS(heatmap_write(t, NULL, NULL), GSL_EINVAL,
          "heatmap_write: the output path is NULL");
    in_dir(base, sizeof base, "");
    snprintf(msg, sizeof msg,
             "heatmap_write: output path %s ends in '/'; give a file name "
             "without extension, e.g. plots/weights",
             base);
    FAILS(heatmap_write(t, NULL, base), GSL_EINVAL, msg);
    assert_listing("");
    tensor_free(t);
}


/* --- out of memory at every allocation ----------------------------------- */

Test(heatmap, out_of_memory_anywhere_leaves_nothing)
{
    tensor *t = six_panels();
    heatmap_options opt = {.titles = six_titles, .ntitles = 6};
    char base[256];
    in_dir(base, sizeof base, "w");
    long n = 0;
    for (;; n++) {
        mha_debug_fail_alloc_after(n);
        mha_clear_error();
        int status = heatmap_write(t, &opt, base);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "allocation %ld: %s", n,
                     mha_last_error());
        cr_assert(!strncmp(mha_last_error(), "heatmap_write: out of memory", 28),
                  "%s", mha_last_error());
        assert_listing("");
    }
    cr_assert_gt(n, 0, "heatmap_write allocates nothing?");
    tensor_free(t);
}

Test(heatmap, out_of_memory_while_rendering)
{
    /* allocations past writing the files: the image is never half-made */
    tensor *t = six_panels();
    char base[256], prog[256];
    in_dir(base, sizeof base, "w");
    /* a gnuplot that writes a tiny SVG to the path after out= */
    setenv("MHA_GNUPLOT",
           fake_gnuplot(prog, sizeof prog,
                        "out=${3#*out=\\'}\n"
                        "echo '<svg/>' > \"${out%\\'}\""),
           1);
    long n = 0;
    for (;; n++) {
        mha_debug_fail_alloc_after(n);
        int status = heatmap_render(t, NULL, base, HEATMAP_SVG);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS)
            break;
        cr_assert_eq(status, GSL_ENOMEM, "allocation %ld: %s", n,
                     mha_last_error());
        char *files = listing();
        cr_assert(!strcmp(files, "fake-gnuplot") ||
                      !strcmp(files, "fake-gnuplot w.dat w.gp"),
                  "allocation %ld left %s", n, files);
        free(files);
    }
    assert_listing("fake-gnuplot w.dat w.gp w.svg");
    tensor_free(t);
}
//<
