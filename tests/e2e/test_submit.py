#!/usr/bin/env python3
"""End to end: POST /api/v1/jobs through the submit batcher (group commit).

Concurrent submits are each answered with their own job (body, Location, every
field) and stored once; a 201 comes only after the job's commit (submits held
behind a table lock get no answer until it goes, then share few commits); a
database session cut fails at most one submit with 503 (never stored) and the
next ones work; SIGTERM with submits waiting drains them: each one is either stored
or answered 503, and the server exits 0.

No worker runs (it would take the jobs): a worker row is registered by SQL, as
bench/submit.sh does, so the catalog offers the workload."""

import os
import re
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

WORKLOAD = ('{"name":"gemm_bias_relu","engine":"native","domain":"pattern",'
            '"description":"GEMM + bias + ReLU","default_batch_size":1,"devices":["cpu"],'
            '"dtypes":["float32"],"variants":["eager","fused"]}')


def register_worker(env):
    env.sql("INSERT INTO workers (id, host, device, engines, workloads) VALUES "
            "('e2e-submit/noop0', 'e2e', '{\"kind\":\"cpu\",\"name\":\"e2e\"}', "
            "'[\"native\"]', jsonb_build_array('%s'::jsonb))" % WORKLOAD)


def beat(env):
    """Keeps the registered worker live in the catalog (stale after 60 s)."""
    env.sql("UPDATE workers SET last_heartbeat = now()")


def spec(t, i, priority=0):
    return {"workload": "gemm_bias_relu", "engine": "native", "device": "cpu",
            "batch_size": 1 + i % 4, "priority": priority, "iterations": 5 + i, "warmup": 1,
            "params": {"m": 8 + t, "k": 8, "n": 8 + i}, "labels": {"t": str(t), "i": str(i)}}


def count_jobs(env):
    return int(env.sql("SELECT count(*) FROM jobs")[0][0])


def metric(env, name, admin=False):
    """A metric's value from /metrics; admin: from the admin listener (a
    thread of its own), not the public one."""
    if admin:
        st, _, text = fbtest.http("http://127.0.0.1:%d" % env.admin_port, "GET", "/metrics")
    else:
        st, _, text = env.get("/metrics")
    check_eq(st, 200, "/metrics")
    m = re.search(r"^%s (\d+)$" % name, text, re.M)
    check(m, "/metrics lacks %s" % name)
    return int(m.group(1))


def post_many(env, specs, answered=None):
    """POSTs every spec at once, one thread each; returns [(status, headers, body)].
    With a list `answered`, its k-th item becomes the wall-clock time (time.time())
    at which the k-th answer came."""
    out = [None] * len(specs)

    def one(k):
        try:
            out[k] = env.post("/api/v1/jobs", specs[k], timeout=60)
        except OSError as e:  # the server may close a connection when it stops
            out[k] = (None, {}, str(e))
        if answered is not None:
            answered[k] = time.time()
    threads = [threading.Thread(target=one, args=(k,)) for k in range(len(specs))]
    for th in threads:
        th.start()
    return threads, out


def check_created(resp, sp, what):
    st, hdrs, body = resp
    check_eq(st, 201, what + " status (body %r)" % (body,))
    check_eq(hdrs.get("Location"), "/api/v1/jobs/%d" % body["id"], what + " Location")
    check_eq(body["state"], "queued", what + " state")
    for k, v in sp.items():
        check_eq(body["spec"][k], v, what + " spec." + k)
    check_eq(body["attempt"], 0, what + " attempt")
    check_eq(body["max_attempts"], 3, what + " max_attempts")
    check(body["created_at"] and body["started_at"] is None, what + " timestamps")
    return body["id"]


def t_concurrent(env, threads=16, per_thread=25):
    beat(env)
    specs = [spec(t, i) for t in range(threads) for i in range(per_thread)]
    ids = []
    for start in range(0, len(specs), threads):  # rounds of `threads` at once
        chunk = specs[start:start + threads]
        ths, out = post_many(env, chunk)
        for th in ths:
            th.join()
        for sp, resp in zip(chunk, out):
            ids.append(check_created(resp, sp, "submit %s" % sp["labels"]))
    check_eq(len(set(ids)), len(specs), "distinct ids")
    check_eq(count_jobs(env), len(specs), "jobs stored")
    rows = env.sql("SELECT id, spec->'labels'->>'t', spec->'labels'->>'i', batch_size,"
                   " (spec->>'iterations')::int FROM jobs ORDER BY id")
    by_id = {int(r[0]): r for r in rows}
    for sp, jid in zip(specs, ids):
        r = by_id[jid]
        check_eq((r[1], r[2], int(r[3]), int(r[4])),
                 (sp["labels"]["t"], sp["labels"]["i"], sp["batch_size"], sp["iterations"]),
                 "stored row of job %d" % jid)
    log("%d concurrent submits: each its own job, stored once" % len(specs))


def hold_jobs_lock(env):
    """A psql session that holds a lock blocking every INSERT into jobs until
    release_jobs_lock: its transaction waits on the session's standard input
    (a fixed pg_sleep was shorter than a loaded machine's pauses)."""
    p = subprocess.Popen(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", env.db_url],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    p.stdin.write("BEGIN;\nLOCK TABLE jobs IN SHARE MODE;\n")
    p.stdin.flush()

    def held():
        return env.sql("SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation"
                       " WHERE c.relname = 'jobs' AND l.mode = 'ShareLock' AND l.granted"
                       )[0][0] != "0"
    fbtest.wait_until(held, 20, "the jobs lock")
    return p


def release_jobs_lock(p):
    """Commits the lock's transaction; returns the wall-clock time (epoch seconds,
    this host's clock) taken just before the commit: nothing the lock held back
    can have been answered before it."""
    out, err = p.communicate("SELECT extract(epoch FROM clock_timestamp());\nCOMMIT;\n",
                             timeout=30)
    check_eq(p.returncode, 0, "lock holder exit status (%s)" % err.strip())
    return float(out.split()[-1])


def drop_jobs_lock(p):
    """After a failed check: ends the lock's session (its transaction rolls
    back), so that nothing waits on the lock after the test."""
    if p.poll() is None:
        p.kill()
        p.communicate()


def t_commit_before_answer(env):
    beat(env)
    before_jobs, before_batches = count_jobs(env), metric(env, "fusionbench_submit_batches_total")
    locker = hold_jobs_lock(env)
    try:
        t0 = time.time()
        specs = [spec(100, i, priority=i % 5) for i in range(16)]
        answered = [None] * len(specs)
        ths, out = post_many(env, specs, answered)
        time.sleep(1.5)
        check(all(o is None for o in out), "a submit was answered before its commit: %r" %
              [o[0] for o in out if o])
        released = release_jobs_lock(locker)
    finally:
        drop_jobs_lock(locker)
    for th in ths:
        th.join()
    for sp, resp in zip(specs, out):
        check_created(resp, sp, "submit behind the lock %s" % sp["labels"])
    first = min(answered)
    check(first >= released, "an answer came %.3fs before the lock went" % (released - first))
    waited = max(answered) - t0
    check_eq(count_jobs(env), before_jobs + len(specs), "jobs stored")
    batches = metric(env, "fusionbench_submit_batches_total") - before_batches
    # Group commit: far fewer commits than submits.  Not one or two: the first
    # submit commits on its own connection (the batcher was idle), which holds
    # its HTTP thread, so the other connections on that thread (16 over 6
    # threads) are read only once the lock goes, and each may catch a commit
    # of its own.
    check(1 <= batches <= 6, "16 submits held behind one commit took %d commits" % batches)
    log("16 submits behind a lock: answered after %.2fs in %d commits" % (waited, batches))


def t_connection_lost(env, pool=4):
    """Every database session of the server is cut.  A stale session fails the
    insert it was given (503: an insert is never retried, it may have
    committed), at most once each: the server's pool (default 4) and the
    batcher's own; then every submit works, and what got 201 is stored.  The
    pool hands out the session used last, so a stale one can wait many
    submits for its turn: the submits go on until 4 in a row succeed."""
    beat(env)
    before = count_jobs(env)
    env.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name = 'fusionbench'"
            " AND pid <> pg_backend_pid()")
    statuses = []
    for i in range(2 * (pool + 8)):
        sp = spec(200, i)
        resp = env.post("/api/v1/jobs", sp)
        statuses.append(resp[0])
        if resp[0] == 503:
            check_eq(resp[2]["error"]["code"], "unavailable", "503 code")
        else:
            check_created(resp, sp, "submit after the cut")
        if len(statuses) >= pool + 8 and statuses[-4:] == [201] * 4:
            break
    check(statuses.count(503) <= pool + 1 and statuses[-4:] == [201] * 4,
          "statuses after the cut: %r" % statuses)
    check_eq(count_jobs(env), before + statuses.count(201), "jobs stored = jobs answered 201")
    log("sessions cut: statuses %r" % statuses)


def server_log(env):
    with open(os.path.join(env.tmp, "server.log"), errors="replace") as f:
        return f.read()


def unanswered(env):
    """Public connections with a request the server has not answered, or not
    read yet (its thread may be busy with another connection's commit); read
    on the admin listener, which a busy public thread cannot hold up."""
    return metric(env, "fusionbench_http_connections_unanswered", admin=True)


def t_sigterm_drains(env):
    """SIGTERM while 8 submits wait behind a lock on jobs, and a 9th comes in
    during the stop: the server creates and answers every one before it exits.
    The 9th commits on its own connection (the batcher has stopped), holding
    its HTTP thread and any connection that thread serves: the stop waits for
    those answers too, not just the batcher's.  On a server of its own: the
    cut above may have left stale sessions in the pool, and a stale session
    fails the insert it is given (503)."""
    env.server.send_signal(signal.SIGTERM)
    check_eq(env.server.wait(timeout=30), 0, "idle server's exit status after SIGTERM")
    start_server(env)
    beat(env)
    before = count_jobs(env)
    locker = hold_jobs_lock(env)
    try:
        specs = [spec(300, i) for i in range(8)]
        ths, out = post_many(env, specs)
        fbtest.wait_until(lambda: unanswered(env) >= len(specs), 30, "8 submits in the server")
        env.server.send_signal(signal.SIGTERM)
        fbtest.wait_until(lambda: "signal 15: stopping" in server_log(env), 10, "the stop")
        late = [spec(300, 8)]
        late_ths, late_out = post_many(env, late)
        fbtest.wait_until(lambda: unanswered(env) >= len(specs) + 1, 30, "the 9th submit in")
        time.sleep(0.5)  # the server drains: it waits for the inserts held back
        check(env.server.poll() is None, "the server exited while its inserts were held back")
        release_jobs_lock(locker)
    finally:
        drop_jobs_lock(locker)
    rc = env.server.wait(timeout=30)
    check_eq(rc, 0, "server exit status after SIGTERM")
    for th in ths + late_ths:
        th.join()
    specs += late
    out += late_out
    statuses = [o[0] for o in out]
    check_eq(statuses, [201] * len(specs), "statuses of the submits drained at stop (%r)" %
             [o[2] for o in out if o[0] != 201])
    check_eq(count_jobs(env) - before, len(specs), "jobs stored")
    for sp, o in zip(specs, out):
        jid = check_created(o, sp, "submit drained at stop")
        check_eq(env.sql("SELECT count(*) FROM jobs WHERE id = %d" % jid), [["1"]],
                 "job %d stored" % jid)
    log("SIGTERM with 8 submits waiting and 1 during the stop: all %d answered 201 and "
        "stored, exit 0" % len(specs))


def start_server(env):
    env.admin_port = fbtest.free_port()
    env.start_server(["--admin-port", str(env.admin_port)])


def run(env):
    start_server(env)
    register_worker(env)
    t_concurrent(env)
    jobs = metric(env, "fusionbench_submit_jobs_total")
    batches = metric(env, "fusionbench_submit_batches_total")
    check_eq(jobs, count_jobs(env), "fusionbench_submit_jobs_total")
    check(1 <= batches <= jobs, "batches %d for %d jobs" % (batches, jobs))
    log("so far %d jobs in %d commits" % (jobs, batches))
    t_commit_before_answer(env)
    t_connection_lost(env)
    t_sigterm_drains(env)


if __name__ == "__main__":
    fbtest.main(run, "submit")
