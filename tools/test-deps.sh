#!/bin/sh
# tools/test-deps.sh: tools/deps.sh on a machine without dpkg (macOS, a
# Linux that is not Debian's), simulated with a PATH of links to this
# machine's programs that leaves dpkg out:
#   1. with everything there it prints nothing and exits 0;
#   2. without gnuplot it exits 1 naming gnuplot with its Debian and
#      Homebrew packages and nothing else; without valgrind it only notes
#      it;
#   3. with a compiler that cannot find criterion/criterion.h it exits 1
#      naming Criterion's headers, and only them;
#   4. with a compiler without -fopenmp (Apple's clang) it names OpenMP.
set -eu
dir=$(mktemp -d /tmp/mha-deps-test-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fail() { echo "deps-check: $*" >&2; exit 1; }

# bin/: links to what deps.sh runs without dpkg, the compiler included
# (gcc finds its own as and ld; they are linked too for a compiler that
# looks on PATH)
mkdir "$dir/bin"
for t in sh cat rm mktemp gcc cc as ld make pkg-config gnuplot dot python3 valgrind xxd cmark-gfm node; do
    p=$(command -v "$t") || fail "$t is not installed here (tools/deps.sh installs it)"
    # Debian's python3, which deps.sh gives its modules (yaml), not
    # whatever python3 comes first on PATH
    [ "$t" != python3 ] || [ ! -x /usr/bin/python3 ] || p=/usr/bin/python3
    ln -s "$p" "$dir/bin/$t"
done
[ ! -e "$dir/bin/dpkg-query" ] || fail "dpkg-query is in the scratch PATH"
# deps PATH: run deps.sh with PATH, no CC (so cc), its output in out/err
deps() {
    env -u CC PATH="$1" tools/deps.sh > "$dir/out" 2> "$dir/err" && rc=0 || rc=$?
}

# 1. all there
deps "$dir/bin"
[ "$rc" = 0 ] && [ ! -s "$dir/out" ] && [ ! -s "$dir/err" ] ||
    { cat "$dir/out" "$dir/err"; fail "with everything installed and no dpkg, deps.sh exits $rc or prints"; }

# 2. no gnuplot, no valgrind
mkdir "$dir/bin2"
cp -P "$dir/bin/"* "$dir/bin2/"
rm "$dir/bin2/gnuplot" "$dir/bin2/valgrind"
deps "$dir/bin2"
[ "$rc" = 1 ] || { cat "$dir/err"; fail "without gnuplot, deps.sh exits $rc, not 1"; }
grep -qxF "  gnuplot (Debian: gnuplot-nox; Homebrew: gnuplot)" "$dir/err" ||
    { cat "$dir/err"; fail "without gnuplot, deps.sh does not name it with its packages"; }
[ "$(grep -c '^  ' "$dir/err")" = 1 ] ||
    { cat "$dir/err"; fail "without gnuplot, deps.sh names more than gnuplot as missing"; }
grep -q "^deps: note: no valgrind .*only make memcheck needs it" "$dir/err" ||
    { cat "$dir/err"; fail "without valgrind, deps.sh does not note it"; }

# 3. a compiler that cannot find Criterion's header (the real one for
# everything else)
gcc=$(command -v gcc)
mkdir "$dir/bin3"
cp -P "$dir/bin/"* "$dir/bin3/"
rm "$dir/bin3/cc"
cat > "$dir/bin3/cc" <<EOS
#!/bin/sh
for a; do
    case \$a in
    *.c) if grep -q 'criterion/criterion.h' "\$a"; then
             echo "\$a:1:10: fatal error: criterion/criterion.h: No such file or directory" >&2
             exit 1
         fi ;;
    esac
done
exec "$gcc" "\$@"
EOS
chmod +x "$dir/bin3/cc"
ln -s "$(command -v grep)" "$dir/bin3/grep"
deps "$dir/bin3"
[ "$rc" = 1 ] || { cat "$dir/err"; fail "without criterion/criterion.h, deps.sh exits $rc, not 1"; }
grep -qxF "  Criterion's headers, criterion/criterion.h (Debian: libcriterion-dev; Homebrew: criterion)" "$dir/err" &&
    [ "$(grep -c '^  ' "$dir/err")" = 1 ] ||
    { cat "$dir/err"; fail "without criterion/criterion.h, deps.sh does not name it alone"; }

# 4. a compiler without -fopenmp (Apple's clang)
sed -i 's|criterion/criterion.h|omp.h|g' "$dir/bin3/cc"
deps "$dir/bin3"
[ "$rc" = 1 ] && grep -qxF "  OpenMP for cc, -fopenmp (Debian: libomp-dev for clang, gcc has it; Homebrew: libomp, and a compiler that takes -fopenmp, Homebrew's llvm or gcc, named by make CC=...)" "$dir/err" &&
    [ "$(grep -c '^  ' "$dir/err")" = 1 ] ||
    { cat "$dir/err"; fail "without OpenMP, deps.sh exits $rc and does not name it alone"; }

echo "deps-check: without dpkg, deps.sh passes with everything there and names exactly what is missing (gnuplot, Criterion's header, OpenMP) with Debian and Homebrew packages"
