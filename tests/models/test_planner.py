#!/usr/bin/env python3
"""The cost planner (params.planner "cost", issue 27; docs/EXPLAIN.md, "The
cost planner") on planted graphs, through fusionbench-run on one thread:

- a depthwise convolution + batch norm + SiLU over many channels of a small
  plane, a fusion the rules make and lose (the epilogue costs the depthwise
  kernel more than the pass it saves): under "rules" one fused launch; under
  "cost" the SiLU is split off (the convolution keeps its folded batch norm),
  or the group unfused;
- an element chain over a large tensor, where fusion wins (three passes over
  memory become one): fused under both;
- the decision cache: the same job again finds every decision cached and
  measures none; another build (FUSIONBENCH_BUILD_ID) measures again;
- the cost model: with the decisions dropped, measured while it learns,
  then the chain predicted, the depthwise group measured with the model's
  predictions reported (or predicted as a loss);
- both plans' outputs pass the accuracy gate; a bad params.planner is refused
  naming the field.

    test_planner.py FUSIONBENCH_RUN
"""

import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def graph_dw(channels, hw):
    """Depthwise 3x3 convolution, batch norm, SiLU over [1, channels, hw, hw]."""
    c = channels
    return {
        "tensors": [
            {"name": "input", "kind": "input", "shape": [1, c, hw, hw]},
            {"name": "w", "kind": "weight", "shape": [c, 1, 3, 3]},
            {"name": "bn.w", "kind": "weight", "shape": [c], "init": "one"},
            {"name": "bn.b", "kind": "weight", "shape": [c], "init": "small"},
            {"name": "bn.m", "kind": "weight", "shape": [c], "init": "small"},
            {"name": "bn.v", "kind": "weight", "shape": [c], "init": "var"},
        ],
        "nodes": [
            {"op": "conv2d", "name": "dw", "inputs": [0, 1], "pad": [1, 1], "groups": c},
            {"op": "batch_norm", "name": "bn", "inputs": [6, 2, 3, 4, 5], "eps": 1e-5},
            {"op": "silu", "name": "act", "inputs": [7]},
        ],
    }


def graph_chain(n, depth=1):
    """(x * w + b, ReLU) depth times over n elements: one element chain."""
    nodes, last = [], 0
    for d in range(depth):
        t = 3 + 3 * d  # the first output's tensor index: inputs and weights come first
        nodes += [{"op": "mul", "name": "scale%d" % d, "inputs": [last, 1]},
                  {"op": "add", "name": "shift%d" % d, "inputs": [t, 2]},
                  {"op": "relu", "name": "act%d" % d, "inputs": [t + 1]}]
        last = t + 2
    return {
        "tensors": [
            {"name": "input", "kind": "input", "shape": [1, n]},
            {"name": "w", "kind": "weight", "shape": [1, n], "init": "one"},
            {"name": "b", "kind": "weight", "shape": [1, n], "init": "small"},
        ],
        "nodes": nodes,
    }


class Checks:
    def __init__(self):
        self.failed = 0

    def check(self, ok, what):
        print("%s: %s" % ("ok" if ok else "FAIL", what), flush=True)
        self.failed += not ok


def run(binary, graph, planner, env, extra=()):
    """(exit status, result or None, stderr) of one fusionbench-run of graph."""
    params = ["--param", "graph=" + json.dumps(graph, separators=(",", ":")),
              "--param", "planner=" + planner]
    r = subprocess.run([binary, "graph", "--threads", "1", "--iterations", "10", "--warmup", "2",
                        "--json"] + params + list(extra),
                       capture_output=True, text=True, timeout=600, env=env)
    try:
        return r.returncode, json.loads(r.stdout)["result"], r.stderr
    except ValueError:
        return r.returncode, None, r.stderr


def fused_launches(res):
    """(names of the fused variant's kernel rows' ops per launch, planner report)."""
    fv = next(v for v in res["variants"] if v["name"] == "fused")
    groups = [g for g in fv.get("fusion_groups") or []]
    return fv, groups, (res.get("graph") or {}).get("planner") or {}


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else ""
    if not os.access(binary, os.X_OK):
        print("skipped: no fusionbench-run at %r" % binary)
        sys.exit(SKIP)
    c = Checks()
    tmp = tempfile.mkdtemp(prefix="fb-planner-")
    env = dict(os.environ, FUSIONBENCH_PLAN_CACHE=os.path.join(tmp, "plan-cache.json"),
               FUSIONBENCH_BUILD_ID="test-build-a")

    # the planted loss: fused by the rules, split (or unfused) by the cost planner
    dw = graph_dw(DW_CHANNELS, DW_HW)
    rc, res, err = run(binary, dw, "rules", env)
    c.check(res is not None and rc == 0, "rules: ran (%s)" % err[-500:])
    if res:
        fv, groups, plan = fused_launches(res)
        c.check(plan.get("planner") == "rules" and
                [g.get("rule") for g in groups] == ["bn_fold+epilogue"],
                "rules: the convolution, batch norm and SiLU fused into one launch (%s, %s)" % (
                    [g.get("rule") for g in groups], plan))
    rc, res, err = run(binary, dw, "cost", env)
    c.check(res is not None and rc == 0, "cost: ran, the gate passed (%s)" % err[-500:])
    if res:
        fv, groups, plan = fused_launches(res)
        c.check(plan.get("planner") == "cost" and plan.get("groups") == 1 and
                plan.get("measured") == 1 and plan.get("kept") == 0 and
                plan.get("split", 0) + plan.get("unfused", 0) == 1 and
                "bn_fold+epilogue" not in [g.get("rule") for g in groups],
                "cost: the SiLU is no longer fused (%s, groups %s)" % (
                    plan, [g.get("rule") for g in groups]))
    rc, res, err = run(binary, dw, "cost", env)
    if res:
        _, _, plan = fused_launches(res)
        c.check(plan.get("cached") == 1 and plan.get("measured") == 0 and
                plan.get("kept") == 0,
                "the same job again: its decision from the cache, none measured (%s)" % plan)
    rc, res, err = run(binary, dw, "cost", dict(env, FUSIONBENCH_BUILD_ID="test-build-b"))
    if res:
        _, _, plan = fused_launches(res)
        c.check(plan.get("cached") == 0 and plan.get("measured") == 1,
                "another build: measured again (%s)" % plan)
    cache = json.load(open(env["FUSIONBENCH_PLAN_CACHE"]))
    c.check(len(cache.get("entries", {})) == 2, "the cache holds one decision per build (%d)" %
            len(cache.get("entries", {})))

    # the planted win: kept fused
    chain = graph_chain(CHAIN_N)
    rc, res, err = run(binary, chain, "cost", env)
    c.check(res is not None and rc == 0, "the element chain under cost: ran (%s)" % err[-500:])
    if res:
        fv, groups, plan = fused_launches(res)
        c.check(plan.get("kept") == 1 and [g.get("rule") for g in groups] == ["element_chain"],
                "a fusion that wins stays fused (%s, %s)" % (plan, groups))

    # the cost model (gr_costmodel.h): each measurement teaches it.  With the
    # decisions dropped from the cache before each job (its calibration kept),
    # a group is measured while its launches' classes hold fewer than 4
    # samples; then a chain of 9 ops, whose fused launch moves a third of the
    # bytes of its eager ones, is predicted, and the depthwise group, whose forms are
    # within the model's error of each other, is measured again with the
    # model's predictions reported against what was measured.
    menv = dict(env, FUSIONBENCH_BUILD_ID="test-build-model")
    path = env["FUSIONBENCH_PLAN_CACHE"]
    deep = graph_chain(CHAIN_N, 3)  # eager moves 3x the bytes: no noise makes it unsure
    for name, graph in (("the element chain", deep), ("the depthwise group", dw)):
        plans = []
        for _ in range(5):
            doc = json.load(open(path))
            doc["entries"] = {}
            with open(path, "w") as f:
                json.dump(doc, f)
            rc, res, err = run(binary, graph, "cost", menv)
            plans.append(fused_launches(res)[2] if res else {"error": err[-300:]})
        c.check(all(p.get("measured") == 1 and p.get("predicted") == 0 for p in plans[:4]),
                "%s: measured while the model learns (%s)" % (name, plans[:4]))
        last = plans[4]
        if graph is deep:
            c.check(last.get("predicted") == 1 and last.get("measured") == 0 and
                    last.get("kept") == 1,
                    "%s: then predicted, and kept fused (%s)" % (name, last))
        else:
            model = last.get("model") or {}
            err_ok = 0 <= model.get("median_error", -1) < 1.0
            c.check((last.get("measured") == 1 and model.get("pairs") == 3 and err_ok) or
                    (last.get("predicted") == 1 and last.get("kept") == 0),
                    "%s: measured again with the predictions of its 3 forms reported within 2x"
                    " (or predicted as the loss it is) (%s)" % (name, last))
    cal = json.load(open(path)).get("calibration", {})
    c.check(len(cal) == 3 and all(v.get("classes") for v in cal.values()),
            "the cache holds a calibration per build (a, b and the model's) (%d)" % len(cal))

    rc, res, err = run(binary, chain, "greedy", env)
    c.check(rc != 0 and "params.planner" in err, "a bad planner is refused naming the field: %s"
            % err.strip()[-300:])
    print("all checks passed" if not c.failed else "%d checks failed" % c.failed)
    sys.exit(1 if c.failed else 0)


DW_CHANNELS, DW_HW = 8192, 1
CHAIN_N = 1 << 22

if __name__ == "__main__":
    main()
