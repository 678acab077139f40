#!/usr/bin/env python3
"""End to end: FUSIONBENCH_NATIVE_ISA=avx2 runs the native CPU kernels an
AVX2-only CPU runs, on any CPU, and says so (common/fb_cpu.h).

Checked: under avx2 a convolutional model and a transformer layer run both
variants through the accuracy gate (status ok, fused within tolerance of
eager), their GEMMs on OpenBLAS under the rules planner (params.gemm
"auto"'s default on 8 lanes), on our packed GEMM's 8-lane form where
params.gemm asks for it, and by default (the cost planner's choice per
shape, graph.planner.gemm) on what the result counts; on a CPU with AVX-512 the result's env.cpu and device name carry
"(kernels: avx2, FUSIONBENCH_NATIVE_ISA)", so its results form their own
history series, and a plain run's do not, and OpenBLAS ran its Haswell
kernels; a value that is none of avx2,
avx512 or auto stops fusionbench-run and fusionbench-worker with exit
status 2, naming the variable and the value, before any work (the worker
before it reads its database address).  Needs no database."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, log  # noqa: E402

SUFFIX = " (kernels: avx2, FUSIONBENCH_NATIVE_ISA)"


def avx512():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return "avx512f" in line.split(":", 1)[1].split()
    return False


def run(args, isa):
    env = {k: v for k, v in os.environ.items()
           if k not in ("FUSIONBENCH_NATIVE_ISA", "OPENBLAS_CORETYPE")}
    if isa is not None:
        env["FUSIONBENCH_NATIVE_ISA"] = isa
    return subprocess.run([fbtest.find_bin("fusionbench-run")] + args, capture_output=True,
                          text=True, env=env, timeout=300)


def model(name, params, isa):
    args = [name, "--iterations", "3", "--warmup", "1", "--threads", "2", "--json"]
    for p in params:
        args += ["--param", p]
    r = run(args, isa)
    check(r.returncode == 0, "%s under %s: exit %d: %s" % (name, isa, r.returncode,
                                                          r.stderr[-600:]))
    doc = json.loads(r.stdout)
    res = doc["result"]
    for v in res["variants"]:
        check(v["status"] == "ok", "%s under %s: %s %s" % (name, isa, v["name"], v["status"]))
    log("%s under %s: %s" % (name, isa, ", ".join(
        "%s %.3f ms" % (v["name"], v["latency_ms"]["median"]) for v in res["variants"])))
    return res["env"], doc["kernels"], res["graph"]["planner"]


def impls(kernels, names):
    """The impls the profiled launches named in names ran on, both variants."""
    return {k["impl"] for v in ("eager", "fused") for k in kernels[v] if k["name"] in names}


def main():
    wide = avx512()
    for name, params in (("mobilenet_v3_large", ["image=64"]),
                         ("bert_base", ["layers=1", "seq=32"])):
        # 8 lanes: OpenBLAS's GEMMs where nothing chooses per shape (the
        # rules planner) unless params.gemm asks for ours, which then runs
        # both the convolutions (im2col into its panels) and the linear
        # layers (nat_kern.h, nat_pw_default)
        kinds = ("conv2d", "conv_fused") if name == "mobilenet_v3_large" else (
            "linear", "linear_fused", "mlp_fused")
        env, kernels, planner = model(name, params + ["planner=rules"], "avx2")
        got = impls(kernels, kinds)
        check("openblas" in got and "packed_gemm" not in got,
              "%s's GEMMs under avx2 and the rules: %s" % (name, sorted(got)))
        check("gemm" not in planner, "the rules chose GEMMs: %s" % planner)
        got = impls(model(name, params + ["gemm=packed"], "avx2")[1], kinds)
        check("packed_gemm" in got and "openblas" not in got,
              "%s's GEMMs under avx2 with gemm=packed: %s" % (name, sorted(got)))
        # the default: the cost planner's choice per shape, on what it counts
        _, kernels, planner = model(name, params, "avx2")
        got, gm = impls(kernels, kinds), planner.get("gemm", {})
        check(gm.get("nodes", 0) > 0 and gm["packed"] + gm["openblas"] == gm["nodes"],
              "%s's GEMM choice under avx2: %s" % (name, planner))
        log("%s: GEMMs chosen per shape: %s" % (name, gm))
        # (a kernel row of launches on both says "mixed"; unit.test_cost
        # checks each launch).  A node's choice runs it alone, a fused
        # group's runs the group's launch: either puts its GEMM in the rows
        packed = gm["packed"] + gm["groups_packed"] > 0
        openblas = gm["openblas"] + gm["groups"] - gm["groups_packed"] > 0
        check((packed or "packed_gemm" not in got) and (openblas or "openblas" not in got) and
              (not (packed and openblas) or "mixed" in got or {"openblas", "packed_gemm"} <= got),
              "%s's GEMMs under avx2 by default: %s against %s" % (name, sorted(got), gm))
        if wide:
            check(env["cpu"].endswith(SUFFIX), "env.cpu under avx2: %r" % env["cpu"])
            check(env["device_name"] == env["cpu"], "device name under avx2: %r"
                  % env["device_name"])
            # OpenBLAS runs an AVX2 CPU's kernels too
            check(env["blas"].endswith(" Haswell"), "env.blas under avx2: %r" % env["blas"])
        else:
            check(SUFFIX not in env["cpu"], "an AVX2 CPU named narrowed: %r" % env["cpu"])
    plain = model("mobilenet_v3_large", ["image=64"], None)[0]
    check(SUFFIX not in plain["cpu"], "a plain run's env.cpu: %r" % plain["cpu"])
    if wide:
        check(model("mobilenet_v3_large", ["image=64"], "avx512")[0]["cpu"] == plain["cpu"],
              "avx512 on an AVX-512 CPU is the plain run")
    else:
        r = run(["softmax", "--iterations", "1"], "avx512")
        check(r.returncode == 2 and "no AVX-512F" in r.stderr, "avx512 without AVX-512: %r"
              % r.stderr[-300:])
    for prog, args in (("fusionbench-run", ["softmax", "--iterations", "1"]),
                       ("fusionbench-worker", ["--max-jobs", "1"])):
        env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL",)}
        env["FUSIONBENCH_NATIVE_ISA"] = "sse4"
        r = subprocess.run([fbtest.find_bin(prog)] + args, capture_output=True, text=True,
                           env=env, timeout=60)
        want = 'FUSIONBENCH_NATIVE_ISA: must be avx2, avx512 or auto, got "sse4"'
        check(r.returncode == 2 and want in r.stderr,
              "%s with a bad value: exit %d, stderr %r" % (prog, r.returncode, r.stderr[-300:]))
        log("%s refused: %s" % (prog, r.stderr.strip().splitlines()[-1]))
    print("native_isa: PASSED", flush=True)


if __name__ == "__main__":
    fbtest.main_plain(main, "native_isa")
