"""Reductions (sum, mean, amax, amin, max, min, prod over dims): forward, reverse and
tangent side by side.  Input element k feeds output element ``o[k]``: the offsets of
the input's shape under the output's strides (``reduce_map``)."""
import numpy as np
from numba import njit, uint64

from .generated import (OP_AMAX, OP_AMIN, OP_MAX_ALL, OP_MEAN, OP_MEAN_DIM, OP_MIN_ALL, OP_PROD,
                        OP_PROD_DIM, OP_SUM, OP_SUM_DIM)
from .layout import extras_at, ndim_at, offsets, pad4, shape_at, size_of

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def attains(x, r, full):
    """Does an element x attain the extremum r?  Equal; for a full reduction (max(),
    min()) with a nan result, the nans (PyTorch's evenly_distribute_backward)."""
    return x == r or (full and r != r and x != x)


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
        offsets(IAUX, shape_at(ma), extras_at(META, IAUX, i), ndim_at(IAUX, ma), omap)
    return size_of(META, IAUX, a), size_of(META, IAUX, i), OFF[a], OFF[i]


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
        return True, g * (acc[nout + j] / x)      # (PyTorch's order: r / x first)
    if zeros == 1.0 and x == 0.0:
        return True, g * acc[nout + j]
    return False, 0.0


@njit(inline="always", **_JIT)
def full_sum(X, xa, nin):
    """The sum of ``X[xa:xa + nin]`` in the one order of a full sum: 8 interleaved
    partial sums, combined pairwise (more accurate than one running sum, and vectorised),
    then the rest (``replay/llvm_tape``'s ``_sum`` emits the same)."""
    s0 = s1 = s2 = s3 = s4 = s5 = s6 = s7 = 0.0
    p, n, k = uint64(xa), uint64(nin), uint64(0)     # (unsigned: the sums vectorise, 1.5x)
    while k + uint64(8) <= n:
        s0 += X[p + k]
        s1 += X[p + k + uint64(1)]
        s2 += X[p + k + uint64(2)]
        s3 += X[p + k + uint64(3)]
        s4 += X[p + k + uint64(4)]
        s5 += X[p + k + uint64(5)]
        s6 += X[p + k + uint64(6)]
        s7 += X[p + k + uint64(7)]
        k += uint64(8)
    s = ((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))
    while k < n:
        s += X[p + k]
        k += uint64(1)
    return s


@njit(**_JIT)
def sum_into(X, xa, Y, yo, nin, nout, o, rows=0):
    """``Y[yo + j]`` = the sum of the ``X[xa + k]`` with ``o[k] == j``, in the one order
    every path sums in (eager sums call this too: a replayed sum is the eager one, bit for
    bit): a full sum (``nout`` 1, ``o`` unread) as ``full_sum``, a sum over dims element
    by element in input order.  ``rows``: 1 when output j sums the j-th run of
    ``nin // nout`` inputs (trailing dims), 2 when it sums inputs j, j + nout, ...
    (leading dims): the same order without reading ``o``."""
    if nout == 1:
        Y[yo] = full_sum(X, xa, nin)
        return
    for j in range(nout):
        Y[yo + j] = 0.0
    if rows == 1:
        m = nin // nout
        for j in range(nout):
            s = 0.0
            for r in range(m):
                s += X[xa + j * m + r]
            Y[yo + j] = s
    elif rows == 2:
        for k0 in range(0, nin, nout):
            _add_scaled(Y, uint64(yo), uint64(xa + k0), uint64(nout), 1.0, X)
    else:
        for k in range(nin):
            Y[yo + o[k]] += X[xa + k]


@njit(inline="always", **_JIT)
def _wins(x, cur, big, last):
    """Does x replace the extremum so far?  Larger (``big``) or smaller; when equal (-0.0
    and 0.0), the first value stays, or the last where ``last``."""
    return (x > cur if big else x < cur) or (last and x == cur)


@njit(**_JIT)
def extreme_into(X, xa, Y, yo, nin, nout, o, rows, big, last):
    """``Y[yo + j]`` = the largest (``big``) or smallest of the ``X[xa + k]`` with ``o[k]
    == j`` (``rows`` as ``sum_into``'s), for every path (eager amax / amin / max() / min()
    call this too).  A nan wins (the first); of equal values the first, or the ``last``:
    PyTorch's amax / amin keep the first of -0.0 and 0.0, its max() / min() the last."""
    init = -np.inf if big else np.inf
    if rows == 1 or nout == 1:
        m = nin // nout
        for j in range(nout):
            p = xa + j * m
            cur, nan = init, False
            for r in range(m):
                x = X[p + r]
                nan |= x != x
                cur = x if _wins(x, cur, big, last) else cur
            if nan:                                   # (the first nan)
                for r in range(m):
                    if X[p + r] != X[p + r]:
                        cur = X[p + r]
                        break
            Y[yo + j] = cur
        return
    for j in range(nout):
        Y[yo + j] = init
    nan = False
    if rows == 2:                                     # output j: inputs j, j + nout, ...
        for k0 in range(0, nin, nout):
            for j in range(nout):
                x, cur = X[xa + k0 + j], Y[yo + j]
                nan |= x != x
                Y[yo + j] = x if _wins(x, cur, big, last) else cur
    else:
        for k in range(nin):
            x, cur = X[xa + k], Y[yo + o[k]]
            nan |= x != x
            Y[yo + o[k]] = x if _wins(x, cur, big, last) else cur
    if nan:                                           # each output's first nan
        for k in range(nin - 1, -1, -1):
            if X[xa + k] != X[xa + k]:
                Y[yo + (k % nout if rows == 2 else o[k])] = X[xa + k]


@njit(**_JIT)
def forward(i, tape, omap):
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    op = OP[i]
    nin, nout, oa, oi = reduce_map(i, A, OFF, META, IAUX, omap)
    o = omap
    if op == OP_SUM or op == OP_SUM_DIM or op == OP_MEAN or op == OP_MEAN_DIM:
        sum_into(V, oa, V, oi, nin, nout, o)
        if op == OP_MEAN or op == OP_MEAN_DIM:
            count = nin / nout          # (divided, as the eager mean: the same bits)
            for j in range(nout):
                V[oi + j] /= count
    elif op == OP_PROD or op == OP_PROD_DIM:
        for j in range(nout):
            V[oi + j] = 1.0
        for k in range(nin):
            V[oi + o[k]] *= V[oa + k]
    else:
        extreme_into(V, oa, V, oi, nin, nout, o, 0, op == OP_AMAX or op == OP_MAX_ALL,
                     op == OP_MAX_ALL or op == OP_MIN_ALL)


@njit(**_JIT)
def _add_value(G, k, n, g):
    """``G[k:k + n] += g``, indices unsigned: Numba checks a signed index for a negative
    value, which kept such loops from vectorising."""
    for v in range(n):
        G[k + v] += g


@njit(**_JIT)
def _add_scaled(G, k, o, n, scale, X):
    """``G[k:k + n] += X[o:o + n] * scale``, as ``_add_value`` (a scale of 1.0: exact)."""
    for v in range(n):
        G[k + v] += X[o + v] * scale


@njit(**_JIT)
def _spread(G, oa, oi, IAUX, shp, strd, nd, scale):
    """``G[oa + k] += G[oi + o[k]] * scale`` for each input element k (the output
    offsets ``o`` as ``layout.offsets`` makes them, here in its loops: one addition into
    each, the same bits; ``scale`` 1.0 for a sum, exact)."""
    s0, s1, s2, s3 = pad4(IAUX, shp, nd, 1)
    t0, t1, t2, t3 = pad4(IAUX, strd, nd, 0)
    k = oa
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                o = oi + i0 * t0 + i1 * t1 + i2 * t2
                if t3 == 0:                  # summed along the last dim: one value a row
                    _add_value(G, uint64(k), uint64(s3), G[o] * scale)
                elif t3 == 1:
                    _add_scaled(G, uint64(k), uint64(o), uint64(s3), scale, G)
                else:
                    for i3 in range(s3):
                        G[k + i3] += G[o + i3 * t3] * scale
                k += s3


@njit(**_JIT)
def reverse(i, tape, G, scratch, omap):
    """Reductions: input element k goes to output element ``o[k]`` (offsets of the
    input's shape under the output strides, in ``omap``); ``scratch`` holds two
    per-output accumulators."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    op = OP[i]
    if size_of(META, IAUX, i) == 1 and (op == OP_SUM or op == OP_SUM_DIM or op == OP_MEAN
                                        or op == OP_MEAN_DIM):
        # a sum to one value: the same sums without the offset map, in a loop that
        # vectorises
        a = A[i]
        g = G[OFF[i]]
        if op == OP_MEAN or op == OP_MEAN_DIM:
            g = g * (1 / size_of(META, IAUX, a))
        _add_value(G, uint64(OFF[a]), uint64(size_of(META, IAUX, a)), g)
        return
    ma = META[A[i]]
    if (op == OP_SUM or op == OP_SUM_DIM or op == OP_MEAN or op == OP_MEAN_DIM) and ma >= 0 \
            and ndim_at(IAUX, ma) <= 4:
        # a sum over dims: the output's adjoints spread back along the input's loops,
        # without the offset map (writing and reading it cost more than the sweep)
        scale = 1.0 if op == OP_SUM or op == OP_SUM_DIM else \
            size_of(META, IAUX, i) / size_of(META, IAUX, A[i])
        _spread(G, OFF[A[i]], OFF[i], IAUX, shape_at(ma), extras_at(META, IAUX, i),
                ndim_at(IAUX, ma), scale)
        return
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
        # shared evenly among the positions that attain the extremum, as PyTorch:
        # (g / count) * attains, so a row that no position attains (nan) gets nan
        full = op == OP_MAX_ALL or op == OP_MIN_ALL
        acc[:nout] = 0.0
        for k in range(nin):
            if attains(V[oa + k], V[oi + o[k]], full):
                acc[o[k]] += 1.0
        for k in range(nin):
            hit = 1.0 if attains(V[oa + k], V[oi + o[k]], full) else 0.0
            G[oa + k] += G[oi + o[k]] / acc[o[k]] * hit
    elif op == OP_PROD or op == OP_PROD_DIM:
        prod_parts(oa, nin, nout, o, V, acc)
        for k in range(nin):
            nonzero, d = others(acc, nout, o[k], V[oa + k], G[oi + o[k]])
            if nonzero:
                G[oa + k] += d


@njit(**_JIT)
def tangent(i, op, A, OFF, META, IAUX, V, T, has, scratch, omap):
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
        full = op == OP_MAX_ALL or op == OP_MIN_ALL
        acc = scratch
        acc[:nout] = 0.0
        for k in range(nin):
            if attains(V[oa + k], V[oi + o[k]], full):
                acc[o[k]] += 1.0
                T[oi + o[k]] += T[oa + k]
        for j in range(nout):
            T[oi + j] /= acc[j]
