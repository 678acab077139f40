#!/usr/bin/env python3
"""bench/burst.py: N submits at once from one address, as a notebook or a CI
script that fans out does, against a build's fusionbench-server.

Starts a throwaway PostgreSQL (scripts/pg.sh, FB_PG_FAST=1) and the server (no
worker: the jobs wait), fires N POST /api/v1/jobs at once, each on its own
connection with its own Idempotency-Key, then sends every refused or reset one
again with its key (after Retry-After when the server said one, else 1 s, plus
up to 1 s at random) until all N are in.  Prints, for the first wave: answers
by status, resets, the latency of an answer (p50, p99); for the whole: the
time until all N landed, submits per second, and the jobs in the table (which
must be N: each once).  Exit 0 when all N landed once.

    bench/burst.py [--bin BUILD_DIR] [--n 500] [--rounds 3]

Run it on two builds to compare (bench/ab.sh does the same for fusionbench-run):
    bench/burst.py --bin build-before; bench/burst.py --bin build
"""

import argparse
import http.client
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SPEC = {"workload": "softmax", "params": {"rows": 8, "cols": 8}, "iterations": 3}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, key):
    t0 = time.monotonic()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        c.request("POST", "/api/v1/jobs", body=json.dumps(SPEC).encode(),
                  headers={"Content-Type": "application/json", "Idempotency-Key": key})
        r = c.getresponse()
        r.read()
        return r.status, r.getheader("Retry-After"), time.monotonic() - t0
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected, OSError):
        return "reset", None, time.monotonic() - t0
    finally:
        c.close()


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))] if v else float("nan")


def one_round(port, n):
    keys = [uuid.uuid4().hex for _ in range(n)]
    first, done = [None] * n, [False] * n
    gate = threading.Barrier(n)

    def fire(i):
        gate.wait()
        first[i] = post(port, keys[i])
        st, after, _ = first[i]
        done[i] = st == 201
        while not done[i]:
            time.sleep((int(after) if after and after.isdigit() else 1) + random.random())
            st, after, _ = post(port, keys[i])
            done[i] = st == 201

    t0 = time.monotonic()
    ts = [threading.Thread(target=fire, args=(i,)) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    total = time.monotonic() - t0
    by = {}
    for st, _, _ in first:
        by[st] = by.get(st, 0) + 1
    lat = [s for _, _, s in first]
    return by, pct(lat, 0.5), pct(lat, 0.99), total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--n", type=int, default=500)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="fb-burst-")
    os.chmod(tmp, 0o755)  # as root, pg.sh runs PostgreSQL as postgres, who must reach it
    pg = os.path.join(ROOT, "scripts", "pg.sh")
    env = dict(os.environ, FB_PG_FAST="1")
    url = subprocess.run([pg, "start", os.path.join(tmp, "pg"), str(free_port())], env=env,
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    port = free_port()
    srv = subprocess.Popen([os.path.join(a.bin, "server", "fusionbench-server"), "--database-url",
                            url, "--port", str(port), "--web-dir", os.path.join(ROOT, "web")],
                           stdout=subprocess.DEVNULL, stderr=open(os.path.join(tmp, "server.log"), "w"))
    ok = False
    try:
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        landed = 0
        for r in range(a.rounds):
            by, p50, p99, total = one_round(port, a.n)
            landed += a.n
            print("round %d: %d submits at once: first answers %s; answer p50 %.3f s, p99 %.3f s;"
                  " all landed in %.2f s (%.0f submits/s)"
                  % (r + 1, a.n, json.dumps({str(k): v for k, v in sorted(by.items(), key=str)}),
                     p50, p99, total, a.n / total), flush=True)
        rows = subprocess.run(["psql", url, "-tAc", "SELECT count(*) FROM jobs"], check=True,
                              capture_output=True, text=True).stdout.strip()
        print("jobs in the table: %s (want %d)" % (rows, landed))
        ok = int(rows) == landed
    finally:
        srv.terminate()
        srv.wait(timeout=30)
        subprocess.run([pg, "stop", os.path.join(tmp, "pg")], capture_output=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
