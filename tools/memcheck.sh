#!/bin/sh
# tools/memcheck.sh BUILD: every chapter and the whole test suite under
# valgrind's memcheck.  Fails on any error or any leak, in any process.
#
# Criterion runs each test in a child process and decides pass or fail
# from what the child reports, not from how it exits, so a leak found at
# a child's exit would go unnoticed: every process writes its own log
# (--log-file=...%p) and this script reads them all.
set -eu
build=${1:-build}
logs=$build/valgrind
rm -rf "$logs"
mkdir -p "$logs"
# absolute, so a child running in another directory (the CLI tests run
# build/mha in a scratch directory) logs here too
logs=$(cd "$logs" && pwd)

# tools/valgrind.supp: libgomp's thread pool, alive until exit (see there)
vg="valgrind --quiet --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99
    --suppressions=$(cd "$(dirname "$0")" && pwd)/valgrind.supp"

# OpenBLAS's kernels for a CPU with AVX but no FMA (Sandybridge), or
# with SSE4.2 alone (Nehalem) on one without AVX: valgrind has no FMA of
# its own and runs each one through a helper call, so the kernels it
# would pick here (Haswell's and later, all FMA) take ten to fifteen
# times as long under it (a test of four forward passes at L = 600,
# D = 256: 102 s, 6.7 s with Sandybridge's).  Our code runs the same
# steps whatever the kernels; only OpenBLAS's inner loops differ.  An
# OPENBLAS_CORETYPE already set is kept.
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
    if grep -qw avx /proc/cpuinfo 2>/dev/null; then
        OPENBLAS_CORETYPE=Sandybridge
    else
        OPENBLAS_CORETYPE=Nehalem
    fi
fi
export OPENBLAS_CORETYPE

# MHA_QUICK=1: the chapters that train (13, 14) run 20 steps on 100
# held-out sequences instead of their full lesson, which would take many
# minutes at valgrind's pace; the transcript tests run the full lesson.
# Two at a time, as the suite runs; a chapter that fails fails the run.
list=$(find "$build"/chapters -maxdepth 1 -type f -perm -u+x | sort)
chapters=$(echo "$list" | wc -l)
echo "$list" |
    MHA_QUICK=1 MHA_PLOTS_DIR="$logs" xargs -P 2 -I{} sh -c 'exec $0 --log-file="$1/chapter-$(basename "$2").%p" "$2" > /dev/null' \
        "$vg" "$logs" {} || {
    echo "memcheck: a chapter failed under valgrind (logs in $logs)" >&2
    exit 1
}

# The suite in two halves at once, by the suites' first letters (about
# the same time each under valgrind), each half two tests at a time.
# Criterion starts one test's process at a time and waits until it is up,
# which under valgrind takes about a second: one runner keeps two cores
# busy only about two thirds of the time, two runners nearly all of it
# (a quarter less time, measured).  Children that are not ours (the
# shell behind popen, gnuplot) run natively.
half() { # half NAME PATTERN
    MHA_MEMCHECK=1 $vg --trace-children=yes \
        --trace-children-skip='*/sh,*/bash,*/dash,*/gnuplot*,*/dot,*/rm,*/python3*,*/env' \
        --log-file="$logs/tests.%p" \
        "$build"/tests/run_tests --jobs 2 --filter "$2" > "$logs/$1.out" 2>&1
}
passed() { # passed NAME STATUS
    [ "$2" = 0 ] && grep -q ' Failing: 0 | Crashing: 0' "$logs/$1.out" || {
        tail -20 "$logs/$1.out"
        echo "memcheck: the test suite failed under valgrind ($1 half)" >&2
        exit 1
    }
}
half first '[a-l]*/*' &
pid=$!
second=0
half second '!([a-l]*)/*' || second=$?
first=0
wait "$pid" || first=$?
passed first "$first"
passed second "$second"

# --quiet leaves a log empty unless something was wrong.
bad=$(find "$logs" -name 'chapter-*' -size +0 -o -name 'tests.[0-9]*' -size +0)
if [ -n "$bad" ]; then
    for f in $bad; do echo "== $f"; head -40 "$f"; done
    echo "memcheck: valgrind found errors or leaks (logs in $logs)" >&2
    exit 1
fi
procs=$(find "$logs" -name 'tests.[0-9]*' | wc -l)
echo "memcheck: $chapters chapters and the test suite ($procs processes): 0 errors, 0 leaks"
