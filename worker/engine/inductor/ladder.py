"""The ladder: how each variant is built from the eager model.

    eager                  the model as PyTorch runs it
    eager+cudagraphs       eager captured once into a CUDA graph and replayed (CUDA only)
    inductor-nofusion      torch.compile with Inductor's fusion limited (NOFUSION_KNOBS)
    inductor               torch.compile, default mode
    inductor+cudagraphs    torch.compile mode="reduce-overhead" (Inductor + CUDA graphs)
    inductor-max-autotune  torch.compile mode="max-autotune-no-cudagraphs" (GEMM/conv
                           template autotuning, on the CPU Inductor's C++ GEMM
                           templates; CUDA graphs kept out so the rung shows autotuning)

The step from each rung to the next is one mechanism, so the difference between
eager and the compiled program splits into fusion, launch overhead and the rest.
"""

import torch

VARIANTS = ("eager", "eager+cudagraphs", "inductor-nofusion", "inductor",
            "inductor+cudagraphs", "inductor-max-autotune")

# Added right after "inductor" when params.unfuse names fusions: Inductor as
# "inductor" compiles it, with those fusions undone (decisions.py).  Not a rung
# a user lists: params.unfuse asks for it.
UNFUSED = "inductor-unfused"

COMPILED = ("inductor-nofusion", "inductor", UNFUSED, "inductor+cudagraphs",
            "inductor-max-autotune")

# Inductor with its fusion limited to single nodes.  What each knob stops:
#   max_fusion_size=1        the scheduler fuses no two nodes (vertical or horizontal:
#                            choices.can_fuse refuses when the sizes add past 1)
#   epilogue_fusion=False    no pointwise epilogue into a GEMM/conv template
#   prologue_fusion=False    no pointwise prologue into a template
#   pattern_matcher=False    no post-grad pattern rewrites (e.g. attention → SDPA,
#                            mm+bias → addmm, the oneDNN conv/linear+unary fusions)
#   cpp.max_horizontal_fusion_size=1  the C++ backend's horizontal fusion off
# What still gets merged (no knob turns these off):
#   - pointwise ops inlined at lowering: Inductor's lowering composes a chain of
#     pointwise ops (and the pointwise prologue of a reduction) into one loop body
#     before the scheduler sees it (batch_norm+relu stays one loop);
#   - decompositions: one ATen op becomes several graph nodes (batch_norm → sub,
#     mul, rsqrt, add) computed in one loop;
# And one that is not a config knob: on the CPU the C++ backend collects
# consecutive scheduler nodes into one C++ function (its "kernel group": separate
# loop nests, one call) until the group's arguments pass
# CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM (500).  cpp_one_node_per_kernel() sets
# that to 0 for the no-fusion compile, so every scheduler node is its own
# cpp kernel (the runner reports scheduler_nodes per kernel: 1 here).
NOFUSION_KNOBS = {
    "max_fusion_size": 1,
    "epilogue_fusion": False,
    "prologue_fusion": False,
    "pattern_matcher": False,
    "cpp.max_horizontal_fusion_size": 1,
}

# The no-fusion rung's knobs that are not Inductor's fusion decisions (those
# are undone by id, decisions.py): the explanation switches each off alone to
# split the nofusion -> inductor step (explain._decompose).
STEP_KNOBS = ("pattern_matcher", "epilogue_fusion", "prologue_fusion")

# Choices of the compile beside fusion, which every compiled rung makes (the
# no-fusion rung too, so the ladder's steps never show them): the explanation
# switches each off alone on top of inductor (explain._beside), when the
# job's compile made it.  layout_optimization: the convolutions run
# channels-last, so a graph whose weights are inputs converts each of them
# at every call (docs/INDUCTOR.md, "Slower than eager on the CPU").
# {knob: (value switched to, the compile's figure saying it made the choice)}
BESIDE_KNOBS = {"layout_optimization": (False, "layout_optimized")}


def step_knobs():
    """[(name, value)] of STEP_KNOBS this PyTorch has, as the no-fusion rung sets them."""
    known = _known_knobs(NOFUSION_KNOBS)
    return [(k, known[k]) for k in STEP_KNOBS if k in known]


def beside_knobs(figures):
    """[(name, value)] of BESIDE_KNOBS this PyTorch has and the compile whose
    figures these are made (its figure true)."""
    return sorted((k, v) for k, (v, made) in _known_knobs(BESIDE_KNOBS).items()
                  if figures.get(made))


class KnobOff:
    """The compile-time state of inductor with one knob changed: the option
    rides torch.compile's options (so the FX graph cache keys it apart)."""

    def __init__(self, name, value):
        self.name, self.value = name, value

    def options(self):
        return {self.name: self.value}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class cpp_one_node_per_kernel:
    """Context: the C++ backend flushes its kernel group after every scheduler
    node (see NOFUSION_KNOBS).  A class attribute, so set only around the
    no-fusion rung's compiles (each in its own cache directory, so no other
    rung's cached code is built this way).  No-op when the attribute is gone."""

    def __enter__(self):
        try:
            from torch._inductor.codegen.cpp import CppScheduling
        except ImportError:
            self.cls = None
            return self
        self.cls = CppScheduling
        self.old = getattr(CppScheduling, "MAX_FUSED_KERNEL_ARGS_NUM", None)
        if self.old is not None:
            CppScheduling.MAX_FUSED_KERNEL_ARGS_NUM = 0
        return self

    def __exit__(self, *exc):
        if self.cls is not None and self.old is not None:
            self.cls.MAX_FUSED_KERNEL_ARGS_NUM = self.old
        return False


class Unsupported(Exception):
    """This rung cannot run here; the message says why."""


def compile_available():
    """(True, "") when torch.compile with Inductor can be tried, else (False, why)."""
    if not hasattr(torch, "compile"):
        return False, "torch %s has no torch.compile (needs PyTorch 2.0 or later)" % (
            torch.__version__)
    try:
        import importlib
        importlib.import_module("torch._inductor.config")
    except Exception as e:  # an incomplete install fails in many ways
        return False, "torch._inductor cannot be imported: %s" % e
    return True, ""


def _known_knobs(knobs):
    """The knobs this PyTorch has (an older one may lack e.g. prologue_fusion)."""
    import torch._inductor.config as cfg

    out = {}
    for key, val in knobs.items():
        obj = cfg
        parts = key.split(".")
        for p in parts[:-1]:
            obj = getattr(obj, p, None)
        if obj is not None and hasattr(obj, parts[-1]):
            out[key] = val
    return out


def compile_kwargs(variant, device):
    """torch.compile keyword arguments of a compiled rung; Unsupported when the
    rung cannot run on device."""
    if variant in ("eager+cudagraphs", "inductor+cudagraphs") and device != "cuda":
        raise Unsupported("CUDA graphs need a CUDA device; this run is on %s" % device)
    ok, why = compile_available()
    if not ok:
        raise Unsupported(why)
    if variant == "inductor-nofusion":
        return {"backend": "inductor", "options": _known_knobs(NOFUSION_KNOBS)}
    if variant in ("inductor", UNFUSED):
        return {"backend": "inductor"}
    if variant == "inductor+cudagraphs":
        return {"backend": "inductor", "mode": "reduce-overhead"}
    if variant == "inductor-max-autotune":
        return {"backend": "inductor", "mode": "max-autotune-no-cudagraphs"}
    raise Unsupported("unknown compiled variant %s" % variant)


class EagerCudaGraph:
    """Eager model captured into one CUDA graph on static inputs and replayed:
    the launch-overhead rung without any compiler."""

    def __init__(self, model, inputs):
        self.static_in = [x.clone() for x in inputs]
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):  # warm up allocator and lazy init off the graph
                model(*self.static_in)
        torch.cuda.current_stream().wait_stream(s)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.static_out = model(*self.static_in)

    def __call__(self, *inputs):
        for dst, src in zip(self.static_in, inputs):
            if dst.data_ptr() != src.data_ptr():
                dst.copy_(src)
        self.graph.replay()
        return self.static_out


def eager_cudagraphs(model, inputs, device):
    if device != "cuda":
        raise Unsupported("CUDA graphs need a CUDA device; this run is on %s" % device)
    return EagerCudaGraph(model, inputs)
