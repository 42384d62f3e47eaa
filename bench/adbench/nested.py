"""Nested reverse-over-reverse: a saddle point by gradient steps (in the spirit of
GradBench's ``saddle``, after Pearlmutter and Siskind), min over x of max over y of

    f(x, y) = |x|^2 / 2 - |y|^2 / 2 + sum(y * sin(x)) + sum(x^2 y) / 4

(smooth, concave in y; the saddle is at x = 0, y = 0).  With the start point s (every
gradient descent starts there, x and y alike):
  1. argmin: J = 8 steps x <- x - 0.2 dF/dx, where F(x) = f(x, y_K(x)) and y_K(x) is
     the inner argmax after K = 8 steps y <- y + 0.2 df/dy from y = s.  The inner
     gradients are taken with create_graph=True, so y_K depends on x through them and
     the outer gradient dF/dx differentiates the inner backward passes (reverse over
     reverse);
  2. argmax: at that x, K plain steps of y (no nesting).
Timed: the whole procedure.  Checked: F at each outer step, then the final x and y.
Reference: PyTorch, float64.  Inputs: s ~ U(0.5, 1.5), seed 19.  Rows:
  tapegrad, torch: eager, autograd.grad as above;
  tapegrad-replay: tapegrad.trace of F (the inner create_graph backward passes recorded
    on its tape) and of f, once each (prep); then F's value_and_grad replayed per outer
    step and f's per inner step of the argmax, the updates in NumPy;
  jax-jit: jax.grad inside jax.value_and_grad, one compiled outer step, one compiled argmax.
--quick: d = 2, 2 outer x 2 inner steps.
"""
import sys

import numpy as np

from ..frameworks import block, load, tapegrad_traced, timed
from ..harness import Config, Impl, to_numpy
from .common import jax_api, tape_ops, torch_reference

NAME = "nested"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax-jit")
SIZES, QUICK_SIZES = (2, 1_000), (2,)
XLABEL = "dimension of x and y (8 outer x 8 inner steps)"
STEPS, LR = 8, 0.2


def f(m, x, y):
    return m.sum(0.5 * x * x - 0.5 * y * y + y * m.sin(x) + 0.25 * x * x * y)


def configs(d, quick):
    return [Config(f"d={d}", d, "float64", {"d": d, "steps": 2 if quick else STEPS})]


def _start(cfg):
    return np.random.RandomState(19).uniform(0.5, 1.5, cfg.params["d"])


def _read(values, x, y):
    return np.array([float(v) for v in values]), np.concatenate([to_numpy(x), to_numpy(y)])


def inner(m, s, steps, x, create_graph):
    """y after ``steps`` ascent steps from s; a function of x when ``create_graph``."""
    y = m.tensor(s, requires_grad=True)
    for _ in range(steps):
        gy, = m.autograd.grad(f(m, x, y), y, create_graph=create_graph)
        y = y + LR * gy
        if not create_graph:
            y = y.detach().requires_grad_()
    return y


def _eager(m, s, steps):
    def run():
        x, values = m.tensor(s, requires_grad=True), []
        for _ in range(steps):
            F = f(m, x, inner(m, s, steps, x, True))
            gx, = m.autograd.grad(F, x)
            values.append(F.item())
            x = (x.detach() - LR * gx).requires_grad_()
        x = x.detach()
        return values, x, inner(m, s, steps, x, False).detach()

    return run


def reference(cfg):
    return torch_reference(lambda: Impl(_eager(load("torch"), _start(cfg), cfg.params["steps"]),
                                        lambda out: _read(*out)))


def build(fw, cfg):
    s, steps = _start(cfg), cfg.params["steps"]
    if fw in ("tapegrad", "torch", "torch-mt"):
        return Impl(_eager(load(fw), s, steps), lambda out: _read(*out))
    if fw == "tapegrad-replay":
        m = load(fw)
        st = m.tensor(s)
        outer, prep = tapegrad_traced(fw, lambda x: f(m, x, inner(m, s, steps, x, True)), st)
        plain, more = tapegrad_traced(fw, lambda x, y: f(m, x, y), st, st)

        def run():
            x, values = s, []
            for _ in range(steps):
                F, gx = outer.value_and_grad(x)
                values.append(F.item())
                x = x - LR * gx.numpy()
            y = s
            for _ in range(steps):
                y = y + LR * plain.value_and_grad(x, y)[1][1].numpy()
            return values, x, y

        return Impl(run, lambda out: _read(*out), prep_s=prep + more)
    if fw == "jax-jit":
        jax, jm = load(fw), jax_api()

        def argmax(x):
            y = s
            for _ in range(steps):
                y = y + LR * jax.grad(lambda y: f(jm, x, y))(y)
            return y

        outer = jax.value_and_grad(lambda x: f(jm, x, argmax(x)))
        c_outer, prep = timed(lambda: jax.jit(outer).lower(s).compile())
        c_inner, more = timed(lambda: jax.jit(argmax).lower(s).compile())

        def run():
            x, values = s, []
            for _ in range(steps):
                F, gx = c_outer(x)
                values.append(F)
                x = x - LR * gx
            return block((values, x, c_inner(x)))

        return Impl(run, lambda out: _read(*out), prep_s=prep + more)
    raise ValueError(fw)


def ops(fw, cfg):
    return tape_ops(sys.modules[__name__], cfg)
