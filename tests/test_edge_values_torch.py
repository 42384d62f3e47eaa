"""Edge values against PyTorch: lgamma and its gradient (the digamma function) at the
poles, +-0, +-inf and nan, on every path (0-d, short arrays, the fused blocks of large
ones, a replay); and reductions, softmax and cat over empty tensors: values, shapes,
dtypes and gradients (None or zeros, as PyTorch), with and without ``create_graph``."""
import warnings

import numpy as np
import pytest
import torch

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")
INF, NAN = float("inf"), float("nan")
# poles (every float below -2**52 is an integer), both zeros, both infinities, nan, and
# ordinary points around them
SPECIAL = [-1.0, -2.0, -100.0, -1e20, INF, -INF, NAN, 0.0, -0.0, 5e-324, -1e-300, -0.5,
           -3.5, 2.5]
SIZES = [None, 7, 5000]        # 0-d (each point), a short array, the fused blocks


def _points(size):
    return [np.array(p) for p in SPECIAL] if size is None else [np.resize(SPECIAL, size)]


def _lgamma(m, a):
    x = m.tensor(a, requires_grad=True)
    y = m.lgamma(x)
    y.backward(m.ones_like(y))
    return y.detach().numpy(), x.grad.numpy()


def _close(got, want, rtol):
    """Equal up to rtol, inf of the same sign and nan where PyTorch's are."""
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=rtol, atol=0, equal_nan=True)


@pytest.mark.parametrize("size", SIZES)
def test_lgamma_and_its_gradient_at_special_points(size):
    for a in _points(size):
        value, grad = _lgamma(tg, a)
        want_value, want_grad = _lgamma(torch, a)
        _close(value, want_value, 1e-13)
        _close(grad, want_grad, 1e-12)
        _close(grad, torch.digamma(torch.tensor(a)).numpy(), 1e-12)


def test_lgamma_float32_special_points():
    a = np.array(SPECIAL, np.float32)
    value, grad = _lgamma(tg, a)
    want_value, want_grad = _lgamma(torch, a)
    _close(value, want_value, 1e-5)
    _close(grad, want_grad, 1e-5)


@pytest.mark.parametrize("size", SIZES)
def test_lgamma_replayed_equals_eager_and_torch(size):
    weights = [np.linspace(0.5, 2.0, 1 if size is None else size).reshape(np.shape(a))
               for a in _points(size)]
    for a, w in zip(_points(size), weights):
        def f(x):
            return (tg.lgamma(x) * tg.tensor(w)).sum()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")      # (lgamma's masks are traced constants)
            traced = tg.trace(f, tg.tensor(a))
        value, grad = traced.value_and_grad(tg.tensor(a))
        x = tg.tensor(a, requires_grad=True)
        eager = f(x)
        eager.backward()
        np.testing.assert_array_equal(value.numpy(), eager.detach().numpy())
        np.testing.assert_array_equal(grad.numpy(), x.grad.numpy())
        xt = torch.tensor(a, requires_grad=True)
        (torch.lgamma(xt) * torch.tensor(w)).sum().backward()
        _close(grad.numpy(), xt.grad.numpy(), 1e-12)


# -- empty tensors -------------------------------------------------------------------------
EMPTY = {
    "sum over the empty dim": ((4, 0), lambda m, x: x.sum(-1)),
    "sum over a non-empty dim": ((4, 0), lambda m, x: x.sum(0)),
    "sum over both, kept": ((4, 0), lambda m, x: x.sum((0, 1), keepdim=True)),
    "sum of all": ((4, 0), lambda m, x: x.sum()),
    "sum over a leading dim of (0, 3)": ((0, 3), lambda m, x: x.sum(0)),
    "sum over a middle dim": ((2, 0, 3), lambda m, x: x.sum(1)),
    "mean of all": ((4, 0), lambda m, x: x.mean()),
    "mean over the empty dim": ((4, 0), lambda m, x: x.mean(-1)),
    "mean over a non-empty dim": ((4, 0), lambda m, x: x.mean(0)),
    "std over the empty dim": ((4, 0), lambda m, x: x.std(-1)),
    "std over a non-empty dim": ((4, 0), lambda m, x: x.std(0)),
    "std of all": ((4, 0), lambda m, x: x.std()),
    "var over the empty dim": ((4, 0), lambda m, x: x.var(-1)),
    "var over a non-empty dim": ((4, 0), lambda m, x: x.var(0)),
    "amax over a non-empty dim": ((4, 0), lambda m, x: x.amax(0)),
    "softmax over the empty dim": ((4, 0), lambda m, x: m.softmax(x, -1)),
    "softmax over a non-empty dim": ((4, 0), lambda m, x: m.softmax(x, 0)),
    "log_softmax over the empty dim": ((4, 0), lambda m, x: m.log_softmax(x, -1)),
    "log_softmax over a non-empty dim": ((4, 0), lambda m, x: m.log_softmax(x, 0)),
    "nn.functional.softmax of (0,)": ((0,), lambda m, x: m.nn.functional.softmax(x, dim=0)),
}


def _empty_run(m, shape, fn, create_graph):
    x = m.zeros(*shape, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")           # (std and var warn of dof <= 0)
        y = fn(m, x)
        g, = m.autograd.grad(y.sum(), x, create_graph=create_graph)
    return y, g


@pytest.mark.parametrize("create_graph", [False, True])
@pytest.mark.parametrize("name", list(EMPTY))
def test_empty_reductions_match_torch(name, create_graph):
    shape, fn = EMPTY[name]
    y, g = _empty_run(tg, shape, fn, create_graph)
    yt, gt = _empty_run(torch, shape, fn, create_graph)
    assert tuple(y.shape) == tuple(yt.shape) and str(y.dtype) == str(yt.dtype).replace(
        "torch", "tapegrad")
    np.testing.assert_array_equal(y.detach().numpy(), yt.detach().numpy())
    assert tuple(g.shape) == tuple(gt.shape) == shape
    assert str(g.dtype) == str(gt.dtype).replace("torch", "tapegrad")
    assert g.requires_grad == gt.requires_grad


@pytest.mark.parametrize("shape,dim", [((4, 0), -1), ((4, 0), 1), ((4, 0), (0, 1)),
                                       ((4, 0), (-1, 0)), ((0, 3), -2), ((4, 0), ()),
                                       ((0,), ())])
@pytest.mark.parametrize("name", ["amax", "amin"])
def test_extreme_over_no_values_is_refused_as_torch(name, shape, dim):
    errors = []
    for m in (torch, tg):
        with pytest.raises((IndexError, RuntimeError)) as info:
            getattr(m.zeros(*shape), name)(dim)
        errors.append((info.type, str(info.value)))
    assert errors[1] == errors[0]


@pytest.mark.parametrize("create_graph", [False, True])
def test_empty_backward_leaves_zeros_grad(create_graph):
    for m in (tg, torch):
        x = m.zeros(4, 0, requires_grad=True)
        x.mean(-1).sum().backward(create_graph=create_graph)
        assert tuple(x.grad.shape) == (4, 0)


@pytest.mark.parametrize("pieces,dim", [([(0,), (3,)], 0), ([(3,), (0,), (2,)], 0),
                                        ([(0,), (2, 3)], 1), ([(2, 0), (2, 3)], 1),
                                        ([(0, 3), (2, 3)], 0)])
def test_cat_with_an_empty_piece(pieces, dim):
    results = []
    for m in (torch, tg):
        xs = [m.full(s, float(k + 1), requires_grad=True) for k, s in enumerate(pieces)]
        y = m.cat(xs, dim)
        (y * m.arange(y.numel(), dtype=y.dtype).reshape(y.shape)).sum().backward()
        results.append((y.detach().numpy(), [x.grad for x in xs]))
    (yt, gts), (y, gs) = results
    np.testing.assert_array_equal(y, yt)
    for g, gt in zip(gs, gts):
        assert (g is None) == (gt is None)
        assert tuple(g.shape) == tuple(gt.shape)
        np.testing.assert_array_equal(g.numpy(), gt.numpy())
