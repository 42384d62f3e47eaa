"""``autograd.graph.saved_tensors_hooks`` against PyTorch: which values are packed, when
unpack runs, that unpacked values change gradients, errors, custom Functions."""
import threading

import numpy as np
import pytest
from test_node_hooks import same

import tapegrad as tg

pytestmark = pytest.mark.usefixtures("torch_float64")


def test_pack_per_saved_value_and_unpack_per_backward(both):
    def program(m):
        calls = []

        def pack(t):
            calls.append(("pack", tuple(t.shape), t.requires_grad, m.is_grad_enabled()))
            return t * 2

        def unpack(t):
            calls.append(("unpack", tuple(t.shape)))
            return t

        x = m.tensor([0.5, 1.5], requires_grad=True)
        y = m.tensor([2.0, -1.0], requires_grad=True)
        w = m.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
        s = m.tensor(0.7, requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(pack, unpack):
            out = (x.sin().sum() + (x * y).sum() + x.exp().sum() + (x * 3.0).sum()
                   + (x * m.tensor([1.0, 2.0])).sum() + (x * w).sum() + (s * s).tanh()
                   + (w @ x).sum())
            packed_x = [c for c in calls if c[0] == "pack"]
        log = [sorted(packed_x)]
        calls.clear()
        out.backward(retain_graph=True)
        log += [sorted(calls), x.grad.tolist(), y.grad.tolist(), w.grad.tolist(), s.grad.item()]
        calls.clear()
        out.backward()                        # unpacked again
        log.append(len(calls))
        try:
            out.backward()
        except RuntimeError as e:
            log.append(str(e)[:40])
        return log
    same(*both(program))


@pytest.mark.parametrize("n", [5, 5000])
def test_large_arrays_are_packed_and_their_unpacked_values_used(both, n):
    """From 4,096 elements values are computed straight into the tape's arena: they are
    packed all the same, once written (a pack that doubles them changes the gradient)."""
    def program(m):
        packed = []

        def pack(t):
            packed.append(tuple(t.shape))
            return t * 2

        x = m.tensor(np.linspace(0.1, 1.0, n), requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = (x * 3.0).exp() + x * x @ m.ones(n, 2)[:, 0]
        y.sum().backward()
        return [packed, float(x.grad.sum()), float(x.grad[-1])]
    same(*both(program))


def test_pack_receives_the_leaf_itself_and_saved_attributes_unpack(both):
    def program(m):
        seen = []
        x = m.tensor([0.5, 1.5], requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: seen.append(t is x) or t * 2,
                                                  lambda p: seen.append("unpack") or p):
            a = x.sin()
        return seen + [a.grad_fn._saved_self.tolist()], seen
    (ref, _), (got, _) = both(program)
    assert got == ref == [True, "unpack", [1.0, 3.0]]


def test_unpacked_values_under_create_graph(both):
    """An unpacked value without history takes the saved value's (second derivatives
    through it), as in PyTorch."""
    def program(m):
        x = m.tensor([0.5, 1.5], requires_grad=True)
        log = []
        for pack in (lambda t: t * 2, lambda t: t, lambda t: t.detach()):
            with m.autograd.graph.saved_tensors_hooks(pack, lambda p: p):
                a = x.sin()
                c = x.exp()
                d = (x * x).sum()
            gx, = m.autograd.grad(a.sum() + c.sum() + d, [x], create_graph=True)
            gxx, = m.autograd.grad(gx.sum(), [x])
            log.append([gx.tolist(), gxx.tolist()])
        return log
    same(*both(program))


def test_node_hooks_and_saved_hooks_together(both):
    def program(m):
        x = m.tensor([0.5, 1.5], requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: t * 3, lambda p: p):
            z = x.cos() * x
        z.grad_fn.register_hook(lambda gi, go: (gi[0] * 2, gi[1]))
        z.sum().backward()
        return x.grad.tolist()
    same(*both(program))


def test_custom_function_saved_tensors(both):
    def program(m):
        class Square(m.autograd.Function):
            @staticmethod
            def forward(ctx, a):
                ctx.save_for_backward(a)
                return a * a

            @staticmethod
            def backward(ctx, g):
                a, = ctx.saved_tensors
                return 2 * a * g

        calls = []
        x = m.tensor([0.5, 1.5], requires_grad=True)
        with m.autograd.graph.saved_tensors_hooks(lambda t: calls.append("pack") or t * 3,
                                                  lambda p: calls.append("unpack") or p):
            o = Square.apply(x)
        packed = list(calls)
        o.sum().backward()
        return packed, list(calls), x.grad.tolist()
    same(*both(program))


def test_nesting_uses_the_innermost_pair(both):
    def program(m):
        calls = []
        x = m.tensor([0.5, 1.5], requires_grad=True)
        graph = m.autograd.graph
        with graph.saved_tensors_hooks(lambda t: calls.append("outer") or t, lambda p: p):
            with graph.saved_tensors_hooks(lambda t: calls.append("inner") or t, lambda p: p):
                x.exp()
            x.cos()
        return calls
    same(*both(program))


def test_errors(both):
    def program(m):
        graph = m.autograd.graph
        x = m.tensor([0.5, 1.5], requires_grad=True)
        out = []

        def attempt(f):
            try:
                f()
                out.append("no error")
            except (RuntimeError, TypeError) as e:
                out.append(f"{type(e).__name__}: {e}")

        def hooks_inside_disabled():
            with graph.disable_saved_tensors_hooks("saved hooks are off here"), \
                    graph.saved_tensors_hooks(lambda t: t, lambda p: p):
                pass

        def disabled_inside_hooks():
            with graph.saved_tensors_hooks(lambda t: t, lambda p: p), \
                    graph.disable_saved_tensors_hooks("off inside"):
                pass

        def pack_in_place():
            with graph.saved_tensors_hooks(lambda t: t.mul_(2), lambda p: p):
                (x * 1).sin()

        attempt(hooks_inside_disabled)
        attempt(disabled_inside_hooks)
        with graph.saved_tensors_hooks(lambda t: 5, lambda p: p):
            a = x.sin()
        attempt(lambda: a.sum().backward())
        with graph.saved_tensors_hooks(lambda t: t, lambda p: m.ones(3)):
            b = x.sin()
        attempt(lambda: b.sum().backward())
        attempt(pack_in_place)
        with graph.saved_tensors_hooks(lambda t: t, lambda p: p):    # usable again after
            c = x.sin()
        c.sum().backward()
        out.append(x.grad.tolist())
        return out
    same(*both(program))


def test_hooks_are_per_thread_and_cost_nothing_when_off():
    recorded = []
    with tg.autograd.graph.saved_tensors_hooks(lambda t: recorded.append("main") or t,
                                               lambda p: p):
        def other():
            with tg.Tape():
                tg.tensor([1.0], requires_grad=True).sin()
        th = threading.Thread(target=other)
        th.start()
        th.join()
        x = tg.tensor([1.0], requires_grad=True)
        with tg.Tape():
            x.sin()
    assert recorded == ["main"]
    assert tg.tape.Tape.append is tg.tape._plain_append    # no observer left installed
    with tg.Tape() as t:
        y = x.sin()
    t.flush()
    assert not t.autograd.packed and not t.FLAGS[y._i] & tg.tape.HOOKED


def test_packed_values_are_freed_by_backward():
    x = tg.tensor([0.5, 1.5], requires_grad=True)
    with tg.Tape() as t, tg.autograd.graph.saved_tensors_hooks(lambda v: v * 1, lambda p: p):
        y = x.sin().exp().sum()
    assert len(t.autograd.packed) == 2
    y.backward()
    assert not t.autograd.packed
    np.testing.assert_allclose(x.grad.numpy(),
                               np.exp(np.sin([0.5, 1.5])) * np.cos([0.5, 1.5]))
