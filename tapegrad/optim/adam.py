"""Adam and AdamW (decoupled weight decay), with amsgrad and maximize."""
import numpy as np

from ..tensor import from_array
from . import _kernels
from .optimizer import Optimizer, flat, state_tensor, write


class Adam(Optimizer):
    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, foreach=None, maximize=False, capturable=False,
                 differentiable=False, fused=None, decoupled_weight_decay=False):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if not (isinstance(betas[0], float) and isinstance(betas[1], float)):
            raise ValueError("betas must be either both floats or both Tensors")
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _update(self, group, params):
        beta1, beta2 = (float(b) for b in group["betas"])
        lr, eps, weight_decay = float(group["lr"]), float(group["eps"]), \
            float(group["weight_decay"])
        amsgrad, maximize = bool(group["amsgrad"]), bool(group["maximize"])
        decoupled = bool(group["decoupled_weight_decay"])
        for p in params:
            x = flat(p)
            state = self.state[p]
            if not state:
                state["step"] = from_array(np.array(0.0))
                state["exp_avg"] = state_tensor(p, np.zeros_like(x))
                state["exp_avg_sq"] = state_tensor(p, np.zeros_like(x))
                if amsgrad:
                    state["max_exp_avg_sq"] = state_tensor(p, np.zeros_like(x))
            step = state["step"].item() + 1.0
            write(state["step"], np.array([step]))
            outs = [np.empty_like(x) for _ in range(4 if amsgrad else 3)]
            m, v = flat(state["exp_avg"]), flat(state["exp_avg_sq"])
            vmax = flat(state["max_exp_avg_sq"]) if amsgrad else v
            _kernels.adam(outs[0], x, flat(p.grad), outs[1], m, outs[2], v, outs[-1], vmax, lr,
                          beta1, beta2, eps, weight_decay, decoupled, amsgrad, maximize, step)
            write(p, outs[0])
            write(state["exp_avg"], outs[1])
            write(state["exp_avg_sq"], outs[2])
            if amsgrad:
                write(state["max_exp_avg_sq"], outs[3])


class AdamW(Adam):
    """Adam with the weight decay applied to the parameters, not the gradients."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True)
