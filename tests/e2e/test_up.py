#!/usr/bin/env python3
"""End to end: scripts/up.sh, the embedded default, run for real.

With FUSIONBENCH_HOME in a temp folder, a free port and
FUSIONBENCH_EXIT_AFTER_DEMO=1, up.sh starts its private PostgreSQL, the server and a
worker, runs the demo (one job per workload) and exits 0.  Run twice: the second
run finds the first run's jobs (the data is kept).  Afterwards nothing is left
running.  A port already in use gives a clear error at once.

Builds when build/ is not there yet: give it a generous ctest timeout."""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

RUN_TIMEOUT = int(os.environ.get("FB_E2E_UP_TIMEOUT", "1200"))


def up_env(home, port, pg_port):
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    env.update(FUSIONBENCH_HOME=home, FUSIONBENCH_PORT=str(port),
               FUSIONBENCH_PG_PORT=str(pg_port), FUSIONBENCH_EXIT_AFTER_DEMO="1",
               FUSIONBENCH_DEMO_ITERATIONS=os.environ.get("FB_E2E_DEMO_ITERATIONS", "3"))
    if os.environ.get("FB_BIN_DIR"):
        env["FUSIONBENCH_BUILD_DIR"] = os.environ["FB_BIN_DIR"]
    return env


def run_up(env, timeout):
    script = os.path.join(fbtest.source_dir(), "scripts", "up.sh")
    t0 = time.monotonic()
    r = subprocess.run([script], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    log("up.sh exited %d after %.1f s" % (r.returncode, time.monotonic() - t0))
    return r


def port_open(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


def t_port_in_use(home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        r = run_up(up_env(home, port, fbtest.free_port()), 60)
    check(r.returncode != 0, "up.sh on a busy port should fail")
    check("port %d is already in use" % port in r.stderr,
          "clear error for a busy port, got: %r" % r.stderr[-500:])


def demo_jobs(home):
    """(id, state) of the demo jobs in the private cluster, which is started
    for the query and stopped again."""
    pg = os.path.join(fbtest.source_dir(), "scripts", "pg.sh")
    r = subprocess.run([pg, "start", os.path.join(home, "pg"), str(fbtest.free_port())],
                       capture_output=True, text=True)
    check(r.returncode == 0, "pg.sh start of up.sh's cluster failed: %s" % r.stderr[-1000:])
    url = r.stdout.strip().splitlines()[-1]
    try:
        rows = fbtest.psql(url, "SELECT id, state FROM jobs "
                                "WHERE spec->'labels'->>'demo' = 'up' ORDER BY id")
    finally:
        subprocess.run([pg, "stop", os.path.join(home, "pg")], capture_output=True)
    return [(int(i), s) for i, s in rows]


def run_demo(home, n_run):
    port, pg_port = fbtest.free_port(), fbtest.free_port()
    r = run_up(up_env(home, port, pg_port), RUN_TIMEOUT)
    if r.returncode != 0:
        print(r.stdout[-4000:], "\n---- stderr ----\n", r.stderr[-4000:], flush=True)
        for name in ("server.log", "worker.log"):
            p = os.path.join(home, "log", name)
            if os.path.exists(p):
                with open(p, errors="replace") as f:
                    print("---- %s ----\n%s" % (name, f.read()[-3000:]), flush=True)
    check_eq(r.returncode, 0, "up.sh run %d exit status" % n_run)
    check("10 of 10 jobs succeeded" in r.stdout, "demo summary in stdout: %r" % r.stdout[-800:])
    check("http://127.0.0.1:%d/" % port in r.stdout, "dashboard URL printed")
    for w in ("gemm_bias_relu", "attention", "elementwise_chain"):
        check(w in r.stdout, "live summary names %s" % w)
    check(not port_open(port), "server still listening after up.sh exited")
    check(not port_open(pg_port), "private PostgreSQL still running after up.sh exited")
    return r


def run(home):
    t_port_in_use(home)
    run_demo(home, 1)
    first = demo_jobs(home)
    check_eq(len(first), 10, "demo jobs after run 1")
    check(all(s == "succeeded" for _, s in first), "run 1 jobs all succeeded: %r" % first)
    run_demo(home, 2)
    both = demo_jobs(home)
    check_eq(len(both), 20, "demo jobs after run 2 (run 1's are kept)")
    check(set(first) <= set(both), "run 1's jobs unchanged after run 2")
    check(all(s == "succeeded" for _, s in both), "all demo jobs succeeded: %r" % both)


def main():
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        print("skipped: FB_TEST_DATABASE_URL not set", flush=True)
        sys.exit(fbtest.SKIP)
    home = tempfile.mkdtemp(prefix="fb-e2e-up-")
    os.chmod(home, 0o755)  # the cluster's owner (postgres, as root) must enter it
    ok = False
    try:
        run(home)
        ok = True
    except Exception as e:
        import traceback
        traceback.print_exc()
        print("FAILED: %s" % e, flush=True)
    finally:
        pg = os.path.join(fbtest.source_dir(), "scripts", "pg.sh")
        subprocess.run([pg, "stop", os.path.join(home, "pg")], capture_output=True)
        shutil.rmtree(home, ignore_errors=True)
    print("up: %s" % ("PASSED" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
