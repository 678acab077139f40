#!/usr/bin/env python3
"""fbapi.py: the FusionBench REST calls of tests/deploy/test_slurm.sh (standard
library only).  Every command talks to BASE (http://127.0.0.1:PORT) only, prints
what the shell needs on stdout, and exits 0 when its check held, 1 otherwise
(the reason on stderr).

  fbapi.py ready BASE TIMEOUT                   wait for /readyz = 200
  fbapi.py workers BASE TIMEOUT ID...           wait until every ID is listed, state idle
  fbapi.py submit BASE JSON [COUNT]             submit COUNT copies; print the ids
  fbapi.py wait-timing BASE JOB TIMEOUT         wait for state running, progress.phase
                                                timing; print "WORKER ATTEMPT"
  fbapi.py watch-release BASE JOB WORKER ATTEMPT TIMEOUT
        after the holder was stopped: poll every 50 ms until the job leaves WORKER;
        fail if it failed or was counted as an attempt; print what was seen
  fbapi.py wait-all BASE TIMEOUT JOB...         wait until every job is terminal; fail
                                                unless all succeeded
  fbapi.py job BASE JOB                         print the job's "state worker attempt"
"""

import json
import sys
import time
import urllib.error
import urllib.request

TERMINAL = ("succeeded", "failed", "canceled")


def fail(msg):
    print("fbapi: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def call(base, method, path, body=None, timeout=10):
    if not base.startswith("http://127.0.0.1:"):
        fail("refusing to talk to %s: 127.0.0.1 only" % base)
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"} if data else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode("utf-8", "replace")
    try:
        return status, json.loads(text) if text else None
    except ValueError:
        return status, text


def job(base, jid):
    st, j = call(base, "GET", "/api/v1/jobs/%d" % jid)
    if st != 200:
        fail("GET job %d: %s %s" % (jid, st, j))
    return j


def until(fn, timeout, what, interval=0.1):
    end = time.monotonic() + timeout
    while True:
        try:
            v = fn()
        except (OSError, urllib.error.URLError):
            v = None
        if v:
            return v
        if time.monotonic() > end:
            fail("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def cmd_ready(base, timeout):
    until(lambda: call(base, "GET", "/readyz")[0] == 200, float(timeout), "/readyz")


def cmd_workers(base, timeout, *ids):
    def ok():
        st, body = call(base, "GET", "/api/v1/workers")
        if st != 200:
            return None
        states = {w["id"]: w.get("state") for w in body["items"]}
        return all(states.get(i) == "idle" for i in ids) and states
    states = until(ok, float(timeout), "workers %s to be idle" % ", ".join(ids), 0.25)
    for i in ids:
        print("%s %s" % (i, states[i]))


def cmd_submit(base, spec, count="1"):
    spec = json.loads(spec)
    ids = []
    for _ in range(int(count)):
        st, body = call(base, "POST", "/api/v1/jobs", spec)
        if st != 201:
            fail("POST /api/v1/jobs %s: %s %s" % (spec, st, body))
        ids.append(str(body["id"]))
    print(" ".join(ids))


def cmd_wait_timing(base, jid, timeout):
    def ok():
        j = job(base, int(jid))
        if j["state"] in TERMINAL:
            fail("job %s ended (%s) before it was seen timing" % (jid, j["state"]))
        phase = (j.get("progress") or {}).get("phase")
        return j["state"] == "running" and phase == "timing" and j
    j = until(ok, float(timeout), "job %s to be running, phase timing" % jid, 0.05)
    print("%s %s" % (j["worker"], j["attempt"]))


def cmd_watch_release(base, jid, worker, attempt, timeout):
    jid, attempt = int(jid), int(attempt)
    seen = []
    end = time.monotonic() + float(timeout)
    while True:
        j = job(base, jid)
        key = (j["state"], j["worker"], j["attempt"])
        if not seen or seen[-1] != key:
            seen.append(key)
        if j["state"] in ("failed", "canceled"):
            fail("job %d went %s after its worker was stopped: %s" % (jid, j["state"], seen))
        if j["state"] == "queued" and j["attempt"] != attempt - 1:
            fail("job %d requeued with attempt %s, want %d (a released job's attempt is not "
                 "counted): %s" % (jid, j["attempt"], attempt - 1, seen))
        if (j["state"] in ("running", "succeeded") and j["worker"] != worker):
            break
        if time.monotonic() > end:
            fail("timed out after %ss: job %d still with %s: %s" % (timeout, jid, worker, seen))
        time.sleep(0.05)
    if j["attempt"] != attempt:
        fail("job %d: taken over by %s with attempt %s, want %d (released, not failed or "
             "rescued): %s" % (jid, j["worker"], j["attempt"], attempt, seen))
    queued = any(s[0] == "queued" for s in seen)
    print("%s %s" % (j["worker"], "queued-seen" if queued else "queued-not-seen"))
    print("fbapi: job %d states seen: %s" % (jid, " -> ".join("%s/%s/attempt %s" % s for s in seen)),
          file=sys.stderr)


def cmd_wait_all(base, timeout, *jids):
    jids = [int(j) for j in jids]
    done = {}

    def ok():
        for jid in jids:
            if jid not in done:
                j = job(base, jid)
                if j["state"] in TERMINAL:
                    done[jid] = j
        return len(done) == len(jids)
    until(ok, float(timeout), "%d jobs to finish" % len(jids), 0.25)
    bad = {jid: j["state"] for jid, j in done.items() if j["state"] != "succeeded"}
    if bad:
        for jid in bad:
            print("fbapi: job %d: %s" % (jid, json.dumps(done[jid].get("error"))), file=sys.stderr)
        fail("not all jobs succeeded: %s" % bad)
    per = {}
    for j in done.values():
        per[j["worker"]] = per.get(j["worker"], 0) + 1
    print(" ".join("%s=%d" % kv for kv in sorted(per.items())))


def cmd_job(base, jid):
    j = job(base, int(jid))
    print("%s %s %s" % (j["state"], j["worker"], j["attempt"]))


COMMANDS = {"ready": cmd_ready, "workers": cmd_workers, "submit": cmd_submit,
            "wait-timing": cmd_wait_timing, "watch-release": cmd_watch_release,
            "wait-all": cmd_wait_all, "job": cmd_job}

if __name__ == "__main__":
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    COMMANDS[sys.argv[1]](*sys.argv[2:])
