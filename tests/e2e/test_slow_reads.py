#!/usr/bin/env python3
"""End to end: expensive reads cannot stall the API (issue 13, hardening item 4).

A transaction holds an exclusive lock on result_rows, so every GET /results
blocks in the database, as the slowest reads would.  Eight of them at once hold
all of the server's database connections.  Meanwhile /healthz and /readyz must
answer at once (spare HTTP threads), and every blocked read must end within
the server's statement timeout with 503 "timeout" (or "unavailable" when it
never got a connection), not hang.  And a read whose size alone is too big
(points x limit) is refused before it starts."""

import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

TIMEOUT_MS = 2000


def hold_lock(env):
    """Starts a session that locks result_rows for 60 s; returns the process."""
    p = subprocess.Popen(["psql", "-X", "-q", "-d", env.db_url, "-c",
                          "BEGIN; LOCK TABLE result_rows IN ACCESS EXCLUSIVE MODE;"
                          " SELECT pg_sleep(60); COMMIT;"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=dict(os.environ, PGAPPNAME="fb-test-locker"))
    fbtest.wait_until(lambda: env.sql("SELECT count(*) FROM pg_locks l JOIN pg_class c"
                                      " ON c.oid = l.relation WHERE c.relname = 'result_rows'"
                                      " AND l.mode = 'AccessExclusiveLock' AND l.granted")
                      [0][0] == "1", 30, "the lock on result_rows")
    return p


def run(env):
    env.start_server(["--threads", "4", "--statement-timeout-ms", str(TIMEOUT_MS)])
    st, _, body = env.get("/api/v1/results?points=500&limit=500")
    check_eq((st, body["error"]["field"]), (400, "points"), "a read too big by its size alone")
    check_eq(env.get("/api/v1/results?points=500&limit=50")[0], 200, "500 x 50 is allowed")

    locker = hold_lock(env)
    answers = []
    try:
        def read():
            t0 = time.monotonic()
            st, _, body = fbtest.http(env.base, "GET", "/api/v1/results", timeout=60)
            answers.append((st, (body.get("error") or {}).get("code"), time.monotonic() - t0,
                            (body.get("error") or {}).get("message", "")))
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        time.sleep(0.5)  # the reads now hold every connection, blocked on the lock
        for path in ("/healthz", "/readyz", "/healthz", "/readyz"):
            t0 = time.monotonic()
            st = env.get(path)[0]
            took = time.monotonic() - t0
            check(st == 200 and took < 1.0, "%s under load: %s after %.2f s" % (path, st, took))
        for t in threads:
            t.join(timeout=60)
    finally:  # the backend outlives its client in pg_sleep: end it in the database
        env.sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'fb-test-locker'")
        locker.kill()
        locker.wait()
    check_eq(len(answers), 8, "answers to the blocked reads")
    for st, code, took, msg in answers:
        check(st == 503 and code in ("timeout", "unavailable"),
              "a blocked read: %s %s (%s)" % (st, code, msg))
        check(took < 15, "a blocked read ended after %.1f s" % took)
        check("ERROR" not in msg and "canceling" not in msg, "the database's words: %r" % msg)
    timeouts = sum(1 for a in answers if a[1] == "timeout")
    check(timeouts >= 4, "reads ended by the statement timeout: %d of 8" % timeouts)
    check_eq(env.get("/api/v1/results")[0], 200, "reads work again once the lock is gone")
    log("8 blocked reads: %d timed out, the rest unavailable, longest %.1f s; health answered"
        % (timeouts, max(a[2] for a in answers)))


if __name__ == "__main__":
    fbtest.main(run, "slow_reads")
