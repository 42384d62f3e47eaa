"""The division family beyond its op table entries (``trunc``, ``frac``, ``fmod``,
``remainder``, ``floor_divide``): ``div`` / ``divide`` with PyTorch's ``rounding_mode``,
and the ops whose derivative PyTorch does not implement,
``floor_divide`` (``//``) and ``remainder`` of a Python number by a tensor: their result
requires grad, and a backward that reaches it raises PyTorch's error."""
import numpy as np

from .autograd.function import Function
from .composite import composite
from .elementwise import FUNCTIONS, _integer, refuse_integer_division, result_dtype
from .grad_mode import STATE, no_grad
from .inplace import _adopt, _check, check_broadcast
from .tensor import Tensor, _leaf, _norm, requires_grad
from .tracing import freeze

_div, _div_trunc, _floor_divide, _remainder = (
    FUNCTIONS[n] for n in ("div", "div_trunc", "floor_divide", "remainder"))
_PLAIN = object()        # rounding_mode not given (DivBackward0; given, None is DivBackward2)


class NoDerivative(Function):
    """The Node of an op that PyTorch computes without a derivative:
    ``NoDerivative.apply(value, name, *inputs)`` is ``value``, and a backward that reaches
    it raises PyTorch's error naming ATen op ``name``."""

    _node_name = "torch::autograd::NotImplemented"

    @staticmethod
    def forward(ctx, value, name, *inputs):
        ctx.name = name
        return value

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(f"derivative for aten::{ctx.name} is not implemented")


def _underived(name, compute, *operands):
    """``compute()``'s value; a float result of operands that require grad (in grad mode)
    is one whose gradient is PyTorch's error (``name``: its ATen op)."""
    if not (STATE.grad and requires_grad(*operands)):
        return compute()
    with no_grad():
        value = compute()
    if not value.dtype.is_floating_point:
        return value
    return NoDerivative.apply(value, name, *[v for v in operands if isinstance(v, Tensor)])


def floor_divide(input, other):
    """``input // other``: PyTorch's floor division (its derivative is not implemented)."""
    return _underived("floor_divide", lambda: _floor_divide(input, other), input, other)


def floor_divide_(self, other):
    """``self //= other`` (PyTorch's floor_divide_, also without a derivative)."""
    _check(self)
    check_broadcast(self, other)
    return _adopt(self, lambda: _underived("floor_divide_", lambda: _floor_divide(self, other),
                                           self, other))


def rfloordiv(self, other):
    return floor_divide(other, self)


def remainder(input, other):
    """``input % other`` with the sign of ``other``; a Python number ``input`` has no
    derivative in PyTorch (RemainderBackward0 and 1 are those of a tensor ``input``)."""
    if isinstance(input, Tensor):
        return _remainder(input, other)
    return _underived("remainder", lambda: _remainder(input, other), input, other)


def rmod(self, other):
    return remainder(other, self)


def _trunc_divide(input, other):
    """``div(input, other, rounding_mode='trunc')``: integers divided toward zero; floats
    trunc(input / other), the table's div_trunc, with PyTorch's zero gradient (DivBackward2)."""
    rd = result_dtype(input, other)
    if rd.is_floating_point:
        return _div_trunc(input, other)
    refuse_integer_division("div_trunc_cpu", (input, other), rd)
    x, y = (_integer(v, rd.np) for v in (input, other))
    freeze(*[v for v in (input, other) if isinstance(v, Tensor)])
    with np.errstate(over="ignore"):
        q = np.floor_divide(x, y)
        q = q + ((np.remainder(x, y) != 0) & ((x < 0) != (y < 0)))
    return _leaf(_norm(np.asarray(q, rd.np)))


def div(input, other, *, rounding_mode=_PLAIN):
    """``input / other``, or rounded toward zero (``'trunc'``) or down (``'floor'``), as
    PyTorch's ``div``; the rounded quotients have a zero gradient."""
    if rounding_mode is _PLAIN:
        return _div(input, other)
    if rounding_mode is None:
        return composite("DivBackward2", lambda: _div(input, other), input, other)
    if rounding_mode == "floor":
        return _floor_divide(input, other)
    if rounding_mode == "trunc":
        return _trunc_divide(input, other)
    raise RuntimeError(f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but "
                       f"found '{rounding_mode}'")
