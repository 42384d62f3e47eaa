"""linear and dropout."""

from ...factories import _rng
from ...linalg import matmul
from ...reductions import composite
from ...tensor import from_array


def linear(input, weight, bias=None):
    """input @ weight.T + bias, recorded as PyTorch records it: the weight's TBackward0,
    and for other than 2-D inputs a flattening view, one AddmmBackward0 (MmBackward0
    without bias) Node on 2-D operands, and a view back."""
    wt = weight.t()
    if input.ndim == 1 and bias is None:
        return matmul(input, wt)                 # SqueezeBackward4 of an MmBackward0
    x2 = input if input.ndim == 2 else input.reshape(-1, input.shape[-1])
    if bias is None:
        y = matmul(x2, wt)
    else:
        y = composite("AddmmBackward0", lambda: bias + matmul(x2, wt), bias, x2, wt)
    if input.ndim == 2:
        return y
    shape = (*input.shape[:-1], weight.shape[0])
    if bias is None:
        return composite("UnsafeViewBackward0", lambda: y.reshape(shape), y)
    return y.reshape(shape)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zero each element with probability p and scale the others by 1 / (1 - p), in
    training; the identity otherwise.  Draws from tapegrad's generator (manual_seed)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training:
        return input
    arr = input._arr
    keep = _rng[0].random(arr.shape) < 1.0 - p
    scale = from_array((keep * (1.0 / (1.0 - p) if p < 1.0 else 0.0)).astype(arr.dtype))
    return input.mul_(scale) if inplace else input * scale
