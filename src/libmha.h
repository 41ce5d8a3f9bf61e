/* libmha.h: everything libmha offers, for programs that want it all:
 * every module's header, in the order the chapters add them, and
 * program.h's set-up that comes first. */
#ifndef MHA_LIBMHA_H
#define MHA_LIBMHA_H

// the base: errors, tensors and their trace, a program's set-up
#include "base/cleanup.h"
#include "base/error.h"
#include "base/program.h"
#include "tensor/rowops.h"
#include "tensor/tensor.h"
#include "base/threads.h"
#include "trace/trace.h"
#include "tensor/tensor_trace.h"
//> 02
#include "tensor/matrices.h"
//<
// pictures: heatmaps, drawn by gnuplot or in the terminal
#include "io/fileset.h"
#include "plot/gnuplot.h"
#include "plot/heatmap.h"
#include "plot/heatmap_grid.h"
#include "plot/heatmap_terminal.h"
//> 02
#include "nn/linear.h"
//<
//> 03
#include "nn/softmax.h"
//<
//> 04
#include "nn/qkv.h"
#include "nn/attention.h"
//<
//> 06
#include "nn/multihead.h"
//<
//> 08
#include "plot/explorer.h"
//<
//> 11
#include "nn/layernorm.h"
#include "nn/headmajor.h"
//<
//> 12
#include "nn/flash.h"
//<
//> 13
#include "nn/backward.h"
#include "train/adam.h"
#include "train/model.h"
#include "plot/plot.h"
//<
//> 15
#include "nn/posenc.h"
//<
//> 16
#include "nn/kvcache.h"
#include "nn/attention_madds.h"
//<
//> 17
#include "nn/gqa.h"
//<
//> 18
#include "nn/mask.h"
//<
//> 20
#include "nn/mla.h"
//<
//> 21
#include "plot/graphviz.h"
#include "nn/paged.h"
//<
//> 19
#include "nn/window.h"
#include "nn/window_cache.h"
//<
//> handout
#include "io/npy.h"
//<
//> full
#include "fast/multihead_fast.h"
//<

#endif
