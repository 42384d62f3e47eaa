"""Views and aliases: PyTorch's shared storage, for tensors that hold their own values.

A tapegrad tensor owns its value (tape entries hold copies), so sharing is kept as a
relation instead of as memory: a view (basic indexing, ``view``/``reshape``,
``transpose``/``permute``, ``squeeze``/``unsqueeze``, ``expand``, ``split``/``unbind``/
``chunk``, ``narrow``/``select``) and an alias (``detach()``, ``.data``) remember their
base and how to make themselves from it (``fn(base)``): ``mark`` keeps the relation,
this module reads it.  An in-place op then behaves as PyTorch's over shared storage
(``inplace.after_inplace``, above this module):

* through a view, the base changes too: with a history, as PyTorch's CopySlices (the
  base's new history places the view's new value, ``inplace.place``); without one (no
  grad, or through ``detach()``), its value only;
* after a tensor changes in place, its live views and aliases are made again from it
  (``inplace.refresh``): their values, and their histories where the base has one.

A view and its base share one version counter, as in PyTorch (``_version`` is kept
equal along the relation): the entries that hold the old values of any of them, live
views', dead views' (``bases`` on their tape: a recorded view's entry and its base's)
and the base's, are noted as modified (``inplace._note_modified``), so a backward that
needs one as a saved value raises PyTorch's error.  ``.data`` (``DATA``) shares the
storage but not the counter: a write through it bumps no version (PyTorch's backward
then silently reads the new value; tapegrad's tape holds the old one, so that backward
raises an error saying so).

PyTorch's errors come first (``check``): an in-place op on a view of a leaf that
requires grad, and on a view whose elements overlap (``expand``).  A tensor that was
never viewed pays nothing: the relation lives in ``__dict__`` of views and bases only.
``from_numpy`` arrays are written in place (``inplace._adopt``), so NumPy sees them.
"""
import weakref

import numpy as np

from . import tracing
from .grad_mode import STATE
from .ops.table import CODE
from .tensor import _leaf, _result, from_array


# the ``fn`` of views made several at once (unbind, split): PyTorch refuses an in-place
# op on one of them that requires grad, in grad mode
MULTI_OUTPUT = set()

DATA = 2    # ``detached`` of ``.data``: an alias with a version counter of its own


def mark(view, base, fn, arg=None, detached=False):
    """``view`` is ``fn(base, arg)`` sharing base's storage (``detached``: an alias
    without history, ``detach()``); returns ``view``.  (Hot: ``x[i]`` of a vector.)"""
    if view is base:
        return view
    view.__dict__["_view"] = (base, fn, arg, detached)
    if base._version and detached is not DATA:
        view._version = base._version            # (one counter: kept equal)
    if not STATE.grad and base._rg and not detached:
        view.__dict__["_no_grad_view"] = True    # (an in-place op in grad mode: refused)
    t = view._t
    if t is not None and not detached:           # the entry it was made from, for its saver
        e = base._i if base._tid == t.uid else t._ext.get(id(base))
        if e is not None:
            t.autograd.bases[view._i] = (e, arg[-1] if fn in MULTI_OUTPUT else None)
    d = base.__dict__
    refs = d.get("_views")
    if refs is None:
        d["_views"] = [weakref.ref(view)]
    else:
        refs.append(weakref.ref(view))
        if not len(refs) & 63:               # now and then, forget dead views
            refs[:] = [r for r in refs if r() is not None]
    return view


def _same(x, arg):
    return x


def detach(self):
    """A new tensor without history sharing ``self``'s storage: in-place ops on either
    show in the other, as PyTorch's.  While tracing, a copy a replay recomputes."""
    if STATE.trace is not None and tracing.traced_entry(self) is not None:
        t, d = STATE.trace.tape, self._d
        o = _result(d, t, t.append(CODE["detach"], self._i, -1, d), False)
        tracing.alias(o, self)                # (eagerly, it shares self's storage)
        return o
    return mark(_leaf(self._d, False, self._inference), self, _same, None, True)


def data_alias(self):
    """``x.data``: an alias sharing storage but not the version counter (PyTorch's):
    writes through it bump no version, as optimizers' updates of ``p.data`` do."""
    if STATE.trace is not None and tracing.traced_entry(self) is not None:
        return detach(self)
    return mark(_leaf(self._d, False, self._inference), self, _same, None, DATA)


def is_contiguous(self, memory_format=None):
    return in_order(self)


def _link(x):
    return x.__dict__.get("_view") if x.__dict__ else None


def positions(base, fn, arg):
    """Flat positions in ``base`` of the elements of ``fn(base, arg)``, shaped like it.
    (The tensor of positions it views is dropped: a dead view, forgotten later.)"""
    return np.asarray(fn(from_array(np.arange(base.numel()).reshape(base._arr.shape)), arg)._arr)


def _storage_positions(x, link):
    """Flat positions of the elements of x (a view, ``link`` its link) in its outermost
    base's storage, in x's order."""
    pos = np.arange(x.numel())
    while link is not None and not link[3]:
        pos = positions(link[0], link[1], link[2]).reshape(-1)[pos]
        link = _link(link[0])
    return pos


def in_order(x):
    """Are x's elements consecutive, in order, in its base's storage (PyTorch's
    contiguity of a view)?  A tensor that is no view holds its own, in order."""
    link = _link(x)
    if link is None or link[3]:
        return True
    pos = _storage_positions(x, link)
    return pos.size < 2 or bool((np.diff(pos) == 1).all())


def viewable_as(x, shape):
    """Can x's elements be read as ``shape`` in place, as PyTorch's ``view`` (else
    ``reshape`` copies)?  They can when x holds its own or is contiguous, or when its
    positions in the storage, read in order into ``shape``, are strided (a transpose
    read with a trailing 1 added: yes; flattened: no)."""
    link = _link(x)
    if link is None or link[3] or [n for n in x._arr.shape if n != 1] == \
            [n for n in shape if n != 1]:          # (only ones added or dropped: always)
        return True
    pos = _storage_positions(x, link)
    if pos.size < 2 or (np.diff(pos) == 1).all():
        return True
    pos = pos.reshape(shape)
    want = pos.flat[0]
    for d, n in enumerate(shape):
        if n > 1:
            step = pos[(0,) * d + (1,) + (0,) * (len(shape) - d - 1)] - pos.flat[0]
            want = want + (np.arange(n) * step).reshape((n,) + (1,) * (len(shape) - d - 1))
    return bool((pos == want).all())


def check(x):
    """PyTorch's errors for an in-place op on ``x`` if it is a view: of a leaf that
    requires grad (grad mode), or with elements sharing one memory location."""
    link = _link(x)
    if link is None or link[3]:
        return
    _, fn, arg, _ = link
    if STATE.grad and x.__dict__.get("_no_grad_view"):
        raise RuntimeError(
            "A view was created in no_grad mode and is being modified inplace with grad mode "
            "enabled. Given that this use case is ambiguous and error-prone, it is forbidden. "
            "You can clarify your code by moving both the view and the inplace either both "
            "inside the no_grad block (if you don't want the inplace to be tracked) or both "
            "outside (if you want the inplace to be tracked).")
    if fn in MULTI_OUTPUT and x._rg and STATE.grad:
        raise RuntimeError(
            f"Output {arg[-1]} of {x.grad_fn.name().replace('Backward0', '')} is a view and is "
            "being modified inplace. This view is the output of a function that returns "
            "multiple views. Such functions do not allow the output views to be modified "
            "inplace. You should replace the inplace operation by an out-of-place one.")
    pos = _storage_positions(x, link)         # (a view of an expand overlaps too)
    if np.unique(pos).size < pos.size:
        raise RuntimeError("unsupported operation: more than one element of the written-to "
                           "tensor refers to a single memory location. Please clone() the "
                           "tensor before performing the operation.")
    while link is not None and not link[3]:
        base = link[0]
        if base._t is None and base._rg and STATE.grad:
            raise RuntimeError("a view of a leaf Variable that requires grad is being used in "
                               "an in-place operation.")
        link = _link(base)
