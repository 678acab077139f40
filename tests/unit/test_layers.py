#!/usr/bin/env python3
"""Every library and program of the project depends only downward, on what its
CMake target declares.  Usage:

    test_layers.py fb_layers.json SOURCE_DIR BINARY_DIR

fb_layers.json (written by tests/CMakeLists.txt) lists each target: its name,
type, source folder, archive, the libraries it links and its sources.  From it:

  1. the declared graph (project libraries only) has no cycle: it is the
     layering, printed lowest first;
  2. symbols: every symbol an archive leaves undefined (nm -u) that another
     project archive defines is defined by a library the first one links,
     directly or through others;
  3. includes: every #include "x.h" of a target's sources, and of the headers
     it owns, names a header of the target itself or of a library it links,
     directly or through others; never one of a library above it.

A header belongs to the target that has its same-named source (nat_engine.h,
nat_engine.c), else to the target named like it (fb_engine.h, the interface
library fb_engine), else to the lowest target with sources in its folder.
Exit 0 when the layers hold, 1 naming each wrong edge."""

import json
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def load(path, src_root, bin_root):
    with open(path) as f:
        targets = json.load(f)
    by_name = {t["name"]: t for t in targets}
    for t in targets:
        t["deps"] = [l for l in t["links"].split(";") if l in by_name and l != t["name"]]
        files = []
        for s in filter(None, t["sources"].split(";")):
            p = s if os.path.isabs(s) else os.path.join(t["dir"], s)
            p = os.path.realpath(p)
            generated = p.startswith(os.path.realpath(bin_root) + os.sep)
            if p.startswith(os.path.realpath(src_root) + os.sep) and not generated:
                files.append(p)
        t["files"] = files
    return targets, by_name


def order(targets, by_name):
    """The targets lowest first; exits naming a cycle when there is one."""
    done, out, path = set(), [], []

    def visit(name):
        if name in done:
            return
        if name in path:
            sys.exit("test_layers: the declared links form a cycle: %s" %
                     " -> ".join(path[path.index(name):] + [name]))
        path.append(name)
        for d in by_name[name]["deps"]:
            visit(d)
        path.pop()
        done.add(name)
        out.append(name)

    for t in targets:
        visit(t["name"])
    return out


def closure(by_name):
    below = {}

    def walk(name):
        if name not in below:
            below[name] = set()
            for d in by_name[name]["deps"]:
                below[name] |= {d} | walk(d)
        return below[name]

    for name in by_name:
        walk(name)
    return below


def owners(targets, by_name, ranks):
    """header path -> owning target, for every header in a target's folders."""
    folders = {}
    for t in targets:
        dirs = {os.path.dirname(f) for f in t["files"]} or {os.path.realpath(t["dir"])}
        for d in dirs:
            folders.setdefault(d, []).append(t["name"])
    stems = {}
    for t in targets:
        for f in t["files"]:
            stems.setdefault(os.path.splitext(f)[0], t["name"])
    own = {}
    for d, names in folders.items():
        lowest = min(names, key=lambda n: ranks[n])
        for h in os.listdir(d):
            if not h.endswith((".h", ".cuh")):
                continue
            p = os.path.join(d, h)
            stem = os.path.splitext(h)[0]
            own[p] = stems.get(os.path.splitext(p)[0]) or (stem if stem in by_name else lowest)
    return own


def symbols(lib):
    out = subprocess.run(["nm", "-g", "--defined-only", lib], capture_output=True, text=True,
                         check=True).stdout
    defined = {l.split()[-1] for l in out.splitlines() if len(l.split()) == 3}
    out = subprocess.run(["nm", "-g", "-u", "-A", lib], capture_output=True, text=True,
                         check=True).stdout
    undefined = {}
    for line in out.splitlines():
        where, _, name = line.rpartition(" ")
        undefined.setdefault(name, where.split(":")[1] if ":" in where else lib)
    return defined, undefined


def check_symbols(targets, below):
    bad = []
    libs = [t for t in targets if t["type"] == "STATIC_LIBRARY" and t["file"]]
    syms = {t["name"]: symbols(t["file"]) for t in libs}
    for t in libs:
        _, undefined = syms[t["name"]]
        for name, obj in sorted(undefined.items()):
            where = [o for o, (defined, _) in syms.items() if o != t["name"] and name in defined]
            if where and not any(o in below[t["name"]] for o in where):
                bad.append("%s (%s) uses %s of %s, which it does not link" %
                           (t["name"], obj, name, " or ".join(sorted(where))))
    return bad, len(libs)


def check_includes(targets, below, own, src_root):
    by_base = {}
    for p in own:
        by_base.setdefault(os.path.basename(p), []).append(p)
    files = {}
    for t in targets:
        for f in t["files"]:
            files.setdefault(f, t["name"])
    for h, o in own.items():
        files.setdefault(h, o)
    bad, crossing = [], set()
    for f, who in sorted(files.items()):
        with open(f, errors="replace") as fh:
            text = fh.read()
        for inc in INCLUDE.findall(text):
            near = os.path.realpath(os.path.join(os.path.dirname(f), inc))
            hits = [near] if near in own else by_base.get(os.path.basename(inc), [])
            if not hits:
                continue  # a header of no target (a system or generated one)
            to = own[hits[0]]
            if to == who:
                continue
            crossing.add((f, hits[0]))
            if to not in below[who]:
                bad.append("%s (%s) includes %s of %s, which it does not link" %
                           (os.path.relpath(f, src_root), who, inc, to))
    return bad, len(crossing)


def main(argv):
    if len(argv) != 3:
        sys.exit(__doc__)
    targets, by_name = load(argv[0], argv[1], argv[2])
    ranked = order(targets, by_name)
    ranks = {n: i for i, n in enumerate(ranked)}
    below = closure(by_name)
    own = owners(targets, by_name, ranks)
    bad_sym, n_libs = check_symbols(targets, below)
    bad_inc, crossing = check_includes(targets, below, own, argv[1])
    print("test_layers: lowest first: %s" % " < ".join(ranked))
    for name in ranked:
        print("  %-20s links %s" % (name, ", ".join(by_name[name]["deps"]) or "-"))
    for b in bad_sym + bad_inc:
        print("test_layers: " + b)
    print("test_layers: %d targets, %d archives' symbols, %d headers, %d cross-target includes: %s"
          % (len(targets), n_libs, len(own), crossing,
             "FAILED" if bad_sym or bad_inc else "the layers hold"))
    return 1 if bad_sym or bad_inc else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
