//> 01
/* gnuplot.h: pictures drawn by gnuplot, the parts every chart shares:
 * numbers and text written into a script, the script's opening (where its
 * data and picture live, PNG or SVG), the data and script written both or
 * neither, and gnuplot run on the script.  heatmap.h and plot.h draw with
 * these.
 *
 * A picture is three files beside each other, named by a base path
 * without extension, e.g. "plots/13_loss":
 *     base.dat   the numbers
 *     base.gp    the script that draws them, which finds base.dat beside
 *                itself from wherever gnuplot runs, and re-renders by hand:
 *                    gnuplot -e "fmt='svg'" plots/13_loss.gp
 *                (fmt is 'png' when not given; the image lands beside the
 *                script, or where `out` says)
 *     base.png and/or base.svg, the picture gnuplot renders.
 *
 * Text in a script is quoted one way only: as a gnuplot single-quoted
 * string, in which '' stands for a quote and nothing else is special (no
 * backslash escapes, no `command` substitution), so a title or a path can
 * never become a command.  A control character (a newline above all)
 * would end the script's line, so text with one is refused.
 *
 * Output is deterministic, and numbers are written in the C locale's
 * format: a program must not switch LC_NUMERIC to one with a decimal
 * comma before drawing.
 */
#ifndef MHA_GNUPLOT_H
#define MHA_GNUPLOT_H

#include <stddef.h>
#include <stdio.h>

#include "base/cleanup.h"

/* Image formats, to be or-ed together (heatmap.h names them HEATMAP_PNG
 * and HEATMAP_SVG for its callers). */
enum { GNUPLOT_PNG = 1, GNUPLOT_SVG = 2 };

/* gnuplot_render's answer when gnuplot is not installed: base.dat and
 * base.gp stay, and the message says so.  It lies outside GSL's codes, so
 * it is never mistaken for one. */
#define GNUPLOT_MISSING 100

/* The largest width or height of a picture, in pixels. */
#define GNUPLOT_MAX_PIXELS 16384

/* --- checks -------------------------------------------------------------- */

/* Text for one line of a script (a title, a label, a path): refused with
 * a control character.  With no_double_quotes, a '"' is refused too, for
 * text that also goes into a "quoted" field of a data file. */
int gnuplot_check_text(const char *who, const char *what, const char *s,
                       int no_double_quotes);

/* A base path: not NULL or empty, not ending in '/' (the message gives
 * `example`, e.g. "plots/weights"), and text as above. */
int gnuplot_check_base(const char *who, const char *base, const char *example,
                       int no_double_quotes);

/* formats: GNUPLOT_PNG, GNUPLOT_SVG or both. */
int gnuplot_check_formats(const char *who, int formats);

/* --- writing the script and its data ------------------------------------ */

/* v as the shortest of %.15g, %.16g and %.17g that reads back as v: exact
 * (the .dat reads back as the very numbers) yet 0.1 stays "0.1"; -0 is 0. */
void gnuplot_put_number(FILE *f, double v);

/* s followed by suffix as one single-quoted string. */
void gnuplot_put_quoted(FILE *f, const char *s, const char *suffix);

/* The same in a new string (free() it), or NULL when out of memory. */
char *gnuplot_quoted(const char *who, const char *s, const char *suffix);

/* The opening of every script: a comment saying what it draws (printf's
 * format and arguments; lines after the first start with "# ") and how
 * to re-render it, then `data` (name.dat beside the script), `out`
 * (name.<fmt> beside it unless given), the terminal for fmt ('png':
 * pngcairo, 'svg': svg) at width x height pixels, white, in sans 11, with
 * text taken literally, and `set output out`. */
void gnuplot_put_preamble(FILE *f, const char *name, int width, int height,
                          const char *what, ...)
    __attribute__((format(printf, 5, 6)));

/* What gnuplot_write calls to fill the data file and the script; name is
 * base's file name part, as the script refers to its data. */
typedef void (*gnuplot_writer)(FILE *dat, FILE *gp, const char *name,
                               const void *ctx);

/* Write base.dat and base.gp with write, both or neither (fileset.h):
 * an existing pair is replaced only by a complete one. */
int gnuplot_write(const char *who, const char *base, gnuplot_writer write,
                  const void *ctx);

/* --- running gnuplot ------------------------------------------------------ */

/* 1 when the gnuplot these functions run exists and is executable: the
 * program the environment variable MHA_GNUPLOT names (a name or a path, no
 * arguments), else "gnuplot", a name looked up on PATH. */
int gnuplot_available(void);

/* Run gnuplot on script to draw in format fmt ("png" or "svg") into the
 * existing file out (which gnuplot truncates and writes in place); image
 * is the path the picture is for, named in messages.  Runs
 *     gnuplot -d -e "fmt='<fmt>'; out='<out>'" <script>
 * as a child process without a shell, with -d (no start-up files, so a
 * user's ~/.gnuplot cannot change the picture), stdin from /dev/null,
 * stdout and stderr into a pipe read back here, and no other descriptor
 * of the caller's (with glibc 2.34 or later); a signal that ends this
 * program ends gnuplot too (cleanup.h).  Returns GSL_SUCCESS,
 * GNUPLOT_MISSING ("gnuplot not found"), or GSL_EFAILED when gnuplot
 * fails, is killed or writes nothing (the message gives its exit status
 * and the last line it printed). */
int gnuplot_run(const char *who, const char *script, const char *fmt,
                const char *out, const char *image);

/* Start argv[0] (looked up on PATH) with stdin from /dev/null and stdout
 * and stderr into a pipe, keep the last tailn - 1 bytes it prints in
 * tail, and wait for it.  Returns 0 and the wait status in *wstatus (-1
 * if it was lost), or the errno of a start that failed (ENOENT: no such
 * program).  While it runs it is registered with cleanup.h (child, from
 * cleanup_add_child), so a signal that ends this program ends it too.
 * gnuplot_run starts gnuplot with it, graphviz_render (graphviz.h) dot. */
int gnuplot_spawn(char *const argv[], cleanup_entry *child, int *wstatus,
                  char *tail, size_t tailn);

/* Render base.gp to base.png and/or base.svg, all the formats asked for
 * or none (fileset.h): the same statuses as gnuplot_run, with
 * GNUPLOT_MISSING's message
 *     gnuplot not found; kept plots/x.dat and plots/x.gp (install gnuplot-nox to render)
 * With the same gnuplot and fonts, a script renders byte-identical PNG
 * and SVG files (neither carries a date); across machines the fonts, and
 * so the pixels, may differ, and the SVG names the gnuplot version. */
int gnuplot_render(const char *who, const char *base, int formats);

#endif
//<
