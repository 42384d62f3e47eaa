"""A chain of 50 elementwise ops on one vector, then sum and backward.

The op cycle keeps values bounded: sin -> *1.01 -> tanh -> +0.5 -> *0.1 -> exp -> sin ...
`chain(m, x)` is shared by torch, tapegrad, autograd.numpy and numpy (m is the namespace).
"""
import numpy as np

from ..harness import Config, Impl, leaves, load, to_float, to_numpy

NAME = "small_vector_ops"
FRAMEWORKS = ("tapegrad", "torch", "autograd", "numpy")
N_OPS = 50

# (forward(m, x), d out / d x given input x and output y) -- derivative used by numpy only
CYCLE = [
    (lambda m, x: m.sin(x), lambda x, y: np.cos(x)),
    (lambda m, x: x * 1.01, lambda x, y: 1.01),
    (lambda m, x: m.tanh(x), lambda x, y: 1 - y * y),
    (lambda m, x: x + 0.5, lambda x, y: 1.0),
    (lambda m, x: x * 0.1, lambda x, y: 0.1),
    (lambda m, x: m.exp(x), lambda x, y: y),
]
STEPS = [CYCLE[i % len(CYCLE)] for i in range(N_OPS)]


def chain(m, x):
    for fwd, _ in STEPS:
        x = fwd(m, x)
    return m.sum(x)


def numpy_value_and_grad(x):
    """Forward keeping every intermediate, then the hand-written backward."""
    xs = [x]
    for fwd, _ in STEPS:
        xs.append(fwd(np, xs[-1]))
    g = np.ones_like(x)
    for (_, dfn), xin, yout in zip(reversed(STEPS), reversed(xs[:-1]), reversed(xs[1:])):
        g = g * dfn(xin, yout)
    return float(np.sum(xs[-1])), g


def ops(fw, cfg):
    return N_OPS + 1  # + the sum


def configs(quick):
    return [Config(f"len={n}", "float64", {"n": n}) for n in ((10,) if quick else (10, 100_000))]


def _x0(cfg):
    return np.random.RandomState(1).uniform(-2, 2, cfg.params["n"])


def reference(cfg):
    return numpy_value_and_grad(_x0(cfg))


def build(fw, cfg):
    x0 = _x0(cfg)
    if fw in ("tapegrad", "torch"):
        m = load(fw)
        st = {}

        def reset():
            st["x"], = leaves(m, [x0], cfg.dtype)

        def run():
            f = chain(m, st["x"])
            f.backward()
            return f

        return Impl(run, lambda f: (to_float(f), to_numpy(st["x"].grad)), reset)
    if fw == "autograd":
        ag = load(fw)
        anp = load("autograd.numpy")
        vg = ag.value_and_grad(lambda x: chain(anp, x))
        return Impl(lambda: vg(x0), lambda out: (float(out[0]), np.asarray(out[1])))
    if fw == "numpy":
        return Impl(lambda: numpy_value_and_grad(x0), note="hand-written backward")
    raise ValueError(fw)
