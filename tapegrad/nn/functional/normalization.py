"""layer_norm and batch_norm, composed of mean / elementwise ops; each shows as PyTorch's
one Node (``NativeLayerNormBackward0``, ``NativeBatchNormBackward0``).  batch_norm in
training updates the running statistics in place, unrecorded (the unbiased variance goes
into ``running_var``, as in PyTorch)."""
import math

import numpy as np

from ...composite import composite
from ...grad_mode import no_grad
from ...inplace import set_value_
from .conv import _fmt


def _normalize(input, dims, eps):
    """(x - mean) / sqrt(var + eps) over ``dims``, the biased variance."""
    d = input - input.mean(dims, keepdim=True)
    return d * ((d * d).mean(dims, keepdim=True) + eps).rsqrt()


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """Normalise over the last ``len(normalized_shape)`` dims, then scale and shift."""
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) \
        else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={_fmt(shape)}, expected input with shape "
                           f"[*, {', '.join(map(str, shape))}], but got input of size"
                           f"{_fmt(input.shape)}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(p.shape) != shape:
            raise RuntimeError(f"Expected {name} to be of same shape as normalized_shape, but "
                               f"got {name} of shape {_fmt(p.shape)} and normalized_shape = "
                               f"{_fmt(shape)}")
    dims = tuple(range(input.ndim - k, input.ndim))

    def body():
        y = _normalize(input, dims, eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y
    return composite("NativeLayerNormBackward0", body, input, weight, bias, reads=(0, 1, 2))


def _update(stat, value, momentum):
    """stat <- momentum * value + (1 - momentum) * stat, in place and unrecorded."""
    with no_grad():
        set_value_(stat, momentum * value + (1 - momentum) * stat._arr)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalise each channel (dim 1) with the batch's statistics (``training``) or the
    running ones; in training, running statistics given are updated with ``momentum``."""
    if input.ndim < 2:
        raise ValueError(f"Expected 2D or more input to batch_norm, got {input.ndim}D input")
    c = input.shape[1]
    count = input.numel() // c if c else 0
    if training and count == 1:
        raise ValueError("Expected more than 1 value per channel when training, got input "
                         f"size {input.shape}")
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != c:
            raise RuntimeError(f"{name} should contain {c} elements not {t.numel()}")
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"{'running_mean' if running_mean is None else 'running_var'} must "
                           "be defined in evaluation mode")
    dims = (0,) + tuple(range(2, input.ndim))
    shape = (1, c) + (1,) * (input.ndim - 2)

    def body():
        if training:
            y = _normalize(input, dims, eps)
        else:
            y = (input - running_mean.reshape(shape)) * \
                (running_var.reshape(shape) + eps).rsqrt()
        if weight is not None:
            y = y * weight.reshape(shape)
        if bias is not None:
            y = y + bias.reshape(shape)
        return y
    out = composite("NativeBatchNormBackward0", body, input, weight, bias, reads=(0, 1))
    if training and (running_mean is not None or running_var is not None):
        x = input._arr
        mean = x.mean(axis=dims)
        if running_mean is not None:
            _update(running_mean, mean, momentum)
        if running_var is not None:
            d = x - mean.reshape(shape)
            var = (d * d).sum(axis=dims) / (count - 1) if count > 1 else \
                np.full(c, math.nan, x.dtype)
            _update(running_var, var, momentum)
    return out
