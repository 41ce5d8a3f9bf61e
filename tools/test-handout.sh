#!/bin/sh
# tools/test-handout.sh: the exercise round trip, as a teacher and a
# student working alone rely on it.
#   1. in the teacher's tree every exercise passes;
#   2. a fresh handout holds no expression of any reference body anywhere
#      (tools/answer-leaks.py: docs/, README, chapters, tests ...), and no
#      formula of one in an exercise's spec, its tests or its chapter
#      (the check finds those earlier handouts had), no
#      teacher's tooling, pages or key, no fast path and no word of `make
#      handout`: its book shows each blank's stub;
#      its README lists every exercise and its example of `make grade` is
#      the real one;
#   3. it compiles and fails exactly its blanked exercises, every test of
#      each, and shows each one's first failing assertion; `make grade`
#      prints one progress line while it builds, then that grade; every
#      chapter either runs or, when it needs a blank, prints that one
#      exercise's line (an exercise of its own chapter or an earlier one)
#      and exits 3, its stdout the lesson up to that step, as its
#      transcript begins;
#   4. filling the blanks with the reference chapter by chapter: each
#      exercise's grade fails before and passes after, exactly the blanks
#      left fail the grade, and every chapter whose blanks are all filled
#      now prints its transcript (each chapter runs in the fresh handout
#      and once more in the first state that fills its blanks); filled
#      completely, `make grade` passes;
#   5. make handout CH=NN cuts chapters 01 .. NN with their exercises
#      only (CH=01, which has none, too), and refuses a CH that is no
#      chapter; the cut at 06 builds everything, mha too, and its quiz
#      asks only what chapters 06 .. 06 teach; the handout is a git
#      repository of its own with one commit; a compile error in one
#      exercise costs that exercise only (the other, in the same file,
#      keeps its points), one reported in a macro's header too, and the
#      student's file stays as written; an error outside every exercise
#      shows the grade summary.txt holds, every exercise at 0, and the
#      error;
#      it copies what git tracks and nothing else (not a teacher's answer
#      file or solutions), refuses outside a git checkout, and never
#      destroys a handout that differs from a fresh one (a student's
#      work): it refuses, naming it, and changes nothing; WITHOUT=
#      gives exercises whole, ungraded, and refuses names that are no
#      exercise of the cut; FROM= gives the earlier chapters' whole,
#      and the cut at 08 with its exercises given builds mha, whose
#      forward runs on .npy files as the teacher's does (the options of
#      later chapters cut from it) and refuses a missing file with one
#      line and exit 2;
#   (6, grading where courses grade, is tools/test-grading.sh: `make
#   test-grading`, which CI runs.)
set -eu
build=${BUILD:-build}
tools=$(cd "$build" && pwd)    # its marks-filter and weave
# the leak check (valgrind) runs where it is tested: tools/test-grading.sh
export GRADE_LEAKS=0
dir=$(mktemp -d /tmp/mha-handout-XXXXXX)
# (on a failure, the states of 4, which run beside 5, end before their
# folder goes)
trap 'wait; rm -rf "$dir"' EXIT

fail() { echo "handout-check: $*" >&2; exit 1; }

# --- how the round trip runs its builds and grades ------------------------
# The handouts here are built without optimisation (HANDOUT_CFLAGS, -O0 by
# default, CFLAGS of their make), which compiles in a third of the time:
# the round trip checks the cut, the blanks and the grade, and a
# handout's code is the project's (the lines marked "handout" included),
# which its own build compiles at -O2 with -Werror, as `make snapshots`
# does each chapter's cut, but for the stubs, each a return of
# mha_fail_exercise.  The grades run under the Debian Python (the
# Makefile's PYTHON), not whatever python3 comes first on PATH: a
# version manager's shim there costs a fifth of a second a run.
hflags=${HANDOUT_CFLAGS:--O0}
py=${PYTHON:-/usr/bin/python3}
grade() { "$py" tools/grade.py "$@"; }
# --- end of how the round trip runs ---------------------------------------

grade run "$build/tests/run_tests" "$dir/teacher" > "$dir/teacher.txt" ||
    { cat "$dir/teacher.txt"; fail "the teacher's tree does not pass every exercise"; }
all=$(sed -n 's/^\([a-z_0-9]*\) .* tests pass .*/\1/p' "$dir/teacher.txt" | sort)

# 2. a fresh handout, before anything is built in it
h=$dir/h
tools/handout.sh --tools "$build" "$h" > /dev/null
grep -v '^#' "$h/HANDOUT" > "$dir/list"          # NAME FILE CHAPTER, by chapter
order=$(cut -d' ' -f1 "$dir/list")
blanked=$(echo "$order" | sort)
[ "$blanked" = "$all" ] || fail "the handout blanks [$blanked], the tests know [$all]"
count=$(echo "$blanked" | wc -l)

# The leak check finds what it must: the fast path's view of the heads
# (transpose_qkv's reshape and permute, in src/fast/multihead_fast.c, which is
# why the handout leaves the fast path out), and rope_rotate_pair's
# rotation with every name changed.
mkdir "$dir/leak"
cp src/fast/multihead_fast.c "$dir/leak/"
cat > "$dir/leak/renamed.c" <<'EOT'
/* a student's file with the rotation in other words */
static void turn(double u, double w, double t, double *a, double *b)
{
    double cc = cos(t), ss = sin(t);
    *a = u * cc - w * ss;
}
EOT
tools/answer-leaks.py . "$dir/leak" > "$dir/leak.txt" && fail "tools/answer-leaks.py finds no leak in src/fast/multihead_fast.c"
grep -q '^multihead_fast.c:[0-9]*: transpose_qkv (chapter 06): .*tensor_permute ( V , AXES ( 0 , 2 , 1 , 3 ) , V )$' "$dir/leak.txt" &&
    grep -q '^renamed.c:4: rope_rotate_pair (chapter 15): double V = cos ( V ) , V = sin ( V )$' "$dir/leak.txt" ||
    { cat "$dir/leak.txt"; fail "tools/answer-leaks.py misses the fast path's heads_view or a renamed rotation"; }

# It finds a formula written out, too, as earlier handouts
# had them: a spec comment that states the answer's expression (paged_slot's
# two statements as one, gqa_kv_head's with the local put in its place), a
# chapter's page in LaTeX (alibi_slope's), and tests that compute their
# expected values with the answer's expression around other names
# (alibi_slope's, mla_rms_norm's, attention_madds') or say it in a hint.
mkdir -p "$dir/leak2/src/nn" "$dir/leak2/tests" "$dir/leak2/chapters"
cat > "$dir/leak2/src/nn/paged.h" <<'EOT'
/* *slot = the row of the pool that holds position pos of a sequence
 * whose block table is table[0 .. nblocks-1]:
 * table[pos / block_size] * block_size + pos % block_size.  GSL_EINVAL
 * when block_size is 0 or pos is past the table. */
int paged_slot(const size_t *table, size_t nblocks, size_t block_size,
               size_t pos, size_t *slot);
EOT
cat > "$dir/leak2/src/nn/gqa.c" <<'EOT'
/* What the tests check (ex_gqa_kv_head):
 * - *kv = head / (num_heads / kv_heads): consecutive heads share a group
 * @exercise gqa_kv_head (chapter 17): the key-value head a query head reads. */
int gqa_kv_head(size_t head, size_t num_heads, size_t kv_heads, size_t *kv)
{
    return mha_fail_exercise("gqa_kv_head", "17", "src/nn/gqa.c");
}
EOT
cat > "$dir/leak2/chapters/19_windows_alibi_sinks.c" <<'EOT'
    /*md
     * The slopes form a geometric sequence, $m_k =
     * 2^{-8(k+1)/n}$; for $n$ not a power of two, BLOOM takes ...
     */
EOT
cat > "$dir/leak2/tests/test_exercises.c" <<'EOT'
/* --- ex_attention_madds (chapter 16) --------------------------------- */
static void expect_madds(size_t n_q, size_t n_k, size_t d, int causal)
{
    double pairs = pairs_one_by_one(n_q, n_k, causal);
    double want = 2.0 * (double)d * pairs;
}
/* --- ex_alibi_slope (chapter 19) ------------------------------------- */
static void expect_slopes(size_t n)
{
        double want = k < P ? exp2(-8.0 * (double)(k + 1) / (double)P)
                            : exp2(-4.0 * (double)(2 * (k - P) + 1) / (double)P);
}
/* --- ex_mla_rms_norm (chapter 20) ------------------------------------ */
static void expect_rms(const tensor *x, const double *w, double eps)
{
            double want = xs[j] / sqrt(sum / (double)d + eps) * w[j];
}
/* --- ex_paged_slot (chapter 21) -------------------------------------- */
#define H_SLOT                                                                \
    "hint: chapter 21, section 1 (Blocks, block tables and the slot "        \
    "mapping): the slot is table[pos / block_size] * block_size + pos % "    \
    "block_size"
EOT
tools/answer-leaks.py . "$dir/leak2" > "$dir/leak2.txt" && fail "tools/answer-leaks.py finds no formula in the old specs and tests"
for want in \
    'src/nn/paged.h:3: paged_slot (chapter 21): formula ((table[(pos / block_size)] * block_size) + (pos % block_size))' \
    'src/nn/gqa.c:2: gqa_kv_head (chapter 17): formula (head / (num_heads / kv_heads))' \
    'chapters/19_windows_alibi_sinks.c:3: alibi_slope (chapter 19): formula 2^((-8 * (k + 1)) / n)' \
    'tests/test_exercises.c:5: attention_madds (chapter 16): formula ((2 * d) * pairs)' \
    'tests/test_exercises.c:10: alibi_slope (chapter 19): formula 2^((-8 * (k + 1)) / P)' \
    'tests/test_exercises.c:16: mla_rms_norm (chapter 20): formula ((xs[j] / sqrt(((sum / d) + eps))) * w[j])' \
    'tests/test_exercises.c:20: paged_slot (chapter 21): formula ((table[(pos / block_size)] * block_size) + (pos % block_size))'; do
    grep -qxF "$want" "$dir/leak2.txt" ||
        { cat "$dir/leak2.txt"; fail "tools/answer-leaks.py misses $want"; }
done

# No expression of a reference body anywhere in the handout, but where a
# lesson teaches it on purpose: chapter 01 permutes its (1, 2, 8, 2)
# as transpose_qkv will (its transcript shows that step in every chapter
# after it), wherever that line of chapter 01 stands.
no_leaks() {
    tools/answer-leaks.py . "$1" > "$dir/leaks.all" && rc=0 || rc=$?
    [ "$rc" -le 1 ] || fail "tools/answer-leaks.py failed (exit $rc)"
    grep -vx 'chapters/01_shapes_strides_views\.c:[0-9]*: transpose_qkv (chapter 06): tensor_permute ( V , SHAPE ( 0 , 2 , 1 , 3 ) , V )' \
        "$dir/leaks.all" > "$dir/leaks" || true
    if [ -s "$dir/leaks" ]; then
        cat "$dir/leaks"
        fail "the handout $1 shows expressions of a reference body ($(wc -l < "$dir/leaks"))"
    fi
}
no_leaks "$h"

# Nothing of the teacher's: tooling, the book's section for teachers, a
# key, folded solutions, the word to run make handout, the fast path
# (its views and loops are the answers in other forms: the copy's mha
# program runs the lesson's module instead).  (tools/stub.awk is there:
# the grade puts back the blank of an exercise that does not compile.)
for f in .ci tools/test-handout.sh tools/answer-leaks.py tools/fuzz tools/fuzz.sh \
    tools/fresh-root.sh tools/check-clean-tree.sh tools/handout.sh \
    tools/bench.c src/fast/multihead_fast.c docs/teacher teacher; do
    [ ! -e "$h/$f" ] || fail "the handout holds the teacher's $f"
done
! (cd "$h" && find . -iname '*key*' | grep .) || fail "the handout holds a file named like a key"
! grep -rn 'For teachers\|<summary>Solution\|make handout' "$h" --include='*.md' --include='*.c' \
    --include='*.h' --include=Makefile || fail "the handout speaks to the teacher or folds a solution"

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

# 3. it builds (from scratch: its sources are cut from the teacher's, so
# the teacher's objects are not its own), and fails exactly the blanked
# exercises.
make -C "$h" -j2 CFLAGS="$hflags" build > "$dir/build.txt" 2>&1 ||
    { tail -20 "$dir/build.txt"; fail "the handout does not compile"; }
(cd "$h" && grade run build/tests/run_tests build/grade > "$dir/fresh.txt") &&
    fail "a fresh handout passes its exercises"
# the teachers' guide's table of points is the grade's
grep '^| `[a-z_0-9]*` | [0-9]* | [0-9]* | [0-9]* |$' tools/teachers-guide.md |
    awk -F' *[|] *' '{ gsub(/`/, "", $2); print $2, $4, $5 }' > "$dir/guide-points"
sed -n 's|^\([a-z_0-9]*\)  *0/\([0-9]*\) tests pass  *0/\([0-9]*\) points.*|\1 \2 \3|p' "$dir/fresh.txt" |
    cmp -s - "$dir/guide-points" ||
    { cat "$dir/guide-points"; fail "tools/teachers-guide.md's table of points is not the grade's (NAME TESTS POINTS above)"; }
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
# this script, is make's, not the grade's; the first line of the grade
# says when it was made)
sed 1d "$dir/fresh.txt" > "$dir/fresh-body"
sed 1,2d "$dir/make-grade.txt" | grep -Ev '^make(\[[0-9]+\])?: \*\*\* ' |
    cmp -s - "$dir/fresh-body" ||
    { cat "$dir/make-grade.txt"; fail "make grade prints more than its progress line and the grade"; }
# the README's example is what the grade prints
grep -A1 "points  <- not done yet" "$h/README.md" > "$dir/example"
[ "$(wc -l < "$dir/example")" = 2 ] && grep -qxF -f "$dir/example" "$dir/fresh.txt" &&
    [ "$(grep -cxF -f "$dir/example" "$dir/fresh.txt")" = 2 ] ||
    { cat "$dir/example"; fail "the handout's README shows a grade that a fresh handout does not print"; }

# --- the quiz in a fresh handout ----------------------------------------
# mha quiz works out its key from a case's sizes alone, never through the
# exercises: with every blank still blank, the key of seeds 1 to 30 is
# the teacher's, byte for byte, and grades N/N there; its worksheet and
# trace --quiz print.
for s in $(seq 1 30); do
    "$h/build/mha" quiz --seed "$s" --solution > "$dir/quiz-key" 2> "$dir/err" ||
        { cat "$dir/err"; fail "mha quiz --seed $s --solution fails in a fresh handout"; }
    "$build/mha" quiz --seed "$s" --solution | cmp -s - "$dir/quiz-key" ||
        fail "mha quiz --seed $s --solution in a fresh handout differs from the teacher's"
done
n=$(grep -c '^[0-9]' "$dir/quiz-key")
"$h/build/mha" quiz --answers "$dir/quiz-key" > "$dir/out" 2>&1 &&
    [ "$(cat "$dir/out")" = "score: $n/$n" ] ||
    { cat "$dir/out"; fail "the key of seed 30 does not grade $n/$n in a fresh handout"; }
for cmd in "quiz --seed 30 --worksheet" "trace --valid-lens 3,2 --quiz" \
    "trace --valid-lens 3,2 --quiz --no-answers"; do
    # shellcheck disable=SC2086
    "$h/build/mha" $cmd > "$dir/out" 2> "$dir/err" && grep -q '^Name: ' "$dir/out" ||
        { cat "$dir/err"; fail "mha $cmd fails in a fresh handout"; }
done
# --- end of the quiz's block ---------------------------------------------

# Every chapter: runs (exit 0) and prints its transcript, or needs a blank
# still left: it says so in exactly that one line, naming an exercise of
# its own chapter or an earlier one, with exit status 3, its stdout the
# lesson up to that step, as its transcript begins.  What each chapter
# needs is not kept here: it is what it names, checked against the
# blanks left, and it must run once they are all filled.
line_of() {
    awk -v n="$1" '$1 == n { printf "this needs exercise %s (chapter %s, %s): it is not written yet; see README.md\n", $1, $3, $2 }' "$dir/list"
}
mkdir -p "$dir/plots"
run_chapter() {
    c=$1 left=$2
    (cd "$h" && MHA_PLOTS_DIR="$dir/plots" "build/chapters/$c" > "$dir/out" 2> "$dir/err") &&
        rc=0 || rc=$?
    if [ "$rc" = 0 ]; then
        cmp -s "$dir/out" "tests/expected/$c.txt" ||
            fail "$c with blanks [$left] does not print tests/expected/$c.txt"
        return 0
    fi
    [ "$rc" = 3 ] && [ "$(wc -l < "$dir/err")" = 1 ] ||
        { cat "$dir/err"; fail "$c with blanks [$left] exits $rc and does not print one line"; }
    head -c "$(wc -c < "$dir/out")" "tests/expected/$c.txt" | cmp -s - "$dir/out" ||
        fail "$c, with blanks [$left], prints what its transcript does not begin with"
    for e in $left; do
        if [ "$(cat "$dir/err")" = "$(line_of "$e")" ]; then
            [ "$(awk -v n="$e" '$1 == n { print $3 }' "$dir/list")" -le "$(echo "$c" | cut -c1-2)" ] ||
                fail "$c needs $e, an exercise of a later chapter"
            return 3
        fi
    done
    cat "$dir/err"
    fail "$c does not name one of the blanks [$left] as the exercise it needs"
}
chapters=$(cd "$h/chapters" && ls [0-9][0-9]_*.c | sed 's/\.c$//')
left=$(echo $order)
pending=""
for c in $chapters; do
    run_chapter "$c" "$left" || pending="$pending $c"
done
fresh_runs=$(($(echo "$chapters" | wc -w) - $(echo "$pending" | wc -w)))

# 4. Fill the blanks with the reference, chapter by chapter: a blank is
# the teacher's source with the blanks not yet filled stubbed, cut as the
# handout is.  Each state builds the library, the tests and the chapters
# it runs, no more, and grades once: each exercise fails before it is
# filled and passes after (the grade of the state before, fresh.txt at
# first, and of this one), and one exercise's own grade (what `make grade
# EXERCISE=NAME` runs once the build is done) fails, then passes.
# The states follow one another, one process at a time mostly; 5 below
# needs none of them, so 4 runs beside it (on the other core), in a
# folder of scratch files of its own, and the end waits for both.
(
dir=$dir/fill
mkdir -p "$dir/plots"
cp "$dir/../list" "$dir/list"
first=$(echo $order | cut -d' ' -f1)
(cd "$h" && grade run build/tests/run_tests build/grade "$first" > "$dir/run.txt" 2>&1) &&
    { tail -5 "$dir/run.txt"; fail "the grade of $first passes before $first is written"; }
filled=""
for e_ch in $(cut -d' ' -f3 "$dir/list" | uniq); do
    names=$(awk -v c="$e_ch" '$3 == c { print $1 }' "$dir/list")
    for name in $names; do
        filled="$filled $name"
        left=$(echo "$left" | tr ' ' '\n' | grep -vx "$name" | tr '\n' ' ' | sed 's/ $//')
    done
    for file in $(awk -v c="$e_ch" '$3 == c { print $2 }' "$dir/list" | sort -u); do
        awk -v keep="$filled" -f tools/stub.awk "$file" > "$dir/filled.c"
        "$build/marks-filter" --handout "$(echo "$chapters" | tail -n 1 | cut -c1-2)" "$dir/filled.c" > "$h/$file"
    done
    # the chapters whose blanks are all filled now, the others waiting
    next=$(awk -v c="$e_ch" '$3 > c { print $3; exit }' "$dir/list")
    now=""
    waiting=""
    for c in $pending; do
        if [ -z "$next" ] || [ "$(echo "$c" | cut -c1-2)" -lt "$next" ]; then
            now="$now $c"
        else
            waiting="$waiting $c"
        fi
    done
    pending=$waiting
    make -C "$h" -j2 CFLAGS="$hflags" build/tests/run_tests $(for c in $now; do echo "build/chapters/$c"; done) \
        > "$dir/build.txt" 2>&1 ||
        { tail -20 "$dir/build.txt"; fail "the handout with [$filled] filled does not compile"; }
    case " $names " in *" $first "*)
        (cd "$h" && grade run build/tests/run_tests build/grade "$first" > "$dir/run.txt" 2>&1) ||
            { tail -20 "$dir/run.txt"; fail "the grade of $first fails with $first filled in"; } ;;
    esac
    (cd "$h" && grade run build/tests/run_tests build/grade > "$dir/filled.txt") || true
    for name in $names; do
        grep "^$name " "$dir/filled.txt" | grep -q ' \([0-9]*\)/\1 tests pass' ||
            { cat "$dir/filled.txt"; fail "the grade of $name fails with $name filled in"; }
    done
    still=$(grep 'not done yet' "$dir/filled.txt" | cut -d' ' -f1 | sort)
    expect=$(echo "$left" | tr ' ' '\n' | grep -v '^$' | sort || true)
    [ "$still" = "$expect" ] ||
        { cat "$dir/filled.txt"; fail "after filling [$filled], failing [$still], expected [$expect]"; }
    for c in $now; do
        run_chapter "$c" "$left" ||
            fail "$c needs a blank of a later chapter, with those up to its own filled"
    done
done
[ -z "$pending" ] || fail "chapters [$pending] never ran"
# filled completely, make grade passes
(cd "$h" && make --no-print-directory grade > "$dir/run.txt" 2>&1 &&
    make --no-print-directory grade EXERCISE="$name" > "$dir/run.txt" 2>&1) ||
    { tail -20 "$dir/run.txt"; fail "make grade fails in a handout filled completely"; }
) &
fill=$!

# 5. make handout CH=06: chapters 01 .. 06, their exercises, tests and
# pages only; it builds, fails exactly those blanks, and its chapters run
# or name the blank they need (the whole handout, filled, waits for 6)
filled_handout=$h
h=$dir/h6
tools/handout.sh --chapter 06 --tools "$build" "$h" > /dev/null ||
    fail "make handout CH=06 fails"
six="01 02 03 04 05 06"
[ "$(cd "$h/chapters" && ls [0-9][0-9]_*.c | cut -c1-2 | xargs)" = "$six" ] ||
    fail "the handout of CH=06 has chapters [$(ls "$h/chapters" | xargs)]"
[ "$(cd "$h/docs" && ls [0-9][0-9]_*.md | cut -c1-2 | xargs)" = "$six" ] ||
    fail "the handout of CH=06 has pages [$(ls "$h/docs" | xargs)]"
! grep -q '07_' "$h/docs/README.md" "$h/docs/06_splitting_heads.md" ||
    fail "the book of the handout of CH=06 links to a later chapter"
want6=$(awk '$3 <= 6 { print $1 }' "$dir/list" | sort)
[ "$(grep -v '^#' "$h/HANDOUT" | cut -d' ' -f1 | sort)" = "$want6" ] ||
    fail "the handout of CH=06 blanks [$(grep -v '^#' "$h/HANDOUT" | cut -d' ' -f1 | xargs)], expected [$(echo $want6)]"
[ ! -e "$h/src/nn/posenc.c" ] && [ ! -e "$h/tests/test_kvcache.c" ] ||
    fail "the handout of CH=06 holds the code of later chapters"
# (its tests are those of chapter 06's snapshot, which CI builds and runs)
no_leaks "$h"
make -C "$h" -j2 CFLAGS="$hflags" > "$dir/build6.txt" 2>&1 ||
    { tail -20 "$dir/build6.txt"; fail "the handout of CH=06 does not build (library, chapters, tests, mha)"; }
# its quiz: any seed, nothing taught after chapter 06 (valid_lens per
# head is 07, the module's weights 08, the causal cache 16, grouped heads 17)
for s in 0 1 2 3 17 999999999999999999; do
    "$h/build/mha" quiz --seed $s --solution > "$dir/quiz6.txt" 2> "$dir/err" ||
        { cat "$dir/err"; fail "mha quiz --seed $s --solution fails in the handout of CH=06"; }
    ! grep -Eq 'repeat_interleave|causal|key-value|cache|forward returns|mha trace' "$dir/quiz6.txt" ||
        { cat "$dir/quiz6.txt"; fail "the quiz of the handout of CH=06 asks what a later chapter teaches (seed $s)"; }
done
"$h/build/mha" quiz --seed 1 --up-to 10 > /dev/null 2> "$dir/err" && rc=0 || rc=$?
[ "$rc" = 2 ] && [ "$(cat "$dir/err")" = "mha quiz: --up-to 10: this copy ends at chapter 06, so its quiz asks chapters 06 .. 06 at most" ] ||
    { cat "$dir/err"; fail "mha quiz --up-to 10 in the handout of CH=06 exits $rc, not 2 with one line naming the copy's last chapter"; }
"$h/build/mha" quiz --seed 1 --up-to 05 > /dev/null 2> "$dir/err" && rc=0 || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && grep -q 'starts at chapter 06' "$dir/err" ||
    { cat "$dir/err"; fail "mha quiz --up-to 05 exits $rc, not 2 with one line naming chapter 06"; }
# a repository of its own, one commit, nothing of the teacher's history
[ "$(git -C "$h" rev-parse --show-toplevel)" = "$(cd "$h" && pwd -P)" ] &&
    [ "$(git -C "$h" rev-list --count HEAD)" = 1 ] &&
    [ -z "$(git -C "$h" status --porcelain --untracked-files=no)" ] ||
    fail "the handout of CH=06 is not a git repository of its own with one commit"
# One exercise's compile error costs it alone: transpose_qkv written,
# transpose_output (in the same file) with a syntax error.
awk -v keep="transpose_qkv" -f tools/stub.awk src/nn/heads.c > "$dir/filled.c"
"$build/marks-filter" --handout 06 "$dir/filled.c" |
    awk '/return mha_fail_exercise\("transpose_output"/ { print "    int broken = 1 +" } { print }' > "$h/src/nn/heads.c"
sum=$(cksum < "$h/src/nn/heads.c")
(cd "$h" && GRADE_LEAKS=0 make --no-print-directory CFLAGS="$hflags" grade > "$dir/grade6.txt" 2>&1) || true
grep -q '^transpose_qkv  *\([0-9]*\)/\1 tests pass  *\([0-9]*\)/\2 points$' "$dir/grade6.txt" &&
    grep -q '^transpose_output .*does not compile' "$dir/grade6.txt" &&
    grep -A1 '^transpose_output ' "$dir/grade6.txt" | grep -q 'src/nn/heads.c:[0-9]*:[0-9]*: error' ||
    { cat "$dir/grade6.txt"; fail "a compile error in transpose_output costs more than transpose_output, or is not shown under it"; }
[ "$(cksum < "$h/src/nn/heads.c")" = "$sum" ] || fail "make grade changed the student's src/nn/heads.c"
# An error gcc reports in a header, in a macro the exercise expands (a
# `;` missing before a STEP line: base/error.h's `do`), costs that
# exercise only too, and is shown at the student's line.
awk -v keep="transpose_qkv transpose_output" -f tools/stub.awk src/nn/heads.c |
    "$build/marks-filter" --handout 06 /dev/stdin |
    sed '0,/size_t p = split->shape\[3\];/s//size_t p = split->shape[3]/' > "$h/src/nn/heads.c"
grep -q 'size_t p = split->shape\[3\]$' "$h/src/nn/heads.c" || fail "cannot take the ';' out of transpose_qkv"
(cd "$h" && GRADE_LEAKS=0 make --no-print-directory CFLAGS="$hflags" grade > "$dir/grade6m.txt" 2>&1) || true
grep -q '^transpose_output  *\([0-9]*\)/\1 tests pass  *\([0-9]*\)/\2 points$' "$dir/grade6m.txt" &&
    grep -q '^transpose_qkv .*does not compile' "$dir/grade6m.txt" &&
    grep -A1 '^transpose_qkv ' "$dir/grade6m.txt" | grep -q 'src/nn/heads.c:[0-9]*:[0-9]*: error: .*in the expansion of macro STEP' ||
    { cat "$dir/grade6m.txt"; fail "an error in a macro transpose_qkv expands costs more than transpose_qkv, or is not shown at its line"; }
# An error outside every exercise (a stray line after the last function)
# fails the build: the screen shows the grade as summary.txt has it,
# every exercise at 0, then the compiler's error line.
cp "$h/src/nn/heads.c" "$dir/heads-kept.c"
echo 'int stray = ;' >> "$h/src/nn/heads.c"
(cd "$h" && GRADE_LEAKS=0 make --no-print-directory CFLAGS="$hflags" grade > "$dir/grade6b.txt" 2>&1) || true
grep -q '^transpose_qkv  *0/[0-9]* tests pass  *0/[0-9]* points  <- the build failed$' "$dir/grade6b.txt" &&
    grep -q 'src/nn/heads.c:[0-9]*:[0-9]*: error' "$dir/grade6b.txt" &&
    [ -s "$h/build/grade/summary.txt" ] && ! grep -vxF -f "$dir/grade6b.txt" "$h/build/grade/summary.txt" > /dev/null ||
    { cat "$dir/grade6b.txt"; fail "a build error outside every exercise does not show the grade summary.txt holds, every exercise at 0, and the error"; }
cp "$dir/heads-kept.c" "$h/src/nn/heads.c"
grep -q 'test_exercises.c' /dev/null "$h/tests/test_exercises.c" &&
    [ "$(grep -o '^Test(ex_[a-z_0-9]*' "$h/tests/test_exercises.c" | sed 's/^Test(ex_//' | sort -u)" = "$want6" ] ||
    fail "the handout of CH=06 does not test exactly its exercises [$(echo $want6)]"
for c in $(cd "$h/chapters" && ls [0-9][0-9]_*.c | sed 's/\.c$//'); do
    run_chapter "$c" "$(echo $want6)" || true
done
# a CH that is no chapter: refused in one line, exit 2, nothing written
for bad in 6 99 x1; do
    tools/handout.sh --chapter "$bad" --tools "$build" "$dir/bad" > /dev/null 2> "$dir/err" &&
        rc=0 || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && [ ! -e "$dir/bad" ] &&
        [ -z "$(ls -A "$dir" | grep '^\.bad')" ] ||
        { cat "$dir/err"; fail "make handout CH=$bad exits $rc, not 2 with one line and nothing written"; }
done
# WITHOUT= gives exercises whole: a unit that leaves them as reading.
# Their bodies are the teacher's, line for line, their markers plain
# comments, and the handout neither lists nor grades them; its README
# and HANDOUT name them.  A name that is no exercise of the cut is
# refused in one line, exit 2, nothing written.
tools/handout.sh --chapter 06 --without causal_valid_lens,transpose_output \
    --tools "$build" "$dir/hw" > /dev/null || fail "make handout CH=06 WITHOUT=causal_valid_lens,transpose_output fails"
[ "$(grep -v '^#' "$dir/hw/HANDOUT" | cut -d' ' -f1 | xargs)" = "linear_forward_naive transpose_qkv" ] &&
    grep -qx '# given whole, not exercises of this handout (make handout FROM= or WITHOUT=): causal_valid_lens transpose_output' "$dir/hw/HANDOUT" ||
    { cat "$dir/hw/HANDOUT"; fail "the handout WITHOUT=causal_valid_lens,transpose_output lists the wrong exercises"; }
for f in src/nn/softmax.c src/nn/heads.c; do
    awk -v keep="causal_valid_lens transpose_output" -f tools/stub.awk "$f" |
        "$build/marks-filter" --handout 06 /dev/stdin |
        perl -0pe 's/Your exercise: write its body\.\n \* \@exercise (causal_valid_lens|transpose_output) \(chapter \d+\): */Given whole in this handout (not one of its exercises):\n * /g' |
        diff - "$dir/hw/$f" > "$dir/err" ||
        { cat "$dir/err"; fail "the handout WITHOUT= does not give $f's exercises whole, or blanks the others"; }
done
grep -q 'Given whole, not exercises of this copy.*`causal_valid_lens` (\[`src/nn/softmax.c`\](src/nn/softmax.c)), `transpose_output`' "$dir/hw/README.md" ||
    fail "the README of a handout WITHOUT= does not name what is given whole"
(cd "$dir/hw" && "$py" tools/grade.py run /bin/false "$dir/hw-grade" transpose_output) > /dev/null 2> "$dir/err" &&
    fail "make grade EXERCISE=transpose_output grades an exercise given whole"
grep -q 'transpose_output is given whole in this copy' "$dir/err" ||
    { cat "$dir/err"; fail "make grade EXERCISE= of an exercise given whole does not say so"; }
for bad in nosuch alibi_slope; do
    tools/handout.sh --chapter 06 --without "transpose_qkv,$bad" --tools "$build" "$dir/bad" > /dev/null 2> "$dir/err" &&
        rc=0 || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && grep -q "$bad" "$dir/err" && [ ! -e "$dir/bad" ] ||
        { cat "$dir/err"; fail "make handout CH=06 WITHOUT=transpose_qkv,$bad exits $rc, not 2 with one line naming it and nothing written"; }
done
grep -q "chapter 19, after this handout's last chapter (06)" "$dir/err" ||
    { cat "$dir/err"; fail "make handout WITHOUT= of a later exercise does not say it is later"; }
# FROM=06 gives whole the exercises of chapters 01 .. 05: a week's
# handout after last week's
tools/handout.sh --chapter 06 --from 06 --tools "$build" "$dir/hf" > /dev/null ||
    fail "make handout CH=06 FROM=06 fails"
[ "$(grep -v '^#' "$dir/hf/HANDOUT" | cut -d' ' -f1 | sort | xargs)" = "transpose_output transpose_qkv" ] &&
    grep -qx '# given whole, not exercises of this handout (make handout FROM= or WITHOUT=): causal_valid_lens linear_forward_naive' "$dir/hf/HANDOUT" ||
    { cat "$dir/hf/HANDOUT"; fail "make handout CH=06 FROM=06 does not give chapters 01 .. 05's exercises whole"; }
# with the module's exercises given, its README says mha trace runs
tools/handout.sh --chapter 08 --from 08 --tools "$build" "$dir/hf8" > /dev/null ||
    fail "make handout CH=08 FROM=08 fails"
grep -q 'The quiz works from the first day, and so do `mha trace`' "$dir/hf8/README.md" ||
    fail "the README of a handout whose module exercises are given says mha trace needs them"
# and its mha forward runs on .npy files, as the teacher's does: the
# options of later chapters (--state-dict, --in-proj-weight) are cut
# from it, and nothing may read them
make -C "$dir/hf8" -j2 CFLAGS="$hflags" build/mha > "$dir/build8.txt" 2>&1 ||
    { tail -20 "$dir/build8.txt"; fail "mha does not build in a handout cut at 08"; }
PYTHONPATH=tools "$py" -B - "$dir" <<'PY'
import sys
from npy_plain import npy_write
d = sys.argv[1]
npy_write(d + "/q.npy", (2, 3, 4), [0.25 * i - 1 for i in range(24)])
npy_write(d + "/w.npy", (4, 4), [((3 * i) % 7 - 3) / 8 for i in range(16)])
PY
fwd="forward --heads 2 --queries $dir/q.npy --wq $dir/w.npy --wk $dir/w.npy --wv $dir/w.npy --wo $dir/w.npy --valid-lens 2,3"
"$dir/hf8/build/mha" $fwd --out "$dir/out8.npy" 2> "$dir/err" ||
    { cat "$dir/err"; fail "mha forward fails in a handout cut at 08"; }
# the handout has no fast path: the same numbers to rounding, not to the bit
"$build/mha" $fwd --out "$dir/out.npy" &&
    PYTHONPATH=tools "$py" -B - "$dir/out8.npy" "$dir/out.npy" <<'PY' ||
import sys
from npy_plain import npy_read
(s1, a), (s2, b) = npy_read(sys.argv[1]), npy_read(sys.argv[2])
sys.exit(s1 != s2 or len(a) != 24 or max(abs(x - y) for x, y in zip(a, b)) > 1e-12)
PY
    fail "mha forward in a handout cut at 08 writes other numbers than the teacher's"
"$dir/hf8/build/mha" forward --heads 2 --queries "$dir/none.npy" --wq "$dir/w.npy" --wk "$dir/w.npy" \
    --wv "$dir/w.npy" --wo "$dir/w.npy" --out "$dir/none-out.npy" 2> "$dir/err" && rc=0 || rc=$?
[ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && grep -q 'none.npy' "$dir/err" ||
    { cat "$dir/err"; fail "mha forward in a handout cut at 08 exits $rc on a missing file, not 2 with one line naming it"; }
# its quiz grades a sheet of a later chapter whose quiz is its own (08 ..
# 15 ask the same), and refuses one whose quiz it cannot ask (16: causal)
"$build/mha" quiz --seed 17 --up-to 10 --solution > "$dir/sheet10.txt"
"$dir/hf8/build/mha" quiz --answers "$dir/sheet10.txt" > "$dir/out" 2> "$dir/err" &&
    grep -q '^score: \([0-9]*\)/\1$' "$dir/out" ||
    { cat "$dir/out" "$dir/err"; fail "mha quiz in a handout cut at 08 does not grade a sheet of --up-to 10, the same quiz"; }
"$build/mha" quiz --seed 17 --up-to 16 --solution > "$dir/sheet16.txt"
"$dir/hf8/build/mha" quiz --answers "$dir/sheet16.txt" > /dev/null 2> "$dir/err" && rc=0 || rc=$?
[ "$rc" = 2 ] && grep -q "is for --up-to 16 (its first line), which is not a chapter 06 .. 08" "$dir/err" ||
    { cat "$dir/err"; fail "mha quiz in a handout cut at 08 grades a sheet of --up-to 16 (exit $rc)"; }
for bad in 07 6; do
    tools/handout.sh --chapter 06 --from "$bad" --tools "$build" "$dir/bad" > /dev/null 2> "$dir/err" &&
        rc=0 || rc=$?
    [ "$rc" = 2 ] && [ "$(wc -l < "$dir/err")" = 1 ] && [ ! -e "$dir/bad" ] ||
        { cat "$dir/err"; fail "make handout CH=06 FROM=$bad exits $rc, not 2 with one line and nothing written"; }
done

# chapter 01 has no exercise: its handout has none to grade, and says
# where the first is
tools/handout.sh --chapter 01 --tools "$build" "$dir/h1" > /dev/null ||
    fail "make handout CH=01 fails"
[ -z "$(grep -v '^#' "$dir/h1/HANDOUT")" ] && grep -q 'the first is in chapter 02' "$dir/h1/HANDOUT" ||
    fail "the handout of CH=01 does not say its exercises start at chapter 02"

# The teacher's tree as git tracks it, in a git checkout of its own,
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
cp src/nn/multihead.c "$t/solutions/"
(cd "$t" && tools/handout.sh --tools "$tools" handout > /dev/null) || fail "make handout fails in a git checkout"
for f in answers.txt solutions; do
    [ ! -e "$t/handout/$f" ] || fail "the handout holds the teacher's untracked $f"
done
[ -f "$t/handout/HANDOUT" ] && [ -f "$t/handout/src/nn/multihead.c" ] ||
    fail "the handout of a git checkout lacks the project's files"
# again: a fresh handout (its build/ aside) is left as it is
mkdir -p "$t/handout/build/obj"
(cd "$t" && tools/handout.sh --tools "$tools" handout > "$dir/again.txt") ||
    fail "make handout refuses to run over a fresh handout"
grep -q 'left as it is' "$dir/again.txt" || fail "make handout over a fresh handout: $(cat "$dir/again.txt")"
# a student's work in it: refused in one line naming the folder, through
# make as a teacher runs it, and every file as it was
echo "/* my answer */" >> "$t/handout/src/nn/multihead.c"
echo "notes" > "$t/handout/notes.txt"
echo "an object file" > "$t/handout/a.o" # git-ignored: not the one named first
(cd "$t/handout" && find . -type f -exec cksum {} + | sort) > "$dir/before"
# (the tools make handout needs, built already as in a teacher's tree:
# copied, newer than their sources, so make does not compile them again)
mkdir -p "$t/build"
cp -p "$build/marks-filter" "$build/weave" "$t/build/"
make --no-print-directory -C "$t" handout > "$dir/out" 2> "$dir/err" &&
    fail "make handout over a student's work succeeds"
grep -Ev '^make(\[[0-9]+\])?: \*\*\*' "$dir/err" > "$dir/err1" || true
[ "$(wc -l < "$dir/err1")" = 1 ] && grep -q "^handout: handout already exists and differs from a fresh handout (notes.txt is not in a fresh handout, and 2 more): move it away or remove it" "$dir/err1" ||
    { cat "$dir/err"; fail "make handout over a student's work does not say so in one line naming handout"; }
(cd "$t/handout" && find . -type f -exec cksum {} + | sort) | cmp -s - "$dir/before" ||
    fail "make handout changed a handout holding a student's work"
[ -z "$(ls -A "$t" | grep '^\.handout')" ] || fail "make handout left its new copy behind"
# outside a git checkout it refuses, writing nothing
rm -rf "$t/.git"
(cd "$t" && tools/handout.sh --tools "$tools" handout2 > /dev/null 2> "$dir/err") &&
    fail "make handout runs outside a git checkout"
[ "$(wc -l < "$dir/err")" = 1 ] && grep -q 'is not a git checkout' "$dir/err" && [ ! -e "$t/handout2" ] ||
    { cat "$dir/err"; fail "make handout outside a git checkout does not refuse in one line"; }

wait "$fill" || exit 1
echo "handout-check: $count exercises; a fresh handout holds no expression of their answers and nothing of the teacher's, compiles and fails each; $fresh_runs of $(echo "$chapters" | wc -w) chapters run in it, the others name the blank they need, exit 3, and run once the blanks up to their chapter are filled; each exercise's grade passes once its blank is filled; make handout CH=06 cuts chapters 01 .. 06, WITHOUT= gives exercises whole; a cut at 08 runs mha forward on .npy files as the teacher's mha does; make handout copies tracked files only and keeps a student's work (the grading where courses grade: tools/test-grading.sh)"
