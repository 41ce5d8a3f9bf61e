# same-numbers.awk: are two text files the same up to rounding?
#
#     awk -f tools/same-numbers.awk A B
#
# Exit status 0 when A and B have the same lines, the same text in each
# line, and numbers that agree to rounding: |a - b| <= 1e-9 max(|a|, |b|)
# or |a - b| <= 1e-12.  Otherwise exit status 1, and the first line that
# differs is printed.  tools/docs-pictures.sh uses it to tell a picture
# whose data changed from one whose last digits moved (another CPU's BLAS
# kernels sum in another order).
BEGIN {
    NUM = "[-+]?([0-9]+[.]?[0-9]*|[.][0-9]+)([eE][-+]?[0-9]+)?"
    if (ARGC != 3) {
        print "usage: awk -f same-numbers.awk A B" > "/dev/stderr"
        usage = 1
        exit
    }
}

function near(x, y,    d, m) {
    d = x - y
    if (d < 0) d = -d
    m = x < 0 ? -x : x
    if (y > m) m = y
    if (-y > m) m = -y
    return d <= 1e-9 * m || d <= 1e-12
}

# a and b are the same line up to rounding
function same(a, b,    x, y, ta, tb) {
    for (;;) {
        if (!match(a, NUM))
            return a == b
        ta = substr(a, 1, RSTART - 1)
        x = substr(a, RSTART, RLENGTH)
        a = substr(a, RSTART + RLENGTH)
        if (!match(b, NUM))
            return 0
        tb = substr(b, 1, RSTART - 1)
        y = substr(b, RSTART, RLENGTH)
        b = substr(b, RSTART + RLENGTH)
        if (ta != tb || (x != y && !near(x + 0, y + 0)))
            return 0
    }
}

FILENAME == ARGV[1] { first[FNR] = $0; n = FNR; next }
differ == 0 {
    if (FNR > n) {
        printf "%s has more lines than %s (%d)\n", ARGV[2], ARGV[1], n
        differ = 1
    } else if (!same(first[FNR], $0)) {
        printf "line %d differs\n  %s: %s\n  %s: %s\n", FNR, ARGV[1],
            first[FNR], ARGV[2], $0
        differ = 1
    }
    m = FNR
}
END {
    if (usage)
        exit 2
    if (differ == 0 && m < n) {
        printf "%s has more lines than %s (%d)\n", ARGV[1], ARGV[2], m
        differ = 1
    }
    exit differ
}
