"""Compiled forward rules over arrays: the op table's elementwise rule.

Below ``BLOCK_MIN`` elements, element by element with the same libm calls as the Python
scalar path and the compiled sweeps (a small array's values are those of its elements
as 0-d tensors, bit for bit); from ``BLOCK_MIN`` float64 elements on, by the block
kernels (the same rule, generated, with libmvec's vector math: within 4 ulp), as a
replay does from the same size (``replay.vector_replay.RUN_MIN``).
"""
import numpy as np
from numba import njit

from . import fused
from .generated import ew_fwd

_JIT = dict(cache=True, error_model="numpy")
BLOCK_MIN = 256


@njit(**_JIT)
def _map(op, x, y, c2, out):
    for k in range(out.shape[0]):
        out[k] = ew_fwd(op, x[k], y[k], c2)


@njit(**_JIT)
def _map_const(op, x, c, c2, out):
    for k in range(out.shape[0]):
        out[k] = ew_fwd(op, x[k], c, c2)


def ew_array(op, x, y=None, c=0.0, c2=0.0):
    """Elementwise op ``op`` on a float array ``x`` and ``y`` (an array of x's shape) or,
    ``y`` None, the constant ``c`` (``c2``: clamp's upper bound): a new array of x's
    shape and dtype."""
    dt = x.dtype
    if x.size >= BLOCK_MIN and dt == np.float64:
        x = np.ascontiguousarray(x)
        y = None if y is None else np.ascontiguousarray(y, np.float64)
        return fused.ew_into(op, x, y, c, np.empty_like(x), c2)
    xf = np.ascontiguousarray(x, np.float64).reshape(-1)
    out = np.empty(xf.size)
    if y is None:
        _map_const(op, xf, c, c2, out)
    else:
        _map(op, xf, np.ascontiguousarray(y, np.float64).reshape(-1), c2, out)
    out = out.reshape(x.shape)
    return out if dt == np.float64 else out.astype(dt)


def ew_map(op, x, y=0.0, c2=0.0):
    """Elementwise op ``op`` on any operands, broadcast, in float64; keeps x's float dtype."""
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.float64
    xb, yb = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return ew_array(op, xb, yb, c2=c2).astype(dt, copy=False)
