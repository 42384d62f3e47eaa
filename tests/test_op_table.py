"""Per-op tests generated from the op table.

Elementwise ops: the forward value on every path (Python scalar fast path, NumPy
arrays, the compiled rule) against NumPy, and the gradient against central finite
differences on shapes (), (n,), (m, n) and broadcast pairs.  Structural ops: every
opcode of the table has a program here that records it and passes gradcheck.
"""
import math
import os

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck
from tapegrad.elementwise import FUNCTIONS, TENSOR_INPUT
from tapegrad.kernels import codegen
from tapegrad.kernels.forward import ew_map
from tapegrad.ops.table import BINARY, CODE, OPS, UNARY

RNG = np.random.default_rng(0)


def _inputs(domain, shape):
    lo, hi = domain
    return RNG.uniform(lo, hi, shape)


def _leaf(arr):
    return tg.tensor(arr, dtype=tg.float64, requires_grad=True)


# the ops that are div's rounding modes (DivBackward2)
ROUNDING = {"floor_divide": "floor", "div_trunc": "trunc"}


def _call(op, *args):
    if op.name == "clamp":
        return tg.clamp(args[0], -0.5, 0.7)
    if op.name in ROUNDING:           # (tg.floor_divide has no derivative, as PyTorch's)
        return tg.div(*args, rounding_mode=ROUNDING[op.name])
    if op.name in ("logaddexp", "logaddexp2") + TENSOR_INPUT:    # (the top-level functions
        return FUNCTIONS[op.name](*args)                       # take tensors only there)
    return getattr(tg, op.name)(*args)


# NumPy's own forms, written apart from the table (a test of the table's rules)
_NUMPY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
    "pow": np.power, "maximum": np.maximum, "minimum": np.minimum, "neg": np.negative,
    "exp": np.exp, "log": np.log, "log1p": np.log1p, "expm1": np.expm1, "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x), "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "tanh": np.tanh, "sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x)),
    "relu": lambda x: np.maximum(x, 0.0), "abs": np.abs, "sign": np.sign,
    "square": np.square, "reciprocal": np.reciprocal,
    "softplus": lambda x: np.where(x > 20.0, x, np.logaddexp(0.0, x)),
    "erf": np.vectorize(math.erf), "clamp": lambda x: np.clip(x, -0.5, 0.7),
    "sinc": np.sinc, "logit": lambda x: np.log(x) - np.log1p(-x), "hypot": np.hypot,
    "xlogy": lambda x, y: np.where(x == 0, 0.0, x * np.log(y)),
    "atan": np.arctan, "atan2": np.arctan2, "trunc": np.trunc,
    "frac": lambda x: x - np.trunc(x), "fmod": np.fmod, "remainder": np.remainder,
    "floor_divide": np.floor_divide, "div_trunc": lambda x, y: np.trunc(x / y), "logaddexp": np.logaddexp, "logaddexp2": np.logaddexp2,
}


def _np_reference(op, *arrs):
    return _NUMPY[op.name](*arrs)


def test_generated_kernels_are_made_from_the_current_sources():
    """The package writes them at import, to its kernel cache folder (a stamp of their
    sources heads each)."""
    from tapegrad.kernels import FOLDER
    for name, text in codegen.render().items():
        with open(os.path.join(FOLDER, name)) as f:
            assert f.read() == text, name


def test_one_list_of_math_functions():
    """The block kernels' vector math is a subset of the rules' math functions (one list:
    ops.rules.MATH), and every function a rule calls is in it."""
    import ast as _ast
    from tapegrad.kernels import vmath
    from tapegrad.ops import rules
    assert set(vmath.FUNCTIONS) <= set(rules.MATH)
    for op in OPS:
        for text in (op.fwd, op.gx, op.gy):
            for n in _ast.walk(_ast.parse(text or "0", mode="eval")):
                if isinstance(n, _ast.Attribute) and getattr(n.value, "id", "") == "math" \
                        and isinstance(getattr(n, "ctx", None), _ast.Load) and n.attr not in \
                        ("pi", "inf", "nan"):
                    assert n.attr in rules.MATH, (op.name, n.attr)


def test_codes_are_explicit_unique_and_inside_their_kinds_band():
    from dataclasses import replace
    from tapegrad.ops import table
    assert len({op.name for op in OPS}) == len(OPS) == len({op.code for op in OPS})
    bands = sorted(table.BANDS.values())
    assert all(a[1] < b[0] for a, b in zip(bands, bands[1:]))      # ordered, disjoint
    for op in OPS:
        lo, hi = table.BANDS[op.kind]
        assert lo <= op.code <= hi and table.BY_CODE[op.code] is op
    with pytest.raises(AssertionError, match="outside the ew band"):
        table._check(OPS[:1] + (replace(OPS[1], code=table.BANDS["source"][0]),))
    with pytest.raises(AssertionError, match="unique"):
        table._check(OPS[:1] + (replace(OPS[1], code=OPS[0].code),))


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shape", [(), (5,), (3, 4)], ids=str)
def test_forward_matches_numpy(op, shape):
    arrs = [_inputs(op.domain, shape)] + ([_inputs(op.domain_y, shape)] if op.arity == 2 else [])
    expected = _np_reference(op, *arrs)
    got = _call(op, *[tg.tensor(a) for a in arrs])
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-14)
    if op.name != "clamp":   # the compiled rule (replay's forward) agrees as well
        np.testing.assert_allclose(ew_map(CODE[op.name], *arrs), expected, rtol=1e-12,
                                   atol=1e-14)


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)], ids=str)
def test_gradcheck_same_shape(op, shape):
    arrs = [_inputs(op.domain, shape)] + ([_inputs(op.domain_y, shape)] if op.arity == 2 else [])
    if op.name in ("abs", "sign", "relu"):
        arrs[0] = np.where(np.abs(arrs[0]) < 0.05, 0.3, arrs[0])  # away from the kink
    if op.name == "clamp":
        arrs[0] = np.where(np.abs(arrs[0] + 0.5) < 0.05, 0.1, arrs[0])
        arrs[0] = np.where(np.abs(arrs[0] - 0.7) < 0.05, 0.1, arrs[0])
    if op.name in ("maximum", "minimum"):
        arrs[1] = np.where(np.abs(arrs[0] - arrs[1]) < 0.05, arrs[0] + 0.3, arrs[1])
    assert gradcheck(lambda *xs: _call(op, *xs), [_leaf(a) for a in arrs])


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shapes", [((3, 1), (1, 4)), ((4,), (3, 4)), ((), (3,)), ((2, 3), ())],
                         ids=str)
def test_gradcheck_broadcast(op, shapes):
    xs = [_leaf(_inputs(op.domain, shapes[0])), _leaf(_inputs(op.domain_y, shapes[1]))]
    if op.name in ("maximum", "minimum"):
        xs[1] = _leaf(_inputs(op.domain_y, shapes[1]) + 5.0)
    assert gradcheck(lambda a, b: _call(op, a, b), xs)


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.name)
def test_python_number_on_the_right(op):
    x = _inputs(op.domain, (3,))
    c = 1.7
    right = _call(op, _leaf(x), c)
    np.testing.assert_allclose(right.detach().numpy(), _np_reference(op, x, np.full(3, c)))
    assert gradcheck(lambda a: _call(op, a, c), [_leaf(x)])


# (PyTorch has no derivative of a Python number % a tensor: tests/test_division_family_torch.py)
@pytest.mark.parametrize("op", [op for op in BINARY if op.name != "remainder"],
                         ids=lambda op: op.name)
def test_python_number_on_the_left(op):
    c = 1.7
    y = _inputs(op.domain_y, (3,))
    left = _call(op, c, _leaf(y))
    np.testing.assert_allclose(left.detach().numpy(), _np_reference(op, np.full(3, c), y))
    assert gradcheck(lambda b: _call(op, c, b), [_leaf(y)])


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
def test_scalar_fast_path_matches_array_path(op):
    """0-d float64 operands take the Python-float path; it must agree with NumPy's."""
    a = float(_inputs(op.domain, ()))
    b = float(_inputs(op.domain_y, ()))
    args = [a] if op.arity == 1 else [a, b]
    xs = [_leaf(np.float64(v)) for v in args]
    fast = _call(op, *xs)
    fast.backward()
    xs1 = [_leaf(np.array([v])) for v in args]
    arr = _call(op, *xs1)
    arr.sum().backward()
    assert fast.item() == pytest.approx(arr.item(), rel=1e-14, abs=1e-15)
    for s, v in zip(xs, xs1):
        assert s.grad.item() == pytest.approx(v.grad.item(), rel=1e-12, abs=1e-14)


# -- structural ops: one program per opcode -------------------------------------------------
STRUCTURAL = {
    "where": ([(3, 4), (3, 4)], lambda a, b: tg.where(a > 0, a, b)),
    "expand": ([(3, 1)], lambda a: a.expand(2, 3, 4)),
    "permute": ([(2, 3, 4)], lambda a: a.permute(2, 0, 1)),
    "t": ([(3, 4)], lambda a: a.t()),
    "transpose": ([(2, 3, 4)], lambda a: a.transpose(0, 2)),
    "select": ([(3, 4)], lambda a: a[1]),
    "slice": ([(4, 5)], lambda a: a[1:3, ::2]),
    "split": ([(3, 5)], lambda a: a.split(2, 1)[2]),
    "unbind": ([(3, 4)], lambda a: a.unbind(1)[2]),
    "view": ([(3, 4)], lambda a: a.view(2, 6)),
    "squeeze": ([(3, 1, 4)], lambda a: a.squeeze()),
    "squeeze_dim": ([(3, 1, 4)], lambda a: a.squeeze(1)),
    "unsqueeze": ([(3, 4)], lambda a: a.unsqueeze(-1)),
    "squeeze_mm": ([(4,), (4, 3)], lambda a, b: a @ b),
    "clone": ([(3, 4)], lambda a: a.clone()),
    "index": ([(4, 3)], lambda a: a[[0, 2, 2], 1:]),
    "max_dim": ([(3, 4)], lambda a: a.max(1).values),
    "min_dim": ([(3, 4)], lambda a: a.min(0, keepdim=True)[0]),
    "sum": ([(3, 4)], lambda a: a.sum()),
    "sum_dim": ([(2, 3, 4)], lambda a: a.sum((0, 2), keepdim=True)),
    "mean": ([(3, 4)], lambda a: a.mean()),
    "mean_dim": ([(3, 4)], lambda a: a.mean(-1)),
    "amax": ([(3, 4)], lambda a: a.amax(0)),
    "amin": ([(3, 4)], lambda a: a.amin((0, 1))),
    "max_all": ([(3, 4)], lambda a: a.max()),
    "min_all": ([(3, 4)], lambda a: a.min()),
    "prod": ([(3, 4)], lambda a: a.prod()),
    "prod_dim": ([(3, 4)], lambda a: a.prod(1)),
    "mm": ([(3, 4), (4, 2)], lambda a, b: a.mm(b)),
    "bmm": ([(2, 3, 4), (2, 4, 2)], lambda a, b: tg.bmm(a, b)),
    "mv": ([(3, 4), (4,)], lambda a, b: tg.mv(a, b)),
    "dot": ([(4,), (4,)], lambda a, b: tg.dot(a, b)),
    "matmul": ([(2, 3, 4), (4, 2)], lambda a, b: a @ b),
    "cat": ([(3, 4), (3, 2)], lambda a, b: tg.cat([a, b], dim=1)),
    "stack": ([(3, 4), (3, 4)], lambda a, b: tg.stack([a, b], dim=1)),
    "softmax": ([(2, 3, 4)], lambda a: tg.softmax(a, dim=1)),
    "log_softmax": ([(3, 4)], lambda a: tg.log_softmax(a, dim=-1)),
    "logsumexp": ([(2, 3, 4)], lambda a: a.logsumexp(1, keepdim=True)),
    # operands of different shapes, read in place (a row first, a leading 1; two ways)
    "broadcast_add": ([(2, 3, 4), (1, 4)], lambda a, b: b + a),
    "broadcast_sub": ([(2, 1, 4), (3, 1)], lambda a, b: a - b),
    "broadcast_mul": ([(4, 1, 3), (2, 3)], lambda a, b: a * b),
    "broadcast_div": ([(3, 4), (4,)], lambda a, b: a / (b.abs() + 1.0)),
}
SOURCES = {"leaf", "const", "external"}
CHECKED_ELSEWHERE = {"to_copy",   # float32 round trips are too coarse for gradcheck
                     "function",  # custom Functions: tests/test_function.py
                     # recorded only while tracing: tests/test_replay.py
                     "lt", "le", "gt", "ge", "eq", "ne", "detach"}


def test_every_opcode_has_a_test():
    covered = {op.name for op in UNARY + BINARY} | set(STRUCTURAL) | SOURCES | CHECKED_ELSEWHERE
    assert covered == {op.name for op in OPS}


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_structural_gradcheck(name):
    shapes, fn = STRUCTURAL[name]
    xs = [_leaf(RNG.uniform(-1, 1, s)) for s in shapes]
    out = fn(*xs)
    assert out.grad_fn is not None
    # the program records the opcode under test
    t = out.tape
    t.flush()
    assert CODE[name] in set(t.OP[:t.next].tolist())
    assert gradcheck(fn, xs)


def test_prod_with_zeros():
    for arr in ([1.0, 0.0, 3.0], [0.0, 0.0, 2.0], [2.0, 3.0, 4.0]):
        x = _leaf(np.array(arr))
        x.prod().backward()
        others = [np.prod(np.delete(arr, k)) for k in range(3)]
        np.testing.assert_allclose(x.grad.numpy(), others)


def test_amax_shares_ties_evenly():
    x = _leaf(np.array([1.0, 3.0, 3.0, 2.0]))
    x.amax().backward()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0.5, 0.5, 0])


def test_nondifferentiable_points_follow_pytorch():
    for fn, expect in ((lambda x: x.relu(), 0.0), (lambda x: x.abs(), 0.0),
                       (lambda x: x.sqrt(), math.inf)):
        x = tg.tensor(0.0, requires_grad=True)
        fn(x).backward()
        assert x.grad.item() == expect


def test_to_copy_gradient_crosses_dtypes():
    x = _leaf(np.array([1.5, -2.0]))
    y = x.to(tg.float32)
    assert y.dtype is tg.float32 and y.grad_fn.name() == "ToCopyBackward0"
    (y * y).sum().backward()
    assert x.grad.dtype is tg.float64
    np.testing.assert_allclose(x.grad.numpy(), [3.0, -4.0])
