#!/usr/bin/env python3
"""End to end: workers that come and go (docs/DEPLOY.md).

- Scale from zero: before any worker ever registered, the catalog built into the
  server is listed (alive on no device) and a job for it is queued, not refused;
  a name nobody offers is still 422.  A worker started with --exit-when-idle runs
  the job and exits 0 once idle.
- --max-jobs N: exit 0 after N jobs, the rest left queued.
- SIGTERM with --drain-grace: the running job finishes (a stop signal sent to
  the job's own process is ignored: the worker decides), nothing more is claimed,
  the worker shows "draining" meanwhile, exit 0.  Past the grace, or at a second
  signal, the job is released (queued, attempt not consumed).
- POST /api/v1/workers/{id}/drain: an idle worker exits; a busy one finishes its
  job first and claims nothing more; unknown 404, stopped 409.
"""

import os
import signal
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

FAST = ["--heartbeat-ms", "200"]
VERY_LONG = fbtest.VERY_LONG  # runs well past a second's grace


def worker_row(env, wid):
    for w in env.get("/api/v1/workers")[2]["items"]:
        if w["id"] == wid:
            return w
    return None


def wait_exit(p, timeout, what):
    try:
        return p.wait(timeout=timeout)
    except Exception:
        raise fbtest.TestFailure("%s: worker still running after %s s" % (what, timeout))


def t_scale_from_zero(env):
    st, _, body = env.get("/api/v1/workloads")
    check_eq(st, 200, "GET /workloads with no worker ever")
    items = {(w["name"], w["engine"]): w for w in body["items"]}
    soft = items.get(("softmax", "native"))
    check(soft is not None, "built-in catalog lists native softmax: %r" % sorted(items)[:5])
    check("cpu" in soft["devices"], "softmax devices %r" % soft["devices"])
    check_eq(soft["alive_devices"], [], "alive devices with no worker")
    jid = env.submit({"workload": "softmax", "device": "cpu", "iterations": 3})["id"]
    check_eq(env.job(jid)["state"], "queued", "job with no worker: queued")
    st, _, body = env.post("/api/v1/jobs", {"workload": "no_such_model"})
    check_eq(st, 422, "a name nobody offers")
    check_eq(body["error"]["code"], "unknown_workload", "error code")
    t0 = time.monotonic()
    w = env.start_worker(FAST + ["--exit-when-idle", "2"], wait_registered=False)
    job = env.wait_job(jid, timeout=60)
    check_eq(job["state"], "succeeded", "the queued job, once a worker came")
    check_eq(wait_exit(w, 30, "--exit-when-idle"), 0, "exit status after --exit-when-idle")
    took = time.monotonic() - t0
    check(took >= 2.0, "exited after %.1f s, before its idle time" % took)
    check_eq(worker_row(env, w.wid)["state"], "stopped", "state after an idle exit")
    # The worker is gone, the workload stays known: a job for it is queued.
    soft = [x for x in env.get("/api/v1/workloads")[2]["items"] if x["name"] == "softmax"][0]
    check_eq(soft["alive_devices"], [], "alive devices after the worker left")
    log("scale from zero: queued with no worker, run by a worker that then left "
        "(%.1f s)" % took)


def t_max_jobs(env):
    ids = [env.submit(fbtest.SMALL)["id"] for _ in range(2)]
    w = env.start_worker(FAST + ["--max-jobs", "1"], wait_registered=False)
    check_eq(wait_exit(w, 60, "--max-jobs"), 0, "exit status after --max-jobs 1")
    states = sorted(env.job(i)["state"] for i in ids)
    check_eq(states, ["queued", "succeeded"], "states after one worker with --max-jobs 1")
    return [i for i in ids if env.job(i)["state"] == "queued"]


def t_sigterm_drains(env, left):
    w = env.start_worker(FAST + ["--drain-grace", "300"])
    for i in left:  # the previous test's leftover, and nothing else queued
        check_eq(env.wait_job(i, timeout=60)["state"], "succeeded", "leftover job")
    jid = env.submit(VERY_LONG)["id"]
    fbtest.wait_timing(env, jid)
    kids = fbtest.children_of(w.pid)
    check_eq(len(kids), 1, "one job process")
    later = env.submit(fbtest.SMALL)["id"]
    w.send_signal(signal.SIGTERM)
    os.kill(kids[0], signal.SIGTERM)  # as a Slurm step or container would: ignored
    fbtest.wait_until(lambda: (worker_row(env, w.wid) or {}).get("state") == "draining", 10,
                      "the worker to show draining")
    row = worker_row(env, w.wid)
    check(row["draining"] is True, "draining flag %r" % row)
    check_eq(row["current_job"], jid, "the draining worker's job")
    check_eq(wait_exit(w, 420, "drain"), 0, "exit status after a drain")
    job = env.job(jid)
    check_eq(job["state"], "succeeded", "the running job finished within the grace "
             "(error %r)" % job.get("error"))
    check_eq(job["attempt"], 1, "attempt")
    check_eq(env.job(later)["state"], "queued", "nothing claimed while draining")
    log("SIGTERM with grace: job %d finished, job %d left queued" % (jid, later))
    return later


def t_grace_over_releases(env, later):
    w = env.start_worker(FAST + ["--drain-grace", "1"])
    check_eq(env.wait_job(later, timeout=60)["state"], "succeeded", "queued small job")
    jid = env.submit(VERY_LONG)["id"]
    fbtest.wait_timing(env, jid)
    t0 = time.monotonic()
    w.send_signal(signal.SIGTERM)
    check_eq(wait_exit(w, 30, "grace over"), 0, "exit status after the grace")
    took = time.monotonic() - t0
    job = env.job(jid)
    check_eq(job["state"], "queued", "released after the grace")
    check_eq(job["attempt"], 0, "release does not consume the attempt")
    check(1.0 <= took < 10, "released %.1f s after SIGTERM (grace 1 s)" % took)
    # A second signal does not wait for the grace.
    w = env.start_worker(FAST + ["--drain-grace", "600"])
    fbtest.wait_timing(env, jid)
    w.send_signal(signal.SIGTERM)
    time.sleep(0.5)
    check(w.poll() is None, "the worker drains, not stops, at the first signal")
    w.send_signal(signal.SIGTERM)
    check_eq(wait_exit(w, 30, "second signal"), 0, "exit status after a second signal")
    job = env.job(jid)
    check_eq((job["state"], job["attempt"]), ("queued", 0), "released at the second signal")
    log("grace over and second signal: job %d released both times" % jid)
    return jid


def drain_path(wid, escape):
    return "/api/v1/workers/%s/drain" % (urllib.parse.quote(wid, safe="") if escape else wid)


def t_api_drain(env, jid):
    busy = env.start_worker(FAST)
    fbtest.wait_timing(env, jid)
    later = env.submit(fbtest.SMALL)["id"]
    st, _, body = env.post(drain_path(busy.wid, escape=True))
    check_eq(st, 202, "drain a busy worker (%r)" % body)
    check_eq(body, {"id": busy.wid, "draining": True}, "drain answer")
    check_eq(wait_exit(busy, 300, "API drain"), 0, "exit status after an API drain")
    job = env.job(jid)
    check_eq(job["state"], "succeeded", "the job finished before the drained worker left")
    check_eq(env.job(later)["state"], "queued", "nothing claimed after the drain")
    idle = env.start_worker(FAST)
    check_eq(env.wait_job(later, timeout=60)["state"], "succeeded", "job after the drain")
    st, _, _ = env.post(drain_path(idle.wid, escape=False))
    check_eq(st, 202, "drain an idle worker (id with a raw slash)")
    check_eq(wait_exit(idle, 30, "idle drain"), 0, "idle worker's exit after a drain")
    check_eq(worker_row(env, idle.wid)["state"], "stopped", "state after the drain")
    st, _, body = env.post(drain_path(idle.wid, escape=True))
    check_eq((st, body["error"]["code"]), (409, "conflict"), "drain a stopped worker")
    st, _, body = env.post(drain_path("nobody/cpu9", escape=True))
    check_eq((st, body["error"]["code"]), (404, "not_found"), "drain an unknown worker")
    st, _, body = env.post("/api/v1/workers/%s/explode" % urllib.parse.quote(idle.wid, safe=""))
    check_eq(st, 404, "an unknown worker action")
    log("API drain: busy worker finished job %d and left; idle worker left" % jid)


def run(env):
    env.start_server()
    t_scale_from_zero(env)
    left = t_max_jobs(env)
    later = t_sigterm_drains(env, left)
    jid = t_grace_over_releases(env, later)
    t_api_drain(env, jid)


if __name__ == "__main__":
    fbtest.main(run, "lifecycle")
