"""Edge values against PyTorch: lgamma and its gradient (the digamma function) at the
poles, +-0, +-inf and nan, on every path (0-d, short arrays, the fused blocks of large
ones, a replay)."""
import warnings

import numpy as np
import pytest
import torch

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")
INF, NAN = float("inf"), float("nan")
# poles (every float below -2**52 is an integer), both zeros, both infinities, nan, and
# ordinary points around them
SPECIAL = [-1.0, -2.0, -100.0, -1e20, INF, -INF, NAN, 0.0, -0.0, 5e-324, -1e-300, -0.5,
           -3.5, 2.5]
SIZES = [None, 7, 5000]        # 0-d (each point), a short array, the fused blocks


def _points(size):
    return [np.array(p) for p in SPECIAL] if size is None else [np.resize(SPECIAL, size)]


def _lgamma(m, a):
    x = m.tensor(a, requires_grad=True)
    y = m.lgamma(x)
    y.backward(m.ones_like(y))
    return y.detach().numpy(), x.grad.numpy()


def _close(got, want, rtol):
    """Equal up to rtol, inf of the same sign and nan where PyTorch's are."""
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("size", SIZES)
def test_lgamma_and_its_gradient_at_special_points(size):
    for a in _points(size):
        value, grad = _lgamma(tg, a)
        want_value, want_grad = _lgamma(torch, a)
        _close(value, want_value, 1e-13)
        _close(grad, want_grad, 1e-12)
        _close(grad, torch.digamma(torch.tensor(a)).numpy(), 1e-12)


def test_lgamma_float32_special_points():
    a = np.array(SPECIAL, np.float32)
    value, grad = _lgamma(tg, a)
    want_value, want_grad = _lgamma(torch, a)
    _close(value, want_value, 1e-5)
    _close(grad, want_grad, 1e-5)


@pytest.mark.parametrize("size", SIZES)
def test_lgamma_replayed_equals_eager_and_torch(size):
    weights = [np.linspace(0.5, 2.0, 1 if size is None else size).reshape(np.shape(a))
               for a in _points(size)]
    for a, w in zip(_points(size), weights):
        def f(x):
            return (tg.lgamma(x) * tg.tensor(w)).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # (lgamma's masks are traced constants)
            traced = tg.trace(f, tg.tensor(a))
        value, grad = traced.value_and_grad(tg.tensor(a))
        x = tg.tensor(a, requires_grad=True)
        eager = f(x)
        eager.backward()
        np.testing.assert_array_equal(value.numpy(), eager.detach().numpy())
        np.testing.assert_array_equal(grad.numpy(), x.grad.numpy())
        xt = torch.tensor(a, requires_grad=True)
        (torch.lgamma(xt) * torch.tensor(w)).sum().backward()
        _close(grad.numpy(), xt.grad.numpy(), 1e-12)
