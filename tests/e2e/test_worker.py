#!/usr/bin/env python3
"""End to end: the worker's job lifecycle.  SIGTERM mid-job releases the job
(back to queued, attempt not consumed) and another worker completes it; a job over
its timeout_s fails with code "timeout" and the worker goes on; a running job that
is canceled ends canceled."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


def t_sigterm_releases(env):
    a = env.start_worker(["--heartbeat-ms", "200"])
    jid = env.submit(fbtest.LONG)["id"]
    fbtest.wait_timing(env, jid)
    kids = fbtest.children_of(a.pid)
    a.terminate()
    check_eq(a.wait(timeout=30), 0, "worker exit status after SIGTERM")
    fbtest.wait_gone(kids, 5)
    job = env.job(jid)
    check_eq(job["state"], "queued", "state after the worker's SIGTERM")
    check_eq(job["attempt"], 0, "attempt after release (not consumed)")
    log("job %d released by SIGTERM" % jid)
    b = env.start_worker(["--heartbeat-ms", "200"])
    job = env.wait_job(jid, timeout=180)
    check_eq(job["state"], "succeeded", "state (error %r)" % job.get("error"))
    check_eq(job["attempt"], 1, "attempt of the completed job")
    check_eq(job["worker"], b.wid, "completing worker")
    return b


def t_timeout(env, w):
    spec = dict(fbtest.LONG, timeout_s=1)
    jid = env.submit(spec)["id"]
    job = env.wait_job(jid, timeout=60)
    check_eq(job["state"], "failed", "state of a job over its timeout")
    check_eq((job.get("error") or {}).get("code"), "timeout", "error code")
    check_eq(job["attempt"], 1, "a timeout is not retried")
    check(job.get("result") is None, "no result for a timed-out job")
    jid = env.submit(fbtest.SMALL)["id"]
    job = env.wait_job(jid, timeout=30)
    check_eq(job["state"], "succeeded", "next job after a timeout")
    check(w.poll() is None, "worker still running after a timeout")
    log("timeout ok; the worker went on")


def t_cancel_running(env, w):
    jid = env.submit(fbtest.LONG)["id"]
    fbtest.wait_timing(env, jid)
    kids = fbtest.children_of(w.pid)
    st, _, body = env.post("/api/v1/jobs/%d/cancel" % jid)
    check_eq(st, 200, "cancel a running job")
    job = env.wait_job(jid, timeout=20)
    check_eq(job["state"], "canceled", "state after cancel")
    check(job.get("result") is None, "no result for a canceled job")
    check(job["finished_at"], "finished_at set")
    fbtest.wait_gone(kids, 5)
    jid = env.submit(fbtest.SMALL)["id"]
    check_eq(env.wait_job(jid, timeout=30)["state"], "succeeded", "next job after a cancel")
    check(w.poll() is None, "worker still running after a cancel")
    log("cancel of a running job ok")


def t_memory_budget(env):
    """A job past the worker's memory budget fails alone (issue 13, item 6):
    three 8192 x 8192 matrices and their packed copies need over 768 MiB; with
    --job-memory-mib 512 the allocation fails in the job's process, the job ends
    out of memory (not by its timeout, which it would reach if it ran), and the
    worker runs the next job."""
    w = env.start_worker(["--job-memory-mib", "512"], wid="e2e-worker/budget")
    big = {"workload": "gemm_bias_relu", "params": {"m": 8192, "k": 8192, "n": 8192},
           "warmup": 1, "iterations": 2, "timeout_s": 120}
    job = env.wait_job(env.submit(big)["id"], timeout=150)
    err = (job.get("error") or {})
    statuses = [v.get("status") for v in (job.get("result") or {}).get("variants", [])]
    check(err.get("code") in ("out_of_memory", "oom", "crashed") or
          (statuses and all(s == "oom" for s in statuses)),
          "a job past its memory budget: %s, error %r, variants %r" % (job["state"], err, statuses))
    check(err.get("code") != "timeout", "the budget did not stop it: it ran to its timeout")
    jid = env.submit(fbtest.SMALL)["id"]
    check_eq(env.wait_job(jid, timeout=60)["state"], "succeeded", "the next job on that worker")
    check(w.poll() is None, "worker still running after a job over its budget")
    log("job over its 512 MiB budget: %s %s; the worker went on"
        % (job["state"], err.get("code") or statuses))


def t_spec_without_defaults(env, w):
    """A spec gets its defaults once, at submit: the worker runs stored specs as
    they are and fails one queued without them (put in by hand here), naming
    the first unset field; nothing is retried and the worker goes on."""
    rows = env.sql("INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, timeout_s)"
                   " VALUES ('{\"workload\": \"gemm_bias_relu\"}'::jsonb, 'gemm_bias_relu',"
                   " 'native', 'cpu', 'float32', 1, 60) RETURNING id")
    job = env.wait_job(int(rows[0][0]), timeout=60)
    err = job.get("error") or {}
    check_eq(job["state"], "failed", "a spec without its defaults")
    check("engine is unset" in (err.get("message") or ""), "the error names the field: %r" % err)
    check_eq(job["attempt"], 1, "a spec without defaults is not retried")
    jid = env.submit(fbtest.SMALL)["id"]
    check_eq(env.wait_job(jid, timeout=30)["state"], "succeeded", "next job after it")
    check(w.poll() is None, "worker still running")
    log("a spec queued without its defaults: failed (%s: %s)" % (err.get("code"),
                                                                  err.get("message")))


def t_param_not_taken(env, w):
    """A param the workload does not take is refused at submit (docs/API.md);
    one queued past that check (by hand here: a job from an older server, or
    a catalog that declared no params) fails at the worker, naming it, and
    is not retried: run, it would have been ignored."""
    spec = dict(fbtest.SMALL, params=dict(fbtest.SMALL["params"], image_size=112))
    st, _, body = env.post("/api/v1/jobs", spec)
    check_eq((st, body["error"]["field"]), (400, "params.image_size"), "refused at submit")
    done = env.wait_job(env.submit(fbtest.SMALL)["id"], timeout=30)  # its resolved spec
    check_eq(done["state"], "succeeded", "the same job without it")
    stored = dict(done["spec"], params=dict(done["spec"]["params"], image_size=112))
    rows = env.sql("INSERT INTO jobs (spec, workload, engine, device, dtype, batch_size, timeout_s)"
                   " VALUES ('%s'::jsonb, 'gemm_bias_relu', 'native', 'cpu', 'float32', 1, 60)"
                   " RETURNING id" % json.dumps(stored))
    job = env.wait_job(int(rows[0][0]), timeout=60)
    err = job.get("error") or {}
    check_eq(job["state"], "failed", "a queued job with a param its workload lacks")
    check("params.image_size is not a parameter of gemm_bias_relu" in (err.get("message") or ""),
          "the error names the param: %r" % err)
    check_eq(job["attempt"], 1, "not retried")
    log("a param the workload lacks, queued: failed (%s: %s)" % (err.get("code"),
                                                                err.get("message")))


def run(env):
    env.start_server()
    w = t_sigterm_releases(env)
    t_timeout(env, w)
    t_cancel_running(env, w)
    t_spec_without_defaults(env, w)
    t_param_not_taken(env, w)
    w.terminate()
    w.wait(timeout=30)
    t_memory_budget(env)


if __name__ == "__main__":
    fbtest.main(run, "worker")
