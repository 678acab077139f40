#!/usr/bin/env python3
"""bench/model_upload.py: a large model archive up and down through a build's
fusionbench-server, with the server's memory watched (issue 26: the upload is
streamed into PostgreSQL, never held whole; the target is an RSS under 64 MiB
over the server's idle size).

Starts a throwaway PostgreSQL (scripts/pg.sh, FB_PG_FAST=1) and the server
(--max-model-bytes above the size), writes SIZE random bytes to a file, uploads
it with POST /api/v1/models (http.client, the body read from the file in 1 MiB
pieces), downloads it back from /api/v1/models/{id}/archive into another
file, and compares the SHA-256s.  The server's VmRSS is sampled every 50 ms
from /proc throughout.  Prints, per direction, the time and MiB/s, and the
server's RSS: idle, peak, peak over idle.  Exit 0 when the bytes came back
whole and the peak over idle is under --rss-limit-mib.

    bench/model_upload.py [--bin BUILD_DIR] [--size-mib 1024] [--rss-limit-mib 64]
"""

import argparse
import hashlib
import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PIECE = 1 << 20


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, False

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, rss_kib(self.pid))
            time.sleep(0.05)


def upload(port, path, size):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.putrequest("POST", "/api/v1/models?name=big")
    c.putheader("Content-Type", "application/octet-stream")
    c.putheader("X-FusionBench-Client", "bench")
    c.putheader("Content-Length", str(size))
    c.endheaders()
    with open(path, "rb") as f:
        while True:
            b = f.read(PIECE)
            if not b:
                break
            c.send(b)
    r = c.getresponse()
    body = r.read()
    if r.status != 201:
        raise SystemExit("upload: HTTP %d %s" % (r.status, body[:300]))
    return json.loads(body)


def download(port, mid, path):
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    c.request("GET", "/api/v1/models/%d/archive" % mid)
    r = c.getresponse()
    if r.status != 200:
        raise SystemExit("download: HTTP %d %s" % (r.status, r.read()[:300]))
    h = hashlib.sha256()
    with open(path, "wb") as f:
        while True:
            b = r.read(PIECE)
            if not b:
                break
            h.update(b)
            f.write(b)
    return h.hexdigest()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "build"))
    ap.add_argument("--size-mib", type=int, default=1024)
    ap.add_argument("--rss-limit-mib", type=float, default=64)
    a = ap.parse_args()
    size = a.size_mib * PIECE
    tmp = tempfile.mkdtemp(prefix="fb-upload-")
    os.chmod(tmp, 0o755)  # as root, pg.sh runs PostgreSQL as postgres, who must reach it
    pg = os.path.join(ROOT, "scripts", "pg.sh")
    env = dict(os.environ, FB_PG_FAST="1")
    url = subprocess.run([pg, "start", os.path.join(tmp, "pg"), str(free_port())], env=env,
                         check=True, capture_output=True, text=True).stdout.strip().splitlines()[-1]
    port = free_port()
    srv = subprocess.Popen([os.path.join(a.bin, "server", "fusionbench-server"), "--database-url",
                            url, "--port", str(port), "--web-dir", os.path.join(ROOT, "web"),
                            "--max-model-bytes", str(size + 1)],
                           stdout=subprocess.DEVNULL,
                           stderr=open(os.path.join(tmp, "server.log"), "w"))
    ok = False
    try:
        for _ in range(300):
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                c.request("GET", "/readyz")
                if c.getresponse().status == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        src, back = os.path.join(tmp, "in.bin"), os.path.join(tmp, "out.bin")
        h = hashlib.sha256()
        with open(src, "wb") as f:
            for _ in range(a.size_mib):
                b = os.urandom(PIECE)
                h.update(b)
                f.write(b)
        want = h.hexdigest()
        idle = rss_kib(srv.pid)
        s = Sampler(srv.pid)
        s.start()
        t0 = time.monotonic()
        m = upload(port, src, size)
        up_s = time.monotonic() - t0
        up_peak = s.peak
        s.peak = 0
        t0 = time.monotonic()
        got = download(port, m["id"], back)
        down_s = time.monotonic() - t0
        s.stop = True
        s.join()
        down_peak = s.peak
        mib = size / PIECE
        over = (max(up_peak, down_peak) - idle) / 1024
        print("archive %d MiB: stored sha256 %s, read back %s" % (
            a.size_mib, "matches" if m["sha256"] == want else "DIFFERS",
            "matches" if got == want else "DIFFERS"))
        print("upload   %.1f s (%.0f MiB/s); server RSS peak %.1f MiB" % (
            up_s, mib / up_s, up_peak / 1024))
        print("download %.1f s (%.0f MiB/s); server RSS peak %.1f MiB" % (
            down_s, mib / down_s, down_peak / 1024))
        print("server RSS idle %.1f MiB; peak over idle %.1f MiB (limit %.0f MiB)" % (
            idle / 1024, over, a.rss_limit_mib))
        ok = m["sha256"] == want and got == want and over < a.rss_limit_mib
    finally:
        srv.terminate()
        srv.wait()
        subprocess.run([pg, "stop", os.path.join(tmp, "pg")], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
