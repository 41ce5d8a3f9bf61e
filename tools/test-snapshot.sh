#!/bin/sh
# tools/test-snapshot.sh: `make snapshot CH=NN` never deletes what a
# reader wrote in build/snapshot/NN (tools/snapshot.sh).
#   1. a new snapshot is written, with the list of the files it wrote;
#      run again, it is left as it is;
#   2. a reader's file in it, or a file of it edited, is refused in one
#      line naming the file, and every file is as it was, no copy left;
#   3. what the snapshot's own make writes (build/, plots/NN_*) is kept:
#      with it the snapshot is still the tool's, left as it is; replaced
#      when its files are all the tool's, unchanged (one missing), with
#      build/ and the plots moved into the new one;
#   4. an older snapshot, without the list, holding a reader's file: refused.
set -eu
build=${BUILD:-build}
dir=$(mktemp -d /tmp/mha-snapshot-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "snapshot-check: $*" >&2; exit 1; }
s=$dir/08
snap() { tools/snapshot.sh 08 "$build/marks-filter" "$s" > "$dir/out" 2> "$dir/err"; }
state() { (cd "$s" && find . -type f -exec cksum {} + | sort); }
# refused in one line naming $1, every file as it was, no copy left
refused() {
    state > "$dir/before"
    snap && fail "a snapshot holding $1 is replaced"
    [ "$(wc -l < "$dir/err")" = 1 ] && grep -q "^snapshot: $s holds $1, a file make snapshot did not write" "$dir/err" ||
        { cat "$dir/err"; fail "a snapshot holding $1 is not refused in one line naming it"; }
    state | cmp -s - "$dir/before" || fail "refusing a snapshot holding $1 changed it"
    [ -z "$(ls -A "$dir" | grep '^\.08')" ] || fail "a refused snapshot left its new copy behind"
}

snap || { cat "$dir/err"; fail "make snapshot CH=08 fails"; }
grep -q "^snapshot: wrote $s" "$dir/out" && [ -f "$s/.snapshot-files" ] ||
    fail "a new snapshot: $(cat "$dir/out")"
snap && grep -q 'left as it is' "$dir/out" || fail "a snapshot again: $(cat "$dir/out" "$dir/err")"
mkdir -p "$s/build"
echo "built" > "$s/build/x"
echo "drawn" > "$s/plots/08_heads.png"
snap && grep -q 'left as it is' "$dir/out" || fail "a snapshot with its build and plots: $(cat "$dir/out" "$dir/err")"

echo "my notes" > "$s/NOTES.c"
refused NOTES.c
rm "$s/NOTES.c"
echo "/* tried */" >> "$s/src/nn/multihead.c"
refused src/nn/multihead.c
sed -i '$d' "$s/src/nn/multihead.c"

rm "$s/README.md"
snap && grep -q "^snapshot: replaced $s" "$dir/out" || fail "a snapshot of the tool's files: $(cat "$dir/out" "$dir/err")"
[ -f "$s/README.md" ] && [ "$(cat "$s/build/x")" = built ] && [ "$(cat "$s/plots/08_heads.png")" = drawn ] ||
    fail "a replaced snapshot lost its build/, its plots or a file"

rm "$s/.snapshot-files"
echo "my notes" > "$s/NOTES.c"
refused NOTES.c
echo "snapshot-check: make snapshot keeps or refuses a snapshot holding a reader's files, replaces one of its own with its build/ and plots kept"
