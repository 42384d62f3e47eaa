"""More of PyTorch's shape ops, each a composition of recorded ops (no kernel of its own):
``narrow`` and ``select`` (one slice / select entry, as indexing records them),
``repeat`` / ``tile`` (view, expand, reshape, shown as one RepeatBackward0), ``masked_fill``
(a ``where``, shown as MaskedFillBackward0 / 1), ``hstack`` / ``vstack`` /
``column_stack`` / ``dstack`` (``cat``), ``broadcast_tensors`` (``expand``),
``atleast_*d`` (views), ``tensor_split`` (``narrow`` views)."""
import functools

import numpy as np

from . import dtypes, views
from .composite import composite
from .elementwise import where
from .inplace import _adopt, _check, check_broadcast
from .ops.table import CODE
from .record import broadcast_shape, contiguous
from .shape_ops import (COPY, _basic, _dims, _reshaped, _wrap_dim, cat, expand, reshape,
                        unsqueeze)
from .tensor import Tensor, _leaf, _norm
from .tracing import freeze

# PyTorch's C names of the dtypes, as its messages print them
C_NAMES = {"float64": "double", "float32": "float", "float16": "c10::Half", "int64": "long int",
           "int32": "int", "int16": "short int", "int8": "signed char", "uint8": "unsigned char",
           "bool": "bool"}


def _int(v, what):
    """An integer argument (a one-element integer tensor is one too)."""
    if isinstance(v, Tensor) and v.numel() == 1 and not v.dtype.is_floating_point:
        v = v.item()
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise TypeError(f"{what} must be int, not {type(v).__name__}")
    return int(v)


def narrow(input, dim, start, length):
    """The elements ``start .. start + length - 1`` along ``dim`` (SliceBackward0)."""
    if input.ndim == 0:
        raise RuntimeError("narrow() cannot be applied to a 0-dim tensor.")
    start = _int(start, "narrow(): argument 'start' (position 2)")
    length = _int(length, "narrow(): argument 'length' (position 3)")
    if length < 0:
        raise RuntimeError("narrow(): length must be non-negative.")
    dim = _wrap_dim(_int(dim, "narrow(): argument 'dim' (position 1)"), input.ndim)
    n = input.shape[dim]
    if not -n <= start <= n:
        raise IndexError(f"start out of range (expected to be in range of [{-n}, {n}], but got "
                         f"{start})")
    if start < 0:
        start += n
    if start > n - length:
        raise RuntimeError(f"start ({start}) + length ({length}) exceeds dimension size ({n}).")
    arr = contiguous(input._arr)
    key = (slice(None),) * dim + (slice(start, start + length), Ellipsis)
    return views.mark(_basic(input, arr, arr[key], CODE["slice"]), input, _basic_again,
                      (key, CODE["slice"]))


def select(input, dim, index):
    """``input`` at ``index`` along ``dim``, that dim removed (SelectBackward0)."""
    if input.ndim == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = _wrap_dim(_int(dim, "select(): argument 'dim' (position 1)"), input.ndim)
    index = _int(index, "select(): argument 'index' (position 2)")
    n = input.shape[dim]
    if not -n <= index < n:
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(input.shape)} at dimension {dim}")
    arr = contiguous(input._arr)
    key = (slice(None),) * dim + (index % n, Ellipsis)
    return views.mark(_basic(input, arr, arr[key], CODE["select"]), input, _basic_again,
                      (key, CODE["select"]))


def _basic_again(b, arg):
    """narrow / select made again from the base (``views``)."""
    key, code = arg
    arr = contiguous(b._arr)
    return _basic(b, arr, arr[key], code)


def repeat(input, *repeats):
    """The tensor tiled ``repeats[d]`` times along each dim (leading dims added): a view
    with a 1 before each dim, an expand of those ones and a reshape (RepeatBackward0;
    the backward sums the copies)."""
    if not repeats:
        raise TypeError('repeat() missing 1 required positional arguments: "repeats"')
    if len(repeats) == 1 and isinstance(repeats[0], (tuple, list)):
        repeats = tuple(repeats[0])
    repeats = tuple(_int(r, "repeat(): argument 'repeats'") for r in repeats)
    if len(repeats) < input.ndim:
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number "
                           "of dimensions of tensor")
    shape = (1,) * (len(repeats) - input.ndim) + tuple(input.shape)
    target = [r * n for r, n in zip(repeats, shape)]
    negative = [n for n in target if n < 0]
    if negative or any(r < 0 for r in repeats):
        bad = negative[0] if negative else next(r for r in repeats if r < 0)
        raise RuntimeError(f"Trying to create tensor with negative dimension {bad}: {target}")
    ones = tuple(v for n in shape for v in (1, n))
    tiled = tuple(v for r, n in zip(repeats, shape) for v in (r, n))
    return composite("RepeatBackward0", lambda: _reshaped(
        expand(reshape(input, ones), tiled), tuple(target), how=COPY), input)


def _check_mask(mask):
    if not isinstance(mask, Tensor):
        raise TypeError(f"masked_fill(): argument 'mask' (position 1) must be Tensor, not "
                        f"{type(mask).__name__}")
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype "
                           f"{C_NAMES.get(mask.dtype.name, mask.dtype.name)}")


def _check_value(mask, value):
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but "
                               f"got tensor with {value.ndim} dimension(s).")
    elif not isinstance(value, (int, float, bool, np.number)):
        raise TypeError(f"masked_fill() received an invalid combination of arguments - got "
                        f"(Tensor, {type(value).__name__}), but expected one of:\n"
                        " * (Tensor mask, Tensor value)\n * (Tensor mask, Number value)\n")


def masked_fill(input, mask, value):
    """``value`` where ``mask`` holds, else ``input`` (mask and input broadcast; the
    result keeps input's dtype).  A ``where``; a 0-d ``value`` tensor gets the sum of
    the gradient over the filled positions."""
    _check_mask(mask)
    _check_value(mask, value)
    shape = broadcast_shape(tuple(mask.shape), tuple(input.shape))   # PyTorch: a is the mask
    dt = input.dtype
    if not dt.is_floating_point:
        v = value._arr if isinstance(value, Tensor) else value
        freeze(input, mask, value)   # (while tracing: integers of traced values, guarded)
        out = np.where(mask._arr, np.asarray(v).astype(dt.np), input._arr)
        return _leaf(_norm(np.broadcast_to(out, shape).astype(dt.np)))
    if not isinstance(value, Tensor):
        return composite("MaskedFillBackward0", lambda: where(mask, float(value), input), input)

    def body():      # input first, as PyTorch's next_functions: where(not mask, input, value)
        v = value if value.dtype is dt else value.to(dt)
        return where(mask.eq(False), input, v)
    return composite("MaskedFillBackward1", body, input, value)


def masked_fill_(self, mask, value):
    """In place: ``mask`` must broadcast to self's shape."""
    _check_mask(mask)
    _check_value(mask, value)
    _check(self)
    check_broadcast(self, mask)
    return _adopt(self, lambda: masked_fill(self, mask, value))


# -- hstack / vstack ------------------------------------------------------------------------
def _tensor_list(tensors, name):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)):
        raise TypeError(f"{name}(): argument 'tensors' (position 1) must be tuple of Tensors, "
                        f"not {type(tensors).__name__}")
    tensors = list(tensors)
    for k, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(x).__name__}")
    if not tensors:
        raise RuntimeError(f"{name} expects a non-empty TensorList")
    return tensors


def _check_sizes(tensors, dim):
    """PyTorch's cat messages for tensors that do not fit together along ``dim``."""
    first = tuple(tensors[0].shape)
    for k, x in enumerate(tensors[1:], 1):
        s = tuple(x.shape)
        if len(s) != len(first):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} "
                               f"and {len(s)}")
        for d, (a, b) in enumerate(zip(first, s)):
            if d != dim and a != b:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {a} but got size {b} for tensor number {k} "
                                   "in the list.")


def _atleast_1d(x):
    return reshape(x, (1,)) if x.ndim == 0 else x


def _atleast_2d(x):
    if x.ndim == 0:
        return reshape(x, (1, 1))
    return unsqueeze(x, 0) if x.ndim == 1 else x


def hstack(tensors):
    """Concatenation along dim 1 (dim 0 for 1-D tensors; 0-d tensors count as 1-D)."""
    tensors = [_atleast_1d(x) for x in _tensor_list(tensors, "hstack")]
    dim = 0 if tensors[0].ndim == 1 else 1
    _check_sizes(tensors, dim)
    return cat(tensors, dim)


def vstack(tensors):
    """Concatenation along dim 0 of the tensors made at least 2-D (a vector is a row)."""
    tensors = [_atleast_2d(x) for x in _tensor_list(tensors, "vstack")]
    _check_sizes(tensors, 0)
    return cat(tensors, 0)


row_stack = vstack


# -- tile, broadcast_tensors, atleast_*d, column_stack, dstack, tensor_split -------------------
def tile(input, *dims):
    """``repeat`` with ones put before ``dims`` where it has fewer than input's dims
    (``dims`` a sequence, or as a method separate numbers too)."""
    dims = _dims(dims)
    return repeat(input, (1,) * (input.ndim - len(dims)) + dims)


def broadcast_tensors(*tensors):
    """The tensors expanded to their broadcast shape (those already of it, themselves)."""
    shape = functools.reduce(broadcast_shape, (tuple(t.shape) for t in tensors), ())
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


def _atleast_3d(x):
    if x.ndim == 0:
        return reshape(x, (1, 1, 1))
    if x.ndim == 1:
        return unsqueeze(unsqueeze(x, 0), -1)
    return unsqueeze(x, -1) if x.ndim == 2 else x


def _each(fn):
    """``atleast_*d``: one tensor, several, or a list or tuple of them (then a tuple)."""
    def apply(*tensors):
        if len(tensors) == 1 and isinstance(tensors[0], Tensor):
            return fn(tensors[0])
        if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
            tensors = tensors[0]
        return tuple(fn(t) for t in tensors)
    apply.__name__ = fn.__name__.lstrip("_")
    return apply


atleast_1d, atleast_2d, atleast_3d = _each(_atleast_1d), _each(_atleast_2d), _each(_atleast_3d)


def column_stack(tensors):
    """``hstack`` of the tensors, 0-d and 1-d ones made columns."""
    tensors = _tensor_list(tensors, "column_stack")
    return hstack([reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors])


def dstack(tensors):
    """Concatenation along dim 2 of the tensors made at least 3-D."""
    tensors = [_atleast_3d(x) for x in _tensor_list(tensors, "dstack")]
    _check_sizes(tensors, 2)
    return cat(tensors, 2)


def tensor_split(input, indices_or_sections, dim=0):
    """Views along ``dim``: ``n`` sections (the first ``size % n`` one longer), or cut at
    the given indices (a list, or a 1-D integer tensor; a 0-d one is a count)."""
    if input.ndim == 0:
        raise RuntimeError("tensor_split expected at least a 1-dimensional tensor, but got a "
                           "tensor with 0 dims")
    dim = _wrap_dim(dim, input.ndim)
    n = input.shape[dim]
    cuts = indices_or_sections
    if isinstance(cuts, Tensor):
        cuts = cuts.item() if cuts.ndim == 0 else cuts.tolist()
    if isinstance(cuts, (int, np.integer)):
        if cuts <= 0:
            raise RuntimeError(f"number of sections must be larger than 0, got {cuts}")
        size, extra = divmod(n, cuts)
        cuts = np.cumsum([size + (k < extra) for k in range(cuts - 1)]).tolist()
    bounds = [0] + [min(max(c + n if c < 0 else c, 0), n) for c in cuts] + [n]
    return tuple(narrow(input, dim, a, max(b - a, 0)) for a, b in zip(bounds, bounds[1:]))
