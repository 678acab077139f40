#!/usr/bin/env python3
"""End to end: the fusionbench command-line client against a real server,
worker and PostgreSQL.

Without auth (the embedded default): submit --wait prints fusionbench-run's
table with the job's numbers and exits 0; --json prints the server's job and
nothing else; non-tty waiting prints state lines; a queued job is canceled
(waiting on it exits 1); Ctrl-C stops the waiting, not the job; a job that
fails at run time exits 1; jobs falls back to all jobs (owner=me is 400
there); bad flags exit 2; an unreachable server exits 3.  With --auth (a second
server on the same database): login checks and stores the token (0600 in a
0700 folder), later commands use it, jobs lists only the caller's, and a bad
token exits 3 with the server's message, saving nothing."""

import json
import os
import signal
import stat
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

SMALL = ["gemm_bias_relu", "--param", "m=64", "--param", "k=64", "--param", "n=64",
         "--warmup", "2", "--iterations", "20", "--device", "cpu"]
# Long enough (a second or more on 2 cores) for the waiting to see it run.
MEDIUM = ["gemm_bias_relu", "--param", "m=512", "--param", "k=1024", "--param", "n=1024",
          "--warmup", "1", "--iterations", "100", "--device", "cpu"]
HEADER = ("variant      status            median ms     p90 ms 95% CI of median           cv "
          "kernels fused k/ops  peak MiB   max rel  speedup  95% CI of speedup  verdict")
VERDICT = {"faster": "faster", "slower": "slower", "no_difference": "no difference"}


class Client:
    def __init__(self, env, home):
        self.env = env
        self.home = home
        self.bin = find_client()

    def environ(self, extra=None):
        e = {k: v for k, v in os.environ.items() if not k.startswith("FUSIONBENCH_")}
        e["HOME"] = self.home
        e["XDG_CONFIG_HOME"] = os.path.join(self.home, "xdg")
        e.update(extra or {})
        return e

    def run(self, *args, server=True, stdin=None, env=None, timeout=120):
        argv = [self.bin] + (["--server", self.env.base] if server else []) + list(args)
        r = subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout,
                           env=self.environ(env))
        log("$ %s -> %d" % (" ".join(argv[1:]), r.returncode))
        return r

    def popen(self, *args):
        argv = [self.bin, "--server", self.env.base] + list(args)
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=self.environ())


def client_path():
    root = os.environ.get("FB_BIN_DIR") or os.path.join(fbtest.source_dir(), "build")
    return os.path.join(root, "client", "fusionbench")


def find_client():
    p = client_path()
    check(os.access(p, os.X_OK), "%s not built" % p)
    return p


def expect_rc(r, want, what):
    check(r.returncode == want, "%s: exit %d, want %d\nstdout: %s\nstderr: %s" %
          (what, r.returncode, want, r.stdout[-2000:], r.stderr[-2000:]))


def check_table(out, job):
    """The table has fusionbench-run's header and, per variant, the job's numbers."""
    lines = out.splitlines()
    spec = job["spec"]
    check_eq(lines[0], "%s  engine %s  device %s  dtype %s  batch %d  warmup %d  iterations %d" %
             (spec["workload"], spec["engine"], spec["device"], spec["dtype"], spec["batch_size"],
              spec["warmup"], spec["iterations"]), "table's first line")
    check_eq(lines[2], HEADER, "table's column header")
    variants = job["result"]["variants"]
    base = next(v for v in variants if v["name"] == job["result"]["comparison"]["baseline"])
    cmp_ = job["result"]["comparison"]
    for i, v in enumerate(variants):
        line = lines[3 + i]
        check_eq(", unstable" in line[:30], v["unstable"], "%s's unstable mark" % v["name"])
        cols = line.replace(", unstable", "").split()
        check_eq(cols[0], v["name"], "row %d's variant" % i)
        check_eq(cols[1], v["status"], "row %d's status" % i)
        check_eq(cols[2], "%.4f" % v["latency_ms"]["median"], "%s's median" % v["name"])
        check_eq(cols[3], "%.4f" % v["latency_ms"]["p90"], "%s's p90" % v["name"])
        check_eq(cols[7], "%d" % v["kernels"], "%s's kernels" % v["name"])
        check_eq(cols[8], "%d/%d" % (v["fused_kernels"], v["fused_ops"]),
                 "%s's fused kernels/ops" % v["name"])
        sp = base["latency_ms"]["median"] / v["latency_ms"]["median"]
        check_eq(cols[11], "%.3fx" % sp, "%s's speedup" % v["name"])
        ci = cmp_["speedup_ci95"].get(v["name"])
        if v is base:
            check(cols[-2:] == ["-", "-"], "the baseline has no interval: %r" % line)
        else:
            check(line.rstrip().endswith("[%.3f, %.3f]     %s" % (ci[0], ci[1],
                                                                VERDICT[cmp_["change"][v["name"]]])),
                  "%s's interval and verdict: %r" % (v["name"], line))
    check(lines[3 + len(variants) + 1].startswith("baseline %s; plan " % base["name"]),
          "baseline line: %r" % lines[3 + len(variants) + 1])


def no_auth(env, c):
    # Usage errors: exit 2, the bad flag named.
    r = c.run("submit", "softmax", "--batch-size", "zero")
    expect_rc(r, 2, "bad --batch-size")
    check("--batch-size" in r.stderr and "usage: fusionbench submit" in r.stderr, r.stderr)
    r = c.run("jobs", "--frobnicate")
    expect_rc(r, 2, "unknown flag")
    check("--frobnicate: unknown option" in r.stderr, r.stderr)
    expect_rc(c.run("compare", "1"), 2, "compare with one id")
    expect_rc(c.run("status", "x1"), 2, "status of a non-id")
    # Unreachable: exit 3.
    r = c.run("--server", "http://127.0.0.1:%d" % fbtest.free_port(), "workers", server=False)
    expect_rc(r, 3, "unreachable server")
    check("cannot reach the server" in r.stderr, r.stderr)

    # No worker yet: a job stays queued.  Ctrl-C stops the waiting only.
    r = c.run("submit", *SMALL)
    expect_rc(r, 0, "submit")
    jid = int(r.stdout.strip())
    check_eq(env.job(jid)["state"], "queued", "state with no worker")
    p = c.popen("status", str(jid), "--wait")
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=20)
    check_eq(p.returncode, 130, "exit status after Ctrl-C (stderr %r)" % err)
    check("fusionbench status %d --wait" % jid in err, "resume hint: %r" % err)
    check_eq(env.job(jid)["state"], "queued", "Ctrl-C does not cancel the job")
    # Cancel it; waiting on a canceled job exits 1.
    r = c.run("cancel", str(jid))
    expect_rc(r, 0, "cancel a queued job")
    check_eq(r.stdout.strip(), "job %d: canceled" % jid, "cancel's output")
    check_eq(env.job(jid)["state"], "canceled", "state after cancel")
    r = c.run("status", str(jid), "--wait")
    expect_rc(r, 1, "waiting on a canceled job")
    expect_rc(c.run("cancel", str(jid)), 3, "cancel a finished job (409)")
    log("cancel of a queued job, Ctrl-C while waiting: ok")

    env.start_worker(["--heartbeat-ms", "200"])  # progress is stored with each heartbeat
    # submit --wait: the table, the job's numbers; state lines on a non-tty stderr.
    r = c.run("submit", *MEDIUM, "--label", "who=e2e", "--wait")
    expect_rc(r, 0, "submit --wait")
    jid = int(r.stderr.split("job ", 1)[1].split()[0])
    job = env.job(jid)
    check_eq(job["state"], "succeeded", "job state")
    check_eq(job["spec"]["labels"], {"who": "e2e"}, "labels sent")
    check_eq(job["spec"]["params"], {"m": 512, "k": 1024, "n": 1024}, "params sent as numbers")
    check_table(r.stdout, job)
    states = [ln for ln in r.stderr.splitlines() if ln.startswith("job %d: " % jid)]
    check(any(": running" in ln for ln in states), "a running line: %r" % r.stderr)
    check(any(", timing" in ln for ln in states), "a timing line: %r" % r.stderr)
    check(states[-1].startswith("job %d: succeeded" % jid), "last line: %r" % states)
    keys = [ln.split(" (")[0] for ln in states]
    check(len(keys) == len(set(keys)), "one line per change: %r" % states)
    log("submit --wait: %d state lines, table matches job %d" % (len(states), jid))

    # --json: the server's job and nothing else.
    r = c.run("submit", *SMALL, "--json", "--wait")
    expect_rc(r, 0, "submit --json --wait")
    got = json.loads(r.stdout)
    check_eq(got, env.job(got["id"]), "--json equals the server's job")
    r = c.run("status", str(jid), "--json")
    expect_rc(r, 0, "status --json")
    check_eq(json.loads(r.stdout), env.job(jid), "status --json")
    r = c.run("workers", "--json")
    check_eq(json.loads(r.stdout)["items"][0]["id"], env.get("/api/v1/workers")[2]["items"][0]["id"],
             "workers --json")

    # A job that fails at run time exits 1 with the worker's error.
    r = c.run("submit", "gemm_bias_relu", "--param", "m=0", "--iterations", "2", "--wait")
    expect_rc(r, 1, "a failing job")
    jid_f = int(r.stderr.split("job ", 1)[1].split()[0])
    fj = env.job(jid_f)
    check_eq(fj["state"], "failed", "state of the failing job")
    check(fj["error"]["message"] in r.stdout, "the error is shown: %r" % r.stdout)

    # jobs: owner=me is 400 without auth: all jobs, said on stderr.
    r = c.run("jobs", "--limit", "50")
    expect_rc(r, 0, "jobs without auth")
    check("without authentication" in r.stderr, r.stderr)
    ids = [int(ln.split()[0]) for ln in r.stdout.splitlines()[1:] if ln[:1].isdigit()]
    want = [j["id"] for j in env.get("/api/v1/jobs?limit=50")[2]["items"]]
    check_eq(ids, want, "jobs listed")
    r = c.run("jobs", "--state", "failed", "--json")
    check_eq([j["id"] for j in json.loads(r.stdout)["items"]], [jid_f], "jobs --state failed")
    # results, compare, workloads answer and print.
    r = c.run("results", "--workload", "gemm_bias_relu")
    expect_rc(r, 0, "results")
    check("gemm_bias_relu" in r.stdout and "fused" in r.stdout, r.stdout)
    r = c.run("compare", str(jid), str(got["id"]), "--json")
    expect_rc(r, 0, "compare")
    check_eq(json.loads(r.stdout)["a"], "job:%d" % jid, "compare's a")
    expect_rc(c.run("workloads"), 0, "workloads")
    log("json, failing job, jobs fallback, results, compare: ok")


def with_auth(env, c):
    env.admin("user", "add", "alice", "--role", "user")
    env.admin("user", "add", "bob", "--role", "user")
    alice = env.admin("token", "create", "alice")
    bob = env.admin("token", "create", "bob")
    env.start_server(["--auth"])  # the same database; env.base is now this server
    cfg = os.path.join(c.home, "xdg", "fusionbench")
    path = os.path.join(cfg, "config.json")
    # A bad token: exit 3 with the server's message, nothing saved.
    r = c.run("login", env.base, server=False, stdin="fbu_AAAAAAAAAAAA_" + "B" * 32 + "\n")
    expect_rc(r, 3, "login with a bad token")
    check("401 unauthenticated" in r.stderr, r.stderr)
    check(not os.path.exists(path), "nothing saved after a failed login")
    r = c.run("jobs", env={"FUSIONBENCH_TOKEN": "fbu_nope"})
    expect_rc(r, 3, "a bad FUSIONBENCH_TOKEN")
    check("unauthenticated" in r.stderr, r.stderr)
    # Login as alice (token piped), then commands with no --server and no token.
    r = c.run("login", env.base, server=False, stdin=alice + "\n")
    expect_rc(r, 0, "login")
    check_eq(stat.S_IMODE(os.stat(path).st_mode), 0o600, "config file mode")
    check_eq(stat.S_IMODE(os.stat(cfg).st_mode), 0o700, "config folder mode")
    with open(path) as f:
        saved = json.load(f)
    check_eq(saved, {"url": env.base, "token": alice}, "saved login")
    r = c.run("submit", *SMALL, server=False)
    expect_rc(r, 0, "submit as alice")
    mine = int(r.stdout)
    r = c.run("submit", *SMALL, server=False, env={"FUSIONBENCH_TOKEN": bob})
    expect_rc(r, 0, "submit as bob")
    bobs = int(r.stdout)
    r = c.run("jobs", "--json", server=False)
    expect_rc(r, 0, "jobs as alice")
    items = json.loads(r.stdout)["items"]
    check_eq([j["id"] for j in items], [mine], "alice's jobs only")
    check_eq(items[0]["owner"], "alice", "owner")
    r = c.run("jobs", "--all", "--json", server=False)
    ids = [j["id"] for j in json.loads(r.stdout)["items"]]
    check(mine in ids and bobs in ids, "jobs --all: %r" % ids)
    # Alice may not cancel bob's job: 403, exit 3.
    r = c.run("cancel", str(bobs), server=False)
    expect_rc(r, 3, "cancel someone else's job")
    check("403 forbidden" in r.stderr, r.stderr)
    # The saved token is only for its own server.
    r = c.run("jobs", "--server", "http://localhost:%d" % env.port, server=False)
    expect_rc(r, 3, "the saved token is not sent to another server URL")
    expect_rc(c.run("logout", server=False), 0, "logout")
    check(not os.path.exists(path), "logout removes the file")
    log("login (0600 file, 0700 folder), jobs mine/--all, 403, bad token, logout: ok")


def run(env):
    env.start_server()
    home = os.path.join(env.tmp, "home")
    os.makedirs(home)
    c = Client(env, home)
    no_auth(env, c)
    with_auth(env, c)


if __name__ == "__main__":
    if not os.access(client_path(), os.X_OK):
        print("skipped: %s not built (it needs libcurl4-openssl-dev)" % client_path())
        sys.exit(fbtest.SKIP)
    fbtest.main(run, "client")
