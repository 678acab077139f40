"""Output-code parsing and fusion counts: a synthetic output module with Triton
and C++ kernels (exact numbers), then a real Inductor compile of conv → batch
norm → ReLU on the CPU whose output code must show a fused kernel with those
ATen ops, and whose generated kernels' profile rows carry their bytes and
FLOPs; then those counts, exactly, on three kernels whose traffic and
arithmetic are known (costs_probe.py)."""

import os
import sys

import indtest

sys.path.insert(0, os.path.join(indtest.SRC, "worker", "engine", "inductor"))
import outcode  # noqa: E402  (stdlib-only at import)

SYNTHETIC = '''
# kernel path: /tmp/x/ab.py
# Topologically Sorted Source Nodes: [x_1, x_2], Original ATen: [aten.add, aten.relu]
# Source node to ATen node mapping:
#   x_1 => add
#   x_2 => relu
# Graph fragment:
#   %add : Tensor = call_function[target=torch.ops.aten.add.Tensor](args = (%a, %b))
#   %relu : Tensor = call_function[target=torch.ops.aten.relu.default](args = (%add,))
triton_poi_fused_add_relu_0 = async_compile.triton('triton_poi_fused_add_relu_0', \'\'\'
    pass
\'\'\')


# Topologically Sorted Source Nodes: [y], Original ATen: [aten.view, aten.mul]
# Source node to ATen node mapping:
#   y => mul, view
# Graph fragment:
#   %view : Tensor = call_function[target=torch.ops.aten.view.default](args = (%c,))
#   %mul : Tensor = call_function[target=torch.ops.aten.mul.Tensor](args = (%view, 2))
# fusionbench: scheduler_nodes=1
cpp_fused_mul_view_1 = async_compile.cpp_pybinding(['float*'], r\'\'\'
extern "C" void kernel(float* p) {}
\'\'\')


cpp_fused_unannotated_2 = async_compile.cpp_pybinding(['float*'], r\'\'\'
\'\'\')


class Runner:
    def call(self, args):
        triton_poi_fused_add_relu_0.run(buf0, buf1, 16, stream=stream0)
        # Topologically Sorted Source Nodes: [conv], Original ATen: [aten.convolution]
        buf2 = extern_kernels.convolution(buf1, w, None, stride=(1, 1))
        cpp_fused_mul_view_1(buf2)
        # Topologically Sorted Source Nodes: [fc], Original ATen: [aten.addmm]
        extern_kernels.addmm(b, buf2, w2, alpha=1, beta=1, out=buf3)
        cpp_fused_mul_view_1(buf3)
        return (buf2, )
'''


def synthetic(c):
    p = outcode.parse(SYNTHETIC)
    k = {x["name"]: x for x in p["kernels"]}
    c.check(sorted(k) == ["cpp_fused_mul_view_1", "cpp_fused_unannotated_2",
                          "triton_poi_fused_add_relu_0"], "three kernel definitions found")
    t = k.get("triton_poi_fused_add_relu_0", {})
    c.check(t.get("aten_ops") == ["aten.add", "aten.relu"] and t.get("n_nodes") == 2 and
            t.get("fused") and t.get("kind") == "triton" and t.get("launches") == 1,
            "triton kernel: add+relu, 2 nodes, fused, 1 launch")
    m = k.get("cpp_fused_mul_view_1", {})
    c.check(m.get("n_nodes") == 1 and not m.get("fused") and m.get("launches") == 2 and
            m.get("scheduler_nodes") == 1, "cpp kernel: the view does not count, 2 launches")
    c.check(k.get("cpp_fused_unannotated_2", {}).get("aten_ops") == [],
            "a kernel without metadata has no ops (never guessed from its name)")
    c.check(p["extern_calls"] == [{"call": "extern_kernels.convolution",
                                   "aten_ops": ["aten.convolution"], "source_nodes": ["conv"]},
                                  {"call": "extern_kernels.addmm",
                                   "aten_ops": ["aten.addmm"], "source_nodes": ["fc"]}],
            "extern convolution and out= addmm, each with its comment")
    s = outcode.summarize([p])
    c.check((s["generated_kernels"], s["fused_kernels"], s["fused_ops"], s["extern_calls"],
             s["kernels_without_metadata"]) == (3, 1, 2, 2, 1), "summary counts")


def real_compile(c, py):
    req = {"model": "tiny_cnn", "variants": ["inductor"], "warmup": 1, "iterations": 2,
           "threads": 2, "params": {"image_size": 16}}
    rc, lines, err = indtest.run_runner(py, req)
    res = indtest.result_of(lines)
    ind = indtest.variant(res, "inductor").get("inductor", {})
    ks = ind.get("kernels", [])
    bn = "aten._native_batch_norm_legit_no_training"
    fused_bn = [k for k in ks if k["fused"] and bn in k["aten_ops"] and "aten.relu" in k["aten_ops"]]
    c.check(rc == 0 and ind.get("cpp_metadata") is True, "real compile ran, cpp metadata on")
    c.check(len(ks) >= 2 and all(k["kind"] == "cpp" for k in ks), "cpp_fused_* kernels generated")
    c.check(ind.get("kernels_without_metadata") == 0, "every cpp kernel has its ATen ops")
    c.check(len(fused_bn) >= 1, ">= 1 fused kernel implementing batch norm + relu")
    c.check(all(k["n_nodes"] >= 2 for k in fused_bn), "those fuse >= 2 graph nodes")
    c.check(ind.get("fused_kernels", 0) >= 1 and ind.get("fused_ops", 0) >= 2 * ind.get(
        "fused_kernels", 0), "fused_kernels >= 1, fused_ops >= 2 per fused kernel")
    c.check(ind.get("fused_kernels") == sum(1 for k in ks if k["fused"]),
            "fused_kernels counts the fused kernels of the output code")
    c.check(ind.get("extern_calls", 0) >= 2 and all(
        e["aten_ops"] for e in ind.get("extern", [])), "extern conv calls with ATen ops")
    c.check(ind.get("graph_breaks") == 0 and ind.get("graphs") == 1, "one graph, no breaks")
    c.check(ind.get("nodes_before_fusion", 0) > ind.get("nodes_after_fusion", 0) > 0,
            "the scheduler fused nodes (before > after)")
    rows = indtest.variant(res, "inductor").get("profile", {}).get("rows", [])
    gen = [r for r in rows if r["generated"]]
    # (a layout copy for the convolution computes nothing: 0 FLOPs)
    c.check(gen and all(r.get("impl") == "inductor" and r["bytes"] > 0 and r["flops"] >= 0
                        for r in gen) and any(r["flops"] > 0 for r in gen),
            "every generated kernel's profile row has its bytes and FLOPs: %r" % [
                (r["name"], r.get("bytes"), r.get("flops")) for r in gen])
    c.check(all("impl" not in r for r in rows if not r["generated"]),
            "library calls' rows carry no counts")


def costs(c, py):
    """A kernel's bytes and FLOPs, exactly, on three kernels whose traffic and
    arithmetic are known (costs_probe.py), and its profile row's."""
    import json
    import subprocess
    r = subprocess.run([py, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                         "costs_probe.py")],
                       capture_output=True, text=True, timeout=600)
    c.check(r.returncode == 0, "costs_probe ran: %s" % r.stderr[-400:])
    if r.returncode != 0:
        return
    out = json.loads(r.stdout.strip().splitlines()[-1])
    mb4, n = 4 << 20, 1 << 20  # a 1024 x 1024 float tensor, its elements
    want = {"Pointwise": (2 * mb4, 3 * n),  # x read, result written; mul, add, sin
            "Softmax": (2 * mb4, 5 * n),  # the row maxima and sums stay inside
            "Slice": (mb4, n // 2)}  # half read, half written; one mul each
    for name, (nbytes, flops) in want.items():
        ks = out["kernels"][name]
        c.check(len(ks) == 1 and ks[0][1:] == [nbytes, flops],
                "%s: one kernel of %d bytes and %d FLOPs: %r" % (name, nbytes, flops, ks))
        rows = out["rows"][name]
        c.check(len(rows) == 1 and rows[0]["impl"] == "inductor" and
                (rows[0]["bytes"], rows[0]["flops"]) == (nbytes * rows[0]["count"],
                                                         flops * rows[0]["count"]),
                "%s: its profile row carries them, per iteration: %r" % (name, rows))
    lay = out["layout"]
    c.check(lay["Conv"] == [True] and all(lay[n] == [False] for n in want),
            "the layout choice read from the compile: the convolution channels-last, the "
            "others none (%r)" % lay)


def main():
    c = indtest.Checks()
    synthetic(c)
    py = indtest.python_or_skip()
    real_compile(c, py)
    costs(c, py)
    c.done()


if __name__ == "__main__":
    main()
