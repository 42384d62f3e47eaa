"""The compiled reverse sweep over a tape's flat arrays.

``mark`` finds the entries an output depends on; ``sweep`` walks them from the last
to the first, adding each entry's adjoint contributions into its inputs' adjoints.
Adjoints live in ``G``, an arena with the same layout as the value arena ``V``.
Nothing here knows a Python object, and nothing raises: the engine validates first.

Metadata of an array entry, at ``IAUX[META[i]]``: ``[size, ndim, *shape, *extras]``.
"""
from numba import njit

from .generated import (REDUCE_FIRST, REDUCE_LAST, CAT_FIRST, CAT_LAST, EW_LAST, GATHER_FIRST, GATHER_LAST, HOST_FIRST,
                        HOST_LAST, INDEX_FIRST,
                        INDEX_LAST, MATMUL_FIRST, MATMUL_LAST, OP_AMAX, OP_AMIN, OP_CONST,
                        OP_MAX_ALL, OP_MEAN, OP_MEAN_DIM, OP_MIN_ALL, OP_PROD, OP_PROD_DIM,
                        OP_SUM, OP_SUM_DIM, OP_WHERE, RESHAPE_FIRST, RESHAPE_LAST, SOFTMAX_FIRST,
                        SOFTMAX_LAST, SOURCE_FIRST, SOURCE_LAST, ew_grad)
from . import softmax

_JIT = dict(cache=True, error_model="numpy")
DONE, CONSUMED, HOST, HOOK, NAN, FUSE = 0, 1, 2, 3, 4, 5      # how a sweep ended


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
def _needs(j, OP):
    """Does buffer j want an adjoint (is it an input other than a constant)?"""
    return j >= 0 and OP[j] != OP_CONST


@njit(**_JIT)
def _ew(i, op, OP, A, B, C, C2, OFF, META, IAUX, V, G):
    a, b = A[i], B[i]
    c, c2, oi = C[i], C2[i], OFF[i]
    ga = _needs(a, OP)
    gb = _needs(b, OP)
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
def _where(i, OP, A, B, OFF, META, IAUX, V, G):
    a, b, oi = A[i], B[i], OFF[i]
    cond = OFF[IAUX[extras_at(META, IAUX, i)]]
    for k in range(size_of(META, IAUX, i)):
        if V[cond + k] != 0.0:
            if _needs(a, OP):
                G[OFF[a] + k] += G[oi + k]
        elif _needs(b, OP):
            G[OFF[b] + k] += G[oi + k]


@njit(**_JIT)
def _pad4(IAUX, at, nd, fill):
    """The last four of the nd values at IAUX[at:], padded in front with ``fill``."""
    p = 4 - nd
    v0 = IAUX[at - p] if p <= 0 else fill
    v1 = IAUX[at + 1 - p] if p <= 1 else fill
    v2 = IAUX[at + 2 - p] if p <= 2 else fill
    v3 = IAUX[at + 3 - p] if p <= 3 else fill
    return v0, v1, v2, v3


@njit(**_JIT)
def offsets(IAUX, shp, strd, nd, out):
    """out[k] = offset of linear index k of the C-ordered shape at IAUX[shp:] under the
    strides at IAUX[strd:]; nested loops (no division) for up to 4 dims."""
    if nd > 4:
        n = 1
        for d in range(nd):
            n *= IAUX[shp + d]
        for k in range(n):
            out[k] = strided(k, IAUX, shp, strd, nd)
        return
    s0, s1, s2, s3 = _pad4(IAUX, shp, nd, 1)
    t0, t1, t2, t3 = _pad4(IAUX, strd, nd, 0)
    k = 0
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                o = i0 * t0 + i1 * t1 + i2 * t2
                for i3 in range(s3):
                    out[k] = o + i3 * t3
                    k += 1


@njit(**_JIT)
def _gather(i, A, OFF, META, IAUX, G, omap):
    m = META[i]
    nd = IAUX[m + 1]
    e = m + 2 + nd
    base = OFF[A[i]] + IAUX[e]
    oi = OFF[i]
    if nd == 0:            # one element (x[i] of a vector): no offset map
        G[base] += G[oi]
        return
    if nd <= 4:            # nested loops, no offset map (a broadcast bias: rows of a sum)
        s0, s1, s2, s3 = _pad4(IAUX, m + 2, nd, 1)
        t0, t1, t2, t3 = _pad4(IAUX, e + 1, nd, 0)
        k = oi
        for i0 in range(s0):
            for i1 in range(s1):
                for i2 in range(s2):
                    o = base + i0 * t0 + i1 * t1 + i2 * t2
                    for i3 in range(s3):
                        G[o + i3 * t3] += G[k + i3]
                    k += s3
        return
    offsets(IAUX, m + 2, e + 1, nd, omap)
    for k in range(IAUX[m]):
        G[base + omap[k]] += G[oi + k]


@njit(**_JIT)
def _index(i, A, OFF, META, IAUX, G):
    e = extras_at(META, IAUX, i)
    oa, oi = OFF[A[i]], OFF[i]
    for k in range(size_of(META, IAUX, i)):
        G[oa + IAUX[e + k]] += G[oi + k]


@njit(**_JIT)
def reduce_map(i, A, OFF, META, IAUX, omap):
    """For reduction entry i: ``omap[k]`` = the output element that input element k
    feeds (the input's shape read with the output's strides).  Returns (input size,
    output size, input offset, output offset)."""
    a = A[i]
    ma = META[a]
    if ma < 0:
        omap[0] = 0
    else:
        offsets(IAUX, ma + 2, extras_at(META, IAUX, i), IAUX[ma + 1], omap)
    return (1 if ma < 0 else IAUX[ma]), size_of(META, IAUX, i), OFF[a], OFF[i]


@njit(**_JIT)
def prod_parts(oa, nin, nout, o, V, acc):
    """Per output j of a product: ``acc[j]`` its zero factors, ``acc[nout + j]`` the
    product of its non-zero ones."""
    acc[:nout] = 0.0
    acc[nout:2 * nout] = 1.0
    for k in range(nin):
        x = V[oa + k]
        if x == 0.0:
            acc[o[k]] += 1.0
        else:
            acc[nout + o[k]] *= x


@njit(**_JIT)
def others(acc, nout, j, x, g):
    """(non-zero?, g times the product of the other factors) for a factor x of output
    j: exact with zeros (only the zero factor of a product with one zero gets a
    derivative)."""
    zeros = acc[j]
    if zeros == 0.0:
        return True, g * acc[nout + j] / x
    if zeros == 1.0 and x == 0.0:
        return True, g * acc[nout + j]
    return False, 0.0


@njit(**_JIT)
def _reduce(i, op, A, OFF, META, IAUX, V, G, scratch, omap):
    """Reductions: input element k goes to output element ``o[k]`` (offsets of the
    input's shape under the output strides, in ``omap``); ``scratch`` holds two
    per-output accumulators."""
    nin, nout, oa, oi = reduce_map(i, A, OFF, META, IAUX, omap)
    o = omap
    acc = scratch
    if op == OP_SUM or op == OP_SUM_DIM:
        for k in range(nin):
            G[oa + k] += G[oi + o[k]]
    elif op == OP_MEAN or op == OP_MEAN_DIM:
        scale = nout / nin
        for k in range(nin):
            G[oa + k] += G[oi + o[k]] * scale
    elif op == OP_AMAX or op == OP_AMIN or op == OP_MAX_ALL or op == OP_MIN_ALL:
        # the gradient is shared evenly among the positions that attain the extremum
        acc[:nout] = 0.0
        for k in range(nin):
            if V[oa + k] == V[oi + o[k]]:
                acc[o[k]] += 1.0
        for k in range(nin):
            if V[oa + k] == V[oi + o[k]]:
                G[oa + k] += G[oi + o[k]] / acc[o[k]]
    elif op == OP_PROD or op == OP_PROD_DIM:
        prod_parts(oa, nin, nout, o, V, acc)
        for k in range(nin):
            nonzero, d = others(acc, nout, o[k], V[oa + k], G[oi + o[k]])
            if nonzero:
                G[oa + k] += d


@njit(**_JIT)
def _matmul(i, OP, A, B, OFF, META, IAUX, V, G):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T, dy = x^T g."""
    e = extras_at(META, IAUX, i)
    nb, M, K, N = IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3]
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if _needs(a, OP):
            for m in range(M):
                for k in range(K):
                    acc = 0.0
                    for n in range(N):
                        acc += G[go + m * N + n] * V[yb + k * N + n]
                    G[xa + m * K + k] += acc
        if _needs(b, OP):
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
def sweep(top, OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V, G, live, scratch, omap, host_min,
          hooked_done, check_nan, lo, prune=False, fuse_min=1 << 62):
    """Reverse sweep over entries ``top`` down to ``lo`` from the entries pre-marked in
    ``live`` (all at or below ``top``), last to first.  An entry is swept if a swept entry uses it: liveness is marked
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
                _ew(i, op, OP, A, B, C, C2, OFF, META, IAUX, V, G)
        elif op == OP_WHERE:
            _where(i, OP, A, B, OFF, META, IAUX, V, G)
        elif GATHER_FIRST <= op <= GATHER_LAST:
            _gather(i, A, OFF, META, IAUX, G, omap)
        elif RESHAPE_FIRST <= op <= RESHAPE_LAST:
            oa, oi = OFF[a], OFF[i]
            for k in range(size_of(META, IAUX, i)):
                G[oa + k] += G[oi + k]
        elif INDEX_FIRST <= op <= INDEX_LAST:
            _index(i, A, OFF, META, IAUX, G)
        elif REDUCE_FIRST <= op <= REDUCE_LAST:
            _reduce(i, op, A, OFF, META, IAUX, V, G, scratch, omap)
        elif op <= MATMUL_LAST:
            e = extras_at(META, IAUX, i)
            if IAUX[e] * IAUX[e + 1] * IAUX[e + 2] * IAUX[e + 3] >= host_min:
                return HOST, i
            _matmul(i, OP, A, B, OFF, META, IAUX, V, G)
        elif CAT_FIRST <= op <= CAT_LAST:
            e = extras_at(META, IAUX, i)
            _cat(i, OFF, META, IAUX, G)
            for j in range(IAUX[e + 1]):
                buf = IAUX[e + 2 + 2 * j]
                if not prune or _nonzero(buf, OFF, META, IAUX, G):
                    live[buf] = 1
        elif SOFTMAX_FIRST <= op <= SOFTMAX_LAST:
            softmax.reverse(i, op, OFF[a], OFF[i], META, IAUX, V, G)
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
def consume(n, OP, FLAGS, live):
    """Mark the swept entries consumed (a backward without retain_graph); returns how
    many non-source entries of the tape are still unconsumed."""
    left = 0
    for i in range(n):
        if SOURCE_FIRST <= OP[i] <= SOURCE_LAST:
            continue
        if live[i]:
            FLAGS[i] |= 1
        elif not FLAGS[i] & 1:
            left += 1
    return left
