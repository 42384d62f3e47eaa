"""The adjoint arena is never cleared whole: a sweep zeroes each adjoint when it first
reaches it.  Here every backward takes a pooled arena that was filled with NaN, so any
adjoint a path adds into or reads without zeroing it first shows up as NaN (or as a
gradient that is not PyTorch's).  Each program is compared with PyTorch: the paths that
add into adjoints outside the compiled sweep's loop (seeds, concatenations, fused runs,
custom Functions, hooks, constants' adjoints) and the ones that read them (leaves,
retained grads, ``autograd.grad``, anomaly mode, the backward trace)."""
import numpy as np
import pytest
import torch

import tapegrad as tg
from tapegrad.autograd import engine
from tapegrad.kernels import fused

from torch_programs import plain, registry

PROGRAMS, program = registry()
R = np.random.RandomState(3)
X34, C31, X5, C5 = R.randn(3, 4), R.randn(3, 1), R.randn(5), R.randn(5)
BIG = R.randn(fused.FUSE_MIN + 5)
X5D, C5D, C63, C14 = R.randn(2, 1, 3, 1, 2), R.randn(1, 4, 1, 5, 1), R.randn(6, 3), R.randn(1, 4)


@pytest.fixture
def poisoned(monkeypatch):
    """Every backward pooled, its arena NaN where the last one did not write."""
    monkeypatch.setattr(engine, "REUSE_MIN", 0)
    take = engine._Adjoints.take.__func__

    def poisoned_take(cls, nv):
        st = take(cls, nv)
        st.arena[:] = np.nan
        return st
    monkeypatch.setattr(engine._Adjoints, "take", classmethod(poisoned_take))


def _leaf(m, a):
    return m.tensor(a, requires_grad=True)


@program
def maximum_with_a_broadcast_constant(m):
    # (a broadcast the arithmetic kind does not take: a hidden expand of the constant)
    x = _leaf(m, X34)
    m.maximum(x, m.tensor(C31)).pow(2).sum().backward()
    return x.grad


@program
def cat_and_stack_with_constant_pieces(m):
    x, y = _leaf(m, X5), _leaf(m, C5)
    c = m.tensor(C5)
    z = m.cat([c, x * 2, c]) * m.cat([y, c, y])
    (z.sum() + m.stack([c, x, c]).prod(0).sum()).backward()
    return x.grad, y.grad


@program
def slice_assigned_into_a_constant(m):
    x = _leaf(m, X5[:3])
    c = m.zeros(5, dtype=m.float64)
    c[1:4] = x * 2
    (c * c + m.where(c > 0, m.tensor(C5), c)).sum().backward()
    return x.grad


@program
def five_dims_broadcast_against_a_constant(m):
    x = _leaf(m, X5D)
    (x * m.tensor(C5D) + x).exp().sum().backward()
    return x.grad


@program
def matmul_and_a_bias_with_constant_operands(m):
    w = _leaf(m, X34)
    out = m.matmul(m.tensor(C63), w) + m.tensor(C14)
    out.tanh().sum().backward()
    return w.grad


@program
def a_fused_run_with_a_retained_grad_and_a_hook(m):
    x = _leaf(m, BIG)
    c = m.tensor(BIG[::-1].copy())
    h = x.sin() * c
    h.retain_grad()
    seen = []
    h.register_hook(lambda g: seen.append(float(g.sum())))
    g = (h.tanh() + c).exp()
    (g * 1e-3).sum().backward()
    return x.grad, h.grad, seen


@program
def autograd_grad_of_one_input_of_two(m):
    x, y = _leaf(m, X5), _leaf(m, C5)
    z = (x.exp() * y).sum() + (y * y).sum()
    gx, = m.autograd.grad(z, [x])
    return gx


@program
def two_backwards_into_one_leaf(m):
    x = _leaf(m, X5)
    (x * 3).sum().backward()
    (x.sin() * m.tensor(C5)).sum().backward()
    return x.grad


class _Scale:
    """A custom Function that also returns a gradient for its constant input (PyTorch
    drops it)."""

    @staticmethod
    def make(m):
        class Scale(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, c):
                ctx.save_for_backward(x, c)
                return x * c

            @staticmethod
            def backward(ctx, g):
                x, c = ctx.saved_tensors
                return g * c, g * x
        return Scale


@program
def custom_function_with_a_constant_input(m):
    x = _leaf(m, X5)
    y = _Scale.make(m).apply(x.sin(), m.tensor(C5))
    (y * y).sum().backward()
    return x.grad


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_an_uncleared_arena_gives_pytorchs_gradients(poisoned, name):
    got, want = plain(PROGRAMS[name](tg)), plain(PROGRAMS[name](torch))
    assert len(_flat(got)) == len(_flat(want))
    np.testing.assert_allclose(_flat(got), _flat(want), rtol=1e-10, atol=1e-12)


def _flat(r):
    if isinstance(r, list):
        return [v for x in r for v in _flat(x)]
    return [float(r)]


def test_anomaly_mode_reads_no_constant_adjoint(poisoned):
    """Anomaly mode checks the adjoints an entry sent to its inputs for NaN: a
    constant's is none (PyTorch computes none), whatever its arena slot holds."""
    got = []
    for m in (tg, torch):
        x, y = _leaf(m, X34), _leaf(m, X5)
        with m.autograd.detect_anomaly():
            (m.maximum(x, m.tensor(C31)) * m.tensor(X34)).sum().backward()
            _Scale.make(m).apply(y.sin(), m.tensor(C5)).sum().backward()   # (in Python)
        got.append(plain([x.grad, y.grad]))
    np.testing.assert_allclose(_flat(got[0]), _flat(got[1]), rtol=1e-12)


def test_the_backward_trace_shows_what_each_node_sent(poisoned):
    """The trace (one entry at a time) reads each input's adjoint before and after the
    node: an input not reached yet reads as zero, not as what the arena held; what the
    product sent to x and to the constant is its derivative and nothing."""
    x = _leaf(tg, X5)
    y = (x * tg.tensor(C5)).exp().sum()
    frames = tg.viz.trace_backward(y).frames
    sent = {label.split("#")[0]: d for f in frames for _, label, d in f["sent"]
            if f["node"] == "MulBackward0"}
    assert all(np.isfinite(f["incoming"]).all() for f in frames)
    np.testing.assert_allclose(sent["AccumulateGrad"], np.exp(X5 * C5) * C5, rtol=1e-12)
    np.testing.assert_array_equal(sent["const"], np.zeros(5))
