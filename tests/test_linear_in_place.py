"""A linear layer's product reads its weight in place, transposed (no copy on the tape):
gradients, graph, node calls and hooks, create_graph, forward mode, replay and the
compiled tape, against PyTorch and finite differences."""
import numpy as np
import pytest

import tapegrad as tg
import tapegrad.autograd.forward_ad as fwAD
from tapegrad.autograd.engine import HOST_MIN_MACS
from tapegrad.replay import trace

torch = pytest.importorskip("torch")
RNG = np.random.default_rng(5)
# (batch shape, in, out): products inside the compiled sweep, and past HOST_MIN_MACS (BLAS)
SIZES = [((5,), 4, 3), ((2, 3), 6, 2), ((64,), 64, 32)]


def _layer(m, x, w, b, dtype):
    xs, ws = m.tensor(x, dtype=dtype, requires_grad=True), m.tensor(w, dtype=dtype,
                                                                    requires_grad=True)
    bs = None if b is None else m.tensor(b, dtype=dtype, requires_grad=True)
    y = m.nn.functional.linear(xs, ws, bs)
    (m.tanh(y) * m.tensor(np.linspace(-1, 1, y.numel()).reshape(y.shape), dtype=dtype)
     ).sum().backward()
    return y, [v.grad.numpy() for v in (xs, ws, bs) if v is not None]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("lead,k,n", SIZES)
def test_linear_gradients_and_graph_are_pytorchs(lead, k, n, dtype, bias):
    x, w, b = RNG.normal(size=lead + (k,)), RNG.normal(size=(n, k)), RNG.normal(size=n)
    got = _layer(tg, x, w, b if bias else None, getattr(tg, dtype))
    want = _layer(torch, x, w, b if bias else None, getattr(torch, dtype))
    tol = 1e-12 if dtype == "float64" else 2e-5
    for g, r in zip(got[1], want[1]):
        assert g.dtype == r.dtype
        np.testing.assert_allclose(g, r, rtol=tol, atol=tol)

    def names(node):
        return [node.name(), [(f.name(), names(f)[1]) if f is not None else None
                              for f, _ in node.next_functions]]
    assert names(got[0].grad_fn) == names(want[0].grad_fn)
    assert k * n * int(np.prod(lead)) >= HOST_MIN_MACS or lead != (64,)


def _nodes(m, x, w, b):
    xs, ws, bs = (m.tensor(v, requires_grad=True) for v in (x, w, b))
    y = m.nn.functional.linear(xs, ws, bs)
    return y, y.grad_fn


def test_calling_the_layer_node_gives_pytorchs_gradient_of_the_transpose():
    x, w, b, g = (RNG.normal(size=s) for s in ((5, 4), (3, 4), (3,), (5, 3)))
    got = _nodes(tg, x, w, b)[1](tg.tensor(g))
    want = _nodes(torch, x, w, b)[1](torch.tensor(g))
    assert len(got) == len(want) == 3
    # PyTorch's direct call leaves the bias's gradient broadcast (its engine sums it when
    # it delivers it); tapegrad's is the bias's own
    np.testing.assert_allclose(got[0].detach().numpy(), want[0].detach().numpy().sum(0),
                               rtol=1e-13)
    for a, r in zip(got[1:], want[1:]):      # mat2: the transpose's, (in, out)
        np.testing.assert_allclose(a.detach().numpy(), r.detach().numpy(), rtol=1e-13)
    t_got = _nodes(tg, x, w, b)[1].next_functions[2][0](tg.tensor(want[2].detach().numpy()))
    np.testing.assert_allclose(t_got.numpy(), want[2].detach().numpy().T)


def test_a_post_hook_on_the_layer_node_sees_and_replaces_pytorchs_gradients():
    x, w, b = (RNG.normal(size=s) for s in ((5, 4), (3, 4), (3,)))
    out = []
    for m in (tg, torch):
        xs, ws, bs = (m.tensor(v, requires_grad=True) for v in (x, w, b))
        y = m.nn.functional.linear(xs, ws, bs)
        shapes = []

        def hook(grad_inputs, grad_outputs, shapes=shapes):
            shapes.append([None if g is None else tuple(g.shape) for g in grad_inputs])
            return tuple(None if g is None else 3 * g for g in grad_inputs)
        y.grad_fn.register_hook(hook)
        (y * y).sum().backward()
        out.append((shapes, [v.grad.numpy() for v in (xs, ws, bs)]))
    assert out[0][0] == out[1][0]
    for a, r in zip(out[0][1], out[1][1]):
        np.testing.assert_allclose(a, r, rtol=1e-13)


def test_hooks_on_the_transposed_weight_node_say_they_are_not_supported():
    node = _nodes(tg, *(RNG.normal(size=s) for s in ((5, 4), (3, 4), (3,))))[1]
    tnode = node.next_functions[2][0]
    assert tnode.name() == "TBackward0" and tnode is node.next_functions[2][0]
    with pytest.raises(RuntimeError, match="TBackward0 of a linear layer's weight"):
        tnode.register_hook(lambda gi, go: None)


@pytest.mark.parametrize("lead,k,n", SIZES)
def test_second_derivatives_through_linear_match_pytorch(lead, k, n):
    x, w, b = RNG.normal(size=lead + (k,)), RNG.normal(size=(n, k)), RNG.normal(size=n)
    out = []
    for m in (tg, torch):
        xs, ws, bs = (m.tensor(v, requires_grad=True) for v in (x, w, b))
        y = m.tanh(m.nn.functional.linear(xs, ws, bs)).sum()
        gx, = m.autograd.grad(y, xs, create_graph=True)
        (gx * gx).sum().backward()
        out.append([v.grad.numpy() for v in (xs, ws, bs)])
    for a, r in zip(*out):
        np.testing.assert_allclose(a, r, rtol=1e-11, atol=1e-12)


def test_forward_mode_through_linear_matches_pytorch():
    x, w, b, v = (RNG.normal(size=s) for s in ((5, 4), (3, 4), (3,), (3, 4)))
    out = []
    for m, ad in ((tg, fwAD), (torch, torch.autograd.forward_ad)):
        with ad.dual_level():
            wd = ad.make_dual(m.tensor(w), m.tensor(v))
            y = m.tanh(m.nn.functional.linear(m.tensor(x), wd, m.tensor(b)))
            out.append(ad.unpack_dual(y).tangent.numpy())
    np.testing.assert_allclose(out[0], out[1], rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("lead,k,n", SIZES)
def test_replayed_and_compiled_linear_equal_eager(lead, k, n):
    def f(x, w, b):
        return (tg.tanh(tg.nn.functional.linear(x, w, b)) ** 2).sum()
    shapes = (lead + (k,), (n, k), (n,))
    points = [[tg.tensor(RNG.normal(size=s)) for s in shapes] for _ in range(3)]
    interpreted = trace(f, *points[0], compile_after=None)
    compiled = trace(f, *points[0], compile_after=None)
    small = k * n * int(np.prod(lead)) < 200
    if small:
        compiled.value_and_grad(*points[0])
        compiled.compile()
    for p in points[1:]:
        xs = [v.detach().requires_grad_() for v in p]
        value = f(*xs)
        value.backward()
        for traced in (interpreted, compiled) if small else (interpreted,):
            v, grads = traced.value_and_grad(*p)
            assert v.item() == value.item()
            for g, x in zip(grads, xs):
                np.testing.assert_array_equal(g.numpy(), x.grad.numpy())
