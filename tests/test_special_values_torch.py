"""Special values where PyTorch computes otherwise than the textbook formula: ``x ** 0.5``
(and -0.5, 1.5) by a Python number is sqrt there (-0.0 ** 0.5 = -0.0, -inf ** 0.5 =
nan, and their gradients), and softplus's second derivative at +inf is 0 (not nan):
each with PyTorch and tapegrad, at 0-d, short and long (block kernel) tensors, eagerly
and replayed."""
import math

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")

INF, NAN = math.inf, math.nan
X = np.array([-INF, -0.0, 0.0, INF, -1.0, 4.0, NAN, 2.25, 1e-300, 5e-324])


def _pow_outcome(m, x, p, dtype, exponent_tensor=False):
    t = m.tensor(x, dtype=getattr(m, dtype), requires_grad=True)
    e = m.tensor(p, dtype=getattr(m, dtype)) if exponent_tensor else p
    r = t ** e
    g, = m.autograd.grad(r.sum(), t)
    return r.detach().numpy(), g.numpy(), r.grad_fn.name()


def _check(got, want, rtol=0.0):
    """Values with their signed zeros, gradients (tapegrad's adjoints are sums from +0:
    the sign of a zero gradient is not kept), Node names."""
    for a, b in zip(got[:2], want[:2]):
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0, equal_nan=True)
    zero = want[0] == 0
    assert np.array_equal(np.signbit(got[0][zero]), np.signbit(want[0][zero]))
    assert got[2] == want[2]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("p", [0.5, -0.5, 1.5, 2.0, 3.0, -1.0, 0.0])
@pytest.mark.parametrize("n", [1, 10, 3000])
def test_pow_by_a_python_number(p, n, dtype):
    x = np.resize(X, n)
    rtol = 1e-6 if dtype == "float32" else 1e-15
    _check(_pow_outcome(tg, x, p, dtype), _pow_outcome(torch, x, p, dtype), rtol)


@pytest.mark.parametrize("p", [0.5, -0.5, 1.5])
def test_pow_at_0d(p):
    for v in X:
        _check(_pow_outcome(tg, v, p, "float64"), _pow_outcome(torch, v, p, "float64"))


@pytest.mark.parametrize("p", [0.5, -0.5, 1.5])
def test_pow_by_a_tensor_is_cs_pow(p):
    """A tensor exponent is C's pow in PyTorch: (-0.0) ** 0.5 is 0.0 there."""
    _check(_pow_outcome(tg, X, p, "float64", True), _pow_outcome(torch, X, p, "float64", True))


@pytest.mark.parametrize("p", [0.5, -0.5, 1.5])
def test_pow_replayed_and_in_place(p):
    x = tg.tensor(X)
    tr = tg.trace(lambda a: (a ** p).sum(), tg.tensor(np.full(X.size, 0.75)))
    value, grad = tr.value_and_grad(x)
    want = _pow_outcome(torch, X, p, "float64")
    np.testing.assert_array_equal(grad.numpy(), want[1])
    y = x.clone()
    y **= p
    np.testing.assert_array_equal(y.numpy(), want[0])


def _softplus_derivatives(m, x):
    t = m.tensor(x, dtype=m.float64, requires_grad=True)
    r = m.nn.functional.softplus(t)
    g, = m.autograd.grad(r.sum(), t, create_graph=True)
    gg, = m.autograd.grad(g.sum(), t)
    return g.detach().numpy(), gg.numpy()


@pytest.mark.parametrize("x", [[INF], [800.0], [INF, 800.0, 30.0, 19.0, 0.0, -30.0, -INF, NAN],
                               INF])
def test_softplus_second_derivative_at_large_values(x):
    got, want = _softplus_derivatives(tg, x), _softplus_derivatives(torch, x)
    for a, b in zip(got, want):
        # (below the threshold PyTorch's s (1 - s) cancels: 1e-8 relative at 19)
        np.testing.assert_allclose(a, b, rtol=1e-7, atol=0, equal_nan=True)
