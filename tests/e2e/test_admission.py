#!/usr/bin/env python3
"""End to end: a job is admitted only if it can fit (issue 13, hardening 6).

A CPU worker registered with --job-memory-mib 64 says so in its registration
(job_memory_bytes); the catalog carries the largest budget per device; a
resnet18 job whose input alone is over it is refused at submit with 422 on
batch_size, naming both sizes, and nothing is queued; a job that fits is taken.
After the worker goes, the budget stays (scale from zero keeps admitting the
same way)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def run(env):
    env.start_server()
    w = env.start_worker(["--job-memory-mib", "64"])
    workers = env.get("/api/v1/workers")[2]["items"]
    check_eq(workers[0]["device"].get("job_memory_bytes"), 64 << 20, "registered budget")
    roof = workers[0]["device"].get("roofline") or {}
    check(roof.get("triad_gbps", 0) > 0.5 and roof.get("gemm_gflops", 0) > 0.5,
          "a CPU worker registers its measured roofline: %r" % roof)
    cat = {(x["name"], x["engine"]): x for x in env.get("/api/v1/workloads")[2]["items"]}
    check_eq(cat[("resnet18", "native")].get("job_memory_bytes"), {"cpu": 64 << 20},
             "the catalog's budget per device")
    spec = {"workload": "resnet18", "engine": "native", "device": "cpu", "batch_size": 256,
            "iterations": 1, "warmup": 0}
    st, _, b = env.post("/api/v1/jobs", spec)
    check_eq((st, b["error"]["code"], b["error"].get("field")), (422, "unsupported", "batch_size"),
             "a resnet18 job of 147 MiB of input on a 64 MiB worker")
    msg = b["error"]["message"]
    check("147 MiB" in msg and "64 MiB the largest cpu worker" in msg, "the 422 says why: %r" % msg)
    check_eq(env.sql("SELECT count(*) FROM jobs")[0][0], "0", "nothing queued")
    st, _, b = env.post("/api/v1/suites", {"workloads": ["resnet18"], "engine": "native",
                                           "device": "cpu", "batch_sizes": [1, 256]})
    check_eq((st, b["error"]["code"]), (422, "unsupported"), "a suite with one job too big")
    check_eq(env.sql("SELECT count(*) FROM jobs")[0][0], "0", "nothing of the suite queued")
    spec["batch_size"] = 8  # 4.6 MiB of input: admitted (the worker's cap decides the rest)
    st, _, b = env.post("/api/v1/jobs", spec)
    check_eq(st, 201, "a job that may fit (%r)" % b)

    w.terminate()
    w.wait(timeout=60)
    spec["batch_size"] = 256
    st, _, b = env.post("/api/v1/jobs", spec)
    check_eq(st, 422, "with the worker gone, the budget still holds (%r)" % b)
    log("admission: 422 on batch_size past the 64 MiB budget (%s)" % msg)


if __name__ == "__main__":
    fbtest.main(run, "admission")
