"""Batched matrix products ``out[b] = x[b] @ y[b]`` with x (nb, M, K), y (nb, K, N) (the
entry's extras): forward, reverse and tangent side by side (products past the engine's
``HOST_MIN_MACS`` run in BLAS instead).  The extras' mode bit ``Y_TRANSPOSED`` says y's
values are stored as (nb, N, K), y[b] read transposed (a linear layer's weight, read
in place): element (k, n) of y[b] is at ``k * ysk + n * ysn``."""
from numba import njit

from ..tape.columns import Y_TRANSPOSED
from .layout import extras_at, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def dims(i, META, IAUX):
    """(nb, M, K, N, ysk, ysn) of product entry i: its dims and y's strides along k, n."""
    e = extras_at(META, IAUX, i)
    K, N = IAUX[e + 2], IAUX[e + 3]
    if IAUX[e + 4] & Y_TRANSPOSED:
        return IAUX[e], IAUX[e + 1], K, N, 1, K
    return IAUX[e], IAUX[e + 1], K, N, N, 1


@njit(**_JIT)
def _product(x, y, o):
    """o = x @ y for one (M, K) x, (K, N) y and (M, N) o: each output summed from 0 in k
    order, as ``forward`` sums it (here k runs outside n, so that the loop vectorises
    over n: the sum per output is the same)."""
    M, K = x.shape
    N = y.shape[1]
    for m in range(M):
        for n in range(N):
            o[m, n] = 0.0
        for k in range(K):
            xv = x[m, k]
            for n in range(N):
                o[m, n] += xv * y[k, n]


@njit(**_JIT)
def forward(i, A, B, OFF, META, IAUX, V):
    """A replay's product: each output summed from 0 in k order, as ``_product``."""
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    oa, ob, oi = OFF[A[i]], OFF[B[i]], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            for n in range(N):
                acc = 0.0
                for k in range(K):
                    acc += V[xa + m * K + k] * V[yb + k * ysk + n * ysn]
                V[go + m * N + n] = acc


@njit(**_JIT)
def product(x, y, out):
    """out = x @ y for C-contiguous float64 (nb, M, K), (nb, K, N) and (nb, M, N): the
    eager value of a product that the compiled sweep replays (the same sums; BLAS sums
    in another order)."""
    for bt in range(x.shape[0]):
        _product(x[bt], y[bt], out[bt])


@njit(**_JIT)
def add_outer(out, u, v):
    """out += outer(u, v), in place (the adjoint of a product whose summed dim is 1)."""
    for m in range(u.shape[0]):
        um = u[m]
        for k in range(v.shape[0]):
            out[m, k] += um * v[k]


@njit(**_JIT)
def reverse(i, OP, A, B, OFF, META, IAUX, V, G):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T, dy = x^T g."""
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if wants(a, OP):
            for m in range(M):
                for k in range(K):
                    acc = 0.0
                    for n in range(N):
                        acc += G[go + m * N + n] * V[yb + k * ysk + n * ysn]
                    G[xa + m * K + k] += acc
        if wants(b, OP):
            for m in range(M):
                for k in range(K):
                    xv = V[xa + m * K + k]
                    for n in range(N):
                        G[yb + k * ysk + n * ysn] += xv * G[go + m * N + n]


@njit(**_JIT)
def tangent(i, A, B, OFF, META, IAUX, V, T, has):
    """d(x @ y) = dx @ y + x @ dy, batch by batch."""
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    ha, hb = has[a] != 0, has[b] != 0
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            for n in range(N):
                acc = 0.0
                for k in range(K):
                    y = yb + k * ysk + n * ysn
                    if ha:
                        acc += T[xa + m * K + k] * V[y]
                    if hb:
                        acc += V[xa + m * K + k] * T[y]
                T[go + m * N + n] = acc
