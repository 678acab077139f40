#!/usr/bin/env python3
"""End to end: rate limits and quotas (issue 13, API-EXTENSIONS.md "Quotas and
rate limits").

A server with --auth --submit-rate 1 --submit-burst 3 and one CPU worker.
- Rate: a token submits 3 at once, the 4th is 429 rate_limited with
  Retry-After: 1; another token has its own bucket; suites count too; a second
  later the token submits again.
- Quota: alice (1 device-hour per rolling 24 h) has used all but 0.1 s of it;
  her first job pushes her over: she is held until the hour leaves the window
  (users/me says so), her other queued jobs stay queued while the worker runs
  bob's, her submits are 429 quota_exceeded with a Retry-After that matches;
  an admin raises her quota and her held jobs run by themselves."""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

SPEC = {"workload": "softmax", "device": "cpu", "iterations": 3}


def call(env, method, path, token, body=None):
    return fbtest.http(env.base, method, path, body=body,
                       headers={"Authorization": "Bearer " + token})


def code_of(b):
    return (b.get("error") or {}).get("code") if isinstance(b, dict) else None


def rate(env, t):
    for i in range(3):
        st, _, b = call(env, "POST", "/api/v1/jobs", t["bob"], SPEC)
        check_eq(st, 201, "bob's submit %d of the burst (%r)" % (i + 1, b))
    st, hd, b = call(env, "POST", "/api/v1/jobs", t["bob"], SPEC)
    check_eq((st, code_of(b)), (429, "rate_limited"), "bob's 4th submit at once")
    check_eq(hd.get("Retry-After"), "1", "Retry-After of the 4th")
    st, _, b = call(env, "POST", "/api/v1/suites", t["bob"], {"workloads": ["softmax"]})
    check_eq((st, code_of(b)), (429, "rate_limited"), "a suite from the same token")
    st, _, b = call(env, "POST", "/api/v1/jobs", t["bob2"], SPEC)
    check_eq(st, 201, "bob's other token has a bucket of its own (%r)" % b)
    # Reads are not limited.
    for _ in range(10):
        check_eq(call(env, "GET", "/api/v1/jobs?limit=1", t["bob"])[0], 200, "a read")
    time.sleep(1.1)
    st, _, b = call(env, "POST", "/api/v1/jobs", t["bob"], SPEC)
    check_eq(st, 201, "bob a second later (%r)" % b)
    log("rate: 3 at once, the 4th 429 rate_limited (Retry-After 1), own bucket per token")


def me(env, token):
    st, _, b = call(env, "GET", "/api/v1/users/me", token)
    check_eq(st, 200, "GET /users/me")
    return b


def quota(env, t):
    alice_id = env.sql("SELECT id FROM users WHERE name = 'alice'")[0][0]
    # Her last 24 h so far: all of her hour but 0.1 s (what the trigger writes
    # when her jobs finish; here set directly, not waited for).
    env.sql("INSERT INTO usage_hours (user_id, hour, shard, seconds) "
            "VALUES (%s, date_trunc('hour', now()), 0, 3599.9)" % alice_id)
    m = me(env, t["alice"])
    check_eq(m["quota"]["device_hours"], 1, "alice's quota")
    check(abs(m["quota"]["used_device_hours"] - 0.99997) < 1e-4, "used: %r" % m["quota"])
    check(m["quota"]["held_until"] is None, "not held yet: %r" % m["quota"])
    jobs = []
    for _ in range(3):
        st, _, b = call(env, "POST", "/api/v1/jobs", t["alice"], SPEC)
        check_eq(st, 201, "alice's submit under her quota (%r)" % b)
        jobs.append(b["id"])
    env.start_worker()
    env.wait_job(jobs[0], ("succeeded",), 120)
    m = fbtest.wait_until(lambda: (lambda x: x if x["quota"]["held_until"] else None)(
        me(env, t["alice"])), 10, "alice held")
    check(m["quota"]["used_device_hours"] >= 1.0, "used past the quota: %r" % m["quota"])
    check_eq(m["quota"]["remaining_device_hours"], 0, "nothing remains")
    want_until = env.sql("SELECT to_char((date_trunc('hour', now()) + interval '24 hours') "
                         "AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS')")[0][0]
    check(m["quota"]["held_until"].startswith(want_until),
          "held until her hour leaves the window: %r, want %s" % (m["quota"]["held_until"],
                                                                 want_until))
    check_eq(m["queued"], 2, "her other jobs wait")
    # The worker is free and runs someone else's job; hers stay queued.
    st, _, b = call(env, "POST", "/api/v1/jobs", t["bob2"], SPEC)
    check_eq(st, 201, "bob submits")
    env.wait_job(b["id"], ("succeeded",), 120)
    time.sleep(1.0)  # a few more idle polls of the worker
    for jid in jobs[1:]:
        check_eq(env.job(jid)["state"], "queued", "alice's held job %d" % jid)

    def refused():
        st, hd, b = call(env, "POST", "/api/v1/jobs", t["alice"], SPEC)
        check(st in (201, 429), "alice's submit while held: %s %r" % (st, b))
        if st == 201:  # within the server's token cache (5 s) of the hold
            jobs.append(b["id"])
            return None
        if code_of(b) == "rate_limited":  # these polls spent her submit rate (1/s,
            return None                   # burst 3) before the hold showed: ask again
        return hd, b
    hd, b = fbtest.wait_until(refused, 12, "alice's submits refused", 1.1)
    check_eq(code_of(b), "quota_exceeded", "the refusal's code")
    left = env.sql("SELECT EXTRACT(EPOCH FROM held_until - now())::integer FROM users "
                   "WHERE name = 'alice'")[0][0]
    check(abs(int(hd["Retry-After"]) - int(left)) <= 6,
          "Retry-After %s vs %s s left of the hold" % (hd["Retry-After"], left))
    # An admin raises her quota: she is free at once and her jobs run.
    env.admin("user", "set", "alice", "--quota-hours", "2")
    for jid in jobs[1:]:
        env.wait_job(jid, ("succeeded",), 120)
    m = me(env, t["alice"])
    check(m["quota"]["held_until"] is None and m["quota"]["remaining_device_hours"] > 0.9,
          "free again: %r" % m["quota"])
    st, _, b = fbtest.wait_until(
        lambda: (lambda r: r if r[0] == 201 else None)(
            call(env, "POST", "/api/v1/jobs", t["alice"], SPEC)), 8, "alice submits again", 0.5)
    st, _, b = call(env, "GET", "/api/v1/users", t["vera"])
    check_eq(st, 200, "a viewer lists the users")
    names = {u["name"]: u for u in b["items"]}
    check_eq(sorted(names), ["alice", "bob", "root", "vera"], "users listed")
    check(names["bob"]["quota"]["device_hours"] is None and
          names["bob"]["quota"]["used_device_hours"] > 0, "bob: no quota, some use: %r" %
          names["bob"])
    log("quota: held past 1 device-hour until %s, queued jobs waited while bob's ran, "
        "429 quota_exceeded with Retry-After; raised, the held jobs ran" % m["quota"])


def run(env):
    env.start_server(["--auth", "--submit-rate", "1", "--submit-burst", "3"])
    env.admin("user", "add", "root", "--role", "admin")
    env.admin("user", "add", "alice", "--role", "user", "--quota-hours", "1")
    env.admin("user", "add", "bob", "--role", "user")
    env.admin("user", "add", "vera", "--role", "viewer")
    t = {n: env.admin("token", "create", n) for n in ("root", "alice", "bob", "vera")}
    t["bob2"] = env.admin("token", "create", "bob")
    env.token = t["vera"]  # the harness's own reads (workers, jobs)
    rate(env, t)
    quota(env, t)


if __name__ == "__main__":
    fbtest.main(run, "quota")
