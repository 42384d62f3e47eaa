"""Sparse Jacobians and Hessians from the tape: the exact pattern, a coloring, and one
compiled sweep per color.

**Pattern.**  Each entry reads given elements of its inputs, and the tape says which:
an elementwise entry element k of its inputs' element k, a gather the offsets in its
extras, a reduction its groups, a product a row times a column, and so on (``LOCAL``,
one rule per kind).  Composed from the inputs to the outputs in one pass over the tape,
these give which output element depends on which input element: a superset of the
nonzeros at any input (derivatives that vanish at a point, such as relu's, stay in), the
same at every input that passes the recording's guards, found without probing.

**Compression.**  Columns that share no row are seeded together: a tangent sweep per
color gives the compressed matrix J S, from which every nonzero is read directly
(``kernels.coloring``).  Rows are colored the same way for reverse sweeps; the mode
with fewer colors runs.  A Hessian's pattern is symmetric and takes a star coloring:
forward-over-reverse sweeps of the recorded gradient, each nonzero read from whichever
of its two sides holds it alone.

The results are SciPy sparse arrays (CSR); SciPy is an optional dependency
(``pip install 'tapegrad[sparse]'``).
"""
import ast

import numpy as np

from ..kernels import coloring
from ..kernels import pattern as kpattern
from ..ops.rules import parse
from ..ops.table import BY_CODE, EW_OF
from ..tape import CONST
from . import sweeps

NEEDS_SCIPY = ("sparse Jacobians and Hessians need SciPy, which is not installed: "
               "pip install 'tapegrad[sparse]' (or scipy)")


def scipy_sparse():
    try:
        import scipy.sparse as sp
    except ImportError:
        raise ImportError(NEEDS_SCIPY) from None
    return sp


# -- which input elements each entry reads: (input buffer, rows, columns) per kind ----------
def _diagonal(t, i, j):
    """An input read element by element (or one element, broadcast)."""
    n = t.size(i)
    rows = np.arange(n)
    return j, rows, (rows if t.size(j) == n else np.zeros(n, np.int64))


def _vanishes(rule):
    """A rule that is a constant (sign's 0): no dependency."""
    return isinstance(parse(rule), ast.Constant)


def _elementwise(t, i):
    op = BY_CODE[int(t.OP[i])]
    a, b = int(t.A[i]), int(t.B[i])
    out = []
    if a >= 0 and not _vanishes(op.gx):
        out.append(_diagonal(t, i, a))
    if b >= 0 and op.gy and not _vanishes(op.gy):
        out.append(_diagonal(t, i, b))
    return out


def _selected(t, i):
    """where: each element reads the side its condition selects when the condition is a
    constant, else either side (a condition computed from the inputs may select the
    other at other inputs)."""
    cond = t.condition(i)
    out = [_diagonal(t, i, j) for j in (int(t.A[i]), int(t.B[i])) if j >= 0]
    if t.OP[cond] != CONST:
        return out
    mask = np.broadcast_to(t.value(cond), t.shape(i)).reshape(-1) != 0.0
    return [(j, rows[keep], cols[keep]) for (j, rows, cols), keep in
            zip(out, (mask, ~mask) if t.A[i] >= 0 else (~mask,))]


def _same(t, i):
    return [_diagonal(t, i, int(t.A[i]))]


def _gather(t, i):
    src = t.gather_sources(i)
    return [(int(t.A[i]), np.arange(src.size), src)]


def _index(t, i):
    n = t.size(i)
    return [(int(t.A[i]), np.arange(n), np.asarray(t.index_sources(i), np.int64))]


def _reduce(t, i):
    o = t.reduce_targets(i)
    return [(int(t.A[i]), o, np.arange(o.size))]


def _matmul(t, i):
    nb, M, K, N, _, ty = t.product(i)
    a, b = int(t.A[i]), int(t.B[i])
    bi, m, n, k = np.ix_(np.arange(nb), np.arange(M), np.arange(N), np.arange(K))
    rows = np.broadcast_to((bi * M + m) * N + n, (nb, M, N, K)).ravel()
    xb = bi if t.size(a) == nb * M * K else 0 * bi           # (a batch broadcast)
    yb = bi if t.size(b) == nb * K * N else 0 * bi
    x_at = (xb * M + m) * K + k
    y_at = (yb * N + n) * K + k if ty else (yb * K + k) * N + n
    full = (nb, M, N, K)
    return [(a, rows, np.broadcast_to(x_at, full).ravel()),
            (b, rows, np.broadcast_to(y_at, full).ravel())]


def _cat(t, i):
    outer, pieces = t.cat_pieces(i)
    total = sum(inner for _, inner in pieces)
    out, pos = [], 0
    for buf, inner in pieces:
        o, q = np.ix_(np.arange(outer), np.arange(inner))
        out.append((buf, (o * total + pos + q).ravel(), (o * inner + q).ravel()))
        pos += inner
    return out


def _softmax(t, i):
    """Each output element reads its whole row (logsumexp: one output element per row)."""
    outer, n, inner = t.softmax_dims(i)
    if BY_CODE[int(t.OP[i])].name == "logsumexp":
        o, s, q = np.ix_(np.arange(outer), np.arange(inner), np.arange(n))
        full = (outer, inner, n)
        return [(int(t.A[i]), np.broadcast_to(o * inner + s, full).ravel(),
                 ((o * n + q) * inner + s).ravel())]
    o, r, s, q = np.ix_(np.arange(outer), np.arange(n), np.arange(inner), np.arange(n))
    full = (outer, n, inner, n)
    rows = np.broadcast_to((o * n + r) * inner + s, full).ravel()
    return [(int(t.A[i]), rows, np.broadcast_to((o * n + q) * inner + s, full).ravel())]


def _broadcast(t, i):
    shape, op = t.shape(i), EW_OF[int(t.OP[i])]
    out = []
    for j, rule in ((int(t.A[i]), op.gx), (int(t.B[i]), op.gy)):
        if j >= 0 and not _vanishes(rule):
            at = np.arange(t.size(j)).reshape(t.shape(j))
            out.append((j, np.arange(t.size(i)), np.broadcast_to(at, shape).ravel()))
    return out


def _none(t, i):
    return []


def _host(t, i):
    raise NotImplementedError(
        "sparse=True: the function calls a custom autograd.Function, whose Jacobian "
        "pattern tapegrad cannot read from the tape; use the dense jacobian")


LOCAL = {"ew": _elementwise, "where": _selected, "gather": _gather, "reshape": _same,
         "index": _index, "reduce": _reduce, "matmul": _matmul, "cat": _cat,
         "softmax": _softmax, "broadcast": _broadcast, "compare": _none, "stop": _none,
         "host": _host, "source": _none}


def reads(t, i):
    """Which elements of its inputs entry i reads, as (input, rows, cols): the pattern
    rules, but an elementwise op reads its inputs whatever its derivative (sign reads
    x).  (Where NaNs come from: ``nan_trace``.)"""
    if BY_CODE[int(t.OP[i])].kind == "ew":
        return [_diagonal(t, i, j) for j in (int(t.A[i]), int(t.B[i])) if j >= 0]
    return LOCAL[BY_CODE[int(t.OP[i])].kind](t, i)


def pattern(t, outs, ins):
    """Which element of the buffers ``outs`` (flattened, concatenated) depends on which
    element of the buffers ``ins``: a boolean SciPy CSR array.  Each buffer's rows are
    kept as (indptr, indices) arrays, composed entry by entry (``_compose``)."""
    sp = scipy_sparse()
    t.flush()
    n_in = sum(t.size(e) for e in ins)
    deps, pos = {}, 0
    for e in ins:
        s = t.size(e)
        deps[e] = (np.arange(s + 1), np.arange(pos, pos + s))
        pos += s
    lo, hi = min(ins), max(outs)
    for i in range(lo, hi + 1):
        if i not in deps:
            parts = [(rows, cols, deps[j]) for j, rows, cols in
                     LOCAL[BY_CODE[int(t.OP[i])].kind](t, i) if j in deps]
            if parts:
                deps[i] = _compose(t.size(i), parts)
    ptrs, idx, at = [np.zeros(1, np.int64)], [], 0
    for e in outs:
        ptr, ind = deps.get(e) or (np.zeros(t.size(e) + 1, np.int64), np.zeros(0, np.int64))
        ptrs.append(ptr[1:] + at)
        idx.append(ind)
        at += ind.size
    indptr, indices = np.concatenate(ptrs), np.concatenate(idx)
    return sp.csr_array((np.ones(indices.size, bool), indices, indptr),
                        shape=(indptr.size - 1, n_in))


def _compose(n, parts):
    """Rows of a buffer of n elements whose element ``rows[k]`` reads element ``cols[k]``
    of an input with rows (indptr, indices), for each (rows, cols, (indptr, indices)) of
    ``parts``: the union of those rows, sorted, as (indptr, indices)
    (``kernels.pattern.compose`` over the inputs' rows stacked)."""
    if len(parts) == 1:
        rows, cols, (p, ix) = parts[0]
        if rows.size == n == p.size - 1 and (rows == cols).all() and \
                (rows == np.arange(n)).all():
            return p, ix                         # element k reads element k: the same rows
    ptrs, ixs, L_cols, base, nnz = [np.zeros(1, np.int64)], [], [], 0, 0
    for rows, cols, (p, ix) in parts:
        ptrs.append(p[1:] + nnz)
        ixs.append(ix)
        L_cols.append(cols + base)
        base, nnz = base + p.size - 1, nnz + ix.size
    rows, cols, ptr, ix = (np.concatenate(a).astype(np.int64, copy=False) for a in
                           ([r for r, _, _ in parts], L_cols, ptrs, ixs))
    return kpattern.compose(n, rows, cols, ptr, ix)


# -- colorings, compressed sweeps and recovery ----------------------------------------------
def _fewest(color, order_by, bound, *graph):
    """The greedy coloring with fewer colors of two vertex orders: as numbered (a
    stencil's natural order), and largest degree first; the first alone when it needs
    no more than ``bound`` colors (a lower bound: no coloring needs fewer)."""
    n = graph[0].size - 1
    a = color(np.arange(n, dtype=np.int64), *graph)
    if a.max(initial=-1) + 1 <= bound:
        return a
    b = color(np.argsort(-order_by, kind="stable").astype(np.int64), *graph)
    return a if a.max(initial=-1) <= b.max(initial=-1) else b


def _most_per_row(P):
    return int(np.diff(P.indptr).max(initial=0))


def column_colors(P, at_least=None):
    """A coloring of P's columns in which columns sharing a row differ (the columns of
    a row all differ: no such coloring has fewer colors than the longest row).  Above
    ``at_least`` colors, None: the caller has a coloring that good."""
    if at_least is not None and _most_per_row(P) > at_least:
        return None
    C = P.tocsc()
    return _fewest(coloring.columns, np.diff(C.indptr), _most_per_row(P),
                   C.indptr.astype(np.int64), C.indices.astype(np.int64),
                   P.indptr.astype(np.int64), P.indices.astype(np.int64))


def star_colors(P):
    """A star coloring of the symmetric pattern P."""
    return _fewest(coloring.star, np.diff(P.indptr), 1, P.indptr.astype(np.int64),
                   P.indices.astype(np.int64))


class Plan:
    """The pattern of a Jacobian (or a Hessian) and how its sweeps are seeded: ``mode``
    "forward" (``color`` per input element), "reverse" (per output element) or
    "symmetric" (a star coloring of the inputs, forward-over-reverse)."""

    def __init__(self, P, symmetric=False):
        self.P = P
        if symmetric:
            self.mode, self.color = "symmetric", star_colors(P)
            return
        cols = column_colors(P)
        used = int(cols.max()) + 1 if cols.size else 0
        # rows are colored only where that could take fewer sweeps than the columns
        rows = column_colors(P.T.tocsr(), used - 1) if used > 1 and P.shape[0] else None
        forward = rows is None or rows.size == 0 or cols.max() <= rows.max()
        self.mode, self.color = ("forward", cols) if forward else ("reverse", rows)

    @property
    def colors(self):
        """How many sweeps one Jacobian takes."""
        return int(self.color.max()) + 1 if self.color.size else 0

    def evaluate(self, t, outs, ins):
        """The Jacobian of buffers ``outs`` w.r.t. buffers ``ins`` of tape t, with this
        plan's pattern: a SciPy CSR array."""
        sp = scipy_sparse()
        P, color = self.P, self.color
        rows = np.repeat(np.arange(P.shape[0]), np.diff(P.indptr))
        cols = P.indices
        if self.mode == "reverse":
            B = sweeps.jacobian_rows(t, outs, ins, color)
            if B is None:
                raise RuntimeError("sparse=True: a reverse sweep of this recording needs "
                                   "Python (a hook); use the dense jacobian")
            values = B[color[rows], cols]
        else:
            B = sweeps.jacobian_columns(t, ins, outs, color)
            values = B[rows, color[cols]]
            if self.mode == "symmetric":
                values = _symmetric(B, rows, cols, color, values)
        return sp.csr_array((values, P.indices.copy(), P.indptr.copy()), shape=P.shape)


def _symmetric(B, rows, cols, color, direct):
    """Star-colored recovery: (i, j) is B[i, color j] when i has no other neighbor of
    j's color, else B[j, color i] (the star coloring makes one of the two hold)."""
    p = B.shape[1]
    off = rows != cols
    key = rows[off] * p + color[cols[off]]
    alone = np.bincount(key, minlength=B.shape[0] * p)[rows * p + color[cols]] <= 1
    return np.where(alone | ~off, direct, B[cols, color[rows]])
