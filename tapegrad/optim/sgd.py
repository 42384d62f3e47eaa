"""Stochastic gradient descent, with momentum, dampening, Nesterov, weight decay, maximize."""
import numpy as np

from . import _kernels
from .optimizer import Optimizer, flat, state_tensor, write


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False, foreach=None, differentiable=False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _update(self, group, params):
        lr, momentum = float(group["lr"]), float(group["momentum"])
        dampening, weight_decay = float(group["dampening"]), float(group["weight_decay"])
        nesterov, maximize = bool(group["nesterov"]), bool(group["maximize"])
        for p in params:
            x = flat(p)
            out = np.empty_like(x)
            state = self.state[p] if momentum != 0.0 else {}
            buf = state.get("momentum_buffer")
            buf_out = np.empty_like(x) if momentum != 0.0 else out
            _kernels.sgd(out, x, flat(p.grad), buf_out, out if buf is None else flat(buf), lr,
                         momentum, dampening, weight_decay, nesterov, maximize, buf is None)
            write(p, out)
            if momentum != 0.0:
                if buf is None:
                    state["momentum_buffer"] = state_tensor(p, buf_out)
                else:
                    write(buf, buf_out)
