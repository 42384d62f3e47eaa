"""create_graph=True: the backward records itself, so gradients of gradients work.

gradgradcheck for every op of the table that has a second derivative, and PyTorch as
the oracle for Hessians, third derivatives, custom Functions, hooks and retained grads
under create_graph."""
import warnings

import numpy as np
import pytest

import tapegrad as tg
import torch
from tapegrad.autograd import gradgradcheck
from tapegrad.autograd.gradcheck import GradcheckError
from tapegrad.ops.table import BINARY, UNARY
from test_op_table import STRUCTURAL, _call, _inputs, _leaf
from custom_functions import Cube

RNG = np.random.default_rng(3)
KINKED = {"abs", "sign", "relu", "clamp", "maximum", "minimum"}


def _away_from_kinks(op, arrs):
    if op.name in ("abs", "sign", "relu"):
        arrs[0] = np.where(np.abs(arrs[0]) < 0.05, 0.3, arrs[0])
    if op.name == "clamp":
        arrs[0] = np.where(np.abs(np.abs(arrs[0] - 0.1) - 0.6) < 0.05, 0.1, arrs[0])
    if op.name in ("maximum", "minimum"):
        arrs[1] = np.where(np.abs(arrs[0] - arrs[1]) < 0.05, arrs[0] + 0.3, arrs[1])
    return arrs


@pytest.mark.parametrize("op", UNARY + BINARY, ids=lambda op: op.name)
@pytest.mark.parametrize("shape", [(), (3,)], ids=str)
def test_gradgradcheck_elementwise(op, shape):
    arrs = [_inputs(op.domain, shape)] + ([_inputs(op.domain_y, shape)] if op.arity == 2 else [])
    arrs = _away_from_kinks(op, arrs)
    assert gradgradcheck(lambda *xs: _call(op, *xs), [_leaf(a) for a in arrs])


@pytest.mark.parametrize("op", BINARY, ids=lambda op: op.name)
def test_gradgradcheck_with_a_python_number_on_the_right(op):
    x = _leaf(_inputs(op.domain, (3,)))
    assert gradgradcheck(lambda a: _call(op, a, 1.3), [x])


# (PyTorch has no derivative of a Python number % a tensor)
@pytest.mark.parametrize("op", [op for op in BINARY if op.name != "remainder"],
                         ids=lambda op: op.name)
def test_gradgradcheck_with_a_python_number_on_the_left(op):
    y = _leaf(_inputs(op.domain_y, (3,)))
    assert gradgradcheck(lambda b: _call(op, 1.3, b), [y])


@pytest.mark.parametrize("name", sorted(STRUCTURAL))
def test_gradgradcheck_structural(name):
    shapes, fn = STRUCTURAL[name]
    xs = [_leaf(RNG.uniform(0.5, 1.5, s)) for s in shapes]
    # squared, so that the second derivative is not trivially zero for linear maps
    assert gradgradcheck(lambda *a: fn(*a) ** 2, xs)


def test_prod_with_zeros_second_derivative_matches_pytorch(torch_float64):
    for arr in ([1.0, 0.0, 3.0], [0.0, 0.0, 2.0], [2.0, 3.0, 4.0]):
        x = _leaf(np.array(arr))
        g, = tg.autograd.grad(x.prod(), x, create_graph=True)
        h = np.array([tg.autograd.grad(g[k], x, retain_graph=True)[0].numpy() for k in range(3)])
        xt = torch.tensor(arr, requires_grad=True)
        ht = torch.autograd.functional.hessian(lambda v: v.prod(), xt)
        np.testing.assert_allclose(h, ht.numpy(), atol=1e-12)


def _f(m, x, w):
    h = m.tanh(x @ w)
    return (h.sin() * h).sum() + (x.exp() / (1 + x ** 2)).prod() + m.nn.functional.softplus(x).amax()


def test_hessian_and_third_derivative_match_pytorch(torch_float64):
    xa, wa = RNG.uniform(-1, 1, 3), RNG.uniform(-1, 1, (3, 2))
    results = []
    for m in (tg, torch):
        x = m.tensor(xa, requires_grad=True)
        w = m.tensor(wa, requires_grad=True)
        gx, gw = m.autograd.grad(_f(m, x, w), (x, w), create_graph=True)
        hess = [m.autograd.grad(gx[k], (x, w), retain_graph=True) for k in range(3)]
        third, = m.autograd.grad((gx ** 2).sum() + gw.sum(), x, create_graph=True)
        fourth, = m.autograd.grad(third.sum(), x)
        results.append([gx, gw] + [h for pair in hess for h in pair] + [third, fourth])
    for a, b in zip(*results):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_backward_create_graph_gives_grad_with_history_and_warns():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with pytest.warns(UserWarning, match="reference cycle between the parameter and its"):
        (x ** 3).sum().backward(create_graph=True)
    assert x.grad.grad_fn is not None
    np.testing.assert_allclose(x.grad.detach().numpy(), [3.0, 12.0])
    g = x.grad
    x.grad = None
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_create_graph_retains_the_graph_by_default():
    x = tg.tensor(1.5, requires_grad=True)
    y = x.sin() * x
    tg.autograd.grad(y, x, create_graph=True)
    g2, = tg.autograd.grad(y, x)          # the graph is still there
    assert g2.item() == pytest.approx(np.cos(1.5) * 1.5 + np.sin(1.5))
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        tg.autograd.grad(y, x)


def test_create_graph_with_retain_graph_false_frees_the_forward_as_pytorch():
    """The gradient's graph runs through the freed forward entries (exp's result), so
    differentiating it again fails, as in PyTorch; the gradient's value is there."""
    x = tg.tensor(0.7, requires_grad=True)
    y = x.exp() * x
    g, = tg.autograd.grad(y, x, create_graph=True, retain_graph=False)
    assert g.item() == pytest.approx(np.exp(0.7) * 1.7)
    for out in (y, g):
        with pytest.raises(RuntimeError, match="second time"):
            tg.autograd.grad(out, x)


def test_grad_outputs_with_history_double_backward_trick_gives_jvp(torch_float64):
    """jvp by double backward: d/dv <v, J^T u> ... the classic trick needs grad_outputs
    that require grad."""
    xa, va = RNG.uniform(-1, 1, 4), RNG.uniform(-1, 1, 4)
    out = []
    for m in (tg, torch):
        x = m.tensor(xa, requires_grad=True)
        y = m.sin(x) * x.sum()
        u = m.zeros(4, dtype=m.float64, requires_grad=True)
        g, = m.autograd.grad(y, x, u, create_graph=True)
        jvp, = m.autograd.grad(g, u, m.tensor(va))
        out.append(jvp.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12)


def test_custom_function_backward_is_differentiable():
    x = tg.tensor([0.5, -1.0], requires_grad=True)
    g, = tg.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    np.testing.assert_allclose(g.detach().numpy(), 3 * np.array([0.5, -1.0]) ** 2)
    gg, = tg.autograd.grad(g.sum(), x)
    np.testing.assert_allclose(gg.numpy(), 6 * np.array([0.5, -1.0]))


def test_once_differentiable_backward_has_no_history():
    class Sq(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @tg.autograd.once_differentiable
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 2 * x * g

    x = tg.tensor([2.0], requires_grad=True)
    g, = tg.autograd.grad(Sq.apply(x).sum(), x, create_graph=True)
    assert g.grad_fn is None and g.item() == 4.0


def test_hooks_and_retain_grad_see_tensors_under_create_graph():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.retain_grad()
    seen = []
    y.register_hook(lambda g: seen.append(g) or g * 2)
    z = (y * x).sum()
    gx, = tg.autograd.grad(z, x, create_graph=True)
    assert isinstance(seen[0], tg.Tensor)
    # dz/dx = y + (hook: 2 * dz/dy = 2x) * dy/dx = x^2 + 4x^2, recorded with the hook
    np.testing.assert_allclose(gx.detach().numpy(), [5.0, 20.0])
    gg, = tg.autograd.grad(gx.sum(), x)
    # 10x, plus the hook firing again as the second backward passes y (as PyTorch: 12, 24)
    np.testing.assert_allclose(gg.numpy(), [12.0, 24.0])


def _hooks_on_a_history_the_input_does_not_need(m):
    """grad(f(x, y), y, create_graph=True) with y computed from x: PyTorch runs only the
    Nodes that lead to y, so hooks on y's own history fire only in the second backward,
    and the first records nothing for that history."""
    calls = []
    x = m.tensor([1.0, 2.0], requires_grad=True)
    u = x * 3
    u.register_hook(lambda g: calls.append("u"))
    y = u.sin()
    y.register_hook(lambda g: calls.append("y"))
    g, = m.autograd.grad((y * y * x).sum(), y, create_graph=True)
    first = list(calls)
    gg, = m.autograd.grad(g.sum(), x)
    return first, calls, g.detach().numpy(), gg.numpy()


def test_create_graph_runs_only_what_the_inputs_need_as_pytorch(torch_float64):
    ours, theirs = (_hooks_on_a_history_the_input_does_not_need(m) for m in (tg, torch))
    assert ours[:2] == theirs[:2] == (["y"], ["y", "y", "u"])
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-14)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-14)


def test_gradient_through_inner_create_graph_steps_matches_pytorch(torch_float64):
    """An inner ascent on y whose steps are differentiated with respect to x (nested
    reverse over reverse): each inner grad wants y only, the outer one x through all."""
    def outer(m):
        x = m.tensor([0.7, 1.3, -0.4], requires_grad=True)
        y = m.tensor([1.0, 0.5, 0.2], requires_grad=True)
        f = lambda y: (0.5 * x * x - 0.5 * y * y + y * x.sin() + 0.25 * x * x * y).sum()
        for _ in range(4):
            gy, = m.autograd.grad(f(y), y, create_graph=True)
            y = y + 0.2 * gy
        gx, = m.autograd.grad(f(y), x)
        return gx.detach().numpy()

    np.testing.assert_allclose(outer(tg), outer(torch), rtol=1e-13)


def _reached_through_pieces(m):
    """x reaches the loss only through a stack's and a cat's pieces (inputs kept
    outside the A and B columns); u, another piece, does not lead to x."""
    x = m.tensor([0.3, -1.2], requires_grad=True)
    w = m.tensor([2.0, 0.5], requires_grad=True)
    seen = []
    u = (w * 3).exp()
    u.register_hook(lambda g: seen.append("u"))
    v = x.sin()
    v.register_hook(lambda g: seen.append("v"))
    c = m.cat([m.stack([v, u]).reshape(-1), x * x])
    gx, = m.autograd.grad((c * c).sum(), x, create_graph=True)
    ggx, = m.autograd.grad(gx.sum(), x)
    return seen, gx.detach().numpy(), ggx.numpy()


def test_create_graph_reaches_an_input_through_pieces_as_pytorch(torch_float64):
    ours, theirs = _reached_through_pieces(tg), _reached_through_pieces(torch)
    assert ours[0] == theirs[0] == ["v", "v"]      # (u's hook: never; v's: in both grads)
    np.testing.assert_allclose(ours[1], theirs[1], rtol=1e-14)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-14)


def test_retain_grad_under_backward_create_graph():
    x = tg.tensor([1.0, 3.0], requires_grad=True)
    y = x.exp()
    y.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (y * y).sum().backward(create_graph=True)
    assert y.grad.grad_fn is not None
    np.testing.assert_allclose(y.grad.detach().numpy(), 2 * np.exp([1.0, 3.0]))


def test_gradgradcheck_catches_a_wrong_second_derivative():
    class BadSecond(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x.detach() ** 2 * g + 0 * x    # drops the x dependence

    x = _leaf(RNG.uniform(0.5, 1.0, 3))
    assert tg.autograd.gradcheck(BadSecond.apply, [x])
    with pytest.raises(GradcheckError, match="Jacobian mismatch"):
        gradgradcheck(BadSecond.apply, [x])


def test_float32_inputs_get_float32_higher_order_gradients():
    x = tg.tensor([1.0, 2.0], dtype=tg.float32, requires_grad=True)
    g, = tg.autograd.grad((x ** 3).sum(), x, create_graph=True)
    assert g.dtype == tg.float32
    gg, = tg.autograd.grad(g.sum(), x)
    assert gg.dtype == tg.float32
    np.testing.assert_allclose(gg.numpy(), [6.0, 12.0])


def test_a_traced_hvp_recomputes_the_masks_of_its_gradient_rules():
    """relu's step and maximum's share are masks in the recorded gradient: a replay at
    inputs of the other sign must recompute them (analytic Hessian-vector product)."""
    def f(x):
        return (tg.relu(x) * x * x).sum() + (tg.maximum(x, 0.5 * x) * x).sum()
    tr = tg.trace(f, tg.tensor([0.5, 1.0, 2.0]))
    for x in (np.array([-1.0, 0.7, -2.0]), np.array([0.3, -0.4, 1.5])):
        v = np.array([1.0, -2.0, 0.5])
        _, hv = tr.hvp((tg.tensor(x),), tg.tensor(v))
        want = (np.where(x > 0, 6 * x, 0.0) + np.where(x > 0, 2.0, 1.0)) * v
        np.testing.assert_allclose(hv.numpy(), want, rtol=1e-14)


@pytest.mark.parametrize("shapes", [((50, 1, 3), (4, 3)), ((5, 4, 3), (4, 1)), ((6, 3), (3,)),
                                    ((2, 1, 4, 1), (3, 1, 5))])
def test_double_backward_through_broadcasts_is_pytorchs(shapes):
    """A broadcast's transpose under create_graph is a sum over the broadcast dims (as
    PyTorch records it): gradients and Hessian-vector products agree."""
    sx, sc = shapes
    r = np.random.RandomState(len(sx))
    X0, C0, V0 = r.randn(*sx), r.randn(*sc), r.randn(*sc)
    out = {}
    for m in (tg, torch):
        X = m.tensor(X0, requires_grad=True)
        c = m.tensor(C0, requires_grad=True)
        f = ((X - c) ** 2 * (X * c).sin()).sum()
        gc, gx = m.autograd.grad(f, (c, X), create_graph=True)
        hv = m.autograd.grad((gc * m.tensor(V0)).sum(), (c, X))
        out[m] = [t.detach().numpy() for t in (gc, gx) + tuple(hv)]
    for a, b in zip(out[tg], out[torch]):
        np.testing.assert_allclose(a, b, rtol=1e-11, atol=1e-12)


_REDUCTIONS = [
    ("sum", lambda m, x: x.sum()), ("sum_0", lambda m, x: x.sum(0)),
    ("sum_1_keep", lambda m, x: x.sum(1, keepdim=True)), ("sum_02", lambda m, x: x.sum((0, 2))),
    ("mean_2", lambda m, x: x.mean(2)), ("mean", lambda m, x: x.mean()),
    ("amax_1", lambda m, x: x.amax(1)), ("amin_0", lambda m, x: x.amin(0)),
    ("prod_2", lambda m, x: x.prod(2)), ("prod_0", lambda m, x: x.prod(0)),
]


@pytest.mark.parametrize("name,red", _REDUCTIONS, ids=[n for n, _ in _REDUCTIONS])
def test_reduction_derivatives_to_third_order_match_pytorch(name, red, torch_float64):
    """A reduction's backward spreads the output's gradient over the input (an expand,
    as PyTorch's, where the dims allow): its own backward must be the sum again."""
    r = np.random.RandomState(3)
    xv, v, w = r.uniform(0.5, 1.5, (3, 4, 5)), r.randn(3, 4, 5), r.randn(3, 4, 5)
    outs = []
    for m in (tg, torch):
        x = m.tensor(xv, requires_grad=True)
        y = (red(m, x * x.sin()) * 0.3).exp().sum()
        g, = m.autograd.grad(y, x, create_graph=True)
        hv, = m.autograd.grad((g * m.tensor(v)).sum(), x, create_graph=True)
        t, = m.autograd.grad((hv * m.tensor(w)).sum(), x)
        outs.append([a.detach().numpy() for a in (g, hv, t)])
    for ours, theirs in zip(*outs):
        np.testing.assert_allclose(ours, theirs, rtol=1e-11, atol=1e-11)
