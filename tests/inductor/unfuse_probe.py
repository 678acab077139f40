"""In-process checks of decisions.py that the runner's protocol cannot show
(run by test_unfuse.py in the project venv's python; prints one JSON line):

  stable   two cold compiles of one module, each in a fresh cache directory,
           give the same fusion ids;
  cache    an undone compile after a normal one, in the same (warm) cache
           directory, still schedules and produces the undone kernels, while a
           normal compile there hits the FX graph cache;
  shared   the explanation's counterfactual compile (runner._shared_cache:
           the job's cache directory, the graph caches off): scheduled anew
           with no FX graph cache hit, an undone fusion still undone, and the
           kernels it did not change loaded, not built (no new .so for a
           compile that undoes nothing);
  missed   a residual block's refused merge (Inductor's own reason, the
           bytes the two nodes share) is recorded;
  drift    with V.set_choices_handler gone (an older PyTorch), feature_check
           says so and the runner's counterfactual rung is "unsupported", the
           rest of the job runs.

The module is the issue's conv + BN + ReLU + softmax (2 cpp kernels, both
fusion kinds)."""

import contextlib
import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "engine", "inductor"))

import torch  # noqa: E402

import decisions  # noqa: E402
import outcode  # noqa: E402


class ConvBnSoftmax(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3)
        self.bn = torch.nn.BatchNorm2d(16)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return torch.softmax(y.flatten(1), -1) * 2 + y.mean()


def sos(d):
    """The compiled kernel libraries in cache directory d."""
    return sum(1 for _, _, fs in os.walk(d) for f in fs if f.endswith(".so"))


def compile_once(model, x, cache, undo=None, shared=False):
    """One compile in cache directory `cache` (shared: as the explanation's
    counterfactuals, runner._shared_cache): (decisions, final nodes, cpp
    kernels, FX cache hits, whether the scheduler ran, max |error|, .so files
    built)."""
    import runner
    from torch._dynamo.utils import counters

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    torch._dynamo.reset()
    torch._inductor.utils.clear_caches()
    built = sos(cache)
    codes = []
    outcode.install_capture(codes.append)
    rec = decisions.Recorder()
    rec.start()
    hits = counters["inductor"]["fxgraph_cache_hit"]
    opts = undo.options() if undo else {}
    try:
        with (runner._shared_cache(cache) if shared else contextlib.nullcontext()), \
                (undo or contextlib.nullcontext()), torch.no_grad():
            fn = torch.compile(model, options=opts)
            err = (fn(x) - model(x)).abs().max().item()
    finally:
        rec.stop()
    kernels = outcode.summarize([outcode.parse(c) for c in codes])["generated_kernels"]
    return {"ids": [d["id"] for d in rec.decisions()], "decisions": rec.decisions(),
            "final_nodes": rec.final_nodes(), "kernels": kernels,
            "hits": counters["inductor"]["fxgraph_cache_hit"] - hits,
            "scheduled": bool(rec.graphs), "err": err, "built": sos(cache) - built}


def drift(root):
    """The runner with set_choices_handler removed from V's class."""
    import runner
    from torch._inductor.virtualized import V

    sys.path.insert(0, os.path.dirname(runner.__file__))
    cls = type(V)
    saved = cls.__dict__.get("set_choices_handler")
    ok0 = decisions.feature_check()[0]
    delattr(cls, "set_choices_handler")
    try:
        ok, why = decisions.feature_check()
        out = os.path.join(root, "proto.jsonl")
        req = runner.parse_request(json.dumps({
            "model": "tiny_cnn", "variants": ["inductor"], "warmup": 1, "iterations": 3,
            "threads": 2, "params": {"image_size": 16, "unfuse": ["fuse-0123456789ab"]}}))
        line = runner.run_job(req, runner.Proto(out))
    finally:
        setattr(cls, "set_choices_handler", saved)
    vs = {v["name"]: {"status": v["status"], "message": v.get("message", "")}
          for v in line.get("variants", [])}
    return {"ok_before": ok0, "ok": ok, "why": why, "type": line["type"], "variants": vs}


class Residual(torch.nn.Module):
    """conv + BN + ReLU6, two more conv + BN, and the first's output added at
    the end (mobilenet_v2's residual): Inductor refuses to merge the first
    pointwise node with the last, which share the residual's buffer, because
    the convolutions lie between them ("intermediate nodes")."""

    def __init__(self):
        super().__init__()
        conv, bn = torch.nn.Conv2d, torch.nn.BatchNorm2d
        self.c0, self.b0, self.c1, self.b1 = conv(8, 8, 1), bn(8), conv(8, 8, 1), bn(8)
        self.c2, self.b2 = conv(8, 8, 1), bn(8)

    def forward(self, x):
        f = torch.nn.functional
        a = f.relu6(self.b0(self.c0(x)))
        return a + self.b2(self.c2(f.relu6(self.b1(self.c1(a)))))


def missed(root):
    """The refused merges explain.MissedRecorder records in one compile."""
    import explain

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(dir=root)
    torch._dynamo.reset()
    explain.install_missed_hook()
    rec = explain.MissedRecorder.current = explain.MissedRecorder()
    model = Residual().eval()
    try:
        with torch.no_grad():
            torch.compile(model)(torch.randn(1, 8, 16, 16))
    finally:
        explain.MissedRecorder.current = None
    return rec.summary()


def main():
    torch.manual_seed(0)
    torch.set_num_threads(2)
    model, x = ConvBnSoftmax().eval(), torch.randn(2, 8, 16, 16)
    outcode.install_cpp_metadata()
    root = tempfile.mkdtemp(prefix="fb-unfuse-probe-")
    a = compile_once(model, x, tempfile.mkdtemp(dir=root))
    b = compile_once(model, x, tempfile.mkdtemp(dir=root))
    warm_dir = tempfile.mkdtemp(dir=root)
    normal = compile_once(model, x, warm_dir)
    again = compile_once(model, x, warm_dir)
    fuse = next(d for d in normal["decisions"] if d["id"].startswith("fuse-"))
    group = next(d for d in normal["decisions"] if d["id"].startswith("group-") and
                 d["loop_nests"] >= 2)
    undone = {}
    for d in (fuse, group):
        u = decisions.undo_for([d["id"]], normal["decisions"])
        r = compile_once(model, x, warm_dir, u)
        undone[d["id"]] = {k: r[k] for k in ("ids", "final_nodes", "kernels", "hits",
                                              "scheduled", "err")}
    shared = {"none": compile_once(model, x, warm_dir, shared=True)}
    u = decisions.undo_for([fuse["id"]], normal["decisions"])
    shared["fuse"] = compile_once(model, x, warm_dir, u, shared=True)
    for r in (a, b, normal, again, *shared.values()):
        del r["decisions"]
    print(json.dumps({"stable": [a["ids"], b["ids"]], "normal": normal, "again": again,
                      "fuse": fuse["id"], "group": group["id"], "undone": undone,
                      "shared": shared,
                      "drift": drift(root), "missed": missed(root)}))


if __name__ == "__main__":
    main()
