"""More PyTorch names composed of the ops tapegrad records (no kernel of their own):
``einsum`` (broadcast multiply and sum), ``repeat_interleave`` / ``index_select`` /
``gather`` / ``roll`` / ``flip`` / ``diag`` / ``sort`` / ``topk`` (indexing with index
arrays: the gradient is the index entry's scatter-add), ``cross``, ``tril`` / ``triu``
(masked_fill), ``movedim`` / ``unflatten`` / ``meshgrid`` (views), ``floor`` / ``ceil``
/ ``round`` (a ``where`` that takes the rounded constant: zero gradient, as PyTorch),
``nan_to_num``, ``lerp``, and results without a graph: ``isnan`` / ``isinf`` /
``isfinite``, ``logical_*``, ``argsort``, ``randperm``."""
import collections
import math
import warnings

import numpy as np

from . import dtypes, views
from .autograd.function import Function
from .composite import composite
from .division import NoDerivative
from .elementwise import FUNCTIONS, result_dtype, where
from .factories import _allocated, _rng, _size, zeros
from .grad_mode import STATE
from .inplace import _adopt, _check, check_broadcast, placed, reading, write_shape
from .ops.table import CODE
from .record import broadcast_shape, contiguous_strides, gather as gather_entry
from .reductions import sum as _sum
from .shape_extras import masked_fill
from .shape_ops import _out, _wrap_dim, cat, expand, getitem, permute, reshape, scatter_sum
from .tensor import Tensor, _leaf, _norm
from .tracing import freeze, traced_entry

SortResult = collections.namedtuple("sort", ["values", "indices"])
TopkResult = collections.namedtuple("topk", ["values", "indices"])


def _const(arr):
    return _leaf(_norm(np.asarray(arr)))


def _index_np(index, name):
    if isinstance(index, Tensor):
        if index.dtype.is_floating_point or index.dtype is dtypes.bool_:
            raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index")
        freeze(index)
        return np.asarray(index._arr, np.int64)
    return np.asarray(index, np.int64)


def _take_along(input, dim, idx):
    """``input`` indexed by ``idx`` (same ndim) along ``dim``, other dims by position."""
    key = []
    for d in range(idx.ndim):
        if d == dim:
            key.append(idx)
        else:
            shape = [1] * idx.ndim
            shape[d] = idx.shape[d]
            key.append(np.broadcast_to(np.arange(idx.shape[d]).reshape(shape), idx.shape))
    return getitem(input, tuple(_const(k) for k in key))


def _select_along(input, dim, idx):
    """``input`` indexed by the 1-D ``idx`` along ``dim``."""
    key = (slice(None),) * dim + (_const(np.asarray(idx, np.int64)),)
    return getitem(input, key)


# -- indexing ----------------------------------------------------------------------------------
def gather(input, dim, index, *, sparse_grad=False):
    """``out[i][j][k] = input[index[i][j][k]][j][k]`` (for dim 0), the others likewise."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    nd = max(input.ndim, 1)
    dim = _wrap_dim(dim, nd)
    if max(index.ndim, 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as input "
                           "tensor")
    idx = _index_np(index, "gather").reshape(index.shape if index.ndim else (1,))
    x = input if input.ndim else reshape(input, (1,))
    for d in range(nd):
        if d != dim and idx.shape[d] > x.shape[d]:
            raise RuntimeError(f"Size does not match at dimension {d} expected index "
                               f"{list(idx.shape)} to be no larger than self "
                               f"{list(x.shape)} apart from dimension {dim}")
    n = x.shape[dim]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise RuntimeError(f"index {int(idx.max() if idx.max() >= n else idx.min())} is out of "
                           f"bounds for dimension {dim} with size {n}")
    if idx.size and idx.min() < 0:
        raise RuntimeError(f"index {int(idx.min())} is out of bounds for dimension {dim} with "
                           f"size {n}")
    out = composite("GatherBackward0", lambda: _take_along(x, dim, idx), input)
    return reshape(out, ()) if input.ndim == 0 else out


def index_select(input, dim, index):
    """The entries ``index`` (1-D integers) along ``dim``."""
    if not isinstance(index, Tensor):
        raise TypeError(f"index_select(): argument 'index' (position 3) must be Tensor, not "
                        f"{type(index).__name__}")
    if index.ndim > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    idx = _index_np(index, "index_select").reshape(-1)
    nd = max(input.ndim, 1)
    dim = _wrap_dim(dim, nd)
    x = input if input.ndim else reshape(input, (1,))
    n = x.shape[dim]
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise IndexError("index out of range in self")
    out = composite("IndexSelectBackward0", lambda: _select_along(x, dim, idx), input)
    return reshape(out, ()) if input.ndim == 0 else out


# -- writes by index: scatter, index_add / copy / fill, index_put, masked_scatter ------------
def _type_name(t):
    return dtypes.TORCH_NAMES[t.dtype.name][0]


def _traced(*tensors):
    return STATE.trace is not None and any(
        isinstance(t, Tensor) and traced_entry(t) is not None for t in tensors)


def _positions(shape, dim, idx):
    """The flat positions, in a tensor of ``shape``, of the elements ``idx`` (of the same
    ndim) selects along ``dim``, the other dims by position."""
    strides = np.cumprod((tuple(shape[1:]) + (1,))[::-1])[::-1].astype(np.int64)
    pos = idx.astype(np.int64) * strides[dim]
    for d, g in enumerate(np.indices(idx.shape, sparse=True)):
        if d != dim:
            pos = pos + g * strides[d]
    return np.broadcast_to(pos, idx.shape)


def _put(x, pos, writes, node, *inputs, advanced=False):
    """``x`` with the elements at flat positions ``pos`` replaced by ``writes`` (a tensor
    that broadcasts to pos's shape, or a number), shown as the Node ``node``."""
    return composite(node, lambda: placed(x, pos, writes, advanced=advanced,
                                          traced=_traced(x, writes)), *inputs)


def _accumulated(x, pos, writes, node, *inputs):
    """``x`` plus ``writes`` (pos's shape) added at the flat positions ``pos``: a sum of
    each position's writes (``scatter_add``, the transpose of a gather), added where a
    position is written (elsewhere x itself, -0.0 included)."""
    if not x.dtype.is_floating_point:            # (no gradient: NumPy adds them up)
        arr = np.array(_values(x))
        np.add.at(arr.reshape(-1), pos.reshape(-1), _values(writes).reshape(-1))
        return _const(arr)
    written = np.zeros(x.numel(), bool)
    written[pos.reshape(-1)] = True

    def body():
        total = scatter_sum(writes.reshape(-1), pos.reshape(-1), x.numel(), tuple(x.shape))
        return where(_const(written.reshape(tuple(x.shape))), x + total, x)
    return composite(node, body, *inputs)


def _check_index_bounds(idx, n, dim, error=RuntimeError, prefix=""):
    bad = idx[(idx < 0) | (idx >= n)]
    if bad.size:
        raise error(f"{prefix}index {int(bad[0])} is out of bounds for dimension {dim} with "
                    f"size {n}")


def _scatter_args(input, dim, index, src):
    """The checks of PyTorch's scatter / scatter_add; (dim, index array, input and src as
    1-D where 0-d), or None where index is empty (nothing written)."""
    if not isinstance(index, Tensor) or index.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError("scatter(): Expected dtype int32/int64 for index")
    if isinstance(src, Tensor) and src.dtype is not input.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    nd = max(input.ndim, 1)
    dim = _wrap_dim(dim, nd)
    if index.numel() == 0:
        return None
    if max(index.ndim, 1) != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as self tensor")
    as_1d = (lambda t: reshape(t, (1,)) if isinstance(t, Tensor) and t.ndim == 0 else t)
    x, src = as_1d(input), as_1d(src)
    idx = _index_np(index, "scatter").reshape(index.shape or (1,))
    if isinstance(src, Tensor) and src.ndim != nd:
        raise RuntimeError("Index tensor must have the same number of dimensions as src tensor")
    if any(idx.shape[d] > x.shape[d] for d in range(nd) if d != dim) or \
            isinstance(src, Tensor) and any(i > s for i, s in zip(idx.shape, src.shape)):
        also = f" and to be no larger size than src {list(src.shape)}" \
            if isinstance(src, Tensor) else ""
        raise RuntimeError(f"Expected index {list(idx.shape)} to be no larger than self "
                           f"{list(x.shape)} apart from dimension {dim}{also}")
    _check_index_bounds(idx, x.shape[dim], dim)
    return dim, idx, x, src


def _as_input(out, input):
    return reshape(out, ()) if input.ndim == 0 else out


def scatter(input, dim, index, src=None, *, value=None, reduce=None):
    """``input`` with ``src[i][j][k]`` (or the number ``value``) written at
    ``[index[i][j][k]][j][k]`` (for dim 0); a position written twice keeps one write, and
    each write gets its gradient, as PyTorch's.  ``reduce`` ('add', 'multiply') combines
    instead, without a derivative (as PyTorch's)."""
    if src is None or not isinstance(src, Tensor):
        src = value if src is None else src
    if reduce is not None and reduce not in ("add", "multiply"):
        raise RuntimeError("reduce argument must be either add or multiply.")
    args = _scatter_args(input, dim, index, src)
    if args is None:                # (nothing written; src is an input all the same)
        return reading(input.clone(), src) if reduce is None else \
            _underived_scatter(input.clone(), input, src)
    dim, idx, x, src = args
    pos = _positions(tuple(x.shape), dim, idx)
    if isinstance(src, Tensor):
        writes = src if tuple(src.shape) == idx.shape else \
            getitem(src, tuple(slice(0, n) for n in idx.shape))
    else:
        writes = src
    if reduce is not None:
        if isinstance(src, Tensor):
            warnings.warn("The reduce argument of torch.scatter with Tensor src is deprecated and "
                          "will be removed in a future PyTorch release. Use torch.scatter_reduce "
                          "instead for more reduction options.", UserWarning, stacklevel=2)
        arr = np.array(_values(x))
        combine = np.add if reduce == "add" else np.multiply
        combine.at(arr.reshape(-1), pos.reshape(-1),
                   np.broadcast_to(_values(writes), pos.shape).reshape(-1))
        return _underived_scatter(_as_input(_const(arr), input), input, src)
    if isinstance(src, Tensor):
        return _as_input(_put(x, pos, writes, "ScatterBackward0", input, src), input)
    return _as_input(_put(x, pos, src, "ScatterBackward1", input), input)


def _underived_scatter(out, input, src):
    inputs = [t for t in (input, src) if isinstance(t, Tensor)]
    return NoDerivative.apply(out, "scatter", *inputs) if any(
        t.requires_grad for t in inputs) else out


def scatter_add(input, dim, index, src):
    """``input`` with each ``src[i][j][k]`` added at ``[index[i][j][k]][j][k]`` (dim 0)."""
    if not isinstance(src, Tensor):
        raise TypeError(f"scatter_add(): argument 'src' (position 4) must be Tensor, not "
                        f"{type(src).__name__}")
    args = _scatter_args(input, dim, index, src)
    if args is None:
        return reading(input.clone(), src)
    dim, idx, x, src = args
    writes = src if tuple(src.shape) == idx.shape else \
        getitem(src, tuple(slice(0, n) for n in idx.shape))
    return _as_input(_accumulated(x, _positions(tuple(x.shape), dim, idx), writes,
                                  "ScatterAddBackward0", input, src), input)


def _along(name, input, dim, index, source, long_only=False):
    """The checks of index_add / index_copy, and the flat positions in ``input`` of
    ``source``'s elements (index[k] along ``dim`` for source's k-th slice)."""
    if not isinstance(index, Tensor):
        raise TypeError(f"{name}(): argument 'index' (position 3) must be Tensor, not "
                        f"{type(index).__name__}")
    nd = max(input.ndim, 1)
    dim = _wrap_dim(dim, nd)
    if long_only and index.dtype is not dtypes.int64:
        raise RuntimeError(f"{name}_(): Expected a long tensor for index, but got "
                           f"{_type_name(index)}")
    if index.dtype not in (dtypes.int64, dtypes.int32):
        raise RuntimeError(f"{name}_(): Expected dtype int32/int64 for index but got: "
                           f"{_type_name(index)}")
    if index.ndim > 1:
        raise IndexError(f"{name}_(): Index is supposed to be a vector, but got dim: "
                         f"{index.ndim} with type: {_type_name(index)} and size: "
                         f"{list(index.shape)}")
    idx = _index_np(index, name).reshape(-1)
    shape = tuple(input.shape) or (1,)
    sshape = tuple(source.shape) or (1,)
    if len(sshape) != len(shape) or sshape[dim] != idx.size:
        if name == "index_copy":
            raise IndexError(f"index_copy_(): Number of indices ({idx.size}) should be equal to "
                             f"source.size(dim) ({sshape[dim] if dim < len(sshape) else 1})")
        raise RuntimeError(f"index_add_(): Number of indices ({idx.size}) should be equal to "
                           f"source.size(dim): ({sshape[dim] if dim < len(sshape) else 1}), for "
                           f"dim: {dim}")
    for d in range(nd):
        if d != dim and sshape[d] != shape[d]:
            if name == "index_copy":
                k = d - (d > dim)
                raise RuntimeError(f"index_copy_(): Source/destination tensor must have same "
                                   f"slice shapes. Destination slice shape: {shape[d]} at "
                                   f"dimension {k} and source slice shape: {sshape[d]} at "
                                   f"dimension {k}.")
            raise RuntimeError(f"source tensor shape must match self tensor shape, excluding "
                               f"the specified dimension. Got self.shape = {list(input.shape)} "
                               f"source.shape = {list(source.shape)}")
    if name == "index_copy":
        _check_index_bounds(idx, shape[dim], dim, IndexError, "index_copy_(): ")
    else:
        _check_index_bounds(idx, shape[dim], dim)
    along = [1] * nd
    along[dim] = idx.size
    return _positions(shape, dim, np.broadcast_to(idx.reshape(along), sshape))


def index_add(input, dim, index, source, *, alpha=1):
    """``input`` with ``alpha * source``'s slices added at ``index`` along ``dim``."""
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_add_(): self ({_type_name(input)}) and source "
                           f"({_type_name(source)}) must have the same scalar type")
    pos = _along("index_add", input, dim, index, source)
    x = reshape(input, (1,)) if input.ndim == 0 else input
    if not input.dtype.is_floating_point:
        alpha = int(alpha)                          # (as PyTorch's, for integers)
    writes = source if alpha == 1 else source * alpha
    return _as_input(_accumulated(x, pos, writes.reshape(pos.shape), "IndexAddBackward0",
                                  input, source), input)


def index_copy(input, dim, index, source):
    """``input`` with ``source``'s slices written at ``index`` along ``dim``."""
    if source.dtype is not input.dtype:
        raise RuntimeError(f"index_copy_(): self and source expected to have the same dtype, "
                           f"but got (self) {_type_name(input)} and (source) "
                           f"{_type_name(source)}")
    pos = _along("index_copy", input, dim, index, source, long_only=True)
    x = reshape(input, (1,)) if input.ndim == 0 else input
    return _as_input(_put(x, pos, source.reshape(pos.shape), "IndexCopyBackward0", input,
                          source), input)


def index_fill(input, dim, index, value):
    """``input`` with the slices ``index`` along ``dim`` set to ``value`` (a number or a
    0-d tensor, which gets their gradient's sum)."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        raise IndexError("index_fill_(): Expected dtype int64 for index.")
    if index.ndim > 1:
        raise RuntimeError("Index has to be a vector/scalar")
    if isinstance(value, Tensor) and value.ndim:
        raise RuntimeError(f"index_fill_ only supports a 0-dimensional value tensor, but got "
                           f"tensor with {value.ndim} dimension(s).")
    nd = max(input.ndim, 1)
    dim = _wrap_dim(dim, nd)
    idx = _index_np(index, "index_fill").reshape(-1)
    n = (tuple(input.shape) or (1,))[dim]
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"index {int(bad[0])} is out of bounds for dimension {dim} with size {n}")
    mask = np.zeros(tuple(input.shape) or (1,), bool)
    mask[(slice(None),) * dim + (idx % max(n, 1),)] = True
    mask = _const(mask.reshape(tuple(input.shape)))
    if isinstance(value, Tensor):
        return composite("IndexFillBackward1", lambda: masked_fill(input, mask, value), input,
                         value)
    return composite("IndexFillBackward0", lambda: masked_fill(input, mask, value), input)


def _put_positions(input, indices):
    """The flat positions ``input[indices]`` selects (PyTorch's indexing and its errors)."""
    if not isinstance(indices, (tuple, list)):
        raise TypeError(f"index_put(): argument 'indices' (position 2) must be tuple of Tensors, "
                        f"not {type(indices).__name__}")
    for k, i in enumerate(indices):
        if not isinstance(i, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 1, but got "
                            f"{type(i).__name__}")
    used = sum(i.ndim if i.dtype in (dtypes.bool_, dtypes.uint8) else 1 for i in indices)
    if used > input.ndim:
        raise IndexError(f"too many indices for tensor of dimension {input.ndim} (got {used})")
    at = _const(np.arange(input.numel()).reshape(tuple(input.shape)))
    return np.asarray(getitem(at, tuple(indices))._arr)


def index_put(input, indices, values, accumulate=False):
    """``input`` with ``values`` (broadcast) written at ``input[indices]`` (added there
    with ``accumulate``): IndexPutBackward0; the gradient of ``values`` is the result's
    gradient at the positions, repeated ones included, as PyTorch's."""
    pos = _put_positions(input, indices)
    if values.dtype is not input.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got "
                           f"{_type_name(input)} for the destination and {_type_name(values)} "
                           f"for the source.")
    if not accumulate:
        return _put(input, pos, values, "IndexPutBackward0", input, values, advanced=True)
    writes = values.reshape(write_shape(values, pos, True)).broadcast_to(pos.shape)
    return _accumulated(input, pos, writes, "IndexPutBackward0", input, values)


def masked_select(input, mask):
    """The elements of ``input`` where ``mask`` holds (both broadcast), as a 1-D tensor."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        raise RuntimeError("masked_select: expected BoolTensor for mask")
    shape = broadcast_shape(tuple(mask.shape), tuple(input.shape))
    return composite("MaskedSelectBackward0", lambda: getitem(
        expand(input, shape), expand(mask, shape) if tuple(mask.shape) != shape else mask),
        input)


def masked_scatter(input, mask, source):
    """``input`` (broadcast with ``mask``) with the positions where ``mask`` holds taking
    ``source``'s elements in order."""
    if not isinstance(mask, Tensor) or mask.dtype is not dtypes.bool_:
        name = mask.dtype.name if isinstance(mask, Tensor) else type(mask).__name__
        raise RuntimeError(f"masked_scatter_ only supports boolean masks, but got mask with dtype "
                           f"{dtypes.TORCH_NAMES.get(name, (name,))[0]}")
    if source.dtype is not input.dtype:
        raise RuntimeError(f"masked_scatter: expected self and source to have same dtypes but "
                           f"got{_type_name(input)} and {_type_name(source)}")
    shape = broadcast_shape(tuple(mask.shape), tuple(input.shape))
    pos = np.flatnonzero(np.broadcast_to(_values(mask), shape))
    if pos.size > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    x = input if tuple(input.shape) == shape else expand(input, shape)
    writes = reshape(source, (-1,))
    if pos.size != source.numel():
        writes = getitem(writes, slice(0, pos.size))
    return composite("MaskedScatterBackward0", lambda: placed(
        x, pos, writes, traced=_traced(x, writes)), input, source)


def nonzero(input, *, as_tuple=False):
    """The indices of the nonzero elements: an (n, ndim) int64 tensor, or one per dim."""
    if as_tuple:
        return where(input)
    return _const(np.argwhere(_values(input)).astype(np.int64))


def take(input, index):
    """The elements of the flattened ``input`` at ``index`` (negative from the end), in
    index's shape."""
    if not isinstance(index, Tensor) or index.dtype is not dtypes.int64:
        raise RuntimeError(f"take(): Expected a long tensor for index, but got "
                           f"{_type_name(index) if isinstance(index, Tensor) else 'none'}")
    idx = _index_np(index, "take")
    n = input.numel()
    if n == 0 and idx.size:
        raise IndexError("take(): tried to take from an empty tensor")
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise IndexError(f"out of range: tried to access index {int(bad[0])} on a tensor of {n} "
                         f"elements.")
    return composite("TakeBackward0", lambda: getitem(reshape(input, (-1,)),
                                                      _const(idx % max(n, 1))), input)


def take_along_dim(input, indices, dim=None):
    """``input``'s elements at ``indices`` along ``dim`` (broadcast with input apart from
    dim; negative from the end); without dim, of the flattened input."""
    if not isinstance(indices, Tensor) or indices.dtype is not dtypes.int64:
        raise RuntimeError(f"torch.take_along_dim(): dtype of indices should be Long but got "
                           f"{_type_name(indices)}")
    if dim is None:
        return take_along_dim(reshape(input, (-1,)), reshape(indices, (-1,)), 0)
    if input.ndim != indices.ndim:
        raise RuntimeError(f"torch.take_along_dim(): input and indices should have the same "
                           f"number of dimensions, but got {input.ndim} dimensions for input, "
                           f"and {indices.ndim} dimensions for indices")
    dim = _wrap_dim(dim, max(input.ndim, 1))
    idx = _index_np(indices, "take_along_dim")
    n = (tuple(input.shape) or (1,))[dim]
    bad = idx[(idx < -n) | (idx >= n)]
    if bad.size:
        raise RuntimeError(f"index {int(bad[0])} is out of bounds for dimension {dim} with "
                           f"size {n}")
    if input.ndim == 0:
        return input.clone()
    shape = list(broadcast_shape(*(tuple(1 if d == dim else n for d, n in enumerate(t.shape))
                                   for t in (input, indices))))
    in_shape, idx_shape = list(shape), list(shape)
    in_shape[dim], idx_shape[dim] = input.shape[dim], idx.shape[dim]
    x = input if list(input.shape) == in_shape else expand(input, tuple(in_shape))
    return gather(x, dim, _const(np.broadcast_to(idx % max(n, 1), idx_shape).copy()))


def _inplace_form(fn):
    """``x.fn_(...)``: ``fn`` out of place, adopted (computed within ``_adopt``, after x
    is noted as modified: fn's entries read x's old value as their input)."""
    def method(self, *args, **kwargs):
        _check(self)

        def compute():
            out = fn(self, *args, **kwargs)
            if tuple(out.shape) != tuple(self.shape):
                check_broadcast(self, out)
            return out
        return _adopt(self, compute)
    method.__name__ = fn.__name__ + "_"
    return method


scatter_, scatter_add_, index_add_, index_copy_, index_fill_, index_put_, masked_scatter_ = map(
    _inplace_form, (scatter, scatter_add, index_add, index_copy, index_fill, index_put,
                    masked_scatter))


def _dims_arg(dims, ndim):
    if isinstance(dims, (int, np.integer)):
        dims = (dims,)
    dims = tuple(_wrap_dim(int(d), max(ndim, 1)) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"dims has duplicates, original flip dims size={len(dims)}, but "
                           f"unique flip dims size={len(set(dims))}")
    return dims


def flip(input, dims):
    """The entries in reverse order along each of ``dims``."""
    dims = _dims_arg(dims, input.ndim)
    if input.ndim == 0:
        return input.clone()

    def body():
        y = input
        for d in dims:
            y = _select_along(y, d, np.arange(input.shape[d] - 1, -1, -1))
        return y
    return composite("FlipBackward0", body, input) if dims else input.clone()


def roll(input, shifts, dims=None):
    """Entries shifted by ``shifts`` along ``dims`` (wrapping round); without dims the
    flattened tensor is rolled and reshaped back."""
    shifts = (shifts,) if isinstance(shifts, (int, np.integer)) else tuple(shifts)
    if dims is None:
        if len(shifts) != 1:
            raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, "
                               "dims:0")
        flat = reshape(input, (-1,))
        return reshape(roll(flat, shifts, 0), tuple(input.shape))
    dims = (dims,) if isinstance(dims, (int, np.integer)) else tuple(dims)
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:"
                           f"{len(dims)}")
    dims = tuple(_wrap_dim(int(d), max(input.ndim, 1)) for d in dims)

    def body():
        y = input
        for s, d in zip(shifts, dims):
            n = input.shape[d]
            if n:
                y = _select_along(y, d, (np.arange(n) - int(s)) % n)
        return y
    return composite("RollBackward0", body, input)


def repeat_interleave(input, repeats=None, dim=None, *, output_size=None):
    """Each entry repeated ``repeats`` times (an int, or one count per entry along
    ``dim``); without ``dim`` the tensor is flattened.  ``repeat_interleave(counts)``
    repeats the indices 0, 1, ... ``counts[i]`` times."""
    if repeats is None:
        counts = _index_np(input, "repeat_interleave")
        if input.ndim != 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        if (counts < 0).any():
            raise RuntimeError("repeats can not be negative")
        return _leaf(np.repeat(np.arange(len(counts), dtype=np.int64), counts))
    if dim is None:
        x, dim = reshape(input, (-1,)), 0
    else:
        x, dim = input, _wrap_dim(dim, max(input.ndim, 1))
        if x.ndim == 0:
            x = reshape(x, (1,))
    n = x.shape[dim]
    if isinstance(repeats, Tensor):
        if repeats.ndim > 1:
            raise RuntimeError("repeat_interleave only accept 1D vector as repeat")
        counts = _index_np(repeats, "repeat_interleave").reshape(-1)
        if counts.size == 1:
            counts = np.repeat(counts, n)
        elif counts.size != n:
            raise RuntimeError(f"repeats must have the same size as input along dim, but got "
                               f"repeats.size(0) = {counts.size} and input.size({dim}) = {n}")
    else:
        if int(repeats) < 0:
            raise RuntimeError("Repeats must be non-negative")
        counts = np.full(n, int(repeats), np.int64)
    if (counts < 0).any():
        raise RuntimeError("repeats can not be negative")
    idx = np.repeat(np.arange(n), counts)
    return composite("IndexSelectBackward0", lambda: _select_along(x, dim, idx), input)


# -- einsum --------------------------------------------------------------------------------------
def _subscript(n):
    """A sublist's subscript as an equation's letter, as PyTorch's: 0-25 ``A``-``Z``,
    26-51 ``a``-``z``, ``...`` for ``Ellipsis``."""
    if n is Ellipsis:
        return "..."
    if 0 <= n < 26:
        return chr(ord("A") + n)
    if 26 <= n < 52:
        return chr(ord("a") + n - 26)
    raise ValueError("einsum(): subscript in subscript list is not within the valid range "
                     "[0, 52)")


def _sublist_form(args):
    """``einsum(op1, sublist1, op2, sublist2, ..., [out])`` as (equation, operands)."""
    equation = ",".join("".join(map(_subscript, sub)) for sub in args[1::2])
    if len(args) % 2:
        return equation + "->" + "".join(map(_subscript, args[-1])), args[:-1:2]
    return equation, args[::2]


def einsum(equation, *operands):
    """Einstein summation: each operand's dims permuted into one order of all letters (1
    where it lacks one), multiplied with broadcasting, the letters not in the output summed.
    Repeated letters in one operand take its diagonal; ``...`` broadcasts.  Given a tensor
    first, the arguments are the sublist form, read into an equation as PyTorch reads it."""
    if isinstance(equation, Tensor):
        equation, operands = _sublist_form((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the "
                           "equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the "
                           "equation")
    for ch in eq:
        if not (ch.isalpha() or ch in ",->."):
            raise RuntimeError(f"einsum(): invalid subscript given at index {eq.index(ch)} in "
                               f"the equation string, subscripts must be in [a-zA-Z]")
    n_ell = 0
    for term, op in zip(terms, operands):
        letters = len(term.replace("...", ""))
        if "..." in term:
            if letters > op.ndim:
                raise RuntimeError(f"einsum(): the number of subscripts in the equation "
                                   f"({letters}) is more than the number of dimensions "
                                   f"({op.ndim}) for operand {terms.index(term)}")
            n_ell = max(n_ell, op.ndim - letters)
        elif letters != op.ndim:
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({letters}) "
                               f"does not match the number of dimensions ({op.ndim}) for "
                               f"operand {terms.index(term)} and no ellipsis was given")
    ell = [chr(0x100 + k) for k in range(n_ell)]           # labels of the ellipsis dims

    def labels(term, ndim):
        if "..." not in term:
            return list(term)
        a, _, b = term.partition("...")
        k = ndim - len(a) - len(b)
        return list(a) + ell[n_ell - k:] + list(b)
    subs = [labels(t, op.ndim) for t, op in zip(terms, operands)]
    if arrow:
        out = labels(rhs, n_ell + len(rhs.replace("...", ""))) if "..." in rhs else list(rhs)
        if "..." not in rhs:
            out = list(rhs)
        for ch in out:
            if ch not in ell and not any(ch in s for s in subs):
                raise RuntimeError(f"einsum(): output subscript {ch} does not appear in the "
                                   "equation for any input operand")
        if len(set(out)) != len(out):
            raise RuntimeError("einsum(): output subscript appears more than once in the output")
    else:
        counts = collections.Counter(ch for s in subs for ch in s if ch not in ell)
        out = ell + sorted((ch for ch in counts if counts[ch] == 1),
                           key=lambda c: (c.islower(), c))
    every = list(out) + sorted({ch for s in subs for ch in s} - set(out))
    contracted = len(every) - len(out)

    def body():
        total = None
        for number, (s, op) in enumerate(zip(subs, operands)):
            x, s = op, list(s)
            while len(set(s)) != len(s):                     # a repeated letter: diagonal
                ch = next(c for c in s if s.count(c) > 1)
                i = s.index(ch)
                j = s.index(ch, i + 1)
                if x.shape[i] != x.shape[j]:
                    raise RuntimeError(f"einsum(): subscript {ch} is repeated for operand "
                                       f"{number} but the sizes "
                                       f"don't match, {x.shape[i]} != {x.shape[j]}")
                rest = [k for k in range(len(s)) if k not in (i, j)]
                x = permute(x, rest + [i, j])
                ar = _const(np.arange(x.shape[-1]))
                x = getitem(x, (Ellipsis, ar, ar))
                s = [s[k] for k in rest] + [ch]
            order = sorted(range(len(s)), key=lambda k: every.index(s[k]))
            if order != list(range(len(s))):
                x = permute(x, order)
            present = [s[k] for k in order]
            shape = [x.shape[present.index(ch)] if ch in present else 1 for ch in every]
            x = reshape(x, tuple(shape))
            total = x if total is None else total * x
        if contracted:
            total = _sum(total, tuple(range(len(out), len(every))))
        return total
    return body()


# -- cross ---------------------------------------------------------------------------------------
def _cross(input, other, dim):
    a = expand(input, _bshape(input, other))
    b = expand(other, _bshape(input, other))
    p, q = np.array([1, 2, 0]), np.array([2, 0, 1])
    return _select_along(a, dim, p) * _select_along(b, dim, q) - \
        _select_along(a, dim, q) * _select_along(b, dim, p)


def _bshape(a, b):
    return tuple(np.broadcast_shapes(tuple(a.shape), tuple(b.shape)))


def linalg_cross(input, other, *, dim=-1):
    """The cross product of 3-vectors along ``dim`` (inputs broadcast)."""
    if input.ndim != other.ndim:
        raise RuntimeError("linalg.cross: inputs must have the same number of dimensions.")
    shape = _bshape(input, other)
    d = _wrap_dim(dim, len(shape))
    n_a = input.shape[d - len(shape) + input.ndim] if d - len(shape) + input.ndim >= 0 else 1
    n_b = other.shape[d - len(shape) + other.ndim] if d - len(shape) + other.ndim >= 0 else 1
    if n_a != 3 or n_b != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got "
                           f"{n_a} and {n_b}")
    return composite("LinalgCrossBackward0", lambda: _cross(input, other, d), input, other)


def cross(input, other, dim=None):
    """``linalg.cross``; without ``dim`` the first dim of length 3 (deprecated, warns)."""
    if dim is None:
        warnings.warn("Using torch.cross without specifying the dim arg is deprecated.\n"
                      "Please either pass the dim explicitly or simply use torch.linalg.cross."
                      "\nThe default value of dim will change to agree with that of "
                      "linalg.cross in a future release.", UserWarning, stacklevel=2)
        shape = _bshape(input, other)
        dim = next((k for k, n in enumerate(shape) if n == 3), None)
        if dim is None:
            raise RuntimeError("no dimension of size 3 in input")
    return linalg_cross(input, other, dim=dim)


# -- triangles, diagonals ------------------------------------------------------------------------
def _triangle(name, input, diagonal, keep):
    if input.ndim < 2:
        raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
    r, c = input.shape[-2:]
    mask = keep(np.arange(r)[:, None] + diagonal, np.arange(c)[None, :])
    node = "TrilBackward0" if name == "tril" else "TriuBackward0"
    return composite(node, lambda: masked_fill(input, _const(~mask), 0), input)


def tril(input, diagonal=0):
    """The lower triangle (entries with ``col - row <= diagonal``), the rest 0."""
    return _triangle("tril", input, diagonal, lambda i, j: j <= i)


def triu(input, diagonal=0):
    """The upper triangle (entries with ``col - row >= diagonal``), the rest 0."""
    return _triangle("triu", input, diagonal, lambda i, j: j >= i)


def diag(input, diagonal=0):
    """A 1-D tensor put on a diagonal of a square matrix, or a matrix's diagonal."""
    if input.ndim == 1:
        return diag_embed(input, diagonal, 0, 1)
    if input.ndim == 2:            # (a copy, as PyTorch's: not a view)
        return _diagonal_of(input, diagonal, 0, 1, "DiagonalBackward0_copy")
    raise RuntimeError("diag(): Supports 1D or 2D tensors. Got " + f"{input.ndim}D")


def diag_embed(input, offset=0, dim1=-2, dim2=-1):
    """The last dim of ``input`` put on the diagonal ``offset`` of square matrices over the
    new dims ``dim1``, ``dim2``, zeros elsewhere: a gather from the input padded with a
    zero."""
    d1, d2 = _wrap_dim(dim1, input.ndim + 1), _wrap_dim(dim2, input.ndim + 1)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    n = input.shape[-1]
    m = n + abs(offset)
    pos = np.zeros((m, m), np.int64)
    k = np.arange(n)
    r, c = (k, k + offset) if offset >= 0 else (k - offset, k)
    pos[r, c] = k + 1

    def body():
        padded = cat([zeros(tuple(input.shape[:-1]) + (1,), dtype=input.dtype), input], -1)
        out = getitem(padded, (Ellipsis, _const(pos)))
        return movedim(out, (-2, -1), (d1, d2)) if (d1, d2) != (input.ndim - 1, input.ndim) \
            else out
    return composite("DiagEmbedBackward0", body, input)


def diagonal(input, offset=0, dim1=0, dim2=1):
    """The diagonal ``offset`` of the matrices over dims ``dim1``, ``dim2``, as the last
    dim: a view, as PyTorch's."""
    d1, d2 = _wrap_dim(dim1, input.ndim), _wrap_dim(dim2, input.ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return views.mark(_diagonal_of(input, offset, d1, d2, "DiagonalBackward0"), input,
                      _diagonal_again, (offset, d1, d2))


def _diagonal_again(base, arg):
    return diagonal(base, *arg)


def _diagonal_of(input, offset, d1, d2, node):
    """The diagonal as one strided ``gather`` entry, shown as Node ``node``."""
    value = np.diagonal(input._arr, offset, d1, d2)
    cs = contiguous_strides(input.shape)
    strides = tuple(s for k, s in enumerate(cs) if k not in (d1, d2)) + (cs[d1] + cs[d2],)
    first = offset * cs[d2] if offset >= 0 else -offset * cs[d1]
    return composite(node, lambda: _out(input, value, lambda t, ia: gather_entry(
        t, ia, value, strides, first if value.size else 0, CODE["select"])), input)


def tensordot(a, b, dims=2):
    """The sum over ``dims`` (the last n of a with the first n of b, or two lists): both
    permuted and reshaped to matrices, one product, reshaped back."""
    if isinstance(dims, (int, np.integer)):
        da, db = list(range(-dims, 0)), list(range(dims))
    else:
        da, db = ([d] if isinstance(d, (int, np.integer)) else list(d) for d in dims)
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size "
                               f"{a.shape[x]} in dim {x} and second has size {b.shape[y]} in "
                               f"dim {y}")
    da, db = [_wrap_dim(d, a.ndim) for d in da], [_wrap_dim(d, b.ndim) for d in db]
    free_a = [d for d in range(a.ndim) if d not in da]
    free_b = [d for d in range(b.ndim) if d not in db]
    k, m, n = (math.prod(s[d] for d in ds) for s, ds in ((a.shape, da), (a.shape, free_a),
                                                           (b.shape, free_b)))
    x = reshape(permute(a, free_a + da), (m, k))      # (sizes spelled out: with one of
    y = reshape(permute(b, db + free_b), (k, n))      # them 0, -1 would be ambiguous)
    return reshape(x @ y, tuple(a.shape[d] for d in free_a) + tuple(b.shape[d] for d in free_b))


def inner(input, other):
    """The sum of products over the last dims (a product where one is 0-d)."""
    if input.ndim == 0 or other.ndim == 0:
        return input * other
    if input.shape[-1] != other.shape[-1]:
        raise RuntimeError(f"inner() the last dimension must match on both input tensors but "
                           f"got shapes {list(input.shape)} and {list(other.shape)}")
    return tensordot(input, other, ([-1], [-1]))


def kron(input, other):
    """The Kronecker product: each entry of input times all of other, in blocks."""
    nd = max(input.ndim, other.ndim)
    sa = (1,) * (nd - input.ndim) + tuple(input.shape)
    sb = (1,) * (nd - other.ndim) + tuple(other.shape)
    x = reshape(input, tuple(v for n in sa for v in (n, 1)))
    y = reshape(other, tuple(v for n in sb for v in (1, n)))
    return composite("UnsafeViewBackward0", lambda: reshape(
        x * y, tuple(p * q for p, q in zip(sa, sb))), input, other)


# -- views ---------------------------------------------------------------------------------------
def movedim(input, source, destination):
    """Dims ``source`` moved to positions ``destination``, the others in order."""
    src = (source,) if isinstance(source, (int, np.integer)) else tuple(source)
    dst = (destination,) if isinstance(destination, (int, np.integer)) else tuple(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: Invalid source or destination dims: source ({list(src)} "
                           f"dims) should contain the same number of dims as destination "
                           f"({list(dst)} dims)")
    nd = input.ndim
    src = [_wrap_dim(d, max(nd, 1)) for d in src]
    dst = [_wrap_dim(d, max(nd, 1)) for d in dst]
    if len(set(src)) != len(src):
        raise RuntimeError(f"movedim: repeated dim in `source` ({list(src)})")
    if len(set(dst)) != len(dst):
        raise RuntimeError(f"movedim: repeated dim in `destination` ({list(dst)})")
    if nd == 0:
        return input.view(())
    order = [None] * nd
    for s, d in zip(src, dst):
        order[d] = s
    rest = iter(d for d in range(nd) if d not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute(input, order)


def unflatten(input, dim, sizes):
    """Dim ``dim`` split into ``sizes`` (one may be -1)."""
    dim = _wrap_dim(dim, max(input.ndim, 1))
    sizes = list(sizes)
    if not sizes:
        raise RuntimeError("unflatten: sizes must be non-empty")
    n = input.shape[dim]
    if -1 in sizes:
        known = int(np.prod([s for s in sizes if s != -1]))
        sizes[sizes.index(-1)] = n // known if known else 0
    if int(np.prod(sizes)) != n:
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the "
                           f"size of dim {dim} ({n}) in the input tensor")
    shape = tuple(input.shape[:dim]) + tuple(sizes) + tuple(input.shape[dim + 1:])
    return input.view(shape)


def meshgrid(*tensors, indexing=None):
    """Coordinate grids: tensor i expanded along output dim i ('ij'), the first two
    swapped for 'xy'."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing is None:
        warnings.warn("torch.meshgrid: in an upcoming release, it will be required to pass "
                      "the indexing argument.", UserWarning, stacklevel=2)
        indexing = "ij"
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f"torch.meshgrid: indexing must be one of \"xy\" or \"ij\", but "
                           f"received: {indexing}")
    for t in tensors:
        if t.ndim > 1:
            raise RuntimeError("torch.meshgrid: Expected 0D or 1D tensor in the tensor list "
                               f"but got: {t}")
    sizes = [t.numel() for t in tensors]
    pos = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        pos[0], pos[1] = 1, 0
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for t, p in zip(tensors, pos):
        shape = [1] * len(tensors)
        shape[p] = -1
        out.append(expand(t.view(tuple(shape)), tuple(sizes)))
    return tuple(out)


# -- new tensors ---------------------------------------------------------------------------------
def type_as(self, other):
    return self.to(other.dtype)


def new_empty(self, *size, dtype=None, device=None, requires_grad=False, layout=None,
              pin_memory=False):
    return zeros(*size, dtype=dtype or self.dtype, device=device, requires_grad=requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False, out=None,
             layout=None, pin_memory=False):
    """The integers 0 .. n-1 in random order (int64 unless ``dtype`` says otherwise)."""
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    g = generator if generator is not None else _rng[0]
    d = dtypes.to_np(dtype) or np.int64
    size = _size((int(n),))
    t = _leaf(_allocated(lambda: g.permutation(size[0]), size).astype(d))
    return t.requires_grad_() if requires_grad else t


# -- sorting -------------------------------------------------------------------------------------
def _argsort_np(input, dim, descending):
    freeze(input)
    a = np.asarray(input._arr)
    if a.ndim == 0:
        return np.zeros((), np.int64)
    if not descending:
        return np.argsort(a, axis=dim, kind="stable")
    n = a.shape[dim]
    rev = np.flip(a, axis=dim)
    idx = np.flip(np.argsort(rev, axis=dim, kind="stable"), axis=dim)
    return (n - 1 - idx).astype(np.int64)


def sort(input, dim=-1, descending=False, stable=False):
    """(values, indices) sorted along ``dim``; ties keep their order (stable), nan last
    (first when descending), as PyTorch."""
    if input.ndim == 0:
        return SortResult(input.clone(), _leaf(np.zeros((), np.int64)))
    dim = _wrap_dim(dim, input.ndim)
    idx = _argsort_np(input, dim, descending)
    values = composite("SortBackward0", lambda: _take_along(input, dim, idx), input)
    return SortResult(values, _leaf(idx.astype(np.int64)))


def argsort(input, dim=-1, descending=False, stable=False):
    """The indices that sort along ``dim`` (int64, no graph)."""
    if input.ndim == 0:
        return _leaf(np.zeros((), np.int64))
    dim = _wrap_dim(dim, input.ndim)
    return _leaf(_argsort_np(input, dim, descending).astype(np.int64))


def topk(input, k, dim=-1, largest=True, sorted=True):
    """The ``k`` largest (or smallest) entries along ``dim`` and their indices."""
    d = _wrap_dim(dim, max(input.ndim, 1))
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError("selected index k out of range")
    if input.ndim == 0:
        return TopkResult(input.clone(), _leaf(np.zeros((), np.int64)))
    idx = np.take(_argsort_np(input, d, largest), np.arange(k), axis=d)
    values = composite("TopkBackward0", lambda: _take_along(input, d, idx), input)
    return TopkResult(values, _leaf(idx.astype(np.int64)))


# -- rounding: values with zero gradient ---------------------------------------------------------
def _rounded(name, node, input, fn):
    freeze(input)
    if not input.dtype.is_floating_point:
        return input.clone()
    value = _const(fn(np.asarray(input._arr)).astype(input.dtype.np))
    never = _const(np.zeros(tuple(input.shape), bool))
    return composite(node, lambda: where(never, input, value), input)


def floor(input):
    return _rounded("floor", "FloorBackward0", input, np.floor)


def ceil(input):
    return _rounded("ceil", "CeilBackward0", input, np.ceil)


def round(input, *, decimals=0):
    if decimals:
        return _rounded("round", "RoundBackward1", input, lambda a: np.round(a, decimals))
    return _rounded("round", "RoundBackward0", input, np.round)


# -- tests of values, logical ops (no graph) -----------------------------------------------------
def _values(x):
    if not isinstance(x, Tensor):
        return np.asarray(x)
    freeze(x)
    return np.asarray(x._arr)


def isnan(input):
    return _const(np.isnan(_values(input)))


def isinf(input):
    return _const(np.isinf(_values(input)))


def isfinite(input):
    return _const(np.isfinite(_values(input)))


def logical_not(input):
    return _const(np.logical_not(_values(input)))


def logical_and(input, other):
    return _const(np.logical_and(_values(input), _values(other)))


def logical_or(input, other):
    return _const(np.logical_or(_values(input), _values(other)))


def logical_xor(input, other):
    return _const(np.logical_xor(_values(input), _values(other)))


def nan_to_num(input, nan=0.0, posinf=None, neginf=None):
    """nan, +inf, -inf replaced (by 0, the dtype's largest, its lowest by default); the
    gradient is 1 where the entry is kept, 0 where replaced."""
    if not input.dtype.is_floating_point:
        return input.clone()
    info = np.finfo(input.dtype.np)
    posinf = float(info.max) if posinf is None else posinf
    neginf = float(info.min) if neginf is None else neginf
    a = _values(input)

    def body():
        y = masked_fill(input, _const(np.isnan(a)), nan)
        y = masked_fill(y, _const(np.isposinf(a)), posinf)
        return masked_fill(y, _const(np.isneginf(a)), neginf)
    return composite("NanToNumBackward0", body, input)


def lerp(input, end, weight):
    """``input + weight (end - input)`` (``end - (end - input)(1 - weight)`` where
    ``|weight| >= 0.5``, as PyTorch computes it)."""
    if isinstance(weight, Tensor):
        def body():
            diff = end - input
            small = weight.abs() < 0.5
            return where(small, input + weight * diff, end - diff * (1 - weight))
        return composite("LerpBackward1", body, input, end, weight)
    w = float(weight)

    def body_scalar():
        diff = end - input
        return input + w * diff if abs(w) < 0.5 else end - diff * (1 - w)
    return composite("LerpBackward0", body_scalar, input, end)


# -- special functions ---------------------------------------------------------------------------
_LANCZOS = (0.99999999999980993, 676.5203681218851, -1259.1392167224028,
            771.32342877765313, -176.61502916214059, 12.507343278686905,
            -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7)


_HALF_LOG_2PI = 0.5 * float(np.log(2 * np.pi))
_LOG_PI = float(np.log(np.pi))
_PI = float(np.pi)


def _lgamma_positive(x):
    """log Gamma(x) for x > 0: Lanczos (g = 7) for log Gamma(x + 1), less log x."""
    series = _LANCZOS[0]
    for i, c in enumerate(_LANCZOS[1:], 1):
        series = series + c / (x + i)
    t = x + 7.5
    return _HALF_LOG_2PI + (x + 0.5) * t.log() - t + series.log() - x.log()


def lgamma(input):
    """log |Gamma(x)|: Lanczos for x >= 0, the reflection formula below (composed of
    elementwise ops, so its gradient is the digamma function), with PyTorch's values and
    gradients at the special points: at +-0 Lanczos's ``- log x`` is +inf, slope -1/x =
    -+inf; the reflection takes sin(pi x) of x less its nearest integer (the same
    magnitude), exactly 0 at the poles (the non-positive integers, every float below
    -2**52 among them): +inf there, slope nan (abs'(0) = 0 times inf); at +-inf, where
    Lanczos is inf - inf, ``x * x`` at +inf (+inf, slope +inf) and its square root at
    -inf (+inf, slope 0 * -inf = nan)."""
    if not input.dtype.is_floating_point:
        input = input.to(dtypes.get_default_dtype())
    a = _values(input)
    pos = (a >= 0) & (a < np.inf)
    if pos.all():
        return composite("LgammaBackward0", lambda: _lgamma_positive(input), input)
    inf = np.isinf(a)

    def body():
        xp = where(_const(pos), input, 1.0)
        other = pos | inf
        xn = where(_const(other), 0.5, input)
        nearest = _const(np.round(np.where(other, 0.5, a)))
        sin = (_PI * (xn - nearest)).sin().abs()
        out = where(_const(pos), _lgamma_positive(xp),
                    _LOG_PI - sin.log() - _lgamma_positive(1 - xn))
        if not inf.any():
            return out
        square = where(_const(inf), input, 0.0).square()
        return where(_const(inf), where(_const(a > 0), square, square.sqrt()), out)
    return composite("LgammaBackward0", body, input)


def multigammaln(input, p):
    """The multivariate log-gamma of dimension ``p``:
    ``sum_j lgamma(x - j / 2) + p (p - 1) / 4 log(pi)``."""
    if p < 1:
        raise RuntimeError("p has to be greater than or equal to 1")

    def body():          # (PyTorch 2.13 does not check x > (p - 1) / 2: inf or nan there)
        total = None
        for j in range(p):
            term = lgamma(input - j / 2)
            total = term if total is None else total + term
        return total + p * (p - 1) / 4 * _LOG_PI
    return composite("MvlgammaBackward0", body, input)


# -- elementwise compositions --------------------------------------------------------------------
def _ones_mask(*tensors):
    """A constant all-True mask of the tensors' broadcast shape."""
    return _const(np.ones(np.broadcast_shapes(*(tuple(t.shape) for t in tensors)), bool))


def zero_gradient_to(value, *others):
    """``value``, through a ``where`` that never takes ``others``: they get a zero
    gradient (as PyTorch's Node gives them), and their nan / inf never reach the value."""
    for t in others:
        if isinstance(t, Tensor):
            value = where(_ones_mask(value, t), value, t)
    return value


def addcmul(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 * tensor2`` (integers: value truncated, as PyTorch's)."""
    rd = result_dtype(input, tensor1, tensor2)
    if rd is dtypes.bool_:
        raise NotImplementedError("\"addcmul_cpu_out\" not implemented for 'Bool'")
    if not rd.is_floating_point:
        value = int(value)
    return composite("AddcmulBackward0", lambda: input + value * (tensor1 * tensor2), input,
                     tensor1, tensor2)


def addcdiv(input, tensor1, tensor2, *, value=1):
    """``input + value * tensor1 / tensor2``."""
    if not (tensor1.dtype.is_floating_point or tensor2.dtype.is_floating_point):
        raise RuntimeError("Integer division with addcdiv is no longer supported, and in a "
                           "future  release addcdiv will perform a true division of tensor1 and "
                           "tensor2. The historic addcdiv behavior can be implemented as "
                           "(input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for "
                           "integer inputs and as (input + value * tensor1 / tensor2) for float "
                           "inputs. The future addcdiv behavior is just the latter "
                           "implementation: (input + value * tensor1 / tensor2), for all dtypes.")
    return composite("AddcdivBackward0", lambda: input + value * (tensor1 / tensor2), input,
                     tensor1, tensor2)


def _tensor_args(name, input, other, second="other", number=False):
    """PyTorch's TypeError where its function takes tensors only (``number``: a Python
    number ``other`` too), then its error for shapes that do not broadcast (before the
    values are read: NumPy's error would leak)."""
    for k, (arg, v) in enumerate((("input", input), (second, other))):
        if not isinstance(v, Tensor) and not (k and number and isinstance(v, (int, float))):
            raise TypeError(f"{name}(): argument '{arg}' (position {k + 1}) must be Tensor, "
                            f"not {type(v).__name__}")
    if isinstance(other, Tensor):
        broadcast_shape(tuple(input.shape), tuple(other.shape))


def _logaddexp(name, input, other):
    """The op table's ``logaddexp`` / ``logaddexp2`` of two tensors (PyTorch takes no
    Python number), in their promoted float dtype (PyTorch has no integer kernel)."""
    _tensor_args(name, input, other)
    rd = result_dtype(input, other)
    if not rd.is_floating_point:
        raise NotImplementedError(f'"{name}_cpu" not implemented for '
                                  f"'{dtypes.TORCH_NAMES[rd.name][0]}'")
    input, other = (v if v.dtype is rd else v.to(rd) for v in (input, other))
    return FUNCTIONS[name](input, other)


def logaddexp(input, other):
    return _logaddexp("logaddexp", input, other)


def logaddexp2(input, other):
    return _logaddexp("logaddexp2", input, other)


def sgn(input):
    """The sign (of real tensors; tapegrad has no complex ones): zero gradient; a bool
    is its own sign."""
    if input.dtype is dtypes.bool_:
        return input.clone()
    return composite("SgnBackward0", lambda: input.sign(), input)


def copysign(input, other):
    """``|input|`` with the sign bit of ``other`` (a float result).  The gradient is
    PyTorch's, result / input, 0 at 0: input's sign times the result's, nan at an
    infinite or nan input (there ``|input|`` is ``hypot(input, 0)``, whose gradient
    input / |input| is nan; its input elsewhere 1, so its unselected side gets no nan
    from 0 / 0); 0 to ``other``."""
    _tensor_args("copysign", input, other, number=True)
    rd = result_dtype(input, other)
    rd = rd if rd.is_floating_point else dtypes.get_default_dtype()
    if input.dtype is not rd:
        input = input.to(rd)
    negative = _const(np.signbit(_values(other)))
    nonfinite = _const(~np.isfinite(_values(input)))

    def body():
        a = where(nonfinite, FUNCTIONS["hypot"](where(nonfinite, input, 1.0), 0.0), input.abs())
        return zero_gradient_to(where(negative, -a, a), other)
    node = "CopysignBackward0" if isinstance(other, Tensor) else "CopysignBackward1"
    return composite(node, body, input, *([other] if isinstance(other, Tensor) else []))


def heaviside(input, values):
    """0 below 0, 1 above, ``values`` at 0 (same dtypes: PyTorch's error otherwise); no
    derivative (backward through it raises, as PyTorch's)."""
    _tensor_args("heaviside", input, values, "values")
    if input.dtype is not values.dtype:
        raise RuntimeError("heaviside is not yet implemented for tensors with different dtypes.")
    a, v = _values(input), _values(values)
    out = _const(np.where(a == 0, v, (a > 0).astype(a.dtype)).astype(a.dtype))
    return NoDerivative.apply(out, "heaviside", input, values)


def _fmax_fmin(name, input, other, pick):
    """The larger / smaller where neither is nan, else the one that is not (nan if both):
    ``where`` on a mask of the values, a tie's gradient all to ``input``, as PyTorch's."""
    _tensor_args(name, input, other)
    a, b = _values(input), _values(other)
    take_input = _const(pick(a, b) | np.isnan(b))
    return composite(f"{name.capitalize()}Backward0", lambda: where(take_input, input, other),
                     input, other)


def fmax(input, other):
    return _fmax_fmin("fmax", input, other, np.greater_equal)


def fmin(input, other):
    return _fmax_fmin("fmin", input, other, np.less_equal)


addcmul_, addcdiv_, copysign_, sgn_, heaviside_ = map(
    _inplace_form, (addcmul, addcdiv, copysign, sgn, heaviside))


def diff(input, n=1, dim=-1, prepend=None, append=None):
    """The ``n``-th forward difference along ``dim`` (after ``prepend`` and ``append`` are
    put at its ends); ``!=`` for bools, as PyTorch's."""
    if input.ndim == 0:
        raise RuntimeError("diff expects input to be at least one-dimensional")
    if any(t is not None and t.ndim != input.ndim for t in (prepend, append)):
        raise RuntimeError("diff expects prepend or append to be the same dimension as input")
    if n < 0:
        raise RuntimeError(f"order must be non-negative but got {n}")
    if n == 0:
        return input.clone()
    dim = _wrap_dim(dim, input.ndim)
    x = cat([t for t in (prepend, input, append) if t is not None], dim) \
        if prepend is not None or append is not None else input
    for _ in range(n):
        length = x.shape[dim]
        if length == 0:
            break
        hi, lo = x.narrow(dim, 1, length - 1), x.narrow(dim, 0, length - 1)
        x = hi != lo if x.dtype is dtypes.bool_ else hi - lo
    return x
