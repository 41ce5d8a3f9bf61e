# body-lines.awk: the size of each exercise's reference body, which
# weighs it in the grade (tools/grade.py).
#
#   awk -f tools/body-lines.awk src/*.c      prints "NAME LINES" per exercise
#
# The body is found as tools/stub.awk finds it: the function NAME defined
# below the comment line "@exercise NAME (chapter NN): ...", from its
# line "{" to its line "}".  LINES counts the body's lines of code: not
# blank, not a comment, not a lone brace.
FNR == 1 { state = 0; pending = "" }
state == 0 && match($0, /@exercise [A-Za-z_0-9]+/) {
    pending = substr($0, RSTART + 10, RLENGTH - 10)
}
state == 0 && pending != "" && $0 ~ /^[A-Za-z]/ && index($0, pending "(") { state = 1 }
state == 1 && $0 == "{" { state = 2; lines = 0; next }
state == 2 && $0 == "}" { print pending, lines; state = 0; pending = ""; next }
state == 2 {
    t = $0
    gsub(/^[ \t]+|[ \t]+$/, "", t)
    if (t != "" && t != "{" && t != "}" && t !~ /^(\/\/|\/\*|\*)/)
        lines++
}
