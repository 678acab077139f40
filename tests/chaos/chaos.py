#!/usr/bin/env python3
"""chaos: FusionBench on a cluster of network namespaces under a seeded schedule of
faults, then proof from the database, the API and the workers' own logs that no
job was lost, none ran on two workers at once, and no stale attempt wrote.

Hosts are Linux network namespaces the run makes and removes (`ip netns`),
joined by veth pairs to a bridge inside a namespace of its own: `db`
(PostgreSQL), `api1` and `api2` (servers, tokens on), `w1`-`w4` (CPU workers)
and `ctl` (this harness and its clients).  No interface is added to the host's
own namespace; traffic stays on that private bridge.

Phase A runs a tenth of the jobs without faults (the throughput without
faults).  Phase B submits the rest along the schedule's progress (a tenth
ahead as a backlog), and a burst of 4 at each server kill, through both
servers, by clients that send every submit with an Idempotency-Key and
resend it (to either server) while answers are lost, while the schedule
injects, per kind, at least --faults-per-kind faults:

  kill_worker   SIGKILL a worker (its job process dies with it), restarted 1 s on
  kill_child    SIGKILL a worker's job process (the job is retried: `killed`)
  kill_server   SIGKILL a server in the middle of a submit burst aimed at it,
                restarted 1 s on
  partition     a worker host's link down for longer than --stale-s, then up
  pg_fast       PostgreSQL stopped (-m fast) and started again
  pg_immediate  PostgreSQL stopped (-m immediate: crash recovery) and started
  freeze        a worker and its job process SIGSTOPped past --stale-s, then
                continued (the worker first) as soon as the job runs its next
                attempt elsewhere, so its late writes meet the fence alone
  skew          a worker restarted (SIGTERM, it hands its job back) under
                libfaketime with its wall clock off by minutes to a day

The schedule comes from --seed and is printed first; the same arguments
replay it.  At the end the run checks (any failure exits 1):

  * every key a client sent maps to exactly one job, the one it was answered;
    the database holds no other job;
  * every job is succeeded, or failed having spent its max_attempts on lost
    leases or killed processes; none queued or running;
  * a succeeded job has exactly one result, written by its last attempt, and
    exactly one accepted completion in all the workers' logs, by that attempt
    (none when that attempt's worker was SIGKILLed between its commit and its
    log line); attempts never exceed max_attempts;
  * no job ran on two workers at once: per job, each attempt's run (from the
    worker's "running" line to its "job process ended" line, or to the SIGKILL
    of its worker; clock skew undone; a run its lease's timer killed ends at
    the lease's end) ends before the next attempt's starts;
  * every write a worker's log says the fence refused belongs to an attempt
    that was no longer the job's; they are counted and printed; and no
    failure a worker's log says was accepted came after the next attempt
    began (a stale attempt's write let through);
  * both servers answered /readyz 503 while PostgreSQL was down and 200 again
    after, by themselves.

Figures (markdown on stdout, and figures.json in --out): jobs, faults by kind,
refused stale writes by kind, time to rescue a job whose worker was killed,
cut off or frozen (p50/p99), PostgreSQL recovery time, throughput with and
without faults.

Needs root (namespaces), iproute2, PostgreSQL's server binaries, libfaketime
and the built programs (FB_BIN_DIR, default build/); exits 77 (skipped) when one
is missing.
"""

import argparse
import calendar
import glob
import http.client
import json
import math
import os
import pwd
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "e2e"))
import fbtest  # noqa: E402

SKIP = 77
KINDS = ("kill_worker", "kill_child", "kill_server", "partition", "pg_fast", "pg_immediate",
         "freeze", "skew")
WORKERS = ("w1", "w2", "w3", "w4")
SERVERS = ("api1", "api2")
HOSTS = ("db",) + SERVERS + WORKERS + ("ctl",)
PORT = 8080
SKEWS = (90, -90, 600, -600, 7200, -7200, 86400, -86400)  # seconds
FAKETIME_LIBS = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
                 "/usr/lib/faketime/libfaketime.so.1")


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


class Failure(Exception):
    pass


def run(argv, check=True, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise Failure("%s: exit %d: %s" % (" ".join(argv), r.returncode,
                                           (r.stderr or r.stdout).strip()[-800:]))
    return r


def pct(values, p):
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100.0
    lo, hi = math.floor(k), math.ceil(k)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def pg_bindir():
    try:
        d = run(["pg_config", "--bindir"]).stdout.strip()
        if os.path.exists(os.path.join(d, "pg_ctl")):
            return d
    except (OSError, Failure):
        pass
    for d in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.exists(os.path.join(d, "pg_ctl")) and os.path.exists(os.path.join(d, "initdb")):
            return d
    return None


def faketime_lib():
    for p in FAKETIME_LIBS:
        if os.path.exists(p):
            return p
    return None


# ---------------------------------------------------------------- the schedule

LONG = ("partition", "freeze")


def make_schedule(seed, per_kind, stale_s, duration):
    """The fault plan: [{at, kind, host, hold, ...}], at (s from phase B's start)
    increasing.  A worker host carries one fault at a time; at most two worker
    hosts are cut off or frozen at once (two keep working); PostgreSQL restarts
    one at a time.  Deterministic in its arguments."""
    rng = random.Random(seed)
    events = [k for k in KINDS for _ in range(per_kind)]
    rng.shuffle(events)
    busy = {h: 0.0 for h in WORKERS + SERVERS + ("db",)}
    long_until = []  # end times of running long faults
    plan, t = [], 0.0
    gap = max(0.2, duration / max(1, len(events)) * 0.5) if duration else 0.5
    for kind in events:
        t += rng.uniform(0.5 * gap, 1.5 * gap)
        if kind in ("pg_fast", "pg_immediate"):
            hold = round(rng.uniform(0.3, 1.5), 2)
            t = max(t, busy["db"])
            busy["db"] = t + hold + 4.0
            plan.append({"at": round(t, 2), "kind": kind, "host": "db", "hold": hold})
            continue
        if kind == "kill_server":
            host = rng.choice(SERVERS)
            t = max(t, busy[host])
            busy[host] = t + 3.0
            plan.append({"at": round(t, 2), "kind": kind, "host": host, "hold": 1.0})
            continue
        hold = {"kill_worker": 1.0, "kill_child": 0.0, "skew": 0.0}.get(kind) or round(
            stale_s + rng.uniform(2.0, 5.0), 2)
        cost = {"kill_worker": 2.0, "kill_child": 0.5, "skew": 3.0}.get(kind, hold + 1.0)
        if kind in LONG:
            long_until = sorted(e for e in long_until if e > t)
            if len(long_until) >= 2:
                t = long_until[0]
                long_until = long_until[1:]
        free = [h for h in WORKERS if busy[h] <= t]
        if not free:
            t = min(busy[h] for h in WORKERS)
            free = [h for h in WORKERS if busy[h] <= t]
        host = rng.choice(free)
        busy[host] = t + cost
        ev = {"at": round(t, 2), "kind": kind, "host": host, "hold": hold}
        if kind == "skew":
            ev["skew_s"] = rng.choice(SKEWS)
        if kind in LONG:
            long_until.append(t + cost)
        plan.append(ev)
    return plan


# ---------------------------------------------------------------- the network

class Net:
    """The namespaces and the bridge; made in the host's namespace, removed there."""

    def __init__(self, tag, octet):
        self.tag, self.octet = tag, octet
        self.made = []

    def ns(self, host):
        return "%s-%s" % (self.tag, host)

    def addr(self, host):
        return "10.231.%d.%d" % (self.octet, HOSTS.index(host) + 2)

    def up(self):
        sw = self.ns("sw")
        run(["ip", "netns", "add", sw])
        self.made.append(sw)
        run(["ip", "-n", sw, "link", "set", "lo", "up"])
        run(["ip", "-n", sw, "link", "add", "br0", "type", "bridge"])
        run(["ip", "-n", sw, "link", "set", "br0", "up"])
        for i, h in enumerate(HOSTS):
            ns = self.ns(h)
            run(["ip", "netns", "add", ns])
            self.made.append(ns)
            run(["ip", "-n", ns, "link", "set", "lo", "up"])
            run(["ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name",
                 "p%d" % i, "netns", sw])
            run(["ip", "-n", ns, "addr", "add", self.addr(h) + "/24", "dev", "eth0"])
            run(["ip", "-n", ns, "link", "set", "eth0", "up"])
            run(["ip", "-n", sw, "link", "set", "p%d" % i, "master", "br0", "up"])

    def down(self):
        for ns in reversed(self.made):
            run(["ip", "netns", "del", ns], check=False)
        self.made = []


def sweep_stale_namespaces():
    """Removes namespaces an earlier run left when it was killed (its pid gone)."""
    r = run(["ip", "netns", "list"], check=False)
    for line in r.stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = re.match(r"^fbc(\d+)-", name)
        if m and not os.path.exists("/proc/%s" % m.group(1)):
            run(["ip", "netns", "del", name], check=False)


# ---------------------------------------------------------------- the cluster

class Cluster:
    def __init__(self, args, tag, octet, out):
        self.args, self.tag, self.octet, self.out = args, tag, octet, out
        self.net = Net(tag, octet)
        self.bindir = pg_bindir()
        self.pgdir = os.path.join(out, "pg")
        self.sock = os.path.join(out, "pgsock")
        self.db_url = "postgresql://postgres@%s:5432/fusionbench" % self.net.addr("db")
        self.local_url = "postgresql://postgres@/fusionbench?host=%s" % self.sock
        self.servers = {}  # host -> Popen
        self.workers = {}  # host -> Popen
        self.incarnations = []  # dicts: host, n, pid, log, skew_s, killed_at
        self.skew = {h: 0 for h in WORKERS}
        self.lock = threading.Lock()
        self.token = None
        self.faketime = faketime_lib()

    # -- helpers
    def in_ns(self, host, argv):
        return ["ip", "netns", "exec", self.net.ns(host)] + argv

    def as_pg(self, argv):
        return ["runuser", "-u", "postgres", "--"] + argv if os.geteuid() == 0 else argv

    def sql(self, q):
        return fbtest.psql(self.local_url, q)

    # -- PostgreSQL on host db
    def pg_init(self):
        os.makedirs(self.sock, exist_ok=True)
        os.makedirs(self.pgdir, exist_ok=True)
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for d in (self.out, self.pgdir, self.sock):
                os.chown(d, pw.pw_uid, pw.pw_gid)
        data = os.path.join(self.pgdir, "data")
        run(self.as_pg([os.path.join(self.bindir, "initdb"), "-D", data, "-E", "UTF8",
                        "--locale=C", "--auth-local=trust", "--auth-host=trust", "-U",
                        "postgres"]))
        with open(os.path.join(data, "postgresql.conf"), "a") as f:
            f.write("listen_addresses = '%s'\nport = 5432\nunix_socket_directories = '%s'\n"
                    "max_connections = 200\nlogging_collector = off\n"
                    "shared_buffers = 64MB\n" % (self.net.addr("db"), self.sock))
        with open(os.path.join(data, "pg_hba.conf"), "a") as f:
            f.write("host all all 10.231.%d.0/24 trust\n" % self.octet)
        self.pg_start()
        fbtest.psql(self.local_url.replace("/fusionbench", "/postgres"),
                    "CREATE DATABASE fusionbench")

    def pg_start(self):
        data = os.path.join(self.pgdir, "data")
        run(self.in_ns("db", self.as_pg([os.path.join(self.bindir, "pg_ctl"), "-D", data,
                                         "-l", os.path.join(self.pgdir, "log"), "-w", "-t",
                                         "60", "start"])))

    def pg_stop(self, mode):
        data = os.path.join(self.pgdir, "data")
        run(self.as_pg([os.path.join(self.bindir, "pg_ctl"), "-D", data, "-m", mode, "-w",
                        "-t", "60", "stop"]), check=False)

    # -- servers
    def start_server(self, host):
        logf = open(os.path.join(self.out, "logs", "%s.%d.log" % (host, len(
            [i for i in self.incarnations if i["host"] == host]))), "ab")
        argv = self.in_ns(host, [fbtest.find_bin("fusionbench-server"), "--database-url",
                                 self.db_url, "--bind", self.net.addr(host), "--port",
                                 str(PORT), "--auth", "--submit-rate", "0", "--allowed-hosts",
                                 "", "--web-dir", os.path.join(fbtest.source_dir(), "web")])
        p = subprocess.Popen(argv, stdout=logf, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        logf.close()
        with self.lock:
            self.servers[host] = p
            self.incarnations.append({"host": host, "pid": p.pid, "log": logf.name})
        return p

    def readyz(self, host, timeout=2.0):
        try:
            c = http.client.HTTPConnection(self.net.addr(host), PORT, timeout=timeout)
            c.request("GET", "/readyz")
            st = c.getresponse().status
            c.close()
            return st
        except OSError:
            return None

    def wait_ready(self, host, timeout=60):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.readyz(host) == 200:
                return time.monotonic()
            time.sleep(0.05)
        raise Failure("server %s not ready after %d s" % (host, timeout))

    # -- workers
    def start_worker(self, host):
        n = len([i for i in self.incarnations if i["host"] == host])
        path = os.path.join(self.out, "logs", "%s.%d.log" % (host, n))
        # native jobs only: no inductor probe (it imports torch, 10 s of a
        # 2-vCPU VM at each of the many restarts)
        env = dict(os.environ, **fbtest.NO_INDUCTOR)
        skew = self.skew[host]
        if skew:
            env.update({"LD_PRELOAD": self.faketime, "FAKETIME": "%+ds" % skew,
                        "FAKETIME_DONT_FAKE_MONOTONIC": "1", "DONT_FAKE_MONOTONIC": "1",
                        "FAKETIME_NO_CACHE": "1"})
        a = self.args
        argv = self.in_ns(host, [fbtest.find_bin("fusionbench-worker"), "--database-url",
                                 self.db_url, "--device", "cpu", "--id", host, "--poll-ms",
                                 "200", "--heartbeat-ms", str(a.heartbeat_ms), "--stale-s",
                                 str(a.stale_s), "--drain-grace", "5"])
        f = open(path, "ab")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             env=env)
        f.close()
        with self.lock:
            self.workers[host] = p
            self.incarnations.append({"host": host, "n": n, "pid": p.pid, "log": path,
                                      "skew_s": skew, "killed_at": None, "worker": True})
        return p

    def incarnation(self, pid):
        for i in self.incarnations:
            if i["pid"] == pid:
                return i
        return None

    def running_job(self, host):
        rows = self.sql("SELECT id, attempt FROM jobs WHERE state = 'running' AND worker = '%s'"
                        % host)
        return [(int(r[0]), int(r[1])) for r in rows]

    def down(self):
        """Stops every process (continued first: a frozen one cannot die) and
        PostgreSQL; the outer run removes the namespaces."""
        with self.lock:
            procs = list(self.workers.values()) + list(self.servers.values())
        for p in procs:
            for pid in [p.pid] + fbtest.children_of(p.pid):
                try:
                    os.kill(pid, signal.SIGCONT)
                except OSError:
                    pass
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        if self.bindir and os.path.exists(os.path.join(self.pgdir, "data", "PG_VERSION")):
            self.pg_stop("immediate")


# ---------------------------------------------------------------- clients

class Clients:
    """Submitters: every submit carries a fresh Idempotency-Key and is resent,
    with the same key and body, to either server until one answers it."""

    def __init__(self, cluster, spec):
        self.c = cluster
        self.spec = spec
        self.lock = threading.Lock()
        self.records = []  # {key, id, status, tries, replayed, server}
        self.errors = []
        self.retries = 0
        self.seq = 0

    def _post(self, host, body, key):
        c = http.client.HTTPConnection(self.c.net.addr(host), PORT, timeout=10)
        try:
            c.request("POST", "/api/v1/jobs", body=body, headers={
                "Content-Type": "application/json", "Idempotency-Key": key,
                "Authorization": "Bearer " + self.c.token})
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def submit(self, first_host=None):
        with self.lock:
            self.seq += 1
            n = self.seq
        spec = json.loads(json.dumps(self.spec))
        spec["labels"] = {"chaos": str(n)}
        body = json.dumps(spec).encode()
        key = str(uuid.uuid4())
        hosts = list(SERVERS)
        i = SERVERS.index(first_host) if first_host else n % 2
        end = time.monotonic() + 300
        tries = 0
        while True:
            tries += 1
            host = hosts[i % 2]
            i += 1
            try:
                st, data = self._post(host, body, key)
            except (OSError, http.client.HTTPException):
                st, data = None, b""
            if st in (200, 201):
                j = json.loads(data)
                with self.lock:
                    self.records.append({"key": key, "id": j["id"], "status": st,
                                         "tries": tries, "server": host})
                    self.retries += tries - 1
                return
            if st is not None and st not in (502, 503, 504):
                with self.lock:
                    self.errors.append("%s answered %s to key %s: %s" % (host, st, key,
                                                                         data[:300]))
                return
            if time.monotonic() > end:
                with self.lock:
                    self.errors.append("key %s: no server answered in 300 s" % key)
                return
            time.sleep(min(2.0, 0.1 * tries))

    def burst(self, host, n):
        ts = [threading.Thread(target=self.submit, args=(host,), daemon=True) for _ in range(n)]
        for t in ts:
            t.start()
        return ts


class Budget:
    """The jobs a phase has left to submit, shared by the paced submitters and
    the bursts a server kill fires."""

    def __init__(self, n):
        self.left, self.taken, self.lock = n, 0, threading.Lock()

    def take(self, n=1):
        """Up to n jobs: (how many, the index of the first)."""
        with self.lock:
            k = min(n, self.left)
            self.left -= k
            first = self.taken
            self.taken += k
            return k, first


def paced(clients, n, seconds, budget, progress=None, lead=0.0, tail=0, fed=None):
    """Submits the budget's jobs spread over seconds (4 threads); with
    progress (a function giving the schedule's share done, 0 to 1), job i
    waits instead until progress() >= i/n - lead, so jobs keep coming, a
    backlog of lead ahead, however long the schedule really takes, and the
    last tail jobs wait until progress() is 1 (the last fault begun): a
    schedule whose last faults come late must still find jobs to hit (a
    kill_child with every job already ended waited 60 s and failed).  fed():
    True once for each job a fault asked for (Injector.fed): a job waiting
    its turn goes then, so that a fault that needs a running job, begun
    before the last, does not wait for jobs that wait for the last fault."""
    start = time.monotonic()
    interval = seconds / max(1, n)

    def loop():
        while True:
            k, i = budget.take()
            if not k:
                return
            if progress:
                want = 1.0 if i >= n - tail else i / max(1, n) - lead
                while progress() < want and not (fed and fed()):
                    time.sleep(0.05)
            else:
                wait = start + i * interval - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
            clients.submit()
    ts = [threading.Thread(target=loop, daemon=True) for _ in range(4)]
    for t in ts:
        t.start()
    return ts


# ---------------------------------------------------------------- faults

class Injector:
    def __init__(self, cluster, clients, budget):
        self.c, self.clients, self.budget = cluster, clients, budget
        self.done = []  # executed faults, with what they hit
        self.started = 0  # faults begun: the submitters' pace (a fault waiting
        # for a job process to kill must not hold back the jobs it waits for)
        self.victims = []  # (job, attempt, fault time, kind)
        self.pg = []  # per restart: down/up/ready times, 503 seen
        self.bursts = []
        self.pending = []  # timers that end a fault (restart, heal, thaw)
        self.busy = set()  # worker hosts under a fault now
        self.hunger = 0  # jobs a fault waiting for a job process asked for
        self.lock = threading.Lock()

    def fed(self):
        """True, once per job asked for, while a fault waits for a job."""
        with self.lock:
            if self.hunger <= 0:
                return False
            self.hunger -= 1
            return True

    def _hit(self, host, ev, t):
        jobs = self.c.running_job(host)
        for jid, att in jobs:
            self.victims.append({"job": jid, "attempt": att, "t": t, "kind": ev["kind"],
                                 "host": host})
        ev["hit"] = ["%d/%d" % j for j in jobs]

    def worker_with_child(self, want, timeout=3.0):
        """A worker host that carries no fault now: want if it runs a job
        process, else one that does, else (after timeout) any, want first.
        Waits up to 60 s for a host to be free."""
        start = time.monotonic()
        while True:
            with self.lock:
                free = [h for h in (want,) + WORKERS if h not in self.busy]
            for h in free:
                p = self.c.workers.get(h)
                if p and p.poll() is None and fbtest.children_of(p.pid):
                    return h
            if free and time.monotonic() > start + timeout:
                return free[0]
            if time.monotonic() > start + max(timeout, 60.0):
                raise Failure("every worker host carried a fault for 60 s")
            time.sleep(0.05)

    def run(self, plan, t0):
        for ev in plan:
            wait = t0 + ev["at"] - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            ev = dict(ev)
            ev["t"] = time.time()
            self.started += 1
            try:
                getattr(self, "f_" + ev["kind"])(ev)
            except Exception as e:  # a fault that could not be made is a failure of the run
                ev["error"] = "%s: %s" % (type(e).__name__, e)
                log("fault %s on %s failed: %s" % (ev["kind"], ev["host"], ev["error"]))
            self.done.append(ev)
            log("fault %-12s %-4s %s" % (ev["kind"], ev["host"], " ".join(
                "%s=%s" % (k, v) for k, v in ev.items()
                if k in ("hold", "hit", "skew_s", "mode", "child", "burst", "down_s",
                         "ready_s", "saw_503"))))

    # A fault that holds a host ends on a timer, so the schedule goes on.
    def _later(self, seconds, host, fn):
        def end():
            try:
                fn()
            finally:
                with self.lock:
                    self.busy.discard(host)
        t = threading.Timer(seconds, end)
        t.daemon = True
        t.start()
        self.pending.append(t)

    def _take(self, host):
        with self.lock:
            self.busy.add(host)

    def f_kill_worker(self, ev):
        h = ev["host"] = self.worker_with_child(ev["host"])
        self._take(h)
        p = self.c.workers[h]
        self._hit(h, ev, time.time())
        inc = self.c.incarnation(p.pid)
        os.kill(p.pid, signal.SIGKILL)
        inc["killed_at"] = time.time()
        p.wait()
        self._later(ev["hold"], h, lambda: self.c.start_worker(h))

    def f_kill_child(self, ev):
        # a job process can end between being seen and being killed: look
        # again; with none running for 2 s, ask the submitters for one more
        # job (seed 383737616: every job but the tail had ended, and the
        # tail waits for the last fault to begin, not this one)
        deadline = time.monotonic() + 60.0
        while True:
            h = self.worker_with_child(ev["host"],
                                       min(2.0, max(0.0, deadline - time.monotonic())))
            killed = []
            for k in fbtest.children_of(self.c.workers[h].pid):
                if fbtest.pid_state(k) in (None, "Z"):  # ended, not yet reaped
                    continue
                try:
                    os.kill(k, signal.SIGKILL)
                    killed.append(k)
                except ProcessLookupError:
                    pass
            if killed:
                ev["host"], ev["child"] = h, killed
                with self.lock:
                    self.hunger = 0  # asks not yet fed are no longer needed
                return
            if time.monotonic() > deadline:
                raise Failure("no worker ran a job process for 60 s")
            with self.lock:
                self.hunger += 1
            time.sleep(0.05)

    def f_kill_server(self, ev):
        h = ev["host"]
        # a schedule running late may reach a server still down from its last
        # kill: wait for its restart, as a burst needs it up
        self.wait_servers_up()
        self._take(h)
        n, _ = self.budget.take(4)
        ev["burst"] = n
        self.bursts += self.clients.burst(h, n)
        time.sleep(0.02)
        p = self.c.servers[h]
        os.kill(p.pid, signal.SIGKILL)
        p.wait()

        self._later(ev["hold"], h, lambda: self.c.start_server(h))

    def f_partition(self, ev):
        h = ev["host"] = self.worker_with_child(ev["host"], 1.0)
        self._take(h)
        self._hit(h, ev, time.time())
        ns = self.c.net.ns(h)
        run(["ip", "-n", ns, "link", "set", "eth0", "down"])
        self._later(ev["hold"], h, lambda: run(["ip", "-n", ns, "link", "set", "eth0", "up"]))

    def f_freeze(self, ev):
        h = ev["host"] = self.worker_with_child(ev["host"], 10.0)
        self._take(h)
        p = self.c.workers[h]
        t0 = time.time()
        # the worker first: stopped, it starts no job process, so the list of
        # its children is then complete (a job it just claimed included)
        os.kill(p.pid, signal.SIGSTOP)
        fbtest.wait_until(lambda: fbtest.pid_state(p.pid) in (None, "T", "t", "Z", "X"), 5,
                          "worker %d to stop" % p.pid, 0.01)
        kids = fbtest.children_of(p.pid)
        for k in kids:
            os.kill(k, signal.SIGSTOP)
        self._hit(h, ev, t0)
        held = [tuple(map(int, x.split("/"))) for x in ev["hit"]]

        def held_job_now():
            """"next": a job the worker held runs its next attempt elsewhere;
            "ended": one ended; None: neither yet (or PostgreSQL is down)."""
            for jid, att in held:
                try:
                    st, a = self.c.sql("SELECT state, attempt FROM jobs WHERE id = %d" % jid)[0]
                except Exception:  # PostgreSQL down for a fault: ask again
                    return None
                if int(a) > att and st == "running":
                    return "next"
                if st in ("succeeded", "failed", "canceled"):
                    return "ended"
            return None

        def thaw():
            # Thawed while the next attempt runs, the worker's late writes (its
            # lease ran out: the attempt ends lost) meet the fence, which alone
            # refuses them then.  So a worker that held a job is continued as
            # soon as the rescued job runs elsewhere (no rescue before
            # --stale-s), or once it ended, else at the hold's end + 20 s.
            end = t0 + ev["hold"] + (20.0 if held else 0.0)
            while time.time() < end:
                ev["thawed"] = held_job_now()
                if ev["thawed"]:
                    break
                time.sleep(0.05)
            log("thaw %s after %.1f s%s" % (h, time.time() - t0, {
                "next": ": the held job's next attempt runs elsewhere",
                "ended": ": the held job ended"}.get(ev.get("thawed"), "")))
            try:
                os.kill(p.pid, signal.SIGCONT)  # the worker first: its lease check runs
            except OSError:
                pass
            # Its lease timer ran out while it was stopped: once the worker is
            # scheduled, it kills the (still stopped) job process.  On a loaded
            # machine that can take longer than a moment, and a job process
            # continued first would finish its run after the next attempt began
            # (a VM's pause has that window too; here the schedule makes it).
            # So a job process of a held job waits, up to 5 s, until the worker
            # has had its turn and killed it (a stopped process dies at once).
            wait_end = time.time() + (5.0 if held and ev.get("thawed") == "next" else 0.3)
            time.sleep(0.3)
            while time.time() < wait_end and any(fbtest.pid_state(k) == "T" for k in kids):
                time.sleep(0.05)
            for k in kids:
                try:
                    os.kill(k, signal.SIGCONT)
                except OSError:
                    pass
        self._later(min(ev["hold"], self.c.args.stale_s) if held else ev["hold"], h, thaw)

    def f_skew(self, ev):
        h = ev["host"]
        end = time.monotonic() + 60
        while True:  # the named host, or another one carrying no fault now
            with self.lock:
                free = [w for w in (h,) + WORKERS if w not in self.busy]
                if free:
                    h = ev["host"] = free[0]
                    self.busy.add(h)
                    break
            if time.monotonic() > end:
                raise Failure("every worker host carried a fault for 60 s")
            time.sleep(0.1)
        p = self.c.workers[h]
        p.send_signal(signal.SIGTERM)  # hands a running job back (drain, then release)
        try:
            p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            self.c.incarnation(p.pid)["killed_at"] = time.time()
        self.c.skew[h] = ev["skew_s"]
        self.c.start_worker(h)
        with self.lock:
            self.busy.discard(h)

    def wait_servers_up(self):
        """Until no server is down from a kill (a restart's time is not the
        database's recovery)."""
        end = time.monotonic() + 30
        while any(h in self.busy or self.c.readyz(h, 0.5) != 200 for h in SERVERS):
            if time.monotonic() > end:
                raise Failure("the servers not both up for 30 s")
            time.sleep(0.05)

    def _pg(self, ev, mode):
        ev["mode"] = mode
        self.wait_servers_up()
        t_stop = time.monotonic()
        self.c.pg_stop(mode)
        t_down = time.monotonic()
        saw = {h: None for h in SERVERS}  # None: not up; True: 503 seen; False: only 200s
        while time.monotonic() < t_down + ev["hold"] or False in saw.values():
            for h in SERVERS:
                st = self.c.readyz(h, 0.5)
                if st == 503:
                    saw[h] = True
                elif st is not None and saw[h] is None:
                    saw[h] = False
            if time.monotonic() > t_down + ev["hold"] + 5:
                break
            time.sleep(0.05)
        self.c.pg_start()
        t_up = time.monotonic()
        ready = {}
        end = t_up + 60
        while len(ready) < len(SERVERS) and time.monotonic() < end:
            for h in SERVERS:
                if h not in ready and self.c.readyz(h, 0.5) == 200:
                    ready[h] = time.monotonic()
            time.sleep(0.02)
        ev["down_s"] = round(t_up - t_stop, 2)
        ev["ready_s"] = round(max(ready.values()) - t_up, 2) if len(ready) == 2 else None
        ev["saw_503"] = saw
        self.pg.append({"mode": mode, "up_wall": time.time() - (time.monotonic() - t_up),
                        "ready_s": ev["ready_s"], "saw_503": saw, "down_s": ev["down_s"]})

    def f_pg_fast(self, ev):
        self._pg(ev, "fast")

    def f_pg_immediate(self, ev):
        self._pg(ev, "immediate")


# ---------------------------------------------------------------- the workers' logs

STAMP = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})Z"
RE_RUN = re.compile(r"^" + STAMP + r" \w+ \S+: job (\d+) attempt (\d+): running \(")
RE_END = re.compile(r"^" + STAMP + r" \w+ \S+: job (\d+) attempt (\d+): job process ended "
                    r"\(([^)]*)\) at " + STAMP)
RE_OK = re.compile(r"^" + STAMP + r" \w+ \S+: job (\d+) attempt (\d+): succeeded after")
RE_FAILED = re.compile(r"^" + STAMP + r" \w+ \S+: job (\d+) attempt (\d+): failed (\w+) after")
RE_FENCED = re.compile(r"^" + STAMP + r" \w+ \S+: job (\d+) attempt (\d+): fenced out: its "
                       r"(\w+) write was refused")


def epoch(stamp):
    base, ms = stamp.split(".")
    return calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S")) + int(ms) / 1000.0


def read_worker_logs(cluster):
    """Per attempt: host, start, end (real time, skew undone) of the run that
    counts; the runs of it released before (a worker that stops hands its job
    back, the attempt not counted: the same attempt is claimed again);
    accepted completions; accepted failures; refused writes."""
    claims, oks, fails, fenced, problems = {}, [], [], [], []
    for inc in cluster.incarnations:
        if not inc.get("worker"):
            continue
        skew = inc["skew_s"]
        with open(inc["log"], errors="replace") as f:
            for line in f:
                m = RE_RUN.match(line)
                if m:
                    k = (int(m.group(2)), int(m.group(3)))
                    claims.setdefault(k, []).append(
                        {"host": inc["host"], "pid": inc["pid"],
                         "start": epoch(m.group(1)) - skew, "end": None, "how": None})
                    continue
                m = RE_END.match(line)
                if m:
                    k = (int(m.group(2)), int(m.group(3)))
                    for r in claims.get(k, []):
                        if r["pid"] == inc["pid"] and r["end"] is None:
                            r["end"] = epoch(m.group(5)) - skew
                            r["how"] = m.group(4)
                    continue
                m = RE_OK.match(line)
                if m:
                    oks.append((int(m.group(2)), int(m.group(3)), inc["host"]))
                    continue
                m = RE_FAILED.match(line)
                if m:
                    fails.append({"job": int(m.group(2)), "attempt": int(m.group(3)),
                                  "code": m.group(4), "host": inc["host"],
                                  "t": epoch(m.group(1)) - skew})
                    continue
                m = RE_FENCED.match(line)
                if m:
                    fenced.append({"job": int(m.group(2)), "attempt": int(m.group(3)),
                                   "write": m.group(4), "host": inc["host"],
                                   "t": epoch(m.group(1)) - skew,
                                   "resent": "sent again after a lost connection" in line})
    runs, released = {}, []
    for k, lst in claims.items():
        for r in lst:
            if r["end"] is None:
                inc = cluster.incarnation(r["pid"])
                if inc and inc.get("killed_at"):
                    r["end"], r["how"] = inc["killed_at"], "worker SIGKILLed"
        lst.sort(key=lambda r: r["start"])
        for r, nxt in zip(lst, lst[1:]):
            if r["how"] != "released":
                problems.append("job %d attempt %d claimed twice (%s and %s), the first run "
                                "not released (%s)" % (k[0], k[1], r["host"], nxt["host"],
                                                       r["how"]))
        runs[k] = lst[-1]
        released += [dict(r, job=k[0], attempt=k[1]) for r in lst[:-1]]
    return runs, released, oks, fails, fenced, problems


# ---------------------------------------------------------------- the run

def wait_all_terminal(cluster, timeout):
    def done():
        rows = cluster.sql("SELECT count(*) FROM jobs WHERE state IN ('queued', 'running')")
        return int(rows[0][0]) == 0
    fbtest.wait_until(done, timeout, "every job to end", 0.5)


def throughput(cluster, ids):
    """Jobs of ids per second, from the first one's submit to the last one's end
    (database times), and that span."""
    rows = cluster.sql("SELECT extract(epoch FROM min(created_at)), "
                       "extract(epoch FROM max(finished_at)), count(*) FROM jobs "
                       "WHERE id = ANY('{%s}'::bigint[])" % ",".join(map(str, ids)))
    first, last, n = float(rows[0][0]), float(rows[0][1]), int(rows[0][2])
    return n / max(0.001, last - first), last - first


def start_cluster(c):
    """PostgreSQL, both servers, the harness's token, the four workers."""
    os.makedirs(os.path.join(c.out, "logs"), exist_ok=True)
    c.pg_init()
    for h in SERVERS:
        c.start_server(h)
    for h in SERVERS:
        c.wait_ready(h)
    admin = [fbtest.find_bin("fusionbench-server"), "--database-url", c.local_url]
    run(admin + ["user", "add", "chaos", "--role", "user", "--quota-hours", "none",
                 "--max-running", "none"])
    c.token = run(admin + ["token", "create", "chaos"]).stdout.strip()
    for h in WORKERS:
        c.start_worker(h)
    fbtest.wait_until(lambda: len(c.sql("SELECT id FROM workers")) >= len(WORKERS), 60,
                      "the workers to register")


def phase_a(c, clients, args):
    """A tenth of the jobs without faults; returns their ids and throughput."""
    n_a = max(8, args.jobs // 10)
    log("phase A: %d jobs, no faults" % n_a)
    for t in paced(clients, n_a, 0.1, Budget(n_a)):
        t.join()
    wait_all_terminal(c, 600)
    ids_a = [r["id"] for r in clients.records]
    tp_a, span_a = throughput(c, ids_a)
    log("phase A: %d jobs in %.1f s: %.2f jobs/s" % (len(ids_a), span_a, tp_a))
    return ids_a, tp_a


def phase_b(c, clients, args, ids_a, tp_a):
    """The rest, paced over the printed schedule while its faults are made;
    waits until every job ended.  Returns the injector and the phase's times
    and throughput."""
    n_b = args.jobs - len(ids_a)
    duration = args.duration or max(30.0, n_b / (1.1 * tp_a))
    plan = make_schedule(args.seed, args.faults_per_kind, args.stale_s, duration)
    span = max(duration, plan[-1]["at"] + 5)
    print("schedule (seed %d, %d faults over %.0f s; replay: --seed %d --jobs %d "
          "--faults-per-kind %d --duration %.1f):" % (args.seed, len(plan), span, args.seed,
                                                      args.jobs, args.faults_per_kind,
                                                      duration))
    for ev in plan:
        print("  %8.2f s  %-12s %-4s %s" % (ev["at"], ev["kind"], ev["host"], " ".join(
            "%s=%s" % (k, v) for k, v in ev.items() if k not in ("at", "kind", "host"))))
    sys.stdout.flush()
    # each server kill fires a burst of 4 submits: kept aside from the paced ones
    bursts = min(n_b // 2, 4 * args.faults_per_kind)
    budget = Budget(n_b - bursts)
    inj = Injector(c, clients, Budget(bursts))
    t0 = time.monotonic()
    t0_wall = time.time()
    # jobs follow the schedule (a schedule runs late: PostgreSQL restarts take
    # longer than planned), a tenth of them ahead as a backlog, two per worker
    # kept for the last fault
    submitters = paced(clients, n_b - bursts, span, budget,
                       progress=lambda: inj.started / len(plan), lead=0.1,
                       tail=min((n_b - bursts) // 4, 2 * len(WORKERS)), fed=inj.fed)
    inj.run(plan, t0)
    for t in list(inj.pending):
        t.join()
    left, _ = inj.budget.take(n_b)  # bursts the schedule did not fire
    inj.bursts += [threading.Thread(target=clients.submit, daemon=True) for _ in range(left)]
    for t in inj.bursts[len(inj.bursts) - left:]:
        t.start()
    for t in submitters + inj.bursts:
        t.join()
    t_faults_end = time.time()
    # every server and worker back up before the end
    for h in SERVERS:
        if c.servers[h].poll() is not None:
            c.start_server(h)
        c.wait_ready(h)
    for h in WORKERS:
        if c.workers[h].poll() is not None:
            c.start_worker(h)
    wait_all_terminal(c, 900)
    # throughput under faults: jobs of phase B finished while faults ran
    rows = c.sql("SELECT count(*) FROM jobs WHERE finished_at >= to_timestamp(%f) "
                 "AND finished_at <= to_timestamp(%f) AND id <> ALL('{%s}'::bigint[])"
                 % (t0_wall, t_faults_end, ",".join(map(str, ids_a))))
    return inj, {"t0_wall": t0_wall, "t_faults_end": t_faults_end, "t_end": time.time(),
                 "tp": int(rows[0][0]) / max(0.001, t_faults_end - t0_wall)}


class Verdict:
    """The checks' findings: failures (each logged as it is found) and what the
    figures are made of."""

    def __init__(self):
        self.failures = []

    def fail(self, msg):
        self.failures.append(msg)
        log("CHECK FAILED: " + msg)


def check_keys_and_states(c, clients, inj, args, v):
    """Every fault made; every key one job and no other job; every job ended,
    a failed one with its attempts spent; one result per succeeded job, by its
    last attempt."""
    for e in clients.errors[:20]:
        v.fail("client: " + e)
    for e in inj.done:
        if e.get("error"):
            v.fail("fault %s on %s could not be made: %s" % (e["kind"], e["host"], e["error"]))
    v.jobs = jobs = {int(r[0]): {"state": r[1], "attempt": int(r[2]), "max": int(r[3]),
                                 "key": r[4], "code": r[5]}
                     for r in c.sql("SELECT id, state, attempt, max_attempts, "
                                    "coalesce(idem_key, ''), coalesce(error->>'code', '') "
                                    "FROM jobs")}
    by_key = {}
    for r in clients.records:
        by_key.setdefault(r["key"], set()).add(r["id"])
    if len(clients.records) != args.jobs:
        v.fail("%d submits answered, want %d" % (len(clients.records), args.jobs))
    for k, s in by_key.items():
        if len(s) != 1:
            v.fail("key %s answered with jobs %s" % (k, sorted(s)))
        jid = next(iter(s))
        if jid not in jobs or jobs[jid]["key"] != k:
            v.fail("key %s: job %d missing or keyed otherwise" % (k, jid))
    if len(jobs) != len(by_key):
        v.fail("the database holds %d jobs for %d keys" % (len(jobs), len(by_key)))
    dup = c.sql("SELECT idem_key, count(*) FROM jobs GROUP BY idem_key HAVING count(*) > 1")
    if dup:
        v.fail("keys with several jobs: %s" % dup[:5])
    v.failed = []
    for jid, j in sorted(jobs.items()):
        if j["state"] not in ("succeeded", "failed"):
            v.fail("job %d ended %s" % (jid, j["state"]))
        if j["attempt"] > j["max"]:
            v.fail("job %d ran %d attempts, max %d" % (jid, j["attempt"], j["max"]))
        if j["state"] == "failed":
            v.failed.append(jid)
            if j["attempt"] != j["max"] or j["code"] not in ("lost", "killed"):
                v.fail("job %d failed (%s) after %d of %d attempts" % (
                    jid, j["code"], j["attempt"], j["max"]))
    res = {int(r[0]): (int(r[1]), int(r[2])) for r in c.sql(
        "SELECT job_id, count(*), max(attempt) FROM results GROUP BY job_id")}
    for jid, j in jobs.items():
        got = res.get(jid)
        if j["state"] == "succeeded" and got != (1, j["attempt"]):
            v.fail("job %d (attempt %d): results (count, attempt) %s" % (jid, j["attempt"], got))
        if j["state"] != "succeeded" and got:
            v.fail("job %d is %s but has results %s" % (jid, j["state"], got))


def check_worker_logs(c, v):
    """From the workers' own logs: one accepted completion per succeeded job, by
    its last attempt; no two attempts' runs overlap; every refused write stale."""
    jobs = v.jobs
    v.runs, v.released, oks, fails, v.fenced, problems = read_worker_logs(c)
    for p in problems:
        v.fail(p)
    ok_by_job = {}
    for jid, att, host in oks:
        ok_by_job.setdefault(jid, []).append((att, host))
    v.unlogged = 0  # completions that committed as their worker was SIGKILLed
    for jid, j in jobs.items():
        got = ok_by_job.get(jid, [])
        want = [j["attempt"]] if j["state"] == "succeeded" else []
        last = v.runs.get((jid, j["attempt"]))
        inc = c.incarnation(last["pid"]) if last else None
        if not got and want and inc and inc.get("killed_at"):
            v.unlogged += 1  # the database's result row, checked before, is its proof
            continue
        if [a for a, _ in got] != want:
            v.fail("job %d (%s, attempt %d): accepted completions in the logs %s" % (
                jid, j["state"], j["attempt"], got))
    # no job on two workers at once: every run, released ones too, ends
    # before the next one starts
    v.overlaps = 0
    per_job = {}
    for (jid, att), r in v.runs.items():
        per_job.setdefault(jid, []).append((att, r["start"], r))
    for r in v.released:
        per_job.setdefault(r["job"], []).append((r["attempt"], r["start"], r))
    for jid, lst in per_job.items():
        lst.sort(key=lambda x: x[:2])
        for (a1, _, r1), (a2, _, r2) in zip(lst, lst[1:]):
            end = r1["end"]
            if end is None:
                v.fail("job %d attempt %d on %s: no end of its run in the logs" % (
                    jid, a1, r1["host"]))
                continue
            if end > r2["start"]:
                v.overlaps += 1
                v.fail("job %d: attempt %d on %s ran until %.3f, attempt %d on %s started "
                       "%.3f" % (jid, a1, r1["host"], end, a2, r2["host"], r2["start"]))
    # accepted failures: none after the next attempt began.  A failed attempt's
    # job waits 2 s or more (the retry's backoff) before another claim, so a
    # failure logged after the next attempt's start was written by a stale
    # attempt and let through (a released job is claimed at once: not checked)
    v.accepted_stale = 0
    for f in fails:
        nxt = v.runs.get((f["job"], f["attempt"] + 1))
        if nxt and f["t"] > nxt["start"]:
            v.accepted_stale += 1
            v.fail("job %d attempt %d on %s: its failed (%s) write was accepted at %.3f, after "
                   "attempt %d began on %s at %.3f" % (f["job"], f["attempt"], f["host"],
                                                       f["code"], f["t"], f["attempt"] + 1,
                                                       nxt["host"], nxt["start"]))
    # refused writes: all stale
    for f in v.fenced:
        j = jobs.get(f["job"])
        # stale: a later attempt owns the job, or the rescuer failed it; or a
        # write sent again after a lost answer whose first try landed
        if not (j and (f["attempt"] < j["attempt"] or
                       (j["state"] == "failed" and j["code"] == "lost") or
                       (f["resent"] and f["attempt"] == j["attempt"]))):
            v.fail("a refused write that was not stale: %s" % f)


def check_outages(inj, args, v):
    """Both servers 503 while PostgreSQL was down and ready after; every kind of
    fault made as often as asked."""
    for p in inj.pg:
        if p["ready_s"] is None:
            v.fail("servers not ready again after a PostgreSQL restart: %s" % p)
        if False in p["saw_503"].values():
            v.fail("a server did not answer /readyz 503 while PostgreSQL was down: %s" % p)
    v.kinds = {k: sum(1 for e in inj.done if e["kind"] == k and not e.get("error"))
               for k in KINDS}
    for k in KINDS:
        if v.kinds[k] < args.faults_per_kind:
            v.fail("only %d %s faults made, want %d" % (v.kinds[k], k, args.faults_per_kind))


def figures(clients, inj, args, v, tp_a, b):
    """figures.json's content, from the checks' findings and the phases' times."""
    jobs, runs = v.jobs, v.runs
    rescue = []
    for x in inj.victims:
        nxt = runs.get((x["job"], x["attempt"] + 1))
        if nxt:
            rescue.append(nxt["start"] - x["t"])
    recovery = [p["ready_s"] for p in inj.pg if p["ready_s"] is not None]
    resumed = []
    starts = sorted(r["start"] for r in runs.values())
    for p in inj.pg:
        later = [s for s in starts if s >= p["up_wall"]]
        if later:
            resumed.append(later[0] - p["up_wall"])
    writes = {}
    for f in v.fenced:
        writes[f["write"]] = writes.get(f["write"], 0) + 1
    return {
        "seed": args.seed, "jobs": len(jobs), "succeeded": sum(
            1 for j in jobs.values() if j["state"] == "succeeded"),
        "failed": len(v.failed), "faults": v.kinds, "faults_total": sum(v.kinds.values()),
        "faults_that_hit_a_running_job": len({(x["job"], x["attempt"]) for x in inj.victims}),
        "freezes_thawed_during_next_attempt": sum(
            1 for e in inj.done if e.get("thawed") == "next"),
        "refused_stale_writes": len(v.fenced), "refused_by_write": writes,
        "completions_unlogged_worker_killed": v.unlogged,
        "accepted_stale_failures": v.accepted_stale,
        "submit_retries": clients.retries,
        "attempts_histogram": {str(a): sum(1 for j in jobs.values() if j["attempt"] == a)
                               for a in sorted({j["attempt"] for j in jobs.values()})},
        "rescue_s": {"n": len(rescue), "p50": pct(rescue, 50), "p99": pct(rescue, 99),
                     "max": max(rescue) if rescue else None},
        "pg_restarts": len(inj.pg),
        "pg_ready_s": {"n": len(recovery), "p50": pct(recovery, 50), "p99": pct(recovery, 99),
                       "max": max(recovery) if recovery else None},
        "pg_first_claim_s": {"p50": pct(resumed, 50), "max": max(resumed)
                             if resumed else None},
        "throughput_no_faults": round(tp_a, 3), "throughput_faults": round(b["tp"], 3),
        "phase_b_s": round(b["t_end"] - b["t0_wall"], 1),
        "faults_s": round(b["t_faults_end"] - b["t0_wall"], 1),
        "overlaps": v.overlaps, "failures": len(v.failures),
    }


def print_figures(fig, v):
    """The refused writes, the failed jobs and the figures as a markdown table."""
    jobs = v.jobs
    print("\nrefused stale writes (%d):" % len(v.fenced))
    for f in v.fenced:
        print("  job %d attempt %d on %s: %s%s (job ended %s at attempt %d)" % (
            f["job"], f["attempt"], f["host"], f["write"],
            ", sent again after a lost connection" if f["resent"] else "",
            jobs.get(f["job"], {}).get("state"), jobs.get(f["job"], {}).get("attempt", 0)))
    print("failed jobs (%d): %s" % (len(v.failed), ", ".join(
        "%d (%s, %d attempts)" % (j, jobs[j]["code"], jobs[j]["attempt"]) for j in v.failed)))
    fmt = lambda x: "-" if x is None else "%.2f" % x  # noqa: E731
    rs, pr = fig["rescue_s"], fig["pg_ready_s"]
    print()
    print("| figure | value |\n|---|---|")
    print("| jobs | %d (%d succeeded, %d failed with their attempts spent) |" % (
        fig["jobs"], fig["succeeded"], fig["failed"]))
    print("| faults | %d: %s |" % (fig["faults_total"], ", ".join(
        "%s %d" % kv for kv in fig["faults"].items())))
    print("| faults that hit a running job | %d |" % fig["faults_that_hit_a_running_job"])
    print("| freezes thawed while the job's next attempt ran | %d |"
          % fig["freezes_thawed_during_next_attempt"])
    print("| refused stale writes | %d (%s); stale failures accepted: %d%s |" % (
        len(v.fenced), ", ".join("%s %d" % kv for kv in sorted(fig["refused_by_write"].items()))
        or "-", v.accepted_stale, "" if not v.failures else " (see the failed checks)"))
    print("| submits resent (lost answers, 5xx) | %d |" % fig["submit_retries"])
    print("| completions committed as their worker was SIGKILLed (not logged) | %d |"
          % fig["completions_unlogged_worker_killed"])
    print("| time to rescue (fault to next attempt's start) | p50 %s s, p99 %s s, "
          "max %s s (n=%d) |" % (fmt(rs["p50"]), fmt(rs["p99"]), fmt(rs["max"]), rs["n"]))
    print("| PostgreSQL restart: both servers ready | p50 %s s, p99 %s s, max %s s "
          "(n=%d) |" % (fmt(pr["p50"]), fmt(pr["p99"]), fmt(pr["max"]), pr["n"]))
    print("| PostgreSQL restart: first job claimed | p50 %s s, max %s s |" % (
        fmt(fig["pg_first_claim_s"]["p50"]), fmt(fig["pg_first_claim_s"]["max"])))
    print("| throughput | %.2f jobs/s without faults, %.2f with |" % (
        fig["throughput_no_faults"], fig["throughput_faults"]))
    print("| phase B | %.0f s (faults for %.0f s) |" % (fig["phase_b_s"], fig["faults_s"]))
    print("| checks failed | %d |" % len(v.failures))


def inside(args):
    """The run, inside the `ctl` namespace: the cluster, phases A and B, the
    checks and the figures.  Returns the failed checks."""
    c = Cluster(args, args.tag, args.octet, args.out)
    # No extra rounds (time_budget_s 0): a job's length is its rounds', not the
    # noise of four workers on a few cores (adaptive repetition doubled it).
    spec = {"workload": "gemm_bias_relu", "params": {"m": args.size, "k": args.size,
                                                     "n": args.size, "time_budget_s": 0},
            "warmup": 2, "iterations": args.iterations}
    v = Verdict()
    try:
        start_cluster(c)
        clients = Clients(c, spec)
        ids_a, tp_a = phase_a(c, clients, args)
        inj, b = phase_b(c, clients, args, ids_a, tp_a)
        check_keys_and_states(c, clients, inj, args, v)
        check_worker_logs(c, v)
        check_outages(inj, args, v)
        fig = figures(clients, inj, args, v, tp_a, b)
        with open(os.path.join(args.out, "figures.json"), "w") as f:
            json.dump(fig, f, indent=1)
        print_figures(fig, v)
    except Exception:
        traceback.print_exc()
        v.failures.append("the run stopped: see the traceback")
    finally:
        c.down()
    return v.failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--faults-per-kind", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--duration", type=float, default=0.0,
                    help="phase B's length in s (default: from phase A's throughput)")
    ap.add_argument("--stale-s", type=int, default=6)
    ap.add_argument("--heartbeat-ms", type=int, default=250)
    ap.add_argument("--size", type=int, default=256, help="the jobs' GEMM size")
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--out", default=None, help="logs and figures (default: a temp folder, "
                    "removed when the run passed)")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tag", help=argparse.SUPPRESS)
    ap.add_argument("--octet", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()

    # SIGTERM (ctest's timeout, an operator) ends the run through its finally
    # blocks: processes stopped, PostgreSQL stopped, namespaces removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.inside:
        failures = inside(args)
        print("chaos: %s" % ("PASSED" if not failures else "FAILED (%d checks)" % len(failures)),
              flush=True)
        sys.exit(0 if not failures else 1)

    missing = []
    if os.geteuid() != 0:
        missing.append("root (network namespaces)")
    if not shutil.which("ip"):
        missing.append("iproute2")
    if not pg_bindir():
        missing.append("PostgreSQL server binaries")
    if not faketime_lib():
        missing.append("libfaketime (apt-get install faketime)")
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            missing.append("a postgres user")
    if not missing:  # namespaces may still be refused (an unprivileged container)
        probe = "fbc%d-probe" % os.getpid()
        r = run(["ip", "netns", "add", probe], check=False)
        if r.returncode != 0:
            missing.append("network namespaces (ip netns add: %s)" % r.stderr.strip())
        else:
            run(["ip", "netns", "del", probe], check=False)
    try:
        fbtest.find_bin("fusionbench-server")
        fbtest.find_bin("fusionbench-worker")
    except fbtest.TestFailure as e:
        missing.append(str(e))
    if missing:
        print("skipped: chaos needs %s" % "; ".join(missing), flush=True)
        sys.exit(SKIP)
    if args.seed is None:
        args.seed = random.SystemRandom().randrange(1, 1 << 31)
    keep = args.out is not None
    out = args.out or tempfile.mkdtemp(prefix="fb-chaos-")
    os.makedirs(out, exist_ok=True)
    os.chmod(out, 0o755)
    sweep_stale_namespaces()
    tag = "fbc%d" % os.getpid()
    octet = 16 + os.getpid() % 200
    net = Net(tag, octet)
    rc = 1
    log("chaos: seed %d, %d jobs, %d faults per kind, logs in %s" % (
        args.seed, args.jobs, args.faults_per_kind, out))
    child = None
    try:
        net.up()
        argv = ["ip", "netns", "exec", net.ns("ctl"), sys.executable, os.path.abspath(__file__),
                "--inside", "--tag", tag, "--octet", str(octet), "--out", out, "--seed",
                str(args.seed), "--jobs", str(args.jobs), "--faults-per-kind",
                str(args.faults_per_kind), "--duration", str(args.duration), "--stale-s",
                str(args.stale_s), "--heartbeat-ms", str(args.heartbeat_ms), "--size",
                str(args.size), "--iterations", str(args.iterations)]
        child = subprocess.Popen(argv)
        rc = child.wait()
    except (KeyboardInterrupt, SystemExit):
        if child and child.poll() is None:
            child.send_signal(signal.SIGTERM)  # it stops what it started first
            child.wait()
        rc = 1
    finally:
        net.down()
    if rc == 0 and not keep:
        shutil.rmtree(out, ignore_errors=True)
    elif rc != 0:
        log("logs kept in %s" % out)
    sys.exit(rc)


if __name__ == "__main__":
    main()
