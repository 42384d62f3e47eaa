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
def _sums(X, xo, Y, yo, yj, yl, L, n, O, oo, add):
    """``O[oo + j] = X[xo + l] . Y[yo + j * yj + l * yl]`` over l < L for each j < n
    (``add``: added to O instead), each summed from 0 in l order: the dot products of a
    product whose operand is strided, four at a time (independent chains, which the
    CPU overlaps; one running sum waits for each add)."""
    j = 0
    while j + 4 <= n:
        s0 = s1 = s2 = s3 = 0.0
        y = yo + j * yj
        for l in range(L):
            xv = X[xo + l]
            yk = y + l * yl
            s0 += xv * Y[yk]
            s1 += xv * Y[yk + yj]
            s2 += xv * Y[yk + 2 * yj]
            s3 += xv * Y[yk + 3 * yj]
        if add:
            s0 += O[oo + j]
            s1 += O[oo + j + 1]
            s2 += O[oo + j + 2]
            s3 += O[oo + j + 3]
        O[oo + j], O[oo + j + 1], O[oo + j + 2], O[oo + j + 3] = s0, s1, s2, s3
        j += 4
    for j in range(j, n):
        s0 = 0.0
        for l in range(L):
            s0 += X[xo + l] * Y[yo + j * yj + l * yl]
        O[oo + j] = O[oo + j] + s0 if add else s0


@njit(**_JIT)
def forward(i, A, B, OFF, META, IAUX, V):
    """A replay's product: each output summed from 0 in k order, as ``_product`` (for a
    contiguous y, k outside n, so that the loop over a row of outputs vectorises)."""
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    oa, ob, oi = OFF[A[i]], OFF[B[i]], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        for m in range(M):
            if ysn == 1 and N >= 8:
                o = V[go + m * N:go + m * N + N]
                o[:] = 0.0
                for k in range(K):
                    xv = V[xa + m * K + k]
                    yk = V[yb + k * N:yb + k * N + N]
                    for n in range(N):
                        o[n] += xv * yk[n]
            else:
                _sums(V, xa + m * K, V, yb, ysn, ysk, K, N, V, go + m * N, False)


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
def reverse(i, OP, A, B, OFF, META, IAUX, V, G, scratch):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T (each element
    summed from 0 in n order, then added), dy = x^T g (added term by term in m order),
    in loops that vectorise where y's layout allows (``scratch``: K values)."""
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if wants(a, OP):
            for m in range(M):
                if ysk == 1 and K >= 8:
                    acc = scratch[:K]
                    acc[:] = 0.0
                    for n in range(N):
                        gv = G[go + m * N + n]
                        yn = V[yb + n * ysn:yb + n * ysn + K]
                        for k in range(K):
                            acc[k] += gv * yn[k]
                    gx = G[xa + m * K:xa + m * K + K]
                    for k in range(K):
                        gx[k] += acc[k]
                else:
                    _sums(G, go + m * N, V, yb, ysk, ysn, N, K, G, xa + m * K, True)
        if wants(b, OP):
            for m in range(M):
                g = G[go + m * N:go + m * N + N]
                x = V[xa + m * K:xa + m * K + K]
                if ysn == 1:
                    for k in range(K):
                        xv = x[k]
                        gy = G[yb + k * ysk:yb + k * ysk + N]
                        for n in range(N):
                            gy[n] += xv * g[n]
                else:
                    for n in range(N):
                        gv = g[n]
                        gy = G[yb + n * ysn:yb + n * ysn + K]
                        for k in range(K):
                            gy[k] += x[k] * gv


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
