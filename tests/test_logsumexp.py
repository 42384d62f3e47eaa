"""logsumexp as one fused entry of the ``softmax`` kind, against PyTorch: values and
gradients over one dim, several adjacent dims, dims that are not adjacent, keepdim, empty
rows and rows of -inf / inf / nan; the graph PyTorch shows (one LogsumexpBackward0
saving self and result); replays at inputs whose max differs by far from the recording's
(each replay shifts by its own max); second derivatives through ``create_graph``;
forward-mode tangents; a sparse Jacobian.  (Every path at 7 and 5,000 elements with
special values: ``test_cross_path_structural``.)"""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.autograd.forward_ad as fwAD

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(41)
CASES = [((5,), 0, False), ((5,), -1, True), ((3, 4), 1, False), ((3, 4), 0, True),
         ((2, 3, 4), (1, 2), False), ((2, 3, 4), (0, 1), True), ((2, 3, 4), (0, 2), False),
         ((2, 3, 4, 2), (1, 3), True), ((2, 3, 4), (0, 1, 2), False), ((), 0, False),
         ((40,), 0, False), ((0, 3), 1, False), ((3, 0), 1, True), ((3, 0), 0, False)]


def _both(shape, dim, keepdim, a=None):
    a = RNG.normal(size=shape) if a is None else a
    out = []
    for m in (tg, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.logsumexp(x, dim, keepdim=keepdim)
        out.append((x, y))
    return out


@pytest.mark.parametrize("shape, dim, keepdim", CASES, ids=str)
def test_values_and_gradients_equal_pytorchs(shape, dim, keepdim):
    (x, y), (tx, ty) = _both(shape, dim, keepdim)
    assert tuple(y.shape) == tuple(ty.shape)
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-14, atol=0)
    w = RNG.normal(size=tuple(ty.shape))
    (y * tg.tensor(w)).sum().backward()
    (ty * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("row", [[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0],
                                 [-np.inf, 2.0], [np.inf, -np.inf], [800.0, 799.0],
                                 [np.inf, 800.0], [800.0, np.nan],
                                 [-800.0, -801.0]], ids=str)
def test_special_rows_equal_pytorchs(row):
    """A row of -inf gives -inf (the shift is 0 where the max is not finite), and the
    gradient is PyTorch's: nan where x - result is nan, exp(x - result) elsewhere."""
    for a, dim in ((np.array([row, [0.5, -0.5]]), 1), (np.array(row), 0)):   # (a short
        (x, y), (tx, ty) = _both(a.shape, dim, False, a)          # vector: in Python)
        y.sum().backward()
        ty.sum().backward()
        np.testing.assert_array_equal(y.detach().numpy(), ty.detach().numpy())
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-15, atol=0)


@pytest.mark.parametrize("dim, keepdim", [(1, False), ((0, 2), True), ((0, 2), False)])
def test_the_graph_is_pytorchs(dim, keepdim):
    """One LogsumexpBackward0 whose edge is the leaf's AccumulateGrad, saving self and
    result as PyTorch's does (dims that are not adjacent included)."""
    (x, y), (tx, ty) = _both((2, 3, 4), dim, keepdim)
    assert y.grad_fn.name() == ty.grad_fn.name() == "LogsumexpBackward0"
    assert [type(f).__name__ for f, _ in y.grad_fn.next_functions] == \
        [type(f).__name__ for f, _ in ty.grad_fn.next_functions] == ["AccumulateGrad"]
    for what in ("self", "result"):
        np.testing.assert_allclose(getattr(y.grad_fn, f"_saved_{what}").detach().numpy(),
                                   getattr(ty.grad_fn, f"_saved_{what}").detach().numpy(),
                                   rtol=1e-14)


@pytest.mark.parametrize("dim, keepdim", [(1, False), (0, True), ((0, 2), False)])
def test_replays_shift_by_their_own_inputs_max(dim, keepdim):
    """Recorded near 0, replayed at inputs near +-1000, where a recorded shift would
    overflow (exp(1000)) or underflow to log(0): equal to PyTorch at those inputs."""
    out_shape = tuple(torch.logsumexp(torch.zeros(3, 4, 2), dim, keepdim=keepdim).shape)
    w = RNG.normal(size=out_shape)

    def f(m, x):
        return (m.logsumexp(x.reshape(3, 4, 2), dim, keepdim=keepdim) * m.tensor(w)).sum()
    tr = tg.trace(lambda x: f(tg, x), tg.tensor(RNG.normal(size=24)))
    for shift in (1000.0, -1000.0):
        a = RNG.normal(size=24) + shift
        value, grad = tr.value_and_grad(tg.tensor(a))
        tx = torch.tensor(a, requires_grad=True)
        want = f(torch, tx)
        want.backward()
        np.testing.assert_allclose(float(value), want.item(), rtol=1e-14)
        np.testing.assert_allclose(grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("dim, keepdim", [(1, False), ((0, 2), True), ((1, 2), False)])
def test_second_derivatives_equal_pytorchs(dim, keepdim):
    """create_graph: the gradient is differentiable again; a Hessian-vector product
    through the first gradient, and the third order along it, equal PyTorch's."""
    a, v = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 3, 4))
    found = []
    for m in (tg, torch):
        x = m.tensor(a, requires_grad=True)
        y = m.logsumexp(x, dim, keepdim=keepdim)
        w = m.tensor(np.linspace(-1.0, 2.0, int(np.prod(tuple(y.shape)))).reshape(tuple(y.shape)))
        (g,) = m.autograd.grad((y * w).sum(), x, create_graph=True)
        (h,) = m.autograd.grad((g * m.tensor(v)).sum(), x, create_graph=True)
        (k,) = m.autograd.grad((h * h).sum(), x)
        found.append([t.detach().numpy() for t in (g, h, k)])
    for ours, theirs in zip(*found):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("dim, keepdim", [(1, False), ((0, 1), True), ((0, 2), False)])
def test_tangents_equal_pytorchs_forward_ad(dim, keepdim):
    a, v = RNG.normal(size=(2, 3, 4)), RNG.normal(size=(2, 3, 4))
    a[0, 0, 0] = -np.inf                     # a row with -inf: its tangent stays finite
    found = []
    for m, ad in ((tg, fwAD), (torch, torch.autograd.forward_ad)):
        with ad.dual_level():
            x = ad.make_dual(m.tensor(a), m.tensor(v))
            found.append(ad.unpack_dual(m.logsumexp(x, dim, keepdim=keepdim)).tangent.numpy())
    np.testing.assert_allclose(found[0], found[1], rtol=1e-13, atol=1e-15)


def test_sparse_jacobian_equals_pytorchs_dense_one():
    """Each output element reads its row only: the pattern is block diagonal."""
    pytest.importorskip("scipy")
    a = RNG.normal(size=12)

    def f(m):
        return lambda x: m.logsumexp(x.reshape(3, 4), 1) * 2.0
    sparse = tg.autograd.functional.jacobian(f(tg), tg.tensor(a), sparse=True)
    dense = torch.autograd.functional.jacobian(f(torch), torch.tensor(a)).numpy()
    assert sparse.nnz == 12
    np.testing.assert_allclose(sparse.toarray(), dense, rtol=1e-14, atol=0)
