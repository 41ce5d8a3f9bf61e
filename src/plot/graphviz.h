//> 21
/* graphviz.h: a graph in Graphviz's dot language drawn as pictures.
 *
 * A chapter writes base.dot (paged_write_dot does, for the block tables
 * of a paged cache) and graphviz_render runs Graphviz's dot on it, as
 * gnuplot_render runs gnuplot on base.gp: each picture written under a
 * temporary name and renamed into place with the others (fileset.h), dot
 * run without a shell (gnuplot_spawn) and ended by a signal that ends the
 * program (cleanup.h).
 */
#ifndef MHA_GRAPHVIZ_H
#define MHA_GRAPHVIZ_H

#include "plot/gnuplot.h"

/* The status when dot is not installed (the pictures' source is kept). */
#define GRAPHVIZ_MISSING (GNUPLOT_MISSING + 1)

/* Render base.dot to base.png and/or base.svg (GNUPLOT_PNG, GNUPLOT_SVG),
 * all or none.  GSL_SUCCESS; GRAPHVIZ_MISSING with the message
 *     dot not found; kept plots/x.dot (install graphviz to render)
 * GSL_EFAILED when dot fails or is killed (its exit status and the last
 * line it printed); GSL_EINVAL for no format. */
int graphviz_render(const char *who, const char *base, int formats);

#endif
//<
