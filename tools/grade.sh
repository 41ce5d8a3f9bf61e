#!/bin/sh
# tools/grade.sh TEST_BIN OUTDIR: run the exercise suites (ex_*) and say,
# per exercise, how many of its tests pass.  Writes OUTDIR/grade.tap and
# OUTDIR/grade.xml (Criterion's TAP and JUnit reports) for a teacher's
# records.  Exits 0 only when every exercise passes.
set -u
bin=$1
outdir=$2
mkdir -p "$outdir"
"$bin" --filter 'ex_*/*' --jobs 1 --tap="$outdir/grade.tap" \
    --xml="$outdir/grade.xml" >/dev/null 2>&1
# TAP lines: "ok - ex_transpose_qkv::every_number ... (0.00s)" or
# "not ok - ..."; the suites the filter left out are "# SKIP"
awk '
/^(not )?ok( [0-9]+)? - ex_/ && !/# SKIP/ {
    pass = ($1 == "ok")
    name = $0
    sub(/^(not )?ok( [0-9]+)? - ex_/, "", name)
    sub(/::.*/, "", name)
    if (!(name in total)) order[++n] = name
    total[name]++
    passed[name] += pass
}
END {
    failing = 0
    for (i = 1; i <= n; i++) {
        e = order[i]
        printf "%-22s %d/%d tests pass%s\n", e, passed[e], total[e],
               passed[e] == total[e] ? "" : "  <- not done yet"
        if (passed[e] != total[e]) failing++
    }
    printf "grade: %d passed, %d failed\n", n - failing, failing
    exit failing > 0
}' "$outdir/grade.tap"
