"""Softmax, log-softmax and logsumexp along a dim: forward, reverse and tangent rules of
the fused ``softmax`` kind, shared by the sweeps.

An entry's extras are (outer, n, inner): element j of row (p, q) sits at
``(p * n + j) * inner + q``.  softmax and log_softmax give one output element per input
element (the same layout); logsumexp gives one per row, at ``p * inner + q``.  The
forward subtracts the row's max (stable, as PyTorch; logsumexp subtracts 0 where the max
is not finite, as PyTorch, so a row of -inf gives -inf).
"""
import math

import numpy as np
from numba import njit

from .generated import OP_LOGSUMEXP, OP_SOFTMAX
from .layout import extras_at, softmax_rows
from .reduce import full_sum
from .vmath import LANES, lanes_exp

_JIT = dict(cache=True, error_model="numpy")
SCALAR_MAX = 16     # rows up to this long take libm's exp, element by element: a short
                    # vector's eager softmax runs in Python (``softmax_ops``), in this order


@njit(inline="always", **_JIT)
def _top(x, n, inner):
    """The max of a row ``x[j * inner]`` (nan if it holds one)."""
    top = -math.inf
    for j in range(n):
        v = x[j * inner]
        if v > top or v != v:
            top = v
    return top


@njit(inline="always", **_JIT)
def _exps(x, inner, y, ys, n, top):
    """``y[j * ys] = exp(x[j * inner] - top)`` for j < n; returns their sum.  A
    contiguous row longer than ``SCALAR_MAX``: libmvec's exp ``LANES`` at a time, the tail
    by libm's (as the block rules of elementwise ops), summed as a full sum is
    (``reduce.full_sum``); else libm's exp, summed in j order."""
    if inner == 1 and ys == 1 and n > SCALAR_MAX:
        for j in range(n):
            y[j] = x[j] - top
        k = 0
        while k + LANES <= n:
            lanes_exp(y, k, y, k)
            k += LANES
        for j in range(k, n):
            y[j] = math.exp(y[j])
        return full_sum(y, 0, n)
    s = 0.0
    for j in range(n):
        e = math.exp(x[j * inner] - top)
        y[j * ys] = e
        s += e
    return s


@njit(inline="always", **_JIT)
def _row(op, x, y, T, n, inner):
    """One row ``x[j * inner]`` (j < n): its softmax or log_softmax into ``y[j * inner]``,
    or its logsumexp returned (``T``: n values of scratch)."""
    top = _top(x, n, inner)
    if op == OP_LOGSUMEXP:
        if abs(top) == math.inf:     # (nan stays: it propagates anyway)
            top = 0.0
        return math.log(_exps(x, inner, T, 1, n, top)) + top
    s = _exps(x, inner, y, inner, n, top)
    if op == OP_SOFTMAX:             # each exp once: kept in the output, then divided
        for j in range(n):
            y[j * inner] /= s
    else:
        lse = math.log(s)
        for j in range(n):
            y[j * inner] = x[j * inner] - top - lse
    return 0.0


@njit(**_JIT)
def rows_forward(op, X, xo, Y, yo, outer, n, inner):
    """Y[yo + ...] = softmax, log_softmax or logsumexp (``op``) of X[xo + ...], rows
    (outer, n, inner) as in the module's notes: the one definition of these values.
    Eager ops call it (``softmax_ops``), a replay through ``forward``, and the compiled
    tape computes in its order (``replay/llvm_tape``): every path gives the same bits."""
    T = np.empty(n if op == OP_LOGSUMEXP else 0)
    for p in range(outer):
        for q in range(inner):
            base = p * n * inner + q
            if inner == 1:      # (a contiguous row: slices, whose indices vectorise)
                v = _row(op, X[xo + base:xo + base + n], Y[yo + base:yo + base + n], T, n, 1)
            else:
                v = _row(op, X[xo + base:], Y[yo + base:], T, n, inner)
            if op == OP_LOGSUMEXP:
                Y[yo + p * inner + q] = v


@njit(**_JIT)
def forward(i, op, src, dst, META, IAUX, V):
    """V[dst + ...] = softmax, log_softmax or logsumexp of V[src + ...] (``rows_forward``,
    with the argument types of an eager call: one compiled signature)."""
    outer, n, inner = softmax_rows(IAUX, extras_at(META, IAUX, i))
    rows_forward(np.int64(op), V, src, V, dst, outer, n, inner)


@njit(**_JIT)
def reverse(i, op, oa, oi, META, IAUX, V, G):
    """Add the input's adjoint: softmax r (g - <g, r>); log_softmax g - exp(r) sum(g);
    logsumexp g exp(x - r)."""
    outer, n, inner = softmax_rows(IAUX, extras_at(META, IAUX, i))
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
    outer, n, inner = softmax_rows(IAUX, extras_at(META, IAUX, i))
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
