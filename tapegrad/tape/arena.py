"""The value arenas and column sets of tapes: grown by doubling, pooled for reuse (fresh
memory costs a page fault per 4 KiB, more than the ops that fill it), never reused while
a tensor still views one."""
import sys

import numpy as np

_pool = []                   # value arenas of released tapes, for reuse
_POOL_BYTES = 1 << 30        # ... at most this much of them (a 50-op chain on 10^6 elements
                             # spans 6 tapes of 128 MB: fresh memory faults 2.5 us per 4 KiB)
_col_pool = []               # column sets of dead tapes, for reuse
_LARGE = 1 << 16             # values past which a growing arena takes the largest pooled one
                             # (the 108-op chain over 200,000 values: 4 tapes a run, a
                             # first-fit arena was outgrown and copied, 16 ms of its 110)


def _viewed(V, frames=1):
    """Do tensors hold views of arena V (values written by ``append_into``)?  ``frames``:
    the calls V was passed down from its owner's attribute (each holds a reference)."""
    return sys.getrefcount(V) > 2 + frames   # + the attribute and getrefcount's argument


def zeros(n):
    """``n`` read-only zeros: a view of one shared array, grown as needed (what a
    released tape keeps in place of its values; nothing can write it)."""
    if _zeros[0].shape[0] < n:
        z = np.zeros(max(n, 2 * _zeros[0].shape[0]))
        z.flags.writeable = False
        _zeros[0] = z
    return _zeros[0][:n]


_zeros = [np.zeros(0)]


def _pool_arena(V):
    if (V.shape[0] >= 256 and len(_pool) < 16 and V.flags.writeable and not _viewed(V, 2)
            and V.nbytes + sum(a.nbytes for a in _pool) <= _POOL_BYTES):
        _pool.append(V)


def _grow(arr, need, pool=(), used=None):
    """``arr`` grown by doubling to hold at least ``need`` items (its first ``used``,
    default all, kept), into a pooled array if one is large enough.  A large arena
    grows to twice what it needs: each growth copies all of it, and pages not yet
    written cost nothing (a 50-op chain over 10**7 values grew 3 times per pass)."""
    if need <= arr.shape[0]:
        return arr
    cap = max(need, 2 * arr.shape[0], 2 * need if need >= _LARGE else 0)
    fits = [k for k, a in enumerate(pool) if a.shape[0] >= cap]
    if fits and need >= _LARGE:      # a large tape takes the largest: it will grow again
        fits.sort(key=lambda k: -pool[k].shape[0])
    new = pool.pop(fits[0]) if fits else np.empty(cap, arr.dtype)
    used = arr.shape[0] if used is None else used
    new[:used] = arr[:used]
    return new
