"""``cumsum`` and ``cumprod``: scans composed of recorded ops (no kernel of their own).

A float scan along a dim of length n is Hillis and Steele's: ceil(log2 n) rounds, round
k combining each element with the one 2**k places before it (the first 2**k elements
with the identity: 0 for sums, 1 for products).  A round is three entries (a slice, a
``cat`` that puts the identity in front of it, an add or a multiply), all shown as one
CumsumBackward0 / CumprodBackward0 Node.  Cost: about 3 N ceil(log2 n) values computed
and kept on the tape for N elements (a sequential scan would be N), in 3 ceil(log2 n)
vectorised entries; no division and no multiplication by 0 or 1 that is not in the
scan itself, so nan and inf stay where PyTorch's sequential scan puts them.

The gradient is the composition's: for cumsum the reversed cumulative sum of the
gradient; for cumprod each d out_j / d x_i is the product of the other factors,
computed by multiplications only, so zeros in the input (any number of them) give
PyTorch's exact gradient.  Sums and products are associated differently from a
sequential scan: values can differ from PyTorch's in the last bits (and where partial
sums overflow differently).

Integer and bool tensors scan in int64 with NumPy (no gradient), as PyTorch does.
"""
import numpy as np

from . import dtypes
from .composite import composite
from .grad_mode import STATE
from .shape_extras import narrow
from .shape_ops import _wrap_dim, cat
from .tensor import _leaf, _norm
from .tracing import freeze

_MISSING = object()
_LONG_NAMES = {"int64": "Long", "int32": "Int", "int16": "Short", "int8": "Char",
               "uint8": "Byte", "bool": "Bool"}


def _args(name, input, dim, dtype):
    if dim is _MISSING:
        raise TypeError(f'{name}() missing 1 required positional arguments: "dim"')
    if not isinstance(dim, (int, np.integer)) or isinstance(dim, bool):
        raise TypeError(f"{name}(): argument 'dim' (position 1) must be int, not "
                        f"{type(dim).__name__}")
    dim = _wrap_dim(int(dim), input.ndim)
    if dtype is not None and not isinstance(dtype, dtypes.dtype):
        raise TypeError(f"{name}(): argument 'dtype' must be torch.dtype, not "
                        f"{type(dtype).__name__}")
    return dim


def _scan(name, node, input, dim, dtype, combine, identity, np_scan):
    dim = _args(name, input, dim, dtype)
    out_dtype = dtype or (input.dtype if input.dtype.is_floating_point else dtypes.int64)
    if not out_dtype.is_floating_point:
        if input._rg and STATE.grad:
            raise RuntimeError(f"Autograd not support dtype: "
                               f"{_LONG_NAMES.get(out_dtype.name, out_dtype.name)}")
        freeze(input)                # (while tracing: integers of traced values, guarded)
        arr = input._arr.astype(out_dtype.np)
        return _leaf(_norm(np_scan(arr, axis=dim).astype(out_dtype.np) if arr.ndim else arr))

    def body():
        x = input if input.dtype is out_dtype else input.to(out_dtype)
        n = x.shape[dim] if x.ndim else 1
        if n <= 1:
            return x.clone()
        y, step = x, 1
        while step < n:
            shape = list(x.shape)
            shape[dim] = step
            head = _leaf(np.full(shape, identity, out_dtype.np))
            y = combine(y, cat([head, narrow(y, dim, 0, n - step)], dim))
            step *= 2
        return y
    return composite(node, body, input)


def cumsum(input, dim=_MISSING, *, dtype=None):
    """Cumulative sums along ``dim`` (CumsumBackward0); see the module's notes on cost."""
    return _scan("cumsum", "CumsumBackward0", input, dim, dtype, lambda a, b: a + b, 0,
                 np.cumsum)


def cumprod(input, dim=_MISSING, *, dtype=None):
    """Cumulative products along ``dim`` (CumprodBackward0); exact gradients with zeros."""
    return _scan("cumprod", "CumprodBackward0", input, dim, dtype, lambda a, b: a * b, 1,
                 np.cumprod)

