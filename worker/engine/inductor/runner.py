#!/usr/bin/env python3
"""FusionBench's inductor runner: one job per process (docs/INDUCTOR_PROTOCOL.md).

    runner.py --probe                       what this Python/PyTorch can do
    runner.py --inspect-model FILE [--native-out FORM]
                                            an uploaded torch.export archive read
                                            safely (pt2safe.py): one "model" line;
                                            its native form written to FORM
    runner.py [--request FILE] [--out FILE] one job: request JSON from FILE or
                                            stdin, protocol lines to FILE or stdout

Protocol lines are JSON objects, one per line, on the protocol stream only: the
runner moves the process's stdout (fd 1) to stderr at start, so whatever
PyTorch, Inductor or a model library prints lands on stderr and never in the
protocol.  Exit status: 0 a result line was written (variants may still have
failed), 1 an error line was written, 2 bad arguments.
"""

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import traceback

PROTOCOL = 1
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

# The CUPTI injection hook (docs/INDUCTOR_PROTOCOL.md): the worker sets
# CUDA_INJECTION64_PATH in this process's environment only.  It is read here,
# CUDA is initialized with it (the driver reads it once, at cuInit), and it is
# then removed from os.environ before anything can start a compile or autotune
# subprocess, so those never load the injection library.
INJECTION_VAR = "CUDA_INJECTION64_PATH"
INJECTION = {"state": "absent"}


class Proto:
    """The protocol stream: JSON lines, flushed one by one."""

    def __init__(self, path):
        if path:
            self.f = open(path, "w", buffering=1)
        else:
            fd = os.dup(1)
            os.dup2(2, 1)  # library prints go to stderr from now on
            self.f = os.fdopen(fd, "w", buffering=1)
        self.last = 0.0
        self.phase = None
        # one line at a time: the explanation's progress also goes out from
        # a thread while a compile runs (_beating)
        self.lock = threading.Lock()

    def send(self, obj):
        line = json.dumps(obj, allow_nan=False, default=str) + "\n"
        with self.lock:
            self.f.write(line)
            self.f.flush()

    def progress(self, phase, variant=None, done=0, total=0, force=False):
        now = time.monotonic()
        # The first line of each phase always goes out; then at most 4 a second.
        if force or phase != self.phase or now - self.last >= 0.25:
            self.last, self.phase = now, phase
            self.send({"type": "progress", "phase": phase, "variant": variant, "done": done,
                       "total": total})


def _version(mod):
    try:
        from importlib import metadata
        return metadata.version(mod)
    except Exception:
        return None


def probe():
    """What the worker registers: versions, devices, models, variants."""
    import torch
    import ladder
    import models

    ok, why = ladder.compile_available()
    try:
        import triton
        triton_v = triton.__version__
    except Exception:
        triton_v = None
    # FB_PROBE_CUDA: "1" (default) offers cuda when a device answers, "0" never,
    # "built" when this torch was built with CUDA, device or not: the catalog a
    # GPU machine would offer, for checking command lines where there is none
    # (scripts/gpu-check.sh --dry-run).
    want = os.environ.get("FB_PROBE_CUDA", "1")
    if want == "built":
        cuda = bool(torch.backends.cuda.is_built())
    else:
        cuda = bool(torch.cuda.is_available()) if want == "1" else False
    libs = {m: _version(m) for m in ("torchvision", "transformers", "timm")}
    return {"type": "probe", "protocol": PROTOCOL, "python": sys.version.split()[0],
            "torch": torch.__version__, "triton": triton_v, "compile": ok,
            "compile_reason": why, "cuda": cuda, "libraries": libs,
            "models": [{"name": n, "domain": m[0], "description": m[1],
                        "params": list(m[3]) if len(m) > 3 else None}
                       for n, m in sorted(models.MODELS.items())],
            "params": list(RUNNER_PARAMS), "variants": list(ladder.VARIANTS)}


def cached_probe():
    """probe()'s line, from probecache when this environment's is kept there
    ("cached": true), else probed and kept ("cached": false)."""
    import probecache

    line = probecache.load(HERE, PROTOCOL)
    if line is not None:
        line["cached"] = True
        return line
    line = probe()
    probecache.store(HERE, PROTOCOL, line)
    line["cached"] = False
    return line


# The params the runner reads for every model (beyond its builder's: the
# probe lists both, the worker adds threads, and a job naming any other is
# refused at submit): params.unfuse (the counterfactual rung), time_budget_s
# (adaptive rounds, the explanation), tf32 (the tolerance),
# keep_output_code (the generated code kept).
RUNNER_PARAMS = ("unfuse", "time_budget_s", "tf32", "keep_output_code")


# ---- request ----

DEFAULTS = {"device": "cpu", "dtype": "float32", "batch_size": 1, "warmup": 10,
            "iterations": 50, "params": {}, "threads": None, "profile": True, "explain": False,
            "roofline": None,
            "variants": ["eager", "inductor-nofusion", "inductor", "inductor-max-autotune"]}


class BadRequest(Exception):
    pass


def _check_int(req, key, lo, hi):
    v = req[key]
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise BadRequest("%s must be an integer in %d..%d" % (key, lo, hi))


def parse_request(text):
    import ladder
    import models

    try:
        req = json.loads(text)
    except ValueError as e:
        raise BadRequest("request is not JSON: %s" % e)
    if not isinstance(req, dict):
        raise BadRequest("request must be a JSON object")
    if req.get("protocol", PROTOCOL) != PROTOCOL:
        raise BadRequest("protocol %r is not %d" % (req.get("protocol"), PROTOCOL))
    unknown = set(req) - set(DEFAULTS) - {"protocol", "model", "timeout_s"}
    if unknown:
        raise BadRequest("unknown request field(s): %s" % ", ".join(sorted(unknown)))
    if req.get("model") not in models.MODELS and not (
            isinstance(req.get("model"), str) and models.is_uploaded(req["model"])):
        raise BadRequest("unknown model %r; known: %s" % (req.get("model"),
                                                          ", ".join(sorted(models.MODELS))))
    for k, v in DEFAULTS.items():
        req.setdefault(k, v)
    if req["device"] not in ("cpu", "cuda"):
        raise BadRequest("device must be cpu or cuda")
    if req["dtype"] not in ("float32", "float16", "bfloat16"):
        raise BadRequest("dtype must be float32, float16 or bfloat16")
    _check_int(req, "batch_size", 1, 65536)
    _check_int(req, "warmup", 0, 10000)
    _check_int(req, "iterations", 1, 100000)
    if req["threads"] is not None:
        _check_int(req, "threads", 1, 1024)
    if not isinstance(req["explain"], bool):
        raise BadRequest("explain must be true or false")
    roof = req["roofline"]
    if roof is not None and not (
            isinstance(roof, dict) and set(roof) == {"gbps", "gflops"} and
            all(not isinstance(v, bool) and isinstance(v, (int, float)) and
                0 < v < float("inf") for v in roof.values())):
        raise BadRequest("roofline must be null or {\"gbps\", \"gflops\"}, "
                         "both positive numbers")
    vs = req["variants"]
    if not isinstance(vs, list) or not vs or len(set(vs)) != len(vs) or \
            any(v not in ladder.VARIANTS for v in vs):
        raise BadRequest("variants must be distinct names from %s" % ", ".join(ladder.VARIANTS))
    if not isinstance(req["params"], dict):
        raise BadRequest("params must be an object")
    unfuse = req["params"].get("unfuse")
    if unfuse is not None:
        import decisions
        msg = decisions.check_ids(unfuse)
        if msg:
            raise BadRequest(msg)
        # the undone compile is timed against the unmodified one
        if "inductor" not in vs:
            vs.append("inductor")
        vs.insert(vs.index("inductor") + 1, ladder.UNFUSED)
    return req


# ---- one job ----


def env_info(req):
    import torch

    info = {"torch": torch.__version__, "triton": None, "python": sys.version.split()[0],
            "threads": torch.get_num_threads(), "device": req["device"], "cuda": None,
            "cudnn": None, "device_name": None, "cuda_injection": INJECTION["state"]}
    try:
        import triton
        info["triton"] = triton.__version__
    except Exception:
        pass
    if req["device"] == "cuda":
        info["cuda"] = torch.version.cuda
        info["cudnn"] = str(torch.backends.cudnn.version())
        info["device_name"] = torch.cuda.get_device_name()
    return info


def _counters_snapshot():
    from torch._dynamo.utils import counters
    return {k: dict(v) for k, v in counters.items()}


def _graphs_compiled():
    """Graphs dynamo compiled so far in this process."""
    from torch._dynamo.utils import counters
    return counters["stats"]["unique_graphs"]


def _delta(before, after):
    out = {}
    for group, vals in after.items():
        for k, v in vals.items():
            d = v - before.get(group, {}).get(k, 0) if isinstance(v, (int, float)) else v
            if d:
                out.setdefault(group, {})[k] = d
    return out


class Figures:
    """Inductor's own figures during one compile: output code, scheduler node
    counts before/after fusion, metrics and counters."""

    def __init__(self):
        self.codes = []
        self.sched = []

    def install(self):
        import outcode
        from torch._inductor.scheduler import Scheduler

        outcode.install_capture(self.codes.append)
        self.cpp_metadata = outcode.install_cpp_metadata()
        # Wrapped once per process; each compile's Figures becomes current.
        if not getattr(Scheduler, "_fb_wrapped", False):
            init = Scheduler.__init__

            def wrapped(s, *a, **kw):
                init(s, *a, **kw)
                if Figures.current is not None:
                    Figures.current.sched.append(
                        {"before": getattr(s, "num_orig_nodes", None), "after": len(s.nodes)})

            Scheduler.__init__ = wrapped
            Scheduler._fb_wrapped = True
        Figures.current = self


Figures.current = None


def _use_cache(d):
    """Inductor and Triton compile into (and load from) cache directory d from
    now on, with their in-memory caches cleared."""
    import torch

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    os.environ["TRITON_CACHE_DIR"] = os.path.join(d, "triton")
    clear = getattr(torch._inductor.utils, "clear_caches", None) or \
        getattr(torch._inductor.utils, "clear_inductor_caches", None)
    if clear:
        clear()


def _fresh_cache(root, name):
    """A new, empty Inductor/Triton cache directory (a cold compile), with the
    in-memory caches cleared too."""
    d = tempfile.mkdtemp(prefix=name.replace("+", "_") + "-", dir=root)
    _use_cache(d)
    return d


def _shared_cache(d):
    """Compiles in the existing cache directory d with Inductor's FX graph
    cache and AOTAutograd's cache off (a context): every graph is scheduled
    and generated anew, so an undone fusion is never handed the unmodified
    graph, while each generated kernel whose source is byte-identical to one
    already built there (C++ .so, Triton binary: keyed by their source) is
    loaded instead of compiled.  The in-memory caches are cleared as for a
    cold compile, now; the graph caches are off only inside the context."""
    _use_cache(d)
    return _graph_caches_off()


@contextlib.contextmanager
def _graph_caches_off():
    import torch

    with contextlib.ExitStack() as stack:
        stack.enter_context(torch._inductor.config.patch(fx_graph_cache=False))
        fc = getattr(torch._functorch, "config", None)
        if fc is not None and hasattr(fc, "enable_autograd_cache"):
            stack.enter_context(fc.patch(enable_autograd_cache=False))
        yield


def _sync(device):
    import torch
    if device == "cuda":
        torch.cuda.synchronize()


# Fusion decisions listed whole in a variant's figures (inductor and
# inductor-unfused); beyond it the list is cut and "decisions_total" says how
# many there were.
DECISIONS_MAX = 2000


def _grouping(name, undo):
    """The context of a rung's compiles: the no-fusion rung's one node per cpp
    kernel, or the counterfactual's undo (decisions.Undo)."""
    import ladder

    if name == "inductor-nofusion":
        return ladder.cpp_one_node_per_kernel()
    return undo if undo is not None else contextlib.nullcontext()


def compile_variant(name, model, inputs, req, root, undo=None, warm=True, share=None):
    """Compiles a rung twice: cold (a fresh cache directory) and warm (dynamo reset,
    same directory: Inductor's FX graph cache hits).  Each time is the first call
    (compile plus one execution).  The cold compile's fusion decisions are
    recorded (decisions.py; a warm compile does not schedule).  undo: a
    decisions.Undo for the counterfactual rung; warm=False: the cold compile
    only (the explanation's counterfactuals).  share: compile once, in that
    existing cache directory with the graph caches off (_shared_cache: the
    kernels left unchanged are loaded, not rebuilt), instead of a fresh one.
    Returns (callable, figures); figures' "_" keys are for the runner, not the
    result."""
    import torch
    import torch._inductor.metrics as metrics
    import decisions
    import ladder
    import outcode

    kw = ladder.compile_kwargs(name, req["device"])
    if undo is not None:
        kw["options"] = dict(kw.get("options", {}), **undo.options())
    if share is not None:
        cache, warm, shared = share, False, _shared_cache(share)
    else:
        cache, shared = _fresh_cache(root, name), contextlib.ExitStack()
    figs = Figures()
    figs.install()
    rec = decisions.Recorder()
    try:
        rec.start()
    except decisions.Unsupported as e:  # fusion decisions are a figure, not the rung
        rec, rec_error = None, str(e)
    missed = None
    if name == "inductor" and req["explain"] and undo is None and warm:
        import explain
        if explain.install_missed_hook():
            missed = explain.MissedRecorder.current = explain.MissedRecorder()
    metrics.reset()
    before = _counters_snapshot()
    torch._dynamo.reset()
    grouping = _grouping(name, undo)
    try:
        with shared, grouping:
            t0 = time.perf_counter()
            fn = torch.compile(model, **kw)
            fn(*inputs)
            _sync(req["device"])
            cold = (time.perf_counter() - t0) * 1e3
    finally:
        if rec is not None:
            rec.stop()
        if missed is not None:
            explain.MissedRecorder.current = None
    if missed is not None:  # while the scheduler's nodes are alive
        missed = missed.summary()
    cnt = _delta(before, _counters_snapshot())
    gen_count = metrics.generated_kernel_count
    pre_fusion = metrics.ir_nodes_pre_fusion
    cold_codes = list(figs.codes)
    figs.codes.clear()
    warm_ms, warm_cnt = None, {}
    if warm:
        torch._dynamo.reset()
        warm_before = _counters_snapshot()
        with _grouping(name, undo):
            t0 = time.perf_counter()
            fn = torch.compile(model, **kw)
            fn(*inputs)
            _sync(req["device"])
            warm_ms = (time.perf_counter() - t0) * 1e3
        warm_cnt = _delta(warm_before, _counters_snapshot())
    parsed = [outcode.parse(c) for c in cold_codes]
    summary = outcode.summarize(parsed)
    gb = cnt.get("graph_break", {})
    ind = cnt.get("inductor", {})
    figures = {
        "compile_kwargs": {k: v for k, v in kw.items()},
        "compile_cold_ms": cold, "compile_warm_ms": warm_ms,
        "warm_cache_hits": warm_cnt.get("inductor", {}).get("fxgraph_cache_hit", 0),
        "graphs": cnt.get("stats", {}).get("unique_graphs", len(cold_codes)),
        "graph_breaks": sum(v for v in gb.values() if isinstance(v, int)),
        "graph_break_reasons": gb,
        "generated_kernels": summary["generated_kernels"],
        "generated_kernel_count_metric": gen_count,
        "extern_calls": summary["extern_calls"],
        "ir_nodes_pre_fusion": pre_fusion,
        "nodes_before_fusion": sum(s["before"] or 0 for s in figs.sched),
        "nodes_after_fusion": sum(s["after"] for s in figs.sched),
        "pattern_matcher_count": ind.get("pattern_matcher_count", 0),
        "pattern_matcher_nodes": ind.get("pattern_matcher_nodes", 0),
        "inductor_counters": ind,
        "fused_kernels": summary["fused_kernels"],
        "fused_ops": summary["fused_ops"],
        "kernels_without_metadata": summary["kernels_without_metadata"],
        "cpp_metadata": figs.cpp_metadata,
        "kernels": summary["kernels"],
        "extern": summary["externs"],
        "output_code_bytes": sum(len(c) for c in cold_codes),
    }
    if req["params"].get("keep_output_code"):
        figures["output_code"] = cold_codes
    figures["_cache_dir"] = cache
    figures["_codes"] = cold_codes
    figures["_missed"] = missed
    if rec is None:
        figures["decisions_error"] = rec_error
        return fn, figures
    made = rec.decisions()
    figures["final_nodes"] = rec.final_nodes()
    layout = [g.get("layout_opt") for g in rec.graphs]
    figures["layout_optimized"] = True if any(layout) else \
        (False if layout and all(x is False for x in layout) else None)
    figures["fusion_decisions"] = {
        "fuse": sum(1 for d in made if d["id"].startswith("fuse-")),
        "group": sum(1 for d in made if d["id"].startswith("group-"))}
    if name in ("inductor", ladder.UNFUSED):
        figures["decisions"] = made[:DECISIONS_MAX]
        figures["decisions_total"] = len(made)
    figures["_decisions"] = made
    figures["_kernels"] = [k for g in rec.graphs for k in g["kernels"]]
    figures["_kernel_costs"] = decisions.kernel_costs(rec.graphs)
    return fn, figures


def rebind(req, variants):
    """torch._dynamo.reset() (between a rung's cold and warm compile) drops the
    compiled code of the rungs compiled before it; each compiled rung is called
    once more here, with its own cache directory and settings, so it reloads its
    own code from its FX graph cache (a warm hit) before warm-up and timing."""
    for v in variants:
        if v.fn is not None and v.out.get("inductor"):
            rebind_one(v)


def rebind_one(v):
    """Calls compiled variant v once in its own cache directory and settings
    (after a torch._dynamo.reset(): an FX graph cache hit, no compile)."""
    d = v.out["inductor"]["_cache_dir"]
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = d
    os.environ["TRITON_CACHE_DIR"] = os.path.join(d, "triton")
    with _grouping(v.name, v.undo):
        _guard(v, lambda: v.fn(*v_inputs[0]), "rebind")


v_inputs = [None]


class Variant:
    def __init__(self, name):
        self.name = name
        self.fn = None
        self.status = "ok"
        self.message = ""
        self.samples = []
        self.undo = None
        self.out = {"name": name}

    def fail(self, status, message):
        self.status, self.message = status, message[:500]
        self.fn = None


def _oom(e):
    return "out of memory" in str(e).lower() or type(e).__name__ == "OutOfMemoryError"


def _describe(e):
    first = (str(e).strip().splitlines() or [""])[0]
    return "%s: %s" % (type(e).__name__, first[:400])


def compile_unfused(v, variants, model, inputs, req, root):
    """The counterfactual rung: "inductor" with params.unfuse's fusions undone,
    checked against the decisions of the "inductor" compile before it (an id
    it did not make is decisions.UnknownId: the job fails before any timing),
    and verified to have taken (else the rung fails, saying which did not)."""
    import decisions
    import ladder

    base = next(x for x in variants if x.name == "inductor")
    made = base.out.get("inductor", {}).get("_decisions")
    if base.fn is None or made is None:
        v.fail("error", "the undo needs the inductor rung's fusion decisions: %s" % (
            base.message or base.out.get("inductor", {}).get("decisions_error", "none")))
        return
    ok, why = decisions.feature_check()
    if not ok:
        raise ladder.Unsupported(why)
    ids = req["params"]["unfuse"]
    v.undo = decisions.undo_for(ids, made)
    v.fn, figs = compile_variant(v.name, model, inputs, req, root, undo=v.undo)
    v.out["inductor"] = figs
    bf = base.out["inductor"]
    took = decisions.verify(ids, made, figs.get("_decisions", []),
                            {"final_nodes": bf.get("final_nodes", 0),
                             "generated_kernels": bf["generated_kernels"]},
                            {"final_nodes": figs.get("final_nodes", 0),
                             "generated_kernels": figs["generated_kernels"]})
    figs["unfuse"] = took
    bad = [t for t in took if not t["took"]]
    if bad:
        v.fail("error", "the undo did not take: " + "; ".join(
            "%s: %s" % (t["id"], t["reason"]) for t in bad))


def prepare(req, model, inputs, proto, root):
    import decisions
    import ladder
    import torch

    variants = [Variant(n) for n in req["variants"]]
    for i, v in enumerate(variants):
        proto.progress("prepare", v.name, i, len(variants), force=True)
        try:
            if v.name == "eager":
                v.fn = model
            elif v.name == "eager+cudagraphs":
                t0 = time.perf_counter()
                v.fn = ladder.eager_cudagraphs(model, inputs, req["device"])
                v.out["compile_cold_ms"] = (time.perf_counter() - t0) * 1e3
            elif v.name == ladder.UNFUSED:
                compile_unfused(v, variants, model, inputs, req, root)
            else:
                v.fn, v.out["inductor"] = compile_variant(v.name, model, inputs, req, root)
        except ladder.Unsupported as e:
            v.fail("unsupported", str(e))
        except decisions.UnknownId:
            raise  # the job's error: params.unfuse names no fusion of this model
        except Exception as e:  # a rung that fails leaves the others going
            traceback.print_exc()
            v.fail("oom" if _oom(e) else "error", "compile: " + _describe(e))
            if req["device"] == "cuda":
                torch.cuda.empty_cache()
    return variants


# Adaptive repetition, as fb_run.c does it for the native engine (docs/METHOD.md):
# while a variant's CV passes the device's threshold or a speedup's 95% bootstrap
# interval is wider than 10% of it, more interleaved rounds, in chunks of half the
# rounds asked for (at least 5), until params.time_budget_s (default: as long as
# the first rounds took, 1..60 s) or 10 times the rounds asked for.  A job that
# explains keeps at most that default for its rounds: params.time_budget_s is
# then the explanation's, less what the rounds took (explain.job_budget).
UNSTABLE_CV = {"cuda": 0.05}
UNSTABLE_CV_CPU = 0.10
WIDE_CI = 0.10
ROUNDS_X = 10
BOOTSTRAP = 2000
BOOTSTRAP_DRAWS_MAX = 20_000_000


def _cv(xs):
    if len(xs) < 2:
        return 0.0
    mean = sum(xs) / len(xs)
    var = sum((x - mean) ** 2 for x in xs) / (len(xs) - 1)
    return (var ** 0.5) / mean if mean > 0 else 0.0


def _speedup_ci(base, var):
    """(speedup, lo, hi): the ratio of medians and its percentile bootstrap
    interval (fixed seed), or None when a side has fewer than 2 samples."""
    import torch

    if len(base) < 2 or len(var) < 2:
        return None
    g = torch.Generator().manual_seed(0x5EEDF00D)
    tb = torch.tensor(base, dtype=torch.float64)
    tv = torch.tensor(var, dtype=torch.float64)
    # As fb_stats.c: at most BOOTSTRAP_DRAWS_MAX draws (>= 200 resamples), and
    # in slices of about a million draws, so memory stays small at any n.
    n = len(base) + len(var)
    resamples = max(200, min(BOOTSTRAP, BOOTSTRAP_DRAWS_MAX // n))
    step = max(1, 1_000_000 // n)
    ratios = []
    for first in range(0, resamples, step):
        k = min(step, resamples - first)
        mb = tb[torch.randint(len(base), (k, len(base)), generator=g)].quantile(0.5, dim=1)
        mv = tv[torch.randint(len(var), (k, len(var)), generator=g)].quantile(0.5, dim=1)
        ratios.append(mb / mv)
    lo, hi = torch.quantile(torch.cat(ratios),
                            torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return tb.quantile(0.5).item() / tv.quantile(0.5).item(), lo, hi


def _unsettled(alive, device):
    thr = UNSTABLE_CV.get(device, UNSTABLE_CV_CPU)
    live = [v for v in alive if v.fn is not None and v.samples]
    if any(_cv(v.samples) > thr for v in live):
        return True
    base = next((v for v in live if v.name == "eager"), None)
    for v in live:
        if base is None or v is base:
            continue
        ci = _speedup_ci(base.samples, v.samples)
        if ci and ci[2] - ci[1] > WIDE_CI * ci[0]:
            return True
    return False


def _probe():
    """(wall s, steal ms or None, rusage) now: what _interference compares."""
    import resource

    steal = None
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
        if fields[0] == "cpu" and len(fields) > 8:
            steal = int(fields[8]) * 1000.0 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError):
        pass
    return time.perf_counter(), steal, resource.getrusage(resource.RUSAGE_SELF)


def _interference(a, b):
    """What else ran between probes a and b (fb_interference's fields)."""
    return {"timed_ms": (b[0] - a[0]) * 1e3,
            "steal_ms": None if a[1] is None or b[1] is None else b[1] - a[1],
            "involuntary_switches": b[2].ru_nivcsw - a[2].ru_nivcsw,
            "minor_faults": b[2].ru_minflt - a[2].ru_minflt,
            "major_faults": b[2].ru_majflt - a[2].ru_majflt}


def _timed_rounds(alive, clock, inputs, start, stop):
    for it in range(start, stop):
        for v in (alive if it % 2 == 0 else alive[::-1]):
            if v.fn is not None:
                ms = _guard(v, lambda: clock.time_ms(v.fn, inputs), "timing")
                if ms is not None:
                    v.samples.append(ms)


def run_variants(req, variants, inputs, proto):
    """Warm-up, then interleaved timed rounds, every other one in reverse order
    (v0 v1 .., .. v1 v0, ...: docs/METHOD.md, "Rounds"), then adaptive
    repetition.  Returns the repetition report and the interference of the
    timed rounds."""
    import explain
    import measure

    clock = measure.Clock(req["device"])
    alive = [v for v in variants if v.fn is not None]
    for w in range(req["warmup"]):
        proto.progress("warmup", None, w, req["warmup"])
        for v in alive:
            _guard(v, lambda: v.fn(*inputs), "warmup")
        _sync(req["device"])
    asked = req["iterations"]
    p0 = _probe()
    t0 = time.perf_counter()
    for it in range(asked):
        proto.progress("timing", None, it, asked)
        _timed_rounds(alive, clock, inputs, it, it + 1)
    first_s = time.perf_counter() - t0
    budget = explain.seconds_param(req["params"].get("time_budget_s"))
    own = min(max(first_s, 1.0), 60.0)
    budget = min(own if budget is None else budget, 3600.0)
    if req["explain"]:  # one budget: the explanation gets what the rounds leave
        budget = min(budget, own)
    done, most, stop = asked, asked * ROUNDS_X, "stable"
    t_extra = time.perf_counter()
    while _unsettled(alive, req["device"]):
        if done >= most:
            stop = "max_rounds"
            break
        if time.perf_counter() - t_extra >= budget:
            stop = "time_budget"
            break
        chunk = min(max(asked // 2, 5), most - done)
        proto.progress("timing", None, done, done + chunk)
        _timed_rounds(alive, clock, inputs, done, done + chunk)
        done += chunk
        stop = "converged"
    return ({"rounds_requested": asked, "rounds": done, "budget_s": budget, "stop": stop,
             "extra_s": round(time.perf_counter() - t_extra, 3)},
            _interference(p0, _probe()))


def _guard(v, f, step):
    if v.fn is None:
        return None
    try:
        return f()
    except Exception as e:
        traceback.print_exc()
        v.fail("oom" if _oom(e) else "error", "%s: %s" % (step, _describe(e)))
        return None


def gate(req, variants, model, inputs):
    """Accuracy gate against eager (computed here even when eager is not a rung)."""
    import measure

    tol = measure.tolerance(req["dtype"], bool(req["params"].get("tf32", False)))
    ref = measure.flat_output(model(*inputs))
    bad_ref = measure.check_output(ref)
    for v in variants:
        v.out["tolerance"] = tol
        if v.fn is None:
            continue
        flat = _guard(v, lambda: measure.flat_output(v.fn(*inputs)), "output")
        if flat is None:
            continue
        msg = measure.check_output(flat)
        if msg:
            v.fail("error", msg)
            continue
        if bad_ref:
            v.out["max_rel_error"] = None
            continue
        err = measure.max_rel_error(flat, ref)
        v.out["max_rel_error"] = err if err == err and err != float("inf") else None
        if not err <= tol:
            v.status = "accuracy_failed"
            v.message = "max_rel_error %.3g vs eager exceeds tolerance %.0e for %s" % (
                err, tol, req["dtype"])


class _cupti_window:
    """On CUDA, marks the profiled iterations for the injection library:
    cudaProfilerStart/Stop around them and an NVTX range
    "fusionbench:profile:<variant>", so it can keep compile and autotune
    launches out of a variant's kernel records.  Nothing on the CPU."""

    def __init__(self, device, name):
        self.on, self.name = device == "cuda", name

    def __enter__(self):
        if self.on:
            import torch
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("fusionbench:profile:" + self.name)
            torch.cuda.profiler.start()

    def __exit__(self, *exc):
        if self.on:
            import torch
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            torch.cuda.nvtx.range_pop()
        return False


def explain_roofline(req):
    """The memory bandwidth the explanation holds kernels against:
    {"gbps", "measured_by"}, the worker's roofline the request carries (the
    one the job's kernel rows are held against), else on a GPU the device
    copy measured here (fusionbench-run without --roofline); None on a CPU
    without one."""
    import measure

    if req["roofline"]:
        return {"gbps": req["roofline"]["gbps"], "measured_by": "worker"}
    gbps = measure.device_copy_gbps() if req["device"] == "cuda" else None
    return {"gbps": gbps, "measured_by": "runner"} if gbps else None


def profile_all(req, variants, inputs, proto):
    import measure

    for i, v in enumerate(variants):
        if v.fn is None:
            continue
        proto.progress("profile", v.name, i, len(variants), force=True)
        peak, how = _guard(v, lambda: measure.peak_memory(v.fn, inputs, req["device"]),
                           "memory") or (None, "unavailable")
        v.out["peak_mem_bytes"], v.out["peak_mem_method"] = peak, how
        if not req["profile"] or v.fn is None:
            continue
        figs = v.out.get("inductor", {})
        kops = {k["name"]: k["aten_ops"] for k in figs.get("kernels", [])}
        try:
            with _cupti_window(req["device"], v.name):
                v.out["profile"] = measure.profile_once(v.fn, inputs, req["device"], kops,
                                                        figs.get("_kernel_costs"))
            alloc = v.out["profile"]["peak_alloc_bytes"]
            if alloc is not None and req["device"] == "cpu":
                v.out["rss_hwm_delta_bytes"] = v.out["peak_mem_bytes"]
                v.out["peak_mem_bytes"], v.out["peak_mem_method"] = alloc, "profiler_alloc_peak"
        except Exception as e:  # losing the profile loses kernel figures, not latency
            traceback.print_exc()
            v.out["profile_error"] = _describe(e)


# ---- the explanation, fusion by fusion (explain.py) ----

STARTED = time.monotonic()
# Seconds kept free of the job's timeout_s for what follows the explanation.
EXPLAIN_MARGIN_S = 60.0


class _Ticking:
    """The explanation's clock, reporting its progress between samples
    (a timed comparison can take minutes between two compiles)."""

    def __init__(self, clock, tick):
        self.clock, self.tick = clock, tick

    def time_ms(self, fn, inputs):
        self.tick()
        return self.clock.time_ms(fn, inputs)


@contextlib.contextmanager
def _beating(tick, every_s=1.0):
    """tick() now, then every every_s seconds from a thread while the block
    runs: a compile holds the explanation for 20 s to minutes, and its
    progress should move meanwhile (the thread gets the interpreter between
    the compile's bytecodes and while it waits on a C++ build).  Only around
    compiles: a thread waking amid timed samples would take the interpreter
    from the call being timed (_Ticking reports between them instead)."""
    tick()
    stop = threading.Event()

    def beat():
        while not stop.wait(every_s):
            tick()

    t = threading.Thread(target=beat, name="explain-progress", daemon=True)
    t.start()
    try:
        yield
    finally:
        stop.set()
        t.join()


def explain_fusions(req, variants, model, inputs, root, proto, spent_s=0.0):
    """explain.explain() over the inductor rung's decisions, with this job's
    compiles, clock and profile, within params.time_budget_s less the spent_s
    seconds the job's adaptive repetition took of it; the "fusion_explain"
    object, or one with "error" when there is nothing to explain."""
    import decisions
    import explain
    import ladder
    import measure

    base = next((v for v in variants if v.name == "inductor"), None)
    figs = base.out.get("inductor", {}) if base else {}
    if base is None or base.fn is None or base.status != "ok" or "_decisions" not in figs:
        return {"error": "the fusion-by-fusion explanation needs the inductor rung timed "
                         "with its decisions (%s)" % (base.message if base else "not run")}
    made = figs["_decisions"]
    ok, why = decisions.feature_check()
    if not ok:
        return {"error": why, "code": "unsupported"}
    counts = {"final_nodes": figs.get("final_nodes", 0),
              "generated_kernels": figs["generated_kernels"]}
    # progress: the seconds spent of the explanation's budget (what bounds
    # it; how many compiles group testing will take is not known ahead)
    progress = {"t0": time.monotonic(), "budget": 0, "sent": None}
    progress_lock = threading.Lock()

    def tick():  # at most one line a second; from _beating's thread too (in order)
        with progress_lock:
            spent = min(int(time.monotonic() - progress["t0"]), progress["budget"])
            if spent != progress["sent"]:
                progress["sent"] = spent
                proto.progress("explain", "inductor", spent, progress["budget"], force=True)

    def compile_cf(ids):
        undo = decisions.undo_for(ids, made) if ids else None
        v = Variant(ladder.UNFUSED if ids else "inductor")
        v.undo = undo
        # a counterfactual builds only the kernels its undoing changed (the
        # rest load from the job's own compile), and the placebo, the control
        # that matches it, regenerates and reloads the whole graph and builds
        # nothing
        with _beating(tick):
            fn, f = compile_variant(v.name, model, inputs, req, root, undo=undo, warm=False,
                                    share=figs["_cache_dir"])
        rebind_one(base)
        took = True
        if ids:
            took = all(t["took"] for t in decisions.verify(
                ids, made, f.get("_decisions", []), counts,
                {"final_nodes": f.get("final_nodes", 0),
                 "generated_kernels": f["generated_kernels"]}))
        return {"fn": fn, "codes": f["_codes"], "kernels": f.get("_kernels", []),
                "costs": f.get("_kernel_costs", {}),
                "kernel_ops": {k["name"]: k["aten_ops"] for k in f["kernels"]},
                "took": took, "externs": f["extern_calls"]}

    def compile_knob(name, value):
        with _beating(tick):
            fn, _ = compile_variant("inductor", model, inputs, req, root,
                                    undo=ladder.KnobOff(name, value), warm=False,
                                    share=figs["_cache_dir"])
        rebind_one(base)
        return {"fn": fn}

    def profile_fn(fn, kernel_ops):
        try:
            p = measure.profile_once(fn, inputs, req["device"], kernel_ops)
        except Exception:  # a counterfactual without its profile keeps its timing
            traceback.print_exc()
            return None
        return {"times": {r["name"]: r["total_ms"] for r in p["rows"]},
                "peak": p["peak_alloc_bytes"]}

    prof = base.out.get("profile", {})
    ctx = explain.Ctx(base_fn=base.fn, decisions=made, base_codes=figs["_codes"],
                      compile_cf=compile_cf, profile_fn=profile_fn,
                      knobs=ladder.step_knobs(), compile_knob=compile_knob,
                      beside=ladder.beside_knobs(figs),
                      clock=_Ticking(measure.Clock(req["device"]), tick), inputs=inputs,
                      sync=lambda: _sync(req["device"]),
                      kernel_ms={r["name"]: r["total_ms"] for r in prof.get("rows", [])},
                      base_kernel_ops={k["name"]: k["aten_ops"] for k in figs.get("kernels", [])},
                      base_ms=explain.median(base.samples),
                      base_peak=prof.get("peak_alloc_bytes"),
                      base_externs=figs["extern_calls"], device=req["device"],
                      kernel_bytes={n: c["bytes"] for n, c in
                                    figs.get("_kernel_costs", {}).items()},
                      roof=explain_roofline(req), compiles=_graphs_compiled)
    left = req.get("timeout_s", 600) - (time.monotonic() - STARTED) - EXPLAIN_MARGIN_S
    budget = explain.job_budget(req["params"].get("time_budget_s"), spent_s, left)
    progress.update(t0=time.monotonic(), budget=max(1, int(round(budget))))
    tick()
    ok_v = {v.name: v for v in variants if v.status == "ok" and len(v.samples) >= 2}
    step = None
    if "inductor-nofusion" in ok_v:
        step = explain.median(ok_v["inductor-nofusion"].samples) - \
            explain.median(ok_v["inductor"].samples)
    out = explain.explain(
        ctx, budget, ladder_step=step,
        compile_times={v.name: {"cold_ms": v.out["inductor"].get("compile_cold_ms"),
                                "warm_ms": v.out["inductor"].get("compile_warm_ms")}
                       for v in ok_v.values() if "inductor" in v.out},
        medians={n: explain.median(v.samples) for n, v in ok_v.items()},
        missed=figs.get("_missed"))
    out["budget_s"] = budget
    out["memory"] = {n: {"peak_bytes": v.out.get("profile", {}).get("peak_alloc_bytes"),
                         "held_by": v.out.get("profile", {}).get("peak_held_by")}
                     for n, v in ok_v.items()}
    return out


def repro(req, name):
    """The fusionbench-run command line and a standalone Python snippet that
    rebuild variant `name` of this job outside FusionBench."""
    import ladder
    import models

    params = {k: v for k, v in req["params"].items() if k not in ("time_budget_s",)}
    cmd = ["fusionbench-run", req["model"], "--engine", "inductor", "--device", req["device"],
           "--dtype", req["dtype"], "--batch", str(req["batch_size"]),
           "--variants", "eager,inductor" if name == ladder.UNFUSED else "eager," + name]
    if req["threads"]:
        cmd += ["--threads", str(req["threads"])]
    for k, v in sorted(params.items()):
        cmd += ["--param", "%s=%s" % (k, json.dumps(v) if not isinstance(v, str) else v)]
    kw = {}
    try:
        kw = ladder.compile_kwargs(name, req["device"])
    except ladder.Unsupported:
        pass
    model_params = {k: v for k, v in params.items() if k not in ("unfuse", "tf32",
                                                                 "keep_output_code")}
    lines = [
        "# %s of %s, as FusionBench ran it (worker/engine/inductor/ on sys.path)" % (
            name, req["model"]),
        "import os, sys, tempfile, torch",
        "sys.path.insert(0, %r)" % HERE,
        "import models" + (", decisions" if name == ladder.UNFUSED else ""),
        "os.environ['TORCHINDUCTOR_CACHE_DIR'] = tempfile.mkdtemp()  # a cold compile",
    ]
    if req["threads"]:
        lines.append("torch.set_num_threads(%d)" % req["threads"])
    build_line = "model, inputs = models.build(%r, %d, %r)" % (req["model"], req["batch_size"],
                                                              model_params)
    if models.is_uploaded(req["model"]):
        # an uploaded model: the user's own archive, read the way the worker read it
        ref = dict(req["params"].get("model") or {})
        mid = req["model"][len("model."):]
        cmd = ["fusionbench", "submit", req["model"], "--engine", "inductor", "--device",
               req["device"], "--dtype", req["dtype"], "--batch", str(req["batch_size"]),
               "--variants", cmd[cmd.index("--variants") + 1]]
        ref["archive"] = "model-%s.pt2" % mid
        model_params = dict(model_params, model=ref)
        lines[0] += "; the archive: fusionbench model get %s model-%s.pt2" % (mid, mid)
        build_line = "model, inputs = models.build(%r, %d, %r)" % (
            req["model"], req["batch_size"], model_params)
    lines += [
        build_line,
        "model = model.to(%r, getattr(torch, %r))" % (req["device"], req["dtype"]),
        "inputs = tuple(x.to(%r, getattr(torch, %r)) if x.is_floating_point() else "
        "x.to(%r) for x in inputs)" % (req["device"], req["dtype"], req["device"]),
    ]
    if name == ladder.UNFUSED:
        lines += [
            "rec = decisions.Recorder(); rec.start()  # the unmodified compile's decisions",
            "with torch.no_grad():",
            "    torch.compile(model, backend='inductor')(*inputs)",
            "rec.stop()",
            "undo = decisions.undo_for(%r, rec.decisions())" % req["params"]["unfuse"],
            "torch._dynamo.reset()",
            "with undo, torch.no_grad():",
            "    fn = torch.compile(model, backend='inductor', options=undo.options())",
            "    out = fn(*inputs)",
        ]
    elif name == "eager":
        lines += ["with torch.no_grad():", "    out = model(*inputs)"]
    else:
        lines += ["with torch.no_grad():",
                  "    fn = torch.compile(model, **%r)" % kw,
                  "    out = fn(*inputs)"]
    if name == "inductor-nofusion":
        lines.insert(-2, "# FusionBench also sets CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM = 0 "
                         "around this compile (ladder.cpp_one_node_per_kernel)")
    return {"command": " ".join(_shell_quote(c) for c in cmd), "python": "\n".join(lines) + "\n"}


def _shell_quote(s):
    import shlex
    return shlex.quote(s)


def result_line(req, variants, env, model_s):
    vs = []
    for v in variants:
        o = dict(v.out)
        if "inductor" in o:  # "_" keys are the runner's own, not figures
            o["inductor"] = {k: x for k, x in o["inductor"].items() if not k.startswith("_")}
        o["repro"] = repro(req, v.name)
        o.update({"status": v.status, "samples_ms": v.samples})
        if v.status != "ok":
            o["message"] = v.message
        vs.append(o)
    return {"type": "result", "protocol": PROTOCOL, "model": req["model"],
            "device": req["device"], "dtype": req["dtype"], "batch_size": req["batch_size"],
            "env": env, "model_build_ms": model_s * 1e3, "variants": vs}


def setup_torch(req):
    """Imports torch with the injection hook handled (see INJECTION_VAR) and the
    thread count set before anything compiles (Inductor's C++ kernels take their
    OpenMP thread count from torch at compile time)."""
    import torch

    if req["device"] == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("device cuda requested but torch.cuda.is_available() is False")
        torch.cuda.init()
    INJECTION["state"] = "scrubbed" if os.environ.pop(INJECTION_VAR, None) else "absent"
    if req["threads"]:
        torch.set_num_threads(req["threads"])
    if req["device"] == "cpu":
        import torch._inductor.config as cfg
        # RECORD_FUNCTION around each cpp kernel, so torch.profiler sees kernels by
        # name; a disabled RecordFunction costs a few nanoseconds per call.
        if hasattr(cfg.cpp, "enable_kernel_profile"):
            cfg.cpp.enable_kernel_profile = True
    tf32 = bool(req["params"].get("tf32", False))
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    return torch


def build(req, torch):
    import models

    dtype = getattr(torch, req["dtype"])
    model, inputs = models.build(req["model"], req["batch_size"], req["params"])
    model = model.to(device=req["device"], dtype=dtype)
    inputs = tuple(x.to(req["device"], dtype) if x.is_floating_point() else x.to(req["device"])
                   for x in inputs)
    return model, inputs


def inspect_model(path, native_out=None):
    """The "model" line of --inspect-model: status ready with the model's
    info, or invalid with the reason (docs/INDUCTOR_PROTOCOL.md); with
    native_out, the native form written there when the native engine can run
    the model."""
    import pt2safe

    try:
        info = pt2safe.inspect(path, native_out=native_out)
    except pt2safe.Invalid as e:
        return {"type": "model", "status": "invalid", "error": str(e)[:1900]}
    return {"type": "model", "status": "ready", "info": info}


def run_job(req, proto):
    import models

    torch = setup_torch(req)
    proto.progress("prepare", None, 0, 1, force=True)
    t0 = time.perf_counter()
    try:
        model, inputs = build(req, torch)
    except models.Unsupported as e:
        return {"type": "error", "code": "unsupported", "message": str(e)}
    except ValueError as e:
        return {"type": "error", "code": "invalid_argument", "message": str(e)}
    import decisions
    model_s = time.perf_counter() - t0
    root = tempfile.mkdtemp(prefix="fb-inductor-")
    try:
        with torch.no_grad():
            try:
                variants = prepare(req, model, inputs, proto, root)
            except decisions.UnknownId as e:
                return {"type": "error", "code": "invalid_argument", "message": str(e)}
            v_inputs[0] = inputs
            rebind(req, variants)
            before = _counters_snapshot()
            repetition, interference = run_variants(req, variants, inputs, proto)
            graphs = _delta(before, _counters_snapshot()).get("stats", {}).get("unique_graphs", 0)
            gate(req, variants, model, inputs)
            profile_all(req, variants, inputs, proto)
            if req["explain"]:
                fx = explain_fusions(req, variants, model, inputs, root, proto,
                                     spent_s=repetition.get("extra_s", 0.0))
                ind = next((v for v in variants if v.name == "inductor"), None)
                if ind is not None and "inductor" in ind.out:
                    ind.out["inductor"]["fusion_explain"] = fx
        proto.progress("done", None, 1, 1, force=True)
        line = result_line(req, variants, env_info(req), model_s)
        line["recompiles_during_timing"] = graphs  # 0: nothing compiled while timed
        line["repetition"] = repetition
        line["interference"] = interference
        return line
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", action="store_true")
    ap.add_argument("--request", help="request JSON file (default: stdin)")
    ap.add_argument("--out", help="protocol output file (default: stdout)")
    ap.add_argument("--inspect-model", metavar="FILE",
                    help="read an uploaded archive safely; one line: ready and its info, "
                         "or invalid and why")
    ap.add_argument("--native-out", metavar="FILE",
                    help="with --inspect-model: write the model's native form there when the "
                         "native engine can run it")
    args = ap.parse_args(argv)
    proto = Proto(args.out)
    try:
        if args.probe:
            proto.send(cached_probe())
            return 0
        if args.inspect_model:
            proto.send(inspect_model(args.inspect_model, args.native_out))
            return 0
        text = open(args.request).read() if args.request else sys.stdin.read()
        req = parse_request(text)
        line = run_job(req, proto)
    except BadRequest as e:
        line = {"type": "error", "code": "invalid_argument", "message": str(e)}
    except Exception as e:
        traceback.print_exc()
        line = {"type": "error", "code": "oom" if _oom(e) else "error", "message": _describe(e)}
    proto.send(line)
    return 0 if line["type"] in ("result", "probe") else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
