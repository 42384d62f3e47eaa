"""The names added to follow PyTorch 2.13: ``atan`` / ``atan2`` (op-table entries; the
table-driven tests hold them to PyTorch on every path as well), their aliases and
in-place forms, ``narrow``, ``select``, ``repeat``, ``masked_fill(_)``, ``hstack`` /
``vstack`` / ``row_stack``, ``var_mean`` / ``std_mean``, ``chain_matmul``, ``cumsum`` /
``cumprod``, ``device`` and the device arguments, ``cuda``, ``equal`` / ``allclose`` /
``isclose``, ``detach`` and randint's spellings.

Each program runs with PyTorch and with tapegrad in float64: values, shapes, dtypes,
``grad_fn`` names and gradients must agree; every differentiable program passes
``gradcheck`` (some ``gradgradcheck``); wrong arguments raise PyTorch's error.
"""
import math
import pickle
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _quiet(f):
    """Run ``f`` with chain_matmul's deprecation warning (and NumPy's) silenced."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return f()


def _dtype_name(d):
    return str(d).rpartition(".")[2]


def _run(m, program, arrays, seed=0):
    """Values, dtypes, grad_fn names of ``program``'s outputs and the gradients of its
    leaves after backward of a fixed random weighting of the outputs."""
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = _quiet(lambda: program(m, *leaves))
    outs = out if isinstance(out, tuple) else (out,)
    rng = np.random.default_rng(seed)
    total = None
    for o in outs:
        term = (o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum()
        total = term if total is None else total + term
    total.backward()
    return ([o.detach().numpy() for o in outs], [_dtype_name(o.dtype) for o in outs],
            [o.grad_fn.name() if o.grad_fn is not None else None for o in outs],
            [None if x.grad is None else x.grad.numpy() for x in leaves])


def _inputs(shapes, seed, zeros=False):
    rng = np.random.default_rng(seed)
    arrays = [rng.uniform(-2.0, 2.0, s) for s in shapes]
    if zeros:     # some exact zeros (cumprod's hard case)
        arrays = [np.where(rng.random(s) < 0.3, 0.0, a) for a, s in zip(arrays, shapes)]
    return arrays


def _assert_same(program, arrays, rtol=1e-12):
    want = _run(torch, program, arrays)
    got = _run(tg, program, arrays)
    for w, g in zip(want[0], got[0]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-13)
    assert got[1] == want[1]
    assert got[2] == want[2]
    for w, g in zip(want[3], got[3]):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=1e-13)


# (shapes of the leaves, program(m, *leaves)); every one differentiable
PROGRAMS = {
    # atan / atan2, aliases, in-place forms
    "atan": ([(3, 4)], lambda m, a: a.atan()),
    "arctan": ([(5,)], lambda m, a: m.arctan(a)),
    "atan 0-d": ([()], lambda m, a: m.atan(a)),
    "atan_": ([(3, 4)], lambda m, a: (a * 1).atan_()),
    "torch.atan_": ([(4,)], lambda m, a: m.atan_(a * 1)),
    "arctan_": ([(2, 3)], lambda m, a: (a + 0).arctan_()),
    "atan2": ([(3, 4), (3, 4)], lambda m, a, b: m.atan2(a, b)),
    "arctan2 broadcast": ([(3, 1), (4,)], lambda m, a, b: a.arctan2(b)),
    "atan2 0-d": ([(), ()], lambda m, a, b: m.arctan2(a, b)),
    "atan2 0-d and 2-d": ([(), (2, 3)], lambda m, a, b: a.atan2(b)),
    "atan2_": ([(3, 4), (4,)], lambda m, a, b: (a * 1).atan2_(b)),
    "arctan2_": ([(3,), (3,)], lambda m, a, b: (a * 1).arctan2_(b)),
    # narrow, select
    "narrow": ([(3, 5)], lambda m, a: a.narrow(1, 1, 3)),
    "narrow negative": ([(3, 5, 2)], lambda m, a: m.narrow(a, -2, -3, 2)),
    "narrow empty": ([(3, 5)], lambda m, a: a.narrow(0, 3, 0).sum(0)),
    "narrow tensor start": ([(6,)], lambda m, a: a.narrow(0, m.tensor(2), 3)),
    "narrow all": ([(3, 4)], lambda m, a: a.narrow(0, 0, 3)),
    "select": ([(3, 4)], lambda m, a: a.select(1, -1)),
    "torch.select": ([(2, 3, 4)], lambda m, a: m.select(a, 0, 1)),
    "select 1-d": ([(5,)], lambda m, a: a.select(0, 3)),
    "select middle": ([(2, 3, 4)], lambda m, a: a.select(-2, 2)),
    # repeat
    "repeat": ([(3, 4)], lambda m, a: a.repeat(2, 1, 3)),
    "repeat tuple": ([(3, 4)], lambda m, a: a.repeat((1, 2))),
    "repeat 0-d": ([()], lambda m, a: a.repeat(2, 3)),
    "repeat 1-d": ([(3,)], lambda m, a: a.repeat(4)),
    "repeat zero": ([(3, 4)], lambda m, a: a.repeat(0, 2).sum(0)),
    # masked_fill
    "masked_fill": ([(3, 4)], lambda m, a: a.masked_fill(a > 0.5, 2.0)),
    "masked_fill int value": ([(3, 4)], lambda m, a: m.masked_fill(a, a < 0, 3)),
    "masked_fill nan": ([(3, 4)], lambda m, a: a.masked_fill(a < 0, math.nan)),
    "masked_fill broadcast mask": ([(3, 4)], lambda m, a: a.masked_fill(
        m.tensor([True, False, True, False]), -1.0)),
    "masked_fill wider mask": ([(4,)], lambda m, a: a.masked_fill(
        m.tensor([[True], [False]]), 1.5)),
    "masked_fill tensor value": ([(3, 4), ()], lambda m, a, v: a.masked_fill(a > 0, v)),
    "masked_fill value grad only": ([(2,)], lambda m, v: m.ones(3, 4).masked_fill(
        m.eye(3, 4) > 0, v[1] * 2)),
    "masked_fill_": ([(3, 4)], lambda m, a: (a * 1).masked_fill_(a > 0, 0.5)),
    "masked_fill_ tensor value": ([(3, 4), ()], lambda m, a, v: (a * 2).masked_fill_(
        a < 0, v)),
    # hstack, vstack, row_stack
    "hstack 1-d": ([(3,), (2,)], lambda m, a, b: m.hstack([a, b])),
    "hstack 2-d": ([(2, 3), (2, 1)], lambda m, a, b: m.hstack((a, b, a))),
    "hstack 0-d": ([(), (2,)], lambda m, a, b: m.hstack([a, b, a])),
    "vstack 1-d": ([(3,), (3,)], lambda m, a, b: m.vstack([a, b])),
    "vstack 1-d and 2-d": ([(3,), (2, 3)], lambda m, a, b: m.vstack([a, b])),
    "vstack 0-d": ([(), ()], lambda m, a, b: m.vstack([a, b])),
    "vstack 3-d": ([(1, 2, 2), (2, 2, 2)], lambda m, a, b: m.vstack([a, b])),
    "row_stack": ([(2,), (2,)], lambda m, a, b: m.row_stack([a, b])),
    # var_mean, std_mean
    "var_mean": ([(3, 4)], lambda m, a: m.var_mean(a)),
    "var_mean dim": ([(3, 4)], lambda m, a: m.var_mean(a, 1)),
    "var_mean keepdim": ([(3, 4, 2)], lambda m, a: m.var_mean(a, (0, 2), keepdim=True)),
    "var_mean unbiased": ([(3, 4)], lambda m, a: m.var_mean(a, dim=0, unbiased=False)),
    "var_mean correction": ([(3, 4)], lambda m, a: m.var_mean(a, 1, correction=0)),
    "var_mean flag": ([(3, 4)], lambda m, a: m.var_mean(a, False)),
    "var_mean keepdim all": ([(3, 4)], lambda m, a: m.var_mean(a, keepdim=True)),
    "std_mean": ([(3, 4)], lambda m, a: m.std_mean(a, 0)),
    "std_mean all": ([(5,)], lambda m, a: m.std_mean(a)),
    "std_mean correction": ([(2, 5)], lambda m, a: m.std_mean(a, -1, keepdim=True,
                                                              correction=2)),
    # chain_matmul
    "chain_matmul 1": ([(2, 3)], lambda m, a: m.chain_matmul(a)),
    "chain_matmul 2": ([(2, 3), (3, 4)], lambda m, a, b: m.chain_matmul(a, b)),
    "chain_matmul 3 (AB)C": ([(2, 3), (3, 4), (4, 5)], lambda m, a, b, c:
                             m.chain_matmul(a, b, c)),
    "chain_matmul 3 A(BC)": ([(5, 4), (4, 3), (3, 1)], lambda m, a, b, c:
                             m.chain_matmul(a, b, c)),
    "chain_matmul 5": ([(2, 6), (6, 3), (3, 5), (5, 1), (1, 4)], lambda m, *xs:
                       m.chain_matmul(*xs)),
    # cumsum, cumprod
    "cumsum": ([(3, 5)], lambda m, a: a.cumsum(1)),
    "cumsum dim 0": ([(7, 2)], lambda m, a: m.cumsum(a, 0)),
    "cumsum 3-d": ([(2, 9, 3)], lambda m, a: a.cumsum(dim=-2)),
    "cumsum 16": ([(16,)], lambda m, a: m.cumsum(a, dim=0)),
    "cumsum length 1": ([(3, 1)], lambda m, a: a.cumsum(1)),
    "cumsum 0-d": ([()], lambda m, a: a.cumsum(0)),
    "cumsum float32": ([(3, 4)], lambda m, a: a.cumsum(1, dtype=m.float32)),
    "cumprod": ([(3, 5)], lambda m, a: a.cumprod(1)),
    "cumprod dim 0": ([(6, 3)], lambda m, a: m.cumprod(a, 0)),
    "cumprod 3-d": ([(2, 5, 3)], lambda m, a: m.cumprod(a, dim=1)),
    "cumprod 0-d": ([()], lambda m, a: m.cumprod(a, -1)),
    "cumprod length 1": ([(1, 3)], lambda m, a: a.cumprod(0)),
}
# float32 results: compared to float32's precision
_RTOL = {"cumsum float32": 1e-6}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    _assert_same(program, _inputs(shapes, seed=len(name)), rtol=_RTOL.get(name, 1e-12))


# float32: finite differences too coarse; a nan fill: nan finite differences
_NO_GRADCHECK = {"cumsum float32", "masked_fill nan"}


@pytest.mark.parametrize("name", [n for n in PROGRAMS if n not in _NO_GRADCHECK])
def test_gradcheck(name):
    shapes, program = PROGRAMS[name]
    arrays = _inputs(shapes, seed=len(name) + 1)
    leaves = [tg.tensor(a, requires_grad=True) for a in arrays]
    assert _quiet(lambda: gradcheck(lambda *xs: program(tg, *xs), leaves))


@pytest.mark.parametrize("name", ["atan", "atan2", "narrow", "select", "repeat",
                                  "masked_fill tensor value", "hstack 2-d", "vstack 1-d",
                                  "var_mean dim", "std_mean", "chain_matmul 3 A(BC)",
                                  "cumsum", "cumprod", "cumprod 3-d"])
def test_gradgradcheck(name):
    shapes, program = PROGRAMS[name]
    leaves = [tg.tensor(a, requires_grad=True) for a in _inputs(shapes, seed=3)]
    assert _quiet(lambda: gradgradcheck(lambda *xs: program(tg, *xs), leaves))


# -- cumprod with zeros: PyTorch's backward handles them exactly ------------------------------
@pytest.mark.parametrize("row", [
    [2.0, 0.0, 3.0, 0.0, 4.0, 1.5, 0.0, 2.0],       # several zeros
    [0.0, 1.0, 2.0, 3.0, 4.0, 0.5, -1.0, 2.0],      # a zero first
    [1.0, 2.0, 3.0, -1.0, 4.0, 0.5, -1.0, 0.0],     # a zero last
    [0.0, 0.0, 0.0, 1.0, 2.0, 3.0, 4.0, 5.0],       # leading zeros
    [1.5, -2.0, 0.0, 0.0, 3.0],                     # two zeros side by side
    [0.0], [0.0, 0.0], [3.0, 0.0],
])
def test_cumprod_gradient_with_zeros_is_pytorchs(row):
    x = np.array(row)
    for arrays, program in (([x], lambda m, a: a.cumprod(0)),
                            ([np.stack([x, x[::-1], np.roll(x, 1)], 1)],
                             lambda m, a: m.cumprod(a, 0)),
                            ([np.stack([x, x[::-1]])], lambda m, a: a.cumprod(-1))):
        want, got = _run(torch, program, arrays), _run(tg, program, arrays)
        np.testing.assert_array_equal(got[0][0], want[0][0])
        np.testing.assert_allclose(got[3][0], want[3][0], rtol=1e-13, atol=0)


def test_cumprod_with_zeros_passes_gradcheck_and_gradgradcheck():
    x = tg.tensor([[2.0, 0.0, 3.0, 0.0, 4.0], [0.5, 1.0, 0.0, -2.0, 1.5]], requires_grad=True)
    assert gradcheck(lambda a: a.cumprod(1), [x])
    assert gradgradcheck(lambda a: a.cumprod(1), [x])


def test_scans_of_integers_and_bools_are_int64_as_pytorchs():
    for data, dt in (([1, 2, 3], tg.int32), ([1, 2, 3], tg.int64), ([True, True, False], None),
                     ([[1, 2], [3, 4]], tg.int16)):
        for name in ("cumsum", "cumprod"):
            for dim in (0, -1):
                t_in = torch.tensor(data, dtype=None if dt is None else getattr(torch, dt.name))
                want = getattr(torch, name)(t_in, dim)
                got = getattr(tg, name)(tg.tensor(data, dtype=dt), dim)
                assert _dtype_name(got.dtype) == _dtype_name(want.dtype) == "int64"
                np.testing.assert_array_equal(got.numpy(), want.numpy())
    want = torch.tensor([1, 2, 3]).cumsum(0, dtype=torch.float64)
    got = tg.tensor([1, 2, 3]).cumsum(0, dtype=tg.float64)
    assert got.dtype is tg.float64 and np.array_equal(got.numpy(), want.numpy())
    want = torch.tensor([1.5, 2.5]).cumsum(0, dtype=torch.int64)
    got = tg.tensor([1.5, 2.5]).cumsum(0, dtype=tg.int64)
    assert got.dtype is tg.int64 and np.array_equal(got.numpy(), want.numpy())
    assert tuple(tg.ones(0, 3).cumsum(0).shape) == (0, 3)


def test_integer_masked_fill_keeps_the_dtype():
    for data, value in (([1, 2, 3], 2.5), ([1, 2, 3], -7), ([True, False, True], 0)):
        mask = [True, False, True]
        want = torch.tensor(data).masked_fill(torch.tensor(mask), value)
        got = tg.tensor(data).masked_fill(tg.tensor(mask), value)
        assert _dtype_name(got.dtype) == _dtype_name(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())
    want = torch.tensor([1.0, 2.0], dtype=torch.float32).masked_fill(
        torch.tensor([True, False]), torch.tensor(2.5))
    got = tg.tensor([1.0, 2.0], dtype=tg.float32).masked_fill(tg.tensor([True, False]),
                                                               tg.tensor(2.5))
    assert got.dtype is tg.float32 and np.array_equal(got.numpy(), want.numpy())


def test_repeat_and_stacks_of_integer_tensors():
    a = [[1, 2], [3, 4]]
    for program in (lambda m: m.tensor(a).repeat(2, 3), lambda m: m.hstack([m.tensor(a)] * 2),
                    lambda m: m.vstack([m.tensor([5, 6]), m.tensor(a)]),
                    lambda m: m.hstack([m.tensor([1, 2]), m.tensor([0.5])])):
        want, got = program(torch), program(tg)
        assert _dtype_name(got.dtype) == _dtype_name(want.dtype)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_atan_and_atan2_names_and_a_python_number_operand():
    for name in ("atan", "arctan", "atan2", "arctan2", "atan_", "arctan_"):
        assert callable(getattr(tg, name)) and hasattr(torch, name)
    for name in ("atan", "arctan", "atan2", "arctan2", "atan_", "arctan_", "atan2_",
                 "arctan2_"):
        assert callable(getattr(tg.Tensor, name)) and hasattr(torch.Tensor, name)
    x = np.array([-1.5, 0.0, 2.0])
    a = tg.tensor(x, requires_grad=True)
    r = tg.atan2(a, 2.0)        # (PyTorch wants a tensor here; the value is the same)
    r.sum().backward()
    xt = torch.tensor(x, requires_grad=True)
    rt = torch.atan2(xt, torch.tensor(2.0))
    rt.sum().backward()
    np.testing.assert_allclose(r.detach().numpy(), rt.detach().numpy(), rtol=1e-15)
    np.testing.assert_allclose(a.grad.numpy(), xt.grad.numpy(), rtol=1e-15)
    assert r.grad_fn.name() == "Atan2Backward0"
    # integer inputs give the default float dtype, as PyTorch
    assert tg.atan(tg.tensor([1, 2])).dtype is tg.float64
    assert _dtype_name(torch.atan(torch.tensor([1, 2])).dtype) == "float64"
    assert tg.atan2(tg.tensor([1, 2]), tg.tensor([3, 4])).dtype is tg.float64


def test_atan2_gradient_at_the_origin_is_zero_as_pytorchs():
    pts = [(0.0, 0.0), (-0.0, 0.0), (1e-170, 0.0), (0.0, 5e-324), (1e-155, 0.0), (0.0, 1e-155)]
    for x, y in pts:
        grads = []
        for m in (torch, tg):
            a, b = m.tensor([x], requires_grad=True), m.tensor([y], requires_grad=True)
            _quiet(lambda: m.atan2(a, b).backward(m.tensor([1.5])))
            grads.append((a.grad.numpy(), b.grad.numpy()))
        for w, g in zip(*grads):
            np.testing.assert_array_equal(g, w)


def test_a_traced_function_of_the_new_ops_replays_and_compiles_as_pytorch_computes():
    def f(m, a, b):
        mask = a > 0
        h = m.hstack([a.narrow(1, 0, 2), a.select(0, 1).repeat(3, 1)[:, :1]])
        v, mu = m.var_mean(a, 1)
        return ((a.cumsum(1) * a.cumprod(0)).sum() + m.atan2(a, b).masked_fill(mask, 0.5).sum()
                + m.vstack([h, h]).sum() * v.sum() + mu.atan().sum())
    rng = np.random.default_rng(11)
    x0, y0 = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
    traced = tg.trace(lambda a, b: f(tg, a, b), tg.tensor(x0), tg.tensor(y0))
    for k in range(2):
        if k == 1:           # then as a compiled tape (LLVM)
            traced.compile()
            assert traced.records[0].native is not None
        x, y = rng.uniform(-1, 1, (3, 4)), rng.uniform(-1, 1, (3, 4))
        value, (gx, gy) = traced.value_and_grad(tg.tensor(x), tg.tensor(y))
        a, b = torch.tensor(x, requires_grad=True), torch.tensor(y, requires_grad=True)
        out = f(torch, a, b)
        out.backward()
        assert value.item() == pytest.approx(out.item(), rel=1e-12)
        np.testing.assert_allclose(gx.numpy(), a.grad.numpy(), rtol=1e-11, atol=1e-12)
        np.testing.assert_allclose(gy.numpy(), b.grad.numpy(), rtol=1e-11, atol=1e-12)


# -- errors: PyTorch's type and message -------------------------------------------------------
def _x(m):
    return m.arange(12.0).reshape(3, 4)


ERRORS = {
    "narrow 0-d": lambda m: m.tensor(1.0).narrow(0, 0, 1),
    "narrow length": lambda m: _x(m).narrow(1, 0, -1),
    "narrow start": lambda m: _x(m).narrow(1, 5, 0),
    "narrow negative start": lambda m: _x(m).narrow(1, -5, 0),
    "narrow too long": lambda m: _x(m).narrow(1, 3, 2),
    "narrow too long from the end": lambda m: _x(m).narrow(-1, -1, 2),
    "narrow dim": lambda m: _x(m).narrow(2, 0, 1),
    "select 0-d": lambda m: m.tensor(1.0).select(0, 0),
    "select index": lambda m: _x(m).select(1, 4),
    "select negative index": lambda m: _x(m).select(-1, -5),
    "select dim": lambda m: m.select(_x(m), 2, 0),
    "repeat too few": lambda m: _x(m).repeat(2),
    "repeat nothing": lambda m: _x(m).repeat(),
    "repeat negative": lambda m: _x(m).repeat(-1, 1),
    "masked_fill long mask": lambda m: _x(m).masked_fill(m.tensor([1, 0, 1, 0]), 5.0),
    "masked_fill int mask": lambda m: _x(m).masked_fill(m.tensor([1, 0, 1, 0],
                                                                 dtype=m.int32), 5.0),
    "masked_fill byte mask": lambda m: _x(m).masked_fill(m.tensor([1, 0, 1, 0],
                                                                  dtype=m.uint8), 5.0),
    "masked_fill float mask": lambda m: _x(m).masked_fill(_x(m), 5.0),
    "masked_fill value dims": lambda m: _x(m).masked_fill(_x(m) > 2, m.tensor([5.0, 6.0])),
    "masked_fill shapes": lambda m: _x(m).masked_fill(m.tensor([True, False]), 5.0),
    "masked_fill_ wider mask": lambda m: _x(m).masked_fill_(m.ones(2, 3, 4, dtype=m.bool), 5.0),
    "hstack empty": lambda m: m.hstack([]),
    "vstack empty": lambda m: m.vstack([]),
    "hstack a tensor": lambda m: m.hstack(_x(m)),
    "hstack sizes": lambda m: m.hstack([m.ones(2, 3), m.ones(3, 2)]),
    "vstack sizes": lambda m: m.vstack([m.ones(2, 3), m.ones(2, 2)]),
    "vstack vectors": lambda m: m.vstack([m.ones(2), m.ones(1)]),
    "var_mean int": lambda m: m.var_mean(m.tensor([1, 2])),
    "std_mean int": lambda m: m.std_mean(m.tensor([1, 2]), 0),
    "chain_matmul none": lambda m: m.chain_matmul(),
    "chain_matmul vector": lambda m: m.chain_matmul(m.ones(3), m.ones(3)),
    "chain_matmul shapes": lambda m: m.chain_matmul(m.ones(2, 3), m.ones(4, 1)),
    "chain_matmul dtypes": lambda m: m.chain_matmul(m.ones(2, 3), m.ones(3, 4, dtype=m.float32)),
    "chain_matmul list": lambda m: m.chain_matmul([m.ones(2, 3), m.ones(3, 4)]),
    "cumsum no dim": lambda m: _x(m).cumsum(),
    "cumprod no dim": lambda m: m.cumprod(_x(m)),
    "cumsum dim str": lambda m: _x(m).cumsum("a"),
    "cumsum dim float": lambda m: _x(m).cumsum(1.5),
    "cumsum dim": lambda m: _x(m).cumsum(2),
    "cumsum 0-d dim": lambda m: m.tensor(3.0).cumsum(1),
    "cumsum long with grad": lambda m: _x(m).requires_grad_().cumsum(1, dtype=m.int64),
    "equal number": lambda m: m.equal(_x(m), 1.0),
    "allclose number": lambda m: m.allclose(_x(m), 2.0),
    "isclose number": lambda m: m.isclose(_x(m), 1.0),
    "allclose dtypes": lambda m: m.allclose(m.ones(2), m.ones(2, dtype=m.float32)),
    "isclose dtypes": lambda m: m.isclose(m.ones(2, dtype=m.int64), m.ones(2)),
    "allclose shapes": lambda m: m.allclose(m.ones(2), m.ones(3)),
    "isclose rtol": lambda m: m.isclose(m.ones(2), m.ones(2), rtol=-1),
    "isclose atol": lambda m: m.isclose(m.ones(2), m.ones(2), atol=-1.5),
    "randint low >= high": lambda m: m.randint(5, 3, (2,)),
    "randint high 0": lambda m: m.randint(0, (2,)),
    "randint negative high": lambda m: m.randint(-5, (2,)),
    "randint bool": lambda m: m.randint(10, (2,), dtype=m.bool),
    "randint int8": lambda m: m.randint(-1000, 10, (2,), dtype=m.int8),
    "randint uint8": lambda m: m.randint(-1, 10, (2,), dtype=m.uint8),
    "randint int16": lambda m: m.randint(0, 2 ** 20, (2,), dtype=m.int16),
    "randint int32": lambda m: m.randint(1, 2 ** 40, (2,), dtype=m.int32),
    "randint grad": lambda m: m.randint(10, (2,), requires_grad=True),
    "randint float high": lambda m: m.randint(10.5, (2,)),
    "randint int size": lambda m: m.randint(10, 2),
    "randint keyword int size": lambda m: m.randint(10, size=3),
    "device empty": lambda m: m.device(""),
    "device type": lambda m: m.device("foo"),
    "device upper case": lambda m: m.device("CPU"),
    "device index text": lambda m: m.device("cpu:x"),
    "device leading zero": lambda m: m.device("cuda:01"),
    "device space": lambda m: m.device(" cpu"),
    "device two indices": lambda m: m.device("cpu:0:1"),
    "device negative": lambda m: m.device("cpu", -1),
    "device index twice": lambda m: m.device("cuda:0", 1),
    "device int": lambda m: m.device(3),
    "device index str": lambda m: m.device("cpu", "0"),
    "device nothing": lambda m: m.device(),
    "device None": lambda m: m.device(None),
}
# where PyTorch's message is one of its argument parser's long listings (or Python's own
# wording for a signature), only the exception type and the message's start are compared
_PREFIX = {"cumsum no dim": None, "cumprod no dim": None,
           "device nothing": 70, "device None": 70}


def _error(program, m):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            program(m)
        except Exception as e:      # noqa: BLE001 (any error: compared below)
            return e
    raise AssertionError(f"{m.__name__} raised nothing")


@pytest.mark.parametrize("name", ERRORS)
def test_wrong_arguments_raise_pytorchs_error(name):
    want, got = _error(ERRORS[name], torch), _error(ERRORS[name], tg)
    assert type(got) is type(want), (got, want)
    n = _PREFIX.get(name, 0)
    if n == 0:
        assert str(got) == str(want)
    elif n is not None:
        assert str(got)[:n] == str(want)[:n]


def test_masked_fill_of_an_unusable_value_is_a_type_error():
    for value in ("a", None, [1.0]):
        with pytest.raises(TypeError, match=r"masked_fill\(\) received an invalid combination"):
            _x(tg).masked_fill(_x(tg) > 2, value)
        with pytest.raises(TypeError, match=r"masked_fill\(\) received an invalid combination"):
            _x(torch).masked_fill(_x(torch) > 2, value)


def test_in_place_forms_refuse_a_leaf_that_requires_grad():
    for program in (lambda m, a: a.masked_fill_(a > 0, 1.0), lambda m, a: a.atan_(),
                    lambda m, a: a.atan2_(m.ones(3))):
        for m in (torch, tg):
            with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
                program(m, m.ones(3, requires_grad=True))


# -- whole-tensor comparisons -----------------------------------------------------------------
_A = [1.0, 2.0, math.nan, math.inf, -math.inf, 0.0, 1e-9, 100.0]
_B = [1.0, 2.0 + 1e-7, math.nan, math.inf, math.inf, -0.0, 0.0, 100.001]


@pytest.mark.parametrize("rtol, atol, equal_nan", [
    (1e-05, 1e-08, False), (1e-05, 1e-08, True), (0.0, 0.0, False), (0.0, 0.0, True),
    (1e-3, 0.0, False), (0.0, 1e-6, True), (1e-12, 1e-12, False)])
def test_isclose_and_allclose_are_pytorchs(rtol, atol, equal_nan):
    pairs = [(_A, _B), (_A[:2], _B[:2]), ([[1.0], [2.0]], [1.0, 2.0 + 1e-9]),
             ([1, 2, 3], [1, 3, 3]), ([True, False], [True, True]), ([1e20], [1e20 + 1e5])]
    for a, b in pairs:
        want_t = torch.isclose(torch.tensor(a), torch.tensor(b), rtol, atol, equal_nan)
        got_t = tg.isclose(tg.tensor(a), tg.tensor(b), rtol, atol, equal_nan)
        assert got_t.dtype is tg.bool
        np.testing.assert_array_equal(got_t.numpy(), want_t.numpy())
        got_m = tg.tensor(a).isclose(tg.tensor(b), rtol=rtol, atol=atol, equal_nan=equal_nan)
        np.testing.assert_array_equal(got_m.numpy(), want_t.numpy())
        want = torch.allclose(torch.tensor(a), torch.tensor(b), rtol, atol, equal_nan)
        assert tg.allclose(tg.tensor(a), tg.tensor(b), rtol, atol, equal_nan) is want
        assert tg.tensor(a).allclose(tg.tensor(b), rtol, atol, equal_nan) is want
    # integers with tolerances
    want = torch.isclose(torch.tensor([1, 2]), torch.tensor([1, 3]), atol=1)
    got = tg.isclose(tg.tensor([1, 2]), tg.tensor([1, 3]), atol=1)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_equal_is_pytorchs():
    cases = [([1.0, 2.0], [1.0, 2.0]), ([1.0, math.nan], [1.0, math.nan]), ([0.0], [-0.0]),
             ([1, 2], [1.0, 2.0]), ([[1, 2]], [1, 2]), ([1, 2], [1, 2, 3]), ([True], [1]),
             ([1.0, 2.0], [1.0, 2.5]), (3.0, 3.0), (3.0, [3.0])]
    for a, b in cases:
        want = torch.equal(torch.tensor(a), torch.tensor(b))
        assert tg.equal(tg.tensor(a), tg.tensor(b)) is want
        assert tg.tensor(a).equal(tg.tensor(b)) is want
    f32 = tg.tensor([1.0, 2.0], dtype=tg.float32)
    assert tg.equal(f32, tg.tensor([1.0, 2.0])) is torch.equal(
        torch.tensor([1.0, 2.0], dtype=torch.float32), torch.tensor([1.0, 2.0]))


def test_detach():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = tg.detach(x * 2)
    assert not y.requires_grad and y.grad_fn is None and y.is_leaf
    np.testing.assert_array_equal(y.numpy(), [2.0, 4.0])
    assert not torch.detach(torch.tensor([1.0], requires_grad=True) * 2).requires_grad


# -- devices ---------------------------------------------------------------------------------
@pytest.mark.parametrize("args", [("cpu",), ("cpu:0",), ("cpu", 0), ("cuda",), ("cuda:1",),
                                  ("cuda", 2), ("mps",), ("meta",), ("cpu", None),
                                  ("xla:3",)])
def test_a_device_reads_and_compares_as_pytorchs(args):
    want, got = torch.device(*args), tg.device(*args)
    assert (repr(got), str(got), got.type, got.index) == \
        (repr(want), str(want), want.type, want.index)
    assert tg.device(got) == got and hash(tg.device(got)) == hash(got)
    assert pickle.loads(pickle.dumps(got)) == got
    assert (got == tg.device("cpu")) is (want == torch.device("cpu"))
    assert (got != tg.device("cpu")) is (want != torch.device("cpu"))
    assert (got == str(got)) is (want == str(want))      # never equal to a string
    with pytest.raises(AttributeError):
        got.type = "cuda"


def test_every_tensor_is_on_the_cpu():
    x = tg.ones(2)
    xt = torch.ones(2)
    assert x.device == tg.device("cpu") and repr(x.device) == repr(xt.device)
    assert (x.device == tg.device("cpu:0")) is (xt.device == torch.device("cpu:0"))
    assert (x.is_cpu, x.is_cuda, x.get_device()) == (xt.is_cpu, xt.is_cuda, xt.get_device())
    assert x.cpu() is x and x.to("cpu") is x and x.to(tg.device("cpu")) is x
    assert x.to("cpu:0") is x and x.to(device="cpu") is x
    assert x.to(torch.device("cpu")) is x                # PyTorch's device objects read too
    assert tg.zeros(1, device=torch.device("cpu")).device == tg.device("cpu")
    with pytest.raises(RuntimeError, match="tapegrad runs on the CPU only"):
        x.to(torch.device("cuda"))
    assert x.to("cpu", copy=True) is not x
    assert x.to("cpu", tg.float32).dtype is tg.float32
    assert x.to(device="cpu", dtype=tg.float32).dtype is tg.float32
    assert x.to(tg.ones(1, dtype=tg.float32)).dtype is tg.float32
    y = tg.ones(2, requires_grad=True)
    z = y.to("cpu", tg.float32)
    assert z.grad_fn.name() == "ToCopyBackward0"
    assert tg.cuda.is_available() is torch.cuda.is_available() is False
    assert tg.cuda.device_count() == torch.cuda.device_count() == 0


_FACTORIES = {
    "tensor": lambda device: tg.tensor([1.0], device=device),
    "as_tensor": lambda device: tg.as_tensor([1.0], device=device),
    "zeros": lambda device: tg.zeros(2, device=device),
    "ones": lambda device: tg.ones(2, 3, device=device),
    "empty": lambda device: tg.empty(2, device=device),
    "full": lambda device: tg.full((2,), 1.5, device=device),
    "zeros_like": lambda device: tg.zeros_like(tg.ones(2), device=device),
    "ones_like": lambda device: tg.ones_like(tg.ones(2), device=device),
    "empty_like": lambda device: tg.empty_like(tg.ones(2), device=device),
    "full_like": lambda device: tg.full_like(tg.ones(2), 3.0, device=device),
    "rand_like": lambda device: tg.rand_like(tg.ones(2), device=device),
    "randn_like": lambda device: tg.randn_like(tg.ones(2), device=device),
    "arange": lambda device: tg.arange(3, device=device),
    "linspace": lambda device: tg.linspace(0, 1, 3, device=device),
    "eye": lambda device: tg.eye(2, device=device),
    "rand": lambda device: tg.rand(2, device=device),
    "randn": lambda device: tg.randn(2, device=device),
    "randint": lambda device: tg.randint(3, (2,), device=device),
    "new_zeros": lambda device: tg.ones(1).new_zeros(2, device=device),
    "new_ones": lambda device: tg.ones(1).new_ones(2, device=device),
    "new_tensor": lambda device: tg.ones(1).new_tensor([2.0], device=device),
}


@pytest.mark.parametrize("name", _FACTORIES)
def test_factories_take_a_cpu_device_and_refuse_others(name):
    for device in (None, "cpu", "cpu:0", tg.device("cpu")):
        assert _FACTORIES[name](device).device == tg.device("cpu")
    for device in ("cuda", "cuda:0", tg.device("mps"), "meta"):
        with pytest.raises(RuntimeError, match="tapegrad runs on the CPU only"):
            _FACTORIES[name](device)
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda"):
        _FACTORIES[name]("gpu")


def test_moving_to_another_device_or_making_it_the_default_raises():
    x = tg.ones(2)
    for program in (lambda: x.to("cuda"), lambda: x.to(tg.device("cuda", 0)),
                    lambda: x.to("cuda", tg.float32), lambda: x.to(device="mps"), x.cuda,
                    lambda: tg.set_default_device("cuda"), lambda: tg.device("cuda").__enter__()):
        with pytest.raises(RuntimeError, match="tapegrad runs on the CPU only"):
            program()
    tg.set_default_device("cpu")
    tg.set_default_device(None)
    tg.set_default_device(tg.device("cpu"))
    assert tg.get_default_device() == tg.device("cpu")
    assert repr(tg.get_default_device()) == repr(torch.get_default_device())
    with tg.device("cpu"):
        assert tg.zeros(1).device == tg.device("cpu")
    with pytest.raises(TypeError):
        x.to(3.5)


# -- randint ---------------------------------------------------------------------------------
def test_randint_takes_every_spelling_pytorch_does():
    tg.manual_seed(0)
    forms = [
        (lambda m: m.randint(10, (10,)), (10,), 0, 10),
        (lambda m: m.randint(3, 10, (4,)), (4,), 3, 10),
        (lambda m: m.randint(high=10, size=(3,)), (3,), 0, 10),
        (lambda m: m.randint(low=2, high=10, size=(3,)), (3,), 2, 10),
        (lambda m: m.randint(2, high=10, size=(3,)), (3,), 2, 10),
        (lambda m: m.randint(10, size=(2, 3)), (2, 3), 0, 10),
        (lambda m: m.randint(-5, 5, [4]), (4,), -5, 5),
        (lambda m: m.randint(10, ()), (), 0, 10),
        (lambda m: m.randint(10, m.Size([2])), (2,), 0, 10),
        (lambda m: m.randint(10, (2,), generator=None), (2,), 0, 10),
        (lambda m: m.randint(3, (1000,)), (1000,), 0, 3),
    ]
    for program, shape, lo, hi in forms:
        want, got = program(torch), program(tg)
        assert tuple(got.shape) == tuple(want.shape) == shape
        assert got.dtype is tg.int64 and _dtype_name(want.dtype) == "int64"
        v = got.numpy()
        assert v.min() >= lo and v.max() < hi
    assert set(tg.randint(3, (1000,)).numpy().tolist()) == {0, 1, 2}
    f = tg.randint(10, (2, 3), dtype=tg.float64, requires_grad=True)
    assert f.dtype is tg.float64 and f.requires_grad and f.is_leaf
    assert tg.randint(0, 2, (5,), dtype=tg.bool).dtype is tg.bool
    assert tg.randint(250, 256, (5,), dtype=tg.uint8).numpy().min() >= 250
    a = tg.randint(10, (5,), generator=tg.manual_seed(3)).numpy()
    b = tg.randint(10, (5,), generator=tg.manual_seed(3)).numpy()
    assert np.array_equal(a, b)


def test_randint_with_no_size_is_a_type_error():
    for program in (lambda m: m.randint(10), lambda m: m.randint(low=2, size=(3,)),
                    lambda m: m.randint(2, 5, 6, (3,))):
        for m in (torch, tg):
            with pytest.raises(TypeError):
                program(m)


@pytest.mark.parametrize("name", ["subtract", "multiply", "divide", "negative", "absolute",
                                  "arctan", "arctan2", "clip"])
def test_top_level_aliases_like_torch(name):
    import torch
    args = (tg.tensor([-1.5, 2.0]),) * (2 if name in ("subtract", "multiply", "divide",
                                                            "arctan2") else 1)
    targs = tuple(torch.tensor(a.numpy()) for a in args)
    extra = {"min": -1.0} if name == "clip" else {}
    np.testing.assert_allclose(getattr(tg, name)(*args, **extra).numpy(),
                               getattr(torch, name)(*targs, **extra).numpy(), rtol=1e-15)


def test_module_to_another_device_is_a_clear_error():
    m = tg.nn.Linear(2, 2)
    for move in (lambda: m.to("cuda"), lambda: m.cuda(), lambda: m.to(device="mps")):
        with pytest.raises(RuntimeError, match="CPU only"):
            move()
    assert m.to("cpu") is m and m.cpu() is m and m.to(tg.float32) is m
