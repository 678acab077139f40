"""An exported program as the native engine's graph (issue 26): its ATen graph
mapped node by node onto the graph IR of worker/engine/native/graph/ (the JSON
form gr_json.c reads: tensors, then nodes reading earlier tensors by index),
its weights by their state_dict names.

    graph, weights, report = convert(ep)

graph: the JSON object (params.graph of the native engine's `graph`
workload); weights: {name: float32 tensor} (a safetensors file for
params.weights); report: {"nodes", "ops", "batch_dynamic"}.  Raises
Unsupported listing every operator (with its count) the native engine has no
mapping for, or the first construct it cannot express (an input that is not a
tensor, an output that is not one tensor, a softmax that is not over the last
dim, ...).  Each input of the program is an input of the graph, under its
name and in its order.

Shapes are the export's; where the export's batch is dynamic and every view
that depends on it has a single size that does, that size is written -1, so
the graph takes another batch by its input's first dimension alone
(batch_dynamic).  Nothing here runs the model: it reads the graph and its
tensors' recorded shapes.
"""

import json
import math
import operator
import struct

import torch

# An ATen operator's name without its overload: "aten.conv2d".
_IDENTITY = {"aten.contiguous", "aten.clone", "aten.dropout", "aten.alias", "aten.detach",
             "aten.lift_fresh_copy", "aten._assert_tensor_metadata", "aten.feature_dropout"}
_UNARY = {"aten.relu": "relu", "aten.relu_": "relu", "aten.gelu": None, "aten.silu": "silu",
          "aten.silu_": "silu", "aten.sigmoid": "sigmoid", "aten.hardswish": "hardswish",
          "aten.hardswish_": "hardswish", "aten.hardsigmoid": "hardsigmoid",
          "aten.tanh": "tanh", "aten.relu6": "relu6", "aten.hardtanh": None,
          "aten.hardtanh_": None}


# A tensor's or node's name in the graph: under GR_NAME_MAX (96) bytes.
NAME_MAX = 96
# The most inputs a graph takes (gr_json.c's GR_JSON_MAX_INPUTS).
MAX_INPUTS = 16


class Unsupported(Exception):
    """The program has what the native engine cannot run; .ops lists the
    operators without a mapping ({name: count}), str() says what."""

    def __init__(self, msg, ops=None):
        super().__init__(msg)
        self.ops = ops or {}


def _opname(target):
    if isinstance(target, torch._ops.OpOverload):
        return "%s.%s" % (target.namespace, target._opname)
    return "%s.%s" % ((getattr(target, "__module__", None) or "operator").lstrip("_"),
                      getattr(target, "__name__", str(target)))


class _T:
    """A tensor of the graph being built: its index, concrete shape, and which
    of its dims follow the dynamic batch."""

    def __init__(self, idx, shape, dyn):
        self.idx, self.shape, self.dyn = idx, list(shape), set(dyn)


class _Sym:
    """A size (sym_size, or arithmetic on it): its export value, and whether
    it follows the dynamic batch."""

    def __init__(self, value, dyn):
        self.value, self.dyn = int(value), dyn


def _val(v):
    return v.value if isinstance(v, _Sym) else v


class Builder:
    def __init__(self):
        self.tensors, self.nodes, self.weights = [], [], {}
        self.n_declared = 0
        self.consts = 0

    def declare(self, name, kind, shape, dyn=()):
        if self.nodes:
            raise AssertionError("tensors are declared before the first node")
        self.tensors.append({"name": name, "kind": kind, "shape": [int(s) for s in shape]})
        if kind == "input" and 0 in dyn:  # its first dimension is the batch
            self.tensors[-1]["batch"] = True
        self.n_declared += 1
        return _T(self.n_declared - 1, shape, dyn)

    def node(self, op, inputs, out_shape, dyn=(), **attrs):
        """A node reading inputs; out_shape: its output's shape (for the
        converter's own bookkeeping; the engine infers it again)."""
        o = {"op": op, "inputs": [t.idx for t in inputs]}
        o.update({k: v for k, v in attrs.items() if v is not None})
        self.nodes.append(o)
        return _T(self.n_declared + len(self.nodes) - 1, out_shape, dyn)


def _dims_of(val, batch_sym):
    """(concrete shape, dims that follow the dynamic batch) of a fake tensor."""
    shape, dyn = [], set()
    for i, d in enumerate(val.shape):
        if isinstance(d, torch.SymInt):
            hint = d.node.hint
            shape.append(int(hint))
            if batch_sym is not None and batch_sym in d.node.expr.free_symbols:
                dyn.add(i)
        else:
            shape.append(int(d))
    return shape, dyn


class Converter:
    def __init__(self, ep):
        self.ep = ep
        self.b = Builder()
        self.env = {}
        self.missing = {}
        self.batch_sym = None

    # ---- the program's inputs ----

    def _placeholders(self):
        from torch.export.graph_signature import InputKind

        sig = self.ep.graph_signature
        phs = {n.name: n for n in self.ep.graph.nodes if n.op == "placeholder"}
        state = dict(self.ep.state_dict)
        state.update(getattr(self.ep, "constants", {}) or {})
        weights, user = [], []
        for spec in sig.input_specs:
            node = phs[spec.arg.name]
            if spec.kind == InputKind.USER_INPUT:
                user.append(node)
            elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR):
                t = state.get(spec.target)
                if not isinstance(t, torch.Tensor):
                    raise Unsupported("%s %s is not a tensor" % (spec.kind.name.lower(),
                                                                 spec.target))
                weights.append((node, spec.target, t))
            else:
                raise Unsupported("the program takes a %s input (%s), which the native engine "
                                  "has no form for" % (spec.kind.name.lower(), spec.arg.name))
        if not user or len(user) > MAX_INPUTS:
            raise Unsupported("the program takes %d inputs (%s); the native engine's graphs take "
                              "1 to %d" % (len(user), ", ".join(n.name for n in user[:20]),
                                           MAX_INPUTS))
        for k, node in enumerate(user):  # each under its own name, in the program's order
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise Unsupported("the input %s is not a tensor" % node.name)
            d0 = val.shape[0] if val.dim() else None
            if k == 0 and isinstance(d0, torch.SymInt) and len(d0.node.expr.free_symbols) == 1:
                self.batch_sym = next(iter(d0.node.expr.free_symbols))
            shape, dyn = _dims_of(val, self.batch_sym)
            self.env[node.name] = self.b.declare(node.name[:NAME_MAX - 1], "input", shape, dyn)
        for node, name, t in weights:
            if t.dim() == 0:  # a scalar buffer: kept as a Python number
                self.env[node.name] = float(t)
                continue
            self.env[node.name] = self._weight(name, t)

    def _weight(self, name, t):
        if not (t.is_floating_point() or t.dtype in (torch.int64, torch.int32)):
            raise Unsupported("weight %s is %s" % (name, t.dtype))
        w = t.detach().to(torch.float32).contiguous()
        if len(name) >= NAME_MAX:  # the graph's names are shorter: numbered instead
            name = "_w%d_%s" % (len(self.b.weights), name[-(NAME_MAX - 16):])
        self.b.weights[name] = w
        return self.b.declare(name, "weight", w.shape)

    def _const(self, values, hint):
        """A weight made here (a batch norm without an affine, a bias of zeros)."""
        self.b.consts += 1
        name = "_const_%d_%s" % (self.b.consts, hint)
        t = torch.as_tensor(values, dtype=torch.float32)
        self.b.weights[name] = t
        return self.b.declare(name, "weight", t.shape)

    # ---- nodes ----

    def run(self):
        self._placeholders()
        # weights a node makes (ones for a batch norm without an affine) are
        # declared before the first node: collected in a first pass
        self._preconsts()
        out = None
        for n in self.ep.graph.nodes:
            if n.op == "call_function":
                self._call(n)
            elif n.op == "output":
                out = n
        if self.missing:
            raise Unsupported("the native engine has no mapping for %s" % ", ".join(
                "%s (x%d)" % kv for kv in sorted(self.missing.items())), self.missing)
        res = [self.env.get(getattr(a, "name", None)) for a in _flat(out.args[0])]
        if len(res) != 1 or not isinstance(res[0], _T):
            raise Unsupported("the program returns %d values; the native engine's graphs "
                              "return one tensor" % len(res))
        if not self.b.nodes:
            raise Unsupported("the program computes nothing")
        graph = {"tensors": self.b.tensors, "nodes": self.b.nodes, "output": res[0].idx}
        hist = {}
        for o in self.b.nodes:
            hist[o["op"]] = hist.get(o["op"], 0) + 1
        return graph, self.b.weights, {"nodes": len(self.b.nodes), "ops": hist,
                                       "output_shape": res[0].shape,
                                       "batch_dynamic": self.batch_sym is not None and
                                       self.dynamic_ok}

    dynamic_ok = True

    def _preconsts(self):
        self.pre = {}
        for n in self.ep.graph.nodes:
            if n.op != "call_function":
                continue
            name = _opname(n.target)
            if name in ("aten.batch_norm", "aten._native_batch_norm_legit_no_training"):
                x = n.args[0].meta["val"]
                c = int(x.shape[1])
                w, b = n.args[1], n.args[2]
                if w is None:
                    self.pre[(n.name, "w")] = self._const([1.0] * c, "bn_one")
                if b is None:
                    self.pre[(n.name, "b")] = self._const([0.0] * c, "bn_zero")
            elif name == "aten.layer_norm" and (n.args[2] if len(n.args) > 2 else None) is None:
                d = int(n.args[1][-1])
                self.pre[(n.name, "w")] = self._const([1.0] * d, "ln_one")
                self.pre[(n.name, "b")] = self._const([0.0] * d, "ln_zero")

    def _miss(self, name):
        self.missing[name] = self.missing.get(name, 0) + 1

    def _arg(self, a):
        if isinstance(a, torch.fx.Node):
            return self.env.get(a.name)
        if isinstance(a, (list, tuple)):
            return [self._arg(x) for x in a]
        return a

    def _out(self, n):
        val = n.meta.get("val")
        return _dims_of(val, self.batch_sym) if isinstance(val, torch.Tensor) else (None, set())

    def _call(self, n):
        name = _opname(n.target)
        args = [self._arg(a) for a in n.args]
        kw = {k: self._arg(v) for k, v in n.kwargs.items()}
        if any(a is None and isinstance(r, torch.fx.Node) for a, r in zip(args, n.args)):
            return  # an input already refused
        fn = getattr(self, "op_" + name.replace(".", "_"), None)
        if name in _IDENTITY:
            self.env[n.name] = args[0]
            return
        if fn is None and name in _UNARY:
            fn = self._unary
        if fn is None:
            self._miss(name)
            return
        try:
            r = fn(n, name, args, kw)
        except Unsupported as e:
            self._miss("%s (%s)" % (name, e))
            return
        if r is not None:
            self.env[n.name] = r

    def _node(self, n, op, inputs, **attrs):
        shape, dyn = self._out(n)
        return self.b.node(op, inputs, shape, dyn, name=n.name[:NAME_MAX - 1], **attrs)

    # ---- operators ----

    def _unary(self, n, name, a, kw):
        op = _UNARY[name]
        if name == "aten.gelu":
            op = "gelu_tanh" if kw.get("approximate", a[1] if len(a) > 1 else "none") == "tanh" \
                else "gelu"
        elif name.startswith("aten.hardtanh"):
            lo = a[1] if len(a) > 1 else kw.get("min_val", -1.0)
            hi = a[2] if len(a) > 2 else kw.get("max_val", 1.0)
            if (lo, hi) != (0.0, 6.0):
                raise Unsupported("hardtanh other than relu6")
            op = "relu6"
        return self._node(n, op, [a[0]])

    def op_aten_conv2d(self, n, name, a, kw):
        x, w = a[0], a[1]
        b = a[2] if len(a) > 2 else None
        stride, pad, dil = (list(a[i]) if len(a) > i else d for i, d in
                            ((3, [1, 1]), (4, [0, 0]), (5, [1, 1])))
        groups = a[6] if len(a) > 6 else 1
        if isinstance(pad, str):
            raise Unsupported("padding %r" % pad)
        ins = [x, w] + ([b] if b is not None else [])
        return self._node(n, "conv2d", ins, stride=stride, pad=pad, dil=dil, groups=groups)

    def op_aten_conv1d(self, n, name, a, kw):
        x, w = a[0], a[1]
        b = a[2] if len(a) > 2 else None
        st = list(a[3]) if len(a) > 3 else [1]
        pd = list(a[4]) if len(a) > 4 else [0]
        dl = list(a[5]) if len(a) > 5 else [1]
        if isinstance(pd, str):
            raise Unsupported("padding %r" % pd)
        ins = [x, w] + ([b] if b is not None else [])
        return self._node(n, "conv1d", ins, stride=[st[0], 1], pad=[pd[0], 0], dil=[dl[0], 1],
                          groups=a[6] if len(a) > 6 else 1)

    def _bn(self, n, x, w, b, mean, var, eps):
        w = w if w is not None else self.pre[(n.name, "w")]
        b = b if b is not None else self.pre[(n.name, "b")]
        if not all(isinstance(t, _T) for t in (mean, var)):
            raise Unsupported("batch norm without running statistics")
        return self._node(n, "batch_norm", [x, w, b, mean, var], eps=float(eps))

    def op_aten_batch_norm(self, n, name, a, kw):
        if a[5]:  # training
            raise Unsupported("batch norm in training mode")
        return self._bn(n, a[0], a[1], a[2], a[3], a[4], a[7])

    def op_aten__native_batch_norm_legit_no_training(self, n, name, a, kw):
        return (self._bn(n, a[0], a[1], a[2], a[3], a[4], a[6]),)

    def op_aten_linear(self, n, name, a, kw):
        ins = [a[0], a[1]] + ([a[2]] if len(a) > 2 and a[2] is not None else [])
        return self._node(n, "linear", ins)

    def op_aten_matmul(self, n, name, a, kw):
        x, y = a
        if len(x.shape) != len(y.shape) or len(x.shape) < 2 or x.shape[:-2] != y.shape[:-2]:
            raise Unsupported("matmul of %s and %s" % (x.shape, y.shape))
        return self._node(n, "matmul", [x, y])

    op_aten_bmm = op_aten_matmul
    op_aten_mm = op_aten_matmul

    def op_aten_addmm(self, n, name, a, kw):
        """bias + m1 @ m2: a linear layer as a decomposed export writes it."""
        if kw.get("beta", 1) != 1 or kw.get("alpha", 1) != 1:
            raise Unsupported("addmm with beta or alpha")
        return self._binary(n, "add", self.op_aten_matmul(n, name, [a[1], a[2]], {}), a[0])

    def _binary(self, n, op, x, y, alpha=1):
        if isinstance(y, (int, float)) and not isinstance(y, bool):
            if op == "mul":
                return self._node(n, "scale", [x], alpha=float(y))
            raise Unsupported("a scalar %s" % op)
        if isinstance(x, (int, float)):
            x, y = y, x
        if alpha != 1:
            raise Unsupported("add with alpha")
        if not isinstance(x, _T) or not isinstance(y, _T):
            raise Unsupported("%s of non-tensors" % op)
        if len(y.shape) > len(x.shape) or (y.shape != x.shape and
                                           math.prod(y.shape) > math.prod(x.shape)):
            x, y = y, x
        return self._node(n, op, [x, y])

    def op_aten_add(self, n, name, a, kw):
        return self._binary(n, "add", a[0], a[1], kw.get("alpha", a[2] if len(a) > 2 else 1))

    op_aten_add_ = op_aten_add

    def op_aten_mul(self, n, name, a, kw):
        return self._binary(n, "mul", a[0], a[1])

    op_aten_mul_ = op_aten_mul

    def op_aten_div(self, n, name, a, kw):
        if isinstance(a[1], (int, float)) and a[1] != 0 and "rounding_mode" not in kw:
            return self._node(n, "scale", [a[0]], alpha=1.0 / float(a[1]))
        raise Unsupported("a division by a tensor")

    def op_aten_max_pool2d(self, n, name, a, kw):
        k = list(a[1])
        s = list(a[2]) if len(a) > 2 and a[2] else k
        p = list(a[3]) if len(a) > 3 else [0, 0]
        if (len(a) > 4 and list(a[4]) not in ([1, 1], [1])) or (len(a) > 5 and a[5]):
            raise Unsupported("dilation or ceil_mode")
        return self._node(n, "max_pool2d", [a[0]], kernel=_pair(k), stride=_pair(s), pad=_pair(p))

    def op_aten_avg_pool2d(self, n, name, a, kw):
        k = list(a[1])
        s = list(a[2]) if len(a) > 2 and a[2] else k
        p = list(a[3]) if len(a) > 3 else [0, 0]
        if len(a) > 4 and a[4]:
            raise Unsupported("ceil_mode")
        cp = a[5] if len(a) > 5 else True
        return self._node(n, "avg_pool2d", [a[0]], kernel=_pair(k), stride=_pair(s),
                          pad=_pair(p), count_pad=int(bool(cp)))

    def op_aten_adaptive_avg_pool2d(self, n, name, a, kw):
        return self._node(n, "adaptive_avg_pool2d", [a[0]], kernel=_pair(list(a[1])))

    def op_aten_layer_norm(self, n, name, a, kw):
        if len(a[1]) != 1:
            raise Unsupported("layer norm over %d dims" % len(a[1]))
        w = a[2] if len(a) > 2 and a[2] is not None else self.pre[(n.name, "w")]
        b = a[3] if len(a) > 3 and a[3] is not None else self.pre[(n.name, "b")]
        eps = a[4] if len(a) > 4 else 1e-5
        return self._node(n, "layer_norm", [a[0], w, b], eps=float(eps))

    def op_aten_softmax(self, n, name, a, kw):
        dim = a[1]
        if dim not in (-1, len(a[0].shape) - 1):
            raise Unsupported("softmax over dim %d of %d" % (dim, len(a[0].shape)))
        return self._node(n, "softmax", [a[0]])

    op_aten__softmax = op_aten_softmax

    def op_aten_scaled_dot_product_attention(self, n, name, a, kw):
        q, k, v = a[0], a[1], a[2]
        mask = a[3] if len(a) > 3 else kw.get("attn_mask")
        causal = a[5] if len(a) > 5 else kw.get("is_causal", False)
        scale = kw.get("scale", a[6] if len(a) > 6 else None)
        if mask is not None:
            raise Unsupported("attention with a mask")
        if (a[4] if len(a) > 4 else kw.get("dropout_p", 0.0)) not in (0, 0.0):
            raise Unsupported("attention dropout")
        d = q.shape[-1]
        scale = float(scale) if scale is not None else 1.0 / math.sqrt(d)
        sshape = q.shape[:-1] + [k.shape[-2]]
        dyn = q.dyn & set(range(len(sshape) - 2))
        s = self.b.node("matmul", [q, k], sshape, dyn, trans_b=1)
        s = self.b.node("scale", [s], sshape, dyn, alpha=scale)
        if causal:
            s = self.b.node("causal_mask", [s], sshape, dyn)
        p = self.b.node("softmax", [s], sshape, dyn)
        return self._node(n, "matmul", [p, v])

    def op_aten_embedding(self, n, name, a, kw):
        return self._node(n, "embedding", [a[1], a[0]])

    def _reshape(self, x, shape, dyn):
        """x viewed as shape: the size that follows the dynamic batch written
        -1 (two such sizes: the graph keeps the export's batch)."""
        out = list(shape)
        if self.batch_sym is not None and dyn:
            if len(dyn) > 1:
                self.dynamic_ok = False
            else:
                out[next(iter(dyn))] = -1
        return self.b.node("reshape", [x], shape, dyn, shape=out)

    def _view(self, n, x, size):
        shape, dyn = self._out(n)
        return x if shape == x.shape else self._reshape(x, shape, dyn)

    def op_aten_reshape(self, n, name, a, kw):
        return self._view(n, a[0], a[1])

    op_aten_view = op_aten_reshape
    op_aten__unsafe_view = op_aten_reshape

    def op_aten_flatten(self, n, name, a, kw):
        start = a[1] if len(a) > 1 else 0
        end = a[2] if len(a) > 2 else -1
        rank = len(a[0].shape)
        if end in (-1, rank - 1) and start > 0:
            return self._node(n, "flatten", [a[0]], axis=start % rank)
        return self._view(n, a[0], None)

    def op_aten_unsqueeze(self, n, name, a, kw):
        return self._view(n, a[0], None)

    op_aten_squeeze = op_aten_unsqueeze

    def op_aten_permute(self, n, name, a, kw):
        perm = [p % len(a[0].shape) for p in a[1]]
        return self._node(n, "permute", [a[0]], perm=perm)

    def op_aten_transpose(self, n, name, a, kw):
        r = len(a[0].shape)
        perm = list(range(r))
        i, j = a[1] % r, a[2] % r
        perm[i], perm[j] = perm[j], perm[i]
        return self._node(n, "permute", [a[0]], perm=perm)

    def op_aten_t(self, n, name, a, kw):
        if len(a[0].shape) != 2:
            raise Unsupported("t of a %d-d tensor" % len(a[0].shape))
        return self._node(n, "permute", [a[0]], perm=[1, 0])

    def op_aten_cat(self, n, name, a, kw):
        xs = a[0]
        dim = (a[1] if len(a) > 1 else kw.get("dim", 0)) % len(xs[0].shape)
        if len(xs) == 1:
            return xs[0]
        return self._node(n, "concat", xs, axis=dim)

    def _slice(self, x, axis, start, end, shape, dyn):
        return self.b.node("slice", [x], shape, dyn, axis=axis, start=start, end=end)

    def op_aten_slice(self, n, name, a, kw):
        x = a[0]
        dim = (a[1] if len(a) > 1 else 0) % len(x.shape)
        size = x.shape[dim]
        start = _val(a[2]) if len(a) > 2 and a[2] is not None else 0
        end = _val(a[3]) if len(a) > 3 and a[3] is not None else size
        step = a[4] if len(a) > 4 else 1
        if step != 1:
            raise Unsupported("a slice with a step")
        start = max(0, start + size if start < 0 else start)
        end = min(size, end + size if end < 0 else end)
        if start == 0 and end == size:
            return x
        if dim in x.dyn:
            raise Unsupported("a slice of the dynamic batch")
        shape, dyn = self._out(n)
        return self._slice(x, dim, start, end, shape, dyn)

    def op_aten_select(self, n, name, a, kw):
        x = a[0]
        dim = a[1] % len(x.shape)
        i = a[2] % x.shape[dim]
        shp = list(x.shape)
        shp[dim] = 1
        s = self._slice(x, dim, i, i + 1, shp, x.dyn)
        return self._view(n, s, None)

    def _pieces(self, n, x, dim, sizes):
        out, start = [], 0
        shapes = [v for v in n.meta["val"]]
        for k, sz in enumerate(sizes):
            shape, dyn = _dims_of(shapes[k], self.batch_sym)
            out.append(self._slice(x, dim, start, start + sz, shape, dyn))
            start += sz
        return tuple(out)

    def op_aten_split(self, n, name, a, kw):
        x = a[0]
        dim = (a[2] if len(a) > 2 else 0) % len(x.shape)
        size = a[1]
        total = x.shape[dim]
        sizes = [min(size, total - s) for s in range(0, total, size)]
        return self._pieces(n, x, dim, sizes)

    def op_aten_split_with_sizes(self, n, name, a, kw):
        x = a[0]
        dim = (a[2] if len(a) > 2 else 0) % len(x.shape)
        return self._pieces(n, x, dim, list(a[1]))

    def op_aten_chunk(self, n, name, a, kw):
        x = a[0]
        dim = (a[2] if len(a) > 2 else 0) % len(x.shape)
        total = x.shape[dim]
        size = -(-total // a[1])
        return self._pieces(n, x, dim, [min(size, total - s) for s in range(0, total, size)])

    def op_aten_unbind(self, n, name, a, kw):
        x = a[0]
        dim = (a[1] if len(a) > 1 else 0) % len(x.shape)
        if dim in x.dyn:
            raise Unsupported("unbind of the dynamic batch")
        out = []
        for i, val in enumerate(n.meta["val"]):
            shp = list(x.shape)
            shp[dim] = 1
            s = self._slice(x, dim, i, i + 1, shp, x.dyn)
            out.append(self._reshape(s, *_dims_of(val, self.batch_sym)))
        return tuple(out)

    def op_aten_mean(self, n, name, a, kw):
        x = a[0]
        r = len(x.shape)
        dims = sorted(d % r for d in (a[1] if len(a) > 1 and a[1] is not None else range(r)))
        keep = a[2] if len(a) > 2 else kw.get("keepdim", False)
        if 0 in dims or len(dims) == r:
            raise Unsupported("a mean over the batch")
        if dims != list(range(dims[0], r)):  # the graph's mean is over the last dims
            perm = [d for d in range(r) if d not in dims] + dims
            x = self.b.node("permute", [x], [x.shape[p] for p in perm],
                            {i for i, p in enumerate(perm) if p in x.dyn}, perm=perm)
            dims = list(range(r - len(dims), r))
        shp = x.shape[:dims[0]]
        m = self.b.node("mean", [x], shp, x.dyn & set(range(len(shp))), axis=dims[0])
        return self._view(n, m, None) if keep else m

    def op_aten_sym_size(self, n, name, a, kw):
        x = a[0]
        d = a[1] % len(x.shape)
        return _Sym(x.shape[d], d in x.dyn)

    def op_operator_getitem(self, n, name, a, kw):
        seq, i = a
        if isinstance(seq, (tuple, list)):
            return seq[i]
        raise Unsupported("getitem of a %s" % type(seq).__name__)

    def _sym_arith(self, a, f):
        x, y = a
        return _Sym(f(_val(x), _val(y)), any(isinstance(v, _Sym) and v.dyn for v in (x, y)))

    def op_operator_mul(self, n, name, a, kw):
        return self._sym_arith(a, operator.mul)

    def op_operator_floordiv(self, n, name, a, kw):
        return self._sym_arith(a, operator.floordiv)

    def op_operator_add(self, n, name, a, kw):
        return self._sym_arith(a, operator.add)

    def op_operator_sub(self, n, name, a, kw):
        return self._sym_arith(a, operator.sub)

    def op_aten_expand(self, n, name, a, kw):
        # a leading 1 broadcast by a concat after it (ViT's class token): kept
        x = a[0]
        users = list(n.users)
        if x.shape[0] == 1 and all(_opname(u.target) == "aten.cat" for u in users):
            return x
        raise Unsupported("an expand that is not a class token's")

    def op_aten__to_copy(self, n, name, a, kw):
        dt = kw.get("dtype")
        if dt not in (None, torch.float32):
            raise Unsupported("a cast to %s" % dt)
        return a[0]

    op_aten_to = op_aten__to_copy


def _pair(v):
    v = list(v)
    return v * 2 if len(v) == 1 else v


def _flat(x):
    if isinstance(x, (list, tuple)):
        out = []
        for y in x:
            out += _flat(y)
        return out
    return [x]


FORM_FORMAT = "fusionbench.native/1"
FORM_INPUT, FORM_EXPECTED = "__input__.", "__expected__"


def write_form(path, graph, weights, inputs, expected, batch_dynamic):
    """The native form of a program, one safetensors file (the native engine's
    gr_zoo.c reads it for a job of an uploaded model): the weights as float32
    under their names, the inputs (a tuple in the program's order, each as
    float32: token ids too) under FORM_INPUT + their graph names, PyTorch
    eager's output for them, and in its metadata the graph, the batch (the
    first input's first dimension) and whether it is dynamic.  The same
    program gives the same bytes (keys sorted), so the database stores it
    once."""
    names = [t["name"] for t in graph["tensors"] if t["kind"] == "input"]
    if len(names) != len(inputs):
        raise Unsupported("the graph takes %d inputs, %d given" % (len(names), len(inputs)))
    clash = [k for k in weights if k.startswith(FORM_INPUT) or k == FORM_EXPECTED]
    if clash:
        raise Unsupported("a weight is named %s, which the native form keeps for itself" %
                          sorted(clash)[0])
    tensors = dict(weights)
    for name, x in zip(names, inputs):
        tensors[FORM_INPUT + name] = x
    tensors[FORM_EXPECTED] = expected
    x = inputs[0]
    meta = {"format": FORM_FORMAT, "graph": json.dumps(graph, separators=(",", ":")),
            "batch": str(int(x.shape[0]) if x.dim() else 1),
            "batch_dynamic": "true" if batch_dynamic else "false", "torch": torch.__version__}
    _save(path, tensors, meta)


def _save(path, tensors, meta):
    """A safetensors file of float32 tensors, written deterministically: the
    header's keys and the data in name order, the header padded to 8 bytes."""
    header, off = {"__metadata__": meta}, 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        n = int(t.numel()) * 4
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + n]}
        off += n
    h = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for name in names:
            t = tensors[name].detach().to(torch.float32).contiguous()
            f.write(t.numpy().astype("<f4", copy=False).tobytes())


def convert(ep):
    """(graph JSON, {weight name: float32 tensor}, report); Unsupported when
    the native engine cannot run the program."""
    return Converter(ep).run()
