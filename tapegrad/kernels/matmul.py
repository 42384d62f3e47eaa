"""Batched matrix products ``out[b] = x[b] @ y[b]`` with x (nb, M, K), y (nb, K, N) (the
entry's extras): forward, reverse and tangent side by side (products past the engine's
``HOST_MIN_MACS`` run in BLAS instead).  The extras' mode bit ``Y_TRANSPOSED`` says y's
values are stored as (nb, N, K), y[b] read transposed (a linear layer's weight, read
in place): element (k, n) of y[b] is at ``k * ysk + n * ysn``."""
from numba import njit

from .layout import Y_TRANSPOSED, extras_at, product_dims, wants

_JIT = dict(cache=True, error_model="numpy")


@njit(**_JIT)
def dims(i, META, IAUX):
    """(nb, M, K, N, ysk, ysn) of product entry i: its dims and y's strides along k, n."""
    nb, M, K, N, mode = product_dims(IAUX, extras_at(META, IAUX, i))
    if mode & Y_TRANSPOSED:
        return nb, M, K, N, 1, K
    return nb, M, K, N, N, 1


@njit(inline="always", **_JIT)
def _sums(X, xo, xj, Y, yo, yj, yl, L, count, O, oo, oj, add):
    """For each j < count: ``s_j = X[xo + j * xj + l] * Y[yo + j * yj + l * yl]`` summed
    over l < L from 0 in l order, then ``O[oo + j * oj] = s_j`` (``add``: O plus s_j).
    Four at a time: independent chains, which the CPU overlaps (one running sum waits
    for each add); the dot products of a product whose rows cannot be vectorised."""
    j = 0
    while j + 4 <= count:
        s0 = s1 = s2 = s3 = 0.0
        x, y = xo + j * xj, yo + j * yj
        for l in range(L):
            yk = y + l * yl
            s0 += X[x + l] * Y[yk]
            s1 += X[x + xj + l] * Y[yk + yj]
            s2 += X[x + 2 * xj + l] * Y[yk + 2 * yj]
            s3 += X[x + 3 * xj + l] * Y[yk + 3 * yj]
        o = oo + j * oj
        if add:
            s0 += O[o]
            s1 += O[o + oj]
            s2 += O[o + 2 * oj]
            s3 += O[o + 3 * oj]
        O[o], O[o + oj], O[o + 2 * oj], O[o + 3 * oj] = s0, s1, s2, s3
        j += 4
    for j in range(j, count):
        s0 = 0.0
        for l in range(L):
            s0 += X[xo + j * xj + l] * Y[yo + j * yj + l * yl]
        o = oo + j * oj
        O[o] = O[o] + s0 if add else s0


@njit(inline="always", **_JIT)
def _axpy(O, oo, a, X, xo, count):
    """``O[oo + k] += a * X[xo + k]`` for k < count (slices: the loop vectorises)."""
    out, x = O[oo:oo + count], X[xo:xo + count]
    for k in range(count):
        out[k] += a * x[k]


@njit(**_JIT)
def _mm(X, xa, Y, yb, ysk, ysn, O, go, M, K, N):
    """``O[go:] = x @ y`` for x (M, K) at ``X[xa:]`` and y (K, N) at ``Y[yb:]`` (y's
    strides ysk, ysn): each output summed from 0 in k order, whichever loop computes it
    (a row of outputs at a time where y's rows are contiguous and long; else dot
    products four at a time, along the longer of M and N)."""
    if ysn == 1 and N >= 8:
        for m in range(M):
            o = O[go + m * N:go + m * N + N]
            o[:] = 0.0
            for k in range(K):
                xv = X[xa + m * K + k]
                yk = Y[yb + k * N:yb + k * N + N]
                for n in range(N):
                    o[n] += xv * yk[n]
    elif N >= M:
        for m in range(M):
            _sums(X, xa + m * K, 0, Y, yb, ysn, ysk, K, N, O, go + m * N, 1, False)
    else:
        for n in range(N):
            _sums(X, xa, K, Y, yb + n * ysn, 0, ysk, K, M, O, go + n, N, False)


@njit(**_JIT)
def forward(i, tape, omap):
    """A replay's product: the eager product's sums (``_mm``)."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    oa, ob, oi = OFF[A[i]], OFF[B[i]], OFF[i]
    for bt in range(nb):
        _mm(V, oa + bt * M * K, V, ob + bt * K * N, ysk, ysn, V, oi + bt * M * N, M, K, N)


@njit(**_JIT)
def product(x, y, out):
    """out = x @ y for C-contiguous float64 (nb, M, K), (nb, K, N) and (nb, M, N): the
    eager value of a product that the compiled sweep replays (the same sums; BLAS sums
    in another order)."""
    nb, M, K = x.shape
    N = y.shape[2]
    X, Y, O = x.reshape(-1), y.reshape(-1), out.reshape(-1)
    for bt in range(nb):
        _mm(X, bt * M * K, Y, bt * K * N, N, 1, O, bt * M * N, M, K, N)


@njit(**_JIT)
def add_outer(out, u, v):
    """out += outer(u, v), in place (the adjoint of a product whose summed dim is 1)."""
    for m in range(u.shape[0]):
        um = u[m]
        for k in range(v.shape[0]):
            out[m, k] += um * v[k]


@njit(**_JIT)
def reverse(i, tape, G, scratch, omap):
    """out[b] = x[b] @ y[b] with x (nb, M, K), y (nb, K, N): dx = g y^T (each element
    summed from 0 in n order, then added), dy = x^T g (added term by term in m order),
    in loops that vectorise (``scratch``: K values, and y^T where y is stored (K, N))."""
    OP, A, B, C, C2, OFF, META, IAUX, FLAGS, V = tape
    nb, M, K, N, ysk, ysn = dims(i, META, IAUX)
    a, b = A[i], B[i]
    oa, ob, oi = OFF[a], OFF[b], OFF[i]
    for bt in range(nb):
        xa, yb, go = oa + bt * M * K, ob + bt * K * N, oi + bt * M * N
        if wants(a, OP):
            if K >= 8:            # a row of dx at a time, in scratch, from rows of y^T
                Y, yo = V, yb
                if ysk != 1:      # (y stored (K, N): y^T copied after the row)
                    Y, yo = scratch, K
                    for k in range(K):
                        for n in range(N):
                            scratch[K + n * K + k] = V[yb + k * ysk + n]
                acc = scratch[:K]
                for m in range(M):
                    acc[:] = 0.0
                    for n in range(N):
                        _axpy(acc, 0, G[go + m * N + n], Y, yo + n * K, K)
                    _axpy(G, xa + m * K, 1.0, acc, 0, K)
            elif K >= M:
                for m in range(M):
                    _sums(G, go + m * N, 0, V, yb, ysk, ysn, N, K, G, xa + m * K, 1, True)
            else:
                for k in range(K):
                    _sums(G, go, N, V, yb + k * ysk, 0, ysn, N, M, G, xa + k, K, True)
        if wants(b, OP):
            along_n = ysn == 1 and (ysk != 1 or N >= K)     # (both 1: a vector y)
            for m in range(M):         # dy[k, n] += x[m, k] g[m, n], along y's rows
                if along_n:
                    for k in range(K):
                        _axpy(G, yb + k * ysk, V[xa + m * K + k], G, go + m * N, N)
                else:
                    for n in range(N):
                        _axpy(G, yb + n * ysn, G[go + m * N + n], V, xa + m * K, K)


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
