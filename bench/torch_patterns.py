#!/usr/bin/env python3
"""The ten fusion patterns of the native engine, written in PyTorch.

Each pattern is written exactly as the native engine's *eager* graph
(worker/engine/native/pat_<name>.c): the same primitive ops in the same order, the same
shapes and parameters, inputs drawn from the same distributions.  PyTorch eager
then runs one ATen kernel per op, as our eager plan runs one launch per op, and
torch.compile (TorchInductor, C++ backend on the CPU) fuses what it can: the
peer of our fused plan.

Timing follows METHOD.md: warmup first (compile time measured apart, on the
first call), then rounds interleaved eager, compiled, eager, compiled, ...,
time.perf_counter_ns (CLOCK_MONOTONIC) around each call, median over the
iterations, torch.set_num_threads(THREADS) for both.  The accuracy check is the
project's gate, max|compiled - eager| / max|eager| <= 1e-4 (float32).

Used by bench/patterns.py (side by side with fusionbench-run) and runnable alone:
    PY=$(scripts/venv.sh); $PY bench/torch_patterns.py --threads 2 [--patterns softmax,mlp]
"""

import argparse
import atexit
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

TOLERANCE = 1e-4  # METHOD.md, float32

# Default shapes: the native engine's defaults (worker/engine/native/pat_*.c), for batch 1.
# The leading dimension (rows, m, n, batch) is multiplied by the batch size there
# and here.  bench/patterns.py passes these same values to fusionbench-run as
# explicit --param flags, so the two sides cannot drift apart silently.
DEFAULTS = {
    "gemm_bias_relu": {"m": 512, "k": 1024, "n": 1024},
    "gemm_bias_gelu": {"m": 512, "k": 1024, "n": 1024},
    "mlp": {"m": 512, "d": 768, "h": 3072},
    "conv_bn_relu": {"channels": 64, "height": 56, "width": 56},
    "conv_relu_conv": {"channels": 64, "height": 56, "width": 56},
    "elementwise_chain": {"n": 16 * 1024 * 1024},
    "softmax": {"rows": 4096, "cols": 1024},
    "layernorm": {"rows": 4096, "cols": 768},
    "add_layernorm": {"rows": 4096, "cols": 768},
    "attention": {"heads": 8, "seq": 512, "head_dim": 64, "causal": 0},
}
ORDER = list(DEFAULTS)

torch = None  # imported by setup_torch(), after the Inductor cache dir is chosen
F = None


def _drop_cache(cache):
    """Removes the private Inductor cache once its compile workers, which may
    still write into it, are gone."""
    try:
        from torch._inductor.async_compile import shutdown_compile_workers

        shutdown_compile_workers()
    except ImportError:
        pass
    shutil.rmtree(cache, ignore_errors=True)


def setup_torch(threads, fresh_cache):
    """Imports torch with THREADS intra-op threads.  With fresh_cache the
    Inductor cache is a new temporary folder, so compile times are cold (the
    cost a user pays the first time), not a cache hit of an earlier run."""
    global torch, F
    if fresh_cache:
        cache = tempfile.mkdtemp(prefix="fb-bench-inductor-")
        atexit.register(_drop_cache, cache)
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    import torch as _torch
    import torch.nn.functional as _F

    torch, F = _torch, _F
    torch.set_num_threads(threads)
    torch.manual_seed(0)


def uniform(gen, shape, lo, hi):
    return torch.rand(shape, generator=gen) * (hi - lo) + lo


def linear_weight(gen, fan_in, shape):
    """Weights like PyTorch's default init: uniform in +-1/sqrt(fan_in)."""
    bound = 1.0 / math.sqrt(fan_in)
    return uniform(gen, shape, -bound, bound)


# ---- the eager graphs: one primitive op per line, as in pat_*.c -------------


def gemm_bias_relu(x, w, b):
    y = torch.mm(x, w)  # sgemm
    y = y + b  # bias_add
    return torch.relu(y)  # relu


def gemm_bias_gelu(x, w, b):
    y = torch.mm(x, w)
    y = y + b
    return F.gelu(y)  # exact, erf-based


def mlp(x, w1, b1, w2, b2):
    h = torch.mm(x, w1)
    h = h + b1
    h = F.gelu(h)
    y = torch.mm(h, w2)
    return y + b2


def conv_bn_relu(x, w, mean, var, gamma, beta):
    y = F.conv2d(x, w, None, padding=1)
    y = F.batch_norm(y, mean, var, gamma, beta, training=False, eps=1e-5)
    return torch.relu(y)


def conv_relu_conv(x, w1, b1, w2, b2):
    y = F.conv2d(x, w1, b1, padding=1)  # the bias is part of the conv op
    y = torch.relu(y)
    return F.conv2d(y, w2, b2, padding=1)


CHAIN_A, CHAIN_B = 1.5, 0.25  # the scalars a, b of the element chain


def elementwise_chain(x, y):
    t = x * CHAIN_A
    t = t + CHAIN_B
    t = torch.relu(t)
    s = torch.sigmoid(y)
    t = t * s
    return t + x


def softmax(x):
    m = torch.amax(x, dim=-1, keepdim=True)
    t = x - m
    e = torch.exp(t)
    s = torch.sum(e, dim=-1, keepdim=True)
    return e / s


def _layernorm(x, gamma, beta):
    mean = torch.mean(x, dim=-1, keepdim=True)
    d = x - mean
    sq = d * d
    var = torch.mean(sq, dim=-1, keepdim=True)
    ve = var + 1e-5
    r = torch.rsqrt(ve)
    n = d * r
    n = n * gamma
    return n + beta


def layernorm(x, gamma, beta):
    return _layernorm(x, gamma, beta)


def add_layernorm(x, res, gamma, beta):
    h = x + res
    return _layernorm(h, gamma, beta)


def attention(q, k, v, scale, mask):
    s = torch.matmul(q, k.transpose(-2, -1))  # bmm q k^T
    s = s * scale
    if mask is not None:
        s = s + mask
    p = torch.softmax(s, dim=-1)  # one kernel, as torch.softmax
    return torch.matmul(p, v)  # bmm p v


# ---- inputs: same shapes and distributions as the native builders ----------


def build(name, p, batch, gen):
    """Returns (fn, args) for pattern name with shape params p (DEFAULTS keys)."""
    u = lambda shape, lo=-1.0, hi=1.0: uniform(gen, shape, lo, hi)  # noqa: E731
    if name in ("gemm_bias_relu", "gemm_bias_gelu"):
        m, k, n = p["m"] * batch, p["k"], p["n"]
        fn = gemm_bias_relu if name == "gemm_bias_relu" else gemm_bias_gelu
        return fn, (u((m, k)), linear_weight(gen, k, (k, n)), linear_weight(gen, k, (n,)))
    if name == "mlp":
        m, d, h = p["m"] * batch, p["d"], p["h"]
        return mlp, (
            u((m, d)),
            linear_weight(gen, d, (d, h)),
            linear_weight(gen, d, (h,)),
            linear_weight(gen, h, (h, d)),
            linear_weight(gen, h, (d,)),
        )
    if name in ("conv_bn_relu", "conv_relu_conv"):
        c, hh, ww = p["channels"], p["height"], p["width"]
        x = u((batch, c, hh, ww))
        fan = c * 9
        if name == "conv_bn_relu":
            return conv_bn_relu, (
                x,
                linear_weight(gen, fan, (c, c, 3, 3)),
                u((c,), -0.1, 0.1),
                u((c,), 0.5, 1.5),  # running var > 0
                u((c,), 0.5, 1.5),
                u((c,), -0.1, 0.1),
            )
        return conv_relu_conv, (
            x,
            linear_weight(gen, fan, (c, c, 3, 3)),
            linear_weight(gen, fan, (c,)),
            linear_weight(gen, fan, (c, c, 3, 3)),
            linear_weight(gen, fan, (c,)),
        )
    if name == "elementwise_chain":
        n = p["n"] * batch
        return elementwise_chain, (u((n,)), u((n,), -3.0, 3.0))
    if name == "softmax":
        return softmax, (u((p["rows"] * batch, p["cols"]), -4.0, 4.0),)
    if name in ("layernorm", "add_layernorm"):
        rows, cols = p["rows"] * batch, p["cols"]
        x = u((rows, cols), -0.5, 1.5)  # an offset mean, so that centering matters
        gamma, beta = u((cols,), 0.5, 1.5), u((cols,), -0.5, 0.5)
        if name == "layernorm":
            return layernorm, (x, gamma, beta)
        return add_layernorm, (x, u((rows, cols)), gamma, beta)
    if name == "attention":
        shape = (batch, p["heads"], p["seq"], p["head_dim"])
        mask = None
        if p["causal"]:
            s = p["seq"]
            mask = torch.triu(torch.full((s, s), float("-inf")), diagonal=1)
        scale = 1.0 / math.sqrt(p["head_dim"])
        return attention, (u(shape), u(shape), u(shape), scale, mask)
    raise KeyError(f"unknown pattern {name!r}; known: {', '.join(ORDER)}")


# ---- timing -----------------------------------------------------------------


def summarize(samples):
    s = sorted(samples)
    mean = statistics.fmean(s)
    stdev = statistics.stdev(s) if len(s) > 1 else 0.0
    return {
        "median": statistics.median(s),
        "mean": mean,
        "min": s[0],
        "max": s[-1],
        "cv": stdev / mean if mean > 0 else 0.0,
        "n": len(s),
    }


def max_rel_error(out, ref):
    den = ref.abs().max().item()
    num = (out - ref).abs().max().item()
    if den == 0.0:
        return 0.0 if num == 0.0 else math.inf
    return num / den


# ATen calls that move no data through a kernel: allocation and aliasing that
# the dispatcher does not flag as views (matmul's reshape of its result, the
# output allocation of batch norm).
NON_COMPUTE = {"empty", "empty_like", "_unsafe_view"}


def eager_ops(fn, args):
    """The ATen compute ops one eager call dispatches, in order: PyTorch eager
    runs one kernel per op, so this is its kernel count, to set beside our eager
    plan's launches (equal counts: the two eager graphs are the same graph)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if not func.is_view and name not in NON_COMPUTE:
                self.ops.append(name)
            return func(*args, **(kwargs or {}))

    with torch.no_grad(), Recorder() as rec:
        fn(*args)
    return rec.ops


class Prepared:
    """A pattern built and compiled once, timed in as many rounds as wanted.
    info holds params, batch, compile_s (the first compiled call, apart from
    latency), max_rel_error of compiled vs eager, ok (within TOLERANCE) and
    eager_ops (the ATen compute ops of one eager call)."""

    def __init__(self, name, params=None, batch=1, seed=0):
        p = dict(DEFAULTS[name])
        p.update(params or {})
        self.fn, self.args = build(name, p, batch, torch.Generator().manual_seed(seed))
        self.info = {"params": p, "batch": batch, "eager_ops": eager_ops(self.fn, self.args)}
        with torch.no_grad():
            self.cfn = torch.compile(self.fn, dynamic=False)
            t0 = time.perf_counter()
            out_c = self.cfn(*self.args)
            self.info["compile_s"] = time.perf_counter() - t0
            err = max_rel_error(out_c, self.fn(*self.args))
        self.info["max_rel_error"] = err
        self.info["ok"] = bool(err <= TOLERANCE)

    def measure(self, warmup, iterations):
        """Warmup, then interleaved rounds eager, compiled, ...; returns the raw
        samples (ms) as (eager, compiled)."""
        variants = (self.fn, self.cfn)
        samples = ([], [])
        with torch.no_grad():
            for _ in range(warmup):
                for f in variants:
                    f(*self.args)
            for _ in range(iterations):
                for i, f in enumerate(variants):
                    t0 = time.perf_counter_ns()
                    f(*self.args)
                    samples[i].append((time.perf_counter_ns() - t0) / 1e6)
        return samples


def bench(name, params=None, batch=1, warmup=5, iterations=30, seed=0):
    """Times pattern name in PyTorch eager and torch.compile: Prepared.info plus
    eager and compiled stats (ms)."""
    prep = Prepared(name, params, batch, seed)
    eager, compiled = prep.measure(warmup, iterations)
    return dict(prep.info, eager=summarize(eager), compiled=summarize(compiled))


def env():
    return {
        "torch": torch.__version__,
        "threads": torch.get_num_threads(),
        "blas": "MKL" if torch.backends.mkl.is_available() else "other",
        "mkldnn": bool(torch.backends.mkldnn.is_available()),
        "python": platform.python_version(),
    }


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--patterns", default=",".join(ORDER), help="comma-separated names")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--iterations", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--warm-cache", action="store_true",
                    help="reuse Inductor's cache (compile times then are cache hits)")
    a = ap.parse_args(argv)
    names = [n for n in a.patterns.split(",") if n]
    for n in names:
        if n not in DEFAULTS:
            ap.error(f"unknown pattern {n!r}; known: {', '.join(ORDER)}")
    setup_torch(a.threads, not a.warm_cache)
    out = {"env": env(), "patterns": {}}
    for n in names:
        out["patterns"][n] = bench(n, batch=a.batch, warmup=a.warmup, iterations=a.iterations)
        r = out["patterns"][n]
        print(f"{n:18s} eager {r['eager']['median']:9.3f} ms  compiled "
              f"{r['compiled']['median']:9.3f} ms  compile {r['compile_s']:6.1f} s  "
              f"err {r['max_rel_error']:.2e}", file=sys.stderr)
    json.dump(out, sys.stdout, indent=1)
    print()
    return 0 if all(r["ok"] for r in out["patterns"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
