"""Arithmetic (+ - * /) on operands read in place, broadcast to the output's shape:
forward, reverse and tangent of the ``broadcast`` kind.

An entry's extras are its loops and each operand's strides along them, ``(s0, s1, s2,
s3, a0, a1, a2, a3, b0, b1, b2, b3)``: the output's shape with adjacent dims merged
where both operands allow, padded to four, and the operands' element strides over it
(0 along a broadcast dim).  Output element ``k`` of loop index (i0, i1, i2, i3) reads
``x[i0 a0 + i1 a1 + i2 a2 + i3 a3]`` and ``y`` alike.  The reverse adds each output
element's contributions in output order, as the op's elementwise rules (the table's
``gx``/``gy``) give them; an operand broadcast along the innermost loop (a bias, a
row of a sum) sums them in a register.  Where a broadcast was recorded as an
``expand`` entry, the broadcast operand was materialised (a copy per row), its
adjoint swept and scattered back.
"""
from numba import njit

from .generated import OP_BROADCAST_ADD, OP_BROADCAST_MUL, OP_BROADCAST_SUB
from .layout import extras_at, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def loops(i, META, IAUX):
    """(s0..s3, a0..a3, b0..b3) of broadcast entry i."""
    e = extras_at(META, IAUX, i)
    return (IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3], IAUX[e + 4], IAUX[e + 5],
            IAUX[e + 6], IAUX[e + 7], IAUX[e + 8], IAUX[e + 9], IAUX[e + 10], IAUX[e + 11])


@njit(**_JIT)
def _fwd(op, x, y):
    """The elementwise op's rule, written out (calling the table's generated
    ``ew_fwd`` from each kernel here would compile its every op into each: seconds of
    cold compile).  tests/test_broadcast_kind.py holds these to the table's rules."""
    if op == OP_BROADCAST_ADD:
        return x + y
    if op == OP_BROADCAST_SUB:
        return x - y
    if op == OP_BROADCAST_MUL:
        return x * y
    return x / y


@njit(**_JIT)
def _grads(op, x, y, g):
    """(gx, gy): the elementwise op's reverse rule, written out as ``_fwd``."""
    if op == OP_BROADCAST_ADD:
        return g, g
    if op == OP_BROADCAST_SUB:
        return g, -g
    if op == OP_BROADCAST_MUL:
        return g * y, g * x
    return g / y, -g * (x / y) / y


@njit(inline="always", **_JIT)
def _rows(out, x, y, op):
    """out = x op y over three slices of one length, each op in a loop of its own that
    vectorises (``_fwd``'s rules)."""
    n = out.shape[0]
    if op == OP_BROADCAST_ADD:
        for j in range(n):
            out[j] = x[j] + y[j]
    elif op == OP_BROADCAST_SUB:
        for j in range(n):
            out[j] = x[j] - y[j]
    elif op == OP_BROADCAST_MUL:
        for j in range(n):
            out[j] = x[j] * y[j]
    else:
        for j in range(n):
            out[j] = x[j] / y[j]


@njit(**_JIT)
def forward(i, tape, omap):
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    op = OP[i]
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = loops(i, META, IAUX)
    oa, ob, k = OFF[A[i]], OFF[B[i]], OFF[i]
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                pa = oa + i0 * a0 + i1 * a1 + i2 * a2
                pb = ob + i0 * b0 + i1 * b1 + i2 * b2
                if a3 == 1 and b3 == 1:
                    _rows(V[k:k + s3], V[pa:pa + s3], V[pb:pb + s3], op)
                else:
                    for i3 in range(s3):
                        V[k + i3] = _fwd(op, V[pa + i3 * a3], V[pb + i3 * b3])
                k += s3


@njit(inline="always", **_JIT)
def _add_rows(d, x, y, g, op, side):
    """d += operand ``side``'s (0: x, 1: y) adjoint contributions of a row of outputs,
    over slices of one length (``_grads`` written out, each op in a loop that
    vectorises)."""
    n = d.shape[0]
    if op == OP_BROADCAST_ADD or (op == OP_BROADCAST_SUB and side == 0):
        for j in range(n):
            d[j] += g[j]
    elif op == OP_BROADCAST_SUB:
        for j in range(n):
            d[j] += -g[j]
    elif op == OP_BROADCAST_MUL:
        other = y if side == 0 else x
        for j in range(n):
            d[j] += g[j] * other[j]
    elif side == 0:
        for j in range(n):
            d[j] += g[j] / y[j]
    else:
        for j in range(n):
            d[j] += -g[j] * (x[j] / y[j]) / y[j]


@njit(**_JIT)
def _add_strided(G, V, op, side, pa, a3, pb, b3, go, n):
    """``_add_rows`` for any strides, each op in a loop of its own (``_grads`` written
    out); an operand broadcast along the row (stride 0) sums its contributions in a
    register, in order."""
    dst, ds = (pa, a3) if side == 0 else (pb, b3)
    acc = G[dst]
    if op == OP_BROADCAST_ADD or (op == OP_BROADCAST_SUB and side == 0):
        if ds == 0:
            for j in range(n):
                acc += G[go + j]
        else:
            for j in range(n):
                G[dst + j * ds] += G[go + j]
    elif op == OP_BROADCAST_SUB:
        if ds == 0:
            for j in range(n):
                acc += -G[go + j]
        else:
            for j in range(n):
                G[dst + j * ds] += -G[go + j]
    elif op == OP_BROADCAST_MUL:
        po, os = (pb, b3) if side == 0 else (pa, a3)
        if ds == 0:
            for j in range(n):
                acc += G[go + j] * V[po + j * os]
        else:
            for j in range(n):
                G[dst + j * ds] += G[go + j] * V[po + j * os]
    else:
        for j in range(n):
            c = _grads(op, V[pa + j * a3], V[pb + j * b3], G[go + j])[side]
            if ds == 0:
                acc += c
            else:
                G[dst + j * ds] += c
    if ds == 0:
        G[dst] = acc


@njit(**_JIT)
def reverse(i, tape, G, scratch, omap):
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    op = OP[i]
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = loops(i, META, IAUX)
    if s3 == 0:                                # (no element: read no adjoint either)
        return
    a, b = A[i], B[i]
    oa, ob, k = OFF[a], OFF[b], OFF[i]
    wa, wb = wants(a, OP), wants(b, OP)
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                pa = oa + i0 * a0 + i1 * a1 + i2 * a2
                pb = ob + i0 * b0 + i1 * b1 + i2 * b2
                for side in range(2):          # (two buffers: the order within each holds)
                    if not (wa if side == 0 else wb):
                        continue
                    if a3 == 1 and b3 == 1:
                        d = G[pa:pa + s3] if side == 0 else G[pb:pb + s3]
                        _add_rows(d, V[pa:pa + s3], V[pb:pb + s3], G[k:k + s3], op, side)
                    else:
                        _add_strided(G, V, op, side, pa, a3, pb, b3, k, s3)
                k += s3


@njit(**_JIT)
def tangent(i, op, A, B, OFF, META, IAUX, V, T, has):
    """The reverse rules applied to the input tangents (the elementwise kinds' way)."""
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = loops(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, k = OFF[a], OFF[b], OFF[i]
    ha, hb = has[a] != 0, has[b] != 0
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                pa = oa + i0 * a0 + i1 * a1 + i2 * a2
                pb = ob + i0 * b0 + i1 * b1 + i2 * b2
                for i3 in range(s3):
                    qa, qb = pa + i3 * a3, pb + i3 * b3
                    x, y = V[qa], V[qb]
                    d = 0.0
                    if ha:
                        d = _grads(op, x, y, T[qa])[0]
                    if hb:
                        db = _grads(op, x, y, T[qb])[1]
                        d = d + db if ha else db
                    T[k + i3] = d
                k += s3
