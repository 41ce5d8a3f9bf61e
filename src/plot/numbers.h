//> 08
/* numbers.h: where each number of the module's split and join goes, for
 * the "numbers" section of the explorer's page (explorer.h).
 *
 * transpose_qkv and transpose_output only move numbers, and only some of
 * their steps move them.  To show which, the steps the trace recorded
 * inside each of them (the reshape and permute records one level below
 * its step record) are run again, with the library's own tensor_reshape
 * and tensor_permute, on a contiguous tensor of the recorded input's
 * shape (the module's are: a projection's output, the attention's) whose
 * every element holds its own index in the input (row-major: x[b, i, j]
 * of a (B, n, D) input holds (b*n + i)*D + j).  Each stage is then a real
 * tensor: its shape, its strides, its offset into its buffer and whether
 * that buffer is a new one (a copy) or the one before (a view) are what
 * the library decided, and reading a position of it says which element of
 * the input the position holds.  Nothing here knows the rule for views.
 *
 * What it writes, as JSON (the page's "numbers"): a list of splits and
 * joins, each
 *
 *   {"op": "transpose_qkv(h=8)", "of": "queries, keys and values",
 *    "numel": 32, "shown": 32, "stages": [stage, ...]}
 *
 * one entry for each different step and input shape (the keys' split is
 * its own entry when it differs from the queries': other lengths, or G
 * key-value heads).  An entry whose steps cannot be run again (a step
 * that is no reshape or permute, or a view or copy that differs from the
 * trace's because the input was not contiguous) has a "note" saying so,
 * and no stages.  A stage is
 *
 *   {"op": "input" or the step's op, "kind": "input", "view" or "copy",
 *    "shape": [...], "names": [...], "strides": [...], "offset": o,
 *    "buffer": k,            0 the input's buffer, 1 the first copy's ...
 *    "index": [[...], ...],  the indices drawn, per dimension
 *    "cells": [...],         the input element each drawn position holds
 *                            (a flat index), positions in row-major order
 *    "slots": [...]}         where each of them lies in its buffer
 *
 * Past NUMBERS_SHOWN_MAX elements a stage shows a sample, the same
 * elements in every stage: the first of each dimension of the first 4-D
 * stage, halving the largest count until at most that many remain. */
#ifndef MHA_NUMBERS_H
#define MHA_NUMBERS_H

#include <stdio.h>

#include "trace/trace.h"

#define NUMBERS_SHOWN_MAX 512

/* The list for the splits and joins in log, "[...]", on f (an empty list
 * when there is none).  GSL_SUCCESS, or GSL_ENOMEM with the message in
 * mha_last_error() (f then holds part of the list). */
int numbers_write_json(FILE *f, const trace_log *log);

#endif
//<
