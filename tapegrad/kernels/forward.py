"""Compiled forward rules: elementwise maps for ops that NumPy has no ufunc for."""
import numpy as np
from numba import njit

from .generated import ew_fwd


@njit(cache=True, error_model="numpy")
def _map(op, x, y, c2, out):
    for k in range(out.shape[0]):
        out[k] = ew_fwd(op, x[k], y[k], c2)


def ew_map(op, x, y=0.0, c2=0.0):
    """Apply elementwise op ``op`` to arrays (broadcast) in float64; keeps x's float dtype."""
    x = np.asarray(x)
    dt = x.dtype if x.dtype.kind == "f" else np.float64
    xb, yb = np.broadcast_arrays(np.asarray(x, np.float64), np.asarray(y, np.float64))
    out = np.empty(xb.size)
    _map(op, np.ascontiguousarray(xb).reshape(-1), np.ascontiguousarray(yb).reshape(-1), c2, out)
    return out.reshape(xb.shape).astype(dt, copy=False)
