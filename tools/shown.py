#!/usr/bin/env python3
"""tools/shown.py SNAPSHOT DOCS NN: how much of the lesson code as of
chapter NN its pages show.

    make snapshot CH=08 && tools/shown.py build/snapshot/08 docs 08

The code lines are the lines of SNAPSHOT/src/nn and SNAPSHOT/src/tensor
(.c files) that hold code: not blank, not only a comment or a brace.  A
line is shown when the same text (spaces at its ends left out) is a line
of a code block of pages DOCS/01_*.md .. DOCS/NN_*.md.  Prints the share
per file and in all."""
import glob
import os
import re
import sys


def code_lines(path):
    out, comment = [], False
    for line in open(path):
        t = line.strip()
        if comment:
            comment = "*/" not in t
            continue
        if t.startswith("/*"):
            comment = "*/" not in t
            continue
        if not t or t.startswith("//") or t in ("{", "}", "};"):
            continue
        out.append(t)
    return out


def shown_lines(docs, nn):
    seen = set()
    for page in sorted(glob.glob(os.path.join(docs, "[0-9][0-9]_*.md"))):
        if int(os.path.basename(page)[:2]) > nn:
            continue
        block = False
        for line in open(page):
            if line.startswith("```"):
                block = not block
                continue
            if block:
                seen.add(line.strip())
    return seen


def main(snap, docs, nn):
    seen = shown_lines(docs, int(nn))
    total = shown = 0
    for path in sorted(glob.glob(os.path.join(snap, "src/nn/*.c")) +
                       glob.glob(os.path.join(snap, "src/tensor/*.c"))):
        lines = code_lines(path)
        n = sum(1 for l in lines if l in seen)
        print(f"  {os.path.relpath(path, snap):28} {n:5} of {len(lines):5}")
        total += len(lines)
        shown += n
    print(f"shown on pages 01-{nn}: {shown} of {total} code lines, "
          f"{100 * shown / total:.0f}%")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: tools/shown.py SNAPSHOT DOCS NN")
    main(*sys.argv[1:])
