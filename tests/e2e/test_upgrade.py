#!/usr/bin/env python3
"""End to end: today's server and workers on a database the previous release
made (issue 15, upgrade safety).

The previous release's schema is every migration but the newest, applied as
its server applied them (each file in a transaction, recorded in
schema_migrations); migrations never change once released (a new one is
added instead), so db/migrations/ without its last file is what the previous
release left.  On it, jobs in every state, written with that schema's
columns: queued, running (a worker of the old release that died: its heartbeat
an hour old), succeeded with its result (a real one, from fusionbench-run), failed
and canceled.  Then today's server migrates it and today's worker runs: every job
is still there, the queued one and the dead worker's one finish (the latter
rescued, attempt 2), the finished ones are served as they were."""

import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def previous_release(env):
    files = sorted(glob.glob(os.path.join(fbtest.source_dir(), "db", "migrations", "*.sql")))
    check(len(files) >= 2, "migrations to upgrade from")
    env.sql("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())")
    for f in files[:-1]:
        name = os.path.basename(f)[:-4]
        version = int(re.match(r"(\d+)_", name).group(1))
        sql = open(f).read()
        r = subprocess.run(["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "--single-transaction",
                            "-d", env.db_url], input=sql + "\nINSERT INTO schema_migrations "
                           "(version, name) VALUES (%d, '%s');\n" % (version, name),
                           capture_output=True, text=True, timeout=120)
        check_eq(r.returncode, 0, "applying %s: %s" % (name, r.stderr))
    return len(files) - 1, len(files)


def q(s):
    return "'" + s.replace("'", "''") + "'"


def run(env):
    old, new = previous_release(env)
    r = subprocess.run([fbtest.find_bin("fusionbench-run"), "gemm_bias_relu", "--param", "m=64",
                        "--param", "k=64", "--param", "n=64", "--iterations", "20",
                        "--warmup", "2", "--json"], capture_output=True, text=True, timeout=120)
    check_eq(r.returncode, 0, "a real result: %s" % r.stderr)
    out = json.loads(r.stdout)
    spec, result = json.dumps(out["spec"]), json.dumps(out["result"])
    cols = "spec, workload, engine, device, dtype, batch_size, timeout_s"
    vals = "%s::jsonb, 'gemm_bias_relu', 'native', 'cpu', 'float32', 1, 600" % q(spec)
    ids = {}
    for state, extra_cols, extra_vals in [
            ("queued", "", ""),
            ("running", ", state, attempt, worker, heartbeat_at, started_at",
             ", 'running', 1, 'old-host/w0', now() - interval '1 hour',"
             " now() - interval '1 hour'"),
            ("succeeded", ", state, attempt, worker, started_at, finished_at",
             ", 'succeeded', 1, 'old-host/w0', now() - interval '2 hours',"
             " now() - interval '2 hours'"),
            ("failed", ", state, attempt, error, finished_at",
             ", 'failed', 3, '{\"code\": \"crashed\", \"message\": \"old\"}', now()"),
            ("canceled", ", state, finished_at", ", 'canceled', now()")]:
        ids[state] = int(env.sql("INSERT INTO jobs (%s%s) VALUES (%s%s) RETURNING id" %
                                 (cols, extra_cols, vals, extra_vals))[0][0])
    env.sql("INSERT INTO results (job_id, attempt, result) VALUES (%d, 1, %s::jsonb)" %
            (ids["succeeded"], q(result)))
    log("previous release: migrations 1..%d, jobs %r" % (old, ids))

    env.start_server()
    check_eq(env.sql("SELECT max(version) FROM schema_migrations"), [[str(new)]],
             "today's server migrated it")
    before = {s: env.job(i) for s, i in ids.items()}
    check_eq(before["succeeded"]["result"], out["result"], "the old result is served")
    env.start_worker()
    for s in ("queued", "running"):
        j = env.wait_job(ids[s], timeout=180)
        check_eq(j["state"], "succeeded", "the %s job finished: %r" % (s, j.get("error")))
    check_eq(env.job(ids["running"])["attempt"], 2, "the dead worker's job ran again")
    for s in ("succeeded", "failed", "canceled"):
        j = env.job(ids[s])
        check_eq((j["state"], j["finished_at"], j.get("result"), j.get("error")),
                 (before[s]["state"], before[s]["finished_at"], before[s].get("result"),
                  before[s].get("error")), "the %s job as it was" % s)
    check_eq(env.sql("SELECT count(*) FROM jobs"), [["5"]], "every job still there")
    log("upgraded %d -> %d: queued and rescued jobs succeeded, finished ones unchanged"
        % (old, new))


if __name__ == "__main__":
    fbtest.main(run, "upgrade")
