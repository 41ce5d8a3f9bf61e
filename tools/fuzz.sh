#!/bin/sh
# tools/fuzz.sh SECONDS HARNESS...: run each libFuzzer harness for SECONDS
# on its seed corpus (see seeds() below) plus what earlier runs kept in
# build/fuzz/corpus-NAME.  Any crash, leak or sanitizer report fails the
# run and leaves the input in build/fuzz/ (turn it into a regression test).
set -eu
seconds=$1
shift
seeds() {
    case "$1" in
    fuzz_npy) echo tests/fixtures/npy ;;
    *) echo "tests/fuzz/${1#fuzz_}" ;;
    esac
}
for harness in "$@"; do
    name=$(basename "$harness")
    corpus=build/fuzz/corpus-${name#fuzz_}
    mkdir -p "$corpus"
    log=build/fuzz/$name.log
    if ! "$harness" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -close_fd_mask=2 \
        -artifact_prefix=build/fuzz/"$name"- -print_final_stats=1 \
        "$corpus" "$(seeds "$name")" > "$log" 2>&1; then
        tail -40 "$log"
        echo "fuzz: $name found a failure (input in build/fuzz/$name-*)" >&2
        exit 1
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    echo "fuzz: $name: $runs executions in ${seconds}s, nothing found"
done
