"""The compiled reverse sweep over a tape's flat arrays.

``mark`` finds the entries an output depends on; ``sweep`` walks them from the last
to the first, adding each entry's adjoint contributions into its inputs' adjoints.
Adjoints live in ``G``, an arena with the same layout as the value arena ``V``.
Nothing here knows a Python object, and nothing raises: the engine validates first.  Each kind's rule is in the kind's own module (``elementwise``,
``structural``, ``reduce``, ``matmul``, ``softmax``): the sweep only dispatches.
"""
from numba import njit

from . import broadcast, elementwise, matmul, reduce, softmax, structural
from .generated import (BROADCAST_FIRST, BROADCAST_LAST, CAT_FIRST, CAT_LAST, EW_LAST, GATHER_FIRST,
                        GATHER_LAST, HOST_FIRST, HOST_LAST, INDEX_FIRST, INDEX_LAST, MATMUL_FIRST,
                        MATMUL_LAST, OP_CONST, OP_WHERE, REDUCE_FIRST, REDUCE_LAST, RESHAPE_FIRST,
                        RESHAPE_LAST, SOFTMAX_FIRST, SOFTMAX_LAST, SOURCE_FIRST, SOURCE_LAST,
                        ew_grad)
from .layout import extras_at, size_of, tiny_tape

_JIT = dict(cache=True, error_model="numpy")
DONE, CONSUMED, HOST, HOOK, NAN, FUSE = 0, 1, 2, 3, 4, 5      # how a sweep ended


@njit(**_JIT)
def sweep(top, tape, G, live, scratch, omap, host_min, hooked_done, check_nan, lo, prune=False,
          fuse_min=1 << 62):
    """Reverse sweep of ``tape`` (its arrays, ``layout.TAPE``) over entries ``top`` down
    to ``lo`` from the entries pre-marked in ``live`` (all at or below ``top``), last to
    first.  An entry is swept if a swept entry uses it: liveness is marked
    as the sweep goes, so only the output's subgraph is visited, in one pass.

    Returns ``(status, i)``: ``(DONE, -1)``; ``(CONSUMED, i)`` when a needed entry was
    consumed by an earlier backward (the caller discards ``G``: nothing else has been
    written); ``(HOST, i)`` at a host entry (a custom Function's output, or a matrix
    product of at least ``host_min`` multiply-adds), which the caller computes in Python
    before resuming below it;
    ``(HOOK, i)`` when entry i's adjoint is complete and tensor hooks wait for it: the
    caller runs them and resumes at ``i`` with ``hooked_done = i``; ``(NAN, i)`` in
    anomaly mode (``check_nan``) when entry i's backward left a NaN in an input's
    adjoint; ``(FUSE, i)`` at an elementwise entry of at least ``fuse_min`` elements,
    which the caller sweeps with the run below it by the fused kernels.  ``prune``: an input of a concatenation whose adjoint stays zero is not
    marked (a Jacobian row seeds one element of a stacked output: only that element's
    subgraph is swept)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    for i in range(top, lo - 1, -1):
        if live[i] == 0:
            continue
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        if FLAGS[i] & 1:
            return CONSUMED, i
        if FLAGS[i] & 4 and i != hooked_done:
            return HOOK, i
        a, b = A[i], B[i]
        if a >= 0:
            live[a] = 1
        if b >= 0:
            live[b] = 1
        if op <= EW_LAST:
            if META[i] < 0:    # 0-d: the scalar hot path (an adjoint into a constant is harmless)
                oi = OFF[i]
                x = V[OFF[a]] if a >= 0 else C[i]
                y = V[OFF[b]] if b >= 0 else C[i]
                gx, gy = ew_grad(op, x, y, V[oi], G[oi], C2[i])
                if a >= 0:
                    G[OFF[a]] += gx
                if b >= 0:
                    G[OFF[b]] += gy
            elif IAUX[META[i]] >= fuse_min:
                return FUSE, i
            else:
                elementwise.reverse(i, op, OP, A, B, C, C2, OFF, META, IAUX, V, G)
        elif op == OP_WHERE:
            structural.where_reverse(i, OP, A, B, OFF, META, IAUX, V, G)
        elif GATHER_FIRST <= op <= GATHER_LAST:
            structural.gather_reverse(i, A, OFF, META, IAUX, G, omap)
        elif RESHAPE_FIRST <= op <= RESHAPE_LAST:
            oa, oi = OFF[a], OFF[i]
            for k in range(size_of(META, IAUX, i)):
                G[oa + k] += G[oi + k]
        elif INDEX_FIRST <= op <= INDEX_LAST:
            structural.index_reverse(i, A, OFF, META, IAUX, G)
        elif REDUCE_FIRST <= op <= REDUCE_LAST:
            reduce.reverse(i, op, A, OFF, META, IAUX, V, G, scratch, omap)
        elif MATMUL_FIRST <= op <= MATMUL_LAST:
            e = extras_at(META, IAUX, i)
            if IAUX[e] * IAUX[e + 1] * IAUX[e + 2] * IAUX[e + 3] >= host_min:
                return HOST, i
            matmul.reverse(i, OP, A, B, OFF, META, IAUX, V, G, scratch)
        elif CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            structural.cat_reverse(i, OFF, META, IAUX, G)
            for j in range(IAUX[e + 1]):
                buf = IAUX[e + 2 + 2 * j]
                if not prune or _nonzero(buf, OFF, META, IAUX, G):
                    live[buf] = 1
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.reverse(i, op, OFF[a], OFF[i], META, IAUX, V, G)
        elif BROADCAST_FIRST <= op <= BROADCAST_LAST:
            broadcast.reverse(i, op, OP, A, B, OFF, META, IAUX, V, G)
        elif HOST_FIRST <= op <= HOST_LAST:
            return HOST, i
        if check_nan and nan_in_inputs(i, OP, A, B, OFF, META, IAUX, G):
            return NAN, i
    return DONE, -1


@njit(**_JIT)
def _nonzero(j, OFF, META, IAUX, G):
    o = OFF[j]
    for k in range(size_of(META, IAUX, j)):
        if G[o + k] != 0.0:
            return True
    return False


@njit(**_JIT)
def _nan_in(j, OFF, META, IAUX, G):
    o = OFF[j]
    for k in range(size_of(META, IAUX, j)):
        if G[o + k] != G[o + k]:
            return True
    return False


@njit(**_JIT)
def nan_in_inputs(i, OP, A, B, OFF, META, IAUX, G):
    """Anomaly mode: is there a NaN in the adjoint of an input of entry i?"""
    if A[i] >= 0 and _nan_in(A[i], OFF, META, IAUX, G):
        return True
    if B[i] >= 0 and _nan_in(B[i], OFF, META, IAUX, G):
        return True
    if CAT_FIRST <= OP[i] <= CAT_LAST:
        e = extras_at(META, IAUX, i)
        for j in range(IAUX[e + 1]):
            if _nan_in(IAUX[e + 2 + 2 * j], OFF, META, IAUX, G):
                return True
    return False


@njit(**_JIT)
def consume(n, OP, A, B, FLAGS, live, NEED):
    """Mark the swept entries that read recorded values consumed (a backward without
    retain_graph): ``NEED[op]`` bit 1, the adjoint of the first input reads a value; bit
    2, the second's; bit 4, the entry saves one (other kinds).  An input that is a
    constant wants no adjoint.  Returns how many entries that read values are left
    unconsumed (0: the values can go)."""
    left = 0
    for i in range(n):
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        k = NEED[op]
        need = k & 4 != 0
        if not need and k & 1 and A[i] >= 0 and OP[A[i]] != OP_CONST:
            need = True
        if not need and k & 2 and B[i] >= 0 and OP[B[i]] != OP_CONST:
            need = True
        if not need:
            continue
        if live[i]:
            FLAGS[i] |= 1
        elif not FLAGS[i] & 1:
            left += 1
    return left


def warm():
    """Compile ``sweep`` and ``consume`` for the engine's argument types (``cold``'s
    background process): a tape of one unused entry."""
    tape = tiny_tape()
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, f = tape
    sweep(-1, tape, f, FLAGS, f, A, 1, -1, False, 0, False, 1)
    consume(0, OP, A, B, FLAGS, FLAGS, FLAGS)
