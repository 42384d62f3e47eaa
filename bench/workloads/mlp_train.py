"""A whole MLP training step written with nn and optim: zero_grad, Linear -> Tanh ->
Linear, MSELoss, backward, Adam step.  The same network and data as ``mlp`` (which
times forward + backward on raw ops); this one adds the modules' overhead and the
optimizer update, i.e. what one iteration of a training loop costs.

Every timed run is the first step from the same weights with a fresh optimizer (the
reset, untimed), so its result is checked: the loss, and the updated parameters
against a NumPy Adam step.
"""
import numpy as np

from ..frameworks import load
from ..harness import Impl, to_float, to_numpy
from . import mlp

NAME = "mlp_train"
FRAMEWORKS = ("tapegrad", "torch", "torch-mt")
SIZES, QUICK_SIZES, XLABEL = mlp.SIZES, mlp.QUICK_SIZES, mlp.XLABEL
LR, BETAS, EPS = 1e-3, (0.9, 0.999), 1e-8
configs = mlp.configs


def ops(fw, cfg):
    return None


def _adam_first_step(p, g):
    m, v = (1 - BETAS[0]) * g, (1 - BETAS[1]) * g * g
    step_size = LR / (1 - BETAS[0])
    return p - step_size * m / (np.sqrt(v) / np.sqrt(1 - BETAS[1]) + EPS)


def _layer_params(cfg):
    """x, t and the parameters in nn.Linear's layout: weight (out, in), bias (out,)."""
    x, t, w1, b1, w2, b2 = mlp._data(cfg)
    return x, t, [w1.T.copy(), b1, w2.T.copy(), b2]


def reference(cfg):
    x, t, w1, b1, w2, b2 = [a.astype(np.float64) for a in mlp._data(cfg)]
    value, (g1, gb1, g2, gb2) = mlp.numpy_value_and_grad(x, t, w1, b1, w2, b2)
    new = [_adam_first_step(p, g) for p, g in ((w1.T, g1.T), (b1, gb1), (w2.T, g2.T),
                                               (b2, gb2))]
    return value, np.concatenate([a.ravel() for a in new])


def build(fw, cfg):
    m = load(fw)
    dt = getattr(m, cfg.dtype)
    x, t, params = _layer_params(cfg)
    xt, tt = m.tensor(x, dtype=dt), m.tensor(t, dtype=dt)
    model = m.nn.Sequential(m.nn.Linear(x.shape[1], cfg.params["width"]), m.nn.Tanh(),
                            m.nn.Linear(cfg.params["width"], t.shape[1])).to(dt)
    initial = {k: m.tensor(v, dtype=dt) for k, v in zip(model.state_dict(), params)}
    loss_fn = m.nn.MSELoss()
    st = {}

    def reset():
        model.load_state_dict(initial)
        st["opt"] = m.optim.Adam(model.parameters(), lr=LR, betas=BETAS, eps=EPS)

    def run():
        opt = st["opt"]
        opt.zero_grad()
        loss = loss_fn(model(xt), tt)
        loss.backward()
        opt.step()
        return loss

    def read(loss):
        return to_float(loss), np.concatenate([to_numpy(p.detach()).ravel()
                                               for p in model.parameters()])

    return Impl(run, read, reset, note="nn modules + Adam step")
