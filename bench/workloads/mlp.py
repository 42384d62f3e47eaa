"""2-layer MLP training step: Linear -> tanh -> Linear, MSE loss.

Timed: forward + backward + reading the four gradients as numpy arrays (the SGD
update itself is a numpy axpy identical for everyone, so it is left out and the
parameters stay fixed, which keeps every repeat checkable).
"""
import numpy as np

from ..frameworks import block, jax_gradient, load
from ..harness import Config, Impl, leaves, to_float, to_numpy

NAME = "mlp"
FRAMEWORKS = ("tapegrad", "torch", "torch-mt", "jax", "jax-jit", "autograd", "numpy")
SIZES, QUICK_SIZES = (16, 256, 1024), (16,)
XLABEL = "hidden width"
BATCH, IN, OUT = 64, 16, 1


def forward(m, x, t, w1, b1, w2, b2):
    h = m.tanh(m.matmul(x, w1) + b1)
    y = m.matmul(h, w2) + b2
    return m.mean((y - t) ** 2)


def numpy_value_and_grad(x, t, w1, b1, w2, b2):
    h = np.tanh(x @ w1 + b1)
    d = h @ w2 + b2 - t
    dy = d * (2.0 / d.size)
    dh = (dy @ w2.T) * (1 - h * h)
    return np.mean(d * d), [x.T @ dh, dh.sum(0), h.T @ dy, dy.sum(0)]


def ops(fw, cfg):
    return 8  # matmul, +, tanh, matmul, +, -, **2, mean


def configs(width, quick):
    return [Config(f"width={width}", width, dt, {"width": width}) for dt in ("float64", "float32")]


def _data(cfg):
    """x, t, w1, b1, w2, b2 in the config's dtype (float64 for the reference)."""
    r, w = np.random.RandomState(2), cfg.params["width"]
    arrs = [r.randn(BATCH, IN), r.randn(BATCH, OUT), r.randn(IN, w) / np.sqrt(IN),
            0.1 * r.randn(w), r.randn(w, OUT) / np.sqrt(w), 0.1 * r.randn(OUT)]
    return [a.astype(cfg.dtype) for a in arrs]


def reference(cfg):
    v, g = numpy_value_and_grad(*[a.astype(np.float64) for a in _data(cfg)])
    return v, np.concatenate([a.ravel() for a in g])


def _flat(value, grads):
    return float(value), np.concatenate([np.asarray(a, np.float64).ravel() for a in grads])


def build(fw, cfg):
    x, t, *params = _data(cfg)
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)
        dt = getattr(m, cfg.dtype)
        xt, tt = m.tensor(x, dtype=dt), m.tensor(t, dtype=dt)
        st = {}

        def reset():
            st["p"] = leaves(m, params, cfg.dtype)

        def run():
            loss = forward(m, xt, tt, *st["p"])
            loss.backward()
            return to_float(loss), [to_numpy(p.grad, None) for p in st["p"]]

        return Impl(run, lambda out: _flat(*out), reset)
    if fw in ("jax", "jax-jit"):
        jnp = load(fw).numpy
        vg, prep = jax_gradient(fw, lambda ps: forward(jnp, x, t, *ps), params)
        return Impl(lambda: block(vg(params)), lambda out: _flat(*out), prep_s=prep)
    if fw == "autograd":
        anp = load("autograd.numpy")
        vg = load(fw).value_and_grad(lambda ps: forward(anp, x, t, *ps))
        return Impl(lambda: vg(params), lambda out: _flat(*out))
    if fw == "numpy":
        return Impl(lambda: numpy_value_and_grad(x, t, *params), lambda out: _flat(*out),
                    note="hand-written backward")
    raise ValueError(fw)
