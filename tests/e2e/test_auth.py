#!/usr/bin/env python3
"""End to end: who may do what (issue 13).

A server with --auth; users made with the admin CLI: an admin, two users (alice,
bob) and a viewer, plus a revoked and an expired token.  A role x action matrix
over the endpoints, each cell the documented status and error code; ownership
(only its owner or an admin cancels a job), owner=me, a priority above 0 only
for admins, a user's timeout clamped; public routes stay public; a server bound
to a non-loopback address turns authentication on by itself; and no token ever
shows in the server's log or the database."""

import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

SPEC = {"workload": "softmax", "device": "cpu", "iterations": 3}


def call(env, method, path, token=None, body=None):
    hdrs = {"Authorization": "Bearer " + token} if token else {}
    st, _, b = fbtest.http(env.base, method, path, body=body, headers=hdrs)
    code = (b.get("error") or {}).get("code") if isinstance(b, dict) else None
    return st, code, b


def expect(env, who, token, method, path, want, body=None):
    st, code, b = call(env, method, path, token, body)
    got = (st, code) if code else st
    check(got == want, "%s %s as %s: got %r, want %r (%r)" % (method, path, who, got, want,
                                                             b if st >= 400 else ""))
    return b


def tokens(env):
    for name, role in (("root", "admin"), ("alice", "user"), ("bob", "user"), ("vera", "viewer")):
        env.admin("user", "add", name, "--role", role)
    t = {name: env.admin("token", "create", name) for name in ("root", "alice", "bob", "vera")}
    t["revoked"] = env.admin("token", "create", "alice")
    env.admin("token", "revoke", t["revoked"][4:16])
    t["expired"] = env.admin("token", "create", "alice", "--expires-days", "1")
    env.sql("UPDATE tokens SET expires_at = now() - interval '1 s' WHERE key_id = '%s'"
            % t["expired"][4:16])
    t["garbage"] = "fbu_AAAAAAAAAAAA_" + "B" * 32
    return t


def matrix(env, t):
    u401 = (401, "unauthenticated")
    f403 = (403, "forbidden")
    for who in ("none", "revoked", "expired", "garbage"):
        tok = t.get(who)
        for method, path in (("GET", "/api/v1/jobs"), ("GET", "/api/v1/workloads"),
                             ("GET", "/api/v1/suites"), ("GET", "/api/v1/results"),
                             ("GET", "/api/v1/users"), ("GET", "/api/v1/users/me"),
                             ("POST", "/api/v1/jobs"), ("POST", "/api/v1/suites")):
            expect(env, who, tok, method, path, u401, SPEC if method == "POST" else None)
    check("Bearer" in str(fbtest.http(env.base, "GET", "/api/v1/jobs")[1].get(
        "WWW-Authenticate")), "401 names the Bearer scheme")
    for who in ("vera", "alice", "root"):
        for path in ("/api/v1/jobs", "/api/v1/workloads", "/api/v1/workers", "/api/v1/suites",
                     "/api/v1/results", "/api/v1/users"):
            expect(env, who, t[who], "GET", path, 200)
        check_eq(expect(env, who, t[who], "GET", "/api/v1/users/me", 200)["name"], who,
                 "users/me names the caller")
    expect(env, "vera", t["vera"], "POST", "/api/v1/jobs", f403, SPEC)
    expect(env, "vera", t["vera"], "POST", "/api/v1/suites", f403, {"workloads": ["softmax"]})
    a = expect(env, "alice", t["alice"], "POST", "/api/v1/jobs", 201, SPEC)
    check_eq(a["owner"], "alice", "a job's owner")
    b = expect(env, "bob", t["bob"], "POST", "/api/v1/jobs", 201, SPEC)
    r = expect(env, "root", t["root"], "POST", "/api/v1/jobs", 201, SPEC)
    s = expect(env, "alice", t["alice"], "POST", "/api/v1/suites", 201,
               {"workloads": ["softmax", "layernorm"], "device": "cpu", "iterations": 2})
    check(all(call(env, "GET", "/api/v1/jobs/%d" % row["job_id"], t["vera"])[2]["owner"] ==
              "alice" for row in s["rows"]), "a suite's jobs are its owner's")
    check_eq(s["owner"], "alice", "a suite's owner")
    expect(env, "bob", t["bob"], "POST", "/api/v1/suites", 201, {"workloads": ["softmax"],
                                                                 "device": "cpu"})
    names = [x["owner"] for x in expect(env, "vera", t["vera"], "GET", "/api/v1/suites", 200)[
        "items"]]
    check_eq(sorted(names), ["alice", "bob"], "suites list their owners")
    mine_s = expect(env, "alice", t["alice"], "GET", "/api/v1/suites?owner=me", 200)["items"]
    check_eq([x["id"] for x in mine_s], [s["id"]], "suites?owner=me: alice's only")
    cancel = "/api/v1/jobs/%d/cancel"
    expect(env, "vera", t["vera"], "POST", cancel % a["id"], f403)
    expect(env, "bob", t["bob"], "POST", cancel % a["id"], f403)
    expect(env, "alice", t["alice"], "POST", cancel % r["id"], f403)
    expect(env, "alice", t["alice"], "POST", cancel % a["id"], 200)
    expect(env, "root", t["root"], "POST", cancel % b["id"], 200)
    expect(env, "alice", t["alice"], "POST", cancel % 999999, (404, "not_found"))
    drain = "/api/v1/workers/nobody%2Fcpu0/drain"
    expect(env, "alice", t["alice"], "POST", drain, f403)
    expect(env, "root", t["root"], "POST", drain, (404, "not_found"))
    # Policy by role.
    expect(env, "alice", t["alice"], "POST", "/api/v1/jobs", f403, dict(SPEC, priority=5))
    expect(env, "root", t["root"], "POST", "/api/v1/jobs", 201, dict(SPEC, priority=5))
    long = expect(env, "alice", t["alice"], "POST", "/api/v1/jobs", 201,
                  dict(SPEC, timeout_s=86400))
    check_eq(long["spec"]["timeout_s"], 3600, "a user's timeout, clamped")
    mine = expect(env, "alice", t["alice"], "GET", "/api/v1/jobs?owner=me&limit=200", 200)
    check(mine["items"] and all(j["owner"] == "alice" for j in mine["items"]),
          "owner=me: alice's jobs only")
    check_eq(len(mine["items"]), 4, "alice's jobs (one, the suite's two, the long one)")
    expect(env, "alice", t["alice"], "GET", "/api/v1/jobs?owner=bob", (400, "invalid_argument"))
    # Public routes.
    for path in ("/healthz", "/readyz", "/metrics", "/", "/static/app.js"):
        check_eq(fbtest.http(env.base, "GET", path)[0], 200, "%s without a token" % path)


def auth_by_bind(env):
    """Bound to an address other than loopback, authentication is on by itself;
    --insecure-no-auth says so by name.  A port taken between free_port() and
    the bind is tried again with another."""
    for attempt in range(3):
        port = fbtest.free_port()
        p = subprocess.Popen([fbtest.find_bin("fusionbench-server"), "--database-url",
                              env.db_url, "--bind", "0.0.0.0", "--port", str(port)],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        base = "http://127.0.0.1:%d" % port
        try:
            def ready():
                if p.poll() is not None:
                    return "exited"
                try:
                    return fbtest.http(base, "GET", "/readyz")[0] == 200
                except OSError:
                    return False
            if fbtest.wait_until(ready, 30, "the 0.0.0.0 server") == "exited":
                out = p.communicate(timeout=20)[0]
                check(attempt < 2 and "in use" in out, "the 0.0.0.0 server exited: %r" %
                      out[-500:])
                continue
            check_eq(fbtest.http(base, "GET", "/api/v1/jobs")[0], 401,
                     "bound to 0.0.0.0: a request without a token")
        finally:
            if p.poll() is None:
                p.terminate()
                out = p.communicate(timeout=20)[0]
        check("authentication on" in out, "the log says authentication is on: %r" % out[-500:])
        return


def run(env):
    env.start_server(["--auth"])
    t = tokens(env)
    matrix(env, t)
    auth_by_bind(env)
    time.sleep(0.2)
    logs = ""
    for _, _, path in env.procs:
        with open(path, errors="replace") as f:
            logs += f.read()
    # The whole database, as pg_dump writes it (schema and every row).
    r = subprocess.run(["pg_dump", "--no-owner", "-d", env.db_url], capture_output=True,
                       text=True, timeout=120)
    check(r.returncode == 0 and "COPY public.tokens" in r.stdout, "pg_dump: %s" % r.stderr)
    dump = r.stdout
    check(t["alice"][4:16] in dump, "the dump holds the key ids (the test can see tokens)")
    answers = ""
    for path in ("/api/v1/users", "/api/v1/users/me", "/api/v1/jobs?limit=200",
                 "/api/v1/suites", "/api/v1/workers", "/metrics"):
        answers += str(call(env, "GET", path, t["root"])[2])
    for name, tok in t.items():
        secret = tok[17:]
        check(secret not in answers, "%s's token is in an API answer" % name)
        check(secret not in logs, "%s's token is in the server's log" % name)
        check(secret not in dump, "%s's token is in the database" % name)
    log("role x action matrix: 401 without/revoked/expired/unknown tokens, 403 by role and "
        "ownership; tokens in neither the log nor the database")


if __name__ == "__main__":
    fbtest.main(run, "auth")
