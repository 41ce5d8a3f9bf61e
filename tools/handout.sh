#!/bin/sh
# tools/handout.sh DIR [KEEP...]: write a student's copy of the project into
# DIR, with the body of every library function marked "@exercise NAME" in
# src/ blanked (see tools/stub.awk).  Functions named in KEEP are left
# whole.  DIR/HANDOUT lists the exercises; its presence makes `make test`
# in DIR grade the exercises instead of running the teacher's checks.
set -eu
out=$1
shift
keep="$*"
rm -rf "$out"
mkdir -p "$out"

# the project's files: what git tracks, or (outside a git checkout) the
# tree without build products
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files --cached --others --exclude-standard | while read -r f; do
        [ -e "$f" ] && mkdir -p "$out/$(dirname "$f")" && cp -p "$f" "$out/$f"
    done
else
    tar --exclude=./build --exclude=./handout --exclude=./.git -cf - . | tar -C "$out" -xf -
fi

exercises=""
for f in src/*.c; do
    grep -q '@exercise ' "$f" || continue
    awk -v keep="$keep" -f tools/stub.awk "$f" > "$out/$f"
    for name in $(sed -n 's/.*@exercise \([A-Za-z_0-9]*\).*/\1/p' "$f"); do
        exercises="$exercises $name"
    done
done

{
    echo "# The exercises of this handout: write each function in src/, then"
    echo "# run \`make test\` to see which pass."
    for name in $exercises; do
        case " $keep " in
        *" $name "*) ;;
        *) grep -l "@exercise $name" src/*.c | sed "s|^|$name |" ;;
        esac
    done
} > "$out/HANDOUT"
echo "handout: wrote $out with $(grep -vc '^#' "$out/HANDOUT") exercises blanked"
