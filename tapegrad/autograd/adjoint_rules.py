"""Adjoint rules written in tapegrad's own ops, for a backward that records itself.

With ``create_graph=True`` the reverse sweep must emit its adjoint computation as tape
entries, so that the gradient is itself differentiable.  The elementwise rules are the
op table's own reverse expressions and helpers, walked on tensors (``_TensorRules``):
no tensor copy of any helper is kept here.  Masks such as relu's step come out as
``where`` of constants (no gradient); where PyTorch's backward reads a value all the
same (relu's result, a composite's inputs), the gradient is ``read_with`` it, so that
it requires grad as there and a further gradient gives zeros.  A mask or choice taken
from the tape's values (``where``'s condition, the extrema of a max, prod's zeros) is a
comparison of its tensors, which tracing records, or guarded: ``Traced.hvp`` replays
these rules at new inputs.  The structural kinds apply the transpose of their linear
map with gathers, sums and matrix products.

Each rule takes ``(i, g, h)``: the entry, the tensor adjoint of its result and ``h``,
a reader of the tape (columns, shapes, extras, values of the entries recorded before
the walk) whose ``h(j)`` is the tensor that stands for buffer ``j`` (connected to its
history).  It returns ``[(buffer, contribution), ...]``.
"""
import ast
import operator

import numpy as np

from .. import dtypes
from ..kernels.generated import ew_fwd
from ..ops.rules import RuleError, Walker
from ..ops.table import BY_CODE, BY_NAME, CODE, EW_OF, kind_range
from ..record import expand_strides
from ..tape import CONST


def _is_tensor(v):
    return hasattr(v, "_arr")


class _TensorRules(Walker):
    """The table's rules on tensors: ``ops.rules.Walker`` over tapegrad's own ops, so
    that the adjoint is recorded and differentiable.  A Python number (a constant
    operand) stays a number until it meets a tensor; ``if`` on a tensor condition is a
    ``where`` (comparisons of traced tensors are recorded, so a replay recomputes them);
    a math function or a helper named like a table op is that op (its derivative is the
    op's own rule: no formula whose unselected side could overflow)."""

    def __init__(self, dtype):
        self.dtype = dtype

    def const(self, v):
        return v

    def neg(self, a):
        return -a

    def arith(self, op, a, b):
        return _ARITH[op](a, b)

    def compare(self, op, a, b):
        return _COMPARE[op](a, b)

    def logic(self, op, a, b):
        if _is_tensor(a) or _is_tensor(b):
            raise RuleError("a tensor condition combined outside an if")
        return (a and b) if op == "and" else (a or b)

    def branch(self, test, env, then, other):
        if isinstance(test, ast.BoolOp):         # a and b: if a: (if b: then) ...
            first, rest = test.values[0], test.values[1:]
            inner = rest[0] if len(rest) == 1 else ast.BoolOp(test.op, list(rest))
            if isinstance(test.op, ast.And):
                return self.branch(first, env, lambda: self.branch(inner, env, then, other),
                                   other)
            return self.branch(first, env, then, lambda: self.branch(inner, env, then, other))
        c = self.node(test, env)
        if not _is_tensor(c):
            return then() if c else other()
        return self.select(c, then(), other())

    def select(self, c, a, b):
        from ..elementwise import where
        from ..factories import tensor
        if not _is_tensor(a) and not _is_tensor(b):
            a = tensor(a, dtype=self.dtype)
        return where(c, a, b)

    def _op(self, name, args):
        from ..elementwise import FUNCTIONS
        if any(_is_tensor(v) for v in args):
            return FUNCTIONS[name](*args)
        return ew_fwd(CODE[name], float(args[0]), float(args[-1]), 0.0)  # the compiled rule

    def math(self, name, args):
        return self._op(name, args)

    def helper(self, name, args):
        op = BY_NAME.get(name)
        if op is not None and op.kind == "ew" and op.arity == len(args):
            return self._op(name, args)
        return super().helper(name, args)


_ARITH = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
          "**": operator.pow}
_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
            "==": operator.eq, "!=": operator.ne}


def _wants(h, j):
    return j >= 0 and h.OP[j] != CONST and (h.needed is None or h.needed(j))


def read_with(v, s):
    """``v`` (a gradient), bit for bit, read with ``s``: as a PyTorch backward op that
    reads a saved tensor (relu's ``threshold_backward``), what is computed from it
    requires grad if ``s`` does, whatever its derivative in ``s`` (zero: a further
    gradient is zeros, not an error).  A ``where`` whose condition holds nowhere, ``s``
    (or, where it does not broadcast to ``v``, its first element) on the side never
    taken; its rule (``where``) reads ``s`` again for v's own gradient, as PyTorch's
    formulas do (the gradient of ``threshold_backward`` in its grad is another)."""
    from ..elementwise import where
    if not s.requires_grad or not s.numel():
        return v
    shape, to = tuple(s.shape), tuple(v.shape)
    if len(shape) > len(to) or any(n not in (1, m) for n, m in zip(shape[::-1], to[::-1])):
        s = s.reshape(-1)[0]
    out = where(np.zeros(to, np.bool_), s if s.dtype == v.dtype else s.to(v.dtype), v)
    out._t.autograd.kept.add(out._i)
    return out


class Zero:
    """The zero contribution of a ``read_with`` to what it reads (PyTorch's
    ``zeros_like``): the walk's adjoint is zeros only where nothing else adds to it, as
    the compiled sweep leaves an input a ``where`` never selects."""

    __slots__ = ("like",)

    def __init__(self, like):
        self.like = like

    def zeros(self):
        from ..tensor import from_array
        return from_array(np.zeros(tuple(self.like.shape), self.like._arr.dtype))


def elementwise(i, g, h):
    """The table's rule on tensors (``h`` also holds the columns as lists)."""
    a, b, c, c2 = h.A[i], h.B[i], h.C[i], h.C2[i]
    x = h(a) if a >= 0 else c
    y = h(b) if b >= 0 else c
    r = h(i)
    op = BY_CODE[h.OP[i]]
    env = {"x": x, "y": y, "r": r, "g": g, "c2": c2}
    if op.kept and _is_tensor(env[op.kept]):
        env["g"] = read_with(g, env[op.kept])
    rules = _TensorRules(g.dtype)
    out = []
    if _wants(h, a):
        out.append((a, _filled(rules.expr(op.gx, env), g)))
    if op.gy and _wants(h, b):
        out.append((b, _filled(rules.expr(op.gy, env), g)))
    return out


def _filled(v, g):
    """A rule's value as a tensor of g's shape (a constant rule, sign's 0, is a number)."""
    from ..tensor import from_array
    return v if _is_tensor(v) else from_array(np.full(tuple(g.shape), v))


class Scattered:
    """A contribution ``g`` to be scattered (added) at the flat positions ``src`` of
    its buffer.  The walk collects these per buffer and scatters them all at once when
    the buffer's adjoint is complete: one entry for many selects of one vector, where
    one scatter each would cost the vector's size each time."""

    __slots__ = ("g", "src")

    def __init__(self, g, src):
        self.g, self.src = g, np.asarray(src, np.int64)


def gathered(pieces, n_in, in_shape):
    """The sum of ``Scattered`` pieces into a buffer of ``in_shape``."""
    from ..shape_ops import cat, scatter_sum, stack
    if len(pieces) == 1:
        return scatter_sum(pieces[0].g, pieces[0].src, n_in, in_shape)
    if all(p.g.ndim == 0 for p in pieces):
        g = stack([p.g for p in pieces])
    else:
        g = cat([p.g.reshape(-1) for p in pieces])
    return scatter_sum(g, np.concatenate([p.src for p in pieces]), n_in, in_shape)


def where(i, g, h):
    """The condition as the tensor of its buffer (a comparison of it, recorded while
    tracing): a replay of the gradient recomputes the mask at its own inputs."""
    from .. import elementwise
    a, b = h.A[i], h.B[i]
    if i in h.t.autograd.kept:      # read_with's: all of g to b, read with a again
        return ([(a, Zero(g))] if _wants(h, a) else []) + \
            ([(b, read_with(g, h(a)))] if _wants(h, b) else [])
    mask = h(h.condition(i)) != 0.0
    out = []
    if _wants(h, a):
        out.append((a, elementwise.where(mask, g, 0.0)))
    if _wants(h, b):
        out.append((b, elementwise.where(mask, 0.0, g)))
    return out


def gather(i, g, h):
    """A gather's transpose: a broadcast (``expand``: strides 0 on the broadcast dims,
    the input's own elsewhere) sums over the broadcast dims, a recorded reduction as
    PyTorch's (a scatter of a batch's worth of copies was 60x slower); any other gather
    scatters its elements back."""
    a = h.A[i]
    if not _wants(h, a):
        return []
    ex = h.extras(i)
    shape = tuple(h.shape(i))
    strides = tuple(int(s) for s in ex[1:1 + len(shape)])
    in_shape = tuple(h.shape(a))
    lead = len(shape) - len(in_shape)
    if int(ex[0]) == 0 and lead >= 0 and strides == expand_strides(in_shape, shape) and all(
            n in (1, shape[lead + d]) for d, n in enumerate(in_shape)):
        dims = tuple(d for d, s in enumerate(strides) if s == 0 and shape[d] != 1)
        return [(a, (g.sum(dims, keepdim=True) if dims else g).reshape(in_shape))]
    return [(a, Scattered(g, h.gather_sources(i)))]


def reshape(i, g, h):
    a = h.A[i]
    return [(a, g.reshape(h.shape(a)))] if _wants(h, a) else []


def index(i, g, h):
    a = h.A[i]
    if not _wants(h, a):
        return []
    return [(a, Scattered(g, h.index_sources(i)))]


def _spread(h, i, v, in_shape):
    """``v``, of reduction entry i's output shape, spread over its input's shape: input
    element k gets output element ``o[k]`` (``reduce_targets``).  Where the output
    strides are the input's C strides with the reduced dims kept as 1 (as reductions
    record them), a reshape and an ``expand``, as PyTorch's sum backward (a gather by
    the offset map recorded an index per element: a k-means double backward spent
    a quarter of its instructions on three of them)."""
    strides = [int(s) for s in h.extras(i)[:len(in_shape)]]
    kept = tuple(1 if s == 0 else n for n, s in zip(in_shape, strides))
    step = 1
    for d in range(len(kept) - 1, -1, -1):
        if kept[d] != 1 and strides[d] != step:
            return v.reshape(-1)[h.reduce_targets(i)].reshape(in_shape)
        step *= kept[d]
    return v.reshape(kept).expand(in_shape)


def reduce(i, g, h):
    """Reductions: input element k feeds output element ``o[k]``."""
    a = h.A[i]
    if not _wants(h, a):
        return []
    in_shape, nin, nout = h.shape(a), h.size(a), h.size(i)
    spread = _spread(h, i, g, in_shape)
    name = BY_CODE[int(h.OP[i])].name
    if name in ("sum", "sum_dim"):
        return [(a, spread)]
    if name in ("mean", "mean_dim"):
        return [(a, spread * (nout / nin) if nin else spread)]    # (empty: nothing to scale)
    x = h(a)
    if name in ("amax", "amin", "max_all", "min_all"):
        mask = _attains(h, i, x, in_shape, name.endswith("_all"))
        dims = tuple(d for d, s in enumerate(h.extras(i)[:len(in_shape)]) if s == 0)
        count = mask.sum(dims, keepdim=True) if dims else mask     # (reduced: stride 0)
        return [(a, spread * mask / _spread(h, i, count, in_shape))]
    # prod: g itself for a 0-d input (PyTorch's prod_backward: no factor to read), else
    # the product of the others, by division where no factor is zero (while tracing,
    # ``any`` guards where the zeros are: a replay at others records again)
    if not in_shape:
        return [(a, spread)]
    if not (x == 0.0).any():
        return [(a, spread * (_spread(h, i, h(i), in_shape) / x))]
    gs = nin // nout
    if gs == 1:
        return [(a, spread)]
    o = h.reduce_targets(i)
    members = np.argsort(o, kind="stable").reshape(nout, gs)[o]        # (nin, gs)
    others = members[members != np.arange(nin)[:, None]].reshape(nin, gs - 1)
    prod_others = x.reshape(-1)[others.reshape(-1)].reshape(nin, gs - 1).prod(1)
    return [(a, spread * prod_others.reshape(in_shape))]


def _as(v, dtype):
    return v if v.dtype is dtype else v.to(dtype)


def _attains(h, i, x, in_shape, full):
    """1.0 where an element of ``x`` attains its extremum (reduction entry i), else 0.0,
    as ``kernels.reduce.attains``: from comparisons of tensors (recorded while tracing),
    so that a replay of the gradient finds the extrema of its own inputs."""
    from ..elementwise import where
    r = _spread(h, i, h(i).detach(), in_shape)      # (eagerly: a constant)
    one = _filled(1.0, x)
    mask = where(x == r, one, 0.0)
    if full:        # a nan result: the nans (PyTorch's evenly_distribute_backward)
        mask = mask + where(r != r, where(x != x, one, 0.0), 0.0)
    return mask


def matmul(i, g, h):
    """The products of g with the operands, in the product's dtype (an operand recorded
    on the tape reads as float64, a leaf or a seed in its own dtype)."""
    nb, M, K, N, dt, ty = h.product(i)
    a, b = h.A[i], h.B[i]
    dt = dtypes.from_np(dt)
    go = _as(g, dt).reshape(nb, M, N)
    out = []
    if _wants(h, a):        # g y^T; y^T is (nb, N, K): y's values as they are stored if ty
        y = _as(h(b), dt)
        yt = y.reshape(nb, N, K) if ty else y.reshape(nb, K, N).transpose(1, 2)
        out.append((a, (go @ yt).reshape(h.shape(a))))
    if _wants(h, b):        # x^T g, stored transposed (g^T x) if ty
        x = _as(h(a), dt).reshape(nb, M, K)
        gy = go.transpose(1, 2) @ x if ty else x.transpose(1, 2) @ go
        out.append((b, gy.reshape(h.shape(b))))
    return out


def cat(i, g, h):
    outer, pieces = h.cat_pieces(i)
    total = sum(inner for _, inner in pieces)
    rows = g.reshape(outer, total)
    out, pos = [], 0
    for buf, inner in pieces:
        if _wants(h, buf):
            out.append((buf, rows[:, pos:pos + inner].reshape(h.shape(buf))))
        pos += inner
    return out


def softmax(i, g, h):
    """softmax: r (g - <g, r>); log_softmax: g - exp(r) sum(g); logsumexp: g exp(x - r),
    along the entry's dim."""
    a = h.A[i]
    if not _wants(h, a):
        return []
    outer, n, inner = h.softmax_dims(i)
    name = BY_CODE[h.OP[i]].name
    if name == "logsumexp":
        x3 = h(a).reshape(outer, n, inner)
        r3 = h(i).reshape(outer, 1, inner)
        return [(a, (g.reshape(outer, 1, inner) * (x3 - r3).exp()).reshape(h.shape(a)))]
    g3 = g.reshape(outer, n, inner)
    r3 = h(i).reshape(outer, n, inner)
    if name == "softmax":
        out = r3 * (g3 - (g3 * r3).sum(1, keepdim=True))
    else:
        out = g3 - r3.exp() * g3.sum(1, keepdim=True)
    return [(a, out.reshape(h.shape(a)))]


def broadcast(i, g, h):
    """+ - * / of operands read in place, broadcast: the elementwise op's rule on the
    operands as they are (tensor ops broadcast them), each summed back to its shape."""
    a, b = h.A[i], h.B[i]
    op = EW_OF[int(h.OP[i])]
    env = {"x": h(a), "y": h(b), "g": g}
    rules = _TensorRules(g.dtype)
    out = []
    for j, rule in ((a, op.gx), (b, op.gy)):
        if not _wants(h, j):
            continue
        if rule in ("g", "-g"):   # (+ and -: summed, then negated: the same bits, fewer values)
            s = _sum_to(g, h.shape(j))
            out.append((j, s if rule == "g" else -s))
        else:
            out.append((j, _sum_to(rules.expr(rule, env), h.shape(j))))
    return out


def _sum_to(v, shape):
    """``v`` (of a broadcast's output shape) summed over the dims ``shape`` broadcasts."""
    lead = v.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + d for d, n in enumerate(shape)
                                      if n == 1 and v.shape[lead + d] != 1)
    return (v.sum(dims, keepdim=True) if dims else v).reshape(shape)


def no_gradient(i, g, h):
    """Comparisons and detached copies (on traced tapes) pass nothing back."""
    return []


_BY_KIND = {"ew": elementwise, "where": where, "gather": gather, "reshape": reshape,
            "index": index, "reduce": reduce, "matmul": matmul, "cat": cat, "softmax": softmax,
            "compare": no_gradient, "stop": no_gradient, "broadcast": broadcast}
RULES = tuple(_BY_KIND.get(op.kind) if op else None for op in BY_CODE)
HOST_FIRST, HOST_LAST = kind_range("host")
