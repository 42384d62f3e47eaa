"""linear and dropout."""
import numpy as np

from ...factories import _rng
from ...linalg import matmul
from ...reductions import composite
from ...tensor import from_array


def linear(input, weight, bias=None):
    """input @ weight.T + bias.  As in PyTorch, a 2-D input shows one AddmmBackward0
    (MmBackward0 without bias) Node, fed by the weight's TBackward0."""
    wt = weight.t()
    if input.ndim != 2:
        out = matmul(input, wt)
        return out if bias is None else out + bias
    if bias is None:
        return matmul(input, wt)
    return composite("AddmmBackward0", lambda: matmul(input, wt) + bias, bias, input, wt)


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
