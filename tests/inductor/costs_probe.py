"""In-process check of decisions.node_costs, the bytes and FLOPs a generated
kernel is counted for (run by test_outcode.py in the project venv's python;
prints one JSON line): three modules whose one kernel's traffic and
arithmetic are known exactly, each compiled cold on the CPU with the
Recorder on.  {"kernels": {module: [[name, bytes, flops], ...]}, "rows":
{module: profile row of its kernel}, "layout": {module: [each graph's
layout_opt]}} (a fourth module, a convolution, for the layout only)."""

import json
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "engine", "inductor"))

import torch  # noqa: E402

import decisions  # noqa: E402
import measure  # noqa: E402


class Pointwise(torch.nn.Module):
    """sin(2x + 1): reads x, writes the result; mul, add, sin per element."""

    def forward(self, x):
        return torch.sin(x * 2.0 + 1.0)


class Softmax(torch.nn.Module):
    """One fused kernel of four loop nodes (amax, sub + exp, sum, div): x read
    and the result written once, the row maxima and sums kept inside; amax,
    sub, exp, sum, div per element."""

    def forward(self, x):
        return torch.softmax(x, dim=1)


class Slice(torch.nn.Module):
    """Half of x's columns times 3: half of x read, half written."""

    def forward(self, x):
        return x[:, :512] * 3.0


class Conv(torch.nn.Module):
    """A convolution: Inductor's layout optimization (channels-last) is a
    choice of its compile; the modules above make none."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def main():
    import torch._inductor.config as cfg
    torch.set_num_threads(2)
    cfg.cpp.enable_kernel_profile = True  # as the runner does: kernels by name in the profile
    out = {"kernels": {}, "rows": {}, "layout": {}}
    with tempfile.TemporaryDirectory() as cache:
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache  # cold: every graph scheduled
        for m in (Pointwise(), Softmax(), Slice(), Conv()):
            x = torch.randn(1, 8, 16, 16) if isinstance(m, Conv) else torch.randn(1024, 1024)
            rec = decisions.Recorder()
            rec.start()
            torch._dynamo.reset()
            try:
                with torch.no_grad():
                    fn = torch.compile(m)
                    fn(x)
            finally:
                rec.stop()
            name = type(m).__name__
            out["layout"][name] = [g.get("layout_opt") for g in rec.graphs]
            if isinstance(m, Conv):
                continue
            ks = [k for g in rec.graphs for k in g["kernels"]]
            out["kernels"][name] = [[k["name"], k["bytes"], k["flops"]] for k in ks]
            costs = decisions.kernel_costs(rec.graphs)
            with torch.no_grad():
                p = measure.profile_once(fn, (x,), "cpu", {k["name"]: [] for k in ks}, costs)
            out["rows"][name] = [r for r in p["rows"] if r["generated"]]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
