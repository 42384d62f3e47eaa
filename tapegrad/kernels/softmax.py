"""Softmax, log-softmax and logsumexp along a dim: forward, reverse and tangent rules of
the fused ``softmax`` kind, shared by the sweeps.

An entry's extras are (outer, n, inner): element j of row (p, q) sits at
``(p * n + j) * inner + q``.  softmax and log_softmax give one output element per input
element (the same layout); logsumexp gives one per row, at ``p * inner + q``.  The
forward subtracts the row's max (stable, as PyTorch; logsumexp subtracts 0 where the max
is not finite, as PyTorch, so a row of -inf gives -inf).
"""
import math

from numba import njit

from .generated import OP_LOGSUMEXP, OP_SOFTMAX
from .layout import extras_at

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def _rows(META, IAUX, i):
    e = extras_at(META, IAUX, i)
    return IAUX[e], IAUX[e + 1], IAUX[e + 2]


@njit(inline="always", **_JIT)
def _top(V, src, base, n, inner):
    """The max of a row (nan if it holds one)."""
    top = -math.inf
    for j in range(n):
        x = V[src + base + j * inner]
        if x > top or x != x:
            top = x
    return top


@njit(**_JIT)
def forward(i, op, src, dst, META, IAUX, V):
    """V[dst + ...] = softmax, log_softmax or logsumexp of V[src + ...]."""
    outer, n, inner = _rows(META, IAUX, i)
    for p in range(outer):
        for q in range(inner):
            base = p * n * inner + q
            top = _top(V, src, base, n, inner)
            s = 0.0
            if op == OP_SOFTMAX:      # each exp once: kept in the output, then divided
                for j in range(n):
                    e = math.exp(V[src + base + j * inner] - top)
                    V[dst + base + j * inner] = e
                    s += e
                for j in range(n):
                    V[dst + base + j * inner] /= s
            elif op == OP_LOGSUMEXP:
                if abs(top) == math.inf:     # (nan stays: it propagates anyway)
                    top = 0.0
                for j in range(n):
                    s += math.exp(V[src + base + j * inner] - top)
                V[dst + p * inner + q] = math.log(s) + top
            else:
                for j in range(n):
                    s += math.exp(V[src + base + j * inner] - top)
                lse = math.log(s)
                for j in range(n):
                    V[dst + base + j * inner] = V[src + base + j * inner] - top - lse


@njit(**_JIT)
def reverse(i, op, oa, oi, META, IAUX, V, G):
    """Add the input's adjoint: softmax r (g - <g, r>); log_softmax g - exp(r) sum(g);
    logsumexp g exp(x - r)."""
    outer, n, inner = _rows(META, IAUX, i)
    for p in range(outer):
        for q in range(inner):
            base = p * n * inner + q
            if op == OP_LOGSUMEXP:
                g, r = G[oi + p * inner + q], V[oi + p * inner + q]
                for j in range(n):
                    k = base + j * inner
                    G[oa + k] += g * math.exp(V[oa + k] - r)
                continue
            acc = 0.0
            for j in range(n):
                k = base + j * inner
                acc += G[oi + k] * V[oi + k] if op == OP_SOFTMAX else G[oi + k]
            for j in range(n):
                k = base + j * inner
                if op == OP_SOFTMAX:
                    G[oa + k] += V[oi + k] * (G[oi + k] - acc)
                else:
                    G[oa + k] += G[oi + k] - math.exp(V[oi + k]) * acc


@njit(**_JIT)
def tangent(i, op, oa, oi, META, IAUX, V, T):
    """The output's tangent: softmax r (t - <t, r>); log_softmax t - <t, exp(r)>;
    logsumexp <t, exp(x - r)>."""
    outer, n, inner = _rows(META, IAUX, i)
    for p in range(outer):
        for q in range(inner):
            base = p * n * inner + q
            acc = 0.0
            r = V[oi + p * inner + q] if op == OP_LOGSUMEXP else 0.0
            for j in range(n):
                k = base + j * inner
                w = V[oi + k] if op == OP_SOFTMAX else \
                    math.exp(V[oa + k] - r) if op == OP_LOGSUMEXP else math.exp(V[oi + k])
                acc += T[oa + k] * w
            if op == OP_LOGSUMEXP:
                T[oi + p * inner + q] = acc
                continue
            for j in range(n):
                k = base + j * inner
                if op == OP_SOFTMAX:
                    T[oi + k] = V[oi + k] * (T[oa + k] - acc)
                else:
                    T[oi + k] = T[oa + k] - acc
