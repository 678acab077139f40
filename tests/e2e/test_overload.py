#!/usr/bin/env python3
"""End to end: under overload every request gets an answer.

1. A burst of 500 submits at once from one address, each on its own
   connection with its own Idempotency-Key: every one is answered, 201 or 503
   with Retry-After and the JSON error, none reset; sent again with the same
   key after Retry-After, all 500 land, each once.
2. The command-line client: 60 `fusionbench submit` at once against a server
   whose per-client cap of 8 is held by 8 requests in flight for 1.5 s: every
   one exits 0 (it retries 503 with its key), 60 jobs land, each once.
3. 200 stalled sockets from one address: /healthz on the admin listener
   answers in under a second, and the public listener answers a second address.
4. Behind a small proxy on 127.0.0.1 that connects from 127.0.0.3 and adds
   X-Forwarded-For: two clients' caps are separate when the proxy is trusted
   (--trusted-proxies 127.0.0.3) and shared when it is not; a forged header
   from an untrusted sender changes nothing.
5. params.weights that names a file by an absolute path, with "..", with a
   NUL or a leading dot: 400 at submit naming the field, nothing queued.

No worker runs: the jobs wait in the queue."""

import http.client
import json
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

SPEC = {"workload": "softmax", "params": {"rows": 8, "cols": 8}, "iterations": 3,
        "labels": {"test": "overload"}}


def post_once(port, spec, key, source="127.0.0.1"):
    """One submit on its own connection: (status, Retry-After, body) or
    ("reset", None, error) when the connection was reset or closed unanswered."""
    body = json.dumps(spec).encode()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=60, source_address=(source, 0))
    try:
        c.request("POST", "/api/v1/jobs", body=body,
                  headers={"Content-Type": "application/json", "Idempotency-Key": key})
        r = c.getresponse()
        return r.status, r.getheader("Retry-After"), r.read()
    except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected) as e:
        return "reset", None, repr(e)
    finally:
        c.close()


def queued(env):
    return int(env.sql("SELECT count(*) FROM jobs WHERE spec->'labels'->>'test' = 'overload'")[0][0])


def t_burst(env, n=500):
    keys = [uuid.uuid4().hex for _ in range(n)]
    first = [None] * n
    gate = threading.Barrier(n)
    t0 = time.monotonic()

    def one(i):
        gate.wait()
        first[i] = post_once(env.port, SPEC, keys[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    burst_s = time.monotonic() - t0
    resets = [r for r in first if r[0] == "reset"]
    check(not resets, "%d of %d submits got no answer (reset): %r" % (len(resets), n, resets[:3]))
    other = [r for r in first if r[0] not in (201, 503)]
    check(not other, "answers other than 201 and 503: %r" % other[:3])
    refused = [r for r in first if r[0] == 503]
    for st, after, body in refused:
        check(after == "1", "503 without Retry-After: %r" % (body,))
        check_eq(json.loads(body)["error"]["code"], "unavailable", "the 503's JSON error")
    # Whether the burst meets the cap depends on how fast the server answers
    # (here from 0 to 415 of 500 were refused, run to run); the cap's 503 is
    # checked for certain below, with the cap held (t_client, t_proxy).
    log("burst of %d: %d x 201, %d x 503 + Retry-After, 0 resets, in %.2f s"
        % (n, n - len(refused), len(refused), burst_s))

    ids = [None] * n
    for i, r in enumerate(first):
        if r[0] == 201:
            ids[i] = json.loads(r[2])["id"]

    refused_again = [0] * n  # a retry can meet the cap too, and is counted

    def retry(i):
        tries = 1
        while ids[i] is None:
            time.sleep(1 + random.random())  # Retry-After, spread
            st, _, body = post_once(env.port, SPEC, keys[i])
            tries += 1
            check(st in (201, 503), "a retried submit: %r %r" % (st, body))
            if st == 503:
                refused_again[i] += 1
            if st == 201:
                ids[i] = json.loads(body)["id"]
            check(tries < 60, "submit %d still refused after %d tries" % (i, tries))

    threads = [threading.Thread(target=retry, args=(i,)) for i in range(n) if ids[i] is None]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check_eq(len(set(ids)), n, "distinct jobs after retries")
    check_eq(queued(env), n, "jobs in the queue (each once)")
    st, _, text = fbtest.http(env.admin_base, "GET", "/metrics")
    n_refused = len(refused) + sum(refused_again)
    counted = {m.group(1): int(m.group(2)) for m in
               re.finditer(r'^fusionbench_http_refused_total\{cap="(\w+)"\} (\d+)$', text, re.M)}
    check_eq(sum(counted.values()), n_refused,
             "/metrics' refusals %r against %d in the burst and %d of the retries"
             % (counted, len(refused), sum(refused_again)))
    log("with retries under the same keys: %d jobs, each once (%d retries refused again)"
        % (n, sum(refused_again)))


def t_client(env, n=60):
    cli = fbtest.find_bin("fusionbench")
    envv = dict(os.environ, FUSIONBENCH_URL=env.base)
    before = queued(env)
    held = [hold(env.port, "127.0.0.1") for _ in range(8)]  # the cap of 8, held for 1.5 s
    time.sleep(0.3)
    procs = [subprocess.Popen([cli, "--json", "submit", "softmax", "--param", "rows:=8",
                               "--param", "cols:=8", "--iterations", "3", "--label",
                               "test=overload"],
                              env=envv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(n)]
    time.sleep(1.5)
    for h in held:
        h.close()
    outs = [p.communicate(timeout=300) for p in procs]
    bad = [(p.returncode, e[-300:]) for p, (_, e) in zip(procs, outs) if p.returncode != 0]
    check(not bad, "client submits that failed: %r" % bad[:3])
    retried = sum(1 for _, e in outs if "sending it again" in e)
    ids = {json.loads(o)["id"] for o, _ in outs}
    check_eq(len(ids), n, "distinct jobs from the client")
    check_eq(queued(env) - before, n, "client jobs in the queue (each once)")
    check(retried > 0, "no client met the cap of 8 (none retried)")
    log("%d clients at once, cap 8 held: all exit 0, %d retried a 503, %d jobs each once"
        % (n, retried, n))


def t_stalled(env, n=200):
    held = []
    try:
        for _ in range(n):
            s = socket.create_connection(("127.0.0.1", env.port), timeout=10)
            held.append(s)
        time.sleep(0.5)
        t0 = time.monotonic()
        st, _, _ = fbtest.http(env.admin_base, "GET", "/healthz", timeout=5)
        took = time.monotonic() - t0
        check_eq(st, 200, "/healthz on the admin listener with %d stalled sockets" % n)
        check(took < 1.0, "/healthz on the admin listener took %.3f s" % took)
        c = http.client.HTTPConnection("127.0.0.1", env.port, timeout=5,
                                       source_address=("127.0.0.2", 0))
        c.request("GET", "/healthz")
        check_eq(c.getresponse().status, 200, "the public listener from a second address")
        c.close()
        st, _, _ = fbtest.http(env.admin_base, "GET", "/api/v1/jobs")
        check_eq(st, 404, "the admin listener serves no API")
    finally:
        for s in held:
            s.close()
    log("%d stalled sockets: admin /healthz in %.0f ms, a second address served"
        % (n, took * 1e3))


class Proxy:
    """A proxy on 127.0.0.1 that connects on from 127.0.0.3 and adds
    X-Forwarded-For: <its client's address> to every request's headers."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, addr = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self.pipe, args=(c, addr[0]), daemon=True).start()

    def pipe(self, c, client):
        up = socket.socket()
        up.bind(("127.0.0.3", 0))
        up.connect(("127.0.0.1", self.upstream))
        head = b""
        while b"\r\n" not in head:
            got = c.recv(4096)
            if not got:
                break
            head += got
        line, _, rest = head.partition(b"\r\n")
        up.sendall(line + b"\r\nX-Forwarded-For: " + client.encode() + b"\r\n" + rest)

        def copy(a, b):
            try:
                while True:
                    d = a.recv(65536)
                    if not d:
                        break
                    b.sendall(d)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=copy, args=(up, c), daemon=True).start()
        copy(c, up)

    def close(self):
        self.sock.close()


def hold(port, source, headers=b""):
    """A request in flight: a POST whose body never comes (until closed)."""
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"POST /api/v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
              b"\r\nContent-Length: 100\r\n" + headers + b"\r\n{")
    return s


def status_of(port, source, headers=b""):
    s = socket.socket()
    s.bind((source, 0))
    s.settimeout(10)
    s.connect(("127.0.0.1", port))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
    answer = s.recv(4096)
    s.close()
    return int(answer.split()[1]) if answer else None


def t_proxy(env):
    results = {}
    for trusted in (True, False):
        env.stop_server()
        extra = ["--client-conn-limit", "4", "--admin-port", str(env.admin_port)]
        if trusted:
            extra += ["--trusted-proxies", "127.0.0.3"]
        env.start_server(extra)
        proxy = Proxy(env.port)
        held = []
        try:
            for _ in range(4):  # client A's four requests in flight, through the proxy
                held.append(hold(proxy.port, "127.0.0.10"))
            time.sleep(0.3)
            a = status_of(proxy.port, "127.0.0.10")
            b = status_of(proxy.port, "127.0.0.11")
            forged = status_of(env.port, "127.0.0.10", b"X-Forwarded-For: 127.0.0.11\r\n")
            results[trusted] = (a, b, forged)
        finally:
            for s in held:
                s.close()
            proxy.close()
    check_eq(results[True][:2], (503, 200),
             "trusted proxy: A over its cap, B served (A, B, forged) %r" % (results[True],))
    check_eq(results[True][2], 503,
             "A sending a forged X-Forwarded-For directly is still A: %r" % (results[True],))
    check_eq(results[False][:2], (503, 503),
             "untrusted proxy: one cap for everyone behind it %r" % (results[False],))
    log("behind a proxy: trusted %r, untrusted %r (A, B, A forging B)"
        % (results[True], results[False]))


def t_weights(env):
    before = queued(env)
    for name in ("/etc/passwd", "../../etc/passwd", "a/../b", "a\u0000b", ".hidden", "a//b"):
        spec = dict(SPEC, workload="resnet18", params={"weights": name})
        st, _, body = env.post("/api/v1/jobs", spec)
        check_eq(st, 400, "params.weights %r" % name)
        if "\u0000" not in name:  # a NUL is refused by the body's parser, first
            check_eq(body["error"].get("field"), "params.weights", "the field named for %r" % name)
    check_eq(queued(env), before, "nothing queued for a weights name of a bad form")
    log("params.weights by path, '..', NUL, leading dot, empty part: 400 at submit")


def run(env):
    env.admin_port = fbtest.free_port()
    env.admin_base = "http://127.0.0.1:%d" % env.admin_port
    orig_start = env.start_server

    def stop_server():
        env.server.terminate()
        env.server.wait(timeout=30)
    env.stop_server = stop_server
    orig_start(["--admin-port", str(env.admin_port)])
    t_weights(env)
    t_burst(env)
    t_stalled(env)
    stop_server()
    orig_start(["--admin-port", str(env.admin_port), "--client-conn-limit", "8"])
    t_client(env)
    t_proxy(env)


if __name__ == "__main__":
    fbtest.main(run, "overload")
