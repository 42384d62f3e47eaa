"""Sparsity patterns composed entry by entry (``autograd.sparse.pattern``).

A buffer's pattern is its rows as CSR arrays (``indptr``, ``indices``): which input
elements each of its elements depends on.  An entry whose element ``rows[k]`` reads
element ``cols[k]`` of its inputs (their rows stacked) depends on the union of those
rows.  Nothing here raises; the caller passes indices within the arrays it passes.
"""
import numpy as np
from numba import njit

_JIT = dict(cache=True)


@njit(**_JIT)
def compose(n, rows, cols, ptr, ix):
    """The rows of an entry of ``n`` elements, element ``rows[k]`` reading row
    ``cols[k]`` of the stacked input rows (``ptr``, ``ix``): for each element the
    union of the rows it reads, sorted, as (indptr, indices)."""
    count = np.zeros(n + 1, np.int64)
    for k in range(rows.size):
        c = cols[k]
        count[rows[k] + 1] += ptr[c + 1] - ptr[c]
    for r in range(n):
        count[r + 1] += count[r]
    buf = np.empty(count[n], np.int64)
    fill = count[:n].copy()
    for k in range(rows.size):
        r, c = rows[k], cols[k]
        at = fill[r]
        for q in range(ptr[c], ptr[c + 1]):
            buf[at] = ix[q]
            at += 1
        fill[r] = at
    indptr = np.zeros(n + 1, np.int64)
    m = 0
    for r in range(n):
        a, b = count[r], count[r + 1]
        if b - a > 16:
            buf[a:b].sort()
        else:                          # a few: insertion sort (a view and a call per
            for q in range(a + 1, b):  # row cost more)
                v = buf[q]
                j = q - 1
                while j >= a and buf[j] > v:
                    buf[j + 1] = buf[j]
                    j -= 1
                buf[j + 1] = v
        last = -1                      # (indices are >= 0)
        for q in range(a, b):          # in place: m <= q
            v = buf[q]
            if v != last:
                buf[m] = v
                m += 1
                last = v
        indptr[r + 1] = m
    return indptr, buf[:m].copy()
