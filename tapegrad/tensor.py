"""Tensor: a thin handle on a value and, for results of recorded ops, a tape entry.

``_d``   the value: a Python float for a 0-d float64 tensor (the scalar fast path),
         otherwise a NumPy array;
``_t``   the tape that recorded it (None for leaves and tensors without history);
``_tid`` ``_i``  the tape uid and buffer index where the tensor's value sits (for a
         leaf: the entry it got on the tape that used it last);
``_rg``  requires_grad.
Rarely used attributes (``grad``, retain_grad, hooks, names) live in ``__dict__``
with class-level defaults, so creating a tensor sets five slots and nothing else.
The operations are installed onto the class by the modules that record them
(``elementwise``, ``shape_ops``, ``reductions``, ``linalg``).
"""
import math
import warnings

import numpy as np

from . import dtypes, tracing
from .grad_mode import DUAL_LEVELS, STATE
from .ops.table import CODE
from .tape import current_tape


class Size(tuple):
    """The shape of a tensor (PyTorch's ``torch.Size``)."""

    def __repr__(self):
        return f"tapegrad.Size({list(self)})"

    def numel(self):
        return math.prod(self)


def _norm(a):
    """Store a NumPy value: 0-d float64 becomes a Python float (the scalar fast path)."""
    if a.ndim == 0 and a.dtype == np.float64:
        return float(a)
    return a


NON_LEAF_GRAD = (
    "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed. Its .grad "
    "attribute won't be populated during autograd.backward(). If you indeed want the .grad "
    "field to be populated for a non-leaf Tensor, use .retain_grad() on the non-leaf Tensor. If "
    "you access the non-leaf Tensor by mistake, make sure you access the leaf Tensor instead. "
    "See github.com/pytorch/pytorch/pull/30531 for more information.")


def _check_grad(x, g):
    """PyTorch's errors for ``x.grad = g`` with g not a Tensor of x's size and dtype."""
    if not isinstance(g, Tensor):
        tp = type(g)
        name = tp.__name__ if tp.__module__ == "builtins" or tp.__flags__ & (1 << 9) else \
            f"{tp.__module__}.{tp.__qualname__}"         # (a C type: its module named)
        raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type "
                        f"{name}")
    if g.dtype != x.dtype:
        names = dtypes.TORCH_NAMES
        raise RuntimeError(
            f"attempting to assign a gradient with dtype '{names[g.dtype.name][1]}' to a tensor "
            f"with grad_dtype '{names[x.dtype.name][0]}'. The gradient must match "
            "the tensor's grad_dtype (defaults to the tensor's dtype). You can set the tensor's "
            "grad_dtype attribute with a specific dtype, or None to allow any dtype. Set "
            "grad_dtype with caution. Diverging the dtypes of a tensor and its gradient may "
            "break downstream systems that assume they match.")
    if g.shape != x.shape:
        raise RuntimeError(f"attempting to assign a gradient of size '{list(g.shape)}' to a "
                           f"tensor of size '{list(x.shape)}'. Please ensure that the gradient "
                           "and the tensor are the same size")


class Tensor:
    __slots__ = ("_d", "_t", "_tid", "_i", "_rg", "__dict__", "__weakref__")
    _retains = False
    _inference = False
    _version = 0
    _is_param = False   # set on the marked Tensors that tapegrad.nn.Parameter makes
    __array_priority__ = 1000  # NumPy defers to Tensor's reflected operators

    def __init__(self, data=(), dtype=None):
        arr = np.array(data, dtype=dtypes.to_np(dtype) or dtypes.get_default_dtype().np)
        self._d = _norm(arr)
        self._t = None
        self._tid = 0
        self._i = -1
        self._rg = False

    # -- basic attributes ------------------------------------------------------------
    @property
    def _arr(self):
        d = self._d
        return np.array(d) if d.__class__ is float else d

    @property
    def shape(self):
        d = self._d
        return Size(() if d.__class__ is float else d.shape)

    def size(self, dim=None):
        s = self.shape
        return s if dim is None else s[dim]

    @property
    def dtype(self):
        d = self._d
        return dtypes.float64 if d.__class__ is float else dtypes.from_np(d.dtype)

    @property
    def ndim(self):
        return len(self.shape)

    def dim(self):
        return self.ndim

    def numel(self):
        d = self._d
        return 1 if d.__class__ is float else d.size

    nelement = numel

    def is_floating_point(self):
        return self.dtype.is_floating_point

    @property
    def is_leaf(self):
        return self._t is None

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, flag):
        if self._t is not None and flag and self._rg:
            return          # a non-leaf that requires grad already: nothing to change
        if self._t is not None:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use "
                "a computed variable in a subgraph that doesn't require differentiation use "
                "var_no_grad = var.detach().")
        if flag and not self.dtype.is_floating_point:
            raise RuntimeError("only Tensors of floating point dtype can require gradients")
        if flag and self._inference:
            raise RuntimeError("Setting requires_grad=True on inference tensor outside "
                               "InferenceMode is not allowed.")
        self._rg = bool(flag)
        self._tid = 0   # a leaf's tape entry records whether it requires grad

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = requires_grad
        return self

    @property
    def grad_fn(self):
        t = self._t
        if t is None or not self._rg:    # (a traced comparison is on the tape, without grad)
            return None
        from .autograd.graph import node_of
        return node_of(t, self._i)

    @property
    def output_nr(self):
        """This tensor's position among its Node's outputs (0 for a leaf)."""
        if self._t is None or not self._rg:
            return 0
        from .autograd.graph import node_of, node_outputs
        entries, positions, _ = node_outputs(self._t, node_of(self._t, self._i)._i)
        return positions[entries.index(self._i)] if self._i in entries else 0

    @property
    def tape(self):
        """The tape that recorded this tensor (None for a leaf)."""
        return self._t

    @property
    def grad(self):
        g = self.__dict__.get("_grad")
        if g is None and self._t is not None and self._rg and not self._retains:
            warnings.warn(NON_LEAF_GRAD, UserWarning, stacklevel=2)
        return g

    @grad.setter
    def grad(self, value):
        if value is not None:
            d, e = self._d, getattr(value, "_d", None)
            # (the engine's own assignments pass this test: no further look)
            if not (value.__class__ is Tensor and e.__class__ is d.__class__ and (
                    d.__class__ is float or (e.shape == d.shape and e.dtype == d.dtype))):
                _check_grad(self, value)
        self.__dict__["_grad"] = value

    @grad.deleter
    def grad(self):
        self.__dict__.pop("_grad", None)

    def retain_grad(self):
        if not self._rg:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self._t is not None and not self._retains:
            self._retains = True
            self._t.autograd.retained[self._i] = self

    @property
    def retains_grad(self):
        return self._retains

    # (``data``'s getter, ``detach``, ``clone``, ``is_contiguous`` and iteration make
    # views or copies: ``views`` / ``shape_ops`` define them, ``tensor_methods`` installs)
    def _set_data(self, value):
        if STATE.trace is not None:
            tracing.freeze(value)       # (its value becomes this tensor's: a constant)
        self._d = _norm(np.array(value._arr if isinstance(value, Tensor) else value))
        self._tid = 0

    @property
    def T(self):
        return self.permute(*reversed(range(self.ndim)))

    def _matrix_transposed(self, name, identity):
        """mT / mH: the last two dims swapped, checked as PyTorch checks them (a 1-D tensor
        has no second dim to swap with; a 0-d one is itself, deprecated)."""
        if self.ndim == 1:
            raise RuntimeError(f"tensor.{name} is only supported on matrices or batches of "
                               "matrices. Got 1-D tensor.")
        if self.ndim == 0:
            warnings.warn(f"Tensor.{name} is deprecated on 0-D tensors. {identity}",
                          UserWarning, stacklevel=3)
            return self.permute()
        return self.transpose(-2, -1)

    @property
    def mT(self):
        return self._matrix_transposed("mT", "This function is the identity in these cases.")

    @property
    def mH(self):
        """mT: tapegrad has no complex dtype, so the conjugate is the tensor itself."""
        return self._matrix_transposed("mH", "Consider using x.conj().")

    # -- conversions -----------------------------------------------------------------
    def detach_(self):
        if self._t is not None:
            self._t = None
            self._tid, self._i = 0, -1
        self._rg = False
        return self

    def _item(self):
        d = self._d
        if d.__class__ is float:
            return d
        if d.size != 1:
            raise RuntimeError(f"a Tensor with {d.size} elements cannot be converted to Scalar")
        return d.reshape(()).item()

    def item(self):
        v = self._item()
        if STATE.trace is not None:
            tracing.note(tracing.G_EQUAL, self, (v,))
        return v

    def tolist(self):
        d = self._d
        if STATE.trace is not None:
            tracing.note(tracing.G_EQUAL, self, np.ravel(d))
        return d if d.__class__ is float else d.tolist()

    def contiguous(self, memory_format=None):
        """The tensor itself, or a copy if it is a view whose elements are not in order
        in its base's storage (a transpose, an expand, a strided slice), as PyTorch's."""
        return self if self.is_contiguous() else self.clone()

    def __reduce_ex__(self, protocol):
        """Pickled as its value, requires_grad and Parameter mark (any protocol); a
        tensor with a history comes back a leaf, as PyTorch's."""
        return _unpickle, (np.array(self._arr), self._rg, self._is_param)

    def numpy(self):
        if self._rg and STATE.grad:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if STATE.trace is not None:
            tracing.note(tracing.G_EQUAL, self, np.ravel(self._d))
        return self._arr

    def __array__(self, dtype=None, copy=None):
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self.dtype.is_floating_point or self.numel() != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self.numel() != 1:
            raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
        v = bool(self._item())
        if STATE.trace is not None:
            tracing.note(tracing.G_TRUTH, self, (v,))
        return v

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    __hash__ = object.__hash__

    def __deepcopy__(self, memo):
        """A new leaf with copied values (and a copy of ``.grad``), detached from every
        tape; non-leaves refuse, as in PyTorch."""
        if self._t is not None:
            raise RuntimeError("Only Tensors created explicitly by the user (graph leaves) "
                               "support the deepcopy protocol at the moment.  If you were "
                               "attempting to deepcopy a module, this may be because of a "
                               "torch.nn.utils.weight_norm usage, see "
                               "https://github.com/pytorch/pytorch/pull/103001")
        import copy
        d = self._d
        new = _leaf(d if d.__class__ is float else d.copy(), self._rg, self._inference)
        memo[id(self)] = new
        for k, v in self.__dict__.items():
            if not k.startswith("_hooks") and k != "_post_hooks":
                new.__dict__[k] = copy.deepcopy(v, memo)
        return new

    def __repr__(self):
        d = self._arr
        body = np.array2string(d, separator=", ", prefix="tensor(",
                               formatter=None if d.dtype.kind != "f" else
                               {"float_kind": lambda v: _fmt(v, d)})
        extra = []
        if d.dtype != dtypes.get_default_dtype().np and d.dtype.kind != "i" and \
                d.dtype.kind != "b":
            extra.append(f"dtype={self.dtype!r}")
        if d.dtype.kind == "i" and d.dtype != np.int64:
            extra.append(f"dtype={self.dtype!r}")
        if self._t is not None:
            extra.append(f"grad_fn=<{self.grad_fn.name()}>")
        elif self._rg:
            extra.append("requires_grad=True")
        text = "tensor(" + body + "".join(", " + e for e in extra) + ")"
        return "Parameter containing:\n" + text if self._is_param else text

    # -- autograd --------------------------------------------------------------------
    def register_hook(self, hook):
        """Call ``hook(grad)`` when the gradient w.r.t. this tensor is computed; a
        returned tensor replaces the gradient.  Returns a handle with ``remove()``."""
        from .autograd.hooks import register_hook
        return register_hook(self, hook)

    def register_post_accumulate_grad_hook(self, hook):
        from .autograd.hooks import register_post_accumulate_grad_hook
        return register_post_accumulate_grad_hook(self, hook)

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        from .autograd.entry_points import backward
        backward([self], None if gradient is None else [gradient], retain_graph, create_graph,
                 inputs)


def _fmt(v, d):
    if np.isfinite(v) and float(v).is_integer() and np.all(np.isfinite(d)) and \
            np.all(np.mod(d, 1) == 0) and np.abs(d).max(initial=0) < 1e8:
        return f"{v:.0f}."
    return f"{v:.4f}"


_new = Tensor.__new__


def _leaf(d, rg=False, inference=False):
    """A tensor without history holding ``d`` (a float or an array, already normalised)."""
    o = _new(Tensor)
    o._d = d
    o._t = None
    o._tid = 0
    o._i = -1
    o._rg = rg
    if inference or STATE.inference:
        o._inference = True
    elif not STATE.grad and DUAL_LEVELS and DUAL_LEVELS[-1] and (
            d.__class__ is float or d.dtype.kind == "f"):   # (its tangent, if any, is
        o.__dict__["_no_grad_in_dual"] = True            # lost: forward_ad)
    return o


def _result(d, t, i, rg=True):
    """A tensor recorded as entry ``i`` of tape ``t``.  Under ``no_grad`` while tracing
    (``recording``), a result computed from tensors that require grad is recorded all
    the same, behind a ``detach`` entry: a replay recomputes its value, no gradient
    flows through it, and it does not require grad."""
    if rg and not STATE.grad:
        rec = STATE.trace
        if rec is not None and t is rec.tape:
            i = t.append(CODE["detach"], i, -1, d)
            rg = False
    o = _new(Tensor)
    o._d = d
    o._t = t
    o._tid = t.uid
    o._i = i
    o._rg = rg
    return o


def _unpickle(arr, rg, is_param):
    x = _leaf(_norm(arr), rg)
    if is_param:
        x._is_param = True
    return x


def from_array(a, rg=False):
    return _leaf(_norm(a), rg)


def recording(*tensors):
    """The tape to record on if any of ``tensors`` requires grad in grad mode; while
    tracing, also if any is a value of the traced tape that needs no grad (a mask, a
    detached value), so that a replay recomputes the result instead of freezing it (the
    result then needs no grad either: ``requires_grad``); else None.  Under ``no_grad``,
    only the traced tape, for traced values (the result: behind a detach, ``_result``)."""
    if not STATE.grad:
        rec = STATE.trace
        if rec is not None:
            uid = rec.tape.uid
            for x in tensors:
                if x.__class__ is Tensor and x._tid == uid:
                    return rec.tape
        return None
    for x in tensors:
        if x.__class__ is Tensor and x._rg:
            return current_tape(*tensors)
    rec = STATE.trace
    if rec is not None:
        uid = rec.tape.uid
        for x in tensors:
            if x.__class__ is Tensor and x._tid == uid:
                return current_tape(*tensors)
    return None


def requires_grad(*tensors):
    """Does any of ``tensors`` (Python numbers aside) require grad?"""
    for x in tensors:
        if x.__class__ is Tensor and x._rg:
            return True
    return False


def buf(t, x, saved=True):
    """Buffer index of Tensor ``x`` on tape ``t``."""
    i = x._i                  # before _tid: see elementwise._stage
    if x._tid == t.uid:
        return i
    if saved and x._inference:
        raise RuntimeError("Inference tensors cannot be saved for backward. To work around you "
                           "can make a clone to get a normal tensor and use it in autograd.")
    return t.register(x)
