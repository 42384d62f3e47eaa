"""Matrix products: one batched ``matmul``-kind entry per product.

The kernel reads its operands as contiguous (nb, M, K) and (nb, K, N) blocks, so a
1-D operand needs no reshape entry (its flat layout already is (1, K) or (K, 1)); batch
dims are broadcast by hidden ``expand`` entries.
"""
import math

import numpy as np

from .autograd.engine import HOST_MIN_MACS
from .dtypes import TORCH_NAMES
from .elementwise import result_dtype
from .grad_mode import STATE
from .kernels import matmul as matmul_kernels
from .kernels.threads import one_blas_thread
from .ops.table import CODE
from .record import broadcast_shape, broadcast_to
from .shape_ops import _reshaped, reshape, unsqueeze
from .tape import PLACE_MIN, SINGLE, Y_TRANSPOSED, roomy_tape
from .tensor import _leaf, _norm, _result, buf, recording


def _fmt(s):
    return "x".join(str(n) for n in s)


def _same_dtype(a, b, code):
    """PyTorch's products take no mixed dtypes (no promotion): its message, per product."""
    if a.dtype is b.dtype:
        return
    (na, ca), (nb, cb) = TORCH_NAMES[a.dtype.name], TORCH_NAMES[b.dtype.name]
    if code == CODE["dot"]:
        raise RuntimeError(f"dot : expected both vectors to have same dtype, but found {na} and "
                           f"{nb}")
    if b.ndim == 1:                    # (mv, and matmul's batched matrix @ vector)
        raise RuntimeError(f"addmv input tensors must have the same dtype, but got {nb}, {na}, "
                           f"and {nb}")
    if b.ndim == 2:                    # (mm, and matmul's vector / batch @ matrix)
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {ca} != {cb}")
    raise RuntimeError(f"expected scalar type {na} but found {nb}")


def _blocks(a, batch):
    """``a`` (..., r, c) as C-contiguous (nb, r, c) blocks, its batch dims broadcast (nb
    spelled out: with r or c 0, -1 would be ambiguous)."""
    if a.shape[:-2] != batch:
        a = np.broadcast_to(a, batch + a.shape[-2:])
    return np.ascontiguousarray(a).reshape((math.prod(batch),) + a.shape[-2:])


def _product(a, b, code, transposed=False):
    """``a @ b``, or with ``transposed`` ``a @ b.T`` for a 2-D ``b`` read in place (the
    entry's mode says so: no transposed copy is recorded)."""
    x, y = a._d, b._d
    if (x.__class__ is y.__class__ is np.ndarray and x.ndim == 2 == y.ndim
            and x.dtype.char == "d" == y.dtype.char and x.flags.c_contiguous
            and y.flags.c_contiguous and x.shape[1] == y.shape[transposed]
            and x.size * y.shape[1 - transposed] < HOST_MIN_MACS):
        return _small_product(a, b, x, y, code, transposed)
    rd = result_dtype(a, b)
    x, y = np.asarray(a._arr, rd.np), np.asarray(b._arr, rd.np)
    if transposed:
        y = y.T
    x2 = x.reshape(1, -1) if x.ndim == 1 else x
    y2 = y.reshape(-1, 1) if y.ndim == 1 else y
    M, K = x2.shape[-2:]
    K2, N = y2.shape[-2:]
    if K != K2:
        if x.ndim <= 2 and y.ndim <= 2:
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_fmt(x2.shape)} and "
                               f"{_fmt(y2.shape)})")
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{x2.shape[0]}, {K}] but got: [{y2.shape[0]}, {K2}].")
    batch = () if x2.ndim == y2.ndim == 2 else broadcast_shape(x2.shape[:-2], y2.shape[:-2])
    _same_dtype(a, b, code)
    nb = math.prod(batch)
    if rd.np.char == "d" and nb * M * K * N < HOST_MIN_MACS:
        # the sums of the compiled sweep, which replays a product this small (BLAS sums
        # in another order): a replay gives the eager value bit for bit
        out = np.empty((nb, M, N))
        matmul_kernels.product(_blocks(x2, batch), _blocks(y2, batch), out)
        value = out.reshape(batch + (M,) * (x.ndim > 1) + (N,) * (y.ndim > 1))
    elif rd.np.char == "d" and x.ndim == y.ndim == 2 and M * N >= PLACE_MIN:
        return _large_product(a, b, x, y, code, (1, M, K, N, Y_TRANSPOSED if transposed else 0))
    else:
        with one_blas_thread(nb * M * K * N):
            value = np.matmul(x, y)
    t = recording(a, b) if rd.is_floating_point else None
    if t is None:
        return _leaf(_norm(np.asarray(value)))
    ia = broadcast_to(t, buf(t, a, True), x2, batch + (M, K))
    ib = broadcast_to(t, buf(t, b, True), y2, batch + (K, N))
    # extras: the shapes, and the mode: float32 BLAS in the backward, y read transposed
    mode = (SINGLE if value.dtype == np.float32 else 0) | (Y_TRANSPOSED if transposed else 0)
    i = t.append(code, ia, ib, value, (nb, M, K, N, mode))
    return _result(_norm(np.asarray(value)), t, i, a._rg or b._rg)


def _small_product(a, b, x, y, code, transposed):
    """``_product`` of two C-contiguous float64 matrices, in the compiled sweep's sums
    (as the general path computes a product this small), without its promotion, batch
    and shape checks."""
    M, K = x.shape
    N = y.shape[1 - transposed]
    out = np.empty((1, M, N))
    matmul_kernels.product(x.reshape(1, M, K), (y.T.copy() if transposed else y).reshape(1, K, N),
                           out)
    out = out.reshape(M, N)
    t = recording(a, b)
    if t is None:
        return _leaf(out)
    i = t.append(code, buf(t, a, True), buf(t, b, True), out,
                 (1, M, K, N, Y_TRANSPOSED if transposed else 0))
    return _result(out, t, i, a._rg or b._rg)


def _large_product(a, b, x, y, code, extras):
    """A float64 matrix product with a large result: BLAS writes it straight into the
    tape's arena when it is recorded (no fresh array, no copy at the flush)."""
    macs = math.prod(extras[:4])
    rg = a._rg or b._rg
    if (not STATE.grad or not rg) and recording(a, b) is None:
        with one_blas_thread(macs):
            return _leaf(np.matmul(x, y))
    M, N = x.shape[0], y.shape[1]
    t = roomy_tape(M * N, a, b)
    ia, ib = buf(t, a, True), buf(t, b, True)
    i, out = t.append_into(code, ia, ib, (M, N), M * N, lambda out: _blas_into(x, y, out, macs),
                           extras=extras)
    return _result(out, t, i, rg)


def _blas_into(x, y, out, macs):
    with one_blas_thread(macs):
        np.matmul(x, y, out=out)


def matmul(input, other):
    if input.ndim == 0 or other.ndim == 0:
        raise RuntimeError("both arguments to matmul need to be at least 1D, but they are "
                           f"{input.ndim}D and {other.ndim}D")
    nd = (input.ndim, other.ndim)
    if nd == (1, 1):
        return dot(input, other)
    if nd == (2, 2):
        return _product(input, other, CODE["mm"])
    if nd == (2, 1):
        return mv(input, other)
    if nd == (1, 2):   # as PyTorch: unsqueeze, mm, squeeze
        if input.shape[0] == other.shape[0]:    # (else _product names the shapes)
            _same_dtype(input, other, CODE["mm"])
        out = _product(unsqueeze(input, 0), other, CODE["mm"])
        return _reshaped(out, out.shape[1:], CODE["squeeze_mm"])
    return _product(input, other, CODE["matmul"])


def mm_transposed(input, weight):
    """``input @ weight.T`` for 2-D operands (a linear layer): one MmBackward0 entry that
    reads the weight in place, transposed."""
    return _product(input, weight, CODE["mm"], transposed=True)


def mm(input, mat2):
    if input.ndim != 2 or mat2.ndim != 2:
        raise RuntimeError(f"{'self' if input.ndim != 2 else 'mat2'} must be a matrix")
    return _product(input, mat2, CODE["mm"])


def bmm(input, mat2):
    if input.ndim != 3 or mat2.ndim != 3:
        raise RuntimeError(f"batch{'1' if input.ndim != 3 else '2'} must be a 3D tensor")
    if input.shape[0] != mat2.shape[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{input.shape[0]}, {input.shape[2]}] but got: "
                           f"[{mat2.shape[0]}, {mat2.shape[1]}].")
    return _product(input, mat2, CODE["bmm"])


def mv(input, vec):
    if input.ndim != 2 or vec.ndim != 1:
        raise RuntimeError("vector + matrix @ vector expected, got "
                           f"1, {input.ndim}, {vec.ndim}")
    if input.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0]}), mat "
                           f"({_fmt(input.shape)}), vec ({vec.shape[0]})")
    return _product(input, vec, CODE["mv"])


def dot(input, tensor):
    if input.ndim != 1 or tensor.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {input.ndim}D and {tensor.ndim}D "
                           "tensors")
    _same_dtype(input, tensor, CODE["dot"])
    if input.shape[0] != tensor.shape[0]:
        n, m = input.shape[0], tensor.shape[0]
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{n}] and src [{m}] to "
                           f"have the same number of elements, but got {n} and {m} elements "
                           "respectively")
    return _product(input, tensor, CODE["dot"])


def outer(input, vec2):
    for name, v in (("self", input), ("vec2", vec2)):
        if v.ndim != 1:
            raise RuntimeError(f"outer: Expected 1-D argument {name}, but got {v.ndim}-D")
    return reshape(input, (-1, 1)) * vec2
