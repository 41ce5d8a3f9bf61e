#!/usr/bin/python3
"""tools/test-view.py MHA: the pages `mha view` writes, checked as a file
and in a real browser.

As files (always):
  - the README's case (B 2, Lq 4, Lk 6, D 100, 5 heads, valid_lens 3, 2)
    writes one page under 1 MiB;
  - every page is well formed (each element closed in order, one html,
    head and body, nothing after </html>) and names nothing outside
    itself: no src or href but a fragment, no url(...), no @import, no
    <link>, <iframe>, <object> or <embed>.

In Chromium (Debian's chromium, headless, driven through the DevTools
protocol on a pipe, with every host name unresolvable), when it is
installed (`make browser-test` installs it; --browser makes it required):
  - the page loads with no console error and no uncaught exception, and
    asks for nothing but itself;
  - its screenshot is not blank;
  - hovering a query in the head view keeps that query's lines alone and
    shows its row: the weights `mha forward --attention-out` computes for
    the same .npy inputs, to the 3 decimals shown, and "masked" for the
    keys past its valid length;
  - clicking a panel of the grid enlarges it; the grouped-query page
    boxes its groups; the causal page's slider shows the cache growing;
    a page of 100 positions shows 64 at a time and a thumbnail that
    moves them;
  - "save SVG" and "save PNG" download a well-formed SVG and a PNG that
    is not blank; each saved picture carries its style: opened on its
    own, its text is the page's 12px, and the dataflow's longest step
    and the grid's "example 0" end before what stands to their right;
  - --window 2 --keep-first 1 (the .npy inputs): the summary says
    "window 2, keep-first 1" and not "causal", hovering a query names
    the keys it sees ("key 0 and keys 3 to 4") and shows "masked"
    exactly where mha forward's weight is 0, the grid stripes those
    cells, and the decoding text counts the keys the query sees;
    --sinks: the hover says the rest goes to the head's sink and shows
    it; --causal --valid-lens 3,2: example 1, step 3 attends to 2 of the
    6 cached keys;
  - the decoding view past 64 keys: "cache" and the head labels apart,
    each head's label on its row, and a line that says which of the
    cached keys are drawn;
  - where each number goes at the smallest sizes: every frame holds its
    captions;
  - where each number goes, for (1, 2, 16) and (2, 3, 16) with 8 heads:
    every stage of the split and the join holds each element of its
    input once, each where the arithmetic of transpose_qkv (x[b, i, j]
    at [b, i, j/p, j%p], [b, j/p, i, j%p], [b*h + j/p, i, j%p]) and of
    transpose_output puts it; hovering x[0, 1, 5] lights one cell of
    each stage and one of each memory row, at those indices; a memory
    row is the one before after a view and the stage's own order after a
    copy, the steps that `mha trace --json` calls copies; the step
    buttons walk the stages; the grouped-query page splits the keys with
    G heads; a page past 512 numbers draws a sample and says so.

--picture PAGE OUT.svg writes the "numbers" section of PAGE, with
x[0, 1, 5] lit, as its "save SVG" button would (tools/docs-pictures.sh
keeps one for page 06).

--screenshots DIR keeps a screenshot of each page at each step in DIR,
to look at.

Exit status 0 when every check passes, 1 otherwise.  Only the Python
standard library: the .npy files are written and read by hand (float64,
little-endian, C order).
"""
import html.parser
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import xml.dom.minidom
import zlib

FAILURES = []
MHA = None  # the mha program under test


def check(ok, what):
    if not ok:
        FAILURES.append(what)
        print("view-test: FAILED: " + what, file=sys.stderr)
    return ok


# --- .npy by hand: tools/npy_plain.py --------------------------------

sys.dont_write_bytecode = True  # no tools/__pycache__ left in the reader's tree
from npy_plain import npy_read, npy_write  # noqa: E402


# --- a PNG by hand: is it blank? ----------------------------------------

def png_colours(data):
    """The number of distinct colours of an 8-bit RGB or RGBA PNG, and the
    share of its pixels that are not white."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and ctype in (2, 6), (depth, ctype)
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    prev = bytearray(stride)
    colours, busy, i = set(), 0, 0
    for _ in range(h):
        f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if f == 1:
                line[x] = (line[x] + a) & 255
            elif f == 2:
                line[x] = (line[x] + b) & 255
            elif f == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else
                                      b if pb <= pc else c)) & 255
        for x in range(0, stride, bpp):
            px = bytes(line[x:x + 3])
            colours.add(px)
            busy += px != b"\xff\xff\xff"
        prev = line
    return len(colours), busy / float(w * h)


# --- the page as a file ---------------------------------------------------

VOID = {"meta", "br", "hr", "img", "input", "link", "area", "base", "col",
        "embed", "source", "track", "wbr"}


class Shape(html.parser.HTMLParser):
    """Each element closed in the order opened; what the page names."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.stack, self.problems, self.counts, self.done = [], [], {}, False

    def handle_starttag(self, tag, attrs):
        if self.done:
            self.problems.append("<%s> after </html>" % tag)
        self.counts[tag] = self.counts.get(tag, 0) + 1
        for name, value in attrs:
            if name in ("src", "href", "action", "data", "poster") and \
                    not (value or "").startswith("#"):
                self.problems.append("<%s %s=%r> names something outside "
                                     "the page" % (tag, name, value))
        if tag in ("link", "iframe", "object", "embed", "base"):
            self.problems.append("a <%s> element" % tag)
        if tag not in VOID:
            self.stack.append(tag)

    def handle_endtag(self, tag):
        if not self.stack or self.stack[-1] != tag:
            self.problems.append("</%s> closes <%s>" % (
                tag, self.stack[-1] if self.stack else "nothing"))
            return
        self.stack.pop()
        if tag == "html":
            self.done = True


def check_file(path, what, limit=None):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    size = os.path.getsize(path)
    if limit:
        check(size < limit, "%s: %d bytes, not under %d" % (what, size, limit))
    check(text.startswith("<!DOCTYPE html>\n"), what + ": no <!DOCTYPE html>")
    p = Shape()
    p.feed(text)
    p.close()
    check(not p.stack, "%s: left open: %s" % (what, p.stack))
    for tag in ("html", "head", "body", "title"):
        check(p.counts.get(tag) == 1, "%s: %s <%s> elements" %
              (what, p.counts.get(tag, 0), tag))
    for problem in p.problems:
        check(False, "%s: %s" % (what, problem))
    for pattern in (r"url\((?!#)", r"@import", r"https?:", r"\bimport\(",
                    r"fetch\(", r"XMLHttpRequest", r"WebSocket"):
        check(not re.search(pattern, text.replace(
            "http://www.w3.org/2000/svg", "")),
            "%s: names %s" % (what, pattern))
    return size


# --- Chromium through the DevTools protocol ---------------------------

class Browser:
    """Headless Chromium on --remote-debugging-pipe: JSON messages ending
    in a NUL byte, written to its fd 3, read from its fd 4."""

    def __init__(self, exe, scratch):
        self.scratch = scratch
        to_r, self.to_w = os.pipe()
        self.from_r, from_w = os.pipe()

        def fds():
            # copies first: a pipe's own fd may already be 3 or 4, and
            # dup2 onto itself would keep it closed on exec
            a, b = os.dup(to_r), os.dup(from_w)
            os.dup2(a, 3)
            os.dup2(b, 4)
        args = [exe, "--headless", "--remote-debugging-pipe",
                "--user-data-dir=" + os.path.join(scratch, "profile"),
                "--no-first-run", "--no-default-browser-check",
                "--disable-gpu", "--disable-extensions",
                "--disable-background-networking", "--disable-sync",
                "--disable-component-update", "--no-proxy-server",
                "--host-resolver-rules=MAP * ~NOTFOUND",
                "--window-size=1280,1000", "about:blank"]
        # Chromium's sandbox refuses root and needs user namespaces, which
        # containers often lack; the page is the project's own, offline
        args.insert(1, "--no-sandbox")
        self.proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                     stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        os.close(to_r)
        os.close(from_w)
        self.buf, self.next_id, self.events = b"", 0, []

    def send(self, method, params=None, session=None, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_w, json.dumps(msg).encode() + b"\0")
        while True:
            m = self.read(timeout)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("%s: %s" % (method, m["error"]))
                return m["result"]

    def read(self, timeout):
        end = time.time() + timeout
        while b"\0" not in self.buf:
            import select
            left = end - time.time()
            if left <= 0 or not select.select([self.from_r], [], [], left)[0]:
                raise RuntimeError("Chromium did not answer in %d s" % timeout)
            chunk = os.read(self.from_r, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        m = json.loads(raw)
        if "method" in m:
            self.events.append(m)
        return m

    def wait_event(self, method, timeout=30):
        end = time.time() + timeout
        while True:
            for e in self.events:
                if e["method"] == method:
                    self.events.remove(e)
                    return e
            self.read(max(0.1, end - time.time()))

    def close(self):
        try:
            self.send("Browser.close", timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_w)
        os.close(self.from_r)


class Page:
    def __init__(self, browser, path, downloads):
        self.b = browser
        self.url = "file://" + os.path.abspath(path)
        target = browser.send("Target.createTarget", {"url": "about:blank"})
        self.s = browser.send("Target.attachToTarget",
                              {"targetId": target["targetId"],
                               "flatten": True})["sessionId"]
        for m in ("Runtime.enable", "Log.enable", "Network.enable",
                  "Page.enable"):
            self.send(m)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 1000, "deviceScaleFactor": 1,
                   "mobile": False})
        self.send("Browser.setDownloadBehavior",
                  {"behavior": "allow", "downloadPath": downloads,
                   "eventsEnabled": True}, session=False)
        browser.events.clear()
        self.send("Page.navigate", {"url": self.url})
        browser.wait_event("Page.loadEventFired")

    def send(self, method, params=None, session=True):
        return self.b.send(method, params, self.s if session else None)

    def js(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr,
                                           "returnByValue": True,
                                           "awaitPromise": True})
        if "exceptionDetails" in r:
            raise RuntimeError("%s: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def mouse(self, kind, x, y):
        self.send("Input.dispatchMouseEvent",
                  {"type": kind, "x": x, "y": y, "button": "left",
                   "clickCount": 1 if kind != "mouseMoved" else 0})

    def centre(self, selector):
        r = self.js("(function(){var e=document.querySelector(%s);"
                    "e.scrollIntoView({block:'center'});"
                    "var r=e.getBoundingClientRect();"
                    "return [r.left+r.width/2, r.top+r.height/2];})()"
                    % json.dumps(selector))
        return r

    def hover(self, selector):
        x, y = self.centre(selector)
        self.mouse("mouseMoved", x, y)

    def click(self, selector):
        x, y = self.centre(selector)
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y)
        self.mouse("mouseReleased", x, y)

    def problems(self):
        """Console errors, exceptions and requests for anything else."""
        out = []
        for e in self.b.events:
            p = e.get("params", {})
            if e["method"] == "Runtime.exceptionThrown":
                out.append("exception: %s" % p["exceptionDetails"].get(
                    "exception", {}).get("description", p["exceptionDetails"]))
            elif e["method"] == "Runtime.consoleAPICalled" and \
                    p.get("type") in ("error", "assert", "warning"):
                out.append("console %s: %s" % (p["type"], [
                    a.get("value", a.get("description")) for a in p["args"]]))
            elif e["method"] == "Log.entryAdded" and \
                    p["entry"]["level"] in ("error", "warning"):
                out.append("log: %s" % p["entry"]["text"])
            elif e["method"] == "Network.requestWillBeSent":
                u = p["request"]["url"]
                if u != self.url and not u.startswith(("data:", "blob:")):
                    out.append("asked for " + u)
        return out


SHOTS = None


def shot(pg, name):
    """With --screenshots DIR: the whole page as DIR/name.png."""
    if not SHOTS:
        return
    import base64
    height = pg.js("document.documentElement.scrollHeight")
    pg.send("Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": height, "deviceScaleFactor": 1,
             "mobile": False})
    r = pg.send("Page.captureScreenshot", {"format": "png"})
    pg.send("Emulation.setDeviceMetricsOverride",
            {"width": 1280, "height": 1000, "deviceScaleFactor": 1,
             "mobile": False})
    with open(os.path.join(SHOTS, name + ".png"), "wb") as f:
        f.write(base64.b64decode(r["data"]))


def wait_file(path, timeout=15):
    end = time.time() + timeout
    while time.time() < end:
        if os.path.exists(path) and os.path.getsize(path) > 0:
            time.sleep(0.2)
            return True
        time.sleep(0.1)
    return False


# --- where each number goes ---------------------------------------------

def stage_cells(pg, split, stage, memory):
    """[(data-src, data-idx or data-slot, lit)] of one stage's grid or memory
    row, in document order."""
    return pg.js("""[].map.call(document.querySelectorAll(
        "#numbers-svg g.stage[data-split='%d'][data-stage='%d'] %s"),
        function(c){return [c.getAttribute('data-src'),
          c.getAttribute(%s), c.classList.contains('lit')];})""" % (
        split, stage, "g.memory g.cell" if memory else "g.cell[data-idx]",
        "'data-slot'" if memory else "'data-idx'"))


def indices(shape):
    out = [[]]
    for n in shape:
        out = [i + [k] for i in out for k in range(n)]
    return out


def traced_kinds(mha, cwd, args):
    """The kinds of the steps inside the first transpose_qkv and the first
    transpose_output that `mha trace --json` records for these sizes."""
    lines = subprocess.run([mha, "trace", "--json"] + args, check=True,
                           cwd=cwd, capture_output=True, text=True).stdout
    recs = [json.loads(x) for x in lines.splitlines() if x.strip()]
    kinds = {}
    for k, r in enumerate(recs):
        if r["kind"] == "step" and r["name"] in ("transpose_qkv",
                                                 "transpose_output"):
            got = []
            for c in recs[k + 1:]:
                if c["depth"] <= r["depth"]:
                    break
                got.append(c["kind"])
            kinds.setdefault(r["name"], got)
    return kinds


def check_numbers(pg, what, B, n, D, h, kinds):
    """The numbers section of a page of B examples of n positions, D
    features, h heads (queries = keys = values in length)."""
    p = D // h
    qkv = [lambda b, i, j: [b, i, j],
           lambda b, i, j: [b, i, j // p, j % p],
           lambda b, i, j: [b, j // p, i, j % p],
           lambda b, i, j: [b * h + j // p, i, j % p]]
    out = [lambda r, i, j: [r, i, j],
           lambda r, i, j: [r // h, r % h, i, j],
           lambda r, i, j: [r // h, i, r % h, j],
           lambda r, i, j: [r // h, i, (r % h) * p + j]]
    grid = pg.js("document.querySelectorAll('#numbers-svg g.cell[data-idx]'"
                 ").length")
    check(grid >= 8 * B * n * D, "%s: %s cells with data-src in the stages' "
          "grids, not %d" % (what, grid, 8 * B * n * D))
    splits = pg.js("[].map.call(document.querySelectorAll('#numbers .bar "
                   "strong'),function(s){return s.textContent;})")
    check(splits == ["transpose_qkv(h=%d), the queries, keys and values:" % h,
                     "transpose_output(h=%d), the heads' outputs:" % h],
          "%s: the splits are %s" % (what, splits))
    for split, (shape, where, name) in enumerate(
            [((B, n, D), qkv, "transpose_qkv"),
             ((B * h, n, p), out, "transpose_output")]):
        everything = sorted(",".join(map(str, i)) for i in indices(shape))
        before = None
        for k in range(4):
            cells = stage_cells(pg, split, k, False)
            mem = stage_cells(pg, split, k, True)
            for row, part in ((cells, "grid"), (mem, "memory")):
                check(sorted(c[0] for c in row) == everything,
                      "%s: %s step %d: the %s's data-src are not a "
                      "permutation of the input's indices" % (what, name, k,
                                                              part))
            wrong = [c for c in cells if c[1] != ",".join(
                map(str, where[k](*map(int, c[0].split(",")))))]
            check(not wrong, "%s: %s step %d: %d cells not where the "
                  "arithmetic puts them, e.g. %s" % (what, name, k,
                                                    len(wrong), wrong[:2]))
            order = [c[0] for c in mem]
            slots = [int(c[1]) for c in mem]
            check(slots == sorted(slots), "%s: %s step %d: memory not in "
                  "the order of its slots" % (what, name, k))
            logical = [c[0] for c in sorted(
                cells, key=lambda c: [int(v) for v in c[1].split(",")])]
            kind = "input" if k == 0 else kinds[name][k - 1]
            if kind == "input":
                check(order == logical, "%s: %s: the input's memory is not "
                      "in its own order" % (what, name))
            elif kind == "view":
                check(order == before, "%s: %s step %d is a view, but its "
                      "memory row changed" % (what, name, k))
            else:
                check(order == logical and order != before,
                      "%s: %s step %d is a copy, but its memory row is not "
                      "the new order" % (what, name, k))
            before = order
    # hovering x[0, 1, 5]: one cell of each stage, one of each memory row
    pg.hover("#numbers-svg g.stage[data-split='0'][data-stage='0'] "
             "g.cell[data-src='0,1,5']")
    for k in range(4):
        lit = [c[1] for c in stage_cells(pg, 0, k, False) if c[2]]
        want = ",".join(map(str, qkv[k](0, 1, 5)))
        check(lit == [want], "%s: hovering x[0, 1, 5] lit %s at step %d, "
              "not [%s]" % (what, lit, k, want))
        lit = [c for c in stage_cells(pg, 0, k, True) if c[2]]
        check(len(lit) == 1 and lit[0][0] == "0,1,5", "%s: hovering x[0, 1, "
              "5] lit %s in step %d's memory" % (what, lit, k))
    # the buttons walk the steps: the later ones fade
    for k in range(4):
        pg.click("#numbers .bar:nth-of-type(1) .nu-next")
        later = pg.js("[].map.call(document.querySelectorAll(\"#numbers-svg "
                      "g.stage[data-split='0']\"),function(g){return "
                      "g.classList.contains('later');})")
        check(later == [j > k for j in range(4)], "%s: after %d clicks on "
              "next step the faded stages are %s" % (what, k + 1, later))
    pg.js("var s=document.querySelector('#numbers .nu-step');s.value='-1';"
          "s.dispatchEvent(new Event('change'));0")
    text = pg.js("document.getElementById('numbers-svg').textContent")
    copies = [k + 1 for k, c in enumerate(kinds["transpose_qkv"])
              if c == "copy"]
    said = ("None of the 3 steps moved a number" if not copies else
            "Only step %d moved numbers" % copies[0])
    check(said in text, "%s: the page does not say %r" % (what, said))


def window_sees(q, k, Lq, Lk, window, keep, length, causal=True):
    """Whether query q sees key k: window.h's rule with valid_lens."""
    at = q + Lk - Lq
    if k >= length or (causal and k > at):
        return False
    return not window or k > at - window or k < keep


def keys_text(seen):
    """The keys of the list seen, in the page's words: "key 0 and keys 2
    to 3"."""
    parts, k = [], 0
    while k < len(seen):
        if not seen[k]:
            k += 1
            continue
        j = k
        while j + 1 < len(seen) and seen[j + 1]:
            j += 1
        parts.append("key %d" % k if j == k else "keys %d to %d" % (k, j))
        k = j + 1
    return " and ".join(parts) or "no key"


def hover_rows(pg, q):
    """Hover query q of the head view: the text under it and its rows of
    weights, one list of cells per head."""
    pg.hover("#hv-svg .qlabel[data-q='%d']" % q)
    return pg.js("""(function(){
        return {says: document.querySelector('#hv-row p').textContent,
                rows: [].map.call(document.querySelectorAll('#hv-table tr[data-head]'),
                  function(r){return [].map.call(r.querySelectorAll('td'),
                    function(c){return c.textContent;});})};})()""")


def set_example(pg, b):
    pg.js("var s=document.getElementById('example');s.value='%d';"
          "s.dispatchEvent(new Event('change'));0" % b)


def set_step(pg, t):
    pg.js("var s=document.getElementById('step');s.value=%d;"
          "s.dispatchEvent(new Event('input'));0" % t)


def check_saved(b, path, downloads, what):
    """A saved picture opened on its own: every text in the page's 12px
    (it carries its style).  Returns its Page, or None."""
    if not check(wait_file(path), "%s: saving wrote nothing" % what):
        return None
    b.events.clear()
    pg = Page(b, path, downloads)
    for p in pg.problems():
        check(False, "%s: %s" % (what, p))
    sizes = pg.js("[].map.call(document.querySelectorAll('text'),function(t)"
                  "{return getComputedStyle(t).fontSize;})")
    wrong = sorted(set(x for x in sizes if x != "12px"))
    check(sizes and not wrong, "%s: the saved picture's text is %s, not the "
          "page's 12px" % (what, wrong or "missing"))
    return pg


def in_browser(exe, scratch, pages, a_path, lens):
    downloads = os.path.join(scratch, "downloads")
    os.mkdir(downloads)
    b = Browser(exe, scratch)
    try:
        # the README's case, from sizes
        pg = Page(b, pages["readme"], downloads)
        check(pg.js("document.body.dataset.ready") == "1",
              "readme: the script did not finish")
        screen = pg.send("Page.captureScreenshot", {"format": "png"})
        import base64
        colours, busy = png_colours(base64.b64decode(screen["data"]))
        check(colours > 20 and busy > 0.05,
              "readme: the screenshot is blank (%d colours, %.1f%% not white)"
              % (colours, 100 * busy))
        print("view-test: readme page: screenshot %d colours, %.1f%% not "
              "white" % (colours, 100 * busy))
        # the grid: 2 examples x 5 heads, masked keys hatched
        shot(pg, "1-readme")
        pg.hover("#hv-svg .qlabel[data-q='1']")
        shot(pg, "2-readme-hover-query-1")
        check(pg.js("document.querySelectorAll('#grid-svg .panel').length")
              == 10, "readme: the grid has not 10 panels")
        masked = pg.js("document.querySelectorAll('#grid-svg .panel "
                       "rect[fill^=\"url(\"]').length")
        # keys past 3 (example 0) and 2 (example 1), every query and head
        check(masked == 5 * 4 * (3 + 4), "readme: %s masked cells, not %d"
              % (masked, 5 * 4 * 7))
        pg.click("#grid-svg .panel[data-b='1'][data-head='3']")
        check(pg.js("!document.getElementById('enlarged').hidden && "
                    "document.querySelector('#enlarged-svg .panel')"
                    ".getAttribute('data-head')") == "3",
              "readme: a click on a panel did not enlarge it")
        shot(pg, "3-readme-enlarged")
        pg.click("#close")
        # the dataflow: every step of the trace at depths 1-2
        check(pg.js("document.querySelectorAll('#df-svg a.jump').length")
              == 1, "readme: not one step linked to the weights")
        steps = pg.js("document.querySelectorAll('#df-svg .step').length")
        check(steps == 28, "readme: %s dataflow steps, not 28" % steps)
        pg.hover("#df-svg .step[data-seq='21']")
        detail = pg.js("document.getElementById('df-detail').textContent")
        check("(10, 4, 20)" in detail and "(10, 6, 20)^T" in detail and
              "(10, 4, 6)" in detail and "(B*h, Lq, Lk)" in detail,
              "readme: hovering Q K^T shows %r" % detail)
        shot(pg, "4-readme-dataflow-hover")
        # save the head view: a well-formed SVG, a PNG not blank
        pg.click("#head-view .save-svg")
        svg_path = os.path.join(downloads, "head-view.svg")
        if check(wait_file(svg_path), "readme: save SVG wrote nothing"):
            doc = xml.dom.minidom.parse(svg_path)
            check(len(doc.getElementsByTagName("line")) > 20,
                  "readme: the saved SVG has no lines")
        pg.click("#head-view .save-png")
        png_path = os.path.join(downloads, "head-view.png")
        if check(wait_file(png_path), "readme: save PNG wrote nothing"):
            with open(png_path, "rb") as f:
                colours, busy = png_colours(f.read())
            check(colours > 5 and busy > 0.02,
                  "readme: the saved PNG is blank")
        # save the numbers: an SVG with a cell for each number of each stage
        pg.click("#numbers .save-svg")
        svg_path = os.path.join(downloads, "numbers.svg")
        if check(wait_file(svg_path), "readme: save SVG of the numbers "
                 "wrote nothing"):
            doc = xml.dom.minidom.parse(svg_path)
            cells = [g for g in doc.getElementsByTagName("g")
                     if g.getAttribute("data-src")]
            check(len(cells) >= 2 * 8 * 400, "readme: the saved numbers "
                  "have %d cells" % len(cells))
        for p in pg.problems():
            check(False, "readme: " + p)
        # each saved picture carries its style: the dataflow's longest
        # step ends before its kind, the grid's "example 0" before its
        # first panel
        pg.click("#dataflow .save-svg")
        pg.click("#grid .save-svg")
        check_saved(b, os.path.join(downloads, "head-view.svg"), downloads,
                    "readme: the head view")
        df = check_saved(b, os.path.join(downloads, "dataflow.svg"), downloads,
                         "readme: the dataflow")
        if df:
            gap = df.js("""(function(){
                var g=[].filter.call(document.querySelectorAll('g.step'),function(g){
                  return g.querySelector('text').textContent.indexOf('masked_softmax(')===0;})[0];
                var t=g.querySelectorAll('text');
                return t[1].getBoundingClientRect().left-t[0].getBoundingClientRect().right;})()""")
            check(gap > 0, "readme: in the saved dataflow masked_softmax(...) "
                  "runs %.0f px over its kind" % -gap)
            shot(df, "9-saved-dataflow")
        gr = check_saved(b, os.path.join(downloads, "heads.svg"), downloads,
                         "readme: the grid")
        if gr:
            gap = gr.js("""(function(){
                var l=[].filter.call(document.querySelectorAll('text'),function(t){
                  return t.textContent==='example 0';})[0];
                return document.querySelector('.panel').getBoundingClientRect().left-
                       l.getBoundingClientRect().right;})()""")
            check(gap > 0, "readme: in the saved grid \"example 0\" runs "
                  "%.0f px into its first panel" % -gap)
            shot(gr, "9-saved-grid")

        # where each number goes, B = 1 (every step of the split a view)
        # and B = 2 (the last one copies)
        for key, (B, n) in (("slide", (1, 2)), ("b2", (2, 3))):
            b.events.clear()
            pg = Page(b, pages[key], downloads)
            check_numbers(pg, key, B, n, 16, 8, traced_kinds(
                MHA, scratch, ["--batch", str(B), "--queries", str(n),
                                    "--kv", str(n), "--hiddens", "16",
                                    "--heads", "8"]))
            pg.hover("#numbers-svg g.stage[data-split='0'][data-stage='0'] "
                     "g.cell[data-src='0,1,5']")
            shot(pg, "8-numbers-%s" % key)
            for p in pg.problems():
                check(False, key + ": " + p)

        # files: hovering a query shows its row, the weights of mha forward
        b.events.clear()
        pg = Page(b, pages["files"], downloads)
        shape, a = npy_read(a_path)
        B, H, Lq, Lk = shape
        for bq in range(B):
            if bq:
                pg.js("var s=document.getElementById('example');s.value='1';"
                      "s.dispatchEvent(new Event('change'));0")
            for q in range(Lq):
                pg.hover("#hv-svg .qlabel[data-q='%d']" % q)
                got = pg.js("""(function(){
                    var s=document.getElementById('hv-svg');
                    var other=0, mine=0;
                    s.querySelectorAll('line.attn').forEach(function(l){
                      var shown=getComputedStyle(l).display!=='none';
                      if (l.getAttribute('data-q')==%d) mine+=shown; else other+=shown;});
                    var rows=[].map.call(document.querySelectorAll('#hv-table tr[data-head]'),
                      function(r){return [].map.call(r.querySelectorAll('td'),
                        function(c){return c.textContent;});});
                    return {query: s.getAttribute('data-query'), other: other,
                            mine: mine, rows: rows};})()""" % q)
                check(got["query"] == str(q) and got["other"] == 0 and
                      got["mine"] > 0,
                      "files: hovering query %d left %s" % (q, got))
                want = [["%.3f" % a[((bq * H + h) * Lq + q) * Lk + k]
                         if k < lens[bq] else "masked" for k in range(Lk)]
                        for h in range(H)]
                check(got["rows"] == want,
                      "files: example %d query %d shows %s, not %s" %
                      (bq, q, got["rows"], want))
        shot(pg, "5-files-example-1-query-2")
        for p in pg.problems():
            check(False, "files: " + p)

        # grouped-query and causal: groups boxed, the slider steps
        b.events.clear()
        pg = Page(b, pages["gqa"], downloads)
        check(pg.js("document.querySelectorAll('#grid-svg rect"
                    "[stroke-dasharray]').length") == 2 * 2,
              "gqa: not 2 groups boxed in each of 2 examples")
        # the softmax of (B*G, h/G*Lq, Lk) makes the weights: one link
        links = pg.js("[].map.call(document.querySelectorAll('#df-svg a.jump'),"
                      "function(a){return a.parentNode.querySelector('text')"
                      ".textContent;})")
        check(links == ["masked_softmax(scale 0.5, valid_lens (4, 16))"],
              "gqa: the dataflow links %s to the weights" % links)
        cached = []
        for t in (0, 3, 7):
            pg.js("var s=document.getElementById('step');s.value=%d;"
                  "s.dispatchEvent(new Event('input'));0" % t)
            cached.append(pg.js("document.querySelectorAll('#dec-svg rect"
                                ".cached').length"))
            shot(pg, "6-gqa-step-%d" % t)
        check(cached == [1, 4, 8], "gqa: the cache held %s keys at steps "
              "0, 3, 7, not [1, 4, 8]" % cached)
        text = pg.js("document.getElementById('step-text').textContent")
        check("(2, 2, 8, 4)" in text, "gqa: step 7 says %r" % text)
        # the keys and values split with G = 2 heads, the queries with 4
        splits = pg.js("[].map.call(document.querySelectorAll('#numbers .bar "
                       "strong'),function(s){return s.textContent;})")
        check(splits == ["transpose_qkv(h=4), the queries:",
                         "transpose_qkv(h=2), the keys and values:",
                         "transpose_output(h=4), the heads' outputs:"],
              "gqa: the splits are %s" % splits)
        for p in pg.problems():
            check(False, "gqa: " + p)

        # long: 100 positions, 64 at a time, a thumbnail that moves them
        b.events.clear()
        pg = Page(b, pages["long"], downloads)
        shot(pg, "7-long")
        n = pg.js("document.querySelectorAll('#hv-svg .qlabel').length")
        check(n == 64, "long: %s query labels, not 64" % n)
        x, y = pg.centre("#thumb")
        r = pg.js("(function(){var r=document.getElementById('thumb')"
                  ".getBoundingClientRect();return [r.right-2, r.bottom-2];})()")
        pg.mouse("mousePressed", r[0], r[1])
        pg.mouse("mouseReleased", r[0], r[1])
        first = pg.js("document.querySelector('#hv-svg .qlabel')"
                      ".getAttribute('data-q')")
        shot(pg, "7-long-moved")
        check(first == "36", "long: after a click at the thumbnail's corner "
              "the first query is %s, not 36" % first)
        # 3200 numbers a stage: a sample, the same at every step, said
        text = pg.js("document.getElementById('numbers-svg').textContent")
        m = re.search(r"A sample: (\d+) of the 3200 numbers", text)
        check(m and int(m.group(1)) <= 512, "long: the page does not say "
              "which sample of the 3200 numbers it draws")
        first = sorted(c[0] for c in stage_cells(pg, 0, 0, False))
        for k in range(1, 4):
            got = sorted(c[0] for c in stage_cells(pg, 0, k, False))
            check(got == first, "long: step %d draws other numbers than "
                  "the input" % k)
        check(m and len(first) == int(m.group(1)), "long: %d numbers drawn"
              % len(first))
        # decoding past 64 keys: the labels apart and on their rows, and
        # a line that says which keys are drawn
        set_step(pg, 99)
        got = pg.js("""(function(){
            var s=document.getElementById('dec-svg');
            var labels=[].filter.call(s.querySelectorAll('text'),function(t){
              return t.getAttribute('x')==='0';}).map(function(t){
              var r=t.getBoundingClientRect();return [t.textContent,r.top,r.bottom];});
            var ys={};
            [].forEach.call(s.querySelectorAll('rect'),function(r){
              var x=+r.getAttribute('x'),w=+r.getAttribute('width');
              if (x>=90 && w<30) ys[r.getBoundingClientRect().top]=r.getBoundingClientRect().bottom;});
            var rows=Object.keys(ys).map(Number).sort(function(a,b){return a-b;})
              .map(function(y){return [y,ys[y]];});
            return {labels: labels, rows: rows, text: s.textContent};})()""")
        labels = sorted(got["labels"], key=lambda x: x[1])
        check([x[0] for x in labels] == ["cache", "head 0", "head 1", "head 2",
                                         "head 3"] and
              all(labels[i + 1][1] >= labels[i][2] for i in range(4)),
              "long: the decoding's labels overlap: %s" % labels)
        check(len(got["rows"]) == 5 and all(
            r[0] <= (x[1] + x[2]) / 2 <= r[1]
            for x, r in zip(labels, got["rows"])),
            "long: the decoding's labels %s are not on their rows %s" %
            (labels, got["rows"]))
        check("the last 64 of the 100 cached keys" in got["text"],
              "long: the decoding does not say only the last 64 of the 100 "
              "cached keys are drawn")
        shot(pg, "7-long-decoding")
        for p in pg.problems():
            check(False, "long: " + p)
        pg.click("#decoding .save-svg")
        check_saved(b, os.path.join(downloads, "decoding.svg"), downloads,
                    "long: the decoding")

        # a window that keeps the first key, over the .npy inputs
        b.events.clear()
        pg = Page(b, pages["window"], downloads)
        shape, a = npy_read(os.path.join(scratch, "a-window.npy"))
        B, H, Lq, Lk = shape
        summary = pg.js("document.getElementById('summary').textContent")
        check(", window 2, keep-first 1:" in summary and "causal" not in
              summary, "window: the summary says %r" % summary)
        hatched = 0
        for bq in range(B):
            set_example(pg, bq)
            for q in range(Lq):
                sees = [window_sees(q, k, Lq, Lk, 2, 1, lens[bq])
                        for k in range(Lk)]
                hatched += H * sees.count(False)
                for h in range(H):
                    row = [a[((bq * H + h) * Lq + q) * Lk + k] != 0
                           for k in range(Lk)]
                    check(row == sees, "window: mha forward's example %d "
                          "head %d query %d sees %s, not %s" % (bq, h, q,
                                                                row, sees))
                got = hover_rows(pg, q)
                said = "it sees %s;" % keys_text(sees)
                check(said in got["says"], "window: example %d query %d: %r "
                      "does not say %r" % (bq, q, got["says"], said))
                want = [["%.3f" % a[((bq * H + h) * Lq + q) * Lk + k]
                         if sees[k] else "masked" for k in range(Lk)]
                        for h in range(H)]
                check(got["rows"] == want, "window: example %d query %d "
                      "shows %s, not %s" % (bq, q, got["rows"], want))
                set_step(pg, q)
                n, t = sees.count(True), q + Lk - Lq + 1
                said = "attends to %s cached key" % (
                    "%d of the %d" % (n, t) if n < t else str(t))
                text = pg.js("document.getElementById('step-text')"
                             ".textContent")
                check(said in text, "window: example %d step %d says %r, "
                      "not %r" % (bq, q, text, said))
        shot(pg, "10-window")
        masked = pg.js("document.querySelectorAll('#grid-svg .panel "
                       "rect[fill^=\"url(\"]').length")
        check(masked == hatched, "window: the grid stripes %s cells, not %d"
              % (masked, hatched))
        for p in pg.problems():
            check(False, "window: " + p)

        # sinks: the rest of each row goes to its head's sink
        b.events.clear()
        pg = Page(b, pages["sinks"], downloads)
        shape, a = npy_read(os.path.join(scratch, "a-sinks.npy"))
        B, H, Lq, Lk = shape
        got = hover_rows(pg, 2)
        check("the rest goes to the head's sink" in got["says"] and
              "sum to 1" not in got["says"],
              "sinks: hovering query 2 says %r" % got["says"])
        for h in range(H):
            rest = 1 - sum(a[(h * Lq + 2) * Lk + k] for k in range(Lk))
            cell = got["rows"][h][-1] if got["rows"] else "none"
            check(rest > 0.01 and re.match(r"\d\.\d{3}$", cell) and
                  abs(float(cell) - rest) < 0.0015,
                  "sinks: head %d's sink shows %s, not %.3f" % (h, cell,
                                                              rest))
        shot(pg, "11-sinks")
        for p in pg.problems():
            check(False, "sinks: " + p)

        # causal with valid_lens: the decoding counts the keys seen
        b.events.clear()
        pg = Page(b, pages["causal-lens"], downloads)
        set_example(pg, 1)
        set_step(pg, 3)
        text = pg.js("document.getElementById('step-text').textContent")
        check("query 3 of example 1 attends to 2 of the 6 cached keys" in
              text, "causal-lens: example 1, step 3 says %r" % text)
        shot(pg, "12-causal-lens-example-1-step-3")
        for p in pg.problems():
            check(False, "causal-lens: " + p)

        # where each number goes at the smallest sizes: the frames hold
        # their captions
        b.events.clear()
        pg = Page(b, pages["tiny"], downloads)
        over = pg.js("""[].concat.apply([], [].map.call(
            document.querySelectorAll('#numbers-svg g.stage'), function(g){
              var right=g.querySelector('rect.frame').getBoundingClientRect().right;
              return [].filter.call(g.querySelectorAll('text'), function(t){
                return t.getBoundingClientRect().right > right + 0.5;})
                .map(function(t){return t.textContent;});}))""")
        check(not over, "tiny: frames narrower than their captions: %s" %
              over[:3])
        shot(pg, "13-tiny-numbers")
        for p in pg.problems():
            check(False, "tiny: " + p)
    finally:
        b.close()


def picture(page, out):
    """The numbers section of page, x[0, 1, 5] lit, saved as out (SVG)."""
    exe = shutil.which("chromium")
    if not exe:
        print("view-test: --picture needs chromium (make browser-test "
              "installs it)", file=sys.stderr)
        return 1
    scratch = tempfile.mkdtemp(prefix="mha-view-picture-")
    try:
        downloads = os.path.join(scratch, "downloads")
        os.mkdir(downloads)
        b = Browser(exe, scratch)
        try:
            pg = Page(b, page, downloads)
            pg.hover("#numbers-svg g.stage[data-split='0'][data-stage='0'] "
                     "g.cell[data-src='0,1,5']")
            pg.click("#numbers .save-svg")
            saved = os.path.join(downloads, "numbers.svg")
            if not wait_file(saved) or pg.problems():
                print("view-test: %s: no picture of its numbers (%s)" % (
                    page, pg.problems()), file=sys.stderr)
                return 1
        finally:
            b.close()
        shutil.copyfile(saved, out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


def main():
    args = sys.argv[1:]
    if args[:1] == ["--picture"] and len(args) == 3:
        return picture(args[1], args[2])
    global SHOTS, MHA
    need_browser = "--browser" in args
    args = [a for a in args if a != "--browser"]
    if "--screenshots" in args:
        i = args.index("--screenshots")
        SHOTS = os.path.abspath(args[i + 1])
        os.makedirs(SHOTS, exist_ok=True)
        del args[i:i + 2]
    if len(args) != 1:
        print("usage: tools/test-view.py [--browser] [--screenshots DIR] MHA\n"
              "       tools/test-view.py --picture PAGE OUT.svg", file=sys.stderr)
        return 2
    mha = MHA = os.path.abspath(args[0])
    scratch = tempfile.mkdtemp(prefix="mha-view-test-")
    try:
        def run(*a):
            subprocess.run([mha] + list(a), check=True, cwd=scratch)
        pages = {k: os.path.join(scratch, k + ".html")
                 for k in ("readme", "files", "gqa", "long", "slide", "b2",
                           "window", "sinks", "causal-lens", "tiny")}
        run("view", "--batch", "2", "--queries", "4", "--kv", "6",
            "--hiddens", "100", "--heads", "5", "--valid-lens", "3,2",
            "--html", pages["readme"])
        # .npy inputs of B 2, Lq 3, Lk 5, D 8, 2 heads, a fixed pattern
        B, Lq, Lk, D, lens = 2, 3, 5, 8, [4, 2]
        vals = lambda n, s: [((i * 7919 + s) % 97) / 48.0 - 1 for i in range(n)]
        npy_write(os.path.join(scratch, "q.npy"), (B, Lq, D), vals(B * Lq * D, 1))
        npy_write(os.path.join(scratch, "k.npy"), (B, Lk, D), vals(B * Lk * D, 2))
        for i, w in enumerate(("wq", "wk", "wv", "wo")):
            npy_write(os.path.join(scratch, w + ".npy"), (D, D),
                      [v / 2 for v in vals(D * D, 3 + i)])
        common = ["--heads", "2", "--queries", "q.npy", "--keys", "k.npy",
                  "--values", "k.npy", "--wq", "wq.npy", "--wk", "wk.npy",
                  "--wv", "wv.npy", "--wo", "wo.npy", "--valid-lens", "4,2"]
        run("forward", *common, "--out", "o.npy", "--attention-out", "a.npy")
        run("view", *common, "--labels", "the,cat,sat,on,it",
            "--query-labels", "x,y,z", "--html", pages["files"])
        window = ["--window", "2", "--keep-first", "1"]
        run("forward", *common, *window, "--out", "o.npy", "--attention-out",
            "a-window.npy")
        run("view", *common, *window, "--html", pages["window"])
        npy_write(os.path.join(scratch, "s.npy"), (2,), [0.5, -1.0])
        sinks = ["--causal", "--sinks", "s.npy"]
        run("forward", *common, *sinks, "--out", "o.npy", "--attention-out",
            "a-sinks.npy")
        run("view", *common, *sinks, "--html", pages["sinks"])
        run("view", "--causal", "--valid-lens", "3,2", "--html",
            pages["causal-lens"])
        run("view", "--batch", "1", "--queries", "1", "--kv", "1",
            "--hiddens", "4", "--heads", "1", "--html", pages["tiny"])
        run("view", "--batch", "2", "--queries", "8", "--kv", "8",
            "--hiddens", "16", "--heads", "4", "--kv-heads", "2", "--causal",
            "--html", pages["gqa"])
        run("view", "--batch", "1", "--queries", "100", "--kv", "100",
            "--hiddens", "32", "--heads", "4", "--causal",
            "--html", pages["long"])
        for key, (B, n) in (("slide", (1, 2)), ("b2", (2, 3))):
            run("view", "--batch", str(B), "--queries", str(n), "--kv",
                str(n), "--hiddens", "16", "--heads", "8", "--html",
                pages[key])
        size = check_file(pages["readme"], "readme", 1 << 20)
        print("view-test: readme page: %d bytes" % size)
        for k in ("files", "gqa", "long", "slide", "b2", "window", "sinks",
                  "causal-lens", "tiny"):
            check_file(pages[k], k)

        exe = shutil.which("chromium")
        if exe:
            start = time.time()
            in_browser(exe, scratch, pages, os.path.join(scratch, "a.npy"),
                       lens)
            print("view-test: in %s: %.1f s" % (exe, time.time() - start))
        elif need_browser:
            check(False, "no chromium on PATH (make browser-test installs it)")
        else:
            print("view-test: the browser checks skipped: no chromium "
                  "(make browser-test installs it)")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if FAILURES:
        print("view-test: %d check(s) failed" % len(FAILURES), file=sys.stderr)
        return 1
    print("view-test: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
