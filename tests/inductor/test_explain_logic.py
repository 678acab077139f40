"""explain.py's logic without compiling anything: a fake model of 20 fusion
decisions whose undoing changes a fake clock's time by a planted amount each,
so that the verdicts, the adaptive group testing, the budget, the sum of the
parts and the cost-model audit can be checked against what was planted; and
the reason rules on given code and Triton metadata.  Runs itself again in the
project venv's python (explain.py needs torch for its bootstrap)."""

import os
import random
import subprocess
import sys
import types

import indtest

HERE = os.path.dirname(os.path.abspath(__file__))


class FakeClock:
    """time_ms(fn) = fn.ms plus noise of +-noise ms (seeded)."""

    def __init__(self, noise, seed=1):
        self.noise, self.rng = noise, random.Random(seed)

    def time_ms(self, fn, inputs):
        return fn.ms + self.rng.uniform(-self.noise, self.noise)


class Program:
    def __init__(self, ms, undone=frozenset()):
        self.ms, self.undone = ms, frozenset(undone)

    def __call__(self, *a):
        return None


def fake_ctx(explain, effects, base_ms=10.0, noise=0.01, knobs=None, together=0.0, groups=(),
             extra=None, code=None, took=None, clock=None):
    """effects[i]: what undoing decision i adds to the time (ms): > 0, the
    fusion saved that much (won); < 0, it cost that much (lost).  knobs:
    {name: what switching it off adds}; together: what undoing every decision
    at once adds beyond the sum of their effects (their interaction); groups:
    the decisions that are C++ kernel groups (no prediction); extra(undone):
    what undoing the set of decision numbers undone adds besides; code(undone):
    the output code of that compile (the job's: code(set())); took(undone):
    whether that undo took (default: always); clock: in place of FakeClock."""
    ds = [{"id": "fuse-%012x" % i, "kind": "kernel_group" if i in groups else "vertical",
           "kernel": "k%d" % i, "members": [{"key": "a%d" % i}, {"key": "b%d" % i}],
           "predicted_shared_bytes": None if i in groups else 1000 * (i + 1)}
          for i in range(len(effects))]
    compiled = []

    def compile_cf(ids):
        compiled.append(list(ids) if ids else None)
        ms = base_ms + sum(effects[int(x[5:], 16)] for x in (ids or []))
        if ids and len(ids) == len(effects):
            ms += together
        undone = {int(x[5:], 16) for x in (ids or [])}
        if extra:
            ms += extra(undone)
        return {"fn": Program(ms, undone), "codes": [code(undone)] if code else [], "kernels": [],
                "kernel_ops": {}, "took": took(undone) if took else True, "externs": 0}

    ctx = explain.Ctx(base_fn=Program(base_ms), decisions=ds,
                      base_codes=[code(set())] if code else [],
                      compile_cf=compile_cf, clock=clock or FakeClock(noise), inputs=(),
                      kernel_ms={"k%d" % i: float(len(effects) - i) for i in range(len(effects))},
                      base_ms=base_ms, knobs=[(k, False) for k in (knobs or {})],
                      compile_knob=lambda name, value: {"fn": Program(base_ms + knobs[name])})
    return ctx, compiled


def inside():
    sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "engine", "inductor"))
    import explain

    c = indtest.Checks()
    # 4 decisions, measured one by one
    ctx, compiled = fake_ctx(explain, [0.5, -0.3, 0.0, 0.001])
    out = explain.explain(ctx, budget_s=60, ladder_step=0.1)
    v = {e["id"]: e for e in out["fusions"]}
    c.check([v["fuse-%012x" % i]["verdict"] for i in range(4)] ==
            ["won", "lost", "no_difference", "no_difference"],
            "4 decisions alone: won, lost, no difference x2 (%s)" %
            [e["verdict"] for e in out["fusions"]])
    c.check(compiled[0] is None and all(len(x) == 1 for x in compiled[1:5]),
            "a placebo first, then each decision undone alone")
    c.check(abs(v["fuse-%012x" % 0]["saved_ms"] - 0.5) < 0.02 and
            v["fuse-%012x" % 0]["saved_ci95"][0] <= 0.5 <= v["fuse-%012x" % 0]["saved_ci95"][1],
            "the planted saving inside the interval (%s)" % v["fuse-%012x" % 0]["saved_ci95"])
    c.check(out["layout_noise_ms"] is not None and out["layout_noise_ms"] < 0.02,
            "layout noise from the placebo (%s)" % out["layout_noise_ms"])
    c.check(abs(out["sum_of_parts_ms"] - 0.201) < 0.03 and
            abs(out["interaction_ms"] - (0.1 - out["sum_of_parts_ms"])) < 1e-12,
            "sum of the parts %.3f, interaction the rest" % out["sum_of_parts_ms"])
    c.check(out["all_lost_undone"] and out["all_lost_undone"]["ids"] == ["fuse-%012x" % 1] and
            abs(out["all_lost_undone"]["recovered_ms"] - 0.3) < 0.02,
            "all lost undone at once recovers what the lost one cost")
    c.check(out["cost_model"]["bad_fusions"] and
            out["cost_model"]["bad_fusions"][0]["id"] == "fuse-%012x" % 1,
            "the bad fusion: predicted to help, measured to hurt")
    c.check(out["step"]["parts"][0]["part"] == "decisions" and
            abs(out["step"]["parts"][0]["saved_ms"] - 0.201) < 0.03 and
            abs(out["step"]["decisions_interaction_ms"]) < 0.03,
            "no knobs: the step's parts are the decisions at once, no interaction (%s)" %
            out["step"])
    # the step, decomposed: the decisions together interact (+0.4 ms beyond
    # their sum), the pattern matcher saves 2 ms, epilogue fusion costs 0.5 ms,
    # and the ladder's step leaves 0.3 ms unexplained
    ctx, compiled = fake_ctx(explain, [0.5, -0.3, 0.0], together=0.4,
                             knobs={"pattern_matcher": 2.0, "epilogue_fusion": -0.5})
    # profiled: only the compile with every decision undone (10.6 ms) peaks
    # lower, by 400 kB (a buffer the fused kernels need)
    ctx.profile_fn = lambda fn, kops: {"times": {}, "peak": 600_000 if abs(fn.ms - 10.6) < 1e-9
                                       else 1_000_000}
    ctx.base_peak = 1_000_000
    out = explain.explain(ctx, budget_s=60, ladder_step=0.2 + 0.4 + 2.0 - 0.5 + 0.3)
    st = out["step"]
    got = [(p["part"], p.get("knob"), p["what"], p["verdict"], round(p["saved_ms"], 1))
           for p in st["parts"]]
    c.check(got == [("decisions", None, "all 3 fusion decisions undone at once", "won", 0.6),
                    ("knob", "pattern_matcher", "pattern_matcher=False", "won", 2.0),
                    ("knob", "epilogue_fusion", "epilogue_fusion=False", "lost", -0.5)],
            "the step's parts: decisions at once, then each knob alone (%s)" % got)
    c.check([p.get("peak_mem_delta_bytes") for p in st["parts"]] == [400_000, 0, 0],
            "the step's parts profiled: the decisions together raise the peak by 400 kB, "
            "the knobs not at all (%s)" % st["parts"])
    c.check(abs(st["decisions_interaction_ms"] - 0.4) < 0.03,
            "the decisions' interaction: together minus the sum of the parts (%.3f)" %
            st["decisions_interaction_ms"])
    c.check(abs(st["rest_ms"] - 0.3) < 0.03, "the step's rest: %.3f ms" % st["rest_ms"])
    # beside fusion: the compile's channels-last layout costs 3 ms, a choice no
    # rung of the ladder shows; with inductor slower than eager it is measured
    # before any fusion, else after them
    for med, first in (({"eager": 8.0, "inductor": 10.0}, True),
                       ({"eager": 12.0, "inductor": 10.0}, False)):
        ctx, compiled = fake_ctx(explain, [0.5, -0.3])
        ctx.beside = [("layout_optimization", False)]
        ctx.compile_knob = lambda name, value: {"fn": Program(7.0 if name == "layout_optimization"
                                                              else 10.0)}
        out = explain.explain(ctx, budget_s=60, medians=med)
        got = [(p["part"], p["knob"], p["what"], p["verdict"], round(p["saved_ms"], 1))
               for p in out["beside"]]
        order = [x.get("knob") for x in out["comparisons"]]
        c.check(got == [("beside", "layout_optimization", "layout_optimization=False", "lost",
                         -3.0)] and
                order.index("layout_optimization") == (0 if first else len(order) - 1),
                "beside fusion: the layout switched off alone costs inductor -3 ms, measured "
                "%s (%s, %s)" % ("first" if first else "last", got, order))
    # profiled once: the layout off peaks at 2 MB where the job's compile
    # peaks at 1.5 MB (its channels-last convolutions' outputs are fewer live)
    ctx.profile_fn = lambda fn, kops: {"times": {}, "peak": 2_000_000 if fn.ms == 7.0
                                       else 1_500_000}
    ctx.base_peak = 1_500_000
    out = explain.explain(ctx, budget_s=60, medians={"eager": 12.0, "inductor": 10.0})
    c.check([p.get("peak_mem_delta_bytes") for p in out["beside"]] == [-500_000],
            "beside fusion: the peak with the choice against without it, -500 kB (%s)" %
            out["beside"])
    ctx, compiled = fake_ctx(explain, [0.5, -0.3])
    out = explain.explain(ctx, budget_s=60, medians={"eager": 8.0, "inductor": 10.0})
    c.check(out["beside"] == [] and all("knob" not in x for x in out["comparisons"]),
            "a compile that made no such choice: nothing beside fusion compiled")
    ctx, compiled = fake_ctx(explain, [0.5, -0.3], knobs={"pattern_matcher": 2.0})
    ctx.beside = [("layout_optimization", False)]
    out = explain.explain(ctx, budget_s=0, ladder_step=1.0)
    c.check([p["verdict"] for p in out["beside"]] == ["not_measured"],
            "no budget: beside fusion not measured")
    c.check([p["verdict"] for p in out["step"]["parts"]] == ["not_measured"] * 2 and
            "rest_ms" not in out["step"], "no budget: the step's parts not measured, no rest")
    # 24 decisions, one lost and one won among them (sparse, as group testing
    # assumes): found in fewer compiles than one per decision
    effects = [0.0] * 24
    effects[3], effects[17] = -0.4, 0.5
    ctx, compiled = fake_ctx(explain, effects)
    out = explain.explain(ctx, budget_s=120)
    got = {e["id"]: e["verdict"] for e in out["fusions"]}
    lost = sorted(k for k, x in got.items() if x == "lost")
    c.check(lost == ["fuse-%012x" % 3] and got["fuse-%012x" % 17] == "won",
            "group testing: the lost one and the won one found (%s)" % lost)
    c.check(all(x == "no_difference" for k, x in got.items()
                if k not in ("fuse-%012x" % 3, "fuse-%012x" % 17)),
            "the other 22: no difference")
    c.check(len(compiled) < 1 + 24, "fewer compiles than one per decision (%d: placebo, "
            "chunks, halves, all lost)" % len(compiled))
    c.check(any(e["measured"].startswith("in_group_of_") for e in out["fusions"]),
            "chunks within the noise give their members no_difference as a group")
    units = out["cost_model"]["units"]
    ids = sorted(i for u in units for i in u["ids"])
    c.check(ids == sorted(e["id"] for e in out["fusions"]) and
            any(u["decisions"] > 1 for u in units) and
            all(u["predicted_shared_bytes"] == sum(1000 * (int(i[5:], 16) + 1) for i in u["ids"])
                for u in units),
            "the audit's units: every decision in exactly one, chunks with their predictions "
            "summed (%s)" % [(u["decisions"], u["predicted_shared_bytes"]) for u in units])
    c.check(isinstance(out["cost_model"]["spearman_units"], float),
            "a rank correlation over the units (%s)" % out["cost_model"]["spearman_units"])
    # predictions that rank the savings, though most chunks stay within the
    # noise: the units' correlation still sees it; one that ranks them
    # backwards reads negative
    for sign in (1, -1):
        ctx, _ = fake_ctx(explain, [sign * 0.0004 * i for i in range(24)])
        out = explain.explain(ctx, budget_s=120)
        rho = out["cost_model"]["spearman_units"]
        c.check(rho is not None and sign * rho > 0.8 and
                any(u["decisions"] > 1 for u in out["cost_model"]["units"]),
                "effects %s the predictions: units' rank correlation %s over %s" %
                ("with" if sign > 0 else "against", rho,
                 [u["decisions"] for u in out["cost_model"]["units"]]))
    # kernel groups (no prediction) among the fusions, every fourth one: no
    # chunk mixes the two, so each of the 24 fusions is in a unit the audit
    # ranks, and the correlation still reads the planted order
    groups = set(range(0, 32, 4))
    ctx, compiled = fake_ctx(explain, [0.0004 * i for i in range(32)], groups=groups)
    out = explain.explain(ctx, budget_s=120)
    units = out["cost_model"]["units"]
    ranked = sorted(i for u in units for i in u["ids"])
    c.check(ranked == sorted("fuse-%012x" % i for i in range(32) if i not in groups) and
            any(u["decisions"] > 1 for u in units),
            "kernel groups apart: every fusion in a unit the audit ranks (%d of 24: %s)" %
            (len(ranked), [u["decisions"] for u in units]))
    tested = [x for x in compiled[1:] if x and len(x) <= explain.SINGLE_MAX]
    c.check(tested and all(len({int(i[5:], 16) in groups for i in x}) == 1 for x in tested),
            "no chunk of group testing mixes fusions and kernel groups (%s)" % tested)
    rho = out["cost_model"]["spearman_units"]
    c.check(rho is not None and rho > 0.8, "their rank correlation: %s" % rho)
    # an interaction undoing finds no part of: a 0.5 ms loss that any one of
    # decisions 2, 5 and 9 costs while the rest are unfused (undone one, or a
    # chunk, the others still cost it); every decision undone at once is
    # lost, none alone or in a chunk, and keeping what is kept names all three
    cause = {2, 5, 9}
    # as whisper_tiny's softmax fusions did: any one of them kept needs a
    # second 54 MB buffer, allocated at every call
    def wrapper(undone):
        big = "buf16 = empty_strided_cpu((1, 6, 1500, 1500), (13500000, 2250000, 1500, 1), " \
              "torch.float32)\n" if cause - undone else ""
        return "def call(args):\n    buf11 = empty_strided_cpu((6, 1500, 1500), (2250000, 1500, " \
               "1), torch.float32)\n    " + big + "buf2 = empty_strided_cpu((1, 64), (64, 1), " \
               "torch.int64)\n"

    # each decision measured alone: what its output code allocates at each
    # call against the job's (explain_probe's four softmaxes at 1500: undoing
    # one of the two in the middle makes the graph allocate a third 36 MB
    # scores buffer a call, and costs 16 ms)
    def layers(undone):
        n = 1 if undone == {0, 1, 2, 3} else 3 if undone in ({1}, {2}) else 2
        return "def call(args):\n" + "".join(
            "    buf%d = empty_strided_cpu((4, 1500, 1500), (2250000, 1500, 1), torch.float32)"
            "\n" % i for i in range(n))

    ctx, _ = fake_ctx(explain, [0.0, 16.0, 16.0, 0.0], code=layers)
    out = explain.explain(ctx, budget_s=600)
    c.check([e.get("alloc_delta_bytes") for e in out["fusions"]] ==
            [0, -36_000_000, -36_000_000, 0] and
            [e["verdict"] for e in out["fusions"]] == ["no_difference", "won", "won",
                                                       "no_difference"],
            "each decision alone: the bytes its fusion spares or adds at each call "
            "(%s)" % [(e["id"][-1], e["verdict"], e.get("alloc_delta_bytes"))
                      for e in out["fusions"]])
    ctx, _ = fake_ctx(explain, [0.0, 16.0], code=lambda u: "def call(args):\n    buf0 = "
                      "empty_strided_cpu((s0, 4), (4, 1), torch.float32)\n")
    c.check(all("alloc_delta_bytes" not in e for e in explain.explain(ctx, budget_s=600)["fusions"]),
            "a symbolic size: the allocation's delta unsaid")
    ctx, compiled = fake_ctx(explain, [0.0] * 15,
                             extra=lambda u: -0.5 if cause <= u else 0.0, code=wrapper)
    out = explain.explain(ctx, budget_s=600, ladder_step=-0.5)
    it = out["step"].get("interaction")
    c.check(out["counts"]["lost"] == 0 and out["step"]["parts"][0]["verdict"] == "lost",
            "any one of three costs the loss: none lost, all at once lost (%s, %s)" %
            (out["counts"], out["step"]["parts"][0]["verdict"]))
    c.check(it is not None and sorted(it["causes"]) == ["fuse-%012x" % i for i in sorted(cause)]
            and it["together"] == [] and it["stopped"] == "done",
            "the interaction's causes: the three planted (%s)" % (it and it["causes"]))
    c.check(sorted(e["id"] for e in out["fusions"] if e.get("interaction") == "cause") ==
            ["fuse-%012x" % i for i in sorted(cause)], "the entries marked as causes")
    al = it["evidence"]["allocated_per_call"] if it else {}
    c.check(it and it["reason"] == "fresh_allocation" and
            al["fused"]["bytes"] == 108000512 and al["all_undone"]["bytes"] == 54000512 and
            al["fused"]["largest"] == 54000000,
            "its reason: a buffer allocated at every call while any cause is kept (%s, %s)" %
            (it and it["reason"], al))
    c.check(it and all(t["holds"] == bool(cause & {int(i[5:], 16) for i in t["kept"]})
                       for t in it["tests"]) and len(it["tests"]) < 2 * 15,
            "each keep-test holds the loss exactly when it keeps a cause (%d tests)" %
            len(it["tests"] if it else []))
    ctx, _ = fake_ctx(explain, [0.0] * 15, extra=lambda u: -0.5 if cause <= u else 0.0,
                      code=wrapper)
    ctx.device = "cuda"
    it = explain.explain(ctx, budget_s=600)["step"].get("interaction") or {}
    c.check(sorted(it.get("causes", [])) == ["fuse-%012x" % i for i in sorted(cause)] and
            it.get("reason") == "unexplained",
            "on a GPU (its caching allocator) the same allocations are no reason (%s)" %
            it.get("reason"))
    # a loss that needs two of decisions 3, 8 and 13 kept together: no single
    # cause; the set that holds it while neither half does, refined to the two
    # members it needs
    need = {3, 8, 13}
    ctx, _ = fake_ctx(explain, [0.0] * 15,
                      extra=lambda u: -0.5 if len(need - u) < 2 else 0.0)
    out = explain.explain(ctx, budget_s=600)
    it = out["step"].get("interaction") or {}
    c.check(it.get("reason") == "unexplained",
            "no allocation to read (no output code): unexplained (%s)" % it.get("reason"))
    grp = it.get("together") or [[]]
    c.check(it.get("causes") == [] and len(grp) == 1 and len(grp[0]) == 2 and
            {int(i[5:], 16) for i in grp[0]} < need and it.get("stopped") == "done",
            "two of three kept together: one group of exactly two of them (%s, %s)" %
            (it.get("causes"), it.get("together")))
    kept_sets = [{int(i[5:], 16) for i in t["kept"]} for t in it.get("tests", [])]
    c.check(all(t["holds"] == (len(need & k) >= 2) for t, k in zip(it.get("tests", []), kept_sets))
            and len(kept_sets) < 2 * 15,
            "each keep-test holds exactly when it keeps two of the three (%d tests)" %
            len(kept_sets))
    # the same, but one half's keep-test did not take: no group claimed
    ctx, _ = fake_ctx(explain, [0.0] * 15, extra=lambda u: -0.5 if len(need - u) < 2 else 0.0,
                      took=lambda u: u != set(range(15)) - {7, 8, 9, 10})
    it = explain.explain(ctx, budget_s=600)["step"].get("interaction") or {}
    c.check(it.get("together") == [] and
            any(t["verdict"] == "did_not_take" for t in it.get("tests", [])),
            "a keep-test that did not take: no group claimed from it (%s)" % it.get("together"))
    # the same three as causes of inductor's extra peak, with no time to it:
    # the step holds zero, so no timing search runs, and the memory one names
    # them from profiled compiles alone (any one kept: a 54 MB buffer more)
    def peaks(ctx, extra_peak):
        ctx.profile_fn = lambda fn, kops: {"times": {}, "peak": 66_000_000 + extra_peak(fn.undone)}
        ctx.base_peak = 66_000_000 + extra_peak(frozenset())
        return ctx

    ctx, compiled = fake_ctx(explain, [0.0] * 15, code=wrapper)
    ctx = peaks(ctx, lambda u: 54_000_000 if cause - u else 0)
    out = explain.explain(ctx, budget_s=600)
    pi = out.get("peak_interaction") or {}
    c.check("interaction" not in out["step"] and pi.get("extra_peak_bytes") == 54_000_000 and
            sorted(pi.get("causes", [])) == ["fuse-%012x" % i for i in sorted(cause)] and
            pi.get("together") == [] and pi.get("stopped") == "done",
            "inductor's extra peak: any one of three kept brings it back, found with no timing "
            "(%s)" % {k: pi.get(k) for k in ("extra_peak_bytes", "causes", "together")})
    c.check(sorted(e["id"] for e in out["fusions"] if e.get("peak_interaction") == "cause") ==
            ["fuse-%012x" % i for i in sorted(cause)] and
            not any(e.get("interaction") for e in out["fusions"]),
            "the entries marked as the peak's causes, none as the timing's")
    tests = pi.get("tests", [])
    c.check(tests and all(t["holds"] == bool(cause & {int(i[5:], 16) for i in t["kept"]}) and
                          t["adds_bytes"] == (54_000_000 if t["holds"] else 0) for t in tests)
            and len(tests) < 2 * 15,
            "each memory keep-test holds exactly when it keeps a cause (%d tests)" % len(tests))
    # (the placebo, two chunks of 8 and 7, every decision undone at once)
    c.check(out["stopped"] == "done", "everything measured: stopped says done")
    c.check(len(compiled) == 1 + 2 + 1 + len(tests) and
            pi["evidence"]["allocated_per_call"]["fused"]["bytes"] == 108000512,
            "one compile a keep-test (%d compiles, %d tests), the allocations read" %
            (len(compiled), len(tests)))
    # a budget that ends in the search: the search and the job say so
    cctx, _ = fake_ctx(explain, [0.0] * 15, code=wrapper)
    cctx = peaks(cctx, lambda u: 54_000_000 if cause - u else 0)
    cctx.knobs = [("pattern_matcher", False)]
    clock = [0.0]
    real = explain.time.monotonic
    explain.time.monotonic = lambda: clock[0]
    try:
        prof = cctx.profile_fn

        def slow_profile(fn, kops):  # each profile 10 s of the fake clock
            clock[0] += 10.0
            return prof(fn, kops)
        cctx.profile_fn = slow_profile
        cut = explain.explain(cctx, budget_s=60)
    finally:
        explain.time.monotonic = real
    cpi = cut.get("peak_interaction") or {}
    c.check(cpi.get("stopped") == "budget" and cut["stopped"] == "budget" and
            cut["step"]["parts"][-1]["verdict"] == "not_measured",
            "a budget that ends in the peak's search: it and the job say budget, the knob not "
            "measured (%s, %s, %s)" % (cpi.get("stopped"), cut["stopped"],
                                       cut["step"]["parts"][-1]["verdict"]))
    # two of three kept together: a group of exactly two
    ctx, _ = fake_ctx(explain, [0.0] * 15)
    ctx = peaks(ctx, lambda u: 54_000_000 if len(need - u) >= 2 else 0)
    pi = explain.explain(ctx, budget_s=600).get("peak_interaction") or {}
    grp = pi.get("together") or [[]]
    c.check(pi.get("causes") == [] and len(grp) == 1 and len(grp[0]) == 2 and
            {int(i[5:], 16) for i in grp[0]} < need,
            "the peak needs two of three kept together: one group of two (%s, %s)" %
            (pi.get("causes"), pi.get("together")))
    # one decision undone alone already lowers the peak (measured alone, 4 of
    # them): no search; nor for an extra peak under 1 MiB
    ctx, _ = fake_ctx(explain, [0.0] * 4)
    ctx = peaks(ctx, lambda u: 0 if 1 in u else 54_000_000)
    out = explain.explain(ctx, budget_s=600)
    c.check(out.get("peak_interaction") is None and
            [e.get("peak_mem_delta_bytes") for e in out["fusions"]][1] == 54_000_000,
            "one decision alone holds the extra peak: its own delta says so, no search")
    ctx, _ = fake_ctx(explain, [0.0] * 15)
    ctx = peaks(ctx, lambda u: 500_000 if cause - u else 0)
    c.check(explain.explain(ctx, budget_s=600).get("peak_interaction") is None,
            "an extra peak under 1 MiB: no search")
    # decisions lost alone: no interaction search
    ctx, _ = fake_ctx(explain, [0.0, -0.4, 0.0])
    out = explain.explain(ctx, budget_s=600)
    c.check("interaction" not in out["step"], "a lost decision found alone: no interaction search")
    # a budget that runs out: the rest not measured, and said so
    ctx, compiled = fake_ctx(explain, [0.1] * 6)
    out = explain.explain(ctx, budget_s=0)
    c.check(out["counts"]["not_measured"] == 6 and out["stopped"] == "budget",
            "no budget: every decision not_measured, stopped by the budget")
    c.check(compiled == [] and out["layout_noise_ms"] is None,
            "no budget: nothing compiled, not even the placebo (%s)" % compiled)
    # a budget shorter than one counterfactual is expected to cost (the job's
    # own cold compile, 100 s here, and its rounds): none started, so the job
    # does not run past its timeout; a cheap compile (1 s): all measured, the
    # guess replaced by what the first one cost
    ctx, compiled = fake_ctx(explain, [0.5, -0.3])
    out = explain.explain(ctx, budget_s=60, compile_times={"inductor": {"cold_ms": 100000.0}})
    c.check(compiled == [] and out["counts"]["not_measured"] == 2 and out["stopped"] == "budget",
            "a 60 s budget, a 100 s cold compile: no counterfactual started (%s)" % compiled)
    ctx, compiled = fake_ctx(explain, [0.5, -0.3])
    out = explain.explain(ctx, budget_s=60, compile_times={"inductor": {"cold_ms": 1000.0}})
    c.check(len(compiled) >= 3 and out["counts"]["not_measured"] == 0,
            "a 60 s budget, a 1 s cold compile: the placebo and both decisions (%d compiles)"
            % len(compiled))
    # reasons
    d = {"kind": "vertical"}
    a, b = {"bytes": 3 << 20}, {"bytes": 1 << 20}
    vec_a, vec_b = "for(){ at::vec::a(in_ptr0[i]); }", ["for(){ at::vec::b(in_ptr0[i]); }"]
    r, ev = explain.reason_of(d, vec_a, vec_b, 1.0, 2.0, 0, 0, allocs=(a, b))
    c.check(r == "fresh_allocation" and ev["allocated_per_call"]["fused"] is a,
            "the fused kernel no slower, 2 MiB more allocated at each call: %s" % r)
    r, _ = explain.reason_of(d, vec_a, vec_b, 2.0, 1.0, 0, 0, allocs=(a, b))
    c.check(r == "kernel_slowdown", "the fused kernel slower: that first (%s)" % r)
    r, _ = explain.reason_of(d, vec_a, vec_b, 1.0, 2.0, 0, 0, allocs=(b, a))
    c.check(r == "unexplained", "less allocated with the fusion: not the reason (%s)" % r)
    # explain_probe.py long_rows (2026-12-07): the fused softmax writes a
    # 36 MB block of its own, mapped afresh at each call; its page faults
    # land inside the kernel, which then reads as slower than its parts
    big = {"bytes": 216000308, "largest": 36000000}
    one = {"bytes": 180000244, "largest": 36000000}
    r, ev = explain.reason_of(d, vec_a, vec_b, 27.539, 10.7057, 0, 0, allocs=(big, one))
    w = explain.why_of(r, ev)
    c.check(r == "fresh_allocation" and "mapped afresh at every call" in w and
            "takes 27.5390 ms; its unfused kernel takes 10.7057 ms" in w,
            "a slower fused kernel that writes a block past the mmap threshold: "
            "fresh_allocation first (%s: %s)" % (r, w))
    many = {"bytes": 216000308, "largest": 9000000}
    r, _ = explain.reason_of(d, vec_a, vec_b, 27.539, 10.7057, 0, 0,
                             allocs=(many, {"bytes": 180000244, "largest": 9000000}))
    c.check(r == "kernel_slowdown", "36 MB more, but in blocks below the threshold: the "
            "kernel (%s)" % r)
    r, _ = explain.reason_of(d, vec_a, vec_b, 27.539, 10.7057, 0, 0,
                             allocs=(big, {"bytes": 200000000, "largest": 36000000}))
    c.check(r == "kernel_slowdown", "16 MB more: no fresh block of 32 MiB (%s)" % r)
    c.check(explain.alloc_facts(["x = empty_strided_cpu((s0, 4), (4, 1), torch.float32)\n"
                                 "y = empty_strided_cuda((2, 3), (3, 1), torch.float16)\n"
                                 "z = empty_strided_cpu((0, 9), (9, 1), torch.float32)"]) ==
            {"buffers": 2, "bytes": 12, "largest": 12, "symbolic": 1},
            "allocations read from output code: symbolic sizes apart, an empty one 0 bytes")
    r, _ = explain.reason_of(d, "for(){ x = in_ptr0[i]; }", ["for(){ at::vec::Vectorized<float> a; }"],
                             2.0, 1.0, 0, 0)
    c.check(r == "lost_vectorization", "scalar fused loop, vectorized parts: %s" % r)
    r, _ = explain.reason_of(d, "for(){ at::vec::a(in_ptr0[i]); at::vec::b(in_ptr0[i+1]);"
                             " at::vec::c(in_ptr0[i+2]); at::vec::d(in_ptr1[i]); }",
                             ["for(){ at::vec::a(in_ptr0[i]); }", "for(){ at::vec::b(in_ptr0[i]);"
                              " at::vec::c(in_ptr1[i]); }"], 2.0, 1.0, 0, 0)
    c.check(r == "recompute", "more loads fused than apart: %s" % r)
    # threads: Inductor's C++ as it writes it (a reduction split across
    # threads, then a loop nest under omp single; an unbraced loop; the
    # per-thread combining loops are not nests)
    split = """#pragma omp parallel
{
    int tid = omp_get_thread_num();
    #pragma omp for
    for(int64_t x0=0; x0<1048576L; x0+=8L)
    {
        {
            tmp_acc0_vec_local = cascade_sum_combine(at::vec::a(in_ptr0 + x0), &h);
            for(int64_t x1=0; x1<8L; x1+=1L) { t[x1] = 0; }
        }
    }
    tmp_acc0_vec_arr[tid] = tmp_acc0_vec_local;
    tmp_acc0_arr[tid] = tmp_acc0_local;
    masked_tmp_acc0_vec_arr[tid] = masked_tmp_acc0_vec_local;
}
for (int tid = 0; tid < 2; tid++)
{
    tmp_acc0_vec = tmp_acc0_vec + tmp_acc0_vec_arr[tid];
}
"""
    single = """#pragma omp parallel
{
    #pragma omp for
    for(int64_t x0=0; x0<3L; x0+=1L)
    {
        out_ptr0[x0] = at::vec::b(in_ptr0 + x0);
    }
    #pragma omp single
    {
        for(int64_t x0=0; x0<1000L; x0+=8L)
            for(int64_t x1=0; x1<3L; x1+=1L)
            {
                acc = at::vec::c(in_ptr0 + x0 + 1000L*x1);
            }
    }
}
"""
    sf, gf = explain.code_facts(split), explain.code_facts(single)
    c.check((sf["parallel_loops"], sf["serial_loops"], sf["split_reductions"]) == (1, 0, 1) and
            (gf["parallel_loops"], gf["serial_loops"], gf["split_reductions"]) == (1, 1, 0),
            "C++ loop nests: a split reduction across threads (1, 0, 1 of %s), a nest under "
            "omp single (1, 1, 0 of %s)" % (sf, gf))
    c.check(explain.loop_nests("for(i)\n    x[i] = 0;\nfor(j)\n{\n}\n") == (0, 2),
            "two loop nests in a kernel with no parallel region: both on one thread")
    # a short outer loop whose rows are each a reduction split across
    # threads (torch 2.15's row sum of 2 x 500,000): the nest runs across
    # threads, though its own loop does not
    rows = """{
    #pragma GCC ivdep
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
    {
        {
            float tmp_acc0_arr[2];
            for (int i = 0; i < 2; i++)
            {
                tmp_acc0_arr[i] = 0;
            }
            #pragma omp parallel
            {
                int tid = omp_get_thread_num();
                #pragma omp for
                for(int64_t x1=static_cast<int64_t>(0L); x1<static_cast<int64_t>(500000L); x1+=static_cast<int64_t>(8L))
                {
                    tmp_acc0_vec_local = cascade_sum_combine(at::vec::a(in_ptr0 + x1), &h);
                }
                tmp_acc0_arr[tid] = tmp_acc0_local;
            }
            out_ptr0[x0] = tmp_acc0;
        }
    }
}
{
    for(int64_t x0=static_cast<int64_t>(0L); x0<static_cast<int64_t>(2L); x0+=static_cast<int64_t>(1L))
    {
        out_ptr1[x0] = out_ptr0[x0] * 2;
    }
}
"""
    rf = explain.code_facts(rows)
    c.check((rf["parallel_loops"], rf["serial_loops"], rf["split_reductions"]) == (1, 1, 1),
            "C++ loop nests: a short outer loop of split reductions runs across threads, the "
            "serial pointwise after it on one (1, 1, 1 of %s)" % rf)
    r, ev = explain.reason_of(d, single, [split, split], 2.0, 1.0, 0, 0)
    c.check(r == "lost_parallelism" and ev["fused_kernel"]["serial_loops"] == 1,
            "a fused loop nest on one thread that its parts ran on every thread: %s" % r)
    r, _ = explain.reason_of(d, single, [single], 2.0, 1.0, 0, 0)
    c.check(r == "kernel_slowdown", "the same nest on one thread apart: not the reason (%s)" % r)
    r, _ = explain.reason_of(d, single, [single.replace("#pragma omp for", "")], 2.0, 1.0, 0, 0)
    c.check(r == "kernel_slowdown", "parts with no parallel nest (one thread): not the reason "
            "(%s)" % r)
    with open(os.path.join(HERE, "..", "..", "docs", "EXPLAIN.md")) as f:
        doc = f.read()
    undocumented = [x for x in explain.REASONS if "   | `%s` |" % x not in doc]
    c.check(not undocumented, "every reason code in EXPLAIN.md's table (missing: %s)"
            % undocumented)
    r, ev = explain.reason_of(d, single, [split, split], 2.0, 1.0, 0, 0)
    w = explain.why_of(r, ev)
    c.check("runs 1 of its loop nests on one thread (0 split reductions)" in w and
            "2 unfused kernels run 0 on one thread and 2 across threads (2 split" in w,
            "lost_parallelism in words: %s" % w)
    r, ev = explain.reason_of({"kind": "epilogue"}, "x", ["y"], 2.0, 1.0, 0, 1)
    c.check(r == "library_path_lost", "an epilogue whose undoing brings a library call back")
    w = explain.why_of(r, ev)
    c.check("makes 1 library calls instead of 0" in w, "library_path_lost in words: %s" % w)
    r, ev = explain.reason_of(d, vec_a, vec_b, 1.0, 2.0, 0, 0, allocs=(a, b))
    w = explain.why_of(r, ev)
    c.check("allocates 3.1 MB at each call with the fusion, 1.0 MB without" in w,
            "fresh_allocation in words: %s" % w)
    r, ev = explain.reason_of(d, vec_a, vec_b, 2.0, 1.0, 0, 0)
    ev["roofline"] = explain.roofline_evidence({"gbps": 10.0}, (4e6, 2.0), [(4e6, 1.0)])
    w = explain.why_of(r, ev)
    c.check(r == "kernel_slowdown" and
            "takes 2.0000 ms; its unfused kernel takes 1.0000 ms, and" in w
            and "at 20% of the memory bandwidth, its unfused kernel at 40%" in w,
            "kernel_slowdown in words, with the roofline: %s" % w)
    r, ev = explain.reason_of(d, "for(){ x = in_ptr0[i]; }",
                              ["for(){ at::vec::Vectorized<float> a; }"], 2.0, 1.0, 0, 0)
    w = explain.why_of(r, ev)
    c.check("has 0 vector operations (scalar loops); its unfused kernel has 1" in w,
            "lost_vectorization in words: %s" % w)
    c.check(explain.why_of("unexplained", {}) == "no rule's evidence holds",
            "unexplained in words")
    r, _ = explain.reason_of(d, "at::vec::a(in_ptr0[i]);", ["at::vec::a(in_ptr0[i]);"],
                             2.0, 1.0, 0, 0)
    c.check(r == "kernel_slowdown", "same code facts, fused kernel slower: kernel_slowdown")
    r, _ = explain.reason_of(d, "at::vec::a(in_ptr0[i]);", ["at::vec::a(in_ptr0[i]);"],
                             1.0, 2.0, 0, 0)
    c.check(r == "unexplained", "no evidence: unexplained")
    # a disturbance that lasts through the pooled rounds: a fresh batch replaces them
    class BurstClock(FakeClock):
        def __init__(self, calls):
            super().__init__(0.01)
            self.calls = calls

        def time_ms(self, fn, inputs):
            self.calls -= 1
            return fn.ms + self.rng.uniform(-5.0, 5.0) if self.calls >= 0 else \
                FakeClock.time_ms(self, fn, inputs)

    sa, _, sd = explain.compare(Program(10.0), Program(9.0), (), BurstClock(170), 20)
    c.check(sd[2] - sd[1] < 0.1 and sd[1] <= -1.0 <= sd[2] and len(sa) == 80,
            "a burst through the pooled rounds: a fresh batch of 80 gives %.3f [%.3f, %.3f]"
            % sd)
    sa, _, sd = explain.compare(Program(10.0), Program(9.0), (), BurstClock(170), 20,
                                deadline=0.0)
    c.check(len(sa) == 20, "past the budget's deadline: no extra rounds, only the first 20 "
            "(%d)" % len(sa))
    # the fused kernel and its parts profiled in turn: each kernel's least time,
    # the job's compile under the same load as the counterfactual
    loads = iter([5.0, 9.0, 3.0, 2.0])  # base, cf, base, cf: a noisy first pair
    seen = []

    def prof(fn, kops):
        seen.append(fn)
        t = next(loads)
        return {"times": {"fused": t} if fn == "base" else {"a": t / 2, "b": t / 2},
                "peak": 100 if fn == "cf" else 50}

    pctx = explain.Ctx(base_fn="base", profile_fn=prof, kernel_ms={"fused": 1.0})
    pp = explain.paired_profile(pctx, {"fn": "cf", "kernel_ops": {}}, rounds=2)
    c.check(seen == ["base", "cf", "base", "cf"] and pp["base_times"] == {"fused": 3.0} and
            pp["times"] == {"a": 1.0, "b": 1.0} and pp["peak"] == 100,
            "paired profiles: base and counterfactual in turn, least time per kernel (%s)" % pp)
    gpu = ({"n_regs": 255, "n_spills": 24}, [{"n_regs": 96, "n_spills": 0}])
    r, ev = explain.reason_of(d, "tl.load", ["tl.load"], 2.0, 1.0, 0, 0, gpu)
    c.check(r == "register_spills" and ev["triton"]["fused"]["n_spills"] == 24 and
            "spills 24 registers; its unfused kernel spills none" in explain.why_of(r, ev),
            "Triton: the fused kernel spills, its parts do not (%s)" % explain.why_of(r, ev))
    gpu = ({"n_regs": 200, "n_spills": 0}, [{"n_regs": 64, "n_spills": 0}])
    r, _ = explain.reason_of(d, "tl.load", ["tl.load"], 2.0, 1.0, 0, 0, gpu)
    c.check(r == "register_pressure", "Triton: 200 registers against 64: register_pressure")
    occupancy_rules(c, d)
    roofline(c, explain)
    la = types.SimpleNamespace(n_regs=40, n_spills=0, shared=1024,
                               config=types.SimpleNamespace(num_warps=4))
    mod = types.SimpleNamespace(triton_poi_fused_0=types.SimpleNamespace(launchers=[la]),
                                triton_red_fused_1=types.SimpleNamespace(launchers=[]))
    facts = explain.triton_facts(["triton_poi_fused_0", "triton_red_fused_1", "nope"], [mod])
    c.check(facts == {"triton_poi_fused_0": {"n_regs": 40, "n_spills": 0, "shared": 1024,
                                             "num_warps": 4}},
            "Triton metadata from a kernel's first launcher; uncompiled ones left out")
    be = explain.break_even({"inductor": {"cold_ms": 1000.0, "warm_ms": 100.0},
                             "inductor-nofusion": {"cold_ms": 500.0, "warm_ms": 50.0}},
                            {"eager": 2.0, "inductor": 1.5, "inductor-nofusion": 2.5})
    c.check(be["inductor"]["iterations_cold"] == 2000 and be["inductor"]["iterations_warm"] == 200
            and be["inductor-nofusion"]["iterations_cold"] is None,
            "break-even: 1000 ms / 0.5 ms = 2000 iterations; never when slower than eager")
    c.check(abs(explain.spearman([1, 2, 2, 3, 5], [2, 1, 4, 3, 5]) - 6.5 / 95 ** 0.5) < 1e-12,
            "Spearman with ties (midranks)")
    jb = explain.job_budget
    c.check(jb(300, 40.0, 1000) == 260.0 and jb(100, 150.0, 1000) == 0.0,
            "one budget: the explanation gets what the adaptive repetition left of it")
    c.check(jb(None, 10.0, 1000) == explain.DEFAULT_BUDGET_S - 10.0
            and jb(True, 0.0, 1000) == explain.DEFAULT_BUDGET_S
            and jb(-1, 0.0, 1000) == explain.DEFAULT_BUDGET_S,
            "no number >= 0 given: the default, less what was spent")
    c.check(jb(300, 0.0, 50.0) == 50.0 and jb(300, 0.0, -5.0) == 0.0 and jb(1e6, 0.0, 1e9) == 3600.0,
            "never past the job's time left, at most an hour")
    b = explain.Budget(24.0, 11.0)
    c.check(b.allows(), "24 s left, a step expected to cost 11 s: started")
    b.spent(20.0)
    b.end -= 20.0
    c.check(not b.allows() and b.cost == 20.0,
            "4 s left after a 20 s step: the next one not started")
    b = explain.Budget(12.0, 10.0)
    c.check(not b.allows(), "12 s left, 10 s expected: not started, a step may cost more "
            "than the most before it (STEP_ROOM %.2f)" % explain.STEP_ROOM)
    replay_count(c)
    device_rows(c)
    memory_peak(c)
    recompile_guard(c, explain)
    c.done()


def recompile_guard(c, explain):
    """Graphs compiled while a comparison ran are counted per comparison and
    in all: a counterfactual whose code a later dynamo reset dropped compiles
    again when first timed (here: the one undoing decision 1)."""
    graphs = [0]

    class Recompiling(FakeClock):
        def __init__(self):
            super().__init__(0.01)
            self.seen = set()

        def time_ms(self, fn, inputs):
            if fn.undone == {1} and id(fn) not in self.seen:
                self.seen.add(id(fn))
                graphs[0] += 1
            return super().time_ms(fn, inputs)

    ctx, _ = fake_ctx(explain, [0.5, -0.3, 0.0], clock=Recompiling())
    ctx.compiles = lambda: graphs[0]
    out = explain.explain(ctx, budget_s=60, ladder_step=0.1)
    # decision 1 is undone alone twice: measured alone, then as "all lost"
    one = [x["recompiled"] for x in out["comparisons"] if x.get("ids") == ["fuse-%012x" % 1]]
    rest = [x["recompiled"] for x in out["comparisons"] if x.get("ids") != ["fuse-%012x" % 1]]
    c.check(len(one) == 2 and one == [1, 1] and len(rest) >= 3 and not any(rest) and
            out["placebo"]["recompiled"] == 0 and out["recompiles_during_comparisons"] == 2,
            "a comparison that compiled while it ran is counted, alone and in all (%s: %s, %s)" %
            (out["recompiles_during_comparisons"], one, rest))
    ctx, _ = fake_ctx(explain, [0.5, -0.3, 0.0])
    out = explain.explain(ctx, budget_s=60, ladder_step=0.1)
    c.check(out["recompiles_during_comparisons"] is None and
            all(x["recompiled"] is None for x in out["comparisons"]),
            "no counter given: not counted, said as null")


def memory_peak(c):
    """measure.peak_breakdown on a real profile: a compiled graph's call (its
    record, as Inductor's wrapper makes it) allocates a 2 MiB buffer of its
    own, then a 1 MiB result of aten::mul, frees its buffer (del) and
    allocates another 1 MiB result: at most 3 MiB are live, held by the
    graph's buffer and the first mul.  Booking the frees at the end of the
    call, as the ops' self memory does, read 4 MiB, everything allocated."""
    import measure
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    n = 1 << 18  # floats: 1 MiB
    x = torch.ones(n)

    def graph():
        with record_function("## Call CompiledFxGraph test ##"):
            buf0 = torch.empty_strided((2 * n,), (1,))
            buf0.fill_(2.0)
            buf1 = torch.mul(x, buf0[:n])
            del buf0
            buf2 = torch.mul(buf1, buf1)
            del buf1
            return buf2

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        out = graph()
    peak, held = measure.peak_breakdown(prof, "cpu")
    c.check(peak == 3 * 4 * n and held == {"compiled graph buffers": 8 * n, "aten::mul": 4 * n},
            "a graph's peak: 3 MiB, its own buffer and one mul's result (%s, %s)" % (peak, held))
    del out
    # eager: what each top-level op allocated, its inner ops' allocations
    # included
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        w = torch.ones(4, n)
        y = torch.nn.functional.linear(x.view(1, n), w)
        x2 = torch.relu(y)
    peak, held = measure.peak_breakdown(prof, "cpu")
    c.check(peak == 4 * 4 * n + 32 and
            held == {"aten::ones": 4 * 4 * n, "aten::linear": 16, "aten::relu": 16},
            "eager: each allocation by its top-level op (%s, %s)" % (peak, held))
    del w, y, x2
    c.check(measure.peak_of([]) == (None, {}) and measure.peak_of([(-64, 1, ())]) == (0, {}),
            "nothing recorded: no peak; only a free: none over the start")


def device_rows(c):
    """measure.kernel_rows: on CUDA a kernel's time is its device time (the
    CPU side's is the launch), an op that ran nothing there has no row; a
    CUDA profile with no device time keeps the CPU side's and says so; the
    CPU's rows are the CPU side's.  device_busy_ms sums the device events."""
    import measure
    from torch.autograd import DeviceType

    class Ev:
        def __init__(self, name, cpu_us, dev_us, dev=DeviceType.CPU):
            self.name, self.cpu_time_total, self.device_time_total = name, cpu_us, dev_us
            self.device_type = dev
            self.time_range = types.SimpleNamespace(elapsed_us=lambda: dev_us)
    evs = [Ev("graph_0_triton_poi_fused_relu_0", 40.0, 900.0),
           Ev("graph_0_triton_poi_fused_relu_0", 30.0, 700.0),
           Ev("aten::view", 5.0, 0.0), Ev("aten::mm", 20.0, 2500.0)]
    ops = {"triton_poi_fused_relu_0": ["aten.relu"]}
    rows, src = measure.kernel_rows(evs, ops, "cuda")
    c.check(sorted(rows) == ["aten::mm", "triton_poi_fused_relu_0"],
            "CUDA: rows for what ran on the device only, no aten::view (%s)" % sorted(rows))
    r = rows["triton_poi_fused_relu_0"]
    c.check(r["count"] == 2 and abs(r["total_ms"] - 1.6) < 1e-9 and r["generated"] and
            abs(rows["aten::mm"]["total_ms"] - 2.5) < 1e-9,
            "CUDA: device times (0.9 + 0.7 ms; 2.5 ms), not the launches' 0.07 ms (%s)" % rows)
    c.check("device_time_total" in src and "CUPTI" in src, "CUDA source: %s" % src)
    cpu_only = [Ev(e.name, e.cpu_time_total, 0.0) for e in evs]
    rows, src = measure.kernel_rows(cpu_only, ops, "cuda")
    c.check(abs(rows["triton_poi_fused_relu_0"]["total_ms"] - 0.07) < 1e-9 and
            "aten::view" in rows and "no device time" in src,
            "CUDA without device time: the launches' CPU time, said (%s)" % src)
    rows, src = measure.kernel_rows(evs, ops, "cpu")
    c.check(abs(rows["aten::mm"]["total_ms"] - 0.02) < 1e-9 and "aten::view" in rows and
            src.endswith("CPU"), "CPU: the CPU side's times (%s)" % src)
    # the profiler's own overhead: no row, and read through (a graph call's
    # kernel nested under it by time is still the graph's)
    call = Ev("## Call CompiledFxGraph abc ##", 90.0, 1300.0)
    over = Ev("Activity Buffer Request", 430.0, 400.0)
    top = [call, Ev("graph_0_triton_poi_fused_relu_0", 40.0, 900.0),
           over, Ev("graph_0_triton_poi_fused_relu_0", 30.0, 400.0),
           Ev("aten::mm", 20.0, 2500.0), Ev("aten::view", 5.0, 0.0)]
    for e, parent in zip(top, [None, call, call, over, None, top[4]]):
        e.cpu_parent = parent
    got = [e.name for e in measure.kernel_events(top)]
    c.check(got == ["graph_0_triton_poi_fused_relu_0"] * 2 + ["aten::mm"],
            "the iteration's kernels: the graph's two (one under the profiler's "
            "overhead), the top-level aten::mm; no overhead, no nested view (%s)" % got)
    dev = [Ev("triton_poi_fused_relu_0", 0.0, 300.0, DeviceType.CUDA),
           Ev("Memcpy HtoD (Pageable -> Device)", 0.0, 100.0, DeviceType.CUDA),
           Ev("Activity Buffer Request", 0.0, 250.0, DeviceType.CUDA),
           Ev("cudaGraphLaunch", 15.0, 0.0)]
    c.check(abs(measure.device_busy_ms(dev) - 0.4) < 1e-9 and
            measure.device_busy_ms(dev[3:]) is None,
            "a replay's device busy time: 0.3 + 0.1 ms, not the profiler's overhead; "
            "none recorded: None")


def roofline(c, explain):
    """explain.roofline_evidence on given figures, then a lost fusion, on the
    CPU and on a (faked) CUDA device alike: its evidence carries each
    kernel's bytes over its time against the bandwidth the explanation was
    given (the worker's roofline)."""
    import decisions
    roof = {"gbps": 4000.0, "measured_by": "worker"}
    r = explain.roofline_evidence(roof, (8e6, 0.01), [(4e6, 0.002), (None, 0.001)])
    c.check(abs(r["fused"]["gbps"] - 800.0) < 1e-6 and abs(r["fused"]["share"] - 0.2) < 1e-9 and
            abs(r["unfused"][0]["gbps"] - 2000.0) < 1e-6 and
            abs(r["unfused"][0]["share"] - 0.5) < 1e-9 and r["unfused"][1]["gbps"] is None and
            r["limit_gbps"] == 4000.0 and r["measured_by"] == "worker",
            "8 MB in 10 us: 800 GB/s, 20%% of 4000; 4 MB in 2 us: 50%%; no bytes: none (%s)" % r)
    c.check(explain.roofline_evidence(roof, (None, 0.01), [(None, 0.002)]) is None,
            "no byte figure anywhere: no roofline evidence")
    r = explain.roofline_evidence(None, (8e6, 0.01), [])
    c.check(r["fused"]["share"] is None and r["limit_gbps"] is None,
            "no bandwidth measured: GB/s without a share (%s)" % r)
    c.check(decisions.kernel_bytes(types.SimpleNamespace(
        estimate_kernel_num_bytes=lambda: 1234.0)) == 1234 and
        decisions.kernel_bytes(object()) is None and decisions.kernel_bytes(None) is None,
        "kernel_bytes: Inductor's estimate, else None (never a failed compile)")
    import ladder
    import runner
    c.check(ladder.beside_knobs({"layout_optimized": True}) == [("layout_optimization", False)]
            and ladder.beside_knobs({"layout_optimized": False}) == []
            and ladder.beside_knobs({}) == [],
            "beside fusion: the layout switched off only for a compile that made the choice")
    req = {"device": "cpu", "roofline": {"gbps": 30.5, "gflops": 142.75}}
    c.check(runner.explain_roofline(req) == {"gbps": 30.5, "measured_by": "worker"} and
            runner.explain_roofline(dict(req, roofline=None)) is None,
            "the explanation's bandwidth: the worker's roofline the request carries; on a CPU "
            "without one, none (nothing measured again)")
    for device, gbps in (("cpu", 40.0), ("cuda", 4000.0)):
        ctx, _ = fake_ctx(explain, [0.5, -0.3])
        plain = ctx.compile_cf

        def compile_cf(ids, plain=plain, gbps=gbps):
            cf = plain(ids)
            if ids == ["fuse-%012x" % 1]:
                cf["kernels"] = [{"name": "ka1", "keys": {"a1"}}, {"name": "kb1", "keys": {"b1"}}]
                # the per-kernel count (decisions.kernel_costs), scaled to the device
                cf["costs"] = {"ka1": {"bytes": gbps * 1e3, "flops": 0},
                               "kb1": {"bytes": gbps * 1e3, "flops": 0}}
            return cf
        ctx.compile_cf = compile_cf
        ctx.device, ctx.roof = device, {"gbps": gbps, "measured_by": "worker"}
        ctx.kernel_bytes = {"k1": gbps * 1.5e3}
        ctx.profile_fn = lambda fn, kops: {"times": {"k1": 0.01, "ka1": 0.002, "kb1": 0.003},
                                           "peak": None}
        out = explain.explain(ctx, budget_s=60)
        e = {x["id"]: x for x in out["fusions"]}["fuse-%012x" % 1]
        roof = (e.get("evidence") or {}).get("roofline") or {}
        c.check(e["verdict"] == "lost" and abs(roof["fused"]["share"] - 0.15) < 1e-9 and
                [round(u["share"], 3) for u in roof["unfused"]] == [0.5, 0.333] and
                roof["limit_gbps"] == gbps,
                "a lost fusion on %s: its kernel at 15%% of the worker's bandwidth, its parts "
                "at 50%% and 33%% (%s %s)" % (device, e["verdict"], roof))


def occupancy_rules(c, d):
    """explain.occupancy as CUDA's occupancy calculator computes it on an
    H100's SM, and the low_occupancy rule on given Triton metadata."""
    import explain
    h100 = types.SimpleNamespace(major=9, minor=0, regs_per_multiprocessor=65536,
                                 max_threads_per_multi_processor=2048,
                                 shared_memory_per_multiprocessor=233472, warp_size=32)
    lim = explain.device_limits(h100)
    c.check(lim == {"regs": 65536, "threads": 2048, "shared": 233472, "warp": 32, "blocks": 32},
            "device limits of an H100 (%s)" % lim)
    c.check(explain.device_limits(types.SimpleNamespace(**dict(vars(h100), minor=6, major=8)))
            ["blocks"] == 16, "compute capability 8.6: 16 blocks an SM")
    occ = explain.occupancy
    c.check(occ({"num_warps": 4, "n_regs": 32, "shared": 0}, lim) == (1.0, "registers"),
            "32 registers, 4 warps: 16 blocks, every warp slot (registers and warps tie)")
    # 255 registers: 8192 a warp (in 256s), 8 warps an SM, one 8-warp block
    c.check(occ({"num_warps": 8, "n_regs": 255, "shared": 0}, lim) == (0.125, "registers"),
            "255 registers, 8 warps: one block, 12.5%")
    # 100000 B shared + 1 KiB reserved: 2 blocks of 4 warps
    c.check(occ({"num_warps": 4, "n_regs": 32, "shared": 100000}, lim) == (0.125,
                                                                           "shared_memory"),
            "100000 B of shared memory a block: 2 blocks, 12.5%")
    c.check(occ({"n_regs": 32}, lim) is None and occ({"num_warps": 4}, None) is None,
            "no num_warps, or no device: no occupancy")
    fused = {"n_regs": 255, "n_spills": 0, "shared": 0, "num_warps": 8}
    part = {"n_regs": 64, "n_spills": 0, "shared": 0, "num_warps": 4}
    r, ev = explain.reason_of(d, "tl.load", ["tl.load"], 2.0, 1.0, 0, 0, (fused, [part]),
                              limits=lim)
    c.check(r == "low_occupancy" and ev["occupancy"] == {"fused": [0.125, "registers"],
                                                         "unfused": [[0.5, "registers"]]},
            "12.5%% against 50%%, by registers: low_occupancy (%s %s)" % (r, ev.get("occupancy")))
    r, ev = explain.reason_of(d, "tl.load", ["tl.load"], 2.0, 1.0, 0, 0, (fused, [fused]),
                              limits=lim)
    c.check(r != "low_occupancy" and ev["occupancy"]["unfused"] == [[0.125, "registers"]],
            "as low as its parts: not the fusion's doing (%s)" % r)
    r, _ = explain.reason_of(d, "tl.load", ["tl.load"], 2.0, 1.0, 0, 0, (fused, [part]))
    c.check(r == "register_pressure", "without the device's limits: register_pressure (%s)" % r)


def replay_count(c):
    """measure.replay_kernels: a CUDA graph replay's kernels counted on the
    device side, copies and sets left out; none there: unknown (None), never
    the CPU side's rows (the launch call and its copies)."""
    import measure
    from torch.autograd import DeviceType

    class Ev:
        def __init__(self, name, dev):
            self.name, self.device_type = name, dev
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    evs = [Ev("aten::_foreach_copy_", cpu), Ev("cudaGraphLaunch", cpu),
           Ev("cudaStreamIsCapturing", cpu), Ev("triton_poi_fused_relu_0", cuda),
           Ev("triton_red_fused_sum_1", cuda), Ev("void cutlass::Kernel<x>", cuda),
           Ev("Memcpy HtoD (Pageable -> Device)", cuda), Ev("Memset (Device)", cuda),
           Ev("Activity Buffer Request", cuda)]
    c.check(measure.replay_kernels(evs) == 3, "a replay's kernels: the 3 device kernels "
            "(no copy, set or profiler overhead)")
    c.check(measure.replay_kernels(evs[:3]) is None,
            "a replay with no device kernel recorded: unknown, not the 3 CPU rows")


def main():
    if "--inside" in sys.argv:
        inside()
        return
    py = indtest.python_or_skip()
    r = subprocess.run([py, os.path.abspath(__file__), "--inside"], timeout=600)
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
