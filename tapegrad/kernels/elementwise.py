"""Elementwise entries (the op table's rules, generated): reverse and tangent over an
entry's elements (the forward is one call of ``ew_fwd`` per element, inline in the
replay sweep).  An elementwise op's Jacobian is diagonal, so its tangent is its reverse
rule applied to the input tangents."""
from numba import njit

from .generated import ew_grad
from .layout import size_of, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def reverse(i, op, OP, A, B, C, C2, OFF, META, IAUX, V, G):
    a, b = A[i], B[i]
    c, c2, oi = C[i], C2[i], OFF[i]
    ga = wants(a, OP)
    gb = wants(b, OP)
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
def tangent_of(j, has, OFF, T, k):
    """Tangent of element k of buffer j (0 where none reaches it)."""
    return T[OFF[j] + k] if j >= 0 and has[j] else 0.0


@njit(**_JIT)
def tangent(i, op, A, B, C, C2, OFF, META, IAUX, V, T, has):
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
