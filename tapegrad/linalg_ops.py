"""``torch.linalg``'s functions beyond the products of ``linalg.py`` (the package root
puts them on ``tapegrad.linalg``), and ``addmm`` / ``addmv`` / ``baddbmm``: the norms, composed of reductions; ``det``,
``slogdet``, ``inv`` and ``solve``, computed by NumPy's LAPACK in custom Functions whose
backwards are written in tapegrad's ops (so ``create_graph`` differentiates them again;
a replay (``tapegrad.trace``) does not take them, as it takes no custom Function):

    det' = g det inv(A)^T,  slogdet' = g inv(A)^T,  inv' = -inv^T g inv^T,
    solve(A, B) = X:  B' = solve(A^T, g),  A' = -B' X^T.
"""
import collections
import math

import numpy as np

from .autograd.function import Function
from .composite import composite
from .dtypes import TORCH_NAMES
from .elementwise import where
from .linalg import bmm, mm, mv
from .more_ops import zero_gradient_to
from .reductions import _norm_dtype, amax, amin, norm, sum as _sum
from .shape_ops import _wrap_dim, expand, unsqueeze
from .tensor import from_array
from .tracing import freeze

SlogdetResult = collections.namedtuple("linalg_slogdet", ["sign", "logabsdet"])
SlogdetTopResult = collections.namedtuple("slogdet", ["sign", "logabsdet"])


class LinAlgError(RuntimeError):
    """A matrix the operation cannot take (singular), as ``torch.linalg.LinAlgError``."""


def _float(A, name):
    if not A.dtype.is_floating_point:
        raise RuntimeError(f"{name}: Expected a floating point or complex tensor as input. Got "
                           f"{TORCH_NAMES[A.dtype.name][0]}")


def _square(A, name):
    _float(A, name)
    if A.ndim < 2:
        raise RuntimeError(f"{name}: The input tensor A must have at least 2 dimensions.")
    if A.shape[-1] != A.shape[-2]:
        raise RuntimeError(f"{name}: A must be batches of square matrices, but they are "
                           f"{A.shape[-2]} by {A.shape[-1]} matrices")


def _values(A):
    freeze(A)
    return np.asarray(A._arr, np.float64)


def _mT(x):
    return x.transpose(-2, -1)


def _zero_pivot(a):
    """The first (1-based) zero diagonal element of the LU factors of the square matrix
    ``a`` (partial pivoting, as LAPACK's getrf), or its size if rounding left none."""
    a = a.copy()
    n = len(a)
    for k in range(n):
        p = k + int(np.argmax(np.abs(a[k:, k])))
        if a[p, k] == 0:
            return k + 1
        a[[k, p]] = a[[p, k]]
        a[k + 1:, k:] -= np.outer(a[k + 1:, k] / a[k, k], a[k, k:])
    return n


def _fails(m):
    try:
        np.linalg.inv(m)
    except np.linalg.LinAlgError:
        return True
    return False


def _checked(fn, a, name, text):
    """``fn()``, or where LAPACK finds the matrix ``a`` singular PyTorch's LinAlgError
    (a batch names its first singular matrix); ``text(matrix)`` says what failed."""
    try:
        return fn()
    except np.linalg.LinAlgError:
        pass
    if a.ndim == 2:
        raise LinAlgError(f"{name}: {text(a)}")
    flat = a.reshape((-1,) + a.shape[-2:])
    k = next(k for k, m in enumerate(flat) if _fails(m))
    raise LinAlgError(f"{name}: (Batch element {k}): {text(flat[k])}")


# -- custom Functions: NumPy forward, backward in tapegrad's ops ----------------------------
class _Det(Function):
    _node_name = "LinalgDetBackward0"

    @staticmethod
    def forward(ctx, A):
        out = from_array(np.asarray(np.linalg.det(_values(A)), A.dtype.np))
        ctx.save_for_backward(A, out)
        return out

    @staticmethod
    def backward(ctx, g):
        A, d = ctx.saved_tensors
        if (d._arr == 0).any():
            raise NotImplementedError("linalg.det: the gradient at a singular matrix (det 0) "
                                      "is not implemented in tapegrad (it needs a singular "
                                      "value decomposition)")
        return (g * d)[..., None, None] * _mT(inv(A))


class _Slogdet(Function):
    _node_name = "LinalgSlogdetBackward0"

    @staticmethod
    def forward(ctx, A):
        sign, log = np.linalg.slogdet(_values(A))
        ctx.save_for_backward(A)
        return (from_array(np.asarray(sign, A.dtype.np)), from_array(np.asarray(log,
                                                                                A.dtype.np)))

    @staticmethod
    def backward(ctx, g_sign, g_log):      # (the sign's gradient is 0)
        A, = ctx.saved_tensors
        return g_log[..., None, None] * _mT(inv(A))


class _Inv(Function):
    _node_name = "LinalgInvExBackward0"

    @staticmethod
    def forward(ctx, A):
        a = _values(A)
        out = from_array(_checked(lambda: np.linalg.inv(a), a, "linalg.inv", lambda m: (
            f"The diagonal element {_zero_pivot(m)} is zero, the inversion could not be "
            "completed because the input matrix is singular.")).astype(A.dtype.np))
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, g):
        Y, = ctx.saved_tensors
        return -(_mT(Y) @ g @ _mT(Y))


class _Solve(Function):
    """``A X = B`` (``X A = B`` where not ``left``) for matrices B; a vector B is a
    column, put in and taken out."""
    _node_name = "LinalgSolveExBackward0"

    @staticmethod
    def forward(ctx, A, B, vector, left):
        a, b = _values(A), _values(B)
        b = b[..., None] if vector else b
        if not left:           # X A = B: A^T X^T = B^T
            a, b = np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2)
        x = _checked(lambda: np.linalg.solve(a, b), a, "torch.linalg.solve",
                     lambda m: "The solver failed because the input matrix is singular.")
        x = x[..., 0] if vector else x if left else np.swapaxes(x, -1, -2)
        out = from_array(np.ascontiguousarray(x, A.dtype.np))
        ctx.vector, ctx.left = vector, left
        ctx.save_for_backward(A, out)
        return out

    @staticmethod
    def backward(ctx, g):
        A, X = ctx.saved_tensors
        gB = _Solve.apply(_mT(A), g, ctx.vector, ctx.left)
        if ctx.vector:
            return -(unsqueeze(gB, -1) * unsqueeze(X, -2)), gB, None, None
        return -(gB @ _mT(X)) if ctx.left else -(_mT(X) @ gB), gB, None, None


# -- the public functions ------------------------------------------------------------------
def det(A):
    """The determinant of each square matrix (LinalgDetBackward0)."""
    _square(A, "linalg.det")
    return _Det.apply(A)


def slogdet(A):
    """(sign, log |det|) of each square matrix (LinalgSlogdetBackward0)."""
    _square(A, "linalg.slogdet")
    return SlogdetResult(*_Slogdet.apply(A))


def slogdet_top(A):
    """``torch.slogdet``: ``linalg.slogdet`` under its own result name."""
    return SlogdetTopResult(*slogdet(A))


def logdet(A):
    """log det: nan where the determinant is negative (-inf where it is 0), a ``where`` of
    slogdet's results, as PyTorch's (WhereBackward0)."""
    _square(A, "logdet")
    sign, log = _Slogdet.apply(A)
    return where(sign < 0, math.nan, log)


def inv(A):
    """The inverse of each square matrix; a singular one raises LinAlgError naming the
    zero diagonal element of its LU factors, as PyTorch's."""
    _square(A, "linalg.inv")
    return _Inv.apply(A)


def solve(A, B, *, left=True):
    """X with ``A X = B`` (``X A = B`` when not ``left``), batch dims broadcast; B is a
    vector (or a batch of them) where it is 1-D or A's shape without its last dim."""
    _float(A, "linalg.solve")
    _square(A, "linalg.solve")
    if A.dtype is not B.dtype:
        raise RuntimeError(f"linalg.solve: Expected A and B to have the same dtype, but found A "
                           f"of type {TORCH_NAMES[A.dtype.name][0]} and B of type "
                           f"{TORCH_NAMES[B.dtype.name][0]} instead")
    vector = B.ndim == 1 or (B.ndim == A.ndim - 1 and B.shape == A.shape[:-1])
    rows, cols = (B.shape[-1], 1) if vector else tuple(B.shape[-2:])
    if (rows if left else cols) != A.shape[-1]:
        raise RuntimeError(f"linalg.solve: Incompatible shapes of A and B for the equation "
                           f"{'AX' if left else 'XA'} = B ({A.shape[-2]}x{A.shape[-1]} and "
                           f"{rows}x{cols})")
    return _Solve.apply(A, B, vector, left)


def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """The ``ord``-norm of the entries over ``dim`` (all of them by default)."""
    if isinstance(ord, str) or not isinstance(ord, (int, float)):
        raise TypeError(f"linalg_vector_norm(): argument 'ord' (position 2) must be Number, not "
                        f"{type(ord).__name__}")
    if abs(ord) == math.inf and x.numel() == 0:
        raise RuntimeError(f"linalg.vector_norm cannot compute the {ord} norm on an empty "
                           "tensor because the operation does not have an identity")
    return norm(x, ord, dim, keepdim, dtype)


def matrix_norm(A, ord="fro", dim=(-2, -1), keepdim=False, *, dtype=None):
    """'fro' (a vector 2-norm over both dims), and the largest (smallest) column sum for
    ord 1 (-1), row sum for inf (-inf).  The spectral and nuclear norms ('nuc', 2, -2)
    need singular values: NotImplementedError."""
    _float(A, "linalg.matrix_norm")
    if A.ndim < 2:
        raise RuntimeError("linalg.matrix_norm: The input tensor A must have at least 2 "
                           "dimensions.")
    dim = tuple(dim)
    if len(dim) != 2:
        raise RuntimeError(f"linalg.matrix_norm: dim must be a 2-tuple. Got "
                           f"{' '.join(str(d) for d in dim)}")
    rows, cols = (_wrap_dim(d, A.ndim) for d in dim)
    if rows == cols:
        raise RuntimeError(f"linalg.matrix_norm: dims must be different. Got ({rows}, {cols})")
    if ord == "fro":
        return norm(A, 2, (rows, cols), keepdim, dtype)
    if ord in ("nuc", 2, -2):
        raise NotImplementedError(f"linalg.matrix_norm: ord={ord!r} (a sum or extreme of the "
                                  "singular values) is not implemented in tapegrad: it has no "
                                  "singular value decomposition")
    if ord not in (1, -1, math.inf, -math.inf):
        raise RuntimeError(f"linalg.matrix_norm: Order {ord} not supported.")
    _norm_dtype(A, dtype, "linalg.matrix_norm")
    x = A if dtype is None else A.to(dtype)
    summed, extreme = (rows, cols) if abs(ord) == 1 else (cols, rows)
    if not keepdim and summed < extreme:
        extreme -= 1
    pick = amax if ord > 0 else amin
    return pick(_sum(x.abs(), summed, keepdim=keepdim), extreme, keepdim=keepdim)


def linalg_norm(A, ord=None, dim=None, keepdim=False, *, dtype=None):
    """``vector_norm`` or ``matrix_norm``, by ``ord`` and ``dim``, as PyTorch chooses:
    a matrix norm for an ``ord`` over two dims (those of a 2-D input without ``dim``), a
    string ``ord`` always, else the vector norm (of all entries without ``dim``)."""
    if isinstance(dim, int):
        dim = (dim,)
    if dim is not None:
        dim = tuple(dim)
        if len(dim) not in (1, 2):
            raise RuntimeError(f"linalg.norm: If dim is specified, it must be of length 1 or 2. "
                               f"Got {list(dim)}")
    elif ord is not None and A.ndim not in (1, 2):
        raise RuntimeError(f"linalg.norm: If dim is not specified but ord is, the input must be "
                           f"1D or 2D. Got {A.ndim}D.")
    if isinstance(ord, str) or (ord is not None and (len(dim) == 2 if dim else A.ndim == 2)):
        return matrix_norm(A, ord, dim or (-2, -1), keepdim, dtype=dtype)
    return vector_norm(A, 2 if ord is None else ord, dim, keepdim, dtype=dtype)


def inverse(input):
    return inv(input)


# -- products added to a tensor ------------------------------------------------------------
def _plus_product(node, input, product, beta, alpha, *factors):
    """``beta * input + alpha * product()`` (input broadcast to the product's shape); with
    beta 0 input is ignored (its nan and inf too) and gets a zero gradient, as PyTorch's.
    Integer products take beta and alpha truncated to integers, as PyTorch's."""
    if not factors[0].dtype.is_floating_point:
        beta, alpha = int(beta), int(alpha)

    def body():
        out = product()
        out = out if alpha == 1 else alpha * out
        base = expand(input, tuple(out.shape))
        if beta == 0:
            return zero_gradient_to(out, base)
        return (base if beta == 1 else beta * base) + out
    return composite(node, body, input, *factors)


def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    for name, m in (("mat1", mat1), ("mat2", mat2)):
        if m.ndim != 2:
            raise RuntimeError(f"{name} must be a matrix, got {m.ndim}-D tensor")
    if input.dtype is not mat2.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got "
                           f"{TORCH_NAMES[input.dtype.name][0]} and "
                           f"{TORCH_NAMES[mat2.dtype.name][0]}")
    return _plus_product("AddmmBackward0", input, lambda: mm(mat1, mat2), beta, alpha, mat1,
                         mat2)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    if mat.ndim != 2 or vec.ndim != 1 or input.ndim > 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got {input.ndim}, {mat.ndim}, "
                           f"{vec.ndim}")
    if input.ndim == 1 and input.shape[0] not in (1, mat.shape[0]) or \
            mat.shape[1] != vec.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({input.shape[0] if input.ndim else 1}), "
                           f"mat ({mat.shape[0]}x{mat.shape[1]}), vec ({vec.shape[0]})")
    return _plus_product("AddmvBackward0", input, lambda: mv(mat, vec), beta, alpha, mat, vec)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    return _plus_product("BaddbmmBackward0", input, lambda: bmm(batch1, batch2), beta, alpha,
                         batch1, batch2)
