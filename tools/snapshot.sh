#!/bin/sh
# tools/snapshot.sh [--handout] NN FILTER [OUT]: the project as of
# chapter NN, written to OUT, by default build/snapshot/NN/ (FILTER is the
# built tools/marks_filter.c).
#
# A snapshot holds the Makefile, src/, chapters/ 01 .. NN with lesson.h,
# the test suites with the transcripts of those chapters, and
# tools/deps.sh, each file as of chapter NN (tools/marks.h: the lines of
# later chapters and the marks themselves left out; a file wholly of a
# later chapter left out), and the lines marked "handout": the mha
# program as of chapter NN (its quiz from chapter 06, its other commands
# from 08, each option from the chapter that teaches it), .npy files and
# the grading's hooks, which no page of the book shows.  In it `make`
# builds all of it, mha included, and `make test` runs its tests, with
# -Werror: CI builds and tests every snapshot.
#
# --handout: the cut a student's handout of chapters 01 .. NN starts from
# (tools/handout.sh): the grading's tool (tools/grade.py) is taken as
# well, and no README or list of files is written.
#
# It never deletes what a reader wrote.  The snapshot is written beside
# OUT under another name, with OUT/.snapshot-files, the SHA-256 of every
# file it wrote, and renamed into place when OUT does not exist (or is an
# empty folder).  When OUT exists, it is replaced only when every file in
# it is one the earlier run wrote, unchanged since (what the snapshot's own
# make wrote there, build/ and the chapters' plots/NN_*, is moved into the
# new snapshot, kept); left as it is when it is the new snapshot already;
# and refused, naming a file, with nothing changed, when it holds a file
# the snapshot did not write or one changed since (a reader's notes, an
# edited lesson).
set -eu
handout=
if [ "${1:-}" = --handout ]; then
    handout=--handout
    shift
fi
ch=${1:-}
filter=${2:?usage: tools/snapshot.sh [--handout] NN FILTER [OUT]}
out=${3:-build/snapshot/$ch}
case $ch in
    [0-9][0-9]) ;;
    *) echo "snapshot: CH must be a chapter number of two digits, like CH=08, not '$ch'" >&2
       exit 2 ;;
esac
if ! ls chapters/"$ch"_*.c >/dev/null 2>&1; then
    echo "snapshot: there is no chapter $ch (chapters/${ch}_*.c)" >&2
    exit 2
fi
if [ -L "$out" ] || { [ -e "$out" ] && [ ! -d "$out" ]; }; then
    echo "snapshot: $out exists and is not a folder: move it away or remove it, then run make snapshot CH=$ch again" >&2
    exit 1
fi
final=$out
mkdir -p "$(dirname "$final")"
out=$(cd "$(dirname "$final")" && pwd)/.$(basename "$final").new.$$
rm -rf "$out"
trap 'rm -rf "$out"' EXIT
trap 'exit 130' HUP INT TERM
mkdir -p "$out/plots"

# copy FILE as of chapter $ch, unless the chapter has none of it
take() {
    mkdir -p "$out/$(dirname "$1")"
    status=0
    "$filter" --handout "$ch" "$1" > "$out/$1" || status=$?
    case $status in
        0) [ -x "$1" ] && chmod +x "$out/$1"; return 0 ;;
        3) rm -f "$out/$1"; return 0 ;;
        *) exit 2 ;;
    esac
}

# the student's side of the grading, which a handout runs
grading=
[ -z "$handout" ] || grading="tools/grade.py tools/stub.awk"
for f in Makefile .gitignore tools/deps.sh tools/cblas_info.c tools/transcripts.sh chapters/lesson.h \
         src/*.c src/*.h src/*/*.js src/*/*.css src/*/*.c src/*/*.h tests/*.c tests/*.h $grading; do
    [ -f "$f" ] && take "$f"
done
for f in chapters/[0-9][0-9]_*.c; do
    n=$(basename "$f" | cut -c1-2)
    [ "$n" -le "$ch" ] || continue
    take "$f"
    t=tests/expected/$(basename "$f" .c).txt
    mkdir -p "$out/tests/expected"
    cp "$t" "$out/$t"
done
if [ -z "$handout" ]; then
    title=$(sed -n '1s|^/\* Chapter [0-9]*: \(.*\)\.$|\1|p' chapters/"$ch"_*.c)
    cat > "$out/README.md" <<EOT
# Multi-head attention, step by step, in C: the code as of chapter $ch

The library and the lessons up to chapter $ch ($title), cut from the
full project by \`make snapshot CH=$ch\`: every line a later chapter adds
is left out.  \`make\` builds it, \`make test\` runs its tests and checks
each chapter's output against its transcript in tests/expected/.
EOT
    # what this run wrote, for the next run to tell a reader's files apart
    (cd "$out" && find . -type f ! -name .snapshot-files | LC_ALL=C sort | sed 's|^\./||' |
        tr '\n' '\0' | xargs -0 sha256sum) > "$out/.snapshot-files"
fi

# into place, or refused when $final holds a file this run did not write
if [ ! -d "$final" ] || [ -z "$(ls -A "$final")" ]; then
    [ ! -d "$final" ] || rmdir "$final"
    mv "$out" "$final"
    echo "snapshot: wrote $final, the code as of chapter $ch"
    exit 0
fi
# what the snapshot's own make writes there (build/, the chapters'
# plots/NN_*, as .gitignore lists them) is kept, never compared; any other
# file is the tool's when .snapshot-files lists it with its bytes (or, in
# a snapshot older than that list, when the new snapshot has it alike)
made() {
    find . -path ./build -prune -o -path './plots/[0-9][0-9]_*' -prune -o \
        -type f ! -name .snapshot-files -print | sed 's|^\./||' | LC_ALL=C sort
}
theirs=$(cd "$final" && made | while IFS= read -r f; do
        if [ -f .snapshot-files ]; then
            grep -qxF "$(sha256sum < "$f" | cut -c1-64)  $f" .snapshot-files || echo "$f"
        else
            cmp -s "$f" "$out/$f" || echo "$f"
        fi
    done)
if [ -n "$theirs" ]; then
    n=$(echo "$theirs" | wc -l)
    if [ "$n" -eq 1 ]; then
        what="$theirs, a file make snapshot did not write (or changed since it wrote it): move it away"
    else
        what="$(echo "$theirs" | head -n 1) and $((n - 1)) more file$([ "$n" -eq 2 ] || echo s) make snapshot did not write (or changed since it wrote them): move them away"
    fi
    echo "snapshot: $final holds $what, then run make snapshot CH=$ch again; nothing was changed" >&2
    exit 1
fi
# every file there is the tool's, unchanged: the same list, none missing
if cmp -s "$final/.snapshot-files" "$out/.snapshot-files" &&
    (cd "$final" && sha256sum --quiet -c .snapshot-files > /dev/null 2>&1); then
    echo "snapshot: $final is the code as of chapter $ch already; left as it is"
    exit 0
fi
# replaced, what its make wrote kept
[ ! -d "$final/build" ] || mv "$final/build" "$out/build"
for f in "$final"/plots/[0-9][0-9]_*; do
    [ ! -e "$f" ] || mv "$f" "$out/plots/"
done
old=$(dirname "$out")/.$(basename "$final").old.$$
mv "$final" "$old"
mv "$out" "$final"
rm -rf "$old"
echo "snapshot: replaced $final, the code as of chapter $ch (its build/ and plots kept)"
