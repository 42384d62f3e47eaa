"""The tape: a flat Wengert list of entries, struct-of-arrays (``columns.py``: the
columns and the entry layout; ``arena.py``: value arenas and their pools;
``staging.py``: staging entries and flushing them into the columns; ``entry_state.py``:
what autograd keeps per entry; ``tape.py``: a tape's life and the thread's current tape).

Entry ``i`` produces buffer ``i``.  Columns (NumPy arrays grown by doubling):

  ``OP``    op code (``ops.table``: stable, explicit, ``BY_CODE[code]`` is the op)
  ``A B``   input buffer indices (-1: the operand is the constant ``C``)
  ``C C2``  constants (a Python scalar operand; clamp's bounds)
  ``OFF``   offset of the buffer's values in the value arena ``V``
  ``META``  offset of the buffer's metadata in ``IAUX`` (-1 for a 0-d scalar):
            ``[size, ndim, *shape, *op-specific extras]``
  ``FLAGS`` ``CONSUMED`` (swept by a backward without retain_graph), ``HIDDEN``
            (an internal step of a composite op, e.g. a broadcast), ``HOOKED`` (Python
            waits for this entry in the sweep: a tensor hook, a Node hook, a saved
            value packed by ``saved_tensors_hooks``)

Recording stages entries in Python lists (a scalar op appends one flat 5-tuple, an
array op one row with its value); ``flush`` moves them into the columns and the value
arena with a few vectorised copies, before anything reads the tape and every
``_STAGE_BLOCK`` entries.  A default tape that no tensor refers to any more starts over
in place; one that grew very large while in use is left to its tensors.

Leaves live outside the tape: the first time a leaf (or a constant, or a tensor of
another tape) is used, it gets a ``source`` entry holding its value.

A large float64 elementwise result is computed straight into the arena
(``append_into``): its tensor's value is a view of ``V`` and nothing is copied (fresh
memory costs page faults, about 2.5 us per 4 KiB here, more than the op itself).  Such
values are never written to (in-place ops rebind), and an arena that views still
refer to is never reused: ``_reset``, ``release`` and the pools check its refcount.
"""
from .arena import _pool, on_release, release_pools, watch as watch_pools
from .columns import COLUMNS, CONSUMED, HIDDEN, HOOKED, SINGLE, Y_TRANSPOSED, Layout, y_blocks
from .entry_state import EntryState
from .tape import (CODE, CONST, EXTERNAL, LEAF, LOCATIONS, PLACE_MIN, SECOND_BACKWARD, Tape,
                   _live,
                   _plain_append, current_tape, live_tape, observe_entries, record_locations,
                   replace_default, roomy_tape)

__all__ = ["CODE", "COLUMNS", "CONST", "CONSUMED", "EXTERNAL", "EntryState", "HIDDEN", "HOOKED",
           "LEAF", "LOCATIONS", "Layout", "PLACE_MIN", "SECOND_BACKWARD", "Tape", "_live", "_plain_append",
           "_pool", "current_tape", "live_tape", "observe_entries", "on_release",
           "record_locations", "release_pools", "replace_default", "roomy_tape", "watch_pools"]
