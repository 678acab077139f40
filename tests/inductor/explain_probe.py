"""Runs the inductor runner's whole job, in process, on a module built here
(registered into the runner's zoo for this process only) with "explain": true,
and prints the fusion-by-fusion explanation as one JSON line.  Used by
test_explain.py for the planted harmful and helpful fusions.

    python explain_probe.py MODULE [--budget S] [--seed N] [--size N]

MODULE: harmful (a fusion Inductor makes that measurably costs time on the
CPU), helpful (one that measurably saves), interaction (a loss and an extra
peak that any one of four fusions holds; --size N: its scores are 4 x N x N
floats, 1500 by default) or long_rows (the same four layers over 4 rows of
N scores, 2,250,000 by default: the fused softmaxes allocate a 36 MB buffer
each where undone one serves all)."""

import argparse
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "worker", "engine", "inductor"))

import torch  # noqa: E402

import models  # noqa: E402
import runner  # noqa: E402


class Harmful(torch.nn.Module):
    """A vertical fusion that costs on the CPU: an expensive, vectorizable
    pointwise producer (realized: two users) fused with a consumer the C++
    backend cannot vectorize (digamma).  Fused, the one loop nest runs
    scalar, the producer's exp/sin/cos/tanh with it; apart, the producer's
    kernel is vectorized.  a stays above 1, away from digamma's poles, so
    the compiled output passes the accuracy gate."""

    def forward(self, x):
        a = torch.exp(torch.sin(x)) * (2.0 + torch.cos(x)) + torch.tanh(x) + 1.5
        return a.sum(1), torch.digamma(a)


class Helpful(torch.nn.Module):
    """A fusion that pays: two column means over the same rows, fused with the
    product that feeds the second, read x once instead of twice (tried with
    torch 2.15: 20.5 ms fused, 27.3 undone, at 8192 x 1024)."""

    def forward(self, x, w):
        y = x.mean(0, keepdim=True)
        return (x - y) * w, (x * x).mean(0)


class Interaction(torch.nn.Module):
    """A loss that no one fusion holds: four attention-like layers whose
    scores, 4 x 1500 x 1500 floats (36 MB, past glibc's 32 MiB mmap
    threshold; --size), come from a library call (bmm).  Unfused, the softmax's
    last pointwise kernel writes over the scores in place, so one 36 MB
    buffer serves every layer; a softmax fused into one loop nest reads
    the scores in three passes and writes elsewhere, so the graph needs a
    second 36 MB buffer, mapped and zeroed page by page at each call, as
    soon as any one of the four is fused (whisper_tiny's encoder in
    miniature, EXPLAIN.md)."""

    def forward(self, q, k, v):
        for s in (0.5, 0.7, 0.9, 1.1):
            q = torch.bmm(torch.softmax(torch.bmm(q, k.transpose(1, 2)) * s, -1), v)
        return q


PLANTED = {
    "harmful": (Harmful, lambda b: (torch.randn(256, 4096),)),
    "helpful": (Helpful, lambda b: (torch.randn(4096, 1024), torch.randn(1024))),
    "interaction": (Interaction, lambda b, n: tuple(torch.randn(4, n, 4) for _ in range(3))),
    # rows too long for any cache: each fused softmax streams its row three
    # times anyway, so fusing saves little, and the fused graph allocates 6
    # scores buffers a call (216 MB), undone 1 (36 MB).  k is zero, so every
    # score is 0 and each softmax sums ones (exact in float32 below 2**24):
    # the compiled output then equals eager's, where with random scores a
    # sum over millions of exps, taken in another order, missed the
    # accuracy gate (max_rel_error 2.0e-3, and 3.5e-4 with v's mean at 2).
    # The kernels' work does not depend on the values.
    "long_rows": (Interaction, lambda b, n: (torch.randn(1, 4, 4), torch.zeros(1, n, 4),
                                             torch.randn(1, n, 4))),
}
SIZES = {"interaction": 1500, "long_rows": 2250000}


def register(name, size=None):
    cls, inputs = PLANTED[name]
    make = (lambda b: inputs(b, size or SIZES[name])) if name in SIZES else inputs
    models.MODELS["planted_" + name] = ("test", "planted (tests)",
                                         lambda batch, params: (cls().eval(), make(batch)), ())
    return "planted_" + name


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("module", choices=sorted(PLANTED))
    ap.add_argument("--budget", type=float, default=120)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--size", type=int, default=None)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    name = register(a.module, a.size)
    req = runner.parse_request(json.dumps({
        "model": name, "variants": ["eager", "inductor-nofusion", "inductor"], "warmup": 3,
        "iterations": a.iterations, "threads": 2, "explain": True, "timeout_s": 3600,
        "params": {"time_budget_s": a.budget}}))
    t0 = time.monotonic()
    out = os.path.join(tempfile.mkdtemp(prefix="fb-explain-probe-"), "proto.jsonl")
    line = runner.run_job(req, runner.Proto(out))
    if line["type"] != "result":
        print(json.dumps(line))
        return 1
    ind = next(v for v in line["variants"] if v["name"] == "inductor")
    print(json.dumps({"fusion_explain": ind["inductor"].get("fusion_explain"),
                      "seconds": round(time.monotonic() - t0, 1),
                      "decisions": ind["inductor"].get("decisions"),
                      "medians": {v["name"]: sorted(v["samples_ms"])[len(v["samples_ms"]) // 2]
                                  for v in line["variants"] if v["samples_ms"]}},
                     default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
