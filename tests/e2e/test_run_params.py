#!/usr/bin/env python3
"""End to end: fusionbench-run takes only the params a workload declares.

A native workload's catalog entry lists every param a job of it may name (its
own and the engine's: docs/API.md); any other key was once silently ignored
(resnet18 given the inductor engine's image_size=112 ran at 224x224).
Checked: --catalog-json lists each native workload's params; a key outside
them stops fusionbench-run with exit status 2 naming the key, the workload
and what it takes, before anything runs; the workload's own keys pass.
Needs no database."""

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

ENGINE = ["threads", "seed", "planner", "disable_rules", "unfuse", "gemm", "tf32",
          "time_budget_s", "gelu_epilogue", "tc_attention"]


def run(args):
    return subprocess.run([fbtest.find_bin("fusionbench-run")] + args, capture_output=True,
                          text=True, timeout=60)


def main():
    r = run(["--catalog-json"])
    check(r.returncode == 0, "--catalog-json: %s" % r.stderr[-300:])
    cat = {(w["name"], w["engine"]): w for w in json.loads(r.stdout)}
    check_eq(cat[("resnet18", "native")]["params"],
             ["image", "classes", "weights", "input"] + ENGINE, "resnet18's params")
    check_eq(cat[("softmax", "native")]["params"], ["rows", "cols"] + ENGINE, "softmax's params")
    check_eq(cat[("bert_base", "native")]["params"][:6],
             ["seq", "layers", "hidden", "heads", "inter", "vocab"], "bert_base's own params")
    native = [w for (n, e), w in cat.items() if e == "native"]
    check(native and all(w.get("params", [])[-len(ENGINE):] == ENGINE for w in native),
          "every native workload declares the engine's params")

    for workload, param in (("resnet18", "image_size=112"), ("softmax", "m=8"),
                            ("bert_base", "image=64"), ("gemm_bias_relu", "rules_off=x")):
        key = param.split("=")[0]
        r = run([workload, "--param", param, "--dry-run"])
        want = "fusionbench-run: params.%s is not a parameter of %s (engine native), which takes: " \
            % (key, workload)
        check(r.returncode == 2 and r.stderr.startswith(want),
              "%s --param %s: exit %d, stderr %r" % (workload, param, r.returncode, r.stderr))
        check(r.stdout == "", "nothing printed as the spec")
        log("refused: %s" % r.stderr.strip()[:140])
    for workload, params in (("resnet18", ["image=112", "classes=10", "threads=1"]),
                             ("softmax", ["rows=8", "cols=8", "planner=rules"]),
                             ("attention", ["heads=2", "seq=16", "head_dim=8", "causal=1"])):
        args = [workload, "--dry-run"]
        for p in params:
            args += ["--param", p]
        r = run(args)
        check(r.returncode == 0, "%s %s: %s" % (workload, params, r.stderr[-300:]))
        got = json.loads(r.stdout)["params"]
        check_eq(sorted(got), sorted(p.split("=")[0] for p in params), "%s's params" % workload)
    # the inductor engine's models declare theirs through its probe (where
    # this machine's Python offers the engine)
    ind = cat.get(("resnet18", "inductor"))
    offered = "inductor" in run(["--list"]).stdout
    if not offered:
        log("the inductor engine is not offered here: its params not checked")
    else:
        r = run(["resnet18", "--engine", "inductor", "--param", "image=64", "--dry-run"])
        want = ("fusionbench-run: params.image is not a parameter of resnet18 (engine inductor), "
                "which takes: image_size, num_classes, unfuse, time_budget_s, tf32, "
                "keep_output_code, threads")
        check(r.returncode == 2 and r.stderr.strip() == want,
              "inductor resnet18 --param image=64: exit %d, %r" % (r.returncode, r.stderr))
        r = run(["resnet18", "--engine", "inductor", "--param", "image_size=64", "--dry-run"])
        check(r.returncode == 0, "inductor resnet18 image_size: %s" % r.stderr[-300:])
    # an uploaded model's jobs take any key (the server sets params.model; its
    # entry once inherited the first zoo model's list and refused it)
    for engine in ("native", "inductor") if offered else ("native",):
        r = run(["model.7", "--engine", engine, "--param", 'model={"id": 7}', "--param",
                 "seed=1", "--dry-run"])
        check(r.returncode == 0, "model.7 on %s with params.model: %s" % (engine, r.stderr[-300:]))
    check(ind is None, "--catalog-json is the native engine's alone")
    print("run_params: PASSED", flush=True)


if __name__ == "__main__":
    fbtest.main_plain(main, "run_params")
