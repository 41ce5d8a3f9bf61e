#!/bin/sh
# tools/test-handouts.sh BUILD [NN...]: every chapter's handout (or those
# named), cut as `make handout CH=NN` cuts it and built as a student
# builds it: the library, the chapters, the tests and mha, all of it.
# From chapter 06 on its quiz answers any seed and asks nothing a later
# chapter teaches; before 06 it says in one line where the quiz starts,
# exit 2.  (`make snapshots` builds each chapter's code at -O2 with
# -Werror; a handout differs by its blanks, so here -O0 does, in a third
# of the time.)  BUILD holds the built marks-filter, weave and mha.
set -eu
build=${1:?usage: tools/test-handouts.sh BUILD [NN...]}
shift
chapters=${*:-$(ls chapters/[0-9][0-9]_*.c | sed 's|^chapters/\(..\).*|\1|')}
dir=$(mktemp -d /tmp/mha-handouts.XXXXXX)
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' HUP INT TERM
fail() { echo "handouts: $*" >&2; exit 1; }
start=$(date +%s)
for ch in $chapters; do
    h=$dir/$ch
    tools/handout.sh --chapter "$ch" --tools "$build" "$h" > /dev/null ||
        fail "make handout CH=$ch fails"
    (cd "$h" && MAKEFLAGS= make -j2 CFLAGS=-O0 > "$dir/$ch.log" 2>&1) ||
        { tail -n 20 "$dir/$ch.log"; fail "the handout of CH=$ch does not build"; }
    for f in build/libmha.a build/tests/run_tests build/mha; do
        [ -x "$h/$f" ] || [ -f "$h/$f" ] || fail "the handout of CH=$ch has no $f"
    done
    n=$(echo "$ch" | sed 's/^0//')
    if [ "$n" -lt 6 ]; then
        "$h/build/mha" quiz --seed 1 > /dev/null 2> "$dir/err" < /dev/null && rc=0 || rc=$?
        [ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && grep -q 'starts at chapter 06' "$dir/err" ||
            { cat "$dir/err"; fail "mha quiz in the handout of CH=$ch exits $rc, not 2 with one line naming chapter 06"; }
    else
        # what the quiz may not ask yet, by the chapter that teaches it
        late=""
        [ "$n" -ge 7 ] || late="$late|repeat_interleave"
        [ "$n" -ge 8 ] || late="$late|forward returns|mha trace"
        [ "$n" -ge 16 ] || late="$late|causal|cache"
        [ "$n" -ge 17 ] || late="$late|key-value head|G="
        for s in 0 1 2 3 5 8 13 21 34 55 999999999999999999; do
            "$h/build/mha" quiz --seed $s --solution > "$dir/quiz" 2> "$dir/err" ||
                { cat "$dir/err"; fail "mha quiz --seed $s --solution fails in the handout of CH=$ch"; }
            [ -z "$late" ] || ! grep -Eq "${late#|}" "$dir/quiz" ||
                { cat "$dir/quiz"; fail "the quiz of the handout of CH=$ch asks what a later chapter teaches (seed $s)"; }
        done
    fi
    rm -rf "$h"
done
echo "handouts: $(echo $chapters | wc -w) chapters' handouts cut and built (library, chapters, tests, mha), their quizzes checked, in $(($(date +%s) - start)) s"
