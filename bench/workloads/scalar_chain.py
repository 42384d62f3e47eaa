"""Extended Rosenbrock over n scalar (0-d) leaves, built op by op in a Python loop.

    f = sum_i 100*(x[2i+1] - x[2i]**2)**2 + (1 - x[2i])**2

One timed run = record the graph + backward (leaves are created untimed).
The same `rosen` source runs on every framework: only the scalar type differs.
"""
import sys

import numpy as np

from ..harness import Config, Impl, leaves, load, to_float

NAME = "scalar_chain"
FRAMEWORKS = ("tapegrad", "torch", "micrograd", "autograd", "python")


def rosen(xs):
    f = 0
    for i in range(0, len(xs) - 1, 2):
        a, b = xs[i], xs[i + 1]
        f = f + (100 * (b - a ** 2) ** 2 + (1 - a) ** 2)
    return f


def ops(fw, cfg):
    """Graph nodes per run.  Per term: a**2, b-., .**2, 100*., 1-a, .**2, +, f+ = 8.
    micrograd has no sub: x-y is x+(-y) and -y is y*-1, so both subs cost 2 nodes (10).
    HIPS autograd: indexing the boxed array (x[i]) is a traced primitive, +1 per leaf."""
    n = cfg.params["n"]
    per_term = {"micrograd": 10, "autograd": 8 + 2}.get(fw, 8)
    return per_term * (n // 2)


def configs(quick):
    return [Config(f"n={n}", "float64", {"n": n}) for n in ((100,) if quick else (1_000, 10_000))]


def _x0(cfg):
    return np.random.RandomState(0).uniform(-1.5, 1.5, cfg.params["n"])


def reference(cfg):
    x = _x0(cfg)
    a, b = x[0::2], x[1::2]
    g = np.zeros_like(x)
    g[0::2] = -400 * a * (b - a ** 2) - 2 * (1 - a)
    g[1::2] = 200 * (b - a ** 2)
    return float(np.sum(100 * (b - a ** 2) ** 2 + (1 - a) ** 2)), g


def build(fw, cfg):
    x0 = _x0(cfg)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 20 * len(x0) + 1000))  # micrograd topo sort
    st = {}
    if fw in ("tapegrad", "torch"):
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
    if fw == "autograd":
        # rosen(list(x)) on a float64 array: each x[i] is a traced index op on an ArrayBox.
        # A true Python-list argument is unusable: autograd's list-container VJPs are
        # superlinear in pure Python (n=1000: 0.9 s, n=4000: 35 s per gradient). The array
        # form is still O(n^2) (each index VJP scatters into a zeros(n)), hence max_repeats.
        vg = load(fw).value_and_grad(lambda x: rosen(list(x)))
        return Impl(lambda: vg(x0), lambda out: (float(out[0]), np.asarray(out[1])),
                    max_repeats=3 if len(x0) > 2000 else None, note="array arg, O(n^2) index VJPs")
    if fw == "python":  # plain floats, forward only: the interpreter floor
        xs = [float(v) for v in x0]
        return Impl(lambda: rosen(xs), lambda f: (f, None), note="forward only")
    raise ValueError(fw)
