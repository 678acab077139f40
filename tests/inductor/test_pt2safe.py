"""pt2safe.py: an uploaded torch.export archive read without running anything
in it.  The test model (usermodel.py) is exported and read back: its info, its
weights bit-equal (the program's output equals the model's), inputs made for a
dynamic batch; inputs uploaded in the archive (the Python client's), used,
and refused when they are not what the program takes.  Then archives made to do harm or simply wrong, each of which
must end Invalid naming what is wrong, with the command it carries never run:
a weight stored as a pickle that runs a command (torch.export.load runs it: the
test shows that first, so the archive really is an attack), a sample-inputs
pickle that runs one (never read, so the model stays ready), a symbolic size
that is Python, a node calling os.system through torch, a custom operator's
library, a truncated archive, a zip that is not an export, bytes that are not a
zip, an archive over the size limit.  Runs itself again in the project venv's
python."""

import json
import os
import pickle
import subprocess
import sys
import tempfile
import zipfile

import indtest
from archives import _Cmd, edit_json, first, pickled_weight, rewrite

HERE = os.path.dirname(os.path.abspath(__file__))


def inside():
    sys.path.insert(0, os.path.join(indtest.SRC, "worker", "engine", "inductor"))
    sys.path.insert(0, HERE)
    import torch
    import pt2safe
    import usermodel

    c = indtest.Checks()
    tmp = tempfile.mkdtemp(prefix="fb-pt2safe-")
    good = os.path.join(tmp, "good.pt2")
    model, (x,) = usermodel.export(good)

    # the good archive: read, described, and the same function as the model
    ep, facts = pt2safe.load(good)
    with torch.no_grad():
        same = torch.equal(ep.module()(x), model(x))
    c.check(same, "the program read back computes exactly the model's output")
    info = pt2safe.inspect(good)
    n_params = sum(p.numel() for p in model.parameters())
    c.check(info["inputs"] == [{"name": "x", "shape": [2, 3, 16, 16], "dtype": "float32",
                                "dynamic_dims": [0]}] and info["dynamic_batch"],
            "inputs: x [2, 3, 16, 16] float32, batch dynamic (%s)" % info["inputs"])
    c.check(info["parameters"] == n_params and info["outputs"] == [
        {"shape": [2, 10], "dtype": "float32"}],
            "parameters %s (the model has %d), outputs %s" % (
                info["parameters"], n_params, info["outputs"]))
    c.check(info["ops"].get("aten.conv2d.default") == 3 and
            info["ops"].get("aten.scaled_dot_product_attention.default") == 1 and
            info["ops"].get("operator.getitem") == 3,
            "the op histogram: 3 convolutions, 1 attention, 3 getitems (%s)" % info["ops"])
    c.check(info["eager"]["ok"] and info["eager"]["median_ms"] > 0, "it runs in eager")
    nat = info["native"]
    c.check(nat["ok"] and nat["nodes"] == 36 and nat["ops"]["conv2d"] == 3 and
            nat["batch_dynamic"], "the native engine's converter takes it: %s" % nat)
    specs = pt2safe.input_specs(ep)
    (x8,) = pt2safe.make_inputs(ep, specs, seed=1, batch=8)
    with torch.no_grad():
        out8 = ep.module()(x8)
    c.check(tuple(x8.shape) == (8, 3, 16, 16) and tuple(out8.shape) == (8, 10),
            "a dynamic batch: inputs for batch 8 run (%s)" % (tuple(out8.shape),))

    # inputs uploaded with the program (the client's extra/inputs.safetensors)
    sys.path.insert(0, os.path.join(indtest.SRC, "clients", "python"))
    import fusionbench

    def with_inputs(name, tensors):
        path = os.path.join(tmp, name + ".pt2")
        rewrite(good, path, lambda n, d: d)
        fusionbench._add_inputs(path, tensors)
        return path

    x5 = torch.randn(5, 3, 16, 16)
    up = pt2safe.inspect(with_inputs("inputs_ok", {"x": x5}))
    with torch.no_grad():
        want = ep.module()(x5)
    _, facts = pt2safe.load(with_inputs("inputs_ok2", {"x": x5}))
    (back,) = pt2safe.check_inputs(specs, facts["inputs"])
    c.check(up["input_values"] == {"source": "uploaded", "shapes": [[5, 3, 16, 16]]} and
            torch.equal(back, x5) and tuple(want.shape) == (5, 10),
            "uploaded inputs: read bit-equal, used (%s)" % up["input_values"])
    c.check(pt2safe.repeat_batch((x5,), 7)[0][5:].equal(x5[:2]),
            "their samples repeat to a larger batch")
    for name, tensors, words in (
            ("inputs_name", {"y": x5}, ["the uploaded inputs have y", "takes x"]),
            ("inputs_missing", {}, ["the uploaded inputs lack x"]),
            ("inputs_dtype", {"x": x5.double()}, ["input x is float64", "takes float32"]),
            ("inputs_shape", {"x": torch.randn(5, 3, 8, 8)}, ["shape [5, 3, 8, 8]",
                                                              "takes [2, 3, 16, 16]"])):
        try:
            pt2safe.inspect(with_inputs(name, tensors))
            c.check(False, "%s: read as valid" % name)
        except pt2safe.Invalid as e:
            c.check(all(w in str(e) for w in words), "%s: invalid, %r" % (name, str(e)))

    def invalid(path, words, what, **kw):
        try:
            pt2safe.load(path, **kw)
        except pt2safe.Invalid as e:
            msg = str(e)
            c.check(all(w in msg for w in words), "%s: invalid, %r" % (what, msg))
            return
        c.check(False, "%s: read as valid" % what)

    # 1. a weight stored as a pickle that runs a command
    marker = os.path.join(tmp, "pwned-weight")
    evil = os.path.join(tmp, "evil_weight.pt2")
    pickled_weight(good, evil, marker)
    r = subprocess.run([sys.executable, "-c", "import sys, torch; torch.export.load(sys.argv[1])",
                        evil], capture_output=True, text=True, timeout=300)
    c.check(os.path.exists(marker),
            "the crafted archive is an attack: torch.export.load runs its command (%s)" %
            r.stderr.strip()[-200:])
    if os.path.exists(marker):
        os.unlink(marker)
    invalid(evil, ["conv1.weight", "pickled"], "a weight stored as a pickle")
    c.check(not os.path.exists(marker), "... and its command did not run")

    # 2. a sample-inputs pickle that runs a command: never read, the model is ready
    marker2 = os.path.join(tmp, "pwned-inputs")
    evil2 = os.path.join(tmp, "evil_inputs.pt2")
    bad_inputs = pickle.dumps(_Cmd(marker2))
    rewrite(good, evil2, lambda n, d: bad_inputs if "sample_inputs" in n else d)
    info2 = pt2safe.inspect(evil2)
    c.check(info2["parameters"] == n_params and not os.path.exists(marker2),
            "sample inputs that are a harmful pickle: never read (ready, nothing ran)")

    # 3. a symbolic size that is Python (sympify evaluates it)
    marker3 = os.path.join(tmp, "pwned-expr")
    evil3 = os.path.join(tmp, "evil_expr.pt2")

    def python_expr(prog):
        first(prog, lambda d: "expr_str" in d)["expr_str"] = \
            "__import__('os').system('touch %s')" % marker3

    rewrite(good, evil3, edit_json("models/model.json", python_expr))
    invalid(evil3, ["symbolic size", "__import__"], "a symbolic size that is Python")
    c.check(not os.path.exists(marker3), "... and its command did not run")

    # 4. a node retargeted (its relu): os.system reached through torch's
    # attributes; an ATen operator that reads a host file into a tensor; a
    # custom operator's library the worker lacks
    for target, words, what in (
            ("torch.os.system", ["torch.os.system", "not an ATen"],
             "a node calling torch.os.system"),
            ("torch.ops.aten.from_file.default", ["aten.from_file", "outside the process"],
             "a node calling aten.from_file"),
            ("torch.ops.mylib.fancy_relu.default", ["mylib.fancy_relu", "does not have"],
             "a custom operator")):
        def retarget(prog, target=target):
            first(prog, lambda d: isinstance(d.get("target"), str) and "relu" in d["target"])[
                "target"] = target

        path = os.path.join(tmp, "retargeted.pt2")
        rewrite(good, path, edit_json("models/model.json", retarget))
        invalid(path, words, what)

    # 6. truncated, 7. a zip that is not an export, 8. not a zip, 9. over the limit
    data = open(good, "rb").read()
    trunc = os.path.join(tmp, "truncated.pt2")
    open(trunc, "wb").write(data[:len(data) * 2 // 3])
    invalid(trunc, ["zip"], "a truncated archive")
    other = os.path.join(tmp, "other.zip")
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("photos/cat.txt", "meow")
    invalid(other, ["not a torch.export archive"], "a zip that is not an export")
    junk = os.path.join(tmp, "junk.pt2")
    open(junk, "wb").write(os.urandom(4096))
    invalid(junk, ["not a zip"], "bytes that are not a zip")
    invalid(good, ["unpacks to", "over the limit"], "an archive over the size limit",
            max_bytes=1000)

    # the runner's line for the good archive and an invalid one
    for path, status in ((good, "ready"), (evil, "invalid")):
        rc, lines, err = indtest.run_runner(sys.executable, args=["--inspect-model", path])
        c.check(rc == 0 and lines and lines[-1]["type"] == "model" and
                lines[-1]["status"] == status,
                "runner.py --inspect-model %s: %s (%s)" % (
                    os.path.basename(path), status, json.dumps(lines[-1:])[:300]))
    c.done()


def main():
    if "--inside" in sys.argv:
        inside()
        return
    py = indtest.python_or_skip()
    r = subprocess.run([py, os.path.abspath(__file__), "--inside"], timeout=900)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
