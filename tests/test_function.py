"""Custom autograd Functions (host entries) against PyTorch."""
import numpy as np
import pytest
import torch

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")
from tapegrad.autograd import gradcheck


def make_functions(m):
    """The same Functions written against module ``m`` (torch or tapegrad)."""

    class ScaledMul(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, k):
            ctx.save_for_backward(x, y)
            ctx.k = k
            return x * y * k

        @staticmethod
        def backward(ctx, g):
            x, y = ctx.saved_tensors
            return g * y * ctx.k, g * x * ctx.k, None

    class SinCos(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin(), x.cos()

        @staticmethod
        def backward(ctx, gs, gc):
            x, = ctx.saved_tensors
            return gs * x.cos() - gc * x.sin()

    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            r = x.exp()
            ctx.save_for_backward(r)
            return r

        @staticmethod
        def backward(ctx, g):
            r, = ctx.saved_tensors
            return g * r

    return ScaledMul, SinCos, Exp


def program(m):
    ScaledMul, SinCos, Exp = make_functions(m)
    x = m.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = m.tensor([1.5, 2.0, -0.5])                       # no grad: a None edge
    w = m.tensor(0.7, requires_grad=True)
    z = ScaledMul.apply(x, y, 3.0)
    s, c = SinCos.apply(z * w)
    e = Exp.apply(w * w)                                  # a 0-d scalar path input
    out = (s * c).sum() + s.sum() * e
    out.backward()
    graph = (z.grad_fn.name(), [None if f is None else f.name()
                                for f, _ in z.grad_fn.next_functions],
             s.grad_fn is c.grad_fn, [k for _, k in (s * c).grad_fn.next_functions])
    return out.item(), x.grad.tolist(), w.grad.item(), graph


def test_functions_match_torch():
    ref, got = program(torch), program(tg)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], ref[1], rtol=1e-12)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-12)
    assert got[3][0] == ref[3][0] == "ScaledMulBackward"
    assert got[3][1:] == ref[3][1:]


def test_function_passes_gradcheck():
    _, SinCos, Exp = make_functions(tg)
    x = tg.tensor([0.3, -1.2], requires_grad=True)
    assert gradcheck(lambda a: Exp.apply(SinCos.apply(a)[0]) * SinCos.apply(a)[1], [x])


def test_ctx_flags_and_unused_outputs():
    seen = {}

    class Probe(tg.autograd.Function):
        @staticmethod
        def forward(ctx, x, y, flag):
            seen["needs"] = ctx.needs_input_grad
            ctx.set_materialize_grads(False)
            return x * 2, y * 3

        @staticmethod
        def backward(ctx, g1, g2):
            seen["g2"] = g2
            return g1 * 2, None, None

    x = tg.tensor([1.0, 2.0], requires_grad=True)
    a, _ = Probe.apply(x, tg.tensor([1.0, 1.0]), True)
    a.sum().backward()
    assert seen["needs"] == (True, False, False) and seen["g2"] is None
    assert x.grad.tolist() == [2.0, 2.0]


@pytest.mark.parametrize("m", [torch, tg], ids=["torch", "tapegrad"])
def test_function_errors(m):
    class WrongCount(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    class WrongShape(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return m.ones(3)

    class NoForward(m.autograd.Function):
        pass

    class NoBackward(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

    x = m.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match="returned an incorrect number of gradients"):
        WrongCount.apply(x).sum().backward()
    with pytest.raises(RuntimeError, match="returned an invalid gradient at index 0"):
        WrongShape.apply(x).sum().backward()
    with pytest.raises(NotImplementedError, match="must implement the forward function"):
        NoForward.apply(x)
    with pytest.raises(NotImplementedError, match="must implement either the backward"):
        NoBackward.apply(x).sum().backward()
    assert x.grad is None
    (x * 2).sum().backward()
    assert x.grad.tolist() == [2.0, 2.0]
