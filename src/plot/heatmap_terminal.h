//> 01
/* heatmap_terminal.h: attention weights in a terminal, for a shell with no
 * pictures: the grid of heatmap_grid.h drawn with Unicode shades.
 *
 * Output is deterministic: the same weights and options give the same
 * text, with numbers in the C locale's format.
 */
#ifndef MHA_HEATMAP_TERMINAL_H
#define MHA_HEATMAP_TERMINAL_H

#include <stdio.h>

#include "plot/heatmap_grid.h"
#include "tensor/tensor.h"

/* Draw the grid on f with Unicode shades, two characters per cell so the
 * cells look square: blank for a weight of exactly 0 (a masked key) and
 * nothing else, then '░', '▒', '▓', '█' for the four quarters of the
 * shared scale (heatmap_grid.h: from 0 for weights), [lo, lo + q], ...,
 * (hi - q, hi], the legend saying "[  ] exactly 0"; one grid row
 * of panels side by side per band, with the titles, the query and key
 * indices, the labels, and a legend line giving each shade's range.
 * A row of panels wider than opt->term_columns (80 by default) continues
 * in a band below.  opt may be NULL; width, height and palette do not
 * apply here.  Bad input writes nothing (heatmap_grid.h).
 * Returns GSL_EFAILED if writing to f fails. */
int heatmap_terminal(FILE *f, const tensor *m, const heatmap_options *opt);

#endif
//<
