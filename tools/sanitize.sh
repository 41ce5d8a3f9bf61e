#!/bin/sh
# tools/sanitize.sh BUILD: run the test suite built with AddressSanitizer,
# LeakSanitizer and UBSan (make sanitize builds it).  Every process writes
# its reports to BUILD/sanitizer-logs/, including the Criterion children
# and the chapters the transcript tests start, so a report in any of them
# fails the run even when the test itself passed.
set -eu
build=${1:-build/sanitize}
logs=$build/sanitizer-logs
rm -rf "$logs"
mkdir -p "$logs"
# absolute, so a child running in another directory (the CLI tests run
# build/sanitize/mha in a scratch directory) reports here too
logs=$(cd "$logs" && pwd)
export ASAN_OPTIONS="detect_leaks=1:log_path=$logs/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$logs/ubsan"
status=0
"$build"/tests/run_tests --jobs 2 || status=$?
reports=$(find "$logs" -type f)
if [ -n "$reports" ]; then
    for f in $reports; do echo "== $f"; head -40 "$f"; done
    echo "sanitize: sanitizer reports found (in $logs)" >&2
    exit 1
fi
[ "$status" = 0 ] || { echo "sanitize: tests failed" >&2; exit "$status"; }
echo "sanitize: no AddressSanitizer, LeakSanitizer or UBSan reports"
