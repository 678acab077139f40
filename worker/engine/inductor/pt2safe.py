"""A torch.export archive (.pt2) read without running anything in it.

`torch.export.load` is not safe on an upload: its tensors may be pickled (a
pickle runs what it names), its sample inputs are unpickled with a fallback to
the general unpickler, its graph's symbolic sizes are parsed by sympy's
`sympify` (which evaluates Python), and a node's target is resolved by walking
attributes from `torch` or `math` (so `torch.os.system` is a target it would
call).  This reader takes the same archive apart itself:

- the zip is read with Python's zipfile, its entries' names, sizes and count
  bounded before anything is read;
- the program's JSON is checked before torch sees it: every node target is an
  ATen or prims operator (or Python's arithmetic on sizes), every symbolic
  expression uses only symbols, integers, arithmetic and sympy's size
  functions, and nothing names a TorchScript object;
- weights and constants are taken only from their raw bytes with the dtype,
  sizes and strides of their JSON description; an entry stored pickled (a
  tensor subclass, a custom object) makes the archive invalid;
- the sample inputs are never read: inputs are made from the program's input
  specs (make_inputs), or taken from a safetensors file the uploader put in
  the archive's extra folder (INPUTS_ENTRY: safetensors is raw bytes and a
  JSON header, nothing to unpickle), checked against the specs.

Then torch's own deserializer builds the ExportedProgram from the checked JSON
and the tensors (given as dicts, so it unpickles nothing).  Every refusal is an
Invalid naming what is wrong.
"""

import json
import re
import zipfile

import torch

MAX_ENTRIES = 200000
MAX_JSON_BYTES = 256 << 20
MAX_EXPR_CHARS = 4000
MAX_TENSOR_DIMS = 16


class Invalid(Exception):
    """The archive is not one this worker runs; str() says why."""


# ---- the zip ----


def _consts():
    from torch.export.pt2_archive import constants as c

    return c


class Archive:
    """The zip, its entries under their one root folder."""

    def __init__(self, path, max_bytes):
        try:
            self.zf = zipfile.ZipFile(path)
        except zipfile.BadZipFile as e:
            raise Invalid("not a zip archive (a torch.export .pt2 is one): %s" % e)
        except OSError as e:
            raise Invalid("unreadable archive: %s" % e)
        infos = self.zf.infolist()
        if len(infos) > MAX_ENTRIES:
            raise Invalid("%d entries in the archive, over %d" % (len(infos), MAX_ENTRIES))
        total = sum(i.file_size for i in infos)
        if total > max_bytes:
            raise Invalid("the archive unpacks to %d bytes, over the limit of %d" %
                          (total, max_bytes))
        roots = {i.filename.split("/", 1)[0] for i in infos}
        if len(roots) != 1 or not all("/" in i.filename for i in infos):
            raise Invalid("not a torch.export archive: its entries are not under one folder")
        self.root = roots.pop() + "/"
        self.entries = {i.filename[len(self.root):]: i for i in infos}

    def has(self, name):
        return name in self.entries

    def read(self, name, limit=None):
        i = self.entries.get(name)
        if i is None:
            raise Invalid("the archive has no %s" % name)
        if limit is not None and i.file_size > limit:
            raise Invalid("%s is %d bytes, over %d" % (name, i.file_size, limit))
        try:
            return self.zf.read(i)
        except (zipfile.BadZipFile, OSError, EOFError, ValueError) as e:
            raise Invalid("%s cannot be read (a truncated or corrupt archive): %s" % (name, e))

    def json(self, name):
        try:
            return json.loads(self.read(name, MAX_JSON_BYTES))
        except (ValueError, UnicodeDecodeError) as e:
            raise Invalid("%s is not valid JSON: %s" % (name, e))


# ---- the program's JSON, checked ----

# Operators a node may call: torch.ops.<namespace>.<op>.<overload>.
OP_NAMESPACES = ("aten", "prims")
_OP = re.compile(r"^torch\.ops\.([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\."
                 r"([A-Za-z_][A-Za-z0-9_]*)$")
# Python's arithmetic on sizes (symbolic shapes), as torch.export writes it.
SIZE_OPS = {"_operator." + n for n in (
    "getitem", "add", "sub", "mul", "floordiv", "truediv", "mod", "neg", "pow", "eq", "ne",
    "lt", "le", "gt", "ge", "and_", "or_", "not_")} | {
    "torch.sym_float", "torch.sym_int", "torch.sym_max", "torch.sym_min", "torch.sym_not",
    "torch.sym_ite", "torch.sym_sqrt", "math.ceil", "math.floor", "math.trunc", "math.sqrt"}


# ATen operators that reach outside the process: never called from an upload.
# (aten.from_file reads any file the worker may read into a tensor.)
DENIED_OPS = {"from_file", "_print"}


def check_target(t):
    """Raises Invalid unless t is an operator this reader lets a node call."""
    if t in SIZE_OPS:
        return
    m = _OP.match(t) if isinstance(t, str) else None
    if m is None:
        raise Invalid("a node calls %r, which is not an ATen or prims operator" % (t,))
    if m.group(1) == "aten" and m.group(2) in DENIED_OPS:
        raise Invalid("a node calls aten.%s, which reaches outside the process; an uploaded "
                      "model may not" % m.group(2))
    if m.group(1) not in OP_NAMESPACES:
        raise Invalid("the model needs the operator %s.%s from the library %r, which this "
                      "worker does not have (it runs aten and prims operators)" % (
                          m.group(1), m.group(2), m.group(1)))


# sympy names a size expression may use (the deserializer's size functions and
# the logic and comparisons torch writes); anything else must be a symbol.
SYMPY_NAMES = frozenset((
    "FloorDiv", "ModularIndexing", "Where", "PythonMod", "Mod", "CleanDiv", "CeilToInt",
    "FloorToInt", "CeilDiv", "LShift", "RShift", "PowByNatural", "FloatPow", "FloatTrueDiv",
    "IntTrueDiv", "IsNonOverlappingAndDenseIndicator", "TruncToFloat", "TruncToInt",
    "RoundToInt", "RoundDecimal", "ToFloat", "Identity", "Max", "Min", "Abs", "floor",
    "ceiling", "sqrt", "Eq", "Ne", "Lt", "Le", "Gt", "Ge", "And", "Or", "Not", "Piecewise",
    "oo", "zoo", "nan", "True", "False", "true", "false", "Integer", "Rational", "Float",
    # Symbol('s77', positive=True, integer=True): a symbol with its assumptions
    "Symbol", "positive", "negative", "nonnegative", "nonpositive", "integer", "real",
    "finite", "zero", "nonzero", "even", "odd", "rational", "commutative"))
_SYMBOL = re.compile(r"^[a-z]{1,8}[0-9]{1,9}$")
# identifiers, numbers, a quoted symbol name (Symbol's first argument), operators
_TOKEN = re.compile(r"\s*(?:([A-Za-z_][A-Za-z0-9_]*)|([0-9]+(?:\.[0-9]+)?(?:e[-+]?[0-9]+)?)|"
                    r"('[a-z]{1,8}[0-9]{1,9}'|\"[a-z]{1,8}[0-9]{1,9}\")|"
                    r"(\*\*|//|<=|>=|==|!=|[-+*/%(),<>&|~=]))")


def check_expr(s):
    """Raises Invalid unless s is a size expression made only of symbols
    (s0, u1, ...), numbers, arithmetic, comparisons, SYMPY_NAMES and quoted
    symbol names: what sympify evaluates as Python, so nothing else may pass
    (no attribute, no subscript, no other name, no other string)."""
    if not isinstance(s, str) or len(s) > MAX_EXPR_CHARS:
        raise Invalid("a symbolic size is not a string of at most %d characters" %
                      MAX_EXPR_CHARS)
    pos = 0
    while pos < len(s):
        m = _TOKEN.match(s, pos)
        if m is None or m.end() == pos:
            if s[pos:].strip() == "":
                break
            raise Invalid("a symbolic size has %r, which is not arithmetic on sizes: %r" % (
                s[pos:pos + 20], s[:80]))
        ident = m.group(1)
        if ident is not None and ident not in SYMPY_NAMES and not _SYMBOL.match(ident):
            raise Invalid("a symbolic size names %r, which is neither a size symbol nor a "
                          "size function: %r" % (ident, s[:80]))
        pos = m.end()


def check_program(obj):
    """Walks the program's JSON: node targets (check_target), symbolic
    expressions (check_expr), no TorchScript objects.  Returns the number of
    nodes seen."""
    nodes = 0
    stack = [obj]
    while stack:
        x = stack.pop()
        if isinstance(x, dict):
            if "target" in x:  # only a graph node has one (schema.Node)
                check_target(x["target"])
                nodes += 1
            if "expr_str" in x:
                check_expr(x["expr_str"])
            for k in ("as_custom_obj", "custom_obj", "as_custom_objs"):
                if k in x and x[k] is not None:
                    raise Invalid("the model holds a TorchScript custom object (%s), which "
                                  "this worker does not load" % k)
            stack.extend(x.values())
        elif isinstance(x, list):
            stack.extend(x)
    return nodes


# ---- tensors from raw bytes ----

_DTYPES = None


def _dtype(code):
    global _DTYPES
    if _DTYPES is None:
        from torch._export.serde.serialize import _SERIALIZE_TO_TORCH_DTYPE

        _DTYPES = _SERIALIZE_TO_TORCH_DTYPE
    from torch._export.serde.schema import ScalarType

    try:
        dt = _DTYPES[ScalarType(code)]
    except (ValueError, KeyError):
        raise Invalid("a tensor has the unknown dtype code %r" % (code,))
    if dt.is_complex or dt in (torch.uint16, torch.uint32, torch.uint64):
        raise Invalid("a tensor has the dtype %s, which this worker does not run" % dt)
    return dt


def _int(v, what):
    """A SymInt of a stored tensor: it must be a plain integer."""
    if isinstance(v, dict) and set(v) == {"as_int"} and isinstance(v["as_int"], int):
        return v["as_int"]
    raise Invalid("%s is not a plain integer (%r)" % (what, v))


_PAYLOAD = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")


def _payloads(ar, config_name, folder, kind):
    """{fqn: tensor} from a weights or constants config: raw bytes only."""
    c = _consts()
    cfg = ar.json(config_name).get("config")
    if not isinstance(cfg, dict):
        raise Invalid("%s has no config object" % config_name)
    storages, out = {}, {}
    for fqn, meta in cfg.items():
        if not isinstance(meta, dict):
            raise Invalid("%s: %s is not an object" % (config_name, fqn))
        path = meta.get("path_name")
        if not isinstance(path, str) or not _PAYLOAD.match(path):
            raise Invalid("%s %s: its payload name %r is not a plain name" % (kind, fqn, path))
        if meta.get("use_pickle"):
            raise Invalid("%s %s is stored pickled (a tensor subclass or a Python object); "
                          "this worker reads only plain tensors, never a pickle" % (kind, fqn))
        if kind == "constant" and not path.startswith(c.TENSOR_CONSTANT_FILENAME_PREFIX):
            raise Invalid("constant %s is a %s, not a tensor; this worker loads no objects" %
                          (fqn, path.rstrip("0123456789_")))
        tm = meta.get("tensor_meta")
        if not isinstance(tm, dict):
            raise Invalid("%s %s has no tensor description" % (kind, fqn))
        dt = _dtype(tm.get("dtype"))
        sizes = [_int(v, "%s %s's size" % (kind, fqn)) for v in tm.get("sizes") or []]
        strides = [_int(v, "%s %s's stride" % (kind, fqn)) for v in tm.get("strides") or []]
        off = _int(tm.get("storage_offset", {"as_int": 0}), "%s %s's offset" % (kind, fqn))
        if len(sizes) != len(strides) or len(sizes) > MAX_TENSOR_DIMS or \
                any(v < 0 for v in sizes + strides) or off < 0:
            raise Invalid("%s %s: sizes %s, strides %s and offset %d do not describe a tensor"
                          % (kind, fqn, sizes, strides, off))
        if path not in storages:
            raw = ar.read(folder + path)
            es = torch.empty((), dtype=dt).element_size()
            if len(raw) % es:
                raise Invalid("%s %s: %d bytes are not whole %s elements" % (
                    kind, fqn, len(raw), dt))
            storages[path] = torch.frombuffer(bytearray(raw), dtype=dt) if raw else \
                torch.empty(0, dtype=dt)
        flat = storages[path]
        if flat.dtype != dt:
            raise Invalid("%s %s reads %s as %s, after another entry read it as %s" % (
                kind, fqn, path, dt, flat.dtype))
        numel = 1
        for s in sizes:
            numel *= s
        last = off + sum((s - 1) * st for s, st in zip(sizes, strides)) if numel else 0
        if numel and last >= flat.numel():
            if flat.numel() == 0:  # torch writes a fake or empty tensor with no bytes
                flat = torch.zeros(last + 1, dtype=dt)
            else:
                raise Invalid("%s %s reaches element %d of a payload of %d" % (
                    kind, fqn, last, flat.numel()))
        t = torch.as_strided(flat, sizes, strides, off)
        out[fqn] = torch.nn.Parameter(t, requires_grad=False) if meta.get("is_param") else t
    return out


# ---- the program ----


def load(path, max_bytes=8 << 30):
    """(ExportedProgram, facts) of the archive at path, or Invalid.  facts:
    model_name, nodes, schema_version, archive_version."""
    c = _consts()
    ar = Archive(path, max_bytes)
    fmt = ar.read(c.ARCHIVE_FORMAT_PATH, 64).decode("utf-8", "replace").strip() \
        if ar.has(c.ARCHIVE_FORMAT_PATH) else None
    if fmt != c.ARCHIVE_FORMAT_VALUE:
        raise Invalid("not a torch.export archive (no %s saying %r)" % (
            c.ARCHIVE_FORMAT_PATH, c.ARCHIVE_FORMAT_VALUE))
    models = sorted(n[len(c.MODELS_DIR):-len(".json")] for n in ar.entries
                    if n.startswith(c.MODELS_DIR) and n.endswith(".json"))
    if not models:
        raise Invalid("the archive holds no exported program (%s*.json); an archive of "
                      "AOTInductor or ExecuTorch output alone is not one" % c.MODELS_DIR)
    if len(models) > 1:
        raise Invalid("the archive holds %d exported programs (%s); upload one" % (
            len(models), ", ".join(models[:5])))
    name = models[0]
    prog = ar.json(c.MODELS_FILENAME_FORMAT.format(name))
    if not isinstance(prog, dict):
        raise Invalid("the exported program is not a JSON object")
    nodes = check_program(prog)
    legacy = c.WEIGHTS_DIR + name + ".pt"
    if ar.has(legacy) or ar.has(c.CONSTANTS_DIR + name + ".pt"):
        raise Invalid("the archive stores its weights as one pickle (an old torch.export "
                      "format); save it again with torch.export.save from PyTorch 2.8 or later")
    state = _payloads(ar, c.WEIGHTS_CONFIG_FILENAME_FORMAT.format(name), c.WEIGHTS_DIR,
                      "weight")
    consts = _payloads(ar, c.CONSTANTS_CONFIG_FILENAME_FORMAT.format(name), c.CONSTANTS_DIR,
                       "constant")
    from torch._export.serde import schema
    from torch._export.serde.serialize import ExportedProgramDeserializer, _dict_to_dataclass

    try:
        sep = _dict_to_dataclass(schema.ExportedProgram, prog)
    except (AssertionError, KeyError, TypeError, ValueError) as e:
        raise Invalid("the exported program does not follow torch.export's schema: %s" % e)
    try:
        ep = ExportedProgramDeserializer(None).deserialize(sep, state, consts, None)
    except Exception as e:  # the schema version, a missing tensor, an op's signature
        raise Invalid("the exported program cannot be rebuilt: %s: %s" % (
            type(e).__name__, str(e)[:500]))
    sv = prog.get("schema_version") or {}
    return ep, {"model_name": name, "nodes": nodes, "inputs": _inputs_file(ar),
                "schema_version": "%s.%s" % (sv.get("major"), sv.get("minor")),
                "archive_version": ar.read(c.ARCHIVE_VERSION_PATH, 64).decode(
                    "utf-8", "replace").strip() if ar.has(c.ARCHIVE_VERSION_PATH) else None}


# ---- inputs uploaded with the program ----

# Where an uploader's inputs live in the archive (the client puts them there).
INPUTS_ENTRY = "extra/inputs.safetensors"
_ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
              "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
              "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}


def parse_safetensors(raw, what):
    """{name: tensor} of a safetensors file's bytes, every size checked."""
    if len(raw) < 8:
        raise Invalid("%s is not a safetensors file (%d bytes)" % (what, len(raw)))
    n = int.from_bytes(raw[:8], "little")
    if n > min(len(raw) - 8, MAX_JSON_BYTES):
        raise Invalid("%s: its header length %d is out of the file" % (what, n))
    try:
        head = json.loads(raw[8:8 + n])
    except (ValueError, UnicodeDecodeError) as e:
        raise Invalid("%s: its header is not JSON: %s" % (what, e))
    if not isinstance(head, dict):
        raise Invalid("%s: its header is not a JSON object" % what)
    data, out = memoryview(raw)[8 + n:], {}
    for name, meta in head.items():
        if name == "__metadata__":
            continue
        if not isinstance(meta, dict) or meta.get("dtype") not in _ST_DTYPES:
            raise Invalid("%s: tensor %s has no dtype this worker reads (%s)" % (
                what, name, (meta or {}).get("dtype") if isinstance(meta, dict) else meta))
        dt, shape, offs = _ST_DTYPES[meta["dtype"]], meta.get("shape"), meta.get("data_offsets")
        if not (isinstance(shape, list) and len(shape) <= MAX_TENSOR_DIMS and
                all(isinstance(d, int) and d >= 0 for d in shape) and isinstance(offs, list) and
                len(offs) == 2 and all(isinstance(o, int) for o in offs) and
                0 <= offs[0] <= offs[1] <= len(data)):
            raise Invalid("%s: tensor %s's shape %s or offsets %s are out of the file" % (
                what, name, shape, offs))
        numel = 1
        for d in shape:
            numel *= d
        es = torch.empty((), dtype=dt).element_size()
        if offs[1] - offs[0] != numel * es:
            raise Invalid("%s: tensor %s has %d bytes for %d %s elements" % (
                what, name, offs[1] - offs[0], numel, dt))
        buf = bytearray(data[offs[0]:offs[1]])
        t = torch.frombuffer(buf, dtype=dt) if buf else torch.empty(0, dtype=dt)
        out[name] = t.reshape(shape)
    return out


def _inputs_file(ar):
    """The uploader's inputs ({name: tensor}), or None when the archive has none."""
    return parse_safetensors(ar.read(INPUTS_ENTRY), "the uploaded inputs (%s)" % INPUTS_ENTRY) \
        if ar.has(INPUTS_ENTRY) else None


def check_inputs(specs, given):
    """The uploaded inputs as a tuple in the program's order, each as the
    program takes it: the same names, dtypes and sizes (the first may differ
    where the export made it dynamic); else Invalid saying which."""
    names = [s["name"] for s in specs]
    extra = sorted(set(given) - set(names))
    if extra:
        raise Invalid("the uploaded inputs have %s, which the program does not take (it takes %s)"
                      % (", ".join(extra[:5]), ", ".join(names)))
    out, b0 = [], None
    for s in specs:
        t = given.get(s["name"])
        if t is None:
            raise Invalid("the uploaded inputs lack %s (the program takes %s)" % (
                s["name"], ", ".join(names)))
        if str(t.dtype).replace("torch.", "") != s["dtype"]:
            raise Invalid("the uploaded input %s is %s; the program takes %s" % (
                s["name"], str(t.dtype).replace("torch.", ""), s["dtype"]))
        shape, want = list(t.shape), s["shape"]
        ok = len(shape) == len(want) and all(
            a == b or (i == 0 and 0 in s["dynamic_dims"] and a >= 1)
            for i, (a, b) in enumerate(zip(shape, want)))
        if not ok or (b0 is not None and shape and shape[0] != b0):
            raise Invalid("the uploaded input %s has shape %s; the program takes %s%s" % (
                s["name"], shape, want, " (the first size dynamic, the same in every input)"
                if 0 in s["dynamic_dims"] else ""))
        b0 = shape[0] if shape else b0
        out.append(t.contiguous())
    return tuple(out)


def repeat_batch(inputs, batch):
    """Each input's samples repeated (or cut) to batch along the first dimension."""
    out = []
    for t in inputs:
        if t.dim() == 0 or t.shape[0] == batch:
            out.append(t)
        else:
            out.append(t[torch.arange(batch) % t.shape[0]].contiguous())
    return tuple(out)


# ---- what the program takes, and inputs for it ----


def _dim(d):
    """(size, dynamic) of one dimension of a fake tensor."""
    if isinstance(d, torch.SymInt):
        hint = d.node.hint if getattr(d.node, "has_hint", lambda: True)() else None
        return (int(hint) if hint is not None else None), True
    return int(d), False


def input_specs(ep):
    """[{name, shape, dtype, dynamic_dims}] of the program's user inputs (in
    order), or Invalid for an input that is not a tensor."""
    from torch.export.graph_signature import InputKind

    phs = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    out = []
    for spec in ep.graph_signature.input_specs:
        if spec.kind != InputKind.USER_INPUT:
            continue
        name = spec.arg.name
        val = phs[name].meta.get("val") if name in phs else None
        if not isinstance(val, torch.Tensor):
            raise Invalid("the input %s is a %s; FusionBench feeds tensors only" % (
                name, type(val).__name__))
        dims = [_dim(d) for d in val.shape]
        if any(s is None for s, _ in dims):
            raise Invalid("the input %s has a size with no example value" % name)
        out.append({"name": name, "shape": [s for s, _ in dims],
                    "dtype": str(val.dtype).replace("torch.", ""),
                    "dynamic_dims": [i for i, (_, dyn) in enumerate(dims) if dyn]})
    return out


def _index_bound(ep, name):
    """The smallest table an integer input indexes (aten.embedding's rows), else 2."""
    bound = None
    for n in ep.graph.nodes:
        if n.op == "call_function" and "embedding" in str(n.target) and len(n.args) >= 2 and \
                getattr(n.args[1], "name", None) == name:
            w = n.args[0].meta.get("val")
            if isinstance(w, torch.Tensor) and w.dim() >= 1:
                rows = int(w.shape[0])
                bound = rows if bound is None else min(bound, rows)
    return bound or 2


def make_inputs(ep, specs, seed=0, batch=None):
    """Inputs for the program: normal(0, 1) floats, integers below the
    smallest table they index, False booleans; seeded.  batch replaces the
    first dimension where it is dynamic."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in specs:
        shape = list(s["shape"])
        if batch is not None and shape and 0 in s["dynamic_dims"]:
            shape[0] = batch
        dt = getattr(torch, s["dtype"])
        if dt.is_floating_point:
            out.append(torch.randn(shape, generator=g).to(dt))
        elif dt == torch.bool:
            out.append(torch.zeros(shape, dtype=dt))
        else:
            out.append(torch.randint(0, _index_bound(ep, s["name"]), shape, generator=g,
                                     dtype=dt))
    return tuple(out)


def op_histogram(ep):
    """{"aten.conv2d.default": count, ...} over the graph and its subgraphs."""
    hist = {}
    for mod in ep.graph_module.modules():
        g = getattr(mod, "graph", None)
        for n in (g.nodes if g is not None else ()):
            if n.op == "call_function":
                t = n.target
                k = str(t) if isinstance(t, torch._ops.OpOverload) else "%s.%s" % (
                    (getattr(t, "__module__", None) or "operator").lstrip("_"),
                    getattr(t, "__name__", t))
                hist[k] = hist.get(k, 0) + 1
    return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))


# ---- preparing: what the worker learns once per upload ----

EAGER_RUNS = 3


def inspect(path, max_bytes=8 << 30, seed=0, native_out=None):
    """The model's info (docs/API-EXTENSIONS.md, "Your own models"): inputs,
    outputs, parameters, the op histogram and an eager run on seeded inputs
    (its median ms of EAGER_RUNS, on the CPU).  Invalid when the archive is
    not one this worker runs or the program fails in eager.  native_out: where
    to write the native form when the native engine can run the program
    (to_native.write_form: its graph, weights, the seeded input and this eager
    output)."""
    import time

    ep, facts = load(path, max_bytes)
    specs = input_specs(ep)
    params = ep.graph_signature.parameters
    sd = ep.state_dict
    n_params = sum(int(sd[p].numel()) for p in params if p in sd)
    p_bytes = sum(int(t.numel()) * t.element_size() for t in sd.values())
    uploaded = facts.get("inputs")
    inputs = check_inputs(specs, uploaded) if uploaded is not None else make_inputs(ep, specs,
                                                                                     seed)
    mod = ep.module()
    times = []
    try:
        with torch.no_grad():
            for _ in range(EAGER_RUNS):
                t0 = time.perf_counter()
                out = mod(*inputs)
                times.append((time.perf_counter() - t0) * 1e3)
    except Exception as e:
        raise Invalid("the program fails in eager on seeded inputs: %s: %s" % (
            type(e).__name__, str(e)[:400]))
    flat = [t for t in torch.utils._pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    if not flat:
        raise Invalid("the program returns no tensor")
    bad = [i for i, t in enumerate(flat) if t.is_floating_point() and not bool(
        torch.isfinite(t).all())]
    if bad:
        raise Invalid("the program's output %d is not finite on seeded inputs" % bad[0])
    times.sort()
    hist = op_histogram(ep)
    native = native_form(ep, native_out, inputs, flat)
    return {"format": "torch.export", "program": facts["model_name"],
            "schema_version": facts["schema_version"],
            "archive_version": facts["archive_version"], "torch": torch.__version__,
            "inputs": specs,
            "input_values": {"source": "uploaded" if uploaded is not None else "seeded",
                             "shapes": [list(t.shape) for t in inputs]},
            "outputs": [{"shape": list(t.shape), "dtype": str(t.dtype).replace("torch.", "")}
                        for t in flat],
            "parameters": n_params, "weight_bytes": p_bytes,
            "ops": hist, "op_count": sum(hist.values()),
            "dynamic_batch": bool(specs) and all(0 in s["dynamic_dims"] for s in specs),
            "eager": {"ok": True, "median_ms": times[len(times) // 2], "runs": len(times),
                      "device": "cpu"},
            "native": native}


def native_form(ep, out=None, inputs=(), outputs=()):
    """Whether the native engine can run the program (to_native.py): its
    graph's node count and ops, or why not with the operators it lacks.
    With out, the native form is written there (the program's inputs and its
    one output on them)."""
    import to_native

    try:
        graph, weights, rep = to_native.convert(ep)
    except to_native.Unsupported as e:
        return {"ok": False, "why": str(e)[:600], "unsupported_ops": e.ops}
    except Exception as e:  # a converter bug must not make the model invalid
        return {"ok": False, "why": "the converter failed: %s: %s" % (type(e).__name__,
                                                                    str(e)[:300]),
                "unsupported_ops": {}}
    if out and len(outputs) == 1:
        to_native.write_form(out, graph, weights, tuple(inputs), outputs[0],
                             rep["batch_dynamic"])
    return {"ok": True, "nodes": rep["nodes"], "ops": rep["ops"],
            "batch_dynamic": rep["batch_dynamic"]}
