#!/bin/sh
# tools/handout.sh [--chapter NN] [--from MM] [--without NAMES] --tools BUILD DIR:
# write a student's copy of the project into DIR: chapters 01 .. NN (by
# default all of them) with the library, the tests and the pages as of
# chapter NN, cut from the chapters' code as `make snapshot CH=NN` is
# (tools/marks.h), and the body of every library function marked
# "@exercise NAME" blanked (see tools/stub.awk).  The exercises named in
# NAMES (`make handout WITHOUT=alibi_slope,mla_rms_norm`; commas or
# spaces) are given whole instead: no longer exercises, not graded, their
# chapters run, for a unit that leaves them as reading.  --from MM
# (`make handout CH=10 FROM=06`) gives whole every exercise of the
# chapters before MM too: a week's handout whose earlier exercises were
# last week's.  BUILD holds the built marks-filter and weave (`make
# handout` builds them).
#
# What the copy holds and what it does not:
#   - the library as of chapter NN and the mha program (marked
#     "handout"), whose forward pass there is the lesson's module: no
#     code marked "full" (the fast path, the tools), which holds the
#     exercises' answers in other forms (the fast path's views of the
#     heads are transpose_qkv's reshape and permute, its rotation
#     rope_rotate_pair's formula); tools/answer-leaks.py finds any
#     expression of a reference body left anywhere in the copy;
#   - the grading (lines marked "handout", tools/grade.py, and
#     tools/stub.awk, with which the grade puts back the blank of an
#     exercise that does not compile): DIR/HANDOUT
#     lists the exercises ("NAME FILE CHAPTER", by chapter), and its
#     presence makes `make test` in DIR grade the exercises instead of
#     running the teacher's checks;
#   - DIR/README.md, the student's (tools/handout-README.md, with the
#     table of exercises), DIR/.github/workflows/grade.yml, which grades
#     every push with GitHub Actions, DIR/tests/exercise-weights, which
#     weighs the exercises in the grade, and DIR/docs/ the book of
#     chapters 01 .. NN woven again from the blanked sources, without its
#     section for teachers; the exercises' text speaks to the student;
#   - no teacher's tooling (.ci/, the handout's own check, fuzzing, the
#     clean-tree and fresh-root checks, the benchmark) and nothing of a
#     teacher's key (docs/teacher/, teacher/, a file named *key*): none
#     of it is part of a chapter's cut.
#
# The copy is cut from the files git tracks (a new file must be `git
# add`ed to be handed out): never what else lies in the teacher's tree,
# such as an answer file from `mha quiz --solution` or a folder of
# solutions.  So it must be run in a git checkout; elsewhere it refuses,
# since the project's files cannot be told from the teacher's own.
#
# DIR is a git repository of its own with one commit (the teacher's
# history is not in it): push it as a template repository, or upload it.
# Inside the teacher's clone (handout/, which the clone's .gitignore
# leaves out) git run in DIR works on DIR alone.
#
# It never destroys work: the copy is written beside DIR under another
# name and then renamed into place when DIR does not exist (or is an empty
# folder).  When DIR exists and is a fresh handout already (its build/
# aside), it is left as it is; when it differs in any way (a student's
# answers, a note, a deleted file, or a handout of older sources), it is
# refused, naming DIR, and nothing is changed.
set -eu
fail() {
    echo "handout: $*" >&2
    exit 1
}
ch=
tools=
without=
from=
while :; do
    case ${1:-} in
    --chapter) ch=${2:-}; shift 2 ;;
    --from) from=${2:-}; shift 2 ;;
    --without) without=$(printf '%s' "${2:-}" | tr ',' ' '); shift 2 ;;
    --tools) tools=${2:-}; shift 2 ;;
    *) break ;;
    esac
done
[ $# -eq 1 ] && [ -n "$tools" ] ||
    { echo "usage: tools/handout.sh [--chapter NN] [--from MM] [--without NAMES] --tools BUILD DIR" >&2; exit 2; }
out=${1%/}

git rev-parse --is-inside-work-tree >/dev/null 2>&1 ||
    fail "$(pwd) is not a git checkout, so the project's files cannot be told from others (answers, solutions): run it in a clone"
last=$(ls chapters/[0-9][0-9]_*.c | tail -n 1 | sed 's|^chapters/\(..\).*|\1|')
ch=${ch:-$last}
case $ch in
[0-9][0-9]) ;;
*) echo "handout: CH must be a chapter number of two digits, like CH=08, not '$ch'" >&2
   exit 2 ;;
esac
ls chapters/"$ch"_*.c >/dev/null 2>&1 ||
    { echo "handout: there is no chapter $ch (chapters/${ch}_*.c); the chapters are 01 .. $last" >&2; exit 2; }
# WITHOUT's names: exercises of chapters 01 .. NN, each once
markers=$(sed -n 's|^.*@exercise \([A-Za-z_0-9]*\) (chapter \([0-9]*\)).*$|\1 \2|p' src/*/*.c | sort -k2,2n)
ours=$(echo "$markers" | awk -v ch="$ch" '$2 + 0 <= ch + 0 { printf "%s%s", sep, $1; sep = " " }')
for name in $without; do
    chapter=$(echo "$markers" | awk -v n="$name" '$1 == n { print $2 }')
    if [ -z "$chapter" ]; then
        echo "handout: WITHOUT names '$name', which is no exercise; the exercises of chapters 01 .. $ch: ${ours:-none}" >&2
        exit 2
    elif [ "$chapter" -gt "$ch" ]; then
        echo "handout: WITHOUT names $name, an exercise of chapter $chapter, after this handout's last chapter ($ch); the exercises of chapters 01 .. $ch: ${ours:-none}" >&2
        exit 2
    fi
done
# FROM's chapter: its exercises and the later ones are the handout's
if [ -n "$from" ]; then
    case $from in
    [0-9][0-9]) ;;
    *) echo "handout: FROM must be a chapter number of two digits, like FROM=06, not '$from'" >&2
       exit 2 ;;
    esac
    if [ "$from" -gt "$ch" ] || ! ls chapters/"$from"_*.c >/dev/null 2>&1; then
        echo "handout: FROM=$from is not a chapter 01 .. $ch (this handout's)" >&2
        exit 2
    fi
    without="$without $(echo "$markers" | awk -v f="$from" '$2 + 0 < f + 0 { print $1 }' | xargs)"
fi
without=$(echo $without | tr ' ' '\n' | sort -u | tr '\n' ' ' | sed 's/ $//')
for t in marks-filter weave; do
    [ -x "$tools/$t" ] || fail "$tools/$t is not built (make handout builds it)"
done
tools=$(cd "$tools" && pwd)
if [ -L "$out" ] || { [ -e "$out" ] && [ ! -d "$out" ]; }; then
    fail "$out exists and is not a folder: move it away or remove it, then run make handout again"
fi

# the new copy, beside DIR so that it is renamed into place in one step,
# and the tracked files it is cut from
mkdir -p "$(dirname "$out")"
new=$(cd "$(dirname "$out")" && pwd)/.$(basename "$out").new.$$
stage=$new.stage
rm -rf "$new" "$stage"
mkdir "$stage"
trap 'rm -rf "$new" "$stage"' EXIT
trap 'exit 130' HUP INT TERM
git ls-files --cached -z | tr '\0' '\n' | while read -r f; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
done | tar -cf - --no-recursion -T - | tar -C "$stage" -xpf -

# Nothing of a teacher's key reaches the student, whatever takes files
# from the stage later.
rm -rf "$stage/docs/teacher" "$stage/teacher"
find "$stage" -name '*key*' -exec rm -rf {} +

# In the stage: the exercises blanked, their text spoken to the student,
# the chapters after NN gone (the book ends at NN) and the book's section
# for teachers left out.
for f in "$stage"/src/*/*.c; do
    grep -q '@exercise ' "$f" || continue
    (cd "$stage" && awk -v given="$without" -f tools/stub.awk "${f#"$stage"/}") > "$f.stub"
    mv "$f.stub" "$f"
done
for f in "$stage"/chapters/[0-9][0-9]_*.c; do
    n=$(basename "$f" | cut -c1-2)
    if [ "$n" -gt "$ch" ]; then
        rm -f "$f"
        continue
    fi
    # "in the handout (`make handout`), X is a blank" is the teacher's
    # view
    perl -0pi -e '
        s/in the handout \(`make handout`\),\s+//g;
        s/ In the handout,( |\n\s*\*\s*)`make/\1`make/g;
        s/\(in the handout its body is blank; /(its body is blank; /g;
        s/ The page folds the library.s solution above;\s*write\s*\*?\s*yours before you open it\.//g;
    ' "$f"
done
awk '/^## For teachers$/ { skip = 1; next } /^## / { skip = 0 } !skip' \
    "$stage/tools/book-index.md" > "$stage/book-index.md"
mv "$stage/book-index.md" "$stage/tools/book-index.md"

# the cut: chapters 01 .. NN and the grading, as of chapter NN
(cd "$stage" && tools/snapshot.sh --handout "$ch" "$tools/marks-filter" "$new" > /dev/null) ||
    fail "cannot cut chapters 01 .. $ch (tools/snapshot.sh)"
find "$new" -type d -empty -delete

# the exercises: "NAME FILE CHAPTER SUMMARY" from each marker left
#   * @exercise transpose_qkv (chapter 06): each head becomes a batch row. */
list=$(cd "$new" && sed -n 's|^.*@exercise \([A-Za-z_0-9]*\) (chapter \([0-9]*\)): *\(.*\)$|\1 FILE \2 \3|p' src/*/*.c /dev/null |
    sed 's| *\*/ *$||' | while read -r name _ chapter summary; do
        echo "$name $(grep -l "@exercise $name " src/*/*.c | head -n 1) $chapter $summary"
    done | sort -s -k3,3n)
# chapters with no exercise yet (chapter 01) make a handout all the
# same: the book, the programs and mha, nothing to grade yet
{
    echo "# The exercises of this handout: write each function in src/, then"
    echo "# run \`make grade\` to see which pass."
    [ -n "$list" ] ||
        echo "# Chapters 01 .. $ch have none; the first is in chapter $(echo "$markers" | head -n 1 | cut -d' ' -f2)."
    [ -z "$without" ] ||
        echo "# given whole, not exercises of this handout (make handout FROM= or WITHOUT=): $without"
    echo "$list" | awk 'NF { print $1, $2, $3 }'
} > "$new/HANDOUT"
count=$(grep -vc '^#' "$new/HANDOUT" || true)

# The student's README in place of the project's: the table comes from the
# markers; tools/test-handout.sh checks its example of `make grade`
# against a fresh handout's.
table=$(echo "$list" | while read -r name file chapter summary; do
    [ -n "$name" ] || continue
    page=$(cd docs && ls "$chapter"_*.md 2>/dev/null | head -n 1)
    echo "| \`$name\` | [\`$file\`]($file) | [$chapter](docs/$page) | $summary |"
done)
# what the copy's mha can do, by its last chapter (src/cli's marks)
upto=$(printf '%s' "$ch" | sed 's/^0*//')
if [ "${upto:-99}" -lt 6 ]; then
    quiz="The quiz starts with chapter 06, where the heads are split; until then \`build/mha quiz\` says so."
elif [ "$upto" -lt 8 ]; then
    quiz="The quiz works from the first day; \`mha trace\`, \`forward\` and \`heatmap\` come with chapter 08."
else
    module=given
    for name in transpose_qkv transpose_output repeat_valid_lens; do
        case " $without " in *" $name "*) ;; *) module= ;; esac
    done
    if [ -n "$module" ]; then
        quiz="The quiz works from the first day, and so do \`mha trace\`, \`forward\` and \`heatmap\`, which run the module (its exercises are given whole in this copy)."
    else
        quiz="The quiz works from the first day; \`mha trace\`, \`forward\` and \`heatmap\` run the module, so they need \`transpose_qkv\` and the other exercises of the module written first, and say which one is missing."
    fi
fi
given=
if [ -n "$without" ]; then
    given="Given whole, not exercises of this copy (your teacher left them out; their chapters run and their code is there to read):"
    for name in $without; do
        file=$(cd "$new" && grep -l "^[a-z].*[ *]$name(" src/*/*.c | head -n 1)
        given="$given \`$name\` ([\`$file\`]($file)),"
    done
    given="${given%,}."
fi
awk -v count="$count" -v table="$table" -v quiz="$quiz" -v given="$given" '
$0 == "@TABLE@" { print table; if (given != "") { print ""; print given }; next }
{ gsub(/@COUNT@/, count); sub(/@QUIZ@/, quiz); print }' tools/handout-README.md > "$new/README.md"

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
        awk -f tools/body-lines.awk src/*/*.c
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

# The book of chapters 01 .. NN, from the blanked sources: an exercise's
# @show shows the stub, open, not the answer folded; the pictures and
# plots its pages show.
# Of the reference pages beside the chapters, only reading a trace: the
# others describe the whole project (its fast path, its benchmark, its
# targets), and the mha program's, from its --help, needs it built.
rm -f "$stage/tools/library.md" "$stage/tools/pytorch.md" \
    "$stage/tools/performance.md" "$stage/tools/contributing.md"
mkdir -p "$new/docs"
"$tools/weave" "$stage" "$new/docs" > /dev/null
mkdir -p "$new/docs/pictures"
for f in "$stage"/docs/pictures/*; do
    n=$(basename "$f" | cut -c1-2)
    if [ "$n" -le "$ch" ] 2>/dev/null; then cp -p "$f" "$new/docs/pictures/"; fi
done
sed -n 's|.*(\.\./\(plots/[A-Za-z0-9_.-]*\)).*|\1|p' "$new"/docs/*.md | sort -u |
    while read -r f; do mkdir -p "$new/plots" && cp -p "$stage/$f" "$new/$f"; done
rm -rf "$stage"

# A repository of its own, one first commit, nothing of the teacher's
# history: ready to push as a template repository (GitHub), or to upload
# (Gradescope, Classroom 50).  git inside it works on it alone.  The
# author is the teacher's git identity, or "handout" when there is none.
name=$(git config user.name || echo handout)
email=$(git config user.email || echo handout@localhost)
(cd "$new" && git init -q && git add -A &&
    git -c user.name="$name" -c user.email="$email" -c commit.gpgsign=false \
        commit -q -m "Handout: chapters 01 .. $ch, $count exercises" >/dev/null) ||
    fail "cannot make $new a git repository"

# into place, or refused when DIR holds anything a fresh copy does not
if [ -d "$out" ] && [ -n "$(ls -A "$out")" ]; then
    changes=$(cd "$(dirname "$out")" &&
        diff -rq --no-dereference --exclude=build --exclude=.git "$(basename "$out")" "$(basename "$new")" 2>&1 || true)
    if [ -n "$changes" ]; then
        n=$(echo "$changes" | wc -l)
        # named first: a difference git would keep (a student's work),
        # before the files the handout's .gitignore leaves out (build
        # output, plots)
        listed=$(echo "$changes" | awk -v a="$(basename "$out")/" -v b="$(basename "$new")/" '
            function rel(p) {
                if (index(p, a) == 1) return substr(p, length(a) + 1)
                if (index(p, b) == 1) return substr(p, length(b) + 1)
                return p
            }
            /^Only in / {
                line = substr($0, 9); i = index(line, ": ")
                dir = substr(line, 1, i - 1) "/"; name = substr(line, i + 2)
                print rel(dir name) "\t" (index(dir, a) == 1 ? " is not in a fresh handout" : " is missing")
                next
            }
            { print rel($2) "\t differs" }')
        first=""
        while IFS="$(printf '\t')" read -r path why; do
            [ -n "$first" ] || first="$path$why"
            if ! git -C "$new" check-ignore -q -- "$path" 2> /dev/null; then
                first="$path$why"
                break
            fi
        done <<EOF
$listed
EOF
        fail "$out already exists and differs from a fresh handout ($first$([ "$n" -gt 1 ] && echo ", and $((n - 1)) more")): move it away or remove it, then run make handout again; nothing was changed"
    fi
    echo "handout: $out is a fresh handout already ($count exercises blanked); left as it is"
    exit 0
fi
[ ! -d "$out" ] || rmdir "$out"
mv "$new" "$out"
echo "handout: wrote $out with $count exercises blanked, a git repository of its own (one commit; see docs/teachers-guide.md)"
