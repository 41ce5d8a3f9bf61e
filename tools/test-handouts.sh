#!/bin/sh
# tools/test-handouts.sh BUILD [NN...]: every chapter's handout (or those
# named), cut as `make handout CH=NN` cuts it and built as a student
# builds it: the library, the chapters, the tests and mha, all of it.
# From chapter 06 on its quiz answers any seed and asks nothing a later
# chapter teaches; before 06 it says in one line where the quiz starts,
# exit 2.  (`make snapshots` builds each chapter's code at -O2 with
# -Werror; a handout differs by its blanks, so here -O0 does, in a third
# of the time.)  Every option a cut's `mha CMD --help` names is one its
# mha CMD takes.  From chapter 08 on, mha runs the module: its forward
# on .npy files stops at the first blank (exit 3, the exercise's line,
# no output); then, the blanks filled with the teacher's bodies (as
# `make handout FROM=` gives them) and mha built again, a smoke set of
# its commands on small .npy files, each option from its chapter on
# (--rope 15, --causal 16, --kv-heads 17, PyTorch's 18, --window,
# --alibi and --sinks 19), runs as the teacher's mha does: the same exit
# status, the same one line on bad input, the same trace and terminal
# heatmap, and outputs equal to 1e-12 (the cut has no fast path, so not
# to the bit).  BUILD holds the built marks-filter, weave and mha.
set -eu
build=${1:?usage: tools/test-handouts.sh BUILD [NN...]}
shift
chapters=${*:-$(ls chapters/[0-9][0-9]_*.c | sed 's|^chapters/\(..\).*|\1|')}
dir=$(mktemp -d /tmp/mha-handouts.XXXXXX)
trap 'rm -rf "$dir"' EXIT
trap 'exit 130' HUP INT TERM
fail() { echo "handouts: $*" >&2; exit 1; }
py=${PYTHON:-/usr/bin/python3}
start=$(date +%s)

# the smoke set's inputs (tools/npy_plain.py): Q (2, 3, 4), K (2, 5, 6),
# V (2, 5, 3), D 4 in 2 heads, D_out 5; X (2, 4, 4) with W (4, 4) for
# self-attention; one of each mistake
npys=$dir/in
mkdir "$npys"
PYTHONPATH=tools "$py" -B - "$npys" <<'PY'
import math, sys
from npy_plain import npy_write
d = sys.argv[1]
def put(name, shape, seed, scale=1.0):
    n = math.prod(shape)
    npy_write("%s/%s.npy" % (d, name), shape,
              [scale * math.sin(1.3 * i + seed) for i in range(n)])
for k, (name, shape) in enumerate([
        ("q", (2, 3, 4)), ("k", (2, 5, 6)), ("v", (2, 5, 3)), ("wq", (4, 4)),
        ("wk", (4, 6)), ("wv", (4, 3)), ("wo", (5, 4)), ("bq", (4,)),
        ("bk", (4,)), ("bv", (4,)), ("bo", (5,)), ("x", (2, 4, 4)),
        ("w", (4, 4)), ("wkg", (2, 6)), ("wvg", (2, 3)), ("sinks", (2,)),
        ("am", (4, 4)), ("ipw", (12, 4)), ("wqbad", (4, 5))]):
    put(name, shape, k, 0.5 if name[0] in "wb" or name == "ipw" else 1.0)
npy_write(d + "/vl.npy", (2, 3), [1, 2, 3, 5, 4, 1])
PY
F="--heads 2 --queries $npys/q.npy --keys $npys/k.npy --values $npys/v.npy --wq $npys/wq.npy --wk $npys/wk.npy --wv $npys/wv.npy --wo $npys/wo.npy"
S="--heads 2 --queries $npys/x.npy --wq $npys/w.npy --wk $npys/w.npy --wv $npys/w.npy --wo $npys/w.npy"
G=$(echo "$F" | sed 's|/wk.npy|/wkg.npy|; s|/wv.npy|/wvg.npy|')
# smoke NAME STATUS ARGS: the cut's mha ($h) and the teacher's on ARGS,
# @ standing for a folder of each one's own (its outputs): both exit
# STATUS, and on 2 print the same one line; the outputs are compared
# once the cut's set has run
smoke() {
    name=$1 want=$2
    shift 2
    for side in c t; do
        bin=$build/mha
        [ "$side" = t ] || bin=$h/build/mha
        mkdir -p "$out/$side/$name"
        # (the arguments hold no space: they are split as written)
        "$bin" $(echo "$*" | sed "s|@|$out/$side/$name|g") > "$out/$side/$name.out" \
            2> "$out/$side/$name.err" < /dev/null && rc=0 || rc=$?
        [ "$rc" = "$want" ] ||
            { cat "$out/$side/$name.err"; fail "mha $* exits $rc, not $want, in the handout of CH=$ch$([ "$side" = c ] || echo " (the teacher's mha)")"; }
    done
    [ "$want" != 2 ] || { [ "$(wc -l < "$out/c/$name.err")" = 1 ] && cmp -s "$out/c/$name.err" "$out/t/$name.err"; } ||
        { cat "$out/c/$name.err" "$out/t/$name.err"; fail "mha $* in the handout of CH=$ch does not refuse in the teacher's one line"; }
}
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
    # every option a help text names, its command takes: `mha CMD OPT
    # --help` asks for the help once OPT is read, or says OPT needs a
    # value, but never that OPT is unknown
    for c in $("$h/build/mha" --help | sed -n 's/^  \([a-z][a-z]*\)  .*/\1/p'); do
        "$h/build/mha" "$c" --help > "$dir/help" || fail "mha $c --help fails in the handout of CH=$ch"
        for opt in $(grep -o -e '--[a-z][a-z0-9-]*' "$dir/help" | sort -u); do
            case $("$h/build/mha" "$c" "$opt" --help 2>&1 > /dev/null < /dev/null) in
            *"unknown option '$opt'"*)
                fail "mha $c --help in the handout of CH=$ch names $opt, which its mha $c does not take" ;;
            esac
        done
    done
    if [ "$n" -ge 8 ]; then
        # the module's exercises blank: forward stops at the first, in
        # one line, and writes nothing
        "$h/build/mha" forward $S --out "$dir/o.npy" > /dev/null 2> "$dir/err" && rc=0 || rc=$?
        [ "$rc" = 3 ] && [ "$(wc -l < "$dir/err")" = 1 ] && grep -q '^this needs exercise ' "$dir/err" && [ ! -e "$dir/o.npy" ] ||
            { cat "$dir/err"; fail "mha forward in the handout of CH=$ch, its exercises blank, exits $rc, not 3 with the exercise's one line and no output"; }
        # the blanks filled with the teacher's bodies, mha built again
        for f in $(cd "$h" && grep -l 'return mha_fail_exercise(' src/*/*.c); do
            "$build/marks-filter" --handout "$ch" "$f" > "$h/$f"
        done
        (cd "$h" && MAKEFLAGS= make -j2 CFLAGS=-O0 build/mha >> "$dir/$ch.log" 2>&1) ||
            { tail -n 20 "$dir/$ch.log"; fail "mha of the handout of CH=$ch does not build with its exercises filled"; }
        out=$dir/out
        rm -rf "$out"
        smoke forward 0 forward $F --bq $npys/bq.npy --bk $npys/bk.npy --bv $npys/bv.npy --bo $npys/bo.npy \
            --valid-lens 2,5 --out @/o.npy --attention-out @/a.npy
        smoke lens-file 0 forward $F --valid-lens-file $npys/vl.npy --out @/o.npy --attention-out @/a.npy
        smoke self 0 forward $S --out @/o.npy
        smoke missing 2 forward $(echo "$F" | sed 's|/q.npy|/none.npy|') --out @/o.npy
        smoke shape 2 forward $(echo "$F" | sed 's|/wq.npy|/wqbad.npy|') --out @/o.npy
        smoke heatmap 0 heatmap $F --valid-lens 2,5 --terminal
        smoke trace 0 trace --valid-lens 3,2 --json
        smoke view 0 view --html @/v.html $F --valid-lens 2,5
        smoke view-sizes 0 view --html @/v.html --valid-lens 3,2
        [ "$n" -lt 15 ] || smoke rope 0 forward $F --rope --out @/o.npy --attention-out @/a.npy
        [ "$n" -lt 16 ] || smoke causal 0 forward $F --causal --out @/o.npy --attention-out @/a.npy
        [ "$n" -lt 17 ] || smoke kv-heads 0 forward $G --kv-heads 1 --out @/o.npy --attention-out @/a.npy
        [ "$n" -lt 18 ] || smoke torch 0 forward --heads 2 --queries $npys/x.npy --in-proj-weight $npys/ipw.npy \
            --wo $npys/w.npy --attn-mask $npys/am.npy --add-zero-attn --out @/o.npy --attention-out @/a.npy
        [ "$n" -lt 19 ] || smoke window 0 forward $F --window 2 --keep-first 1 --alibi --sinks $npys/sinks.npy \
            --out @/o.npy --attention-out @/a.npy
        [ "$n" -lt 19 ] || smoke view-window 0 view --html @/v.html --window 2 --alibi
        for name in heatmap trace; do
            cmp -s "$out/c/$name.out" "$out/t/$name.out" ||
                { diff "$out/c/$name.out" "$out/t/$name.out" | head -n 20; fail "mha $name in the handout of CH=$ch prints other than the teacher's"; }
        done
        PYTHONPATH=tools "$py" -B - "$out" <<'PY' || fail "mha in the handout of CH=$ch writes other numbers than the teacher's (above)"
import os, sys
from npy_plain import npy_read
out, bad = sys.argv[1], 0
for name in sorted(os.listdir(out + "/t")):
    t = out + "/t/" + name
    if not os.path.isdir(t):
        continue
    files = sorted(os.listdir(t))
    if sorted(os.listdir(out + "/c/" + name)) != files:
        print("%s: the cut writes %s, the teacher %s" % (name, sorted(os.listdir(out + "/c/" + name)), files))
        bad = 1
    for f in (f for f in files if f.endswith(".npy")):
        (sc, c), (st, w) = npy_read(out + "/c/" + name + "/" + f), npy_read(t + "/" + f)
        diff = max((abs(x - y) for x, y in zip(c, w)), default=0)
        if sc != st or diff > 1e-12:
            print("%s/%s: shape %s, the teacher's %s, largest difference %g" % (name, f, sc, st, diff))
            bad = 1
sys.exit(bad)
PY
    fi
    rm -rf "$h"
done
echo "handouts: $(echo $chapters | wc -w) chapters' handouts cut and built (library, chapters, tests, mha), their quizzes and help checked, and from chapter 08 on their mha forward, heatmap, trace and view run as the teacher's, in $(($(date +%s) - start)) s"
