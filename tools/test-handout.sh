#!/bin/sh
# tools/test-handout.sh: the exercise round trip, as a teacher relies on it.
#   1. in the teacher's tree every exercise passes;
#   2. a fresh handout compiles and fails exactly its blanked exercises,
#      every test of each, and shows each one's first failing assertion;
#   3. putting the reference solution back into one blank makes exactly
#      that exercise pass.
set -eu
build=${BUILD:-build}
dir=$(mktemp -d /tmp/mha-handout-XXXXXX)
trap 'rm -rf "$dir"' EXIT

fail() { echo "handout-check: $*" >&2; exit 1; }

tools/grade.sh "$build/tests/run_tests" "$dir/teacher" > "$dir/teacher.txt" ||
    { cat "$dir/teacher.txt"; fail "the teacher's tree does not pass every exercise"; }
all=$(sed -n 's/^\([a-z_0-9]*\) .*/\1/p' "$dir/teacher.txt" | sort)

# 2. a fresh handout: builds, and fails exactly the blanked exercises
tools/handout.sh "$dir/h" > /dev/null
blanked=$(grep -v '^#' "$dir/h/HANDOUT" | cut -d' ' -f1 | sort)
[ "$blanked" = "$all" ] || fail "the handout blanks [$blanked], the tests know [$all]"
make -C "$dir/h" -j2 build > "$dir/build.txt" 2>&1 ||
    { tail -20 "$dir/build.txt"; fail "the handout does not compile"; }
(cd "$dir/h" && tools/grade.sh build/tests/run_tests build > "$dir/fresh.txt") &&
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
[ "$shown" = "$(echo "$blanked" | wc -l)" ] ||
    { cat "$dir/fresh.txt"; fail "the grade shows $shown first failing assertions, expected one per blank"; }

# 3. fill one blank with the reference solution: only it starts to pass
first=$(echo "$blanked" | head -n 1)
file=$(grep -v '^#' "$dir/h/HANDOUT" | awk -v n="$first" '$1 == n { print $2 }')
awk -v keep="$first" -f tools/stub.awk "$file" > "$dir/h/$file"
make -C "$dir/h" -j2 build > "$dir/build2.txt" 2>&1 ||
    { tail -20 "$dir/build2.txt"; fail "the handout with $first filled in does not compile"; }
(cd "$dir/h" && tools/grade.sh build/tests/run_tests build > "$dir/filled.txt") || true
still=$(grep 'not done yet' "$dir/filled.txt" | cut -d' ' -f1 | sort)
expect=$(echo "$blanked" | grep -vx "$first")
[ "$still" = "$expect" ] ||
    { cat "$dir/filled.txt"; fail "after filling $first, failing [$still], expected [$expect]"; }
echo "handout-check: $(echo "$all" | wc -l) exercises; a fresh handout fails all of them and compiles; filling $first passes it"
