# stub.awk: blank the bodies of the library functions marked as exercises.
#
#   awk -v keep="name1 name2" -f tools/stub.awk src/nn/heads.c
#
# A comment line holding "@exercise NAME (chapter NN): ..." marks the
# function NAME defined right below it.  Its signature is kept; its body
# becomes a stub that compiles without warnings (every parameter is used)
# and fails through mha_fail_exercise (src/base/error.h): GSL_EUNIMPL and the
# line "this needs exercise NAME (chapter NN, FILE): ...", so the tests of
# that exercise fail, and a chapter or mha command that needs it says
# which exercise, until the student writes it.  Names listed in `keep`
# are left as they are.  Names listed in `given` (a handout's WITHOUT=)
# are left whole and are no longer exercises: their marker becomes a
# plain comment, line for line, saying the body is given.
function stub_body(name, sig,    params, n, i, p, words) {
    params = sig
    sub(/^[^(]*\(/, "", params)
    sub(/\)[^)]*$/, "", params)
    n = split(params, p, ",")
    print "    /* EXERCISE: write " name " (see the comment above).  Until you"
    print "     * do, it fails and so do its tests in tests/test_exercises.c:"
    print "     * `make grade EXERCISE=" name "` runs them. */"
    for (i = 1; i <= n; i++) {
        gsub(/\[[^]]*\]/, "", p[i])
        gsub(/[*]/, " ", p[i])
        if (split(p[i], words, /[ \t\n]+/) == 0)
            continue
        w = words[length(words)]
        if (w == "" ) w = words[length(words) - 1]
        if (w != "void")
            print "    (void)" w ";"
    }
    print "    return mha_fail_exercise(\"" name "\", \"" chapter "\", \"" FILENAME "\");"
}

BEGIN { state = 0; pending = ""; held = "" }

# The line "The handout blanks this body:" waits for the marker below
# it, which says whether the body is blanked or given.
state == 0 && held == "" && /The handout blanks this body:/ { held = $0; next }

{
    if (held != "") {
        given_here = match($0, /@exercise [A-Za-z_0-9]+ /) &&
            index(" " given " ", " " substr($0, RSTART + 10, RLENGTH - 11) " ")
        if (given_here) {
            sub(/The handout blanks this body:/, "Given whole in this handout (not one of its exercises):", held)
            sub(/@exercise [A-Za-z_0-9]+ \(chapter [0-9]+\): */, "", $0)
        } else {
            sub(/The handout blanks this body:/, "Your exercise: write its body.", held)
        }
        print held
        held = ""
    }
    if (state == 0 && match($0, /@exercise [A-Za-z_0-9]+/)) {
        pending = substr($0, RSTART + 10, RLENGTH - 10)
        chapter = ""
        if (match($0, /\(chapter [0-9]+\)/))
            chapter = substr($0, RSTART + 9, RLENGTH - 10)
        if (index(" " keep " " given " ", " " pending " "))
            pending = ""
    }
    if (state == 0 && pending != "" && $0 ~ /^[A-Za-z]/ && index($0, pending "(")) {
        state = 1
        sig = ""
    }
    if (state == 1) {
        print
        if ($0 == "{") {
            stub_body(pending, sig)
            state = 2
        } else {
            sig = sig " " $0
        }
        next
    }
    if (state == 2) {
        if ($0 == "}") {
            print
            state = 0
            pending = ""
        }
        next
    }
    print
}

END { if (held != "") print held }
