#!/usr/bin/env python3
"""End to end: PostgreSQL over TLS with sslmode=verify-full, as workers on other
hosts use it (docs/DEPLOY.md).

The test makes a throwaway CA and a server certificate for 127.0.0.1/localhost
with openssl, starts its own PostgreSQL cluster that accepts TLS connections
only (pg_hba: hostssl, hostnossl rejected), and runs a server and a worker with
sslmode=verify-full and the CA as sslrootcert: a job succeeds and every session
of the database is encrypted.  Then what verify-full is for: a certificate from
another CA, or one for another host name, is refused, and the worker says why.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

PG = os.path.join(fbtest.source_dir(), "scripts", "pg.sh")


def sh(argv, **kw):
    r = subprocess.run(argv, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise fbtest.TestFailure("%s failed: %s" % (" ".join(argv), r.stderr.strip()[-800:]))
    return r.stdout


def make_ca(d, name):
    key, crt = os.path.join(d, name + ".key"), os.path.join(d, name + ".crt")
    sh(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
        "-nodes", "-days", "2", "-subj", "/CN=FusionBench test CA %s" % name,
        "-keyout", key, "-out", crt])
    return key, crt


def make_server_cert(d, name, ca, sans):
    """A server certificate signed by ca for the subjectAltNames sans."""
    key, csr, crt = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".crt"))
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=serverAuth\n" % sans)
    sh(["openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
        "-subj", "/CN=%s" % name, "-keyout", key, "-out", csr])
    sh(["openssl", "x509", "-req", "-in", csr, "-CA", ca[1], "-CAkey", ca[0], "-CAcreateserial",
        "-days", "2", "-extfile", ext, "-out", crt])
    return key, crt


def as_owner(argv):
    return ["runuser", "-u", "postgres", "--"] + argv if os.geteuid() == 0 else argv


def install_cert(data, key, crt):
    """Copies the server's key and certificate into the data folder (owned by the
    cluster's owner, key mode 0600 as PostgreSQL demands)."""
    for src, dst, mode in ((key, "server.key", 0o600), (crt, "server.crt", 0o644)):
        path = os.path.join(data, dst)
        shutil.copyfile(src, path)
        os.chmod(path, mode)
        if os.geteuid() == 0:
            shutil.chown(path, "postgres", "postgres")


class Cluster:
    """A cluster of the test's own (scripts/pg.sh) that takes TLS only."""

    def __init__(self, tmp):
        self.dir = os.path.join(tmp, "pg")
        self.port = fbtest.free_port()

    def start(self):
        out = sh([PG, "start", self.dir, str(self.port)], env=dict(os.environ, FB_PG_FAST="1"))
        return out.strip().splitlines()[-1]

    def stop(self):
        subprocess.run([PG, "stop", self.dir], capture_output=True)

    def tls_only(self, url, key, crt):
        data = os.path.join(self.dir, "data")
        install_cert(data, key, crt)
        hba = os.path.join(data, "pg_hba_tls.conf")
        with open(hba, "w") as f:  # unix socket for pg.sh; TCP only with TLS
            f.write("local all all trust\n"
                    "hostssl all all 127.0.0.1/32 trust\n"
                    "hostnossl all all 0.0.0.0/0 reject\n")
        if os.geteuid() == 0:
            shutil.chown(hba, "postgres", "postgres")
        for stmt in ("ALTER SYSTEM SET ssl = on",
                     "ALTER SYSTEM SET hba_file = '%s'" % hba):
            fbtest.psql(url, stmt)
        self.stop()
        return self.start()


def with_query(url, **params):
    return url + ("&" if "?" in url else "?") + "&".join("%s=%s" % kv for kv in params.items())


def refused(url, what, want):
    """A worker given url must fail to connect, saying want."""
    # The worker retries an unreachable database forever (backoff): start it,
    # read its first warning, stop it.
    p = subprocess.Popen([fbtest.find_bin("fusionbench-worker"), "--database-url", url,
                          "--device", "cpu", "--id", "tls/refused"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=dict(os.environ, **fbtest.NO_INDUCTOR))
    lines = []
    try:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
            if "database:" in line:
                break
    finally:
        p.terminate()
        p.wait(timeout=15)
    text = "".join(lines)
    check(want in text, "%s: the worker should be refused with %r, said: %r" % (what, want, text))
    log("%s: refused (%s)" % (what, want))


def run(tmp):
    ca = make_ca(tmp, "ca")
    other_ca = make_ca(tmp, "other-ca")
    good = make_server_cert(tmp, "db", ca, "DNS:localhost,IP:127.0.0.1")
    cluster = Cluster(tmp)
    try:
        plain = cluster.start()
        url = cluster.tls_only(plain, *good)
        tls = with_query(url, sslmode="verify-full", sslrootcert=ca[1])

        # Plain TCP is refused now: TLS is not optional.
        r = subprocess.run(["psql", "-X", "-At", "-d", with_query(url, sslmode="disable"),
                            "-c", "SELECT 1"], capture_output=True, text=True)
        check(r.returncode != 0 and "no encryption" in r.stderr,
              "a connection without TLS must be rejected: %r" % r.stderr)

        env = fbtest.Env.__new__(fbtest.Env)  # an Env on this cluster's database
        env.name, env.procs, env.n_workers = "tls", [], 0
        env.tmp = tempfile.mkdtemp(prefix="fb-e2e-tls-logs-")
        env.admin_url = with_query(fbtest.db_url_with_name(url, "postgres"), sslmode="verify-full",
                                   sslrootcert=ca[1])
        env.dbname = "fusionbench"
        env.db_url = tls
        ok = False
        try:
            env.start_server()
            w = env.start_worker()
            job = env.submit({"workload": "softmax", "device": "cpu", "iterations": 3})
            job = env.wait_job(job["id"], timeout=120)
            check_eq(job["state"], "succeeded", "a job over TLS (error %r)" % job.get("error"))
            check_eq(job["worker"], w.wid, "worker of the job")
            rows = fbtest.psql(tls, "SELECT count(*), count(*) FILTER (WHERE s.ssl),"
                                    " min(s.version) FROM pg_stat_activity a"
                                    " JOIN pg_stat_ssl s USING (pid)"
                                    " WHERE a.datname = 'fusionbench' AND a.backend_type ="
                                    " 'client backend'")
            total, encrypted, version = int(rows[0][0]), int(rows[0][1]), rows[0][2]
            check(total >= 3 and encrypted == total,
                  "every session encrypted: %d of %d (%s)" % (encrypted, total, version))
            log("server and worker over TLS (%s, verify-full): %d sessions, all encrypted"
                % (version, total))
            ok = True
        finally:
            if not ok:
                env.dump_logs()
            for _, p, _ in env.procs:
                p.terminate()
            for _, p, _ in env.procs:
                p.wait(timeout=20)
            shutil.rmtree(env.tmp, ignore_errors=True)

        # What verify-full guards against.
        refused(with_query(url, sslmode="verify-full", sslrootcert=other_ca[1]),
                "a server certificate from another CA", "certificate verify failed")
        wrong = make_server_cert(tmp, "elsewhere", ca, "DNS:db.example.org")
        install_cert(os.path.join(cluster.dir, "data"), *wrong)
        cluster.stop()
        cluster.start()
        refused(tls, "a certificate for another host name", "does not match host name")
    finally:
        cluster.stop()


def main():
    if not os.environ.get("FB_TEST_DATABASE_URL"):
        print("skipped: FB_TEST_DATABASE_URL not set", flush=True)
        sys.exit(fbtest.SKIP)
    if not shutil.which("openssl"):
        print("skipped: no openssl to make the test's CA", flush=True)
        sys.exit(fbtest.SKIP)
    tmp = tempfile.mkdtemp(prefix="fb-e2e-tls-")
    os.chmod(tmp, 0o755)  # the cluster's owner (postgres, as root) must enter it
    ok = False
    try:
        run(tmp)
        ok = True
    except Exception:
        import traceback
        traceback.print_exc()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("tls: %s" % ("PASSED" if ok else "FAILED"), flush=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
