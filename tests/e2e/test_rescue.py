#!/usr/bin/env python3
"""End to end: a worker killed mid-job (SIGKILL) loses its lease; a second worker's
rescuer requeues the job after --stale-s and finishes it, exactly once; the dead
worker's job child dies with it (PR_SET_PDEATHSIG)."""

import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def run(env):
    env.start_server()
    a = env.start_worker(["--heartbeat-ms", "200", "--stale-s", "60"])
    jid = env.submit(fbtest.LONG)["id"]
    job = fbtest.wait_timing(env, jid)
    check_eq(job["worker"], a.wid, "worker of attempt 1")
    check_eq(job["attempt"], 1, "attempt while running")
    kids = fbtest.children_of(a.pid)
    check(kids, "worker %d has no job child while running" % a.pid)
    log("killing worker %d (job child %s) in phase %s" % (a.pid, kids, job["progress"]))
    a.send_signal(signal.SIGKILL)
    a.wait()
    fbtest.wait_gone(kids, 5)
    log("job child gone after the worker's SIGKILL")
    job = env.job(jid)
    check_eq(job["state"], "running", "state right after the kill (lease not yet stale)")

    # stale-s 5: a lease of 2.5 s, which a loaded CI machine's heartbeats keep
    # (with 2, a 1 s lease, the rescuing worker lost its own lease twice there).
    b = env.start_worker(["--heartbeat-ms", "200", "--stale-s", "5"])
    job = env.wait_job(jid, timeout=180)
    check_eq(job["state"], "succeeded", "final state (error %r)" % job.get("error"))
    check_eq(job["attempt"], 2, "attempt")
    check_eq(job["worker"], b.wid, "worker of attempt 2")
    rows = env.sql("SELECT count(*), min(attempt), max(attempt) FROM results WHERE job_id = %d"
                   % jid)
    check_eq(rows, [["1", "2", "2"]], "results rows for the job (count, attempts)")
    check(int(env.sql("SELECT count(*) FROM kernels WHERE job_id = %d" % jid)[0][0]) > 0,
          "kernel rows written")
    check(len(job["result"]["variants"][0]["samples_ms"]) ==
          job["result"]["repetition"]["rounds"] >= fbtest.LONG["iterations"],
          "full sample count after the rescue")
    log("job %d succeeded on attempt 2 by %s" % (jid, b.wid))


if __name__ == "__main__":
    fbtest.main(run, "rescue")
