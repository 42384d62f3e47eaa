"""Tangent sweeps and many-seed sweeps over one tape, for forward mode and Jacobians.

These drive the kernels of ``tapegrad.kernels.tangent`` on a tape's arrays: a forward
(tangent) sweep from seeded entries, the rows of a Jacobian by one compiled reverse
sweep per output element, its columns by one tangent sweep per input element.  They
return None where a sweep stops at something only Python can do (a custom Function,
a tensor hook), and the caller takes the general path.
"""
import numpy as np

from ..kernels import cold, fused
from ..kernels.reverse import DONE, compile_rules, rules_for
from ..kernels.tangent import reverse_rows, tangent, tangent_columns

# a cold cache: these compile in the background, small tapes are swept by their twins
TANGENT = cold.Group("tangent", (tangent, reverse_rows, tangent_columns),
                     "tapegrad.kernels.tangent:warm")

NO_HOST = np.iinfo(np.int64).max      # keep every matrix product in the compiled sweep
JVP_MISSING = ("You must implement the jvp function for custom autograd.Function to use it "
               "with forward mode AD.")


def _work(t):
    return np.empty(2 * t.max_size), np.empty(t.max_size, np.int64)


def _blocks(run, kernel, t, lo, hi):
    """The tangent sweep's arguments for its large elementwise entries: the reverse
    block rules of their ops (compiled, or for ``kernel``'s twin their twins) and the
    size from which they apply."""
    ops = fused.large_ops(t, lo, hi)
    rev = fused.REV.compile_slots(ops) if run is kernel else fused.REV.twin_for(ops)
    return rev, np.int64(fused.FUSE_MIN)


def tangents(t, seeds, targets):
    """Tangents of the buffers ``targets`` when the buffers of ``seeds`` (entry ->
    float64 array) carry the given tangents: arrays, or None where none reaches."""
    t.flush()
    lo, hi = min(seeds), max(targets)
    if hi < lo:
        return [None] * len(targets)
    has = np.zeros(t.n, np.uint8)
    T = np.zeros(t.nv)
    OFF = t.OFF
    for e, v in seeds.items():
        has[e] = 2
        T[OFF[e]:OFF[e] + v.size] = v.reshape(-1)
    run = TANGENT.pick(tangent, t.nv + t.n, (3, 4))
    status, _ = run(lo, hi, t.arrays(), T, has, *_work(t), *_blocks(run, tangent, t, lo, hi))
    if status != DONE:
        raise RuntimeError(JVP_MISSING)
    return [T[OFF[e]:OFF[e] + t.size(e)].reshape(t.shape(e)).copy() if has[e] else None
            for e in targets]


def jacobian_rows(t, outs, wants, color=None):
    """d(buffers ``outs``)/d(buffers ``wants``) as a (outputs, wants) matrix, one
    compiled reverse sweep per output element; None if a sweep needs Python.  With
    ``color`` (one per output element, 0 .. p-1), the p sweeps seed every element of a
    color at once: the rows of the compressed matrix (``autograd.sparse``)."""
    t.flush()
    n_out = sum(t.size(e) for e in outs)
    color = np.arange(n_out) if color is None else color
    p = int(color.max()) + 1 if n_out else 0
    J = np.zeros((p, sum(t.size(w) for w in wants)))
    G = np.zeros(t.nv)
    live = np.zeros(t.n, np.uint8)
    run = TANGENT.pick(reverse_rows, p * (t.nv + t.n), (5, 6, 11))
    scratch, omap = _work(t)
    if run is reverse_rows:
        compile_rules(t.OP, t.n)
    status, _ = run(0, p, np.array(outs, np.int64), max(outs), t.arrays(), G, live,
                    scratch, omap, NO_HOST, np.array(wants, np.int64), J,
                    rules_for(run, reverse_rows), color)
    return J if status == DONE else None


def jacobian_columns(t, ins, outs, color=None):
    """The same matrix by one tangent sweep per element of the buffers ``ins`` (with
    ``color``, one per input element: the p columns of the compressed matrix)."""
    t.flush()
    n_in = sum(t.size(e) for e in ins)
    color = np.arange(n_in) if color is None else color
    p = int(color.max()) + 1 if n_in else 0
    J = np.zeros((sum(t.size(e) for e in outs), p))
    lo, hi = min(ins), max(outs)
    if hi < lo:
        return J
    has = np.zeros(t.n, np.uint8)
    T = np.zeros(t.nv)
    run = TANGENT.pick(tangent_columns, p * (t.nv + t.n), (6, 7, 13))
    status, i = run(0, p, np.array(ins, np.int64), lo, hi, t.arrays(), T, has, *_work(t),
                    *_blocks(run, tangent_columns, t, lo, hi), np.array(outs, np.int64), J,
                    color)
    if status != DONE:
        raise RuntimeError(JVP_MISSING)
    return J
