#!/usr/bin/env python3
"""The cost planner against the rules over the native zoo (issue 27's targets).

    python3 bench/planner.py --bin build/worker/fusionbench-run \
        [--models resnet50,efficientnet_b0] [--batch 1,8] [--threads 1,2] \
        [--rounds 2] [--iterations 10] [--param image=112] [--json-dir DIR] [--bound] > planner.md

For each model, batch and thread count, fusionbench-run runs the job under
`params.planner` "rules" and "cost" in alternating order (rules first in odd
rounds, cost first in even ones), each run its own eager and fused variants
interleaved with the accuracy gate.  One plan cache serves the whole run,
empty at its start, as a worker's would: a configuration's first cost run
decides cold (its groups' shapes and threads are new: predicted where the
cost model, calibrated by the models before it, is sure, else measured), the
later ones from the cache.

Per configuration it prints: each planner's eager/fused speedup (median over
the rounds) with every run's verdict (`faster`, `no_difference`, `slower`);
what the cost planner buys over the rules, the ratio of the two speedups (> 1
is better; each speedup is taken within its run, eager and fused interleaved,
so the machine's drift between runs cancels, which it does not in a ratio of
fused times from different runs); the groups the cost planner kept, split and unfused;
how its cold run decided (measured, predicted, cached) and, where the cost
model predicted groups it then measured, its rank correlation and median
error against them; its deciding time cold and cached; the plan build time
of each planner; and
the ceiling of any planner: the share of eager's profiled time in launches
other than GEMMs and convolutions (elementwise, reductions, normalizations),
and eager/fused if fusion made all of it free.  With --bound, one more rules
run per configuration, explained: the rules' losing groups, all of them undone
at once against the rules' plan, and from the recovered time's upper 95% bound
the cap on what any plan of the rules' groups (the cost planner's among them)
could gain over the rules.
Under the cost planner a job's params.gemm "auto" also chooses the GEMM of
each convolution and linear by timing (docs/EXPLAIN.md, "Whose GEMM"), so its
eager variant may run other GEMMs than the rules' does: --param
gemm=openblas (or packed) pins them and compares the fusion decisions alone.
Needs only python3.  Takes the CPU: run nothing else meanwhile."""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbparams  # noqa: E402

MODELS = ["resnet18", "resnet50", "mobilenet_v2", "mobilenet_v3_large", "vgg16",
          "efficientnet_b0", "convnext_tiny", "vit_b_16", "bert_base", "gpt2", "whisper_tiny"]
PLANNERS = ("rules", "cost")


def run_one(args, model, batch, threads, planner, cache, explain=False):
    cmd = [args.bin, model, "--json", "--iterations", str(args.iterations), "--warmup",
           str(args.warmup), "--threads", str(threads), "--batch", str(batch),
           "--param", "planner=" + planner, "--timeout", str(args.timeout)]
    if explain:
        cmd.append("--explain")
    for p in fbparams.for_workload(args.bin, model, args.param):
        cmd += ["--param", p]
    env = dict(os.environ, FUSIONBENCH_PLAN_CACHE=cache)
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False, env=env)
    wall = time.monotonic() - t0
    if not p.stdout.strip():
        raise RuntimeError(f"{model} {planner}: {p.stderr.strip()[-400:]}")
    doc = json.loads(p.stdout)
    res = doc["result"]
    var = {v["name"]: v for v in res["variants"]}
    for name, v in var.items():
        if v["status"] != "ok":
            raise RuntimeError(f"{model} {planner}: variant {name} {v['status']}")
    comp = res["comparison"]
    cats = var["eager"].get("categories_ms") or {}
    return {
        # eager's launches other than GEMMs and convolutions, the most that
        # any fusion of memory-bound work could take away
        "eager_memory_ms": sum(v for k, v in cats.items() if k != "gemm"),
        "eager_profiled_ms": sum(cats.values()),
        "planner": planner,
        "wall_s": wall,
        "eager_ms": var["eager"]["latency_ms"]["median"],
        "fused_ms": var["fused"]["latency_ms"]["median"],
        "speedup": comp["speedup"]["fused"],
        "ci95": comp["speedup_ci95"]["fused"],
        "change": comp["change"]["fused"],
        "plan_ms": res.get("plan_ms"),
        "graph_planner": (res.get("graph") or {}).get("planner"),
        "doc": doc,
    }


SHORT = {"faster": "F", "no_difference": "=", "slower": "**S**"}


def config(args, model, batch, threads, cache_dir):
    cache = os.path.join(cache_dir, "plan-cache.json")
    runs = {p: [] for p in PLANNERS}
    for rnd in range(args.rounds):
        order = PLANNERS if rnd % 2 == 0 else tuple(reversed(PLANNERS))
        for planner in order:
            runs[planner].append(run_one(args, model, batch, threads, planner, cache))
    if args.bound:
        runs["bound"] = [run_one(args, model, batch, threads, "rules", cache, explain=True)]
    return runs


def bound(runs):
    """What any plan that keeps, splits or unfuses the rules' groups could
    gain over the rules, measured: the explanation of the rules' plan names
    the groups that lost (fused slower than their own launches unfused), and
    undoes them all at once against the rules' plan.  The cost planner's plans
    lie in that space (it decides only among the rules' groups), so the
    recovered time's upper 95% bound over the rules' fused time caps its gain
    (a split form, between fused and unfused, is not tried by the
    explanation: the cap assumes it gains no more than unfusing)."""
    if "bound" not in runs:
        return None
    ex = runs["bound"][0]["doc"]["result"]["explain"]
    w, allu = ex["waterfall"], ex.get("all_lost_undone")
    out = {"lost": ex["summary"]["lost"], "lost_ms": w["lost_ms"],
           "within_noise_ms": w["within_noise_ms"], "fused_ms": w["fused_ms"],
           "recovered_ms": 0.0, "recovered_ci95": [0.0, 0.0], "verdict": "none lost"}
    if not allu:  # one lost group: its own counterfactual is the undo of all
        one = [g.get("counterfactual") for g in ex.get("groups", []) if g.get("verdict") == "lost"]
        allu = one[0] if len(one) == 1 else None
        if len(one) == 1 and not allu:
            out["verdict"] = "not undone"
    if allu:
        out.update(fused_ms=allu["fused_ms"], recovered_ms=allu["recovered_ms"],
                   recovered_ci95=allu["recovered_ci95"], verdict=allu["verdict"])
    hi = max(out["recovered_ci95"][1], 0.0)
    out["cap"] = out["fused_ms"] / (out["fused_ms"] - hi) if hi < out["fused_ms"] else float("inf")
    return out


def summary(model, batch, threads, runs):
    r, c = runs["rules"], runs["cost"]
    sp = {p: statistics.median(x["speedup"] for x in runs[p]) for p in PLANNERS}
    fused = {p: statistics.median(x["fused_ms"] for x in runs[p]) for p in PLANNERS}
    eager = statistics.median(x["eager_ms"] for x in r + c)
    share = statistics.median(x["eager_memory_ms"] / x["eager_profiled_ms"] for x in r + c
                              if x["eager_profiled_ms"] > 0)
    gp = [x["graph_planner"] or {} for x in c]
    cold = gp[0].get("decide_ms") if gp else None
    accuracy = (gp[0].get("model") or {}) if gp else {}
    cached = [g.get("decide_ms") for g in gp[1:] if g.get("measured", 1) == 0]
    last = gp[-1] if gp else {}
    plan_r = statistics.median(x["plan_ms"] for x in r)
    plan_c = statistics.median(x["plan_ms"] for x in c[1:]) if len(c) > 1 else None
    return {
        "model": model, "batch": batch, "threads": threads, "eager_ms": eager,
        "speedup": sp, "fused_ms": fused, "memory_share": share,
        # eager/fused if every memory-bound launch of eager cost nothing
        "ceiling": 1.0 / (1.0 - share) if share < 1 else float("inf"),
        "verdicts": {p: [x["change"] for x in runs[p]] for p in PLANNERS},
        "cost_vs_rules": fused["cost"] / fused["rules"],
        # what the cost planner buys over the rules: the ratio of the two
        # speedups, each taken within its own run (eager and fused
        # interleaved), so the machine's drift between runs cancels
        "gain": sp["cost"] / sp["rules"],
        "groups": {k: last.get(k) for k in ("groups", "kept", "split", "unfused")},
        "decide_ms_cold": cold,
        "cold": {k: gp[0].get(k) for k in ("measured", "predicted", "cached")} if gp else {},
        "cost_model": accuracy,
        "decide_ms_cached": statistics.median(cached) if cached else None,
        "plan_ms_rules": plan_r, "plan_ms_cost_cached": plan_c,
        "plan_ms_cost_cold": c[0]["plan_ms"] if c else None,
        "bound": bound(runs),
    }


def fmt_row(s):
    def verd(p):
        return " ".join(SHORT.get(v, v) for v in s["verdicts"][p])
    g = s["groups"]
    cached = f"{s['decide_ms_cached']:.0f}" if s["decide_ms_cached"] is not None else "-"
    m, cold = s["cost_model"], s["cold"]
    acc = (f"{m['rank_correlation']:.2f} / {100 * m['median_error']:.0f}% ({m['pairs']})"
           if "rank_correlation" in m and "median_error" in m else "-")
    how = f"{cold.get('measured')}/{cold.get('predicted')}/{cold.get('cached')}"
    planc = f"{s['plan_ms_cost_cached']:.0f}" if s["plan_ms_cost_cached"] is not None else "-"
    return (f"| {s['model']} | {s['batch']} | {s['threads']} | {s['eager_ms']:.2f} | "
            f"{s['speedup']['rules']:.3f} {verd('rules')} | {s['speedup']['cost']:.3f} {verd('cost')} | "
            f"{s['gain']:.3f} | {100 * s['memory_share']:.0f}% {s['ceiling']:.2f} | {g['kept']}/{g['split']}/{g['unfused']} of {g['groups']} | "
            f"{how} | {acc} | {s['decide_ms_cold']:.0f} / {cached} | {s['plan_ms_rules']:.0f} / "
            f"{s['plan_ms_cost_cold']:.0f} / {planc} |" + fmt_bound(s["bound"]))


def fmt_bound(b):
    if b is None:
        return ""
    lo, hi = b["recovered_ci95"]
    return (f" {b['lost']}, {b['lost_ms']:+.3f} | {b['recovered_ms']:+.3f} [{lo:+.3f}, {hi:+.3f}] "
            f"{b['verdict']} of {b['fused_ms']:.2f} | {b['cap']:.3f} |")


HEADER = ("| model | batch | threads | eager ms | rules: eager/fused, verdicts | "
          "cost: eager/fused, verdicts | cost over rules | eager memory-bound, ceiling | "
          "kept/split/unfused | cold: measured/predicted/cached | model: rank corr. / "
          "median error (pairs) | "
          "deciding ms cold / cached | plan ms rules / cost cold / cost cached |\n"
          "|---|---:|---:|---:|---|---|---:|---:|---|---|---|---:|---:|")
# --bound: the explanation of the rules' plan (bound() above)
HEADER_BOUND = (" rules' lost groups, ms | all lost undone: recovered ms [95% CI], of fused ms "
                "| cap on any plan over rules |", "---|---|---:|")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="fusionbench-run")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", default="1,8", help="batches, comma-separated")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma-separated")
    ap.add_argument("--rounds", type=int, default=2, help="runs per planner, alternating")
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=1200, help="each run's limit, seconds")
    ap.add_argument("--param", action="append", default=[], help="key=value for every run of a model that takes it")
    ap.add_argument("--json-dir", help="write each configuration's runs here")
    ap.add_argument("--bound", action="store_true",
                    help="one more rules run per configuration, explained: the most any plan "
                         "of the rules' groups could gain over the rules, measured")
    args = ap.parse_args()
    if args.rounds < 2:
        ap.error("--rounds must be at least 2 (a cold and a cached cost run)")
    models = [m for m in args.models.split(",") if m]
    batches = [int(b) for b in args.batch.split(",")]
    threads = [int(t) for t in args.threads.split(",")]
    if args.json_dir:
        os.makedirs(args.json_dir, exist_ok=True)
    cmd = os.environ.get("FB_BENCH_COMMAND") or " ".join(["python3", "bench/planner.py"] + sys.argv[1:])
    print(f"`{cmd}`: {args.rounds} runs per planner, alternating, {args.iterations} iterations "
          f"each; verdicts F faster, = no difference, S slower.\n")
    head = HEADER
    if args.bound:
        top, rule = head.split("\n")
        head = top + HEADER_BOUND[0] + "\n" + rule + HEADER_BOUND[1]
    print(head, flush=True)
    out, failed = [], 0
    with tempfile.TemporaryDirectory(prefix="fb-planner-") as cache_dir:
        for m in models:
            for b in batches:
                for t in threads:
                    try:
                        runs = config(args, m, b, t, cache_dir)
                    except RuntimeError as e:
                        failed += 1
                        print(f"| {m} | {b} | {t} | error: {e} | | | | | | | | | |", flush=True)
                        continue
                    s = summary(m, b, t, runs)
                    out.append(s)
                    print(fmt_row(s), flush=True)
                    if args.json_dir:
                        with open(os.path.join(args.json_dir, f"{m}-b{b}-t{t}.json"), "w") as f:
                            json.dump({"summary": s, "runs": runs}, f)
    slower = [f"{s['model']} b{s['batch']} t{s['threads']}" for s in out
              if "slower" in s["verdicts"]["cost"]]
    print(f"\n{len(out)} configurations; under `cost` fused slower than eager in {len(slower)}"
          + (": " + ", ".join(slower) if slower else "") + ".")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
