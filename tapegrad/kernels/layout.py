"""The entry layout, read in compiled code: ``tape.layout_codec``'s functions, compiled.

An entry i of a tape has its values at ``V[OFF[i]:]`` (its adjoints at the same place of
``G``) and, unless it is a 0-d scalar (``META[i] < 0``), metadata at ``IAUX[META[i]:]``:
``[size, ndim, *shape, *extras]``, a kind's extras its own (``layout_codec``).
``tapegrad.tape.Layout`` reads the same layout in Python, with the same functions.
(Inlined where they are called, ``inline="always"``: nothing to compile on its own, and
the callers' code is what it was with the reads written out.)

A sweep takes a tape as one value, the tuple ``TAPE`` names (``Layout.arrays()``).
"""
from numba import njit

from ..tape import layout_codec as codec
from ..tape.layout_codec import Y_TRANSPOSED  # noqa: F401  (matmul reads the mode bit)
from .generated import OP_CONST

_JIT = dict(cache=True, error_model="numpy")
TAPE = ("OP", "A", "B", "C", "C2", "OFF", "META", "IAUX", "FLAGS", "V")
_compiled = njit(inline="always", **_JIT)
size_of = _compiled(codec.size_of)
ndim_of = _compiled(codec.ndim_of)
extras_at = _compiled(codec.extras_at)
ndim_at = _compiled(codec.ndim_at)
shape_at = _compiled(codec.shape_at)
cat_dims = _compiled(codec.cat_dims)
cat_piece = _compiled(codec.cat_piece)
function_inputs = _compiled(codec.function_inputs)
function_input_at = _compiled(codec.function_input_at)
product_dims = _compiled(codec.product_dims)
softmax_rows = _compiled(codec.softmax_rows)
broadcast_loops = _compiled(codec.broadcast_loops)


def tiny_tape():
    """A tape of one entry, its arrays in ``TAPE`` order and of a tape's dtypes: what the
    ``warm`` functions of the sweeps call them with, to compile them (``cold``)."""
    import numpy as np
    from ..tape.columns import _COLUMNS
    dtypes = dict(_COLUMNS, V=np.float64)
    return tuple(np.zeros(1, dtypes[name]) for name in TAPE)


@njit(**_JIT)
def strided(k, IAUX, shp, strd, nd):
    """Offset of linear index ``k`` of a C-ordered shape (at IAUX[shp:]) under the
    strides at IAUX[strd:]."""
    off = 0
    for d in range(nd - 1, -1, -1):
        s = IAUX[shp + d]
        q = k // s
        off += (k - q * s) * IAUX[strd + d]
        k = q
    return off


@njit(inline="always", **_JIT)
def mark_reached(j, OP, OFF, META, IAUX, G, live):
    """Mark buffer j reached by this sweep.  At its first mark its adjoint becomes zero,
    whatever the arena held (a sweep's arena is not cleared beforehand: each adjoint is
    zeroed here, before the first addition into it, so a backward touches only the
    adjoints it reaches).  A constant's array adjoint is left as it is: the rules skip it
    or add into it for nothing (a concatenation's, an ``expand``'s), and nothing reads
    it (``wants``)."""
    if live[j] == 0:
        live[j] = 1
        if META[j] < 0:
            G[OFF[j]] = 0.0
        elif OP[j] != OP_CONST:
            zero(G, OFF[j], size_of(META, IAUX, j))


@njit(**_JIT)
def zero(G, o, n):
    """``G[o:o + n] = 0``: a call of its own, out of the sweeps' loops."""
    G[o:o + n] = 0.0


@njit(**_JIT)
def wants(j, OP):
    """Does buffer j want an adjoint (is it an input other than a constant)?"""
    return j >= 0 and OP[j] != OP_CONST


@njit(**_JIT)
def pad4(IAUX, at, nd, fill):
    """The last four of the nd values at IAUX[at:], padded in front with ``fill``."""
    p = 4 - nd
    v0 = IAUX[at - p] if p <= 0 else fill
    v1 = IAUX[at + 1 - p] if p <= 1 else fill
    v2 = IAUX[at + 2 - p] if p <= 2 else fill
    v3 = IAUX[at + 3 - p] if p <= 3 else fill
    return v0, v1, v2, v3


@njit(**_JIT)
def offsets(IAUX, shp, strd, nd, out):
    """out[k] = offset of linear index k of the C-ordered shape at IAUX[shp:] under the
    strides at IAUX[strd:]; nested loops (no division) for up to 4 dims."""
    if nd > 4:
        n = 1
        for d in range(nd):
            n *= IAUX[shp + d]
        for k in range(n):
            out[k] = strided(k, IAUX, shp, strd, nd)
        return
    s0, s1, s2, s3 = pad4(IAUX, shp, nd, 1)
    t0, t1, t2, t3 = pad4(IAUX, strd, nd, 0)
    k = 0
    for i0 in range(s0):
        for i1 in range(s1):
            for i2 in range(s2):
                o = i0 * t0 + i1 * t1 + i2 * t2
                for i3 in range(s3):
                    out[k] = o + i3 * t3
                    k += 1
