#!/usr/bin/python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""The daemon's layer rules (docs/architecture.md, "Module map"), checked on its #include lines.

    scripts/check-layers.py [DAEMON_DIR]     (default: the daemon/ next to this script)

Exit 0 and print nothing when every rule holds; otherwise print one line per broken rule and
exit 1. make check runs it through tests/t-layers.sh, which also shows that it fails on a wrong
include. The rules:

 1. Folders are layers, lowest first: exec, core, host, sandbox, server. A file includes headers
    of its own folder and of lower folders only (and lib/, which is below them all).
 2. exec/ runs after clone and vfork and in the run helper: nothing it includes, directly or
    through another header, is <systemd/...>, <json-c/...> or log.h.
 3. The transport knows only the hooks it was given: connection.c includes no header of the
    domain (sandbox/) and not ops.h.
 4. A sandbox knows its runs, sessions and snapshot jobs only as members, and the pool, the sweep
    and the state only as observers: sandbox.c includes none of their headers.
 5. One wiring file: only lifecycle.c and main.c include more than one of pool.h, sweep.h,
    state.h, run-record.h, registry.h, manager.h (a file's own header aside).
 6. No circle: with a module being x.c, x.h and x-internal.h together (the last is x's header for
    its own family of files), the include graph among the daemon's modules has no cycle.
 7. x-internal.h is included only by its family: x.c and x-*.c of its own folder.
 8. Code of sandbox/ and server/ that runs in a child of the daemon (a child job's function, or
    anything that calls _exit) lives in a file named *-child.c; host/ and exec/ are below the
    domain and may. Two server files that end a process they forked themselves are named.
 9. No call cycle between files: a file's functions call another file's only if nothing there
    calls back, directly or further on; a family (x.c and the x-*.c that include x-internal.h)
    counts as one file. Functions are found by their shape: definitions at the start of a line,
    calls as "name(", static functions their file's own.
"""
import os
import re
import sys

LAYERS = ["exec", "core", "host", "sandbox", "server"]
RANK = {name: i for i, name in enumerate(LAYERS)}
EXEC_FORBIDDEN = re.compile(r"^(systemd/|json-c/|json\.h$|log\.h$)")
MEMBER_HEADERS = {"run.h", "session.h", "pty.h", "snapshot-job.h", "pool.h", "sweep.h", "state.h"}
WIRING_HEADERS = {"pool.h", "sweep.h", "state.h", "run-record.h", "registry.h", "manager.h"}
WIRING_FILES = {"lifecycle.c", "main.c"}
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')


def includes(path):
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if m:
                yield n, m.group(1) == '"', m.group(2)


COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)
STRING = re.compile(r'"(?:\\.|[^"\\])*"')
ATTRS = r"(?:(?:_\w+_|_Noreturn|_printf_\(\d+, \d+\)|__attribute__\(\(.*?\)\))\s+)*"
# A function defined at the start of a line ("type name(args) {" over one or more lines), and one
# that is static (its file's own).
DEF = re.compile(r"^" + ATTRS + r"(?!static\b)[A-Za-z_][\w \*]*?\b(\w+)\s*\([^;{]*?\)\s*(?:_\w+_\s*)?\{", re.M | re.S)
STATIC_DEF = re.compile(r"^" + ATTRS + r"static\b[\w \*]*?\b(\w+)\s*\(", re.M)
CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
CHILD_JOB_FN = re.compile(r"child_job_start\s*\([^;]*?\.fn\s*=\s*(\w+)", re.S)
EXIT_CALL = re.compile(r"(?<![\w.>])_exit\s*\(")
# Files of the domain and the server that end a process they started themselves, and why.
EXIT_ALLOWED = {
    "server/lifecycle.c": "the placeholder that only proves a cgroup takes a process, and exits",
    "server/hold.c": "the fork that execs the holder, and exits if the exec failed",
}


def sources(daemon, files):
    """Each .c file's text without comments and strings, and where each function that is not
    static is defined."""
    texts, defined = {}, {}
    for rel in files:
        if rel.endswith(".c"):
            with open(os.path.join(daemon, rel), encoding="utf-8") as f:
                texts[rel] = STRING.sub('""', COMMENT.sub(" ", f.read()))
    for rel, text in sorted(texts.items()):
        for m in DEF.finditer(text):
            if m.group(1) not in ("if", "for", "while", "switch", "return", "sizeof"):
                defined.setdefault(m.group(1), rel)
    return texts, defined


def child_code(texts, defined):
    """Rule 8: code of the domain or the server that runs in a child (a child job's function, or
    anything that calls _exit) lives in a file named *-child.c."""
    out = []
    for rel, text in sorted(texts.items()):
        folder, base = rel.split("/")[0], os.path.basename(rel)
        own = set(STATIC_DEF.findall(text))
        for m in CHILD_JOB_FN.finditer(text):
            fn = m.group(1)
            where = rel if fn in own else defined.get(fn, rel)
            wfolder, wbase = where.split("/")[0], os.path.basename(where)
            if wfolder in ("sandbox", "server") and not wbase.endswith("-child.c"):
                out.append(f"daemon/{rel}: its child job runs {fn}() of {where}; "
                           "code a child runs lives in a *-child.c file (or in host/ or exec/)")
        if folder in ("sandbox", "server") and not base.endswith("-child.c") and rel not in EXIT_ALLOWED:
            for m in EXIT_CALL.finditer(text):
                line = text.count("\n", 0, m.start()) + 1
                out.append(f"daemon/{rel}:{line}: calls _exit(); code a child runs lives in a *-child.c file")
    return out


def call_cycles(texts, defined, unit):
    """Rule 9: no call cycle between files, a family (unit: x.c and the x-*.c that include
    x-internal.h) counted as one."""
    graph = {}
    for rel, text in texts.items():
        own = set(STATIC_DEF.findall(text))
        u = unit[rel]
        graph.setdefault(u, set())
        for name in CALL.findall(text):
            where = defined.get(name)
            if name not in own and where and unit[where] != u:
                graph[u].add(unit[where])
    return [f"call cycle of {len(comp)} files: {' '.join(comp)}" for comp in cycles(graph)]


def cycles(graph):
    """The cycles of a graph (node -> set of nodes): its strongly connected components of more
    than one node (Tarjan's, iteratively), each sorted."""
    index, low, on, stack, sccs, counter = {}, {}, set(), [], [], [0]

    def strongconnect(v):
        work = [(v, iter(sorted(graph[v])))]
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        while work:
            node, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on:
                    low[node] = min(low[node], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    sccs.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    for v in sorted(graph):
        if v not in index:
            strongconnect(v)
    return sccs


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    daemon = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "daemon")
    lib = os.path.join(daemon, "..", "lib")
    problems = []

    # Every file of the daemon, and where each header name is found.
    files = {}   # relative path -> folder
    where = {}   # header name -> folder (daemon) or "lib"
    for entry in sorted(os.listdir(daemon)):
        d = os.path.join(daemon, entry)
        if not os.path.isdir(d):
            continue
        if entry not in RANK:
            problems.append(f"daemon/{entry}/: not a layer (the layers are {', '.join(LAYERS)})")
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith((".c", ".h")):
                files[f"{entry}/{name}"] = entry
                if name.endswith(".h"):
                    if name in where:
                        problems.append(f"{name}: in daemon/{where[name]}/ and daemon/{entry}/")
                    where[name] = entry
    for name in os.listdir(daemon):
        if name.endswith((".c", ".h")):
            problems.append(f"daemon/{name}: outside the layer folders")
    lib_headers = {n for n in os.listdir(lib) if n.endswith(".h")} if os.path.isdir(lib) else set()

    def resolve(folder, quoted, name):
        """The folder a quoted include resolves to, as the compiler finds it: the including file's
        own folder, then the daemon's folders, then lib/. None for system headers."""
        if not quoted:
            return None
        if os.path.exists(os.path.join(daemon, folder, name)):
            return folder
        if name in where:
            return where[name]
        if name in lib_headers:
            return "lib"
        return None

    graph = {}   # module ("folder/stem") -> set of modules
    direct = {}  # relative path -> [(line, quoted, name, resolved folder)]
    def module_of(path):
        # x-internal.h is x's own header for the files of its family (crun's cgroup-internal.h):
        # part of module x.
        stem = path[:-2]
        return stem[:-len("-internal")] if stem.endswith("-internal") else stem

    for rel, folder in files.items():
        direct[rel] = [(n, q, name, resolve(folder, q, name)) for n, q, name in includes(os.path.join(daemon, rel))]
        module = module_of(rel)
        graph.setdefault(module, set())
        for n, q, name, to in direct[rel]:
            if to is None or to == "lib":
                continue
            target = module_of(f"{to}/{name}")
            if target != module:
                graph[module].add(target)

    for rel, folder in sorted(files.items()):
        base = os.path.basename(rel)
        for n, q, name, to in direct[rel]:
            # Rule 1.
            if to in RANK and RANK[to] > RANK[folder]:
                problems.append(f"daemon/{rel}:{n}: includes {name} from {to}/, a layer above {folder}/")
        # Rule 3.
        if base == "connection.c":
            for n, q, name, to in direct[rel]:
                if to == "sandbox" or name == "ops.h":
                    problems.append(f"daemon/{rel}:{n}: the transport includes {name}; it gets hooks instead")
        # Rule 4.
        if base == "sandbox.c":
            for n, q, name, to in direct[rel]:
                if q and name in MEMBER_HEADERS:
                    problems.append(f"daemon/{rel}:{n}: includes {name}; members and observers register instead")
        # Rule 7.
        for n, q, name, to in direct[rel]:
            if q and name.endswith("-internal.h"):
                family = name[:-len("-internal.h")]
                stem = base[:-2]
                if to != folder or not (stem == family or stem.startswith(family + "-")):
                    problems.append(f"daemon/{rel}:{n}: includes {name}, which only {family}.c and "
                                    f"{family}-*.c of {to}/ may")
        # Rule 5.
        if base.endswith(".c") and base not in WIRING_FILES:
            own = base[:-2] + ".h"
            wired = sorted({name for n, q, name, to in direct[rel]
                            if q and name in WIRING_HEADERS and name != own and to != "lib"})
            if len(wired) > 1:
                problems.append(f"daemon/{rel}: includes {', '.join(wired)}; only lifecycle.c wires them together")

    # Rule 2, through headers: every header an exec/ file reaches.
    for rel, folder in sorted(files.items()):
        if folder != "exec":
            continue
        seen, todo = set(), [(rel, None)]
        while todo:
            cur, via = todo.pop()
            if cur in seen:
                continue
            seen.add(cur)
            path = os.path.join(daemon, cur) if not cur.startswith("lib/") else os.path.join(lib, cur[4:])
            if not os.path.exists(path):
                continue
            for n, q, name in includes(path):
                if EXEC_FORBIDDEN.match(name):
                    problems.append(f"daemon/{rel}: reaches {name}" + (f" through {via}" if via else f" (line {n})"))
                    continue
                if not q:
                    continue
                cur_folder = cur.split("/")[0]
                to = resolve(cur_folder if cur_folder in RANK else "exec", q, name)
                if to == "lib":
                    todo.append((f"lib/{name}", via or name))
                elif to is not None:
                    todo.append((f"{to}/{name}", via or name))

    # Rule 6.
    for comp in cycles(graph):
        problems.append(f"circle of {len(comp)} modules: {' '.join(comp)}")

    # Rules 8 and 9, on the functions: a family is x.c with the x-*.c that include x-internal.h.
    texts, defined = sources(daemon, files)
    unit = {}
    for rel in texts:
        stem, family = rel[:-2], [name[:-len("-internal.h")] for n, q, name, to in direct[rel]
                                  if q and name.endswith("-internal.h") and to == files[rel]]
        base = os.path.basename(stem)
        unit[rel] = next((f"{files[rel]}/{x}" for x in family if base == x or base.startswith(x + "-")), stem)
    problems += child_code(texts, defined)
    problems += call_cycles(texts, defined, unit)

    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
