"""Anomaly mode: find the op whose backward produced a NaN, and where it was recorded.

While anomaly mode is on, every recorded entry notes the user's source line (an
interned id per entry; nothing is recorded when it is off), and the compiled sweep
checks the adjoints each entry produces for NaN.
"""
import functools

import numpy as np

from .. import tape as tp
from .graph import _inputs

_STATE = {"on": False, "check_nan": True}


def is_anomaly_enabled():
    return _STATE["on"]


def is_anomaly_check_nan_enabled():
    return _STATE["check_nan"]


def _set(on, check_nan):
    _STATE["on"], _STATE["check_nan"] = bool(on), bool(check_nan)
    tp.record_locations(bool(on))


class set_detect_anomaly:
    """Turn anomaly mode on or off (a plain call, or a context manager)."""

    def __init__(self, mode, check_nan=True):
        self._prev = (_STATE["on"], _STATE["check_nan"])
        _set(mode, check_nan)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False


class detect_anomaly:
    """Context manager and decorator that turns anomaly mode on."""

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = (_STATE["on"], _STATE["check_nan"])
        _set(True, self.check_nan)
        return self

    def __exit__(self, *exc):
        _set(*self._prev)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with detect_anomaly(self.check_nan):
                return fn(*args, **kwargs)
        return wrapped


def checking_nan():
    return _STATE["on"] and _STATE["check_nan"]


def nan_in_adjoints(t, i, G):
    """Position of the first input of entry i whose adjoint holds a NaN, or None (a
    constant's adjoint is no gradient, as PyTorch computes none: not looked at)."""
    for k, b in enumerate(b for b in _inputs(t, i) if b >= 0):
        o = int(t.OFF[b])
        if t.OP[b] != tp.CONST and np.isnan(G[o:o + t.size(b)]).any():
            return k
    return None


def nan_error(t, i, k, name):
    """PyTorch's message for input k of entry i, with the line that recorded it."""
    msg = f"Function '{name}' returned nan values in its {k}th output."
    loc = t.locs.get(i)
    if loc is not None:
        filename, line = tp.LOCATIONS[loc]
        msg += f" The op was recorded at {filename}:{line}."
    return RuntimeError(msg)
