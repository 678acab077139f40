#!/usr/bin/env python3
"""End to end: scripts/backup.sh (issue 15; docs/DEPLOY.md "Backup and restore").

A server and a worker run two jobs to success and leave one queued (no worker
by then); backup.sh dump writes the database to a file.  A fresh PostgreSQL
cluster (scripts/pg.sh, another port and folder) gets backup.sh restore; a
server started on it serves the same jobs and the same results, byte for byte
as JSON, and the queued job is still queued.  A restore into a database that
has tables is refused and changes nothing; a dump never overwrites a file."""

import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def script(*args, env=None):
    return subprocess.run([os.path.join(fbtest.source_dir(), "scripts", a) if i == 0 else a
                           for i, a in enumerate(args)], capture_output=True, text=True,
                          timeout=300, env=env)


def snapshot(env, ids):
    """What a client sees of the jobs: each job's JSON, and the results listing."""
    jobs = {}
    for i in ids:
        st, _, body = env.get("/api/v1/jobs/%d" % i)
        check_eq(st, 200, "GET job %d" % i)
        jobs[i] = body
    st, _, results = env.get("/api/v1/results?limit=50")
    check_eq(st, 200, "GET results")
    return jobs, results


def run(env):
    env.start_server()
    worker = env.start_worker()
    ids = [env.submit(dict(fbtest.SMALL, labels={"n": str(k)}))["id"] for k in range(2)]
    for i in ids:
        check_eq(env.wait_job(i, timeout=120)["state"], "succeeded", "job %d" % i)
    worker.terminate()
    worker.wait(timeout=30)
    queued = env.submit(dict(fbtest.SMALL, labels={"n": "queued"}))["id"]
    before = snapshot(env, ids + [queued])
    check_eq(before[0][queued]["state"], "queued", "the third job waits")

    tmp = tempfile.mkdtemp(prefix="fb-backup-")
    os.chmod(tmp, 0o755)  # pg.sh hands its folder to the postgres user as root
    dump = os.path.join(tmp, "fusionbench.dump")
    r = script("backup.sh", "dump", env.db_url, dump)
    check_eq(r.returncode, 0, "dump: %s" % r.stderr)
    check(os.path.getsize(dump) > 0, "a dump was written")
    r = script("backup.sh", "dump", env.db_url, dump)
    check(r.returncode != 0 and "exists" in r.stderr, "a dump never overwrites: %s" % r.stderr)

    pgdir = os.path.join(tmp, "pg")
    port = str(fbtest.free_port())
    pe = dict(os.environ, FB_PG_FAST="1")
    r = script("pg.sh", "start", pgdir, port, env=pe)
    check_eq(r.returncode, 0, "a fresh cluster: %s" % r.stderr)
    url = r.stdout.strip().splitlines()[-1]
    try:
        r = script("backup.sh", "restore", dump, url)
        check_eq(r.returncode, 0, "restore: %s" % r.stderr)
        log(r.stderr.strip())
        r = script("backup.sh", "restore", dump, url)
        check(r.returncode != 0 and "already has" in r.stderr,
              "a second restore into it is refused: %s" % r.stderr)
        env.db_url = url  # a server on the restored database
        env.start_server()
        after = snapshot(env, ids + [queued])
        for i in ids + [queued]:
            check_eq(after[0][i], before[0][i], "job %d as served after the restore" % i)
        check_eq(after[1], before[1], "the results listing after the restore")
        log("restored into a fresh cluster: %d jobs and the results listing served the same"
            % len(after[0]))
    finally:
        script("pg.sh", "stop", pgdir, env=pe)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    fbtest.main(run, "backup")
