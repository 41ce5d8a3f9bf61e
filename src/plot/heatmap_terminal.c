//> 01
/* heatmap_terminal.c: attention weights drawn with Unicode shades; see
 * heatmap_terminal.h.
 *
 * Shapes: panel (r, c) of the grid is the (Lq, Lk) matrix of weights
 * m[r, c], drawn as Lq rows of Lk two-column cells.
 */
#include "plot/heatmap_terminal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* Shades, two columns per cell.  Blank is kept for a weight of exactly 0
 * (a masked key), on every scale, so a small but real weight never looks
 * masked; the four shades split the scale into quarters, [lo, lo + q],
 * (lo + q, lo + 2q], ..., (hi - q, hi] (for weights, lo is 0). */
static const char *const shades[5] = {"  ", "░░", "▒▒", "▓▓", "██"};

static int shade(const heatmap_grid *g, double v)
{
    if (v == 0)
        return 0;
    int level = (int)ceil(4 * (v - g->lo) / (g->hi - g->lo));
    return level < 1 ? 1 : level > 4 ? 4 : level;
}

/* Columns a UTF-8 string takes: one per code point (no wide characters
 * in labels, as a terminal would draw them). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; s && *s; s++)
        w += ((unsigned char)*s & 0xc0) != 0x80;
    return w;
}

/* A line being assembled: bytes plus the column the cursor is at. */
typedef struct {
    char *buf;
    size_t len, col;
} line;

static void put_str(line *l, const char *s)
{
    size_t n = strlen(s);
    memcpy(l->buf + l->len, s, n);
    l->len += n;
    l->col += text_width(s);
}

/* Pad with blanks up to column col. */
static void pad_to(line *l, size_t col)
{
    while (l->col < col) {
        l->buf[l->len++] = ' ';
        l->col++;
    }
}

/* Write the line without trailing blanks and start the next one. */
static void flush_line(FILE *f, line *l)
{
    while (l->len > 0 && l->buf[l->len - 1] == ' ')
        l->len--;
    fwrite(l->buf, 1, l->len, f);
    fputc('\n', f);
    l->len = 0;
    l->col = 0;
}

/* s centred over a box of `width` columns starting at column `at`. */
static void put_centred(line *l, size_t at, size_t width, const char *s)
{
    size_t w = text_width(s);
    pad_to(l, at + (w < width ? (width - w) / 2 : 0));
    put_str(l, s);
}

static void put_rule(line *l, const char *left, size_t n, const char *right)
{
    put_str(l, left);
    for (size_t i = 0; i < n; i++)
        put_str(l, "─");
    put_str(l, right);
}

static void put_scale_number(line *l, double v)
{
    char num[32];
    snprintf(num, sizeof num, "%.3g", v == 0 ? 0 : v);
    put_str(l, num);
}

#define TERMINAL_COLUMNS 80 /* the default width to wrap panels at */

/* The terminal's columns: a gutter with the y label and the query indices,
 * then one box of 2 Lk cells per panel, box edges `stride` columns apart. */
typedef struct {
    size_t gutter, box_w, stride, per_band;
    size_t key_step; /* a key index under every key_step-th cell */
} columns;

/* One band: panels (r, c0) to (r, c1 - 1) side by side. */
static void put_band(FILE *f, line *l, const heatmap_grid *g, const columns *cl,
                     size_t r, size_t c0, size_t c1)
{
    int titled = 0;
    for (size_t c = c0; c < c1; c++)
        titled |= heatmap_grid_title(g, r, c) != NULL;
    if (titled) {
        for (size_t c = c0; c < c1; c++) {
            const char *t = heatmap_grid_title(g, r, c);
            if (t)
                put_centred(l, cl->gutter + (c - c0) * cl->stride, cl->box_w,
                            t);
        }
        flush_line(f, l);
    }
    for (size_t c = c0; c < c1; c++) {
        pad_to(l, cl->gutter + (c - c0) * cl->stride);
        put_rule(l, "┌", 2 * g->lk, "┐");
    }
    flush_line(f, l);
    for (size_t q = 0; q < g->lq; q++) {
        char num[24];
        if (q == 0)
            put_str(l, g->ylabel);
        snprintf(num, sizeof num, "%zu", q);
        pad_to(l, cl->gutter - 1 - strlen(num)); /* right-aligned */
        put_str(l, num);
        for (size_t c = c0; c < c1; c++) {
            pad_to(l, cl->gutter + (c - c0) * cl->stride);
            put_str(l, "│");
            for (size_t k = 0; k < g->lk; k++)
                put_str(l, shades[shade(g, heatmap_grid_at(g, r, c, q, k))]);
            put_str(l, "│");
        }
        flush_line(f, l);
    }
    for (size_t c = c0; c < c1; c++) {
        pad_to(l, cl->gutter + (c - c0) * cl->stride);
        put_rule(l, "└", 2 * g->lk, "┘");
    }
    flush_line(f, l);
    if (r + 1 < g->rows)
        return;
    /* under the bottom row only, as in the picture: key indices under each
     * cell's left half, then the x label */
    for (size_t c = c0; c < c1; c++)
        for (size_t k = 0; k < g->lk; k += cl->key_step) {
            char num[24];
            snprintf(num, sizeof num, "%zu", k);
            pad_to(l, cl->gutter + (c - c0) * cl->stride + 1 + 2 * k);
            put_str(l, num);
        }
    flush_line(f, l);
    if (*g->xlabel) {
        for (size_t c = c0; c < c1; c++)
            put_centred(l, cl->gutter + (c - c0) * cl->stride, cl->box_w,
                        g->xlabel);
        flush_line(f, l);
    }
}

/* What each shade stands for on the shared scale, wrapped to fit. */
static void put_legend(FILE *f, line *l, const heatmap_grid *g, size_t columns)
{
    if (g->vmin == g->vmax) {
        put_str(l, "every weight is ");
        put_scale_number(l, g->vmin);
        put_str(l, ", drawn as [");
        put_str(l, shades[g->vmin == 0 ? 0 : 2]);
        put_str(l, "]");
        flush_line(f, l);
        return;
    }
    put_str(l, "shades, one scale for all panels:");
    for (int s = 0; s < 5; s++) {
        char entry[96];
        if (s == 0)
            snprintf(entry, sizeof entry, "[%s] exactly 0", shades[0]);
        else
            snprintf(entry, sizeof entry, "[%s] %s%.3g to %.3g", shades[s],
                     s == 1 && g->lo == 0 ? "above " : "", g->lo + (g->hi - g->lo) * (s - 1) / 4,
                     s == 4 ? g->hi : g->lo + (g->hi - g->lo) * s / 4);
        if (l->col + 2 + text_width(entry) > columns) {
            flush_line(f, l);
            put_str(l, " ");
        }
        put_str(l, "  ");
        put_str(l, entry);
    }
    flush_line(f, l);
}

int heatmap_terminal(FILE *f, const tensor *m, const heatmap_options *opt)
{
    const char *who = "heatmap_terminal";
    heatmap_grid g;
    if (!f)
        return mha_fail(GSL_EINVAL, "%s: the output stream is NULL", who);
    int status = heatmap_grid_make(who, m, opt, &g);
    if (status)
        return status;

    columns cl;
    size_t ylab_w = text_width(g.ylabel);
    cl.gutter = (ylab_w ? ylab_w + 1 : 0) +
                (size_t)heatmap_grid_digits(g.lq - 1) + 1;
    cl.box_w = 2 * g.lk + 2;
    cl.key_step = g.lk <= 10 ? 1 : 5; /* 5 steps leave 10 columns a label */
    size_t last_key = (g.lk - 1) / cl.key_step * cl.key_step;
    size_t col_w = cl.box_w;
    size_t keys_w = 1 + 2 * last_key + (size_t)heatmap_grid_digits(last_key);
    col_w = keys_w > col_w ? keys_w : col_w;
    col_w = text_width(g.xlabel) > col_w ? text_width(g.xlabel) : col_w;
    /* text bytes need not be columns (UTF-8), so count both */
    size_t text_bytes = strlen(g.ylabel) + g.cols * strlen(g.xlabel) +
                        (g.title ? strlen(g.title) : 0);
    for (size_t p = 0; p < g.rows * g.cols; p++) {
        const char *t = heatmap_grid_title(&g, p / g.cols, p % g.cols);
        col_w = t && text_width(t) > col_w ? text_width(t) : col_w;
        text_bytes += t ? strlen(t) : 0;
    }
    const size_t gap = 2;
    size_t term = g.term_columns ? (size_t)g.term_columns : TERMINAL_COLUMNS;
    cl.stride = col_w + gap;
    cl.per_band = 1;
    while (cl.per_band < g.cols &&
           cl.gutter + (cl.per_band + 1) * cl.stride - gap <= term)
        cl.per_band++;

    /* the widest line: a band, the title, or the legend; up to 4 bytes of
     * UTF-8 per column, plus the labels' own bytes */
    size_t width = cl.gutter + g.cols * cl.stride + text_width(g.title) +
                   term + 128;
    size_t cap = 4 * width + text_bytes + 16;
    line l = {mha_malloc(cap, 1, who), 0, 0};
    if (!l.buf)
        return GSL_ENOMEM;

    if (g.title) {
        pad_to(&l, cl.gutter);
        put_str(&l, g.title);
        flush_line(f, &l);
    }
    for (size_t r = 0; r < g.rows; r++)
        for (size_t c0 = 0; c0 < g.cols; c0 += cl.per_band) {
            size_t c1 = c0 + cl.per_band < g.cols ? c0 + cl.per_band : g.cols;
            put_band(f, &l, &g, &cl, r, c0, c1);
        }
    put_legend(f, &l, &g, term);
    free(l.buf);
    if (fflush(f) != 0 || ferror(f))
        return mha_fail(GSL_EFAILED, "%s: cannot write the heatmap: %s", who,
                        strerror(errno));
    return GSL_SUCCESS;
}
//<
