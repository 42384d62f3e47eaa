"""One semantics per op, whatever the path.

Every elementwise op of the table, on inputs that include nan, +-inf, +-0, denormals and
ties, at 0-d (the Python fast path), 7 elements (the compiled rule element by element)
and 5,000 elements (the block kernels), eagerly, replayed (``tapegrad.trace``) and as a
compiled tape, must give the values and gradients that PyTorch gives.

Between our own paths the answer is the same bit for bit (nan, inf and the sign of zero
included), except where the 5,000-element kernels call libmvec instead of libm: there a
value or gradient of an op whose rule calls a math function may differ by up to 4 ulp
(glibc's documented bound).  Against PyTorch, values agree to 4 ulp with the same nan,
inf and sign of zero; gradients to 4 ulp and the same nan and inf (PyTorch's first
contribution to a gradient keeps the sign of a zero, our adjoints are sums from +0).
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
from tapegrad.ops.table import BINARY, UNARY

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
    if op.arity == 1:
        return [SPECIAL.copy()]
    x, y = np.meshgrid(SPECIAL, SPECIAL)       # every pair: ties on the diagonal
    return [x.ravel().copy(), y.ravel().copy()]


def _uses_math(op):
    """Does the op's rule (or a helper it calls) call a math function?"""
    rules = " + ".join(t for t in (op.fwd, op.gx, op.gy) if t)
    bodies = [ast.unparse(s) for h in helpers_called(rules) for s in helper_def(h)[1]]
    return any("math." in t for t in [rules] + bodies)


def _call(mod, name, *args):
    if name == "clamp":
        return mod.clamp(args[0], -0.5, 0.7)
    if name == "floor_divide":    # (the op with a derivative: PyTorch's floor_divide has none)
        return mod.div(*args, rounding_mode="floor")
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


def _eager(name, arrs):
    ts = [tg.tensor(a, dtype=tg.float64, requires_grad=True) for a in arrs]
    r = _call(tg, name, *ts)
    r.backward(tg.ones(r.shape, dtype=tg.float64))
    return r.detach().numpy(), [t.grad.numpy() for t in ts]


def _zero_d(name, arrs):
    vals, grads = [], [[] for _ in arrs]
    for k in range(arrs[0].size):
        ts = [tg.tensor(float(a[k]), requires_grad=True) for a in arrs]
        r = _call(tg, name, *ts)
        r.backward()
        vals.append(r.item())
        for j, t in enumerate(ts):
            grads[j].append(t.grad.item())
    return np.array(vals), [np.array(g) for g in grads]


def _chunks(arrs, n):
    """Pieces of n elements (the last one filled up with the first elements)."""
    m = -(-arrs[0].size // n) * n
    arrs = [np.resize(a, m) for a in arrs]
    return [[a[k:k + n] for a in arrs] for k in range(0, m, n)]


def _join(parts):
    return (np.concatenate([v for v, _ in parts]),
            [np.concatenate([g[j] for _, g in parts]) for j in range(len(parts[0][1]))])


def _tile(arrs, n):
    reps = -(-n // arrs[0].size)
    return [np.tile(a, reps)[:max(n, arrs[0].size)] for a in arrs]


def _replayed(name, arrs):
    """Values and gradients (seeded with ones) from one recording, replayed."""
    tr = tg.trace(lambda *xs: _call(tg, name, *xs),
                  *[tg.tensor(np.full_like(a, 0.75)) for a in arrs])
    ts = [tg.tensor(a) for a in arrs]
    value, grads = tr.vjp(tuple(ts), tg.ones(arrs[0].shape, dtype=tg.float64))
    grads = grads if isinstance(grads, tuple) else (grads,)
    return value.numpy(), [g.numpy() for g in grads]


def _compiled(name, arrs, n):
    """From a compiled tape (one scalar output): each value at 0-d, and the gradients
    of the sum of ``n`` values (n = 1: the value itself)."""
    def f(*xs):
        out = _call(tg, name, *xs)
        return out.sum() if n > 1 else out
    example = [tg.tensor(np.full(n, 0.75) if n > 1 else 0.75) for _ in arrs]
    tr = tg.trace(f, *example)
    tr.compile()
    assert tr.records[0].native is not None, "the tape did not compile"
    vals, grads = [], [[] for _ in arrs]
    for part in _chunks(arrs, n):
        v, g = tr.value_and_grad(*[tg.tensor(p if n > 1 else float(p[0])) for p in part])
        vals.append(np.atleast_1d(v.numpy()))
        g = g if isinstance(g, tuple) else (g,)
        for j in range(len(arrs)):
            grads[j].append(np.atleast_1d(g[j].numpy()))
    return np.concatenate(vals), [np.concatenate(g) for g in grads]


def _paths(op, arrs):
    """{path: (values, gradients)}, each over all of ``arrs``."""
    small = _chunks(arrs, 7)
    large = _tile(arrs, 5000)
    n = arrs[0].size
    cut = lambda vg: (vg[0][:n], [g[:n] for g in vg[1]])   # noqa: E731
    at7 = _compiled(op.name, arrs, 7)
    paths = {
        "0-d": _zero_d(op.name, arrs),
        "0-d compiled": _compiled(op.name, arrs, 1),
        "7 eager": _join([_eager(op.name, c) for c in small]),
        "7 replayed": _join([_replayed(op.name, c) for c in small]),
        "7 compiled (gradients)": (None, at7[1]),
        "5000 eager": cut(_eager(op.name, large)),
        "5000 replayed": cut(_replayed(op.name, large)),
    }
    return {p: (None if v is None else v[:n], [x[:n] for x in g]) for p, (v, g) in paths.items()}


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
                             f"{[float(a[k]) for a in arrs]}: {got[k]!r} against {want[k]!r}")


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
def test_every_path_gives_one_answer_and_pytorchs(op):
    arrs = _inputs(op)
    with np.errstate(all="ignore"):
        want_v, want_g = _torch(op.name, arrs)
    paths = _paths(op, arrs)
    base_v, base_g = paths["0-d"]
    tol = ULP if _uses_math(op) else 0
    rtol = GRAD_RTOL if tol else 0.0
    for path, (v, g) in paths.items():
        ulp = tol if path.startswith("5000") else 0
        if v is not None:
            _check(f"{op.name} value, {path} against 0-d", v, base_v, arrs, ulp=ulp)
        for j in range(op.arity):
            _check(f"{op.name} gradient {j}, {path} against 0-d", g[j], base_g[j], arrs,
                   ulp=ulp, rtol=rtol if ulp else 0.0)
    tie_zero = op.name in ("maximum", "minimum")
    # PyTorch's logaddexp2 rounds its last multiply-add once (a fused multiply-add): at a
    # tie of -1 it gives -4.8e-17 where ours rounds to 0
    tiny = 5e-324 if op.name == "log1p" else 1e-16 if op.name == "logaddexp2" else 0.0
    for path, (v, g) in paths.items():
        if v is not None:
            _check(f"{op.name} value, {path} against PyTorch", v, want_v, arrs, ulp=ULP,
                   signed_zero=not tie_zero, tiny=tiny)
        for j in range(op.arity):
            _check(f"{op.name} gradient {j}, {path} against PyTorch", g[j], want_g[j], arrs,
                   ulp=ULP, signed_zero=False, rtol=rtol)


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
