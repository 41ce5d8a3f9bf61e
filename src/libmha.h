/* libmha.h: everything libmha offers, for programs that want it all:
 * every module's header, and program.h's set-up that comes first. */
#ifndef MHA_LIBMHA_H
#define MHA_LIBMHA_H

#include "adam.h"
#include "attention.h"
#include "backward.h"
#include "cleanup.h"
#include "error.h"
#include "fileset.h"
#include "flash.h"
#include "gqa.h"
#include "gnuplot.h"
#include "headmajor.h"
#include "heatmap.h"
#include "heatmap_grid.h"
#include "heatmap_terminal.h"
#include "kvcache.h"
#include "layernorm.h"
#include "linear.h"
#include "madds.h"
#include "model.h"
#include "multihead.h"
#include "multihead_fast.h"
#include "npy.h"
#include "posenc.h"
#include "plot.h"
#include "program.h"
#include "qkv.h"
#include "rowops.h"
#include "softmax.h"
#include "tensor.h"
#include "threads.h"
#include "trace.h"

#endif
