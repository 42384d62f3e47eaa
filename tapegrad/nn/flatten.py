"""Flatten and Unflatten: reshapes of a range of dims (``ViewBackward0``)."""
import math

from ..shape_ops import _wrap_dim
from .module import Module


def _flatten(input, start_dim, end_dim):
    """``input.flatten(start_dim, end_dim)``; as in PyTorch, the input itself where the
    range is a single dim."""
    if input.ndim == 0:
        return input.reshape(1)
    a, b = _wrap_dim(start_dim, input.ndim), _wrap_dim(end_dim, input.ndim)
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if a == b:
        return input
    return input.flatten(a, b)


def _unflatten(input, dim, sizes):
    """``input.unflatten(dim, sizes)``: dim ``dim`` split into ``sizes`` (one may be -1)."""
    if input.ndim == 0:
        raise RuntimeError("unflatten: Dimension specified as 0 but tensor has no dimensions")
    d = _wrap_dim(dim, input.ndim)
    sizes = [int(s) for s in sizes]
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[d]
    bad = RuntimeError(f"unflatten: Provided sizes {sizes} don't multiply up to the size of "
                       f"dim {dim} ({n}) in the input tensor")
    if sizes.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in sizes:
        known = math.prod(s for s in sizes if s != -1)
        if known == 0 or n % known:
            raise bad
        sizes[sizes.index(-1)] = n // known
    elif math.prod(sizes) != n:
        raise bad
    s = tuple(input.shape)
    return input.reshape(s[:d] + tuple(sizes) + s[d + 1:])


class Flatten(Module):
    """Flattens dims ``start_dim`` .. ``end_dim`` into one."""

    def __init__(self, start_dim=1, end_dim=-1):
        super().__init__()
        self.start_dim = start_dim
        self.end_dim = end_dim

    def forward(self, input):
        return _flatten(input, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Unflatten(Module):
    """Splits dim ``dim`` into ``unflattened_size`` (a tuple of ints; one may be -1)."""

    def __init__(self, dim, unflattened_size):
        super().__init__()
        if isinstance(dim, str):
            raise NotImplementedError("tapegrad has no named tensors: Unflatten takes an int "
                                      "dim")
        if not isinstance(dim, int):
            raise TypeError(f"invalid argument 'dim' to Unflatten: {type(dim).__name__}, "
                            "expected int")
        if not isinstance(unflattened_size, (tuple, list)):
            raise TypeError("unflattened_size must be a tuple of ints, but found type "
                            f"{type(unflattened_size).__name__}")
        for k, s in enumerate(unflattened_size):
            if not isinstance(s, int):
                raise TypeError("unflattened_size must be tuple of ints, but found element of "
                                f"type {type(s).__name__} at pos {k}")
        self.dim = dim
        self.unflattened_size = unflattened_size

    def forward(self, input):
        return _unflatten(input, self.dim, self.unflattened_size)

    def extra_repr(self):
        return f"dim={self.dim}, unflattened_size={self.unflattened_size}"
