"""RMSprop (momentum, centered) and Adagrad (learning-rate decay), as PyTorch's."""
import numpy as np

from ..tensor import from_array
from . import _kernels
from .optimizer import Optimizer, flat, state_tensor, write


def _check(**values):
    for name, value in values.items():
        if not 0.0 <= value:
            what = {"lr": "learning rate", "eps": "epsilon value"}.get(name, f"{name} value")
            raise ValueError(f"Invalid {what}: {value}")


def _next_step(state):
    step = state["step"].item() + 1.0
    write(state["step"], np.array([step]))
    return step


class RMSprop(Optimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable))

    def _update(self, group, params):
        lr, alpha, eps = float(group["lr"]), float(group["alpha"]), float(group["eps"])
        weight_decay, momentum = float(group["weight_decay"]), float(group["momentum"])
        centered, maximize = bool(group["centered"]), bool(group["maximize"])
        for p in params:
            x = flat(p)
            state = self.state[p]
            if not state:
                state["step"] = from_array(np.array(0.0))
                state["square_avg"] = state_tensor(p, np.zeros_like(x))
                if momentum > 0:
                    state["momentum_buffer"] = state_tensor(p, np.zeros_like(x))
                if centered:
                    state["grad_avg"] = state_tensor(p, np.zeros_like(x))
            _next_step(state)
            keys = ["square_avg"] + ["grad_avg"] * centered + ["momentum_buffer"] * (momentum > 0)
            olds = {k: flat(state[k]) for k in keys}
            news = {k: np.empty_like(x) for k in keys}
            out = np.empty_like(x)
            sq = olds["square_avg"]
            _kernels.rmsprop(out, x, flat(p.grad), news["square_avg"], sq,
                             news.get("grad_avg", out), olds.get("grad_avg", sq),
                             news.get("momentum_buffer", out), olds.get("momentum_buffer", sq),
                             lr, alpha, eps, weight_decay, momentum, centered, maximize)
            write(p, out)
            for k in keys:
                write(state[k], news[k])


class Adagrad(Optimizer):
    """Its state (step 0, ``sum`` filled with ``initial_accumulator_value``) is made for
    every parameter at construction, as PyTorch's (so it is in the first state dict)."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
               initial_accumulator_value=initial_accumulator_value, eps=eps)
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:
            for p in group["params"]:
                self.state[p]["step"] = from_array(np.array(0.0))
                self.state[p]["sum"] = state_tensor(p, np.full_like(
                    flat(p), group["initial_accumulator_value"]))

    def _update(self, group, params):
        lr, lr_decay, eps = float(group["lr"]), float(group["lr_decay"]), float(group["eps"])
        weight_decay, maximize = float(group["weight_decay"]), bool(group["maximize"])
        for p in params:
            x = flat(p)
            state = self.state[p]
            step = _next_step(state)
            out, sums = np.empty_like(x), np.empty_like(x)
            _kernels.adagrad(out, x, flat(p.grad), sums, flat(state["sum"]),
                             lr / (1 + (step - 1) * lr_decay), eps, weight_decay, maximize)
            write(p, out)
            write(state["sum"], sums)
