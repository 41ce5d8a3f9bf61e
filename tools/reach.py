#!/usr/bin/env python3
"""tools/reach.py DIR FUNCTION...: how much code a reader meets who follows
FUNCTION by its calls through the sources under DIR/src.

    make snapshot CH=08 && tools/reach.py build/snapshot/08 multihead_forward

Universal Ctags lists every function and macro defined under DIR/src with
its first and last line.  From each FUNCTION, every identifier in a
reached definition's text (comments and strings left out) that names a
function or a macro defined there is reached too; a name is looked up
in the reader's own file first, and a static function (or a macro of a
.c file) is reached from its own file only.  Calls through pointers (the
trace's observers, a module's init) are not followed: the reader does
not follow them either.

A definition's lines are its lines from the signature to the closing
brace (a macro's, from #define to its last line) that hold code: not
blank, not only a comment.  The report gives the reached lines per layer
(src/<layer>) and per file, and their total.  --list names each reached
definition with its lines.
"""
import collections
import os
import re
import subprocess
import sys

WORD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def strip(text):
    """text without its comments and string or character literals; the
    line breaks are kept."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(" ")
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def definitions(root):
    tags = subprocess.run(
        ["ctags", "-R", "--languages=C", "--kinds-C=fd", "--fields=+neK",
         "-x", "--_xformat=%N %K %F %n %{end}", "src"],
        cwd=root, capture_output=True, text=True, check=True).stdout
    defs = collections.defaultdict(list)
    cache = {}
    for line in tags.splitlines():
        name, kind, path, start, end = line.split()
        if end == "-" or not end.isdigit():
            end = start
        if path not in cache:
            with open(os.path.join(root, path)) as f:
                cache[path] = strip(f.read()).split("\n")
        lines = cache[path][int(start) - 1:int(end)]
        static = kind == "macro" and path.endswith(".c") or \
            lines[0].lstrip().startswith("static")
        defs[name].append({"name": name, "kind": kind, "path": path,
                           "start": int(start), "lines": lines,
                           "static": static,
                           "code": sum(1 for l in lines if l.strip())})
    return defs


def reach(defs, roots):
    seen, todo = {}, []
    for r in roots:
        if r not in defs:
            sys.exit(f"reach: no function {r} under src/")
        todo += defs[r]
    while todo:
        d = todo.pop()
        key = (d["path"], d["name"], d["start"])
        if key in seen:
            continue
        seen[key] = d
        for w in set(WORD.findall("\n".join(d["lines"]))):
            if w == d["name"] or w not in defs:
                continue
            own = [e for e in defs[w] if e["path"] == d["path"]]
            todo += own or [e for e in defs[w] if not e["static"]]
    return list(seen.values())


def main(argv):
    show = "--list" in argv
    argv = [a for a in argv if a != "--list"]
    if len(argv) < 2:
        sys.exit("usage: tools/reach.py [--list] DIR FUNCTION...")
    root, roots = argv[0], argv[1:]
    found = reach(definitions(root), roots)
    layers, files = collections.Counter(), collections.Counter()
    for d in found:
        layers[d["path"].split("/")[1]] += d["code"]
        files[d["path"]] += d["code"]
    total = sum(layers.values())
    print(f"{' '.join(roots)} in {root}: {len(found)} definitions, "
          f"{total} lines in {len(files)} files")
    for layer, n in layers.most_common():
        print(f"  {layer:8} {n:5}")
    for path, n in files.most_common():
        print(f"    {path:34} {n:5}")
    if show:
        for d in sorted(found, key=lambda d: (d["path"], d["start"])):
            print(f"{d['path']}:{d['start']} {d['name']} {d['code']}")


if __name__ == "__main__":
    main(sys.argv[1:])
