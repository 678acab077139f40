"""Inductor's output code: capture it, and read the kernels and ATen ops out of it.

Inductor writes, above each kernel it generates for the GPU (Triton), its own
metadata as comments of the output (wrapper) module:

    # kernel path: /tmp/.../cx.py
    # Topologically Sorted Source Nodes: [input_2, input_3], Original ATen: [aten.relu, ...]
    # Source node to ATen node mapping:
    #   input_2 => add, mul, relu
    triton_poi_fused_relu_0 = async_compile.triton('triton_poi_fused_relu_0', '''

Its C++ backend (the CPU's cpp_fused_* kernels) does not write these lines in
PyTorch 2.x: CppScheduling.define_kernel passes no metadata to the wrapper.
install_cpp_metadata() makes it pass the very same lines, computed by the same
function Inductor uses for Triton (torch._inductor.utils.get_kernel_metadata, from
the scheduler nodes' fx origins and their "original_aten" meta), so both backends
read alike.  Because the lines are part of the output code, the FX graph cache
stores them and a warm-cache compile shows them too.

Extern kernels (convolution, mm, ... calls into ATen/oneDNN/cuBLAS) get one
"# Topologically Sorted Source Nodes" comment line just above their call inside
call(); they are reported as extern, not as generated kernels.

Nothing here parses kernel names: a kernel's ATen ops come only from the comment
lines.

The C++ backend also emits consecutive scheduler nodes into one C++ function
(its "kernel group": separate loop nests, one call), so a cpp kernel can hold
several scheduler nodes that were never loop-fused; the line
"# fusionbench: scheduler_nodes=N" that install_cpp_metadata adds says how many.
"""

import re

_DEF_RE = re.compile(r"^(\w+) = async_compile\.(\w+)\(")
_META_RE = re.compile(r"^\s*# (?:Topologically Sorted|Unsorted) Source Nodes: \[(.*?)\], "
                      r"Original ATen: \[(.*?)\]\s*$")
_MAP_HEAD_RE = re.compile(r"^\s*# Source node to ATen node mapping:\s*$")
_MAP_RE = re.compile(r"^\s*#\s{3,}(\S+) => (.*)$")
_FRAG_RE = re.compile(r"^#\s+%(\w+) : .*?= call_function\[target=torch\.ops\.(\w+)\.(\w+)")
_NSCHED_RE = re.compile(r"^# fusionbench: scheduler_nodes=(\d+)\s*$")
# "buf = extern_kernels.convolution(...)" and "extern_kernels.addmm(..., out=buf)"
_EXTERN_RE = re.compile(r"(?:=\s*|^\s+)(extern_kernels\.\w+|torch\.ops\.\w+\.\w+(?:\.\w+)?)\(")

# Backends of async_compile whose definitions are kernels we generated.
_KERNEL_KINDS = {"cpp_pybinding": "cpp", "cpp": "cpp", "triton": "triton",
                 "halide": "halide", "cuda": "cuda", "rocm": "rocm", "mps": "mps"}

# ATen ops that only re-describe memory (views, metadata): graph nodes, but no
# computation, so they do not count as fused ops.
VIEW_OPS = frozenset("aten." + n for n in (
    "view", "_unsafe_view", "reshape", "_reshape_alias", "unsqueeze", "squeeze", "expand",
    "permute", "transpose", "t", "slice", "select", "as_strided", "alias", "detach",
    "unbind", "split", "split_with_sizes", "narrow", "view_as", "flatten", "unflatten",
    "movedim", "diagonal", "lift_fresh", "lift_fresh_copy"))

_installed = {"cpp": False, "sink": None}


def _split_list(text):
    return [s.strip() for s in text.split(",") if s.strip()]


def install_capture(sink):
    """Hands every output-code module Inductor produces (cache hits included) to
    sink(code: str).  Uses GraphLowering.save_output_code, the hook Inductor's
    own tests use (torch._inductor.utils.run_and_get_code)."""
    from torch._inductor.graph import GraphLowering

    _installed["sink"] = sink
    if getattr(GraphLowering, "save_output_code", "absent") == "absent":
        raise RuntimeError("this PyTorch has no GraphLowering.save_output_code hook")

    def save_output_code(code):
        if _installed["sink"] is not None:
            _installed["sink"](code)

    GraphLowering.save_output_code = staticmethod(save_output_code)


def install_cpp_metadata():
    """Makes the C++ backend write Inductor's kernel metadata comments above each
    cpp kernel (see the module comment).  Returns False when this PyTorch lacks a
    piece (the ops then stay unknown for cpp kernels), True when installed."""
    if _installed["cpp"]:
        return True
    try:
        from torch._inductor.codegen.cpp import CppScheduling
        from torch._inductor.utils import get_kernel_metadata
        from torch._inductor.virtualized import V
    except ImportError:
        return False
    original = CppScheduling.define_kernel

    def define_kernel(self, src_code, nodes, kernel_args=None):
        wrapper = V.graph.wrapper_code
        try:
            meta, detail = get_kernel_metadata(list(nodes), wrapper)
            comment = "%s\n%s\n# fusionbench: scheduler_nodes=%d" % (meta, detail, len(nodes))
        except Exception:  # metadata is best effort; the kernel must still compile
            comment = None
        if comment is None or src_code in wrapper.src_to_kernel:
            return original(self, src_code, nodes, kernel_args)
        plain = wrapper.define_kernel

        def with_metadata(name, body, metadata=None, gpu=True, cpp_definition=None):
            return plain(name, body, metadata=metadata or comment, gpu=gpu,
                         cpp_definition=cpp_definition)

        wrapper.define_kernel = with_metadata
        try:
            return original(self, src_code, nodes, kernel_args)
        finally:
            del wrapper.define_kernel

    CppScheduling.define_kernel = define_kernel
    _installed["cpp"] = True
    return True


def _new_meta(m):
    return {"source_nodes": _split_list(m.group(1)), "aten_ops": _split_list(m.group(2)),
            "aten_nodes": [], "node_ops": {}}


def _read_header(lines):
    """Kernel definitions at module level with the metadata comment block above
    each: {name: {"kind", "source_nodes", "aten_ops", "aten_nodes"}}."""
    kernels, pending, in_map = {}, None, False
    for line in lines:
        m = _META_RE.match(line)
        if m and not line.startswith(" "):
            pending, in_map = _new_meta(m), False
            continue
        if pending is not None and _MAP_HEAD_RE.match(line):
            in_map = True
            continue
        mm = _MAP_RE.match(line)
        if pending is not None and in_map and mm:
            pending["aten_nodes"].extend(_split_list(mm.group(2)))
            continue
        ns = _NSCHED_RE.match(line)
        if pending is not None and ns:
            pending["scheduler_nodes"] = int(ns.group(1))
            continue
        fm = _FRAG_RE.match(line)
        if pending is not None and fm:
            pending["node_ops"][fm.group(1)] = fm.group(2) + "." + fm.group(3)
            continue
        if line.startswith("#") or not line.strip():
            continue
        d = _DEF_RE.match(line)
        if d and d.group(2) in _KERNEL_KINDS:
            info = pending or {"source_nodes": [], "aten_ops": [], "aten_nodes": [],
                               "node_ops": {}}
            info["kind"] = _KERNEL_KINDS[d.group(2)]
            info["aten_nodes"] = sorted(set(info["aten_nodes"]))
            kernels[d.group(1)] = info
        pending, in_map = None, False
    return kernels


def _read_calls(lines, kernels):
    """Calls inside the wrapper's call(): generated kernel launches per name, and
    extern calls with the comment line above them."""
    launches, externs, comment = {}, [], None
    call_re = re.compile(r"^\s+(\w+)(?:\.run)?\(")
    for line in lines:
        if not line.startswith(" "):
            continue
        m = _META_RE.match(line)
        if m:
            comment = _new_meta(m)
            continue
        c = call_re.match(line)
        if c and c.group(1) in kernels:
            launches[c.group(1)] = launches.get(c.group(1), 0) + 1
            comment = None
            continue
        e = _EXTERN_RE.search(line)
        if e:
            info = comment or {"source_nodes": [], "aten_ops": [], "aten_nodes": []}
            externs.append({"call": e.group(1), "aten_ops": info["aten_ops"],
                            "source_nodes": info["source_nodes"]})
            comment = None
    return launches, externs


def _compute_nodes(info):
    """Graph nodes a kernel computes, views left out.  The node → op map comes
    from the "Graph fragment" lines; without them every mapped node counts, and
    without the mapping every distinct op does."""
    nodes = info["aten_nodes"]
    if nodes and info["node_ops"]:
        return sum(1 for n in nodes if info["node_ops"].get(n, "") not in VIEW_OPS)
    return len(nodes) or len([op for op in info["aten_ops"] if op not in VIEW_OPS])


def parse(code):
    """One output-code module → {"kernels": [...], "extern_calls": [...]}.

    Each kernel: name, kind ("cpp", "triton", ...), aten_ops (distinct ATen op
    packets, Inductor's order), aten_nodes (post-grad graph nodes it computes,
    from the "Source node to ATen node mapping" lines), n_nodes (of those, the
    ones that compute: views left out), launches (call
    sites in call()), fused (True when it implements two or more graph nodes; when
    the mapping is missing, two or more distinct ops)."""
    lines = code.splitlines()
    kernels = _read_header(lines)
    launches, externs = _read_calls(lines, kernels)
    out = []
    for name, info in kernels.items():
        n_nodes = _compute_nodes(info)
        out.append({"name": name, "kind": info["kind"], "aten_ops": info["aten_ops"],
                    "aten_nodes": info["aten_nodes"], "source_nodes": info["source_nodes"],
                    "n_nodes": n_nodes, "launches": launches.get(name, 0),
                    "scheduler_nodes": info.get("scheduler_nodes"),
                    "fused": n_nodes >= 2})
    return {"kernels": out, "extern_calls": externs}


def summarize(modules):
    """Parsed modules (one per compiled graph) → totals for a variant."""
    kernels = [k for m in modules for k in m["kernels"]]
    externs = [e for m in modules for e in m["extern_calls"]]
    fused = [k for k in kernels if k["fused"]]
    return {
        "generated_kernels": len(kernels),
        "extern_calls": len(externs),
        "fused_kernels": len(fused),
        "fused_ops": sum(k["n_nodes"] for k in fused),
        "kernels_without_metadata": sum(1 for k in kernels if not k["aten_ops"]),
        "kernels": kernels,
        "externs": externs,
    }
