"""A PEP 517 build backend for the fusionbench client, standard library only:
a wheel (and an sdist) of the one pure-Python package `fusionbench/`, so that
pip installs it with no index reachable (setuptools would need `wheel` from
one).  Name and version come from pyproject.toml's [project]."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "fusionbench"


def _project():
    """name, version, summary, requires-python from pyproject.toml (a flat
    [project] table of strings is all this reads)."""
    out, section = {}, None
    with open(os.path.join(HERE, "pyproject.toml")) as f:
        for line in f:
            line = line.strip()
            if line.startswith("["):
                section = line.strip("[]")
            elif section == "project" and "=" in line and not line.startswith("#"):
                key, val = (x.strip() for x in line.split("=", 1))
                out[key] = val.strip('"')
    return out


def _metadata(p):
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nRequires-Python: %s\n"
            % (p["name"], p["version"], p.get("description", ""), p.get("requires-python", "")))


def _files():
    base = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(base)):
        if name.endswith(".py"):
            yield "%s/%s" % (PACKAGE, name), os.path.join(base, name)


def _record_line(arc, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arc, digest, len(data))


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    p = _project()
    dist = "%s-%s" % (p["name"], p["version"])
    path = os.path.join(wheel_directory, dist + "-py3-none-any.whl")
    entries = [(arc, open(src, "rb").read()) for arc, src in _files()]
    entries.append((dist + ".dist-info/METADATA", _metadata(p).encode()))
    entries.append((dist + ".dist-info/WHEEL", b"Wheel-Version: 1.0\n"
                    b"Generator: fusionbench-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n"))
    record = [_record_line(arc, data) for arc, data in entries]
    record.append(dist + ".dist-info/RECORD,,")
    entries.append((dist + ".dist-info/RECORD", ("\n".join(record) + "\n").encode()))
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in entries:
            z.writestr(arc, data)
    return os.path.basename(path)


def build_sdist(sdist_directory, config_settings=None):
    p = _project()
    dist = "%s-%s" % (p["name"], p["version"])
    path = os.path.join(sdist_directory, dist + ".tar.gz")
    with tarfile.open(path, "w:gz") as t:
        for arc, src in list(_files()) + [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
                                          ("_build/backend.py", os.path.abspath(__file__))]:
            t.add(src, arcname="%s/%s" % (dist, arc))
        meta = _metadata(p).encode()
        info = tarfile.TarInfo("%s/PKG-INFO" % dist)
        info.size = len(meta)
        t.addfile(info, io.BytesIO(meta))
    return os.path.basename(path)
