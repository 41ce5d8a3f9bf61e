#!/bin/sh
# tools/grade.sh TEST_BIN OUTDIR [NAME]: run the exercise suites (ex_*,
# or only ex_NAME when NAME is given: `make grade EXERCISE=NAME`) and say,
# per exercise, how many of its tests pass, and for each exercise not done
# yet its first failing assertion (the lowest line of tests/test_exercises.c
# that failed: file:line, what was expected and what came instead), in the
# order of their chapters (the "@exercise NAME (chapter NN)" markers in
# src/, as the handout's README lists them).  Writes OUTDIR/grade.tap and
# OUTDIR/grade.xml (Criterion's TAP and JUnit reports) for a teacher's
# records.  Exits 0 only when every exercise graded passes; an unknown
# NAME fails, naming the exercises there are.
set -u
if [ $# -gt 3 ]; then
    shift 2
    echo "grade: one exercise at a time, not '$*'" >&2
    exit 1
fi
bin=$1
outdir=$2
only=${3:-}
case $only in
*[!A-Za-z_0-9]*) echo "grade: '$only' is not an exercise name" >&2; exit 1 ;;
esac
# the exercises in chapter order, then name order: "name1 name2 ..."
chapters=$(sed -n 's|^.*@exercise \([A-Za-z_0-9]*\) (chapter \([0-9]*\)).*$|\2 \1|p' \
    src/*.c /dev/null 2>/dev/null | sort -s -n -k1,1 | awk '{ printf "%s ", $2 }')
# an unknown name is refused before the reports are written over
if [ -n "$only" ] && ! "$bin" --list 2>/dev/null | grep -q "^ex_$only:"; then
    printf "grade: no exercise is called %s; the exercises:" "$only" >&2
    "$bin" --list 2>/dev/null | sed -n 's/^ex_\([A-Za-z_0-9]*\):.*/ \1/p' |
        tr -d '\n' >&2
    echo >&2
    exit 1
fi
mkdir -p "$outdir"
"$bin" --filter "ex_${only:-*}/*" --jobs 1 --tap="$outdir/grade.tap" \
    --xml="$outdir/grade.xml" >/dev/null 2>&1
# TAP lines: "ok - ex_transpose_qkv::every_number ... (0.00s)" or
# "not ok - ..."; the suites the filter left out are "# SKIP".  A failure
# follows its "not ok" line as "  - tests/test_exercises.c:108: |+" and
# the assertion's message on the next line (and any further lines of it,
# such as a hint, on the lines after, indented the same).
awk -v only="$only" -v bin="$bin" -v chapters="$chapters" '
/^(not )?ok( [0-9]+)? - / { name = "" }
# further lines of a message (the hint) are indented like its first
more && /^      [^ ]/ { first[name] = first[name] "\n    " substr($0, 7); next }
{ more = 0 }
/^(not )?ok( [0-9]+)? - ex_/ && !/# SKIP/ {
    pass = ($1 == "ok")
    name = $0
    sub(/^(not )?ok( [0-9]+)? - ex_/, "", name)
    sub(/::.*/, "", name)
    if (!(name in total)) order[++n] = name
    total[name]++
    passed[name] += pass
    next
}
name != "" && /^  - [^ ]+:[0-9]+: / {
    where = $2
    sub(/:$/, "", where)
    line = where
    sub(/.*:/, "", line)
    getline msg
    sub(/^ *(Assertion failed: )?/, "", msg)
    if (!(name in first) || line + 0 < firstline[name]) {
        first[name] = where ": " msg
        firstline[name] = line + 0
        more = 1
    }
}
END {
    if (only != "" && n == 0) {
        printf "grade: no exercise is called %s; the exercises:", only
        list = bin " --list"
        while ((list | getline l) > 0)
            if (l ~ /^ex_[A-Za-z_0-9]+:/) {
                sub(/^ex_/, "", l)
                sub(/:.*/, "", l)
                printf " %s", l
            }
        printf "\n"
        exit 1
    }
    # chapter order first, then any exercise the markers do not name
    m = split(chapters, byc, " ")
    k = 0
    for (i = 1; i <= m; i++)
        if (byc[i] in total) { shown[byc[i]] = 1; out[++k] = byc[i] }
    for (i = 1; i <= n; i++)
        if (!(order[i] in shown)) out[++k] = order[i]
    failing = 0
    for (i = 1; i <= k; i++) {
        e = out[i]
        printf "%-22s %d/%d tests pass%s\n", e, passed[e], total[e],
               passed[e] == total[e] ? "" : "  <- not done yet"
        if (passed[e] != total[e]) {
            failing++
            if (e in first) printf "    %s\n", first[e]
        }
    }
    printf "grade: %d passed, %d failed\n", n - failing, failing
    exit failing > 0
}' "$outdir/grade.tap"
