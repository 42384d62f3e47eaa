"""The optimizers' update rules as compiled loops, one pass over a parameter.

Each kernel reads the parameter ``p``, its gradient ``g`` and the optimizer's state
(flat arrays) and writes the new parameter and new state into fresh ``*_out`` arrays:
tapegrad never writes into an array a tensor holds, as other tensors may share it.  One
pass replaces the five to ten NumPy temporaries of the same rule written with array
ops.  The arithmetic follows PyTorch's single-tensor implementations step by step.
"""
import math

from numba import njit

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def sgd(p_out, p, g, buf_out, buf, lr, momentum, dampening, weight_decay, nesterov, maximize,
        first):
    for k in range(p.size):
        d = -g[k] if maximize else g[k]
        if weight_decay != 0.0:
            d = d + weight_decay * p[k]
        if momentum != 0.0:
            b = d if first else buf[k] * momentum + (1.0 - dampening) * d
            buf_out[k] = b
            d = d + momentum * b if nesterov else b
        p_out[k] = p[k] + (-lr) * d


@njit(**_JIT)
def adam(p_out, p, g, m_out, m, v_out, v, vmax_out, vmax, lr, beta1, beta2, eps, weight_decay,
         decoupled, amsgrad, maximize, step):
    step_size = lr / (1.0 - beta1 ** step)
    bias_correction2_sqrt = math.sqrt(1.0 - beta2 ** step)
    w1 = 1.0 - beta1
    for k in range(p.size):
        d = -g[k] if maximize else g[k]
        x = p[k]
        if weight_decay != 0.0:
            if decoupled:
                x = x * (1.0 - lr * weight_decay)
            else:
                d = d + weight_decay * x
        # torch.lerp(m, d, w1), in its two numerically careful halves
        mk = m[k] + w1 * (d - m[k]) if w1 < 0.5 else d - (d - m[k]) * (1.0 - w1)
        m_out[k] = mk
        vk = v[k] * beta2 + (1.0 - beta2) * d * d
        v_out[k] = vk
        if amsgrad:
            vk = max(vmax[k], vk)
            vmax_out[k] = vk
        p_out[k] = x + (-step_size) * (mk / (math.sqrt(vk) / bias_correction2_sqrt + eps))


@njit(**_JIT)
def rmsprop(p_out, p, g, sq_out, sq, avg_out, avg, buf_out, buf, lr, alpha, eps, weight_decay,
            momentum, centered, maximize):
    w = 1.0 - alpha
    for k in range(p.size):
        d = -g[k] if maximize else g[k]
        if weight_decay != 0.0:
            d = d + weight_decay * p[k]
        s = sq[k] * alpha + w * d * d
        sq_out[k] = s
        if centered:
            # torch.lerp(avg, d, w), as Adam's first moment
            a = avg[k] + w * (d - avg[k]) if w < 0.5 else d - (d - avg[k]) * (1.0 - w)
            avg_out[k] = a
            root = math.sqrt(s + (-a) * a) + eps
        else:
            root = math.sqrt(s) + eps
        if momentum > 0.0:
            b = buf[k] * momentum + d / root
            buf_out[k] = b
            p_out[k] = p[k] + (-lr) * b
        else:
            p_out[k] = p[k] + (-lr) * d / root


@njit(**_JIT)
def adagrad(p_out, p, g, sum_out, sums, clr, eps, weight_decay, maximize):
    for k in range(p.size):
        d = -g[k] if maximize else g[k]
        if weight_decay != 0.0:
            d = d + weight_decay * p[k]
        s = sums[k] + d * d
        sum_out[k] = s
        p_out[k] = p[k] + (-clr) * d / (math.sqrt(s) + eps)
