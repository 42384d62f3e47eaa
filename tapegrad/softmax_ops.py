"""softmax, log_softmax and logsumexp along dims, stable: the max along ``dim`` is
subtracted first (``tapegrad.softmax`` and ``nn.functional``'s are these).

Each is one fused entry of the op table (the ``softmax`` kind) whose extras are (outer,
n, inner).  The value is computed by the kernel a replay runs (``kernels/softmax.
rows_forward``, in float64), so eager, replayed and compiled values are the same bits; a
short float64 vector, in Python in the kernel's order (a compiled call costs more).
logsumexp over dims that are not adjacent reduces a permuted view.  As in PyTorch,
logsumexp shifts by 0 where the max is infinite (so a row of -inf gives -inf), softmax
and log_softmax by the max itself (such a row gives nan).
"""
import math
import warnings

import numpy as np

from .composite import composite
from .dtypes import TORCH_NAMES, get_default_dtype
from .kernels import softmax as softmax_kernels
from .ops.table import CODE
from .reductions import _dims
from .replay.vector_replay import REPLAY
from .shape_ops import _out, _wrap_dim


_SHORT = softmax_kernels.SCALAR_MAX   # vectors up to this long: in Python (cheaper than a call)


def _rows_value(arr, op, extras, nout):
    """``kernels/softmax.rows_forward`` (op ``op``, rows ``extras``) of float ``arr``:
    ``nout`` float64 values (a float32 input widened, the result rounded by the caller)."""
    x = np.ascontiguousarray(arr, np.float64).reshape(-1)
    out = np.empty(nout)
    REPLAY.pick(softmax_kernels.rows_forward, x.size, (3,))(op, x, 0, out, 0, *extras)
    return out


def _top_short(xs):
    """The max of a list of floats, nan if it holds one (``kernels/softmax._top``)."""
    top = -math.inf
    for x in xs:
        if x > top or x != x:
            top = x
    return top


def _value_short(xs, log):
    """``_value`` of a short float64 vector (a list), in Python, in the compiled rule's
    order (``kernels/softmax.forward``: a replay recomputes the same bits)."""
    top = _top_short(xs)
    es = [math.exp(x - top) for x in xs]      # x - top <= 0, or nan: never overflows
    s = 0.0
    for e in es:
        s += e
    if log:
        lse = math.log(s) if s == s else s    # s >= 1, or nan
        return np.array([x - top - lse for x in xs])
    return np.array([e / s for e in es])      # s >= 1, or nan


def fused(input, dim, log):
    """softmax (or log_softmax) of ``input`` along ``dim`` as one tape entry."""
    arr = input._arr
    d = _wrap_dim(dim, max(input.ndim, 1))
    if not input.dtype.is_floating_point:
        # PyTorch has no such kernel for bool or integers (``dtype=`` casts first) and
        # returns an empty one as it is; the float rules would overflow in its dtype
        if not arr.size:
            return input.clone()
        kernel = ("log_" if log else "") + ("softmax_lastdim" if d == max(input.ndim, 1) - 1
                                            else "softmax") + "_kernel_impl"
        raise NotImplementedError(f'"{kernel}" not implemented for '
                                  f"'{TORCH_NAMES[input.dtype.name][0]}'")
    shape = arr.shape or (1,)
    extras = (math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:]))
    code = CODE["log_softmax" if log else "softmax"]
    if arr.ndim == 1 and arr.size <= _SHORT and arr.dtype == np.float64:
        value = _value_short(arr.tolist(), log)
    else:
        value = _rows_value(arr, code, extras, arr.size).reshape(arr.shape).astype(
            arr.dtype, copy=False)
    return _out(input, value, lambda t, ia: t.append(code, ia, -1, value, extras))


def _softmax_dim(input, dim, name):
    if dim is None:
        warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the "
                      "call to include dim=X as an argument.", stacklevel=3)
        dim = 0 if input.ndim in (0, 1, 3) else 1
    return _wrap_dim(dim, input.ndim)


def _cast(input, dtype):
    return input if dtype is None else input.to(dtype)


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """One fused entry of the op table (``SoftmaxBackward0``)."""
    input = _cast(input, dtype)
    return fused(input, _softmax_dim(input, dim, "softmax"), log=False)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """One fused entry of the op table (``LogSoftmaxBackward0``)."""
    input = _cast(input, dtype)
    return fused(input, _softmax_dim(input, dim, "log_softmax"), log=True)


def _lse_short(xs):
    """logsumexp of a short float64 vector (a list), in Python, in ``rows_forward``'s order."""
    top = _top_short(xs)
    if abs(top) == math.inf:
        top = 0.0
    s = 0.0
    try:
        for x in xs:
            s += math.exp(x - top)
    except OverflowError:    # (a finite x beside +inf, which shifts by 0: inf anyway)
        s = math.inf
    return math.log(s) + top if s > 0.0 else -math.inf if s == 0.0 else s


def logsumexp(input, dim, keepdim=False):
    if not input.dtype.is_floating_point:     # as PyTorch: bool and integers in the default dtype
        input = input.to(get_default_dtype())
    dims = _dims(input, dim if isinstance(dim, (tuple, list)) else (dim,))
    if input.ndim == 0:
        dims = None
    elif not dims:                    # dim=(): all dims
        dims = tuple(range(input.ndim))
    if dims and dims != tuple(range(dims[0], dims[-1] + 1)):
        # dims not adjacent: moved last (a permute), then reduced as adjacent; shown as
        # one Node, as PyTorch's
        rest = [d for d in range(input.ndim) if d not in dims]
        shape = [1 if d in dims else n for d, n in enumerate(input.shape)] if keepdim else \
            [input.shape[d] for d in rest]
        return composite("LogsumexpBackward0", lambda: _fused_lse(
            input.permute(rest + list(dims)), len(rest), input.ndim, shape), input)
    if not dims:
        return _fused_lse(input, 0, 0, ())
    lo, hi = dims[0], dims[-1] + 1
    shape = tuple(input.shape)
    return _fused_lse(input, lo, hi,
                      shape[:lo] + ((1,) * (hi - lo) if keepdim else ()) + shape[hi:])


def _fused_lse(input, lo, hi, out_shape):
    """logsumexp of ``input`` over its dims ``lo .. hi - 1`` as one fused entry (rows of
    n values ``inner`` apart) whose value has ``out_shape``."""
    arr = input._arr
    shape = arr.shape
    extras = (math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:]))
    if arr.ndim == 1 and arr.size <= _SHORT and arr.dtype == np.float64:
        value = np.array(_lse_short(arr.tolist()))
    else:
        value = _rows_value(arr, CODE["logsumexp"], extras, extras[0] * extras[2])
    value = value.reshape(out_shape).astype(arr.dtype, copy=False)
    code = CODE["logsumexp"]
    return _out(input, value, lambda t, ia: t.append(code, ia, -1, value, extras))
