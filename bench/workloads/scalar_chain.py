"""Extended Rosenbrock over n scalar (0-d) values, built op by op in a Python loop.

    f = sum_i 100*(x[2i+1] - x[2i]**2)**2 + (1 - x[2i])**2

One timed run = record the graph + backward (leaves are created untimed).
The same `rosen` source runs on every framework: only the scalar type differs.
"""
import sys

import numpy as np

from ..frameworks import block, jax_gradient, load, numba_compiled
from ..harness import Config, Impl, leaves, to_float, to_numpy

NAME = "scalar_chain"
FRAMEWORKS = ("tapegrad", "torch", "torch-mt", "jax", "jax-jit", "autograd", "micrograd",
              "numba", "python")
SIZES, QUICK_SIZES = (100, 1_000, 10_000), (10,)
XLABEL = "n (scalar inputs)"
LIMITS = {"jax": (1_000, "eager JAX takes seconds per gradient from n=1000"),
          "jax-jit": (1_000, "XLA compile time grows super-linearly (minutes at n=10000)")}


def rosen(xs):
    f = 0
    for i in range(0, len(xs) - 1, 2):
        a, b = xs[i], xs[i + 1]
        f = f + (100 * (b - a ** 2) ** 2 + (1 - a) ** 2)
    return f


def rosen_of_vector(x):
    """rosen of a 1-d array-like split into scalars (JAX and HIPS autograd index it)."""
    return rosen([x[i] for i in range(len(x))])


def rosen_value_and_grad(points):
    """Hand-written gradient at each row of ``points``, loop form: what Numba compiles as
    the speed of light (scalar_chain passes one row, replay a thousand)."""
    f = np.zeros(points.shape[0])
    g = np.zeros_like(points)
    for p in range(points.shape[0]):
        x = points[p]
        for i in range(0, x.shape[0] - 1, 2):
            a, b = x[i], x[i + 1]
            d, e = b - a * a, 1.0 - a
            f[p] += 100.0 * d * d + e * e
            g[p, i] = -400.0 * a * d - 2.0 * e
            g[p, i + 1] = 200.0 * d
    return f, g


def rosen_numpy(x):
    """Vectorised value and gradient of one point: the reference."""
    a, b = x[0::2], x[1::2]
    g = np.zeros_like(x)
    g[0::2] = -400 * a * (b - a ** 2) - 2 * (1 - a)
    g[1::2] = 200 * (b - a ** 2)
    return float(np.sum(100 * (b - a ** 2) ** 2 + (1 - a) ** 2)), g


def ops(fw, cfg):
    """Graph nodes per run.  Per term: a**2, b-., .**2, 100*., 1-a, .**2, +, f+ = 8.
    micrograd has no sub: x-y is x+(-y) and -y is y*-1, so both subs cost 2 nodes (10).
    JAX and HIPS autograd index the input array: +1 per input."""
    n = cfg.params["n"]
    per_term = {"micrograd": 10, "autograd": 8 + 2, "jax": 8 + 2, "jax-jit": 8 + 2}.get(fw, 8)
    return per_term * (n // 2)


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n})]


def _x0(cfg):
    return np.random.RandomState(0).uniform(-1.5, 1.5, cfg.params["n"])


def reference(cfg):
    return rosen_numpy(_x0(cfg))


def build(fw, cfg):
    x0 = _x0(cfg)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * len(x0) + 1000))  # micrograd topo sort
    st = {}
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)

        def reset():
            st["xs"] = leaves(m, list(x0), cfg.dtype)

        def run():
            f = rosen(st["xs"])
            f.backward()
            return f

        read = lambda f: (to_float(f), np.array([to_float(x.grad) for x in st["xs"]]))
        return Impl(run, read, reset)
    if fw == "micrograd":
        Value = load(fw).Value

        def reset():
            st["xs"] = [Value(float(v)) for v in x0]

        def run():
            f = rosen(st["xs"])
            f.backward()
            return f

        return Impl(run, lambda f: (f.data, np.array([x.grad for x in st["xs"]])), reset)
    if fw in ("jax", "jax-jit"):
        vg, prep = jax_gradient(fw, rosen_of_vector, x0)
        return Impl(lambda: block(vg(x0)), lambda out: (float(out[0]), to_numpy(out[1])),
                    prep_s=prep)
    if fw == "autograd":
        # rosen(list(x)) on a float64 array: each x[i] is a traced index op on an ArrayBox.
        # A true Python-list argument is unusable: autograd's list-container VJPs are
        # superlinear in pure Python (n=1000: 0.9 s, n=4000: 35 s per gradient). The array
        # form is still O(n^2) (each index VJP scatters into a zeros(n)), hence max_repeats.
        vg = load(fw).value_and_grad(rosen_of_vector)
        return Impl(lambda: vg(x0), lambda out: (float(out[0]), np.asarray(out[1])),
                    max_repeats=3 if len(x0) > 2000 else None, note="array arg, O(n^2) index VJPs")
    if fw == "numba":
        point = x0[None, :]
        f, prep = numba_compiled(rosen_value_and_grad, point)
        return Impl(lambda: f(point), lambda out: (out[0][0], out[1][0]), prep_s=prep,
                    note="hand-written gradient")
    if fw == "python":  # plain floats, forward only: the interpreter floor
        xs = [float(v) for v in x0]
        return Impl(lambda: rosen(xs), lambda f: (f, None), note="forward only")
    raise ValueError(fw)
