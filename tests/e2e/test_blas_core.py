#!/usr/bin/env python3
"""End to end: fusionbench-run never times on OpenBLAS's "Prescott" fallback
when the CPU has AVX2 and FMA (worker/run/fb_env.c, fb_blas_fix_core).

OpenBLAS picks its kernels when it loads, from the CPU models it knows; a newer
model gets the SSE3 fallback, and eager whisper_tiny's batched GEMMs ran at half
speed on such a VM.  fusionbench-run (and the worker, before its job children)
then names the core the CPU's features allow and runs again.  Checked: the
result's env.blas names a core that is not the fallback on a CPU with AVX2 and
FMA (here, an AVX-512 VM whose model OpenBLAS 0.3.21 does not know, it fails
without the fix), and a core the user named in OPENBLAS_CORETYPE is kept.
Needs no database."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, log  # noqa: E402


def cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def core_of(env):
    r = subprocess.run([fbtest.find_bin("fusionbench-run"), "softmax", "--iterations", "3",
                        "--warmup", "1", "--threads", "1", "--json"],
                       capture_output=True, text=True, env=env, timeout=120)
    check(r.returncode == 0, "fusionbench-run failed: %s" % r.stderr[-400:])
    blas = json.loads(r.stdout)["result"]["env"]["blas"]
    log("env.blas: %s" % blas)
    check(blas.startswith("OpenBLAS "), "env.blas is not OpenBLAS's: %r" % blas)
    return blas.split()[-1]


def main():
    flags = cpu_flags()
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    core = core_of(env)
    if "avx2" in flags and "fma" in flags:
        check(core.lower() != "prescott",
              "OpenBLAS's SSE3 fallback on a CPU with AVX2 and FMA (%s)" % core)
    else:
        log("no AVX2 and FMA here: OpenBLAS's own choice stands (%s)" % core)
    # a core the user names is kept, not replaced
    named = core_of(dict(env, OPENBLAS_CORETYPE="Haswell" if "avx2" in flags else "Prescott"))
    want = "haswell" if "avx2" in flags else "prescott"
    check(named.lower() == want, "OPENBLAS_CORETYPE named %s, the run used %s" % (want, named))
    print("blas_core: PASSED", flush=True)


if __name__ == "__main__":
    fbtest.main_plain(main, "blas_core")
