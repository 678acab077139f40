#!/usr/bin/env python3
"""The native engine's libraries depend only downward (worker/CMakeLists.txt):
core <- graph <- cuda <- engine.  For each library, every symbol it leaves
undefined (nm -u) must not be defined by a library above it.  Usage:

    test_layers.py CORE.a GRAPH.a [CUDA.a] ENGINE.a    (lowest first)

Exit 0 when the layers hold, 1 naming each upward reference."""

import subprocess
import sys


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


def main(libs):
    if len(libs) < 2:
        sys.exit(__doc__)
    layers = [(lib, *symbols(lib)) for lib in libs]
    bad = []
    for i, (lib, _, undefined) in enumerate(layers):
        for above, defined, _ in layers[i + 1:]:
            for name, obj in sorted(undefined.items()):
                if name in defined:
                    bad.append("%s (%s) uses %s of %s, a layer above it" % (lib, obj, name, above))
    for b in bad:
        print("test_layers: " + b)
    print("test_layers: %s" % ("FAILED" if bad else "%d layers hold" % len(libs)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
