"""torch.linalg's norms, det, slogdet, inv, solve (and det, logdet, slogdet, inverse at
the top level and as methods) against PyTorch 2.13: values, dtypes, grad_fn names,
gradients, second derivatives (gradgradcheck, and a create_graph gradient of the
gradient against PyTorch's), and PyTorch's errors."""
import math

import numpy as np
import pytest

import tapegrad as tg
from tapegrad.autograd import gradcheck, gradgradcheck
from torch_twins import raised_by_both

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.usefixtures("torch_float64")


def _matrices(shape, seed):
    """Random well-conditioned matrices (the identity times 3 added to each)."""
    a = np.random.default_rng(seed).uniform(-1.0, 1.0, shape)
    if len(shape) >= 2 and shape[-1] == shape[-2]:
        a = a + 3 * np.eye(shape[-1])
    return a


def _outputs(m, program, arrays, create_graph=False):
    leaves = [m.tensor(a, requires_grad=True) for a in arrays]
    out = program(m, *leaves)
    outs = [o for o in (out if isinstance(out, tuple) else (out,))]
    rng = np.random.default_rng(7)
    total = sum((o * m.tensor(rng.standard_normal(tuple(o.shape)))).sum() for o in outs)
    grads = m.autograd.grad(total, leaves, create_graph=create_graph, allow_unused=True)
    return leaves, outs, grads


def _same(want, got, rtol=1e-10):
    w = want.detach()
    w = np.zeros(w.shape) if w._is_zerotensor() else w.numpy()     # (PyTorch's zeros)
    np.testing.assert_allclose(got.detach().numpy(), w, rtol=rtol, atol=rtol * 1e-2)


PROGRAMS = {
    "det": ([(3, 3)], lambda m, a: m.linalg.det(a)),
    "det batch": ([(2, 4, 4)], lambda m, a: m.linalg.det(a)),
    "det 1x1": ([(1, 1)], lambda m, a: m.det(a)),
    "det method": ([(2, 2)], lambda m, a: a.det()),
    "slogdet": ([(3, 3)], lambda m, a: m.linalg.slogdet(a)),
    "slogdet negative": ([(3, 3)], lambda m, a: m.linalg.slogdet(-a)),
    "slogdet batch": ([(2, 3, 3)], lambda m, a: tuple(m.slogdet(a))),
    "slogdet method": ([(3, 3)], lambda m, a: a.slogdet().logabsdet),
    "logdet": ([(3, 3)], lambda m, a: m.logdet(a)),
    "logdet method batch": ([(2, 2, 2)], lambda m, a: a.logdet()),
    "inv": ([(3, 3)], lambda m, a: m.linalg.inv(a)),
    "inv batch": ([(2, 3, 4, 4)], lambda m, a: m.linalg.inv(a)),
    "inverse": ([(2, 2)], lambda m, a: m.inverse(a)),
    "inverse method": ([(3, 3)], lambda m, a: a.inverse()),
    "solve": ([(3, 3), (3, 2)], lambda m, a, b: m.linalg.solve(a, b)),
    "solve vector": ([(3, 3), (3,)], lambda m, a, b: m.linalg.solve(a, b)),
    "solve batch of vectors": ([(4, 3, 3), (4, 3)], lambda m, a, b: m.linalg.solve(a, b)),
    "solve vector broadcast": ([(4, 3, 3), (3,)], lambda m, a, b: m.linalg.solve(a, b)),
    "solve broadcast": ([(3, 3), (2, 3, 2)], lambda m, a, b: m.linalg.solve(a, b)),
    "solve right": ([(3, 3), (2, 3)], lambda m, a, b: m.linalg.solve(a, b, left=False)),
    "vector_norm": ([(3, 4)], lambda m, a: m.linalg.vector_norm(a)),
    "vector_norm ord 3 dim": ([(3, 4)], lambda m, a: m.linalg.vector_norm(a, 3, 1)),
    "vector_norm inf keepdim": ([(3, 4)], lambda m, a: m.linalg.vector_norm(
        a, math.inf, (0,), keepdim=True)),
    "vector_norm 1": ([(5,)], lambda m, a: m.linalg.vector_norm(a, ord=1)),
    "vector_norm 0.5": ([(5,)], lambda m, a: m.linalg.vector_norm(a, 0.5)),
    "vector_norm empty dim": ([(2, 3)], lambda m, a: m.linalg.vector_norm(a, dim=())),
    "matrix_norm": ([(3, 4)], lambda m, a: m.linalg.matrix_norm(a)),
    "matrix_norm 1": ([(3, 4)], lambda m, a: m.linalg.matrix_norm(a, 1)),
    "matrix_norm -1": ([(2, 3, 4)], lambda m, a: m.linalg.matrix_norm(a, -1)),
    "matrix_norm inf": ([(3, 4)], lambda m, a: m.linalg.matrix_norm(a, math.inf)),
    "matrix_norm -inf keepdim": ([(2, 3, 4)], lambda m, a: m.linalg.matrix_norm(
        a, -math.inf, keepdim=True)),
    "matrix_norm dims": ([(3, 2, 4)], lambda m, a: m.linalg.matrix_norm(a, 1, dim=(2, 0))),
    "matrix_norm dims keepdim": ([(3, 2, 4)], lambda m, a: m.linalg.matrix_norm(
        a, math.inf, dim=(-1, 0), keepdim=True)),
    "norm": ([(3, 4)], lambda m, a: m.linalg.norm(a)),
    "norm 3-d": ([(2, 3, 4)], lambda m, a: m.linalg.norm(a)),
    "norm vector ord": ([(5,)], lambda m, a: m.linalg.norm(a, 3)),
    "norm matrix ord": ([(3, 4)], lambda m, a: m.linalg.norm(a, -math.inf)),
    "norm fro": ([(3, 4)], lambda m, a: m.linalg.norm(a, "fro")),
    "norm dim": ([(3, 4)], lambda m, a: m.linalg.norm(a, 2, dim=1)),
    "norm two dims": ([(2, 3, 4)], lambda m, a: m.linalg.norm(a, dim=(0, 2))),
    "norm two dims ord": ([(2, 3, 4)], lambda m, a: m.linalg.norm(a, 1, (0, 2), True)),
    "norm of float32 in float64": ([(3, 4)], lambda m, a: m.linalg.norm(a.float(),
                                                                         dtype=m.float64)),
    "matrix_norm 1 of float32": ([(3, 4)], lambda m, a: m.linalg.matrix_norm(a.float(), 1)),
    "matrix_norm inf of float32 in float64": ([(3, 4)], lambda m, a: m.linalg.matrix_norm(
        a.float(), math.inf, dtype=m.float64)),
}


@pytest.mark.parametrize("name", PROGRAMS)
def test_values_gradients_and_nodes_match_pytorch(name):
    shapes, program = PROGRAMS[name]
    arrays = [_matrices(s, seed=len(name) + k) for k, s in enumerate(shapes)]
    _, want, want_g = _outputs(torch, program, arrays)
    _, got, got_g = _outputs(tg, program, arrays)
    for w, g in zip(want, got):
        assert tuple(g.shape) == tuple(w.shape)
        assert str(g.dtype).rpartition(".")[2] == str(w.dtype).rpartition(".")[2]
        assert g.grad_fn.name() == w.grad_fn.name()
        np.testing.assert_allclose(g.detach().numpy(), w.detach().numpy(),
                                   rtol=1e-6 if "float32" in name else 1e-12, atol=1e-13)
    for w, g in zip(want_g, got_g):
        _same(w, g, 1e-6 if "float32" in name else 1e-10)


_SECOND = ["det", "det batch", "slogdet", "logdet", "inv", "inv batch", "solve",
           "solve vector", "solve batch of vectors", "solve right", "matrix_norm 1", "norm"]


@pytest.mark.parametrize("name", _SECOND)
def test_second_derivatives(name):
    shapes, program = PROGRAMS[name]
    arrays = [_matrices(s, seed=3 + k) for k, s in enumerate(shapes)]
    leaves = [tg.tensor(a, requires_grad=True) for a in arrays]
    assert gradcheck(lambda *xs: program(tg, *xs), leaves)
    assert gradgradcheck(lambda *xs: program(tg, *xs), leaves)
    # the gradient of a weighted sum of the create_graph gradients, against PyTorch's
    sums = []
    for m in (torch, tg):
        leaves, _, grads = _outputs(m, program, arrays, create_graph=True)
        rng = np.random.default_rng(11)
        total = sum((g * m.tensor(rng.standard_normal(tuple(g.shape)))).sum() for g in grads)
        sums.append(m.autograd.grad(total, leaves))
    for w, g in zip(*sums):
        _same(w, g)


def test_det_logdet_and_slogdet_of_singular_and_negative_matrices():
    for a in ([[1.0, 2.0], [2.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [0.0, 0.0]]):
        for f in (lambda m, x: m.det(x), lambda m, x: m.logdet(x),
                  lambda m, x: m.linalg.slogdet(x).sign, lambda m, x: m.slogdet(x)[1]):
            np.testing.assert_array_equal(f(tg, tg.tensor(a)).numpy(),
                                          f(torch, torch.tensor(a)).numpy())
    assert float(tg.linalg.det(tg.ones(0, 0))) == float(torch.linalg.det(torch.ones(0, 0)))


def test_det_gradient_at_a_singular_matrix_is_a_clear_error():
    a = tg.tensor([[1.0, 2.0], [2.0, 4.0]], requires_grad=True)
    with pytest.raises(NotImplementedError, match="singular matrix"):
        tg.linalg.det(a).backward()


def test_float32_results():
    a = _matrices((3, 3), 0)
    for f in (lambda m, x: m.linalg.det(x), lambda m, x: m.linalg.inv(x),
              lambda m, x: m.linalg.solve(x, x[0])):
        want = f(torch, torch.tensor(a, dtype=torch.float32))
        got = f(tg, tg.tensor(a, dtype=tg.float32))
        assert got.dtype is tg.float32
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6)


def test_spectral_and_nuclear_norms_are_refused_by_name():
    for ord in ("nuc", 2, -2):
        with pytest.raises(NotImplementedError, match=f"ord={ord!r}"):
            tg.linalg.matrix_norm(tg.ones(3, 3), ord)
        with pytest.raises(NotImplementedError, match="singular value"):
            tg.linalg.norm(tg.ones(3, 3), ord)


def _errors():
    eye, one = (lambda m: m.eye(2)), (lambda m: m.ones(2, 2))
    return {
        "det not square": lambda m: m.linalg.det(m.ones(2, 3)),
        "det 1-d": lambda m: m.linalg.det(m.ones(3)),
        "det long": lambda m: m.det(m.ones(2, 2, dtype=m.int64)),
        "slogdet not square": lambda m: m.linalg.slogdet(m.ones(2, 3)),
        "slogdet long": lambda m: m.slogdet(m.ones(2, 2, dtype=m.int64)),
        "logdet not square": lambda m: m.logdet(m.ones(2, 3)),
        "logdet long": lambda m: m.logdet(m.ones(2, 2, dtype=m.int64)),
        "logdet 1-d": lambda m: m.logdet(m.ones(3)),
        "inv not square": lambda m: m.linalg.inv(m.ones(2, 3)),
        "inv 1-d": lambda m: m.linalg.inv(m.ones(3)),
        "inv long": lambda m: m.inverse(m.ones(2, 2, dtype=m.int64)),
        "inv singular": lambda m: m.linalg.inv(one(m)),
        "inv singular 3x3": lambda m: m.linalg.inv(m.tensor([[1.0, 2, 3], [2, 4, 6], [0, 1, 1]])),
        "inv singular batch": lambda m: m.linalg.inv(m.stack([eye(m), one(m)])),
        "inverse singular": lambda m: m.inverse(m.zeros(1, 2, 2)),
        "solve singular": lambda m: m.linalg.solve(one(m), m.ones(2)),
        "solve singular batch": lambda m: m.linalg.solve(m.zeros(2, 2, 2), one(m)),
        "solve shapes": lambda m: m.linalg.solve(eye(m), m.ones(3)),
        "solve matrix shapes": lambda m: m.linalg.solve(eye(m), m.ones(3, 2)),
        "solve not square": lambda m: m.linalg.solve(m.ones(2, 3), m.ones(2)),
        "solve dtypes": lambda m: m.linalg.solve(eye(m), m.ones(2, dtype=m.float32)),
        "solve long": lambda m: m.linalg.solve(m.ones(2, 2, dtype=m.int64), m.ones(2)),
        "matrix_norm 1-d": lambda m: m.linalg.matrix_norm(m.ones(3)),
        "matrix_norm ord": lambda m: m.linalg.matrix_norm(one(m), 3),
        "matrix_norm string": lambda m: m.linalg.matrix_norm(one(m), "abc"),
        "matrix_norm dims": lambda m: m.linalg.matrix_norm(m.ones(2, 2, 2), dim=(-1, 2)),
        "matrix_norm three dims": lambda m: m.linalg.matrix_norm(one(m), dim=(0, 1, 1)),
        "matrix_norm long": lambda m: m.linalg.matrix_norm(m.ones(2, 2, dtype=m.int64)),
        "matrix_norm narrowing": lambda m: m.linalg.matrix_norm(one(m), 1, dtype=m.float32),
        "solve right vector": lambda m: m.linalg.solve(eye(m), m.ones(2), left=False),
        "solve right shapes": lambda m: m.linalg.solve(eye(m), m.ones(2, 3), left=False),
        "vector_norm string": lambda m: m.linalg.vector_norm(m.ones(3), "fro"),
        "vector_norm long": lambda m: m.linalg.vector_norm(m.ones(2, dtype=m.int64)),
        "vector_norm dim": lambda m: m.linalg.vector_norm(m.ones(2), 2, dim=5),
        "vector_norm inf empty": lambda m: m.linalg.vector_norm(m.ones(0), math.inf),
        "norm string vector": lambda m: m.linalg.norm(m.ones(3), "fro"),
        "norm 3-d ord": lambda m: m.linalg.norm(m.ones(3, 3, 3), 2),
        "norm ord 3": lambda m: m.linalg.norm(one(m), 3),
        "norm three dims": lambda m: m.linalg.norm(one(m), dim=(0, 1, 2)),
    }


ERRORS = _errors()


@pytest.mark.parametrize("name", ERRORS)
def test_errors_are_pytorchs(name):
    want, got = raised_by_both(ERRORS[name])
    assert isinstance(got, type(want).__mro__[1] if "singular" in name else type(want))
    if "singular" in name:           # PyTorch's LinAlgError, tapegrad's
        assert type(want) is torch.linalg.LinAlgError and type(got) is tg.linalg.LinAlgError
    assert str(got) == str(want)
