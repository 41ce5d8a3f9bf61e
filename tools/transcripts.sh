#!/bin/sh
# tools/transcripts.sh: rewrite the expected transcripts from the
# chapters' output, all of them or none (`make transcripts`).
#
#     tools/transcripts.sh CHAPTER_BIN_DIR EXPECTED_DIR NAME...
#
# Each chapter NAME runs with its stdout into a temporary directory inside
# EXPECTED_DIR; only when every one has exited 0 are they renamed over
# EXPECTED_DIR/NAME.txt.  A chapter that fails (an error, a full disk: the
# chapters exit non-zero when stdout did not take their output), or
# SIGINT, SIGTERM, SIGHUP on the way, leaves every transcript as it was
# and no temporary.
set -eu
[ $# -ge 2 ] || { echo "usage: tools/transcripts.sh CHAPTER_BIN_DIR EXPECTED_DIR NAME..." >&2; exit 2; }
bin=$1
dir=$2
shift 2
tmp=$(mktemp -d "$dir/.transcripts.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
for ch in "$@"; do
    status=0
    "$bin/$ch" > "$tmp/$ch.txt" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "transcripts: $ch exited with status $status; $dir is as it was" >&2
        exit 1
    fi
done
for ch in "$@"; do
    mv -f "$tmp/$ch.txt" "$dir/$ch.txt"
done
