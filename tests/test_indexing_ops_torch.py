"""Writes and reads by index, against PyTorch 2.13: ``scatter`` (src, value, reduce),
``scatter_add``, ``index_add``, ``index_copy``, ``index_fill``, ``index_put`` (accumulate),
``masked_scatter``, ``masked_select``, ``take``, ``take_along_dim``, ``nonzero``, their
in-place forms, and ``x[idx] = v`` with repeated indices (every write gets its position's
gradient, as PyTorch's IndexPutBackward0): values, dtypes, Nodes, gradients,
gradcheck / gradgradcheck, replay, and errors (out-of-range indices raise cleanly)."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _run(m, program, arrays):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = program(m, *leaves)
    rng = np.random.default_rng(5)
    (out * m.tensor(rng.standard_normal(tuple(out.shape)))).sum().backward()
    grads = [None if x.grad is None else x.grad.numpy() for x in leaves]
    return (out.detach().numpy(), str(out.dtype).rpartition(".")[2], out.grad_fn.name(), grads)


def _assert_same(program, arrays):
    want, got = _run(torch, program, arrays), _run(tg, program, arrays)
    assert got[0].shape == want[0].shape
    np.testing.assert_allclose(got[0], want[0], rtol=1e-13, atol=1e-14)
    assert got[1:3] == want[1:3]
    for w, g in zip(want[3], got[3]):
        assert (w is None) == (g is None)
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-14)


def _i(m, a):
    return m.tensor(a, dtype=m.int64)


def _clone_setitem(key):
    def program(m, x, v):
        y = x.clone()
        y[key(m)] = v
        return y
    return program


I2 = [[0, 1, 2, 0], [2, 0, 1, 1]]
DUP = [1, 3, 1, 0, 3]
PROGRAMS = {
    "scatter": ([(3, 4), (2, 4)], lambda m, x, s: m.scatter(x, 0, _i(m, I2), s)),
    "scatter smaller index": ([(3, 5), (2, 3)], lambda m, x, s: x.scatter(
        1, _i(m, [[4, 0, 2], [1, 3, 0]]), s)),
    "scatter repeated": ([(5,), (5,)], lambda m, x, s: m.scatter(x, 0, _i(m, DUP), s)),
    "scatter value": ([(3, 4)], lambda m, x: m.scatter(x, 0, _i(m, I2), value=1.5)),
    "scatter value method": ([(3, 4)], lambda m, x: x.scatter(-1, _i(m, I2), -2.0)),
    "scatter_add": ([(3, 4), (2, 4)], lambda m, x, s: m.scatter_add(x, 0, _i(m, I2), s)),
    "scatter_add repeated": ([(4,), (6,)], lambda m, x, s: x.scatter_add(
        0, _i(m, [1, 1, 3, 1, 0, 3]), s)),
    "scatter_add dim 1": ([(2, 3), (2, 4)], lambda m, x, s: m.scatter_add(
        x, 1, _i(m, [[0, 0, 0, 2], [1, 2, 1, 1]]), s)),
    "scatter_add skewed": ([(40,), (90,)], lambda m, x, s: m.scatter_add(
        x, 0, _i(m, [7] * 70 + list(range(0, 40, 2))), s)),
    "index_add": ([(4, 3), (5, 3)], lambda m, x, s: m.index_add(x, 0, _i(m, DUP), s)),
    "index_add alpha dim": ([(2, 4), (2, 3)], lambda m, x, s: x.index_add(
        1, _i(m, [3, 0, 3]), s, alpha=-2.5)),
    "index_copy": ([(2, 4), (2, 3)], lambda m, x, s: m.index_copy(x, 1, _i(m, [2, 0, 3]), s)),
    "index_copy repeated": ([(4, 3), (5, 3)], lambda m, x, s: x.index_copy(0, _i(m, DUP), s)),
    "index_fill": ([(3, 4)], lambda m, x: m.index_fill(x, 1, _i(m, [0, -1, 0]), 2.5)),
    "index_fill tensor": ([(3, 4), ()], lambda m, x, v: x.index_fill(0, _i(m, [2, 0]), v)),
    "index_put": ([(3, 4), (2,)], lambda m, x, v: m.index_put(
        x, (_i(m, [0, 2]), _i(m, [1, 3])), v)),
    "index_put repeated": ([(5,), (5,)], lambda m, x, v: m.index_put(x, (_i(m, DUP),), v)),
    "index_put broadcast": ([(3, 4), (4,)], lambda m, x, v: x.index_put(
        [_i(m, [1, 1])], v)),
    "index_put accumulate": ([(5,), (5,)], lambda m, x, v: m.index_put(
        x, (_i(m, DUP),), v, accumulate=True)),
    "index_put accumulate 2-d": ([(3, 4), ()], lambda m, x, v: x.index_put(
        (_i(m, [0, 0, 2]), _i(m, [1, 1, 3])), v, True)),
    "index_put mask": ([(3, 4), ()], lambda m, x, v: x.index_put(
        (m.tensor([True, False, True]),), v)),
    "masked_select": ([(3, 4)], lambda m, x: m.masked_select(x, m.tensor(
        [True, False, True, True]))),
    "masked_select broadcast": ([(4,)], lambda m, x: x.masked_select(
        m.tensor([[True, False, False, True], [False, True, True, True]]))),
    "masked_scatter": ([(3, 4), (11,)], lambda m, x, s: m.masked_scatter(
        x, m.tensor([True, False, True, False]), s)),
    "masked_scatter broadcast": ([(4,), (2, 5)], lambda m, x, s: x.masked_scatter(
        m.tensor([[True, False, False, True], [False, True, True, True]]), s)),
    "take": ([(3, 4)], lambda m, x: m.take(x, _i(m, [[0, -1], [5, 5]]))),
    "take_along_dim": ([(3, 4)], lambda m, x: m.take_along_dim(x, _i(m, [[3, 0, -1]]), 1)),
    "take_along_dim broadcast": ([(3, 1, 4)], lambda m, x: x.take_along_dim(
        _i(m, [[[2], [0]]]), 2)),
    "take_along_dim flat": ([(3, 4)], lambda m, x: m.take_along_dim(x, _i(m, [[11, 0]]))),
    "setitem repeated": ([(5,), (3,)], _clone_setitem(lambda m: _i(m, [1, 3, 1]))),
    "setitem repeated rows": ([(4, 3), (5, 3)], _clone_setitem(lambda m: _i(m, DUP))),
    "setitem repeated broadcast": ([(4, 3), (3,)], _clone_setitem(
        lambda m: (_i(m, [0, 2, 0]),))),
    "setitem repeated pairs": ([(3, 4), (4,)], _clone_setitem(
        lambda m: (_i(m, [0, 2, 0, 0]), _i(m, [1, 1, 1, 3])))),
    "setitem mask": ([(3, 4), (2, 4)], _clone_setitem(lambda m: m.tensor(
        [True, False, True]))),
    "scatter_ in place": ([(3, 4), (2, 4)], lambda m, x, s: x.clone().scatter_(
        0, _i(m, I2), s)),
    "scatter_add_ in place": ([(3, 4), (2, 4)], lambda m, x, s: (x * 1).scatter_add_(
        0, _i(m, I2), s)),
    "index_add_ in place": ([(4, 3), (5, 3)], lambda m, x, s: x.clone().index_add_(
        0, _i(m, DUP), s, alpha=2)),
    "index_copy_ in place": ([(4, 3), (5, 3)], lambda m, x, s: x.clone().index_copy_(
        0, _i(m, DUP), s)),
    "index_fill_ in place": ([(3, 4), ()], lambda m, x, v: x.clone().index_fill_(
        1, _i(m, [1]), v)),
    "index_put_ in place": ([(5,), (5,)], lambda m, x, v: x.clone().index_put_(
        (_i(m, DUP),), v, accumulate=True)),
    "masked_scatter_ in place": ([(2, 3), (7,)], lambda m, x, s: x.clone().masked_scatter_(
        m.tensor([[True], [False]]), s)),
    "index_put_ top level": ([(5,), (5,)], lambda m, x, v: m.index_put_(
        x.clone(), (_i(m, DUP),), v)),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    _assert_same(program, [rng.uniform(-2, 2, s) for s in shapes])


@pytest.mark.parametrize("name", ["scatter", "scatter smaller index", "scatter_add skewed",
                                  "index_add", "index_copy", "index_fill tensor",
                                  "index_put accumulate", "masked_scatter broadcast", "take",
                                  "take_along_dim broadcast", "index_put"])
def test_gradcheck_and_gradgradcheck(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(1)
    leaves = [tg.tensor(rng.uniform(-2, 2, s), requires_grad=True) for s in shapes]
    assert gradcheck(lambda *xs: program(tg, *xs), leaves)
    assert gradgradcheck(lambda *xs: program(tg, *xs), leaves)


def test_repeated_writes_get_their_positions_gradient():
    """The brief's case: idx = [1, 3, 1], out.sum() * weights: v.grad = [w1, w3, w1]; the
    last write is kept, +-0.0 and inf kept exactly."""
    for m in (torch, tg):
        x = m.zeros(5, requires_grad=True)
        v = m.tensor([-0.0, float("inf"), 2.0], requires_grad=True)
        y = x.clone()
        y[m.tensor([1, 3, 1])] = v
        (y * m.arange(1.0, 6.0)).sum().backward()
        assert y.grad_fn.name() == "IndexPutBackward0"
        assert y.tolist() == [0.0, 2.0, 0.0, float("inf"), 0.0]
        assert v.grad.tolist() == [2.0, 4.0, 2.0] and x.grad.tolist() == [1, 0, 3, 0, 5]
        z = x.clone()
        z[m.tensor([1, 1])] = v[:2]
        assert str(z[1].item()) == "inf"


def test_replayed_gradients_are_the_eager_ones():
    idx = np.array([1, 3, 1, 0])

    def f(x, v):
        y = x * 1.0
        y[tg.tensor(idx)] = v * v
        return (tg.scatter_add(y, 0, tg.tensor(idx), v) * tg.arange(1.0, 6.0)).sum()
    rng = np.random.default_rng(0)
    x, v = rng.standard_normal(5), rng.standard_normal(4)
    traced = tg.trace(f, x, v)
    xt, vt = tg.tensor(x, requires_grad=True), tg.tensor(v, requires_grad=True)
    f(xt, vt).backward()
    gx, gv = traced.grad(x, v)
    np.testing.assert_array_equal(gx, xt.grad.numpy())
    np.testing.assert_array_equal(gv, vt.grad.numpy())


def test_create_graph_second_derivative_matches_pytorch():
    def second(m):
        x = m.tensor([0.5, -1.0, 2.0, 0.25], requires_grad=True)
        s = m.tensor([1.5, -0.5, 3.0], requires_grad=True)
        out = m.scatter_add(x * x, 0, m.tensor([2, 2, 0]), s * s * s)
        g, = m.autograd.grad((out * out).sum(), s, create_graph=True)
        h, = m.autograd.grad(g.sum(), s)
        return g.detach().numpy(), h.numpy()
    for w, g in zip(second(torch), second(tg)):
        np.testing.assert_allclose(g, w, rtol=1e-13)


def test_scatter_reduce_has_no_derivative():
    for m in (torch, tg):
        x = m.arange(6.0).reshape(2, 3).requires_grad_()
        idx = m.tensor([[1, 0, 1], [1, 1, 1]])
        with pytest.warns(UserWarning, match="reduce argument of torch.scatter"):
            out = m.scatter(x, 0, idx, m.full((2, 3), 2.0), reduce="multiply")
        assert out.tolist() == [[0.0, 2.0, 2.0], [12.0, 8.0, 20.0]]
        assert x.scatter(0, idx, 1.0, reduce="add").tolist() == [[0, 2, 2], [5, 5, 7]]
        assert out.grad_fn.name() == "torch::autograd::NotImplemented"
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not "
                                               "implemented"):
            out.sum().backward()


def test_results_without_a_gradient():
    a = [[0.0, 1.5, -2.0], [0.0, 0.0, 3.0]]
    for program in (lambda m: m.nonzero(m.tensor(a)),
                    lambda m: m.tensor(a).nonzero(as_tuple=True)[1],
                    lambda m: m.nonzero(m.tensor(0.0)),
                    lambda m: m.nonzero(m.tensor(2.0)),
                    lambda m: m.nonzero(m.zeros(2, 0)),
                    lambda m: m.scatter_add(m.tensor([1, 2]), 0, m.tensor([0, 0]),
                                            m.tensor([5, 6])),
                    lambda m: m.index_put(m.tensor([1, 2]), (m.tensor([0, 0]),),
                                          m.tensor([5, 6]), accumulate=True),
                    lambda m: m.index_add(m.tensor([[1, 2]]), 1, m.tensor([1]),
                                          m.tensor([[7]])),
                    lambda m: m.scatter(m.tensor(a), 0, m.zeros(0, dtype=m.int64),
                                        m.zeros(0)),
                    lambda m: m.scatter(m.tensor(a), 0, m.tensor([[1]], dtype=m.int32), 9.0),
                    lambda m: m.scatter(m.tensor(1.0), 0, m.tensor(0), 2.0),
                    lambda m: m.masked_select(m.tensor(a), m.tensor(a) > 0),
                    lambda m: m.take(m.tensor(a), m.tensor([[-6]]))):
        want, got = program(torch), program(tg)
        assert str(got.dtype).rpartition(".")[2] == str(want.dtype).rpartition(".")[2]
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_in_place_forms_write_through_views():
    for m in (torch, tg):
        base = m.zeros(2, 4)
        base[1].index_fill_(0, m.tensor([0, 2]), 5.0)
        base[0].scatter_add_(0, m.tensor([3, 3]), m.tensor([1.0, 2.0]))
        assert base.tolist() == [[0.0, 0.0, 0.0, 3.0], [5.0, 0.0, 5.0, 0.0]]
        leaf = m.zeros(3, requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
            leaf.index_put_((m.tensor([0]),), m.tensor([1.0]))


X = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
ERRORS = {
    "scatter index high": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[2]]), 1.0),
    "scatter index negative": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[-1]]), 1.0),
    "scatter float index": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[0.0]]), 1.0),
    "scatter index too large": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[0, 0, 0, 0]]),
                                                   1.0),
    "scatter src too small": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[0, 0, 0]]),
                                                 m.zeros(1, 2)),
    "scatter index ndim": lambda m: m.scatter(m.tensor(X), 0, m.tensor([0, 0, 0]),
                                              m.zeros(1, 3)),
    "scatter dtypes": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[0]]),
                                          m.zeros(1, 3, dtype=m.int64)),
    "scatter reduce": lambda m: m.scatter(m.tensor(X), 0, m.tensor([[0]]), 1.0, reduce="max"),
    "scatter dim": lambda m: m.scatter(m.tensor(X), 2, m.tensor([[0]]), 1.0),
    "scatter_add index high": lambda m: m.scatter_add(m.tensor(X), 0, m.tensor([[5]]),
                                                      m.zeros(1, 3)),
    "scatter_add dtypes": lambda m: m.scatter_add(m.tensor(X), 0, m.tensor([[1]]),
                                                  m.ones(1, 1, dtype=m.int64)),
    "index_add index high": lambda m: m.index_add(m.tensor(X), 0, m.tensor([2]), m.zeros(1, 3)),
    "index_add index negative": lambda m: m.index_add(m.tensor(X), 0, m.tensor([-1]),
                                                      m.zeros(1, 3)),
    "index_add count": lambda m: m.index_add(m.tensor(X), 0, m.tensor([0]), m.zeros(2, 3)),
    "index_add 1-d source": lambda m: m.index_add(m.tensor(X), 0, m.tensor([0]), m.ones(3)),
    "index_add shape": lambda m: m.index_add(m.tensor(X), 0, m.tensor([0]), m.zeros(1, 2)),
    "index_add 2-d index": lambda m: m.index_add(m.tensor(X), 0, m.tensor([[0]]),
                                                 m.zeros(1, 3)),
    "index_add float index": lambda m: m.index_add(m.tensor(X), 0, m.tensor([0.0]),
                                                   m.zeros(1, 3)),
    "index_add dtypes": lambda m: m.index_add(m.tensor(X), 0, m.tensor([0]),
                                              m.ones(1, 3, dtype=m.int64)),
    "index_copy index high": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([3]),
                                                    m.zeros(1, 3)),
    "index_copy index negative": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([-1]),
                                                        m.zeros(1, 3)),
    "index_copy count": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([0, 1]),
                                               m.zeros(1, 3)),
    "index_copy slices": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([0]), m.zeros(1, 2)),
    "index_copy float index": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([0.0]),
                                                     m.zeros(1, 3)),
    "index_copy dtypes": lambda m: m.index_copy(m.tensor(X), 0, m.tensor([0]),
                                                m.ones(1, 3, dtype=m.int64)),
    "index_fill index high": lambda m: m.index_fill(m.tensor(X), 0, m.tensor([3]), 1.0),
    "index_fill float index": lambda m: m.index_fill(m.tensor(X), 0, m.tensor([0.0]), 1.0),
    "index_fill 2-d index": lambda m: m.index_fill(m.tensor(X), 0, m.tensor([[0]]), 1.0),
    "index_fill 1-d value": lambda m: m.index_fill(m.tensor(X), 0, m.tensor([1]), m.ones(2)),
    "index_put index high": lambda m: m.index_put(m.tensor(X), (m.tensor([2]),),
                                                  m.tensor(1.0)),
    "index_put values shape": lambda m: m.index_put(m.tensor(X), (m.tensor([0, 1]),),
                                                    m.ones(2, 2)),
    "index_put dtypes": lambda m: m.index_put(m.tensor(X), (m.tensor([0, 1]),),
                                              m.ones(3, dtype=m.int64)),
    "index_put tensor indices": lambda m: m.index_put(m.tensor(X), m.tensor([0, 1]), m.ones(3)),
    "index_put None": lambda m: m.index_put(m.tensor(X), (None, m.tensor([0])), m.ones(1)),
    "index_put too many": lambda m: m.index_put(m.tensor(X), (m.tensor([0]), m.tensor([0]),
                                                               m.tensor([0])), m.ones(1)),
    "index_put float index": lambda m: m.index_put(m.tensor(X), (m.tensor([0.0]),), m.ones(3),
                                                   accumulate=True),
    "take index high": lambda m: m.take(m.tensor(X), m.tensor([6])),
    "take index low": lambda m: m.take(m.tensor(X), m.tensor([-7])),
    "take float index": lambda m: m.take(m.tensor(X), m.tensor([1.0])),
    "take int32 index": lambda m: m.take(m.tensor(X), m.tensor([1], dtype=m.int32)),
    "take empty": lambda m: m.take(m.zeros(0), m.tensor([0])),
    "take_along_dim ndim": lambda m: m.take_along_dim(m.tensor(X), m.tensor([1]), 1),
    "take_along_dim int32": lambda m: m.take_along_dim(m.tensor(X), m.tensor(
        [[1]], dtype=m.int32), 1),
    "take_along_dim broadcast": lambda m: m.take_along_dim(m.tensor(X), m.tensor(
        [[1, 1]]), 0),
    "masked_select long mask": lambda m: m.masked_select(m.tensor(X), m.tensor([1, 0, 1])),
    "masked_select shapes": lambda m: m.masked_select(m.tensor(X), m.ones(3, 3,
                                                                          dtype=m.bool)),
    "masked_scatter short source": lambda m: m.masked_scatter(m.tensor(X), m.tensor(X) > 0,
                                                              m.zeros(2)),
    "masked_scatter long mask": lambda m: m.masked_scatter(m.tensor(X), m.tensor([1, 0, 1]),
                                                           m.zeros(6)),
    "masked_scatter dtypes": lambda m: m.masked_scatter(m.tensor(X), m.tensor(X) > 0,
                                                        m.arange(10)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name):
    want, got = raised_by_both(ERRORS[name])
    assert type(got) is type(want)
    assert str(got) == str(want)


def test_take_along_dim_out_of_range_raises():
    """(PyTorch 2.13 reads out of bounds there, unchecked)"""
    with pytest.raises(RuntimeError, match="index 5 is out of bounds for dimension 1 with size "
                                           "3"):
        tg.take_along_dim(tg.tensor(X), tg.tensor([[5]]), 1)


EMPTY_WRITES = {
    "setitem": lambda m, x, v: _set(x.clone(), (_i(m, []),), v),
    "setitem slice": lambda m, x, v: _set(x.clone(), slice(1, 1), v),
    "index_put": lambda m, x, v: m.index_put(x, (_i(m, []),), v),
    "index_put accumulate": lambda m, x, v: x.index_put((_i(m, []),), v, accumulate=True),
    "index_copy": lambda m, x, v: m.index_copy(x, 0, _i(m, []), v),
    "scatter": lambda m, x, v: m.scatter(x, 0, _i(m, []), v),
    "scatter_add": lambda m, x, v: x.scatter_add(0, _i(m, []), v),
    "masked_scatter": lambda m, x, v: m.masked_scatter(x, m.zeros(3, dtype=m.bool), v),
}


def _set(x, key, v):
    x[key] = v
    return x


@pytest.mark.parametrize("name", EMPTY_WRITES)
def test_writing_nothing_keeps_the_source_an_input(name):
    """No position written, a source that requires grad: the result requires grad (and
    the source gets zeros), as PyTorch's (it was a result without history)."""
    results = []
    for m in (torch, tg):
        v = m.zeros(0, requires_grad=True)
        out = EMPTY_WRITES[name](m, m.tensor([1.0, 2.0, 3.0]), v)
        assert out.requires_grad
        g, = m.autograd.grad(out.sum(), v)
        results.append((out.detach().numpy(), g.numpy()))
    for w, g in zip(*results):
        np.testing.assert_array_equal(g, w)


def test_scatter_reduce_writing_nothing_has_no_derivative():
    for m in (torch, tg):
        out = m.scatter(m.ones(3, requires_grad=True), 0, _i(m, []), m.ones(0), reduce="add")
        with pytest.raises(RuntimeError, match="derivative for aten::scatter is not"):
            out.sum().backward()


def test_integer_index_add_truncates_alpha():
    for alpha in (2.5, -0.5, 1.9):
        got, want = (m.index_add(_i(m, [[1, 2], [3, 4]]), 0, _i(m, [1]), _i(m, [[5, -7]]),
                                 alpha=alpha) for m in (tg, torch))
        assert str(got.dtype).rpartition(".")[2] == "int64"
        np.testing.assert_array_equal(got.numpy(), want.numpy())
