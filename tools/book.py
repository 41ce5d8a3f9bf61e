#!/usr/bin/python3
"""tools/book.py: the book in docs/ as one self-contained HTML file, and
PDFs for print made from it with headless Chromium (`make book`).

    tools/book.py OUT             OUT/book.html and OUT/book.pdf, and
                                  OUT/chapters/NN_topic.html and .pdf,
                                  one a chapter
    tools/book.py --check OUT     the HTML only, then checks it (make test):
                                  nothing loaded or linked from outside,
                                  every link to a place in the book lands
                                  on one; with Chromium there, one
                                  chapter printed to PDF

The pages are docs/ as `make docs` wove them: the introduction of
docs/README.md, the chapters in order, then the reference pages the
contents list, the glossary and the references; the teacher's key is
not part of it.  Markdown becomes HTML with cmark-gfm, GitHub's own
converter (tables, autolinks), so the print says what GitHub shows; the
math GitHub shows ($...$, $$...$$) becomes MathML, which Chromium draws,
by KaTeX (Debian's libjs-katex, under node), kept out of cmark's way
while it converts.  Then, in the HTML:
  - every heading gets an id (its page's name and GitHub's slug), and a
    link to a page or a place in one becomes a link inside the book;
  - a picture is inlined as a data: URI (PNG or SVG);
  - a link that leaves the book (the web, a source file, the explorer's
    page) becomes its text, with the address after it for the web, so
    no src or href points outside the file;
  - the navigation lines of the pages are left out, and a table of
    contents, of the chapters and their sections, opens the book.
Each file is written under a temporary name and renamed into place.
Exit 0, or 1 after one line on stderr.
"""
import base64
import html
import os
import re
import shutil
import subprocess
import sys
import tempfile

CSS = """
body { font-family: "DejaVu Serif", Georgia, serif; font-size: 11pt;
       line-height: 1.45; max-width: 46em; margin: 2em auto; padding: 0 1em;
       color: #111; }
h1 { font-size: 1.7em; margin-top: 0; }
h2 { font-size: 1.3em; margin-top: 1.6em; }
h3 { font-size: 1.1em; }
code, pre { font-family: "DejaVu Sans Mono", monospace; font-size: 0.82em; }
pre { background: #f6f6f6; border: 1px solid #ddd; padding: 0.5em 0.7em;
      white-space: pre-wrap; overflow-wrap: anywhere; }
table { border-collapse: collapse; font-size: 0.9em; margin: 0.8em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; vertical-align: top; }
img { max-width: 100%; }
blockquote { border-left: 3px solid #ccc; margin-left: 0; padding-left: 1em;
             color: #333; }
details summary { font-style: italic; }
div.math { margin: 0.6em 0; overflow-x: auto; }
math { font-size: 1.05em; }
.page { break-before: page; }
.page:first-of-type { break-before: auto; }
nav.toc ol { list-style: none; padding-left: 1em; }
nav.toc > ol { padding-left: 0; }
nav.toc a { color: inherit; text-decoration: none; }
.left-out { font-family: "DejaVu Sans Mono", monospace; font-size: 0.82em; }
@page { size: A4; margin: 18mm 16mm;
        @bottom-center { content: counter(page); font-size: 9pt; color: #555; } }
@page :first { @bottom-center { content: none; } }
@media print {
  body { max-width: none; margin: 0; padding: 0; }
  img, tr { break-inside: avoid; }
  div.math { overflow: visible; }
  h1, h2, h3 { break-after: avoid; }
  a { color: inherit; text-decoration: none; }
}
"""


def die(msg):
    print("book: " + msg, file=sys.stderr)
    sys.exit(1)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def slug(text):
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"<[^>]+>", "", text)
    text = html.unescape(text).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def pages(docs):
    """(name, markdown) of the book's pages, in the book's order."""
    index = read(os.path.join(docs, "README.md"))
    chapters = sorted(f[:-3] for f in os.listdir(docs)
                      if re.match(r"\d\d_.*\.md$", f))
    if not chapters:
        die(docs + " has no chapter: run make docs")
    intro = index.split("\n## Chapters", 1)[0]
    refs = index.split("\n## Reference", 1)
    reference = re.findall(r"^- \[[^\]]*\]\(([\w.-]+)\.md\)", refs[1], re.M) \
        if len(refs) == 2 else []
    order = [("introduction", intro)]
    for name in chapters + reference + ["glossary", "references"]:
        order.append((name, read(os.path.join(docs, name + ".md"))))
    return order


KATEX = os.environ.get("KATEX_JS", "/usr/share/javascript/katex/katex.js")
RENDER = r"""
const katex = require(process.argv[1]);
let input = "";
process.stdin.on("data", d => input += d);
process.stdin.on("end", () => {
    const out = JSON.parse(input).map(([tex, display]) => {
        try {
            return katex.renderToString(tex, {output: "mathml", displayMode: display,
                                              throwOnError: true});
        } catch (e) {
            return "ERROR " + e.message;
        }
    });
    process.stdout.write(JSON.stringify(out));
});
"""


def render_math(items):
    """[(tex, display)] as MathML, in one run of KaTeX under node."""
    if not items:
        return []
    import json
    if not os.path.isfile(KATEX):
        die("no KaTeX at %s (Debian: libjs-katex; or KATEX_JS=katex.js)" % KATEX)
    node = shutil.which("node") or shutil.which("nodejs")
    if not node:
        die("node is not installed (Debian: nodejs; tools/deps.sh installs it)")
    run = subprocess.run([node, "-e", RENDER, KATEX], input=json.dumps(items),
                         capture_output=True, text=True)
    if run.returncode != 0:
        die("KaTeX failed: " + run.stderr.strip()[-300:])
    out = json.loads(run.stdout)
    for (tex, _), mathml in zip(items, out):
        if mathml.startswith("ERROR "):
            die("KaTeX cannot read $%s$: %s" % (tex, mathml[6:]))
    # the namespace is HTML's default for <math>: no address in the page
    return [m.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "")
            for m in out]


# $$display$$ and $inline$ math, as GitHub reads them, outside code
MATH = re.compile(r"\$\$(.+?)\$\$|(?<![\\$\w])\$(?=[^\s$])([^$\n]*?[^\s\\$])\$(?![\w$])",
                  re.S)
CODE = re.compile(r"^```.*?^```[^\n]*$|`[^`\n]+`", re.S | re.M)


def protect_math(markdown):
    """markdown with its math as placeholders cmark leaves alone, and the
    (tex, display) of each."""
    items, out, at = [], [], 0

    def math(text):
        def one(m):
            display = m.group(1) is not None
            items.append(((m.group(1) if display else m.group(2)).strip(), display))
            mark = "MHAMATH%dEND" % (len(items) - 1)
            return "\n\n%s\n\n" % mark if display else mark
        return MATH.sub(one, text)
    for m in CODE.finditer(markdown):
        out.append(math(markdown[at:m.start()]))
        out.append(m.group(0))
        at = m.end()
    out.append(math(markdown[at:]))
    return "".join(out), items


def put_math(body, mathml):
    body = re.sub(r"<p>MHAMATH(\d+)END</p>",
                  lambda m: '<div class="math">%s</div>' % mathml[int(m.group(1))], body)
    return re.sub(r"MHAMATH(\d+)END", lambda m: mathml[int(m.group(1))], body)


def to_html(markdown):
    try:
        run = subprocess.run(["cmark-gfm", "--unsafe", "-e", "table",
                              "-e", "autolink", "-e", "strikethrough"],
                             input=markdown, capture_output=True, text=True,
                             check=True)
    except FileNotFoundError:
        die("cmark-gfm is not installed (tools/deps.sh installs it)")
    except subprocess.CalledProcessError as e:
        die("cmark-gfm failed: " + e.stderr.strip())
    return run.stdout


def data_uri(path):
    kind = {".png": "image/png", ".svg": "image/svg+xml"}.get(
        os.path.splitext(path)[1])
    if not kind:
        die("%s: a picture the book cannot inline (PNG or SVG only)" % path)
    if not os.path.isfile(path):
        die("%s: a picture a page shows is not there" % path)
    with open(path, "rb") as f:
        return "data:%s;base64,%s" % (kind, base64.b64encode(f.read()).decode())


def page_html(name, markdown, docs, names):
    """One page as HTML, its ids and links made the book's; its title and
    its (level, id, text) headings."""
    markdown = re.sub(r"^<!--.*?-->\n", "", markdown, flags=re.S)
    markdown, math = protect_math(markdown)
    body = put_math(to_html(markdown), render_math(math))
    # the navigation lines: [<- prev] . [contents](README.md) . [next ->]
    body = re.sub(r'<p>[^\n]*<a href="README\.md">contents</a>[^\n]*</p>\n', "",
                  body)
    body = re.sub(r"<hr />\n\s*$", "", body)
    heads = []
    used = set()

    def head(m):
        level, text = m.group(1), m.group(2)
        ident = name + "--" + slug(text)
        base, k = ident, 1
        while ident in used:
            ident, k = "%s-%d" % (base, k), k + 1
        used.add(ident)
        heads.append((int(level), ident, html.unescape(re.sub(r"<[^>]+>", "", text))))
        return '<h%s id="%s">%s</h%s>' % (level, ident, text, level)
    body = re.sub(r"<h([1-6])>(.*?)</h\1>", head, body, flags=re.S)
    # a page's own anchors (the glossary's terms) as its headings are named
    body = re.sub(r'<a id="([^"]+)"></a>',
                  lambda m: '<a id="%s--%s"></a>' % (name, m.group(1)), body)

    def link(m):
        target, text = html.unescape(m.group(1)), m.group(2)
        if re.match(r"[a-z]+:", target):        # the web, mail
            plain = re.sub(r"<[^>]+>", "", text)
            if html.unescape(plain) == target:
                return text
            return "%s (%s)" % (text, html.escape(target))
        path, _, place = target.partition("#")
        if not path:
            return '<a href="#%s--%s">%s</a>' % (name, place, text)
        page = path[:-3] if path.endswith(".md") else None
        if page == "README":
            return text
        if page in names:
            if place:
                return '<a href="#%s--%s">%s</a>' % (page, place, text)
            return '<a href="#page-%s">%s</a>' % (page, text)
        # a file of the repository, the key, the explorer's page: not in
        # the book; its text stays
        return '<span class="left-out">%s</span>' % text
    body = re.sub(r'<a href="([^"]*)"[^>]*>(.*?)</a>', link, body, flags=re.S)

    def image(m):
        src = html.unescape(m.group(2))
        if re.match(r"[a-z]+:", src):
            die("%s.md shows a picture from outside the book: %s" % (name, src))
        return '%s"%s"' % (m.group(1), data_uri(os.path.normpath(os.path.join(docs, src))))
    body = re.sub(r'(<img [^>]*?src=)"([^"]*)"', image, body)
    title = heads[0][2] if heads and heads[0][0] == 1 else name
    return body, title, heads


def document(title, sections, toc):
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<title>%s</title>\n<style>%s</style>\n</head>\n<body>\n%s%s</body>\n</html>\n"
            % (html.escape(title), CSS, toc, sections))


def contents(woven):
    out = ['<nav class="toc page" id="contents">\n<h1>Contents</h1>\n<ol>\n']
    for name, _, title, heads in woven:
        if name == "introduction":
            continue
        out.append('<li><a href="#page-%s">%s</a>' % (name, html.escape(title)))
        subs = [(i, t) for level, i, t in heads if level == 2]
        if re.match(r"\d\d_", name) and subs:
            out.append("\n<ol>\n" + "".join(
                '<li><a href="#%s">%s</a></li>\n' % (i, html.escape(t))
                for i, t in subs) + "</ol>\n")
        out.append("</li>\n")
    out.append("</ol>\n</nav>\n")
    return "".join(out)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def check(path, text):
    """Nothing from outside, every place linked to is there."""
    for attr, value in re.findall(r'\b(src|href)="([^"]*)"', text):
        if attr == "src" and not value.startswith("data:"):
            die("%s: a src that is not inlined: %.80s" % (path, value))
        if attr == "href" and not value.startswith("#"):
            die("%s: a link out of the book: %s" % (path, value))
    ids = set(re.findall(r'\bid="([^"]*)"', text))
    for target in re.findall(r'href="#([^"]*)"', text):
        if target not in ids:
            die("%s: a link to #%s, which is nowhere in the book" % (path, target))
    if re.search(r"\b(url\(|@import)", text.split("</style>")[0]):
        die("%s: its style loads something" % path)


def chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def pdf(browser, html_path, pdf_path):
    """html_path printed by headless Chromium into pdf_path."""
    tmp = "%s.tmp.%d.pdf" % (pdf_path[:-4], os.getpid())
    with tempfile.TemporaryDirectory(prefix="mha-book-") as profile:
        cmd = [browser, "--headless", "--disable-gpu", "--no-sandbox",
               "--user-data-dir=" + profile, "--no-pdf-header-footer",
               "--print-to-pdf=" + tmp, "file://" + os.path.abspath(html_path)]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    try:
        with open(tmp, "rb") as f:
            ok = run.returncode == 0 and f.read(5) == b"%PDF-"
    except OSError:
        ok = False
    if not ok:
        if os.path.exists(tmp):
            os.unlink(tmp)
        die("Chromium did not print %s: %s" % (html_path,
                                                 (run.stderr or "").strip()[-300:]))
    os.replace(tmp, pdf_path)


def main(argv):
    checking = len(argv) == 3 and argv[1] == "--check"
    if len(argv) != 2 and not checking:
        print("usage: tools/book.py [--check] OUT", file=sys.stderr)
        return 2
    out = argv[-1]
    docs = "docs"
    order = pages(docs)
    names = {name for name, _ in order}
    woven = []
    for name, markdown in order:
        body, title, heads = page_html(name, markdown, docs, names)
        woven.append((name, body, title, heads))
    sections = "".join('<section class="page" id="page-%s">\n%s</section>\n'
                       % (name, body) for name, body, _, _ in woven)
    # the introduction first, then the contents
    first = sections.index('<section class="page" id="page-', 1)
    book = document("Multi-head attention, step by step, in C",
                    sections[:first] + contents(woven) + sections[first:], "")
    book_path = os.path.join(out, "book.html")
    check(book_path, book)
    write(book_path, book)
    chapters = []
    for name, body, title, _ in woven:
        if not re.match(r"\d\d_", name):
            continue
        # alone, a link to another page of the book keeps its text only
        alone = re.sub(r'<a href="#(?!%s--)[^"]*">(.*?)</a>' % re.escape(name),
                       r"\1", body, flags=re.S)
        page = document(title, '<section class="page" id="page-%s">\n%s</section>\n'
                        % (name, alone), "")
        path = os.path.join(out, "chapters", name + ".html")
        check(path, page)
        write(path, page)
        chapters.append(path)
    browser = chromium()
    if checking:
        if browser:
            smallest = min(chapters, key=os.path.getsize)
            pdf(browser, smallest, smallest[:-5] + ".pdf")
            print("book: %s checked, and %s printed" % (book_path, smallest[:-5] + ".pdf"))
        else:
            print("book: %s checked; no Chromium here, so no PDF printed "
                  "(make book installs it)" % book_path)
        return 0
    if not browser:
        die("no Chromium to print with (make book installs it)")
    pdf(browser, book_path, os.path.join(out, "book.pdf"))
    for path in chapters:
        pdf(browser, path, path[:-5] + ".pdf")
    print("book: %s and %s, and %d chapters in %s (HTML and PDF)"
          % (book_path, os.path.join(out, "book.pdf"), len(chapters),
             os.path.join(out, "chapters")))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
