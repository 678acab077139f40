"""Inductor's fusion decisions and params.unfuse (worker/engine/inductor/
decisions.py, docs/INDUCTOR.md "Fusion by fusion"):

- the inductor rung lists its decisions with ids, kinds, members and kernels;
- undoing one fuse- id: more final scheduler nodes, the id gone, the output
  still within tolerance, timed interleaved with inductor; one group- id: more
  generated kernels;
- an id of the wrong form is the runner's invalid_argument (and
  fusionbench-run's exit 2 naming params.unfuse[i]); a well-formed id naming
  no fusion of the model fails the job after the compile, before any timed
  round, naming the id;
- unfuse_probe.py, in process: ids stable over two compiles, the compile cache
  cannot hand the undone compile the unmodified kernels, and a PyTorch
  without the hook gives "unsupported" for the counterfactual rung only."""

import json
import os
import subprocess

import indtest

TINY = {"model": "tiny_cnn", "warmup": 1, "iterations": 4, "threads": 2,
        "params": {"image_size": 16}}


def req(variants, **params):
    r = dict(TINY, variants=variants)
    r["params"] = dict(TINY["params"], **params)
    return r


def figures(res, name):
    return indtest.variant(res, name).get("inductor", {})


def decisions_listed(c, py):
    rc, lines, err = indtest.run_runner(py, req(["inductor"]))
    res = indtest.result_of(lines)
    f = figures(res, "inductor")
    ds = f.get("decisions", [])
    c.check(rc == 0 and f.get("decisions_total") == len(ds) >= 2,
            "inductor lists its fusion decisions (%d)" % len(ds))
    kinds = {"vertical", "horizontal", "reduction", "epilogue", "prologue", "kernel_group"}
    c.check(all(d["kind"] in kinds and len(d["members"]) >= 2 and d.get("kernel")
                for d in ds), "each decision: a kind, 2+ members, its kernel")
    c.check(f.get("fusion_decisions", {}).get("fuse", 0) >= 1 and
            f.get("fusion_decisions", {}).get("group", 0) >= 1,
            "tiny_cnn on the CPU: both a loop fusion and a kernel group (%s)" %
            f.get("fusion_decisions"))
    fuse = [d for d in ds if d["id"].startswith("fuse-")]
    c.check(all(d["predicted_shared_bytes"] is not None and d["predicted_shared_bytes"] >= 0
                for d in fuse), "each loop fusion: Inductor's predicted shared bytes")
    c.check(all(m.get("aten_ops") for d in fuse for m in d["members"]),
            "each member names the ATen ops it came from")
    return f


def undo_one(c, py, base, prefix):
    d = next(d for d in base["decisions"] if d["id"].startswith(prefix) and
             len(d["members"]) >= 2)
    rc, lines, err = indtest.run_runner(py, req(["eager"], unfuse=[d["id"]]))
    res = indtest.result_of(lines)
    names = [v["name"] for v in res["variants"]]
    c.check(names == ["eager", "inductor", "inductor-unfused"],
            "unfuse adds inductor and inductor-unfused after it (%s)" % names)
    un, ind = indtest.variant(res, "inductor-unfused"), indtest.variant(res, "inductor")
    fu, fi = un.get("inductor", {}), ind.get("inductor", {})
    took = fu.get("unfuse", [])
    c.check(un["status"] == "ok" and took and took[0]["id"] == d["id"] and took[0]["took"],
            "%s undone: ok, took (%s %s)" % (d["id"], un.get("message", ""), took))
    c.check(d["id"] not in {x["id"] for x in fu.get("decisions", [])},
            "%s: gone from the counterfactual's decisions" % d["id"])
    what = "final_nodes" if prefix == "fuse-" else "generated_kernels"
    c.check(fu.get(what, 0) > fi.get(what, 0),
            "%s: %s rose (%s -> %s)" % (d["id"], what, fi.get(what), fu.get(what)))
    if prefix == "group-":
        keys = {m["key"] for m in d["members"]}
        c.check(not any(x["kind"] == "kernel_group" and
                        keys <= {m["key"] for m in x["members"]}
                        for x in fu.get("decisions", [])),
                "%s: no kernel holds its members together any more" % d["id"])
    c.check(len(un["samples_ms"]) == len(ind["samples_ms"]) >= 4,
            "timed interleaved with inductor (%d rounds)" % len(un["samples_ms"]))
    c.check(un.get("max_rel_error") is not None and un["max_rel_error"] <= 1e-4,
            "the undone compile passes the accuracy gate (%s)" % un.get("max_rel_error"))


def refused(c, py):
    rc, lines, _ = indtest.run_runner(py, req(["inductor"], unfuse=["fuse-12"]))
    c.check(rc == 1 and lines[-1].get("code") == "invalid_argument" and
            "params.unfuse[0]" in lines[-1].get("message", ""),
            "a malformed id: invalid_argument naming params.unfuse[0]")
    rc, lines, _ = indtest.run_runner(py, req(["inductor"], unfuse=["fuse-000000000000"]))
    last = lines[-1]
    c.check(rc == 1 and last.get("code") == "invalid_argument" and
            "fuse-000000000000" in last.get("message", ""),
            "an id naming no fusion: invalid_argument naming it (%s)" % last.get("message"))
    phases = {l.get("phase") for l in lines if l["type"] == "progress"}
    c.check("prepare" in phases and "timing" not in phases and "warmup" not in phases,
            "... after the compile, before any warm-up or timed round (%s)" % sorted(
                p for p in phases if p))
    if indtest.BIN:
        exe = os.path.join(indtest.BIN, "worker", "fusionbench-run")
        r = subprocess.run([exe, "tiny_cnn", "--engine", "inductor", "--param",
                            'unfuse=["group-xyz"]', "--dry-run"], capture_output=True, text=True,
                           env=dict(os.environ, FUSIONBENCH_PYTHON=py), timeout=300)
        c.check(r.returncode == 2 and "params.unfuse[0]" in r.stderr,
                "fusionbench-run: a malformed id is exit 2 naming params.unfuse[0]")


def in_process(c, py):
    probe = os.path.join(os.path.dirname(os.path.abspath(__file__)), "unfuse_probe.py")
    r = subprocess.run([py, probe], capture_output=True, text=True, timeout=900)
    if r.returncode != 0:
        c.check(False, "unfuse_probe.py ran (%s)" % r.stderr.strip()[-800:])
        return
    p = json.loads(r.stdout.strip().splitlines()[-1])
    a, b = p["stable"]
    c.check(a == b and len(a) >= 2, "ids stable over two cold compiles (%s)" % a)
    c.check(p["again"]["hits"] >= 1 and not p["again"]["scheduled"],
            "a second normal compile in that cache directory hits the FX graph cache")
    for ident, u in p["undone"].items():
        c.check(u["scheduled"] and u["hits"] == 0 and ident not in u["ids"],
                "%s undone in the warm cache directory: scheduled anew, no cache hit" % ident)
    n = p["normal"]
    c.check(p["undone"][p["fuse"]]["final_nodes"] > n["final_nodes"],
            "the undone fusion's nodes stay apart (%d -> %d final nodes)" % (
                n["final_nodes"], p["undone"][p["fuse"]]["final_nodes"]))
    c.check(p["undone"][p["group"]]["kernels"] > n["kernels"],
            "the undone kernel group is split (%d -> %d kernels)" % (
                n["kernels"], p["undone"][p["group"]]["kernels"]))
    d = p["drift"]
    c.check(d["ok_before"] and not d["ok"] and "set_choices_handler" in d["why"],
            "feature check names the missing hook (%s)" % d["why"])
    c.check(d["type"] == "result" and d["variants"].get("inductor", {}).get("status") == "ok" and
            d["variants"].get("inductor-unfused", {}).get("status") == "unsupported" and
            "set_choices_handler" in d["variants"]["inductor-unfused"]["message"],
            "without the hook: the counterfactual is unsupported, the job still runs (%s)" %
            d["variants"])


def main():
    py = indtest.python_or_skip()
    c = indtest.Checks()
    base = decisions_listed(c, py)
    if base.get("decisions"):
        undo_one(c, py, base, "fuse-")
        undo_one(c, py, base, "group-")
    refused(c, py)
    in_process(c, py)
    c.done()


if __name__ == "__main__":
    main()
