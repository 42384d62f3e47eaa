"""A replayed value and gradient is the eager one, bit for bit, at every size: small
arrays element by element, larger ones by the same block rules (fused runs) on both
paths.  Checked on a chain of transcendental ops (their block and per-element rules
differ in the last bits, so a path that took the other road would show), and against
PyTorch to a few ulp."""
import numpy as np
import pytest
import torch

import tapegrad as tg


def chain(m, x):
    for _ in range(3):
        x = (m.sin(x) * 1.01 + m.tanh(x)).exp() * 0.3 - m.cos(x)
    return x


@pytest.mark.parametrize("n", [7, 255, 256, 300, 1000, 5000])
def test_replayed_gradient_is_the_eager_one(n):
    x0 = np.random.RandomState(n).uniform(-2, 2, n)
    x = tg.tensor(x0, requires_grad=True)
    y = chain(tg, x)
    w = tg.tensor(np.linspace(0.5, 1.5, n))
    (y * w).sum().backward()
    traced = tg.trace(lambda v: chain(tg, v) * w, tg.tensor(x0 * 0.5))
    out = traced(tg.tensor(x0))
    _, g = tg.trace(lambda v: (chain(tg, v) * w).sum(), tg.tensor(x0 * 0.5)).value_and_grad(
        tg.tensor(x0))
    np.testing.assert_array_equal(out.numpy(), (y * w).detach().numpy())
    np.testing.assert_array_equal(np.asarray(g), x.grad.numpy())
    xt = torch.tensor(x0, requires_grad=True)
    (chain(torch, xt) * torch.tensor(np.linspace(0.5, 1.5, n))).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-12)


REDUCTIONS = {
    "sum": lambda v: v.sum(),
    "mean": lambda v: v.mean(),
    "sum_dim": lambda v: v.reshape(-1, 1).sum(0) + v.reshape(1, -1).sum(1),
    "mean_dim": lambda v: v.reshape(1, -1).mean(1) * v.reshape(-1, 1).mean(0),
}


@pytest.mark.parametrize("n", [1, 7, 8, 9, 100, 1000, 5000])
@pytest.mark.parametrize("name", sorted(REDUCTIONS))
def test_replayed_and_compiled_sums_are_the_eager_ones(name, n):
    """Sums and means in one order on every path (eager summed with NumPy's pairwise
    order, a replay in one running sum: they differed by a few ulp from 9 values on)."""
    f = REDUCTIONS[name]
    x0 = np.random.RandomState(n).standard_cauchy(n)      # magnitudes of every size
    eager = f(tg.tensor(x0)).numpy()
    traced = tg.trace(f, tg.tensor(x0 * 0.5))
    np.testing.assert_array_equal(traced(tg.tensor(x0)).numpy(), eager)
    if n <= 100:
        np.testing.assert_array_equal(tg.trace(f, tg.tensor(x0 * 0.5)).compile()(
            tg.tensor(x0)).numpy(), eager)
    np.testing.assert_allclose(eager, f(torch.tensor(x0)).numpy(), rtol=1e-13)


PRODUCTS = {   # (operand shapes, product): every product code, batches broadcast
    "mm": (((5, 4), (4, 3)), lambda a, b: a @ b),
    "mv": (((5, 4), (4,)), lambda a, b: a @ b),
    "dot": (((9,), (9,)), lambda a, b: a @ b),
    "vector @ matrix": (((4,), (4, 3)), lambda a, b: a @ b),
    "bmm": (((2, 5, 4), (2, 4, 3)), tg.bmm),
    "matmul, batch broadcast": (((2, 1, 5, 4), (3, 4, 3)), lambda a, b: a @ b),
    "linear": (((5, 4), (3, 4)), lambda a, b: tg.nn.functional.linear(a, b, b[:, 0])),
    "linear, no bias": (((2, 5, 4), (3, 4)), tg.nn.functional.linear),
    "past HOST_MIN_MACS": (((64, 40), (40, 30)), lambda a, b: a @ b.tanh()),
    "past HOST_MIN_MACS, one output column": (((64, 600), (600, 1)), lambda a, b: a @ b),
    "past HOST_MIN_MACS, one row": (((1, 300), (300, 200)), lambda a, b: a @ b),
    "past HOST_MIN_MACS, result in the arena": (((80, 40), (40, 60)), lambda a, b: a @ b),
    "past HOST_MIN_MACS, linear into the arena": (((70, 30), (80, 30)),
                                                 lambda a, b: tg.nn.functional.linear(a, b)),
    "past HOST_MIN_MACS, linear to one output": (((64, 600), (1, 600)),
                                                lambda a, b: tg.nn.functional.linear(a, b)),
}


@pytest.mark.parametrize("name", sorted(PRODUCTS))
def test_replayed_and_compiled_products_are_the_eager_ones(name):
    """Small products are computed eagerly with the compiled sweep's sums (BLAS, which a
    replay used before, sums in another order: a few ulp apart), large ones by BLAS on
    both paths; values and gradients bit for bit, and PyTorch's to rounding."""
    shapes, f = PRODUCTS[name]
    rng = np.random.RandomState(len(name))
    points = [[rng.standard_normal(s) for s in shapes] for _ in range(4)]

    def loss(a, b):
        p = f(a, b)
        return (p * p.sin()).sum()
    traced = tg.trace(loss, *[tg.tensor(p) for p in points[0]])
    compiled = tg.trace(loss, *[tg.tensor(p) for p in points[0]])
    small = "HOST" not in name
    if small:
        compiled.compile()
    for p in points[1:]:
        xs = [tg.tensor(v, requires_grad=True) for v in p]
        eager = loss(*xs)
        eager.backward()
        for tr in (traced, compiled) if small else (traced,):
            value, grads = tr.value_and_grad(*[tg.tensor(v) for v in p])
            assert value.item() == eager.item()
            for g, x in zip(grads, xs):
                np.testing.assert_array_equal(g.numpy(), x.grad.numpy())
        ts = [torch.tensor(v, requires_grad=True) for v in p]
        torch_f = {"bmm": torch.bmm, "linear, no bias": torch.nn.functional.linear,
                   "past HOST_MIN_MACS, linear to one output": torch.nn.functional.linear,
                   "past HOST_MIN_MACS, linear into the arena": torch.nn.functional.linear,
                   "linear": lambda a, b: torch.nn.functional.linear(a, b, b[:, 0])}.get(name, f)
        p = torch_f(*ts)
        (p * p.sin()).sum().backward()
        for x, t in zip(xs, ts):
            np.testing.assert_allclose(x.grad.numpy(), t.grad.numpy(), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["sub", "add", "mul", "div", "pow", "maximum", "atan2"])
def test_a_large_array_with_a_0d_tensor_is_computed_as_with_a_number(name):
    """``x op a`` for a large x and a 0-d a that requires grad (log-sum-exp's ``x -
    max(x)``): the block rule with a's value as a constant, a's gradient through a
    hidden broadcast; eager, replayed and PyTorch agree."""
    x0 = np.random.RandomState(len(name)).uniform(0.5, 2.0, 6000)
    f = getattr(tg, name)

    def loss(x, a):
        return (f(x, a).sin() * 0.5).sum()
    x, a = tg.tensor(x0, requires_grad=True), tg.tensor(1.25, requires_grad=True)
    eager = loss(x, a)
    eager.backward()
    value, (gx, ga) = tg.trace(loss, tg.tensor(x0 * 0.9), tg.tensor(1.1)).value_and_grad(
        tg.tensor(x0), tg.tensor(1.25))
    assert value.item() == eager.item()
    np.testing.assert_array_equal(gx.numpy(), x.grad.numpy())
    assert ga.item() == a.grad.item()
    xt = torch.tensor(x0, requires_grad=True)
    at = torch.tensor(1.25, dtype=torch.float64, requires_grad=True)
    (getattr(torch, name)(xt, at).sin() * 0.5).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), xt.grad.numpy(), rtol=1e-12, atol=1e-14)
    assert a.grad.item() == pytest.approx(at.grad.item(), rel=1e-11)


def test_a_subexpression_computed_twice_replays_eager_gradients_without_the_optimiser():
    """The tape optimiser merges ``a @ b`` computed twice: its two adjoints are added
    before they reach b, a few ulp from eager's two sweeps (documented); without the
    optimiser the replay is eager's, bit for bit; both are PyTorch's to rounding."""
    rng = np.random.RandomState(3)
    a0, b0 = rng.standard_normal((5, 4)), rng.standard_normal((4, 3))

    def loss(a, b):
        return ((a @ b) * (a @ b)).sum()
    xs = [tg.tensor(v, requires_grad=True) for v in (a0, b0)]
    loss(*xs).backward()
    ts = [torch.tensor(v, requires_grad=True) for v in (a0, b0)]
    loss(*ts).backward()
    for optimize in (True, False):
        traced = tg.trace(loss, tg.tensor(a0 * 0.5), tg.tensor(b0 * 0.5), optimize=optimize)
        _, grads = traced.value_and_grad(tg.tensor(a0), tg.tensor(b0))
        for g, x, t in zip(grads, xs, ts):
            if not optimize:
                np.testing.assert_array_equal(g.numpy(), x.grad.numpy())
            np.testing.assert_allclose(g.numpy(), t.grad.numpy(), rtol=1e-13, atol=1e-14)
