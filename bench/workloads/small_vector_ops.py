"""A chain of 50 elementwise ops on one vector, then sum and backward.

The op cycle keeps values bounded: sin -> *1.01 -> tanh -> +0.5 -> *0.1 -> exp -> sin ...
`chain(m, x)` is shared by torch, tapegrad, jax.numpy, autograd.numpy and numpy (m is the
namespace); Numba runs the same cycle element by element from its op codes.
"""
import numpy as np

from ..frameworks import block, jax_gradient, load, numba_compiled, tapegrad_traced
from ..harness import Config, Impl, leaves, to_float, to_numpy

NAME = "small_vector_ops"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax", "jax-jit", "autograd",
              "numba", "numpy")
SIZES, QUICK_SIZES = (10, 1_000, 100_000, 1_000_000), (10,)
XLABEL = "vector length"
N_OPS = 50

# (op code, constant): 0 sin, 1 multiply, 2 tanh, 3 add, 4 exp
CYCLE = [(0, 0.0), (1, 1.01), (2, 0.0), (3, 0.5), (1, 0.1), (4, 0.0)]
STEPS = [CYCLE[i % len(CYCLE)] for i in range(N_OPS)]
CODES = np.array([c for c, _ in STEPS], np.int64)
CONSTS = np.array([k for _, k in STEPS], np.float64)


def step(m, code, k, x):
    if code == 0:
        return m.sin(x)
    if code == 1:
        return x * k
    if code == 2:
        return m.tanh(x)
    if code == 3:
        return x + k
    return m.exp(x)


def dstep(code, k, x, y):
    """d step / d x, given its input x and output y (works on arrays and on scalars)."""
    if code == 0:
        return np.cos(x)
    if code == 1:
        return k
    if code == 2:
        return 1.0 - y * y
    if code == 3:
        return 1.0
    return y


def chain(m, x):
    for code, k in STEPS:
        x = step(m, code, k, x)
    return m.sum(x)


def numpy_value_and_grad(x):
    """Forward keeping every intermediate, then the hand-written backward."""
    xs = [x]
    for code, k in STEPS:
        xs.append(step(np, code, k, xs[-1]))
    g = np.ones_like(x)
    for (code, k), xin, yout in zip(reversed(STEPS), reversed(xs[:-1]), reversed(xs[1:])):
        g = g * dstep(code, k, xin, yout)
    return float(np.sum(xs[-1])), g


def numba_value_and_grad(x, codes, consts):
    """Element by element: the chain forward into a small buffer, then back (for Numba)."""
    g = np.empty_like(x)
    buf = np.empty(len(codes) + 1)
    total = 0.0
    for i in range(x.size):
        buf[0] = x[i]
        for s in range(len(codes)):
            v = buf[s]
            c = codes[s]
            buf[s + 1] = (np.sin(v) if c == 0 else v * consts[s] if c == 1 else np.tanh(v)
                          if c == 2 else v + consts[s] if c == 3 else np.exp(v))
        total += buf[len(codes)]
        d = 1.0
        for s in range(len(codes) - 1, -1, -1):
            c = codes[s]
            d *= (np.cos(buf[s]) if c == 0 else consts[s] if c == 1 else 1.0 - buf[s + 1] ** 2
                  if c == 2 else 1.0 if c == 3 else buf[s + 1])
        g[i] = d
    return total, g


def ops(fw, cfg):
    return N_OPS + 1  # + the sum


def configs(n, quick):
    return [Config(f"len={n}", n, "float64", {"n": n})]


def _x0(cfg):
    return np.random.RandomState(1).uniform(-2, 2, cfg.params["n"])


def reference(cfg):
    return numpy_value_and_grad(_x0(cfg))


def build(fw, cfg):
    x0 = _x0(cfg)
    if fw == "tapegrad-replay":
        tg = load(fw)
        traced, prep = tapegrad_traced(fw, lambda x: chain(tg, x), x0)
        return Impl(lambda: traced.value_and_grad(x0),
                    lambda out: (to_float(out[0]), to_numpy(out[1])), prep_s=prep)
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)
        st = {}

        def reset():
            st["x"], = leaves(m, [x0], cfg.dtype)

        def run():
            f = chain(m, st["x"])
            f.backward()
            return f

        return Impl(run, lambda f: (to_float(f), to_numpy(st["x"].grad)), reset)
    if fw in ("jax", "jax-jit"):
        jnp = load(fw).numpy
        vg, prep = jax_gradient(fw, lambda x: chain(jnp, x), x0)
        return Impl(lambda: block(vg(x0)), lambda out: (float(out[0]), to_numpy(out[1])),
                    prep_s=prep)
    if fw == "autograd":
        anp = load("autograd.numpy")
        vg = load(fw).value_and_grad(lambda x: chain(anp, x))
        return Impl(lambda: vg(x0), lambda out: (float(out[0]), np.asarray(out[1])))
    if fw == "numba":
        f, prep = numba_compiled(numba_value_and_grad, x0, CODES, CONSTS)
        return Impl(lambda: f(x0, CODES, CONSTS), prep_s=prep, note="hand-written gradient")
    if fw == "numpy":
        return Impl(lambda: numpy_value_and_grad(x0), note="hand-written backward")
    raise ValueError(fw)
