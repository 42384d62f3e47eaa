"""A traced hvp / hessian at new inputs is PyTorch's double backward there.

The second-order recording holds the gradient as tape entries (``create_graph``); the
masks of its rules (where a ``where`` selects, which elements attain a max) must be
recomputed by each replay, not kept from the inputs it was recorded at: the points
below change every mask and argmax of the first one, and tie some extrema.  A choice
that is not a mask (prod's formula) is guarded instead."""
import numpy as np
import pytest
import torch

import tapegrad as tg


def _set_masked(m, x):
    y = x * x
    y[x < 0] = 0.0
    return (y * x).sum()


PROGRAMS = {
    "where": lambda m, x: m.where(x > 0, x * x, -x).sum(),
    "max_squared": lambda m, x: x.max() ** 2,
    "min_times_sum": lambda m, x: x.min() * x.sum(),
    "amax": lambda m, x: (m.amax(x.reshape(2, 3), 1) ** 2 * x[:2]).sum(),
    "leaky_relu": lambda m, x: (m.nn.functional.leaky_relu(x, 0.1) ** 2).sum(),
    "masked_fill": lambda m, x: (x.masked_fill(x < 0, 0.0) ** 3).sum(),
    "masked_setitem": _set_masked,
}
FIRST = np.array([1.0, -2.0, 3.0, -0.5, 0.7, 2.5])
POINTS = [FIRST, -FIRST, np.array([-1.0, 2.0, -3.0, 0.5, 4.0, -2.5]),
          np.array([2.0, 2.0, 1.0, -1.0, 3.0, 3.0]),      # ties: the max, each row's amax
          np.array([-3.0, 1.0, -3.0, 0.2, -0.1, 0.3]),    # ties: the min
          FIRST]                                          # the first point again
V = np.array([0.3, -1.2, 0.7, 2.0, -0.4, 1.1])


def _torch_hessian(program, x):
    xt = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    g, = torch.autograd.grad(program(torch, xt), xt, create_graph=True)
    return np.stack([torch.autograd.grad(g[k], xt, retain_graph=True)[0].numpy()
                     for k in range(x.size)])


def _check(program, points, method):
    """The traced ``method`` at each point equals PyTorch's; returns the Traced."""
    tr = tg.trace(lambda x: program(tg, x), tg.tensor(points[0]))
    for x in points:
        H = _torch_hessian(program, x)
        if method == "hvp":
            _, ours = tr.hvp((tg.tensor(x),), tg.tensor(V))
            want = H @ V
        else:
            ours, want = tr.hessian(tg.tensor(x)), H
        np.testing.assert_allclose(ours.numpy(), want, rtol=1e-13, atol=1e-13,
                                   err_msg=f"at {x}")
    return tr


@pytest.mark.parametrize("name", PROGRAMS)
@pytest.mark.parametrize("method", ["hvp", "hessian"])
def test_second_order_replays_recompute_masks_and_extrema(name, method):
    tr = _check(PROGRAMS[name], POINTS, method)
    assert len(tr.second) == 1          # recomputed by the replay, not recorded again


@pytest.mark.parametrize("method", ["hvp", "hessian"])
def test_a_product_records_its_gradient_again_where_its_zeros_move(method):
    """prod's rule divides by the factors where none is zero: a guard on where the
    zeros are sends a replay at a zero factor to a new recording (not a 0 / 0)."""
    zeros = [FIRST, np.array([0.0, -2.0, 3.0, -0.5, 0.7, 2.5]),
             np.array([0.0, 0.0, 3.0, -0.5, 0.0, 2.5]), -FIRST, FIRST]
    tr = _check(lambda m, x: (x.reshape(2, 3).prod(1) ** 2).sum() + x.prod(), zeros, method)
    assert len(tr.second) == 3
