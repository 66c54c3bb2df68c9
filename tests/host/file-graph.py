#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The file graph of strixpeer's C: which file calls (or takes the address
of, or reads) what another file defines, and whether that graph has a
circle.

Each .c file is compiled on its own and its object read with nm: an
undefined global symbol that another file of the same program defines is an
edge from the first file to the second. A strongly connected component of
more than one file is a circle (a file that calls back up into its caller).
It also fails for a source file over MAX_LINES lines (user/, include/ and
tests/ with the user graph, kmod/ with the module's): past that a file
holds more than one mechanism. The few files of tests/ not yet split
(OVER_CAP) may not grow past the size they have.

  file-graph.py user            the library, the RDMA, DRM and bench archives, the CLI
  file-graph.py kmod DIR        the module, from a kbuild tree's objects
                                (DIR holds kmod/*.o, as tests/vm/build-module.sh
                                leaves them)
  -v prints every edge.  Exit status 1 when a circle is found."""
import glob
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINES = 700
# Files held at their size until they are split along their sections
# ("path": lines): each may shrink, not grow. Empty since issue 46.
OVER_CAP = {
}
# tests/: the programs, their library, the stand-in modules, the scripts
TESTS_SOURCES = ["tests/**/*.[ch]", "tests/**/*.sh", "tests/**/*.py"]


def sizes(patterns):
    ok, n, notes = True, 0, []
    for pat in patterns:
        for f in sorted(glob.glob(pat, root_dir=ROOT, recursive=True)):
            n += 1
            with open(os.path.join(ROOT, f)) as fh:
                lines = sum(1 for _ in fh)
            cap = max(MAX_LINES, OVER_CAP.get(f, 0))
            if lines > cap:
                print(f"{f}: {lines} lines, over {cap}")
                ok = False
            elif lines > MAX_LINES:
                notes.append(f"note: {f}: {lines} lines, over {MAX_LINES}: "
                             f"to be split (OVER_CAP: at most {cap})")
    # after the failures: run-all.sh reports the first line that is not a graph's
    for note in notes:
        print(note)
    if ok:
        print(f"{n} files, none over {MAX_LINES} lines"
              + (" but OVER_CAP's" if notes else ""))
    return ok


def nm(obj):
    defined, undefined = set(), set()
    out = subprocess.run(["nm", "-P", "-g", obj], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        f = line.split()
        if len(f) < 2:
            continue
        (undefined if f[1] in ("U", "w") else defined).add(f[0])
    return defined, undefined


def compile_all(srcs, flags, tmp):
    objs = {}
    for s in srcs:
        o = os.path.join(tmp, s.replace("/", "_") + ".o")
        subprocess.run(["cc", "-c", "-o", o, s] + flags, check=True, cwd=ROOT)
        objs[s] = o
    return objs


def sccs(nodes, edges):
    """Tarjan's algorithm; returns the components of more than one node."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

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

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def graph(name, objs, verbose):
    syms = {s: nm(o) for s, o in objs.items()}
    owner = {}
    for s, (d, _) in syms.items():
        for sym in d:
            owner[sym] = s
    edges = {}
    for s, (_, u) in syms.items():
        for sym in u:
            t = owner.get(sym)
            if t and t != s:
                edges.setdefault(s, {}).setdefault(t, set()).add(sym)
    if verbose:
        for s in sorted(edges):
            for t in sorted(edges[s]):
                print(f"  {s} -> {t}: {' '.join(sorted(edges[s][t]))}")
    circles = sccs(objs.keys(), edges)
    nedges = sum(len(v) for v in edges.values())
    if circles:
        for c in circles:
            print(f"{name}: circle: {' <-> '.join(c)}")
            for s in c:
                for t in sorted(edges.get(s, ())):
                    if t in c:
                        print(f"    {s} -> {t}: "
                              f"{' '.join(sorted(edges[s][t]))}")
    else:
        print(f"{name}: {len(objs)} files, {nedges} edges, no circle")
    return not circles


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    if not args or args[0] not in ("user", "kmod"):
        sys.exit(__doc__)
    ok = True
    if args[0] == "user":
        nl = subprocess.run(["pkg-config", "--cflags", "libnl-genl-3.0"],
                            capture_output=True, text=True).stdout.split() \
            or ["-I/usr/include/libnl3"]
        flags = ["-std=gnu11", "-O2", "-Iinclude", "-Iuser",
                 '-DSP_LIB_VERSION="0"'] + nl
        programs = [
            ("libstrixpeer", sorted(glob.glob("user/lib/*.c",
                                              root_dir=ROOT))),
            ("sprdma", sorted(glob.glob("user/rdma/*.c", root_dir=ROOT))),
            ("spdrm", sorted(glob.glob("user/drm/*.c", root_dir=ROOT))),
            ("spbench", sorted(glob.glob("user/bench/*.c", root_dir=ROOT))),
            ("strixpeerctl", sorted(glob.glob("user/cli/*.c", root_dir=ROOT)
                                    + glob.glob("user/cli/doctor/*.c",
                                                root_dir=ROOT))),
        ]
        with tempfile.TemporaryDirectory() as tmp:
            for name, srcs in programs:
                srcs = [s for s in srcs if not s.endswith("preload.c")] \
                    if name == "libstrixpeer" else srcs
                ok &= graph(name, compile_all(srcs, flags, tmp), verbose)
        ok &= sizes(["user/**/*.[ch]", "include/**/*.h"] + TESTS_SOURCES)
    else:
        if len(args) < 2:
            sys.exit(__doc__)
        objs = {}
        for s in sorted(glob.glob("kmod/*.c", root_dir=ROOT)):
            o = os.path.join(args[1], s[:-2] + ".o")
            if not os.path.exists(o):
                o = os.path.join(args[1], os.path.basename(s)[:-2] + ".o")
            if not os.path.exists(o):
                sys.exit(f"file-graph: no object for {s} under {args[1]}")
            objs[s] = o
        ok &= graph("strixpeer.ko", objs, verbose)
        ok &= sizes(["kmod/*.[ch]"])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
