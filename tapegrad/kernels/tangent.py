"""The compiled tangent sweep (forward mode) and many-seed sweeps for Jacobians.

``tangent`` walks entries first to last and computes each entry's tangent ``T`` from
its inputs' tangents.  No new rules are needed: an elementwise op's Jacobian is
diagonal, so its tangent is its reverse rule applied to the input tangents
(``ew_grad`` with ``g = dx`` for x's part, ``g = dy`` for y's); every other kind is
linear in its inputs' values or uses the same bookkeeping as the reverse sweep.

``has[i]``: 0 no tangent reaches entry i, 1 computed here, 2 seeded by the caller.
``reverse_rows`` / ``tangent_columns`` run one sweep per one-hot seed inside one
compiled call and collect the rows (or columns) of a Jacobian.
"""
from numba import njit

from .generated import (REDUCE_FIRST, REDUCE_LAST, CAT_FIRST, CAT_LAST, COMPARE_FIRST, EW_LAST, GATHER_FIRST, HOST_FIRST,
                        HOST_LAST, INDEX_LAST, MATMUL_FIRST, MATMUL_LAST, OP_MEAN,
                        OP_MEAN_DIM, OP_PROD, OP_PROD_DIM, OP_SUM, OP_SUM_DIM, OP_WHERE,
                        SOFTMAX_FIRST, SOFTMAX_LAST, SOURCE_FIRST,
                        SOURCE_LAST, STOP_LAST, ew_grad)
from . import softmax
from .replay import concatenate, move
from .reverse import (DONE, HOST, extras_at, others, prod_parts, reduce_map, size_of,
                      sweep)

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _tan(j, has, OFF, T, k):
    """Tangent of element k of buffer j (0 where none reaches it)."""
    return T[OFF[j] + k] if j >= 0 and has[j] else 0.0


@njit(**_JIT)
def _ew(i, op, A, B, C, C2, OFF, META, IAUX, V, T, has):
    a, b, oi = A[i], B[i], OFF[i]
    ha = a >= 0 and has[a] != 0
    hb = b >= 0 and has[b] != 0
    oa = OFF[a] if a >= 0 else 0
    ob = OFF[b] if b >= 0 else 0
    for k in range(size_of(META, IAUX, i)):
        x = V[oa + k] if a >= 0 else C[i]
        y = V[ob + k] if b >= 0 else C[i]
        acc = 0.0
        if ha:
            acc += ew_grad(op, x, y, V[oi + k], T[oa + k], C2[i])[0]
        if hb:
            acc += ew_grad(op, x, y, V[oi + k], T[ob + k], C2[i])[1]
        T[oi + k] = acc


@njit(**_JIT)
def _reduce(i, op, A, OFF, META, IAUX, V, T, has, scratch, omap):
    """Input element k feeds output element ``o[k]`` (as in the reverse sweep)."""
    nin, nout, oa, oi = reduce_map(i, A, OFF, META, IAUX, omap)
    o = omap
    for j in range(nout):
        T[oi + j] = 0.0
    if op == OP_SUM or op == OP_SUM_DIM or op == OP_MEAN or op == OP_MEAN_DIM:
        scale = nout / nin if (op == OP_MEAN or op == OP_MEAN_DIM) else 1.0
        for k in range(nin):
            T[oi + o[k]] += T[oa + k] * scale
    elif op == OP_PROD or op == OP_PROD_DIM:
        # d prod = sum_k (product of the others) dx_k, exact with zeros
        prod_parts(oa, nin, nout, o, V, scratch)
        for k in range(nin):
            nonzero, d = others(scratch, nout, o[k], V[oa + k], T[oa + k])
            if nonzero:
                T[oi + o[k]] += d
    else:
        # amax / amin: the mean of the tangents where the extremum is attained
        acc = scratch
        acc[:nout] = 0.0
        for k in range(nin):
            if V[oa + k] == V[oi + o[k]]:
                acc[o[k]] += 1.0
                T[oi + o[k]] += T[oa + k]
        for j in range(nout):
            T[oi + j] /= acc[j]


@njit(**_JIT)
def _matmul(i, A, B, OFF, META, IAUX, V, T, has):
    """d(x @ y) = dx @ y + x @ dy, batch by batch."""
    e = extras_at(META, IAUX, i)
    nb, M, K, N = IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3]
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    ha, hb = has[a] != 0, has[b] != 0
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            for n in range(N):
                acc = 0.0
                for k in range(K):
                    if ha:
                        acc += T[xa + m * K + k] * V[yb + k * N + n]
                    if hb:
                        acc += V[xa + m * K + k] * T[yb + k * N + n]
                T[go + m * N + n] = acc


@njit(**_JIT)
def tangent(lo, hi, OP, A, B, C, C2, OFF, META, IAUX, V, T, has, scratch, omap):
    """Tangents of entries ``lo..hi`` in order.  Returns ``(DONE, -1)`` or ``(HOST, i)``
    at a host entry that a tangent reaches (custom Functions have no tangent rule)."""
    for i in range(lo, hi + 1):
        op = OP[i]
        if has[i] == 2 or SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        if COMPARE_FIRST <= op <= STOP_LAST:   # comparisons and detached copies: no tangent
            has[i] = 0
            continue
        a, b = A[i], B[i]
        reached = (a >= 0 and has[a] != 0) or (b >= 0 and has[b] != 0)
        if CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(IAUX[e + 1]):
                if has[IAUX[e + 2 + 2 * j]]:
                    reached = True
        elif HOST_FIRST <= op <= HOST_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(IAUX[e + 1]):
                if has[IAUX[e + 2 + j]]:
                    return HOST, i
            has[i] = 0
            continue
        if not reached:
            has[i] = 0
            continue
        has[i] = 1
        oi = OFF[i]
        n = size_of(META, IAUX, i)
        if op <= EW_LAST:
            _ew(i, op, A, B, C, C2, OFF, META, IAUX, V, T, has)
        elif op == OP_WHERE:
            cond = OFF[IAUX[extras_at(META, IAUX, i)]]
            for k in range(n):
                T[oi + k] = _tan(a, has, OFF, T, k) if V[cond + k] != 0.0 else \
                    _tan(b, has, OFF, T, k)
        elif GATHER_FIRST <= op <= INDEX_LAST:
            move(i, op, a, OFF, META, IAUX, T, omap)
        elif REDUCE_FIRST <= op <= REDUCE_LAST:
            _reduce(i, op, A, OFF, META, IAUX, V, T, has, scratch, omap)
        elif op <= MATMUL_LAST:
            _matmul(i, A, B, OFF, META, IAUX, V, T, has)
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.tangent(i, op, OFF[a], oi, META, IAUX, V, T)
        else:   # cat
            concatenate(i, OFF, META, IAUX, T, has != 0)
    return DONE, -1


@njit(**_JIT)
def reverse_rows(r0, r1, outs, top, OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V, G, live,
                 scratch, omap, host_min, wants, J):
    """Rows ``r0..r1-1`` of a Jacobian by reverse sweeps: row r seeds a one in the r-th
    element of the outputs (buffers ``outs``, flattened in order) and reads the adjoints
    of the buffers ``wants`` into ``J[r - r0]``.  Returns ``(DONE, -1)``, or the sweep's
    stop (status, entry) to leave the rest to Python."""
    for r in range(r0, r1):
        pos = 0
        for e in outs:
            s = size_of(META, IAUX, e)
            live[e] = 1
            if pos <= r < pos + s:
                G[OFF[e] + r - pos] = 1.0
            pos += s
        status, i = sweep(top, OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V, G, live, scratch,
                          omap, host_min, -1, False, 0, True)
        if status != DONE:
            return status, i
        pos = 0
        for w in wants:
            s = size_of(META, IAUX, w)
            for k in range(s):
                J[r - r0, pos + k] = G[OFF[w] + k] if w >= 0 and live[w] else 0.0
            pos += s
        for i in range(top + 1):            # clear what this sweep touched
            if live[i]:
                live[i] = 0
                o = OFF[i]
                for k in range(size_of(META, IAUX, i)):
                    G[o + k] = 0.0
    return DONE, -1


@njit(**_JIT)
def tangent_columns(c0, c1, ins, lo, hi, OP, A, B, C, C2, OFF, META, IAUX, V, T, has, scratch,
                    omap, outs, J):
    """Columns ``c0..c1-1`` of a Jacobian by tangent sweeps: column c seeds a one in the
    c-th element of the inputs (buffers ``ins``) and reads the tangents of ``outs``."""
    for c in range(c0, c1):
        for i in range(lo, hi + 1):
            has[i] = 0
        pos = 0
        for e in ins:
            s = size_of(META, IAUX, e)
            has[e] = 2
            for k in range(s):
                T[OFF[e] + k] = 1.0 if pos + k == c else 0.0
            pos += s
        status, i = tangent(lo, hi, OP, A, B, C, C2, OFF, META, IAUX, V, T, has, scratch, omap)
        if status != DONE:
            return status, i
        pos = 0
        for w in outs:
            s = size_of(META, IAUX, w)
            for k in range(s):
                J[pos + k, c - c0] = T[OFF[w] + k] if has[w] else 0.0
            pos += s
    return DONE, -1
