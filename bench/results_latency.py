#!/usr/bin/env python3
"""bench/results_latency.py: seeds N results (default 100,000) into a database and
measures GET /api/v1/results latency (p50, p90, p99) on a running server.

    bench/results_latency.py --database-url URL --server http://127.0.0.1:PORT \
        [--results 100000] [--requests 500]

Results go in through the results table, so the trigger of migration 0002 builds
result_rows and result_series as a worker's completion would.  The history has
10 workloads x 4 batch sizes x 2 variants = 80 series, samples with 1% noise and
an occasional 10% step (so the regression check reads raw samples now and then).
Python standard library and psql only."""

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.request

SEED_SQL = """
DO $$
DECLARE
  i integer;
BEGIN
  FOR i IN 0..%(batches)d - 1 LOOP
    WITH j AS (
      INSERT INTO jobs (state, spec, workload, engine, device, dtype, batch_size, timeout_s,
                        attempt, finished_at, created_at)
      SELECT 'succeeded', jsonb_build_object('workload', 'w' || (g %% 10), 'params', '{}'::jsonb),
             'w' || (g %% 10), 'native', 'cpu', 'float32', 1 << ((g / 10) %% 4), 600, 1, now(), now()
      FROM generate_series(i * %(batch)d, (i + 1) * %(batch)d - 1) g
      RETURNING id)
    INSERT INTO results (job_id, attempt, result)
    SELECT id, 1, jsonb_build_object(
      'env', jsonb_build_object('device_name', 'Bench CPU', 'blas', 'OpenBLAS', 'threads', 2),
      'variants', jsonb_build_array(
        jsonb_build_object('name', 'eager', 'status', 'ok', 'kernels', 5, 'fused_kernels', 0,
          'peak_mem_bytes', 4000000, 'latency_ms', jsonb_build_object('median', m, 'ci95',
          jsonb_build_array(m * 0.99, m * 1.01)), 'samples_ms', s),
        jsonb_build_object('name', 'fused', 'status', 'ok', 'kernels', 1, 'fused_kernels', 1,
          'peak_mem_bytes', 2000000, 'latency_ms', jsonb_build_object('median', m / 2, 'ci95',
          jsonb_build_array(m * 0.495, m * 0.505)), 'samples_ms', s)),
      'comparison', jsonb_build_object('baseline', 'eager', 'speedup', jsonb_build_object('fused', 2.0)))
    FROM (SELECT id, CASE WHEN id %% 97 = 0 THEN 1.1 ELSE 1.0 END * (1 + 0.01 * random()) AS m
          FROM j) x,
         LATERAL (SELECT jsonb_agg(round((x.m * (1 + 0.01 * (random() - 0.5)) + 0 * k)::numeric, 5)) AS s
                  FROM generate_series(1, 50) k) y;
    COMMIT;
  END LOOP;
END $$;
"""


def psql(url, sql):
    subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", url, "-c", sql], check=True)


def get(url):
    t0 = time.perf_counter()
    with urllib.request.urlopen(url, timeout=30) as r:
        body = r.read()
        if r.status != 200:
            raise RuntimeError("%s: %d" % (url, r.status))
    return (time.perf_counter() - t0) * 1e3, len(body)


def measure(base, path, n):
    for _ in range(20):  # warm the pool's connections and the page cache
        get(base + path)
    ms, size = [], 0
    for _ in range(n):
        t, size = get(base + path)
        ms.append(t)
    ms.sort()
    q = statistics.quantiles(ms, n=100, method="inclusive")
    return {"path": path, "requests": n, "bytes": size, "p50_ms": round(q[49], 2),
            "p90_ms": round(q[89], 2), "p99_ms": round(q[98], 2), "max_ms": round(ms[-1], 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--database-url", required=True)
    ap.add_argument("--server", required=True)
    ap.add_argument("--results", type=int, default=100000)
    ap.add_argument("--requests", type=int, default=500)
    a = ap.parse_args()
    batch = 1000
    t0 = time.time()
    psql(a.database_url, SEED_SQL % {"batches": max(1, a.results // batch), "batch": batch})
    psql(a.database_url, "ANALYZE")
    seeded = time.time() - t0
    out = {"results": a.results, "seed_s": round(seeded, 1), "runs": []}
    for path in ("/api/v1/results",
                 "/api/v1/results?workload=w3&points=50",
                 "/api/v1/results?variant=fused&batch_size=8&points=100",
                 "/api/v1/results?limit=200&points=5"):
        out["runs"].append(measure(a.server, path, a.requests))
    print(json.dumps(out, indent=1))
    return 0 if all(r["p99_ms"] < 50 for r in out["runs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
