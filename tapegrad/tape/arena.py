"""The value arenas and column sets of tapes: grown by doubling, pooled for reuse (fresh
memory costs a page fault per 4 KiB, more than the ops that fill it), never reused while
a tensor still views one.

Pooled arenas go back to the system once the pools sit unused for ``IDLE_S`` seconds, so
memory comes back after ``del`` as it does in PyTorch, and a loop that keeps recording
keeps its arenas.  A daemon thread looks every ``_POLL_S`` (``release_idle``;
``release_pools`` empties them at once).  It is started by ``watch`` from ordinary code
(a tape growing, a backward handing its adjoints back), never from ``__del__``: a thread
started during garbage collection or interpreter shutdown can hang.  ``touch``, which
``__del__`` does call, only stamps the clock.  Other pools of large arrays (the
engine's adjoint arenas) register with ``on_release`` and go with them.  Every pool
operation holds ``_LOCK`` (reentrant: a ``__del__`` may run inside one)."""
import os
import sys
import threading
import time

import numpy as np

_pool = []                   # value arenas of released tapes, for reuse
_POOL_BYTES = 1 << 30        # ... at most this much of them (a 50-op chain on 10^6 elements
                             # spans 6 tapes of 128 MB: fresh memory faults 2.5 us per 4 KiB)
_col_pool = []               # column sets of dead tapes, for reuse
_LARGE = 1 << 16             # values past which a growing arena takes the largest pooled one
                             # (the 108-op chain over 200,000 values: 4 tapes a run, a
                             # first-fit arena was outgrown and copied, 16 ms of its 110)
IDLE_S = 1.0                 # pools unused this long are emptied
_POLL_S = 0.25               # by a thread that looks this often
_LOCK = threading.RLock()
_idle = {"last": 0.0, "held": False, "thread": None}
_releasers = []              # fn(): empty another pool (registered by layers above)


def on_release(fn):
    """Call ``fn()`` whenever the pools are emptied (it empties a pool of its own)."""
    _releasers.append(fn)


def touch():
    """A pool was just used (filled or taken from): the idle clock starts again."""
    _idle["last"] = time.monotonic()
    _idle["held"] = True


def watch():
    """Touch, and start the thread that empties idle pools if it is not running."""
    touch()
    if _idle["thread"] is None and not sys.is_finalizing():
        thread = threading.Thread(target=_watcher, name="tapegrad-pools", daemon=True)
        _idle["thread"] = thread
        try:
            thread.start()
        except RuntimeError:     # (at exit, Python 3.12 and later refuse new threads:
            pass                 # the pools then go with the process)


def _watcher():
    while True:
        time.sleep(_POLL_S)
        release_idle()


def release_idle(now=None):
    """Empty the pools if they hold something and sat unused for ``IDLE_S`` (``now``:
    the monotonic clock's reading).  Returns whether it emptied them."""
    with _LOCK:
        if not _idle["held"] or (time.monotonic() if now is None else now) - _idle["last"] < IDLE_S:
            return False
        release_pools()
        return True


def release_pools():
    """Give every pooled arena back to the system now."""
    with _LOCK:
        _idle["held"] = False
        _pool.clear()
        for fn in _releasers:
            fn()


def _after_fork():
    """A child has no watcher thread (it starts one at its next use), and the lock may
    have been held by a thread the child does not have."""
    global _LOCK
    _LOCK = threading.RLock()
    _idle["thread"] = None


os.register_at_fork(after_in_child=_after_fork)


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
    if V.shape[0] >= 256 and V.flags.writeable and not _viewed(V, 2):
        with _LOCK:
            if len(_pool) < 16 and V.nbytes + sum(a.nbytes for a in _pool) <= _POOL_BYTES:
                _pool.append(V)
                touch()


def small_arena(capacity):
    """A value arena for a new tape: a pooled one of at most ``_LARGE`` values (a loop's
    next tape records over the last one's memory), else a fresh one.  A large pooled
    arena is taken only by a tape that grows into it: an empty tape holding it would
    keep it resident for good (480 MB after a 10^7-element backward)."""
    with _LOCK:
        for k in range(len(_pool) - 1, -1, -1):
            if capacity <= _pool[k].shape[0] <= _LARGE:
                touch()
                return _pool.pop(k)
    return np.empty(capacity, np.float64)


def _grow(arr, need, pool=(), used=None):
    """``arr`` grown by doubling to hold at least ``need`` items (its first ``used``,
    default all, kept), into a pooled array if one is large enough.  A large arena
    grows to twice what it needs: each growth copies all of it, and pages not yet
    written cost nothing (a 50-op chain over 10**7 values grew 3 times per pass)."""
    if need <= arr.shape[0]:
        return arr
    cap = max(need, 2 * arr.shape[0], 2 * need if need >= _LARGE else 0)
    new = None
    with _LOCK:
        fits = [k for k, a in enumerate(pool) if a.shape[0] >= cap]
        if fits and need >= _LARGE:      # a large tape takes the largest: it will grow again
            fits.sort(key=lambda k: -pool[k].shape[0])
        if fits:
            new = pool.pop(fits[0])
    if new is None:
        new = np.empty(cap, arr.dtype)
    if cap >= 256 and pool is _pool:       # (it may be pooled when its tape dies)
        watch()
    used = arr.shape[0] if used is None else used
    new[:used] = arr[:used]
    return new
