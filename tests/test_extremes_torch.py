"""Gradients where values overflow, underflow or meet 0 and inf, against PyTorch: every
pair of elementwise ops composed, at inputs from -800 to 800 and +-inf, with the adjoint
arriving finite and as 0 (``f(g(x)) * 0``).  PyTorch's reverse formulas decide where
inf meets 0 (a masked gradient is 0, a multiplied one nan).

Signed zeros are left out: there PyTorch's own answer depends on the tensor's length
(its vectorised and scalar kernels disagree on ``maximum(-0.0, 0.0)`` and on
``logit``'s gradient at -0.0)."""
import itertools

import numpy as np
import pytest
import torch

import tapegrad
from tapegrad.ops.table import BINARY, UNARY

pytestmark = pytest.mark.usefixtures("torch_float64")
EXTREMES = [-800.0, -50.0, -3.0, -1.0, 0.0, 0.5, 1.0, 2.0, 3.0, 50.0, 800.0,
            float("inf"), float("-inf")]
UNARY_NAMES = [op.name for op in UNARY if hasattr(torch, op.name) and op.name != "clamp"]
BINARY_NAMES = [op.name for op in BINARY if hasattr(torch, op.name)
                and op.name != "floor_divide"]   # (no derivative: test_division_family_torch)


def _unary_pair(m, outer, inner, zero_seed):
    x = m.tensor(EXTREMES, requires_grad=True)
    y = getattr(m, outer)(getattr(m, inner)(x))
    if zero_seed:
        y = y * m.zeros(len(EXTREMES))
    y.sum().backward()
    return x.grad.detach().numpy()


def _binary_then(m, outer, op):
    xs, ys = np.array(list(itertools.product(EXTREMES, EXTREMES))).T
    x, y = m.tensor(xs, requires_grad=True), m.tensor(ys, requires_grad=True)
    z = getattr(m, op)(x, y)
    if outer:
        z = getattr(m, outer)(z)
    z.sum().backward()
    return np.concatenate([x.grad.detach().numpy(), y.grad.detach().numpy()])


def _same(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=0, equal_nan=True)  # (libm ulps)
    assert (np.isnan(got) == np.isnan(want)).all()


@pytest.mark.parametrize("zero_seed", [False, True])
@pytest.mark.parametrize("outer", UNARY_NAMES)
def test_unary_pairs(outer, zero_seed):
    for inner in UNARY_NAMES:
        _same(_unary_pair(tapegrad, outer, inner, zero_seed),
              _unary_pair(torch, outer, inner, zero_seed))


@pytest.mark.parametrize("op", BINARY_NAMES)
def test_binary_then_unary(op):
    # (not logit: products and sums make -0.0, where PyTorch's logit gradient is -inf in
    # its vectorised kernel, as here, and +inf in its scalar one)
    # (logaddexp2(-1, -1) is 0 here, -4.8e-17 in PyTorch, whose kernel rounds its last
    # multiply-add once: log, sqrt, 1 / x ... of it differ, so that pair is left out)
    xs, ys = np.array(list(itertools.product(EXTREMES, EXTREMES))).T
    keep = np.tile(~((xs == -1.0) & (ys == -1.0)) if op == "logaddexp2" else xs == xs, 2)
    for outer in [None] + [n for n in UNARY_NAMES if n != "logit"]:
        _same(_binary_then(tapegrad, outer, op)[keep], _binary_then(torch, outer, op)[keep])


@pytest.mark.parametrize("n", [1, 7, 5000])
def test_quotient_and_reciprocal_gradients_overflow_as_pytorchs(n):
    """Where a gradient's factors overflow in one order and not another, PyTorch's order
    decides: ``-g * ((x / y) / y)`` for a quotient's divisor, ``-g * (r * r)`` for a
    reciprocal, ``g * (2 * x)`` for a square (a product taken in another order was finite
    where PyTorch's is inf)."""
    xs = np.resize([1e308, 3.0, 1e-300, 2.0, -5.0], n)
    ys = np.resize([0.62, 1e-200, 1e-200, 1e-160, 1e-170], n)
    gs = np.resize([0.3, 1e-250, 1e250, 1e-10, 1e-100], n)
    out = []
    for m in (tapegrad, torch):
        x, y = (m.tensor(v, requires_grad=True) for v in (xs, ys))
        ((x / y) * m.tensor(gs)).sum().backward()
        r = m.tensor(ys, requires_grad=True)
        (r.reciprocal() * m.tensor(gs)).sum().backward()
        s = m.tensor(xs, requires_grad=True)
        (s.square() * m.tensor(gs)).sum().backward()
        out.append(np.concatenate([x.grad.numpy(), y.grad.numpy(), r.grad.numpy(),
                                   s.grad.numpy()]))
    np.testing.assert_array_equal(out[0], out[1])
