"""Full-batch logistic regression: 50 plain gradient-descent steps (lr 0.1) from w = 0, b = 0.

200 points x 10 features, float64.  A step: logits z = X @ w + b; loss = mean of the binary
cross-entropy softplus(z) - y*z, with softplus written stably from ops every framework has,
(z + |z|)/2 + log1p(exp(-|z|)); backward; w -= lr * dw, b -= lr * db.
Timed: the 50 steps (the fresh leaves at w = 0, b = 0 are made untimed).  Checked: the loss
at every step and the final w, b against NumPy with the analytic gradient.
  tapegrad, torch: eager, update in place under no_grad, .grad reset to None;
  tapegrad-replay: tapegrad.trace(loss, w0, b0) once (prep), then .value_and_grad(w, b)
    per step and a NumPy update;
  jax-jit: one jitted step (value_and_grad + update), called 50 times.
--quick: 20 points, 5 steps.
"""
import numpy as np

from ..frameworks import block, load, tapegrad_traced, timed
from ..harness import Config, Impl, leaves, to_numpy

NAME = "logreg"
FRAMEWORKS = ("tapegrad", "tapegrad-replay", "torch", "torch-mt", "jax-jit", "numpy")
SIZES, QUICK_SIZES = (200,), (20,)
XLABEL = "points (10 features)"
FEATURES, LR = 10, 0.1
STEP_OPS = 12  # matmul, +, abs, +, *0.5, neg, exp, log1p, +, y*z, -, mean


def loss(m, X, y, w, b):
    z = m.matmul(X, w) + b
    a = m.abs(z)
    return m.mean((z + a) * 0.5 + m.log1p(m.exp(-a)) - y * z)


def numpy_train(X, y, w, b, steps):
    """The same steps with the analytic gradient: (losses, final w and b)."""
    losses = []
    for _ in range(steps):
        z = X @ w + b
        a = np.abs(z)
        losses.append(float(np.mean((z + a) * 0.5 + np.log1p(np.exp(-a)) - y * z)))
        dz = (0.5 * (1.0 + np.tanh(0.5 * z)) - y) / y.size  # (sigmoid(z) - y) / n
        w, b = w - LR * (X.T @ dz), b - LR * dz.sum(keepdims=True)
    return np.array(losses), np.concatenate([w, b])


def ops(fw, cfg):
    return cfg.params["steps"] * STEP_OPS


def configs(n, quick):
    return [Config(f"n={n}", n, "float64", {"n": n, "steps": 5 if quick else 50})]


def _data(cfg):
    """X, y (labels 0/1 from a noisy linear rule), w0 = 0, b0 = 0."""
    r = np.random.RandomState(5)
    X = r.randn(cfg.params["n"], FEATURES)
    y = (X @ r.randn(FEATURES) + 0.5 * r.randn(cfg.params["n"]) > 0).astype(np.float64)
    return X, y, np.zeros(FEATURES), np.zeros(1)


def reference(cfg):
    return numpy_train(*_data(cfg), cfg.params["steps"])


def _read(losses, w, b):
    return np.array([float(v) for v in losses]), np.concatenate([to_numpy(w), to_numpy(b)])


def build(fw, cfg):
    X, y, w0, b0 = _data(cfg)
    steps = cfg.params["steps"]
    if fw == "tapegrad-replay":
        m = load(fw)
        Xt, yt = m.tensor(X), m.tensor(y)
        traced, prep = tapegrad_traced(fw, lambda w, b: loss(m, Xt, yt, w, b),
                                       m.tensor(w0), m.tensor(b0))

        def run():
            w, b, losses = w0, b0, []
            for _ in range(steps):
                value, (gw, gb) = traced.value_and_grad(w, b)
                w, b = w - LR * gw.numpy(), b - LR * gb.numpy()
                losses.append(value.item())
            return losses, w, b

        return Impl(run, lambda out: _read(*out), prep_s=prep)
    if fw in ("tapegrad", "torch", "torch-mt"):
        m = load(fw)
        Xt, yt = m.tensor(X), m.tensor(y)
        st = {}

        def reset():
            st["p"] = leaves(m, [w0, b0], cfg.dtype)

        def run():
            w, b = st["p"]
            losses = []
            for _ in range(steps):
                value = loss(m, Xt, yt, w, b)
                value.backward()
                with m.no_grad():
                    w -= LR * w.grad
                    b -= LR * b.grad
                w.grad = b.grad = None
                losses.append(value.item())
            return losses, w, b

        return Impl(run, lambda out: _read(*out), reset)
    if fw == "jax-jit":
        jax = load(fw)
        vg = jax.value_and_grad(lambda p: loss(jax.numpy, X, y, *p))

        def step(p):
            value, g = vg(p)
            return value, [q - LR * dq for q, dq in zip(p, g)]

        compiled, prep = timed(lambda: jax.jit(step).lower([w0, b0]).compile())

        def run():
            p, losses = [w0, b0], []
            for _ in range(steps):
                value, p = compiled(p)
                losses.append(value)
            return block((losses, *p))

        return Impl(run, lambda out: _read(*out), prep_s=prep)
    if fw == "numpy":
        return Impl(lambda: numpy_train(X, y, w0, b0, steps), note="hand-written backward")
    raise ValueError(fw)
