"""Reference cycles through hooks and custom Function contexts are collectable: once the
user's references are gone, ``gc.collect()`` frees the tensors and their tape (hooks
and ctx objects live on the tape, so a hook or ctx that refers to its own tensor makes
a cycle, as it does in PyTorch)."""
import gc
import weakref

import pytest

import tapegrad as tg


def _collected(make, backward=True):
    """``make()`` builds a graph and returns (tensors to watch, loss); after dropping
    every reference (with or without a backward first), gc must free them all."""
    with tg.Tape() as t:
        watched, loss = make()
    refs = [weakref.ref(w) for w in watched] + [weakref.ref(t)]
    if backward:
        loss.backward()
    del watched, loss, t
    gc.collect()
    return [r() is None for r in refs]


class SavesOutput(tg.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(x, y)
        ctx.out = y                          # an attribute too
        return y

    @staticmethod
    def backward(ctx, g):
        _, y = ctx.saved_tensors
        return g * y


def hooked_non_leaf():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.register_hook(lambda g: g * y.detach())            # the hook refers to its tensor
    return [x, y], (y * y).sum()


def hooked_leaf():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    x.register_hook(lambda g: g + 0 * x.detach())
    x.register_post_accumulate_grad_hook(lambda p: x)
    return [x], (x * x).sum()


def node_hooks():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    z = x.sin() * x
    z.grad_fn.register_prehook(lambda go: (go[0] * z.detach(),))
    z.grad_fn.register_hook(lambda gi, go: (gi[0] + 0 * z.detach(), gi[1]))
    acc = z.grad_fn.next_functions[1][0]
    seen = []
    acc.register_hook(lambda gi, go: seen.append(acc.variable))    # refers to its leaf
    return [x, z], z.sum()


def function_saving_output():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    h = x * 3                                # a non-leaf input: the ctx refers to the tape
    y = SavesOutput.apply(h)
    return [x, h, y], y.sum()


def function_marking_dirty():
    class Double_(tg.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            a.mul_(2)
            ctx.mark_dirty(a)
            ctx.a = a
            return a

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = tg.tensor([1.0, 2.0], requires_grad=True)
    y = x * 1
    Double_.apply(y)
    return [x, y], y.sum()


def saved_tensor_hooks():
    x = tg.tensor([1.0, 2.0], requires_grad=True)
    with tg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda p: p):
        y = (x * 2).sin().exp()              # packs refer to tensors of the tape
    return [x, y], y.sum()


@pytest.mark.parametrize("backward", [True, False], ids=["after_backward", "no_backward"])
@pytest.mark.parametrize("make", [hooked_non_leaf, hooked_leaf, node_hooks,
                                  function_saving_output, function_marking_dirty,
                                  saved_tensor_hooks])
def test_cycles_are_collected(make, backward):
    assert all(_collected(make, backward))


def test_a_graph_with_hooks_that_refer_to_nothing_dies_without_gc():
    was = gc.isenabled()
    gc.disable()
    try:
        x = tg.tensor([1.0, 2.0], requires_grad=True)
        with tg.Tape() as t:
            y = x.sin() * x
        y.register_hook(lambda g: g * 2)
        y.grad_fn.register_hook(lambda gi, go: None)
        y.sum().backward()
        ref = weakref.ref(t)
        del t, y
        assert ref() is None
    finally:
        if was:
            gc.enable()
