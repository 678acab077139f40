#!/usr/bin/env python3
"""End to end: the models people upload (issue 26), their storage and who sees them.

A server with --auth, a 3 MB archive limit and a 5 MB quota per user; alice,
bob (users), root (admin), vera (viewer).  An archive is streamed into the
database in 1 MiB chunks and reads back byte for byte; the same bytes twice
are stored once; a name is unique per owner; private models are not there for
another user (404) and only the owner or an admin deletes (403); an archive
over the limit is refused from its headers (the body unread, the database
unchanged), and one past the owner's quota too; an upload cut off midway
leaves nothing; a missing Content-Length is 411; a viewer may not upload."""

import hashlib
import http.client
import json
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

LIMIT = 3_000_000
QUOTA = 5_000_000


def upload(env, token, name, data, visibility=None, headers=None):
    q = "/api/v1/models?name=" + name + ("&visibility=" + visibility if visibility else "")
    h = {"Content-Type": "application/octet-stream", "X-FusionBench-Client": "e2e"}
    if token:
        h["Authorization"] = "Bearer " + token
    h.update(headers or {})
    st, hd, body = fbtest.http(env.base, "POST", q, raw=data, headers=h, timeout=60)
    return st, hd, body


def call(env, method, path, token):
    h = {"Authorization": "Bearer " + token, "X-FusionBench-Client": "e2e"}
    return fbtest.http(env.base, method, path, headers=h)


def code(body):
    return (body.get("error") or {}).get("code") if isinstance(body, dict) else None


def raw_request(env, head, body=b"", read=True):
    """Sends head (and body) on a socket of its own; the status line's code, or
    None when the connection was closed without one."""
    with socket.create_connection(("127.0.0.1", env.port), timeout=30) as s:
        s.sendall(head.encode() + body)
        if not read:
            return None
        data = b""
        try:
            while b"\r\n" not in data:
                got = s.recv(4096)
                if not got:
                    break
                data += got
        except ConnectionResetError:
            pass
    return int(data.split()[1]) if data.startswith(b"HTTP/1.1 ") else None


def quota_answer_waits(env, tok):
    """A refusal past the quota waits for the body (read and dropped): a client
    that writes its whole body before reading must read the 413, never meet a
    reset mid-body. One that asked Expect: 100-continue gets it at once."""
    n = 2_600_000
    head = ("POST /api/v1/models?name=second HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\nX-FusionBench-Client: e2e\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n" % (tok, n))
    with socket.create_connection(("127.0.0.1", env.port), timeout=30) as s:
        s.sendall((head + "\r\n").encode())
        s.settimeout(1.0)
        early = b""
        try:
            early = s.recv(4096)
        except socket.timeout:
            pass
        check_eq(early, b"", "no answer before the body is in (the refusal waits for it)")
        s.settimeout(30)
        s.sendall(os.urandom(n))  # every byte taken: no reset
        r = http.client.HTTPResponse(s)
        r.begin()
        status, body = r.status, json.loads(r.read())
    check_eq((status, body["error"]["code"]), (413, "storage_quota_exceeded"),
             "the quota's 413, after the body")
    got = raw_request(env, head + "Expect: 100-continue\r\n\r\n")
    check_eq(got, 413, "Expect: 100-continue: the refusal at once, in place of 100 Continue")


def counts(env):
    return tuple(int(x) for x in env.sql(
        "SELECT (SELECT count(*) FROM model_blobs), (SELECT count(*) FROM model_chunks),"
        " (SELECT count(*) FROM models)")[0])


def archive(env, tok, model_id):
    h = {"Authorization": "Bearer " + tok}
    import urllib.request
    req = urllib.request.Request(env.base + "/api/v1/models/%d/archive" % model_id, headers=h)
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.headers, r.read()


def test(env):
    env.start_server(["--auth", "--max-model-bytes", str(LIMIT), "--model-quota", str(QUOTA)])
    for name, role in (("root", "admin"), ("alice", "user"), ("bob", "user"), ("vera", "viewer")):
        env.admin("user", "add", name, "--role", role)
    t = {n: env.admin("token", "create", n) for n in ("root", "alice", "bob", "vera")}
    # an upload cut off midway: started first, since libmicrohttpd 0.9.75
    # notices a client gone mid-body only at the connection's idle timeout
    # (30 s, SRV_CONN_TIMEOUT_S), when its transaction ends; checked at the end
    head = ("POST /api/v1/models?name=cut HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\nX-FusionBench-Client: e2e\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: 2500000\r\n\r\n"
            % t["bob"])
    raw_request(env, head, os.urandom(1_600_000), read=False)
    cut_at = time.monotonic()

    data = os.urandom(2_500_000)  # three chunks: 1 MiB, 1 MiB, the rest
    sha = hashlib.sha256(data).hexdigest()

    # upload, streamed in chunks; reads back byte for byte
    st, hd, m = upload(env, t["alice"], "mine", data)
    check_eq(st, 201, "alice uploads mine (%s)" % m)
    check_eq((m["name"], m["owner"], m["visibility"], m["status"], m["size"], m["sha256"],
              m["mine"]), ("mine", "alice", "private", "preparing", len(data), sha, True),
             "the model as stored")
    check_eq(hd.get("Location"), "/api/v1/models/%d" % m["id"], "Location")
    check_eq(counts(env), (1, 3, 1), "one blob of three chunks, one model")
    st, hd, got = archive(env, t["alice"], m["id"])
    check(st == 200 and got == data, "the archive reads back byte for byte (%d bytes)" % len(got))
    check_eq(hd.get("X-Content-SHA256"), sha, "the archive's digest header")

    # the same bytes again, lab-visible: stored once
    st, _, m2 = upload(env, t["alice"], "mine-lab", data, "lab")
    check_eq((st, m2["sha256"], m2["visibility"]), (201, sha, "lab"), "the same bytes, lab")
    check_eq(counts(env), (1, 3, 2), "the same bytes stored once")

    # who sees what
    check_eq(call(env, "GET", "/api/v1/models/%d" % m["id"], t["bob"])[0], 404,
             "bob does not see alice's private model")
    check_eq(call(env, "GET", "/api/v1/models/%d" % m["id"], t["root"])[0], 200,
             "an admin sees it")
    st, _, lst = call(env, "GET", "/api/v1/models", t["bob"])
    check_eq([(x["name"], x["mine"]) for x in lst["items"]], [("mine-lab", False)],
             "bob's list: only the lab model, not his")
    try:
        archive(env, t["bob"], m["id"])
        check(False, "bob read alice's private archive")
    except Exception as e:  # urllib raises HTTPError for 404
        check_eq(getattr(e, "code", None), 404, "bob's download of the private archive")
    check_eq(archive(env, t["bob"], m2["id"])[2], data, "bob downloads the lab archive")

    # a name is unique per owner; another owner may use it
    st, _, b = upload(env, t["alice"], "mine", b"other bytes")
    check_eq((st, code(b), b["error"].get("field")), (409, "conflict", "name"),
             "alice's second 'mine'")
    st, _, b = upload(env, t["bob"], "mine", b"bob's own bytes")
    check_eq(st, 201, "bob's 'mine' (%s)" % b)
    bob_mine = b["id"]
    check_eq(counts(env), (2, 4, 3), "bob's archive: a second blob")

    # bad input: each named, nothing stored
    for q, field in (("x/y", "name"), ("-dash", "name"), ("a" * 65, "name")):
        st, _, b = upload(env, t["alice"], q, b"abc")
        check_eq((st, b["error"].get("field")), (400, field), "name %r" % q)
    st, _, b = upload(env, t["alice"], "ok", b"abc", "public")
    check_eq((st, b["error"].get("field")), (400, "visibility"), "visibility public")
    st, _, b = upload(env, t["vera"], "v", b"abc")
    check_eq(st, 403, "a viewer may not upload")
    st, _, b = fbtest.http(env.base, "POST", "/api/v1/models?name=csrf", raw=b"abc",
                           headers={"Authorization": "Bearer " + t["alice"],
                                    "Content-Type": "application/octet-stream"})
    check_eq(st, 415, "an upload without X-FusionBench-Client (a form elsewhere could send it)")
    check_eq(counts(env), (2, 4, 3), "nothing stored by refused uploads")

    # over the limit: refused from the headers; the body is never read and the
    # database does not grow
    size_before = int(env.sql("SELECT pg_total_relation_size('model_chunks')")[0][0])
    head = ("POST /api/v1/models?name=huge HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\nX-FusionBench-Client: e2e\r\n"
            "Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n"
            % (t["alice"], LIMIT + 1))
    check_eq(raw_request(env, head), 413, "an archive one byte over the limit, headers only")
    check_eq(int(env.sql("SELECT pg_total_relation_size('model_chunks')")[0][0]), size_before,
             "model_chunks did not grow")
    # no Content-Length (chunked): 411
    head = ("POST /api/v1/models?name=chunky HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            "Authorization: Bearer %s\r\nX-FusionBench-Client: e2e\r\n"
            "Transfer-Encoding: chunked\r\n\r\n" % t["alice"])
    check_eq(raw_request(env, head, b"3\r\nabc\r\n0\r\n\r\n"), 411, "chunked upload")

    # the quota: alice holds 2.5 MB (one blob, twice named); 2.6 MB more is over 5 MB
    st, _, b = upload(env, t["alice"], "second", os.urandom(2_600_000))
    check_eq((st, code(b), b["error"].get("field")), (413, "storage_quota_exceeded", "quota"),
             "past alice's quota (%s)" % b)
    check("over your quota of 5000000 bytes" in b["error"]["message"],
          "the message names the quota: %s" % b["error"]["message"])
    check_eq(counts(env), (2, 4, 3), "nothing stored past the quota")
    quota_answer_waits(env, t["alice"])
    check_eq(counts(env), (2, 4, 3), "nothing stored past the quota")
    env.sql("UPDATE users SET model_quota_bytes = 6000000 WHERE name = 'alice'")
    st, _, big = upload(env, t["alice"], "second", os.urandom(2_600_000))
    check_eq(st, 201, "with her own quota of 6 MB it fits (%s)" % big)

    # delete: another user 403 (lab) or 404 (private); the owner 204; the blob
    # goes with the last model naming it
    check_eq(call(env, "DELETE", "/api/v1/models/%d" % m2["id"], t["bob"])[0], 403,
             "bob deletes alice's lab model")
    check_eq(call(env, "DELETE", "/api/v1/models/%d" % m["id"], t["bob"])[0], 404,
             "bob deletes alice's private model")
    check_eq(call(env, "DELETE", "/api/v1/models/%d" % m["id"], t["alice"])[0], 204,
             "alice deletes mine")
    check_eq(counts(env)[0], 3, "the blob stays: mine-lab names it")
    check_eq(call(env, "DELETE", "/api/v1/models/%d" % m2["id"], t["alice"])[0], 204,
             "alice deletes mine-lab")
    check_eq(counts(env)[0], 2, "the blob went with the last model naming it")
    check_eq(call(env, "DELETE", "/api/v1/models/%d" % bob_mine, t["root"])[0], 204,
             "an admin deletes bob's model")
    check_eq(call(env, "GET", "/api/v1/models/%d" % m["id"], t["alice"])[0], 404, "gone")
    cli(env, t)  # meanwhile the cut upload's connection times out
    python_client(env, t)

    def rolled_back():
        return not env.sql("SELECT 1 FROM pg_stat_activity WHERE datname = current_database()"
                           " AND state LIKE 'idle in transaction%'")
    fbtest.wait_until(rolled_back, 50, "the cut upload to roll back", interval=1)
    log("the cut upload rolled back %.0f s after the cut" % (time.monotonic() - cut_at))
    check_eq(counts(env), (1, 3, 1), "left: alice's 'second', nothing of the cut upload")
    names = [x["name"] for x in call(env, "GET", "/api/v1/models", t["root"])[2]["items"]]
    check("cut" not in names, "no model 'cut': %s" % names)
    log("models: upload, dedupe, visibility, limits, quota, abort, delete, the CLI and the "
        "Python client checked")


PYCLIENT = r"""
import json, os, sys
import fusionbench as fb
out = {}
c = fb.Client(os.environ["URL"], os.environ["TOKEN"])
sent = []
m = c.upload_model("pyup", sys.argv[1], visibility="lab", wait=False,
                   progress=lambda n, size: sent.append(n))
out["uploaded"] = [m.name, m.status, m.sha256, m.owner, m.visibility]
out["sent"] = sent[-1:]
out["listed"] = [x.name for x in c.models()]
c.download_model(m.id, sys.argv[2])
sent = []
try:
    c.upload_model("pyup", sys.argv[1], progress=lambda n, size: sent.append(n))
except fb.ApiError as e:
    out["dup"] = [e.status, e.code, e.field]
out["dup_sent"] = sent
try:
    c.submit("no_such_workload")
except fb.ApiError as e:
    out["unknown"] = [e.status, e.code]
try:
    fb.Client(os.environ["URL"], "fbu_AAAAAAAAAAAA_" + "B" * 32).models()
except fb.ApiError as e:
    out["badtoken"] = [e.status, e.code]
job = c.submit("softmax", params={"rows": 64, "cols": 64}, iterations=5, warmup=1).wait(timeout=120)
out["job"] = [job.state, sorted(job.speedup), [r["variant"] for r in job.table()]]
c.model(m.id).delete()
out["after_delete"] = [x.name for x in c.models()]
print(json.dumps(out))
"""


def python_client(env, t):
    """The Python client installed from the repository into a fresh venv (no
    index reachable: its in-tree build backend needs none)."""
    venv = os.path.join(env.tmp, "venv")
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "-q",
                        os.path.join(fbtest.source_dir(), "clients", "python")],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "pip install ./clients/python: %s" % r.stderr[-2000:])
    env.token = t["root"]  # start_worker's check reads /api/v1/workers
    env.start_worker()
    path, back = os.path.join(env.tmp, "py.pt2"), os.path.join(env.tmp, "py-back.pt2")
    data = os.urandom(1_200_000)
    with open(path, "wb") as f:
        f.write(data)
    script = os.path.join(env.tmp, "pyclient.py")
    with open(script, "w") as f:
        f.write(PYCLIENT)
    r = subprocess.run([os.path.join(venv, "bin", "python"), script, path, back],
                       capture_output=True, text=True, timeout=300, cwd=env.tmp,
                       env=dict(os.environ, URL=env.base, TOKEN=t["alice"]))
    check(r.returncode == 0, "the Python client's script: %s" % r.stderr[-3000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    check_eq(out["uploaded"], ["pyup", "preparing", hashlib.sha256(data).hexdigest(), "alice",
                               "lab"], "upload_model")
    check("pyup" in out["listed"], "models() lists it: %s" % out["listed"])
    check(open(back, "rb").read() == data, "download_model wrote the same bytes")
    check_eq(out["sent"], [len(data)], "progress saw the whole body sent")
    check_eq(out["dup"], [409, "conflict", "name"], "a taken name: ApiError(409, conflict, name)")
    check_eq(out["dup_sent"], [], "refused from its headers (Expect: 100-continue): no body sent")
    check_eq(out["unknown"], [422, "unknown_workload"], "an unknown workload: ApiError(422)")
    check_eq(out["badtoken"], [401, "unauthenticated"], "a wrong token: ApiError(401)")
    check_eq(out["job"][0], "succeeded", "submit().wait(): %s" % out["job"])
    check(out["job"][1] and set(out["job"][1]) < set(out["job"][2]),
          "speedup per variant and a table row per variant: %s" % out["job"])
    check("pyup" not in out["after_delete"], "delete")


def cli(env, t):
    """fusionbench model add/list/show/get/rm as a user types them."""
    root = os.environ.get("FB_BIN_DIR") or os.path.join(fbtest.source_dir(), "build")
    exe = os.path.join(root, "client", "fusionbench")
    environ = dict(os.environ, FUSIONBENCH_URL=env.base, FUSIONBENCH_TOKEN=t["bob"],
                   XDG_CONFIG_HOME=env.tmp)

    def run(*args):
        return subprocess.run([exe] + list(args), capture_output=True, text=True, timeout=120,
                              env=environ)
    path = os.path.join(env.tmp, "net.pt2")
    data = os.urandom(1_500_000)
    with open(path, "wb") as f:
        f.write(data)
    r = run("model", "add", "net", path, "--visibility", "lab")
    check(r.returncode == 0, "model add: %d %s" % (r.returncode, r.stderr))
    mid = int(r.stdout.strip())
    check("uploaded %s as model %d" % (path, mid) in r.stderr, "model add says: %s" % r.stderr)
    r = run("model", "list")
    check(r.returncode == 0 and any(line.split()[:4] == [str(mid), "net", "bob", "lab"]
                                    for line in r.stdout.splitlines()),
          "model list shows it: %s" % r.stdout)
    r = run("model", "show", str(mid))
    check(r.returncode == 0 and "status   preparing" in r.stdout and
          hashlib.sha256(data).hexdigest() in r.stdout, "model show: %s" % r.stdout)
    back = os.path.join(env.tmp, "back.pt2")
    r = run("model", "get", str(mid), back)
    check(r.returncode == 0 and open(back, "rb").read() == data, "model get: %s" % r.stderr)
    r = run("model", "get", str(mid), back)
    check(r.returncode == 2 and "File exists" in r.stderr, "model get does not overwrite: %s"
          % r.stderr)
    r = run("model", "add", "net", path)
    check(r.returncode == 3 and "you have a model named net already" in r.stderr,
          "a second 'net': %d %s" % (r.returncode, r.stderr))
    r = run("model", "add", "n2", os.path.join(env.tmp, "missing.pt2"))
    check(r.returncode == 2 and "No such file" in r.stderr, "a missing file: %s" % r.stderr)
    r = run("model", "frob")
    check(r.returncode == 2 and "unknown model command 'frob' (add, list, show, rm, get)"
          in r.stderr, "an unknown model command: %s" % r.stderr)
    r = run("model", "rm", str(mid))
    check(r.returncode == 0 and "deleted model %d" % mid in r.stderr, "model rm: %s" % r.stderr)
    r = run("model", "show", str(mid))
    check(r.returncode == 3 and "404" in r.stderr, "gone: %s" % r.stderr)


if __name__ == "__main__":
    fbtest.main(test, "models")
