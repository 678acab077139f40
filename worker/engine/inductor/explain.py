"""The inductor engine's explanation, fusion by fusion (docs/EXPLAIN.md,
"Inductor, fusion by fusion").

After the job's timing, for the fusion decisions of the `inductor` rung
(decisions.py), most expensive kernel first, within a time budget:

  placebo      the unmodified model compiled again (scheduled and generated
               anew, its unchanged kernels loaded from the job's cache, as every
               counterfactual's are) and timed against the job's own compile:
               what two compiles of the very same code differ by (the layout
               noise every verdict must pass);
  one by one   each decision undone alone (a counterfactual compile), timed in
               interleaved rounds against the job's compile: saved_ms = median
               undone - median inductor (> 0: the fusion saved time), with the
               bootstrap interval of that difference; verdict won / lost /
               no_difference past the layout noise;
  by groups    when there are more decisions than the budget can undo one by
               one, adaptive group testing: undo a chunk at once, and split it
               only where its interval leaves the noise band (Inductor's fusions
               and C++ kernel groups in chunks apart, so that every chunk of
               fusions can be ranked by the audit);
  all lost     every lost decision undone at once: the speed Inductor would
               have had with a fusion policy that knew;
  interaction  when every decision undone at once is faster but none is lost
               alone or in a chunk: group testing of what is kept (everything
               else undone) names the fusions any one of which, kept alone,
               costs the loss, or the set that must be kept together;
  audit        Inductor's predicted benefit (score_fusion_memory) beside the
               measured saving: rank correlation over the decisions measured
               alone, and over every unit measured (a chunk within the noise
               counts as one, its predictions summed), and the fusions
               predicted to help that measured to hurt;
  missed       the merges Inductor refused (its own WhyNoFuse reasons),
               weighted by the bytes they would have shared;
  break-even   cold and warm compile time against the per-iteration saving.

A lost decision's reason comes from evidence read from the generated code and
the per-kernel times (reasons()); none found is "unexplained".

Everything here takes plain callables, so that a test can explain a module it
built itself (tests/inductor/explain_probe.py) exactly as the runner does."""

import math
import re
import statistics
import time

# Decisions undone one by one when there are at most this many; beyond, group
# testing over chunks of this size.
SINGLE_MAX = 8
# Timed rounds of one comparison: about ROUND_S seconds, within these bounds.
ROUNDS_MIN, ROUNDS_MAX, ROUND_S = 20, 200, 2.0
WARMUP = 3
BOOTSTRAP = 2000
# A comparison whose interval is wider than WIDE_CI of the job's median (a
# burst of other load, a frequency change) gets more rounds, pooled, up to
# SETTLE_X times the first: as the job's own adaptive repetition (METHOD.md).
WIDE_CI, SETTLE_X = 0.02, 4
DEFAULT_BUDGET_S = 300.0


# A counterfactual starts only while STEP_ROOM times the expected cost is
# left: a compile cannot be cut short, and one step may cost more than the
# most any before it did (the first undoing adds its profile to what the
# placebo cost: on an H200, 11 s then over 13 s, past a 24 s budget).
STEP_ROOM = 1.25


class Budget:
    """Seconds left for counterfactuals; each costs about a compile and a
    comparison: estimate (seconds) until the first is measured, then the most
    any measured one cost, STEP_ROOM times over."""

    def __init__(self, seconds, estimate=None):
        self.end = time.monotonic() + max(0.0, seconds)
        self.seconds = seconds
        self.cost = estimate
        self.guess = estimate is not None

    def left(self):
        return self.end - time.monotonic()

    def allows(self):
        return self.left() > STEP_ROOM * (self.cost or 0.0)

    def spent(self, s):
        self.cost = s if self.cost is None or self.guess else max(self.cost, s)
        self.guess = False


def seconds_param(x):
    """params.time_budget_s as given: a number >= 0 (not a bool), else None."""
    ok = isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0
    return float(x) if ok else None


def job_budget(requested, spent_s, left_s):
    """The seconds an explanation may spend: params.time_budget_s
    (DEFAULT_BUDGET_S when it is not a number >= 0) less what the job's own
    adaptive repetition already spent of it (one budget, spent once), never
    past the job's time left, at most an hour."""
    given = seconds_param(requested)
    requested = DEFAULT_BUDGET_S if given is None else given
    return max(0.0, min(requested - max(0.0, spent_s), left_s, 3600.0))


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def diff_ci(base, other, seed=0x5EEDF00D):
    """median(other) - median(base) and its 95% percentile bootstrap interval
    (BOOTSTRAP resamples, fixed seed), or None with fewer than 2 samples a
    side."""
    import torch

    if len(base) < 2 or len(other) < 2:
        return None
    g = torch.Generator().manual_seed(seed)
    tb = torch.tensor(base, dtype=torch.float64)
    to = torch.tensor(other, dtype=torch.float64)
    mb = tb[torch.randint(len(base), (BOOTSTRAP, len(base)), generator=g)].quantile(0.5, dim=1)
    mo = to[torch.randint(len(other), (BOOTSTRAP, len(other)), generator=g)].quantile(0.5, dim=1)
    lo, hi = torch.quantile(mo - mb, torch.tensor([0.025, 0.975], dtype=torch.float64)).tolist()
    return to.quantile(0.5).item() - tb.quantile(0.5).item(), lo, hi


def paired(fa, fb, inputs, clock, rounds, sync=None, warmup=True):
    """Warm-up, then `rounds` interleaved rounds, every other one in reverse
    order (METHOD.md).  Returns (samples of fa, samples of fb) in ms."""
    for _ in range(WARMUP if warmup else 0):
        fa(*inputs)
        fb(*inputs)
    if sync:
        sync()
    a, b = [], []
    for i in range(rounds):
        if i % 2 == 0:
            a.append(clock.time_ms(fa, inputs))
            b.append(clock.time_ms(fb, inputs))
        else:
            b.append(clock.time_ms(fb, inputs))
            a.append(clock.time_ms(fa, inputs))
    return a, b


def compare(fa, fb, inputs, clock, rounds, sync=None, deadline=None):
    """paired() and diff_ci() of its samples; while the interval is wider than
    WIDE_CI of fa's median, more rounds, pooled, up to SETTLE_X times rounds;
    still wider, one fresh batch of as many rounds, kept when narrower.  None
    of those extra rounds start past deadline (time.monotonic()), so that a
    comparison made near the end of the budget does not run on past it.
    Returns (samples of fa, samples of fb, (diff, lo, hi) or None)."""
    def more():
        return deadline is None or time.monotonic() < deadline

    a, b = paired(fa, fb, inputs, clock, rounds, sync)
    d = diff_ci(a, b)
    for _ in range(SETTLE_X - 1):
        if not d or d[2] - d[1] <= WIDE_CI * median(a) or not more():
            break
        a2, b2 = paired(fa, fb, inputs, clock, rounds, sync, warmup=False)
        a, b = a + a2, b + b2
        d = diff_ci(a, b)
    if d and d[2] - d[1] > WIDE_CI * median(a) and more():
        # still wide: a disturbance that lasted (another tenant, a frequency
        # change) is in most of the pooled rounds; one fresh batch of the same
        # size replaces them when it is narrower
        a2, b2 = paired(fa, fb, inputs, clock, len(a), sync, warmup=False)
        d2 = diff_ci(a2, b2)
        if d2 and d2[2] - d2[1] < d[2] - d[1]:
            a, b, d = a2, b2, d2
    return a, b, d


def rounds_for(ms_per_iter):
    if not ms_per_iter > 0:
        return ROUNDS_MIN
    return int(min(ROUNDS_MAX, max(ROUNDS_MIN, ROUND_S * 1e3 / (2 * ms_per_iter))))


def verdict(lo, hi, noise):
    if lo > noise:
        return "won"
    if hi < -noise:
        return "lost"
    return "no_difference"


# ---- Spearman's rank correlation ----


def _ranks(xs):
    order = sorted(range(len(xs)), key=lambda i: xs[i])
    ranks = [0.0] * len(xs)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and xs[order[j + 1]] == xs[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2.0 + 1
        i = j + 1
    return ranks


def spearman(xs, ys):
    """Spearman's rho (ties averaged), None with fewer than 3 pairs or a
    constant side."""
    if len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


# ---- generated code, read ----

_SRC_RE = re.compile(r"^(\w+) = async_compile\.\w+\((.*?)'''(.*?)'''", re.S | re.M)
_LOAD_RE = re.compile(r"\b(in_ptr\d+|in_out_ptr\d+)\s*\+|\b(in_ptr\d+|in_out_ptr\d+)\[")


def kernel_sources(codes):
    """{kernel name: source} of every generated kernel in the output code."""
    out = {}
    for code in codes:
        for m in _SRC_RE.finditer(code):
            out[m.group(1)] = m.group(3)
    return out


# A buffer the compiled graph allocates at each call: empty_strided_cpu((sizes),
# (strides), torch.dtype) in its output code (a buffer Inductor reuses in place
# is a reinterpret_tensor of another and allocates nothing).
_ALLOC_RE = re.compile(r"\bempty_strided_\w+\(\(([^()]*)\),\s*\(([^()]*)\),\s*(?:device=[^,]*,\s*)?"
                       r"(?:dtype=)?torch\.(\w+)")
_DTYPE_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2,
                "float64": 8, "double": 8, "int64": 8, "long": 8, "int32": 4, "int": 4,
                "int16": 2, "int8": 1, "uint8": 1, "bool": 1}
# Fresh bytes a call must allocate beyond the counterfactual's for the
# allocation to count as evidence, on the CPU (glibc maps blocks past 32 MiB
# afresh at every allocation, and the kernel zeroes them page by page; on a
# GPU the caching allocator hands them back, and the rule is not applied).
ALLOC_EVIDENCE_BYTES = 1 << 20
# glibc's largest mmap threshold (64-bit): a block this large is mapped afresh
# at every allocation, however often one of its size was freed before, and
# its pages are faulted in and zeroed inside whichever kernel first writes
# them.  A fresh 36 MB block cost about 21 ms a call on the dev VM, against
# 1.5 ms to write one already mapped (EXPLAIN.md).
MMAP_AFRESH_BYTES = 32 << 20


def alloc_facts(codes):
    """What the compiled graphs allocate at each call, from their output code:
    {"buffers", "bytes", "largest"} over the allocations whose sizes are
    numbers (a symbolic size is left out, counted in "symbolic")."""
    n = total = largest = symbolic = 0
    for code in codes:
        for m in _ALLOC_RE.finditer(code):
            try:
                sizes = [int(x) for x in m.group(1).replace(" ", "").split(",") if x]
                strides = [int(x) for x in m.group(2).replace(" ", "").split(",") if x]
            except ValueError:
                symbolic += 1
                continue
            span = 1 + sum((a - 1) * b for a, b in zip(sizes, strides)) if all(sizes) else 0
            b = span * _DTYPE_BYTES.get(m.group(3), 4)
            n, total, largest = n + 1, total + b, max(largest, b)
    return {"buffers": n, "bytes": total, "largest": largest, "symbolic": symbolic}


def fresh_allocation(base_alloc, cf_alloc):
    """True when the job's compile allocates at least ALLOC_EVIDENCE_BYTES more
    at each call than the counterfactual (fusion kept a buffer from being
    reused in place)."""
    return bool(base_alloc and cf_alloc and
                base_alloc["bytes"] - cf_alloc["bytes"] >= ALLOC_EVIDENCE_BYTES)


def mapped_afresh(base_alloc, cf_alloc):
    """True when the fusion adds at least MMAP_AFRESH_BYTES allocated a call,
    in a block that large: the job's compile maps it afresh at each call, and
    the kernel that writes it pays for the page faults, so a fused kernel
    slower than its parts is that cost before it is the kernel's code."""
    return bool(fresh_allocation(base_alloc, cf_alloc) and
                base_alloc["bytes"] - cf_alloc["bytes"] >= MMAP_AFRESH_BYTES and
                base_alloc.get("largest", 0) >= MMAP_AFRESH_BYTES)


def loop_nests(src):
    """(parallel, serial): how many outermost loop nests of Inductor's C++
    kernel code run across threads (a `for(` right under `#pragma omp for`,
    or one whose body shares an inner loop across threads: a short outer
    loop, each of whose rows is a reduction split across threads, as torch
    2.15 writes a row sum of 2 x 500,000) and how many on one thread (under
    `#pragma omp single`, or in a kernel with no parallel region).  Inductor
    writes its loop nests as `for(` and each body in braces on the next
    line; the per-thread combining loops of a split reduction (`for (int tid
    ...`) are not nests."""
    par = ser = depth = 0
    bodies = []  # the brace depth of each open loop nest's body
    omp_for = want_body = False
    outer_serial = False  # the open outermost nest, counted on one thread so far
    for line in src.splitlines():
        t = line.strip()
        if not t:
            continue
        if t.startswith("#pragma omp for"):
            if bodies and outer_serial:  # work shared inside it: the nest is parallel
                par, ser, outer_serial = par + 1, ser - 1, False
            omp_for = True
            continue
        if t.startswith("for("):
            if not bodies and not want_body:  # outermost (not an unbraced loop's body)
                par, ser = (par + 1, ser) if omp_for else (par, ser + 1)
                outer_serial = not omp_for
            want_body = True
        elif want_body and not t.startswith("{"):
            want_body = False  # an unbraced body: this one statement
        if not t.startswith("#"):
            omp_for = False
        for ch in t:
            if ch == "{":
                depth += 1
                if want_body:
                    bodies.append(depth)
                    want_body = False
            elif ch == "}":
                if bodies and bodies[-1] == depth:
                    bodies.pop()
                depth -= 1
    return par, ser


def code_facts(src):
    """What a kernel's generated code shows: loop nests, vectorized ones (C++:
    at::vec), loads (reads through an input pointer); in C++, the outermost
    loop nests run across threads and on one thread (loop_nests), and the
    reductions split across threads (each thread's partial result kept in
    an array by thread: `tmp_acc0_arr[tid] = `, with its vector and masked
    twins, one reduction)."""
    if src is None:
        return None
    nests = len(re.findall(r"^\s*#pragma omp for|^\s*for\(", src, re.M)) or 1
    par, ser = loop_nests(src)
    return {"vectorized": "at::vec::" in src or "tl.load" in src,
            "vec_ops": src.count("at::vec::"),
            "loads": sum(1 for _ in _LOAD_RE.finditer(src)),
            "loop_lines": nests, "bytes": len(src),
            "parallel_loops": par, "serial_loops": ser,
            "split_reductions": len(set(re.findall(r"(tmp_acc\d+)\w*_arr\[tid\]\s*=", src)))}


def triton_facts(names, modules=None):
    """{kernel name: {"n_regs", "n_spills", "shared", "num_warps"}} of the
    compiled Triton kernels among names: read from the first launcher of each
    kernel's CachingAutotuner in the loaded wrapper modules (Inductor's
    PyCodeCache; modules: those to search instead).  Kernels not found, or
    not compiled yet, are left out."""
    if modules is None:
        try:
            from torch._inductor.codecache import PyCodeCache
            modules = list(getattr(PyCodeCache, "modules", [])) + \
                list(getattr(PyCodeCache, "modules_no_attr", {}).values())
        except Exception:  # no such cache in this PyTorch: no metadata
            return {}
    out = {}
    for mod in modules:
        for n in names:
            launchers = getattr(getattr(mod, n, None), "launchers", None)
            if n in out or not launchers:
                continue
            la = launchers[0]
            out[n] = {"n_regs": getattr(la, "n_regs", None),
                      "n_spills": getattr(la, "n_spills", None),
                      "shared": getattr(la, "shared", None),
                      "num_warps": getattr(getattr(la, "config", None), "num_warps", None)}
    return out


# ---- reasons ----

REASONS = ("library_path_lost", "register_spills", "low_occupancy", "register_pressure",
           "lost_vectorization", "recompute", "lost_parallelism", "kernel_slowdown",
           "fresh_allocation", "unexplained")
# A fused Triton kernel under register pressure: this many registers a thread
# and more than REGS_X times the most any of its unfused kernels needs.
REGS_HIGH, REGS_X = 128, 1.5
# A fused Triton kernel with low occupancy: under OCC_LOW of the warps an SM
# holds, at most OCC_X times the least of its unfused kernels', limited by its
# registers or its shared memory (what fusing grows).
OCC_LOW, OCC_X = 0.25, 0.5
# Registers are allocated to a warp in units of this many; the runtime keeps
# this much shared memory of an SM for each resident block (compute
# capability 8.0 and later).
REG_UNIT, SHARED_RESERVED = 256, 1024


def device_limits(props=None):
    """What bounds residency on an SM of the CUDA device (registers, threads,
    shared memory, warp size, blocks), from torch.cuda.get_device_properties
    (props: those instead), or None without a device."""
    if props is None:
        try:
            import torch
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
        except Exception:  # no CUDA here
            return None
    cc = (props.major, props.minor)
    # the most resident blocks an SM holds (CUDA's occupancy calculator)
    blocks = 16 if cc in ((7, 5), (8, 6), (8, 7), (8, 9)) else 32
    try:
        return {"regs": props.regs_per_multiprocessor,
                "threads": props.max_threads_per_multi_processor,
                "shared": props.shared_memory_per_multiprocessor,
                "warp": props.warp_size, "blocks": blocks}
    except AttributeError:  # a PyTorch that does not report them
        return None


def occupancy(meta, lim):
    """(theoretical occupancy, what limits it) of a compiled Triton kernel on
    the device lim describes (device_limits), as CUDA's occupancy calculator
    computes it: the resident warps an SM holds over the most it could, by the
    blocks its registers (allocated per warp in REG_UNIT registers), its shared
    memory (and SHARED_RESERVED a block), its warps per block and the block
    limit allow, the least of them; None without num_warps."""
    warps = (meta or {}).get("num_warps")
    if not lim or not warps:
        return None
    most = lim["threads"] // lim["warp"]
    fit = {"registers": None, "shared_memory": None, "warps": most // warps,
           "blocks": lim["blocks"]}
    regs = meta.get("n_regs") or 0
    if regs:
        per_warp = -(-regs * lim["warp"] // REG_UNIT) * REG_UNIT
        fit["registers"] = lim["regs"] // per_warp // warps
    if meta.get("shared"):
        fit["shared_memory"] = lim["shared"] // (meta["shared"] + SHARED_RESERVED)
    order = list(fit)
    which = min((k for k in fit if fit[k] is not None), key=lambda k: (fit[k], order.index(k)))
    return fit[which] * warps / most, which


def _occupancy_evidence(gpu, lim):
    """{"fused": [occupancy, limiter], "unfused": [...]} of a lost fusion's
    Triton kernels, or None when it cannot be computed."""
    if not lim or not gpu or not gpu[0]:
        return None
    fused = occupancy(gpu[0], lim)
    if fused is None:
        return None
    return {"fused": list(fused),
            "unfused": [list(o) for o in (occupancy(c, lim) for c in gpu[1]) if o]}


def roofline_evidence(roof, fused, unfused):
    """Each kernel's bytes (decisions.kernel_costs: Inductor's estimate for a
    Triton kernel, else its scheduler's count) over its time against the
    device's memory bandwidth: roof is {"gbps", "measured_by"} (the worker's
    roofline, or on a GPU without one the runner's device copy) or None;
    fused is (bytes, ms) of the fused kernel, unfused [(bytes, ms)] of the
    kernels holding its members once undone.  {"limit_gbps", "measured_by",
    "fused": {bytes, ms, gbps, share}, "unfused": [...]}, share the fraction
    of the bandwidth; None when no kernel has a byte figure."""
    limit = (roof or {}).get("gbps")

    def one(b, ms):
        gbps = b / (ms * 1e-3) / 1e9 if b and ms and ms > 0 else None
        return {"bytes": b, "ms": ms, "gbps": gbps,
                "share": gbps / limit if gbps is not None and limit else None}
    if fused[0] is None and all(b is None for b, _ in unfused):
        return None
    return {"limit_gbps": limit, "measured_by": (roof or {}).get("measured_by"),
            "fused": one(*fused), "unfused": [one(*u) for u in unfused]}


def _gpu_rule(gpu, occ=None):
    """register_spills / low_occupancy / register_pressure from the Triton
    metadata (base, [unfused]) of a lost fusion and its occupancy
    (_occupancy_evidence), else None."""
    if not gpu or not gpu[0] or not gpu[1]:
        return None
    b, cfs = gpu
    if (b.get("n_spills") or 0) > 0 and all((c.get("n_spills") or 0) == 0 for c in cfs):
        return "register_spills"
    if occ and occ["unfused"]:
        (fo, limit), least = occ["fused"], min(o for o, _ in occ["unfused"])
        if limit in ("registers", "shared_memory") and fo < OCC_LOW and fo <= OCC_X * least:
            return "low_occupancy"
    most = max((c.get("n_regs") or 0) for c in cfs)
    if (b.get("n_regs") or 0) >= REGS_HIGH and b["n_regs"] > REGS_X * most:
        return "register_pressure"
    return None


def reason_of(d, base_src, cf_srcs, base_ms, cf_ms, base_externs, cf_externs, gpu=None,
              allocs=None, limits=None):
    """The first rule that holds for a lost decision d, and the evidence.

    base_src: source of the kernel holding d in the job's compile; cf_srcs:
    sources of the kernels holding its members once undone; base_ms / cf_ms:
    their profiled times; *_externs: library calls (extern kernels) in each
    compile; gpu: (Triton metadata of the fused kernel, [of the unfused
    ones]) on CUDA (triton_facts), else None; allocs: (alloc_facts of the
    job's compile, of the counterfactual's), or None; limits: the device's
    (device_limits), for the kernels' occupancy."""
    bf = code_facts(base_src)
    cfs = [code_facts(s) for s in cf_srcs if s is not None]
    ev = {"fused_kernel": bf, "unfused_kernels": cfs, "fused_kernel_ms": base_ms,
          "unfused_kernels_ms": cf_ms, "extern_calls": [base_externs, cf_externs]}
    if allocs:
        ev["allocated_per_call"] = {"fused": allocs[0], "unfused": allocs[1]}
    occ = _occupancy_evidence(gpu, limits)
    if gpu:
        ev["triton"] = {"fused": gpu[0], "unfused": gpu[1]}
    if occ:
        ev["occupancy"] = occ
    if d.get("kind") in ("epilogue", "prologue") and cf_externs > base_externs:
        return "library_path_lost", ev
    rule = _gpu_rule(gpu, occ)
    if rule:
        return rule, ev
    if bf and cfs:
        if not bf["vectorized"] and any(f["vectorized"] for f in cfs):
            return "lost_vectorization", ev
        if bf["vec_ops"] < sum(f["vec_ops"] for f in cfs) / 2 and bf["loop_lines"] <= max(
                f["loop_lines"] for f in cfs):
            return "lost_vectorization", ev
        if bf["loads"] > sum(f["loads"] for f in cfs):
            return "recompute", ev
        # a loop nest on one thread that the unfused kernels ran on all of
        # them (a reduction no longer split across threads, or an outer loop
        # too short to share once fused)
        if bf["serial_loops"] > sum(f["serial_loops"] for f in cfs) and \
                sum(f["parallel_loops"] for f in cfs) > 0:
            return "lost_parallelism", ev
    slower = base_ms is not None and cf_ms is not None and base_ms > cf_ms
    if slower and allocs and mapped_afresh(*allocs):  # faulted in inside the kernel
        return "fresh_allocation", ev
    if slower:
        return "kernel_slowdown", ev
    if allocs and fresh_allocation(*allocs):  # the loss outside the kernels
        return "fresh_allocation", ev
    return "unexplained", ev


def _num_text(x, fmt="{:d}"):
    return "?" if x is None else fmt.format(x)


def why_of(reason, ev):
    """The evidence for `reason` (reason_of's) in one sentence, with its
    numbers, for a reader who will not open the evidence's JSON."""
    bf = ev.get("fused_kernel") or {}
    cfs = ev.get("unfused_kernels") or []
    one = len(cfs) == 1
    parts = "its unfused kernel" if one else "its %d unfused kernels" % len(cfs)
    both = "" if one else " together"

    def verb(v):  # "take" -> "takes" for one kernel
        return v + ("s" if one else "")
    tr = ev.get("triton") or {}
    if reason == "library_path_lost":
        b, c = (ev.get("extern_calls") or [None, None])[:2]
        return ("undone, the compile makes %s library calls instead of %s: the fusion into "
                "the template took the library's path" % (_num_text(c), _num_text(b)))
    if reason == "register_spills":
        return ("the fused Triton kernel spills %s registers; %s %s none"
                % (_num_text((tr.get("fused") or {}).get("n_spills")), parts, verb("spill")))
    if reason == "low_occupancy":
        (fo, lim), least = ev["occupancy"]["fused"], min(o for o, _ in ev["occupancy"]["unfused"])
        return ("the fused Triton kernel's occupancy is %.0f%%, limited by its %s; %s %s at "
                "least %.0f%%" % (100 * fo, lim.replace("_", " "), parts, verb("reach"),
                                  100 * least))
    if reason == "register_pressure":
        most = max(((c or {}).get("n_regs") or 0) for c in tr.get("unfused") or [{}])
        return ("the fused Triton kernel needs %s registers a thread; %s at most %d"
                % (_num_text((tr.get("fused") or {}).get("n_regs")), parts, most))
    if reason == "lost_vectorization":
        return ("the fused kernel has %d vector operations%s; %s %s %d%s"
                % (bf.get("vec_ops", 0), "" if bf.get("vectorized") else " (scalar loops)",
                   parts, "has" if one else "have", sum(f.get("vec_ops", 0) for f in cfs), both))
    if reason == "recompute":
        return ("the fused kernel reads through its input pointers %d times; %s %d times%s"
                % (bf.get("loads", 0), parts, sum(f.get("loads", 0) for f in cfs), both))
    if reason == "lost_parallelism":
        return ("the fused kernel runs %d of its loop nests on one thread (%d split reductions); "
                "%s %s %d on one thread and %d across threads (%d split reductions)"
                % (bf.get("serial_loops", 0), bf.get("split_reductions", 0), parts, verb("run"),
                   sum(f.get("serial_loops", 0) for f in cfs),
                   sum(f.get("parallel_loops", 0) for f in cfs),
                   sum(f.get("split_reductions", 0) for f in cfs)))
    if reason == "kernel_slowdown":
        roof = ev.get("roofline") or {}
        fs = (roof.get("fused") or {}).get("share")
        us = [u.get("share") for u in roof.get("unfused") or [] if u.get("share") is not None]
        bw = "" if fs is None or not us else (
            "; it moves its bytes at %.0f%% of the memory bandwidth, %s at %s"
            % (100 * fs, parts, ", ".join("%.0f%%" % (100 * u) for u in us)))
        return ("the fused kernel takes %s ms; %s %s %s ms%s, and no other rule's evidence "
                "holds%s" % (_num_text(ev.get("fused_kernel_ms"), "{:.4f}"), parts, verb("take"),
                             _num_text(ev.get("unfused_kernels_ms"), "{:.4f}"), both, bw))
    if reason == "fresh_allocation":
        al = ev.get("allocated_per_call") or {}
        mb = [(al.get(k) or {}).get("bytes") for k in ("fused", "unfused")]
        text = tuple(_num_text(x if x is None else x / 1e6, "{:.1f}") for x in mb)
        fk, uk = ev.get("fused_kernel_ms"), ev.get("unfused_kernels_ms")
        if fk is not None and uk is not None and fk > uk:
            return ("the compile allocates %s MB at each call with the fusion, %s MB without "
                    "it, in blocks past glibc's 32 MiB mmap threshold: mapped afresh at every "
                    "call, their pages faulted in inside the kernel that first writes them "
                    "(the fused kernel takes %s ms; %s %s %s ms)"
                    % (text + (_num_text(fk, "{:.4f}"), parts, verb("take"),
                               _num_text(uk, "{:.4f}"))))
        return ("the loss is outside the kernels: the compile allocates %s MB at each call "
                "with the fusion, %s MB without it" % text)
    return "no rule's evidence holds"


# ---- the explanation ----


class Ctx:
    """What explain() needs from whoever compiled the job.

    base_fn        the job's inductor callable
    decisions      its fusion decisions (decisions.Recorder.decisions())
    base_codes     its output code modules
    compile_cf     compile_cf(ids or None) -> dict(fn, codes, kernels: [{name,
                   keys}], kernel_ops: {name: aten ops}, took, externs): a cold
                   compile of the model with those decisions undone (None:
                   unmodified, the placebo)
    knobs          [(config name, value)]: the no-fusion rung's knobs besides
                   the fusion decisions, each switched off alone by
                   compile_knob(name, value) -> dict(fn) (a cold compile of the
                   model as inductor, that one knob changed)
    beside         [(config name, value)]: choices of the job's compile beside
                   fusion (ladder.BESIDE_KNOBS it made), each switched off
                   alone by compile_knob the same way
    profile_fn     profile_fn(fn, kernel_ops) -> {"times": {kernel name: ms},
                   "peak": bytes or None} of one profiled iteration, or None
    base_kernel_ops  kernel_ops of the job's compile (for profiling base_fn
                   beside a counterfactual)
    clock, inputs, sync, device
    kernel_ms      {kernel name: ms} of the job's profiled iteration
    base_ms        the job's inductor median (ms)
    kernel_bytes   {kernel name: bytes} of the job's generated kernels per call
                   (decisions.kernel_costs)
    roof           {"gbps", "measured_by"}: the device's memory bandwidth
                   (GB/s, read + write) the kernels are held against, or None
    compiles       compiles() -> graphs compiled so far in this process
                   (dynamo's unique_graphs), or None (not counted).  A
                   comparison that compiled while it ran timed something
                   other than what it names: a callable whose code a later
                   torch._dynamo.reset() dropped compiles again when called,
                   outside the settings (the undo) it was compiled with
    """

    def __init__(self, **kw):
        self.profile_fn = None
        self.base_peak = None
        self.base_externs = 0
        self.device = "cpu"
        self.sync = None
        self.kernel_ms = {}
        self.base_kernel_ops = {}
        self.knobs = []
        self.beside = []
        self.compile_knob = None
        self.base_ms = float("nan")
        self.kernel_bytes = {}
        self.roof = None
        self.compiles = None
        self.__dict__.update(kw)
        self._base_alloc = None

    def base_alloc(self):
        """alloc_facts of the job's compile, parsed once (the lost decisions'
        reasons and the interaction both read it)."""
        if self._base_alloc is None:
            self._base_alloc = alloc_facts(self.base_codes)
        return self._base_alloc


def _counted(ctx, run):
    """run()'s value, and the graphs compiled while it ran (None: not
    counted)."""
    n0 = ctx.compiles() if ctx.compiles else None
    out = run()
    return out, None if n0 is None else ctx.compiles() - n0


class _Measure:
    def __init__(self, ctx, budget, noise):
        self.ctx, self.budget, self.noise = ctx, budget, noise
        self.rounds = rounds_for(ctx.base_ms)
        self.log = []  # every comparison: ids, saved_ms, interval, seconds
        # the finest measurements group testing made: each decision alone, or a
        # chunk within the noise that was not split (they partition what was
        # measured; the cost model is audited over them)
        self.units = []
        self.all_undone = None  # every decision undone at once (the step's first part)
        self.peak_interaction = None  # _peak_interaction's finding, measured after it
        self.peak_cost = None  # the most one profiled compile (peak_of) cost, seconds

    def peak_of(self, ids):
        """Compiles with ids undone and profiles it once, untimed (an
        allocation's size does not depend on the machine's load): dict(cf,
        peak) or None when the budget does not hold one more (the most one
        cost, or before the first the most a timed one did)."""
        if self.budget.left() <= STEP_ROOM * (self.peak_cost or self.budget.cost or 0.0):
            return None
        t0 = time.monotonic()
        cf = self.ctx.compile_cf(list(ids))
        prof = self.ctx.profile_fn(cf["fn"], cf.get("kernel_ops", {})) if cf["took"] else None
        s = time.monotonic() - t0
        self.peak_cost = s if self.peak_cost is None else max(self.peak_cost, s)
        return {"cf": cf, "peak": (prof or {}).get("peak"), "seconds": s}

    def timed(self, compile_fn, label, after=None):
        """compile_fn() -> dict with "fn", compared against the job's compile,
        then after(cf) (a profile, or None), all within the budget and logged
        under label: dict(saved_ms, ci, cf, rounds, seconds, after), or None
        when the budget is spent."""
        if not self.budget.allows():
            return None
        t0 = time.monotonic()
        cf = compile_fn()
        ((a, b, d), extra), recompiled = _counted(self.ctx, lambda: (
            compare(self.ctx.base_fn, cf["fn"], self.ctx.inputs, self.ctx.clock, self.rounds,
                    self.ctx.sync, deadline=self.budget.end),
            after(cf) if after else None))
        s = time.monotonic() - t0
        self.budget.spent(s)
        self.log.append(dict(label, saved_ms=d[0], ci=[d[1], d[2]], seconds=s, rounds=len(a),
                             recompiled=recompiled))
        return {"saved_ms": d[0], "ci": [d[1], d[2]], "cf": cf, "rounds": len(a), "seconds": s,
                "after": extra}

    def undo(self, ids, peak=False):
        """Compiles with ids undone and compares against the job's compile:
        dict(saved_ms, ci, took, cf, profile) or None when the budget is spent.
        A single decision undone is also profiled (kernel times, peak), and
        with peak any set undone (its peak)."""
        prof = None
        if len(ids) == 1 and self.ctx.profile_fn:
            prof = lambda cf: paired_profile(self.ctx, cf)  # noqa: E731
        elif peak and self.ctx.profile_fn:
            prof = lambda cf: self.ctx.profile_fn(cf["fn"], cf["kernel_ops"])  # noqa: E731
        r = self.timed(lambda: self.ctx.compile_cf(list(ids)), {"ids": list(ids)}, prof)
        if r is not None:
            r.update(ids=list(ids), took=r["cf"]["took"], profile=r.pop("after"))
        return r

    def knob(self, name, value):
        """inductor with one knob switched off, compared the same way, and
        profiled once (its peak memory)."""
        prof = None
        if self.ctx.profile_fn:
            prof = lambda cf: self.ctx.profile_fn(cf["fn"], cf.get("kernel_ops", {}))  # noqa: E731
        r = self.timed(lambda: self.ctx.compile_knob(name, value), {"knob": name}, prof)
        if r is not None:
            r.update(took=True, profile=r.pop("after"))
        return r


# Profiles of the job's compile and a counterfactual, alternated, this many
# rounds: a kernel's time is its least over them (other tenants and the
# profiler only add time; each profile is already the fastest of
# measure.PROFILE_TRIES iterations).
PAIRED_PROFILES = 1


def paired_profile(ctx, cf, rounds=PAIRED_PROFILES):
    """The counterfactual cf and the job's compile profiled in turn, at the
    same moment, so that a fused kernel is compared with its unfused parts
    under the same load (the job's own profile may be minutes old):
    {"times": {kernel: ms}, "base_times": {kernel: ms}, "peak": bytes} or None."""
    cft, bt, peak = {}, {}, None
    for _ in range(rounds):
        b = ctx.profile_fn(ctx.base_fn, ctx.base_kernel_ops)
        c = ctx.profile_fn(cf["fn"], cf["kernel_ops"])
        if not b or not c:
            return c or None
        for k, v in b["times"].items():
            bt[k] = min(v, bt.get(k, v))
        for k, v in c["times"].items():
            cft[k] = min(v, cft.get(k, v))
        if c.get("peak") is not None:
            peak = c["peak"] if peak is None else min(peak, c["peak"])
    return {"times": cft, "base_times": bt, "peak": peak}


def _entry(d, kernel_ms):
    return {"id": d["id"], "kind": d["kind"], "kernel": d.get("kernel"),
            "kernel_ms": kernel_ms.get(d.get("kernel")),
            "predicted_shared_bytes": d.get("predicted_shared_bytes"),
            "members": len(d["members"]), "verdict": "not_measured", "measured": None,
            "saved_ms": None, "saved_ci95": None, "reason": None}


def _chunks(entries):
    """Group testing's first chunks, of at most SINGLE_MAX decisions: Inductor's
    fusions (which carry its predicted benefit) and the C++ kernel groups
    (which carry none) never share a chunk, so that every chunk of fusions
    measured within the noise is a unit the cost-model audit can rank; the
    chunk holding the most expensive kernel first (entries come so sorted)."""
    chunks = []
    for predicted in (True, False):
        cls = [e for e in entries if (e["predicted_shared_bytes"] is not None) == predicted]
        chunks += [cls[i:i + SINGLE_MAX] for i in range(0, len(cls), SINGLE_MAX)]
    rank = {id(e): i for i, e in enumerate(entries)}
    return sorted(chunks, key=lambda c: rank[id(c[0])])


def _group_test(m, entries, chunk, depth=0):
    """Undo chunk at once; recurse into halves where the interval leaves the
    noise band; single decisions get their verdict."""
    r = m.undo([e["id"] for e in chunk])
    if r is None:
        return
    v = verdict(r["ci"][0], r["ci"][1], m.noise)
    if len(chunk) == 1:
        e = chunk[0]
        e.update({"verdict": v if r["took"] else "did_not_take", "measured": "alone",
                  "saved_ms": r["saved_ms"], "saved_ci95": r["ci"]})
        e["_r"] = r
        if r["took"]:
            m.units.append({"ids": [e["id"]], "saved_ms": r["saved_ms"], "ci95": r["ci"],
                            "verdict": v})
        return
    if v == "no_difference":
        if r["took"]:
            m.units.append({"ids": [e["id"] for e in chunk], "saved_ms": r["saved_ms"],
                            "ci95": r["ci"], "verdict": v})
        for e in chunk:
            e.update({"verdict": "no_difference", "measured": "in_group_of_%d" % len(chunk),
                      "saved_ms": None, "saved_ci95": r["ci"]})
        return
    half = len(chunk) // 2
    _group_test(m, entries, chunk[:half], depth + 1)
    _group_test(m, entries, chunk[half:], depth + 1)


def explain(ctx, budget_s=DEFAULT_BUDGET_S, ladder_step=None, compile_times=None,
            medians=None, missed=None):
    """The explanation's "fusions" object (docs/EXPLAIN.md).  ladder_step: the
    ms inductor-nofusion -> inductor saved in the job's rounds (difference of
    medians), or None: its interval is the ladder's own (ind_explain.c, one
    bootstrap for one number); compile_times: {rung: {"cold_ms", "warm_ms"}};
    medians: {rung: ms}."""
    t_start = time.monotonic()
    # before the first counterfactual is measured, one is expected to cost what
    # the job's own cold compile of the rung did, plus its rounds: a budget
    # shorter than that (a ladder that took most of the job's timeout) starts
    # none, rather than running past the timeout
    cold = ((compile_times or {}).get("inductor") or {}).get("cold_ms")
    guess = None
    if isinstance(cold, (int, float)) and ctx.base_ms > 0:
        guess = cold / 1e3 + rounds_for(ctx.base_ms) * 2 * ctx.base_ms / 1e3
    budget = Budget(budget_s, guess)
    ds = list(ctx.decisions)
    ds.sort(key=lambda d: -(ctx.kernel_ms.get(d.get("kernel")) or 0.0))
    entries = [_entry(d, ctx.kernel_ms) for d in ds]
    by_id = {d["id"]: d for d in ds}
    out = {"decisions": len(ds), "budget_s": budget_s, "rounds_per_comparison": None,
           "layout_noise_ms": None, "fusions": entries}
    # the placebo: the same code built again
    noise = 0.0
    if ds and budget.allows():  # else nothing is undone, so no band is needed
        t0 = time.monotonic()
        pl = ctx.compile_cf(None)
        rounds = rounds_for(ctx.base_ms)
        (a, b, d), recompiled = _counted(ctx, lambda: compare(
            ctx.base_fn, pl["fn"], ctx.inputs, ctx.clock, rounds, ctx.sync, deadline=budget.end))
        budget.spent(time.monotonic() - t0)
        noise = max(abs(d[1]), abs(d[2])) if d else 0.0
        out["layout_noise_ms"] = noise
        out["placebo"] = {"saved_ms": d[0] if d else None, "ci95": [d[1], d[2]] if d else None,
                          "rounds": len(a), "recompiled": recompiled}
        out["rounds_per_comparison"] = rounds
    m = _Measure(ctx, budget, noise)
    # inductor slower than eager: first ask whether fusion is to blame at all
    med = medians or {}
    lagging = isinstance(med.get("inductor"), float) and isinstance(med.get("eager"), float) \
        and med["inductor"] > med["eager"]
    if lagging:
        out["beside"] = _beside(ctx, m)
    if len(entries) <= SINGLE_MAX:
        for e in entries:
            _group_test(m, entries, [e])
    else:
        for chunk in _chunks(entries):
            _group_test(m, entries, chunk)
    lost = [e for e in entries if e["verdict"] == "lost"]
    _reasons(ctx, lost, by_id)
    _memory(ctx, entries)
    for e in entries:
        e.pop("_r", None)
    alone = [e for e in entries if e["measured"] == "alone" and e["verdict"] != "did_not_take"]
    out["counts"] = {v: sum(1 for e in entries if e["verdict"] == v)
                     for v in ("won", "lost", "no_difference", "did_not_take", "not_measured")}
    out["sum_of_parts_ms"] = sum(e["saved_ms"] for e in alone) if alone else None
    if ladder_step is not None:
        out["ladder_step_ms"] = ladder_step
        out["interaction_ms"] = None if out["sum_of_parts_ms"] is None else \
            ladder_step - out["sum_of_parts_ms"]
    out["all_lost_undone"] = None
    if lost:
        r = m.undo([e["id"] for e in lost])
        if r is not None:
            out["all_lost_undone"] = {"ids": r["ids"], "saved_ms": r["saved_ms"],
                                      "ci95": r["ci"], "took": r["took"],
                                      "recovered_ms": -r["saved_ms"]}
    out["step"] = _decompose(ctx, m, entries, ladder_step, out["sum_of_parts_ms"])
    if not lagging:
        out["beside"] = _beside(ctx, m)
    out["peak_interaction"] = m.peak_interaction
    out["cost_model"] = audit(entries, m.units)
    out["missed"] = missed
    out["break_even"] = break_even(compile_times, medians)
    out["medians"] = medians
    out["comparisons"] = m.log
    # graphs compiled while a comparison ran (None: not counted); anything
    # but 0 means a comparison timed code other than it names
    counted = [x["recompiled"] for x in m.log + [out.get("placebo") or {}]
               if x.get("recompiled") is not None]
    out["recompiles_during_comparisons"] = sum(counted) if ctx.compiles else None
    out["seconds"] = time.monotonic() - t_start
    # the budget ended before something was measured: a decision, a part of
    # the step, a choice beside fusion, or a keep-test search
    parts = out["step"]["parts"] + (out.get("beside") or [])
    searches = [out["step"].get("interaction"), out["peak_interaction"]]
    out["stopped"] = "budget" if any(e["verdict"] == "not_measured" for e in entries + parts) or \
        any((x or {}).get("stopped") == "budget" for x in searches) else "done"
    return out


def _decompose(ctx, m, entries, ladder_step, sum_of_parts):
    """The ladder's inductor-nofusion -> inductor step, split by what the
    no-fusion rung switches off: every fusion decision undone at once (one
    compile: the decisions together, their interaction the difference from the
    sum of the parts), then each of the rung's other knobs (ctx.knobs: the
    post-grad pattern matcher, epilogue and prologue fusion into templates)
    switched off alone on top of inductor.  What the step leaves over is the
    interaction of all of these.  Each item: saved_ms (> 0: inductor is that
    much faster with it), its interval and verdict past the layout noise, or
    not_measured when the budget ran out first."""
    items = []
    ids = [e["id"] for e in entries]
    if len(ids) > 1:
        r = m.all_undone = m.undo(ids, peak=True)
        items.append(_step_item("decisions", "all %d fusion decisions undone at once" %
                                len(ids), r, m.noise, ctx.base_peak))
    elif ids:  # one decision: undone alone already
        e = entries[0]
        items.append({"part": "decisions", "what": "the one fusion decision undone",
                      "saved_ms": e["saved_ms"], "ci95": e["saved_ci95"],
                      "verdict": e["verdict"]})
    # what holds the peak the decisions raise together: next, before the timed
    # knobs (its keep-tests are untimed, so a fraction of one's cost, and the
    # answer on a machine whose timing cannot resolve the step)
    m.peak_interaction = _peak_interaction(m, entries)
    for name, value in ctx.knobs:
        items.append(dict(_step_item("knob", "%s=%s" % (name, value), m.knob(name, value),
                                     m.noise, ctx.base_peak), knob=name))
    measured = [x["saved_ms"] for x in items if x["saved_ms"] is not None]
    out = {"parts": items}
    dec = items[0] if items and items[0]["part"] == "decisions" else None
    if dec and dec["saved_ms"] is not None and sum_of_parts is not None and len(ids) > 1:
        out["decisions_interaction_ms"] = dec["saved_ms"] - sum_of_parts
    if ladder_step is not None and len(measured) == len(items):
        out["ladder_step_ms"] = ladder_step
        out["rest_ms"] = ladder_step - sum(measured)
    if dec and dec["verdict"] == "lost" and len(ids) > 1 and \
            not any(e["verdict"] == "lost" for e in entries):
        out["interaction"] = _interaction(m, entries)
    return out


def _beside(ctx, m):
    """Each choice of the job's compile beside fusion (ctx.beside: the
    channels-last layout of its convolutions) switched off alone on top of
    inductor, compared with the job's compile: saved_ms > 0, inductor is that
    much faster with the choice; < 0 (verdict lost), the choice costs it that
    much.  No rung of the ladder shows these (inductor-nofusion makes them
    too), so an inductor slower than eager can be a choice here and no
    fusion; explain() measures them first then."""
    return [dict(_step_item("beside", "%s=%s" % (name, value), m.knob(name, value), m.noise,
                            ctx.base_peak), knob=name) for name, value in ctx.beside]


def _keep_search(all_ids, holds):
    """Group testing of what is kept (every other decision undone): holds(kept)
    -> True (the kept set holds the effect), False, "unknown" (its undo did
    not take: it proves nothing) or None (the budget is spent).  All of them
    kept holds it, by definition; a set that holds it is split in halves,
    each kept alone in turn, and a half that holds it is split again, down to
    single decisions: the causes.  A set that holds it while neither half
    does (and neither half's test was unknown) needs members of both kept
    together: a group, refined by keeping it less one member at a time and
    dropping each member without which it still holds, so that every member
    left is needed.  -> (causes, groups, stopped by the budget)."""
    causes, groups = [], []
    stopped = [False]

    def search(chunk):
        if len(chunk) == 1:
            causes.append(chunk[0])
            return
        half = len(chunk) // 2
        found = unknown = False
        for part in (chunk[:half], chunk[half:]):
            h = holds(part)
            if h is None:
                stopped[0] = True
                return
            unknown = unknown or h == "unknown"
            if h is True:
                found = True
                search(part)
                if stopped[0]:
                    return
        if not found and not unknown:  # (an undo that did not take proves nothing)
            groups.append(list(chunk))

    def refine(group):
        kept = list(group)
        for x in group:
            if len(kept) < 2 or stopped[0]:
                break
            trial = [i for i in kept if i != x]
            h = holds(trial)
            if h is None:
                stopped[0] = True
            elif h is True:
                kept = trial
        return kept

    search(list(all_ids))
    refined = []
    for g in groups:
        g = g if stopped[0] else refine(g)
        if len(g) == 1:
            causes.append(g[0])  # (one kept alone holds it after all)
        else:
            refined.append(g)
    return causes, refined, stopped[0]


def _mark(entries, field, causes, groups):
    """entries' field: "cause" or "together", as _keep_search found them."""
    by_id = {e["id"]: e for e in entries}
    for i in causes:
        by_id[i][field] = "cause"
    for g in groups:
        for i in g:
            by_id[i][field] = "together"


def _interaction(m, entries):
    """Every decision undone at once is faster, yet no decision or chunk undone
    alone is: the loss lives in an interaction.  Found from the other side, by
    group testing what is kept: a set C "holds the loss" when every decision
    but C's undone is not `lost` against the job's compile (keeping C fused
    alone keeps the loss), by _keep_search: the causes, each of which alone,
    everything else unfused, costs the loss (when any one of several fusions
    is enough to cost it, undoing one of them changes nothing, and these are
    what undoing finds no part of), and groups needed together.  Each
    keep-test is one timed counterfactual, within the budget (`stopped`
    says when it ran out first); entries get interaction "cause" or
    "together".

    Its reason, from evidence: `fresh_allocation` when the job's compile
    allocates at least ALLOC_EVIDENCE_BYTES more at each call than with every
    decision undone, and so does each cause's keep-test (kept alone, it
    brings the buffer back: a fused kernel that cannot write in place needs
    one more buffer, however many fusions share it); else `unexplained`."""
    all_ids = [e["id"] for e in entries]
    tests = []
    none_alloc = alloc_facts(m.all_undone["cf"]["codes"])

    def holds(kept):
        keep = set(kept)
        r = m.timed(lambda: m.ctx.compile_cf([i for i in all_ids if i not in keep]),
                    {"kept": list(kept)})
        if r is None:
            return None
        v = verdict(r["ci"][0], r["ci"][1], m.noise) if r["cf"]["took"] else "did_not_take"
        h = v not in ("lost", "did_not_take")  # an undo that did not take shows nothing
        tests.append({"kept": list(kept), "saved_ms": r["saved_ms"], "ci95": r["ci"],
                      "verdict": v, "holds": h,
                      "allocated_bytes": alloc_facts(r["cf"]["codes"])["bytes"]})
        return "unknown" if v == "did_not_take" else h

    causes, groups, stopped = _keep_search(all_ids, holds)
    _mark(entries, "interaction", causes, groups)
    base_alloc = m.ctx.base_alloc()
    kept_alone = {t["kept"][0]: t["allocated_bytes"] for t in tests if len(t["kept"]) == 1}
    # (on a GPU the caching allocator hands a call its buffers back: no cost)
    fresh = m.ctx.device != "cuda" and fresh_allocation(base_alloc, none_alloc) and \
        bool(causes or groups) and all(
        kept_alone.get(i, base_alloc["bytes"]) - none_alloc["bytes"] >= ALLOC_EVIDENCE_BYTES
        for i in causes)
    return {"causes": causes, "together": groups, "tests": tests,
            "stopped": "budget" if stopped else "done",
            "reason": "fresh_allocation" if fresh else "unexplained",
            "evidence": {"allocated_per_call": {"fused": base_alloc, "all_undone": none_alloc}}}


def _peak_interaction(m, entries):
    """Every decision undone at once lowers inductor's peak by at least
    ALLOC_EVIDENCE_BYTES, and no decision undone alone accounts for half of
    it: the extra memory is held by fusions together, or by any one of
    several (whisper_tiny's four fused softmaxes: any one of them needs a
    second 54 MB scores buffer, so undoing one leaves it).  Found as the
    timing interaction is, by what is kept (_keep_search), with a profiled
    compile for each keep-test and no timed rounds: a kept set holds the
    extra peak when, every other decision undone, the compile peaks at least
    half of it above the compile with every decision undone.  An
    allocation's size does not depend on the machine's load, so this
    answers where the timing cannot resolve the step; it runs right after
    every decision undone at once, before the step's timed knobs.  None when
    it does not apply; else {"extra_peak_bytes", "causes", "together", "tests",
    "stopped", "evidence"}, and the entries get peak_interaction "cause" or
    "together"."""
    ctx, r = m.ctx, m.all_undone
    none_peak = ((r or {}).get("profile") or {}).get("peak")
    if not ctx.profile_fn or ctx.base_peak is None or none_peak is None or len(entries) < 2:
        return None
    extra = ctx.base_peak - none_peak
    alone = max((e.get("peak_mem_delta_bytes") or 0) for e in entries)
    if extra < ALLOC_EVIDENCE_BYTES or alone >= extra / 2:
        return None
    all_ids = [e["id"] for e in entries]
    tests = []

    def holds(kept):
        keep = set(kept)
        p = m.peak_of([i for i in all_ids if i not in keep])
        if p is None:
            return None
        t = {"kept": list(kept), "peak_bytes": p["peak"], "adds_bytes": None, "holds": None,
             "allocated_bytes": alloc_facts(p["cf"]["codes"])["bytes"],
             "seconds": round(p["seconds"], 3)}
        tests.append(t)
        if not p["cf"]["took"] or p["peak"] is None:
            return "unknown"
        t["adds_bytes"] = p["peak"] - none_peak
        t["holds"] = t["adds_bytes"] >= extra / 2
        return t["holds"]

    causes, groups, stopped = _keep_search(all_ids, holds)
    _mark(entries, "peak_interaction", causes, groups)
    return {"extra_peak_bytes": extra, "causes": causes, "together": groups, "tests": tests,
            "stopped": "budget" if stopped else "done",
            "evidence": {"allocated_per_call": {"fused": ctx.base_alloc(),
                                                "all_undone": alloc_facts(r["cf"]["codes"])}}}


def _step_item(part, what, r, noise, base_peak=None):
    """One part measured against the job's compile; with its profile's peak
    and the job's, peak_mem_delta_bytes (> 0: the job's compile peaks that
    much higher than with the part switched off)."""
    if r is None:
        return {"part": part, "what": what, "saved_ms": None, "ci95": None,
                "verdict": "not_measured"}
    v = verdict(r["ci"][0], r["ci"][1], noise)
    out = {"part": part, "what": what, "saved_ms": r["saved_ms"], "ci95": r["ci"],
           "verdict": v if r["took"] else "did_not_take"}
    peak = (r.get("profile") or {}).get("peak")
    if peak is not None and base_peak is not None:
        out["peak_mem_delta_bytes"] = base_peak - peak
    return out


def _reasons(ctx, lost, by_id):
    base_src = kernel_sources(ctx.base_codes)
    # (on a GPU the caching allocator hands a call its buffers back: no rule)
    base_alloc = None if ctx.device == "cuda" else ctx.base_alloc()
    limits = device_limits() if ctx.device == "cuda" else None
    for e in lost:
        r = e.get("_r")
        d = by_id[e["id"]]
        if r is None:
            e["reason"], e["evidence"], e["why"] = "unexplained", {}, "not measured alone"
            continue
        cf = r["cf"]
        keys = {m["key"] for m in d["members"]}
        cf_kernels = [k["name"] for k in cf["kernels"] if keys & k["keys"]]
        cf_src = kernel_sources(cf["codes"])
        times = (r.get("profile") or {}).get("times")
        cf_ms = sum(times.get(k, 0.0) for k in cf_kernels) if times and cf_kernels else None
        # the fused kernel as profiled beside its parts, else the job's profile
        base_ms = ((r.get("profile") or {}).get("base_times") or {}).get(
            d.get("kernel"), ctx.kernel_ms.get(d.get("kernel")))
        gpu = None
        if ctx.device == "cuda":
            facts = triton_facts([d.get("kernel")] + cf_kernels)
            if d.get("kernel") in facts:
                gpu = (facts[d["kernel"]], [facts[k] for k in cf_kernels if k in facts])
        reason, ev = reason_of(d, base_src.get(d.get("kernel")),
                               [cf_src.get(k) for k in cf_kernels],
                               base_ms, cf_ms,
                               ctx.base_externs, cf["externs"], gpu,
                               base_alloc and (base_alloc, alloc_facts(cf["codes"])), limits)
        ev["unfused_kernel_names"] = cf_kernels
        nbytes = {n: c.get("bytes") for n, c in (cf.get("costs") or {}).items()}
        roof = roofline_evidence(
            ctx.roof, (ctx.kernel_bytes.get(d.get("kernel")), base_ms),
            [(nbytes.get(k), (times or {}).get(k)) for k in cf_kernels])
        if roof:
            ev["roofline"] = roof
        e["reason"], e["evidence"], e["why"] = reason, ev, why_of(reason, ev)


def _memory(ctx, entries):
    """Peak memory of each counterfactual measured alone, against the job's
    (> 0: the fusion raised the peak by that much); on the CPU also the bytes
    its output code allocates at each call, against the job's
    (alloc_delta_bytes > 0: the fusion allocates that much more a call; each
    buffer past glibc's 32 MiB mmap threshold is mapped and zeroed afresh at
    every call, a cost outside any kernel that the timing shows).  Sizes
    that are symbolic in either compile leave it unsaid."""
    base_alloc = None if ctx.device == "cuda" else ctx.base_alloc()
    for e in entries:
        r = e.get("_r") or {}
        p = (r.get("profile") or {}).get("peak")
        if p is not None and ctx.base_peak is not None:
            e["peak_mem_delta_bytes"] = ctx.base_peak - p
        codes = (r.get("cf") or {}).get("codes") if r.get("took") else None  # an undo that took
        if base_alloc and not base_alloc["symbolic"] and codes:
            a = alloc_facts(codes)
            if not a["symbolic"]:
                e["alloc_delta_bytes"] = base_alloc["bytes"] - a["bytes"]


def audit(entries, units=()):
    """Inductor's cost model against the measurements: predicted shared bytes
    beside measured saving, for the decisions measured alone ("points",
    "spearman"), and for every unit group testing measured (a decision alone,
    or a chunk within the noise undone at once: its members' predicted bytes
    summed, as Inductor's score adds over merges; "units", "spearman_units").
    Units with a member Inductor gave no prediction (a C++ kernel group) are
    left out."""
    pts = [e for e in entries if e["measured"] == "alone" and e["saved_ms"] is not None and
           e["predicted_shared_bytes"] is not None and e["verdict"] != "did_not_take"]
    rho = spearman([e["predicted_shared_bytes"] for e in pts], [e["saved_ms"] for e in pts])
    bad = [{"id": e["id"], "predicted_shared_bytes": e["predicted_shared_bytes"],
            "saved_ms": e["saved_ms"], "reason": e["reason"]}
           for e in pts if e["predicted_shared_bytes"] > 0 and e["verdict"] == "lost"]
    pred = {e["id"]: e["predicted_shared_bytes"] for e in entries}
    us = []
    for u in units:
        ps = [pred.get(i) for i in u["ids"]]
        if u["saved_ms"] is None or any(p is None for p in ps):
            continue
        us.append({"ids": list(u["ids"]), "decisions": len(ps),
                   "predicted_shared_bytes": sum(ps), "saved_ms": u["saved_ms"],
                   "ci95": u["ci95"], "verdict": u["verdict"]})
    return {"points": [{"id": e["id"], "predicted_shared_bytes": e["predicted_shared_bytes"],
                        "saved_ms": e["saved_ms"], "verdict": e["verdict"]} for e in pts],
            "spearman": rho, "bad_fusions": bad, "units": us,
            "spearman_units": spearman([u["predicted_shared_bytes"] for u in us],
                                       [u["saved_ms"] for u in us])}


def break_even(compile_times, medians):
    """Iterations after which a compiled rung's per-iteration saving over eager
    has paid for its compile (cold and warm), per rung; None where it never
    does."""
    if not compile_times or not medians or medians.get("eager") is None:
        return None
    out = {}
    for rung, ct in compile_times.items():
        m = medians.get(rung)
        if m is None:
            continue
        saving = medians["eager"] - m
        row = {"saving_ms_per_iter": saving, "compile_cold_ms": ct.get("cold_ms"),
               "compile_warm_ms": ct.get("warm_ms")}
        for k in ("cold", "warm"):
            c = ct.get(k + "_ms")
            row["iterations_" + k] = (math.ceil(c / saving) if c is not None and saving > 0
                                      else None)
        out[rung] = row
    return out


# ---- missed fusions ----


class MissedRecorder:
    """Inductor's refused merges during one compile (WhyNoFuse, the reasons
    its fusion log prints), with the bytes each would have shared
    (score_fusion_memory), merged by node pair."""

    current = None

    def __init__(self):
        self.pairs = {}
        self.unscored = {}  # refusals whose score could not be read, by exception

    def add(self, node1, node2, reason):
        """One refusal, scored now: score_fusion_memory reads the graph being
        compiled (V.graph), which is gone once the compile ends."""
        key = (node1.get_name(), node2.get_name())
        try:
            score = node1.scheduler.score_fusion_memory(node1, node2)
            score = int(score[0] if isinstance(score, tuple) else score)
        except Exception as e:  # an older or newer scheduler: counted, not scored
            self.unscored[type(e).__name__] = self.unscored.get(type(e).__name__, 0) + 1
            return
        if score <= 0:
            return
        ops = sorted({str(o.target) for n in (node1, node2) for s in n.get_nodes()
                      for o in (getattr(getattr(s, "node", None), "origins", None) or ())
                      if getattr(o, "op", "") == "call_function"})
        self.pairs[key] = {"n1": node1, "n2": node2, "reason": reason, "score": score,
                           "ops": ops}

    def summary(self, limit=20):
        """{"by_reason": {reason: {count, bytes}}, "top": [...]}: pairs that
        share bytes, ranked by them (pairs fused after all left out)."""
        _why_nodes.clear()
        rows = []
        for (a, b), p in self.pairs.items():
            try:
                sched = p["n1"].scheduler
                if sched.get_fused_node(p["n1"]) is sched.get_fused_node(p["n2"]):
                    continue
            except Exception:  # the pair's nodes left the scheduler: keep it
                pass
            rows.append({"nodes": [a, b], "reason": p["reason"], "shared_bytes": p["score"],
                         "aten_ops": p["ops"]})
        rows.sort(key=lambda r: -r["shared_bytes"])
        by = {}
        for r in rows:
            b = by.setdefault(r["reason"], {"count": 0, "shared_bytes": 0})
            b["count"] += 1
            b["shared_bytes"] += r["shared_bytes"]
        out = {"by_reason": by, "top": rows[:limit], "refused_pairs": len(rows)}
        if self.unscored:
            out["unscored"] = self.unscored
        return out


_why_nodes = {}


def install_missed_hook():
    """Wraps WhyNoFuse.__init__/__call__ so that MissedRecorder.current sees
    every refusal with both nodes.  False when this PyTorch lacks WhyNoFuse."""
    try:
        from torch._inductor.scheduler import WhyNoFuse
    except ImportError:
        return False
    if getattr(WhyNoFuse, "_fb_wrapped", False):
        return True
    init, call = WhyNoFuse.__init__, WhyNoFuse.__call__
    nodes = _why_nodes  # WhyNoFuse has __slots__: its nodes kept by id here

    def init_hook(self, node1, node2):
        init(self, node1, node2)
        if MissedRecorder.current is not None:
            nodes[id(self)] = (node1, node2)

    def call_hook(self, reason, *args):
        call(self, reason, *args)
        rec = MissedRecorder.current
        pair = nodes.pop(id(self), None)
        if rec is not None and pair is not None:
            rec.add(pair[0], pair[1], reason)

    WhyNoFuse.__init__, WhyNoFuse.__call__ = init_hook, call_hook
    WhyNoFuse._fb_wrapped = True
    return True
