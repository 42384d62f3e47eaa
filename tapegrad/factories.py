"""Tensor factories and dtype conversions."""
import math

import numpy as np

from . import dtypes
from .devices import check as _device
from .devices import device as _device_class
from .grad_mode import DUAL_LEVELS
from .record import contiguous
from .tensor import Tensor, _leaf, _norm
from .tracing import freeze, traced_entry

_rng = [np.random.default_rng()]


def _infer(data, dtype=None):
    """NumPy array for ``data`` with PyTorch's dtype inference (``dtype``: the one asked
    for, which lets Python ints past int64 be floats)."""
    if isinstance(data, Tensor):
        return data._arr.copy()
    if isinstance(data, np.ndarray):
        return data.copy()
    if isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data)):
        data = _unwrap(data)
    if data is None:
        raise RuntimeError("Could not infer dtype of NoneType")
    try:
        arr = np.array(data)
    except ValueError:
        _ragged(data)                # PyTorch's message for the first ragged sequence
        raise
    kind = arr.dtype.kind
    if (kind in "uO" or kind == "f" and data.__class__ is not float and
            (np.abs(arr) >= 2.0 ** 63).any()) and _past_int64(data):
        # NumPy wraps 2 ** 63 into int64's -2 ** 63 (and gives up on 2 ** 70); as PyTorch,
        # such an int is a float's value only
        if not (dtype.is_floating_point if dtype is not None else any(
                isinstance(v, (float, np.floating)) for v in _values_of(data))):
            raise ValueError("Overflow when unpacking long long")
        return np.array(data, np.float64).astype((dtype or dtypes.get_default_dtype()).np)
    if kind == "f":                 # (a dtype asked for: cast once, from the doubles)
        arr = arr.astype(dtypes.get_default_dtype().np) if dtype is None else arr
    elif kind in "iu":
        arr = arr.astype(np.int64)
    elif kind not in "b":
        raise TypeError(f"Could not infer dtype of {type(data).__name__}")
    return arr


def _ragged(data):
    """Raise PyTorch's error for nested sequences that do not form a block: the sizes
    are read along the first elements, then every sequence is checked, depth first."""
    sizes, d = [], data
    while isinstance(d, (list, tuple)):
        sizes.append(len(d))
        if not d:
            break
        d = d[0]

    def walk(seq, dim):
        if dim == len(sizes):
            if isinstance(seq, (list, tuple)):
                raise TypeError(f"must be real number, not {type(seq).__name__}")
            return
        if not isinstance(seq, (list, tuple)):
            raise TypeError("not a sequence")
        if len(seq) != sizes[dim]:
            raise ValueError(f"expected sequence of length {sizes[dim]} at dim {dim} "
                             f"(got {len(seq)})")
        for v in seq:
            walk(v, dim + 1)
    walk(data, 0)


def _values_of(data):
    return _flat(data) if isinstance(data, (list, tuple)) else (data,)


def _past_int64(data):
    """Does ``data`` hold a Python int outside int64's range?"""
    return any(isinstance(v, int) and not -2 ** 63 <= v < 2 ** 63 for v in _values_of(data))


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
    if DUAL_LEVELS:         # (made from no tensor: no tangent lost under no_grad)
        t.__dict__.pop("_no_grad_in_dual", None)
    if requires_grad:
        t.requires_grad_(True)
    return t


def tensor(data, dtype=None, device=None, requires_grad=False):
    if device is not None:
        _device(device)
    if isinstance(data, Tensor) and traced_entry(data) is not None:
        if not requires_grad:        # a copy of a traced value: recomputed by a replay
            out = data.detach().clone()   # (its own storage, as PyTorch's copy)
            return out.to(dtype) if dtype is not None else out
        freeze(data)                 # a new leaf: its value a constant, guarded
    arr = _infer(data, dtype)
    if dtype is not None:
        d = dtypes.to_np(dtype)
        if d.kind in "iu" and arr.dtype.kind in "iuf" and \
                not isinstance(data, (np.ndarray, Tensor)):      # (Python numbers)
            dtypes.refuse_overflow(arr, d, d.name)
        with np.errstate(invalid="ignore", over="ignore"):      # (C's cast, as PyTorch's)
            arr = arr.astype(d)
    if requires_grad and arr.dtype.kind != "f":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    return _make(arr, requires_grad)


def as_tensor(data, dtype=None, device=None):
    _device(device)
    if isinstance(data, Tensor) and (dtype is None or data.dtype is dtype):
        return data
    if isinstance(data, np.ndarray) and data.flags.c_contiguous and (
            dtype is None or dtypes.from_np(data.dtype) is dtype):
        return from_numpy(data)       # shares the array, as PyTorch's (no copy needed)
    return tensor(data, dtype)


def from_numpy(ndarray):
    dtypes.from_np(ndarray.dtype)
    return _make(contiguous(ndarray))


_MOST_BYTES = np.iinfo(np.int64).max


def _size(size, name=None, itemsize=8):
    """The sizes of a new tensor of ``itemsize`` bytes a value, with PyTorch's errors
    for a negative one and for a byte count past int64's (NumPy's own limit, which also
    counts an empty tensor's nonzero sizes: NumPy would raise its ValueError)."""
    size = tuple(size[0]) if len(size) == 1 and isinstance(size[0], (tuple, list)) else \
        tuple(size)
    for n in size:
        if n < 0:
            raise RuntimeError(f"{name}: Dimension size must be non-negative." if name else
                               f"Trying to create tensor with negative dimension {n}: "
                               f"{list(size)}")
    if math.prod(int(n) for n in size if n) * itemsize > _MOST_BYTES:
        raise RuntimeError(f"Storage size calculation overflowed with sizes={list(size)}")
    return size


def _allocated(make, size, itemsize=8):
    """``make()``, the new array of ``size`` (checked by ``_size``): PyTorch's
    RuntimeError where the system refuses its memory (NumPy raises MemoryError)."""
    try:
        return make()
    except MemoryError:
        raise RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                           f"{math.prod(size) * itemsize} bytes.") from None


def _filled(size, value, dtype, requires_grad, device=None, name=None):
    _device(device)
    d = np.dtype(dtypes.to_np(dtype) or dtypes.get_default_dtype().np)
    size = _size(size, name, d.itemsize)
    value = dtypes.scalar_in(value, d)
    return _make(_allocated(lambda: np.full(size, value, d), size, d.itemsize), requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad, device, "zeros")


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 1, dtype, requires_grad, device)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled(size, 0, dtype, requires_grad, device)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None and isinstance(fill_value, bool):
        dtype = dtypes.bool_
    elif dtype is None and isinstance(fill_value, int):
        dtype = dtypes.int64
    return _filled((size,), fill_value, dtype, requires_grad, device)


def _like(fill):
    def like(input, dtype=None, device=None, requires_grad=False):
        return _filled((tuple(input.shape),), fill, dtype or input.dtype, requires_grad, device)
    return like


zeros_like, ones_like, empty_like = _like(0), _like(1), _like(0)


def full_like(input, fill_value, dtype=None, device=None, requires_grad=False):
    return _filled((tuple(input.shape),), fill_value, dtype or input.dtype, requires_grad,
                   device)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    _device(device)
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if not all(math.isfinite(v) for v in (start, end)):
        raise RuntimeError(f"unsupported range: {start} -> {end}")
    if (end - start) * step < 0:
        raise RuntimeError("upper bound and lower bound inconsistent with step sign")
    if dtype is not None and dtypes.to_np(dtype).kind in "iu":   # (counted in int64 there)
        for v in (start, end, step):
            dtypes.scalar_in(v, np.dtype(np.int64))
    size = _size((max(0, math.ceil((end - start) / step)),))
    arr = _allocated(lambda: np.arange(start, end, step), size)
    if dtype is None:
        dtype = dtypes.int64 if arr.dtype.kind in "iu" else dtypes.get_default_dtype()
    return _make(arr.astype(dtypes.to_np(dtype)), requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    _device(device)
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    size = _size((steps,))
    return _make(_allocated(lambda: np.linspace(start, end, steps), size).astype(d),
                 requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    _device(device)
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    for name, v in (("n", n), ("m", m)):
        if v is not None and v < 0:
            raise RuntimeError(f"{name} must be greater or equal to 0, got {v}")
    size = _size((n, n if m is None else m), itemsize=np.dtype(d).itemsize)
    return _make(_allocated(lambda: np.eye(n, m, dtype=d), size, np.dtype(d).itemsize),
                 requires_grad)


def manual_seed(seed):
    _rng[0] = np.random.default_rng(seed)
    return _rng[0]


def rand(*size, dtype=None, device=None, requires_grad=False):
    _device(device)
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    size = _size(size)
    return _make(_allocated(lambda: _rng[0].random(size), size).astype(d), requires_grad)


def randn(*size, dtype=None, device=None, requires_grad=False):
    _device(device)
    d = dtypes.to_np(dtype) or dtypes.get_default_dtype().np
    size = _size(size)
    return _make(_allocated(lambda: _rng[0].standard_normal(size), size).astype(d),
                 requires_grad)


_NOTHING = object()
_RANDINT_FORMS = ("randint() received an invalid combination of arguments - got ({got}), but "
                  "expected one of:\n"
                  " * (int high, tuple of ints size, *, torch.Generator generator, "
                  "torch.dtype dtype = None, torch.device device = None, "
                  "bool requires_grad = False)\n"
                  " * (int low, int high, tuple of ints size, *, torch.Generator generator, "
                  "torch.dtype dtype = None, torch.device device = None, "
                  "bool requires_grad = False)\n")
# the integer range of each dtype, and its C name in PyTorch's messages
_INT_RANGE = {np.dtype(np.bool_): (0, 1, "bool"), np.dtype(np.uint8): (0, 255, "unsigned char"),
              np.dtype(np.int8): (-128, 127, "signed char"),
              np.dtype(np.int16): (-2 ** 15, 2 ** 15 - 1, "short int"),
              np.dtype(np.int32): (-2 ** 31, 2 ** 31 - 1, "int"),
              np.dtype(np.float16): (-65504, 65504, "c10::Half")}


def _randint_args(args, low, high, size):
    """(low, high, size) from PyTorch's two forms, randint(high, size) and
    randint(low, high, size), positional or by keyword."""
    given = {"low": low, "high": high, "size": size}
    for names in (("high", "size"), ("low", "high", "size")):
        if len(args) > len(names) or (names[0] == "high" and low is not _NOTHING):
            continue
        bound = dict(zip(names, args))
        if any(given[n] is not _NOTHING for n in bound):
            continue        # given twice: not this form
        for n in names[len(args):]:
            bound[n] = given[n]
        if all(bound[n] is not _NOTHING for n in names):
            return bound.get("low", 0), bound["high"], bound["size"], names.index("size") + 1, \
                len(args) == len(names)
    got = [type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in
                                              given.items() if v is not _NOTHING]
    raise TypeError(_RANDINT_FORMS.format(got=", ".join(got)))


def _int_arg(v, name, pos):
    if isinstance(v, Tensor) and v.numel() == 1 and not v.dtype.is_floating_point:
        v = v.item()
    if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
        raise TypeError(f"randint(): argument '{name}' (position {pos}) must be int, not "
                        f"{type(v).__name__}")
    return int(v)


def randint(*args, low=_NOTHING, high=_NOTHING, size=_NOTHING, generator=None, dtype=None,
            device=None, requires_grad=False):
    """``randint(high, size)`` or ``randint(low, high, size)``: integers drawn uniformly
    from [low, high) (low 0 by default), int64 unless ``dtype`` says otherwise."""
    low, high, size, size_pos, size_positional = _randint_args(args, low, high, size)
    low = _int_arg(low, "low", 1)
    high = _int_arg(high, "high", size_pos - 1)
    if not isinstance(size, (tuple, list)) or not all(
            isinstance(n, (int, np.integer)) and not isinstance(n, bool) for n in size):
        where = f" (position {size_pos})" if size_positional else ""
        raise TypeError(f"randint(): argument 'size'{where} must be tuple of ints, not "
                        f"{type(size).__name__}")
    _device(device)
    d = np.dtype(dtypes.to_np(dtype) or np.int64)
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    if d in _INT_RANGE:
        lo, hi, cname = _INT_RANGE[d]
        if not lo <= low <= hi:
            raise RuntimeError(f"from is out of bounds for {cname}")
        if not lo <= high - 1 <= hi:
            raise RuntimeError(f"to - 1 is out of bounds for {cname}")
    if requires_grad and d.kind != "f":
        raise RuntimeError("Only Tensors of floating point and complex dtype can require "
                           "gradients")
    if generator is None:
        generator = _rng[0]
    elif not isinstance(generator, np.random.Generator):
        raise TypeError("randint(): argument 'generator' must be torch.Generator (the "
                        f"generator tapegrad.manual_seed returns), not {type(generator).__name__}")
    size = _size(tuple(int(n) for n in size))
    values = _allocated(lambda: generator.integers(low, high, size=size, dtype=np.int64), size)
    return _make(values.astype(d), requires_grad)


def rand_like(input, dtype=None, device=None, requires_grad=False):
    return rand(*input.shape, dtype=dtype or input.dtype, device=device,
                requires_grad=requires_grad)


def randn_like(input, dtype=None, device=None, requires_grad=False):
    return randn(*input.shape, dtype=dtype or input.dtype, device=device,
                 requires_grad=requires_grad)


# -- conversions: recorded as a differentiable identity between float dtypes ----------
def to(self, *args, dtype=None, device=None, non_blocking=False, copy=False,
       memory_format=None):
    """``x.to(dtype)``, ``x.to(device)``, ``x.to(device, dtype)``, ``x.to(other)`` (other's
    dtype); a device other than the CPU raises (tapegrad runs on the CPU only)."""
    flags = []
    for a in args:
        if isinstance(a, dtypes.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            dtype = a.dtype
        elif isinstance(a, bool):
            flags.append(a)                # to(dtype, non_blocking, copy)
        elif isinstance(a, (str, int, _device_class)) or isinstance(getattr(a, "type", None), str):
            device = a
        else:
            raise TypeError(f"to() received an invalid combination of arguments - got "
                            f"({', '.join(type(v).__name__ for v in args)})")
    if len(flags) > 1:
        copy = flags[1]
    _device(device)
    if dtype is None or dtype is self.dtype:
        return self.clone() if copy else self
    if dtype.is_floating_point and (self._rg or traced_entry(self) is not None):
        # differentiable between float dtypes; a traced mask (bool) becomes floats that
        # a replay recomputes
        from .ops.table import CODE
        from .record import reshape
        from .shape_ops import _out
        value = self._arr.astype(dtype.np)
        return _out(self, value, lambda t, ia: reshape(t, ia, value, CODE["to_copy"]))
    freeze(self)                     # (while tracing) integers of traced values: guarded
    with np.errstate(invalid="ignore"):   # (nan, inf and out-of-range floats: C's cast)
        return _leaf(_norm(self._arr.astype(dtype.np)))


def tensor_type(self, dtype=None, non_blocking=False, **kwargs):
    """``x.type()``: PyTorch's name of x's type ('torch.DoubleTensor'); ``x.type(dtype)``
    or ``x.type('torch.FloatTensor')``: x as that type (``to``)."""
    if dtype is None:
        return dtypes.type_name(self.dtype)
    if isinstance(dtype, str):
        if dtype.startswith("torch.cuda."):
            _device("cuda")
        name, dtype = dtype, dtypes.from_type_name(dtype)
        if dtype is None:
            raise ValueError(f"invalid type: '{name}'")
    elif not isinstance(dtype, dtypes.dtype):
        raise TypeError("dtype must be a type, str, or dtype object")
    return to(self, dtype)


def cpu(self, memory_format=None):
    """The tensor itself: every tapegrad tensor is on the CPU."""
    return self
