"""In-place ops and version counters.

A tapegrad tensor does not share storage with the tape (entries hold copies), so an
in-place op is its out-of-place op followed by the tensor adopting the result: its
value, and (when recorded) the new entry as its history, as PyTorch rebases a
non-leaf.  ``_version`` counts the modifications.  The entry that held the old value is
noted on its tape; a backward that needs that entry as a saved value raises PyTorch's
error, as PyTorch would (ops that save nothing of it are fine; the check is in the
engine).  A tape on which no in-place op happened pays nothing.
"""
import weakref

import numpy as np

from . import dtypes
from .grad_mode import STATE
from .tape import live_tape
from .tensor import Tensor, _norm

_F64 = np.dtype(np.float64)


def _note_modified(x):
    """Record on x's tape that the buffer holding x's value is about to change: entries
    recorded before now that saved it are stale (those recorded later saw the old
    value as their input, which the tape keeps)."""
    t = x._t if x._t is not None else live_tape(x._tid)
    if t is not None and x._i >= 0 and (x._t is not None or x._tid == t.uid):
        first = t.modified.get(x._i)
        t.modified[x._i] = (weakref.ref(x), x._version + 1, first[2] if first else x._version,
                            first[3] if first else t.next)


def _adopt(x, compute):
    """x takes the value (in x's dtype) and the history of ``compute()``; version + 1."""
    _note_modified(x)
    out = compute()
    if out.dtype is not x.dtype:
        if dtypes.category(out.dtype) > dtypes.category(x.dtype):
            raise RuntimeError(f"result type {out.dtype.name.capitalize()} can't be cast to the "
                               f"desired output type {x.dtype.name.capitalize()}")
        out = out.to(x.dtype)
    version = x._version + 1
    x._d = out._d
    if out._t is not None:
        x._t, x._tid, x._i, x._rg = out._t, out._tid, out._i, True
    else:
        x._tid = 0   # used again, the tensor registers its new value
    x._version = version
    return x


def _check(x):
    if x._t is None and x._rg and STATE.grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if x._inference and not STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")


def _make(name):
    def method(self, other, *, alpha=None):
        _check(self)
        if alpha is not None:
            other = other * alpha
        return _adopt(self, lambda: getattr(Tensor, name)(self, other))
    method.__name__ = name + "_"
    return method


def clamp_(self, min=None, max=None):
    _check(self)
    return _adopt(self, lambda: self.clamp(min, max))


def zero_(self):
    return fill_(self, 0)


def fill_(self, value):
    _check(self)
    with _no_record():
        return _adopt(self, lambda: _full_like(self, value))


def copy_(self, src):
    _check(self)
    if not isinstance(src, Tensor):
        src = _full_like(self, src)
    if tuple(src.shape) != tuple(self.shape):
        return _adopt(self, lambda: src.expand(*self.shape))
    return _adopt(self, lambda: src.clone() if src._rg and STATE.grad else src.detach())


def set_value_(self, value):
    """``self`` takes the NumPy array ``value`` (its shape; cast to its dtype) as its value
    in place, unrecorded: the way optimizers and initialisers write parameters under
    no_grad (``_adopt`` of an unrecorded result, without building that result).
    ``value`` must not be shared: arrays of tensors are never written to."""
    _check(self)
    d = self._d
    if value.dtype != (_F64 if d.__class__ is float else d.dtype):
        value = value.astype(_F64 if d.__class__ is float else d.dtype)
    _note_modified(self)
    self._d = _norm(value)
    self._tid = 0
    self._version += 1
    return self


def uniform_(self, a=0.0, b=1.0):
    """Fill with samples of U(a, b) from tapegrad's generator (``manual_seed``)."""
    from .factories import _rng
    return set_value_(self, _rng[0].uniform(a, b, self._arr.shape))


def normal_(self, mean=0.0, std=1.0):
    from .factories import _rng
    return set_value_(self, _rng[0].normal(mean, std, self._arr.shape))


def setitem(self, key, value):
    """``x[key] = value``: in place; gradients flow to the untouched elements of x."""
    _check(self)
    if isinstance(value, Tensor) and value.requires_grad and STATE.grad:
        raise RuntimeError("assigning a tensor that requires grad into part of a tensor is "
                           "not supported yet; use torch.where or cat to build the result")
    from .elementwise import where
    from .shape_ops import _np_key
    arr = np.array(self._arr)                    # a copy: the tape may hold the old array
    nkey = _np_key(key)
    arr[nkey] = value._arr if isinstance(value, Tensor) else value
    if not (self._rg and STATE.grad):
        return _adopt(self, lambda: _leaf_like(arr))
    mask = np.zeros(arr.shape, bool)
    mask[nkey] = True
    return _adopt(self, lambda: where(_leaf_like(mask), _leaf_like(arr), self))


def _leaf_like(arr):
    from .tensor import from_array
    return from_array(arr)


def _full_like(x, value):
    return _leaf_like(np.full(x._arr.shape, value, x._arr.dtype))


class _no_record:
    def __enter__(self):
        self._prev = STATE.grad
        STATE.grad = False

    def __exit__(self, *exc):
        STATE.grad = self._prev


def _install():
    T = Tensor
    for name in ("add", "sub", "mul", "div", "pow"):
        setattr(T, name + "_", _make(name))
    T.__iadd__, T.__isub__, T.__imul__, T.__itruediv__ = T.add_, T.sub_, T.mul_, T.div_
    T.__ipow__ = T.pow_
    T.clamp_ = T.clip_ = clamp_
    T.zero_, T.fill_, T.copy_ = zero_, fill_, copy_
    T.uniform_, T.normal_ = uniform_, normal_
    T.__setitem__ = setitem


_install()
