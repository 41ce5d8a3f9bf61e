#!/bin/sh
# tools/handout.sh DIR [KEEP...]: write a student's copy of the project into
# DIR, with the body of every library function marked "@exercise NAME" in
# src/ blanked (see tools/stub.awk).  Functions named in KEEP are left
# whole.  DIR/HANDOUT lists the exercises ("NAME FILE CHAPTER", by
# chapter); its presence makes `make test` in DIR grade the exercises
# instead of running the teacher's checks.  DIR/README.md is the
# student's (tools/handout-README.md, with the table of exercises),
# DIR/.github/workflows/grade.yml grades every push with GitHub Actions,
# DIR/tests/exercise-weights weighs the exercises in the grade, and
# DIR/docs/ the book woven again from the blanked sources.
#
# The copy holds the files git tracks (a new file must be `git add`ed to
# be handed out): never what else lies in the teacher's tree, such as an
# answer file from `mha quiz --solution` or a folder of solutions.  So it
# must be run in a git checkout; elsewhere it refuses, since the
# project's files cannot be told from the teacher's own.
#
# It never destroys work: the copy is written beside DIR under another
# name and then renamed into place when DIR does not exist (or is an empty
# folder).  When DIR exists and is a fresh handout already (its build/
# aside), it is left as it is; when it differs in any way (a student's
# answers, a note, a deleted file, or a handout of older sources), it is
# refused, naming DIR, and nothing is changed.
set -eu
out=${1%/}
shift
keep="$*"
fail() {
    echo "handout: $*" >&2
    exit 1
}

git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    fail "$(pwd) is not a git checkout, so the project's files cannot be told from others (answers, solutions): run it in a clone"
if [ -L "$out" ] || { [ -e "$out" ] && [ ! -d "$out" ]; }; then
    fail "$out exists and is not a folder: move it away or remove it, then run make handout again"
fi

# the new copy, beside DIR so that it is renamed into place in one step
mkdir -p "$(dirname "$out")"
new=$(dirname "$out")/.$(basename "$out").new.$$
rm -rf "$new"
mkdir "$new"
trap 'rm -rf "$new"' EXIT

# the project's files: what git tracks (and still exists), nothing else
git ls-files --cached -z | tr '\0' '\n' | while read -r f; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
done | tar -cf - --no-recursion -T - | tar -C "$new" -xpf -

# the exercises: "NAME FILE CHAPTER SUMMARY" from each marker
#   * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
list=$(sed -n 's|^.*@exercise \([A-Za-z_0-9]*\) (chapter \([0-9]*\)): *\(.*\)$|\1 FILE \2 \3|p' src/*.c /dev/null |
    sed 's| *\*/ *$||' | while read -r name _ chapter summary; do
        case " $keep " in *" $name "*) continue ;; esac
        echo "$name $(grep -l "@exercise $name " src/*.c | head -n 1) $chapter $summary"
    done | sort -s -k3,3n)
for f in src/*.c; do
    grep -q '@exercise ' "$f" || continue
    awk -v keep="$keep" -f tools/stub.awk "$f" > "$new/$f"
done

{
    echo "# The exercises of this handout: write each function in src/, then"
    echo "# run \`make test\` to see which pass."
    echo "$list" | awk 'NF { print $1, $2, $3 }'
} > "$new/HANDOUT"
count=$(grep -vc '^#' "$new/HANDOUT")

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
{ gsub(/@COUNT@/, count); print }' tools/handout-README.md > "$new/README.md"

# Grading where courses grade (tools/grade.py).  The weight of each
# exercise: its reference body's lines of code (tools/body-lines.awk),
# which the handout no longer holds; in a handout made from a handout,
# the weights it was given.  And the workflow that grades every push
# with GitHub Actions alone and puts the summary on the run's page.
if [ -f HANDOUT ]; then
    cp tests/exercise-weights "$new/tests/exercise-weights"
else
    {
        echo "# NAME LINES: the lines of code of each exercise's reference body;"
        echo "# tools/grade.py weighs the exercises by them."
        awk -f tools/body-lines.awk src/*.c
    } > "$new/tests/exercise-weights"
fi
mkdir -p "$new/.github/workflows"
cat > "$new/.github/workflows/grade.yml" <<'WORKFLOW'
# Every push is graded: make grade, as on a student's machine; the
# summary on the run's page, the reports (Gradescope's results.json,
# Classroom 50's result.json, TAP, JUnit) as the run's artifact.
name: grade
on:
  push:
  workflow_dispatch:
permissions:
  contents: read
jobs:
  grade:
    runs-on: ubuntu-latest
    timeout-minutes: 20
    steps:
      - uses: actions/checkout@v4
      - name: Install the packages
        run: make deps
      - name: Grade
        run: make grade
      - name: Summary
        if: always()
        run: |
          if [ -f build/grade/summary.txt ]; then
            { echo '```'; cat build/grade/summary.txt; echo '```'; } >> "$GITHUB_STEP_SUMMARY"
          fi
      - name: Reports
        if: always()
        uses: actions/upload-artifact@v4
        with:
          name: grade
          path: build/grade/
WORKFLOW

# The book again, from the blanked sources: an exercise's @show shows the
# stub, not the answer.
tmp=$(mktemp -d /tmp/mha-weave-XXXXXX)
${CC:-gcc} -std=c11 -O1 tools/weave.c tools/marks.c -o "$tmp/weave"
"$tmp/weave" "$new" "$new/docs" > /dev/null
rm -rf "$tmp"

# into place, or refused when DIR holds anything a fresh copy does not
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
    changes=$(cd "$(dirname "$out")" &&
        diff -rq --no-dereference --exclude=build "$(basename "$out")" "$(basename "$new")" 2>&1 || true)
    if [ -n "$changes" ]; then
        n=$(echo "$changes" | wc -l)
        first=$(echo "$changes" | head -n 1 | awk -v a="$(basename "$out")/" -v b="$(basename "$new")/" '
            function rel(p) {
                if (index(p, a) == 1) return substr(p, length(a) + 1)
                if (index(p, b) == 1) return substr(p, length(b) + 1)
                return p
            }
            /^Only in / {
                line = substr($0, 9); i = index(line, ": ")
                dir = substr(line, 1, i - 1) "/"; name = substr(line, i + 2)
                print rel(dir name) (index(dir, a) == 1 ? " is not in a fresh handout" : " is missing")
                next
            }
            { print rel($2) " differs" }')
        fail "$out already exists and differs from a fresh handout ($first$([ "$n" -gt 1 ] && echo ", and $((n - 1)) more")): move it away or remove it, then run make handout again; nothing was changed"
    fi
    echo "handout: $out is a fresh handout already ($count exercises blanked); left as it is"
    exit 0
fi
[ ! -d "$out" ] || rmdir "$out"
mv "$new" "$out"
echo "handout: wrote $out with $count exercises blanked"
