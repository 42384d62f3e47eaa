"""Helpers that record the structural entries shared by several op families."""
import functools

import numpy as np

from .ops.table import CODE
from .tape import HIDDEN


def contiguous(a):
    """``a`` as a C-contiguous array, 0-d kept 0-d (unlike np.ascontiguousarray)."""
    a = np.asarray(a)
    return a if a.flags.c_contiguous else np.array(a, order="C")


def contiguous_strides(shape):
    strides, acc = [], 1
    for s in reversed(shape):
        strides.append(acc)
        acc *= s
    return tuple(reversed(strides))


def broadcast_shape(sa, sb):
    """PyTorch's broadcasting, with PyTorch's message naming both sizes."""
    n = max(len(sa), len(sb))
    a = (1,) * (n - len(sa)) + tuple(sa)
    b = (1,) * (n - len(sb)) + tuple(sb)
    for d in range(n - 1, -1, -1):         # PyTorch names the last mismatch
        x, y = a[d], b[d]
        if x != y and x != 1 and y != 1:
            raise RuntimeError(f"The size of tensor a ({x}) must match the size of tensor b ({y}) "
                               f"at non-singleton dimension {d}")
    return tuple(y if x == 1 else x for x, y in zip(a, b))


@functools.lru_cache(maxsize=256)
def expand_strides(in_shape, out_shape):
    """Strides that read an ``in_shape`` array as ``out_shape`` (0 on broadcast dims)."""
    cs = contiguous_strides(in_shape)
    lead = len(out_shape) - len(in_shape)
    return tuple(0 if d < lead or in_shape[d - lead] == 1 else cs[d - lead]
                 for d in range(len(out_shape)))


def gather(t, ia, value, strides, base=0, code=CODE["expand"], flags=0):
    """Entry whose element k reads input element base + strided(k); returns its index."""
    return t.append(code, ia, -1, value, (base,) + tuple(strides), flags=flags)


def broadcast_to(t, ia, value_in, out_shape):
    """Buffer of input ``ia`` broadcast to ``out_shape`` (a hidden expand if needed)."""
    out_shape = tuple(out_shape)
    if value_in.__class__ is np.ndarray and value_in.flags.c_contiguous:
        in_shape = value_in.shape
        if in_shape == out_shape:
            return ia
        strides = expand_strides(in_shape, out_shape)
        size = value_in.itemsize           # (np.broadcast_to's view, ten times cheaper)
        value = np.ndarray(out_shape, value_in.dtype, value_in, 0, [s * size for s in strides])
    else:
        in_shape = np.shape(value_in)
        if in_shape == out_shape:
            return ia
        strides = expand_strides(in_shape, out_shape)
        value = np.broadcast_to(value_in, out_shape)
    return gather(t, ia, value, strides, flags=HIDDEN)


def reshape(t, ia, value, code=CODE["view"], flags=0):
    """A reshape-kind entry (the same elements).  A copy into float32 (``to_copy``) notes
    it in C (32.0): a replay rounds the values it recomputes, as eager did."""
    c = 32.0 if code == CODE["to_copy"] and value.dtype == np.float32 else 0.0
    return t.append(code, ia, -1, value, flags=flags, c=c)
