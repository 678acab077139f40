"""Shared helpers of the inductor tests (stdlib only; the runner itself runs in
the project venv's python).  A test exits 77 (ctest: skipped) with the reason
when that python or its torch is missing."""

import hashlib
import json
import os
import subprocess
import sys

SRC = os.environ.get("FB_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BIN = os.environ.get("FB_BIN_DIR", "")
RUNNER = os.path.join(SRC, "worker", "engine", "inductor", "runner.py")
SKIP = 77


def venv_python():
    env = os.environ.get("FUSIONBENCH_PYTHON")
    if env:
        return env
    with open(os.path.join(SRC, "scripts", "requirements.txt"), "rb") as f:
        h = hashlib.sha256(f.read()).hexdigest()[:16]
    return os.path.expanduser("~/.cache/fusionbench/venv-%s/bin/python" % h)


def python_or_skip(modules=("torch",)):
    py = venv_python()
    if not os.access(py, os.X_OK):
        print("SKIP: no project venv python at %s (scripts/requirements.txt)" % py)
        sys.exit(SKIP)
    code = "import " + ", ".join(modules)
    r = subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        print("SKIP: %s cannot %r: %s" % (py, code, r.stderr.strip().splitlines()[-1:]))
        sys.exit(SKIP)
    return py


def run_runner(py, request=None, args=(), timeout=900):
    """Runs runner.py; returns (exit status, protocol lines as dicts, stderr)."""
    r = subprocess.run([py, RUNNER] + list(args),
                       input=json.dumps(request) if request is not None else "",
                       capture_output=True, text=True, timeout=timeout)
    lines = [json.loads(l) for l in r.stdout.splitlines() if l.strip()]
    return r.returncode, lines, r.stderr


def result_of(lines):
    final = lines[-1]
    if final["type"] != "result":
        raise AssertionError("runner ended with %s" % json.dumps(final)[:2000])
    return final


def variant(res, name):
    for v in res["variants"]:
        if v["name"] == name:
            return v
    raise AssertionError("no variant %s" % name)


class Checks:
    """Collects failed checks so a test reports all of them, then exits 1."""

    def __init__(self):
        self.failed = 0

    def check(self, cond, what):
        print("%s: %s" % ("ok" if cond else "FAIL", what))
        if not cond:
            self.failed += 1

    def done(self):
        print("%d check(s) failed" % self.failed if self.failed else "all checks passed")
        sys.exit(1 if self.failed else 0)
