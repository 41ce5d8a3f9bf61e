#!/bin/sh
# tools/check-clean-tree.sh: running the chapters leaves git status as it
# was, on any CPU (`make clean-tree`; CI runs it).
#
# The chapters' numbers end in digits that depend on the BLAS kernels
# OpenBLAS picks for the CPU at run time, so a tracked file a chapter
# wrote would change on another machine.  This runs `make walkthrough`
# and then `make docs` once for each of several kernels that this CPU can
# run, chosen through OPENBLAS_CORETYPE: the environment's choice,
# OpenBLAS's own for this CPU, and on x86-64 Prescott (SSE3, the oldest)
# and, with AVX, Sandybridge.  After each, `git status` (with the content
# of every changed file) must be what it was before: the chapters draw
# into plots/, which git ignores, and `make docs` keeps docs/pictures/
# unless a picture changed beyond rounding (tools/docs-pictures.sh).
set -eu
cd "$(dirname "$0")/.."

state() {
    git status --porcelain=v1 --untracked-files=all
    git diff HEAD --binary | cksum
}
before=$(state)

kernels="env auto"
if [ "$(uname -m)" = x86_64 ]; then
    kernels="$kernels Prescott"
    grep -qw avx /proc/cpuinfo && kernels="$kernels Sandybridge"
fi

log=$(mktemp /tmp/mha-clean-tree-XXXXXX)
trap 'rm -f "$log"' EXIT
make --no-print-directory build > "$log" 2>&1 || { cat "$log"; exit 1; }
failed=0
for k in $kernels; do
    case $k in
    env) run="" ;;                                        # as the environment says
    auto) run="env -u OPENBLAS_CORETYPE" ;;               # OpenBLAS's choice
    *) run="env OPENBLAS_CORETYPE=$k" ;;
    esac
    # "... DYNAMIC_ARCH NO_AFFINITY Haswell MAX_THREADS=64)": the kernels
    which=$($run build/cblas-info | sed -n 's/.* \([^ ]*\) MAX_THREADS=.*/\1/p')
    if ! $run make --no-print-directory walkthrough > "$log" 2>&1 ||
        ! $run make --no-print-directory docs >> "$log" 2>&1; then
        echo "clean-tree: $k: make walkthrough or make docs failed:"
        tail -n 30 "$log"
        failed=$((failed + 1))
        continue
    fi
    if [ "$(state)" = "$before" ]; then
        echo "clean-tree: $k (${which:-?} kernels): walkthrough and docs leave git status as it was"
    else
        echo "clean-tree: $k (${which:-?} kernels): git status changed:"
        git status --porcelain=v1 --untracked-files=all | sed 's/^/    /'
        failed=$((failed + 1))
    fi
done
set -- $kernels
echo "clean-tree: $(($# - failed)) passed, $failed failed"
[ "$failed" = 0 ]
