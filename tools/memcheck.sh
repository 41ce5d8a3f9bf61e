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

# The suite, two tests at a time; children that are not ours (the shell
# behind popen, gnuplot) run natively.
MHA_MEMCHECK=1 $vg --trace-children=yes \
    --trace-children-skip='*/sh,*/bash,*/dash,*/gnuplot*,*/dot,*/rm,*/python3*,*/env' \
    --log-file="$logs/tests.%p" \
    "$build"/tests/run_tests --jobs 2 > "$logs/tests.out" 2>&1 || {
    tail -20 "$logs/tests.out"
    echo "memcheck: the test suite failed under valgrind" >&2
    exit 1
}

# --quiet leaves a log empty unless something was wrong.
bad=$(find "$logs" -name 'chapter-*' -size +0 -o -name 'tests.[0-9]*' -size +0)
if [ -n "$bad" ]; then
    for f in $bad; do echo "== $f"; head -40 "$f"; done
    echo "memcheck: valgrind found errors or leaks (logs in $logs)" >&2
    exit 1
fi
procs=$(find "$logs" -name 'tests.[0-9]*' | wc -l)
echo "memcheck: $chapters chapters and the test suite ($procs processes): 0 errors, 0 leaks"
