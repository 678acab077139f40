#!/usr/bin/env python3
"""bench/isa.py: what fusion buys on the kernels of an AVX-512 CPU and on those
of an AVX2-only one, on the same machine (FUSIONBENCH_NATIVE_ISA, common/fb_cpu.h).

  python3 bench/isa.py --bin build/worker/fusionbench-run [--models a,b] [--threads 2]
                       [--batch 1] [--rounds 2] [--iterations 20] [--warmup 3]
                       [--param k=v ...]

Runs each model's eager and fused variants under both widths, alternating the
order each round (AVX-512 first, then AVX2 first, ...), and prints a Markdown
table: the mean and the smallest of the runs' medians, each run's fused/eager
speedup and verdict, and the BLAS core that ran.  Needs a CPU with AVX-512 for the wide
row (elsewhere both rows are the AVX2 kernels)."""

import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbparams  # noqa: E402  (a --param goes to the models that take it)

WIDTHS = (("auto", "AVX-512"), ("avx2", "AVX2"))


def run_one(a, model, env_set, params=()):
    """One run of model's eager and fused variants, env_set added to the
    environment and params (key=value) to the --param flags."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_CORETYPE"}
    env.update(env_set)
    cmd = [a.bin, model, "--threads", str(a.threads), "--iterations", str(a.iterations),
           "--warmup", str(a.warmup), "--batch", str(a.batch), "--json"]
    for p in fbparams.for_workload(a.bin, model, list(a.param) + list(params)):
        cmd += ["--param", p]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=a.timeout)
    if r.returncode not in (0, 1):
        sys.exit("%s (%s %s): exit %d: %s" % (model, env_set, params, r.returncode,
                                             r.stderr[-400:]))
    res = json.loads(r.stdout)["result"]
    v = {x["name"]: x for x in res["variants"]}
    return {"eager": v["eager"]["latency_ms"]["median"], "fused": v["fused"]["latency_ms"]["median"],
            "speedup": res["comparison"]["speedup"]["fused"],
            "change": res["comparison"]["change"]["fused"], "blas": res["env"]["blas"]}


def options(doc, models, rounds=2):
    """The command line both benchmarks take."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="fusionbench-run")
    ap.add_argument("--models", default=models)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=rounds)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=900, help="each run's limit, seconds")
    ap.add_argument("--param", action="append", default=[], help="key=value for every model that takes it")
    return ap.parse_args()


def compare(a, configs):
    """Runs each model under each config (label, env to set, params),
    alternating the configs' order each round, and prints the Markdown table:
    the mean and the smallest of the runs' medians, each run's fused/eager
    speedup and verdict, and the BLAS core that ran."""
    models = [m for m in a.models.split(",") if m]
    runs = {}
    for rnd in range(a.rounds):
        for m in models:
            for label, env_set, params in (configs if rnd % 2 == 0 else configs[::-1]):
                r = run_one(a, m, env_set, params)
                runs.setdefault((m, label), []).append(r)
                print("%s %s: eager %.2f fused %.2f ms, %.3fx %s (%s)" % (
                    m, label, r["eager"], r["fused"], r["speedup"], r["change"], r["blas"]),
                    file=sys.stderr, flush=True)
    print("| model | kernels (BLAS core) | eager ms: mean, best | fused ms: mean, best "
          "| fused/eager, each run | verdicts |")
    print("|---|---|---:|---:|---|---|")
    for m in models:
        for label, _, _ in configs:
            rs = runs[(m, label)]
            e, f = [r["eager"] for r in rs], [r["fused"] for r in rs]
            print("| %s | %s (%s) | %.2f, %.2f | %.2f, %.2f | %s | %s |" % (
                m, label, rs[0]["blas"].split()[-1], sum(e) / len(e), min(e), sum(f) / len(f),
                min(f), " / ".join("%.3f" % r["speedup"] for r in rs),
                " ".join(r["change"] for r in rs)))


def main():
    a = options(__doc__, "resnet50,mobilenet_v2,efficientnet_b0,bert_base,whisper_tiny")
    compare(a, [(label, {"FUSIONBENCH_NATIVE_ISA": isa}, ()) for isa, label in WIDTHS])


if __name__ == "__main__":
    main()
