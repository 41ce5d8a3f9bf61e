#!/bin/sh
# tools/docs-pictures.sh BUILD: the chapters' pictures that the book and
# the README show, kept in docs/pictures/ (`make docs` runs it, then
# weaves the pages that link to them).
#
# A chapter draws into plots/, which git does not track: its numbers end
# in digits that depend on the CPU (OpenBLAS picks its kernels at run
# time, and they sum in different orders), and gnuplot's PNG and SVG bytes
# depend on its version, so tracked pictures there would change whenever
# someone ran a chapter.  The book's copies live here instead, and only
# `make docs` writes them.
#
# Each picture a chapter's transcript announces ("[heatmap: plots/NAME.png
# ...]" or "[plot: plots/NAME.png ...]" in tests/expected/) is drawn again
# into BUILD/docs-pictures/ by running that chapter, and kept in
# docs/pictures/ as NAME.png with NAME.dat and NAME.gp, the data and the
# script it was drawn from (`gnuplot docs/pictures/NAME.gp` draws it
# again).  A graph ("[graph: plots/NAME.png ...]") is kept as NAME.png with
# NAME.dot, the Graphviz source it was drawn from (`dot -Tpng`).
#
# The rule that keeps docs/ still when nothing changed: docs/pictures/NAME.*
# are replaced only when the new NAME.dat or NAME.gp differs from the kept
# one in its text or in a number beyond rounding (tools/same-numbers.awk:
# 9 significant digits, or 1e-12).  The last digits that another CPU's
# kernels move and the bytes another gnuplot writes never show in a
# picture, so they never change docs/; a change to a chapter's numbers,
# the library or the way a picture is drawn does, and then the picture is
# redrawn on the machine that runs `make docs`.  A picture no transcript
# announces any more is removed.
#
# tools/docs-pictures.sh BUILD --check (make test-pictures, in make test)
# writes nothing in docs/: it names each picture `make docs` would redraw,
# rewrite or remove, and exits 1 when there is one.
set -eu
build=$1
check=${2:-}
stale=""
# keep NAME: whether docs/pictures may change for NAME now; with --check
# it may not, and NAME is noted as stale
keep() {
    [ "$check" = --check ] || return 0
    stale="$stale $1"
    return 1
}
scratch=$build/docs-pictures
out=docs/pictures
rm -rf "$scratch"
mkdir -p "$scratch" "$out"

# "CHAPTER NAME" for each picture announced, in chapter order
announced=$(grep -HoE '\[(heatmap|plot|graph): plots/[^. ]*\.png' tests/expected/*.txt |
    sed 's|^tests/expected/\(.*\)\.txt:\[[a-z]*: plots/\(.*\)\.png$|\1 \2|')
# and for each page of the explorer ("[explorer: plots/NAME.html]"), kept
# as docs/pictures/NAME.html by the same rule: its numbers have 6 digits
pages=$(grep -HoE '\[explorer: plots/[^. ]*\.html' tests/expected/*.txt |
    sed 's|^tests/expected/\(.*\)\.txt:\[explorer: plots/\(.*\)\.html$|\1 \2|')

for ch in $( (echo "$announced"; echo "$pages") | awk 'NF { print $1 }' | sort -u); do
    MHA_PLOTS_DIR=$scratch "$build/chapters/$ch" > "$scratch/$ch.out" 2>&1 || {
        echo "docs-pictures: $build/chapters/$ch failed:" >&2
        tail -n 20 "$scratch/$ch.out" >&2
        exit 1
    }
done

same() { [ -f "$2" ] && awk -f tools/same-numbers.awk "$1" "$2" > /dev/null; }

changed=0
names=" "
for name in $(echo "$announced" | awk '{ print $2 }'); do
    names="$names$name "
    new=$scratch/$name
    if [ -f "$new.dot" ]; then # a graph: its source is the picture's data
        sources="$new.dot"
        if [ -f "$out/$name.png" ] && cmp -s "$new.dot" "$out/$name.dot"; then
            continue
        fi
    else
        sources="$new.dat $new.gp"
        [ -f "$new.dat" ] && [ -f "$new.gp" ] || {
            echo "docs-pictures: no $new.dat or $new.gp after running its chapter" >&2
            exit 1
        }
        if [ -f "$out/$name.png" ] && same "$new.dat" "$out/$name.dat" &&
            same "$new.gp" "$out/$name.gp"; then
            continue
        fi
    fi
    keep "$name" || continue
    [ -f "$new.png" ] || {
        echo "docs-pictures: $name changed but $new.png was not drawn (install gnuplot-nox)" >&2
        exit 1
    }
    cp $sources "$new.png" "$out/"
    echo "docs-pictures: redrew $out/$name.png"
    changed=$((changed + 1))
done

for name in $(echo "$pages" | awk '{ print $2 }'); do
    names="$names$name "
    new=$scratch/$name.html
    [ -f "$new" ] || {
        echo "docs-pictures: no $new after running its chapter" >&2
        exit 1
    }
    same "$new" "$out/$name.html" && continue
    keep "$name.html" || continue
    cp "$new" "$out/"
    echo "docs-pictures: rewrote $out/$name.html"
    changed=$((changed + 1))
done

# Page 06's own page of the explorer: mha view of its example, (1, 2, 16)
# cut into 8 heads, kept as 06_numbers.html by the same rule, and the
# picture of the page's "Where each number goes" that page 06 shows,
# 06_numbers.svg: what the page's "save SVG" writes with x[0, 1, 5] lit,
# drawn by Chromium (tools/test-view.py --picture) whenever the page is
# rewritten or the picture is missing.
name=06_numbers
names="$names$name "
"$build/mha" view --batch 1 --queries 2 --kv 2 --hiddens 16 --heads 8 --d2l \
    --title "Chapter 06: (1, 2, 16) cut into 8 heads" --html "$scratch/$name.html"
if ! same "$scratch/$name.html" "$out/$name.html" || [ ! -f "$out/$name.svg" ]; then
    if keep "$name.html"; then
        ${PYTHON:-python3} tools/test-view.py --picture "$scratch/$name.html" \
            "$scratch/$name.svg" || {
            echo "docs-pictures: $name.html changed but $name.svg was not drawn" \
                 "(make browser-test installs chromium)" >&2
            exit 1
        }
        cp "$scratch/$name.html" "$scratch/$name.svg" "$out/"
        echo "docs-pictures: rewrote $out/$name.html and drew $out/$name.svg"
        changed=$((changed + 1))
    fi
fi

for f in "$out"/*; do
    [ -e "$f" ] || continue
    base=$(basename "$f")
    case $names in
    *" ${base%.*} "*) ;;
    *) keep "$base" || continue
       rm -f "$f"; echo "docs-pictures: removed $f (no chapter draws it)" ;;
    esac
done
if [ "$check" = --check ]; then
    [ -z "$stale" ] && { echo "docs-pictures: $out/ is current"; exit 0; }
    echo "docs-pictures: stale in $out/:$stale (run make docs)" >&2
    exit 1
fi
echo "docs-pictures: $(echo "$announced" | wc -l) pictures in $out/, $changed redrawn"
