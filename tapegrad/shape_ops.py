"""Shape ops, indexing, cat / stack / split.

Every view-like op is recorded as one ``gather`` entry (output element k reads the
input at base + strided offset), ``reshape`` entry (same elements, new shape) or
``index`` entry (an explicit list of input offsets, for advanced indexing).  Values are
copied: tapegrad tensors do not share storage.
"""
import math
import warnings

import numpy as np

from .ops.table import CODE
from .record import contiguous, contiguous_strides, expand_strides, gather
from .record import reshape as rec_reshape
from .tensor import Size, Tensor, _leaf, _norm, _result, buf, recording, requires_grad


def _out(x, value, build):
    """Result tensor of a structural op on ``x``: ``build(t, ia)`` records the entry."""
    value = contiguous(value)
    if value.base is not None:     # a view of x's (or another) array: own the values
        value = value.copy()
    t = recording(x) if value.dtype.kind == "f" else None
    if t is None:
        return _leaf(_norm(value))
    i = build(t, buf(t, x, False))
    return _result(_norm(value), t, i, x._rg)


def _reshaped(x, shape, code=CODE["view"]):
    arr = x._arr
    try:
        value = arr.reshape(shape)
    except ValueError:
        raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {arr.size}") \
            from None
    return _out(x, value, lambda t, ia: rec_reshape(t, ia, value, code))


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
    return _reshaped(input, _dims(shape))


def view(input, *shape):
    return _reshaped(input, _dims(shape))


def flatten(input, start_dim=0, end_dim=-1):
    s = input.shape
    if not s:
        return _reshaped(input, (1,))
    a, b = _wrap_dim(start_dim, len(s)), _wrap_dim(end_dim, len(s))
    return _reshaped(input, s[:a] + (math.prod(s[a:b + 1]),) + s[b + 1:])


def squeeze(input, dim=None):
    s = input.shape
    if dim is None:
        new = tuple(d for d in s if d != 1)
    else:
        dims = {_wrap_dim(d, len(s)) for d in (dim if isinstance(dim, (tuple, list)) else (dim,))}
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
        raise RuntimeError(f"expand(torch.DoubleTensor{{{list(s)}}}, size={list(sizes)}): the "
                           "number of sizes provided must be greater or equal to the number of "
                           "dimensions in the tensor")
    out = tuple(s[k - lead] if (n == -1 and k >= lead) else n for k, n in enumerate(sizes))
    for k in range(len(s)):
        if s[k] != 1 and s[k] != out[k + lead]:
            raise RuntimeError(f"The expanded size of the tensor ({out[k + lead]}) must match the "
                               f"existing size ({s[k]}) at non-singleton dimension {k + lead}.  "
                               f"Target sizes: {list(sizes)}.  Tensor sizes: {list(s)}")
    value = np.broadcast_to(input._arr, out)
    strides = expand_strides(s, out)
    return _out(input, value, lambda t, ia: gather(t, ia, value, strides))


def broadcast_to(input, size):
    return expand(input, *size)


def expand_as(input, other):
    return expand(input, *other.shape)


def permute(input, *dims):
    dims = tuple(_wrap_dim(d, input.ndim) for d in _dims(dims))
    if sorted(dims) != list(range(input.ndim)):
        raise RuntimeError("permute(sparse_coo): number of dimensions in the tensor input does "
                           "not match the length of the desired ordering of dimensions")
    return _transposed(input, dims, CODE["permute"])


def _transposed(x, dims, code):
    cs = contiguous_strides(x.shape)
    value = np.transpose(x._arr, dims)
    strides = tuple(cs[d] for d in dims)
    return _out(x, value, lambda t, ia: gather(t, ia, value, strides, 0, code))


def transpose(input, dim0, dim1):
    nd = input.ndim
    dims = list(range(nd))
    a, b = _wrap_dim(dim0, nd), _wrap_dim(dim1, nd)
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


def getitem(x, key):
    d = x._d
    if key.__class__ is list:
        key = legacy_key(key)
    if key.__class__ is int and d.__class__ is np.ndarray and d.ndim == 1:
        return _select_1d(x, d, key)
    if x.ndim == 0 and not (key is None or key is Ellipsis or
                            (isinstance(key, tuple) and all(k is None or k is Ellipsis
                                                            for k in key))):
        raise IndexError("invalid index of a 0-dim tensor. Use `tensor.item()` in Python or "
                         "`tensor.item<T>()` in C++ to convert a 0-dim tensor to a number")
    nkey = _np_key(key)
    if not _is_advanced(key):
        nkey = nkey if isinstance(nkey, tuple) else (nkey,)
    for k in (nkey if isinstance(nkey, tuple) else (nkey,)):
        if isinstance(k, slice) and k.step is not None and k.step <= 0:
            raise ValueError("step must be greater than zero")
    arr = contiguous(x._arr)
    try:
        value = arr[nkey]
    except IndexError as e:
        raise IndexError(str(e).replace("axis", "dimension")) from None
    if _is_advanced(key):
        pos = _torch_order_index(np.arange(arr.size, dtype=np.int64).reshape(arr.shape), nkey)
        value = _torch_order_index(arr, nkey)
        pos = pos.reshape(-1)
        return _out(x, value, lambda t, ia: t.append(CODE["index"], ia, -1,
                                                     contiguous(value), pos))
    return _basic_chain(x, nkey)


def _select_1d(x, d, key):
    """``x[i]`` of a vector: the common case of scalar code over an array, recorded
    directly as one select entry."""
    n = d.shape[0]
    k = key + n if key < 0 else key
    if not 0 <= k < n:
        raise IndexError(f"index {key} is out of bounds for dimension 0 with size {n}")
    value = d[k:k + 1].reshape(())
    return _out(x, value, lambda t, ia: gather(t, ia, value, (), k, CODE["select"]))


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
        out.append(piece)
    return tuple(out)


def split(tensor, split_size_or_sections, dim=0):
    n = tensor.shape[_wrap_dim(dim, tensor.ndim)]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        sizes = [min(s, n - a) for a in range(0, n, s)] or [0]
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split_with_sizes expects split_sizes to sum exactly to {n} "
                               f"(input tensor's size at dimension {dim}), but got "
                               f"split_sizes={sizes}")
    starts = np.cumsum([0] + sizes[:-1])
    return _pieces(tensor, dim, [(int(a), int(a) + s) for a, s in zip(starts, sizes)],
                   CODE["split"])


def chunk(input, chunks, dim=0):
    n = input.shape[_wrap_dim(dim, input.ndim)]
    return split(input, max(-(-n // chunks), 1), dim)


def unbind(input, dim=0):
    n = input.shape[_wrap_dim(dim, input.ndim)]
    return _pieces(input, dim, [(k, k + 1) for k in range(n)], CODE["unbind"])


def cat(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    from .elementwise import result_dtype
    rd = result_dtype(*tensors)
    arrs = [np.asarray(x._arr, rd.np) for x in tensors]
    if any(a.ndim == 0 for a in arrs):
        raise RuntimeError("zero-dimensional tensor (at position 0) cannot be concatenated")
    dim = _wrap_dim(dim, arrs[0].ndim)
    try:
        value = np.concatenate(arrs, axis=dim)
    except ValueError:
        raise RuntimeError("Sizes of tensors must match except in dimension "
                           f"{dim}. Got {[tuple(a.shape) for a in arrs]}") from None
    return _join(tensors, value, dim, CODE["cat"])


def _join(tensors, value, dim, code):
    t = recording(*tensors) if value.dtype.kind == "f" else None
    if t is None:
        return _leaf(_norm(value))
    outer = math.prod(value.shape[:dim])
    extras = [outer, len(tensors)]
    for x in tensors:
        s = x.shape
        extras += [buf(t, x, False), math.prod(s[dim:])]
    i = t.append(code, -1, -1, value, extras)
    return _result(_norm(value), t, i, requires_grad(*tensors))


def stack(tensors, dim=0):
    tensors = list(tensors)
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    shapes = {tuple(x.shape) for x in tensors}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got "
                           f"{list(tensors[0].shape)} at entry 0 and "
                           f"{list(next(x.shape for x in tensors if tuple(x.shape) != tuple(tensors[0].shape)))} "
                           "at entry 1")
    dim = _wrap_dim(dim, tensors[0].ndim + 1)
    from .elementwise import result_dtype
    rd = result_dtype(*tensors)
    value = np.stack([np.asarray(x._arr, rd.np) for x in tensors], axis=dim)
    # the pieces lie in the output as a concatenation's do (the new dim only regroups
    # them): one stack entry over the inputs themselves, no unsqueeze entries
    return _join(tensors, value, dim, CODE["stack"])


def clone(input):
    value = input._arr
    return _out(input, value, lambda t, ia: rec_reshape(t, ia, value, CODE["clone"]))
