"""Every CPU rung for real on small models: tiny_cnn through the whole ladder
(CUDA-graph rungs answer unsupported with the reason); with --models (the full
tier, ctest inductor.test_ladder_models), resnet18 at 64x64 and a two-layer
narrow bert_base eager against inductor: real torchvision/transformers graphs
through Inductor, minutes of compiling on a cold cache."""

import math
import sys

import indtest

CPU_RUNGS = ["eager", "inductor-nofusion", "inductor", "inductor-max-autotune"]


def ladder_tiny(c, py):
    req = {"model": "tiny_cnn", "variants": CPU_RUNGS + ["eager+cudagraphs",
                                                         "inductor+cudagraphs"],
           "warmup": 2, "iterations": 8, "threads": 2, "params": {"image_size": 16}}
    rc, lines, _ = indtest.run_runner(py, req)
    res = indtest.result_of(lines)
    c.check(rc == 0, "tiny_cnn ladder: runner exit 0")
    c.check(res.get("recompiles_during_timing") == 0, "nothing recompiled during warm-up/timing")
    for name in CPU_RUNGS:
        v = indtest.variant(res, name)
        c.check(v["status"] == "ok", "%s: ok (%s)" % (name, v.get("message", "")))
        c.check(len(v["samples_ms"]) == res["repetition"]["rounds"] >= 8 and
                min(v["samples_ms"]) > 0, "%s: a sample per round (8 asked)" % name)
        c.check(v.get("max_rel_error") is not None and v["max_rel_error"] <= 1e-4,
                "%s: max_rel_error %s <= 1e-4" % (name, v.get("max_rel_error")))
        c.check(v.get("peak_mem_bytes") is not None and v.get("peak_mem_method"),
                "%s: peak memory and how it was measured" % name)
        prof = v.get("profile", {})
        c.check(prof.get("kernels", 0) >= 3 and prof.get("kernel_time_ms", 0) > 0,
                "%s: profiled kernels with CPU time" % name)
    for name in ("eager+cudagraphs", "inductor+cudagraphs"):
        v = indtest.variant(res, name)
        c.check(v["status"] == "unsupported" and "CUDA" in v.get("message", ""),
                "%s: unsupported on the CPU, reason given" % name)
    nof = indtest.variant(res, "inductor-nofusion").get("inductor", {})
    ind = indtest.variant(res, "inductor").get("inductor", {})
    for name, f in (("inductor-nofusion", nof), ("inductor", ind)):
        c.check(f.get("compile_cold_ms", 0) > 0 and f.get("compile_warm_ms", 0) > 0,
                "%s: cold and warm compile times" % name)
        c.check(f.get("warm_cache_hits", 0) >= 1, "%s: the warm compile hit the FX graph cache"
                % name)
    c.check(nof.get("nodes_after_fusion") == nof.get("nodes_before_fusion") and
            nof.get("pattern_matcher_count") == 0,
            "nofusion: the scheduler fused nothing, pattern matcher off")
    c.check(ind.get("nodes_after_fusion", 0) < ind.get("nodes_before_fusion", 0),
            "inductor: the scheduler fused nodes")
    c.check(nof.get("generated_kernels", 0) > ind.get("generated_kernels", 0),
            "nofusion generates more kernels than inductor")
    c.check(all(k.get("scheduler_nodes") == 1 for k in nof.get("kernels", [])),
            "nofusion: one scheduler node per cpp kernel (no kernel grouping)")
    prof = indtest.variant(res, "inductor").get("profile", {})
    gen = [r for r in prof.get("rows", []) if r["generated"]]
    c.check(gen and all(r["name"].startswith("cpp_") and r["ops"] for r in gen),
            "inductor profile: cpp kernels by name with their ATen ops and CPU time")


def pair(c, py, model, params, label):
    req = {"model": model, "variants": ["eager", "inductor"], "warmup": 1, "iterations": 3,
           "threads": 2, "params": params}
    rc, lines, err_text = indtest.run_runner(py, req)
    res = indtest.result_of(lines)
    e, i = indtest.variant(res, "eager"), indtest.variant(res, "inductor")
    if i["status"] != "ok":
        print("runner stderr (end):\n" + err_text[-4000:])
    c.check(rc == 0 and e["status"] == "ok" and i["status"] == "ok",
            "%s: eager and inductor ok (%s)" % (label, i.get("message", "")))
    err = i.get("max_rel_error")
    c.check(err is not None and math.isfinite(err) and err <= i["tolerance"],
            "%s: inductor matches eager (max_rel_error %s)" % (label, err))
    f = i.get("inductor", {})
    c.check(f.get("graph_breaks") == 0, "%s: no graph breaks" % label)
    c.check(f.get("fused_kernels", 0) >= 1 and f.get("kernels_without_metadata") == 0,
            "%s: fused kernels (%s) with ATen ops" % (label, f.get("fused_kernels")))
    return f


def main():
    py = indtest.python_or_skip(("torch", "torchvision", "transformers"))
    c = indtest.Checks()
    if "--models" not in sys.argv[1:]:
        ladder_tiny(c, py)
        c.done()
        return
    r18 = pair(c, py, "resnet18", {"image_size": 64}, "resnet18 64x64")
    bn = "aten._native_batch_norm_legit_no_training"
    c.check(any(bn in k["aten_ops"] and "aten.relu" in k["aten_ops"] and k["fused"]
                for k in r18.get("kernels", [])), "resnet18: a fused batch norm + relu kernel")
    bert = pair(c, py, "bert_base", {"layers": 2, "hidden": 64, "heads": 2, "seq_len": 32},
                "bert_base 2 layers")
    c.check(any("aten.gelu" in k["aten_ops"] or "aten.erf" in k["aten_ops"]
                for k in bert.get("kernels", [])), "bert: GELU inside a generated kernel")
    c.done()


if __name__ == "__main__":
    main()
