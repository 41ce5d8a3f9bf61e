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
set -eu

# python3: tools/test-handout.sh reads the handout's Classroom JSON with
# Debian's /usr/bin/python3 (json.tool); nothing else in `make test` needs it.
# libzip-dev: mha reads a .npz state_dict (--state-dict) with libzip.
packages="gcc make pkg-config libgsl-dev libopenblas-dev libcriterion-dev gnuplot-nox valgrind graphviz python3 libzip-dev $*"

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
