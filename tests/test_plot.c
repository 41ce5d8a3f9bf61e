//> 13
/* test_plot.c: line and bar charts: the .dat and .gp files, the renders,
 * and the ways to get them wrong. */
#include "check.h"

#include <dirent.h>
#include <errno.h>
#include <unistd.h>

#include "scratch.h"

static void make_dir(void) { scratch_make("mha-plot"); }

static void remove_dir(void)
{
    unsetenv("MHA_GNUPLOT");
    scratch_leave();
}

TestSuite(plot, .init = make_dir, .fini = remove_dir);

static char *path_of(const char *name)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s/%s", scratch_dir, name);
    return buf;
}

static char *read_text(const char *name) { return slurp(path_of(name)); }

/* How many files the scratch directory holds. */
static int files(void)
{
    DIR *d = opendir(scratch_dir);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(plot, line_files)
{
    double x[3] = {1, 2, 3}, y[3] = {2.5, 0.1, 1e-3};
    plot_options opt = {.title = "loss", .xlabel = "step", .ylabel = "it's",
                        .log_y = 1};
    OK(plot_line(x, y, 3, &opt, path_of("curve"), HEATMAP_PNG | HEATMAP_SVG));
    file_is(path_of("curve.dat"), "# 3 points (x, y), drawn by curve.gp\n"
                                  "1 2.5\n2 0.1\n3 0.001\n");
    FILE_HOLDS(path_of("curve.gp"),
               "# A line through 3 points from curve.dat.  Render beside "
               "this script with\n",
               "data = here . 'curve.dat'\n",
               "set title 'loss'\nset xlabel 'step'\nset ylabel 'it''s'\n"
               "set logscale y\n",
               "plot data using 1:2 with lines",
               "set terminal pngcairo size 640,400 ");
    char *png = read_text("curve.png");
    cr_assert(memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
    free(png);
    FILE_HOLDS(path_of("curve.svg"), "<svg");
    cr_assert_eq(files(), 4);
}

Test(plot, lines_files)
{
    double x[3] = {0, 1, 2}, ys[6] = {0, 0.5, 1, 1, -0.25, 3};
    const char *names[2] = {"col 6", "it's 7"};
    OK(plot_lines(x, ys, 3, 2, names, NULL, path_of("cols"), HEATMAP_SVG));
    file_is(path_of("cols.dat"),
            "# 3 points, x then 2 lines, drawn by cols.gp\n"
            "0 0 1\n1 0.5 -0.25\n2 1 3\n");
    FILE_HOLDS(path_of("cols.gp"), "# 2 lines through 3 points from cols.dat.",
               "set key below height 1\n"
               "plot data using 1:2 with lines lw 2 lc rgb '#1b9e77' title "
               "'col 6', \\\n"
               "     data using 1:3 with lines lw 2 lc rgb '#d95f02' title "
               "'it''s 7'\nunset output\n");
    FILE_HOLDS(path_of("cols.svg"), "<svg");
    cr_assert_eq(files(), 3);
    FAILS(plot_lines(x, ys, 3, 0, names, NULL, path_of("none"), HEATMAP_SVG),
          GSL_EINVAL, "plot_lines: no lines to draw (k is 0)");
    ys[4] = NAN;
    FAILS(plot_lines(x, ys, 3, 2, names, NULL, path_of("nan"), HEATMAP_SVG),
          GSL_EINVAL, "plot_lines: ys[4] is nan; values must be finite");
    names[1] = "a\"b";
    ys[4] = 0;
    mha_clear_error();
    cr_assert_neq(plot_lines(x, ys, 3, 2, names, NULL, path_of("q"),
                             HEATMAP_SVG), GSL_SUCCESS);
    cr_assert_eq(files(), 3, "a refused chart leaves no file");
}

Test(plot, bar_files)
{
    const char *labels[3] = {"head 0", "head 1", "all"};
    double v[3] = {0.25, 0, 1.5};
    plot_options opt = {.width = 300, .height = 200};
    OK(plot_bars(labels, v, 3, &opt, path_of("bars"), HEATMAP_PNG));
    file_is(path_of("bars.dat"),
            "# 3 bars (\"label\" value), drawn by bars.gp\n"
            "\"head 0\" 0.25\n\"head 1\" 0\n\"all\" 1.5\n");
    FILE_HOLDS(path_of("bars.gp"), "set terminal pngcairo size 300,200 ",
               "set xrange [-0.6:2.6]\nset yrange [0:*]\n",
               "plot data using 0:2:xtic(1) with boxes");
    char *gp = read_text("bars.gp");
    cr_assert_null(strstr(gp, "set title"));
    free(gp);
    cr_assert_eq(files(), 3); /* .dat, .gp, .png */
    /* a negative bar: the axis is left to gnuplot */
    v[1] = -0.5;
    OK(plot_bars(labels, v, 3, NULL, path_of("bars"), HEATMAP_SVG));
    gp = read_text("bars.gp");
    cr_assert_null(strstr(gp, "set yrange"));
    free(gp);
}

Test(plot, same_input_same_bytes)
{
    double x[2] = {0, 0.1}, y[2] = {1.0 / 3, -2};
    OK(plot_line(x, y, 2, NULL, path_of("a"), HEATMAP_PNG));
    OK(plot_line(x, y, 2, NULL, path_of("b"), HEATMAP_PNG));
    char *a = read_text("a.dat"), *b = read_text("b.dat");
    /* the names differ in the comment line only */
    cr_assert_str_eq(strchr(a, '\n'), strchr(b, '\n'));
    cr_assert(strstr(a, "0.1 -2\n"));
    cr_assert(strstr(a, "0 0.3333333333333333\n"));
    free(a);
    free(b);
    a = read_text("a.png");
    b = read_text("b.png");
    cr_assert(memcmp(a, b, 1024) == 0);
    free(a);
    free(b);
}

Test(plot, missing_gnuplot_keeps_data_and_script)
{
    setenv("MHA_GNUPLOT", "/nonexistent/gnuplot", 1);
    double x[1] = {1}, y[1] = {2};
    mha_clear_error();
    int status = plot_line(x, y, 1, NULL, path_of("kept"), HEATMAP_PNG);
    cr_assert_eq(status, HEATMAP_NO_GNUPLOT);
    char want[512];
    snprintf(want, sizeof want,
             "heatmap: gnuplot not found (MHA_GNUPLOT=/nonexistent/gnuplot); "
             "kept %s/kept.dat and %s/kept.gp (install gnuplot-nox to render)",
             scratch_dir, scratch_dir);
    cr_assert_str_eq(mha_last_error(), want);
    cr_assert_eq(files(), 2);
}

Test(plot, errors_leave_no_file)
{
    double x[2] = {1, 2}, y[2] = {1, 0}, bad[2] = {1, NAN};
    const char *labels[2] = {"a", "say \"b\""};
    plot_options log = {.log_y = 1}, title = {.title = "two\nlines"};
    plot_options big = {.width = 20000};
    const char *base = path_of("x");
    FAILS(plot_line(x, y, 0, NULL, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_line: nothing to plot (n is 0)");
    FAILS(plot_line(x, bad, 2, NULL, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_line: y[1] is nan; values must be finite");
    FAILS(plot_line(x, y, 2, &log, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_line: y[1] is 0, which a logarithmic axis cannot show");
    FAILS(plot_line(x, y, 2, &title, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_line: the title contains control character 0x0a; labels and "
          "titles are single lines without double quotes");
    FAILS(plot_line(x, y, 2, &big, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_line: size 20000 x 0 is out of range; use 0 (640 x 400) or "
          "1 to 16384 pixels");
    FAILS(plot_line(x, y, 2, NULL, base, 4), GSL_EINVAL,
          "plot_line: formats 4 is not HEATMAP_PNG (1), HEATMAP_SVG (2) or "
          "both (3)");
    FAILS(plot_line(x, y, 2, NULL, "plots/", HEATMAP_PNG), GSL_EINVAL,
          "plot_line: output path plots/ ends in '/'; give a file name "
          "without extension, e.g. plots/loss");
    FAILS(plot_bars(labels, y, 2, NULL, base, HEATMAP_PNG), GSL_EINVAL,
          "plot_bars: labels[1] contains a double quote 0x22; labels and "
          "titles are single lines without double quotes");
    FAILS(plot_bars(labels, x, 1, NULL, "/nonexistent/dir/x", HEATMAP_PNG),
          GSL_EFAILED,
          "plot_bars: cannot create /nonexistent/dir/x.dat: No such file or "
          "directory");
    FAILS(heatmap_render_script("", HEATMAP_PNG), GSL_EINVAL,
          "heatmap_render_script: the script path is empty");
    cr_assert_eq(files(), 0);
}
//<
