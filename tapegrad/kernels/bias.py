"""A row added along the leading dims, ``x + b`` where b's values repeat over x's
leading dims (a bias: b's shape is x's trailing dims): forward, reverse and tangent of
the ``bias`` kind.

Output element k is ``full[k] + row[k % nb]``; either operand may be the row (the one
of fewer values), so the entry keeps PyTorch's operand order.  The reverse adds the
output's adjoint to the full operand's and sums each column into the row's, row by row
in order: where a broadcast was recorded as an ``expand`` entry, a copy of the row per
row of the output was materialised, and its adjoint scattered back.
"""
from numba import njit

from .layout import size_of, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def operands(i, A, B, META, IAUX):
    """(full, row, n, nb): the operand of the output's size, the row, and their sizes."""
    a, b = A[i], B[i]
    n = size_of(META, IAUX, i)
    if size_of(META, IAUX, a) == n:
        return a, b, n, size_of(META, IAUX, b)
    return b, a, n, size_of(META, IAUX, a)


@njit(**_JIT)
def forward(i, A, B, OFF, META, IAUX, V):
    full, row, n, nb = operands(i, A, B, META, IAUX)
    if nb == 0:
        return
    of, orow, oi = OFF[full], OFF[row], OFF[i]
    r = V[orow:orow + nb]
    for p in range(n // nb):
        x = V[of + p * nb:of + p * nb + nb]
        out = V[oi + p * nb:oi + p * nb + nb]
        for c in range(nb):
            out[c] = x[c] + r[c]


@njit(**_JIT)
def reverse(i, OP, A, B, OFF, META, IAUX, G):
    full, row, n, nb = operands(i, A, B, META, IAUX)
    if nb == 0:
        return
    of, orow, oi = OFF[full], OFF[row], OFF[i]
    to_full, to_row = wants(full, OP), wants(row, OP)
    gr = G[orow:orow + nb]
    for p in range(n // nb):
        g = G[oi + p * nb:oi + p * nb + nb]
        if to_full:
            gf = G[of + p * nb:of + p * nb + nb]
            for c in range(nb):
                gf[c] += g[c]
        if to_row:
            for c in range(nb):
                gr[c] += g[c]


@njit(**_JIT)
def tangent(i, A, B, OFF, META, IAUX, T, has):
    full, row, n, nb = operands(i, A, B, META, IAUX)
    if nb == 0:
        return
    of, orow, oi = OFF[full], OFF[row], OFF[i]
    hf, hr = has[full] != 0, has[row] != 0
    for p in range(n // nb):
        for c in range(nb):
            k = p * nb + c
            if hf and hr:
                T[oi + k] = T[of + k] + T[orow + c]
            elif hf:
                T[oi + k] = T[of + k]
            else:
                T[oi + k] = T[orow + c]
