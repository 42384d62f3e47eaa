"""The Tape: its life (a new tape, starting over, moving on, release), sources, the
thread's current tape, and the observers of recording (anomaly mode's source lines,
saved_tensors_hooks).  Staging and flush are ``staging.py``'s.  See the package's
docstring."""
import itertools
import os
import sys
import threading
import weakref

import numpy as np

from ..grad_mode import STATE
from ..ops.table import CODE
from .arena import _col_pool, _pool_arena, _viewed, small_arena, zeros
from .columns import _COLUMNS, Layout
from .entry_state import EntryState
from .staging import Staging, _observed_append, _observed_stage_put, _observers, _plain_append


LEAF, CONST, EXTERNAL = CODE["leaf"], CODE["const"], CODE["external"]
_STAGE_BLOCK = 4096          # staged scalar entries per flush
_ROTATE_ENTRIES = 1 << 12    # a default tape still in use past these sizes is left to
_ROTATE_VALUES = 1 << 23     # its tensors, and recording moves on to a new one (at an op
_ROTATE_HARD = 1 << 18       # with no input on it, so a chained graph stays on one tape:
                             # a loop's steps go tape by tape and die with their tensors;
                             # the soak's assemble loop, 1 << 16: RSS x1.37, 1 << 12: x1.09)
_uids = itertools.count(1)
_live = weakref.WeakValueDictionary()   # uid -> tape, for in-place ops on leaves

SECOND_BACKWARD = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")


PLACE_MIN = 4096             # float64 values this large go into the arena at once (sources,
                             # and results computed straight into it: elementwise._large)


class Tape(Staging):
    """A flat recording of operations.  ``with tapegrad.Tape() as t:`` scopes recording."""

    def __init__(self, capacity=256):
        self.uid = 0
        self._prev = []
        self.lock = threading.RLock()   # held by a backward from its sweep to consumption
        cols = _col_pool.pop() if _col_pool else None
        self.__dict__.update(cols if cols else
                             {name: np.empty(capacity, dtype) for name, dtype in _COLUMNS})
        self.V = small_arena(capacity)
        self._reset()

    def _reset(self):
        """Start over as a new, empty tape (a new uid) over the same arrays (over a new
        value arena if tensors hold views of this one)."""
        if _viewed(self.V):
            self.V = np.empty(self.V.shape[0])
        if self.uid:
            _live.pop(self.uid, None)     # (the old uid names no tape any more)
        self.uid = next(_uids)
        self.owner = threading.get_ident()   # the thread that records on it (for release)
        _live[self.uid] = self
        self.next = 0            # index of the next entry (staged entries included)
        self.n = 0               # entries written to the columns
        self.stage = []          # staged scalar entries, flat 6-tuples (see flush)
        self._stage_put = (_observed_stage_put(self) if Tape.append is not _plain_append
                           else self.stage.extend)
        self.locs = {}           # entry -> LOCATIONS id, in anomaly mode
        self.astage = []         # staged array entries
        self._long_meta = False  # an index list is staged: flush concatenates arrays
        self.flush_at = _STAGE_BLOCK
        self.ni = 0
        self.nv = 0
        self.max_size = 1        # largest buffer: sizes the sweep's scratch space
        self.sources = {}        # entry -> the Tensor of a leaf/const/external entry
        self.names = {}          # entry -> Node name of a composite op's last step
        self.autograd = EntryState()   # what autograd keeps per entry (hooks, ...)
        self._ext = {}           # id(foreign tensor) -> its external entry
        self.foreign = {}        # external entry -> (tape, entry) of the value it stands for
        self.released = False
        self.retired = False     # a backward consumed entries: recording moves on (any thread)
        self._defer = 1          # entries until maintain looks again for an op to move on at
        self.placed = {}         # staged entry -> arena offset of its value (append_into)

    def maintain(self, held=0, inputs=()):
        """Called at the start of an op once ``flush_at`` is reached (every block of
        entries, or after the value arena grew): flush the stage and, for the thread's
        default tape, hand back an empty tape if no tensor refers to this one any more
        (it starts over in place) or if it grew very large while still in use (it lives
        on until its tensors die; new ops reach its graphs through external entries).
        ``held``: references to the tape that the caller's frame holds.

        A large tape moves on at an op none of whose ``inputs`` is on it (a loop's next
        step, say): an op with one there would put an external entry on the new tape,
        which keeps the old tape alive as long as the new one lives, and the next move
        the same, a chain of tapes that never dies (a forward-only loop grew so).  Past
        ``_ROTATE_HARD`` entries (a computation chained from step to step), it moves on
        anyway."""
        self.flush()
        self.flush_at = self.next + _STAGE_BLOCK
        if STATE.tape is not self or self._prev:
            return self
        if self.retired:         # a backward (maybe in another thread) consumed entries
            STATE.tape = Tape()
            return STATE.tape
        # references: STATE.tape, the caller's ``t`` (``held``), ``self``, the argument
        if sys.getrefcount(self) <= 3 + held:
            self._reset()      # nothing refers to its entries: record over them
            return self
        if self.next < _ROTATE_ENTRIES and self.nv < _ROTATE_VALUES:
            return self
        if self.next < _ROTATE_HARD and any(getattr(x, "_t", None) is self for x in inputs):
            self._defer = min(2 * self._defer, _STAGE_BLOCK)   # look again soon, then
            self.flush_at = self.next + self._defer            # less and less often
            return self
        STATE.tape = Tape()
        return STATE.tape

    def register(self, t):
        """Buffer index of Tensor ``t`` on this tape, adding a source entry if needed."""
        if t._t is not None:                       # a non-leaf of another tape
            i = self._ext.get(id(t))
            if i is None:
                i = self._source(EXTERNAL, t)
                self._ext[id(t)] = i
                self.foreign[i] = (t._t, t._i)     # where a backward goes on from i
                # for an in-place op that gives t a new history (inplace.keep_old_history)
                t.__dict__.setdefault("_ext_tapes", []).append(weakref.ref(self))
            return i
        i = self._source(LEAF if t._rg else CONST, t)
        t._tid, t._i = self.uid, i      # in this order: readers read _i first
        return i

    def _source(self, code, t):
        d = t._d
        if d.__class__ is float:
            i = self.next
            self.next = i + 1
            self._stage_put((i, code, -1, -1, 0.0, d))
        elif d.size >= PLACE_MIN and d.dtype.char == "d":   # placed now: the arena's
            i, _ = self.append_into(code, -1, -1, d.shape, d.size,      # size stays known
                                    lambda view: np.copyto(view, d))
        else:
            i = self.append(code, -1, -1, d)
        self.sources[i] = t
        return i

    # -- reading (Layout's, after a flush; size: call after flush) -------------------------
    def shape(self, i):
        self.flush()
        return Layout.shape(self, i)

    def extras(self, i):
        self.flush()
        return Layout.extras(self, i)

    def value(self, i):
        self.flush()
        if self.released:
            raise RuntimeError(SECOND_BACKWARD)
        return Layout.value(self, i)

    def release(self):
        """Drop the value arena once no entry left reads a value; keep the structure for
        views.  Shared read-only zeros stand in (``arena.zeros``) so that a later
        backward through entries that read no value (``c = b + 1``) can still sweep."""
        if not self.released:
            self.released = True
            if not _viewed(self.V):
                _pool_arena(self.V)
                self.V = zeros(self.nv)
            # else tensors hold views of it (their memory stays anyway): kept, for
            # __del__ to pool once they are gone

    def __del__(self):
        _pool_arena(self.V)
        if len(_col_pool) < 4:
            _col_pool.append({name: getattr(self, name) for name, _ in _COLUMNS})

    def __len__(self):
        return self.next

    # -- scoping ---------------------------------------------------------------------
    def __enter__(self):
        self._prev.append(STATE.tape)
        STATE.tape = self
        self.owner = threading.get_ident()
        return self

    def __exit__(self, *exc):
        STATE.tape = self._prev.pop()
        return False

    # -- showing: tapegrad.viz adds the tables (rows, to_pandas, the text and notebook views)
    def __repr__(self):
        return f"<Tape {self.uid}: {self.next} entries>"


def observe_entries(name, fn):
    """Call ``fn(tape, entry)`` as each entry is staged (``fn`` None: stop).  While no
    observer is set, recording runs its plain paths: no cost."""
    if fn is None:
        _observers.pop(name, None)
    else:
        _observers[name] = fn
    on = bool(_observers)
    Staging.append = _observed_append if on else _plain_append
    for ref in _live.valuerefs():      # a copy taken at once: other threads make tapes
        t = ref()
        if t is not None:
            t._stage_put = _observed_stage_put(t) if on else t.stage.extend


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # tapegrad/
LOCATIONS = []                 # interned (filename, line) of user code that recorded entries
_location_ids = {}


def _caller_location():
    """Id of the first frame outside tapegrad (the user's line that recorded an op)."""
    f = sys._getframe(2)
    while f is not None and f.f_code.co_filename.startswith(_PACKAGE):
        f = f.f_back
    key = (f.f_code.co_filename, f.f_lineno) if f is not None else ("?", 0)
    loc = _location_ids.get(key)
    if loc is None:
        loc = _location_ids[key] = len(LOCATIONS)
        LOCATIONS.append(key)
    return loc


def _note_location(t, i):
    t.locs[i] = _caller_location()


def record_locations(on):
    """Anomaly mode: note, per entry, the source line that recorded it (off: no cost)."""
    observe_entries("locations", _note_location if on else None)


def live_tape(uid):
    """The tape with this uid, if it is still alive (and has not started over)."""
    return _live.get(uid)


def current_tape(*inputs):
    """The tape that operations in this thread record onto (``inputs``: the op's
    tensors, see ``Tape.maintain``)."""
    t = STATE.tape
    if t is None:
        t = STATE.tape = Tape()
    elif t.next >= t.flush_at:
        t = t.maintain(1, inputs)
    return t


def roomy_tape(size, *inputs):
    """The thread's tape, for an entry of ``size`` values and the tensors of ``inputs``
    not on it yet: before the arena would grow (a copy of all of it) the tape may start
    over in place or recording move on to a new tape, as it does every block of entries
    (an empty arena just grows: there is nothing to copy)."""
    t = current_tape(*inputs)
    if t.nv:
        uid = t.uid
        for x in inputs:           # (tensors, or Python numbers)
            d = getattr(x, "_d", None)
            if d is not None and d.__class__ is not float and x._tid != uid:
                size += d.size
        if t.nv + size > t.V.shape[0]:
            t = t.maintain(1, inputs)
    return t


def replace_default(old):
    """After a backward without retain_graph, new recording starts on a new tape; the
    old one lives as long as its tensors do.  The backward may run in another thread
    than the one recording on ``old``: that thread moves on at its next op (``retired``,
    and ``flush_at`` reached, sends it through ``maintain``)."""
    old.retired = True
    old.flush_at = -1
    if STATE.tape is old and not old._prev:
        STATE.tape = Tape()
