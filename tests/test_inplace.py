"""In-place ops and version counters against PyTorch."""
import numpy as np
import pytest
import tapegrad as tg


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


SETITEM_CASES = [  # (key, value shape)
    (1, (4,)), (1, (1,)), ((slice(None), 2), (3,)), ((slice(0, 2), slice(1, 3)), (2, 2)),
    ((slice(0, 2), slice(1, 3)), (1, 2)), ([0, 2], (4,)), ((slice(None), [0, 3]), (3, 2)),
    (([0, 2], [1, 1]), (1,)), ((0, [1, 3]), (2,)), (Ellipsis, (4,)), ((1, Ellipsis), (1, 1, 4)),
    ("mask", (6,)),
]


@pytest.mark.parametrize("x_requires_grad", [True, False], ids=["x_grad", "x_const"])
@pytest.mark.parametrize("key, vshape", SETITEM_CASES, ids=[str(i) for i in range(12)])
def test_setitem_with_a_value_that_requires_grad(both, key, vshape, x_requires_grad):
    def program(m):
        base = np.arange(12.0).reshape(3, 4) / 7
        x = m.tensor(base, requires_grad=x_requires_grad)
        v = m.tensor(np.linspace(-1, 1, int(np.prod(vshape))).reshape(vshape),
                     requires_grad=True)
        y = x * 1.5 if x_requires_grad else m.tensor(base)
        k = m.tensor(base) > 5 / 7 if key == "mask" else key
        y[k] = v * 2
        (y.sin() * m.tensor(np.arange(1.0, 13.0).reshape(3, 4))).sum().backward()
        return (y.tolist(), v.grad.tolist(), x.grad.tolist() if x_requires_grad else None,
                y._version, y.requires_grad)
    ref, got = both(program)
    for r, g in zip(ref[:3], got[:3]):
        if r is not None:
            np.testing.assert_allclose(g, r, rtol=1e-12)
    assert got[3:] == ref[3:]


def test_setitem_errors(both):
    def program(m):
        out = []
        x = m.zeros(2, 3)
        for key, value in [(0, m.ones(2)), ((slice(None), [0, 2]), m.ones(3)),
                           (x > 0, m.ones(2)), (0, m.ones(2, 2, 3))]:
            try:
                x[key] = value
                out.append("no error")
            except RuntimeError as e:
                out.append(str(e).replace("torch.", ""))
        leaf = m.zeros(3, requires_grad=True)
        for key in (0, [0]):
            try:
                leaf[key] = 1.0
            except RuntimeError as e:
                out.append(str(e))
        return out
    ref, got = both(program)
    assert got == ref


def test_inplace_gives_a_constant_or_another_tapes_tensor_a_new_history(both):
    """In-place ops whose result has a history replace the tensor's identity; entries
    that used it before keep its old value and history."""
    def program(m):
        v = m.tensor([1.0, 2.0, 3.0], requires_grad=True)
        c = m.zeros(3)
        c += v * 2                      # a constant becomes a non-leaf
        c.sum().backward()
        x = m.tensor([1.0, 2.0], requires_grad=True)
        h = x * 2
        z = h * 3
        h.mul_(10)
        (z.sum() + h.sum()).backward()
        return v.grad.tolist(), c.grad_fn.name(), x.grad.tolist()
    ref, got = both(program)
    assert got == ref


def test_inplace_on_a_tensor_of_an_older_tape():
    import tapegrad as tg
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.Tape():
        h = x * 2
    with tg.Tape():
        z = h * 3                       # h is an external entry of this tape
        h.mul_(10)                      # recorded here, after z
    (z.sum() + h.sum()).backward()
    assert x.grad.tolist() == [26.0, 26.0]


def test_modified_saved_value_errors_only_where_pytorch_saves_it(both):
    def program(m):
        out = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        for make in (lambda y: y.sin(), lambda y: y * 3.0, lambda y: y * m.ones(3, 2),
                     lambda y: y * m.ones(3, 2, requires_grad=True), lambda y: y.exp()):
            y = x * 1
            s = make(y)
            y.mul_(2)
            try:
                s.sum().backward()
                out.append("ok")
            except RuntimeError as e:
                out.append(str(e).replace("torch.", "").replace("tapegrad.", ""))
        return out
    ref, got = both(program)
    assert got == ref and "ok" in ref and ref.count("ok") < len(ref)


def _inplace_ops():
    """(floor_divide_ has no derivative in PyTorch: tests/test_division_family_torch.py)"""
    from tapegrad.ops.table import EW_OPS
    return [op for op in EW_OPS if op.inplace and op.name != "floor_divide"]


def test_in_place_forms_are_the_tables_and_pytorchs():
    torch = pytest.importorskip("torch")
    from tapegrad.ops.table import EW_OPS
    for op in EW_OPS:
        name = op.name + "_"
        assert hasattr(tg.Tensor, name) == hasattr(torch.Tensor, name) == op.inplace, name


@pytest.mark.parametrize("op", _inplace_ops(), ids=lambda op: op.name)
def test_every_in_place_form_matches_pytorch(op):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    a0 = rng.uniform(*op.domain, 4)
    b0 = rng.uniform(*op.domain_y, 4)
    out = []
    for m in (tg, torch):
        a = m.tensor(a0, requires_grad=True)
        b = m.tensor(b0, requires_grad=True)
        x = a * 1.0
        args = (b,) if op.arity == 2 else (-0.5, 0.7) if op.name == "clamp" else ()
        r = getattr(x, op.name + "_")(*args)
        assert r is x
        (x * m.tensor([1.0, 2.0, -1.0, 0.5])).sum().backward()
        out.append((x.detach().numpy(), a.grad.numpy(),
                    b.grad.numpy() if op.arity == 2 else None))
    (v, ga, gb), (tv, tga, tgb) = out
    np.testing.assert_allclose(v, tv, rtol=1e-14)
    np.testing.assert_allclose(ga, tga, rtol=1e-13)
    if gb is not None:
        np.testing.assert_allclose(gb, tgb, rtol=1e-13)
