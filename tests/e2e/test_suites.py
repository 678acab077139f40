"""End-to-end: suites, result history, regression flags, compare and exports
(issue 6).  A real worker runs a small suite; history is planted with SQL so the
regression rule is tested on known samples: a 10% slowdown is flagged, 1% noise
is not."""

import csv
import io
import json
import math
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def suite_api(env):
    # Errors first: they name the field.
    st, _, b = env.post("/api/v1/suites", {"workloads": "no_such_domain"})
    check_eq(st, 422, "unknown domain status")
    check_eq(b["error"]["field"], "workloads", "unknown domain field")
    st, _, b = env.post("/api/v1/suites", {"workloads": ["softmax"], "batch_sizes": [0]})
    check_eq(st, 400, "bad batch size")
    check_eq(b["error"]["field"], "batch_sizes", "bad batch size field")
    st, _, b = env.post("/api/v1/suites", {"workloads": ["softmax"], "variants": ["eager", "nope"]})
    check_eq(st, 422, "unknown variant")
    st, _, b = env.post("/api/v1/suites", {"workloads": ["softmax"], "junk": "x" * 100000})
    check_eq((st, b["error"]["field"]), (400, "junk"), "an unknown member is refused, named")
    # a param none of the workloads takes would be ignored by every job
    st, _, b = env.post("/api/v1/suites", {"workloads": ["softmax", "layernorm"],
                                           "params": {"rows": 8, "image": 64}})
    check_eq((st, b["error"]["field"]), (400, "params.image"), "a param no workload takes")
    check_eq(env.get("/api/v1/suites")[2]["items"], [], "nothing stored for refused suites")

    # params are shared: each job keeps those its workload takes
    st, hd, s = env.post("/api/v1/suites", {
        "name": "e2e", "workloads": ["gemm_bias_relu", "softmax"], "batch_sizes": [1, 2],
        "variants": ["eager", "fused"], "warmup": 1, "iterations": 8,
        "params": {"m": 256, "k": 256, "n": 256, "rows": 512, "threads": 1}})
    check_eq(st, 201, "POST /suites status: %s" % s)
    check(hd["Location"] == "/api/v1/suites/%d" % s["id"], "Location header")
    check_eq(s["progress"]["total"], 4, "jobs in suite (2 workloads x 2 batch sizes)")
    check_eq(sorted((r["workload"], r["batch_size"]) for r in s["rows"]),
             [("gemm_bias_relu", 1), ("gemm_bias_relu", 2), ("softmax", 1), ("softmax", 2)],
             "suite rows")
    for r in s["rows"]:
        j = env.wait_job(r["job_id"], timeout=120)
        check_eq(j["state"], "succeeded", "suite job %d" % r["job_id"])
        check_eq(j["spec"]["labels"].get("suite"), "e2e", "suite label on job")
        check_eq(j["spec"]["params"], {"m": 256, "k": 256, "n": 256, "threads": 1}
                 if r["workload"] == "gemm_bias_relu" else {"rows": 512, "threads": 1},
                 "the params %s takes" % r["workload"])
    st, _, s = env.get("/api/v1/suites/%d" % s["id"])
    check_eq(st, 200, "GET suite")
    check_eq(s["progress"]["done"], 4, "suite done")
    check_eq(s["progress"]["fraction"], 1, "suite fraction")
    # Geometric mean of the fused speedups, recomputed from the jobs themselves.
    sps, ses, unstable, changes = [], [], 0, []
    for r in s["rows"]:
        res = env.job(r["job_id"])["result"]
        sps.append(res["comparison"]["speedup"]["fused"])
        lo, hi = res["comparison"]["speedup_ci95"]["fused"]
        ses.append(math.log(hi / lo) / (2 * 1.959963984540054))
        unstable += any(v["unstable"] for v in res["variants"])
        changes.append(res["comparison"]["change"]["fused"])
    mean = sum(math.log(x) for x in sps) / len(sps)
    want = math.exp(mean)
    got = s["summary"]["variants"]["fused"]
    check(abs(got["geomean_speedup"] - want) < 1e-9 * want,
          "geomean %r, want %r" % (got["geomean_speedup"], want))
    half = 1.959963984540054 * math.sqrt(sum(x * x for x in ses)) / len(ses)
    check(all(abs(a - b) < 1e-9 * b for a, b in
              zip(got["geomean_ci95"], (math.exp(mean - half), math.exp(mean + half)))),
          "geomean_ci95 %r from the jobs' intervals" % got["geomean_ci95"])
    check_eq((got["unstable"], got["faster"] + got["slower"] + got["no_difference"]),
             (unstable, 4), "unstable members and verdicts")
    check_eq(got["faster"], changes.count("faster"), "members faster")
    check_eq((got["passed"], got["total"], got["pass_rate"]), (4, 4, 1), "pass rate")
    check_eq(s["summary"]["baseline"], "eager", "baseline")

    st, _, lst = env.get("/api/v1/suites?limit=5")
    check_eq(st, 200, "GET /suites")
    check_eq(lst["items"][0]["id"], s["id"], "newest suite first")
    check_eq(lst["items"][0]["states"], {"succeeded": 4}, "suite states")
    check(all("spec" not in it for it in lst["items"]), "the list holds summaries, no specs")
    check_eq(env.get("/api/v1/suites/%d" % s["id"])[2]["spec"]["iterations"], 8,
             "one suite's spec")

    st, hd, text = env.get("/api/v1/suites/%d?format=csv" % s["id"])
    check_eq(st, 200, "suite CSV")
    check(hd["Content-Type"].startswith("text/csv"), "CSV content type")
    rows = list(csv.DictReader(io.StringIO(text)))
    check_eq(len(rows), 8, "CSV rows = 4 jobs x 2 variants")
    fused = [r for r in rows if r["variant"] == "fused"]
    check(all(abs(float(r["speedup"]) - sps[i]) < 1e-9 for i, r in enumerate(fused)),
          "CSV speedups match the jobs")
    return s


def trace_export(env, job_id):
    st, hd, tr = env.get("/api/v1/jobs/%d/trace" % job_id)
    check_eq(st, 200, "trace status")
    check("attachment" in hd.get("Content-Disposition", ""), "trace is a download")
    ev = tr["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
    check_eq(sorted(n.split()[0] for n in names.values()), ["eager", "fused"], "one process per variant")
    kern = env.get("/api/v1/jobs/%d/kernels" % job_id)[2]["items"]
    xs = [e for e in ev if e["ph"] == "X"]
    # One event per recorded launch (the first 16 of a kernel), else per count.
    check_eq(len(xs), sum(len(k.get("launches") or []) or k["count"] for k in kern),
             "one event per launch")
    if all(k.get("launches") for k in kern):
        starts = sorted(e["ts"] for e in xs)
        check(starts[0] >= 0 and starts[-1] > 0, "launches at their recorded offsets")
    for e in xs:
        check(e["dur"] >= 0 and e["ts"] >= 0 and e["cat"], "event fields: %r" % e)
    # Within a variant, launches do not overlap (one CPU stream).
    for pid in names:
        lane = sorted((e["ts"], e["dur"]) for e in xs if e["pid"] == pid)
        for (t0, d0), (t1, _) in zip(lane, lane[1:]):
            check(t1 >= t0 + d0 - 1e-6, "overlap in lane %d" % pid)
    st, _, _ = env.get("/api/v1/jobs/999999/trace")
    check_eq(st, 404, "trace of a missing job")


def plant_job(env, workload, samples_by_variant, params='{"m": 8}'):
    """Inserts a succeeded job with a result whose variants have these samples."""
    variants = []
    med = {}
    for name, s in samples_by_variant.items():
        ss = sorted(s)
        m = ss[len(ss) // 2] if len(ss) % 2 else (ss[len(ss) // 2 - 1] + ss[len(ss) // 2]) / 2
        med[name] = m
        variants.append({"name": name, "status": "ok", "samples_ms": s,
                         "latency_ms": {"median": m, "ci95": [ss[17], ss[len(ss) - 18]]},
                         "kernels": 3 if name == "eager" else 1, "fused_kernels": 0 if name == "eager" else 1,
                         "peak_mem_bytes": 1000})
    result = {"env": {"device_name": "Planted CPU", "blas": "b1", "threads": 2},
              "variants": variants,
              "comparison": {"baseline": "eager",
                             "speedup": {n: med["eager"] / m for n, m in med.items() if n != "eager"}}}
    spec = {"workload": workload, "params": json.loads(params)}
    rows = env.sql(
        "WITH j AS (INSERT INTO jobs (state, spec, workload, engine, device, dtype, batch_size, "
        "timeout_s, attempt, finished_at) VALUES ('succeeded', '%s', '%s', 'native', 'cpu', "
        "'float32', 1, 60, 1, now()) RETURNING id), r AS (INSERT INTO results (job_id, attempt, "
        "result) SELECT id, 1, '%s' FROM j RETURNING job_id) SELECT job_id FROM r"
        % (json.dumps(spec), workload, json.dumps(result)))
    return int(rows[0][0])


def noisy(rng, center, n=50, sd=0.01):
    return [center * (1 + rng.gauss(0, sd)) for _ in range(n)]


def regressions(env):
    rng = random.Random(6)
    base = [plant_job(env, "planted", {"eager": noisy(rng, 10.0), "fused": noisy(rng, 5.0)})
            for _ in range(3)]
    # 1% slower fused: noise-sized, not flagged; then 10% slower: flagged.
    small = plant_job(env, "planted", {"eager": noisy(rng, 10.0), "fused": noisy(rng, 5.05)})
    big = plant_job(env, "planted", {"eager": noisy(rng, 10.0), "fused": noisy(rng, 5.05 * 1.10)})
    st, _, page = env.get("/api/v1/results?workload=planted&points=10")
    check_eq(st, 200, "GET /results")
    by_var = {s["variant"]: s for s in page["items"]}
    check_eq(sorted(by_var), ["eager", "fused"], "one series per variant")
    f = by_var["fused"]
    check_eq(f["device_name"], "Planted CPU", "identity device name")
    check_eq(f["versions"], {"blas": "b1", "threads": 2}, "identity versions")
    check_eq([p["job_id"] for p in f["series"]], base + [small, big], "series oldest first")
    flags = {p["job_id"]: p["flag"] for p in f["series"]}
    check_eq(flags[small], None, "1% noise is not flagged")
    check_eq(flags[big], "regression", "10% slowdown is flagged")
    check(abs(f["series"][-1]["change"] - 0.10) < 0.02, "change ~ +10%%: %r" % f["series"][-1]["change"])
    check_eq(f["regression"]["flag"], "regression", "series verdict")
    check_eq(f["latest"]["job_id"], big, "latest point")
    check(all(p["flag"] is None for p in by_var["eager"]["series"]), "eager unchanged, unflagged")
    # A faster result is an improvement, not a regression.
    fast = plant_job(env, "planted", {"eager": noisy(rng, 10.0), "fused": noisy(rng, 4.5)})
    page = env.get("/api/v1/results?workload=planted&variant=fused&points=2")[2]
    check_eq(len(page["items"]), 1, "variant filter")
    check_eq([p["job_id"] for p in page["items"][0]["series"]], [big, fast], "points limit")
    check_eq(page["items"][0]["series"][-1]["flag"], "improvement", "speedup flagged as improvement")
    # Identity: another shape is another series; other filters; pagination.
    plant_job(env, "planted", {"eager": noisy(rng, 20.0), "fused": noisy(rng, 9.0)}, '{"m": 16}')
    page = env.get("/api/v1/results?workload=planted&limit=1")[2]
    seen, cursor = [], None
    while True:
        page = env.get("/api/v1/results?workload=planted&limit=1" + ("&cursor=" + cursor if cursor else ""))[2]
        seen += [s["identity"] for s in page["items"]]
        cursor = page["next_cursor"]
        if not cursor:
            break
    check_eq(len(seen), 4, "two shapes x two variants, paged one at a time")
    check_eq(len(set(seen)), 4, "distinct identities")
    check_eq(env.get("/api/v1/results?device=Planted%20CPU&workload=planted")[0], 200, "device name filter")
    check_eq(len(env.get("/api/v1/results?device=cuda&workload=planted")[2]["items"]), 0, "device kind filter")
    check_eq(env.get("/api/v1/results?points=0")[0], 400, "points out of range")
    check_eq(env.get("/api/v1/results?format=xml")[0], 400, "unknown format")
    st, _, text = env.get("/api/v1/results?workload=planted&variant=fused&points=10&format=csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    check_eq([int(r["job_id"]) for r in rows if r["flag"] == "regression"], [big], "CSV flags")

    # Compare two jobs: the planted 10% slowdown again, and a job with itself.
    st, _, c = env.get("/api/v1/compare?a=job:%d&b=job:%d" % (small, big))
    check_eq(st, 200, "compare jobs")
    fr = [r for r in c["rows"] if r["variant"] == "fused"][0]
    check_eq(fr["flag"], "regression", "compare flags the slowdown")
    check(fr["p"] < 0.01, "p < 0.01")
    check_eq(c["summary"]["regressions"], 1, "one regression")
    c = env.get("/api/v1/compare?a=job:%d&b=job:%d" % (big, big))[2]
    check(all(r["flag"] is None and r["change"] == 0 for r in c["rows"]), "a job against itself")
    check_eq(env.get("/api/v1/compare?a=job:1&b=suite:1")[0], 400, "mixed kinds")
    check_eq(env.get("/api/v1/compare?a=job:1")[0], 400, "missing b")
    st, _, text = env.get("/api/v1/compare?a=job:%d&b=job:%d&format=csv" % (small, big))
    check("regression" in text and text.startswith("workload,"), "compare CSV")


def compare_suites(env, s1):
    st, _, s2 = env.post("/api/v1/suites", {
        "name": "e2e-again", "workloads": ["gemm_bias_relu", "softmax"], "batch_sizes": [1, 2],
        "warmup": 1, "iterations": 8})
    check_eq(st, 201, "second suite")
    for r in s2["rows"]:
        env.wait_job(r["job_id"], timeout=120)
    st, _, c = env.get("/api/v1/compare?a=suite:%d&b=suite:%d" % (s1["id"], s2["id"]))
    check_eq(st, 200, "compare suites")
    check_eq(c["summary"]["unmatched"], 0, "every workload matched")
    check_eq(len(c["rows"]), 8, "4 workloads x 2 variants")
    for r in c["rows"]:
        check(r["a"]["job_id"] in [x["job_id"] for x in s1["rows"]], "a side from suite a")
        check(r["b"]["job_id"] in [x["job_id"] for x in s2["rows"]], "b side from suite b")


def test(env):
    env.start_server()
    env.start_worker()
    s = suite_api(env)
    trace_export(env, s["rows"][0]["job_id"])
    regressions(env)
    compare_suites(env, s)
    log("suites, history, regressions, compare and exports OK")


if __name__ == "__main__":
    fbtest.main(test, "suites")
