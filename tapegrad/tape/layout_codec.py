"""The entry layout's one codec: plain Python functions that Python calls as they are
(``columns.Layout``, the replay checks) and ``kernels/layout.py`` compiles with Numba,
from this same source.

Entry i of a tape has its values at ``V[OFF[i]:]``; unless it is a 0-d scalar
(``META[i] < 0``), ``IAUX[META[i]:]`` holds ``[size, ndim, *shape, *extras]``.  A kind's
extras are its own: a gather's (base offset, a stride per output dim), a reduction's (an
output stride per input dim), an index list, a where's condition buffer, a product's
(nb, M, K, N, mode), a concatenation's (outer, n, (buffer, inner) * n), softmax's (outer,
n, inner), a broadcast's loops (s0..s3, a0..a3, b0..b3), a custom Function's (position
among its outputs, n, buffer * n).

Each function stands alone (compiled, a call of a plain function would not compile);
those on a metadata position ``m`` (``META[i] >= 0``) also read NumPy arrays of them.
This file is part of the kernel cache's key (``kernels.cache_key``).
"""
SINGLE, Y_TRANSPOSED = 1, 2   # a product's mode bits: float32 BLAS; y stored (N, K)


# -- the header, at metadata position m = META[i] >= 0 (an int, or an array of them) ----
def size_at(IAUX, m):
    return IAUX[m]


def ndim_at(IAUX, m):
    return IAUX[m + 1]


def shape_at(m):
    """The position in IAUX of the first dim (the extras follow the ndim dims)."""
    return m + 2


# -- the header of entry i -------------------------------------------------------------
def size_of(META, IAUX, i):
    """Number of values of buffer i (1 for a 0-d scalar)."""
    m = META[i]
    return 1 if m < 0 else IAUX[m]


def ndim_of(META, IAUX, i):
    m = META[i]
    return 0 if m < 0 else IAUX[m + 1]


def extras_at(META, IAUX, i):
    """The position in IAUX of entry i's extras (not a 0-d scalar's: it has none)."""
    m = META[i]
    return m + 2 + IAUX[m + 1]


# -- a kind's extras, at their position e (``extras_at``) -------------------------------
def cat_dims(IAUX, e):
    """(outer, n) of a concatenation: n pieces, each ``outer`` blocks."""
    return IAUX[e], IAUX[e + 1]


def cat_piece(IAUX, e, j):
    """(buffer, inner) of piece j of a concatenation: each block of it ``inner`` values."""
    return IAUX[e + 2 + 2 * j], IAUX[e + 3 + 2 * j]


def cat_buffer_at(e, j):
    """The position in IAUX of piece j's buffer (rewritten when entries merge)."""
    return e + 2 + 2 * j


def function_inputs(IAUX, e):
    """Number of tensor inputs of a custom Function's output."""
    return IAUX[e + 1]


def function_input_at(e, j):
    """The position in IAUX of a custom Function's input buffer j."""
    return e + 2 + j


def product_dims(IAUX, e):
    """(nb, M, K, N, mode) of a product x (nb, M, K) @ y (nb, K, N); mode: its bits
    ``SINGLE`` and ``Y_TRANSPOSED``."""
    return IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3], IAUX[e + 4]


def softmax_rows(IAUX, e):
    """(outer, n, inner) of a softmax: element j of row (p, q) at ``(p * n + j) * inner + q``."""
    return IAUX[e], IAUX[e + 1], IAUX[e + 2]


def broadcast_loops(IAUX, e):
    """(s0..s3, a0..a3, b0..b3) of a broadcast: four loops' lengths and each operand's
    strides along them."""
    return (IAUX[e], IAUX[e + 1], IAUX[e + 2], IAUX[e + 3], IAUX[e + 4], IAUX[e + 5],
            IAUX[e + 6], IAUX[e + 7], IAUX[e + 8], IAUX[e + 9], IAUX[e + 10], IAUX[e + 11])
