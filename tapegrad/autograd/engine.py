"""The engine: seed output adjoints, run the compiled sweep, hand gradients upward.

A backward may span several tapes (a tensor of an older tape used on a newer one is an
``external`` source entry there, ``tape.foreign`` says which entry of which tape it
stands for): tapes are swept newest first, and the adjoint that reaches an external
entry seeds the other tape's entry.  ``run`` takes (tape, entry, seed) triples and
returns, per tape, the leaf entries it reached and their gradients; the autograd layer
finds the leaf tensors in ``tape.sources`` and hands them to AccumulateGrad.  Matrix
products past ``HOST_MIN_MACS`` are host entries: the sweep stops there, NumPy's BLAS
computes their adjoints on views of the arenas, and the sweep resumes below them.

The engine works on tapes, arrays and entry indices: it imports nothing above it and
reads no tensor (``tests/test_layers.py``).  What runs Python of the autograd layer
during a sweep (a retained tensor's AccumulateGrad, hooks, custom Functions' hooks,
anomaly checks, saved-tensor hooks and the error of a saved value changed in place, the
``create_graph`` sweep, the inputs of an entry for tools that watch) is reached through
``CALLBACKS``, which ``tapegrad.autograd`` fills at import.
"""
import ast
import collections
import functools
import operator
import sys
import threading
import weakref

import numpy as np

from .. import tape as tp
from ..tape.layout_codec import ndim_at, shape_at, size_at
from ..ops import rules
from ..ops.table import BY_CODE
from ..kernels import cold, fused
from ..kernels.matmul import add_outer
from ..kernels.reverse import (CONSUMED, DONE, FUSE, HOOK, NAN, RULES, consume, reach, sweep,
                               sweep_compiling)
from ..kernels.threads import one_blas_thread


class Callbacks:
    """The autograd layer's Python, as the engine calls it (set by tapegrad.autograd)."""
    retained = None               # (t, e, gradient): AccumulateGrad of the tensor retaining e
    at_hook = None                # (t, i, G, live, resume) -> (top, done): hooks of entry i
    function_output_hooks = None  # (t, group, G, live): hooks on a custom Function's outputs
    checking_nan = None           # () -> bool: anomaly mode's NaN check is on
    raise_nan = None              # (t, i, G, live): anomaly mode's error if entry i sent a NaN
    saved_slots = None            # (t, i) -> [(what, buffer, shown)]: what entry i saved
    modified_error = None         # (t, hit, record) -> the error for saved entry hit, stale
                                  # since the in-place op of ``t.autograd.modified`` record
    drop_consumed = None          # (t, live): saved_tensors_hooks' packed values let go
    inputs_of = None              # (t, i) -> buffers: an entry's inputs (graph views)
    recorded_sweep = None         # create_graph's sweep_tape (tensor adjoints)


CALLBACKS = Callbacks()
F32_BLAS_RATIO = 32       # multiply-adds per converted value from which float32 BLAS pays
HOST_MIN_MACS = 1 << 15   # smaller products stay in the compiled sweep (no round trip)
NO_FUSION = 1 << 62       # anomaly mode checks each entry's adjoints: no fused runs
RUN_CHUNK = 4096          # entries of a run swept by one fused call, at most
REUSE_MIN = 1 << 16       # adjoint arenas this large are kept for the thread's next backward
_POOL = weakref.WeakKeyDictionary()   # thread -> its _Adjoints (gone with the thread;
                                      # emptied with the tape's pools)
tp.on_release(_POOL.clear)
# per op code: does its backward need its first input / second input / its result?
SAVES = tuple(np.array([op is not None and s in op.saves for op in BY_CODE])
              for s in ("self", "other", "result"))
_FUNCTION = tp.CODE["function"]
_LISTED = np.isin(np.arange(len(BY_CODE)), (_FUNCTION, tp.CODE["cat"], tp.CODE["stack"]))
# (per op code: are an entry's inputs listed elsewhere than in A and B?)
# a cold cache: these compile in the background, small tapes are swept by the twins
REVERSE = cold.Group("reverse", (sweep, consume, reach), "tapegrad.kernels.reverse:warm")
# (a sweep compiles the rule of a kind it meets itself: this fills the cache for the next run)
KIND_RULES = cold.Group("rules", RULES.kernels, "tapegrad.kernels.reverse:warm_rules",
                        twins=False)
FUSED = fused.FUSED


def _reads(text):
    """Does the adjoint rule ``text`` read a value (an operand ``x``/``y``, the result)?"""
    return bool(text) and any(isinstance(n, ast.Name) and n.id in "xyr"
                              for n in ast.walk(rules.parse(text)))


# per op code, what a backward without retain_graph consumes (``consume``): bit 1/2 the
# adjoint of the first/second input of an elementwise entry reads a value (``x * 2``
# reads its constant: PyTorch saves it too; ``x + 1`` reads none), bit 4 another kind
# saves one (PyTorch's saved tensors); custom Functions: the engine decides
NEED = np.array([0 if op is None else
                 (_reads(op.gx) | _reads(op.gy) << 1) if op.kind == "ew" else
                 4 * (bool(op.saves) or op.kind == "host") for op in BY_CODE], np.uint8)

# A backward takes a tape's lock and lists it in one C call (``held.extend(filter(
# _ACQUIRE, (lock,)))``), and releases every lock listed in one more (``_EXHAUST`` of a
# lazy ``map``): no bytecode between an acquire and its listing, or between two
# releases, where a Ctrl-C could land and leave a lock held (a later backward through
# that tape, from another thread, would wait for it forever).
_ACQUIRE = operator.methodcaller("acquire")
_RELEASE = operator.methodcaller("release")
_EXHAUST = functools.partial(collections.deque, maxlen=0)


def run(roots, retain_graph, want=None, observe=None, create_graph=False):
    """Sweep from ``roots``, (tape, entry, seed) triples.  Returns ``(deliveries,
    found)``: (tape, leaf entries, their gradients) triples, one per tape whose leaf
    entries it reached (a leaf used on two tapes has an entry on each; its tensor is
    ``tape.sources[entry]``), and the summed adjoints of the entries ``want`` asks for
    (a ``Wanted``; None where not reached).  Gradients are floats for 0-d float64
    entries, else float64 arrays (views of the adjoints: copy to keep); with
    ``create_graph`` (seeds are tensors) they are tensors whose computation is recorded
    (``recorded_backward``)."""
    sweep_tape = CALLBACKS.recorded_sweep if create_graph else _sweep_tape
    want_at = _NOTHING_WANTED if want is None else want
    found = [None] * want_at.count
    deliveries = []
    pending, tapes, swept = {}, {}, []
    for t, e, s in roots:
        tapes[t.uid] = t
        pending.setdefault(t.uid, []).append((e, s))
    held = []       # locks of the tapes this backward holds: one sweeps a tape at a time,
    releases = map(_RELEASE, held)    # and one that consumes it lets no other read it
    try:            # meanwhile (PyTorch's concurrent backwards: one succeeds, the others
        while pending:  # get the error)
            uid = max(pending)
            t = tapes[uid]
            if not any(h is t.lock for h in held):
                held.extend(filter(_ACQUIRE, (t.lock,)))
            swept.append(sweep_tape(t, pending.pop(uid), deliveries, pending, tapes,
                                    want_at, found, observe))
        if not retain_graph:    # only now: a tape may be swept twice (tapes referring both ways)
            for t, live in swept:
                consume_swept(t, live)
    finally:
        _EXHAUST(releases)            # (a list's iterator: the locks listed since too)
    return deliveries, found


class Wanted(dict):
    """The requested inputs of ``grad`` / ``backward(inputs=...)``, as the autograd layer
    names them: (tape uid, entry) -> position for tensors with a history, ``leaves`` (the
    ids of the requested leaf tensors: the source entries holding one of them, matched
    by identity in ``tape.sources``), ``count`` positions in all (a leaf's gradient is
    what the deliveries bring it).  ``toward(t)`` tells which buffers of tape t lead to
    one of them: only those Nodes run their custom Function's backward and their hooks,
    as PyTorch executes only the part of the graph that the inputs need."""

    def __init__(self, entries=(), leaves=frozenset(), count=0):
        super().__init__(entries)
        self.leaves, self.count = leaves, count
        self.any = count > 0

    def toward(self, t):
        """None when nothing was requested (everything is needed), else ``needed(b)``:
        does buffer b (of the first ``t.n``) lead to a requested input?  All entries are
        answered at once by the compiled ``reach``: an entry's inputs are its A and B
        columns but for a cat's pieces and a custom Function's inputs, asked of
        ``inputs_of``.  An entry standing for another tape's may lead to one (kept)."""
        if not self.any:
            return None
        n = t.n
        seed = np.zeros(n, np.uint8)
        for uid, e in self:
            if uid == t.uid and e < n:
                seed[e] = 1
        leaves = self.leaves
        for e, src in tuple(t.sources.items()):   # (a copy: t's thread may add sources)
            if e < n and (id(src) in leaves or e in t.foreign):
                seed[e] = 1
        listed = np.full(n, -1, np.int64)
        ins = []
        for j in np.flatnonzero(_LISTED[t.OP[:n]]).tolist():
            listed[j] = len(ins)
            ins += [k for k in CALLBACKS.inputs_of(t, j) if k >= 0] + [-1]
        REVERSE.pick(reach, n, (5,))(n, t.A, t.B, listed, np.array(ins + [-1], np.int64), seed)
        return seed.view(bool).tolist().__getitem__


_NOTHING_WANTED = Wanted(())      # (read only)


def _twin_work(t):
    """The sweep's work for its twin (``cold.TWIN_MAX``): entries, and the values of the
    few array entries it sweeps itself (large elementwise runs go to the fused kernels)."""
    return t.next + t.nv // 8


def _run(top, lo, t, G, live, scratch, omap, check_nan, done=-1, fuse=None, needed=None):
    """Sweep entries ``top`` down to ``lo``, handling the sweep's stops (host entries,
    hooks, consumed entries, NaN in anomaly mode, fused runs); returns the next entry
    below.  ``done``: an entry whose hooks have run (the sweep does not stop there
    again).  ``fuse``: ``_fused_run``'s keep, to sweep large elementwise runs fused."""
    fuse_min = NO_FUSION if check_nan or fuse is None else fused.FUSE_MIN
    while top >= lo:
        run = REVERSE.pick(sweep, _twin_work(t), (2, 3))
        status, i = sweep_compiling(run, top, t.arrays(), G, live, scratch, omap, HOST_MIN_MACS,
                                    done, check_nan, lo, False, fuse_min)
        if status == DONE:
            return lo - 1
        if status == FUSE:             # a run of large elementwise entries: fused kernels
            top = _fused_run(t, i, lo, G, live, fuse)
            continue
        if status == CONSUMED:
            raise RuntimeError(tp.SECOND_BACKWARD)
        if status == NAN:
            CALLBACKS.raise_nan(t, i, G, live)
        if status == HOOK:             # hooks wait for entry i's gradient
            top, done = CALLBACKS.at_hook(t, i, G, live, lambda e: _run(
                e, e, t, G, live, scratch, omap, check_nan, e), needed)
            if check_nan and done < 0:
                CALLBACKS.raise_nan(t, i, G, live)
            continue
        if t.OP[i] == _FUNCTION:       # a custom Function: its backward in Python
            top = _host_function(t, i, G, live, needed)
        else:                          # a large matrix product: BLAS
            host_matmul(t, i, G)
            top = i - 1
        if check_nan:
            CALLBACKS.raise_nan(t, i, G, live)
    return top


class _Adjoints:
    """A large adjoint arena, kept per thread between backwards (fresh memory costs a
    page fault per 4 KiB, more than a sweep) until the tape's pools sit idle
    (``tape.on_release``).  It is handed back as the sweep left it and never cleared
    whole: a sweep zeroes each adjoint when it first reaches it (``mark_reached``), so a
    backward writes only the adjoints it uses (clearing a 50-op chain's 40 MB on
    100,000 elements took 2 ms; the constants' adjoints, a third of the hand-tracking
    workload's, were cleared for nothing).  Taken again only once no view of it is
    alive (a hook may have kept a gradient)."""

    def __init__(self, size):
        self.arena = np.empty(size)

    @classmethod
    def take(cls, nv):
        st = _POOL.pop(threading.current_thread(), None)
        if st is None or st.arena.shape[0] < nv or sys.getrefcount(st.arena) > 2:
            st = cls(nv + nv // 4)                 # (2: the attribute, getrefcount's argument)
        return st

    def give_back(self):
        _POOL[threading.current_thread()] = self
        tp.watch_pools()


def _adjoint_arena(nv):
    """(adjoints for ``nv`` values, uncleared: ``mark_reached`` zeroes each one a
    sweep reaches; their pooled arena or None)."""
    if nv < REUSE_MIN:
        return np.empty(nv), None
    st = _Adjoints.take(nv)
    return st.arena[:nv], st


def mark_reached(t, G, live, b):
    """``kernels.layout.mark_reached`` for the adjoints Python adds into (seeds, custom
    Functions, hooks): mark buffer b reached, its adjoint zeroed at the first mark."""
    if not live.item(b):
        live[b] = 1
        if t.META.item(b) < 0 or t.OP.item(b) != tp.CONST:
            o = t.OFF.item(b)
            G[o:o + t.size(b)] = 0.0


def _fused_run(t, i, lo, G, live, keep):
    """Sweep the run of elementwise entries of entry i's size from i down, block by
    block; returns the entry below it.  ``keep``: all ones (no adjoint is zeroed once
    used up: the next sweep zeroes what it reaches; the run's inputs, block by block:
    ``fused.run_below``)."""
    FUSED.settle()
    n = t.size(i)
    ents = np.empty(min(i - lo + 1, RUN_CHUNK), np.int64)
    fresh = np.empty(2 * len(ents), np.uint8)
    m, below = fused.run_below(i, lo, n, t.OP, t.A, t.B, t.META, t.IAUX, t.FLAGS, live, ents,
                               fresh)
    rev = fused.REV.compile_slots(set(t.OP[ents[:m]].tolist()))
    fused.launch(fused.reverse_part, fused.reverse_parallel, n * m, ents, m, t.OP, t.A, t.B,
                 t.C, t.C2, t.OFF, t.V, G, n, keep, fresh, rev)
    return below


def _sweep_tape(t, seeds, deliveries, pending, tapes, want_at, found, observe=None):
    """Sweep tape ``t`` from ``seeds`` ((entry, array) pairs): deliver leaf gradients,
    queue the adjoints of tensors of other tapes, fill ``found``.  Returns ``(t, live)``
    (the swept entries, for consumption)."""
    t.flush()
    n = t.n                  # (the entries written: another thread may be recording on t)
    live = np.zeros(n, np.uint8)
    G, pooled = _adjoint_arena(t.nv)
    top = 0
    OFF = t.OFF
    for e, s in seeds:
        mark_reached(t, G, live, e)
        top = max(top, e)
        o = OFF.item(e)
        if s.size == 1:
            G[o] += s.item()
        else:
            G[o:o + s.size] += s.reshape(-1)
    fuse = np.ones(n, np.uint8) if t.max_size >= fused.FUSE_MIN else None
    scratch = np.empty(2 * t.max_size)        # two per-output accumulators of a reduction
    omap = np.empty(t.max_size, np.int64)     # element offsets of a gather or reduction
    args = (t, G, live, scratch, omap, CALLBACKS.checking_nan())
    needed = want_at.toward(t) if (t.autograd.functions or t.autograd.hooks
                                   or t.autograd.node_hooks) else None
    if observe is None:
        _run(top, 0, *args, fuse=fuse, needed=needed)
    else:                                     # one entry at a time, for tools that watch
        i = top
        while i >= 0:
            if not live[i] or tp.LEAF <= t.OP[i] <= tp.EXTERNAL:
                i -= 1
                continue
            ins = list(dict.fromkeys(b for b in CALLBACKS.inputs_of(t, i) if b >= 0))
            for b in ins:              # (what a first mark would zero: nothing added yet)
                if not live[b]:
                    G[OFF[b]:OFF[b] + t.size(b)] = 0.0
            before = [G[OFF[b]:OFF[b] + t.size(b)].copy() for b in ins]
            incoming = G[OFF[i]:OFF[i] + t.size(i)].copy()
            nxt = _run(i, i, *args)
            sent = [(b, G[OFF[b]:OFF[b] + t.size(b)] - old) for b, old in zip(ins, before)]
            observe(t, i, incoming, sent)
            i = nxt

    if t.autograd.modified:
        err = modified_saved_error(t, live, n)
        if err is not None:
            raise err
    if t.sources:
        _deliver(t, G, live, deliveries, pending, tapes)
    for e in tuple(t.autograd.retained):
        if e < n and live[e]:
            CALLBACKS.retained(t, e, _adjoint(t, G, e))
    for (uid, e), k in want_at.items():
        if uid == t.uid and live[e]:
            g = _adjoint(t, G, e).copy()
            found[k] = g if found[k] is None else found[k] + g
    if pooled is not None:
        pooled.give_back()      # cleared at the next take, once the views above are gone
    return t, live


def _adjoint(t, G, e):
    """Entry e's adjoint in G, a view in its shape (read as ``Layout.shape`` does, in
    fewer NumPy calls: the tape is flushed)."""
    o, m = t.OFF.item(e), t.META.item(e)
    if m < 0:
        return G[o:o + 1].reshape(())
    IAUX = t.IAUX
    d = shape_at(m)
    return G[o:o + int(size_at(IAUX, m))].reshape(IAUX[d:d + int(ndim_at(IAUX, m))].tolist())


def _deliver(t, G, live, deliveries, pending, tapes):
    """The gradients of the source entries of t that the sweep reached, in
    ``t.sources``' order: the leaf entries' go to ``deliveries`` as one (t, entries,
    gradients) triple, an external entry's seeds the entry it stands for
    (``t.foreign``) on its tape; a constant's goes nowhere.  A gradient is a float for
    a 0-d float64 entry (``META < 0``), else a view of the adjoints (a copy is made on
    delivery).  (Of the entries swept: the thread recording on t may add sources.)"""
    OP, OFF, META, srcs, n = t.OP, t.OFF, t.META, tuple(t.sources), len(live)
    if len(srcs) > 32:          # (vectorised: pays off)
        at = np.fromiter(srcs, np.int64, len(srcs))
        at = at[at < n]
        at = at[live[at] != 0]
        ops = OP[at]
        ents = at[ops == tp.LEAF]
        grads = G[OFF[ents]].tolist()
        for k in np.flatnonzero(META[ents] >= 0).tolist():
            grads[k] = _adjoint(t, G, ents[k])
        ents, externals = ents.tolist(), at[ops == tp.EXTERNAL].tolist()
    else:
        ents, grads, externals = [], [], []
        for e in srcs:
            if e < n and live.item(e):
                op = OP.item(e)
                if op == tp.LEAF:
                    ents.append(e)
                    grads.append(G.item(OFF.item(e)) if META.item(e) < 0 else _adjoint(t, G, e))
                elif op == tp.EXTERNAL:
                    externals.append(e)
    if ents:
        deliveries.append((t, ents, grads))
    for e in externals:          # another tape goes on from there
        u, k = t.foreign[e]
        tapes[u.uid] = u
        pending.setdefault(u.uid, []).append((k, np.array(_adjoint(t, G, e))))


def modified_saved_error(t, live, n):
    """PyTorch's error if a swept entry needs a saved value that an in-place op changed
    after the entry was recorded; None otherwise.  Called only when the tape saw an
    in-place op.  What an entry saves is what PyTorch saves (``saved_slots``: ``x * 3``
    saves nothing of x; a broadcast operand is saved unbroadcast).  A view shares its
    base's version counter: the views made of a changed entry before the change (live
    or not: ``bases``) are stale with it."""
    ops = t.OP[:n]
    idx = np.arange(n)
    swept = live[:n].astype(bool) & (SAVES[0][ops] | SAVES[1][ops] | SAVES[2][ops])
    A, B = t.A[:n], t.B[:n]
    A2, B2 = t.A[np.maximum(A, 0)], t.A[np.maximum(B, 0)]     # through a broadcast
    made_of = {}
    for j, (e, _) in tuple(t.autograd.bases.items()):
        made_of.setdefault(e, []).append(j)
    for entry, record in tuple(t.autograd.modified.items()):
        boundary = record[3]
        stale, todo = {entry}, [entry]
        while todo:
            for j in made_of.get(todo.pop(), ()):
                if j < boundary and j not in stale:
                    stale.add(j)
                    todo.append(j)
        s = np.fromiter(stale, np.int64, len(stale))
        near = swept & (idx < boundary) & (np.isin(A, s) | np.isin(B, s) | np.isin(idx, s)
                                           | ((A >= 0) & np.isin(A2, s))
                                           | ((B >= 0) & np.isin(B2, s)))
        for i in np.flatnonzero(near):
            for _, j, shown in CALLBACKS.saved_slots(t, int(i)):
                hit = j if j in stale else shown if shown in stale else None
                if hit is not None:
                    return CALLBACKS.modified_error(t, hit, record)
    return None


def _host_function(t, i, G, live, needed=None):
    """Run the backward of the custom Function whose outputs include entry ``i``; add
    its gradients into the inputs' adjoints (unless none of the inputs leads to a
    requested one: ``needed``).  Returns where the sweep resumes."""
    group = t.autograd.functions[i]
    OFF = t.OFF
    if needed is not None and not any(needed(b) for b in group.inputs):
        for e, _, _, _ in group.outputs:
            live[e] = 1
        return min(e for e, _, _, _ in group.outputs) - 1
    CALLBACKS.function_output_hooks(t, group, G, live)
    grads = []
    for e, _, _, _ in group.outputs:
        size = t.size(e)
        grads.append(G[OFF[e]:OFF[e] + size].reshape(t.shape(e)).copy() if live[e] else None)
    for b, g in zip(group.inputs, group.backward(grads)):
        if g is not None:
            mark_reached(t, G, live, b)
            G[OFF[b]:OFF[b] + g.size] += g.reshape(-1)
    for e, _, _, _ in group.outputs:
        live[e] = 1                    # swept: consumed with the rest
    return min(e for e, _, _, _ in group.outputs) - 1


def host_matmul(t, i, G):
    """Adjoints of matrix product entry ``i`` through NumPy's BLAS (on this thread:
    ``threads.one_blas_thread``), on views of the arenas: x (nb, M, K) @ y (nb, K, N) =
    out; dx += g y^T, dy += x^T g.  A product of float32 tensors runs in float32 BLAS
    where it has many multiply-adds per value (``F32_BLAS_RATIO``); otherwise
    converting g, x and y to float32 costs more than float64 BLAS on the arenas as they
    are (an MLP's 64 x 1024 x 1 product), and float64 sums are the more accurate."""
    nb, M, K, N, dt, ty = t.product(i)
    macs = nb * M * K * N
    if dt is np.float32 and macs < F32_BLAS_RATIO * nb * (M * N + K * N + M * K):
        dt = np.float64
    with one_blas_thread(macs):
        _host_matmul(t, i, G, nb, M, K, N, dt, ty)


def _host_matmul(t, i, G, nb, M, K, N, dt, ty):
    V, OFF = t.V, t.OFF
    a, b, oi = int(t.A[i]), int(t.B[i]), int(OFF[i])
    g = G[oi:oi + nb * M * N].reshape(nb, M, N).astype(dt, copy=False)
    oa, ob = int(OFF[a]), int(OFF[b])
    outer = nb == 1 and dt == np.float64     # (an adjoint that is an outer product is
    if t.OP[a] != tp.CONST:                  # added in place: no product temporary)
        if outer and N == 1:
            add_outer(G[oa:oa + M * K].reshape(M, K), g[0, :, 0], V[ob:ob + K])
        else:
            y = tp.y_blocks(V[ob:ob + nb * K * N], nb, K, N, ty).astype(dt, copy=False)
            G[oa:oa + nb * M * K].reshape(nb, M, K)[...] += g @ y.transpose(0, 2, 1)
    if t.OP[b] != tp.CONST:      # (y stored transposed: its adjoint is g^T x, in place)
        x = V[oa:oa + nb * M * K].reshape(nb, M, K).astype(dt, copy=False)
        if outer and M == 1:
            if ty:
                add_outer(G[ob:ob + K * N].reshape(N, K), g[0, 0], x[0, 0])
            else:
                add_outer(G[ob:ob + K * N].reshape(K, N), x[0, 0], g[0, 0])
        elif ty:
            G[ob:ob + nb * K * N].reshape(nb, N, K)[...] += g.transpose(0, 2, 1) @ x
        else:
            G[ob:ob + nb * K * N].reshape(nb, K, N)[...] += x.transpose(0, 2, 1) @ g


def consume_swept(t, live):
    """Mark the entries in ``live`` consumed; free the tape's values when none is left."""
    t.flush()
    n = len(live)
    if n < t.n:             # entries recorded since the sweep (create_graph's) stay
        live = np.concatenate([live, np.zeros(t.n - n, np.uint8)])
    if t.autograd.packed:
        CALLBACKS.drop_consumed(t, live)
    left = REVERSE.pick(consume, _twin_work(t), (4,))(t.n, t.OP, t.A, t.B, t.FLAGS, live,
                                                     NEED)
    for e, group in tuple(t.autograd.functions.items()):   # a Function that saved nothing
        if e < t.n and not group.ctx.to_save and t.FLAGS[e] & tp.CONSUMED:
            t.FLAGS[e] &= ~np.uint8(tp.CONSUMED)   # stays sweepable, as PyTorch's
    if left == 0 and t.owner == threading.get_ident():
        t.release()        # no entry left that reads a value: they go (zeros stand in).
        # (Not from another thread than the one recording on t: an op of that thread may
        # be under way on t, reading values; they go with the tape.)
    tp.replace_default(t)


