"""The C side end to end: fusionbench-run --engine inductor starts the runner,
reads its protocol and prints docs/API.md's result with the per-variant "inductor"
object and kernel rows; the engine is offered only when the probe succeeds.

--explain (the full tier, inductor.test_engine_explain): the same job with
--explain, whose explanation undoes each of Inductor's fusions, a compile each
(6 minutes of a 2-vCPU VM); its logic is test_explain_logic's, on a fake clock,
in the default tier."""

import json
import os
import subprocess
import sys

import indtest


def cli(args, env_extra=None, timeout=900):
    exe = os.path.join(indtest.BIN, "worker", "fusionbench-run")
    env = dict(os.environ, **(env_extra or {}))
    return subprocess.run([exe] + args, capture_output=True, text=True, env=env, timeout=timeout)


def catalog(c, py):
    r = cli(["--list"], {"FUSIONBENCH_PYTHON": py})
    rows = [l.split() for l in r.stdout.splitlines()]
    ind = [row for row in rows if len(row) > 1 and row[1] == "inductor"]
    c.check(r.returncode == 0 and any(row[0] == "resnet18" for row in ind),
            "--list: the inductor engine offers resnet18")
    c.check(all("cudagraphs" not in " ".join(row) for row in ind),
            "--list on cpu: no CUDA-graph rungs offered")
    r = cli(["--list"], {"FUSIONBENCH_PYTHON": "/nonexistent/python"})
    c.check(r.returncode == 0 and " inductor " not in r.stdout,
            "no usable python: the inductor engine offers nothing")


def run_json(c, py, explain):
    r = cli(["tiny_cnn", "--engine", "inductor", "--json", "--iterations", "6", "--warmup", "2",
             "--threads", "2", "--variants", "eager,inductor-nofusion,inductor",
             "--param", "image_size=16"] + (["--explain"] if explain else []),
            {"FUSIONBENCH_PYTHON": py})
    c.check(r.returncode == 0, "fusionbench-run --engine inductor --json: exit 0 (%s)"
            % r.stderr.strip()[-300:])
    out = json.loads(r.stdout)
    res = out["result"]
    vs = {v["name"]: v for v in res["variants"]}
    c.check(sorted(vs) == ["eager", "inductor", "inductor-nofusion"], "three variants")
    rep = res["repetition"]
    c.check(isinstance(rep, dict) and rep["rounds_requested"] == 6 and 6 <= rep["rounds"] <= 60
            and rep["stop"] in ("stable", "converged", "time_budget", "max_rounds"),
            "the runner's adaptive repetition reported: %r" % rep)
    intf = res["interference"]
    c.check(intf["timed_ms"] > 0 and isinstance(intf["involuntary_switches"], int) and
            intf["timed_ms"] < 1000 * 60, "the runner's interference over its timed rounds: %r"
            % intf)
    for name, v in vs.items():
        c.check(v["status"] == "ok" and len(v["samples_ms"]) == rep["rounds"] and
                v["latency_ms"]["median"] > 0 and v["latency_ms"]["ci95"][0] is not None,
                "%s: ok, a sample per round, statistics" % name)
        c.check(isinstance(v["unstable"], bool), "%s: the unstable flag" % name)
    for name in ("inductor", "inductor-nofusion"):
        lo, hi = res["comparison"]["speedup_ci95"][name]
        c.check(lo <= res["comparison"]["speedup"][name] <= hi and
                res["comparison"]["change"][name] in ("faster", "slower", "no_difference"),
                "%s: the speedup's interval and verdict" % name)
        c.check(isinstance(v.get("inductor"), dict) and v["inductor"].get("peak_mem_method"),
                "%s: the inductor object" % name)
        c.check(v["kernels"] is not None and v["kernels"] > 0, "%s: kernels counted" % name)
    c.check(vs["eager"]["fused_kernels"] == 0, "eager: 0 fused kernels")
    ind = vs["inductor"]
    c.check(ind["fused_kernels"] >= 1 and ind["fused_ops"] >= 2, "inductor: fused kernels/ops")
    c.check(ind["inductor"].get("compile_cold_ms", 0) > 0 and
            ind["inductor"].get("generated_kernels", 0) >= 2, "inductor: compile time, kernels")
    c.check(ind["inductor"].get("layout_optimized") is True,
            "inductor: tiny_cnn's convolutions channels-last (Inductor's layout optimization)")
    c.check(res["env"]["torch"] and res["env"]["threads"] == 2, "env: torch version, 2 threads")
    c.check("inductor" in res["comparison"]["speedup"], "comparison: speedup of inductor")
    rows = out["kernels"]["inductor"]
    c.check(any(k["name"].startswith("cpp_fused") and len(k["ops"]) >= 2 for k in rows),
            "kernel rows: a cpp_fused kernel with its ATen ops")
    spec = out["spec"]
    c.check(spec["engine"] == "inductor" and spec["params"].get("image_size") == 16,
            "spec echoed")
    if not explain:
        c.check(res.get("explain") is None, "no explanation asked, none given")
        return
    # the explanation: the ladder's two steps as the counterfactuals, the fused
    # kernels with eager's per-call time of the ATen op types they name
    ex = res["explain"]
    steps = [(s["from"], s["to"]) for s in ex["ladder"]]
    c.check(ex["engine"] == "inductor" and steps == [("eager", "inductor-nofusion"),
                                                     ("inductor-nofusion", "inductor")],
            "explain: the ladder's steps %r" % steps)
    for s in ex["ladder"]:
        lo, hi = s["saved_ci95"]
        c.check(lo <= s["saved_ms"] <= hi and s["mechanism"], "explain: a step's interval %r" % s)
    c.check(ex["kernels"] and all(len(k["ops"]) >= 2 and k["mean_ms"] > 0 for k in ex["kernels"]),
            "explain: fused kernels with their ops")
    c.check(any(o["eager_ms_per_call"] for k in ex["kernels"] for o in k["ops"]),
            "explain: eager's per-call time of an op a kernel names")
    fx = ex.get("fusions", {})
    c.check("undone" in ex["note"] and len(fx.get("fusions", [])) == fx.get("decisions", -1) >= 2
            and all(e["verdict"] in ("won", "lost", "no_difference") for e in fx["fusions"]),
            "explain: each of Inductor's fusions undone, with its verdict (%s)" % fx.get("counts"))
    st = [s for s in ex["ladder"] if s["to"] == "inductor"][0]
    c.check(abs(fx.get("ladder_step_ms", 1e9) - st["saved_ms"]) < 1e-9 and
            "ladder_step_ci95" not in fx,
            "explain: the fusions' step is the ladder's, with the ladder's one interval")
    bs = fx.get("beside") or []
    c.check([p["what"] for p in bs] == ["layout_optimization=False"] and
            all(p["verdict"] in ("won", "lost", "no_difference") and
                p["ci95"][0] <= p["saved_ms"] <= p["ci95"][1] for p in bs),
            "explain: the layout choice switched off alone, measured (%s)" % bs)
    # (the table of the fusions: unit.test_table, on the same JSON shape)


def errors(c, py):
    r = cli(["tiny_cnn", "--engine", "inductor", "--variants", "eager,inductor+cudagraphs"],
            {"FUSIONBENCH_PYTHON": py})
    c.check(r.returncode == 2 and "inductor+cudagraphs" in r.stderr,
            "CUDA-graph rung on cpu: not offered, exit 2")
    r = cli(["tiny_cnn", "--engine", "inductor", "--iterations", "2", "--warmup", "0",
             "--param", "image_size=3"], {"FUSIONBENCH_PYTHON": py})
    c.check(r.returncode == 2 and "image_size" in r.stderr,
            "bad model param: the runner's invalid_argument reaches the CLI (exit 2)")


def dry_run(c, py):
    """--dry-run checks a command line against the catalog and prints the spec,
    running nothing; FB_PROBE_CUDA=built gives the cuda catalog without a GPU."""
    env = {"FUSIONBENCH_PYTHON": py}
    r = cli(["tiny_cnn", "--engine", "inductor", "--variants", "eager,inductor", "--batch", "3",
             "--timeout", "1234", "--dry-run"], env)
    spec = json.loads(r.stdout) if r.returncode == 0 else {}
    c.check(spec.get("engine") == "inductor" and spec.get("batch_size") == 3 and
            spec.get("variants") == ["eager", "inductor"] and spec.get("device") == "cpu" and
            spec.get("timeout_s") == 1234,
            "--dry-run: the spec that would run, --timeout its timeout_s (%s)" % (
                r.stdout or r.stderr)[-300:])
    r = cli(["gemm_bias_gelu", "--dtype", "float64", "--dry-run"])
    c.check(r.returncode == 2 and "float64" in r.stderr, "--dry-run: a bad dtype is exit 2")
    probe = subprocess.run([py, "-c", "import torch; print(int(torch.backends.cuda.is_built()),"
                            " int(torch.cuda.is_available()))"], capture_output=True, text=True)
    built, avail = (probe.stdout.split() + ["0", "0"])[:2]
    args = ["resnet50", "--engine", "inductor", "--device", "cuda", "--dtype", "float16",
            "--batch", "32", "--variants", "eager,inductor+cudagraphs", "--dry-run"]
    if avail == "0":
        r = cli(args, env)
        c.check(r.returncode == 2, "no GPU: the inductor engine offers nothing on cuda (exit 2)")
    if built == "1":
        r = cli(args, dict(env, FB_PROBE_CUDA="built"))
        spec = json.loads(r.stdout) if r.returncode == 0 else {}
        c.check(spec.get("device") == "cuda" and spec.get("dtype") == "float16" and
                spec.get("variants") == ["eager", "inductor+cudagraphs"],
                "FB_PROBE_CUDA=built: the cuda catalog checks a line (%s)" % r.stderr[-300:])
        r = cli(args[:-3] + ["eager,inductor+cudagraph", "--dry-run"],
                dict(env, FB_PROBE_CUDA="built"))
        c.check(r.returncode == 2 and "inductor+cudagraph" in r.stderr,
                "FB_PROBE_CUDA=built: a misspelt rung is exit 2")


def main():
    py = indtest.python_or_skip()
    if not indtest.BIN:
        print("SKIP: FB_BIN_DIR is not set (run through ctest)")
        raise SystemExit(indtest.SKIP)
    c = indtest.Checks()
    if "--explain" in sys.argv:
        run_json(c, py, explain=True)
        c.done()
        return
    catalog(c, py)
    errors(c, py)
    dry_run(c, py)
    run_json(c, py, explain=False)
    c.done()


if __name__ == "__main__":
    main()
