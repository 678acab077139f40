#!/usr/bin/env python3
"""End to end on this CPU: explanations that stand up (issue 14, docs/EXPLAIN.md).

fusionbench-run --explain --json, no database:
  1. a model of each kind of block (efficientnet_b0's depthwise blocks with
     --ci, the rest of the zoo with --zoo, both in the full tier; CI's second
     pass runs --ci) and the ten patterns (five with --ci): the waterfall's bars and
     its remainder make the job's measured difference exactly, and the bars'
     sum (the profiled rounds, launch by launch) agrees with the difference
     re-measured by plain runs in the same rounds: their 95% intervals overlap,
     or they differ by at most 8% of it (AGREE_SHARE).
     The job's own timing ran earlier; on this VM a model can sit in another
     mode then (vit_b_16: fused 0.07 ms slower in the timing, 0.03 ms faster in
     the explanation's rounds, run to run), which the remainder shows and this
     check does not hide from the log.  A workload that disagrees is measured
     once more with twice the rounds before it fails;
  2. a user graph where one fusion must lose, a depthwise conv + SiLU with the
     epilogue per output row (FB_TEST_DW_ROW_EPILOGUE=1: the schedule that lost
     efficientnet_b0's groups before it was fixed by hand): that group is lost,
     reason kernel_slowdown, and undoing it is confirmed; under the cost
     planner (params.planner "cost") no group of it is lost;
  3. (--zoo, the full tier) efficientnet_b0 under the same switch: the explanation names the depthwise
     conv + SiLU groups (our loop kernel, batch norm folded, SiLU fused) as the
     largest losses among our loop kernels' groups, and they lose more than
     without it;
  4. a graph where every fusion wins: an element chain over 8M floats with a
     bias by column (it lost 3.5x before the chain's broadcast loop was fixed:
     the explanation found it, kernel_slowdown, confirmed): no group is lost."""

import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

# The default tier explains one model per kind of block (convolutions with
# residuals, an encoder's attention, speech; depthwise with squeeze-excite in
# --ci);
# --zoo (the full tier, e2e.test_explain_cpu_zoo) the rest of the zoo (part 1)
# and efficientnet_b0 with and without the per-row epilogue (part 3).
MODELS = [("resnet18", ["image=64"]), ("bert_base", ["seq=32", "layers=2"]),
          ("whisper_tiny", ["frames=200", "layers=1"])]
# efficientnet_b0's 35 groups (about 70 s of a 2-vCPU VM): `--ci`, the full
# tier's and CI's second pass (e2e.test_explain_cpu_ci)
MODELS_CI = [("efficientnet_b0", ["image=64"])]
ZOO_REST = [("resnet50", ["image=64"]), ("mobilenet_v2", ["image=64"]),
            ("mobilenet_v3_large", ["image=64"]), ("convnext_tiny", ["image=64"]),
            ("vgg16", ["image=32"]), ("vit_b_16", ["image=32", "layers=2"]),
            ("gpt2", ["seq=32", "layers=2"])]
# The ten patterns, one of each kind of kernel in the default tier, their
# siblings with --ci (CI's second pass), for the default tier's time.
PATTERNS = ["gemm_bias_relu", "conv_bn_relu", "layernorm", "attention", "elementwise_chain"]
PATTERNS_CI = ["gemm_bias_gelu", "conv_relu_conv", "add_layernorm", "softmax", "mlp"]


def explain(workload, params=(), iterations=20, threads=None, env=None, grouped=True):
    """The explanation of one job; the rules' groups unless params name a
    planner (these checks are about the rules' fusions and the sums).
    grouped: the fused plan must have a group to explain."""
    argv = [fbtest.find_bin("fusionbench-run"), workload, "--explain", "--json",
            "--iterations", str(iterations), "--warmup", "3"]
    if not any(p.startswith("planner=") for p in params):
        params = list(params) + ["planner=rules"]
    for p in params:
        argv += ["--param", p]
    if threads:
        argv += ["--threads", str(threads)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    check(r.returncode == 0, "%s: %s" % (workload, r.stderr[-2000:]))
    ex = json.loads(r.stdout)["result"]["explain"]
    check(not grouped or "unavailable" not in ex, "%s: %r" % (workload, ex))
    return ex


# The bars against the re-measured difference: their 95% intervals overlap, or
# they differ by at most this share of it.  Layer norm's bars (launch by
# launch, 9 eager launches) read 4-9% above the plain runs, intervals apart,
# while the profiled runs followed their own plan more often than the plain
# ones did (CI failed on it); with the order balanced (nat_ex_round_step)
# five runs on an AMD EPYC VM read -2.3 to +1.3%.
AGREE_SHARE = 0.08


def agrees(w):
    lo, hi = w["remeasured_ci95"]
    elo, ehi = w["explained_ci95"]
    close = abs(w["explained_ms"] - w["remeasured_ms"]) <= AGREE_SHARE * abs(w["remeasured_ms"])
    return (elo <= hi and lo <= ehi) or close


def check_sums(name, params):
    for attempt, its in enumerate((20, 40)):
        ex = explain(name, params, its)
        w = ex["waterfall"]
        bars = (w["won_ms"] + w["lost_ms"] + w["within_noise_ms"] + w["outside_groups_ms"] +
                w["overhead_ms"])
        check(abs(bars - w["explained_ms"]) < 1e-9 and
              abs(bars + w["unexplained_ms"] - w["measured_ms"]) < 1e-9,
              "%s: the bars and the remainder make the measured difference: %r" % (name, w))
        if agrees(w):
            break
        log("%s: re-measured %.3f %r, explained %.3f %r: measuring again" % (
            name, w["remeasured_ms"], w["remeasured_ci95"], w["explained_ms"],
            w["explained_ci95"]))
    check(agrees(w), "%s: explained %.3f %r against re-measured %.3f %r" % (
        name, w["explained_ms"], w["explained_ci95"], w["remeasured_ms"], w["remeasured_ci95"]))
    s = ex["summary"]
    log("%-18s job's timing %7.3f ms [%7.3f, %7.3f]; explanation's rounds %7.3f [%7.3f, %7.3f],"
        " the bars %7.3f [%7.3f, %7.3f]; remainder %7.3f; %d won %d lost %d noise %s" % (
            name, w["measured_ms"], w["measured_ci95"][0], w["measured_ci95"][1],
            w["remeasured_ms"], w["remeasured_ci95"][0], w["remeasured_ci95"][1],
            w["explained_ms"], w["explained_ci95"][0], w["explained_ci95"][1],
            w["unexplained_ms"], s["won"], s["lost"], s["within_noise"], s["lost_by_reason"]))


DW = {"tensors": [{"name": "input", "kind": "input", "shape": [1, 1152, 7, 7]},
                  {"name": "w", "kind": "weight", "shape": [1152, 1, 5, 5]},
                  {"name": "b", "kind": "weight", "shape": [1152], "init": "small"}],
      "nodes": [{"op": "conv2d", "name": "dw", "inputs": [0, 1, 2], "pad": [2, 2],
                 "groups": 1152},
                {"op": "silu", "inputs": [3]}]}
CHAIN = {"tensors": [{"name": "input", "kind": "input", "shape": [64, 131072]},
                     {"name": "b", "kind": "weight", "shape": [131072]}],
         "nodes": [{"op": "add", "inputs": [0, 1]}, {"op": "relu", "inputs": [2]},
                   {"op": "mul", "inputs": [3, 1]}, {"op": "sigmoid", "inputs": [4]}]}
ROW = {"FB_TEST_DW_ROW_EPILOGUE": "1"}


def depthwise_groups(ex):
    """The groups of a depthwise conv (our loop kernel) with SiLU fused."""
    return [g for g in ex["groups"] if g["fused_impl"] == ["loop"] and g["ops"][0] == "conv2d" and
            "silu" in g["ops"]]


def main():
    if "--ci" in sys.argv:
        for name, params in MODELS_CI:
            check_sums(name, params)
        for name in PATTERNS_CI:
            check_sums(name, [])
        print("explain_cpu --ci: PASSED", flush=True)
        return
    if "--zoo" in sys.argv:
        for name, params in ZOO_REST:
            check_sums(name, params)
        efficientnet_row_epilogue()
        print("explain_cpu --zoo: PASSED", flush=True)
        return
    for name, params in MODELS:
        check_sums(name, params)
    for name in PATTERNS:
        check_sums(name, [])

    # Judged at 50 rounds; on this 2-vCPU VM one run in several comes out within
    # noise (the verdict, or the undo's own measurement: recovered +0.178 ms
    # [-0.045, +0.342] once), so a second measurement is taken then (as
    # bert_base's above) and both must hold in it.
    for attempt in (1, 2):
        ex = explain("graph", ["graph=" + json.dumps(DW)], 50, threads=1, env=ROW)
        g = ex["groups"][0]
        undone = (g.get("counterfactual") or {}).get("verdict")
        if (g["verdict"] == "lost" and undone == "confirmed") or attempt == 2:
            break
        log("depthwise conv + SiLU judged %s, its undo %s, at 50 rounds: measuring again"
            % (g["verdict"], undone))
    check_eq((len(ex["groups"]), g["verdict"], (g.get("reason") or {}).get("code")),
             (1, "lost", "kernel_slowdown"), "the depthwise conv + SiLU with its epilogue per row")
    check_eq(g["counterfactual"]["verdict"], "confirmed", "undoing it recovers the time: %r" % g)
    log("depthwise conv + SiLU, epilogue per row: fused %.3f ms against %.3f eager, %s; "
        "undone: %+.3f ms %r, %s" % (g["fused_ms"], g["eager_ms"], g["reason"]["code"],
                                     g["counterfactual"]["recovered_ms"],
                                     g["counterfactual"]["recovered_ci95"],
                                     g["counterfactual"]["verdict"]))

    # the cost planner times that group's forms and does not keep the loss:
    # the graph's one group is split (the SiLU on its own) or unfused
    # (a cache of its own: the switch changes the kernel, not the build).
    # The planner keeps a group fused unless another form is clearly faster;
    # on this 2-vCPU VM under load (a default-tier run here, 2026-11-27,
    # with compiles beside it: resnet18's 0.2 ms difference read as 21 ms in
    # the explanation's rounds) it once kept it, so a kept loss is decided
    # once more, afresh (a new cache), before the check.
    for attempt in (1, 2):
        cache = os.path.join(tempfile.mkdtemp(prefix="fb-explain-cpu-"), "plan-cache.json")
        ex = explain("graph", ["graph=" + json.dumps(DW), "planner=cost"], 20, threads=1,
                     env=dict(ROW, FUSIONBENCH_PLAN_CACHE=cache), grouped=False)
        lost = [g for g in ex.get("groups", []) if g["verdict"] == "lost"]
        if not lost:
            break
        log("the cost planner kept the planted loss (attempt %d): %r" % (attempt, ex["summary"]))
    check(not lost, "under the cost planner the planted loss is gone: %r" % (
        ex.get("unavailable") or ex.get("summary")))
    log("the same graph under the cost planner: %r" % (ex.get("unavailable") or ex["summary"]))

    chain_wins()
    print("explain_cpu: PASSED", flush=True)


def efficientnet_row_epilogue():
    fixed = explain("efficientnet_b0", ["image=64"], 20, threads=1)
    old = explain("efficientnet_b0", ["image=64"], 20, threads=1, env=ROW)
    dw_old = depthwise_groups(old)
    check(len(dw_old) >= 10, "efficientnet_b0's depthwise groups: %d" % len(dw_old))
    # The switch changes only our loop kernels' schedule: among their groups the
    # ten largest losses must be the depthwise ones.  (Groups of other kernels
    # may lose too, for their own reasons: on AMD EPYC, OpenBLAS's 1x1
    # convolution with BN and SiLU fused lost some of the ten largest overall.)
    # At least 8 of those 10 are depthwise groups, none of them judged won and
    # at least 2 judged lost.  Each verdict rests on 20 rounds of one group: on
    # this 2-vCPU VM, from 2 to 5 of them came out lost and the rest within
    # noise, run to run (the single group above is judged lost and confirmed by
    # its counterfactual; the sum below compares the two schedules over all
    # groups).
    loops = [g for g in old["groups"] if g["fused_impl"] == ["loop"]]
    worst = sorted(loops, key=lambda g: g["delta_ms"])[:10]
    named = [g for g in worst if g in dw_old]
    lost = [g for g in named if g["verdict"] == "lost"]
    won = [g for g in named if g["verdict"] == "won"]
    check(len(named) >= 8 and len(lost) >= 2 and not won,
          "the ten largest losses of our loop kernels are depthwise conv + SiLU groups, none "
          "judged won, some lost: %r" % ([(g["ops"], g["fused_impl"], g["verdict"])
                                          for g in worst]))
    loss = lambda gs: -sum(g["delta_ms"] for g in gs)  # noqa: E731
    check(loss(dw_old) > loss(depthwise_groups(fixed)),
          "the per-row epilogue loses more: %.3f against %.3f ms" % (
              loss(dw_old), loss(depthwise_groups(fixed))))
    log("efficientnet_b0 at 64x64, 1 thread: with the per-row epilogue %d of its loop kernels' 10 "
        "largest losses are depthwise conv + SiLU groups (%d judged lost), losing %.3f ms in all "
        "(%.3f ms per plane, as today)" % (len(named), len(lost), loss(dw_old),
                                           loss(depthwise_groups(fixed))))


def chain_wins():
    # A verdict of 20 rounds: CI's VM once judged the chain's one group within
    # noise (memory bandwidth shared with its neighbours), so a group not yet
    # judged won is measured once more, with 60 rounds, before the check.
    for rounds in (20, 60):
        ex = explain("graph", ["graph=" + json.dumps(CHAIN)], rounds)
        if ex["summary"]["lost"] or ex["summary"]["won"]:
            break
        log("the element chain judged %r at %d rounds: measuring again" % (ex["summary"], rounds))
    check(ex["summary"]["lost"] == 0 and ex["summary"]["won"] >= 1,
          "every fusion wins: %r" % ex["summary"])
    log("an element chain over 8M floats: %r" % ex["summary"])


if __name__ == "__main__":
    fbtest.main_plain(main, "explain_cpu")
