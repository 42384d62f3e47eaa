"""Tape optimisation before replay: common subexpressions, constant folding, dead code.

One pass in entry order merges entries that repeat an earlier one exactly (same op,
inputs, constants and metadata) and turns entries whose inputs are all constants into
constants (their recorded values stand); then a backward pass keeps only what the
outputs, the recorded gradient and the guards depend on.  The result is the
recording's ``schedule`` (the entries the forward sweep recomputes); the reverse sweep
never reaches the others.  ``stats`` reports the entry counts before and after.
"""
import numpy as np

from ..ops.table import CODE, kind_range
from ..tape import layout_codec as codec

_SOURCES = kind_range("source")
_HOST = kind_range("host")
_CAT = kind_range("cat")
_WHERE = CODE["where"]
_CONST = CODE["const"]


def _meta_lengths(r):
    """Length of each array entry's metadata in IAUX (0 for scalars)."""
    lengths = np.zeros(r.n, np.int64)
    arr = np.flatnonzero(r.META >= 0)
    if arr.size:
        order = arr[np.argsort(r.META[arr], kind="stable")]
        starts = r.META[order]
        lengths[order] = np.diff(np.append(starts, len(r.IAUX)))
    return lengths


def _buffer_refs(r, i):
    """Positions in IAUX that hold buffer indices of entry i (cat inputs, where's
    condition)."""
    op = r.OP[i]
    if r.META[i] < 0:
        return []
    e = int(codec.extras_at(r.META, r.IAUX, i))
    if op == _WHERE:
        return [e]
    if _CAT[0] <= op <= _CAT[1]:
        return [codec.cat_buffer_at(e, j) for j in range(codec.cat_dims(r.IAUX, e)[1])]
    if _HOST[0] <= op <= _HOST[1]:
        return [codec.function_input_at(e, j) for j in range(codec.function_inputs(r.IAUX, e))]
    return []


def _inputs(r, i):
    return [j for j in (r.A[i], r.B[i]) if j >= 0] + [int(r.IAUX[p]) for p in _buffer_refs(r, i)]


def optimize(r):
    before = int(np.sum((r.OP < _SOURCES[0]) | (r.OP > _SOURCES[1])))
    mlen = _meta_lengths(r)
    rep = np.arange(r.n)
    seen = {}
    merged = folded = 0
    for i in range(r.n):
        op = int(r.OP[i])
        if _SOURCES[0] <= op <= _SOURCES[1]:
            continue
        if r.A[i] >= 0:
            r.A[i] = rep[r.A[i]]
        if r.B[i] >= 0:
            r.B[i] = rep[r.B[i]]
        for p in _buffer_refs(r, i):
            r.IAUX[p] = rep[r.IAUX[p]]
        if _HOST[0] <= op <= _HOST[1]:
            continue
        ins = _inputs(r, i)
        if ins and all(r.OP[j] == _CONST for j in ins):
            r.OP[i] = _CONST
            folded += 1
            continue
        m = r.META[i]
        key = (op, int(r.A[i]), int(r.B[i]), float(r.C[i]), float(r.C2[i]),
               tuple(r.IAUX[m:m + mlen[i]].tolist()) if m >= 0 else ())
        first = seen.setdefault(key, i)
        if first != i:
            rep[i] = first
            merged += 1
    r.outs = [int(rep[e]) for e in r.outs]
    if r.grads is not None:
        r.grads = [int(rep[e]) for e in r.grads]
    r.guard_list = [(k, int(rep[e]), _remap_data(k, d, rep), loc) for k, e, d, loc in r.guard_list]
    r._pack_guards()
    needed = np.zeros(r.n, bool)
    needed[r.outs + (r.grads or []) + [e for _, e, _, _ in r.guard_list]] = True
    for k, _, d, _ in r.guard_list:
        if k >= 2:                       # argmax / argmin: the input they scan
            needed[int(d[0])] = True
    for i in range(r.n - 1, -1, -1):
        if needed[i]:
            for j in _inputs(r, i):
                needed[j] = True
    is_source = (r.OP >= _SOURCES[0]) & (r.OP <= _SOURCES[1])
    r.schedule = np.flatnonzero(needed & ~is_source).astype(np.int64)
    r.stats = {"entries": before, "after": int(r.schedule.size), "merged": merged,
               "folded": folded, "dead": before - int(r.schedule.size) - merged - folded}
    return r


def _remap_data(kind, data, rep):
    if kind >= 2:
        return (float(rep[int(data[0])]),) + tuple(data[1:])
    return data


__all__ = ["optimize"]
