#!/bin/sh
# tools/deps.sh: make sure the system packages this project builds with are
# installed, and install the missing ones with apt-get (through sudo when not
# root).  Called by `make walkthrough`, `make test` and friends before they
# build anything, so a fresh Debian or Ubuntu machine needs nothing else.
#
#   tools/deps.sh            the packages for building, testing and plotting
#   tools/deps.sh EXTRA...   the same, plus EXTRA Debian packages, e.g.
#   tools/deps.sh python3-numpy python3-torch    what `make parity` adds
#
# A package counts as present when dpkg says it is installed.  Set
# MHA_NO_INSTALL=1 to only report what is missing (exit 1 if anything is).
#
# Without dpkg (macOS, or a Linux that is not Debian's) nothing is
# installed: each thing is looked for itself, a program on PATH, a header
# the C compiler ($CC, else cc) must compile (gsl/gsl_blas.h,
# criterion/criterion.h), OpenBLAS linked, -fopenmp; it exits 1 naming
# what is missing with its Debian and Homebrew packages, and 0 when
# nothing is.  valgrind, which only `make memcheck` runs and which
# macOS lacks, is then a note, not a failure.
set -eu

# python3: make grade (tools/grade.py writes the reports with its json and
# xml modules).  valgrind also checks a student's exercises for leaks.
# libzip-dev: mha reads a .npz state_dict (--state-dict) with libzip.
packages="gcc make pkg-config libgsl-dev libopenblas-dev libcriterion-dev gnuplot-nox valgrind graphviz python3 libzip-dev xxd $*"
#> full
# What the full project's own checks add, which a handout (its grading
# workflow's `make deps` above all) does without: python3-yaml, for
# tools/test-handout.sh, which reads the handout's GitHub Actions
# workflow; cmark-gfm, nodejs and libjs-katex, the book as HTML for print
# (make book, whose HTML make test checks): its Markdown with GitHub's own
# converter, its math as MathML by KaTeX.
packages="$packages python3-yaml cmark-gfm nodejs libjs-katex"
#<

# --- without dpkg: look for each thing itself -------------------------

cc=${CC:-cc}
# compiles COMPILER FLAGS...: the C file on stdin compiles and links
compiles() {
    compiler=$1
    shift
    dir=$(mktemp -d "${TMPDIR:-/tmp}/mha-deps-XXXXXX")
    cat > "$dir/probe.c"
    "$compiler" "$dir/probe.c" "$@" -o "$dir/probe" > /dev/null 2>&1 && ok=0 || ok=1
    rm -rf "$dir"
    return "$ok"
}
pc() { pkg-config "$@" 2> /dev/null || true; }
has() { command -v "$1" > /dev/null 2>&1; }

# present PACKAGE: 0 when what the Debian package PACKAGE brings is here
# (pkg-config's flags are meant to split)
# shellcheck disable=SC2046
present() {
    case $1 in
    gcc) has "$cc" ;;
    make | pkg-config | valgrind | python3 | xxd | cmark-gfm) has "$1" ;;
    nodejs) has node ;;
    libjs-katex) [ -f "${KATEX_JS:-/usr/share/javascript/katex/katex.js}" ] ;;
    gnuplot-nox) has gnuplot ;;
    chromium) has chromium ;;
    graphviz) has dot ;;
    clang) has clang ;;
    libgsl-dev)
        printf '#include <gsl/gsl_blas.h>\nint main(void) { return 0; }\n' |
            compiles "$cc" $(pc --cflags gsl) ;;
    libcriterion-dev)
        printf '#include <criterion/criterion.h>\nint main(void) { return 0; }\n' |
            compiles "$cc" $(pc --cflags criterion) -c ;;
    libzip-dev)
        printf '#include <zip.h>\nint main(void) { return zip_open("", 0, 0) != 0; }\n' |
            compiles "$cc" $(pc --cflags libzip) $(pc --libs libzip) ;;
    libopenblas-dev)
        printf 'double cblas_ddot(int, const double *, int, const double *, int);
int main(void) { double x = 1; return cblas_ddot(1, &x, 1, &x, 1) != 1; }\n' |
            compiles "$cc" $(pc --libs-only-L openblas) -lopenblas ;;
    openmp)
        printf '#include <omp.h>\nint main(void) { return omp_get_max_threads() < 1; }\n' |
            compiles "$cc" -fopenmp ;;
    python3-numpy) python3 -c 'import numpy' > /dev/null 2>&1 ;;
    python3-yaml) python3 -c 'import yaml' > /dev/null 2>&1 ;;
    python3-torch) python3 -c 'import torch' > /dev/null 2>&1 ;;
    libclang-rt-*-dev)
        has clang && printf '#include <stddef.h>\n#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' |
            compiles clang -fsanitize=fuzzer ;;
    *) return 2 ;;
    esac
}

# what PACKAGE brings, for a person: "what (Debian: ..., Homebrew: ...)"
describe() {
    case $1 in
    gcc) echo "a C compiler, $cc (Debian: gcc; Homebrew: gcc, or Xcode's clang: xcode-select --install)" ;;
    make) echo "make (Debian: make; Homebrew: make)" ;;
    pkg-config) echo "pkg-config (Debian: pkg-config; Homebrew: pkgconf)" ;;
    libgsl-dev) echo "GSL's headers, gsl/gsl_blas.h (Debian: libgsl-dev; Homebrew: gsl)" ;;
    libopenblas-dev) echo "OpenBLAS, -lopenblas (Debian: libopenblas-dev; Homebrew: openblas)" ;;
    libcriterion-dev) echo "Criterion's headers, criterion/criterion.h (Debian: libcriterion-dev; Homebrew: criterion)" ;;
    libzip-dev) echo "libzip, zip.h and -lzip (Debian: libzip-dev; Homebrew: libzip)" ;;
    openmp) echo "OpenMP for $cc, -fopenmp (Debian: libomp-dev for clang, gcc has it; Homebrew: libomp, and a compiler that takes -fopenmp, Homebrew's llvm or gcc, named by make CC=...)" ;;
    gnuplot-nox) echo "gnuplot (Debian: gnuplot-nox; Homebrew: gnuplot)" ;;
    graphviz) echo "dot (Debian: graphviz; Homebrew: graphviz)" ;;
    valgrind) echo "valgrind (Debian: valgrind; Homebrew: none for macOS on Apple silicon)" ;;
    python3) echo "python3 (Debian: python3; Homebrew: python)" ;;
    cmark-gfm) echo "cmark-gfm, which turns the book into HTML for print (Debian: cmark-gfm; Homebrew: cmark-gfm)" ;;
    nodejs) echo "node, which runs KaTeX for the book's math (Debian: nodejs; Homebrew: node)" ;;
    libjs-katex) echo "KaTeX's katex.js, the book's math as MathML (Debian: libjs-katex; elsewhere: npm install katex, then KATEX_JS=its katex.js)" ;;
    xxd) echo "xxd, which builds the explorer's script into the library (Debian: xxd; Homebrew: vim)" ;;
    python3-numpy) echo "NumPy for python3 (Debian: python3-numpy; Homebrew: numpy)" ;;
    python3-yaml) echo "PyYAML for python3 (Debian: python3-yaml; Homebrew: pyyaml)" ;;
    python3-torch) echo "PyTorch for python3 (Debian: python3-torch; Homebrew: pytorch)" ;;
    clang) echo "clang (Debian: clang; Homebrew: llvm)" ;;
    chromium) echo "chromium, which opens the pages of mha view (Debian: chromium; Homebrew: chromium)" ;;
    libclang-rt-*-dev) echo "clang's libFuzzer, -fsanitize=fuzzer (Debian: $1; Homebrew: llvm)" ;;
    *) echo "$1 (a Debian package; without dpkg it cannot be checked)" ;;
    esac
}

if ! command -v dpkg-query > /dev/null 2>&1; then
    missing=""
    count=0
    # OpenMP comes with the compiler on Debian; elsewhere it is looked for
    for p in $packages openmp; do
        if present "$p"; then
            continue
        elif [ "$p" = valgrind ]; then
            echo "deps: note: no $(describe valgrind); only make memcheck needs it" >&2
            continue
        fi
        missing="$missing
  $(describe "$p")"
        count=$((count + 1))
    done
    [ "$count" = 0 ] && exit 0
    echo "deps: no dpkg on this machine, so each was looked for itself; missing:$missing" >&2
    echo "deps: install them with your package manager (Homebrew: brew install ...), then run make again" >&2
    exit 1
fi

# --- Debian: ask dpkg -------------------------------------------------

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

[ -z "$missing" ] && exit 0

echo "deps: missing Debian packages:$missing"
if [ "${MHA_NO_INSTALL:-0}" = 1 ]; then
    echo "deps: MHA_NO_INSTALL=1, not installing; install them with apt-get" >&2
    exit 1
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: no apt-get on this machine; install the equivalents of:$missing" >&2
    exit 1
fi

if [ "$(id -u)" = 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "deps: not root and no sudo; ask an administrator to install:$missing" >&2
    exit 1
fi

echo "deps: installing with apt-get:$missing"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
# shellcheck disable=SC2086  # the package list is meant to split
$sudo apt-get install -y -qq --no-install-recommends $missing >/dev/null
echo "deps: installed:$missing"
