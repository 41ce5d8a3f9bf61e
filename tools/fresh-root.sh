#!/bin/sh
# tools/fresh-root.sh: the README's two commands on a machine that has
# nothing installed, proved in a new Debian root (`make fresh-root`).
#
# It makes a pristine root with debootstrap (variant minbase, this
# machine's Debian suite, from the mirror apt uses here), installs make,
# git and sudo in it, as a user who has just set up a machine would, and
# nothing else, then as a normal user with sudo (the README's "through
# sudo when you are not root"; without a password, since nobody is there
# to type one, and with a login's environment, none of this machine's
# variables) clones the commit under test and runs
#
#     make walkthrough
#     make test
#
# It fails when either fails or when `git status --porcelain` in that
# clone is not empty afterwards.  Everything else the commands need (gcc,
# GSL, OpenBLAS, Criterion, gnuplot ...) they must install themselves,
# through tools/deps.sh.  The README lists gcc among those, so gcc is not
# installed beforehand: doing so would hide a gap in tools/deps.sh.
#
# What is tested is the committed HEAD (a git bundle of it), not changes
# in the work tree.  Needs root (debootstrap, chroot, mount) and takes
# about 4 minutes here (debootstrap 30-50 s, make walkthrough with its
# packages 1-2 min, make test 2 min), more on a slow mirror.
#
#     FRESH_ROOT_DIR=DIR   where the root is made (default /var/tmp)
#     FRESH_ROOT_KEEP=1    keep the root and its logs afterwards, to look
#                          around (chroot DIR/root runuser -l student)
#     FRESH_ROOT_SUITE=S   another Debian suite (default: this machine's)
#
# /proc, /sys, /dev and /dev/pts are mounted into the root while it runs,
# and /dev/shm is a tmpfs of its own (Criterion keeps its arenas there,
# named by pid: a new machine has none, while this one's may hold another
# run's, left by a killed test runner); all are unmounted on any exit,
# and the root is deleted only when nothing is mounted under it.
set -eu
cd "$(dirname "$0")/.."
repo=$(pwd)

say() { echo "fresh-root: $*"; }
die() { echo "fresh-root: $*" >&2; exit 1; }

[ "$(id -u)" = 0 ] || die "needs root (debootstrap, chroot, mount): run it as root or with sudo"
tools/deps.sh debootstrap

suite=${FRESH_ROOT_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-}")}
[ -n "$suite" ] || die "cannot tell this machine's Debian suite (no VERSION_CODENAME in /etc/os-release); set FRESH_ROOT_SUITE"

# "URI SUITE COMPONENT..." for every enabled deb entry of apt's sources,
# in both formats: one line per entry (sources.list, *.list) and deb822
# stanzas (*.sources).
apt_sources() {
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        sed 's/#.*//' "$f" | awk '
        $1 == "deb" {
            i = 2
            if ($i ~ /^\[/) { while (i < NF && $i !~ /\]$/) i++; i++ }
            line = $i
            for (j = i + 1; j <= NF; j++) line = line " " $j
            print line
        }'
    done
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
        function flush(   n, m, u, s, i, j) {
            if (f["types"] ~ /(^| )deb( |$)/ && tolower(f["enabled"]) != "no") {
                n = split(f["uris"], u, " ")
                m = split(f["suites"], s, " ")
                for (i = 1; i <= n; i++)
                    for (j = 1; j <= m; j++)
                        print u[i], s[j], f["components"]
            }
            delete f
        }
        /^#/ { next }
        /^[ \t]*$/ { flush(); next }
        /^[A-Za-z-]+:/ {
            k = index($0, ":")
            v = substr($0, k + 1)
            gsub(/^[ \t]+|[ \t]+$/, "", v)
            f[tolower(substr($0, 1, k - 1))] = v
        }
        END { flush() }' "$f"
    done
}
sources=$(apt_sources)
mirror=$(echo "$sources" | awk -v s="$suite" '$2 == s { print $1; exit }')
[ -n "$mirror" ] || die "no apt source for $suite in /etc/apt/sources.list or /etc/apt/sources.list.d/"

work=$(mktemp -d "${FRESH_ROOT_DIR:-/var/tmp}/mha-fresh-root.XXXXXX")
root=$work/root
mounts="proc sys dev dev/pts dev/shm"

# Undo everything on any exit: stop what still runs in the root (by pid),
# unmount in reverse order, and delete the root only when nothing is
# mounted under it (rm stays on this file system in any case).
cleanup() {
    status=$?
    trap - EXIT INT TERM HUP
    for p in /proc/[0-9]*; do
        if [ "$(readlink "$p/root" 2>/dev/null)" = "$root" ]; then
            kill -TERM "${p#/proc/}" 2>/dev/null && sleep 1
        fi
    done
    for m in $(echo "$mounts" | tr ' ' '\n' | sed -n '1!G;h;$p'); do
        if mountpoint -q "$root/$m" 2>/dev/null; then
            umount "$root/$m" 2>/dev/null || umount -l "$root/$m" || true
        fi
    done
    if grep -q " $root/" /proc/mounts; then
        echo "fresh-root: still mounted under $root; not deleting it" >&2
        status=1
    elif [ "${FRESH_ROOT_KEEP:-0}" = 1 ]; then
        say "kept $work (the root, its logs)"
    else
        rm -rf --one-file-system "$work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# step LOG TITLE COMMAND...: run one step with its output in LOG, say how
# long it took; on failure show the end of LOG.
step() {
    log=$work/$1.log
    title=$2
    shift 2
    t0=$(date +%s)
    if "$@" > "$log" 2>&1; then
        say "$title: ok ($(( $(date +%s) - t0 )) s)"
    else
        rc=$?
        say "$title: FAILED with status $rc ($(( $(date +%s) - t0 )) s); the end of its output:"
        tail -n 40 "$log" | sed 's/^/    /'
        return "$rc"
    fi
}

# a command line in the root, as root or as the user (in their home)
in_root() { chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
    LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive sh -c "$1"; }
as_user() { chroot "$root" runuser -u student -- env -i HOME=/home/student \
    USER=student LOGNAME=student SHELL=/bin/bash PATH=/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8 sh -c "cd && $1"; }

# What a person setting up a machine does before following the README:
# make, git and sudo from apt (with apt's defaults), a user allowed sudo.
setup() {
    in_root "apt-get update && apt-get install -y make git sudo" &&
    in_root "useradd --create-home --shell /bin/bash student" &&
    echo "student ALL=(ALL) NOPASSWD: ALL" > "$root/etc/sudoers.d/student" &&
    chmod 440 "$root/etc/sudoers.d/student"
}

start=$(date +%s)
head=$(git rev-parse --short HEAD)
say "commit $head, Debian $suite from $mirror, in $work"

step debootstrap "debootstrap --variant=minbase $suite" \
    debootstrap --variant=minbase "$suite" "$root" "$mirror"

# apt's sources in the root: this machine's entries for the suite, its
# updates and its security fixes (no third-party repository); the host's
# name in /etc/hosts, as Debian's installer writes it; no service starts
# inside the root.
echo "$sources" | awk -v s="$suite" '
    $2 == s || $2 == s "-updates" || $2 == s "-security" { print "deb " $0 }' \
    > "$root/etc/apt/sources.list"
printf '127.0.1.1\t%s\n' "$(hostname)" >> "$root/etc/hosts"
printf '#!/bin/sh\nexit 101\n' > "$root/usr/sbin/policy-rc.d"
chmod 755 "$root/usr/sbin/policy-rc.d"
for m in $mounts; do
    case $m in
    proc) mount -t proc proc "$root/proc" ;;
    sys) mount -t sysfs sysfs "$root/sys" ;;
    dev/shm) mount -t tmpfs -o mode=1777,nosuid,nodev shm "$root/dev/shm" ;;
    *) mount --bind "/$m" "$root/$m" ;;
    esac
done

step setup "apt-get install make git sudo; a user with sudo" setup

git bundle create "$root/tmp/mha.bundle" HEAD 2> "$work/bundle.log" ||
    die "git bundle failed: $(cat "$work/bundle.log")"
chmod 644 "$root/tmp/mha.bundle"
step clone "git clone (HEAD, $head)" \
    as_user "git -c advice.detachedHead=false clone -q /tmp/mha.bundle mha"

failed=0
step walkthrough "make walkthrough" as_user "cd mha && make walkthrough" || failed=$((failed + 1))
step test "make test" as_user "cd mha && make test" || failed=$((failed + 1))
as_user "cd mha && git status --porcelain" > "$work/status.log" 2>&1 || true
if [ -s "$work/status.log" ]; then
    say "git status --porcelain is not empty:"
    sed 's/^/    /' "$work/status.log"
    failed=$((failed + 1))
else
    say "git status --porcelain: empty"
fi

say "took $(( ($(date +%s) - start + 30) / 60 )) min ($(( $(date +%s) - start )) s)"
[ "$failed" = 0 ] || die "$failed of make walkthrough, make test and a clean git status failed on a fresh root"
say "make walkthrough and make test pass on a fresh $suite root, and leave git status clean"
