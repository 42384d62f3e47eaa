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
BLOCK_MIN = fused.FUSE_MIN


@njit(**_JIT)
def _map(op, x, y, c2, out):
    for k in range(out.shape[0]):
        out[k] = ew_fwd(op, x[k], y[k], c2)


@njit(**_JIT)
def _map_const(op, x, c, c2, out):
    for k in range(out.shape[0]):
        out[k] = ew_fwd(op, x[k], c, c2)


def ew_array(op, x, y=None, c=0.0, c2=0.0, parallel=True):
    """Elementwise op ``op`` on a float array ``x`` and ``y`` (an array of x's shape) or,
    ``y`` None, the constant ``c`` (``c2``: clamp's upper bound): a new array of x's
    shape and dtype."""
    dt = x.dtype
    if dt.char == "f" and x.size >= BLOCK_MIN and x.flags.c_contiguous and (
            y is None or (y.dtype == dt and y.flags.c_contiguous)):
        # float32: the float64 rule, each block widened and rounded in the kernel (no two
        # fresh float64 arrays); on one core, as NumPy would (a parallel launch leaves
        # OpenMP's threads spinning beside BLAS)
        out = np.empty_like(x)
        fused.map_single(op, x.reshape(-1), (x if y is None else y).reshape(-1),
                         y is not None, c, c2, out.reshape(-1), x.size,
                         fused.FWD.compile_slots((op,)))
        return out
    if dt.char != "d" or not x.flags.c_contiguous or \
            (y is not None and (y.dtype.char != "d" or not y.flags.c_contiguous)):
        # small float32, mixed or strided values: the float64 rule on float64 copies,
        # rounded to x's dtype
        r = ew_array(op, np.asarray(x, np.float64, order="C"), None if y is None else
                     np.asarray(y, np.float64, order="C"), c, c2, dt.char == "d")
        return r if dt.char == "d" else r.astype(dt)
    if x.size >= BLOCK_MIN:
        return fused.ew_into(op, x, y, c, np.empty_like(x), c2, parallel)
    out = np.empty_like(x)
    flat = x.ndim == 1
    xf, of = (x, out) if flat else (x.reshape(-1), out.reshape(-1))
    if y is None:
        _map_const(op, xf, c, c2, of)
    else:
        _map(op, xf, y if flat else y.reshape(-1), c2, of)
    return out


def ew_map(op, x, y=0.0, c2=0.0):
    """Elementwise op ``op`` on any operands, broadcast, in float64; keeps x's float dtype."""
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.float64
    xb, yb = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    return ew_array(op, xb, yb, c2=c2).astype(dt, copy=False)
