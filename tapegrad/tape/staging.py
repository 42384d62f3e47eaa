"""Staging: how entries reach a tape's columns.  An op stages its entry in a Python list
(a scalar op one flat 6-tuple, an array op one row with its value); ``flush`` moves the
staged rows into the columns and the value arena with a few vectorised copies, before
anything reads the tape and every block of entries.  ``Tape`` (``tape.py``) is a
``Staging``; the columns' layout is ``columns.py``'s, the arenas ``arena.py``'s.

Observers of recording (anomaly mode's source lines, saved_tensors_hooks) are called as
each entry is staged; while none is set, the plain paths run (``tape.observe_entries``)."""
import itertools
import math

import numpy as np

from ..ops.table import CODE
from .arena import _grow, _pool
from .columns import _COLUMNS, Layout

CONST = CODE["const"]
_EMPTY = np.empty(0)
_FEW_ROWS = 6               # scalar / array rows a flush writes one by one (else in bulk)
_observers = {}             # name -> fn(tape, entry), called as each entry is staged


class Staging(Layout):
    """The recording half of a tape: staging entries and flushing them into the columns."""

    def flush(self):
        """Move the staged entries into the columns and their values into the arena.

        Scalar entries are staged as flat 6-tuples (index, code, a, b, c, value); array
        entries as (index, code, a, b, c, c2, flags, value, size, len(meta), meta).

        Interrupt-safe (a Ctrl-C may land on any line): the stage is cleared and the
        counters move only at the end, so a flush cut short is redone whole by the next
        one; an index that ``next`` handed out but whose op was cut short before staging
        it (a gap) becomes a 0-d constant that nothing uses.

        Thread-safe against the thread recording on the tape (a backward of its graph
        from another thread flushes it): flushes take the tape's lock, which a backward
        holds from its sweep to consumption, and take the rows staged when they start
        (ops go on staging meanwhile, without a lock).  An op of the recording thread
        may have its index but not yet its row: a gap for now, its row written at a
        later flush (a ``late`` row)."""
        if not self.stage and not self.astage:
            return
        with self.lock:
            self._flush()

    def _flush(self):
        st, ast = self.stage, self.astage
        n, end, nv, ni = self.n, self.next, self.nv, self.ni
        sts, asts = st[:], ast[:]      # (after ``end``: rows staged since may lie past it)
        k6, ka = len(sts), len(asts)
        if not k6 and not ka:
            return
        ks = k6 // 6
        top = max(end, sts[-6] + 1 if ks else 0, asts[-1][0] + 1 if ka else 0)
        if asts:
            rows = list(zip(*asts))
            sizes, mlens = rows[8], rows[9]
            nva, nia = sum(sizes), sum(mlens)
        else:
            nva = nia = 0
        self._reserve(top, nv + ks + nva, ni + nia)
        gaps = ks + ka != top - n or (ks and sts[0] < n) or (ka and asts[0][0] < n)
        if gaps:
            self._fill_gaps(n, top, sts, asts)
        if ks and ks <= _FEW_ROWS:
            self._write_scalars(sts, nv)
        elif ks:
            blk = np.fromiter(sts, np.float64, 6 * ks).reshape(ks, 6)
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
        if asts and ka <= _FEW_ROWS:
            self._write_rows(asts, nv + ks, ni)
        elif asts:
            # bookkeeping in Python (array entries are few), bulk copies in NumPy
            idx = (slice(n, top) if not ks and not gaps else
                   np.fromiter(rows[0], np.int64, ka))
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
        # committed: only now the rows taken go and the counters move
        del st[:k6]
        del ast[:ka]
        self.placed.clear()
        self._long_meta = bool(ast) and self._long_meta
        self.n, self.nv, self.ni = top, nv + ks + nva, ni + nia

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
        its index and staging its row, or one whose row is not staged yet) become unused
        0-d constants (a late row, below ``n``, is written over its constant)."""
        covered = np.zeros(end - n, bool)
        for at in (np.asarray(st[0::6], np.int64), np.fromiter((r[0] for r in ast), np.int64,
                                                               len(ast))):
            covered[at[at >= n] - n] = True
        gap = np.flatnonzero(~covered) + n
        self.OP[gap] = CONST
        self.A[gap] = self.B[gap] = -1
        self.C[gap] = self.C2[gap] = 0.0
        self.META[gap] = -1
        self.FLAGS[gap] = 0
        self.OFF[gap] = 0

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
        once its value is there.  The caller took the tape from ``roomy_tape``.  (Under the
        tape's lock: a flush from another thread would move the arena under ``fill``.)"""
        with self.lock:
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


_plain_append = Staging.append


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
