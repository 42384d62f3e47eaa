"""Replay of recordings over large arrays: fused runs, both cores, BLAS.

A recording whose largest buffer reaches ``RUN_MIN`` values replays from Python
in a few segments instead of one compiled call: its schedule is cut into runs of
elementwise entries of one size (evaluated block by block by the fused forward kernel,
as the backward sweeps them), matrix products of at least ``HOST_MIN_MACS``
multiply-adds (NumPy's BLAS), and the rest (the compiled forward).  The reverse sweep
stops at the same runs and products.  Per segment this costs a few microseconds of
Python; per element it saves a pass over memory per entry.
"""
import numpy as np

from ..autograd.engine import FUSED, HOST_MIN_MACS, REVERSE, host_matmul
from ..kernels import cold, fused
from ..kernels import replay as replay_kernels
from ..kernels.generated import EW_LAST, MATMUL_FIRST, MATMUL_LAST, SOURCE_FIRST, SOURCE_LAST
from ..kernels.replay import forward, forward_compiling, guards_hold, value_and_grad
from ..kernels.threads import one_blas_thread
from ..kernels.reverse import DONE, FUSE, HOST, sweep, sweep_compiling
from ..tape import y_blocks

_NO_HOST = np.iinfo(np.int64).max
# elementwise entries this large replay in fused runs, as the eager sweep sweeps them
# (the same block rules: a replayed gradient is the eager one, bit for bit)
RUN_MIN = fused.FUSE_MIN
# a cold cache: these compile in the background (``kernels.cold``); small recordings
# replay by the replay kernels' Python twins meanwhile
REPLAY = cold.Group("replay", (forward, guards_hold, value_and_grad),
                    "tapegrad.kernels.replay:warm")
VECTOR = cold.Group("vector", (fused.forward_part,), "tapegrad.kernels.fused:warm_vector",
                    twins=False)
# (a forward compiles the rule of a kind it meets itself: this fills the cache for later)
FORWARD_RULES = cold.Group("forward-rules", replay_kernels.FORWARD_RULES.kernels,
                           "tapegrad.kernels.replay:warm_rules", twins=False)


def is_vector(r):
    return r.max_size >= RUN_MIN


def _macs(r, e):
    nb, M, K, N = r.product(e)[:4]
    return nb * M * K * N


def segments(r):
    """The schedule as [("run", entries, n) | ("blas", entry) | ("plain", entries)]."""
    segs, plain, run, run_n = [], [], [], 0

    def close():
        nonlocal plain, run
        if run:
            segs.append(("run", np.array(run, np.int64), run_n))
            run = []
        if plain:
            segs.append(("plain", np.array(plain, np.int64)))
            plain = []
    for e in r.schedule.tolist():
        op = int(r.OP[e])
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        n = r.size(e)
        if op <= EW_LAST and r.META[e] >= 0 and n >= RUN_MIN:
            if plain or (run and n != run_n):
                close()
            run.append(e)
            run_n = n
        elif MATMUL_FIRST <= op <= MATMUL_LAST and _macs(r, e) >= HOST_MIN_MACS:
            close()
            segs.append(("blas", e))
        else:
            if run:
                close()
            plain.append(e)
    close()
    return segs


def _blas_forward(r, e):
    nb, M, K, N, dt, ty = r.product(e)
    V, OFF = r.V, r.OFF
    oa, ob, oi = int(OFF[r.A[e]]), int(OFF[r.B[e]]), int(OFF[e])
    x = V[oa:oa + nb * M * K].reshape(nb, M, K).astype(dt, copy=False)
    y = y_blocks(V[ob:ob + nb * K * N], nb, K, N, ty).astype(dt, copy=False)
    with one_blas_thread(nb * M * K * N):
        V[oi:oi + nb * M * N].reshape(nb, M, N)[...] = np.matmul(x, y)


def run_forward(r):
    """Recompute every scheduled entry; the status of the compiled forward."""
    if r.segments is None or r.segments[0] is not r.schedule:   # (the optimiser may cut it)
        r.segments = (r.schedule, segments(r))
        r.in_run = None
    for seg in r.segments[1]:
        if seg[0] == "run":
            ents, n = seg[1], seg[2]
            VECTOR.settle()
            fwd = fused.FWD.compile_slots(set(r.OP[ents].tolist()))
            fused.launch(fused.forward_part, fused.forward_parallel, n * len(ents), ents,
                         len(ents), r.OP, r.A, r.B, r.C, r.C2, r.OFF, r.V, n, fwd)
        elif seg[0] == "blas":
            _blas_forward(r, seg[1])
        else:
            status, _ = forward_compiling(REPLAY.pick(forward, r.nv + r.n, (1,)), seg[1],
                                          r.arrays(), r.omap)
            if status != DONE:
                return status
    return DONE


def reverse(r, out):
    """Sweep back from scalar entry ``out`` (adjoint 1) into ``r.G``."""
    G, live = r.G, r.live
    if r.in_run is None:
        r.in_run = np.zeros(r.n, np.uint8)
        for seg in r.segments[1]:
            if seg[0] == "run":
                r.in_run[seg[1]] = 1
    fused.clear_swept(live, r.in_run, r.OFF, r.META, r.IAUX, G)
    G[r.OFF[out]] = 1.0
    live[out] = 1
    status, i = sweep_down(r, out, G, live)
    if status != DONE:    # (a recording holds no custom Function: run_forward refused it)
        raise AssertionError(f"unexpected sweep stop {status} at entry {i}")


def sweep_down(r, top, G, live):
    """The reverse sweep of recording ``r`` from entry ``top`` into the adjoints ``G``
    (seeded, their entries ``live``; any other adjoint the sweep reaches, zero), as the
    engine's: runs of large elementwise entries by the fused kernels, large products by
    BLAS, so that a replayed gradient is the eager one bit for bit.  Returns (status,
    entry) where it stopped: ``(DONE, -1)``, or a host entry it cannot run."""
    keep = np.zeros(r.n, np.uint8)
    ents = np.empty(r.n, np.int64)
    fresh = np.empty(2 * r.n, np.uint8)
    clean = np.zeros(2 * r.n, np.uint8)   # (this arena is kept zero: no input zeroed again)
    while top >= 0:
        run = REVERSE.pick(sweep, r.n + r.nv // 8, (2, 3))
        status, i = sweep_compiling(run, top, r.arrays(), G, live, r.scratch, r.omap,
                                    HOST_MIN_MACS, -1, False, 0, False, RUN_MIN)
        if status == DONE:
            return DONE, -1
        if status == FUSE:
            FUSED.settle()
            n = r.size(i)
            m, top = fused.run_below(i, 0, n, r.OP, r.A, r.B, r.META, r.IAUX, r.FLAGS, live,
                                     ents, fresh)
            rev = fused.REV.compile_slots(set(r.OP[ents[:m]].tolist()))
            fused.launch(fused.reverse_part, fused.reverse_parallel, n * m, ents, m, r.OP,
                         r.A, r.B, r.C, r.C2, r.OFF, r.V, G, n, keep, clean, rev)
        elif status == HOST and MATMUL_FIRST <= r.OP[i] <= MATMUL_LAST:
            host_matmul(r, i, G)
            live[r.A[i]] = live[r.B[i]] = 1
            top = i - 1
        else:
            return status, i
    return DONE, -1
