#!/usr/bin/env python3
"""End to end: a worker cut off from PostgreSQL stops its job before the job can
be rescued (its lease, docs/RELIABILITY.md), and its late write is refused.

Worker A talks to PostgreSQL through a cable (a TCP relay on 127.0.0.1) that
the test cuts: bytes stop flowing both ways while the connections stay open,
so A's heartbeat hangs with nothing to tell it (TCP keeps acknowledging to the
relay).  With --stale-s 4 A's lease is 2 s from sending the last heartbeat that
was answered: its timer must kill the job's process 1.5-3.0 s after the cable
relayed that heartbeat, and at most 3.5 s after the cut, with A still stuck.
(From the cut alone a lower bound is wrong: on a loaded machine a commit can
take a second, and the cut then falls a second after the send.)  Worker B
(direct) rescues the job after the stale time and finishes it as attempt 2.  Then the cable is
mended (the cut sessions closed): A's hung heartbeat fails, is sent again on a
new session and is refused by the fence, as would be its `failed lost`.  The chaos test (tests/chaos) does the
same with network namespaces, as root; this one needs no root."""

import os
import socket
import sys
import threading
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402


class Cable:
    """A TCP relay to (host, port) that can be cut (bytes dropped, connections
    kept) and mended (the connections of the cut closed, new ones relayed)."""

    def __init__(self, host, port):
        self.up = (host, port)
        self.cut = False
        self.conns = []
        self.events = []  # (monotonic time relayed, connection number, "up"/"down", bytes)
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            try:
                u = socket.create_connection(self.up)
            except OSError:
                c.close()
                continue
            with self.lock:
                self.conns.append((c, u))
                n = len(self.conns)
            for a, b, way in ((c, u, "up"), (u, c, "down")):
                threading.Thread(target=self.pump, args=(a, b, n, way), daemon=True).start()

    def pump(self, a, b, n, way):
        while True:
            try:
                data = a.recv(65536)
            except OSError:
                data = b""
            if not data:
                for s in (a, b):
                    try:
                        s.shutdown(socket.SHUT_RDWR)
                    except OSError:
                        pass
                return
            if not self.cut:
                self.events.append((time.monotonic(), n, way, data))
                try:
                    b.sendall(data)
                except OSError:
                    return

    def last_renewal(self, replies):
        """When the cable relayed the last request whose reply, relayed before
        the cut, holds one of the byte strings in replies (a column name of
        the statements that renew the worker's lease); None without one."""
        last = None
        for conn in {e[1] for e in self.events}:
            sent = None
            for t, n, way, data in self.events:
                if n != conn:
                    continue
                if way == "up":
                    sent = t
                elif sent is not None and any(r in data for r in replies):
                    last = sent if last is None else max(last, sent)
        return last

    def set_cut(self):
        self.cut = True

    def mend(self):
        with self.lock:
            old, self.conns = self.conns, []
        self.cut = False
        for c, u in old:
            for s in (c, u):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


def log_has(path, text):
    with open(path, errors="replace") as f:
        return text in f.read()


def run(env):
    env.start_server()
    p = urllib.parse.urlsplit(env.db_url)
    cable = Cable(p.hostname or "127.0.0.1", p.port or 5432)
    via = urllib.parse.urlunsplit((p.scheme, "%s@127.0.0.1:%d" % (p.username, cable.port),
                                   p.path, p.query, p.fragment))
    flags = ["--heartbeat-ms", "200", "--stale-s", "4"]
    env.db_url, direct = via, env.db_url  # worker A connects through the cable
    a = env.start_worker(flags)
    env.db_url = direct
    a_log = env.procs[-1][2]
    # a job that outlasts the lease (LONG's timing ends about a second in on an
    # idle VM, and a finished process is as gone as a killed one)
    jid = env.submit(fbtest.VERY_LONG)["id"]
    fbtest.wait_timing(env, jid)
    kids = fbtest.children_of(a.pid)
    check(kids, "worker A runs no job process")

    cable.set_cut()
    t0 = time.monotonic()
    log("cable cut under worker A (job %d, job process %s)" % (jid, kids))
    fbtest.wait_gone(kids, 6)
    t_gone = time.monotonic()
    dt = t_gone - t0
    # The lease runs from sending the claim or the last job heartbeat that
    # was answered: replies that name the column cancel_requested (the
    # heartbeat's RETURNING) or timeout_s (the claim's)
    t_sent = cable.last_renewal((b"cancel_requested", b"timeout_s"))
    check(t_sent is not None and t_sent <= t0,
          "the cable relayed no answered claim or job heartbeat before the cut")
    lease = t_gone - t_sent
    log("A's job process gone %.2f s after the cut, %.2f s after the last answered heartbeat "
        "(lease 2 s)" % (dt, lease))
    check(1.5 <= lease <= 3.0, "the job process died %.2f s after the last answered job heartbeat "
          "was relayed, want 1.5-3.0 s (lease 2 s)" % lease)
    check(dt <= 3.5, "the job process died %.2f s after the cut, want at most 3.5 s" % dt)
    check(a.poll() is None, "worker A itself still runs")
    check_eq(env.sql("SELECT state, attempt FROM jobs WHERE id = %d" % jid), [["running", "1"]],
             "the job while A is cut off (nobody rescued it yet)")

    b = env.start_worker(flags)
    job = env.wait_job(jid, timeout=120)
    check_eq((job["state"], job["attempt"], job["worker"]), ("succeeded", 2, b.wid),
             "the job after B's rescue")

    cable.mend()
    # A's heartbeat hung on the cut session; mended, it fails, is sent again on
    # a new session and refused (or, had it not been in flight, the failed write)
    fbtest.wait_until(lambda: log_has(a_log, "job %d attempt 1: fenced out: its " % jid), 60,
                      "A's late write to be refused")
    check(log_has(a_log, "job %d attempt 1: job process ended (lost)" % jid),
          "A logged its job process's end as lost (at the lease's end)")
    check_eq(env.sql("SELECT count(*), min(attempt) FROM results WHERE job_id = %d" % jid),
             [["1", "2"]], "one result, attempt 2's")
    check_eq(env.sql("SELECT state, attempt FROM jobs WHERE id = %d" % jid),
             [["succeeded", "2"]], "the job after A's refused write")
    log("A's lease ran out %.2f s after the cut, B finished attempt 2, A's late write refused"
        % dt)


if __name__ == "__main__":
    fbtest.main(run, "lease")
