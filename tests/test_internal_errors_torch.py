"""Calls where tapegrad leaked an internal error (NumPy's, or its own AttributeError /
OverflowError) where PyTorch computes a result or raises its own error: each case runs
the same code with both and expects the same outcome (values, dtypes, shapes and, where
a case returns them, gradients; or the same error type and message start)."""
import warnings

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _float64():
    """tapegrad's default dtype is float64: PyTorch's too, for these tests."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


def _f64(m, *shape):
    return m.ones(shape, dtype=m.float64)


def _fill_grad(m):
    v = m.tensor(3., dtype=m.float64, requires_grad=True)
    x = m.zeros(2, dtype=m.float64).fill_(v * 2)
    x.sum().backward()
    return x.detach(), v.grad


def _linear_grads(m):
    x = _f64(m, 2, 5).requires_grad_()
    w = m.arange(5., dtype=m.float64).requires_grad_()
    y = m.nn.functional.linear(x, w)
    y.backward(m.tensor([1., 2.], dtype=m.float64))
    return y.detach(), x.grad, w.grad


def _conv_grads(m, groups):
    x = _f64(m, 0, 4, 9).requires_grad_()
    w = _f64(m, 4, 4 // groups, 3).requires_grad_()
    b = _f64(m, 4).requires_grad_()
    y = m.nn.functional.conv1d(x, w, b, groups=groups, padding=1)
    y.sum().backward()
    return y.detach(), x.grad, w.grad, b.grad


def _max_dim(m, name):
    r = getattr(_f64(m, 0, 3), name)(1)
    return r.values, r.indices


CASES = {
    "cross_entropy weight of the wrong length": lambda m: m.nn.functional.cross_entropy(
        m.zeros(2, 4, dtype=m.float64), m.tensor([0, 1]), weight=_f64(m, 2)),
    "softmax of an int tensor": lambda m: m.tensor([1, 2]).softmax(0),
    "log_softmax of an int tensor, not the last dim": lambda m: m.tensor([[1, 2]]).log_softmax(0),
    "softmax of a bool tensor": lambda m: m.nn.functional.softmax(m.tensor([True]), 0),
    "softmax of an int tensor, dtype=": lambda m: m.tensor([1, 2]).softmax(0, dtype=m.float64),
    "softmax of an empty int tensor": lambda m: m.zeros(0, dtype=m.int64).softmax(0),
    "argmax of nothing": lambda m: m.zeros(0).argmax(),
    "argmin of nothing": lambda m: m.zeros(0).argmin(),
    "argmax(1) of 0x3": lambda m: m.zeros(0, 3).argmax(1),
    "argmin(1, keepdim) of 0x3": lambda m: m.zeros(0, 3).argmin(1, keepdim=True),
    "argmax(0) of 0x3": lambda m: m.zeros(0, 3).argmax(0),
    "max(1) of 0x3": lambda m: _max_dim(m, "max"),
    "min(1) of 0x3": lambda m: _max_dim(m, "min"),
    "max(-1) of nothing": lambda m: m.zeros(0).max(-1),
    "min(-2) of 0x3": lambda m: m.zeros(0, 3).min(-2),
    "max() of nothing": lambda m: m.zeros(0).max(),
    "amax(-2) of 0x3": lambda m: m.zeros(0, 3).amax(-2),
    "einsum sublists": lambda m: m.einsum(_f64(m, 2, 2), [0, 1], [1]),
    "einsum sublists, no output": lambda m: m.einsum(_f64(m, 2, 3), [0, 30], _f64(m, 3), [30]),
    "einsum sublists, ellipsis": lambda m: m.einsum(_f64(m, 2, 3), [Ellipsis, 1], _f64(m, 3),
                                                    [1], [Ellipsis]),
    "einsum subscript out of range": lambda m: m.einsum(_f64(m, 2), [52]),
    "fill_ with a tensor that requires grad": _fill_grad,
    "fill_ with a 1-D tensor": lambda m: m.zeros(2).fill_(m.ones(2)),
    "fill_ of an int tensor with a float tensor": lambda m: m.zeros(2, dtype=m.int64).fill_(
        m.tensor(2.7)),
    "bool - bool": lambda m: m.tensor([True]) - m.tensor([False]),
    "bool - True": lambda m: m.tensor([True]) - True,
    "1 - bool": lambda m: 1 - m.tensor([True]),
    "float - True": lambda m: m.tensor([1.]) - True,
    "bool.sub_(bool)": lambda m: m.tensor([True]).sub_(m.tensor([True])),
    "-bool": lambda m: -m.tensor([True]),
    "neg of a 0-d bool": lambda m: m.neg(m.tensor(True)),
    "int ** -1": lambda m: m.tensor([2]) ** -1,
    "0-d uint8 ** -1": lambda m: m.tensor(2, dtype=m.uint8) ** -1,
    "int ** negative int tensor": lambda m: m.tensor([1, -1, 2, 0, -2, 1, -1]) ** m.tensor(
        [-1, -1, -1, -1, -3, -2, -2]),
    "int8 ** negative int8 tensor": lambda m: m.tensor([3, -1], dtype=m.int8) ** m.tensor(
        [-2, -3], dtype=m.int8),
    "2 ** negative int tensor": lambda m: 2 ** m.tensor([-1, 2]),
    "int ** -1.0": lambda m: m.tensor([2]) ** -1.0,
    "1-D mT": lambda m: _f64(m, 3).mT,
    "1-D mH": lambda m: _f64(m, 3).mH,
    "0-d mT": lambda m: _f64(m).mT,
    "batched mH": lambda m: m.arange(6., dtype=m.float64).reshape(1, 2, 3).mH,
    "linear, 1-D weight": _linear_grads,
    "linear, 1-D weight, 3-D input, bias": lambda m: m.nn.functional.linear(
        _f64(m, 3, 2, 5), _f64(m, 5), _f64(m)),
    "linear, 1-D weight, 2-D input, bias": lambda m: m.nn.functional.linear(
        _f64(m, 2, 5), _f64(m, 5), _f64(m)),
    "linear, 0-d weight": lambda m: m.nn.functional.linear(_f64(m, 2, 5), _f64(m)),
    "conv1d of a batch of 0": lambda m: _conv_grads(m, 1),
    "conv1d of a batch of 0, groups": lambda m: _conv_grads(m, 2),
    "conv1d with no output channel": lambda m: m.nn.functional.conv1d(_f64(m, 2, 3, 9),
                                                                      _f64(m, 0, 3, 3)),
    "where(condition)": lambda m: m.where(m.tensor([1, 0, 2])),
    "where(2-D condition)": lambda m: m.where(m.tensor([[True, False], [False, True]])),
    "where(0-d condition)": lambda m: m.where(m.tensor(3.)),
}


def _outcome(m, case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", case(m)
        except Exception as e:                    # the outcome compared: any error
            return type(e).__name__, str(e)[:40]


def _same(a, b):
    if isinstance(a, tuple):
        assert isinstance(b, tuple) and len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
        return
    assert str(a.dtype).split(".")[-1] == str(b.dtype).split(".")[-1]
    assert tuple(a.shape) == tuple(b.shape)
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("name", CASES)
def test_as_torch(name):
    got, want = _outcome(tg, CASES[name]), _outcome(torch, CASES[name])
    assert got[0] == want[0], (got, want)
    if want[0] == "ok":
        _same(got[1], want[1])
    else:
        assert got[1] == want[1]
