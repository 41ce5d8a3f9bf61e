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
# well, and no README is written.
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
rm -rf "$out"
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
[ -z "$handout" ] || exit 0
title=$(sed -n '1s|^/\* Chapter [0-9]*: \(.*\)\.$|\1|p' chapters/"$ch"_*.c)
cat > "$out/README.md" <<EOT
# Multi-head attention, step by step, in C: the code as of chapter $ch

The library and the lessons up to chapter $ch ($title), cut from the
full project by \`make snapshot CH=$ch\`: every line a later chapter adds
is left out.  \`make\` builds it, \`make test\` runs its tests and checks
each chapter's output against its transcript in tests/expected/.
EOT
echo "snapshot: wrote $out, the code as of chapter $ch"
