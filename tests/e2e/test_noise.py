#!/usr/bin/env python3
"""End to end: a result on a loaded machine knows it (issue 14, docs/METHOD.md).

fusionbench-run times a graph of one convolution, whose eager and fused plans
are the same (one kernel each: the true speedup is 1), pinned to one CPU while
a busy loop is pinned to the same CPU.  Three runs.  Each must come out marked
unstable or with no significant difference, never as a confident speedup or
slowdown; the interference must show the preemptions; the extra rounds must
have run and said why they stopped.  Needs no database."""

import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, log  # noqa: E402

# About 0.23 GFLOP a run, milliseconds on one core: the timed rounds span many
# of the scheduler's time slices, so the busy loop must preempt them (at 14 MFLOP
# the whole timing, 8 to 20 ms, could fit in the slices it was given).
GRAPH = {"tensors": [{"name": "input", "kind": "input", "shape": [1, 64, 56, 56]},
                     {"name": "w", "kind": "weight", "shape": [64, 64, 3, 3]}],
         "nodes": [{"op": "conv2d", "name": "conv", "inputs": [0, 1], "pad": [1, 1],
                    "stride": [1, 1]}]}


def one_run(cpu):
    # The loop says it has started, then spins: the timing starts only once it
    # is on the CPU (a fixed sleep was too short for a loaded machine's startup).
    busy = subprocess.Popen(["taskset", "-c", str(cpu), sys.executable, "-c",
                             "import sys\nprint('spinning', flush=True)\nwhile True: pass"],
                            stdout=subprocess.PIPE, text=True)
    try:
        check(busy.stdout.readline().strip() == "spinning", "the busy loop did not start")
        time.sleep(0.2)
        r = subprocess.run(["taskset", "-c", str(cpu), fbtest.find_bin("fusionbench-run"),
                            "graph", "--threads", "1", "--iterations", "30", "--warmup", "5",
                            "--param", "graph=" + json.dumps(GRAPH), "--json"],
                           capture_output=True, text=True, timeout=300)
    finally:
        busy.kill()
        busy.wait()
        busy.stdout.close()
    check(r.returncode == 0, "fusionbench-run: %s" % r.stderr[-2000:])
    return json.loads(r.stdout)["result"]


def main():
    cpu = max(os.sched_getaffinity(0))
    for i in range(3):
        res = one_run(cpu)
        eager, fused = res["variants"]
        check(eager["kernels"] == fused["kernels"] == 1, "one kernel each: %r" % (
            [v["kernels"] for v in res["variants"]]))
        change = res["comparison"]["change"]["fused"]
        lo, hi = res["comparison"]["speedup_ci95"]["fused"]
        unstable = eager["unstable"] or fused["unstable"]
        check(unstable or change == "no_difference",
              "run %d: a confident %s (%.3f, CI [%.3f, %.3f]) under planted load" % (
                  i + 1, change, res["comparison"]["speedup"]["fused"], lo, hi))
        intf, rep = res["interference"], res["repetition"]
        check(intf["involuntary_switches"] > 0, "the preemptions are counted: %r" % intf)
        check(rep["stop"] in ("converged", "time_budget", "max_rounds", "stable") and
              rep["rounds"] >= 30 and len(fused["samples_ms"]) == rep["rounds"],
              "repetition %r" % rep)
        log("run %d on cpu %d with a busy loop beside it: %s, speedup %.3f [%.3f, %.3f], "
            "unstable %s, cv %.0f%%/%.0f%%, %d rounds (%s), %d involuntary switches" % (
                i + 1, cpu, change, res["comparison"]["speedup"]["fused"], lo, hi, unstable,
                100 * eager["latency_ms"]["cv"], 100 * fused["latency_ms"]["cv"], rep["rounds"],
                rep["stop"], intf["involuntary_switches"]))
    print("noise: PASSED", flush=True)


if __name__ == "__main__":
    fbtest.main_plain(main, "noise")
