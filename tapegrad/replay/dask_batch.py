"""``Traced.grad_batch`` (and ``value_batch``) over a Dask array: the same recording replayed
chunk by chunk on whatever scheduler is active (threads, processes, a cluster).

What travels:
* the recording as plain data, the saved-file format (``serialize.to_bytes``: arrays and
  a small header, checked on arrival as any file is), one key of the graph that every
  chunk's task depends on: a distributed cluster sends it to each worker once;
* the traced function, pickled by Dask as any task's code, so that a worker records a
  point again where the guards fail (its results are the local ones).  A function that
  cannot be pickled stays home, with a warning: then points that no shipped recording
  covers come back with ``ok`` False and NaN values and gradients;
* per chunk, its points, and back its values, ``ok`` flags and gradients (one array of
  ``2 + n`` columns per chunk, split lazily).

Each worker thread loads a recording once (kept by a digest of it and the function) and keeps its compiled
kernels between tasks (and in Numba's cache on disk).  Compiled tapes are not used by
``grad_batch``; a recording saved compiled is compiled again on a worker only from an
object cache of the worker's own CPU (``llvm_tape``).  Dask is imported here only, when a
Dask array is passed: the core never imports it.
"""
import hashlib
import threading
import warnings

import numpy as np

_LOADED = threading.local()   # .tapes: digest -> this thread's Traced of a shipped recording


def is_dask_array(x):
    return type(x).__module__.split(".")[0] == "dask" and hasattr(x, "chunks")


def batch(traced, X, with_grad=True):
    """(values, grads, ok) as Dask arrays, checked before any task is sent (grads None
    without ``with_grad``: ``value_batch``)."""
    try:
        import dask
        import dask.array as da
    except ImportError as e:
        raise ImportError("grad_batch over a Dask array needs dask (pip install "
                          "'tapegrad[dask]')") from e
    if len(traced.shapes) != 1:
        raise NotImplementedError("grad_batch over a Dask array takes one traced argument; "
                                  f"this function traces {len(traced.shapes)}")
    shape = tuple(traced.shapes[0])
    if X.ndim != 1 + len(shape) or tuple(X.shape[1:]) != shape or np.isnan(X.shape[0]):
        raise ValueError(f"traced for points of shape {shape}: a Dask array of shape "
                         f"(points, {', '.join(map(str, shape))}) is needed, not {X.shape}")
    if X.dtype not in (np.float32, np.float64):
        raise TypeError(f"grad_batch takes float32 or float64 points, not {X.dtype}")
    n = int(np.prod(shape, dtype=np.int64))
    points = X.reshape(X.shape[0], n).rechunk({1: -1})
    payload = dask.delayed(_payload(traced), pure=True)
    width = 2 + (n if with_grad else 0)
    parts = [da.from_delayed(dask.delayed(_chunk, pure=True)(block, payload, with_grad),
                             shape=(rows, width), dtype=np.float64)
             for block, rows in zip(points.to_delayed()[:, 0], points.chunks[0])]
    packed = da.concatenate(parts, axis=0)
    values, ok = packed[:, 0], packed[:, 1] != 0
    if not with_grad:
        return values, None, ok
    return values, packed[:, 2:].reshape(X.shape), ok      # (float64, as the local one)


def _payload(traced):
    """(recording bytes, key, function or None, on_guard_failure, optimize); the key
    names the recording and the function together (a worker keeps one per key)."""
    from .serialize import to_bytes
    data = to_bytes(traced)
    fn = traced.fn
    key = hashlib.sha256(data)
    try:
        import cloudpickle
        key.update(cloudpickle.dumps(fn))
    except Exception as e:        # (what cannot travel: points are marked in ok instead)
        warnings.warn(f"the traced function cannot be sent to Dask's workers ({e}); points "
                      "whose guards fail there come back with ok False and NaN",
                      RuntimeWarning, stacklevel=4)
        fn = None
    key.update(f"{fn is None} {traced.on_guard_failure} {traced.optimize}".encode())
    return data, key.hexdigest(), fn, traced.on_guard_failure, traced.optimize


def _traced(payload):
    data, key, fn, on_guard_failure, optimize = payload
    tapes = _LOADED.__dict__.setdefault("tapes", {})     # (a replay's arrays are its own:
    traced = tapes.get(key)                               # one Traced per thread)
    if traced is None:
        from .traced import Traced
        from .serialize import from_bytes
        traced = Traced.__new__(Traced)
        from_bytes(traced, data)
        traced.fn, traced.on_guard_failure, traced.optimize = fn, on_guard_failure, optimize
        tapes[key] = traced
    return traced


def _chunk(block, payload, with_grad):
    """A task: one chunk of points -> its columns (value, guards held, gradient if
    ``with_grad``): the local ``grad_batch``'s (``value_batch``'s), but that a point no
    recording here covers, where there is no function to record it again, is NaN."""
    from .traced import GuardFailure
    traced = _traced(payload)
    points = np.asarray(block, np.float64)
    values, grads, ok = traced._batch(points, with_grad)
    shaped = [points.reshape((-1,) + traced.shapes[0])]
    for p in np.flatnonzero(~ok):
        try:
            if with_grad:
                values[p], grads[p] = traced._point(shaped, p)
            else:
                values[p] = traced._value_at(shaped, p)
        except GuardFailure:
            values[p], grads[p] = np.nan, np.nan
    return np.concatenate([values[:, None], ok[:, None], grads], axis=1)
