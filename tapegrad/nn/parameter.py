"""``nn.Parameter``: a leaf tensor that a Module registers as one of its parameters.

tapegrad's hot paths test ``x.__class__ is Tensor``, so a Parameter is not a subclass
but a plain Tensor with the ``_is_param`` mark: ``Parameter(data)`` returns that Tensor,
and ``isinstance(x, Parameter)`` reads the mark.  Like PyTorch's, it shares ``data``'s
values, requires grad by default and prints as "Parameter containing:".
"""
from ..tensor import Tensor, _leaf


class _ParameterMeta(type):
    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj._is_param


class Parameter(metaclass=_ParameterMeta):
    def __new__(cls, data=None, requires_grad=True):
        if data is None:
            data = Tensor(())
        p = _leaf(data._d, False, data._inference)
        p.requires_grad_(requires_grad)
        p._is_param = True
        return p
