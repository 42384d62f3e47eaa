"""Recordings over a long input vector (``vector_replay``'s segments): scalar code over
its elements, a long elementwise entry, a large product.  Each gives PyTorch's gradient
at new inputs."""
import numpy as np
import pytest
import torch

import tapegrad as tg


def _rosenbrock(m, v):
    xs = [v[i] for i in range(v.shape[0])]            # x[k]: one-element gathers
    ys = list(v)                                       # unbind: 0-d pieces
    f = 0.0
    for i in range(0, len(xs) - 1, 2):
        t = ys[i + 1] - xs[i] * xs[i]
        f = f + 100.0 * t * t + (1.0 - xs[i]) ** 2
    return f


def _long_elementwise(m, v):
    return (m.sin(v) * v).sum() + _rosenbrock(m, v[:6])


def _product(m, v):
    w = v[:900].reshape(30, 30)
    return (w @ w).tanh().sum() + v[900:].exp().sum()


@pytest.mark.parametrize("fn", [_rosenbrock, _long_elementwise, _product],
                         ids=["scalar code", "long elementwise", "product"])
def test_a_long_input_replays_pytorchs_gradient(torch_float64, fn):
    rng = np.random.default_rng(3)
    tr = tg.trace(lambda v: fn(tg, v), tg.tensor(rng.uniform(-1, 1, 1000)),
                  compile_after=None)
    for _ in range(3):
        x = rng.uniform(-1, 1, 1000)
        value, grad = tr.value_and_grad(tg.tensor(x))
        xt = torch.tensor(x, requires_grad=True)
        want = fn(torch, xt)
        want.backward()
        # (a product sums in BLAS's order, PyTorch's in its own: last bits differ)
        np.testing.assert_allclose(value.item(), want.item(), rtol=1e-12)
        np.testing.assert_allclose(grad.numpy(), xt.grad.numpy(), rtol=1e-10, atol=1e-14)
