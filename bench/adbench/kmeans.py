"""k-means objective with its gradient and a Hessian-vector product (after GradBench's
``kmeans``, whose "dir" function needs the Hessian's diagonal):

    f(C) = sum_i min_k ||x_i - c_k||^2

over n points x_i and k centroids c_k in dimension d, as one broadcast (n, k, d) program
with ``amin`` over the centroids.  Timed: f, g = df/dC and H v for a fixed direction v:
  tapegrad, torch: g = autograd.grad(f, C, create_graph=True) (the backward recorded),
    then H v = autograd.grad(sum(g * v), C), a double backward;
  tapegrad-replay: tapegrad.trace(f, C) once (prep), then value_and_grad(C) and
    hvp((C,), v) replayed;
  jax-jit: value_and_grad and jvp(grad) in one compiled function.
Checked: f and (g, H v) concatenated.  Reference: NumPy, g_k = 2 sum_{i in k} (c_k - x_i)
and H v = 2 |k| v_k (the assignment is locally constant).  Inputs: points ~ N(0, 1),
centroids = k of the points plus noise, v ~ N(0, 1), seed 15.  --quick: 50 points.
"""
import sys

import numpy as np

from ..frameworks import block, load, tapegrad_traced, timed
from ..harness import Config, Impl
from .common import flat, jax_api, tape_ops

NAME = "kmeans"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax-jit")
SIZES, QUICK_SIZES = (1_000, 10_000), (50,)
XLABEL = "points (16 centroids, dimension 8)"
K, D = 16, 8


def cost(m, X, C):
    """X is (n, 1, d), C (k, d)."""
    diff = X - C
    return m.sum(m.amin(m.sum(diff * diff, 2), 1))


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n, "k": 4 if quick else K,
                                            "d": 2 if quick else D})]


def _data(cfg):
    """X (n, 1, d), C (k, d), v (k, d)."""
    n, k, d = cfg.params["n"], cfg.params["k"], cfg.params["d"]
    r = np.random.RandomState(15)
    X = r.randn(n, d)
    C = X[r.choice(n, k, replace=False)] + 0.1 * r.randn(k, d)
    return X[:, None, :], C, r.randn(k, d)


def reference(cfg):
    X, C, v = _data(cfg)
    X = X[:, 0, :]
    dist = ((X[:, None, :] - C[None]) ** 2).sum(2)
    near = dist.argmin(1)
    count = np.bincount(near, minlength=C.shape[0]).astype(np.float64)
    sums = np.zeros_like(C)
    np.add.at(sums, near, X)
    g = 2.0 * (count[:, None] * C - sums)
    return float(dist.min(1).sum()), np.concatenate([g.ravel(), (2.0 * count[:, None] * v).ravel()])


def build(fw, cfg):
    X, C, v = _data(cfg)
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)
        Xt, vt, st = m.tensor(X), m.tensor(v), {}

        def reset():
            st["C"] = m.tensor(C, requires_grad=True)

        def run():
            c = st["C"]
            f = cost(m, Xt, c)
            g, = m.autograd.grad(f, c, create_graph=True)
            hv, = m.autograd.grad(m.sum(g * vt), c)
            return f, (g, hv)

        return Impl(run, lambda out: flat(*out), reset)
    if fw == "tapegrad-replay":
        m = load(fw)
        Xt, Ct, vt = m.tensor(X), m.tensor(C), m.tensor(v)
        traced, prep = tapegrad_traced(fw, lambda c: cost(m, Xt, c), Ct)

        def run():
            f, g = traced.value_and_grad(Ct)
            return f, (g, traced.hvp((Ct,), vt)[1])

        return Impl(run, lambda out: flat(*out), prep_s=prep)
    if fw == "jax-jit":
        jax, jm = load(fw), jax_api()

        def f(c):
            return cost(jm, X, c)

        def value_grad_hvp(c, v):
            value, g = jax.value_and_grad(f)(c)
            return value, (g, jax.jvp(jax.grad(f), (c,), (v,))[1])

        compiled, prep = timed(lambda: jax.jit(value_grad_hvp).lower(C, v).compile())
        return Impl(lambda: block(compiled(C, v)), lambda out: flat(*out), prep_s=prep)
    raise ValueError(fw)


def ops(fw, cfg):
    return tape_ops(sys.modules[__name__], cfg)
