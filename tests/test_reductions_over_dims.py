"""Sums and means over some dims: the reverse spreads each output adjoint back along
the input's loops (``kernels/reduce._spread``, up to four dims; more dims go through the
offset map).  Gradients against PyTorch, with an upstream gradient that differs per
output element, for leading, trailing, middle, several and negative dims, keepdim, and
shapes of one to five dims."""
import numpy as np
import pytest
import torch

import tapegrad as tg

CASES = [((7,), 0), ((5, 6), 0), ((5, 6), 1), ((22, 3, 50), 0), ((4, 3, 5), 1),
         ((4, 3, 5), -1), ((4, 3, 5), (0, 2)), ((2, 3, 4, 5), (1, 3)), ((2, 3, 4, 5), 2),
         ((3, 1, 4, 1), (1, 3)), ((2, 3, 2, 3, 2), (0, 3)), ((2, 3, 2, 3, 2), -1)]


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("name", ["sum", "mean"])
@pytest.mark.parametrize("shape, dim", CASES, ids=str)
def test_sum_and_mean_over_dims_have_pytorchs_gradients(shape, dim, name, keepdim):
    rng = np.random.RandomState(sum(shape))
    x0 = rng.randn(*shape)
    got = []
    for m in (tg, torch):
        x = m.tensor(x0, requires_grad=True)
        y = getattr(x * 1.5, name)(dim, keepdim=keepdim)
        w = m.tensor(np.arange(1.0, y.numel() + 1).reshape(tuple(y.shape)))
        (y * w).sum().backward()
        got.append((y.detach().numpy(), x.grad.numpy()))
    (yt, gt), (yr, gr) = got
    np.testing.assert_allclose(yt, yr, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(gt, gr, rtol=1e-12, atol=1e-12)


def test_a_replayed_sum_over_dims_has_pytorchs_gradient():
    x0 = np.random.RandomState(1).randn(3, 4, 5)
    w0 = np.random.RandomState(2).randn(3, 5)

    def f(m, x):
        return (m.sum(x.exp(), 1) * m.tensor(w0)).sum()

    tr = tg.trace(lambda x: f(tg, x), tg.tensor(x0))
    xt = torch.tensor(x0, requires_grad=True)
    f(torch, xt).backward()
    for scale in (1.0, 0.5):
        xt = torch.tensor(x0 * scale, requires_grad=True)
        f(torch, xt).backward()
        np.testing.assert_allclose(tr.grad(tg.tensor(x0 * scale)).numpy(), xt.grad.numpy(),
                                   rtol=1e-12)
