#!/usr/bin/env python3
"""End to end: scripts/up.sh, the embedded default, run for real.

With FUSIONBENCH_HOME in a temp folder, a free port and
FUSIONBENCH_EXIT_AFTER_DEMO=1, up.sh starts its private PostgreSQL, the server and a
worker, runs the demo (a suite of one job per workload) and exits 0.  Run twice:
the second run finds the first run's jobs (the data is kept).  Afterwards nothing
is left running.  A port already in use gives a clear error at once.

As root the temp folder is closed (mode 0700, like /root): the postgres user
cannot reach it, so up.sh must place the cluster elsewhere and say so.  The
second run stays up after the demo, as a user runs it: during its demo the
worker is SIGKILLed mid-job (up.sh restarts it, the server stays up, and the
killed job is requeued and succeeds, with exactly one result); then each
command of up.sh's closing help is run against it as a user would type it
(the client's PATH and server from its "client" line), and each must succeed
and say what it should; Ctrl-C then stops everything, with no error where
the server took the Ctrl-C first (a terminal signals the whole group).

Builds when build/ is not there yet: give it a generous ctest timeout."""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

RUN_TIMEOUT = int(os.environ.get("FB_E2E_UP_TIMEOUT", "1200"))


def up_env(home, port, pg_port):
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    env.update(FUSIONBENCH_HOME=home, FUSIONBENCH_PORT=str(port),
               FUSIONBENCH_PG_PORT=str(pg_port), FUSIONBENCH_EXIT_AFTER_DEMO="1",
               FUSIONBENCH_DEMO_ITERATIONS=os.environ.get("FB_E2E_DEMO_ITERATIONS", "3"),
               # the demo is native jobs: no inductor probe (it imports torch,
               # 10 s of a 2-vCPU VM at each of the four worker starts)
               **fbtest.NO_INDUCTOR)
    if os.environ.get("FB_BIN_DIR"):
        env["FUSIONBENCH_BUILD_DIR"] = os.environ["FB_BIN_DIR"]
    return env


UP = os.path.join(fbtest.source_dir(), "scripts", "up.sh")


def run_up(env, timeout):
    t0 = time.monotonic()
    r = subprocess.run([UP], env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=timeout)
    log("up.sh exited %d after %.1f s" % (r.returncode, time.monotonic() - t0))
    return r


def descendants(pid):
    out, todo = [], [pid]
    while todo:
        kids = fbtest.children_of(todo.pop())
        out += kids
        todo += kids
    return out


def cmdline(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().split(b"\0")[0].decode(errors="replace")
    except OSError:
        return ""


def comm(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def kill_worker_mid_job(p, timeout=120):
    """SIGKILLs up.sh's worker while it runs a job (its job child, a fork of the
    worker, exists: the job is claimed and not yet settled; the inductor probe,
    a python child at start, is not one, nor the roofline's child at start,
    named fb-roofline); returns the worker's pid."""
    end = time.monotonic() + timeout
    seen = set()  # job-child candidates of the last poll: a child is taken on its second
    while time.monotonic() < end:  # sighting, after the roofline's would have named itself
        if p.poll() is not None:  # say why: its exit status and last words
            out, err = p.communicate()
            check(False, "up.sh exited %d before its worker ran a job: %s" % (
                p.returncode, (out + err)[-2000:]))
        workers = [d for d in descendants(p.pid) if cmdline(d).endswith("fusionbench-worker")]
        now = set()
        for w in workers:  # the worker is the one whose parent is no worker
            if w in [k for x in workers for k in fbtest.children_of(x)]:
                continue
            kids = {k for k in fbtest.children_of(w)
                    if cmdline(k).endswith("fusionbench-worker") and comm(k) != "fb-roofline"}
            if kids & seen:
                os.kill(w, signal.SIGKILL)
                log("SIGKILLed up.sh's worker %d mid-job" % w)
                return w
            now |= kids
        seen = now
        time.sleep(0.01)
    raise fbtest.TestFailure("no job ran within %s s" % timeout)


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
    """(id, state, attempt, results) of the demo jobs in the private cluster,
    which is started for the query and stopped again."""
    pg = os.path.join(fbtest.source_dir(), "scripts", "pg.sh")
    r = subprocess.run([pg, "start", os.path.join(home, "pg"), str(fbtest.free_port())],
                       capture_output=True, text=True)
    check(r.returncode == 0, "pg.sh start of up.sh's cluster failed: %s" % r.stderr[-1000:])
    url = r.stdout.strip().splitlines()[-1]
    try:
        rows = fbtest.psql(url, "SELECT j.id, j.state, j.attempt,"
                                " (SELECT count(*) FROM results r WHERE r.job_id = j.id)"
                                " FROM jobs j WHERE spec->'labels'->>'demo' = 'up' ORDER BY id")
    finally:
        subprocess.run([pg, "stop", os.path.join(home, "pg")], capture_output=True)
    return [(int(i), s, int(a), int(n)) for i, s, a, n in rows]


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
    check("#/suites/" in r.stdout, "the demo suite's page printed")
    return r


# What each help command's output must contain (the label is the help's).
HELP_EXPECT = {"jobs": "succeeded", "submit": "speedup", "suite": "softmax",
               "workers": "cpu", "models": "VISIBLE", "api": '"items"', "metrics": "fusionbench_",
               "local run": "fused"}


def help_lines(out):
    """{label: command} from up.sh's closing help in its stdout."""
    text = out[out.index("FusionBench is up."):]
    text = text[:text.index("Ctrl-C stops")]
    cmds = {}
    for line in text.splitlines()[1:]:
        label, cmd = line[:14].strip(), line[14:].strip()
        if label:
            cmds[label] = cmd
    return cmds


def t_stay_up(home):
    """The second run: up.sh stays up after its demo; its worker is killed
    mid-job during the demo, then the closing help's commands are run."""
    port, pg_port = fbtest.free_port(), fbtest.free_port()
    env = up_env(home, port, pg_port)
    env["FUSIONBENCH_EXIT_AFTER_DEMO"] = "0"
    # The killed job is requeued after 6 s.  Not less: the new worker's own
    # lease is stale-s / 2 with a heartbeat every stale-s / 4, and with 3 s a
    # loaded CI machine's late heartbeats cost a job its lease (test_rescue).
    env["FUSIONBENCH_STALE_S"] = "6"
    out_path, err_path = os.path.join(home, "up2.out"), os.path.join(home, "up2.err")
    with open(out_path, "w") as out, open(err_path, "w") as err:
        p = subprocess.Popen([UP], env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                             start_new_session=True)
    try:
        kill_worker_mid_job(p)
        end = time.monotonic() + RUN_TIMEOUT
        while "running; Ctrl-C to stop" not in open(err_path).read():
            check(p.poll() is None, "up.sh exited before it was up: %s" % open(err_path).read()[-1500:])
            check(time.monotonic() < end, "up.sh not up within %d s" % RUN_TIMEOUT)
            time.sleep(0.5)
        stdout, stderr = open(out_path).read(), open(err_path).read()
        check("10 of 10 jobs succeeded" in stdout, "run 2's demo summary: %r" % stdout[-800:])
        check("the worker died (signal 9); restarting it" in stderr,
              "up.sh says it restarts the killed worker: %r" % stderr[-1500:])
        cmds = help_lines(stdout)
        check_eq(sorted(set(HELP_EXPECT) | {"dashboard", "client", "logs"}), sorted(cmds),
                 "the help's commands")
        user = dict(os.environ)
        for part in cmds["client"].split()[1:]:  # export PATH=... FUSIONBENCH_URL=...
            k, _, v = part.partition("=")
            user[k] = v.replace("$PATH", user.get("PATH", ""))
        check_eq(user["FUSIONBENCH_URL"], "http://127.0.0.1:%d" % port, "the client's server")
        check(os.path.isdir(cmds["logs"]), "the logs folder exists: %s" % cmds["logs"])
        dash = cmds["dashboard"].split()[0]
        with urllib.request.urlopen(dash, timeout=10) as r:
            check_eq(r.status, 200, "the dashboard answers")
        for label, want in HELP_EXPECT.items():
            r = subprocess.run(["bash", "-c", cmds[label]], env=user, capture_output=True,
                               text=True, timeout=600)
            check_eq(r.returncode, 0, "help command %r: %s" % (cmds[label], r.stderr[-800:]))
            check(want in r.stdout, "help command %r says %r: %r" % (cmds[label], want,
                                                                       r.stdout[-800:]))
            log("help %-9s ok: %s" % (label, cmds[label]))
        # Ctrl-C at a terminal signals the whole process group, and the
        # worker and the server may take it and stop before up.sh does: those
        # two first, then the group, as such a Ctrl-C can land; up.sh stops
        # the rest and says no error, nor that the worker drained
        server = [d for d in descendants(p.pid) if cmdline(d).endswith("fusionbench-server")]
        worker = [d for d in descendants(p.pid) if cmdline(d).endswith("fusionbench-worker")]
        check(len(server) == 1 and len(worker) == 1,
              "up.sh's server and worker among its processes: %r, %r" % (server, worker))
        os.kill(worker[0], signal.SIGINT)
        os.kill(server[0], signal.SIGINT)
        time.sleep(2)  # up.sh looks at its server every second
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
        p.wait(timeout=120)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    check(not port_open(port), "server still listening after Ctrl-C")
    check(not port_open(pg_port), "private PostgreSQL still running after Ctrl-C")
    err = open(err_path).read()
    tail = err[err.index("running; Ctrl-C to stop"):]
    check("error:" not in tail and "exited cleanly" not in tail,
          "Ctrl-C stops up.sh without an error or a drained worker: %r" % err[-800:])


def run(home, closed):
    t_port_in_use(home)
    r = run_demo(home, 1)
    if closed:
        check("user postgres cannot reach" in r.stderr and os.path.islink(os.path.join(home, "pg")),
              "a closed folder: up.sh places the cluster elsewhere and says so: %r"
              % r.stderr[-1500:])
    first = demo_jobs(home)
    check_eq(len(first), 10, "demo jobs after run 1")
    check(all(j[1:] == ("succeeded", 1, 1) for j in first),
          "run 1 jobs all succeeded at the first attempt, one result each: %r" % first)
    t_stay_up(home)
    both = demo_jobs(home)
    check_eq(len(both), 20, "demo jobs after run 2 (run 1's are kept)")
    check(set(first) <= set(both), "run 1's jobs unchanged after run 2")
    check(all(s == "succeeded" and n == 1 for _, s, _, n in both),
          "all demo jobs succeeded, exactly one result each: %r" % both)
    again = [j for j in both if j[2] == 2]
    check_eq(len(again), 1, "jobs run twice (the killed worker's): %r" % both)
    log("the killed worker's job %d succeeded at attempt 2, one result" % again[0][0])


def main():
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        print("skipped: FB_TEST_DATABASE_URL not set", flush=True)
        sys.exit(fbtest.SKIP)
    # As root, a closed folder (like /root, 0700) around FUSIONBENCH_HOME.
    closed = os.geteuid() == 0
    top = tempfile.mkdtemp(prefix="fb-e2e-up-")
    os.chmod(top, 0o700 if closed else 0o755)
    home = os.path.join(top, "clone", ".fusionbench")
    os.makedirs(home)
    ok = False
    try:
        run(home, closed)
        ok = True
    except Exception as e:
        import traceback
        traceback.print_exc()
        print("FAILED: %s" % e, flush=True)
    finally:
        pg = os.path.join(fbtest.source_dir(), "scripts", "pg.sh")
        subprocess.run([pg, "stop", os.path.join(home, "pg")], capture_output=True)
        real = os.path.realpath(os.path.join(home, "pg"))
        if real.startswith("/var/lib/fusionbench/"):
            shutil.rmtree(real, ignore_errors=True)
        shutil.rmtree(top, ignore_errors=True)
    print("up: %s" % ("PASSED" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
