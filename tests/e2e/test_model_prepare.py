#!/usr/bin/env python3
"""End to end: an uploaded model prepared by a worker (issue 26).

Uploads made before any worker runs: the test model exported with torch
(tests/inductor/usermodel.py), an archive whose weight is a pickle that runs a
command under torch.export.load (tests/inductor/archives.py), bytes that are
not a zip, the good archive again as a model whose preparing a worker that
died left behind (its lease stale, attempts left: prepared again), and once
more as one that died at its last attempt.  Then a worker with the inductor
engine, started with the database's URL and a password in its environment and
a runner (tests/e2e/spy_runner.py) that notes what the reading process was
given.  Each model must end ready with what was read, or invalid naming why;
the command must not have run; the archive must be in the worker's cache under
its SHA-256; the reading process must have had no database variable and no
descriptor but its standard three."""

import hashlib
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

sys.path.insert(0, os.path.join(fbtest.source_dir(), "tests", "inductor"))
import indtest  # noqa: E402


def upload(env, name, data):
    st, _, body = fbtest.http(env.base, "POST", "/api/v1/models?name=" + name, raw=data,
                              headers={"Content-Type": "application/octet-stream",
                                       "X-FusionBench-Client": "e2e"}, timeout=60)
    check(st == 201, "upload %s: %s %s" % (name, st, body))
    return body


def test(env):
    py = indtest.python_or_skip()
    env.start_server([])
    marker = os.path.join(env.tmp, "pwned")
    r = subprocess.run([py, os.path.join(fbtest.source_dir(), "tests", "inductor",
                                         "archives.py"), env.tmp, marker],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "making the archives: %s" % r.stderr[-2000:])
    good = open(os.path.join(env.tmp, "good.pt2"), "rb").read()
    evil = open(os.path.join(env.tmp, "evil_weight.pt2"), "rb").read()
    junk = os.urandom(5000)
    ids = {"good": upload(env, "good", good)["id"], "evil": upload(env, "evil", evil)["id"],
           "junk": upload(env, "junk", junk)["id"],
           "orphan": upload(env, "orphan", good)["id"],
           "dead": upload(env, "dead", good)["id"]}
    env.sql("UPDATE models SET prepare_worker = 'gone/cpu0', prepare_attempt = 1,"
            " prepare_heartbeat_at = now() - interval '1 hour' WHERE id = %d" % ids["orphan"])
    env.sql("UPDATE models SET prepare_worker = 'gone/cpu0', prepare_attempt = 3,"
            " prepare_heartbeat_at = now() - interval '1 hour' WHERE id = %d" % ids["dead"])
    cache = os.path.join(env.tmp, "cache")
    spy = os.path.join(env.tmp, "spy.jsonl")
    env.start_worker(["--model-cache", cache, "--model-cache-mib", "64"],
                     env={"FUSIONBENCH_INDUCTOR_RUNNER": os.path.join(
                         fbtest.source_dir(), "tests", "e2e", "spy_runner.py"),
                          "SPY_OUT": spy, "DATABASE_URL": env.db_url,
                          "PGPASSWORD": "not-for-the-runner"})

    def settled():
        ms = {m["name"]: m for m in env.get("/api/v1/models")[2]["items"]}
        return ms if all(m["status"] != "preparing" for m in ms.values()) else None
    ms = fbtest.wait_until(settled, 300, "every model prepared", 0.5)
    log("statuses: %s" % {n: (m["status"], (m.get("error") or "")[:80]) for n, m in ms.items()})

    g = ms["good"]
    check_eq(g["status"], "ready", "the test model (%s)" % g.get("error"))
    info = g["info"]
    check_eq(info["inputs"], [{"name": "x", "shape": [2, 3, 16, 16], "dtype": "float32",
                               "dynamic_dims": [0]}], "its inputs")
    check(info["parameters"] == 19898 and info["ops"].get("aten.conv2d.default") == 3 and
          info["dynamic_batch"] and info["eager"]["ok"],
          "parameters, ops, dynamic batch, eager: %s" % json.dumps(info)[:600])
    check_eq(fbtest.http(env.base, "GET", "/api/v1/models/%d" % ids["good"])[2]["info"], info,
             "GET /api/v1/models/{id} has the info")
    e = ms["evil"]
    check(e["status"] == "invalid" and "conv1.weight is stored pickled" in e["error"],
          "the pickled weight: invalid, named (%s)" % e.get("error"))
    check(not os.path.exists(marker), "the pickle's command did not run")
    j = ms["junk"]
    check(j["status"] == "invalid" and "not a zip archive" in j["error"],
          "bytes that are not a zip: invalid (%s)" % j.get("error"))
    check_eq(ms["orphan"]["status"], "ready", "a model a gone worker left: prepared again")
    attempts = dict(env.sql("SELECT name, prepare_attempt FROM models"))
    check_eq(attempts["orphan"], "2", "... at its second attempt")
    d = ms["dead"]
    check(d["status"] == "invalid" and "did not finish after 3 attempts" in d["error"],
          "a model whose last attempt went stale: invalid, said so (%s)" % d.get("error"))

    sha = hashlib.sha256(good).hexdigest()
    path = os.path.join(cache, sha + ".pt2")
    check(os.path.isfile(path) and open(path, "rb").read() == good,
          "the archive is in the worker's cache as %s.pt2" % sha[:12])
    check_eq(sorted(os.listdir(cache)),
             sorted(hashlib.sha256(b).hexdigest() + ".pt2" for b in (good, evil, junk)),
             "the cache holds each archive once, by its digest")
    calls = [json.loads(line) for line in open(spy)]
    check_eq(len(calls), 4, "4 archives read (good and orphan are the same bytes, read twice; "
             "the dead one never)")
    for c in calls:
        secret = [k for k in c["env"] if k == "DATABASE_URL" or k.startswith("PG")]
        check(not secret, "the reading process has no database variable (%s)" % secret)
        check(c["fds"][:3] == [0, 1, 2] and len(c["fds"]) <= 4,
              "the reading process holds only its standard descriptors (%s; one is the "
              "listing's own)" % c["fds"])
    log("model preparing: ready with its info, invalid with why, the lease taken over, "
        "nothing run, no credential handed down")


if __name__ == "__main__":
    fbtest.main(test, "model_prepare")
