"""Structural kinds, linear maps of their inputs' elements: gather (views, slices,
expand), reshape and copies, index lists, concatenation and where.  ``move`` and
``concatenate`` carry values forward (replay) and tangents (the tangent sweep) alike;
the reverse rules are their transposes."""
import numpy as np
from numba import njit

from .generated import GATHER_FIRST, GATHER_LAST, INDEX_FIRST, INDEX_LAST
from .elementwise import tangent_of
from .layout import cat_dims, cat_piece, extras_at, ndim_at, offsets, pad4, shape_at, size_of, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(inline="always", **_JIT)
def is_element(i, op, META, IAUX):
    """Is entry i a gather of one element (``x[k]`` of a vector, a piece of ``unbind``)?
    The sweeps move such an element themselves, inline (``element_at``): on a scalar
    tape, a call of ``move`` or ``gather_reverse`` cost more than the move (a replay of
    ``x[k]`` entries ran 6x slower).  (Two helpers: one that returned the offset or -1
    was not folded into the sweeps' loops, and kept most of the cost.)"""
    return GATHER_FIRST <= op <= GATHER_LAST and ndim_at(IAUX, META[i]) == 0


@njit(inline="always", **_JIT)
def element_at(i, a, OFF, META, IAUX):
    """The arena offset of the element that one-element gather i reads: its extras are
    the base offset alone, where a 0-d entry's shape would start (read there, not at
    ``extras_at``: one load less on the scalar path)."""
    return OFF[a] + IAUX[shape_at(META[i])]


@njit(**_JIT)
def move(i, op, a, OFF, META, IAUX, X, omap, C):
    """X at entry i = X at its input a moved as the entry's kind moves elements (a
    gather, a reshape or copy, an index list): values in a replay, tangents in the
    tangent sweep.  A copy into float32 (``C[i] == 32``) rounds, as PyTorch's values and
    tangents are rounded there."""
    oi, n = OFF[i], size_of(META, IAUX, i)
    if is_element(i, op, META, IAUX):
        X[oi] = X[element_at(i, a, OFF, META, IAUX)]
    elif GATHER_FIRST <= op <= GATHER_LAST:
        m = META[i]
        e = extras_at(META, IAUX, i)         # (base, a stride per dim)
        base = OFF[a] + IAUX[e]
        offsets(IAUX, shape_at(m), e + 1, ndim_at(IAUX, m), omap)
        for k in range(n):
            X[oi + k] = X[base + omap[k]]
    elif INDEX_FIRST <= op <= INDEX_LAST:
        e = extras_at(META, IAUX, i)
        for k in range(n):
            X[oi + k] = X[OFF[a] + IAUX[e + k]]
    elif C[i] == 32.0:
        for k in range(n):
            X[oi + k] = np.float64(np.float32(X[OFF[a] + k]))
    else:
        for k in range(n):
            X[oi + k] = X[OFF[a] + k]


@njit(**_JIT)
def concatenate(i, OFF, META, IAUX, X, reached):
    """X at concatenation entry i from X at its inputs; an input with ``reached[buf]``
    zero (no tangent reaches it: the tangent sweep's ``has``; an empty ``reached``: all
    do) contributes zeros.  (``reached`` is read as it is: a mask made per entry would
    cost an allocation per entry, and one of the tape's length in the tangent sweep.)"""
    e = extras_at(META, IAUX, i)
    outer, nin = cat_dims(IAUX, e)
    pos = OFF[i]
    for o in range(outer):
        for j in range(nin):
            buf, inner = cat_piece(IAUX, e, j)
            src = OFF[buf] + o * inner
            ok = reached.shape[0] == 0 or reached[buf] != 0
            for q in range(inner):
                X[pos + q] = X[src + q] if ok else 0.0
            pos += inner


@njit(**_JIT)
def where_reverse(i, OP, A, B, OFF, META, IAUX, V, G):
    a, b, oi = A[i], B[i], OFF[i]
    cond = OFF[IAUX[extras_at(META, IAUX, i)]]
    for k in range(size_of(META, IAUX, i)):
        if V[cond + k] != 0.0:
            if wants(a, OP):
                G[OFF[a] + k] += G[oi + k]
        elif wants(b, OP):
            G[OFF[b] + k] += G[oi + k]


@njit(**_JIT)
def gather_reverse(i, A, OFF, META, IAUX, G, omap):
    """(Not for one element: the sweep adds that one itself, ``is_element``.)"""
    m = META[i]
    nd, shp, e = ndim_at(IAUX, m), shape_at(m), extras_at(META, IAUX, i)
    base = OFF[A[i]] + IAUX[e]             # (extras: base, a stride per dim)
    oi = OFF[i]
    if nd <= 4:            # nested loops, no offset map (a broadcast bias: rows of a sum)
        s0, s1, s2, s3 = pad4(IAUX, shp, nd, 1)
        t0, t1, t2, t3 = pad4(IAUX, e + 1, nd, 0)
        k = oi
        for i0 in range(s0):
            for i1 in range(s1):
                for i2 in range(s2):
                    o = base + i0 * t0 + i1 * t1 + i2 * t2
                    if t3 == 0:     # a row summed into one element: in a register
                        acc = G[o]
                        for i3 in range(s3):
                            acc += G[k + i3]
                        G[o] = acc
                    elif t3 == 1:   # a row added into a row (slices: the loop vectorises)
                        dst, src = G[o:o + s3], G[k:k + s3]
                        for i3 in range(s3):
                            dst[i3] += src[i3]
                    else:
                        for i3 in range(s3):
                            G[o + i3 * t3] += G[k + i3]
                    k += s3
        return
    offsets(IAUX, shp, e + 1, nd, omap)
    for k in range(size_of(META, IAUX, i)):
        G[base + omap[k]] += G[oi + k]


@njit(**_JIT)
def index_reverse(i, A, OFF, META, IAUX, G):
    e = extras_at(META, IAUX, i)
    oa, oi = OFF[A[i]], OFF[i]
    for k in range(size_of(META, IAUX, i)):
        G[oa + IAUX[e + k]] += G[oi + k]


@njit(**_JIT)
def cat_reverse(i, OFF, META, IAUX, G):
    e = extras_at(META, IAUX, i)
    outer, nin = cat_dims(IAUX, e)
    pos = OFF[i]
    for o in range(outer):
        for j in range(nin):
            buf, inner = cat_piece(IAUX, e, j)
            dst = OFF[buf] + o * inner
            for t in range(inner):
                G[dst + t] += G[pos + t]
            pos += inner


@njit(**_JIT)
def where_forward(i, A, B, C, OFF, META, IAUX, V):
    """Elements of input a where the condition buffer (the extras) is non-zero, else of
    input b (either may be the constant C[i])."""
    a, b, oi = A[i], B[i], OFF[i]
    cond = OFF[IAUX[extras_at(META, IAUX, i)]]
    for k in range(size_of(META, IAUX, i)):
        if V[cond + k] != 0.0:
            V[oi + k] = V[OFF[a] + k] if a >= 0 else C[i]
        else:
            V[oi + k] = V[OFF[b] + k] if b >= 0 else C[i]


@njit(**_JIT)
def where_tangent(i, A, B, OFF, META, IAUX, V, T, has):
    a, b, oi = A[i], B[i], OFF[i]
    cond = OFF[IAUX[extras_at(META, IAUX, i)]]
    for k in range(size_of(META, IAUX, i)):
        T[oi + k] = tangent_of(a, has, OFF, T, k) if V[cond + k] != 0.0 else \
            tangent_of(b, has, OFF, T, k)
