"""linear and dropout."""

from ...composite import composite
from ...factories import _rng
from ...linalg import matmul, mm_transposed
from ...tensor import from_array


def linear(input, weight, bias=None):
    """input @ weight.T + bias, shown as PyTorch records it: for other than 2-D inputs a
    flattening view, one AddmmBackward0 (MmBackward0 without bias) Node on 2-D operands
    whose weight edge is a TBackward0, and a view back.  The product reads the weight in
    place (``mm_transposed``): the TBackward0 is a view with no entry (and no copy).  A
    1-D weight is a matmul (plus bias), as in PyTorch, whose addmm refuses it with a
    bias on a 2-D input."""
    if input.ndim == 0 or weight.ndim == 0:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are "
                           f"{input.ndim}D and {weight.ndim}D")
    if weight.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is "
                           f"{weight.ndim}D")
    if weight.ndim == 1 and bias is not None and input.ndim == 2:
        raise RuntimeError("mat2 must be a matrix, got 1-D tensor")
    if input.ndim == 1 and bias is None or weight.ndim == 1:
        y = matmul(input, weight.t())            # SqueezeBackward4 of an MmBackward0
        return y if bias is None else y + bias
    x2 = input if input.ndim == 2 else input.reshape(-1, input.shape[-1])
    if bias is None:
        y = composite("MmBackward0", lambda: mm_transposed(x2, weight), x2, weight,
                      transposed=1)
    else:
        y = composite("AddmmBackward0", lambda: bias + mm_transposed(x2, weight), bias, x2,
                      weight, transposed=2)
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
