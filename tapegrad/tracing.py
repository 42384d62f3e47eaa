"""Tracing state and guards: what a recording for replay must remember.

While ``tapegrad.trace`` records a function, ``STATE.trace`` holds the recording.  Two
things then change in the ops below: comparisons of traced values are recorded (as
``compare`` entries, so that a replay recomputes masks), and every place where a traced
value leaves the tape for Python (``bool``, ``float``, ``int``, ``.item()``,
``.tolist()``, ``.numpy()``, the positions ``max(dim)`` / ``argmax`` chose) notes a guard:
what the replay must find again for the recorded tape to be the right one.
"""
from .grad_mode import STATE

G_EQUAL, G_TRUTH, G_ARGMAX, G_ARGMIN = 0, 1, 2, 3   # as kernels.replay


class Recording:
    """One trace in progress: its tape and the guards noted so far, as
    (kind, entry, data, source location) tuples."""

    def __init__(self, tape):
        self.tape = tape
        self.guards = []


def traced_entry(x):
    """The entry of tensor ``x`` on the tape being traced, or None (no trace, or a
    value the trace does not depend on)."""
    rec = STATE.trace
    if rec is None or x._tid != rec.tape.uid:
        return None
    return x._i


def note(kind, x, data):
    """Note a guard on tensor ``x`` (if it is traced): ``data`` is what the replay must
    find (see ``kernels.replay.guards_hold``)."""
    e = traced_entry(x)
    if e is not None:
        import sys
        f = sys._getframe(2)
        STATE.trace.guards.append((kind, e, tuple(float(v) for v in data),
                                   (f.f_code.co_filename, f.f_lineno)))
