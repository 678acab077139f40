#!/usr/bin/env python3
"""The soak: the service under mixed load for a long while, and
whether it stays put: a server and 4 CPU workers on a fresh database; clients
that submit small jobs and suites (with Idempotency-Keys), page through job
lists, read results and compare, fetch jobs, kernels, traces and the
dashboard's files, for --seconds (default 1800).  Every --every seconds
(default 60) it samples the RSS and open file descriptors of the server and
each worker, and the API's p50/p99 latency over that window; at the end a
markdown table of the samples and the verdicts:

- RSS flat: each process's last sample within 10% + 8 MiB of its sample after
  the first window (allocators and caches settle in the first minutes);
- no descriptor leak: each process's last fd count within 8 of that sample;
- p99 steady: the median window p99 of the last third of the run under twice
  the first third's (the first window left out);
- no 5xx from the API, every job submitted finished or still queued/running.

    bench/soak.sh [--seconds 1800] [--every 60]      (starts its own PostgreSQL)

Exit 0 when every verdict holds, 1 otherwise."""

import argparse
import json
import os
import random
import statistics
import sys
import threading
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "e2e"))
import fbtest  # noqa: E402

SMALL = dict(fbtest.SMALL, iterations=10, warmup=1)
# the harness's progress lines go to stderr: stdout is the report
fbtest.log = lambda msg: print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr,
                               flush=True)


def rss_fds(pid):
    rss = 0
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) * 1024
    return rss, len(os.listdir("/proc/%d/fd" % pid))


class Load:
    """The clients: each request's latency into the current window."""

    def __init__(self, env):
        self.env, self.lock = env, threading.Lock()
        self.window, self.errors, self.submitted, self.stop = [], [], [], False
        self.counts = {}

    def call(self, kind, method, path, body=None, headers=None):
        t = time.monotonic()
        try:
            st, _, b = fbtest.http(self.env.base, method, path, body, headers=headers, timeout=60)
        except Exception as e:  # noqa: BLE001 - any failure is a finding
            st, b = 599, str(e)
        ms = (time.monotonic() - t) * 1e3
        with self.lock:
            self.window.append(ms)
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if st >= 500:
                self.errors.append((kind, path, st, str(b)[:200]))
        return st, b

    def submitter(self):
        while not self.stop:
            st, b = self.call("submit", "POST", "/api/v1/jobs",
                              dict(SMALL, labels={"soak": "1"}),
                              headers={"Idempotency-Key": uuid.uuid4().hex})
            if st == 201:
                with self.lock:
                    self.submitted.append(b["id"])
            if random.random() < 0.05:
                self.call("suite", "POST", "/api/v1/suites",
                          {"name": "soak", "workloads": ["gemm_bias_relu"], "batch_sizes": [1],
                           "params": SMALL["params"], "iterations": 10, "warmup": 1},
                          headers={"Idempotency-Key": uuid.uuid4().hex})
            time.sleep(0.4)

    def reader(self):
        paths = ["/api/v1/jobs?limit=50", "/api/v1/jobs?state=succeeded&limit=20",
                 "/api/v1/results?limit=50", "/api/v1/suites", "/api/v1/workloads",
                 "/api/v1/workers", "/", "/static/dash.js", "/metrics"]
        while not self.stop:
            with self.lock:
                ids = self.submitted[-200:]
            self.call("read", "GET", random.choice(paths))
            if ids:
                jid = random.choice(ids)
                self.call("job", "GET", "/api/v1/jobs/%d" % jid)
                self.call("kernels", "GET", "/api/v1/jobs/%d/kernels" % jid)
                self.call("trace", "GET", "/api/v1/jobs/%d/trace" % jid)
            time.sleep(0.05)

    def take_window(self):
        with self.lock:
            w, self.window = self.window, []
        return w


def pct(xs, q):
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def run(env, seconds, every):
    env.start_server()
    workers = [env.start_worker() for _ in range(4)]
    procs = [("server", env.server)] + [("worker%d" % (i + 1), w) for i, w in enumerate(workers)]
    load = Load(env)
    threads = [threading.Thread(target=load.submitter, daemon=True)] + \
        [threading.Thread(target=load.reader, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    samples, t0 = [], time.monotonic()
    while time.monotonic() - t0 < seconds:
        time.sleep(min(every, max(0.0, seconds - (time.monotonic() - t0))))
        w = load.take_window()
        row = {"t": round(time.monotonic() - t0), "requests": len(w), "p50": pct(w, 0.5),
               "p99": pct(w, 0.99)}
        for name, p in procs:
            fbtest.check(p.poll() is None, "%s exited with %s" % (name, p.returncode))
            row[name] = rss_fds(p.pid)
        samples.append(row)
        print("t=%5ds  requests %6d  p50 %7.1f ms  p99 %7.1f ms  server rss %.1f MiB fds %d" %
              (row["t"], row["requests"], row["p50"], row["p99"], row["server"][0] / 2**20,
               row["server"][1]), file=sys.stderr, flush=True)
    load.stop = True
    for t in threads:
        t.join(timeout=90)
    return samples, procs, load


def report(samples, procs, load, env, seconds):
    print("Soak: %d s, a server and 4 CPU workers, %s requests (%s)\n" %
          (seconds, sum(load.counts.values()),
           ", ".join("%s %d" % kv for kv in sorted(load.counts.items()))))
    names = [n for n, _ in procs]
    print("| t (s) | requests | p50 ms | p99 ms | " +
          " | ".join("%s MiB / fds" % n for n in names) + " |")
    print("|---:|---:|---:|---:|" + "---:|" * len(names))
    for r in samples:
        print("| %d | %d | %.1f | %.1f | " % (r["t"], r["requests"], r["p50"], r["p99"]) +
              " | ".join("%.1f / %d" % (r[n][0] / 2**20, r[n][1]) for n in names) + " |")
    ok = True
    base, last = samples[min(1, len(samples) - 1)], samples[-1]
    print()
    for n in names:
        grow = last[n][0] - base[n][0]
        flat = grow <= 0.10 * base[n][0] + 8 * 2**20
        fds = last[n][1] - base[n][1] <= 8
        ok = ok and flat and fds
        print("- %s: RSS %.1f -> %.1f MiB (%s), fds %d -> %d (%s)" %
              (n, base[n][0] / 2**20, last[n][0] / 2**20, "flat" if flat else "GREW",
               base[n][1], last[n][1], "no leak" if fds else "LEAK"))
    # p99 steady: the median window p99 of the last third against the first
    # third's (the first window, warming, left out); one window is noise here
    k = max(1, (len(samples) - 1) // 3)
    early = statistics.median(r["p99"] for r in samples[1:1 + k] or samples)
    late = statistics.median(r["p99"] for r in samples[-k:])
    steady = late <= 2 * max(early, 1.0)
    ok = ok and steady
    print("- API p99 (median of %d windows): %.1f ms early, %.1f ms late (%s)" %
          (k, early, late, "steady" if steady else "GREW"))
    print("- 5xx answers: %d%s" % (len(load.errors), (": %r" % load.errors[:5]) if load.errors else ""))
    ok = ok and not load.errors
    states = dict((s, int(n)) for s, n in env.sql("SELECT state, count(*) FROM jobs GROUP BY state"))
    print("- jobs by state at the end: %s" % json.dumps(states, sort_keys=True))
    bad = states.get("failed", 0)
    ok = ok and bad == 0
    print("\n%s" % ("PASS" if ok else "FAIL"))
    return ok


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=1800)
    ap.add_argument("--every", type=int, default=60)
    a = ap.parse_args()
    env = fbtest.Env("soak")
    ok = False
    try:
        samples, procs, load = run(env, a.seconds, a.every)
        ok = report(samples, procs, load, env, a.seconds)
    finally:
        env.close(keep_logs=not ok)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
