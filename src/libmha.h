/* libmha.h: everything libmha offers, for programs that want it all:
 * every module's header, in the order the chapters add them, and
 * program.h's set-up that comes first. */
#ifndef MHA_LIBMHA_H
#define MHA_LIBMHA_H

// the base: errors, tensors and their trace, a program's set-up
#include "cleanup.h"
#include "error.h"
#include "program.h"
#include "rowops.h"
#include "tensor.h"
#include "threads.h"
#include "trace.h"
// pictures: heatmaps, drawn by gnuplot or in the terminal
#include "fileset.h"
#include "gnuplot.h"
#include "heatmap.h"
#include "heatmap_grid.h"
#include "heatmap_terminal.h"
//> 02
#include "linear.h"
//<
//> 03
#include "softmax.h"
//<
//> 04
#include "qkv.h"
#include "attention.h"
//<
//> 06
#include "multihead.h"
//<
//> 11
#include "layernorm.h"
#include "headmajor.h"
//<
//> 12
#include "flash.h"
//<
//> 13
#include "backward.h"
#include "adam.h"
#include "model.h"
#include "plot.h"
//<
//> 15
#include "posenc.h"
//<
//> 16
#include "kvcache.h"
#include "madds.h"
//<
//> 17
#include "gqa.h"
//<
//> 18
#include "mask.h"
//<
//> 19
#include "window.h"
#include "window_cache.h"
//<
//> handout
#include "npy.h"
//<
//> full
#include "multihead_fast.h"
//<

#endif
