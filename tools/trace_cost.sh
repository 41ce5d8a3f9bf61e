#!/bin/sh
# tools/trace_cost.sh: what tracing costs when it is off, in instructions.
# Builds tools/trace_cost.c against libmha twice (tracing compiled in but
# off; tracing compiled out with -DMHA_NO_TRACE), counts the instructions
# of one forward pass of each with callgrind, and prints the difference.
set -eu
make --no-print-directory build/libmha.a > /dev/null
make --no-print-directory BUILD=build/notrace CFLAGS="-O2 -g -DMHA_NO_TRACE" \
    build/notrace/libmha.a > /dev/null
cc() { gcc -std=c11 -O2 -g -fopenmp -Isrc $(pkg-config --cflags gsl) "$@" \
    $(pkg-config --define-variable=GSL_CBLAS_LIB=-lopenblas --libs gsl) -lm; }
cc tools/trace_cost.c build/libmha.a -o build/trace-cost
cc -DMHA_NO_TRACE tools/trace_cost.c build/notrace/libmha.a -o build/notrace/trace-cost
count() {
    OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 valgrind --tool=callgrind \
        --callgrind-out-file=/dev/null "$@" 2>&1 |
        sed -n 's/.*Collected : *\([0-9]*\).*/\1/p'
}
for path in copy fast; do
    on=$(count build/trace-cost $path)
    off=$(count build/notrace/trace-cost $path)
    awk -v p="$path" -v a="$on" -v b="$off" 'BEGIN {
        printf "trace-cost: %s path: %d instructions with tracing compiled in and off, %d compiled out: %+.4f%%\n",
               p, a, b, 100 * (a - b) / b }'
done
