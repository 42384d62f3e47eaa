"""The Tape: recording (staging, flush), sources, the thread's current tape, and the
observers of recording (anomaly mode's source lines, saved_tensors_hooks).  See the
package's docstring."""
import itertools
import math
import os
import sys
import threading
import weakref

import numpy as np

from ..grad_mode import STATE
from ..ops.table import CODE
from .arena import _col_pool, _grow, _pool, _pool_arena, _viewed, small_arena, zeros
from .columns import _COLUMNS, Layout
from .entry_state import EntryState


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


_EMPTY = np.empty(0)
_FEW_ROWS = 6               # scalar / array rows a flush writes one by one (else in bulk)
PLACE_MIN = 4096             # float64 values this large go into the arena at once (sources,
                             # and results computed straight into it: elementwise._large)


class Tape(Layout):
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
        self.released = False
        self.retired = False     # a backward consumed entries: recording moves on (any thread)
        self._defer = 1          # entries until maintain looks again for an op to move on at
        self.placed = {}         # staged entry -> arena offset of its value (append_into)

    # -- recording -------------------------------------------------------------------
    def flush(self):
        """Move the staged entries into the columns and their values into the arena.

        Scalar entries are staged as flat 6-tuples (index, code, a, b, c, value); array
        entries as (index, code, a, b, c, c2, flags, value, size, len(meta), meta).

        Interrupt-safe (a Ctrl-C may land on any line): the stage is cleared and the
        counters move only at the end, so a flush cut short is redone whole by the next
        one; an index that ``next`` handed out but whose op was cut short before staging
        it (a gap) becomes a 0-d constant that nothing uses."""
        st, ast = self.stage, self.astage
        if not st and not ast:
            return
        n, end, nv, ni = self.n, self.next, self.nv, self.ni
        ks = len(st) // 6
        if ast:
            rows = list(zip(*ast))
            sizes, mlens = rows[8], rows[9]
            nva, nia = sum(sizes), sum(mlens)
        else:
            nva = nia = 0
        self._reserve(end, nv + ks + nva, ni + nia)
        gaps = ks + len(ast) != end - n
        if gaps:
            self._fill_gaps(n, end, st, ast)
        if ks and ks <= _FEW_ROWS:
            self._write_scalars(st, nv)
        elif ks:
            blk = np.fromiter(st, np.float64, 6 * ks).reshape(ks, 6)
            idx = blk[:, 0].astype(np.int64)
            self.OP[idx] = blk[:, 1]
            self.A[idx] = blk[:, 2]
            self.B[idx] = blk[:, 3]
            self.C[idx] = blk[:, 4]
            self.C2[idx] = 0.0
            self.META[idx] = -1
            self.FLAGS[idx] = 0
            self.OFF[idx] = np.arange(nv, nv + ks)
            self.V[nv:nv + ks] = blk[:, 5]
        if ast and len(ast) <= _FEW_ROWS:
            self._write_rows(ast, nv + ks, ni)
        elif ast:
            # bookkeeping in Python (array entries are few), bulk copies in NumPy
            idx = (slice(n, end) if not ks and not gaps else
                   np.fromiter(rows[0], np.int64, len(rows[0])))
            start = nv + ks
            offs = list(itertools.accumulate(sizes, initial=start))[:-1]
            metas_at = list(itertools.accumulate(mlens, initial=ni))[:-1]
            for col, values in zip((self.OP, self.A, self.B, self.C, self.C2, self.FLAGS,
                                    self.OFF, self.META), rows[1:7] + [offs, metas_at]):
                col[idx] = values
            vals = rows[7]
            if nva == len(vals) and all(v.__class__ is float or v.ndim == 0 for v in vals):
                # one element each (scalar code's pieces): concatenate costs 0.2 us apiece
                self.V[start:start + nva] = np.fromiter(vals, np.float64, nva)
            else:
                np.concatenate(vals, axis=None, out=self.V[start:start + nva], casting="unsafe")
            metas = rows[10]
            if self._long_meta:
                self.IAUX[ni:ni + nia] = np.concatenate([np.asarray(m, np.int64) for m in metas])
            else:
                self.IAUX[ni:ni + nia] = np.fromiter(itertools.chain.from_iterable(metas),
                                                     np.int64, nia)
            self.max_size = max(self.max_size, *sizes)
        for e, off in self.placed.items():
            self.OFF[e] = off
        # committed: only now the stage goes and the counters move
        st.clear()
        ast.clear()
        self.placed.clear()
        self._long_meta = False
        self.n, self.nv, self.ni = end, nv + ks + nva, ni + nia

    def _write_scalars(self, st, off):
        """``flush``'s staged scalar rows one by one, for a few of them (a dozen NumPy
        calls cost more): values from arena offset ``off``."""
        OP, A, B, C, C2, FLAGS, OFF, META, V = (self.OP, self.A, self.B, self.C, self.C2,
                                                 self.FLAGS, self.OFF, self.META, self.V)
        for k in range(0, len(st), 6):
            i = st[k]
            OP[i] = st[k + 1]
            A[i] = st[k + 2]
            B[i] = st[k + 3]
            C[i] = st[k + 4]
            C2[i] = 0.0
            META[i] = -1
            FLAGS[i] = 0
            OFF[i] = off
            V[off] = st[k + 5]
            off += 1

    def _write_rows(self, ast, off, mi):
        """``flush``'s array rows one by one, for a few of them (fewer NumPy calls than
        the bulk path): values from arena offset ``off``, metas from IAUX offset ``mi``."""
        OP, A, B, C, C2, FLAGS, OFF, META = (self.OP, self.A, self.B, self.C, self.C2,
                                              self.FLAGS, self.OFF, self.META)
        V, IAUX = self.V, self.IAUX
        top = self.max_size
        for i, code, a, b, c, c2, flags, value, size, mlen, meta in ast:
            OP[i] = code
            A[i] = a
            B[i] = b
            C[i] = c
            C2[i] = c2
            FLAGS[i] = flags
            OFF[i] = off
            META[i] = mi
            if size:
                V[off:off + size] = value.reshape(-1) if value.__class__ is np.ndarray else value
            IAUX[mi:mi + mlen] = meta
            off += size
            mi += mlen
            if size > top:
                top = size
        self.max_size = top

    def _fill_gaps(self, n, end, st, ast):
        """Entries ``n .. end - 1`` that nothing staged (an op interrupted between taking
        its index and staging its row) become unused 0-d constants."""
        covered = np.zeros(end - n, bool)
        covered[np.asarray(st[0::6], np.int64) - n] = True
        covered[np.fromiter((r[0] for r in ast), np.int64, len(ast)) - n] = True
        gap = np.flatnonzero(~covered) + n
        self.OP[gap] = CONST
        self.A[gap] = self.B[gap] = -1
        self.C[gap] = self.C2[gap] = 0.0
        self.META[gap] = -1
        self.FLAGS[gap] = 0
        self.OFF[gap] = 0

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

    def _reserve(self, n, nv, ni):
        if n > self.OP.shape[0]:     # the columns grow together, in one step (a Ctrl-C
            grown = {name: _grow(getattr(self, name), n)   # cannot leave some short)
                     for name, _ in _COLUMNS[:-1]}
            self.__dict__.update(grown)
        if nv > self.V.shape[0]:
            if self.nv:            # (values copied: check at the next op whether the tape
                self.flush_at = 0  # is still held)
            self.V = _grow(self.V, nv, _pool, self.nv)
        if ni > self.IAUX.shape[0]:
            self.IAUX = _grow(self.IAUX, ni)

    def append(self, code, a, b, value, extras=(), c=0.0, c2=0.0, flags=0):
        """Stage one entry for an array (or 0-d) ``value``; returns its index.  The
        value is copied into the arena at the next flush and must not change before."""
        value = np.asarray(value)
        i = self.next
        self.next = i + 1
        shape = value.shape
        size = value.size
        meta = (size, len(shape)) + shape
        if extras.__class__ is np.ndarray:   # long extras (index lists)
            meta = np.concatenate((np.array(meta, np.int64), extras))
            self._long_meta = True
        elif extras:
            meta += tuple(extras)
        self.astage.append((i, code, a, b, c, c2, flags, value, size, len(meta), meta))
        return i

    def append_rows(self, code, a, values, shape, extras):
        """Stage one entry per value of ``values`` (each of ``shape``; a Python float for
        a 0-d float64 one), all reading input ``a``: the pieces of one op.  The indices
        are handed out first (a Ctrl-C in between leaves gaps, which flush fills);
        ``extras(first)`` gives each entry's extras from the first one's index.
        Returns the first index."""
        first = self.next
        n = len(values)
        self.next = first + n
        size = math.prod(shape)
        head = (size, len(shape)) + shape
        put = self.astage.append
        for k, (v, x) in enumerate(zip(values, extras(first))):
            meta = head + x
            put((first + k, code, a, -1, 0.0, 0.0, 0, v, size, len(meta), meta))
            for fn in tuple(_observers.values()):    # (as ``append`` when observed)
                fn(self, first + k)
        return first

    def append_into(self, code, a, b, shape, size, fill, c=0.0, extras=()):
        """Stage an entry (elementwise, or a product with its ``extras``) whose value
        ``fill(view)`` writes straight into the arena; returns (index, view).  Observers
        of recording (anomaly mode's source lines, saved_tensors_hooks) see the entry
        once its value is there.  The caller took the tape from ``roomy_tape``."""
        i = self.next
        self.next = i + 1
        off = self.nv
        self._reserve(self.n, off + size, self.ni)
        self.nv = off + size
        self.max_size = max(self.max_size, size)
        self.placed[i] = off
        meta = (size, len(shape)) + shape + extras
        self.astage.append((i, code, a, b, c, 0.0, 0, _EMPTY, 0, len(meta), meta))
        view = self.V[off:off + size].reshape(shape)
        fill(view)
        for fn in tuple(_observers.values()):
            fn(self, i)
        return i, view

    def register(self, t):
        """Buffer index of Tensor ``t`` on this tape, adding a source entry if needed."""
        if t._t is not None:                       # a non-leaf of another tape
            i = self._ext.get(id(t))
            if i is None:
                i = self._source(EXTERNAL, t)
                self._ext[id(t)] = i
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
        return self

    def __exit__(self, *exc):
        STATE.tape = self._prev.pop()
        return False

    # -- showing: tapegrad.viz adds the tables (rows, to_pandas, the text and notebook views)
    def __repr__(self):
        return f"<Tape {self.uid}: {self.next} entries>"


# -- observers of recording: anomaly mode's source locations, saved_tensors_hooks --------
_plain_append = Tape.append
_observers = {}                # name -> fn(tape, entry), called as each entry is staged


def _observed_append(self, *args, **kwargs):
    i = _plain_append(self, *args, **kwargs)
    for fn in tuple(_observers.values()):
        fn(self, i)
    return i


def _observed_stage_put(t):
    put = t.stage.extend

    def stage_put(row):
        put(row)
        for fn in tuple(_observers.values()):
            fn(t, t.next - 1)
    return stage_put


def observe_entries(name, fn):
    """Call ``fn(tape, entry)`` as each entry is staged (``fn`` None: stop).  While no
    observer is set, recording runs its plain paths: no cost."""
    if fn is None:
        _observers.pop(name, None)
    else:
        _observers[name] = fn
    on = bool(_observers)
    Tape.append = _observed_append if on else _plain_append
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
