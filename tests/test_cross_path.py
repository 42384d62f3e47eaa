"""One semantics per op, whatever the path.

Every elementwise op of the table, the broadcast ops and the comparisons, on inputs that
include nan, +-inf, +-0, denormals and ties, at 0-d (the Python fast path), 7 elements
(the compiled rule element by element), 263 and 5,000 elements (the block kernels, from
``FUSE_MIN`` on), eagerly, replayed (``tapegrad.trace``) and as a compiled tape, must give
the values and gradients that PyTorch gives.

Between our own paths of one size the answer is the same bit for bit (nan, inf and the
sign of zero included).  Between sizes too, except where the block kernels call libmvec
instead of libm (every path does from ``FUSE_MIN`` elements on): there a value or
gradient of an op whose rule calls a math function may differ from the 0-d one by up to
4 ulp (glibc's documented bound).  The compiled tape runs at 0-d, 7 and 263 elements,
not 5,000: it takes that many (up to 65,536 values), but its code is unrolled and its
compile time grows faster than the elements (softplus's gradient: 0.4 s at 1,000, 3 to
6 s at 3,000, a minute at 5,000), while 263 is past ``FUSE_MIN``, with a tail of libm
calls for any vector width (2, 4 or 8 lanes).  Against PyTorch, values agree to 4 ulp
with the same nan, inf and sign of zero; gradients to 4 ulp and the same nan and inf
(PyTorch's first contribution to a gradient keeps the sign of a zero, our adjoints are
sums from +0).
Two documented differences of PyTorch's own: it flushes log1p of a denormal to 0, and
its maximum/minimum of +0 and -0 depends on the tensor's length.  A third: its vectorised
fmod and remainder give nan where x / y overflows (a denormal y), its scalar kernel C's
fmod, as ours: those two are held to PyTorch's 0-d values and gradients.
"""
import ast
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.ops.rules import helper_def, helpers_called
from tapegrad.kernels.fused import FUSE_MIN
from tapegrad.ops.table import BINARY, BY_NAME, COMPARE_OPS, EW_OF, OPS, UNARY
from test_op_table import ROUNDING

torch = pytest.importorskip("torch")

SPECIAL = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 5e-324, -5e-324, 2.2e-308, 1.0,
                    -1.0, 0.5, -2.5, 1e300, 30.0, 2.0])
CONSTANTS = (np.nan, -0.0, 2.0, -np.inf)
ULP = 4
# a gradient such as expm1's g * (r + 1) or tanh's g * (1 - r * r) cancels: a value 4 ulp
# off can move it by more ulp of its own; where a rule calls math, gradients from another
# math library are held to this relative bound instead
GRAD_RTOL = 1e-14


def _inputs(op):
    if op.kind == "ew" and op.arity == 1:
        return [SPECIAL.copy()]
    x, y = np.meshgrid(SPECIAL, SPECIAL)       # every pair: ties on the diagonal
    return [x.ravel().copy(), y.ravel().copy()]


def _uses_math(op):
    """Does the op's rule (or a helper it calls) call a math function?"""
    if op.kind != "ew":
        return False
    rules = " + ".join(t for t in (op.fwd, op.gx, op.gy) if t)
    bodies = [ast.unparse(s) for h in helpers_called(rules) for s in helper_def(h)[1]]
    return any("math." in t for t in [rules] + bodies)


def _call(mod, name, *args):
    op = BY_NAME[name]
    if op.kind == "compare":      # the mask selects: values and gradients show it
        return mod.where(getattr(mod, name)(*args), args[0] * 2.0, args[1])
    if op.kind == "broadcast":    # x as a column against y
        return getattr(mod, EW_OF[op.code].name)(args[0].reshape(-1, 1), args[1])
    if name == "clamp":
        return mod.clamp(args[0], -0.5, 0.7)
    if name in ROUNDING:          # (the op with a derivative: PyTorch's floor_divide has none)
        return mod.div(*args, rounding_mode=ROUNDING[name])
    if mod is torch and name == "softplus":
        return torch.nn.functional.softplus(*args)
    if mod is torch and name in ("maximum", "minimum", "hypot", "xlogy", "atan2") and \
            not torch.is_tensor(args[1]):
        args = (args[0], torch.tensor(args[1], dtype=torch.float64))
    if name in ("logaddexp", "logaddexp2") and not isinstance(args[1], (torch.Tensor, tg.Tensor)):
        args = (args[0], mod.tensor(args[1], dtype=mod.float64))     # (tensors only, in both)
    return getattr(mod, name)(*args)


# -- the paths -------------------------------------------------------------------------------
def _torch(name, arrs):
    if name in ("fmod", "remainder") and arrs[0].size > 1:     # (PyTorch's scalar kernel)
        return _join([_torch(name, [a[k:k + 1] for a in arrs]) for k in range(arrs[0].size)])
    ts = [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrs]
    r = _call(torch, name, *ts)
    r.backward(torch.ones_like(r))
    return r.detach().numpy(), [t.grad.numpy() for t in ts]


def _eager(name, parts):
    """Values and gradients (seeded with ones) of each part (a list of arrays of one
    shape), eagerly, all joined."""
    out = []
    for arrs in parts:
        ts = [tg.tensor(a, dtype=tg.float64, requires_grad=True) for a in arrs]
        r = _call(tg, name, *ts)
        r.backward(tg.ones(r.shape, dtype=tg.float64))
        out.append((r.detach().numpy(), [t.grad.numpy() for t in ts]))
    return _join(out)


def _replayed(name, parts):
    """As ``_eager``, from one recording, replayed."""
    example = [tg.tensor(np.full_like(a, 0.75)) for a in parts[0]]
    ones = tg.ones(_call(tg, name, *example).shape, dtype=tg.float64)
    tr = tg.trace(lambda *xs: _call(tg, name, *xs), *example)
    out = []
    for arrs in parts:
        value, grads = tr.vjp(tuple(tg.tensor(a) for a in arrs), ones)
        out.append((value.numpy(), [g.numpy() for g in (grads if isinstance(grads, tuple)
                                                          else (grads,))]))
    return _join(out)


def _compiled(name, parts):
    """As ``_eager``, from one compiled tape of ``(f(*xs) * w).sum()``, whose gradient in w
    is f's values (plus 0: a compiled tape's adjoints are sums from +0, -0 reads +0)."""
    example = [tg.tensor(np.full_like(a, 0.75)) for a in parts[0]]
    ones = tg.ones(_call(tg, name, *example).shape, dtype=tg.float64)
    tr = tg.trace(lambda *xs: (_call(tg, name, *xs[:-1]) * xs[-1]).sum(), *example, ones)
    tr.compile()
    assert tr.records[0].native is not None, "the tape did not compile"
    out = []
    for arrs in parts:
        _, g = tr.value_and_grad(*[tg.tensor(a) for a in arrs], ones)
        out.append((g[-1].numpy(), [x.numpy() for x in g[:-1]]))
    return _join(out)


def _scalars(arrs):
    return [[np.array(a[k]) for a in arrs] for k in range(arrs[0].size)]


def _chunks(arrs, n):
    """Pieces of n elements (the last one filled up with the first elements)."""
    m = -(-arrs[0].size // n) * n
    arrs = [np.resize(a, m) for a in arrs]
    return [[a[k:k + n] for a in arrs] for k in range(0, m, n)]


def _join(parts):
    return (np.concatenate([np.ravel(v) for v, _ in parts]),
            [np.concatenate([np.ravel(g[j]) for _, g in parts]) for j in range(len(parts[0][1]))])


def _tile(arrs, n):
    reps = -(-n // arrs[0].size)
    return [np.tile(a, reps)[:max(n, arrs[0].size)] for a in arrs]


COMPILED = ("0-d", "7", "263")     # (compile time grows with the elements: the docstring)


def _sizes(arrs):
    """{size: parts}: arrs one element at a time (0-d), 7 at a time, tiled to 263 and
    5,000 elements."""
    return {"0-d": _scalars(arrs), "7": _chunks(arrs, 7), "263": [_tile(arrs, 263)],
            "5000": [_tile(arrs, 5000)]}


def _paths(name, sizes, n=None, compiled=COMPILED):
    """{size: {path: (values, gradients)}} over each size's parts (the first ``n``)."""
    out = {}
    for size, parts in sizes.items():
        paths = {"eager": _eager(name, parts), "replayed": _replayed(name, parts)}
        if size in compiled:
            paths["compiled"] = _compiled(name, parts)
        out[size] = {p: (v[:n], [x[:n] for x in g]) for p, (v, g) in paths.items()}
    return out


# -- comparisons -------------------------------------------------------------------------------
def _ulps(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        spacing = np.maximum(np.spacing(np.abs(a)), np.spacing(np.abs(b)))
        return np.where(a == b, 0.0, np.abs(a - b) / spacing)


def _mismatch(got, want, ulp=0, signed_zero=True, tiny=0.0, rtol=0.0):
    """Indices where ``got`` and ``want`` differ: nan-ness, infinities, the sign of zero
    (if ``signed_zero``), and more than ``ulp`` ulp (and ``tiny`` absolute, ``rtol``
    relative) otherwise."""
    got, want = np.asarray(got), np.asarray(want)
    nan = np.isnan(got) != np.isnan(want)
    both = ~np.isnan(got) & ~np.isnan(want)
    inf = both & (np.isinf(got) | np.isinf(want)) & (got != want)
    fin = both & np.isfinite(got) & np.isfinite(want)
    with np.errstate(invalid="ignore"):
        far = fin & (_ulps(got, want) > ulp) & (np.abs(got - want) > tiny) & \
            (np.abs(got - want) > rtol * np.abs(want))
    sign = both & (got == 0) & (want == 0) & (np.signbit(got) != np.signbit(want))
    bad = nan | inf | far | (sign if signed_zero else False)
    return np.flatnonzero(bad)


def _check(what, got, want, arrs, **kw):
    bad = _mismatch(got, want, **kw)
    if bad.size:
        k = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {got.size} differ, e.g. at "
                             f"{[float(a[k]) for a in arrs if k < a.size]}: {got[k]!r} against "
                             f"{want[k]!r}")


def _one_answer(op, arrs, paths, wants, value_kw=None, across_sizes=True):
    """Each size's paths give its eager answer bit for bit; each size's eager answer is
    the 0-d one (``across_sizes``: within ``ULP`` past ``FUSE_MIN`` where the rule calls
    math); every path's is PyTorch's (``wants``: its answer per size; ``value_kw``: how
    values compare with it)."""
    tol = ULP if _uses_math(op) else 0
    rtol = GRAD_RTOL if tol else 0.0
    base_v, base_g = paths["0-d"]["eager"]
    for size, by_path in paths.items():
        v0, g0 = by_path["eager"]
        for path, (v, g) in by_path.items():
            want = v0 + 0.0 if path == "compiled" else v0     # (its values read -0 as +0)
            _check(f"{op.name} value, {size} {path} against {size} eager", v, want, arrs)
            for j in range(len(g)):
                _check(f"{op.name} gradient {j}, {size} {path} against {size} eager", g[j],
                       g0[j], arrs)
        if not across_sizes:
            continue
        ulp = tol if size != "0-d" and int(size) >= FUSE_MIN else 0
        _check(f"{op.name} value, {size} eager against 0-d", v0, base_v, arrs, ulp=ulp)
        for j in range(len(g0)):
            _check(f"{op.name} gradient {j}, {size} eager against 0-d", g0[j], base_g[j], arrs,
                   ulp=ulp, rtol=rtol if ulp else 0.0)
    for size, by_path in paths.items():
        want_v, want_g = wants[size]
        for path, (v, g) in by_path.items():
            kw = dict(value_kw or {}, **({"signed_zero": False} if path == "compiled" else {}))
            _check(f"{op.name} value, {size} {path} against PyTorch", v, want_v, arrs, ulp=ULP,
                   **kw)
            for j in range(len(g)):
                _check(f"{op.name} gradient {j}, {size} {path} against PyTorch", g[j],
                       want_g[j], arrs, ulp=ULP, signed_zero=False, rtol=rtol)


@pytest.mark.parametrize("op", UNARY + BINARY + COMPARE_OPS, ids=lambda op: op.name)
def test_every_path_gives_one_answer_and_pytorchs(op):
    arrs = _inputs(op)
    with np.errstate(all="ignore"):
        want = _torch(op.name, arrs)
    sizes = _sizes(arrs)
    _one_answer(op, arrs, _paths(op.name, sizes, arrs[0].size), dict.fromkeys(sizes, want),
                # PyTorch's logaddexp2 rounds its last multiply-add once (a fused
                # multiply-add): at a tie of -1 it gives -4.8e-17 where ours rounds to 0
                dict(signed_zero=op.name not in ("maximum", "minimum"),
                     tiny=5e-324 if op.name == "log1p" else 1e-16 if op.name == "logaddexp2"
                     else 0.0))


@pytest.mark.parametrize("op", [op for op in OPS if op.kind == "broadcast"],
                         ids=lambda op: op.name)
def test_a_broadcast_op_gives_one_answer_on_every_path_and_pytorchs(op):
    """The special values as a column against y: each of them (0-d), 7 at a time, and 334
    of them (5,010 values)."""
    sizes = {"0-d": [[SPECIAL, np.array(v)] for v in SPECIAL],
             "7": [[SPECIAL, c] for [c] in _chunks([SPECIAL], 7)],
             "5000": [[SPECIAL, _tile([SPECIAL], 334)[0]]]}
    with np.errstate(all="ignore"):
        wants = {size: _join([_torch(op.name, p) for p in parts]) for size, parts in sizes.items()}
    paths = _paths(op.name, sizes, compiled=sizes)
    _one_answer(op, [paths["0-d"]["eager"][0]], paths, wants, across_sizes=False)


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("c", CONSTANTS, ids=repr)
def test_a_python_number_operand_gives_pytorchs_answer(op, c):
    x = SPECIAL.copy()
    with np.errstate(all="ignore"):
        xt = torch.tensor(x, requires_grad=True)
        r = _call(torch, op.name, xt, c)
        r.backward(torch.ones_like(r))
    want_v, want_g = r.detach().numpy(), xt.grad.numpy()
    for n in (1, 7, 5000):
        xs = np.tile(x, -(-n // x.size))[:max(n, x.size)] if n > 1 else x
        if n == 1:
            vals, grads = [], []
            for v in xs:
                t = tg.tensor(float(v), requires_grad=True)
                out = _call(tg, op.name, t, c)
                out.backward()
                vals.append(out.item())
                grads.append(t.grad.item())
            v, g = np.array(vals), np.array(grads)
        else:
            t = tg.tensor(xs, requires_grad=True)
            out = _call(tg, op.name, t, c)
            out.backward(tg.ones(out.shape, dtype=tg.float64))
            v, g = out.detach().numpy()[:x.size], t.grad.numpy()[:x.size]
        _check(f"{op.name}(x, {c}) value at {n}", v, want_v, [x], ulp=ULP,
               signed_zero=op.name not in ("maximum", "minimum"))
        _check(f"{op.name}(x, {c}) gradient at {n}", g, want_g, [x], ulp=ULP,
               signed_zero=False, rtol=GRAD_RTOL if _uses_math(op) else 0.0)


def test_the_scalar_fast_paths_builtins_are_the_rule():
    """Where a table entry names a Python builtin for speed, it is its rule, bit for bit."""
    from tapegrad.kernels.generated import ew_fwd
    for op in UNARY + BINARY:
        if op.py is None:
            continue
        for args in ([(v,) for v in SPECIAL] if op.arity == 1 else
                     [(a, b) for a in SPECIAL for b in SPECIAL]):
            try:
                got = op.py(*(float(v) for v in args))
            except (ArithmeticError, ValueError):
                continue                        # the compiled rule answers then
            want = ew_fwd(op.code, float(args[0]), float(args[-1]), 0.0)
            assert (math.isnan(got) and math.isnan(want)) or \
                (got == want and math.copysign(1, got) == math.copysign(1, want)), \
                (op.name, args, got, want)
