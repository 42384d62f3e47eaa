"""A recorded function, frozen for replay: the tape's arrays, where its inputs and
outputs sit, and the guards its recording noted.

``record(fn, arrays)`` runs ``fn`` once on fresh leaves under tracing (comparisons and
detaches are recorded, places where values reach Python note guards) and freezes the
tape into a ``Record``: its own copies of the columns and the value arena, which the
replay kernels then read and write.
"""
import numpy as np

from ..grad_mode import STATE, enable_grad
from ..kernels import replay as replay_kernels
from ..kernels.replay import (compile_rules, forward, forward_compiling, guards_hold,
                              value_and_grad)
from ..kernels import reverse as reverse_kernels
from ..kernels.reverse import DONE
from ..tape import COLUMNS, CONSUMED, Layout, Tape
from ..tensor import Tensor, from_array
from ..tracing import G_EQUAL, Recording, warn_frozen
from . import vector_replay
from .vector_replay import REPLAY

_COLS = COLUMNS


class ReplayError(RuntimeError):
    pass


class Record(Layout):
    """The flat arrays of one recording plus what replay needs to know about them."""

    def __init__(self, cols, IAUX, V, ins, outs, out_shapes, out_tuple, guards, grads=None):
        for name in _COLS:
            setattr(self, name, cols[name])
        self.IAUX, self.V = IAUX, V
        self.n, self.nv = len(self.OP), len(V)
        self.ins, self.outs = list(ins), list(outs)
        self.out_shapes, self.out_tuple = [tuple(s) for s in out_shapes], out_tuple
        self.out_dtypes = ["<f8"] * len(self.outs)   # (the eager outputs' dtypes)
        self.grads = grads                   # entries of the recorded gradient (hvp)
        self.guard_list = list(guards)       # (kind, entry, data, (file, line))
        self.schedule = np.arange(self.n, dtype=np.int64)
        self._pack_guards()
        self.max_size = max([self.size(i) for i in range(self.n)] + [1])
        self.top = max(self.outs + (list(grads) if grads else []))
        self.native = None                   # the compiled tape, once built
        self.sparse_plans = {}               # symmetric? -> autograd.sparse.Plan
        self.locs = {}                       # entry -> LOCATIONS id (traced in anomaly mode)
        self._work()

    def _work(self):
        """Work arrays of the compiled replay, allocated once."""
        self.G = np.zeros(self.nv)
        self.live = np.zeros(self.n, np.uint8)
        self.scratch = np.empty(2 * self.max_size)
        self.omap = np.empty(self.max_size, np.int64)
        self.ins_arr = np.array(self.ins, np.int64)
        self.n_in = sum(self.size(e) for e in self.ins)
        self._kargs = None
        self._tables = None      # the sweeps' rules tables, its kinds compiled (value_and_grad)
        self.segments = None                 # (schedule, its segments): large arrays
        self.in_run = None                   # entries in fused runs (their adjoints: kept 0)
        self.vector = vector_replay.is_vector(self)

    def _pack_guards(self):
        g = self.guard_list
        self.GK = np.array([k for k, _, _, _ in g], np.int64)
        self.GE = np.array([e for _, e, _, _ in g], np.int64)
        self.GN = np.array([len(d) for _, _, d, _ in g], np.int64)
        self.GS = np.concatenate([[0], np.cumsum(self.GN)[:-1]]).astype(np.int64) if g else \
            np.zeros(0, np.int64)
        self.GV = np.array([v for _, _, d, _ in g for v in d], np.float64)

    # -- the reader interface the sweeps use (as a Tape's) ------------------------------
    def flush(self):
        pass

    # -- replay ----------------------------------------------------------------------
    def load(self, arrays):
        V, OFF = self.V, self.OFF
        for e, a in zip(self.ins, arrays):
            V[OFF[e]:OFF[e] + a.size] = a.reshape(-1)

    def run_forward(self):
        """Recompute every entry; True if the guards hold for the new values."""
        if self.vector:
            status = vector_replay.run_forward(self)
        else:
            status, i = self._forward()
        if status != DONE:
            raise ReplayError("a custom autograd.Function cannot be replayed (its forward is "
                              "Python); call the function eagerly instead")
        return REPLAY.pick(guards_hold, self.nv + self.n, ())(
            self.GK, self.GE, self.GS, self.GN, self.GV, self.OFF, self.META, self.IAUX, self.V)

    def _forward(self):
        return forward_compiling(REPLAY.pick(forward, self.nv + self.n, (1,)), self.schedule,
                                 self.arrays(), self.omap)

    def value_and_grad(self, x, grad):
        """Replay at the flat inputs ``x`` and write d(output)/d(inputs) into ``grad``
        (one compiled call; over large arrays, a few: ``vector_replay``); False if a guard
        fails."""
        if self.vector:
            return self._vector_value_and_grad(x, grad)
        args = self._kargs
        if args is None:        # (built at the first replay: after the optimiser's changes)
            args = self._kargs = (self.ins_arr, self.outs[0], self.schedule, self.arrays(),
                                  self.G, self.live, self.scratch, self.omap, self.GK,
                                  self.GE, self.GS, self.GN, self.GV)
        run = REPLAY.pick(value_and_grad, self.nv + self.n, (4, 5, 6, 14))
        if run is value_and_grad:
            tables = self._tables
            if tables is None:  # (the rules of the recording's kinds: compiled first)
                compile_rules(self.OP, self.n)
                tables = self._tables = (reverse_kernels.RULES.table,
                                         replay_kernels.FORWARD_RULES.table)
        else:                   # (the twin: the rules' twins)
            tables = (reverse_kernels.RULES.twin_table,
                      replay_kernels.FORWARD_RULES.twin_table)
        return run(x, *args, grad, *tables)

    def _vector_value_and_grad(self, x, grad):
        V, OFF, pos = self.V, self.OFF, 0
        for e in self.ins:
            n = self.size(e)
            V[OFF[e]:OFF[e] + n] = x[pos:pos + n]
            pos += n
        if not self.run_forward():
            return False
        vector_replay.reverse(self, self.outs[0])
        pos = 0
        for e in self.ins:
            n = self.size(e)
            grad[pos:pos + n] = self.G[OFF[e]:OFF[e] + n]
            pos += n
        return True

    def settle_guards(self, arrays):
        """Value guards (``G_EQUAL``) hold what the replay itself computes at the recorded
        inputs.  Eager and replayed values may differ in the last bits (a mean, a sum in
        another order): the guard on a number taken out of the recording must hold at its
        own inputs.  Only such last-bit differences are taken; a larger one stays and fails
        (a recording that does not reproduce its own inputs' values is an error)."""
        if not any(k == G_EQUAL for k, _, _, _ in self.guard_list):
            return
        self.load(arrays)
        if self.vector:
            status = vector_replay.run_forward(self)
        else:
            status, _ = self._forward()
        if status != DONE:
            return
        settled = []
        for kind, e, data, loc in self.guard_list:
            if kind == G_EQUAL:
                now = self.V[self.OFF[e]:self.OFF[e] + len(data)]
                want = np.array(data, np.float64)
                with np.errstate(invalid="ignore"):
                    near = np.abs(now - want) <= 1e-12 * np.abs(want)
                if np.all(near | (now == want) | (np.isnan(now) & np.isnan(want))):
                    data = tuple(float(v) for v in now)
            settled.append((kind, e, data, loc))
        self.guard_list = settled
        self._pack_guards()

    def failed_guard(self):
        """(file, line) of the first guard that does not hold now."""
        for k, (kind, e, data, loc) in enumerate(self.guard_list):
            sl = slice(k, k + 1)
            if not guards_hold(self.GK[sl], self.GE[sl], np.zeros(1, np.int64), self.GN[sl],
                               np.array(data, np.float64), self.OFF, self.META, self.IAUX,
                               self.V):
                return loc
        return None


def _freeze(t, xs, outs, rec, grads):
    a = t.autograd
    if a.hooks or a.node_hooks or a.packed:
        what = ("tensor hooks" if a.hooks else "Node hooks" if a.node_hooks
                else "saved_tensors_hooks")
        raise ReplayError(f"{what} run Python during backward: a function that uses them "
                          "cannot be traced for replay (call it eagerly)")
    t.flush()
    n = t.n
    cols = {name: getattr(t, name)[:n].copy() for name in _COLS}
    # a backward the function ran consumed some entries of the tape; the recording keeps
    # its own values, so a replay sweeps them as any other (the sweep would stop there)
    cols["FLAGS"] &= np.uint8(~CONSUMED & 0xFF)
    ins = [x._i for x in xs]
    out_entries = [o._i for o in outs]
    grad_entries = [g._i for g in grads] if grads is not None else None
    r = Record(cols, t.IAUX[:t.ni].copy(), t.V[:t.nv].copy(), ins, out_entries,
               [tuple(o.shape) for o in outs], None, rec.guards, grad_entries)
    r.locs = dict(t.locs)
    return r


def record(fn, arrays, static=(), second_order=False, dtypes=None):
    """Run ``fn`` on leaves holding ``arrays`` (float64 values of arguments of
    ``dtypes``: the function sees its arguments' own dtypes) under tracing; returns the
    Record.  ``static``: (position, value) of arguments passed through untraced."""
    t = Tape()
    rec = Recording(t)
    prev = STATE.trace
    STATE.trace = rec
    try:
        with t, enable_grad():
            xs = [from_array(np.array(a, np.float64 if dtypes is None else d), rg=True)
                  for a, d in zip(arrays, dtypes or arrays)]
            for x in xs:
                t.register(x)              # inputs first: their entries lead the tape
            rec.inputs = tuple(xs)
            args = _merge(xs, static)
            out = fn(*args)
            out_tuple = isinstance(out, tuple)
            outs = list(out) if out_tuple else [out]
            for k, o in enumerate(outs):
                if not isinstance(o, Tensor):
                    raise ReplayError(f"output {k} of the traced function is a "
                                      f"{type(o).__name__}, not a Tensor")
                if o._tid != t.uid:         # a constant or an input returned as it is
                    outs[k] = o = o + 0.0 if o.dtype.is_floating_point else o
                    if o._tid != t.uid:
                        t.register(o)
            grads = None
            if second_order:
                from ..autograd import grad
                if outs[0].numel() != 1 or not outs[0].requires_grad:
                    raise ReplayError("hvp needs a function with one scalar output that "
                                      "depends on its inputs")
                gs = grad(outs[0], xs, create_graph=True, allow_unused=True)
                grads = [g if g is not None and g._tid == t.uid else _const_on(t, x)
                         for g, x in zip(gs, xs)]
    finally:
        STATE.trace = prev
    r = _freeze(t, xs, outs, rec, grads)
    r.out_tuple = out_tuple
    r.out_dtypes = [np.dtype(o.dtype.np).str for o in outs]
    if rec.frozen:
        warn_frozen(rec, _depends(r))
    return r


def _depends(r):
    """Which entries depend on the inputs (their values change from replay to replay)."""
    from .optimize import _inputs
    dep = np.zeros(r.n, bool)
    dep[r.ins] = True
    for i in range(r.n):
        if not dep[i]:
            dep[i] = any(dep[j] for j in _inputs(r, i))
    return dep


def _const_on(t, x):
    """A zero gradient that the recording did not produce, as a constant entry."""
    z = from_array(np.zeros(tuple(x.shape)))
    t.register(z)
    return z


def _merge(traced, static):
    """The argument list: traced tensors in order, static values at their positions."""
    args = list(traced)
    for pos, value in static:
        args.insert(pos, value)
    return args
