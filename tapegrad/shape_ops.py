"""Shape ops, indexing, cat / stack / split.

Every view-like op is recorded as one ``gather`` entry (output element k reads the
input at base + strided offset), ``reshape`` entry (same elements, new shape) or
``index`` entry (an explicit list of input offsets, for advanced indexing).  Values are
copied: tapegrad tensors do not share storage.
"""
import builtins
import math
import re
import warnings

import numpy as np

from . import views
from .dtypes import dtype, uint8
from .grad_mode import STATE
from .ops.table import CODE
from .record import contiguous, contiguous_strides, expand_strides, gather
from .record import reshape as rec_reshape
from .tensor import Size, Tensor, _leaf, _norm, _result, buf, recording, requires_grad
from .tracing import freeze


def _out(x, value, build):
    """Result tensor of a structural op on ``x``: ``build(t, ia)`` records the entry."""
    value = contiguous(value)
    if value.base is not None:     # a view of x's (or another) array: own the values
        value = value.copy()
    t = recording(x) if value.dtype.kind == "f" else None
    if t is None:
        if STATE.trace is not None:
            freeze(x)            # a traced mask's count, shape, ...: a constant, guarded
        return _leaf(_norm(value))
    i = build(t, buf(t, x, False))
    return _result(_norm(value), t, i, x._rg)


# how a reshape shares x's storage: always (squeeze, unsqueeze and a view made again),
# where PyTorch's view can (reshape, flatten: else a copy), must (view: else its error),
# or never (repeat's result: a copy, as PyTorch's)
SHARE, RESHAPE, VIEW, COPY = 0, 1, 2, 3


def _reshaped(x, shape, code=CODE["view"], how=SHARE):
    arr = x._arr
    if any(n < 0 for n in shape):
        _check_inferred(shape, arr.size)
    try:
        value = arr.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {arr.size}") \
            from None
    shared = (value.base is not None or not value.size) and how != COPY
    if shared and how != SHARE and not views.viewable_as(x, value.shape):
        if how == VIEW:
            raise RuntimeError("view size is not compatible with input tensor's size and stride "
                               "(at least one dimension spans across two contiguous subspaces). "
                               "Use .reshape(...) instead.")
        shared = False
    out = _out(x, value, lambda t, ia: rec_reshape(t, ia, value, code))
    return views.mark(out, x, _reshaped_again, (shape, code)) if shared else out


def _check_inferred(shape, numel):
    """PyTorch's errors for a shape with negative sizes (-1 once: inferred)."""
    inferred = None
    for k, n in enumerate(shape):
        if n == -1:
            if inferred is not None:
                raise RuntimeError("only one dimension can be inferred")
            inferred = k
        elif n < 0:
            raise RuntimeError(f"invalid shape dimension {n} at index {k} of shape {list(shape)}")
    if inferred is not None and numel == 0 and 0 in shape:
        raise RuntimeError(f"cannot reshape tensor of 0 elements into shape {list(shape)} because "
                           "the unspecified dimension size -1 can be any value and is ambiguous")


def _unique_dims(dims):
    """PyTorch's error for a dim named twice (``dims`` wrapped)."""
    for k, d in enumerate(dims):
        if d in dims[:k]:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")


# how each view is made again from its base (``views``: refresh, positions)
def _reshaped_again(b, arg):
    return _reshaped(b, *arg)


def _transposed_again(b, arg):
    return _transposed(b, *arg)


def _select_again(b, key):
    return _select_row(b, b._d, key)


def _piece_again(b, arg):
    dim, bounds, code, k = arg
    return _pieces(b, dim, bounds, code)[k]


views.MULTI_OUTPUT.add(_piece_again)


def _dims(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list, Size)):
        return tuple(shape[0])
    return tuple(int(s) for s in shape)


def _wrap_dim(dim, ndim):
    n = max(ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-n}, {n - 1}], "
                         f"but got {dim})")
    return dim % n


def reshape(input, *shape):
    return _reshaped(input, _dims(shape), how=RESHAPE)


def view(input, *shape):
    if len(shape) == 1 and isinstance(shape[0], dtype):
        raise NotImplementedError(
            f"view({shape[0]}): reading a tensor's bits as another dtype is not supported by "
            "tapegrad; .to(dtype) converts the values")
    return _reshaped(input, _dims(shape), how=VIEW)


def flatten(input, start_dim=0, end_dim=-1):
    s = input.shape
    a, b = _wrap_dim(start_dim, len(s)), _wrap_dim(end_dim, len(s))
    if a > b:
        raise RuntimeError("flatten() has invalid args: start_dim cannot come after end_dim")
    if not s:
        return _reshaped(input, (1,))
    return _reshaped(input, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:], how=RESHAPE)


def squeeze(input, dim=None):
    s = input.shape
    if dim is None:
        new = tuple(d for d in s if d != 1)
    else:
        dims = [_wrap_dim(d, len(s)) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))]
        _unique_dims(dims)
        new = tuple(d for k, d in enumerate(s) if not (k in dims and d == 1))
    return _reshaped(input, new, CODE["squeeze" if dim is None else "squeeze_dim"])


def unsqueeze(input, dim):
    s = input.shape
    dim = _wrap_dim(dim, len(s) + 1)
    return _reshaped(input, s[:dim] + (1,) + s[dim:], CODE["unsqueeze"])


def expand(input, *sizes):
    sizes = _dims(sizes)
    s = input.shape
    lead = len(sizes) - len(s)
    if lead < 0:
        raise RuntimeError(f"expand({_type_name(input)}{{{list(s)}}}, size={list(sizes)}): the "
                           f"number of sizes provided ({len(sizes)}) must be greater or equal to "
                           f"the number of dimensions in the tensor ({len(s)})")
    for k in range(lead):
        if sizes[k] < 0:
            raise RuntimeError(f"The expanded size of the tensor ({sizes[k]}) isn't allowed in a "
                               f"leading, non-existing dimension {k}")
    out = tuple(s[k - lead] if (n == -1 and k >= lead) else n for k, n in enumerate(sizes))
    for k in reversed(range(len(s))):          # (PyTorch names the last mismatch)
        if s[k] != 1 and s[k] != out[k + lead]:
            raise RuntimeError(f"The expanded size of the tensor ({out[k + lead]}) must match the "
                               f"existing size ({s[k]}) at non-singleton dimension {k + lead}.  "
                               f"Target sizes: {list(sizes)}.  Tensor sizes: {list(s)}")
    value = np.broadcast_to(input._arr, out)
    strides = expand_strides(s, out)
    return views.mark(_out(input, value, lambda t, ia: gather(t, ia, value, strides)), input,
                      expand, out)


def _type_name(x):
    """PyTorch's legacy name of a CPU tensor's type (in expand's message)."""
    if x.dtype.name == "bool":
        return "CPUBoolType"
    from .dtypes import TORCH_NAMES
    return f"torch.{TORCH_NAMES[x.dtype.name][0]}Tensor"


def broadcast_to(input, size):
    return expand(input, *size)


def expand_as(input, other):
    return expand(input, *other.shape)


def permute(input, *dims):
    dims = _dims(dims)
    if len(dims) != input.ndim:
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does "
                           "not match the length of the desired ordering of dimensions i.e. "
                           f"input.dim() = {input.ndim} is not equal to len(dims) = {len(dims)}")
    dims = tuple(_wrap_dim(d, input.ndim) for d in dims)
    if len(set(dims)) != len(dims):
        raise RuntimeError("permute(): duplicate dims are not allowed.")
    return _transposed(input, dims, CODE["permute"])


def _transposed(x, dims, code):
    cs = contiguous_strides(x.shape)
    value = np.transpose(x._arr, dims)
    strides = tuple(cs[d] for d in dims)
    return views.mark(_out(x, value, lambda t, ia: gather(t, ia, value, strides, 0, code)), x,
                      _transposed_again, (dims, code))


def transpose(input, dim0, dim1):
    nd = input.ndim
    dims = list(range(nd))
    a, b = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
    if nd:                            # (a 0-d tensor takes dims 0 and -1)
        dims[a], dims[b] = dims[b], dims[a]
    return _transposed(input, tuple(dims), CODE["transpose"])


def t(input):
    if input.ndim > 2:
        raise RuntimeError(f"t() expects a tensor with <= 2 dimensions, but self is {input.ndim}D")
    return _transposed(input, tuple(reversed(range(input.ndim))), CODE["t"])


def _is_advanced(key):
    comps = key if isinstance(key, tuple) else (key,)
    return any(isinstance(k, (list, np.ndarray, Tensor, bool)) for k in comps)


def _np_key(key):
    if isinstance(key, tuple):
        return tuple(_np_key(k) for k in key)
    if isinstance(key, Tensor):
        return key._arr
    return key


SEQUENCE_KEY = (
    "Using a non-tuple sequence for multidimensional indexing is deprecated and will be "
    "changed in pytorch 2.9; use x[tuple(seq)] instead of x[seq]. In pytorch 2.9 this will be "
    "interpreted as tensor index, x[torch.tensor(seq)], which will result either in an error "
    "or a different result")


def legacy_key(key):
    """PyTorch's reading of a list key: a tuple of indices if it holds a slice, None,
    Ellipsis or a sequence (and has fewer than 32 items), with its deprecation warning;
    else an index list."""
    if key.__class__ is list and len(key) < 32 and any(
            k is None or k is Ellipsis or isinstance(k, (slice, list, tuple, Tensor, np.ndarray))
            for k in key):
        warnings.warn(SEQUENCE_KEY, UserWarning, stacklevel=3)
        return tuple(key)
    return key


UINT8_KEY = ("indexing with dtype torch.uint8 is now deprecated, please use a dtype torch.bool "
             "instead.")


def byte_masks(key):
    """PyTorch's reading of a uint8 tensor in a key: a mask (its nonzero elements), with
    its deprecation warning, never a tensor of positions."""
    comps = key if isinstance(key, tuple) else (key,)
    if not any(k.__class__ is Tensor and k.dtype is uint8 for k in comps):
        return key
    warnings.warn(UINT8_KEY, UserWarning, stacklevel=3)
    comps = tuple(k.ne(0) if k.__class__ is Tensor and k.dtype is uint8 else k for k in comps)
    return comps if isinstance(key, tuple) else comps[0]


def getitem(x, key):
    d = x._d
    if key.__class__ is list:
        key = legacy_key(key)
    if key.__class__ is int and d.__class__ is np.ndarray and d.ndim:
        return _select_row(x, d, key)
    if x.ndim == 0 and not (key is None or key is Ellipsis or
                            (isinstance(key, tuple) and all(k is None or k is Ellipsis
                                                            for k in key))):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    key = byte_masks(key)
    if STATE.trace is not None:      # positions chosen by traced values (a mask): guarded
        freeze(*(key if isinstance(key, tuple) else (key,)))
    nkey = _np_key(key)
    advanced = _is_advanced(key)
    if not advanced:
        nkey = nkey if isinstance(nkey, tuple) else (nkey,)
    for k in (nkey if isinstance(nkey, tuple) else (nkey,)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("slice step cannot be zero" if k.step == 0 else
                             "step must be greater than zero")
    arr = contiguous(x._arr)
    try:
        value = arr[nkey]
    except (IndexError, OverflowError) as e:      # (OverflowError: an int past C's long)
        raise _index_error(x, key, e) from None
    if not advanced and recording(x) is None:   # nothing to record: the values alone
        return views.mark(_out(x, value, None), x, getitem, key)
    if advanced:
        pos = _torch_order_index(np.arange(arr.size, dtype=np.int64).reshape(arr.shape), nkey)
        value = _torch_order_index(arr, nkey)
        pos = pos.reshape(-1)
        return _out(x, value, lambda t, ia: t.append(CODE["index"], ia, -1,
                                                     contiguous(value), pos))
    return views.mark(_basic_chain(x, nkey), x, getitem, key)


def _index_error(x, key, error):
    """PyTorch's IndexError for a key NumPy refused (``error``); its ValueError for a
    Python int past int64 (PyTorch reads each as a C long long)."""
    comps = key if isinstance(key, tuple) else (key,)
    if any(isinstance(k, int) and not -2 ** 63 <= k < 2 ** 63 for k in comps):
        return ValueError("Overflow when unpacking long long")
    arrays = []
    for k in comps:
        if k is None or k is Ellipsis or isinstance(k, (bool, np.bool_, int, np.integer, slice)):
            arrays.append(None)
        elif isinstance(k, Tensor):
            if k.dtype.is_floating_point:
                return IndexError("tensors used as indices must be long, int, byte or bool "
                                  "tensors")
            arrays.append(k._arr)
        elif isinstance(k, (list, tuple, np.ndarray)):
            try:
                arrays.append(np.asarray(k))
            except ValueError:
                return IndexError(str(error).replace("axis", "dimension"))
        else:
            return IndexError("only integers, slices (`:`), ellipsis (`...`), None and long or "
                              f"byte Variables are valid indices (got {type(k).__name__})")
    nd = x.ndim
    used = builtins.sum((a.ndim if a.dtype == np.bool_ else 1) if a is not None else
                        int(k is not None and k is not Ellipsis and
                            not isinstance(k, (bool, np.bool_)))
                        for k, a in zip(comps, arrays))
    if used > nd:
        return IndexError(f"too many indices for tensor of dimension {nd}")
    axis, ordinal, position, shapes = 0, 0, {}, []
    for k, a in zip(comps, arrays):
        if k is Ellipsis:
            axis += nd - used
        elif a is not None and a.dtype == np.bool_:
            for j in range(a.ndim):
                if a.shape[j] != x.shape[axis + j]:
                    return IndexError(f"The shape of the mask {list(a.shape)} at index {j} does "
                                      f"not match the shape of the indexed tensor "
                                      f"{list(x.shape)} at index {axis + j}")
            shapes += [(int(a.sum()),)] * a.ndim
            axis, ordinal = axis + a.ndim, ordinal + a.ndim
        elif a is not None:
            position[axis] = ordinal          # PyTorch names an index tensor's dim by its
            shapes.append(a.shape)            # place among the index tensors
            axis, ordinal = axis + 1, ordinal + 1
        elif k is not None and not isinstance(k, (bool, np.bool_)):
            axis += 1
    try:
        np.broadcast_shapes(*shapes)
    except ValueError:
        return IndexError("shape mismatch: indexing tensors could not be broadcast together with "
                          f"shapes {', '.join(str(list(s)) for s in shapes)}")
    m = re.fullmatch(r"index (-?\d+) is out of bounds for axis (\d+) with size (\d+)", str(error))
    if m:
        return IndexError(f"index {m[1]} is out of bounds for dimension "
                          f"{position.get(int(m[2]), int(m[2]))} with size {m[3]}")
    return IndexError(str(error).replace("axis", "dimension"))


def _select_row(x, d, key):
    """``x[i]``, an element of a vector or a row of an array: the common case of code
    that loops over an array, recorded directly as one select entry (the general path
    took 18 us for a row of a (22, 3, 3) tensor)."""
    n = d.shape[0]
    k = key + n if key < 0 else key
    if not 0 <= k < n:
        raise _index_error(x, key, IndexError(f"index {key} is out of bounds for axis 0 with "
                                              f"size {n}"))
    value = contiguous(d)[k:k + 1].reshape(d.shape[1:])
    strides = contiguous_strides(d.shape[1:])
    return views.mark(_out(x, value, lambda t, ia: gather(t, ia, value, strides, k * value.size,
                                                          CODE["select"])),
                      x, _select_again, key)


def _torch_order_index(a, key):
    """``a[key]`` with PyTorch's order for a key mixing integers and index arrays: the
    integers select first (NumPy would treat them as advanced indices too)."""
    comps = key if isinstance(key, tuple) else (key,)
    ints = [isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in comps]
    if not any(ints):
        return a[key]
    first = tuple(k if is_int else (k if k is Ellipsis else slice(None))
                  for k, is_int in zip(comps, ints) if k is not None)
    rest = tuple(k for k, is_int in zip(comps, ints) if not is_int)
    return a[first][rest]


def _basic_chain(x, key):
    """Basic indexing as PyTorch records it: one select / slice / unsqueeze per
    non-trivial component, left to right (``x[1, 2]`` is select then select)."""
    n_real = sum(1 for k in key if k is not None and k is not Ellipsis)
    dim = 0
    out = x
    for k in key:
        if k is Ellipsis:
            dim += x.ndim - n_real
            continue
        arr = contiguous(out._arr)
        lead = (slice(None),) * dim
        if k is None:
            out = _basic(out, arr, arr[lead + (None, Ellipsis)], CODE["unsqueeze"])
            dim += 1
        elif isinstance(k, slice):
            if k != slice(None) and k.indices(arr.shape[dim]) != (0, arr.shape[dim], 1):
                out = _basic(out, arr, arr[lead + (k, Ellipsis)], CODE["slice"])
            dim += 1
        else:
            out = _basic(out, arr, arr[lead + (int(k), Ellipsis)], CODE["select"])
    if out is x:                     # x[:] or x[...]: still a new tensor, as in PyTorch
        arr = contiguous(x._arr)
        out = _basic(x, arr, arr[...], CODE["slice"])
    return out


def _basic(x, arr, view, code, group=()):
    """A basic-indexing view: base offset and element strides relative to x."""
    itemsize = arr.itemsize
    if view.size and arr.size:
        start = (view.__array_interface__["data"][0] - arr.__array_interface__["data"][0])
        base = start // itemsize
    else:
        base = 0
    strides = tuple(s // itemsize for s in view.strides)
    # the kernel trusts these offsets: check the view lies inside x
    lo = base + sum(s * (n - 1) for s, n in zip(strides, view.shape) if s < 0 and n)
    hi = base + sum(s * (n - 1) for s, n in zip(strides, view.shape) if s > 0 and n)
    if view.size and not (0 <= lo and hi < arr.size and np.may_share_memory(view, arr)):
        raise RuntimeError(f"internal error: index view outside its tensor ({lo}, {hi})")
    return _out(x, view, lambda t, ia: gather(t, ia, view, strides + group, base, code))


def _pieces(x, dim, bounds, code):
    dim = _wrap_dim(dim, x.ndim)
    arr = contiguous(x._arr)
    if dim == 0 and code == _UNBIND:
        return _rows(x, arr, bounds)
    out = []
    first = None
    for k, (a, b) in enumerate(bounds):
        idx = [slice(None)] * x.ndim
        idx[dim] = a if code == CODE["unbind"] else slice(a, b)
        # the pieces show as one Node, output k: (first piece's entry, k) after the strides
        group = (-1, k) if first is None else (first._i, k)
        piece = _basic(x, arr, arr[tuple(idx) + (Ellipsis,)], code, group)  # ...: a 0-d view, not a copy
        if first is None and piece._t is not None:
            first = piece
        out.append(views.mark(piece, x, _piece_again, (dim, bounds, code, k)))
    return tuple(out)


_UNBIND = CODE["unbind"]


def _rows(x, arr, bounds):
    """``unbind(x, 0)`` (iterating a vector or a batch), recorded as ``_pieces`` records
    it, without NumPy view arithmetic per row: row k is the block at k * m of x's
    contiguous values.  The rows of a float64 vector are Python floats (the scalar fast
    path)."""
    rest = arr.shape[1:]
    m = math.prod(rest)
    strides = contiguous_strides(rest)
    if arr.ndim == 1 and arr.dtype == np.float64:
        values = arr.tolist()
    else:
        values = [_norm(np.array(r)) for r in arr]
    t = recording(x) if arr.dtype.kind == "f" else None
    if t is None:
        if STATE.trace is not None:
            freeze(x)
        pieces = [_leaf(v) for v in values]
    else:
        rg = x._rg
        first = t.append_rows(_UNBIND, buf(t, x, False), values, rest, lambda first: [
            (k * m,) + strides + (first if k else -1, k) for k in range(len(values))])
        pieces = [_result(v, t, first + k, rg) for k, v in enumerate(values)]
    mark = views.mark
    return tuple([mark(p, x, _piece_again, (0, bounds, _UNBIND, k))
                  for k, p in enumerate(pieces)])


def split(tensor, split_size_or_sections, dim=0):
    n = tensor.shape[_wrap_dim(dim, tensor.ndim)]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0:
            raise RuntimeError(f"split expects split_size be non-negative, but got split_size={s}")
        if s == 0 and n:
            raise RuntimeError("split_size can only be 0 if dimension size is 0, but got dimension "
                               f"size of {n}")
        if s == 0:
            return _pieces(tensor, dim, [(0, 0)], CODE["split"])
        sizes = [min(s, n - a) for a in range(0, n, s)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if any(s < 0 for s in sizes):
            raise RuntimeError("split_with_sizes expects split_sizes have only non-negative "
                               f"entries, but got split_sizes={sizes}")
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={sizes}")
    starts = np.cumsum([0] + sizes[:-1])
    pieces = _pieces(tensor, dim, [(int(a), int(a) + s) for a, s in zip(starts, sizes)],
                     CODE["split"])
    if not isinstance(split_size_or_sections, int) and pieces and pieces[0]._t is not None:
        pieces[0]._t.names[pieces[0]._i] = "SplitWithSizesBackward0"    # (PyTorch's Node)
    return pieces


def chunk(input, chunks, dim=0):
    """Pieces of ceil(n / chunks) along dim; of an empty dim, ``chunks`` empty pieces, as
    PyTorch's (a split by size would give one)."""
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    n = input.shape[_wrap_dim(dim, input.ndim)]
    return split(input, -(-n // chunks) if n else [0] * chunks, dim)


def unbind(input, dim=0):
    n = input.shape[_wrap_dim(dim, input.ndim)]
    return _pieces(input, dim, [(k, k + 1) for k in range(n)], CODE["unbind"])


def _only_tensors(tensors):
    """PyTorch's error for a list of tensors holding something else (a number)."""
    for k, x in enumerate(tensors):
        if not isinstance(x, Tensor):
            raise TypeError(f"expected Tensor as element {k} in argument 0, but got "
                            f"{type(x).__name__}")


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise ValueError("torch.cat(): expected a non-empty list of Tensors")
    _only_tensors(tensors)
    for k, x in enumerate(tensors):
        if x.ndim == 0:
            raise RuntimeError(f"zero-dimensional tensor (at position {k}) cannot be "
                               "concatenated")
    # as PyTorch: 1-d empty tensors are left out (a legacy), unless all are such
    skip = [tuple(x.shape) == (0,) for x in tensors]
    if all(skip):
        skip = [False] * len(tensors)
    from .elementwise import result_dtype
    rd = result_dtype(*tensors)
    ref = skip.index(False)
    first = tensors[ref].shape
    dim = _wrap_dim(dim, len(first))
    for k, x in enumerate(tensors):
        if skip[k] or k == ref:
            continue
        if x.ndim != len(first):
            raise RuntimeError(f"Tensors must have same number of dimensions: got {len(first)} "
                               f"and {x.ndim}")
        for d, (m, n) in enumerate(zip(first, x.shape)):
            if d != dim and m != n:
                raise RuntimeError(f"Sizes of tensors must match except in dimension {dim}. "
                                   f"Expected size {m} but got size {n} for tensor number {k} "
                                   "in the list.")
    value = np.concatenate([np.asarray(x._arr, rd.np) for x, s in zip(tensors, skip) if not s],
                           axis=dim)
    return _join(tensors, value, dim, CODE["cat"])    # (a left-out piece: 0 per row)


def _join(tensors, value, dim, code):
    t = recording(*tensors) if value.dtype.kind == "f" else None
    if t is None:
        if STATE.trace is not None:
            freeze(*tensors)
        return _leaf(_norm(value))
    outer = math.prod(value.shape[:dim])
    extras = [outer, len(tensors)]
    for x in tensors:      # its values per row: 0 for any empty piece (a left-out (0,) too)
        extras += [buf(t, x, False), math.prod(x.shape) // outer if outer else 0]
    i = t.append(code, -1, -1, value, extras)
    return _result(_norm(value), t, i, requires_grad(*tensors))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    if dim in (0, -1) and all(x.__class__ is Tensor and x._d.__class__ is float
                              for x in tensors):
        return _stack_scalars(tensors)
    _only_tensors(tensors)
    first = tuple(tensors[0].shape)
    for k, x in enumerate(tensors):
        if tuple(x.shape) != first:
            raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                               f"{list(first)} at entry 0 and {list(x.shape)} at entry {k}")
    dim = _wrap_dim(dim, tensors[0].ndim + 1)
    from .elementwise import result_dtype
    rd = result_dtype(*tensors)
    value = np.stack([np.asarray(x._arr, rd.np) for x in tensors], axis=dim)
    # the pieces lie in the output as a concatenation's do (the new dim only regroups
    # them): one stack entry over the inputs themselves, no unsqueeze entries
    return _join(tensors, value, dim, CODE["stack"])


def _stack_scalars(tensors):
    """``stack`` of 0-d float64 tensors (scalar code assembling a vector): the entry
    ``_join`` records, without NumPy per piece."""
    value = np.array([x._d for x in tensors])
    t = recording(*tensors)
    if t is None:
        if STATE.trace is not None:
            freeze(*tensors)
        return _leaf(value)
    extras = [1, len(tensors)]
    for x in tensors:
        extras += (buf(t, x, False), 1)
    return _result(value, t, t.append(CODE["stack"], -1, -1, value, extras),
                   requires_grad(*tensors))


def clone(input):
    d = input._d
    if d.__class__ is float and recording(input) is None:
        return _leaf(d)
    value = np.array(input._arr)     # its own storage (a view's or a from_numpy array's no more)
    return _out(input, value, lambda t, ia: rec_reshape(t, ia, value, CODE["clone"]))


def iterate(input):
    """``iter(x)``: its pieces along dim 0 (``unbind``)."""
    if input.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return iter(unbind(input, 0))


def scatter_sum(g, src, n_in, in_shape):
    """The transpose of a gather: result element j sums the elements k of ``g`` with
    ``src[k] == j``, recorded as index entries and sums.  Each target's elements are
    gathered into a row (padded with a zero) and the rows summed: one matrix of the
    largest count's width where that is small, else one matrix per power-of-two width
    (at most twice the elements, however unevenly they fall), put in order by a last
    gather."""
    src = np.asarray(src, np.int64).reshape(-1)
    n_out = src.size
    counts = np.bincount(src, minlength=n_in)
    flat = g.reshape(-1)
    if n_out == n_in and counts.max(initial=0) == 1:   # a permutation
        inv = np.empty(n_in, np.int64)
        inv[src] = np.arange(n_out)
        return flat[inv].reshape(in_shape)
    m = int(counts.max(initial=1))
    order = np.argsort(src, kind="stable")
    target = src[order]
    rank = np.arange(n_out) - (np.cumsum(counts) - counts)[target]
    ext = cat([flat, _leaf(np.zeros(1, g.dtype.np))])       # n_out: the zero pad

    def rows_summed(rows, width, rank):
        """The sums of the targets ``rows``, whose elements (in order) sit at ``rank``."""
        row = np.full(n_in, len(rows), np.int64)
        row[rows] = np.arange(len(rows))
        P = np.full((len(rows) + 1, width), n_out, np.int64)
        P[row[target], rank] = order
        picked = ext[P[:-1].reshape(-1)].reshape(len(rows), width)
        return picked.sum(1) if width > 1 else picked.reshape(-1)
    if n_in * m <= 2 * (n_in + n_out):
        return rows_summed(np.arange(n_in), m, rank).reshape(in_shape)
    width = np.where(counts > 1, 1 << np.ceil(np.log2(np.maximum(counts, 1))).astype(np.int64),
                     counts)
    pieces, place, done = [], np.full(n_in, n_out, np.int64), 0
    for w in np.unique(width[width > 0]):
        rows = np.flatnonzero(width == w)
        pieces.append(rows_summed(rows, int(w), np.where(width[target] == w, rank, 0)))
        place[rows] = n_out + 1 + done + np.arange(len(rows))
        done += len(rows)
    return cat([ext] + pieces)[place].reshape(in_shape)
