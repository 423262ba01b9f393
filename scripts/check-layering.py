#!/usr/bin/env python3
"""The layering check: reads every #include "..." line of the library's
C/CUDA sources and fails when one runs up the dependency order or when
files include each other in a circle.

Order: core <- inputs <- hw, sim <- profile <- policy <- plan, calib <- cli
(hw and sim side by side, and plan and calib: neither of a pair includes the
other; ALLOWED below lists exactly which folders each may include from).
A module is a file name without its extension (x.h, x.c, x.cu are one
module); a module depends on every module whose header it includes. A header
with no implementation of its own (x_internal.h, shared declarations) passes
its includes on to whoever includes it.

With --objects BUILD it also reads the built objects' symbols (nm): a file
that calls a function defined in another depends on it, whichever header
declared it, and a circle of such calls between files is a fault too.
Usage: scripts/check-layering.py [--objects BUILD] [ROOT]
Exit 0 clean, 1 with one line on stderr a fault.
"""
import glob, os, re, subprocess, sys

# the top folders of the library, and the folders each may include from
ALLOWED = {
    "core":    {"core"},
    "inputs":  {"core", "inputs"},
    "hw":      {"core", "inputs", "hw"},
    "sim":     {"core", "inputs", "sim"},
    "profile": {"core", "inputs", "hw", "sim", "profile"},
    "policy":  {"core", "inputs", "sim", "profile", "policy"},
    "plan":    {"core", "inputs", "sim", "profile", "policy", "plan"},
    "calib":   {"core", "inputs", "hw", "sim", "profile", "policy", "plan", "calib"},
    "cli":     {"core", "inputs", "hw", "sim", "profile", "policy", "plan", "calib", "cli"},
    "python":  {"core", "inputs", "hw", "sim", "profile", "policy", "plan", "calib", "python"},
}
NO_CUDA = {"core", "inputs", "sim", "policy", "plan"}   # folders that never include CUDA headers
EXTS = (".c", ".h", ".cu", ".cuh")
INC = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]')


def scan(root):
    """relative path -> [(line, '<' or '"', name)] for every source of the library"""
    files = {}
    for top in ALLOWED:
        for d, _, names in os.walk(os.path.join(root, top)):
            for n in names:
                if n.endswith(EXTS):
                    p = os.path.join(d, n)
                    incs = []
                    with open(p, encoding="utf-8", errors="replace") as f:
                        for i, line in enumerate(f, 1):
                            m = INC.match(line)
                            if m:
                                incs.append((i, m.group(1), m.group(2)))
                    files[os.path.relpath(p, root)] = incs
    return files


def circles(edges, how):
    """strongly connected components of more than one file (Tarjan), as faults"""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(set(edges) | {w for s in edges.values() for w in s}):
        if v not in index:
            visit(v)
    return [f"circle of {how} between files: " + " <-> ".join(c) for c in out]


def symbol_edges(build):
    """file -> files whose functions or data it uses, from nm over BUILD's library objects"""
    defs, uses = {}, {}
    for o in glob.glob(os.path.join(build, "*", "*.p", "*.o")):
        rel = os.path.relpath(o, build)
        top = rel.split(os.sep)[0]
        if top not in ALLOWED or top == "python":
            continue
        # meson names an object after its source path: hw/libplacer_hw.a.p/exec_engine_c.o (named after its source)
        key = top + "/" + os.path.basename(o)[:-2]
        out = subprocess.run(["nm", o], capture_output=True, text=True).stdout
        u = uses.setdefault(key, set())
        for line in out.splitlines():
            p = line.split()
            if len(p) == 3 and p[1] in "TDBR":
                defs[p[2]] = key
            elif len(p) == 2 and p[0] == "U":
                u.add(p[1])
    edges = {}
    for k, syms in uses.items():
        for sym in syms:
            d = defs.get(sym)
            if d and d != k:
                edges.setdefault(k, set()).add(d)
    return edges


def main():
    args = sys.argv[1:]
    objects = None
    if len(args) >= 2 and args[0] == "--objects":
        objects, args = args[1], args[2:]
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = scan(root)
    implemented = {os.path.splitext(r)[0] for r in files if r.endswith((".c", ".cu"))}
    headers = {}
    for rel in files:
        if rel.endswith((".h", ".cuh")):
            headers.setdefault(os.path.basename(rel), []).append(rel)
    faults, edges = [], {}
    for rel, incs in sorted(files.items()):
        top = rel.split(os.sep)[0]
        for line, kind, name in incs:
            if kind == "<":
                if top in NO_CUDA and (name.startswith(("cuda", "cublas", "cusparse", "curand")) or name == "nccl.h"):
                    faults.append(f"{rel}:{line}: {top}/ includes the CUDA header <{name}>")
                continue
            targets = headers.get(os.path.basename(name), [])
            if not targets:
                continue  # generated (placer_config.h) or from outside the library
            same_dir = [t for t in targets if os.path.dirname(t) == os.path.dirname(rel)]
            same_top = [t for t in targets if t.split(os.sep)[0] == top]
            tgt = (same_dir or same_top or targets)[0]
            if tgt.split(os.sep)[0] not in ALLOWED[top]:
                faults.append(f"{rel}:{line}: {top}/ includes {tgt}, which runs up the dependency order")
            a, b = os.path.splitext(rel)[0], os.path.splitext(tgt)[0]
            if a != b:
                edges.setdefault(a, set()).add(b)

    def resolve(v, seen):
        out = set()
        for w in edges.get(v, ()):
            if w in implemented:
                out.add(w)
            elif w not in seen:
                seen.add(w)
                out |= resolve(w, seen)
        return out

    impl_edges = {v: {w for w in resolve(v, {v}) if w != v} for v in edges if v in implemented}
    faults += circles(impl_edges, "includes")
    if objects:
        faults += circles(symbol_edges(objects), "calls")
    for f in faults:
        print(f, file=sys.stderr)
    if faults:
        print(f"check-layering: {len(faults)} fault(s) in {len(files)} files", file=sys.stderr)
        return 1
    n = sum(len(v) for v in files.values())
    what = " and the objects' calls" if objects else ""
    print(f"check-layering: {len(files)} files, {n} includes{what}: the order holds, no circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
