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
messages, tracing, freeing, allocating the output), or is a function's
trace line (RECORD, SCOPE and their _OF forms).  The statement is
looked for, and each call in it with its arguments, a cast to a number
type and a unary & left out (`tensor_permute(split, SHAPE(0, 2, 1, 3),
out)` is the answer's `..., &heads)`).

Every file of HANDOUT is read as the same tokens (its comments too: an
answer written in a comment is still an answer), and each reference
statement is looked for as a run of whole tokens anywhere in it, also
inside a longer statement.  Each find is printed as

    FILE:LINE: NAME (chapter NN): V = V / V ...

A formula of a body is looked for as well, whatever it is written
around: two statements made one, other names, a comment's notation, a
test's expected value (see "formulas" below); each find is printed as

    FILE:LINE: NAME (chapter NN): formula (head / (num_heads / kv_heads))

and the exit status is 1 when there is any, 0 when there is none, 2 on
bad arguments.  Binary files (a NUL in their first 8 KiB) are skipped.
"""
import os
import re
import sys

MIN_TOKENS = 10
# calls that compute nothing of an answer: checks, messages, tracing,
# freeing, a shape's text
BOOKKEEPING = (r'(mha_fail\w*|(tensor_)?trace_\w+|check_\w+|\w+_check|alloc_\w+|tensor_alloc\w*|'
               r'tensor_free|tensor_shape_str|sizeof|snprintf|[A-Z_]+)$')

BOOKKEPT = re.compile(BOOKKEEPING)
TRACE_LINES = ('RECORD', 'RECORD_OF', 'SCOPE', 'SCOPE_OF')
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
    toks = strip_casts(toks)
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
    # a function's trace line (RECORD, SCOPE ...): its arguments only
    # name the step, whatever they compute to do so
    if stmt[0] in TRACE_LINES:
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


# --- formulas: a reference's expressions as trees -------------------------
#
# A statement copied whole is found above; a formula is not always
# copied whole.  A spec may write a body's two statements as one
# expression (`block = table[pos / block_size]; *slot = block *
# block_size + pos % block_size` as `table[pos / block_size] *
# block_size + pos % block_size`), or in a comment's notation
# (`2^(-8(k+1)/n)` for pow(2.0, -8.0 * (head + 1) / P)); a test may
# compute its expected value with the body's expression around other
# names (`xs[j] / sqrt(sum / d + eps) * w[j]`).  So each expression of
# a reference body is also a tree (class Parser): a name is a leaf
# whatever it is called; casts, dereferences, members and element
# access with plain indices (t[i], TENSOR_AT(t, i, j), x->data[r]) are
# leaves too; pow(a, b), exp2(b) and a^b are one power, x * x is x^2;
# a number is written without a trailing .0.
#
# The formulas of a body are its whole expressions: a statement, the
# right side of an assignment, a call's argument; not a comparison (a
# refusal's condition is the contract), not a check's message, not the
# definition of a local assigned once (`size_t block = ...`), which is
# put in its place in the others, and left as it is: every combination
# is a formula.  Sums and products of names, 0 and 1 (index arithmetic:
# `(b * h + i) * row + j`) and a division by a name alone are not
# formulas of their own (function specific); nor is an expression of
# fewer than SPEC_OPERATIONS operations (arithmetic, a call, a power, a
# computed index, a choice).  A leaf that is a parameter or such a
# local matches a name; one that is an accumulator or a loop's counter
# (`mean_square +=`, `pairs +=`) matches any expression, since what it
# sums may be written out, unless the formula is small (fewer than 3
# operations).  + and * match either way round; a part of a longer sum
# or product (a * b in a * b * c) is not looked at alone.
#
# Where: a formula of at least WIDE_OPERATIONS operations anywhere in the
# handout; the others in the places that speak of its exercise: the
# comment above its definition and above each declaration (its spec),
# its suite in tests/test_exercises.c (the code, which computes the
# expected values, its comments and its hints), and its chapter
# (chapters/NN_*.c, docs/NN_*.md).  Comments, strings and pages are read
# as prose: a block comment's leading stars dropped, markdown's
# *emphasis* too, a LaTeX group's braces as parentheses, \frac, \sqrt
# and \cdot as what they mean, implicit products (`8(k+1)`, `2P`,
# `x0 cos(a)`), a word before a parenthesis a name when what follows is
# no list of arguments, printf's conversions left out.
WIDE_OPERATIONS = 4
SPEC_OPERATIONS = 2

BINARY = {'=': 1, '+=': 1, '-=': 1, '*=': 1, '/=': 1, '%=': 1,
          '?': 2, '||': 3, '&&': 4, '|': 5, '&': 7, '==': 8, '!=': 8,
          '<': 9, '<=': 9, '>': 9, '>=': 9, '<<': 10, '>>': 10,
          '+': 11, '-': 11, '*': 12, '/': 12, '%': 12, '^': 13}
RIGHT = {'=', '+=', '-=', '*=', '/=', '%=', '?', '^'}
ARITHMETIC = {'+', '-', '*', '/', '%', '<<', '>>'}
ASSIGN = {'=', '+=', '-=', '*=', '/=', '%='}
NUMBER = re.compile(r'(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?[uUlLfF]*')
PROSE_TOKEN = re.compile(r'''
    (?P<number>(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)
  | (?P<name>[A-Za-z_]\w*)
  | (?P<punct>->|\+\+|--|<<=|>>=|<=|>=|==|!=|&&|\|\||[-+*/%&|^<>!=]=|<<|>>|\S)
''', re.X)
LATEX = {'cdot': '*', 'times': '*', 'bmod': '%', 'mod': '%', 'lfloor': '(',
         'rfloor': ')', 'lceil': '(', 'rceil': ')', 'sqrt': 'sqrt'}
MATH = {'cos', 'sin', 'tan', 'exp', 'log', 'sqrt', 'pow', 'exp2'}
PRINTF = re.compile(r'%[-+ #0]*(?:\d+|\*)?(?:\.(?:\d+|\*))?'
                    r'(?:hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsp%]')


def prose_tokens(text, line):
    """(token, line) pairs of a comment's, a message's or a page's words,
    read as formulas are written in prose (see above)."""
    text = re.sub(r'(?m)^[ \t]*\*(?![*/])', ' ', text)  # a comment's stars
    out = []
    braces = {'{': '(', '}': ')'}
    for n, row in enumerate(text.split('\n'), line):
        for m in PROSE_TOKEN.finditer(row):
            at = m.start()
            t = m.group()
            glued = at > 0 and not row[at - 1].isspace()
            out.append((braces.get(t, t), n, glued))
    # markdown's *emphasis*: a star glued to a word on one side only
    out = [o for i, o in enumerate(out)
           if not (o[0] == '*' and
                   o[2] != (i + 1 < len(out) and out[i + 1][2]))]
    kept = []
    i = 0
    while i < len(out):
        t, l, glued = out[i]
        if t == '\\' and i + 1 < len(out) and is_name(out[i + 1][0]):
            w = out[i + 1][0]
            if w == 'frac':
                kept.append(('\\frac', l, glued))
            elif w in LATEX:
                kept.append((LATEX[w], l, glued))
            elif w not in ('left', 'right', 'big', 'Big', 'quad', 'qquad'):
                kept.append((w, l, glued))  # \alpha, \cos: a name
            i += 2
            continue
        if t != '\\':
            kept.append(out[i])
        i += 1
    return kept


def code_and_prose(text):
    """A C file's tokens: its code (a string literal as ""), and each of
    its comments and runs of string literals (a message, a hint) as
    prose tokens.  Returns (code, [prose, ...])."""
    code, prose = [], []
    line, at = 1, 0
    strings, sline = [], 0
    for m in TOKEN.finditer(text):
        kind, tok = m.lastgroup, m.group()
        line += text.count('\n', at, m.start())
        at = m.start()
        if kind == 'string' and tok.startswith('"'):
            if not strings:
                sline = line
            strings.append(PRINTF.sub(' ', tok[1:-1]).replace('\\n', '\n'))
            code.append(('""', line))
            continue
        if kind == 'punct' and tok == '\\' and strings:
            continue  # a macro going on to its next line
        if strings:
            prose.append(prose_tokens(''.join(strings), sline))
            strings = []
        if kind == 'comment':
            inner = tok[2:-2] if tok.startswith('/*') else tok[2:]
            prose.append(prose_tokens(inner, line))
        else:
            code.append((tok, line))
    if strings:
        prose.append(prose_tokens(''.join(strings), sline))
    return code, prose


NAME = re.compile(r'[A-Za-z_]\w*$')


def is_name(t):
    return bool(NAME.match(t))


class Parser:
    """C's expressions over a list of (token, line), by precedence; in
    prose, a^b is a power and a product may go unwritten.  A tree is a
    tuple (kind, line, ...): ('V', line, name, loose) a leaf, ('N', line,
    text) a number, ('K', line, name) a constant or a type, ('S', line)
    a string, ('B', line, op, a, b), ('U', line, op, a), ('C', line,
    function, (args...)), ('I', line, base, (indices...)), ('T', line,
    condition, a, b) and ('P', line, base, exponent)."""

    def __init__(self, toks, prose, types):
        self.t = toks
        self.w = [t[0] for t in toks] + ['', '']
        self.prose = prose
        self.types = types

    def tok(self, i):
        return self.w[i] if i >= 0 else ''

    def expr(self, i, minprec=0, depth=0):
        if depth > 80:
            return None, i
        left, i = self.unary(i, depth)
        if left is None:
            return None, i
        while i < len(self.t):
            t = self.tok(i)
            implicit = False
            if t in BINARY:
                op, prec = t, BINARY[t]
            elif self.prose and self.implicit(i):
                op, prec, implicit = '*', 12, True
            else:
                break
            if prec < minprec:
                break
            if op == '?':
                mid, j = self.expr(i + 1, 0, depth + 1)
                if mid is None or self.tok(j) != ':':
                    break
                right, j = self.expr(j + 1, 2, depth + 1)
                if right is None:
                    break
                left = ('T', left[1], left, mid, right)
                i = j
                continue
            nxt = prec if op in RIGHT else prec + 1
            right, j = self.expr(i if implicit else i + 1, nxt, depth + 1)
            if right is None:
                break
            left = ('B', left[1], op, left, right)
            i = j
        return left, i

    def implicit(self, i):
        """In prose, 8(k+1), 2P, (a)(b), x0 cos(a): a product unwritten
        (not 2 heads, nor a path's 20_multihead)."""
        before, t = self.tok(i - 1), self.tok(i)
        if t in MATH and self.tok(i + 1) == '(' and \
                (is_name(before) or NUMBER.fullmatch(before) or before == ')'):
            return True
        if not (NUMBER.fullmatch(before) or before == ')'):
            return False
        return t in ('(', '\\frac') or (
            is_name(t) and t not in KEYWORDS and not t.startswith('_') and
            len(self.t[i]) > 2 and self.t[i][2])

    def unary(self, i, depth):
        t = self.tok(i)
        if t in ('-', '+', '!', '~', '*', '&'):
            a, j = self.unary(i + 1, depth + 1)
            if a is None:
                return None, i
            return ('U', self.t[i][1], t, a), j
        if t in ('++', '--'):
            return self.unary(i + 1, depth + 1)
        return self.postfix(i, depth)

    def args(self, i, depth):
        """The arguments from the ( at i to its ): (list, next), or None."""
        out = []
        j = i + 1
        if self.tok(j) == ')':
            return out, j + 1
        while True:
            a, j = self.expr(j, 2, depth + 1)
            if a is None:
                return None, i
            out.append(a)
            if self.tok(j) == ',':
                j += 1
            elif self.tok(j) == ')':
                return out, j + 1
            else:
                return None, i

    def primary(self, i, depth):
        if i >= len(self.t):
            return None, i
        t, line = self.t[i][0], self.t[i][1]
        if t == '\\frac' and self.tok(i + 1) == '(':
            a, j = self.primary(i + 1, depth + 1)
            b, k = self.primary(j, depth + 1) if a is not None else (None, j)
            if b is None:
                return None, i
            return ('B', line, '/', a, b), k
        if NUMBER.fullmatch(t):
            return ('N', line, t), i + 1
        if t == '""':
            return ('S', line), i + 1
        if t == '(':
            a, j = self.expr(i + 1, 0, depth + 1)
            if a is None or self.tok(j) != ')':
                return None, i
            return a, j + 1
        if is_name(t) and (t not in KEYWORDS or t == 'sizeof'):
            if self.tok(i + 1) == '(' and t not in self.types:
                args, j = self.args(i + 1, depth)
                if args is not None:
                    return ('C', line, t, tuple(args)), j
                if not self.prose:
                    return None, i
                # prose: "pos % block_size (the slot ...)" is no call
            if t in self.types or t.endswith('_t') or \
                    (t.isupper() and len(t) > 1):
                return ('K', line, t), i + 1
            return ('V', line, t, False), i + 1
        return None, i

    def postfix(self, i, depth):
        a, i = self.primary(i, depth)
        while a is not None and i < len(self.t):
            t = self.tok(i)
            if t == '[':
                idx, j = self.expr(i + 1, 0, depth + 1)
                if idx is None or self.tok(j) != ']':
                    break
                a = ('I', a[1], a, (idx,))
                i = j + 1
            elif t in ('->', '.') and is_name(self.tok(i + 1)) and \
                    (t == '->' or not self.prose):
                a = ('V', a[1], show(a) + t + self.tok(i + 1), False)
                i += 2
            elif t in ('++', '--') and not self.prose:
                i += 1
            else:
                break
        return a, i


def children(tree):
    """The subtrees right below a tree's root."""
    k = tree[0]
    if k == 'B':
        return (tree[3], tree[4])
    if k == 'U':
        return (tree[3],)
    if k == 'C':
        return tree[3]
    if k == 'I':
        return (tree[2],) + tree[3]
    if k in ('T', 'P'):
        return tree[2:]
    return ()


def rebuild(tree, kids):
    """tree with its children replaced by kids (children's order)."""
    k = tree[0]
    if k == 'B':
        return tree[:3] + tuple(kids)
    if k == 'U':
        return tree[:3] + (kids[0],)
    if k == 'C':
        return tree[:3] + (tuple(kids),)
    if k == 'I':
        return tree[:2] + (kids[0], tuple(kids[1:]))
    if k in ('T', 'P'):
        return tree[:2] + tuple(kids)
    return tree


def key(tree, names=False):
    """What is compared of a tree: no lines; with names, its leaves'."""
    k = tree[0]
    if k == 'V':
        return ('V', tree[2] if names else tree[3])
    if k in ('N', 'K'):
        return (k, tree[2])
    head = (k, tree[2]) if k in ('B', 'U', 'C') else (k,)
    return head + tuple(key(c, names) for c in children(tree))


def show(tree):
    """A tree as text, in the names it was written with."""
    k = tree[0]
    if k in ('V', 'N', 'K'):
        return tree[2]
    if k == 'S':
        return '""'
    if k == 'B':
        return '(%s %s %s)' % (show(tree[3]), tree[2], show(tree[4]))
    if k == 'U':
        return tree[2] + show(tree[3])
    if k == 'C':
        return '%s(%s)' % (tree[2], ', '.join(show(a) for a in tree[3]))
    if k == 'I':
        return '%s[%s]' % (show(tree[2]), ', '.join(show(a) for a in tree[3]))
    if k == 'T':
        return '(%s ? %s : %s)' % tuple(show(a) for a in tree[2:])
    return '%s^%s' % (show(tree[2]), show(tree[3]))


def leaf(tree):
    return tree[0] in ('V', 'N', 'K', 'S')


def simplify(tree):
    """The forms of one formula made one (see the top of this part)."""
    k, line = tree[0], tree[1]
    if k == 'N':
        t = re.sub(r'[uUlLfF]+$', '', tree[2])
        if '.' in t and 'e' not in t.lower():
            t = t.rstrip('0').rstrip('.') or '0'
        return ('N', line, t)
    if leaf(tree):
        return tree
    kids = tuple(simplify(c) for c in children(tree))
    if k == 'B' and tree[2] == '^':
        return ('P', line) + kids
    if k == 'B' and tree[2] == '*' and kids[0][0] == 'V' and \
            key(kids[0], True) == key(kids[1], True):
        return ('P', line, kids[0], ('N', line, '2'))
    if k == 'U':
        if tree[2] in ('*', '&', '+'):
            return kids[0]
        if tree[2] == '-' and kids[0][0] == 'N':
            return ('N', line, '-' + kids[0][2])
    if k == 'C':
        if tree[2] == 'pow' and len(kids) == 2:
            return ('P', line) + kids
        if tree[2] == 'exp2' and len(kids) == 1:
            return ('P', line, ('N', line, '2'), kids[0])
        if tree[2] in ('TENSOR_AT', 'tensor_at') and kids:
            return simplify(('I', line, kids[0], kids[1:]))
    if k == 'I' and all(leaf(c) for c in kids):
        return ('V', line, show(('I', line, kids[0], kids[1:])), False)
    return rebuild(tree, kids)


def subtrees(tree):
    yield tree
    for c in children(tree):
        yield from subtrees(c)


def whole_subtrees(tree, parent=None):
    """The subtrees of a tree but a part of a longer sum or product (in
    a * b * c, a * b is not a formula of its own)."""
    if not (parent and tree[0] == 'B' and parent[0] == 'B' and
            tree[2] == parent[2] and tree[2] in ('+', '*')):
        yield tree
    for c in children(tree):
        yield from whole_subtrees(c, tree)


def operations(tree, counts=None):
    """A formula's operations: arithmetic, calls, powers, computed
    indices, choices (each subtree's count into counts, by id, if
    given)."""
    k = tree[0]
    n = sum(operations(c, counts) for c in children(tree))
    if k in ('U', 'I', 'T', 'P') or \
            (k == 'C' and not BOOKKEPT.match(tree[2])) or \
            (k == 'B' and tree[2] in ARITHMETIC):
        n += 1
    if counts is not None:
        counts[id(tree)] = n
    return n


def specific(tree):
    """Is a formula more than index arithmetic or a plain product (sums
    and products of names, 0 and 1, a division by a name): a call, a
    power, a remainder, a choice, an index computed, a number of its own,
    a division by an expression?"""
    for t in subtrees(tree):
        k = t[0]
        if k in ('C', 'P', 'T', 'I') or (k == 'N' and t[2] not in ('0', '1')):
            return True
        if k == 'B' and (t[2] in ('%', '<<', '>>') or
                         (t[2] == '/' and not leaf(t[4]))):
            return True
    return False


def matches(p, c):
    """Has candidate c the form of pattern p (see the top)?"""
    k = p[0]
    if k == 'V':
        return p[3] or c[0] == 'V'
    if k != c[0]:
        return False
    if k in ('N', 'K'):
        return p[2] == c[2]
    if k in ('B', 'U', 'C') and p[2] != c[2]:
        return False
    pk, ck = children(p), children(c)
    if len(pk) != len(ck):
        return False
    if all(matches(a, b) for a, b in zip(pk, ck)):
        return True
    return k == 'B' and p[2] in ('+', '*') and matches(pk[0], ck[1]) and \
        matches(pk[1], ck[0])


def tightened(tree):
    """The tree with every leaf matching leaves only."""
    if tree[0] == 'V':
        return tree[:3] + (False,)
    if leaf(tree):
        return tree
    return rebuild(tree, tuple(tightened(c) for c in children(tree)))


def parse_all(toks, prose, types):
    """Every expression of a token list, simplified, parsed greedily from
    left to right (a subtree of one is an expression too)."""
    parser = Parser(toks, prose, types)
    words = [t[0] for t in toks] + ['']
    follows = set(BINARY) | {'(', '[', '->', '.', '++', '--'}
    i = 0
    while i < len(toks):
        # a word or a number followed by nothing that can go on is a leaf
        # alone: no formula starts there (most of a page's words)
        w, after = words[i], words[i + 1]
        product = prose and (after in MATH or
                             (w[:1].isdigit() and after[:1].isalpha()))
        if after not in follows and (w[:1].isalnum() or w[:1] == '_') \
                and not product:
            i += 1
            continue
        tree, j = parser.expr(i)
        if tree is not None and j > i:
            yield simplify(tree)
            i = j
        else:
            i += 1


def strip_casts(toks):
    """(token, line, ...) pairs with a cast to a number type and a unary &
    left out."""
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
    return kept


def formulas(body, types):
    """The formulas of a reference body: simplified trees, each leaf
    loose or not, each once-assigned local put in its place or not (see
    the top); none inside a bookkeeping call (a check's message)."""
    code = strip_casts(tokens(body, False))
    trees = list(parse_all(code, False, types))
    # a name assigned once with = stands for its expression; one changed
    # again (+=, ++, a second =) is an accumulator or a counter
    changed, defs = {}, {}
    for t in trees:
        for s in subtrees(t):
            if s[0] == 'B' and s[2] in ASSIGN and s[3][0] == 'V':
                name = s[3][2]
                again = 1 if s[2] == '=' else 2
                changed[name] = changed.get(name, 0) + again
                defs[name] = s[4]
    words = [t for t, _ in code]
    for i, t in enumerate(words):
        if t in ('++', '--'):
            for n in words[max(i - 1, 0):i + 2:2]:
                changed[n] = changed.get(n, 0) + 2
    # (an output, *slot = ..., is assigned once and never read)
    local = {n: d for n, d in defs.items() if changed[n] == 1 and
             is_name(n) and words.count(n) > 1}
    loose = {n for n, c in changed.items() if c > 1 and is_name(n)}

    def mark(tree):
        if tree[0] == 'V':
            return tree[:3] + (tree[2] in loose,)
        if leaf(tree):
            return tree
        return rebuild(tree, tuple(mark(c) for c in children(tree)))

    def variants(tree, depth=0):
        if tree[0] == 'V':
            out = [tree]
            if tree[2] in local and depth < 4:
                out += variants(mark(local[tree[2]]), depth + 1)
            return out
        if leaf(tree):
            return [tree]
        out = [()]
        for c in children(tree):
            out = [o + (v,) for o in out for v in variants(c, depth)][:64]
        return [rebuild(tree, o) for o in out]

    def wholes(tree, whole=True):
        """The whole expressions of a statement: the statement, an
        assignment's right side (a local's stands in its uses instead),
        a call's arguments; not a comparison's sides, nor a check's
        message."""
        k = tree[0]
        if k == 'C' and BOOKKEPT.match(tree[2]):
            return
        if k == 'B' and tree[2] in ASSIGN:
            yield from wholes(tree[3], False)
            yield from wholes(tree[4], not (tree[3][0] == 'V' and
                                            tree[3][2] in local))
            return
        if k == 'B' and tree[2] not in ARITHMETIC:
            whole = False
        if whole:
            yield tree
        for c in children(tree):
            yield from wholes(c, k == 'C')

    def bookkept(tree):
        """A check's or an allocation's call, a condition: no formula."""
        return any((t[0] == 'C' and BOOKKEPT.match(t[2])) or
                   (t[0] == 'U' and t[2] == '!') or
                   (t[0] == 'B' and t[2] not in ARITHMETIC)
                   for t in subtrees(tree))

    found = {}
    for t in trees:
        for s in wholes(mark(t)):
            for v in variants(s):
                v = simplify(v)
                if operations(v) < SPEC_OPERATIONS or not specific(v) or \
                        bookkept(v):
                    continue
                if operations(v) < 3:
                    v = tightened(v)  # a small formula: every leaf a leaf
                found.setdefault(key(v), v)
    return list(found.values())


def spec_regions(handout, exercises):
    """The places that speak of each exercise (see the top): {name:
    [(path in handout, tokens, prose?)]}."""
    def read(rel):
        path = os.path.join(handout, rel)
        if not os.path.isfile(path):
            return ''
        with open(path, errors='replace') as f:
            return f.read()

    sources = []
    for dirpath, _, files in os.walk(os.path.join(handout, 'src')):
        for f in sorted(files):
            if f.endswith(('.h', '.c')):
                sources.append(
                    os.path.relpath(os.path.join(dirpath, f), handout))
    sources.sort()
    tests = read('tests/test_exercises.c')
    regions = {}
    for name, chapter in exercises:
        parts = []
        # the comment right above its definition and its declarations
        for rel in sources:
            text = read(rel)
            for m in re.finditer(r'(?m)^[A-Za-z][^;{}()]*\b%s\(' % name, text):
                above = text[:m.start()].rstrip()
                if above.endswith('*/') and '/*' in above:
                    begin = above.rfind('/*')
                    line = above.count('\n', 0, begin) + 1
                    parts.append((rel, prose_tokens(above[begin + 2:-2], line),
                                  True))
        # its suite in tests/test_exercises.c
        m = re.search(r'(?m)^/\* --- ex_%s \(' % name, tests)
        if m:
            nxt = re.search(r'(?m)^/\* --- ', tests[m.end():])
            stop = m.end() + nxt.start() if nxt else len(tests)
            code, prose = code_and_prose(
                '\n' * tests.count('\n', 0, m.start()) + tests[m.start():stop])
            parts.append(('tests/test_exercises.c', code, False))
            parts += [('tests/test_exercises.c', p, True) for p in prose]
        # its chapter: the program's comments and messages, its page
        for folder, ext in (('chapters', '.c'), ('docs', '.md')):
            where = os.path.join(handout, folder)
            for f in sorted(os.listdir(where)) if os.path.isdir(where) else ():
                if not (f.startswith(chapter + '_') and f.endswith(ext)):
                    continue
                rel = os.path.join(folder, f)
                if ext == '.md':
                    parts.append((rel, prose_tokens(read(rel), 1), True))
                else:
                    code, prose = code_and_prose(read(rel))
                    parts.append((rel, code, False))
                    parts += [(rel, p, True) for p in prose]
        regions[name] = parts
    return regions


def formula_leaks(handout, types, bodies, report):
    """Report each formula of a reference body found in the handout (see
    the top); return how many."""
    patterns = {name: formulas(body, types) for name, _, body in bodies}
    chapters = {name: chapter for name, chapter, _ in bodies}
    told = set()

    def look(rel, toks, prose, wanted, least):
        if not prose:
            toks = strip_casts(toks)
        for tree in parse_all(toks, prose, types):
            if operations(tree, counts := {}) < least:
                continue
            for s in whole_subtrees(tree):
                if s[0] == 'B' and s[2] not in ARITHMETIC:
                    continue
                ops = counts[id(s)]
                if ops < least:
                    continue
                for name, p, need in wanted:
                    if need <= ops and matches(p, s):
                        if (rel, s[1], name) not in told:
                            told.add((rel, s[1], name))
                            report('%s:%d: %s (chapter %s): formula %s' % (
                                rel, s[1], name, chapters[name], show(s)))
                        break

    # anywhere: the larger formulas
    wide = [(name, p, operations(p))
            for name, ps in patterns.items() for p in ps
            if operations(p) >= WIDE_OPERATIONS]
    for path, text in handout_texts(handout):
        rel = os.path.relpath(path, handout)
        if path.endswith(('.c', '.h')):
            code, prose = code_and_prose(text)
            look(rel, code, False, wide, WIDE_OPERATIONS)
            for p in prose:
                look(rel, p, True, wide, WIDE_OPERATIONS)
        else:
            look(rel, prose_tokens(text, 1), True, wide, WIDE_OPERATIONS)
    # where its exercise is spoken of: the smaller formulas too
    regions = spec_regions(handout, [(n, c) for n, c, _ in bodies])
    for name, parts in regions.items():
        wanted = [(name, p, operations(p)) for p in patterns[name]]
        for rel, toks, prose in parts:
            look(rel, toks, prose, wanted, SPEC_OPERATIONS)
    return len(told)


def handout_texts(handout):
    """(path, text) of every file of HANDOUT but .git and build, in order;
    symbolic links and binary files (a NUL in their first 8 KiB) left out."""
    for dirpath, dirs, files in os.walk(handout):
        dirs[:] = sorted(d for d in dirs if d not in ('.git', 'build'))
        for f in sorted(files):
            path = os.path.join(dirpath, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, 'rb') as fh:
                data = fh.read()
            if b'\0' not in data[:8192]:
                yield path, data.decode('utf-8', 'replace')


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
    for path, text in handout_texts(handout):
        toks = normalise(tokens(text, True), types)
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
    leaks += formula_leaks(handout, types, reference_bodies(teacher),
                           print)
    return 1 if leaks else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
