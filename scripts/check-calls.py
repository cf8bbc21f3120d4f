#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""No call cycle between the daemon's files (issue 34): a file's functions call another file's,
and that file's (directly or further on) call back. A family, x.c and the x-*.c that include
x-internal.h (one unit of code split by what it does: sandbox.c with sandbox-init.c), counts as
one file.

    scripts/check-calls.py [DAEMON_DIR]     (default: the daemon/ next to this script)

Exit 0 and print nothing when there is no cycle; else one line per cycle, exit 1. Functions are
found by their definitions at the start of a line ("type name(args) {" over one or more lines),
calls by "name(" in a body; static functions are their file's own. make check runs it through
tests/t-layers.sh, which also plants a cycle."""
import os
import re
import sys

DEF = re.compile(r"^(?!static\b|_\w+\s+static\b|_printf_\(\d+, \d+\)\s+static\b)[A-Za-z_][\w \*]*?\b(\w+)\s*\(([^;{]*?)\)\s*(?:_\w+_\s*)?\{", re.M | re.S)
STATIC_DEF = re.compile(r"^(?:(?:_\w+|__attribute__\(\(.*?\)\))\s+|\w+\(\d+, \d+\)\s+)*static\b[\w \*]*?\b(\w+)\s*\(", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
INTERNAL = re.compile(r'^\s*#\s*include\s*"([\w-]+)-internal\.h"', re.M)
COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')


def unit_of(rel, text):
    stem = os.path.basename(rel)[:-2]
    m = INTERNAL.search(text)
    if m and (stem == m.group(1) or stem.startswith(m.group(1) + "-")):
        return os.path.join(os.path.dirname(rel), m.group(1))
    return rel[:-2]


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    daemon = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "daemon")
    texts, units = {}, {}
    for folder in sorted(os.listdir(daemon)):
        d = os.path.join(daemon, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".c"):
                rel = f"{folder}/{name}"
                with open(os.path.join(d, name), encoding="utf-8") as f:
                    raw = f.read()
                units[rel] = unit_of(rel, raw)
                texts[rel] = STRING.sub('""', COMMENT.sub(" ", raw))
    owner = {}  # function -> unit that defines it (non-static)
    for rel, text in texts.items():
        for m in DEF.finditer(text):
            if m.group(1) not in ("if", "for", "while", "switch", "return", "sizeof"):
                owner.setdefault(m.group(1), units[rel])
    graph = {}
    for rel, text in texts.items():
        own = set(STATIC_DEF.findall(text))
        u = units[rel]
        graph.setdefault(u, set())
        for name in CALL.findall(text):
            if name in own:
                continue
            v = owner.get(name)
            if v and v != u:
                graph[u].add(v)
    # Tarjan's strongly connected components.
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            strong(v)
    for comp in sorted(comps):
        print(f"call cycle of {len(comp)} files: {' '.join(comp)}")
    return 1 if comps else 0


if __name__ == "__main__":
    sys.exit(main())
