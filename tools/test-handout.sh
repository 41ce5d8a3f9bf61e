#!/bin/sh
# tools/test-handout.sh: the exercise round trip, as a teacher and a
# student working alone rely on it.
#   1. in the teacher's tree every exercise passes;
#   2. a fresh handout holds no line of any reference body (docs/, README,
#      chapters, tests ...): its book shows each blank's stub; its README
#      lists every exercise and its example of `make grade` is the real
#      one; its Classroom file parses and has one test per exercise;
#   3. it compiles and fails exactly its blanked exercises, every test of
#      each, and shows each one's first failing assertion; `make grade`
#      prints one progress line while it builds, then that grade;
#   4. filling the blanks with the reference one at a time, by chapter:
#      that exercise's Classroom command fails before and passes after,
#      exactly the blanks left fail the grade, and every chapter and mha
#      command either runs or, when it needs a blank, prints that
#      exercise's one line and exits 3 (an mha command prints nothing
#      else; a chapter, its lesson up to that step, as its transcript
#      begins); filled completely, every chapter prints its transcript;
#   5. make handout copies what git tracks and nothing else (not a
#      teacher's answer file or solutions), refuses outside a git
#      checkout, and never destroys a handout that differs from a fresh
#      one (a student's work): it refuses, naming it, and changes nothing.
set -eu
build=${BUILD:-build}
dir=$(mktemp -d /tmp/mha-handout-XXXXXX)
trap 'rm -rf "$dir"' EXIT

fail() { echo "handout-check: $*" >&2; exit 1; }

tools/grade.sh "$build/tests/run_tests" "$dir/teacher" > "$dir/teacher.txt" ||
    { cat "$dir/teacher.txt"; fail "the teacher's tree does not pass every exercise"; }
all=$(sed -n 's/^\([a-z_0-9]*\) .*/\1/p' "$dir/teacher.txt" | sort)

# 2. a fresh handout, before anything is built in it
h=$dir/h
tools/handout.sh "$h" > /dev/null
grep -v '^#' "$h/HANDOUT" > "$dir/list"          # NAME FILE CHAPTER, by chapter
order=$(cut -d' ' -f1 "$dir/list")
blanked=$(echo "$order" | sort)
[ "$blanked" = "$all" ] || fail "the handout blanks [$blanked], the tests know [$all]"
count=$(echo "$blanked" | wc -l)

# No line of a reference body is left anywhere in the handout.  The
# lines the blanking removed are the body lines; a line the handout's own
# library sources hold too ("return status;") gives nothing away.  The
# others must appear nowhere but in a C source (a test's own plain-array
# loop may share a line with an answer), and there not three body lines
# in a row with one of them among those (a copy of a body).
for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
    diff "$f" "$h/$f" | sed -n 's/^< *//p'
done | sed 's/[[:space:]]*$//' | grep -v '^[{}]*$' | sort -u > "$dir/body"
trimmed() { sed 's/^[[:space:]]*//; s/[[:space:]]*$//' | sort -u; }
find "$h/src" -name '*.[ch]' -exec cat {} + | trimmed > "$dir/lib"
grep -vxF -f "$dir/lib" "$dir/body" > "$dir/answers" ||
    fail "every line the blanks removed is elsewhere in the library"
find "$h" -type f -exec awk -v answers="$dir/answers" -v body="$dir/body" '
FILENAME == answers { answer[$0]; next }
FILENAME == body { inbody[$0]; next }
FNR == 1 { run = 0; distinct = 0; told = 0; code = FILENAME ~ /\.[ch]$/ }
{ t = $0; gsub(/^[ \t]+|[ \t]+$/, "", t) }
!code && (t in answer) { print FILENAME ":" FNR ": " t }
t == "" || t == "\173" || t == "\175" { next }
!(t in inbody) { run = 0; distinct = 0; told = 0; next }
{ run++; distinct += (t in answer) }
code && run >= 3 && distinct && !told {
    told = 1
    print FILENAME ":" FNR ": three lines of a reference body in a row"
}
' "$dir/answers" "$dir/body" {} + > "$dir/leaks"
if [ -s "$dir/leaks" ]; then
    cat "$dir/leaks"
    fail "the handout shows lines of a reference body ($(wc -l < "$dir/leaks") lines)"
fi

# the book shows the stub wherever a chapter pulls an exercise in
for name in $order; do
    file=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/list")
    for ch in $(grep -l "@show $file $name\$" chapters/*.c); do
        page=$h/docs/$(basename "$ch" .c).md
        grep -qF "return mha_fail_exercise(\"$name\"" "$page" ||
            fail "$page does not show the blank of $name"
    done
done

# the student's README: one row per exercise, no placeholder left
rows=$(grep -c '^| `[a-z_0-9]*` | \[`src/' "$h/README.md" || true)
[ "$rows" = "$count" ] || fail "the handout's README lists $rows exercises, expected $count"
for name in $order; do
    grep -q "^| \`$name\` | \[\`$(awk -v n="$name" '$1 == n { print $2 }' "$dir/list")\`" "$h/README.md" ||
        fail "the handout's README does not list $name with its file"
done
! grep -n '@[A-Z]*@' "$h/README.md" || fail "the handout's README has a placeholder left"

# GitHub Classroom's file: valid JSON, one test per exercise, each run
# command `make grade EXERCISE=NAME`.  Debian's python3, which
# tools/deps.sh installs, reads it.
json=$h/.github/classroom/autograding.json
[ -x /usr/bin/python3 ] ||
    fail "/usr/bin/python3 is missing, to read $json (tools/deps.sh installs python3)"
/usr/bin/python3 -m json.tool "$json" > /dev/null || fail "$json is not valid JSON"
sed -n 's/^ *"run": "\(.*\)",$/\1/p' "$json" > "$dir/runs"
[ "$(sort "$dir/runs")" = "$(echo "$blanked" | sed 's/^/make grade EXERCISE=/')" ] ||
    { cat "$dir/runs"; fail "$json does not have one test per exercise"; }

# 3. it builds, and fails exactly the blanked exercises.  The objects of
# the sources it did not change (libmha's other files, the mha program,
# the suites) are the teacher's, whose build is up to date; the blanked
# files, the chapters and every link are made here.
if [ -d "$build/obj" ] && [ -d "$build/tests/obj" ]; then
    mkdir -p "$h/build"
    (cd "$build" && tar -cf - obj tests/obj tests/chapter-list) | tar -C "$h/build" -xpf -
    for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
        rm -f "$h/build/obj/$(basename "$f" .c).o"
    done
fi
make -C "$h" -j2 build > "$dir/build.txt" 2>&1 ||
    { tail -20 "$dir/build.txt"; fail "the handout does not compile"; }
(cd "$h" && tools/grade.sh build/tests/run_tests build > "$dir/fresh.txt") &&
    fail "a fresh handout passes its exercises"
failing=$(grep 'not done yet' "$dir/fresh.txt" | cut -d' ' -f1 | sort)
[ "$failing" = "$blanked" ] ||
    { cat "$dir/fresh.txt"; fail "a fresh handout fails [$failing], expected [$blanked]"; }
# every test of a blank fails (each checks a value), and the grade shows
# each blank's first failing assertion
if grep 'not done yet' "$dir/fresh.txt" | grep -v ' 0/'; then
    fail "a fresh handout passes some test of a blank exercise"
fi
shown=$(grep -c '^    tests/test_exercises.c:[0-9]*: .*expected' "$dir/fresh.txt" || true)
[ "$shown" = "$count" ] ||
    { cat "$dir/fresh.txt"; fail "the grade shows $shown first failing assertions, expected one per blank"; }
# make grade: one line while it builds (nothing of the compiler's), then
# the same grade
(cd "$h" && make --no-print-directory grade > "$dir/make-grade.txt" 2>&1) &&
    fail "make grade in a fresh handout exits 0"
[ "$(head -n 1 "$dir/make-grade.txt")" = \
  "building the library and the tests ... (log: build/grade/build.log)" ] ||
    { cat "$dir/make-grade.txt"; fail "make grade does not start with its one progress line"; }
# (make's own "make: ***" line, "make[2]: ***" under a make that runs
# this script, is make's, not the grade's)
sed 1d "$dir/make-grade.txt" | grep -Ev '^make(\[[0-9]+\])?: \*\*\* ' |
    cmp -s - "$dir/fresh.txt" ||
    { cat "$dir/make-grade.txt"; fail "make grade prints more than its progress line and the grade"; }
# the README's example is what the grade prints
grep -A1 "tests pass  <- not done yet" "$h/README.md" > "$dir/example"
[ "$(wc -l < "$dir/example")" = 2 ] && grep -qxF -f "$dir/example" "$dir/fresh.txt" &&
    [ "$(grep -cxF -f "$dir/example" "$dir/fresh.txt")" = 2 ] ||
    { cat "$dir/example"; fail "the handout's README shows a grade that a fresh handout does not print"; }

# 4. Which blanks each program needs (found by blanking each alone).
needs() {
    case $1 in
    02_*) echo linear_forward_naive ;;
    03_*) echo causal_valid_lens ;;
    06_*) echo transpose_qkv transpose_output ;;
    07_*) echo repeat_valid_lens ;;
    08_* | 09_* | 10_* | mha-trace | mha-quiz)
        echo transpose_qkv transpose_output repeat_valid_lens ;;
    11_* | 13_* | 14_*)
        echo causal_valid_lens transpose_qkv transpose_output repeat_valid_lens ;;
    15_*) echo transpose_qkv transpose_output rope_rotate_pair ;;
    16_*) echo transpose_qkv transpose_output repeat_valid_lens attention_madds ;;
    17_*) echo gqa_kv_head transpose_qkv transpose_output repeat_valid_lens ;;
    18_*) echo mask_key_padding_from_lens transpose_qkv transpose_output repeat_valid_lens ;;
    esac
}
line_of() {
    awk -v n="$1" '$1 == n { printf "this needs exercise %s (chapter %s, %s): it is not written yet; see README.md\n", $1, $3, $2 }' "$dir/list"
}
# zeros as a little-endian f8 .npy: npy FILE D0 D1 ...
npy() {
    f=$1
    shift
    n=1
    for d in "$@"; do n=$((n * d)); done
    head="{'descr': '<f8', 'fortran_order': False, 'shape': ($(echo "$*" | sed 's/ /, /g')), }"
    pad=$(((64 - (10 + ${#head} + 1) % 64) % 64))
    len=$((${#head} + 1 + pad))
    {
        printf '\223NUMPY\001\000'
        printf "\\$(printf %03o $((len % 256)))\\$(printf %03o $((len / 256)))"
        printf '%s%*s\n' "$head" "$pad" ""
        head -c $((n * 8)) /dev/zero
    } > "$f"
}
npy "$dir/x.npy" 2 4 8
npy "$dir/w.npy" 8 8
w=$dir/w.npy
mkdir -p "$dir/plots"

# every program: runs (exit 0), or needs a blank still left and says so
# in exactly that one line with exit status 3
check_programs() {
    left=$1
    for c in $(cd chapters && ls [0-9][0-9]_*.c | sed 's/\.c$//'); do
        (cd "$h" && MHA_PLOTS_DIR="$dir/plots" "build/chapters/$c" > "$dir/out" 2> "$dir/err") &&
            rc=0 || rc=$?
        check_one "$c" "$left" $rc
        if [ -z "$left" ] && ! cmp -s "$dir/out" "tests/expected/$c.txt"; then
            fail "$c in the filled handout does not print tests/expected/$c.txt"
        fi
    done
    for cmd in "trace --valid-lens 3,2" "trace --valid-lens 3,2 --json" \
        "trace --valid-lens 3,2 --quiz" "trace --valid-lens 3,2 --dot" \
        "quiz --seed 1 --solution" "quiz --seed 1 --json" \
        "forward --heads 2 --queries $dir/x.npy --wq $w --wk $w --wv $w --wo $w --valid-lens 3,2 --out $dir/o.npy" \
        "heatmap --heads 2 --queries $dir/x.npy --wq $w --wk $w --wv $w --wo $w --valid-lens 3,2 --terminal"; do
        rm -f "$dir/o.npy"
        # shellcheck disable=SC2086
        "$h/build/mha" $cmd > "$dir/out" 2> "$dir/err" && rc=0 || rc=$?
        check_one "mha-${cmd%% *}" "$left" $rc
    done
}
check_one() {
    prog=$1 left=$2 rc=$3
    want=""
    for e in $(needs "$prog"); do
        case " $left " in *" $e "*) want="$want $e" ;; esac
    done
    if [ -z "$want" ]; then
        [ "$rc" = 0 ] || { cat "$dir/err"; fail "$prog fails (exit $rc) with blanks [$left]"; }
        return 0
    fi
    [ "$rc" = 3 ] && [ "$(wc -l < "$dir/err")" = 1 ] ||
        { cat "$dir/err"; fail "$prog, needing [$want], exits $rc and does not print one line"; }
    # nothing else: an mha command prints nothing on stdout, a chapter the
    # lesson up to the step that needs the blank, as its transcript begins
    case $prog in
    mha-*)
        [ ! -s "$dir/out" ] ||
            { head -c 300 "$dir/out"; fail "$prog, needing [$want], prints $(wc -c < "$dir/out") bytes on stdout besides its one line"; } ;;
    *)
        head -c "$(wc -c < "$dir/out")" "tests/expected/$prog.txt" | cmp -s - "$dir/out" ||
            fail "$prog, needing [$want], prints what its transcript does not begin with" ;;
    esac
    for e in $want; do
        [ "$(cat "$dir/err")" = "$(line_of "$e")" ] && return 0
    done
    cat "$dir/err"
    fail "$prog does not name one of [$want] as the exercise it needs"
}

left=$(echo $order)
filled=""
for name in $order; do
    check_programs "$left"
    run=$(grep -x "make grade EXERCISE=$name" "$dir/runs")
    (cd "$h" && $run > "$dir/run.txt" 2>&1) &&
        { tail -5 "$dir/run.txt"; fail "'$run' passes before $name is written"; }
    # put the reference back into this blank, keeping those filled before
    filled="$filled $name"
    left=$(echo "$left" | tr ' ' '\n' | grep -vx "$name" | tr '\n' ' ' | sed 's/ $//')
    file=$(awk -v n="$name" '$1 == n { print $2 }' "$dir/list")
    awk -v keep="$filled" -f tools/stub.awk "$file" > "$h/$file"
    (cd "$h" && $run > "$dir/run.txt" 2>&1) ||
        { tail -20 "$dir/run.txt"; fail "'$run' fails with $name filled in"; }
    (cd "$h" && tools/grade.sh build/tests/run_tests build > "$dir/filled.txt") || true
    still=$(grep 'not done yet' "$dir/filled.txt" | cut -d' ' -f1 | sort)
    expect=$(echo "$left" | tr ' ' '\n' | grep -v '^$' | sort || true)
    [ "$still" = "$expect" ] ||
        { cat "$dir/filled.txt"; fail "after filling [$filled], failing [$still], expected [$expect]"; }
done
check_programs ""

# 5. The teacher's tree as git tracks it, in a git checkout of its own,
# with a teacher's files that git does not track beside: an answer file
# and a folder of solutions.
t=$dir/tree
mkdir "$t"
git ls-files -z | tr '\0' '\n' | while read -r f; do
    if [ -e "$f" ] || [ -L "$f" ]; then echo "$f"; fi
done | tar -cf - --no-recursion -T - | tar -C "$t" -xf -
(cd "$t" && git init -q && git add -A) || fail "cannot make a git checkout in $t"
"$build/mha" quiz --seed 7 --solution > "$t/answers.txt"
mkdir "$t/solutions"
cp src/multihead.c "$t/solutions/"
(cd "$t" && tools/handout.sh handout > /dev/null) || fail "make handout fails in a git checkout"
for f in answers.txt solutions; do
    [ ! -e "$t/handout/$f" ] || fail "the handout holds the teacher's untracked $f"
done
[ -f "$t/handout/HANDOUT" ] && [ -f "$t/handout/src/multihead.c" ] ||
    fail "the handout of a git checkout lacks the project's files"
# again: a fresh handout (its build/ aside) is left as it is
mkdir -p "$t/handout/build/obj"
(cd "$t" && tools/handout.sh handout > "$dir/again.txt") ||
    fail "make handout refuses to run over a fresh handout"
grep -q 'left as it is' "$dir/again.txt" || fail "make handout over a fresh handout: $(cat "$dir/again.txt")"
# a student's work in it: refused in one line naming the folder, through
# make as a teacher runs it, and every file as it was
echo "/* my answer */" >> "$t/handout/src/multihead.c"
echo "notes" > "$t/handout/notes.txt"
(cd "$t/handout" && find . -type f -exec cksum {} + | sort) > "$dir/before"
make --no-print-directory -C "$t" handout > "$dir/out" 2> "$dir/err" &&
    fail "make handout over a student's work succeeds"
grep -Ev '^make(\[[0-9]+\])?: \*\*\*' "$dir/err" > "$dir/err1" || true
[ "$(wc -l < "$dir/err1")" = 1 ] && grep -q "^handout: handout already exists and differs from a fresh handout (.*): move it away or remove it" "$dir/err1" ||
    { cat "$dir/err"; fail "make handout over a student's work does not say so in one line naming handout"; }
(cd "$t/handout" && find . -type f -exec cksum {} + | sort) | cmp -s - "$dir/before" ||
    fail "make handout changed a handout holding a student's work"
[ -z "$(ls -A "$t" | grep '^\.handout')" ] || fail "make handout left its new copy behind"
# outside a git checkout it refuses, writing nothing
rm -rf "$t/.git"
(cd "$t" && tools/handout.sh handout2 > /dev/null 2> "$dir/err") &&
    fail "make handout runs outside a git checkout"
[ "$(wc -l < "$dir/err")" = 1 ] && grep -q 'is not a git checkout' "$dir/err" && [ ! -e "$t/handout2" ] ||
    { cat "$dir/err"; fail "make handout outside a git checkout does not refuse in one line"; }

echo "handout-check: $count exercises; a fresh handout holds none of their answers, compiles and fails each; each Classroom test passes once its blank is filled; every chapter and mha command names the blank it needs, exit 3; make handout copies tracked files only and keeps a student's work"
