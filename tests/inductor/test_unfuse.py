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
  (and the explanation's shared one: unchanged kernels loaded, undone ones not)
  cannot hand the undone compile the unmodified kernels, and a PyTorch
  without the hook gives "unsupported" for the counterfactual rung only;
- the explanation, fusion by fusion (explain.py, docs/EXPLAIN.md), on
  tiny_cnn through the protocol: every decision with a verdict, the counts
  adding up, ladder step = sum of the parts + interaction, the cost-model
  audit, missed fusions, break-even, and a repro per variant whose snippet runs;
- with --planted N (the full tier, inductor.test_unfuse_planted): over N seeds,
  explain_probe.py's planted harmful fusion is `lost` with an evidence-backed
  reason and its helpful one `won`;
- with --interaction (the full tier and CI's second pass,
  inductor.test_unfuse_interaction): explain_probe.py's planted interaction,
  four softmaxes any one of which, kept fused, needs a second scores buffer,
  is found by the peak search on a real compile: all four its causes, the
  extra peak one buffer's bytes, and the two middle ones, undone alone,
  allocating a third buffer a call; no timing asked of the machine."""

import json
import os
import subprocess
import sys

import indtest

HERE = os.path.dirname(os.path.abspath(__file__))
VERDICTS = {"won", "lost", "no_difference", "did_not_take", "not_measured"}

TINY = {"model": "tiny_cnn", "warmup": 1, "iterations": 4, "threads": 2,
        "params": {"image_size": 16}}


def req(variants, **params):
    r = dict(TINY, variants=variants)
    r["params"] = dict(TINY["params"], **params)
    return r


def figures(res, name):
    return indtest.variant(res, name).get("inductor", {})


def decisions_listed(c, py):
    r = req(["eager", "inductor-nofusion", "inductor"], time_budget_s=120)
    r.update(explain=True, iterations=10)
    rc, lines, err = indtest.run_runner(py, r)
    res = indtest.result_of(lines)
    f = figures(res, "inductor")
    explained(c, py, res, f)
    # its progress: seconds spent of the explanation's budget, never past it
    ex = [(l["done"], l["total"]) for l in lines
          if l.get("type") == "progress" and l.get("phase") == "explain"]
    fx = f.get("fusion_explain", {})
    c.check(len(ex) >= 3 and all(t == max(1, round(fx.get("budget_s", -1))) and 0 <= d <= t
                                 for d, t in ex) and
            [d for d, _ in ex] == sorted(set(d for d, _ in ex)),
            "explain progress: seconds of the %s s budget, each once, rising, never past it (%s)"
            % (fx.get("budget_s"), ex[:8]))
    # and it moves while a counterfactual compiles (a beat each second): no
    # stretch of the explanation goes by without a line
    gaps = [b - a for (a, _), (b, _) in zip(ex, ex[1:])]
    c.check(gaps and max(gaps) <= 3,
            "explain progress: no more than 3 s without a line, compiles included (largest gap "
            "%s s over %d lines)" % (max(gaps or [None]), len(ex)))
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


def explained(c, py, res, ind):
    fx = ind.get("fusion_explain", {})
    fus = fx.get("fusions", [])
    c.check(len(fus) == ind.get("decisions_total", -1) >= 2,
            "tiny_cnn: every decision in the explanation (%d)" % len(fus))
    c.check(all(e["verdict"] in VERDICTS for e in fus), "each with a verdict")
    c.check(sum(fx.get("counts", {}).values()) == len(fus), "the counts add up")
    alone = [e for e in fus if e["measured"] == "alone"]
    c.check(len(alone) == len(fus) and all(
        e["saved_ci95"][0] <= e["saved_ms"] <= e["saved_ci95"][1] for e in alone),
        "4 decisions: each undone alone, its saving inside its interval")
    c.check(fx.get("layout_noise_ms") is not None and fx.get("placebo"),
            "the placebo (the same code built again) gives the layout noise")
    # a callable whose code a later compile's dynamo reset dropped compiles
    # again when called, without its undo: each comparison must time the
    # code it names
    c.check(fx.get("recompiles_during_comparisons") == 0 and
            len(fx.get("comparisons", [])) >= 4 and
            all(x.get("recompiled") == 0 for x in fx["comparisons"]),
            "nothing compiled while a comparison ran (%s over %d comparisons)" % (
                fx.get("recompiles_during_comparisons"), len(fx.get("comparisons", []))))
    c.check(fx.get("ladder_step_ms") is not None and fx.get("interaction_ms") is not None and
            abs(fx["ladder_step_ms"] - fx["sum_of_parts_ms"] - fx["interaction_ms"]) < 1e-9,
            "ladder step = sum of the parts + interaction")
    c.check(isinstance(fx.get("cost_model", {}).get("points"), list),
            "the cost-model audit lists its points")
    c.check(isinstance(fx.get("missed"), dict) and "by_reason" in fx["missed"],
            "missed fusions, by Inductor's reason")
    mem = (fx.get("memory") or {}).get("inductor") or {}
    held = mem.get("held_by") or {}
    c.check((mem.get("peak_bytes") or 0) > 0 and held and
            sum(held.values()) >= mem["peak_bytes"],
            "memory: inductor's peak and what held it (%s of %s)" % (held, mem.get("peak_bytes")))
    be = fx.get("break_even") or {}
    c.check("inductor" in be and be["inductor"].get("compile_cold_ms", 0) > 0,
            "break-even against eager for the inductor rung (%s)" % be.get("inductor"))
    for v in res["variants"]:
        rp = v.get("repro", {})
        c.check(rp.get("command", "").startswith("fusionbench-run tiny_cnn --engine inductor") and
                "torch" in rp.get("python", ""), "%s: a repro command and snippet" % v["name"])
    # the snippet runs as it stands
    snippet = indtest.variant(res, "inductor")["repro"]["python"]
    r = subprocess.run([py, "-c", snippet + "\nprint('repro ran', out.shape)"],
                       capture_output=True, text=True, timeout=600)
    c.check(r.returncode == 0 and "repro ran" in r.stdout,
            "the inductor snippet runs (%s)" % r.stderr.strip()[-300:])


def probe(py, module, seed, *args):
    r = subprocess.run([py, os.path.join(HERE, "explain_probe.py"), module, "--seed", str(seed)]
                       + list(args), capture_output=True, text=True, timeout=1200)
    if r.returncode != 0:
        raise AssertionError("explain_probe.py %s: %s" % (module, r.stderr.strip()[-1500:]))
    return json.loads(r.stdout.strip().splitlines()[-1])


def planted(c, py, seeds):
    for seed in range(seeds):
        p = probe(py, "harmful", seed)
        fx = p["fusion_explain"] or {}
        horiz = [e for e in fx.get("fusions", []) if e["id"].startswith("fuse-")]
        c.check(len(horiz) == 1, "harmful (seed %d): one scheduler fusion (%s)" % (
            seed, [(e["id"], e["kind"]) for e in fx.get("fusions", [])]))
        for e in horiz:
            ev = e.get("evidence") or {}
            c.check(e["verdict"] == "lost" and e["kind"] == "vertical",
                    "harmful (seed %d): %s (vertical) lost %+.4f ms %s past the layout noise "
                    "%s (placebo %s; medians %s)" % (
                        seed, e["id"], e["saved_ms"] or 0, e["saved_ci95"],
                        fx.get("layout_noise_ms"), fx.get("placebo"), p["medians"]))
            # both loop nests vectorized, no more loads, no library call
            # lost: the fused kernel itself measured slower than its parts
            c.check(e["reason"] == "kernel_slowdown" and
                    (ev.get("fused_kernel_ms") or 0) > (ev.get("unfused_kernels_ms") or 1e9),
                    "harmful (seed %d): reason kernel_slowdown, fused kernel %s ms against "
                    "%s ms apart" % (seed, ev.get("fused_kernel_ms"),
                                     ev.get("unfused_kernels_ms")))
            c.check(("takes %.4f ms" % ev.get("fused_kernel_ms", 0)) in e.get("why", ""),
                    "harmful (seed %d): why, in words: %s" % (seed, e.get("why")))
            all_lost = fx.get("all_lost_undone") or {}
            c.check((all_lost.get("recovered_ms") or 0) > 0,
                    "harmful (seed %d): undoing the lost fusion recovers %s ms" % (
                        seed, all_lost.get("recovered_ms")))
        p = probe(py, "helpful", seed)
        fx = p["fusion_explain"] or {}
        red = [e for e in fx.get("fusions", []) if e["kind"] == "reduction"]
        c.check(len(red) >= 1 and all(e["verdict"] == "won" for e in red),
                "helpful (seed %d): the reduction fusion won (%s; medians %s)" % (
                    seed, [(e["id"], e["verdict"], e["saved_ms"], e["saved_ci95"]) for e in red],
                    p["medians"]))


def interaction(c, py):
    """The extra peak no one fusion holds, found on a real compile (EXPLAIN.md
    item 11, "Extra peak held together"): scores of 4 x 600 x 600 floats
    (5,760,000 B) from a bmm, softmaxed four times.  Undone, each softmax
    writes over its scores in place and one buffer serves all four layers;
    any one of them fused writes elsewhere and the graph holds a second.
    What is checked is allocations, not times: the same on any machine that
    reaches the search within the budget (it runs right after every decision
    undone at once, before the step's knobs; the whole explanation took 195 s
    of the 240 here)."""
    n = 600
    scores = 4 * n * n * 4
    p = probe(py, "interaction", 0, "--size", str(n), "--budget", "240")
    fx = p["fusion_explain"] or {}
    rows = fx.get("fusions", [])
    ids = {e["id"] for e in rows}
    c.check(len(rows) == 4 and all(e["kind"] == "reduction" and e["id"].startswith("fuse-") and
                                   "_softmax" in (e.get("kernel") or "") for e in rows),
            "interaction: four softmax reductions fused (%s)" % [
                (e["id"], e["kind"], e.get("kernel")) for e in rows])
    mem = {k: v.get("peak_bytes") for k, v in (fx.get("memory") or {}).items()}
    c.check((mem.get("inductor") or 0) - (mem.get("inductor-nofusion") or 0) >= scores,
            "interaction: inductor peaks a scores buffer (%d B) above inductor-nofusion (%s)" %
            (scores, mem))
    c.check(all((e.get("peak_mem_delta_bytes") or 0) < scores // 2 for e in rows),
            "interaction: no one fusion undone lowers the peak (%s)" %
            [e.get("peak_mem_delta_bytes") for e in rows])
    part = next((x for x in (fx.get("step") or {}).get("parts", [])
                 if x.get("part") == "decisions"), {})
    c.check((part.get("peak_mem_delta_bytes") or 0) >= scores,
            "interaction: all four undone at once lower it by a buffer (%s)" %
            part.get("peak_mem_delta_bytes"))
    pk = fx.get("peak_interaction") or {}
    c.check(pk.get("stopped") == "done" and set(pk.get("causes") or []) == ids and
            pk.get("together") == [] and (pk.get("extra_peak_bytes") or 0) >= scores,
            "interaction: the peak search names all four as causes, any one kept brings back "
            "%s B (stopped %s; causes %s; together %s; %d keep-tests; the explanation took "
            "%s s)" % (pk.get("extra_peak_bytes"), pk.get("stopped"), pk.get("causes"),
                       pk.get("together"), len(pk.get("tests") or []), p.get("seconds")))
    c.check(all(e.get("peak_interaction") == "cause" for e in rows),
            "interaction: each fusion's row says it is a cause (%s)" %
            [e.get("peak_interaction") for e in rows])
    per = ((pk.get("evidence") or {}).get("allocated_per_call") or {})
    # a scores buffer more, less the rows' maxima and sums the unfused
    # softmaxes keep apart (28,800 B here)
    c.check(((per.get("fused") or {}).get("bytes") or 0) -
            ((per.get("all_undone") or {}).get("bytes") or 0) >= 0.95 * scores,
            "interaction: the output code allocates about a scores buffer more a call fused "
            "(%s)" % per)
    # undone alone, each of the two middle softmaxes breaks the buffers'
    # ping-pong: the graph allocates a third scores buffer a call
    ad = sorted((e.get("alloc_delta_bytes") for e in rows), key=lambda x: (x is None, x))
    c.check(len(ad) == 4 and None not in ad and ad[1] <= -0.95 * scores and
            abs(ad[2]) < 0.05 * scores and abs(ad[3]) < 0.05 * scores,
            "interaction: two decisions undone alone allocate a scores buffer more a call, the "
            "other two about the same (alloc_delta_bytes %s)" % ad)
    print("interaction (informative, not checked): medians %s; step %s ms, layout noise %s ms" %
          (p.get("medians"), fx.get("ladder_step_ms"), fx.get("layout_noise_ms")))


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
    n, sh = p["normal"], p["shared"]
    c.check(sh["none"]["scheduled"] and sh["none"]["hits"] == 0 and sh["none"]["built"] == 0
            and sh["none"]["ids"] == n["ids"],
            "a counterfactual compile undoing nothing in the job's directory: scheduled anew, "
            "no FX graph cache hit, every kernel loaded (%d built)" % sh["none"]["built"])
    f = sh["fuse"]
    c.check(f["scheduled"] and f["hits"] == 0 and p["fuse"] not in f["ids"]
            and f["final_nodes"] > n["final_nodes"] and f["err"] < 1e-4,
            "a shared counterfactual compile still undoes %s (%d -> %d final nodes), "
            "right output" % (p["fuse"], n["final_nodes"], f["final_nodes"]))
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
    m = p["missed"]
    top = (m.get("top") or [{}])[0]
    c.check(m.get("refused_pairs", 0) >= 1 and top.get("shared_bytes", 0) > 0 and
            top.get("reason") == "intermediate nodes between node1 & node2",
            "a residual block: Inductor's refused merge recorded with its reason and the "
            "bytes it would have shared (%s)" % m)


def main():
    py = indtest.python_or_skip()
    c = indtest.Checks()
    if "--planted" in sys.argv:
        planted(c, py, int(sys.argv[sys.argv.index("--planted") + 1]))
        c.done()
    if "--interaction" in sys.argv:
        interaction(c, py)
        c.done()
    base = decisions_listed(c, py)
    if base.get("decisions"):
        undo_one(c, py, base, "fuse-")
        undo_one(c, py, base, "group-")
    refused(c, py)
    in_process(c, py)
    c.done()


if __name__ == "__main__":
    main()
