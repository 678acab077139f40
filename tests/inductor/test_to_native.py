"""to_native.py: an exported program as the native engine's graph.  The test
model (usermodel.py: convolution + batch norm + ReLU, a residual, a
transformer block with attention, a linear head) and torchvision's resnet18
are exported, read back with pt2safe, converted, and run by the native engine
through tests/models' zoo_parity (the graph workload, every fusion rule on and
each off in turn): its eager and fused outputs must match PyTorch's.  A model
with an operator the native engine lacks is refused naming it; one with two
inputs converts to a graph of two inputs.  The test model's native form (to_native.write_form: the
file a native job of an uploaded model runs from) runs in fusionbench-run at a
batch the export did not have, its eager output checked against PyTorch's; a
form whose expected output is 1% off fails the gate; so do a model of the
other families' operators (embedding, layer norm, GELU, matmul attention,
conv + sigmoid, pooling, concat, mean) and a decomposed export's addmm.  Runs itself again in
the project venv's python."""

import json
import os
import subprocess
import sys
import tempfile

import indtest

HERE = os.path.dirname(os.path.abspath(__file__))


def parity(c, torch, pt2safe, to_native, save_file, what, model, x, tmp, zoo_parity,
           dynamic=False):
    path = os.path.join(tmp, what + ".pt2")
    shapes = ({0: torch.export.Dim("batch", min=1, max=64)},) if dynamic else None
    torch.export.save(torch.export.export(model, (x,), dynamic_shapes=shapes), path)
    ep, _ = pt2safe.load(path)
    graph, weights, rep = to_native.convert(ep)
    d = os.path.join(tmp, what)
    os.makedirs(d, exist_ok=True)
    save_file(weights, os.path.join(d, "weights.safetensors"))
    save_file({"input": x.contiguous()}, os.path.join(d, "input.safetensors"))
    with torch.no_grad():
        ref = model(x)
    save_file({"output": ref.contiguous()}, os.path.join(d, "expected.safetensors"))
    r = subprocess.run([zoo_parity, "graph", d, json.dumps({"graph": graph}), str(x.shape[0])],
                       capture_output=True, text=True, timeout=600)
    lines = [l for l in r.stdout.splitlines() if l.strip()]
    c.check(r.returncode == 0 and lines,
            "%s: the native engine's eager and fused outputs match PyTorch's, every rule "
            "configuration (%d nodes %s; %s)" % (what, rep["nodes"], rep["ops"],
                                                 (r.stdout + r.stderr)[-1500:]))
    return rep


def form_run(c, torch, to_native, ep, model, args, tmp, zoo_parity, what):
    """The native form through fusionbench-run (workload model.<id>) at batch 3,
    and once more with PyTorch's output made 1% off: the gate must fail."""
    run = os.path.join(os.path.dirname(zoo_parity), "..", "..", "worker", "fusionbench-run")
    graph, weights, rep = to_native.convert(ep)
    with torch.no_grad():
        ref = model(*args)
    for how, expected, want in (("its form", ref, "ok"),
                                ("a form 1% off", ref * 1.01, "accuracy_failed")):
        path = os.path.join(tmp, "form.fbn")
        to_native.write_form(path, graph, weights, tuple(args), expected, rep["batch_dynamic"])
        r = subprocess.run([run, "model.1", "--engine", "native", "--batch", "3", "--iterations",
                            "3", "--warmup", "1", "--json", "--param",
                            "model=" + json.dumps({"native": path})],
                           capture_output=True, text=True, timeout=300)
        try:
            res = json.loads(r.stdout)["result"]
        except ValueError:
            c.check(False, "%s, %s: fusionbench-run printed no result: %s" % (
                what, how, r.stderr[-1500:]))
            continue
        v = {x["name"]: x for x in res["variants"]}
        e = v["eager"]
        c.check(e["status"] == want and "PyTorch eager" in e["reference"]["against"] and
                "2 samples repeated to 3" in e["reference"]["against"] and
                (e["max_rel_error"] <= 1e-4) == (want == "ok") and
                v["fused"]["status"] == "ok" and (r.returncode == 0) == (want == "ok"),
                "%s, %s: eager %s against PyTorch (max_rel_error %s), fused %s, exit %d" % (
                    what, how, e["status"], e["max_rel_error"], v["fused"]["status"],
                    r.returncode))


def inside(zoo_parity):
    sys.path.insert(0, os.path.join(indtest.SRC, "worker", "engine", "inductor"))
    sys.path.insert(0, HERE)
    import torch
    import pt2safe
    import to_native
    import usermodel
    from safetensors.torch import save_file

    c = indtest.Checks()
    tmp = tempfile.mkdtemp(prefix="fb-to-native-")
    model, (x,) = usermodel.build()
    rep = parity(c, torch, pt2safe, to_native, save_file, "usernet", model, x, tmp, zoo_parity,
                 dynamic=True)
    form_run(c, torch, to_native, pt2safe.load(os.path.join(tmp, "usernet.pt2"))[0], model,
             (x,), tmp, zoo_parity, "usernet")
    c.check(rep["ops"].get("conv2d") == 3 and rep["ops"].get("batch_norm") == 2 and
            rep["ops"].get("softmax") == 1 and rep["batch_dynamic"],
            "the test model: 3 convolutions, 2 batch norms, attention's softmax, a dynamic "
            "batch (%s)" % rep)
    try:
        import torchvision
        torch.manual_seed(0)
        rn = torchvision.models.resnet18(num_classes=10).eval()
        for m in rn.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
        parity(c, torch, pt2safe, to_native, save_file, "resnet18", rn,
               torch.randn(1, 3, 64, 64), tmp, zoo_parity)
    except ImportError:
        print("note: torchvision missing; resnet18 not converted")

    class Cover(torch.nn.Module):
        """The other families' operators: token ids into an embedding, layer
        norm, linear + GELU, attention by matmuls and softmax, a reshape to
        a plane, convolution + sigmoid, max and average pooling, a concat and
        a mean, a linear head."""

        def __init__(self):
            super().__init__()
            self.emb, self.ln = torch.nn.Embedding(50, 16), torch.nn.LayerNorm(16)
            self.fc, self.conv = torch.nn.Linear(16, 16), torch.nn.Conv2d(1, 4, 3, padding=1)
            self.head = torch.nn.Linear(4 * 4 * 4 + 16, 5)

        def forward(self, ids):
            t = torch.nn.functional.gelu(self.fc(self.ln(self.emb(ids))))
            a = torch.softmax(torch.matmul(t, t.transpose(1, 2)) * 0.25, -1) @ t
            img = a.reshape(a.shape[0], 1, 8, 16)
            y = torch.nn.functional.max_pool2d(torch.sigmoid(self.conv(img)), 2)
            y = torch.nn.functional.avg_pool2d(y, (1, 2))
            return self.head(torch.cat([y.flatten(1), a.mean(1)], 1))

    torch.manual_seed(0)
    cover = Cover().eval()
    ids = torch.randint(0, 50, (2, 8))
    path = os.path.join(tmp, "cover.pt2")
    torch.export.save(torch.export.export(cover, (ids,), dynamic_shapes=(
        {0: torch.export.Dim("batch", min=1, max=64)},)), path)
    ep, _ = pt2safe.load(path)
    form_run(c, torch, to_native, ep, cover, (ids,), tmp, zoo_parity, "embedding ... pooling")

    class Mlp(torch.nn.Module):  # decomposed: aten.addmm, aten.t
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(8, 32), torch.nn.Linear(32, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    mlp = Mlp().eval()
    x2 = torch.randn(2, 8)
    path = os.path.join(tmp, "mlp.pt2")
    torch.export.save(torch.export.export(mlp, (x2,), dynamic_shapes=(
        {0: torch.export.Dim("batch", min=1, max=64)},)).run_decompositions(), path)
    ep, _ = pt2safe.load(path)
    ops = pt2safe.op_histogram(ep)
    c.check("aten.addmm.default" in ops, "the decomposed export calls addmm (%s)" % ops)
    form_run(c, torch, to_native, ep, mlp, (x2,), tmp, zoo_parity, "addmm")

    class Cumsum(torch.nn.Module):
        def forward(self, x):
            return torch.cumsum(torch.relu(x), 1) + torch.cumsum(x, 1)

    class TwoIn(torch.nn.Module):  # two inputs, each its own input of the graph
        def __init__(self):
            super().__init__()
            self.fx, self.fy = torch.nn.Linear(8, 16), torch.nn.Linear(4, 16)

        def forward(self, x, y):
            return torch.relu(self.fx(x)) * torch.sigmoid(self.fy(y)) + self.fx(x)

    two = TwoIn().eval()
    args = (torch.randn(2, 8), torch.randn(2, 4))
    batch = torch.export.Dim("batch", min=1, max=64)
    path = os.path.join(tmp, "two.pt2")
    torch.export.save(torch.export.export(two, args, dynamic_shapes=({0: batch}, {0: batch})),
                      path)
    ep, _ = pt2safe.load(path)
    graph, _, rep = to_native.convert(ep)
    ins = [t for t in graph["tensors"] if t["kind"] == "input"]
    c.check([(t["name"], t["shape"], t.get("batch")) for t in ins] ==
            [("x", [2, 8], True), ("y", [2, 4], True)] and rep["batch_dynamic"],
            "two inputs: the graph takes both, by name, their batch dynamic (%s)" % ins)
    form_run(c, torch, to_native, ep, two, args, tmp, zoo_parity, "two inputs")

    for what, m, args, words in (
            ("cumsum", Cumsum(), (torch.randn(2, 8),), ["aten.cumsum (x2)"]),):
        path = os.path.join(tmp, "bad.pt2")
        torch.export.save(torch.export.export(m, args), path)
        ep, _ = pt2safe.load(path)
        try:
            to_native.convert(ep)
            c.check(False, "%s: converted" % what)
        except to_native.Unsupported as e:
            c.check(all(w in str(e) for w in words), "%s: refused, %r" % (what, str(e)))
    c.done()


def main():
    if "--inside" in sys.argv:
        inside(sys.argv[sys.argv.index("--inside") + 1])
        return
    zoo = os.path.join(indtest.BIN or os.path.join(indtest.SRC, "build"), "tests", "models",
                       "zoo_parity")
    if not os.access(zoo, os.X_OK):
        print("SKIP: no %s (the build's tests/models)" % zoo)
        sys.exit(indtest.SKIP)
    py = indtest.python_or_skip(("torch", "safetensors"))
    r = subprocess.run([py, os.path.abspath(__file__), "--inside", zoo], timeout=1200)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
