#!/usr/bin/env python3
"""End to end: schemathesis (PyPI, its own small venv: scripts/requirements-apifuzz.txt)
against a live server with tokens on, driven by the document the server serves
(/api/v1/openapi.json): every operation, generated valid and invalid requests,
stateful sequences (a submitted job's id fed to its reads, cancel and explain),
and every check it has: no 5xx, each answer's status, content type, headers and
body as the document says (errors the documented Error shape), schema-valid
requests accepted and invalid ones refused (tests/api/schemathesis.toml lists
the refusals a schema cannot express).  It fails on any failure schemathesis
reports.

FB_SCHEMATHESIS_EXAMPLES (default 10) sets --max-examples; bench/fuzz.sh runs
it long.  The seed is printed (FB_SCHEMATHESIS_SEED replays one).  Skipped (77)
when the venv cannot be built (no network to PyPI)."""

import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fbtest  # noqa: E402
from fbtest import check, log  # noqa: E402
from test_submit import register_worker  # noqa: E402


def venv_python():
    src = fbtest.source_dir()
    r = subprocess.run([os.path.join(src, "scripts", "small-venv.sh"), "apifuzz-venv",
                        os.path.join(src, "scripts", "requirements-apifuzz.txt"),
                        "import schemathesis"], capture_output=True, text=True, timeout=1800)
    if r.returncode != 0:
        print(r.stderr[-2000:])
        return None
    return r.stdout.strip()


def run(env):
    py = venv_python()
    if not py:
        print("skipped: the schemathesis venv could not be built (see above)", flush=True)
        sys.exit(fbtest.SKIP)
    env.start_server(["--auth"])
    env.admin("user", "add", "root", "--role", "admin")
    token = env.admin("token", "create", "root")
    register_worker(env)  # the catalog offers a workload, so submits can succeed
    examples = os.environ.get("FB_SCHEMATHESIS_EXAMPLES", "10")
    seed = os.environ.get("FB_SCHEMATHESIS_SEED") or str(random.randrange(1, 1 << 31))
    st = os.path.join(os.path.dirname(py), "st")
    argv = [st, "--config-file", os.path.join(fbtest.source_dir(), "tests", "api",
                                              "schemathesis.toml"),
            "run", env.base + "/api/v1/openapi.json", "--checks", "all",
            "--max-examples", examples, "--seed", seed, "--no-color",
            "-H", "Authorization: Bearer " + token,
            "-H", "X-FusionBench-Client: schemathesis"]
    log("schemathesis, seed %s, %s examples per operation" % (seed, examples))
    r = subprocess.run(argv, capture_output=True, text=True, cwd=env.tmp,
                       timeout=int(os.environ.get("FB_SCHEMATHESIS_TIMEOUT", "1200")))
    out = r.stdout + r.stderr
    summary = out[out.find("SUMMARY"):] if "SUMMARY" in out else out[-3000:]
    print(summary, flush=True)
    m = re.search(r"(\d+) generated, (.*)", out)
    check(m, "schemathesis printed no test case count (exit %d): %s" % (r.returncode,
                                                                      out[-2000:]))
    gen = int(m.group(1))
    check(r.returncode == 0 and "found" not in m.group(2),
          "schemathesis found failures (exit %d, seed %s):\n%s" % (r.returncode, seed,
                                                                    out[-12000:]))
    check(gen >= 200, "only %d cases generated" % gen)
    log("schemathesis: %d cases, %s" % (gen, m.group(2)))


if __name__ == "__main__":
    fbtest.main(run, "schemathesis")
