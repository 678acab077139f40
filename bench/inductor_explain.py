#!/usr/bin/env python3
"""Inductor, fusion by fusion, over the zoo (docs/EXPLAIN.md): for each model
and batch size, one `fusionbench-run MODEL --engine inductor --explain` job
(eager, inductor-nofusion, inductor), and a markdown table on stdout of what
its explanation found: Inductor's fusion decisions, their verdicts, the lost
ones with their reasons, the sum of the parts against the ladder's step, the
cost-model rank correlation, the step from inductor-nofusion to inductor
part by part (every decision undone at once, then each of the no-fusion
rung's other knobs alone), the compile's choices beside fusion (its
convolutions' channels-last layout) switched off alone, the top refused merge, the break-even iterations
and how long the explanation took.

    python3 bench/inductor_explain.py --bin build/worker/fusionbench-run \\
        [--models resnet50,mobilenet_v2] [--batch 1,8] [--budget 300] [--ladder-s 600] \\
        [--threads 2] \\
        [--param image_size=112] [--json-dir DIR] > explain.md
    python3 bench/inductor_explain.py --from-json DIR > explain.md

Each job is one process: the rungs' compiles, the timing, then the
explanation's own compiles within --budget seconds (params.time_budget_s).
--from-json prints the same table from the JSON results an earlier run kept
(--json-dir), running nothing.  Below the table, the cost-model audit over
the whole suite: Spearman's rank correlation of Inductor's predicted shared
bytes against the measured saving, over every unit measured (a decision
alone, or a chunk of them within the noise, its predictions summed)."""
import argparse
import glob
import json
import os
import re
import subprocess
import sys
import time

# the runner's own rank correlation (explain.py imports nothing beyond the
# standard library at module level)
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "worker",
                                "engine", "inductor"))
from explain import spearman  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbparams  # noqa: E402  (a --param goes to the models that take it)

MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "convnext_tiny", "vit_b_16",
          "bert_base", "gpt2", "whisper_tiny", "wav2vec2_base"]


def run(binary, model, batch, budget, threads, params, iterations, ladder_s):
    cmd = [binary, model, "--engine", "inductor", "--json", "--batch", str(batch),
           "--threads", str(threads), "--iterations", str(iterations), "--warmup", "3",
           "--variants", "eager,inductor-nofusion,inductor", "--explain",
           "--param", "time_budget_s=%d" % budget, "--timeout", str(budget + ladder_s)]
    for p in fbparams.for_workload(binary, model, params, "inductor"):
        cmd += ["--param", p]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, check=False)
    secs = time.monotonic() - t0
    if not p.stdout.strip():
        return None, secs, p.stderr.strip()[-300:], cmd
    return json.loads(p.stdout), secs, "", cmd


def units_of(fx):
    """The cost-model audit's units of one explanation (explain.audit): none
    in a result from before the runner kept them."""
    return (fx.get("cost_model") or {}).get("units") or []


def fmt(x, f="{:.3f}"):
    return f.format(x) if isinstance(x, (int, float)) else "–"


def kept_sets(s):
    """A keep-test search's finding (explain.py _keep_search), in a cell."""
    return "%s%s (%d keep-tests%s)" % (
        "any one of %s" % ", ".join(s["causes"]) if s["causes"] else "",
        "".join("; together %s" % ", ".join(g) for g in s["together"]) or
        ("" if s["causes"] else "none found"),
        len(s["tests"]), ", budget" if s["stopped"] == "budget" else "")


def row(model, batch, out, secs):
    res = out["result"]
    vs = {v["name"]: v for v in res["variants"]}
    med = {n: (v.get("latency_ms") or {}).get("median") for n, v in vs.items()}
    fx = (res.get("explain") or {}).get("fusions") or {}
    if fx.get("error"):
        return "| %s | %d | – | %s |" % (model, batch, fx["error"][:120])
    c = fx.get("counts") or {}
    lost = ["%s %s ms (%s)" % (e["id"], fmt(e.get("saved_ms"), "{:+.3f}"), e.get("reason"))
            for e in fx.get("fusions", []) if e.get("verdict") == "lost"]
    top = ((fx.get("missed") or {}).get("top") or [None])[0]
    be = (fx.get("break_even") or {}).get("inductor") or {}
    parts = []
    for p in (fx.get("step") or {}).get("parts", []):
        name = "decisions" if p["part"] == "decisions" else p["what"].split("=")[0]
        parts.append("%s %s%s" % (name, fmt(p.get("saved_ms"), "{:+.3f}"),
                                  "" if p["verdict"] == "no_difference" else " " + p["verdict"]))
    beside = ["%s %s%s" % (p["what"].split("=")[0], fmt(p.get("saved_ms"), "{:+.3f}"),
                           "" if p["verdict"] == "no_difference" else " " + p["verdict"])
              for p in fx.get("beside") or []]
    units = units_of(fx)
    rho_u = spearman([u["predicted_shared_bytes"] for u in units], [u["saved_ms"] for u in units])
    rest = (fx.get("step") or {}).get("rest_ms")
    if rest is not None:
        parts.append("rest %+.3f" % rest)
    it = (fx.get("step") or {}).get("interaction")
    if it:
        parts.append("interaction: " + kept_sets(it))
    pi = fx.get("peak_interaction")
    if pi:
        parts.append("extra peak %.1f MiB: %s" % (pi["extra_peak_bytes"] / 1048576, kept_sets(pi)))
    return ("| %s | %d | %s / %s / %s | %d: %d won, %d lost, %d no difference, %d not measured "
            "| %s | %s [%s] | %s | %s | %s | %s; %s over %d units | %s | %s | %s "
            "| %s (%.0f s explaining) |" % (
                model, batch, fmt(med.get("eager")), fmt(med.get("inductor-nofusion")),
                fmt(med.get("inductor")), fx.get("decisions", 0), c.get("won", 0),
                c.get("lost", 0), c.get("no_difference", 0), c.get("not_measured", 0),
                "; ".join(lost[:3]) or "–", fmt(fx.get("ladder_step_ms"), "{:+.3f}"),
                fmt(fx.get("sum_of_parts_ms"), "{:+.3f}"), "; ".join(parts) or "–",
                "; ".join(beside) or "–",
                fmt(fx.get("layout_noise_ms"), "{:.4f}"),
                fmt((fx.get("cost_model") or {}).get("spearman"), "{:.2f}"),
                fmt(rho_u, "{:.2f}"), len(units),
                "%s B, %s" % (top["shared_bytes"], top["reason"]) if top else "–",
                be.get("iterations_cold") or "never", fmt((fx.get("all_lost_undone") or {}).get(
                    "recovered_ms"), "{:+.3f}"), fmt(secs, "{:.0f} s"),
                fx.get("seconds") or 0))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default="build/worker/fusionbench-run")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--batch", default="1")
    ap.add_argument("--budget", type=int, default=300)
    ap.add_argument("--ladder-s", type=int, default=600,
                    help="seconds given to the rungs' compiles and timing: the job's "
                         "--timeout is this plus --budget (the runner's own default of "
                         "600 s in all would cut a bigger budget short)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--json-dir", help="also keep each job's JSON result there")
    ap.add_argument("--from-json", metavar="DIR",
                    help="print the table from the JSON results kept in DIR; run nothing")
    a = ap.parse_args()
    if a.from_json:
        paths = sorted(glob.glob(os.path.join(a.from_json, "*-bs*.json")))
        if not paths:
            print("no *-bs*.json results in %s" % a.from_json, file=sys.stderr)
            return 2
    print("| model | bs | eager / nofusion / inductor ms | decisions | lost (saved ms, reason) "
          "| nofusion -> inductor [sum of parts] | the step, part by part (ms) "
          "| beside fusion, switched off alone (ms) | layout noise ms "
          "| cost model rho (alone; units) "
          "| top refused merge | break-even (cold) | all lost undone | job |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    suite, cmd = [], None
    if a.from_json:
        order = {m: i for i, m in enumerate(MODELS)}
        jobs = []
        for path in paths:
            m = re.fullmatch(r"(.+)-bs(\d+)\.json", os.path.basename(path))
            if not m:
                print("skipped %s: not MODEL-bsN.json" % path, file=sys.stderr)
                continue
            with open(path) as f:
                jobs.append((order.get(m[1], len(order)), m[1], int(m[2]), json.load(f)))
        for _, model, batch, out in sorted(jobs, key=lambda j: j[:3]):
            print(row(model, batch, out, out.get("bench_seconds")), flush=True)
            suite += units_of((out["result"].get("explain") or {}).get("fusions") or {})
    else:
        for model in a.models.split(","):
            for batch in (int(b) for b in a.batch.split(",")):
                out, secs, err, cmd = run(a.bin, model, batch, a.budget, a.threads, a.param,
                                          a.iterations, a.ladder_s)
                if out and a.json_dir:
                    os.makedirs(a.json_dir, exist_ok=True)
                    out["bench_seconds"] = secs
                    with open(os.path.join(a.json_dir, "%s-bs%d.json" % (model, batch)),
                              "w") as f:
                        json.dump(out, f)
                print(row(model, batch, out, secs) if out else
                      "| %s | %d | failed: %s |" % (model, batch, err), flush=True)
                if out:
                    suite += units_of((out["result"].get("explain") or {}).get("fusions") or {})
    rho = spearman([u["predicted_shared_bytes"] for u in suite], [u["saved_ms"] for u in suite])
    print("\nInductor's cost model across these jobs: Spearman %s over %d units measured "
          "(%d of them one decision alone)." % (fmt(rho, "{:.2f}"), len(suite),
                                                sum(1 for u in suite if u["decisions"] == 1)))
    if cmd:
        print("\nCommand per row: `%s`" % " ".join(cmd[:1] + ["MODEL"] + cmd[2:]))
    return 0

if __name__ == "__main__":
    sys.exit(main())
