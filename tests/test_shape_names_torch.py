"""Shape names added to follow PyTorch 2.13: ``swapaxes`` / ``swapdims``, ``moveaxis``,
``tile``, ``broadcast_tensors``, ``diagonal`` (a view, as PyTorch's),
``tensordot``, ``inner``, ``kron``, ``atleast_1d/2d/3d``, ``column_stack``, ``dstack``,
``tensor_split``: values, shapes, Nodes and gradients against PyTorch, gradgradcheck,
and errors."""
import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _run(m, program, arrays):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = program(m, *leaves)
    outs = out if isinstance(out, tuple) else (out,)
    rng = np.random.default_rng(3)
    sum((o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum() for o in outs).backward()
    return ([o.detach().numpy() for o in outs],
            [o.grad_fn.name() if o.grad_fn is not None else None for o in outs],
            [x.grad.numpy() for x in leaves])


PROGRAMS = {
    "swapaxes": ([(2, 3, 4)], lambda m, a: m.swapaxes(a, 0, 2)),
    "swapdims": ([(2, 3)], lambda m, a: a.swapdims(0, 1)),
    "swapdims top": ([(2, 3)], lambda m, a: m.swapdims(a, -1, 0)),
    "moveaxis": ([(2, 3, 4)], lambda m, a: m.moveaxis(a, 0, -1)),
    "tile": ([(2, 3)], lambda m, a: m.tile(a, (2,))),
    "tile more dims": ([(3,)], lambda m, a: a.tile((2, 2))),
    "tile numbers": ([(2, 3)], lambda m, a: a.tile(2, 2)),
    "broadcast_tensors": ([(2, 3), (3,), (2, 1)], lambda m, a, b, c: m.broadcast_tensors(
        a * 1, b, c)),
    "diagonal": ([(3, 4)], lambda m, a: m.diagonal(a)),
    "diagonal offset": ([(3, 4)], lambda m, a: a.diagonal(1)),
    "diagonal negative dims": ([(3, 4, 5)], lambda m, a: a.diagonal(-1, 2, 0)),
    "diagonal far": ([(3, 4)], lambda m, a: m.diagonal(a, 7).sum() + a.sum()),
    "tensordot": ([(2, 3, 4), (3, 4, 5)], lambda m, a, b: m.tensordot(a, b)),
    "tensordot 1": ([(2, 3), (3, 4)], lambda m, a, b: m.tensordot(a, b, 1)),
    "tensordot lists": ([(2, 3, 4), (4, 2)], lambda m, a, b: m.tensordot(a, b, ([0, 2],
                                                                                [1, 0]))),
    "tensordot 0": ([(2,), (3,)], lambda m, a, b: m.tensordot(a, b, 0)),
    "inner": ([(2, 3), (4, 3)], lambda m, a, b: m.inner(a, b)),
    "inner vectors": ([(3,), (3,)], lambda m, a, b: a.inner(b)),
    "inner 0-d": ([(), (2, 3)], lambda m, a, b: m.inner(a, b)),
    "inner empty": ([(3, 0), (3, 0)], lambda m, a, b: m.inner(a, b)),
    "tensordot empty": ([(0, 4), (4, 5)], lambda m, a, b: m.tensordot(a, b, 1)),
    "kron": ([(2, 3), (3,)], lambda m, a, b: m.kron(a, b)),
    "kron 3-d": ([(2, 1, 2), (3, 2)], lambda m, a, b: a.kron(b)),
    "atleast_1d": ([()], lambda m, a: m.atleast_1d(a)),
    "atleast_2d": ([(3,)], lambda m, a: m.atleast_2d(a)),
    "atleast_3d": ([(2, 3)], lambda m, a: m.atleast_3d(a)),
    "atleast_3d vector": ([(3,)], lambda m, a: m.atleast_3d(a)),
    "atleast_3d 0-d": ([()], lambda m, a: m.atleast_3d(a)),
    "atleast several": ([(), (2,)], lambda m, a, b: m.atleast_2d(a, b)),
    "atleast list": ([(), (2,)], lambda m, a, b: m.atleast_1d([a, b])),
    "column_stack": ([(3,), (3, 2), ()], lambda m, a, b, c: m.column_stack(
        [a, b, c.expand(3)])),
    "dstack": ([(2, 3), (2, 3)], lambda m, a, b: m.dstack([a, b])),
    "dstack vectors": ([(3,), (3,)], lambda m, a, b: m.dstack((a, b))),
    "tensor_split": ([(7,)], lambda m, a: m.tensor_split(a, 3)),
    "tensor_split indices": ([(5,)], lambda m, a: m.tensor_split(a, [-2, 1, 7])),
    "tensor_split dim": ([(2, 5)], lambda m, a: a.tensor_split((1, 3), dim=1)),
    "tensor_split tensor": ([(6,)], lambda m, a: m.tensor_split(a, m.tensor([2, 4]))),
    "tensor_split tensor count": ([(6,)], lambda m, a: m.tensor_split(a, m.tensor(4))),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(len(name))
    arrays = [rng.uniform(-2, 2, s) for s in shapes]
    want, got = _run(torch, program, arrays), _run(tg, program, arrays)
    assert len(got[0]) == len(want[0])
    for w, g in zip(want[0], got[0]):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)
    assert got[1] == want[1]
    for w, g in zip(want[2], got[2]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("name", ["tile", "broadcast_tensors", "diagonal negative dims",
                                  "tensordot lists", "inner", "kron 3-d", "dstack",
                                  "tensor_split indices"])
def test_gradgradcheck(name):
    shapes, program = PROGRAMS[name]
    rng = np.random.default_rng(2)
    leaves = [tg.tensor(rng.uniform(-2, 2, s), requires_grad=True) for s in shapes]
    assert gradcheck(lambda *xs: program(tg, *xs), leaves)
    assert gradgradcheck(lambda *xs: program(tg, *xs), leaves)


VIEW_PROGRAMS = {
    # (an in-place op through the diagonal writes into its base, and the base's changes
    # show in it; the gradient goes through CopySlices)
    "write through": lambda m, x: (lambda y: (y.diagonal(1).mul_(3), y)[1])(x * 1),
    "write 3-d": lambda m, x: (lambda y: (y.diagonal(-1, 2, 0).add_(x[0, :2] ** 2), y)[1])(
        x.reshape(2, 3, 4) * 1),
    "base changes": lambda m, x: (lambda y: (lambda d: (y.mul_(2), d * d)[1])(y.diagonal()))(
        x * 1),
    "diag copies": lambda m, x: (lambda y: (m.diag(y).add_(5), y)[1])(x * 1),
}


@pytest.mark.parametrize("name", VIEW_PROGRAMS)
def test_diagonal_is_a_view(name):
    """``diagonal`` is a view of its input, ``diag`` of a matrix a copy, as PyTorch's."""
    def run(m):
        x = m.tensor(np.arange(1.0, 25.0).reshape(4, 6), dtype=m.float64, requires_grad=True)
        out = VIEW_PROGRAMS[name](m, x)
        out.backward(m.tensor(np.linspace(-1, 1, out.numel()).reshape(out.shape)))
        return out.detach().numpy(), x.grad.numpy()
    want, got = run(torch), run(tg)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-13)


ERRORS = {
    "diagonal same dims": lambda m: m.diagonal(m.ones(2, 2), 0, 1, 1),
    "tensordot sizes": lambda m: m.tensordot(m.ones(2, 3), m.ones(2, 3), 1),
    "inner sizes": lambda m: m.inner(m.ones(2, 3), m.ones(2)),
    "tensor_split 0 sections": lambda m: m.tensor_split(m.ones(5), 0),
    "tensor_split 0-d": lambda m: m.tensor_split(m.ones(()), 2),
    "dstack empty": lambda m: m.dstack([]),
    "column_stack tensor": lambda m: m.column_stack(m.ones(2)),
}


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name):
    want, got = raised_by_both(ERRORS[name])
    assert type(got) is type(want)
    assert str(got) == str(want)
