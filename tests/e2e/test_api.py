#!/usr/bin/env python3
"""End to end: the REST API of docs/API.md against a real server, worker and database.

A small job runs to the end and every field of the job and its result is checked;
then kernels, listing with filters and cursor pagination, catalog, workers,
operations endpoints, and every error the API promises."""

import datetime
import http.client
import json
import re
import socket
import sys
import time
import os
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

SMALL = {"workload": "gemm_bias_relu", "params": {"m": 64, "k": 64, "n": 64},
         "warmup": 2, "iterations": 20, "labels": {"suite": "api"}}
WORKLOADS = ["gemm_bias_relu", "gemm_bias_gelu", "mlp", "conv_bn_relu", "conv_relu_conv",
             "elementwise_chain", "softmax", "layernorm", "add_layernorm", "attention"]
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]00:?00)$")
STAT_KEYS = ("median", "mean", "stdev", "min", "max", "p90", "cv", "ci95")


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def check_error(resp, status, code, field=None, what=""):
    st, _, body = resp
    check(st == status, "%s: status %s, want %s (body %r)" % (what, st, status, body))
    check(isinstance(body, dict) and isinstance(body.get("error"), dict),
          "%s: error body is not {\"error\": {...}}: %r" % (what, body))
    err = body["error"]
    check_eq(err.get("code"), code, what + ": error code")
    check(isinstance(err.get("message"), str) and err["message"],
          what + ": error message missing")
    if field is not None:
        check_eq(err.get("field"), field, what + ": error field")


def check_variant(v, iterations):
    name = v["name"]
    check_eq(v.get("status"), "ok", "variant %s status" % name)
    lat = v.get("latency_ms")
    check(isinstance(lat, dict), "variant %s: latency_ms missing" % name)
    for k in STAT_KEYS:
        check(k in lat, "variant %s: latency_ms.%s missing" % (name, k))
    for k in ("median", "mean", "min", "max", "p90"):
        check(is_num(lat[k]) and lat[k] > 0, "variant %s: latency_ms.%s = %r" % (name, k, lat[k]))
    check(lat["min"] <= lat["median"] <= lat["max"], "variant %s: min <= median <= max" % name)
    check(lat["median"] <= lat["p90"] <= lat["max"], "variant %s: median <= p90 <= max" % name)
    check(is_num(lat["stdev"]) and lat["stdev"] >= 0, "variant %s: stdev" % name)
    ci = lat["ci95"]
    check(isinstance(ci, list) and len(ci) == 2 and ci[0] <= lat["median"] <= ci[1],
          "variant %s: ci95 %r does not hold the median %r" % (name, ci, lat["median"]))
    samples = v.get("samples_ms")
    check(isinstance(samples, list), "variant %s: samples_ms missing" % name)
    check_eq(len(samples), iterations, "variant %s: len(samples_ms) (the rounds run)" % name)
    check(all(is_num(s) and s > 0 for s in samples), "variant %s: samples > 0" % name)
    check(abs(min(samples) - lat["min"]) < 1e-9 and abs(max(samples) - lat["max"]) < 1e-9,
          "variant %s: min/max disagree with samples" % name)
    srt = sorted(samples)
    med = (srt[(len(srt) - 1) // 2] + srt[len(srt) // 2]) / 2
    check(abs(med - lat["median"]) <= 1e-9 * max(1.0, med),
          "variant %s: median %r, samples give %r" % (name, lat["median"], med))
    for k in ("kernels", "fused_kernels", "fused_ops", "peak_mem_bytes"):
        check(isinstance(v.get(k), int), "variant %s: %s = %r" % (name, k, v.get(k)))
    check(v["kernels"] >= 1, "variant %s: kernels >= 1" % name)
    check(v["peak_mem_bytes"] > 0, "variant %s: peak_mem_bytes > 0" % name)
    check(is_num(v.get("max_rel_error")) and 0 <= v["max_rel_error"] <= 1e-4,
          "variant %s: max_rel_error %r" % (name, v.get("max_rel_error")))
    for k in ("kernel_time_ms", "busy_ms"):
        check(is_num(v.get(k)) and v[k] > 0, "variant %s: %s = %r" % (name, k, v.get(k)))
    check(isinstance(v.get("categories_ms"), dict) and v["categories_ms"],
          "variant %s: categories_ms" % name)


def check_finished_job(env, job, wid):
    check_eq(job["state"], "succeeded", "state")
    check_eq(job["attempt"], 1, "attempt")
    check_eq(job["max_attempts"], 3, "max_attempts")
    check(job.get("error") is None, "error should be null: %r" % job.get("error"))
    check_eq(job.get("worker"), wid, "worker")
    for k in ("created_at", "started_at", "finished_at"):
        check(isinstance(job.get(k), str) and RFC3339.match(job[k]), "%s = %r" % (k, job.get(k)))
    check(job["created_at"] <= job["started_at"] <= job["finished_at"], "timestamps in order")
    spec = job["spec"]
    for k, want in (("workload", "gemm_bias_relu"), ("engine", "native"), ("device", "cpu"),
                    ("dtype", "float32"), ("variants", ["eager", "fused"]), ("iterations", 20),
                    ("warmup", 2), ("labels", {"suite": "api"})):
        check_eq(spec.get(k), want, "spec." + k)
    res = job.get("result")
    check(isinstance(res, dict), "result missing")
    names = [v["name"] for v in res["variants"]]
    check_eq(names, ["eager", "fused"], "result variant names")
    rep = res["repetition"]
    check(rep["rounds_requested"] == 20 and 20 <= rep["rounds"] <= 200 and
          rep["stop"] in ("stable", "converged", "time_budget", "max_rounds"),
          "repetition %r" % rep)
    for v in res["variants"]:
        check_variant(v, rep["rounds"])
        check(isinstance(v.get("unstable"), bool), "variant %s: unstable flag" % v["name"])
    eager, fused = res["variants"]
    check(eager["kernels"] > fused["kernels"], "eager kernels > fused kernels")
    check_eq(eager["fused_kernels"], 0, "eager fused_kernels")
    check(fused["fused_kernels"] >= 1 and fused["fused_ops"] >= 2, "fused fusion counts")
    check(fused["peak_mem_bytes"] <= eager["peak_mem_bytes"], "fused peak <= eager peak")
    cmp_ = res["comparison"]
    check_eq(cmp_.get("baseline"), "eager", "comparison.baseline")
    sp = cmp_["speedup"].get("fused")
    check(is_num(sp) and sp > 0, "speedup.fused = %r" % sp)
    want = eager["latency_ms"]["median"] / fused["latency_ms"]["median"]
    check(abs(sp - want) <= 1e-6 * want, "speedup %r != eager/fused medians %r" % (sp, want))
    lo, hi = cmp_["speedup_ci95"]["fused"]
    check(lo <= sp <= hi, "speedup %r within its CI [%r, %r]" % (sp, lo, hi))
    check(cmp_["change"]["fused"] in ("faster", "slower", "no_difference"), "change.fused")
    intf = res["interference"]
    check(is_num(intf["timed_ms"]) and intf["timed_ms"] > 0 and
          isinstance(intf["involuntary_switches"], int), "interference %r" % intf)
    check(is_num(cmp_["kernel_ratio"].get("fused")), "kernel_ratio.fused")
    check(is_num(cmp_["memory_ratio"].get("fused")), "memory_ratio.fused")
    e = res["env"]
    check(isinstance(e.get("cpu"), str) and e["cpu"], "env.cpu")
    check(isinstance(e.get("device_name"), str) and e["device_name"], "env.device_name")
    check(isinstance(e.get("threads"), int) and e["threads"] >= 1, "env.threads")
    check(isinstance(e.get("fusionbench"), str) and e["fusionbench"], "env.fusionbench")
    roof = e.get("roofline") or {}
    check(roof.get("triad_gbps", 0) > 0.5 and roof.get("gemm_gflops", 0) > 0.5,
          "env.roofline: the worker's measured limits: %r" % roof)
    check("cuda" in e, "env.cuda present (null on the CPU)")


def t_small_job(env, wid):
    st, hdrs, job = env.post("/api/v1/jobs", SMALL)
    check_eq(st, 201, "POST status")
    jid = job["id"]
    check(isinstance(jid, int) and jid > 0, "job id %r" % jid)
    check((hdrs.get("Location") or "").endswith("/api/v1/jobs/%d" % jid),
          "Location header %r" % hdrs.get("Location"))
    check(job["state"] in ("queued", "running"), "new job state %r" % job["state"])
    job = env.wait_job(jid, timeout=30)
    check_finished_job(env, job, wid)
    log("small job %d: %s, speedup %.2f" % (jid, job["state"],
                                            job["result"]["comparison"]["speedup"]["fused"]))
    return job


def t_kernels(env, jid):
    st, _, body = env.get("/api/v1/jobs/%d/kernels" % jid)
    check_eq(st, 200, "kernels status")
    rows = body["items"]
    check(len(rows) >= 2, "kernel rows: %r" % rows)
    for r in rows:
        for k in ("name", "count", "total_ms", "mean_ms", "category", "ops", "grid", "block"):
            check(k in r, "kernel row lacks %s: %r" % (k, r))
        check(r["count"] >= 1 and r["total_ms"] >= 0, "kernel row values %r" % r)
    st, _, fused = env.get("/api/v1/jobs/%d/kernels?variant=fused" % jid)
    st2, _, eager = env.get("/api/v1/jobs/%d/kernels?variant=eager" % jid)
    check(st == 200 and st2 == 200, "kernels?variant= status")
    check(any(len(r["ops"]) >= 2 for r in fused["items"]), "a fused kernel with >= 2 ops")
    check(all(len(r["ops"]) == 1 for r in eager["items"]), "eager kernels implement one op each")
    check_eq(sum(r["count"] for r in eager["items"]) + sum(r["count"] for r in fused["items"]),
             sum(r["count"] for r in rows), "rows of both variants = all rows")
    check_eq(env.get("/api/v1/jobs/999999/kernels")[0], 404, "kernels of a missing job")


def t_listing(env, first_id):
    ids = []
    for i in range(5):
        spec = dict(SMALL, iterations=3, labels={"suite": "list", "i": str(i)})
        if i % 2:
            spec = {"workload": "softmax", "params": {"rows": 64, "cols": 64}, "iterations": 3,
                    "warmup": 1, "labels": {"suite": "list", "i": str(i)}}
        ids.append(env.submit(spec)["id"])
    for jid in ids:
        env.wait_job(jid, timeout=60)
    seen, cursor, pages = [], None, 0
    while True:
        q = "/api/v1/jobs?label=suite:list&limit=2" + ("&cursor=" + cursor if cursor else "")
        st, _, page = env.get(q)
        check_eq(st, 200, "list status")
        check(len(page["items"]) <= 2, "limit=2 honoured")
        seen += [j["id"] for j in page["items"]]
        pages += 1
        cursor = page.get("next_cursor")
        if not cursor:
            break
        check(pages < 10, "pagination does not end")
    check_eq(seen, sorted(ids, reverse=True), "paged ids (newest first, no repeats)")
    check(pages >= 3, "5 jobs at limit 2 take 3 pages, got %d" % pages)
    st, _, page = env.get("/api/v1/jobs?workload=softmax")
    check(st == 200 and page["items"], "workload filter")
    check(all(j["spec"]["workload"] == "softmax" for j in page["items"]), "workload filter rows")
    check_eq(sorted(j["id"] for j in page["items"]), sorted(ids[1::2]), "softmax ids")
    st, _, page = env.get("/api/v1/jobs?state=succeeded&engine=native&device=cpu&limit=200")
    check(st == 200 and {first_id, *ids} <= {j["id"] for j in page["items"]}, "state filter")
    check_eq(env.get("/api/v1/jobs?state=queued")[2]["items"], [], "no queued jobs")
    check_error(env.get("/api/v1/jobs?state=bogus"), 400, "invalid_argument", "state", "bad state")
    check_error(env.get("/api/v1/jobs?limit=0"), 400, "invalid_argument", "limit", "limit=0")
    check_error(env.get("/api/v1/jobs?limit=201"), 400, "invalid_argument", "limit", "limit=201")
    check_error(env.get("/api/v1/jobs?label=nocolon"), 400, "invalid_argument", "label",
                "malformed label")


def t_catalog(env, wid):
    st, _, body = env.get("/api/v1/workloads")
    check_eq(st, 200, "workloads status")
    names = {w["name"] for w in body["items"]}
    check(set(WORKLOADS) <= names, "catalog lacks %s" % (set(WORKLOADS) - names))
    for w in body["items"]:
        for k in ("name", "engine", "domain", "devices", "dtypes", "variants", "description",
                  "default_batch_size"):
            check(k in w, "workload %s lacks %s" % (w.get("name"), k))
    patterns = [w for w in body["items"] if w["name"] in WORKLOADS and w["engine"] == "native"]
    check_eq(len(patterns), len(WORKLOADS), "native pattern entries in the catalog")
    for w in patterns:
        check("cpu" in w["devices"] and "float32" in w["dtypes"], "workload %s cpu/float32" % w)
        check(w["variants"][:2] == ["eager", "fused"], "workload %s variants" % w["name"])
    st, _, body = env.get("/api/v1/workers")
    check_eq(st, 200, "workers status")
    mine = [w for w in body["items"] if w["id"] == wid]
    check_eq(len(mine), 1, "our worker listed once")
    w = mine[0]
    check_eq(w["device"]["kind"], "cpu", "worker device.kind")
    check(w["device"].get("name"), "worker device.name")
    check("native" in w["engines"], "worker engines")
    check(w["state"] in ("idle", "busy"), "worker state %r" % w["state"])
    check(RFC3339.match(w.get("last_heartbeat") or ""), "worker last_heartbeat")


def t_ops(env):
    check_eq(env.get("/healthz")[0], 200, "/healthz")
    check_eq(env.get("/readyz")[0], 200, "/readyz")
    st, _, doc = env.get("/api/v1/openapi.json")
    check_eq(st, 200, "/api/v1/openapi.json")
    with open(os.path.join(fbtest.source_dir(), "web", "openapi.json")) as f:
        check_eq(doc, json.load(f), "the served OpenAPI document is the tree's")
    st, hdrs, text = env.get("/metrics")
    check_eq(st, 200, "/metrics")
    check("text/plain" in hdrs.get("Content-Type", ""), "metrics content type")
    for name in ("fusionbench_http_requests_total", "fusionbench_http_request_duration_seconds",
                 "fusionbench_jobs", "fusionbench_queue_oldest_age_seconds",
                 "fusionbench_workers_alive"):
        check(name in text, "/metrics lacks %s" % name)
    m = re.search(r'^fusionbench_jobs\{state="succeeded"\} (\d+)', text, re.M)
    check(m and int(m.group(1)) >= 6, "fusionbench_jobs{state=\"succeeded\"} >= 6")
    check(re.search(r"^fusionbench_workers_alive 1(\.0)?$", text, re.M), "workers_alive 1")


def t_hardening(env):
    """No database words in answers (issue 13, item 7); one strict CSP on every
    response, API answers included (item 8)."""
    for since in ("2026-13-45", "2026-02-30", "2026-11-22T25:00:00Z"):
        resp = env.get("/api/v1/results?since=" + since)
        check_error(resp, 400, "invalid_argument", "since", "since=" + since)
        msg = resp[2]["error"]["message"]
        check(not any(w in msg for w in ("ERROR", "database", "SQL", "postgres")),
              "since=%s: the database's words reach the client: %r" % (since, msg))
    check_eq(env.get("/api/v1/results?since=2024-02-29")[0], 200, "a leap day is a day")
    for path in ("/healthz", "/api/v1/jobs", "/api/v1/nope", "/", "/static/app.js"):
        st, hdrs, _ = env.get(path)
        csp = hdrs.get("Content-Security-Policy") or ""
        for part in ("default-src 'self'", "base-uri 'none'", "form-action 'self'",
                     "frame-ancestors 'none'"):
            check(part in csp, "%s (%d): CSP lacks %s: %r" % (path, st, part, csp))
        check_eq(hdrs.get("X-Content-Type-Options"), "nosniff", path + ": nosniff")


def t_outside_text(env, done_id):
    """Text that could not be stored and read back unchanged is refused, by name;
    since takes any RFC 3339 offset (PostgreSQL stops at 15:59) as its instant."""
    for q, field in (("label=a:%00b", "label"), ("label=%FF:x", "label"),
                     ("workload=soft%00max", "workload")):
        check_error(env.get("/api/v1/jobs?" + q), 400, "invalid_argument", field, q)
    check_error(env.get("/api/v1/jobs?%FF=1"), 400, "invalid_argument", None, "%FF as a name")
    check_error(env.get("/api/v1/results?device=%C3"), 400, "invalid_argument", "device",
                "a cut UTF-8 character")
    # device names are counted in characters, as the document's maxLength counts
    check_eq(env.get("/api/v1/results?device=" + "%C3%A9" * 127)[0], 200, "127 characters")
    check_error(env.get("/api/v1/results?device=" + "%C3%A9" * 128), 400, "invalid_argument",
                "device", "128 characters")
    for body, what in ((b'{"workload":"softmax","labels":{"a":"x\u0000y"}}', "NUL in a label"),
                       (b'{"workload":"softmax","params":{"k\u0000":1}}', "NUL in a key"),
                       (b'{"workloads":["softmax"],"params":{"s":"\u0000"}}', "NUL in a suite")):
        path = "/api/v1/suites" if b"workloads" in body else "/api/v1/jobs"
        resp = env.post(path, raw=body)
        check_error(resp, 400, "invalid_argument", None, what)
        check("u0000" in resp[2]["error"]["message"], what + ": %r" % (resp[2],))
    for n in ("1.7976931348623157e308", "-1.7976931348623157e308", "1e309"):
        check_error(env.post("/api/v1/jobs", raw=b'{"workload":"softmax","params":{"x":[%s]}}'
                             % n.encode()), 400, "invalid_argument", "params", "params " + n)
    # 1e308 fits and comes back as itself, not as null (inside params.graph:
    # the one param whose value is any JSON until a worker reads it)
    st, _, job = env.post("/api/v1/jobs", {"workload": "graph", "priority": -100,
                                           "params": {"graph": {"x": [1e308, -1e308, 5e-324]}}})
    check_eq(st, 201, "params within +/-1e308")
    check_eq(env.get("/api/v1/jobs/%d" % job["id"])[2]["spec"]["params"]["graph"]["x"],
             [1e308, -1e308, 5e-324], "params numbers stored")
    check(env.post("/api/v1/jobs/%d/cancel" % job["id"])[0] in (200, 409), "cancel")
    env.wait_job(job["id"])
    # a param the workload does not take would be ignored: 400 naming it and
    # what the workload takes (image_size is the inductor engine's name)
    resp = env.post("/api/v1/jobs", {"workload": "resnet18", "params": {"image_size": 112}})
    check_error(resp, 400, "invalid_argument", "params.image_size", "a param resnet18 lacks")
    msg = resp[2]["error"]["message"]
    check("resnet18 (engine native)" in msg and "image, classes" in msg, "names what it takes: %r"
          % msg)
    # since: the finished job's point, bracketed by times written 17:41 behind UTC
    st, _, page = env.get("/api/v1/results?workload=gemm_bias_relu&limit=500")
    pts = [p for s in page["items"] for p in s["series"] if p["job_id"] == done_id]
    check(st == 200 and pts, "results hold job %d: %r" % (done_id, page))
    at = datetime.datetime.fromisoformat(pts[0]["created_at"].replace("Z", "+00:00"))
    zone = datetime.timezone(-datetime.timedelta(hours=17, minutes=41))
    for delta, want in ((-60, True), (60, False)):
        since = (at + datetime.timedelta(seconds=delta)).astimezone(zone)
        q = urllib.parse.quote(since.isoformat(timespec="seconds"))
        st, _, page = env.get("/api/v1/results?workload=gemm_bias_relu&limit=500&since=" + q)
        check_eq(st, 200, "since=%s" % since.isoformat())
        got = any(p["job_id"] == done_id for s in page["items"] for p in s["series"])
        check_eq(got, want, "since=%s keeps the point at %s" % (since.isoformat(), at))


def t_csrf_and_host(env, done_id):
    """A page elsewhere cannot change state (item 2): a body-less POST needs the
    client header or a JSON type, which a form cannot send; a Host that is not
    this server's name (DNS rebinding) is refused on every route."""
    queued = env.submit({"workload": "softmax", "iterations": 3, "priority": -5})
    for ctype in (None, "application/x-www-form-urlencoded", "text/plain", "multipart/form-data"):
        conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=30)
        try:  # exactly the headers a cross-site form sends: no client header
            conn.request("POST", "/api/v1/jobs/%d/cancel" % queued["id"], body=b"a=1",
                         headers={"Content-Type": ctype} if ctype else {})
            r = conn.getresponse()
            body = json.loads(r.read())
        finally:
            conn.close()
        check_error((r.status, None, body), 415, "unsupported_media_type", None,
                    "cancel as a form (%s)" % ctype)
    check(env.job(queued["id"])["state"] != "canceled", "a form-like POST canceled a job")
    resp = fbtest.http(env.base, "POST", "/api/v1/jobs/%d/cancel" % queued["id"],
                       headers={"X-FusionBench-Client": "curl"})
    check_eq(resp[0], 200, "cancel with the client header")
    for host in ("evil.example", "evil.example:%d" % env.port, "127.0.0.1.evil.example"):
        for path in ("/api/v1/jobs", "/healthz", "/"):
            resp = fbtest.http(env.base, "GET", path, headers={"Host": host})
            check_error(resp, 403, "forbidden", None, "Host %s on %s" % (host, path))
    for host in ("localhost:%d" % env.port, "127.0.0.1", "[::1]:%d" % env.port, "LOCALHOST"):
        check_eq(fbtest.http(env.base, "GET", "/healthz", headers={"Host": host})[0], 200,
                 "Host %s" % host)


def t_connection_limits(env):
    """One client cannot hold the server (item 5): a chunked body past the limit
    gets the connection closed instead of being read without end, and one
    address holds at most 64 connections: the 65th is answered 503 with
    Retry-After and closed (no reset) while the others are still served."""
    s = socket.create_connection(("127.0.0.1", env.port), timeout=30)
    sent, closed = 0, False
    try:
        s.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"%x\r\n" % 65536 + b" " * 65536 + b"\r\n"
        while sent < 64 * 1024 * 1024:
            s.sendall(chunk)
            sent += 65536
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    finally:
        s.close()
    check(closed and sent <= 8 * 1024 * 1024,
          "a chunked body over the 1 MiB limit: closed %s after %d bytes" % (closed, sent))
    held = []
    try:
        for _ in range(64):  # from another loopback address: another client
            c = socket.socket()
            c.bind(("127.0.0.2", 0))
            c.connect(("127.0.0.1", env.port))
            held.append(c)
        time.sleep(0.5)
        extra = socket.socket()
        extra.bind(("127.0.0.2", 0))
        extra.settimeout(10)
        extra.connect(("127.0.0.1", env.port))
        answer = b""
        try:
            extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            while True:  # the answer, then the server closes: never a reset
                got = extra.recv(4096)
                if not got:
                    break
                answer += got
        except (ConnectionResetError, BrokenPipeError) as e:
            check(False, "the 65th connection of one address was reset (%s) after %r" % (e, answer))
        finally:
            extra.close()
        check(answer.startswith(b"HTTP/1.1 503"), "the 65th connection of one address: %r"
              % answer[:60])
        check(b"\r\nRetry-After: 1\r\n" in answer and b'"unavailable"' in answer,
              "503 with Retry-After and the JSON error: %r" % answer)
        check_eq(env.get("/healthz")[0], 200, "/healthz from another address meanwhile")
    finally:
        for c in held:
            c.close()
    log("chunked body closed after %d bytes; the 65th connection of an address: 503" % sent)


def over_limit(env, size):
    """POSTs a body of size bytes over a raw socket (the server may answer before
    reading it all); returns the status code."""
    s = socket.create_connection(("127.0.0.1", env.port), timeout=30)
    try:
        s.sendall(("POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                   "Content-Length: %d\r\nConnection: close\r\n\r\n" % size).encode())
        chunk = b"[" + b" " * 65535
        sent = 0
        try:
            while sent < size:
                n = min(len(chunk), size - sent)
                s.sendall(chunk[:n])
                sent += n
        except OSError:
            pass  # the server stopped reading: fine
        data = b""
        try:
            while not data.endswith(b"}") and len(data) < 100000:
                part = s.recv(65536)
                if not part:
                    break
                data += part
        except OSError:
            pass
    finally:
        s.close()
    m = re.match(rb"HTTP/1\.[01] (\d+)", data)
    check(m, "no HTTP answer to an oversized body: %r" % data[:200])
    return int(m.group(1)), data


def t_errors(env, done_id):
    check_error(env.post("/api/v1/jobs", raw=b"{not json"), 400, "invalid_json", None,
                "invalid JSON")
    check_error(env.post("/api/v1/jobs", {}), 400, "invalid_argument", "workload",
                "missing workload")
    check_error(env.post("/api/v1/jobs", {"workload": "softmax", "variants": ["eager", 5]}),
                400, "invalid_argument", "variants[1]", "variants[1] not a string")
    check_error(env.post("/api/v1/jobs", {"workload": "softmax", "iterations": 0}),
                400, "invalid_argument", "iterations", "iterations 0")
    check_error(env.post("/api/v1/jobs", {"workload": "softmax", "bogus": 1}),
                400, "invalid_argument", "bogus", "unknown field")
    # params.unfuse in the form of the engine's ids (native: group numbers)
    check_error(env.post("/api/v1/jobs", {"workload": "resnet18",
                                          "params": {"unfuse": ["fuse-0123456789ab"]}}),
                400, "invalid_argument", "params.unfuse[0]", "unfuse id of another engine")
    check_error(env.post("/api/v1/jobs", {"workload": "resnet18", "params": {"unfuse": []}}),
                400, "invalid_argument", "params.unfuse", "empty unfuse")
    check_error(env.post("/api/v1/jobs", {"workload": "no_such_workload"}), 422,
                "unknown_workload", "workload", "unknown workload")
    check_error(env.post("/api/v1/jobs", {"workload": "softmax", "dtype": "float16"}), 422,
                "unsupported", "dtype", "float16 on the CPU")
    check_error(env.post("/api/v1/jobs", {"workload": "softmax", "variants": ["eager", "nope"]}),
                422, "unsupported", "variants[1]", "unknown variant")
    check_error(env.post("/api/v1/jobs", raw=b'{"workload":"softmax"}',
                         headers={"Content-Type": "text/plain"}), 415, "unsupported_media_type",
                None, "text/plain body")
    st, _, body = env.post("/api/v1/jobs", raw=b'{"workload":"softmax","iterations":1,'
                           b'"warmup":0,"params":{"rows":8,"cols":8}}',
                           headers={"Content-Type": "application/json; charset=utf-8"})
    check_eq(st, 201, "charset parameter accepted")
    env.wait_job(body["id"], timeout=30)
    st, data = over_limit(env, 2 * 1024 * 1024)
    check_eq(st, 413, "2 MiB body status")
    check(b"payload_too_large" in data, "413 body code: %r" % data[-300:])
    check_error(env.get("/api/v1/nope"), 404, "not_found", None, "unknown route")
    check_error(env.get("/api/v1/jobs/999999"), 404, "not_found", None, "missing job")
    check_error(env.get("/api/v1/jobs/abc"), 404, "not_found", None, "non-numeric id")
    resp = fbtest.http(env.base, "DELETE", "/api/v1/jobs")
    check_error(resp, 405, "method_not_allowed", None, "DELETE /api/v1/jobs")
    check("POST" in (resp[1].get("Allow") or ""), "Allow header %r" % resp[1].get("Allow"))
    check_error(env.get("/api/v1/jobs/%d/cancel" % done_id), 405, "method_not_allowed", None,
                "GET on cancel")
    check_error(env.post("/api/v1/jobs/%d/cancel" % done_id), 409, "conflict", None,
                "cancel a finished job")
    check_error(env.post("/api/v1/jobs/999999/cancel"), 404, "not_found", None,
                "cancel a missing job")


def t_cancel_queued(env, worker):
    # SIGKILL: the worker stays in the catalog until its heartbeat is stale, so the
    # job is accepted and stays queued, with no worker running to take it.
    worker.kill()
    worker.wait(timeout=20)
    job = env.submit({"workload": "softmax", "iterations": 3})
    check_eq(job["state"], "queued", "state with no worker running")
    st, _, body = env.post("/api/v1/jobs/%d/cancel" % job["id"])
    check_eq(st, 200, "cancel a queued job")
    job = env.job(job["id"])
    check_eq(job["state"], "canceled", "state after cancel")
    check(job["finished_at"], "finished_at set on cancel")
    check(job.get("result") is None, "no result for a canceled job")


def run(env):
    env.start_server()
    worker = env.start_worker()
    job = t_small_job(env, worker.wid)
    t_kernels(env, job["id"])
    t_listing(env, job["id"])
    t_catalog(env, worker.wid)
    t_ops(env)
    t_hardening(env)
    t_outside_text(env, job["id"])
    t_csrf_and_host(env, job["id"])
    t_connection_limits(env)
    t_errors(env, job["id"])
    t_cancel_queued(env, worker)


if __name__ == "__main__":
    fbtest.main(run, "api")
