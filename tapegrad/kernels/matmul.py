"""Batched matrix products ``out[b] = x[b] @ y[b]`` with x (nb, M, K), y (nb, K, N) (the
entry's extras): forward, reverse and tangent side by side (products past the engine's
``HOST_MIN_MACS`` run in BLAS instead)."""
from numba import njit

from .layout import extras_at, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def dims(i, META, IAUX):
    """(nb, M, K, N) of product entry i."""
    e = extras_at(META, IAUX, i)
    return IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3]


@njit(**_JIT)
def forward(i, A, B, OFF, META, IAUX, V):
    nb, M, K, N = dims(i, META, IAUX)
    oa, ob, oi = OFF[A[i]], OFF[B[i]], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            for n in range(N):
                acc = 0.0
                for k in range(K):
                    acc += V[xa + m * K + k] * V[yb + k * N + n]
                V[go + m * N + n] = acc


@njit(**_JIT)
def reverse(i, OP, A, B, OFF, META, IAUX, V, G):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T, dy = x^T g."""
    nb, M, K, N = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if wants(a, OP):
            for m in range(M):
                for k in range(K):
                    acc = 0.0
                    for n in range(N):
                        acc += G[go + m * N + n] * V[yb + k * N + n]
                    G[xa + m * K + k] += acc
        if wants(b, OP):
            for m in range(M):
                for k in range(K):
                    xv = V[xa + m * K + k]
                    for n in range(N):
                        G[yb + k * N + n] += xv * G[go + m * N + n]


@njit(**_JIT)
def tangent(i, A, B, OFF, META, IAUX, V, T, has):
    """d(x @ y) = dx @ y + x @ dy, batch by batch."""
    nb, M, K, N = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    ha, hb = has[a] != 0, has[b] != 0
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            for n in range(N):
                acc = 0.0
                for k in range(K):
                    if ha:
                        acc += T[xa + m * K + k] * V[yb + k * N + n]
                    if hb:
                        acc += V[xa + m * K + k] * T[yb + k * N + n]
                T[go + m * N + n] = acc
