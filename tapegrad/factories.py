"""Tensor factories and dtype conversions."""
import numpy as np

from . import dtypes
from .record import contiguous
from .tensor import Tensor, _leaf, _norm
from .tracing import traced_entry

_rng = [np.random.default_rng()]


def _infer(data):
    """NumPy array for ``data`` with PyTorch's dtype inference."""
    if isinstance(data, Tensor):
        return data._arr.copy()
    if isinstance(data, np.ndarray):
        return data.copy()
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        data = _unwrap(data)
    arr = np.array(data)
    if arr.dtype.kind == "f":
        arr = arr.astype(dtypes.get_default_dtype().np)
    elif arr.dtype.kind in "iu":
        arr = arr.astype(np.int64)
    elif arr.dtype.kind not in "b":
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    return arr


def _flat(data):
    for v in data:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _unwrap(data):
    if isinstance(data, (list, tuple)):
        return [_unwrap(v) for v in data]
    return data.item() if isinstance(data, Tensor) else data


def _make(arr, requires_grad=False):
    t = _leaf(_norm(arr))
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    arr = _infer(data)
    if dtype is not None:
        arr = arr.astype(dtypes.to_np(dtype))
    if requires_grad and arr.dtype.kind != "f":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    return _make(arr, requires_grad)


def as_tensor(data, dtype=None, device=None):
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dtype):
        return data
    return tensor(data, dtype)


def from_numpy(ndarray):
    dtypes.from_np(ndarray.dtype)
    return _make(contiguous(ndarray))


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        return tuple(size[0])
    return tuple(size)


def _filled(size, value, dtype, requires_grad):
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    return _make(np.full(_size(size), value, d), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 1, dtype, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None and isinstance(fill_value, bool):
        dtype = dtypes.bool_
    elif dtype is None and isinstance(fill_value, int):
        dtype = dtypes.int64
    return _filled((size,), fill_value, dtype, requires_grad)


def _like(fill):
    def like(input, dtype=None, device=None, requires_grad=False):
        return _filled((tuple(input.shape),), fill, dtype or input.dtype, requires_grad)
    return like


zeros_like, ones_like, empty_like = _like(0), _like(1), _like(0)


def full_like(input, fill_value, dtype=None, requires_grad=False):
    return _filled((tuple(input.shape),), fill_value, dtype or input.dtype, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    arr = np.arange(start, end, step)
    if dtype is None:
        dtype = dtypes.int64 if arr.dtype.kind in "iu" else dtypes.get_default_dtype()
    return _make(arr.astype(dtypes.to_np(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    return _make(np.linspace(start, end, steps).astype(d), requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    return _make(np.eye(n, m, dtype=d), requires_grad)


def manual_seed(seed):
    _rng[0] = np.random.default_rng(seed)
    return _rng[0]


def rand(*size, dtype=None, device=None, requires_grad=False):
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    return _make(_rng[0].random(_size(size)).astype(d), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    return _make(_rng[0].standard_normal(_size(size)).astype(d), requires_grad)


def randint(low, high=None, size=(), dtype=None, device=None):
    if high is None:
        low, high = 0, low
    return _make(_rng[0].integers(low, high, size=size).astype(dtypes.to_np(dtype) or np.int64))


def rand_like(input, dtype=None):
    return rand(*input.shape, dtype=dtype or input.dtype)


def randn_like(input, dtype=None):
    return randn(*input.shape, dtype=dtype or input.dtype)


# -- conversions: recorded as a differentiable identity between float dtypes ----------
def to(self, *args, dtype=None, **kwargs):
    for a in args:
        if isinstance(a, dtypes.dtype):
            dtype = a
    if dtype is None or dtype is self.dtype:
        return self
    if dtype.is_floating_point and (self._rg or traced_entry(self) is not None):
        # differentiable between float dtypes; a traced mask (bool) becomes floats that
        # a replay recomputes
        from .ops.table import CODE
        from .record import reshape
        from .shape_ops import _out
        value = self._arr.astype(dtype.np)
        return _out(self, value, lambda t, ia: reshape(t, ia, value, CODE["to_copy"]))
    return _leaf(_norm(self._arr.astype(dtype.np)))
