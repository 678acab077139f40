#!/usr/bin/env python3
"""End to end: an uploaded model prepared by a worker (issue 26).

Uploads made before any worker runs: the test model exported with torch
(tests/inductor/usermodel.py), an archive whose weight is a pickle that runs a
command under torch.export.load (tests/inductor/archives.py), a model with an
operator the native engine lacks, bytes that are not a zip, the good archive again as a model whose preparing a worker that
died left behind (its lease stale, attempts left: prepared again), and once
more as one that died at its last attempt.  Then a worker with the inductor
engine, started with the database's URL and a password in its environment and
a runner (tests/e2e/spy_runner.py) that notes what the reading process was
given.  Each model must end ready with what was read, or invalid naming why;
the command must not have run; the archive must be in the worker's cache under
its SHA-256, and beside it the model's native form, stored once in the
database for the two models of the same bytes; the reading process must have
had no database variable and no descriptor but its standard three.  Then jobs
of the models by both engines (the native one checked against PyTorch eager's
output), and the refusals.

The Inductor engine's runs (a cold and a warm torch.compile each: 100 s a job
on a 2-vCPU VM) are the full tier's, e2e.test_model_prepare_full (--full): the
job of the uploaded archive timed by Inductor, the model the native engine
cannot run run by Inductor, and the Python client's flow from a fresh venv
(exported, uploaded, run by both engines).  The default tier submits those
Inductor jobs, checks what they resolved to, and cancels them."""

import hashlib
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, check_eq, log  # noqa: E402

sys.path.insert(0, os.path.join(fbtest.source_dir(), "tests", "inductor"))
import indtest  # noqa: E402

FULL = "--full" in sys.argv


def upload(env, name, data):
    st, _, body = fbtest.http(env.base, "POST", "/api/v1/models?name=" + name, raw=data,
                              headers={"Content-Type": "application/octet-stream",
                                       "X-FusionBench-Client": "e2e"}, timeout=60)
    check(st == 201, "upload %s: %s %s" % (name, st, body))
    return body


def test(env):
    py = indtest.python_or_skip()
    env.start_server([])
    marker = os.path.join(env.tmp, "pwned")
    r = subprocess.run([py, os.path.join(fbtest.source_dir(), "tests", "inductor",
                                         "archives.py"), env.tmp, marker],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "making the archives: %s" % r.stderr[-2000:])
    good = open(os.path.join(env.tmp, "good.pt2"), "rb").read()
    evil = open(os.path.join(env.tmp, "evil_weight.pt2"), "rb").read()
    lacking = open(os.path.join(env.tmp, "lacking.pt2"), "rb").read()
    junk = os.urandom(5000)
    ids = {"good": upload(env, "good", good)["id"], "evil": upload(env, "evil", evil)["id"],
           "lacking": upload(env, "lacking", lacking)["id"],
           "junk": upload(env, "junk", junk)["id"],
           "orphan": upload(env, "orphan", good)["id"],
           "dead": upload(env, "dead", good)["id"]}
    env.sql("UPDATE models SET prepare_worker = 'gone/cpu0', prepare_attempt = 1,"
            " prepare_heartbeat_at = now() - interval '1 hour' WHERE id = %d" % ids["orphan"])
    env.sql("UPDATE models SET prepare_worker = 'gone/cpu0', prepare_attempt = 3,"
            " prepare_heartbeat_at = now() - interval '1 hour' WHERE id = %d" % ids["dead"])
    cache = os.path.join(env.tmp, "cache")
    spy = os.path.join(env.tmp, "spy.jsonl")
    env.start_worker(["--model-cache", cache, "--model-cache-mib", "64"],
                     env={"FUSIONBENCH_INDUCTOR_RUNNER": os.path.join(
                         fbtest.source_dir(), "tests", "e2e", "spy_runner.py"),
                          "SPY_OUT": spy, "DATABASE_URL": env.db_url,
                          "PGPASSWORD": "not-for-the-runner"}, inductor=True)

    def settled():
        ms = {m["name"]: m for m in env.get("/api/v1/models")[2]["items"]}
        return ms if all(m["status"] != "preparing" for m in ms.values()) else None
    ms = fbtest.wait_until(settled, 300, "every model prepared", 0.5)
    log("statuses: %s" % {n: (m["status"], (m.get("error") or "")[:80]) for n, m in ms.items()})

    g = ms["good"]
    check_eq(g["status"], "ready", "the test model (%s)" % g.get("error"))
    info = g["info"]
    check_eq(info["inputs"], [{"name": "x", "shape": [2, 3, 16, 16], "dtype": "float32",
                               "dynamic_dims": [0]}], "its inputs")
    check(info["parameters"] == 19898 and info["ops"].get("aten.conv2d.default") == 3 and
          info["dynamic_batch"] and info["eager"]["ok"] and info["native"]["ok"],
          "parameters, ops, dynamic batch, eager: %s" % json.dumps(info)[:600])
    form = info["native"].get("form") or {}
    check(form.get("bytes", 0) > 19898 * 4 and len(form.get("sha256", "")) == 64,
          "its native form was made and stored: %s" % form)
    la = ms["lacking"]
    check(la["status"] == "ready" and la["info"]["native"]["ok"] is False and
          la["info"]["native"]["unsupported_ops"] == {"aten.cumsum": 1} and
          "form" not in la["info"]["native"],
          "a model with an operator the native engine lacks: ready, the operator named, no "
          "native form (%s)" % json.dumps(la["info"].get("native")))
    check_eq(fbtest.http(env.base, "GET", "/api/v1/models/%d" % ids["good"])[2]["info"], info,
             "GET /api/v1/models/{id} has the info")
    e = ms["evil"]
    check(e["status"] == "invalid" and "conv1.weight is stored pickled" in e["error"],
          "the pickled weight: invalid, named (%s)" % e.get("error"))
    check(not os.path.exists(marker), "the pickle's command did not run")
    j = ms["junk"]
    check(j["status"] == "invalid" and "not a zip archive" in j["error"],
          "bytes that are not a zip: invalid (%s)" % j.get("error"))
    check_eq(ms["orphan"]["status"], "ready", "a model a gone worker left: prepared again")
    attempts = dict(env.sql("SELECT name, prepare_attempt FROM models"))
    check_eq(attempts["orphan"], "2", "... at its second attempt")
    d = ms["dead"]
    check(d["status"] == "invalid" and "did not finish after 3 attempts" in d["error"],
          "a model whose last attempt went stale: invalid, said so (%s)" % d.get("error"))

    sha = hashlib.sha256(good).hexdigest()
    path = os.path.join(cache, sha + ".pt2")
    check(os.path.isfile(path) and open(path, "rb").read() == good,
          "the archive is in the worker's cache as %s.pt2" % sha[:12])
    check_eq(sorted(os.listdir(cache)),
             sorted([hashlib.sha256(b).hexdigest() + ".pt2" for b in (good, evil, lacking, junk)] +
                    [form["sha256"] + ".fbn"]),
             "the cache holds each archive once, by its digest, and the native form")
    fbn = open(os.path.join(cache, form["sha256"] + ".fbn"), "rb").read()
    check_eq(hashlib.sha256(fbn).hexdigest(), form["sha256"], "... the form's bytes are its digest's")
    blobs = env.sql("SELECT m.name, m.native_blob_id, b.size FROM models m"
                    " LEFT JOIN model_blobs b ON b.id = m.native_blob_id ORDER BY m.name")
    nb = {r[0]: r[1:] for r in blobs}
    check(nb["good"][0] and nb["good"] == nb["orphan"] and nb["good"][1] == str(form["bytes"]) and
          not nb["lacking"][0] and not nb["evil"][0],
          "the database holds the form once, for the two models of the same bytes: %s" % nb)
    calls = [json.loads(line) for line in open(spy)]
    check_eq(len(calls), 5, "5 archives read (good and orphan are the same bytes, read twice; "
             "the dead one never)")
    for c in calls:
        secret = [k for k in c["env"] if k == "DATABASE_URL" or k.startswith("PG")]
        check(not secret, "the reading process has no database variable (%s)" % secret)
        check(c["fds"][:3] == [0, 1, 2] and len(c["fds"]) <= 4,
              "the reading process holds only its standard descriptors (%s; one is the "
              "listing's own)" % c["fds"])
    log("model preparing: ready with its info, invalid with why, the lease taken over, "
        "nothing run, no credential handed down")
    jobs(env, ids)


def submit(env, spec):
    return fbtest.http(env.base, "POST", "/api/v1/jobs", spec)


CLIENT_FLOW = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
import usermodel
import fusionbench as fb
out = {"client": fb.__file__}
c = fb.Client(os.environ["URL"])
model, (x,) = usermodel.build(seed=1)
mine_x = torch.randn(3, 3, 16, 16, generator=torch.Generator().manual_seed(7))
m = c.upload_model("mine", model, (x,), inputs={"x": mine_x})
out["ready"] = [m.status, m.info["dynamic_batch"], m.info["input_values"],
                m.info["native"]["ok"], "form" in m.info["native"]]


def summary(j):
    vs = {v["name"]: [v["status"], v.get("max_rel_error"), (v.get("reference") or {}).get(
        "against"), v.get("fused_kernels"), (v.get("inductor") or {}).get("generated_kernels")]
        for v in (j.result or {}).get("variants", [])}
    return [j.state, j.error, sorted(j.speedup), [r["variant"] for r in j.table()], vs]


out["native"] = summary(m.submit(engine="native", batch_size=5, iterations=5, warmup=1).wait(300))
out["inductor"] = summary(m.submit(variants=["eager", "inductor"], batch_size=2, iterations=5,
                                   warmup=1).wait(600))
try:
    c.upload_model("badin", model, (x,), inputs={"y": mine_x})
except fb.ApiError as e:
    out["badin"] = [e.code, e.message]
lacking = next(mm for mm in c.models() if mm.name == "lacking")
try:
    lacking.submit(engine="native")
except fb.ApiError as e:
    out["lacking"] = [e.status, e.code, e.message]
print(json.dumps(out))
"""


def client_flow(env):
    """The issue's flow from Python: the client installed from the repository
    into a fresh venv (torch reachable through a .pth, for the export), the
    test model exported, uploaded with inputs of its own and waited for, then
    run by both engines; the errors as ApiError with the API's code."""
    py = indtest.python_or_skip()
    venv = os.path.join(env.tmp, "clientvenv")
    subprocess.run([py, "-m", "venv", venv], check=True, timeout=300)
    r = subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--no-index", "-q",
                        os.path.join(fbtest.source_dir(), "clients", "python")],
                       capture_output=True, text=True, timeout=300)
    check(r.returncode == 0, "pip install ./clients/python: %s" % r.stderr[-2000:])
    site = subprocess.run([os.path.join(venv, "bin", "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    torch_site = subprocess.run([py, "-c", "import os, torch; print(os.path.dirname("
                                 "os.path.dirname(torch.__file__)))"],
                                capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(site, "torch-from-project.pth"), "w") as f:
        f.write(torch_site + "\n")
    script = os.path.join(env.tmp, "client_flow.py")
    with open(script, "w") as f:
        f.write(CLIENT_FLOW)
    r = subprocess.run([os.path.join(venv, "bin", "python"), script,
                        os.path.join(fbtest.source_dir(), "tests", "inductor")],
                       capture_output=True, text=True, timeout=1200, cwd=env.tmp,
                       env=dict(os.environ, URL=env.base))
    check(r.returncode == 0, "the client's flow: %s" % r.stderr[-3000:])
    out = json.loads(r.stdout.strip().splitlines()[-1])
    check(out["client"].startswith(site), "the client is the one pip installed: %s" % out["client"])
    check_eq(out["ready"], ["ready", True, {"source": "uploaded", "shapes": [[3, 3, 16, 16]]},
                            True, True],
             "upload_model(name, module, (x,), inputs=...): exported with a dynamic batch, "
             "uploaded, ready, the inputs its own, a native form made")
    st, err, speed, rows, vs = out["native"]
    check(st == "succeeded" and speed == ["fused"] and rows == ["eager", "fused"] and
          vs["eager"][0] == "ok" and vs["eager"][1] <= 1e-4 and
          "its 3 samples repeated to 5" in (vs["eager"][2] or "") and vs["fused"][3] >= 1,
          "the native engine at batch 5 on the uploaded inputs, within the gate of PyTorch's "
          "output, fusions counted: %s" % out["native"])
    st, err, speed, rows, vs = out["inductor"]
    check(st == "succeeded" and speed == ["inductor"] and rows == ["eager", "inductor"] and
          vs["inductor"][0] == "ok" and (vs["inductor"][4] or 0) >= 1,
          "the inductor engine, its kernels counted: %s" % out["inductor"])
    check(out.get("badin", [None])[0] == "invalid_model" and
          "the uploaded inputs have y" in out["badin"][1],
          "inputs named otherwise than the export's: ApiError invalid_model naming them: %s" %
          out.get("badin"))
    check(out.get("lacking", [0])[:2] == [422, "unsupported"] and
          "aten.cumsum" in out["lacking"][2],
          "the native engine on a model it cannot run: ApiError 422 unsupported naming the "
          "operator: %s" % out.get("lacking"))
    log("the Python client from a fresh venv: exported, uploaded with inputs, both engines")


def job_process(env, job_id):
    """(pid, its environment's names, its sockets) of each process the worker
    forked while job job_id ran (read from /proc: the test and the worker are
    the same user)."""
    workers = [p.pid for label, p, _ in env.procs if label.startswith("worker") and
               p.poll() is None]
    seen, end = {}, time.monotonic() + 120
    while time.monotonic() < end:
        for pid in os.listdir("/proc"):
            if not pid.isdigit() or int(pid) in seen:
                continue
            try:
                stat = open("/proc/%s/stat" % pid).read()
                if int(stat.rsplit(")", 1)[1].split()[1]) not in workers:
                    continue
                names = [kv.split(b"=", 1)[0].decode() for kv in
                         open("/proc/%s/environ" % pid, "rb").read().split(b"\0") if kv]
                socks = [os.readlink("/proc/%s/fd/%s" % (pid, fd))
                         for fd in os.listdir("/proc/%s/fd" % pid)]
                socks = [x for x in socks if x.startswith("socket:")]
            except (OSError, ValueError, IndexError):
                continue
            if "fusionbench-wor" in open("/proc/%s/comm" % pid).read() if os.path.exists(
                    "/proc/%s/comm" % pid) else False:
                seen[int(pid)] = (int(pid), names, socks)
        st = env.get("/api/v1/jobs/%d" % job_id)[2]["state"]
        if st in ("succeeded", "failed", "canceled") or (seen and st == "running"):
            break
        time.sleep(0.05)
    return list(seen.values())


def native_jobs(env, ids):
    """The native engine on the model's native form, at a batch the export did
    not have: both variants ok, eager within the gate of PyTorch eager's output
    (its two samples repeated); the model Inductor runs that the native engine
    cannot."""
    st, _, j = submit(env, {"workload": "model:good", "engine": "native", "batch_size": 3,
                            "warmup": 1, "iterations": 5, "explain": True})
    check_eq(st, 201, "submit model:good to the native engine (%s)" % j)
    check_eq((j["spec"]["workload"], j["spec"]["engine"], j["spec"]["variants"]),
             ("model.%d" % ids["good"], "native", ["eager", "fused"]),
             "the job: model.<id> on the native engine, eager against fused")
    st, _, la = submit(env, {"workload": "model:lacking", "variants": ["eager", "inductor"],
                             "warmup": 1, "iterations": 3})
    check_eq(st, 201, "submit model:lacking to the inductor engine (%s)" % la)
    check_eq((la["spec"]["engine"], la["spec"]["variants"]), ("inductor", ["eager", "inductor"]),
             "model:lacking: the inductor engine")
    if not FULL:  # its run (a torch.compile) is the full tier's
        env.cancel(la["id"])
    seen = job_process(env, j["id"])
    check(seen, "the native job's process was seen")
    for pid, env_names, socks in seen:
        secret = [k for k in env_names if k == "DATABASE_URL" or k.startswith("PG")]
        check(not secret and not socks,
              "the job's process (pid %d) holds no database variable (%s) and no socket (%s)" % (
                  pid, secret, socks))
    done = env.wait_job(j["id"], timeout=300)
    check_eq(done["state"], "succeeded", "the native job (%s)" % done.get("error"))
    ex = done["result"].get("explain") or {}
    check(ex.get("groups") and ex.get("waterfall") is not None,
          "the explanation of the uploaded model's fusions: %d groups" % len(ex.get("groups") or []))
    v = {x["name"]: x for x in done["result"]["variants"]}
    ref = v["eager"].get("reference") or {}
    check(v["eager"]["status"] == "ok" and ref.get("max_rel_error") is not None and
          ref["max_rel_error"] <= 1e-4 and "PyTorch eager" in ref.get("against", "") and
          "repeated to 3" in ref["against"],
          "eager matches PyTorch eager's output within the gate: %s" % ref)
    check(v["fused"]["status"] == "ok" and v["fused"]["max_rel_error"] <= 1e-4 and
          v["fused"]["fused_kernels"] >= 1 and v["fused"]["fusion_groups"],
          "fused matches eager, its fusions counted: %s kernels fused, groups %s" % (
              v["fused"].get("fused_kernels"),
              [g.get("rule") for g in v["fused"].get("fusion_groups") or []][:8]))
    if not FULL:
        log("native jobs of an uploaded model: checked against PyTorch (Inductor's run of the "
            "lacking one: --full)")
        return
    done = env.wait_job(la["id"], timeout=600)
    check_eq(done["state"], "succeeded",
             "the inductor engine runs the model the native engine cannot (%s)" % done.get("error"))
    log("native jobs of an uploaded model: checked against PyTorch; the lacking one by Inductor")


def jobs(env, ids):
    """Jobs of uploaded models: model:NAME resolved at submit to model.<id>,
    run by the inductor engine on the uploaded archive; the refusals."""
    # a param: an uploaded model's entry takes any (it is made from a zoo
    # model's, whose own list it must not keep)
    st, _, j = submit(env, {"workload": "model:good", "variants": ["eager", "inductor"],
                            "batch_size": 4, "warmup": 1, "iterations": 5,
                            "params": {"seed": 3}})
    check_eq(st, 201, "submit model:good (%s)" % j)
    spec = j["spec"]
    check_eq(spec["params"].get("seed"), 3, "params.seed kept")
    check_eq((spec["workload"], spec["engine"], spec["batch_size"], spec["params"]["model"]),
             ("model.%d" % ids["good"], "inductor", 4,
              {"id": ids["good"], "name": "good", "owner": None,
               "sha256": fbtest.http(env.base, "GET", "/api/v1/models/%d" % ids["good"])[2][
                   "sha256"]}),
             "the job names model.<id>, the inductor engine, batch 4 (dynamic), the model")
    if FULL:
        timed_by_inductor(env, j)
    else:  # its run (a torch.compile) is the full tier's
        env.cancel(j["id"])
    refusals(env)
    native_jobs(env, ids)
    if FULL:
        client_flow(env)
    else:
        log("the Python client's flow from a fresh venv (an Inductor run): --full")
    rest(env, ids)


def timed_by_inductor(env, j):
    done = env.wait_job(j["id"], timeout=600)
    check_eq(done["state"], "succeeded", "the job of the uploaded model (%s)" % done.get("error"))
    res = done["result"]
    names = sorted(v["name"] for v in res["variants"])
    check(names == ["eager", "inductor"] and all(
        v["status"] == "ok" and v["latency_ms"]["median"] > 0 for v in res["variants"]),
          "both variants timed on the uploaded model: %s" % json.dumps(res["variants"])[:800])
    ind = next(v for v in res["variants"] if v["name"] == "inductor")
    check((ind.get("inductor") or {}).get("generated_kernels", 0) >= 1,
          "Inductor compiled it into kernels (%s)" % (ind.get("inductor") or {}).get(
              "generated_kernels"))


def refusals(env):
    for spec, want, what in (
            ({"workload": "model:junk"}, (422, "invalid_model"), "an invalid model"),
            ({"workload": "model:nosuch"}, (422, "unknown_workload"), "no such model"),
            ({"workload": "model:someone/good"}, (422, "unknown_workload"),
             "another owner's name"),
            ({"workload": "model:lacking", "engine": "native"}, (422, "unsupported"),
             "the native engine on a model with an operator it lacks"),
            ({"workload": "model:good", "engine": "cupy"}, (422, "unsupported"),
             "an engine that runs no uploaded models"),
            ({"workload": "model:bad name"}, (400, "invalid_argument"), "a malformed reference")):
        st, _, b = submit(env, spec)
        check_eq((st, (b.get("error") or {}).get("code")), want, "%s: %s" % (what, b))
    st, _, b = submit(env, {"workload": "model:lacking", "engine": "native"})
    check("aten.cumsum" in b["error"]["message"],
          "... its error names the operator: %s" % b["error"]["message"])


def rest(env, ids):
    # the Python client (clients/python, standard library only)
    sys.path.insert(0, os.path.join(fbtest.source_dir(), "clients", "python"))
    import fusionbench as fb
    c = fb.Client(env.base)
    m = c.model(ids["good"]).wait_ready(timeout=10)
    check_eq(m.info["parameters"], 19898, "Model.wait_ready(): ready, with its info")
    try:
        c.model(ids["evil"]).wait_ready(timeout=10)
        check(False, "wait_ready() of an invalid model returned")
    except fb.ApiError as e:
        check(e.code == "invalid_model" and "pickled" in e.message,
              "wait_ready() of an invalid model: ApiError invalid_model (%s)" % e)
    pj = m.submit(variants=["eager"], iterations=3, warmup=1)
    check_eq((pj.raw["spec"]["workload"], pj.raw["spec"]["engine"]),
             ("model.%d" % ids["good"], "inductor"), "Model.submit(): a job of model.<id>")
    env.cancel(pj.id, may_have_ended=True)

    # in a suite too (its job then canceled: one run of it is enough here)
    st, _, su = fbtest.http(env.base, "POST", "/api/v1/suites",
                            {"name": "mine", "workloads": ["model:good"], "variants": ["eager"],
                             "iterations": 3, "warmup": 1})
    check_eq(st, 201, "a suite of model:good (%s)" % su)
    wl = env.sql("SELECT workload, id FROM jobs ORDER BY id DESC LIMIT 1")[0]
    check_eq(wl[0], "model.%d" % ids["good"], "the suite's job runs model.<id>")
    env.cancel(int(wl[1]), may_have_ended=True)
    st, _, b = fbtest.http(env.base, "POST", "/api/v1/suites",
                           {"name": "bad", "workloads": ["model:junk"]})
    check(st == 400 and "invalid" in b["error"]["message"],
          "a suite of an invalid model: refused (%s)" % b)
    env.sql("UPDATE models SET status = 'preparing', prepare_attempt = 3,"
            " prepare_worker = 'busy/cpu0', prepare_heartbeat_at = now() + interval '1 hour'"
            " WHERE id = %d" % ids["dead"])
    st, _, b = submit(env, {"workload": "model:dead"})
    check_eq((st, b["error"]["code"]), (409, "model_not_ready"), "a model still preparing")

    # a model deleted while its job waits in the queue: the job fails, saying so
    for label, p, _ in env.procs:
        if label.startswith("worker"):
            p.kill()
            p.wait()
    st, _, q = submit(env, {"workload": "model.%d" % ids["orphan"], "variants": ["eager"],
                            "warmup": 1, "iterations": 3})
    check_eq(st, 201, "submit model.<id> (%s)" % q)
    st, _, _ = fbtest.http(env.base, "DELETE", "/api/v1/models/%d" % ids["orphan"],
                           headers={"X-FusionBench-Client": "e2e"})
    check_eq(st, 204, "delete the model its job waits for")
    check_eq(env.sql("SELECT count(*) FROM models m JOIN model_blobs b ON b.id = m.native_blob_id"
                     " WHERE m.name = 'good'")[0][0], "1",
             "the native form it shared with another model stays")
    env.start_worker(["--model-cache", os.path.join(env.tmp, "cache")], inductor=True)
    done = env.wait_job(q["id"], timeout=120)
    check(done["state"] == "failed" and done["error"]["code"] == "model_deleted" and
          "was deleted after this job was submitted" in done["error"]["message"],
          "the job of a deleted model: failed, model_deleted (%s)" % done.get("error"))
    log("jobs of uploaded models: resolved, run, refused, and failed once deleted")


if __name__ == "__main__":
    fbtest.main(test, "model_prepare_full" if FULL else "model_prepare")
