"""The compiled reverse sweep over a tape's flat arrays.

``mark`` finds the entries an output depends on; ``sweep`` walks them from the last
to the first, adding each entry's adjoint contributions into its inputs' adjoints.
Adjoints live in ``G``, an arena with the same layout as the value arena ``V``.
Nothing here knows a Python object, and nothing raises: the engine validates first.

Metadata of an array entry, at ``IAUX[META[i]]``: ``[size, ndim, *shape, *extras]``.
"""
from numba import njit

from .generated import (CAT_FIRST, CAT_LAST, EW_LAST, GATHER_FIRST, GATHER_LAST, INDEX_FIRST,
                        INDEX_LAST, MATMUL_FIRST, MATMUL_LAST, OP_AMAX, OP_AMIN, OP_CONST,
                        OP_MAX_ALL, OP_MEAN, OP_MEAN_DIM, OP_MIN_ALL, OP_PROD, OP_PROD_DIM,
                        OP_SUM, OP_SUM_DIM, OP_WHERE, RESHAPE_FIRST, RESHAPE_LAST, SOURCE_FIRST,
                        SOURCE_LAST, ew_grad)

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def size_of(META, IAUX, i):
    m = META[i]
    return 1 if m < 0 else IAUX[m]


@njit(**_JIT)
def extras_at(META, IAUX, i):
    m = META[i]
    return m + 2 + IAUX[m + 1]


@njit(**_JIT)
def strided(k, IAUX, shp, strd, nd):
    """Offset of linear index ``k`` of a C-ordered shape (at IAUX[shp:]) under the
    strides at IAUX[strd:]."""
    off = 0
    for d in range(nd - 1, -1, -1):
        s = IAUX[shp + d]
        q = k // s
        off += (k - q * s) * IAUX[strd + d]
        k = q
    return off


@njit(**_JIT)
def mark(top, OP, A, B, META, IAUX, FLAGS, live):
    """Mark in ``live`` every entry the pre-marked roots depend on (constants excluded:
    ``live`` doubles as "needs an adjoint" in the sweep).  Returns the index
    of a needed entry that an earlier backward consumed, or -1."""
    for i in range(top, -1, -1):
        if live[i] == 0:
            continue
        op = OP[i]
        if SOURCE_FIRST <= op <= SOURCE_LAST:
            continue
        if FLAGS[i] & 1:
            return i
        _need(A[i], OP, live)
        _need(B[i], OP, live)
        if CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            for j in range(IAUX[e + 1]):
                _need(IAUX[e + 2 + 2 * j], OP, live)
    return -1


@njit(**_JIT)
def _need(j, OP, live):
    if j >= 0 and OP[j] != OP_CONST:
        live[j] = 1


@njit(**_JIT)
def _ew(i, op, A, B, C, C2, OFF, META, IAUX, V, G, live):
    a, b = A[i], B[i]
    c, c2, oi = C[i], C2[i], OFF[i]
    ga = a >= 0 and live[a]
    gb = b >= 0 and live[b]
    oa = OFF[a] if a >= 0 else 0
    ob = OFF[b] if b >= 0 else 0
    for k in range(size_of(META, IAUX, i)):
        x = V[oa + k] if a >= 0 else c
        y = V[ob + k] if b >= 0 else c
        gx, gy = ew_grad(op, x, y, V[oi + k], G[oi + k], c2)
        if ga:
            G[oa + k] += gx
        if gb:
            G[ob + k] += gy


@njit(**_JIT)
def _where(i, A, B, OFF, META, IAUX, V, G, live):
    a, b, oi = A[i], B[i], OFF[i]
    cond = OFF[IAUX[extras_at(META, IAUX, i)]]
    for k in range(size_of(META, IAUX, i)):
        if V[cond + k] != 0.0:
            if a >= 0 and live[a]:
                G[OFF[a] + k] += G[oi + k]
        elif b >= 0 and live[b]:
            G[OFF[b] + k] += G[oi + k]


@njit(**_JIT)
def _gather(i, A, OFF, META, IAUX, G):
    m = META[i]
    nd = IAUX[m + 1]
    e = m + 2 + nd
    base = OFF[A[i]] + IAUX[e]
    oi = OFF[i]
    for k in range(IAUX[m]):
        G[base + strided(k, IAUX, m + 2, e + 1, nd)] += G[oi + k]


@njit(**_JIT)
def _index(i, A, OFF, META, IAUX, G):
    e = extras_at(META, IAUX, i)
    oa, oi = OFF[A[i]], OFF[i]
    for k in range(size_of(META, IAUX, i)):
        G[oa + IAUX[e + k]] += G[oi + k]


@njit(**_JIT)
def _reduce(i, op, A, OFF, META, IAUX, V, G, scratch):
    """Reductions: input element k goes to output element strided(k, in shape, ostrides)."""
    a = A[i]
    ma = META[a]
    nin = 1 if ma < 0 else IAUX[ma]
    nd = 0 if ma < 0 else IAUX[ma + 1]
    e = extras_at(META, IAUX, i)
    nout = size_of(META, IAUX, i)
    oa, oi = OFF[a], OFF[i]
    if op == OP_SUM or op == OP_SUM_DIM or op == OP_MEAN or op == OP_MEAN_DIM:
        scale = 1.0
        if op == OP_MEAN or op == OP_MEAN_DIM:
            scale = nout / nin
        for k in range(nin):
            G[oa + k] += G[oi + strided(k, IAUX, ma + 2, e, nd)] * scale
    elif op == OP_AMAX or op == OP_AMIN or op == OP_MAX_ALL or op == OP_MIN_ALL:
        # the gradient is shared evenly among the positions that attain the extremum
        for o in range(nout):
            scratch[o] = 0.0
        for k in range(nin):
            o = strided(k, IAUX, ma + 2, e, nd)
            if V[oa + k] == V[oi + o]:
                scratch[o] += 1.0
        for k in range(nin):
            o = strided(k, IAUX, ma + 2, e, nd)
            if V[oa + k] == V[oi + o]:
                G[oa + k] += G[oi + o] / scratch[o]
    elif op == OP_PROD or op == OP_PROD_DIM:
        # product of the others, exact with zeros: count zeros and multiply the non-zeros
        for o in range(nout):
            scratch[o] = 0.0
            scratch[nout + o] = 1.0
        for k in range(nin):
            o = strided(k, IAUX, ma + 2, e, nd)
            x = V[oa + k]
            if x == 0.0:
                scratch[o] += 1.0
            else:
                scratch[nout + o] *= x
        for k in range(nin):
            o = strided(k, IAUX, ma + 2, e, nd)
            x = V[oa + k]
            zeros = scratch[o]
            if zeros == 0.0:
                G[oa + k] += G[oi + o] * scratch[nout + o] / x
            elif zeros == 1.0 and x == 0.0:
                G[oa + k] += G[oi + o] * scratch[nout + o]


@njit(**_JIT)
def _matmul(i, A, B, OFF, META, IAUX, V, G, live):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T, dy = x^T g."""
    e = extras_at(META, IAUX, i)
    nb, M, K, N = IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3]
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if live[a]:
            for m in range(M):
                for k in range(K):
                    acc = 0.0
                    for n in range(N):
                        acc += G[go + m * N + n] * V[yb + k * N + n]
                    G[xa + m * K + k] += acc
        if live[b]:
            for m in range(M):
                for k in range(K):
                    xv = V[xa + m * K + k]
                    for n in range(N):
                        G[yb + k * N + n] += xv * G[go + m * N + n]


@njit(**_JIT)
def _cat(i, OFF, META, IAUX, G):
    e = extras_at(META, IAUX, i)
    outer, nin = IAUX[e], IAUX[e + 1]
    pos = OFF[i]
    for o in range(outer):
        for j in range(nin):
            buf, inner = IAUX[e + 2 + 2 * j], IAUX[e + 3 + 2 * j]
            dst = OFF[buf] + o * inner
            for t in range(inner):
                G[dst + t] += G[pos + t]
            pos += inner


@njit(**_JIT)
def sweep(lo, hi, OP, A, B, C, C2, OFF, META, IAUX, V, G, live, scratch):
    """Reverse sweep over the live entries in [lo, hi), last to first."""
    for i in range(hi - 1, lo - 1, -1):
        if live[i] == 0:
            continue
        op = OP[i]
        if op <= EW_LAST:
            _ew(i, op, A, B, C, C2, OFF, META, IAUX, V, G, live)
        elif op <= SOURCE_LAST:
            continue
        elif op == OP_WHERE:
            _where(i, A, B, OFF, META, IAUX, V, G, live)
        elif GATHER_FIRST <= op <= GATHER_LAST:
            _gather(i, A, OFF, META, IAUX, G)
        elif RESHAPE_FIRST <= op <= RESHAPE_LAST:
            oa, oi = OFF[A[i]], OFF[i]
            for k in range(size_of(META, IAUX, i)):
                G[oa + k] += G[oi + k]
        elif INDEX_FIRST <= op <= INDEX_LAST:
            _index(i, A, OFF, META, IAUX, G)
        elif op <= MATMUL_FIRST - 1:
            _reduce(i, op, A, OFF, META, IAUX, V, G, scratch)
        elif op <= MATMUL_LAST:
            _matmul(i, A, B, OFF, META, IAUX, V, G, live)
        elif CAT_FIRST <= op <= CAT_LAST:
            _cat(i, OFF, META, IAUX, G)

