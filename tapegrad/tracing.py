"""Tracing state and guards: what a recording for replay must remember.

While ``tapegrad.trace`` records a function, ``STATE.trace`` holds the recording.  Two
things then change in the ops below: comparisons of traced values are recorded (as
``compare`` entries, so that a replay recomputes masks), and every place where a traced
value leaves the tape for Python (``bool``, ``float``, ``int``, ``.item()``,
``.tolist()``, ``.numpy()``, the positions ``max(dim)`` / ``argmax`` chose) notes a guard:
what the replay must find again for the recorded tape to be the right one.  The same
holds where a traced value becomes positions or a constant inside tapegrad (a mask as an
index, a mask's count, an integer or bool result, a class weight): ``freeze``.  Values
without gradient (``no_grad``, ``detach``) are recorded, not frozen (``tensor.recording``).
"""
import os
import sys
import warnings
import weakref

import numpy as np

from .grad_mode import STATE

G_EQUAL, G_TRUTH, G_ARGMAX, G_ARGMIN = 0, 1, 2, 3   # as kernels.replay


class Recording:
    """One trace in progress: its tape and the guards noted so far, as
    (kind, entry, data, source location) tuples."""

    def __init__(self, tape):
        self.tape = tape
        self.guards = []
        self.inputs = ()           # the traced arguments (leaves), once made
        self.frozen = []           # (entry, (file, line), warning registry): float guards


def traced_entry(x):
    """The entry of tensor ``x`` on the tape being traced, or None (no trace, or a
    value the trace does not depend on)."""
    rec = STATE.trace
    if rec is None or x._tid != rec.tape.uid:
        return None
    return x._i


class TracerWarning(UserWarning):
    """A traced value leaves the recorded program as a constant (a Python number, a NumPy
    array, a tensor without history): the recording then replays only where that value
    is the same, and records again elsewhere (as ``torch.jit.TracerWarning`` warns)."""


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def user_frame():
    """The innermost frame outside tapegrad: the user's line that a guard stands for."""
    f = sys._getframe(1)
    while f.f_back is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    return f


def note(kind, x, data):
    """Note a guard on tensor ``x`` (if it is traced): ``data`` is what the replay must
    find (see ``kernels.replay.guards_hold``).  A guard that a float value be equal
    (``G_EQUAL`` on a float tensor: a number or constant taken out of the recording)
    holds at few other inputs: the recording warns for it if the value depends on the
    inputs (``warn_frozen``)."""
    e = traced_entry(x)
    if e is not None and x._t is None and not any(x is i for i in STATE.trace.inputs):
        e = None                    # a constant (a parameter): the same at every replay
    if e is not None:
        f = user_frame()
        where = (f.f_code.co_filename, f.f_lineno)
        STATE.trace.guards.append((kind, e, tuple(float(v) for v in data), where))
        if kind == G_EQUAL and x.dtype.is_floating_point:
            STATE.trace.frozen.append((e, where, f.f_globals.setdefault("__warningregistry__",
                                                                        {})))


def warn_frozen(rec, depends):
    """One ``TracerWarning`` per line where a float that depends on the inputs
    (``depends[entry]``) became a constant of the recording ``rec``."""
    for e, (filename, lineno), registry in rec.frozen:
        if depends[e]:
            warnings.warn_explicit(
                "a traced value becomes a constant here (a Python number, a NumPy array or "
                "a tensor without history): the recording replays only at inputs that give "
                "the same value, and records again at others", TracerWarning, filename,
                lineno, registry=registry)


def alias(o, base):
    """``o`` is ``base.detach()`` on the traced tape: a recomputed copy, where eagerly it
    shares base's storage.  Noted both ways, so that an in-place op on either, while the
    other lives, is refused (``inplace._check_traced_write``) instead of replayed without
    the other's change."""
    o.__dict__["_traced_alias"] = weakref.ref(base)
    refs = base.__dict__.setdefault("_traced_aliases", [])
    refs[:] = [r for r in refs if r() is not None] + [weakref.ref(o)]


def shares_storage(x):
    """Is ``x`` a traced ``detach()`` of a live tensor, or has it a live one?"""
    d = x.__dict__
    if not d:
        return False
    base = d.get("_traced_alias")
    return (base is not None and base() is not None) or any(
        r() is not None for r in d.get("_traced_aliases", ()))


def freeze(*xs):
    """Traced tensors among ``xs`` whose values leave the recording here (to index
    positions, a bool or integer result, a constant): guard that a replay finds the same
    values, so that it never answers with positions or constants of other inputs."""
    rec = STATE.trace
    if rec is None:
        return
    uid = rec.tape.uid
    for x in xs:
        if getattr(x, "_tid", None) == uid:
            note(G_EQUAL, x, np.ravel(x._arr))
