"""In-place ops and version counters.

A tapegrad tensor does not share storage with the tape (entries hold copies), so an
in-place op is its out-of-place op followed by the tensor adopting the result: its
value, and (when recorded) the new entry as its history, as PyTorch rebases a
non-leaf.  ``_version`` counts the modifications.  The entry that held the old value is
noted on its tape; a backward that needs that entry as a saved value raises PyTorch's
error, as PyTorch would (ops that save nothing of it are fine; the check is in the
engine).  A tape on which no in-place op happened pays nothing.
"""
import threading
import weakref

import numpy as np

from . import dtypes, views
from .factories import _rng
from .grad_mode import STATE
from .record import broadcast_shape
from .shape_ops import _is_advanced, byte_masks, getitem, legacy_key, scatter_sum
from .tape import HIDDEN, current_tape, live_tape
from .tensor import Tensor, _leaf, _norm, _result, from_array
from .tracing import freeze, shares_storage, traced_entry

_F64 = np.dtype(np.float64)


def _note_modified(x, data=False):
    """Record on the tapes that hold x's value (its own entry, and its external entries
    on other tapes) that the buffer holding it is about to change: entries recorded
    before now that saved it are stale (those recorded later saw the old value as their
    input, which the tape keeps).  ``data``: changed through ``.data``, which PyTorch's
    version check does not see."""
    t = x._t if x._t is not None else live_tape(x._tid)
    if t is not None and x._i >= 0 and (x._t is not None or x._tid == t.uid):
        _note(t, x._i, x, data)
    for ref in x.__dict__.get("_ext_tapes", ()) if x.__dict__ else ():
        t = ref()
        i = t._ext.get(id(x)) if t is not None else None
        if i is not None:
            _note(t, i, x, data)


# the in-place op in progress on this thread: tape uid -> the tape's next entry when the
# op first noted a change on it.  The entries the op itself records (its out-of-place
# result, CopySlices into a base) read the values it changes as they were: only entries
# recorded before the op are stale (``y.t().sin_()`` saves the view's old value).
_OP = threading.local()


def _note(t, i, x, data):
    starts = getattr(_OP, "starts", None)
    now = t.next if starts is None else starts.setdefault(t.uid, t.next)
    first = t.autograd.modified.get(i)
    t.autograd.modified[i] = (weakref.ref(x), x._version + (not data),
                              first[2] if first else x._version, first[3] if first else now,
                              data and (first is None or first[4]))


def _adopt(x, compute):
    """x takes the value (in x's dtype) and the history of ``compute()``; version + 1."""
    if getattr(_OP, "starts", None) is not None:      # (a base taking a view's change)
        return _adopt_now(x, compute)
    _OP.starts = {}
    try:
        return _adopt_now(x, compute)
    finally:
        _OP.starts = None


def _adopt_now(x, compute):
    _check_traced_write(x)
    _note_modified(x)
    out = compute()
    if out.dtype is not x.dtype:
        if dtypes.category(out.dtype) > dtypes.category(x.dtype):
            raise RuntimeError(f"result type {dtypes.TORCH_NAMES[out.dtype.name][0]} can't be "
                               f"cast to the desired output type "
                               f"{dtypes.TORCH_NAMES[x.dtype.name][0]}")
        out = out.to(x.dtype)
    version = x._version + 1
    if out._t is not None and not out._rg and x._rg:
        # (while tracing, under no_grad: a recomputed value without gradient) x keeps its
        # history, as it does eagerly, so its new value is a constant: guarded
        freeze(out)
        out = _leaf(out._d)
    if out._t is not None:
        keep_old_history(x)
        _leave_source(x)
        if x._retains:         # .grad is the new version's gradient, as PyTorch's
            x._t.autograd.retained.pop(x._i, None)
            out._t.autograd.retained[out._i] = x
        x._t, x._tid, x._i, x._rg = out._t, out._tid, out._i, out._rg   # (False: traced)
    d = x._d
    if out._t is None:
        new_value(x)
    if out._t is None and x._t is None and d.__class__ is np.ndarray and \
            d.flags.writeable and d.shape == out._arr.shape:
        np.copyto(d, out._arr, casting="unsafe")  # in its own array (from_numpy's: shared)
    else:
        x._d = out._d
    x._version = version
    after_inplace(x)
    return x


def new_value(x):
    """x is about to take a new value and keep its history (an unrecorded write: no_grad,
    or a write through an alias): used again, it registers the new value on a tape (a
    source entry, or for a non-leaf an external one that leads on to its history), as
    its entry holds the old one; the external entries that stood for it on other tapes
    keep the old value too (``keep_old_history``), as the entries that read them saw."""
    keep_old_history(x)
    x._tid = 0


def _leave_source(x):
    """Before a constant x takes a history: the source entry that holds it on its tape
    gets a stand-in with its old value, so that the tape (which x will refer to) does
    not refer back to x.  Such a cycle would keep each tape of an assembling loop alive
    until the cyclic collector ran (the soak's RSS grew by a tenth)."""
    if x._t is None and x._tid:
        t = live_tape(x._tid)
        if t is not None and t.sources.get(x._i) is x:
            stand = _leaf(x._d)
            stand._tid, stand._i = x._tid, x._i
            t.sources[x._i] = stand


def _check_traced_write(x):
    """While tracing, an in-place op under no_grad on a traced input, or on a value the
    traced function computed, that requires grad: eagerly it keeps its history (its
    gradient) and takes a new value, which one tape entry cannot hold.  Refused, rather
    than replayed wrongly."""
    rec = STATE.trace
    if rec is not None and not STATE.grad and x._rg and (
            x._t is rec.tape or any(x is i for i in rec.inputs)):
        raise RuntimeError("an in-place op under no_grad on a traced tensor that requires grad "
                           "cannot be traced for replay (eagerly it keeps its gradient history "
                           "and takes another value); write into a detached copy (x.detach()"
                           ".clone()), or call the function eagerly")
    if rec is not None and shares_storage(x):
        raise RuntimeError("an in-place op on a detach()ed traced value, or on a traced tensor "
                           "whose detach() is still in use, cannot be traced for replay (eagerly "
                           "they share storage, so both change); clone() the detached value "
                           "first, or call the function eagerly")


def keep_old_history(x):
    """Before x takes a new history: the external entries that stand for x as it was on
    other tapes get a stand-in with x's old value and history, so that a backward
    through them does not follow x to its new history (which may lead back to them).
    (A constant's source entries need none: a backward follows only external entries
    to a history.)"""
    if x._t is None:
        return
    tapes = x.__dict__.pop("_ext_tapes", None) if x.__dict__ else None
    if tapes:
        stand = _result(x._d, x._t, x._i)
        for ref in tapes:
            t = ref()
            e = t._ext.pop(id(x), None) if t is not None else None
            if e is not None and t.sources.get(e) is x:
                t.sources[e] = stand


def _check(x):
    views.check(x)
    if x._t is None and x._rg and STATE.grad:
        raise RuntimeError("a leaf Variable that requires grad is being used in an in-place "
                           "operation.")
    if x._inference and not STATE.inference:
        raise RuntimeError("Inplace update to inference tensor outside InferenceMode is not "
                           "allowed.You can make a clone to get a normal tensor before doing "
                           "inplace update.See https://github.com/pytorch/rfcs/pull/17 for more "
                           "details.")


def check_broadcast(x, *operands):
    """An in-place op's tensor operands must broadcast to x's own shape: out of place the
    result would take the larger shape, which x (and the base it views) cannot.  Checked
    before anything is recorded or noted as modified, with PyTorch's messages (self's
    shape first, then each operand's, as its TensorIterator broadcasts them)."""
    shape = want = tuple(x.shape)
    for o in operands:
        if isinstance(o, Tensor):
            shape = broadcast_shape(shape, tuple(o.shape))
    if shape != want:
        raise RuntimeError(f"output with shape {list(want)} doesn't match the broadcast shape "
                           f"{list(shape)}")


def inplace_form(name, arity):
    """``x.name_(...)``: the op ``name`` out of place, adopted by x."""
    if arity == 1:
        def method(self, *args, **options):                  # (logit_'s eps)
            _check(self)
            return _adopt(self, lambda: getattr(Tensor, name)(self, *args, **options))
    else:
        def method(self, other, *, alpha=None, **options):     # (div_'s rounding_mode)
            _check(self)
            check_broadcast(self, other)
            if alpha is not None:
                other = other * alpha
            return _adopt(self, lambda: getattr(Tensor, name)(self, other, **options))
    method.__name__ = name + "_"
    return method


def clamp_(self, min=None, max=None):
    _check(self)
    check_broadcast(self, min, max)
    return _adopt(self, lambda: self.clamp(min, max))


def zero_(self):
    return _overwrite(self, _full_like(self, 0), "ZeroBackward0")


def fill_(self, value):
    """A 0-d tensor ``value`` is an input of the fill, as in PyTorch (FillBackward3): it
    gets the gradient of every element (NumPy's ``full`` would read it as an array)."""
    if not isinstance(value, Tensor):
        return _overwrite(self, _full_like(self, value), "FillBackward2")
    if value.ndim:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.ndim} dimensions.")
    return _overwrite(self, value.to(self.dtype), "FillBackward3")


def copy_(self, src):
    """``src``'s values cast to self's dtype, as PyTorch's: floats into integers toward
    zero (nan, inf and values out of range: C's cast, as NumPy's), into bools nonzero."""
    if not isinstance(src, Tensor):
        src = _leaf_like(np.asarray(src))
    if src.dtype is not self.dtype:
        src = src.to(self.dtype)
    return _overwrite(self, src, "torch::autograd::CopyBackwards")


def _overwrite(x, value, node):
    """x's elements all replaced by ``value`` (a tensor that broadcasts to x's shape), in
    place.  In grad mode, if x or value has a history, x's new history is one Node
    ``node`` (PyTorch's ZeroBackward0 / FillBackward2 / CopyBackwards) that sends x's old
    history no gradient and value all of it: ``where(False, x, value)``.  Under no_grad x
    keeps its history, as in PyTorch."""
    from .elementwise import where
    _check(x)
    check_broadcast(x, value)
    if tuple(value.shape) != tuple(x.shape):
        value = value.expand(*x.shape)
    if not (STATE.grad and (x._t is not None or value._rg)):
        return _adopt(x, lambda: value.detach())

    def overwritten():
        out = where(_leaf_like(np.zeros(x._arr.shape, bool)), x, value)
        if out._t is not None:
            out._t.names[out._i] = node
        return out
    return _adopt(x, overwritten)


def set_value_(self, value):
    """``self`` takes the NumPy array ``value`` (its shape; cast to its dtype) as its value
    in place, unrecorded: the way optimizers and initialisers write parameters under
    no_grad (``_adopt`` of an unrecorded result, without building that result).
    ``value`` must not be shared: arrays of tensors are never written to."""
    _check(self)
    _check_traced_write(self)
    d = self._d
    if value.dtype != (_F64 if d.__class__ is float else d.dtype):
        value = value.astype(_F64 if d.__class__ is float else d.dtype)
    _note_modified(self)
    new_value(self)
    self._d = _norm(value)
    self._version += 1
    after_inplace(self)
    return self


def uniform_(self, a=0.0, b=1.0):
    """Fill with samples of U(a, b) from tapegrad's generator (``manual_seed``)."""
    return set_value_(self, _rng[0].uniform(a, b, self._arr.shape))


def normal_(self, mean=0.0, std=1.0):
    return set_value_(self, _rng[0].normal(mean, std, self._arr.shape))


def setitem(self, key, value):
    """``x[key] = value``: in place.  Recorded as ``where(untouched, x, placed)``: the
    gradient flows to x's untouched elements and, if ``value`` requires grad, through
    ``placed`` (``value`` broadcast to ``x[key]``'s shape and gathered to x's positions,
    hidden entries) to ``value``.  Where ``key`` repeats a position, the value written
    there last is kept, and each write gets the position's gradient, as PyTorch's.  The
    Node is PyTorch's: IndexPutBackward0 for an advanced key, else CopySlices."""
    from .elementwise import where
    key = legacy_key(key)
    byte_key, key = key, byte_masks(key)
    advanced = _is_advanced(key)
    if self._t is None and self._rg and STATE.grad:
        raise RuntimeError(("" if advanced else "a view of ") + "a leaf Variable that requires "
                           "grad is being used in an in-place operation.")
    _check(self)
    traced = STATE.trace is not None and (traced_entry(self) is not None or (
        isinstance(value, Tensor) and traced_entry(value) is not None))
    if traced and isinstance(key, Tensor) and key.dtype is dtypes.bool_ and \
            traced_entry(key) is not None and tuple(key.shape) == tuple(self.shape) and \
            self.dtype.is_floating_point and value.__class__ in (int, float):
        # a traced mask of x's shape and a number: a where that a replay recomputes
        return _adopt(self, lambda: where(key, value, self))
    shape = self._arr.shape
    # positions of the elements x[key] selects, shaped and ordered as x[key] (PyTorch's
    # indexing rules and errors: getitem of a tensor of positions)
    pos = np.asarray(getitem(_leaf_like(np.arange(self.numel()).reshape(shape)), key)._arr)
    if key is not byte_key and _masked_fill(key, value):
        raise RuntimeError("masked_fill_ only supports boolean masks, but got mask with dtype "
                           "unsigned char")
    node = "IndexPutBackward0" if advanced else "torch::autograd::CopySlices"
    return place(self, pos, value, node, advanced=advanced, traced=traced)


def _masked_fill(key, value):
    """Does PyTorch write ``x[key] = value`` as ``masked_fill_``: one element to write and
    one index tensor, a mask?  (Its masked_fill_ refuses a uint8 mask.)"""
    comps = key if isinstance(key, tuple) else (key,)
    indices = [k for k in comps if isinstance(k, (list, np.ndarray, Tensor))]
    return (value.numel() if isinstance(value, Tensor) else np.size(value)) == 1 and \
        len(indices) == 1 and indices[0].__class__ is Tensor and indices[0].dtype is dtypes.bool_


def place(self, pos, value, node=None, advanced=False, traced=False):
    """``self``'s elements at flat positions ``pos`` (shaped like the selection) take
    ``value`` (broadcast to pos's shape), in place: the body of ``x[key] = value``, and
    of an in-place op through a view (``views``: ``node`` "CopySlices")."""
    return _adopt(self, lambda: placed(self, pos, value, node, advanced, traced))


def placed(self, pos, value, node=None, advanced=False, traced=False):
    """``self`` with its elements at flat positions ``pos`` replaced by ``value``
    (broadcast to pos's shape), out of place: recorded as ``where(untouched, x, placed)``
    when a gradient or a trace needs it.  Where ``pos`` repeats a position the value
    written last is kept, and every write gets that position's gradient, as PyTorch's
    IndexPutBackward0 (``_every_write``)."""
    from .elementwise import where
    shape = self._arr.shape
    v = value._arr if isinstance(value, Tensor) else np.asarray(value)
    vshape = write_shape(value, pos, advanced)
    writes = np.broadcast_to(v.reshape(vshape), pos.shape)
    arr = np.array(self._arr)                    # a copy: the tape may hold the old array
    arr.reshape(-1)[pos.reshape(-1)] = writes.reshape(-1)
    value_rg = isinstance(value, Tensor) and value._rg
    if not ((self._rg or value_rg) and STATE.grad) and not traced:
        return _leaf_like(arr)
    untouched = np.ones(self.numel(), bool)
    untouched[pos.reshape(-1)] = False
    untouched = _leaf_like(untouched.reshape(shape))
    if pos.size == 0 or not value_rg and not (isinstance(value, Tensor) and
                                              traced_entry(value) is not None):
        # (nothing selected: value is not read, and gets a zero gradient)
        return _named(reading(where(untouched, self, _leaf_like(arr)), value), node)
    flat_pos = pos.reshape(-1)
    src = np.zeros(self.numel(), np.int64)       # the write each position keeps (the last)
    src[flat_pos] = np.arange(pos.size)
    t = current_tape()
    start = t.next
    flat = value.reshape(vshape).broadcast_to(pos.shape).reshape(-1)
    spread = _every_write(flat[_leaf_like(src)], flat, flat_pos, src)
    spread = spread.reshape(shape)
    t.flush()
    t.FLAGS[start:t.next] |= HIDDEN              # one node: where(x, value)
    return _named(where(untouched, self, spread), node)


def reading(out, value):
    """``out``, recorded as reading ``value`` where that requires grad (which gets a zero
    gradient): an op that wrote none of value's elements still has it as an input, and
    its result requires grad, as PyTorch's."""
    from .elementwise import where
    if not (isinstance(value, Tensor) and value._rg and STATE.grad):
        return out
    return where(_leaf_like(np.ones(out._arr.shape, bool)), out, value.sum().to(out.dtype))


def write_shape(value, pos, advanced):
    """The shape that ``value`` broadcasts from to the positions ``pos``: its own, less
    leading ones beyond pos's dims (dropped, as PyTorch's); PyTorch's error if it does not
    broadcast."""
    v = value._arr if isinstance(value, Tensor) else np.asarray(value)
    vshape = v.shape
    while len(vshape) > pos.ndim and vshape[0] == 1:
        vshape = vshape[1:]
    if len(vshape) > pos.ndim or any(a not in (1, b) for a, b in zip(vshape[::-1],
                                                                     pos.shape[::-1])):
        raise RuntimeError(_shape_mismatch(v, pos.shape, advanced))
    return vshape


def _every_write(kept, flat, flat_pos, src):
    """``kept`` (the value each position keeps, flat) with the gradient of each position
    also sent to the writes to it that were overwritten: less the sum, at their
    positions, of ``w.detach() - w`` over those writes ``w``, which is +0.0 (``x - +0.0``
    is x, -0.0 included) but has gradient 1.  A write that is not finite (nan there) is
    left out, and gets no gradient."""
    from .elementwise import where
    lost = np.flatnonzero(src[flat_pos] != np.arange(flat_pos.size))
    if not lost.size:
        return kept
    w = flat[_leaf_like(lost)]
    zero = w.detach() - w
    zero = where(zero == zero, zero, 0.0)
    return kept - scatter_sum(zero, flat_pos[lost], kept.numel(), tuple(kept.shape))


def _named(out, node):
    if node is not None and out._t is not None:
        out._t.names[out._i] = node
    return out


def _shape_mismatch(v, want, advanced):
    """PyTorch's message when ``x[key] = v`` cannot broadcast v to x[key]'s shape."""
    got = v.shape
    if advanced:
        return (f"shape mismatch: value tensor of shape {list(got)} cannot be broadcast to "
                f"indexing result of shape {list(want)}")
    if len(got) > len(want):
        kind = {"float64": "Double", "float32": "Float", "int64": "Long", "bool": "Bool"}.get(
            v.dtype.name, "")
        return (f"expand(torch.{kind}Tensor{{{list(got)}}}, size={list(want)}): the number of "
                f"sizes provided ({len(want)}) must be greater or equal to the number of "
                f"dimensions in the tensor ({len(got)})")
    lead = len(want) - len(got)
    d = next(d for d, n in enumerate(got) if n != 1 and n != want[lead + d])
    return (f"The expanded size of the tensor ({want[lead + d]}) must match the existing size "
            f"({got[d]}) at non-singleton dimension {lead + d}.  Target sizes: {list(want)}.  "
            f"Tensor sizes: {list(got)}")


def _leaf_like(arr):
    return from_array(arr)


def _full_like(x, value):
    return _leaf_like(np.full(x._arr.shape, dtypes.scalar_in(value, x._arr.dtype),
                              x._arr.dtype))


# -- views after an in-place change: through a view its base changes too; a changed
# base's live views are made again ------------------------------------------------------------
def after_inplace(x, data=False):
    """``x`` changed in place: its base takes the change (which goes on up through the
    base's own in-place path), or, at the outermost base, its views are made again.
    ``data``: the change came through ``.data``, which bumps no version from there on."""
    link = views._link(x)
    if link is not None:
        _write_into(x, *link, data)
    elif x.__dict__:
        refresh(x, data)


def _write_into(view, base, fn, arg, detached, data=False):
    pos = views.positions(base, fn, arg)
    traced = traced_entry(view) is not None or traced_entry(base) is not None
    data = data or detached is views.DATA
    if not detached and not data and (traced or STATE.grad and (view._t is not None or base._t is not None)
                         and (view._rg or base._rg)):
        # (base's in-place path goes on up; while tracing, recorded so a replay redoes it)
        place(base, pos, view, "torch::autograd::CopySlices", traced=traced)
        return
    vals = np.asarray(view._arr, base._arr.dtype).reshape(-1)
    d = base._d
    _note_modified(base, data)
    new_value(base)
    if d.__class__ is float:
        base._d = float(vals[0])
    elif base._t is None and d.flags.writeable:
        d.flat[pos.reshape(-1)] = vals        # in the base's own array (a NumPy user's)
    else:
        d = np.array(d)
        d.flat[pos.reshape(-1)] = vals
        base._d = d
    if not data:
        base._version += 1
    after_inplace(base, data)


def refresh(base, data=False):
    """Make ``base``'s live views again from it (values; histories where it has one),
    and theirs in turn; the entries that held their old values are noted as modified
    (``data``: through ``.data``, with no version bumped)."""
    refs = base.__dict__.get("_views") if base.__dict__ else None
    if not refs:
        return
    live = []
    for ref in refs:
        v = ref()
        if v is None:
            continue
        live.append(ref)
        _, fn, arg, detached = v.__dict__["_view"]
        quiet = data or detached is views.DATA
        _note_modified(v, quiet)
        if detached:
            v._d = base._d if base._d.__class__ is float else np.asarray(base._arr)
            v._tid = 0
        else:
            new = fn(base, arg)
            if new._t is not None or v._t is None or STATE.grad:
                v._t, v._tid, v._i, v._rg = new._t, new._tid, new._i, new._rg
            else:                     # (no_grad: v keeps its history, takes the value)
                new_value(v)
            v._d = new._d
        if detached is not views.DATA:
            v._version = base._version
        refresh(v, quiet)
    refs[:] = live
