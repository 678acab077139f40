#!/usr/bin/env python3
"""End to end: Idempotency-Key on POST /api/v1/jobs and /api/v1/suites (issue 15,
docs/API-EXTENSIONS.md "Idempotent submits").

A keyed submit makes its job (201); the same key and body again answers the
first job (200, the same Location, Idempotent-Replayed: true) and stores
nothing; the same key with another body is 422 idempotency_mismatch and
stores nothing; keys are per user (bob's K is not alice's K); a bad key is
400 naming the header.  A user the quota holds (429) still gets a resend's
answer (it creates nothing); a new key is refused.  Eight concurrent submits of one key and body make one
job, and all eight answers name it.  Suites: the same three cases, and a
replayed suite adds no jobs.  The client: `fusionbench submit` through a proxy
that passes its first request to the server and then cuts the connection
before the answer (the job is stored, the answer lost) sends it again with
the same key and prints the one job.

No worker runs (it would take the jobs): a worker row is registered by SQL so
the catalog offers the workload."""

import os
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402
from test_client import client_path  # noqa: E402
from test_submit import beat, count_jobs, register_worker  # noqa: E402

SPEC = {"workload": "gemm_bias_relu", "engine": "native", "device": "cpu",
        "params": {"m": 8, "k": 8, "n": 8}, "iterations": 5, "warmup": 1}


def post(env, path, body, key, token):
    hdrs = {"Authorization": "Bearer " + token}
    if key is not None:
        hdrs["Idempotency-Key"] = key
    return fbtest.http(env.base, "POST", path, body, headers=hdrs)


def t_jobs(env, alice, bob):
    st, h1, j1 = post(env, "/api/v1/jobs", SPEC, "k-1", alice)
    check_eq(st, 201, "first keyed submit: %r" % (j1,))
    check(h1.get("Idempotent-Replayed") is None, "a new job is no replay")
    n = count_jobs(env)
    st, h2, j2 = post(env, "/api/v1/jobs", SPEC, "k-1", alice)
    check_eq(st, 200, "the retry: %r" % (j2,))
    check_eq(j2["id"], j1["id"], "the retry answers the first job")
    check_eq(h2.get("Location"), h1.get("Location"), "the same Location")
    check_eq(h2.get("Idempotent-Replayed"), "true", "Idempotent-Replayed")
    check_eq(count_jobs(env), n, "the retry stored nothing")

    other = dict(SPEC, iterations=6)
    st, _, e = post(env, "/api/v1/jobs", other, "k-1", alice)
    check_eq(st, 422, "same key, another body: %r" % (e,))
    check_eq(e["error"]["code"], "idempotency_mismatch", "its code")
    check_eq(e["error"]["field"], "Idempotency-Key", "its field")
    check_eq(count_jobs(env), n, "a mismatch stores nothing")

    st, _, jb = post(env, "/api/v1/jobs", SPEC, "k-1", bob)
    check_eq(st, 201, "bob's k-1 is his own")
    check(jb["id"] != j1["id"], "bob's job is another job")
    check_eq(env.sql("SELECT count(*) FROM jobs WHERE idem_key = 'k-1'"), [["2"]],
             "one k-1 job per user")

    for bad in ("has space", "x" * 256, "caf\u00e9"):
        try:
            st, _, e = post(env, "/api/v1/jobs", SPEC, bad, alice)
        except (UnicodeEncodeError, ValueError):
            continue  # http.client refuses a non-Latin-1 header before sending
        check_eq(st, 400, "bad key %r: %r" % (bad[:20], e))
        check_eq(e["error"]["field"], "Idempotency-Key", "names the header")
    check_eq(count_jobs(env), n + 1, "bad keys stored nothing")

    st, _, plain = post(env, "/api/v1/jobs", SPEC, None, alice)
    check_eq(st, 201, "a submit without a key")
    st, _, plain2 = post(env, "/api/v1/jobs", SPEC, None, alice)
    check(st == 201 and plain2["id"] != plain["id"], "without a key, each submit is a job")
    log("jobs: new 201, replay 200 same id, mismatch 422, per-user keys, bad keys 400")


def t_concurrent(env, alice):
    answers, lock = [], threading.Lock()

    def one():
        r = post(env, "/api/v1/jobs", SPEC, "k-race", alice)
        with lock:
            answers.append((r[0], r[2].get("id") if isinstance(r[2], dict) else None))
    ts = [threading.Thread(target=one) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    ids = {a[1] for a in answers}
    statuses = sorted(a[0] for a in answers)
    check_eq(len(ids), 1, "eight concurrent keyed submits answer one job: %r" % answers)
    check_eq(statuses, [200] * 7 + [201], "one made it, seven were replays")
    check_eq(env.sql("SELECT count(*) FROM jobs WHERE idem_key = 'k-race'"), [["1"]],
             "one job stored")
    log("8 concurrent submits of one key: statuses %r, one job" % statuses)


def t_suites(env, alice):
    suite = {"name": "idem", "workloads": ["gemm_bias_relu"], "batch_sizes": [1, 2],
             "params": {"m": 8, "k": 8, "n": 8}, "iterations": 5, "warmup": 1}
    st, h1, s1 = post(env, "/api/v1/suites", suite, "s-1", alice)
    check_eq(st, 201, "first keyed suite: %r" % (s1,))
    n = count_jobs(env)
    st, h2, s2 = post(env, "/api/v1/suites", suite, "s-1", alice)
    check_eq(st, 200, "the suite's retry: %r" % (s2,))
    check_eq(s2["id"], s1["id"], "the retry answers the first suite")
    check_eq(h2.get("Idempotent-Replayed"), "true", "Idempotent-Replayed")
    check_eq(count_jobs(env), n, "a replayed suite adds no jobs")
    st, _, e = post(env, "/api/v1/suites", dict(suite, name="other"), "s-1", alice)
    check_eq(st, 422, "same key, another suite: %r" % (e,))
    check_eq(e["error"]["code"], "idempotency_mismatch", "its code")
    check_eq(count_jobs(env), n, "nothing stored")
    check_eq(env.sql("SELECT count(*) FROM suites"), [["1"]], "one suite")
    log("suites: new 201, replay 200 same id and no jobs, mismatch 422")


def read_request(conn):
    """One HTTP request's bytes (headers and Content-Length body), or b''."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":", 1)[1])
    while len(body) < n:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


class LosingProxy:
    """Forwards each connection's one request to the server; the first answer
    is dropped (the connection closed without it), later ones relayed."""

    def __init__(self, port):
        self.port, self.seen = port, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.base = "http://127.0.0.1:%d" % self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                req = read_request(conn)
                self.seen.append(req)
                up = socket.create_connection(("127.0.0.1", self.port))
                line, _, rest = req.partition(b"\r\n")  # the server closes after it
                up.sendall(line + b"\r\nConnection: close\r\n" + rest)
                resp = b""
                while True:
                    chunk = up.recv(65536)
                    if not chunk:
                        break
                    resp += chunk
                up.close()
                if len(self.seen) > 1:
                    conn.sendall(resp)


def t_held(env, alice):
    """A user held by the quota (429) still gets a resend's answer: the resend
    creates nothing, so no limit applies to it; a new key is refused."""
    suite = {"name": "held", "workloads": ["gemm_bias_relu"], "params": {"m": 8, "k": 8, "n": 8},
             "iterations": 5, "warmup": 1}
    st, _, j1 = post(env, "/api/v1/jobs", SPEC, "h-1", alice)
    check_eq(st, 201, "keyed job before the hold: %r" % (j1,))
    st, _, s1 = post(env, "/api/v1/suites", suite, "hs-1", alice)
    check_eq(st, 201, "keyed suite before the hold: %r" % (s1,))
    env.sql("UPDATE users SET held_until = now() + interval '1 hour' WHERE name = 'alice'")
    time.sleep(5.2)  # the server reads a token's user again after 5 s (SRV_AUTH_CACHE_MS)
    n = count_jobs(env)
    st, h, j2 = post(env, "/api/v1/jobs", SPEC, "h-1", alice)
    check_eq((st, j2.get("id"), h.get("Idempotent-Replayed")), (200, j1["id"], "true"),
             "a held user's resend of a job")
    st, h, s2 = post(env, "/api/v1/suites", suite, "hs-1", alice)
    check_eq((st, s2.get("id"), h.get("Idempotent-Replayed")), (200, s1["id"], "true"),
             "a held user's resend of a suite")
    st, _, e = post(env, "/api/v1/jobs", dict(SPEC, iterations=7), "h-1", alice)
    check_eq((st, e["error"]["code"]), (422, "idempotency_mismatch"), "another body, held")
    st, _, e = post(env, "/api/v1/jobs", SPEC, "h-2", alice)
    check_eq((st, e["error"]["code"]), (429, "quota_exceeded"), "a new key, held")
    st, _, e = post(env, "/api/v1/suites", suite, "hs-2", alice)
    check_eq((st, e["error"]["code"]), (429, "quota_exceeded"), "a new suite key, held")
    check_eq(count_jobs(env), n, "nothing stored while held")
    env.sql("UPDATE users SET held_until = NULL WHERE name = 'alice'")
    time.sleep(5.2)
    log("held by the quota: resends answered (200), new keys refused (429)")


def t_client_retry(env, alice):
    proxy = LosingProxy(env.port)
    home = os.path.join(env.tmp, "client-home")
    os.makedirs(home, exist_ok=True)
    e = {k: v for k, v in os.environ.items() if not k.startswith("FUSIONBENCH_")}
    e.update(HOME=home, XDG_CONFIG_HOME=os.path.join(home, "xdg"), FUSIONBENCH_TOKEN=alice)
    n = count_jobs(env)
    r = subprocess.run([client_path(), "--server", proxy.base, "submit", "gemm_bias_relu",
                        "--param", "m=8", "--param", "k=8", "--param", "n=8", "--device", "cpu"],
                       capture_output=True, text=True, timeout=60, env=e)
    check_eq(r.returncode, 0, "submit through a lost answer: %s" % r.stderr)
    check("sending it again" in r.stderr, "the client says it retried: %r" % r.stderr)
    keys = [next(l for l in q.split(b"\r\n") if l.lower().startswith(b"idempotency-key"))
            for q in proxy.seen]
    check_eq(len(proxy.seen), 2, "one lost answer, one retry")
    check_eq(keys[0], keys[1], "the retry carries the first request's key")
    check_eq(count_jobs(env), n + 1, "one job stored")
    jid = int(r.stdout.strip())
    check_eq(env.sql("SELECT count(*) FROM jobs WHERE id = %d AND idem_key IS NOT NULL" % jid),
             [["1"]], "the printed job is the keyed one")
    proxy.sock.close()
    log("client: answer lost, retried with the same key, job %d stored once" % jid)


def run(env):
    env.start_server(["--auth"])
    env.admin("user", "add", "alice", "--role", "user")
    env.admin("user", "add", "bob", "--role", "user")
    alice, bob = env.admin("token", "create", "alice"), env.admin("token", "create", "bob")
    register_worker(env)
    beat(env)
    t_jobs(env, alice, bob)
    t_concurrent(env, alice)
    beat(env)
    t_suites(env, alice)
    t_held(env, alice)
    t_client_retry(env, alice)


if __name__ == "__main__":
    fbtest.main(run, "idempotency")
