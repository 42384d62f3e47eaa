"""PyTorch names composed of the ops tapegrad records: ``var_mean`` / ``std_mean``,
``chain_matmul``; and the comparisons of whole tensors that return no graph:
``equal``, ``allclose``, ``isclose``; ``detach``."""
import warnings

import numpy as np

from . import dtypes
from .composite import composite
from .elementwise import result_dtype
from .linalg import mm
from .ops.table import CODE
from .record import broadcast_shape
from .reductions import _dims, mean, std, var
from .shape_extras import C_NAMES
from .shape_ops import _reshaped
from .tensor import Tensor, _leaf
from .tracing import freeze

# PyTorch's names of the dtypes in "X did not match Y"
_NAMES = {"float64": "Double", "float32": "Float", "float16": "Half", "int64": "Long",
          "int32": "Int", "int16": "Short", "int8": "Char", "uint8": "Byte", "bool": "Bool"}


# -- var_mean / std_mean ---------------------------------------------------------------------
def _moments(name, node, spread, input, dim, unbiased, keepdim, correction):
    if isinstance(dim, bool):                # var_mean(x, True): the unbiased flag
        dim, unbiased = None, dim
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{name} only support floating point and complex dtypes")
    corr = correction if correction is not None else (0 if unbiased is False else 1)
    dims = _dims(input, dim)
    n = int(np.prod([input.shape[d] for d in dims])) if input.ndim else 1
    if n - corr <= 0:
        warnings.warn(f"{name}(): degrees of freedom is <= 0. Correction should be strictly "
                      "less than the reduction factor (input numel divided by output numel).",
                      UserWarning, stacklevel=3)
    s = composite(node, lambda: spread(input, dim, unbiased, keepdim, correction), input)
    m = composite(node, lambda: mean(input, dims if input.ndim else None, keepdim), input)
    return s, m


def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(var(input, ...), mean(input, ...))`` over the same dims: two VarMeanBackward0
    Nodes (PyTorch's one Node with two outputs, as two)."""
    return _moments("var_mean", "VarMeanBackward0", var, input, dim, unbiased, keepdim,
                    correction)


def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``(std(input, ...), mean(input, ...))`` (StdMeanBackward0)."""
    return _moments("std_mean", "StdMeanBackward0", std, input, dim, unbiased, keepdim,
                    correction)


# -- chain_matmul ----------------------------------------------------------------------------
def _chain_order(dims):
    """PyTorch's multi_dot order: split[i][j], the k at which the product of matrices
    i..j is cheapest split (ties: the first k)."""
    n = len(dims) - 1
    cost = [[0] * n for _ in range(n)]
    split = [[0] * n for _ in range(n)]
    for length in range(1, n):
        for i in range(n - length):
            j = i + length
            cost[i][j] = None
            for k in range(i, j):
                c = cost[i][k] + cost[k + 1][j] + dims[i] * dims[k + 1] * dims[j + 1]
                if cost[i][j] is None or c < cost[i][j]:
                    cost[i][j], split[i][j] = c, k
    return split


def _chain(ms, split, i, j):
    if i == j:
        return ms[i]
    k = split[i][j]
    return mm(_chain(ms, split, i, k), _chain(ms, split, k + 1, j))


def chain_matmul(*matrices):
    """The product of 2-D tensors, in the order of fewest multiplications (deprecated in
    PyTorch in favour of ``linalg.multi_dot``; it warns as PyTorch does)."""
    warnings.warn("torch.chain_matmul is deprecated and will be removed in a future PyTorch "
                  "release. Use torch.linalg.multi_dot instead, which accepts a list of two or "
                  "more tensors rather than multiple parameters.", UserWarning, stacklevel=2)
    for k, m in enumerate(matrices):
        if not isinstance(m, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(m).__name__}")
    if not matrices:
        raise RuntimeError("chain_matmul(): Expected one or more matrices")
    if len(matrices) == 1:
        if matrices[0].ndim != 2:
            raise RuntimeError(f"Tensor dimension is {matrices[0].ndim}, expected 2 instead.")
        return matrices[0].clone()
    for k, m in enumerate(matrices):
        if m.ndim != 2:
            raise RuntimeError(f"Tensor dimension is {m.ndim}, expected 2 instead.")
        if m.dtype is not matrices[0].dtype:
            raise RuntimeError(f"multi_dot(): all tensors must have be the same dtype but "
                               f"tensor 0 is {C_NAMES[matrices[0].dtype.name]} and tensor {k} "
                               f"{C_NAMES[m.dtype.name]}")
    for k in range(len(matrices) - 1):
        a, b = matrices[k].shape, matrices[k + 1].shape
        if a[1] != b[0]:
            raise RuntimeError(f"multi_dot(): tensors {k} and {k + 1} with shapes {list(a)} and "
                               f"{list(b)} cannot be multiplied")
    if len(matrices) == 3:       # PyTorch's two costs (ties: (AB)C)
        a, b = matrices[0].shape
        c, d = matrices[2].shape
        if a * c * (b + d) > b * d * (a + c):
            out = mm(matrices[0], mm(matrices[1], matrices[2]))
        else:
            out = mm(mm(matrices[0], matrices[1]), matrices[2])
    else:
        dims = [m.shape[0] for m in matrices] + [matrices[-1].shape[1]]
        out = _chain(matrices, _chain_order(dims), 0, len(matrices) - 1)
    return _reshaped(out, tuple(out.shape), CODE["view"])      # ViewBackward0, as PyTorch


# -- comparisons of whole tensors --------------------------------------------------------------
def _other(name, other):
    if not isinstance(other, Tensor):
        raise TypeError(f"{name}(): argument 'other' (position 2) must be Tensor, not "
                        f"{type(other).__name__}")


def equal(input, other):
    """True if both have the same shape and the same values (nan is never equal)."""
    _other("equal", other)
    if tuple(input.shape) != tuple(other.shape):
        return False
    freeze(input, other)             # (while tracing: a Python bool of traced values)
    rd = result_dtype(input, other)
    return bool(np.array_equal(np.asarray(input._arr, rd.np), np.asarray(other._arr, rd.np)))


def _same_dtype(input, other):
    if input.dtype is not other.dtype:
        raise RuntimeError(f"{_NAMES[input.dtype.name]} did not match {_NAMES[other.dtype.name]}")


def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``|input - other| <= atol + rtol |other|`` elementwise, or equal (infinities), or
    both nan if ``equal_nan``: a bool tensor (broadcast), PyTorch's algorithm."""
    _other("isclose", other)
    _same_dtype(input, other)
    if rtol < 0:
        raise RuntimeError(f"rtol must be greater than or equal to zero, but got {rtol:g}")
    if atol < 0:
        raise RuntimeError(f"atol must be greater than or equal to zero, but got {atol:g}")
    broadcast_shape(tuple(input.shape), tuple(other.shape))
    freeze(input, other)             # (while tracing: a bool tensor of traced values)
    a, b = input._arr, other._arr
    with np.errstate(invalid="ignore", over="ignore"):
        close = a == b
        if equal_nan and input.dtype.is_floating_point:
            close = close | (np.isnan(a) & np.isnan(b))
        if rtol == 0 and atol == 0:
            return _leaf(np.asarray(close))
        fd = dtypes.get_default_dtype().np
        if input.dtype is dtypes.bool_:
            a, b = a.astype(fd), b.astype(fd)
        # rtol times an integer tensor is in the default dtype; |a - b| in the inputs' dtype
        allowed = atol + np.abs(rtol * (b if b.dtype.kind == "f" else b.astype(fd)))
        actual = np.abs(a - b)
        close = close | (np.isfinite(actual) & (actual <= allowed))
    return _leaf(np.asarray(close))


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``isclose(...).all()`` as a Python bool."""
    _other("allclose", other)
    return bool(isclose(input, other, rtol, atol, equal_nan)._arr.all())


def detach(input):
    return input.detach()
