"""softmax / log_softmax along a dim, recorded as one fused entry of the op table.

The value is computed with NumPy with the row's max subtracted (stable); the entry's
extras are (outer, n, inner) for the compiled rules in ``kernels/softmax.py``.
"""
import math

import numpy as np

from .ops.table import CODE
from .shape_ops import _out, _wrap_dim


def _value(arr, d, log):
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        a = arr.reshape(1) if arr.ndim == 0 else arr
        z = a - np.amax(a, axis=d, keepdims=True)
        e = np.exp(z)
        s = e.sum(axis=d, keepdims=True)
        out = z - np.log(s) if log else e / s
    return out.reshape(arr.shape).astype(arr.dtype, copy=False)


def fused(input, dim, log):
    """softmax (or log_softmax) of ``input`` along ``dim`` as one tape entry."""
    arr = input._arr
    d = _wrap_dim(dim, max(input.ndim, 1))
    shape = arr.shape or (1,)
    extras = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    value = _value(arr, d, log)
    code = CODE["log_softmax" if log else "softmax"]
    return _out(input, value, lambda t, ia: t.append(code, ia, -1, value, extras))
