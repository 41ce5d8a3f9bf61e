#!/usr/bin/python3
"""tools/answer-leaks.py TEACHER HANDOUT: does the handout hold an answer?

The reference bodies are the bodies of the functions marked
"@exercise NAME (chapter NN)" in TEACHER/src/ (the teacher's tree).  Each
body is cut into statements (at ; { and }, its comments left out), each
statement into C tokens, with names and whitespace normalised: a name of
the body's own (a parameter or a local, any lowercase name that is not
called, not a member after . or ->, not a type) becomes V, a string
literal "", so that renaming the variables or rewording a message does
not hide a copy.  A statement is trivial, and not looked for, when it
has fewer than MIN_TOKENS tokens (`return 0;`, `*out = NULL;`,
`size_t p = d_model / num_heads;`) or computes nothing: an address into a tensor's data, or no arithmetic
and no call but to the bookkeeping every function does (checks and
messages, tracing, freeing, allocating the output).  The statement is
looked for, and each call in it with its arguments, a cast to a number
type and a unary & left out (`tensor_permute(split, SHAPE(0, 2, 1, 3),
out)` is the answer's `..., &heads)`).

Every file of HANDOUT is read as the same tokens (its comments too: an
answer written in a comment is still an answer), and each reference
statement is looked for as a run of whole tokens anywhere in it, also
inside a longer statement.  Each find is printed as

    FILE:LINE: NAME (chapter NN): V = V / V ...

and the exit status is 1 when there is any, 0 when there is none, 2 on
bad arguments.  Binary files (a NUL in their first 8 KiB) are skipped.
"""
import os
import re
import sys

MIN_TOKENS = 10
# calls that compute nothing of an answer: checks, messages, tracing,
# freeing, a shape's text
BOOKKEEPING = (r'(mha_fail\w*|(tensor_)?trace_\w+|check_\w+|alloc_\w+|tensor_alloc\w*|'
               r'tensor_free|tensor_shape_str|sizeof|[A-Z_]+)$')

TOKEN = re.compile(r'''
    (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*')
  | (?P<number>\d[\w.]*(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<punct>->|\+\+|--|<<=|>>=|<=|>=|==|!=|&&|\|\||[-+*/%&|^<>!=]=|<<|>>|\S)
''', re.S | re.X)

KEYWORDS = set('''
    auto break case char const continue default do double else enum extern
    float for goto if inline int long register restrict return short signed
    sizeof static struct switch typedef union unsigned void volatile while
    bool NULL
'''.split())


def tokens(text, comments):
    """(token, line) pairs of text; comments dropped, or their words kept."""
    out = []
    line, at = 1, 0
    for m in TOKEN.finditer(text):
        kind = m.lastgroup
        tok = m.group()
        line += text.count('\n', at, m.start())
        at = m.start()
        if kind == 'comment':
            if comments:
                inner = tok[2:-2] if tok.startswith('/*') else tok[2:]
                for t, l in tokens(inner, False):
                    out.append((t, line + l - 1))
        elif kind == 'string':
            out.append(('""', line))
        else:
            out.append((tok, line))
    return out


CASTS = ('long', 'int', 'double', 'size_t', 'unsigned', 'float')


def operand(t):
    return t in ('V', ')', ']') or bool(re.match(r'[A-Za-z_0-9]', t)) \
        and t not in KEYWORDS


def normalise(toks, types):
    """Names of a body's own become V (see the top of this file); a cast
    to a number type and a unary & are left out (`&heads` and `out`,
    `(long)n` and `n` name the same thing)."""
    kept = []
    i = 0
    while i < len(toks):
        t = toks[i][0]
        before = kept[-1][0] if kept else ''
        if t == '&' and not operand(before):
            i += 1
            continue
        if t == '(' and i + 2 < len(toks) and toks[i + 1][0] in CASTS \
                and toks[i + 2][0] == ')' and not operand(before):
            i += 3
            continue
        kept.append(toks[i])
        i += 1
    toks = kept
    out = []
    for i, (t, l) in enumerate(toks):
        if re.match(r'[A-Za-z_]', t) and t not in KEYWORDS and t not in types \
                and not t.isupper() and not t.endswith('_t'):
            after = toks[i + 1][0] if i + 1 < len(toks) else ''
            before = toks[i - 1][0] if i else ''
            if after != '(' and before not in ('.', '->'):
                t = 'V'
        out.append((t, l))
    return out


def typedef_names(root):
    names = set()
    for dirpath, _, files in os.walk(os.path.join(root, 'src')):
        for f in files:
            if f.endswith('.h'):
                with open(os.path.join(dirpath, f), errors='replace') as h:
                    text = h.read()
                names.update(re.findall(r'\}\s*(\w+)\s*;', text))
                names.update(re.findall(r'typedef\s[^;{]*?(\w+)\s*;', text))
    return names


def reference_bodies(root):
    """[(name, chapter, [statement tokens, ...])] of TEACHER's exercises."""
    found = []
    src = os.path.join(root, 'src')
    for dirpath, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith('.c'):
                continue
            with open(os.path.join(dirpath, f), errors='replace') as c:
                lines = c.read().split('\n')
            i = 0
            while i < len(lines):
                m = re.search(r'@exercise (\w+) \(chapter (\d+)\)', lines[i])
                i += 1
                if not m:
                    continue
                name, chapter = m.groups()
                # the definition below: a line at column 0 naming it, then
                # its body from the line "{" to the line "}"
                while i < len(lines) and not (re.match(r'[A-Za-z]', lines[i])
                                              and name + '(' in lines[i]):
                    i += 1
                while i < len(lines) and lines[i] != '{':
                    i += 1
                start = i
                while i < len(lines) and lines[i] != '}':
                    i += 1
                found.append((name, chapter, '\n'.join(lines[start + 1:i])))
    return found


def statements(toks):
    """A body's statements: split at ; (outside parentheses, so that a for
    loop's header stays whole), { and }."""
    stmt = []
    depth = 0
    for t, l in toks:
        depth += (t == '(') - (t == ')')
        if t in ('{', '}') or (t == ';' and depth <= 0):
            if stmt:
                yield stmt
            stmt = []
            depth = 0
        else:
            stmt.append((t, l))
    if stmt:
        yield stmt


def expressions(stmt):
    """A statement and the calls in it, f(...) with its arguments, each a
    tuple of tokens."""
    yield stmt
    for i in range(len(stmt) - 1):
        if stmt[i + 1] == '(' and re.match(r'[A-Za-z_]', stmt[i]) \
                and stmt[i] not in KEYWORDS:
            depth = 0
            for j in range(i + 1, len(stmt)):
                depth += (stmt[j] == '(') - (stmt[j] == ')')
                if depth == 0:
                    yield stmt[i:j + 1]
                    break


def trivial(stmt):
    """Too short, or computing nothing: no arithmetic and no call but to
    the bookkeeping every function does (BOOKKEEPING)."""
    if len(stmt) < MIN_TOKENS:
        return True
    # an address: a pointer into a tensor's data, (*y)->data + r * out
    if re.fullmatch(r'(const )?\w+ \* V = ([-+*()V\d ]|-> data )+',
                    ' '.join(stmt)):
        return True
    for i, t in enumerate(stmt):
        before = stmt[i - 1] if i else ''
        operand = before in ('V', ')', ']') or re.match(r'\d', before)
        if t in ('+', '/', '%', '?', '+=', '-=', '*=', '/=', '%=', '<<', '>>') \
                or (t in ('*', '-') and operand):
            return False
        if i + 1 < len(stmt) and stmt[i + 1] == '(' and \
                re.match(r'[A-Za-z_]', t) and t not in KEYWORDS and \
                not re.match(BOOKKEEPING, t):
            return False
    return True


def main(argv):
    if len(argv) != 3 or not os.path.isdir(argv[1]) or not os.path.isdir(argv[2]):
        print('usage: tools/answer-leaks.py TEACHER HANDOUT (two folders)',
              file=sys.stderr)
        return 2
    teacher, handout = argv[1], argv[2]
    types = typedef_names(teacher)
    wanted = {}  # statement (tuple of tokens) -> "NAME (chapter NN)"
    for name, chapter, body in reference_bodies(teacher):
        toks = normalise(tokens(body, False), types)
        for stmt in statements(toks):
            for key in expressions(tuple(t for t, _ in stmt)):
                if not trivial(key):
                    wanted.setdefault(key, '%s (chapter %s)' % (name, chapter))
    if not wanted:
        print('answer-leaks: %s/src has no @exercise bodies' % teacher,
              file=sys.stderr)
        return 2
    # index the statements by their first token for the scan
    first = {}
    for key in wanted:
        first.setdefault(key[0], []).append(key)
    leaks = 0
    for dirpath, dirs, files in os.walk(handout):
        dirs[:] = sorted(d for d in dirs if d not in ('.git', 'build'))
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, 'rb') as fh:
                data = fh.read()
            if b'\0' in data[:8192]:
                continue
            toks = normalise(tokens(data.decode('utf-8', 'replace'), True), types)
            words = [t for t, _ in toks]
            told = set()
            for i, t in enumerate(words):
                for key in first.get(t, ()):
                    if tuple(words[i:i + len(key)]) == key and key not in told:
                        told.add(key)
                        leaks += 1
                        print('%s:%d: %s: %s' % (os.path.relpath(path, handout),
                                                 toks[i][1], wanted[key],
                                                 ' '.join(key)))
    return 1 if leaks else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
