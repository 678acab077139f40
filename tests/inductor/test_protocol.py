"""The runner's protocol (docs/INDUCTOR_PROTOCOL.md): probe, bad requests,
clean protocol stream (only JSON lines, library prints kept out), --out files,
the injection variable scrubbed."""

import json
import os
import subprocess
import tempfile

import indtest


def main():
    py = indtest.python_or_skip()
    c = indtest.Checks()

    rc, lines, _ = indtest.run_runner(py, args=["--probe"])
    probe = lines[-1] if lines else {}
    c.check(rc == 0 and len(lines) == 1 and probe.get("type") == "probe", "probe: one probe line")
    c.check(probe.get("protocol") == 1 and probe.get("torch"), "probe: protocol 1, torch version")
    names = [m["name"] for m in probe.get("models", [])]
    for m in ("resnet18", "mobilenet_v2", "bert_base", "gpt2", "whisper_tiny", "vit_b_16"):
        c.check(m in names, "probe lists %s (native zoo names)" % m)
    c.check(probe.get("variants", [])[:1] == ["eager"] and len(probe.get("variants", [])) == 6,
            "probe: the six rungs")

    rc, lines, _ = indtest.run_runner(py, {"model": "no_such_model"})
    c.check(rc == 1 and lines[-1]["type"] == "error" and
            lines[-1]["code"] == "invalid_argument" and "no_such_model" in lines[-1]["message"],
            "unknown model: invalid_argument naming it")
    rc, lines, _ = indtest.run_runner(py, {"model": "tiny_cnn", "variants": ["fused"]})
    c.check(rc == 1 and lines[-1]["code"] == "invalid_argument", "unknown variant refused")
    rc, lines, _ = indtest.run_runner(py, {"model": "tiny_cnn", "bogus": 1})
    c.check(rc == 1 and "bogus" in lines[-1]["message"], "unknown field named")
    r = subprocess.run([py, indtest.RUNNER], input="{not json", capture_output=True, text=True)
    c.check(r.returncode == 1 and json.loads(r.stdout)["type"] == "error", "not JSON: error line")

    # A full small job through files, with library prints going to stderr and the
    # injection variable set: it must not reach the protocol nor leak onward.
    req = {"model": "tiny_cnn", "variants": ["eager"], "warmup": 1, "iterations": 3,
           "threads": 1, "params": {"image_size": 16}}
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
