#!/bin/sh
# tools/test-clang.sh: clang builds what gcc builds, with the same
# -Wall -Wextra -Werror: the project (libmha, the chapters, the tools, the
# suites) in build/clang, whose exercise suites then pass, and a fresh
# handout (tools/handout.sh), whose blanks fail.  Installs clang and its
# OpenMP (tools/deps.sh) when they are missing.
set -eu
tools/deps.sh clang libomp-dev
dir=$(mktemp -d /tmp/mha-clang-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "clang-check: $*" >&2; exit 1; }

make -j2 CC=clang BUILD=build/clang build > "$dir/project.txt" 2>&1 ||
    { grep -E 'error|warning' "$dir/project.txt" | head -20; fail "make CC=clang does not build the project"; }
build/clang/tests/run_tests --filter 'ex_*/*' > "$dir/ex.txt" 2>&1 ||
    { tail -20 "$dir/ex.txt"; fail "the exercises fail when built with clang"; }

tools/handout.sh --tools build/clang "$dir/h" > /dev/null
make -C "$dir/h" -j2 CC=clang build > "$dir/handout.txt" 2>&1 ||
    { grep -E 'error|warning' "$dir/handout.txt" | head -20; fail "make CC=clang does not build a fresh handout"; }
(cd "$dir/h" && tools/grade.py run build/tests/run_tests build/grade > "$dir/grade.txt") &&
    fail "a fresh handout built with clang passes its exercises"
grep -q '^grade: 0 passed' "$dir/grade.txt" ||
    { cat "$dir/grade.txt"; fail "a fresh handout built with clang does not fail every exercise"; }
echo "clang-check: make CC=clang builds the project (its exercises pass) and a fresh handout (its blanks fail)"
