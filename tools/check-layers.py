#!/usr/bin/env python3
"""tools/check-layers.py [SRC]: the layers of src/ (default ./src) and the
includes between its modules.

A module is one folder/name of src/ (its .c and .h together, and its
private header name_internal.h when it has one), and a layer is its
folder.  Each layer may include the layers below it in LAYERS and
nothing else; no two modules may include each other, directly or through
others; and no source file may be longer than MAX_LINES lines.  Prints
what breaks a rule, one line each, and exits 1; prints one line and exits
0 when all hold."""
import os
import re
import sys

# each layer and the layers it may include, bottom-up (README's map)
LAYERS = {
    'base': [],
    'trace': ['base'],
    'tensor': ['base', 'trace'],
    'nn': ['base', 'trace', 'tensor'],
    'fast': ['base', 'trace', 'tensor', 'nn'],
    'train': ['base', 'trace', 'tensor', 'nn'],
    'io': ['base', 'trace', 'tensor'],
    'plot': ['base', 'trace', 'tensor', 'io'],
    'cli': ['base', 'trace', 'tensor', 'nn', 'fast', 'train', 'io', 'plot'],
}
MAX_LINES = 700
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def module_of(stem):
    """The module a file stem belongs to: name for name_internal."""
    return stem[:-len('_internal')] if stem.endswith('_internal') else stem


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else 'src'
    problems = []
    graph = {}
    for layer in sorted(os.listdir(src)):
        folder = os.path.join(src, layer)
        if not os.path.isdir(folder):
            continue
        if layer not in LAYERS:
            problems.append('%s: a folder that is no layer (tools/check-layers.py)' % folder)
            continue
        for name in sorted(os.listdir(folder)):
            stem, ext = os.path.splitext(name)
            if ext not in ('.c', '.h'):
                continue
            path = os.path.join(folder, name)
            with open(path) as f:
                text = f.read()
            lines = text.count('\n')
            if ext == '.c' and lines > MAX_LINES:
                problems.append('%s: %d lines, more than %d' % (path, lines, MAX_LINES))
            module = layer + '/' + module_of(stem)
            deps = graph.setdefault(module, set())
            for target in INCLUDE.findall(text):
                if '/' not in target:  # its own folder's header
                    target = layer + '/' + target
                to = os.path.splitext(os.path.normpath(target))[0]
                to = os.path.dirname(to) + '/' + module_of(os.path.basename(to))
                if to == module:
                    continue
                to_layer = to.split('/')[0]
                if to_layer != layer and to_layer not in LAYERS[layer]:
                    problems.append('%s includes "%s": layer %s may include only %s'
                                    % (path, target, layer,
                                       ', '.join(LAYERS[layer]) or 'nothing'))
                deps.add(to)
    # cycles: depth-first search, reporting each cycle once by its members
    state, seen_cycles = {}, set()

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for d in sorted(graph.get(m, ())):
            if d not in graph:
                continue
            if state.get(d) == 1:
                cycle = stack[stack.index(d):] + [d]
                key = frozenset(cycle)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    problems.append('include cycle: ' + ' -> '.join(cycle))
            elif d not in state:
                visit(d, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    for p in problems:
        print('check-layers: ' + p)
    if problems:
        return 1
    print('check-layers: %d modules in %d layers, no include cycle, every include '
          'downwards, no source over %d lines' %
          (len(graph), len({m.split('/')[0] for m in graph}), MAX_LINES))
    return 0


if __name__ == '__main__':
    sys.exit(main())
