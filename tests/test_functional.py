"""``tapegrad.autograd.functional`` against ``torch.autograd.functional``."""
import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.autograd import functional as F
from bench.functional import scalar_heavy  # the code the jacobian speed target is about
from custom_functions import Cube

RNG = np.random.default_rng(11)
TF = torch.autograd.functional


def vec_fn(m, x, w):
    return m.tanh(x @ w) * x.sum(), (x ** 3).prod()


def scalar_fn(m, x, w):
    return (m.sin(x @ w) * (x @ w)).sum() + (x.exp() / (1 + x ** 2)).prod()


def _np(obj):
    if isinstance(obj, tuple):
        return [_np(o) for o in obj]
    return obj.detach().numpy()


def _close(a, b, rtol=1e-11):
    if isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _close(x, y, rtol)
    else:
        assert a.shape == b.shape
        np.testing.assert_allclose(a, b, rtol=rtol, atol=1e-12)


def _pair(xa, wa):
    return ((tg.tensor(xa), tg.tensor(wa)), (torch.tensor(xa), torch.tensor(wa)))


@pytest.mark.parametrize("kw", [{}, {"vectorize": True, "strategy": "forward-mode"},
                                {"create_graph": True}], ids=["reverse", "forward", "graph"])
def test_jacobian_matches_pytorch(torch_float64, kw):
    (tx, tw), (px, pw) = _pair(RNG.uniform(-1, 1, 4), RNG.uniform(-1, 1, (4, 3)))
    ours = F.jacobian(lambda x, w: vec_fn(tg, x, w), (tx, tw), **kw)
    theirs = TF.jacobian(lambda x, w: vec_fn(torch, x, w), (px, pw))   # the oracle
    _close(_np(ours), _np(theirs))
    single = F.jacobian(lambda x: scalar_heavy(tg, x), tx, **kw)
    _close(_np(single), _np(TF.jacobian(lambda x: scalar_heavy(torch, x), px)))


def test_jacobian_of_scalar_heavy_code_r100(torch_float64):
    xa = RNG.uniform(-1, 1, 100)
    ours = F.jacobian(lambda x: scalar_heavy(tg, x), tg.tensor(xa))
    theirs = TF.jacobian(lambda x: scalar_heavy(torch, x), torch.tensor(xa), vectorize=True)
    _close(_np(ours), _np(theirs))


@pytest.mark.parametrize("strategy", ["reverse-mode", "forward-mode"])
def test_hessian_matches_pytorch(torch_float64, strategy):
    (tx, tw), (px, pw) = _pair(RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2)))
    ours = F.hessian(lambda x, w: scalar_fn(tg, x, w), (tx, tw), vectorize=True,
                     outer_jacobian_strategy=strategy)
    theirs = TF.hessian(lambda x, w: scalar_fn(torch, x, w), (px, pw))
    _close(_np(ours), _np(theirs))
    h = F.hessian(lambda x: scalar_fn(tg, x, tw), tx)
    _close(_np(h), _np(TF.hessian(lambda x: scalar_fn(torch, x, pw), px)))


@pytest.mark.parametrize("name", ["vjp", "jvp", "hvp", "vhp"])
@pytest.mark.parametrize("create_graph", [False, True])
def test_products_match_pytorch(torch_float64, name, create_graph):
    (tx, tw), (px, pw) = _pair(RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2)))
    if name in ("hvp", "vhp"):
        va = (RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2)))
        fns = (lambda x, w: scalar_fn(tg, x, w), lambda x, w: scalar_fn(torch, x, w))
    elif name == "jvp":
        va = (RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2)))
        fns = (lambda x, w: vec_fn(tg, x, w), lambda x, w: vec_fn(torch, x, w))
    else:
        va = (RNG.uniform(-1, 1, 2), RNG.uniform(-1, 1, ()))
        fns = (lambda x, w: vec_fn(tg, x, w), lambda x, w: vec_fn(torch, x, w))
    ours = getattr(F, name)(fns[0], (tx, tw), tuple(tg.tensor(v) for v in va),
                            create_graph=create_graph)
    theirs = getattr(TF, name)(fns[1], (px, pw), tuple(torch.tensor(v) for v in va),
                               create_graph=create_graph)
    _close(_np(ours), _np(theirs))


def test_create_graph_results_are_differentiable(torch_float64):
    xa, va = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 3)
    res = []
    for m, fun in ((tg, F), (torch, TF)):
        x = m.tensor(xa, requires_grad=True)
        _, hv = fun.hvp(lambda a: (a.sin() * a.exp()).sum(), x, m.tensor(va), create_graph=True)
        g, = m.autograd.grad(hv.sum(), x)
        res.append(g.numpy())
    _close(res[0], res[1])


def test_hvp_of_rosenbrock_matches_the_hessian():
    n = 50
    xa = RNG.uniform(-1, 1, n)
    va = RNG.uniform(-1, 1, n)

    def rosen(x):
        return sum(100 * (x[2 * i + 1] - x[2 * i] ** 2) ** 2 + (1 - x[2 * i]) ** 2
                   for i in range(n // 2))
    _, hv = F.hvp(rosen, tg.tensor(xa), tg.tensor(va))
    H = F.hessian(rosen, tg.tensor(xa))
    np.testing.assert_allclose(hv.numpy(), H.numpy() @ va, rtol=1e-12, atol=1e-10)


def test_functional_errors_are_pytorchs():
    x = tg.ones(3)
    with pytest.raises(RuntimeError, match="v can only be None if the user-provided function "
                                           "returns a single Tensor with a single element"):
        F.vjp(lambda a: a * 2, x)
    with pytest.raises(RuntimeError, match="The given v should contain a single Tensor"):
        F.jvp(lambda a: a * 2, x, (tg.ones(3), tg.ones(3)))
    with pytest.raises(RuntimeError, match="v has invalid size: should be"):
        F.jvp(lambda a: a * 2, x, tg.ones(2))
    with pytest.raises(RuntimeError, match="should return a single Tensor"):
        F.hessian(lambda a: (a.sum(), a.sum()), x)
    with pytest.raises(RuntimeError, match="should contain a single element"):
        F.hessian(lambda a: a * 2, x)
    with pytest.raises(TypeError, match="must be either a Tensor or a tuple of Tensors"):
        F.jacobian(lambda a: a, [1.0])
    with pytest.raises(NotImplementedError, match="only implemented for `vectorize=True`"):
        F.jacobian(lambda a: a * 2, x, strategy="forward-mode")
    with pytest.raises(RuntimeError, match="does not require gradients"):
        F.jacobian(lambda a: tg.ones(2), x, strict=True)


def test_outputs_independent_of_an_input_give_zeros(torch_float64):
    (tx, tw), (px, pw) = _pair(RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, 2))
    ours = F.jacobian(lambda x, w: x * 2, (tx, tw))
    theirs = TF.jacobian(lambda x, w: x * 2, (px, pw))
    _close(_np(ours), _np(theirs))


def test_jacobian_through_a_custom_function_takes_the_general_path(torch_float64):
    xa = RNG.uniform(-1, 1, 3)
    J = F.jacobian(lambda x: Cube.apply(x).sin(), tg.tensor(xa))
    Jt = TF.jacobian(lambda x: (x ** 3).sin(), torch.tensor(xa))
    _close(_np(J), _np(Jt))


def _jvp_through_a_function(m, with_jvp):
    """functional.jvp of a program with a custom Function (two inputs, two outputs)."""
    class Scaled(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * x * w

        @staticmethod
        def backward(ctx, g):
            x, w = ctx.saved_tensors
            return 2 * x * w * g, (x * x * g).sum()
    if with_jvp:
        Scaled.jvp = staticmethod(lambda ctx, tx, tw: 2 * ctx.saved_tensors[0] * tx)

    def f(x, w):
        y = Scaled.apply(x, w)
        return y.sin(), y.sum() * w
    x = m.tensor([1.0, 2.0, -0.5], dtype=m.float64)
    w = m.tensor(0.7, dtype=m.float64)
    out, jv = m.autograd.functional.jvp(f, (x, w), (m.tensor([1.0, 0.5, -1.0]),
                                                    m.tensor(0.25)))
    return [o.numpy() for o in out + jv], [o.requires_grad for o in out + jv]


@pytest.mark.parametrize("with_jvp", [False, True])
def test_jvp_through_a_custom_function(with_jvp):
    """PyTorch's functional.jvp goes through the Functions' backward twice (the double-
    backward trick), whether or not they define ``jvp``; tapegrad's compiled tangent
    sweep cannot run a Function, so such a program takes the same route."""
    (got, got_rg), (want, want_rg) = (_jvp_through_a_function(tg, with_jvp),
                                      _jvp_through_a_function(torch, with_jvp))
    assert got_rg == want_rg
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-13)
