#!/usr/bin/env python3
"""End to end: the explanation of a job's fusion groups (issue 14, docs/EXPLAIN.md).

A server and a worker on a fresh database.  A job with "explain": true comes back
with an explanation: one entry per fusion group (resnet18: 20), each with its
verdict, costs and graph nodes, a reason for each loss, and a waterfall whose bars
and remainder make the measured difference.  A job without one: GET .../explain
is 404 naming the POST; POST .../explain enqueues a job (labelled explain_of,
202 with Location) whose explanation GET then answers for the first job.  A
viewer may read but not ask; a missing job is 404; the inductor engine and a job
without variants eager and fused say why they have none."""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

# the rules' groups: 20, every one a conv with its batch norm (the cost
# planner may unfuse some, by what it measures); no extra rounds of adaptive
# repetition (time_budget_s 0): these checks are of the explanation's shape
# and sums, which any number of rounds gives
MODEL = {"workload": "resnet18", "params": {"image": 32, "threads": 2, "planner": "rules",
                                            "time_budget_s": 0},
         "warmup": 2,
         "iterations": 10}


def check_explanation(ex, n_groups):
    groups, w = ex["groups"], ex["waterfall"]
    check_eq(len(groups), n_groups, "one entry per fusion group")
    check_eq(sorted(g["id"] for g in groups), list(range(n_groups)), "group ids")
    for g in groups:
        check(g["verdict"] in ("won", "lost", "within_noise"), "verdict %r" % g["verdict"])
        check((g["reason"] is not None) == (g["verdict"] == "lost"), "a reason iff lost: %r" % g)
        check(g["costs"]["bytes_saved"] > 0 and len(g["nodes"]) >= 2 and
              len(g["eager_kernels"]) >= 2 and g["fused_kernels"], "group %d: %r" % (g["id"], g))
        lo, hi = g["delta_ci95"]
        check(lo <= g["delta_ms"] <= hi, "delta inside its interval: %r" % g)
    effects = [abs(g["delta_ms"]) for g in groups]
    check(effects == sorted(effects, reverse=True), "largest effect first")
    bars = (w["won_ms"] + w["lost_ms"] + w["within_noise_ms"] + w["outside_groups_ms"] +
            w["overhead_ms"] + w["unexplained_ms"])
    check(abs(bars - w["measured_ms"]) < 1e-6, "the bars make the measured difference: %r" % w)
    s = ex["summary"]
    check_eq(s["won"] + s["lost"] + s["within_noise"], n_groups, "summary counts")
    return w


def test(env):
    env.start_server(["--auth"])
    env.admin("user", "add", "alice", "--role", "user")
    env.admin("user", "add", "vera", "--role", "viewer")
    alice, vera = env.admin("token", "create", "alice"), env.admin("token", "create", "vera")
    env.token = alice
    env.start_worker(inductor=True)  # a job of the inductor engine says why it has none
    a = env.submit(dict(MODEL, explain=True))
    check(a["spec"]["explain"] is True, "the spec keeps explain")
    done = env.wait_job(a["id"], timeout=300)
    check_eq(done["state"], "succeeded", "the explained job")
    w = check_explanation(done["result"]["explain"], 20)
    log("resnet18 at 32x32: waterfall %r" % w)
    st, _, body = env.get("/api/v1/jobs/%d/explain" % a["id"])
    check_eq(st, 200, "GET explain of an explained job")
    check_eq((body["job_id"], body["explained_by"]), (a["id"], a["id"]), "its own explanation")

    b = env.submit(MODEL)
    env.wait_job(b["id"], timeout=300)
    st, _, body = env.get("/api/v1/jobs/%d/explain" % b["id"])
    check(st == 404 and "POST" in body["error"]["message"], "not explained yet: %s %r" % (st, body))
    st, hd, made = env.post("/api/v1/jobs/%d/explain" % b["id"])
    check_eq(st, 202, "POST explain")
    check_eq(hd.get("Location"), "/api/v1/jobs/%d/explain" % b["id"], "Location")
    check(made["spec"]["explain"] is True and
          made["spec"]["labels"].get("explain_of") == str(b["id"]), "the explaining job %r" % made)
    st, _, body = env.get("/api/v1/jobs/%d/explain" % b["id"])
    check(st in (200, 202), "while it runs: %s" % st)
    env.wait_job(made["id"], timeout=300)
    st, _, body = env.get("/api/v1/jobs/%d/explain" % b["id"])
    check_eq((st, body["explained_by"], body["state"]), (200, made["id"], "succeeded"),
             "explained by the new job")
    check_explanation(body["explain"], 20)

    # the command-line client: the table of a job's explanation, and one asked and waited for
    client = dict(os.environ, FUSIONBENCH_URL=env.base, FUSIONBENCH_TOKEN=alice)
    r = subprocess.run([fbtest.find_bin("fusionbench"), "explain", str(a["id"])],
                       capture_output=True, text=True, timeout=60, env=client)
    check(r.returncode == 0 and "waterfall:" in r.stdout and "counterfactual" in r.stdout,
          "fusionbench explain: %s %s" % (r.stdout[-1500:], r.stderr[-500:]))
    d = env.submit(dict(MODEL, params={"image": 32, "threads": 2, "seed": 7, "planner": "rules"}))
    env.wait_job(d["id"], timeout=300)
    r = subprocess.run([fbtest.find_bin("fusionbench"), "explain", str(d["id"]), "--request",
                        "--wait"], capture_output=True, text=True, timeout=400, env=client)
    check(r.returncode == 0 and "waterfall:" in r.stdout and "explained by job" in r.stderr,
          "fusionbench explain --request --wait: %s %s" % (r.stdout[-1500:], r.stderr[-500:]))
    check_eq(env.get("/api/v1/jobs/999999/explain")[0], 404, "explain of a missing job")
    check_eq(env.post("/api/v1/jobs/999999/explain")[0], 404, "POST explain of a missing job")
    # one variant: nothing to compare, said so
    c = env.submit({"workload": "softmax", "params": {"rows": 64, "cols": 64},
                    "variants": ["fused"], "iterations": 3, "warmup": 1, "explain": True})
    c = env.wait_job(c["id"], timeout=120)
    check("eager and fused" in c["result"]["explain"]["unavailable"],
          "one variant: %r" % c["result"]["explain"])
    st, _, body = env.get("/api/v1/jobs/%d/explain" % c["id"])
    check(st == 404 and "eager and fused" in body["error"]["message"], "says why: %r" % body)
    log("explained at submit and on request; 404 with the way to ask; a single variant says why")

    # a suite with explain: its summary counts the groups and the losses by reason
    st, _, suite = env.post("/api/v1/suites", {"workloads": ["softmax", "layernorm"], "device": "cpu",
                                               "iterations": 5, "warmup": 1, "explain": True})
    check_eq(st, 201, "suite with explain: %r" % suite)
    for row in suite["rows"]:
        env.wait_job(row["job_id"], timeout=120)
    ex = env.get("/api/v1/suites/%d" % suite["id"])[2]["summary"]["explain"]
    check(ex["jobs"] == 2 and ex["won"] + ex["lost"] + ex["within_noise"] == 2 and
          isinstance(ex["lost_by_reason"], dict), "the suite's explanation: %r" % ex)
    check(ex["fused_roofline_share"] is not None and 0 < ex["fused_roofline_share"] < 10,
          "the suite's roofline share (the worker measured one): %r" % ex)
    log("a suite of two patterns, explained: %r" % ex)

    # roles: a viewer reads, only a user asks
    env.token = vera
    check_eq(env.get("/api/v1/jobs/%d/explain" % a["id"])[0], 200, "a viewer reads")
    check_eq(env.post("/api/v1/jobs/%d/explain" % a["id"])[0], 403, "a viewer may not ask")


if __name__ == "__main__":
    fbtest.main(test, "explain")
