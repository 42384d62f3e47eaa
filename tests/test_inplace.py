"""In-place ops and version counters against PyTorch."""
import numpy as np
import pytest


pytestmark = pytest.mark.usefixtures("torch_float64")


@pytest.mark.parametrize("op", ["add_", "sub_", "mul_", "div_", "pow_"])
def test_inplace_on_non_leaf_rebases_history(op, both):
    def program(m):
        x = m.tensor([0.5, 1.5, 2.0], requires_grad=True)
        y = x * x
        getattr(y, op)(1.5)
        z = (y * x).sum()
        z.backward()
        return y.tolist(), y._version, y.grad_fn.name(), x.grad.tolist()
    ref, got = both(program)
    np.testing.assert_allclose(got[0], ref[0])
    assert got[1:3] == ref[1:3]
    np.testing.assert_allclose(got[3], ref[3])


def test_augmented_assignment_and_scalars(both):
    def program(m):
        x = m.tensor(0.7, requires_grad=True)
        s = x * 2
        s += 1
        s *= x
        s -= 0.25
        s /= 3
        s.backward()
        v = m.tensor([1.0, 2.0], requires_grad=True)
        w = v * 1
        w += v
        w.sum().backward()
        return s.item(), x.grad.item(), s._version, v.grad.tolist()
    ref, got = both(program)
    np.testing.assert_allclose(got[0], ref[0])
    np.testing.assert_allclose(got[1], ref[1])
    assert got[2:] == ref[2:]


def test_leaf_inplace_needs_no_grad(both):
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(RuntimeError, match="a leaf Variable that requires grad is being "
                                               "used in an in-place operation"):
            x.add_(1)
        with m.no_grad():
            x.mul_(3).sub_(1)
            x.clamp_(0.0, 4.0)
        (x * x).sum().backward()
        return x.tolist(), x._version, x.grad.tolist(), x.requires_grad, x.is_leaf
    ref, got = both(program)
    assert got == ref


def test_modified_saved_value_raises_and_unsaved_does_not(both):
    def program(m):
        x = m.tensor([1.0, 2.0], requires_grad=True)
        a = x * 1
        b = a * a          # saves a
        a += 1
        with pytest.raises(RuntimeError, match="modified by an inplace operation.*is at "
                                               "version 1; expected version 0 instead"):
            b.sum().backward()
        c = x * 1
        d = c + c          # saves nothing
        c += 1
        d.sum().backward()
        w = m.tensor([3.0, 4.0], requires_grad=True)
        p = w * x          # saves x and w
        with m.no_grad():
            w.add_(1.0)    # an optimizer-style update after p was recorded
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            p.sum().backward()
        return x.grad.tolist()
    ref, got = both(program)
    assert got == ref


def test_setitem_fill_zero_copy(both):
    def program(m):
        x = m.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
        y = x * 2
        y[1:3] = 0.5
        y[0] = m.tensor(7.0)
        (y * y).sum().backward()
        z = m.zeros(2, 3)
        z[0, 1] = 5
        z[:, 2] = m.tensor([1.0, 2.0])
        f = m.ones(3)
        f.fill_(2.5)
        f.zero_()
        c = m.zeros(2)
        c.copy_(m.tensor([3.0, 4.0]))
        return (y.tolist(), x.grad.tolist(), z.tolist(), z._version, f.tolist(), f._version,
                c.tolist(), y.grad_fn.name() is not None)
    ref, got = both(program)
    assert got == ref


def test_sgd_loop_with_inplace_updates_matches_torch(both):
    def program(m):
        w = m.tensor([[0.5, -0.3], [0.8, 0.1]], requires_grad=True)
        b = m.tensor([0.1, -0.2], requires_grad=True)
        X = m.tensor([[1.0, 2.0], [0.5, -1.0], [-1.5, 0.3]])
        Y = m.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
        losses = []
        for _ in range(20):
            loss = ((X @ w + b).tanh() - Y).pow(2).mean()
            loss.backward()
            with m.no_grad():
                for p in (w, b):
                    p -= 0.3 * p.grad
                    p.grad.zero_()
            losses.append(loss.item())
        return losses, w.tolist(), w._version
    ref, got = both(program)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    assert got[2] == ref[2]
