"""Gradient of one scalar function at 1,000 different points: record once, replay often.

The function is scalar_chain's extended Rosenbrock over n scalars, taken from a vector
argument.  One timed run = the gradients at all the points:
  tapegrad, torch, autograd, micrograd: eager, the graph rebuilt at every point;
  tapegrad-replay / -compiled: tapegrad.trace(f, x0) once (prep), then .grad(x) per point;
  jax-jit: jax.jit(jax.grad(f)) compiled once (prep), then called per point;
  numba: the hand-written gradient looping over the points in compiled code.
--quick uses 10 points.
"""
import sys

import numpy as np

from ..frameworks import block, jax_gradient, load, numba_compiled, tapegrad_traced
from ..harness import Config, Impl, to_numpy
from .scalar_chain import ops as scalar_chain_ops
from .scalar_chain import rosen, rosen_numpy, rosen_of_vector, rosen_value_and_grad

NAME = "replay"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "tapegrad-compiled", "torch", "torch-mt",
              "jax-jit", "autograd", "micrograd", "numba")
SIZES, QUICK_SIZES = (10, 100, 1_000), (10,)
XLABEL = "n (scalar inputs), 1,000 points"
_EAGER = "eager: a minute or more per 1,000 gradients above this size"
LIMITS = {"tapegrad": (100, _EAGER), "torch": (100, _EAGER), "torch-mt": (100, _EAGER),
          "micrograd": (100, _EAGER), "autograd": (10, _EAGER + " (O(n^2) index VJPs)"),
          "jax-jit": (1_000, "XLA compile time grows super-linearly (minutes at n=10000)")}


def ops(fw, cfg):
    return cfg.params["points"] * scalar_chain_ops(fw, cfg)


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n, "points": 10 if quick else 1_000})]


def _points(cfg):
    return np.random.RandomState(4).uniform(-1.5, 1.5, (cfg.params["points"], cfg.params["n"]))


def reference(cfg):
    values, grads = zip(*(rosen_numpy(p) for p in _points(cfg)))
    return np.array(values), np.array(grads)


def _stacked(values, grads):
    return (None if values is None else np.array(values),
            np.array([to_numpy(g) for g in grads]))


def build(fw, cfg):
    points = _points(cfg)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * points.shape[1] + 1000))
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)

        def run():
            values, grads = [], []
            for p in points:
                x = m.tensor(p, requires_grad=True)
                y = rosen(x.unbind())
                y.backward()
                values.append(y.item())
                grads.append(x.grad)
            return values, grads

        return Impl(run, lambda out: _stacked(*out))
    if fw in ("tapegrad-replay", "tapegrad-compiled"):
        m = load(fw)
        xs = [m.tensor(p) for p in points]
        traced, prep = tapegrad_traced(fw, lambda x: rosen(x.unbind()), xs[0])
        return Impl(lambda: [traced.grad(x) for x in xs], lambda out: _stacked(None, out),
                    prep_s=prep)
    if fw == "jax-jit":
        jnp = load(fw).numpy
        xs = [jnp.asarray(p) for p in points]
        g, prep = jax_gradient(fw, rosen_of_vector, xs[0], value=False)
        return Impl(lambda: block([g(x) for x in xs]), lambda out: _stacked(None, out),
                    prep_s=prep)
    if fw == "autograd":
        vg = load(fw).value_and_grad(rosen_of_vector)
        return Impl(lambda: [vg(p) for p in points], lambda out: _stacked(*zip(*out)),
                    note="array arg, O(n^2) index VJPs")
    if fw == "micrograd":
        Value = load(fw).Value

        def run():
            values, grads = [], []
            for p in points:
                xs = [Value(float(v)) for v in p]
                y = rosen(xs)
                y.backward()
                values.append(y.data)
                grads.append([x.grad for x in xs])
            return values, grads

        return Impl(run, lambda out: _stacked(*out))
    if fw == "numba":
        f, prep = numba_compiled(rosen_value_and_grad, points)
        return Impl(lambda: f(points), prep_s=prep, note="hand-written gradient")
    raise ValueError(fw)
