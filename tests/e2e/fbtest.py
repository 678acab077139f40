"""fbtest: helpers for FusionBench's end-to-end tests (Python standard library only).

Each test file is a script: it exits 0 when it passed, 1 when it failed, and 77
(ctest's skip code) when FB_TEST_DATABASE_URL is unset.  ctest sets FB_BIN_DIR (the
build folder) and FB_SOURCE_DIR.

A test builds an Env: a fresh database of its own on the test cluster (so tests
never see each other's rows), a server on a free port and workers; Env.close()
kills every process it started and drops the database, even when the test failed.
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request

SKIP = 77
TERMINAL = ("succeeded", "failed", "canceled")


class TestFailure(Exception):
    pass


def check(cond, msg):
    """Fails the test with msg when cond is false."""
    if not cond:
        raise TestFailure(msg)


def check_eq(got, want, what):
    if got != want:
        raise TestFailure("%s: got %r, want %r" % (what, got, want))


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def source_dir():
    return os.environ.get("FB_SOURCE_DIR") or os.path.abspath(
        os.path.join(os.path.dirname(__file__), "..", ".."))


def find_bin(name):
    """Path of a built program under FB_BIN_DIR (build/, build/server, build/worker)."""
    root = os.environ.get("FB_BIN_DIR") or os.path.join(source_dir(), "build")
    for sub in ("", "server", "worker", "client", "bin"):
        p = os.path.join(root, sub, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    raise TestFailure("%s not found under %s (build it first)" % (name, root))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def db_url_with_name(url, dbname):
    p = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit((p.scheme, p.netloc, "/" + dbname, p.query, p.fragment))


def psql(url, sql):
    """Runs one statement with psql; returns its rows as lists of strings."""
    r = subprocess.run(["psql", "-X", "-q", "-At", "-F", "\t", "-v", "ON_ERROR_STOP=1",
                        "-d", url, "-c", sql], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise TestFailure("psql failed (%s): %s" % (sql, r.stderr.strip()))
    return [line.split("\t") for line in r.stdout.splitlines() if line != ""]


def http(base, method, path, body=None, headers=None, raw=None, timeout=30):
    """One request.  body is JSON-encoded; raw is sent as is.  Returns
    (status, headers, parsed JSON or text)."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    hdrs = dict(headers or {})
    if data is not None and "Content-Type" not in hdrs:
        hdrs["Content-Type"] = "application/json"
    if method == "POST" and data is None:  # a body-less POST says it is an API call
        hdrs.setdefault("X-FusionBench-Client", "e2e")
    req = urllib.request.Request(base + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, rh, text = r.status, r.headers, r.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as e:
        status, rh, text = e.code, e.headers, e.read().decode("utf-8", "replace")
    ctype = rh.get("Content-Type", "") or ""
    if "json" in ctype:
        try:
            return status, rh, json.loads(text)
        except ValueError:
            raise TestFailure("%s %s: invalid JSON body: %r" % (method, path, text[:200]))
    return status, rh, text


def wait_until(fn, timeout, what, interval=0.1):
    """Calls fn until it returns a true value; returns it, or fails after timeout s."""
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise TestFailure("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)


def children_of(pid):
    """Pids whose parent is pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                st = f.read()
        except OSError:
            continue
        fields = st[st.rfind(")") + 2:].split()
        if int(fields[1]) == pid:
            out.append(int(d))
    return out


def pid_state(pid):
    """The process's state letter from /proc (R, S, T, Z, ...), None when gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            st = f.read()
    except OSError:
        return None
    return st[st.rfind(")") + 2]


def pid_alive(pid):
    """False when the process is gone or a zombie (dead, not yet reaped)."""
    return pid_state(pid) not in (None, "Z", "X")


class Env:
    """A fresh database, a server and workers for one test."""

    def __init__(self, name):
        self.name = name
        self.procs = []  # (label, Popen, log path)
        self.tmp = tempfile.mkdtemp(prefix="fb-e2e-%s-" % name)
        base_url = os.environ["FB_TEST_DATABASE_URL"]
        self.dbname = "e2e_%s_%d" % (name, os.getpid())
        self.admin_url = db_url_with_name(base_url, "postgres")
        psql(self.admin_url, "CREATE DATABASE %s" % self.dbname)
        self.db_url = db_url_with_name(base_url, self.dbname)
        self.port = None
        self.base = None
        self.server = None
        self.n_workers = 0
        self.token = None  # with authentication on: the token get/post/submit send

    def _spawn(self, label, argv, env=None):
        path = os.path.join(self.tmp, "%s.log" % label)
        f = open(path, "wb")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=dict(os.environ, **env) if env else None)
        f.close()
        self.procs.append((label, p, path))
        log("started %s (pid %d): %s" % (label, p.pid, " ".join(argv)))
        return p

    def start_server(self, extra=()):
        self.port = free_port()
        self.base = "http://127.0.0.1:%d" % self.port
        argv = [find_bin("fusionbench-server"), "--database-url", self.db_url,
                "--port", str(self.port), "--web-dir", os.path.join(source_dir(), "web")]
        self.server = self._spawn("server", argv + list(extra))

        def ready():
            check(self.server.poll() is None, "server exited with %s" % self.server.returncode)
            try:
                return self.get("/readyz")[0] == 200
            except (OSError, urllib.error.URLError):
                return False
        wait_until(ready, 60, "server /readyz")
        return self.server

    def cancel(self, jid, may_have_ended=False):
        """Cancels job jid: 200, the job canceled (queued) or on its way to it
        (running: cancel_requested); with may_have_ended a 409 (it finished
        first: a short job on a free worker) is fine too."""
        st, _, body = self.post("/api/v1/jobs/%d/cancel" % jid)
        ok = st == 200 and isinstance(body, dict) and (
            body.get("state") == "canceled" or body.get("cancel_requested") is True)
        check(ok or (may_have_ended and st == 409), "cancel job %d: %s %s" % (jid, st, body))
        return body

    def start_worker(self, extra=(), wid=None, wait_registered=True, env=None, inductor=False):
        """env: variables added to the worker's environment.  inductor: offer
        the inductor engine.  Without it the worker starts with
        FUSIONBENCH_INDUCTOR=0: its probe imports torch, which took 10 s of a
        2-vCPU VM at every worker's start, for tests that run native jobs only."""
        self.n_workers += 1
        wid = wid or "e2e-%s/w%d" % (self.name, self.n_workers)
        argv = [find_bin("fusionbench-worker"), "--database-url", self.db_url,
                "--device", "cpu", "--id", wid, "--poll-ms", "200"]
        if not inductor:
            env = dict(NO_INDUCTOR, **(env or {}))
        p = self._spawn("worker%d" % self.n_workers, argv + list(extra), env)
        if wait_registered:
            def registered():
                check(p.poll() is None, "worker %s exited with %s" % (wid, p.returncode))
                return any(w["id"] == wid for w in self.get("/api/v1/workers")[2]["items"])
            wait_until(registered, 30, "worker %s to register" % wid)
        p.wid = wid
        return p

    def _auth(self, kw):
        if getattr(self, "token", None):  # subclasses may skip __init__
            kw["headers"] = dict(kw.get("headers") or {}, Authorization="Bearer " + self.token)
        return kw

    def get(self, path, **kw):
        return http(self.base, "GET", path, **self._auth(kw))

    def post(self, path, body=None, **kw):
        return http(self.base, "POST", path, body, **self._auth(kw))

    def submit(self, spec):
        st, hd, body = self.post("/api/v1/jobs", spec)
        check(st == 201, "POST /api/v1/jobs %r: %s %s" % (spec, st, body))
        return body

    def job(self, jid):
        st, _, body = self.get("/api/v1/jobs/%d" % jid)
        check(st == 200, "GET job %d: %s %s" % (jid, st, body))
        return body

    def wait_job(self, jid, states=TERMINAL, timeout=60):
        def done():
            j = self.job(jid)
            return j if j["state"] in states else None
        return wait_until(done, timeout, "job %d to reach %s" % (jid, "/".join(states)), 0.1)

    def sql(self, q):
        return psql(self.db_url, q)

    def admin(self, *args):
        """fusionbench-server's admin CLI (user/token ...) on this database; fails
        the test unless it exits 0; returns its stdout, stripped (a new token)."""
        r = subprocess.run([find_bin("fusionbench-server"), "--database-url", self.db_url] +
                           list(args), capture_output=True, text=True, timeout=60)
        check(r.returncode == 0, "fusionbench-server %s: %s" % (" ".join(args), r.stderr))
        return r.stdout.strip()

    def dump_logs(self):
        for label, _, path in self.procs:
            try:
                with open(path, "rb") as f:
                    tail = f.read()[-4000:].decode("utf-8", "replace")
            except OSError:
                continue
            print("---- %s log (%s), last lines ----\n%s" % (label, path, tail), flush=True)

    def close(self, keep_logs=False):
        """Stops every process (SIGTERM, then SIGKILL after 10 s) and drops the
        database; the logs' temp folder goes too unless keep_logs."""
        for label, p, _ in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for label, p, _ in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        try:
            psql(self.admin_url, "DROP DATABASE IF EXISTS %s WITH (FORCE)" % self.dbname)
        except TestFailure as e:
            log("cleanup: %s" % e)
        if keep_logs:
            log("logs kept in %s" % self.tmp)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def main_plain(test_fn, name):
    """Runs test_fn() of a test that needs no database; exits 1 naming the
    failed check (test_fn prints its own PASSED line)."""
    try:
        test_fn()
    except TestFailure as e:
        print("%s: FAILED: %s" % (name, e), flush=True)
        sys.exit(1)


def main(test_fn, name):
    """Runs test_fn(env) with a fresh Env; exits 0/1/77."""
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        print("skipped: FB_TEST_DATABASE_URL not set", flush=True)
        sys.exit(SKIP)
    env = None
    ok = False
    try:
        env = Env(name)
        test_fn(env)
        ok = True
    except Exception:
        traceback.print_exc()
        if env:
            env.dump_logs()
    finally:
        if env:
            env.close(keep_logs=not ok)
    print("%s: %s" % (name, "PASSED" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


# A worker's environment without the inductor engine: its probe at start
# imports torch (10 s of a 2-vCPU VM), wasted where a test runs native jobs only.
NO_INDUCTOR = {"FUSIONBENCH_INDUCTOR": "0"}

# A job for the tests that interrupt a running job at once (default shapes: a
# 512x1024x1024 GEMM with bias and GELU, eager and fused): its timing lasts
# about a second on an idle 2-vCPU VM, more on a loaded one.
# FB_E2E_LONG_ITERATIONS tunes it for other machines.
LONG = {"workload": "gemm_bias_gelu", "warmup": 1,
        "iterations": int(os.environ.get("FB_E2E_LONG_ITERATIONS", "150")),
        "labels": {"kind": "long"}}
# A job that runs well past a few seconds even on a fast machine: what is
# checked while it runs must not race its end (a process that finished is as
# gone as one killed).  No extra rounds (time_budget_s 0): its length is its
# rounds', which must end within a drain's grace on a slow, loaded machine too
# (with adaptive repetition, 10 x LONG's rounds ran past 120 s on a 2-vCPU VM).
VERY_LONG = dict(LONG, iterations=4 * LONG["iterations"], params={"time_budget_s": 0})
# A job that finishes well under two seconds.
SMALL = {"workload": "gemm_bias_relu", "params": {"m": 64, "k": 64, "n": 64},
         "warmup": 2, "iterations": 20}


def wait_timing(env, jid, timeout=60):
    """Waits until job jid is running and its progress shows the timing phase."""
    def timing():
        j = env.job(jid)
        check(j["state"] in ("queued", "running"), "job %d ended early: %s %s" %
              (jid, j["state"], j.get("error")))
        p = j.get("progress") or {}
        return j if j["state"] == "running" and p.get("phase") == "timing" else None
    return wait_until(timing, timeout, "job %d to be timing" % jid, 0.05)


def wait_gone(pids, timeout=5):
    wait_until(lambda: not any(pid_alive(p) for p in pids), timeout,
               "processes %s to be gone" % pids)
