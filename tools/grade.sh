#!/bin/sh
# tools/grade.sh TEST_BIN OUTDIR: run the exercise suites (ex_*) and say,
# per exercise, how many of its tests pass, and for each exercise not done
# yet its first failing assertion (the lowest line of tests/test_exercises.c
# that failed: file:line, what was expected and what came instead).  Writes OUTDIR/grade.tap and
# OUTDIR/grade.xml (Criterion's TAP and JUnit reports) for a teacher's
# records.  Exits 0 only when every exercise passes.
set -u
bin=$1
outdir=$2
mkdir -p "$outdir"
"$bin" --filter 'ex_*/*' --jobs 1 --tap="$outdir/grade.tap" \
    --xml="$outdir/grade.xml" >/dev/null 2>&1
# TAP lines: "ok - ex_transpose_qkv::every_number ... (0.00s)" or
# "not ok - ..."; the suites the filter left out are "# SKIP".  A failure
# follows its "not ok" line as "  - tests/test_exercises.c:108: |+" and
# the assertion's message on the next line.
awk '
/^(not )?ok( [0-9]+)? - / { name = "" }
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
    }
}
END {
    failing = 0
    for (i = 1; i <= n; i++) {
        e = order[i]
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
