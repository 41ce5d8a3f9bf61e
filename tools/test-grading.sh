#!/bin/sh
# tools/test-grading.sh: grading where courses grade, as a teacher relies
# on it (the round trip of the exercises is tools/test-handout.sh):
# in a handout with a half-written blank (an unused variable), an endless
# loop, a crash and a leak, the other exercises still grade, the loop
# times out within its limit leaving no process behind, the crash is
# named; the reports (Gradescope's results.json, Classroom 50's
# result.json, TAP, JUnit) hold the exercises' tests and sum correctly,
# one exercise's run writes beside the whole run's; the workflow is valid
# YAML and runs make grade; the Gradescope zip grades a submission in a
# folder laid out like /autograder; make grade-class grades a class into
# a CSV with the right scores.
# `make test-grading` runs it; CI runs that target (it builds a handout
# from scratch and grades it under valgrind: about a minute).
set -eu
build=${BUILD:-build}
tools=$(cd "$build" && pwd)    # its marks-filter
# the leak check (valgrind) only where it is asked for, below
export GRADE_LEAKS=0
dir=$(mktemp -d /tmp/mha-grading-XXXXXX)
trap 'rm -rf "$dir"' EXIT

fail() { echo "grading-check: $*" >&2; exit 1; }

h=$dir/h
tools/handout.sh --tools "$build" "$h" > /dev/null || fail "make handout fails"
grep -v '^#' "$h/HANDOUT" > "$dir/list"          # NAME FILE CHAPTER, by chapter
order=$(cut -d' ' -f1 "$dir/list")
count=$(echo "$order" | wc -l)
chapters=$(cd "$h/chapters" && ls [0-9][0-9]_*.c | sed 's/\.c$//')

# A fresh handout becomes a student's copy with four problems:
# linear_forward_naive half-written (its blank, plus an unused variable),
# attention_madds an endless loop, rope_rotate_pair a crash (SIGSEGV)
# and causal_valid_lens the reference plus a leak; and transpose_output
# written but wrong (the reference behind a status no test wants).
g6=$dir/grading
mkdir -p "$g6"
block6=$(date +%s)
# FILE NAME LINES...: the lines after the "{" of NAME's body in FILE
inject() {
    awk -v name="$2" -v text="$3" '
    index($0, name "(") == 5 && /^int / { found = 1 }
    { print }
    found && $0 == "{" { print text; found = 0 }' "$h/$1" > "$g6/tmp" && mv "$g6/tmp" "$h/$1"
}
others=$(echo "$order" | grep -vx 'linear_forward_naive\|attention_madds\|rope_rotate_pair' | tr '\n' ' ')
written=$(echo "$others" | tr ' ' '\n' | grep -vx 'transpose_output' | tr '\n' ' ')
for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
    awk -v keep="$others" -f tools/stub.awk "$f" > "$g6/stubbed.c"
    "$build/marks-filter" --handout "$(echo "$chapters" | tail -n 1 | cut -c1-2)" "$g6/stubbed.c" > "$h/$f"
done
inject src/nn/linear.c linear_forward_naive '    int p;'
inject src/nn/attention_madds.c attention_madds '    for (volatile int spin = 1; spin;) { }'
inject src/nn/posenc.c rope_rotate_pair '    *(volatile double *)0 = x0;'
inject src/nn/heads.c transpose_output '    if (x) { *out = NULL; return GSL_EDOM; }'
inject src/nn/softmax.c causal_valid_lens '    extern void *malloc(__SIZE_TYPE__);
    static void *volatile kept;
    kept = malloc(48);
    kept = 0;'
limit=3
started=$(date +%s)
(cd "$h" && GRADE_TIMEOUT=$limit GRADE_LEAKS=1 STUDENT="Ada Lovelace" CLASSROOM=c50 \
    ASSIGNMENT=attention SUBMISSION_TAG=submit/1 COMMIT_URL=https://example.org/c/1 \
    RELEASE_URL=https://example.org/r/1 make --no-print-directory grade > "$g6/grade.txt" 2>&1) &&
    fail "make grade passes with a blank, a loop and a crash"
took=$(($(date +%s) - started))
sed 1d "$g6/grade.txt" > "$g6/summary"
grep -q 'warning: unused variable .p.' "$g6/summary" ||
    { cat "$g6/grade.txt"; fail "make grade does not show the unused variable's warning"; }
line_of_ex() { grep "^$1 " "$g6/summary"; }
line_of_ex linear_forward_naive | grep -q ' 0/[0-9]* tests pass .*<- not done yet$' &&
    line_of_ex attention_madds | grep -q "<- timed out after $limit s\$" &&
    grep -A1 '^attention_madds ' "$g6/summary" | grep -q ': timed out after .* while this test ran: look for a loop' &&
    line_of_ex rope_rotate_pair | grep -q '<- crashed: SIGSEGV$' &&
    line_of_ex transpose_output | grep -q '<- some tests fail$' &&
    grep -q '^    warning: causal_valid_lens leaks [0-9]* bytes in [0-9]* blocks (valgrind)' "$g6/summary" &&
    grep -q '^grade for Ada Lovelace (STUDENT), ' "$g6/summary" ||
    { cat "$g6/grade.txt"; fail "make grade does not report the blank, the wrong answer, the time-out, the crash and the leak"; }
for e in $written; do
    line_of_ex "$e" | grep -q ' \([0-9]*\)/\1 tests pass *\([0-9]*\)/\2 points$' ||
        { cat "$g6/grade.txt"; fail "$e, written, does not pass beside a loop and a crash"; }
done
# the loop stopped at its limit (results.json keeps each exercise's
# seconds), and make grade as a whole did not hang
python3 - "$h/build/grade/results.json" "$limit" <<'PY' || fail "attention_madds was not stopped at its $limit s limit"
import json, sys
took = json.load(open(sys.argv[1]))["extra_data"]["seconds"]["attention_madds"]
sys.exit(0 if float(sys.argv[2]) <= took < float(sys.argv[2]) + 2 else 1)
PY
[ "$took" -lt $((limit + 300)) ] || fail "make grade took $took s with a $limit s limit"
# nothing left running: no process of this handout's test program
for p in /proc/[0-9]*; do
    readlink "$p/exe" 2>/dev/null || true
done | grep -F "$h/build/tests/run_tests" && fail "a test process outlived make grade"
# a grade stopped by SIGTERM (a cancelled CI job) while the loop spins
# stops its tests too
(cd "$h" && exec env GRADE_TIMEOUT=60 tools/grade.py run build/tests/run_tests "$g6/stopped" > /dev/null 2>&1) &
stopped=$!
sleep 3
kill -TERM "$stopped"
wait "$stopped" || true
sleep 0.2
for p in /proc/[0-9]*; do
    readlink "$p/exe" 2>/dev/null || true
done | grep -F "$h/build/tests/run_tests" && fail "a test process outlived a grade stopped by SIGTERM"
# the reports: every exercise test once, the points summed, the weights
# as the rule says (tests/exercise-weights, the tests' count), identity
python3 - "$h" <<'PY' || fail "the reports in build/grade/ are wrong"
import json, math, re, sys, xml.etree.ElementTree as ET
h = sys.argv[1]
tests = re.findall(r"^Test\(ex_(\w+), (\w+)\)", open(h + "/tests/test_exercises.c").read(), re.M)
lines = dict(l.split() for l in open(h + "/tests/exercise-weights") if not l.startswith("#"))
count = {e: sum(1 for t in tests if t[0] == e) for e, _ in tests}
each = {e: math.ceil(int(lines[e]) / count[e]) for e in count}
failing = {"linear_forward_naive", "attention_madds", "rope_rotate_pair", "transpose_output"}
want = sum(each[e] for e, _ in tests if e not in failing)
most = sum(each[e] for e, _ in tests)
g = json.load(open(h + "/build/grade/results.json"))
c = json.load(open(h + "/build/grade/result.json"))
def check(cond, what):
    if not cond:
        print("grading-check: " + what, file=sys.stderr)
        sys.exit(1)
check(len(g["tests"]) == len(tests) == len(c["tests"]), "not one entry per exercise test")
for t in g["tests"]:
    check(set(t) >= {"name", "score", "max_score", "output", "visibility"}, "results.json test fields: %s" % t)
    e = t["name"].split(":")[0]
    check(t["max_score"] == each[e] and t["score"] in (0, each[e]), "points of %s" % t["name"])
    check((t["score"] == 0) == (e in failing), "%s scored %s" % (t["name"], t["score"]))
check(g["score"] == sum(t["score"] for t in g["tests"]) == want, "results.json score %s, expected %s" % (g["score"], want))
check(c["schema"] == "classroom50/result/v1", "result.json schema")
for t in c["tests"]:
    check(set(t) == {"test-name", "passed", "score", "max-score"}, "result.json test fields: %s" % t)
check(c["score"] == sum(t["score"] for t in c["tests"]) == want, "result.json score")
check(c["max-score"] == sum(t["max-score"] for t in c["tests"]) == most, "result.json max-score")
check((c["classroom"], c["assignment"], c["submission"], c["commit"], c["release"], c["review"]) ==
      ("c50", "attention", "submit/1", "https://example.org/c/1", "https://example.org/r/1",
       "https://example.org/c/1"), "result.json identity")
check(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", c["datetime"]), "result.json datetime")
tap = open(h + "/build/grade/grade.tap").read().splitlines()
oks = [l for l in tap if re.match(r"(not )?ok \d+ - ex_", l)]
check(len(oks) == len(tests) and not any("SKIP" in l for l in tap), "grade.tap holds other tests")
check(sum(1 for l in oks if l.startswith("ok")) == len(tests) - sum(count[e] for e in failing), "grade.tap passes")
x = ET.parse(h + "/build/grade/grade.xml").getroot()
check(len(x.findall(".//testcase")) == len(tests), "grade.xml holds other tests")
# JUnit: the crash an error (the test could not run), the time-out a
# failure (the student's loop), as a wrong value is
check(len(x.findall(".//testcase/error")) == count["rope_rotate_pair"], "grade.xml errors")
check(len(x.findall(".//testcase/failure[@type='timed out']")) == count["attention_madds"],
      "grade.xml: the time-outs are not failures")
PY
# one exercise's run: its own reports, the whole run's as they were
reports="summary.txt results.json result.json grade.tap grade.xml"
(cd "$h/build/grade" && cksum $reports) > "$g6/before"
(cd "$h" && make --no-print-directory grade EXERCISE=causal_valid_lens > "$g6/one.txt" 2>&1) ||
    { cat "$g6/one.txt"; fail "make grade EXERCISE=causal_valid_lens fails"; }
(cd "$h/build/grade" && cksum $reports) | cmp -s - "$g6/before" ||
    fail "make grade EXERCISE=causal_valid_lens changed the whole run's reports"
[ "$(grep -c '"test-name"' "$h/build/grade/causal_valid_lens/result.json")" = \
  "$(grep -c '^Test(ex_causal_valid_lens,' tests/test_exercises.c)" ] ||
    fail "make grade EXERCISE=causal_valid_lens does not write its own reports"
# In a workflow, where git names no author, the summary names the GitHub
# account that pushed, and every exercise's line is aligned to the
# longest name.
(cd "$h" && env -u STUDENT GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 \
    GITHUB_ACTOR=octocat GRADE_LEAKS=0 \
    tools/grade.py run build/tests/run_tests "$g6/actor" gqa_kv_head > "$g6/actor.txt" 2>&1) ||
    { cat "$g6/actor.txt"; fail "the grade of gqa_kv_head fails"; }
grep -q '^grade for octocat (the GitHub account that pushed), ' "$g6/actor.txt" ||
    { cat "$g6/actor.txt"; fail "the grade does not name the GitHub account that pushed"; }
grep -q '^gqa_kv_head                5/5 tests pass' "$g6/actor.txt" ||
    { cat "$g6/actor.txt"; fail "the grade's line is not aligned to 26 columns"; }

# The workflow: valid YAML, on push, checks out, runs make grade and puts
# the summary on the run's page.
python3 - "$h/.github/workflows/grade.yml" <<'PY' || fail "the handout's workflow is wrong"
import sys, yaml
w = yaml.safe_load(open(sys.argv[1]))
on = w.get("on", w.get(True))
steps = [s for job in w["jobs"].values() for s in job["steps"]]
runs = [s.get("run", "") for s in steps]
ok = "push" in on and any(s.get("uses", "").startswith("actions/checkout@") for s in steps) \
    and "make grade" in runs and any("GITHUB_STEP_SUMMARY" in r for r in runs)
sys.exit(0 if ok else 1)
PY
[ ! -e "$h/.github/classroom" ] || fail "the handout still has GitHub Classroom's folder"

# Gradescope: the zip's setup.sh and run_autograder at its root; unpacked
# as /autograder would be ($g6/ag), with the student's src/ as the
# submission, it writes results.json with the grade above.  The
# handout's objects of unchanged files stand for setup.sh's build.
make --no-print-directory gradescope > "$g6/gs.txt" 2>&1 || { cat "$g6/gs.txt"; fail "make gradescope fails"; }
zip=$build/autograder/gradescope.zip
mkdir -p "$g6/ag/source" "$g6/ag/submission"
python3 - "$zip" "$g6/ag/source" <<'PY' || fail "$zip lacks setup.sh or run_autograder at its root"
import os, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = z.namelist()
ok = all(n in names and z.getinfo(n).external_attr >> 16 & 0o111 for n in ("setup.sh", "run_autograder"))
z.extractall(sys.argv[2])
for i in z.infolist():  # the modes, as unzip keeps them
    if i.external_attr >> 16:
        os.chmod(os.path.join(sys.argv[2], i.filename), i.external_attr >> 16 & 0o777)
sys.exit(0 if ok and "handout/HANDOUT" in names else 1)
PY
[ -f "$build/autograder/autograder.py" ] || fail "make gradescope does not write Classroom 50's autograder.py"
mkdir -p "$g6/ag/source/handout/build"
(cd "$h/build" && tar -cf - obj tests/obj tests/chapter-list) | tar -C "$g6/ag/source/handout/build" -xpf -
find "$g6/ag/source/handout/build" -type f -exec touch {} +
for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
    rm -f "$g6/ag/source/handout/build/obj/$(basename "$f" .c).o"
done
cp -r "$h/src" "$g6/ag/submission/"
echo '{"users": [{"name": "Ada Lovelace", "email": "ada@example.org"}]}' > "$g6/ag/submission_metadata.json"
# a submission that fails tests is graded: run_autograder exits 0
AUTOGRADER_ROOT=$g6/ag GRADE_TIMEOUT=$limit sh "$g6/ag/source/run_autograder" > "$g6/ag.txt" 2>&1 ||
    { tail -20 "$g6/ag.txt"; fail "run_autograder exits non-zero for a graded submission"; }
[ -f "$g6/ag/results/results.json" ] || { tail -20 "$g6/ag.txt"; fail "run_autograder writes no results.json"; }
score() { python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["score"])' "$1"; }
[ "$(score "$g6/ag/results/results.json")" = "$(score "$h/build/grade/results.json")" ] &&
    grep -q '^grade for Ada Lovelace' "$g6/ag/results/summary.txt" ||
    { tail -30 "$g6/ag.txt"; fail "run_autograder's results.json differs from make grade's"; }

# A class of four, each a git checkout of the handout: nothing done (a
# folder named "=nothing", which a spreadsheet would run as a formula
# were its cell not neutralised),
# half done (the first four exercises), all done but transpose_qkv (no
# permute: the tests that check where each number lands fail), and one
# that does not compile.
tpl=$g6/template
tools/handout.sh --tools "$build" "$tpl" > /dev/null
mkdir -p "$tpl/build"
(cd "$h/build" && tar -cf - obj tests/obj tests/chapter-list) | tar -C "$tpl/build" -xpf -
find "$tpl/build" -type f -exec touch {} +
for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
    rm -f "$tpl/build/obj/$(basename "$f" .c).o"
done
class=$g6/class
half=$(echo "$order" | head -n 4 | tr '\n' ' ')
for s in =nothing half wrong broken; do
    mkdir -p "$class/$s"
    (cd "$tpl" && tar -cf - --exclude=./build .) | tar -C "$class/$s" -xf -
done
# KEEP FILE OUT: FILE with the blanks not in KEEP stubbed, cut as the
# handout is
cut_stubbed() {
    awk -v keep="$1" -f tools/stub.awk "$2" > "$g6/stubbed.c"
    "$build/marks-filter" --handout "$(echo "$chapters" | tail -n 1 | cut -c1-2)" "$g6/stubbed.c" > "$3"
}
for f in $(cut -d' ' -f2 "$dir/list" | sort -u); do
    cut_stubbed "$half" "$f" "$class/half/$f"
    cut_stubbed "$(echo $order)" "$f" "$class/wrong/$f"
done
awk '/^int transpose_qkv\(/ { inside = 1 } inside && /AXES\(0, 2, 1, 3\)/ { sub(/AXES\(0, 2, 1, 3\)/, "AXES(0, 1, 2, 3)"); inside = 0 } { print }' \
    src/nn/heads.c > "$g6/wrong.c"
cut_stubbed "$(echo $order)" "$g6/wrong.c" "$class/wrong/src/nn/heads.c"
grep -q 'AXES(0, 1, 2, 3)' "$class/wrong/src/nn/heads.c" || fail "cannot write the wrong transpose_qkv"
echo 'int this is not C;' >> "$class/broken/src/nn/gqa.c"
for s in =nothing half wrong broken; do
    # (a handout is a repository already: the student's work on top)
    (cd "$class/$s" && git init -q && git add -A &&
        git -c user.name=t -c user.email=t@t commit -q --allow-empty -m "my work") ||
        fail "cannot make $s's git checkout"
done
(cd "$class" && find . -type f -exec cksum {} + | sort) > "$g6/class-before"
started=$(date +%s)
make --no-print-directory grade-class STUDENTS="$class" TEMPLATE="$tpl" GRADE_TIMEOUT=$limit > "$g6/class.txt" 2>&1 ||
    { cat "$g6/class.txt"; fail "make grade-class fails"; }
class_took=$(($(date +%s) - started))
csv=$build/grade-class/grades.csv
grep -qF "$csv" "$g6/class.txt" || { cat "$g6/class.txt"; fail "make grade-class does not print the CSV's path"; }
(cd "$class" && find . -type f -exec cksum {} + | sort) | cmp -s - "$g6/class-before" ||
    fail "make grade-class wrote into a student's folder"
python3 - "$csv" "$h" "$half" <<'PY' || { cat "$csv"; fail "make grade-class's CSV has wrong scores"; }
import csv, math, re, sys
rows = list(csv.reader(open(sys.argv[1])))
h, half = sys.argv[2], sys.argv[3].split()
tests = re.findall(r"^Test\(ex_(\w+), (\w+)\)", open(h + "/tests/test_exercises.c").read(), re.M)
lines = dict(l.split() for l in open(h + "/tests/exercise-weights") if not l.startswith("#"))
count = {e: sum(1 for t in tests if t[0] == e) for e, _ in tests}
full = {e: math.ceil(int(lines[e]) / count[e]) * count[e] for e in count}
head = rows[0]
ex = head[1:-3]
assert head[0] == "student" and head[-3:] == ["total", "build", "notes"] and set(ex) == set(full), head
want = {
    # OWASP's rule: a cell starting with =, +, -, @, tab or CR behind a '
    "'=nothing": ({e: 0 for e in ex}, "ok"),
    "half": ({e: full[e] if e in half else 0 for e in ex}, "ok"),
    # the permute left out passes 4 of transpose_qkv's 6 tests: the shape,
    # one head, the refusal and the clean-up; the two that check where
    # each number lands fail
    "wrong": ({e: full[e] * 4 // 6 if e == "transpose_qkv" else full[e] for e in ex}, "ok"),
    "broken": ({e: 0 for e in ex}, "failed"),
}
# the points each exercise is worth, above the students
top = rows[1]
assert top[0] == "(maximum)" and [int(v) for v in top[1:-3]] == [full[e] for e in ex], top
assert int(top[-3]) == sum(full.values()) and "leaks not checked" in top[-1], top
got = {r[0]: r for r in rows[2:]}
assert sorted(got) == sorted(want), sorted(got)
assert "the build failed" in got["broken"][-1], got["broken"]
for s, (points, build) in want.items():
    r = got[s]
    assert [int(v) for v in r[1:-3]] == [points[e] for e in ex], (s, r)
    assert int(r[-3]) == sum(points.values()) and r[-2] == build, (s, r)
PY

# With the leak check asked for but no time for valgrind, a student's
# notes name the exercises whose leaks were not checked.
mkdir -p "$g6/class1"
cp -R "$class/half" "$g6/class1/half"
GRADE_LEAKS=1 GRADE_LEAK_SECONDS=0 make --no-print-directory grade-class STUDENTS="$g6/class1" \
    TEMPLATE="$tpl" GRADE_TIMEOUT=$limit > "$g6/class1.txt" 2>&1 ||
    { cat "$g6/class1.txt"; fail "make grade-class fails with GRADE_LEAKS=1"; }
grep "^half," "$csv" | grep -q "leaks of $(echo $half | sed 's/ /, /g') not checked (valgrind's 0 s ran out" ||
    { cat "$csv"; fail "grade-class's notes do not name the leak checks that ran out of time"; }

# The chapter a class's copies end with names the handout to grade
# them over; copies cut at different chapters are refused.
[ "$(tools/grade.py class-chapter "$class")" = "$(echo "$chapters" | tail -n 1 | cut -c1-2)" ] ||
    fail "grade.py class-chapter does not find the students' chapter"
mkdir -p "$g6/mixed/a/chapters" "$g6/mixed/b/chapters"
touch "$g6/mixed/a/chapters/06_x.c" "$g6/mixed/b/chapters/06_x.c" "$g6/mixed/b/chapters/08_y.c"
tools/grade.py class-chapter "$g6/mixed" > "$g6/mixed.txt" 2>&1 && fail "grade.py class-chapter takes copies of different chapters"
grep -q "cut at different chapters or give different exercises whole (06: a, 08: b)" "$g6/mixed.txt" || { cat "$g6/mixed.txt"; fail "grade.py class-chapter's refusal does not name the copies"; }
# copies of a handout WITHOUT= name it too (their HANDOUT's line), so
# grade-class cuts the same handout
rm "$g6/mixed/b/chapters/08_y.c"
printf '# given whole, not exercises of this handout (make handout FROM= or WITHOUT=): a_b c\n' |
    tee "$g6/mixed/a/HANDOUT" > "$g6/mixed/b/HANDOUT"
[ "$(tools/grade.py class-chapter "$g6/mixed")" = "06 a_b,c" ] ||
    fail "grade.py class-chapter does not name the exercises the copies give whole"

echo "grading-check: $count exercises graded where courses grade: a warning, a $limit s time-out (make grade took $took s), a crash and a leak each reported, the reports sum correctly, the workflow and the Gradescope zip work, grade-class graded 4 students in $class_took s; these grading checks took $(($(date +%s) - block6)) s"
