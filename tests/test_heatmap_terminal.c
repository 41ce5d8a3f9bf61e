//> 01
/* test_heatmap_terminal.c: the terminal view of heatmap_terminal.h, to
 * the character, and its failures. */
#include "check.h"

#include "heatmap_weights.h"

/* heatmap_terminal's text (and status) for t. */
static char *terminal_text(const tensor *t, const heatmap_options *opt,
                           int *status)
{
    capture c;
    capture_start(&c);
    *status = heatmap_terminal(c.f, t, opt);
    capture_end(&c);
    return c.text;
}

/* A view that must succeed and draw exactly `expected`. */
static void terminal_is(const tensor *t, const heatmap_options *opt,
                        const char *expected)
{
    int status;
    char *text = terminal_text(t, opt, &status);
    OK(status);
    cr_assert_str_eq(text, expected);
    free(text);
}

Test(heatmap_terminal, terminal_view_of_two_panels)
{
    tensor *t = two_panels();
    const char *titles[] = {"Head 1", "it's head 2"};
    heatmap_options opt = {.titles = titles, .ntitles = 2,
                           .title = "Two heads"};
    terminal_is(t, &opt,
                "          Two heads\n"
                "           Head 1      it's head 2\n"
                "          ┌──────┐     ┌──────┐\n"
                "Queries 0 │  ▒▒██│     │▒▒▓▓░░│\n"
                "        1 │░░░░██│     │██░░  │\n"
                "          └──────┘     └──────┘\n"
                "           0 1 2        0 1 2\n"
                "            Keys         Keys\n"
                "shades, one scale for all panels:  [  ] exactly 0  "
                "[░░] above 0 to 0.25\n"
                "   [▒▒] 0.25 to 0.5  [▓▓] 0.5 to 0.75  [██] 0.75 to 1\n");
    tensor_free(t);
}

Test(heatmap_terminal, terminal_view_of_one_matrix)
{
    /* the identity over 12 keys: every fifth key is numbered */
    tensor *t;
    OK(tensor_alloc(SHAPE(3, 12), &t));
    for (size_t i = 0; i < 3; i++)
        *TENSOR_AT(t, i, 4 * i) = 1;
    heatmap_options opt = {.ylabel = "q", .xlabel = "k"};
    terminal_is(t, &opt,
                "    ┌────────────────────────┐\n"
                "q 0 │██                      │\n"
                "  1 │        ██              │\n"
                "  2 │                ██      │\n"
                "    └────────────────────────┘\n"
                "     0         5         10\n"
                "                k\n"
                "shades, one scale for all panels:  [  ] exactly 0  "
                "[░░] above 0 to 0.25\n"
                "   [▒▒] 0.25 to 0.5  [▓▓] 0.5 to 0.75  [██] 0.75 to 1\n");

    tensor_fill(t, 0.25);
    opt = (heatmap_options){.ylabel = ""};
    tensor *small;
    OK(tensor_alloc(SHAPE(2, 2), &small));
    tensor_fill(small, 0.25);
    terminal_is(small, &opt,
                "  ┌────┐\n"
                "0 │▒▒▒▒│\n"
                "1 │▒▒▒▒│\n"
                "  └────┘\n"
                "   0 1\n"
                "   Keys\n"
                "every weight is 0.25, drawn as [▒▒]\n");
    FREE_ALL(small, t);
}

Test(heatmap_terminal, terminal_view_wraps_wide_rows)
{
    /* three panels need 38 columns: in 30, two fit side by side; the
     * scale is [0, 17] in quarters of 4.25: only 0 itself is blank, 1..4
     * take the lightest shade, 5..8 the next, and so on */
    tensor *t = arange(SHAPE(2, 3, 1, 3));
    heatmap_options opt = {.term_columns = 30};
    terminal_is(t, &opt,
                "          ┌──────┐  ┌──────┐\n"
                "Queries 0 │  ░░░░│  │░░░░▒▒│\n"
                "          └──────┘  └──────┘\n"
                "          ┌──────┐\n"
                "Queries 0 │▒▒▒▒▒▒│\n"
                "          └──────┘\n"
                "          ┌──────┐  ┌──────┐\n"
                "Queries 0 │▓▓▓▓▓▓│  │▓▓████│\n"
                "          └──────┘  └──────┘\n"
                "           0 1 2     0 1 2\n"
                "            Keys      Keys\n"
                "          ┌──────┐\n"
                "Queries 0 │██████│\n"
                "          └──────┘\n"
                "           0 1 2\n"
                "            Keys\n"
                "shades, one scale for all panels:\n"
                "   [  ] exactly 0\n"
                "   [░░] above 0 to 4.25\n"
                "   [▒▒] 4.25 to 8.5\n"
                "   [▓▓] 8.5 to 12.8\n"
                "   [██] 12.8 to 17\n");
    tensor_free(t);
}

/* Blank is exactly 0 and nothing else: weights that are all above 0 (no
 * key masked) show no blank cell, on a scale that still starts at 0; a
 * scale with negative values starts at the smallest, and 0 stays blank. */
Test(heatmap_terminal, blank_is_exactly_zero)
{
    tensor *t = make(SHAPE(1, 4), (double[]){0.0104, 0.3, 0.6, 0.0896});
    heatmap_options opt = {.ylabel = "", .xlabel = ""};
    terminal_is(t, &opt,
                "  ┌────────┐\n"
                "0 │░░▒▒██░░│\n"
                "  └────────┘\n"
                "   0 1 2 3\n"
                "shades, one scale for all panels:  [  ] exactly 0  "
                "[░░] above 0 to 0.15\n"
                "   [▒▒] 0.15 to 0.3  [▓▓] 0.3 to 0.45  [██] 0.45 to 0.6\n");

    double v[4] = {-1, 0, 1, 3};
    for (size_t k = 0; k < 4; k++)
        *TENSOR_AT(t, 0, k) = v[k];
    terminal_is(t, &opt,
                "  ┌────────┐\n"
                "0 │░░  ▒▒██│\n"
                "  └────────┘\n"
                "   0 1 2 3\n"
                "shades, one scale for all panels:  [  ] exactly 0  "
                "[░░] -1 to 0  [▒▒] 0 to 1\n"
                "   [▓▓] 1 to 2  [██] 2 to 3\n");

    tensor_fill(t, 0);
    terminal_is(t, &opt,
                "  ┌────────┐\n"
                "0 │        │\n"
                "  └────────┘\n"
                "   0 1 2 3\n"
                "every weight is 0, drawn as [  ]\n");
    tensor_free(t);
}

/* --- bad input and failed writes ------------------------------------------ */

Test(heatmap_terminal, terminal_rejects_bad_input_and_writes_nothing)
{
    tensor *t = six_panels();
    *TENSOR_AT(t, 0, 0, 1, 1) = NAN;
    int status;
    char *text = terminal_text(t, NULL, &status);
    cr_assert_eq(status, GSL_EINVAL);
    cr_assert_str_eq(mha_last_error(),
                     "heatmap_terminal: weights[0, 0, 1, 1] is nan (panel "
                     "(0, 0), query 1, key 1) in weights of shape (2, 3, 2, "
                     "2); weights must be finite");
    cr_assert_str_eq(text, "");
    free(text);
    FAILS(heatmap_terminal(NULL, t, NULL), GSL_EINVAL,
          "heatmap_terminal: the output stream is NULL");
    tensor_free(t);
}

Test(heatmap_terminal, terminal_reports_a_failed_write)
{
    FILE *full = fopen("/dev/full", "w");
    if (!full)
        cr_skip_test("no /dev/full here");
    tensor *t = six_panels();
    FAILS(heatmap_terminal(full, t, NULL), GSL_EFAILED,
          "heatmap_terminal: cannot write the heatmap: No space left on "
          "device");
    fclose(full);
    tensor_free(t);
}

/* --- out of memory at every allocation ----------------------------------- */

Test(heatmap_terminal, out_of_memory_anywhere_writes_nothing)
{
    tensor *t = six_panels();
    heatmap_options opt = {.titles = six_titles, .ntitles = 6};
    long n = 0;
    for (;; n++) {
        mha_debug_fail_alloc_after(n);
        int status;
        char *text = terminal_text(t, &opt, &status);
        mha_debug_fail_alloc_after(-1);
        if (status == GSL_SUCCESS) {
            free(text);
            break;
        }
        cr_assert_eq(status, GSL_ENOMEM);
        cr_assert_str_eq(text, "");
        free(text);
    }
    cr_assert_gt(n, 0);
    tensor_free(t);
}
//<
