#!/bin/sh
# tools/test-transcripts.sh BUILD: `make transcripts` rewrites the
# expected transcripts all together or not at all (tools/transcripts.sh).
#   1. two stand-in chapters, the second failing: both transcripts are as
#      they were, and no temporary is left;
#   2. both succeeding: both are replaced;
#   3. chapter 01 itself under a file size limit below its output, as on
#      a full disk: it exits 1 with one line, and its transcript is as it
#      was.
set -eu
build=${1:-build}
dir=$(mktemp -d /tmp/mha-transcripts-XXXXXX)
trap 'rm -rf "$dir"' EXIT

fail() { echo "transcripts-check: $*" >&2; exit 1; }
holds() { [ "$(cat "$1")" = "$2" ] || fail "$1 holds '$(cat "$1")', not '$2'"; }
only() { [ "$(ls -A "$dir/expected" | tr '\n' ' ')" = "$1" ] ||
    fail "expected/ holds: $(ls -A "$dir/expected" | tr '\n' ' ')"; }

mkdir "$dir/bin" "$dir/expected" "$dir/plots"
printf '#!/bin/sh\necho new a\n' > "$dir/bin/01_a"
printf '#!/bin/sh\necho half of b\nexit 1\n' > "$dir/bin/02_b"
chmod +x "$dir/bin/01_a" "$dir/bin/02_b"
echo old a > "$dir/expected/01_a.txt"
echo old b > "$dir/expected/02_b.txt"

# 1. the second fails
if tools/transcripts.sh "$dir/bin" "$dir/expected" 01_a 02_b 2> "$dir/err"; then
    fail "a failing chapter went unnoticed"
fi
grep -q '^transcripts: 02_b exited with status 1; ' "$dir/err" ||
    fail "the failure was not reported: $(cat "$dir/err")"
holds "$dir/expected/01_a.txt" "old a"
holds "$dir/expected/02_b.txt" "old b"
only "01_a.txt 02_b.txt "

# 2. both succeed
printf '#!/bin/sh\necho new b\n' > "$dir/bin/02_b"
tools/transcripts.sh "$dir/bin" "$dir/expected" 01_a 02_b ||
    fail "two chapters that succeed were refused"
holds "$dir/expected/01_a.txt" "new a"
holds "$dir/expected/02_b.txt" "new b"
only "01_a.txt 02_b.txt "

# 3. a real chapter whose output does not fit (ulimit -f counts blocks of
# 512 or 1024 bytes; the transcript is larger than two)
ch=01_shapes_strides_views
[ "$(wc -c < "tests/expected/$ch.txt")" -gt 2048 ] ||
    fail "tests/expected/$ch.txt is too short for this check"
echo old > "$dir/expected/$ch.txt"
if (ulimit -f 2 && MHA_PLOTS_DIR="$dir/plots" \
    tools/transcripts.sh "$build/chapters" "$dir/expected" "$ch") 2> "$dir/err"; then
    fail "$ch went on past a full disk"
fi
# the first write past the limit may be stdout's or its picture's
grep -q "File too large" "$dir/err" ||
    fail "$ch said: $(cat "$dir/err")"
holds "$dir/expected/$ch.txt" "old"
only "01_a.txt $ch.txt 02_b.txt "
echo "transcripts-check: a failing chapter, or a full disk, leaves every transcript as it was; chapters that succeed replace them all"
