"""Reductions with ``dim`` / ``keepdim``.

A reduction entry stores, for each input dim, the stride of the output that input
index moves along (0 on reduced dims): input element k feeds output element
``strided(k, in_shape, ostrides)``.  ``max(dim)`` / ``min(dim)`` gather the winners by
index; ``var`` / ``std`` / ``norm`` are composites (hidden entries, one visible Node).
"""
import builtins
import collections
import math

import numpy as np

from . import dtypes, tracing
from .autograd import engine
from .composite import composite
from .grad_mode import STATE
from .kernels import reduce as reduce_kernels
from .ops.table import CODE
from .record import contiguous, contiguous_strides
from .shape_ops import _out, _wrap_dim
from .tensor import Tensor, _leaf

minmax = collections.namedtuple("minmax", ["values", "indices"])


def _dims(x, dim):
    """The reduced dims, sorted: all for None or (); a 0-d tensor takes 0 and -1 (and
    reduces nothing), as in PyTorch."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(x.ndim))
    dims = [_wrap_dim(d, x.ndim) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
    if len(set(dims)) < len(dims):
        twice = next(d for k, d in enumerate(dims) if d in dims[:k])
        raise RuntimeError(f"dim {twice} appears multiple times in the list of dims")
    return tuple(sorted(dims)) if x.ndim else ()


def _reduce(x, value, dims, keepdim, code):
    """Record reduction ``code`` of ``x`` over ``dims`` whose result is ``value``."""
    shape = tuple(x.shape)
    kept = tuple(1 if d in dims else n for d, n in enumerate(shape))
    cs = contiguous_strides(kept)
    ostr = tuple(0 if d in dims else cs[d] for d in range(len(shape)))
    if not keepdim:
        value = value.reshape(tuple(n for d, n in enumerate(shape) if d not in dims))
    return _out(x, value, lambda t, ia: t.append(code, ia, -1, contiguous(value), ostr))


def _float_only(dt, name, what="Input"):
    """PyTorch's refusal of a non-float dtype ``dt`` for ``name``'s result: the input's
    (``what``), or the ``dtype=`` asked for ("Optional")."""
    if not dt.is_floating_point:
        raise RuntimeError(f"{name}(): could not infer output dtype. {what} dtype must be either "
                           f"a floating point or complex dtype. Got: "
                           f"{dtypes.TORCH_NAMES[dt.name][0]}")


def _accumulated(input, dtype):
    """input's values in the dtype a reduction accumulates and answers in: ``dtype``
    where one is given (PyTorch casts the input first; the gradient comes back in the
    input's dtype), int64 for integers and bools, else their own."""
    arr = input._arr
    if dtype is not None:
        return arr.astype(dtypes.to_np(dtype), copy=False)
    return arr.astype(np.int64) if arr.dtype.kind in "biu" else arr


_NO_MAP = np.empty(0, np.int64)


def _kept(kernel, arr, dims, dtype, *more):
    """``arr`` (float) reduced over ``dims``, kept as ones, by ``kernel`` (``kernels.
    reduce.sum_into`` or ``extreme_into``: the kernels a replay reduces with), in float64
    (a float32 input is widened and the result rounded once), in ``dtype`` (default:
    arr's)."""
    kept = tuple(1 if d in dims else n for d, n in enumerate(arr.shape))
    nout = math.prod(kept)
    x = np.ascontiguousarray(arr, np.float64).reshape(-1)
    nd = len(dims)
    rows = 0 if nout <= 1 else 1 if dims == tuple(range(arr.ndim - nd, arr.ndim)) else \
        2 if dims == tuple(range(nd)) else 0    # (rows 1 and 2 divide and step by nout)
    o = _NO_MAP if nout == 1 or rows else np.broadcast_to(
        np.arange(nout, dtype=np.int64).reshape(kept), arr.shape).reshape(-1)
    out = np.empty(nout)
    _compiled(kernel, x.size)(x, 0, out, 0, x.size, nout, o, rows, *more)
    return out.reshape(kept).astype(dtype or arr.dtype, copy=False)


def _sum_kept(arr, dims, dtype=None):
    """``arr`` (float) summed over ``dims`` (``_kept``), in ``sum_into``'s order."""
    return _kept(reduce_kernels.sum_into, arr, dims, dtype)


def _extreme_kept(arr, dims, big, last=False):
    """The largest (``big``) or smallest of float ``arr``'s values over ``dims``, kept as
    ones (``_kept``: a nan wins; of -0.0 and 0.0 the first, or the ``last``, as PyTorch's
    amax / amin and max() / min())."""
    return _kept(reduce_kernels.extreme_into, arr, dims, None, big, last)


def _all_of(kernel, arr, *more):
    """``kernel`` (``sum_into`` or ``extreme_into``) over all of float array ``arr``'s
    values, in float64: one number."""
    x = np.ascontiguousarray(arr, np.float64).reshape(-1)
    out = np.empty(1)
    _compiled(kernel, x.size)(x, 0, out, 0, x.size, 1, _NO_MAP, 0, *more)
    return out[0]


def _sum_all(arr):
    """The float64 sum of all of float array ``arr``'s values, in ``sum_into``'s order."""
    return _all_of(reduce_kernels.sum_into, arr)


def _compiled(kernel, work):
    """``kernel``, or its twin while a cold cache compiles the sweeps (``kernels.cold``:
    the first sum of a script waits for no compile)."""
    return engine.REVERSE.pick(kernel, work, (2,))


def _all(x, total, code):
    """Record the reduction ``code`` of all of x's values, whose result is ``total``."""
    value = np.asarray(total, x._arr.dtype)
    return _out(x, value, lambda t, ia: t.append(code, ia, -1, value, (0,) * x.ndim))


def sum(input, dim=None, keepdim=False, dtype=None):
    arr = input._arr
    if dim is None and dtype is None and not keepdim and arr.dtype.kind == "f":
        return _all(input, _sum_all(arr), CODE["sum"])
    arr = _accumulated(input, dtype)
    dims = _dims(input, dim)
    value = _sum_kept(arr, dims) if arr.dtype.kind == "f" else np.sum(arr, axis=dims,
                                                                       keepdims=True)
    code = CODE["sum"] if dim is None else CODE["sum_dim"]
    return _reduce(input, value, dims, keepdim, code)


def mean(input, dim=None, keepdim=False, dtype=None):
    if dtype is None:
        _float_only(input.dtype, "mean")
    else:
        _float_only(dtype, "mean", "Optional")
    arr = _accumulated(input, dtype)
    if dim is None and not keepdim and arr.size and dtype is None:
        return _all(input, _sum_all(arr) / arr.size, CODE["mean"])
    dims = _dims(input, dim)
    count = math.prod(arr.shape[d] for d in dims)
    if count:
        value = (_sum_kept(arr, dims, np.float64) / count).astype(arr.dtype, copy=False)
    else:
        value = np.full(_sum_kept(arr, dims).shape, np.nan, arr.dtype)   # (as PyTorch)
    return _reduce(input, value, dims, keepdim, CODE["mean"] if dim is None else CODE["mean_dim"])


def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """The sum with nan counted as 0 (whose gradient is 0 there)."""
    if not input.dtype.is_floating_point:
        return sum(input, dim, keepdim, dtype)
    from .elementwise import where
    return composite("NansumBackward0", lambda: sum(where(input != input, 0.0, input), dim,
                                                    keepdim, dtype), input)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """The mean of the entries that are not nan: their nansum over their count."""
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"nanmean(): expected input to have floating point or complex dtype "
                           f"but got {dtypes.TORCH_NAMES[input.dtype.name][0]}")
    return nansum(input, dim, keepdim, dtype=dtype) / sum(input == input, dim, keepdim)


def count_nonzero(input, dim=None):
    """How many entries are not 0 (over ``dim``): int64, no graph."""
    return sum(input != 0, dim)


def _refuse_empty(input, name, d, shown=None):
    """PyTorch's IndexError where a reduction along dim ``d`` (wrapped) would find the
    extreme of no values (NumPy raises an error of its own); ``shown``: the dim as given,
    where PyTorch's message names it so (amax / amin)."""
    if input.ndim and input.shape[d] == 0:
        raise IndexError(f"{name}(): Expected reduction dim {d if shown is None else shown} "
                         "to have non-zero size.")


def _extreme(x, dim, keepdim, is_max):
    if dim is None and x.numel() == 0:
        raise RuntimeError(f"{'max' if is_max else 'min'}(): Expected reduction dim to be "
                           "specified for input.numel() == 0. Specify the reduction dim with "
                           "the 'dim' argument.")
    arr = x._arr
    if dim is None:
        return _all(x, _all_of(reduce_kernels.extreme_into, arr, is_max, True) if
                    arr.dtype.kind == "f" else (np.max if is_max else np.min)(arr),
                    CODE["max_all" if is_max else "min_all"])
    d = _wrap_dim(dim, x.ndim)
    _refuse_empty(x, "max" if is_max else "min", d)
    idx = (np.argmax if is_max else np.argmin)(arr, axis=d) if arr.ndim else np.array(0)
    idx_k = np.expand_dims(idx, d) if arr.ndim else idx
    value = np.take_along_axis(arr, idx_k, d) if arr.ndim else arr
    pos = np.arange(arr.size, dtype=np.int64).reshape(arr.shape)
    pos = (np.take_along_axis(pos, idx_k, d) if arr.ndim else pos).reshape(-1)
    if not keepdim and arr.ndim:
        value, idx_k = value.squeeze(d), idx
    code = CODE["max_dim" if is_max else "min_dim"]
    values = _out(x, value, lambda t, ia: t.append(code, ia, -1, contiguous(value), pos))
    if STATE.trace is not None and arr.ndim and tracing.traced_entry(x) is not None:
        # a replay must find the extremes at the recorded positions
        shape = arr.shape
        tracing.note(tracing.G_ARGMAX if is_max else tracing.G_ARGMIN, values,
                     (x._i, math.prod(shape[:d]), shape[d], math.prod(shape[d + 1:])))
    return minmax(values, _leaf(np.asarray(idx_k, np.int64)))


def max(input, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        from .elementwise import FUNCTIONS
        return FUNCTIONS["maximum"](input, dim)
    return _extreme(input, dim, keepdim, True)


def min(input, dim=None, keepdim=False):
    if isinstance(dim, Tensor):
        from .elementwise import FUNCTIONS
        return FUNCTIONS["minimum"](input, dim)
    return _extreme(input, dim, keepdim, False)


def _amax_amin(input, dim, big):
    """amax / amin of ``input`` over ``dim``, kept: ``_extreme_kept`` for float values
    (NumPy for integers); refused as PyTorch refuses it where a result would be the
    extreme of no values (NumPy's reduction raises an error of its own there).
    Returns (value, dims)."""
    dims = _dims(input, dim)
    arr = input._arr
    if arr.size == 0:
        name = "amax" if big else "amin"
        given = dim if isinstance(dim, (tuple, list)) else (dim,)
        if not len(given):
            raise RuntimeError(f"{name}(): Expected reduction dim to be specified for "
                               "input.numel() == 0. Specify the reduction dim with the 'dim' "
                               "argument.")
        for d in given:
            _refuse_empty(input, name, _wrap_dim(d, input.ndim), d)
    if arr.dtype.kind == "f" and arr.size:
        return _extreme_kept(arr, dims, big), dims
    return (np.max if big else np.min)(arr, axis=dims, keepdims=True), dims


def amax(input, dim=(), keepdim=False):
    value, dims = _amax_amin(input, dim, True)
    return _reduce(input, value, dims, keepdim, CODE["amax"])


def amin(input, dim=(), keepdim=False):
    value, dims = _amax_amin(input, dim, False)
    return _reduce(input, value, dims, keepdim, CODE["amin"])


def prod(input, dim=None, keepdim=False, dtype=None):
    arr = _accumulated(input, dtype)       # (as PyTorch: integers multiply in int64)
    if dim is None:
        return _reduce(input, np.prod(arr, keepdims=True), tuple(range(input.ndim)), False,
                       CODE["prod"])
    dims = _dims(input, dim)
    return _reduce(input, np.prod(arr, axis=dims, keepdims=True), dims, keepdim,
                   CODE["prod_dim"])


def _traced_arg(input, dim, keepdim, is_max):
    """argmax / argmin of a traced tensor: through max(dim), which notes its guard."""
    flat = dim is None
    x = input.reshape(-1) if flat else input
    return _extreme(x, 0 if flat else dim, keepdim and not flat, is_max)[1]


def _arg(input, dim, keepdim, is_max):
    """argmax / argmin: PyTorch's errors where there is no value to point at, checked
    first (NumPy's argmax of nothing raises a ValueError of its own)."""
    name = "argmax" if is_max else "argmin"
    if dim is None and input.numel() == 0:
        raise IndexError(f"{name}(): Expected reduction dim to be specified for "
                         "input.numel() == 0.")
    d = None if dim is None else _wrap_dim(dim, input.ndim)
    if d is not None:
        _refuse_empty(input, name, d)
    if STATE.trace is not None and tracing.traced_entry(input) is not None:
        return _traced_arg(input, dim, keepdim, is_max)
    find = np.argmax if is_max else np.argmin
    if d is None:
        return _leaf(np.asarray(find(input._arr), np.int64))
    if input.ndim == 0:
        return _leaf(np.asarray(0, np.int64))
    return _leaf(np.asarray(find(input._arr, axis=d, keepdims=keepdim), np.int64))


def argmax(input, dim=None, keepdim=False):
    return _arg(input, dim, keepdim, True)


def argmin(input, dim=None, keepdim=False):
    return _arg(input, dim, keepdim, False)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    return 1 if unbiased in (None, True) else 0


def var(input, dim=None, unbiased=None, keepdim=False, correction=None):
    _float_only(input.dtype, "var")
    corr = _correction(unbiased, correction)
    dims = _dims(input, dim)
    n = math.prod(input.shape[d] for d in dims) if input.ndim else 1

    def body():
        d = input - mean(input, dims if input.ndim else None, keepdim=True)
        return sum(d * d, dims if input.ndim else None, keepdim=keepdim) / builtins.max(n - corr, 0)
    return composite("VarBackward0", body, input)


def _root(s, power):
    """``s ** power`` (power below 1: a root of a sum of powers, or a norm's power of
    ``|x|``), whose gradient is 0 where s is 0, as PyTorch's norm and std backwards mask
    it (the power's own derivative is inf there, and inf times the zero below it, or
    times abs's sign(0), would be nan).  The usual double ``where``: the power sees 1
    where s is 0, and none of its adjoint; the value there is 0 (inf for a negative
    power)."""
    from .elementwise import where
    zero = s == 0.0
    safe = where(zero, 1.0, s)
    return where(zero, 0.0 if power > 0 else math.inf,
                 safe.sqrt() if power == 0.5 else safe ** power)


def std(input, dim=None, unbiased=None, keepdim=False, correction=None):
    return composite("StdBackward0",
                     lambda: _root(var(input, dim, unbiased, keepdim, correction), 0.5), input)


def _string_order(p, dim):
    """The vector norm torch.norm's string order ``p`` stands for: 'fro' is the 2-norm,
    over at most two dims (past two, PyTorch hands it to matrix_norm, which refuses).
    The nuclear norm ('nuc') is a sum of singular values; tapegrad has no singular value
    decomposition, so it says so rather than computing another norm."""
    if p == "nuc":
        raise RuntimeError("norm(): the nuclear norm (p='nuc') is not implemented in "
                           "tapegrad (it needs a singular value decomposition)")
    if p != "fro":
        raise RuntimeError(f"linalg.matrix_norm: Order {p} not supported.")
    if isinstance(dim, (tuple, list)) and len(dim) > 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dim)}")
    return 2


def _norm_dtype(input, dtype, op="linalg.vector_norm"):
    """PyTorch's checks of vector_norm's (``op``'s) dtypes: a float input, and a
    ``dtype=`` that is float and holds the input's values without narrowing."""
    name = dtypes.TORCH_NAMES
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"{op}: Expected a floating point or complex tensor as input. "
                           f"Got {name[input.dtype.name][0]}")
    if dtype is None:
        return
    if not dtype.is_floating_point:
        raise RuntimeError(f"{op}: dtype should be floating point or complex, but got "
                           f"{name[dtype.name][0]}")
    if dtype.itemsize < input.dtype.itemsize:
        raise RuntimeError(f"{op}: the dtype of the input "
                           f"({name[input.dtype.name][0]}) should be convertible without "
                           f"narrowing to the specified dtype ({name[dtype.name][0]})")


def norm(input, p="fro", dim=None, keepdim=False, dtype=None):
    """torch.norm: the vector p-norm over ``dim`` (all dims by default), of the input cast
    to ``dtype`` where one is given; gradients as PyTorch's LinalgVectorNormBackward0
    (0 at a zero entry for p below 1, shared among ties for p = +-inf)."""
    _norm_dtype(input, dtype)
    p = 2 if p is None else _string_order(p, dim) if isinstance(p, str) else p
    dims = None if dim is None else _dims(input, dim)

    def body():
        x = input if dtype is None else input.to(dtype)
        a = x.abs()
        if p == 0:                   # the count of non-zeros (no gradient)
            from .elementwise import where
            return (sum((a != 0).to(x.dtype), dims, keepdim)
                    + 0.0 * sum(where(a < math.inf, a, 0.0), dims, keepdim))
        if p == math.inf:
            return amax(a, dims or (), keepdim)
        if p == -math.inf:
            return amin(a, dims or (), keepdim)
        if p == 1:
            return sum(a, dims, keepdim)
        if p == 2:
            return _root(sum(x * x, dims, keepdim), 0.5)
        return _root(sum(_root(a, p) if p < 1 else a ** p, dims, keepdim), 1.0 / p)
    return composite("LinalgVectorNormBackward0", body, input)


def _truth(npf):
    def test(input, dim=None, keepdim=False):
        """Whether all / any elements (along ``dim``) are non-zero: a bool tensor, never
        recorded (no gradient)."""
        arr = input._arr
        axis = None if dim is None else _wrap_dim(dim, input.ndim)
        tracing.freeze(input)       # (while tracing: a traced input's values are guarded)
        return _leaf(np.asarray(npf(arr != 0, axis=axis, keepdims=keepdim and axis is not None)))
    test.__name__ = npf.__name__
    return test


all, any = _truth(np.all), _truth(np.any)
