"""The probe's answer, kept between runs (docs/INDUCTOR_PROTOCOL.md "Probe").

`runner.py --probe` imports torch, torchvision and the model zoo to say what this
Python can do: 10 to 16 s of a 2-vCPU VM, paid by every worker start and every
`fusionbench-run --engine inductor`, for an answer that changes only when the
Python environment does.  So the answer is stored, keyed by everything it
depends on that can be read without importing torch:

- the interpreter (its real path, its file's size and times, sys.version);
- every sys.path entry with its directory's times: installing, upgrading or
  removing a package adds or removes entries in site-packages, which changes
  its times; PYTHONPATH and .pth files show up as entries;
- the runner's own *.py files (models.py lists the zoo), each with its times;
- what decides `cuda`: FB_PROBE_CUDA, CUDA_VISIBLE_DEVICES and
  NVIDIA_VISIBLE_DEVICES, the NVIDIA driver's version line and the /dev/nvidia*
  device files.

Only a successful probe is stored (a failure is quick: its import fails).  The
folder is $FUSIONBENCH_PROBE_CACHE ("off": none), else $XDG_CACHE_HOME or
~/.cache, /fusionbench/inductor-probe; a file per key, written whole (a
temporary file renamed), at most MAX_FILES kept (the oldest go first).  A file
that cannot be read or is not a probe of this protocol is ignored and replaced.
"""

import glob
import hashlib
import json
import os
import sys
import tempfile

MAX_FILES = 16
ENV_KEYS = ("FB_PROBE_CUDA", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")


def folder():
    """The cache folder, or None when caching is off or there is no home."""
    env = os.environ.get("FUSIONBENCH_PROBE_CACHE")
    if env == "off":
        return None
    if env:
        return env
    base = os.environ.get("XDG_CACHE_HOME")
    if not base:
        home = os.environ.get("HOME")
        if not home:
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "fusionbench", "inductor-probe")


def _stat(path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino]


def _read_small(path, limit=4096):
    try:
        with open(path, errors="replace") as f:
            return f.read(limit)
    except OSError:
        return None


def key(here, protocol):
    """The hex digest naming this environment's probe answer."""
    exe = os.path.realpath(sys.executable)
    runner = sorted(n for n in os.listdir(here) if n.endswith(".py"))
    parts = {
        "protocol": protocol,
        "executable": [exe, _stat(exe), sys.version],
        # the runner's folder is sys.path[0]: its files count, not its own
        # times (a first run's __pycache__ would change them)
        "path": [[p, _stat(p or ".")] for p in sys.path if os.path.abspath(p or ".") != here],
        "runner": [[n, _stat(os.path.join(here, n))] for n in runner],
        "env": {k: os.environ.get(k) for k in ENV_KEYS},
        "driver": _read_small("/proc/driver/nvidia/version"),
        "devices": sorted(glob.glob("/dev/nvidia*")),
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(here, protocol):
    """The stored probe line for this environment, or None."""
    d = folder()
    if not d:
        return None
    path = os.path.join(d, key(here, protocol) + ".json")
    text = _read_small(path, 1 << 20)
    if text is None:
        return None
    try:
        line = json.loads(text)
    except ValueError:
        return None
    if not isinstance(line, dict) or line.get("type") != "probe" or \
            line.get("protocol") != protocol or not isinstance(line.get("models"), list):
        return None
    return line


def store(here, protocol, line):
    """Keeps line for this environment; silently nothing where it cannot."""
    d = folder()
    if not d:
        return
    try:
        os.makedirs(d, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=d, prefix=".probe-", suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(line, f, sort_keys=True)
        os.replace(tmp, os.path.join(d, key(here, protocol) + ".json"))
        _prune(d)
    except OSError:
        pass


def _prune(d):
    files = []
    for n in os.listdir(d):
        if n.endswith(".json"):
            st = _stat(os.path.join(d, n))
            if st:
                files.append((st[1], n))
    files.sort()
    for _, n in files[:max(0, len(files) - MAX_FILES)]:
        try:
            os.unlink(os.path.join(d, n))
        except OSError:
            pass
