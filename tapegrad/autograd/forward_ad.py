"""``tapegrad.autograd.forward_ad``: forward-mode AD with PyTorch's dual-tensor API.

PyTorch carries a tangent along with every op.  Here ops record onto the tape as
always, and ``unpack_dual`` computes the tangent it is asked for with one compiled
tangent sweep (``kernels.tangent``) from the dual tensors of the current level to that
tensor: tangents nobody unpacks cost nothing.

Differences from PyTorch: for its ops to be recorded, a dual tensor (and what is
computed from it) reads ``requires_grad=True`` even when its primal did not; and under
``no_grad`` nothing is recorded, so the tangents of ops there (which PyTorch keeps) are
lost: ``make_dual`` there, and ``unpack_dual`` of a value computed there inside a dual
level (or from one), raise ``NotImplementedError`` rather than answer without them.
"""
import weakref
from collections import namedtuple

import numpy as np

from ..grad_mode import DUAL_LEVELS as _levels   # per level: id(dual) -> (weakref, tangent)
from ..grad_mode import STATE
from ..tensor import Tensor, _leaf
from . import sweeps

UnpackedDualTensor = namedtuple("UnpackedDualTensor", ["primal", "tangent"])
NO_GRAD = ("forward-mode AD under no_grad is not supported by tapegrad: it computes tangents "
           "from the tape, which records nothing under no_grad, so {what} has lost its "
           "tangent (PyTorch keeps propagating tangents there). Compute it with grad mode "
           "enabled inside the dual level; a value that does not depend on a dual tensor can "
           "be made outside the dual level or outside no_grad.")


def enter_dual_level():
    _levels.append({})
    return len(_levels) - 1


def exit_dual_level(*, level=None):
    if not _levels:
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that "
                           "was created. This is not supported.")
    _levels.pop()


class dual_level:
    """Context manager: dual tensors made inside have tangents until it exits."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, *exc):
        exit_dual_level()
        return False


def make_dual(tensor, tangent, *, level=None):
    """A tensor with ``tensor``'s value and ``tangent`` as its forward gradient."""
    if not _levels:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, "
                           "make sure to enter_dual_level() first.")
    if not STATE.grad and not STATE.inference:
        raise NotImplementedError(NO_GRAD.format(what="a dual tensor made there"))
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than "
                           "that of the original Tensor, this is not supported. Tensor is of "
                           f"size {list(tensor.shape)} while the given forward gradient is of "
                           f"size {list(tangent.shape)}.")
    dual = tensor.view_as(tensor) if tensor.requires_grad else _leaf(tensor._d, rg=True)
    _levels[-1][id(dual)] = (weakref.ref(dual), tangent)
    return dual


def unpack_dual(tensor, *, level=None):
    """``(primal, tangent)``; the tangent is None where no dual tensor reaches ``tensor``."""
    return UnpackedDualTensor(tensor, _tangent_of(tensor) if _levels else None)


def _own(x):
    entry = _levels[-1].get(id(x))
    if entry is not None and entry[0]() is x:
        return entry[1]
    return None


def _tangent_of(x):
    own = _own(x)
    if isinstance(x, Tensor) and x.__dict__ and "_no_grad_in_dual" in x.__dict__:
        raise NotImplementedError(NO_GRAD.format(what="this value computed there"))
    if own is not None or not isinstance(x, Tensor) or x._t is None:
        return own
    t = x._t
    t.flush()
    seeds = {}
    for ref, tan in _levels[-1].values():
        d = ref()
        if d is not None and d._tid == t.uid:
            seeds[d._i] = np.asarray(tan._arr, np.float64)
    lost = {}
    for e, src in t.sources.items():
        if src.__dict__ and "_no_grad_in_dual" in src.__dict__:
            lost[e] = np.zeros(t.size(e))
        elif src._t is not None and src._t is not t:      # a tensor of another tape
            tan = _tangent_of(src)
            if tan is not None:
                seeds[e] = np.asarray(tan._arr, np.float64)
    if lost and sweeps.tangents(t, lost, [x._i])[0] is not None:
        raise NotImplementedError(NO_GRAD.format(what="a value computed there, which this one "
                                                      "depends on,"))
    if not seeds:
        return None
    found, = sweeps.tangents(t, seeds, [x._i])
    if found is None:
        return None
    from ..tensor import from_array
    return from_array(found.astype(x.dtype.np))
