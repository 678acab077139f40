"""A runner.py in front of the real one (FUSIONBENCH_INDUCTOR_RUNNER), for
tests/e2e/test_model_prepare.py: for --inspect-model it first appends what the
runner was given to $SPY_OUT (one JSON line: the names of its environment
variables and its open descriptors), then runs the real runner in its place."""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REAL = os.path.join(HERE, "..", "..", "worker", "engine", "inductor", "runner.py")

if "--inspect-model" in sys.argv and os.environ.get("SPY_OUT"):
    fds = sorted(int(x) for x in os.listdir("/proc/self/fd"))
    with open(os.environ["SPY_OUT"], "a") as f:
        f.write(json.dumps({"env": sorted(os.environ), "fds": fds,
                            "args": sys.argv[1:]}) + "\n")
os.execv(sys.executable, [sys.executable, REAL] + sys.argv[1:])
