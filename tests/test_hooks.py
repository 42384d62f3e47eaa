"""Tensor hooks (host entries of the sweep) against PyTorch."""
import numpy as np
import pytest

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")


def test_hook_on_non_leaf_replaces_the_gradient(both):
    def program(m):
        x = m.tensor([1.0, 2.0, -0.5], requires_grad=True)
        y = (x * 3).sin()
        y.register_hook(lambda g: g * 2)
        ((y * y).sum() + y.sum()).backward()
        return x.grad.tolist()
    ref, got = both(program)
    np.testing.assert_allclose(got, ref)


def test_hooks_run_in_order_see_the_gradient_and_can_be_removed(both):
    def program(m):
        seen = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * x
        y.register_hook(lambda g: seen.append(("first", g.tolist())))
        h = y.register_hook(lambda g: g + 1)
        y.register_hook(lambda g: seen.append(("last", g.tolist())))
        y.sum().backward(retain_graph=True)
        h.remove()
        y.sum().backward()
        return seen, x.grad.tolist()
    ref, got = both(program)
    assert got == ref


def test_leaf_hook_runs_before_accumulation(both):
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        h = x.register_hook(lambda g: g * 10)
        (x * 2).sum().backward()
        first = x.grad.tolist()
        h.remove()
        (x * 2).sum().backward()
        return first, x.grad.tolist()
    ref, got = both(program)
    assert got == ref


def test_hooks_in_scalar_chains_and_autograd_grad(both):
    def program(m):
        a = m.tensor(0.7, requires_grad=True)
        b = a.exp() * a
        b.register_hook(lambda g: g * 0.5)
        c = b.tanh() + b
        ga, = m.autograd.grad(c, a)
        return ga.item()
    ref, got = both(program)
    assert got == pytest.approx(ref, rel=1e-12)


def test_hook_errors_leave_state_intact():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        tg.tensor([1.0]).register_hook(lambda g: g)
    y = x * 1.0
    y.register_hook(lambda g: tg.ones(3))
    with pytest.raises(RuntimeError, match="has changed the size of value"):
        y.sum().backward()
    assert x.grad is None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]


def test_post_accumulate_grad_hook(both):
    def program(m):
        seen = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        h = x.register_post_accumulate_grad_hook(lambda p: seen.append(p.grad.tolist()))
        (x * 2).sum().backward()
        h.remove()
        (x * 2).sum().backward()
        with pytest.raises(RuntimeError, match="cannot be registered on non-leaf"):
            (x * 2).register_post_accumulate_grad_hook(lambda p: None)
        return seen, x.grad.tolist()
    ref, got = both(program)
    assert got == ref
