"""Inductor's fusion decisions: each one recorded with a stable id, and chosen
ones undone (docs/INDUCTOR.md, "Fusion by fusion").

Two kinds of decision make one generated kernel out of several scheduler nodes:

    fuse-<12 hex>   the scheduler merged nodes into one loop nest (or one
                    Triton kernel): vertical (producer into consumer),
                    horizontal (siblings sharing reads), a reduction with its
                    pointwise neighbours, or an epilogue/prologue into a
                    GEMM/conv template.  Every final scheduler node holding two
                    or more scheduler nodes is one such decision.
    group-<12 hex>  the C++ backend packed consecutive final nodes (separate
                    loop nests) into one C++ function, its "kernel group"
                    (CPU only; no Triton counterpart).

An id is a hash of the compiled graph's ordinal and the sorted names of the FX
nodes each member came from (the IR node's origins in the post-grad graph),
never of buffer numbers: the same model compiled with the same settings gives
the same ids, so a later job can name them in params.unfuse.

Undoing (Undo): a fuse- id makes Scheduler.can_fuse refuse any merge that
would put two of its members into one node again (members stay free to fuse
with others); a group- id makes the C++ backend end its kernel group before a
node whose members belong to the group when the group open so far holds
another of them.  Both read the active InductorChoices object (V.choices), an
instance of UnfuseChoices installed for the compile with
V.set_choices_handler and named in the compile's options as
inductor_choices_class, whose uuid() carries the ids: the FX graph cache keys
the counterfactual compile apart from the unmodified one.

Everything here reads Inductor internals; feature_check() says whether the
installed PyTorch has each piece, and a PyTorch without one gets a clear
"unsupported" for the counterfactual instead of a crash.
"""

import hashlib
import re

ID_RE = re.compile(r"^(fuse|group)-[0-9a-f]{12}$")
UNFUSE_MAX = 64


class Unsupported(Exception):
    """This PyTorch lacks a piece the undo needs; the message says which."""


class UnknownId(ValueError):
    """params.unfuse names an id the unmodified compile did not make."""


def feature_check():
    """(True, "") when this PyTorch has every hook used here, else (False, why)."""
    try:
        import torch._inductor.config as cfg
        from torch._inductor.choices import InductorChoices
        from torch._inductor.scheduler import BaseSchedulerNode, Scheduler
        from torch._inductor.virtualized import V
    except ImportError as e:
        return False, "torch._inductor lacks a module the undo needs: %s" % e
    missing = []
    if not hasattr(V, "set_choices_handler"):
        missing.append("V.set_choices_handler")
    if not hasattr(cfg, "inductor_choices_class"):
        missing.append("config.inductor_choices_class")
    if not callable(getattr(InductorChoices, "can_fuse", None)):
        missing.append("InductorChoices.can_fuse")
    for name in ("can_fuse", "fuse_two_nodes", "score_fusion_memory"):
        if not callable(getattr(Scheduler, name, None)):
            missing.append("Scheduler." + name)
    if not callable(getattr(BaseSchedulerNode, "get_nodes", None)):
        missing.append("BaseSchedulerNode.get_nodes")
    try:
        from torch._inductor.codegen.cpp import CppScheduling
        for name in ("codegen_node", "define_kernel", "flush"):
            if not callable(getattr(CppScheduling, name, None)):
                missing.append("CppScheduling." + name)
    except ImportError:
        missing.append("torch._inductor.codegen.cpp")
    if missing:
        return False, "this PyTorch (%s) has no %s" % (_torch_version(), ", ".join(missing))
    return True, ""


def _torch_version():
    import torch
    return torch.__version__


# ---- identities ----


def base_key(snode):
    """One scheduler node's identity: the sorted names of the post-grad FX
    nodes its IR node came from (call_function origins), else its buffer
    name."""
    ir = getattr(snode, "node", None)
    names = sorted(o.name for o in (getattr(ir, "origins", None) or ())
                   if getattr(o, "op", "") == "call_function")
    return ",".join(names) if names else "buffer:" + snode.get_name()


def _bases(node):
    return [n for n in node.get_nodes() if not _is_nop(n)]


def _is_nop(n):
    return type(n).__name__ == "NopKernelSchedulerNode"


def make_id(prefix, graph, keys):
    h = hashlib.sha1(("%s|%d|" % (prefix, graph) + "\n".join(sorted(keys))).encode())
    return "%s-%s" % (prefix, h.hexdigest()[:12])


def _member(snode):
    ir = getattr(snode, "node", None)
    origins = [o for o in (getattr(ir, "origins", None) or ())
               if getattr(o, "op", "") == "call_function"]
    return {"key": base_key(snode), "buffer": snode.get_name(),
            "aten_ops": sorted({str(o.target) for o in origins}),
            "reduction": bool(snode.is_reduction()),
            "template": bool(snode.is_template())}


# ---- the active choices: what to refuse ----


def _choices_class():
    from torch._inductor.choices import InductorChoices

    class UnfuseChoices(InductorChoices):
        """Inductor's default heuristics, except that it refuses the merges that
        would rebuild the undone decisions (see the module comment)."""

        def __init__(self, ids=(), fuse_sets=(), group_sets=()):
            super().__init__()
            self.fb_ids = tuple(sorted(ids))
            self.fb_fuse = [frozenset(s) for s in fuse_sets]
            self.fb_group = [frozenset(s) for s in group_sets]

        def uuid(self):
            return ("fusionbench-unfuse-1",) + self.fb_ids

        def can_fuse(self, scheduler, node1, node2, shared_data_score):
            if refuses(self, node1, node2):
                return False
            return InductorChoices.can_fuse(scheduler, node1, node2, shared_data_score)

    return UnfuseChoices


def refuses(choices, node1, node2):
    """Whether merging node1 and node2 would put two members of an undone
    fuse- decision together."""
    sets = getattr(choices, "fb_fuse", None)
    if not sets:
        return False
    a = {base_key(n) for n in node1.get_nodes()}
    b = {base_key(n) for n in node2.get_nodes()}
    return any(a & s and b & s for s in sets)


class Undo:
    """The compile-time state of one counterfactual: fuse_sets and group_sets
    are the member keys of the decisions to undo.  Enter around the compile."""

    def __init__(self, ids, fuse_sets, group_sets):
        cls = _choices_class()
        self.ids = list(ids)
        self.choices = cls(ids, fuse_sets, group_sets)
        self.factory = _Factory(self.choices)
        self.ctx = None

    def options(self):
        """torch.compile options that key the FX graph cache by the ids."""
        return {"inductor_choices_class": self.factory}

    def __enter__(self):
        from torch._inductor.virtualized import V

        self.ctx = V.set_choices_handler(self.choices)
        self.ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self.ctx.__exit__(*exc)
        return False


class _Factory:
    """config.inductor_choices_class: a callable returning the choices object
    (a callable object, not a lambda, so that its repr is stable)."""

    def __init__(self, choices):
        self.choices = choices

    def __call__(self):
        return self.choices

    def __repr__(self):
        return "fusionbench-unfuse(%s)" % ",".join(self.choices.fb_ids)


# ---- recording ----


class Recorder:
    """What one compile decided, graph by graph.  Recorder.current is the one
    the hooks write to (set by start())."""

    current = None

    def __init__(self):
        self.graphs = []  # per compiled graph: {"final": [...], "steps": [...], "kernels": {}}

    def start(self):
        install_hooks()
        Recorder.current = self

    def stop(self):
        if Recorder.current is self:
            Recorder.current = None

    def _graph(self):
        if not self.graphs or self.graphs[-1].get("done"):
            self.graphs.append({"final": [], "steps": [], "kernels": [], "groups": {}})
        return self.graphs[-1]

    # hooks
    def on_merge(self, sched, node1, node2):
        try:
            score = sched.score_fusion_memory(node1, node2)
            score = int(score[0] if isinstance(score, tuple) else score)
        except Exception:  # a prediction we cannot read is left unknown
            score = None
        vertical = bool(node1.get_operation_names() & getattr(node2, "ancestors", set()))
        self._graph()["steps"].append({
            "a": {base_key(n) for n in node1.get_nodes()},
            "b": {base_key(n) for n in node2.get_nodes()},
            "score": score, "vertical": vertical})

    def on_scheduled(self, sched):
        g = self._graph()
        # whether the graph's convolutions run channels-last (Inductor's
        # layout optimization, GraphLowering.decide_layout_opt): a choice of
        # the compile beside its fusions, the explanation switches it off
        try:
            from torch._inductor.virtualized import V
            g["layout_opt"] = bool(getattr(V.graph, "layout_opt", False))
        except Exception:  # no graph being lowered: unknown
            g["layout_opt"] = None
        for node in sched.nodes:
            bases = _bases(node)
            if bases:
                g["final"].append({"members": [_member(n) for n in bases],
                                   "template": bool(node.is_template())})
        g["done"] = True

    def on_kernel(self, name, nodes, finals=None, nbytes=None):
        """A generated kernel: its name, the scheduler nodes it computes, the
        C++ kernel group's fused nodes (finals) and, for a Triton kernel, the
        bytes Inductor estimates it reads and writes (nbytes; else the
        scheduler's count, node_costs)."""
        if not self.graphs:
            return
        g = self.graphs[-1]
        keys = set()
        for n in nodes:
            if hasattr(n, "get_nodes"):
                keys.update(base_key(b) for b in n.get_nodes())
        sched_bytes, flops = node_costs(nodes)
        g["kernels"].append({"name": name, "keys": keys,
                             "bytes": nbytes if nbytes is not None else sched_bytes,
                             "flops": flops})
        if finals and len(finals) >= 2:
            g["groups"][name] = [list(f) for f in finals]

    def decisions(self):
        """[{id, kind, graph, members, kernel, predicted_shared_bytes, merges}],
        fuse- decisions first, in Inductor's order, then group- ones."""
        out = []
        for gi, g in enumerate(self.graphs):
            for f in g["final"]:
                if len(f["members"]) < 2:
                    continue
                keys = [m["key"] for m in f["members"]]
                steps = [s for s in g["steps"] if (s["a"] | s["b"]) <= set(keys)]
                out.append({"id": make_id("fuse", gi, keys), "kind": _kind(f, steps),
                            "graph": gi, "members": f["members"],
                            "kernel": _kernel_of(g, keys),
                            "predicted_shared_bytes": _score_sum(steps),
                            "merges": len(steps)})
            for name, finals in g["groups"].items():
                keys = [k for f in finals for k in f]
                out.append({"id": make_id("group", gi, keys), "kind": "kernel_group",
                            "graph": gi, "members": [{"key": k} for k in keys],
                            "loop_nests": len(finals), "kernel": name,
                            "predicted_shared_bytes": None, "merges": len(finals) - 1})
        return out

    def final_nodes(self):
        return sum(len(g["final"]) for g in self.graphs)


# The ops of a loop body that compute nothing: memory, indexing, constants,
# casts and the body's own plumbing.  Every other op (add, exp, where, a
# reduction's combine, ...) counts one FLOP per element it runs on, as the
# native engine's cost model counts an elementwise op (docs/EXPLAIN.md).
NON_FLOP_OPS = frozenset((
    "load", "store", "store_reduction", "output", "constant", "index_expr",
    "indirect_indexing", "to_dtype", "to_dtype_bitcast", "masked", "load_seed",
    "get_index", "set_indirect", "check_bounds", "device_assert_async", "placeholder",
    "partial_accumulate"))


def _hint(expr):
    from torch._inductor.virtualized import V
    sv = V.graph.sizevars
    f = getattr(sv, "optimization_hint", None) or sv.size_hint
    return int(f(expr, fallback=0))


def node_flops(snode):
    """One scheduler node's FLOPs per call: a template's (a GEMM or a
    convolution) as Inductor's own FLOP counter counts its origin op; a loop
    nest's as its traced body's computing ops (every op outside NON_FLOP_OPS)
    times the elements it iterates (pointwise and reduction ranges).  None when
    it cannot be read."""
    if snode.is_template():
        f = snode.estimate_flops()
        return int(f) if f is not None else None
    counts = getattr(getattr(snode, "_body", None), "op_counts", None)
    numel = _numel(snode)
    if counts is None or numel is None:
        return None
    return numel * sum(c for op, c in counts.items() if op not in NON_FLOP_OPS)


def _numel(snode):
    """The elements a loop nest iterates (pointwise and reduction ranges), or
    None (a template, an extern call)."""
    if snode.is_template() or not hasattr(snode, "get_ranges"):
        return None
    import sympy
    ranges = snode.get_ranges()
    n = _hint(sympy.Mul(*ranges[0], *ranges[1]))
    return n if n > 0 else None


def _buffer_bytes(name):
    """A buffer's (or graph input's) size in bytes, or None where it is not a
    plain tensor (a mutation's marker, a multi-output's tuple)."""
    import sympy
    from torch._inductor.utils import get_dtype_size
    from torch._inductor.virtualized import V
    buf = V.graph.name_to_buffer.get(name)
    if buf is None:
        buf = V.graph.graph_inputs.get(name)
    if buf is None:
        return None, None
    try:
        n = _hint(sympy.Mul(*buf.get_size()))
        return n, get_dtype_size(buf.get_dtype())
    except Exception:  # a layout that is not a plain tensor's
        return None, None


def kernel_traffic(bases):
    """The bytes one call of a kernel computing scheduler nodes `bases` must
    move: each buffer it reads or writes once (at most the elements the nodes
    touching it iterate: a slice is not the whole buffer), except a buffer it
    both writes and is the only reader of, which stays inside (a fused
    kernel's intermediate, a local buffer of a C++ loop nest).  Inductor's own
    rule for a fused node (Scheduler's get_read_write_buffer_accesses) over a
    whole kernel, since the C++ backend hands a kernel its loop nests' nodes
    one by one."""
    inside = {id(b) for b in bases}
    sched = bases[0].scheduler
    touched, written = {}, set()  # buffer -> the most elements a node touching it iterates
    for b in bases:
        n = _numel(b)  # None: the whole buffer
        for dep in b.read_writes.reads | b.read_writes.writes:
            had = touched.get(dep.name, 0)
            touched[dep.name] = None if n is None or had is None else max(had, n)
        written |= {dep.name for dep in b.read_writes.writes}
    total = 0
    for name, n in touched.items():
        users = sched.name_to_buf[name].users if name in sched.name_to_buf else ()
        if name in written and users and all(id(u.node) in inside for u in users):
            continue  # produced and consumed in the kernel
        numel, size = _buffer_bytes(name)
        if numel is not None:
            total += size * (numel if n is None else min(numel, n))
    return total


def node_costs(nodes):
    """(bytes, flops) of one generated kernel per call, over the scheduler
    nodes it computes: bytes by kernel_traffic, FLOPs by node_flops summed.
    Either is None where a node cannot say, never an error (a figure, not the
    compile)."""
    bases = [b for n in nodes if hasattr(n, "get_nodes") for b in _bases(n)]
    if not bases:
        return None, None
    try:
        nbytes = kernel_traffic(bases)
    except Exception:
        nbytes = None
    flops = 0
    for b in bases:
        try:
            f = node_flops(b)
        except Exception:
            f = None
        flops = None if flops is None or f is None else flops + f
    return nbytes, flops


def kernel_costs(graphs):
    """{kernel name: {"bytes", "flops"}} per call of every kernel the compile
    generated (Recorder.graphs).  Inductor hands a kernel whose source it has
    already generated the first one's name, so one name is often defined
    again with the same counts (it then runs once per call site); a name
    defined with different counts has none, since its profile row sums
    calls of both."""
    out = {}
    for g in graphs:
        for k in g["kernels"]:
            c = {"bytes": k.get("bytes"), "flops": k.get("flops")}
            if out.get(k["name"], c) != c:
                c = {"bytes": None, "flops": None}
            out[k["name"]] = c
    return out


def _score_sum(steps):
    scores = [s["score"] for s in steps]
    return None if not scores or any(s is None for s in scores) else sum(scores)


def _kernel_of(g, keys):
    want = set(keys)
    for k in g["kernels"]:
        if want <= k["keys"]:
            return k["name"]
    return None


def _kind(final, steps):
    """The kind of merge: template (epilogue or prologue), reduction with its
    pointwise neighbours, vertical or horizontal."""
    ms = final["members"]
    if final["template"] or any(m["template"] for m in ms):
        first = next(i for i, m in enumerate(ms) if m["template"]) if any(
            m["template"] for m in ms) else 0
        return "prologue" if first > 0 else "epilogue"
    red = [m["reduction"] for m in ms]
    if any(red) and not all(red):
        return "reduction"
    return "vertical" if any(s["vertical"] for s in steps) else "horizontal"


# ---- the hooks (installed once per process) ----

_hooks = {"installed": False}


def install_hooks():
    """Wraps Scheduler.can_fuse / fuse_two_nodes / __init__ and the C++
    backend's codegen_node / define_kernel, and Triton's define_kernel: each
    wrapper reads Recorder.current and V.choices and otherwise does what the
    original does."""
    if _hooks["installed"]:
        return
    ok, why = feature_check()
    if not ok:
        raise Unsupported(why)
    from torch._inductor.codegen.cpp import CppScheduling
    from torch._inductor.scheduler import Scheduler
    from torch._inductor.virtualized import V

    can_fuse = Scheduler.can_fuse

    def can_fuse_hook(self, node1, node2, *a, **kw):
        if refuses(V.choices, node1, node2):
            return False
        return can_fuse(self, node1, node2, *a, **kw)

    fuse_two = Scheduler.fuse_two_nodes

    def fuse_two_hook(self, node1, node2, *a, **kw):
        if Recorder.current is not None:
            Recorder.current.on_merge(self, node1, node2)
        return fuse_two(self, node1, node2, *a, **kw)

    init = Scheduler.__init__

    def init_hook(self, *a, **kw):
        init(self, *a, **kw)
        if Recorder.current is not None:
            Recorder.current.on_scheduled(self)

    codegen_node = CppScheduling.codegen_node

    def codegen_node_hook(self, node):
        keys = {base_key(n) for n in node.get_nodes()}
        open_keys = set(getattr(self, "_fb_open_keys", ()))
        for s in getattr(V.choices, "fb_group", ()):
            if keys & s and open_keys & s:
                self.flush()
                break
        if getattr(self, "_fb_group", None) is not self.kernel_group:
            self._fb_group, self._fb_finals, self._fb_open_keys = self.kernel_group, [], set()
        self._fb_finals.append(sorted(keys))
        self._fb_open_keys |= keys
        return codegen_node(self, node)

    cpp_define = CppScheduling.define_kernel

    def cpp_define_hook(self, src_code, nodes, *a, **kw):
        name = cpp_define(self, src_code, nodes, *a, **kw)
        if Recorder.current is not None:
            finals = self._fb_finals if getattr(self, "_fb_group", None) is \
                self.kernel_group else None
            # a template's kernel (codegen_template) is not the open group's
            if finals and {k for f in finals for k in f} != {
                    base_key(b) for n in nodes for b in n.get_nodes()}:
                finals = None
            Recorder.current.on_kernel(name, nodes, finals)
        return name

    Scheduler.can_fuse = can_fuse_hook
    Scheduler.fuse_two_nodes = fuse_two_hook
    Scheduler.__init__ = init_hook
    CppScheduling.codegen_node = codegen_node_hook
    CppScheduling.define_kernel = cpp_define_hook
    try:
        from torch._inductor.codegen.triton import TritonScheduling
        triton_define = TritonScheduling.define_kernel

        def triton_define_hook(self, src_code, node_schedule, *a, **kw):
            name = triton_define(self, src_code, node_schedule, *a, **kw)
            if Recorder.current is not None:
                Recorder.current.on_kernel(name, [n for n in node_schedule
                                                  if hasattr(n, "get_nodes")],
                                           nbytes=kernel_bytes(a[0] if a else kw.get("kernel")))
            return name

        TritonScheduling.define_kernel = triton_define_hook
    except ImportError:  # no Triton: CPU kernels only
        pass
    _hooks["installed"] = True


def kernel_bytes(kernel):
    """The bytes a generated Triton kernel reads and writes, as Inductor
    estimates them for its own bandwidth figures (the kernel's
    estimate_kernel_num_bytes: each argument's buffer once, a sliced one by
    its slices), or None where this PyTorch has no such estimate."""
    try:
        n = kernel.estimate_kernel_num_bytes()
        return int(n) if n is not None else None
    except Exception:  # an older or newer kernel class: no figure, never a failed compile
        return None


# ---- undo requests ----


def check_ids(ids):
    """params.unfuse's form (the server checks it at submit too): a list of
    1..UNFUSE_MAX distinct ids matching ID_RE.  Returns a message or None."""
    if not isinstance(ids, list) or not 1 <= len(ids) <= UNFUSE_MAX:
        return "params.unfuse must be an array of 1 to %d fusion ids" % UNFUSE_MAX
    for i, x in enumerate(ids):
        if not isinstance(x, str) or not ID_RE.match(x):
            return "params.unfuse[%d] must be a fusion id (fuse-<12 hex> or group-<12 hex>)" % i
        if x in ids[:i]:
            return "params.unfuse[%d] repeats %s" % (i, x)
    return None


def undo_for(ids, decisions):
    """The Undo for ids against the decisions of the unmodified compile;
    UnknownId naming the first id that names no decision."""
    by_id = {d["id"]: d for d in decisions}
    for i, x in enumerate(ids):
        if x not in by_id:
            raise UnknownId("params.unfuse[%d]: %s names no fusion of the compiled model "
                             "(it has %d: %s)" % (i, x, len(decisions), _some(by_id)))
    fuse = [{m["key"] for m in by_id[x]["members"]} for x in ids if x.startswith("fuse-")]
    group = [{m["key"] for m in by_id[x]["members"]} for x in ids if x.startswith("group-")]
    return Undo(ids, fuse, group)


def _some(by_id, n=6):
    ids = list(by_id)
    return ", ".join(ids[:n]) + (", ..." if len(ids) > n else "") if ids else "none"


def verify(ids, before, after, before_counts, after_counts):
    """Whether each undo took: its id gone from the counterfactual's decisions
    and the counterfactual has more kernels (fuse-: more final scheduler nodes,
    i.e. loop nests or Triton kernels; group-: more generated kernels).
    [{id, took, reason}]."""
    have = {d["id"] for d in after}
    out = []
    for x in ids:
        what = "final_nodes" if x.startswith("fuse-") else "generated_kernels"
        rose = after_counts[what] > before_counts[what]
        if x in have:
            out.append({"id": x, "took": False,
                        "reason": "the counterfactual compile made the same fusion again"})
        elif not rose:
            out.append({"id": x, "took": False,
                        "reason": "%s did not rise (%d, unmodified %d)" % (
                            what, after_counts[what], before_counts[what])})
        else:
            out.append({"id": x, "took": True, "reason": "%s %d -> %d" % (
                what, before_counts[what], after_counts[what])})
    return out
