"""Where a CNN compiled by Inductor loses to eager on the CPU: Inductor's layout
optimization against the model without it (docs/INDUCTOR.md, "Slower than
eager on the CPU: the layout, not the fusion").

For each model, four variants built in one process and timed in interleaved
rounds (every other round in reverse order, as the runner does): eager;
Inductor as the `inductor` rung compiles it; the same with
`layout_optimization=False` (convolutions keep the model's NCHW layout); and
with `freezing=True` (weights constants of the graph, so a layout change of a
weight could be folded at compile time).  Each compiled variant is compiled
cold in a fresh cache directory with the fusion decisions recorded, then
profiled once: its time in generated kernels, in library calls (the
convolutions), and in generated kernels that compute nothing (0 FLOPs by
decisions.node_costs: layout copies).  Prints a markdown table: medians, each
variant's speedup over inductor with the 95% bootstrap interval of the
difference of medians, and that split.
CPU; run with the project venv's python:

    $(scripts/venv.sh) bench/inductor_layout.py --models resnet18,resnet50 --image-size 112
"""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "worker", "engine", "inductor"))

VARIANTS = (("inductor", {}), ("layout_optimization=False", {"layout_optimization": False}),
            ("freezing=True", {"freezing": True}))


def compiled(torch, model, inputs, options):
    """(fn, {kernel: {bytes, flops}}, cold compile s): a cold compile."""
    import decisions

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="fb-layout-")
    torch._dynamo.reset()
    rec = decisions.Recorder()
    rec.start()
    try:
        t0 = time.perf_counter()
        fn = torch.compile(model, backend="inductor", options=options)
        with torch.no_grad():
            fn(*inputs)
        s = time.perf_counter() - t0
    finally:
        rec.stop()
    return fn, decisions.kernel_costs(rec.graphs), s


def split(torch, fn, inputs, costs):
    """One profiled iteration's time in generated kernels, in library calls
    (a convolution, a GEMM: every row Inductor did not generate), and in the
    generated kernels that compute nothing (0 FLOPs by decisions.node_costs:
    layout copies), in ms."""
    import measure

    with torch.no_grad():
        p = measure.profile_once(fn, inputs, "cpu", {k: [] for k in costs}, costs)
    gen = sum(r["total_ms"] for r in p["rows"] if r["generated"])
    lib = sum(r["total_ms"] for r in p["rows"] if not r["generated"])
    zero = sum(r["total_ms"] for r in p["rows"] if r.get("impl") and r.get("flops") == 0)
    return gen, lib, zero


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2,efficientnet_b0,"
                                        "convnext_tiny")
    ap.add_argument("--image-size", type=int, default=112)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=40)
    args = ap.parse_args()
    import torch
    import torch._inductor.config as cfg

    import explain
    import models

    torch.set_num_threads(args.threads)
    cfg.cpp.enable_kernel_profile = True  # kernels by name in the profile, as the runner
    print("| model | eager ms | inductor ms | layout_optimization=False ms (vs inductor) | "
          "freezing=True ms (vs inductor) | inductor: generated / library / 0-FLOP ms | "
          "layout off: generated / library / 0-FLOP ms |")
    print("|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        model, inputs = models.build(name, args.batch, {"image_size": args.image_size})
        model = model.eval()
        fns, zero = {"eager": model}, {}
        for label, opts in VARIANTS:
            fn, costs, s = compiled(torch, model, inputs, opts)
            fns[label] = fn
            zero[label] = split(torch, fn, inputs, costs)
            print("  %s %s: cold compile %.1f s" % (name, label, s), file=sys.stderr)
        samples = {k: [] for k in fns}
        order = list(fns)
        with torch.no_grad():
            for f in fns.values():  # warm-up
                f(*inputs)
            for r in range(args.rounds):
                for k in (order if r % 2 == 0 else order[::-1]):
                    t0 = time.perf_counter_ns()
                    fns[k](*inputs)
                    samples[k].append((time.perf_counter_ns() - t0) / 1e6)
        med = {k: explain.median(v) for k, v in samples.items()}

        def vs_inductor(k):
            d, lo, hi = explain.diff_ci(samples[k], samples["inductor"])
            return "%.3f (%.2fx, saves %+.3f [%+.3f, %+.3f])" % (
                med[k], med["inductor"] / med[k], d, lo, hi)

        zi, zo = zero["inductor"], zero["layout_optimization=False"]
        print("| %s | %.3f | %.3f | %s | %s | %.3f / %.3f / %.3f | %.3f / %.3f / %.3f |" % (
            name, med["eager"], med["inductor"], vs_inductor("layout_optimization=False"),
            vs_inductor("freezing=True"), *zi, *zo), flush=True)


if __name__ == "__main__":
    main()
