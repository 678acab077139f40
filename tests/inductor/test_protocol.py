"""The runner's protocol (docs/INDUCTOR_PROTOCOL.md): probe, the probe's cache
(probecache.py: kept, read back without importing torch, keyed by what the
answer depends on, a bad file ignored), bad requests, clean protocol stream
(only JSON lines, library prints kept out), --out files, the injection variable
scrubbed."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import indtest

sys.path.insert(0, os.path.join(indtest.SRC, "worker", "engine", "inductor"))
import probecache  # noqa: E402
import runner  # noqa: E402  (its top level is the standard library only)


def probe_cached(py, cache):
    """`runner.py --probe` with the cache in folder cache and -X importtime:
    (exit status, protocol lines, the modules it imported)."""
    env = dict(os.environ, FUSIONBENCH_PROBE_CACHE=cache)
    r = subprocess.run([py, "-X", "importtime", indtest.RUNNER, "--probe"], capture_output=True,
                       text=True, env=env, timeout=600)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    mods = {l.split("|")[-1].strip() for l in r.stderr.splitlines()
            if l.startswith("import time:") and l.count("|") == 2}
    return r.returncode, lines, mods


def probe_cache(c, py, cache, first, mods1):
    """first, mods1: the first probe with the cache in folder cache."""
    files = [n for n in os.listdir(cache) if n.endswith(".json")]
    c.check(first.get("cached") is False and "torch" in mods1 and len(files) == 1,
            "probe cache: the first probe imports torch and keeps its answer (%s, %s)"
            % (first.get("cached"), files))
    _, lines, mods2 = probe_cached(py, cache)
    second = lines[-1] if lines else {}
    c.check(second.get("cached") is True and "torch" not in mods2,
            "probe cache: the second probe answers from it, torch not imported")
    strip = lambda p: {k: v for k, v in p.items() if k != "cached"}  # noqa: E731
    c.check(strip(first) == strip(second), "probe cache: the same answer")

    # The key and the file, in this process (no torch needed).
    here = os.path.join(indtest.SRC, "worker", "engine", "inductor")
    with tempfile.TemporaryDirectory() as d:
        runner = os.path.join(d, "inductor")
        shutil.copytree(here, runner, ignore=shutil.ignore_patterns("__pycache__"))
        k0 = probecache.key(runner, 1)
        c.check(probecache.key(runner, 1) == k0, "probe key: stable")
        old = os.environ.get("FB_PROBE_CUDA")
        os.environ["FB_PROBE_CUDA"] = "built" if old != "built" else "0"
        c.check(probecache.key(runner, 1) != k0, "probe key: FB_PROBE_CUDA changes it")
        if old is None:
            del os.environ["FB_PROBE_CUDA"]
        else:
            os.environ["FB_PROBE_CUDA"] = old
        c.check(probecache.key(runner, 2) != k0, "probe key: the protocol changes it")
        st = os.stat(os.path.join(runner, "models.py"))
        os.utime(os.path.join(runner, "models.py"), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
        k1 = probecache.key(runner, 1)
        c.check(k1 != k0, "probe key: an edited models.py changes it")
        open(os.path.join(runner, "extra.py"), "w").close()
        c.check(probecache.key(runner, 1) != k1, "probe key: a new module changes it")
        sys.path.append(os.path.join(d, "site"))
        k2 = probecache.key(runner, 1)
        os.mkdir(os.path.join(d, "site"))
        c.check(probecache.key(runner, 1) != k2,
                "probe key: a sys.path folder that appears (or changes) changes it")
        sys.path.pop()

        cache = os.path.join(d, "cache")
        os.environ["FUSIONBENCH_PROBE_CACHE"] = cache
        line = {"type": "probe", "protocol": 1, "models": [{"name": "m"}]}
        probecache.store(runner, 1, line)
        c.check(probecache.load(runner, 1) == line, "probe cache: stored, read back")
        c.check(probecache.load(runner, 2) is None, "probe cache: another protocol's key misses")
        path = os.path.join(cache, probecache.key(runner, 1) + ".json")
        for bad in ("{not json", json.dumps({"type": "probe", "protocol": 2, "models": []}),
                    json.dumps({"type": "error"}), "[]"):
            with open(path, "w") as f:
                f.write(bad)
            c.check(probecache.load(runner, 1) is None, "probe cache: %r ignored" % bad[:20])
        probecache.store(runner, 1, line)
        c.check(probecache.load(runner, 1) == line, "probe cache: a bad file replaced")
        now = time.time()
        for i in range(probecache.MAX_FILES + 5):
            p = os.path.join(cache, "%02d.json" % i)
            open(p, "w").close()
            os.utime(p, (now - 1000 + i, now - 1000 + i))
        probecache._prune(cache)
        left = sorted(os.listdir(cache))
        c.check(len(left) == probecache.MAX_FILES and "00.json" not in left and
                os.path.basename(path) in left,
                "probe cache: at most %d files, the oldest gone (%d left)"
                % (probecache.MAX_FILES, len(left)))
        os.environ["FUSIONBENCH_PROBE_CACHE"] = "off"
        c.check(probecache.folder() is None, "probe cache: off")
        del os.environ["FUSIONBENCH_PROBE_CACHE"]


def beating(c):
    """runner._beating: the explanation's progress goes out from a thread
    while a compile holds the interpreter (here a busy loop of bytecodes, as
    Inductor's scheduling is), whole lines only, and stops with the block."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "p.jsonl")
        proto = runner.Proto(path)
        ticks = []

        def tick():
            ticks.append(time.monotonic())
            proto.progress("explain", "inductor", len(ticks), 100, force=True)

        t0 = time.monotonic()
        with runner._beating(tick, every_s=0.2):
            n = 0
            while time.monotonic() - t0 < 1.5:
                n += 1
        ended = len(ticks)
        time.sleep(0.5)
        proto.f.close()
        with open(path) as f:
            lines = [json.loads(l) for l in f]
        gaps = [b - a for a, b in zip([t0] + ticks, ticks + [time.monotonic()])]
    c.check(ended >= 4 and len(ticks) == ended and [l["done"] for l in lines] ==
            list(range(1, ended + 1)),
            "explain progress beats while a block holds the interpreter: %d lines in 1.5 s, "
            "none after it ends (%d)" % (ended, len(ticks)))
    c.check(max(gaps[:-1] or [float("inf")]) < 1.0, "beats at most a second apart (%s)" %
            ["%.2f" % g for g in gaps[:-1]])


def main():
    py = indtest.python_or_skip()
    c = indtest.Checks()
    beating(c)

    cache = tempfile.mkdtemp(prefix="fb-probe-cache-")
    rc, lines, mods = probe_cached(py, cache)
    probe = lines[-1] if lines else {}
    c.check(rc == 0 and len(lines) == 1 and probe.get("type") == "probe", "probe: one probe line")
    c.check(probe.get("protocol") == 1 and probe.get("torch"), "probe: protocol 1, torch version")
    names = [m["name"] for m in probe.get("models", [])]
    for m in ("resnet18", "mobilenet_v2", "bert_base", "gpt2", "whisper_tiny", "vit_b_16"):
        c.check(m in names, "probe lists %s (native zoo names)" % m)
    c.check(probe.get("variants", [])[:1] == ["eager"] and len(probe.get("variants", [])) == 6,
            "probe: the six rungs")
    # the params each model's builder reads and the runner's (the catalog's
    # "params": a job naming another is refused at submit)
    by = {m["name"]: m for m in probe.get("models", [])}
    c.check(by.get("resnet18", {}).get("params") == ["image_size", "num_classes"] and
            by.get("bert_base", {}).get("params") == ["seq_len", "layers", "hidden", "heads"] and
            "mel_frames" in by.get("whisper_tiny", {}).get("params", []),
            "probe: each model's params (%r)" % {n: by.get(n, {}).get("params")
                                                 for n in ("resnet18", "bert_base")})
    c.check(probe.get("params") == ["unfuse", "time_budget_s", "tf32", "keep_output_code"],
            "probe: the runner's params (%r)" % probe.get("params"))
    probe_cache(c, py, cache, probe, mods)
    shutil.rmtree(cache, ignore_errors=True)

    rc, lines, _ = indtest.run_runner(py, {"model": "no_such_model"})
    c.check(rc == 1 and lines[-1]["type"] == "error" and
            lines[-1]["code"] == "invalid_argument" and "no_such_model" in lines[-1]["message"],
            "unknown model: invalid_argument naming it")
    rc, lines, _ = indtest.run_runner(py, {"model": "tiny_cnn", "variants": ["fused"]})
    c.check(rc == 1 and lines[-1]["code"] == "invalid_argument", "unknown variant refused")
    rc, lines, _ = indtest.run_runner(py, {"model": "tiny_cnn", "bogus": 1})
    c.check(rc == 1 and "bogus" in lines[-1]["message"], "unknown field named")
    for bad in ({"gbps": 30.0}, {"gbps": 0, "gflops": 140.0}, {"gbps": True, "gflops": 1.0},
                {"gbps": "30", "gflops": 140.0}, [30.0, 140.0]):
        rc, lines, _ = indtest.run_runner(py, {"model": "tiny_cnn", "roofline": bad})
        c.check(rc == 1 and lines[-1]["code"] == "invalid_argument" and
                "roofline" in lines[-1]["message"], "roofline %r refused, named" % (bad,))
    r = subprocess.run([py, indtest.RUNNER], input="{not json", capture_output=True, text=True)
    c.check(r.returncode == 1 and json.loads(r.stdout)["type"] == "error", "not JSON: error line")

    # A full small job through files, with library prints going to stderr and the
    # injection variable set: it must not reach the protocol nor leak onward.
    req = {"model": "tiny_cnn", "variants": ["eager"], "warmup": 1, "iterations": 3,
           "threads": 1, "params": {"image_size": 16},
           "roofline": {"gbps": 30.5, "gflops": 142.75}}  # as the worker sends it
    with tempfile.TemporaryDirectory() as d:
        rq, out = os.path.join(d, "req.json"), os.path.join(d, "out.jsonl")
        with open(rq, "w") as f:
            json.dump(req, f)
        env = dict(os.environ, CUDA_INJECTION64_PATH="/nonexistent/libfb_cupti_inject.so",
                   PYTHONWARNINGS="always")
        r = subprocess.run([py, indtest.RUNNER, "--request", rq, "--out", out],
                           capture_output=True, text=True, env=env, timeout=600)
        c.check(r.returncode == 0 and r.stdout == "", "--out: exit 0, nothing on stdout")
        with open(out) as f:
            lines = [json.loads(l) for l in f]
    types = [l["type"] for l in lines]
    c.check(types[-1] == "result" and set(types[:-1]) == {"progress"},
            "progress lines then one result line")
    phases = [l["phase"] for l in lines if l["type"] == "progress"]
    c.check(phases[0] == "prepare" and "timing" in phases and phases[-1] == "done",
            "progress phases prepare → timing → done")
    res = lines[-1]
    v = res["variants"][0]
    rep = res["repetition"]
    c.check(rep["rounds_requested"] == 3 and 3 <= rep["rounds"] <= 30, "repetition %r" % rep)
    c.check(v["status"] == "ok" and len(v["samples_ms"]) == rep["rounds"] and
            all(s > 0 for s in v["samples_ms"]), "eager: a positive sample per round")
    c.check(res["env"]["torch"] and res["env"]["threads"] == 1, "env: torch version, 1 thread")
    c.check(res["env"]["cuda_injection"] == "scrubbed",
            "CUDA_INJECTION64_PATH removed from the runner's environment before compiling")
    c.done()


if __name__ == "__main__":
    main()
