#!/usr/bin/env python3
"""The layering check: reads every #include line of the library's C/CUDA
sources (and, with --objects, the built objects' symbols) and fails when a
dependency runs against the rules below or files depend on each other in a
circle. The rules, each named in its fault lines (docs/architecture.md
explains them):

  order     the top folders: core <- inputs <- hw, sim <- profile <- policy
            <- plan, calib <- cli (hw and sim side by side, and plan and
            calib: neither of a pair includes the other; ALLOWED lists
            exactly which folders each may include from)
  hw-lanes  inside hw/: kernels <- exec <- dist (the kernels know nothing of
            the executor, the executor nothing of the process groups)
  sim-lanes inside sim/: placement and layout share only what lies below
            sim/ (core, inputs); layout may use collective; collective
            neither
  cuda      no CUDA header in core, inputs, sim, policy or plan
  sqlite    <sqlite3.h> only in profile/ (the store is the one room of SQL)
  json      <jansson.h> only in inputs/ (the readers) and cli/ (requests)
  circle    no circle of includes between files (and, with --objects, of
            calls)
With --objects BUILD the order and the lanes are checked on calls too: a
file that calls a function defined in another depends on it, whichever
header declared it.

A module is a file name without its extension (x.h, x.c, x.cu are one
module); a module depends on every module whose header it includes. A header
with no implementation of its own (x_internal.h, shared declarations) passes
its includes on to whoever includes it.

Usage: scripts/check-layering.py [--objects BUILD] [ROOT]
       scripts/check-layering.py --self-test [--objects BUILD] [ROOT]
The self-test plants one violation of each rule into the scanned tree (in
memory: no file is written) and fails unless each is caught, then checks the
tree as it is. Exit 0 clean, 1 with one line on stderr a fault.
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
# lanes inside a top folder: sub-folder -> the sub-folders of the same top it may use
LANES = {
    "hw": ("hw-lanes", {"kernels": {"kernels"},
                        "exec":    {"kernels", "exec"},
                        "dist":    {"kernels", "exec", "dist"}}),
    "sim": ("sim-lanes", {"collective": {"collective"},
                          "placement":  {"placement"},
                          "layout":     {"layout", "collective"}}),
}
NO_CUDA = {"core", "inputs", "sim", "policy", "plan"}   # folders that never include CUDA headers
SYSTEM_HEADER_HOMES = {  # rule: a system header and the only top folders that include it
    "sqlite": ("sqlite3.h", {"profile"}),
    "json":   ("jansson.h", {"inputs", "cli"}),
}
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
    return [f"[circle] circle of {how} between files: " + " <-> ".join(c) for c in out]


def edge_fault(src, tgt):
    """the rule a dependency of path src on path tgt breaks, as (rule, why), or None"""
    a, b = src.split(os.sep), tgt.split(os.sep)
    if b[0] not in ALLOWED[a[0]]:
        return "order", f"{a[0]}/ depends on {tgt}, which runs up the dependency order"
    if a[0] == b[0] and a[0] in LANES and len(a) > 2 and len(b) > 2:
        rule, lanes = LANES[a[0]]
        if a[1] in lanes and b[1] not in lanes[a[1]]:
            return rule, f"{a[0]}/{a[1]}/ depends on {tgt}: {a[0]}/{a[1]} may use only " + \
                ", ".join(f"{a[0]}/{s}" for s in sorted(lanes[a[1]]))
    return None


def object_sources(build, files):
    """meson's object name (top/sub_file.c, as symbol_edges keys it) -> the source's path"""
    out = {}
    for rel in files:
        if rel.endswith((".c", ".cu")):
            top, rest = rel.split(os.sep, 1)
            out[top + "/" + rest.replace(os.sep, "_")] = rel
    return out


def symbol_edges(build):
    """object -> objects whose functions or data it uses, from nm over BUILD's library objects"""
    defs, uses = {}, {}
    for o in glob.glob(os.path.join(build, "*", "*.p", "*.o")):
        rel = os.path.relpath(o, build)
        top = rel.split(os.sep)[0]
        if top not in ALLOWED or top == "python":
            continue
        # meson names an object after its source path, sub-folder and file joined by an underscore
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


def check(files, sym_edges=None, obj_src=None):
    """every fault of the scanned tree (and of the objects' call edges, when given) as lines"""
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
                    faults.append(f"[cuda] {rel}:{line}: {top}/ includes the CUDA header <{name}>")
                for rule, (hdr, homes) in SYSTEM_HEADER_HOMES.items():
                    if name == hdr and top not in homes:
                        faults.append(f"[{rule}] {rel}:{line}: {top}/ includes <{hdr}>, which only "
                                      + " and ".join(f"{h}/" for h in sorted(homes)) + " may")
                continue
            targets = headers.get(os.path.basename(name), [])
            if not targets:
                continue  # generated (placer_config.h) or from outside the library
            same_dir = [t for t in targets if os.path.dirname(t) == os.path.dirname(rel)]
            same_top = [t for t in targets if t.split(os.sep)[0] == top]
            tgt = (same_dir or same_top or targets)[0]
            f = edge_fault(rel, tgt)
            if f:
                faults.append(f"[{f[0]}] {rel}:{line}: includes {tgt}: {f[1]}")
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
    if sym_edges is not None:
        for a, bs in sorted(sym_edges.items()):
            for b in sorted(bs):
                sa, sb = obj_src.get(a), obj_src.get(b)
                f = edge_fault(sa, sb) if sa and sb else None
                if f:
                    faults.append(f"[{f[0]}] {sa} calls into {sb}: {f[1]}")
        faults += circles(sym_edges, "calls")
    return faults


# one planted violation per rule: (rule, file that gets the line, the include, or a call edge)
def plants(files):
    def some(prefix, ext=".c"):
        return sorted(r for r in files if r.startswith(prefix) and r.endswith(ext))[0]
    return [
        ("order", some("sim/layout/"), '"session.h"'),
        ("order", some("core/"), '"cluster.h"'),
        ("order", some("inputs/"), '"layout_sim.h"'),
        ("hw-lanes", some("hw/kernels/"), '"hw.h"'),
        ("hw-lanes", some("hw/exec/"), '"dist_group.h"'),
        ("sim-lanes", some("sim/layout/"), '"sim_internal.h"'),
        ("sim-lanes", some("sim/placement/"), '"layout_internal.h"'),
        ("sim-lanes", some("sim/collective/"), '"layout_sim.h"'),
        ("cuda", some("sim/"), "<cuda_runtime.h>"),
        ("sqlite", some("calib/"), "<sqlite3.h>"),
        ("json", some("plan/"), "<jansson.h>"),
        ("circle", "core/graph.c", '"layout.h"'),  # with the planted layout.c -> graph.h below
    ]


def self_test(files, sym_edges, obj_src):
    """plant each violation in a copy of the scan and require its rule's fault; then check the tree"""
    failed = 0
    base = set(check(files, sym_edges, obj_src))  # a plant must add a fault of its rule
    for rule, rel, inc in plants(files):
        planted = {k: list(v) for k, v in files.items()}
        planted[rel].append((99999, inc[0], inc[1:-1]))
        if rule == "circle":
            planted["core/layout.c"].append((99999, '"', "graph.h"))
            planted["core/graph.c"].append((99998, '"', "layout.h"))
        got = [f for f in set(check(planted)) - base if f.startswith(f"[{rule}]")]
        ok = bool(got)
        failed += not ok
        print(f"self-test {rule:9s} planted #include {inc} in {rel}: "
              + ("caught: " + got[0] if ok else "NOT CAUGHT"))
    if sym_edges is not None:
        src_of = {v: k for k, v in obj_src.items()}
        for rule, a, b in [("hw-lanes", "hw/exec/engine.c", "hw/dist/dist_group.c"),
                           ("sim-lanes", "sim/placement/sim_core.c", "sim/layout/layout_sim.c"),
                           ("order", "sim/layout/layout_sim.c", "profile/store.c")]:
            if a not in src_of or b not in src_of:
                continue
            planted = {k: set(v) for k, v in sym_edges.items()}
            planted.setdefault(src_of[a], set()).add(src_of[b])
            got = [f for f in set(check(files, planted, obj_src)) - base if f.startswith(f"[{rule}]")]
            ok = bool(got)
            failed += not ok
            print(f"self-test {rule:9s} planted call {a} -> {b}: " + ("caught: " + got[0] if ok else "NOT CAUGHT"))
    return failed


def main():
    args = sys.argv[1:]
    objects, selftest = None, False
    while args and args[0].startswith("--"):
        if args[0] == "--objects" and len(args) >= 2:
            objects, args = args[1], args[2:]
        elif args[0] == "--self-test":
            selftest, args = True, args[1:]
        else:
            print(f"check-layering: unknown option {args[0]}", file=sys.stderr)
            return 2
    root = args[0] if args else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    files = scan(root)
    sym, obj_src = (symbol_edges(objects), object_sources(objects, files)) if objects else (None, None)
    if selftest and self_test(files, sym, obj_src):
        print("check-layering: the self-test missed a planted violation", file=sys.stderr)
        return 1
    faults = check(files, sym, obj_src)
    for f in faults:
        print(f, file=sys.stderr)
    if faults:
        print(f"check-layering: {len(faults)} fault(s) in {len(files)} files", file=sys.stderr)
        return 1
    n = sum(len(v) for v in files.values())
    what = " and the objects' calls" if objects else ""
    print(f"check-layering: {len(files)} files, {n} includes{what}: the order, the hw and sim lanes and the "
          f"header homes hold, no circles")
    return 0


if __name__ == "__main__":
    sys.exit(main())
