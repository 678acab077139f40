"""The `--param key=value` a bench script gives every workload, kept for each
workload only where it takes the key (its catalog entry's params: a key it
does not take is refused, docs/API.md), so that one list may hold, say, the
vision models' image_size and the transformers' seq_len.  Asked of
`fusionbench-run WORKLOAD --dry-run`, once per workload and key."""

import subprocess
import sys

_cache = {}


def _takes(binary, workload, engine, kv):
    key = (binary, workload, engine, kv.split("=", 1)[0])
    if key not in _cache:
        r = subprocess.run([binary, workload, "--engine", engine, "--dry-run", "--param", kv],
                           capture_output=True, text=True, timeout=300)
        # refused as not its parameter: drop it; any other answer (a bad value)
        # is kept, for the run itself to report
        _cache[key] = not (r.returncode == 2 and "is not a parameter of" in r.stderr)
    return _cache[key]


def for_workload(binary, workload, params, engine="native"):
    """The key=value entries of params that workload takes, in order."""
    kept = []
    for kv in params:
        if _takes(binary, workload, engine, kv):
            kept.append(kv)
        else:
            print("bench: %s (%s) takes no %s: not passed to it" % (
                workload, engine, kv.split("=", 1)[0]), file=sys.stderr, flush=True)
    return kept
