#!/usr/bin/env python3
"""The explanations of the native zoo and the ten patterns as markdown tables
(bench/explain.sh runs it; docs/EXPLAIN.md shows its output)."""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbparams  # noqa: E402  (a --param goes to the workloads that take it)

# The zoo at sizes a 2-core VM explains in seconds each, and the patterns at
# their defaults.
ZOO = [("resnet18", ["image=112"]), ("resnet50", ["image=112"]), ("mobilenet_v2", ["image=112"]),
       ("mobilenet_v3_large", ["image=112"]), ("efficientnet_b0", ["image=112"]),
       ("convnext_tiny", ["image=112"]), ("vgg16", ["image=64"]),
       ("vit_b_16", ["image=112", "layers=4"]), ("bert_base", ["seq=128", "layers=4"]),
       ("gpt2", ["seq=128", "layers=4"]), ("whisper_tiny", ["frames=1000", "layers=4"])]
PATTERNS = ["gemm_bias_relu", "gemm_bias_gelu", "mlp", "conv_bn_relu", "conv_relu_conv",
            "elementwise_chain", "softmax", "layernorm", "add_layernorm", "attention"]


def llc_bytes():
    """The last-level cache's size (the highest cache level sysfs lists), or 0."""
    base, best = "/sys/devices/system/cpu/cpu0/cache", (0, 0)
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        try:
            level = int(open(os.path.join(base, d, "level")).read())
            size = open(os.path.join(base, d, "size")).read().strip()
        except (OSError, ValueError):
            continue
        mult = {"K": 1 << 10, "M": 1 << 20}.get(size[-1:], 1)
        n = int(size.rstrip("KM")) * mult
        best = max(best, (level, n))
    return best[1]


def memory_bound_groups(ex, llc, roof):
    """The fused groups that are memory-bound on this machine's roofline (their
    bytes at the triad's bandwidth take longer than their FLOPs at the GEMM's
    rate) and whose fused launch moves more bytes than the last-level cache
    holds; None without a roofline."""
    gbps, gflops = (roof or {}).get("triad_gbps"), (roof or {}).get("gemm_gflops")
    if not gbps or not gflops:
        return None
    return [g for g in ex["groups"]
            if g["costs"]["fused_bytes"] > llc and
            g["costs"]["fused_bytes"] / gbps >= g["costs"]["fused_flops"] / gflops]


def memory_bound_share(ex, llc, roof):
    """(groups, their time-weighted share of the triad's bandwidth) over
    memory_bound_groups; share None where there are none (or no roofline)."""
    big = memory_bound_groups(ex, llc, roof)
    if big is None:
        return 0, None
    roof_ms = sum((g["costs"].get("roofline_share") or 0) * g["fused_ms"] for g in big)
    ms = sum(g["fused_ms"] for g in big)
    ok = big and all(g["costs"].get("roofline_share") is not None for g in big)
    return len(big), roof_ms / ms if ok and ms > 0 else None


def repeat_table(runs, llc):
    """Over every run of each workload: the memory-bound groups over the LLC,
    time-weighted (each group's time at its own run's triad, summed, over the
    groups' times summed), with the spread of the triad and of the groups'
    bandwidth: one run's triad on a shared VM moves by tens of percent."""
    lines = ["| workload | runs | triad GB/s, each run | groups' GB/s, each run "
             "| memory-bound groups over the LLC: of the triad, time-weighted |",
             "|---|---:|---|---|---:|"]
    tot_roof = tot_ms = 0.0
    for w, results in runs.items():
        roof_ms = ms = 0.0
        triads, gbps = [], []
        for res in results:
            roof = res["env"].get("roofline") or {}
            big = memory_bound_groups(res["explain"], llc, roof) or []
            triads.append("%.1f" % roof.get("triad_gbps", 0))
            for g in big:
                if g["costs"].get("roofline_share") is None:
                    continue
                roof_ms += g["costs"]["roofline_share"] * g["fused_ms"]
                ms += g["fused_ms"]
                gbps.append("%.1f" % g["costs"]["fused_gbps"])
        tot_roof, tot_ms = tot_roof + roof_ms, tot_ms + ms
        lines.append("| %s | %d | %s | %s | %s |" % (
            w, len(results), " ".join(triads), " ".join(gbps) or "–",
            "%.0f%%" % (100 * roof_ms / ms) if ms > 0 else "–"))
    if tot_ms > 0:
        lines.append("| all | | | | %.0f%% |" % (100 * tot_roof / tot_ms))
    return "\n".join(lines)


def run(binary, workload, params, a):
    argv = [binary, workload, "--explain", "--roofline", "--json", "--iterations",
            str(a.iterations), "--warmup", "5", "--batch", str(a.batch)]
    for p in params:
        argv += ["--param", p]
    if a.threads:
        argv += ["--threads", str(a.threads)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        sys.exit("%s: %s" % (workload, r.stderr[-2000:]))
    return json.loads(r.stdout)["result"]


def fmt_ci(ci):
    return "[%.3f, %.3f]" % tuple(ci) if ci and ci[0] is not None else "–"


def row(name, params, res, llc):
    ex, w = res["explain"], res["explain"]["waterfall"]
    n_big, big_share = memory_bound_share(ex, llc, res["env"].get("roofline"))
    s, allu = ex["summary"], ex.get("all_lost_undone")
    reasons = ", ".join("%s %d" % kv for kv in sorted(s["lost_by_reason"].items())) or "–"
    undone = ("%+.3f %s %s" % (allu["recovered_ms"], fmt_ci(allu["recovered_ci95"]), allu["verdict"])
              if allu else "–")
    share = s.get("fused_roofline_share")
    return ("| %s %s | %.3f | %.3f | %+.3f %s | %+.3f | %+.3f | %+.3f | %+.3f | %+.3f | %d / %d / %d | %s | %s | %s | %s |" % (
        name, " ".join(params), w["eager_ms"], w["fused_ms"], w["measured_ms"], fmt_ci(w["measured_ci95"]),
        w["won_ms"], w["lost_ms"], w["within_noise_ms"], w["outside_groups_ms"] + w["overhead_ms"],
        w["unexplained_ms"], s["won"], s["lost"], s["within_noise"], reasons, undone,
        "%.0f%%" % (100 * share) if share is not None else "–",
        "%d: %.0f%%" % (n_big, 100 * big_share) if big_share is not None else "%d" % n_big))


HEADER = ("| workload | eager ms | fused ms | measured difference [95% CI] | won | lost | within noise "
          "| outside + overhead | unexplained | groups won / lost / noise | lost by reason "
          "| all lost undone: recovered ms [CI] | fused kernels on the roofline "
          "| memory-bound groups over the LLC: of the triad |\n"
          "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--llc-mb", type=float, default=0,
                    help="the last-level cache in MiB (default: what sysfs says)")
    ap.add_argument("--workloads", default="")
    ap.add_argument("--md")
    ap.add_argument("--json")
    ap.add_argument("--param", action="append", default=[],
                    help="key=value for every workload (planner=cost: the cost planner's groups)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run the list this many times, then the memory-bound groups over "
                         "the LLC time-weighted over every run (a noisy VM's triad); "
                         "--json keeps each workload's last run")
    a = ap.parse_args()
    todo = [(w, p + a.param) for w, p in ZOO] + [(p, list(a.param)) for p in PATTERNS]
    if a.workloads:
        want = a.workloads.split(",")
        todo = [(w, p) for w, p in todo if w in want]
    todo = [(w, fbparams.for_workload(a.bin, w, p)) for w, p in todo]
    llc = int(a.llc_mb * (1 << 20)) if a.llc_mb else llc_bytes()
    lines, dump, env, runs = [HEADER], {}, None, {}
    print(HEADER, flush=True)
    for _ in range(max(1, a.repeat)):
        for w, p in todo:
            res = run(a.bin, w, p, a)
            env = res["env"]
            dump[w] = res["explain"]
            runs.setdefault(w, []).append(res)
            lines.append(row(w, p, res, llc))
            print(lines[-1], flush=True)
    if a.repeat > 1:
        lines += ["", repeat_table(runs, llc)]
        print("\n" + lines[-1], flush=True)
    roof = (env or {}).get("roofline") or {}
    foot = ("\n`%s` on %s, %d threads, batch %d; roofline %.1f GB/s, %.1f GFLOP/s; last-level "
            "cache %.0f MiB; fusionbench %s." % (
                os.environ.get("FB_BENCH_COMMAND", "bench/explain.sh"), env["cpu"], env["threads"],
                a.batch, roof.get("triad_gbps", 0), roof.get("gemm_gflops", 0), llc / (1 << 20),
                env["fusionbench"])) if env else ""
    text = "\n".join(lines) + "\n" + foot + "\n"
    if a.md:
        with open(a.md, "w") as f:
            f.write(text)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dump, f, indent=1)
    print(foot)


if __name__ == "__main__":
    main()
