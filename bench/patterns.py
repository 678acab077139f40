#!/usr/bin/env python3
"""The pattern suite side by side: our native engine (fusionbench-run, eager and
fused) against PyTorch eager and torch.compile (bench/torch_patterns.py), in one
invocation, on the same shapes and thread count.

Every pattern is first built and compiled in PyTorch (compile time reported
apart).  Then, in each of --rounds rounds, for each pattern: fusionbench-run
WORKLOAD --json with the shapes passed explicitly (torch_patterns.DEFAULTS, the
engine's defaults), then the same pattern in PyTorch.  Each side interleaves its
own two variants (METHOD.md); alternating the sides round by round spreads any
burst of load from other processes over both, and the raw samples of all rounds
are pooled before the median is taken.  Prints a table, writes it as markdown
(--md) and everything raw (--json).

Ratios are "how many times faster ours fused is": other median / ours fused
median, so above 1 means ours fused is faster.

Run through bench/patterns.sh, which finds the venv and the binary.
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_patterns as tp  # noqa: E402

CHAIN_TARGET = 3.0  # elementwise_chain: ours fused >= 3x ours eager


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def variant(result, name):
    for v in result.get("variants", []):
        if v.get("name") == name:
            return v
    return None


def run_ours(binary, name, params, a, iterations):
    """Runs fusionbench-run; returns (dict, error text or None)."""
    cmd = [binary, name, "--json", "--iterations", str(iterations), "--warmup",
           str(a.warmup), "--threads", str(a.threads), "--batch", str(a.batch)]
    for k, v in params.items():
        cmd += ["--param", f"{k}={v}"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {a.timeout} s"
    if p.returncode != 0:
        return None, f"exit {p.returncode}: {p.stderr.strip()[-300:]}"
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError as e:
        return None, f"bad JSON from fusionbench-run: {e}"
    res = doc.get("result", {})
    e, f = variant(res, "eager"), variant(res, "fused")
    if not e or not f:
        return None, "result lacks the eager or fused variant"
    for v in (e, f):
        if v.get("status") != "ok":
            return None, f"{v['name']}: {v.get('status')}: {v.get('message', '')}"
    return {
        "cmd": cmd,
        "eager": e["samples_ms"],
        "fused": f["samples_ms"],
        "kernels": (e.get("kernels"), f.get("kernels")),
        "max_rel_error": f.get("max_rel_error"),
        "plan_ms": res.get("plan_ms"),
        "env": res.get("env", {}),
    }, None


def pooled(samples):
    return tp.summarize(samples) if samples else None


def row_for(name, ours, theirs, info):
    """ours, theirs: {"eager": [...], "fused"/"compiled": [...]} raw samples
    pooled over the rounds (ours also kernels from its last run)."""
    r = {"pattern": name, "torch_info": info}
    r["ours"] = {k: pooled(ours.get(k)) for k in ("eager", "fused")}
    r["ours"]["kernels"] = ours.get("kernels")
    r["ours"]["plan_ms"] = ours.get("plan_ms")
    r["torch"] = {k: pooled(theirs[k]) for k in ("eager", "compiled")}
    oe, of = r["ours"]["eager"], r["ours"]["fused"]
    te, tc = r["torch"]["eager"], r["torch"]["compiled"]
    if of:
        r["vs_torch_eager"] = te["median"] / of["median"]
        r["vs_compile"] = tc["median"] / of["median"]
        r["vs_ours_eager"] = oe["median"] / of["median"]
    return r


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


HEAD = ["pattern", "ours eager ms", "ours fused ms", "torch eager ms", "torch.compile ms",
        "fused vs torch eager (x)", "fused vs compile (x)", "fused vs ours eager (x)",
        "kernels eager/fused", "torch eager ops", "compile s", "max cv"]


def cells(r):
    o, t, info = r["ours"], r["torch"], r["torch_info"]
    med = lambda st: st and st["median"]  # noqa: E731
    k = f"{o['kernels'][0]}/{o['kernels'][1]}" if o["kernels"] else "n/a"
    cvs = [st["cv"] for st in (o["eager"], o["fused"], t["eager"], t["compiled"]) if st]
    return [r["pattern"], fmt(med(o["eager"]), ".3f"), fmt(med(o["fused"]), ".3f"),
            fmt(med(t["eager"]), ".3f"), fmt(med(t["compiled"]), ".3f"),
            fmt(r.get("vs_torch_eager"), ".2f"), fmt(r.get("vs_compile"), ".2f"),
            fmt(r.get("vs_ours_eager"), ".2f"), k, str(len(info["eager_ops"])),
            fmt(info["compile_s"], ".1f"), fmt(max(cvs), ".2f")]


def min_cells(r):
    o, t = r["ours"], r["torch"]
    mins = [st and st["min"] for st in (o["eager"], o["fused"], t["eager"], t["compiled"])]
    ratio = lambda a, b: a / b if a and b else None  # noqa: E731
    return [r["pattern"]] + [fmt(m, ".3f") for m in mins] + [
        fmt(ratio(mins[2], mins[1]), ".2f"), fmt(ratio(mins[3], mins[1]), ".2f"),
        fmt(ratio(mins[0], mins[1]), ".2f")]


def targets(rows):
    """The issue's targets, each (text, met: True/False/None when unmeasured)."""
    out = []
    for r in rows:
        n = r["pattern"]
        te, tc = r.get("vs_torch_eager"), r.get("vs_compile")
        out.append((f"{n}: ours fused faster than PyTorch eager", None if te is None else te > 1))
        out.append((f"{n}: ours fused no slower than torch.compile",
                    None if tc is None else tc >= 1))
        if n == "elementwise_chain":
            x = r.get("vs_ours_eager")
            out.append((f"elementwise_chain: fused >= {CHAIN_TARGET:g}x ours eager",
                        None if x is None else x >= CHAIN_TARGET))
    return out


def markdown(rows, meta):
    lines = [f"Command: `{meta['command']}`  ", f"Date: {meta['date']}  ",
             f"Machine: {meta['cpu']}, {meta['cores']} cores; threads {meta['threads']}; "
             f"PyTorch {meta['torch']['torch']} (BLAS {meta['torch']['blas']}, oneDNN "
             f"{'on' if meta['torch']['mkldnn'] else 'off'}); iterations {meta['iterations']}, "
             f"warmup {meta['warmup']}, rounds {meta['rounds']}, batch {meta['batch']}; 1-min load average "
             f"{meta['load_start']:.2f} at start, {meta['load_end']:.2f} at end", "",
             "| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    lines += ["| " + " | ".join(cells(r)) + " |" for r in rows]
    lines += ["", "The same samples by their minimum (the least disturbed iteration: a "
              "gauge for a shared, noisy machine; the median above is the headline):", "",
              "| pattern | ours eager min | ours fused min | torch eager min | torch.compile min "
              "| fused vs torch eager (x) | fused vs compile (x) | fused vs ours eager (x) |",
              "|" + "---|" * 8]
    lines += ["| " + " | ".join(min_cells(r)) + " |" for r in rows]
    lines += ["", "Ratios: other median / ours fused median (above 1: ours fused is faster). "
              "torch eager ops: ATen compute ops one PyTorch eager call dispatches "
              "(one kernel each), to match our eager kernel count. max cv: the largest "
              "coefficient of variation of the four sample sets (noise gauge).",
              "", "Targets:"]
    for text, met in targets(rows):
        lines.append(f"- {text}: {'not measured' if met is None else 'met' if met else 'NOT met'}")
    errs = [(r["pattern"], r["error"]) for r in rows if r.get("error")]
    if errs:
        lines += ["", "Not measured:"] + [f"- {n}: {e}" for n, e in errs]
    return "\n".join(lines) + "\n"


def print_table(rows):
    table = [HEAD] + [cells(r) for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEAD))]
    for row in table:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w)
                        for i, (c, w) in enumerate(zip(row, widths))))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="path to fusionbench-run")
    ap.add_argument("--patterns", default=",".join(tp.ORDER))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5, help="per round, per side")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternate ours and PyTorch this many times per pattern, pooling "
                         "the samples (iterations are split over the rounds)")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per fusionbench-run")
    ap.add_argument("--md", default="/tmp/fusionbench-bench/patterns.md")
    ap.add_argument("--json", default="/tmp/fusionbench-bench/patterns.json")
    ap.add_argument("--warm-cache", action="store_true",
                    help="reuse Inductor's cache (compile times are then cache hits)")
    a = ap.parse_args()
    names = [n for n in a.patterns.split(",") if n]
    unknown = [n for n in names if n not in tp.DEFAULTS]
    if unknown:
        ap.error(f"unknown pattern(s) {unknown}; known: {', '.join(tp.ORDER)}")
    tp.setup_torch(a.threads, not a.warm_cache)
    meta = {"command": os.environ.get("FB_BENCH_COMMAND", " ".join(sys.argv)),
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "cpu": cpu_model(), "cores": os.cpu_count(), "threads": a.threads,
            "iterations": a.iterations, "warmup": a.warmup, "rounds": a.rounds, "batch": a.batch,
            "torch": tp.env(), "load_start": os.getloadavg()[0]}
    per_round = max(1, -(-a.iterations // a.rounds))
    prepared, ours, theirs, errors = {}, {}, {}, {}
    for n in names:  # compile everything first: compile time stays apart
        prepared[n] = tp.Prepared(n, tp.DEFAULTS[n], a.batch)
        ours[n], theirs[n] = {"eager": [], "fused": []}, {"eager": [], "compiled": []}
        if not prepared[n].info["ok"]:
            errors[n] = (f"torch.compile vs eager max_rel_error "
                         f"{prepared[n].info['max_rel_error']:.2e} over {tp.TOLERANCE:g}")
    for rnd in range(a.rounds):
        for n in names:
            time.sleep(0.5)  # let PyTorch's OpenMP threads stop spinning before ours start
            got, err = run_ours(a.bin, n, tp.DEFAULTS[n], a, per_round)
            if err:
                errors[n] = f"ours: {err}"
            else:
                ours[n]["eager"] += got["eager"]
                ours[n]["fused"] += got["fused"]
                ours[n]["kernels"] = got["kernels"]
                ours[n]["plan_ms"] = got["plan_ms"]
            e, c = prepared[n].measure(a.warmup, per_round)
            theirs[n]["eager"] += e
            theirs[n]["compiled"] += c
        print(f"round {rnd + 1}/{a.rounds} done", file=sys.stderr)
    rows = []
    for n in names:
        r = row_for(n, ours[n], theirs[n], prepared[n].info)
        k, ops = r["ours"]["kernels"], r["torch_info"]["eager_ops"]
        if k and k[0] != len(ops):
            errors[n] = (f"graphs differ: our eager has {k[0]} kernels, "
                         f"PyTorch eager {len(ops)} ops {ops}")
        if n in errors:
            r["error"] = errors[n]
        rows.append(r)
    meta["load_end"] = os.getloadavg()[0]
    print_table(rows)
    for path, text in ((a.md, markdown(rows, meta)),
                       (a.json, json.dumps({"meta": meta, "rows": rows}, indent=1))):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
    print(f"\nmarkdown: {a.md}\njson: {a.json}")
    for text, met in targets(rows):
        print(f"  {'not measured' if met is None else 'met' if met else 'NOT met':12s} {text}")
    return 0 if all(not r.get("error") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
