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


def make_in_place_functions(m):
    class Double_(m.autograd.Function):
        """Doubles its input in place and returns it (mark_dirty)."""
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    class AddInto(m.autograd.Function):
        """a += b in place; returns (a, b * 2)."""
        @staticmethod
        def forward(ctx, a, b):
            a.add_(b)
            ctx.mark_dirty(a)
            return a, b * 2

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, ga + 2 * gb

    return Double_, AddInto


def test_mark_dirty_returns_the_input_with_a_new_history(both):
    def program(m):
        Double_, AddInto = make_in_place_functions(m)
        x = m.tensor([1.0, 2.0], requires_grad=True)
        y = x * 1
        z = Double_.apply(y)
        log = [z is y, y._version, y.grad_fn.name(), y.tolist()]
        (y * y).sum().backward()
        log.append(x.grad.tolist())
        b = m.tensor([1.0, 1.0], requires_grad=True)
        a = x * 1
        o1, o2 = AddInto.apply(a, b)
        log += [o1 is a, a._version]
        (o1 * 3 + o2).sum().backward()
        log += [x.grad.tolist(), b.grad.tolist()]
        c = m.tensor([1.0, 2.0])                      # no graph: modified, version bumped
        r = Double_.apply(c)
        log += [r is c, c.tolist(), c._version, r.requires_grad]
        s = m.tensor([3.0, 4.0])                      # a constant gets a history
        Double_.apply(s * 1)
        AddInto.apply(s, b)
        log += [s.requires_grad, s.grad_fn.name()]
        s.sum().backward()
        log.append(b.grad.tolist())
        return log
    ref, got = both(program)
    assert got == ref


def test_mark_dirty_errors(both):
    def program(m):
        Double_, _ = make_in_place_functions(m)

        class NotReturned(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                a.mul_(2)
                ctx.mark_dirty(a)
                return a.clone()

            @staticmethod
            def backward(ctx, g):
                return g

        out = []
        x = m.tensor([1.0, 2.0], requires_grad=True)
        for f, arg in ((Double_.apply, x), (NotReturned.apply, x * 1)):
            try:
                f(arg)
            except RuntimeError as e:
                out.append(str(e))
        y = x * 1
        s = y.sin()                                   # saved y before it was modified
        Double_.apply(y)
        try:
            s.sum().backward()
        except RuntimeError as e:
            out.append(str(e).replace("torch.", "").replace("tapegrad.", "")[:180])
        with m.no_grad():
            Double_.apply(x)                          # allowed without grad
        out.append(x.tolist())
        return out
    ref, got = both(program)
    assert len(ref) == 4 and got == ref


def test_non_differentiable_outputs_get_zeros_or_none(both):
    def program(m):
        seen = []

        class Split(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                idx = (a > 0).long()
                ctx.mark_non_differentiable(idx)
                return a * 2, idx, 7

            @staticmethod
            def backward(ctx, g, g_idx, g_int):
                seen.append([g.tolist(), g_idx.tolist(), g_int])
                return g * 2

        x = m.tensor([1.0, -2.0], requires_grad=True)
        y, idx, k = Split.apply(x)
        y.sum().backward()
        return seen, x.grad.tolist(), idx.requires_grad, k
    ref, got = both(program)
    assert got == ref
