#!/bin/sh
# tools/handout.sh DIR [KEEP...]: write a student's copy of the project into
# DIR, with the body of every library function marked "@exercise NAME" in
# src/ blanked (see tools/stub.awk).  Functions named in KEEP are left
# whole.  DIR/HANDOUT lists the exercises ("NAME FILE CHAPTER", by
# chapter); its presence makes `make test` in DIR grade the exercises
# instead of running the teacher's checks.  DIR/README.md is the
# student's (tools/handout-README.md, with the table of exercises),
# DIR/.github/classroom/autograding.json GitHub Classroom's tests, one per
# exercise, and DIR/docs/ the book woven again from the blanked sources.
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
        if [ -e "$f" ]; then echo "$f"; fi
    done | tar -cf - -T - | tar -C "$out" -xpf -
else
    tar --exclude=./build --exclude=./handout --exclude=./.git -cf - . | tar -C "$out" -xf -
fi

# the exercises: "NAME FILE CHAPTER SUMMARY" from each marker
#   * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
list=$(sed -n 's|^.*@exercise \([A-Za-z_0-9]*\) (chapter \([0-9]*\)): *\(.*\)$|\1 FILE \2 \3|p' src/*.c /dev/null |
    sed 's| *\*/ *$||' | while read -r name _ chapter summary; do
        case " $keep " in *" $name "*) continue ;; esac
        echo "$name $(grep -l "@exercise $name " src/*.c | head -n 1) $chapter $summary"
    done | sort -s -k3,3n)
for f in src/*.c; do
    grep -q '@exercise ' "$f" || continue
    awk -v keep="$keep" -f tools/stub.awk "$f" > "$out/$f"
done

{
    echo "# The exercises of this handout: write each function in src/, then"
    echo "# run \`make test\` to see which pass."
    echo "$list" | awk 'NF { print $1, $2, $3 }'
} > "$out/HANDOUT"
count=$(grep -vc '^#' "$out/HANDOUT")

# The student's README in place of the project's: the table comes from the
# markers; tools/test-handout.sh checks its example of `make grade`
# against a fresh handout's.
table=$(echo "$list" | while read -r name file chapter summary; do
    [ -n "$name" ] || continue
    page=$(cd docs && ls "$chapter"_*.md 2>/dev/null | head -n 1)
    echo "| \`$name\` | [\`$file\`]($file) | [$chapter](docs/$page) | $summary |"
done)
awk -v count="$count" -v table="$table" '
$0 == "@TABLE@" { print table; next }
{ gsub(/@COUNT@/, count); print }' tools/handout-README.md > "$out/README.md"

# GitHub Classroom's tests (.github/classroom/autograding.json): one per
# exercise, passing (exit status 0) when `make grade EXERCISE=NAME` does;
# timeout in minutes.
mkdir -p "$out/.github/classroom"
echo "$list" | awk '
NF { n++; name[n] = $1; chapter[n] = $3 }
END {
    print "{"
    print "  \"tests\": ["
    for (i = 1; i <= n; i++) {
        print "    {"
        printf "      \"name\": \"%s (chapter %s)\",\n", name[i], chapter[i]
        print "      \"setup\": \"make deps\","
        printf "      \"run\": \"make grade EXERCISE=%s\",\n", name[i]
        print "      \"input\": \"\","
        print "      \"output\": \"\","
        print "      \"comparison\": \"included\","
        print "      \"timeout\": 10,"
        print "      \"points\": 10"
        print "    }" (i < n ? "," : "")
    }
    print "  ]"
    print "}"
}' > "$out/.github/classroom/autograding.json"

# The book again, from the blanked sources: an exercise's @show shows the
# stub, not the answer.
tmp=$(mktemp -d /tmp/mha-weave-XXXXXX)
${CC:-gcc} -std=c11 -O1 tools/weave.c -o "$tmp/weave"
"$tmp/weave" "$out" "$out/docs" > /dev/null
rm -rf "$tmp"
echo "handout: wrote $out with $count exercises blanked"
