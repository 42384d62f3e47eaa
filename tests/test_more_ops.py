"""The names of ``tapegrad/more_ops.py`` and ``tapegrad.special``: einsum,
repeat_interleave, cross / linalg.cross, roll, special.gammaln / multigammaln, gather,
index_select, flip, tril / triu, diag, movedim, unflatten, meshgrid, sort / argsort /
topk, floor / ceil / round, nan_to_num, lerp, and the results without a graph.

Each program runs with PyTorch and with tapegrad in float64: values, shapes, dtypes and
gradients must agree; every differentiable program passes ``gradcheck``; wrong
arguments raise PyTorch's error.
"""
import math
import warnings

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _dtype_name(d):
    return str(d).rpartition(".")[2]


def _quiet(f):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return f()


def _run(m, program, arrays, seed=0):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = _quiet(lambda: program(m, *leaves))
    outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
    rng = np.random.default_rng(seed)
    total = None
    for o in outs:
        if not o.dtype.is_floating_point:
            continue
        term = (o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum()
        total = term if total is None else total + term
    if total is not None and total.requires_grad:
        total.backward()
    return ([o.detach().numpy() for o in outs], [_dtype_name(o.dtype) for o in outs],
            [None if x.grad is None else x.grad.numpy() for x in leaves])


def _inputs(shapes, seed=0, positive=False):
    rng = np.random.default_rng(seed)
    lo = 0.3 if positive else -2.0
    return [rng.uniform(lo, 2.5, s) for s in shapes]


def _assert_same(program, arrays, rtol=1e-12, atol=1e-13):
    want = _run(torch, program, arrays)
    got = _run(tg, program, arrays)
    assert len(got[0]) == len(want[0])
    for w, g in zip(want[0], got[0]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)
    assert got[1] == want[1]
    for w, g in zip(want[2], got[2]):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol)


def _i(m, values):
    return m.tensor(values, dtype=m.int64)


# (shapes of the leaves, program(m, *leaves)); every one differentiable
PROGRAMS = {
    # einsum
    "einsum matmul": ([(2, 3), (3, 4)], lambda m, a, b: m.einsum("ij,jk->ik", a, b)),
    "einsum implicit": ([(2, 3), (3, 4)], lambda m, a, b: m.einsum("ij,jk", a, b)),
    "einsum list": ([(2, 3), (3, 4)], lambda m, a, b: m.einsum("ij,jk->ki", [a, b])),
    "einsum transpose": ([(2, 3)], lambda m, a: m.einsum("ij->ji", a)),
    "einsum implicit transpose": ([(2, 3)], lambda m, a: m.einsum("ba", a)),
    "einsum trace": ([(3, 3)], lambda m, a: m.einsum("ii", a)),
    "einsum diagonal": ([(3, 3)], lambda m, a: m.einsum("ii->i", a)),
    "einsum sum": ([(2, 3)], lambda m, a: m.einsum("ij->", a)),
    "einsum outer": ([(3,), (4,)], lambda m, a, b: m.einsum("i,j->ij", a, b)),
    "einsum dot": ([(4,), (4,)], lambda m, a, b: m.einsum("i,i->", a, b)),
    "einsum batch": ([(2, 3, 4), (2, 4, 5)], lambda m, a, b: m.einsum("bij,bjk->bik", a, b)),
    "einsum three": ([(2, 3), (3, 4), (4,)],
                     lambda m, a, b, c: m.einsum("ij,jk,k->i", a, b, c)),
    "einsum ellipsis": ([(2, 3, 4), (4, 5)], lambda m, a, b: m.einsum("...j,jk->...k", a, b)),
    "einsum ellipsis broadcast": ([(2, 1, 3), (4, 3)],
                                  lambda m, a, b: m.einsum("...i,...i->...", a, b)),
    "einsum ellipsis implicit": ([(2, 3, 4)], lambda m, a: m.einsum("...ij", a)),
    "einsum spaces": ([(2, 3), (3,)], lambda m, a, b: m.einsum("i j , j -> i", a, b)),
    # repeat_interleave
    "repeat_interleave int": ([(2, 3)], lambda m, a: a.repeat_interleave(2)),
    "repeat_interleave dim": ([(2, 3)], lambda m, a: m.repeat_interleave(a, 3, dim=1)),
    "repeat_interleave tensor": ([(3, 2)], lambda m, a: a.repeat_interleave(
        _i(m, [1, 0, 2]), dim=0)),
    "repeat_interleave one count": ([(3,)], lambda m, a: a.repeat_interleave(_i(m, [2]), 0)),
    # cross
    "cross dim": ([(4, 3), (4, 3)], lambda m, a, b: m.cross(a, b, dim=1)),
    "cross method": ([(3, 2), (3, 2)], lambda m, a, b: a.cross(b, dim=0)),
    "cross default": ([(2, 3), (2, 3)], lambda m, a, b: m.cross(a, b)),
    "linalg.cross": ([(2, 3), (1, 3)], lambda m, a, b: m.linalg.cross(a, b)),
    "linalg.cross dim": ([(3, 2), (3, 2)], lambda m, a, b: m.linalg.cross(a, b, dim=0)),
    # roll
    "roll": ([(5,)], lambda m, a: m.roll(a, 2)),
    "roll flat": ([(2, 3)], lambda m, a: a.roll(-1)),
    "roll dims": ([(3, 4)], lambda m, a: a.roll((1, -3), (0, 1))),
    "roll big": ([(3, 4)], lambda m, a: m.roll(a, 7, dims=1)),
    # special
    "gammaln": ([(2, 3)], lambda m, a: m.special.gammaln(a * 3)),
    "gammaln negative": ([(5,)], lambda m, a: m.special.gammaln(a - 4.1)),
    "multigammaln": ([(2, 3)], lambda m, a: m.special.multigammaln(a.abs() + 1.5, 3)),
    "mvlgamma": ([(4,)], lambda m, a: m.mvlgamma(a.abs() + 1.0, 2)),
    "lgamma": ([(4,)], lambda m, a: (a + 3).lgamma()),
    # gather, index_select, flip
    "gather": ([(3, 4)], lambda m, a: m.gather(a, 1, _i(m, [[0, 0], [3, 1], [2, 2]]))),
    "gather dim 0": ([(3, 4)], lambda m, a: a.gather(0, _i(m, [[2, 1, 0, 0]]))),
    "gather 3-d": ([(2, 3, 2)], lambda m, a: a.gather(-2, _i(m, [[[0, 1]], [[2, 2]]]))),
    "index_select": ([(3, 4)], lambda m, a: m.index_select(a, 1, _i(m, [3, 0, 3]))),
    "index_select dim 0": ([(3, 4)], lambda m, a: a.index_select(0, _i(m, [2, 2]))),
    "flip": ([(3, 4)], lambda m, a: m.flip(a, [0])),
    "flip two": ([(2, 3, 4)], lambda m, a: a.flip((0, -1))),
    # triangles, diagonals
    "tril": ([(3, 4)], lambda m, a: m.tril(a)),
    "tril offset": ([(4, 3)], lambda m, a: a.tril(-1)),
    "triu": ([(3, 4)], lambda m, a: a.triu()),
    "triu batch": ([(2, 3, 3)], lambda m, a: m.triu(a, 1)),
    "diag 1-d": ([(3,)], lambda m, a: m.diag(a)),
    "diag 1-d offset": ([(3,)], lambda m, a: a.diag(2)),
    "diag 1-d negative": ([(2,)], lambda m, a: m.diag(a, -1)),
    "diag 2-d": ([(3, 4)], lambda m, a: m.diag(a)),
    "diag 2-d offset": ([(3, 4)], lambda m, a: a.diag(1)),
    "diag 2-d negative": ([(4, 3)], lambda m, a: a.diag(-2)),
    # views
    "movedim": ([(2, 3, 4)], lambda m, a: m.movedim(a, 0, -1)),
    "movedim tuple": ([(2, 3, 4)], lambda m, a: a.movedim((0, 1), (2, 0))),
    "moveaxis": ([(2, 3, 4)], lambda m, a: a.moveaxis(2, 0)),
    "unflatten": ([(2, 6)], lambda m, a: a.unflatten(1, (2, 3))),
    "unflatten -1": ([(6, 2)], lambda m, a: m.unflatten(a, 0, (-1, 2))),
    "meshgrid ij": ([(2,), (3,)], lambda m, a, b: m.meshgrid(a, b, indexing="ij")),
    "meshgrid xy": ([(2,), (3,), (4,)], lambda m, a, b, c: m.meshgrid(a, b, c, indexing="xy")),
    "meshgrid list": ([(2,), (3,)], lambda m, a, b: m.meshgrid([a, b], indexing="xy")),
    "type_as": ([(2, 3)], lambda m, a: a.type_as(a * 2)),
    # sorting
    "sort": ([(3, 5)], lambda m, a: m.sort(a)),
    "sort descending": ([(3, 5)], lambda m, a: a.sort(dim=0, descending=True)),
    "sort values": ([(6,)], lambda m, a: a.sort().values),
    "sort stable": ([(3, 5)], lambda m, a: m.sort(a.round(), stable=True, dim=1)),
    "topk": ([(3, 5)], lambda m, a: m.topk(a, 2)),
    "topk smallest": ([(4, 3)], lambda m, a: a.topk(2, dim=0, largest=False)),
    "topk values": ([(6,)], lambda m, a: a.topk(3).values),
    # rounding, replacing
    "floor": ([(3, 4)], lambda m, a: m.floor(a * 2) + a),
    "ceil": ([(3, 4)], lambda m, a: (a * 2).ceil()),
    "round": ([(3, 4)], lambda m, a: m.round(a * 2) * a),
    "round decimals": ([(3, 4)], lambda m, a: a.round(decimals=1)),
    "nan_to_num": ([(4,)], lambda m, a: m.nan_to_num(
        a * m.tensor([1.0, math.inf, -math.inf, math.nan]))),
    "nan_to_num values": ([(4,)], lambda m, a: (a * m.tensor(
        [1.0, math.inf, -math.inf, math.nan])).nan_to_num(nan=1.5, posinf=9.0, neginf=-9.0)),
    "lerp": ([(3,), (3,)], lambda m, a, b: m.lerp(a, b, 0.3)),
    "lerp big weight": ([(3,), (3,)], lambda m, a, b: a.lerp(b, 0.75)),
    "lerp tensor weight": ([(3,), (3,), (3,)], lambda m, a, b, w: m.lerp(a, b, w)),
    "lerp broadcast": ([(2, 3), (3,), (2, 1)], lambda m, a, b, w: a.lerp(b, w)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_values_and_gradients_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    _assert_same(program, _inputs(shapes), rtol=1e-10 if "gamma" in name else 1e-12,
                 atol=1e-11 if "gamma" in name else 1e-13)


NOT_SMOOTH = ("floor", "ceil", "round", "nan_to_num", "sort stable")


@pytest.mark.parametrize("name", sorted(n for n in PROGRAMS if not n.startswith(NOT_SMOOTH)))
def test_gradcheck(name):
    shapes, program = PROGRAMS[name]
    leaves = [tg.tensor(a, requires_grad=True) for a in _inputs(shapes, seed=1)]

    def f(*xs):
        out = program(tg, *xs)
        outs = tuple(out) if isinstance(out, (tuple, list)) else (out,)
        outs = tuple(o for o in outs if o.dtype.is_floating_point)
        return outs if len(outs) > 1 else outs[0]
    assert _quiet(lambda: gradcheck(f, leaves))


def test_rounding_has_zero_gradient_like_pytorch():
    for m in (torch, tg):
        x = m.tensor([0.4, 1.6, -2.5], requires_grad=True)
        (x.floor() + x.ceil() + x.round()).sum().backward()
        assert x.grad.tolist() == [0.0, 0.0, 0.0]


VALUE_PROGRAMS = {
    "isnan": lambda m: m.isnan(m.tensor([1.0, math.nan, math.inf])),
    "isinf": lambda m: m.tensor([1.0, math.nan, -math.inf]).isinf(),
    "isfinite": lambda m: m.isfinite(m.tensor([1.0, math.nan, math.inf])),
    "isnan int": lambda m: m.isnan(m.tensor([1, 2])),
    "logical_and": lambda m: m.logical_and(m.tensor([0.0, 1.0, 2.0]), m.tensor([1, 0, 3])),
    "logical_or": lambda m: m.tensor([0, 0, 1]).logical_or(m.tensor([[0], [1]])),
    "logical_not": lambda m: m.logical_not(m.tensor([0.0, -1.0])),
    "logical_xor": lambda m: m.tensor([True, False]).logical_xor(m.tensor([True, True])),
    "argsort": lambda m: m.argsort(m.tensor([[3.0, 1.0, 2.0, 1.0], [0.0, 0.0, -1.0, 5.0]])),
    "argsort descending stable": lambda m: m.tensor([1.0, 3.0, 1.0, 3.0, 2.0]).argsort(
        descending=True, stable=True),
    "sort nan": lambda m: m.sort(m.tensor([2.0, math.nan, 1.0, 2.0]), stable=True),
    "sort nan descending": lambda m: m.tensor([2.0, math.nan, 1.0, 2.0]).sort(
        descending=True, stable=True),
    "sort int": lambda m: m.tensor([3, 1, 2]).sort(),
    "floor int": lambda m: m.floor(m.tensor([3, -1])),
    "round half even": lambda m: m.round(m.tensor([0.5, 1.5, 2.5, -0.5])),
    "repeat_interleave counts": lambda m: m.repeat_interleave(m.tensor([2, 0, 3])),
    "repeat_interleave int tensor": lambda m: m.tensor([[1, 2], [3, 4]]).repeat_interleave(
        2, dim=0),
    "gather int": lambda m: m.tensor([[1, 2], [3, 4]]).gather(1, m.tensor([[1, 1], [0, 1]])),
    "tril int": lambda m: m.tril(m.tensor([[1, 2], [3, 4]])),
    "flip int": lambda m: m.tensor([1, 2, 3]).flip(0),
    "einsum int": lambda m: m.einsum("ij,j->i", m.tensor([[1, 2], [3, 4]]), m.tensor([1, 1])),
    "lerp float32": lambda m: m.lerp(m.tensor([1.0], dtype=m.float32),
                                     m.tensor([3.0], dtype=m.float32), 0.5),
    "new_empty": lambda m: m.tensor([1, 2]).new_empty(2, 3).shape,
    "new_empty dtype": lambda m: m.tensor([1.0]).new_empty((2,), dtype=m.float32).dtype,
    "type_as int": lambda m: m.tensor([1.5, 2.5]).type_as(m.tensor([1])),
    "multigammaln edge": lambda m: m.special.multigammaln(m.tensor([0.5, 1.0, 1.25]), 3),
    "randperm": lambda m: (m.randperm(6).sort().values, m.randperm(4).dtype),
}


def _plain(v):
    if isinstance(v, (tuple, list)):
        return tuple(_plain(x) for x in v)
    if hasattr(v, "numpy"):
        return (v.detach().numpy().tolist(), _dtype_name(v.dtype), tuple(v.shape))
    if hasattr(v, "is_floating_point"):
        return _dtype_name(v)
    return tuple(v) if hasattr(v, "__iter__") else v


@pytest.mark.parametrize("name", sorted(VALUE_PROGRAMS))
def test_values_and_dtypes_match_pytorch(name):
    want = _plain(_quiet(lambda: VALUE_PROGRAMS[name](torch)))
    got = _plain(_quiet(lambda: VALUE_PROGRAMS[name](tg)))
    assert repr(got) == repr(want)


def test_sort_and_topk_return_named_tuples():
    x = tg.tensor([3.0, 1.0, 2.0])
    values, indices = tg.sort(x)
    assert tg.sort(x).indices.dtype is tg.int64 and values.tolist() == [1.0, 2.0, 3.0]
    assert indices.tolist() == [1, 2, 0]
    assert x.topk(1).values.tolist() == [3.0] and x.topk(1).indices.tolist() == [0]


def test_cross_without_dim_warns_like_pytorch():
    with pytest.warns(UserWarning, match="without specifying the dim arg is deprecated"):
        tg.cross(tg.ones(3), tg.ones(3))


def test_randperm_is_a_permutation_and_follows_manual_seed():
    tg.manual_seed(3)
    a = tg.randperm(10)
    assert sorted(a.tolist()) == list(range(10)) and a.dtype is tg.int64
    tg.manual_seed(3)
    assert tg.randperm(10).tolist() == a.tolist()


ERRORS = {
    "einsum fewer operands": (RuntimeError, "fewer operands",
                              lambda m: m.einsum("ij,jk->ik", m.ones(2, 2))),
    "einsum more operands": (RuntimeError, "more operands",
                             lambda m: m.einsum("ij->i", m.ones(2, 2), m.ones(2))),
    "einsum subscripts": (RuntimeError, r"number of subscripts in the equation \(2\) does "
                          "not match", lambda m: m.einsum("ij->i", m.ones(2, 2, 2))),
    "repeat_interleave negative": (RuntimeError, "Repeats must be non-negative",
                                   lambda m: m.ones(3).repeat_interleave(-1)),
    "repeat_interleave negative tensor": (RuntimeError, "repeats can not be negative",
                                          lambda m: m.repeat_interleave(m.tensor([1, -1]))),
    "repeat_interleave size": (RuntimeError, "repeats must have the same size as input",
                               lambda m: m.ones(3).repeat_interleave(m.tensor([1, 2]), dim=0)),
    "linalg.cross length": (RuntimeError, "must have length 3",
                            lambda m: m.linalg.cross(m.ones(2), m.ones(2))),
    "roll align": (RuntimeError, "shifts and dimensions must align",
                   lambda m: m.roll(m.ones(2, 2), (1, 1), 0)),
    "multigammaln p": (RuntimeError, "p has to be greater than or equal to 1",
                       lambda m: m.special.multigammaln(m.tensor([0.5]), 0)),
    "linalg.cross ndim": (RuntimeError, "inputs must have the same number of dimensions",
                          lambda m: m.linalg.cross(m.ones(2, 3), m.ones(3))),
    "gather dtype": (RuntimeError, "gather", lambda m: m.ones(2).gather(0, m.tensor([0.0]))),
    "gather dims": (RuntimeError, "Index tensor must have the same number of dimensions",
                    lambda m: m.ones(2, 2).gather(0, m.tensor([0]))),
    "index_select range": (IndexError, "index out of range in self",
                           lambda m: m.ones(2).index_select(0, m.tensor([2]))),
    "tril 1-d": (RuntimeError, "tril: input tensor must have at least 2 dimensions",
                 lambda m: m.tril(m.ones(3))),
    "topk k": (RuntimeError, "selected index k out of range", lambda m: m.ones(3).topk(4)),
    "meshgrid indexing": (RuntimeError, "indexing must be one of",
                          lambda m: m.meshgrid(m.ones(2), indexing="ab")),
    "unflatten sizes": (RuntimeError, "don't multiply up to the size of dim",
                        lambda m: m.ones(6).unflatten(0, (4, 2))),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_wrong_arguments_raise_pytorchs_error(name):
    kind, pattern, program = ERRORS[name]
    for m in (torch, tg):
        with pytest.raises(kind, match=pattern):
            _quiet(lambda: program(m))
