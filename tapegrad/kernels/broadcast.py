"""Arithmetic (+ - * /) on operands read in place, broadcast to the output's shape:
forward, reverse and tangent of the ``broadcast`` kind.

An entry's extras are its loops and each operand's strides along them, ``(s0, s1, s2,
s3, a0, a1, a2, a3, b0, b1, b2, b3)``: the output's shape with adjacent dims merged
where both operands allow, padded to four, and the operands' element strides over it
(0 along a broadcast dim).  Output element ``k`` of loop index (i0, i1, i2, i3) reads
``x[i0 a0 + i1 a1 + i2 a2 + i3 a3]`` and ``y`` alike.  The reverse (``_side``) adds the
op's elementwise rules' contributions (the table's ``gx``/``gy``) into each adjoint in
output order; an operand broadcast along the inner loop (a bias, a row of a sum) sums
them in a register.  Where a broadcast was recorded as an ``expand`` entry, the
broadcast operand was materialised (a copy per row), its adjoint swept and scattered
back.
"""
from numba import njit, uint64

from .generated import OP_BROADCAST_ADD, OP_BROADCAST_DIV, OP_BROADCAST_MUL, OP_BROADCAST_SUB
from .layout import broadcast_loops, extras_at, wants

_JIT = dict(cache=True, error_model="numpy")


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
    return g / y, -g * ((x / y) / y)


@njit(inline="always", **_JIT)
def _rows(OUT, k, X, pa, Y, pb, n, op):
    """``OUT[k:k + n]`` = x op y, x and y rows of ``X`` at ``pa`` and ``Y`` at ``pb``, each
    op in a loop of its own that vectorises (``_fwd``'s rules).  Indices unsigned: Numba
    checks a signed index for a negative value, which kept these loops from vectorising
    (and slices instead cost twice as much per row of 10)."""
    if op == OP_BROADCAST_ADD:
        for j in range(n):
            OUT[k + j] = X[pa + j] + Y[pb + j]
    elif op == OP_BROADCAST_SUB:
        for j in range(n):
            OUT[k + j] = X[pa + j] - Y[pb + j]
    elif op == OP_BROADCAST_MUL:
        for j in range(n):
            OUT[k + j] = X[pa + j] * Y[pb + j]
    else:
        for j in range(n):
            OUT[k + j] = X[pa + j] / Y[pb + j]


@njit(**_JIT)
def _rows_by(OUT, k, X, p, y, n, op, swap):
    """``OUT[k:k + n]`` = x op y (y op x where ``swap``) for the row x of ``X`` at ``p``
    and a number y: a row beside a column (``_rows``' loops; a call of its own: inlined
    beside ``_rows``, it kept the loops of both from vectorising, 10x slower)."""
    if op == OP_BROADCAST_ADD:
        for j in range(n):
            OUT[k + j] = X[p + j] + y
    elif op == OP_BROADCAST_MUL:
        for j in range(n):
            OUT[k + j] = X[p + j] * y
    elif op == OP_BROADCAST_SUB:
        if swap:
            for j in range(n):
                OUT[k + j] = y - X[p + j]
        else:
            for j in range(n):
                OUT[k + j] = X[p + j] - y
    elif swap:
        for j in range(n):
            OUT[k + j] = y / X[p + j]
    else:
        for j in range(n):
            OUT[k + j] = X[p + j] / y


@njit(**_JIT)
def apply(op, X, oa, Y, ob, OUT, k, lp):
    """``OUT[k:]`` = x op y over loops ``lp`` (an entry's extras), x read from ``X`` at
    ``oa`` and y from ``Y`` at ``ob``: the forward of a replay (all three the arena) and
    of an eager broadcast entry (its operands and result), one loop for both.  Rows run as
    vectorised loops (NumPy's broadcast loop, called once per row of 8, took 4x as
    long)."""
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = lp
    n = uint64(s3)
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                pa = oa + i0 * a0 + i1 * a1 + i2 * a2
                pb = ob + i0 * b0 + i1 * b1 + i2 * b2
                if a3 == 1 and b3 == 1:
                    _rows(OUT, uint64(k), X, uint64(pa), Y, uint64(pb), n, op)
                elif a3 == 1 and b3 == 0:
                    _rows_by(OUT, uint64(k), X, uint64(pa), Y[pb], n, op, False)
                elif a3 == 0 and b3 == 1:
                    _rows_by(OUT, uint64(k), Y, uint64(pb), X[pa], n, op, True)
                else:
                    for i3 in range(s3):
                        OUT[k + i3] = _fwd(op, X[pa + i3 * a3], Y[pb + i3 * b3])
                k += s3


@njit(**_JIT)
def forward(i, tape, omap):
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    apply(OP[i], V, OFF[A[i]], V, OFF[B[i]], V, OFF[i],
          broadcast_loops(IAUX, extras_at(META, IAUX, i)))


@njit(**_JIT)
def _add_row(G, q, g, n, plus):
    """``G[q:q + n] += G[g:g + n]`` (or ``-G[g:g + n]``): one operand's row of + or -,
    indices unsigned so that the loop vectorises (``_rows``)."""
    if plus:
        for v in range(n):
            G[q + v] += G[g + v]
    else:
        for v in range(n):
            G[q + v] += -G[g + v]


@njit(**_JIT)
def _add_products(G, q, g, V, r, n):
    """``G[q:q + n] += G[g:g + n] * V[r:r + n]``: a row of *, as ``_add_row``."""
    for v in range(n):
        G[q + v] += G[g + v] * V[r + v]


# The reverse adds one operand's adjoints at a time, each op in a loop nest of its own
# whose innermost loop does one thing (every op's loops selected by ``op`` inside one
# nest ran 5x slower: LLVM kept the register sum of a short row in memory), in one
# function (one per op took twice as long to compile).  Along an inner loop where the
# added operand's stride is 0 (a bias, a row of a sum) its contributions are summed in
# a register, in order.
@njit(**_JIT)
def _side(G, V, op, side, lp, oa, ob, k):
    """Operand ``side``'s (0: x, 1: y) adjoint contributions.  The inner loop is the
    last dim, or, for short rows (an (n, 3) operand beside an (n, 1) one), the one
    before: swept down the columns.  An adjoint gets the same additions in the same
    order either way, so an adjoint broadcast along both dims stays row by row."""
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = lp
    pd, d0, d1, d2, d3, po, o0, o1, o2, o3 = oa, a0, a1, a2, a3, ob, b0, b1, b2, b3
    if side == 1:
        pd, d0, d1, d2, d3, po, o0, o1, o2, o3 = ob, b0, b1, b2, b3, oa, a0, a1, a2, a3
    n_out, n_in, k_out, k_in, d_out, d_in, o_out, o_in = s2, s3, s3, 1, d2, d3, o2, o3
    if s3 < 8 and s2 > s3 and (d2 != 0 or d3 != 0):
        n_out, n_in, k_out, k_in, d_out, d_in, o_out, o_in = s3, s2, 1, s3, d3, d2, o3, o2
    sign = -1.0 if op == OP_BROADCAST_SUB and side == 1 else 1.0
    for i0 in range(s0):
        for i1 in range(s1):
            for u in range(n_out):
                q = pd + i0 * d0 + i1 * d1 + u * d_out
                r = po + i0 * o0 + i1 * o1 + u * o_out
                g = k + u * k_out
                if op == OP_BROADCAST_MUL:
                    if d_in == 0:
                        acc = G[q]
                        for v in range(n_in):
                            acc += G[g + v * k_in] * V[r + v * o_in]
                        G[q] = acc
                    elif d_in == 1 and o_in == 1 and k_in == 1:
                        _add_products(G, uint64(q), uint64(g), V, uint64(r), uint64(n_in))
                    else:
                        for v in range(n_in):
                            G[q + v * d_in] += G[g + v * k_in] * V[r + v * o_in]
                elif op != OP_BROADCAST_DIV:           # + and -: d += g, d += -g
                    if d_in == 0:
                        acc = G[q]
                        if sign > 0:
                            for v in range(n_in):
                                acc += G[g + v * k_in]
                        else:
                            for v in range(n_in):
                                acc += -G[g + v * k_in]
                        G[q] = acc
                    elif d_in == 1 and k_in == 1:
                        _add_row(G, uint64(q), uint64(g), uint64(n_in), sign > 0)
                    elif sign > 0:
                        for v in range(n_in):
                            G[q + v * d_in] += G[g + v * k_in]
                    else:
                        for v in range(n_in):
                            G[q + v * d_in] += -G[g + v * k_in]
                else:                                  # /: _grads' rule, element by element
                    acc = G[q]
                    for v in range(n_in):
                        x, y = V[q + v * d_in], V[r + v * o_in]
                        if side == 1:
                            x, y = y, x
                        c = _grads(OP_BROADCAST_DIV, x, y, G[g + v * k_in])[side]
                        if d_in == 0:
                            acc += c
                        else:
                            G[q + v * d_in] += c
                    if d_in == 0:
                        G[q] = acc
            k += n_out * n_in


@njit(**_JIT)
def reverse(i, tape, G, scratch, omap):
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    lp = broadcast_loops(IAUX, extras_at(META, IAUX, i))
    if lp[3] == 0:                             # (no element: read no adjoint either)
        return
    a, b = A[i], B[i]
    for side in range(2):      # one operand's adjoints, then the other's (two buffers:
        if wants(a if side == 0 else b, OP):         # the order of additions into each holds)
            _side(G, V, OP[i], side, lp, OFF[a], OFF[b], OFF[i])


@njit(**_JIT)
def tangent(i, op, A, B, OFF, META, IAUX, V, T, has):
    """The reverse rules applied to the input tangents (the elementwise kinds' way)."""
    lp = broadcast_loops(IAUX, extras_at(META, IAUX, i))
    s0, s1, s2, s3, a0, a1, a2, a3, b0, b1, b2, b3 = lp
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
