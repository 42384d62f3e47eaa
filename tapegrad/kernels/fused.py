"""Fused kernels for runs of elementwise entries over large arrays.

A run is a stretch of the tape whose entries are all elementwise over one size ``n``
(source entries may sit between them).  Element k of every entry in a run depends only
on element k of its inputs, so the run can be swept block by block: for one block of
``BLOCK`` elements, every entry of the run in turn, with the block's values and
adjoints staying in cache, instead of one pass over memory per entry.  Blocks are
independent, so they split across threads (``prange``) with no race: two threads never
touch the same element.  Each entry's rule runs as the generated block loops of
``generated_blocks`` (vectorised by LLVM, with libmvec for transcendental functions).

Each kernel (``*_part``) sweeps one of ``parts`` equal shares of the blocks; its parallel
twin runs the shares on threads.  Python calls the part itself for all of the work
(share 0 of 1), with no serial wrapper: Numba compiles a caller together with all its
callees' code, so each level of calls compiles the block rules again (0.7 s each).
``launch`` chooses by size (``PARALLEL_MIN``) and runs the parallel twin only in one
thread at a time (Numba's workqueue threading layer does not allow concurrent
launches); a process forked from one that ran them stays serial (GNU OpenMP's pool
does not survive a fork).  Nothing here raises inside compiled code.
"""
import os
import threading
import time

import numba
import numpy as np
from numba import njit, prange

from .generated import EW_LAST, OP_CONST, SOURCE_FIRST, SOURCE_LAST
from .generated_blocks import FWD_BLOCKS, READS_Y, REV_BLOCKS, TEMPS
from . import cold, indirect
from .layout import size_of, tiny_tape

_JIT = dict(cache=True, error_model="numpy")
BLOCK = 1024           # elements per block: a block of every buffer of an entry fits L1
FUSE_MIN = 256        # array entries at least this large are swept by the fused kernels
                      # (as eager forwards compute them: ``forward.BLOCK_MIN``)
PARALLEL_MIN = 32768   # elements x entries of work past which both cores pay off ...
PARALLEL_COLD_MIN = 262144  # ... while OpenMP's threads are awake; past this, always
AWAKE_S = 60e-6        # how long after a parallel launch its threads still spin (80-160 us here)
CHAIN_S = 40e-6        # a launch this soon after another large one: a chain of large ops
_LAST = [0.0]          # time.perf_counter() at the end of the last parallel launch
_LARGE = [0.0]         # ... and of the last launch of at least PARALLEL_MIN work
_LAUNCH = threading.Lock()
_SERIAL_ONLY = []            # non-empty in a forked child


def _after_fork():
    _SERIAL_ONLY.append(True)


os.register_at_fork(after_in_child=_after_fork)


@njit(**_JIT)
def run_below(i, lo, n, OP, A, B, META, IAUX, FLAGS, live, ents, fresh):
    """The run of size-``n`` elementwise entries from entry ``i`` down to ``lo``: its live
    entries go to ``ents`` (last first) and mark their inputs reached.  An input first
    reached here (not a constant) is flagged in ``fresh`` (``fresh[2q]``: the q-th
    entry's first input, ``2q + 1`` its second): ``reverse_part`` zeroes its adjoint
    block by block before that entry adds into it (``layout.mark_reached``'s zero, done
    in cache: zeroing each input whole first made a 50-op chain's backward 60 % slower).
    Stops before an entry of another kind or size, or one consumed or hooked (the sweep
    handles those; it has vetted entry i, whose hooks may have run), or when ``ents`` is
    full.  Returns (number of live entries, the entry below the run)."""
    m = 0
    j = i
    while j >= lo and m < ents.shape[0]:
        op = OP[j]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            j -= 1
            continue
        if op > EW_LAST or META[j] < 0 or size_of(META, IAUX, j) != n or \
                (FLAGS[j] & 5 and j != i):
            break
        if live[j]:
            ents[m] = j
            for s in range(2):
                x = A[j] if s == 0 else B[j]
                fresh[2 * m + s] = 0
                if x >= 0 and live[x] == 0:
                    live[x] = 1
                    fresh[2 * m + s] = OP[x] != OP_CONST
            m += 1
        j -= 1
    return m, j


@njit(**_JIT)
def clear_swept(live, in_run, OFF, META, IAUX, G):
    """Zero the adjoints the last sweep left (the fused runs' own were zeroed as they
    were used up) and its liveness."""
    for e in range(live.shape[0]):
        if live[e]:
            live[e] = 0
            if not in_run[e]:
                o = OFF[e]
                G[o:o + size_of(META, IAUX, e)] = 0.0


@njit(inline="always", **_JIT)
def _operand(j, c, V, OFF, k0, w, fill, const):
    """(array, offset) of an operand for the block at k0: the arena, or the block
    ``const`` filled with the constant c."""
    if j >= 0:
        return V, OFF[j] + k0
    if fill:
        const[:w] = c
    return const, 0


@njit(inline="always", **_JIT)
def _adjoint(j, OP, G, OFF, k0, sink):
    if j >= 0 and OP[j] != OP_CONST:
        return G, OFF[j] + k0
    return sink, 0


def _example_blocks(reverse):
    """Arguments of a block rule's types, as the fused kernels pass them."""
    f, k = np.zeros(1), np.int64(0)
    return (f, k, f, k, f, f, k, f, k, f, k, 0.0, k, f) if reverse else \
        (f, k, f, k, f, k, 0.0, k, f)


# each elementwise op's block rules, by op code, called through their addresses: an op's
# rules compile when a launch first runs it (``FWD.compile_slots(ops)`` before a launch),
# not every op's with the fused kernels
FWD = indirect.Rules(FWD_BLOCKS, lambda: _example_blocks(False))
REV = indirect.Rules(REV_BLOCKS, lambda: _example_blocks(True))
_fwd, _rev = FWD.call, REV.call


@njit(**_JIT)
def _share(n, t, parts):
    """The blocks [b0, b1) of the t-th of ``parts`` equal shares of n elements."""
    nblk = (n + BLOCK - 1) // BLOCK
    per = (nblk + parts - 1) // parts
    return min(nblk, t * per), min(nblk, (t + 1) * per)


@njit(**_JIT)
def reverse_part(ents, m, OP, A, B, C, C2, OFF, V, G, n, keep, fresh, rev, t, parts):
    """The fused reverse sweep of a run (``ents``: its live entries, last first) over the
    t-th of ``parts`` shares of its blocks.  The adjoint of each entry not marked in
    ``keep`` is zeroed once used, while in cache (a vector replay keeps its arena zero
    between sweeps that way; the engine keeps every one: its sweeps zero what they
    reach, ``mark_reached``).  An input flagged in ``fresh`` (``run_below``) has its
    block zeroed before its entry adds into it.  ``rev``: ``REV.table``, the rules of the
    run's ops compiled (``REV.compile_slots``)."""
    b0, b1 = _share(n, t, parts)     # (the parallel twins pass t as np.int64: prange's
    T = np.empty(TEMPS * BLOCK)      # index type would compile this kernel a second time)
    cx, cy, sink = np.empty(BLOCK), np.empty(BLOCK), np.empty(BLOCK)
    for blk in range(b0, b1):
        k0 = blk * BLOCK
        w = min(BLOCK, n - k0)
        for q in range(m):
            e = ents[q]
            op, a, b, c = OP[e], A[e], B[e], C[e]
            X, xo = _operand(a, c, V, OFF, k0, w, True, cx)
            Y, yo = _operand(b, c, V, OFF, k0, w, READS_Y[op], cy)
            GX, gxo = _adjoint(a, OP, G, OFF, k0, sink)
            GY, gyo = _adjoint(b, OP, G, OFF, k0, sink)
            if fresh[2 * q]:            # its first contribution: the block zeroed first
                GX[gxo:gxo + w] = 0.0
            if fresh[2 * q + 1]:
                GY[gyo:gyo + w] = 0.0
            _rev(rev, op, (X, xo, Y, yo, V, G, OFF[e] + k0, GX, gxo, GY, gyo, C2[e], w, T))
            if not keep[e]:     # its adjoint is used up: leave the arena zero (still in cache)
                G[OFF[e] + k0:OFF[e] + k0 + w] = 0.0


@njit(parallel=True, **_JIT)
def reverse_parallel(ents, m, OP, A, B, C, C2, OFF, V, G, n, keep, fresh, rev, threads):
    for t in prange(threads):
        reverse_part(ents, m, OP, A, B, C, C2, OFF, V, G, n, keep, fresh, rev, np.int64(t),
                     threads)


@njit(**_JIT)
def forward_part(ents, m, OP, A, B, C, C2, OFF, V, n, fwd, t, parts):
    """The fused forward of a run over the t-th of ``parts`` shares of its blocks."""
    b0, b1 = _share(n, t, parts)
    T = np.empty(TEMPS * BLOCK)
    cx, cy = np.empty(BLOCK), np.empty(BLOCK)
    for blk in range(b0, b1):
        k0 = blk * BLOCK
        w = min(BLOCK, n - k0)
        for q in range(m):
            e = ents[q]
            op, a, b, c = np.int64(OP[e]), A[e], B[e], C[e]     # (map_part's op type)
            X, xo = _operand(a, c, V, OFF, k0, w, True, cx)
            Y, yo = _operand(b, c, V, OFF, k0, w, READS_Y[op], cy)
            _fwd(fwd, op, (X, xo, Y, yo, V, OFF[e] + k0, C2[e], w, T))


@njit(parallel=True, **_JIT)
def forward_parallel(ents, m, OP, A, B, C, C2, OFF, V, n, fwd, threads):
    for t in prange(threads):
        forward_part(ents, m, OP, A, B, C, C2, OFF, V, n, fwd, np.int64(t), threads)


@njit(**_JIT)
def tangent_entry(e, n, OP, A, B, C, C2, OFF, V, T, has, rev):
    """The tangent of elementwise entry ``e`` (``n`` elements) block by block: an
    elementwise Jacobian is diagonal, so the tangent is the op's reverse block rule
    applied to x's tangent, then to y's, added to 0 in that order (as
    ``elementwise.tangent`` adds them element by element).  ``rev``: ``REV.table``
    with e's op compiled."""
    Tb = np.empty(TEMPS * BLOCK)
    cx, cy, sink = np.empty(BLOCK), np.empty(BLOCK), np.empty(BLOCK)
    rb, gb = np.empty(BLOCK), np.empty(BLOCK)
    op, a, b, c, c2, oe = OP[e], A[e], B[e], C[e], C2[e], OFF[e]
    ha = a >= 0 and has[a] != 0
    hb = b >= 0 and has[b] != 0
    zero = np.int64(0)
    for k0 in range(0, n, BLOCK):
        w = min(BLOCK, n - k0)
        X, xo = _operand(a, c, V, OFF, k0, w, True, cx)
        Y, yo = _operand(b, c, V, OFF, k0, w, READS_Y[op], cy)
        for k in range(w):
            T[oe + k0 + k] = 0.0
            rb[k] = V[oe + k0 + k]
        if ha:
            ta = OFF[a] + k0
            for k in range(w):
                gb[k] = T[ta + k]
            _rev(rev, op, (X, xo, Y, yo, rb, gb, zero, T, oe + k0, sink, zero, c2, w, Tb))
        if hb:
            tb = OFF[b] + k0
            for k in range(w):
                gb[k] = T[tb + k]
            _rev(rev, op, (X, xo, Y, yo, rb, gb, zero, sink, zero, T, oe + k0, c2, w, Tb))


def large_ops(t, lo, hi):
    """The op codes of the elementwise entries ``lo..hi`` of tape (or recording) ``t``
    that the tangent sweep runs block by block (``FUSE_MIN`` elements or more)."""
    if t.max_size < FUSE_MIN or hi < lo:
        return ()
    ops = t.OP[lo:hi + 1]
    return np.unique(ops[(ops <= EW_LAST) & (t.sizes(lo, hi + 1) >= FUSE_MIN)]).tolist()


def launch(part, parallel, work, *args):
    """Run ``parallel`` when ``work`` (elements x entries) is worth both cores and no
    other thread is in a parallel kernel, else ``part`` over all of it (its one share of
    one); ``args`` end with ``n``.

    Waking OpenMP's threads once they sleep (after ``GOMP_SPINCOUNT``, ``threads.py``)
    costs about 45 us here: a tanh reverse over 65,536 values takes 31 us serial, 16 us
    parallel while the threads spin, over 60 us once they sleep.  So work below
    ``PARALLEL_COLD_MIN`` goes parallel only while they spin (within ``AWAKE_S`` of the
    last parallel launch) or when it follows another large launch within ``CHAIN_S``: a
    chain of large ops, which keeps them awake once woken (the 50-op chain over 100,000
    values: 6.9 ms; 10.1 ms if its ops never woke them).  A lone large op between other
    work (an MLP's tanh between two products) runs serial.  Either way the result is
    the same, bit for bit (blocks are independent).  On a cold kernel cache the parallel
    twins wait for the background compile (``PARALLEL``: each takes 3 s more than its
    serial twin to compile, and a first gradient needs neither)."""
    if work >= PARALLEL_MIN and not _SERIAL_ONLY:
        now = time.perf_counter()
        if (work >= PARALLEL_COLD_MIN or now - _LAST[0] < AWAKE_S or now - _LARGE[0] < CHAIN_S) \
                and not PARALLEL.compiling():
            threads = numba.get_num_threads()               # (costs 1 us)
            if threads > 1 and _LAUNCH.acquire(blocking=False):
                try:
                    return parallel(*args, threads)
                finally:
                    _LAST[0] = _LARGE[0] = time.perf_counter()
                    _LAUNCH.release()
        try:
            return part(*args, 0, 1)
        finally:
            _LARGE[0] = time.perf_counter()
    return part(*args, 0, 1)


# -- one elementwise op on whole arrays (the eager forward of a large array op) -----------
@njit(**_JIT)
def map_part(op, x, y, has_y, c, c2, out, n, fwd, t, parts):
    b0, b1 = _share(n, t, parts)
    T = np.empty(TEMPS * BLOCK)
    cy = np.empty(BLOCK)
    for blk in range(b0, b1):
        k0 = blk * BLOCK
        w = min(BLOCK, n - k0)
        Y, yo = y, k0
        if not has_y:
            Y, yo = cy, 0
            if READS_Y[op]:
                cy[:w] = c
        _fwd(fwd, op, (x, k0, Y, yo, out, k0, np.float64(c2), w, T))


@njit(parallel=True, **_JIT)
def map_parallel(op, x, y, has_y, c, c2, out, n, fwd, threads):
    for t in prange(threads):
        map_part(op, x, y, has_y, c, c2, out, n, fwd, np.int64(t), threads)


@njit(**_JIT)
def map_single(op, x, y, has_y, c, c2, out, n, fwd):
    """``map_part`` over float32 arrays: each block is widened into float64 scratch,
    swept by the same float64 rule, and rounded once on the way out (what converting
    the whole arrays would give, without two fresh float64 arrays)."""
    T = np.empty(TEMPS * BLOCK)
    xb, yb, ob = np.empty(BLOCK), np.empty(BLOCK), np.empty(BLOCK)
    for k0 in range(0, n, BLOCK):
        w = min(BLOCK, n - k0)
        for k in range(w):
            xb[k] = x[k0 + k]
        if has_y:
            for k in range(w):
                yb[k] = y[k0 + k]
        elif READS_Y[op]:
            yb[:w] = c
        _fwd(fwd, op, (xb, np.int64(0), yb, np.int64(0), ob, np.int64(0), np.float64(c2), w, T))
        for k in range(w):
            out[k0 + k] = ob[k]


def ew_into(code, x, y, c, out, c2=0.0, parallel=True):
    """out = elementwise op ``code`` of the C-contiguous float64 array ``x`` and ``y`` (an
    array of x's shape) or, ``y`` None, the constant ``c``; by the block kernels (on both
    cores if the array is large enough and ``parallel``)."""
    n = x.size
    has_y = y is not None
    fwd = FWD.compile_slots((code,))    # (meanwhile the background compiles FUSED)
    FUSED.settle()
    launch(map_part, map_parallel, n if parallel else 0, code, x.reshape(-1),
           (y if has_y else x).reshape(-1), has_y, c, c2, out.reshape(-1), n, fwd)
    return out


def warm():
    """Compile what a first backward over large arrays runs (``cold``'s background
    process): the eager forward of one op, ``run_below`` and the fused reverse sweep, for
    the engine's argument types, over no elements."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, f = tiny_tape()
    map_part(0, f, f, False, 0.0, 0.0, f, 0, FWD.table, 0, 1)
    run_below(-1, 0, 1, OP, A, B, META, IAUX, FLAGS, FLAGS, A, FLAGS)
    reverse_part(A, 0, OP, A, B, C, C2, OFF, f, f, 0, FLAGS, FLAGS, REV.table, 0, 1)


def warm_blocks():
    """Compile every op's block rules (``cold``'s background process, near the end: a
    launch compiles the rules of its ops itself, ``compile_slots``)."""
    FWD.compile_all()
    REV.compile_all()


def warm_vector():
    """Compile the fused forward (a replay over large arrays)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, f = tiny_tape()
    forward_part(A, 0, OP, A, B, C, C2, OFF, f, 0, FWD.table, 0, 1)


def warm_parallel():
    """Compile the parallel twins of ``ew_into`` and of the fused sweeps."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, f = tiny_tape()
    reverse_parallel(A, 0, OP, A, B, C, C2, OFF, f, f, 0, FLAGS, FLAGS, REV.table, 1)
    forward_parallel(A, 0, OP, A, B, C, C2, OFF, f, 0, FWD.table, 1)
    map_parallel(0, f, f, False, 0.0, 0.0, f, 0, FWD.table, 1)


# a cold cache: these compile in the background (one share of the work runs meanwhile)
FUSED = cold.Group("fused", (map_part, run_below, reverse_part), "tapegrad.kernels.fused:warm",
                   twins=False)
PARALLEL = cold.Group("parallel", (map_parallel, reverse_parallel, forward_parallel),
                      "tapegrad.kernels.fused:warm_parallel", twins=False)
BLOCKS = cold.Group("blocks", tuple(k for k in FWD_BLOCKS + REV_BLOCKS if k is not None),
                    "tapegrad.kernels.fused:warm_blocks", twins=False)
