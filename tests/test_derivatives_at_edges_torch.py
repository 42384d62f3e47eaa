"""First and second derivatives against PyTorch 2.13 where its formulas meet ties, zeros,
infinities and nan: ``logaddexp(2)`` (its second derivative was 0 at a tie, and 0 where
PyTorch's formula gives nan at the infinite ends), ``copysign`` at an infinite or nan
input, ``prod`` / ``cumprod`` of inputs holding zeros with infinities or nan.  nan, inf
and finite values must agree (the sign of a zero gradient is not compared)."""
import math

import numpy as np
import pytest

import tapegrad as tg

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")

INF, NAN = math.inf, math.nan


def _derivatives(m, program, arrays, order):
    """The gradients of ``program(m, *leaves).sum()`` and, for ``order`` 2, the gradients
    of each first gradient's sum (None where it does not require grad)."""
    xs = [m.tensor(a, dtype=m.float64, requires_grad=True) for a in arrays]
    firsts = m.autograd.grad(program(m, *xs).sum(), xs, create_graph=order == 2)
    out = [g.detach().numpy() for g in firsts]
    if order == 2:
        for g in firsts:
            seconds = m.autograd.grad(g.sum(), xs, retain_graph=True, allow_unused=True,
                                      materialize_grads=True) if g.requires_grad else None
            out += [None] if seconds is None else [s.numpy() for s in seconds]
    return out


def _assert_same(program, arrays, order):
    want = _derivatives(torch, program, arrays, order)
    got = _derivatives(tg, program, arrays, order)
    assert [w is None for w in want] == [g is None for g in got]
    for w, g in zip(want, got):
        if w is not None:
            np.testing.assert_allclose(g, w, rtol=1e-13, atol=1e-300)


# every pair of these: ties on the diagonal, both infinite ends
_EDGES = [-INF, -800.0, -1.0, 0.0, 2.5, 800.0, INF, NAN]
_X, _Y = (a.ravel() for a in np.meshgrid(_EDGES, _EDGES))


@pytest.mark.parametrize("name", ["logaddexp", "logaddexp2"])
@pytest.mark.parametrize("order", [1, 2])
def test_logaddexp_derivatives(name, order):
    _assert_same(lambda m, x, y: getattr(m, name)(x, y), [_X, _Y], order)


@pytest.mark.parametrize("other", ["tensor", "number"])
def test_copysign_gradient(other):
    """result / input, 0 at 0, as PyTorch's: nan at an infinite or nan input (tapegrad's
    was +-1 and 0 there); 0 to ``other``."""
    if other == "tensor":
        _assert_same(lambda m, x, y: m.copysign(x, y), [_X, _Y], 1)
    else:
        _assert_same(lambda m, x: m.copysign(x, -0.0) + m.copysign(x, 2.0), [_X], 1)
