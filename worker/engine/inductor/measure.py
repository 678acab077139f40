"""Measurements of one variant: clocks, peak memory, a profiled iteration, and
the output for the accuracy gate (METHOD.md)."""

import math
import re
import time

import torch

# ---- outputs ----


def flat_output(out):
    """Every floating tensor of a model output (tensor, tuple, list, dict or a
    transformers ModelOutput), flattened in a stable order into one float64
    CPU vector."""
    parts = []

    def walk(o):
        if isinstance(o, torch.Tensor):
            if o.is_floating_point() or o.is_complex():
                parts.append(o.detach().reshape(-1).to("cpu", torch.float64))
        elif isinstance(o, dict) or hasattr(o, "to_tuple"):
            for k in (o.keys() if isinstance(o, dict) else range(len(o.to_tuple()))):
                walk(o[k] if isinstance(o, dict) else o.to_tuple()[k])
        elif isinstance(o, (list, tuple)):
            for x in o:
                walk(x)

    walk(out)
    if not parts:
        raise ValueError("the model output has no floating-point tensor")
    return torch.cat(parts)


def max_rel_error(out, ref):
    """max|out - ref| / max|ref| (METHOD.md); inf when ref is all zero and out is
    not, nan on any NaN."""
    if out.numel() != ref.numel():
        raise ValueError("output has %d values, eager has %d" % (out.numel(), ref.numel()))
    if torch.isnan(out).any() or torch.isnan(ref).any():
        return float("nan")
    diff = (out - ref).abs().max().item() if out.numel() else 0.0
    top = ref.abs().max().item() if ref.numel() else 0.0
    if top == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / top


def check_output(flat):
    """An error message when the output is not finite or all zeros, else None:
    nothing is timed that was not computed."""
    if not torch.isfinite(flat).all():
        return "output contains NaN or Inf"
    if flat.numel() == 0 or not flat.abs().max().item() > 0:
        return "output is all zeros (%d values)" % flat.numel()
    return None


def tolerance(dtype, tf32):
    """METHOD.md's tolerances, the ones PyTorch's dynamo benchmark harness uses
    for inference (1e-4 float32; looser for half precision and TF32), with
    bfloat16's 8 significant bits given twice float16's 1e-2."""
    if dtype == "bfloat16":
        return 2e-2
    if dtype == "float16":
        return 1e-2
    return 1e-3 if tf32 else 1e-4


# ---- clocks ----


class Clock:
    """Times one call: CUDA events on the current stream (synchronized before
    reading) on a GPU, CLOCK_MONOTONIC (time.perf_counter_ns) on the CPU."""

    def __init__(self, device):
        self.cuda = device == "cuda"
        if self.cuda:
            self.start = torch.cuda.Event(enable_timing=True)
            self.end = torch.cuda.Event(enable_timing=True)

    def time_ms(self, fn, inputs):
        if self.cuda:
            self.start.record()
            fn(*inputs)
            self.end.record()
            self.end.synchronize()
            return self.start.elapsed_time(self.end)
        t0 = time.perf_counter_ns()
        fn(*inputs)
        return (time.perf_counter_ns() - t0) / 1e6


# ---- memory ----


def _status_kb(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return -1


def peak_memory(fn, inputs, device):
    """(peak bytes of one iteration, method).

    CUDA: torch.cuda.max_memory_allocated over the iteration, from a reset peak
    ("cuda_max_memory_allocated", the allocator's bytes in use at the peak).
    CPU: PyTorch has no CPU allocator statistics and tracemalloc does not see
    tensor memory, so the process's resident-set high-water mark is reset
    (writing 5 to /proc/self/clear_refs) and the growth of VmHWM over VmRSS
    before the call is the peak ("rss_hwm_delta"; memory the allocator already
    holds and reuses does not show, so this is a lower bound of the working set).
    None when neither is readable."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        fn(*inputs)
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated(), "cuda_max_memory_allocated"
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = _status_kb("VmRSS")
        fn(*inputs)
        hwm = _status_kb("VmHWM")
    except OSError:
        return None, "unavailable"
    if before < 0 or hwm < 0:
        return None, "unavailable"
    return max(0, hwm - before) * 1024, "rss_hwm_delta"


# ---- profiling ----

_GRAPH_CALL = "## Call CompiledFxGraph"
_KERNEL_PREFIX = re.compile(r"^graph_\d+_")


def _category(name, ops, generated):
    """docs/API.md's kernel categories.  A generated (cpp/Triton) kernel is never the
    GEMM itself, even when its ATen ops name one (it computes a layout copy or
    the pointwise part around an extern GEMM), unless it is a template kernel."""
    text = " ".join([name] + list(ops)).lower()
    if "scaled_dot_product" in text or "attention" in text:
        return "attention"
    if generated and "template" not in text:
        text = text.replace("convolution", "").replace("addmm", "").replace("mm", "")
    if any(k in text for k in ("conv", "addmm", "bmm", "linear", "matmul", "aten::mm",
                               "aten.mm", "extern_kernels.mm", "gemm")):
        return "gemm"
    if any(k in text for k in ("softmax", "norm", "sum", "mean", "amax", "var", "max_pool",
                               "avg_pool", "reduce", "cumsum")):
        return "reduction"
    if any(k in text for k in ("copy", "cat", "clone", "contiguous", "pad", "index")):
        return "copy"
    return "elementwise"


# CUPTI's overhead activities (CUpti_ActivityOverheadKind, as Kineto names
# them), which the profiler shows as CPU-side events: the profiler's own
# bookkeeping, never a kernel.  Nested by their time between an op and what it
# launched (a graph call's kernel under an "Activity Buffer Request"), so the
# tree is read through them.
PROFILER_OVERHEAD = frozenset((
    "Activity Buffer Request", "Buffer Flush", "Instrumentation", "Resource",
    "Driver Compiler", "Runtime Triggered Module Loading", "Lazy Function Loading",
    "Command Buffer Full", "UVM Activity Init"))


def _parent(e):
    """e's parent on the CPU side, the profiler's own overhead events skipped."""
    p = e.cpu_parent
    while p is not None and p.name in PROFILER_OVERHEAD:
        p = p.cpu_parent
    return p


def kernel_events(events):
    """Events that are kernels of the iteration: ATen ops called at the top level
    (eager, and eager ops between compiled graphs), and the direct children of a
    compiled graph's call (its generated kernels, named graph_N_<kernel>, and its
    extern ATen calls); never the profiler's own overhead (PROFILER_OVERHEAD),
    which on a GPU took a 0.43 ms row of its own among bert_base's kernels."""
    out = []
    for e in events:
        if e.name in PROFILER_OVERHEAD:
            continue
        parent = _parent(e)
        if parent is None and e.name.startswith("aten::"):
            out.append(e)
        elif parent is not None and parent.name.startswith(_GRAPH_CALL):
            out.append(e)
    return out


# A CUDA graph's replay, as the profiler's CPU side sees it: one runtime call,
# whatever kernels the graph holds (the inductor+cudagraphs and
# eager+cudagraphs rungs).
_REPLAY = "cudaGraphLaunch"


def replay_kernels(events):
    """The kernels a profile with a CUDA graph replay ran, counted on the
    device side (the profiler's CUDA kernel events; copies and sets are not
    kernels), or None when the profile holds no device kernel: then the
    count is unknown, never the CPU side's few rows."""
    cuda = torch.autograd.DeviceType.CUDA
    n = sum(1 for e in events
            if e.device_type == cuda and not e.name.startswith(("Memcpy", "Memset"))
            and e.name not in PROFILER_OVERHEAD)
    return n or None


def _device_ms(e):
    """The device time (ms) of the kernels e launched, its children's included:
    torch.profiler's CUDA activity, which Kineto records through CUPTI and
    joins to the launching op by correlation id."""
    us = getattr(e, "device_time_total", None)
    if us is None:  # a PyTorch before the rename
        us = getattr(e, "cuda_time_total", 0.0)
    return (us or 0.0) / 1e3


def kernel_rows(events, kernel_ops, device):
    """({kernel name: row}, time source) of an iteration's kernel events
    (kernel_events): a row's count, total_ms, ops, generated.  On CUDA a row's
    time is its kernels' device time, not the CPU side's, which is only the
    launch, and an op that ran nothing on the device has no row; a CUDA
    profile with no device time at all (the activity not recorded) keeps the
    CPU side's, and says so."""
    events = list(events)
    on_device = device == "cuda" and any(_device_ms(e) > 0 for e in events)
    if on_device:
        source = "torch.profiler device_time_total (CUPTI kernel times via Kineto), CUDA"
    elif device == "cuda":
        source = ("torch.profiler cpu_time_total (inclusive): launch times, the profile "
                  "recorded no device time")
    else:
        source = "torch.profiler cpu_time_total (inclusive), CPU"
    rows = {}
    for e in events:
        if on_device and _device_ms(e) <= 0:
            continue  # ran nothing on the device (a view, a shape op): not a kernel there
        name = _KERNEL_PREFIX.sub("", e.name)
        generated = name in kernel_ops
        ops = kernel_ops.get(name, [] if generated else [e.name.replace("::", ".")])
        r = rows.setdefault(name, {"name": name, "count": 0, "total_ms": 0.0, "ops": ops,
                                   "generated": generated})
        r["count"] += 1
        r["total_ms"] += _device_ms(e) if on_device else e.cpu_time_total / 1e3
    return rows, source


def add_costs(rows, costs):
    """Each generated kernel's row gets its bytes and FLOPs in the iteration
    from costs per call ({name: {"bytes", "flops"}}), either left null where
    unknown; a row with neither gets none (its impl unsaid)."""
    for r in rows.values():
        c = costs.get(r["name"]) if r["generated"] else None
        if not c or (c.get("bytes") is None and c.get("flops") is None):
            continue
        r["impl"] = "inductor"
        for k in ("bytes", "flops"):
            r[k] = c[k] * r["count"] if c.get(k) is not None else None


def device_busy_ms(events):
    """The device's busy time (ms) in a profile: its kernels', copies' and
    sets' durations summed (a CUDA graph replay's, which no op on the CPU side
    stands for; the profiler's overhead, which Kineto may put in the device's
    lane, is not the device's work), or None when it recorded none."""
    cuda = torch.autograd.DeviceType.CUDA
    ms = sum(e.time_range.elapsed_us() for e in events
             if e.device_type == cuda and e.name not in PROFILER_OVERHEAD) / 1e3
    return ms or None


# The buffer device_copy_gbps copies: far beyond any GPU's L2 (50-126 MB).
COPY_BYTES = 1 << 28


def device_copy_gbps(nbytes=COPY_BYTES, reps=5):
    """The CUDA device's copy bandwidth, GB/s of reads and writes together
    (the memory roofline the GPU check's gpu_copy_bw measures too): the
    fastest of reps device-to-device copies of nbytes, timed by CUDA events;
    None without CUDA or without the memory."""
    try:
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        dst.copy_(src)
        best = float("inf")
        for _ in range(reps):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            dst.copy_(src)
            e1.record()
            e1.synchronize()
            best = min(best, e0.elapsed_time(e1))
        del src, dst
        torch.cuda.empty_cache()
        return 2 * nbytes / (best * 1e-3) / 1e9 if best > 0 else None
    except (RuntimeError, AssertionError):  # no CUDA, or no room for it
        return None


# Profiled iterations per variant; the fastest one is reported (the profiler's
# own overhead and other tenants only ever add time).
PROFILE_TRIES = 3


def profile_once(fn, inputs, device, kernel_ops, costs=None):
    """One profiled iteration: the fastest of PROFILE_TRIES, after a profiled
    warm-up call whose start-up cost is dropped.  kernel_ops: {generated kernel name: [aten ops]} from the output
    code; costs: {generated kernel name: {"bytes", "flops"}} per call
    (decisions.kernel_costs).  Returns {"kernels", "kernel_time_ms", "busy_ms", "idle_ms",
    "categories_ms", "rows"}; rows are per kernel name: count, total_ms, ops,
    category, generated (bool), and for a generated kernel whose costs are
    known its bytes and FLOPs in the iteration (per call times count) with
    impl "inductor"."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU]
    if device == "cuda":
        acts.append(ProfilerActivity.CUDA)
    with profile(activities=acts):
        fn(*inputs)
    prof, wall_ms = None, float("inf")
    for _ in range(PROFILE_TRIES):
        t0 = time.perf_counter_ns()
        with profile(activities=acts, profile_memory=True) as p:
            fn(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
        ms = (time.perf_counter_ns() - t0) / 1e6
        if ms < wall_ms:
            prof, wall_ms = p, ms
    kevs = kernel_events(prof.events())
    rows, source = kernel_rows(kevs, kernel_ops, device)
    add_costs(rows, costs or {})
    cats = {}
    for r in rows.values():
        r["category"] = _category(r["name"], r["ops"], r["generated"])
        r["mean_ms"] = r["total_ms"] / r["count"]
        cats[r["category"]] = cats.get(r["category"], 0.0) + r["total_ms"]
    busy = sum(r["total_ms"] for r in rows.values())
    peak, held = peak_breakdown(prof, device)
    kernels = sum(r["count"] for r in rows.values())
    if any(e.name == _REPLAY for e in kevs):  # a launch, not what it ran
        kernels = replay_kernels(prof.events())
        busy = device_busy_ms(prof.events()) or busy
    return {"kernels": kernels, "kernel_time_ms": busy,
            "busy_ms": busy, "idle_ms": max(0.0, wall_ms - busy), "wall_ms": wall_ms,
            "categories_ms": cats, "rows": sorted(rows.values(), key=lambda r: -r["total_ms"]),
            "peak_alloc_bytes": peak, "peak_held_by": held, "time_source": source}


# The ops named in a peak's breakdown; the rest are summed as "other".
BREAKDOWN_TOP = 8


def holder(chain):
    """What an allocation belongs to, from the ops it happened in (outermost
    first): inside a compiled graph's call, the call's op it happened in (an
    extern call such as aten::convolution, a generated kernel), the graph's
    own buffers (its wrapper's empty_strided) as one; elsewhere the top-level
    op (eager's aten::conv2d, aten::batch_norm)."""
    for i, name in enumerate(chain):
        if name.startswith(_GRAPH_CALL):
            inner = chain[i + 1] if i + 1 < len(chain) else None
            if inner is None or inner in ("aten::empty_strided", "aten::empty"):
                return "compiled graph buffers"
            return _KERNEL_PREFIX.sub("", inner)
    return chain[0] if chain else "outside any op"


def allocations(prof, device):
    """The allocator's allocations (bytes > 0) and frees (< 0) on the device
    in one profiled iteration, in the order they happened: [(bytes, address,
    the ops they happened in, outermost first)].  From the profiler's event
    tree, where each is an event of its own with its address (the same record
    torch.profiler's memory profiler reads); None when this PyTorch's profile
    has no such tree."""
    try:
        from torch._C._profiler import _EventType

        roots = prof.profiler.kineto_results.experimental_event_tree()
    except (AttributeError, ImportError, RuntimeError):
        return None
    out, stack = [], [(r, ()) for r in roots]
    while stack:
        n, chain = stack.pop()
        if n.typed[0] == _EventType.Allocation:
            f = n.typed[1]
            if getattr(f.device, "type", None) == device:
                out.append((n.start_time_ns, f.alloc_size, f.ptr, chain))
            continue
        stack.extend((c, chain + (n.name,)) for c in n.children)
    out.sort(key=lambda a: a[0])
    return [a[1:] for a in out]


def peak_of(allocs):
    """(peak bytes or None, {holder: bytes live at the peak}) of allocations()'
    list.  The peak: the running sum's highest point, the bytes allocated
    during the iteration at its worst moment over what was live when it began
    (a free of what the iteration did not allocate lowers it).  What held it:
    the allocations made during the iteration and still live then, by
    holder(), the BREAKDOWN_TOP largest and "other".  None with no
    allocation recorded."""
    if not allocs:
        return None, {}
    cur = peak = 0
    at = -1
    for i, (b, _, _) in enumerate(allocs):
        cur += b
        if cur > peak:
            peak, at = cur, i
    live = {}
    for b, ptr, chain in allocs[:at + 1]:
        if b > 0:
            live[ptr] = (b, holder(chain))
        else:
            live.pop(ptr, None)
    held = {}
    for b, h in live.values():
        held[h] = held.get(h, 0) + b
    top = sorted(held.items(), key=lambda kv: -kv[1])
    out = dict(top[:BREAKDOWN_TOP])
    rest = sum(v for _, v in top[BREAKDOWN_TOP:])
    if rest:
        out["other"] = rest
    return peak, out


def peak_breakdown(prof, device):
    """peak_of() the profiled iteration's allocations on the device (an
    allocation's own time, not its op's: ops' self memory, which an earlier
    version summed in the order ops end, books every free the compiled
    graph's wrapper makes (del buf) at the end of the graph's call, so the
    graph's peak read as everything it ever allocated: mobilenet_v2 at
    112x112 "2.6x eager's memory", where its true peak is about half
    eager's).  An op's workspace that is freed before anything else happens
    is seen too.  (None, {}) when the profile holds none."""
    allocs = allocations(prof, "cuda" if device == "cuda" else "cpu")
    return peak_of(allocs) if allocs is not None else (None, {})
